"""Sparse, low-precision CO2 splits (facesegment.forest._sparse, CO2Forest(max_nonzero=k)).

Kernels against the references in tests/naive.py; the contract that a sparse
split never uses more than k features; threshold consistency (no training
sample changes side between training and inference arithmetic, for every
storage precision); mixed dense/sparse forests.
"""

import numpy as np
import pytest

from facesegment.forest import CO2Forest, InvalidParameterError
from facesegment.forest._arrays import complete, n_sparse
from facesegment.forest._sparse import (EXACT_SUM, INT8_MAX, INT16_MAX, keep_top_k, quantise,
                                        sparse_values, top_k_support)
from facesegment.forest._concat import concat_trees
from facesegment.forest.co2 import co2_split
from facesegment.forest.registry import kind_of, make_estimator
from tests import naive

DTYPES = ("float32", "float16", "int8")


def _data(n=1500, p=48, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, (n, p)).astype(np.uint8)
    w = rng.normal(size=p)
    s = X.astype(np.float64) @ w
    y = (s > np.median(s)).astype(np.int64) + 2 * (X[:, 3] > 128)
    return X, y


# ----------------------------------------------------------------- kernels

@pytest.mark.parametrize("k", [1, 3, 7, 20])
def test_keep_top_k_matches_naive_with_ties(k):
    rng = np.random.default_rng(k)
    p = 20
    w = rng.choice([-2.0, -1.0, 0.0, 1.0, 2.0, 0.5], size=p + 1).astype(np.float32)
    got = w.copy()
    keep_top_k(got, p, k, np.empty(p, np.float32))
    want = naive.naive_keep_top_k(w, p, k)
    np.testing.assert_array_equal(got[:p], want[:p].astype(np.float32))
    assert got[p] == w[p]  # the offset is never thresholded
    assert np.count_nonzero(got[:p]) <= k


def test_sparse_values_are_the_ordered_float32_sum():
    X, _ = _data(200, 30)
    idx = np.arange(200, dtype=np.int64)
    index = np.array([29, 0, 7, 13], np.int32)  # any order: the stored one is used
    weight = np.array([0.1234567, -3.3, 1e-3, 7.75], np.float32)
    got = sparse_values(X, idx, index, weight)
    arrays = _one_row(index, weight)  # a one-row sparse table for the reference
    want = [naive.naive_sparse_value(arrays, 0, X[i]) for i in idx]
    np.testing.assert_array_equal(got, np.asarray(want, np.float32))


def _one_row(index, weight):
    from facesegment.forest._arrays import ForestArrays

    z = np.zeros(1, np.int32)
    return ForestArrays(roots=z, left=z - 1, right=z - 1, feature=z - 1, feature2=z - 1,
                        oblique=z - 1, threshold=np.zeros(1, np.float32),
                        value=np.ones((1, 1), np.float32), depth=z, n_samples=z,
                        weights=np.zeros((0, 30), np.float32), sparse=z,
                        sparse_ptr=np.array([0, len(index)], np.int64),
                        sparse_index=index, sparse_weight=weight)


def test_top_k_support_and_quantise():
    u = np.array([0.0, -4.0, 1.0, 4.0, 0.5, -0.25], np.float32)
    np.testing.assert_array_equal(top_k_support(u, 2), [1, 3])  # tie: both kept
    np.testing.assert_array_equal(top_k_support(u, 3), [1, 2, 3])
    np.testing.assert_array_equal(top_k_support(u, 10), [1, 2, 3, 4, 5])  # zeros never
    stored, kw, scale = quantise(u[[1, 2, 3]], "int8")
    assert stored.dtype == np.int8 and np.abs(stored).max() == INT8_MAX
    np.testing.assert_allclose(kw * scale, u[[1, 2, 3]], atol=scale / 2)
    stored, kw, _ = quantise(u, "float16")
    assert stored.dtype == np.float16 and np.array_equal(kw, stored.astype(np.float32))
    with pytest.raises(ValueError, match="float32, float16, int8"):
        quantise(u, "int4")


# ------------------------------------------------------------- the split

