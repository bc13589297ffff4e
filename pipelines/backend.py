"""The pipeline's only contact with the facesegment library.

Every call into another module goes through a function here, so the stages
read as the experiment and the library's signatures live in one place.
"""

import inspect
import os
import resource
import socket
import time
from pathlib import Path

from facesegment.errors import DataError, FaceSegmentError


class NoDataError(FaceSegmentError):
    """No labelled data is available and none can be downloaded."""


NO_DATA_HELP = (
    "point the pipeline at a labelled folder (NAME.jpg beside NAME_label.png, with "
    "train/ and test/ subfolders or one folder split by person), e.g. "
    "`make all DATA=../shared/data/faces300w` or "
    "`python -m pipelines.run --data ../shared/data/faces300w all`"
)


# ----------------------------------------------------------------- the data

def online(host="ndownloader.figshare.com", port=443, timeout=3.0):
    """True when ``host:port`` accepts a TCP connection within ``timeout`` s."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def fetch_lfw(dest, labels, workers=None, scheduler=None):
    """Download LFW into ``dest`` (once) and label it with dlib into ``labels``.

    Returns ``(image_root, labels_root)``.  Offline with nothing downloaded yet:
    raises NoDataError at once (no download timeout) with the way out.
    Labelling resumes: images already labelled are skipped.
    """
    from facesegment.data import download
    from facesegment.faces import label
    from facesegment.parallel import default_workers

    src = download.LFW_SOURCES["funneled"]
    done = (Path(dest) / f".{src.filename}.complete").exists()
    if not done and not online():
        raise NoDataError(
            f"no data: DATA is not set, {dest} does not exist and LFW cannot be "
            f"downloaded (this machine is offline); {NO_DATA_HELP}")
    try:
        root = download.fetch_lfw(dest)
    except FaceSegmentError as exc:
        raise NoDataError(f"no data: getting LFW failed ({exc}); {NO_DATA_HELP}") from exc
    label.label_folder(root, labels, scheduler=scheduler,
                       n_workers=workers or default_workers())
    return str(root), str(labels)


def split_dataset(root, labels, n_validation, test_fraction, seed):
    """``(train, validation, test, summary)`` lists of FaceRecord.

    ``train/`` and ``test/`` folders are used as given, else a seeded split by
    person (facesegment.data.splits), the same as ``facesegment data splits``: the
    split is made over every image, labelled or not.  With a separate label
    tree (``labels``), images the landmark detector missed (its report lists
    them) are then left out and counted in the summary; any other image
    without a label map is an error naming it.
    """
    from facesegment.data import splits

    try:
        s = splits.split_dataset(root, labels or None, test_fraction=test_fraction,
                                 n_validation=n_validation, seed=seed, require_labels=True)
        if not labels:
            return list(s.train), list(s.validation), list(s.test), s.summary()
        # the same split as `facesegment data splits` (computed over every image,
        # labelled or not), then the faces the labeller skipped are left out
        every = splits.split_dataset(root, labels, test_fraction=test_fraction,
                                     n_validation=n_validation, seed=seed,
                                     require_labels=False)
    except ValueError as exc:
        if isinstance(exc, FaceSegmentError):
            raise
        raise DataError(root, f"cannot be split: {exc}",
                        "change [data] n_validation / test_fraction") from exc
    dropped = sum(map(len, (every.train, every.validation, every.test))) - sum(
        map(len, (s.train, s.validation, s.test)))
    return (list(s.train), list(s.validation), list(s.test),
            s.summary() + f"; {dropped} images without a label map left out")


def records_from_json(items):
    from facesegment.data.datasets import FaceRecord

    return [FaceRecord(*it) for it in items]


def load_face(record):
    from facesegment.data.datasets import load_face as _load

    return _load(record)


# -------------------------------------------------------------- extraction

def extract(records, out, n_windows, seed, workers=None, scheduler=None):
    """Sample ``n_windows`` class-balanced windows from ``records`` into ``out``."""
    from facesegment.data import extract as ex

    return ex.extract_windows(records, out, n_windows=n_windows, seed=seed,
                              n_workers=workers or None, scheduler=scheduler or None)


def read_windows(path):
    from facesegment.data.windows import read_windows as _read

    return _read(path, load=True)


# ------------------------------------------------------------------ forests

def estimator_class(kind):
    from facesegment.forest.registry import get_kind

    return get_kind(kind).estimator_class


def make_estimator(kind, params, n_trees, seed, workers=None, scheduler=None):
    """An unfitted estimator of ``kind`` (a registry row) with ``params``."""
    from facesegment.forest.registry import get_kind

    row = get_kind(kind)
    valid = row.estimator_class().get_params()
    p = {k: v for k, v in params.items() if k not in row.fixed}
    p["n_estimators"] = n_trees
    p["random_state"] = seed
    if "n_jobs" in valid:
        p["n_jobs"] = workers or -1
    if "scheduler" in valid and scheduler:
        p["scheduler"] = scheduler
    if "verbose" in valid and "verbose" not in p:
        p["verbose"] = 1
    return row.make(**p)


def cpu_seconds():
    """CPU time (user + system) of this process so far, all threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def fit(est, ws, layout=None):
    """Fit on a WindowSet; return ``(wall seconds, CPU seconds)``.  Estimators
    that normalise (CO2) get the windows file's feature mean and std.  A pooled
    ``layout`` (``pool > 1``) fits on the windows' box means instead
    (``layout.pooled``), with their own mean and std."""
    X, mean, std = ws.features(layout)
    extra = {}
    if "feature_mean" in inspect.signature(est.fit).parameters:
        extra = {"feature_mean": mean, "feature_std": std}
    c0, t0 = cpu_seconds(), time.perf_counter()
    est.fit(X, ws.y, **extra)
    return time.perf_counter() - t0, cpu_seconds() - c0


