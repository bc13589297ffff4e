"""The estimator API shared by the three forests (scikit-learn estimators).

:class:`BaseForest` (``ClassifierMixin, BaseEstimator``) validates parameters
against :data:`facesegment.forest.params.PARAMETER_CONSTRAINTS` and input with
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
from ._arrays import ForestArrays
from ._grow import _dense_dtype, fit_tree_task, sampling_pool
from ._arrays import complete
from ._cart import (append_forests, class_weight_draws, oob_decision, tree_slice,
                    warm_start_seeds)
from ._missing import apply_missing, has_nan, proba_of_leaves
from ._predict import (apply_axis_packed, apply_kernel, axis_only, kernel_sparse,
                       kernel_weights, packed_nodes, predict_proba_packed,
                       predict_proba_packed_serial)
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


def check_X(X, name="X"):
    """Validate features without an estimator: a C-contiguous 2-D uint8 or float32 array.

    uint8 input, ``(n, p)`` or windows ``(n, 31, 31, 3)`` (any ``(n, ...)``), is
    used as it is (a reshape, no copy, when C-contiguous).  Other numeric input
    is converted once to float32.  NaN/inf, sparse matrices, 1-D input, empty
    input raise scikit-learn's errors.
    """
    X, dtype = _flatten(X)
    return check_array(X, dtype=dtype, input_name=name, **_CHECK_KW)


def seeds_from(random_state, n):
    """``n`` tree seeds (int64) drawn up front from ``random_state``."""
    if isinstance(random_state, np.random.RandomState):
        return random_state.randint(0, 2**31 - 1, size=n).astype(np.int64)
    rng = np.random.default_rng(random_state)
    return rng.integers(0, 2**31 - 1, size=n, dtype=np.int64)


def concat_trees(trees, n_features, weight_dtype=np.float32):
    """Concatenate per-tree dicts (local node indices) into one ForestArrays."""
    offsets = np.cumsum([0] + [t["left"].shape[0] for t in trees])
    w_off = np.cumsum([0] + [t["weights"].shape[0] for t in trees])

    def shift(a, off):
        a = a.astype(np.int32, copy=True)
        a[a >= 0] += off
        return a

    cat = np.concatenate
    weights = [t["weights"] for t in trees]
    sparse = _concat_sparse(trees, offsets, n_features)
    sparse["missing_left"] = (cat([_missing_sides(t) for t in trees]) if trees
                              else np.zeros(0, np.int8))
    return ForestArrays(**sparse,
        roots=offsets[:-1].astype(np.int32),
        left=cat([shift(t["left"], o) for t, o in zip(trees, offsets)]),
        right=cat([shift(t["right"], o) for t, o in zip(trees, offsets)]),
        feature=cat([t["feature"] for t in trees]).astype(np.int32),
        feature2=cat([t["feature2"] for t in trees]).astype(np.int32),
        oblique=cat([shift(t["oblique"], o) for t, o in zip(trees, w_off)]),
        threshold=cat([t["threshold"] for t in trees]).astype(np.float32),
        value=cat([t["value"] for t in trees]).astype(np.float32),
        depth=cat([t["depth"] for t in trees]).astype(np.int32),
        n_samples=cat([t["n_samples"] for t in trees]).astype(np.int32),
        weights=(np.ascontiguousarray(cat(weights)) if weights
                 else np.zeros((0, n_features), dtype=weight_dtype)),
    )


def _missing_sides(tree):
    """A tree's ``missing_left`` (int8): the learned sides, or where the tree was
    grown without missing values, the larger child (ties left)."""
    if tree.get("missing_left") is not None:
        return np.asarray(tree["missing_left"], np.int8)
    left, right, n = tree["left"], tree["right"], tree["n_samples"]
    out = np.zeros(left.shape[0], dtype=np.int8)
    inner = np.flatnonzero(left >= 0)
    out[inner] = n[left[inner]] >= n[right[inner]]
    return out


def _concat_sparse(trees, offsets, n_features):
    """The sparse arrays of concatenated trees (a tree without them has none)."""
    n_nodes = int(offsets[-1])
    ptr, index, weight = [0], [], []
    sparse = np.full(n_nodes, -1, np.int32)
    for t, off in zip(trees, offsets):
        if t.get("sparse") is None:
            continue
        local = t["sparse"]
        has = local >= 0
        sparse[off:off + local.shape[0]][has] = local[has] + len(ptr) - 1
        tp = t["sparse_ptr"]
        ptr.extend((tp[1:] + ptr[-1]).tolist())
        index.append(t["sparse_index"])
        weight.append(t["sparse_weight"])
    dtypes = {w.dtype for w in weight if w.shape[0]}
    w_dtype = dtypes.pop() if len(dtypes) == 1 else np.dtype(np.float32)
    i_dtype = np.uint16 if n_features <= np.iinfo(np.uint16).max + 1 else np.int32
    return {
        "sparse": sparse,
        "sparse_ptr": np.asarray(ptr, np.int64),
        "sparse_index": (np.concatenate(index).astype(i_dtype) if index
                         else np.zeros(0, i_dtype)),
        "sparse_weight": (np.concatenate([w.astype(w_dtype) for w in weight]) if weight
                          else np.zeros(0, w_dtype)),
    }


def _sparse_importances(fa, imp, tree, dec, inner, scale):
    """Add the sparse oblique splits' decreases to ``imp`` (as for dense rows)."""
    if fa.sparse is None:
        return
    sp = fa.sparse[inner]
    for r in np.flatnonzero(sp >= 0):
        row = sp[r]
        lo, hi = fa.sparse_ptr[row], fa.sparse_ptr[row + 1]
        feats = fa.sparse_index[lo:hi].astype(np.int64)
        share = np.abs(fa.sparse_weight[lo:hi].astype(np.float64))
        if scale is not None:
            share = share * scale[feats]
        total = share.sum()
        if total > 0:
            np.add.at(imp[tree[r]], feats, share / total * dec[r])


