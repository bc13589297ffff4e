"""A stable argsort of float32 values by radix (Numba kernels).

The split searches on float features (rotation forests' rotated values, UCI
tables, two-probe differences of float windows, CO2's projections) sort each
candidate's values at every node.  ``np.argsort(kind="mergesort")`` costs
O(m log m) comparisons with unpredictable branches; this LSD radix sort over
the values' 32 bits (8-bit digits, a digit every value shares skipped) costs a
few passes over the values and gives the same permutation: both are stable,
and the keys order the values as ``<`` does (-0.0 and +0.0 are one key, NaN
last, as NumPy sorts them).  Small arrays keep the merge sort (the 256
counters per digit cost more than they save).
"""

import numpy as np

from .._jit import NJIT, njit

#: Arrays shorter than this are sorted by ``np.argsort(kind="mergesort")``.
RADIX_MIN = 128


@njit(**NJIT)
def float_keys(vals, m, keys):
    """uint32 keys of ``vals[:m]`` that order as the values do.

    Each value is converted to float32 (exact for uint8 and float32 values); its
    key is the float's bits with the sign bit flipped (positive) or every bit
    flipped (negative); -0.0 is keyed as +0.0 and every NaN after every number.

    Parameters
    ----------
    vals : float32 or uint8 (>= m,)
        The values.
    m : int
        Number of values keyed.
    keys : uint32 (>= m,)
        ``keys[:m]`` written in place.
    """
    f32 = np.empty(1, dtype=np.float32)
    bits = f32.view(np.uint32)
    for i in range(m):
        v = np.float32(vals[i])
        f32[0] = v
        if v != v:
            keys[i] = np.uint32(0xFFFFFFFF)
        elif v == 0:
            keys[i] = np.uint32(0x80000000)
        else:
            u = bits[0]
            keys[i] = ~u if u & np.uint32(0x80000000) else u | np.uint32(0x80000000)


@njit(**NJIT)
def exclusive_prefix(cnt, n):
    """``cnt[:n]`` replaced by its exclusive prefix sums (each bucket's first slot).

    Parameters
    ----------
    cnt : int (>= n,)
        Counts per bucket; overwritten in place.
    n : int
        Number of buckets.
    """
    pos = 0
    for b in range(n):
        c = cnt[b]
        cnt[b] = pos
        pos += c


@njit(**NJIT)
def radix_argsort(keys, m, order, tmp, kt, cnt):
    """Stable argsort of ``keys[:m]`` (uint32) into ``order[:m]`` (int64).

    LSD over 8-bit digits; a digit that every key shares is skipped.

    Parameters
    ----------
    keys : uint32 (>= m,)
        The keys; overwritten (scratch).
    m : int
        Number of keys, ``m >= 1``.
    order : int64 (>= m,)
        ``order[:m]`` written in place: the stable sorting permutation.
    tmp : int64 (>= m,)
        Scratch.
    kt : uint32 (>= m,)
        Scratch.
    cnt : int64 (256,)
        Digit counters; overwritten.
    """
    for i in range(m):
        order[i] = i
    src_k, dst_k = keys, kt
    src_o, dst_o = order, tmp
    swapped = False
    for d in range(4):
        sh = np.uint32(8 * d)
        cnt[:] = 0
        for i in range(m):
            cnt[(src_k[i] >> sh) & np.uint32(255)] += 1
        if cnt[(src_k[0] >> sh) & np.uint32(255)] == m:
            continue
        exclusive_prefix(cnt, 256)
        for i in range(m):
            key = src_k[i]
            b = (key >> sh) & np.uint32(255)
            p = cnt[b]
            dst_k[p] = key
            dst_o[p] = src_o[i]
            cnt[b] = p + 1
        src_k, dst_k = dst_k, src_k
        src_o, dst_o = dst_o, src_o
        swapped = not swapped
    if swapped:
        for i in range(m):
            order[i] = src_o[i]


@njit(**NJIT)
def sort_scratch(m):
    """The scratch arrays of :func:`argsort_f32` for up to ``m`` values.

    Parameters
    ----------
    m : int
        Largest number of values sorted.

    Returns
    -------
    tuple
        ``(order, tmp, keys, kt, cnt)``: int64, int64, uint32 and uint32 arrays
        of ``max(m, 1)`` entries, and int64 (256,), uninitialised.
    """
    n = max(m, 1)
    return (np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64),
            np.empty(n, dtype=np.uint32), np.empty(n, dtype=np.uint32),
            np.empty(256, dtype=np.int64))


@njit(**NJIT)
def argsort_f32(vals, m, order, tmp, keys, kt, cnt):
    """``order[:m]``: the permutation ``np.argsort(vals[:m], kind="mergesort")`` gives.

    Arrays shorter than :data:`RADIX_MIN` are sorted by NumPy's merge sort;
    longer ones by :func:`radix_argsort` of :func:`float_keys`.

    Parameters
    ----------
    vals : float32 or uint8 (>= m,)
        The values (not modified).
    m : int
        Number of values sorted.
    order : int64 (>= m,)
        ``order[:m]`` written in place.
    tmp, keys, kt, cnt : ndarray
        Scratch from :func:`sort_scratch` (int64, uint32, uint32, int64 (256,));
        overwritten.
    """
    if m < RADIX_MIN:
        order[:m] = np.argsort(vals[:m], kind="mergesort")
        return
    float_keys(vals, m, keys)
    radix_argsort(keys, m, order, tmp, kt, cnt)


@njit(**NJIT)
def stable_argsort(vals):
    """``np.argsort(vals, kind="mergesort")`` of float32 or uint8 ``vals`` (int64).

    Parameters
    ----------
    vals : float32 or uint8 (m,)
        The values.

    Returns
    -------
    int64 (m,)
        The stable sorting permutation.
    """
    m = vals.shape[0]
    order, tmp, keys, kt, cnt = sort_scratch(m)
    argsort_f32(vals, m, order, tmp, keys, kt, cnt)
    return order[:m]
