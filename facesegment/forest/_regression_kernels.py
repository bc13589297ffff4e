"""Regression trees (squared error, leaf = mean): the whole tree in one Numba call.

A tree is grown breadth first by :func:`regression_nodes` from its
training rows (sorted, unique) and their integer multiplicities (bootstrap
copies or integer sample weights): the squared-error criterion, the node
means and ``min_samples_leaf`` all count copies, so a row drawn twice weighs
exactly as two equal rows.  The node loop is the one of
:mod:`facesegment.forest._node_loop`: nodes are numbered in the order they
are created and processed in that order (a FIFO), so, as for the classification trees
(:mod:`facesegment.forest._grow`), truncating a tree at depth d gives exactly
the tree grown with ``max_depth=d`` from the same seed.

Split search at a node (the CART rule: maximise the decrease of the sum of
squared errors, i.e. ``S_l^2 / W_l + S_r^2 / W_r`` with ``W`` the copies and
``S`` the sum of their targets on each side):

* features are drawn without replacement (a partial Fisher-Yates shuffle of
  the tree's permutation) until ``q`` were looked at, and beyond that one at
  a time until a non-constant one was found (or all were looked at); a
  feature constant on the node is skipped but counts among the ``q``
  (scikit-learn's rule: at most ``q`` features are scored);
* ``extra=False`` (random forest): every threshold between two neighbouring
  distinct values of the feature in the node; the threshold stored is their
  float32 midpoint (the lower value when the midpoint rounds up to the upper);
* ``extra=True`` (extremely randomized trees): one cut per feature uniform
  between the node's minimum and maximum
  (:func:`facesegment.forest._extra_kernels.random_cut`: ``c + 0.5`` with an
  integer ``c`` for uint8 data).

The first best candidate wins (strictly better replaces).  A node becomes a
leaf at ``max_depth``, with fewer than ``min_samples_split`` or ``2
min_samples_leaf`` copies, when its targets are all equal, or when no
candidate leaves ``min_samples_leaf`` copies on each side.

Random numbers: one SplitMix64 stream per tree (:func:`next_uniform`), seeded
from the tree's seed, consumed in node order: the tree depends only on its
seed and its data, never on threads.
"""

import numpy as np
from .._jit import NJIT, njit

from ._extra_kernels import random_cut
from ._node_loop import node_rows, split_node, tree_arrays, tree_links

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_INV53 = 1.0 / 9007199254740992.0


@njit(**NJIT)
def next_uniform(state):
    """The next float64 in [0, 1) of the SplitMix64 stream ``state`` (uint64 (1,),
    advanced in place): 53 high bits of the mixed counter.

    Parameters
    ----------
    state : ndarray uint64, shape (1,)
        The stream's counter; advanced in place by the golden-ratio increment.

    Returns
    -------
    float64
        ``(z >> 11) / 2**53`` of the mixed counter ``z``, in [0, 1).
    """
    state[0] += _GOLDEN
    z = state[0]
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    z = z ^ (z >> _S31)
    return np.float64(z >> _S11) * _INV53


@njit(**NJIT)
def _best_threshold_sorted(vals, ys, cs, order, w_tot, s_tot, min_leaf):
    """Best cut of one feature from its values sorted by ``order``:
    ``(proxy, threshold)``, proxy -inf when no cut keeps ``min_leaf`` copies a side.

    Parameters
    ----------
    vals : ndarray uint8 or float32, shape (m,)
        The feature's values of the node's rows.
    ys : ndarray float64, shape (>= m,)
        Their targets.
    cs : ndarray float64, shape (>= m,)
        Their copies.
    order : ndarray int64, shape (m,)
        The positions of ``vals`` in increasing order of value.
    w_tot : float
        The node's copies (the sum of ``cs[:m]``).
    s_tot : float
        The sum of the node's copies times their targets.
    min_leaf : int
        The fewest copies a child may hold.

    Returns
    -------
    proxy : float64
        The best ``S_l^2 / W_l + S_r^2 / W_r`` over the cuts between two
        neighbouring distinct values (the first best wins); -inf when none.
    threshold : float32
        Its cut: the float32 midpoint of the two values, or the lower one
        where the midpoint rounds up to the upper; 0.0 when there is no cut.
    """
    m = vals.shape[0]
    best = -np.inf
    thr = np.float32(0.0)
    w_l = 0.0
    s_l = 0.0
    for k in range(m - 1):
        o = order[k]
        w_l += cs[o]
        s_l += cs[o] * ys[o]
        v = vals[o]
        v_next = vals[order[k + 1]]
        if v == v_next:
            continue
        w_r = w_tot - w_l
        if w_l < min_leaf or w_r < min_leaf:
            continue
        s_r = s_tot - s_l
        proxy = s_l * s_l / w_l + s_r * s_r / w_r
        if proxy > best:
            best = proxy
            a = np.float32(v)
            b = np.float32(v_next)
            t = np.float32((np.float64(a) + np.float64(b)) / 2.0)
            thr = a if t >= b else t
    return best, thr


