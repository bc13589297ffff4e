"""Missing values (NaN) in axis-aligned forests: partitioning and traversal.

A fitted forest stores, per node, the side missing values take:
``ForestArrays.missing_left`` (int8, 1 = left, 0 = right; learned where the
node's training samples missed the split's feature, otherwise the child with
more training samples, as scikit-learn does).  A forest without that array
(a model written before it existed) sends a missing value to the larger
child everywhere (:func:`default_missing_left`).  Present values follow ``x[f] <= threshold``
as everywhere; the fast kernels of :mod:`facesegment.forest._predict` and of
dense inference are used whenever the input holds no NaN (images never do).
"""

import numpy as np
from numba import prange

from .._jit import PARALLEL, njit


def default_missing_left(fa):
    """int8 (n_nodes,): 1 where the left child holds at least as many training
    samples as the right one (the side missing values take without a learned one)."""
    out = np.zeros(fa.n_nodes, dtype=np.int8)
    inner = np.flatnonzero(fa.left >= 0)
    out[inner] = fa.n_samples[fa.left[inner]] >= fa.n_samples[fa.right[inner]]
    return out


def missing_directions(fa):
    """The forest's ``missing_left``, or :func:`default_missing_left` without one."""
    return fa.missing_left if fa.missing_left is not None else default_missing_left(fa)


def has_nan(X):
    """Whether the float matrix ``X`` holds a NaN (False for integer input)."""
    return X.dtype.kind == "f" and bool(np.isnan(X).any())


@njit(**PARALLEL)
def apply_missing_kernel(X, roots, left, right, feature, threshold, missing_left, depth,
                         max_depth, out):
    """Node reached by each sample in each tree of an axis-aligned forest, NaN values
    following ``missing_left``: out int32 (n, n_trees)."""
    for i in prange(X.shape[0]):
        for t in range(roots.shape[0]):
            node = roots[t]
            while left[node] >= 0 and (max_depth < 0 or depth[node] < max_depth):
                v = np.float32(X[i, feature[node]])
                if v != v:
                    go = missing_left[node] != 0
                else:
                    go = v <= threshold[node]
                node = left[node] if go else right[node]
            out[i, t] = node


def check_axis_only(fa):
    """Raise ``ValueError`` unless every split of ``fa`` is axis-aligned (the only
    splits that read missing values)."""
    inner = fa.left >= 0
    other = inner & ((fa.feature2 >= 0) | (fa.oblique >= 0) | (fa.feature < 0)
                     | (fa.sparse >= 0 if fa.sparse is not None else False))
    if other.any():
        raise ValueError("X holds NaN, but this forest has two-probe or oblique splits, "
                         "which cannot read missing values; impute them first")


def apply_missing(fa, X, max_depth=-1):
    """:func:`apply_missing_kernel` on a forest (int32 (n, n_trees))."""
    check_axis_only(fa)
    out = np.empty((X.shape[0], fa.n_trees), dtype=np.int32)
    apply_missing_kernel(X, fa.roots, fa.left, fa.right, fa.feature, fa.threshold,
                         missing_directions(fa), fa.depth, max_depth, out)
    return out


def proba_of_leaves(fa, leaves):
    """Mean over the trees of the leaves' class distributions, float64 (n, n_classes)."""
    out = np.zeros((leaves.shape[0], fa.n_classes), dtype=np.float64)
    for t in range(leaves.shape[1]):
        out += fa.value[leaves[:, t]]
    return out / max(leaves.shape[1], 1)
