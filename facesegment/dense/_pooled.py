"""Dense inference of forests over a pooled layout (private).

A pooled layout (:class:`facesegment.layout.WindowLayout` with ``pool = s``)
reads the rounded means of the ``s x s`` boxes of a pixel's window at stride
``s``.  With ``B = box_means(padded image, s)`` (one pass per image), the
values of the pixel whose window starts at padded ``(y, x)`` are
``B[y + i s, x + j s]``.  Split into its ``s**2`` *phases* ``B[py::s, px::s]``,
those values are the ordinary ``cells x cells`` window at ``(y // s, x // s)``
of phase ``(y % s, x % s)``: contiguous rows again, and a split costs
``s**2`` times fewer multiply-adds.  Forests with dense oblique rows run the
kernels of :mod:`facesegment.dense._pooled_oblique` on all phases stacked into one image
(:func:`_stack`); forests with sparse rows run the general kernels (compiled
for ``cells x cells`` windows) phase by phase (:func:`_phases`).
"""

from typing import NamedTuple

import numpy as np

from ..forest._arrays import n_sparse
from ..layout import box_means, feature_offsets
from . import _pooled_oblique, _any_forest, _simd
from ._numba import layout_kernels, span
from ._packing import cached, pack_nodes, pack_sparse
from .image import ROW_SLACK, float_image

#: The :mod:`._pooled_oblique` variant that runs forests with int8 dense rows (tests
#: switch it to the portable form, ``"u8"``, or the AVX2 one, ``"i16avx2"``);
#: int16 rows run its ``u8x2`` twin (the AVX2 form runs both as int16).
#: None: the form this CPU runs best (:func:`facesegment.dense._simd.variant`,
#: asked on first use).
INT_VARIANT = None


class PhaseLayout(NamedTuple):
    """The plain ``window x window`` layout of a phase image (``window`` may be even)."""

    window: int
    channels: int

    @property
    def row(self):
        return self.window * self.channels

    def feature_offsets(self, width):
        """Byte offset of every feature in a phase image ``width`` pixels wide.

        Parameters
        ----------
        width : int
            The phase image's width in pixels.

        Returns
        -------
        numpy.ndarray
            :func:`facesegment.layout.feature_offsets` of this layout.
        """
        return feature_offsets(width, self.channels, self.window)


class Pooled(NamedTuple):
    """Inputs of a pooled forest on one image (built by ``predict._prepare``)."""

    layout: object      # the model's WindowLayout (pool > 1)
    arrays: object      # ForestArrays
    shape: tuple        # (H, W, channels) of the image (and planes)
    padded: np.ndarray  # uint8 (H + 2 half, W + 2 half, channels)
    roots: np.ndarray
    steps: int
    value: np.ndarray   # float32
    weights: np.ndarray  # float32


def _phases(p):
    """``(py, px, P, kernels inputs)`` for each phase of the box-mean image."""
    s = p.layout.pool
    inner = PhaseLayout(p.layout.cells, p.layout.channels)
    B = box_means(p.padded, s)
    for py in range(s):
        for px in range(s):
            P = np.ascontiguousarray(B[py::s, px::s])
            nodes, thr = pack_nodes(p.arrays, P.shape[1], inner)
            sp_off, sp_w = pack_sparse(p.arrays, P.shape[1], inner)
            yield py, px, P, inner, nodes, thr, sp_off, sp_w


