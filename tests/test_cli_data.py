"""`facesegment data ...` and `facesegment label ...`: exit codes and one-line messages."""

import json
import shutil

import cv2
import numpy as np
import pytest

from facesegment.data.download import sha256_file
from facesegment.data.imageio import write_png_atomic
from facesegment.faces.landmarks import write_pts


def main(argv):
    from facesegment import cli

    return cli.main(argv)


def _face(root, name, shape=(20, 24), seed=0):
    rng = np.random.default_rng(seed)
    write_png_atomic(root / f"{name}.png", rng.integers(0, 256, shape + (3,), dtype=np.uint8))
    lab = rng.integers(0, 8, shape, dtype=np.uint8)
    write_png_atomic(root / f"{name}_label.png", lab)
    return lab


def _one_error_line(err):
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("facesegment: error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_data_check_counts_and_bad_files(tmp_path, capsys):
    labs = [_face(tmp_path, f"good{i}", seed=i) for i in range(2)]
    ok, buf = cv2.imencode(".jpg", np.zeros((30, 30, 3), np.uint8))
    (tmp_path / "trunc.jpg").write_bytes(buf.tobytes()[:30])
    write_png_atomic(tmp_path / "trunc_label.png", np.zeros((30, 30), np.uint8))
    (tmp_path / "zero.jpg").write_bytes(b"")
    write_png_atomic(tmp_path / "zero_label.png", np.zeros((30, 30), np.uint8))
    (tmp_path / "text.jpg").write_text("hello")
    write_png_atomic(tmp_path / "text_label.png", np.zeros((30, 30), np.uint8))
    _face(tmp_path, "small")
    write_png_atomic(tmp_path / "small_label.png", np.zeros((5, 5), np.uint8))
    _face(tmp_path, "nine")
    write_png_atomic(tmp_path / "nine_label.png", np.full((20, 24), 9, np.uint8))
    write_png_atomic(tmp_path / "nolabel.png", np.zeros((20, 24, 3), np.uint8))
    code = main(["data", "check", str(tmp_path), "--quiet", "--workers", "1"])
    out, err = capsys.readouterr()
    assert code == 1
    bad = [ln for ln in err.splitlines() if ln.startswith("facesegment: bad:")]
    assert len(bad) == 6
    expect = {"trunc.jpg": "not a readable image", "zero.jpg": "empty (0 bytes)",
              "text.jpg": "not a readable image", "small_label.png": "label map is 5x5 but its image is 24x20",
              "nine_label.png": "label ids [9] are outside 0-7", "nolabel.png": "has no label map"}
    for fname, problem in expect.items():
        assert any(fname in ln and problem in ln for ln in bad), (fname, err)
    assert "2 labelled faces OK, 6 bad" in out
    total = sum(np.bincount(lab.ravel(), minlength=8) for lab in labs)
    assert f"  4  left eye      {total[4]:>12}" in out


def test_data_check_empty_folder(tmp_path, capsys):
    assert main(["data", "check", str(tmp_path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(tmp_path) in line and "contains no images" in line


def test_data_render(tmp_path, capsys):
    from tests.faces.test_landmarks import _synthetic_face

    src = tmp_path / "src"
    write_png_atomic(src / "a" / "f1.png", np.zeros((100, 100, 3), np.uint8))
    write_pts(src / "a" / "f1.pts", _synthetic_face())
    write_png_atomic(src / "f2.png", np.zeros((100, 100, 3), np.uint8))
    (src / "f2.pts").write_text("version: 1\nn_points: 67\n{\n" + "1 1\n" * 67 + "}\n")
    write_png_atomic(src / "f3.png", np.zeros((100, 100, 3), np.uint8))  # no .pts: ignored
    code = main(["data", "render", str(src), str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 1
    assert "f2.pts: has 67 points, expected 68" in err
    assert "rendered 1 label maps" in out
    lab = cv2.imread(str(tmp_path / "out" / "a" / "f1_label.png"), cv2.IMREAD_UNCHANGED)
    assert set(np.unique(lab)) == set(range(8))


def test_data_splits_and_json(tmp_path, capsys):
    for p in ("Ann", "Bob", "Cid", "Dan"):
        _face(tmp_path / "lfw" / p, f"{p}_0001")
    out_json = tmp_path / "s.json"
    code = main(["data", "splits", str(tmp_path / "lfw"), "--validation", "1", "--test-fraction",
                 "0.25", "--out", str(out_json)])
    out = capsys.readouterr().out
    assert code == 0 and "2 train + 1 validation, 1 test (seeded split by person, seed 0)" in out
    doc = json.loads(out_json.read_text())
    assert len(doc["train"]) == 2 and len(doc["test"]) == 1
    assert main(["data", "splits", str(tmp_path / "lfw"), "--validation", "9"]) == 2
    assert "n_validation=9 is not smaller" in _one_error_line(capsys.readouterr().err)
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    code = main(["data", "splits", str(tmp_path / "lfw"), "--validation", "1",
                 "--out", str(blocker / "s.json")])
    assert code == 2
    assert "blocker/s.json: cannot write output" in _one_error_line(capsys.readouterr().err)


def test_data_lfw_archive_and_checksum(tmp_path, capsys):
    from tests.data.test_download import _tarball

    arc, sha = _tarball(tmp_path)
    dest = tmp_path / "data" / "lfw"
    assert main(["data", "lfw", "--archive", str(arc), "--dest", str(dest), "--sha256", sha,
                 "--quiet"]) == 0
    assert "LFW ready: 4 images" in capsys.readouterr().out
    code = main(["data", "lfw", "--archive", str(arc), "--dest", str(tmp_path / "d2"),
                 "--sha256", "f" * 64, "--quiet"])
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "lfw-test.tgz: checksum mismatch" in line and "download it again" in line
    assert sha256_file(arc) == sha


def test_data_lfw_offline(tmp_path, capsys):
    code = main(["data", "lfw", "--dest", str(tmp_path), "--url", "http://127.0.0.1:1/lfw.tgz",
                 "--quiet", "--timeout", "5"])
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "cannot download http://127.0.0.1:1/lfw.tgz" in line and "--archive PATH" in line


def test_label_empty_and_unwritable(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    assert main(["label", str(tmp_path / "in"), str(tmp_path / "out")]) == 2
    assert "contains no images" in _one_error_line(capsys.readouterr().err)
    write_png_atomic(tmp_path / "in" / "x.png", np.zeros((8, 8, 3), np.uint8))
    (tmp_path / "blocker").write_text("x")
    assert main(["label", str(tmp_path / "in"), str(tmp_path / "blocker" / "out")]) == 2
    assert "output folder cannot be written" in _one_error_line(capsys.readouterr().err)
    with pytest.raises(SystemExit) as exc:  # out of its bounds: a usage error
        main(["label", str(tmp_path / "in"), str(tmp_path / "o2"), "--threshold", "0.5"])
    assert exc.value.code == 2
    assert "argument --threshold: expected a number in -10..0" in capsys.readouterr().err


@pytest.mark.shared
@pytest.mark.landmarks
def test_label_cli_reports_misses(lfw_gray, tmp_path, capsys):
    pytest.importorskip("dlib")
    person = sorted(p for p in lfw_gray.iterdir() if p.is_dir())[0]
    src = tmp_path / "in"
    (src / person.name).mkdir(parents=True)
    img = sorted(person.glob("*.jpg"))[0]
    shutil.copy(img, src / person.name / img.name)
    write_png_atomic(src / "Blank" / "Blank_0001.png", np.full((100, 100, 3), 200, np.uint8))
    (src / "Blank" / "Blank_0002.jpg").write_bytes(b"")
    code = main(["label", str(src), str(tmp_path / "out"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "1 ok, 1 no-face, 1 unreadable" in out
    assert "Blank_0002.jpg: image file is empty (0 bytes)" in err
    assert (tmp_path / "out" / person.name / (img.stem + "_label.png")).exists()
    report = (tmp_path / "out" / "label_report.csv").read_text()
    assert "Blank/Blank_0001," in report and ",no-face,0,," in report


def test_data_splits_bad_person_pattern(tmp_path, capsys):
    _face(tmp_path / "lfw" / "Ann", "Ann_0001")
    with pytest.raises(SystemExit) as exc:
        main(["data", "splits", str(tmp_path / "lfw"), "--person-pattern", "("])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --person-pattern: not a valid regular expression '('" in err


def test_label_limit_keeps_earlier_report_rows(tmp_path, capsys, monkeypatch):
    """`label --limit 1` after a full run keeps the report rows of the other images."""
    import facesegment.faces.label as label
    from facesegment.data.datasets import skipped_by_labeller

    monkeypatch.setattr(label, "_import_dlib", lambda: None)
    monkeypatch.setattr(label, "detect_landmarks", lambda image, *a: (None, 0, "none"))
    for name in ("a", "b", "c"):
        write_png_atomic(tmp_path / "in" / f"{name}.png", np.zeros((8, 8, 3), np.uint8))
    out = tmp_path / "out"
    assert main(["label", str(tmp_path / "in"), str(out), "--quiet"]) == 1
    assert skipped_by_labeller(out) == {"a", "b", "c"}
    assert main(["label", str(tmp_path / "in"), str(out), "--quiet", "--limit", "1"]) == 1
    assert "labelled 1 images" in capsys.readouterr().out
    assert skipped_by_labeller(out) == {"a", "b", "c"}
    lines = (out / "label_report.csv").read_text().splitlines()
    assert [ln.split(",")[0] for ln in lines] == ["name", "a", "b", "c"]
    with pytest.raises(SystemExit):
        main(["label", str(tmp_path / "in"), str(out), "--limit", "0"])
