"""The model folder on disk: building, writing and validating it (private).

Public API in :mod:`facesegment.modelio.model`.  ``model.json`` format version 2::

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
import os
import shutil
from pathlib import Path

import numpy as np

from ..atomic import check_writable_folder, write_json_atomic
from ..errors import DataError
from ..data._h5check import READ_ERRORS, check_file
from ._model_doc import (FOREST_FORMAT, MODEL_FORMAT, MODEL_FORMAT_VERSION, check_document,
                         kinds, parse)
from ..forest._arrays import (FOREST_ARRAY_NAMES, MISSING_ARRAY_NAME, SPARSE_ARRAY_NAMES,
                             ForestArrays, n_sparse)
from ..forest._verify import ForestProblem, verified
from ..layout import DEFAULT_LAYOUT, WindowLayout

#: The files a model folder consists of (replacing a model replaces only these).
MODEL_FILES = ("model.json", "forest.h5", "shape-prior.npz")
#: The landmark-conditioned shape prior of a model that has one
#: (:mod:`facesegment.faces.shape_prior`), plain arrays.
SHAPE_PRIOR_FILE = "shape-prior.npz"
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
    from sklearn.base import is_regressor

    from ..forest.registry import KINDS, get_kind, kind_of

    if not hasattr(estimator, "forest_"):
        raise ValueError("the estimator is not fitted; call fit(X, y) before saving it")
    kind = kind_of(estimator) if kind is None else get_kind(kind).name
    if kind is None:
        name = type(estimator).__name__
        kinds = ", ".join(k.name for k in KINDS.values() if k.estimator == name)
        raise ValueError(f"{name} was not made by make_estimator and does not have the "
                         f"parameters of its class's own kind; pass kind= (one of: "
                         f"{kinds or 'none, not a registry class'})")
    arrays = estimator.forest_
    if is_regressor(estimator):
        if windows_meta is not None:
            raise ValueError("a regression forest has no face classes; save it without "
                             "windows_meta")
        classes = np.zeros(1, np.int64)  # value's one column: the leaf mean
    else:
        # a density forest has no classes: its one value column is the node's weight share
        classes = np.asarray(getattr(estimator, "classes_", np.arange(arrays.n_classes)))
    leaves = getattr(estimator, "leaves_", None)
    if windows_meta is not None:
        class_names = tuple(str(c) for c in windows_meta.class_names)
        arrays, classes = _face_columns(arrays, classes, len(class_names))
        sf = np.asarray(windows_meta.sampling_factors, dtype=np.float64)
        mean = np.asarray(windows_meta.mean, dtype=np.float32)
        std = np.asarray(windows_meta.std, dtype=np.float32)
        layout = layout or getattr(windows_meta, "layout", None)
    else:
        class_names = (("target",) if is_regressor(estimator)
                       else tuple(str(c) for c in classes))
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
               layout=layout, classes=classes,
               leaves=None if leaves is None else dict(leaves._asdict()))


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
        if getattr(model, "shape_prior", None) is not None:
            from ..faces.shape_prior import save_arrays

            np.savez_compressed(tmp / SHAPE_PRIOR_FILE, **save_arrays(model.shape_prior))
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
    if kind not in kinds():
        raise ValueError(f"model.kind={kind!r} must be one of {', '.join(kinds())}")


def model_document(model, path, h5):
    """The ``model.json`` document of ``model`` saved at ``path``."""
    from .. import __version__

    a = model.arrays
    classes = np.asarray(model.classes)
    return {
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "package_version": __version__,
        "kind": model.kind,
        "estimator": kinds()[model.kind].estimator,
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
        "shape_prior": None if getattr(model, "shape_prior", None) is None
        else model.shape_prior.describe(),
        "provenance": relative_provenance(jsonable(model.provenance), path),
        "metrics": jsonable(model.metrics),
        **_rule_entry(model),
        "files": {f.name: {"bytes": f.stat().st_size, "sha256": _sha256(f)}
                  for f in (h5, h5.parent / SHAPE_PRIOR_FILE) if f.is_file()},
    } | ({} if model.leaves is None else {"leaf_arrays": sorted(model.leaves)})


def _rule_entry(model):
    """``{"rule": {...}}`` for a model with a decision rule (stored, or recorded in
    its metrics by an older facesegment), else ``{}`` (no key: older readers)."""
    from ..rule import rule_of

    rule = rule_of(model)
    return {} if rule is None else {"rule": rule.to_dict()}


def _read_rule(doc, path):
    """The decision rule of a ``model.json`` document (its ``"rule"``, else the
    alpha, beta and sigma older models record in ``metrics``), or None."""
    from ..rule import DecisionRule

    try:
        if doc.get("rule") is not None:
            return DecisionRule.from_dict(doc["rule"])
        return DecisionRule.from_metrics(doc.get("metrics"), doc.get("params"))
    except (TypeError, ValueError) as exc:
        raise DataError(path / "model.json", f"has an unusable decision rule ({exc})",
                        "re-copy the model folder, or choose a rule again "
                        "(facesegment.evaluation.calibrate.choose_rule)") from None


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
        if getattr(model, "leaves", None) is not None:
            g = f.create_group("leaves", track_order=False)
            for name in sorted(model.leaves):
                data = np.ascontiguousarray(model.leaves[name])
                g.create_dataset(name, data=data, track_times=False,
                                 **(_COMPRESS if data.size >= 1024 else {}))
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
    arrays, mean, std, position, leaves = _read_forest(h5)
    arrays = _verified(arrays, h5, len(doc["class_names"]), mean, std,
                       signed=kinds()[doc["kind"]].task == "regress")
    if leaves is not None:
        _check_leaves(arrays, leaves, h5)
    kind, classes, layout = _upgrade(doc, path)
    if layout is not None and not layout.matches(arrays.n_features):
        raise DataError(path / "model.json", f"records the layout {layout.describe()} but "
                        f"the forest has {arrays.n_features} features",
                        "re-copy the model folder or retrain")
    model = cls(kind=kind, params=doc["params"], arrays=arrays,
                class_names=tuple(doc["class_names"]),
                sampling_factors=np.asarray(doc["sampling_factors"], dtype=np.float64),
                mean=mean, std=std, provenance=doc.get("provenance", {}),
                metrics=doc.get("metrics", {}), layout=layout, classes=classes,
                position=position, rule=_read_rule(doc, path), leaves=leaves)
    if doc.get("shape_prior") is not None:
        model.shape_prior = _read_shape_prior(path, doc, arrays.n_classes, verify)
    return model


def _check_leaves(arrays, leaves, h5):
    """The ``leaves`` group of a density forest: every array, consistent with the trees."""
    from ..forest.density import LEAF_ARRAY_NAMES, DensityLeaves, check_leaves

    missing = sorted(set(LEAF_ARRAY_NAMES) - set(leaves))
    problem = (f"leaf arrays {', '.join(missing)} are missing" if missing
               else check_leaves(arrays, DensityLeaves(**{n: leaves[n]
                                                         for n in LEAF_ARRAY_NAMES})))
    if problem:
        raise DataError(h5, f"is not a consistent density forest: {problem}",
                        "re-copy the model folder or retrain")


def _read_shape_prior(path, doc, n_classes, verify):
    """The model's :class:`facesegment.faces.shape_prior.ShapePrior` (model.json records one)."""
    from ..faces.shape_prior import from_arrays

    f = path / SHAPE_PRIOR_FILE
    if not f.is_file():
        raise DataError(path, f"is missing {SHAPE_PRIOR_FILE}, which model.json records "
                        "(an interrupted copy?)", "re-copy the model folder or retrain")
    rec = doc["files"].get(SHAPE_PRIOR_FILE, {})
    if verify and rec:
        _verify_file(f, rec)
    try:
        with np.load(f, allow_pickle=False) as z:
            prior = from_arrays(dict(z), where=str(f))
    except (OSError, ValueError) as exc:
        raise DataError(f, f"cannot be read as a shape prior ({exc})",
                        "re-copy the model folder or retrain") from None
    if prior.n_classes != n_classes:
        raise DataError(f, f"has a shape prior of {prior.n_classes} classes for a forest of "
                        f"{n_classes}", "re-copy the model folder or retrain")
    return prior


