"""LFW download: checksum, resume with Range, offline message, safe extraction, marker."""

import hashlib
import http.server
import io
import os
import tarfile
import threading

import numpy as np
import pytest

from facesegment.data.download import (LFW_SOURCES, Source, download, fetch_lfw, safe_extract,
                                  sha256_file)
from facesegment.errors import DownloadError
from facesegment.data.imageio import read_image, write_png_atomic


def _tarball(tmp_path, folder="lfw_funneled", extra=None):
    """A tiny LFW-like tarball; returns (path, sha256)."""
    src = tmp_path / "src"
    for person in ("Ann_Bee", "Cid_Dee"):
        for k in (1, 2):
            img = np.full((6, 5, 3), 40 * k, np.uint8)
            write_png_atomic(src / folder / person / f"{person}_{k:04d}.jpg", img)
    path = tmp_path / "lfw-test.tgz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(src / folder, arcname=folder)
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path, sha256_file(path)


def _source(sha, url="http://127.0.0.1:1/none"):
    return Source(url, "lfw-test.tgz", sha, "lfw_funneled")


def test_published_sources():
    assert LFW_SOURCES["funneled"].url.endswith("/5976015")
    assert LFW_SOURCES["funneled"].sha256.startswith("b47c8422")
    assert LFW_SOURCES["unfunneled"].filename == "lfw.tgz"
    assert LFW_SOURCES["unfunneled"].sha256.startswith("055f7d9c")


def test_fetch_from_archive_and_marker(tmp_path):
    arc, sha = _tarball(tmp_path)
    dest = tmp_path / "data" / "lfw"
    folder = fetch_lfw(dest, archive=arc, source=_source(sha), progress=False)
    assert folder == dest / "lfw_funneled"
    imgs = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.jpg"))
    assert imgs == ["Ann_Bee/Ann_Bee_0001.jpg", "Ann_Bee/Ann_Bee_0002.jpg",
                    "Cid_Dee/Cid_Dee_0001.jpg", "Cid_Dee/Cid_Dee_0002.jpg"]
    assert read_image(folder / "Cid_Dee" / "Cid_Dee_0002.jpg")[0, 0, 0] == 80
    assert (dest / ".lfw-test.tgz.complete").read_text().strip() == sha
    # a rerun returns at once, without even needing the archive
    os.remove(arc)
    assert fetch_lfw(dest, archive=arc, source=_source(sha), progress=False) == folder


def test_archive_checksum_mismatch(tmp_path):
    arc, sha = _tarball(tmp_path)
    wrong = "0" * 64
    with pytest.raises(DownloadError, match=rf"lfw-test\.tgz: checksum mismatch \(SHA-256 {sha}, "
                                            rf"expected {wrong}\).*download it again"):
        fetch_lfw(tmp_path / "d", archive=arc, source=_source(wrong), progress=False)
    assert not (tmp_path / "d" / "lfw_funneled").exists()


def test_offline_message(tmp_path):
    with pytest.raises(DownloadError, match=r"cannot download http://127\.0\.0\.1:1/none: .*"
                                            r"download lfw-test\.tgz by hand and pass it with --archive"):
        fetch_lfw(tmp_path / "d", source=_source("0" * 64), progress=False, timeout=5)


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    payload = b""
    served = []
    honour_range = True

    def do_GET(self):  # noqa: N802 - http.server naming
        data = self.payload
        rng = self.headers.get("Range") if self.honour_range else None
        start = int(rng.split("=")[1].split("-")[0]) if rng else 0
        self.served.append(start)
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_download_resumes_partial_file(tmp_path, server):
    arc, sha = _tarball(tmp_path)
    data = arc.read_bytes()
    _RangeHandler.payload, _RangeHandler.served, _RangeHandler.honour_range = data, [], True
    url = f"http://127.0.0.1:{server.server_address[1]}/lfw-test.tgz"
    dest = tmp_path / "dl" / "lfw-test.tgz"
    dest.parent.mkdir()
    half = len(data) // 2
    (tmp_path / "dl" / "lfw-test.tgz.part").write_bytes(data[:half])
    out = download(url, dest, sha256=sha, progress=False)
    assert _RangeHandler.served == [half]
    assert hashlib.sha256(open(out, "rb").read()).hexdigest() == sha
    assert not os.path.exists(str(dest) + ".part")
    # the whole flow through fetch_lfw with a URL
    folder = fetch_lfw(tmp_path / "dl2", source=_source(sha, url), progress=False)
    assert len(list(folder.rglob("*.jpg"))) == 4


def test_download_checksum_mismatch_removes_part(tmp_path, server):
    _RangeHandler.payload, _RangeHandler.served = b"not the archive you want", []
    url = f"http://127.0.0.1:{server.server_address[1]}/x.tgz"
    dest = tmp_path / "x.tgz"
    with pytest.raises(DownloadError, match=r"x\.tgz\.part: checksum mismatch .*was removed"):
        download(url, dest, sha256="1" * 64, progress=False)
    assert not os.path.exists(str(dest) + ".part") and not dest.exists()


def test_unsafe_member_rejected(tmp_path):
    arc, _ = _tarball(tmp_path, extra={"../evil.txt": b"x"})
    with pytest.raises(DownloadError, match=r"unsafe archive: member '\.\./evil\.txt' would be "
                                            r"written outside"):
        safe_extract(arc, tmp_path / "dest", progress=False)
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "dest" / "lfw_funneled").exists()


def test_not_a_tarball(tmp_path):
    bad = tmp_path / "bad.tgz"
    bad.write_bytes(b"garbage" * 10)
    with pytest.raises(DownloadError, match=r"bad\.tgz: not a readable tar archive"):
        safe_extract(bad, tmp_path / "dest", progress=False)


def test_unwritable_dest(tmp_path):
    arc, sha = _tarball(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("file")
    with pytest.raises(DownloadError, match=r"blocker/lfw: cannot create the download folder.*--dest"):
        fetch_lfw(blocker / "lfw", archive=arc, source=_source(sha), progress=False)


def test_server_ignoring_range_restarts(tmp_path, server):
    arc, sha = _tarball(tmp_path)
    data = arc.read_bytes()
    _RangeHandler.payload, _RangeHandler.served, _RangeHandler.honour_range = data, [], False
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/lfw-test.tgz"
        dest = tmp_path / "dl" / "lfw-test.tgz"
        dest.parent.mkdir()
        (tmp_path / "dl" / "lfw-test.tgz.part").write_bytes(b"stale bytes")
        download(url, dest, sha256=sha, progress=False)
        assert dest.read_bytes() == data
        assert _RangeHandler.served == [0]
    finally:
        _RangeHandler.honour_range = True
