"""Detector-aligned test faces: re-crop labelled faces the way `segment` does.

The faces300w crops (and LFW-style crops made from the human landmarks) are
cut around the *human* landmarks, so a model that uses the position in the
crop is given ground-truth alignment.  ``facesegment segment`` cuts its crops
around dlib's *predicted* landmarks instead.  This module re-crops each
labelled face by exactly segment's rule, so that models are scored on the
alignment they would get on a new photo:

1. the image is padded by ``pad_fraction`` (default 25 %) of its longer side
   on every side, replicating its border pixels (the fill
   :func:`facesegment.faces.segment.crop_face` uses for a box reaching outside the
   image), so that a face touching the border can still be detected;
2. :func:`facesegment.faces.segment.find_landmarks` (dlib's face detector, dlib's
   68 predicted landmarks), then :func:`facesegment.faces.segment.landmark_box` mapped by the model's crop rule:
   the dataset's own crops, see below);
   of several faces the one closest to the image centre is kept
   (:func:`facesegment.faces.label.pick_central`, the rule of ``facesegment
   label``; ``choose="largest"``: the first face `segment` lists);
3. the box is shifted back to the unpadded image; the image is cut with
   :func:`facesegment.faces.segment.crop_face` (bilinear);
4. the label map of the crop (``labels=``): ``"landmarks"`` (the default)
   draws it with :func:`facesegment.faces.landmarks.render_labels` from the
   face's human landmarks (``NAME.pts`` beside the image) mapped through the
   same matrix (:func:`draw_label`), when the face has them; otherwise, and
   with ``labels="warp"``, the label map is warped by that matrix with
   nearest-neighbour sampling (:func:`warp_label`), which aliases the thin
   parts (brows, eyes) at a change of scale.  Either way, label pixels that
   come from outside the source image, or from a 255 pixel of its label
   map, are 255 ("not scored").  The renderer reproduces faces300w's label
   maps (99.9993 % of the training pixels, 99.9992 % of the test pixels:
   ``python -m studies.label_redraw``), so the redrawn map is the label the
   dataset would have drawn on the new crop.

A face where no face is found is *missed*: it is scored on its original label
map as if every pixel were predicted background (class 0), see
:func:`facesegment.evaluation.scoring.evaluate` and ``FaceRecord.missed``.

The crop rule.  faces300w's crops were cut around the human landmarks by
:func:`facesegment.faces.segment.landmark_box`; LFW's 250x250 images were cut by
LFW's own detector, with the face higher and smaller in the frame.  A model
that uses the position in the crop (its prior, a cascade's position planes)
needs new faces cut into its training frame, so :func:`measure_crop_rule`
measures, on training faces, how the box from dlib's predicted landmarks
maps to the crops themselves (the medians of scale and centre offset, ``(k,
ox, oy)``), and the position prior carries it
(:attr:`facesegment.position.PositionPrior.crop_rule`).  On faces300w it is
close to ``(1, 0, 0)``; it also absorbs dlib's bias against the human
landmarks.
"""

import hashlib
import json
import os

import cv2
import numpy as np

from ..atomic import check_writable_folder, write_json_atomic
from ..classes import IGNORE
from ..data.datasets import load_face
from ..data.download import sha256_file
from ..data.imageio import write_label_png, write_png_atomic
from ..errors import DataError
from ..limits import read_text_file
from ..parallel import map_tasks
from ..position import crop_rule_of
from .crops import CROP, _crop_matrix, crop_face, find_landmarks, landmark_box
from .label import pick_central
from .landmarks import pts_path_for, read_pts, render_labels

