"""Layout-free kernels of dense inference: sweep labels, confusion counts."""

from .._jit import INLINE, NJIT, njit


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
