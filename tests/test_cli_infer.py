"""The evaluate, segment and figures subcommands, end to end on tiny random models."""

import json

import numpy as np
import pytest

from facesegment.cli import main
from facesegment.imageio import write_png_atomic
from facesegment.model import save_model
from tests.test_inference import random_model
from tests.test_metrics import _write_faces


@pytest.fixture()
def model_dir(tmp_path):
    model = random_model(4, kind="axis", n_trees=3, max_depth=3, kinds=("axis", "two-probe"))
    model.metrics["alpha"] = 0.5
    return save_model(model, tmp_path / "models" / "axis-3")


def test_evaluate_writes_json_and_table(tmp_path, model_dir, capsys):
    data = tmp_path / "data"
    _write_faces(data / "test", n=2, size=36)
    _write_faces(data / "train", n=1, size=36)
    out = tmp_path / "reports"
    rc = main(["evaluate", "--model", str(model_dir), "--data", str(data), "--out", str(out),
               "--sweep-trees", "1", "--quiet", "--workers", "1"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "| axis-3 (alpha=0.5) |" in printed
    res = json.loads((out / "axis-3.json").read_text())
    assert res["n_images"] == 2 and res["alpha"] == 0.5
    assert set(res["per_image"]) == {"f0", "f1"}
    assert res["sweep"]["n_trees"] == [1, 3]
    assert (out / "summary.md").read_text().startswith("### Test faces: 2")


def test_evaluate_bad_model_is_one_line_error(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    rc = main(["evaluate", "--model", str(tmp_path / "nope"), "--data", str(tmp_path / "data")])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "facesegment: error:" in err[0]


def test_segment_exit_status_and_outputs(tmp_path, model_dir, capsys):
    src = tmp_path / "photos"
    rng = np.random.default_rng(0)
    write_png_atomic(src / "face.png", rng.integers(0, 256, (250, 250, 3), dtype=np.uint8))
    out = tmp_path / "out"
    assert main(["segment", str(src), str(out), "--model", str(model_dir), "-q",
                 "--workers", "1"]) == 0
    assert (out / "face_label.png").stat().st_size > 0
    assert "alpha=0.5" in capsys.readouterr().out
    (src / "bad.jpg").write_bytes(b"")
    assert main(["segment", str(src), str(out), "--model", str(model_dir), "-q",
                 "--alpha", "1", "--workers", "1"]) == 1
    assert "skipped bad" in capsys.readouterr().err


@pytest.mark.slow
def test_figures_command(tmp_path, model_dir, capsys):
    data = tmp_path / "faces"
    _write_faces(data, n=2, size=34)
    out = tmp_path / "fig"
    assert main(["figures", "--model", str(model_dir), "--data", str(data), "--out", str(out),
                 "-q", "--random-rows", "1", "--workers", "1"]) == 0
    for name in ("figure3.png", "figure4.png", "confusion_axis-3.png", "figures.json"):
        assert (out / name).stat().st_size > 0


def test_help_texts():
    from facesegment.cli import get_parser

    parser = get_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in ("evaluate", "segment", "figures"):
        p = sub.choices[name]
        for action in p._actions:
            assert action.help, f"{name} {action.option_strings} has no help"
