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


# ------------------------------------------------------------------ images

def _tiny_bomb(path, side=40000):
    """A PNG whose header declares side x side grey pixels (the bytes of a bomb's
    header; its data is cut short, so nothing big is ever written)."""
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    body = zlib.compress(b"\0" * (side + 1) * 64, 9)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body)
                     + chunk(b"IEND", b""))


def test_decompression_bomb_is_refused_before_decoding(tmp_path):
    _tiny_bomb(tmp_path / "bomb.png")
    with pytest.raises(DataError, match=r"bomb\.png: image file declares 40000x40000 .*"
                                        r"more than the limit"):
        read_image(tmp_path / "bomb.png")
    _tiny_bomb(tmp_path / "bomb_label.png")
    with pytest.raises(DataError, match="40000x40000"):
        read_label(tmp_path / "bomb_label.png")


def test_pixel_limit_decoded_size_and_environment(tmp_path, monkeypatch):
    """The limit holds for formats whose header is not parsed too (checked after
    decoding) and FACESEGMENT_MAX_IMAGE_PIXELS moves it."""
    import cv2

    img = np.zeros((30, 40, 3), np.uint8)
    ok, buf = cv2.imencode(".tiff", img)
    (tmp_path / "a.tif").write_bytes(buf.tobytes())
    write_png_atomic(tmp_path / "b.png", img)
    monkeypatch.setenv("FACESEGMENT_MAX_IMAGE_PIXELS", "1000")
    with pytest.raises(DataError, match=r"a\.tif: decodes to 40x30 pixels, more than"):
        read_image(tmp_path / "a.tif")
    with pytest.raises(DataError, match=r"b\.png: image file declares 40x30 = 1,200 pixels"):
        read_image(tmp_path / "b.png")
    monkeypatch.setenv("FACESEGMENT_MAX_IMAGE_PIXELS", "1200")
    assert read_image(tmp_path / "b.png").shape == (30, 40, 3)


def test_header_sizes():
    import cv2

    from facesegment.limits import image_size

    img = np.zeros((7, 9, 3), np.uint8)
    for ext in (".png", ".jpg", ".bmp"):
        assert image_size(cv2.imencode(ext, img)[1]) == (9, 7), ext
    assert image_size(b"not an image") is None


def _run_bounded(func, seconds=120):
    """func() in a daemon thread; fails (instead of hanging the suite) past ``seconds``."""
    out = {}

    def target():
        try:
            out["value"] = func()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"still running after {seconds} s (a hang)"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.fixture()
