"""AxisAlignedForest / TwoProbeForest: API, correctness against naive traversal,
determinism, truncation, input handling."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from facesegment.forest import AxisAlignedForest, NonGreedyForest, TwoProbeForest
from tests import naive


def _windows(n=240, seed=0):
    """Small synthetic uint8 windows whose class depends on a few pixels."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, 31, 31, 3), dtype=np.uint8)
    y = (X[:, 15, 15, 0] > 128).astype(np.int64) + 2 * (X[:, 3, 4, 2] > 200)
    return X, y


@pytest.fixture(scope="module")
def windows():
    return _windows()


@pytest.mark.parametrize("cls, extra", [(AxisAlignedForest, {"max_features": 200}),
                                        (TwoProbeForest, {"n_pairs": 60})])
def test_proba_rows_sum_to_one_and_shape_invariant(windows, cls, extra):
    X, y = windows
    clf = cls(n_estimators=3, random_state=0, **extra).fit(X, y)
    p4 = clf.predict_proba(X)
    p2 = clf.predict_proba(X.reshape(len(X), -1))
    np.testing.assert_array_equal(p4, p2)
    np.testing.assert_allclose(p4.sum(axis=1), 1.0, atol=1e-6)
    assert p4.shape == (len(X), 4) and list(clf.classes_) == [0, 1, 2, 3]
    assert clf.n_features_in_ == 2883
    # matches the plain-Python traversal of the same arrays
    Xf = X.reshape(len(X), -1)[:40]
    np.testing.assert_allclose(clf.predict_proba(Xf), naive.naive_forest_proba(clf.forest_, Xf),
                               atol=1e-6)
    assert set(clf.predict(X)) <= set(clf.classes_)


