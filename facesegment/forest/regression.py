"""Regression forests (squared error; a leaf predicts the mean of its training targets).

Two scikit-learn regressors (``RegressorMixin, BaseEstimator``) grown by
:func:`facesegment.forest._regression_kernels.regression_nodes`, one
Numba call per tree:

* :class:`AxisAlignedForestRegressor`: Breiman's random forest for
  regression, the best threshold ``x[f] <= t`` among ``max_features`` random
  features per node, each tree on a bootstrap sample (scikit-learn's
  ``RandomForestRegressor``);
* :class:`ExtraTreesForestRegressor`: extremely randomized trees (Geurts et
  al. 2006), one random cut per candidate feature, every tree on all the rows
  (``ExtraTreesRegressor``).

The forest is the classifiers' flat :class:`~facesegment.forest._arrays.ForestArrays`
with one ``value`` column, the node's mean target (float32), and ``n_samples``
the node's training copies; ``predict`` is the mean of the leaves reached
(the classifiers' traversal kernel, so ``max_depth`` and ``n_trees`` work as
for them).  A model folder stores it like a classifier's (one value column
named ``target``).

Parameters (defaults are scikit-learn's regressors')
----------------------------------------------------
n_estimators : int, default 100
max_features : int, float, str or None, default 1.0
    Features scored per node: an int, a fraction of p, "sqrt", "log2",
    "all"/None or "p^E".  scikit-learn's default for regression is all of them.
max_depth : int or None; min_samples_split : int, default 2; min_samples_leaf : int, default 1
    Counted in training copies (a row drawn twice counts twice).
max_samples : int, float or None
    Rows drawn per tree (None: as many as the pool).
bootstrap : bool (True for the random forest, False for extra-trees)
random_state, n_jobs, scheduler, verbose
    As for the classifiers: one seed per tree drawn up front, trees grown on
    ``n_jobs`` local threads or a Dask cluster, identical whatever the
    workers; ``n_jobs`` Numba threads in ``predict``.

``sample_weight`` means what it means for the classifiers
(:meth:`facesegment.forest.base.BaseForest.fit`): with ``bootstrap=True`` a
row's draw probability, with ``bootstrap=False`` an integer number of copies.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..parallel import default_workers, map_tasks
from ._arrays import complete
from ._grow import RowDraw, TreeParams, fit_tree_task, sampling_pool
from ._predict import (apply_kernel, kernel_sparse, kernel_weights, preordered,
                       predict_proba_packed, predict_proba_packed_serial)
from ._regression_kernels import regression_nodes
from .families import Splitter
from .base import (PARALLEL_CHUNK, PARALLEL_MIN_WORK, _CHECK_KW, _check_predict_int,
                   _flatten, numba_threads, predict_threads, seeds_from)
from ._concat import concat_trees
from .params import (COMMON_CONSTRAINTS, InvalidParameterError, MaxFeatures,
                     check_sample_weight, resolve_max_features, resolve_max_samples,
                     validate_params)


#: Largest ``p * m`` (features times a tree's distinct rows) sorted once per tree.
PRESORT_MAX_ENTRIES = 2**23


def use_presort(splitter, p, m, integer):
    """Whether a tree sorts every feature once and keeps the nodes' segments sorted.

    Only for best thresholds (not ``extra``) and ``p m`` at most
    :data:`PRESORT_MAX_ENTRIES`.  Keeping all ``p`` features sorted costs about
    ``p m`` per tree level; sorting the ``q`` drawn ones at each node costs
    ``q m log2 m`` (float) or ``q (m + 256)`` (uint8, a counting sort).  So
    float data presorts when ``p <= q log2(m) / 2`` and uint8 data only when
    every feature is scored (measured on 31 x 31 face windows: ``q = 0.2 p`` is
    3.7x faster without presorting on uint8, 1.2x faster with it on float32,
    ``q = 0.05 p`` 3.3x faster without it on float32).

    Parameters
    ----------
    splitter : RegressionSplitter
        The splitter (``extra`` and ``max_features`` are read).
    p : int
        Number of features.
    m : int
        The tree's distinct rows.
    integer : bool
        Whether X is uint8.

    Returns
    -------
    bool
        Whether to presort.
    """
    if splitter.extra or p * m > PRESORT_MAX_ENTRIES:
        return False
    q = splitter.max_features
    if integer:
        return q >= p
    return p <= q * max(1.0, np.log2(max(m, 2))) / 2


@dataclass(frozen=True, eq=False)
class RegressionSplitter(Splitter):
    """Squared-error splits ``x[f] <= t`` among ``max_features`` random features
    (``extra``: one random cut per feature), leaves holding the mean: the whole
    node loop in one Numba kernel
    (:func:`facesegment.forest._regression_kernels.regression_nodes`) on the
    tree's distinct rows and their copies; the tree's generator draws the
    kernel's seed after the rows."""

    name: ClassVar[str] = "regression"
    max_features: int = 1
    extra: bool = False

    def build_nodes(self, tree, idx):
        """The kernel's tree; the tree's generator draws the kernel's seed.

        The kernel runs on the distinct rows of ``idx`` and their copies.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        idx : int64 ndarray
            The tree's rows (repeated once per draw with bootstrap).

        Returns
        -------
        dict
            The tree's arrays (local node indices; each node's mean as ``value``,
            float32 (n_nodes, 1)) and an empty ``stats``.
        """
        X, y, p = tree.X, tree.y, tree.p
        rows, counts = np.unique(idx, return_counts=True)
        left, right, feature, thr, value, depth, n_samples = regression_nodes(
            X, y, rows.astype(np.int64), counts.astype(np.float64), self.max_features,
            tree.params.max_depth, tree.params.min_samples_split, tree.min_leaf,
            self.extra, X.dtype == np.uint8,
            use_presort(self, p, rows.shape[0], X.dtype == np.uint8),
            int(tree.rng.integers(0, 2**63 - 1)))
        k = left.shape[0]
        none = np.full(k, -1, np.int32)
        return {"left": left, "right": right, "feature": feature, "feature2": none,
                "oblique": none, "threshold": thr, "value": value.astype(np.float32)[:, None],
                "depth": depth, "n_samples": n_samples.astype(np.int32),
                "weights": np.zeros((0, p), np.float32), "stats": {}}


