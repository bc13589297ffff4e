"""Non-greedy refinement of the top levels of a tree (``refine_depth``): grafting
greedy subtrees under refined leaves, the trees it grows (depth, oblique trunk,
subtrees grown on what the trunk sends), determinism, the registry kind
``co2-nongreedy`` and its model round trip."""

import numpy as np
import pytest

from facesegment.forest import NonGreedyForest
from facesegment.forest._graft import graft
from facesegment.forest.registry import kind_of, make_estimator
from tests import naive
from tests.forest.test_extra import dense_matches_predict, same_forest


def _tree(left, right, feature, threshold, depth, weights=None, oblique=None, value=None):
    n = len(left)
    p = 2 if weights is None else weights.shape[1]
    return {"left": np.array(left, np.int32), "right": np.array(right, np.int32),
            "feature": np.array(feature, np.int32), "feature2": np.full(n, -1, np.int32),
            "oblique": (np.full(n, -1, np.int32) if oblique is None
                        else np.array(oblique, np.int32)),
            "threshold": np.array(threshold, np.float32),
            "value": (np.full((n, 2), 0.5, np.float32) if value is None
                      else np.array(value, np.float32)),
            "depth": np.array(depth, np.int32), "n_samples": np.arange(n, dtype=np.int32) + 1,
            "weights": np.zeros((0, p), np.float32) if weights is None else weights}


def _arrays(t):
    from facesegment.forest._arrays import ForestArrays

    return ForestArrays(np.zeros(1, np.int32), *(t[k] for k in (
        "left", "right", "feature", "feature2", "oblique", "threshold", "value", "depth",
        "n_samples", "weights")))


def test_graft_puts_each_subtree_under_its_leaf():
    # trunk: oblique root (x0 + x1 <= 1), two leaves
    trunk = _tree([1, -1, -1], [2, -1, -1], [-1, -1, -1], [1.0, 0, 0], [0, 1, 1],
                  weights=np.array([[1.0, 1.0]], np.float32), oblique=[0, -1, -1])
    # under leaf 2: an oblique root (x0 - x1 <= 0) with an axis split (x0 <= 3) on its right
    sub = _tree([1, -1, 3, -1, -1], [2, -1, 4, -1, -1], [-1, -1, 0, -1, -1],
                [0.0, 0, 3.0, 0, 0], [0, 1, 1, 2, 2],
                weights=np.array([[1.0, -1.0]], np.float32), oblique=[0, -1, -1, -1, -1],
                value=[[0.5, 0.5], [1, 0], [0.5, 0.5], [0.2, 0.8], [0, 1]])
    g = graft(trunk, {2: sub})
    assert g["left"].tolist() == [1, -1, 3, -1, 5, -1, -1]
    assert g["right"].tolist() == [2, -1, 4, -1, 6, -1, -1]
    assert g["oblique"].tolist() == [0, -1, 1, -1, -1, -1, -1]
    assert g["depth"].tolist() == [0, 1, 1, 2, 2, 3, 3]
    assert g["weights"].tolist() == [[1.0, 1.0], [1.0, -1.0]]
    assert g["feature"][4] == 0 and g["threshold"][4] == 3.0
    assert g["n_samples"][2] == sub["n_samples"][0]
    # routing: what the trunk sends right then follows the subtree
    fa = _arrays(g)
    for x, leaf in [((0.2, 0.3), 1), ((3.0, 3.5), 3), ((2.5, 1.0), 5), ((5.0, 1.0), 6)]:
        assert naive.naive_leaf(fa, np.array(x, np.float32), 0) == leaf
    with pytest.raises(ValueError, match="node 0 of the trunk is not a leaf"):
        graft(trunk, {0: sub})


def _toy(n, p=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = ((X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] * X[:, 3] > 0.2)).astype(int)
    return X, y


KW = dict(init="co2", n_epochs=3, oblique_min_samples=40, random_state=0)


