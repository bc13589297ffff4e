"""Two-probe splits ``x[a] - x[b] <= t`` (the paper's Shotton-style baseline).

At each node the grower samples ``n_pairs`` feature pairs ``(a, b)``, ``a != b``;
this module finds the pair and threshold with the best information gain.  With
uint8 features the difference lies in -255..255, so a 511-bin class histogram
per pair gives the exact best threshold without sorting; small nodes
radix-sort the differences (uint8) or sort them (float features).  The uint8
kernels first copy the pairs' columns feature-major (see ``_criteria``), and
do the gain arithmetic of ``scan_histogram`` and ``scan_sorted`` operation by
operation (same split, same gain).  Differences are computed in float32
(exact for uint8), as inference computes them.
"""

import numpy as np

from .._jit import NJIT, njit
from ._criteria import (add_to_bin, class_counts, class_mask_words, delta_xlogx_table,
                        entropy_terms, gather_columns, insertion_sort_codes,
                        midpoint_threshold, node_labels, radix_sort_codes, scan_bins_clear,
                        scan_codes, scan_values, xlogx_table)
from ._sort import sort_scratch

#: Nodes with at least this many samples use 511-bin histograms (uint8 only).
HIST_MIN_SAMPLES = 512

#: Smaller nodes sort each pair's codes by insertion, not by radix (same order).
INSERTION_MAX_SAMPLES = 32

#: Histogram-path nodes copy their pairs' columns for at most this many samples
#: at a time (a (n_features_used, chunk) uint8 buffer; about 64 MB at the default).
CHUNK_BYTES = 64 << 20


@njit(**NJIT)
def _pair_columns(fa, fb, p):
    """Sorted distinct features of the pairs and each pair's rows in that list."""
    slot = np.full(p, -1, dtype=np.int64)
    for k in range(fa.shape[0]):
        slot[fa[k]] = 0
        slot[fb[k]] = 0
    nf = 0
    for f in range(p):
        if slot[f] == 0:
            slot[f] = nf
            nf += 1
    feats = np.empty(nf, dtype=np.int64)
    for f in range(p):
        if slot[f] >= 0:
            feats[slot[f]] = f
    sa = np.empty(fa.shape[0], dtype=np.int64)
    sb = np.empty(fa.shape[0], dtype=np.int64)
    for k in range(fa.shape[0]):
        sa[k] = slot[fa[k]]
        sb[k] = slot[fb[k]]
    return feats, sa, sb


@njit(**NJIT)
def _add_pair_hist(Ta, Tb, lab, n, hist, mask):
    """Counts of ``x[a] - x[b] + 255`` per class (hist), and each bin's classes (mask).

    Parameters
    ----------
    Ta, Tb : uint8 (>= n,)
        The pair's two columns over the samples (from :func:`gather_columns`).
    lab : int32 (>= n,)
        Class id of each sample.
    n : int
        Number of samples added.
    hist : int32 (511, n_classes)
        Class counts per difference bin; incremented in place.
    mask : uint64 (511, n_words)
        Each bin's class mask; bits set in place.
    """
    for i in range(n):
        add_to_bin(hist, mask, np.int32(Ta[i]) - np.int32(Tb[i]) + 255, lab[i])