@njit(**NJIT)
def _counting_order(vals, lo, hi, start, order):
    """Stable counting sort of uint8 ``vals`` (all in lo..hi): ``order`` (int64 (m,))."""
    start[:] = 0
    for i in range(vals.shape[0]):
        start[np.int64(vals[i]) + 1] += 1
    for b in range(np.int64(lo) + 1, np.int64(hi) + 2):
        start[b] += start[b - 1]
    for i in range(vals.shape[0]):
        v = np.int64(vals[i])
        order[start[v]] = i
        start[v] += 1


@njit(**NJIT)
def _draw_feature(perm, j, state):
    """Step ``j`` of the partial Fisher-Yates shuffle of ``perm``: the next feature."""
    p = perm.shape[0]
    u = next_uniform(state)
    r = j + min(int(u * (p - j)), p - j - 1)
    f = perm[r]
    perm[r] = perm[j]
    perm[j] = f
    return f


@njit(**NJIT)
def best_regression_split(X, rows, yl, cl, ids, s, e, perm, q, min_leaf, integer,
                          state, vals, ys, cs, order, start):
    """The best-threshold split of the node holding the local rows ``ids[s:e]``
    (X's rows ``rows[ids[s:e]]``, targets ``yl``, copies ``cl``):
    ``(feature, threshold)``, feature -1 when there is none.  Values are
    gathered and sorted per feature (counting sort for uint8).

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p)
        The data.
    rows : ndarray int64, shape (m,)
        The tree's rows; local id ``i`` is row ``rows[i]``.
    yl : ndarray float64, shape (m,)
        The target of each local id.
    cl : ndarray float64, shape (m,)
        The copies of each local id.
    ids : ndarray int64, shape (m,)
        The tree's local ids; the node holds ``ids[s:e]`` (read only).
    s, e : int
        The node's segment, ``e > s``.
    perm : ndarray int64, shape (p,)
        The tree's feature permutation; modified in place (the partial
        Fisher-Yates shuffle of :func:`_draw_feature`).
    q : int
        Features to look at (more while all were constant).
    min_leaf : int
        The fewest copies a child may hold.
    integer : bool
        X is uint8 (values sorted by a counting sort, else by ``np.argsort``).
    state : ndarray uint64, shape (1,)
        The tree's random stream (:func:`next_uniform`), advanced in place.
    vals : ndarray, X's dtype, shape (>= e - s,)
        Scratch (a feature's values of the node).
    ys, cs : ndarray float64, shape (>= e - s,)
        Scratch (the node's targets and copies).
    order : ndarray int64, shape (>= e - s,)
        Scratch (the counting sort's order).
    start : ndarray int64, shape (257,)
        Scratch (the counting sort's bins).

    Returns
    -------
    feature : int
        The best split's feature (the first best wins); -1 when no feature has
        a cut leaving ``min_leaf`` copies on each side.
    threshold : float32
        Its threshold (see :func:`_best_threshold_sorted`); 0.0 when none.
    """
    m = e - s
    p = perm.shape[0]
    w_tot = 0.0
    s_tot = 0.0
    for i in range(m):
        lid = ids[s + i]
        ys[i] = yl[lid]
        cs[i] = cl[lid]
        w_tot += cs[i]
        s_tot += cs[i] * ys[i]
    v_m = vals[:m]
    best = -np.inf
    best_f = -1
    best_t = np.float32(0.0)
    found = 0
    j = 0
    while j < p and (j < q or found == 0):
        f = _draw_feature(perm, j, state)
        j += 1
        lo = X[rows[ids[s]], f]
        hi = lo
        for i in range(m):
            v = X[rows[ids[s + i]], f]
            v_m[i] = v
            if v < lo:
                lo = v
            elif v > hi:
                hi = v
        if lo == hi:
            continue
        found += 1
        if integer:
            _counting_order(v_m, lo, hi, start, order)
            o_m = order[:m]
        else:
            o_m = np.argsort(v_m)
        proxy, t = _best_threshold_sorted(v_m, ys, cs, o_m, w_tot, s_tot, min_leaf)
        if proxy > best:
            best = proxy
            best_f = f
            best_t = t
    return best_f, best_t


