"""The one-call API: ``facesegment.segment(photo)`` and ``facesegment.load_model(name)``.

    import facesegment
    faces = facesegment.segment("photo.jpg")          # the shipped default model
    for face in faces:
        face.box, face.landmarks, face.labels, face.proba, face.path

Each face is found (MediaPipe's face mesh under the default model; dlib's
detector and 68 landmarks under the faces300w models), cut out as the model's
training faces were cropped, segmented with every pixel predicted, and
mapped back onto the photo; its decision rule (:mod:`facesegment.rule`) is the
model's own.  The faces are those of ``facesegment segment`` (both call
:func:`facesegment.faces.segment.photo_faces`), so the API and the CLI agree
on every face of every image.  :func:`facesegment.faces.folder.segment_folder`
(``facesegment segment``) writes label maps, overlays and a CSV for many photos.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .data.imageio import read_image
from .faces.crops import DETECTORS, DETECT_MAX_SIDE, DETECT_MODES
from .faces.photo import check_photo_dependencies as check, taken_whole
from .faces.segment import photo_faces, photo_labels
from .models import resolve
from .models.load import load_model as _load

__all__ = ["Face", "segment", "load_model", "check_photo_dependencies"]

_DEFAULT = {}


def load_model(name_or_path=None):
    """A model by the name of a shipped one (:func:`facesegment.models.shipped`;
    None: :data:`facesegment.models.DEFAULT`) or by its folder (a model or a
    cascade written by ``facesegment train`` or the pipeline).

    Parameters
    ----------
    name_or_path : str, Path or None, optional
        A shipped model's name, or a model folder (or its ``model.json``); a
        path that exists, or has more than one part, is taken as a folder.
        None (default): :func:`facesegment.models.default_name`.

    Returns
    -------
    Model, Cascade, LandmarkModel or MeshModel
        The model, opened by its folder's kind
        (:func:`facesegment.models.load.load_model`, its checksums verified).

    Raises
    ------
    DataError
        When it is neither (the message lists the shipped names), or the folder
        is not a valid model.
    """
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
    faces in photos) is not installed, naming what to install
    (:func:`facesegment.faces.photo.check_photo_dependencies`)."""
    check()


def _require_detector(detect=True):
    """The ``require`` of objects outside the face-model protocol: dlib's check."""
    if detect:
        check_photo_dependencies()


@dataclass(repr=False)
class Face:
    """One segmented face of a photo.

    Attributes
    ----------
    box : tuple (x0, y0, side)
        The square crop cut around the face, in the photo's pixels (``(0, 0,
        max(H, W))`` for an image taken as one face crop).
    landmarks : float64 (N, 2) or None
        The face's landmarks (x, y) in the photo's pixels: the face mesh's 478
        points under a mesh model, dlib's 68 under the faces300w models (None
        when no landmarks were found).
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
        The segmentation path (the CSV's ``paths`` column): "mesh" (the mesh
        model's forests), "landmarks" (dlib's landmarks placed the parts) or
        "landmark-free" (the forest alone).
    pan : float
        The head's turn in degrees (+ = toward the image's left; 0 = frontal),
        estimated from the face mesh; NaN under models without a pan estimate.
    detection : str
        The detector pass that found the face (the CSV's ``detection`` column:
        the face mesh's "default", "padded", ...; dlib's "default", "upsampled",
        "low-threshold"; "" when no detector ran).
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
        marks = "none" if self.landmarks is None else len(self.landmarks)
        return (f"Face(box=({box}), path={self.path!r}, detection={self.detection!r}{pan}, "
                f"landmarks={marks}, labels={w}x{h})")


def _read(image):
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
    image : str, Path or uint8 ndarray (H, W, 3)
        A photo of any size, as a file (turned upright by its EXIF orientation)
        or an RGB array.
    model : Model, str, Path or None, optional
        A loaded model (:func:`load_model`), a model folder or a shipped
        model's name; None (default): the shipped default model
        (:data:`facesegment.models.DEFAULT`, loaded once per process).
    detect : {"auto", "always", "never"}, optional
        Under the faces300w models: "auto" (default) takes an exactly-250x250
        image as a face crop already, "always" detects in every image, "never"
        takes any image as one crop.  A mesh model searches every image for
        its face mesh.
    detector : {"landmarks", "dlib"}, optional
        How the faces300w models find crops: dlib's box and 68 landmarks
        (default) or dlib's calibrated box (see
        :func:`facesegment.faces.crops.find_crops`).
    detect_size : int, optional
        Faces are detected on a copy shrunk to this longer side (default 2000;
        0: full resolution).
    alpha, beta, sigma : float, optional
        Terms of the decision rule (default: the model's; :mod:`facesegment.rule`).

    Returns
    -------
    list of Face
        One :class:`Face` per face found, largest first; empty when none is.

    Raises
    ------
    DataError
        An unreadable file, an unknown model, or dlib missing (to find faces).
    ValueError
        An unknown ``detect`` or ``detector``, or an array that is not RGB uint8.

    See Also
    --------
    load_model : a shipped model by name, or a model folder.
    facesegment.faces.folder.segment_folder : many photos to files (the CLI).

    Examples
    --------
    >>> import facesegment
    >>> faces = facesegment.segment("group.jpg")              # doctest: +SKIP
    >>> [(f.box, f.path, f.detection) for f in faces]          # doctest: +SKIP
    >>> labels = faces[0].labels        # uint8 (H, W): class ids, see facesegment.classes
    >>> facesegment.segment("crop.png", "faces300w-landmarks")   # doctest: +SKIP
    """
    if detect not in DETECT_MODES:
        raise ValueError(f"detect={detect!r} is not one of {DETECT_MODES}")
    if detector not in DETECTORS:
        raise ValueError(f"detector={detector!r} is not one of {DETECTORS}")
    img = _read(image)
    model = _model(model)
    # what finding its faces needs (dlib, the face mesh), said in one line before any work
    getattr(model, "require", _require_detector)(detect=not taken_whole(img.shape, detect))
    size = DETECT_MAX_SIDE if detect_size is None else int(detect_size)
    faces = photo_faces(model, img, detect, detector, size, alpha, beta, sigma)
    out = []
    for f in faces:
        labels = photo_labels(model, img.shape, [f])[0]
        crop_labels = np.argmax(f.proba, axis=-1).astype(np.uint8)
        out.append(Face(tuple(float(v) for v in f.box), f.landmarks, labels, f.proba, f.crop,
                        crop_labels, f.path, pan=f.pan, detection=f.detection))
    return out
