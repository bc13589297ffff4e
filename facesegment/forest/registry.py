"""The one table of forest kinds.

Every forest the project knows is one row of :data:`KINDS`: a name (what the
CLI's ``--kind``, the model folder's ``model.json``, the pipeline's config
sections and the report call it), the estimator class, the parameters that
make the variant (``co2-best`` is ``CO2Forest(init="best")``), a display
label and its task (classifier, regressor or density estimator).  The CLI,
the model format, the pipeline and its pages read this table; adding a kind
is one estimator module plus one row here, or a row registered at run time
with :func:`register_kind` (docs/forests.md, "Adding a family").  The table
describes estimators only: which kinds the face pipeline trains and how it
selects their parameters is the pipeline's own design (``pipelines/design.py``).
"""

from dataclasses import dataclass, field
from types import MappingProxyType

#: The rows' tasks.
TASKS = ("classify", "regress", "density")


@dataclass(frozen=True)
class ForestKind:
    """One row of the table of forest kinds.

    Attributes
    ----------
    name : str
        The kind's name everywhere (CLI ``--kind``, ``model.json``, config).
    estimator : type or str
        The estimator class (or the name of one in :mod:`facesegment.forest`);
        the row keeps its name here and the class in :attr:`estimator_class`.
    fixed : mapping
        Estimator parameters that define this kind (fixed for it).
    label : str
        Display name in tables and figures.
    description : str
        One line for ``--help`` and the docs.
    paper : bool
        One of the CO2 paper's three forests (its claim is about these).
    oblique : bool
        Grows oblique (dense-weight) splits: fitted with the windows file's
        normalisation statistics; inference groups pixels by node.
    requires : tuple of str
        Parameters an estimator of this kind sets (not None): ``co2-sparse``
        is a CO2Forest with ``max_nonzero`` set (used by :func:`kind_of`).
    defaults : mapping
        Estimator parameters of this kind when not given (unlike ``fixed``,
        they may be changed: ``co2-sparse`` defaults to k = 32, int8).
    pool : int
        The window layout's pooling (``WindowLayout.pool``): 1 reads the
        window's values, ``s > 1`` the means of its ``s x s`` boxes at stride
        ``s`` (``co2-pooled``; a layout choice, not an estimator parameter).
    task : str
        ``"classify"`` (a classifier: the CLI's ``train``, the pipeline, the
        UCI harness), ``"regress"`` (a regressor) or ``"density"`` (an
        unsupervised density estimator); the last two: library and model
        folders only.
    splitter : type or None
        A split family (a :class:`facesegment.forest.families.Splitter`
        subclass) replacing the estimator's own: the row's estimator class is
        then a subclass of ``estimator`` whose trees are grown by the
        greedy builder with this splitter, configured from the estimator's
        parameters by :meth:`~facesegment.forest.families.Splitter.from_params`
        (adding a split family = one class + one row).
    """

    name: str
    estimator: str
    fixed: dict = field(default_factory=dict)
    label: str = ""
    description: str = ""
    paper: bool = False
    oblique: bool = False
    requires: tuple = ()
    defaults: dict = field(default_factory=dict)
    pool: int = 1
    task: str = "classify"
    splitter: type = None

    def __post_init__(self):
        if isinstance(self.estimator, type):
            object.__setattr__(self, "_class", _with_splitter(self.estimator, self.splitter))
            object.__setattr__(self, "estimator", self.estimator.__name__)
        if self.task not in TASKS:
            raise ValueError(f"kind {self.name!r}: task {self.task!r} is not one of "
                             f"{', '.join(TASKS)}")
        for name in ("fixed", "defaults"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        if not self.label:
            object.__setattr__(self, "label", self.name)

    @property
    def estimator_class(self):
        """The estimator class (a name is looked up in :mod:`facesegment.forest`)."""
        cls = self.__dict__.get("_class")
        if cls is None:
            # lazy: reading a model folder's row must not import every estimator
            import facesegment.forest as forest

            cls = _with_splitter(getattr(forest, self.estimator), self.splitter)
        return cls

    def make(self, **params):
        """An unfitted estimator of this kind: ``fixed`` parameters plus ``params``.

        The row's ``defaults`` are applied first, then ``params``, then ``fixed``.

        Parameters
        ----------
        **params : dict
            Estimator parameters.

        Returns
        -------
        estimator
            An unfitted instance of :attr:`estimator_class`.

        Raises
        ------
        ValueError
            When ``params`` overrides a fixed parameter with another value or
            names a parameter the estimator does not have.
        """
        cls = self.estimator_class
        valid = set(cls().get_params())
        unknown = sorted(set(params) - valid)
        if unknown:
            raise ValueError(f"kind {self.name!r} ({cls.__name__}) has no parameter "
                             f"{', '.join(map(repr, unknown))}; valid: {', '.join(sorted(valid))}")
        for key, val in self.fixed.items():
            if key in params and params[key] != val:
                raise ValueError(f"kind {self.name!r} fixes {key}={val!r}; got {key}="
                                 f"{params[key]!r} (use another kind or drop {key})")
        return cls(**{**self.defaults, **params, **self.fixed})


def _default_splitter(self, params, X, y_enc, sample_weight, **fit_kw):
    """The row's splitter configured from the validated parameters."""
    return self._split_family.from_params(params, X)


#: The estimator classes made for rows with a ``splitter``: (base, splitter) -> class.
_SPLITTER_CLASSES = {}


def _with_splitter(base, splitter):
    """``base`` itself, or (``splitter`` given) its subclass growing its trees with
    ``splitter`` (one class per pair, kept, so ``clone`` and ``kind_of`` see one
    class; named ``<Splitter>_<Base>`` in this module, so it pickles)."""
    if splitter is None:
        return base
    cls = _SPLITTER_CLASSES.get((base, splitter))
    if cls is None:
        name = f"{splitter.__name__}_{base.__name__}"
        cls = type(name, (base,), {
            "__module__": __name__, "__qualname__": name,
            "__doc__": f"{base.__name__} whose trees split with {splitter.__name__}.",
            "_split_family": splitter, "_splitter": _default_splitter})
        _SPLITTER_CLASSES[(base, splitter)] = cls
        globals()[name] = cls
    return cls


#: The rows; :func:`register_kind` appends to it, :func:`unregister_kind` removes.
_ROWS = {k.name: k for k in (
    ForestKind("axis", "AxisAlignedForest",
               label="random forest (axis-aligned)",
               description="random forest: best x[f] <= t among q random features per node",
               paper=True),
    ForestKind("two-probe", "TwoProbeForest",
               label="two-probe forest",
               description="best x[a] - x[b] <= t among n_pairs random feature pairs per node",
               paper=True),
    ForestKind("co2", "CO2Forest", fixed={"init": "axis"},
               label="CO2 forest (paper's univariate init)",
               description="CO2 oblique splits w.x <= t optimised from the best univariate "
                           "split (the paper)",
               paper=True, oblique=True),
    ForestKind("co2-best", "CO2Forest", fixed={"init": "best"},
               label="CO2 + two-probe init (ours)",
               description="CO2 started from the better of the best univariate and the best "
                           "two-probe split (our variant)",
               oblique=True),
    ForestKind("co2-sparse", "CO2Forest", fixed={"init": "best"},
               label="sparse CO2 + two-probe init (ours)",
               description="co2-best with sparse splits of at most k features learned by "
                           "hard thresholding, stored as indices and int8/float16 weights",
               oblique=True, requires=("max_nonzero",),
               defaults={"max_nonzero": 32, "weight_dtype": "int8"}),
    ForestKind("co2-pooled", "CO2Forest", fixed={"init": "best"},
               label="pooled CO2 + two-probe init (ours)",
               description="co2-best over the s x s box means of the window at stride s "
                           "(structured sparsity: s^2 fewer values per split)",
               oblique=True, pool=3),
    ForestKind("extra", "ExtraTreesForest",
               label="extremely randomized trees",
               description="extra-trees: best of q random cuts x[f] <= t (uniform between "
                           "the node's min and max), no bootstrap"),
    ForestKind("ferns", "RandomFernsForest",
               label="random ferns",
               description="random ferns: one random test per level shared by the level, "
                           "regularised leaf posteriors"),
    ForestKind("rotation", "RotationForest",
               label="rotation forest",
               description="rotation forest: trees on per-tree PCA rotations of feature "
                           "subsets (stored as sparse oblique rows of M features)"),
    ForestKind("nongreedy", "NonGreedyForest",
               label="non-greedy trees",
               description="non-greedy oblique trees: every split and leaf of a greedy "
                           "tree optimised jointly by SGD on a surrogate (Norouzi 2015)",
               oblique=True),
    ForestKind("co2-nongreedy", "NonGreedyForest", fixed={"init": "co2"},
               label="CO2, top levels non-greedy (ours)",
               description="CO2 trees whose top refine_depth levels are optimised jointly "
                           "(Norouzi 2015), greedy CO2 below on what each refined leaf receives",
               oblique=True, requires=("refine_depth",), defaults={"refine_depth": 6}),
    ForestKind("density", "DensityForest",
               label="density forest",
               description="density forest: splits minimise the children's Gaussian "
                           "log-determinants; a tree's density is piecewise truncated Gaussian",
               task="density"),
    ForestKind("axis-regressor", "AxisAlignedForestRegressor",
               label="random forest regressor (axis-aligned)",
               description="random forest for regression: best x[f] <= t (squared error) "
                           "among q random features per node, leaves hold the mean",
               task="regress"),
    ForestKind("extra-regressor", "ExtraTreesForestRegressor",
               label="extremely randomized trees regressor",
               description="extra-trees for regression: best of q random cuts (squared "
                           "error), no bootstrap, leaves hold the mean",
               task="regress"),
)}

#: The table: name -> :class:`ForestKind` (read-only; every task: select rows
#: with :func:`kind_names` or the rows' ``task``).
KINDS = MappingProxyType(_ROWS)


def register_kind(kind):
    """Add the row ``kind`` at the end of the table.

    ``make_estimator``, ``facesegment train --kind`` and model folders then
    know it (the face pipeline trains it once
    ``pipelines.design.register_design`` adds it there too);
    :func:`unregister_kind` undoes it.

    Parameters
    ----------
    kind : ForestKind
        The row.

    Returns
    -------
    ForestKind
        ``kind``.

    Raises
    ------
    ValueError
        When the name is taken.
    """
    if kind.name in _ROWS:
        raise ValueError(f"forest kind {kind.name!r} exists already; choose another name")
    _ROWS[kind.name] = kind
    return kind


def unregister_kind(name):
    """Remove the row ``name`` added by :func:`register_kind`.

    A built-in row can be removed too: use with care.

    Parameters
    ----------
    name : str
        The kind's name.

    Raises
    ------
    ValueError
        For an unknown name.
    """
    get_kind(name)
    del _ROWS[name]


def kind_names(task=None):
    """The kinds' names, in table order.

    Parameters
    ----------
    task : str or None, default=None
        Only the kinds of this task (see :data:`TASKS`, e.g. ``"classify"``);
        None: every kind.

    Returns
    -------
    tuple of str
        The names.
    """
    return tuple(k for k, v in KINDS.items() if task is None or v.task == task)


def get_kind(name):
    """The :class:`ForestKind` called ``name``.

    Parameters
    ----------
    name : str
        The kind's name.

    Returns
    -------
    ForestKind
        The row.

    Raises
    ------
    ValueError
        Naming the kinds there are.
    """
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown forest kind {name!r}; kinds: {', '.join(KINDS)}") from None


#: The attribute where :func:`make_estimator` records the kind it was asked for.
KIND_ATTR = "_facesegment_kind"


def make_estimator(name, **params):
    """An unfitted estimator of kind ``name`` (see :meth:`ForestKind.make`).

    The kind is recorded on it (:func:`kind_of` returns it; ``sklearn.clone``
    forgets it, like any fitted state).

    Parameters
    ----------
    name : str
        The kind's name.
    **params : dict
        Estimator parameters.

    Returns
    -------
    estimator
        The unfitted estimator.

    Raises
    ------
    ValueError
        For an unknown kind or parameters the kind refuses.
    """
    kind = get_kind(name)
    est = kind.make(**params)
    setattr(est, KIND_ATTR, kind.name)
    return est


def kind_of(estimator):
    """The registry name of a (fitted or not) estimator, never guessed from its parameters.

    The kind :func:`make_estimator` recorded on it; otherwise its class's own
    row (the first row naming the class, e.g. ``"axis"`` for an
    ``AxisAlignedForest``) when the estimator has that row's fixed and
    required parameters; otherwise None (pass the kind explicitly, e.g.
    ``Model.from_estimator(est, kind="co2-best")``).

    Parameters
    ----------
    estimator : estimator
        A forest estimator.

    Returns
    -------
    str or None
        The kind's name.
    """
    recorded = getattr(estimator, KIND_ATTR, None)
    if recorded in KINDS and KINDS[recorded].estimator_class is type(estimator):
        return recorded
    params = estimator.get_params()
    for kind in KINDS.values():
        if type(estimator) is kind.estimator_class:
            ok = (all(params.get(k) == v for k, v in kind.fixed.items())
                  and all(params.get(k) is not None for k in kind.requires))
            return kind.name if ok else None
    return None


__all__ = ["ForestKind", "KINDS", "TASKS", "KIND_ATTR", "kind_names", "get_kind",
           "make_estimator", "kind_of", "register_kind", "unregister_kind"]