@njit(**NJIT)
def extra_regression_split(X, rows, yl, cl, ids, s, e, w_tot, s_tot, perm, q, min_leaf,
                           integer, state, feats, lo, hi, thr, w_l, s_l):
    """The extremely randomized split of the node holding the local rows
    ``ids[s:e]``: ``(feature, threshold)``, feature -1 when there is none.

    Candidates come in batches: the first ``q`` steps of the partial shuffle
    of ``perm``, then (while none was non-constant) one feature at a time;
    one pass over the node's rows (each row read once) gives a batch's
    minima and maxima, a non-constant feature gets its cut (the next uniform
    of ``state``, in batch order), a second pass sums the copies and targets
    left of every cut.

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p)
        The data.
    rows : ndarray int64, shape (m,)
        The tree's rows; local id ``i`` is row ``rows[i]``.
    yl : ndarray float64, shape (m,)
        The target of each local id.
    cl : ndarray float64, shape (m,)
        The copies of each local id.
    ids : ndarray int64, shape (m,)
        The tree's local ids; the node holds ``ids[s:e]`` (read only).
    s, e : int
        The node's segment, ``e > s``.
    w_tot : float
        The node's copies.
    s_tot : float
        The sum of the node's copies times their targets.
    perm : ndarray int64, shape (p,)
        The tree's feature permutation; modified in place.
    q : int
        Features to look at (more while all were constant).
    min_leaf : int
        The fewest copies a child may hold.
    integer : bool
        X is uint8 (integer cuts ``c + 0.5``, see
        :func:`facesegment.forest._extra_kernels.random_cut`).
    state : ndarray uint64, shape (1,)
        The tree's random stream (:func:`next_uniform`), advanced in place.
    feats : ndarray int64, shape (>= min(q, p),)
        Scratch (a batch's features).
    lo, hi : ndarray, X's dtype, shape (>= min(q, p),)
        Scratch (a batch's minima and maxima on the node).
    thr : ndarray float32, shape (>= min(q, p),)
        Scratch (a batch's cuts; -inf for a constant feature).
    w_l, s_l : ndarray float64, shape (>= min(q, p),)
        Scratch (the copies and the copies times targets left of each cut).

    Returns
    -------
    feature : int
        The best candidate's feature (the first best wins); -1 when no cut
        leaves ``min_leaf`` copies on each side.
    threshold : float32
        Its cut; 0.0 when there is none.
    """
    p = perm.shape[0]
    best = -np.inf
    best_f = -1
    best_t = np.float32(0.0)
    found = 0
    j = 0
    while j < p and (j < q or found == 0):
        k = min(q - j, p - j) if j < q else 1
        for b in range(k):
            feats[b] = _draw_feature(perm, j, state)
            j += 1
        first = X[rows[ids[s]]]
        for b in range(k):
            lo[b] = first[feats[b]]
            hi[b] = first[feats[b]]
        for i in range(s + 1, e):
            row = X[rows[ids[i]]]
            for b in range(k):
                v = row[feats[b]]
                lo[b] = min(lo[b], v)
                hi[b] = max(hi[b], v)
        n_ok = 0
        for b in range(k):
            w_l[b] = 0.0
            s_l[b] = 0.0
            thr[b] = -np.inf  # a constant feature sends nothing left
            if lo[b] < hi[b]:
                thr[b] = random_cut(lo[b], hi[b], next_uniform(state), integer)
                n_ok += 1
        found += n_ok
        if n_ok == 0:
            continue
        for i in range(s, e):  # branch-free sums: the comparisons are coin flips
            lid = ids[i]
            row = X[rows[lid]]
            c = cl[lid]
            cy = c * yl[lid]
            for b in range(k):
                le = np.float64(np.float32(row[feats[b]]) <= thr[b])
                w_l[b] += c * le
                s_l[b] += cy * le
        for b in range(k):
            if not lo[b] < hi[b]:
                continue
            w_r = w_tot - w_l[b]
            if w_l[b] < min_leaf or w_r < min_leaf:
                continue
            s_r = s_tot - s_l[b]
            proxy = s_l[b] * s_l[b] / w_l[b] + s_r * s_r / w_r
            if proxy > best:
                best = proxy
                best_f = feats[b]
                best_t = thr[b]
    return best_f, best_t


