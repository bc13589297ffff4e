"""Segmenting photos: crop geometry, mapping back, folder processing and skipping."""

import csv

import numpy as np
import pytest

from facesegment.data.imageio import read_image, read_label, write_png_atomic
from facesegment.faces.crops import crop_box, crop_face, find_crops, landmark_box, uncrop_proba
from facesegment.faces.folder import segment_folder
from facesegment.faces.segment import overlay, segment_image
from tests.dense.test_inference import random_model


def _gradient(h, w):
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x % 256, y % 256, (x + y) // 3 % 256], -1).astype(np.uint8)


def test_crop_face_samples_the_box():
    img = _gradient(300, 400)
    crop = crop_face(img, (50.0, 20.0, 250.0))  # scale 1: a plain copy
    np.testing.assert_array_equal(crop, img[20:270, 50:300])
    half = crop_face(img, (0.0, 0.0, 125.0))  # upscaled 2x
    assert abs(int(half[125, 125, 0]) - 62) <= 1 and abs(int(half[125, 125, 1]) - 62) <= 1


def test_uncrop_inverts_crop_inside_box():
    img = _gradient(200, 260).astype(np.float32)
    box = (30.5, 10.0, 140.0)
    crop = crop_face(img, box)
    back = uncrop_proba(np.concatenate([crop, crop[:, :, :2]], -1), box, img.shape)
    assert back.shape == (200, 260, 5)
    inner = back[20:140, 40:160, :3]
    assert np.abs(inner - img[20:140, 40:160]).max() < 1.5
    assert np.all(back[160:, :] == 0) and np.all(back[:, 180:] == 0)


def test_landmark_box_and_calibrated_box():
    pts = np.array([[100.0, 50.0], [150.0, 150.0], [120.0, 90.0]])
    x0, y0, side = landmark_box(pts)
    assert side == pytest.approx(220.0)
    assert (x0 + side / 2, y0 + side / 2) == pytest.approx((125.0, 100.0))
    x0, y0, side = crop_box((10, 20, 100, 100), "dlib", {"dlib": (2.0, 0.1, -0.2)})
    assert side == 200 and x0 + 100 == pytest.approx(70) and y0 + 100 == pytest.approx(50)


def test_overlay_keeps_background():
    img = np.full((4, 4, 3), 100, np.uint8)
    lab = np.zeros((4, 4), np.uint8)
    lab[0, 0] = 3
    out = overlay(img, lab)
    assert np.all(out[1:] == 100) and not np.all(out[0, 0] == 100)


def test_segment_image_modes():
    model = random_model(0, n_trees=2, max_depth=3, kinds=("axis",))
    img = np.random.default_rng(0).integers(0, 256, (250, 250, 3), dtype=np.uint8)
    labels, faces = segment_image(model, img, detect="auto")
    assert faces == 1 and labels.shape == (250, 250) and labels.max() < 8
    labels, faces = segment_image(model, img[:60, :50], detect="never")
    assert labels.shape == (60, 50)
    labels, faces = segment_image(model, img[:80, :90], detect="always")
    assert labels is None and faces == 0  # noise has no face


def test_segment_folder_skips_bad_files(tmp_path):
    model = random_model(1, n_trees=2, max_depth=3, kinds=("axis", "two-probe"))
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    rng = np.random.default_rng(1)
    write_png_atomic(src / "a.png", rng.integers(0, 256, (250, 250, 3), dtype=np.uint8))
    write_png_atomic(src / "sub" / "grey.png", rng.integers(0, 256, (250, 250), dtype=np.uint8))
    write_png_atomic(src / "noface.png", rng.integers(0, 256, (90, 120, 3), dtype=np.uint8))
    (src / "broken.jpg").write_bytes(b"not a jpeg")
    out = tmp_path / "out"
    results = segment_folder(model, src, out, alpha=0.5, progress=False, n_workers=2)
    status = {r.name: r.status for r in results}
    assert status == {"a.png": "ok", "broken.jpg": "unreadable", "noface.png": "no face",
                      "sub/grey.png": "ok"}
    lab = read_label(out / "a_label.png")
    assert lab.shape == (250, 250) and lab.max() < 8
    assert read_image(out / "sub" / "grey_overlay.png").shape == (250, 250, 3)
    assert not (out / "noface_label.png").exists()
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert [r["name"] for r in rows] == ["a.png", "broken.jpg", "noface.png", "sub/grey.png"]
    assert [r["output"] for r in rows] == ["a", "", "", "sub/grey"]
    assert "broken.jpg" in rows[1]["message"]
    with pytest.raises(ValueError, match="detect="):
        segment_folder(model, src, out, detect="sometimes")


