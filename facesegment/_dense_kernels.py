"""Numba kernels of dense inference (private; see :mod:`facesegment.inference`).

Kernels take plain arrays and scalars and do no validation.  The image is the
*padded* RGB uint8 image flattened in C order (``img``), with ``rowstride`` bytes
per row; the window of the pixel whose window top-left corner is padded pixel
``(y, x)`` starts at byte ``base = y * rowstride + x * 3``.  Per node the wrapper
precomputes ``off1``/``off2``: the byte offsets (inside the window) of the node's
first and second probe for this padded width, so axis-aligned and two-probe
nodes read one or two bytes.  Oblique nodes dot a weights row, laid out as 31
rows of 93 contiguous values, with the window's 31 rows of 93 contiguous bytes.

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
truncating at depth ``d`` is taking at most ``d`` steps.  ``RESP``: row of optional precomputed oblique responses (the top
levels of CO2 trees evaluated for the whole image at once by FFT
correlation): ``resp[nodes[n, RESP], y, x]`` replaces the dot product when it
is >= 0.
"""

import numpy as np
from numba import njit, prange

from .classes import WINDOW, N_CHANNELS

ROW = WINDOW * N_CHANNELS  # 93 contiguous bytes per window row
LEFT, RIGHT, OFF1, OFF2, OBLIQUE, THRESHOLD, MUL, RESP = range(8)


@njit(cache=True, nogil=True, fastmath=True)
def _dot_window(img, base, rowstride, weights, row):
    """``weights[row] @ window`` for the window starting at byte ``base``.

    Written over row slices (93 contiguous bytes and weights) so that LLVM
    vectorises the inner loop (2x faster than indexing the 2-d arrays).
    """
    acc = np.float32(0.0)
    wrow = weights[row]
    for dy in range(WINDOW):
        p = base + dy * rowstride
        ir = img[p:p + ROW]
        wr = wrow[dy * ROW:dy * ROW + ROW]
        for j in range(ROW):
            acc += wr[j] * np.float32(ir[j])
    return acc


@njit(cache=True, nogil=True, fastmath=True)
def _dot4(img, base, rowstride, weights, row):
    """``weights[row] @ window`` for the 4 horizontally adjacent windows starting at
    ``base``, ``base + 3``, ``base + 6``, ``base + 9``: each weight is loaded once."""
    a0 = np.float32(0.0)
    a1 = np.float32(0.0)
    a2 = np.float32(0.0)
    a3 = np.float32(0.0)
    wrow = weights[row]
    for dy in range(WINDOW):
        p = base + dy * rowstride
        ir = img[p:p + ROW + 9]
        wr = wrow[dy * ROW:dy * ROW + ROW]
        for j in range(ROW):
            w = wr[j]
            a0 += w * np.float32(ir[j])
            a1 += w * np.float32(ir[j + 3])
            a2 += w * np.float32(ir[j + 6])
            a3 += w * np.float32(ir[j + 9])
    return a0, a1, a2, a3


@njit(cache=True, nogil=True, inline="always")
def _node_value(img, base, rowstride, y, x, node, nodes, thr, weights, resp):
    """The split value of ``node`` for the window at ``base``."""
    o = nodes[node, OBLIQUE]
    if o >= 0:
        r = nodes[node, RESP]
        if r >= 0:
            return resp[r, y, x]
        return _dot_window(img, base, rowstride, weights, o)
    return (np.float32(img[base + nodes[node, OFF1]])
            - thr[node, MUL] * np.float32(img[base + nodes[node, OFF2]]))


@njit(cache=True, nogil=True, inline="always")
def _child(img, base, rowstride, y, x, node, nodes, thr, weights, resp):
    """The child of ``node`` the window at ``base`` goes to (a leaf: itself)."""
    v = _node_value(img, base, rowstride, y, x, node, nodes, thr, weights, resp)
    return nodes[node, np.int64(v > thr[node, THRESHOLD])]


@njit(cache=True, nogil=True, inline="always")
def _is_leaf(nodes, n):
    return nodes[n, LEFT] == n


