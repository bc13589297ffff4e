"""The ``forest.h5`` file of a model folder: writing the forest arrays, and reading
them back proved safe for the kernels (private; the folder is
:mod:`facesegment.modelio._model_files`).

Sparse oblique splits are the optional ``forest/sparse*`` datasets of
``forest.h5`` (absent: the forest has no sparse oblique splits).
int16 dense rows are stored zigzag-encoded (``forest/weights`` uint16 with the
attribute ``encoding = "zigzag-int16"``: ``z = 2 q`` for ``q >= 0``, ``-2 q - 1``
below), so the high bytes of their many small weights are zero and compress
away (gzip with shuffle); reading decodes them.  ``forest/missing_left``
(int8, one per node: the side of missing values) is optional; without it,
missing values go to the larger child.
"""

import numpy as np

from ..data._h5check import READ_ERRORS, check_file
from ..errors import DataError
from ..forest._arrays import (FOREST_ARRAY_NAMES, MISSING_ARRAY_NAME, SPARSE_ARRAY_NAMES,
                              ForestArrays, n_sparse)
from ..forest._verify import ForestProblem, verified
from ..forest.density import LEAF_ARRAY_NAMES, DensityLeaves, check_leaves
from ..position import PositionPrior, crop_rule_of
from ._model_doc import FOREST_FORMAT, MODEL_FORMAT_VERSION

#: Compression of the forest arrays: byte-shuffle + gzip level 4 (node arrays
#: shrink 3-6x; loading stays dominated by the SHA-256 check).
_COMPRESS = {"compression": "gzip", "compression_opts": 4, "shuffle": True}
#: How to fix a forest file that cannot be read.
FIX = "train it again with `facesegment train` (or point at a model folder)"
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


def read_forest(h5):
    """The arrays of the forest file ``h5`` (``forest.h5``), not yet verified.

    Parameters
    ----------
    h5 : str or Path
        The forest file.

    Returns
    -------
    arrays : facesegment.forest._arrays.ForestArrays
        Its ``forest`` group (int16 weights decoded from zigzag).
    mean, std : ndarray
        The normalisation statistics.
    position : facesegment.position.PositionPrior or None
        Its ``position`` group, checked; None when it has none.
    leaves : dict of ndarray or None
        Its ``leaves`` group (a density forest); None when it has none.

    Raises
    ------
    DataError
        When the file cannot be read, is not a forest file, lacks a dataset,
        or has an inconsistent position prior.
    """
    import h5py

    try:
        with h5py.File(h5, "r") as f:
            check_file(f, h5, FIX)
            fmt = f.attrs.get("format")
            if (fmt.decode() if isinstance(fmt, bytes) else fmt) != FOREST_FORMAT:
                raise DataError(h5, "is not a facesegment forest file", FIX)
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
                        FIX) from None


def _dataset_group(f, h5):
    import h5py

    g = f.get("forest")
    if not isinstance(g, h5py.Group):
        raise DataError(h5, "has no group forest/ (not a forest file)", FIX)
    for n in FOREST_ARRAY_NAMES:
        _dataset(g, n, h5)
    return g


def _dataset(g, name, h5):
    import h5py

    ds = g.get(name)
    if not isinstance(ds, h5py.Dataset):
        raise DataError(h5, f"has no dataset {g.name.strip('/') + '/' if g.name != '/' else ''}"
                        f"{name}", FIX)
    return ds


def _read_position(f, h5, n_classes):
    g = f["position"]
    freq, prior = _dataset(g, "freq", h5)[()], _dataset(g, "class_prior", h5)[()]
    sigma, pseudo = float(g.attrs["sigma"]), float(g.attrs["pseudo"])
    position = PositionPrior(freq, prior, sigma, pseudo, int(g.attrs["n_images"]),
                             crop_rule_of(g.attrs.get("crop_rule")))
    if position.freq.ndim != 3 or position.freq.shape[2] != n_classes \
            or position.class_prior.shape != (n_classes,):
        raise DataError(h5, f"has a position prior of shape {position.freq.shape} "
                        f"for {n_classes} classes", FIX)
    numbers = (position.freq, position.class_prior, np.array([sigma, pseudo]))
    if any(a.dtype.kind != "f" or not np.isfinite(a).all() or (a < 0).any() for a in numbers):
        raise DataError(h5, "has a position prior with negative, infinite or NaN values "
                        "(position/freq, class_prior, sigma or pseudo)", FIX)
    return position


def verified_arrays(arrays, h5, n_classes, mean, std, signed=False):
    """The forest arrays proved safe for the kernels (:mod:`facesegment.forest._verify`).

    Parameters
    ----------
    arrays : facesegment.forest._arrays.ForestArrays
        The arrays read (:func:`read_forest`).
    h5 : str or Path
        The forest file, named in errors.
    n_classes : int
        The number of ``value`` columns expected (one per class name).
    mean, std : ndarray
        The normalisation statistics: finite floats, one per feature.
    signed : bool, optional
        ``value`` holds a regression forest's leaf means (any finite number)
        rather than class probabilities (default False).

    Returns
    -------
    facesegment.forest._arrays.ForestArrays
        The verified arrays (with the format's dtypes).

    Raises
    ------
    DataError
        When an array is inconsistent, ``value`` has another number of
        columns, or ``mean``/``std`` is not one finite float per feature.
    """
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


def write_forest(model, tmp_path):
    """Write the forest of ``model`` to ``tmp_path``, a file of the temporary model
    folder that :func:`facesegment.atomic.swap_folder` later renames into place.

    Writes the ``forest`` group (int16 weights zigzag-encoded; arrays of 1024
    values or more compressed), ``mean``, ``std`` and, where the model has
    them, its ``leaves`` and ``position`` groups, without timestamps.

    Parameters
    ----------
    model : Model
        The model (``arrays``, ``mean``, ``std``, ``leaves``, ``position``).
    tmp_path : str or Path
        The file to write (created or overwritten).
    """
    import h5py

    with h5py.File(tmp_path, "w", libver="v110", track_order=False) as f:
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


def check_leaf_arrays(arrays, leaves, h5):
    """The ``leaves`` group of a density forest: every array, consistent with the trees.

    Parameters
    ----------
    arrays : facesegment.forest._arrays.ForestArrays
        The verified forest arrays.
    leaves : dict of ndarray
        The ``leaves`` group read (:func:`read_forest`).
    h5 : str or Path
        The forest file, named in the error.

    Raises
    ------
    DataError
        When a leaf array is missing or inconsistent with the trees.
    """
    missing = sorted(set(LEAF_ARRAY_NAMES) - set(leaves))
    problem = (f"leaf arrays {', '.join(missing)} are missing" if missing
               else check_leaves(arrays, DensityLeaves(**{n: leaves[n]
                                                         for n in LEAF_ARRAY_NAMES})))
    if problem:
        raise DataError(h5, f"is not a consistent density forest: {problem}",
                        "re-copy the model folder or retrain")
