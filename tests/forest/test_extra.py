"""ExtraTreesForest: the random-cut kernel against tests/naive.py, the forest's
arrays (axis nodes, half-integer uint8 cuts), determinism, truncation,
check_estimator, learning (against scikit-learn's ExtraTreesClassifier) and
dense inference.  ``dense_matches_predict`` is shared with test_ferns/test_rotation."""

import inspect
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import ExtraTreesClassifier
from sklearn.utils.estimator_checks import check_estimator

from facesegment.forest import constraints_of, ExtraTreesForest, validate_params
from facesegment.forest._extra_kernels import random_axis_split, random_cut
from facesegment.forest._grow import RowDraw, TreeParams, grow_tree
from facesegment.dense import predict_proba_raw
from facesegment.layout import WindowLayout
from facesegment.modelio.model import Model
from tests import naive

#: Fails under bootstrap=True for every forest (weighted draws are equivalent in
#: distribution only); see tests/forest/test_sklearn_api.py.
BOOTSTRAP_XFAIL = {"check_sample_weight_equivalence_on_dense_data": "bootstrap draws"}
#: With bootstrap=False class weights are refused (they are draw probabilities).
NO_BOOTSTRAP_XFAIL = {"check_class_weight_classifiers": "class weights need bootstrap=True"}


def same_forest(a, b):
    """The two fitted estimators hold byte-identical arrays."""
    for name in a.forest_._fields:
        x, y = getattr(a.forest_, name), getattr(b.forest_, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name


def dense_matches_predict(est, seed=0, window=5, channels=3, h=17, w=19):
    """Fit ``est`` on random windows of a small layout, then check that dense
    inference of the model equals ``est.predict_proba`` on the explicit windows."""
    layout = WindowLayout(window=window, channels=channels)
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(500, layout.n_features), dtype=np.uint8)
    c = layout.n_features // 2
    y = (X[:, c].astype(int) > X[:, c - channels]).astype(int) + (X[:, 1] > 170)
    est.fit(X, y)
    model = Model(kind="axis", params={}, arrays=est.forest_, class_names=("a", "b", "c"),
                  sampling_factors=np.ones(3), mean=np.zeros(layout.n_features, np.float32),
                  std=np.ones(layout.n_features, np.float32), layout=layout)
    image = rng.integers(0, 256, size=(h, w, channels), dtype=np.uint8)
    raw = predict_proba_raw(model, image)
    Xw, ys, xs = naive.naive_windows(image, "full", window=window)
    np.testing.assert_allclose(raw[ys, xs], est.predict_proba(Xw), atol=1e-5)
    return est


def _uint8(n=400, p=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, p), dtype=np.uint8)
    y = (X[:, 3] > 120).astype(int) + (X[:, 7].astype(int) + X[:, 2] > 300)
    return X, y


# ------------------------------------------------------------------ kernels
@pytest.mark.parametrize("integer", [True, False])
def test_random_cut_matches_naive_and_separates(integer):
    rng = np.random.default_rng(0)
    for _ in range(300):
        lo = rng.integers(0, 255)
        hi = rng.integers(lo + 1, 256)
        if not integer:
            lo, hi = np.float32(rng.normal() * 10), np.float32(0)
            hi = np.float32(lo + abs(rng.normal()) + 1e-6)
        u = rng.random()
        t = random_cut(lo, hi, u, integer)
        assert t == naive.naive_random_cut(lo, hi, u, integer)
        assert np.float32(lo) <= t < np.float32(hi)
        if integer:
            assert t % 1 == 0.5
    assert random_cut(np.float32(1), np.nextafter(np.float32(1), np.float32(2)), 0.99,
                      False) == np.float32(1)  # rounds up to hi: falls back to lo


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("m, q, min_leaf", [(7, 1, 1), (60, 3, 1), (300, 5, 4), (500, 12, 30)])
def test_random_axis_split_matches_naive(dtype, m, q, min_leaf):
    rng = np.random.default_rng(m + q)
    X = rng.integers(0, 8 if m < 100 else 256, size=(600, 12)).astype(dtype)
    if dtype == np.float32:
        X = X + rng.normal(size=X.shape).astype(np.float32)
    X[:, 5] = 3  # a constant feature: skipped, another one drawn
    y = rng.integers(0, 3, size=600).astype(np.int32)
    idx = np.sort(rng.choice(600, size=m, replace=False)).astype(np.int64)
    for seed in range(5):
        perm = np.random.default_rng(seed).permutation(12).astype(np.int64)
        ref, ref_perm = naive.naive_extra_split(X, y, idx, perm, np.random.default_rng(seed),
                                                q, 3, min_leaf)
        f, t, g = random_axis_split(X, y, idx, perm, np.random.default_rng(seed), q, 3,
                                    min_leaf)
        np.testing.assert_array_equal(perm, ref_perm)
        assert (f, np.float32(t)) == (ref[0], np.float32(ref[1])) and f != 5
        assert g == pytest.approx(ref[2], abs=1e-9)


def test_all_constant_node_gives_no_split():
    X = np.full((10, 4), 7, dtype=np.uint8)
    y = np.array([0, 1] * 5, dtype=np.int32)
    perm = np.arange(4, dtype=np.int64)
    assert random_axis_split(X, y, np.arange(10, dtype=np.int64), perm,
                             np.random.default_rng(0), 2, 2) == (-1, 0.0, -1.0)