@njit(**NJIT)
def best_presorted_split(srt, sv, yl, cl, s, e, w_tot, s_tot, perm, q, min_leaf, state):
    """:func:`best_regression_split` (``extra=False``) on presorted features: row
    ``f`` of ``sv`` holds feature f's values of the tree's rows sorted within
    every node's segment, ``srt`` their local row ids.  A feature is constant
    on the node iff its segment's first and last values are equal.

    Parameters
    ----------
    srt : ndarray int32, shape (p, m)
        Each feature's local ids in the order of ``sv``; read only.
    sv : ndarray uint8 or float32, shape (p, m)
        Each feature's values of the tree's rows, sorted within every node's
        segment; read only.
    yl : ndarray float64, shape (m,)
        The target of each local id.
    cl : ndarray float64, shape (m,)
        The copies of each local id.
    s, e : int
        The node's segment (columns ``s:e`` of ``srt`` and ``sv``), ``e > s``.
    w_tot : float
        The node's copies.
    s_tot : float
        The sum of the node's copies times their targets.
    perm : ndarray int64, shape (p,)
        The tree's feature permutation; modified in place.
    q : int
        Features to look at (more while all were constant).
    min_leaf : int
        The fewest copies a child may hold.
    state : ndarray uint64, shape (1,)
        The tree's random stream (:func:`next_uniform`), advanced in place.

    Returns
    -------
    feature : int
        The best split's feature (the first best wins); -1 when no feature has
        a cut leaving ``min_leaf`` copies on each side.
    threshold : float32
        The float32 midpoint of the cut's two values, or the lower one where
        the midpoint rounds up to the upper; 0.0 when there is no split.
    """
    p = perm.shape[0]
    best = -np.inf
    best_f = -1
    best_t = np.float32(0.0)
    found = 0
    j = 0
    while j < p and (j < q or found == 0):
        f = _draw_feature(perm, j, state)
        j += 1
        if sv[f, s] == sv[f, e - 1]:
            continue
        found += 1
        w_l = 0.0
        s_l = 0.0
        for k in range(s, e - 1):
            lid = srt[f, k]
            w_l += cl[lid]
            s_l += cl[lid] * yl[lid]
            v = sv[f, k]
            v_next = sv[f, k + 1]
            if v == v_next:
                continue
            w_r = w_tot - w_l
            if w_l < min_leaf or w_r < min_leaf:
                continue
            s_r = s_tot - s_l
            proxy = s_l * s_l / w_l + s_r * s_r / w_r
            if proxy > best:
                best = proxy
                best_f = f
                a = np.float32(v)
                b = np.float32(v_next)
                t = np.float32((np.float64(a) + np.float64(b)) / 2.0)
                best_t = a if t >= b else t
    return best_f, best_t


@njit(**NJIT)
def _presort(X, rows):
    """``(srt int32 (p, m), sv (p, m), xt (p, m))``: each feature's values of the
    tree's rows (``xt``), sorted (``sv``) with their local ids (``srt``)."""
    m = rows.shape[0]
    p = X.shape[1]
    xt = np.empty((p, m), X.dtype)
    for i in range(m):
        row = X[rows[i]]
        for f in range(p):
            xt[f, i] = row[f]
    srt = np.empty((p, m), np.int32)
    sv = np.empty((p, m), X.dtype)
    for f in range(p):
        o = np.argsort(xt[f], kind="mergesort")
        for k in range(m):
            srt[f, k] = o[k]
            sv[f, k] = xt[f, o[k]]
    return srt, sv, xt


@njit(**NJIT)
def _partition_presorted(srt, sv, goes_left, s, e, buf_i, buf_v):
    """Stable partition of every non-constant feature's segment ``s:e`` of
    ``srt``/``sv`` by ``goes_left[local id]`` (a constant feature stays constant
    in the children, so its stale segment still reads as constant).

    Parameters
    ----------
    srt : ndarray int32, shape (p, m)
        Each feature's local ids in sorted order; partitioned in place.
    sv : ndarray uint8 or float32, shape (p, m)
        The matching values; partitioned in place with ``srt``.
    goes_left : ndarray bool, shape (m,)
        Per local id, whether its row goes to the left child.
    s, e : int
        The node's segment, ``e > s``.
    buf_i : ndarray int32, shape (>= e - s,)
        Scratch (the right rows' ids).
    buf_v : ndarray, ``sv``'s dtype, shape (>= e - s,)
        Scratch (the right rows' values).
    """
    for f in range(srt.shape[0]):
        if sv[f, s] == sv[f, e - 1]:
            continue
        nl = 0
        nr = 0
        for k in range(s, e):
            lid = srt[f, k]
            if goes_left[lid]:
                srt[f, s + nl] = lid
                sv[f, s + nl] = sv[f, k]
                nl += 1
            else:
                buf_i[nr] = lid
                buf_v[nr] = sv[f, k]
                nr += 1
        for k in range(nr):
            srt[f, s + nl + k] = buf_i[k]
            sv[f, s + nl + k] = buf_v[k]


