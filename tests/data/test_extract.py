"""Class-balanced window extraction: kernels, allocation, the pipeline and the CLI."""

import os

import h5py
import numpy as np
import pytest

import facesegment.cli as cli
import facesegment.data.extract as ex
import facesegment.data.sampling as sampling
import facesegment.data._windows_writer as windows_writer
from facesegment.commands.extract import find_training_faces
from facesegment.classes import N_CLASSES
from facesegment.data.datasets import find_faces, load_face
from facesegment.errors import DataError
from facesegment.data.imageio import write_png_atomic
from facesegment.layout import DEFAULT_LAYOUT, WindowLayout
from facesegment.data.windows import read_windows, read_windows_meta
from tests.naive import naive_cut_windows, naive_eligible_counts

N_FEATURES = DEFAULT_LAYOUT.n_features


def _faces(root, n=5, h=40, w=44, seed=0):
    """n random labelled faces; labels 0-7 with some 255, all classes present inside the margin."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        lab = rng.integers(0, 8, (h, w), dtype=np.uint8)
        lab[rng.random((h, w)) < 0.1] = 255
        write_png_atomic(root / f"face{i:02d}.png", img)
        write_png_atomic(root / f"face{i:02d}_label.png", lab)
    return root


def _main(argv, monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ("extract",))
    return cli.main(argv)


def _contents(path):
    with h5py.File(path, "r") as f:
        data = {k: f[k][()] for k in f}
        attrs = {k: f.attrs[k] for k in f.attrs}
    return data, attrs


def _assert_same_file(a, b):
    da, aa = _contents(a)
    db, ab = _contents(b)
    assert da.keys() == db.keys() and aa.keys() == ab.keys()
    for k in da:
        np.testing.assert_array_equal(da[k], db[k], err_msg=k)
    for k in aa:
        np.testing.assert_array_equal(aa[k], ab[k], err_msg=k)


# -------------------------------------------------------------------- kernels

def test_cut_kernel_matches_naive():
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (45, 50, 3), dtype=np.uint8)
    centers = np.stack([rng.integers(15, 30, 17), rng.integers(15, 35, 17)], 1).astype(np.int32)
    out = np.empty((17, 31, 31, 3), np.uint8)
    sums = np.full(N_FEATURES, 5, np.int64)  # the kernel adds to what is there
    sumsq = np.zeros(N_FEATURES, np.int64)
    sampling.cut_windows_kernel(img, centers, 15, out, sums, sumsq)
    wins, s, q = naive_cut_windows(img, centers)
    np.testing.assert_array_equal(out, wins)
    np.testing.assert_array_equal(sums, s + 5)
    np.testing.assert_array_equal(sumsq, q)
    # a smaller window, one channel
    g = img[:, :, :1].copy()
    out1 = np.empty((17, 7, 7, 1), np.uint8)
    s1, q1 = np.zeros(49, np.int64), np.zeros(49, np.int64)
    sampling.cut_windows_kernel(g, centers, 3, out1, s1, q1)
    w1, s1n, q1n = naive_cut_windows(g, centers, half=3)
    np.testing.assert_array_equal(out1, w1)
    np.testing.assert_array_equal(s1, s1n)
    np.testing.assert_array_equal(q1, q1n)


@pytest.mark.parametrize("shape", [(40, 44), (31, 31), (30, 50), (10, 10)])
def test_eligible_counts_matches_naive(shape):
    rng = np.random.default_rng(1)
    lab = rng.integers(0, 8, shape, dtype=np.uint8)
    lab[rng.random(shape) < 0.2] = 255
    np.testing.assert_array_equal(sampling.eligible_counts(lab), naive_eligible_counts(lab))


# ----------------------------------------------------------------- allocation

def test_class_targets():
    np.testing.assert_array_equal(sampling.class_targets(64), np.full(8, 8))
    np.testing.assert_array_equal(sampling.class_targets(67), [9, 9, 9, 8, 8, 8, 8, 8])


def test_allocate_without_and_with_replacement():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 50, (30, 8)).astype(np.int64)
    counts[:, 4] = 0
    counts[3, 4] = 5  # class 4: only 5 pixels in all
    targets = sampling.class_targets(8 * 40)
    alloc, replace = sampling.allocate(counts, targets, np.random.default_rng(1))
    np.testing.assert_array_equal(alloc.sum(axis=0), targets)
    assert replace.tolist() == [c == 4 for c in range(8)]
    no_rep = ~replace
    assert np.all(alloc[:, no_rep] <= counts[:, no_rep])
    assert np.all(alloc[counts == 0] == 0)
    alloc2, _ = sampling.allocate(counts, targets, np.random.default_rng(1))
    np.testing.assert_array_equal(alloc, alloc2)


def test_allocate_is_proportional_on_average():
    counts = np.array([[900, 0, 0, 0, 0, 0, 0, 0], [100, 0, 0, 0, 0, 0, 0, 0]], np.int64)
    counts[:, 1:] = 1000
    rng = np.random.default_rng(0)
    got = np.mean([sampling.allocate(counts, np.full(8, 100), rng)[0][0, 0] for _ in range(200)])
    assert 85 < got < 95  # expected 90


def test_group_ranges():
    assert ex.group_ranges([1] * 5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert ex.group_ranges([3, 3, 9, 1, 1], 10, max_weight=6) == [(0, 2), (2, 3), (3, 5)]
    assert ex.group_ranges([], 4) == []


def test_repair_over():
    a = np.array([5, 0, 3])
    sampling._repair_over(a, np.array([2, 4, 3]))
    np.testing.assert_array_equal(a, [2, 3, 3])


# ------------------------------------------------------------------ pipeline

def test_extract_matches_recomputation(tmp_path):
    root = _faces(tmp_path / "data")
    recs = find_faces(root)
    out = tmp_path / "w.h5"
    res = ex.extract_windows(recs, out, n_windows=80, seed=3, n_workers=2, progress=False,
                             data_root=root, chunk_rows=16)
    ws = read_windows(out)
    m = ws.meta
    assert res.n_images == 5 and res.skipped == [] and m.n_windows == 80
    np.testing.assert_array_equal(np.bincount(ws.y, minlength=8), np.full(8, 10))
    np.testing.assert_array_equal(m.class_counts, np.full(8, 10))
    assert m.sources == [r.name for r in recs] and m.seed == 3
    assert not m.with_replacement.any()
    faces = [load_face(r) for r in recs]
    # pixel counts, factors
    pix = sum(naive_eligible_counts(lab) for _, lab in faces)
    np.testing.assert_array_equal(m.pixel_counts, pix)
    np.testing.assert_allclose(m.sampling_factors, (10 / 80) / (pix / pix.sum()), rtol=1e-12)
    # each window is the image around its centre, labelled by the centre pixel
    seen = set()
    for k in range(80):
        img, lab = faces[ws.image_index[k]]
        r, c = ws.centers[k]
        assert 15 <= r < img.shape[0] - 15 and 15 <= c < img.shape[1] - 15
        assert lab[r, c] == ws.y[k]
        np.testing.assert_array_equal(ws.X[k], img[r - 15:r + 16, c - 15:c + 16])
        seen.add((int(ws.image_index[k]), int(r), int(c)))
    assert len(seen) == 80  # without replacement
    # rows are ordered by image
    assert np.all(np.diff(ws.image_index) >= 0)
    # statistics: population mean/std over the stored windows, in float64
    flat = ws.X.reshape(80, -1).astype(np.float64)
    np.testing.assert_allclose(m.mean, flat.mean(axis=0), rtol=1e-6)
    std = flat.std(axis=0)
    std[std == 0] = 1
    np.testing.assert_allclose(m.std, std, rtol=1e-5)


def _digest(path):
    """sha256 of a windows file's sample: datasets and statistics, in a fixed order."""
    import hashlib

    h = hashlib.sha256()
    with h5py.File(path, "r") as f:
        for k in ("windows", "labels", "image_index", "centers"):
            h.update(np.ascontiguousarray(f[k][()]).tobytes())
        for k in ("mean", "std", "pixel_counts", "class_counts", "sampling_factors"):
            h.update(np.ascontiguousarray(f.attrs[k]).tobytes())
    return h.hexdigest()


