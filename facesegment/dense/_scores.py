"""Layout-free kernels of dense inference: sweep labels, confusion counts."""

from .._jit import INLINE, NJIT, njit


@njit(**INLINE)
def argmax_scaled(sums, i, k, scales, a, q):
    """The first class of maximal ``sums[i, k, c] * scales[a, r, c]`` (the sweeps'
    labels), ``r = q`` (the pixel's index) when ``scales`` has one row per
    pixel (a position prior), else 0.

    Parameters
    ----------
    sums : float64 (n, n_d, C)
        Class sums over trees, per pixel of a chunk and depth limit.
    i : int
        The pixel's row of ``sums``.
    k : int
        The depth limit's column of ``sums``.
    scales : float64 (n_a, R, C)
        Per-class scales per reweighting setting; R is 1, or one row per pixel.
    a : int
        The reweighting setting (row of ``scales``).
    q : int
        The pixel's index among all swept pixels (row of ``scales`` when R > 1).

    Returns
    -------
    int
        The class id.
    """
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
    """``out[s, t, p] += #{i : truth[i] == t and preds[s, i] == p}`` (int64).

    Parameters
    ----------
    preds : uint8 (S, N)
        Predicted class ids of N pixels under S settings.
    truth : int64 (N,)
        True class ids, each below ``n_classes``.
    n_classes : int
        Number of classes (not read: ``out``'s shape bounds the ids).
    out : int64 (S, n_classes, n_classes)
        Confusion counts, added to in place.

    Returns
    -------
    int64 (S, n_classes, n_classes)
        ``out``.
    """
    for s in range(preds.shape[0]):
        for i in range(truth.shape[0]):
            out[s, truth[i], preds[s, i]] += 1
    return out