@pytest.mark.shared
@pytest.mark.slow
def test_real_face_in_larger_photo(faces300w, tmp_path):
    """A faces300w crop pasted, scaled, into a bigger canvas is found and its
    LFW-style crop recovered (the crop box is known exactly)."""
    import cv2

    from facesegment.data.datasets import find_faces

    rec = find_faces(faces300w / "test")[0]
    crop = read_image(rec.image)
    face = cv2.resize(crop, (375, 375), interpolation=cv2.INTER_LINEAR)
    canvas = np.full((500, 640, 3), 127, np.uint8)
    canvas[60:435, 200:575] = face
    boxes = find_crops(canvas, "landmarks")
    assert len(boxes) >= 1
    x0, y0, side = boxes[0]
    assert abs(x0 - 200) < 25 and abs(y0 - 60) < 25 and abs(side - 375) < 40
    model = random_model(2, n_trees=2, max_depth=3, kinds=("axis",))
    labels, faces = segment_image(model, canvas, detect="auto")
    assert faces >= 1 and labels.shape == canvas.shape[:2]
    assert np.all(labels[:40] == 0)  # outside the face crop: background


def test_segment_folder_unwritable_output(tmp_path):
    from facesegment.errors import DataError

    model = random_model(1, n_trees=1, max_depth=2, kinds=("axis",))
    write_png_atomic(tmp_path / "in" / "a.png", np.zeros((250, 250, 3), np.uint8))
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(DataError, match=r"blocker/out: cannot write the outputs here"):
        segment_folder(model, tmp_path / "in", blocker / "out", progress=False)


