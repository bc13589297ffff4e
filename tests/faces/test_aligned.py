"""The detector-aligned protocol: re-cropping by `segment`'s rule, missed faces, CLI."""

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from facesegment.faces.aligned import INFO_NAME, realign_face, realign_records
from facesegment.data.datasets import FaceRecord, find_faces, load_face
from facesegment.data.imageio import read_image, read_label, write_png_atomic
from tests.conftest import FACES300W
from tests.dense.test_inference import random_model

pytest.importorskip("dlib")

N_REAL = 3


@pytest.fixture(scope="module")
def real_records():
    """The first few faces300w test faces (skips when the shared data is absent)."""
    if not (FACES300W / "test").is_dir():
        pytest.skip(f"needs the shared face data at {FACES300W} (absent on this machine)")
    return find_faces(FACES300W / "test")[:N_REAL]


def _noise_record(folder, name="noise"):
    """A 250x250 noise image (no face) with random labels and a 255 strip."""
    rng = np.random.default_rng(7)
    img = rng.integers(0, 256, (250, 250, 3), dtype=np.uint8)
    lab = rng.integers(0, 8, (250, 250)).astype(np.uint8)
    lab[:, :20] = 255
    base = Path(folder, *name.split("/"))
    write_png_atomic(str(base) + ".png", img)
    write_png_atomic(str(base) + "_label.png", lab)
    return FaceRecord(name, str(base) + ".png", str(base) + "_label.png")


def _expected_label(label, box, rows, cols):
    """Nearest-neighbour warp of ``label`` by ``box`` at crop pixels, computed
    independently (crop pixel centre -> source coordinate, rounded); None where
    the source coordinate is too close to a tie between two pixels."""
    x0, y0, side = box
    f = side / 250.0
    x = (cols + 0.5) * f + x0 - 0.5
    y = (rows + 0.5) * f + y0 - 0.5
    tie = (np.abs(x - np.floor(x) - 0.5) < 0.02) | (np.abs(y - np.floor(y) - 0.5) < 0.02)
    xi, yi = np.floor(x + 0.5).astype(int), np.floor(y + 0.5).astype(int)
    h, w = label.shape
    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
    out = np.full(rows.shape, 255, dtype=np.int64)
    out[inside] = label[yi[inside], xi[inside]]
    return out, ~tie


def _scored_pixels(label, stride=1, border=15):
    """Pixels scored in strict mode: 15 px from the border, on the stride grid, not 255."""
    keep = np.zeros(label.shape, bool)
    keep[border:label.shape[0] - border, border:label.shape[1] - border] = True
    grid = np.zeros(label.shape, bool)
    grid[::stride, ::stride] = True
    return keep & grid & (label != 255)


def test_real_faces_are_found_and_labels_warped_with_the_box(real_records):
    from facesegment.faces.landmarks import read_pts
    from facesegment.faces.crops import landmark_box

    rng = np.random.default_rng(0)
    for rec in real_records:
        image, label = load_face(rec)
        res = realign_face(image, label)
        assert res is not None, rec.name
        crop, lab, box = res
        assert crop.shape == (250, 250, 3) and crop.dtype == np.uint8
        assert lab.shape == (250, 250) and lab.dtype == np.uint8
        # the face found is the labelled one: its box is near the human landmarks' box
        gx, gy, gs = landmark_box(read_pts(rec.image[:-4] + ".pts"))
        x0, y0, side = box
        assert abs(x0 + side / 2 - gx - gs / 2) < 0.05 * gs
        assert abs(y0 + side / 2 - gy - gs / 2) < 0.05 * gs and 0.9 < side / gs < 1.1
        rows, cols = rng.integers(0, 250, 2000), rng.integers(0, 250, 2000)
        want, ok = _expected_label(label, box, rows, cols)
        np.testing.assert_array_equal(lab[rows[ok], cols[ok]], want[ok])
        # the image crop is the bilinear sample of the same points (interior ones)
        f = side / 250.0
        x, y = (cols + 0.5) * f + x0 - 0.5, (rows + 0.5) * f + y0 - 0.5
        inner = (x >= 0) & (x <= 248) & (y >= 0) & (y <= 248)
        xf, yf = np.floor(x[inner]).astype(int), np.floor(y[inner]).astype(int)
        ax, ay = (x[inner] - xf)[:, None], (y[inner] - yf)[:, None]
        im = image.astype(np.float64)
        ref = ((1 - ay) * ((1 - ax) * im[yf, xf] + ax * im[yf, xf + 1])
               + ay * ((1 - ax) * im[yf + 1, xf] + ax * im[yf + 1, xf + 1]))
        assert np.abs(crop[rows[inner], cols[inner]] - ref).max() <= 1.5