#: Version of the re-cropping rule; part of the cache key of an aligned folder
#: (3: `segment`'s detection passes are those of `facesegment label`;
#: 4: label maps drawn from the mapped human landmarks, ``labels=``).
VERSION = 4
#: Padding on every side, as a fraction of the image's longer side.
PAD_FRACTION = 0.25
#: Which face is kept when several are found.
CHOICES = ("central", "largest")
#: The record of an aligned folder.
INFO_NAME = "aligned.json"
IMAGE_SUFFIX, LABEL_SUFFIX = ".png", "_label.png"
#: How the re-cropped label map is made (see the module docstring).
LABELS = ("landmarks", "warp")


def _check(pad_fraction, choose, labels="warp"):
    if labels not in LABELS:
        raise ValueError(f"labels={labels!r} is not one of {LABELS}")
    if choose not in CHOICES:
        raise ValueError(f"choose={choose!r} is not one of {CHOICES}")
    if not (isinstance(pad_fraction, (int, float)) and 0 <= pad_fraction <= 4):
        raise ValueError(f"pad_fraction={pad_fraction!r} must be a number in 0..4 "
                         "(a fraction of the image's longer side)")


def detect_box(image, pad_fraction=PAD_FRACTION, choose="central", crop_rule=None):
    """The crop box `segment` would cut for the face of ``image``, or None.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    pad_fraction : float
        Border added on every side before detection, as a fraction of the
        longer side (replicated border pixels; 0.25 by default).
    choose : {"central", "largest"}
        Of several faces, the one whose crop is centred closest to the image
        centre, or the largest (the first of :func:`facesegment.faces.segment.find_landmarks`).
    crop_rule : (k, ox, oy), optional
        Maps the landmark box to the dataset's crops
        (:func:`facesegment.faces.segment.apply_crop_rule`); None: as it is.

    Returns
    -------
    (x0, y0, side) : tuple of float, in ``image``'s pixels, or None
        ``None`` when dlib finds no face.
    """
    found = _central_face(image, pad_fraction, choose, crop_rule)
    return None if found is None else found[1]


def detect_landmarks(image, pad_fraction=PAD_FRACTION, choose="central"):
    """dlib's 68 predicted landmarks of the face :func:`detect_box` keeps.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    pad_fraction : float
        Border added on every side before detection, as a fraction of the
        longer side (replicated border pixels).
    choose : {"central", "largest"}
        Which face is kept when several are found (see :func:`detect_box`).

    Returns
    -------
    float64 (68, 2) or None
        The landmarks ``(x, y)`` in ``image``'s pixels; None when no face is found.

    Raises
    ------
    ValueError
        ``pad_fraction`` outside 0..4 or ``choose`` not one of :data:`CHOICES`.
    """
    found = _central_face(image, pad_fraction, choose, None)
    return None if found is None else found[0]


def _central_face(image, pad_fraction, choose, crop_rule):
    """``(landmarks, box)`` of the face kept (see :func:`detect_box`), or None."""
    _check(pad_fraction, choose)
    pad = int(round(pad_fraction * max(image.shape[:2])))
    padded = (cv2.copyMakeBorder(np.ascontiguousarray(image), pad, pad, pad, pad,
                                 cv2.BORDER_REPLICATE) if pad else image)
    points = find_landmarks(padded)
    if not points:
        return None
    boxes = [landmark_box(pts, crop_rule) for pts in points]
    k = 0
    if choose == "central" and len(boxes) > 1:
        k = pick_central([(x, y, x + s, y + s) for x, y, s in boxes], padded.shape)
    x0, y0, side = boxes[k]
    return points[k] - pad, (float(x0) - pad, float(y0) - pad, float(side))


def warp_label(label, box, size=CROP):
    """Cut a label map by ``box`` like :func:`facesegment.faces.crops.crop_face` cuts the image.

    Nearest-neighbour sampling keeps the values class ids.

    Parameters
    ----------
    label : uint8 (H, W)
        Class ids, 255 = not scored.
    box : (x0, y0, side)
        The square crop, in ``label``'s pixels.
    size : int
        Side of the output crop, in pixels (:data:`facesegment.faces.crops.CROP`).

    Returns
    -------
    uint8 (size, size)
        The cut label map; 255 where the crop reaches outside ``label``.
    """
    return cv2.warpAffine(np.ascontiguousarray(label), _crop_matrix(box, size), (size, size),
                          flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=IGNORE)


