"""Axis-aligned splits ``x[f] <= t``: the best threshold among q features.

For uint8 features the exact best threshold of every candidate feature comes
from a 256-bin class histogram (no sorting): the node's samples are read once,
row by row, incrementing ``hist[k, x[features[k]], y]``, then each histogram is
scanned.  Small nodes (fewer than ``HIST_MIN_SAMPLES`` samples) counting-sort
each feature's values instead (O(m + 256) per feature, cheaper than clearing
and scanning 256 x n_classes bins).  Other dtypes (float32) sort the values.  Both paths give the same
split: the first feature (in the order given) and the lowest threshold reaching
the maximal information gain; the threshold is the midpoint between the two
neighbouring values present in the node.
"""

import numpy as np

from .._jit import NJIT, njit
from ._criteria import class_counts, scan_histogram, scan_sorted, xlogx_table

#: Nodes with at least this many samples use 256-bin histograms (uint8 only).
HIST_MIN_SAMPLES = 384

_EDGES_U8 = np.arange(256, dtype=np.float64)


@njit(**NJIT)
def _axis_split_hist_u8(X, y, idx, features, n_classes, min_leaf, edges):
    m = idx.shape[0]
    q = features.shape[0]
    hist = np.zeros((q, 256, n_classes), dtype=np.int32)
    for i in range(m):
        row = idx[i]
        c = y[row]
        for k in range(q):
            hist[k, X[row, features[k]], c] += 1
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    best_f = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k in range(q):
        t, g = scan_histogram(hist[k], tot, m, min_leaf, flog, edges)
        if g > best_gain:
            best_gain = g
            best_f = features[k]
            best_t = t
    return best_f, best_t, best_gain


@njit(**NJIT)
def _axis_split_counting_u8(X, y, idx, features, n_classes, min_leaf):
    m = idx.shape[0]
    q = features.shape[0]
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    # gather row by row (each row read once), then work feature by feature
    vals = np.empty((q, m), dtype=np.uint8)
    labs = np.empty(m, dtype=np.int32)
    for i in range(m):
        row = idx[i]
        labs[i] = y[row]
        for k in range(q):
            vals[k, i] = X[row, features[k]]
    vs = np.empty(m, dtype=np.uint8)
    ls = np.empty(m, dtype=np.int32)
    start = np.empty(257, dtype=np.int64)
    best_f = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k in range(q):
        start[:] = 0
        lo = 255
        hi = 0
        for i in range(m):
            v = vals[k, i]
            start[v + 1] += 1
            lo = min(lo, v)
            hi = max(hi, v)
        if lo == hi:
            continue
        for b in range(lo + 1, hi + 2):
            start[b] += start[b - 1]
        for i in range(m):  # stable counting sort
            v = vals[k, i]
            pos = start[v]
            vs[pos] = v
            ls[pos] = labs[i]
            start[v] = pos + 1
        t, g = scan_sorted(vs, ls, tot, min_leaf, flog)
        if g > best_gain:
            best_gain = g
            best_f = features[k]
            best_t = t
    return best_f, best_t, best_gain


@njit(**NJIT)
def _axis_split_sorted(X, y, idx, features, n_classes, min_leaf):
    m = idx.shape[0]
    q = features.shape[0]
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    vals = np.empty(m, dtype=X.dtype)
    vs = np.empty(m, dtype=X.dtype)
    ls = np.empty(m, dtype=np.int32)
    best_f = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k in range(q):
        f = features[k]
        for i in range(m):
            vals[i] = X[idx[i], f]
        order = np.argsort(vals, kind="mergesort")
        for i in range(m):
            vs[i] = vals[order[i]]
            ls[i] = y[idx[order[i]]]
        if vs[0] == vs[m - 1]:
            continue
        t, g = scan_sorted(vs, ls, tot, min_leaf, flog)
        if g > best_gain:
            best_gain = g
            best_f = f
            best_t = t
    return best_f, best_t, best_gain


def best_axis_split(X, y, idx, features, n_classes, min_samples_leaf=1):
    """Best split ``x[f] <= t`` of the samples ``idx`` among ``features``.

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p), C-contiguous
        Raw features (never copied).
    y : ndarray int32, shape (n,)
        Class ids in ``0..n_classes-1``.
    idx : ndarray int64, shape (m,)
        Samples of the node (indices into X).
    features : ndarray int64, shape (q,)
        Candidate features.
    n_classes : int
    min_samples_leaf : int
        Minimum samples on each side of the split.

    Returns
    -------
    feature : int
        Best feature, or -1 when no feature separates the samples.
    threshold : float
        ``x[feature] <= threshold`` goes left (a float32 value).
    gain : float
        Information gain (natural log); -1.0 when there is no valid split.
    """
    if X.dtype == np.uint8:
        if idx.shape[0] >= HIST_MIN_SAMPLES:
            f, t, g = _axis_split_hist_u8(X, y, idx, features, n_classes,
                                          min_samples_leaf, _EDGES_U8)
        else:
            f, t, g = _axis_split_counting_u8(X, y, idx, features, n_classes,
                                              min_samples_leaf)
    else:
        f, t, g = _axis_split_sorted(X, y, idx, features, n_classes, min_samples_leaf)
    return int(f), float(t), float(g)
