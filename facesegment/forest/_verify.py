"""Proving a forest's flat arrays safe before any kernel reads them.

The Numba kernels trust the arrays of :mod:`facesegment.forest._arrays`: they
index ``value``, the features of a row, the oblique weights and the sparse
rows with the stored numbers, and walk the trees until a leaf (or for as many
steps as the deepest ``depth``).  A model file is untrusted input, so before a
kernel runs, :func:`verify_forest` proves, with a few vectorised NumPy passes
(linear in the number of nodes):

* shapes and dtypes: node arrays 1-D of one length ``n``, integer or float as
  the format says, ``value`` ``(n, n_classes)``, ``weights`` 2-D of a stored
  weight type, ``roots`` non-empty;
* structure: a leaf has ``left == right == -1``; an internal node has
  ``0 <= left < n - 1`` and ``right == left + 1``; no node is the child of two
  nodes or the child of any node and a root; every root has depth 0, every
  node that is nobody's child has depth 0 and every child has its parent's
  depth + 1.  A cycle would need depths that grow all the way round it, so
  the trees are acyclic, every walk ends at a leaf within ``depth.max() < n``
  steps, and depth limits mean what they say;
* splits: every internal node is exactly one of axis (``feature``, optionally
  ``feature2``: two-probe), dense oblique (``oblique``) or sparse oblique
  (``sparse``); every index, at every node, is ``-1`` or within the layout's
  features, the weight rows or the sparse rows;
* sparse rows: ``sparse_ptr`` starts at 0, never decreases and ends at the
  number of entries; every entry's feature is within the layout;
* numbers: ``value`` finite and >= 0, floating-point weights finite,
  ``n_samples`` >= 0.

A failure raises :class:`ForestProblem` naming the array; the model loader
turns it into one :class:`~facesegment.errors.DataError` line naming the file.
"""

import threading
import weakref

import numpy as np

from ._arrays import SPARSE_ARRAY_NAMES

#: Integer node arrays (int32 in the format) and the other integer arrays.
NODE_INT = ("left", "right", "feature", "feature2", "oblique", "depth", "n_samples")
#: Storage types of dense oblique weights (int16 rows are stored zigzag-encoded).
WEIGHT_DTYPES = ("float32", "float16", "int8", "int16")
#: Storage types of sparse weights.
SPARSE_WEIGHT_DTYPES = ("float32", "float16", "int8", "int16")
#: Most nodes a forest may have (node indices are int32 in every kernel).
MAX_NODES = 2 ** 31 - 2


class ForestProblem(ValueError):
    """A forest's arrays are inconsistent: ``array`` names the first bad array."""

    def __init__(self, array, problem):
        self.array = array
        self.problem = problem
        super().__init__(f"{array}: {problem}")


def _fail(array, problem):
    raise ForestProblem(array, problem)


def _array(fa, name, kinds, ndim):
    a = getattr(fa, name)
    if not isinstance(a, np.ndarray):
        _fail(name, f"is missing (got {type(a).__name__})")
    if a.dtype.kind not in kinds:
        _fail(name, f"has dtype {a.dtype}, expected {'an integer' if kinds == 'iu' else 'a float'} "
              "type")
    if a.ndim != ndim:
        _fail(name, f"has {a.ndim} dimensions, expected {ndim}")
    return a


def _finite(a):
    """Whether every entry of the float array ``a`` is finite (two reductions, no
    temporary: min and max propagate NaN)."""
    return a.size == 0 or bool(np.isfinite(a.min()) and np.isfinite(a.max()))


def _first(mask):
    """Index of the first True of ``mask`` (as an int)."""
    return int(np.flatnonzero(mask)[0])


def _in_range(name, a, low, high, where=None):
    """Every ``a[where]`` in ``[low, high)``; names the first node that is not."""
    v = a if where is None else a[where]
    if v.size == 0:
        return
    lo, hi = v.min(), v.max()
    if lo >= low and hi < high:
        return
    bad = (v < low) | (v >= high)
    i = _first(bad)
    node = i if where is None else int(np.flatnonzero(where)[i])
    _fail(name, f"entry {node} is {int(v[i])}, outside [{low}, {high})")


