"""Faces in photos: detection, LFW-style crop boxes, crops and mapping back.

Used by :mod:`facesegment.faces.segment` (segmenting photos) and
:mod:`facesegment.faces.aligned` (detector-aligned evaluation).

Memory: faces are detected on a copy shrunk to ``detect_size`` pixels
(landmarks on the original, :func:`facesegment.faces.label.detection_copy`), and the
probabilities are mapped back only inside the faces' crop boxes (groups of
overlapping boxes), so a 24-megapixel photo needs a few hundred MB, not
several GB.

Crop calibration (``CALIBRATION``): the faces300w crops are square boxes centred
on the 68 landmarks with side 2.2x their larger extent.  A detector box is
mapped to such a crop as ``centre = box centre + (ox, oy) * box side`` and
``side = k * box side``, with ``(k, ox, oy)`` the medians measured on the 250
faces300w test crops (``python -m benchmarks.bench_inference --detectors``).
"""


import cv2
import numpy as np

from ..errors import FaceSegmentError
from .label import DLIB_LOCK, detection_copy, get_models

CROP = 250
DETECTORS = ("landmarks", "dlib")
#: When a photo is searched for faces: "auto" takes a 250x250 image as a crop already.
DETECT_MODES = ("auto", "always", "never")
#: detector -> (k, ox, oy): crop side = k * box side; centre offset in box sides.
#: Medians over the faces300w test crops (``benchmarks/bench_inference.py
#: --detectors``; docs/evaluation.md, "Choosing the detector").
CALIBRATION = {"dlib": (2.0, -0.02, 0.087)}
#: Longer side of the copy faces are detected on (= facesegment.faces.label.DETECT_MAX_SIDE).
DETECT_MAX_SIDE = 2000

#: Side of an LFW-style crop relative to the landmarks' larger extent.
LANDMARK_SCALE = 2.2
#: The crop rule ``(k, ox, oy)`` that keeps :func:`landmark_box` as it is.
IDENTITY_RULE = (1.0, 0.0, 0.0)


def _dlib_models():
    """dlib's face detector and 68-point predictor (loaded once per process)."""
    return get_models()


def _dlib_lock():
    return DLIB_LOCK


#: Detection passes (those of ``facesegment label``,
#: :func:`facesegment.faces.label.detect_landmarks`), each tried only when the ones
#: before found nothing: the image as given; upsampled once; upsampled with the
#: detector's threshold lowered by 0.5 (faint, turned or partly hidden faces).
PASSES = ("default", "upsampled", "low-threshold")
UPSAMPLE, LOW_THRESHOLD = 1, -0.5


def _dlib_rects(image):
    """dlib's face rectangles in ``image`` (RGB, as ``facesegment label`` gives it)
    and the pass that found them (:data:`PASSES`; "" when none did)."""
    detector = _dlib_models()[0]
    with _dlib_lock():
        rects, how = detector(image, 0), PASSES[0]
        if len(rects) == 0:
            rects, how = detector(image, UPSAMPLE), PASSES[1]
        if len(rects) == 0:
            rects, _, _ = detector.run(image, UPSAMPLE, LOW_THRESHOLD)
            how = PASSES[2]
    return rects, (how if len(rects) else "")


def detect_faces(image, detector="dlib", max_side=DETECT_MAX_SIDE, passes=None):
    """Face boxes ``(x, y, w, h)`` (float64 ``(n, 4)``), largest first.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    detector : {"landmarks", "dlib"}
        Both use dlib's HOG frontal face detector with the passes of
        ``facesegment label`` (:data:`PASSES`: as given, upsampled, upsampled
        with a lowered threshold; each only when the ones before found
        nothing), on the RGB image as ``label`` gives it.  OpenCV's Haar
        cascade is not offered: the installed OpenCV 5 no longer ships it.
    max_side : int or None
        Detect on a copy whose longer side is at most this (boxes are scaled
        back to ``image``'s pixels); None or 0: full resolution.
    passes : list, optional
        Gets the name of the pass that found the faces appended ("" for none).
    """
    if detector not in DETECTORS:
        raise ValueError(f"detector={detector!r} is not one of {DETECTORS}")
    small, (sy, sx) = detection_copy(image, max_side)
    rects, how = _dlib_rects(np.ascontiguousarray(small))
    if passes is not None:
        passes.append(how)
    boxes = np.array([(r.left() * sx, r.top() * sy, r.width() * sx, r.height() * sy)
                      for r in rects], dtype=np.float64).reshape(-1, 4)
    order = np.argsort(-boxes[:, 2] * boxes[:, 3], kind="stable")
    return boxes[order]


