"""Segmenting photos: crop geometry, mapping back, folder processing and skipping."""

import csv

import numpy as np
import pytest

from facesegment.imageio import read_image, read_label, write_png_atomic
from facesegment.segment import (crop_box, crop_face, find_crops, landmark_box, overlay,
                                 segment_folder, segment_image, uncrop_proba)
from tests.test_inference import random_model


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
    assert status == {"a": "ok", "broken": "unreadable", "noface": "no face", "sub/grey": "ok"}
    lab = read_label(out / "a_label.png")
    assert lab.shape == (250, 250) and lab.max() < 8
    assert read_image(out / "sub" / "grey_overlay.png").shape == (250, 250, 3)
    assert not (out / "noface_label.png").exists()
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert [r["name"] for r in rows] == ["a", "broken", "noface", "sub/grey"]
    assert "broken.jpg" in rows[1]["message"]
    with pytest.raises(ValueError, match="detect="):
        segment_folder(model, src, out, detect="sometimes")


@pytest.mark.shared
@pytest.mark.slow
def test_real_face_in_larger_photo(faces300w, tmp_path):
    """A faces300w crop pasted, scaled, into a bigger canvas is found and its
    LFW-style crop recovered (the crop box is known exactly)."""
    import cv2

    from facesegment.datasets import find_faces

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

    from facesegment import _packing

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