def verify_forest(fa, n_classes=None, n_features=None, signed_values=False):
    """Check every array of ``fa``; return it with the format's dtypes.

    The checks: array kinds, dimensions and lengths, the node count, index
    ranges, the tree structure (``right == left + 1``, one parent per node,
    consistent depths), exactly one split kind per internal node, the sparse
    rows, ``missing_left``, finite values and weights, non-negative
    ``n_samples``.

    Parameters
    ----------
    fa : ForestArrays
        The forest.
    n_classes : int or None, default=None
        The number of columns ``value`` must have (None: any, at least 1).
    n_features : int or None, default=None
        The number of columns ``weights`` must have (None: any, at least 1).
    signed_values : bool, default=False
        ``value`` holds a regression forest's leaf means (any finite number)
        rather than class probabilities (finite and >= 0).

    Returns
    -------
    ForestArrays
        ``fa`` with int32 node arrays, float32 thresholds and values, int32
        ``sparse``, int64 ``sparse_ptr`` and uint16 or int32 ``sparse_index``
        (arrays that already have them are not copied; ``fa`` itself when none
        changes).

    Raises
    ------
    ForestProblem
        A ``ValueError`` naming the first bad array.
    """
    roots = _array(fa, "roots", "iu", 1)
    left = _array(fa, "left", "iu", 1)
    n = left.shape[0]
    if n > MAX_NODES:
        _fail("left", f"has {n} nodes, more than {MAX_NODES}")
    node = {name: _array(fa, name, "iu", 1) for name in NODE_INT}
    threshold = _array(fa, "threshold", "f", 1)
    for name, a in list(node.items()) + [("threshold", threshold)]:
        if a.shape != (n,):
            _fail(name, f"has {a.shape[0]} entries but left has {n}")
    value = _array(fa, "value", "f", 2)
    if value.shape[0] != n or value.shape[1] < 1 or (
            n_classes is not None and value.shape[1] != n_classes):
        _fail("value", f"has shape {value.shape}, expected ({n}, "
              f"{'n_classes' if n_classes is None else n_classes})")
    weights = getattr(fa, "weights")
    if not isinstance(weights, np.ndarray) or weights.ndim != 2 \
            or str(weights.dtype) not in WEIGHT_DTYPES:
        _fail("weights", f"is {getattr(weights, 'dtype', type(weights).__name__)}"
              f"{list(getattr(weights, 'shape', ()))}, expected a 2-D array of "
              f"{'/'.join(WEIGHT_DTYPES)}")
    p = weights.shape[1]
    if p < 1 or (n_features is not None and p != n_features):
        _fail("weights", f"has {p} columns, expected "
              f"{'at least 1' if n_features is None else n_features} (the features)")
    if roots.size == 0:
        _fail("roots", "is empty (a forest has at least one tree)")
    if n == 0:
        _fail("left", "is empty (a forest has at least one node)")
    _in_range("roots", roots, 0, n)
    n_sparse = _verify_sparse(fa, n, p)
    _verify_structure(roots, node, n)
    _verify_splits(node, fa.sparse, n, p, weights.shape[0], n_sparse)
    missing = getattr(fa, "missing_left", None)
    if missing is not None and (np.shape(missing) != (n,) or not np.isin(missing, (0, 1)).all()):
        _fail("missing_left", f"must hold one 0 or 1 per node ({n}); got shape "
              f"{np.shape(missing)}")
    if signed_values and not _finite(value):
        _fail("value", f"node {_first(~np.isfinite(value).all(axis=1))} has an infinite or "
              "NaN value")
    if not signed_values and not (_finite(value) and value.min() >= 0):
        _fail("value", f"node {_first(~(np.isfinite(value) & (value >= 0)).all(axis=1))} "
              "has a negative, infinite or NaN class probability")
    if weights.dtype.kind == "f" and not _finite(weights):
        _fail("weights", f"row {_first(~np.isfinite(weights).all(axis=1))} has an infinite "
              "or NaN weight")
    if node["n_samples"].size and node["n_samples"].min() < 0:
        _fail("n_samples", f"entry {_first(node['n_samples'] < 0)} is negative")
    return _normalised(fa)


