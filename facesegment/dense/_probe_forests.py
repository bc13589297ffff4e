"""Integer fast path of dense inference: axis-aligned, two-probe and sparse forests (private).

Forests without dense oblique nodes are traversed from one 64-bit record per
node, built by :func:`facesegment.dense._packing.pack_fast`::

    bits  0-14  probe 1: byte offset from the window's first byte in the
                padded image (``layout.feature_offsets(padded_width)``)
    bits 15-29  probe 2, same
    bit  30     the node is two-probe (value = probe1 - probe2, else probe1)
    bits 31-40  floor(threshold) + 256, in 0..512; SPARSE_CODE (1023) for a
                sparse oblique node, whose bits 0-29 are then its sparse row r
    bits 41-63  global index of the left child (the right child is left + 1)

Mode 3 (wide offsets) is for forests of axis-aligned nodes only whose
offsets do not fit 15 bits: bits 0-29 are then one 30-bit probe offset (an
axis-aligned record's probe-2 field is 0, so the kernels step modes 0 and 3
alike).  It
serves images too wide for 15 bits and the *split buffer* of auto-context
stages (:func:`split_offsets`): the padded image followed by copies of the
context planes laid out with the image's own strides, so a context value at
the window's centre is one constant offset from the window's first byte, as
an image value is, and the 8 interleaved pixels read neighbouring bytes.

A sparse row ``r`` gathers its entries ``sp_ptr[r] .. sp_ptr[r + 1] - 1``:
``sum_k sp_w[k] * img[b + sp_off[k]]`` in float32 in that order (the exact
arithmetic of :func:`facesegment.forest._sparse.sparse_value`, so the result
is bit-identical to training's), compared with ``sp_thr[r]``.  When the 8
interleaved pixels sit at the same sparse node (common near the roots: the
pixels are neighbours), one pass over the entries serves all 8.  ``mode``: 0
axis-aligned only, 1 with two-probe nodes, 2 with sparse nodes too, 3
axis-aligned only with 30-bit offsets.

Offsets depend on the padded width and the layout and must fit 15 bits
(images up to :func:`max_width` pixels wide: 333 for 31x31x3; wider ones use
mode 3 for axis-aligned forests, the general kernels otherwise), and forests
up to ``MAX_NODES`` nodes.  Decoding
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
row, ``lay.channels`` bytes apart).  Measured on the pipeline's depth-20 forests
this is 1.8x faster than blocks of 4 rows, which reload the trees from L3
for every block.  The kernels take the layout first (``lay``: its
``channels`` and node family are compile-time constants, see
:mod:`facesegment.dense._numba`).
"""

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba.extending import overload

from .._jit import INLINE, PARALLEL, njit
from ._numba import FORMS, form_of, layout_kernels
from ._scores import argmax_scaled

U = np.uint64
OFF_BITS = 15
OFF_MASK = (1 << OFF_BITS) - 1
MUL_SHIFT = 30
THR_SHIFT = 31
LEFT_SHIFT = 41
MAX_NODES = 1 << 23  # left-child field
#: Threshold-field value marking a sparse oblique node.
SPARSE_CODE = 1023
#: Bits of the sparse row index and of a mode-3 offset (the two probe fields).
ROW_MASK = (1 << 30) - 1
WIDE_MASK = ROW_MASK
MAX_SPARSE_ROWS = 1 << 30


#: The kernels are compiled per node family (the layout's form, so ``lay.mode`` is
#: a compile-time constant and :func:`_step` compiles only the step its nodes
#: take): ``layout_kernels(_probe_forests, window, channels, VARIANT[mode])``, or
#: :func:`kernels`.  The form of each ``mode`` of :func:`facesegment.dense._packing.pack_fast`
#: (modes 0 and 3 step alike).
VARIANT = {0: "axis", 1: "twoprobe", 2: "sparse", 3: "axis"}


