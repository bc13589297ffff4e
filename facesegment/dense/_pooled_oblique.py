"""Dense-inference kernels of pooled layouts: level by level, without sorting (private).

A pooled layout's split is a dot product over a short window of box means
(10 x 10 x 3 cells for 3 x 3 boxes, 300 values).  Its multiply-adds are
cheap, so the time goes to moving pixels down the trees: the level kernels
of :mod:`facesegment.dense._oblique_forests` counting-sort every pixel at every
level (about 10 ns per pixel and level, more than the dots on such windows).
These kernels keep the pixels still inside a tree in *runs* of equal node
instead, listed as (node, start, count): each run is split, branch-free, into
its node's left-going pixels (from the front) and right-going ones (from the
back) at the same places of a second buffer, and those become the runs of the
two children (a leaf child records its pixels and drops them).  Runs never
move, so no sorting and no per-pixel node array is needed; a pixel travels
as one int64 (its index and its window offset, packed).  The node numbering
does not matter.

The kernels take lists of pixels (``base`` offsets into one float32 image
that stacks every phase of the box-mean image, :mod:`facesegment.dense._pooled`),
so all phases share one pass and the runs are ``pool**2`` times longer;
trees are descended in parallel, each for every pixel of a chunk at once,
and the per-pixel sums then run in tree order.
An oblique node dots its run's pixels 8 at a time with its weights while
they sit in cache, reading each window row in place: ``lay.span`` values (``lay.row``
rounded up to a multiple of 8) against weight rows zero-padded to ``lay.span``,
so every row is whole vectors (the extra values read belong to the next cell
and meet zero weights).  Chunks of pixels have a fixed size and threads
share out trees, not pixels, so a pixel's result never depends on the number
of threads.

Integer forms (:data:`INTEGER_DOTS`): a forest with int8 or int16 dense rows runs
the same kernels on the stacked *uint8* image, with ``lay.span`` a multiple of
32 bytes and the dots of :mod:`facesegment.dense._simd` (exact int32 sums, so
the results are the float32 kernels' bits: the values are integers below
2**24); an int16 row is dotted as its two bytes, ``256 h.x + l.x``.  The
AVX2 variant reads the image as uint16 and every row as int16 (``lay.span`` a
multiple of 16 values).  Being
exact, they also dot a run's last ``n % 8`` windows 8 at a time (the last one
repeated) and compare each dot with ``floor(threshold)`` as integers.

The kernels take the layout first (``lay``: its ``window``, ``channels``,
``row``, ``span`` and form are compile-time constants, see
:mod:`facesegment.dense._numba`).
"""

import numpy as np
from numba import prange

from numba.extending import overload

from .._jit import FASTMATH, INLINE, NJIT, PARALLEL, njit
from ._any_forest import LEFT, MUL, OBLIQUE, OFF1, OFF2, RIGHT, THRESHOLD
from ._numba import FORMS, form_of, span
from ._scores import argmax_scaled
from ._simd import idot8_avx2, idot8_portable, idot8_vnni, idot8x2_portable, idot8x2_vnni

#: The integer forms' dot of 8 windows (:mod:`._simd`) and whether it reads
#: int16 rows as two int8 planes after an 8-byte chunk mask.
INTEGER_DOTS = {"u8vnni": (idot8_vnni, False), "u8": (idot8_portable, False),
                "u8x2vnni": (idot8x2_vnni, True), "u8x2": (idot8x2_portable, True),
                "i16avx2": (idot8_avx2, False)}


