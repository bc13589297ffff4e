"""A trained segmentation model: a forest plus everything needed to use it.

A model is a self-describing folder (never a pickle)::

    models/NAME/
        model.json   kind, parameters, classes, sampling factors (priors),
                     provenance of the training windows, metrics, timings,
                     format version
        forest.h5    the flat forest arrays (see facesegment.forest._arrays)
                     and the normalisation statistics (mean, std)

``load_model`` validates the folder and says what is wrong with one that is not
a model, is truncated, or has another format version.
"""

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import DataError
from .forest._arrays import FOREST_ARRAY_NAMES, ForestArrays

MODEL_FORMAT_VERSION = 1
KINDS = ("axis", "two-probe", "co2")


@dataclass
class Model:
    """A fitted forest with its metadata.

    Attributes
    ----------
    kind : {"axis", "two-probe", "co2"}
    params : dict
        The estimator's ``get_params()`` (JSON-serialisable).
    arrays : ForestArrays
        The fitted forest (raw-feature splits).
    class_names : tuple of str
    sampling_factors : ndarray float64 (n_classes,)
        Share of each class among the training windows divided by its share
        among eligible pixels; prior reweighting divides probabilities by it.
    mean, std : ndarray float32 (n_features,)
        Per-feature normalisation statistics of the training windows.
    provenance : dict
        Windows file, its sources, seed, number of windows, etc.
    metrics : dict
        Training time, model size, evaluation results added later.
    """

    kind: str
    params: dict
    arrays: ForestArrays
    class_names: tuple
    sampling_factors: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    provenance: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)

    @classmethod
    def from_estimator(cls, estimator, kind, windows_meta=None, provenance=None):
        """A Model from a fitted forest estimator.

        Parameters
        ----------
        estimator : AxisAlignedForest, TwoProbeForest or CO2Forest (fitted)
        kind : {"axis", "two-probe", "co2"}
        windows_meta : facesegment.windows.WindowsMeta, optional
            Class names, sampling factors, normalisation and provenance of the
            training windows (otherwise: the 8 classes if the labels are 0..7,
            factors 1, the estimator's own normalisation or 0/1).
        provenance : dict, optional
            Extra provenance (JSON-serialisable) stored in model.json.

        Integer classes absent from the training windows get zero columns, so
        ``arrays.value`` always has one column per class name.
        """
        return _from_estimator(cls, estimator, kind, windows_meta, provenance)

    def to_estimator(self):
        """A fitted estimator of the model's kind, ready for ``predict_proba``."""
        return _to_estimator(self)


MODEL_FORMAT = "facesegment-model"
FOREST_FORMAT = "facesegment-forest"
_ESTIMATORS = {"axis": "AxisAlignedForest", "two-probe": "TwoProbeForest", "co2": "CO2Forest"}