def draw_label(points, label, box, size=CROP):
    """The label map of the crop ``box`` drawn from 68 landmarks.

    ``points`` are mapped by the matrix :func:`facesegment.faces.crops.crop_face`
    cuts by and rendered with :func:`facesegment.faces.landmarks.render_labels`.

    Parameters
    ----------
    points : float (68, 2)
        The face's landmarks, in ``label``'s pixels.
    label : uint8 (H, W)
        The source label map; only its 255 pixels (and its extent) are used.
    box : (x0, y0, side)
        The square crop, in ``label``'s pixels.
    size : int
        Side of the output crop, in pixels.

    Returns
    -------
    uint8 (size, size)
        Class ids; 255 wherever :func:`warp_label` gives 255 (source outside
        ``label``, or 255 in it).
    """
    m = _crop_matrix(box, size)
    mapped = np.asarray(points, np.float64) @ m[:, :2].T + m[:, 2]
    out = render_labels(mapped, (size, size))
    out[warp_label(label, box, size) == IGNORE] = IGNORE
    return out


def realign_face(image, label, pad_fraction=PAD_FRACTION, choose="central", crop_rule=None,
                 points=None):
    """Re-crop one labelled face by `segment`'s rule (see the module docstring).

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    label : uint8 (H, W)
        Class ids, 255 = not scored.
    pad_fraction, choose, crop_rule
        See :func:`detect_box`.
    points : float (68, 2), optional
        The face's human landmarks (in ``image``'s pixels): the crop's label
        map is drawn from them (:func:`draw_label`); None: ``label`` warped
        by nearest neighbour (:func:`warp_label`).

    Returns
    -------
    (image_crop, label_crop, box) or None
        ``image_crop`` uint8 (250, 250, 3), ``label_crop`` uint8 (250, 250)
        (255 where the crop reaches outside the image), ``box`` the
        ``(x0, y0, side)`` cut; None when no face is found.
    """
    if label.shape != image.shape[:2]:
        raise ValueError(f"label has shape {label.shape}, image {image.shape[:2]}")
    box = detect_box(image, pad_fraction, choose, crop_rule)
    if box is None:
        return None
    lab = warp_label(label, box) if points is None else draw_label(points, label, box)
    return crop_face(image, box), lab, box


# ---------------------------------------------------------------- folders

def _sha256(path):
    return sha256_file(path)


def _pts_of(record, labels):
    """The ``.pts`` beside ``record``'s image when ``labels="landmarks"`` and it
    exists, else None (the label map is warped)."""
    path = pts_path_for(record.image)
    return path if labels == "landmarks" and os.path.isfile(path) else None


def _key(records, pad_fraction, choose, crop_rule, labels="warp"):
    """The cache key: the re-cropping rule, how labels are made, dlib's and OpenCV's
    versions and every input's SHA-256 (the ``.pts`` too when the labels are drawn
    from it).  OpenCV's version is part of it because its bilinear warp (the crop's
    pixels) changed between versions: 4.10 and 5.1 differ by up to 3 grey levels on
    about an eighth of the pixels (``python -m benchmarks.determinism``)."""
    try:
        import dlib
        dlib_version = dlib.__version__
    except ImportError:
        dlib_version = None
    faces = []
    for r in records:
        if r.label is None:
            raise DataError(r.image, "has no label map",
                            "run `facesegment label` on the folder or remove the image")
        pts = _pts_of(r, labels)
        try:
            faces.append([r.name, _sha256(r.image), _sha256(r.label),
                          None if pts is None else _sha256(pts)])
        except OSError as exc:
            raise DataError(exc.filename, f"cannot read it ({exc.strerror or exc})",
                            "check the path and its permissions") from exc
    text = json.dumps({"version": VERSION, "crop": CROP, "pad_fraction": pad_fraction,
                       "choose": choose, "crop_rule": crop_rule, "labels": labels,
                       "dlib": dlib_version, "opencv": cv2.__version__, "faces": faces})
    return hashlib.sha256(text.encode()).hexdigest()


