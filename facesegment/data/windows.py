"""The windows file: class-balanced training windows (31x31 RGB in the paper) in one HDF5 file.

Layout (format ``"facesegment-windows"``, version :data:`FORMAT_VERSION`)::

    /windows      (N, w, w, c) uint8     chunked (1024 rows), gzip level 1; w x w
                                         windows of c channels (31, 31, 3 for RGB)
    /labels       (N,) uint8             class id of the centre pixel
    /image_index  (N,) int32             row of /sources the window was cut from
    /centers      (N, 2) int32           (row, col) of the centre pixel
    /sources      (n_images,) str        image names (relative paths, no extension)
    /skipped      (n_skipped,) str       images left out because they were unreadable
    attributes    format, format_version, layout (JSON of WindowLayout.to_dict():
                  window, channels, channel_names), class_names,
                  pixel_counts (8,) int64, class_counts (8,) int64,
                  sampling_factors (8,) float64, with_replacement (8,) bool,
                  mean (F,) float32, std (F,) float32 (F = w * w * c, 2883),
                  seed, n_windows, margin, data_root, labels_root, std_kind,
                  complete

Version 1 files (no ``layout`` attribute; 31x31 RGB windows) are read with
the default layout.

Rows are ordered by image, then class, then pixel position; consumers draw
their own random subsets (see :func:`read_rows`).  ``std`` is the population
standard deviation (divide by N) with zeros replaced by 1.  ``complete`` is set
last, just before the temporary file is renamed into place, so a file without
it was interrupted.

``sources`` and ``skipped`` are datasets rather than attributes because an
HDF5 attribute holds at most 64 KiB (13,233 LFW names do not fit).
"""

import json
import os
from dataclasses import dataclass, field

import h5py
import numpy as np

from ..classes import CLASS_NAMES, N_CLASSES
from ._h5check import READ_ERRORS, check_file
from ..errors import DataError
from ..layout import DEFAULT_LAYOUT, WindowLayout

# The writer lives in its own module; its names are part of this module's API.
from ._windows_writer import (  # noqa: F401
    CHUNK_ROWS, FORMAT, FORMAT_VERSION, WINDOW_SHAPE, BackgroundSink,
    OrderedSink, WindowsWriter)

_FIX_REGEN = "re-create it with `facesegment extract`"
#: Format versions this reader understands (1: before the layout was recorded).
READ_VERSIONS = (1, FORMAT_VERSION)


@dataclass
class WindowsMeta:
    """Everything about a windows file except the windows themselves.

    Attributes
    ----------
    class_names : tuple of str, length 8
    pixel_counts : ndarray int64 (8,)
        Eligible pixels (>= 15 px from every border, label != 255) per class
        over the images of the file.
    sampling_factors : ndarray float64 (8,)
        Share of each class among the windows divided by its share among the
        eligible pixels.
    mean, std : ndarray float32 (layout.n_features,)
        Per-feature mean and population standard deviation (zeros -> 1) over
        all windows, in the feature order ``(dy * w + dx) * c + ch`` (2883
        values for 31x31 RGB).
    sources : list of str
        Image names; ``image_index`` indexes this list.
    seed : int
    n_windows : int
    path : str
    format_version : int
    class_counts : ndarray int64 (8,)
        Windows per class.
    with_replacement : ndarray bool (8,)
        Classes whose windows were drawn with replacement (fewer eligible
        pixels than requested).
    skipped : list of str
        Images left out because they could not be read.
    attrs : dict
        Remaining attributes (margin, data_root, labels_root, ...).
    layout : WindowLayout
        Window size and channels of the windows (the paper's 31x31 RGB for
        version 1 files).
    """

    class_names: tuple
    pixel_counts: np.ndarray
    sampling_factors: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    sources: list
    seed: int
    n_windows: int
    path: str
    format_version: int = FORMAT_VERSION
    class_counts: np.ndarray = None
    with_replacement: np.ndarray = None
    skipped: list = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    layout: WindowLayout = DEFAULT_LAYOUT


