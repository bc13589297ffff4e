"""Atomic outputs: write under a temporary name, then rename.

An interrupted or failed write never leaves a file that looks finished, and a
failure to write is reported as one :class:`~facesegment.errors.DataError` line
naming the path.  :func:`write_json_atomic` is the project's one JSON writer
(NaN written as null, numpy values as Python values) and
:func:`check_writable_folder` its one write probe.

The output-path rule (:func:`check_output_path`, applied by every writer here):
a path is written only when nothing is there, or a regular file that
facesegment wrote is there (recorded with its size and SHA-256 in the hidden
manifest :data:`MANIFEST` of its folder, so reruns replace their own outputs),
or the user allowed it (``--overwrite``, :func:`overwriting`).  A folder, a
symbolic link, a named pipe, a device or a socket is never written over.
"""

import errno
import hashlib
import json
import math
import os
import re
import shutil
import stat
import sys
import threading
from contextlib import contextmanager

import numpy as np

from .errors import DataError


def check_writable_folder(path, problem="output folder cannot be written",
                          fix="choose a writable output folder"):
    """Create the folder ``path`` and check that a file can be written in it.

    A command calls it before any work, so that it fails then rather than after
    the work.  Stale temporaries of killed runs in the folder are removed
    (:func:`remove_stale_temporaries`).

    Parameters
    ----------
    path : str or path-like
        The output folder (created with its parents when missing).
    problem : str, default="output folder cannot be written"
        What the error message says is wrong.
    fix : str, default="choose a writable output folder"
        The fix the error message names.

    Raises
    ------
    DataError
        ``DataError(path, f"{problem} (<reason>)", fix)`` when the folder cannot be
        created or a probe file cannot be written and removed in it.
    """
    path = os.fspath(path)
    try:
        os.makedirs(path, exist_ok=True)
        remove_stale_temporaries(path)
        probe = os.path.join(path, f".write-test-{os.getpid()}")
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise DataError(path, f"{problem} ({exc.strerror or exc})", fix) from exc


#: Temporary names this package writes: ``NAME.EXT.tmp<pid>[.EXT]`` files
#: (:func:`atomic_path`), ``NAME.h5.tmp-<pid>`` files (windows files),
#: ``.NAME.tmp-<pid>`` folders (model folders) and ``.write-test-<pid>``
#: (:func:`check_writable_folder`).
_TEMP_FILE = re.compile(r"(?P<name>.+(?P<own>\.[A-Za-z0-9]+))\.tmp(?P<pid>\d+)(?P<ext>\.[A-Za-z0-9]+)?"
                        r"|.+\.h5\.tmp-(?P<h5>\d+)|\.write-test-(?P<probe>\d+)")
_TEMP_FOLDER = re.compile(r"\..+\.tmp-(?P<pid>\d+)")