def test_segment_folder_turns_phone_photos_upright(tmp_path):
    """A photo stored landscape with EXIF orientation 6 is segmented as displayed (portrait)."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6
    stored = np.random.default_rng(0).integers(0, 256, (30, 50, 3), dtype=np.uint8)
    (tmp_path / "in").mkdir()
    Image.fromarray(stored).save(tmp_path / "in" / "phone.jpg", quality=95, exif=exif.tobytes())
    model = random_model(1, n_trees=1, max_depth=2, kinds=("axis",))
    res = segment_folder(model, tmp_path / "in", tmp_path / "out", detect="never",
                         progress=False, n_workers=1)
    assert res[0].status == "ok" and (res[0].width, res[0].height) == (30, 50)
    assert read_label(tmp_path / "out" / "phone_label.png").shape == (50, 30)
    assert read_image(tmp_path / "out" / "phone_overlay.png").shape == (50, 30, 3)


def test_packing_cache_is_thread_safe():
    """Worker threads insert into and evict from the packing cache at the same time."""
    import sys
    import threading

    from facesegment.dense import _packing

    errors = []

    def work(seed):
        try:
            for i in range(2000):
                _packing.cached("test", np.empty(1), seed, lambda: i)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(repr(exc))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(_packing._CACHE) <= _packing._CACHE_SIZE


# ------------------------------------------------------------ hardening

def _photos(folder, names, size=(250, 250), seed=0):
    rng = np.random.default_rng(seed)
    for name in names:
        img = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".jpg"):
            import cv2

            cv2.imwrite(str(path), img[:, :, ::-1])
        else:
            write_png_atomic(path, img)


def _summary(out):
    with open(out / "summary.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_same_name_different_extension_keeps_both_outputs(tmp_path):
    """a.jpg and a.png in one folder: two label maps, CSV rows naming the files."""
    model = random_model(1, n_trees=1, max_depth=2, kinds=("axis",))
    _photos(tmp_path / "in", ["a.jpg", "a.png", "b.png", "sub/a.jpg"])
    out = tmp_path / "out"
    res = segment_folder(model, tmp_path / "in", out, progress=False, n_workers=1)
    assert [(r.name, r.output) for r in res] == [
        ("a.jpg", "a.jpg"), ("a.png", "a.png"), ("b.png", "b"), ("sub/a.jpg", "sub/a")]
    for name in ("a.jpg", "a.png", "b", "sub/a"):
        assert (out / f"{name}_label.png").is_file() and (out / f"{name}_overlay.png").is_file()
    assert not (out / "a_label.png").exists()
    # the two photos differ, so must their overlays
    assert not np.array_equal(read_image(out / "a.jpg_overlay.png"),
                              read_image(out / "a.png_overlay.png"))
    rows = _summary(out)
    assert [r["name"] for r in rows] == ["a.jpg", "a.png", "b.png", "sub/a.jpg"]
    assert len({r["name"] for r in rows}) == 4


def test_output_names_are_unique():
    from facesegment.faces.folder import output_names

    assert output_names(["a.jpg", "b.png", "s/a.jpg"]) == ["a", "b", "s/a"]
    assert output_names(["A.jpg", "a.png"]) == ["A.jpg", "a.png"]           # case-insensitive
    names = output_names(["a.jpg", "a.jpg.png", "a.png"])
    assert len({n.casefold() for n in names}) == 3


def test_single_file_glob_and_several_inputs(tmp_path):
    model = random_model(1, n_trees=1, max_depth=2, kinds=("axis",))
    src = tmp_path / "photos"
    _photos(src, ["x.png", "y.png", "z.jpg", "deep/w.png"])
    res = segment_folder(model, src / "x.png", tmp_path / "o1", progress=False, n_workers=1)
    assert [(r.name, r.status) for r in res] == [("x.png", "ok")]
    assert (tmp_path / "o1" / "x_label.png").is_file()
    res = segment_folder(model, str(src / "*.png"), tmp_path / "o2", progress=False, n_workers=1)
    assert [r.name for r in res] == ["x.png", "y.png"]
    res = segment_folder(model, str(src / "**" / "*.png"), tmp_path / "o3", progress=False,
                         n_workers=1)
    assert [r.name for r in res] == ["deep/w.png", "x.png", "y.png"]
    assert (tmp_path / "o3" / "deep" / "w_label.png").is_file()
    res = segment_folder(model, [src / "z.jpg", src / "deep"], tmp_path / "o4",
                         progress=False, n_workers=1)
    assert [r.name for r in res] == ["z.jpg", "deep/w.png"]


def test_pattern_matching_nothing_is_one_clear_error(tmp_path):
    from facesegment.errors import DataError

    model = random_model(1, n_trees=1, max_depth=2, kinds=("axis",))
    (tmp_path / "photos").mkdir()
    with pytest.raises(DataError, match=r"photos/\*\.jpg: matches no images .*quote it"):
        segment_folder(model, str(tmp_path / "photos" / "*.jpg"), tmp_path / "out")
    with pytest.raises(DataError, match=r"nope\.jpg: does not exist"):
        segment_folder(model, str(tmp_path / "nope.jpg"), tmp_path / "out")


def test_label_png_has_class_palette_and_reads_back_as_ids(tmp_path):
    from PIL import Image

    from facesegment.classes import CLASS_COLORS

    model = random_model(3, n_trees=2, max_depth=4, kinds=("axis", "two-probe"))
    _photos(tmp_path / "in", ["f.png"])
    image = read_image(tmp_path / "in" / "f.png")
    labels, _ = segment_image(model, image, alpha=0.5)
    segment_folder(model, tmp_path / "in", tmp_path / "out", alpha=0.5, progress=False,
                   n_workers=1)
    path = tmp_path / "out" / "f_label.png"
    with Image.open(path) as im:
        assert im.mode == "P"
        pal = np.array(im.getpalette()[:24], np.uint8).reshape(8, 3)
        rgb = np.asarray(im.convert("RGB"))
    np.testing.assert_array_equal(pal, CLASS_COLORS)
    np.testing.assert_array_equal(read_label(path), labels)            # ids, not colours
    np.testing.assert_array_equal(rgb, CLASS_COLORS[labels])           # viewers: colours


def test_save_proba_writes_float16_maps(tmp_path):
    model = random_model(3, n_trees=2, max_depth=4, kinds=("axis", "two-probe"))
    _photos(tmp_path / "in", ["f.png", "g.png"])
    out = tmp_path / "out"
    segment_folder(model, tmp_path / "in", out, alpha=0.5, progress=False, n_workers=1,
                   save_proba=True)
    with np.load(out / "f_proba.npz") as z:
        proba, names, alpha = z["proba"], z["class_names"], float(z["alpha"])
    assert proba.dtype == np.float16 and proba.shape == (250, 250, 8) and alpha == 0.5
    assert list(names) == list(model.class_names)
    np.testing.assert_allclose(proba.astype(np.float32).sum(-1), 1, atol=1e-2)
    lab = read_label(out / "f_label.png")
    assert (np.argmax(proba, -1) == lab).mean() > 0.99
    assert sorted(p.name for p in out.iterdir()) == [
        ".facesegment-outputs", "f_label.png", "f_overlay.png", "f_proba.npz", "g_label.png", "g_overlay.png",
        "g_proba.npz", "summary.csv"]
    segment_folder(model, tmp_path / "in", tmp_path / "out2", progress=False, n_workers=1)
    assert not list((tmp_path / "out2").glob("*.npz"))


def test_full_disk_stops_and_keeps_summary(tmp_path, monkeypatch):
    """An output that cannot be written stops the run: one error, the finished
    images kept and listed, the half-written image's outputs removed."""
    import facesegment.data.imageio as imageio
    from facesegment.errors import DataError

    model = random_model(1, n_trees=1, max_depth=2, kinds=("axis",))
    _photos(tmp_path / "in", ["a.png", "b.png", "c.png", "d.png"])
    real = imageio.write_png_atomic

    def full(path, array):
        if "b_overlay" in str(path):
            raise DataError(path, "cannot write output: No space left on device")
        return real(path, array)

    monkeypatch.setattr(imageio, "write_png_atomic", full)
    out = tmp_path / "out"
    with pytest.raises(DataError, match=r"b_overlay\.png: cannot write output: No space left"
                                        r".*summary\.csv lists the images finished"):
        segment_folder(model, tmp_path / "in", out, progress=False, n_workers=1, )
    rows = {r["name"]: r["status"] for r in _summary(out)}
    assert rows["a.png"] == "ok" and rows["b.png"] == "error"
    assert set(rows) == {"a.png", "b.png", "c.png", "d.png"}
    assert (out / "a_label.png").is_file() and not (out / "b_label.png").exists()
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


