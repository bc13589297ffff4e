"""CART options of AxisAlignedForest: Gini, missing values, out-of-bag estimates,
class weights, warm starts and single-tree views, against tests/naive.py."""

import numpy as np
import pytest
from sklearn.utils.class_weight import compute_class_weight, compute_sample_weight

from facesegment.forest import AxisAlignedForest, TwoProbeForest
from facesegment.forest._cart import append_forests, tree_slice
from facesegment.forest._missing import apply_missing, default_missing_left
from facesegment.forest.axis import best_axis_split, best_axis_split_cart
from facesegment.forest.params import InvalidParameterError
from tests import naive


def _data(rng, n, p, n_classes, dtype, missing=0.0):
    if dtype == np.uint8:
        X = rng.integers(0, 256, size=(n, p)).astype(np.uint8)
        X[:, ::2] //= 32  # ties
    else:
        X = np.round(rng.normal(size=(n, p)), 1).astype(np.float32)  # ties
    y = rng.integers(0, n_classes, size=n).astype(np.int32)
    y[X[:, 1] > np.median(X[:, 1])] = 0
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    return X, y


def _check_split(X, y, idx, feats, k, min_leaf, criterion, got, ref):
    f, t, g, ml = got
    assert g == pytest.approx(ref[2], abs=1e-9)
    if ref[2] < 0:
        assert f == -1
        return
    # the kernel's split reaches the naive optimum when recomputed naively
    left = naive.naive_cart_goes_left(X[idx, f], t, ml)
    assert min(left.sum(), (~left).sum()) >= min_leaf
    assert naive.naive_cart_gain(y[idx], left, k, criterion) == pytest.approx(ref[2], abs=1e-9)
    if ref[0] == f and ref[1] == t:
        assert ml == ref[3]


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("m,min_leaf", [(7, 1), (60, 1), (500, 5)])
def test_cart_split_matches_naive(criterion, dtype, m, min_leaf):
    rng = np.random.default_rng(m + min_leaf)
    X, y = _data(rng, 700, 12, 4, dtype)
    idx = np.sort(rng.choice(700, size=m, replace=False)).astype(np.int64)
    feats = np.array([3, 0, 1, 7, 4, 10], dtype=np.int64)
    got = best_axis_split_cart(X, y, idx, feats, 4, min_leaf, criterion)
    ref = naive.naive_cart_split(X, y, idx, feats, 4, min_leaf, criterion)
    _check_split(X, y, idx, feats, 4, min_leaf, criterion, got, ref)


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
@pytest.mark.parametrize("missing", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("min_leaf", [1, 4])
def test_missing_value_split_matches_naive(criterion, missing, min_leaf):
    rng = np.random.default_rng(int(missing * 100) + min_leaf)
    X, y = _data(rng, 300, 8, 3, np.float32, missing)
    idx = np.sort(rng.choice(300, size=120, replace=False)).astype(np.int64)
    feats = np.arange(8, dtype=np.int64)
    got = best_axis_split_cart(X, y, idx, feats, 3, min_leaf, criterion)
    ref = naive.naive_cart_split(X, y, idx, feats, 3, min_leaf, criterion)
    _check_split(X, y, idx, feats, 3, min_leaf, criterion, got, ref)
    assert got[3] in (0, 1)  # this node misses values of every feature


def test_missing_values_only_split_sends_them_right():
    # x[0] separates nothing but its missing values carry the class
    X = np.array([[1.0], [1.0], [1.0], [np.nan], [np.nan]], dtype=np.float32)
    y = np.array([0, 0, 0, 1, 1], dtype=np.int32)
    f, t, g, ml = best_axis_split_cart(X, y, np.arange(5, dtype=np.int64),
                                       np.zeros(1, np.int64), 2, 1, "gini")
    assert (f, t, ml) == (0, 1.0, 0)
    assert g == pytest.approx(naive.naive_impurity(y, 2, "gini"))


def test_constant_features_count_but_the_search_goes_on_until_one_splits():
    rng = np.random.default_rng(0)
    X, y = _data(rng, 200, 6, 2, np.float32)
    X[:, [0, 2]] = 1.0  # constant
    idx = np.arange(200, dtype=np.int64)
    feats = np.array([0, 5, 2, 1, 3], dtype=np.int64)
    got = best_axis_split_cart(X, y, idx, feats, 2, 1, "gini", n_visit=2)
    ref = naive.naive_cart_split(X, y, idx, feats, 2, 1, "gini", n_visit=2)
    _check_split(X, y, idx, feats, 2, 1, "gini", got, ref)
    assert got == best_axis_split_cart(X, y, idx, feats[1:2], 2, 1, "gini")  # 0, 5: stop
    feats = np.array([0, 2, 1, 5], dtype=np.int64)  # two constants first: go on to 1
    got = best_axis_split_cart(X, y, idx, feats, 2, 1, "gini", n_visit=2)
    assert got == best_axis_split_cart(X, y, idx, feats[2:3], 2, 1, "gini")
    ref = naive.naive_cart_split(X, y, idx, feats, 2, 1, "gini", n_visit=2)
    _check_split(X, y, idx, feats, 2, 1, "gini", got, ref)


def test_entropy_cart_kernel_agrees_with_the_entropy_kernel():
    rng = np.random.default_rng(3)
    X, y = _data(rng, 400, 10, 3, np.float32)
    idx = np.arange(400, dtype=np.int64)
    feats = np.arange(10, dtype=np.int64)
    f, t, g = best_axis_split(X, y, idx, feats, 3)
    f2, t2, g2, ml = best_axis_split_cart(X, y, idx, feats, 3, 1, "entropy")
    assert (f, t, ml) == (f2, t2, -1)
    assert g == pytest.approx(g2, abs=1e-12)


def test_gini_forest_is_deterministic_and_differs_from_entropy():
    rng = np.random.default_rng(1)
    X, y = _data(rng, 300, 8, 3, np.float32)
    a = AxisAlignedForest(4, criterion="gini", random_state=0).fit(X, y)
    b = AxisAlignedForest(4, criterion="gini", random_state=0, n_jobs=2).fit(X, y)
    e = AxisAlignedForest(4, random_state=0).fit(X, y)
    for name in ("feature", "threshold", "value"):
        np.testing.assert_array_equal(getattr(a.forest_, name), getattr(b.forest_, name))
    assert a.forest_.n_nodes != e.forest_.n_nodes or not np.array_equal(
        a.forest_.threshold, e.forest_.threshold)
    # no NaN at fit: missing values will go to the larger child
    np.testing.assert_array_equal(a.forest_.missing_left, default_missing_left(
        a.forest_._replace(missing_left=None)))
    imp = a.feature_importances_
    assert imp.sum() == pytest.approx(1.0) and imp.argmax() == 1


def test_criterion_is_refused_where_it_has_no_meaning():
    with pytest.raises(TypeError, match="criterion"):
        TwoProbeForest(criterion="gini")
    with pytest.raises(InvalidParameterError, match="criterion='mse' is invalid.*'gini'"):
        AxisAlignedForest(criterion="mse").fit(np.zeros((4, 2)), [0, 1, 0, 1])


# --------------------------------------------------------------- missing values

def test_missing_values_forest_predicts_and_follows_its_learned_sides(tmp_path):
    rng = np.random.default_rng(5)
    X, y = _data(rng, 400, 6, 3, np.float32, missing=0.2)
    est = AxisAlignedForest(5, criterion="gini", random_state=0).fit(X, y)
    fa = est.forest_
    assert fa.missing_left is not None and fa.missing_left.dtype == np.int8
    Xt, _ = _data(np.random.default_rng(6), 50, 6, 3, np.float32, missing=0.3)
    leaves = est.apply(Xt)
    for i in range(Xt.shape[0]):
        for t, r in enumerate(fa.roots):
            assert leaves[i, t] == naive.naive_leaf_missing(fa, Xt[i], r, fa.missing_left)
    proba = est.predict_proba(Xt)
    np.testing.assert_allclose(proba, np.mean(fa.value[leaves], axis=1), atol=1e-12)
    # rows without NaN: the fast kernels agree with the missing-value traversal
    full = ~np.isnan(Xt).any(axis=1)
    np.testing.assert_allclose(est.predict_proba(Xt[full]), proba[full], atol=1e-6)
    # the training rows are classified as the trees saw them
    assert est.score(X, y) > 0.9
    from facesegment.modelio.model import Model, save_model
    from facesegment.models import load_model

    save_model(Model.from_estimator(est), tmp_path / "m")
    back = load_model(tmp_path / "m").to_estimator()
    np.testing.assert_array_equal(back.forest_.missing_left, fa.missing_left)
    np.testing.assert_array_equal(back.predict_proba(Xt), proba)


def test_forest_without_missing_left_sends_nan_to_the_larger_child():
    rng = np.random.default_rng(7)
    X, y = _data(rng, 300, 5, 2, np.float32)
    est = AxisAlignedForest(3, random_state=0).fit(X, y)
    est.forest_ = est.forest_._replace(missing_left=None)  # as a model of older files
    Xt = X[:40].copy()
    Xt[::3, 1] = np.nan
    ml = default_missing_left(est.forest_)
    fa = est.forest_
    inner = np.flatnonzero(fa.left >= 0)
    np.testing.assert_array_equal(ml[inner], fa.n_samples[fa.left[inner]]
                                  >= fa.n_samples[fa.right[inner]])
    leaves = est.apply(Xt)
    for i in range(Xt.shape[0]):
        for t, r in enumerate(fa.roots):
            assert leaves[i, t] == naive.naive_leaf_missing(fa, Xt[i], r, ml)


def test_model_folders_without_missing_left_still_load(tmp_path):
    import h5py

    from facesegment.modelio.model import Model, save_model
    from facesegment.models import load_model

    rng = np.random.default_rng(8)
    X, y = _data(rng, 200, 5, 2, np.float32)
    est = AxisAlignedForest(3, random_state=0).fit(X, y)
    save_model(Model.from_estimator(est), tmp_path / "m")
    with h5py.File(tmp_path / "m" / "forest.h5", "a") as f:
        del f["forest"]["missing_left"]
    back = load_model(tmp_path / "m", verify=False).to_estimator()
    assert back.forest_.missing_left is None
    Xt = X[:30].copy()
    Xt[::2, 1] = np.nan
    np.testing.assert_array_equal(back.predict_proba(Xt), est.predict_proba(Xt))


def test_inf_is_refused_by_all_kinds():
    from facesegment.forest import NonGreedyForest

    X = np.ones((6, 3), np.float32)
    X[0, 0] = np.inf
    for cls in (AxisAlignedForest, TwoProbeForest, NonGreedyForest):
        with pytest.raises(ValueError, match="infinity"):
            cls(2).fit(X, [0, 1] * 3)


def test_nan_follows_the_missing_sides_of_two_probe_splits():
    """A difference is missing when either probe is; it takes the node's side."""
    rng = np.random.default_rng(0)
    X, y = _data(rng, 100, 4, 2, np.float32)
    X[rng.random(X.shape) < 0.2] = np.nan
    fa = TwoProbeForest(2, n_pairs=4, random_state=0).fit(X, y).forest_
    leaves = apply_missing(fa, X)
    for i in range(X.shape[0]):
        for t in range(fa.n_trees):
            node = fa.roots[t]
            while fa.left[node] >= 0:
                v = X[i, fa.feature[node]] - X[i, fa.feature2[node]]
                go = fa.missing_left[node] == 1 if np.isnan(v) else v <= fa.threshold[node]
                node = fa.left[node] if go else fa.right[node]
            assert leaves[i, t] == node


# ------------------------------------------------------------------ out of bag

@pytest.mark.parametrize("criterion", ["gini", "entropy"])
def test_oob_matches_a_naive_redraw(criterion):
    rng = np.random.default_rng(11)
    X, y = _data(rng, 250, 6, 3, np.float32)
    est = AxisAlignedForest(30, criterion=criterion, oob_score=True, random_state=2).fit(X, y)
    ref, count = naive.naive_oob(est, X, y)
    assert (count > 0).all()
    np.testing.assert_allclose(est.oob_decision_function_, ref, atol=1e-12)
    assert est.oob_score_ == pytest.approx(np.mean(ref.argmax(axis=1) == y))
    assert 0.4 < est.oob_score_ < est.score(X, y)


def test_oob_with_missing_values_and_labels_of_any_type():
    rng = np.random.default_rng(12)
    X, y = _data(rng, 200, 5, 2, np.float32, missing=0.1)
    labels = np.array(["no", "yes"])[y]
    est = AxisAlignedForest(10, oob_score=True, random_state=0).fit(X, labels)
    ref, _ = naive.naive_oob(est, X, labels)
    np.testing.assert_allclose(est.oob_decision_function_, ref, atol=1e-12)


def test_oob_needs_bootstrap_and_warns_without_estimates():
    X = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20) % 2
    with pytest.raises(InvalidParameterError, match="oob_score=True needs bootstrap=True"):
        AxisAlignedForest(2, oob_score=True, bootstrap=False).fit(X, y)
    with pytest.warns(UserWarning, match="no out-of-bag estimate"):
        AxisAlignedForest(1, oob_score=True, random_state=0).fit(X, y)


