"""General per-pixel kernels of dense inference: any forest (private).

The kernels take the window layout first (``lay``, a
:class:`facesegment.dense._numba.KernelLayout`: ``lay.window``,
``lay.channels`` and ``lay.row = lay.window * lay.channels`` are
compile-time constants in them), then plain arrays and scalars, and do no
validation.  The image is the *padded* ``lay.channels``-plane uint8 image
flattened in C order (``img``), with ``rowstride`` bytes per row; the window
of the pixel whose window top-left corner is padded pixel ``(y, x)`` starts
at byte ``base = y * rowstride + x * lay.channels``.  Per node the wrapper
precomputes ``off1``/``off2``: the byte offsets (inside the window) of the
node's first and second probe for this padded width, so axis-aligned and
two-probe nodes read one or two bytes.  A sparse oblique node has ``OBLIQUE
== -2`` and its entries are ``OFF1 .. OFF2 - 1`` of ``sp_off`` (byte offsets in
the window) and ``sp_w`` (float32 weights): it gathers only those bytes.
Oblique nodes dot a weights row, laid out as ``lay.window`` rows of ``lay.row``
contiguous values, with the window's ``lay.window`` rows of ``lay.row`` contiguous
bytes.

Nodes are packed for the kernels into one int32 array ``nodes (n_nodes, 8)``
(32 bytes, half a cache line, per node) with columns
``LEFT, RIGHT, OFF1, OFF2, OBLIQUE, THRESHOLD, MUL, RESP``; ``thr`` is the
float32 view of the same memory (``thr[n, THRESHOLD]``, ``thr[n, MUL]``).
An axis-aligned or two-probe node's value is
``img[base + OFF1] - MUL * img[base + OFF2]`` (MUL 0 or 1), with no branch.
Leaves point to themselves (``LEFT == RIGHT == node``), so the child is
chosen without a branch (``nodes[node, v > threshold]``), a pixel that reached
its leaf can keep stepping in place while others of its group go on, and
after ``d`` steps a pixel is at the node of depth ``min(d, leaf depth)``:
truncating at depth ``d`` is taking at most ``d`` steps.  ``RESP``: row of
optional precomputed oblique responses (the top levels of CO2 trees evaluated
for the whole image at once by FFT correlation): ``resp[nodes[n, RESP], y, x]``
replaces the dot product when it is >= 0.
"""

import numpy as np
from numba import prange

from .._jit import FASTMATH, INLINE, NJIT, PARALLEL, njit
from ._scores import argmax_scaled

LEFT, RIGHT, OFF1, OFF2, OBLIQUE, THRESHOLD, MUL, RESP = range(8)


@njit(**FASTMATH)
def _dot_window(lay, img, base, rowstride, weights, row):
    """``weights[row] @ window`` for the window starting at byte ``base``.

    Written over row slices (``lay.row`` contiguous bytes and weights) so that
    LLVM vectorises the inner loop (2x faster than indexing the 2-d arrays).

    Parameters
    ----------
    lay : KernelLayout
        The window layout (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded ``lay.channels``-plane image, flattened in C order.
    base : int
        Byte offset in ``img`` of the (first) window's first byte.
    rowstride : int
        Bytes per padded row.
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows.
    row : int
        The row of ``weights`` dotted.

    Returns
    -------
    float32
    """
    acc = np.float32(0.0)
    wrow = weights[row]
    for dy in range(lay.window):
        p = base + dy * rowstride
        ir = img[p:p + lay.row]
        wr = wrow[dy * lay.row:dy * lay.row + lay.row]
        for j in range(lay.row):
            acc += wr[j] * np.float32(ir[j])
    return acc


@njit(**FASTMATH)
def _dot4(lay, img, base, rowstride, weights, row):
    """``weights[row] @ window`` for the 4 horizontally adjacent windows starting at
    ``base + k * lay.channels`` (k = 0..3): each weight is loaded once.

    Parameters
    ----------
    lay, img, base, rowstride, weights, row
        As :func:`_dot_window` (``base``: the first window's).

    Returns
    -------
    tuple of 4 float32
    """
    a0 = np.float32(0.0)
    a1 = np.float32(0.0)
    a2 = np.float32(0.0)
    a3 = np.float32(0.0)
    wrow = weights[row]
    for dy in range(lay.window):
        p = base + dy * rowstride
        ir = img[p:p + lay.row + 3 * lay.channels]
        wr = wrow[dy * lay.row:dy * lay.row + lay.row]
        for j in range(lay.row):
            w = wr[j]
            a0 += w * np.float32(ir[j])
            a1 += w * np.float32(ir[j + lay.channels])
            a2 += w * np.float32(ir[j + 2 * lay.channels])
            a3 += w * np.float32(ir[j + 3 * lay.channels])
    return a0, a1, a2, a3