def test_interrupt_keeps_finished_outputs_and_summary(tmp_path, monkeypatch):
    """Ctrl-C mid-run: the image being segmented finishes, queued ones are not
    started, summary.csv lists every input (unfinished: "not done")."""
    import os
    import signal

    import facesegment.faces.folder as folder

    model = random_model(1, n_trees=1, max_depth=2, kinds=("axis",))
    _photos(tmp_path / "in", ["a.png", "b.png", "c.png", "d.png", "e.png"])
    real = folder.segment_file
    started = []

    def interrupting(path, *a, **kw):
        started.append(path)
        if path.endswith("b.png"):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while b is being segmented
        return real(path, *a, **kw)

    monkeypatch.setattr(folder, "segment_file", interrupting)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        segment_folder(model, tmp_path / "in", out, progress=False, n_workers=1)
    rows = {r["name"]: (r["status"], r["message"]) for r in _summary(out)}
    assert rows["a.png"][0] == "ok" and rows["b.png"][0] == "ok"
    assert rows["e.png"] == ("not done", "not segmented: interrupted")
    assert len(started) <= 3
    for name in ("a", "b"):
        assert (out / f"{name}_label.png").is_file()
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


def _reference_segment(model, image, boxes, alpha):
    """The whole-image accumulation segment_image used before mapping back by regions."""
    from facesegment.dense import predict_proba_raw, reweight

    h, w = image.shape[:2]
    total = np.zeros((h, w, model.arrays.n_classes), np.float32)
    for box in boxes:
        raw = predict_proba_raw(model, crop_face(image, box), mode="full")
        total += uncrop_proba(reweight(raw, model.sampling_factors, alpha), box, image.shape)
    labels = np.argmax(total, axis=-1).astype(np.uint8)
    labels[total.sum(axis=-1) <= 0] = 0
    return labels, total