@pytest.mark.parametrize("sparsity", ["learned", "prune"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_co2_split_sparse_support_and_threshold(sparsity, dtype):
    X, y = _data()
    y = y.astype(np.int32)
    idx = np.arange(X.shape[0], dtype=np.int64)
    mean = X.mean(0).astype(np.float32)
    inv_std = (1 / X.std(0)).astype(np.float32)
    k = 5
    res = co2_split(X, y, idx, 4, mean, inv_std, 3, 127.5, 0.0, nu=4.0, eta=0.01, seed=1,
                    max_nonzero=k, sparsity=sparsity, sparse_dtype=dtype)
    assert res is not None
    (index, stored), thr, gain = res
    assert 1 <= index.shape[0] <= k and stored.dtype == np.dtype(dtype)
    assert len(set(index.tolist())) == index.shape[0]
    # the threshold sits between training values computed in the inference arithmetic
    v = sparse_values(X, idx, index, stored.astype(np.float32))
    assert not np.any(v == np.float32(thr))
    left = v <= np.float32(thr)
    assert 0 < left.sum() < len(v)
    assert gain == pytest.approx(naive.naive_gain(y, left, 4), abs=1e-9)


def test_co2_split_sparse_rejects_bad_arguments():
    X, y = _data(100, 8)
    y = y.astype(np.int32)
    idx = np.arange(100, dtype=np.int64)
    args = (X, y, idx, 4, X.mean(0).astype(np.float32), np.ones(8, np.float32), 3, 100, 0.0)
    with pytest.raises(ValueError, match="sparsity"):
        co2_split(*args, max_nonzero=2, sparsity="random")
    with pytest.raises(ValueError, match="sparse_dtype"):
        co2_split(*args, max_nonzero=2, sparse_dtype="int4")
    with pytest.raises(ValueError, match="max_nonzero"):
        co2_split(*args, max_nonzero=0)
    with pytest.raises(ValueError, match="512"):
        co2_split(*args, max_nonzero=600, sparse_dtype="int8")


# ------------------------------------------------------------ the forest

def _leaf_counts_match(est, X):
    """Every training sample reaches the leaf it was counted in (bootstrap=False)."""
    fa = est.forest_
    leaves = est.apply(X)
    ends = list(fa.roots[1:]) + [fa.n_nodes]
    for t in range(fa.n_trees):
        lo, hi = fa.roots[t], ends[t]
        counts = np.bincount(leaves[:, t], minlength=fa.n_nodes)[lo:hi]
        leaf = fa.left[lo:hi] < 0
        if not np.array_equal(counts[leaf], fa.n_samples[lo:hi][leaf]):
            return False
    return True


@pytest.mark.parametrize("dtype", DTYPES)
def test_forest_sparse_rows_and_no_sample_changes_side(dtype):
    X, y = _data()
    k = 4
    est = CO2Forest(3, max_nonzero=k, weight_dtype=dtype, bootstrap=False,
                    oblique_min_samples=40, random_state=0).fit(X, y)
    fa = est.forest_
    assert n_sparse(fa) > 0 and fa.weights.shape[0] == 0
    assert fa.sparse_weight.dtype == np.dtype(dtype)
    assert np.diff(fa.sparse_ptr).max() <= k and np.diff(fa.sparse_ptr).min() >= 1
    assert (fa.sparse >= 0).sum() == n_sparse(fa)
    assert _leaf_counts_match(est, X)
    np.testing.assert_allclose(est.predict_proba(X[:300]),
                               naive.naive_forest_proba(fa, X[:300]), atol=1e-6)
    imp = est.feature_importances_
    assert imp.sum() == pytest.approx(1.0)


def test_forest_sparse_is_deterministic_and_registry_kind():
    X, y = _data(600, 20)
    a = make_estimator("co2-sparse", n_estimators=2, max_nonzero=3, weight_dtype="int8",
                       oblique_min_samples=40, random_state=5, n_jobs=2).fit(X, y)
    b = make_estimator("co2-sparse", n_estimators=2, max_nonzero=3, weight_dtype="int8",
                       oblique_min_samples=40, random_state=5, n_jobs=1).fit(X, y)
    for name in ("sparse", "sparse_ptr", "sparse_index", "sparse_weight", "threshold"):
        np.testing.assert_array_equal(getattr(a.forest_, name), getattr(b.forest_, name))
    assert kind_of(a) == "co2-sparse"
    assert kind_of(CO2Forest(init="best")) is None    # never guessed from parameters


def test_forest_dense_int8_rows_and_no_sample_changes_side():
    """Dense int8 rows (weight_dtype="int8", no max_nonzero): integer weights of at
    most 127 whose sums over uint8 values stay exact in float32, and no training
    sample changes side; rows of 2,883 values get a coarser scale to stay exact."""
    X, y = _data()
    est = CO2Forest(3, weight_dtype="int8", bootstrap=False, oblique_min_samples=40,
                    random_state=0).fit(X, y)
    fa = est.forest_
    assert fa.weights.dtype == np.int8 and fa.weights.shape[0] > 0 and n_sparse(fa) == 0
    q = np.abs(fa.weights.astype(np.int64))
    assert q.max() == INT8_MAX and (q.max(axis=1) > 0).all()
    assert (255 * q.sum(axis=1)).max() <= EXACT_SUM
    assert _leaf_counts_match(est, X)
    np.testing.assert_allclose(est.predict_proba(X[:300]),
                               naive.naive_forest_proba(fa, X[:300]), atol=1e-6)
    wide = CO2Forest(2, weight_dtype="int16", bootstrap=False, oblique_min_samples=40,
                     random_state=0).fit(X, y)
    q16 = np.abs(wide.forest_.weights.astype(np.int64))
    assert wide.forest_.weights.dtype == np.int16 and q16.max() <= INT16_MAX
    assert (255 * q16.sum(axis=1)).max() <= EXACT_SUM and _leaf_counts_match(wide, X)
    long_row = np.random.default_rng(1).normal(size=2883).astype(np.float32)
    stored, kw, scale = quantise(long_row, "int8")
    assert 255 * np.abs(stored.astype(np.int64)).sum() <= EXACT_SUM
    assert np.abs(stored).max() < INT8_MAX        # the sum bound, not 127, set the scale
    np.testing.assert_allclose(kw * scale, long_row, atol=scale / 2 + 1e-7)


def test_forest_sparse_parameter_errors():
    X, y = _data(200, 10)
    with pytest.raises(InvalidParameterError, match="uint8 features.*float16"):
        CO2Forest(2, weight_dtype="int8").fit(X.astype(np.float32), y)
    with pytest.raises(InvalidParameterError, match="int16.*dense rows"):
        CO2Forest(2, weight_dtype="int16", max_nonzero=4).fit(X, y)
    wide = np.zeros((4, 65537), np.uint8)     # too many features for exact sums
    wide[2:, 0] = 9
    with pytest.raises(InvalidParameterError,
                       match="at most 65536 features.*got 65537.*float16"):
        CO2Forest(1, weight_dtype="int16").fit(wide, [0, 0, 1, 1])
    with pytest.raises(InvalidParameterError, match="sparsity"):
        CO2Forest(2, max_nonzero=3, sparsity="top").fit(X, y)
    with pytest.raises(InvalidParameterError, match="max_nonzero"):
        CO2Forest(2, max_nonzero=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="above 512.*float16"):
        CO2Forest(2, max_nonzero=600, weight_dtype="int8").fit(X, y)


def mixed_forest(X, y):
    """A forest with dense and sparse oblique nodes: trees of a dense and a sparse
    CO2 forest concatenated (what the format allows)."""
    dense = CO2Forest(2, oblique_min_samples=40, random_state=0).fit(X, y)
    sparse = CO2Forest(2, max_nonzero=4, weight_dtype="int8", oblique_min_samples=40,
                       random_state=1).fit(X, y)
    trees = []
    for fa in (complete(dense.forest_), sparse.forest_):
        ends = list(fa.roots[1:]) + [fa.n_nodes]
        for lo, hi in zip(fa.roots, ends):
            t = _tree_dict(fa, lo, hi)
            trees.append(t)
    mixed = concat_trees(trees, X.shape[1])
    dense.forest_ = mixed
    return dense


def _tree_dict(fa, lo, hi):
    out = {}
    for name in ("left", "right", "oblique", "sparse"):
        a = getattr(fa, name)[lo:hi].copy()
        if name in ("left", "right"):
            a[a >= 0] -= lo
        out[name] = a
    for name in ("feature", "feature2", "threshold", "value", "depth", "n_samples"):
        out[name] = getattr(fa, name)[lo:hi]
    ob = out["oblique"]
    rows = ob[ob >= 0]
    out["weights"] = fa.weights[rows] if rows.size else np.zeros((0, fa.weights.shape[1]),
                                                                 np.float32)
    ob[ob >= 0] = np.arange(rows.size)
    sp = out["sparse"]
    srows = sp[sp >= 0]
    ptr = [0]
    idx, w = [], []
    for r in srows:
        a, b = fa.sparse_ptr[r], fa.sparse_ptr[r + 1]
        idx.append(fa.sparse_index[a:b])
        w.append(fa.sparse_weight[a:b])
        ptr.append(ptr[-1] + b - a)
    sp[sp >= 0] = np.arange(srows.size)
    out["sparse_ptr"] = np.asarray(ptr, np.int64)
    out["sparse_index"] = np.concatenate(idx) if idx else np.zeros(0, np.int32)
    out["sparse_weight"] = (np.concatenate(w) if w else np.zeros(0, fa.sparse_weight.dtype))
    return out


def test_mixed_dense_and_sparse_forest_predicts_like_naive():
    X, y = _data(800, 24)
    est = mixed_forest(X, y)
    fa = est.forest_
    assert fa.weights.shape[0] > 0 and n_sparse(fa) > 0
    np.testing.assert_allclose(est.predict_proba(X[:200]),
                               naive.naive_forest_proba(fa, X[:200]), atol=1e-5)