def _read_document(path):
    js = path / "model.json"
    if not path.is_dir():
        raise DataError(path, "is not a model folder (no such folder)", _FIX)
    if not js.is_file():
        raise DataError(path, "is not a model: it has no model.json", _FIX)
    try:
        text = js.read_text()
    except UnicodeDecodeError as exc:
        raise DataError(js, f"is not valid JSON ({exc.__class__.__name__}: {exc})",
                        _FIX) from None
    except OSError as exc:
        raise DataError(js, f"cannot be read ({exc.strerror or exc})", _FIX) from None
    doc = parse(text, js)
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
    if missing or not isinstance(kind, str) or kind not in kinds():
        raise DataError(js, f"is incomplete or has an unknown kind (missing: {missing}, "
                        f"kind {kind!r}; kinds: {', '.join(kinds())})", _FIX)
    check_document(doc, js)
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
            check_file(f, h5, _FIX)
            fmt = f.attrs.get("format")
            if (fmt.decode() if isinstance(fmt, bytes) else fmt) != FOREST_FORMAT:
                raise DataError(h5, "is not a facesegment forest file", _FIX)
            g = _dataset_group(f, h5)
            names = FOREST_ARRAY_NAMES + tuple(n for n in SPARSE_ARRAY_NAMES
                                               + (MISSING_ARRAY_NAME,) if n in g)
            arrays = ForestArrays(**{n: _read_array(g[n]) for n in names})
            position = _read_position(f, h5, arrays.n_classes) if "position" in f else None
            leaves = None
            if "leaves" in f:
                leaves = {n: _read_array(_dataset(f["leaves"], n, h5)) for n in f["leaves"]}
            return (arrays, _dataset(f, "mean", h5)[()], _dataset(f, "std", h5)[()], position,
                    leaves)
    except DataError:
        raise
    except READ_ERRORS as exc:
        raise DataError(h5, f"cannot be read as a forest ({type(exc).__name__}: {exc})",
                        _FIX) from None


