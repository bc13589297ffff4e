"""Landmark models: the folder round trip, the fallback path, segment and evaluate."""

import csv
import json

import numpy as np
import pytest

import facesegment.models.landmark as lm
import facesegment.faces.folder as folder
from facesegment.errors import DataError
from facesegment.data.imageio import write_png_atomic
from facesegment.faces.landmarks import render_labels
from facesegment.models import load_model
from facesegment.faces.votes import VoteSpec
from tests.dense.test_inference import random_model
from tests.faces.test_shape_prior import face_points


def _fake_votes(monkeypatch, found=True):
    """face_votes without dlib: the polygons of known landmarks (or no face)."""
    def fake(image, spec):
        if not found or image.max() == 0:
            return None, None, ""
        p = face_points(3) + np.asarray(spec.offset)
        sets = np.stack([p, p + 1.0])
        from facesegment.faces.votes import vote_maps

        return vote_maps(sets, image.shape), sets, "default"

    monkeypatch.setattr(lm, "face_votes", fake)


def test_round_trip_with_a_fallback_folder_and_with_a_shipped_name(tmp_path):
    fb = random_model(0, n_trees=2, max_depth=3, kinds=("axis",))
    m = lm.LandmarkModel(VoteSpec(offset=(1.0, 0.5)), fallback=fb, metrics={"validation": 80.0})
    lm.save_landmark_model(m, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert isinstance(back, lm.LandmarkModel) and back.kind == "landmark-votes"
    assert back.votes == m.votes and back.metrics == {"validation": 80.0}
    np.testing.assert_array_equal(back.fallback.arrays.value, fb.arrays.value)
    doc = json.loads((tmp_path / "m" / lm.LANDMARK_FILE).read_text())
    assert doc["fallback"] == "fallback" and doc["format"] == lm.LANDMARK_FORMAT
    shipped = lm.LandmarkModel(VoteSpec(), fallback=fb, fallback_name="faces300w-two-probe")
    lm.save_landmark_model(shipped, tmp_path / "s")
    assert not (tmp_path / "s" / "fallback").exists()
    again = load_model(tmp_path / "s")
    assert again.fallback_name == "faces300w-two-probe" and again.fallback is not None
    lm.save_landmark_model(m, tmp_path / "s")          # a landmark folder is replaced
    assert (tmp_path / "s" / "fallback").is_dir()


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(format="other"), "not a facesegment landmark-model"),
    (lambda d: d.update(format_version=99), "format version 99"),
    (lambda d: d["votes"].update(zoom=0), "malformed"),
    (lambda d: d.update(metrics=[1]), "metrics"),
    (lambda d: d.update(fallback="../elsewhere"), "field fallback"),
    (lambda d: d.pop("votes"), "incomplete"),
])
def test_a_damaged_folder_is_one_error_naming_the_file(tmp_path, edit, match):
    lm.save_landmark_model(lm.LandmarkModel(VoteSpec()), tmp_path / "m")
    js = tmp_path / "m" / lm.LANDMARK_FILE
    doc = json.loads(js.read_text())
    edit(doc)
    js.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=match) as err:
        load_model(tmp_path / "m")
    assert "landmark-model.json" in str(err.value)


def test_a_version_1_file_loads_with_the_mirror_from_the_detectors_box(tmp_path):
    lm.save_landmark_model(lm.LandmarkModel(VoteSpec(offset=(1.0, 0.5))), tmp_path / "m")
    js = tmp_path / "m" / lm.LANDMARK_FILE
    doc = json.loads(js.read_text())
    assert doc["format_version"] == 2 and doc["votes"]["flip_all"] is True
    assert load_model(tmp_path / "m").votes.n_sets == 54
    doc["format_version"] = 1
    del doc["votes"]["flip_all"]
    js.write_text(json.dumps(doc))
    old = load_model(tmp_path / "m")
    assert old.votes == VoteSpec(offset=(1.0, 0.5), flip_all=False) and old.votes.n_sets == 28
    doc["votes"]["flip_all"] = True           # a version 1 file cannot carry the new field
    js.write_text(json.dumps(doc))
    with pytest.raises(DataError, match="format version 2"):
        load_model(tmp_path / "m")


def test_other_files_in_the_folder_are_never_replaced(tmp_path):
    lm.save_landmark_model(lm.LandmarkModel(VoteSpec()), tmp_path / "m")
    (tmp_path / "m" / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match="notes.txt"):
        lm.save_landmark_model(lm.LandmarkModel(VoteSpec()), tmp_path / "m")
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"


def test_a_face_takes_the_vote_path_and_a_crop_without_one_the_fallback(monkeypatch):
    _fake_votes(monkeypatch)
    fb = random_model(0, n_trees=2, max_depth=3, kinds=("axis",))
    m = lm.LandmarkModel(VoteSpec(offset=(0.0, 0.0)), fallback=fb)
    img = np.random.default_rng(0).integers(1, 256, (250, 250, 3), dtype=np.uint8)
    proba, path, how = m.predict_crop(img)
    assert path == lm.LANDMARK_PATH and how == "default"
    truth = render_labels(face_points(3), (250, 250))
    assert (np.argmax(proba, -1) == truth).mean() > 0.97
    proba0, path0, how0 = m.predict_crop(np.zeros((250, 250, 3), np.uint8))
    assert path0 == lm.FREE_PATH and how0 == ""
    from facesegment.dense import predict_image

    np.testing.assert_array_equal(
        proba0, predict_image(fb, np.zeros((250, 250, 3), np.uint8), mode="full")[0])
    bare = lm.LandmarkModel(VoteSpec())
    p, path, _ = bare.predict_crop(np.zeros((250, 250, 3), np.uint8))
    assert path == lm.FREE_PATH and (p[..., 0] == 1).all()       # no fallback: background


