"""Missing values (NaN in X) on every classifier kind: axis, two-probe, CO2
(dense, sparse), extra-trees, ferns and rotation forests learn a side per
split; the non-greedy kinds read a missing value as its feature's mean
(docs/forests-cart.md)."""

import warnings

import numpy as np
import pytest

from facesegment.forest._criteria import phi_table
from facesegment.forest._missing import apply_missing
from facesegment.forest._missing_splits import pair_split_missing, scan_missing
from facesegment.forest.registry import kind_names, make_estimator
from tests.forest.test_forest_options import params, same_arrays, tree_parts, same_parts

KINDS = kind_names(task="classify")
#: The kinds that take NaN: all of them.
NAN_KINDS = KINDS
#: The kinds whose splits learn a side for missing values (the others fill them).
SIDE_KINDS = [k for k in KINDS if "nongreedy" not in k]


def nan_data(n, seed, rate=0.05):
    """x0 is missing in 30 % of the rows, and then the class follows x1 instead:
    missingness is informative (dropping x0 leaves chance accuracy); other
    entries are missing at random (``rate``)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    miss = rng.random(n) < 0.3
    y[miss] = (X[miss, 1] < 0).astype(int)
    X[miss, 0] = np.nan
    X[rng.random(X.shape) < rate] = np.nan
    return X, y


def make(kind, **extra):
    return make_estimator(kind, **params(kind, **extra))


@pytest.mark.parametrize("kind", NAN_KINDS)
def test_nan_gives_finite_probabilities_and_beats_dropping_the_column(kind):
    X, y = nan_data(600, 0)
    Xt, yt = nan_data(1000, 1)
    est = make(kind, n_estimators=8).fit(X, y)
    proba = est.predict_proba(Xt)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    assert est.forest_.missing_left is not None
    dropped = make(kind, n_estimators=8).fit(X[:, 1:], y)
    with_nan, without = est.score(Xt, yt), dropped.score(Xt[:, 1:], yt)
    assert with_nan > without + 0.15, (with_nan, without)
    assert with_nan > 0.7


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in SIDE_KINDS])
def test_nongreedy_kinds_read_a_missing_value_as_its_feature_mean(kind, tmp_path):
    """fit and prediction fill NaN with ``feature_mean_`` (the NaN-free statistics
    of the present values), and a model folder keeps that."""
    from facesegment.modelio.model import Model, save_model
    from facesegment.models import load_model

    X, y = nan_data(300, 5, rate=0.1)
    est = make(kind, n_estimators=3).fit(X, y)
    present = np.where(np.isnan(X), 0.0, X).sum(axis=0) / (~np.isnan(X)).sum(axis=0)
    np.testing.assert_allclose(est.feature_mean_, present, rtol=1e-5, atol=1e-6)
    filled = np.where(np.isnan(X), est.feature_mean_, X).astype(np.float32)
    np.testing.assert_array_equal(est.predict_proba(X), est.predict_proba(filled))
    np.testing.assert_array_equal(est.apply(X), est.apply(filled))
    save_model(Model.from_estimator(est, kind=kind), tmp_path / "m")
    back = load_model(tmp_path / "m").to_estimator()
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))


@pytest.mark.parametrize("kind", NAN_KINDS)
def test_training_partitions_are_what_prediction_does(kind):
    """Every sample of a tree grown on all the rows reaches, at prediction, the
    leaf the grower put it in: the leaves' sample counts are the rows routed there."""
    X, y = nan_data(300, 2, rate=0.15)
    est = make(kind, bootstrap=False, n_estimators=2).fit(X, y)
    fa = est.forest_
    leaves = est.apply(X)
    for t in range(fa.n_trees):
        counts = np.bincount(leaves[:, t], minlength=fa.n_nodes)
        lo = fa.roots[t]
        hi = fa.roots[t + 1] if t + 1 < fa.n_trees else fa.n_nodes
        is_leaf = fa.left[lo:hi] < 0
        np.testing.assert_array_equal(counts[lo:hi][is_leaf], fa.n_samples[lo:hi][is_leaf])
    clean = np.nan_to_num(X[:50], nan=0.25)               # no NaN: the packed kernels
    np.testing.assert_array_equal(est.apply(clean), apply_missing(fa, clean))


