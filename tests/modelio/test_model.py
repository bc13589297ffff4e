"""Model folders: round trip, byte-identical saves, validation of bad folders."""

import json
import types

import numpy as np
import pytest

from facesegment.errors import DataError
from facesegment.forest import AxisAlignedForest, CO2Forest, TwoProbeForest
from facesegment.modelio.model import MODEL_FORMAT_VERSION, Model, save_model
from facesegment.models import load_model


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
    # a generic 4-class problem stays a 4-class problem (not the 8 face classes)
    assert m.class_names == ("0", "1", "2", "3") and m.arrays.value.shape[1] == 4
    assert m.layout is None  # 30 tabular features: no window layout
    got = m.to_estimator()
    np.testing.assert_array_equal(got.predict_proba(X), est.predict_proba(X))
    np.testing.assert_array_equal(got.predict(X), est.predict(X))
    doc = json.loads((path / "model.json").read_text())
    assert doc["format_version"] == MODEL_FORMAT_VERSION and doc["kind"] == kind
    assert doc["params"]["n_estimators"] == 2 and "tree_seconds" in doc["metrics"]
    from facesegment import __version__

    assert doc["package_version"] == __version__ and doc["n_features"] == 30
    if kind == "co2":
        assert m.arrays.weights.shape[0] > 0
        np.testing.assert_array_equal(m.mean, est.feature_mean_)
        # the real parameter values, not null
        assert all(doc["params"][k] is not None for k in ("nu", "eta", "tau", "n_passes"))


@pytest.mark.parametrize("labels", [
    np.array(["cat", "dog", "emu"]), np.array([-1.0, 0.0, 7.0]), np.array([10, 20, 30]),
    np.array([False, True, True])])
def test_any_classes_round_trip_exactly(tmp_path, labels):
    X, y = _data()
    y3 = labels[y % len(labels)]
    est = AxisAlignedForest(n_estimators=2, random_state=0).fit(X, y3)
    m = load_model(save_model(Model.from_estimator(est), tmp_path / "m"))
    assert m.kind == "axis"
    assert m.classes.dtype == est.classes_.dtype
    np.testing.assert_array_equal(m.classes, est.classes_)
    back = m.to_estimator()
    assert back.predict_proba(X).shape == (len(X), len(np.unique(y3)))
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


def test_registry_variant_kind_is_recorded(tmp_path):
    X, y = _data()
    est = CO2Forest(n_estimators=1, init="best", n_pairs=10, oblique_min_samples=40,
                    max_depth=3, random_state=0).fit(X, y)
    m = load_model(save_model(Model.from_estimator(est, kind="co2-best"), tmp_path / "m"))
    assert m.kind == "co2-best" and m.to_estimator().init == "best"
    with pytest.raises(ValueError, match="pass kind= .one of: co2, co2-best"):
        Model.from_estimator(est)   # a kind is recorded as given, never guessed


def test_window_models_record_their_layout(tmp_path):
    from facesegment.layout import DEFAULT_LAYOUT, WindowLayout

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(200, 5, 5, 2), dtype=np.uint8)
    y = (X[:, 2, 2, 0] > 128).astype(int)
    est = AxisAlignedForest(n_estimators=2, random_state=0).fit(X, y)
    layout = WindowLayout(window=5, channels=2)
    m = load_model(save_model(Model.from_estimator(est, layout=layout), tmp_path / "m"))
    assert m.layout == layout and m.layout.n_features == 50
    with pytest.raises(ValueError, match="does not match"):
        Model.from_estimator(est, layout=DEFAULT_LAYOUT)


def test_forest_file_is_compressed(tmp_path):
    import h5py

    X, y = _data(n=20000)
    est = AxisAlignedForest(n_estimators=4, random_state=0).fit(X, y)
    p = save_model(Model.from_estimator(est), tmp_path / "m")
    with h5py.File(p / "forest.h5") as f:
        assert f["forest/value"].compression == "gzip"
    raw = sum(getattr(est.forest_, k).nbytes for k in est.forest_._fields)
    assert (p / "forest.h5").stat().st_size < raw / 2


def test_format_version_1_still_loads(tmp_path):
    """A model folder written before version 2 (no classes, layout or package version)."""
    import h5py

    from facesegment.forest import FOREST_ARRAY_NAMES

    X, y = _data()
    est = CO2Forest(n_estimators=1, init="best", n_pairs=10, oblique_min_samples=40,
                    max_depth=3, random_state=0).fit(X, y)
    p = tmp_path / "old"
    p.mkdir()
    with h5py.File(p / "forest.h5", "w") as f:
        f.attrs["format"] = "facesegment-forest"
        f.attrs["format_version"] = 1
        g = f.create_group("forest")
        for name in FOREST_ARRAY_NAMES:
            g.create_dataset(name, data=getattr(est.forest_, name))
        f.create_dataset("mean", data=est.feature_mean_)
        f.create_dataset("std", data=est.feature_std_)
    doc = {"format": "facesegment-model", "format_version": 1, "kind": "co2",
           "params": {**est.get_params(), "scheduler": None}, "n_features": 30,
           "class_names": ["a", "b", "c", "d"], "sampling_factors": [1, 1, 1, 1],
           "provenance": {}, "metrics": {"alpha": 0.5}, "files": {}}
    (p / "model.json").write_text(json.dumps(doc))
    m = load_model(p)
    assert m.kind == "co2-best" and m.layout is None and list(m.classes) == [0, 1, 2, 3]
    np.testing.assert_array_equal(m.to_estimator().predict_proba(X), est.predict_proba(X))


def test_model_folder_with_a_users_file_is_not_replaced(tmp_path, axis_model):
    """Replacing a model must never delete a file the user put beside it."""
    _, _, model = axis_model
    p = save_model(model, tmp_path / "m")
    (p / "NOTES.txt").write_text("my notes")
    with pytest.raises(DataError, match="NOTES.txt"):
        save_model(model, p)
    assert (p / "NOTES.txt").read_text() == "my notes" and (p / "forest.h5").is_file()


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
    assert m.class_names[3] == "c3" and m.arrays.value.shape[1] == 8  # 4 ids of 8 names
    # provenance paths are stored relative to the model folder
    from pathlib import Path

    assert not Path(m.provenance["windows"]).is_absolute()
    assert (tmp_path / "m" / m.provenance["windows"]).resolve() == Path("w.h5").resolve()
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
    from facesegment.modelio.model import check_model_output

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
    with pytest.raises(DataError, match="m: cannot write the model.*[Nn]o space left"):
        save_model(model, p)
    monkeypatch.undo()
    assert (p / "forest.h5").read_bytes() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m"]
