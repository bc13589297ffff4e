"""The windows HDF5 format: writer, reader, row subsets and validation messages."""

import json
import os

import h5py
import numpy as np
import pytest

from facesegment.classes import CLASS_NAMES
from facesegment.errors import DataError
from facesegment.layout import DEFAULT_LAYOUT, WindowLayout
from facesegment.data.windows import (FORMAT_VERSION, WindowsWriter, read_rows, read_windows,
                                 read_windows_meta)

N_FEATURES = DEFAULT_LAYOUT.n_features


def _write(path, n=40, chunk_rows=7, seed=0, compression="gzip", layout=DEFAULT_LAYOUT):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, (n,) + layout.shape, dtype=np.uint8)
    y = (np.arange(n) % 8).astype(np.uint8)
    ii = rng.integers(0, 3, n).astype(np.int32)
    cen = rng.integers(15, 40, (n, 2)).astype(np.int32)
    nf = layout.n_features
    with WindowsWriter(path, n, compression=compression, chunk_rows=chunk_rows,
                       layout=layout) as w:
        w.write(0, X[:n // 2], y[:n // 2], ii[:n // 2], cen[:n // 2])
        w.write(n // 2, X[n // 2:], y[n // 2:], ii[n // 2:], cen[n // 2:])
        w.set_strings("sources", ["a", "b/c", "d"])
        w.set_strings("skipped", ["bad.jpg"])
        w.set_attrs(class_names=list(CLASS_NAMES), pixel_counts=np.arange(1, 9, dtype=np.int64),
                    class_counts=np.bincount(y, minlength=8).astype(np.int64),
                    sampling_factors=np.linspace(0.5, 2, 8), with_replacement=np.zeros(8, bool),
                    mean=np.full(nf, 100, np.float32), std=np.full(nf, 3, np.float32),
                    seed=7, n_windows=n, margin=layout.half, data_root="/data")
        w.finish()
    return X, y, ii, cen


@pytest.mark.parametrize("compression", ["gzip", "lzf", None])
def test_roundtrip(tmp_path, compression):
    p = tmp_path / "w.h5"
    X, y, ii, cen = _write(p, compression=compression)
    ws = read_windows(p)
    assert isinstance(ws.X, np.ndarray) and ws.X.dtype == np.uint8 and ws.X.shape == (40, 31, 31, 3)
    np.testing.assert_array_equal(ws.X, X)
    np.testing.assert_array_equal(ws.y, y)
    np.testing.assert_array_equal(ws.image_index, ii)
    np.testing.assert_array_equal(ws.centers, cen)
    m = ws.meta
    assert m.class_names == CLASS_NAMES and m.seed == 7 and m.n_windows == 40
    assert m.sources == ["a", "b/c", "d"] and m.skipped == ["bad.jpg"]
    assert m.mean.dtype == np.float32 and m.mean.shape == (N_FEATURES,)
    np.testing.assert_array_equal(m.pixel_counts, np.arange(1, 9))
    assert m.attrs["margin"] == 15 and m.attrs["data_root"] == "/data"
    assert m.path == str(p) and m.format_version == FORMAT_VERSION == 2
    assert m.layout == DEFAULT_LAYOUT and "layout" not in m.attrs
    assert not any(f.name.startswith("w.h5.tmp") for f in tmp_path.iterdir())


@pytest.mark.parametrize("layout", [WindowLayout(15, 1), WindowLayout(31, 5),
                                    WindowLayout(9, 3, ("a", "b", "c"))])
def test_roundtrip_other_layouts(tmp_path, layout):
    """Any window size and number of channels: (N, w, w, c) windows, F = w*w*c statistics,
    the layout in a JSON attribute; chunked gzip writes and row subsets as for RGB."""
    p = tmp_path / "w.h5"
    X, y, ii, cen = _write(p, n=37, chunk_rows=8, layout=layout)
    with h5py.File(p, "r") as f:
        assert json.loads(f.attrs["layout"]) == layout.to_dict()
        assert f["windows"].chunks == (8,) + layout.shape
    ws = read_windows(p)
    assert ws.meta.layout == layout and ws.X.shape == (37,) + layout.shape
    np.testing.assert_array_equal(ws.X, X)
    assert ws.meta.mean.shape == ws.meta.std.shape == (layout.n_features,)
    idx = np.array([36, 0, 9, 9, 20])
    np.testing.assert_array_equal(read_windows(p, indices=idx).X, X[idx])
    with read_windows(p, load=False) as lazy:
        np.testing.assert_array_equal(read_rows(lazy.X, idx), X[idx])
    assert read_windows_meta(p).layout == layout


def _write_version1(path, n=12, seed=3):
    """A windows file as the format-1 writer made it (before the layout was
    recorded), written by hand with h5py: its datasets and attributes."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, (n, 31, 31, 3), dtype=np.uint8)
    y = (np.arange(n) % 8).astype(np.uint8)
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "facesegment-windows"
        f.attrs["format_version"] = 1
        f.create_dataset("windows", data=X, chunks=(4, 31, 31, 3), compression="gzip",
                         compression_opts=1)
        f.create_dataset("labels", data=y)
        f.create_dataset("image_index", data=np.zeros(n, np.int32))
        f.create_dataset("centers", data=np.full((n, 2), 15, np.int32))
        dt = h5py.string_dtype("utf-8")
        f.create_dataset("sources", data=np.array(["a"], dtype=object), dtype=dt)
        f.create_dataset("skipped", data=np.array([], dtype=object), dtype=dt)
        f.attrs["class_names"] = np.array(list(CLASS_NAMES), dtype=dt)
        f.attrs["pixel_counts"] = np.arange(1, 9, dtype=np.int64)
        f.attrs["class_counts"] = np.bincount(y, minlength=8).astype(np.int64)
        f.attrs["sampling_factors"] = np.linspace(0.5, 2, 8)
        f.attrs["with_replacement"] = np.zeros(8, bool)
        f.attrs["mean"] = np.full(2883, 100, np.float32)
        f.attrs["std"] = np.full(2883, 3, np.float32)
        for k, v in dict(seed=0, n_windows=n, margin=15, std_kind="population (divide by N); "
                         "0 replaced by 1", data_root="/data", labels_root="",
                         compression="gzip", n_images=1).items():
            f.attrs[k] = v
        f.attrs["complete"] = True
    return X, y


def test_reads_format_version_1(tmp_path):
    """Files of the previous format version (no layout attribute) stay readable,
    with the paper's 31x31 RGB layout."""
    p = tmp_path / "old.h5"
    X, y = _write_version1(p)
    m = read_windows_meta(p)
    assert m.format_version == 1 and m.layout == DEFAULT_LAYOUT and m.n_windows == 12
    ws = read_windows(p)
    np.testing.assert_array_equal(ws.X, X)
    np.testing.assert_array_equal(ws.y, y)
    np.testing.assert_array_equal(read_windows(p, indices=[11, 2]).X, X[[11, 2]])
    with h5py.File(p, "r+") as f:  # a version-1 file is always 31x31x3
        del f["windows"]
        f.create_dataset("windows", data=np.zeros((12, 15, 15, 3), np.uint8))
    with pytest.raises(DataError, match=r"expected uint8\[12, 31, 31, 3\]"):
        read_windows(p)


@pytest.mark.parametrize("value, message", [
    ('{"window": 4}', r"attribute 'layout' is not a valid window layout \(WindowLayout "
                      r"window=4 must be odd"),
    ("not json", "attribute 'layout' is not a valid window layout"),
    ('{"window": 15, "channels": 1}', r"dataset 'windows' is uint8\[40, 31, 31, 3\], "
                                      r"expected uint8\[40, 15, 15, 1\]"),
])
def test_bad_layout_attribute(tmp_path, value, message):
    p = tmp_path / "w.h5"
    _write(p)
    with h5py.File(p, "r+") as f:
        f.attrs["layout"] = value
    with pytest.raises(DataError, match=message):
        read_windows_meta(p)


@pytest.mark.parametrize("n, rows", [(40, 8), (37, 8), (5, 16)])
def test_direct_chunk_writes(tmp_path, n, rows):
    """Aligned gzip writes (zlib + write_direct_chunk, padded last chunk) read back like h5py's own."""
    from concurrent.futures import ThreadPoolExecutor

    X = np.random.default_rng(n).integers(0, 4, (n, 31, 31, 3), dtype=np.uint8)
    z = np.zeros(n, np.uint8)
    with ThreadPoolExecutor(2) as pool, WindowsWriter(tmp_path / "w.h5", n, chunk_rows=rows) as w:
        s = min(rows * 2, n)
        w.write(0, X[:s], z[:s], z[:s].astype(np.int32), np.zeros((s, 2), np.int32), pool)
        w.write(s, X[s:], z[s:], z[s:].astype(np.int32), np.zeros((n - s, 2), np.int32))
        w.file.flush()
        with h5py.File(w.tmp, "r") as f:
            np.testing.assert_array_equal(f["windows"][()], X)
            assert f["windows"].compression == "gzip"
            assert f["windows"].id.get_storage_size() < X.nbytes / 2


def test_lazy_and_subsets(tmp_path):
    p = tmp_path / "w.h5"
    X, y, ii, cen = _write(p)
    with read_windows(p, load=False) as ws:
        assert isinstance(ws.X, h5py.Dataset) and ws.X.chunks[0] == 7
        idx = np.random.default_rng(1).integers(0, 40, 25)  # unsorted, with repeats
        np.testing.assert_array_equal(read_rows(ws.X, idx), X[idx])
        np.testing.assert_array_equal(ws.X[3:9], X[3:9])
    sub = read_windows(p, indices=idx)
    np.testing.assert_array_equal(sub.X, X[idx])
    np.testing.assert_array_equal(sub.y, y[idx])
    np.testing.assert_array_equal(sub.image_index, ii[idx])
    np.testing.assert_array_equal(sub.centers, cen[idx])
    np.testing.assert_array_equal(read_rows(X, idx), X[idx])
    assert read_rows(X, []).shape == (0, 31, 31, 3)
    with pytest.raises(ValueError, match=r"indices must lie in \[0, 40\)"):
        read_rows(X, [40])
    with pytest.raises(ValueError, match="indices must be a 1-D array"):
        read_windows(p, indices=np.zeros((2, 2), int))


def test_meta_only(tmp_path):
    p = tmp_path / "w.h5"
    _write(p)
    m = read_windows_meta(p)
    assert m.n_windows == 40 and m.class_counts.sum() == 40
    np.testing.assert_allclose(m.sampling_factors, np.linspace(0.5, 2, 8))


def test_interrupted_writer_leaves_nothing(tmp_path):
    p = tmp_path / "w.h5"
    with pytest.raises(KeyboardInterrupt):
        with WindowsWriter(p, 10) as w:
            w.write(0, np.zeros((5, 31, 31, 3), np.uint8), np.zeros(5, np.uint8),
                    np.zeros(5, np.int32), np.zeros((5, 2), np.int32))
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def _mutate(path, fn):
    with h5py.File(path, "r+") as f:
        fn(f)


@pytest.mark.parametrize("mutation, message", [
    (lambda f: f.attrs.__setitem__("format", "something-else"), "not a facesegment windows file"),
    (lambda f: f.attrs.__setitem__("format_version", 99),
     "format version 99; this facesegment reads versions 1 and 2"),
    (lambda f: f.attrs.__delitem__("layout"), "no attribute 'layout'"),
    (lambda f: f.attrs.__delitem__("complete"), "incomplete .no 'complete' mark"),
    (lambda f: f.__delitem__("labels"), "no dataset 'labels'"),
    (lambda f: f.__delitem__("sources"), "no dataset 'sources'"),
    (lambda f: (f.__delitem__("centers"), f.create_dataset("centers", data=np.zeros((40, 3), np.int32))),
     r"dataset 'centers' is int32\[40, 3\], expected int32\[40, 2\]"),
    (lambda f: (f.__delitem__("windows"), f.create_dataset("windows", data=np.zeros((40, 31, 31, 3), np.float32))),
     r"dataset 'windows' is float32\[40, 31, 31, 3\], expected uint8"),
    (lambda f: f.attrs.__setitem__("mean", np.zeros(10, np.float32)), r"attribute 'mean' has shape \(10,\), expected \(2883,\)"),
    (lambda f: f.attrs.__delitem__("pixel_counts"), "no attribute 'pixel_counts'"),
    (lambda f: f.attrs.__setitem__("n_windows", 41), r"dataset 'windows' is uint8\[40, 31, 31, 3\], expected uint8\[41"),
    (lambda f: f.attrs.__setitem__("class_counts", np.ones(8, np.int64)), "class_counts sum to 8 but the file has 40"),
    (lambda f: f.attrs.__setitem__("std", np.zeros(N_FEATURES, np.float32)), "'std' has zero"),
])
def test_reader_validation(tmp_path, mutation, message):
    p = tmp_path / "w.h5"
    _write(p)
    _mutate(p, mutation)
    for reader in (read_windows, read_windows_meta):
        with pytest.raises(DataError, match=message) as ei:
            reader(p)
        assert str(p) in str(ei.value) and "\n" not in str(ei.value)


def test_not_hdf5_and_missing(tmp_path):
    p = tmp_path / "w.h5"
    p.write_bytes(b"hello, not hdf5")
    with pytest.raises(DataError, match=r"w\.h5: is not an HDF5 file .*facesegment extract"):
        read_windows(p)
    with pytest.raises(DataError, match="windows file does not exist"):
        read_windows_meta(tmp_path / "nope.h5")
    with pytest.raises(DataError, match="is a folder"):
        read_windows(tmp_path)
    q = tmp_path / "other.h5"
    with h5py.File(q, "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    with pytest.raises(DataError, match=r"HDF5 file but not a facesegment windows file \(format=None\)"):
        read_windows(q)


def test_writer_unwritable(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError, match="cannot create output"):
        WindowsWriter(tmp_path / "file" / "w.h5", 4)
    assert os.listdir(tmp_path) == ["file"]
