"""Segmenting a folder of face photos: detection, LFW-style crop, mapping back.

For each image (turned upright by its EXIF orientation, as viewers show
it): if it is not already a 250x250 face crop, detect faces, cut an
LFW-style square crop around each (resized to 250x250 bilinearly), segment the
crop densely in full mode (reflect padding, every pixel predicted), and map the
class probabilities back onto the original image's pixels (bilinear warp of
the probabilities, then argmax; pixels outside every face's crop are
background).  Outputs per image: ``NAME_label.png`` (class ids),
``NAME_overlay.png`` (classes blended over the photo) and a row of the summary
CSV.

Crop calibration (``CALIBRATION``): the faces300w crops are square boxes centred
on the 68 landmarks with side 2.2x their larger extent.  A detector box is
mapped to such a crop as ``centre = box centre + (ox, oy) * box side`` and
``side = k * box side``, with ``(k, ox, oy)`` the medians measured on the 250
faces300w test crops (``python benchmarks/bench_inference.py --detectors``).
"""

import os
import threading
import time
from dataclasses import dataclass

import cv2
import numpy as np

from .atomic import check_writable_folder
from .classes import CLASS_COLORS, N_CLASSES
from .errors import DataError

CROP = 250
DETECTORS = ("landmarks", "dlib")
DETECT_MODES = ("auto", "always", "never")
#: detector -> (k, ox, oy): crop side = k * box side; centre offset in box sides.
#: Medians over the faces300w test crops (``benchmarks/bench_inference.py
#: --detectors``; docs/inference.md, "Choosing the detector").
CALIBRATION = {"dlib": (2.0, -0.02, 0.087)}

#: dlib's detector and predictor are shared by the worker threads of a process
#: and are not safe to call concurrently (concurrent calls crashed the process):
#: calls into dlib are serialised; inference runs in parallel.
_DLIB_LOCK = threading.Lock()
#: Side of an LFW-style crop relative to the landmarks' larger extent.
LANDMARK_SCALE = 2.2


def _dlib_models():
    """dlib's face detector and 68-point predictor (loaded once per process)."""
    from .label import get_models

    return get_models()


def _dlib_rects(gray):
    detector = _dlib_models()[0]
    with _DLIB_LOCK:
        rects = detector(gray, 0)
        if len(rects) == 0 and max(gray.shape) < 1000:
            rects = detector(gray, 1)
    return rects


def detect_faces(image, detector="dlib"):
    """Face boxes ``(x, y, w, h)`` (float64 ``(n, 4)``), largest first.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    detector : {"landmarks", "dlib"}
        Both use dlib's HOG frontal face detector (tried again upsampled once
        when it finds nothing in an image under 1000 px).  OpenCV's Haar
        cascade is not offered: the installed OpenCV 5 no longer ships it.
    """
    if detector not in DETECTORS:
        raise ValueError(f"detector={detector!r} is not one of {DETECTORS}")
    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    boxes = np.array([(r.left(), r.top(), r.width(), r.height())
                      for r in _dlib_rects(gray)], dtype=np.float64).reshape(-1, 4)
    order = np.argsort(-boxes[:, 2] * boxes[:, 3], kind="stable")
    return boxes[order]


def landmark_box(points):
    """LFW-style crop ``(x0, y0, side)`` of 68 landmarks: centred on their bounding
    box, side 2.2x its larger extent (how faces300w was cropped)."""
    lo, hi = points.min(axis=0), points.max(axis=0)
    side = LANDMARK_SCALE * float(max(hi - lo))
    c = (lo + hi) / 2
    return float(c[0]) - side / 2, float(c[1]) - side / 2, side