@njit(cache=True, nogil=True, inline="always")
def _walk4(img, rowstride, y, xa, xb, xc, xd, root, steps, nodes, thr, weights, resp):
    """Descend one tree for 4 pixels of row ``y`` at once, at most ``steps`` levels.

    A descent is a chain of dependent loads (node, then the window byte it
    names); four independent chains interleaved let the CPU overlap their
    latencies.  A finished chain steps on its leaf, which stays put.
    """
    ba = y * rowstride + xa * 3
    bb = y * rowstride + xb * 3
    bc = y * rowstride + xc * 3
    bd = y * rowstride + xd * 3
    na = nb = nc = nd = root
    adjacent = xb == xa + 1 and xc == xa + 2 and xd == xa + 3
    s = 0
    while s < steps and not (_is_leaf(nodes, na) and _is_leaf(nodes, nb)
                             and _is_leaf(nodes, nc) and _is_leaf(nodes, nd)):
        o = nodes[na, OBLIQUE]
        if (adjacent and o >= 0 and nodes[na, RESP] < 0 and na == nb and na == nc
                and na == nd):
            # 4 neighbours at one CO2 node: one pass over its weights
            va, vb, vc, vd = _dot4(img, ba, rowstride, weights, o)
            t = thr[na, THRESHOLD]
            na = nodes[na, np.int64(va > t)]
            nb = nodes[nb, np.int64(vb > t)]
            nc = nodes[nc, np.int64(vc > t)]
            nd = nodes[nd, np.int64(vd > t)]
            s += 1
            continue
        na = _child(img, ba, rowstride, y, xa, na, nodes, thr, weights, resp)
        nb = _child(img, bb, rowstride, y, xb, nb, nodes, thr, weights, resp)
        nc = _child(img, bc, rowstride, y, xc, nc, nodes, thr, weights, resp)
        nd = _child(img, bd, rowstride, y, xd, nd, nodes, thr, weights, resp)
        s += 1
    return na, nb, nc, nd


@njit(cache=True, nogil=True, parallel=True)
def dense_proba(img, rowstride, y0, y1, x0, x1, roots, steps, nodes, thr, value,
                weights, resp, out):
    """Mean class distribution over ``roots`` for every pixel of a rectangle.

    Writes ``out[y, x, :]`` (float32, ``(H, W, C)``) for ``y0 <= y < y1`` and
    ``x0 <= x < x1``; pixel ``(y, x)`` has its window top-left at padded
    ``(y, x)`` (the padded image has a 15-px margin).  Each tree is descended
    at most ``steps`` levels.  Parallel over rows; 4 pixels at a time.
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
                na, nb, nc, nd = _walk4(img, rowstride, y, x, xb, xc, xd, roots[t], steps,
                                        nodes, thr, weights, resp)
                for c in range(n_classes):
                    acc[0, c] += value[na, c]
                    acc[1, c] += value[nb, c]
                    acc[2, c] += value[nc, c]
                    acc[3, c] += value[nd, c]
            for k in range(min(4, x1 - x)):
                for c in range(n_classes):
                    out[y, x + k, c] = acc[k, c] * inv
    return out


@njit(cache=True, nogil=True)
def count_oblique_visits(img, rowstride, y0, y1, x0, x1, roots, steps, nodes, thr,
                         weights, resp):
    """Number of oblique nodes evaluated over a rectangle (for the FLOP bound)."""
    total = 0
    for y in range(y0, y1):
        for x in range(x0, x1):
            base = y * rowstride + x * 3
            for t in range(roots.shape[0]):
                node = roots[t]
                for _ in range(steps):
                    if _is_leaf(nodes, node):
                        break
                    if nodes[node, OBLIQUE] >= 0:
                        total += 1
                    node = _child(img, base, rowstride, y, x, node, nodes, thr, weights, resp)
    return total


@njit(cache=True, nogil=True, parallel=True)
def sweep_predict(img, rowstride, ys, xs, roots, depth_list, tree_counts, scales,
                  nodes, thr, value, weights, resp, chunk, preds):
    """Labels of many truncated forests in one traversal per pixel and tree.

    For pixel ``i`` (window top-left at padded ``(ys[i], xs[i])``), every depth
    limit ``depth_list[k]`` (ascending), every forest made of the first
    ``tree_counts[j]`` trees (ascending), and every row ``scales[a]`` of
    per-class factors ``s^-alpha``, writes
    ``preds[a, k, j, i] = argmax_c scales[a, c] * sum_{t < tree_counts[j]} value[node(t, k), c]``
    where ``node(t, k)`` is the node tree ``t`` reaches in at most
    ``depth_list[k]`` levels.  Each tree is descended once; the node
    distributions are summed as the descent passes each limit.  Ties go to the
    lowest class id.  Parallel over chunks of ``chunk`` pixels.
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
                base[q] = ys[idx[q]] * rowstride + xs[idx[q]] * 3
            adjacent = base[1] == base[0] + 3 and base[2] == base[0] + 6 and \
                base[3] == base[0] + 9
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
                    if (_is_leaf(nodes, cur[0]) and _is_leaf(nodes, cur[1])
                            and _is_leaf(nodes, cur[2]) and _is_leaf(nodes, cur[3])):
                        s = depth_list[k]  # nothing moves any more
                        continue
                    n0 = cur[0]
                    o = nodes[n0, OBLIQUE]
                    if (adjacent and o >= 0 and nodes[n0, RESP] < 0 and cur[1] == n0
                            and cur[2] == n0 and cur[3] == n0):
                        va, vb, vc, vd = _dot4(img, base[0], rowstride, weights, o)
                        th = thr[n0, THRESHOLD]
                        cur[0] = nodes[n0, np.int64(va > th)]
                        cur[1] = nodes[n0, np.int64(vb > th)]
                        cur[2] = nodes[n0, np.int64(vc > th)]
                        cur[3] = nodes[n0, np.int64(vd > th)]
                    else:
                        for q in range(4):
                            i = idx[q]
                            cur[q] = _child(img, base[q], rowstride, ys[i], xs[i], cur[q],
                                            nodes, thr, weights, resp)
                    s += 1
                while j < n_t and tree_counts[j] == t + 1:
                    for q in range(min(4, hi - g)):
                        for a in range(n_a):
                            for kk in range(n_d):
                                best = 0
                                bv = sums[q, kk, 0] * scales[a, 0]
                                for c in range(1, n_classes):
                                    sv = sums[q, kk, c] * scales[a, c]
                                    if sv > bv:
                                        bv = sv
                                        best = c
                                preds[a, kk, j, g + q] = best
                    j += 1
    return preds


