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
from facesegment.data.imageio import read_image, read_label, write_png_atomic


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
    from facesegment.modelio.model import save_model
    from tests.dense.test_inference import random_model

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
    from facesegment.data.windows import read_windows
    from tests.data.test_extract import _faces

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


# Devices are tested with /dev/null (a character device like /dev/zero, which the
# same fstat check refuses): a test must not read /dev/zero until out of memory
# on code without the check.
def test_named_pipe_is_skipped_not_read(fifo):
    with pytest.raises(DataError, match=r"pipe\.jpg: image file is a named pipe \(FIFO\), "
                                        "not a regular file"):
        _run_bounded(lambda: read_image(fifo / "pipe.jpg"), 10)
    with pytest.raises(DataError, match="is a character device"):
        read_image("/dev/null")


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
    from tests.data.test_extract import _faces

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
    (["--exclude-images", "/dev/null"], "/dev/null: list of image names is a character "
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
    from tests.data.test_extract import _faces

    root = _faces(tmp_path / "faces", n=2)
    assert main(["extract", str(root), "--out", str(tmp_path / "w.h5"), "--exclude",
                 "/dev/null", "-q"]) == 2
    assert "/dev/null: --exclude name list is a character device" in _err_line(capsys)
    big = tmp_path / "names.txt"
    big.write_text("face00\n" * 20)
    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 64)
    assert main(["extract", str(root), "--out", str(tmp_path / "w.h5"), "--exclude",
                 str(big), "-q"]) == 2
    assert "names.txt: --exclude name list is 140 bytes, more than the 64 read" in \
        _err_line(capsys)


def test_wide_pixel_stride_scores_nothing_instead_of_failing(tmp_path, model_dir):
    from facesegment.data.datasets import find_faces
    from facesegment.evaluation.scoring import evaluate
    from facesegment.models import load_model
    from tests.data.test_extract import _faces

    recs = find_faces(_faces(tmp_path / "faces", n=1))
    res = evaluate(load_model(model_dir), recs, alphas=[1.0], pixel_stride=1000)
    assert res["n_pixels"] == 0
    with pytest.raises(ValueError, match="pixel_stride=1001 must be <= 1000"):
        evaluate(load_model(model_dir), recs, alphas=[1.0], pixel_stride=1001)


def test_constraints_table_has_upper_bounds():
    from facesegment.forest import AxisAlignedForest, RandomFernsForest
    from facesegment.forest.params import validate_params

    for params, words in (({"n_estimators": 10 ** 9}, "<= 10,000"),
                          ({"max_depth": 0}, "max_depth=0"),
                          ({"random_state": 2 ** 70}, "4,294,967,295"),
                          ({"max_samples": 10 ** 12}, "2,147,483,647")):
        with pytest.raises(ValueError, match=words):
            validate_params(AxisAlignedForest, params)
    with pytest.raises(ValueError, match="depth=40"):
        validate_params(RandomFernsForest, {"depth": 40})
    assert validate_params(AxisAlignedForest, {"n_estimators": 10_000}) == {
        "n_estimators": 10_000}


# ------------------------------------------------------------------ disks

