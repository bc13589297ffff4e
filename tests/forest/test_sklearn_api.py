"""The forests as scikit-learn estimators: check_estimator, model selection tools,
pickling, sample_weight, feature_importances_, n_jobs at predict, no side effects,
parameter constraints.  Every kind of the registry is covered."""

import inspect
import pickle
import warnings

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier
from sklearn.calibration import CalibratedClassifierCV
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import (check_estimator,
                                            check_sample_weight_equivalence_on_dense_data)

from facesegment.forest import (constraints_of, AxisAlignedForest, CO2Forest,
                                ForestArrays, InvalidParameterError, TwoProbeForest,
                                resolve_max_features, validate_params)
from facesegment.forest.base import (PARALLEL_MIN_WORK, _resolve_max_features, check_X,
                                     forest_feature_importances)
from facesegment.forest.registry import KINDS

KIND_NAMES = [k for k, v in KINDS.items() if v.task == "classify"]
#: Checks that genuinely cannot pass with the default bootstrap=True.
EXPECTED_FAILED = {
    "check_sample_weight_equivalence_on_dense_data":
        "bootstrap=True draws rows with probability proportional to the weight: "
        "equivalent to repeating rows in distribution, not draw for draw (as "
        "scikit-learn's RandomForestClassifier)",
}


def expected_failed(est):
    """The expected failures of ``est``: :data:`EXPECTED_FAILED`, and without
    bootstrap the class-weight check (class weights are draw probabilities, refused
    with ``bootstrap=False``, the default of extra-trees, ferns and rotation forests)."""
    out = dict(EXPECTED_FAILED)
    if not est.get_params()["bootstrap"]:
        out["check_class_weight_classifiers"] = ("class weights are draw probabilities; "
                                                 "bootstrap=False refuses them")
    return out


#: Kinds whose depth parameter is not ``max_depth`` (ferns have a fixed depth).
DEPTH = {"ferns": "depth"}


def depth(kind, value):
    """``{depth parameter of kind: value}`` (ferns: ``depth``, which has no None)."""
    name = DEPTH.get(kind, "max_depth")
    return {name: (8 if value is None else value) if name == "depth" else value}


def small(kind, **params):
    """A small estimator of ``kind`` (3 trees; 10 ferns: one random fern is weak)."""
    n = 10 if kind == "ferns" else 3
    return KINDS[kind].make(**{"n_estimators": n, "random_state": 0, **params})


