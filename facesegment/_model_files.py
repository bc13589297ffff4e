"""The model folder on disk: building, writing and validating it (private).

Public API in :mod:`facesegment.model`.  ``model.json`` format version 2::

    format, format_version, package_version, kind, estimator, params,
    classes, classes_dtype, class_names, sampling_factors, layout (or null),
    n_trees, n_nodes, n_classes, n_features, n_oblique, weight_dtype,
    n_sparse, sparse_nonzero, sparse_dtype,
    max_depth, provenance, metrics, files {forest.h5: {bytes, sha256}}

Sparse oblique splits are the optional ``forest/sparse*`` datasets of
``forest.h5`` (absent: none; files written before they existed read as before).
int16 dense rows are stored zigzag-encoded (``forest/weights`` uint16 with the
attribute ``encoding = "zigzag-int16"``: ``z = 2 q`` for ``q >= 0``, ``-2 q - 1``
below), so the high bytes of their many small weights are zero and compress
away (gzip with shuffle); reading decodes them.  ``forest/missing_left``
(int8, one per node: the side of missing values) is optional; files without
it read as before (missing values then go to the larger child).

Version 1 (no classes, layout or package version; kind "co2" for both CO2
kinds) is read as classes ``0..n-1``, the default layout and, for a CO2
model with ``init="best"``, kind "co2-best".
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from .atomic import check_writable_folder, write_json_atomic
from .errors import DataError
from .forest._arrays import (FOREST_ARRAY_NAMES, MISSING_ARRAY_NAME, SPARSE_ARRAY_NAMES,
                             ForestArrays, n_sparse)
from .layout import DEFAULT_LAYOUT, WindowLayout
from .model import FOREST_FORMAT, MODEL_FORMAT, MODEL_FORMAT_VERSION, _kinds

#: The files a model folder consists of (replacing a model replaces only these).
MODEL_FILES = ("model.json", "forest.h5")
#: Provenance keys that hold paths (stored relative to the model folder).
PATH_KEYS = ("windows", "truncated_from", "data", "labels")
#: Compression of the forest arrays: byte-shuffle + gzip level 4 (node arrays
#: shrink 3-6x; loading stays dominated by the SHA-256 check).
_COMPRESS = {"compression": "gzip", "compression_opts": 4, "shuffle": True}


def jsonable(value):
    """A JSON-serialisable version of a value (numpy scalars/arrays, tuples, paths)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    return str(value)


# ----------------------------------------------------------- from estimator

def effective_params(estimator):
    """The estimator's parameters with defaults that are ``None`` resolved
    (e.g. CO2's nu/eta/... from ``CO2_DEFAULTS``); run-time-only ones dropped."""
    params = dict(estimator.get_params(deep=False))
    if hasattr(estimator, "co2_params"):
        params.update(estimator.co2_params())
    return {k: jsonable(v) for k, v in params.items()
            if k not in ("scheduler", "n_jobs", "verbose")}


def model_from_estimator(cls, estimator, kind, windows_meta, provenance, layout):
    from .forest.registry import get_kind, kind_of

    if not hasattr(estimator, "forest_"):
        raise ValueError("the estimator is not fitted; call fit(X, y) before saving it")
    kind = kind_of(estimator) if kind is None else get_kind(kind).name
    if kind is None:
        raise ValueError(f"{type(estimator).__name__} matches no forest kind of the "
                         "registry; pass kind=")
    arrays = estimator.forest_
    classes = np.asarray(estimator.classes_)
    if windows_meta is not None:
        class_names = tuple(str(c) for c in windows_meta.class_names)
        arrays, classes = _face_columns(arrays, classes, len(class_names))
        sf = np.asarray(windows_meta.sampling_factors, dtype=np.float64)
        mean = np.asarray(windows_meta.mean, dtype=np.float32)
        std = np.asarray(windows_meta.std, dtype=np.float32)
        layout = layout or getattr(windows_meta, "layout", None)
    else:
        class_names = tuple(str(c) for c in classes)
        sf = np.ones(len(classes))
        p = arrays.n_features
        mean = getattr(estimator, "feature_mean_", np.zeros(p, np.float32))
        std = getattr(estimator, "feature_std_", np.ones(p, np.float32))
    if layout is None and DEFAULT_LAYOUT.matches(arrays.n_features):
        layout = DEFAULT_LAYOUT
    if layout is not None and not layout.matches(arrays.n_features):
        raise ValueError(f"layout {layout.describe()} does not match the forest's "
                         f"{arrays.n_features} features")
    if layout is not None and layout.pool > 1 and np.size(mean) != arrays.n_features:
        # a pooled layout: the statistics the fit used, not the windows file's
        p = arrays.n_features
        mean = getattr(estimator, "feature_mean_", np.zeros(p, np.float32))
        std = getattr(estimator, "feature_std_", np.ones(p, np.float32))
    prov = dict(provenance or {})
    if windows_meta is not None:
        prov.setdefault("windows", str(getattr(windows_meta, "path", "") or ""))
        prov.setdefault("n_windows", int(getattr(windows_meta, "n_windows", 0)))
        prov.setdefault("windows_seed", jsonable(getattr(windows_meta, "seed", None)))
        prov.setdefault("n_sources", len(getattr(windows_meta, "sources", []) or []))
    return cls(kind=kind, params=effective_params(estimator), arrays=arrays,
               class_names=class_names, sampling_factors=sf,
               mean=np.asarray(mean, np.float32), std=np.asarray(std, np.float32),
               provenance=jsonable(prov), metrics=_fit_metrics(estimator, arrays),
               layout=layout, classes=classes)


