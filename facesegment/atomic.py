"""Atomic outputs: write under a temporary name, then rename.

An interrupted or failed write never leaves a file that looks finished, and a
failure to write is reported as one :class:`~facesegment.errors.DataError` line
naming the path.
"""

import json
import os
from contextlib import contextmanager

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
        probe = os.path.join(path, f".write-test-{os.getpid()}")
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise DataError(path, f"{problem} ({exc.strerror or exc})", fix) from exc


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


def write_json_atomic(path, obj, **kw):
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    write_text_atomic(path, json.dumps(obj, indent=1) + "\n", **kw)