def _uint8_data(n=300, p=20, seed=0):
    """uint8 rows whose class is ``x[3] > 127`` (feature 3 is the informative one)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, p), dtype=np.uint8)
    return X, (X[:, 3] > 127).astype(int)


def _float_data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    return X, (X[:, 0] - X[:, 1] > 0).astype(int)


def _same_forest(a, b):
    for name in a.forest_._fields:
        x, y = getattr(a.forest_, name), getattr(b.forest_, name)
        if x is None or y is None:  # optional arrays (missing_left)
            assert x is None and y is None, name
            continue
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name


# ------------------------------------------------------------- check_estimator
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_check_estimator_passes(kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SkipTestWarning for pandas / array API checks
        check_estimator(small(kind), expected_failed_checks=expected_failed(small(kind)))


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_check_estimator_passes_without_bootstrap_including_weights(kind):
    """bootstrap=False: integer weights repeat rows exactly, so every check passes
    (but class weights, which are draw probabilities: refused without bootstrap)."""
    expected = {"check_class_weight_classifiers":
                "class weights are draw probabilities; bootstrap=False refuses them"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(small(kind, bootstrap=False), expected_failed_checks=expected)


def test_expected_failure_is_genuine():
    with pytest.raises(AssertionError, match="not equivalent"):
        check_sample_weight_equivalence_on_dense_data("AxisAlignedForest", small("axis"))


# ------------------------------------------------------------- sklearn tooling
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_pipeline_grid_search_and_cross_validation(kind):
    X, y = _float_data()
    pipe = Pipeline([("scale", StandardScaler()), ("forest", small(kind))])
    name, values = next(iter(depth(kind, 1).items())), None
    name, values = name[0], [1, depth(kind, None)[name[0]]]
    grid = GridSearchCV(pipe, {f"forest__{name}": values},
                        cv=StratifiedKFold(3, shuffle=True, random_state=0))
    grid.fit(X, y)
    assert grid.best_params_[f"forest__{name}"] in values
    assert grid.score(X, y) > 0.8
    scores = cross_val_score(small(kind), X, y, cv=StratifiedKFold(3))
    assert scores.shape == (3,) and scores.mean() > 0.6
    assert is_classifier(small(kind)) and is_classifier(grid)


@pytest.mark.parametrize("kind", ["axis", "co2"])
def test_calibrated_classifier(kind):
    X, y = _float_data(150)
    cal = CalibratedClassifierCV(small(kind), cv=3).fit(X, y)
    proba = cal.predict_proba(X)
    assert proba.shape == (150, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_pickle_and_clone(kind):
    X, y = _uint8_data()
    est = small(kind, **depth(kind, 4))
    assert pickle.loads(pickle.dumps(est)).get_params() == est.get_params()
    est.fit(X, y)
    est.predict(X)  # prediction leaves nothing unpicklable behind
    back = pickle.loads(pickle.dumps(est))
    assert back.predict_proba(X).tobytes() == est.predict_proba(X).tobytes()
    np.testing.assert_array_equal(back.apply(X), est.apply(X))
    cl = clone(est)
    assert cl.get_params() == est.get_params() and not hasattr(cl, "forest_")
    _same_forest(cl.fit(X, y), est)


@pytest.mark.parametrize("method", ["predict", "predict_proba", "apply", "score"])
def test_not_fitted_error(method):
    X, y = _uint8_data(10)
    args = (X, y) if method == "score" else (X,)
    with pytest.raises(NotFittedError, match="not fitted"):
        getattr(AxisAlignedForest(), method)(*args)
    with pytest.raises(NotFittedError):
        AxisAlignedForest().feature_importances_  # noqa: B018


# ------------------------------------------------------------------ input data
def test_uint8_windows_are_not_copied_and_others_become_float32():
    rng = np.random.default_rng(0)
    W = rng.integers(0, 256, size=(5, 31, 31, 3), dtype=np.uint8)
    V = check_X(W)
    assert V.dtype == np.uint8 and V.shape == (5, 2883) and np.shares_memory(V, W)
    est = AxisAlignedForest(n_estimators=1).fit(W, np.arange(5) % 2)
    assert np.shares_memory(est._validate_X(W, reset=False), W)
    assert check_X(W.astype(np.float64)).dtype == np.float32
    assert check_X(W.astype(np.int16)).dtype == np.float32


def test_a_checked_uint8_matrix_skips_validation_with_the_same_result():
    """A C-contiguous uint8 matrix of the fitted width is what validate_data
    returns as it stands, so predict takes it directly: the same numbers as
    the validated path (a Fortran-ordered copy), and bad inputs still get
    scikit-learn's errors."""
    X, y = _uint8_data(60)
    est = AxisAlignedForest(n_estimators=3, random_state=0).fit(X, y)
    assert est._check_predict(X) is X
    assert est._check_predict(np.asfortranarray(X)) is not X
    np.testing.assert_array_equal(est.predict_proba(X),
                                  est.predict_proba(np.asfortranarray(X)))
    with pytest.raises(ValueError, match="expecting 20 features"):
        est.predict(np.ascontiguousarray(X[:, :3]))
    with pytest.raises(ValueError, match="minimum of 1 is required"):
        est.predict(X[:0])


def test_input_errors():
    X, y = _uint8_data(40)
    est = AxisAlignedForest(n_estimators=1)
    with pytest.raises(TypeError, match="[Ss]parse"):
        est.fit(sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match="Unknown label type"):
        est.fit(X, np.linspace(0, 1, 40))
    with pytest.raises(ValueError, match="0 feature"):
        est.fit(np.zeros((40, 0)), y)
    with pytest.raises(ValueError, match="inf"):
        est.fit(np.where(X > 250, np.inf, 1.0), y)
    est.fit(X, y)
    with pytest.raises(ValueError, match="Reshape your data"):
        est.predict(X[0])
    with pytest.raises(ValueError, match="X has 3 features, but AxisAlignedForest is "
                                         "expecting 20 features"):
        est.predict(X[:, :3])


