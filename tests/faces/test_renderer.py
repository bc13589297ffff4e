"""The landmark renderer as a method: rendered maps, landmark tables, scores, CLI."""

import json

import numpy as np
import pytest

from facesegment.faces import renderer
from facesegment.data.datasets import FaceRecord
from facesegment.data.imageio import write_png_atomic
from facesegment.faces.landmarks import render_labels
from tests.faces.test_shape_prior import face_points


def _faces(folder, n=3):
    """Faces whose labels are the polygons of known landmarks."""
    recs, pts = [], []
    rng = np.random.default_rng(0)
    for i in range(n):
        p = face_points(i)
        lab = render_labels(p, (250, 250))
        img = rng.integers(0, 256, (250, 250, 3), dtype=np.uint8)
        base = folder / f"f{i}"
        write_png_atomic(str(base) + ".png", img)
        write_png_atomic(str(base) + "_label.png", lab)
        recs.append(FaceRecord(f"f{i}", str(base) + ".png", str(base) + "_label.png"))
        pts.append(p)
    return recs, pts


def test_render_proba_is_the_one_hot_label_map_and_none_is_background():
    p = face_points(1)
    proba = renderer.render_proba(p, (250, 240))
    assert proba.shape == (250, 240, 8) and proba.dtype == np.float32
    np.testing.assert_array_equal(np.argmax(proba, -1), render_labels(p, (250, 240)))
    np.testing.assert_array_equal(proba.sum(-1), 1.0)
    none = renderer.render_proba(None, (20, 30))
    assert (none[..., 0] == 1).all() and none.sum() == 600
    fb = np.full((20, 30, 8), 0.125, np.float32)
    assert renderer.render_proba(None, (20, 30), fallback=fb) is not None
    np.testing.assert_array_equal(renderer.render_proba(None, (20, 30), fallback=fb), fb)


def test_evaluate_renderer_scores_true_landmarks_100_and_missing_ones_as_background(tmp_path):
    recs, pts = _faces(tmp_path)
    table = renderer.LandmarkTable([r.name for r in recs], pts, ["default"] * 3)
    r = renderer.evaluate_renderer(recs, table, sigmas=[0, 2], progress=False)
    assert r["sigma"]["0.0"]["mean_jaccard"] == 100.0 and r["n_found"] == 3
    assert r["n_pixels"] == 3 * 220 * 220                    # strict: 15-px border left out
    assert r["sigma"]["2.0"]["mean_jaccard"] < 100.0         # blurred polygons lose a little
    assert set(r["per_image"]) == {"f0", "f1", "f2"}
    lost = np.array(pts)
    lost[1] = np.nan
    r2 = renderer.evaluate_renderer(recs, renderer.LandmarkTable(
        [r.name for r in recs], lost, ["default", "", "default"]), progress=False)
    assert r2["n_found"] == 2
    conf = np.array(r2["sigma"]["0.0"]["confusion"])
    assert conf[1:, 1:].trace() < np.array(r["sigma"]["0.0"]["confusion"])[1:, 1:].trace()
    with pytest.raises(ValueError, match="records is empty"):
        renderer.evaluate_renderer([], table)
    with pytest.raises(ValueError, match="sigmas"):
        renderer.evaluate_renderer(recs, table, sigmas=[-1])
    with pytest.raises(KeyError, match="no landmarks recorded for face 'nobody'"):
        table.get("nobody")


def test_landmark_table_runs_dlib_once_and_reuses_the_cache(tmp_path, monkeypatch):
    recs, pts = _faces(tmp_path)
    calls = []

    def fake(image, upsample=1, threshold=-0.5):
        calls.append(1)
        i = (len(calls) - 1) % 3
        return (None, "") if i == 1 else (pts[i], "upsampled")

    monkeypatch.setattr(renderer, "predict_landmarks", fake)
    cache = tmp_path / "lm" / "t.npz"
    t = renderer.landmark_table(recs, cache, progress=False)
    assert len(calls) == 3 and t.found() == 2 and t.passes == ["upsampled", "", "upsampled"]
    assert t.get("f1") is None
    np.testing.assert_array_equal(t.get("f2"), pts[2])
    again = renderer.landmark_table(recs, cache, progress=False)
    assert len(calls) == 3                                  # read back, dlib not run
    np.testing.assert_array_equal(again.points, t.points)
    with np.load(cache, allow_pickle=False) as z:           # plain arrays, no pickles
        assert str(z["format"]) == renderer.TABLE_FORMAT
    img = np.zeros((250, 250, 3), np.uint8)                 # an image changed: recomputed
    write_png_atomic(recs[0].image, img)
    renderer.landmark_table(recs, cache, progress=False)
    assert len(calls) == 6


