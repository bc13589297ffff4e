"""Counting the dense oblique nodes evaluated (``count_oblique_visits``): the
level kernels' count against naive walks (integer weights: every kernel's dot
products are exact, so all take the same decisions), against the nodes the
level kernels' own prediction reaches (trained float weights), per tree and
per region; forests with sparse rows keep the general per-pixel count."""

from dataclasses import replace

import numpy as np
import pytest

import facesegment.dense._visits as V
from facesegment.dense import count_oblique_visits, predict_proba_raw
from facesegment.dense._oblique_forests import oblique_above
from facesegment.dense._packing import pack_nodes
from facesegment.forest import CO2Forest
from facesegment.layout import DEFAULT_LAYOUT
from facesegment.modelio.model import Model
from tests import naive
from tests.dense.test_inference import random_forest, random_image, random_model


def naive_above(arrays):
    """Per node, the dense oblique nodes strictly above it (a walk from each root)."""
    above = np.full(arrays.n_nodes, -1, np.int64)
    stack = [(int(r), 0) for r in arrays.roots]
    while stack:
        n, k = stack.pop()
        above[n] = k
        if arrays.left[n] >= 0:
            k += int(arrays.oblique[n] >= 0)
            stack += [(int(arrays.left[n]), k), (int(arrays.right[n]), k)]
    return above


def integer_model(seed, n_trees=4, max_depth=6):
    """:func:`random_model` with integer weights and thresholds halfway between
    integers: every dot product is an exact float32 integer, in any order."""
    model = random_model(seed, n_trees=n_trees, max_depth=max_depth, kinds=("oblique", "axis"))
    fa = model.arrays
    rng = np.random.default_rng(seed + 7)
    w = rng.integers(-2, 3, fa.weights.shape).astype(np.float32)
    thr = fa.threshold.copy()
    obl = fa.oblique >= 0
    thr[obl] = np.floor(127.5 * w[fa.oblique[obl]].sum(axis=1)
                        + rng.normal(0, 600, obl.sum())) + 0.5
    return replace(model, arrays=fa._replace(weights=w, threshold=thr.astype(np.float32)))


def naive_per_tree(arrays, X, max_depth=None):
    counts = [naive.naive_oblique_visits(arrays, X, max_depth=max_depth, n_trees=m)
              for m in range(1, arrays.n_trees + 1)]
    return np.diff([0] + counts)


def test_oblique_above_matches_a_walk_from_the_roots():
    for seed in range(4):
        fa = random_forest(seed, n_trees=5, max_depth=7, kinds=("oblique", "axis",
                                                                  "two-probe"))
        nodes, _ = pack_nodes(fa, 80, DEFAULT_LAYOUT)
        above = oblique_above(nodes, fa.depth)
        np.testing.assert_array_equal(above, naive_above(fa))
        assert above.max() > 1


@pytest.mark.parametrize("mode", ["full", "strict"])
def test_level_count_equals_naive_walks_per_tree_and_depth(mode):
    model = integer_model(3)
    image = random_image(3, 36, 33)
    X, _, _ = naive.naive_windows(image, mode)
    for max_depth in (None, 0, 1, 2, 4):
        per = count_oblique_visits(model, image, mode=mode, max_depth=max_depth, per_tree=True)
        want = naive_per_tree(model.arrays, X, max_depth)
        np.testing.assert_array_equal(per, want)
        assert per.dtype == np.int64 and per.shape == (4,)
        for m in (1, 3):   # a forest of the first m trees: the prefix
            np.testing.assert_array_equal(count_oblique_visits(
                model, image, mode=mode, max_depth=max_depth, n_trees=m, per_tree=True),
                per[:m])
        assert count_oblique_visits(model, image, mode=mode, max_depth=max_depth) == per.sum()
    assert count_oblique_visits(model, image, mode=mode) > 0


def test_strict_counts_the_inner_pixels_only():
    model = integer_model(5, n_trees=3)
    image = random_image(5, 40, 38)
    full = count_oblique_visits(model, image, mode="full", per_tree=True)
    strict = count_oblique_visits(model, image, mode="strict", per_tree=True)
    Xs, _, _ = naive.naive_windows(image, "strict")
    np.testing.assert_array_equal(strict, naive_per_tree(model.arrays, Xs))
    assert (strict <= full).all() and strict.sum() < full.sum()
    assert count_oblique_visits(model, image[:30, :30], mode="strict", per_tree=True).tolist() \
        == [0, 0, 0]


def _trained_co2(seed=0):
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (34, 37, 3), dtype=np.uint8)
    image[:, :18, 0] //= 2
    X, _, _ = naive.naive_windows(image, "full")
    y = np.digitize(X[:, 0].astype(int) - X[:, -1] + (X[:, 7] > 120) * 50, [-40, 0, 40])
    est = CO2Forest(4, max_depth=8, oblique_min_samples=20, init="best", n_pairs=20,
                    random_state=seed).fit(X, y)
    return image, Model.from_estimator(est, "co2-best")


@pytest.mark.parametrize("max_depth", [None, 3])
def test_level_count_is_the_visits_of_the_predicted_nodes(max_depth):
    """Float weights: the count is that of the nodes the level kernels' prediction
    reaches (a model whose node values are their oblique ancestors' count)."""
    image, model = _trained_co2()
    fa = model.arrays
    assert fa.weights.shape[0] > 0
    value = np.zeros_like(fa.value)
    value[:, 0] = naive_above(fa)
    probe = replace(model, arrays=fa._replace(value=value))
    per = count_oblique_visits(model, image, max_depth=max_depth, per_tree=True)
    for m in (1, 2, 4):   # 1 / m is exact: the mean times m is the sum
        raw = predict_proba_raw(probe, image, max_depth=max_depth, n_trees=m)
        assert int(np.rint(raw[..., 0].astype(np.float64) * m).sum()) == per[:m].sum()


def test_only_dense_forests_use_the_level_count(monkeypatch):
    from tests.forest.test_sparse import mixed_forest

    seen = []
    count = V.count
    monkeypatch.setattr(V, "count", lambda p, region, levels: seen.append(levels)
                        or count(p, region, levels))
    image, model = _trained_co2(1)
    X, _, _ = naive.naive_windows(image, "full")
    count_oblique_visits(model, image)
    y = np.digitize(X[:, 0].astype(int) - X[:, -1], [-40, 0, 40])
    mixed = Model.from_estimator(mixed_forest(X, y), "co2")
    assert count_oblique_visits(mixed, image) == naive.naive_oblique_visits(mixed.arrays, X)
    assert seen == [True, False]
