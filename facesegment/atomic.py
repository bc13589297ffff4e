"""Atomic outputs: write under a temporary name, then rename.

An interrupted or failed write never leaves a file that looks finished, and a
failure to write is reported as one :class:`~facesegment.errors.DataError` line
naming the path.  :func:`write_json_atomic` is the project's one JSON writer
(NaN written as null, numpy values as Python values) and
:func:`check_writable_folder` its one write probe.
"""

import errno
import json
import math
import os
import re
import shutil
import sys
from contextlib import contextmanager

import numpy as np

from .errors import DataError


def check_writable_folder(path, problem="output folder cannot be written",
                          fix="choose a writable output folder"):
    """Create the folder ``path`` and check that a file can be written in it.

    Raises ``DataError(path, f"{problem} (<reason>)", fix)`` otherwise, so a
    command fails before any work rather than after it.
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
    """The pid in a temporary file (``folder``: folder) name this package writes
    when that process no longer runs, else None.  ``NAME.EXT.tmp<pid>.X``
    counts only when X is EXT (as :func:`atomic_path` writes it)."""
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
    """Remove the temporary files and folders that runs killed before they could
    clean up (SIGKILL, a power cut) left in ``folder`` (not its subfolders).

    Only names of the forms this package writes whose process is gone are
    removed (see :func:`stale_temporary`); those of running processes are
    kept.  Returns the removed paths; errors are ignored (best effort).
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
    """Whether ``exc`` (an OSError, or h5py's RuntimeError) reports a full disk or quota."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return "No space left on device" in text or "errno = 28" in text or "Disk quota" in text


def check_free_space(folder, needed, path, what, fix="free disk space or write elsewhere"):
    """DataError (one line naming ``path``) when the file system of ``folder`` has
    fewer than ``needed`` bytes free: an output is refused before it is written
    rather than failing half-way (HDF5 does not fail cleanly on a full disk)."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < needed:
        raise DataError(path, f"not enough free disk space to write {what} (needs about "
                        f"{needed / 1e6:.1f} MB, {free / 1e6:.1f} MB free)", fix)


@contextmanager
def full_disk_is_one_line(path, what, fix="free disk space or write elsewhere", cleanup=()):
    """Within the block a full disk (ENOSPC, EDQUOT, or h5py's RuntimeError about
    one) becomes ``DataError(path, "cannot write <what>: no space left ...")``;
    the paths in ``cleanup`` are removed on any failure, and the messages h5py
    prints while it drops its file handles are kept off stderr."""
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


@contextmanager
def atomic_path(path, suffix="", what="output", fix="choose a writable output folder"):
    """Yield a temporary path next to ``path``; rename it to ``path`` on success.

    The temporary file is removed if the block raises.  ``OSError`` (from the
    block or the rename) becomes ``DataError(path, "cannot write <what>: ...", fix)``.
    ``suffix`` is appended to the temporary name (e.g. ``".png"`` for writers
    that pick the format from the extension).
    """
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}{suffix}"
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        raise DataError(path, f"cannot write {what}: {exc.strerror or exc}", fix) from exc
    finally:
        if os.path.isfile(tmp):
            os.remove(tmp)


def write_bytes_atomic(path, data, **kw):
    """Write ``data`` (bytes) to ``path`` atomically."""
    with atomic_path(path, **kw) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


def write_text_atomic(path, text, **kw):
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path, **kw) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


def to_jsonable(obj):
    """``obj`` with numpy scalars and arrays as Python values, NaN as None and
    paths as strings, recursively (tuples become lists; dict keys are kept)."""
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
    ``**kw`` are those of :func:`atomic_path` (``what``, ``fix``).
    """
    text = json.dumps(to_jsonable(obj), indent=indent, sort_keys=sort_keys)
    write_text_atomic(path, text + "\n", **kw)
