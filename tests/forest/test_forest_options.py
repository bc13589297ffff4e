"""scikit-learn's forest options on every classifier kind of the registry:
``class_weight``, ``sample_weight``, ``oob_score`` (bool or callable),
``warm_start`` and ``max_samples`` (docs/forests-cart.md, "CART options")."""

import warnings

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from facesegment.forest import InvalidParameterError
from facesegment.forest._cart import tree_slice
from facesegment.forest.registry import kind_names, make_estimator

KINDS = kind_names(task="classify")


def params(kind, **extra):
    """Small, quick settings of ``kind`` (3 trees unless given)."""
    out = {"n_estimators": 3, "random_state": 0}
    if kind.startswith("co2"):
        out["oblique_min_samples"] = 40
    if kind == "ferns":
        out["depth"] = 6
    elif "nongreedy" in kind:
        out.update(max_depth=4, n_epochs=2)
    return {**out, **extra}


def make(kind, **extra):
    return make_estimator(kind, **params(kind, **extra))


def data(n=300, seed=0, noise=0.3, shift=0.0):
    """Float rows whose class is ``x0 + x1/2 + noise > shift`` (6 features)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] + noise * rng.normal(size=n) > shift).astype(int)
    return X, y


def same_arrays(a, b):
    for name in a._fields:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, name
            continue
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name


def tree_parts(fa, i):
    """Tree ``i`` of ``fa``: its node arrays, and the oblique and sparse rows its
    nodes use (the tables of :func:`tree_slice` are the whole forest's)."""
    t = tree_slice(fa, i)
    out = {name: getattr(t, name) for name in ("left", "right", "feature", "feature2",
                                               "threshold", "value", "depth", "n_samples",
                                               "missing_left")}
    out["weights"] = fa.weights[t.oblique[t.oblique >= 0]]
    if fa.sparse is not None:
        rows = t.sparse[t.sparse >= 0]
        ptr = fa.sparse_ptr
        out["sparse_index"] = [fa.sparse_index[ptr[r]:ptr[r + 1]] for r in rows]
        out["sparse_weight"] = [fa.sparse_weight[ptr[r]:ptr[r + 1]] for r in rows]
    return out


def same_parts(a, b):
    assert a.keys() == b.keys()
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, list):
            assert len(x) == len(y) and all(np.array_equal(u, v) for u, v in zip(x, y)), name
        elif x is None or y is None:
            assert x is None and y is None, name
        else:
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), name


@pytest.mark.parametrize("kind", KINDS)
def test_every_classifier_has_the_options_with_the_axis_messages(kind):
    est = make(kind)
    names = est.get_params()
    for name in ("class_weight", "oob_score", "warm_start", "max_samples", "bootstrap"):
        assert name in names
    cls = type(est).__name__
    X, y = data(60)
    with pytest.raises(InvalidParameterError, match=f"oob_score='yes' is invalid for {cls}"):
        make(kind, oob_score="yes").fit(X, y)
    with pytest.raises(InvalidParameterError, match="class_weight='even' is invalid"):
        make(kind, class_weight="even").fit(X, y)
    with pytest.raises(InvalidParameterError, match="warm_start=1 is invalid"):
        make(kind, warm_start=1).fit(X, y)
    with pytest.raises(InvalidParameterError, match="oob_score=True needs bootstrap=True"):
        make(kind, oob_score=True, bootstrap=False).fit(X, y)
    with pytest.raises(InvalidParameterError, match="needs bootstrap=True"):
        make(kind, class_weight="balanced", bootstrap=False).fit(X, y)
    with pytest.raises(ValueError, match="class_weight names labels that are not in y"):
        make(kind, class_weight={7: 2.0}, bootstrap=True).fit(X, y)


@pytest.mark.parametrize("kind", KINDS)
def test_a_heavily_weighted_minority_class_is_predicted_more(kind):
    X, y = data(400, noise=0.8, shift=1.2)               # about 17 % class 1
    Xt, _ = data(400, seed=1, noise=0.8, shift=1.2)
    base = make(kind, n_estimators=6, bootstrap=True).fit(X, y)
    heavy = make(kind, n_estimators=6, bootstrap=True, class_weight={1: 20.0}).fit(X, y)
    sub = make(kind, n_estimators=6, bootstrap=True,
               class_weight="balanced_subsample").fit(X, y)
    share = [float(np.mean(e.predict(Xt) == 1)) for e in (base, heavy, sub)]
    assert share[1] > share[0] + 0.1 and share[2] > share[0] + 0.03, share