def _jsonable(value):
    """A JSON-serialisable version of a parameter value (objects become strings)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _estimator_class(kind):
    from . import forest

    return getattr(forest, _ESTIMATORS[kind])


def _from_estimator(cls, estimator, kind, windows_meta=None, provenance=None):
    from .classes import CLASS_NAMES

    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} must be one of {', '.join(KINDS)}")
    if not hasattr(estimator, "forest_"):
        raise ValueError("the estimator is not fitted; call fit(X, y) before saving it")
    arrays = estimator.forest_
    classes = np.asarray(estimator.classes_)
    if windows_meta is not None:
        class_names = tuple(str(c) for c in windows_meta.class_names)
    elif classes.dtype.kind in "iu" and classes.size and classes.max() < len(CLASS_NAMES):
        class_names = CLASS_NAMES
    else:
        class_names = tuple(str(c) for c in classes)
    if classes.dtype.kind in "iu" and (classes.size == 0 or classes.max() < len(class_names)):
        if len(classes) != len(class_names) or (classes != np.arange(len(classes))).any():
            # some classes were absent from the training windows: one column per class id
            value = np.zeros((arrays.n_nodes, len(class_names)), dtype=np.float32)
            value[:, classes] = arrays.value
            arrays = arrays._replace(value=value)
    elif len(class_names) != arrays.n_classes:
        raise ValueError(f"the estimator has {arrays.n_classes} classes but "
                         f"{len(class_names)} class names")
    p = arrays.n_features
    if windows_meta is not None:
        sf = np.asarray(windows_meta.sampling_factors, dtype=np.float64)
        mean = np.asarray(windows_meta.mean, dtype=np.float32)
        std = np.asarray(windows_meta.std, dtype=np.float32)
    else:
        sf = np.ones(len(class_names))
        mean = getattr(estimator, "feature_mean_", np.zeros(p, np.float32))
        std = getattr(estimator, "feature_std_", np.ones(p, np.float32))
    prov = dict(provenance or {})
    if windows_meta is not None:
        prov.setdefault("windows", str(getattr(windows_meta, "path", "")))
        prov.setdefault("n_windows", int(getattr(windows_meta, "n_windows", 0)))
        prov.setdefault("windows_seed", _jsonable(getattr(windows_meta, "seed", None)))
        prov.setdefault("n_sources", len(getattr(windows_meta, "sources", []) or []))
    stats = getattr(estimator, "tree_stats_", None) or []
    metrics = {}
    if stats:
        metrics["tree_seconds"] = [round(float(s["seconds"]), 4) for s in stats]
        metrics["fit_seconds_sum"] = round(float(sum(s["seconds"] for s in stats)), 4)
    metrics["n_nodes"] = arrays.n_nodes
    metrics["n_oblique"] = int(arrays.weights.shape[0])
    params = {k: _jsonable(v) for k, v in estimator.get_params().items()
              if k not in ("scheduler", "n_jobs", "verbose")}
    return cls(kind=kind, params=params, arrays=arrays, class_names=tuple(class_names),
               sampling_factors=sf, mean=np.asarray(mean, np.float32),
               std=np.asarray(std, np.float32), provenance=_jsonable(prov), metrics=metrics)


def _to_estimator(self):
    """A fitted estimator of the model's kind (``predict_proba`` ready)."""
    cls = _estimator_class(self.kind)
    valid = cls()._get_param_names()
    est = cls(**{k: v for k, v in self.params.items() if k in valid})
    est.forest_ = self.arrays
    est.classes_ = np.arange(self.arrays.n_classes)
    est.n_classes_ = self.arrays.n_classes
    est.n_features_in_ = self.arrays.n_features
    if self.kind == "co2":
        est.feature_mean_ = self.mean
        est.feature_std_ = self.std
    return est


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _write_forest_h5(model, path):
    import h5py

    with h5py.File(path, "w", libver="v110", track_order=False) as f:
        f.attrs["format"] = FOREST_FORMAT
        f.attrs["format_version"] = MODEL_FORMAT_VERSION
        g = f.create_group("forest", track_order=False)
        for name in FOREST_ARRAY_NAMES:
            g.create_dataset(name, data=np.ascontiguousarray(getattr(model.arrays, name)),
                             track_times=False)
        f.create_dataset("mean", data=np.asarray(model.mean, np.float32), track_times=False)
        f.create_dataset("std", data=np.asarray(model.std, np.float32), track_times=False)


