"""Cost-complexity pruning: the weakest-link kernel against its naive twin and
scikit-learn's path, pruned trees against brute force over all subtrees."""

import doctest

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from facesegment.forest import AxisAlignedForest, AxisAlignedForestRegressor, CO2Forest
from facesegment.forest import pruning
from facesegment.forest.pruning import (TIE, cost_complexity_pruning_path, node_risks, prune,
                                        tree_class_counts, weakest_link_path)
from facesegment.modelio.model import Model, save_model
from facesegment.models import load_model
from tests.naive_pruning import (naive_best_subtree, naive_node_counts, naive_node_risks,
                                 naive_weakest_link_path)


def _data(n=400, seed=0, k=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = np.clip(np.round(X[:, 0] + 0.8 * rng.normal(size=n) + 1), 0, k - 1).astype(int)
    return X, y


def _tree(X, y, **kw):
    return AxisAlignedForest(1, max_features="all", bootstrap=False, random_state=0,
                             **kw).fit(X, y)


def _local(fa, tree=0):
    first = int(fa.roots[tree])
    end = int(fa.roots[tree + 1]) if tree + 1 < fa.n_trees else fa.n_nodes
    left = fa.left[first:end].astype(np.int64)
    return (np.where(left >= 0, left - first, -1),
            np.where(left >= 0, fa.right[first:end] - first, -1))


def test_doctests():
    assert doctest.testmod(pruning).failed == 0


@pytest.mark.parametrize("gini", [False, True])
def test_node_risks_match_naive(gini):
    counts = np.random.default_rng(0).integers(0, 9, size=(40, 4)).astype(np.float64)
    counts[0] = counts.sum(axis=0)
    counts[5] = 0
    np.testing.assert_allclose(node_risks(counts, gini), naive_node_risks(counts, gini),
                               rtol=1e-13, atol=0)


def test_node_counts_from_rows_and_from_the_tree():
    X, y = _data()
    est = AxisAlignedForest(3, max_features=2, random_state=0).fit(X, y)
    for t in range(3):
        np.testing.assert_array_equal(tree_class_counts(est.forest_, t, X, y),
                                      naive_node_counts(est.forest_, t, X, y))
    flat = _tree(X, y)  # no bootstrap: the stored counts are the training rows'
    np.testing.assert_array_equal(tree_class_counts(flat.forest_, 0),
                                  naive_node_counts(flat.forest_, 0, X, y))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("criterion", ["entropy", "gini"])
@pytest.mark.parametrize("data", ["train", "stored", "heldout"])
def test_path_matches_naive_weakest_link_exactly(seed, criterion, data):
    X, y = _data(300, seed)
    est = AxisAlignedForest(2, max_features=3, random_state=seed).fit(X, y)
    Xo, yo = _data(200, seed + 10)
    args = {"train": (X, y), "stored": (None, None), "heldout": (Xo, yo)}[data]
    path = cost_complexity_pruning_path(est, *args, tree=1, criterion=criterion)
    left, right = _local(est.forest_, 1)
    counts = (naive_node_counts(est.forest_, 1, *args) if args[0] is not None
              else tree_class_counts(est.forest_, 1))
    risk = node_risks(counts, criterion == "gini")
    alphas, impurities, leaves = naive_weakest_link_path(left, right, list(risk), TIE)
    assert path.ccp_alphas.tolist() == alphas and path.impurities.tolist() == impurities
    assert path.n_leaves.tolist() == leaves
    assert leaves[-1] == 1 and len(leaves) > 5 and alphas[0] == 0.0
    assert np.all(np.diff(path.ccp_alphas) > TIE) and np.all(np.diff(path.n_leaves) < 0)


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
def test_path_equals_scikit_learns_on_its_own_tree(criterion):
    """scikit-learn cuts one tied branch per entry; its distinct alphas and the
    impurities after each run of ties are our steps."""
    X, y = _data(500, 3)
    clf = DecisionTreeClassifier(criterion=criterion, random_state=0).fit(X, y)
    t = clf.tree_
    counts = np.rint(t.value[:, 0, :] * t.weighted_n_node_samples[:, None])
    risk = node_risks(counts, criterion == "gini") / (np.log(2) if criterion == "entropy"
                                                      else 1.0)
    alphas, impurities, _, _ = weakest_link_path(t.children_left.astype(np.int64),
                                                 t.children_right.astype(np.int64), risk, TIE)
    ref = clf.cost_complexity_pruning_path(X, y)
    last = np.r_[np.flatnonzero(np.diff(ref.ccp_alphas) > TIE), len(ref.ccp_alphas) - 1]
    np.testing.assert_allclose(ref.ccp_alphas[last], alphas, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(ref.impurities[last], impurities, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("seed", [0, 1])
def test_pruned_tree_is_the_smallest_minimiser_of_the_cost(seed):
    X, y = _data(300, seed)
    est = _tree(X, y, max_depth=4)
    fa = est.forest_
    left, right = _local(fa)
    risk = node_risks(tree_class_counts(fa, 0, X, y), False)
    path = cost_complexity_pruning_path(est, X, y)
    probe = np.r_[path.ccp_alphas, (path.ccp_alphas[:-1] + path.ccp_alphas[1:]) / 2, 1.0]
    for alpha in probe:
        small = prune(est, float(alpha), X, y)
        kept = naive_best_subtree(left, right, risk, alpha)
        assert (small.forest_.left < 0).sum() == len(kept)
        # the pruned tree's leaves are the brute-force subtree's leaves (same values)
        leaf_values = sorted(map(tuple, fa.value[sorted(kept)].tolist()))
        got = sorted(map(tuple, small.forest_.value[small.forest_.left < 0].tolist()))
        assert got == leaf_values
        i = np.searchsorted(path.ccp_alphas, alpha, side="right") - 1
        assert (small.forest_.left < 0).sum() == path.n_leaves[i]


def test_pruned_predictions_follow_the_cut_nodes():
    X, y = _data(400, 5)
    est = AxisAlignedForest(3, max_features=2, random_state=0).fit(X, y)
    path = cost_complexity_pruning_path(est, X, y, tree=2)
    alpha = float(path.ccp_alphas[len(path.ccp_alphas) // 2])
    small = prune(est, alpha, X, y)
    assert small is not est and est.forest_.n_nodes > small.forest_.n_nodes
    assert small.forest_.n_trees == 3
    # each pruned tree, evaluated alone, stops where the original tree was cut
    one = prune(est, alpha, X, y, tree=2)
    assert one.forest_.n_trees == 1
    assert (one.forest_.left < 0).sum() == path.n_leaves[len(path.ccp_alphas) // 2]
    orig = est.apply(X)[:, 2]
    stop = one.apply(X)[:, 0]
    # the node reached in the pruned tree is an ancestor-or-self of the original leaf
    np.testing.assert_array_equal(one.forest_.value[stop],
                                  _first_cut_value(est.forest_, X, orig, one.forest_, stop))
    # alpha = 0 cuts only branches that do not lower the impurity: same predictions
    same = prune(est, 0.0)
    np.testing.assert_array_equal(same.predict(X), est.predict(X))


def _first_cut_value(fa, X, leaves, pruned, stop):
    """The value of the node at the pruned leaf's depth on each row's original path."""
    out = np.empty((X.shape[0], fa.n_classes), np.float32)
    for i, x in enumerate(X):
        node = fa.roots[2]
        while fa.depth[node] < pruned.depth[stop[i]]:
            node = fa.left[node] if np.float32(x[fa.feature[node]]) <= fa.threshold[node] \
                else fa.right[node]
        out[i] = fa.value[node]
    return out


def test_pruned_oblique_forest_and_model_round_trip(tmp_path):
    X, y = _data(300, 7)
    est = CO2Forest(2, max_depth=5, random_state=0).fit(X, y)
    path = cost_complexity_pruning_path(est, X, y)
    small = prune(est, float(path.ccp_alphas[2]), X, y)
    assert small.forest_.weights.shape[0] <= est.forest_.weights.shape[0]
    assert np.all(small.forest_.oblique < small.forest_.weights.shape[0])
    save_model(Model.from_estimator(small), tmp_path / "m")
    back = load_model(tmp_path / "m").to_estimator()
    assert back.predict_proba(X).tobytes() == small.predict_proba(X).tobytes()


def test_bad_input_is_named():
    X, y = _data(100)
    est = _tree(X, y)
    with pytest.raises(ValueError, match=r"alpha=-1\.0 must be a finite number >= 0"):
        prune(est, -1.0)
    with pytest.raises(ValueError, match="give both X and y"):
        cost_complexity_pruning_path(est, X)
    with pytest.raises(ValueError, match="y holds labels the forest does not know"):
        cost_complexity_pruning_path(est, X, y + 7)
    with pytest.raises(ValueError, match=r"tree=1 must be an integer in 0\.\.0"):
        cost_complexity_pruning_path(est, tree=1)
    with pytest.raises(ValueError, match="criterion='misclassification' must be one of"):
        cost_complexity_pruning_path(est, criterion="misclassification")
    with pytest.raises(ValueError, match="X has 3 features but the forest was grown on 5"):
        cost_complexity_pruning_path(est, X[:, :3], y)
    with pytest.raises(ValueError, match="y must hold class indices 0..2"):
        cost_complexity_pruning_path(est.forest_, X, y.astype(float))
    with pytest.raises(TypeError, match="needs a fitted classification forest"):
        cost_complexity_pruning_path(AxisAlignedForestRegressor(2).fit(X, y.astype(float)))
