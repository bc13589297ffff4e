"""Split kernels (axis, two-probe, partition, threshold scans) vs tests/naive.py."""

import numpy as np
import pytest

from facesegment.forest import axis, twoprobe
from facesegment.forest._criteria import class_counts, sorted_gain_of_values
from facesegment.forest._predict import oblique_values, partition
from tests import naive


def _data(rng, n, p, n_classes, dtype):
    if dtype == np.uint8:
        # few distinct values -> many ties, exercising the bin logic
        X = rng.integers(0, 256, size=(n, p)).astype(np.uint8)
        X[:, ::2] //= 32
    else:
        X = rng.normal(size=(n, p)).astype(np.float32)
    y = rng.integers(0, n_classes, size=n).astype(np.int32)
    y[X[:, 1] > np.median(X[:, 1])] = 0  # make feature 1 informative
    return X, y


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("m", [7, 60, 500])  # 500 takes the histogram path for uint8
@pytest.mark.parametrize("min_leaf", [1, 5])
def test_axis_split_matches_naive(dtype, m, min_leaf):
    rng = np.random.default_rng(m + min_leaf)
    X, y = _data(rng, 700, 12, 4, dtype)
    idx = np.sort(rng.choice(700, size=m, replace=False)).astype(np.int64)
    feats = np.array([0, 1, 3, 4, 7, 10], dtype=np.int64)
    f, t, g = axis.best_axis_split(X, y, idx, feats, 4, min_leaf)
    nf, nt, ng = naive.naive_axis_split(X, y, idx, feats, 4, min_leaf)
    assert g == pytest.approx(ng, abs=1e-9)
    if ng < 0:  # no split leaves min_leaf samples on both sides
        assert f == nf == -1
        return
    assert f in feats
    # the kernel's choice is an optimal split (ties may pick another feature)
    left = X[idx, f].astype(np.float32) <= np.float32(t)
    assert naive.naive_gain(y[idx], left, 4) == pytest.approx(ng, abs=1e-9)
    assert min(left.sum(), (~left).sum()) >= min_leaf
    if f == nf:
        assert t == nt


def test_axis_hist_and_sort_paths_agree():
    rng = np.random.default_rng(1)
    X, y = _data(rng, 2000, 20, 5, np.uint8)
    idx = np.arange(2000, dtype=np.int64)
    feats = np.arange(20, dtype=np.int64)
    a = axis._axis_split_hist_u8(X, y, idx, feats, 5, 1, axis._EDGES_U8)
    b = axis._axis_split_sorted(X, y, idx, feats, 5, 1)
    assert a[0] == b[0] and a[1] == b[1]
    assert a[2] == pytest.approx(b[2], abs=1e-12)


@pytest.mark.parametrize("m", [2, 30, 300])
def test_axis_counting_and_sort_paths_agree(m):
    rng = np.random.default_rng(m)
    X, y = _data(rng, 400, 16, 5, np.uint8)
    idx = np.sort(rng.choice(400, size=m, replace=False)).astype(np.int64)
    feats = np.arange(16, dtype=np.int64)
    a = axis._axis_split_counting_u8(X, y, idx, feats, 5, 1)
    b = axis._axis_split_sorted(X, y, idx, feats, 5, 1)
    assert a[0] == b[0] and a[1] == b[1]
    assert a[2] == pytest.approx(b[2], abs=1e-12)


def test_axis_split_no_valid_split():
    X = np.full((10, 3), 7, dtype=np.uint8)
    y = np.arange(10, dtype=np.int32) % 2
    f, t, g = axis.best_axis_split(X, y, np.arange(10, dtype=np.int64),
                                   np.arange(3, dtype=np.int64), 2)
    assert f == -1 and g == -1.0
    # min_leaf too large for any split
    X = np.arange(10, dtype=np.uint8)[:, None]
    f, _, g = axis.best_axis_split(X, y, np.arange(10, dtype=np.int64),
                                   np.zeros(1, np.int64), 2, 6)
    assert f == -1


def test_uint8_threshold_is_midpoint_and_exact():
    X = np.array([[10], [10], [20], [20]], dtype=np.uint8)
    y = np.array([0, 0, 1, 1], dtype=np.int32)
    f, t, g = axis.best_axis_split(X, y, np.arange(4, dtype=np.int64), np.zeros(1, np.int64), 2)
    assert (f, t) == (0, 15.0)
    assert g == pytest.approx(np.log(2))


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("m", [9, 80, 800])
def test_pair_split_matches_naive(dtype, m):
    rng = np.random.default_rng(m)
    X, y = _data(rng, 900, 10, 3, dtype)
    idx = np.sort(rng.choice(900, size=m, replace=False)).astype(np.int64)
    fa, fb = twoprobe.sample_pairs(np.random.default_rng(0), 10, 15)
    assert (fa != fb).all() and fa.max() < 10 and fb.max() < 10
    a, b, t, g = twoprobe.best_pair_split(X, y, idx, fa, fb, 3, 2)
    na, nb, nt, ng = naive.naive_pair_split(X, y, idx, fa, fb, 3, 2)
    assert g == pytest.approx(ng, abs=1e-9)
    d = X[idx, a].astype(np.float32) - X[idx, b].astype(np.float32)
    assert naive.naive_gain(y[idx], d <= np.float32(t), 3) == pytest.approx(ng, abs=1e-9)
    if (a, b) == (na, nb):
        assert t == nt