def test_default_layout_sample_is_unchanged(tmp_path):
    """The 31x31 RGB sample is byte for byte the one of format version 1 (before the
    layout was recorded): digest computed with that version's code."""
    root = _faces(tmp_path / "data", n=5)
    out = tmp_path / "w.h5"
    ex.extract_windows(find_faces(root), out, n_windows=80, seed=3, n_workers=2, progress=False,
                       chunk_rows=16)
    assert _digest(out) == "e340fb37af2b938304a997f54833d6f1acbd13f84fd7eaf19b892820162243a5"
    m = read_windows_meta(out)
    assert m.layout == DEFAULT_LAYOUT and m.format_version == 2
    with h5py.File(out, "r") as f:
        assert f["windows"].shape == (80, 31, 31, 3) and f["windows"].chunks == (16, 31, 31, 3)


def test_window_15(tmp_path):
    """window=15: (N, 15, 15, 3) windows of centres >= 7 px from the border, 675 statistics."""
    root = _faces(tmp_path / "data", n=4, h=24, w=26)
    recs = find_faces(root)
    out = tmp_path / "w.h5"
    ex.extract_windows(recs, out, n_windows=64, seed=2, window=15, progress=False, chunk_rows=16)
    ws = read_windows(out)
    m = ws.meta
    assert m.layout == WindowLayout(15, 3) and ws.X.shape == (64, 15, 15, 3)
    assert m.attrs["margin"] == 7 and m.mean.shape == (675,)
    faces = [load_face(r) for r in recs]
    pix = sum(naive_eligible_counts(lab, margin=7) for _, lab in faces)
    np.testing.assert_array_equal(m.pixel_counts, pix)
    for k in range(64):
        img, lab = faces[ws.image_index[k]]
        r, c = ws.centers[k]
        assert 7 <= r < img.shape[0] - 7 and 7 <= c < img.shape[1] - 7 and lab[r, c] == ws.y[k]
        np.testing.assert_array_equal(ws.X[k], img[r - 7:r + 8, c - 7:c + 8])
    flat = ws.X.reshape(64, -1).astype(np.float64)
    np.testing.assert_allclose(m.mean, flat.mean(axis=0), rtol=1e-6)
    # a larger margin keeps the window and moves the centres inwards
    ex.extract_windows(recs, tmp_path / "m.h5", n_windows=16, seed=2, window=15, margin=9,
                       progress=False)
    c = read_windows(tmp_path / "m.h5").centers
    assert c.min() >= 9 and read_windows_meta(tmp_path / "m.h5").layout.window == 15


