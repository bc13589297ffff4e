"""Extraction never loses data: it refuses to replace what is not a windows
file, keeps out of the input tree, cleans up after SIGTERM and dead processes,
reports a full disk in one line, and refuses a class without windows."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import facesegment.data._windows_writer as ww
from facesegment.cli import main
from tests.data.test_extract import _faces

ROOT = Path(__file__).resolve().parents[2]


def test_out_onto_a_label_map_is_refused(tmp_path, capsys):
    """extract DIR --out DIR/some_label.png used to replace the label map (exit 0)."""
    data = _faces(tmp_path / "faces")
    label = data / "face00_label.png"
    before = label.read_bytes()
    rc = main(["extract", str(data), "--out", str(label), "-n", "64", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "is not a windows file" in err and err.count("\n") == 1
    assert label.read_bytes() == before


def test_out_inside_the_data_needs_asking(tmp_path, capsys):
    data = _faces(tmp_path / "faces")
    out = data / "windows.h5"
    rc = main(["extract", str(data), "--out", str(out), "-n", "64", "-q"])
    assert rc == 2 and "inside the input folder" in capsys.readouterr().err
    assert not out.exists()
    assert main(["extract", str(data), "--out", str(out), "-n", "64", "-q",
                 "--out-inside-data"]) == 0
    # a windows file it wrote may be replaced
    assert main(["extract", str(data), "--out", str(out), "-n", "64", "-q",
                 "--out-inside-data", "--seed", "3"]) == 0


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path):
    data = _faces(tmp_path / "faces")
    out = tmp_path / "w.h5"
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # a pid that no longer runs
    dead = tmp_path / f"w.h5.tmp-{proc.pid}"
    live = tmp_path / f"w.h5.tmp-{os.getppid()}"
    dead.write_bytes(b"x" * 1000)
    live.write_bytes(b"y")
    assert main(["extract", str(data), "--out", str(out), "-n", "64", "-q"]) == 0
    assert not dead.exists() and live.exists() and out.exists()


def test_full_disk_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    data = _faces(tmp_path / "faces")

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ww.WindowsWriter, "write", full)
    rc = main(["extract", str(data), "--out", str(tmp_path / "w.h5"), "-n", "64", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "No space left on device" in err and "Traceback" not in err
    assert err.count("\n") == 1 and "free some disk space" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["faces"]


def test_fewer_windows_than_classes_is_refused(tmp_path, capsys):
    """-n 7 used to write a file with a class of 0 windows and sampling factor 0."""
    data = _faces(tmp_path / "faces")
    with pytest.raises(SystemExit):
        main(["extract", str(data), "--out", str(tmp_path / "w.h5"), "-n", "7"])
    assert "at least one window per class" in capsys.readouterr().err
    from facesegment.data.extract import extract_windows
    from facesegment.data.datasets import find_faces

    with pytest.raises(ValueError, match="at least one window per class"):
        extract_windows(find_faces(data), tmp_path / "w.h5", n_windows=7)


@pytest.mark.slow
def test_sigterm_removes_the_partial_file(tmp_path):
    """extract stopped with SIGTERM used to leave an OUT.tmp-PID behind."""
    data = _faces(tmp_path / "faces", n=60, h=200, w=200)
    out = tmp_path / "w.h5"
    proc = subprocess.Popen([sys.executable, "-m", "facesegment", "extract", str(data),
                             "--out", str(out), "-n", "400000", "--workers", "1"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob("w.h5.tmp-*")):
        time.sleep(0.05)
    assert list(tmp_path.glob("w.h5.tmp-*")), "the extraction never started writing"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err
    assert not list(tmp_path.glob("w.h5*"))


@pytest.mark.parametrize("where", ["open", "datasets"])
def test_a_signal_while_the_writer_is_created_leaves_no_temporary(tmp_path, monkeypatch, where):
    """SIGTERM (raised as an exception) just after the temporary file appeared, before
    the `with` block owned the writer, used to leave OUT.tmp-PID behind (seen in CI)."""
    import h5py

    from facesegment.data import _windows_writer as ww

    if where == "open":
        real = h5py.File

        def opened_then_interrupted(*a, **k):
            real(*a, **k).close()            # the file exists on disk ...
            raise KeyboardInterrupt          # ... and the signal lands before it returns
        monkeypatch.setattr(ww.h5py, "File", opened_then_interrupted)
    else:
        def interrupted(self, *a):
            raise KeyboardInterrupt
        monkeypatch.setattr(ww.WindowsWriter, "_create_datasets", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ww.WindowsWriter(tmp_path / "w.h5", 10)
    assert not list(tmp_path.iterdir())