def _outputs(out_dir, name):
    """``(image_path, label_path)`` of face ``name`` in ``out_dir``."""
    parts = name.split("/")
    if not name or os.path.isabs(name) or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"face name {name!r} is not a relative path without '..'")
    base = os.path.join(os.fspath(out_dir), *parts)
    return base + IMAGE_SUFFIX, base + LABEL_SUFFIX


def _realign_task(record, out_dir, pad_fraction, choose, crop_rule, labels="warp"):
    """Task: re-crop one face and write its files (top level, picklable).

    Returns ``(name, box or None, label source)``; a missed face's files from
    an earlier run are removed.
    """
    image, label = load_face(record)
    pts = _pts_of(record, labels)
    points = None if pts is None else read_pts(pts)
    source = "warp" if points is None else "landmarks"
    img_path, lab_path = _outputs(out_dir, record.name)
    res = realign_face(image, label, pad_fraction, choose, crop_rule, points=points)
    if res is None:
        for p in (img_path, lab_path):
            if os.path.isfile(p):
                os.remove(p)
        return record.name, None, source
    crop, lab, box = res
    write_png_atomic(img_path, crop)
    write_label_png(lab_path, lab)
    return record.name, [float(v) for v in box], source


def _read_info(out_dir):
    """The folder's ``aligned.json`` (a dict of format "facesegment-aligned"), or None."""
    path = os.path.join(os.fspath(out_dir), INFO_NAME)
    if not os.path.isfile(path):
        return None
    try:
        info = json.loads(read_text_file(path, "aligned faces' record"))
    except (ValueError, RecursionError):
        return None
    ok = isinstance(info, dict) and info.get("format") == "facesegment-aligned"
    return info if ok else None


def _info_file(path):
    """Whether ``path`` is an ``aligned.json`` this module wrote (its format)."""
    return _read_info(os.path.dirname(os.fspath(path))) is not None


def _cache_hit_info(info):
    return info if info is not None and isinstance(info.get("faces"), list) else None


def _ours(info):
    """Face names whose files an earlier run wrote into the folder (its record)."""
    if info is None:
        return set()
    names = [f.get("name") for f in info.get("faces") or () if isinstance(f, dict)]
    names += list(info.get("written") or ())
    return {n for n in names if isinstance(n, str)}


def _check_only_ours(out_dir, names, info):
    """Refuse (DataError, before any write) a folder holding a ``NAME.png`` or
    ``NAME_label.png`` the re-cropping did not write: the cache never replaces
    or removes a user's file (e.g. ``--aligned-dir`` pointed into the data)."""
    ours = _ours(info)
    theirs = [p for n in names if n not in ours for p in _outputs(out_dir, n)
              if os.path.lexists(p)]
    if theirs:
        raise DataError(out_dir, f"holds {len(theirs)} files the re-cropped faces would "
                        f"replace but that facesegment did not write (e.g. "
                        f"{os.path.basename(theirs[0])}: your data?); they are kept",
                        "point --aligned-dir at a new or empty folder")


def _scored(records, out_dir, info):
    """The records to score, from the inputs and an aligned folder's record."""
    from dataclasses import replace

    found = {f["name"]: f["found"] for f in info["faces"]}
    out = []
    for r in records:
        if found[r.name]:
            img, lab = _outputs(out_dir, r.name)
            out.append(replace(r, image=img, label=lab, missed=False))
        else:
            out.append(replace(r, missed=True))
    return out