@njit(**NJIT)
def _pair_split_hist_u8(X, y, idx, fa, fb, n_classes, min_leaf, chunk):
    """Histogram path: per-bin gain updates (the arithmetic of ``scan_histogram``).

    The pairs' columns are copied feature-major for ``chunk`` samples at a
    time; with one chunk each pair's 511 x n_classes histogram is built and
    scanned while it is in L1, otherwise all histograms are accumulated over
    the chunks first.

    Parameters
    ----------
    X : uint8 (n, p), C-contiguous
        The samples.
    y : int32 (n,)
        Class ids.
    idx : int64 (m,)
        The node's samples.
    fa, fb : int64 (n_pairs,)
        The candidate pairs ``(fa[k], fb[k])``.
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side, ``>= 1``.
    chunk : int
        Samples whose columns are copied at a time.

    Returns
    -------
    k : int
        The best pair's index in ``fa``/``fb``; -1 when no pair splits.
    threshold : float32
        ``x[a] - x[b] <= threshold`` goes left.
    gain : float64
        The information gain (-1.0 when ``k`` is -1).
    """
    m = idx.shape[0]
    q = fa.shape[0]
    feats, sa, sb = _pair_columns(fa, fb, X.shape[1])
    lab = node_labels(y, idx)
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    parent, s_r0 = entropy_terms(tot, m, flog)
    left = np.zeros(n_classes, dtype=np.int64)
    best_k = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    best_raw = -np.inf
    width = min(m, max(chunk, 1))
    T = np.empty((feats.shape[0], width), dtype=np.uint8)
    if m <= width:
        gather_columns(X, idx, 0, m, feats, T)
        hist = np.zeros((511, n_classes), dtype=np.int32)
        mask = np.zeros((511, class_mask_words(n_classes)), dtype=np.uint64)
        for k in range(q):
            _add_pair_hist(T[sa[k]], T[sb[k]], lab, m, hist, mask)
            b0, b1, best_raw, best_gain = scan_bins_clear(
                hist, mask, tot, m, min_leaf, flog, parent, s_r0, left, best_raw, best_gain)
            if b0 >= 0:
                best_k = k
                best_t = midpoint_threshold(np.float64(b0 - 255), np.float64(b1 - 255))
        return best_k, best_t, best_gain
    hists = np.zeros((q, 511, n_classes), dtype=np.int32)
    masks = np.zeros((q, 511, class_mask_words(n_classes)), dtype=np.uint64)
    for s0 in range(0, m, width):
        s1 = min(s0 + width, m)
        gather_columns(X, idx, s0, s1, feats, T)
        for k in range(q):
            _add_pair_hist(T[sa[k]], T[sb[k]], lab[s0:s1], s1 - s0, hists[k], masks[k])
    for k in range(q):
        b0, b1, best_raw, best_gain = scan_bins_clear(
            hists[k], masks[k], tot, m, min_leaf, flog, parent, s_r0, left, best_raw, best_gain)
        if b0 >= 0:
            best_k = k
            best_t = midpoint_threshold(np.float64(b0 - 255), np.float64(b1 - 255))
    return best_k, best_t, best_gain


@njit(**NJIT)
def _pair_split_counting_u8(X, y, idx, fa, fb, n_classes, min_leaf):
    """Small nodes (< 512 samples): per pair a stable sort, then per-sample updates.

    Per pair, the codes ``(x[a] - x[b] + 255) << shift | label`` are sorted
    stably by value (two radix passes; by insertion up to
    ``INSERTION_MAX_SAMPLES`` codes) and scanned with per-sample gain updates
    (the arithmetic of ``scan_sorted``).

    Parameters
    ----------
    X : uint8 (n, p), C-contiguous
        The samples.
    y : int32 (n,)
        Class ids.
    idx : int64 (m,)
        The node's samples.
    fa, fb : int64 (n_pairs,)
        The candidate pairs ``(fa[k], fb[k])``.
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side, ``>= 1``.

    Returns
    -------
    k : int
        The best pair's index in ``fa``/``fb``; -1 when no pair splits.
    threshold : float32
        ``x[a] - x[b] <= threshold`` goes left.
    gain : float64
        The information gain (-1.0 when ``k`` is -1).
    """
    m = idx.shape[0]
    q = fa.shape[0]
    feats, sa, sb = _pair_columns(fa, fb, X.shape[1])
    lab = node_labels(y, idx)
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    dflog = delta_xlogx_table(flog)
    parent, s_r0 = entropy_terms(tot, m, flog)
    left = np.zeros(n_classes, dtype=np.int64)
    shift = 1
    while (1 << shift) < n_classes:
        shift += 1
    T = np.empty((feats.shape[0], m), dtype=np.uint8)
    gather_columns(X, idx, 0, m, feats, T)
    codes = np.empty(m, dtype=np.int32)
    tmp = np.empty(m, dtype=np.int32)
    srt = np.empty(m, dtype=np.int32)
    c1 = np.empty(32, dtype=np.int32)
    c2 = np.empty(16, dtype=np.int32)
    best_k = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    best_raw = -np.inf
    for k in range(q):
        Ta = T[sa[k]]
        Tb = T[sb[k]]
        for i in range(m):
            codes[i] = ((np.int32(Ta[i]) - np.int32(Tb[i]) + 255) << shift) | lab[i]
        if m <= INSERTION_MAX_SAMPLES:
            insertion_sort_codes(codes, m, shift, srt)
        else:
            radix_sort_codes(codes, m, shift, tmp, srt, c1, c2)
        if m < 2 or (srt[0] >> shift) == (srt[m - 1] >> shift):
            continue  # constant difference: no split
        v0, v1, best_raw, best_gain = scan_codes(
            srt, m, shift, tot, min_leaf, dflog, flog, parent, s_r0, left, best_raw, best_gain)
        if v0 >= 0:
            best_k = k
            best_t = midpoint_threshold(np.float64(v0 - 255), np.float64(v1 - 255))
    return best_k, best_t, best_gain