# --------------------------------------------------------------- class weights

def test_class_weight_dict_and_balanced_equal_sample_weight():
    rng = np.random.default_rng(13)
    X, y = _data(rng, 300, 6, 3, np.float32)
    y[:200] = 0  # unbalanced
    cw = {0: 0.5, 1: 2.0, 2: 3.0}
    a = AxisAlignedForest(4, class_weight=cw, random_state=0).fit(X, y)
    b = AxisAlignedForest(4, random_state=0).fit(X, y, sample_weight=np.array([cw[c] for c in y]))
    for name in a.forest_._fields:
        if getattr(a.forest_, name) is not None:
            np.testing.assert_array_equal(getattr(a.forest_, name), getattr(b.forest_, name))
    bal = compute_class_weight("balanced", classes=np.unique(y), y=y)
    a = AxisAlignedForest(4, class_weight="balanced", random_state=0).fit(X, y)
    b = AxisAlignedForest(4, random_state=0).fit(X, y, sample_weight=bal[y])
    np.testing.assert_array_equal(a.forest_.threshold, b.forest_.threshold)
    np.testing.assert_array_equal(a.forest_.value, b.forest_.value)
    # combined with sample_weight: the product
    sw = rng.random(300) + 0.5
    a = AxisAlignedForest(3, class_weight=cw, random_state=1).fit(X, y, sample_weight=sw)
    b = AxisAlignedForest(3, random_state=1).fit(X, y, sample_weight=sw * [cw[c] for c in y])
    np.testing.assert_array_equal(a.forest_.threshold, b.forest_.threshold)


