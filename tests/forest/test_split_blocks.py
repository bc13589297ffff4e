"""The rewritten uint8 two-probe kernels vs the frozen old kernels and tests/naive.py.

Covers the new code paths: the feature-major gather (32-row blocks, m not a
multiple of 32), the radix-sorted small-node path and the histogram path just
below/above the crossover (HIST_MIN_SAMPLES = 512), sample chunks of the
histogram path, constant pairs, duplicated rows (bootstrap) and
min_samples_leaf edge cases.  The new kernels must pick exactly the old
kernels' split (pair, threshold) with the same gain.
"""

import numpy as np
import pytest

from facesegment.forest import twoprobe
from facesegment.forest._criteria import gather_columns
from tests import naive
from tests.forest import legacy_split_kernels as legacy


def _windows(rng, n, p=60, n_classes=8):
    """Smooth-ish uint8 rows (natural-image-like differences, many ties)."""
    base = rng.integers(0, 256, size=(n, 1)).astype(np.int32)
    X = np.clip(base + rng.integers(-20, 21, size=(n, p)), 0, 255).astype(np.uint8)
    X[:, 5] = 77  # constant feature: pairs (5, 5') with another constant
    X[:, 6] = 77
    X[:, ::7] //= 16
    y = rng.integers(0, n_classes, size=n).astype(np.int32)
    y[X[:, 1].astype(int) - X[:, 2] > 3] = 0
    return X, y


def _old(X, y, idx, fa, fb, n_classes, min_leaf):
    k, t, g = legacy.legacy_pair_split(X, y, idx, fa, fb, n_classes, min_leaf)
    return (-1, -1, 0.0, -1.0) if k < 0 else (int(fa[k]), int(fb[k]), float(t), float(g))


@pytest.mark.parametrize("m", [1, 2, 3, 31, 32, 33, 100, 511, 512, 513, 1000])
@pytest.mark.parametrize("min_leaf", [1, 5, 300])
def test_pair_split_identical_to_old_kernels(m, min_leaf):
    rng = np.random.default_rng(1000 * m + min_leaf)
    X, y = _windows(rng, 1200)
    idx = np.sort(rng.choice(1200, size=m, replace=False)).astype(np.int64)
    fa, fb = twoprobe.sample_pairs(rng, X.shape[1], 37)  # not a multiple of anything
    fa[:3], fb[:3] = 5, 6  # constant pairs first
    new = twoprobe.best_pair_split(X, y, idx, fa, fb, 8, min_leaf)
    assert new == _old(X, y, idx, fa, fb, 8, min_leaf)
    if new[0] >= 0:
        ng = naive.naive_pair_split(X, y, idx, fa, fb, 8, min_leaf)[3]
        assert new[3] == pytest.approx(ng, abs=1e-9)
        d = X[idx, new[0]].astype(np.float32) - X[idx, new[1]].astype(np.float32)
        left = d <= np.float32(new[2])
        assert min(left.sum(), (~left).sum()) >= min_leaf


@pytest.mark.parametrize("m", [40, 600])
def test_pair_split_with_duplicated_rows(m):
    rng = np.random.default_rng(m)
    X, y = _windows(rng, 300)
    idx = np.sort(rng.integers(0, 300, size=m)).astype(np.int64)  # bootstrap sample
    fa, fb = twoprobe.sample_pairs(rng, X.shape[1], 50)
    assert twoprobe.best_pair_split(X, y, idx, fa, fb, 8, 5) == _old(X, y, idx, fa, fb, 8, 5)


@pytest.mark.parametrize("chunk", [512, 700, 1999, 5000])
def test_hist_path_sample_chunks(chunk):
    rng = np.random.default_rng(chunk)
    X, y = _windows(rng, 2500)
    idx = np.sort(rng.choice(2500, size=2000, replace=False)).astype(np.int64)
    fa, fb = twoprobe.sample_pairs(rng, X.shape[1], 45)
    a = twoprobe._pair_split_hist_u8(X, y, idx, fa, fb, 8, 3, chunk)
    b = legacy._pair_split_hist_u8(X, y, idx, fa, fb, 8, 3, legacy._EDGES_DIFF)
    assert (a[0], float(a[1]), a[2]) == (b[0], float(b[1]), b[2])


