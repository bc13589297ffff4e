"""The CLI under stress: SIGTERM/SIGINT, a closed stdout, a lost Dask scheduler,
`python -m facesegment`, and segment's inputs (files, patterns, several)."""

import csv
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from facesegment.cli import EXIT_INTERRUPTED, EXIT_PIPE, EXIT_TERMINATED, main
from facesegment.data.imageio import write_png_atomic
from facesegment.modelio.model import save_model
from tests.dense.test_inference import random_model

ROOT = Path(__file__).resolve().parents[1]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


@pytest.fixture()
def model_dir(tmp_path):
    from facesegment.rule import DecisionRule

    model = random_model(4, kind="axis", n_trees=2, max_depth=3, kinds=("axis",))
    model.rule = DecisionRule(alpha=1.0)   # a stored rule: no note on stderr
    return save_model(model, tmp_path / "models" / "axis-2")


def _photos(folder, n, size=250):
    rng = np.random.default_rng(0)
    for i in range(n):
        write_png_atomic(folder / f"p{i:02d}.png",
                         rng.integers(0, 256, (size, size, 3), dtype=np.uint8))


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_python_dash_m_facesegment():
    res = subprocess.run([sys.executable, "-m", "facesegment", "--version"],
                         capture_output=True, text=True, env=_env(), timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("facesegment ")
    res = subprocess.run([sys.executable, "-m", "facesegment", "segment", "--help"],
                         capture_output=True, text=True, env=_env(), timeout=120)
    assert res.returncode == 0 and "--save-proba" in res.stdout


#: The real CLI, with each image slowed down so that a signal lands mid-run.
_SLOW_CLI = """
import sys, time
import facesegment.faces.folder as folder
real = folder.segment_file
def slow(*a, **k):
    time.sleep(0.4)
    return real(*a, **k)
folder.segment_file = slow
from facesegment.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum, status, words", [
    (signal.SIGTERM, EXIT_TERMINATED, "terminated (SIGTERM)"),
    (signal.SIGINT, EXIT_INTERRUPTED, "interrupted"),
])
def test_signal_mid_segment_keeps_finished_outputs(tmp_path, model_dir, signum, status, words):
    """SIGTERM behaves like Ctrl-C: no traceback, one message, its own exit
    status, finished outputs kept, no temporary file, summary.csv written."""
    src, out = tmp_path / "in", tmp_path / "out"
    _photos(src, 12)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_CLI, "segment", str(src), str(out), "--model",
         str(model_dir), "-q", "--workers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("*_label.png")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no output after 120 s"
            time.sleep(0.05)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == [
        f"facesegment: {words}; finished outputs were kept, partial ones removed"]
    rows = _rows(out / "summary.csv")
    assert len(rows) == 12
    done = [r["name"] for r in rows if r["status"] == "ok"]
    assert 1 <= len(done) < 12
    assert {r["status"] for r in rows} == {"ok", "not done"}
    for name in done:
        assert (out / name.replace(".png", "_label.png")).is_file()
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


def test_sigterm_handler_is_restored(tmp_path, capsys):
    before = signal.getsignal(signal.SIGTERM)
    hook = sys.unraisablehook
    main(["data", "splits", str(tmp_path)])
    capsys.readouterr()
    assert signal.getsignal(signal.SIGTERM) is before
    assert sys.unraisablehook is hook


class _SignalsInItsDestructor:
    """An object whose destructor gets SIGTERM and keeps running a while, so the
    handler's Terminated is raised inside the destructor (where Python only
    prints an exception and goes on: an extraction once ran to its end so)."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100000):   # the handler runs at one of these jumps
            pass


def test_a_sigterm_swallowed_by_a_destructor_still_stops_the_run(capsys):
    from facesegment.cli import sigterm_raises
    from facesegment.progress import Progress

    bar = Progress(10, "work", "items", enabled=False)
    done = 0
    with sigterm_raises():
        with pytest.raises(KeyboardInterrupt) as info:
            for _ in range(10):
                _SignalsInItsDestructor()   # collected at once: its __del__ runs here
                bar.update()
                done += 1
    assert type(info.value).__name__ == "Terminated"
    assert done == 0          # stopped at the first progress update, not at the end
    assert "Terminated" not in capsys.readouterr().err   # not printed as "Exception ignored"
    bar.update()              # raised once: a clean-up's progress line goes on
    assert bar.n == 1


