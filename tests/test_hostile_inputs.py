"""Hostile inputs: resource limits, odd files and names, full disks, lost Dask
workers, and the user's own files (docs/reliability.md, "Resource limits and
user files").  Tiny inputs; every case is one readable line, never a hang,
a traceback or a lost file."""

import logging
import os
import socket
import threading
import time

import numpy as np
import pytest

from facesegment.cli import main
from facesegment.errors import DataError, FaceSegmentError, WorkersLostError
from facesegment.imageio import read_image, read_label, write_png_atomic


def _err_line(capsys):
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("facesegment: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ------------------------------------------------------------------ Dask

def _square(x):
    return x * x


def _slow_square(x):
    time.sleep(0.3)
    return x * x


@pytest.mark.parametrize("address", ["not a url", "tcp://", "tcp://host:notaport",
                                     "foo://bar:1", "tcp://127.0.0.1:99999"])
def test_malformed_scheduler_address_is_one_line(address):
    from facesegment.parallel import map_tasks

    with pytest.raises(FaceSegmentError, match="is not a Dask scheduler address"):
        list(map_tasks(_square, range(3), scheduler=address, progress=False))


def test_scheduler_that_never_answers_times_out(monkeypatch):
    """A local socket that accepts and never says a word: one error line after the
    connection timeout, not a hang."""
    import facesegment.parallel as par

    monkeypatch.setattr(par, "CONNECT_TIMEOUT", 1.0)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns = []

    def accept():
        try:
            while True:
                conns.append(srv.accept()[0])
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    t0 = time.monotonic()
    try:
        with pytest.raises(FaceSegmentError, match="did not answer within"):
            list(par.map_tasks(_square, range(3), scheduler=f"tcp://127.0.0.1:"
                               f"{srv.getsockname()[1]}", progress=False))
    finally:
        srv.close()
        for c in conns:
            c.close()
    assert time.monotonic() - t0 < 30


@pytest.fixture()
def empty_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0",
                                  silence_logs=logging.ERROR) as c:
        yield c


def test_scheduler_without_workers_is_one_line(empty_cluster, monkeypatch):
    import facesegment.parallel as par

    monkeypatch.setattr(par, "WORKER_TIMEOUT", 1.0)
    with pytest.raises(FaceSegmentError, match="has no workers") as exc:
        list(par.map_tasks(_square, range(3), scheduler=empty_cluster.scheduler_address,
                           progress=False))
    assert empty_cluster.scheduler_address in str(exc.value)


def test_losing_every_worker_blames_the_workers(monkeypatch):
    """Both workers retired mid-run: WorkersLostError (not 'lost the scheduler'),
    the results before it stand."""
    distributed = pytest.importorskip("distributed")
    import facesegment.parallel as par

    monkeypatch.setattr(par, "WORKER_TIMEOUT", 1.0)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0",
                                  silence_logs=logging.ERROR) as cluster:
        got = []
        with pytest.raises(WorkersLostError) as exc:
            for _, res in par.map_tasks(_slow_square, range(30), batch=1, progress=False,
                                        scheduler=cluster.scheduler_address):
                got.append(res)
                if len(got) == 1:
                    cluster.scale(0)
        msg = str(exc.value)
        assert "lost every Dask worker" in msg and "scheduler still answers" in msg
        assert "lost the Dask scheduler" not in msg
        assert 1 <= len(got) < 30


# ------------------------------------------------------------------ names

_ODD = os.fsdecode(b"caf\xff")  # a file name the OS allows that is not UTF-8


@pytest.fixture()
def model_dir(tmp_path):
    from facesegment.model import save_model
    from tests.test_inference import random_model

    return save_model(random_model(4, kind="axis", n_trees=2, max_depth=3, kinds=("axis",)),
                      tmp_path / "models" / "axis-2")


def test_non_utf8_name_through_segment(tmp_path, model_dir, capsys):
    import csv

    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    rng = np.random.default_rng(0)
    for name in (_ODD, "plain"):
        write_png_atomic(src / f"{name}.png", rng.integers(0, 256, (250, 250, 3), np.uint8))
    assert main(["segment", str(src), str(out), "--model", str(model_dir), "-q",
                 "--workers", "1"]) == 0
    assert (out / f"{_ODD}_label.png").is_file()
    with open(out / "summary.csv", newline="", encoding="utf-8",
              errors="surrogateescape") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["name"] for r in rows} == {f"{_ODD}.png", "plain.png"}
    assert {r["status"] for r in rows} == {"ok"}
    assert os.fsencode(next(r["output"] for r in rows if r["output"] != "plain")) == b"caf\xff"


def test_non_utf8_name_through_extract(tmp_path):
    from facesegment.windows import read_windows
    from tests.test_extract import _faces

    root = _faces(tmp_path / "faces", n=3)
    os.rename(root / "face01.png", root / f"{_ODD}.png")
    os.rename(root / "face01_label.png", root / f"{_ODD}_label.png")
    out = tmp_path / "w.h5"
    assert main(["extract", str(root), "--out", str(out), "--windows", "80", "-q",
                 "--workers", "1"]) == 0
    sources = read_windows(out, load=False).meta.sources
    assert _ODD in sources and os.fsencode(_ODD) == b"caf\xff"
