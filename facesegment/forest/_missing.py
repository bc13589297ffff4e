"""Missing values (NaN) in forests: traversal.

A fitted forest stores, per node, the side missing values take:
``ForestArrays.missing_left`` (int8, 1 = left, 0 = right; learned where the
node's training samples missed the split's value, otherwise the child with
more training samples, as scikit-learn does).  A forest without that array
(``missing_left`` None) sends a missing value to the larger child
everywhere (:func:`default_missing_left`).

A split's value is *missing* when it is NaN, computed as training and the
other kernels compute it (:func:`split_value`): ``x[f]`` for an axis split,
``x[a] - x[b]`` for a two-probe split (missing when either is), ``w @ x`` for
a dense oblique row (missing when any feature is: the row reads them all) and
the sparse rows' sums (missing when a feature of the row is).  Present values
follow ``value <= threshold`` as everywhere; the fast kernels of
:mod:`facesegment.forest._predict` and of dense inference are used whenever
the input holds no NaN (images never do).
"""

import numpy as np
from numba import prange

from .._jit import NJIT, PARALLEL, njit
from ._arrays import complete
from ._predict import axis_only, kernel_sparse, kernel_weights, oblique_value
from ._sparse import sparse_value


def default_missing_left(fa):
    """The side missing values take at each node when none was learned.

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    int8 ndarray of shape (n_nodes,)
        1 where the left child holds at least as many training samples as the
        right one, else 0 (0 at leaves).
    """
    out = np.zeros(fa.n_nodes, dtype=np.int8)
    inner = np.flatnonzero(fa.left >= 0)
    out[inner] = fa.n_samples[fa.left[inner]] >= fa.n_samples[fa.right[inner]]
    return out


def missing_directions(fa):
    """The forest's ``missing_left``, or :func:`default_missing_left` without one.

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    int8 ndarray of shape (n_nodes,)
        1 where missing values go left, 0 where they go right.
    """
    return fa.missing_left if fa.missing_left is not None else default_missing_left(fa)


def has_nan(X):
    """Whether the float matrix ``X`` holds a NaN (False for integer input).

    Parameters
    ----------
    X : ndarray
        The samples.

    Returns
    -------
    bool
        True when ``X`` is floating point and holds a NaN.
    """
    return X.dtype.kind == "f" and bool(np.isnan(X).any())


@njit(**PARALLEL)
def apply_missing_kernel(X, roots, left, right, feature, threshold, missing_left, depth,
                         max_depth, out):
    """Node reached by each sample in each tree of an axis-aligned forest (NaN supported).

    A missing value follows ``missing_left``.

    Parameters
    ----------
    X : float32 (n, p)
        The samples; NaN marks a missing value.
    roots : int32 (n_trees,)
        Each tree's root.
    left, right, feature : int32 (n_nodes,)
        The forest's children and split features.
    threshold : float32 (n_nodes,)
        ``x[feature] <= threshold`` goes left.
    missing_left : int8 (n_nodes,)
        1: a missing value goes left, 0: right.
    depth : int32 (n_nodes,)
        Each node's depth.
    max_depth : int
        Stop at nodes of this depth (-1: no limit).
    out : int32 (n, n_trees)
        Written in place: the node reached.
    """
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


@njit(**NJIT)
def split_value(x, f, f2, ob, sp, weights, sp_ptr, sp_index, sp_w):
    """The float32 value a node's split compares with its threshold, for one row
    ``x``: the sparse row ``sp`` (>= 0), the dense row ``ob`` (>= 0), ``x[f] -
    x[f2]`` (``f2 >= 0``) or ``x[f]``; NaN when a value it reads is missing.

    Parameters
    ----------
    x : uint8 or float32 (p,)
    f, f2, ob, sp : int
        The node's ``feature``, ``feature2``, ``oblique`` and ``sparse`` entries.
    weights : float32 (n_oblique, p)
        Dense rows (:func:`facesegment.forest._predict.kernel_weights`).
    sp_ptr, sp_index, sp_w : the sparse rows (:func:`~facesegment.forest._predict.kernel_sparse`)
    """
    if sp >= 0:
        return sparse_value(sp_index, sp_w, sp_ptr[sp], sp_ptr[sp + 1], x)
    if ob >= 0:
        return oblique_value(weights[ob], x)
    if f2 >= 0:
        return np.float32(x[f]) - np.float32(x[f2])
    return np.float32(x[f])


@njit(**PARALLEL)
def apply_missing_any_kernel(X, roots, left, right, feature, feature2, oblique, sparse,
                             threshold, missing_left, depth, weights, sp_ptr, sp_index, sp_w,
                             max_depth, out):
    """:func:`apply_missing_kernel` for forests of any splits (:func:`split_value`).

    Parameters
    ----------
    X : float32 (n, p), may hold NaN
    roots, left, right, feature, feature2, oblique, sparse, threshold, depth :
        The forest's node arrays (``sparse``: -1 where a node has no sparse row).
    missing_left : int8 (n_nodes,)
    weights, sp_ptr, sp_index, sp_w : the dense and sparse oblique rows
    max_depth : int, -1 for none
    out : int32 (n, n_trees), the nodes reached
    """
    for i in prange(X.shape[0]):
        x = X[i]
        for t in range(roots.shape[0]):
            node = roots[t]
            while left[node] >= 0 and (max_depth < 0 or depth[node] < max_depth):
                v = split_value(x, feature[node], feature2[node], oblique[node], sparse[node],
                                weights, sp_ptr, sp_index, sp_w)
                if v != v:
                    go = missing_left[node] != 0
                else:
                    go = v <= threshold[node]
                node = left[node] if go else right[node]
            out[i, t] = node


def apply_missing(fa, X, max_depth=-1):
    """The node reached in each tree by rows that may hold NaN.

    Uses :func:`apply_missing_kernel` for axis-aligned forests, else
    :func:`apply_missing_any_kernel`.

    Parameters
    ----------
    fa : ForestArrays
        The forest.
    X : float32 ndarray of shape (n_samples, n_features)
        The samples; NaN marks a missing value.
    max_depth : int, default=-1
        Stop at nodes of this depth (-1: no limit).

    Returns
    -------
    int32 ndarray of shape (n_samples, n_trees)
        The node reached in each tree.
    """
    out = np.empty((X.shape[0], fa.n_trees), dtype=np.int32)
    if axis_only(fa):
        apply_missing_kernel(X, fa.roots, fa.left, fa.right, fa.feature, fa.threshold,
                             missing_directions(fa), fa.depth, max_depth, out)
        return out
    fc = complete(fa)
    apply_missing_any_kernel(X, fc.roots, fc.left, fc.right, fc.feature, fc.feature2,
                             fc.oblique, fc.sparse, fc.threshold, missing_directions(fc),
                             fc.depth, kernel_weights(fc), *kernel_sparse(fc), max_depth, out)
    return out


def proba_of_leaves(fa, leaves):
    """Mean over the trees of the leaves' class distributions.

    Parameters
    ----------
    fa : ForestArrays
        The forest.
    leaves : int ndarray of shape (n_samples, n_trees)
        The node reached by each sample in each tree.

    Returns
    -------
    float64 ndarray of shape (n_samples, n_classes)
        The mean of ``fa.value`` over each row's nodes (zeros when there is no
        tree).
    """
    out = np.zeros((leaves.shape[0], fa.n_classes), dtype=np.float64)
    for t in range(leaves.shape[1]):
        out += fa.value[leaves[:, t]]
    return out / max(leaves.shape[1], 1)