@pytest.mark.parametrize("kind", NAN_KINDS)
def test_warm_start_and_oob_with_nan(kind):
    X, y = nan_data(300, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est = make(kind, n_estimators=3, bootstrap=True, warm_start=True,
                   oob_score=True).fit(X, y)
        first = [tree_parts(est.forest_, i) for i in range(3)]
        est.set_params(n_estimators=6).fit(X, y)
        fresh = make(kind, n_estimators=6, bootstrap=True, oob_score=True).fit(X, y)
    for i in range(3):
        same_parts(tree_parts(est.forest_, i), first[i])
    same_arrays(est.forest_, fresh.forest_)
    assert 0.5 < est.oob_score_ == fresh.oob_score_
    assert np.isfinite(est.oob_decision_function_).all()


@pytest.mark.parametrize("kind", ["two-probe", "co2-sparse", "ferns", "rotation", "nongreedy"])
def test_model_folder_keeps_the_missing_sides(kind, tmp_path):
    from facesegment.modelio.model import Model, save_model
    from facesegment.models import load_model

    X, y = nan_data(300, 4)
    est = make_estimator(kind, **params(kind)).fit(X, y)
    save_model(Model.from_estimator(est, kind=kind), tmp_path / "m")
    back = load_model(tmp_path / "m").to_estimator()
    np.testing.assert_array_equal(back.forest_.missing_left, est.forest_.missing_left)
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))


def _gain(vals, lab, n_classes, left):
    """Information gain (nats) of sending ``left`` left."""
    def h(mask):
        c = np.bincount(lab[mask], minlength=n_classes).astype(float)
        s = c.sum()
        return 0.0 if s == 0 else s * np.log(s) - sum(k * np.log(k) for k in c if k > 0)

    return (h(np.ones(vals.shape[0], bool)) - h(left) - h(~left)) / vals.shape[0]


def _naive_best(vals, lab, n_classes, min_leaf):
    """Brute force: every threshold at a present value (and "all present left"),
    missing values on either side; the best information gain (-1: none valid)."""
    nan = np.isnan(vals)
    best = -1.0
    for t in np.unique(vals[~nan]):
        for ml in ((0, 1) if nan.any() else (0,)):
            left = (vals <= t) | (nan & bool(ml))
            if min(left.sum(), (~left).sum()) >= min_leaf:
                best = max(best, _gain(vals, lab, n_classes, left))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_scan_missing_finds_the_best_cut_and_side(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 40))
    vals = rng.integers(0, 6, size=m).astype(np.float32)
    vals[rng.random(m) < rng.random()] = np.nan
    lab = rng.integers(0, 3, size=m).astype(np.int32)
    min_leaf = int(rng.integers(1, 4))
    t, g, ml = scan_missing(vals, lab, 3, min_leaf, phi_table(m, False))
    ref = _naive_best(vals, lab, 3, min_leaf)
    assert g == pytest.approx(ref, abs=1e-12)
    nan = np.isnan(vals)
    if g >= 0:                                          # the split returned has that gain
        assert ml in ((0, 1) if nan.any() else (-1,))
        left = (vals <= t) | (nan & (ml == 1))
        assert min(left.sum(), (~left).sum()) >= min_leaf
        assert _gain(vals, lab, 3, left) == pytest.approx(g, abs=1e-12)


def test_pair_split_missing_scores_differences_with_either_probe_missing():
    rng = np.random.default_rng(5)
    X = rng.integers(0, 5, size=(60, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.2] = np.nan
    y = rng.integers(0, 2, size=60).astype(np.int32)
    idx = np.arange(60, dtype=np.int64)
    fa, fb = np.array([0, 1, 3], np.int64), np.array([2, 3, 0], np.int64)
    k, t, g, ml = pair_split_missing(X, y, idx, fa, fb, 2, 1)
    refs = [_naive_best(X[:, a] - X[:, b], y, 2, 1) for a, b in zip(fa, fb)]
    assert g == pytest.approx(max(refs), abs=1e-12) and k == int(np.argmax(refs))