def _dead_pid():
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_a_killed_run_are_removed(tmp_path):
    """A run killed by SIGKILL leaves NAME.tmp<pid> files and .NAME.tmp-<pid> model
    folders; the next write probe removes those whose process is gone, and
    nothing else."""
    from facesegment.atomic import check_writable_folder

    dead, live = _dead_pid(), os.getpid()
    stale = [f"summary.csv.tmp{dead}", f"a_label.png.tmp{dead}", f"p.npz.tmp{dead}.npz",
             f"w.h5.tmp-{dead}", f".write-test-{dead}"]
    kept = [f"summary.csv.tmp{live}", "notes.tmp5.txt", "x.tmp", f"plain.txt.tmp{dead}.csv",
            f"notes.tmp-{dead}", f"notes.tmp{dead}", f".hidden.tmp-{dead}"]
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    (tmp_path / f".m.tmp-{dead}").mkdir()
    (tmp_path / f".m.tmp-{dead}" / "forest.h5").write_text("x")
    (tmp_path / f"user.tmp{dead}").mkdir()  # a visible folder: not a model temporary
    check_writable_folder(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(kept + [f"user.tmp{dead}"])


def test_train_onto_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, wfile, capsys,
                                                                monkeypatch):
    """HDF5 reports ENOSPC as RuntimeError (and more while its handles go): one
    line, no .m.tmp-PID folder, no traceback."""
    import facesegment.modelio._model_files as mf

    def full(model, path):
        path.write_bytes(b"\0" * 100)
        raise RuntimeError("Can't decrement id ref count (file write failed: time = now\n, "
                           f"filename = '{path}', errno = 28, error message = 'No space "
                           "left on device')")

    monkeypatch.setattr(mf, "write_forest", full)
    out = tmp_path / "models" / "m"
    assert main(["train", "--kind", "axis", "--trees", "2", "--windows", str(wfile),
                 "--out", str(out), "-q", "--workers", "1"]) == 2
    line = _err_line(capsys)
    assert f"{out}: cannot write the model: no space left on the device" in line
    assert os.listdir(tmp_path / "models") == []


def test_nearly_full_disk_is_refused_before_writing(tmp_path, capsys, monkeypatch):
    import shutil

    from facesegment.modelio.model import save_model
    from tests.dense.test_inference import random_model

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=1000))
    with pytest.raises(DataError, match=r"m: not enough free disk space to write the model "
                                        r"\(needs about [\d.]+ MB, 0.0 MB free\)"):
        save_model(random_model(4, kind="axis", n_trees=2, max_depth=3, kinds=("axis",)),
                   tmp_path / "m")
    assert os.listdir(tmp_path) == []


def test_lfw_extraction_onto_a_full_disk_is_one_line(tmp_path, monkeypatch):
    import errno
    import tarfile

    from facesegment.data.download import safe_extract
    from facesegment.errors import DownloadError
    from tests.data.test_download import _tarball

    arc, _ = _tarball(tmp_path)
    real = tarfile.TarFile.extract
    calls = []

    def extract(self, member, *a, **k):
        calls.append(member.name)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, member, *a, **k)

    monkeypatch.setattr(tarfile.TarFile, "extract", extract)
    dest = tmp_path / "dest"
    with pytest.raises(DownloadError, match=r"dest: cannot extract lfw-test\.tgz \(No space "
                                            r"left on device\); free disk space"):
        safe_extract(arc, dest, progress=False)
    assert os.listdir(dest) == []


# ------------------------------------------------------------------ user files

def test_archive_never_replaces_a_folder_it_did_not_extract(tmp_path):
    from facesegment.data.download import safe_extract
    from facesegment.errors import DownloadError
    from tests.data.test_download import _tarball

    arc, _ = _tarball(tmp_path)
    dest = tmp_path / "dest"
    (dest / "lfw_funneled").mkdir(parents=True)
    (dest / "lfw_funneled" / "mine.txt").write_text("my notes")
    with pytest.raises(DownloadError, match=r"lfw_funneled: already exists and was not "
                                            r"extracted by facesegment"):
        safe_extract(arc, dest, progress=False)
    assert (dest / "lfw_funneled" / "mine.txt").read_text() == "my notes"
    assert sorted(os.listdir(dest)) == ["lfw_funneled"]
    # its own earlier extraction is replaced
    other = tmp_path / "other"
    assert safe_extract(arc, other, progress=False) == ["lfw_funneled"]
    assert safe_extract(arc, other, progress=False) == ["lfw_funneled"]


