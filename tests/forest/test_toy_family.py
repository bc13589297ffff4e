"""Adding a split family is one Splitter class plus one registry row: a toy
family (one random cut per drawn feature, the best by information gain) grown
by the library's builder under an existing estimator, fitted and used through
the normal estimator API, cloned, pickled and saved as a model folder."""

import pickle
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from sklearn.base import clone

from facesegment.forest import AxisAlignedForest
from facesegment.forest._grow import draw_features
from facesegment.forest.families import Split, Splitter
from facesegment.forest.registry import ForestKind, kind_of, make_estimator, register_kind, \
    unregister_kind
from facesegment.modelio.model import Model, save_model
from facesegment.models import load_model


def _entropy(c):
    p = c[c > 0] / c.sum()
    return float(-(p * np.log(p)).sum())


@dataclass(frozen=True)
class RandomCutSplitter(Splitter):
    """``x[f] <= t``: for each of ``max_features`` drawn features one threshold
    uniform between the node's smallest and largest value; the best cut wins."""

    name: ClassVar[str] = "random-cut"
    max_features: int = 1

    def find(self, tree, seg):
        y = tree.y[seg]
        c = np.bincount(y, minlength=tree.n_classes).astype(np.float64)
        best = Split()
        for f in draw_features(tree.rng, tree.perm, self.max_features):
            v = tree.X[seg, f].astype(np.float64)
            lo, hi = v.min(), v.max()
            t = float(np.float32(lo + tree.rng.random() * (hi - lo)))
            left = v <= t
            nl = int(left.sum())
            if lo == hi or nl < tree.min_leaf or v.shape[0] - nl < tree.min_leaf:
                continue
            cl = np.bincount(y[left], minlength=tree.n_classes).astype(np.float64)
            gain = _entropy(c) - (nl * _entropy(cl) + (v.shape[0] - nl) * _entropy(c - cl)) \
                / v.shape[0]
            if gain > best.gain:
                best = Split(int(f), -1, t, gain)
        return best


ROW = ForestKind("random-cut", "AxisAlignedForest", splitter=RandomCutSplitter,
                 label="random cuts", description="one random cut per drawn feature")


@pytest.fixture
def row():
    register_kind(ROW)
    try:
        yield ROW
    finally:
        unregister_kind(ROW.name)


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, (n, 8), dtype=np.uint8)
    return X, (X[:, 2] > 127).astype(int) + (X[:, 5] > 200)


def test_the_row_fits_and_predicts_through_the_estimator_api(row, tmp_path):
    X, y = _data()
    est = make_estimator("random-cut", n_estimators=8, max_features=3, random_state=0)
    assert isinstance(est, AxisAlignedForest) and est._split_family is RandomCutSplitter
    est.fit(X, y)
    assert kind_of(est) == "random-cut"
    proba = est.predict_proba(X)
    assert proba.shape == (300, 3) and np.allclose(proba.sum(axis=1), 1)
    assert est.score(X, y) > 0.8
    fa = est.forest_
    inner = fa.left >= 0
    assert inner.any() and (fa.feature2[inner] == -1).all()
    assert (fa.threshold[inner] % 1 != 0.5).mean() > 0.5  # not midpoints of integers
    again = clone(est).set_params(n_jobs=2).fit(X, y)
    assert again.forest_.threshold.tobytes() == fa.threshold.tobytes()
    back = pickle.loads(pickle.dumps(est))
    assert back.predict_proba(X).tobytes() == proba.tobytes()
    model = load_model(save_model(Model.from_estimator(est), tmp_path / "m"))
    assert model.kind == "random-cut"
    assert model.to_estimator().predict_proba(X).tobytes() == proba.tobytes()


def test_the_axis_row_is_unchanged(row):
    X, y = _data()
    a = make_estimator("axis", n_estimators=3, random_state=1).fit(X, y)
    assert type(a) is AxisAlignedForest and kind_of(a) == "axis"