@njit(**NJIT)
def sparse_window_value(img, base, sp_off, sp_w, start, stop):
    """A sparse split's value for the window at ``base``: the ordered float32 sum
    ``sum_k sp_w[k] * img[base + sp_off[k]]`` of
    :func:`facesegment.forest._sparse.sparse_value` (no fast-math: bit-identical
    to training's values).

    Parameters
    ----------
    img : uint8 (n_bytes,)
        The padded image, flattened in C order.
    base : int
        Byte offset in ``img`` of the window's first byte (its top-left pixel).
    sp_off : int32 (n_entries,)
        Byte offset of each sparse entry inside the window.
    sp_w : float32 (n_entries,)
        Weight of each sparse entry.
    start, stop : int
        The node's entries: ``sp_off[start:stop]`` and ``sp_w[start:stop]``.

    Returns
    -------
    float32
        The weighted sum, added in entry order.
    """
    acc = np.float32(0.0)
    for k in range(start, stop):
        acc += sp_w[k] * np.float32(img[base + sp_off[k]])
    return acc


@njit(**INLINE)
def _node_value(lay, img, base, rowstride, y, x, node, nodes, thr, weights, sp_off, sp_w, resp):
    """The split value of ``node`` for the window at ``base``.

    A dense oblique node's value is its precomputed response when its ``RESP``
    column names one, else the window's dot product with its weight row; a
    sparse oblique node (``OBLIQUE`` below -1) sums its entries ``OFF1 ..
    OFF2 - 1``; an axis-aligned or two-probe node gives ``img[base + OFF1] -
    MUL * img[base + OFF2]``.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded ``lay.channels``-plane image, flattened in C order.
    base : int
        Byte offset in ``img`` of the window's first byte.
    rowstride : int
        Bytes per padded row.
    y, x : int
        The pixel (row and column of ``resp``).
    node : int
        An internal node.
    nodes : int32 (n_nodes, 8)
        The general node records.
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes`` (``MUL`` column).
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows.
    sp_off : int32 (n_entries,)
        Byte offset in the window of each sparse oblique entry.
    sp_w : float32 (n_entries,)
        Weight of each sparse oblique entry.
    resp : float32 (n_resp, H, W)
        Precomputed oblique responses (may be empty).

    Returns
    -------
    float32
    """
    o = nodes[node, OBLIQUE]
    if o >= 0:
        r = nodes[node, RESP]
        if r >= 0:
            return resp[r, y, x]
        return _dot_window(lay, img, base, rowstride, weights, o)
    if o < -1:  # sparse oblique: entries OFF1 .. OFF2 - 1 of sp_off / sp_w
        return sparse_window_value(img, base, sp_off, sp_w, nodes[node, OFF1],
                                   nodes[node, OFF2])
    return (np.float32(img[base + nodes[node, OFF1]])
            - thr[node, MUL] * np.float32(img[base + nodes[node, OFF2]]))


@njit(**INLINE)
def _child(lay, img, base, rowstride, y, x, node, nodes, thr, weights, sp_off, sp_w, resp):
    """The child of ``node`` the window at ``base`` goes to (a leaf: itself).

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img, base, rowstride, y, x, node, nodes, thr, weights, sp_off, sp_w, resp
        As :func:`_node_value`; ``thr``'s ``THRESHOLD`` column is compared.

    Returns
    -------
    int32
        ``nodes[node, RIGHT]`` when the split value is above the threshold,
        else ``nodes[node, LEFT]``.
    """
    v = _node_value(lay, img, base, rowstride, y, x, node, nodes, thr, weights, sp_off, sp_w, resp)
    return nodes[node, np.int64(v > thr[node, THRESHOLD])]


