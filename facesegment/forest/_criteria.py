"""Information-gain scans shared by every split family (Numba kernels).

Entropies use natural logarithms.  With ``F(k) = k log k`` the weighted entropy
of a set of ``n`` samples with class counts ``c`` is ``n H = F(n) - sum_c F(c)``,
so the information gain of a split of ``n`` samples into ``n_l`` and ``n_r`` is

    gain = (F(n) - sum F(c) - [F(n_l) - sum F(c_l)] - [F(n_r) - sum F(c_r)]) / n

Moving samples from the right to the left side changes the sums in O(1) per
class, and ``F`` is read from a table ``flog[k] = k log k`` built once per node.
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


@njit(cache=True, nogil=True)
def sorted_gain_of_values(values, y, idx, n_classes, min_leaf):
    """Best threshold on per-sample values (float32 (m,)) of the samples ``idx``.

    Used to refit the threshold of an oblique split after its weights were
    rounded (float16 storage).  Returns ``(threshold float32, gain)``.
    """
    m = idx.shape[0]
    order = np.argsort(values, kind="mergesort")
    vs = np.empty(m, dtype=values.dtype)
    ls = np.empty(m, dtype=np.int32)
    for i in range(m):
        vs[i] = values[order[i]]
        ls[i] = y[idx[order[i]]]
    tot = class_counts(y, idx, n_classes)
    return scan_sorted(vs, ls, tot, min_leaf, xlogx_table(m))
