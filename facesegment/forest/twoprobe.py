"""Two-probe splits ``x[a] - x[b] <= t`` (the paper's Shotton-style baseline).

At each node the grower samples ``n_pairs`` feature pairs ``(a, b)``, ``a != b``;
this module finds the pair and threshold with the best information gain.  With
uint8 features the difference lies in -255..255, so a 511-bin class histogram
per pair gives the exact best threshold without sorting; small nodes
counting-sort the differences (uint8) or sort them (float features).  Differences are computed in float32
(exact for uint8), as inference computes them.
"""

import numpy as np
from numba import njit

from ._criteria import class_counts, scan_histogram, scan_sorted, xlogx_table

#: Nodes with at least this many samples use 511-bin histograms (uint8 only).
HIST_MIN_SAMPLES = 512

_EDGES_DIFF = np.arange(-255, 256, dtype=np.float64)


@njit(cache=True, nogil=True)
def _pair_split_hist_u8(X, y, idx, fa, fb, n_classes, min_leaf, edges):
    m = idx.shape[0]
    q = fa.shape[0]
    hist = np.zeros((q, 511, n_classes), dtype=np.int32)
    for i in range(m):
        row = idx[i]
        c = y[row]
        for k in range(q):
            d = np.int32(X[row, fa[k]]) - np.int32(X[row, fb[k]]) + 255
            hist[k, d, c] += 1
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    best_k = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k in range(q):
        t, g = scan_histogram(hist[k], tot, m, min_leaf, flog, edges)
        if g > best_gain:
            best_gain = g
            best_k = k
            best_t = t
    return best_k, best_t, best_gain


@njit(cache=True, nogil=True)
def _pair_split_counting_u8(X, y, idx, fa, fb, n_classes, min_leaf):
    m = idx.shape[0]
    q = fa.shape[0]
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    labs = np.empty(m, dtype=np.int32)
    diffs = np.empty((q, m), dtype=np.int16)  # x[a] - x[b] + 255, gathered row by row
    for i in range(m):
        row = idx[i]
        labs[i] = y[row]
        for k in range(q):
            diffs[k, i] = np.int16(np.int32(X[row, fa[k]]) - np.int32(X[row, fb[k]]) + 255)
    vs = np.empty(m, dtype=np.float32)
    ls = np.empty(m, dtype=np.int32)
    start = np.empty(512, dtype=np.int64)
    best_k = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k in range(q):
        start[:] = 0
        lo = 510
        hi = 0
        for i in range(m):
            d = diffs[k, i]
            start[d + 1] += 1
            lo = min(lo, d)
            hi = max(hi, d)
        if lo == hi:
            continue
        for b in range(lo + 1, hi + 2):
            start[b] += start[b - 1]
        for i in range(m):  # stable counting sort
            d = diffs[k, i]
            pos = start[d]
            vs[pos] = np.float32(d - 255)
            ls[pos] = labs[i]
            start[d] = pos + 1
        t, g = scan_sorted(vs, ls, tot, min_leaf, flog)
        if g > best_gain:
            best_gain = g
            best_k = k
            best_t = t
    return best_k, best_t, best_gain


@njit(cache=True, nogil=True)
def _pair_split_sorted(X, y, idx, fa, fb, n_classes, min_leaf):
    m = idx.shape[0]
    q = fa.shape[0]
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    vals = np.empty(m, dtype=np.float32)
    vs = np.empty(m, dtype=np.float32)
    ls = np.empty(m, dtype=np.int32)
    best_k = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k in range(q):
        a = fa[k]
        b = fb[k]
        for i in range(m):
            vals[i] = np.float32(X[idx[i], a]) - np.float32(X[idx[i], b])
        order = np.argsort(vals, kind="mergesort")
        for i in range(m):
            vs[i] = vals[order[i]]
            ls[i] = y[idx[order[i]]]
        if vs[0] == vs[m - 1]:
            continue
        t, g = scan_sorted(vs, ls, tot, min_leaf, flog)
        if g > best_gain:
            best_gain = g
            best_k = k
            best_t = t
    return best_k, best_t, best_gain


def best_pair_split(X, y, idx, fa, fb, n_classes, min_samples_leaf=1):
    """Best split ``x[a] - x[b] <= t`` of the samples ``idx`` among the pairs.

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p), C-contiguous
    y : ndarray int32, shape (n,)
    idx : ndarray int64, shape (m,)
    fa, fb : ndarray int64, shape (n_pairs,)
        The candidate pairs ``(fa[k], fb[k])``.
    n_classes : int
    min_samples_leaf : int

    Returns
    -------
    (a, b, threshold, gain): the best pair (-1, -1 when no pair separates the
    samples), ``x[a] - x[b] <= threshold`` goes left, its information gain.
    """
    if X.dtype == np.uint8:
        if idx.shape[0] >= HIST_MIN_SAMPLES:
            k, t, g = _pair_split_hist_u8(X, y, idx, fa, fb, n_classes, min_samples_leaf,
                                          _EDGES_DIFF)
        else:
            k, t, g = _pair_split_counting_u8(X, y, idx, fa, fb, n_classes, min_samples_leaf)
    else:
        k, t, g = _pair_split_sorted(X, y, idx, fa, fb, n_classes, min_samples_leaf)
    if k < 0:
        return -1, -1, 0.0, -1.0
    return int(fa[k]), int(fb[k]), float(t), float(g)


def sample_pairs(rng, n_features, n_pairs):
    """``n_pairs`` random feature pairs with ``a != b`` (int64 arrays fa, fb)."""
    fa = rng.integers(0, n_features, size=n_pairs)
    fb = rng.integers(0, n_features - 1, size=n_pairs)
    fb = fb + (fb >= fa)
    return fa.astype(np.int64), fb.astype(np.int64)
