"""The evaluate, segment and figures subcommands, end to end on tiny random models."""

import json

import numpy as np
import pytest

from facesegment.cli import main
from facesegment.data.imageio import write_png_atomic
from facesegment.modelio.model import save_model
from tests.dense.test_inference import random_model
from tests.evaluation.test_metrics import _write_faces


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


def test_evaluate_mode_and_pixel_stride_go_through_the_driver(tmp_path, model_dir):
    from facesegment.data.datasets import find_faces
    from facesegment.evaluation.scoring import evaluate
    from facesegment.models import load_model

    data = tmp_path / "data"
    _write_faces(data, n=2, size=36)
    out = tmp_path / "reports"
    assert main(["evaluate", "--model", str(model_dir), "--data", str(data), "--out", str(out),
                 "-q", "--workers", "1", "--mode", "full", "--pixel-stride", "2"]) == 0
    res = json.loads((out / "axis-3.json").read_text())
    ref = evaluate(load_model(model_dir), find_faces(data), alphas=[0.5], mode="full",
                   pixel_stride=2, progress=False, workers=1)
    assert res["summary"]["confusion"] == ref["trees"]["3"]["alpha"]["0.5"]["confusion"]
    assert res["summary"]["class_average_jaccard"] == ref["trees"]["3"]["alpha"]["0.5"][
        "mean_jaccard"]
    assert res["per_image"] == ref["per_image"] and res["n_pixels"] == ref["n_pixels"]
    assert res["mode"] == "full" and res["pixel_stride"] == 2 and res["kind"] == "axis"
    assert "full mode (every pixel but label 255), pixels of a 2x2 grid" in \
        (out / "axis-3.md").read_text()


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


