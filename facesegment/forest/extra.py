"""Extremely randomized trees (Geurts, Ernst & Wehenkel 2006): :class:`ExtraTreesForest`.

At each node K = ``max_features`` features are drawn among those not constant
on the node, each gets one cut drawn uniformly between the node's minimum and
maximum of that feature, and the cut with the best information gain is kept.
No threshold is optimised, and by default every tree sees every training
sample (``bootstrap=False``): the randomness of the cuts is what
decorrelates the trees.  The split kernel is
:mod:`facesegment.forest._extra_kernels`; the trees are grown breadth first
by :func:`facesegment.forest._grow.grow_tree` (split family
:class:`~facesegment.forest.families.ExtraSplitter`), so the
forest is ordinary axis-aligned :class:`~facesegment.forest._arrays.ForestArrays`
(``x[f] <= t`` nodes): the model format, the CLI and the fast integer dense
kernels serve it unchanged.

Thresholds: for uint8 data an integer cut ``c`` uniform in ``min..max-1``,
stored as ``c + 0.5`` (the midpoint convention of the axis kernels, e.g.
``x[f] <= 100.5``); for float data ``min + u (max - min)`` in float32.  Every
cut separates the node (``min <= t < max``).

Missing values (NaN in float ``X``): the cut lies between the minimum and
maximum of the node's *present* values (a feature whose present values are
constant is not a candidate), and the node's missing values take the side
that gains more.

Parameters
----------
n_estimators : int, default 16
    Number of trees.
max_features : int, float, str, default "sqrt"
    K, the random cuts tried per node: an int, a fraction of p, "sqrt",
    "log2", "all" or "p^E" (as for :class:`AxisAlignedForest`).  Geurts et
    al.'s default for classification is sqrt(p); K = 1 gives totally
    randomized trees, and "all" the strongest selection.
max_depth : int or None, default None
    Maximum depth (root 0); None grows until pure / too small.
min_samples_split : int, default 2
    Nodes with fewer samples become leaves (Geurts' n_min).
min_samples_leaf : int, default 1
    Minimum samples on each side; cuts violating it are drawn but not kept.
max_samples : int, float or None, default None
    Samples per tree (a count, a fraction of the pool, None: the pool).
bootstrap : bool, default False
    False: each tree sees the whole pool (the original algorithm); True:
    each tree draws its samples with replacement.
oob_score : bool or callable, default False
    Out-of-bag estimate (``oob_score_``, ``oob_decision_function_``), as for
    :class:`AxisAlignedForest` (docs/forests-cart.md, "CART options"); needs
    ``bootstrap=True``.
class_weight : None, "balanced", "balanced_subsample" or dict, default None
    Weights per class multiplying ``sample_weight``: draw probabilities, so
    they need ``bootstrap=True`` (extra-trees grow on every row by default).
warm_start : bool, default False
    A larger ``n_estimators`` at the next ``fit`` adds trees, the old ones kept.
random_state, n_jobs, scheduler, verbose
    As for the other forests (one seed per tree up front; trees on local
    threads or a Dask cluster; identical forests whatever ``n_jobs``).

Leaves (and every node) hold the plain class frequencies of their training
samples; ``predict_proba`` is the mean over trees.
"""

from .base import BaseForest
from .families import ExtraSplitter
from .params import (COMMON_CONSTRAINTS, FOREST_OPTIONS_CONSTRAINTS, MaxFeatures,
                     resolve_max_features)


class ExtraTreesForest(BaseForest):
    """Extremely randomized trees: the best of K random cuts ``x[f] <= t`` per node.

    See the module docstring (:mod:`facesegment.forest.extra`) for the
    parameters and the threshold convention.

    Examples
    --------
    >>> import numpy as np
    >>> from facesegment.forest import ExtraTreesForest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(0, 256, size=(400, 20), dtype=np.uint8)
    >>> y = (X[:, 3] > 127).astype(int)
    >>> clf = ExtraTreesForest(n_estimators=8, max_features="all", random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) == 1.0)
    True
    >>> clf.forest_.threshold[clf.forest_.left >= 0][:3] % 1   # integer cuts + 0.5
    array([0.5, 0.5, 0.5], dtype=float32)
    """

    _split_family = ExtraSplitter
    _missing_values = True

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "max_features": MaxFeatures().cli(
            "random cuts tried per node: sqrt, log2, all, p^E, a count or a fraction",
            metavar="Q"),
        **FOREST_OPTIONS_CONSTRAINTS,
    }

    def __init__(self, n_estimators=16, *, max_features="sqrt", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, max_samples=None,
                 bootstrap=False, oob_score=False, class_weight=None, warm_start=False,
                 random_state=None, n_jobs=None, scheduler=None, verbose=0):
        self.n_estimators = n_estimators
        self.oob_score = oob_score
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_samples = max_samples
        self.bootstrap = bootstrap
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.scheduler = scheduler
        self.verbose = verbose



__all__ = ["ExtraTreesForest"]
