"""CART classification trees (Gini or entropy, missing values): the whole tree
in one Numba call.

:func:`cart_nodes` grows an axis-aligned tree breadth first from the
tree's distinct rows and their integer multiplicities (bootstrap copies), so
a row drawn twice counts twice in the class counts, the impurities and
``min_samples_leaf``, exactly like two equal rows.  Its node loop is the
one of :mod:`facesegment.forest._node_loop` (nodes processed in creation
order: truncating a tree at depth d gives the tree grown with
``max_depth=d``); :func:`cart_nodes` gives each node its class counts and
its split (the search below, the side of missing values).

Split search at a node (scikit-learn's ``BestSplitter`` rules):

* features are drawn without replacement (a partial Fisher-Yates shuffle of
  the tree's permutation): ``q`` of them, then one at a time while every
  feature drawn so far was constant on the node (or all were drawn);
  constant features count among the ``q``;
* the drawn features' values are gathered row by row (one pass over the
  node's rows for the batch), then each feature is sorted: float32 values as
  order-preserving uint64 keys (value bits above the position), uint8 values
  by a counting sort; missing values (NaN) are counted per class apart;
* one scan per feature (:func:`scan_cart_copies`) tries every cut between
  neighbouring distinct values, with the missing values on the right and on
  the left, and "every present value left, the missing ones right"; the
  impurity sums ``sum_c phi(count_c)`` (``phi(k) = k^2`` for Gini, ``k log k``
  for entropy) are updated in O(1) per row;
* the first best candidate wins (strictly better replaces): the first feature
  in draw order, the lowest cut, missing values right before left.

A node becomes a leaf at ``max_depth``, with fewer than ``min_samples_split``
or ``2 min_samples_leaf`` copies, when it is pure, or when no feature has a
cut that leaves ``min_samples_leaf`` copies on each side.  As in
scikit-learn, a valid cut is taken even when it does not lower the impurity
(an impure node always splits while it can).

Random numbers: one SplitMix64 stream per tree
(:func:`facesegment.forest._regression_kernels.next_uniform`), seeded from the
tree's seed: the tree depends on its seed and data only, never on threads.
"""

import numpy as np

from .._jit import NJIT, njit
from ._criteria import midpoint_threshold, phi_table, set_cost
from ._node_loop import node_rows, split_node, tree_arrays, tree_links
from ._ranks import _LOW32, _S32, COUNTING_SPAN, MISSING_RANK, sort_keys
from ._regression_kernels import _draw_feature


