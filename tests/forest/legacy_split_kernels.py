"""Frozen copy of the split kernels as of commit 761cb45 (before the rewrite).

The reference (a test oracle) for the equivalence tests in
tests/forest/test_split_blocks.py and for benchmarks/bench_split_kernels.py:
the rewritten kernels in facesegment.forest.twoprobe / axis must choose the
same split and return the same gain as these.  Do not edit (except to fix imports).
"""

import numpy as np
from numba import njit

@njit(cache=True, nogil=True)
def xlogx_table(n):
    """``flog[k] = k * log(k)`` for ``k = 0..n`` (float64, shape (n + 1,))."""
    out = np.zeros(n + 1, dtype=np.float64)
    for k in range(2, n + 1):
        out[k] = k * np.log(k)
    return out


@njit(cache=True, nogil=True)
def class_counts(y, idx, n_classes):
    """Class counts (int64 (n_classes,)) of the samples ``idx`` (int64 (m,))."""
    out = np.zeros(n_classes, dtype=np.int64)
    for i in range(idx.shape[0]):
        out[y[idx[i]]] += 1
    return out


@njit(cache=True, nogil=True)
def midpoint_threshold(a, b):
    """A float32 threshold ``t`` with ``a <= t < b`` (a < b, both float32-exact)."""
    a32 = np.float32(a)
    t = np.float32(0.5 * (np.float64(a) + np.float64(b)))
    if t >= np.float32(b) or t < a32:
        t = a32
    return t


@njit(cache=True, nogil=True)
def scan_histogram(hist, tot, n, min_leaf, flog, edges):
    """Best split of a class histogram over ordered bins.

    Parameters
    ----------
    hist : int32 or int64 (n_bins, n_classes)
        Class counts per bin; bin ``b`` holds samples whose value is ``edges[b]``.
    tot : int64 (n_classes,)
        Class counts of the node (the column sums of ``hist``).
    n : int
        Number of samples of the node.
    min_leaf : int
        Minimum samples on each side.
    flog : float64 (n + 1,)
        ``k log k`` table.
    edges : float64 (n_bins,)
        Value represented by each bin (increasing).

    Returns
    -------
    (threshold float32, gain float64); gain is -1.0 when no valid split exists.
    Samples with value <= threshold go left.  The threshold is the midpoint
    between the last non-empty bin on the left and the next non-empty bin.
    """
    n_bins, n_classes = hist.shape
    left = np.zeros(n_classes, dtype=np.int64)
    s_l = 0.0
    s_r = 0.0
    for c in range(n_classes):
        s_r += flog[tot[c]]
    parent = flog[n] - s_r
    best_gain = -1.0
    best_bin = -1
    nl = 0
    for b in range(n_bins):
        bt = 0
        for c in range(n_classes):
            k = hist[b, c]
            if k:
                cl = left[c]
                cr = tot[c] - cl
                s_l += flog[cl + k] - flog[cl]
                s_r += flog[cr - k] - flog[cr]
                left[c] = cl + k
                bt += k
        if bt == 0:
            continue
        nl += bt
        nr = n - nl
        if nr < min_leaf:
            break
        if nl < min_leaf:
            continue
        gain = (parent - (flog[nl] - s_l) - (flog[nr] - s_r)) / n
        if gain > best_gain:
            best_gain = gain
            best_bin = b
    if best_bin < 0:
        return np.float32(0.0), -1.0
    nxt = best_bin + 1
    while nxt < n_bins:
        empty = True
        for c in range(n_classes):
            if hist[nxt, c]:
                empty = False
                break
        if not empty:
            break
        nxt += 1
    return midpoint_threshold(edges[best_bin], edges[nxt]), best_gain


@njit(cache=True, nogil=True)
def scan_sorted(vals, labels, tot, min_leaf, flog):
    """Best split of values sorted increasingly, with their class labels.

    Parameters
    ----------
    vals : (m,) numeric, sorted increasingly
    labels : (m,) int32 class ids
    tot : int64 (n_classes,) class counts of the node
    min_leaf : int
    flog : float64 (m + 1,) ``k log k`` table

    Returns
    -------
    (threshold float32, gain float64); gain -1.0 when no valid split.
    """
    m = vals.shape[0]
    n_classes = tot.shape[0]
    left = np.zeros(n_classes, dtype=np.int64)
    s_l = 0.0
    s_r = 0.0
    for c in range(n_classes):
        s_r += flog[tot[c]]
    parent = flog[m] - s_r
    best_gain = -1.0
    best_i = -1
    for i in range(m - 1):
        c = labels[i]
        cl = left[c]
        cr = tot[c] - cl
        s_l += flog[cl + 1] - flog[cl]
        s_r += flog[cr - 1] - flog[cr]
        left[c] = cl + 1
        if vals[i] == vals[i + 1]:
            continue
        nl = i + 1
        nr = m - nl
        if nr < min_leaf:
            break
        if nl < min_leaf:
            continue
        gain = (parent - (flog[nl] - s_l) - (flog[nr] - s_r)) / m
        if gain > best_gain:
            best_gain = gain
            best_i = i
    if best_i < 0:
        return np.float32(0.0), -1.0
    return midpoint_threshold(vals[best_i], vals[best_i + 1]), best_gain



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


_EDGES_U8 = np.arange(256, dtype=np.float64)


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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



def legacy_pair_split(X, y, idx, fa, fb, n_classes, min_leaf, hist_min=512):
    """The old ``best_pair_split`` dispatch for uint8: (k, threshold, gain)."""
    if idx.shape[0] >= hist_min:
        return _pair_split_hist_u8(X, y, idx, fa, fb, n_classes, min_leaf, _EDGES_DIFF)
    return _pair_split_counting_u8(X, y, idx, fa, fb, n_classes, min_leaf)


def legacy_axis_split(X, y, idx, features, n_classes, min_leaf, hist_min=384):
    """The old ``best_axis_split`` dispatch for uint8: (feature, threshold, gain)."""
    if idx.shape[0] >= hist_min:
        return _axis_split_hist_u8(X, y, idx, features, n_classes, min_leaf, _EDGES_U8)
    return _axis_split_counting_u8(X, y, idx, features, n_classes, min_leaf)
