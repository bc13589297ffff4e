"""Atomic outputs: write under a temporary name, then rename.

An interrupted or failed write never leaves a file that looks finished, and a
failure to write is reported as one :class:`~facesegment.errors.DataError` line
naming the path.  :func:`write_json_atomic` is the project's one JSON writer
(NaN written as null, numpy values as Python values) and
:func:`check_writable_folder` its one write probe.
"""

import json
import math
import os
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