def forest_feature_importances(fa, n_features, feature_std=None, chunk=256,
                               criterion="entropy"):
    """Mean decrease in impurity per feature of the forest ``fa`` (see
    :attr:`BaseForest.feature_importances_`); float64 (n_features,).  The
    impurity is the entropy, or the Gini index with ``criterion="gini"``."""
    v = fa.value.astype(np.float64)
    if criterion == "gini":
        h = 1.0 - np.sum(v * v, axis=1)
    else:
        h = -np.sum(v * np.log(np.where(v > 0, v, 1.0)), axis=1)
    n = fa.n_samples.astype(np.float64)
    inner = np.flatnonzero(fa.left >= 0)
    lt, rt = fa.left[inner], fa.right[inner]
    dec = np.maximum(n[inner] * h[inner] - n[lt] * h[lt] - n[rt] * h[rt], 0.0)
    tree = np.searchsorted(fa.roots, inner, side="right") - 1
    f1, f2, ob = fa.feature[inner], fa.feature2[inner], fa.oblique[inner]
    imp = np.zeros((fa.n_trees, n_features), dtype=np.float64)
    axis = (ob < 0) & (f1 >= 0) & (f2 < 0)
    np.add.at(imp, (tree[axis], f1[axis]), dec[axis])
    two = (ob < 0) & (f1 >= 0) & (f2 >= 0)
    np.add.at(imp, (tree[two], f1[two]), dec[two] / 2)
    np.add.at(imp, (tree[two], f2[two]), dec[two] / 2)
    rows = np.flatnonzero(ob >= 0)
    scale = None if feature_std is None else np.asarray(feature_std, np.float64).ravel()
    _sparse_importances(fa, imp, tree, dec, inner, scale)
    for start in range(0, rows.shape[0], chunk):
        r = rows[start:start + chunk]
        share = np.abs(fa.weights[ob[r]].astype(np.float64))
        if scale is not None:
            share *= scale
        total = share.sum(axis=1, keepdims=True)
        share = np.divide(share, total, out=np.zeros_like(share), where=total > 0)
        np.add.at(imp, tree[r], share * dec[r, None])
    per_tree = imp.sum(axis=1)
    used = per_tree > 0
    if not used.any():
        return np.zeros(n_features, dtype=np.float64)
    out = (imp[used] / per_tree[used, None]).mean(axis=0)
    return out / out.sum()


def predict_threads(n_jobs):
    """Numba threads for prediction, as scikit-learn reads ``n_jobs``: None -> 1,
    -1 -> all (``numba.config.NUMBA_NUM_THREADS``), k -> min(k, all)."""
    n_all = numba.config.NUMBA_NUM_THREADS
    if n_jobs is None:
        return 1
    return n_all if n_jobs < 0 else max(1, min(int(n_jobs), n_all))