def _alive(pid):
    """Whether a process ``pid`` runs (another user's counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def stale_temporary(name, folder=False):
    """The pid in a temporary name this package writes, when that process no longer runs.

    ``NAME.EXT.tmp<pid>.X`` counts only when X is EXT (as :func:`atomic_path`
    writes it).

    Parameters
    ----------
    name : str
        A file or folder name (no directory part).
    folder : bool, default=False
        Whether ``name`` is a folder (``.NAME.tmp-<pid>``) rather than a file.

    Returns
    -------
    int or None
        The pid of the process that wrote the temporary when it is gone; None when
        ``name`` is not such a temporary or its process still runs (a process of
        another user counts as running).
    """
    if folder:
        m = _TEMP_FOLDER.fullmatch(name)
        pid = m and int(m.group("pid"))
    else:
        m = _TEMP_FILE.fullmatch(name)
        if m and m.group("ext") and m.group("ext") != m.group("own"):
            return None
        pid = m and int(m.group("pid") or m.group("h5") or m.group("probe"))
    return pid if m and not _alive(pid) else None


def remove_stale_temporaries(folder):
    """Remove the temporaries that killed runs left in ``folder``.

    Runs killed before they could clean up (SIGKILL, a power cut) leave temporary
    files and folders behind.  Only names of the forms this package writes whose
    process is gone are removed (see :func:`stale_temporary`); those of running
    processes are kept, and subfolders are not searched.

    Parameters
    ----------
    folder : str or path-like
        The folder to clean.

    Returns
    -------
    list of str
        The removed paths.  Errors (an unreadable folder, a file that cannot be
        removed) are ignored: this is best effort.
    """
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        try:
            is_dir = e.is_dir(follow_symlinks=False)
            if stale_temporary(e.name, folder=is_dir) is None:
                continue
            shutil.rmtree(e.path) if is_dir else os.remove(e.path)
            removed.append(e.path)
        except OSError:
            pass
    return removed


def is_disk_full(exc):
    """Whether ``exc`` reports a full disk or an exceeded quota.

    Parameters
    ----------
    exc : BaseException
        An ``OSError`` (``ENOSPC``, ``EDQUOT``) or h5py's ``RuntimeError``, whose
        message is searched for the same conditions.

    Returns
    -------
    bool
    """
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return "No space left on device" in text or "errno = 28" in text or "Disk quota" in text


def check_free_space(folder, needed, path, what, fix="free disk space or write elsewhere"):
    """Refuse an output before it is written when its file system lacks space.

    HDF5 does not fail cleanly on a full disk, so an output is refused up front
    rather than failing half-way.

    Parameters
    ----------
    folder : str or path-like
        A folder on the file system that receives the output.
    needed : int
        Bytes the output needs.
    path : str or path-like
        The output, named in the message.
    what : str
        What the output is, for the message.
    fix : str, default="free disk space or write elsewhere"
        The fix the message names.

    Raises
    ------
    DataError
        One line naming ``path`` when fewer than ``needed`` bytes are free.  When
        the free space cannot be read, nothing is checked.
    """
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < needed:
        raise DataError(path, f"not enough free disk space to write {what} (needs about "
                        f"{needed / 1e6:.1f} MB, {free / 1e6:.1f} MB free)", fix)


@contextmanager
def full_disk_is_one_line(path, what, fix="free disk space or write elsewhere", cleanup=()):
    """Context manager: within the block a full disk becomes one :class:`DataError` line.

    A full disk (``ENOSPC``, ``EDQUOT``, or h5py's ``RuntimeError`` about one)
    becomes ``DataError(path, "cannot write <what>: no space left ...")``; other
    errors propagate unchanged.  The messages h5py prints while it drops its file
    handles are kept off stderr.

    Parameters
    ----------
    path : str or path-like
        The output, named in the message.
    what : str
        What the output is, for the message.
    fix : str, default="free disk space or write elsewhere"
        The fix the message names.
    cleanup : iterable of str or path-like, default=()
        Files or folders removed on any failure within the block.

    Yields
    ------
    None

    Raises
    ------
    DataError
        When the block fails on a full disk.
    """
    hook = sys.unraisablehook
    try:
        sys.unraisablehook = lambda unraisable: None
        yield
    except BaseException as exc:
        for p in cleanup:
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else _remove(p)
        if isinstance(exc, (OSError, RuntimeError)) and is_disk_full(exc):
            raise DataError(path, f"cannot write {what}: no space left on the device",
                            fix) from None
        raise
    finally:
        import gc

        gc.collect()  # h5py's handles of a failed write go now, while the hook is quiet
        sys.unraisablehook = hook


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass

# --------------------------------------------------------------- output-path rule

#: The hidden file, one per output folder, that records the outputs facesegment
#: wrote there: one JSON line ``[name, size, sha256]`` per write (the last wins).
MANIFEST = ".facesegment-outputs"
#: Bytes of a manifest read at most; a longer one is compacted when written.
MAX_MANIFEST_BYTES = 32 << 20
#: The fix named when a user's file is in the way.
OVERWRITE_FIX = "choose another path, move the file away, or pass --overwrite to replace it"

_OVERWRITE = {"depth": 0}
_LOCK = threading.Lock()
_KIND_NAMES = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
               (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


@contextmanager
def overwriting(allow=True):
    """Context manager: the writers may replace regular files facesegment did not write.

    Within the block (all threads of the process) :func:`check_output_path`
    allows them (``--overwrite``).  Folders, symbolic links, pipes, devices and
    sockets are never replaced.

    Parameters
    ----------
    allow : bool, default=True
        Whether to allow overwriting; False makes the block change nothing.

    Yields
    ------
    None
    """
    with _LOCK:
        _OVERWRITE["depth"] += 1 if allow else 0
    try:
        yield
    finally:
        with _LOCK:
            _OVERWRITE["depth"] -= 1 if allow else 0


def _sha256_file(path):
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)
    finally:
        os.close(fd)


def _read_manifest(folder):
    """``{name: (size, sha256)}`` recorded in ``folder``'s manifest ({} if none)."""
    path = os.path.join(folder, MANIFEST)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        _flock(fd, shared=True)
        data = b""
        while len(data) <= MAX_MANIFEST_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            data += chunk
    except OSError:
        return {}
    finally:
        os.close(fd)
    return _parse_manifest(data[:MAX_MANIFEST_BYTES])


def _parse_manifest(data):
    entries = {}
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            name, size, digest = json.loads(line)
        except (ValueError, TypeError):
            continue  # a torn or foreign line: it records nothing
        if isinstance(name, str) and isinstance(size, int) and isinstance(digest, str):
            entries[name] = (size, digest)
    return entries


def _flock(fd, shared=False):
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return
    fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)


