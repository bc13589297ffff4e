"""The depth-first node order prediction walks (forest/_predict.py: pack_preorder):
the same trees renumbered, so every prediction is the one of the grower's order."""

import numpy as np
import pytest

from facesegment.forest._predict import (kernel_sparse, kernel_weights, pack_nodes,
                                         pack_preorder, predict_proba_packed_serial)
from facesegment.forest.registry import make_estimator


def _data(n=600, p=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, p), dtype=np.uint8)
    y = (X[:, 0].astype(int) + X[:, 3] - X[:, 5] > 128).astype(int) + (X[:, 7] > 200)
    return X, y


def _walk(roots, nodes, value, x):
    """One sample down each tree of a packed table (axis and two-probe nodes)."""
    out = []
    for r in roots:
        n = r
        while nodes[n, 0] >= 0:
            f, f2 = nodes[n, 1], nodes[n, 2]
            v = np.float32(x[f]) - (np.float32(x[f2]) if f2 >= 0 else np.float32(0))
            n = nodes[n, 0] + (0 if v <= nodes[n].view(np.float32)[3] else 1)
        out.append(value[n])
    return np.array(out)


@pytest.mark.parametrize("kind", ["axis", "two-probe", "co2", "extra"])
def test_preorder_renumbers_the_trees_and_keeps_every_prediction(kind):
    X, y = _data()
    est = make_estimator(kind, n_estimators=3, max_depth=7, random_state=0).fit(X, y)
    fa = est.forest_
    roots, nodes, nodes_f, value = pack_preorder(fa)
    # depth-first: each root first, its children next to each other right after it
    assert roots[0] == 0 and np.all(np.diff(roots) > 0)
    for r in roots:
        assert nodes[r, 0] in (-1, r + 1)
    internal = nodes[:, 0] >= 0
    assert np.all(nodes[internal, 0] > np.flatnonzero(internal))
    # the same predictions, through the kernels and sample by sample
    w, sp = kernel_weights(fa), kernel_sparse(fa)
    old, new = (np.empty((len(X), fa.n_classes)) for _ in range(2))
    predict_proba_packed_serial(X, fa.roots, *pack_nodes(fa), fa.value, w, *sp, -1,
                                fa.n_trees, old)
    predict_proba_packed_serial(X, roots, nodes, nodes_f, value, w, *sp, -1, fa.n_trees, new)
    np.testing.assert_array_equal(old, new)
    np.testing.assert_array_equal(est.predict_proba(X), old)
    if kind in ("axis", "two-probe"):
        a, b = pack_nodes(fa)[0], nodes
        for i in range(0, len(X), 97):
            np.testing.assert_array_equal(_walk(fa.roots, a, fa.value, X[i]),
                                          _walk(roots, b, value, X[i]))