@contextmanager
def numba_threads(n):
    """Run the block with ``n`` Numba threads (this thread's setting), then restore it."""
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
    """Common fit/predict machinery; subclasses define ``_family`` and
    ``_split_spec(params, X, y_enc, sample_weight, **fit_kw)`` (the family's
    entries of the grower's spec)."""

    _family = None
    #: Whether X may hold NaN (missing values; axis-aligned splits only).
    _missing_values = False
    #: The top-level (picklable) task that grows one tree: ``(item, X, y, n_classes,
    #: spec) -> tree dict``; a family with its own trainer replaces it.
    _tree_task = staticmethod(fit_tree_task)

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
        :func:`facesegment.forest.params.validate_params`); kept for callers of
        the former private check."""
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
        spec = {
            "family": self._family,
            "max_depth": -1 if params["max_depth"] is None else params["max_depth"],
            "min_samples_split": params["min_samples_split"],
            "min_samples_leaf": params["min_samples_leaf"],
            "n_samples": resolve_max_samples(params["max_samples"], n_pool),
            "bootstrap": params["bootstrap"],
            "pool": pool,
            "cdf": cdf,
            "strata": strata,
            "criterion": params.get("criterion", "entropy"),
            "missing": has_nan(X),
        }
        if not params["bootstrap"] and spec["n_samples"] > n_pool:
            raise InvalidParameterError(
                f"max_samples={self.max_samples!r} exceeds the {n_pool} samples (rows "
                "times integer weights) to draw from; lower it or use bootstrap=True")
        spec.update(self._split_spec(params, X, y_enc, w, **fit_kw))
        n_old = self.forest_.n_trees if warm else 0
        seeds = (warm_start_seeds(params, seeds_from, n_old) if warm
                 else seeds_from(params["random_state"], params["n_estimators"]))
        if seeds.shape[0]:
            trees = self._grow_trees(X, y_enc, len(classes), spec, params, seeds)
            stats = [t.pop("stats") for t in trees]
            w_dtype = np.dtype(_dense_dtype(spec))
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
            self._set_oob(X, y_enc, spec)
        return self

    def _set_oob(self, X, y_enc, spec):
        """``oob_decision_function_`` and ``oob_score_`` (accuracy of its argmax)."""
        fa = self.forest_
        proba, _ = oob_decision(fa, X, y_enc, self.tree_seeds_, spec,
                                lambda rows: self._apply_array(rows, -1))
        self.oob_decision_function_ = proba
        self.oob_score_ = float(np.mean(np.argmax(proba, axis=1) == y_enc))

    def _grow_trees(self, X, y_enc, n_classes, spec, params, seeds=None):
        if seeds is None:
            seeds = seeds_from(params["random_state"], params["n_estimators"])
        n_jobs = params["n_jobs"] or 1
        if n_jobs == -1:
            n_jobs = default_workers()
        trees = [None] * len(seeds)
        items = [(i, int(s)) for i, s in enumerate(seeds)]

        def info(res):
            st = res["stats"]
            return (f"{st['n_nodes']} nodes, depth {st['max_depth']}, "
                    f"{st['seconds']:.1f} s/tree")

        for i, res in map_tasks(self._tree_task, items, args=(X, y_enc, n_classes, spec),
                                scheduler=params["scheduler"], n_workers=n_jobs,
                                batch=max(n_jobs, 1), desc=f"{self._family} forest",
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
        return self._validate_X(X, reset=False)

    def _limits(self, max_depth, n_trees):
        nt_all = self.forest_.n_trees
        md = _check_predict_int("max_depth", max_depth, 0)
        nt = _check_predict_int("n_trees", n_trees, 1, nt_all)
        return (-1 if md is None else md), (nt_all if nt is None else nt)

    def _threads(self):
        return predict_threads(validate_params(self, {"n_jobs": self.n_jobs})["n_jobs"])

    def predict_proba(self, X, max_depth=None, n_trees=None):
        """Class probabilities: the mean of the trees' leaf distributions.

        Parameters
        ----------
        X : array (n, p) or (n, 31, 31, 3); uint8 windows are read as they are
        max_depth : int, optional
            Evaluate the trees truncated at this depth (equals training with it).
        n_trees : int, optional
            Use only the first ``n_trees`` trees.

        Returns
        -------
        proba : float64 (n, n_classes); columns follow ``classes_``; rows sum to 1.

        Runs on ``n_jobs`` Numba threads (None: 1, -1: all) when there are at
        least ``PARALLEL_MIN_WORK`` sample-tree traversals; the result does not
        depend on the number of threads.
        """
        X = self._check_predict(X)
        md, nt = self._limits(max_depth, n_trees)
        fa = verified(self.forest_)
        if self._missing_values and has_nan(X):
            with numba_threads(self._threads()):
                return proba_of_leaves(fa, apply_missing(fa, X, md)[:, :nt])
        nodes, nodes_f = packed_nodes(fa)
        w = kernel_weights(fa)
        sp = kernel_sparse(fa)
        out = np.empty((X.shape[0], fa.n_classes), dtype=np.float64)
        threads = self._threads()
        if threads > 1 and X.shape[0] * nt >= PARALLEL_MIN_WORK:
            old = numba.set_parallel_chunksize(PARALLEL_CHUNK)
            try:
                with numba_threads(threads):
                    predict_proba_packed(X, fa.roots, nodes, nodes_f, fa.value, w, *sp, md,
                                         nt, out)
            finally:
                numba.set_parallel_chunksize(old)
        else:
            predict_proba_packed_serial(X, fa.roots, nodes, nodes_f, fa.value, w, *sp, md, nt,
                                        out)
        return out

    def predict(self, X, max_depth=None, n_trees=None):
        """Most probable class of each sample, shape (n,) (values from ``classes_``)."""
        proba = self.predict_proba(X, max_depth=max_depth, n_trees=n_trees)
        return self.classes_[np.argmax(proba, axis=1)]

    def apply(self, X, max_depth=None):
        """Index (into ``forest_`` arrays) of the node reached in each tree, int32 (n, n_trees)."""
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
    """Former private name of :func:`facesegment.forest.params.resolve_max_features`."""
    return resolve_max_features(spec, p)


def _resolve_max_samples(spec, n):
    """Former private name of :func:`facesegment.forest.params.resolve_max_samples`."""
    return resolve_max_samples(spec, n)


__all__ = ["BaseForest", "check_X", "concat_trees", "seeds_from", "predict_threads",
           "forest_feature_importances",
           "numba_threads", "PARALLEL_MIN_WORK"]