@njit(**NJIT)
def scan_cart_copies(vals, labels, copies, m0, tot, miss, min_leaf, gini, phi, left):
    """Best cut of a node's sorted present values ``vals[:m0]`` (their classes
    ``labels``, multiplicities ``copies``), the missing values' class counts
    ``miss`` on either side: ``(i, gain float64, missing_left)``, the cut between
    ``vals[i]`` and ``vals[i + 1]`` (``i = m0 - 1``: every present value left).

    A node without missing values is scanned by :func:`_scan_present`.

    Parameters
    ----------
    vals : ndarray (uint32 in :func:`cart_split_batch`), shape (>= m0,)
        The present values, sorted increasingly; only whether neighbours are
        equal is read.
    labels : ndarray int32, shape (>= m0,)
        The class of each value.
    copies : ndarray int64, shape (>= m0,)
        The multiplicity of each value's row.
    m0 : int
        The present values.
    tot : ndarray int64, shape (n_classes,)
        Class counts (copies) of the present values.
    miss : ndarray int64, shape (n_classes,)
        Class counts (copies) of the missing values.
    min_leaf : int
        The fewest copies a child may hold.
    gini : bool
        Gini index, else entropy.
    phi : ndarray float64, shape (>= node copies + 1,)
        :func:`facesegment.forest._criteria.phi_table` up to the node's copies.
    left : ndarray int64, shape (n_classes,)
        Scratch (the left side's class counts), overwritten.

    Returns
    -------
    i : int
        The best cut, between ``vals[i]`` and ``vals[i + 1]``; -1 when no cut
        leaves ``min_leaf`` copies on each side.
    gain : float64
        The impurity decrease weighted by the children's shares; -1.0 when
        there is no cut.
    missing_left : int
        1 / 0 where the missing values go left / right, -1 when the node has
        none (or there is no cut).
    """
    n_classes = tot.shape[0]
    w_miss = 0
    w_pres = 0
    a_l = 0.0
    a_lm = 0.0
    a_r = 0.0
    a_rm = 0.0
    for c in range(n_classes):
        w_miss += miss[c]
        w_pres += tot[c]
        a_lm += phi[miss[c]]
        a_r += phi[tot[c]]
        a_rm += phi[tot[c] + miss[c]]
        left[c] = 0
    n = w_pres + w_miss
    parent = set_cost(n, a_rm, gini, phi)
    if w_miss == 0:
        return _scan_present(vals, labels, copies, m0, tot, n, parent, a_r, min_leaf, gini,
                             phi, left)
    best_gain = -1.0
    best_i = -1
    best_ml = -1
    wl = 0
    for i in range(m0):
        c = labels[i]
        k = copies[i]
        cl = left[c]
        cr = tot[c] - cl
        mc = miss[c]
        a_l += phi[cl + k] - phi[cl]
        a_r += phi[cr - k] - phi[cr]
        a_lm += phi[cl + mc + k] - phi[cl + mc]
        a_rm += phi[cr + mc - k] - phi[cr + mc]
        left[c] = cl + k
        wl += k
        if i < m0 - 1:
            if vals[i] == vals[i + 1]:
                continue
        elif w_miss == 0:
            break
        wr = w_pres - wl
        if wl >= min_leaf and wr + w_miss >= min_leaf:  # missing values right
            gain = (parent - set_cost(wl, a_l, gini, phi)
                    - set_cost(wr + w_miss, a_rm, gini, phi)) / n
            if gain > best_gain:
                best_gain = gain
                best_i = i
                best_ml = 0 if w_miss > 0 else -1
        if w_miss > 0 and i < m0 - 1 and wl + w_miss >= min_leaf and wr >= min_leaf:
            gain = (parent - set_cost(wl + w_miss, a_lm, gini, phi)
                    - set_cost(wr, a_r, gini, phi)) / n
            if gain > best_gain:
                best_gain = gain
                best_i = i
                best_ml = 1
    return best_i, best_gain, best_ml


@njit(**NJIT)
def _scan_present(vals, labels, copies, m0, tot, n, parent, a_r, min_leaf, gini, phi, left):
    """:func:`scan_cart_copies` of a node without missing values.

    Only the cuts between two present values are tried (``i < m0 - 1``); for
    Gini the ``phi`` differences are computed, not read from the table.

    Parameters
    ----------
    vals, labels, copies, m0, tot : ndarray or int
        As for :func:`scan_cart_copies`.
    n : int
        The node's copies (the sum of ``tot``).
    parent : float64
        The node's cost, :func:`facesegment.forest._criteria.set_cost` of its
        ``n`` copies.
    a_r : float64
        The right side's ``sum_c phi(count_c)`` before the first cut (every
        value right).
    min_leaf, gini, phi : int, bool, ndarray
        As for :func:`scan_cart_copies`.
    left : ndarray int64, shape (n_classes,)
        Zero on entry; scratch (the left side's class counts), overwritten.

    Returns
    -------
    i : int
        The best cut (-1: none leaves ``min_leaf`` copies on each side).
    gain : float64
        Its weighted impurity decrease (-1.0: no cut).
    missing_left : int
        -1 (no missing values).
    """
    a_l = 0.0
    best_gain = -1.0
    best_i = -1
    wl = 0
    for i in range(m0 - 1):
        c = labels[i]
        k = copies[i]
        cl = left[c]
        cr = tot[c] - cl
        if gini:  # (a + k)^2 - a^2 without reading the table
            a_l += np.float64(k * (2 * cl + k))
            a_r -= np.float64(k * (2 * cr - k))
        else:
            a_l += phi[cl + k] - phi[cl]
            a_r += phi[cr - k] - phi[cr]
        left[c] = cl + k
        wl += k
        if vals[i] == vals[i + 1] or wl < min_leaf or n - wl < min_leaf:
            continue
        gain = (parent - set_cost(wl, a_l, gini, phi) - set_cost(n - wl, a_r, gini, phi)) / n
        if gain > best_gain:
            best_gain = gain
            best_i = i
    return best_i, best_gain, -1


