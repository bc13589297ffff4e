"""Forest stages over a face mesh's crop: training samples, auto-context, decisions.

Each stage is a forest classifier (any of :mod:`facesegment.forest`) over one
pixel's uint8 feature vector.  Stage 1 reads :func:`crop_planes`; stage k > 1
reads them plus the context of stage k-1: its class probabilities at the pixel
and smoothed (auto-context, as in ilastik).  The stages predict the training
classes ``TRAIN_CLASSES``: background 0, ``OTHER`` (1: face, but none of the
hand-drawn parts; the hand-drawn label 254) and the parts 2..5.  Hand-drawn
pixels labelled 255 are never trained.

:func:`to_face_classes` turns the stages' output into facesegment's 8 classes:
the probability of ``OTHER`` goes to what the mesh draws there among lower face
(1) and the brows (6, 7), and to background outside the mesh's face oval.
"""

import cv2
import numpy as np

from .mesh import _unmirror
from .mesh_features import PLANE_NAMES, crop_planes

OTHER = 1
TRAIN_CLASSES = (0, 1, 2, 3, 4, 5)
#: Hand-drawn label -> training class (255: not trained).
LABEL_TO_TRAIN = {0: 0, 2: 2, 3: 3, 4: 4, 5: 5, 254: OTHER}
IGNORE = 255
#: Smoothing (pixels at the 128-pixel crop) of the context planes of stages after the first.
CONTEXT_SIGMA = 4.0


def train_labels(labels):
    """Hand-drawn crop labels as training classes (int16; -1 = not trained)."""
    labels = np.asarray(labels)
    out = np.full(labels.shape, -1, np.int16)
    for src, dst in LABEL_TO_TRAIN.items():
        out[labels == src] = dst
    return out


def context_planes(proba):
    """uint8 planes of a stage's probabilities (S, S, C): as they are, and smoothed."""
    size = proba.shape[0]
    p = np.ascontiguousarray(proba, np.float32)
    smooth = cv2.GaussianBlur(p, (0, 0), CONTEXT_SIGMA * size / 128.0)
    if smooth.ndim == 2:
        smooth = smooth[..., None]
    q = np.concatenate([p, smooth], axis=2)
    return np.clip(np.rint(q * 255.0), 0, 255).astype(np.uint8)


def stage_input(planes, previous):
    """The feature planes a stage reads: the crop's planes, plus the previous
    stage's context planes (none for the first stage)."""
    if previous is None:
        return planes
    return np.concatenate([planes, context_planes(previous)], axis=2)


def read_region(planes, margin):
    """bool (S, S): the pixels the forests read, those at most ``margin`` (1/64 of
    the crop) outside the mesh's face oval (from the planes' signed distance: a
    feature, never a label); None for ``margin`` None (every pixel)."""
    if margin is None:
        return None

    d = planes[..., PLANE_NAMES.index("d_oval")].astype(np.int16) - 128
    return d <= float(margin)


def predict_stage(forest, planes, region=None):
    """A stage's class probabilities (S, S, len(TRAIN_CLASSES)) over a crop's planes,
    with a zero column for a training class the forest never saw.  Outside
    ``region`` (bool (S, S), :func:`read_region`; None: everywhere) the forest is
    not asked: background has probability 1 there."""
    s = planes.shape[0]
    flat = planes.reshape(s * s, planes.shape[2])
    out = np.zeros((s * s, len(TRAIN_CLASSES)), np.float32)
    if region is None:
        rows, proba = slice(None), forest.predict_proba(flat)
    else:
        rows = np.flatnonzero(region.ravel())
        out[:, TRAIN_CLASSES.index(0)] = 1.0
        out[rows, TRAIN_CLASSES.index(0)] = 0.0
        proba = forest.predict_proba(flat[rows])
    for j, c in enumerate(np.asarray(forest.classes_).tolist()):
        out[rows, TRAIN_CLASSES.index(int(c))] = proba[:, j]
    return out.reshape(s, s, -1)


def predict_stages(forests, planes, sigma=0.0, margin=None):
    """The last stage's probabilities over a crop (each stage reading the one
    before), smoothed by a Gaussian of ``sigma`` crop pixels (0: not smoothed);
    pixels farther than ``margin`` outside the face oval are background
    (:func:`read_region`; None: the forests read every pixel)."""
    proba = None
    region = read_region(planes, margin)
    for forest in forests:
        proba = predict_stage(forest, stage_input(planes, proba), region)
    return smooth_proba(proba, sigma)