@dataclass
class WindowSet:
    """Windows with their labels.

    Attributes
    ----------
    X : ndarray uint8 (N, w, w, c) or h5py.Dataset (``load=False``)
        ``(N,) + meta.layout.shape``: (N, 31, 31, 3) for RGB windows.
    y : ndarray uint8 (N,)
    image_index : ndarray int32 (N,)
    centers : ndarray int32 (N, 2)
        (row, col) of each window's centre in its image.
    meta : WindowsMeta
    """

    X: object
    y: np.ndarray
    image_index: np.ndarray
    centers: np.ndarray
    meta: WindowsMeta
    _file: object = None

    def features(self, layout=None):
        """The feature matrix a forest over ``layout`` trains on, with its statistics.

        Needs the windows in memory (``load=True``).

        Parameters
        ----------
        layout : WindowLayout, optional
            The forest's layout (default: the file's).  A pooled layout reads box
            means (``layout.pooled``).

        Returns
        -------
        X : ndarray of uint8, shape (N, n_features)
            One row per window.
        mean, std : ndarray of float32, shape (n_features,)
            Per-feature mean and std: the file's own (``meta``), or, for a pooled
            layout, those of the box means computed here.
        """
        layout = layout or self.meta.layout
        if layout.pool == 1:
            return self.X.reshape(len(self.X), -1), self.meta.mean, self.meta.std
        X = layout.pooled(self.X)
        return (X, X.mean(axis=0, dtype=np.float64).astype(np.float32),
                X.std(axis=0, dtype=np.float64).astype(np.float32))

    def close(self):
        """Close the underlying HDF5 file (only needed with ``load=False``)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# --------------------------------------------------------------------- reader

def _strings(values):
    # surrogateescape: a non-UTF-8 file name comes back as os.fsdecode gives it
    return [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
            for v in np.asarray(values).ravel()]


def _open(path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DataError(path, "windows file does not exist",
                        "create it with `facesegment extract DATA_DIR --out PATH`")
    if os.path.isdir(path):
        raise DataError(path, "is a folder, not a windows file", "give the .h5 file made by `facesegment extract`")
    if not h5py.is_hdf5(path):
        raise DataError(path, "is not an HDF5 file (not a windows file)",
                        "give the .h5 file made by `facesegment extract`")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise DataError(path, f"cannot open HDF5 file: {exc}", _FIX_REGEN) from exc


def _attr(f, path, name, shape=None, kind=None):
    if name not in f.attrs:
        raise DataError(path, f"windows file has no attribute {name!r} (incomplete or damaged)", _FIX_REGEN)
    v = f.attrs[name]
    if shape is not None:
        arr = np.asarray(v)
        if arr.shape != shape:
            raise DataError(path, f"attribute {name!r} has shape {arr.shape}, expected {shape}", _FIX_REGEN)
        if kind is not None and arr.dtype.kind not in kind:
            raise DataError(path, f"attribute {name!r} has dtype {arr.dtype}, expected a {kind} type",
                            _FIX_REGEN)
    return v


def _int_attr(f, path, name, low=None):
    """An integer attribute (a stored integer, not text), at least ``low``."""
    v = _attr(f, path, name)
    if np.ndim(v) != 0 or np.asarray(v).dtype.kind not in "iu" or (
            low is not None and int(v) < low):
        shown = v.item() if isinstance(v, np.generic) else v
        raise DataError(path, f"attribute {name!r} is {shown!r}, expected an integer"
                        f"{'' if low is None else f' >= {low}'}", _FIX_REGEN)
    return int(v)


def _damaged(path, exc):
    """The DataError of a file h5py could not read (damaged headers, chunks, names)."""
    return DataError(path, f"windows file is damaged: {type(exc).__name__}: {exc}", _FIX_REGEN)


def _check(f, path):
    """Validate the file's structure; return (WindowsMeta, n)."""
    try:
        return _check_structure(f, path)
    except DataError:
        raise
    except READ_ERRORS as exc:
        raise _damaged(path, exc) from None


