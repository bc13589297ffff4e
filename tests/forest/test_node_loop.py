"""The kernel-level node loop (facesegment/forest/_node_loop.py): the node table,
the stable partition with the side of missing values, the children's numbering."""

import numpy as np

from facesegment.forest._node_loop import node_rows, split_node, tree_arrays, tree_links


def _split(tree, X, node, f, t, ml, weights):
    nodes, count, ids, buf, feature, threshold = tree
    return split_node(X, np.arange(X.shape[0]), weights, nodes, count, ids, buf, feature,
                      threshold, node, f, np.float32(t), ml)


def test_split_node_partitions_stably_and_numbers_the_children():
    X = np.array([[3, 0], [1, 0], [np.nan, 0], [2, 0], [5, 1], [0, 1]], np.float32)
    tree = tree_arrays(6)
    nodes, count, ids, _, feature, threshold = tree
    assert count[0] == 1 and node_rows(nodes, 0, -1) == (0, 6, True)
    weights = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    nl, wl, child = _split(tree, X, 0, 0, 2.5, 1, weights)  # NaN left
    assert (nl, wl, child) == (4, 2.0 + 4.0 + 8.0 + 32.0, 1)
    assert ids.tolist() == [1, 2, 3, 5, 0, 4]
    assert count[0] == 3 and feature[0] == 0 and threshold[0] == np.float32(2.5)
    assert node_rows(nodes, 1, 1) == (0, 4, False)  # depth 1 = max_depth
    assert node_rows(nodes, 2, 2) == (4, 6, True)
    nl, wl, child = _split(tree, X, 2, 1, 0.5, 1, np.empty(0))  # rows 0, 4 of node 2
    assert (nl, wl, child) == (1, 0.0, 3)
    assert ids.tolist() == [1, 2, 3, 5, 0, 4]
    left, right, depth = tree_links(nodes, count[0])
    assert left.tolist() == [1, -1, 3, -1, -1]
    assert right.tolist() == [2, -1, 4, -1, -1]
    assert depth.tolist() == [0, 1, 1, 2, 2]
    assert left.dtype == right.dtype == depth.dtype == np.int32


def test_missing_values_go_right_unless_learned_left():
    X = np.array([[np.nan], [1.0], [3.0]], np.float32)
    tree = tree_arrays(3)
    nl, _, child = _split(tree, X, 0, 0, 2.0, -1, np.empty(0))
    assert (nl, child) == (1, 1) and tree[2].tolist() == [1, 0, 2]


def test_a_cut_that_sends_every_row_one_way_leaves_a_leaf():
    X = np.array([[1.0], [2.0]], np.float32)
    tree = tree_arrays(2)
    nl, _, child = _split(tree, X, 0, 0, 5.0, -1, np.empty(0))
    assert (nl, child) == (2, -1)
    assert tree[1][0] == 1 and tree[4][0] == -1
    left, right, depth = tree_links(tree[0], 1)
    assert left.tolist() == [-1] and right.tolist() == [-1]
