"""Model folders: round trip, byte-identical saves, validation of bad folders."""

import json
import types

import numpy as np
import pytest

from facesegment.errors import DataError
from facesegment.forest import AxisAlignedForest, CO2Forest, TwoProbeForest
from facesegment.model import MODEL_FORMAT_VERSION, Model, load_model, save_model


def _data(seed=0, n=300):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, 30), dtype=np.uint8)
    y = (X[:, 0] > 100).astype(np.uint8) + 2 * (X[:, 1] > 200)
    return X, y


@pytest.fixture(scope="module")
def axis_model():
    X, y = _data()
    est = AxisAlignedForest(n_estimators=3, random_state=0).fit(X, y)
    return X, est, Model.from_estimator(est, "axis", provenance={"note": "test"})


@pytest.mark.parametrize("cls, kind", [(AxisAlignedForest, "axis"),
                                       (TwoProbeForest, "two-probe"), (CO2Forest, "co2")])
def test_round_trip_predicts_identically(tmp_path, cls, kind):
    X, y = _data()
    kw = {"oblique_min_samples": 40, "max_depth": 3} if kind == "co2" else {}
    est = cls(n_estimators=2, random_state=1, **kw).fit(X, y)
    path = save_model(Model.from_estimator(est, kind), tmp_path / "m")
    m = load_model(path)
    assert m.kind == kind and m.arrays.n_trees == 2
    assert len(m.class_names) == 8 and m.arrays.value.shape[1] == 8  # classes 0..3 of 8
    got = m.to_estimator().predict_proba(X)
    np.testing.assert_array_equal(got[:, :4], est.predict_proba(X))
    assert (got[:, 4:] == 0).all()
    doc = json.loads((path / "model.json").read_text())
    assert doc["format_version"] == MODEL_FORMAT_VERSION and doc["kind"] == kind
    assert doc["params"]["n_estimators"] == 2 and "tree_seconds" in doc["metrics"]
    if kind == "co2":
        assert m.arrays.weights.shape[0] > 0
        np.testing.assert_array_equal(m.mean, est.feature_mean_)


def test_same_seed_same_bytes(tmp_path):
    X, y = _data()
    for i in range(2):
        est = AxisAlignedForest(n_estimators=2, random_state=3, n_jobs=i + 1).fit(X, y)
        save_model(Model.from_estimator(est, "axis"), tmp_path / f"m{i}")
    assert (tmp_path / "m0/forest.h5").read_bytes() == (tmp_path / "m1/forest.h5").read_bytes()


def test_windows_meta_is_recorded(tmp_path, axis_model):
    X, est, _ = axis_model
    meta = types.SimpleNamespace(
        class_names=[f"c{i}" for i in range(8)], sampling_factors=np.arange(1, 9) / 4,
        mean=np.full(30, 5, np.float32), std=np.full(30, 2, np.float32),
        path="w.h5", n_windows=300, seed=9, sources=["a", "b"])
    m = load_model(save_model(Model.from_estimator(est, "axis", meta), tmp_path / "m"))
    np.testing.assert_allclose(m.sampling_factors, np.arange(1, 9) / 4)
    assert m.class_names[3] == "c3" and m.provenance["windows"] == "w.h5"
    assert m.provenance["n_sources"] == 2 and (m.mean == 5).all()


def test_save_replaces_atomically(tmp_path, axis_model):
    _, _, model = axis_model
    p = save_model(model, tmp_path / "m")
    save_model(model, p)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m"]
    assert load_model(p / "model.json").arrays.n_nodes == model.arrays.n_nodes


def test_bad_folders_fail_clearly(tmp_path, axis_model):
    _, _, model = axis_model
    with pytest.raises(DataError, match="no such folder"):
        load_model(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="has no model.json"):
        load_model(tmp_path / "empty")
    p = save_model(model, tmp_path / "m")
    h5 = p / "forest.h5"
    data = h5.read_bytes()
    h5.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="truncated"):
        load_model(p)
    with pytest.raises(DataError, match="cannot be read"):
        load_model(p, verify=False)
    h5.write_bytes(data)
    doc = json.loads((p / "model.json").read_text())
    (p / "model.json").write_text(json.dumps({**doc, "format_version": 99}))
    with pytest.raises(DataError, match="version 99"):
        load_model(p)
    (p / "model.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(DataError, match="not a facesegment model"):
        load_model(p)
    (p / "model.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        load_model(p)


def test_from_estimator_requires_fitted():
    with pytest.raises(ValueError, match="not fitted"):
        Model.from_estimator(AxisAlignedForest(), "axis")


def test_unwritable_path_is_data_error(tmp_path, axis_model):
    """An --out that cannot be written is one DataError naming it, and nothing is left."""
    from facesegment.model import check_model_output

    _, _, model = axis_model
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    for path in (blocker / "m", blocker):
        with pytest.raises(DataError, match=str(path)):
            check_model_output(path)
        with pytest.raises(DataError, match=str(path)):
            save_model(model, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]


def test_folder_that_is_not_a_model_is_never_replaced(tmp_path, axis_model):
    _, _, model = axis_model
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "keep.txt").write_text("precious")
    with pytest.raises(DataError, match="holds no model.json"):
        save_model(model, folder)
    assert (folder / "keep.txt").read_text() == "precious"
    (tmp_path / "empty").mkdir()
    assert load_model(save_model(model, tmp_path / "empty")).arrays.n_trees == 3


def test_failed_rename_keeps_the_previous_model(tmp_path, axis_model, monkeypatch):
    import os

    _, _, model = axis_model
    p = save_model(model, tmp_path / "m")
    before = (p / "forest.h5").read_bytes()
    real_replace, calls = os.replace, []

    def replace(src, dst):
        calls.append(src)
        if len(calls) == 2:  # the new folder onto --out: the disk is full
            raise OSError(28, "No space left on device", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(DataError, match="m: cannot write the model .No space left"):
        save_model(model, p)
    monkeypatch.undo()
    assert (p / "forest.h5").read_bytes() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m"]
