"""Segmenting one face photo: detection, LFW-style crop, mapping back.

For each image (turned upright by its EXIF orientation, as viewers show
it): if it is not already a 250x250 face crop, detect faces, cut an
LFW-style square crop around each (resized to 250x250 bilinearly), segment the
crop densely in full mode (reflect padding, every pixel predicted), and map the
class probabilities back onto the original image's pixels (bilinear warp of
the probabilities, then argmax; pixels outside every face's crop are
background).  Folders of photos, their output files and the summary CSV:
:mod:`facesegment.faces.folder`.

Each model finds and segments its own faces (``model.photo_faces`` and
``model.photo_labels`` of the face-model protocol,
:mod:`facesegment.modelio.protocol`; the shared parts:
:mod:`facesegment.faces.photo`); this module's functions call them.

Memory and crop calibration: :mod:`facesegment.faces.crops`.
"""

import cv2
import numpy as np

from ..classes import CLASS_COLORS, N_CLASSES, add_legend
from .crops import DETECT_MAX_SIDE, model_image  # noqa: F401  (model_image: named here too)
from .photo import PhotoFace, crop_points  # noqa: F401  (named here too)


def overlay(image, labels, marks=None, opacity=0.5, legend=False):
    """Class colours blended over the photo (background left as is).

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    labels : uint8 (H, W)
        Class ids; 0 (background) and ids outside the classes are not coloured.
    marks : list of (x, y, text), optional
        Written on the photo (e.g. each face's pan), white on a dark outline, at
        the photo's pixel ``(x, y)`` (kept inside it).
    opacity : float
        Weight of the class colour in the blend, 0..1.
    legend : bool
        Draw the class key (ids, names, colours) in the bottom-right corner
        (:func:`facesegment.classes.add_legend`; ``facesegment segment`` does
        unless ``--no-legend``).

    Returns
    -------
    uint8 (H, W, 3)
        A new image; ``image`` is not changed.
    """
    out = np.array(image, dtype=np.uint8, copy=True)
    fg = (labels > 0) & (labels < N_CLASSES)
    if fg.any():
        px = out[fg].astype(np.float32)
        col = CLASS_COLORS[labels[fg]].astype(np.float32)
        out[fg] = np.clip(np.rint((1 - opacity) * px + opacity * col), 0, 255).astype(np.uint8)
    h, w = out.shape[:2]
    scale = max(0.4, min(h, w) / 600.0)
    for x, y, text in marks or ():
        (tw, th), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        org = (int(np.clip(x, 0, max(w - tw, 0))), int(np.clip(y, th + 2, max(h - 2, th + 2))))
        for colour, thick in (((0, 0, 0), 3), ((255, 255, 255), 1)):
            cv2.putText(out, text, org, cv2.FONT_HERSHEY_SIMPLEX, scale, colour, thick,
                        cv2.LINE_AA)
    if legend:
        out = add_legend(out)
    return out


def photo_faces(model, image, detect="auto", detector="landmarks", detect_size=DETECT_MAX_SIDE,
                alpha=None, beta=None, sigma=None):
    """Every face of ``image`` under ``model``, largest first.

    This is ``model.photo_faces`` (the face-model protocol of
    :mod:`facesegment.modelio.protocol`).  ``facesegment.segment`` and
    :func:`segment_image` (``facesegment segment``) both call it, so they agree
    on every face.

    Parameters
    ----------
    model : FaceModel
    image : uint8 (H, W, 3) RGB
    detect : {"auto", "always", "never"}
        "auto" takes an exactly-250x250 image as one face crop under the forests
        and landmark models (a mesh model searches every image for its mesh);
        "never" takes any image as one crop; "always" detects in every image.
    detector : {"landmarks", "dlib"}
        How faces are found (:func:`facesegment.faces.crops.find_crops`).
    detect_size : int
        Longer side of the copy faces are detected on.
    alpha, beta, sigma : float, optional
        The decision rule's terms (:mod:`facesegment.rule`); None: the model's.

    Returns
    -------
    list of PhotoFace
    """
    return model.photo_faces(image, detect=detect, detector=detector, detect_size=detect_size,
                             alpha=alpha, beta=beta, sigma=sigma)


def photo_labels(model, shape, faces, return_proba=False):
    """The photo's labels from its faces (``model.photo_labels``).

    Parameters
    ----------
    model : FaceModel
    shape : tuple
        ``(H, W, ...)`` of the photo.
    faces : list of PhotoFace
        As :func:`photo_faces` returned them.
    return_proba : bool
        Also return the photo's class probabilities.

    Returns
    -------
    labels : uint8 (H, W)
        Class ids; 0 outside the faces' crops.
    proba : float32 (H, W, C) or None
        The probabilities with ``return_proba``, else None.
    """
    return model.photo_labels(shape, faces, return_proba)


def segment_image(model, image, alpha=None, detect="auto", detector="landmarks",
                  return_proba=False, detect_size=DETECT_MAX_SIDE, beta=None, sigma=None,
                  info=None):
    """Segment one photo.

    The faces are :func:`photo_faces`'s.  A model with a landmark-conditioned
    shape prior (``model.shape_prior``, exponent ``metrics["gamma"]``) applies it
    to each face through the face's predicted landmarks
    (:func:`facesegment.faces.shape_prior.apply_model_prior`); a face without
    plausible landmarks takes the landmark-free path.

    Parameters
    ----------
    model : FaceModel
    image : uint8 (H, W, 3) RGB
    alpha : float, optional
        Reweighting exponent; None: the model's decision rule's
        (:mod:`facesegment.rule`).
    detect, detector, detect_size
        As for :func:`photo_faces`.
    return_proba : bool
        Also return the class probabilities.
    beta : float, optional
        The position prior's exponent, applied in crop coordinates
        (:mod:`facesegment.position`); None: the model's.
    sigma : float, optional
        Gaussian smoothing of each crop's class maps, in pixels of the crop;
        None: the model's.
    info : dict, optional
        Gets ``"detection"``: the detector pass that found the faces
        (:data:`facesegment.faces.crops.PASSES`, the face mesh's passes; "" when
        none ran), ``"paths"``: each face's segmentation path ("mesh",
        "landmarks" or "landmark-free"), ``"pans"`` (mesh models), ``"faces"``
        (the :class:`PhotoFace` list) and ``"pan_marks"`` (for :func:`overlay`).

    Returns
    -------
    labels : uint8 (H, W) or None
        The argmax of the probabilities; None when detection found no face.
    n_faces : int
    proba : float32 (H, W, C) or None
        Only with ``return_proba``: the reweighted class probabilities, summing
        to 1 per pixel (pixels outside every face's crop: background 1); None
        without a face.
    """
    faces = photo_faces(model, image, detect, detector, detect_size, alpha, beta, sigma)
    pans = [f.pan for f in faces if f.pan == f.pan]
    info = {} if info is None else info
    info.update(detection=faces[0].detection if faces else "", paths=[f.path for f in faces],
                faces=faces, pans=pans,
                pan_marks=[(f.box[0] + 0.05 * f.box[2], f.box[1] + 0.08 * f.box[2],
                            f"pan {f.pan:+.0f}") for f in faces if f.pan == f.pan])
    if not faces:
        return (None, 0, None) if return_proba else (None, 0)
    labels, proba = photo_labels(model, image.shape, faces, return_proba)
    return (labels, len(faces), proba) if return_proba else (labels, len(faces))


__all__ = ["overlay", "PhotoFace", "photo_faces", "photo_labels", "segment_image",
           "crop_points"]