def test_closed_stdout_exits_quietly(tmp_path):
    """`facesegment data splits DIR | head -0`: stdout closed before the output
    is written: no BrokenPipeError traceback, status 141."""
    rng = np.random.default_rng(0)
    for p in ("Ann", "Bob", "Cid"):
        write_png_atomic(tmp_path / "lfw" / p / f"{p}_0001.png",
                         rng.integers(0, 256, (20, 20, 3), dtype=np.uint8))
        write_png_atomic(tmp_path / "lfw" / p / f"{p}_0001_label.png",
                         np.zeros((20, 20), np.uint8))
    proc = subprocess.Popen([sys.executable, "-m", "facesegment", "data", "splits",
                             str(tmp_path / "lfw"), "--validation", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    proc.stdout.close()  # the reader went away before anything was written
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_PIPE
    assert stderr == ""


def test_closed_stdout_in_a_shell_pipe(tmp_path):
    """The same through a real pipe into `head -1` with a long output."""
    script = ("import sys\nfrom facesegment.cli import main\n"
              "import facesegment.commands.data as d\n"
              "d._splits = lambda args: [print('line', i) for i in range(200000)] and 0\n"
              "sys.exit(main(sys.argv[1:]))\n")
    res = subprocess.run(
        f"set -o pipefail; '{sys.executable}' -c \"$SCRIPT\" data splits {tmp_path} | head -1",
        shell=True, executable="/bin/bash", capture_output=True, text=True,
        env={**_env(), "SCRIPT": script}, timeout=120)
    assert res.stdout == "line 0\n"
    assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr
    assert res.returncode == EXIT_PIPE


def test_lost_scheduler_during_segment(tmp_path, model_dir, capsys, monkeypatch):
    """The Dask scheduler closed mid-run: one error line naming its address,
    exit 2, summary.csv lists what was finished."""
    distributed = pytest.importorskip("distributed")
    import facesegment.parallel as parallel
    import facesegment.faces.folder as folder

    src, out = tmp_path / "in", tmp_path / "out"
    _photos(src, 10)
    real_file, real_map = folder.segment_file, parallel.map_tasks

    def slow(*a, **k):
        time.sleep(0.3)
        return real_file(*a, **k)

    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address=":0", silence_logs=logging.ERROR)

    def closing(*a, **k):  # closes the cluster once the first image is back
        for n, res in enumerate(real_map(*a, **k)):
            yield res
            if n == 0:
                cluster.close()

    monkeypatch.setattr(folder, "segment_file", slow)
    monkeypatch.setattr(parallel, "map_tasks", closing)
    try:
        address = cluster.scheduler_address
        rc = main(["segment", str(src), str(out), "--model", str(model_dir), "-q",
                   "--scheduler", address])
    finally:
        cluster.close()
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip().splitlines() == [err.strip()]
    assert f"facesegment: error: lost the Dask scheduler at {address}" in err
    assert "finished outputs kept" in err
    rows = _rows(out / "summary.csv")
    assert len(rows) == 10 and rows[0]["status"] == "ok"
    assert any(r["status"] == "not done" and "scheduler was lost" in r["message"] for r in rows)


def test_segment_cli_files_patterns_and_errors(tmp_path, model_dir, capsys):
    src = tmp_path / "photos"
    _photos(src, 3, size=40)
    args = ["--model", str(model_dir), "-q", "--workers", "1", "--detect", "never"]
    # a shell-expanded pattern: several inputs, then the output folder
    files = sorted(str(p) for p in src.glob("*.png"))
    assert main(["segment", *files, str(tmp_path / "o1"), *args]) == 0
    assert sorted(p.name for p in (tmp_path / "o1").glob("*_label.png")) == [
        "p00_label.png", "p01_label.png", "p02_label.png"]
    assert main(["segment", str(src / "p0[01].png"), str(tmp_path / "o2"), *args]) == 0
    assert len(_rows(tmp_path / "o2" / "summary.csv")) == 2
    capsys.readouterr()
    rc = main(["segment", str(src / "*.jpg"), str(tmp_path / "o3"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert f"facesegment: error: {src}/*.jpg: matches no images" in err
    # forgot the output folder: the last photo would be taken for it
    rc = main(["segment", files[0], files[1], *args])
    err = capsys.readouterr().err
    assert rc == 2 and "is a file, not a folder (did the shell expand a pattern?" in err
    assert (src / "p01.png").is_file()


def test_detect_size_defaults_agree():
    """The commands state the library's default without importing it (fast start)."""
    from facesegment.faces import crops, label
    from facesegment.cli import get_parser
    from facesegment.commands import label as label_cmd
    from facesegment.commands import segment as segment_cmd

    assert (label.DETECT_MAX_SIDE == crops.DETECT_MAX_SIDE == label_cmd.DETECT_MAX_SIDE
            == segment_cmd.DETECT_MAX_SIDE)
    args = get_parser().parse_args(["segment", "a", "b", "-m", "m", "--detect-size", "0"])
    assert args.detect_size == 0 and args.inputs == ["a"] and args.output_dir == "b"
    assert get_parser().parse_args(["label", "a", "b"]).detect_size == label.DETECT_MAX_SIDE


# ------------------------------------------------ a model of another window size

def _tabular_model(tmp_path):
    """A valid model folder whose forest has 48 tabular features."""
    from facesegment.forest import AxisAlignedForest
    from facesegment.modelio.model import Model, save_model

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (120, 48), dtype=np.uint8)
    est = AxisAlignedForest(n_estimators=2, random_state=0).fit(X, X[:, 0] % 8)
    return save_model(Model.from_estimator(est), tmp_path / "tab48")


@pytest.mark.parametrize("command", ["evaluate", "figures", "segment"])
def test_model_of_another_window_size_is_one_upfront_error(tmp_path, capsys, command):
    import cv2

    from facesegment.cli import main

    model = _tabular_model(tmp_path)
    data = tmp_path / "faces"
    data.mkdir()
    for i in range(2):
        cv2.imwrite(str(data / f"f{i}.png"), np.full((250, 250, 3), 90, np.uint8))
        cv2.imwrite(str(data / f"f{i}_label.png"), np.zeros((250, 250), np.uint8))
    argv = {"evaluate": ["evaluate", "--model", str(model), "--data", str(data),
                         "--split", "all", "--out", str(tmp_path / "out"), "-q"],
            "figures": ["figures", "--model", str(model), "--data", str(data),
                        "--split", "all", "--out", str(tmp_path / "out"), "-q"],
            "segment": ["segment", str(data), str(tmp_path / "out"), "--model", str(model),
                        "--detect", "never", "-q"]}[command]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert str(model) in err and "48 features" in err and "Traceback" not in err
    assert err.count("\n") == 1
    assert not (tmp_path / "out" / "f0_label.png").exists()