@njit(cache=True, nogil=True)
def confusion_many(preds, truth, n_classes, out):
    """``out[s, t, p] += #{i : truth[i] == t and preds[s, i] == p}`` (int64)."""
    for s in range(preds.shape[0]):
        for i in range(truth.shape[0]):
            out[s, truth[i], preds[s, i]] += 1
    return out



# ------------------------------------------------------------------------------
# Fast path for forests without oblique nodes (axis-aligned and two-probe).
#
# Each node is one record of 4 int32 (16 bytes, 4 nodes per cache line) in a
# flat array ``rec`` (node n at ``rec[4n:4n+4]``):
#
#   rec[p + F_LEFT]  flat index 4*left of the left child (right = left + 1, so
#                    the right child's record follows it); a leaf: its own p
#   rec[p + F_OT]    (integer threshold << 21) | byte offset of the first probe
#   rec[p + F_OM]    (byte offset of the second probe << 8) | mask, mask 0xFF
#                    for two-probe nodes and 0 for axis-aligned ones
#   rec[p + 3]       unused (alignment)
#
# Offsets are for the padded image's row stride.  The split
# ``value <= threshold`` (float32 threshold, integer value b1 - (b2 & mask) in
# [-255, 255]) equals ``value <= floor(threshold)``: the integer threshold is
# floor(threshold) clipped to [-256, 256]; leaves get 256 (never right).  A
# visit is two record loads (three in forests with two-probe nodes), one or
# two byte loads and an integer compare: no float, no branch.
# Traversal is tree-major over blocks of rows (a tree's upper nodes stay in
# L1) with 8 independent descents interleaved (pixels x..x+7 of a row, windows
# at bytes b, b+3, ..., b+21).

F_LEFT, F_OT, F_OM = range(3)
OFF_BITS = 21
OFF_MASK = (1 << OFF_BITS) - 1
FAST_BLOCK_ROWS = 4
FAST_SLACK = 64  # bytes the fast dense kernel may read past the padded image


@njit(cache=True, nogil=True, inline="always")
def _fstep1(img, b, rec, p):
    """Child (flat record index) of node ``p`` of an axis-aligned-only forest.

    Indices are cast to unsigned: Numba then skips its negative-index
    wraparound test on every access (1.5-2x faster descents).
    """
    w = rec[np.uint64(p + F_OT)]
    v = np.int32(img[np.uint64(b + (w & OFF_MASK))])
    return np.int64(rec[np.uint64(p)]) + 4 * np.int64(v > (w >> OFF_BITS))