def _span(lo, hi, phase, s):
    """Phase indices ``[a, b)`` of the pixels ``lo <= y < hi`` with ``y % s == phase``."""
    return max(0, -(-(lo - phase) // s)), max(0, -(-(hi - phase) // s))


def _flat_ok(p):
    """Dense oblique rows and no sparse ones: the kernels of :mod:`._pooled_oblique`."""
    return p.weights.shape[0] > 0 and n_sparse(p.arrays) == 0


def _integer(p):
    """int8 or int16 dense rows: the integer kernels (uint8 image, exact int32 dots)."""
    return p.arrays.weights.dtype in (np.int8, np.int16)


def _variant(p):
    """The :mod:`._pooled_oblique` variant of ``p``: None (float32), or the integer one."""
    if not _integer(p):
        return None
    form = INT_VARIANT or _simd.variant()
    return form.replace("u8", "u8x2") if p.arrays.weights.dtype == np.int16 else form


def _wide(p):
    """Whether the integer kernels of ``p`` read uint16 images and int16 rows (AVX2)."""
    return _integer(p) and _variant(p) == "i16avx2"


def _chunk_masks(rows):
    """int8 (n, 8): per row, the little-endian bytes of an int64 whose bit k is set
    when 32-byte chunk k of the row is not all zero (every chunk from the 64th
    on is dotted anyway)."""
    nz = rows.reshape(rows.shape[0], -1, _simd.CHUNK).any(axis=2)[:, :64]
    bits = (nz.astype(np.uint64) << np.arange(nz.shape[1], dtype=np.uint64)).sum(
        axis=1, dtype=np.uint64)
    return bits.astype("<u8").view(np.int8).reshape(-1, 8)


def _span_weights(p):
    """The weights with each window row zero-padded to ``lay.span`` values: float32, or
    the stored integer rows padded to a multiple of 32 bytes (int16 rows as 8
    bytes of chunk mask, then the int8 rows of their high bytes and of their low
    bytes: ``q = 256 h + l`` with both signed; the AVX2 form: int16 rows, int8
    ones widened, padded to a multiple of 16 values), cached per forest."""
    integer, wide = _integer(p), _wide(p)
    w = p.arrays.weights if integer else p.weights
    cells, row = p.layout.cells, p.layout.cells * p.layout.channels
    width = span(cells, p.layout.channels,
                 _simd.CHUNK16 if wide else _simd.CHUNK if integer else 8)

    def build():
        if wide:
            out = np.zeros((w.shape[0], cells, width), dtype=np.int16)
            out[:, :, :row] = w.reshape(-1, cells, row)
            return out.reshape(w.shape[0], cells * width)
        ww = w
        if w.dtype == np.int16:
            q = w.astype(np.int32)
            lo = ((q + 128) & 255) - 128
            ww = np.concatenate([((q - lo) >> 8).astype(np.int8), lo.astype(np.int8)], axis=1)
        parts = ww.shape[1] // w.shape[1]
        out = np.zeros((w.shape[0], parts, cells, width), dtype=ww.dtype)
        out[:, :, :, :row] = ww.reshape(-1, parts, cells, row)
        out = out.reshape(w.shape[0], parts * cells * width)
        if w.dtype == np.int16:   # 8 bytes of mask: the high bytes' non-zero chunks
            return np.concatenate([_chunk_masks(out[:, :cells * width]), out], axis=1)
        return out

    return cached("span", w, (width, wide), build)


class Stack(NamedTuple):
    """Every phase of the box-mean image, stacked: phase ``k = (y % s) * s + x % s``
    holds rows ``k * rows .. (k + 1) * rows - 1`` of one image."""

    imgf: np.ndarray    # float32 (uint8 for integer rows), flattened, ROW_SLACK spare
    rows: int
    width: int
    inner: PhaseLayout
    nodes: np.ndarray
    thr: np.ndarray

    def base(self, ys, xs, s):
        """Offsets in ``imgf`` of the windows of image pixels ``(ys, xs)``.

        Parameters
        ----------
        ys, xs : int64 (n,)
            Image pixels (window top-left at padded ``(ys, xs)``).
        s : int
            The pool (box side and stride).

        Returns
        -------
        int64 (n,)
            The window of pixel ``(y, x)`` starts at ``(y // s, x // s)`` of
            phase ``(y % s) * s + x % s``.
        """
        k = (ys % s) * s + xs % s
        return ((k * self.rows + ys // s) * self.width + xs // s) * self.inner.channels


def _stack(p):
    s = p.layout.pool
    inner = PhaseLayout(p.layout.cells, p.layout.channels)
    B = box_means(p.padded, s)
    rows, width = -(-B.shape[0] // s), -(-B.shape[1] // s)
    S = np.zeros((s * s, rows, width, B.shape[2]), dtype=np.uint8)
    for py in range(s):
        for px in range(s):
            P = B[py::s, px::s]
            S[py * s + px, :P.shape[0], :P.shape[1]] = P
    nodes, thr = pack_nodes(p.arrays, width, inner)
    if _integer(p):
        flat = np.zeros(S.size + ROW_SLACK, dtype=np.uint16 if _wide(p) else np.uint8)
        flat[:S.size] = S.reshape(-1)
    else:
        flat = float_image(S)
    return Stack(flat, rows, width, inner, nodes, thr)


#: Pixels descended together by the :mod:`._pooled_oblique` kernels, in raster order (a
#: fixed size, so results do not depend on the number of threads; their nodes,
#: int32 per tree and pixel, take 8 MB for 32 trees).
CHUNK_PIXELS = 65536


def _leaves(p, st, base, depths):
    """``(n_trees, len(base), len(depths))`` int32 nodes (:func:`._pooled_oblique.leaves`), in
    chunks of ``CHUNK_PIXELS`` pixels."""
    rec = np.empty((p.roots.shape[0], base.shape[0], depths.shape[0]), dtype=np.int32)
    kernels = layout_kernels(_pooled_oblique, st.inner.window, st.inner.channels, _variant(p))
    weights = _span_weights(p)
    for lo in range(0, base.shape[0], CHUNK_PIXELS):
        hi = min(base.shape[0], lo + CHUNK_PIXELS)
        part = np.empty((rec.shape[0], hi - lo, rec.shape[2]), dtype=np.int32)
        kernels.leaves(st.imgf, st.width * st.inner.channels, base[lo:hi], p.roots, depths,
                       st.nodes, st.thr, weights, part)
        rec[:, lo:hi] = part
    return rec


def proba(p, y0, y1, x0, x1, out):
    """``out[y, x]`` = the forest's mean distribution, pixels ``[y0, y1) x [x0, x1)``.

    Dense oblique rows only: the :mod:`._pooled_oblique` kernels on the stacked phases;
    otherwise the general kernels phase by phase.

    Parameters
    ----------
    p : Pooled
        The prepared inputs of one image.
    y0, y1, x0, x1 : int
        The rectangle of pixels written.
    out : float32 (H, W, C)
        Written in place inside the rectangle.

    Returns
    -------
    float32 (H, W, C)
        ``out``.
    """
    if not _flat_ok(p):
        return _proba_phases(p, y0, y1, x0, x1, out)
    st = _stack(p)
    ys, xs = np.mgrid[y0:y1, x0:x1]
    base = np.ascontiguousarray(st.base(ys.reshape(-1), xs.reshape(-1), p.layout.pool))
    rec = _leaves(p, st, base, np.full(1, p.steps, dtype=np.int64))
    res = np.empty((base.shape[0], out.shape[2]), dtype=np.float32)
    _pooled_oblique.mean_distribution(rec, p.value, res)
    out[y0:y1, x0:x1] = res.reshape(y1 - y0, x1 - x0, -1)
    return out


def _proba_phases(p, y0, y1, x0, x1, out):
    """:func:`proba` phase by phase with the general kernels (sparse rows)."""
    s = p.layout.pool
    no_resp = np.zeros((0, 1, 1), dtype=np.float32)
    for py, px, P, inner, nodes, thr, sp_off, sp_w in _phases(p):
        a0, a1 = _span(y0, y1, py, s)
        b0, b1 = _span(x0, x1, px, s)
        if a1 <= a0 or b1 <= b0:
            continue
        o = np.zeros((a1, b1, out.shape[2]), dtype=np.float32)
        layout_kernels(_any_forest, inner.window, inner.channels).dense_proba(
            P.reshape(-1), P.shape[1] * inner.channels, a0, a1, b0, b1, p.roots, p.steps,
            nodes, thr, p.value, p.weights, sp_off, sp_w, no_resp, o)
        out[py + a0 * s:y1:s, px + b0 * s:x1:s] = o[a0:a1, b0:b1]
    return out


def sweep(p, ys, xs, depths, trees, scales, chunk, preds):
    """``preds[..., i]`` for pixels ``(ys[i], xs[i])``: the contract of
    :func:`facesegment.dense._any_forest.sweep_predict`.

    Parameters
    ----------
    p : Pooled
        The prepared inputs of one image.
    ys, xs : int64 (n_pix,)
        The pixels scored.
    depths : int64 (n_d,)
        Depth limits, ascending.
    trees : int64 (n_t,)
        Forest sizes (first trees taken), ascending.
    scales : float64 (n_a, 1 or n_pix, C)
        Per-class factors of each setting ``a``: one row, or one per pixel.
    chunk : int
        Pixels per task of the general kernels (the :mod:`._pooled_oblique` kernels
        use ``CHUNK_PIXELS``).
    preds : uint8 (n_a, n_d, n_t, n_pix)
        Written in place: the labels.

    Returns
    -------
    uint8 (n_a, n_d, n_t, n_pix)
        ``preds``.
    """
    if _flat_ok(p):
        st = _stack(p)
        base = np.ascontiguousarray(st.base(np.asarray(ys, np.int64), np.asarray(xs, np.int64),
                                            p.layout.pool))
        rec = _leaves(p, st, base, np.ascontiguousarray(depths, dtype=np.int64))
        return _pooled_oblique.sweep_labels(rec, p.value, trees, scales, preds)
    s = p.layout.pool
    no_resp = np.zeros((0, 1, 1), dtype=np.float32)
    for py, px, P, inner, nodes, thr, sp_off, sp_w in _phases(p):
        sel = np.flatnonzero((ys % s == py) & (xs % s == px))
        if sel.size == 0:
            continue
        yq, xq = np.ascontiguousarray(ys[sel] // s), np.ascontiguousarray(xs[sel] // s)
        pq = np.zeros(preds.shape[:3] + (sel.size,), dtype=preds.dtype)
        layout_kernels(_any_forest, inner.window, inner.channels).sweep_predict(
            P.reshape(-1), P.shape[1] * inner.channels, yq, xq, p.roots, depths, trees, scales,
            nodes, thr, p.value, p.weights, sp_off, sp_w, no_resp, int(chunk), pq)
        preds[..., sel] = pq
    return preds


def visits(p, y0, y1, x0, x1):
    """Per tree ``(dense oblique visits, sparse visits, sparse values gathered)``
    of a rectangle: int64 ``(n_trees, 3)``.

    Counted phase by phase with the general kernels.

    Parameters
    ----------
    p : Pooled
        The prepared inputs of one image.
    y0, y1, x0, x1 : int
        The rectangle of pixels counted.

    Returns
    -------
    int64 (n_trees, 3)
        Per tree: dense oblique nodes, sparse oblique nodes and sparse entries
        visited.
    """
    s = p.layout.pool
    no_resp = np.zeros((0, 1, 1), dtype=np.float32)
    total = np.zeros((len(p.roots), 3), np.int64)
    for py, px, P, inner, nodes, thr, sp_off, sp_w in _phases(p):
        a0, a1 = _span(y0, y1, py, s)
        b0, b1 = _span(x0, x1, px, s)
        if a1 <= a0 or b1 <= b0:
            continue
        total += np.asarray(layout_kernels(_any_forest, inner.window, inner.channels).count_visits(
            P.reshape(-1), P.shape[1] * inner.channels, a0, a1, b0, b1, p.roots, p.steps,
            nodes, thr, p.weights, sp_off, sp_w, no_resp), dtype=np.int64)
    return total
