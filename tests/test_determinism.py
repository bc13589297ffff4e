"""The determinism check (python -m benchmarks.determinism): its file-by-file
comparison on small made-up run folders, and the docs' statement against the
committed reports/determinism.json."""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from PIL import Image

from benchmarks import determinism
from benchmarks.determinism_compare import compare_file, compare_json, compare_trees

ROOT = Path(__file__).resolve().parents[1]


def _eval(detector_score=12.5, seconds=1.0):
    return {"kind": "axis", "n_images": 3,
            "trees": {"4": {"alpha": {"1.0": {"mean_jaccard": 30.25, "jaccard": [60.0, 0.5]}}}},
            "detector": {"trees": {"4": {"alpha": {"1.0": {"mean_jaccard": detector_score}}}}},
            "predict_seconds": seconds}


def _run_folder(root, *, node=0.5, detector=12.5, seconds=1.0, pixel=0, extra=False):
    """A tiny run folder: a windows file, a model, an evaluation, a crop."""
    (root / "data" / "windows" / "r").mkdir(parents=True)
    with h5py.File(root / "data" / "windows" / "r" / "train.h5", "w") as fh:
        fh.create_dataset("X", data=np.arange(12, dtype=np.uint8).reshape(3, 4),
                          track_times=False)
        fh.attrs["seed"] = 0
    m = root / "models" / "r" / "co2-4"
    m.mkdir(parents=True)
    with h5py.File(m / "forest.h5", "w") as fh:
        fh.create_dataset("threshold", data=np.array([node, 1.0, 2.0, 3.0], np.float32),
                          track_times=False)
    rep = root / "reports" / "runs" / "r"
    rep.mkdir(parents=True)
    (rep / "eval-co2.json").write_text(json.dumps(_eval(detector, seconds)))
    crop = np.zeros((4, 5, 3), np.uint8)
    crop[0, 0, 0] = pixel
    (root / "data" / "aligned" / "r" / "test").mkdir(parents=True)
    Image.fromarray(crop).save(root / "data" / "aligned" / "r" / "test" / "a.png")
    (rep / "stamps").mkdir()
    (rep / "stamps" / "x.json").write_text(json.dumps({"seconds": seconds}))
    if extra:
        (rep / "extra.json").write_text("{}")


def test_identical_folders_compare_identical(tmp_path):
    _run_folder(tmp_path / "a")
    _run_folder(tmp_path / "b")
    files = compare_trees(tmp_path / "a", tmp_path / "b")
    assert files and all(r["status"] == "identical" for r in files.values())
    assert not any("stamps" in rel for rel in files)          # measured times: not compared
    summary = determinism.summarize(files)
    assert set(summary) == {"windows", "forest co2", "scores co2", "detector-aligned crops"}
    assert all(s["status"] == "identical" for s in summary.values())


def test_differing_folders_say_what_moved_and_by_how_much(tmp_path):
    _run_folder(tmp_path / "a")
    _run_folder(tmp_path / "b", node=0.75, detector=12.53, seconds=9.0, pixel=7, extra=True)
    files = compare_trees(tmp_path / "a", tmp_path / "b")
    forest = files["models/r/co2-4/forest.h5"]
    assert forest["status"] == "differs" and forest["max_share"] == 0.25
    assert forest["max_abs"] == pytest.approx(0.25) and not forest["shape_differs"]
    ev = files["reports/runs/r/eval-co2.json"]
    assert ev["status"] == "differs" and ev["leaves_differing"] == 1   # not predict_seconds
    assert ev["detector_points"] == pytest.approx(0.03) and ev["test_points"] == 0.0
    crop = files["data/aligned/r/test/a.png"]
    assert crop["status"] == "differs" and crop["share"] == pytest.approx(1 / 20)
    assert files["reports/runs/r/extra.json"] == {"status": "missing", "in": "b"}
    assert files["data/windows/r/train.h5"]["status"] == "identical"
    summary = determinism.summarize(files)
    assert summary["windows"]["status"] == "identical"
    assert summary["scores co2"]["detector_points"] == pytest.approx(0.03)
    assert "detector-aligned ±0.0300 points" in determinism.cell(summary["scores co2"])
    assert determinism.cell(summary["forest co2"]).startswith("**moves**: 25% of values")


def test_only_a_measured_time_differs_is_same_content(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_eval(seconds=1.0)))
    b.write_text(json.dumps(_eval(seconds=2.0)))
    assert compare_file(a, b) == {"status": "same content"}
    d = compare_json({"n": [1, 2], "ms_per_image": 3}, {"n": [1, 3], "ms_per_image": 4})
    assert d["leaves_differing"] == 1 and d["paths"] == ["n/1"] and d["max_abs"] == 1


def test_an_array_of_another_shape_is_other_trees(tmp_path):
    for name, n in (("a.h5", 3), ("b.h5", 5)):
        with h5py.File(tmp_path / name, "w") as fh:
            fh.create_dataset("left", data=np.zeros(n, np.int32))
    res = compare_file(tmp_path / "a.h5", tmp_path / "b.h5")
    assert res["status"] == "differs" and res["shape_differs"]


@pytest.mark.parametrize("rel, group", [
    ("models/r/co2-nongreedy-4/forest.h5", "forest co2-nongreedy"),
    ("models/r/ac-axis_axis-4/stage-2/forest.h5", "forest ac-axis_axis"),
    ("models/r/axis-2/model.json", determinism.MODEL_RECORDS),
    ("reports/runs/r/train-ac-axis_axis.json", determinism.MODEL_RECORDS),
    ("reports/runs/r/eval-two-probe.json", "scores two-probe"),
    ("models/r/position-prior.npz", "position prior"),
    ("data/aligned/r/test/aligned.json", "detector-aligned crops"),
    ("docs/results.md", "results pages"),
])
def test_every_file_has_its_artefact(rel, group):
    assert determinism.group_of(rel) == group


def _committed():
    if not determinism.OUT.is_file():
        pytest.fail(f"{determinism.OUT} is missing: python -m benchmarks.determinism --write")
    return json.loads(determinism.OUT.read_text())


def test_the_docs_state_what_the_json_measured():
    doc = _committed()
    text = determinism.DOC.read_text()
    body = text.split(determinism.BEGIN, 1)[1].split(determinism.END, 1)[0]
    assert body == "\n\n" + determinism.markdown(doc) + "\n", (
        "docs/reliability.md's determinism section is stale: "
        "python -m benchmarks.determinism --render")


def test_the_deterministic_row_claims_only_what_was_measured():
    """The guarantee table's row names byte-identity across reruns and threads only
    when the JSON found every artefact identical there, and names what moves on
    another CPU target."""
    doc = _committed()
    row = next(line for line in determinism.DOC.read_text().splitlines()
               if line.startswith("| **Deterministic**"))
    for comp in ("rerun", "threads-1"):
        for group, s in doc["summary"][comp].items():
            # the models' records hold measured fit times: the row says so
            allowed = {"identical", "same values"} if group == determinism.MODEL_RECORDS \
                else {"identical"}
            assert s["status"] in allowed, (comp, group, s)
    assert "byte-identical" in row and "threads" in row and "measured fit times" in row
    moved = {g for c in ("numba-generic", "no-simd-dispatch") if c in doc["summary"]
             for g, s in doc["summary"][c].items() if s["status"] == "differs"}
    if moved:
        assert "CPU" in row and "moves" in row
    assert "test_determinism.py" in row and "check-determinism" in row
