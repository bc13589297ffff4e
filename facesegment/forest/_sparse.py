"""Sparse oblique splits: exact split values, support selection and quantisation.

A sparse split keeps ``k`` of the ``p`` features: ``sum_k w_k * x[i_k] <= t``.
Its value is accumulated in float32 in the stored order by
:func:`sparse_value`, compiled *without* fast-math, so training (which picks the
threshold on these values, :func:`sparse_values`) and every inference kernel
(tabular, dense image) compute bit-identical values: no training sample changes
side.  With ``int8`` storage the weights are small integers (the per-split
scale is folded into the threshold) and the sums are exact integers (at most
``127 * 255 * k < 2**24`` for ``k <= 512``), so the order does not even matter.

Kernels (``@njit``, plain arrays, no validation) and the small NumPy helpers
that choose and quantise a support; references in ``tests/naive.py`` (section
"forest: sparse").
"""

import numpy as np

from .._jit import NJIT, njit

#: Largest k with exact int8 sums in float32 (127 * 255 * k < 2**24).
MAX_INT8_NONZERO = 512
#: Largest |weight| of an int8 split after scaling.
INT8_MAX = 127
#: Largest |weight| of an int16 row: ``q = 256 h + l`` with both bytes signed
#: (the integer kernels dot the two bytes separately).
INT16_MAX = 32639
#: Integer storages and their largest magnitude.
INT_MAX = {"int8": INT8_MAX, "int16": INT16_MAX}
#: Every partial sum of an int8 split over uint8 values stays at most this
#: (``255 * sum |q_k|``), so float32 holds it exactly whatever the order.
EXACT_SUM = 2 ** 24 - 1
#: Most features of a dense int8 or int16 row (the scale keeps ``255 * sum |q|``
#: within EXACT_SUM even with every weight rounded up by 1/2).
MAX_INT8_DENSE = 65536


@njit(**NJIT)
def sparse_value(index, weight, start, stop, x):
    """``sum_{k=start}^{stop-1} weight[k] * float32(x[index[k]])`` in float32, in order.

    No fast-math: every caller gets the same bits.

    Parameters
    ----------
    index : int (nnz,)
        Feature of each entry.
    weight : float32 (nnz,)
        The kernels' copy of the stored weights.
    start, stop : int
        The row's entries, ``start..stop-1``.
    x : uint8 or float32 (p,)
        One sample.

    Returns
    -------
    float32
        The split value.
    """
    acc = np.float32(0.0)
    for k in range(start, stop):
        acc += weight[k] * np.float32(x[index[k]])
    return acc


@njit(**NJIT)
def sparse_values(X, idx, index, weight):
    """float32 (m,) values of one sparse row (``index``, ``weight``) for rows ``X[idx]``.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    idx : int64 (m,)
        The rows evaluated.
    index : int (k,)
        The row's features.
    weight : float32 (k,)
        The row's weights.

    Returns
    -------
    float32 (m,)
        :func:`sparse_value` of each row of ``idx``.
    """
    out = np.empty(idx.shape[0], dtype=np.float32)
    k = index.shape[0]
    for r in range(idx.shape[0]):
        out[r] = sparse_value(index, weight, 0, k, X[idx[r]])
    return out


@njit(**NJIT)
def keep_top_k(w, p, k, scratch):
    """Zero all but the ``k`` largest ``|w[j]|`` of ``w[:p]`` in place (hard thresholding).

    Ties at the k-th magnitude keep the lowest indices, so exactly ``min(k,
    nnz)`` entries stay.  ``w[p:]`` (the offset) is untouched.

    Parameters
    ----------
    w : float32 (>= p,)
        The weights; modified in place (nothing changes when ``k >= p``).
    p : int
        Number of feature weights.
    k : int
        Number of weights kept.
    scratch : float32 (p,)
        Work space; overwritten.
    """
    if k >= p:
        return
    for j in range(p):
        scratch[j] = abs(w[j])
    cut = np.partition(scratch, p - k)[p - k]  # the k-th largest magnitude
    above = 0
    for j in range(p):
        if abs(w[j]) > cut:
            above += 1
    room = k - above  # entries equal to the cut that may stay
    for j in range(p):
        a = abs(w[j])
        if a < cut:
            w[j] = 0.0
        elif a == cut:
            if room > 0 and a > 0:
                room -= 1
            else:
                w[j] = 0.0


