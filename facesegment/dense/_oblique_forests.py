"""Dense-inference kernels for forests with oblique (CO2) nodes: pixels grouped by node (private).

The per-pixel kernel of :mod:`facesegment.dense._any_forest` walks all trees for
a few pixels at a time, so every oblique node it meets loads that node's
weights (2883 float32, 11.5 KB, for 31x31x3) again: on a 32-tree CO2 forest
of the pipeline (~17,000 oblique nodes, 200 MB of float32 weights) that is
memory traffic, not arithmetic.  These kernels group pixels by node instead,
level by level:

* parallel over blocks of rows (one per thread); inside a block, tree by tree;
* at each level the block's pixels are counting-sorted by their current node
  (nodes of a level are contiguous: trees are stored breadth first), so the
  pixels of one oblique node are dotted with its weights one after another
  while the weights sit in L1/L2: a node's weights are read once per block;
* windows are read from a float32 copy of the padded image (no uint8 to float
  conversion in the inner loop); 8 pixels at the same node share one pass over
  its weights (``_dot8g``; a last group of fewer pads with its last window, so
  a window's dot is the same whatever its group: the results do not depend on
  the blocks, hence not on the number of threads);
* axis-aligned and two-probe nodes (CO2 forests keep them below
  ``oblique_min_samples``) are evaluated per pixel in the same pass.

:func:`count_visits_levels` descends the trees the same way to count the
oblique nodes the prediction evaluates (from each pixel's end node,
:func:`oblique_above`), at about the cost of one prediction.

The kernels take the window layout first (``lay``: its ``window``,
``channels`` and ``row`` are compile-time constants, see
:mod:`facesegment.dense._numba`).  Per pixel the node distributions are
added in tree order in float32 and scaled by ``1 / n_trees``, as in the
per-pixel kernel; dot products may round differently (summation order), so
results agree with it to float tolerance (and are the same for every block
size and thread count).
"""

import numpy as np
from numba import prange

from .._jit import FASTMATH, INLINE, NJIT, PARALLEL, njit
from ._any_forest import LEFT, MUL, OBLIQUE, OFF1, OFF2, RIGHT, THRESHOLD
from ._scores import argmax_scaled


