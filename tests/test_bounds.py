"""The table of bounds: every number a user passes is checked once, named in the error."""

import io
import json
import os
import tarfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from facesegment.bounds import BOUNDS, arg_type, check, reliability_section
from facesegment.cli import main
from facesegment.data.imageio import write_png_atomic
from facesegment.errors import DataError
from facesegment.modelio.model import save_model
from facesegment.models import load_model
from tests.dense.test_inference import random_model

ROOT = Path(__file__).resolve().parents[1]


def test_docs_hold_the_generated_rule_and_table():
    text = (ROOT / "docs" / "reliability.md").read_text()
    assert reliability_section() in text, (
        "docs/reliability.md is out of date: paste facesegment.bounds.reliability_section()")


def test_every_bound_rejects_below_above_nan_and_text():
    for b in BOUNDS.values():
        assert check(b.name, b.high) == b.high
        for bad in (b.high * 2 + 1, b.low - 1, float("nan"), "abc", None, True):
            with pytest.raises(ValueError, match=b.name):
                check(b.name, bad)
    assert check("workers", "1_000") == 1000
    with pytest.raises(DataError, match="model.json"):
        check("sigma", 1e308, where="model.json")


@pytest.fixture()
def model_dir(tmp_path):
    model = random_model(4, kind="axis", n_trees=2, max_depth=2, kinds=("axis",))
    return save_model(model, tmp_path / "m")


def _photo(tmp_path):
    write_png_atomic(tmp_path / "in" / "a.png",
                     np.random.default_rng(0).integers(0, 256, (250, 250, 3), np.uint8))
    return tmp_path / "in"


@pytest.mark.parametrize("argv", [
    ["segment", "IN", "OUT", "--sigma", "1e308"],
    ["segment", "IN", "OUT", "--sigma", "100000"],
    ["evaluate", "--model", "M", "--data", "IN", "--sigma", "1e308"],
    ["train", "--kind", "axis", "--windows", "w.h5", "--out", "T", "--sigmas", "0", "1e9"],
    ["label", "IN", "OUT", "--upsample", "50"],
    ["data", "lfw", "--timeout", "-1"],
])
def test_cli_numbers_out_of_bounds_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "expected" in err and "Traceback" not in err


def _edit_doc(model_dir, **changes):
    js = Path(model_dir) / "model.json"
    doc = json.loads(js.read_text())
    doc.update(changes)
    js.write_text(json.dumps(doc))


def test_model_json_sigma_and_factors_out_of_bounds_are_one_line(tmp_path, model_dir, capsys):
    src = _photo(tmp_path)
    _edit_doc(model_dir, rule={"alpha": 1.0, "beta": 0.0, "sigma": 1e308})
    assert main(["segment", str(src), str(tmp_path / "o"), "--model", str(model_dir)]) == 2
    err = capsys.readouterr().err
    assert "sigma" in err and "out of bounds" in err and err.count("\n") == 1
    _edit_doc(model_dir, rule=None, sampling_factors=[1e-308] + [1.0] * 7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(DataError, match="sampling_factors.*1e-12"):
            load_model(model_dir)


def test_a_huge_model_json_is_refused_unread(tmp_path, model_dir):
    js = Path(model_dir) / "model.json"
    with open(js, "r+b") as fh:
        fh.truncate(1 << 30)                   # a sparse 1 GB file
    with pytest.raises(DataError, match="more than the"):
        load_model(model_dir)


@pytest.mark.parametrize("value", ["abc", "-1", "1e30", "0", "12x"])
def test_invalid_max_image_pixels_is_an_error(value, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("FACESEGMENT_MAX_IMAGE_PIXELS", value)
    assert main(["data", "check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "FACESEGMENT_MAX_IMAGE_PIXELS" in err and "unset it" in err
    monkeypatch.setenv("FACESEGMENT_MAX_IMAGE_PIXELS", "1_000_000")
    from facesegment.limits import max_image_pixels

    assert max_image_pixels() == 1_000_000


def test_api_sigma_beyond_the_bound_is_a_value_error():
    from facesegment.dense import smooth
    from facesegment.rule import DecisionRule

    with pytest.raises(ValueError, match="sigma.*out of bounds"):
        smooth(np.zeros((4, 4, 2), np.float32), 1e5)
    with pytest.raises(ValueError, match="sigma.*out of bounds"):
        DecisionRule(sigma=1e308)
    assert arg_type("sigma")("2.5") == 2.5


def test_data_render_counts_what_it_did(tmp_path, capsys):
    from facesegment.faces.landmarks import write_pts

    pts = np.stack([np.linspace(10, 50, 68), 30 + 10 * np.sin(np.linspace(0, 6, 68))], 1)
    for n in ("a", "b"):
        write_png_atomic(tmp_path / f"{n}.png", np.zeros((60, 60, 3), np.uint8))
        write_pts(tmp_path / f"{n}.pts", pts)
    assert main(["data", "render", str(tmp_path), str(tmp_path)]) == 0
    assert "rendered 2 label maps" in capsys.readouterr().out
    assert main(["data", "render", str(tmp_path), str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "rendered 0 label maps" in out and "2 already there, kept" in out
    write_png_atomic(tmp_path / "a_label.png", np.ones((60, 60), np.uint8))  # a hand-made one
    assert main(["data", "render", str(tmp_path), str(tmp_path), "--overwrite"]) == 0
    cap = capsys.readouterr()
    assert "rendered 1 label maps" in cap.out and "1 kept" in cap.out
    assert "no .pts" not in cap.err and "has no images" not in cap.err


def test_a_refused_archive_leaves_nothing_in_dest(tmp_path):
    from facesegment.data.download import safe_extract
    from facesegment.errors import DownloadError

    archive = tmp_path / "other.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"not lfw"
        info = tarfile.TarInfo("something/else.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "dest"
    with pytest.raises(DownloadError, match="nothing was extracted"):
        safe_extract(archive, dest, progress=False, expect="lfw_funneled")
    assert os.listdir(dest) == []
