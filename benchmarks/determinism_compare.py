"""File-by-file comparison of two run folders (the comparison of
``python -m benchmarks.determinism``).

Each file under one root is compared with the file of the same relative path
under the other: first by its bytes; when they differ, by its content, read
the way its suffix says (HDF5 datasets, JSON leaves, PNG pixels, ``.npz``
arrays), so that the result says *how much* moved:

* HDF5 (``.h5``) and ``.npz``: per array, whether its shape changed, the share
  of differing elements and the largest absolute difference;
* JSON: the leaves that differ and the largest numeric difference; for an
  evaluation file (``eval-*.json``) also the largest difference of a score in
  points, apart for the test crops and the detector-aligned crops (the
  ``detector`` part);
* PNG: the share of differing pixels.

Measured times are not results: JSON keys that name a time (:data:`TIMING_KEY`)
and the files of :data:`SKIP` are left out; in JSON strings each root's own
path reads ``<root>`` (a model records the absolute path it was truncated
from).  Everything here is pure (no run
of the pipeline), so ``tests/test_determinism.py`` checks it on small made-up
files.
"""

import json
import math
import re
from pathlib import Path

import numpy as np

#: Files that hold measured times or what is rendered from them (never compared).
SKIP = re.compile(r"(^|/)(stamps|__pycache__)/|(^|/)timings\.(json|md)$|"
                  r"(^|/)\.facesegment-outputs$|\.log$|\.nb[ic]$")
#: JSON keys holding a measured time, a rate or the machine's state (not results).
TIMING_KEY = re.compile(r"(^|_)(seconds|secs|s|ms|time|times|elapsed|duration|rate|load|"
                        r"load_average|cpu|cpu_seconds|per_s|per_second|images_per_s|"
                        r"trees_per_s|when|date|host)($|_)|_ms_|^ms_|timing", re.I)
#: JSON leaves that are scores in points (class-average Jaccard, pixel accuracy).
SCORE_KEY = re.compile(r"^(mean_jaccard|jaccard|pixel_accuracy|per_image|"
                       r"validation_jaccard)$")


def files_of(root):
    """Relative POSIX paths of the regular files under ``root`` that are compared
    (all but :data:`SKIP`), sorted."""
    root = Path(root)
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not p.is_symlink() and not SKIP.search(rel):
            out.append(rel)
    return out


def compare_trees(a, b):
    """Compare every file of two run folders.

    Parameters
    ----------
    a, b : path-like
        Two roots (the working folders of two runs of the pipeline).

    Returns
    -------
    dict
        ``{relative path: result}`` for the union of both roots' files;
        ``result`` is :func:`compare_file`'s, or ``{"status": "missing",
        "in": "a" or "b"}`` for a file only one root holds.
    """
    a, b = Path(a), Path(b)
    fa, fb = set(files_of(a)), set(files_of(b))
    out = {}
    for rel in sorted(fa | fb):
        if rel not in fb or rel not in fa:
            out[rel] = {"status": "missing", "in": "a" if rel in fa else "b"}
        else:
            out[rel] = compare_file(a / rel, b / rel, roots=(a, b))
    return out


def compare_file(a, b, roots=None):
    """Compare two files: ``{"status": "identical"}`` when their bytes are equal,
    else ``{"status": "same content"}`` when only what is not a result differs
    (e.g. a measured time in a JSON), else ``{"status": "differs", ...}`` with
    the measures of the file's kind (see the module docstring).

    Parameters
    ----------
    a, b : path-like
        The two files.
    roots : (path-like, path-like), optional
        Their run folders: in JSON strings each reads ``<root>``.

    Returns
    -------
    dict
        ``status`` and, for ``"differs"``, the measures of the file's kind.
    """
    a, b = Path(a), Path(b)
    if a.read_bytes() == b.read_bytes():
        return {"status": "identical"}
    suffix = a.suffix.lower()
    try:
        if suffix == ".h5":
            diff = compare_arrays(read_h5(a), read_h5(b))
        elif suffix == ".npz":
            with np.load(a) as za, np.load(b) as zb:
                diff = compare_arrays(dict(za), dict(zb))
        elif suffix == ".json":
            ra, rb = (None, None) if roots is None else map(str, roots)
            diff = compare_json(_rooted(json.loads(a.read_text()), ra),
                                _rooted(json.loads(b.read_text()), rb),
                                scores=a.name.startswith("eval-"))
        elif suffix == ".png":
            diff = compare_images(_read_png(a), _read_png(b))
        else:
            diff = {"kind": "bytes"}
    except (OSError, ValueError) as exc:
        diff = {"kind": "unreadable", "error": str(exc)}
    if diff.get("equal"):
        return {"status": "same content"}
    diff.pop("equal", None)
    return {"status": "differs", **diff}


def _rooted(doc, root):
    """``doc`` with ``root`` in its strings written ``<root>``."""
    if root is None:
        return doc
    if isinstance(doc, dict):
        return {k: _rooted(v, root) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_rooted(v, root) for v in doc]
    return doc.replace(root, "<root>") if isinstance(doc, str) else doc


def read_h5(path):
    """Every dataset (``{name: array}``) and attribute (``{name@attr: value}``)
    of an HDF5 file."""
    import h5py

    out = {}

    def visit(name, obj):
        for k, v in obj.attrs.items():
            out[f"{name}@{k}"] = np.asarray(v)
        if isinstance(obj, h5py.Dataset):
            out[name] = obj[()]

    with h5py.File(path, "r") as fh:
        for k, v in fh.attrs.items():
            out[f"@{k}"] = np.asarray(v)
        fh.visititems(visit)
    return out