def kernels(window, channels, mode):
    """The fast kernels compiled for one layout and one ``mode`` of
    :func:`facesegment.dense._packing.pack_fast` (dispatchers; they compile on
    their first call, then load from the disk cache).

    Parameters
    ----------
    window, channels : int
        The layout (``lay.channels`` of the kernels: for a split buffer, the
        image's ``c0``).
    mode : int
        0, 1, 2 or 3 (:data:`VARIANT` picks the compiled node family).

    Returns
    -------
    types.SimpleNamespace
        :func:`facesegment.dense._numba.layout_kernels` of this module for that
        layout and variant.
    """
    return layout_kernels(sys.modules[__name__], window, channels, VARIANT[mode])


def max_width(window, channels):
    """Widest image whose probe offsets fit the 15-bit fields (333 for 31x31x3).

    The largest offset is ``(window - 1) * rowstride + row - 1`` with
    ``rowstride = (width + window - 1) * channels`` bytes per padded row.

    Parameters
    ----------
    window, channels : int
        The layout.

    Returns
    -------
    int
        The largest image width (pixels) whose offsets fit ``OFF_MASK``;
        ``2 ** 62`` for a 1x1 window (every offset is a channel).
    """
    if window == 1:
        return 2 ** 62
    return (OFF_MASK - (window * channels - 1)) // ((window - 1) * channels) - (window - 1)


def slack_bytes(channels):
    """Bytes :func:`dense_proba_fast` may read past the padded image: a row's last
    group of 8 pixels runs up to 7 pixels past the region (at least 64).

    Parameters
    ----------
    channels : int
        Bytes per pixel of the buffer read (``lay.channels``).

    Returns
    -------
    int
        ``max(64, 8 * channels)``.
    """
    return max(64, 8 * channels)


@njit(**INLINE)
def _probe(w, shift):
    return (w >> U(shift)) & U(OFF_MASK)


@njit(**INLINE)
def _step1(img, b, rs, rec, p):
    """Child of node ``p`` in a forest of axis-aligned nodes only (modes 0 and 3: an
    axis-aligned record's probe-2 field and two-probe bit are 0, so its 30 low bits are
    its offset, whether it fits 15 bits or not)."""
    w = rec[p]
    v = np.int32(img[b + (w & U(WIDE_MASK))])
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


@njit(**INLINE)
def _sparse_row(w):
    """The sparse row of record ``w``, or -1 when it is not a sparse node."""
    if ((w >> U(THR_SHIFT)) & U(0x3FF)) == U(SPARSE_CODE):
        return np.int64(w & U(ROW_MASK))
    return np.int64(-1)


@njit(**INLINE)
def _step3(img, b, rs, rec, p, sp_ptr, sp_off, sp_w, sp_thr):
    """Child of node ``p`` in a forest that may have sparse oblique nodes.

    Parameters
    ----------
    img : uint8 (n_bytes,)
        The padded image (or split buffer), flattened.
    b : uint64
        Byte offset of the window's first byte in ``img``.
    rs : uint64
        Bytes per padded row (unused: the records hold whole offsets).
    rec : uint64 (n_nodes,)
        The fast records (module docstring).
    p : uint64
        The current node (global index).
    sp_ptr : uint64 (n_rows + 1,)
        Sparse row ``r``'s entries are ``sp_ptr[r] .. sp_ptr[r + 1] - 1``.
    sp_off : uint64 (n_entries,)
        Each entry's byte offset in the window.
    sp_w : float32 (n_entries,)
        Each entry's weight.
    sp_thr : float32 (n_rows,)
        Each sparse row's threshold.

    Returns
    -------
    uint64
        The child: left (``rec[p] >> LEFT_SHIFT``) when the value is at most the
        threshold, else left + 1; a leaf returns itself.
    """
    w = rec[p]
    r = _sparse_row(w)
    if r < 0:
        return _step2(img, b, rs, rec, p)
    acc = np.float32(0.0)
    for k in range(sp_ptr[r], sp_ptr[r + 1]):
        acc += sp_w[k] * np.float32(img[b + sp_off[k]])
    return (w >> U(LEFT_SHIFT)) + U(acc > sp_thr[r])