def test_balanced_subsample_draws_equal_class_shares():
    rng = np.random.default_rng(14)
    X, y = _data(rng, 301, 5, 3, np.float32)
    y[:220] = 0
    est = AxisAlignedForest(5, class_weight="balanced_subsample", max_samples=300,
                            random_state=0).fit(X, y)
    fa = est.forest_
    np.testing.assert_allclose(fa.value[fa.roots], 1 / 3, atol=1e-7)
    assert (fa.n_samples[fa.roots] == 300).all()


def test_class_weight_errors_name_the_problem():
    X = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20) % 2
    with pytest.raises(ValueError, match=r"labels that are not in y: \[7\]"):
        AxisAlignedForest(2, class_weight={0: 1.0, 7: 2.0}).fit(X, y)
    with pytest.raises(InvalidParameterError, match="needs bootstrap=True"):
        AxisAlignedForest(2, class_weight="balanced", bootstrap=False).fit(X, y)
    with pytest.raises(InvalidParameterError, match="class_weight='heavy' is invalid"):
        AxisAlignedForest(2, class_weight="heavy").fit(X, y)
    with pytest.raises(InvalidParameterError, match="class_weight=.* is invalid"):
        AxisAlignedForest(2, class_weight={0: -1.0}).fit(X, y)
    with pytest.raises(ValueError, match="every sample weight 0"):
        AxisAlignedForest(2, class_weight={0: 0.0, 1: 0.0}).fit(X, y)


