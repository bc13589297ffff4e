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
        cascade is not offered: the installed OpenCV 5 does not ship it.
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
    """LFW-style crop ``(x0, y0, side)`` of 68 landmarks.

    The box is centred on the landmarks' bounding box, with side 2.2x its larger
    extent (:data:`LANDMARK_SCALE`; how faces300w was cropped).

    Parameters
    ----------
    points : float (68, 2)
        Landmarks ``(x, y)`` in the image's pixels.
    crop_rule : (k, ox, oy), optional
        Maps that box to a dataset's own crops: the centre moves by ``(ox, oy)``
        times the box's side, then the side is scaled by ``k``
        (:func:`facesegment.faces.aligned.measure_crop_rule`; a model carries its
        training data's rule with its position prior).  None: ``(1, 0, 0)``.

    Returns
    -------
    (x0, y0, side) : tuple of float
        The square crop, in the image's pixels.
    """
    lo, hi = points.min(axis=0), points.max(axis=0)
    side = LANDMARK_SCALE * float(max(hi - lo))
    box = (float(lo[0] + hi[0]) / 2 - side / 2, float(lo[1] + hi[1]) / 2 - side / 2, side)
    return apply_crop_rule(box, crop_rule)


def apply_crop_rule(box, crop_rule):
    """Move and scale a crop box by a crop rule (see :func:`landmark_box`).

    Parameters
    ----------
    box : (x0, y0, side)
        Square box in the image's pixels.
    crop_rule : (k, ox, oy) or None
        New centre = old centre + ``(ox, oy) * side``; new side = ``k * side``.
        None or :data:`IDENTITY_RULE` leaves the box exactly as it is.

    Returns
    -------
    (x0, y0, side) : tuple of float
    """
    x0, y0, side = (float(v) for v in box)
    if crop_rule is None or tuple(float(v) for v in crop_rule) == IDENTITY_RULE:
        return x0, y0, side   # exactly as it is
    k, ox, oy = (float(v) for v in crop_rule)
    cx, cy = x0 + side / 2 + ox * side, y0 + side / 2 + oy * side
    return cx - k * side / 2, cy - k * side / 2, k * side


def model_crop_rule(model):
    """The crop rule a model was trained with (its position prior's).

    Parameters
    ----------
    model : object
        A trained model; its ``position`` attribute, when present, is a
        :class:`facesegment.position.PositionPrior`.

    Returns
    -------
    (k, ox, oy) : tuple of float, or None
        None for a model without a position prior (the landmark rule as it is).
    """
    pos = getattr(model, "position", None)
    return None if pos is None else tuple(pos.crop_rule)


def model_image(model, image):
    """``image`` in the channels the model's windows were cut from.

    Models over RGB windows get it as it is; models over greyscale windows get
    its luminance as ``(H, W, 1)``.  Models whose windows have other planes
    (e.g. a previous stage's probability maps) cannot segment plain photos.

    Parameters
    ----------
    model : object
        A trained model; ``model.layout.channels`` (3 when absent) is the number
        of planes its windows read.
    image : uint8 (H, W, 3) RGB

    Returns
    -------
    uint8 (H, W, 3) or uint8 (H, W, 1)
        ``image`` itself, or its grey luminance.

    Raises
    ------
    FaceSegmentError
        The model's windows have neither 3 nor 1 channels.
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
    Faces are detected on a copy shrunk to ``max_side`` (see :func:`detect_faces`);
    the landmarks are found on ``image`` itself, in the box scaled back.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    detector : {"landmarks", "dlib"}
        How a face's crop is placed (see above).
    calibration : dict, optional
        ``detector -> (k, ox, oy)`` for "dlib" boxes; None: :data:`CALIBRATION`.
    max_side : int or None
        Longer side of the copy faces are detected on; None or 0: full resolution.
    crop_rule : (k, ox, oy), optional
        The dataset's crop rule (:func:`model_crop_rule`); None: as it is.
    info : dict, optional
        Gets ``"detection"``: the pass that found the faces (:data:`PASSES`, ""
        for none), and ``"points"``: each face's 68 landmarks in ``image``'s
        pixels ("landmarks"; None per face with "dlib").

    Returns
    -------
    list of (x0, y0, side)
        One square box per face, in ``image``'s pixels, largest face first.

    Raises
    ------
    ValueError
        ``detector`` is not one of :data:`DETECTORS`.
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
    """dlib's 68 predicted landmarks of every face found, largest first.

    The faces are those of :func:`detect_faces` with detector "landmarks"; the
    landmarks are predicted on ``image`` itself.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    max_side : int or None
        Longer side of the copy faces are detected on; None or 0: full resolution.
    passes : list, optional
        Gets the name of the detection pass that found the faces appended
        (:data:`PASSES`; "" for none).

    Returns
    -------
    list of float64 (68, 2)
        Per face, the landmarks ``(x, y)`` in ``image``'s pixels.
    """
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
    """The LFW-style square crop for a detector box.

    Parameters
    ----------
    face_box : (x, y, w, h)
        The detector's box, in the image's pixels.
    detector : str
        Key of ``calibration`` to use.
    calibration : dict, optional
        ``detector -> (k, ox, oy)``: crop side = ``k * max(w, h)``, centre
        offset by ``(ox * w, oy * h)``; None: :data:`CALIBRATION`.

    Returns
    -------
    (x0, y0, side) : tuple of float
    """
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

    Parameters
    ----------
    image : array (H, W) or (H, W, C)
        Typically uint8 RGB.
    box : (x0, y0, side)
        Square box in ``image``'s pixels.
    size : int
        Side of the crop, in pixels.

    Returns
    -------
    array (size, size[, C])
        Of ``image``'s dtype.
    """
    return cv2.warpAffine(image, _crop_matrix(box, size), (size, size),
                          flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def uncrop_proba(proba, box, shape, origin=(0, 0)):
    """Warp crop probabilities back onto an image of ``shape``.

    Parameters
    ----------
    proba : float32 (size, size, C)
        Per-class probabilities of the crop.
    box : (x0, y0, side)
        The crop's square box, in the image's pixels.
    shape : tuple
        ``(H, W, ...)`` of the output region.
    origin : (r0, c0)
        Image pixel of the output's top-left pixel; with the default ``(0, 0)``
        the output is the whole image (see :func:`box_region`).

    Returns
    -------
    float32 (H, W, C)
        Bilinearly warped probabilities; pixels outside the box are 0.
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
    """The pixels of an image that :func:`uncrop_proba` can give a non-zero value.

    That is the box plus the reach of the bilinear warp, clipped to the image.

    Parameters
    ----------
    box : (x0, y0, side)
        Square crop box, in the image's pixels.
    shape : tuple
        ``(H, W, ...)`` of the image.
    size : int
        Side of the crop, in pixels.

    Returns
    -------
    (r0, r1, c0, c1) : tuple of int
        Rows ``r0:r1`` and columns ``c0:c1`` (possibly empty).
    """
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
