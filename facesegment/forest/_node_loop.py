"""The node loop of the whole-tree kernels (CART, regression, density).

:func:`split_nodes_kernel` is the Numba counterpart of
:func:`facesegment.forest._grow.split_nodes`: it grows one tree breadth first
on the tree's rows and leaves to a criterion only what is its own.  The
tree's rows are one array of local ids (``0..m-1``, indices into ``rows``);
each node owns a contiguous segment of it, partitioned in place (stably) when
the node splits.  Nodes are numbered in the order they are created and
processed in that order (a FIFO), the right child always ``left + 1``, so
truncating a tree at depth d gives exactly the tree grown with
``max_depth=d``.

A criterion plugs in three jitted functions and its per-tree ``state`` (a
tuple of arrays and settings, created by the criterion's entry kernel):

* ``visit(state, node, ids, s, e) -> bool``: the node's own bookkeeping
  (value, sample count) on its local ids ``ids[s:e]``; whether the
  criterion's stopping rules let it split (``max_depth`` is the loop's);
* ``find(state, node, ids, s, e) -> (feature, threshold, missing_left)``:
  the node's split ``x[feature] <= threshold`` (feature -1: a leaf), NaN
  sent left when ``missing_left == 1``, right otherwise (-1: the node had
  no missing value);
* ``split(state, node, ids, s, e, nl, missing_left, child)``: called once
  the rows are partitioned (``ids[s:s + nl]`` go left) and the children
  numbered ``child`` and ``child + 1``: what the criterion keeps per split
  (the side of missing values, per-child state).

Each criterion's entry kernel (:func:`facesegment.forest._cart_kernels.cart_nodes`,
:func:`facesegment.forest._regression_kernels.regression_nodes`,
:func:`facesegment.forest._density_kernels.density_nodes`) calls this loop with
its own functions: Numba compiles one specialisation per set of functions,
with direct calls (no function pointers), into the entry kernel, which is
cached on disk with it.  (Called from Python with functions as arguments, the
loop would compile anew in every process: its cache key would hold the
functions' identities.)
"""

import numpy as np

from .._jit import INLINE, NJIT, njit


@njit(**NJIT)
def node_capacity(m):
    """Most nodes a tree of ``m`` rows can have (``2m - 1``, at least 1): the
    length of the per-node arrays a criterion's ``state`` holds."""
    return max(2 * m - 1, 1)


@njit(**INLINE)
def split_nodes_kernel(X, rows, max_depth, visit, find, split, state):
    """Grow one tree breadth first: the shared node loop (see the module docstring).

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p)
        The data (float X may hold NaN); a split sends row ``r`` left when
        ``float32(X[r, feature]) <= threshold``.
    rows : ndarray int64, shape (m,)
        The tree's rows; the loop's local id ``i`` is row ``rows[i]``.
    max_depth : int
        Nodes at this depth are leaves (-1: no limit).
    visit, find, split : jitted functions
        The criterion's pieces (module docstring), each called with ``state``
        first.
    state : tuple
        The criterion's per-tree arrays and settings (per-node arrays of
        :func:`node_capacity` entries).

    Returns
    -------
    n_nodes : int
    left, right, feature : ndarray int32, shape (n_nodes,)
        Children (-1 at a leaf) and split features.
    threshold : ndarray float32, shape (n_nodes,)
    depth : ndarray int32, shape (n_nodes,)
    ids : ndarray int64, shape (m,)
        The local ids, each node's in ``ids[seg_start[node]:seg_end[node]]``.
    seg_start, seg_end : ndarray int64, shape (n_nodes,)
    """
    m = rows.shape[0]
    cap = node_capacity(m)
    left = np.full(cap, -1, np.int32)
    right = np.full(cap, -1, np.int32)
    feature = np.full(cap, -1, np.int32)
    threshold = np.zeros(cap, np.float32)
    depth = np.zeros(cap, np.int32)
    seg_start = np.zeros(cap, np.int64)
    seg_end = np.zeros(cap, np.int64)
    ids = np.arange(m)
    buf = np.empty(m, np.int64)
    seg_end[0] = m
    n_nodes = 1
    node = 0
    while node < n_nodes:
        s = seg_start[node]
        e = seg_end[node]
        d = depth[node]
        if not visit(state, node, ids, s, e) or (max_depth >= 0 and d >= max_depth):
            node += 1
            continue
        f, t, ml = find(state, node, ids, s, e)
        if f < 0:
            node += 1
            continue
        nl = 0
        nr = 0
        for i in range(s, e):  # stable partition, left rows first
            lid = ids[i]
            v = np.float32(X[rows[lid], f])
            if v != v:
                go = ml == 1
            else:
                go = v <= t
            if go:
                ids[s + nl] = lid
                nl += 1
            else:
                buf[nr] = lid
                nr += 1
        for i in range(nr):
            ids[s + nl + i] = buf[i]
        if nl == 0 or nr == 0:  # cannot happen for the cuts the criteria find
            node += 1
            continue
        split(state, node, ids, s, e, nl, ml, n_nodes)
        feature[node] = f
        threshold[node] = t
        left[node] = n_nodes
        right[node] = n_nodes + 1
        seg_start[n_nodes] = s
        seg_end[n_nodes] = s + nl
        seg_start[n_nodes + 1] = s + nl
        seg_end[n_nodes + 1] = e
        depth[n_nodes] = d + 1
        depth[n_nodes + 1] = d + 1
        n_nodes += 2
        node += 1
    return (n_nodes, left[:n_nodes], right[:n_nodes], feature[:n_nodes],
            threshold[:n_nodes], depth[:n_nodes], ids, seg_start[:n_nodes],
            seg_end[:n_nodes])


__all__ = ["split_nodes_kernel", "node_capacity"]
