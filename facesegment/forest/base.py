"""The estimator API shared by the three forests (scikit-learn estimators).

:class:`BaseForest` (``ClassifierMixin, BaseEstimator``) validates parameters
against its class's ``_parameter_constraints`` table
(:func:`facesegment.forest.params.validate_params`) and input with
scikit-learn's own helpers, draws one seed per tree up front from
``random_state``, grows the trees in parallel (local threads with ``n_jobs``,
or a Dask cluster with ``scheduler``) through
:func:`facesegment.parallel.map_tasks`, and concatenates them into one
:class:`~facesegment.forest._arrays.ForestArrays`.  Results are identical
whatever ``n_jobs`` or ``scheduler``.  Prediction stores nothing on the
estimator (the packed node table is memoised in
:mod:`facesegment.forest._predict`).
"""

import copy
import math
from contextlib import contextmanager

import numba
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ..parallel import default_workers, map_tasks
from ._arrays import complete
from ._concat import concat_trees
from ._grow import RowDraw, TreeParams, fit_tree_task, sampling_pool
from ._importances import forest_feature_importances
from ._cart import (append_forests, class_weight_draws, oob_decision, tree_slice,
                    warm_start_seeds)
from ._missing import apply_missing, has_nan, proba_of_leaves
from ._predict import (apply_axis_packed, apply_kernel, axis_only, kernel_sparse,
                       kernel_weights, packed_nodes, predict_proba_packed,
                       predict_proba_packed_serial, preordered)
from ._verify import verified
from .params import (InvalidParameterError, check_sample_weight, resolve_max_features,
                     resolve_max_samples, validate_params)

#: Below this many sample-tree traversals prediction runs on one thread.
PARALLEL_MIN_WORK = 20000
#: Blocks (of 64 samples) per dynamically scheduled chunk of the parallel prediction loop.
PARALLEL_CHUNK = 8  # blocks of BLOCK samples

_CHECK_KW = dict(accept_sparse=False, order="C", ensure_all_finite=True,
                 ensure_min_samples=1, ensure_min_features=1)


def _flatten(X):
    """``(X as 2-D, dtype for check_array)``: arrays with more than two
    dimensions become ``(n, prod(rest))`` (a view when C-contiguous); uint8
    keeps its dtype (None), anything else is converted to float32."""
    if sp.issparse(X) or not hasattr(X, "shape") or not hasattr(X, "dtype"):
        return X, np.float32
    if len(X.shape) > 2:
        X = np.asarray(X)
        X = X.reshape(X.shape[0], math.prod(X.shape[1:]))
    kind = X.dtype.kind if isinstance(X.dtype, np.dtype) else ""
    if kind and kind in "USV":
        raise TypeError(f"X must be numeric (uint8 windows or a number matrix), got dtype "
                        f"{X.dtype}; encode text features first (e.g. OrdinalEncoder)")
    return X, (None if X.dtype == np.uint8 else np.float32)


def check_X(X, name="X", allow_nan=False):
    """Validate features without an estimator: a C-contiguous 2-D uint8 or float32 array.

    uint8 input, ``(n, p)`` or windows ``(n, 31, 31, 3)`` (any ``(n, ...)``), is
    used as it is (a reshape, no copy, when C-contiguous).  Other numeric input
    is converted once to float32.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or (n_samples, ...)
        The samples; more than two dimensions are flattened per sample.
    name : str, default="X"
        The input's name in error messages.
    allow_nan : bool, default=False
        Accept NaN (missing values); inf is never accepted.

    Returns
    -------
    ndarray of shape (n_samples, n_features)
        C-contiguous uint8 (uint8 input) or float32.

    Raises
    ------
    TypeError
        For text (string, bytes or void) dtypes.
    ValueError
        For NaN (unless ``allow_nan``), inf, 1-D or empty input
        (scikit-learn's errors); sparse matrices raise scikit-learn's
        ``TypeError``.
    """
    X, dtype = _flatten(X)
    kw = dict(_CHECK_KW)
    if allow_nan:
        kw["ensure_all_finite"] = "allow-nan"
    return check_array(X, dtype=dtype, input_name=name, **kw)