@njit(cache=True, nogil=True, inline="always")
def _fstep2(img, b, rec, p):
    """Child (flat record index) of node ``p`` (axis-aligned or two-probe)."""
    w = rec[np.uint64(p + F_OT)]
    m = rec[np.uint64(p + F_OM)]
    v = (np.int32(img[np.uint64(b + (w & OFF_MASK))])
         - (np.int32(img[np.uint64(b + (m >> 8))]) & (m & 0xFF)))
    return np.int64(rec[np.uint64(p)]) + 4 * np.int64(v > (w >> OFF_BITS))


@njit(cache=True, nogil=True, inline="always")
def _fleaf(rec, p):
    return rec[np.uint64(p)] == p


@njit(cache=True, nogil=True, parallel=True)
def dense_proba_fast(img, rowstride, y0, y1, x0, x1, roots4, steps, rec, two, value, out,
                     block_rows=FAST_BLOCK_ROWS):
    """:func:`dense_proba` for forests of axis-aligned / two-probe nodes (``rec`` layout).

    ``roots4`` holds ``4 * root``; ``two``: the forest has two-probe nodes.
    ``img`` must have at least ``FAST_SLACK`` bytes after the padded image: a
    row's last group of 8 pixels may run past ``x1`` (those results are
    dropped).  Same results as :func:`dense_proba` bit for bit (per pixel the
    leaf distributions are added in tree order, then scaled).  Parallel over
    blocks of ``block_rows`` rows; inside a block tree by tree.
    """
    n_trees = roots4.shape[0]
    n_classes = value.shape[1]
    inv = np.float32(1.0) / np.float32(n_trees)
    width = x1 - x0
    n_blocks = (y1 - y0 + block_rows - 1) // block_rows
    for blk in prange(n_blocks):
        ya = y0 + blk * block_rows
        yb = min(y1, ya + block_rows)
        acc = np.zeros((block_rows, width + 8, n_classes), dtype=np.float32)
        for t in range(n_trees):
            r = roots4[t]
            for y in range(ya, yb):
                row = y * rowstride
                ay = np.uint64(y - ya)
                for x in range(x0, x1, 8):
                    b = row + 3 * x
                    p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = r
                    s = 0
                    while s < steps:
                        if (_fleaf(rec, p0) and _fleaf(rec, p1) and _fleaf(rec, p2)
                                and _fleaf(rec, p3) and _fleaf(rec, p4) and _fleaf(rec, p5)
                                and _fleaf(rec, p6) and _fleaf(rec, p7)):
                            break
                        if two:
                            p0 = _fstep2(img, b + 0, rec, p0)
                            p1 = _fstep2(img, b + 3, rec, p1)
                            p2 = _fstep2(img, b + 6, rec, p2)
                            p3 = _fstep2(img, b + 9, rec, p3)
                            p4 = _fstep2(img, b + 12, rec, p4)
                            p5 = _fstep2(img, b + 15, rec, p5)
                            p6 = _fstep2(img, b + 18, rec, p6)
                            p7 = _fstep2(img, b + 21, rec, p7)
                        else:
                            p0 = _fstep1(img, b + 0, rec, p0)
                            p1 = _fstep1(img, b + 3, rec, p1)
                            p2 = _fstep1(img, b + 6, rec, p2)
                            p3 = _fstep1(img, b + 9, rec, p3)
                            p4 = _fstep1(img, b + 12, rec, p4)
                            p5 = _fstep1(img, b + 15, rec, p5)
                            p6 = _fstep1(img, b + 18, rec, p6)
                            p7 = _fstep1(img, b + 21, rec, p7)
                        s += 1
                    i = x - x0
                    n0 = np.uint64(p0 >> 2)
                    n1 = np.uint64(p1 >> 2)
                    n2 = np.uint64(p2 >> 2)
                    n3 = np.uint64(p3 >> 2)
                    n4 = np.uint64(p4 >> 2)
                    n5 = np.uint64(p5 >> 2)
                    n6 = np.uint64(p6 >> 2)
                    n7 = np.uint64(p7 >> 2)
                    for c in range(n_classes):
                        cu = np.uint64(c)
                        acc[ay, np.uint64(i + 0), cu] += value[n0, cu]
                        acc[ay, np.uint64(i + 1), cu] += value[n1, cu]
                        acc[ay, np.uint64(i + 2), cu] += value[n2, cu]
                        acc[ay, np.uint64(i + 3), cu] += value[n3, cu]
                        acc[ay, np.uint64(i + 4), cu] += value[n4, cu]
                        acc[ay, np.uint64(i + 5), cu] += value[n5, cu]
                        acc[ay, np.uint64(i + 6), cu] += value[n6, cu]
                        acc[ay, np.uint64(i + 7), cu] += value[n7, cu]
        for y in range(ya, yb):
            for i in range(width):
                for c in range(n_classes):
                    out[y, x0 + i, c] = acc[y - ya, i, c] * inv
    return out


