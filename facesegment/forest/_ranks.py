"""Ranking the values of a CART tree's features: order-preserving sort keys
(:func:`sort_keys`: radix or counting sort of uint64 keys) and each feature's
distinct values as ranks (:func:`feature_ranks`, memoised per fit by
:func:`sort_inputs`), shared by every tree of a fit
(:mod:`facesegment.forest._cart_kernels`)."""

import numpy as np

from .._jit import NJIT, njit
from ._predict import _cached

_LOW32 = np.uint64(0xFFFFFFFF)
#: The rank of a missing value (NaN) in :func:`feature_ranks`.
MISSING_RANK = np.uint32(0xFFFFFFFF)
_SIGN = np.uint32(0x80000000)
_ALL32 = np.uint32(0xFFFFFFFF)
_S32 = np.uint64(32)
_BYTE = np.uint64(255)
#: Nodes of at least this many present values sort their keys by radix.
RADIX_MIN = 256
#: A feature whose ranks on a node of m0 present values span at most
#: ``COUNTING_SPAN * m0 + 256`` values is sorted by counting.
COUNTING_SPAN = 8


@njit(**NJIT)
def sort_keys(keys, tmp, hist):
    """Sort uint64 ``keys`` increasingly, in place.

    Each key holds a value key in its high 32 bits and a distinct position in
    the low ones.  Short arrays (fewer than :data:`RADIX_MIN`) are sorted by
    comparison, longer ones by a stable LSD radix sort on the high 32 bits, one
    byte per pass (passes where every key has the same byte are skipped).  Both
    give the same order.

    Parameters
    ----------
    keys : uint64 (m,)
        Sorted in place.
    tmp : uint64 (>= m,)
        Scratch.
    hist : int64 (4, 256)
        Scratch (byte counts).
    """
    m = keys.shape[0]
    if m < RADIX_MIN:
        keys.sort()
        return
    hist[:] = 0
    for i in range(m):
        h = keys[i] >> _S32
        for b in range(4):
            hist[b, (h >> np.uint64(8 * b)) & _BYTE] += 1
    src = keys
    dst = tmp[:m]
    swapped = False
    for b in range(4):
        shift = np.uint64(32 + 8 * b)
        if hist[b, (src[0] >> shift) & _BYTE] == m:
            continue
        acc = 0
        for v in range(256):
            c = hist[b, v]
            hist[b, v] = acc
            acc += c
        for i in range(m):
            d = (src[i] >> shift) & _BYTE
            dst[hist[b, d]] = src[i]
            hist[b, d] += 1
        src, dst = dst, src
        swapped = not swapped
    if swapped:
        keys[:] = src


@njit(**NJIT)
def feature_ranks(X):
    """Each feature's values as ranks among its distinct values, and the table of those values.

    Each column is sorted by :func:`sort_keys` on its values' order-preserving
    bits; -0.0 and 0.0 share a rank.

    Parameters
    ----------
    X : float (n, p)
        The samples (NaN: missing).

    Returns
    -------
    R : uint32 (n, p)
        ``R[i, f]``: the rank of ``X[i, f]`` among feature f's distinct values
        (``MISSING_RANK`` for NaN).
    table : float32 (offsets[p],)
        ``table[offsets[f] + r]``: the value of rank r of feature f.
    offsets : int64 (p + 1,)
        Start of each feature's values in ``table``.
    """
    n, p = X.shape
    R = np.empty((n, p), np.uint32)
    offsets = np.zeros(p + 1, np.int64)
    col = np.empty(n, np.float32)
    bits = col.view(np.uint32)
    keys = np.empty(n, np.uint64)
    tmp = np.empty(n, np.uint64)
    hist = np.zeros((4, 256), np.int64)
    for f in range(p):
        m0 = 0
        for i in range(n):
            v = np.float32(X[i, f])
            col[i] = v
            if v != v:
                R[i, f] = MISSING_RANK
                continue
            u = bits[i]
            u = u ^ _ALL32 if u & _SIGN else u | _SIGN  # unsigned order = float order
            keys[m0] = (np.uint64(u) << _S32) | np.uint64(i)
            m0 += 1
        sort_keys(keys[:m0], tmp, hist)
        r = -1
        prev = np.float32(0.0)
        for j in range(m0):  # equal values (-0.0 and 0.0 too) are neighbours
            i = np.int64(keys[j] & _LOW32)
            if r < 0 or col[i] != prev:
                r += 1
                prev = col[i]
            R[i, f] = r
        offsets[f + 1] = offsets[f] + r + 1
    table = np.empty(offsets[p], np.float32)
    for i in range(n):
        for f in range(p):
            if R[i, f] != MISSING_RANK:
                table[offsets[f] + R[i, f]] = X[i, f]
    return R, table, offsets


def sort_inputs(X):
    """The ``(R, table, offsets)`` the CART kernels take for ``X``.

    ``X`` itself for uint8 input, else :func:`feature_ranks` of X, computed
    once per X and memoised while X lives (every tree of a fit shares it).

    Parameters
    ----------
    X : uint8 or float ndarray of shape (n, p)
        The training samples.

    Returns
    -------
    R : uint8 or uint32 ndarray of shape (n, p)
        ``X`` (uint8), or the ranks.
    table : float32 ndarray
        The values of the ranks (one zero entry for uint8).
    offsets : int64 ndarray of shape (p + 1,)
        Start of each feature's values in ``table`` (zeros for uint8).
    """
    if X.dtype == np.uint8:
        return X, np.zeros(1, np.float32), np.zeros(X.shape[1] + 1, np.int64)
    return _cached("cart-ranks", (X,), lambda: feature_ranks(X))