@pytest.mark.parametrize("argv", [
    ["evaluate", "--model", "m", "--data", "d", "--limit", "0"],
    ["evaluate", "--model", "m", "--data", "d", "--alpha", "-1"],
    ["evaluate", "--model", "m", "--data", "d", "--alpha", "nan"],
    ["evaluate", "--model", "m", "--data", "d", "--sweep-trees", "0"],
    ["evaluate", "--model", "m", "--data", "d", "--sweep-depths", "-1"],
    ["evaluate", "--model", "m", "--data", "d", "--sweep-alphas", "1", "-0.5"],
    ["evaluate", "--model", "m", "--data", "d", "--seed", "-1"],
    ["evaluate", "--model", "m", "--data", "d", "--pixel-stride", "0"],
    ["evaluate", "--model", "m", "--data", "d", "--mode", "loose"],
    ["figures", "--model", "m", "--data", "d", "--pixel-stride", "0"],
    ["segment", "in", "out", "--model", "m", "--alpha", "-1"],
    ["figures", "--model", "m", "--data", "d", "--random-rows", "-1"],
    ["figures", "--model", "m", "--data", "d", "--depth-trees", "0"],
])
def test_bad_numbers_are_usage_errors(argv, capsys):
    """Bad numbers are refused before any work with argparse's error naming the option."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    option = next(a for a in argv if a.startswith("--") and a not in ("--model", "--data"))
    assert f"error: argument {option}:" in capsys.readouterr().err


def test_test_records_limit_is_one_line_error(tmp_path):
    from facesegment.commands.evaluate import test_records
    from facesegment.errors import FaceSegmentError

    _write_faces(tmp_path, n=1, size=36)
    with pytest.raises(FaceSegmentError, match="--limit 0 must be a positive integer"):
        test_records(tmp_path, limit=0)


def test_evaluate_split_test_with_few_training_faces(tmp_path, model_dir, capsys):
    """--split test needs no validation images: a small folder still has a test split."""
    _write_faces(tmp_path / "faces", n=3, size=36)
    out = tmp_path / "reports"
    assert main(["evaluate", "--model", str(model_dir), "--data", str(tmp_path / "faces"),
                 "--split", "test", "--out", str(out), "-q", "--workers", "1"]) == 0
    assert json.loads((out / "axis-3.json").read_text())["n_images"] == 1


def test_evaluate_models_with_the_same_folder_name(tmp_path, model_dir, capsys):
    """a/axis-3 and b/axis-3 both keep their JSON and their summary row."""
    import shutil

    other = tmp_path / "other" / "axis-3"
    shutil.copytree(model_dir, other)
    data = tmp_path / "data"
    _write_faces(data, n=1, size=36)
    out = tmp_path / "reports"
    assert main(["evaluate", "--model", str(model_dir), str(other), "--data", str(data),
                 "--out", str(out), "-q", "--workers", "1", "--sweep-trees", "1", "99"]) == 0
    assert "is named 'axis-3-1'" in capsys.readouterr().err
    assert json.loads((out / "axis-3.json").read_text())["model"] == str(model_dir)
    res = json.loads((out / "axis-3-1.json").read_text())
    assert res["model"] == str(other)
    summary = (out / "summary.md").read_text()
    assert "| axis-3 (alpha=0.5) |" in summary and "| axis-3-1 (alpha=0.5) |" in summary
    # --sweep-trees above the model's 3 trees means all 3: labels match the scores
    assert res["sweep"]["n_trees"] == [1, 3]
    assert np.shape(res["sweep"]["class_average_jaccard"]) == (1, 1, 2)


def test_segment_unwritable_output_is_one_line(tmp_path, model_dir, capsys):
    src = tmp_path / "photos"
    write_png_atomic(src / "face.png", np.zeros((250, 250, 3), np.uint8))
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    rc = main(["segment", str(src), str(blocker / "out"), "--model", str(model_dir), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert f"{blocker / 'out'}: cannot write the outputs here" in err


def test_environment_errors_are_one_line_bugs_keep_tracebacks(monkeypatch, capsys):
    from facesegment.commands import figures

    def denied(args):
        raise PermissionError(13, "Permission denied", "/data/locked.h5")

    monkeypatch.setattr(figures, "run", denied)
    assert main(["figures", "--model", "m", "--data", "d"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error: /data/locked.h5: Permission denied" in err

    def bug(args):
        raise ValueError("a genuine bug")

    monkeypatch.setattr(figures, "run", bug)
    with pytest.raises(ValueError, match="genuine bug"):
        main(["figures", "--model", "m", "--data", "d"])


def test_position_prior_through_evaluate_and_segment(tmp_path, capsys):
    """A model with a position prior: evaluate and segment use its beta (or --beta);
    --beta on a model without one is one error line (exit 2)."""
    from facesegment.dense import predict_image
    from facesegment.data.imageio import read_label
    from tests.test_position import model_with_prior

    plain = save_model(random_model(4, kind="axis", n_trees=3, max_depth=3, kinds=("axis",)),
                       tmp_path / "plain")
    model = model_with_prior(4, n_trees=3, max_depth=3, kinds=("axis",))
    model.kind = "axis"
    model.metrics.update(alpha=0.5, beta=0.75)
    path = save_model(model, tmp_path / "models" / "prior-3")
    data = tmp_path / "data"
    _write_faces(data / "test", n=2, size=40)
    _write_faces(data / "train", n=1, size=40)
    for beta, text in ((None, "beta=0.75"), ("0", "(alpha=0.5) |")):
        out = tmp_path / f"ev{beta}"
        argv = ["evaluate", "--model", str(path), "--data", str(data), "--out", str(out),
                "-q", "--workers", "1"] + ([] if beta is None else ["--beta", beta])
        assert main(argv) == 0
        assert text in capsys.readouterr().out
        res = json.loads((out / "prior-3.json").read_text())
        assert res["beta"] == (0.75 if beta is None else 0.0)
    src = tmp_path / "photos"
    img = np.random.default_rng(1).integers(0, 256, (40, 37, 3), dtype=np.uint8)
    write_png_atomic(src / "face.png", img)
    assert main(["segment", str(src), str(tmp_path / "seg"), "--model", str(path), "-q",
                 "--workers", "1", "--detect", "never"]) == 0
    printed = capsys.readouterr().out
    assert "beta=0.75); skipped 0;" in printed and "{" not in printed
    expect = predict_image(model, img, mode="full", alpha=0.5, beta=0.75)[1]
    np.testing.assert_array_equal(read_label(tmp_path / "seg" / "face_label.png"), expect)
    for cmd in (["segment", str(src), str(tmp_path / "seg2")],
                ["evaluate", "--data", str(data), "--out", str(tmp_path / "ev2")]):
        assert main(cmd + ["--model", str(plain), "--beta", "0.5", "-q"]) == 2
        err = capsys.readouterr().err
        assert "has no position prior, so --beta 0.5 cannot apply" in err
        assert "Traceback" not in err and str(plain) in err


def test_smoothing_through_evaluate_and_segment(tmp_path, capsys):
    """A model with a selected sigma: segment blurs its maps (or --sigma), evaluate adds
    the smoothed scores; a negative --sigma is one argparse error line."""
    from facesegment.evaluation.maps import evaluate_smoothed
    from facesegment.dense import predict_image
    from facesegment.data.imageio import read_label
    from facesegment.data.datasets import find_faces

    model = random_model(6, kind="axis", n_trees=3, max_depth=4, kinds=("axis",))
    model.metrics.update(alpha=0.5, sigma=2.0)
    path = save_model(model, tmp_path / "models" / "smooth-3")
    data = tmp_path / "data"
    _write_faces(data / "test", n=2, size=40)
    _write_faces(data / "train", n=1, size=40)
    out = tmp_path / "ev"
    assert main(["evaluate", "--model", str(path), "--data", str(data), "--out", str(out),
                 "-q", "--workers", "1"]) == 0
    assert "sigma=2)" in capsys.readouterr().out
    res = json.loads((out / "smooth-3.json").read_text())
    want = evaluate_smoothed(model, find_faces(data / "test"), alpha=0.5, sigmas=[2.0],
                             workers=1, progress=False)["sigma"]["2.0"]
    assert res["smoothed"]["sigma"] == 2.0
    assert res["smoothed"]["mean_jaccard"] == want["mean_jaccard"]
    src = tmp_path / "photos"
    img = np.random.default_rng(2).integers(0, 256, (40, 37, 3), dtype=np.uint8)
    write_png_atomic(src / "face.png", img)
    for flag, sigma in (([], 2.0), (["--sigma", "0"], 0.0)):
        seg = tmp_path / f"seg{sigma}"
        assert main(["segment", str(src), str(seg), "--model", str(path), "-q",
                     "--workers", "1", "--detect", "never"] + flag) == 0
        assert (", sigma=2)" in capsys.readouterr().out) == (sigma > 0)
        expect = predict_image(model, img, mode="full", alpha=0.5, sigma=sigma)[1]
        np.testing.assert_array_equal(read_label(seg / "face_label.png"), expect)
    with pytest.raises(SystemExit) as exc:
        main(["segment", str(src), str(tmp_path / "seg3"), "--model", str(path),
              "--sigma", "-1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--sigma" in err and "Traceback" not in err