def _verify_structure(roots, node, n):
    left, right, depth = node["left"], node["right"], node["depth"]
    if left.min() < -1:
        _fail("left", f"entry {_first(left < -1)} is {int(left[_first(left < -1)])} "
              "(a child index or -1 at a leaf)")
    internal = left >= 0
    leaf = ~internal
    _in_range("left", left, 0, n - 1, internal)
    if (right[leaf] != -1).any():
        i = int(np.flatnonzero(leaf)[_first(right[leaf] != -1)])
        _fail("right", f"entry {i} is {int(right[i])} at a leaf (left = -1), expected -1")
    kids = left[internal].astype(np.int64)
    if (right[internal] != kids + 1).any():
        i = int(np.flatnonzero(internal)[_first(right[internal] != kids + 1)])
        _fail("right", f"entry {i} is {int(right[i])}, expected left + 1 = {int(left[i]) + 1}")
    parents = np.bincount(kids, minlength=n) + np.bincount(kids + 1, minlength=n)
    if parents.max(initial=0) > 1:
        _fail("left", f"node {_first(parents > 1)} is the child of two nodes")
    if parents[roots].any():
        _fail("roots", f"tree {_first(parents[roots] > 0)} starts at node "
              f"{int(roots[_first(parents[roots] > 0)])}, which is another node's child")
    if depth.min() < 0:
        _fail("depth", f"entry {_first(depth < 0)} is negative")
    top = parents == 0
    if depth[top].any():
        i = int(np.flatnonzero(top)[_first(depth[top] != 0)])
        _fail("depth", f"entry {i} is {int(depth[i])} at a root, expected 0")
    want = depth[internal].astype(np.int64) + 1
    for name, child in (("left", kids), ("right", kids + 1)):
        bad = depth[child] != want
        if bad.any():
            i = int(np.flatnonzero(internal)[_first(bad)])
            _fail("depth", f"node {int(child[_first(bad)])} ({name} child of node {i}) has "
                  f"depth {int(depth[child[_first(bad)]])}, expected {int(want[_first(bad)])} "
                  "(a child pointer loop or a tampered depth)")


def _verify_splits(node, sparse, n, p, n_oblique, n_sparse):
    feature, feature2, oblique = node["feature"], node["feature2"], node["oblique"]
    _in_range("feature", feature, -1, p)
    _in_range("feature2", feature2, -1, p)
    _in_range("oblique", oblique, -1, n_oblique)
    internal = node["left"] >= 0
    kinds = (feature >= 0).astype(np.int8) + (oblique >= 0)
    if sparse is not None:
        _in_range("sparse", sparse, -1, n_sparse)
        kinds += sparse >= 0
    bad = internal & (kinds != 1)
    if bad.any():
        i = _first(bad)
        _fail("oblique" if oblique[i] != -1 else "feature",
              f"node {i} is internal with {int(kinds[i])} split kinds (feature "
              f"{int(feature[i])}, oblique {int(oblique[i])}"
              f"{'' if sparse is None else f', sparse {int(sparse[i])}'}); expected exactly one")
    bad = internal & (feature2 >= 0) & (feature < 0)
    if bad.any():
        _fail("feature2", f"node {_first(bad)} has a second probe but no first one")