def seeds_from(random_state, n):
    """``n`` tree seeds (int64) drawn up front from ``random_state``.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        A ``RandomState`` draws with ``randint``; anything else seeds
        ``np.random.default_rng`` (None, an int or a Generator).
    n : int
        Number of seeds.

    Returns
    -------
    int64 ndarray of shape (n,)
        Seeds in ``[0, 2**31 - 1)``.
    """
    if isinstance(random_state, np.random.RandomState):
        return random_state.randint(0, 2**31 - 1, size=n).astype(np.int64)
    rng = np.random.default_rng(random_state)
    return rng.integers(0, 2**31 - 1, size=n, dtype=np.int64)


def predict_threads(n_jobs):
    """Numba threads for prediction, as scikit-learn reads ``n_jobs``.

    Parameters
    ----------
    n_jobs : int or None
        None: 1; negative: all (``numba.config.NUMBA_NUM_THREADS``); k:
        ``min(k, all)``, at least 1.

    Returns
    -------
    int
        Number of threads.
    """
    n_all = numba.config.NUMBA_NUM_THREADS
    if n_jobs is None:
        return 1
    return n_all if n_jobs < 0 else max(1, min(int(n_jobs), n_all))


@contextmanager
def numba_threads(n):
    """Run the block with ``n`` Numba threads (this thread's setting), then restore it.

    A context manager.

    Parameters
    ----------
    n : int
        Number of threads, at most ``numba.config.NUMBA_NUM_THREADS``.
    """
    old = numba.get_num_threads()
    if n == old:
        yield
        return
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old)


def _check_predict_int(name, value, low, high=None, none_ok=True):
    if value is None and none_ok:
        return None
    if (not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_))
            or value < low or (high is not None and value > high)):
        rng = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"{name}={value!r} must be an integer {rng}"
                         + (" or None" if none_ok else ""))
    return int(value)


