"""Axis-aligned splits ``x[f] <= t``: the best threshold among q features.

For uint8 features the exact best threshold of every candidate feature comes
from a 256-bin class histogram (no sorting): the node's samples are read once,
row by row, incrementing ``hist[k, x[features[k]], y]``, then each histogram is
scanned.  Small nodes (fewer than ``HIST_MIN_SAMPLES`` samples) counting-sort
each feature's values instead (O(m + 256) per feature, cheaper than clearing
and scanning 256 x n_classes bins).  Float32 features sort the values (a stable
radix argsort: :mod:`facesegment.forest._sort`).  Every path gives the same
split: the first feature (in the order given) and the lowest threshold reaching
the maximal information gain; the threshold is the midpoint between the two
neighbouring values present in the node.
"""

import numpy as np

from .._jit import NJIT, njit
from ._cart_kernels import cart_scratch, cart_split_batch
from ._criteria import (CRITERIA, class_counts, phi_table, scan_histogram, scan_sorted,
                        scan_values, xlogx_table)
from ._ranks import sort_inputs
from ._sort import sort_scratch

#: Nodes with at least this many samples use 256-bin histograms (uint8 only).
HIST_MIN_SAMPLES = 384

_EDGES_U8 = np.arange(256, dtype=np.float64)


@njit(**NJIT)
def _axis_split_hist_u8(X, y, idx, features, n_classes, min_leaf, edges):
    """uint8 features, large nodes: a 256-bin class histogram per candidate.

    The node's samples are read once, row by row, incrementing
    ``hist[k, x[features[k]], y]``; each histogram is then scanned by
    :func:`scan_histogram`.

    Parameters
    ----------
    X : uint8 (n, p), C-contiguous
        The samples.
    y : int32 (n,)
        Class ids in ``0..n_classes - 1``.
    idx : int64 (m,)
        The node's samples.
    features : int64 (q,)
        Candidate features.
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side.
    edges : float64 (256,)
        The value of each bin (``0..255``).

    Returns
    -------
    feature : int
        Best feature (the first in ``features`` reaching the maximal gain); -1
        when no feature splits.
    threshold : float32
        ``x[feature] <= threshold`` goes left.
    gain : float64
        Information gain; -1.0 when there is no valid split.
    """
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
    """uint8 features, small nodes: a stable counting sort per candidate.

    The candidates' values are gathered row by row (each row read once), then
    each feature's values are counting-sorted (O(m + 256)) and scanned by
    :func:`scan_sorted`; constant features are skipped.

    Parameters
    ----------
    X : uint8 (n, p), C-contiguous
        The samples.
    y : int32 (n,)
        Class ids in ``0..n_classes - 1``.
    idx : int64 (m,)
        The node's samples.
    features : int64 (q,)
        Candidate features.
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side.

    Returns
    -------
    feature : int
        Best feature (the first in ``features`` reaching the maximal gain); -1
        when no feature splits.
    threshold : float32
        ``x[feature] <= threshold`` goes left.
    gain : float64
        Information gain; -1.0 when there is no valid split.
    """
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


#: The float path gathers the values of at most this many bytes of candidates at a time.
GATHER_BYTES = 16 << 20


