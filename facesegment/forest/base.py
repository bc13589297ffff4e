"""The estimator API shared by the three forests (scikit-learn conventions).

:class:`BaseForest` validates input once, draws one seed per tree up front from
``random_state``, grows the trees in parallel (local threads with ``n_jobs``, or
a Dask cluster with ``scheduler``) through :func:`facesegment.parallel.map_tasks`,
and concatenates them into one :class:`~facesegment.forest._arrays.ForestArrays`.
Results are identical whatever ``n_jobs`` or ``scheduler``.
"""

import inspect
import numbers

import numba
import numpy as np

from ..parallel import default_workers, map_tasks
from ._arrays import ForestArrays
from ._grow import fit_tree_task
from ._predict import (apply_kernel, pack_nodes, predict_proba_packed,
                       predict_proba_packed_serial)

#: Below this many sample-tree traversals prediction runs on one thread.
PARALLEL_MIN_WORK = 20000
#: Blocks (of 64 samples) per dynamically scheduled chunk of the parallel prediction loop.
PARALLEL_CHUNK = 8  # blocks of BLOCK samples


def check_X(X, name="X", n_features=None):
    """Validate features; return a C-contiguous 2-D uint8 or float32 view/array.

    uint8 input, ``(n, p)`` or windows ``(n, 31, 31, 3)`` (any ``(n, ...)``), is
    used as it is (a reshape, no copy, when C-contiguous).  Other numeric input
    is converted once to float32.
    """
    if not hasattr(X, "shape") or not hasattr(X, "dtype"):
        X = np.asarray(X)
    if X.ndim < 2:
        raise ValueError(f"{name} must have shape (n_samples, n_features) or "
                         f"(n_samples, 31, 31, 3), got shape {X.shape}; "
                         "reshape a single sample with x.reshape(1, -1)")
    if X.shape[0] == 0:
        raise ValueError(f"{name} has no samples (shape {X.shape}); pass at least one row")
    if X.dtype == np.uint8:
        X = np.ascontiguousarray(X)
    elif X.dtype.kind in "biuf":
        X = np.ascontiguousarray(X, dtype=np.float32)
        if not np.isfinite(X).all():
            raise ValueError(f"{name} contains NaN or infinite values; remove or impute them")
    else:
        raise TypeError(f"{name} must be numeric (uint8 windows or a float matrix), "
                        f"got dtype {X.dtype}")
    X = X.reshape(X.shape[0], -1)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features but the forest was fitted "
                         f"with {n_features}; pass windows of the training shape")
    return X


def _resolve_max_features(spec, p):
    """Number of candidate features q from an int, a fraction, "sqrt", "log2",
    "all", or an exponent "p^0.7"."""
    if spec is None or spec == "all":
        return p
    if isinstance(spec, str):
        s = spec.strip().lower()
        if s == "sqrt":
            return max(1, int(np.sqrt(p)))
        if s == "log2":
            return max(1, int(np.log2(p)))
        if s.startswith("p^"):
            try:
                e = float(s[2:])
            except ValueError:
                e = -1.0
            if 0.0 < e <= 1.0:
                return max(1, min(p, int(round(p ** e))))
        raise ValueError(f"max_features={spec!r} is not understood; use an int, a fraction "
                         "in (0, 1], 'sqrt', 'log2', 'all' or an exponent like 'p^0.7'")
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"max_features={spec} must be >= 1")
        return min(int(spec), p)
    if isinstance(spec, numbers.Real) and 0.0 < spec <= 1.0:
        return max(1, int(round(spec * p)))
    raise ValueError(f"max_features={spec!r} is not understood; use an int, a fraction "
                     "in (0, 1], 'sqrt', 'log2', 'all' or an exponent like 'p^0.7'")


def _resolve_max_samples(spec, n):
    if spec is None:
        return n
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"max_samples={spec} must be >= 1 (or a fraction in (0, 1])")
        return int(spec)
    if isinstance(spec, numbers.Real) and 0.0 < spec <= 1.0:
        return max(1, int(round(spec * n)))
    raise ValueError(f"max_samples={spec!r} must be None, an int >= 1 or a fraction in (0, 1]")


