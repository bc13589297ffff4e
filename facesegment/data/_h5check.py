"""HDF5 hygiene: a model or windows file reads only its own bytes, and no more
than it holds (shared by :mod:`facesegment.modelio._forest_h5` and
:mod:`facesegment.data.windows`).

HDF5 can make a dataset read from elsewhere: an *external link* points into
another file, *external raw storage* keeps a dataset's bytes in other files
(any path, ``/dev/urandom`` included) and a *virtual dataset* maps other
files' datasets.  facesegment writes none of them, so :func:`check_file`
refuses them all (and soft links, and user-defined links) before anything is
read.  It also bounds what reading would allocate: a dataset's declared size
must be backed by stored data (a contiguous dataset by its bytes inside the
file; a chunked one by every one of its chunks, compressed by at most
:data:`MAX_RATIO`, with filters facesegment uses), so a dataset declaring 2**31
rows with no stored chunks is refused instead of filled with zeros in memory;
every attribute's declared size is bounded by the file's size.
"""

import os

import numpy as np

from ..errors import DataError

#: Largest compression ratio of a stored chunk (deflate's best is 1032:1).
MAX_RATIO = 1100
#: HDF5 filters a facesegment file may use: deflate, shuffle, fletcher32, LZF.
ALLOWED_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32", 32000: "lzf"}
#: Most groups and datasets a facesegment file holds (it has a dozen or so).
MAX_OBJECTS = 10000
#: Deepest nesting of groups (facesegment files nest one or two).
MAX_NESTING = 16


def check_file(f, path, fix):
    """Refuse links, storage and sizes that would read outside ``f`` or more than it holds.

    Every group, dataset and attribute is checked (see the module's description)
    before anything is read.

    Parameters
    ----------
    f : h5py.File
        The open file.
    path : str or path-like
        Its path (its size bounds what may be declared), named in the message.
    fix : str
        The DataError's advice.

    Returns
    -------
    int
        The file's size in bytes.

    Raises
    ------
    DataError
        Naming ``path`` and the object: a link other than a hard link, a group
        linked twice or nested more than :data:`MAX_NESTING` deep, more than
        :data:`MAX_OBJECTS` objects, or a dataset or attribute refused by the
        size and storage checks.
    """
    import h5py

    size = os.path.getsize(path)
    seen = [0]
    groups = set()

    def walk(group, prefix):
        """Check ``group`` and everything under it.

        Parameters
        ----------
        group : h5py.Group
            The group to check.
        prefix : str
            Its path inside the file ("" for the root), for messages.

        Raises
        ------
        DataError
            As :func:`check_file`.
        """
        if group.id in groups or prefix.count("/") > MAX_NESTING:
            raise DataError(path, f"{prefix} is a group linked twice (or inside itself) or "
                            f"nested more than {MAX_NESTING} deep; not a facesegment file", fix)
        groups.add(group.id)
        _check_attrs(group, prefix or "/", path, size, fix)
        for name in group:
            where = f"{prefix}/{name}"
            seen[0] += 1
            if seen[0] > MAX_OBJECTS:
                raise DataError(path, f"holds more than {MAX_OBJECTS} HDF5 objects; "
                                "not a facesegment file", fix)
            link = group.get(name, getlink=True)
            if not isinstance(link, h5py.HardLink):
                what = ("an external link to " + f"{link.filename}:{link.path}"
                        if isinstance(link, h5py.ExternalLink)
                        else f"a {type(link).__name__}")
                raise DataError(path, f"{where} is {what}; facesegment files hold their "
                                "own data only (refused)", fix)
            obj = group[name]
            if isinstance(obj, h5py.Group):
                walk(obj, where)
            elif isinstance(obj, h5py.Dataset):
                check_dataset(obj, path, fix, size, where)
                _check_attrs(obj, where, path, size, fix)

    walk(f, "")
    return size


