"""Evaluating splits and traversing flat forests (Numba kernels).

Split values are computed exactly as in training (see ``_grow``): axis
``float32(x[f])``, two-probe ``float32(x[a]) - float32(x[b])`` and oblique
``sum_j w[j] * float32(x[j])`` accumulated in float32
(:func:`oblique_value`), sparse oblique the exact ordered float32 sum of
:func:`facesegment.forest._sparse.sparse_value`, compared with ``<= threshold``
(float32).  The kernels take the sparse rows as ``(sp_ptr int64, sp_index int32,
sp_weight float32)`` (:func:`kernel_sparse`).
"""

import threading
import weakref

import numpy as np
from numba import prange

from .._jit import NJIT, PARALLEL, njit
from ._arrays import complete
from ._dots import dot
from ._sparse import sparse_value, sparse_values


@njit(**NJIT)
def oblique_value(w, x):
    """``w @ x`` accumulated in float32, in a fixed order.

    The order is that of :func:`facesegment.forest._dots.dot`, the one the CO2
    split search uses: the same bits on every CPU.

    Parameters
    ----------
    w : float32 (p,), C-contiguous
        The oblique row.
    x : uint8 or float32 (>= p,), C-contiguous
        One sample.

    Returns
    -------
    float32
        The split value.
    """
    return dot(w, x)


@njit(**NJIT)
def oblique_values(w, X, idx):
    """float32 (m,) values ``w @ X[idx[i]]`` (see :func:`oblique_value`).

    Parameters
    ----------
    w : float32 (p,), C-contiguous
        The oblique row.
    X : uint8 or float32 (n, p), C-contiguous
        The samples.
    idx : int64 (m,)
        The rows evaluated.

    Returns
    -------
    float32 (m,)
        The split value of each row of ``idx``.
    """
    out = np.empty(idx.shape[0], dtype=np.float32)
    for i in range(idx.shape[0]):
        out[i] = oblique_value(w, X[idx[i]])
    return out


@njit(**NJIT)
def goes_left_any(x, f, f2, ob, sp, thr, weights, sp_ptr, sp_index, sp_w):
    """:func:`goes_left` for any node, sparse oblique ones included.

    Parameters
    ----------
    x : uint8 or float32 (p,)
        One sample.
    f, f2, ob : int
        The node's ``feature``, ``feature2`` and ``oblique`` entries.
    sp : int
        The node's sparse row (>= 0), or -1.
    thr : float32
        The node's threshold.
    weights : float32 (n_oblique or 1, p)
        Dense oblique rows (:func:`kernel_weights`).
    sp_ptr, sp_index, sp_w : int64, int32, float32
        The sparse rows (:func:`kernel_sparse`).

    Returns
    -------
    bool
        Whether the split value is ``<= thr``.
    """
    if sp >= 0:
        return sparse_value(sp_index, sp_w, sp_ptr[sp], sp_ptr[sp + 1], x) <= thr
    return goes_left(x, f, f2, ob, thr, weights)


@njit(**NJIT)
def goes_left(x, f, f2, ob, thr, weights):
    """Whether the sample ``x`` goes left at a node (a dense split).

    Parameters
    ----------
    x : uint8 or float32 (p,)
        One sample.
    f, f2, ob : int
        The node's ``feature``, ``feature2`` (>= 0: two-probe) and ``oblique``
        (>= 0: row of ``weights``) entries.
    thr : float32
        The node's threshold.
    weights : float32 (n_oblique or 1, p)
        Dense oblique rows.

    Returns
    -------
    bool
        Whether the split value is ``<= thr``.
    """
    if ob >= 0:
        v = oblique_value(weights[ob], x)
    elif f2 >= 0:
        v = np.float32(x[f]) - np.float32(x[f2])
    else:
        v = np.float32(x[f])
    return v <= thr


