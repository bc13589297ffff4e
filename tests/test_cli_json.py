"""`facesegment segment --json` (one JSON record per face on stdout, everything
else on stderr) and '-' for stdin and stdout."""

import io
import json
import subprocess
import sys

import numpy as np
import pytest

from facesegment.cli import main
from tests.test_cli_api_agree import PHOTO
from tests.test_readme import ROOT


@pytest.fixture()
def photos(tmp_path):
    from facesegment.data.imageio import read_image, write_png_atomic
    from facesegment.faces.mesh import mesh_available

    if not mesh_available():
        pytest.skip("needs MediaPipe's face mesh (make setup installs it)")
    if not PHOTO.is_file():
        pytest.skip(f"needs {PHOTO}")
    folder = tmp_path / "photos"
    write_png_atomic(folder / "face.png", read_image(PHOTO))
    write_png_atomic(folder / "empty.png", np.full((200, 300, 3), 90, np.uint8))
    return folder


def test_json_gives_one_record_per_face_and_agrees_with_the_api(photos, tmp_path, capsys):
    import facesegment

    assert main(["segment", str(photos), str(tmp_path / "out"), "--json"]) == 1  # one face-free
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 1 and "segmented 1/2 images" in err and "skipped empty.png" in err
    rec = records[0]
    (face,) = facesegment.segment(photos / "face.png")
    assert rec["file"] == str(photos / "face.png") and rec["name"] == "face.png"
    assert (rec["face"], rec["width"], rec["height"]) == (0, 425, 512)
    np.testing.assert_allclose(rec["box"], face.box, atol=0.01)
    np.testing.assert_allclose(rec["landmarks"], face.landmarks, atol=0.01)
    assert rec["pan"] == pytest.approx(face.pan, abs=0.06)
    assert (rec["detection"], rec["path"]) == (face.detection, face.path)
    counts = np.bincount(face.labels.ravel(), minlength=8)
    assert rec["class_pixels"] == dict(zip(facesegment.load_model().class_names,
                                           counts.tolist()))
    assert sum(rec["class_pixels"].values()) == 425 * 512 and rec["seconds"] > 0


def test_stdin_to_stdout_writes_the_label_png(photos, tmp_path):
    from facesegment.data.imageio import read_label

    assert main(["segment", str(photos / "face.png"), str(tmp_path / "ref"), "-q"]) == 0
    want = (tmp_path / "ref" / "face_label.png").read_bytes()
    cmd = f"cat {photos / 'face.png'} | {sys.executable} -m facesegment segment - - > labels.png"
    run = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "labels.png").read_bytes() == want
    assert "labels on stdout" in run.stderr
    np.testing.assert_array_equal(read_label(str(tmp_path / "labels.png")).shape, (512, 425))


def test_stdin_to_a_folder_and_json(photos, tmp_path, capsys, monkeypatch):
    data = (photos / "face.png").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["segment", "-", str(tmp_path / "out"), "--json", "-q"]) == 0
    (rec,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rec["file"] == "-" and rec["name"] == "stdin" and rec["path"] == "mesh"
    assert (tmp_path / "out" / "stdin_label.png").is_file()
    assert (tmp_path / "out" / "stdin_overlay.png").is_file()


@pytest.mark.parametrize("argv, words", [
    (["-", "-", "--json"], "--json and the label PNG cannot both go to stdout"),
    (["-", "{photos}", "{out}"], "stdin is one image and cannot be mixed"),
    (["{photos}", "-"], "writes the label PNG of one image to stdout"),
    (["-", "{out}"], "stdin is empty"),
])
def test_impossible_uses_of_the_dash_are_one_line(photos, tmp_path, capsys, monkeypatch,
                                                   argv, words):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    argv = [a.format(photos=photos, out=tmp_path / "out") for a in argv]
    assert main(["segment"] + argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and words in err