def test_mapping_back_by_regions_equals_whole_image(monkeypatch):
    """Overlapping faces, a face apart and a face over the border: the same
    labels and probabilities as accumulating over the whole image."""
    import facesegment.faces.photo as photo

    model = random_model(5, n_trees=2, max_depth=4, kinds=("axis", "two-probe"))
    image = np.random.default_rng(5).integers(0, 256, (300, 420, 3), dtype=np.uint8)
    boxes = [(30.3, 20.7, 120.0), (100.2, 60.5, 90.0), (300.0, 180.0, 60.0),
             (380.5, -30.0, 100.0), (10.0, 250.0, 31.0)]
    monkeypatch.setattr(photo, "find_crops", lambda *a, **k: boxes)
    labels, faces, proba = segment_image(model, image, alpha=0.7, detect="always",
                                         return_proba=True)
    ref, total = _reference_segment(model, image, boxes, 0.7)
    assert faces == 5
    np.testing.assert_array_equal(labels, ref)
    sums = total.sum(-1, keepdims=True)
    expected = np.where(sums > 0, total / np.where(sums > 0, sums, 1),
                        np.eye(8, dtype=np.float32)[0])
    np.testing.assert_allclose(proba, expected, atol=2e-4)  # warpAffine: 1/32-px weights


def test_big_photo_memory_is_bounded(monkeypatch):
    """A 24-megapixel photo with one face: segment_image allocates a small
    multiple of the photo, not H x W x 8 float maps (~1.5 GB before)."""
    import tracemalloc

    import facesegment.faces.photo as photo

    model = random_model(1, n_trees=1, max_depth=3, kinds=("axis",))
    image = np.full((4000, 6000, 3), 127, np.uint8)
    monkeypatch.setattr(photo, "find_crops", lambda *a, **k: [(2000.0, 1000.0, 1500.0)])
    tracemalloc.start()
    try:
        labels, faces = segment_image(model, image, detect="always")
        over = overlay(image, labels)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert faces == 1 and labels.shape == (4000, 6000) and over.shape == image.shape
    assert peak < 400e6, f"peak {peak / 1e6:.0f} MB"


@pytest.mark.shared
@pytest.mark.landmarks
@pytest.mark.slow
def test_downscaled_detection_matches_full_resolution(faces300w):
    """Faces in a 24-megapixel photo are detected on a 2000-px copy; the
    LFW-style crops (landmarks found at full resolution) match those of
    detection at full resolution within 2 pixels of the 250x250 crop."""
    pytest.importorskip("dlib", reason="needs the landmarks extra (dlib-bin)")
    import cv2

    from facesegment.data.datasets import find_faces

    recs = find_faces(faces300w / "test")[:3]
    for rec in recs:
        canvas = np.full((4000, 6000, 3), 127, np.uint8)
        face = cv2.resize(read_image(rec.image), (1500, 1500), interpolation=cv2.INTER_LINEAR)
        canvas[1000:2500, 2000:3500] = face
        full = find_crops(canvas, "landmarks", max_side=None)
        small = find_crops(canvas, "landmarks")
        assert len(full) == len(small) == 1
        diff = np.abs(np.subtract(full[0], small[0])) * 250 / full[0][2]
        assert diff.max() <= 2.0, (rec.name, diff)


def test_model_image_follows_the_model_layout():
    """Photos are given to a model in its windows' channels: RGB, or grey (H, W, 1)."""
    from types import SimpleNamespace

    import cv2

    from facesegment.errors import FaceSegmentError
    from facesegment.layout import WindowLayout
    from facesegment.faces.segment import model_image

    rgb = _gradient(20, 30)
    assert model_image(SimpleNamespace(layout=WindowLayout()), rgb) is rgb
    grey = model_image(SimpleNamespace(layout=WindowLayout(channels=1)), rgb)
    np.testing.assert_array_equal(grey[:, :, 0], cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))
    with pytest.raises(FaceSegmentError, match=r"windows of 4 channels \(c0, c1, c2, c3\)"):
        model_image(SimpleNamespace(layout=WindowLayout(channels=4)), rgb)