def _verify_sparse(fa, n, p):
    """The sparse rows of ``fa`` checked; returns their number (0 without them)."""
    present = [getattr(fa, k) is not None for k in SPARSE_ARRAY_NAMES]
    if not any(present):
        return 0
    if not all(present):
        _fail(SPARSE_ARRAY_NAMES[present.index(False)], "is missing (the sparse arrays "
              "come together)")
    sparse = _array(fa, "sparse", "iu", 1)
    ptr = _array(fa, "sparse_ptr", "iu", 1)
    index = _array(fa, "sparse_index", "iu", 1)
    weight = fa.sparse_weight
    if sparse.shape != (n,):
        _fail("sparse", f"has {sparse.shape[0]} entries but left has {n}")
    if not isinstance(weight, np.ndarray) or weight.ndim != 1 \
            or str(weight.dtype) not in SPARSE_WEIGHT_DTYPES:
        _fail("sparse_weight", f"is {getattr(weight, 'dtype', type(weight).__name__)}, "
              f"expected a 1-D array of {'/'.join(SPARSE_WEIGHT_DTYPES)}")
    nnz = index.shape[0]
    if weight.shape != (nnz,):
        _fail("sparse_weight", f"has {weight.shape[0]} entries, sparse_index {nnz}")
    if ptr.size == 0 or ptr[0] != 0 or ptr[-1] != nnz:
        _fail("sparse_ptr", f"runs from {ptr[0] if ptr.size else None} to "
              f"{ptr[-1] if ptr.size else None}, expected 0 to {nnz} (the entries)")
    if ptr.size > 1 and (np.diff(ptr.astype(np.int64)) < 0).any():
        _fail("sparse_ptr", f"decreases at row {_first(np.diff(ptr.astype(np.int64)) < 0)}")
    _in_range("sparse_index", index, 0, p)
    if weight.dtype.kind == "f" and not _finite(weight):
        _fail("sparse_weight", f"entry {_first(~np.isfinite(weight))} is infinite or NaN")
    return ptr.shape[0] - 1


_VERIFIED = {}
_VERIFIED_SIZE = 16
_VERIFIED_LOCK = threading.Lock()


def verified(fa, signed_values=False):
    """:func:`verify_forest` of ``fa``, memoised while its arrays live.

    Every path from arrays to a kernel (estimators' ``predict_proba``/``apply``,
    dense inference) calls it, so a forest built or modified in memory is
    checked once, before its first kernel.  Arrays modified in place are not
    noticed: replace them (as ``_replace`` does).

    Parameters
    ----------
    fa : ForestArrays
        The forest.
    signed_values : bool, default=False
        As in :func:`verify_forest`.

    Returns
    -------
    ForestArrays
        As :func:`verify_forest` returns it.

    Raises
    ------
    ForestProblem
        As :func:`verify_forest`.
    """
    owners = tuple(a for a in fa if isinstance(a, np.ndarray))
    key = (signed_values,) + tuple(id(a) for a in owners)
    with _VERIFIED_LOCK:
        hit = _VERIFIED.get(key)
    if hit is not None and all(r() is a for r, a in zip(hit[0], owners)):
        return hit[1]
    good = verify_forest(fa, signed_values=signed_values)
    with _VERIFIED_LOCK:
        _VERIFIED[key] = (tuple(weakref.ref(a) for a in owners), good)
        for k in [k for k, v in _VERIFIED.items() if any(r() is None for r in v[0])]:
            del _VERIFIED[k]
        while len(_VERIFIED) > _VERIFIED_SIZE:
            del _VERIFIED[next(iter(_VERIFIED))]
    return good


def _normalised(fa):
    """``fa`` with the format's dtypes (values are already checked to fit)."""
    change = {}
    for name in ("roots",) + NODE_INT:
        a = getattr(fa, name)
        if a.dtype != np.int32:
            change[name] = a.astype(np.int32)
    for name in ("threshold", "value"):
        a = getattr(fa, name)
        if a.dtype != np.float32:
            change[name] = a.astype(np.float32)
    if fa.sparse is not None:
        if fa.sparse.dtype != np.int32:
            change["sparse"] = fa.sparse.astype(np.int32)
        if fa.sparse_ptr.dtype != np.int64:
            change["sparse_ptr"] = fa.sparse_ptr.astype(np.int64)
        if fa.sparse_index.dtype not in (np.uint16, np.int32):
            change["sparse_index"] = fa.sparse_index.astype(np.int32)
    return fa._replace(**change) if change else fa


__all__ = ["ForestProblem", "verify_forest", "verified", "WEIGHT_DTYPES", "MAX_NODES"]