def fifo(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    folder = tmp_path / "photos"
    folder.mkdir()
    os.mkfifo(folder / "pipe.jpg")
    return folder


def test_named_pipe_is_skipped_not_read(fifo):
    with pytest.raises(DataError, match=r"pipe\.jpg: image file is a named pipe \(FIFO\), "
                                        "not a regular file"):
        _run_bounded(lambda: read_image(fifo / "pipe.jpg"), 10)
    with pytest.raises(DataError, match="is a character device"):
        read_image("/dev/zero")


def test_named_pipe_in_segment_and_data_check(fifo, model_dir, capsys):
    import csv

    rng = np.random.default_rng(1)
    write_png_atomic(fifo / "face.png", rng.integers(0, 256, (250, 250, 3), np.uint8))
    write_png_atomic(fifo / "face_label.png", np.zeros((250, 250), np.uint8))
    out = fifo.parent / "out"
    status = _run_bounded(lambda: main(["segment", str(fifo), str(out), "--model",
                                        str(model_dir), "-q", "--workers", "1"]))
    assert status == 1
    err = capsys.readouterr().err
    assert "skipped pipe.jpg: unreadable:" in err and "named pipe" in err
    with open(out / "summary.csv", newline="") as fh:
        rows = {r["name"]: r["status"] for r in csv.DictReader(fh)}
    assert rows == {"face.png": "ok", "pipe.jpg": "unreadable"}
    assert _run_bounded(lambda: main(["data", "check", str(fifo), "--quiet"])) == 1
    err = capsys.readouterr().err
    assert "facesegment: bad:" in err and "pipe.jpg: image file is a named pipe" in err


def test_bomb_skipped_in_segment_and_extract(tmp_path, model_dir, capsys, monkeypatch):
    """An image over the pixel limit is one line and skipped; the rest is done."""
    from tests.test_extract import _faces

    root = _faces(tmp_path / "faces", n=3)
    _tiny_bomb(root / "bomb.png")
    write_png_atomic(root / "bomb_label.png", np.zeros((40, 44), np.uint8))
    assert main(["extract", str(root), "--out", str(tmp_path / "w.h5"), "--windows", "80",
                 "-q", "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert "facesegment: skipped:" in err and "bomb.png: image file declares 40000x40000" in err
    assert (tmp_path / "w.h5").is_file()
    out = tmp_path / "seg"
    assert main(["segment", str(root / "bomb.png"), str(root / "face00.png"), str(out),
                 "--model", str(model_dir), "-q", "--workers", "1", "--detect",
                 "never"]) == 1
    err = capsys.readouterr().err
    assert "skipped bomb.png: unreadable:" in err and "40000x40000" in err
    assert (out / "face00_label.png").is_file()


# ------------------------------------------------------------------ limits

@pytest.fixture(scope="module")
def wfile(tmp_path_factory):
    from tests.test_cli_train import _windows_file

    p = tmp_path_factory.mktemp("w") / "train.h5"
    _windows_file(p)
    return p


@pytest.mark.parametrize("argv, words", [
    (["--trees", "1000000000"], "--trees 1000000000: out of range for --kind axis"),
    (["--max-samples", "100000000000"], "--max-samples 100000000000: out of range"),
    (["--kind", "ferns", "--depth", "60"], "--depth 60: out of range for --kind ferns"),
    (["--kind", "two-probe", "--pairs", "10000000000"], "--pairs 10000000000: out of range"),
    (["--exclude-images", "/dev/zero"], "/dev/zero: list of image names is a character "
                                        "device, not a regular file"),
])
def test_train_limits_are_one_line(tmp_path, wfile, capsys, argv, words):
    kind = [] if "--kind" in argv else ["--kind", "axis"]
    assert main(["train", *kind, "--windows", str(wfile), "--out", str(tmp_path / "m"),
                 "-q", *argv]) == 2
    assert words in _err_line(capsys)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("argv, words", [
    (["train", "--kind", "axis", "--windows", "w.h5", "--out", "m", "--seed", str(2 ** 70)],
     "argument --seed: expected a seed"),
    (["extract", "d", "--out", "w.h5", "--windows", str(10 ** 12)],
     "argument --windows/-n: expected an integer >= 8"),
    (["extract", "d", "--out", "w.h5", "--seed", "-1"], "argument --seed"),
    (["extract", "d", "--out", "w.h5", "--window", "100001"], "argument --window"),
    (["evaluate", "--model", "m", "--data", "d", "--pixel-stride", "1000000000"],
     "argument --pixel-stride: expected a positive integer, at most 1,000"),
    (["segment", "a", "b", "--model", "m", "--workers", "100000000"], "argument --workers"),
    (["segment", "a", "b", "--model", "m", "--sigma", "-1"],
     "argument --sigma: expected a number >= 0 (sigma, the Gaussian blur"),
    (["evaluate", "--model", "m", "--data", "d", "--beta", "x"],
     "argument --beta: expected a number >= 0 (beta, the exponent of the position prior"),
])
def test_command_line_bounds_are_usage_errors(capsys, argv, words):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert "alpha" not in err.splitlines()[-1] or "--alpha" in words


def test_exclude_list_is_read_with_a_limit(tmp_path, capsys, monkeypatch):
    import facesegment.limits as limits
    from tests.test_extract import _faces

    root = _faces(tmp_path / "faces", n=2)
    assert main(["extract", str(root), "--out", str(tmp_path / "w.h5"), "--exclude",
                 "/dev/zero", "-q"]) == 2
    assert "/dev/zero: --exclude name list is a character device" in _err_line(capsys)
    big = tmp_path / "names.txt"
    big.write_text("face00\n" * 20)
    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 64)
    assert main(["extract", str(root), "--out", str(tmp_path / "w.h5"), "--exclude",
                 str(big), "-q"]) == 2
    assert "names.txt: --exclude name list is 140 bytes, more than the 64 read" in \
        _err_line(capsys)


def test_wide_pixel_stride_scores_nothing_instead_of_failing(tmp_path, model_dir):
    from facesegment.datasets import find_faces
    from facesegment.evaluation import evaluate
    from facesegment.model import load_model
    from tests.test_extract import _faces

    recs = find_faces(_faces(tmp_path / "faces", n=1))
    res = evaluate(load_model(model_dir), recs, alphas=[1.0], pixel_stride=1000)
    assert res["n_pixels"] == 0
    with pytest.raises(ValueError, match="pixel_stride=1001 must be in 1..1000"):
        evaluate(load_model(model_dir), recs, alphas=[1.0], pixel_stride=1001)


def test_constraints_table_has_upper_bounds():
    from facesegment.forest.params import validate_params

    for params, words in (({"n_estimators": 10 ** 9}, "<= 10,000"),
                          ({"max_depth": 0}, "max_depth=0"),
                          ({"random_state": 2 ** 70}, "4,294,967,295"),
                          ({"max_samples": 10 ** 12}, "2,147,483,647")):
        with pytest.raises(ValueError, match=words):
            validate_params("AxisAlignedForest", params)
    with pytest.raises(ValueError, match="depth=40"):
        validate_params("RandomFernsForest", {"depth": 40})
    assert validate_params("AxisAlignedForest", {"n_estimators": 10_000}) == {
        "n_estimators": 10_000}