@njit(**NJIT)
def split_by_mask(idx, buf, left):
    """Stable in-place partition of ``idx`` by the bool mask ``left``: left samples first.

    Parameters
    ----------
    idx : int64 (m,)
        The samples; reordered in place.
    buf : int64 (>= m,)
        Scratch.
    left : bool (m,)
        Whether each sample of ``idx`` goes left.

    Returns
    -------
    int
        The number going left.
    """
    nl = 0
    nr = 0
    for i in range(idx.shape[0]):
        if left[i]:
            idx[nl] = idx[i]
            nl += 1
        else:
            buf[nr] = idx[i]
            nr += 1
    for i in range(nr):
        idx[nl + i] = buf[i]
    return nl


@njit(**NJIT)
def partition(X, idx, buf, f, f2, ob, thr, weights):
    """Stable in-place partition of ``idx`` by the node's split: left samples first.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    idx : int64 (m,)
        The node's samples; reordered in place.
    buf : int64 (>= m,)
        Scratch.
    f, f2, ob : int
        The node's ``feature``, ``feature2`` and ``oblique`` entries.
    thr : float32
        The node's threshold.
    weights : float32 (n_oblique or 1, p)
        Dense oblique rows.

    Returns
    -------
    int
        The number going left.
    """
    left = np.empty(idx.shape[0], dtype=np.bool_)
    for i in range(idx.shape[0]):
        left[i] = goes_left(X[idx[i]], f, f2, ob, thr, weights)
    return split_by_mask(idx, buf, left)


def partition_sparse(X, idx, buf, index, weight, thr):
    """:func:`partition` for one sparse split.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    idx : int64 (m,)
        The node's samples; reordered in place.
    buf : int64 (>= m,)
        Scratch.
    index : int32 (k,)
        The split's features.
    weight : float32 (k,)
        The split's weights.
    thr : float
        The threshold (compared as float32).

    Returns
    -------
    int
        The number going left.
    """
    return split_by_mask(idx, buf, sparse_values(X, idx, index, weight) <= np.float32(thr))


def pack_nodes(fa):
    """Pack a forest's node arrays into one int32 (n_nodes, 4) table (16 bytes/node).

    Columns: left child (-1 at leaves; the right child is always ``left + 1``
    since children are created together), feature (``-2 - row`` for an oblique
    node using ``weights[row]`` or sparse row ``row``), feature2 (-1 unless
    two-probe; -2 marks a sparse oblique node), and the threshold's float32
    bits.  Four nodes share a cache line, and depth is counted during
    traversal, so prediction touches one line per node.

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    nodes : int32 ndarray of shape (n_nodes, 4)
        The table.
    nodes_f : float32 ndarray of shape (n_nodes, 4)
        Its float32 view (column 3 is the threshold).

    Raises
    ------
    ValueError
        When a right child is not next to its left sibling.
    """
    internal = fa.left >= 0
    if (fa.right[internal] != fa.left[internal] + 1).any():
        raise ValueError("forest arrays have right children not next to left ones; "
                         "they were not written by facesegment's grower")
    nodes = np.empty((fa.n_nodes, 4), dtype=np.int32)
    nodes[:, 0] = fa.left
    fa = complete(fa)
    nodes[:, 1] = np.where(fa.oblique >= 0, -2 - fa.oblique,
                           np.where(fa.sparse >= 0, -2 - fa.sparse, fa.feature))
    nodes[:, 2] = np.where(fa.sparse >= 0, -2, fa.feature2)
    nodes_f = nodes.view(np.float32)
    nodes_f[:, 3] = fa.threshold
    return nodes, nodes_f


_CACHE = {}
_CACHE_SIZE = 8
#: Guards ``_CACHE``: threads predicting at once look up, insert and evict concurrently.
_CACHE_LOCK = threading.Lock()