@njit(**INLINE)
def is_leaf(nodes, n):
    """Whether node ``n`` of the general records is a leaf (points to itself).

    Parameters
    ----------
    nodes : int32 (n_nodes, 8)
        The general node records (column ``LEFT``).
    n : int
        A node index.

    Returns
    -------
    bool
        ``nodes[n, LEFT] == n``.
    """
    return nodes[n, LEFT] == n


@njit(**INLINE)
def _walk4(lay, img, rowstride, y, xa, xb, xc, xd, root, steps, nodes, thr, weights, sp_off,
           sp_w, resp):
    """Descend one tree for 4 pixels of row ``y`` at once, at most ``steps`` levels.

    A descent is a chain of dependent loads (node, then the window byte it
    names); four independent chains interleaved let the CPU overlap their
    latencies.  A finished chain steps on its leaf, which stays put.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded image, flattened.
    rowstride : int
        Bytes per padded row.
    y : int
        The pixels' row.
    xa, xb, xc, xd : int
        The pixels' columns (repeats allowed; ``xa .. xa + 3`` in a row lets 4
        pixels at one oblique node share one pass over its weights).
    root : int
        The tree's root.
    steps : int
        Depth limit.
    nodes, thr, weights, sp_off, sp_w, resp
        As :func:`dense_proba` takes them.

    Returns
    -------
    tuple of 4 int
        The nodes the 4 pixels reach.
    """
    ba = y * rowstride + xa * lay.channels
    bb = y * rowstride + xb * lay.channels
    bc = y * rowstride + xc * lay.channels
    bd = y * rowstride + xd * lay.channels
    na = nb = nc = nd = root
    adjacent = xb == xa + 1 and xc == xa + 2 and xd == xa + 3
    s = 0
    while s < steps and not (is_leaf(nodes, na) and is_leaf(nodes, nb)
                             and is_leaf(nodes, nc) and is_leaf(nodes, nd)):
        o = nodes[na, OBLIQUE]
        if (adjacent and o >= 0 and nodes[na, RESP] < 0 and na == nb and na == nc
                and na == nd):
            # 4 neighbours at one CO2 node: one pass over its weights
            va, vb, vc, vd = _dot4(lay, img, ba, rowstride, weights, o)
            t = thr[na, THRESHOLD]
            na = nodes[na, np.int64(va > t)]
            nb = nodes[nb, np.int64(vb > t)]
            nc = nodes[nc, np.int64(vc > t)]
            nd = nodes[nd, np.int64(vd > t)]
            s += 1
            continue
        na = _child(lay, img, ba, rowstride, y, xa, na, nodes, thr, weights, sp_off, sp_w, resp)
        nb = _child(lay, img, bb, rowstride, y, xb, nb, nodes, thr, weights, sp_off, sp_w, resp)
        nc = _child(lay, img, bc, rowstride, y, xc, nc, nodes, thr, weights, sp_off, sp_w, resp)
        nd = _child(lay, img, bd, rowstride, y, xd, nd, nodes, thr, weights, sp_off, sp_w, resp)
        s += 1
    return na, nb, nc, nd