def landmark_box(points, crop_rule=None):
    """LFW-style crop ``(x0, y0, side)`` of 68 landmarks: centred on their bounding
    box, side 2.2x its larger extent (how faces300w was cropped).

    ``crop_rule`` ``(k, ox, oy)`` maps that box to a dataset's own crops: the
    centre moves by ``(ox, oy)`` times the box's side, then the side is scaled
    by ``k`` (:func:`facesegment.faces.aligned.measure_crop_rule`; a model carries
    its training data's rule with its position prior).  None: ``(1, 0, 0)``.
    """
    lo, hi = points.min(axis=0), points.max(axis=0)
    side = LANDMARK_SCALE * float(max(hi - lo))
    box = (float(lo[0] + hi[0]) / 2 - side / 2, float(lo[1] + hi[1]) / 2 - side / 2, side)
    return apply_crop_rule(box, crop_rule)


def apply_crop_rule(box, crop_rule):
    """``box`` ``(x0, y0, side)`` moved and scaled by ``crop_rule`` ``(k, ox, oy)``
    (see :func:`landmark_box`); None leaves it as it is."""
    x0, y0, side = (float(v) for v in box)
    if crop_rule is None or tuple(float(v) for v in crop_rule) == IDENTITY_RULE:
        return x0, y0, side   # exactly as it is
    k, ox, oy = (float(v) for v in crop_rule)
    cx, cy = x0 + side / 2 + ox * side, y0 + side / 2 + oy * side
    return cx - k * side / 2, cy - k * side / 2, k * side


def model_crop_rule(model):
    """The crop rule ``(k, ox, oy)`` a model was trained with (its position
    prior's), or None (the landmark rule as it is) for a model without one."""
    pos = getattr(model, "position", None)
    return None if pos is None else tuple(pos.crop_rule)


def model_image(model, image):
    """``image`` (RGB uint8) in the channels the model's windows were cut from.

    Models over RGB windows get it as it is; models over greyscale windows get
    its luminance as ``(H, W, 1)``.  Models whose windows have other planes
    (e.g. a previous stage's probability maps) cannot segment plain photos.
    """
    layout = getattr(model, "layout", None)
    channels = getattr(layout, "channels", 3)
    if channels == 3:
        return image
    if channels == 1:
        return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)[:, :, None]
    names = ", ".join(getattr(layout, "channel_names", ()))
    raise FaceSegmentError(
        f"this model reads windows of {channels} channels ({names}); `segment` gives models "
        "the photo's RGB or grey pixels (use a model trained on RGB or grey windows)")


def find_crops(image, detector="landmarks", calibration=None, max_side=DETECT_MAX_SIDE,
               crop_rule=None, info=None):
    """LFW-style crop boxes ``(x0, y0, side)`` of every face found, largest first.

    "landmarks": dlib boxes, then dlib's 68 landmarks in each, then
    :func:`landmark_box` (the faces300w rule).  "dlib": the detector box
    mapped by the measured ``CALIBRATION`` to that rule.  Either box is then
    mapped by ``crop_rule`` to the dataset's own crops (:func:`apply_crop_rule`).
    Faces are detected on a copy shrunk to ``max_side`` (see :func:`detect_faces`); the landmarks are found
    on ``image`` itself, in the box scaled back.

    ``info`` (a dict, optional) gets ``"detection"``: the pass that found the
    faces (:data:`PASSES`), and ``"points"``: each face's 68 landmarks in
    ``image``'s pixels ("landmarks"; None per face with "dlib").
    """
    passes = []
    if detector == "landmarks":
        points = find_landmarks(image, max_side, passes)
        boxes = [landmark_box(pts, crop_rule) for pts in points]
    else:
        boxes = [apply_crop_rule(crop_box(b, detector, calibration), crop_rule)
                 for b in detect_faces(image, detector, max_side, passes)]
        points = [None] * len(boxes)
    if info is not None:
        info.update(detection=passes[0] if passes else "", points=points)
    return boxes