def realign_records(records, out_dir, workers=None, progress=True, *,
                    pad_fraction=PAD_FRACTION, choose="central", crop_rule=None,
                    labels="landmarks"):
    """Re-crop labelled faces by `segment`'s rule into ``out_dir`` (cached).

    Parameters
    ----------
    records : list of facesegment.data.datasets.FaceRecord (labelled, unique names)
    out_dir : path
        Gets ``NAME.png`` (lossless) and ``NAME_label.png`` per face found
        (``NAME`` may hold '/': subfolders) and ``aligned.json``: per face
        ``found`` and ``box`` (``[x0, y0, side]`` in the source image's pixels,
        or null), ``n_faces``, ``n_found``, ``n_missed``, and ``key``: a
        SHA-256 over :data:`VERSION`, the options (crop rule and ``labels``
        included), dlib's version and every input file's SHA-256 (each
        ``.pts`` read too); per face also ``labels``: ``"landmarks"`` or
        ``"warp"``, how its label map was made.  Every file is written atomically and
        ``aligned.json`` last (it is removed first), so an interrupted run is
        redone.  A folder whose ``aligned.json`` has the same key (and whose
        files are there) is reused without recomputation.
    workers : int, optional
        Local threads (default: all cores); the outputs are the same bytes
        for any number.
    progress : bool
        Progress line on stderr.
    pad_fraction, choose, crop_rule
        See :func:`detect_box` (the model's rule:
        :func:`facesegment.faces.segment.model_crop_rule`).
    labels : {"landmarks", "warp"}
        ``"landmarks"`` (default): a face with a ``NAME.pts`` beside its
        image gets its label map drawn from those landmarks mapped into the
        crop (:func:`draw_label`), a face without one the nearest-neighbour
        warp; ``"warp"``: every face the warp (:func:`warp_label`).

    Returns
    -------
    list of FaceRecord, in input order
        Faces found: the new files; faces missed: the original files with
        ``missed=True`` (scored as all background).
    """
    _check(pad_fraction, choose, labels)
    crop_rule = None if crop_rule is None else list(crop_rule_of(crop_rule))
    records = list(records)
    names = [r.name for r in records]
    if len(set(names)) != len(names):
        raise ValueError("records have repeated names; each face needs its own name")
    for n in names:
        _outputs(out_dir, n)
    key = _key(records, pad_fraction, choose, crop_rule, labels)
    info = _read_info(out_dir)
    hit = _cache_hit_info(info)
    if (hit is not None and hit.get("key") == key
            and [f.get("name") for f in hit["faces"]] == names
            and all(os.path.isfile(p) for f in hit["faces"] if f.get("found")
                    for p in _outputs(out_dir, f["name"]))):
        return _scored(records, out_dir, hit)
    _check_only_ours(out_dir, names, info)
    check_writable_folder(out_dir, "cannot write the re-cropped faces",
                          "choose a writable folder, e.g. with --aligned-dir")
    info_path = os.path.join(os.fspath(out_dir), INFO_NAME)
    # the names about to be written, recorded first (no key: never a cache hit), so
    # that a run stopped half-way may replace them next time
    written = sorted(set(names) | _ours(info))
    write_json_atomic(info_path, {"format": "facesegment-aligned", "version": VERSION,
                                  "key": None, "written": written},
                      what="the aligned faces' record", ours=_info_file,
                      fix="choose a writable folder, e.g. with --aligned-dir")
    boxes, sources = [None] * len(records), [None] * len(records)
    for i, (_, box, source) in map_tasks(
            _realign_task, records,
            args=(os.fspath(out_dir), pad_fraction, choose, crop_rule, labels),
            n_workers=workers, desc="realign", unit="faces", progress=progress):
        boxes[i], sources[i] = box, source
    n_found = sum(b is not None for b in boxes)
    info = {"format": "facesegment-aligned", "version": VERSION, "key": key,
            "crop": CROP, "pad_fraction": pad_fraction, "choose": choose,
            "crop_rule": crop_rule, "labels": labels, "n_faces": len(records),
            "n_found": n_found, "n_missed": len(records) - n_found,
            "faces": [{"name": n, "found": b is not None, "box": b, "labels": src}
                      for n, b, src in zip(names, boxes, sources)]}
    write_json_atomic(info_path, info, what="the aligned faces' record", ours=_info_file,
                      fix="choose a writable folder, e.g. with --aligned-dir")
    return _scored(records, out_dir, info)


