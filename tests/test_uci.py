"""The UCI harness (pipelines/uci*.py, `make uci`) on tiny synthetic dataset
folders with the [quick] settings: end to end, resumable, deterministic, one
error line per broken folder, config errors, [large] and the big forests."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from pipelines import uci, uci_report
from pipelines.uci_config import UciConfigError, dataset_config, grid, load_config
from pipelines.uci_data import fit_scaler, stratified_split, stratified_subsample

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pipelines" / "uci.toml"
KINDS = ("axis", "co2", "co2-best", "extra", "ferns", "rotation", "sklearn-rf", "sklearn-et")


def write_dataset(folder, n, p, k, seed):
    """A linearly separable-ish problem with k classes, features of mixed scales."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = np.argmax(X @ rng.normal(size=(p, k)) + 0.5 * rng.normal(size=(n, k)), axis=1)
    X[:, 0] *= 100
    X[:, 1] += 50
    folder.mkdir(parents=True)
    cut = int(0.7 * n)
    for name, rows in (("train", slice(0, cut)), ("test", slice(cut, n))):
        np.savez_compressed(folder / f"{name}.npz", X=X[rows], y=y[rows].astype(np.int64),
                            classes=np.arange(k))


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "uci"
    write_dataset(root / "alpha", 300, 6, 3, 0)
    write_dataset(root / "beta", 320, 10, 4, 1)
    return root


def run(root, out, *extra):
    return uci.main(["--root", str(root), "--out", str(out), "--quick", "--no-docs", *extra],
                    log=lambda msg: None)


