"""The flat-array representation shared by every forest (the contract).

A forest is a handful of contiguous arrays, never Python objects per node.
Nodes of all trees are concatenated; child indices are absolute indices into
the same arrays.  Every split, whatever its family, is evaluated on the *raw*
features (uint8 window values, or the user's numeric matrix) as

    value(x) <= threshold  ->  go left, else go right

where ``value`` depends on the node:

* axis-aligned  (``feature >= 0, feature2 < 0, oblique < 0``):  ``x[feature]``
* two-probe     (``feature >= 0, feature2 >= 0``):               ``x[feature] - x[feature2]``
* oblique / CO2 (``oblique >= 0``):                             ``weights[oblique] @ x``
  (the feature normalisation used in training is folded into the weights
  and the threshold when the split is stored, so inference reads raw values)
* sparse oblique (``sparse >= 0``):  ``sum_k w_k * x[i_k]`` over the row's entries
  ``k in sparse_ptr[r]..sparse_ptr[r + 1] - 1`` (``i_k = sparse_index[k]``,
  ``w_k = sparse_weight[k]``), accumulated in float32 in that order, exactly
  (:func:`facesegment.forest._sparse.sparse_value`): training chose the
  threshold on these very values, so no training sample changes side.
  ``int8`` weights are integers (the per-split scale is folded into the
  threshold), so their sums are exact whatever the order.

Dense and sparse oblique nodes may coexist in one forest.

Leaves have ``left == right == -1``.  ``value`` holds the normalised class
distribution of *every* node (internal nodes too), and ``depth`` the node's
depth (root 0), so a forest can be evaluated truncated at any maximum depth
without retraining (trees are grown breadth first, so truncating a deep tree at
depth d gives exactly the tree grown with ``max_depth=d`` from the same seed).
"""

from typing import NamedTuple

import numpy as np

FOREST_ARRAY_NAMES = (
    "roots", "left", "right", "feature", "feature2", "oblique", "threshold",
    "value", "depth", "n_samples", "weights",
)
#: Arrays of sparse oblique splits (optional: a forest without them, or a
#: model file written before they existed, has none; :func:`complete` fills them).
SPARSE_ARRAY_NAMES = ("sparse", "sparse_ptr", "sparse_index", "sparse_weight")
#: Storage types of sparse weights.
SPARSE_DTYPES = ("float32", "float16", "int8")
#: The side of missing values (fitted forests have it; a model file written before
#: it existed has none: :func:`facesegment.forest._missing.missing_directions`).
MISSING_ARRAY_NAME = "missing_left"


class ForestArrays(NamedTuple):
    """Flat arrays of a fitted forest.

    Attributes
    ----------
    roots : int32 (n_trees,)          node index of each tree's root
    left, right : int32 (n_nodes,)    children (-1 at leaves)
    feature : int32 (n_nodes,)        first probe (-1 for leaves and oblique nodes)
    feature2 : int32 (n_nodes,)       second probe of two-probe nodes, else -1
    oblique : int32 (n_nodes,)        row of ``weights`` for oblique nodes, else -1
    threshold : float32 (n_nodes,)    go left iff value(x) <= threshold
    value : float32 (n_nodes, n_classes)  class distribution at the node (rows sum to 1)
    depth : int32 (n_nodes,)          depth of the node (root 0)
    n_samples : int32 (n_nodes,)      training samples that reached the node
    weights : float32 or float16 (n_oblique, n_features)  oblique weights on raw features
    sparse : int32 (n_nodes,)         row of the sparse table for sparse oblique nodes, else -1
    sparse_ptr : int64 (n_sparse + 1,)  entries of sparse row r: ptr[r] .. ptr[r + 1] - 1
    sparse_index : uint16 or int32 (nnz,)  feature of each entry
    sparse_weight : float32, float16 or int8 (nnz,)  weight of each entry
    missing_left : int8 (n_nodes,) or None   1: a missing (NaN) value goes left, 0: right

    The four sparse arrays default to None; :func:`complete` gives a forest
    without sparse nodes its (empty) arrays.  ``missing_left`` holds the
    learned side where a node's training samples missed its feature, else the
    child with more training samples (scikit-learn's rule); None means the
    latter everywhere.
    """

    roots: np.ndarray
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    feature2: np.ndarray
    oblique: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    depth: np.ndarray
    n_samples: np.ndarray
    weights: np.ndarray
    sparse: np.ndarray = None
    sparse_ptr: np.ndarray = None
    sparse_index: np.ndarray = None
    sparse_weight: np.ndarray = None
    missing_left: np.ndarray = None

    @property
    def n_trees(self):
        return int(self.roots.shape[0])

    @property
    def n_nodes(self):
        return int(self.left.shape[0])

    @property
    def n_classes(self):
        return int(self.value.shape[1])

    @property
    def n_features(self):
        return int(self.weights.shape[1])


def complete(fa):
    """``fa`` with its sparse arrays filled in (empty ones when it has none).

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    ForestArrays
        ``fa`` itself when it has sparse arrays; else a copy whose ``sparse`` is
        int32 -1 on every node, ``sparse_ptr`` int64 ``[0]``, and ``sparse_index``
        (int32) and ``sparse_weight`` (float32) empty.
    """
    if fa.sparse is not None:
        return fa
    return fa._replace(sparse=np.full(fa.left.shape[0], -1, np.int32),
                       sparse_ptr=np.zeros(1, np.int64),
                       sparse_index=np.zeros(0, np.int32),
                       sparse_weight=np.zeros(0, np.float32))


def n_sparse(fa):
    """Number of sparse oblique rows of ``fa`` (0 when it has no sparse arrays).

    Parameters
    ----------
    fa : ForestArrays
        The forest.

    Returns
    -------
    int
        ``len(fa.sparse_ptr) - 1``, or 0 when ``fa.sparse_ptr`` is None.
    """
    return 0 if fa.sparse_ptr is None else int(fa.sparse_ptr.shape[0]) - 1