def _step(lay, img, b, rs, rec, p, sp_ptr, sp_off, sp_w, sp_thr):
    """Child of node ``p`` by the step of ``lay``'s node family: :func:`_step1`
    (axis-aligned), :func:`_step2` (two-probe) or :func:`_step3` (sparse rows
    possible).  Compiled code only: the family is chosen when the caller is
    typed (``_typed_step``), so a kernel compiles its family's step alone.

    Parameters
    ----------
    lay : KernelLayout
        The layout, whose form is the node family.
    img, b, rs, rec, p, sp_ptr, sp_off, sp_w, sp_thr
        As :func:`_step3` takes them (the sparse rows are read by it only).

    Returns
    -------
    uint64
        The child (a leaf returns itself).
    """
    raise TypeError("_step runs inside the compiled kernels only")


@overload(_step, inline="always")
def _typed_step(lay, img, b, rs, rec, p, sp_ptr, sp_off, sp_w, sp_thr):
    mode = FORMS[form_of(lay)].mode
    if mode == 2:
        return lambda lay, img, b, rs, rec, p, sp_ptr, sp_off, sp_w, sp_thr: _step3(
            img, b, rs, rec, p, sp_ptr, sp_off, sp_w, sp_thr)
    if mode == 1:
        return lambda lay, img, b, rs, rec, p, sp_ptr, sp_off, sp_w, sp_thr: _step2(
            img, b, rs, rec, p)
    return lambda lay, img, b, rs, rec, p, sp_ptr, sp_off, sp_w, sp_thr: _step1(
        img, b, rs, rec, p)


def _shared_sparse_row(lay, rec, p0, p1, p2, p3, p4, p5, p6, p7):
    """The sparse row of the node all 8 pixels are at, or -1 (not all at one
    node, not a sparse node, or a node family without sparse rows: then -1 is
    a constant and the caller's :func:`_sparse8` branch compiles away).
    Compiled code only (``_typed_shared_sparse_row``).

    Parameters
    ----------
    lay : KernelLayout
        The layout, whose form is the node family.
    rec : uint64 (n_nodes,)
        The fast records.
    p0, p1, p2, p3, p4, p5, p6, p7 : uint64
        The 8 pixels' nodes.

    Returns
    -------
    int64
    """
    raise TypeError("_shared_sparse_row runs inside the compiled kernels only")


@overload(_shared_sparse_row, inline="always")
def _typed_shared_sparse_row(lay, rec, p0, p1, p2, p3, p4, p5, p6, p7):
    if FORMS[form_of(lay)].mode != 2:
        return lambda lay, rec, p0, p1, p2, p3, p4, p5, p6, p7: np.int64(-1)

    def _shared(lay, rec, p0, p1, p2, p3, p4, p5, p6, p7):
        if (p1 == p0 and p2 == p0 and p3 == p0 and p4 == p0 and p5 == p0 and p6 == p0
                and p7 == p0):
            return _sparse_row(rec[p0])
        return np.int64(-1)
    return _shared


@njit(**INLINE)
def _sparse8(lay, img, b, rec, p, r, sp_ptr, sp_off, sp_w, sp_thr):
    """Children of 8 neighbouring pixels all at sparse node ``p`` (row ``r``): one
    pass over its entries, each pixel's sum in the order of :func:`_step3`.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded image (or split buffer), flattened.
    b : uint64
        Byte offset of the first pixel's window; pixel ``j``'s starts at
        ``b + j * lay.channels``.
    rec : uint64 (n_nodes,)
        The fast records (module docstring).
    p : uint64
        The sparse node all 8 pixels are at (global index).
    r : int64
        Its sparse row (:func:`_sparse_row` of ``rec[p]``).
    sp_ptr, sp_off, sp_w, sp_thr
        The sparse rows, as :func:`_step3` takes them.

    Returns
    -------
    tuple of 8 uint64
        Each pixel's child: left when its value is at most the threshold,
        else left + 1.
    """
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    C = U(lay.channels)
    for k in range(sp_ptr[r], sp_ptr[r + 1]):
        wk = sp_w[k]
        o = b + sp_off[k]
        a0 += wk * np.float32(img[o])
        a1 += wk * np.float32(img[o + C])
        a2 += wk * np.float32(img[o + U(2) * C])
        a3 += wk * np.float32(img[o + U(3) * C])
        a4 += wk * np.float32(img[o + U(4) * C])
        a5 += wk * np.float32(img[o + U(5) * C])
        a6 += wk * np.float32(img[o + U(6) * C])
        a7 += wk * np.float32(img[o + U(7) * C])
    t = sp_thr[r]
    left = rec[p] >> U(LEFT_SHIFT)
    return (left + U(a0 > t), left + U(a1 > t), left + U(a2 > t), left + U(a3 > t),
            left + U(a4 > t), left + U(a5 > t), left + U(a6 > t), left + U(a7 > t))