def _read_png(path):
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im)


def array_difference(x, y):
    """How two arrays differ.

    Parameters
    ----------
    x, y : array_like

    Returns
    -------
    dict
        ``equal`` (same shape, dtype kind and values; NaNs equal),
        ``shape_differs``, ``share`` (differing elements over all, when the
        shapes match) and ``max_abs`` (largest absolute difference of numeric
        values, when the shapes match).
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        return {"equal": False, "shape_differs": True, "shapes": [list(x.shape), list(y.shape)]}
    if x.dtype.kind in "biuf" and y.dtype.kind in "biuf":
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        same = (xf == yf) | (np.isnan(xf) & np.isnan(yf))
        diff = np.abs(xf - yf)
        max_abs = float(np.nanmax(np.where(same, 0.0, diff))) if x.size else 0.0
    else:
        same = x == y
        max_abs = None
    n_diff = int(x.size - np.count_nonzero(same))
    return {"equal": n_diff == 0, "shape_differs": False,
            "share": n_diff / x.size if x.size else 0.0, "max_abs": max_abs}


def compare_arrays(a, b):
    """Compare two ``{name: array}`` mappings (an HDF5 file's or an ``.npz``'s).

    Parameters
    ----------
    a, b : dict of str to array_like

    Returns
    -------
    dict
        ``kind`` ("arrays"), ``equal``, ``arrays`` (``{name:``
        :func:`array_difference` ``}`` of the differing or missing arrays),
        ``max_share`` and ``max_abs`` over them, and ``shape_differs`` when
        any array changed shape (e.g. a forest with another number of nodes).
    """
    arrays = {}
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            arrays[name] = {"missing_in": "a" if name not in a else "b"}
            continue
        d = array_difference(a[name], b[name])
        if not d.pop("equal"):
            arrays[name] = d
    shares = [d["share"] for d in arrays.values() if "share" in d]
    abss = [d["max_abs"] for d in arrays.values() if d.get("max_abs") is not None]
    return {"kind": "arrays", "equal": not arrays, "arrays": arrays,
            "shape_differs": any(d.get("shape_differs") or "missing_in" in d
                                 for d in arrays.values()),
            "max_share": max(shares, default=0.0), "max_abs": max(abss, default=0.0)}


def leaves(doc, path=()):
    """``{path tuple: value}`` of every leaf of a JSON document, without the
    leaves under a :data:`TIMING_KEY` key."""
    out = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            if not TIMING_KEY.search(str(k)):
                out.update(leaves(v, path + (str(k),)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.update(leaves(v, path + (i,)))
    else:
        out[path] = doc
    return out


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def compare_json(a, b, scores=False):
    """Compare two JSON documents leaf by leaf (measured times left out).

    Parameters
    ----------
    a, b : object
        Parsed JSON documents.
    scores : bool
        Also measure the scores (``mean_jaccard``, ``jaccard``,
        ``pixel_accuracy``, ``per_image`` leaves, in points): ``test_points``
        and ``detector_points``, the largest difference outside and inside a
        ``detector`` part (an evaluation file's detector-aligned protocol).

    Returns
    -------
    dict
        ``kind`` ("json"), ``equal``, ``leaves_differing``, ``max_abs`` (the
        largest difference of a numeric leaf), ``paths`` (up to 5 differing
        leaves, ``/``-joined) and, with ``scores``, ``test_points`` and
        ``detector_points``.
    """
    la, lb = leaves(a), leaves(b)
    differing, max_abs = [], 0.0
    points = {"test_points": 0.0, "detector_points": 0.0}
    for p in sorted(set(la) | set(lb), key=lambda t: tuple(map(str, t))):
        va, vb = la.get(p, None), lb.get(p, None)
        if p in la and p in lb and (va == vb or (_number(va) and _number(vb)
                                                 and math.isnan(va) and math.isnan(vb))):
            continue
        differing.append("/".join(map(str, p)))
        if _number(va) and _number(vb):
            d = abs(float(va) - float(vb))
            max_abs = max(max_abs, d)
            names = [s for s in p if isinstance(s, str)]
            if scores and any(SCORE_KEY.match(s) for s in names[-2:]):
                key = "detector_points" if "detector" in names else "test_points"
                points[key] = max(points[key], d)
    out = {"kind": "json", "equal": not differing, "leaves_differing": len(differing),
           "max_abs": max_abs, "paths": differing[:5]}
    if scores:
        out.update(points)
    return out


def compare_images(x, y):
    """Compare two decoded images: ``kind`` ("image"), ``equal``, ``share`` of
    differing pixels (a pixel differs when any channel does) and
    ``shape_differs``."""
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        return {"kind": "image", "equal": False, "shape_differs": True, "share": 1.0}
    ne = x != y
    if ne.ndim == 3:
        ne = ne.any(axis=2)
    share = float(ne.mean()) if ne.size else 0.0
    return {"kind": "image", "equal": share == 0.0, "shape_differs": False, "share": share}


__all__ = ["SKIP", "TIMING_KEY", "SCORE_KEY", "files_of", "compare_trees", "compare_file",
           "read_h5", "array_difference", "compare_arrays", "leaves", "compare_json",
           "compare_images"]