def _face_columns(arrays, classes, n_names):
    """Integer class ids of a windows file: one ``value`` column per class name
    (ids absent from the windows get zero columns); classes become 0..n-1."""
    if classes.dtype.kind not in "iu" or classes.size == 0 or classes.min() < 0 \
            or classes.max() >= n_names:
        raise ValueError(f"the estimator's classes {classes.tolist()} are not ids of the "
                         f"windows file's {n_names} class names")
    if len(classes) != n_names:
        value = np.zeros((arrays.n_nodes, n_names), dtype=np.float32)
        value[:, classes] = arrays.value
        arrays = arrays._replace(value=value)
    return arrays, np.arange(n_names)


def _fit_metrics(estimator, arrays):
    stats = getattr(estimator, "tree_stats_", None) or []
    metrics = {}
    if stats:
        metrics["tree_seconds"] = [round(float(s["seconds"]), 4) for s in stats]
        metrics["fit_seconds_sum"] = round(float(sum(s["seconds"] for s in stats)), 4)
    metrics["n_nodes"] = arrays.n_nodes
    metrics["n_oblique"] = int(arrays.weights.shape[0])
    return metrics


# ------------------------------------------------------------------ writing

def check_model_output(path):
    """Fail early (DataError) when a model cannot be saved as the folder ``path``.

    A folder is replaced only when it is empty or holds nothing but a model's
    own files (``model.json``, ``forest.h5``): a user's file beside a model
    (e.g. NOTES.txt) makes it refuse rather than delete it.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise DataError(path, "exists and is not a model folder", "give a new folder name")
    try:
        entries = sorted(p.name for p in path.iterdir()) if path.is_dir() else []
    except OSError as exc:
        raise DataError(path, f"cannot be read ({exc.strerror or exc})",
                        "choose a readable --out folder") from exc
    if entries and "model.json" not in entries:
        raise DataError(path, "is a folder that holds no model.json; it would be replaced",
                        "give a new folder name or an existing model folder")
    others = [e for e in entries if e not in MODEL_FILES]
    if others:
        raise DataError(path, f"is a model folder that also holds {', '.join(others[:3])}"
                        f"{' ...' if len(others) > 3 else ''}; replacing the model would "
                        "delete them", "move those files out or give a new folder name")
    try:
        check_writable_folder(path.parent)
    except DataError as exc:
        raise DataError(path, f"cannot write the model ({exc.problem.split('(', 1)[-1]}",
                        "choose a writable --out folder, e.g. models/co2-16") from exc


def save_model_folder(model, path):
    path = Path(path)
    _kinds_check(model.kind, path)
    check_model_output(path)

    def fill(tmp):
        _write_forest_h5(model, tmp / "forest.h5")
        write_json_atomic(tmp / "model.json", model_document(model, path, tmp / "forest.h5"),
                          indent=2, sort_keys=True)

    return write_folder(path, fill, "the model", "choose a writable --out folder with free space")


def write_folder(path, fill, what, fix):
    """Write the folder ``path`` atomically: ``fill(tmp)`` writes its files into a
    temporary folder beside it, which then replaces ``path`` (an existing folder
    is removed only after the rename).  A failure removes the temporary folder;
    an OSError becomes one DataError naming ``path``."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        fill(tmp)
        _replace_folder(tmp, path)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(path, f"cannot write {what} ({exc.strerror or exc})", fix) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _kinds_check(kind, path):
    if kind not in _kinds():
        raise ValueError(f"model.kind={kind!r} must be one of {', '.join(_kinds())}")