@njit(**INLINE)
def _descend8(lay, img, b, rs, rec, r, steps, sp_ptr, sp_off, sp_w, sp_thr):
    """Leaf-or-depth-``steps`` nodes of 8 pixels whose windows start at
    ``b, b + lay.channels, ..., b + 7 * lay.channels``.

    Each step moves every pixel one level down (a leaf stays); the walk ends
    after ``steps`` steps or when all 8 are at leaves.  The layout's node
    family picks the step (:func:`_step`); with sparse rows, :func:`_sparse8`
    serves the 8 while they share a sparse node.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded image (or split buffer), flattened.
    b : uint64
        Byte offset of the first pixel's window in ``img``.
    rs : uint64
        Bytes per padded row.
    rec : uint64 (n_nodes,)
        The fast records (module docstring).
    r : uint64
        The tree's root (global index), where all 8 start.
    steps : int
        The most levels to descend (the tree's depth, or a depth limit).
    sp_ptr, sp_off, sp_w, sp_thr
        The sparse rows, as :func:`_step3` takes them (read in mode 2 only).

    Returns
    -------
    tuple of 8 uint64
        The nodes the 8 pixels end at.
    """
    p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = r
    s = 0
    while s < steps:
        if (_leaf(rec, p0) and _leaf(rec, p1) and _leaf(rec, p2) and _leaf(rec, p3)
                and _leaf(rec, p4) and _leaf(rec, p5) and _leaf(rec, p6)
                and _leaf(rec, p7)):
            break
        row = _shared_sparse_row(lay, rec, p0, p1, p2, p3, p4, p5, p6, p7)
        if row >= 0:
            p0, p1, p2, p3, p4, p5, p6, p7 = _sparse8(lay, img, b, rec, p0, row, sp_ptr,
                                                      sp_off, sp_w, sp_thr)
        else:
            c = U(lay.channels)
            p0 = _step(lay, img, b, rs, rec, p0, sp_ptr, sp_off, sp_w, sp_thr)
            p1 = _step(lay, img, b + c, rs, rec, p1, sp_ptr, sp_off, sp_w, sp_thr)
            p2 = _step(lay, img, b + U(2) * c, rs, rec, p2, sp_ptr, sp_off, sp_w, sp_thr)
            p3 = _step(lay, img, b + U(3) * c, rs, rec, p3, sp_ptr, sp_off, sp_w, sp_thr)
            p4 = _step(lay, img, b + U(4) * c, rs, rec, p4, sp_ptr, sp_off, sp_w, sp_thr)
            p5 = _step(lay, img, b + U(5) * c, rs, rec, p5, sp_ptr, sp_off, sp_w, sp_thr)
            p6 = _step(lay, img, b + U(6) * c, rs, rec, p6, sp_ptr, sp_off, sp_w, sp_thr)
            p7 = _step(lay, img, b + U(7) * c, rs, rec, p7, sp_ptr, sp_off, sp_w, sp_thr)
        s += 1
    return p0, p1, p2, p3, p4, p5, p6, p7


