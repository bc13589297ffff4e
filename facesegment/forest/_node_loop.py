"""The node loop of the whole-tree kernels (CART, regression, density).

One tree is grown breadth first, as by :func:`facesegment.forest._grow.split_nodes`
but inside one Numba call.  The tree's rows are one array of local ids
(``0..m-1``, indices into ``rows``); each node owns a contiguous segment
``ids[s:e]`` of it, partitioned in place (stably) when the node splits.
Nodes are numbered in the order they are created and processed in that order
(a FIFO), the right child always ``left + 1``, so truncating a tree at depth
d gives exactly the tree grown with ``max_depth=d``.

The loop's bookkeeping is here: the node table (:func:`tree_arrays`), each
node's rows and depth rule (:func:`node_rows`), the partition, the split and
the children (:func:`split_node`), the links of the finished tree
(:func:`tree_links`).  A criterion's entry kernel
(:func:`facesegment.forest._cart_kernels.cart_nodes`,
:func:`facesegment.forest._regression_kernels.regression_nodes`,
:func:`facesegment.forest._density_kernels.density_nodes`) is the loop with
its per-node pieces in the body::

    nodes, count, ids, buf, feature, threshold = tree_arrays(m)
    for node in range(feature.shape[0]):  # the nodes in creation order
        if node == count[0]:
            break
        s, e, may_split = node_rows(nodes, node, max_depth)
        ...  # the node's value and stopping rules; its split search
        nl, wl, child = split_node(X, rows, weights, nodes, count, ids, buf, feature,
                                   threshold, node, f, t, missing_left)
        ...  # what the criterion keeps per split (child < 0: not split)
    left, right, depth = tree_links(nodes, count[0])

so the split search reads the criterion's arrays as the entry kernel's own
variables.  Passing the pieces to one loop kernel instead costs per node what
a tree spends on a small node: jitted functions receive the criterion's
arrays in a tuple, which Numba reference-counts array by array at every call
(10-20% slower trees), and a Numba generator saves and restores every array
it holds at each ``yield``.
"""

import numpy as np

from .._jit import INLINE, NJIT, njit

#: Columns of the node table: the node's segment ``ids[start:end]``, its depth,
#: its left child (-1: a leaf; the right child is ``left + 1``).
START, END, DEPTH, LEFT = 0, 1, 2, 3


@njit(**NJIT)
def tree_arrays(m):
    """The arrays of one tree of ``m`` rows being grown: ``(nodes, count, ids,
    buf, feature, threshold)``.

    Parameters
    ----------
    m : int
        The tree's rows (its local ids are ``0..m-1``).

    Returns
    -------
    nodes : ndarray int64, shape (max(2m - 1, 1), 4)
        The node table (columns :data:`START`, :data:`END`, :data:`DEPTH`,
        :data:`LEFT`): the root (node 0, depth 0) holds ``ids[0:m]``; every
        ``LEFT`` is -1 (a leaf), the other entries 0.
    count : ndarray int64, shape (1,)
        The nodes so far: 1 (the root).
    ids : ndarray int64, shape (m,)
        The local ids ``0..m-1``, partitioned in place as nodes split.
    buf : ndarray int64, shape (m,)
        Scratch for the partition (uninitialised).
    feature : ndarray int32, shape (max(2m - 1, 1),)
        Each node's split feature; -1 (a leaf) throughout.
    threshold : ndarray float32, shape (max(2m - 1, 1),)
        Each node's split threshold; 0.0 throughout.
    """
    cap = max(2 * m - 1, 1)
    nodes = np.zeros((cap, 4), np.int64)
    nodes[:, LEFT] = -1
    nodes[0, END] = m
    return (nodes, np.ones(1, np.int64), np.arange(m), np.empty(m, np.int64),
            np.full(cap, -1, np.int32), np.zeros(cap, np.float32))