def mirrored_planes(crop, mesh_c):
    """The feature planes of the mirror image of a crop (its mesh flipped and
    renamed by the points' twins, :mod:`facesegment.faces.mesh_twins`)."""
    return crop_planes(np.ascontiguousarray(crop[:, ::-1]), _unmirror(mesh_c, crop.shape[1]))


def unmirror_proba(proba):
    """Stage probabilities of a mirrored crop as the crop's: flipped back, the
    image-left and image-right eyes (classes 4 and 5) swapped."""
    out = np.ascontiguousarray(proba[:, ::-1])
    i, j = TRAIN_CLASSES.index(4), TRAIN_CLASSES.index(5)
    out[..., [i, j]] = out[..., [j, i]]
    return out


def crop_proba(forests, planes, mirror=None, margin=None):
    """The stages' probabilities over a crop's planes (``margin``: see
    :func:`predict_stages`); with ``mirror`` (the planes of its mirror image,
    :func:`mirrored_planes`), averaged with the mirror image's, mapped back
    (:func:`unmirror_proba`)."""
    proba = predict_stages(forests, planes, margin=margin)
    if mirror is not None:
        proba = 0.5 * (proba + unmirror_proba(predict_stages(forests, mirror, margin=margin)))
    return proba


def check_gains(gains):
    """The gains as float32 (None as is); ValueError unless they are one positive,
    finite number per training class."""
    if gains is None:
        return None
    g = np.asarray(gains, np.float32)
    if g.shape != (len(TRAIN_CLASSES),) or not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ValueError(f"gains must be {len(TRAIN_CLASSES)} positive numbers, got {gains!r}")
    return g


def apply_gains(proba, gains):
    """Stage probabilities times the decision rule's per-class gains (in
    ``TRAIN_CLASSES`` order; None: all 1), renormalised.  Gains above 1 for the
    small parts trade precision for recall, which raises their Jaccard."""
    if gains is None:
        return proba
    out = proba * check_gains(gains)
    return out / np.maximum(out.sum(axis=-1, keepdims=True), 1e-12)


def smooth_proba(proba, sigma):
    """Each class map smoothed by a Gaussian of ``sigma`` pixels (0: as it is)."""
    if not sigma:
        return proba
    out = cv2.GaussianBlur(np.ascontiguousarray(proba, np.float32), (0, 0), float(sigma))
    return out.reshape(proba.shape)


def to_face_classes(proba, drawn):
    """Stage probabilities (S, S, 6) as facesegment's 8 classes (S, S, 8): ``OTHER``
    goes to the class the mesh draws there among 1, 6 and 7 (1 where it draws a
    part, background outside the face oval: neck, ears and hair are background in
    facesegment's classes, as in faces300w)."""
    s = proba.shape[0]
    out = np.zeros((s, s, 8), np.float32)
    for j, c in enumerate(TRAIN_CLASSES):
        if c != OTHER:
            out[..., c] = proba[..., j]
    other = proba[..., TRAIN_CLASSES.index(OTHER)]
    target = np.where(np.isin(drawn, (6, 7)), drawn, np.where(drawn > 0, 1, 0))
    for c in (0, 1, 6, 7):
        out[..., c] += np.where(target == c, other, 0.0)
    return out


def sample_pixels(labels, n, seed, near=None, n_near=0):
    """Indices (into the flattened crop) of trained pixels and their classes.

    Up to ``n`` are drawn uniformly over the crop and up to ``n_near`` more
    uniformly among the pixels where ``near`` (bool (S, S)) holds.  ``near``
    must depend on the features only (e.g. the pixels near the mesh's parts),
    never on the labels: the forest then learns each class's real share given
    the features, with more samples where the boundaries are decided.
    """
    y = train_labels(labels).ravel()
    rng = np.random.default_rng(seed)
    have = np.flatnonzero(y >= 0)
    idx = rng.choice(have, min(int(n), len(have)), replace=False)
    if near is not None and n_near > 0:
        band = np.flatnonzero((y >= 0) & np.asarray(near).ravel())
        idx = np.concatenate([idx, rng.choice(band, min(int(n_near), len(band)),
                                              replace=False)])
    idx = np.sort(idx)
    return idx, y[idx].astype(np.int64)


def near_parts(planes, distance=8.0):
    """Pixels within ``distance`` (1/64 of the crop) of a drawn nose, mouth or eye
    (from the planes' signed distances: features, not labels)."""
    out = np.zeros(planes.shape[:2], bool)
    for c in (2, 3, 4, 5):
        d = planes[..., PLANE_NAMES.index(f"d_{c}")].astype(np.int16) - 128
        out |= d <= distance
    return out