# PARALLEL, though the loop has no prange (threads are Python's, run_parts):
# Numba's parallel passes make these block kernels 4-9x faster on forests
# with sparse oblique rows (co2-sparse, rotation) and about 1.2x on two-probe
# ones, same bits (benchmarks/bench_inference.py, tests/dense); they add about
# half a second to a cold compile.
@njit(**PARALLEL)
def _proba_rows(lay, img, rowstride, ya, yb, x0, x1, roots, steps, rec, sp_ptr, sp_off, sp_w,
                sp_thr, value, out, acc):
    """Rows ``[ya, yb)`` of :func:`dense_proba_fast`, in blocks of ``acc.shape[0]``
    rows, each tree by tree.  ``acc``: float32 zeros ``(block_rows, x1 - x0 + 8, C)``
    (left zero; allocated by the caller: an allocation compiled in would
    lengthen the compile).

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded image (or split buffer), flattened, with slack after it.
    rowstride : int
        Bytes per padded row.
    ya, yb : int
        The rows computed, ``[ya, yb)``.
    x0, x1 : int
        The columns computed, ``[x0, x1)``.
    roots : int64 (n_trees,)
        Global root index of each tree.
    steps : int
        Depth limit.
    rec : uint64 (n_nodes,)
        The fast records.
    sp_ptr, sp_off, sp_w, sp_thr : 1-d arrays
        The sparse rows (uint64, uint64, float32, float32).
    value : float32 (n_nodes, C)
        Each node's class distribution.
    out : float32 (H, W, C)
        Written in place at rows ``[ya, yb)``, columns ``[x0, x1)``.
    acc : float32 (block_rows, x1 - x0 + 8, C)
        Scratch, zero on entry and on return.
    """
    n_trees = roots.shape[0]
    n_classes = value.shape[1]
    inv = np.float32(1.0) / np.float32(n_trees)
    width = x1 - x0
    rs = U(rowstride)
    block_rows = acc.shape[0]
    for y_blk in range(ya, yb, block_rows):
        y_end = y_blk + block_rows
        if y_end > yb:
            y_end = yb
        for t in range(n_trees):
            r = U(roots[t])
            for y in range(y_blk, y_end):
                ay = U(y - y_blk)
                for x in range(x0, x1, 8):
                    b = U(y * rowstride + lay.channels * x)
                    p0, p1, p2, p3, p4, p5, p6, p7 = _descend8(lay, img, b, rs, rec, r, steps,
                                                               sp_ptr, sp_off, sp_w, sp_thr)
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
        for y in range(y_blk, y_end):
            for i in range(width):
                for c in range(n_classes):
                    out[y, x0 + i, c] = acc[y - y_blk, i, c] * inv
            for i in range(width + 8):   # zero again for the next block
                for c in range(n_classes):
                    acc[y - y_blk, i, c] = 0.0


def run_parts(func, parts, threads):
    """``func(part)`` for every item of ``parts``, on up to ``threads`` threads
    (the kernels release the GIL); exceptions propagate.

    Parameters
    ----------
    func : callable
        Called once per part; its result is discarded.
    parts : iterable
        The parts, each passed to ``func``.
    threads : int
        Most threads used; 1 or fewer (or a single part) runs in this thread,
        in order.
    """
    parts = list(parts)
    if threads <= 1 or len(parts) <= 1:
        for part in parts:
            func(part)
        return
    with ThreadPoolExecutor(min(threads, len(parts))) as pool:
        list(pool.map(func, parts))