def regression_importances(fa, n_features):
    """Mean decrease in squared error per feature, summing to 1.

    A split's decrease of the sum of squared errors is ``W_l W_r / W (mu_l -
    mu_r)^2`` (``W`` the copies, ``mu`` the means of the children), so the
    stored means and counts give it exactly; each tree's importances are
    normalised to sum 1 and averaged over the trees that split (as
    scikit-learn does).

    Parameters
    ----------
    fa : ForestArrays
        The regression forest (``value[:, 0]``: each node's mean).
    n_features : int
        Number of features.

    Returns
    -------
    float64 ndarray of shape (n_features,)
        The importances (0 everywhere when no tree splits).
    """
    inner = np.flatnonzero(fa.left >= 0)
    imp = np.zeros((fa.n_trees, n_features), dtype=np.float64)
    if inner.size:
        lt, rt = fa.left[inner], fa.right[inner]
        w_l = fa.n_samples[lt].astype(np.float64)
        w_r = fa.n_samples[rt].astype(np.float64)
        mu = fa.value[:, 0].astype(np.float64)
        dec = w_l * w_r / (w_l + w_r) * (mu[lt] - mu[rt]) ** 2
        tree = np.searchsorted(fa.roots, inner, side="right") - 1
        np.add.at(imp, (tree, fa.feature[inner]), dec)
    per_tree = imp.sum(axis=1)
    used = per_tree > 0
    if not used.any():
        return np.zeros(n_features, dtype=np.float64)
    out = (imp[used] / per_tree[used, None]).mean(axis=0)
    return out / out.sum()


