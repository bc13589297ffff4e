"""``python -m pipelines.nongreedy --quick`` on tiny synthetic dataset folders:
progress lines, outputs, resumability."""

import json

import numpy as np
import pytest

from pipelines import nongreedy


def _datasets(root):
    rng = np.random.default_rng(0)
    for name, p, C in (("toya", 5, 3), ("toyb", 8, 2)):
        d = root / name
        d.mkdir(parents=True)
        for f, n in (("train.npz", 240), ("test.npz", 100)):
            X = rng.normal(size=(n, p)).astype(np.float32)
            y = ((X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 0.5)) % C
            np.savez_compressed(d / f, X=X, y=y.astype(np.int64), classes=np.arange(C))
    return root


def test_quick_run_writes_tables_figure_and_resumes(tmp_path):
    root = _datasets(tmp_path / "data")
    out = tmp_path / "out"
    lines = []
    argv = ["--root", str(root), "--out", str(out), "--quick"]
    assert nongreedy.main(argv, log=lines.append) == 0
    total = 2 * (2 * len(nongreedy.METHODS) + len(nongreedy.FORESTS))
    progress = [line for line in lines if line.startswith("[nongreedy] ") and "/" in line
                and "ETA" in line]
    assert len(progress) == total and progress[-1].startswith(f"[nongreedy] {total}/{total}")
    res = json.loads((out / "results.json").read_text())
    assert len(res["trees"]) == 2 * 2 * len(nongreedy.METHODS)
    assert {r["method"] for r in res["trees"]} == set(nongreedy.METHODS)
    assert all(0 <= r["test_acc"] <= 1 for r in res["trees"])
    ng = [r for r in res["trees"] if r["method"] == "ng-axis"]
    assert all(len(r["val_acc"]) == 2 and r["stats"]["lai_samples_per_s"] > 0 for r in ng)
    assert {f["kind"] for f in res["forests"]} == set(nongreedy.FORESTS)
    assert set(res["forests"][0]["test_acc"]) == {"2", "3"}
    tables = (out / "tables.md").read_text()
    assert "## toya" in tables and "non-greedy (axis init)" in tables
    assert (out / "nongreedy.png").stat().st_size > 1000
    before = (out / "runs" / "toya" / "tree-d03-ng-axis.json").read_bytes()
    lines.clear()
    assert nongreedy.main(argv, log=lines.append) == 0  # resumed: nothing recomputed
    assert sum("done before" in line for line in lines) == total
    assert (out / "runs" / "toya" / "tree-d03-ng-axis.json").read_bytes() == before


def test_changed_settings_redo_only_their_units(tmp_path):
    root = _datasets(tmp_path / "data")
    out = tmp_path / "out"
    argv = ["--root", str(root), "--out", str(out), "--quick", "--datasets", "toya",
            "--methods", "axis", "--forests", "none"]
    lines = []
    assert nongreedy.main(argv, log=lines.append) == 0
    lines.clear()
    assert nongreedy.main(argv + ["--depths", "2", "3", "4"], log=lines.append) == 0
    assert sum("done before" in line for line in lines) == 2  # depths 2 and 3 kept
    assert any("tree-d04-axis" in line and "ETA" in line for line in lines)


@pytest.mark.parametrize("grid, n", [({}, 1), ({"a": [1, 2], "b": [3]}, 2)])
def test_grid_points(grid, n):
    pts = nongreedy.grid_points(grid)
    assert len(pts) == n and all(set(p) == set(grid) for p in pts)


def test_rerunning_one_dataset_keeps_the_others_without_their_caches(tmp_path):
    """The unit caches (runs/) are not in git: on a fresh clone, running one dataset
    must keep the other datasets' rows of results.json and tables.md (it dropped them)."""
    import shutil

    root = _datasets(tmp_path / "data")
    out = tmp_path / "out"
    base = ["--root", str(root), "--out", str(out), "--quick"]
    assert nongreedy.main(base, log=lambda m: None) == 0
    before = json.loads((out / "results.json").read_text())
    shutil.rmtree(out / "runs")                       # a fresh clone: no unit caches
    assert nongreedy.main(base + ["--datasets", "toyb"], log=lambda m: None) == 0
    after = json.loads((out / "results.json").read_text())
    key = lambda r: (r["dataset"], r["depth"], r["method"])  # noqa: E731
    assert sorted(map(key, after["trees"])) == sorted(map(key, before["trees"]))
    toya = {key(r): r["test_acc"] for r in before["trees"] if r["dataset"] == "toya"}
    assert toya == {key(r): r["test_acc"] for r in after["trees"] if r["dataset"] == "toya"}
    assert {(f["dataset"], f["kind"]) for f in after["forests"]} == \
        {(f["dataset"], f["kind"]) for f in before["forests"]}
    assert "## toya" in (out / "tables.md").read_text()