def _check_structure(f, path):
    check_file(f, path, _FIX_REGEN)
    fmt = f.attrs.get("format")
    if isinstance(fmt, bytes):
        fmt = fmt.decode()
    if fmt != FORMAT:
        raise DataError(path, f"is an HDF5 file but not a facesegment windows file (format={fmt!r})",
                        "give the .h5 file made by `facesegment extract`")
    version = _int_attr(f, path, "format_version")
    if version not in READ_VERSIONS:
        raise DataError(path, f"windows file has format version {version}; this facesegment reads "
                        f"versions {' and '.join(map(str, READ_VERSIONS))}",
                        "re-create it with this version's `facesegment extract`")
    if not bool(f.attrs.get("complete", False)):
        raise DataError(path, "windows file is incomplete (no 'complete' mark: the extraction was "
                        "interrupted or failed)", _FIX_REGEN)
    n = _int_attr(f, path, "n_windows", 0)
    layout = _layout(f, path, version)
    expect = {
        "windows": ((n,) + layout.shape, np.uint8),
        "labels": ((n,), np.uint8),
        "image_index": ((n,), np.int32),
        "centers": ((n, 2), np.int32),
    }
    for name, (shape, dtype) in expect.items():
        if name not in f or not isinstance(f[name], h5py.Dataset):
            raise DataError(path, f"windows file has no dataset {name!r} (incomplete or damaged)", _FIX_REGEN)
        d = f[name]
        if d.shape != shape or d.dtype != dtype:
            raise DataError(path, f"dataset {name!r} is {d.dtype}{list(d.shape)}, expected "
                            f"{np.dtype(dtype)}{list(shape)}", _FIX_REGEN)
    if "sources" not in f:
        raise DataError(path, "windows file has no dataset 'sources' (incomplete or damaged)", _FIX_REGEN)
    class_names = tuple(_strings(_attr(f, path, "class_names", (N_CLASSES,))))
    meta = WindowsMeta(
        class_names=class_names,
        pixel_counts=np.asarray(_attr(f, path, "pixel_counts", (N_CLASSES,), "iu"), np.int64),
        sampling_factors=np.asarray(_attr(f, path, "sampling_factors", (N_CLASSES,), "f"), np.float64),
        mean=np.asarray(_attr(f, path, "mean", (layout.n_features,), "f"), np.float32),
        std=np.asarray(_attr(f, path, "std", (layout.n_features,), "f"), np.float32),
        sources=_strings(f["sources"][()]),
        seed=_int_attr(f, path, "seed"),
        n_windows=n,
        path=os.fspath(path),
        format_version=version,
        class_counts=np.asarray(_attr(f, path, "class_counts", (N_CLASSES,), "iu"), np.int64),
        with_replacement=np.asarray(_attr(f, path, "with_replacement", (N_CLASSES,), "b"), bool),
        skipped=_strings(f["skipped"][()]) if "skipped" in f else [],
        layout=layout,
    )
    if int(meta.class_counts.sum()) != n:
        raise DataError(path, f"class_counts sum to {int(meta.class_counts.sum())} but the file has "
                        f"{n} windows", _FIX_REGEN)
    if not np.all(meta.std > 0):
        raise DataError(path, "attribute 'std' has zero or negative entries", _FIX_REGEN)
    known = {"format", "format_version", "complete", "n_windows", "class_names", "pixel_counts",
             "sampling_factors", "mean", "std", "seed", "class_counts", "with_replacement",
             "layout"}
    for k, v in f.attrs.items():
        if k not in known:
            meta.attrs[k] = v.decode() if isinstance(v, bytes) else (v.item() if np.ndim(v) == 0 and
                                                                       hasattr(v, "item") else v)
    if class_names != CLASS_NAMES:
        raise DataError(path, f"windows file has classes {list(class_names)}, expected {list(CLASS_NAMES)}",
                        _FIX_REGEN)
    return meta, n


def _layout(f, path, version):
    """The file's WindowLayout: the ``layout`` attribute (version 2), else the default."""
    if version == 1:
        return DEFAULT_LAYOUT
    doc = _attr(f, path, "layout")
    try:
        return WindowLayout.from_dict(json.loads(doc.decode() if isinstance(doc, bytes) else doc))
    except (TypeError, ValueError) as exc:
        raise DataError(path, f"attribute 'layout' is not a valid window layout ({exc})",
                        _FIX_REGEN) from None


def read_windows_meta(path):
    """Read and validate a windows file's metadata (no windows are loaded).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    WindowsMeta

    Raises
    ------
    DataError
        Naming what is wrong: not HDF5, not a windows file, another format
        version, incomplete, missing datasets or attributes, wrong shapes.
    """
    with _open(path) as f:
        meta, _ = _check(f, os.fspath(path))
    return meta


