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
How the stages read a crop is :mod:`.mesh_read`.
"""

import numbers

import cv2
import numpy as np

from .mesh_features import PLANE_NAMES

OTHER = 1
TRAIN_CLASSES = (0, 1, 2, 3, 4, 5)
#: Hand-drawn label -> training class (255: not trained).
LABEL_TO_TRAIN = {0: 0, 2: 2, 3: 3, 4: 4, 5: 5, 254: OTHER}
IGNORE = 255
#: Smoothing (pixels at the 128-pixel crop) of the context planes of stages after the first.
CONTEXT_SIGMA = 4.0


def train_labels(labels):
    """Hand-drawn crop labels as training classes (:data:`LABEL_TO_TRAIN`).

    Parameters
    ----------
    labels : int array
        Hand-drawn labels (0, 2..5, 254; 255 = not trained).

    Returns
    -------
    int16 array of ``labels``' shape
        Training classes; -1 = not trained.
    """
    labels = np.asarray(labels)
    out = np.full(labels.shape, -1, np.int16)
    for src, dst in LABEL_TO_TRAIN.items():
        out[labels == src] = dst
    return out


def context_planes(proba):
    """uint8 planes of a stage's probabilities: as they are, and smoothed.

    Parameters
    ----------
    proba : float (S, S, C)
        A stage's class probabilities; smoothed by a Gaussian of
        :data:`CONTEXT_SIGMA` pixels at the 128-pixel crop (scaled with S).

    Returns
    -------
    uint8 (S, S, 2 * C)
        Probabilities times 255, rounded: the C maps, then the C smoothed maps.
    """
    size = proba.shape[0]
    p = np.ascontiguousarray(proba, np.float32)
    smooth = cv2.GaussianBlur(p, (0, 0), CONTEXT_SIGMA * size / 128.0)
    if smooth.ndim == 2:
        smooth = smooth[..., None]
    q = np.concatenate([p, smooth], axis=2)
    return np.clip(np.rint(q * 255.0), 0, 255).astype(np.uint8)


def stage_input(planes, previous):
    """The feature planes a stage reads.

    Parameters
    ----------
    planes : uint8 (S, S, P)
        The crop's planes (:func:`facesegment.faces.mesh_features.crop_planes`).
    previous : float (S, S, C) or None
        The previous stage's probabilities; None for the first stage.

    Returns
    -------
    uint8 (S, S, P) or (S, S, P + 2 * C)
        ``planes``, plus the previous stage's :func:`context_planes`.
    """
    if previous is None:
        return planes
    return np.concatenate([planes, context_planes(previous)], axis=2)


def check_mix(mix):
    """Raise ValueError unless ``mix`` is a share in [0, 1) or one share per
    training class (``len(TRAIN_CLASSES)`` numbers in [0, 1)).

    Parameters
    ----------
    mix : float or sequence of float
        The first stage's share of the stages' output (:func:`mix_stages`).
    """
    values = list(mix) if isinstance(mix, (list, tuple)) else [mix]
    if (isinstance(mix, (list, tuple)) and len(values) != len(TRAIN_CLASSES)) or any(
            isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v < 1
            for v in values):
        raise ValueError(f"mix must be a number in [0, 1) or {len(TRAIN_CLASSES)} of them "
                         f"(one per training class), got {mix!r}")


def mix_stages(probas, mix=0.0):
    """The stages' output: the last stage's probabilities with a share of the
    first stage's mixed in, ``(1 - mix) * last + mix * first``.

    The first stage reads the pixels and the mesh only; the later ones also its
    smoothed output, which sharpens the parts but can carry a misplaced part
    along; mixing the first stage back in keeps some of its pixel-level evidence.
    With one share per training class the mixed probabilities are renormalised
    per pixel.

    Parameters
    ----------
    probas : list of float32 (S, S, C)
        :func:`stage_probas`'s list.
    mix : float or sequence of C floats
        In [0, 1) (:func:`check_mix`); 0 (or a single stage): the last stage alone.

    Returns
    -------
    float32 (S, S, C)
        Sums to 1 per pixel where each stage's does.
    """
    check_mix(mix)
    last = probas[-1]
    w = np.asarray(mix, np.float32)
    if not w.any() or len(probas) == 1:
        return last
    out = (np.float32(1) - w) * last + w * probas[0]
    if w.ndim:
        total = out.sum(axis=-1, keepdims=True)
        out = np.divide(out, total, out=out, where=total > 0)
    return out.astype(np.float32, copy=False)


def check_gains(gains):
    """The decision rule's per-class gains, checked.

    Parameters
    ----------
    gains : sequence of float or None
        One per training class, in :data:`TRAIN_CLASSES` order.

    Returns
    -------
    float32 (len(TRAIN_CLASSES),) or None
        None when ``gains`` is None.

    Raises
    ------
    ValueError
        Unless they are one positive, finite number per training class.
    """
    if gains is None:
        return None
    g = np.asarray(gains, np.float32)
    if g.shape != (len(TRAIN_CLASSES),) or not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ValueError(f"gains must be {len(TRAIN_CLASSES)} positive numbers, got {gains!r}")
    return g


def apply_gains(proba, gains):
    """Stage probabilities times the decision rule's per-class gains, renormalised.

    Gains above 1 for the small parts trade precision for recall, which raises
    their Jaccard.

    Parameters
    ----------
    proba : float (S, S, len(TRAIN_CLASSES))
    gains : sequence of float or None
        In :data:`TRAIN_CLASSES` order; None: all 1 (``proba`` returned as is).

    Returns
    -------
    array (S, S, len(TRAIN_CLASSES))

    Raises
    ------
    ValueError
        Invalid gains (:func:`check_gains`).
    """
    if gains is None:
        return proba
    out = proba * check_gains(gains)
    return out / np.maximum(out.sum(axis=-1, keepdims=True), 1e-12)


def smooth_proba(proba, sigma):
    """Each class map smoothed by a Gaussian.

    Parameters
    ----------
    proba : float (S, S, C)
    sigma : float
        In pixels; 0 or None: ``proba`` as it is.

    Returns
    -------
    array (S, S, C)
        float32 when smoothed.
    """
    if not sigma:
        return proba
    out = cv2.GaussianBlur(np.ascontiguousarray(proba, np.float32), (0, 0), float(sigma))
    return out.reshape(proba.shape)


def to_face_classes(proba, drawn):
    """Stage probabilities as facesegment's 8 classes.

    ``OTHER`` goes to the class the mesh draws there among 1, 6 and 7 (1 where
    it draws a part, background outside the face oval: neck, ears and hair are
    background in facesegment's classes, as in faces300w).

    Parameters
    ----------
    proba : float (S, S, 6)
        In :data:`TRAIN_CLASSES` order.
    drawn : int (S, S)
        The mesh's drawn parts (:func:`facesegment.faces.mesh.draw_mesh_parts`;
        0 outside the face oval).

    Returns
    -------
    float32 (S, S, 8)
    """
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
    uniformly among the pixels where ``near`` holds.  ``near`` must depend on
    the features only (e.g. the pixels near the mesh's parts), never on the
    labels: the forest then learns each class's real share given the features,
    with more samples where the boundaries are decided.

    Parameters
    ----------
    labels : int (S, S)
        Hand-drawn labels (:func:`train_labels` maps them).
    n : int
        Pixels drawn over the whole crop.
    seed : int or numpy.random.Generator
        Seeds the draws.
    near : bool (S, S), optional
        The band of extra samples (:func:`near_parts`).
    n_near : int
        Pixels drawn in that band.

    Returns
    -------
    idx : int64 (m,)
        Sorted flat indices (a pixel may be drawn in both draws).
    classes : int64 (m,)
        Their training classes.
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
    """Pixels near a drawn nose, mouth or eye.

    Taken from the planes' signed distances (features, not labels).

    Parameters
    ----------
    planes : uint8 (S, S, P)
        The crop's planes (:data:`facesegment.faces.mesh_features.PLANE_NAMES`).
    distance : float
        Largest signed distance to the part, in 1/64 of the crop (inside is
        negative, so every inside pixel counts).

    Returns
    -------
    bool (S, S)
    """
    out = np.zeros(planes.shape[:2], bool)
    for c in (2, 3, 4, 5):
        d = planes[..., PLANE_NAMES.index(f"d_{c}")].astype(np.int16) - 128
        out |= d <= distance
    return out