class BaseForestRegressor(RegressorMixin, BaseEstimator):
    """Fit/predict of the regression forests; subclasses set ``_extra``
    (random cuts) and their ``__init__`` defaults."""

    _parameter_constraints = {**COMMON_CONSTRAINTS, "max_features": MaxFeatures()}
    _extra = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        return tags

    def __sklearn_is_fitted__(self):
        return hasattr(self, "forest_")

    def _validate_X(self, X, y="no_validation", *, reset):
        X, dtype = _flatten(X)
        if isinstance(y, str):
            return validate_data(self, X, reset=reset, dtype=dtype, **_CHECK_KW)
        return validate_data(self, X, y, reset=reset, dtype=dtype, y_numeric=True,
                             **_CHECK_KW)

    def fit(self, X, y, sample_weight=None):
        """Grow the forest.

        Parameters
        ----------
        X : array (n, p) or (n, ...); uint8 is used as it is, other numbers become float32
        y : array (n,) of numbers (finite)
        sample_weight : array (n,), optional
            As for the classifiers (see the module docstring).

        Returns
        -------
        self
        """
        params = validate_params(self, self.get_params(deep=False))
        X, y = self._validate_X(X, y, reset=True)
        y = np.ascontiguousarray(y, dtype=np.float64)
        n, p = X.shape
        w = check_sample_weight(sample_weight, n)
        pool, cdf = sampling_pool(w, params["bootstrap"])
        n_pool = n if pool is None else pool.shape[0]
        draw = RowDraw(resolve_max_samples(params["max_samples"], n_pool),
                       params["bootstrap"], pool, cdf)
        tp = TreeParams(
            splitter=RegressionSplitter(resolve_max_features(params["max_features"], p),
                                        self._extra), draw=draw,
            max_depth=-1 if params["max_depth"] is None else params["max_depth"],
            min_samples_split=params["min_samples_split"],
            min_samples_leaf=params["min_samples_leaf"])
        if not params["bootstrap"] and draw.n_samples > n_pool:
            raise InvalidParameterError(
                f"max_samples={self.max_samples!r} exceeds the {n_pool} samples (rows "
                "times integer weights) to draw from; lower it or use bootstrap=True")
        trees = self._grow(X, y, tp, params)
        self.tree_stats_ = [t.pop("stats") for t in trees]
        self.forest_ = concat_trees(trees, p)
        return self

    def _grow(self, X, y, tp, params):
        seeds = seeds_from(params["random_state"], params["n_estimators"])
        items = [(i, int(s)) for i, s in enumerate(seeds)]
        n_jobs = params["n_jobs"] or 1
        if n_jobs == -1:
            n_jobs = default_workers()
        if n_jobs == 1 and params["scheduler"] is None and not params["verbose"]:
            return [fit_tree_task(it, X, y, 1, tp) for it in items]
        trees = [None] * len(items)
        for i, res in map_tasks(fit_tree_task, items, args=(X, y, 1, tp),
                                scheduler=params["scheduler"], n_workers=n_jobs,
                                batch=max(n_jobs, 1), desc="regression forest",
                                unit="trees", progress=bool(params["verbose"])):
            trees[i] = res
        return trees

    def _check_predict(self, X, max_depth, n_trees):
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        nt_all = self.forest_.n_trees
        md = _check_predict_int("max_depth", max_depth, 0)
        nt = _check_predict_int("n_trees", n_trees, 1, nt_all)
        return X, (-1 if md is None else md), (nt_all if nt is None else nt)

    def _threads(self):
        return predict_threads(validate_params(self, {"n_jobs": self.n_jobs})["n_jobs"])

    def predict(self, X, max_depth=None, n_trees=None):
        """Predict regression target for X: the mean over the trees of the leaf means reached.

        Runs on ``n_jobs`` Numba threads for large inputs; the result does not
        depend on the number of threads.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, 31, 31, 3)
            The input samples; uint8 windows are read as they are.
        max_depth : int, optional
            Evaluate the trees truncated at this depth (equal to training with it).
        n_trees : int, optional
            Use only the first ``n_trees`` trees.

        Returns
        -------
        y : float64 ndarray of shape (n_samples,)
            The predicted values.
        """
        X, md, nt = self._check_predict(X, max_depth, n_trees)
        fa = self.forest_
        roots, nodes, nodes_f, value = preordered(fa)
        w, sp = kernel_weights(fa), kernel_sparse(fa)
        out = np.empty((X.shape[0], 1), dtype=np.float64)
        threads = self._threads()
        if threads > 1 and X.shape[0] * nt >= PARALLEL_MIN_WORK:
            import numba

            old = numba.set_parallel_chunksize(PARALLEL_CHUNK)
            try:
                with numba_threads(threads):
                    predict_proba_packed(X, roots, nodes, nodes_f, value, w, *sp, md, nt,
                                         out)
            finally:
                numba.set_parallel_chunksize(old)
        else:
            predict_proba_packed_serial(X, roots, nodes, nodes_f, value, w, *sp, md, nt, out)
        return out[:, 0]

    def apply(self, X, max_depth=None):
        """Apply trees in the forest to X, return leaf indices.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, 31, 31, 3)
            The input samples.
        max_depth : int, optional
            Stop at nodes of this depth (the leaves of the truncated trees).

        Returns
        -------
        X_leaves : int32 ndarray of shape (n_samples, n_estimators)
            For each sample and tree, the index (into the ``forest_`` arrays) of
            the node it ends up in.
        """
        X, md, _ = self._check_predict(X, max_depth, None)
        fa = complete(self.forest_)
        out = np.empty((X.shape[0], fa.n_trees), dtype=np.int32)
        with numba_threads(self._threads()):
            apply_kernel(X, fa.roots, fa.left, fa.right, fa.feature, fa.feature2, fa.oblique,
                         fa.threshold, fa.depth, kernel_weights(fa), fa.sparse,
                         *kernel_sparse(fa), md, out)
        return out

    @property
    def feature_importances_(self):
        """Mean decrease in squared error per feature (:func:`regression_importances`)."""
        check_is_fitted(self)
        return regression_importances(self.forest_, self.n_features_in_)


