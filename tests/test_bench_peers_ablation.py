"""benchmarks/peers_ablation.py: one factor at a time, on the same windows for every library."""

import json
import shlex

import numpy as np
import pytest

from benchmarks.peers_ablation import compare, digest, main, subset
from facesegment.classes import CLASS_NAMES
from facesegment.layout import WindowLayout
from facesegment.data.windows import WindowsWriter, read_windows

LAYOUT = WindowLayout(window=5, channels=3)   # 75 features


def _windows(path, n, seed):
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 8).astype(np.uint8)
    X = rng.integers(0, 256, (n,) + LAYOUT.shape, dtype=np.uint8)
    X[:, 2, 2, 0] = y * 30 + rng.integers(0, 20, n).astype(np.uint8)  # learnable
    p = LAYOUT.n_features
    with WindowsWriter(path, n, layout=LAYOUT) as w:
        w.write(0, X, y, np.zeros(n, np.int32), np.full((n, 2), 5, np.int32))
        w.set_strings("sources", ["img0"])
        w.set_attrs(class_names=list(CLASS_NAMES), pixel_counts=np.arange(1, 9, dtype=np.int64),
                    class_counts=np.bincount(y, minlength=8).astype(np.int64),
                    sampling_factors=np.ones(8), with_replacement=np.zeros(8, bool),
                    mean=np.full(p, 100, np.float32), std=np.full(p, 3, np.float32),
                    seed=seed, n_windows=n, margin=LAYOUT.half)
        w.finish()
    return path


def test_subset_is_class_stratified_and_seeded(tmp_path):
    ws = read_windows(_windows(tmp_path / "w.h5", 160, 0))
    X, y = subset(ws, 80, 0)
    assert X.shape == (80, LAYOUT.n_features) and np.all(np.bincount(y) == 10)
    assert digest(X, y) == digest(*subset(ws, 80, 0)) != digest(*subset(ws, 80, 1))
    X_all, y_all = subset(ws, 1000, 0)
    assert digest(X_all, y_all) == digest(ws.X.reshape(160, -1), ws.y)


def test_matches_are_ours_within_a_point_at_half_the_fit_time():
    rows = [{"who": "LightGBM", "factor": "baseline", "setting": "lgb", "accuracy": 60.0,
             "fit_s": 100.0},
            {"who": "ours", "factor": "baseline", "setting": "ours", "accuracy": 55.0,
             "fit_s": 2.0},
            {"who": "ours", "factor": "trees", "setting": "many", "accuracy": 59.0,
             "fit_s": 50.0},
            {"who": "ours", "factor": "trees", "setting": "slow", "accuracy": 61.0,
             "fit_s": 51.0},
            {"who": "LightGBM", "factor": "trees", "setting": "few", "accuracy": 61.0,
             "fit_s": 10.0}]
    assert compare(rows) == ["many"]
    assert rows[2]["vs_own_baseline"] == 4.0 and rows[2]["vs_lightgbm"] == -1.0
    assert rows[2]["fit_vs_lightgbm"] == 0.5 and rows[4]["vs_own_baseline"] == 1.0


@pytest.mark.slow
def test_ablation_runs_every_row_on_tiny_windows(tmp_path):
    pytest.importorskip("lightgbm")
    pytest.importorskip("xgboost")
    train = _windows(tmp_path / "train.h5", 160, 0)
    test = _windows(tmp_path / "test.h5", 80, 1)
    doc_path = tmp_path / "peers.md"
    doc_path.write_text("# Speed against the peers\n\nthe peers' table\n")
    out = tmp_path / "ablation.json"
    args = ["--windows", str(train), str(test), "--trees", "8", "--q", "8", "--depth", "4",
            "--xgb-depth", "3", "--leaves", "7", "--out", str(out), "--doc", str(doc_path)]
    assert main(args) == 0
    doc = json.loads(out.read_text())
    rows = {(r["who"], r["setting"]): r for r in doc["rows"]}
    assert len(rows) == len(doc["rows"]) == 19
    assert rows[("LightGBM", "peers.py: 8 rounds x 8 classes")]["trees_grown"] == 64
    assert rows[("LightGBM", "1 round(s): 8 trees in all")]["trees_grown"] == 8
    assert rows[("ours", "64 multiclass trees (as many as LightGBM)")]["trees_grown"] == 64
    assert rows[("ours", "one-vs-rest: 8 trees per class")]["trees_grown"] == 64
    assert all(0 <= r["accuracy"] <= 100 and r["fit_s"] >= 0 for r in doc["rows"])
    assert doc["settings"]["train"] == 160 and doc["settings"]["features"] == LAYOUT.n_features
    heading = "### `" + shlex.join(["python", "-m", "benchmarks.peers_ablation", *args]) + "`"
    text = doc_path.read_text()
    assert text.startswith("# Speed against the peers\n\nthe peers' table\n\n" + heading)
    assert text.count(heading) == 1 and text.count("| ours | trees |") == 1
    main(args)   # a second run replaces its section
    assert doc_path.read_text().count(heading) == 1


def test_factors_and_only_keep_lightgbms_baseline(tmp_path):
    pytest.importorskip("lightgbm")
    train = _windows(tmp_path / "train.h5", 80, 0)
    test = _windows(tmp_path / "test.h5", 40, 1)
    out = tmp_path / "ablation.json"
    main(["--windows", str(train), str(test), "--trees", "1", "--q", "8", "--depth", "3",
          "--leaves", "4", "--only", "ours", "--factors", "trees", "--out", str(out),
          "--doc", str(tmp_path / "peers.md")])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["who"], r["factor"]) for r in rows] == [("LightGBM", "baseline"), ("ours", "trees")]
    assert rows[1]["vs_own_baseline"] is None and rows[1]["trees_grown"] == 8
