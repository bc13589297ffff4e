"""Fitted forests stay the same bytes: every kind of the registry (and the grower
paths behind it: CART criteria, missing values, weighted and stratified draws,
warm starts, regressors with and without presorting, density forests, ferns,
rotation, non-greedy trees and grafted greedy subtrees) fitted on fixed small
data with fixed seeds, hashed (every fitted array and the predictions), and
compared with the hashes in ``restructure_hashes.json``.

Regenerate the file (only when a change is *meant* to change results)::

    PYTHONPATH=$PWD python -m tests.forest.test_restructure_identity --write
"""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from facesegment.forest import NonGreedyTree
from facesegment.forest.registry import KINDS, make_estimator

REFERENCE = Path(__file__).with_name("restructure_hashes.json")

#: Fitted attributes that are timings, not results.
SKIP = {"tree_stats_"}


def _data():
    rng = np.random.default_rng(12345)
    n, p = 240, 12
    X = rng.integers(0, 256, size=(n, p), dtype=np.uint8)
    y = ((X[:, 0].astype(int) + X[:, 3] > 255).astype(int)
         + (X[:, 5] > 180).astype(int))
    Xf = (X.astype(np.float32) / 17.0 + rng.normal(scale=0.3, size=(n, p))).astype(np.float32)
    Xnan = Xf.copy()
    Xnan[rng.random((n, p)) < 0.08] = np.nan
    yr = (X[:, 1].astype(np.float64) / 40.0 + np.sin(X[:, 2] / 30.0)
          + rng.normal(scale=0.1, size=n))
    w = rng.integers(1, 4, size=n).astype(np.float64)
    return X, y, Xf, Xnan, yr, w