def _record(path, size, digest):
    """Add ``path`` (written by facesegment, ``size`` bytes, ``digest``) to its
    folder's manifest; best effort (an unwritable manifest only means that a
    rerun asks for ``--overwrite``)."""
    folder, name = os.path.split(os.path.abspath(path))
    line = (json.dumps([name, size, digest]) + "\n").encode("utf-8", "surrogateescape")
    try:
        fd = os.open(os.path.join(folder, MANIFEST), os.O_RDWR | os.O_APPEND | os.O_CREAT
                     | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        _flock(fd)
        size = os.fstat(fd).st_size
        if size + len(line) > MAX_MANIFEST_BYTES // 2:
            _compact(fd)
        elif size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # after a torn line (a process killed mid-write)
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)


def _compact(fd):
    """Rewrite a long manifest (held under an exclusive lock) with one line per name."""
    data = b""
    os.lseek(fd, 0, os.SEEK_SET)
    with open(os.dup(fd), "rb") as fh:
        data = fh.read(MAX_MANIFEST_BYTES)
    entries = _parse_manifest(data)
    text = "".join(json.dumps([n, s, d]) + "\n" for n, (s, d) in entries.items())
    os.ftruncate(fd, 0)
    os.write(fd, text.encode("utf-8", "surrogateescape"))


def written_by_facesegment(path):
    """Whether ``path`` is a regular file that facesegment wrote.

    Its size and SHA-256 must be those recorded when facesegment wrote it (in
    its folder's :data:`MANIFEST`).

    Parameters
    ----------
    path : str or path-like
        The file to test (a symbolic link is never one).

    Returns
    -------
    bool
    """
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    folder, name = os.path.split(os.path.abspath(path))
    entry = _read_manifest(folder).get(name)
    if entry is None or entry[0] != st.st_size:
        return False
    try:
        return _sha256_file(path) == entry[1]
    except OSError:
        return False


def check_output_path(path, what="output", fix=OVERWRITE_FIX, overwrite=None, ours=None):
    """Apply the output-path rule to ``path`` before anything is written to it.

    Parameters
    ----------
    path : str or path-like
        The file about to be written.
    what : str
        What the file is, for the message.
    fix : str
        The fix named when a regular file that facesegment did not write is there.
    overwrite : bool, optional
        Whether such a file may be replaced; None: only inside :func:`overwriting`.
    ours : callable, optional
        ``ours(path)`` tells whether a regular file is one facesegment wrote by
        its content (a known header), besides the manifest.

    Raises
    ------
    DataError
        One line naming ``path``: it is a folder, a symbolic link, a named pipe, a
        device or a socket (never written over), or a regular file facesegment
        did not write (without ``overwrite``).
    """
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except OSError:  # nothing there (or no way there: the write reports it)
        return
    for test, kind in _KIND_NAMES:
        if test(st.st_mode):
            raise DataError(path, f"is {kind}; facesegment never writes its {what} over one",
                            "give the path of a new file or of a file facesegment wrote")
    if not stat.S_ISREG(st.st_mode):  # pragma: no cover - every kind is named above
        raise DataError(path, "is not a regular file; it is not written over", fix)
    allowed = _OVERWRITE["depth"] > 0 if overwrite is None else overwrite
    if allowed or written_by_facesegment(path) or (ours is not None and ours(path)):
        return
    raise DataError(path, f"exists and was not written by facesegment, so it is not "
                    f"replaced ({what})", fix)


@contextmanager
def atomic_path(path, suffix="", what="output", fix="choose a writable output folder",
                ours=None):
    """Yield a temporary path next to ``path``; rename it to ``path`` on success.

    The output-path rule (:func:`check_output_path`) is applied first and again
    just before the rename; the file written is then recorded in its folder's
    :data:`MANIFEST`, so that a rerun may replace it.  The temporary file is
    removed if the block raises.

    Parameters
    ----------
    path : str or path-like
        The final output file (its folder is created when missing).
    suffix : str, default=""
        Appended to the temporary name (e.g. ``".png"`` for writers that pick the
        format from the extension).
    what : str, default="output"
        What the file is, for messages.
    fix : str, default="choose a writable output folder"
        The fix named when writing fails.
    ours : callable, optional
        Passed to :func:`check_output_path`: ``ours(path)`` tells whether an
        existing file is one facesegment wrote by its content.

    Yields
    ------
    str
        The temporary path to write (``f"{path}.tmp{pid}{suffix}"``).

    Raises
    ------
    DataError
        When the output-path rule refuses ``path``, or as
        ``DataError(path, "cannot write <what>: ...", fix)`` for an ``OSError``
        from the block or the rename.
    """
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}{suffix}"
    check_output_path(path, what, ours=ours)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        if os.path.islink(tmp):  # a link planted under the temporary name is not followed
            os.remove(tmp)
        yield tmp
        check_output_path(path, what, ours=ours)
        digest = _sha256_file(tmp)
        size = os.lstat(tmp).st_size
        os.replace(tmp, path)
        if digest is not None:
            _record(path, size, digest)
    except OSError as exc:
        raise DataError(path, f"cannot write {what}: {exc.strerror or exc}", fix) from exc
    finally:
        if os.path.isfile(tmp):
            os.remove(tmp)