@njit(**INLINE)
def node_rows(nodes, node, max_depth):
    """``(s, e, may_split)``: the segment ``ids[s:e]`` of ``node``'s local ids, and
    whether ``max_depth`` (-1: none) lets it split.

    Parameters
    ----------
    nodes : ndarray int64, shape (k, 4)
        The node table of :func:`tree_arrays`; read only.
    node : int
        The node (a row of ``nodes``).
    max_depth : int
        The depth limit: a node splits only when its depth is below it;
        negative: no limit.

    Returns
    -------
    s, e : int
        The node's segment ``ids[s:e]`` (columns :data:`START`, :data:`END`).
    may_split : bool
        ``max_depth < 0`` or the node's depth is below ``max_depth``.
    """
    return (nodes[node, START], nodes[node, END],
            max_depth < 0 or nodes[node, DEPTH] < max_depth)


@njit(**INLINE)
def split_node(X, rows, weights, nodes, count, ids, buf, feature, threshold, node, f, t, ml):
    """Split ``node`` by ``float32(x[f]) <= t``: its rows partitioned (stably, left
    rows first), the split and its two children recorded.

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p)
        The data (float X may hold NaN).
    rows : ndarray int64, shape (m,)
        The tree's rows; local id ``i`` is row ``rows[i]``.
    weights : ndarray, shape (m,) or (0,)
        A weight per local id (the criterion's copies), summed over the left
        rows; empty: not summed.
    nodes, count, ids, buf, feature, threshold : ndarray
        :func:`tree_arrays`, updated in place.
    node, f : int
        The node and the split's feature.
    t : float32
        The split's threshold.
    ml : int
        1: NaN goes left; otherwise right.

    Returns
    -------
    nl : int
        The rows sent left, ``ids[s:s + nl]``.
    wl : float
        Their weight (0.0 when ``weights`` is empty).
    child : int
        The left child (the right one is ``child + 1``); -1 when the cut sends
        every row to one side (the node stays a leaf; cannot happen for the
        cuts the criteria find).
    """
    s = nodes[node, START]
    e = nodes[node, END]
    nl = 0
    nr = 0
    sum_left = weights.shape[0] > 0
    wl = 0.0
    for i in range(s, e):
        lid = ids[i]
        v = np.float32(X[rows[lid], f])
        if v != v:
            go = ml == 1
        else:
            go = v <= t
        if go:
            ids[s + nl] = lid
            nl += 1
            if sum_left:
                wl += weights[lid]
        else:
            buf[nr] = lid
            nr += 1
    for i in range(nr):
        ids[s + nl + i] = buf[i]
    if nl == 0 or nr == 0:
        return nl, wl, -1
    c = count[0]
    d = nodes[node, DEPTH] + 1
    nodes[node, LEFT] = c
    nodes[c, START] = s
    nodes[c, END] = s + nl
    nodes[c, DEPTH] = d
    nodes[c + 1, START] = s + nl
    nodes[c + 1, END] = e
    nodes[c + 1, DEPTH] = d
    count[0] = c + 2
    feature[node] = f
    threshold[node] = t
    return nl, wl, c


@njit(**NJIT)
def tree_links(nodes, n_nodes):
    """``(left, right, depth)`` int32 (n_nodes,) of the node table (-1: a leaf).

    Parameters
    ----------
    nodes : ndarray int64, shape (k, 4)
        The node table of :func:`tree_arrays`; read only.
    n_nodes : int
        The nodes grown (``count[0]``); only the first ``n_nodes`` rows are read.

    Returns
    -------
    left : ndarray int32, shape (n_nodes,)
        Each node's left child; -1 at a leaf.
    right : ndarray int32, shape (n_nodes,)
        Each node's right child, ``left + 1``; -1 at a leaf.
    depth : ndarray int32, shape (n_nodes,)
        Each node's depth (the root 0).
    """
    left = nodes[:n_nodes, LEFT].astype(np.int32)
    right = np.where(left >= 0, left + 1, -1).astype(np.int32)
    return left, right, nodes[:n_nodes, DEPTH].astype(np.int32)


__all__ = ["node_rows", "split_node", "tree_arrays", "tree_links", "START", "END",
           "DEPTH", "LEFT"]