def _labelled(folder, names, shape=(40, 44)):
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        write_png_atomic(folder / f"{n}.png", rng.integers(0, 256, shape + (3,), np.uint8))
        write_png_atomic(folder / f"{n}_label.png", rng.integers(0, 8, shape, np.uint8))
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_aligned_cache_never_replaces_the_data(tmp_path):
    """--aligned-dir pointed at the test folder itself, or at a folder of the user's
    NAME.png files: refused before anything is written."""
    from facesegment.faces.aligned import realign_records
    from facesegment.data.datasets import find_faces

    data = tmp_path / "D" / "test"
    before = _labelled(data, ["a", "b"])
    recs = find_faces(data)
    with pytest.raises(DataError, match=r"test: holds 4 files the re-cropped faces would "
                                        r"replace but that facesegment did not write"):
        realign_records(recs, data, progress=False)
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before
    user = tmp_path / "mine"
    user.mkdir()
    (user / "a.png").write_bytes(b"my picture")
    with pytest.raises(DataError, match=r"e\.g\. a\.png: your data\?"):
        realign_records(recs, user, progress=False)
    assert (user / "a.png").read_bytes() == b"my picture"
    assert sorted(os.listdir(user)) == ["a.png"]


def test_aligned_cache_replaces_only_its_own_files(tmp_path, monkeypatch):
    import facesegment.faces.aligned as al
    from facesegment.data.datasets import find_faces

    recs = find_faces(tmp_path / "D") if _labelled(tmp_path / "D", ["a"]) else None
    monkeypatch.setattr(al, "realign_face", lambda image, label, *a, **kw: (
        np.zeros((250, 250, 3), np.uint8), np.zeros((250, 250), np.uint8), (0.0, 0.0, 1.0)))
    cache = tmp_path / "cache"
    first = al.realign_records(recs, cache, progress=False)
    assert not first[0].missed and (cache / "a.png").is_file()
    (cache / "aligned.json").write_text('{"format": "facesegment-aligned", "key": null, '
                                        '"written": ["a"]}')  # a run stopped half-way
    assert not al.realign_records(recs, cache, progress=False)[0].missed


def test_data_render_overwrite_keeps_human_label_maps(tmp_path, capsys):
    from facesegment.faces.landmarks import write_pts

    rng = np.random.default_rng(0)
    pts = np.stack([np.linspace(10, 50, 68), 30 + 10 * np.sin(np.linspace(0, 6, 68))], 1)
    for n in ("a", "b"):
        write_png_atomic(tmp_path / f"{n}.png", rng.integers(0, 256, (60, 60, 3), np.uint8))
        write_pts(tmp_path / f"{n}.pts", pts)
    human = np.full((60, 60), 3, np.uint8)
    write_png_atomic(tmp_path / "a_label.png", human)
    before = (tmp_path / "a_label.png").read_bytes()
    assert main(["data", "render", str(tmp_path), str(tmp_path), "--overwrite"]) == 0
    out = capsys.readouterr()
    assert (tmp_path / "a_label.png").read_bytes() == before
    assert f"kept: {tmp_path / 'a_label.png'}: not a label map written by `data render`" \
        in out.err and "1 kept" in out.out
    assert (read_label(tmp_path / "b_label.png") > 0).any()
    # its own maps are replaced by --overwrite
    os.utime(tmp_path / "b_label.png", (0, 0))
    assert main(["data", "render", str(tmp_path), str(tmp_path), "--overwrite"]) == 0
    assert os.stat(tmp_path / "b_label.png").st_mtime > 0


def test_pts_far_outside_the_image_warns(tmp_path, capsys):
    from facesegment.faces.landmarks import write_pts

    write_png_atomic(tmp_path / "a.png", np.zeros((60, 60, 3), np.uint8))
    pts = np.stack([np.linspace(10, 50, 68), 30 + 10 * np.sin(np.linspace(0, 6, 68))], 1)
    write_pts(tmp_path / "a.pts", pts * 1e30)
    out = tmp_path / "out"
    assert main(["data", "render", str(tmp_path), str(out)]) == 0
    assert f"warning: {tmp_path / 'a.pts'}: no landmark polygon falls inside the 60x60 " \
           "image, so a_label.png is all background" in capsys.readouterr().err


