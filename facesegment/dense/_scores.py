"""Layout-free kernels of dense inference: reweighting, sweep labels, confusion counts."""

import numpy as np
from numba import prange

from .._jit import INLINE, NJIT, PARALLEL, njit


@njit(**INLINE)
def argmax_scaled(sums, i, k, scales, a, q):
    """The first class of maximal ``sums[i, k, c] * scales[a, r, c]`` (the sweeps'
    labels), ``r = q`` (the pixel's index) when ``scales`` has one row per
    pixel (a position prior), else 0."""
    r = q if scales.shape[1] > 1 else 0
    best = 0
    bv = sums[i, k, 0] * scales[a, r, 0]
    for c in range(1, sums.shape[2]):
        sv = sums[i, k, c] * scales[a, r, c]
        if sv > bv:
            bv = sv
            best = c
    return best


@njit(**NJIT)
def confusion_many(preds, truth, n_classes, out):
    """``out[s, t, p] += #{i : truth[i] == t and preds[s, i] == p}`` (int64)."""
    for s in range(preds.shape[0]):
        for i in range(truth.shape[0]):
            out[s, truth[i], preds[s, i]] += 1
    return out


@njit(**PARALLEL)
def reweight_rows(raw, scale, out, labels):
    """Prior reweighting and argmax of ``raw`` float32 (n, C) in one pass.

    ``out[i] = raw[i] * scale / sum(raw[i] * scale)`` (rows summing to 0 stay
    0), ``labels[i]`` = the first class of maximal ``out[i]`` (uint8).
    """
    n, n_classes = raw.shape
    for i in prange(n):
        total = np.float32(0.0)
        best = 0
        bv = np.float32(-1.0)
        for c in range(n_classes):
            v = raw[i, c] * scale[c]
            out[i, c] = v
            total += v
            if v > bv:
                bv = v
                best = c
        if total > 0:
            for c in range(n_classes):
                out[i, c] = out[i, c] / total
        labels[i] = best
    return out