def test_column_y_warns_and_is_ravelled():
    X, y = _uint8_data(60)
    with pytest.warns(DataConversionWarning):
        a = small("axis").fit(X, y[:, None])
    _same_forest(a, small("axis").fit(X, y))


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("dtype", ["U", object])
def test_string_classes_round_trip(kind, dtype):
    X, y = _uint8_data(200)
    labels = np.array(["cat", "dog"], dtype=dtype)[y]
    est = small(kind).fit(X, labels)
    assert est.classes_.dtype == labels.dtype and list(est.classes_) == ["cat", "dog"]
    pred = est.predict(X)
    assert pred.dtype == labels.dtype and set(pred) <= {"cat", "dog"}
    assert np.mean(pred == labels) > 0.9 and est.score(X, labels) > 0.9


# --------------------------------------------------------------- sample_weight
@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("bootstrap", [True, False])
def test_unit_weights_give_the_unweighted_forest(kind, bootstrap):
    X, y = _uint8_data(250)
    kw = dict(bootstrap=bootstrap, max_samples=None if bootstrap else 0.8, **depth(kind, 5))
    if kind.startswith("co2"):
        kw["oblique_min_samples"] = 60
    ref = small(kind, **kw).fit(X, y)
    _same_forest(small(kind, **kw).fit(X, y, sample_weight=np.ones(len(y))), ref)
    _same_forest(small(kind, **kw).fit(X, y, sample_weight=[1] * len(y)), ref)
    if bootstrap:  # weights are relative draw probabilities: their scale does not matter
        _same_forest(small(kind, **kw).fit(X, y, sample_weight=np.full(len(y), 2.5)), ref)
    weighted = small(kind, **kw).fit(X, y, sample_weight=1.0 + (y == 1))
    assert not np.array_equal(weighted.forest_.value, ref.forest_.value)


@pytest.mark.parametrize("kind", ["axis", "two-probe"])
def test_integer_weights_without_bootstrap_repeat_and_drop_rows(kind):
    X, y = _uint8_data(200, seed=1)
    w = np.random.default_rng(2).integers(0, 4, size=len(y))
    for max_samples in (None, 0.7):
        kw = dict(bootstrap=False, max_samples=max_samples)
        weighted = small(kind, **kw).fit(X, y, sample_weight=w)
        repeated = small(kind, **kw).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
        _same_forest(weighted, repeated)
    zero_one = (w > 0).astype(float)
    dropped = small(kind, bootstrap=False).fit(X[w > 0], y[w > 0])
    _same_forest(small(kind, bootstrap=False).fit(X, y, sample_weight=zero_one), dropped)


def test_bootstrap_draws_in_proportion_to_weight_and_never_zero_weight():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(1000, 5), dtype=np.uint8)
    y = np.arange(1000) % 3
    w = np.where(y == 0, 3.0, 1.0)
    w[y == 2] = 0.0
    est = AxisAlignedForest(n_estimators=4, max_depth=1, max_samples=20000,
                            random_state=0).fit(X, y, sample_weight=w)
    root = est.forest_.value[est.forest_.roots]
    assert (root[:, 2] == 0).all() and list(est.classes_) == [0, 1, 2]
    np.testing.assert_allclose(root[:, 0], 0.75, atol=0.02)
    # max_samples=None: as many draws as rows of positive weight
    est = AxisAlignedForest(n_estimators=2, random_state=0).fit(X, y, sample_weight=w)
    assert (est.forest_.n_samples[est.forest_.roots] == np.count_nonzero(w)).all()
    assert (est.forest_.value[:, 2] == 0).all()


@pytest.mark.parametrize("bad, match", [
    (-np.ones(40), "negative"),
    (np.full(40, np.nan), "NaN"),
    (np.ones(39), r"shape \(39,\)"),
    (np.ones((40, 2)), "shape"),
    (np.zeros(40), "zero"),
])
def test_bad_sample_weight(bad, match):
    X, y = _uint8_data(40)
    with pytest.raises(ValueError, match=match):
        AxisAlignedForest(n_estimators=1).fit(X, y, sample_weight=bad)


def test_fractional_weights_without_bootstrap_are_refused():
    X, y = _uint8_data(40)
    with pytest.raises(ValueError, match="non-integer.*bootstrap=True"):
        AxisAlignedForest(n_estimators=1, bootstrap=False).fit(X, y,
                                                               sample_weight=np.full(40, 0.5))