def check_model_output(path):
    """Fail early (DataError) when a model cannot be saved as the folder ``path``.

    ``path`` may be new, an empty folder or an existing model folder (which
    :func:`save_model` replaces); any other file or folder is kept, never
    replaced.  The parent folder is created and must be writable.
    """
    path = Path(path)
    fix = "choose a writable --out folder, e.g. models/co2-16"
    if path.exists() and not path.is_dir():
        raise DataError(path, "exists and is not a model folder", "give a new folder name")
    try:
        if path.is_dir() and any(path.iterdir()) and not (path / "model.json").is_file():
            raise DataError(path, "is a folder that holds no model.json; it would be replaced",
                            "give a new folder name or an existing model folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.parent / f".{path.name}.probe-{os.getpid()}"
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise DataError(path, f"cannot write the model ({exc.strerror or exc})", fix) from exc


def save_model(model, path):
    """Write ``model`` as a folder ``path`` (``model.json`` + ``forest.h5``), atomically.

    The folder is written under a temporary name beside ``path`` and renamed;
    an existing model at ``path`` is replaced (any other folder is not: see
    :func:`check_model_output`).  ``forest.h5`` holds no timestamps, so the
    same forest gives the same bytes.

    Raises
    ------
    DataError
        When ``path`` cannot be written; nothing is left behind then.
    """
    path = Path(path)
    if model.kind not in KINDS:
        raise ValueError(f"model.kind={model.kind!r} must be one of {', '.join(KINDS)}")
    check_model_output(path)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        _write_model_folder(model, tmp)
        _replace_folder(tmp, path)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(path, f"cannot write the model ({exc.strerror or exc})",
                        "choose a writable --out folder with free space") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _write_model_folder(model, folder):
    """Write ``forest.h5`` and ``model.json`` into the (new, empty) ``folder``."""
    h5 = folder / "forest.h5"
    _write_forest_h5(model, h5)
    a = model.arrays
    doc = {
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "kind": model.kind,
        "params": _jsonable(model.params),
        "class_names": list(model.class_names),
        "sampling_factors": [float(s) for s in np.asarray(model.sampling_factors)],
        "n_trees": a.n_trees, "n_nodes": a.n_nodes, "n_classes": a.n_classes,
        "n_features": a.n_features, "n_oblique": int(a.weights.shape[0]),
        "weight_dtype": str(a.weights.dtype),
        "max_depth": int(a.depth.max()) if a.n_nodes else 0,
        "provenance": _jsonable(model.provenance),
        "metrics": _jsonable(model.metrics),
        "files": {"forest.h5": {"bytes": h5.stat().st_size, "sha256": _sha256(h5)}},
    }
    with open(folder / "model.json", "w") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write("\n")


def _replace_folder(tmp, path):
    """Rename ``tmp`` to ``path``, replacing (then removing) an existing ``path``."""
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


def load_model(path, verify=True):
    """Load and validate a model folder written by :func:`save_model`.

    Parameters
    ----------
    path : str or Path
        The model folder (or its ``model.json``).
    verify : bool
        Check the size and SHA-256 of ``forest.h5`` recorded in ``model.json``.

    Raises
    ------
    DataError
        When the folder is not a model, is truncated or corrupt, or has another
        format version.
    """
    import h5py

    from .errors import DataError

    path = Path(path)
    if path.is_file() and path.name == "model.json":
        path = path.parent
    fix = "train it again with `facesegment train` (or point at a model folder)"
    js = path / "model.json"
    if not path.is_dir():
        raise DataError(path, "is not a model folder (no such folder)", fix)
    if not js.is_file():
        raise DataError(path, "is not a model: it has no model.json", fix)
    try:
        doc = json.loads(js.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(js, f"is not valid JSON ({exc.__class__.__name__}: {exc})", fix) from None
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise DataError(js, f"is not a facesegment model (format is "
                        f"{doc.get('format') if isinstance(doc, dict) else None!r})", fix)
    if doc.get("format_version") != MODEL_FORMAT_VERSION:
        raise DataError(js, f"has model format version {doc.get('format_version')!r}; this "
                        f"facesegment reads version {MODEL_FORMAT_VERSION}",
                        "retrain the model with this version of facesegment")
    missing = [k for k in ("kind", "params", "class_names", "sampling_factors", "files")
               if k not in doc]
    if missing or doc["kind"] not in KINDS:
        raise DataError(js, f"is incomplete or has an unknown kind (missing: {missing}, "
                        f"kind {doc.get('kind')!r})", fix)
    h5 = path / "forest.h5"
    if not h5.is_file():
        raise DataError(path, "is missing forest.h5 (an interrupted copy?)", fix)
    rec = doc["files"].get("forest.h5", {})
    if verify and rec:
        size = h5.stat().st_size
        if size != rec.get("bytes"):
            raise DataError(h5, f"is truncated or altered: {size} bytes, model.json "
                            f"records {rec.get('bytes')}", "re-copy the model folder or retrain")
        if rec.get("sha256") and _sha256(h5) != rec["sha256"]:
            raise DataError(h5, "is corrupt: its SHA-256 differs from model.json's",
                            "re-copy the model folder or retrain")
    try:
        with h5py.File(h5, "r") as f:
            if f.attrs.get("format") != FOREST_FORMAT:
                raise DataError(h5, "is not a facesegment forest file", fix)
            arrays = ForestArrays(**{n: f["forest"][n][()] for n in FOREST_ARRAY_NAMES})
            mean = f["mean"][()]
            std = f["std"][()]
    except (OSError, KeyError) as exc:
        raise DataError(h5, f"cannot be read as a forest ({exc})", fix) from None
    _check_arrays(arrays, h5, len(doc["class_names"]))
    return Model(kind=doc["kind"], params=doc["params"], arrays=arrays,
                 class_names=tuple(doc["class_names"]),
                 sampling_factors=np.asarray(doc["sampling_factors"], dtype=np.float64),
                 mean=mean, std=std, provenance=doc.get("provenance", {}),
                 metrics=doc.get("metrics", {}))


def _check_arrays(a, path, n_classes):
    from .errors import DataError

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
    if problem:
        raise DataError(path, f"is not a consistent forest: {problem}",
                        "re-copy the model folder or retrain")