def to_model(est, kind, meta, provenance, layout=None):
    """A Model of the registry kind ``kind`` trained on windows described by ``meta``
    (read through ``layout``, default the windows')."""
    from facesegment.modelio.model import Model

    return Model.from_estimator(est, kind, meta, provenance=dict(provenance or {}),
                                layout=layout)


def save_model(model, path):
    from facesegment.modelio.model import save_model as _save

    _save(model, path)


def load_model(path):
    from facesegment.models import load_model as _load

    return _load(path)


def subforest(model, start, stop):
    """A Model made of trees ``start..stop-1`` of ``model`` (nothing is copied
    for ``start == 0`` except the node prefix; trees are independent)."""
    from facesegment.forest import ForestArrays

    a = model.arrays
    if start == 0:
        end = int(a.roots[stop]) if stop < a.n_trees else a.n_nodes
        sl = slice(0, end)
        nodes = {k: getattr(a, k)[sl] for k in ("left", "right", "feature", "feature2",
                                                 "oblique", "threshold", "value", "depth",
                                                 "n_samples")}
        if (nodes["left"] >= end).any() or (nodes["right"] >= end).any():
            raise ValueError("trees are not stored one after another; cannot truncate")
        obl = nodes["oblique"]
        n_obl = int(obl.max()) + 1 if obl.size and obl.max() >= 0 else 0
        arrays = ForestArrays(roots=a.roots[:stop], weights=a.weights[:n_obl], **nodes)
        if a.sparse is not None:
            sp = a.sparse[sl]
            n_sp = int(sp.max()) + 1 if sp.size and sp.max() >= 0 else 0
            nnz = int(a.sparse_ptr[n_sp])
            arrays = arrays._replace(sparse=sp, sparse_ptr=a.sparse_ptr[:n_sp + 1],
                                     sparse_index=a.sparse_index[:nnz],
                                     sparse_weight=a.sparse_weight[:nnz])
        if a.missing_left is not None:
            arrays = arrays._replace(missing_left=a.missing_left[sl])
    else:
        arrays = a._replace(roots=a.roots[start:stop])
    return type(model)(**{**model.__dict__, "arrays": arrays,
                          "metrics": dict(model.metrics)})


def model_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for fn in files:
            total += os.path.getsize(os.path.join(dirpath, fn))
    return total


def split_times(est):
    """Where the trees' fit time went, summed over trees (seconds of each tree's
    own thread): ``{"trees", "split_search", "init", "oblique"}`` (``split_search``
    is the split families' ``find``; for CO2 ``init`` the univariate and two-probe
    starts, ``oblique`` the optimisation), or None."""
    stats = getattr(est, "tree_stats_", None)
    if not stats or any("t_split" not in st for st in stats):
        return None
    return {"trees": round(sum(float(st["seconds"]) for st in stats), 2),
            **{k: round(sum(float(st.get(t, 0.0)) for st in stats), 2)
               for k, t in (("split_search", "t_split"), ("init", "t_init"),
                            ("oblique", "t_oblique"))}}


def tree_times(est):
    """Per-tree fit seconds (``tree_stats_[i]["seconds"]``), or None."""
    stats = getattr(est, "tree_stats_", None)
    if not stats:
        return None
    return [round(float(st["seconds"]), 3) for st in stats]