def test_cli_evaluate_method_landmarks(faces300w, tmp_path, monkeypatch, capsys):
    import tempfile

    from facesegment.cli import main

    pytest.importorskip("dlib")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    base = ["evaluate", "--method", "landmarks", "--data", str(faces300w), "--limit", "3",
            "-q", "--workers", "1"]
    assert main(base + ["--out", str(tmp_path / "crops")]) == 0
    res = json.loads((tmp_path / "crops" / "landmarks.json").read_text())
    assert res["kind"] == "landmarks" and res["protocol"] == "crops"
    assert res["n_images"] == 3 and res["n_found"] == 3 and res["n_pixels"] == 3 * 220 * 220
    assert 60 < res["summary"]["class_average_jaccard"] <= 100
    assert sum(res["detection_passes"].values()) == 3
    out = capsys.readouterr().out
    assert "landmarks (dlib's 68 predicted landmarks -> label polygons)" in out
    assert main(base + ["--protocol", "detector", "--out", str(tmp_path / "det")]) == 0
    det = json.loads((tmp_path / "det" / "landmarks.json").read_text())
    assert det["protocol"] == "detector" and det["detector"]["n_found"] == 3
    assert det["n_pixels"] != res["n_pixels"] or det["summary"] != res["summary"]


def test_cli_evaluate_without_model_or_method_is_one_line(tmp_path, capsys):
    from facesegment.cli import main

    assert main(["evaluate", "--data", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "nothing to score: give --model FOLDER" in err and "Traceback" not in err


def test_pipeline_results_list_the_renderer_beside_the_position_prior():
    from pipelines import prior_report

    one = {"mean_jaccard": 78.9, "jaccard": [98.9, 92.2, 84.3, 86.0, 73.9, 74.4, 61.1, 60.5],
           "pixel_accuracy": 98.5}
    res = {"test": dict(one, mean_jaccard=40.0), "gamma": 0.0,
           "prior": {"n_images": 1107, "sigma": 4.0, "pseudo": 1.0},
           "detector": {"test": dict(one, mean_jaccard=39.0), "n_found": 249, "n_missed": 1},
           "landmarks": {"test": one, "detector": dict(one, mean_jaccard=77.5)}}
    text = "\n".join(prior_report.markdown(res, {}, [], [16, 32], {}, list(
        ["background", "lower face", "nose", "mouth", "left eye", "right eye", "left eyebrow",
         "right eyebrow"])))
    assert ("| dlib's 68 predicted landmarks → label polygons (nothing trained) | | | "
            "78.90 | 78.90 | 77.50 |") in text
    assert "| landmarks → polygons | 98.9 | 92.2 | 84.3 | 86.0 | 73.9 | 74.4 | 61.1 | 60.5 " \
           "| 78.90 |" in text
    del res["landmarks"]
    assert "label polygons" not in "\n".join(prior_report.markdown(res, {}, [], [16, 32], {}, ["a"] * 8))


def test_pipeline_prior_stage_scores_the_renderer(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from pipelines import prior

    recs, pts = _faces(tmp_path / "faces")
    by_image = {r.image: p for r, p in zip(recs, pts)}
    from facesegment.data.imageio import read_image

    images = {r.image: read_image(r.image).tobytes() for r in recs}
    monkeypatch.setattr(renderer, "predict_landmarks", lambda image: (
        next(by_image[k] for k, v in images.items() if v == image.tobytes()), "default"))
    logs = []
    ctx = SimpleNamespace(
        cfg={"evaluate": {"mode": "strict", "pixel_stride": 1, "detector_protocol": False,
                          "landmarks": True}},
        root=tmp_path, run="r", splits=lambda: {"test": recs}, log=logs.append)
    out = prior.landmark_scores(ctx)
    assert out["test"]["mean_jaccard"] == 100.0 and out["test"]["n_found"] == 3
    assert "detector" not in out and (tmp_path / "data" / "landmarks" / "r" / "test.npz").is_file()
    assert logs == ["prior: landmarks renderer test Jaccard 100.00"]
