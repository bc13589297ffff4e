"""The :class:`Model` dataclass: a fitted forest and everything needed to use it.

Defined here, below the files that store it (:mod:`facesegment.modelio._model_files`
reads and writes one model folder given this class; :mod:`facesegment.autocontext.cascade`
loads a cascade's stages with it) and below :func:`facesegment.models.load_model`,
which opens either.  Import it as ``facesegment.modelio.model.Model``.
"""

from dataclasses import dataclass, field

import numpy as np

from ._forest_faces import ForestFaces
from ._model_doc import kinds
from ..layout import DEFAULT_LAYOUT, WindowLayout
from ._model_files import model_from_estimator, save_model


@dataclass(repr=False)
class Model(ForestFaces):
    """A fitted forest with its metadata: a :class:`facesegment.modelio.protocol.FaceModel`.

    Attributes
    ----------
    kind : str
        A kind of :data:`facesegment.forest.registry.KINDS` (e.g. "co2-best").
    params : dict
        The estimator's parameters (JSON-serialisable, defaults resolved).
    arrays : ForestArrays
        The fitted forest (raw-feature splits); ``value`` has one column per class.
    class_names : tuple of str
        One display name per class (the 8 face classes for face models).
    sampling_factors : ndarray float64 (n_classes,)
        Share of each class among the training windows divided by its share
        among eligible pixels; prior reweighting divides probabilities by it
        (all 1 for a model not trained on windows).
    mean, std : ndarray float32 (n_features,)
        Per-feature normalisation statistics of the training data.
    provenance : dict
        Training data, seed, number of windows, etc.
    metrics : dict
        Training time, model size, the selected alpha, evaluation results.
    layout : WindowLayout or None
        The window layout the features come from (None: a tabular model that
        dense inference cannot use).
    classes : ndarray (n_classes,)
        The estimator's ``classes_`` (any dtype); column ``i`` of ``value`` is
        ``classes[i]``.  Default: ``0..n_classes-1``.
    position : facesegment.position.PositionPrior or None
        Per-pixel class frequencies of the training crops, applied with the
        exponent ``rule.beta`` (:mod:`facesegment.position`).
    rule : facesegment.rule.DecisionRule or None
        The decision rule chosen for the model on validation images
        (:func:`facesegment.evaluation.calibrate.choose_rule`), stored as ``model.json``'s
        ``"rule"``; None: none stored (:func:`facesegment.rule.rule_of` then
        reads the choice recorded in ``metrics``, if any).
    leaves : dict or None
        Per-leaf arrays of kinds whose leaves hold more than a class
        distribution (``{name: array}``; the density forest's Gaussians and
        cells, :data:`facesegment.forest.density.LEAF_ARRAY_NAMES`); stored in
        the ``leaves`` group of ``forest.h5``.  Such a kind has one ``value``
        column (the density forest: the node's share of its tree's weight).
    shape_prior : facesegment.faces.shape_prior.ShapePrior or None
        Class frequencies in a canonical face frame, warped onto a face through
        its predicted landmarks and applied with the exponent
        ``metrics["gamma"]`` (:mod:`facesegment.faces.shape_prior`); saved as
        ``shape-prior.npz`` in the model folder.
    folder : Path or None
        The folder the model was loaded from (None: built in memory); its
        ``MODEL_CARD.md`` is the model's ``card``.  Not saved, not compared.
    """

    kind: str
    params: dict
    arrays: object
    class_names: tuple
    sampling_factors: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    provenance: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    layout: WindowLayout = None
    classes: np.ndarray = None
    position: object = None
    rule: object = None
    leaves: dict = None
    shape_prior: object = None
    folder: object = field(default=None, compare=False)

    def __post_init__(self):
        if self.classes is None:
            self.classes = np.arange(self.arrays.n_classes)
        if self.layout is None and self.arrays.n_features == DEFAULT_LAYOUT.n_features:
            self.layout = DEFAULT_LAYOUT

    @property
    def n_features(self):
        return self.arrays.n_features

    # ------------------------------------------- a forest chain of one stage
    @property
    def stages(self):
        """The forests run one after the other: this one (a cascade has several)."""
        return [self]

    @property
    def final(self):
        """The forest that gives the probabilities: this one."""
        return self

    def context(self, image, n_stages=None):
        """The context planes the forest reads besides the image: none (a cascade's
        later stages read the earlier stages' maps).

        Parameters
        ----------
        image : uint8 (H, W, C)
            The image; not read.
        n_stages : int, optional
            Not used (one stage).

        Returns
        -------
        None
        """
        return None

    def save(self, folder):
        """Write the model as the folder ``folder`` (:func:`facesegment.modelio.model.save_model`).

        Parameters
        ----------
        folder : str or Path

        Returns
        -------
        Path
            ``folder``.
        """
        return save_model(self, folder)

    def __repr__(self):
        lay = self.layout
        window = "none" if lay is None else f"{lay.window}x{lay.window}x{lay.channels}"
        rule = "" if self.rule is None else f", rule={self.rule}"
        return (f"Model(kind={self.kind!r}, trees={self.arrays.n_trees}, "
                f"classes={len(self.class_names)}, window={window}{rule})")

    @classmethod
    def from_estimator(cls, estimator, kind=None, windows_meta=None, provenance=None,
                       layout=None):
        """A Model from a fitted forest estimator.

        Parameters
        ----------
        estimator : a fitted forest of :mod:`facesegment.forest`
        kind : str, optional
            Its row in the registry, recorded as given; by default the kind
            the estimator was made as (:func:`facesegment.forest.make_estimator`),
            else its class's own row if it has that row's fixed parameters
            (:func:`facesegment.forest.registry.kind_of`: never a row guessed
            from the parameters).
        windows_meta : facesegment.data.windows.WindowsMeta, optional
            Class names, sampling factors, normalisation, layout and
            provenance of the training windows.  Face class ids absent from
            the windows then get zero columns, so ``arrays.value`` has one
            column per class name.  Without it the model keeps the
            estimator's own classes (any dtype), factors 1 and the
            estimator's normalisation (or 0/1).
        provenance : dict, optional
            Extra provenance (JSON-serialisable) stored in model.json.
        layout : WindowLayout, optional
            The window layout (default: the windows file's, else the paper's
            31x31 RGB layout when the number of features matches, else none).
        """
        return model_from_estimator(cls, estimator, kind, windows_meta, provenance, layout)

    def to_estimator(self):
        """A fitted estimator of the model's kind, ready for ``predict_proba``."""
        kind = kinds()[self.kind]
        cls = kind.estimator_class
        valid = set(cls().get_params())
        est = cls(**{k: v for k, v in self.params.items() if k in valid})
        est.set_params(**dict(kind.fixed))
        if self.leaves is not None:   # a density forest: its own fitted state
            return est._set_fitted(self.arrays, self.leaves)
        est.forest_ = self.arrays
        from sklearn.base import is_regressor

        if not is_regressor(est):
            est.classes_ = np.asarray(self.classes)
            est.n_classes_ = len(self.classes)
        est.n_features_in_ = self.arrays.n_features
        if kind.oblique:
            est.feature_mean_ = np.asarray(self.mean, np.float32)
            est.feature_std_ = np.asarray(self.std, np.float32)
        return est