def test_segment_refuses_an_output_dir_of_ground_truth(tmp_path, model_dir, capsys):
    src = tmp_path / "D"
    before = _labelled(src, ["a", "b"], shape=(250, 250))
    labels = tmp_path / "labels"
    labels.mkdir()
    for n in ("a", "b"):
        (labels / f"{n}_label.png").write_bytes(before[f"{n}_label.png"])
    for out in (labels, ):
        assert main(["segment", str(src), str(out), "--model", str(model_dir), "-q"]) == 2
        assert "holds label maps that `segment` did not write (e.g. a_label.png, ground " \
               "truth?)" in _err_line(capsys)
    assert {p.name: p.read_bytes() for p in labels.iterdir()} == {
        f"{n}_label.png": before[f"{n}_label.png"] for n in ("a", "b")}
    # its own outputs are replaced on a rerun
    out = tmp_path / "out"
    for _ in range(2):
        assert main(["segment", str(src), str(out), "--model", str(model_dir), "-q",
                     "--workers", "1"]) == 0


def test_scratch_pipeline_run_leaves_tracked_pages_alone(tmp_path, monkeypatch):
    from pipelines import report

    docs = tmp_path / "docs"
    docs.mkdir()
    page = "see [x](../reports/runs/faces300w-default/selection.md)\n"
    (docs / "results.md").write_text(page)
    calls = []
    monkeypatch.setattr(report, "write_docs", lambda root: calls.append(root) or [])
    monkeypatch.setattr(report, "collect_timings", lambda run_dir: {}, raising=False)
    import pipelines.timings as timings

    monkeypatch.setattr(timings, "collect_timings", lambda run_dir: {})
    monkeypatch.setattr(timings, "render_timings", lambda run_dir, t: "")
    monkeypatch.setattr(report, "render_run", lambda run_dir: "")
    monkeypatch.setattr(report, "command", lambda run_dir: "make all")
    for name, published in (("scratch", False), ("faces300w-default", True)):
        run = tmp_path / "reports" / "runs" / name
        run.mkdir(parents=True)
        report.write_reports(tmp_path, run)
        assert bool(calls) == published, name
    assert (docs / "results.md").read_text() == page


# ------------------------------------------------------------------ models and signals

def test_bad_sampling_factors_blame_the_model(tmp_path, capsys):
    from facesegment.modelio.model import save_model
    from tests.dense.test_inference import random_model

    model = random_model(4, kind="axis", n_trees=2, max_depth=3, kinds=("axis",))
    model.sampling_factors = np.zeros(model.arrays.n_classes)
    path = save_model(model, tmp_path / "m")
    src = tmp_path / "in"
    _labelled(src, ["a", "b"], shape=(250, 250))
    assert main(["segment", str(src / "a.png"), str(src / "b.png"), str(tmp_path / "out"),
                 "--model", str(path), "-q"]) == 2
    line = _err_line(capsys)
    assert str(path) in line and "sampling" in line and "a.png" not in line


def test_signals_after_the_first_are_ignored_when_run_as_the_program(monkeypatch, capsys):
    import signal
    import sys

    import facesegment.commands.data as data
    from facesegment.errors import Terminated

    def terminated(args):
        raise Terminated()

    monkeypatch.setattr(data, "_splits", terminated)
    monkeypatch.setattr(sys, "argv", ["facesegment", "data", "splits", "."])
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert main() == 143
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        for s, h in before.items():
            signal.signal(s, h)
    assert main(["data", "splits", "."]) == 143  # main(argv) keeps the handlers
    assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]


_SIGNALLED = """
import sys, time
import facesegment.commands.data as data
def slow(args):
    try:
        time.sleep(30)
    finally:
        time.sleep(0.02)
data._splits = slow
from facesegment.cli import main
print("ready", flush=True)
sys.exit(main())
"""


def test_sigterm_sigterm_sigint_is_no_traceback(tmp_path):
    import signal
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
         os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", _SIGNALLED, "data", "splits",
                             str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        for signum in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT):
            proc.send_signal(signum)
            time.sleep(0.05)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert proc.returncode in (143, 130, -signal.SIGTERM), err