def _check_int(name, value, low, allow_none=False):
    if allow_none and value is None:
        return
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}"
                         + (" or None" if allow_none else ""))


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
    return ForestArrays(
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


class BaseForest:
    """Common fit/predict machinery; subclasses define ``_family`` and ``_split_spec``."""

    _family = None

    # ------------------------------------------------------------ params API
    @classmethod
    def _get_param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind != p.VAR_KEYWORD)

    def get_params(self, deep=True):
        """Constructor parameters as a dict (scikit-learn convention)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set constructor parameters; returns self."""
        valid = self._get_param_names()
        for key, val in params.items():
            if key not in valid:
                raise ValueError(f"invalid parameter {key!r} for {type(self).__name__}; "
                                 f"valid parameters: {', '.join(valid)}")
            setattr(self, key, val)
        return self

    def __repr__(self):
        sig = inspect.signature(type(self).__init__)
        parts = [f"{k}={getattr(self, k)!r}" for k, p in sig.parameters.items()
                 if k != "self" and getattr(self, k) != p.default]
        return f"{type(self).__name__}({', '.join(parts)})"

    # ------------------------------------------------------------------- fit
    def _check_common(self):
        _check_int("n_estimators", self.n_estimators, 1)
        _check_int("max_depth", self.max_depth, 0, allow_none=True)
        _check_int("min_samples_split", self.min_samples_split, 2)
        _check_int("min_samples_leaf", self.min_samples_leaf, 1)
        if self.n_jobs is not None:
            if (not isinstance(self.n_jobs, numbers.Integral) or self.n_jobs == 0
                    or self.n_jobs < -1):
                raise ValueError(f"n_jobs={self.n_jobs!r} must be a positive integer, "
                                 "-1 (all cores) or None (1)")

    def _encode_y(self, y, n):
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y must have shape ({n},) to match X, got {y.shape}")
        if y.dtype.kind == "f" and not np.isfinite(y).all():
            raise ValueError("y contains NaN or infinite labels; remove those samples")
        classes, y_enc = np.unique(y, return_inverse=True)
        return classes, y_enc.astype(np.int32).ravel()

    def _fit(self, X, y, spec_extra):
        self._check_common()
        X = check_X(X)
        n, p = X.shape
        classes, y_enc = self._encode_y(y, n)
        spec = {
            "family": self._family,
            "max_depth": -1 if self.max_depth is None else int(self.max_depth),
            "min_samples_split": int(self.min_samples_split),
            "min_samples_leaf": int(self.min_samples_leaf),
            "n_samples": _resolve_max_samples(self.max_samples, n),
            "bootstrap": bool(self.bootstrap),
        }
        if not self.bootstrap and spec["n_samples"] > n:
            raise ValueError(f"max_samples={self.max_samples!r} exceeds the {n} samples; "
                             "lower it or use bootstrap=True")
        spec.update(spec_extra(X, y_enc, p))
        seeds = seeds_from(self.random_state, self.n_estimators)
        n_jobs = self.n_jobs or 1
        if n_jobs == -1:
            n_jobs = default_workers()
        trees = [None] * self.n_estimators
        items = [(i, int(s)) for i, s in enumerate(seeds)]

        def info(res):
            st = res["stats"]
            return (f"{st['n_nodes']} nodes, depth {st['max_depth']}, "
                    f"{st['seconds']:.1f} s/tree")

        for i, res in map_tasks(fit_tree_task, items,
                                args=(X, y_enc, len(classes), spec),
                                scheduler=self.scheduler, n_workers=n_jobs,
                                batch=max(n_jobs, 1), desc=f"{self._family} forest",
                                unit="trees", progress=bool(self.verbose), info=info):
            trees[i] = res
        self.tree_stats_ = [t.pop("stats") for t in trees]
        w_dtype = np.dtype(spec.get("weight_dtype", "float32"))
        self.forest_ = concat_trees(trees, p, w_dtype)
        self.classes_ = classes
        self.n_classes_ = len(classes)
        self.n_features_in_ = p
        return self

    # --------------------------------------------------------------- predict
    def _check_fitted(self):
        if not hasattr(self, "forest_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit(X, y) "
                               "first or load a model with facesegment.model.load_model")

    def _kernel_arrays(self):
        fa = self.forest_
        w = fa.weights
        if w.dtype != np.float32:
            w = w.astype(np.float32)
        if w.shape[0] == 0:
            w = np.zeros((1, max(fa.n_features, 1)), dtype=np.float32)
        return fa, np.ascontiguousarray(w)

    def _limits(self, max_depth, n_trees):
        fa = self.forest_
        if n_trees is None:
            n_trees = fa.n_trees
        if (not isinstance(n_trees, numbers.Integral) or isinstance(n_trees, bool)
                or not 1 <= n_trees <= fa.n_trees):
            raise ValueError(f"n_trees={n_trees!r} must be an integer in 1..{fa.n_trees}")
        _check_int("max_depth", max_depth, 0, allow_none=True)
        return (-1 if max_depth is None else int(max_depth)), int(n_trees)

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
        """
        self._check_fitted()
        X = check_X(X, n_features=self.n_features_in_)
        md, nt = self._limits(max_depth, n_trees)
        fa, w = self._kernel_arrays()
        out = np.empty((X.shape[0], fa.n_classes), dtype=np.float64)
        packed = getattr(self, "_packed", None)
        if packed is None or packed[0] is not fa:
            packed = (fa,) + pack_nodes(fa)
            self._packed = packed
        _, nodes, nodes_f = packed
        if X.shape[0] * nt >= PARALLEL_MIN_WORK:
            old = numba.set_parallel_chunksize(PARALLEL_CHUNK)
            try:
                predict_proba_packed(X, fa.roots, nodes, nodes_f, fa.value, w, md, nt, out)
            finally:
                numba.set_parallel_chunksize(old)
        else:
            predict_proba_packed_serial(X, fa.roots, nodes, nodes_f, fa.value, w, md, nt, out)
        return out

    def predict(self, X, max_depth=None, n_trees=None):
        """Most probable class of each sample, shape (n,) (values from ``classes_``)."""
        proba = self.predict_proba(X, max_depth=max_depth, n_trees=n_trees)
        return self.classes_[np.argmax(proba, axis=1)]

    def apply(self, X, max_depth=None):
        """Index (into ``forest_`` arrays) of the node reached in each tree, int32 (n, n_trees)."""
        self._check_fitted()
        X = check_X(X, n_features=self.n_features_in_)
        md, _ = self._limits(max_depth, None)
        fa, w = self._kernel_arrays()
        out = np.empty((X.shape[0], fa.n_trees), dtype=np.int32)
        apply_kernel(X, fa.roots, fa.left, fa.right, fa.feature, fa.feature2, fa.oblique,
                     fa.threshold, fa.depth, w, md, out)
        return out

    def score(self, X, y):
        """Mean accuracy on ``(X, y)``."""
        return float(np.mean(self.predict(X) == np.asarray(y)))


__all__ = ["BaseForest", "check_X", "concat_trees", "seeds_from"]
