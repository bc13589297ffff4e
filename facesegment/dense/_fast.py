"""Integer fast path of dense inference: axis-aligned and two-probe forests (private).

Forests without oblique nodes are traversed from one 64-bit record per node,
built by :func:`facesegment.dense._packing.pack_fast`::

    bits  0-14  probe 1: byte offset from the window's first byte in the
                padded image (``layout.feature_offsets(padded_width)``)
    bits 15-29  probe 2, same
    bit  30     the node is two-probe (value = probe1 - probe2, else probe1)
    bits 31-40  floor(threshold) + 256, in 0..512
    bits 41-63  global index of the left child (the right child is left + 1)

Offsets depend on the padded width and the layout and must fit 15 bits
(images up to :func:`max_width` pixels wide: 333 for 31x31x3; wider ones use
the general kernels), and forests up to ``MAX_NODES`` nodes.  Decoding
offsets from (row, byte) at run time instead was measured 1.3x slower on
two-probe forests.  Pixel values are integers, so ``v <= t`` equals
``v <= floor(t)``: one integer compare, no float.  Leaves point to themselves
with threshold field 512 (``v > 256`` never holds) and probes 0, so a pixel
that reached its leaf keeps stepping in place while the others of its group
go on, and after ``d`` steps a pixel is at its node of depth
``min(d, leaf depth)``, whose class distribution is ``value[node]``.

Traversal is tree-major over large blocks of rows (one block per thread):
a tree's records and leaf values stay in the core's L2 cache while every
pixel of the block descends it, 8 descents interleaved (pixels x..x+7 of a
row, ``CHANNELS`` bytes apart).  Measured on the pipeline's depth-20 forests
this is 1.8x faster than blocks of 4 rows, whose trees were reloaded from L3
for every block.  Templates compiled per window layout (``CHANNELS``: see
:mod:`facesegment.dense._numba`).
"""

import numpy as np
from numba import njit, prange

from ._numba import INLINE, PARALLEL, template
from ._scores import argmax_scaled

U = np.uint64
OFF_BITS = 15
OFF_MASK = (1 << OFF_BITS) - 1
MUL_SHIFT = 30
THR_SHIFT = 31
LEFT_SHIFT = 41
MAX_NODES = 1 << 23  # left-child field

# Bound per layout by layout_kernels(); the templates never run with these.
WINDOW = CHANNELS = ROW = None


def max_width(window, channels):
    """Widest image whose probe offsets fit the 15-bit fields (333 for 31x31x3).

    The largest offset is ``(window - 1) * rowstride + row - 1`` with
    ``rowstride = (width + window - 1) * channels`` bytes per padded row.
    """
    if window == 1:
        return 2 ** 62
    return (OFF_MASK - (window * channels - 1)) // ((window - 1) * channels) - (window - 1)


def slack_bytes(channels):
    """Bytes :func:`dense_proba_fast` may read past the padded image: a row's last
    group of 8 pixels runs up to 7 pixels past the region (at least 64)."""
    return max(64, 8 * channels)


@njit(**INLINE)
def _probe(w, shift):
    return (w >> U(shift)) & U(OFF_MASK)


@njit(**INLINE)
def _step1(img, b, rs, rec, p):
    """Child of node ``p`` in a forest of axis-aligned nodes only."""
    w = rec[p]
    v = np.int32(img[b + _probe(w, 0)])
    t = np.int32((w >> U(THR_SHIFT)) & U(0x3FF)) - 256
    return (w >> U(LEFT_SHIFT)) + U(v > t)


@njit(**INLINE)
def _step2(img, b, rs, rec, p):
    """Child of node ``p`` (axis-aligned or two-probe), without a branch."""
    w = rec[p]
    m = -np.int32((w >> U(MUL_SHIFT)) & U(1))
    v = np.int32(img[b + _probe(w, 0)]) - (np.int32(img[b + _probe(w, OFF_BITS)]) & m)
    t = np.int32((w >> U(THR_SHIFT)) & U(0x3FF)) - 256
    return (w >> U(LEFT_SHIFT)) + U(v > t)


@njit(**INLINE)
def _leaf(rec, p):
    return (rec[p] >> U(LEFT_SHIFT)) == p