def _cached(kind, owners, build):
    """``build()`` memoised on (kind, the arrays ``owners``) while they all live.

    The cache holds weak references to the owners (keyed by their ids), so a
    forest that is no longer used drops out, and a new forest never gets a
    stale entry; at most ``_CACHE_SIZE`` entries are kept.  Thread-safe:
    ``build()`` runs outside the lock (two threads may build the same value
    once each).  Arrays modified in place are not noticed: replace them.
    """
    key = (kind,) + tuple(id(o) for o in owners)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None and all(r() is o for r, o in zip(hit[0], owners)):
        return hit[1]
    value = build()
    refs = tuple(weakref.ref(o) for o in owners)
    with _CACHE_LOCK:
        _CACHE[key] = (refs, value)
        for k in [k for k, v in _CACHE.items() if any(r() is None for r in v[0])]:
            del _CACHE[k]
        while len(_CACHE) > _CACHE_SIZE:
            del _CACHE[next(iter(_CACHE))]
    return value


def packed_nodes(fa):
    """:func:`pack_nodes` of the forest ``fa``, memoised while its arrays live.

    Prediction stores nothing on the estimator.

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    nodes, nodes_f : ndarray
        As :func:`pack_nodes` returns them.
    """
    owners = (fa.left, fa.right, fa.feature, fa.feature2, fa.oblique, fa.threshold)
    if fa.sparse is not None:
        owners += (fa.sparse,)
    return _cached("nodes", owners, lambda: pack_nodes(fa))


@njit(**NJIT)
def preorder_nodes(left, roots, order, new_id, stack):
    """Each tree's nodes in depth-first order, sibling pairs kept together.

    A node's two children are placed next to each other right after the node
    (the first time it is reached), then the left child's subtree is laid out
    before the right child's; the trees follow each other in ``roots`` order.

    Parameters
    ----------
    left : int32 (n_nodes,)
        Left child of each node (-1 at leaves); the right child is ``left + 1``.
    roots : int32 (n_trees,)
        Each tree's root.
    order : int64 (n_nodes,)
        Written: ``order[k]`` is the node placed k-th.
    new_id : int64 (n_nodes,)
        Written: each reached node's place (unreached nodes are left as they are).
    stack : int64 (>= 2 * depth + 2,)
        Scratch.

    Returns
    -------
    int
        The number of nodes placed (every node reached from a root).
    """
    k = 0
    for t in range(roots.shape[0]):
        r = roots[t]
        new_id[r] = k
        order[k] = r
        k += 1
        stack[0] = r
        sp = 1
        while sp > 0:
            sp -= 1
            lc = left[stack[sp]]
            if lc >= 0:
                new_id[lc] = k
                order[k] = lc
                new_id[lc + 1] = k + 1
                order[k + 1] = lc + 1
                k += 2
                stack[sp] = lc + 1
                stack[sp + 1] = lc
                sp += 2
    return k


def pack_preorder(fa):
    """:func:`pack_nodes` with each tree's nodes in depth-first order
    (:func:`preorder_nodes`), and the class distributions in the same order.

    A pixel's path then stays within fewer cache lines than in the grower's
    order; every prediction is the same (the same trees, only renumbered).

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    roots : int32 (n_trees,)
    nodes, nodes_f : int32, float32 (n_reached, 4)
        The renumbered node table and its float32 view.
    value : float32 (n_reached, n_classes)
    """
    nodes, _ = pack_nodes(fa)
    n = fa.n_nodes
    order = np.empty(n, np.int64)
    new_id = np.full(n, -1, np.int64)
    stack = np.empty(2 * int(fa.depth.max(initial=0)) + 2, np.int64)
    k = preorder_nodes(fa.left, fa.roots, order, new_id, stack)
    order = order[:k]
    out = nodes[order]
    internal = out[:, 0] >= 0
    out[internal, 0] = new_id[out[internal, 0]].astype(np.int32)
    value = np.ascontiguousarray(np.asarray(fa.value)[order])
    return new_id[fa.roots].astype(np.int32), out, out.view(np.float32), value


def preordered(fa):
    """:func:`pack_preorder` of ``fa``, memoised while its arrays live.

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    roots, nodes, nodes_f, value
        As :func:`pack_preorder` returns them.
    """
    owners = (fa.left, fa.right, fa.feature, fa.feature2, fa.oblique, fa.threshold, fa.value,
              fa.roots)
    if fa.sparse is not None:
        owners += (fa.sparse,)
    return _cached("preorder", owners, lambda: pack_preorder(fa))