@njit(**NJIT)
def _sort_ranked(gv, b, m, lab, cnt, tot, miss, keys, tmp, hist, start, vs, ls, cs):
    """The present ranks of gathered feature ``gv[b, :m]`` sorted into ``vs`` with
    their classes ``ls`` and copies ``cs``, their class counts ``tot`` and the
    missing ones' ``miss``; returns ``(m0, constant)``: the present values, and
    whether the feature cannot split (no present value, or all equal and none
    missing).  A counting sort when the ranks span at most
    ``COUNTING_SPAN m0 + 256`` values, else :func:`sort_keys` on the keys
    ``(rank - lowest) << 32 | position``.

    Both sorts order the values increasingly, equal values in the order of the
    node's rows.

    Parameters
    ----------
    gv : ndarray uint32, shape (k, >= m)
        The gathered values (ranks, or uint8 values), :data:`MISSING_RANK` for a
        missing one; row ``b`` is read.
    b : int
        The row of ``gv`` to sort.
    m : int
        The node's rows.
    lab : ndarray int32, shape (>= m,)
        The class of each of the node's rows.
    cnt : ndarray int64, shape (>= m,)
        The copies of each of the node's rows.
    tot, miss : ndarray int64, shape (n_classes,)
        Written: the class counts (copies) of the present and of the missing
        values.
    keys, tmp : ndarray uint64, shape (>= m,)
        Scratch (the sort keys; :func:`sort_keys`'s buffer).
    hist : ndarray int64, shape (4, 256)
        Scratch of :func:`sort_keys`.
    start : ndarray int64, shape (COUNTING_SPAN m + 258,)
        Scratch of the counting sort (used only when the span is below its
        length).
    vs : ndarray uint32, shape (>= m,)
        Written: the sorted present values, ``vs[:m0]``.
    ls : ndarray int32, shape (>= m,)
        Written: their classes.
    cs : ndarray int64, shape (>= m,)
        Written: their copies.

    Returns
    -------
    m0 : int
        The present values.
    constant : bool
        True when the feature cannot split; ``vs``, ``ls`` and ``cs`` are then
        not written.
    """
    tot[:] = 0
    miss[:] = 0
    m0 = 0
    lo = MISSING_RANK
    hi = np.uint32(0)
    for i in range(m):
        r = gv[b, i]
        if r == MISSING_RANK:
            miss[lab[i]] += cnt[i]
            continue
        tot[lab[i]] += cnt[i]
        lo = min(lo, r)
        hi = max(hi, r)
        m0 += 1
    if m0 == 0 or (lo == hi and m0 == m):
        return m0, True
    span = np.int64(hi) - np.int64(lo) + 1
    if span <= COUNTING_SPAN * m0 + 256 and span < start.shape[0]:
        start[:span + 1] = 0
        for i in range(m):
            r = gv[b, i]
            if r != MISSING_RANK:
                start[np.int64(r) - np.int64(lo) + 1] += 1
        for v in range(1, span + 1):
            start[v] += start[v - 1]
        for i in range(m):
            r = gv[b, i]
            if r != MISSING_RANK:
                v = np.int64(r) - np.int64(lo)
                j = start[v]
                vs[j] = r
                ls[j] = lab[i]
                cs[j] = cnt[i]
                start[v] = j + 1
        return m0, False
    j = 0
    for i in range(m):
        r = gv[b, i]
        if r != MISSING_RANK:
            keys[j] = (np.uint64(r - lo) << _S32) | np.uint64(i)
            j += 1
    sort_keys(keys[:m0], tmp, hist)
    for j in range(m0):
        i = np.int64(keys[j] & _LOW32)
        vs[j] = gv[b, i]
        ls[j] = lab[i]
        cs[j] = cnt[i]
    return m0, False