@njit(**NJIT)
def _pair_split_sorted(X, y, idx, fa, fb, n_classes, min_leaf):
    """Float features: each pair's differences in stable sorted order, then scanned.

    The float32 differences are sorted by
    :func:`facesegment.forest._sort.argsort_f32` and scanned by
    :func:`scan_sorted`.

    Parameters
    ----------
    X : float (n, p)
        The samples.
    y : int32 (n,)
        Class ids.
    idx : int64 (m,)
        The node's samples.
    fa, fb : int64 (n_pairs,)
        The candidate pairs ``(fa[k], fb[k])``.
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side, ``>= 1``.

    Returns
    -------
    k : int
        The best pair's index in ``fa``/``fb``; -1 when no pair splits.
    threshold : float32
        ``x[a] - x[b] <= threshold`` goes left.
    gain : float64
        The information gain (-1.0 when ``k`` is -1).
    """
    m = idx.shape[0]
    q = fa.shape[0]
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    lab = node_labels(y, idx)
    vals = np.empty(m, dtype=np.float32)
    vs = np.empty(m, dtype=np.float32)
    ls = np.empty(m, dtype=np.int32)
    scratch = sort_scratch(m)
    best_k = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k in range(q):
        a = fa[k]
        b = fb[k]
        for i in range(m):
            vals[i] = np.float32(X[idx[i], a]) - np.float32(X[idx[i], b])
        t, g = scan_values(vals, m, lab, scratch, vs, ls, tot, min_leaf, flog)
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
    min_samples_leaf = max(int(min_samples_leaf), 1)
    if X.dtype == np.uint8:
        if idx.shape[0] >= HIST_MIN_SAMPLES:
            n_used = min(X.shape[1], 2 * fa.shape[0])
            k, t, g = _pair_split_hist_u8(X, y, idx, fa, fb, n_classes, min_samples_leaf,
                                          max(CHUNK_BYTES // max(n_used, 1), 512))
        else:
            k, t, g = _pair_split_counting_u8(X, y, idx, fa, fb, n_classes, min_samples_leaf)
    else:
        k, t, g = _pair_split_sorted(X, y, idx, fa, fb, n_classes, min_samples_leaf)
    if k < 0:
        return -1, -1, 0.0, -1.0
    return int(fa[k]), int(fb[k]), float(t), float(g)


def sample_pairs(rng, n_features, n_pairs):
    """``n_pairs`` random feature pairs with ``a != b``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The random generator.
    n_features : int
        Number of features, ``>= 2``.
    n_pairs : int
        Number of pairs drawn.

    Returns
    -------
    fa, fb : int64 ndarray of shape (n_pairs,)
        The pairs' first and second features, uniform over ordered pairs of
        distinct features.
    """
    fa = rng.integers(0, n_features, size=n_pairs)
    fb = rng.integers(0, n_features - 1, size=n_pairs)
    fb = fb + (fb >= fa)
    return fa.astype(np.int64), fb.astype(np.int64)