def find_landmarks(image, max_side=DETECT_MAX_SIDE, passes=None):
    """dlib's 68 predicted landmarks (float64 (68, 2), x then y) of every face
    found, largest first (the faces of :func:`detect_faces` "landmarks";
    ``passes`` as there)."""
    import dlib

    predictor = _dlib_models()[1]
    out = []
    for x, y, w, h in detect_faces(image, "landmarks", max_side, passes):
        rect = dlib.rectangle(int(round(x)), int(round(y)), int(round(x + w)),
                              int(round(y + h)))
        with _dlib_lock():
            shape = predictor(image, rect)
            out.append(np.array([(shape.part(i).x, shape.part(i).y) for i in range(68)],
                                dtype=np.float64))
    return out


def crop_box(face_box, detector="dlib", calibration=None):
    """The LFW-style square crop ``(x0, y0, side)`` for a detector box."""
    k, ox, oy = (calibration or CALIBRATION)[detector]
    x, y, w, h = (float(v) for v in face_box)
    side = k * max(w, h)
    cx = x + w / 2 + ox * w
    cy = y + h / 2 + oy * h
    return cx - side / 2, cy - side / 2, side


def _crop_matrix(box, size=CROP, origin=(0, 0)):
    """Affine matrix mapping pixel coordinates of the image region whose top-left
    pixel is ``origin`` (row, column) to crop coordinates."""
    x0, y0, side = box
    s = size / side
    r0, c0 = origin
    return np.array([[s, 0, (0.5 + c0 - x0) * s - 0.5], [0, s, (0.5 + r0 - y0) * s - 0.5]])


def crop_face(image, box, size=CROP):
    """Cut the square ``box`` and resize it to ``size x size`` bilinearly.

    Parts of the box outside the image are filled by replicating the border.
    """
    return cv2.warpAffine(image, _crop_matrix(box, size), (size, size),
                          flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def uncrop_proba(proba, box, shape, origin=(0, 0)):
    """Warp crop probabilities ``(size, size, C)`` back onto an image of ``shape``.

    Returns float32 ``(H, W, C)``; pixels outside the box are 0.  With
    ``origin=(r0, c0)`` the result is the region of that shape whose top-left
    pixel is ``(r0, c0)`` of the image (see :func:`box_region`).
    """
    h, w = shape[:2]
    m = _crop_matrix(box, proba.shape[0], origin)
    out = np.empty((h, w, proba.shape[2]), dtype=np.float32)
    for c0 in range(0, proba.shape[2], 4):
        part = np.ascontiguousarray(proba[:, :, c0:c0 + 4])
        res = cv2.warpAffine(part, m, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        out[:, :, c0:c0 + 4] = res.reshape(h, w, -1)
    return out


def box_region(box, shape, size=CROP):
    """``(r0, r1, c0, c1)``: the pixels of an image of ``shape`` that
    :func:`uncrop_proba` can give a non-zero value for ``box`` (the box, plus
    the reach of the bilinear warp), clipped to the image."""
    x0, y0, side = box
    reach = 0.5 + 0.5 * side / size + 1.0
    h, w = shape[:2]
    r0 = min(h, max(0, int(np.floor(y0 - reach))))
    c0 = min(w, max(0, int(np.floor(x0 - reach))))
    r1 = max(r0, min(h, int(np.ceil(y0 + side + reach)) + 1))
    c1 = max(c0, min(w, int(np.ceil(x0 + side + reach)) + 1))
    return r0, r1, c0, c1


def _group_regions(regions):
    """Groups of overlapping regions: list of (bounding region, member indices)."""
    groups = [([*reg], [i]) for i, reg in enumerate(regions)]
    merged = True
    while merged:
        merged = False
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                ra, rb = groups[a][0], groups[b][0]
                if ra[0] < rb[1] and rb[0] < ra[1] and ra[2] < rb[3] and rb[2] < ra[3]:
                    bound = [min(ra[0], rb[0]), max(ra[1], rb[1]),
                             min(ra[2], rb[2]), max(ra[3], rb[3])]
                    groups[a] = (bound, groups[a][1] + groups[b][1])
                    del groups[b]
                    merged = True
                    break
            if merged:
                break
    return [(tuple(g[0]), sorted(g[1])) for g in groups]