def model_document(model, path, h5):
    """The ``model.json`` document of ``model`` saved at ``path``."""
    from . import __version__

    a = model.arrays
    classes = np.asarray(model.classes)
    return {
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "package_version": __version__,
        "kind": model.kind,
        "estimator": _kinds()[model.kind].estimator,
        "params": jsonable(model.params),
        "classes": jsonable(classes),
        "classes_dtype": classes.dtype.str if classes.dtype != object else "object",
        "class_names": list(model.class_names),
        "sampling_factors": [float(s) for s in np.asarray(model.sampling_factors)],
        "layout": None if model.layout is None else model.layout.to_dict(),
        "n_trees": a.n_trees, "n_nodes": a.n_nodes, "n_classes": a.n_classes,
        "n_features": a.n_features, "n_oblique": int(a.weights.shape[0]),
        "weight_dtype": str(a.weights.dtype),
        "n_sparse": n_sparse(a),
        "sparse_nonzero": 0 if a.sparse_index is None else int(a.sparse_index.shape[0]),
        "sparse_dtype": None if not n_sparse(a) else str(a.sparse_weight.dtype),
        "max_depth": int(a.depth.max()) if a.n_nodes else 0,
        "position": None if getattr(model, "position", None) is None
        else model.position.describe(),
        "provenance": relative_provenance(jsonable(model.provenance), path),
        "metrics": jsonable(model.metrics),
        "files": {"forest.h5": {"bytes": h5.stat().st_size, "sha256": _sha256(h5)}},
    }


def relative_provenance(prov, folder):
    """Paths of ``prov`` (keys :data:`PATH_KEYS`) relative to the model folder."""
    out = dict(prov)
    base = os.path.abspath(folder)
    for key in PATH_KEYS:
        val = out.get(key)
        if isinstance(val, str) and val:
            try:
                out[key] = os.path.relpath(os.path.abspath(val), base)
            except ValueError:  # another drive (Windows): keep it as given
                pass
    return out


def _write_forest_h5(model, path):
    import h5py

    with h5py.File(path, "w", libver="v110", track_order=False) as f:
        f.attrs["format"] = FOREST_FORMAT
        f.attrs["format_version"] = MODEL_FORMAT_VERSION
        g = f.create_group("forest", track_order=False)
        names = FOREST_ARRAY_NAMES + (SPARSE_ARRAY_NAMES if n_sparse(model.arrays) else ())
        if model.arrays.missing_left is not None:
            names = names + (MISSING_ARRAY_NAME,)
        for name in names:
            data = np.ascontiguousarray(getattr(model.arrays, name))
            zigzag = name == "weights" and data.dtype == np.int16
            if zigzag:
                data = _zigzag(data)
            kw = _COMPRESS if data.size >= 1024 else {}
            ds = g.create_dataset(name, data=data, track_times=False, **kw)
            if zigzag:
                ds.attrs["encoding"] = ZIGZAG
        for name in ("mean", "std"):
            f.create_dataset(name, data=np.asarray(getattr(model, name), np.float32),
                             track_times=False)
        pos = getattr(model, "position", None)
        if pos is not None:
            g = f.create_group("position", track_order=False)
            g.create_dataset("freq", data=np.asarray(pos.freq, np.float32), track_times=False,
                             **_COMPRESS)
            g.create_dataset("class_prior", data=np.asarray(pos.class_prior, np.float64),
                             track_times=False)
            for key in ("sigma", "pseudo", "n_images"):
                g.attrs[key] = getattr(pos, key)
            g.attrs["crop_rule"] = np.asarray(pos.crop_rule, np.float64)