@njit(cache=True, nogil=True, parallel=True)
def sweep_predict_fast(img, rowstride, ys, xs, roots4, depth_list, tree_counts, scales,
                       rec, two, value, chunk, preds):
    """:func:`sweep_predict` for forests of axis-aligned / two-probe nodes (``rec``).

    Tree-major inside each chunk of pixels, 8 descents interleaved; per pixel
    the sums are accumulated in the same order, so the labels are identical.
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
        npx = hi - lo
        base = np.empty(npx + 8, dtype=np.int64)
        for i in range(npx + 8):
            q = lo + min(i, npx - 1)
            base[i] = ys[q] * rowstride + xs[q] * 3
        sums = np.zeros((npx + 8, n_d, n_classes), dtype=np.float64)
        cur = np.empty(8, dtype=np.int64)
        j = 0
        for t in range(tree_counts[n_t - 1]):
            r = roots4[t]
            for g in range(0, npx, 8):
                p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = r
                k = 0
                s = 0
                while k < n_d:
                    while k < n_d and depth_list[k] == s:
                        cur[0], cur[1], cur[2], cur[3] = p0, p1, p2, p3
                        cur[4], cur[5], cur[6], cur[7] = p4, p5, p6, p7
                        for q in range(8):
                            nq = cur[q] >> 2
                            for c in range(n_classes):
                                sums[g + q, k, c] += value[nq, c]
                        k += 1
                    if k == n_d:
                        break
                    if (_fleaf(rec, p0) and _fleaf(rec, p1) and _fleaf(rec, p2)
                            and _fleaf(rec, p3) and _fleaf(rec, p4) and _fleaf(rec, p5)
                            and _fleaf(rec, p6) and _fleaf(rec, p7)):
                        s = depth_list[k]  # nothing moves any more
                        continue
                    if two:
                        p0 = _fstep2(img, base[g], rec, p0)
                        p1 = _fstep2(img, base[g + 1], rec, p1)
                        p2 = _fstep2(img, base[g + 2], rec, p2)
                        p3 = _fstep2(img, base[g + 3], rec, p3)
                        p4 = _fstep2(img, base[g + 4], rec, p4)
                        p5 = _fstep2(img, base[g + 5], rec, p5)
                        p6 = _fstep2(img, base[g + 6], rec, p6)
                        p7 = _fstep2(img, base[g + 7], rec, p7)
                    else:
                        p0 = _fstep1(img, base[g], rec, p0)
                        p1 = _fstep1(img, base[g + 1], rec, p1)
                        p2 = _fstep1(img, base[g + 2], rec, p2)
                        p3 = _fstep1(img, base[g + 3], rec, p3)
                        p4 = _fstep1(img, base[g + 4], rec, p4)
                        p5 = _fstep1(img, base[g + 5], rec, p5)
                        p6 = _fstep1(img, base[g + 6], rec, p6)
                        p7 = _fstep1(img, base[g + 7], rec, p7)
                    s += 1
            while j < n_t and tree_counts[j] == t + 1:
                for i in range(npx):
                    for a in range(n_a):
                        for kk in range(n_d):
                            best = 0
                            bv = sums[i, kk, 0] * scales[a, 0]
                            for c in range(1, n_classes):
                                sv = sums[i, kk, c] * scales[a, c]
                                if sv > bv:
                                    bv = sv
                                    best = c
                            preds[a, kk, j, lo + i] = best
                j += 1
    return preds

