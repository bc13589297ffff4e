"""Download LFW with resume and a SHA-256 check, and extract it safely.

``fetch_lfw(dest)`` downloads ``lfw-funneled.tgz`` (or the un-funneled
``lfw.tgz``) to ``DEST/<file>.part``, resuming with an HTTP ``Range`` request
when a partial file exists, verifies its SHA-256, renames it to
``DEST/<file>``, extracts it into ``DEST`` (refusing members that would land
outside ``DEST``, links and device files) and writes a marker
``DEST/.<file>.complete`` so that a rerun returns at once.

These machines cannot download: ``archive=PATH`` uses a tarball fetched by
hand (it is verified the same way).
"""

import hashlib
import os
import shutil
import socket
import tarfile
import urllib.error
import urllib.request
from ..atomic import replace_into, write_text_atomic
from dataclasses import dataclass
from pathlib import Path

from ..errors import DownloadError
from ..progress import Progress


@dataclass(frozen=True)
class Source:
    """A downloadable archive: URL, file name, SHA-256 and the folder it holds."""

    url: str
    filename: str
    sha256: str
    folder: str


LFW_SOURCES = {
    "funneled": Source("https://ndownloader.figshare.com/files/5976015", "lfw-funneled.tgz",
                       "b47c8422c8cded889dc5a13418c4bc2abbda121092b3533a83306f90d900100a",
                       "lfw_funneled"),
    "unfunneled": Source("https://ndownloader.figshare.com/files/5976018", "lfw.tgz",
                         "055f7d9c632d7370e6fb4afc7468d40f970c34a80d4c6f50ffec63f5a8d536c0",
                         "lfw"),
}

CHUNK = 1 << 20