@pytest.mark.parametrize("kind", KINDS)
def test_balanced_equals_inverse_frequency_weights(kind):
    X, y = data(200, shift=0.8)
    y = np.where(y == 1, "eye", "skin")                   # labels as given
    labels, counts = np.unique(y, return_counts=True)
    inverse = {str(c): y.shape[0] / (2 * k) for c, k in zip(labels, counts)}
    a = make(kind, bootstrap=True, class_weight="balanced").fit(X, y)
    b = make(kind, bootstrap=True, class_weight=inverse).fit(X, y)
    c = make(kind, bootstrap=True).fit(X, y, sample_weight=np.array([inverse[v] for v in y]))
    same_arrays(a.forest_, b.forest_)
    same_arrays(a.forest_, c.forest_)


@pytest.mark.parametrize("kind", KINDS)
def test_integer_sample_weight_equals_repeated_rows_without_bootstrap(kind):
    X, y = data(150)
    w = np.random.default_rng(2).integers(0, 4, size=X.shape[0])
    a = make(kind, bootstrap=False).fit(X, y, sample_weight=w)
    b = make(kind, bootstrap=False).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    same_arrays(a.forest_, b.forest_)                     # exactly, for every kind
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


@pytest.mark.parametrize("kind", KINDS)
def test_weighted_bootstrap_draws_rows_in_proportion_to_their_weight(kind):
    """bootstrap=True: integer weights equal repeated rows in distribution (the trees'
    row counts follow the weights), and max_samples counts the positive-weight rows."""
    from facesegment.forest._grow import RowDraw, sampling_pool

    X, y = data(120)
    w = np.where(np.arange(120) < 60, 3.0, 1.0)
    w[:10] = 0.0
    est = make(kind, n_estimators=40, bootstrap=True, max_samples=0.5).fit(X, y,
                                                                           sample_weight=w)
    draw = RowDraw(55, True, *sampling_pool(w, True))
    drawn = np.concatenate([draw.indices(np.random.default_rng(int(s)), 120)
                            for s in est.tree_seeds_])
    counts = np.bincount(drawn, minlength=120)
    assert counts[:10].sum() == 0                          # zero weight: never drawn
    ratio = counts[10:60].mean() / counts[60:].mean()
    assert 2.5 < ratio < 3.5, ratio
    assert est.forest_.n_samples[est.forest_.roots].tolist() == [55] * 40


@pytest.mark.parametrize("kind", KINDS)
def test_oob_score_is_close_to_held_out_accuracy(kind):
    X, y = data(500)
    Xt, yt = data(1000, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # rows drawn by every tree
        est = make(kind, n_estimators=24, bootstrap=True, oob_score=True).fit(X, y)
    assert est.oob_decision_function_.shape == (500, 2)
    assert abs(est.oob_score_ - est.score(Xt, yt)) < 0.06, (est.oob_score_, est.score(Xt, yt))
    pred = np.argmax(est.oob_decision_function_, axis=1)
    assert est.oob_score_ == pytest.approx(np.mean(pred == y))
    scored = make(kind, n_estimators=24, bootstrap=True,
                  oob_score=balanced_accuracy_score).fit(X, y)
    assert scored.oob_score_ == pytest.approx(balanced_accuracy_score(y, pred))
    same_arrays(scored.forest_, est.forest_)


@pytest.mark.parametrize("kind", KINDS)
def test_warm_start_keeps_the_first_trees_and_equals_a_fresh_forest(kind):
    X, y = data(200)
    est = make(kind, n_estimators=4, bootstrap=True, warm_start=True, oob_score=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est.fit(X, y)
        first = [tree_parts(est.forest_, i) for i in range(4)]
        oob4 = est.oob_score_
        est.set_params(n_estimators=8).fit(X, y)
        fresh = make(kind, n_estimators=8, bootstrap=True, oob_score=True).fit(X, y)
    assert est.forest_.n_trees == 8 and len(est.estimators_) == 8
    for i in range(4):
        same_parts(tree_parts(est.forest_, i), first[i])
    same_arrays(est.forest_, fresh.forest_)
    assert est.oob_score_ == fresh.oob_score_ and 0 < oob4 <= 1
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.mean([t.predict_proba(X) for t in est.estimators_], axis=0),
                               proba, rtol=1e-5, atol=1e-6)
    with pytest.warns(UserWarning, match="no tree was added"):
        est.fit(X, y)
    with pytest.raises(ValueError, match="must be at least the 8 trees"):
        est.set_params(n_estimators=5).fit(X, y)


@pytest.mark.parametrize("kind", KINDS)
def test_max_samples_sets_each_trees_draw(kind):
    X, y = data(200)
    est = make(kind, bootstrap=True, max_samples=50).fit(X, y)
    assert est.forest_.n_samples[est.forest_.roots].tolist() == [50] * 3
    with pytest.raises(InvalidParameterError, match="max_samples=300 exceeds the 200"):
        make(kind, bootstrap=False, max_samples=300).fit(X, y)