def _update(h, obj):
    """Feed ``obj`` (arrays, tuples, dicts, scalars) to the hash ``h``."""
    if isinstance(obj, np.ndarray):
        h.update(f"a{obj.dtype.str}{obj.shape}".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif hasattr(obj, "_fields"):
        for name in obj._fields:
            h.update(name.encode())
            _update(h, getattr(obj, name))
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            h.update(repr(k).encode())
            _update(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(f"l{len(obj)}".encode())
        for v in obj:
            _update(h, v)
    elif obj is None or isinstance(obj, (bool, int, float, str, np.generic)):
        h.update(repr(obj).encode())
    else:
        h.update(type(obj).__name__.encode())


def fitted_hash(est):
    """Hash of every public fitted attribute (``name_``) but timings."""
    h = hashlib.sha256()
    for name in sorted(vars(est)):
        if name.endswith("_") and not name.startswith("_") and name not in SKIP:
            h.update(name.encode())
            _update(h, getattr(est, name))
    return h.hexdigest()[:32]


def _digest(a):
    h = hashlib.sha256()
    _update(h, np.asarray(a))
    return h.hexdigest()[:32]


def _classifier_cases():
    """``(name, make, X key, fit kwargs)`` of the classifiers."""
    small = {"n_estimators": 3, "random_state": 7}
    co2_fast = {"n_passes": 0.5, "oblique_min_samples": 40, "max_depth": 6}
    extra = {"co2": co2_fast, "co2-best": {**co2_fast, "n_pairs": 30},
             "co2-sparse": {**co2_fast, "n_pairs": 30, "max_nonzero": 4},
             "co2-pooled": {**co2_fast, "n_pairs": 30},
             "two-probe": {"n_pairs": 40},
             "ferns": {"depth": 5},
             "nongreedy": {"max_depth": 3, "n_epochs": 2, "batch_size": 32},
             "co2-nongreedy": {"max_depth": 5, "refine_depth": 2, "n_epochs": 2,
                               "batch_size": 32, "oblique_min_samples": 40}}
    cases = []
    for name, kind in KINDS.items():
        if kind.task != "classify":
            continue
        params = {**small, **extra.get(name, {})}
        cases.append((name, name, params, "X", {}))
        if name in ("nongreedy", "co2-nongreedy"):
            continue
        cases.append((name + "/float-nan", name, params, "Xnan", {}))
        if name in ("axis", "two-probe", "extra", "ferns", "co2-best", "rotation"):
            cases.append((name + "/weighted", name, params, "X", {"sample_weight": "w"}))
            cases.append((name + "/balanced-subsample", name,
                          {**params, "class_weight": "balanced_subsample",
                           "bootstrap": True}, "X", {}))
            cases.append((name + "/no-bootstrap", name,
                          {**params, "bootstrap": False, "max_samples": 0.8}, "X", {}))
    for crit in ("gini", "entropy"):
        cases.append((f"axis/{crit}/float", "axis",
                      {**small, "criterion": crit, "min_samples_leaf": 2}, "Xf", {}))
    cases.append(("axis/gini/uint8", "axis", {**small, "criterion": "gini"}, "X", {}))
    cases.append(("axis/gini/weighted", "axis", {**small, "criterion": "gini"}, "X",
                  {"sample_weight": "w"}))
    cases.append(("axis/oob", "axis", {**small, "oob_score": True}, "X", {}))
    cases.append(("axis/max_depth", "axis", {**small, "max_depth": 3,
                                             "min_samples_split": 5}, "Xf", {}))
    cases.append(("co2/float16", "co2", {**small, **co2_fast, "weight_dtype": "float16"},
                  "X", {}))
    cases.append(("co2/int8", "co2", {**small, **co2_fast, "weight_dtype": "int8"}, "X", {}))
    cases.append(("co2-sparse/prune", "co2-sparse",
                  {**small, **extra["co2-sparse"], "sparsity": "prune",
                   "weight_dtype": "float16"}, "X", {}))
    cases.append(("ferns/two-probe", "ferns", {**small, "depth": 4, "test": "two-probe"},
                  "X", {}))
    cases.append(("nongreedy/co2-init-float", "co2-nongreedy",
                  {**small, **extra["co2-nongreedy"]}, "Xf", {}))
    return cases


def _regressor_cases():
    cases = []
    for name in ("axis-regressor", "extra-regressor"):
        for key in ("X", "Xf"):
            for q in (0.5, 1.0):  # max_features=1.0 presorts (see use_presort)
                cases.append((f"{name}/{key}/q{q}", name,
                              {"n_estimators": 3, "random_state": 3, "max_features": q},
                              key, {}))
        cases.append((f"{name}/weighted", name,
                      {"n_estimators": 3, "random_state": 3, "min_samples_leaf": 2,
                       "max_depth": 6}, "Xf", {"sample_weight": "w"}))
    return cases


def _density_cases():
    base = {"n_estimators": 3, "random_state": 5, "max_depth": 4}
    return [("density/full", "density", base, "Xf3", {}),
            ("density/diag-all-cuts", "density",
             {**base, "covariance_type": "diag", "n_thresholds": None, "bootstrap": False},
             "Xf3", {}),
            ("density/weighted", "density", {**base, "min_samples_leaf": 8}, "Xf3",
             {"sample_weight": "w"})]


CASES = _classifier_cases() + _regressor_cases() + _density_cases()


def run_case(case, data):
    """``{"fit": hash, "out": hash}`` of one case."""
    label, kind, params, key, fit_kw = case
    X, y, Xf, Xnan, yr, w = data
    arrays = {"X": X, "Xf": Xf, "Xnan": Xnan, "Xf3": np.ascontiguousarray(Xf[:, :3]),
              "w": w}
    Xa = arrays[key]
    kw = {k: arrays[v] for k, v in fit_kw.items()}
    task = KINDS[kind].task
    est = make_estimator(kind, **params)
    if task == "classify":
        est.fit(Xa, y, **kw)
        out = est.predict_proba(Xa)
    elif task == "regress":
        est.fit(Xa, yr, **kw)
        out = est.predict(Xa)
    else:
        est.fit(Xa, **kw)
        out = est.score_samples(Xa)
    res = {"fit": fitted_hash(est), "out": _digest(out)}
    if params.get("warm_start") is None and task == "classify" and label == kind:
        # warm start: two more trees grown next to the first ones
        est.set_params(warm_start=True, n_estimators=params["n_estimators"] + 2)
        est.fit(Xa, y, **kw)
        res["warm"] = fitted_hash(est)
    return res


def _nongreedy_tree(data):
    X, y = data[0], data[1]
    est = NonGreedyTree(max_depth=3, n_epochs=2, batch_size=32, random_state=1).fit(X, y)
    return {"fit": fitted_hash(est), "out": _digest(est.predict_proba(X))}


def compute_all():
    data = _data()
    out = {case[0]: run_case(case, data) for case in CASES}
    out["NonGreedyTree"] = _nongreedy_tree(data)
    return out


@pytest.fixture(scope="module")
def reference():
    return json.loads(REFERENCE.read_text())


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fitted_forest_is_unchanged(case, data, reference):
    assert run_case(case, data) == reference[case[0]]


def test_nongreedy_tree_is_unchanged(data, reference):
    assert _nongreedy_tree(data) == reference["NonGreedyTree"]


def test_every_registry_kind_is_covered(reference):
    assert set(KINDS) <= {c[1] for c in CASES}
    assert set(reference) == {c[0] for c in CASES} | {"NonGreedyTree"}


if __name__ == "__main__":
    if "--write" in sys.argv:
        REFERENCE.write_text(json.dumps(compute_all(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {REFERENCE}")
    else:
        ref = json.loads(REFERENCE.read_text())
        got = compute_all()
        bad = [k for k in ref if ref[k] != got.get(k)]
        print("differ:", bad or "none")