def test_segment_uses_the_votes_per_face_and_says_the_path(tmp_path, monkeypatch):
    _fake_votes(monkeypatch)
    m = lm.LandmarkModel(VoteSpec())
    img = np.random.default_rng(2).integers(1, 256, (250, 250, 3), dtype=np.uint8)
    write_png_atomic(tmp_path / "in" / "a.png", img)
    write_png_atomic(tmp_path / "in" / "b.png", np.zeros((250, 250, 3), np.uint8))
    folder.segment_folder(m, tmp_path / "in", tmp_path / "out", n_workers=1, progress=False)
    with open(tmp_path / "out" / "summary.csv", newline="") as fh:
        rows = {r["name"]: r for r in csv.DictReader(fh)}
    assert rows["a.png"]["paths"] == "landmarks" and rows["a.png"]["detection"] == "default"
    assert rows["b.png"]["paths"] == "landmark-free"
    from facesegment.data.imageio import read_label

    lab = read_label(tmp_path / "out" / "a_label.png")
    assert (lab == render_labels(face_points(3), (250, 250))).mean() > 0.97


def test_evaluate_scores_a_landmark_model_like_the_renderer(tmp_path, monkeypatch):
    from facesegment.data.datasets import FaceRecord
    from facesegment.faces.landmark_fit import evaluate_landmark_model

    _fake_votes(monkeypatch)
    recs = []
    for i in range(2):
        base = tmp_path / f"f{i}"
        write_png_atomic(str(base) + ".png", np.full((250, 250, 3), 9, np.uint8))
        write_png_atomic(str(base) + "_label.png", render_labels(face_points(3), (250, 250)))
        recs.append(FaceRecord(f"f{i}", str(base) + ".png", str(base) + "_label.png"))
    r = evaluate_landmark_model(lm.LandmarkModel(VoteSpec()), recs, progress=False)
    assert r["n_images"] == 2 and r["n_found"] == 2 and r["n_pixels"] == 2 * 220 * 220
    assert r["mean_jaccard"] > 85 and r["paths"] == {"landmarks": 2}


def test_the_cli_evaluates_and_segments_with_a_landmark_folder(tmp_path, monkeypatch):
    from facesegment.cli import main

    _fake_votes(monkeypatch)
    lm.save_landmark_model(lm.LandmarkModel(VoteSpec()), tmp_path / "m")
    data = tmp_path / "data" / "test"
    for i in range(2):
        write_png_atomic(data / f"f{i}.png", np.full((250, 250, 3), 9, np.uint8))
        write_png_atomic(data / f"f{i}_label.png", render_labels(face_points(3), (250, 250)))
    (tmp_path / "data" / "train").mkdir()
    write_png_atomic(tmp_path / "data" / "train" / "t.png", np.full((250, 250, 3), 9, np.uint8))
    write_png_atomic(tmp_path / "data" / "train" / "t_label.png",
                     np.zeros((250, 250), np.uint8))
    rc = main(["evaluate", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "data"),
               "--out", str(tmp_path / "ev"), "--quiet"])
    assert rc == 0
    res = json.loads((tmp_path / "ev" / "m.json").read_text())
    assert res["kind"] == "landmark-votes" and res["n_images"] == 2
    assert res["summary"]["class_average_jaccard"] > 85
    rc = main(["segment", str(data), str(tmp_path / "out"), "--model", str(tmp_path / "m"),
               "--quiet", "--workers", "1"])
    assert rc == 0 and (tmp_path / "out" / "f0_label.png").is_file()


def test_the_votes_spec_must_be_a_votespec():
    with pytest.raises(TypeError, match="VoteSpec"):
        lm.LandmarkModel({"zoom": 4})


def test_fit_votes_fits_the_offset_and_caches_the_sets(tmp_path, monkeypatch):
    import facesegment.faces.landmark_fit as lf
    from facesegment.data.datasets import FaceRecord
    from facesegment.faces.landmarks import write_pts

    recs, human = [], []
    for i in range(3):
        base = tmp_path / f"f{i}"
        write_png_atomic(str(base) + ".png", np.full((250, 250, 3), 10 + i, np.uint8))
        write_png_atomic(str(base) + "_label.png", np.zeros((250, 250), np.uint8))
        human.append(face_points(i))
        if i < 2:                                        # the third face has no .pts
            write_pts(str(base) + ".pts", human[-1])
        recs.append(FaceRecord(f"f{i}", str(base) + ".png", str(base) + "_label.png"))
    calls = []

    def fake_sets(image, box, spec):
        calls.append(spec.offset)
        k = int(image[0, 0, 0]) - 10
        return np.repeat((face_points(k) - [2.0, 1.0])[None], spec.n_sets, axis=0)

    monkeypatch.setattr(lf, "detect_box", lambda image: (np.array([50., 50., 200., 200.]),
                                                          "default"))
    monkeypatch.setattr(lf, "landmark_sets", fake_sets)
    cache = tmp_path / "sets.npz"
    spec = lf.fit_votes(recs, VoteSpec(offset=(5.0, 5.0)), cache=cache, progress=False)
    assert spec.offset == pytest.approx((2.0, 1.0), abs=1e-3)   # human minus predicted
    assert spec.scales == VoteSpec().scales and calls == [(0.0, 0.0)] * 3   # no offset
    again = lf.fit_votes(recs, VoteSpec(), cache=cache, progress=False)
    assert again == spec and len(calls) == 3                    # the cache was read
    lf.fit_votes(recs, VoteSpec(zoom=2), cache=cache, progress=False)
    assert len(calls) == 6                                      # another spec: computed