def test_co2_normalisation_is_weighted():
    X, y = _uint8_data(200)
    w = np.random.default_rng(0).integers(0, 3, size=200)
    est = CO2Forest(n_estimators=1, max_depth=2, random_state=0).fit(X, y, sample_weight=w)
    Xr = np.repeat(X, w, axis=0).astype(np.float64)
    np.testing.assert_allclose(est.feature_mean_, Xr.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(est.feature_std_, Xr.std(axis=0), rtol=1e-4)


# ---------------------------------------------------------- feature importances
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_feature_importances_find_the_informative_feature(kind):
    X, y = _uint8_data(400)
    est = small(kind, max_features="all") if "max_features" in small(kind).get_params() \
        else small(kind)
    if kind.startswith("co2"):
        est.set_params(oblique_min_samples=50, max_depth=4)
    imp = est.fit(X, y).feature_importances_
    assert imp.shape == (20,) and imp.dtype == np.float64 and (imp >= 0).all()
    assert imp.sum() == pytest.approx(1.0)
    # ferns draw their tests at random: importance is spread over every feature
    # a test used, so the informative one leads by less
    assert np.argmax(imp) == 3 and imp[3] > (0.1 if kind == "ferns" else 0.3)


def _hand_forest():
    """One tree: an axis root (feature 0), a two-probe child (1 - 2) and an oblique child."""
    i32, f32 = np.int32, np.float32
    value = np.array([[.5, .5], [.9, .1], [.2, .8], [1, 0], [0, 1], [0, 1], [1, 0]], f32)
    return ForestArrays(
        roots=np.array([0], i32), left=np.array([1, 3, 5, -1, -1, -1, -1], i32),
        right=np.array([2, 4, 6, -1, -1, -1, -1], i32),
        feature=np.array([0, 1, -1, -1, -1, -1, -1], i32),
        feature2=np.array([-1, 2, -1, -1, -1, -1, -1], i32),
        oblique=np.array([-1, -1, 0, -1, -1, -1, -1], i32),
        threshold=np.zeros(7, f32), value=value, depth=np.array([0, 1, 1, 2, 2, 2, 2], i32),
        n_samples=np.array([20, 10, 10, 9, 1, 8, 2], i32),
        weights=np.array([[0, 0, 0, 2.0, -1.0]], f32))


def test_feature_importances_attribution_by_hand():
    fa = _hand_forest()

    def h(p):
        p = np.asarray(p, float)
        p = p[p > 0]
        return -(p * np.log(p)).sum()

    d_root = 20 * h([.5, .5]) - 10 * h([.9, .1]) - 10 * h([.2, .8])
    d_two = 10 * h([.9, .1])
    d_obl = 10 * h([.2, .8])
    std = np.array([1, 1, 1, 1, 4.0])
    expect = np.zeros(5)
    expect[0] = d_root
    expect[1] = expect[2] = d_two / 2
    expect[3] = d_obl * 2 / (2 + 4)  # |w_j| * std_j: 2 * 1 and 1 * 4
    expect[4] = d_obl * 4 / (2 + 4)
    got = forest_feature_importances(fa, 5, std)
    np.testing.assert_allclose(got, expect / expect.sum(), rtol=1e-6)
    plain = forest_feature_importances(fa, 5)
    assert plain[3] == pytest.approx(2 * plain[4])
    leaf = fa._replace(left=np.full(7, -1, np.int32), right=np.full(7, -1, np.int32))
    assert (forest_feature_importances(leaf, 5) == 0).all()


# ----------------------------------------------------------- prediction threads
@pytest.mark.parametrize("kind", ["axis", "co2"])
def test_n_jobs_at_predict_same_result_and_threads_restored(kind):
    X, y = _uint8_data(400)
    est = small(kind, max_depth=6).fit(X, y)
    Xt = np.random.default_rng(5).integers(0, 256, size=(PARALLEL_MIN_WORK // 3 + 64, 20),
                                           dtype=np.uint8)
    before = numba.get_num_threads()
    ref = est.set_params(n_jobs=None).predict_proba(Xt)
    for n_jobs in (1, 2, -1):
        est.set_params(n_jobs=n_jobs)
        assert est.predict_proba(Xt).tobytes() == ref.tobytes()
        np.testing.assert_array_equal(est.apply(Xt[:500]), est.set_params(n_jobs=1).apply(
            Xt[:500]))
        assert numba.get_num_threads() == before
    with pytest.raises(ValueError, match="n_jobs"):
        est.set_params(n_jobs=0).predict(Xt[:5])


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_prediction_has_no_side_effects(kind):
    X, y = _uint8_data(200)
    est = small(kind).fit(X, y)
    before = dict(est.__dict__)
    est.predict(X)
    est.predict_proba(X, max_depth=2, n_trees=2)
    est.apply(X)
    est.score(X, y)
    est.feature_importances_  # noqa: B018
    assert est.__dict__.keys() == before.keys()
    assert all(est.__dict__[k] is v for k, v in before.items())


# ---------------------------------------------------------- parameter constraints
@pytest.mark.parametrize("cls", [AxisAlignedForest, TwoProbeForest, CO2Forest])
def test_constraints_table_matches_signatures(cls):
    sig = inspect.signature(cls.__init__)
    names = {n for n in sig.parameters if n != "self"}
    assert set(constraints_of(cls)) == names
    defaults = {n: p.default for n, p in sig.parameters.items() if n != "self"}
    validate_params(cls, defaults)  # the defaults satisfy the table


@pytest.mark.parametrize("cls, params, match", [
    (AxisAlignedForest, {"n_estimators": 0}, r"n_estimators=0 .* integer >= 1"),
    (AxisAlignedForest, {"n_estimators": 2.0}, "n_estimators=2.0"),
    (AxisAlignedForest, {"max_features": "cube"}, "max_features='cube'.*'p\\^0.7'"),
    (AxisAlignedForest, {"max_samples": 1.5}, "max_samples=1.5"),
    (AxisAlignedForest, {"bootstrap": "yes"}, "bootstrap='yes'.*True or False"),
    (TwoProbeForest, {"n_jobs": -2}, "n_jobs=-2.*-1"),
    (CO2Forest, {"momentum": 1.0}, r"momentum=1.0 .*\[0, 1\)"),
    (CO2Forest, {"init": "random"}, "init='random'.*'axis', 'best'"),
    (CO2Forest, {"depth": 3}, "'depth' is not a parameter of CO2Forest"),
])
def test_validate_params_errors_name_parameter_value_and_fix(cls, params, match):
    with pytest.raises(InvalidParameterError, match=match) as info:
        validate_params(cls, params)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    if "depth" not in params:
        with pytest.raises(ValueError, match=next(iter(params))):
            cls(**params).fit(*_uint8_data(20))


def test_validate_params_normalises():
    from facesegment.forest.co2 import CO2_DEFAULTS

    got = validate_params(CO2Forest(), {"nu": np.int64(2), "tau": None, "max_features": " P^0.7",
                                        "bootstrap": np.bool_(False)})
    assert got == {"nu": 2.0, "tau": CO2_DEFAULTS["tau"], "max_features": "p^0.7",
                   "bootstrap": False}
    assert type(got["nu"]) is float and type(got["bootstrap"]) is bool
    assert CO2Forest(nu=4, tau=3).co2_params() == {**CO2_DEFAULTS, "nu": 4.0, "tau": 3}
    assert AxisAlignedForest(max_depth=np.int32(3))._check_common()["max_depth"] == 3
    assert validate_params(AxisAlignedForest, {"verbose": True}) == {"verbose": 1}


def test_resolve_max_features():
    assert resolve_max_features("sqrt", 2883) == 53
    assert resolve_max_features("log2", 2883) == 11
    assert resolve_max_features("p^0.7", 2883) == round(2883 ** 0.7) == 264
    assert resolve_max_features("all", 7) == resolve_max_features(None, 7) == 7
    assert resolve_max_features(0.5, 10) == 5 and resolve_max_features(0.01, 10) == 1
    assert resolve_max_features(5000, 2883) == 2883
    assert _resolve_max_features("p^0.5", 2883) == 54
    for bad in ("p^0", "p^1.5", 0, 1.5, True, "cube"):
        with pytest.raises(ValueError, match="max_features"):
            resolve_max_features(bad, 10)