@njit(**NJIT)
def regression_nodes(X, y, rows, counts, q, max_depth, min_split, min_leaf, extra,
                     integer, presort, seed):
    """One regression tree: the node loop of :mod:`facesegment.forest._node_loop`,
    each node given its mean and squared-error split (see the module docstring).

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p)
    y : ndarray float64, shape (n,)
    rows : ndarray int64, shape (m,)
        The tree's distinct rows.
    counts : ndarray float64, shape (m,)
        Their copies (>= 1).
    q : int
        Features scored per node.
    max_depth : int
        -1: no limit.
    min_split, min_leaf : int
        In copies.
    extra : bool
        One random cut per feature instead of the best threshold.
    integer : bool
        X is uint8.
    presort : bool
        Best thresholds only: sort every feature once per tree and keep each
        node's segments sorted (:func:`best_presorted_split`) instead of
        sorting the drawn features at every node; same splits up to float
        rounding of the sums, (p, m) memory.
    seed : int
        The tree's random stream.

    Returns
    -------
    left, right, feature : ndarray int32, shape (n_nodes,)
    threshold : ndarray float32, shape (n_nodes,)
    value : ndarray float64, shape (n_nodes,)
        The node's mean.
    depth : ndarray int32, shape (n_nodes,)
    n_samples : ndarray int64, shape (n_nodes,)
        Copies.
    """
    m = rows.shape[0]
    p = X.shape[1]
    nodes, count, ids, buf, feature, threshold = tree_arrays(m)
    cap = feature.shape[0]
    value = np.zeros(cap, np.float64)
    n_samples = np.zeros(cap, np.int64)
    perm = np.arange(p)
    state = np.full(1, np.uint64(seed))
    yl = np.empty(m, np.float64)
    for i in range(m):
        yl[i] = y[rows[i]]
    cl = counts
    no_weights = np.empty(0, np.float64)  # the split's left copies are not needed
    if presort:
        srt, sv, xt = _presort(X, rows)
        goes_left = np.zeros(m, np.bool_)
        buf_i = np.empty(m, np.int32)
        buf_v = np.empty(m, X.dtype)
    vals = np.empty(m, X.dtype)
    ys = np.empty(m, np.float64)
    cs = np.empty(m, np.float64)
    order = np.empty(m, np.int64)
    start = np.zeros(257, np.int64)
    x_feats = np.empty(p, np.int64)
    x_lo = np.empty(p, X.dtype)
    x_hi = np.empty(p, X.dtype)
    x_thr = np.empty(p, np.float32)
    x_wl = np.empty(p, np.float64)
    x_sl = np.empty(p, np.float64)
    for node in range(feature.shape[0]):  # the nodes in creation order
        if node == count[0]:
            break
        s, e, may_split = node_rows(nodes, node, max_depth)
        w = 0.0
        sy = 0.0
        y_lo = yl[ids[s]]
        y_hi = y_lo
        for i in range(s, e):
            yi = yl[ids[i]]
            w += cl[ids[i]]
            sy += cl[ids[i]] * yi
            y_lo = min(y_lo, yi)
            y_hi = max(y_hi, yi)
        value[node] = sy / w
        n_samples[node] = np.int64(w)
        if not may_split or w < min_split or w < 2 * min_leaf or y_lo == y_hi or e - s < 2:
            continue
        if extra:
            f, t = extra_regression_split(X, rows, yl, cl, ids, s, e, w, sy, perm, q,
                                          min_leaf, integer, state, x_feats, x_lo, x_hi,
                                          x_thr, x_wl, x_sl)
        elif presort:
            f, t = best_presorted_split(srt, sv, yl, cl, s, e, w, sy, perm, q, min_leaf,
                                        state)
        else:
            f, t = best_regression_split(X, rows, yl, cl, ids, s, e, perm, q, min_leaf,
                                         integer, state, vals, ys, cs, order, start)
        if f < 0:
            continue
        nl, _, child = split_node(X, rows, no_weights, nodes, count, ids, buf, feature, threshold,
                                  node, f, t, -1)
        if presort and child >= 0:  # each feature's sorted segment partitioned like the rows
            for i in range(s, e):
                goes_left[ids[i]] = i < s + nl
            _partition_presorted(srt, sv, goes_left, s, e, buf_i, buf_v)
    n = count[0]
    left, right, depth = tree_links(nodes, n)
    return left, right, feature[:n], threshold[:n], value[:n], depth, n_samples[:n]


__all__ = ["regression_nodes", "best_regression_split", "best_presorted_split",
           "extra_regression_split", "next_uniform"]