# ------------------------------------------------------------------ warm start

def _arrays_equal(a, b):
    for name in a._fields:
        x, z = getattr(a, name), getattr(b, name)
        if x is None or z is None:
            assert x is None and z is None, name
        else:
            np.testing.assert_array_equal(x, z, err_msg=name)
            assert x.dtype == z.dtype, name


@pytest.mark.parametrize("missing", [0.0, 0.1])
def test_warm_start_keeps_old_trees_and_equals_a_fresh_forest(missing):
    rng = np.random.default_rng(15)
    X, y = _data(rng, 200, 6, 3, np.float32, missing)
    warm = AxisAlignedForest(3, criterion="gini", warm_start=True, oob_score=True,
                             random_state=4).fit(X, y)
    old = warm.forest_
    warm.set_params(n_estimators=7).fit(X, y)
    fresh = AxisAlignedForest(7, criterion="gini", oob_score=True, random_state=4).fit(X, y)
    _arrays_equal(warm.forest_, fresh.forest_)
    _arrays_equal(tree_slice(warm.forest_, 2), tree_slice(old, 2))
    assert warm.oob_score_ == fresh.oob_score_
    np.testing.assert_array_equal(warm.tree_seeds_, fresh.tree_seeds_)
    assert len(warm.tree_stats_) == 7


