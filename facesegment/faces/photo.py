"""The faces of a photo as every model gives them, and the parts the models share.

:class:`PhotoFace` is one face of a photo (what ``photo_faces`` of every
:class:`facesegment.modelio.protocol.FaceModel` returns).  The forests,
cascades and landmark models find faces the same way (dlib's detector, the
LFW-style crop of :mod:`facesegment.faces.crops`: :func:`crop_faces`) and map
their crops back the same way (:func:`paste_faces`); each model only says how
one crop is segmented.  Mesh models find and map their faces with the face
mesh (:mod:`facesegment.faces.mesh_segment`).
"""

from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from .crops import (CROP, DETECT_MAX_SIDE, _crop_matrix, _group_regions, box_region, crop_face,
                    find_crops, model_crop_rule, uncrop_proba)
from .label import predictor_path

#: A crop's landmarks are to be found in the crop itself (the ``points`` given to
#: a model's one-crop function for an image taken as one crop).
OWN_LANDMARKS = "own"


@dataclass
class PhotoFace:
    """One face of a photo as every entry point sees it (``model.photo_faces``)."""

    box: tuple              # (x0, y0, side) of its crop in the photo's pixels
    landmarks: object       # float64 (N, 2) in the photo's pixels, or None
    proba: np.ndarray       # float32 (S, S, C): the crop's class probabilities
    crop: np.ndarray        # uint8 (S, S, 3)
    path: str               # the segmentation path: "mesh", "landmarks", "landmark-free"
    detection: str          # the detector pass that found it ("" when none ran)
    pan: float = float("nan")
    whole: bool = False     # the image taken as one crop (its proba covers the image)


def taken_whole(shape, detect):
    """Whether an image is taken as one face crop (no detection).

    Parameters
    ----------
    shape : tuple
        ``(H, W, ...)`` of the image.
    detect : {"auto", "always", "never"}
        "never": always; "auto": when the image is exactly 250x250; "always":
        never.

    Returns
    -------
    bool
    """
    return detect == "never" or (detect == "auto" and tuple(shape[:2]) == (CROP, CROP))


def crop_faces(model, image, one, detect="auto", detector="landmarks", detect_size=None):
    """Every face of ``image`` found by dlib (:func:`facesegment.faces.crops.find_crops`,
    cut by ``model``'s crop rule), largest first, each segmented by ``one``.

    Parameters
    ----------
    model : FaceModel
        Gives the crop rule (its position prior's, :func:`model_crop_rule`).
    image : uint8 (H, W, 3)
    one : callable
        ``one(crop, points) -> (proba, path, detection, points)``: one crop's
        class probabilities float32 (S, S, C), its path, the pass that found its
        landmarks and those landmarks; ``points`` are the face's landmarks in the
        crop's pixels (None: none), or :data:`OWN_LANDMARKS` for an image taken
        whole (:func:`taken_whole`), whose landmarks the model finds itself.
    detect, detector, detect_size
        As :func:`facesegment.segment` (``detect_size`` None: 2000 pixels).

    Returns
    -------
    list of PhotoFace
    """
    h, w = image.shape[:2]
    if taken_whole(image.shape, detect):
        proba, path, how, points = one(image, OWN_LANDMARKS)
        return [PhotoFace((0.0, 0.0, float(max(h, w))), points, proba, image, path, how,
                          whole=True)]
    found = {}
    boxes = find_crops(image, detector, crop_rule=model_crop_rule(model), info=found,
                       max_side=DETECT_MAX_SIDE if detect_size is None else detect_size)
    how = found.get("detection", "")
    faces = []
    for box, pts in zip(boxes, found.get("points") or [None] * len(boxes)):
        crop = crop_face(image, box)
        proba, path, _, _ = one(crop, None if pts is None else crop_points(pts, box))
        faces.append(PhotoFace(tuple(float(v) for v in box), pts, proba, crop, path, how))
    return faces


