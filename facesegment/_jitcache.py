"""Numba's disk cache, kept in step with the package's sources (private).

Numba's ``cache=True`` checks only the source file of the cached function
itself. A kernel that calls a kernel of another file (``forest/axis.py`` and
``forest/_criteria.py``, ``dense/_flat.py`` and ``dense/_simd.py`` or
``dense/_scores.py``) keeps being served as it was compiled from the other
file's older version: in session 12 the rewrite of the portable integer dot
was first timed with the old kernels. Fresh installs and CI start without
caches; a checkout that is being edited does not.

So on import the package compares a digest of all its Python sources with the
one recorded beside its caches (``__pycache__/numba-sources.sha256``); when
they differ it deletes the package's Numba cache files (``*.nbi``, ``*.nbc``)
and records the new digest. Kernels then compile again on their first call
(a few minutes for all of them on the 2-core machine). A package that cannot
be written (an install owned by someone else) is left as it is, and caches
that ``NUMBA_CACHE_DIR`` sends elsewhere are not checked (the integer kernels
also carry a digest of ``dense/_simd.py`` in their names, which holds there too).
"""

import hashlib
import os
from pathlib import Path

#: The package whose caches are checked.
ROOT = Path(__file__).resolve().parent
#: Where the digest of the sources the caches were built from is recorded.
STAMP = "__pycache__/numba-sources.sha256"


def source_digest(root=ROOT):
    """SHA-256 of every ``.py`` file under ``root`` (relative names and bytes)."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def refresh(root=ROOT):
    """Delete ``root``'s Numba cache files if its sources changed since they were
    recorded; returns how many files were deleted (0 when up to date or not
    writable)."""
    try:
        digest = source_digest(root)
        stamp = root / STAMP
        if stamp.is_file() and stamp.read_text().strip() == digest:
            return 0
        deleted = 0
        for pattern in ("__pycache__/*.nbi", "__pycache__/*.nbc"):
            for path in root.rglob(pattern):
                try:
                    path.unlink()
                    deleted += 1
                except FileNotFoundError:    # another process got there first
                    pass
        stamp.parent.mkdir(exist_ok=True)
        tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
        tmp.write_text(digest + "\n")
        os.replace(tmp, stamp)
        return deleted
    except OSError:
        return 0
