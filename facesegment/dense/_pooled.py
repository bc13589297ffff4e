"""Dense inference of forests over a pooled layout (private; issue #12).

A pooled layout (:class:`facesegment.layout.WindowLayout` with ``pool = s``)
reads the rounded means of the ``s x s`` boxes of a pixel's window at stride
``s``.  With ``B = box_means(padded image, s)`` (one pass per image), the
values of the pixel whose window starts at padded ``(y, x)`` are
``B[y + i s, x + j s]``.  Split into its ``s**2`` *phases* ``B[py::s, px::s]``,
those values are the ordinary ``cells x cells`` window at ``(y // s, x // s)``
of phase ``(y % s, x % s)``: contiguous rows again, so the very kernels of
unpooled layouts (compiled for ``cells x cells`` windows) run on each phase,
and a split costs ``s**2`` times fewer multiply-adds.
"""

from typing import NamedTuple

import numba
import numpy as np

from ..forest._arrays import n_sparse
from ..layout import box_means, feature_offsets
from . import _general, _levels
from ._numba import layout_kernels
from ._packing import pack_nodes, pack_sparse
from .image import float_image


class PhaseLayout(NamedTuple):
    """The plain ``window x window`` layout of a phase image (``window`` may be even)."""

    window: int
    channels: int

    @property
    def row(self):
        return self.window * self.channels

    def feature_offsets(self, width):
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


def _levels_ok(p):
    """Dense oblique rows and no sparse ones: the level kernels (as unpooled)."""
    return p.weights.shape[0] > 0 and n_sparse(p.arrays) == 0


def proba(p, y0, y1, x0, x1, out):
    """``out[y, x]`` = the forest's mean distribution, pixels ``[y0, y1) x [x0, x1)``."""
    s = p.layout.pool
    threads = max(1, numba.get_num_threads())
    no_resp = np.zeros((0, 1, 1), dtype=np.float32)
    for py, px, P, inner, nodes, thr, sp_off, sp_w in _phases(p):
        a0, a1 = _span(y0, y1, py, s)
        b0, b1 = _span(x0, x1, px, s)
        if a1 <= a0 or b1 <= b0:
            continue
        o = np.zeros((a1, b1, out.shape[2]), dtype=np.float32)
        rowstride = P.shape[1] * inner.channels
        if _levels_ok(p):
            layout_kernels(_levels, inner.window, inner.channels).dense_proba_levels(
                float_image(P), rowstride, a0, a1, b0, b1, p.roots, p.steps, nodes, thr, p.value,
                p.weights, o, -(-(a1 - a0) // threads))
        else:
            layout_kernels(_general, inner.window, inner.channels).dense_proba(
                P.reshape(-1), rowstride, a0, a1, b0, b1, p.roots, p.steps, nodes, thr,
                p.value, p.weights, sp_off, sp_w, no_resp, o)
        out[py + a0 * s:y1:s, px + b0 * s:x1:s] = o[a0:a1, b0:b1]
    return out


def sweep(p, ys, xs, depths, trees, scales, chunk, preds):
    """``preds[..., i]`` for pixels ``(ys[i], xs[i])``: the contract of
    :func:`facesegment.dense._general.sweep_predict`, phase by phase."""
    s = p.layout.pool
    no_resp = np.zeros((0, 1, 1), dtype=np.float32)
    for py, px, P, inner, nodes, thr, sp_off, sp_w in _phases(p):
        sel = np.flatnonzero((ys % s == py) & (xs % s == px))
        if sel.size == 0:
            continue
        yq, xq = np.ascontiguousarray(ys[sel] // s), np.ascontiguousarray(xs[sel] // s)
        pq = np.zeros(preds.shape[:3] + (sel.size,), dtype=preds.dtype)
        rowstride = P.shape[1] * inner.channels
        if _levels_ok(p):
            layout_kernels(_levels, inner.window, inner.channels).sweep_predict_levels(
                float_image(P), rowstride, yq, xq, p.roots, depths, trees, scales, nodes, thr,
                p.value, p.weights, -(-sel.size // max(1, numba.get_num_threads())), pq)
        else:
            layout_kernels(_general, inner.window, inner.channels).sweep_predict(
                P.reshape(-1), rowstride, yq, xq, p.roots, depths, trees, scales, nodes, thr,
                p.value, p.weights, sp_off, sp_w, no_resp, int(chunk), pq)
        preds[..., sel] = pq
    return preds


def visits(p, y0, y1, x0, x1):
    """``(dense oblique visits, sparse visits, sparse values gathered)`` of a rectangle."""
    s = p.layout.pool
    no_resp = np.zeros((0, 1, 1), dtype=np.float32)
    total = np.zeros(3, np.int64)
    for py, px, P, inner, nodes, thr, sp_off, sp_w in _phases(p):
        a0, a1 = _span(y0, y1, py, s)
        b0, b1 = _span(x0, x1, px, s)
        if a1 <= a0 or b1 <= b0:
            continue
        total += np.asarray(layout_kernels(_general, inner.window, inner.channels).count_visits(
            P.reshape(-1), P.shape[1] * inner.channels, a0, a1, b0, b1, p.roots, p.steps,
            nodes, thr, p.weights, sp_off, sp_w, no_resp), dtype=np.int64)
    return tuple(int(c) for c in total)