def kernel_sparse(fa):
    """The sparse rows as the kernels read them, converted once.

    Memoised while the arrays live.

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    sp_ptr : int64 ndarray of shape (n_sparse + 1,)
    sp_index : int32 ndarray of shape (nnz,)
    sp_weight : float32 ndarray of shape (nnz,)
        The sparse rows; one-entry zero arrays when the forest has none.
    """
    if fa.sparse_ptr is None or fa.sparse_ptr.shape[0] <= 1:
        return (np.zeros(1, np.int64), np.zeros(1, np.int32), np.zeros(1, np.float32))

    def build():
        return (np.ascontiguousarray(fa.sparse_ptr, dtype=np.int64),
                np.ascontiguousarray(fa.sparse_index, dtype=np.int32),
                np.ascontiguousarray(fa.sparse_weight, dtype=np.float32))

    return _cached("sparse", (fa.sparse_ptr, fa.sparse_index, fa.sparse_weight), build)


def kernel_weights(fa):
    """The oblique weights as the kernels read them: C-contiguous float32, at least one row.

    float16 storage is converted once and memoised.

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    float32 ndarray of shape (max(n_oblique, 1), p)
        ``fa.weights`` itself when already fit, else a converted copy (one zero
        row, of at least one column, when the forest has no oblique row).
    """
    w = fa.weights
    if w.dtype == np.float32 and w.shape[0] > 0 and w.flags.c_contiguous:
        return w

    def build():
        if w.shape[0] == 0:
            return np.zeros((1, max(w.shape[1], 1)), dtype=np.float32)
        return np.ascontiguousarray(w, dtype=np.float32)

    return _cached("weights", (w,), build)


#: Samples traversed in lockstep (their independent node loads overlap).
BLOCK = 32


@njit(**NJIT)
def _proba_block(X, start, stop, rows, cur, roots, nodes, nodes_f, value, weights, sp_ptr,
                 sp_index, sp_w, max_depth, n_trees, out):
    """Probabilities of samples ``start..stop-1``, one level of every sample per sweep.

    Each tree is walked by all the block's samples in lockstep.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    start, stop : int
        The block's rows, ``stop - start <= BLOCK``.
    rows : X's dtype (BLOCK, p)
        Scratch: the block's copied rows.
    cur : int64 (BLOCK,)
        Scratch: the samples' current nodes.
    roots : int32 (n_trees,)
        Each tree's root.
    nodes, nodes_f : int32, float32 (n_nodes, 4)
        The packed node table and its float32 view (:func:`pack_nodes`).
    value : float32 (n_nodes, n_classes)
        Class distribution of each node.
    weights : float32 (n_oblique or 1, p)
        Dense oblique rows (:func:`kernel_weights`).
    sp_ptr, sp_index, sp_w : int64, int32, float32
        The sparse rows (:func:`kernel_sparse`).
    max_depth : int
        Stop at nodes of this depth (-1: no limit).
    n_trees : int
        Number of trees used (the first ones).
    out : float64 (n, n_classes)
        Rows ``start..stop-1`` written in place: the mean distribution.
    """
    nb = stop - start
    n_classes = value.shape[1]
    for j in range(nb):
        rows[j, :] = X[start + j]
        for c in range(n_classes):
            out[start + j, c] = 0.0
    for t in range(n_trees):
        for j in range(nb):
            cur[j] = roots[t]
        d = 0
        active = True
        while active and (max_depth < 0 or d < max_depth):
            active = False
            for j in range(nb):
                node = cur[j]
                if nodes[node, 0] < 0:
                    continue
                active = True
                f = nodes[node, 1]
                if f >= 0:
                    f2 = nodes[node, 2]
                    if f2 >= 0:
                        v = np.float32(rows[j, f]) - np.float32(rows[j, f2])
                    else:
                        v = np.float32(rows[j, f])
                elif nodes[node, 2] == -2:
                    r = -2 - f
                    v = sparse_value(sp_index, sp_w, sp_ptr[r], sp_ptr[r + 1], rows[j])
                else:
                    v = oblique_value(weights[-2 - f], rows[j])
                cur[j] = nodes[node, 0] + (0 if v <= nodes_f[node, 3] else 1)
            d += 1
        for j in range(nb):
            for c in range(n_classes):
                out[start + j, c] += value[cur[j], c]
    for j in range(nb):
        for c in range(n_classes):
            out[start + j, c] = out[start + j, c] / n_trees