def _box_task(record, pad_fraction):
    """Task: ``(landmark box or None, (width, height))`` of one face (top level, picklable)."""
    image = load_face(record)[0]
    return detect_box(image, pad_fraction), image.shape[1::-1]


def measure_crop_rule(records, max_faces=200, seed=0, workers=None, progress=True,
                      pad_fraction=PAD_FRACTION):
    """How boxes from dlib's predicted landmarks map to a dataset's own crops.

    Each face of ``records`` is a crop (the whole image, 250x250 for
    faces300w and LFW); its landmark box ``(x0, y0, s)`` is found as
    :func:`detect_box` finds it (no rule).  Per face, ``k = crop side / s``
    and the crop's centre minus the box's, in units of ``s``, give ``(ox,
    oy)``; the rule is their medians (robust to a few wrong detections).

    Parameters
    ----------
    records : list of FaceRecord
        Training faces (never the test faces: the rule is part of the model).
    max_faces : int
        At most this many faces, drawn with ``seed`` (all when fewer).
    seed : int
    workers, progress, pad_fraction
        As for :func:`realign_records`.

    Returns
    -------
    dict
        ``crop_rule`` ``[k, ox, oy]`` (``[1, 0, 0]`` when no face was found),
        ``n_faces`` tried, ``n_found``, and the spread ``iqr`` (interquartile
        ranges of k, ox, oy).
    """
    if not isinstance(max_faces, int) or max_faces < 1:
        raise ValueError(f"max_faces={max_faces!r} must be an integer >= 1")
    records = list(records)
    if len(records) > max_faces:
        pick = np.random.default_rng(seed).choice(len(records), max_faces, replace=False)
        records = [records[i] for i in sorted(pick)]
    rows = []
    for _, (box, (w, h)) in map_tasks(_box_task, records, args=(pad_fraction,),
                                      n_workers=workers, desc="crop rule", unit="faces",
                                      progress=progress):
        if box is not None:
            x0, y0, s = box
            side = float(np.sqrt(w * h))   # the crop's side (square crops: w = h)
            rows.append((side / s, (w / 2 - x0 - s / 2) / s, (h / 2 - y0 - s / 2) / s))
    if not rows:
        return {"crop_rule": [1.0, 0.0, 0.0], "n_faces": len(records), "n_found": 0,
                "iqr": None}
    a = np.array(rows)
    rule = [round(float(v), 4) for v in np.median(a, axis=0)]
    iqr = np.percentile(a, 75, axis=0) - np.percentile(a, 25, axis=0)
    return {"crop_rule": rule, "n_faces": len(records), "n_found": len(rows),
            "iqr": [round(float(v), 4) for v in iqr]}


def aligned_counts(records):
    """Count the faces found and missed among re-cropped records.

    Parameters
    ----------
    records : list of FaceRecord
        As :func:`realign_records` returned them; a record counts as missed when
        its ``missed`` attribute is true.

    Returns
    -------
    (n_found, n_missed) : tuple of int
    """
    missed = sum(bool(getattr(r, "missed", False)) for r in records)
    return len(records) - missed, missed


__all__ = ["VERSION", "PAD_FRACTION", "CHOICES", "LABELS", "INFO_NAME", "detect_box",
           "warp_label", "draw_label",
           "realign_face", "realign_records", "measure_crop_rule", "aligned_counts",
           "detect_landmarks"]
