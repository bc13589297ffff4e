"""The model folder on disk: building, writing and validating it (private).

Public API in :mod:`facesegment.modelio.model`; the forest arrays' file
``forest.h5`` is :mod:`facesegment.modelio._forest_h5`.  ``model.json`` format version 2::

    format, format_version, package_version, kind, estimator, params,
    classes, classes_dtype, class_names, sampling_factors, layout (or null),
    n_trees, n_nodes, n_classes, n_features, n_oblique, weight_dtype,
    n_sparse, sparse_nonzero, sparse_dtype,
    max_depth, provenance, metrics, files {forest.h5: {bytes, sha256}}

Version 1 (no classes, layout or package version; kind "co2" for both CO2
kinds) is read as classes ``0..n-1``, the default layout and, for a CO2
model with ``init="best"``, kind "co2-best".
"""

import os
import shutil
from pathlib import Path

import numpy as np

from .. import __version__
from ..atomic import (check_free_space, check_writable_folder, full_disk_is_one_line,
                      remove_stale_temporaries, swap_folder, write_json_atomic)
from ..data.download import sha256_file
from ..errors import DataError
from ..faces.shape_prior import from_arrays, save_arrays
from ..forest._arrays import n_sparse
from ..forest import registry
from ..forest.registry import get_kind, kind_of
from ..layout import DEFAULT_LAYOUT, WindowLayout
from ..rule import DecisionRule, rule_of
from ._forest_h5 import FIX as _FIX
from ._forest_h5 import check_leaf_arrays, read_forest, verified_arrays, write_forest
from ._model_doc import (MODEL_FORMAT, MODEL_FORMAT_VERSION, check_document, kinds, parse,
                         read_json_text)

#: The files a model folder consists of (replacing a model replaces only these).
MODEL_FILES = ("model.json", "forest.h5", "shape-prior.npz", ".facesegment-outputs")
#: The landmark-conditioned shape prior of a model that has one
#: (:mod:`facesegment.faces.shape_prior`), plain arrays.
SHAPE_PRIOR_FILE = "shape-prior.npz"
#: Provenance keys that hold paths (stored relative to the model folder).
PATH_KEYS = ("windows", "truncated_from", "data", "labels")


