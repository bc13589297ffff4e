"""CO2Forest plumbing: oblique nodes stored on raw features, normalisation,
float16 storage, determinism, parameters (the optimiser itself: test_co2.py)."""

import numpy as np
import pytest

from facesegment.forest import AxisAlignedForest, CO2Forest, feature_stats
from tests import naive


def _oblique_data(n=600, seed=0):
    """uint8 data whose classes are separated by an oblique hyperplane."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, 24), dtype=np.uint8)
    s = X[:, 0].astype(int) + X[:, 1] - X[:, 2]
    y = (s > np.median(s)).astype(int)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = _oblique_data()
    clf = CO2Forest(n_estimators=3, max_depth=4, max_features="all", oblique_min_samples=50,
                    random_state=0).fit(X, y)
    return X, y, clf


def test_oblique_splits_are_used_and_predict_like_naive(fitted):
    X, y, clf = fitted
    fa = clf.forest_
    assert fa.weights.shape[0] > 0 and fa.weights.dtype == np.float32
    ob = fa.oblique >= 0
    assert (fa.feature[ob] == -1).all()
    assert (fa.n_samples[ob] >= 50).all()
    assert sorted(fa.oblique[ob]) == list(range(fa.weights.shape[0]))
    np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0, atol=1e-6)
    # raw-feature evaluation (float64 naive) agrees except within rounding of a threshold
    agree = np.mean(np.all(np.isclose(clf.predict_proba(X[:100]),
                                      naive.naive_forest_proba(fa, X[:100]), atol=1e-6), axis=1))
    assert agree >= 0.97
    st = clf.tree_stats_[0]
    assert st["co2"]["calls"] >= 1 and st["n_oblique"] >= 1 and st["t_oblique"] > 0


def test_co2_beats_axis_on_oblique_data(fitted):
    X, y, clf = fitted
    Xt, yt = _oblique_data(400, 1)
    ax = AxisAlignedForest(n_estimators=3, max_depth=4, max_features="all",
                           random_state=0).fit(X, y)
    assert clf.score(Xt, yt) > ax.score(Xt, yt)


def test_deterministic_any_n_jobs_and_windows_shape():
    X, y = _oblique_data(300, 2)
    kw = dict(n_estimators=2, max_depth=3, oblique_min_samples=40, random_state=3)
    a = CO2Forest(n_jobs=1, **kw).fit(X, y)
    b = CO2Forest(n_jobs=2, **kw).fit(X, y)
    for name in a.forest_._fields:
        np.testing.assert_array_equal(getattr(a.forest_, name), getattr(b.forest_, name))


def test_float16_weights_refit_threshold(fitted):
    X, y, c32 = fitted
    c16 = CO2Forest(**{**c32.get_params(), "weight_dtype": "float16"}).fit(X, y)
    fa = c16.forest_
    assert fa.weights.dtype == np.float16 and fa.weights.shape[0] > 0
    # each stored oblique split separates its training samples as in training:
    # stats recorded in n_samples of the children add up (checked via apply)
    leaves = c16.apply(X)
    assert leaves.shape == (len(X), 3)
    assert abs(c16.score(X, y) - c32.score(X, y)) < 0.1


def test_normalisation_given_or_computed():
    X, y = _oblique_data(200, 3)
    mean, std = feature_stats(X, chunk=64)
    np.testing.assert_allclose(mean, X.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(std, X.std(axis=0), rtol=1e-4)
    kw = dict(n_estimators=1, max_depth=2, oblique_min_samples=20, random_state=0)
    a = CO2Forest(**kw).fit(X, y)
    b = CO2Forest(**kw).fit(X, y, feature_mean=mean, feature_std=std)
    np.testing.assert_array_equal(a.feature_mean_, b.feature_mean_)
    np.testing.assert_array_equal(a.forest_.threshold, b.forest_.threshold)
    with pytest.raises(ValueError, match="feature_mean"):
        CO2Forest(**kw).fit(X, y, feature_mean=mean[:3], feature_std=std)


def test_co2_defaults_and_bad_params():
    from facesegment.forest.co2 import CO2_DEFAULTS
    clf = CO2Forest()
    assert clf.co2_params() == CO2_DEFAULTS
    assert CO2Forest(nu=4, tau=3).co2_params() == {**CO2_DEFAULTS, "nu": 4.0, "tau": 3}
    X, y = _oblique_data(50, 4)
    for kw, match in [({"nu": -1.0}, "nu"), ({"momentum": 1.0}, "momentum"),
                      ({"tau": 0}, "tau"), ({"weight_dtype": "int4"}, "weight_dtype"),
                      ({"weight_dtype": "int16", "max_nonzero": 4}, "weight_dtype"),
                      ({"oblique_min_samples": 1}, "oblique_min_samples")]:
        with pytest.raises(ValueError, match=match):
            CO2Forest(n_estimators=1, **kw).fit(X, y)
