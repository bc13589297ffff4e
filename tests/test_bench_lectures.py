"""The lectures' benchmarks measure what their reports say: warm-started sizes equal
fresh forests, out-of-bag voters are counted per row, single trees are read
from both libraries alike, standard errors are those of the differences."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from benchmarks.lectures_cart import tree_shapes
from benchmarks.lectures_oob import growth, ours, theirs, votes_per_row
from benchmarks.lectures_regression import paired_se


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1)
    return X[:200], y[:200], X[200:], y[200:]


@pytest.mark.parametrize("make", [ours, theirs])
def test_growth_by_warm_starts_equals_fresh_forests_of_each_size(data, make):
    X, y, Xt, yt = data
    rows = growth(make, X, y, Xt, yt, [4, 9], seed=3)
    for row in rows:
        fresh = make(row["trees"], 3, oob_score=True).fit(X, y)
        assert row["oob"] == pytest.approx(100 * fresh.oob_score_, abs=1e-12)
        assert row["test"] == pytest.approx(100 * np.mean(fresh.predict(Xt) == yt), abs=1e-12)
        assert row["oob_minus_test"] == pytest.approx(row["oob"] - row["test"])


def test_votes_per_row_counts_the_trees_that_did_not_draw_each_row(data):
    X, y, _, _ = data
    est = RandomForestClassifier(7, oob_score=True, random_state=0).fit(X, y)
    n = X.shape[0]
    voters = np.zeros(n)
    for rows in est.estimators_samples_:
        out = np.ones(n, bool)
        out[rows] = False
        voters += out
    assert votes_per_row(est) == pytest.approx(voters.mean())
    assert 0 < votes_per_row(est) < 7


@pytest.mark.parametrize("make", [ours, theirs])
def test_tree_shapes_match_each_tree_alone(data, make):
    X, y, Xt, yt = data
    est = make(5, 1).fit(X, y)
    shapes = tree_shapes(est, Xt, yt)
    assert len(shapes) == 5
    for (nodes, depth, acc), tree in zip(shapes, est.estimators_):
        if hasattr(tree, "forest_"):
            assert nodes == tree.forest_.n_nodes and depth == tree.forest_.depth.max()
        else:
            assert nodes == tree.tree_.node_count and depth == tree.tree_.max_depth
        pred = est.classes_[np.argmax(tree.predict_proba(Xt), axis=1)]
        assert acc == pytest.approx(100 * np.mean(pred == yt))
    if hasattr(est, "forest_"):
        assert sum(s[0] for s in shapes) == est.forest_.n_nodes


def test_paired_se_is_the_standard_error_of_the_differences():
    assert paired_se([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]) == pytest.approx(1 / np.sqrt(3))
    assert paired_se([5.0, 6.0], [4.0, 5.0]) == 0.0  # a constant difference
    assert paired_se([1.0], [0.0]) == 0.0