def replace_into(tmp, path, what="output", ours=None):
    """Rename the finished temporary file or folder ``tmp`` to ``path``.

    For a file the output-path rule (:func:`check_output_path`) is applied and
    the file is recorded in its folder's :data:`MANIFEST`.  A folder is only
    moved to a path that does not exist or that the caller has just moved away
    or removed after its own check (model folders, extracted archives).

    Parameters
    ----------
    tmp : str or path-like
        The finished temporary file or folder.
    path : str or path-like
        Its final path.
    what : str, default="output"
        What it is, for messages.
    ours : callable, optional
        Passed to :func:`check_output_path` (files only).

    Raises
    ------
    DataError
        When ``tmp`` is a folder and something is at ``path``, or when the
        output-path rule refuses ``path`` for a file.
    """
    tmp, path = os.fspath(tmp), os.fspath(path)
    if os.path.isdir(tmp) and not os.path.islink(tmp):
        if os.path.lexists(path):
            raise DataError(path, f"is in the way of the {what}; it is not replaced",
                            "move it away and run the command again")
        os.replace(tmp, path)
        return
    check_output_path(path, what, ours=ours)
    digest, size = _sha256_file(tmp), os.lstat(tmp).st_size
    os.replace(tmp, path)
    if digest is not None:
        _record(path, size, digest)


def swap_folder(tmp, path):
    """Rename the finished folder ``tmp`` to ``path``, replacing the folder there.

    The caller has checked that the folder at ``path`` may be replaced (a model
    this package wrote): it is moved aside first, put back if the rename fails,
    and removed after it succeeds.

    Parameters
    ----------
    tmp : str or path-like
        The finished temporary folder.
    path : str or path-like
        Its final path (may or may not exist).
    """
    tmp, path = os.fspath(tmp), os.fspath(path)
    old = None
    if os.path.lexists(path):
        head, name = os.path.split(path)
        old = os.path.join(head, f".{name}.old-{os.getpid()}")
        os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        if old is not None:  # put the previous one back
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_bytes_atomic(path, data, **kw):
    """Write ``data`` (bytes) to ``path`` atomically.

    Parameters
    ----------
    path : str or path-like
        The output file.
    data : bytes
        Its content.
    **kw
        Those of :func:`atomic_path` (``suffix``, ``what``, ``fix``, ``ours``).

    Raises
    ------
    DataError
        As :func:`atomic_path`.
    """
    with atomic_path(path, **kw) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


def write_text_atomic(path, text, **kw):
    """Write ``text`` (UTF-8) to ``path`` atomically.

    Parameters
    ----------
    path : str or path-like
        The output file.
    text : str
        Its content (newlines written as given).
    **kw
        Those of :func:`atomic_path` (``suffix``, ``what``, ``fix``, ``ours``).

    Raises
    ------
    DataError
        As :func:`atomic_path`.
    """
    with atomic_path(path, **kw) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


def to_jsonable(obj):
    """``obj`` with its values converted to those JSON can hold, recursively.

    Numpy scalars and arrays become Python values, NaN becomes None and paths
    become strings; tuples become lists, dict keys are kept (numpy scalar keys
    become Python scalars).

    Parameters
    ----------
    obj : object
        A value made of dicts, lists, tuples, numpy values, floats, paths and
        other values (returned unchanged).

    Returns
    -------
    object
        The converted value (a new container for each dict, list or tuple).
    """
    if isinstance(obj, dict):
        return {(k.item() if isinstance(k, np.generic) else k): to_jsonable(v)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float):
        return None if math.isnan(obj) else obj
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return obj


def write_json_atomic(path, obj, *, indent=1, sort_keys=False, **kw):
    """Write ``obj`` as indented JSON to ``path`` atomically.

    ``obj`` goes through :func:`to_jsonable` first (NaN is written as null);
    the text ends with a newline.

    Parameters
    ----------
    path : str or path-like
        The output file.
    obj : object
        The value to write.
    indent : int, default=1
        Indentation of ``json.dumps``.
    sort_keys : bool, default=False
        Whether dict keys are sorted.
    **kw
        Those of :func:`atomic_path` (``what``, ``fix``, ``ours``).

    Raises
    ------
    DataError
        As :func:`atomic_path`.
    """
    text = json.dumps(to_jsonable(obj), indent=indent, sort_keys=sort_keys)
    write_text_atomic(path, text + "\n", **kw)