def top_k_support(u, k, scale=None):
    """Sorted int64 indices of the ``k`` largest ``|u_j| * scale_j`` (non-zero only).

    Ties keep the lower index.

    Parameters
    ----------
    u : array-like of shape (p,)
        The weights.
    k : int
        Largest support size.
    scale : array-like of shape (p,) or None, default=None
        Weighs raw weights back to the normalised features the split was
        optimised on (the feature standard deviations); None: 1.

    Returns
    -------
    int64 ndarray of shape (min(k, nnz),)
        The kept features, increasing.
    """
    mag = np.abs(np.asarray(u, np.float64))
    if scale is not None:
        mag = mag * np.asarray(scale, np.float64)
    nz = np.flatnonzero(mag > 0)
    if nz.shape[0] > k:
        order = np.lexsort((nz, -mag[nz]))  # magnitude descending, then index
        nz = nz[order[:k]]
    return np.sort(nz).astype(np.int64)


def quantise(weights, dtype):
    """Stored weights of a sparse row and the float32 values the kernels use.

    ``float32``: as they are; ``float16``: rounded (overflow is an error the
    caller avoids by scaling: the CO2 weights are small); ``int8``: scaled so
    the largest magnitude is :data:`INT8_MAX` and rounded (the scale, returned,
    divides the threshold), unless ``255 * sum |q|`` would then pass
    :data:`EXACT_SUM` (long dense rows): then the scale is the smallest that
    keeps it below, so every sum over uint8 values is exact in float32;
    ``int16`` (dense rows): the same with :data:`INT16_MAX`, so the sum bound
    sets the scale of nearly every row (about 10,000 times finer than int8's
    and 1.5 times finer than float16's on pooled CO2 rows, whose few large
    weights leave most others below 1/254 of the largest).  Entries that round
    to zero are kept (the caller drops them).

    Parameters
    ----------
    weights : array-like of shape (k,)
        The row's weights (converted to float32).
    dtype : {"float32", "float16", "int8", "int16"}
        The storage type.

    Returns
    -------
    stored : ndarray of shape (k,)
        The weights as stored, of ``dtype``.
    kernel : float32 ndarray of shape (k,)
        ``stored`` as float32, the values the kernels use.
    scale : float
        1.0, or for integer storage the factor that multiplies ``stored`` back
        to the weights (1.0 for an all-zero row).

    Raises
    ------
    ValueError
        When ``dtype`` is not one of the four.
    """
    w = np.asarray(weights, np.float32)
    if dtype == "float32":
        return w.copy(), w.copy(), 1.0
    if dtype == "float16":
        s = w.astype(np.float16)
        return s, s.astype(np.float32), 1.0
    if dtype in INT_MAX:
        qmax = INT_MAX[dtype]
        a = np.abs(w.astype(np.float64))
        top = float(a.max()) if w.size else 0.0
        if top == 0:
            return np.zeros(w.shape, dtype), np.zeros(w.shape, np.float32), 1.0
        scale = max(top / qmax, 255 * float(a.sum()) / (EXACT_SUM - 127.5 * w.size))
        while True:
            q = np.clip(np.rint(w / scale), -qmax, qmax).astype(dtype)
            if 255 * int(np.abs(q.astype(np.int64)).sum()) <= EXACT_SUM:
                return q, q.astype(np.float32), scale
            scale *= 1.0 + 1e-6  # pragma: no cover - the bound above already holds
    raise ValueError(f"weight dtype {dtype!r} is not one of float32, float16, int8, int16")


__all__ = ["MAX_INT8_NONZERO", "MAX_INT8_DENSE", "EXACT_SUM", "INT8_MAX", "INT16_MAX",
           "INT_MAX", "sparse_value", "sparse_values", "keep_top_k",
           "top_k_support", "quantise"]
