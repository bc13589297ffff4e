"""Evaluating splits and traversing flat forests (Numba kernels).

Split values are computed exactly as in training (see ``_grow``): axis
``float32(x[f])``, two-probe ``float32(x[a]) - float32(x[b])`` and oblique
``sum_j w[j] * float32(x[j])`` accumulated in float32
(:func:`oblique_value`), compared with ``<= threshold`` (float32).
"""

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract", "nsz", "arcp"})
def oblique_value(w, X, row):
    """``w @ X[row]`` accumulated in float32 (w float32 (p,)), vectorised.

    The summation order is left to the compiler (as in
    :mod:`facesegment.forest.co2`), so a sample within float32 rounding of a
    threshold may fall on either side in another implementation.
    """
    acc = np.float32(0.0)
    for j in range(w.shape[0]):
        acc += w[j] * np.float32(X[row, j])
    return acc


@njit(cache=True, nogil=True)
def oblique_values(w, X, idx):
    """float32 (m,) values ``w @ X[idx[i]]`` (see :func:`oblique_value`)."""
    out = np.empty(idx.shape[0], dtype=np.float32)
    for i in range(idx.shape[0]):
        out[i] = oblique_value(w, X, idx[i])
    return out


@njit(cache=True, nogil=True)
def goes_left(X, row, f, f2, ob, thr, weights):
    """Whether sample ``row`` goes left at a node (feature, feature2, oblique, threshold)."""
    if ob >= 0:
        v = oblique_value(weights[ob], X, row)
    elif f2 >= 0:
        v = np.float32(X[row, f]) - np.float32(X[row, f2])
    else:
        v = np.float32(X[row, f])
    return v <= thr


@njit(cache=True, nogil=True)
def partition(X, idx, buf, f, f2, ob, thr, weights):
    """Stable in-place partition of ``idx`` (int64 (m,)): left samples first.

    ``buf`` is int64 scratch of at least m entries.  Returns the number going left.
    """
    m = idx.shape[0]
    nl = 0
    nr = 0
    for i in range(m):
        row = idx[i]
        if goes_left(X, row, f, f2, ob, thr, weights):
            idx[nl] = row
            nl += 1
        else:
            buf[nr] = row
            nr += 1
    for i in range(nr):
        idx[nl + i] = buf[i]
    return nl


@njit(cache=True, nogil=True)
def _proba_row(X, i, roots, left, right, feature, feature2, oblique, threshold, value,
               depth, weights, max_depth, n_trees, out):
    n_classes = value.shape[1]
    for c in range(n_classes):
        out[i, c] = 0.0
    for t in range(n_trees):
        node = roots[t]
        while left[node] >= 0 and (max_depth < 0 or depth[node] < max_depth):
            if goes_left(X, i, feature[node], feature2[node], oblique[node],
                         threshold[node], weights):
                node = left[node]
            else:
                node = right[node]
        for c in range(n_classes):
            out[i, c] += value[node, c]
    for c in range(n_classes):
        out[i, c] = out[i, c] / n_trees


@njit(cache=True, nogil=True, parallel=True)
def predict_proba_kernel(X, roots, left, right, feature, feature2, oblique, threshold,
                         value, depth, weights, max_depth, n_trees, out):
    """Average the class distributions reached in the first ``n_trees`` trees.

    Samples are processed in parallel (prange); each sample visits all trees
    in turn while its row is in cache.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
    roots .. weights : the ForestArrays fields (weights float32)
    max_depth : int
        Stop at nodes of this depth (-1: no limit).
    n_trees : int
        Number of trees used (the first ones).
    out : float64 (n, n_classes), written in place
    """
    for i in prange(X.shape[0]):
        _proba_row(X, i, roots, left, right, feature, feature2, oblique, threshold, value,
                   depth, weights, max_depth, n_trees, out)


@njit(cache=True, nogil=True)
def predict_proba_serial(X, roots, left, right, feature, feature2, oblique, threshold,
                         value, depth, weights, max_depth, n_trees, out):
    """:func:`predict_proba_kernel` on one thread (small inputs: no thread start-up)."""
    for i in range(X.shape[0]):
        _proba_row(X, i, roots, left, right, feature, feature2, oblique, threshold, value,
                   depth, weights, max_depth, n_trees, out)


@njit(cache=True, nogil=True, parallel=True)
def apply_kernel(X, roots, left, right, feature, feature2, oblique, threshold,
                 depth, weights, max_depth, out):
    """Node index reached by each sample in each tree: out int32 (n, n_trees)."""
    n = X.shape[0]
    for i in prange(n):
        for t in range(roots.shape[0]):
            node = roots[t]
            while left[node] >= 0 and (max_depth < 0 or depth[node] < max_depth):
                if goes_left(X, i, feature[node], feature2[node], oblique[node],
                             threshold[node], weights):
                    node = left[node]
                else:
                    node = right[node]
            out[i, t] = node