def read_rows(dataset, indices, out=None):
    """Read ``dataset[indices]`` for any row indices, chunk by chunk.

    Much faster than h5py fancy indexing for many scattered rows: each chunk
    that holds a requested row is decompressed once.

    Parameters
    ----------
    dataset : h5py.Dataset or ndarray, shape (N, ...)
    indices : array-like of int, shape (k,)
        Any order, repeats allowed.
    out : ndarray, shape (k, ...), optional

    Returns
    -------
    ndarray, shape (k, ...), rows in the order of ``indices``.
    """
    idx = np.asarray(indices, dtype=np.int64).ravel()
    n = dataset.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"indices must lie in [0, {n}); got min {idx.min()}, max {idx.max()}")
    if out is None:
        out = np.empty((idx.size,) + dataset.shape[1:], dtype=dataset.dtype)
    if idx.size == 0:
        return out
    if isinstance(dataset, np.ndarray):
        np.take(dataset, idx, axis=0, out=out)
        return out
    rows = (dataset.chunks or (CHUNK_ROWS,))[0]
    order = np.argsort(idx, kind="stable")
    sidx = idx[order]
    block = np.searchsorted(sidx, np.arange(0, n + rows, rows))
    for b in range(len(block) - 1):
        lo, hi = block[b], block[b + 1]
        if lo == hi:
            continue
        start = b * rows
        chunk = dataset[start:min(start + rows, n)]
        out[order[lo:hi]] = chunk[sidx[lo:hi] - start]
    return out


def read_windows(path, load=True, indices=None):
    """Read a windows file.

    Parameters
    ----------
    path : str or Path
    load : bool
        True: ``X`` is an in-memory uint8 ndarray ``(N,) + meta.layout.shape``
        (``(N, 31, 31, 3)`` for RGB windows).  False:
        ``X`` is the open h5py dataset (use :func:`read_rows` or slicing; close
        the WindowSet, or use it as a context manager, when done).
    indices : array-like of int, optional
        Read only these rows (in this order); ``y``, ``image_index`` and
        ``centers`` are subset alike.  Implies ``load=True``.

    Returns
    -------
    WindowSet

    Raises
    ------
    DataError
        When the file is not a complete, valid windows file (see
        :func:`read_windows_meta`).
    """
    path = os.fspath(path)
    idx = None
    if indices is not None:
        idx = np.asarray(indices)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise ValueError(f"indices must be a 1-D array of row numbers; got shape {idx.shape} "
                             f"dtype {idx.dtype}")
    f = _open(path)
    try:
        meta, n = _check(f, path)
        if idx is not None and idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"indices must lie in [0, {n}); got min {idx.min()}, max {idx.max()}")
        try:
            y, image_index, centers = _rows(f, path, meta, n, idx)
            if idx is not None:
                X = read_rows(f["windows"], idx)
            elif load:
                X = np.empty((n,) + meta.layout.shape, np.uint8)
                if n:
                    f["windows"].read_direct(X)
            else:
                return WindowSet(f["windows"], y, image_index, centers, meta, _file=f)
        except DataError:
            raise
        except READ_ERRORS as exc:
            raise _damaged(path, exc) from None
    except BaseException:
        f.close()
        raise
    f.close()
    return WindowSet(X, y, image_index, centers, meta)


def _rows(f, path, meta, n, idx):
    """``(labels, image_index, centers)`` of the rows ``idx`` (all: None), checked:
    class ids within the class names, image indices within ``sources``."""
    y, image_index, centers = f["labels"][()], f["image_index"][()], f["centers"][()]
    if idx is not None:
        y, image_index, centers = y[idx], image_index[idx], centers[idx]
    if y.size and int(y.max()) >= len(meta.class_names):
        raise DataError(path, f"dataset 'labels' holds class id {int(y.max())}; the file has "
                        f"{len(meta.class_names)} classes", _FIX_REGEN)
    if image_index.size and (int(image_index.min()) < 0
                             or int(image_index.max()) >= len(meta.sources)):
        bad = int(image_index.min()) if int(image_index.min()) < 0 else int(image_index.max())
        raise DataError(path, f"dataset 'image_index' holds {bad}, outside the "
                        f"{len(meta.sources)} images of 'sources'", _FIX_REGEN)
    return y, image_index, centers


__all__ = ["FORMAT", "FORMAT_VERSION", "READ_VERSIONS", "OrderedSink", "BackgroundSink", "WindowsMeta", "WindowSet", "WindowsWriter",
           "read_windows", "read_windows_meta", "read_rows"]
