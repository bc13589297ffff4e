"""Random ferns (Özuysal et al.): Numba kernels over plain arrays.

A fern of depth d is stored as a complete binary tree in breadth-first order:
node ``i`` has children ``2 i + 1`` and ``2 i + 2`` and depth
``floor(log2(i + 1))``, and every node of depth ``l`` carries the fern's test
``l``.  A test is ``value(x) <= t`` with ``value`` = ``float32(x[a])`` (axis)
or ``float32(x[a]) - float32(x[b])`` (two-probe, ``b >= 0``), exactly as the
prediction and dense-inference kernels evaluate it.
"""

import numpy as np

from .._jit import NJIT, njit
from ._criteria import midpoint_threshold


@njit(**NJIT)
def fern_test_values(X, idx, a, b):
    """float32 (m,) values of the test on the samples ``idx``.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    idx : int64 (m,)
        The samples evaluated.
    a : int
        The test's first feature.
    b : int
        The second feature of a two-probe test, or -1 for an axis test.

    Returns
    -------
    float32 (m,)
        ``float32(x[a])``, or ``float32(x[a]) - float32(x[b])`` when ``b >= 0``.
    """
    m = idx.shape[0]
    out = np.empty(m, dtype=np.float32)
    for i in range(m):
        row = X[idx[i]]
        v = np.float32(row[a])
        if b >= 0:
            v = v - np.float32(row[b])
        out[i] = v
    return out


@njit(**NJIT)
def quantile_cut(values, u):
    """A threshold at a random quantile of ``values`` (float32 (m,), m >= 1).

    ``v`` is the value of rank ``floor(u m)``; the threshold is the midpoint
    between ``v`` and the next larger value present (the previous smaller one
    when ``v`` is the maximum), so samples fall on both sides.

    Parameters
    ----------
    values : float32 (m,)
        The test's values on the fern's samples, ``m >= 1`` (not modified).
    u : float
        A uniform draw in [0, 1).

    Returns
    -------
    ok : bool
        False when the values are all equal.
    t : float32
        The threshold; when ``ok`` is False, that value (every sample goes
        left).
    """
    m = values.shape[0]
    k = min(int(u * m), m - 1)
    v = np.partition(values, k)[k]
    above = np.inf
    below = -np.inf
    for i in range(m):
        x = values[i]
        if x > v and x < above:
            above = x
        elif x < v and x > below:
            below = x
    if above < np.inf:
        return True, midpoint_threshold(v, above)
    if below > -np.inf:
        return True, midpoint_threshold(below, v)
    return False, np.float32(v)


@njit(**NJIT)
def fern_counts(X, y, idx, fa, fb, thr, n_classes):
    """Class counts of every node of a fern, int64 (2^(d+1) - 1, n_classes).

    Each sample of ``idx`` is counted at the root and at the node it reaches on
    every level.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    y : int32 (n,)
        Class ids.
    idx : int64 (m,)
        The fern's samples.
    fa, fb : int64 (d,)
        The tests' features of levels ``0..d-1`` (``fb[l] < 0``: axis test).
    thr : float32 (d,)
        The tests' thresholds (``value <= thr[l]`` goes left).
    n_classes : int
        Number of classes.

    Returns
    -------
    int64 (2^(d+1) - 1, n_classes)
        Class counts per node, breadth-first.
    """
    d = fa.shape[0]
    counts = np.zeros((2 ** (d + 1) - 1, n_classes), dtype=np.int64)
    for i in range(idx.shape[0]):
        row = X[idx[i]]
        c = y[idx[i]]
        node = 0
        counts[0, c] += 1
        for lev in range(d):
            v = np.float32(row[fa[lev]])
            if fb[lev] >= 0:
                v = v - np.float32(row[fb[lev]])
            node = 2 * node + 1 if v <= thr[lev] else 2 * node + 2
            counts[node, c] += 1
    return counts


@njit(**NJIT)
def fern_counts_missing(X, y, idx, fa, fb, thr, miss_left, n_classes):
    """:func:`fern_counts` when X holds NaN: a sample whose test value of level
    ``l`` is missing goes left when ``miss_left[l]`` (int8 (d,)) is 1, right when 0.

    Parameters
    ----------
    X : float32 (n, p); y : int32 (n,); idx : int64 (m,) the fern's samples
    fa, fb : int64 (d,); thr : float32 (d,); miss_left : int8 (d,)
    n_classes : int
    """
    d = fa.shape[0]
    counts = np.zeros((2 ** (d + 1) - 1, n_classes), dtype=np.int64)
    for i in range(idx.shape[0]):
        row = X[idx[i]]
        c = y[idx[i]]
        node = 0
        counts[0, c] += 1
        for lev in range(d):
            v = np.float32(row[fa[lev]])
            if fb[lev] >= 0:
                v = v - np.float32(row[fb[lev]])
            go = miss_left[lev] != 0 if v != v else v <= thr[lev]
            node = 2 * node + 1 if go else 2 * node + 2
            counts[node, c] += 1
    return counts


__all__ = ["fern_test_values", "quantile_cut", "fern_counts", "fern_counts_missing"]