def test_pair_hist_and_sort_paths_agree():
    rng = np.random.default_rng(2)
    X, y = _data(rng, 1500, 16, 4, np.uint8)
    idx = np.arange(1500, dtype=np.int64)
    fa, fb = twoprobe.sample_pairs(rng, 16, 30)
    a = twoprobe._pair_split_hist_u8(X, y, idx, fa, fb, 4, 1, 1 << 30)
    b = twoprobe._pair_split_sorted(X, y, idx, fa, fb, 4, 1)
    assert a[0] == b[0] and a[1] == b[1]
    assert a[2] == pytest.approx(b[2], abs=1e-12)


@pytest.mark.parametrize("m", [3, 40, 400])
def test_pair_counting_and_sort_paths_agree(m):
    rng = np.random.default_rng(m)
    X, y = _data(rng, 500, 12, 4, np.uint8)
    idx = np.sort(rng.choice(500, size=m, replace=False)).astype(np.int64)
    fa, fb = twoprobe.sample_pairs(rng, 12, 20)
    a = twoprobe._pair_split_counting_u8(X, y, idx, fa, fb, 4, 1)
    b = twoprobe._pair_split_sorted(X, y, idx, fa, fb, 4, 1)
    assert a[0] == b[0] and a[1] == b[1]
    assert a[2] == pytest.approx(b[2], abs=1e-12)


@pytest.mark.parametrize("kind", ["axis", "pair", "oblique"])
def test_partition_matches_naive(kind):
    rng = np.random.default_rng(3)
    X = rng.integers(0, 256, size=(200, 6)).astype(np.uint8)
    idx = rng.permutation(200)[:150].astype(np.int64)
    w = rng.normal(size=(1, 6)).astype(np.float32)
    f, f2, ob, thr, ww = 2, -1, -1, np.float32(100.5), None
    if kind == "pair":
        f2, thr = 4, np.float32(-3.5)
    if kind == "oblique":
        f, ob, thr, ww = -1, 0, np.float32(np.median(X[idx] @ w[0])), w[0]
    exp_l, exp_r = naive.naive_partition(X, idx, f, f2, ww, thr)
    work = idx.copy()
    nl = partition(X, work, np.empty_like(work), f, f2, ob, thr, w)
    assert nl == len(exp_l)
    np.testing.assert_array_equal(work[:nl], exp_l)
    np.testing.assert_array_equal(work[nl:], exp_r)


def test_oblique_values_and_threshold_refit():
    rng = np.random.default_rng(4)
    X = rng.integers(0, 256, size=(300, 40)).astype(np.uint8)
    y = rng.integers(0, 3, size=300).astype(np.int32)
    idx = np.arange(0, 300, 2, dtype=np.int64)
    w = rng.normal(size=40).astype(np.float32)
    v = oblique_values(w, X, idx)
    np.testing.assert_allclose(v, X[idx].astype(np.float64) @ w, rtol=1e-5, atol=1e-3)
    t, g = sorted_gain_of_values(v, y, idx, 3, 1)
    nt, ng = naive.naive_best_threshold(v, y[idx], 3)
    assert g == pytest.approx(ng, abs=1e-9)
    np.testing.assert_array_equal(class_counts(y, idx, 3), np.bincount(y[idx], minlength=3))


def test_partial_shuffle_matches_naive_and_is_uniform():
    from facesegment.forest._grow import partial_shuffle
    rng = np.random.default_rng(5)
    perm = np.arange(10, dtype=np.int64)
    for _ in range(5):
        u = rng.random(4)
        exp, exp_perm = naive.naive_partial_shuffle(perm, u)
        got = partial_shuffle(perm, u)
        np.testing.assert_array_equal(got, exp)
        np.testing.assert_array_equal(perm, exp_perm)
    counts = np.zeros(10)
    for _ in range(3000):
        counts[partial_shuffle(perm, rng.random(3))] += 1
    assert np.all(np.abs(counts / 3000 - 0.3) < 0.05)  # each feature chosen w.p. 3/10