@njit(**PARALLEL)
def predict_proba_packed(X, roots, nodes, nodes_f, value, weights, sp_ptr, sp_index, sp_w,
                         max_depth, n_trees, out):
    """Average the class distributions reached in the first ``n_trees`` trees.

    Blocks of ``BLOCK`` samples are processed in parallel (prange); within a
    block the samples' rows are copied once (sequential reads) and each tree
    is walked by the block's samples in lockstep, so their node loads overlap.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
    roots : int32 (n_trees,)
    nodes, nodes_f : the packed node table and its float32 view (:func:`pack_nodes`)
    value : float32 (n_nodes, n_classes)
    weights : float32 (n_oblique or 1, p)
    sp_ptr, sp_index, sp_w : the sparse rows (:func:`kernel_sparse`)
    max_depth : int
        Stop at nodes of this depth (-1: no limit).
    n_trees : int
        Number of trees used (the first ones).
    out : float64 (n, n_classes), written in place
    """
    n = X.shape[0]
    n_blocks = (n + BLOCK - 1) // BLOCK
    for b in prange(n_blocks):
        rows = np.empty((BLOCK, X.shape[1]), dtype=X.dtype)
        cur = np.empty(BLOCK, dtype=np.int64)
        _proba_block(X, b * BLOCK, min(n, b * BLOCK + BLOCK), rows, cur, roots, nodes,
                     nodes_f, value, weights, sp_ptr, sp_index, sp_w, max_depth, n_trees, out)


@njit(**NJIT)
def predict_proba_packed_serial(X, roots, nodes, nodes_f, value, weights, sp_ptr, sp_index,
                                sp_w, max_depth, n_trees, out):
    """One-thread :func:`predict_proba_packed` (small inputs).

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    roots : int32 (n_trees,)
        Each tree's root.
    nodes, nodes_f : int32, float32 (n_nodes, 4)
        The packed node table and its float32 view (:func:`pack_nodes`).
    value : float32 (n_nodes, n_classes)
        Class distribution of each node.
    weights : float32 (n_oblique or 1, p)
        Dense oblique rows (:func:`kernel_weights`).
    sp_ptr, sp_index, sp_w : int64, int32, float32
        The sparse rows (:func:`kernel_sparse`).
    max_depth : int
        Stop at nodes of this depth (-1: no limit).
    n_trees : int
        Number of trees used (the first ones).
    out : float64 (n, n_classes)
        Written in place: the mean distribution of each sample.
    """
    n = X.shape[0]
    rows = np.empty((BLOCK, X.shape[1]), dtype=X.dtype)
    cur = np.empty(BLOCK, dtype=np.int64)
    for start in range(0, n, BLOCK):
        _proba_block(X, start, min(n, start + BLOCK), rows, cur, roots, nodes, nodes_f,
                     value, weights, sp_ptr, sp_index, sp_w, max_depth, n_trees, out)