def dense_proba_fast(kernels, img, rowstride, y0, y1, x0, x1, roots, steps, rec, sparse, value,
                     out, block_rows, threads):
    """Mean node distribution of pixels ``[y0, y1) x [x0, x1)`` into ``out`` (H, W, C).

    ``kernels``: :func:`kernels` of the layout and the records' mode.
    ``img``: padded image, flattened, with :func:`slack_bytes` extra bytes (a
    row's last group of 8 pixels may run past ``x1``; those results are
    dropped).  ``roots``: global root index per tree; ``rec``: uint64 records
    and ``sparse`` = ``(sp_ptr, sp_off, sp_w, sp_thr)``: see the module
    docstring; ``value``: float32 (n_nodes, C).  Per pixel the distributions
    are added in tree order in float32, then scaled by ``1 / n_trees``: the
    arithmetic of :func:`facesegment.dense._any_forest.dense_proba`, so results
    are identical bit for bit.  Blocks of ``block_rows`` rows, each tree by
    tree (:func:`_proba_rows`; one block per thread is best); each of
    ``threads`` threads runs a contiguous run of blocks.  Threads rather than a
    ``prange`` kernel: the parallel loop's compile would double a fresh
    install's first ``segment``.

    Parameters
    ----------
    kernels : types.SimpleNamespace
        :func:`kernels` for the layout and ``mode`` of ``rec``.
    img : uint8 (n_bytes,)
        The padded image (or split buffer), flattened, with
        :func:`slack_bytes` bytes after it.
    rowstride : int
        Bytes per padded row.
    y0, y1, x0, x1 : int
        The rectangle of pixels written, ``[y0, y1) x [x0, x1)``; pixel
        ``(y, x)`` has its window top-left at padded ``(y, x)``.
    roots : int64 (n_trees,)
        Global root index of each tree.
    steps : int
        Depth limit: each tree is descended at most this many levels.
    rec : uint64 (n_nodes,)
        The fast records (:func:`facesegment.dense._packing.pack_fast`).
    sparse : tuple
        ``(sp_ptr uint64, sp_off uint64, sp_w float32, sp_thr float32)``, the
        sparse rows (one dummy row when there are none).
    value : float32 (n_nodes, C)
        Each node's class distribution.
    out : float32 (H, W, C)
        Written in place inside the rectangle; the rest is left as it is.
    block_rows : int
        Rows per block (trees are descended block by block).
    threads : int
        Threads the blocks are shared among.

    Returns
    -------
    float32 (H, W, C)
        ``out``.
    """
    n_blocks = -(-(y1 - y0) // block_rows)
    per_thread = -(-n_blocks // max(1, threads)) * block_rows

    def part(ya):
        """Run the block kernel on this thread's rows from ``ya``.

        Parameters
        ----------
        ya : int
            First row of the run (``per_thread`` rows, clipped to ``y1``).
        """
        acc = np.zeros((block_rows, x1 - x0 + 8, value.shape[1]), dtype=np.float32)
        kernels._proba_rows(img, rowstride, ya, min(y1, ya + per_thread), x0, x1, roots, steps,
                            rec, *sparse, value, out, acc)

    run_parts(part, range(y0, y1, per_thread), threads)
    return out


@njit(**PARALLEL)   # as _proba_rows
def _sweep_chunk(lay, img, rowstride, ys, xs, lo, hi, roots, depth_list, tree_counts, scales, rec,
                 sp_ptr, sp_off, sp_w, sp_thr, value, preds):
    """Pixels ``lo .. hi - 1`` of :func:`sweep_predict_fast` (one chunk), tree by tree.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    img : uint8 (n_bytes,)
        The padded image (or split buffer), flattened.
    rowstride : int
        Bytes per padded row.
    ys, xs : int64 (n_pix,)
        All the pixels scored.
    lo, hi : int
        This chunk's pixels, ``lo <= i < hi`` (``hi > lo``).
    roots : int64 (n_trees,)
        Global root index of each tree.
    depth_list : int64 (n_d,)
        Depth limits, ascending.
    tree_counts : int64 (n_t,)
        Forest sizes, ascending.
    scales : float64 (n_a, 1 or n_pix, C)
        Per-class factors of each setting.
    rec : uint64 (n_nodes,)
        The fast records.
    sp_ptr, sp_off, sp_w, sp_thr : 1-d arrays
        The sparse rows (uint64, uint64, float32, float32).
    value : float32 (n_nodes, C)
        Each node's class distribution.
    preds : uint8 (n_a, n_d, n_t, n_pix)
        Written in place at pixels ``lo .. hi - 1``.
    """
    n_classes = value.shape[1]
    n_d = depth_list.shape[0]
    n_t = tree_counts.shape[0]
    n_a = scales.shape[0]
    rs = U(rowstride)
    npx = hi - lo
    base = np.empty(npx + 8, dtype=np.uint64)
    for i in range(npx + 8):
        q = lo + min(i, npx - 1)
        base[i] = U(ys[q] * rowstride + xs[q] * lay.channels)
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
                p0 = _step(lay, img, base[g], rs, rec, p0, sp_ptr, sp_off, sp_w, sp_thr)
                p1 = _step(lay, img, base[g + 1], rs, rec, p1, sp_ptr, sp_off, sp_w, sp_thr)
                p2 = _step(lay, img, base[g + 2], rs, rec, p2, sp_ptr, sp_off, sp_w, sp_thr)
                p3 = _step(lay, img, base[g + 3], rs, rec, p3, sp_ptr, sp_off, sp_w, sp_thr)
                p4 = _step(lay, img, base[g + 4], rs, rec, p4, sp_ptr, sp_off, sp_w, sp_thr)
                p5 = _step(lay, img, base[g + 5], rs, rec, p5, sp_ptr, sp_off, sp_w, sp_thr)
                p6 = _step(lay, img, base[g + 6], rs, rec, p6, sp_ptr, sp_off, sp_w, sp_thr)
                p7 = _step(lay, img, base[g + 7], rs, rec, p7, sp_ptr, sp_off, sp_w, sp_thr)
                s += 1
        while j < n_t and tree_counts[j] == t + 1:
            for i in range(npx):
                for a in range(n_a):
                    for kk in range(n_d):
                        preds[a, kk, j, lo + i] = argmax_scaled(sums, i, kk, scales, a, lo + i)
            j += 1


def sweep_predict_fast(kernels, img, rowstride, ys, xs, roots, depth_list, tree_counts,
                       scales, rec, sparse, value, chunk, preds, threads):
    """Labels of pixels ``(ys, xs)`` for every (alpha, depth, n_trees) setting.

    Same contract and results as :func:`facesegment.dense._any_forest.sweep_predict`
    (per-pixel float64 sums in tree order); tree-major inside each chunk of
    ``chunk`` pixels (:func:`_sweep_chunk`, chunks on ``threads`` threads), 8
    descents interleaved; a pixel's node after ``depth_list[k]`` steps is its
    node at that depth limit.  ``kernels``, ``rec``, ``sparse``: as
    :func:`dense_proba_fast`.

    Parameters
    ----------
    kernels : types.SimpleNamespace
        :func:`kernels` for the layout and ``mode`` of ``rec``.
    img : uint8 (n_bytes,)
        The padded image (or split buffer), flattened.
    rowstride : int
        Bytes per padded row.
    ys, xs : int64 (n_pix,)
        The pixels scored (window top-left at padded ``(ys[i], xs[i])``).
    roots : int64 (n_trees,)
        Global root index of each tree (at least ``tree_counts[-1]``).
    depth_list : int64 (n_d,)
        Depth limits, ascending.
    tree_counts : int64 (n_t,)
        Forest sizes (first trees taken), ascending.
    scales : float64 (n_a, 1 or n_pix, C)
        Per-class factors of each setting ``a``: one row, or one per pixel.
    rec : uint64 (n_nodes,)
        The fast records.
    sparse : tuple
        ``(sp_ptr, sp_off, sp_w, sp_thr)``, as in :func:`dense_proba_fast`.
    value : float32 (n_nodes, C)
        Each node's class distribution.
    chunk : int
        Pixels per task.
    preds : uint8 (n_a, n_d, n_t, n_pix)
        Written in place: ``preds[a, k, j, i]``, the label of pixel ``i``.
    threads : int
        Threads the chunks are shared among.

    Returns
    -------
    uint8 (n_a, n_d, n_t, n_pix)
        ``preds``.
    """
    n_pix = ys.shape[0]

    def run(lo):
        """Run the chunk kernel on pixels ``lo .. lo + chunk - 1``.

        Parameters
        ----------
        lo : int
            Index of the chunk's first pixel in ``ys``/``xs``.
        """
        kernels._sweep_chunk(img, rowstride, ys, xs, lo, min(n_pix, lo + chunk), roots,
                             depth_list, tree_counts, scales, rec, *sparse, value, preds)

    run_parts(run, range(0, n_pix, chunk), threads)
    return preds