def _check_attrs(obj, where, path, size, fix):
    for name in obj.attrs:
        aid = obj.attrs.get_id(name)
        declared = int(np.prod(aid.shape or (), dtype=np.float64)) * aid.dtype.itemsize
        if declared > size:
            raise DataError(path, f"attribute {name!r} of {where} declares {declared} bytes, "
                            f"more than the file's {size}", fix)


def check_dataset(ds, path, fix, size=None, where=None):
    """Refuse a dataset whose data lies outside the file or that its stored data cannot back.

    See the module's description: virtual datasets and external storage are
    refused; a contiguous dataset must be stored within the file, a chunked one
    must have all its chunks, use only :data:`ALLOWED_FILTERS` and be compressed
    by at most :data:`MAX_RATIO`, a compact one must fit the file.

    Parameters
    ----------
    ds : h5py.Dataset
        The dataset.
    path : str or path-like
        The file's path, named in the message.
    fix : str
        The DataError's advice.
    size : int, optional
        The file's size in bytes (default: read from ``path``).
    where : str, optional
        The dataset's name in messages (default ``ds.name``).

    Raises
    ------
    DataError
        Naming ``path`` and the dataset.
    """
    import h5py

    where = where or ds.name
    size = os.path.getsize(path) if size is None else size
    plist = ds.id.get_create_plist()
    layout = plist.get_layout()
    if layout == h5py.h5d.VIRTUAL:
        raise DataError(path, f"{where} is a virtual dataset (it maps other files); refused",
                        fix)
    if plist.get_external_count() > 0:
        raise DataError(path, f"{where} keeps its data in external files "
                        f"({', '.join(str(e[0]) for e in (ds.external or [])[:2])}); refused",
                        fix)
    declared = int(np.prod(ds.shape, dtype=np.float64)) * ds.dtype.itemsize \
        if ds.shape is not None else 0
    stored = ds.id.get_storage_size()
    if layout == h5py.h5d.CONTIGUOUS:
        offset = ds.id.get_offset()
        if declared and (stored < declared or offset is None or offset + declared > size):
            raise DataError(path, f"{where} declares {ds.shape} ({declared} bytes) but the file "
                            f"stores {stored} bytes of it", fix)
    elif layout == h5py.h5d.CHUNKED:
        for i in range(plist.get_nfilters()):
            code = plist.get_filter(i)[0]
            if code not in ALLOWED_FILTERS:
                raise DataError(path, f"{where} uses the HDF5 filter {code}, not one of "
                                f"{', '.join(ALLOWED_FILTERS.values())}", fix)
        chunks = ds.chunks
        want = int(np.prod([-(-s // c) for s, c in zip(ds.shape, chunks)], dtype=np.float64))
        have = ds.id.get_num_chunks() if declared else 0
        if have < want or stored > size or declared > stored * MAX_RATIO:
            raise DataError(path, f"{where} declares {ds.shape} ({declared} bytes) but the file "
                            f"stores {have} of its {want} chunks ({stored} bytes)", fix)
    elif declared > size:  # compact: inside the object header
        raise DataError(path, f"{where} declares {declared} bytes, more than the file's {size}",
                        fix)


def read_dataset(ds, path, fix):
    """``ds[()]`` after :func:`check_dataset`.

    Parameters
    ----------
    ds : h5py.Dataset
        The dataset.
    path : str or path-like
        The file's path, named in the message.
    fix : str
        The DataError's advice.

    Returns
    -------
    numpy.ndarray or scalar
        The dataset's whole content.

    Raises
    ------
    DataError
        When :func:`check_dataset` refuses it.
    """
    check_dataset(ds, path, fix)
    return ds[()]


#: What can go wrong reading a damaged HDF5 file with h5py (besides DataError).
READ_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError, IndexError,
               AttributeError, UnicodeDecodeError, OverflowError, MemoryError)


__all__ = ["check_file", "check_dataset", "read_dataset", "READ_ERRORS", "MAX_RATIO",
           "ALLOWED_FILTERS"]