@template(INLINE)
def _descend8(img, b, rs, rec, r, steps, two):
    """Leaf-or-depth-``steps`` nodes of 8 pixels whose windows start at
    ``b, b + CHANNELS, ..., b + 7 * CHANNELS``."""
    p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = r
    s = 0
    while s < steps:
        if (_leaf(rec, p0) and _leaf(rec, p1) and _leaf(rec, p2) and _leaf(rec, p3)
                and _leaf(rec, p4) and _leaf(rec, p5) and _leaf(rec, p6)
                and _leaf(rec, p7)):
            break
        if two:
            p0 = _step2(img, b, rs, rec, p0)
            p1 = _step2(img, b + U(CHANNELS), rs, rec, p1)
            p2 = _step2(img, b + U(2 * CHANNELS), rs, rec, p2)
            p3 = _step2(img, b + U(3 * CHANNELS), rs, rec, p3)
            p4 = _step2(img, b + U(4 * CHANNELS), rs, rec, p4)
            p5 = _step2(img, b + U(5 * CHANNELS), rs, rec, p5)
            p6 = _step2(img, b + U(6 * CHANNELS), rs, rec, p6)
            p7 = _step2(img, b + U(7 * CHANNELS), rs, rec, p7)
        else:
            p0 = _step1(img, b, rs, rec, p0)
            p1 = _step1(img, b + U(CHANNELS), rs, rec, p1)
            p2 = _step1(img, b + U(2 * CHANNELS), rs, rec, p2)
            p3 = _step1(img, b + U(3 * CHANNELS), rs, rec, p3)
            p4 = _step1(img, b + U(4 * CHANNELS), rs, rec, p4)
            p5 = _step1(img, b + U(5 * CHANNELS), rs, rec, p5)
            p6 = _step1(img, b + U(6 * CHANNELS), rs, rec, p6)
            p7 = _step1(img, b + U(7 * CHANNELS), rs, rec, p7)
        s += 1
    return p0, p1, p2, p3, p4, p5, p6, p7


@template(PARALLEL)
def dense_proba_fast(img, rowstride, y0, y1, x0, x1, roots, steps, rec, two, value, out,
                     block_rows):
    """Mean node distribution of pixels ``[y0, y1) x [x0, x1)`` into ``out`` (H, W, C).

    ``img``: padded image, flattened, with :func:`slack_bytes` extra bytes (a
    row's last group of 8 pixels may run past ``x1``; those results are
    dropped).  ``roots``: global root index per tree; ``rec``: uint64 records;
    ``value``: float32 (n_nodes, C).  Per pixel the distributions are added in
    tree order in float32, then scaled by ``1 / n_trees``: the arithmetic of
    :func:`facesegment.dense._general.dense_proba`, so results are identical
    bit for bit.  Parallel over blocks of ``block_rows`` rows (one per thread
    is best); inside a block tree by tree.
    """
    n_trees = roots.shape[0]
    n_classes = value.shape[1]
    inv = np.float32(1.0) / np.float32(n_trees)
    width = x1 - x0
    rs = U(rowstride)
    n_blocks = (y1 - y0 + block_rows - 1) // block_rows
    for blk in prange(n_blocks):
        ya = y0 + blk * block_rows
        yb = min(y1, ya + block_rows)
        acc = np.zeros((block_rows, width + 8, n_classes), dtype=np.float32)
        for t in range(n_trees):
            r = U(roots[t])
            for y in range(ya, yb):
                ay = U(y - ya)
                for x in range(x0, x1, 8):
                    b = U(y * rowstride + CHANNELS * x)
                    p0, p1, p2, p3, p4, p5, p6, p7 = _descend8(img, b, rs, rec, r, steps, two)
                    i = U(x - x0)
                    for c in range(n_classes):
                        cu = U(c)
                        acc[ay, i, cu] += value[p0, cu]
                        acc[ay, i + U(1), cu] += value[p1, cu]
                        acc[ay, i + U(2), cu] += value[p2, cu]
                        acc[ay, i + U(3), cu] += value[p3, cu]
                        acc[ay, i + U(4), cu] += value[p4, cu]
                        acc[ay, i + U(5), cu] += value[p5, cu]
                        acc[ay, i + U(6), cu] += value[p6, cu]
                        acc[ay, i + U(7), cu] += value[p7, cu]
        for y in range(ya, yb):
            for i in range(width):
                for c in range(n_classes):
                    out[y, x0 + i, c] = acc[y - ya, i, c] * inv
    return out


