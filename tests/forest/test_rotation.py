"""RotationForest: kernels and PCA against tests/naive.py, the subsets, the storage
as sparse oblique nodes on raw features (shared rows of at most M entries, axis
nodes for one-feature subsets, every training sample where training put it),
exact sample-weight equivalence, determinism, truncation, check_estimator,
learning and dense inference."""

import inspect
import warnings

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

from facesegment.forest import (constraints_of, AxisAlignedForest, RotationForest,
                                validate_params)
from facesegment.forest._rotation_kernels import rotate_rows, subset_covariance
from facesegment.dense import predict_proba_raw
from facesegment.layout import WindowLayout
from facesegment.modelio.model import Model
from facesegment.forest.rotation import draw_subsets, pca_components
from tests import naive
from tests.forest.test_extra import (BOOTSTRAP_XFAIL, NO_BOOTSTRAP_XFAIL, dense_matches_predict,
                                     same_forest)


def _oblique_data(n=1500, seed=0):
    """Gaussian rows with oblique class boundaries (3 classes)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    return X, (X[:, 0] + X[:, 1] - X[:, 2] > 0).astype(int) + (X[:, 3] - X[:, 4] > 0.5)


# ------------------------------------------------------------------ kernels
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_covariance_pca_and_rotation_match_naive(dtype):
    rng = np.random.default_rng(0)
    X = (rng.integers(0, 256, size=(200, 7)).astype(dtype) if dtype == np.uint8
         else rng.normal(size=(200, 7)).astype(dtype) * [1, 5, 2, 1, 3, 1, 1])
    X = np.ascontiguousarray(X, dtype=dtype)
    rows = rng.integers(0, 200, size=150).astype(np.int64)
    feats = np.array([4, 1, 6], np.int64)
    cov = subset_covariance(X, rows, feats)
    Xs = X[rows][:, feats].astype(np.float64)
    np.testing.assert_allclose(cov, np.cov(Xs.T, bias=True), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(pca_components(cov), naive.naive_pca_axes(Xs), atol=1e-7)
    groups = np.array([[4, 1, 6], [0, 2, -1], [5, -1, -1]], np.int64)
    w = rng.normal(size=(3, 3)).astype(np.float32)
    idx = np.arange(0, 200, 3, dtype=np.int64)
    np.testing.assert_allclose(rotate_rows(X, idx, groups, w),
                               naive.naive_rotate(X, idx, groups, w), rtol=1e-5, atol=1e-3)


def test_subsets_random_and_consecutive():
    rng = np.random.default_rng(0)
    g = draw_subsets(rng, 10, 8, 3, "random")
    assert g.shape == (3, 3) and (g[-1, -1] == -1) and len(set(g[g >= 0])) == 8
    c = draw_subsets(rng, 10, 6, 3, "consecutive")  # blocks [0,3) [3,6) [6,9) [9,10)
    assert c.shape == (2, 3) and all(row[0] % 3 == 0 and (np.diff(row[row >= 0]) == 1).all()
                                     for row in c)
    tail = draw_subsets(np.random.default_rng(1), 10, 12, 3, "consecutive")
    assert tail.shape == (4, 3) and list(tail[-1]) == [9, -1, -1]


def _rows(fa):
    """The sparse rows of a forest as a dense float32 (n_rows, p) matrix."""
    out = np.zeros((fa.sparse_ptr.shape[0] - 1, fa.n_features), np.float32)
    for r in range(out.shape[0]):
        a, b = fa.sparse_ptr[r], fa.sparse_ptr[r + 1]
        out[r, fa.sparse_index[a:b]] = fa.sparse_weight[a:b]
    return out


# --------------------------------------------------------------- the forest
def test_sparse_oblique_nodes_on_raw_features_with_shared_block_rows():
    X, y = _oblique_data(600)
    est = RotationForest(n_estimators=3, n_features_per_subset=2, random_state=0).fit(X, y)
    fa = est.forest_
    inner = fa.left >= 0
    assert (fa.feature2 == -1).all() and (fa.sparse[inner] >= 0).all()
    assert (fa.oblique == -1).all() and fa.weights.shape == (0, 6)   # no dense rows
    assert fa.sparse_weight.dtype == np.float32 and (np.diff(fa.sparse_ptr) <= 2).all()
    w = _rows(fa)
    np.testing.assert_allclose(np.linalg.norm(w, axis=1), 1.0, rtol=1e-6)
    start = 0
    for st in est.tree_stats_:  # one row per node; rows repeat per rotated feature
        rows = {tuple(r) for r in w[start:start + st["n_oblique_nodes"]]}
        assert len(rows) == st["n_rotated_used"] <= 6 < st["n_oblique_nodes"]
        start += st["n_oblique_nodes"]
    assert start == w.shape[0]
    np.testing.assert_allclose(est.predict_proba(X[:50]),
                               naive.naive_forest_proba(fa, X[:50]), atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_every_training_sample_reaches_the_leaf_it_was_counted_in(dtype):
    """A sparse row sums its M products in float32 in the order training's
    rotate_rows did, so prediction partitions the training set exactly as
    training did (no sample within rounding of a threshold changes side)."""
    X, y = _oblique_data(800, seed=5)
    if dtype == np.uint8:
        X = np.clip(X * 40 + 128, 0, 255).astype(np.uint8)
    est = RotationForest(n_estimators=4, random_state=0).fit(X, y)
    fa = est.forest_
    leaves = est.apply(X)
    for t in range(fa.n_trees):
        nodes, counts = np.unique(leaves[:, t], return_counts=True)
        np.testing.assert_array_equal(fa.n_samples[nodes], counts)
        assert counts.sum() == len(y) and (fa.left[nodes] < 0).all()


def test_one_feature_subsets_are_axis_nodes():
    X, y = _oblique_data(400)
    fa = RotationForest(n_estimators=2, n_features_per_subset=1, random_state=0).fit(X, y).forest_
    inner = fa.left >= 0
    assert fa.weights.shape == (0, 6) and (fa.feature[inner] >= 0).all()
    assert (fa.oblique == -1).all() and (fa.sparse == -1).all()


def test_max_rotated_features_bounds_rows_and_features():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(500, 40), dtype=np.uint8)
    y = (X[:, 0].astype(int) + X[:, 1] > 255).astype(int)
    est = RotationForest(n_estimators=4, max_rotated_features=9, max_depth=6,
                         random_state=0).fit(X, y)
    w = _rows(est.forest_)
    assert ((w != 0).sum(axis=1) <= 3).all()  # M = 3 non-zero weights per row
    start = 0
    for st in est.tree_stats_:  # each tree rotates and uses 9 features: at most 9 rows
        rows = w[start:start + st["n_oblique_nodes"]]
        assert len({tuple(r) for r in rows}) <= 9
        assert np.count_nonzero(np.abs(rows).sum(axis=0)) <= 9
        start += st["n_oblique_nodes"]
    assert start == w.shape[0]
    cons = _rows(RotationForest(n_estimators=2, subsets="consecutive", max_rotated_features=12,
                                max_depth=5, random_state=0).fit(X, y).forest_)
    for row in cons:
        nz = np.flatnonzero(row)
        assert nz.min() // 3 == nz.max() // 3  # one block of 3 consecutive features


def test_integer_weights_equal_repeated_shuffled_rows_exactly():
    X, y = _oblique_data(120, seed=3)
    w = np.random.default_rng(4).integers(0, 4, size=120)
    weighted = RotationForest(n_estimators=3, random_state=0).fit(X, y, sample_weight=w)
    Xr, yr = np.repeat(X, w, axis=0), np.repeat(y, w)
    order = np.random.default_rng(5).permutation(len(yr))
    same_forest(weighted, RotationForest(n_estimators=3, random_state=0).fit(Xr[order],
                                                                            yr[order]))


def test_same_seed_identical_any_n_jobs_and_truncation():
    X, y = _oblique_data(500)
    a = RotationForest(n_estimators=4, random_state=2, n_jobs=1).fit(X, y)
    same_forest(a, RotationForest(n_estimators=4, random_state=2, n_jobs=2).fit(X, y))
    assert not np.array_equal(
        _rows(a.forest_), _rows(RotationForest(n_estimators=4, random_state=3).fit(X, y).forest_))
    for d in (1, 3):
        shallow = RotationForest(n_estimators=4, max_depth=d, random_state=2).fit(X, y)
        np.testing.assert_array_equal(a.predict_proba(X, max_depth=d), shallow.predict_proba(X))


def test_learns_oblique_boundaries_better_than_axis_aligned():
    X, y = _oblique_data(1500)
    rot = RotationForest(n_estimators=16, random_state=0).fit(X[:1000], y[:1000])
    axis = AxisAlignedForest(n_estimators=16, random_state=0).fit(X[:1000], y[:1000])
    assert rot.score(X[1000:], y[1000:]) > 0.85
    assert rot.score(X[1000:], y[1000:]) > axis.score(X[1000:], y[1000:]) + 0.03


def test_dense_inference_equals_predict_proba():
    est = dense_matches_predict(RotationForest(n_estimators=3, max_rotated_features=24,
                                               max_depth=7, random_state=0))
    assert est.forest_.sparse_ptr.shape[0] > 1
    dense_matches_predict(RotationForest(n_estimators=2, subsets="consecutive",
                                         max_rotated_features=15, max_depth=6,
                                         random_state=1), seed=1)


def test_dense_inference_of_shared_sparse_rows():
    """Nodes may share a sparse row (with their own thresholds): the fast kernels
    keep one threshold per row, so such a forest takes the general kernels."""
    from facesegment.dense.predict import _fast_records, _prepare

    est = dense_matches_predict(RotationForest(n_estimators=2, max_rotated_features=12,
                                               max_depth=7, random_state=0))
    fa = est.forest_
    first = {}
    shared = fa.sparse.copy()
    for node in np.flatnonzero(fa.sparse >= 0):
        a, b = fa.sparse_ptr[fa.sparse[node]], fa.sparse_ptr[fa.sparse[node] + 1]
        key = (tuple(fa.sparse_index[a:b]), tuple(fa.sparse_weight[a:b]))
        shared[node] = first.setdefault(key, fa.sparse[node])
    assert len(first) < np.count_nonzero(fa.sparse >= 0)      # rows are shared now
    est.forest_ = fa._replace(sparse=shared)
    model = Model(kind="rotation", params={}, arrays=est.forest_, class_names=("a", "b", "c"),
                  sampling_factors=np.ones(3), mean=np.zeros(75, np.float32),
                  std=np.ones(75, np.float32), layout=WindowLayout(window=5))
    image = np.random.default_rng(3).integers(0, 256, size=(16, 18, 3), dtype=np.uint8)
    assert _fast_records(_prepare(model, image, None, None, None, 0)) is None
    Xw, ys, xs = naive.naive_windows(image, "full", window=5)
    np.testing.assert_allclose(predict_proba_raw(model, image)[ys, xs], est.predict_proba(Xw),
                               atol=1e-5)


# ------------------------------------------------------------ sklearn API
def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(RotationForest(n_estimators=3, random_state=0),
                        expected_failed_checks=NO_BOOTSTRAP_XFAIL)
        check_estimator(RotationForest(n_estimators=3, bootstrap=True, random_state=0),
                        expected_failed_checks=BOOTSTRAP_XFAIL)


def test_parameters():
    sig = inspect.signature(RotationForest.__init__)
    defaults = {n: p.default for n, p in sig.parameters.items() if n != "self"}
    assert set(constraints_of(RotationForest)) == set(defaults)
    validate_params(RotationForest, defaults)
    X, y = _oblique_data(50)
    for kw, match in (({"n_features_per_subset": 0}, "n_features_per_subset=0"),
                      ({"pca_sample_fraction": 0.0}, "pca_sample_fraction=0.0"),
                      ({"subsets": "pixels"}, "subsets='pixels'"),
                      ({"max_rotated_features": "cube"}, "max_rotated_features='cube'")):
        with pytest.raises(ValueError, match=match):
            RotationForest(**kw).fit(X, y)
    RotationForest(n_estimators=2, n_features_per_subset=10).fit(X[:, :1], y)  # M > p