@njit(**PARALLEL)
def apply_kernel(X, roots, left, right, feature, feature2, oblique, threshold,
                 depth, weights, sparse, sp_ptr, sp_index, sp_w, max_depth, out):
    """Node index reached by each sample in each tree (any split kinds), parallel over samples.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    roots : int32 (n_trees,)
        Each tree's root.
    left, right, feature, feature2, oblique : int32 (n_nodes,)
        The forest's node arrays.
    threshold : float32 (n_nodes,)
        ``value <= threshold`` goes left.
    depth : int32 (n_nodes,)
        Each node's depth.
    weights : float32 (n_oblique or 1, p)
        Dense oblique rows (:func:`kernel_weights`).
    sparse : int32 (n_nodes,)
        Each node's sparse row, -1 for none.
    sp_ptr, sp_index, sp_w : int64, int32, float32
        The sparse rows (:func:`kernel_sparse`).
    max_depth : int
        Stop at nodes of this depth (-1: no limit).
    out : int32 (n, n_trees)
        Written in place: the node reached.
    """
    n = X.shape[0]
    for i in prange(n):
        for t in range(roots.shape[0]):
            node = roots[t]
            while left[node] >= 0 and (max_depth < 0 or depth[node] < max_depth):
                if goes_left_any(X[i], feature[node], feature2[node], oblique[node],
                                 sparse[node], threshold[node], weights, sp_ptr, sp_index,
                                 sp_w):
                    node = left[node]
                else:
                    node = right[node]
            out[i, t] = node


@njit(**PARALLEL)
def apply_axis_packed(X, roots, nodes, nodes_f, max_depth, out):
    """:func:`apply_kernel` for a forest of axis-aligned splits only, on its packed node table.

    The table (:func:`pack_nodes`) holds four nodes per cache line, the right
    child is ``left + 1``, and depth is counted on the way down.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    roots : int32 (n_trees,)
        Each tree's root.
    nodes, nodes_f : int32, float32 (n_nodes, 4)
        The packed node table and its float32 view.
    max_depth : int
        Stop at nodes of this depth (-1: no limit).
    out : int32 (n, n_trees)
        Written in place: the node reached.
    """
    for i in prange(X.shape[0]):
        x = X[i]
        for t in range(roots.shape[0]):
            node = roots[t]
            d = 0
            while nodes[node, 0] >= 0 and (max_depth < 0 or d < max_depth):
                if np.float32(x[nodes[node, 1]]) <= nodes_f[node, 3]:
                    node = nodes[node, 0]
                else:
                    node = nodes[node, 0] + 1
                d += 1
            out[i, t] = node


def axis_only(fa):
    """Whether every split of ``fa`` is axis-aligned (``x[f] <= t``).

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    bool
        False when an internal node is two-probe, dense or sparse oblique.
    """
    inner = fa.left >= 0
    return not ((fa.feature2[inner] >= 0).any() or (fa.oblique[inner] >= 0).any()
                or (fa.sparse is not None and (fa.sparse[inner] >= 0).any()))


@njit(**PARALLEL)
def oob_axis_packed(X, roots, nodes, nodes_f, value, inbag, proba, count):
    """Out-of-bag sums of an axis-aligned forest, parallel over rows.

    For each row ``i``, the leaf distributions (``value``) of the trees ``t``
    with ``inbag[t, i]`` False are added to ``proba[i]`` (in tree order) and
    counted in ``count[i]``.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The training samples (no NaN).
    roots : int32 (n_trees,)
        Each tree's root.
    nodes, nodes_f : int32, float32 (n_nodes, 4)
        The packed node table and its float32 view (:func:`pack_nodes`).
    value : float32 (n_nodes, n_classes)
        Class distribution of each node.
    inbag : bool (n_trees, n)
        Whether tree ``t`` drew row ``i``.
    proba : float64 (n, n_classes)
        Added to in place.
    count : int64 (n,)
        Incremented in place.
    """
    for i in prange(X.shape[0]):
        x = X[i]
        for t in range(roots.shape[0]):
            if inbag[t, i]:
                continue
            node = roots[t]
            while nodes[node, 0] >= 0:
                if np.float32(x[nodes[node, 1]]) <= nodes_f[node, 3]:
                    node = nodes[node, 0]
                else:
                    node = nodes[node, 0] + 1
            for c in range(value.shape[1]):
                proba[i, c] += value[node, c]
            count[i] += 1
