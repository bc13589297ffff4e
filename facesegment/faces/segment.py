"""Segmenting one face photo: detection, LFW-style crop, mapping back.

For each image (turned upright by its EXIF orientation, as viewers show
it): if it is not already a 250x250 face crop, detect faces, cut an
LFW-style square crop around each (resized to 250x250 bilinearly), segment the
crop densely in full mode (reflect padding, every pixel predicted), and map the
class probabilities back onto the original image's pixels (bilinear warp of
the probabilities, then argmax; pixels outside every face's crop are
background).  Folders of photos, their output files and the summary CSV:
:mod:`facesegment.faces.folder`.

Memory and crop calibration: :mod:`facesegment.faces.crops`.
"""

from dataclasses import dataclass

import cv2
import numpy as np

from ..classes import CLASS_COLORS, N_CLASSES
from .crops import (CROP, DETECT_MAX_SIDE, _group_regions, box_region, crop_face, find_crops,
                    model_crop_rule, model_image, uncrop_proba)


def overlay(image, labels, marks=None, opacity=0.5, legend=False):
    """Class colours blended over the photo (background left as is).

    ``marks``: optional ``(x, y, text)`` written on it (e.g. each face's pan),
    white on a dark outline, at the photo's pixel ``(x, y)`` (kept inside it).
    ``legend``: draw the class key (ids, names, colours) in the bottom-right
    corner (:func:`facesegment.classes.add_legend`; ``facesegment segment`` does
    unless ``--no-legend``)."""
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
        from ..classes import add_legend

        out = add_legend(out)
    return out


@dataclass
class PhotoFace:
    """One face of a photo as every entry point sees it (:func:`photo_faces`)."""

    box: tuple              # (x0, y0, side) of its crop in the photo's pixels
    landmarks: object       # float64 (N, 2) in the photo's pixels, or None
    proba: np.ndarray       # float32 (S, S, C): the crop's class probabilities
    crop: np.ndarray        # uint8 (S, S, 3)
    path: str               # the segmentation path: "mesh", "landmarks", "landmark-free"
    detection: str          # the detector pass that found it ("" when none ran)
    pan: float = float("nan")
    whole: bool = False     # the image taken as one crop (its proba covers the image)


def photo_faces(model, image, detect="auto", detector="landmarks", detect_size=DETECT_MAX_SIDE,
                alpha=None, beta=None, sigma=None):
    """Every face of ``image`` (RGB uint8) under ``model``, largest first: a list
    of :class:`PhotoFace`.  ``facesegment.segment`` and :func:`segment_image`
    (``facesegment segment``) both call it, so they agree on every face.

    ``detect="auto"`` takes an exactly-250x250 image as one face crop under the
    forests and landmark models (a mesh model searches every image for its
    mesh); "never" takes any image as one crop; "always" detects in every image.
    """
    from .landmark_model import LandmarkModel
    from ..rule import decision_rule

    if getattr(model, "kind", None) == "mesh-forest":   # the face mesh finds every face
        from .mesh_model import MESH_PATH
        from .mesh_segment import mesh_faces

        return [PhotoFace(f.box, f.mesh[:, :2].copy(), f.proba, f.crop, MESH_PATH, f.detection,
                          f.pan) for f in mesh_faces(model, image)[0]]
    h, w = image.shape[:2]
    if isinstance(model, LandmarkModel):
        one = _landmark_face
    else:
        rule = decision_rule(model, alpha, beta, sigma)
        terms = dict(alpha=rule.alpha, beta=rule.beta, sigma=rule.sigma)
        one = lambda m, crop, pts: _forest_face(m, crop, pts, terms)   # noqa: E731
    if detect == "never" or (detect == "auto" and (h, w) == (CROP, CROP)):
        proba, path, how, points = one(model, image, _OWN_LANDMARKS)
        return [PhotoFace((0.0, 0.0, float(max(h, w))), points, proba, image, path, how,
                          whole=True)]
    found = {}
    boxes = find_crops(image, detector, max_side=detect_size, crop_rule=model_crop_rule(model),
                       info=found)
    how = found.get("detection", "")
    faces = []
    for box, pts in zip(boxes, found.get("points") or [None] * len(boxes)):
        crop = crop_face(image, box)
        proba, path, _, _ = one(model, crop, None if pts is None else crop_points(pts, box))
        faces.append(PhotoFace(tuple(float(v) for v in box), pts, proba, crop, path, how))
    return faces