def test_pixels_outside_the_source_image_are_255_and_not_scored(real_records, tmp_path):
    from facesegment.evaluation.scoring import evaluate

    image, label = load_face(real_records[0])
    image, label = np.ascontiguousarray(image[:, 70:]), np.ascontiguousarray(label[:, 70:])
    res = realign_face(image, label)  # the face touches the left edge: found thanks to padding
    assert res is not None
    _, lab, box = res
    assert box[0] < -40
    rows, cols = np.mgrid[0:250, 0:250]
    want, ok = _expected_label(label, box, rows.ravel(), cols.ravel())
    outside = (want == 255) & (label[0, 0] != 255)
    assert outside.sum() > 250 * 20
    np.testing.assert_array_equal(lab.ravel()[ok], want[ok])
    assert np.all(lab[:, :20] == 255)
    write_png_atomic(tmp_path / "edge.png", image)
    write_png_atomic(tmp_path / "edge_label.png", label)
    [rec] = realign_records([FaceRecord("edge", str(tmp_path / "edge.png"),
                                        str(tmp_path / "edge_label.png"))],
                            tmp_path / "al", workers=1, progress=False)
    assert not rec.missed and read_label(rec.label).tolist() == lab.tolist()
    model = random_model(0, kind="axis", n_trees=2, max_depth=3, kinds=("axis",))
    r = evaluate(model, [rec], alphas=[1.0], progress=False, workers=1)
    assert r["n_pixels"] == int(_scored_pixels(lab).sum())


def test_a_face_not_found_is_scored_as_all_background(tmp_path):
    from facesegment.evaluation.scoring import _score_one, evaluate

    rec = _noise_record(tmp_path / "data")
    image, label = load_face(rec)
    assert realign_face(image, label) is None
    [missed] = realign_records([rec], tmp_path / "al", workers=1, progress=False)
    assert missed.missed and missed.image == rec.image and missed.label == rec.label
    model = random_model(3, kind="axis", n_trees=3, max_depth=4, kinds=("axis", "two-probe"))
    args = (model, [0.5, 1.0], [1, 3], [2, 4], 2, 0, "strict")
    name, conf, d_out, t_out = _score_one(missed, *args)
    _, ref, d_ref, t_ref = _score_one(rec, *args)  # the forest's own sweep
    assert conf.shape == ref.shape and d_out == d_ref and t_out == t_ref
    keep = _scored_pixels(label, stride=2)
    expected = np.zeros((8, 8), np.int64)
    for t in range(8):
        expected[t, 0] = np.sum(keep & (label == t))
    assert all(np.array_equal(c, expected) for c in conf.reshape(-1, 8, 8))
    r = evaluate(model, [missed], alphas=[0.5, 1.0], sweep_trees=[1], depths=[2],
                 pixel_stride=2, progress=False, workers=1)
    assert r["trees"]["3"]["alpha"]["0.5"]["confusion"] == expected.tolist()
    assert r["n_pixels"] == int(keep.sum())
    bg = expected[0, 0] / (expected[:, 0].sum())
    assert r["per_image"]["noise"] == pytest.approx(100 * bg / 8, abs=1e-3)
    full = evaluate(model, [missed], alphas=[1.0], mode="full", progress=False, workers=1)
    assert full["n_pixels"] == int(np.sum(label != 255))
    both = evaluate(model, [missed, rec], alphas=[1.0], progress=False, workers=1)
    alone = evaluate(model, [rec], alphas=[1.0], progress=False, workers=1)
    assert both["n_pixels"] == alone["n_pixels"] + int(_scored_pixels(label).sum())