def jsonable(value):
    """A JSON-serialisable version of a value (numpy scalars/arrays, tuples, paths).

    Parameters
    ----------
    value : object
        None, bool, str, ints and floats (numpy's too), lists, tuples, dicts
        and arrays are converted (recursively); anything else becomes ``str``.

    Returns
    -------
    object
        None, bool, str, int, float, list or dict (with str keys).
    """
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
    (e.g. CO2's nu/eta/... from ``CO2_DEFAULTS``); run-time-only ones dropped.

    Parameters
    ----------
    estimator : a forest estimator of :mod:`facesegment.forest`
        Its ``get_params(deep=False)`` and, where it has one, ``co2_params()``.

    Returns
    -------
    dict
        JSON-ready (:func:`jsonable`), without ``scheduler``, ``n_jobs`` and
        ``verbose``.
    """
    params = dict(estimator.get_params(deep=False))
    if hasattr(estimator, "co2_params"):
        params.update(estimator.co2_params())
    return {k: jsonable(v) for k, v in params.items()
            if k not in ("scheduler", "n_jobs", "verbose")}


def model_from_estimator(cls, estimator, kind, windows_meta, provenance, layout):
    """A model of class ``cls`` from a fitted forest estimator
    (:meth:`facesegment.modelio.model.Model.from_estimator`).

    Parameters
    ----------
    cls : type
        The model class (:class:`facesegment.modelio.model.Model`).
    estimator : a fitted forest of :mod:`facesegment.forest`
    kind : str or None
        Its registry kind; None: :func:`facesegment.forest.registry.kind_of`.
    windows_meta : facesegment.data.windows.WindowsMeta or None
        The training windows' class names, sampling factors, normalisation,
        layout and provenance; None: the estimator's own classes, factors 1
        and its normalisation (or 0/1).
    provenance : dict or None
        Extra provenance; the windows file's is added where not given.
    layout : WindowLayout or None
        The window layout; None: the windows file's, else the paper's layout
        when the number of features matches, else none.

    Returns
    -------
    cls instance

    Raises
    ------
    ValueError
        When the estimator is not fitted, ``kind`` is not a registry kind or
        none can be told, a regressor is given ``windows_meta``, its classes
        are not ids of the windows' class names, or the layout does not match
        its features.
    """
    from sklearn.base import is_regressor

    if not hasattr(estimator, "forest_"):
        raise ValueError("the estimator is not fitted; call fit(X, y) before saving it")
    kind = kind_of(estimator) if kind is None else get_kind(kind).name
    if kind is None:
        name = type(estimator).__name__
        kinds = ", ".join(k.name for k in registry.KINDS.values() if k.estimator == name)
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

    Parameters
    ----------
    path : str or Path
        The model folder to be written.

    Raises
    ------
    DataError
        When ``path`` is a file, an unreadable folder, a non-empty folder
        without ``model.json``, a model folder holding other files, or its
        parent is not writable.
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


def save_model(model, path):
    """:func:`save_model_folder` after a check of the free space and the removal of
    killed runs' leftovers (:func:`facesegment.modelio.model.save_model`).

    Parameters
    ----------
    model : Model
        The model to write.
    path : str or Path
        The model folder.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    DataError
        When the disk has too little free space (the arrays' uncompressed
        size), fills up while writing, or ``path`` cannot be written.
    ValueError
        When ``model.kind`` is not a registry kind.
    """
    path = Path(path)
    fix = "free disk space or choose another --out folder"
    if path.parent.is_dir():
        remove_stale_temporaries(path.parent)  # leftovers of killed runs
        # uncompressed size, an upper bound: HDF5 does not fail cleanly on a full disk
        arrays = [a for a in model.arrays if isinstance(a, np.ndarray)]
        check_free_space(path.parent, sum(a.nbytes for a in arrays) + (1 << 20), path,
                         "the model", fix)
    with full_disk_is_one_line(path, "the model", fix,
                               cleanup=[path.parent / f".{path.name}.tmp-{os.getpid()}"]):
        return save_model_folder(model, path)


def save_model_folder(model, path):
    """Write ``model`` as the folder ``path`` (``forest.h5``, ``model.json`` and,
    with a shape prior, ``shape-prior.npz``) atomically (:func:`write_folder`).

    Parameters
    ----------
    model : Model
        The model to write.
    path : str or Path
        The model folder; checked by :func:`check_model_output`.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        When ``model.kind`` is not a registry kind.
    DataError
        When :func:`check_model_output` refuses ``path`` or it cannot be written.
    """
    path = Path(path)
    _kinds_check(model.kind, path)
    check_model_output(path)

    def fill(tmp):
        """Write the model's files.

        Parameters
        ----------
        tmp : Path
            The temporary folder that replaces ``path`` afterwards.
        """
        write_forest(model, tmp / "forest.h5")
        if getattr(model, "shape_prior", None) is not None:
            np.savez_compressed(tmp / SHAPE_PRIOR_FILE, **save_arrays(model.shape_prior))
        write_json_atomic(tmp / "model.json", model_document(model, path, tmp / "forest.h5"),
                          indent=2, sort_keys=True)

    return write_folder(path, fill, "the model", "choose a writable --out folder with free space")


def write_folder(path, fill, what, fix):
    """Write the folder ``path`` atomically: ``fill(tmp)`` writes its files into a
    temporary folder beside it, which then replaces ``path`` (an existing folder
    is removed only after the rename).  A failure removes the temporary folder;
    an OSError becomes one DataError naming ``path``.

    Parameters
    ----------
    path : str or Path
        The folder to write.
    fill : callable
        ``fill(tmp)`` writes the folder's files into ``tmp`` (a Path).
    what : str
        What is written, in the error (e.g. ``"the model"``).
    fix : str
        The fix named in the error.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    DataError
        When an OSError occurs; any other exception is raised as it is.
    """
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
    """The ``model.json`` document of ``model`` saved at ``path``.

    Parameters
    ----------
    model : Model
        The model.
    path : str or Path
        The model folder (provenance paths are made relative to it).
    h5 : Path
        The written ``forest.h5`` (its size and SHA-256 are recorded, and the
        size and SHA-256 of a ``shape-prior.npz`` beside it).

    Returns
    -------
    dict
    """
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
    its metrics), else ``{}`` (no ``rule`` key in the document)."""
    rule = rule_of(model)
    return {} if rule is None else {"rule": rule.to_dict()}


def _read_rule(doc, path):
    """The decision rule of a ``model.json`` document (its ``"rule"``, else the
    alpha, beta and sigma recorded in its ``metrics``), or None."""
    try:
        if doc.get("rule") is not None:
            return DecisionRule.from_dict(doc["rule"])
        return DecisionRule.from_metrics(doc.get("metrics"), doc.get("params"))
    except (TypeError, ValueError) as exc:
        raise DataError(path / "model.json", f"has an unusable decision rule ({exc})",
                        "re-copy the model folder, or choose a rule again "
                        "(facesegment.evaluation.calibrate.choose_rule)") from None


def relative_provenance(prov, folder):
    """Paths of ``prov`` (keys :data:`PATH_KEYS`) relative to the model folder.

    Parameters
    ----------
    prov : dict
        Provenance; non-empty string values of :data:`PATH_KEYS` are made
        relative (a path on another drive is kept as given).
    folder : str or Path
        The model folder.

    Returns
    -------
    dict
        A copy of ``prov``.
    """
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


def _replace_folder(tmp, path):
    """Rename ``tmp`` to ``path``, replacing (then removing) an existing model at ``path``."""
    swap_folder(tmp, path)


def _sha256(path):
    return sha256_file(path)


# ------------------------------------------------------------------ reading

def load_model_folder(cls, path, verify=True):
    """Load and validate the forest model folder ``path`` as a ``cls``.

    Reads ``model.json`` (format versions 1 and 2), ``forest.h5`` and, when
    recorded, ``shape-prior.npz``; version 1 documents get classes ``0..n-1``
    and the default layout when the number of features matches.

    Parameters
    ----------
    cls : type
        The model class (:class:`facesegment.modelio.model.Model`).
    path : str or Path
        The model folder, or its ``model.json``.
    verify : bool, optional
        Check the sizes and SHA-256 of the files recorded in ``model.json``
        (default True).

    Returns
    -------
    cls instance
        Its ``folder`` is the model folder.

    Raises
    ------
    DataError
        When the folder or a file is missing, unreadable, truncated or
        corrupt, ``model.json`` is of another format or version or malformed,
        or the forest's arrays do not match the document.
    """
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
    arrays, mean, std, position, leaves = read_forest(h5)
    arrays = verified_arrays(arrays, h5, len(doc["class_names"]), mean, std,
                       signed=kinds()[doc["kind"]].task == "regress")
    if leaves is not None:
        check_leaf_arrays(arrays, leaves, h5)
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
    model.folder = path   # its model card is read from there when asked
    return model


def _read_shape_prior(path, doc, n_classes, verify):
    """The model's :class:`facesegment.faces.shape_prior.ShapePrior` (model.json records one)."""
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

    doc = parse(read_json_text(js), js)
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