@njit(**FASTMATH)
def _fdot8(lay, imgf, bb, rowstride, wrow):
    """Float32 dots of the 8 windows starting at ``bb[0..7]`` with one pass over
    ``wrow`` (``lay.window`` rows of ``lay.span`` weights)."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    for dy in range(lay.window):
        o = dy * rowstride
        i0 = imgf[bb[0] + o:bb[0] + o + lay.span]
        i1 = imgf[bb[1] + o:bb[1] + o + lay.span]
        i2 = imgf[bb[2] + o:bb[2] + o + lay.span]
        i3 = imgf[bb[3] + o:bb[3] + o + lay.span]
        i4 = imgf[bb[4] + o:bb[4] + o + lay.span]
        i5 = imgf[bb[5] + o:bb[5] + o + lay.span]
        i6 = imgf[bb[6] + o:bb[6] + o + lay.span]
        i7 = imgf[bb[7] + o:bb[7] + o + lay.span]
        wr = wrow[dy * lay.span:dy * lay.span + lay.span]
        for j in range(lay.span):
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


def _dot8(lay, imgf, bb, rowstride, wrow):
    """Dots of the 8 windows starting at ``bb[0..7]`` with the weight row ``wrow``:
    :func:`_fdot8` in float32; in the integer forms the exact int32 dots of
    :mod:`._simd` (uint8 windows and int8 weights; int16 rows ``q = 256 h + l``
    stored as 8 bytes of chunk mask (little-endian int64: the chunks where
    ``h`` is not all zero), then the int8 rows of ``h`` and of ``l``, dotted as
    ``256 h.x + l.x`` in one pass that skips the zero chunks of ``h``).
    Compiled code only: the form is chosen when the caller is typed.

    Parameters
    ----------
    lay : KernelLayout
        The layout and form (:mod:`facesegment.dense._numba`).
    imgf : 1-d array
        The stacked phase image (float32; uint8, or uint16 in ``i16avx2``).
    bb : int64 (8,)
        The windows' first values in ``imgf``.
    rowstride : int
        Values per row of ``imgf``.
    wrow : 1-d array
        The weight row (:func:`leaves`'s ``weights[o]``).

    Returns
    -------
    tuple of 8 float32 (int32 in the integer forms)
    """
    raise TypeError("_dot8 runs inside the compiled kernels only")


@overload(_dot8, inline="always")
def _typed_dot8(lay, imgf, bb, rowstride, wrow):
    form = form_of(lay)
    if form not in INTEGER_DOTS:
        return lambda lay, imgf, bb, rowstride, wrow: _fdot8(lay, imgf, bb, rowstride, wrow)
    idot, wide = INTEGER_DOTS[form]
    rows = lay.window
    chunks = span(lay.window, lay.channels, FORMS[form].step) // FORMS[form].step
    if not wide:
        return lambda lay, imgf, bb, rowstride, wrow: idot(imgf, bb, rowstride, wrow, rows,
                                                           chunks, -1)
    return lambda lay, imgf, bb, rowstride, wrow: idot(imgf, bb, rowstride, wrow[8:], rows,
                                                       chunks, _chunk_mask(wrow))


@njit(**NJIT)
def _chunk_mask(wrow):
    """The chunk mask stored in the first 8 bytes of an int16 row's two planes
    (little-endian int64; bit ``k`` set: chunk ``k`` of the high plane is not
    all zero)."""
    mask = np.int64(0)
    for i in range(8):
        mask |= (np.int64(wrow[i]) & 255) << (8 * i)
    return mask


def _acc(lay, x):
    """``x`` as :func:`_dot1`'s accumulator: float32, or int32 (exact) in the
    integer forms.  Compiled code only.

    Parameters
    ----------
    lay : KernelLayout
        The layout and form.
    x : number

    Returns
    -------
    float32 or int32
    """
    raise TypeError("_acc runs inside the compiled kernels only")


@overload(_acc, inline="always")
def _typed_acc(lay, x):
    if FORMS[form_of(lay)].integer:
        return lambda lay, x: np.int32(x)
    return lambda lay, x: np.float32(x)


@njit(**FASTMATH)
def _dot1(lay, imgf, b0, rowstride, wrow):
    """Dot of the window starting at ``b0`` with ``wrow``, accumulated in float32
    (int32, exact, in the integer forms: :func:`_acc`; int16 rows: the high
    bytes' plane times 256 plus the low bytes' plane, after the mask bytes)."""
    a0 = _acc(lay, 0)
    n = lay.window * lay.span
    for p in range(lay.planes):
        part = _acc(lay, 0)
        for dy in range(lay.window):
            i0 = imgf[b0 + dy * rowstride:b0 + dy * rowstride + lay.span]
            w0 = lay.head + p * n + dy * lay.span
            wr = wrow[w0:w0 + lay.span]
            for j in range(lay.span):
                part += _acc(lay, wr[j]) * _acc(lay, i0[j])
        a0 = a0 * _acc(lay, 256) + part
    return a0


#: Pixels are carried down a tree as ``(pixel << PIXEL_SHIFT) | base``: one int64
#: read and written per pixel and level (window offsets stay below 2**40).
PIXEL_SHIFT = 40
BASE_MASK = (1 << PIXEL_SHIFT) - 1


def _cut(lay, tt):
    """What a dot is compared with (``dot > _cut(lay, threshold)``): the float32
    threshold; in the integer forms, for an integer dot ``v``, ``v > tt`` is
    ``v > floor(tt)``, an int32 compare (clipped; the dots stay below 2**24).
    Compiled code only.

    Parameters
    ----------
    lay : KernelLayout
        The layout and form.
    tt : float32
        The node's threshold.

    Returns
    -------
    float32 or int32
    """
    raise TypeError("_cut runs inside the compiled kernels only")


@overload(_cut, inline="always")
def _typed_cut(lay, tt):
    if FORMS[form_of(lay)].integer:
        return lambda lay, tt: np.int32(min(max(np.floor(tt), np.float32(-2.0 ** 30)),
                                            np.float32(2.0 ** 30)))
    return lambda lay, tt: tt


@njit(**INLINE)
def _push(pk, right, out, lo, hi):
    """Write ``pk`` at both ends ``out[lo]``, ``out[hi]``; returns the new ends
    (only the one on ``pk``'s side moves).  The ends are never negative: indexing
    with them unsigned spares Numba's wraparound code (7% of the kernel)."""
    out[np.uint64(lo)] = pk
    out[np.uint64(hi)] = pk
    return lo + 1 - right, hi - right


@njit(**INLINE)
def _split_run(lay, imgf, rowstride, node, run, nodes, thr, weights, out, bb):
    """Split the packed pixels ``run`` (all at internal ``node``) into ``out`` (same
    length): the left-going ones from the front, in order, the right-going ones
    from the back; returns how many go left.  Branch-free: each pixel is written
    at both ends and only one end moves.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    imgf : float32 (n_values,)
        The stacked phase image (uint8 or uint16 in the integer variants).
    rowstride : int
        Values per row of ``imgf``.
    node : int
        The internal node all of ``run`` is at.
    run : int64 (n,)
        Packed pixels ``(pixel << PIXEL_SHIFT) | base``.
    nodes : int32 (n_nodes, 8)
        The general node records.
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes``.
    weights : 2-d array (n_oblique, row length)
        The dense rows as :func:`leaves` takes them.
    out : int64 (n,)
        Written in place: ``run``'s pixels, left-going first.
    bb : int64 (8,)
        Scratch: the window offsets of 8 pixels.

    Returns
    -------
    int
        How many pixels go left (``out[:lo]``).
    """
    o = nodes[node, OBLIQUE]
    tt = thr[node, THRESHOLD]
    n = run.shape[0]
    lo = 0
    hi = n - 1
    if o >= 0:
        wrow = weights[o]
        cut = _cut(lay, tt)
        q = 0
        while q + 8 <= n:
            for u in range(8):
                bb[u] = run[q + u] & BASE_MASK
            v = _dot8(lay, imgf, bb, rowstride, wrow)
            for u in range(8):
                lo, hi = _push(run[q + u], np.int64(v[u] > cut), out, lo, hi)
            q += 8
        if lay.integer and q < n:                    # the last window fills the 8
            for u in range(8):
                bb[u] = run[min(q + u, n - 1)] & BASE_MASK
            v = _dot8(lay, imgf, bb, rowstride, wrow)
            for u in range(n - q):
                lo, hi = _push(run[q + u], np.int64(v[u] > cut), out, lo, hi)
            q = n
        while q < n:
            pk = run[q]
            lo, hi = _push(pk, np.int64(_dot1(lay, imgf, pk & BASE_MASK, rowstride, wrow) > cut),
                           out, lo, hi)
            q += 1
    else:
        o1 = nodes[node, OFF1]
        o2 = nodes[node, OFF2]
        mul = thr[node, MUL]
        for q in range(n):
            pk = run[q]
            b = pk & BASE_MASK
            right = np.int64(np.float32(imgf[np.uint64(b + o1)])
                             - mul * np.float32(imgf[np.uint64(b + o2)]) > tt)
            lo, hi = _push(pk, right, out, lo, hi)
    return lo


@njit(**INLINE)
def _to_child(child, start, count, nodes, packed, rec, k, runs, m):
    """The ``count`` pixels ``packed[start:start + count]`` now at ``child``: a leaf
    is recorded for every depth still to record (``rec[:, k:]``); an internal
    child becomes run ``m`` of the next level.  Returns the number of runs.

    Parameters
    ----------
    child : int
        The node the pixels are now at.
    start, count : int
        Their place in ``packed``.
    nodes : int32 (n_nodes, 8)
        The general node records (a leaf's ``LEFT`` is itself).
    packed : int64 (n,)
        Packed pixels ``(pixel << PIXEL_SHIFT) | base``.
    rec : int32 (n, n_d)
        Written in place for a leaf: ``rec[pixel, k:]``.
    k : int
        The first depth (column of ``rec``) still to record.
    runs : int64 (max(n, 1), 3)
        The next level's runs (node, start, count); row ``m`` written for an
        internal child.
    m : int
        The number of runs listed so far.

    Returns
    -------
    int
        ``m + 1`` for an internal child with pixels, else ``m``.
    """
    if count == 0:
        return m
    if nodes[child, LEFT] == child:
        for q in range(start, start + count):
            i = packed[q] >> PIXEL_SHIFT
            for kk in range(k, rec.shape[1]):
                rec[i, kk] = child
        return m
    runs[m, 0] = child
    runs[m, 1] = start
    runs[m, 2] = count
    return m + 1


@njit(**NJIT)
def _tree(lay, imgf, base, rowstride, r, nodes, thr, weights, depth_list, rec, pk_a, pk_b, runs_a,
          runs_b, bb):
    """Descend one tree (root ``r``) for the block's pixels, level by level.

    ``rec[i, k]`` receives pixel ``i``'s node after ``depth_list[k]`` steps
    (``depth_list`` increasing); ``pk_a``, ``pk_b`` (n,), ``runs_a``, ``runs_b``
    (n, 3) and ``bb`` (8,) are scratch.  The pixels still at internal nodes sit
    in ``pk_a`` (packed with their window offsets) in runs of equal node, listed
    in ``runs_a`` as (node, start, count); each run is split into the same
    places of ``pk_b``, its left child's pixels first, so a run never moves and
    no sorting is needed.  A pixel is recorded when it reaches a leaf (for
    every depth still to come) or, still inside the tree, at each depth of
    ``depth_list``.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    imgf : float32 (n_values,)
        The stacked phase image (uint8 or uint16 in the integer variants).
    base : int64 (n,)
        Offset in ``imgf`` of each pixel's window.
    rowstride : int
        Values per row of ``imgf``.
    r : int
        The tree's root.
    nodes : int32 (n_nodes, 8)
        The general node records.
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes``.
    weights : 2-d array (n_oblique, row length)
        The dense rows as :func:`leaves` takes them.
    depth_list : int64 (n_d,)
        Depth limits, ascending.
    rec : int32 (n, n_d)
        Written in place: every entry.
    pk_a, pk_b : int64 (n,)
        Scratch.
    runs_a, runs_b : int64 (max(n, 1), 3)
        Scratch.
    bb : int64 (8,)
        Scratch.
    """
    n = base.shape[0]
    n_d = depth_list.shape[0]
    for i in range(n):
        pk_a[i] = (i << PIXEL_SHIFT) | base[i]
    n_runs = _to_child(r, 0, n, nodes, pk_a, rec, 0, runs_a, 0)
    k = 0
    s = 0
    while k < n_d:
        if depth_list[k] == s or n_runs == 0:
            for g in range(n_runs):
                node = runs_a[g, 0]
                for q in range(runs_a[g, 1], runs_a[g, 1] + runs_a[g, 2]):
                    rec[pk_a[q] >> PIXEL_SHIFT, k] = node
            k += 1
            continue
        m = 0
        for g in range(n_runs):
            node = runs_a[g, 0]
            st = runs_a[g, 1]
            cnt = runs_a[g, 2]
            nl = _split_run(lay, imgf, rowstride, node, pk_a[st:st + cnt], nodes, thr, weights,
                            pk_b[st:st + cnt], bb)
            m = _to_child(nodes[node, LEFT], st, nl, nodes, pk_b, rec, k, runs_b, m)
            m = _to_child(nodes[node, RIGHT], st + nl, cnt - nl, nodes, pk_b, rec, k, runs_b, m)
        pk_a, pk_b = pk_b, pk_a
        runs_a, runs_b = runs_b, runs_a
        n_runs = m
        s += 1


@njit(**PARALLEL)
def leaves(lay, imgf, rowstride, base, roots, depth_list, nodes, thr, weights, rec):
    """``rec[t, i, k]`` = the node of the window at ``imgf[base[i]]`` after
    ``depth_list[k]`` steps down tree ``t`` (``depth_list`` increasing).

    ``nodes``/``thr``: the general records (:mod:`facesegment.dense._any_forest`);
    ``weights`` float32 (n_oblique, ``lay.window * lay.span``), window rows zero-padded
    to ``lay.span`` (the integer variants: ``imgf`` uint8 and ``weights`` int8).
    Parallel over trees, each descended for every pixel at once
    (the longest runs); the result does not depend on the number of threads.

    Parameters
    ----------
    lay : KernelLayout
        The window layout and form (:mod:`facesegment.dense._numba`).
    imgf : float32 (n_values,)
        The stacked phase image, flattened (uint8 in the integer variants,
        uint16 in ``i16avx2``), with ``ROW_SLACK`` values after it: a window
        row is read ``lay.span`` values long.
    rowstride : int
        Values per row of ``imgf`` (width x ``lay.channels``).
    base : int64 (n,)
        Offset in ``imgf`` of each pixel's window (below ``2 ** 40``).
    roots : int64 (n_trees,)
        Root node of each tree.
    depth_list : int64 (n_d,)
        Depth limits, ascending.
    nodes : int32 (n_nodes, 8)
        The general node records.
    thr : float32 (n_nodes, 8)
        The float32 view of ``nodes``.
    weights : float32 (n_oblique, lay.window * lay.span)
        Dense oblique rows, each window row zero-padded to ``lay.span`` (int8 in
        the ``u8`` variants; in the ``u8x2`` variants 8 bytes of chunk mask,
        then the high and low int8 planes; int16 in ``i16avx2``).
    rec : int32 (n_trees, n, n_d)
        Written in place: ``rec[t, i, k]``.

    Returns
    -------
    int32 (n_trees, n, n_d)
        ``rec``.
    """
    n = base.shape[0]
    for t in prange(rec.shape[0]):
        pk_a = np.empty(n, dtype=np.int64)
        pk_b = np.empty(n, dtype=np.int64)
        runs_a = np.empty((max(n, 1), 3), dtype=np.int64)
        runs_b = np.empty((max(n, 1), 3), dtype=np.int64)
        bb = np.empty(8, dtype=np.int64)
        _tree(lay, imgf, base, rowstride, roots[t], nodes, thr, weights, depth_list, rec[t], pk_a,
              pk_b, runs_a, runs_b, bb)
    return rec


#: Pixels whose sums :func:`mean_distribution` keeps while it runs through the trees.
SUM_BLOCK = 2048


@njit(**PARALLEL)
def mean_distribution(rec, value, out):
    """``out[i]`` = the mean over trees of ``value[rec[t, i, 0]]``, added in tree
    order in float32 and scaled by ``1 / n_trees`` (as the other kernels).
    Blocks of ``SUM_BLOCK`` pixels go through the trees one after the other, so
    the sums stay in cache and each tree's values are read together.

    Parameters
    ----------
    rec : int32 (n_trees, n, n_d)
        Nodes of :func:`leaves`; only depth column 0 is read.
    value : float32 (n_nodes, C)
        Each node's class distribution.
    out : float32 (n, C)
        Written in place (overwritten).

    Returns
    -------
    float32 (n, C)
        ``out``.
    """
    n_trees = rec.shape[0]
    n = rec.shape[1]
    inv = np.float32(1.0) / np.float32(n_trees)
    for blk in prange((n + SUM_BLOCK - 1) // SUM_BLOCK):
        lo = blk * SUM_BLOCK
        hi = min(n, lo + SUM_BLOCK)
        out[lo:hi] = np.float32(0.0)
        for t in range(n_trees):
            for i in range(lo, hi):
                nd = rec[t, i, 0]
                for c in range(value.shape[1]):
                    out[i, c] += value[nd, c]
        for i in range(lo, hi):
            for c in range(value.shape[1]):
                out[i, c] *= inv
    return out


@njit(**PARALLEL)
def sweep_labels(rec, value, tree_counts, scales, preds):
    """``preds[a, k, j, i]`` = the sweeps' label of pixel ``i`` (per-pixel float64
    sums of ``value[rec[t, i, k]]`` over the first ``tree_counts[j]`` trees, in
    tree order; :func:`._scores.argmax_scaled` with ``scales[a]``).

    Parameters
    ----------
    rec : int32 (n_trees, n, n_d)
        Nodes of :func:`leaves` (at least ``tree_counts[-1]`` trees).
    value : float32 (n_nodes, C)
        Each node's class distribution.
    tree_counts : int64 (n_t,)
        Forest sizes (first trees taken), ascending.
    scales : float64 (n_a, 1 or n, C)
        Per-class factors of each setting ``a``: one row, or one per pixel.
    preds : uint8 (n_a, n_d, n_t, n)
        Written in place: the labels.  Parallel over pixels.

    Returns
    -------
    uint8 (n_a, n_d, n_t, n)
        ``preds``.
    """
    n_d = rec.shape[2]
    n_classes = value.shape[1]
    n_t = tree_counts.shape[0]
    for i in prange(rec.shape[1]):
        sums = np.zeros((1, n_d, n_classes), dtype=np.float64)
        j = 0
        for t in range(tree_counts[n_t - 1]):
            for k in range(n_d):
                nd = rec[t, i, k]
                for c in range(n_classes):
                    sums[0, k, c] += value[nd, c]
            while j < n_t and tree_counts[j] == t + 1:
                for a in range(scales.shape[0]):
                    for k in range(n_d):
                        preds[a, k, j, i] = argmax_scaled(sums, 0, k, scales, a, np.int64(i))
                j += 1
    return preds