def test_axis_forest_learns_and_generalises():
    X, y = _windows(600, 1)
    Xt, yt = _windows(300, 2)
    clf = AxisAlignedForest(n_estimators=8, max_features=400, random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.95
    assert clf.score(Xt, yt) > 0.8


def test_leaf_values_are_class_frequencies():
    X, y = _windows(200, 3)
    Xf = X.reshape(len(X), -1)
    clf = AxisAlignedForest(n_estimators=2, bootstrap=False, min_samples_leaf=3,
                            random_state=1).fit(X, y)
    fa = clf.forest_
    leaves = clf.apply(Xf)
    for t in range(fa.n_trees):
        for node in np.unique(leaves[:, t]):
            members = y[leaves[:, t] == node]
            assert fa.left[node] == -1
            assert fa.n_samples[node] == len(members) >= 3
            np.testing.assert_allclose(fa.value[node], np.bincount(members, minlength=4)
                                       / len(members), atol=1e-6)
    # internal nodes: children partition the parent's samples
    internal = np.flatnonzero(fa.left >= 0)
    np.testing.assert_array_equal(fa.n_samples[internal],
                                  fa.n_samples[fa.left[internal]] + fa.n_samples[fa.right[internal]])
    np.testing.assert_array_equal(fa.depth[fa.left[internal]], fa.depth[internal] + 1)


@pytest.mark.parametrize("cls", [AxisAlignedForest, TwoProbeForest])
def test_same_seed_identical_any_n_jobs(windows, cls):
    X, y = windows
    a = cls(n_estimators=4, random_state=7, n_jobs=1).fit(X, y)
    b = cls(n_estimators=4, random_state=7, n_jobs=2).fit(X, y)
    c = cls(n_estimators=4, random_state=8, n_jobs=2).fit(X, y)
    for name in a.forest_._fields:
        np.testing.assert_array_equal(getattr(a.forest_, name), getattr(b.forest_, name))
    assert not np.array_equal(a.forest_.feature, c.forest_.feature)


def test_truncation_equals_training_with_max_depth(windows):
    X, y = windows
    full = AxisAlignedForest(n_estimators=3, random_state=5).fit(X, y)
    short = AxisAlignedForest(n_estimators=3, random_state=5, max_depth=3).fit(X, y)
    assert short.forest_.depth.max() <= 3 < full.forest_.depth.max()
    np.testing.assert_array_equal(full.predict_proba(X, max_depth=3), short.predict_proba(X))
    f, s = full.forest_, short.forest_
    for t in range(3):
        fs = np.arange(f.roots[t], f.roots[t] + np.sum(
            f.depth[f.roots[t]:(f.roots[t + 1] if t < 2 else f.n_nodes)] <= 3))
        ss = np.arange(s.roots[t], s.roots[t + 1] if t < 2 else s.n_nodes)
        assert len(fs) == len(ss)
        inner = s.left[ss] >= 0
        for name in ("depth", "n_samples", "value"):
            np.testing.assert_array_equal(getattr(f, name)[fs], getattr(s, name)[ss])
        for name in ("feature", "threshold"):
            np.testing.assert_array_equal(getattr(f, name)[fs][inner], getattr(s, name)[ss][inner])
        np.testing.assert_array_equal(f.left[fs][inner] - f.roots[t], s.left[ss][inner] - s.roots[t])
    # first trees only, or a run of trees from a later one
    flat = X.reshape(len(X), -1)
    np.testing.assert_allclose(
        full.predict_proba(X, n_trees=2),
        naive.naive_forest_proba(full.forest_, flat, n_trees=2), atol=1e-6)
    for first, n in ((1, None), (1, 1), (2, 1)):
        np.testing.assert_allclose(
            full.predict_proba(X, n_trees=n, first_tree=first),
            naive.naive_forest_proba(full.forest_, flat, n_trees=n, first_tree=first), atol=1e-6)
    np.testing.assert_allclose(   # the trees' counts weigh two disjoint runs into the whole
        (full.predict_proba(X, n_trees=1) + 2 * full.predict_proba(X, first_tree=1)) / 3,
        full.predict_proba(X), rtol=0, atol=1e-12)


def test_float_features_and_string_labels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")
    clf = AxisAlignedForest(n_estimators=5, max_features="all", random_state=0).fit(X, y)
    assert list(clf.classes_) == ["no", "yes"]
    assert clf.score(X, y) > 0.9
    tp = TwoProbeForest(n_estimators=5, n_pairs=10, random_state=0).fit(X, y)
    np.testing.assert_allclose(tp.predict_proba(X[:30]),
                               naive.naive_forest_proba(tp.forest_, X[:30].astype(np.float32)),
                               atol=1e-6)


def test_params_api():
    clf = AxisAlignedForest(n_estimators=3, max_features="p^0.7")
    params = clf.get_params()
    assert params["n_estimators"] == 3 and params["max_features"] == "p^0.7"
    clf.set_params(max_depth=4)
    assert clf.max_depth == 4
    clone = AxisAlignedForest(**clf.get_params())
    assert clone.get_params() == clf.get_params()
    with pytest.raises(ValueError, match="Invalid parameter 'depth'"):
        clf.set_params(depth=3)
    assert "max_depth=4" in repr(clf)


def test_max_features_and_samples_specs(windows):
    from facesegment.forest.base import _resolve_max_features, _resolve_max_samples
    assert _resolve_max_features("sqrt", 2883) == 53
    assert _resolve_max_features("p^0.7", 2883) == round(2883 ** 0.7)
    assert _resolve_max_features(0.5, 10) == 5
    assert _resolve_max_features(5000, 2883) == 2883
    assert _resolve_max_samples(0.25, 100) == 25 and _resolve_max_samples(None, 7) == 7
    X, y = windows
    clf = AxisAlignedForest(n_estimators=2, max_samples=50, bootstrap=False,
                            random_state=0).fit(X, y)
    assert (clf.forest_.n_samples[clf.forest_.roots] == 50).all()


@pytest.mark.parametrize("kwargs, match", [
    ({"n_estimators": 0}, "n_estimators"),
    ({"max_depth": -1}, "max_depth"),
    ({"min_samples_leaf": 0}, "min_samples_leaf"),
    ({"max_features": "cube"}, "max_features"),
    ({"max_samples": 1.5}, "max_samples"),
    ({"n_jobs": 0}, "n_jobs"),
])
def test_bad_parameters_name_themselves(windows, kwargs, match):
    X, y = windows
    with pytest.raises(ValueError, match=match):
        AxisAlignedForest(**kwargs).fit(X, y)


def test_bad_inputs(windows):
    X, y = windows
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        AxisAlignedForest(n_estimators=1).fit(X, y[:-1])
    with pytest.raises(ValueError, match="infinity"):  # NaN is a missing value, inf is refused
        NonGreedyForest(n_estimators=1).fit(np.full((4, 2), np.inf), [0, 1, 0, 1])
    with pytest.raises(ValueError, match="infinity"):
        AxisAlignedForest(n_estimators=1).fit(np.full((4, 2), np.inf), [0, 1, 0, 1])
    with pytest.raises(TypeError, match="numeric"):
        AxisAlignedForest(n_estimators=1).fit(np.array([["a", "b"]] * 4), [0, 1, 0, 1])
    with pytest.raises(NotFittedError, match="not fitted"):
        AxisAlignedForest().predict_proba(X)
    clf = AxisAlignedForest(n_estimators=1, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="X has 10 features, but AxisAlignedForest is "
                                         "expecting 2883 features"):
        clf.predict_proba(np.zeros((3, 10), np.uint8))
    with pytest.raises(ValueError, match="n_trees"):
        clf.predict_proba(X, n_trees=2)
    for first in (1, -1, 0.5, None):
        with pytest.raises(ValueError, match="first_tree"):
            clf.predict_proba(X, first_tree=first)
    with pytest.raises(ValueError, match="n_pairs"):
        TwoProbeForest(n_pairs=0).fit(X, y)


def test_verbose_progress_per_tree(windows, capsys):
    X, y = windows
    AxisAlignedForest(n_estimators=2, random_state=0, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "2/2 trees" in err and "nodes, depth" in err and "s/tree" in err


@pytest.mark.slow
def test_dask_cluster_gives_identical_forest(windows):
    distributed = pytest.importorskip("distributed")
    X, y = windows
    local = AxisAlignedForest(n_estimators=3, random_state=11, n_jobs=2).fit(X, y)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = AxisAlignedForest(n_estimators=3, random_state=11, scheduler=client).fit(X, y)
    for name in local.forest_._fields:
        np.testing.assert_array_equal(getattr(local.forest_, name), getattr(remote.forest_, name))