def paste_faces(shape, faces, return_proba=False):
    """The photo's labels uint8 (H, W) from LFW-style crops' faces (0 outside their
    crops) and, with ``return_proba``, its probabilities (H, W, C) (else None).

    Parameters
    ----------
    shape : tuple
        The photo's shape.
    faces : list of PhotoFace
        At least one (:func:`crop_faces`).
    return_proba : bool

    Returns
    -------
    labels : uint8 (H, W)
    proba : float32 (H, W, C) or None
    """
    if len(faces) == 1 and faces[0].whole:
        proba = faces[0].proba
        return np.argmax(proba, axis=-1).astype(np.uint8), (proba if return_proba else None)
    n_classes = faces[0].proba.shape[-1]
    out = _paste_crops(shape, [f.box for f in faces], [f.proba for f in faces], n_classes,
                       return_proba)
    return out[0], (out[2] if return_proba else None)


def _paste_crops(shape, boxes, crops, n_classes, return_proba):
    """The photo's labels (and probabilities) from its crops' class maps."""
    h, w = shape[:2]
    labels = np.zeros((h, w), dtype=np.uint8)
    proba = None
    if return_proba:
        proba = np.zeros((h, w, n_classes), dtype=np.float32)
        proba[:, :, 0] = 1.0
    regions = [box_region(box, shape) for box in boxes]
    for (r0, r1, c0, c1), members in _group_regions(regions):
        if r1 <= r0 or c1 <= c0:
            continue
        total = np.zeros((r1 - r0, c1 - c0, n_classes), dtype=np.float32)
        for k in members:
            b0, b1, d0, d1 = regions[k]
            if b1 <= b0 or d1 <= d0:
                continue
            total[b0 - r0:b1 - r0, d0 - c0:d1 - c0] += uncrop_proba(
                crops[k], boxes[k], (b1 - b0, d1 - d0), origin=(b0, d0))
        sums = total.sum(axis=-1)
        covered = sums > 0
        lab = np.argmax(total, axis=-1).astype(np.uint8)
        lab[~covered] = 0
        labels[r0:r1, c0:c1] = lab
        if proba is not None:
            part = proba[r0:r1, c0:c1]
            part[covered] = total[covered] / sums[covered][:, None]
    return (labels, len(boxes), proba) if return_proba else (labels, len(boxes))


def crop_points(points, box, size=CROP):
    """Landmarks in an image's pixels, mapped into the pixels of its crop ``box``.

    The map is the one :func:`facesegment.faces.crops.crop_face` cuts by.

    Parameters
    ----------
    points : float (N, 2)
        ``(x, y)`` in the image's pixels.
    box : (x0, y0, side)
        The crop box.
    size : int
        The crop's side, in pixels.

    Returns
    -------
    float64 (N, 2)
    """
    m = _crop_matrix(box, size)
    return np.asarray(points, np.float64) @ m[:, :2].T + m[:, 2]


def check_photo_dependencies():
    """Raise a one-line DataError when dlib or its landmark model (needed to find
    faces in photos) is not installed, naming what to install."""
    for module, package in (("dlib", "dlib-bin"),
                            ("face_recognition_models", "face_recognition_models")):
        try:
            if module == "dlib":
                __import__(module)
            elif predictor_path() is None:   # never imported: it needs pkg_resources
                raise ImportError(module)
        except ImportError:
            raise DataError(module, "is not installed, and finding faces in photos needs it",
                            f"pip install {package} (or pip install 'facesegment[landmarks]'), "
                            "or give detect='never' / --detect never for images that are "
                            "face crops already") from None


def require_detector(detect=True):
    """:func:`check_photo_dependencies` when faces are to be detected.

    The ``require`` of the models that find faces with dlib.

    Parameters
    ----------
    detect : bool
        Whether faces will be detected; false: nothing is checked.

    Raises
    ------
    DataError
        Faces are to be detected and dlib or its landmark model is missing.
    """
    if detect:
        check_photo_dependencies()


def detector_words(detector="landmarks"):
    """dlib's search for faces in words (the ``face_finder`` of the models that use it).

    Parameters
    ----------
    detector : str
        The detector's name (``"landmarks"`` or ``"dlib"``).

    Returns
    -------
    str
    """
    return f"the {detector} detector (passes: as given, upsampled, lowered threshold)"


__all__ = ["PhotoFace", "OWN_LANDMARKS", "taken_whole", "crop_faces", "paste_faces",
           "crop_points", "check_photo_dependencies", "require_detector", "detector_words"]
