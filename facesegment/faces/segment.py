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

import os

import cv2
import numpy as np

from ..classes import CLASS_COLORS, N_CLASSES
from .crops import (CROP, DETECT_MAX_SIDE, _group_regions, box_region, crop_face, find_crops,
                    model_crop_rule, model_image, uncrop_proba)


def overlay(image, labels, marks=None, opacity=0.5):
    """Class colours blended over the photo (background left as is).

    ``marks``: optional ``(x, y, text)`` written on it (e.g. each face's pan),
    white on a dark outline, at the photo's pixel ``(x, y)`` (kept inside it)."""
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
    return out


def segment_image(model, image, alpha=None, detect="auto", detector="landmarks",
                  return_proba=False, detect_size=DETECT_MAX_SIDE, beta=None, sigma=None,
                  info=None):
    """Segment one photo; return ``(labels (H, W) uint8, number of faces)``.

    ``detect="auto"`` treats exactly-250x250 images as LFW-style crops already;
    "always" detects in every image; "never" segments every image as a crop of
    its own size.  With detection, an image without a face returns
    ``(None, 0)``.  With ``return_proba`` a third value is returned: the
    reweighted class probabilities float32 ``(H, W, C)``, summing to 1 per
    pixel (pixels outside every face's crop: background 1), or None without
    a face; ``labels`` is their argmax.  ``alpha``, ``beta`` (the position
    prior, applied in crop coordinates; :mod:`facesegment.position`) and
    ``sigma`` (Gaussian smoothing of each crop's class maps, pixels of the crop)
    default to the model's decision rule (:mod:`facesegment.rule`).
    :func:`facesegment.segment` returns each face with its box and landmarks.

    A model with a landmark-conditioned shape prior (``model.shape_prior``,
    exponent ``metrics["gamma"]``) applies it to each face through the face's
    predicted landmarks (:func:`facesegment.faces.shape_prior.apply_model_prior`);
    a face without plausible landmarks takes the landmark-free path.  ``info``
    (a dict, optional) gets ``"detection"``: the pass that found the faces
    (:data:`facesegment.faces.crops.PASSES`, "" for a crop taken as it is) and
    ``"paths"``: the path of each face ("landmarks" or "landmark-free").
    """
    from ..dense import predict_image
    from .landmark_model import LandmarkModel
    from ..rule import decision_rule
    from .shape_prior import LANDMARK_PATH, apply_model_prior, model_gamma

    info = {} if info is None else info
    if getattr(model, "kind", None) == "mesh-forest":   # the face mesh finds every face
        from .mesh_segment import segment_image_mesh

        return segment_image_mesh(model, image, return_proba, info)
    if isinstance(model, LandmarkModel):
        return _segment_landmarks(model, image, detect, detector, return_proba, detect_size,
                                  info)
    rule = decision_rule(model, alpha, beta, sigma)
    alpha, beta, sigma = rule.alpha, rule.beta, rule.sigma
    h, w = image.shape[:2]
    if detect == "never" or (detect == "auto" and (h, w) == (CROP, CROP)):
        proba, labels = predict_image(model, model_image(model, image), mode="full", alpha=alpha,
                                      beta=beta, sigma=sigma)
        points, how = None, ""
        if model_gamma(model) > 0:   # the crop's own landmarks (facesegment label's passes)
            from .renderer import predict_landmarks

            points, how = predict_landmarks(image)
        proba, path = apply_model_prior(model, proba, points)
        if path == LANDMARK_PATH:
            labels = np.argmax(proba, axis=-1).astype(np.uint8)
        info.update(detection=how, paths=[path])
        return (labels, 1, proba) if return_proba else (labels, 1)
    found = {}
    boxes = find_crops(image, detector, max_side=detect_size, crop_rule=model_crop_rule(model),
                       info=found)
    info.update(detection=found.get("detection", ""), paths=[])
    if len(boxes) == 0:
        return (None, 0, None) if return_proba else (None, 0)
    points = found.get("points") or [None] * len(boxes)
    crops = []
    for box, pts in zip(boxes, points):
        p = predict_image(model, model_image(model, crop_face(image, box)), mode="full",
                          alpha=alpha, beta=beta, sigma=sigma)[0]
        p, path = apply_model_prior(model, p, None if pts is None else crop_points(pts, box))
        crops.append(p)
        info["paths"].append(path)
    return _paste_crops(image, boxes, crops, len(model.class_names), return_proba)


def _segment_landmarks(model, image, detect, detector, return_proba, detect_size, info):
    """:func:`segment_image` for a landmark model (:mod:`facesegment.faces.landmark_model`):
    each crop is segmented by ``model.predict_crop`` (its own detection and votes)."""
    h, w = image.shape[:2]
    if detect == "never" or (detect == "auto" and (h, w) == (CROP, CROP)):
        proba, path, how = model.predict_crop(image)
        labels = np.argmax(proba, axis=-1).astype(np.uint8)
        info.update(detection=how, paths=[path])
        return (labels, 1, proba) if return_proba else (labels, 1)
    found = {}
    boxes = find_crops(image, detector, max_side=detect_size, info=found)
    info.update(detection=found.get("detection", ""), paths=[])
    if len(boxes) == 0:
        return (None, 0, None) if return_proba else (None, 0)
    crops = []
    for box in boxes:
        p, path, _ = model.predict_crop(crop_face(image, box))
        crops.append(p)
        info["paths"].append(path)
    return _paste_crops(image, boxes, crops, model.n_classes, return_proba)


def _paste_crops(image, boxes, crops, n_classes, return_proba):
    """The photo's labels (and probabilities) from its crops' class maps."""
    h, w = image.shape[:2]
    labels = np.zeros((h, w), dtype=np.uint8)
    proba = None
    if return_proba:
        proba = np.zeros((h, w, n_classes), dtype=np.float32)
        proba[:, :, 0] = 1.0
    regions = [box_region(box, image.shape) for box in boxes]
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


# ``facesegment.segment(photo)`` is the one-call API (facesegment.api.segment);
# this module is also ``facesegment.segment``, so calling it calls that.
class _CallableModule(type(os)):
    def __call__(self, image, model=None, **kwargs):
        """:func:`facesegment.api.segment`: every face of a photo, segmented."""
        from ..api import segment

        return segment(image, model, **kwargs)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _CallableModule
