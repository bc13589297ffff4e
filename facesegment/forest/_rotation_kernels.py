"""Rotation forest: Numba kernels over plain arrays (see :mod:`facesegment.forest.rotation`).

A tree's rotation is block diagonal: rotated feature ``k`` is
``z_k = sum_j w[k, j] * x[feats[k, j]]`` over the (at most M) raw features of
its subset (``feats[k, j] = -1`` pads smaller subsets), accumulated in float32
like the oblique prediction kernels, which evaluate the same sum as a dense
row ``weights[row] @ x``.
"""

import numpy as np

from .._jit import NJIT, njit


@njit(**NJIT)
def subset_covariance(X, rows, feats):
    """Covariance (float64 (k, k), divided by the number of rows) of a subset of features.

    Computed around the mean in two passes.

    Parameters
    ----------
    X : uint8 or float (n, p)
        The samples.
    rows : int64 (s,)
        The samples used, ``s >= 1``.
    feats : int64 (k,)
        The features.

    Returns
    -------
    float64 (k, k)
        The (biased) covariance matrix.
    """
    k = feats.shape[0]
    s = rows.shape[0]
    mean = np.zeros(k, dtype=np.float64)
    for i in range(s):
        row = X[rows[i]]
        for a in range(k):
            mean[a] += np.float64(row[feats[a]])
    mean /= s
    cov = np.zeros((k, k), dtype=np.float64)
    d = np.empty(k, dtype=np.float64)
    for i in range(s):
        row = X[rows[i]]
        for a in range(k):
            d[a] = np.float64(row[feats[a]]) - mean[a]
        for a in range(k):
            for b in range(a, k):
                cov[a, b] += d[a] * d[b]
    for a in range(k):
        for b in range(a, k):
            cov[a, b] /= s
            cov[b, a] = cov[a, b]
    return cov


@njit(**NJIT)
def rotate_rows(X, idx, feats, w):
    """The rotated features of the samples ``idx``: float32 (m, r).

    ``Z[i, k] = sum_j w[k, j] * float32(X[idx[i], feats[k, j]])`` in float32,
    in the order of ``j``, up to the first -1 of ``feats[k]``.

    Parameters
    ----------
    X : uint8 or float (n, p)
        The samples.
    idx : int64 (m,)
        The rows rotated.
    feats : int64 (r, M)
        Each rotated feature's raw features, -1 padded.
    w : float32 (r, M)
        Their weights.

    Returns
    -------
    float32 (m, r)
        The rotated features.
    """
    m = idx.shape[0]
    r, mm = feats.shape
    Z = np.empty((m, r), dtype=np.float32)
    for i in range(m):
        row = X[idx[i]]
        for k in range(r):
            acc = np.float32(0.0)
            for j in range(mm):
                f = feats[k, j]
                if f < 0:
                    break
                acc += w[k, j] * np.float32(row[f])
            Z[i, k] = acc
    return Z


__all__ = ["subset_covariance", "rotate_rows"]
