"""A trained segmentation model: a forest plus everything needed to use it.

A model is a self-describing folder (never a pickle)::

    models/NAME/
        model.json   kind, parameters, classes, sampling factors (priors),
                     provenance of the training windows, metrics, timings,
                     format version
        forest.h5    the flat forest arrays (see facesegment.forest._arrays)
                     and the normalisation statistics (mean, std)

``load_model`` validates the folder and says what is wrong with one that is not
a model, is truncated, or has another format version.
"""

from dataclasses import dataclass, field

import numpy as np

from .forest._arrays import ForestArrays

MODEL_FORMAT_VERSION = 1
KINDS = ("axis", "two-probe", "co2")


@dataclass
class Model:
    """A fitted forest with its metadata.

    Attributes
    ----------
    kind : {"axis", "two-probe", "co2"}
    params : dict
        The estimator's ``get_params()`` (JSON-serialisable).
    arrays : ForestArrays
        The fitted forest (raw-feature splits).
    class_names : tuple of str
    sampling_factors : ndarray float64 (n_classes,)
        Share of each class among the training windows divided by its share
        among eligible pixels; prior reweighting divides probabilities by it.
    mean, std : ndarray float32 (n_features,)
        Per-feature normalisation statistics of the training windows.
    provenance : dict
        Windows file, its sources, seed, number of windows, etc.
    metrics : dict
        Training time, model size, evaluation results added later.
    """

    kind: str
    params: dict
    arrays: ForestArrays
    class_names: tuple
    sampling_factors: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    provenance: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