def sha256_file(path, chunk=CHUNK):
    """Hex SHA-256 of a file, read in ``chunk``-byte blocks.

    Parameters
    ----------
    path : str or path-like
        The file.
    chunk : int, default=CHUNK
        Bytes read at a time (1 MiB).

    Returns
    -------
    str
        64 hex digits.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def verify_sha256(path, expected):
    """Check a file's SHA-256.

    Parameters
    ----------
    path : str or path-like
        The file.
    expected : str
        The expected hex SHA-256 (either case).

    Returns
    -------
    str
        The file's SHA-256 (lower-case hex).

    Raises
    ------
    DownloadError
        Naming the file when its SHA-256 is not ``expected``.
    """
    got = sha256_file(path)
    if got != expected.lower():
        raise DownloadError(
            f"{path}: checksum mismatch (SHA-256 {got}, expected {expected}); the file is "
            "corrupt or not the right archive: delete it and download it again")
    return got


def _offline_message(url, part, nbytes, reason, filename):
    kept = (f"; the partial download ({nbytes} bytes) is kept in {part} and a rerun resumes it"
            if nbytes else "")
    return (f"cannot download {url}: {reason}{kept}. If this machine is offline, download "
            f"{filename} by hand and pass it with --archive PATH")


def download(url, path, *, sha256=None, progress=True, timeout=30.0, chunk=CHUNK):
    """Download ``url`` to ``path``, resuming ``path + '.part'`` if present.

    Parameters
    ----------
    url : str
        http(s) or file URL.
    path : str or Path
        Final file; written as ``path.part`` and renamed when complete and verified.
    sha256 : str, optional
        Expected hex SHA-256; a mismatch removes the partial file and raises.
    timeout : float
        Seconds to wait for the server.

    Returns
    -------
    str : the downloaded file's path.

    Raises
    ------
    DownloadError
        Offline / server error (the partial file is kept for a rerun), or a
        checksum mismatch.
    """
    path = os.fspath(path)
    part = path + ".part"
    if os.path.exists(path) and (sha256 is None or sha256_file(path) == sha256.lower()):
        return path
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    have = os.path.getsize(part) if os.path.exists(part) else 0
    req = urllib.request.Request(url, headers={"User-Agent": "facesegment"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    name = os.path.basename(path)
    try:
        try:
            resp = urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # the partial file is already complete
                resp = None
            else:
                raise
        if resp is not None:
            with resp:
                status = getattr(resp, "status", None) or resp.getcode()
                if have and status != 206:
                    have = 0  # the server ignored the Range header: start again
                length = resp.headers.get("Content-Length")
                total = have + int(length) if length and length.isdigit() else 0
                bar = Progress(max(total, 1), desc=f"download {name}", unit="bytes", enabled=progress)
                bar.n = have
                with bar, open(part, "ab" if have else "wb") as fh:
                    while True:
                        block = resp.read(chunk)
                        if not block:
                            break
                        fh.write(block)
                        have += len(block)
                        bar.update(len(block))
                if total and have < total:
                    raise DownloadError(_offline_message(
                        url, part, have, f"connection closed after {have} of {total} bytes", name))
    except DownloadError:
        raise
    except urllib.error.HTTPError as exc:
        raise DownloadError(_offline_message(url, part, have, f"HTTP {exc.code} {exc.reason}",
                                             name)) from exc
    except (urllib.error.URLError, socket.timeout, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        have = os.path.getsize(part) if os.path.exists(part) else 0
        raise DownloadError(_offline_message(url, part, have, str(reason), name)) from exc
    except OSError as exc:
        raise DownloadError(f"{part}: cannot write the download ({exc.strerror}); "
                            "choose a writable --dest folder") from exc
    if sha256 is not None:
        try:
            verify_sha256(part, sha256)
        except DownloadError as exc:
            os.remove(part)
            raise DownloadError(f"{exc} (the bad download {part} was removed; "
                                "run the command again)") from None
    replace_into(part, path)  # the archive's own name in --dest, checked by the rule
    return path


def _check_member(member, dest):
    target = os.path.realpath(os.path.join(dest, member.name))
    if os.path.isabs(member.name) or not (target == dest or target.startswith(dest + os.sep)):
        return f"member {member.name!r} would be written outside {dest}"
    if member.issym() or member.islnk():
        link = os.path.realpath(os.path.join(os.path.dirname(target), member.linkname))
        if not link.startswith(dest + os.sep):
            return f"link {member.name!r} -> {member.linkname!r} points outside {dest}"
    if member.isdev() or member.isfifo():
        return f"member {member.name!r} is a device or pipe"
    return None


def safe_extract(archive, dest, progress=True, expect=None):
    """Extract a tar archive into ``dest``, refusing anything that escapes it.

    Members are extracted into a temporary folder inside ``dest`` and the
    top-level entries are then renamed into place, so an interrupted
    extraction leaves no half-written folder under its final name.  An archive
    whose top-level entries do not include ``expect`` is refused before
    anything is extracted (nothing is left in ``dest``).  A top-level entry that
    an earlier extraction wrote is replaced; one it did not write is never.

    Parameters
    ----------
    archive : str or path-like
        The tar archive (any compression ``tarfile`` reads).
    dest : str or path-like
        The folder to extract into (created when missing).
    progress : bool, default=True
        Show a progress line.
    expect : str, optional
        A top-level name the archive must hold (e.g. ``"lfw_funneled"``).

    Returns
    -------
    list of str
        The top-level names extracted, sorted.

    Raises
    ------
    DownloadError
        For an unsafe member (an absolute path, a path or link leading outside
        ``dest``, a device or pipe), a missing ``expect``, a top-level entry
        facesegment did not extract in the way, an unreadable archive, or a
        failed write (full disk, permissions).
    """
    archive, dest = os.fspath(archive), os.path.realpath(os.fspath(dest))
    os.makedirs(dest, exist_ok=True)
    tmp = os.path.join(dest, f".extract-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for m in members:
                problem = _check_member(m, dest)
                if problem:
                    raise DownloadError(f"{archive}: unsafe archive: {problem}; "
                                        "it is not the LFW archive, delete it")
            names = {os.path.normpath(m.name).split(os.sep, 1)[0] for m in members} - {"", "."}
            if expect is not None and expect not in names:
                raise DownloadError(f"{archive}: archive holds {sorted(names)[:5]}, not the "
                                    f"folder {expect!r}; nothing was extracted into {dest} "
                                    "(check that it is the LFW archive)")
            _check_tops(names, dest, archive)
            os.makedirs(tmp)
            bar = Progress(len(members), desc=f"extract {os.path.basename(archive)}",
                           unit="files", enabled=progress)
            with bar:
                for m in members:
                    try:
                        tar.extract(m, tmp, set_attrs=False, filter="data")
                    except TypeError:  # Python < 3.11.4: no filters; members were checked above
                        tar.extract(m, tmp, set_attrs=False)
                    bar.update(1)
        tops = sorted(os.listdir(tmp))
        _check_tops(tops, dest, archive)
        for top in tops:
            final = os.path.join(dest, top)
            if os.path.isdir(final) and not os.path.islink(final):
                shutil.rmtree(final)  # an earlier extraction of ours (_check_tops)
            elif os.path.lexists(final):
                os.remove(final)
            replace_into(os.path.join(tmp, top), final)  # _check_tops: new, or ours
            write_text_atomic(_extracted_mark(dest, top), os.path.basename(archive) + "\n")
        return tops
    except (tarfile.TarError, EOFError) as exc:
        raise DownloadError(f"{archive}: not a readable tar archive ({exc}); "
                            "delete it and download it again") from exc
    except OSError as exc:  # a full disk, a quota, permissions: one line, nothing half-done
        raise DownloadError(f"{dest}: cannot extract {os.path.basename(archive)} "
                            f"({exc.strerror or exc}); free disk space or choose another "
                            "--dest, then run the command again") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _extracted_mark(dest, top):
    """The file that records that ``dest/top`` was extracted by :func:`safe_extract`."""
    return os.path.join(dest, f".{top}.extracted")


def _check_tops(tops, dest, archive):
    """Refuse to extract over a top-level file or folder of ``dest`` that an earlier
    extraction did not write (the user's own content is never replaced)."""
    for top in sorted(tops):
        final = os.path.join(dest, top)
        if os.path.lexists(final) and not os.path.isfile(_extracted_mark(dest, top)):
            raise DownloadError(
                f"{final}: already exists and was not extracted by facesegment, so "
                f"{os.path.basename(archive)} is not extracted over it; move it away or "
                "choose another --dest")


def fetch_lfw(dest="data/lfw", *, unfunneled=False, url=None, archive=None, sha256=None,
              progress=True, timeout=30.0, source=None):
    """Download (or take ``archive``), verify and extract LFW into ``dest``.

    Parameters
    ----------
    dest : path
        Folder for the archive and the extracted images.
    unfunneled : bool
        The original ``lfw.tgz`` instead of the funneled (aligned) images.
    url : str, optional
        Another address for the same archive (a mirror).
    archive : path, optional
        A tarball already on disk (no download); it is checksummed too.
    sha256 : str, optional
        Override the expected checksum (for mirrors of other builds and tests).
    source : Source, optional
        Override the whole source description.

    Returns
    -------
    Path : the folder of person folders, e.g. ``data/lfw/lfw_funneled``.
    """
    src = source or LFW_SOURCES["unfunneled" if unfunneled else "funneled"]
    expected = (sha256 or src.sha256).lower()
    dest = Path(dest)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(f"{dest}: cannot create the download folder ({exc.strerror}); "
                            "choose a writable --dest") from exc
    marker = dest / f".{src.filename}.complete"
    folder = dest / src.folder
    if marker.exists() and marker.read_text().strip() == expected and folder.is_dir():
        return folder
    if archive is not None:
        archive = Path(archive)
        if not archive.is_file():
            raise DownloadError(f"{archive}: archive does not exist; check the --archive path")
        verify_sha256(archive, expected)
        tar_path = archive
    else:
        tar_path = Path(download(url or src.url, dest / src.filename, sha256=expected,
                                 progress=progress, timeout=timeout))
    tops = safe_extract(tar_path, dest, progress=progress, expect=src.folder)
    if src.folder not in tops:
        raise DownloadError(f"{tar_path}: archive holds {tops[:5]}, not the folder "
                            f"{src.folder!r}; check that it is {src.filename}")
    write_text_atomic(marker, expected + "\n")
    return folder