def find_crops(image, detector="landmarks", calibration=None):
    """LFW-style crop boxes ``(x0, y0, side)`` of every face found, largest first.

    "landmarks": dlib boxes, then dlib's 68 landmarks in each, then
    :func:`landmark_box` (the dataset's own rule).  "dlib": the detector box
    mapped by the measured ``CALIBRATION``.
    """
    boxes = detect_faces(image, detector)
    if detector != "landmarks":
        return [crop_box(b, detector, calibration) for b in boxes]
    import dlib

    predictor = _dlib_models()[1]
    out = []
    for x, y, w, h in boxes:
        rect = dlib.rectangle(int(x), int(y), int(x + w), int(y + h))
        with _DLIB_LOCK:
            shape = predictor(image, rect)
            pts = np.array([(shape.part(i).x, shape.part(i).y) for i in range(68)],
                           dtype=np.float64)
        out.append(landmark_box(pts))
    return out


def crop_box(face_box, detector="dlib", calibration=None):
    """The LFW-style square crop ``(x0, y0, side)`` for a detector box."""
    k, ox, oy = (calibration or CALIBRATION)[detector]
    x, y, w, h = (float(v) for v in face_box)
    side = k * max(w, h)
    cx = x + w / 2 + ox * w
    cy = y + h / 2 + oy * h
    return cx - side / 2, cy - side / 2, side


def _crop_matrix(box, size=CROP):
    """Affine matrix mapping original pixel coordinates to crop coordinates."""
    x0, y0, side = box
    s = size / side
    return np.array([[s, 0, (0.5 - x0) * s - 0.5], [0, s, (0.5 - y0) * s - 0.5]])