@njit(**PARALLEL)
def dense_proba(lay, img, rowstride, y0, y1, x0, x1, roots, steps, nodes, thr, value,
                weights, sp_off, sp_w, resp, out):
    """Mean class distribution over ``roots`` for every pixel of a rectangle.

    Writes ``out[y, x, :]`` (float32, ``(H, W, C)``) for ``y0 <= y < y1`` and
    ``x0 <= x < x1``; pixel ``(y, x)`` has its window top-left at padded
    ``(y, x)`` (the padded image has a ``lay.window // 2`` margin).  Each tree is
    descended at most ``steps`` levels.  Parallel over rows; 4 pixels at a time.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded ``lay.channels``-plane image flattened in C order (padded
        height x ``rowstride`` bytes).
    rowstride : int
        Bytes per padded row (padded width x ``lay.channels``).
    y0, y1, x0, x1 : int
        The rectangle of pixels written, ``[y0, y1) x [x0, x1)``.
    roots : int64 (n_trees,)
        Root node of each tree.
    steps : int
        Depth limit: each tree is descended at most this many levels.
    nodes : int32 (n_nodes, 8)
        The general node records (see the module docstring).
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes`` (``THRESHOLD`` and ``MUL`` columns).
    value : float32 (n_nodes, C)
        Each node's class distribution.
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows, each ``lay.window`` rows of ``lay.row`` values.
    sp_off : int32 (n_entries,)
        Byte offset in the window of each sparse oblique entry.
    sp_w : float32 (n_entries,)
        Weight of each sparse oblique entry.
    resp : float32 (n_resp, H, W)
        Precomputed oblique responses (rows named by the ``RESP`` column; may
        be empty, ``(0, 1, 1)``, when no node uses them).
    out : float32 (H, W, C)
        Written in place inside the rectangle; the rest is left as it is.

    Returns
    -------
    float32 (H, W, C)
        ``out``.
    """
    n_trees = roots.shape[0]
    n_classes = value.shape[1]
    inv = np.float32(1.0) / np.float32(n_trees)
    last = x1 - 1
    for y in prange(y0, y1):
        acc = np.zeros((4, n_classes), dtype=np.float32)
        for x in range(x0, x1, 4):
            xb, xc, xd = min(x + 1, last), min(x + 2, last), min(x + 3, last)
            acc[:, :] = 0.0
            for t in range(n_trees):
                na, nb, nc, nd = _walk4(lay, img, rowstride, y, x, xb, xc, xd, roots[t], steps,
                                        nodes, thr, weights, sp_off, sp_w, resp)
                for c in range(n_classes):
                    acc[0, c] += value[na, c]
                    acc[1, c] += value[nb, c]
                    acc[2, c] += value[nc, c]
                    acc[3, c] += value[nd, c]
            for k in range(min(4, x1 - x)):
                for c in range(n_classes):
                    out[y, x + k, c] = acc[k, c] * inv
    return out


@njit(**PARALLEL)
def count_visits(lay, img, rowstride, y0, y1, x0, x1, roots, steps, nodes, thr, weights, sp_off,
                 sp_w, resp):
    """Per tree ``(dense oblique visits, sparse oblique visits, values the sparse
    ones gathered)`` over a rectangle (for the FLOP and gather bounds): int64
    ``(n_trees, 3)``.  Parallel over rows, each row counted on its own and the
    rows added in order (integers: the same total on any number of threads).

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded ``lay.channels``-plane image flattened in C order.
    rowstride : int
        Bytes per padded row (padded width x ``lay.channels``).
    y0, y1, x0, x1 : int
        The rectangle of pixels counted, ``[y0, y1) x [x0, x1)``.
    roots : int64 (n_trees,)
        Root node of each tree.
    steps : int
        Depth limit: each tree is descended at most this many levels.
    nodes : int32 (n_nodes, 8)
        The general node records (see the module docstring).
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes``.
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows.
    sp_off : int32 (n_entries,)
        Byte offset in the window of each sparse oblique entry.
    sp_w : float32 (n_entries,)
        Weight of each sparse oblique entry.
    resp : float32 (n_resp, H, W)
        Precomputed oblique responses (may be empty).

    Returns
    -------
    int64 (n_trees, 3)
        Per tree: dense oblique nodes visited, sparse oblique nodes visited and
        sparse entries those gathered, summed over the rectangle's pixels.
    """
    n_trees = roots.shape[0]
    rows = np.zeros((max(y1 - y0, 0), n_trees, 3), dtype=np.int64)
    for y in prange(y0, y1):
        r = rows[y - y0]
        for x in range(x0, x1):
            base = y * rowstride + x * lay.channels
            for t in range(n_trees):
                node = roots[t]
                for _ in range(steps):
                    if is_leaf(nodes, node):
                        break
                    o = nodes[node, OBLIQUE]
                    if o >= 0:
                        r[t, 0] += 1
                    elif o < -1:
                        r[t, 1] += 1
                        r[t, 2] += nodes[node, OFF2] - nodes[node, OFF1]
                    node = _child(lay, img, base, rowstride, y, x, node, nodes, thr, weights,
                                  sp_off, sp_w, resp)
    return rows.sum(axis=0)