def outputs(out):
    """``{relative path: bytes}`` of every file under ``out``."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(Path(out).rglob("*"))
            if p.is_file()}


def test_end_to_end_then_a_rerun_skips_everything(data, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(data, out) == 0
    for name in ("alpha", "beta"):
        for kind in KINDS:
            for stage in ("select", "test"):
                res = json.loads((out / name / f"{stage}-{kind}.json").read_text())
                assert res["key"] and res["dataset"] == name and res["kind"] == kind
            test = json.loads((out / name / f"test-{kind}.json").read_text())
            assert set(test["curve"]) == {"1", "2", "3", "5", "10"}
            assert all(0 <= v <= 100 for v in test["curve"].values())
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000
    co2 = json.loads((out / "alpha" / "select-co2.json").read_text())
    axis = json.loads((out / "alpha" / "select-axis.json").read_text())
    assert co2["searched"] and len(co2["settings"]) == 4   # quick: nu in {1, 10} x bootstrap
    assert {r["params"]["bootstrap"] for r in co2["settings"]} == {True, False}
    assert co2["chosen"]["max_features"] == axis["chosen"]["max_features"]   # inherited q
    best = json.loads((out / "alpha" / "select-co2-best.json").read_text())
    assert {k: best["chosen"][k] for k in ("nu", "eta", "scale", "bootstrap")} == \
        {k: co2["chosen"][k] for k in ("nu", "eta", "scale", "bootstrap")}
    results = (out / "results.md").read_text()
    assert "| alpha |" in results and "| beta |" in results and "Table I" in results
    for kind in ("axis", "sklearn-rf"):  # the Gini twin and the OOB errors
        cart = json.loads((out / "alpha" / f"test-{kind}.json").read_text())["cart"]
        assert set(cart) == {"oob", "gini", "gini_oob"}
        assert all(0 <= v <= 100 for v in cart.values())
    assert "Gini and out-of-bag errors" in results and "axis gini OOB" in results
    timings = json.loads((out / "timings.json").read_text())
    assert timings["stages"]["alpha/co2/test"]["fit_s"] >= 0
    assert "sklearn-rf" in (out / "timings.md").read_text()
    capsys.readouterr()

    before = {p: p.stat().st_mtime_ns for p in out.glob("*/*.json")}
    assert run(data, out) == 0
    err = capsys.readouterr().err
    stage_lines = [ln for ln in err.splitlines() if re.match(r"uci: \d+/32 stages", ln)]
    assert len(stage_lines) == 32 and all("(up to date)" in ln for ln in stage_lines)
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/*.json")} == before


def test_two_runs_give_identical_results_except_times(data, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run(data, a) == 0
    assert run(data, b, "--workers", "1") == 0
    fa, fb = outputs(a), outputs(b)
    assert fa.keys() == fb.keys()
    # the output manifest records the timings' hashes, so it differs with them
    differ = sorted(k for k in fa if fa[k] != fb[k] and not k.endswith(".facesegment-outputs"))
    assert differ == ["timings.json", "timings.md"]


def test_a_broken_folder_is_one_error_line_and_the_others_run(data, tmp_path, capsys):
    (data / "gamma").mkdir()
    np.savez(data / "gamma" / "train.npz", X=np.zeros((5, 2), np.float32), y=np.zeros(5, np.int64))
    delta = data / "delta"
    delta.mkdir()
    np.savez(delta / "train.npz", X=np.zeros((6, 2), np.float32), y=np.zeros(5, np.int64))
    np.savez(delta / "test.npz", X=np.zeros((4, 2), np.float32), y=np.zeros(4, np.int64))
    out = tmp_path / "out"
    assert run(data, out, "--kinds", "axis") == 2
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("uci: error:")]
    assert len(errors) == 2
    assert any(str(data / "gamma" / "test.npz") in ln and "missing" in ln for ln in errors)
    assert any(str(delta / "train.npz") in ln and "6 rows but y has 5 labels" in ln
               for ln in errors)
    assert "Traceback" not in err
    for name in ("alpha", "beta"):
        assert (out / name / "test-axis.json").is_file()
    assert not (out / "gamma").exists() and not (out / "delta").exists()


def test_config_errors_name_the_key(tmp_path, data, capsys):
    bad = tmp_path / "bad.toml"
    text = CONFIG.read_text()
    bad.write_text(text.replace("nu = [0.1, 1, 4, 10, 43, 100]", "nu = [0.1, -1]"))
    with pytest.raises(UciConfigError, match=r"\[kinds.co2\] nu = -1"):
        load_config(bad)
    bad.write_text(text.replace('depth = [8, 10, 12]', 'dept = [8, 10, 12]'))
    with pytest.raises(UciConfigError, match=r"\[kinds.ferns\] dept: not a parameter"):
        load_config(bad)
    bad.write_text(text.replace("validation = 0.2", "validation = 2"))
    assert uci.main(["--root", str(data), "--out", str(tmp_path / "o"), "--config", str(bad)],
                    log=lambda m: None) == 2
    assert "[run] validation = 2 must be a number in (0, 1)" in capsys.readouterr().err


def test_large_settings_and_the_big_forests(data, tmp_path):
    cfg_path = tmp_path / "large.toml"
    cfg_path.write_text(CONFIG.read_text().replace("min_cells = 5_000_000", "min_cells = 1000"))
    cfg = load_config(cfg_path, quick=True)
    run_cfg, kinds, large = dataset_config(cfg, 210 * 6)
    assert large and kinds["rotation"]["fixed"] == {"max_features": "sqrt"}
    assert run_cfg["select_max_rows"] == 2000        # [quick] wins over [large]
    out = tmp_path / "out"
    args = ["--config", str(cfg_path), "--kinds", "co2-best", "rotation", "sklearn-rf",
            "--big-budget", "10"]
    assert run(data, out, *args) == 0
    rot = json.loads((out / "alpha" / "select-rotation.json").read_text())
    assert rot["large"] and rot["chosen"]["max_features"] == "sqrt"
    best = json.loads((out / "alpha" / "select-co2-best.json").read_text())
    assert best["chosen"]["n_pairs"] == 50
    assert not (out / "alpha" / "test-axis.json").exists()    # selected for co2, not tested
    for kind in ("co2-best", "rotation", "sklearn-rf"):
        test = json.loads((out / "beta" / f"test-{kind}.json").read_text())
        big = json.loads((out / "beta" / f"big-{kind}.json").read_text())
        assert big["trees"] == 30 and set(big["curve"]) >= {"10", "20", "30"}
        for k, v in test["curve"].items():   # the first chunk is the test forest
            assert big["curve"][k] == v
    plan = json.loads((out / "timings.json").read_text())["big_plan"]
    assert all(v["ran"] for v in plan.values()) and len(plan) == 6
    results = (out / "results.md").read_text()
    assert "co2-best 30" in results


def test_split_subsample_and_scaling():
    y = np.repeat(np.arange(3), [50, 30, 1])
    fit, val = stratified_split(y, 0.2, seed=0)
    assert np.bincount(y[val], minlength=3).tolist() == [10, 6, 0]
    assert np.intersect1d(fit, val).size == 0 and fit.size + val.size == y.size
    assert np.array_equal(stratified_split(y, 0.2, 0)[1], val)
    sub = stratified_subsample(fit, y, 20, seed=0)
    assert sub.size <= 22 and set(y[sub]) == {0, 1, 2}
    X = np.array([[0, 5, 1], [10, 5, 3]], np.float32)
    off, sc = fit_scaler(X, "minmax")
    assert off.tolist() == [0, 5, 1] and sc.tolist() == [10, 1, 2]   # constant: scale 1
    off, sc = fit_scaler(X, "standard")
    assert off.tolist() == [5, 5, 2] and sc.tolist() == [5, 1, 1]


def test_shipped_config_grids_and_the_paper_table():
    cfg = load_config(CONFIG)
    _, kinds, large = dataset_config(cfg, 4435 * 36)
    assert not large
    assert len(grid(kinds["co2"])) == 72 and len(grid(kinds["axis"])) == 5   # x bootstrap
    assert len(grid(kinds["ferns"])) == 12 and len(grid(kinds["rotation"])) == 6
    _, kinds, large = dataset_config(cfg, 60000 * 784)
    assert large and len(grid(kinds["co2"])) == 24
    paper = uci_report.PAPER_TABLE_I
    assert paper["satimage"]["co2"] == (9.6, 9.1, 8.9) and paper["mnist"]["oc1"] is None
    assert len(paper) == 9


def test_satimage_smoke(tmp_path):
    """The real satimage files with the [quick] settings (about 10 s)."""
    from tests.conftest import SHARED_DATA

    root = SHARED_DATA / "uci"
    if not (root / "satimage" / "train.npz").is_file():
        pytest.skip(f"needs {root}/satimage")
    assert uci.main(["--root", str(root), "--datasets", "satimage", "--quick", "--out",
                     str(tmp_path), "--no-docs"], log=lambda m: None) == 0
    for kind in KINDS:
        test = json.loads((tmp_path / "satimage" / f"test-{kind}.json").read_text())
        assert test["n_test"] == 2000 and test["curve"]["10"] < 25, kind
    co2 = json.loads((tmp_path / "satimage" / "test-co2.json").read_text())
    assert co2["curve"]["10"] < 13