@njit(**NJIT)
def cart_split_batch(R, table, offsets, rows, lab, cnt, node_ids, feats, k,
                     min_leaf, gini, phi, integer, known, best, sc):
    """Score the features ``feats[:k]`` on the node whose local rows are
    ``node_ids`` (rows ``rows[node_ids]`` of ``R``; ``lab``/``cnt`` their classes and
    copies), updating ``best`` (float64
    [gain, feature, threshold, missing_left], the first best wins); returns how
    many of them were not constant.

    The drawn features' values are gathered in one pass over the node's rows,
    each feature sorted by :func:`_sort_ranked` and scanned by
    :func:`scan_cart_copies`.

    Parameters
    ----------
    R : ndarray uint8 or uint32, shape (n, p)
        What is sorted: X itself when ``integer``, else the ranks of
        :func:`facesegment.forest._ranks.feature_ranks`.
    table : ndarray float32, shape (offsets[p],)
        The values of the ranks: ``table[offsets[f] + rank]`` gives the
        thresholds (unused when ``integer``).
    offsets : ndarray int64, shape (p + 1,)
        Start of each feature's values in ``table`` (unused when ``integer``).
    rows : ndarray int64, shape (m,)
        The tree's rows; local id ``i`` is row ``rows[i]``.
    lab : ndarray int32, shape (>= len(node_ids),)
        The class of each of the node's rows, in the order of ``node_ids``.
    cnt : ndarray int64, shape (>= len(node_ids),)
        Their copies.
    node_ids : ndarray int64, shape (m_node,)
        The local ids of the node's rows.
    feats : ndarray int64, shape (>= k,)
        The features to score, in draw order.
    k : int
        How many of ``feats`` to score.
    min_leaf : int
        The fewest copies a child may hold.
    gini : bool
        Gini index, else entropy.
    phi : ndarray float64, shape (>= node copies + 1,)
        :func:`facesegment.forest._criteria.phi_table` up to the node's copies.
    integer : bool
        ``R`` is X (uint8); the thresholds are its values.
    known : ndarray uint64, shape ((p + 63) // 64,)
        One bit per feature, set where the feature is known to be constant on
        the node (constant on an ancestor): those features are skipped unread.
        Updated in place: the features found constant here are added.
    best : ndarray float64, shape (4,)
        ``[gain, feature, threshold, missing_left]`` of the best split so far;
        overwritten where a feature's gain is strictly greater than ``best[0]``
        (the threshold is the midpoint of the cut's two values, or the largest
        present value when every present value goes left).
    sc : tuple
        The scratch of :func:`cart_scratch`, for at least ``len(node_ids)``
        rows and ``k`` features.

    Returns
    -------
    int
        The features scored: those of ``feats[:k]`` not constant on the node.
    """
    gv, keys, tmp, hist, vs, ls, cs, tot, miss, left, start, act = sc
    m = node_ids.shape[0]
    n_act = 0
    for b in range(k):
        f = feats[b]
        if not (known[f >> 6] >> np.uint64(f & 63)) & np.uint64(1):
            act[n_act] = f
            n_act += 1
    for i in range(m):  # one pass over the node's rows for the whole batch
        row = R[rows[node_ids[i]]]
        for b in range(n_act):
            gv[b, i] = row[act[b]]
    found = 0
    for b in range(n_act):
        f = act[b]
        m0, constant = _sort_ranked(gv, b, m, lab, cnt, tot, miss, keys, tmp, hist, start,
                                    vs, ls, cs)
        if constant:
            known[f >> 6] |= np.uint64(1) << np.uint64(f & 63)
            continue
        found += 1
        i, g, ml = scan_cart_copies(vs, ls, cs, m0, tot, miss, min_leaf, gini, phi, left)
        if g > best[0]:
            if integer:
                a = np.float32(vs[i])
                c = np.float32(vs[min(i + 1, m0 - 1)])
            else:
                a = table[offsets[f] + vs[i]]
                c = table[offsets[f] + vs[min(i + 1, m0 - 1)]]
            best[0] = g
            best[1] = f
            best[2] = a if i == m0 - 1 else midpoint_threshold(a, c)
            best[3] = ml
    return found


@njit(**NJIT)
def cart_scratch(m, k, n_classes):
    """Scratch arrays of :func:`cart_split_batch` for nodes of at most ``m`` rows
    and batches of at most ``k`` features.

    Parameters
    ----------
    m : int
        The most rows of a node.
    k : int
        The most features of a batch.
    n_classes : int
        The classes.

    Returns
    -------
    tuple
        ``(gv, keys, tmp, hist, vs, ls, cs, tot, miss, left, start, act)``:
        ``gv`` uint32 (k, m); ``keys``, ``tmp`` uint64 (m,); ``hist`` int64
        (4, 256) zeros; ``vs`` uint32, ``ls`` int32, ``cs`` int64 (m,);
        ``tot``, ``miss``, ``left`` int64 (n_classes,) zeros; ``start`` int64
        (COUNTING_SPAN m + 258,) zeros; ``act`` int64 (k,).  The arrays not
        listed as zeros are uninitialised.
    """
    return (np.empty((k, m), np.uint32), np.empty(m, np.uint64), np.empty(m, np.uint64),
            np.zeros((4, 256), np.int64), np.empty(m, np.uint32), np.empty(m, np.int32),
            np.empty(m, np.int64), np.zeros(n_classes, np.int64),
            np.zeros(n_classes, np.int64), np.zeros(n_classes, np.int64),
            np.zeros(COUNTING_SPAN * m + 258, np.int64), np.empty(k, np.int64))