def test_refined_levels_then_greedy_levels_down_to_max_depth():
    X, y = _toy(1500)
    est = NonGreedyForest(n_estimators=3, max_depth=7, refine_depth=2, **KW).fit(X, y)
    fa = est.forest_
    assert int(fa.depth.max()) <= 7 and int(fa.depth.max()) > 2
    for t, st in enumerate(est.tree_stats_):
        assert st["refined_depth"] <= 2 and st["max_depth"] <= 7 and st["t_below"] > 0
        root = fa.roots[t]
        assert fa.oblique[root] >= 0                   # the refined root is oblique
    # every internal node splits its samples; leaves hold the tree's samples
    inner = fa.left >= 0
    assert (fa.n_samples[inner] == fa.n_samples[fa.left[inner]]
            + fa.n_samples[fa.right[inner]]).all()
    # the subtrees were grown on what the refined trunk sends (inference arithmetic
    # may move a handful of boundary samples)
    one = NonGreedyForest(n_estimators=1, max_depth=7, refine_depth=2, bootstrap=False,
                          **KW).fit(X, y)
    leaves = one.apply(X)[:, 0]
    counts = np.bincount(leaves, minlength=one.forest_.left.shape[0])
    is_leaf = one.forest_.left < 0
    agree = np.minimum(counts[is_leaf], one.forest_.n_samples[is_leaf]).sum() / len(y)
    assert agree >= 0.99
    # refining only the top levels keeps the accuracy of deep trees
    shallow = NonGreedyForest(n_estimators=3, max_depth=2, **KW).fit(X, y)
    Xt, yt = _toy(1500, seed=1)
    assert est.score(Xt, yt) > shallow.score(Xt, yt) + 0.05


def test_refine_depth_at_or_below_max_depth_is_the_whole_tree():
    X, y = _toy(400)
    a = NonGreedyForest(n_estimators=2, max_depth=3, **KW).fit(X, y)
    same_forest(a, NonGreedyForest(n_estimators=2, max_depth=3, refine_depth=3, **KW).fit(X, y))
    same_forest(a, NonGreedyForest(n_estimators=2, max_depth=3, refine_depth=5, **KW).fit(X, y))


def test_refined_forest_same_seed_identical_any_n_jobs():
    X, y = _toy(600)
    kw = dict(n_estimators=3, max_depth=None, refine_depth=2, **KW)
    a = NonGreedyForest(**kw).fit(X, y)
    same_forest(a, NonGreedyForest(**kw).fit(X, y))
    same_forest(a, NonGreedyForest(**kw, n_jobs=2).fit(X, y))
    dense_matches_predict(NonGreedyForest(n_estimators=2, max_depth=6, refine_depth=2, **KW))


def test_registry_kind_and_model_round_trip(tmp_path):
    from facesegment.modelio.model import Model, save_model
    from facesegment.models import load_model

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (600, 12), dtype=np.uint8)
    y = (X[:, 0].astype(int) + X[:, 1] > 255).astype(int) + (X[:, 2] > 200)
    est = make_estimator("co2-nongreedy", n_estimators=2, max_depth=6, refine_depth=2,
                         n_epochs=2, oblique_min_samples=40, random_state=0).fit(X, y)
    assert kind_of(est) == "co2-nongreedy" and est.init == "co2"
    assert kind_of(NonGreedyForest(init="co2")) == "nongreedy"   # no refine_depth
    m = load_model(save_model(Model.from_estimator(est), tmp_path / "m"))
    back = m.to_estimator()
    assert m.kind == "co2-nongreedy" and back.refine_depth == 2
    assert back.predict_proba(X).tobytes() == est.predict_proba(X).tobytes()


@pytest.mark.parametrize("bad, match", [({"refine_depth": 0}, "refine_depth=0"),
                                        ({"init_nu": 0}, "init_nu=0"),
                                        ({"oblique_min_samples": 1}, "oblique_min_samples=1")])
def test_bad_refinement_parameters_are_named(bad, match):
    X, y = _toy(50)
    with pytest.raises(ValueError, match=match):
        NonGreedyForest(**bad).fit(X, y)