#: A crop's landmarks are to be found in the crop itself.
_OWN_LANDMARKS = "own"


def _landmark_face(model, crop, points):
    """``(proba, path, detection, points)`` of one crop under a landmark model (its own
    dlib passes; the detection pass is reported for an image taken as a crop)."""
    proba, path, how, own = model.predict_face(crop)
    if points is _OWN_LANDMARKS:
        return proba, path, how, own
    return proba, path, how, points


def _forest_face(model, crop, points, terms):
    """``(proba, path, detection, points)`` of one crop under a forest: its shape prior
    (if any) applied through ``points`` (the crop's own landmarks, found by
    ``facesegment label``'s passes, for an image taken as a crop)."""
    from ..dense import predict_image
    from .shape_prior import apply_model_prior, model_gamma

    proba = predict_image(model, model_image(model, crop), mode="full", **terms)[0]
    how = ""
    if points is _OWN_LANDMARKS:
        points = None
        if model_gamma(model) > 0:
            from .renderer import predict_landmarks

            points, how = predict_landmarks(crop)
    proba, path = apply_model_prior(model, proba, points)
    return proba, path, how, points


def photo_labels(model, shape, faces, return_proba=False):
    """The photo's labels uint8 (H, W) from ``faces`` (:func:`photo_faces`; 0 outside
    their crops) and, with ``return_proba``, its probabilities (H, W, C) (else None)."""
    if getattr(model, "kind", None) == "mesh-forest":
        from .mesh_segment import photo_maps

        return photo_maps(shape, faces, return_proba)
    if len(faces) == 1 and faces[0].whole:
        proba = faces[0].proba
        return np.argmax(proba, axis=-1).astype(np.uint8), (proba if return_proba else None)
    n_classes = faces[0].proba.shape[-1]
    out = _paste_crops(shape, [f.box for f in faces], [f.proba for f in faces], n_classes,
                       return_proba)
    return out[0], (out[2] if return_proba else None)


def segment_image(model, image, alpha=None, detect="auto", detector="landmarks",
                  return_proba=False, detect_size=DETECT_MAX_SIDE, beta=None, sigma=None,
                  info=None):
    """Segment one photo; return ``(labels (H, W) uint8, number of faces)``.

    The faces are :func:`photo_faces`'s (``detect``, ``detector``, ``detect_size``
    as there).  With detection, an image without a face returns ``(None, 0)``.
    With ``return_proba`` a third value is returned: the reweighted class
    probabilities float32 ``(H, W, C)``, summing to 1 per pixel (pixels outside
    every face's crop: background 1), or None without a face; ``labels`` is
    their argmax.  ``alpha``, ``beta`` (the position prior, applied in crop
    coordinates; :mod:`facesegment.position`) and ``sigma`` (Gaussian smoothing
    of each crop's class maps, pixels of the crop) default to the model's
    decision rule (:mod:`facesegment.rule`).

    A model with a landmark-conditioned shape prior (``model.shape_prior``,
    exponent ``metrics["gamma"]``) applies it to each face through the face's
    predicted landmarks (:func:`facesegment.faces.shape_prior.apply_model_prior`);
    a face without plausible landmarks takes the landmark-free path.  ``info``
    (a dict, optional) gets ``"detection"``: the detector pass that found the
    faces (:data:`facesegment.faces.crops.PASSES`, the face mesh's passes; ""
    when none ran), ``"paths"``: each face's segmentation path ("mesh",
    "landmarks" or "landmark-free"), ``"pans"`` (mesh models) and ``"faces"``
    (the :class:`PhotoFace` list).
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
    """Landmarks ``(x, y)`` in an image's pixels, in the pixels of its crop ``box``
    (the map :func:`facesegment.faces.crops.crop_face` cuts by)."""
    from .crops import _crop_matrix

    m = _crop_matrix(box, size)
    return np.asarray(points, np.float64) @ m[:, :2].T + m[:, 2]