@njit(**NJIT)
def cart_nodes(X, R, table, offsets, y, rows, counts, n_classes, q, max_depth, min_split,
               min_leaf, gini, integer, seed):
    """One CART tree: the node loop of :mod:`facesegment.forest._node_loop`, each
    node given its class counts and split (see the module docstring).

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p)
        The data (float X may hold NaN).
    R, table, offsets : ndarray
        What the split search sorts: X itself (uint8 X; ``table``, ``offsets``
        unused) or :func:`facesegment.forest._ranks.feature_ranks` of X (float X).
    y : ndarray int32, shape (n,)
        Classes.
    rows : ndarray int64, shape (m,)
        The tree's distinct rows.
    counts : ndarray int64, shape (m,)
        Their copies (>= 1).
    n_classes : int
    q : int
        Features scored per node.
    max_depth : int
        -1: no limit.
    min_split, min_leaf : int
        In copies.
    gini : bool
        Gini index, else entropy.
    integer : bool
        X is uint8.
    seed : int
        The tree's random stream.

    Returns
    -------
    left, right, feature : ndarray int32, shape (n_nodes,)
    threshold : ndarray float32, shape (n_nodes,)
    value : ndarray int64, shape (n_nodes, n_classes)
        Class counts (copies).
    depth : ndarray int32, shape (n_nodes,)
    n_samples : ndarray int64, shape (n_nodes,)
        Copies.
    missing_left : ndarray int8, shape (n_nodes,)
        Learned where the node's rows missed the feature, else the side of
        the child with more copies.
    """
    m = rows.shape[0]
    p = X.shape[1]
    nodes, count, ids, buf, feature, threshold = tree_arrays(m)
    cap = feature.shape[0]
    value = np.zeros((cap, n_classes), np.int64)
    n_samples = np.zeros(cap, np.int64)
    miss_left = np.zeros(cap, np.int8)
    lab = np.empty(m, np.int32)
    total = 0
    for i in range(m):
        lab[i] = y[rows[i]]
        total += counts[i]
    phi = phi_table(total, gini)
    k_max = max(1, min(q, p))
    sc = cart_scratch(m, k_max, n_classes)
    node_lab = np.empty(m, np.int32)
    node_cnt = np.empty(m, np.int64)
    feats = np.empty(k_max, np.int64)
    perm = np.arange(p)
    state = np.full(1, np.uint64(seed))
    best = np.empty(4, np.float64)
    known = np.zeros((cap, (p + 63) // 64), np.uint64)  # features constant on the node
    for node in range(feature.shape[0]):  # the nodes in creation order
        if node == count[0]:
            break
        s, e, may_split = node_rows(nodes, node, max_depth)
        w = 0
        for i in range(s, e):
            value[node, lab[ids[i]]] += counts[ids[i]]
            w += counts[ids[i]]
        n_samples[node] = w
        nz = 0
        for c in range(n_classes):
            nz += value[node, c] > 0
        if not may_split or w < min_split or w < 2 * min_leaf or nz <= 1 or e - s < 2:
            continue
        for i in range(e - s):
            node_lab[i] = lab[ids[s + i]]
            node_cnt[i] = counts[ids[s + i]]
        best[0] = -1.0
        best[1] = -1.0
        j = 0
        for b in range(k_max):
            feats[b] = _draw_feature(perm, j, state)
            j += 1
        k = k_max
        while True:
            found = cart_split_batch(R, table, offsets, rows, node_lab, node_cnt, ids[s:e],
                                     feats, k, min_leaf, gini, phi, integer,
                                     known[node], best, sc)
            if found > 0 or j >= p:
                break
            feats[0] = _draw_feature(perm, j, state)  # all constant so far: one more
            j += 1
            k = 1
        if best[1] < 0:
            continue
        ml = np.int64(best[3])
        _, wl, child = split_node(X, rows, counts, nodes, count, ids, buf, feature,
                                  threshold, node, np.int64(best[1]), np.float32(best[2]),
                                  ml)
        if child < 0:
            continue
        miss_left[node] = ml if ml >= 0 else np.int64(2 * wl >= w)
        known[child] = known[node]
        known[child + 1] = known[node]
    n = count[0]
    left, right, depth = tree_links(nodes, n)
    return (left, right, feature[:n], threshold[:n], value[:n], depth, n_samples[:n],
            miss_left[:n])