def crop_face(image, box, size=CROP):
    """Cut the square ``box`` and resize it to ``size x size`` bilinearly.

    Parts of the box outside the image are filled by replicating the border.
    """
    return cv2.warpAffine(image, _crop_matrix(box, size), (size, size),
                          flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def uncrop_proba(proba, box, shape):
    """Warp crop probabilities ``(size, size, C)`` back onto an image of ``shape``.

    Returns float32 ``(H, W, C)``; pixels outside the box are 0.
    """
    h, w = shape[:2]
    m = _crop_matrix(box, proba.shape[0])
    out = np.empty((h, w, proba.shape[2]), dtype=np.float32)
    for c0 in range(0, proba.shape[2], 4):
        part = np.ascontiguousarray(proba[:, :, c0:c0 + 4])
        res = cv2.warpAffine(part, m, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        out[:, :, c0:c0 + 4] = res.reshape(h, w, -1)
    return out


def overlay(image, labels, opacity=0.5):
    """Class colours blended over the photo (background left as is)."""
    colours = CLASS_COLORS[np.minimum(labels, N_CLASSES - 1)].astype(np.float32)
    out = image.astype(np.float32)
    fg = (labels > 0) & (labels < N_CLASSES)
    out[fg] = (1 - opacity) * out[fg] + opacity * colours[fg]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


# --------------------------------------------------------------- one image

@dataclass
class SegmentResult:
    """Outcome of one image (a row of the summary CSV)."""

    name: str
    status: str          # "ok", "no face", "unreadable", "error"
    faces: int = 0
    width: int = 0
    height: int = 0
    seconds: float = 0.0
    message: str = ""


def segment_image(model, image, alpha=1.0, detect="auto", detector="landmarks"):
    """Segment one photo; return ``(labels (H, W) uint8, number of faces)``.

    ``detect="auto"`` treats exactly-250x250 images as LFW-style crops already;
    "always" detects in every image; "never" segments every image as a crop of
    its own size.  With detection, an image without a face returns
    ``(None, 0)``.
    """
    from .inference import predict_image, predict_proba_raw, reweight

    h, w = image.shape[:2]
    if detect == "never" or (detect == "auto" and (h, w) == (CROP, CROP)):
        return predict_image(model, image, mode="full", alpha=alpha)[1], 1
    boxes = find_crops(image, detector)
    if len(boxes) == 0:
        return None, 0
    total = np.zeros((h, w, model.arrays.n_classes), dtype=np.float32)
    for box in boxes:
        crop = crop_face(image, box)
        raw = predict_proba_raw(model, crop, mode="full")
        total += uncrop_proba(reweight(raw, model.sampling_factors, alpha), box, image.shape)
    labels = np.argmax(total, axis=-1).astype(np.uint8)
    labels[total.sum(axis=-1) <= 0] = 0
    return labels, len(boxes)


def segment_file(path, model, out_dir, name, alpha, detect, detector):
    """Task: segment one file and write its outputs (top level, picklable).

    Returns a :class:`SegmentResult`; bad inputs are reported, never raised.
    """
    from .imageio import read_image, write_png_atomic

    t0 = time.perf_counter()
    try:
        image = read_image(path, orient=True)
    except DataError as exc:
        return SegmentResult(name, "unreadable", message=str(exc))
    h, w = image.shape[:2]
    try:
        labels, faces = segment_image(model, image, alpha=alpha, detect=detect,
                                      detector=detector)
    except (ValueError, cv2.error) as exc:
        return SegmentResult(name, "error", 0, w, h, time.perf_counter() - t0,
                             f"{path}: {exc}")
    if labels is None:
        return SegmentResult(name, "no face", 0, w, h, time.perf_counter() - t0,
                             f"{path}: no face found by the {detector} detector")
    base = os.path.join(out_dir, name)
    write_png_atomic(base + "_label.png", labels)
    write_png_atomic(base + "_overlay.png", overlay(image, labels))
    return SegmentResult(name, "ok", faces, w, h, time.perf_counter() - t0)


def write_summary_csv(path, results):
    """The summary CSV (one row per input image), written atomically."""
    import csv
    import io

    from .metrics import write_text_atomic

    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(["name", "status", "faces", "width", "height", "seconds", "message"])
    for r in results:
        wr.writerow([r.name, r.status, r.faces, r.width, r.height, f"{r.seconds:.3f}",
                     r.message])
    write_text_atomic(path, buf.getvalue())


def segment_folder(model, input_dir, output_dir, alpha=1.0, detect="auto",
                   detector="landmarks", scheduler=None, n_workers=None, progress=True):
    """Segment every image under ``input_dir`` into ``output_dir``.

    The output tree mirrors the input tree (``OUT/<rel>/NAME_label.png``,
    ``OUT/<rel>/NAME_overlay.png``) and ``OUT/summary.csv`` lists every input.

    Returns
    -------
    list of SegmentResult, in input order.
    """
    from pathlib import Path

    from .datasets import find_images
    from .parallel import map_tasks

    if detect not in DETECT_MODES:
        raise ValueError(f"detect={detect!r} is not one of {DETECT_MODES}")
    if detector not in DETECTORS:
        raise ValueError(f"detector={detector!r} is not one of {DETECTORS}")
    input_dir = Path(input_dir)
    files = find_images(input_dir)
    if not files:
        raise DataError(input_dir, "contains no images (.jpg, .jpeg, .png, .bmp)",
                        "point at a folder of photos")
    out = Path(output_dir)
    if out.resolve() == input_dir.resolve():
        raise DataError(out, "is the input folder", "write the outputs to another folder")
    items = [(str(f), f.relative_to(input_dir).with_suffix("").as_posix()) for f in files]
    _make_output_folders(out, {os.path.dirname(name) for _, name in items})
    results = [None] * len(items)
    for i, res in map_tasks(_segment_item, items,
                            args=(model, str(out), alpha, detect, detector),
                            scheduler=scheduler, n_workers=n_workers, desc="segment",
                            unit="images", progress=progress):
        results[i] = res
    write_summary_csv(out / "summary.csv", results)
    return results


def _make_output_folders(out, subfolders):
    """Create ``out`` and its ``subfolders`` and check that ``out`` can be written.

    Raises
    ------
    DataError
        Naming the folder that cannot be created or written, before any work.
    """
    problem, fix = "cannot write the outputs here", "choose a writable OUTPUT_DIR"
    check_writable_folder(out, problem, fix)
    folder = out
    try:
        for sub in sorted(subfolders):
            folder = os.path.join(out, sub)
            os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise DataError(folder, f"{problem} ({exc.strerror or exc})", fix) from exc


def _segment_item(item, model, out_dir, alpha, detect, detector):
    path, name = item
    return segment_file(path, model, out_dir, name, alpha, detect, detector)
