"""Up-to-date checks: a stage is skipped when its stamp matches.

A stamp is a small JSON file written (atomically) after a stage finished::

    {"stage": "train", "key": "<hash of config sections + input fingerprints>",
     "outputs": {"models/x/axis-32/model.json": 12345, ...},
     "seconds": 81.2, "finished": "2026-..."}

The stage is up to date when the stamp exists, its ``key`` equals the key the
stage would compute now, and every recorded output still exists with the
recorded size.  Input fingerprints use the size and modification time of big
files and the SHA-256 of small ones, so checking a finished run takes seconds.
Input data folders are wrapped in :class:`ByContent` and fingerprinted by the
SHA-256 of every file instead: a re-copied dataset (new modification times,
same bytes) leaves the run up to date.

Stamps live in ``reports/runs/<run>/stamps/`` (git-ignored: they are per
machine), beside ``stamps/timings/`` where the select, train and time stages
write what they measured (listed among their outputs, so a missing file redoes
the stage); the report stage merges those into the run's ``timings.json``.
"""

import hashlib
import json
import os
import time

from facesegment.atomic import write_json_atomic as _write_json
from facesegment.atomic import write_text_atomic  # noqa: F401  (re-exported for the stages)

SMALL = 4 << 20  # files up to 4 MiB are fingerprinted by content


def write_json_atomic(path, obj):
    """Stamps and snapshots: :func:`facesegment.atomic.write_json_atomic` with sorted keys."""
    _write_json(path, obj, sort_keys=True)


def file_fingerprint(path):
    """``sha256`` of a small file, ``size:mtime_ns`` of a big one, None if absent."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if st.st_size <= SMALL:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            h.update(fh.read())
        return "sha256:" + h.hexdigest()[:24]
    return f"stat:{st.st_size}:{st.st_mtime_ns}"


class ByContent(str):
    """A path (``str``) whose fingerprint is its bytes, never its modification times.

    For input data that may be copied or re-mounted between runs: hashing a
    folder of 13,000 JPEGs (150 MB) takes well under a second.
    """


def _sha256_file(path, h):
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)


def tree_fingerprint(root, suffixes=None, content=False):
    """Fingerprint of a folder tree from names, sizes and mtimes (fast: no reads).

    With ``content=True`` the files' bytes (SHA-256) replace their mtimes.
    """
    if content:
        return _content_tree_fingerprint(root, suffixes)
    h = hashlib.sha256()
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if suffixes and not fn.lower().endswith(suffixes):
                continue
            p = os.path.join(dirpath, fn)
            st = os.stat(p)
            h.update(f"{os.path.relpath(p, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
            n += 1
    return f"tree:{n}:{h.hexdigest()[:24]}"


def _content_tree_fingerprint(root, suffixes=None):
    h = hashlib.sha256()
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if suffixes and not fn.lower().endswith(suffixes):
                continue
            p = os.path.join(dirpath, fn)
            h.update(f"{os.path.relpath(p, root)}\0{os.path.getsize(p)}\0".encode())
            _sha256_file(p, h)
            n += 1
    return f"content:{n}:{h.hexdigest()[:24]}"


def fingerprint(path, content=False):
    """Fingerprint of a file or folder (None when it does not exist).

    ``content=True`` (or a :class:`ByContent` path) hashes every byte, so a copy
    of the same files with new modification times has the same fingerprint.
    """
    content = content or isinstance(path, ByContent)
    if os.path.isdir(path):
        return tree_fingerprint(path, content=content)
    if content and os.path.isfile(path):
        h = hashlib.sha256()
        _sha256_file(path, h)
        return "sha256:" + h.hexdigest()[:24]
    return file_fingerprint(path)


def stage_key(config_hash, inputs):
    """Combine a config hash and the fingerprints of the input paths.

    Paths enter the key relative to the working directory (the repository
    root), so a moved or re-cloned checkout with the same files is up to date.
    """
    blob = json.dumps({"config": config_hash,
                       "inputs": {os.path.relpath(p): fingerprint(p)
                                  for p in sorted(inputs, key=str)}},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def read_stamp(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def is_up_to_date(stamp_path, key):
    """True when the stamp exists, has ``key``, and its outputs are all intact."""
    st = read_stamp(stamp_path)
    if not st or st.get("key") != key:
        return False
    for out, size in st.get("outputs", {}).items():
        try:
            if os.path.getsize(out) != size:
                return False
        except OSError:
            return False
    return True


def _rel(path):
    """``path`` relative to the working directory when inside it (portable stamps)."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def write_stamp(stamp_path, stage, key, outputs, seconds, extra=None):
    """Record that ``stage`` finished with ``outputs`` (files; folders are expanded)."""
    files = {}
    for out in outputs:
        out = os.fspath(out)
        if os.path.isdir(out):
            for dirpath, _, filenames in os.walk(out):
                for fn in filenames:
                    p = os.path.join(dirpath, fn)
                    files[_rel(p)] = os.path.getsize(p)
        elif os.path.exists(out):
            files[_rel(out)] = os.path.getsize(out)
    write_json_atomic(stamp_path, {
        "stage": stage, "key": key, "outputs": files, "seconds": round(seconds, 3),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra or {}),
    })
