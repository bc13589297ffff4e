"""The whole-tree CART kernel (facesegment/forest/_cart_kernels.py, its ranks in
_ranks.py) against
tests/naive.py: every split of a grown tree is a naive best split of the rows
that reach it, leaves are pure or cannot split, and the key sort is exact."""

import numpy as np
import pytest

from facesegment.forest import AxisAlignedForest
from facesegment.forest._cart_kernels import cart_nodes
from facesegment.forest._ranks import MISSING_RANK, RADIX_MIN, feature_ranks, sort_inputs, sort_keys
from tests import naive


def _rows_per_node(X, rows, tree):
    """Local row ids reaching each node (NaN by ``missing_left``)."""
    left, right, feature, threshold, _, _, _, miss_left = tree
    reach = [[] for _ in range(left.shape[0])]
    for lid, r in enumerate(rows):
        node = 0
        reach[0].append(lid)
        while left[node] >= 0:
            v = float(X[r, feature[node]])
            go = miss_left[node] == 1 if np.isnan(v) else v <= threshold[node]
            node = left[node] if go else right[node]
            reach[node].append(lid)
    return reach


def _data(rng, n, p, dtype, missing):
    if dtype == np.uint8:
        X = rng.integers(0, 6, size=(n, p)).astype(np.uint8)
    else:
        X = np.round(rng.normal(size=(n, p)), 1).astype(np.float32)
        X[:, 0] = -X[:, 0]  # negative values and -0.0 in the keys
        if missing:
            X[rng.random(X.shape) < missing] = np.nan
    X[:, 2] = X[:, 2] > X[:, 2].min()  # a binary column: constant in many nodes
    y = (rng.integers(0, 3, size=n) + (X[:, 1] > 2)).astype(np.int32) % 3
    return X, y


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
@pytest.mark.parametrize("dtype,missing", [(np.uint8, 0.0), (np.float32, 0.0),
                                           (np.float32, 0.2)])
@pytest.mark.parametrize("min_leaf", [1, 3])
def test_every_split_of_a_tree_is_a_naive_best_split(criterion, dtype, missing, min_leaf):
    rng = np.random.default_rng(7 + min_leaf)
    X, y = _data(rng, 400, 5, dtype, missing)
    rows, counts = np.unique(rng.integers(0, 400, 400), return_counts=True)
    tree = cart_nodes(X, *sort_inputs(X), y, rows, counts.astype(np.int64), 3, 5, -1, 2,
                      min_leaf, criterion == "gini", dtype == np.uint8, 11)
    left, right, feature, threshold, value, depth, n_samples, _ = tree
    reach = _rows_per_node(X, rows, tree)
    all_f = np.arange(5)
    for node in range(left.shape[0]):
        lids = np.asarray(reach[node])
        idx = np.repeat(rows[lids], counts[lids])
        np.testing.assert_array_equal(value[node], np.bincount(y[idx], minlength=3))
        assert n_samples[node] == idx.size
        ref = naive.naive_cart_split(X, y, idx, all_f, 3, min_leaf, criterion)
        if left[node] < 0:  # a leaf: pure, too small, or no valid cut
            assert (np.count_nonzero(value[node]) <= 1 or idx.size < 2 * min_leaf
                    or ref[2] < 0)
            continue
        assert depth[left[node]] == depth[node] + 1
        go = naive.naive_cart_goes_left(X[idx, feature[node]], threshold[node],
                                        tree[7][node])
        assert min(go.sum(), (~go).sum()) >= min_leaf
        assert naive.naive_cart_gain(y[idx], go, 3, criterion) == pytest.approx(
            ref[2], abs=1e-9)


def test_an_impure_node_splits_even_when_no_cut_lowers_the_impurity():
    # XOR: no single cut lowers the Gini index at the root; scikit-learn splits anyway
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
    y = np.array([0, 1, 1, 0], dtype=np.int32)
    tree = cart_nodes(X, *sort_inputs(X), y, np.arange(4), np.ones(4, np.int64), 2, 2, -1,
                      2, 1, True, False, 0)
    left, value = tree[0], tree[4]
    assert left[0] >= 0
    leaves = value[left < 0]
    assert leaves.shape[0] == 4 and (np.count_nonzero(leaves, axis=1) == 1).all()


@pytest.mark.parametrize("m", [5, RADIX_MIN - 1, RADIX_MIN, 3000])
def test_radix_and_comparison_sorts_agree(m):
    rng = np.random.default_rng(m)
    v = np.round(rng.normal(size=m), 1).astype(np.float32)
    v[::7] = -0.0
    u = v.view(np.uint32)
    u = np.where(u & 0x80000000, u ^ 0xFFFFFFFF, u | 0x80000000).astype(np.uint64)
    keys = (u << np.uint64(32)) | np.arange(m, dtype=np.uint64)
    got = keys.copy()
    sort_keys(got, np.empty(m, np.uint64), np.zeros((4, 256), np.int64))
    np.testing.assert_array_equal(got, np.sort(keys))
    order = (got & np.uint64(0xFFFFFFFF)).astype(np.int64)
    assert (np.diff(v[order]) >= 0).all()


def test_feature_ranks_are_dense_ranks_with_their_values():
    rng = np.random.default_rng(5)
    X = np.round(rng.normal(size=(300, 4)), 1).astype(np.float32)
    X[::9, 1] = np.nan
    X[::5, 2] = -0.0
    R, table, offsets = feature_ranks(X)
    for f in range(4):
        present = ~np.isnan(X[:, f])
        uniq = np.unique(X[present, f])
        np.testing.assert_array_equal(table[offsets[f]:offsets[f + 1]], uniq)
        np.testing.assert_array_equal(R[present, f], np.searchsorted(uniq, X[present, f]))
        assert (R[~present, f] == MISSING_RANK).all()


def test_cart_forest_is_the_same_whatever_the_threads():
    rng = np.random.default_rng(3)
    X, y = _data(rng, 500, 6, np.float32, 0.1)
    a = AxisAlignedForest(6, criterion="gini", random_state=1, n_jobs=1).fit(X, y)
    b = AxisAlignedForest(6, criterion="gini", random_state=1, n_jobs=3).fit(X, y)
    for name in a.forest_._fields:
        x, z = getattr(a.forest_, name), getattr(b.forest_, name)
        if x is None:
            assert z is None
        else:
            np.testing.assert_array_equal(x, z)


@pytest.mark.parametrize("max_depth", [-1, 3])
def test_packed_axis_apply_equals_the_generic_kernel(max_depth):
    from facesegment.forest._arrays import complete
    from facesegment.forest._predict import (apply_axis_packed, apply_kernel, kernel_sparse,
                                             kernel_weights, packed_nodes)

    rng = np.random.default_rng(4)
    X, y = _data(rng, 400, 6, np.float32, 0.0)
    fa = complete(AxisAlignedForest(5, criterion="gini", random_state=0).fit(X, y).forest_)
    got = np.empty((400, 5), np.int32)
    ref = np.empty((400, 5), np.int32)
    apply_axis_packed(X, fa.roots, *packed_nodes(fa), max_depth, got)
    apply_kernel(X, fa.roots, fa.left, fa.right, fa.feature, fa.feature2, fa.oblique,
                 fa.threshold, fa.depth, kernel_weights(fa), fa.sparse, *kernel_sparse(fa),
                 max_depth, ref)
    np.testing.assert_array_equal(got, ref)