class BaseForest(ClassifierMixin, BaseEstimator):
    """Common fit/predict machinery; subclasses define ``_split_family`` (a
    :class:`facesegment.forest.families.Splitter` subclass: how their trees
    split nodes or grow), ``_parameter_constraints`` and, when the family's
    :meth:`~facesegment.forest.families.Splitter.from_params` is not enough,
    ``_splitter(params, X, y_enc, sample_weight, **fit_kw)`` (the configured
    splitter of a fit)."""

    #: The split family (a Splitter class; its configured instance is the
    #: builder's, see :mod:`.families`).
    _split_family = None
    #: Whether X may hold NaN (missing values: each split learns their side;
    #: docs/forests-cart.md, "Missing values").
    _missing_values = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = self._missing_values
        return tags

    def __sklearn_is_fitted__(self):
        return hasattr(self, "forest_")

    # ------------------------------------------------------------ validation
    def _check_common(self):
        """All parameters checked and normalised (see
        :func:`facesegment.forest.params.validate_params`); subclasses extend
        it with their own rules."""
        return validate_params(self, self.get_params(deep=False))

    def _validate_X(self, X, y="no_validation", *, reset):
        """scikit-learn's ``validate_data`` on the kernels' input (see :func:`check_X`)."""
        X, dtype = _flatten(X)
        kw = dict(_CHECK_KW)
        if self._missing_values:
            kw["ensure_all_finite"] = "allow-nan"
        return validate_data(self, X, y, reset=reset, dtype=dtype, **kw)

    # ------------------------------------------------------------------- fit
    def _fit(self, X, y, sample_weight=None, **fit_kw):
        params = self._check_common()
        warm = bool(params.get("warm_start")) and hasattr(self, "forest_")
        X, y = self._validate_X(X, y, reset=not warm)
        check_classification_targets(y)
        n, p = X.shape
        classes, y_enc = np.unique(y, return_inverse=True)
        y_enc = y_enc.astype(np.int32).ravel()
        if warm and not np.array_equal(classes, self.classes_):
            raise ValueError(f"warm_start=True needs the classes of the first fit "
                             f"({list(self.classes_)!r}); y has {list(classes)!r}")
        if params.get("oob_score") and not params["bootstrap"]:
            raise InvalidParameterError("oob_score=True needs bootstrap=True: without "
                                        "bootstrap samples no row is out of bag")
        w = check_sample_weight(sample_weight, n)
        w, strata = class_weight_draws(params.get("class_weight"), classes, y_enc, w,
                                       params["bootstrap"])
        pool, cdf = sampling_pool(w, params["bootstrap"])
        if pool is None:
            w = None  # the unweighted path, byte for byte
        n_pool = n if pool is None else pool.shape[0]
        draw = RowDraw(n_samples=resolve_max_samples(params["max_samples"], n_pool),
                       bootstrap=params["bootstrap"], pool=pool, cdf=cdf, strata=strata)
        if not params["bootstrap"] and draw.n_samples > n_pool:
            raise InvalidParameterError(
                f"max_samples={self.max_samples!r} exceeds the {n_pool} samples (rows "
                "times integer weights) to draw from; lower it or use bootstrap=True")
        tp = TreeParams(
            splitter=self._splitter(params, X, y_enc, w, **fit_kw), draw=draw,
            max_depth=-1 if params["max_depth"] is None else params["max_depth"],
            min_samples_split=params["min_samples_split"],
            min_samples_leaf=params["min_samples_leaf"], missing=has_nan(X))
        n_old = self.forest_.n_trees if warm else 0
        seeds = (warm_start_seeds(params, seeds_from, n_old) if warm
                 else seeds_from(params["random_state"], params["n_estimators"]))
        if seeds.shape[0]:
            trees = self._grow_trees(X, y_enc, len(classes), tp, params, seeds)
            stats = [t.pop("stats") for t in trees]
            w_dtype = np.dtype(tp.splitter.dense_dtype)
            forest = concat_trees(trees, p, w_dtype)
            if warm:
                forest = append_forests(self.forest_, forest)
                stats = list(getattr(self, "tree_stats_", [None] * n_old)) + stats
                old_seeds = getattr(self, "tree_seeds_", None)  # None: a loaded model
                if old_seeds is None:
                    old_seeds = seeds_from(params["random_state"], n_old)
                seeds = np.concatenate([old_seeds, seeds])
            self.forest_ = forest
            self.tree_stats_ = stats
            self.tree_seeds_ = seeds
        self.classes_ = classes
        self.n_classes_ = len(classes)
        if params.get("oob_score") and (seeds.shape[0] or not hasattr(self, "oob_score_")):
            self._set_oob(X, y_enc, draw, params["oob_score"])
        return self

    def _splitter(self, params, X, y_enc, sample_weight, **fit_kw):
        """The configured splitter of this fit (``params``: validated): by default
        ``_split_family.from_params(params, X)``."""
        return self._split_family.from_params(params, X)

    def _set_oob(self, X, y_enc, draw, score=True):
        """``oob_decision_function_`` and ``oob_score_``: the accuracy of its argmax,
        or ``score(y_enc, argmax)`` when ``score`` is callable (class indices, as
        scikit-learn's forests call it)."""
        fa = self.forest_
        proba, _ = oob_decision(fa, X, y_enc, self.tree_seeds_, draw,
                                lambda rows: self._apply_array(rows, -1))
        self.oob_decision_function_ = proba
        pred = np.argmax(proba, axis=1)
        self.oob_score_ = (score(y_enc, pred) if callable(score)
                           else float(np.mean(pred == y_enc)))

    def _grow_trees(self, X, y_enc, n_classes, tp, params, seeds=None):
        if seeds is None:
            seeds = seeds_from(params["random_state"], params["n_estimators"])
        n_jobs = params["n_jobs"] or 1
        if n_jobs == -1:
            n_jobs = default_workers()
        trees = [None] * len(seeds)
        items = [(i, int(s)) for i, s in enumerate(seeds)]

        def info(res):
            """The progress line of one grown tree.

            Parameters
            ----------
            res : dict
                The tree's result, with its ``"stats"`` (``n_nodes``, ``max_depth``,
                ``seconds``).

            Returns
            -------
            str
                Nodes, depth and seconds of the tree.
            """
            st = res["stats"]
            return (f"{st['n_nodes']} nodes, depth {st['max_depth']}, "
                    f"{st['seconds']:.1f} s/tree")

        for i, res in map_tasks(fit_tree_task, items, args=(X, y_enc, n_classes, tp),
                                scheduler=params["scheduler"], n_workers=n_jobs,
                                batch=max(n_jobs, 1), desc=f"{tp.splitter.name} forest",
                                unit="trees", progress=bool(params["verbose"]), info=info):
            trees[i] = res
        return trees

    def fit(self, X, y, sample_weight=None):
        """Grow the forest.

        Parameters
        ----------
        X : array (n, p) or windows (n, 31, 31, 3)
            uint8 is used as it is (no float copy); other numbers become float32.
        y : array (n,)
            Class labels (any type ``np.unique`` sorts: ints, strings...).
        sample_weight : array (n,), optional
            Non-negative weights; zero-weight samples never enter a tree.
            With ``bootstrap=True`` each tree draws its ``max_samples`` rows
            with probability proportional to the weight (the pool, and
            ``max_samples=None``, is the rows of positive weight); with
            ``bootstrap=False`` integer weights repeat rows (exactly as
            repeating them in X; non-integer weights raise ``ValueError``).
            None or all-ones weights give the unweighted forest, bit for bit.

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    # --------------------------------------------------------------- predict
    def _check_predict(self, X):
        check_is_fitted(self)
        if (type(X) is np.ndarray and X.dtype == np.uint8 and X.ndim == 2 and X.shape[0] > 0
                and X.flags.c_contiguous and X.shape[1] == self.n_features_in_
                and not hasattr(self, "feature_names_in_")):
            return X   # exactly what validate_data returns for it, without its cost per call
        return self._validate_X(X, reset=False)

    def _limits(self, max_depth, n_trees, first_tree=0):
        nt_all = self.forest_.n_trees - first_tree
        md = _check_predict_int("max_depth", max_depth, 0)
        nt = _check_predict_int("n_trees", n_trees, 1, nt_all)
        return (-1 if md is None else md), (nt_all if nt is None else nt)

    def _threads(self):
        return predict_threads(validate_params(self, {"n_jobs": self.n_jobs})["n_jobs"])

    def predict_proba(self, X, max_depth=None, n_trees=None, first_tree=0):
        """Class probabilities: the mean of the trees' leaf distributions.

        Parameters
        ----------
        X : array (n, p) or (n, 31, 31, 3); uint8 windows are read as they are
        max_depth : int, optional
            Evaluate the trees truncated at this depth (equals training with it).
        n_trees : int, optional
            Use only ``n_trees`` trees (default: all from ``first_tree`` on).
        first_tree : int, optional
            The first tree used (default 0): trees ``first_tree`` to
            ``first_tree + n_trees - 1`` are averaged.  The mean of two
            disjoint runs weighted by their tree counts is the mean of all.

        Returns
        -------
        proba : float64 (n, n_classes); columns follow ``classes_``; rows sum to 1.

        Runs on ``n_jobs`` Numba threads (None: 1, -1: all) when there are at
        least ``PARALLEL_MIN_WORK`` sample-tree traversals; the result does not
        depend on the number of threads.
        """
        X = self._check_predict(X)
        first = _check_predict_int("first_tree", first_tree, 0, self.forest_.n_trees - 1,
                                   none_ok=False)
        md, nt = self._limits(max_depth, n_trees, first)
        fa = verified(self.forest_)
        if self._missing_values and has_nan(X):
            with numba_threads(self._threads()):
                return proba_of_leaves(fa, apply_missing(fa, X, md)[:, first:first + nt])
        roots, nodes, nodes_f, value = preordered(fa)
        if first or nt < fa.n_trees:
            roots = np.ascontiguousarray(roots[first:first + nt])
        w = kernel_weights(fa)
        sp = kernel_sparse(fa)
        out = np.empty((X.shape[0], fa.n_classes), dtype=np.float64)
        threads = self._threads()
        if threads > 1 and X.shape[0] * nt >= PARALLEL_MIN_WORK:
            old = numba.set_parallel_chunksize(PARALLEL_CHUNK)
            try:
                with numba_threads(threads):
                    predict_proba_packed(X, roots, nodes, nodes_f, value, w, *sp, md, nt, out)
            finally:
                numba.set_parallel_chunksize(old)
        else:
            predict_proba_packed_serial(X, roots, nodes, nodes_f, value, w, *sp, md, nt, out)
        return out

    def predict(self, X, max_depth=None, n_trees=None):
        """Predict class for X: the most probable class of the mean distribution.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, 31, 31, 3)
            The input samples; uint8 windows are read as they are.
        max_depth : int, optional
            Evaluate the trees truncated at this depth (equals training with it).
        n_trees : int, optional
            Use only the first ``n_trees`` trees.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            The predicted classes (values of ``classes_``).
        """
        proba = self.predict_proba(X, max_depth=max_depth, n_trees=n_trees)
        return self.classes_[np.argmax(proba, axis=1)]

    def apply(self, X, max_depth=None):
        """Apply trees in the forest to X, return leaf indices.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, 31, 31, 3)
            The input samples; uint8 windows are read as they are.
        max_depth : int, optional
            Stop at nodes of this depth (the leaves of the truncated trees).

        Returns
        -------
        X_leaves : int32 ndarray of shape (n_samples, n_estimators)
            For each sample and tree, the index (into the ``forest_`` arrays) of
            the node it ends up in.
        """
        X = self._check_predict(X)
        md, _ = self._limits(max_depth, None)
        with numba_threads(self._threads()):
            return self._apply_array(X, md)

    def _apply_array(self, X, md):
        """:meth:`apply` on validated ``X`` (``md`` -1: no depth limit)."""
        fa = complete(verified(self.forest_))
        if self._missing_values and has_nan(X):
            return apply_missing(fa, X, md)
        out = np.empty((X.shape[0], fa.n_trees), dtype=np.int32)
        if axis_only(fa):
            apply_axis_packed(X, fa.roots, *packed_nodes(fa), md, out)
            return out
        apply_kernel(X, fa.roots, fa.left, fa.right, fa.feature, fa.feature2, fa.oblique,
                     fa.threshold, fa.depth, kernel_weights(fa), fa.sparse,
                     *kernel_sparse(fa), md, out)
        return out

    @property
    def estimators_(self):
        """The trees as fitted one-tree forests of this class (list, in order).

        Each is a shallow copy of this estimator whose ``forest_`` holds one
        tree (:func:`facesegment.forest._cart.tree_slice`: its nodes copied,
        oblique weights shared), with ``predict_proba``, ``predict``,
        ``apply`` and ``feature_importances_``; ``n_estimators`` is 1 and
        ``tree_seeds_`` its seed.  Built on each access (cheap: one copy of
        the nodes); fitting or changing one does not touch this forest.
        """
        check_is_fitted(self)
        out = []
        for i in range(self.forest_.n_trees):
            tree = copy.copy(self)
            tree.forest_ = tree_slice(self.forest_, i)
            tree.n_estimators = 1
            if hasattr(self, "tree_stats_"):
                tree.tree_stats_ = self.tree_stats_[i:i + 1]
            tree.tree_seeds_ = self.tree_seeds_[i:i + 1] if hasattr(self, "tree_seeds_") \
                else None
            for name in ("oob_score_", "oob_decision_function_"):
                tree.__dict__.pop(name, None)
            out.append(tree)
        return out

    @property
    def feature_importances_(self):
        """Mean decrease in impurity per feature, float64 (n_features_in_,), sums to 1.

        Each split's decrease ``n H(node) - n_l H(left) - n_r H(right)``
        (entropy of the stored class frequencies, ``n`` the node's drawn
        samples) goes to its feature; a two-probe split gives half to each
        probe; an oblique split spreads it over the features in proportion to
        ``|w_j| * std_j`` (``std_ = feature_std_``, so on the normalised scale
        the split was optimised on).  Each tree's importances are normalised to
        sum 1, averaged over the trees that split at all, and normalised again
        (as scikit-learn does); all zeros when no tree splits.
        """
        check_is_fitted(self)
        return forest_feature_importances(self.forest_, self.n_features_in_,
                                          getattr(self, "feature_std_", None),
                                          criterion=getattr(self, "criterion", "entropy"))


def _resolve_max_features(spec, p):
    """Alias of :func:`facesegment.forest.params.resolve_max_features`."""
    return resolve_max_features(spec, p)


def _resolve_max_samples(spec, n):
    """Alias of :func:`facesegment.forest.params.resolve_max_samples`."""
    return resolve_max_samples(spec, n)


__all__ = ["BaseForest", "check_X", "seeds_from", "predict_threads",
           "numba_threads", "PARALLEL_MIN_WORK"]