def _grey_loader(monkeypatch, grey_names=None):
    """Make the extraction see grey images ((H, W) arrays), all or those named."""
    real = sampling.load_face

    def load(record, grey=False):
        image, label = real(record)
        if grey_names is None or record.name in grey_names:
            image = image[:, :, 1].copy()
        return image, label

    monkeypatch.setattr(sampling, "load_face", load)


def test_grey_images_give_one_channel(tmp_path, monkeypatch):
    root = _faces(tmp_path / "data", n=4)
    recs = find_faces(root)
    _grey_loader(monkeypatch)
    out = tmp_path / "w.h5"
    ex.extract_windows(recs, out, n_windows=40, seed=1, window=11, progress=False, chunk_rows=8,
                       n_workers=2)
    ws = read_windows(out)
    assert ws.meta.layout == WindowLayout(11, 1) and ws.X.shape == (40, 11, 11, 1)
    assert ws.meta.layout.channel_names == ("gray",) and ws.meta.std.shape == (121,)
    for k in range(40):
        img, _ = load_face(recs[ws.image_index[k]])
        r, c = ws.centers[k]
        np.testing.assert_array_equal(ws.X[k, :, :, 0], img[r - 5:r + 6, c - 5:c + 6, 1])


def test_mixed_grey_and_rgb_images_are_an_error(tmp_path, monkeypatch):
    root = _faces(tmp_path / "data", n=3)
    _grey_loader(monkeypatch, {"face01"})
    with pytest.raises(DataError, match=r"face01.png: has 1 channel\(s\) but .*face00.png has 3 "
                                        r"\(use images of one kind"):
        ex.extract_windows(find_faces(root), tmp_path / "w.h5", 16, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_same_seed_same_file_any_workers(tmp_path):
    root = _faces(tmp_path / "data", n=6)
    recs = find_faces(root)
    ex.extract_windows(recs, tmp_path / "a.h5", 96, seed=5, n_workers=1, progress=False)
    ex.extract_windows(recs, tmp_path / "b.h5", 96, seed=5, n_workers=2, progress=False, chunk_rows=8,
                       images_per_task=4)
    _assert_same_file(tmp_path / "a.h5", tmp_path / "b.h5")
    ex.extract_windows(recs, tmp_path / "c.h5", 96, seed=6, n_workers=2, progress=False)
    assert not np.array_equal(read_windows(tmp_path / "a.h5").centers, read_windows(tmp_path / "c.h5").centers)


def test_out_of_order_results_written_directly(tmp_path, monkeypatch):
    """Results arriving out of order (a cluster) and overflowing the pending buffer still land at their offsets."""
    root = _faces(tmp_path / "data", n=6)
    recs = find_faces(root)
    ex.extract_windows(recs, tmp_path / "a.h5", 96, seed=1, n_workers=1, progress=False)
    real = ex.map_tasks

    def shuffled(func, items, **kw):
        res = list(real(func, items, **kw))
        return [res[i] for i in (3, 5, 0, 4, 2, 1)] if func is sampling.cut_batch else res

    monkeypatch.setattr(ex, "map_tasks", shuffled)
    monkeypatch.setattr(windows_writer, "PENDING_BYTES", 1)
    ex.extract_windows(recs, tmp_path / "b.h5", 96, seed=1, n_workers=1, progress=False, chunk_rows=4,
                       images_per_task=1)
    _assert_same_file(tmp_path / "a.h5", tmp_path / "b.h5")


def test_cut_task_detects_changed_label(tmp_path):
    rec = find_faces(_faces(tmp_path / "data", n=1))[0]
    _, lab = load_face(rec)
    expected = naive_eligible_counts(lab)
    alloc = np.ones(8, np.int64)
    state = np.zeros(4, np.uint32)
    w, y, c, s, q = sampling.cut_task((rec, alloc, expected, state, np.zeros(8, bool)), 15)
    assert w.shape == (8, 31, 31, 3) and y.tolist() == list(range(8))
    expected[3] += 1
    with pytest.raises(DataError, match="label map changed during extraction"):
        sampling.cut_task((rec, alloc, expected, state, np.zeros(8, bool)), 15)


def test_with_replacement_when_too_few_pixels(tmp_path):
    root = _faces(tmp_path / "data", n=2, h=33, w=33)  # 3x3 eligible pixels per image
    ws = None
    ex.extract_windows(find_faces(root), tmp_path / "w.h5", 160, seed=0, progress=False)
    ws = read_windows(tmp_path / "w.h5")
    assert ws.meta.with_replacement.all()
    np.testing.assert_array_equal(np.bincount(ws.y, minlength=8), np.full(8, 20))


def test_missing_class_is_an_error(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    write_png_atomic(root / "a.png", np.zeros((40, 40, 3), np.uint8))
    write_png_atomic(root / "a_label.png", np.zeros((40, 40), np.uint8))
    with pytest.raises(DataError, match=r"no eligible pixel .* of class\(es\) lower face, nose"):
        ex.extract_windows(find_faces(root), tmp_path / "w.h5", 16, progress=False, data_root=root)
    assert list(tmp_path.iterdir()) == [root]


def test_interrupt_leaves_no_file(tmp_path, monkeypatch):
    root = _faces(tmp_path / "data", n=3)

    def boom(item, margin, window, grey=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(sampling, "cut_task", boom)
    with pytest.raises(KeyboardInterrupt):
        ex.extract_windows(find_faces(root), tmp_path / "w.h5", 16, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_write_error_is_one_data_error_and_leaves_no_file(tmp_path, monkeypatch):
    root = _faces(tmp_path / "data", n=3)

    def broken(self, *a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(windows_writer.WindowsWriter, "write", broken)
    with pytest.raises(DataError, match="cannot write the windows file .disk full"):
        ex.extract_windows(find_faces(root), tmp_path / "w.h5", 16, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_filter_records_exclude_and_labeller_report(tmp_path):
    root = _faces(tmp_path / "data", n=3)
    write_png_atomic(root / "noface.png", np.zeros((40, 44, 3), np.uint8))
    write_png_atomic(root / "unlabelled.png", np.zeros((40, 44, 3), np.uint8))
    (root / "label_report.csv").write_text("name,image,status,faces,seconds,message\n"
                                           "noface,x,no-face,0,0.1,no face found\n")
    got, recs = find_training_faces(root, exclude={"face01"})
    assert got == root
    assert [r.name for r in recs] == ["face00", "face02", "unlabelled"]
    with pytest.raises(DataError, match="no images left after --exclude"):
        find_training_faces(root, exclude={"face00", "face01", "face02", "unlabelled", "noface"})


def test_parameter_validation(tmp_path):
    recs = find_faces(_faces(tmp_path / "data", n=1))
    for kw, msg in [({"n_windows": 0}, r"n_windows must be an integer >= 8 \(at least one window per class.*got 0"),
                    ({"seed": -1}, "seed must be a non-negative integer"),
                    ({"on_error": "ignore"}, "on_error must be 'skip' or 'fail'"),
                    ({"compression": "zstd"}, "compression must be"),
                    ({"margin": 3}, r"margin must be an integer >= 15 \(half the window\)"),
                    ({"window": 30}, r"window must be an odd positive integer .*; got 30"),
                    ({"window": 15, "margin": 6}, "margin must be an integer >= 7"),
                    ({"images_per_task": 0}, "images_per_task must be a positive integer")]:
        with pytest.raises(ValueError, match=msg):
            ex.extract_windows(recs, tmp_path / "w.h5", **{"n_windows": 8, **kw})


@pytest.mark.slow
def test_local_cluster_same_file(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    root = _faces(tmp_path / "data", n=4)
    recs = find_faces(root)
    ex.extract_windows(recs, tmp_path / "a.h5", 64, seed=2, n_workers=2, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                                  dashboard_address=None) as lc:
        ex.extract_windows(recs, tmp_path / "b.h5", 64, seed=2, scheduler=lc.scheduler_address,
                           progress=False, images_per_task=3)
        rc = _main(["extract", str(root), "--out", str(tmp_path / "c.h5"), "-n", "64", "--seed", "2",
                    "-q", "--scheduler", lc.scheduler_address], monkeypatch)
    assert rc == 0
    _assert_same_file(tmp_path / "a.h5", tmp_path / "b.h5")
    da, _ = _contents(tmp_path / "a.h5")
    dc, _ = _contents(tmp_path / "c.h5")
    for k in ("windows", "labels", "image_index", "centers"):
        np.testing.assert_array_equal(da[k], dc[k])


# ------------------------------------------------------------------------ CLI

def _bad_folder(tmp_path):
    root = _faces(tmp_path / "data", n=4)
    (root / "face01.png").write_bytes(b"not a png")          # corrupt image
    os.remove(root / "face02_label.png")                      # missing label
    write_png_atomic(root / "face03_label.png", np.zeros((5, 5), np.uint8))  # wrong size
    return root


def test_cli_skip_policy(tmp_path, monkeypatch, capsys):
    root = _bad_folder(tmp_path)
    out = tmp_path / "out" / "w.h5"
    rc = _main(["extract", str(root), "--out", str(out), "--windows", "16", "--quiet"], monkeypatch)
    cap = capsys.readouterr()
    assert rc == 1
    assert "face01.png: not a readable image" in cap.err
    assert "face02.png: has no label map" in cap.err
    assert "face03_label.png: label map is 5x5 but its image is 44x40" in cap.err
    assert "3 of 4 images skipped" in cap.err
    assert f"wrote {out}: 16 windows from 1 images" in cap.out
    m = read_windows_meta(out)
    assert m.sources == ["face00"] and len(m.skipped) == 3


def test_cli_fail_policy(tmp_path, monkeypatch, capsys):
    root = _bad_folder(tmp_path)
    out = tmp_path / "out" / "w.h5"
    rc = _main(["extract", str(root), "--out", str(out), "-n", "16", "-q", "--on-error", "fail"], monkeypatch)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("facesegment: error: ") and err.count("\n") == 1 and "face01.png" in err
    assert os.listdir(tmp_path / "out") == []


def test_cli_ok_split_exclude_and_dataset_root(tmp_path, monkeypatch, capsys):
    _faces(tmp_path / "ds" / "train", n=5)
    _faces(tmp_path / "ds" / "test", n=2, seed=1)
    excl = tmp_path / "excl.txt"
    excl.write_text("# leave one out\nface04.png\n")
    out = tmp_path / "w.h5"
    rc = _main(["extract", str(tmp_path / "ds"), "--out", str(out), "-n", "40", "--seed", "1", "-q",
                "--exclude", str(excl)], monkeypatch)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert read_windows_meta(out).sources == ["face00", "face01", "face02", "face03"]
    assert "lower face" in cap.out and "factor" in cap.out
    rc = _main(["extract", str(tmp_path / "ds"), "--out", str(out), "-n", "40", "-q",
                "--split", "train", "--validation", "2"], monkeypatch)
    assert rc == 0
    assert len(read_windows_meta(out).sources) == 3


def test_cli_label_tree_of_dataset_root(tmp_path, monkeypatch, capsys):
    """DATA_DIR with train/ and a label tree mirroring it (LABELS/train/...)."""
    _faces(tmp_path / "ds" / "train", n=3)
    (tmp_path / "labels" / "train").mkdir(parents=True)
    for f in (tmp_path / "ds" / "train").glob("*_label.png"):
        f.rename(tmp_path / "labels" / "train" / f.name)
    out = tmp_path / "w.h5"
    rc = _main(["extract", str(tmp_path / "ds"), "--labels", str(tmp_path / "labels"), "--out", str(out),
                "-n", "24", "-q"], monkeypatch)
    assert rc == 0, capsys.readouterr().err
    assert read_windows_meta(out).attrs["labels_root"] == str(tmp_path / "labels")


@pytest.mark.parametrize("setup, message", [
    ("empty", "contains no images"),
    ("missing", "does not exist"),
    ("unwritable", "cannot write output"),
])
def test_cli_errors(tmp_path, monkeypatch, capsys, setup, message):
    data = _faces(tmp_path / "data", n=1) if setup != "empty" else tmp_path / "empty"
    data.mkdir(exist_ok=True)
    out = tmp_path / "w.h5"
    if setup == "missing":
        data = tmp_path / "nope"
    if setup == "unwritable":
        (tmp_path / "afile").write_text("x")
        out = tmp_path / "afile" / "w.h5"
    rc = _main(["extract", str(data), "--out", str(out), "-n", "8", "-q"], monkeypatch)
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1
    assert not out.exists()


def test_cli_help_has_every_option():
    import argparse

    from facesegment.commands import extract as cmd

    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    for a in p._actions:
        assert a.help, a.dest


# ----------------------------------------------------------------- real data

@pytest.mark.shared
def test_real_faces300w_small_run(faces300w, tmp_path, monkeypatch, capsys):
    sub = tmp_path / "ex.txt"
    names = sorted(p.stem for p in (faces300w / "train").glob("*.jpg"))
    sub.write_text("\n".join(names[12:]))  # keep the first 12 images
    out = tmp_path / "w.h5"
    rc = _main(["extract", str(faces300w / "train"), "--out", str(out), "-n", "800", "-q",
                "--exclude", str(sub)], monkeypatch)
    assert rc == 0, capsys.readouterr().err
    ws = read_windows(out)
    np.testing.assert_array_equal(np.bincount(ws.y, minlength=8), np.full(N_CLASSES, 100))
    recs = [r for r in find_faces(faces300w / "train") if r.name in set(names[:12])]
    assert ws.meta.sources == [r.name for r in recs]
    faces = [load_face(r) for r in recs]
    pix = sum(naive_eligible_counts(lab) for _, lab in faces)
    np.testing.assert_array_equal(ws.meta.pixel_counts, pix)
    np.testing.assert_allclose(ws.meta.sampling_factors, (1 / 8) / (pix / pix.sum()), rtol=1e-12)
    for k in range(0, 800, 7):
        img, lab = faces[ws.image_index[k]]
        r, c = ws.centers[k]
        assert lab[r, c] == ws.y[k]
        np.testing.assert_array_equal(ws.X[k], img[r - 15:r + 16, c - 15:c + 16])
    flat = ws.X.reshape(800, -1).astype(np.float64)
    np.testing.assert_allclose(ws.meta.mean, flat.mean(0), rtol=1e-6)
    np.testing.assert_allclose(ws.meta.std, flat.std(0), rtol=1e-5)


def test_images_allotted_no_window_are_kept_out(tmp_path):
    """Fewer windows than images (10,478 lfw-gray faces, 64,000 windows): some images get
    none of a class, some none at all; extraction still writes every window asked for."""
    root = _faces(tmp_path / "data", n=12)
    out = tmp_path / "w.h5"
    res = ex.extract_windows(find_faces(root), out, n_windows=8, seed=4, n_workers=2,
                             progress=False, chunk_rows=4)
    ws = read_windows(out)
    assert res.n_images == 12 and len(ws.y) == 8
    assert len(np.unique(ws.image_index)) < 12     # some images gave no window
    np.testing.assert_array_equal(np.bincount(ws.y, minlength=8), np.ones(8))