def test_warm_start_errors_and_warning():
    X = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20) % 2
    est = AxisAlignedForest(3, warm_start=True, random_state=0).fit(X, y)
    with pytest.warns(UserWarning, match="no tree was added"):
        est.fit(X, y)
    with pytest.raises(ValueError, match="n_estimators=2 must be at least the 3 trees"):
        est.set_params(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="warm_start=True needs the classes of the first fit"):
        est.set_params(n_estimators=5).fit(X, y + 1)
    with pytest.raises(ValueError, match="features"):
        est.fit(np.hstack([X, X]), y)
    cold = AxisAlignedForest(3, random_state=0).fit(X, y)
    _arrays_equal(cold.set_params(n_estimators=4).fit(X, y).forest_,
                  AxisAlignedForest(4, random_state=0).fit(X, y).forest_)


def test_append_forests_keeps_oblique_and_sparse_indices():
    from facesegment.forest import CO2Forest

    rng = np.random.default_rng(16)
    X = rng.integers(0, 256, size=(300, 10)).astype(np.uint8)
    y = (X[:, 0].astype(int) + X[:, 1] > 255).astype(int)
    est = CO2Forest(2, oblique_min_samples=20, n_passes=1, random_state=0).fit(X, y)
    fa = est.forest_
    both = append_forests(fa, fa)
    assert both.n_trees == 4 and both.weights.shape[0] == 2 * fa.weights.shape[0]
    est.forest_ = both
    p = est.predict_proba(X)
    est.forest_ = fa
    np.testing.assert_allclose(p, est.predict_proba(X), atol=1e-6)


# ------------------------------------------------------------------- estimators_

def test_estimators_are_one_tree_views_that_average_to_the_forest():
    rng = np.random.default_rng(17)
    X, y = _data(rng, 200, 6, 3, np.float32, missing=0.1)
    est = AxisAlignedForest(5, random_state=0).fit(X, y)
    trees = est.estimators_
    assert len(trees) == 5 and all(t.forest_.n_trees == 1 for t in trees)
    mean = sum(t.predict_proba(X) for t in trees) / 5
    np.testing.assert_allclose(mean, est.predict_proba(X), atol=1e-6)
    assert trees[2].apply(X).shape == (200, 1)
    assert trees[0].tree_seeds_[0] == est.tree_seeds_[0]
    assert est.forest_.n_trees == 5  # views do not change the forest


def test_extra_trees_have_oob_warm_start_and_class_weight_but_no_criterion():
    from facesegment.forest import ExtraTreesForest

    rng = np.random.default_rng(18)
    X, y = _data(rng, 250, 6, 3, np.float32)
    est = ExtraTreesForest(30, bootstrap=True, oob_score=True, random_state=1).fit(X, y)
    ref, _ = naive.naive_oob(est, X, y)
    np.testing.assert_allclose(est.oob_decision_function_, ref, atol=1e-12)
    warm = ExtraTreesForest(2, warm_start=True, random_state=3).fit(X, y)
    warm.set_params(n_estimators=5).fit(X, y)
    _arrays_equal(warm.forest_, ExtraTreesForest(5, random_state=3).fit(X, y).forest_)
    with pytest.raises(InvalidParameterError, match="oob_score=True needs bootstrap=True"):
        ExtraTreesForest(2, oob_score=True).fit(X, y)
    with pytest.raises(TypeError, match="criterion"):
        ExtraTreesForest(criterion="gini")
    with pytest.raises(InvalidParameterError, match="needs bootstrap=True"):
        ExtraTreesForest(2, class_weight="balanced").fit(X, y)
    weighted = ExtraTreesForest(3, bootstrap=True, class_weight="balanced", random_state=1)
    _arrays_equal(weighted.fit(X, y).forest_, ExtraTreesForest(3, bootstrap=True,
                  random_state=1).fit(X, y, sample_weight=compute_sample_weight(
                      "balanced", y)).forest_)


def test_docs_cart_example_runs():
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "forests-cart.md"
    blocks = [b for b in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
              if "warm_start=True" in b]
    assert blocks, "docs/forests-cart.md has no example of the CART options"
    ns = {}
    exec(compile(blocks[0], str(path), "exec"), ns)
    clf = ns["clf"]
    assert clf.forest_.n_trees == 60 and len(clf.estimators_) == 60
    assert 0.5 < clf.oob_score_ <= 1.0
    assert len(blocks) == 2, "the options on another kind: the second example"
    ns = {}
    exec(compile(blocks[1], str(path), "exec"), ns)
    clf = ns["clf"]
    assert type(clf).__name__ == "TwoProbeForest" and clf.forest_.n_trees == 60
    assert 0.5 < clf.oob_score_ <= 1.0 and clf.forest_.missing_left is not None