# --------------------------------------------------------------- the forest
def test_forest_is_axis_arrays_with_separating_half_integer_cuts():
    X, y = _uint8()
    est = ExtraTreesForest(n_estimators=4, random_state=0).fit(X, y)
    fa = est.forest_
    inner = fa.left >= 0
    assert (fa.feature2 == -1).all() and (fa.oblique == -1).all()
    assert fa.weights.shape == (0, 12) and (fa.feature[inner] >= 0).all()
    assert (fa.threshold[inner] % 1 == 0.5).all()
    assert (fa.n_samples[fa.left[inner]] > 0).all() and (fa.n_samples[fa.right[inner]] > 0).all()
    assert (fa.n_samples[fa.roots] == len(y)).all()  # no bootstrap: every tree sees all
    np.testing.assert_allclose(est.predict_proba(X[:50]),
                               naive.naive_forest_proba(fa, X[:50]), atol=1e-6)
    leaves = est.apply(X)  # leaves hold the class frequencies of their samples
    for t in range(fa.n_trees):
        for node in np.unique(leaves[:, t])[:20]:
            members = y[leaves[:, t] == node]
            assert fa.n_samples[node] == len(members)
            np.testing.assert_allclose(fa.value[node], np.bincount(members, minlength=3)
                                       / len(members), atol=1e-6)


def test_float_features_use_continuous_cuts():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] > 0).astype(int)
    fa = ExtraTreesForest(n_estimators=3, random_state=0).fit(X, y).forest_
    t = fa.threshold[fa.left >= 0]
    assert np.mean(t % 1 != 0.5) > 0.9


def test_same_seed_identical_any_n_jobs_and_grow_tree_family():
    X, y = _uint8(300)
    a = ExtraTreesForest(n_estimators=4, random_state=3, n_jobs=1).fit(X, y)
    same_forest(a, ExtraTreesForest(n_estimators=4, random_state=3, n_jobs=2).fit(X, y))
    other = ExtraTreesForest(n_estimators=4, random_state=4).fit(X, y)
    assert not np.array_equal(a.forest_.threshold, other.forest_.threshold)
    params = TreeParams(splitter=ExtraTreesForest._split_family(max_features=3),
                        draw=RowDraw(len(y), False))
    tree = grow_tree(X, y.astype(np.int32), 3, params, 5)
    assert tree["feature"][0] >= 0 and (tree["feature2"] == -1).all()


def test_truncation_equals_training_with_max_depth():
    X, y = _uint8(300)
    deep = ExtraTreesForest(n_estimators=3, random_state=0).fit(X, y)
    for d in (1, 3):
        shallow = ExtraTreesForest(n_estimators=3, max_depth=d, random_state=0).fit(X, y)
        np.testing.assert_array_equal(deep.predict_proba(X, max_depth=d),
                                      shallow.predict_proba(X))


def test_max_features_one_is_totally_random_and_all_is_strongest():
    X, y = _uint8(600, seed=2)
    Xt, yt = _uint8(600, seed=3)
    strong = ExtraTreesForest(n_estimators=16, max_features="all", random_state=0).fit(X, y)
    weak = ExtraTreesForest(n_estimators=16, max_features=1, random_state=0).fit(X, y)
    assert strong.score(Xt, yt) > weak.score(Xt, yt)


def test_learns_and_matches_scikit_learn_extra_trees():
    X, y = make_classification(n_samples=3000, n_features=20, n_informative=8,
                               n_redundant=4, n_classes=3, random_state=0)
    X = X.astype(np.float32)
    ours, theirs = [], []
    for seed in range(3):
        ours.append(ExtraTreesForest(n_estimators=30, random_state=seed)
                    .fit(X[:1500], y[:1500]).score(X[1500:], y[1500:]))
        theirs.append(ExtraTreesClassifier(n_estimators=30, criterion="entropy",
                                           random_state=seed)
                      .fit(X[:1500], y[:1500]).score(X[1500:], y[1500:]))
    assert np.mean(ours) > 0.75  # chance: 1/3
    assert abs(np.mean(ours) - np.mean(theirs)) < 0.03


def test_dense_inference_equals_predict_proba():
    est = dense_matches_predict(ExtraTreesForest(n_estimators=3, max_depth=8, random_state=0))
    assert est.forest_.weights.shape[0] == 0


# ------------------------------------------------------------ sklearn API
def test_check_estimator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(ExtraTreesForest(n_estimators=3, random_state=0),
                        expected_failed_checks=NO_BOOTSTRAP_XFAIL)
        check_estimator(ExtraTreesForest(n_estimators=3, bootstrap=True, random_state=0),
                        expected_failed_checks=BOOTSTRAP_XFAIL)


def test_constraints_table_matches_signature_and_names_bad_values():
    sig = inspect.signature(ExtraTreesForest.__init__)
    defaults = {n: p.default for n, p in sig.parameters.items() if n != "self"}
    assert set(constraints_of(ExtraTreesForest)) == set(defaults)
    validate_params(ExtraTreesForest, defaults)
    with pytest.raises(ValueError, match="max_features='cube'"):
        ExtraTreesForest(max_features="cube").fit(*_uint8(20))


def test_docs_example_of_the_three_families_runs(capsys):
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "forests-families.md"
    blocks = [b for b in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
              if "ExtraTreesForest(" in b]
    assert blocks, "docs/forests-families.md has no example of the three families"
    exec(compile(blocks[0], str(path), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out == ["ExtraTreesForest True", "RandomFernsForest True", "RotationForest True"]