@njit(**PARALLEL)
def sweep_predict(lay, img, rowstride, ys, xs, roots, depth_list, tree_counts, scales,
                  nodes, thr, value, weights, sp_off, sp_w, resp, chunk, preds):
    """Labels of many truncated forests in one traversal per pixel and tree.

    For pixel ``i`` (window top-left at padded ``(ys[i], xs[i])``), every depth
    limit ``depth_list[k]`` (ascending), every forest made of the first
    ``tree_counts[j]`` trees (ascending), and every row ``scales[a]`` of
    per-class factors ``s^-alpha`` (``scales[a, r]``: one row ``r`` per pixel with a
    position prior, else ``r = 0``), writes ::

        preds[a, k, j, i] = argmax_c scales[a, r, c]
                            * sum_{t < tree_counts[j]} value[node(t, k), c]

    where ``node(t, k)`` is the node tree ``t`` reaches in at most
    ``depth_list[k]`` levels.  Each tree is descended once; the node
    distributions are summed as the descent passes each limit.  Ties go to the
    lowest class id.  Parallel over chunks of ``chunk`` pixels.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded ``lay.channels``-plane image flattened in C order.
    rowstride : int
        Bytes per padded row (padded width x ``lay.channels``).
    ys, xs : int64 (n_pix,)
        The pixels scored.
    roots : int64 (n_trees,)
        Root node of each tree (at least ``tree_counts[-1]`` of them).
    depth_list : int64 (n_d,)
        Depth limits, ascending.
    tree_counts : int64 (n_t,)
        Forest sizes (first trees taken), ascending.
    scales : float64 (n_a, 1 or n_pix, C)
        Per-class factors of each setting ``a``: one row, or one per pixel.
    nodes : int32 (n_nodes, 8)
        The general node records (see the module docstring).
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes``.
    value : float32 (n_nodes, C)
        Each node's class distribution.
    weights : float32 (n_oblique, lay.window * lay.row)
        Dense oblique weight rows.
    sp_off : int32 (n_entries,)
        Byte offset in the window of each sparse oblique entry.
    sp_w : float32 (n_entries,)
        Weight of each sparse oblique entry.
    resp : float32 (n_resp, H, W)
        Precomputed oblique responses (may be empty).
    chunk : int
        Pixels per parallel task.
    preds : uint8 (n_a, n_d, n_t, n_pix)
        Written in place: the labels.

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
        cur = np.empty(4, dtype=np.int64)
        base = np.empty(4, dtype=np.int64)
        idx = np.empty(4, dtype=np.int64)
        sums = np.zeros((4, n_d, n_classes), dtype=np.float64)
        for g in range(lo, hi, 4):
            for q in range(4):
                idx[q] = min(g + q, hi - 1)
                base[q] = ys[idx[q]] * rowstride + xs[idx[q]] * lay.channels
            step = lay.channels
            adjacent = (base[1] == base[0] + step and base[2] == base[0] + 2 * step
                        and base[3] == base[0] + 3 * step)
            sums[:, :, :] = 0.0
            j = 0
            for t in range(tree_counts[n_t - 1]):
                cur[:] = roots[t]
                k = 0
                s = 0
                while k < n_d:
                    while k < n_d and depth_list[k] == s:
                        for q in range(4):
                            for c in range(n_classes):
                                sums[q, k, c] += value[cur[q], c]
                        k += 1
                    if k == n_d:
                        break
                    if (is_leaf(nodes, cur[0]) and is_leaf(nodes, cur[1])
                            and is_leaf(nodes, cur[2]) and is_leaf(nodes, cur[3])):
                        s = depth_list[k]  # nothing moves any more
                        continue
                    n0 = cur[0]
                    o = nodes[n0, OBLIQUE]
                    if (adjacent and o >= 0 and nodes[n0, RESP] < 0 and cur[1] == n0
                            and cur[2] == n0 and cur[3] == n0):
                        va, vb, vc, vd = _dot4(lay, img, base[0], rowstride, weights, o)
                        th = thr[n0, THRESHOLD]
                        cur[0] = nodes[n0, np.int64(va > th)]
                        cur[1] = nodes[n0, np.int64(vb > th)]
                        cur[2] = nodes[n0, np.int64(vc > th)]
                        cur[3] = nodes[n0, np.int64(vd > th)]
                    else:
                        for q in range(4):
                            i = idx[q]
                            cur[q] = _child(lay, img, base[q], rowstride, ys[i], xs[i], cur[q],
                                            nodes, thr, weights, sp_off, sp_w, resp)
                    s += 1
                while j < n_t and tree_counts[j] == t + 1:
                    for q in range(min(4, hi - g)):
                        for a in range(n_a):
                            for kk in range(n_d):
                                preds[a, kk, j, g + q] = argmax_scaled(sums, q, kk, scales, a,
                                                                       g + q)
                    j += 1
    return preds