class AxisAlignedForestRegressor(BaseForestRegressor):
    """Random forest regressor: best ``x[f] <= t`` among ``max_features`` random
    features per node, bootstrap samples (see :mod:`facesegment.forest.regression`).

    Examples
    --------
    >>> import numpy as np
    >>> from facesegment.forest import AxisAlignedForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4))
    >>> y = 3 * X[:, 0] + X[:, 1] ** 2
    >>> reg = AxisAlignedForestRegressor(n_estimators=20, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.95)
    True
    """

    def __init__(self, n_estimators=100, *, max_features=1.0, max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, max_samples=None,
                 bootstrap=True, random_state=None, n_jobs=None, scheduler=None,
                 verbose=0):
        self.n_estimators = n_estimators
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


class ExtraTreesForestRegressor(BaseForestRegressor):
    """Extremely randomized trees for regression: the best of ``max_features``
    random cuts per node, every tree on all the rows (see
    :mod:`facesegment.forest.regression`)."""

    _extra = True

    def __init__(self, n_estimators=100, *, max_features=1.0, max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, max_samples=None,
                 bootstrap=False, random_state=None, n_jobs=None, scheduler=None,
                 verbose=0):
        self.n_estimators = n_estimators
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


__all__ = ["AxisAlignedForestRegressor", "ExtraTreesForestRegressor", "BaseForestRegressor",
           "regression_importances", "RegressionSplitter"]