def _dataset_group(f, h5):
    import h5py

    g = f.get("forest")
    if not isinstance(g, h5py.Group):
        raise DataError(h5, "has no group forest/ (not a forest file)", _FIX)
    for n in FOREST_ARRAY_NAMES:
        _dataset(g, n, h5)
    return g


def _dataset(g, name, h5):
    import h5py

    ds = g.get(name)
    if not isinstance(ds, h5py.Dataset):
        raise DataError(h5, f"has no dataset {g.name.strip('/') + '/' if g.name != '/' else ''}"
                        f"{name}", _FIX)
    return ds


def _read_position(f, h5, n_classes):
    from ..position import PositionPrior, crop_rule_of

    g = f["position"]
    freq, prior = _dataset(g, "freq", h5)[()], _dataset(g, "class_prior", h5)[()]
    sigma, pseudo = float(g.attrs["sigma"]), float(g.attrs["pseudo"])
    position = PositionPrior(freq, prior, sigma, pseudo, int(g.attrs["n_images"]),
                             crop_rule_of(g.attrs.get("crop_rule")))
    if position.freq.ndim != 3 or position.freq.shape[2] != n_classes \
            or position.class_prior.shape != (n_classes,):
        raise DataError(h5, f"has a position prior of shape {position.freq.shape} "
                        f"for {n_classes} classes", _FIX)
    numbers = (position.freq, position.class_prior, np.array([sigma, pseudo]))
    if any(a.dtype.kind != "f" or not np.isfinite(a).all() or (a < 0).any() for a in numbers):
        raise DataError(h5, "has a position prior with negative, infinite or NaN values "
                        "(position/freq, class_prior, sigma or pseudo)", _FIX)
    return position


def _verified(arrays, h5, n_classes, mean, std, signed=False):
    """The forest arrays proved safe for the kernels (:mod:`facesegment.forest._verify`)."""
    try:
        arrays = verified(arrays, signed)   # remembered: inference does not check it again
        if arrays.n_classes != n_classes:
            raise ForestProblem("value", f"has {arrays.n_classes} columns, expected "
                                f"{n_classes} (one per class name)")
    except ForestProblem as exc:
        raise DataError(h5, f"is not a valid forest: forest/{exc.array} {exc.problem}",
                        "re-copy the model folder or retrain") from None
    p = arrays.n_features
    for name, a in (("mean", mean), ("std", std)):
        if a.shape != (p,) or a.dtype.kind != "f" or not np.isfinite(a).all():
            raise DataError(h5, f"is not a valid forest: {name} is {a.dtype}{list(a.shape)}, "
                            f"expected {p} finite floats (one per feature)",
                            "re-copy the model folder or retrain")
    return arrays