def test_no_valid_split_and_large_min_leaf():
    X = np.full((600, 4), 9, dtype=np.uint8)
    y = (np.arange(600) % 3).astype(np.int32)
    fa = np.array([0, 1, 2], dtype=np.int64)
    fb = np.array([1, 2, 3], dtype=np.int64)
    for m in (10, 600):
        idx = np.arange(m, dtype=np.int64)
        assert twoprobe.best_pair_split(X, y, idx, fa, fb, 3, 1) == (-1, -1, 0.0, -1.0)
    X[:, 0] = np.arange(600) % 256
    for m in (10, 600):
        idx = np.arange(m, dtype=np.int64)
        assert twoprobe.best_pair_split(X, y, idx, fa, fb, 3, m // 2 + 1)[0] == -1
        got = twoprobe.best_pair_split(X, y, idx, fa, fb, 3, m // 2)
        assert got == _old(X, y, idx, fa, fb, 3, m // 2) and got[0] == 0


def test_exact_ties_pick_first_pair_and_lowest_threshold():
    # columns 0-1 and 2-3 give the same partition; the first pair must win
    X = np.array([[0, 0, 5, 5], [0, 0, 5, 5], [9, 0, 9, 0], [9, 0, 9, 0]] * 150, dtype=np.uint8)
    y = np.array([0, 0, 1, 1] * 150, dtype=np.int32)
    fa = np.array([2, 0], dtype=np.int64)
    fb = np.array([3, 1], dtype=np.int64)
    for m in (8, 600):
        idx = np.arange(m, dtype=np.int64)
        got = twoprobe.best_pair_split(X, y, idx, fa, fb, 2, 1)
        assert got == _old(X, y, idx, fa, fb, 2, 1)
        assert got[:3] == (2, 3, 4.5) and got[3] == pytest.approx(np.log(2))


@pytest.mark.parametrize("m", [1, 31, 32, 65])
def test_gather_columns(m):
    rng = np.random.default_rng(m)
    X = rng.integers(0, 256, size=(100, 50)).astype(np.uint8)
    idx = np.sort(rng.integers(0, 100, size=m)).astype(np.int64)
    feats = np.array([0, 3, 4, 49], dtype=np.int64)
    T = np.empty((4, m), dtype=np.uint8)
    gather_columns(X, idx, 0, m, feats, T)
    np.testing.assert_array_equal(T, X[idx][:, feats].T)


@pytest.mark.parametrize("m", [0, 1, 2, 17, 32, 64, 300])
def test_insertion_sort_is_the_radix_order(m):
    """Both sorts of the small-node path give the same (stable) order."""
    from facesegment.forest._criteria import insertion_sort_codes, radix_sort_codes

    rng = np.random.default_rng(m)
    shift = 3
    keys = rng.integers(0, 511, size=m) if m < 100 else rng.integers(250, 260, size=m)
    codes = ((keys << shift) | rng.integers(0, 8, size=m)).astype(np.int32)
    a = np.full(m, -1, dtype=np.int32)
    b = np.full(m, -1, dtype=np.int32)
    insertion_sort_codes(codes, m, shift, a)
    radix_sort_codes(codes, m, shift, np.empty(m, np.int32), b, np.empty(32, np.int32),
                     np.empty(16, np.int32))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, codes[np.argsort(codes >> shift, kind="stable")])


def _float_rows(rng, n, p=24):
    """float32 rows with ties, signed zeros and a constant feature (rotated-like values)."""
    X = (rng.normal(size=(n, p)) * 10.0 ** rng.integers(-3, 3, size=p)).astype(np.float32)
    X[:, 1] = np.round(X[:, 1])          # many ties
    X[rng.random(n) < 0.1, 2] = -0.0     # signed zeros beside +0.0
    X[rng.random(n) < 0.1, 2] = 0.0
    X[:, 3] = 1.5                        # constant
    y = rng.integers(0, 8, size=n).astype(np.int32)
    y[X[:, 0] > 0.5] = 0
    return X, y


@pytest.mark.parametrize("m", [2, 50, 127, 128, 129, 700, 3000])
@pytest.mark.parametrize("min_leaf", [1, 5])
def test_float_splits_identical_to_merge_sort_kernels(m, min_leaf):
    """The float searches sort by radix (facesegment.forest._sort) in candidate
    groups; the frozen merge-sort kernels must give the same split and gain."""
    from facesegment.forest import axis
    from tests.forest import legacy_float_kernels

    rng = np.random.default_rng(m + 7 * min_leaf)
    X, y = _float_rows(rng, 3500)
    idx = np.sort(rng.integers(0, 3500, size=m)).astype(np.int64)
    feats = rng.permutation(X.shape[1]).astype(np.int64)
    new = axis._axis_split_sorted(X, y, idx, feats, 8, min_leaf)
    assert new == legacy_float_kernels._axis_split_sorted(X, y, idx, feats, 8, min_leaf)
    fa, fb = twoprobe.sample_pairs(rng, X.shape[1], 30)
    assert (twoprobe._pair_split_sorted(X, y, idx, fa, fb, 8, min_leaf)
            == legacy._pair_split_sorted(X, y, idx, fa, fb, 8, min_leaf))


def test_float_axis_candidate_groups():
    """Candidates gathered a few at a time (GATHER_BYTES) give the same split."""
    from facesegment.forest import axis

    rng = np.random.default_rng(5)
    X, y = _float_rows(rng, 2000)
    idx = np.arange(2000, dtype=np.int64)
    feats = np.arange(X.shape[1], dtype=np.int64)
    whole = axis._axis_split_sorted(X, y, idx, feats, 8, 5)
    assert axis._axis_split_sorted(X, y, idx, feats, 8, 5, 3 * 4 * 2000) == whole  # groups of 3