@njit(**NJIT)
def _axis_split_sorted(X, y, idx, features, n_classes, min_leaf, group_bytes=GATHER_BYTES):
    """Float features: each candidate's values in stable sorted order, then scanned.

    Values are ordered by :func:`facesegment.forest._sort.argsort_f32` (the
    order of a merge sort), then scanned by :func:`scan_sorted`.  The
    candidates' values are gathered row by row, each row read once per group of
    candidates (``group_bytes`` of values, at 4 bytes a value).

    Parameters
    ----------
    X : float32 (n, p)
        The samples.
    y : int32 (n,)
        Class ids in ``0..n_classes - 1``.
    idx : int64 (m,)
        The node's samples.
    features : int64 (q,)
        Candidate features.
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side.
    group_bytes : int, default=GATHER_BYTES
        Bytes of candidate values gathered at a time (at least one candidate).

    Returns
    -------
    feature : int
        Best feature (the first in ``features`` reaching the maximal gain); -1
        when no feature splits.
    threshold : float32
        ``x[feature] <= threshold`` goes left.
    gain : float64
        Information gain; -1.0 when there is no valid split.
    """
    m = idx.shape[0]
    q = features.shape[0]
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    labs = np.empty(m, dtype=np.int32)
    for i in range(m):
        labs[i] = y[idx[i]]
    group = max(1, min(q, group_bytes // max(4 * m, 1)))
    vals = np.empty((group, m), dtype=X.dtype)
    vs = np.empty(m, dtype=X.dtype)
    ls = np.empty(m, dtype=np.int32)
    scratch = sort_scratch(m)
    best_f = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k0 in range(0, q, group):
        k1 = min(q, k0 + group)
        for i in range(m):
            row = idx[i]
            for k in range(k0, k1):
                vals[k - k0, i] = X[row, features[k]]
        for k in range(k0, k1):
            t, g = scan_values(vals[k - k0], m, labs, scratch, vs, ls, tot, min_leaf, flog)
            if g > best_gain:
                best_gain = g
                best_f = features[k]
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


# ---------------------------------------------------------------------------
# CART splits: the Gini index, and missing values (NaN in float features).
# ---------------------------------------------------------------------------


def best_axis_split_cart(X, y, idx, features, n_classes, min_samples_leaf=1,
                         criterion="gini", n_visit=None):
    """Best split ``x[f] <= t`` under ``criterion``, NaN values sent to one side.

    As :func:`best_axis_split` (same tie rule: the first feature in the order
    given, the lowest cut), with ``criterion`` "gini" or "entropy"
    (:data:`facesegment.forest._criteria.CRITERIA`) and float features that may
    hold NaN (missing values).  ``features`` are visited in their order,
    ``n_visit`` of them, and beyond while every feature visited so far was
    constant on the node: scikit-learn's rule (constant features count towards
    ``max_features``, but the search goes on until one feature can split).

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p), C-contiguous
        Raw features; float features may hold NaN.
    y : ndarray int32, shape (n,)
        Class ids in ``0..n_classes-1``.
    idx : ndarray int64, shape (m,)
        Samples of the node (indices into X; repeated indices count as copies).
    features : array-like of int, shape (q,)
        Candidate features, in the order visited.
    n_classes : int
        Number of classes.
    min_samples_leaf : int, default=1
        Minimum samples on each side of the split.
    criterion : {"gini", "entropy"}, default="gini"
        The impurity.
    n_visit : int or None, default=None
        Number of features visited before the search may stop (None: all).

    Returns
    -------
    feature : int
        Best feature, or -1 when no feature separates the samples.
    threshold : float
        ``x[feature] <= threshold`` goes left (a float32 value; 0.0 when
        ``feature`` is -1).
    gain : float
        The impurity decrease weighted by the children's shares
        (:func:`facesegment.forest._cart_kernels.scan_cart_copies`, on the
        node's distinct rows with their multiplicities, as trees are grown);
        -1.0 when there is no valid split.
    missing_left : int
        1 when the node's samples missing ``feature`` go left, 0 when they go
        right, -1 when none of them misses it (the grower then sends future
        missing values to the larger child).
    """
    gini = CRITERIA[criterion] == 1
    features = np.asarray(features, dtype=np.int64)
    n_visit = min(features.shape[0], features.shape[0] if n_visit is None else int(n_visit))
    rows, counts = np.unique(np.asarray(idx, dtype=np.int64), return_counts=True)
    lab = np.ascontiguousarray(y[rows], dtype=np.int32)
    cnt = counts.astype(np.int64)
    phi = phi_table(int(cnt.sum()), gini)
    sc = cart_scratch(rows.shape[0], max(n_visit, 1), n_classes)
    known = np.zeros((X.shape[1] + 63) // 64, np.uint64)
    best = np.array([-1.0, -1.0, 0.0, -1.0])
    ids = np.arange(rows.shape[0], dtype=np.int64)
    args = (*sort_inputs(X), rows, lab, cnt, ids)
    found = cart_split_batch(*args, features, n_visit, min_samples_leaf, gini,
                             phi, X.dtype == np.uint8, known, best, sc)
    for j in range(n_visit, features.shape[0]):  # all constant so far: one more
        if found:
            break
        found = cart_split_batch(*args, features[j:j + 1], 1, min_samples_leaf,
                                 gini, phi, X.dtype == np.uint8, known, best, sc)
    if best[1] < 0:
        return -1, 0.0, -1.0, -1
    return int(best[1]), float(np.float32(best[2])), float(best[0]), int(best[3])