def _tree_bytes(folder):
    """The files' bytes; the output manifest lists them in the order threads wrote them."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and p.name != ".facesegment-outputs"}


def test_cache_is_reused_and_outputs_do_not_depend_on_workers(real_records, tmp_path,
                                                              monkeypatch):
    import facesegment.faces.aligned as aligned

    recs = list(real_records) + [_noise_record(tmp_path / "data", "sub/noise")]
    one = realign_records(recs, tmp_path / "w1", workers=1, progress=False)
    two = realign_records(recs, tmp_path / "w2", workers=2, progress=False)
    assert _tree_bytes(tmp_path / "w1") == _tree_bytes(tmp_path / "w2")
    assert [r.missed for r in one] == [False] * len(real_records) + [True]
    assert one[0].image == str(tmp_path / "w1" / (recs[0].name + ".png"))
    assert [replace(r, image="", label="") for r in one] == \
        [replace(r, image="", label="") for r in two]
    info = json.loads((tmp_path / "w1" / INFO_NAME).read_text())
    assert (info["n_faces"], info["n_found"], info["n_missed"]) == (len(recs), len(recs) - 1, 1)
    assert info["faces"][-1] == {"name": "sub/noise", "found": False, "box": None,
                                 "labels": "warp"}
    assert not (tmp_path / "w1" / "sub" / "noise.png").exists()
    for r in one[:-1]:
        assert read_image(r.image).shape == (250, 250, 3)

    def boom(*a, **k):
        raise AssertionError("recomputed")

    monkeypatch.setattr(aligned, "realign_face", boom)
    assert realign_records(recs, tmp_path / "w1", workers=1, progress=False) == one
    # a changed input changes the key: the folder is recomputed
    lab = read_label(recs[-1].label)
    lab[100, 100] = (lab[100, 100] + 1) % 8
    write_png_atomic(recs[-1].label, lab)
    with pytest.raises(AssertionError, match="recomputed"):
        realign_records(recs, tmp_path / "w1", workers=1, progress=False)
    # a stopped run leaves only the record of the names it was writing: never a cache hit
    info = json.loads((tmp_path / "w1" / INFO_NAME).read_text())
    assert info["key"] is None and "faces" not in info
    assert info["written"] == sorted(r.name for r in recs)


def test_cli_evaluate_protocol_detector(real_records, tmp_path, monkeypatch, capsys):
    import tempfile

    from facesegment.cli import main
    from tests.test_cli_train import _windows_file

    _windows_file(tmp_path / "w.h5")
    model = tmp_path / "models" / "axis-2"
    assert main(["train", "--kind", "axis", "--trees", "2", "--windows", str(tmp_path / "w.h5"),
                 "--out", str(model), "--workers", "1", "--max-depth", "4"]) == 0
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    base = ["evaluate", "--model", str(model), "--data", str(FACES300W), "--limit", "3",
            "-q", "--workers", "1"]
    capsys.readouterr()
    assert main(base + ["--protocol", "detector", "--out", str(tmp_path / "det")]) == 0
    err = capsys.readouterr().err
    assert "3 of 3 found, 0 missed" in err
    res = json.loads((tmp_path / "det" / "axis-2.json").read_text())
    assert res["protocol"] == "detector" and res["n_images"] == 3
    assert (res["detector"]["n_found"], res["detector"]["n_missed"]) == (3, 0)
    [folder] = (tmp_path / "tmp" / "facesegment-aligned").iterdir()
    assert folder.name.startswith("faces300w-")
    scored = sum(int(_scored_pixels(read_label(folder / f"{r.name}_label.png")).sum())
                 for r in real_records)
    assert res["n_pixels"] == scored
    assert "detector-aligned crops (3 of 3 faces found" in \
        (tmp_path / "det" / "axis-2.md").read_text()
    assert main(base + ["--out", str(tmp_path / "crops")]) == 0
    crops = json.loads((tmp_path / "crops" / "axis-2.json").read_text())
    assert crops["protocol"] == "crops" and "detector" not in crops
    assert crops["n_pixels"] == 3 * 220 * 220  # no 255 in these crops' strict region
    assert crops["summary"]["confusion"] != res["summary"]["confusion"]
    assert os.listdir(folder)  # the cache stays for the next run
    assert res["detector"]["labels"] == "landmarks"
    info = json.loads((folder / INFO_NAME).read_text())
    assert [f["labels"] for f in info["faces"]] == ["landmarks"] * 3   # the .pts are there
    assert main(base + ["--protocol", "detector", "--aligned-labels", "warp",
                        "--out", str(tmp_path / "warp")]) == 0
    warp = json.loads((tmp_path / "warp" / "axis-2.json").read_text())
    assert warp["detector"]["labels"] == "warp"
    assert warp["summary"]["confusion"] != res["summary"]["confusion"]
    assert (folder.parent / (folder.name + "-warp") / INFO_NAME).is_file()


# ---------------------------------------------------------------- crop rule

def test_apply_crop_rule_moves_and_scales_the_box_and_identity_keeps_it():
    from facesegment.faces.crops import IDENTITY_RULE, apply_crop_rule, landmark_box

    box = (10.3, -4.7, 200.9)
    assert apply_crop_rule(box, None) == box
    assert apply_crop_rule(box, IDENTITY_RULE) == box   # exactly, not up to rounding
    x0, y0, side = apply_crop_rule(box, (1.1, 0.05, -0.1))
    cx, cy = 10.3 + 200.9 / 2 + 0.05 * 200.9, -4.7 + 200.9 / 2 - 0.1 * 200.9
    np.testing.assert_allclose([x0 + side / 2, y0 + side / 2, side],
                               [cx, cy, 1.1 * 200.9], rtol=1e-12)
    pts = np.array([[60.0, 80.0], [160.0, 90.0], [110.0, 180.0]])
    np.testing.assert_allclose(landmark_box(pts, (1.1, 0.05, -0.1)),
                               apply_crop_rule(landmark_box(pts), (1.1, 0.05, -0.1)))


@pytest.mark.parametrize("bad", [(0.0, 0, 0), (1.0, 0.0), (1.0, float("nan"), 0.0), "abc"])
def test_crop_rule_of_refuses_bad_rules(bad):
    from facesegment.position import crop_rule_of

    with pytest.raises(ValueError, match="crop_rule"):
        crop_rule_of(bad)
    assert crop_rule_of(None) == (1.0, 0.0, 0.0)


def _recropped(records, folder, rule):
    """Each face cut by ``rule`` applied to its detected box, saved as a 250x250
    'dataset crop' with its warped label map: a dataset whose crop rule is ``rule``."""
    from facesegment.faces.aligned import detect_box, warp_label
    from facesegment.faces.crops import apply_crop_rule, crop_face

    out = []
    for rec in records:
        image, label = load_face(rec)
        box = apply_crop_rule(detect_box(image), rule)
        base = Path(folder) / rec.name
        write_png_atomic(str(base) + ".png", crop_face(image, box))
        write_png_atomic(str(base) + "_label.png", warp_label(label, box))
        out.append(FaceRecord(rec.name, str(base) + ".png", str(base) + "_label.png"))
    return out


def test_measure_crop_rule_recovers_a_known_rule_and_realign_cuts_by_it(real_records,
                                                                        tmp_path):
    from facesegment.faces.aligned import detect_box, measure_crop_rule
    from facesegment.faces.crops import apply_crop_rule

    rule = (1.25, 0.04, -0.09)   # like LFW: the face higher and smaller in the frame
    recs = _recropped(real_records, tmp_path / "crops", rule)
    got = measure_crop_rule(recs, max_faces=10, workers=1, progress=False)
    assert (got["n_faces"], got["n_found"]) == (N_REAL, N_REAL)
    np.testing.assert_allclose(got["crop_rule"], rule, atol=0.03)
    same = measure_crop_rule(real_records, max_faces=10, workers=2, progress=False)
    np.testing.assert_allclose(same["crop_rule"], (1.0, 0.0, 0.0), atol=0.05)
    # a detected face is cut by the rule: the crop box is the rule applied to the plain box
    image, label = load_face(recs[0])
    plain = detect_box(image)
    crop, lab, box = realign_face(image, label, crop_rule=got["crop_rule"])
    np.testing.assert_allclose(box, apply_crop_rule(plain, got["crop_rule"]))
    # ... so the face lands where it was in the dataset's crop (its label map nearly back)
    inside = lab != 255
    assert (lab[inside] == label[inside]).mean() > 0.9
    with pytest.raises(ValueError, match="max_faces"):
        measure_crop_rule(recs, max_faces=0)


def test_measure_crop_rule_without_faces_keeps_the_landmark_rule(tmp_path):
    from facesegment.faces.aligned import measure_crop_rule

    got = measure_crop_rule([_noise_record(tmp_path)], workers=1, progress=False)
    assert got == {"crop_rule": [1.0, 0.0, 0.0], "n_faces": 1, "n_found": 0, "iqr": None}


def test_realign_records_cache_key_holds_the_crop_rule(real_records, tmp_path):
    recs = real_records[:1]
    a = realign_records(recs, tmp_path / "al", workers=1, progress=False)
    info = json.loads((tmp_path / "al" / INFO_NAME).read_text())
    b = realign_records(recs, tmp_path / "al", workers=1, progress=False,
                        crop_rule=(1.2, 0.0, -0.1))
    info2 = json.loads((tmp_path / "al" / INFO_NAME).read_text())
    assert info["key"] != info2["key"] and info2["crop_rule"] == [1.2, 0.0, -0.1]
    assert info2["faces"][0]["box"][2] == pytest.approx(1.2 * info["faces"][0]["box"][2])
    assert a[0].image == b[0].image
    with pytest.raises(ValueError, match="crop_rule"):
        realign_records(recs, tmp_path / "al", crop_rule=(1.0, 2.0))


def test_a_model_carries_its_crop_rule_and_segment_and_evaluate_use_it(
        real_records, tmp_path, monkeypatch, capsys):
    import tempfile

    import h5py

    from facesegment.faces import crops
    from facesegment.faces import photo
    from facesegment.faces import segment as seg
    from facesegment.cli import main
    from facesegment.errors import DataError
    from facesegment.modelio.model import save_model
    from facesegment.models import load_model
    from facesegment.position import fit_position_prior

    model = random_model(3, kind="axis", n_trees=2, max_depth=4)
    model.class_names = tuple(f"c{i}" for i in range(model.arrays.n_classes))
    labels = [np.random.default_rng(0).integers(0, model.arrays.n_classes, (250, 250))
              .astype(np.uint8)]
    model.position = fit_position_prior(labels, model.arrays.n_classes)
    model.position.crop_rule = (1.2, 0.01, -0.08)
    save_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.position.crop_rule == (1.2, 0.01, -0.08)
    assert crops.model_crop_rule(back) == (1.2, 0.01, -0.08)
    assert json.loads((tmp_path / "m" / "model.json").read_text())["position"]["crop_rule"] \
        == [1.2, 0.01, -0.08]
    # segment cuts the faces of a photo by the model's rule
    seen = []
    real = photo.find_crops
    monkeypatch.setattr(photo, "find_crops", lambda *a, **k: seen.append(k["crop_rule"])
                        or real(*a, **k))
    image = load_face(real_records[0])[0]
    seg.segment_image(back, np.pad(image, ((5, 5), (5, 5), (0, 0))))
    assert seen == [(1.2, 0.01, -0.08)]
    # an older model without the attribute loads with the landmark rule as it is
    with h5py.File(tmp_path / "m" / "forest.h5", "r+") as f:
        del f["position"].attrs["crop_rule"]
    assert load_model(tmp_path / "m", verify=False).position.crop_rule == (1.0, 0.0, 0.0)
    with h5py.File(tmp_path / "m" / "forest.h5", "r+") as f:
        f["position"].attrs["crop_rule"] = np.array([0.0, 0.0, 0.0])
    with pytest.raises(DataError, match="cannot be read as a forest"):
        load_model(tmp_path / "m", verify=False)
    # evaluate --protocol detector re-crops the faces into the model's frame
    save_model(model, tmp_path / "m2")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "m2"), "--data", str(FACES300W),
                 "--limit", "2", "-q", "--workers", "1", "--protocol", "detector",
                 "--out", str(tmp_path / "det")]) == 0
    res = json.loads((tmp_path / "det" / "m2.json").read_text())
    assert res["detector"]["crop_rule"] == [1.2, 0.01, -0.08]
    [folder] = (tmp_path / "tmp" / "facesegment-aligned").iterdir()
    assert folder.name.endswith("-rule-1.2_0.01_-0.08")
    assert json.loads((folder / INFO_NAME).read_text())["crop_rule"] == [1.2, 0.01, -0.08]