@template(PARALLEL)
def sweep_predict_fast(img, rowstride, ys, xs, roots, depth_list, tree_counts, scales,
                       rec, two, value, chunk, preds):
    """Labels of pixels ``(ys, xs)`` for every (alpha, depth, n_trees) setting.

    Same contract and results as :func:`facesegment.dense._general.sweep_predict`
    (per-pixel float64 sums in tree order); tree-major inside each chunk of
    pixels, 8 descents interleaved; a pixel's node after ``depth_list[k]``
    steps is its node at that depth limit.
    """
    n_pix = ys.shape[0]
    n_classes = value.shape[1]
    n_d = depth_list.shape[0]
    n_t = tree_counts.shape[0]
    n_a = scales.shape[0]
    rs = U(rowstride)
    n_chunks = (n_pix + chunk - 1) // chunk
    for ch in prange(n_chunks):
        lo = ch * chunk
        hi = min(n_pix, lo + chunk)
        npx = hi - lo
        base = np.empty(npx + 8, dtype=np.uint64)
        for i in range(npx + 8):
            q = lo + min(i, npx - 1)
            base[i] = U(ys[q] * rowstride + xs[q] * CHANNELS)
        sums = np.zeros((npx + 8, n_d, n_classes), dtype=np.float64)
        cur = np.empty(8, dtype=np.uint64)
        j = 0
        for t in range(tree_counts[n_t - 1]):
            r = U(roots[t])
            for g in range(0, npx, 8):
                p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = r
                k = 0
                s = 0
                while k < n_d:
                    while k < n_d and depth_list[k] == s:
                        cur[0], cur[1], cur[2], cur[3] = p0, p1, p2, p3
                        cur[4], cur[5], cur[6], cur[7] = p4, p5, p6, p7
                        for q in range(8):
                            nq = cur[q]
                            for c in range(n_classes):
                                sums[g + q, k, c] += value[nq, c]
                        k += 1
                    if k == n_d:
                        break
                    if (_leaf(rec, p0) and _leaf(rec, p1) and _leaf(rec, p2)
                            and _leaf(rec, p3) and _leaf(rec, p4) and _leaf(rec, p5)
                            and _leaf(rec, p6) and _leaf(rec, p7)):
                        s = depth_list[k]  # nothing moves any more
                        continue
                    if two:
                        p0 = _step2(img, base[g], rs, rec, p0)
                        p1 = _step2(img, base[g + 1], rs, rec, p1)
                        p2 = _step2(img, base[g + 2], rs, rec, p2)
                        p3 = _step2(img, base[g + 3], rs, rec, p3)
                        p4 = _step2(img, base[g + 4], rs, rec, p4)
                        p5 = _step2(img, base[g + 5], rs, rec, p5)
                        p6 = _step2(img, base[g + 6], rs, rec, p6)
                        p7 = _step2(img, base[g + 7], rs, rec, p7)
                    else:
                        p0 = _step1(img, base[g], rs, rec, p0)
                        p1 = _step1(img, base[g + 1], rs, rec, p1)
                        p2 = _step1(img, base[g + 2], rs, rec, p2)
                        p3 = _step1(img, base[g + 3], rs, rec, p3)
                        p4 = _step1(img, base[g + 4], rs, rec, p4)
                        p5 = _step1(img, base[g + 5], rs, rec, p5)
                        p6 = _step1(img, base[g + 6], rs, rec, p6)
                        p7 = _step1(img, base[g + 7], rs, rec, p7)
                    s += 1
            while j < n_t and tree_counts[j] == t + 1:
                for i in range(npx):
                    for a in range(n_a):
                        for kk in range(n_d):
                            preds[a, kk, j, lo + i] = argmax_scaled(sums, i, kk, scales, a, lo + i)
                j += 1
    return preds