def _replace_folder(tmp, path):
    """Rename ``tmp`` to ``path``, replacing (then removing) an existing model at ``path``."""
    old = None
    if path.exists():
        old = path.parent / f".{path.name}.old-{os.getpid()}"
        os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        if old is not None:  # put the previous model back
            os.replace(old, path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


# ------------------------------------------------------------------ reading

_FIX = "train it again with `facesegment train` (or point at a model folder)"


def load_model_folder(cls, path, verify=True):
    path = Path(path)
    if path.is_file() and path.name == "model.json":
        path = path.parent
    doc = _read_document(path)
    h5 = path / "forest.h5"
    if not h5.is_file():
        raise DataError(path, "is missing forest.h5 (an interrupted copy?)", _FIX)
    rec = doc["files"].get("forest.h5", {})
    if verify and rec:
        _verify_file(h5, rec)
    arrays, mean, std, position = _read_forest(h5)
    _check_arrays(arrays, h5, len(doc["class_names"]))
    kind, classes, layout = _upgrade(doc, path)
    if layout is not None and not layout.matches(arrays.n_features):
        raise DataError(path / "model.json", f"records the layout {layout.describe()} but "
                        f"the forest has {arrays.n_features} features",
                        "re-copy the model folder or retrain")
    return cls(kind=kind, params=doc["params"], arrays=arrays,
               class_names=tuple(doc["class_names"]),
               sampling_factors=np.asarray(doc["sampling_factors"], dtype=np.float64),
               mean=mean, std=std, provenance=doc.get("provenance", {}),
               metrics=doc.get("metrics", {}), layout=layout, classes=classes,
               position=position)


def _read_document(path):
    js = path / "model.json"
    if not path.is_dir():
        raise DataError(path, "is not a model folder (no such folder)", _FIX)
    if not js.is_file():
        raise DataError(path, "is not a model: it has no model.json", _FIX)
    try:
        doc = json.loads(js.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(js, f"is not valid JSON ({exc.__class__.__name__}: {exc})",
                        _FIX) from None
    except OSError as exc:
        raise DataError(js, f"cannot be read ({exc.strerror or exc})", _FIX) from None
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise DataError(js, f"is not a facesegment model (format is "
                        f"{doc.get('format') if isinstance(doc, dict) else None!r})", _FIX)
    if doc.get("format_version") not in (1, MODEL_FORMAT_VERSION):
        raise DataError(js, f"has model format version {doc.get('format_version')!r}; this "
                        f"facesegment reads versions 1 and {MODEL_FORMAT_VERSION}",
                        "retrain the model with this version of facesegment")
    missing = [k for k in ("kind", "params", "class_names", "sampling_factors", "files")
               if k not in doc]
    kind = doc.get("kind")
    if missing or not isinstance(kind, str) or kind not in _kinds():
        raise DataError(js, f"is incomplete or has an unknown kind (missing: {missing}, "
                        f"kind {kind!r}; kinds: {', '.join(_kinds())})", _FIX)
    return doc


def _upgrade(doc, path):
    """``(kind, classes, layout)`` of a version 1 or 2 document."""
    n = len(doc["class_names"])
    if doc["format_version"] == 1:
        kind = doc["kind"]
        if kind == "co2" and doc["params"].get("init") == "best":
            kind = "co2-best"
        layout = DEFAULT_LAYOUT if doc.get("n_features") == DEFAULT_LAYOUT.n_features else None
        return kind, np.arange(n), layout
    try:
        dtype = np.dtype(object if doc["classes_dtype"] == "object" else doc["classes_dtype"])
        classes = np.asarray(doc["classes"], dtype=dtype)
        layout = None if doc.get("layout") is None else WindowLayout.from_dict(doc["layout"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(path / "model.json", f"has unreadable classes or layout ({exc})",
                        "re-copy the model folder or retrain") from None
    if classes.shape != (n,):
        raise DataError(path / "model.json", f"has {classes.size} classes but {n} class "
                        "names", "re-copy the model folder or retrain")
    return doc["kind"], classes, layout


def _verify_file(h5, rec):
    size = h5.stat().st_size
    if size != rec.get("bytes"):
        raise DataError(h5, f"is truncated or altered: {size} bytes, model.json "
                        f"records {rec.get('bytes')}", "re-copy the model folder or retrain")
    if rec.get("sha256") and _sha256(h5) != rec["sha256"]:
        raise DataError(h5, "is corrupt: its SHA-256 differs from model.json's",
                        "re-copy the model folder or retrain")


#: ``forest/weights`` of int16 rows: zigzag-encoded uint16.
ZIGZAG = "zigzag-int16"


def _zigzag(q):
    """int16 -> uint16 with small magnitudes small: 0, -1, 1, -2 -> 0, 1, 2, 3."""
    q = q.astype(np.int32)
    return ((q << 1) ^ (q >> 31)).astype(np.uint16)


def _read_array(ds):
    """A dataset's array, zigzag int16 rows decoded."""
    data = ds[()]
    if ds.attrs.get("encoding") == ZIGZAG:
        z = data.astype(np.int32)
        data = ((z >> 1) ^ -(z & 1)).astype(np.int16)
    return data


def _read_forest(h5):
    import h5py

    try:
        with h5py.File(h5, "r") as f:
            if f.attrs.get("format") != FOREST_FORMAT:
                raise DataError(h5, "is not a facesegment forest file", _FIX)
            names = FOREST_ARRAY_NAMES + tuple(n for n in SPARSE_ARRAY_NAMES
                                               + (MISSING_ARRAY_NAME,) if n in f["forest"])
            arrays = ForestArrays(**{n: _read_array(f["forest"][n]) for n in names})
            position = None
            if "position" in f:
                from .position import PositionPrior, crop_rule_of

                g = f["position"]
                position = PositionPrior(
                    g["freq"][()], g["class_prior"][()], float(g.attrs["sigma"]),
                    float(g.attrs["pseudo"]), int(g.attrs["n_images"]),
                    crop_rule_of(g.attrs.get("crop_rule")))
                if position.freq.ndim != 3 or position.freq.shape[2] != arrays.n_classes \
                        or position.class_prior.shape != (arrays.n_classes,):
                    raise DataError(h5, f"has a position prior of shape {position.freq.shape} "
                                    f"for {arrays.n_classes} classes", _FIX)
            return arrays, f["mean"][()], f["std"][()], position
    except DataError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(h5, f"cannot be read as a forest ({exc})", _FIX) from None


def _sparse_problem(a):
    """What is wrong with the sparse arrays of ``a`` (None: nothing, or none at all)."""
    present = [getattr(a, k) is not None for k in SPARSE_ARRAY_NAMES]
    if not any(present):
        return None
    if not all(present):
        return "sparse arrays are incomplete"
    ptr = a.sparse_ptr
    if a.sparse.shape != (a.n_nodes,):
        return "node arrays have different lengths"
    if (ptr.ndim != 1 or ptr.size == 0 or ptr[0] != 0 or (np.diff(ptr) < 0).any()
            or ptr[-1] != a.sparse_index.shape[0]
            or a.sparse_weight.shape != a.sparse_index.shape):
        return "sparse row pointers are inconsistent"
    if (a.sparse >= ptr.shape[0] - 1).any() or (a.sparse < -1).any():
        return "sparse rows are out of range"
    if a.sparse_index.size and (a.sparse_index.astype(np.int64).max() >= a.weights.shape[1]
                                or a.sparse_index.astype(np.int64).min() < 0):
        return "feature indices are out of range"
    return None


def _check_arrays(a, path, n_classes):
    n = a.n_nodes
    problem = None
    if any(getattr(a, k).shape != (n,) for k in ("right", "feature", "feature2", "oblique",
                                                    "threshold", "depth", "n_samples")):
        problem = "node arrays have different lengths"
    elif a.value.shape != (n, n_classes):
        problem = f"value has shape {a.value.shape}, expected ({n}, {n_classes})"
    elif a.roots.size == 0 or a.roots.min() < 0 or a.roots.max() >= n:
        problem = "tree roots are out of range"
    elif (a.left >= n).any() or (a.right >= n).any() or (a.left < -1).any():
        problem = "child indices are out of range"
    elif (a.oblique >= a.weights.shape[0]).any():
        problem = "oblique rows are out of range"
    elif a.weights.ndim != 2 or ((a.feature >= a.weights.shape[1]).any()
                                 or (a.feature2 >= a.weights.shape[1]).any()):
        problem = "feature indices are out of range"
    elif a.missing_left is not None and a.missing_left.shape != (n,):
        problem = "missing_left has a different length than the node arrays"
    else:
        problem = _sparse_problem(a)
    if problem:
        raise DataError(path, f"is not a consistent forest: {problem}",
                        "re-copy the model folder or retrain")
