"""Datasets of the UCI harness (``python -m pipelines.uci``): finding, checking,
loading, scaling and splitting them.

A dataset is a folder holding ``train.npz`` and ``test.npz`` (the format of
``../shared/data/uci``: arrays ``X`` (n, p) numeric, ``y`` (n,) integer labels,
optionally ``classes``).  :func:`find_datasets` lists the folders under a root
that hold either file; :func:`check_dataset` reads only the array headers and
the labels (fast) and :func:`load_dataset` everything, both raising
:class:`~facesegment.errors.DataError` naming the file and what is wrong.

Scaling (the paper, section 6.1: "either [0,1] or zero mean and unit standard
deviation") is fitted on the rows a forest is trained on and applied to the
rows it is evaluated on (:func:`fit_scaler`); the validation split is
stratified and seeded (:func:`stratified_split`).
"""

import hashlib
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from facesegment.errors import DataError

FILES = ("train.npz", "test.npz")
#: The two scalings of the paper: [0, 1] per feature, or zero mean / unit variance.
SCALINGS = ("minmax", "standard")
FIX = "a dataset folder holds train.npz and test.npz with arrays X (n, p) and y (n,)"


def find_datasets(root):
    """Sorted names of the folders under ``root`` holding train.npz or test.npz."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, "no such folder of datasets",
                        "give --root a folder of NAME/train.npz + NAME/test.npz")
    return sorted(d.name for d in root.iterdir()
                  if d.is_dir() and any((d / f).is_file() for f in FILES))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _headers(path):
    """``{array name: (shape, dtype)}`` of an .npz from the .npy headers only."""
    out = {}
    try:
        with zipfile.ZipFile(path) as z:
            for member in z.namelist():
                if not member.endswith(".npy"):
                    continue
                with z.open(member) as fh:
                    version = np.lib.format.read_magic(fh)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(fh)
                out[member[:-4]] = (shape, dtype)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise DataError(path, f"cannot read it as an .npz file ({exc})", FIX) from exc
    return out


def _check_arrays(path, heads, y=None):
    """Shapes and dtypes of one file; returns (n, p)."""
    for name in ("X", "y"):
        if name not in heads:
            raise DataError(path, f"has no array {name!r} (arrays: "
                                  f"{', '.join(sorted(heads)) or 'none'})", FIX)
    (xs, xd), (ys, yd) = heads["X"], heads["y"]
    if len(xs) != 2 or xs[0] < 1 or xs[1] < 1:
        raise DataError(path, f"X must be a non-empty 2-D array (n, p), got shape {xs}", FIX)
    if xd.kind not in "biuf":
        raise DataError(path, f"X must be numeric, got dtype {xd}", FIX)
    if len(ys) != 1:
        raise DataError(path, f"y must be 1-D, got shape {ys}", FIX)
    if yd.kind not in "iu":
        raise DataError(path, f"y must hold integer class labels, got dtype {yd}", FIX)
    if xs[0] != ys[0]:
        raise DataError(path, f"X has {xs[0]} rows but y has {ys[0]} labels", FIX)
    return xs


def check_dataset(folder):
    """Fast check of a dataset folder (headers only); returns ``{file: (n, p)}``.

    Raises DataError naming the file: missing, not an .npz, no X / y, X not
    2-D numeric, y not 1-D integer, X and y of different lengths, train and
    test with different numbers of features.
    """
    folder = Path(folder)
    shapes = {}
    for f in FILES:
        path = folder / f
        if not path.is_file():
            raise DataError(path, "missing", FIX)
        shapes[f] = _check_arrays(path, _headers(path))
    (_, p), (_, pt) = shapes["train.npz"], shapes["test.npz"]
    if p != pt:
        raise DataError(folder / "test.npz", f"X has {pt} features but train.npz has {p}", FIX)
    return shapes


@dataclass
class Dataset:
    """One dataset in memory (X as stored: float32 or uint8)."""

    name: str
    folder: Path
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    sha256: dict = field(default_factory=dict)

    @property
    def n_features(self):
        return self.X.shape[1]

    @property
    def n_classes(self):
        return int(np.unique(self.y).size)

    def info(self):
        return {"name": self.name, "n_train": int(self.X.shape[0]),
                "n_test": int(self.X_test.shape[0]), "n_classes": self.n_classes,
                "n_features": int(self.n_features), "sha256": dict(self.sha256)}


def load_dataset(folder):
    """Load and check a dataset folder (see :func:`check_dataset`), plus: finite
    values and at least two classes in train.npz."""
    folder = Path(folder)
    check_dataset(folder)
    arrays = {}
    for f in FILES:
        path = folder / f
        try:
            with np.load(path, allow_pickle=False) as z:
                X, y = np.asarray(z["X"]), np.asarray(z["y"])
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise DataError(path, f"cannot read it ({exc})", FIX) from exc
        _check_arrays(path, {"X": (X.shape, X.dtype), "y": (y.shape, y.dtype)})
        if X.dtype.kind == "f" and not np.isfinite(X).all():
            raise DataError(path, "X holds NaN or infinite values", "impute or drop them first")
        arrays[f] = (X, y.astype(np.int64))
    (X, y), (Xt, yt) = arrays["train.npz"], arrays["test.npz"]
    if np.unique(y).size < 2:
        raise DataError(folder / "train.npz", "y has fewer than two classes", FIX)
    return Dataset(folder.name, folder, X, y, Xt, yt,
                   {f: sha256_file(folder / f) for f in FILES})


# ------------------------------------------------------------------ scaling

def fit_scaler(X, how):
    """``(offset, scale)`` float64 (p,) so that ``(X - offset) / scale`` is the
    scaling ``how`` fitted on ``X``: "minmax" to [0, 1], "standard" to zero mean
    and unit variance.  Constant features get scale 1."""
    if how not in SCALINGS:
        raise ValueError(f"scaling {how!r}: use one of {', '.join(SCALINGS)}")
    if how == "minmax":
        lo, hi = X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64)
        off, sc = lo, hi - lo
    else:
        off = np.zeros(X.shape[1])
        sq = np.zeros(X.shape[1])
        for s in range(0, X.shape[0], 65536):  # float64 sums in chunks: bounded memory
            b = X[s:s + 65536].astype(np.float64)
            off += b.sum(axis=0)
            sq += (b * b).sum(axis=0)
        off /= X.shape[0]
        sc = np.sqrt(np.maximum(sq / X.shape[0] - off * off, 0.0))
    sc = np.where(sc > 1e-12 * np.maximum(1.0, np.abs(off)), sc, 1.0)
    return off, sc


def apply_scaler(X, scaler):
    """``(X - offset) / scale`` as C-contiguous float32."""
    off, sc = scaler
    out = np.empty(X.shape, dtype=np.float32)
    for s in range(0, X.shape[0], 65536):
        out[s:s + 65536] = (X[s:s + 65536] - off) / sc
    return out


# ---------------------------------------------------------------- splitting

def stratified_split(y, fraction, seed):
    """``(fit_idx, val_idx)`` sorted int64: ``round(fraction * n_c)`` rows of each
    class held out (none for a class with fewer than 2 rows, at least one row
    kept for training), drawn with ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    val = []
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        k = min(int(round(fraction * rows.size)), rows.size - 1)
        if k > 0:
            val.append(rng.permutation(rows)[:k])
    val = np.sort(np.concatenate(val)) if val else np.zeros(0, np.int64)
    fit = np.setdiff1d(np.arange(y.size), val)
    return fit.astype(np.int64), val.astype(np.int64)


def stratified_subsample(idx, y, max_rows, seed):
    """At most ``max_rows`` of the rows ``idx`` (sorted), keeping the class
    proportions (every class keeps at least one row); all of them when
    ``max_rows`` is 0 or not smaller."""
    idx = np.asarray(idx)
    if not max_rows or idx.size <= max_rows:
        return idx
    rng = np.random.default_rng(seed)
    keep = []
    for c in np.unique(y[idx]):
        rows = idx[y[idx] == c]
        k = max(1, int(round(max_rows * rows.size / idx.size)))
        keep.append(rng.permutation(rows)[:k])
    return np.sort(np.concatenate(keep))


def folder_label(path):
    """``path`` relative to the working directory when that is shorter."""
    rel = os.path.relpath(path)
    return rel if len(rel) < len(str(path)) else str(path)
