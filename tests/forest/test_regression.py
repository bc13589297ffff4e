"""Regression forests: the tree kernel against its naive twin, the estimators
against scikit-learn's checks, determinism, weights, importances, models."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from facesegment.forest import (AxisAlignedForestRegressor, ExtraTreesForestRegressor,
                                InvalidParameterError, constraints_of,
                                validate_params)
from facesegment.forest import regression as reg_mod
from facesegment.forest._regression_kernels import next_uniform, regression_nodes
from facesegment.forest.registry import KINDS, get_kind, kind_of
from facesegment.modelio.model import Model, save_model
from facesegment.models import load_model
from tests.naive_regression import (NaiveSplitMix, naive_regression_tree,
                                    naive_sse_importances)

CLASSES = {"axis-regressor": AxisAlignedForestRegressor,
           "extra-regressor": ExtraTreesForestRegressor}
EXPECTED_FAILED = {
    "check_sample_weight_equivalence_on_dense_data":
        "bootstrap=True draws rows with probability proportional to the weight: "
        "equivalent to repeating rows in distribution, not draw for draw",
}


def _data(n=200, p=5, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        X = rng.integers(0, 256, size=(n, p), dtype=np.uint8)
        y = X[:, 0] / 25.0 + np.sin(X[:, 1] / 40.0) + rng.normal(0, 0.3, n)
    else:
        X = rng.normal(size=(n, p)).astype(np.float32)
        y = 2 * X[:, 0] + X[:, 1] ** 2 + rng.normal(0, 0.3, n)
    return X, y


# ------------------------------------------------------------- the tree kernel
def test_next_uniform_matches_naive_splitmix():
    state = np.full(1, np.uint64(12345))
    ref = NaiveSplitMix(12345)
    for _ in range(50):
        u = next_uniform(state)
        assert u == ref.uniform() and 0.0 <= u < 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
@pytest.mark.parametrize("extra,presort", [(False, True), (False, False), (True, False)])
@pytest.mark.parametrize("q,min_leaf,max_depth", [(5, 1, -1), (2, 3, -1), (3, 1, 3)])
def test_tree_kernel_matches_naive_tree(dtype, extra, presort, q, min_leaf, max_depth):
    X, y = _data(90, 5, seed=q + min_leaf, dtype=dtype)
    rng = np.random.default_rng(1)
    rows, counts = np.unique(rng.integers(0, 90, 90), return_counts=True)
    got = regression_nodes(X, y, rows.astype(np.int64), counts.astype(np.float64), q,
                           max_depth, 2, min_leaf, extra, dtype == np.uint8, presort, 77)
    ref = naive_regression_tree(X, y, rows, counts, q, max_depth, 2, min_leaf, extra, 77)
    names = ("left", "right", "feature", "threshold", "value", "depth", "n_samples")
    for name, a in zip(names, got):
        b = np.asarray(ref[name])
        if name == "value":
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_array_equal(a, b.astype(a.dtype), err_msg=name)
    assert got[0].shape[0] > 9  # a real tree


def test_every_leaf_has_its_reason_and_every_node_its_mean():
    X, y = _data(150)
    est = AxisAlignedForestRegressor(3, min_samples_leaf=4, bootstrap=False,
                                     random_state=0).fit(X, y)
    fa = est.forest_
    leaves = est.apply(X)
    for t in range(3):
        for node in np.unique(leaves[:, t]):
            rows = leaves[:, t] == node
            assert np.isclose(fa.value[node, 0], y[rows].mean(), rtol=1e-6)
            assert fa.n_samples[node] == rows.sum() >= 4


# -------------------------------------------------------------- the estimators
@pytest.mark.parametrize("kind", list(CLASSES))
def test_check_estimator_passes(kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(get_kind(kind).make(n_estimators=5, random_state=0),
                        expected_failed_checks=EXPECTED_FAILED)
        check_estimator(get_kind(kind).make(n_estimators=5, random_state=0, bootstrap=False))


@pytest.mark.parametrize("cls", list(CLASSES.values()))
def test_same_seed_same_forest_whatever_the_threads(cls):
    X, y = _data(300, 6)
    a = cls(8, max_features=0.5, random_state=3).fit(X, y)
    b = cls(8, max_features=0.5, random_state=3, n_jobs=2).fit(X, y)
    for name in a.forest_._fields:
        x, z = getattr(a.forest_, name), getattr(b.forest_, name)
        if x is not None:
            assert x.tobytes() == z.tobytes(), name
    assert a.predict(X).tobytes() == b.predict(X).tobytes()
    c = cls(8, max_features=0.5, random_state=4).fit(X, y)
    assert c.forest_.threshold.tobytes() != a.forest_.threshold.tobytes()


@pytest.mark.parametrize("cls", list(CLASSES.values()))
def test_truncated_prediction_equals_training_with_max_depth(cls):
    X, y = _data(300, 6)
    deep = cls(4, random_state=1).fit(X, y)
    shallow = cls(4, max_depth=3, random_state=1).fit(X, y)
    np.testing.assert_array_equal(deep.predict(X, max_depth=3), shallow.predict(X))
    np.testing.assert_array_equal(deep.predict(X, n_trees=2),
                                  cls(2, random_state=1).fit(X, y).predict(X))


def test_prediction_is_the_mean_of_the_leaf_means():
    X, y = _data(200)
    est = ExtraTreesForestRegressor(5, random_state=0).fit(X, y)
    leaves = est.apply(X[:20])
    expect = est.forest_.value[leaves, 0].astype(np.float64).mean(axis=1)
    np.testing.assert_allclose(est.predict(X[:20]), expect, rtol=1e-12)


@pytest.mark.parametrize("cls", list(CLASSES.values()))
def test_integer_weights_without_bootstrap_repeat_rows(cls):
    """Same trees (no tiny nodes: there two features can make the same partition,
    and which one wins then depends on the rounding of sums taken in another order)."""
    X, y = _data(120)
    w = np.random.default_rng(0).integers(0, 4, 120)
    kw = dict(bootstrap=False, max_features=2, max_depth=4, min_samples_leaf=10, random_state=0)
    a = cls(3, **kw).fit(X, y, sample_weight=w)
    b = cls(3, **kw).fit(np.repeat(X, w, 0), np.repeat(y, w))
    for name in ("left", "feature", "threshold", "n_samples"):
        np.testing.assert_array_equal(getattr(a.forest_, name), getattr(b.forest_, name))
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-6)
    assert a.forest_.n_samples[0] == w.sum()


def test_importances_match_squared_error_decreases_on_the_training_rows():
    X, y = _data(150, 5)
    est = AxisAlignedForestRegressor(4, bootstrap=False, max_features=2,
                                     random_state=0).fit(X, y)
    np.testing.assert_allclose(est.feature_importances_,
                               naive_sse_importances(est.forest_, X, y, 5), rtol=1e-4)
    assert np.argmax(est.feature_importances_) in (0, 1)


def test_close_to_scikit_learn_on_friedman1():
    X, y = make_friedman1(600, random_state=0)
    Xt, yt = make_friedman1(400, random_state=1)
    ours = AxisAlignedForestRegressor(30, random_state=0).fit(X, y).score(Xt, yt)
    theirs = RandomForestRegressor(30, random_state=0).fit(X, y).score(Xt, yt)
    assert abs(ours - theirs) < 0.03 and ours > 0.75


def test_uint8_windows_are_read_as_they_are():
    rng = np.random.default_rng(0)
    W = rng.integers(0, 256, size=(200, 5, 5, 3), dtype=np.uint8)
    y = W[:, 2, 2, 0] / 255.0
    est = AxisAlignedForestRegressor(5, random_state=0).fit(W, y)
    assert est.n_features_in_ == 75 and est.score(W, y) > 0.9
    thr = est.forest_.threshold[est.forest_.left >= 0]
    assert np.all((2 * thr) % 1 == 0)  # midpoints of two integers


# ------------------------------------------------------------------ bad input
def test_invalid_parameters_and_prediction_limits_are_named():
    X, y = _data(50)
    with pytest.raises(InvalidParameterError, match=r"max_features=0 is invalid for "
                       "AxisAlignedForestRegressor"):
        AxisAlignedForestRegressor(max_features=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="min_samples_leaf=0 is invalid for "
                       "ExtraTreesForestRegressor"):
        ExtraTreesForestRegressor(min_samples_leaf=0).fit(X, y)
    est = AxisAlignedForestRegressor(3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=r"n_trees=4 must be an integer in 1\.\.3"):
        est.predict(X, n_trees=4)
    with pytest.raises(NotFittedError):
        AxisAlignedForestRegressor().predict(X)
    with pytest.raises(ValueError, match="Input y contains NaN"):
        AxisAlignedForestRegressor(2).fit(X, np.where(y > 0, np.nan, y))
    with pytest.raises(InvalidParameterError, match="max_samples=60 exceeds the 50 samples"):
        ExtraTreesForestRegressor(2, max_samples=60).fit(X, y)


def test_constraints_table_matches_signatures():
    for cls in CLASSES.values():
        defaults = cls().get_params()
        assert set(constraints_of(cls)) == set(defaults)
        validate_params(cls, defaults)  # the defaults satisfy the table


# ---------------------------------------------------------- registry, models
@pytest.mark.parametrize("kind", list(CLASSES))
def test_registry_rows_and_model_round_trip(kind, tmp_path):
    X, y = _data(120)
    est = get_kind(kind).make(n_estimators=4, random_state=0).fit(X, y)
    assert isinstance(est, CLASSES[kind]) and kind_of(est) == kind
    assert KINDS[kind].task == "regress"
    save_model(Model.from_estimator(est), tmp_path / "m")
    model = load_model(tmp_path / "m")
    assert model.kind == kind and model.class_names == ("target",)
    back = model.to_estimator()
    assert isinstance(back, CLASSES[kind]) and not hasattr(back, "classes_")
    assert back.predict(X).tobytes() == est.predict(X).tobytes()
    assert back.get_params()["bootstrap"] == est.get_params()["bootstrap"]


def test_regressor_with_face_windows_metadata_is_refused():
    X, y = _data(60)
    est = AxisAlignedForestRegressor(2, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="a regression forest has no face classes"):
        Model.from_estimator(est, windows_meta=object())


def test_presort_rule():
    def splitter(q=10, extra=False):
        return reg_mod.RegressionSplitter(max_features=q, extra=extra)

    assert reg_mod.use_presort(splitter(), 10, 1000, False)
    assert reg_mod.use_presort(splitter(), 10, 1000, True)
    assert not reg_mod.use_presort(splitter(extra=True), 10, 1000, False)
    assert not reg_mod.use_presort(splitter(192), 961, 1700, True)
    assert not reg_mod.use_presort(splitter(48), 961, 1700, False)
    assert reg_mod.use_presort(splitter(300), 961, 1700, False)
    assert not reg_mod.use_presort(splitter(53), 2883, 30000, False)