@njit(**FASTMATH)
def _dot8g(lay, imgf, bb, rowstride, wrow):
    """Dots of the 8 windows starting at ``bb[0..7]`` with one pass over the weights:
    measured 37-45 GFLOP/s on one core in cache (31x31x3), against 24 for 4
    windows and 6 for one (8 vector accumulators keep the FMA units busy)."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    for dy in range(lay.window):
        o = dy * rowstride
        i0 = imgf[bb[0] + o:bb[0] + o + lay.row]
        i1 = imgf[bb[1] + o:bb[1] + o + lay.row]
        i2 = imgf[bb[2] + o:bb[2] + o + lay.row]
        i3 = imgf[bb[3] + o:bb[3] + o + lay.row]
        i4 = imgf[bb[4] + o:bb[4] + o + lay.row]
        i5 = imgf[bb[5] + o:bb[5] + o + lay.row]
        i6 = imgf[bb[6] + o:bb[6] + o + lay.row]
        i7 = imgf[bb[7] + o:bb[7] + o + lay.row]
        wr = wrow[dy * lay.row:dy * lay.row + lay.row]
        for j in range(lay.row):
            w = wr[j]
            a0 += w * i0[j]
            a1 += w * i1[j]
            a2 += w * i2[j]
            a3 += w * i3[j]
            a4 += w * i4[j]
            a5 += w * i5[j]
            a6 += w * i6[j]
            a7 += w * i7[j]
    return a0, a1, a2, a3, a4, a5, a6, a7


@njit(**NJIT)
def _tree_levels(lay, imgf, rowstride, base, r, nodes, thr, weights, depth_list, rec, cur, order,
                 active, bb):
    """Descend one tree (root ``r``) for the windows at ``base`` level by level.

    ``rec[i, k]`` receives pixel ``i``'s node after ``depth_list[k]`` steps
    (``depth_list`` increasing); ``cur``, ``order``, ``active`` (n,) and ``bb``
    (8,) are scratch arrays.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    imgf : float32 (n_values,)
        The padded image as float32, flattened.
    rowstride : int
        Values per padded row.
    base : int64 (n,)
        Offset in ``imgf`` of each pixel's window.
    r : int
        The tree's root.
    nodes : int32 (n_nodes, 8)
        The general node records.
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes``.
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows.
    depth_list : int64 (n_d,)
        Depth limits, ascending.
    rec : int64 (n, n_d)
        Written in place: every entry.
    cur, order, active : int64 (n,)
        Scratch.
    bb : int64 (8,)
        Scratch.
    """
    n = base.shape[0]
    n_d = depth_list.shape[0]
    for i in range(n):
        cur[i] = r
        active[i] = i
    n_act = n if nodes[r, LEFT] != r else 0
    k = 0
    s = 0
    while k < n_d:
        while k < n_d and depth_list[k] == s:
            for i in range(n):
                rec[i, k] = cur[i]
            k += 1
        if k == n_d:
            break
        if n_act > 0:
            # the active pixels' nodes lie in [lo, hi]: counting sort them by node
            lo = cur[active[0]]
            hi = lo
            for q in range(n_act):
                v = cur[active[q]]
                lo = min(lo, v)
                hi = max(hi, v)
            cnt = np.zeros(hi - lo + 2, dtype=np.int64)
            for q in range(n_act):
                cnt[cur[active[q]] - lo + 1] += 1
            for b in range(1, hi - lo + 2):
                cnt[b] += cnt[b - 1]
            for q in range(n_act):
                i = active[q]
                j = cur[i] - lo
                order[cnt[j]] = i
                cnt[j] += 1
            # one node at a time (its pixels are contiguous in ``order``)
            g = 0
            while g < n_act:
                node = cur[order[g]]
                e = g
                while e < n_act and cur[order[e]] == node:
                    e += 1
                o = nodes[node, OBLIQUE]
                tt = thr[node, THRESHOLD]
                if o >= 0:
                    wrow = weights[o]
                    q = g
                    while q < e:   # 8 windows per pass; the last pass repeats its
                        r = min(8, e - q)   # last window, so every window's dot is a
                        for u in range(8):  # lane of _dot8g, whatever its group's size
                            bb[u] = base[order[q + min(u, r - 1)]]
                        v = _dot8g(lay, imgf, bb, rowstride, wrow)
                        for u in range(r):
                            cur[order[q + u]] = nodes[node, np.int64(v[u] > tt)]
                        q += r
                else:
                    o1 = nodes[node, OFF1]
                    o2 = nodes[node, OFF2]
                    mul = thr[node, MUL]
                    for q in range(g, e):
                        i0 = order[q]
                        b = base[i0]
                        v1 = imgf[b + o1] - mul * imgf[b + o2]
                        cur[i0] = nodes[node, np.int64(v1 > tt)]
                g = e
            # keep the pixels that reached an internal node
            m = 0
            for q in range(n_act):
                i = order[q]
                if nodes[cur[i], LEFT] != cur[i]:
                    active[m] = i
                    m += 1
            n_act = m
        s += 1


@njit(**INLINE)
def _block(lay, rowstride, blk, block_rows, y0, y1, x0, width):
    """Block ``blk`` of ``block_rows`` rows of ``[y0, y1)`` x ``[x0, x0 + width)``:
    its first row ``ya``, its pixels' window offsets and the scratch arrays of
    :func:`_tree_levels` for them (one depth).

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    rowstride : int
        Values per padded row (padded width x ``lay.channels``).
    blk : int
        The block's index.
    block_rows : int
        Rows per block (the last block may have fewer).
    y0, y1 : int
        The rows of the rectangle, ``[y0, y1)``.
    x0 : int
        The rectangle's first column.
    width : int
        Its number of columns.

    Returns
    -------
    ya : int
        The block's first row.
    base : int64 (n,)
        Offset in the image of each pixel's window, row by row (n: the
        block's pixels).
    rec : int64 (n, 1)
        Uninitialised: :func:`_tree_levels`'s ``rec`` for one depth.
    cur, order, active : int64 (n,)
        Uninitialised scratch.
    bb : int64 (8,)
        Uninitialised scratch.
    """
    ya = y0 + blk * block_rows
    n = (min(y1, ya + block_rows) - ya) * width
    base = np.empty(n, dtype=np.int64)
    for i in range(n):
        base[i] = (ya + i // width) * rowstride + (x0 + i % width) * lay.channels
    return (ya, base, np.empty((n, 1), dtype=np.int64), np.empty(n, dtype=np.int64),
            np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64),
            np.empty(8, dtype=np.int64))


@njit(**PARALLEL)
def dense_proba_levels(lay, imgf, rowstride, y0, y1, x0, x1, roots, steps, nodes, thr, value,
                       weights, out, block_rows):
    """Mean node distribution of pixels ``[y0, y1) x [x0, x1)`` into ``out`` (H, W, C).

    ``imgf``: the padded image as float32, flattened (``rowstride`` values per
    row); ``nodes``/``thr``: the general records (leaves point to themselves,
    ``LEFT``/``RIGHT`` columns 0/1); ``weights`` float32
    (n_oblique, lay.window * lay.row).  Each tree is descended at most ``steps``
    levels.  Parallel over blocks of ``block_rows`` rows; per pixel the
    distributions are added in tree order.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    imgf : float32 (n_values,)
        The padded ``lay.channels``-plane image as float32, flattened in C order.
    rowstride : int
        Values per padded row (padded width x ``lay.channels``).
    y0, y1, x0, x1 : int
        The rectangle of pixels written, ``[y0, y1) x [x0, x1)``; pixel
        ``(y, x)`` has its window top-left at padded ``(y, x)``.
    roots : int64 (n_trees,)
        Root node of each tree.
    steps : int
        Depth limit: each tree is descended at most this many levels.
    nodes : int32 (n_nodes, 8)
        The general node records of :mod:`facesegment.dense._any_forest`.
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes`` (``THRESHOLD`` and ``MUL`` columns).
    value : float32 (n_nodes, C)
        Each node's class distribution.
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows, each ``lay.window`` rows of ``lay.row`` values.
    out : float32 (H, W, C)
        Written in place inside the rectangle; the rest is left as it is.
    block_rows : int
        Rows per block (per parallel task); the results do not depend on it.

    Returns
    -------
    float32 (H, W, C)
        ``out``.
    """
    inv = np.float32(1.0) / np.float32(roots.shape[0])
    n_classes = value.shape[1]
    width = x1 - x0
    n_blocks = (y1 - y0 + block_rows - 1) // block_rows
    depth_list = np.full(1, steps, dtype=np.int64)
    for blk in prange(n_blocks):
        ya, base, rec, cur, order, active, bb = _block(lay, rowstride, blk, block_rows, y0, y1,
                                                       x0, width)
        n = base.shape[0]
        acc = np.zeros((n, n_classes), dtype=np.float32)
        for t in range(roots.shape[0]):
            _tree_levels(lay, imgf, rowstride, base, roots[t], nodes, thr, weights, depth_list,
                         rec, cur, order, active, bb)
            for i in range(n):
                nd = rec[i, 0]
                for c in range(n_classes):
                    acc[i, c] += value[nd, c]
        for i in range(n):
            for c in range(n_classes):
                out[ya + i // width, x0 + i % width, c] = acc[i, c] * inv
    return out


@njit(**PARALLEL)
def count_visits_levels(lay, imgf, rowstride, y0, y1, x0, x1, roots, steps, nodes, thr, weights,
                        above, block_rows):
    """Per tree, the dense oblique nodes evaluated for pixels ``[y0, y1) x [x0, x1)``:
    int64 ``(n_trees,)``.

    The trees are descended as in :func:`dense_proba_levels` (the same inputs,
    blocks and decisions); a pixel that stops at node ``nd`` (a leaf, or an
    internal node at the depth limit) evaluated the nodes strictly above it,
    ``above[nd]`` of them dense oblique (:func:`oblique_above`).  Each block's
    integer counts are added in block order (exact); with the blocks of the
    prediction (``block_rows``) the decisions, so the counts, are its own.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    imgf : float32 (n_values,)
        The padded ``lay.channels``-plane image as float32, flattened in C order.
    rowstride : int
        Values per padded row (padded width x ``lay.channels``).
    y0, y1, x0, x1 : int
        The rectangle of pixels counted, ``[y0, y1) x [x0, x1)``.
    roots : int64 (n_trees,)
        Root node of each tree.
    steps : int
        Depth limit: each tree is descended at most this many levels.
    nodes : int32 (n_nodes, 8)
        The general node records of :mod:`facesegment.dense._any_forest`.
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes``.
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows.
    above : int64 (n_nodes,)
        Per node, the dense oblique nodes strictly above it
        (:func:`oblique_above`).
    block_rows : int
        Rows per block (per parallel task).

    Returns
    -------
    int64 (n_trees,)
        Per tree, the dense oblique nodes evaluated, summed over the pixels.
    """
    n_trees = roots.shape[0]
    width = x1 - x0
    n_blocks = (y1 - y0 + block_rows - 1) // block_rows
    counts = np.zeros((n_blocks, n_trees), dtype=np.int64)
    depth_list = np.full(1, steps, dtype=np.int64)
    for blk in prange(n_blocks):
        ya, base, rec, cur, order, active, bb = _block(lay, rowstride, blk, block_rows, y0, y1,
                                                       x0, width)
        n = base.shape[0]
        for t in range(n_trees):
            _tree_levels(lay, imgf, rowstride, base, roots[t], nodes, thr, weights, depth_list,
                         rec, cur, order, active, bb)
            c = 0
            for i in range(n):
                c += above[rec[i, 0]]
            counts[blk, t] = c
    total = np.zeros(n_trees, dtype=np.int64)
    for blk in range(n_blocks):
        total += counts[blk]
    return total


def oblique_above(nodes, depth):
    """int64 ``(n_nodes,)``: per node, the dense oblique nodes (``OBLIQUE >= 0``)
    strictly on the path from its tree's root to it, from the general records
    ``nodes`` (leaves point to themselves) and the nodes' ``depth``.  A pixel
    that stops at a node evaluated exactly those of its tree.

    Parameters
    ----------
    nodes : int32 (n_nodes, 8)
        The general node records of :mod:`facesegment.dense._any_forest`
        (columns ``LEFT``, ``RIGHT``, ``OBLIQUE``).
    depth : int array (n_nodes,)
        Each node's depth in its tree (roots 0).

    Returns
    -------
    int64 (n_nodes,)
        Per node, the dense oblique nodes among its strict ancestors.
    """
    above = np.zeros(nodes.shape[0], dtype=np.int64)
    order = np.argsort(depth, kind="stable")
    cuts = np.flatnonzero(np.diff(depth[order])) + 1
    for level in np.split(order, cuts):   # parents before their children
        idx = level[nodes[level, LEFT] != level]
        below = above[idx] + (nodes[idx, OBLIQUE] >= 0)
        above[nodes[idx, LEFT]] = below
        above[nodes[idx, RIGHT]] = below
    return above


@njit(**PARALLEL)
def sweep_predict_levels(lay, imgf, rowstride, ys, xs, roots, depth_list, tree_counts, scales,
                         nodes, thr, value, weights, chunk, preds):
    """Labels of pixels ``(ys, xs)`` for every (alpha, depth, n_trees) setting.

    The contract of :func:`facesegment.dense._any_forest.sweep_predict` (per-pixel
    float64 sums in tree order, argmax of ``sums * scales[a]``), with the trees
    descended level by level as in :func:`dense_proba_levels`; parallel over
    chunks of ``chunk`` pixels.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    imgf : float32 (n_values,)
        The padded ``lay.channels``-plane image as float32, flattened in C order.
    rowstride : int
        Values per padded row (padded width x ``lay.channels``).
    ys, xs : int64 (n_pix,)
        The pixels scored (window top-left at padded ``(ys[i], xs[i])``).
    roots : int64 (n_trees,)
        Root node of each tree (at least ``tree_counts[-1]`` of them).
    depth_list : int64 (n_d,)
        Depth limits, ascending.
    tree_counts : int64 (n_t,)
        Forest sizes (first trees taken), ascending.
    scales : float64 (n_a, 1 or n_pix, C)
        Per-class factors of each setting ``a``: one row, or one per pixel.
    nodes : int32 (n_nodes, 8)
        The general node records of :mod:`facesegment.dense._any_forest`.
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes``.
    value : float32 (n_nodes, C)
        Each node's class distribution.
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows.
    chunk : int
        Pixels per parallel task; the labels do not depend on it.
    preds : uint8 (n_a, n_d, n_t, n_pix)
        Written in place: ``preds[a, k, j, i]`` the label of pixel ``i`` under
        scales ``a``, depth ``depth_list[k]`` and ``tree_counts[j]`` trees.

    Returns
    -------
    uint8 (n_a, n_d, n_t, n_pix)
        ``preds``.
    """
    n_pix = ys.shape[0]
    n_classes = value.shape[1]
    n_d = depth_list.shape[0]
    n_t = tree_counts.shape[0]
    n_a = scales.shape[0]
    n_chunks = (n_pix + chunk - 1) // chunk
    for ch in prange(n_chunks):
        lo = ch * chunk
        hi = min(n_pix, lo + chunk)
        n = hi - lo
        base = np.empty(n, dtype=np.int64)
        for i in range(n):
            base[i] = ys[lo + i] * rowstride + xs[lo + i] * lay.channels
        sums = np.zeros((n, n_d, n_classes), dtype=np.float64)
        rec = np.empty((n, n_d), dtype=np.int64)
        cur = np.empty(n, dtype=np.int64)
        order = np.empty(n, dtype=np.int64)
        active = np.empty(n, dtype=np.int64)
        bb = np.empty(8, dtype=np.int64)
        j = 0
        for t in range(tree_counts[n_t - 1]):
            _tree_levels(lay, imgf, rowstride, base, roots[t], nodes, thr, weights, depth_list,
                         rec, cur, order, active, bb)
            for i in range(n):
                for k in range(n_d):
                    nd = rec[i, k]
                    for c in range(n_classes):
                        sums[i, k, c] += value[nd, c]
            while j < n_t and tree_counts[j] == t + 1:
                for i in range(n):
                    for a in range(n_a):
                        for k in range(n_d):
                            preds[a, k, j, lo + i] = argmax_scaled(sums, i, k, scales, a, lo + i)
                j += 1
    return preds
