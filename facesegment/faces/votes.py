"""Landmark votes: dlib's shape predictor run many times on one face, each
landmark set drawn as the label polygons, the class maps averaged.

dlib's 68-point predictor (a cascade of regression trees) starts from the
detector's box, and its answer moves with that box by a pixel or two; it also
returns whole pixels.  A :class:`VoteSpec` runs it

* on the face enlarged ``zoom`` times (``cv2.resize``, bilinear), so the
  landmarks come back to a ``1/zoom`` pixel: ``x = (x_zoomed + 0.5) / zoom - 0.5``;
* from ``len(scales) * len(shifts)**2`` boxes: the detector's box scaled about
  its centre and shifted by fractions of its side, in x and y;
* on the mirrored face (landmark ids mirrored back), from every one of those
  boxes mirrored (``flip_all``, the default) or from the detector's box only
  (``flip_all=False``, the rule of landmark-model files of format version 1);

adds one offset to every landmark (the mean of *human minus predicted*
landmarks over training faces, :func:`fit_offset`: the detector's own bias
against the annotation convention), draws each set with
:func:`facesegment.faces.landmarks.render_labels` and averages the one-hot maps:
``votes[y, x, c]`` is the share of the sets that put pixel ``(y, x)`` in class
``c``.  Their argmax is the *vote renderer*; the maps are also the context of a
landmark stage (:mod:`facesegment.models.landmark`).

Measured on faces300w (``python -m pipelines.ship_landmarks``, docs/landmarks.md):
the vote renderer's argmax beats a single rendering by about two points of
class-average Jaccard on the test crops; ``python -m studies.vote_variants``
compares other sets on the validation faces.
"""

from dataclasses import dataclass

import numpy as np

from ..classes import N_CLASSES
from .label import DLIB_LOCK, get_models, pick_central
from .landmarks import render_labels

#: Paths a face takes (the ``paths`` column of ``segment``'s CSV).
LANDMARK_PATH, FREE_PATH = "landmarks", "landmark-free"

#: Mirror of the 68-point (iBUG 300-W) markup: ``FLIP[i]`` is the landmark
#: that point ``i`` becomes in the mirrored face.
FLIP = np.array(list(range(16, -1, -1)) + list(range(26, 16, -1)) + [27, 28, 29, 30]
                + [35, 34, 33, 32, 31] + [45, 44, 43, 42, 47, 46] + [39, 38, 37, 36, 41, 40]
                + [54, 53, 52, 51, 50, 49, 48] + [59, 58, 57, 56, 55] + [64, 63, 62, 61, 60]
                + [67, 66, 65])


def _number_tuple(name, values, low, high):
    vals = tuple(float(v) for v in values)
    if not vals or any(not np.isfinite(v) or v < low or v > high for v in vals):
        raise ValueError(f"VoteSpec {name}={values!r} must be numbers in [{low}, {high}]")
    return vals


@dataclass(frozen=True)
class VoteSpec:
    """How the landmark sets of one face are made (see the module docstring)."""

    scales: tuple = (0.92, 1.0, 1.08)
    shifts: tuple = (-0.04, 0.0, 0.04)
    flip: bool = True
    zoom: int = 4
    offset: tuple = (0.0, 0.0)
    flip_all: bool = True

    def __post_init__(self):
        object.__setattr__(self, "scales", _number_tuple("scales", self.scales, 0.5, 2.0))
        object.__setattr__(self, "shifts", _number_tuple("shifts", self.shifts, -0.5, 0.5))
        object.__setattr__(self, "offset", _number_tuple("offset", self.offset, -20, 20))
        if len(self.offset) != 2:
            raise ValueError(f"VoteSpec offset={self.offset!r} must be (dx, dy)")
        z = self.zoom
        if isinstance(z, bool) or not isinstance(z, (int, np.integer)) or not 1 <= z <= 8:
            raise ValueError(f"VoteSpec zoom={z!r} must be an integer in 1..8")
        object.__setattr__(self, "zoom", int(z))
        object.__setattr__(self, "flip", bool(self.flip))
        object.__setattr__(self, "flip_all", bool(self.flip_all))

    @property
    def n_sets(self):
        """Landmark sets per face."""
        n = len(self.scales) * len(self.shifts) ** 2
        return n + (0 if not self.flip else n if self.flip_all else 1)

    def boxes(self, box):
        """The boxes to run the predictor from: every scale x shift of ``box``.

        Parameters
        ----------
        box : (left, top, right, bottom)
            The detector's box; its side is ``right - left``.

        Returns
        -------
        list of (left, top, right, bottom)
            Floats; the unchanged box first, then each scale about the centre
            combined with each shift (fractions of the side) in x and y.
        """
        l, t, r, b = (float(v) for v in box)
        cx, cy, side = (l + r) / 2, (t + b) / 2, r - l
        out = [(l, t, r, b)]
        for s in self.scales:
            for dx in self.shifts:
                for dy in self.shifts:
                    if s == 1.0 and dx == 0.0 and dy == 0.0:
                        continue
                    half = side * s / 2
                    x, y = cx + dx * side, cy + dy * side
                    out.append((x - half, y - half, x + half, y + half))
        return out

    def to_dict(self):
        return {"scales": list(self.scales), "shifts": list(self.shifts), "flip": self.flip,
                "zoom": self.zoom, "offset": list(self.offset), "flip_all": self.flip_all}

    @classmethod
    def from_dict(cls, d):
        """The spec of :meth:`to_dict`'s dictionary.

        Parameters
        ----------
        d : dict
            ``scales``, ``shifts``, ``flip``, ``zoom``, ``offset`` and optionally
            ``flip_all``; without it the mirrored face is predicted from the
            detector's box only (the rule of landmark-model files of format
            version 1).

        Returns
        -------
        VoteSpec

        Raises
        ------
        KeyError
            A required key is missing.
        ValueError
            A value out of range (see :class:`VoteSpec`).
        """
        return cls(tuple(d["scales"]), tuple(d["shifts"]), bool(d["flip"]), int(d["zoom"]),
                   tuple(d["offset"]), bool(d.get("flip_all", False)))


def _predict(predictor, image, box, zoom):
    import dlib

    rect = dlib.rectangle(*[int(round(v * zoom)) for v in box])
    shape = predictor(image, rect)
    pts = np.array([(shape.part(i).x, shape.part(i).y) for i in range(68)], dtype=np.float64)
    return (pts + 0.5) / zoom - 0.5


def landmark_sets(image, box, spec):
    """The landmark sets of one face, ``spec.offset`` added.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    box : (left, top, right, bottom)
        The detector's box, floats in ``image``'s pixels.
    spec : VoteSpec

    Returns
    -------
    float64 (spec.n_sets, 68, 2)
        Landmarks ``(x, y)`` in ``image``'s pixels.
    """
    import cv2

    _, predictor = get_models()
    image = np.ascontiguousarray(image)
    big = image if spec.zoom == 1 else cv2.resize(image, None, fx=spec.zoom, fy=spec.zoom,
                                                   interpolation=cv2.INTER_LINEAR)
    mirrored = np.ascontiguousarray(big[:, ::-1]) if spec.flip else None
    boxes = spec.boxes(box)
    w = image.shape[1]
    with DLIB_LOCK:   # dlib's models are not safe to call from two threads at once
        sets = [_predict(predictor, big, b, spec.zoom) for b in boxes]
        for l, t, r, b in (boxes if spec.flip_all else boxes[:1]) if spec.flip else ():
            p = _predict(predictor, mirrored, (w - 1 - r, t, w - 1 - l, b), spec.zoom)
            p[:, 0] = w - 1 - p[:, 0]
            sets.append(p[FLIP])
    return np.array(sets) + np.asarray(spec.offset)


def vote_maps(sets, shape):
    """The class votes of landmark sets on an image.

    Parameters
    ----------
    sets : float (n, 68, 2)
        Landmark sets ``(x, y)``, each drawn with
        :func:`facesegment.faces.landmarks.render_labels`.
    shape : tuple
        ``(H, W, ...)`` of the image.

    Returns
    -------
    float32 (H, W, C)
        ``votes[y, x, c]``: the share of the sets that put pixel ``(y, x)`` in
        class ``c``; each pixel's shares sum to 1.

    Raises
    ------
    ValueError
        ``sets`` is not a non-empty (n, 68, 2) array.
    """
    h, w = int(shape[0]), int(shape[1])
    sets = np.asarray(sets, dtype=np.float64)
    if sets.ndim != 3 or len(sets) == 0:
        raise ValueError(f"sets must be (n >= 1, 68, 2) landmark sets, got shape {sets.shape}")
    cells = np.arange(h * w, dtype=np.int64) * N_CLASSES
    index = np.concatenate([cells + render_labels(pts, (h, w)).ravel() for pts in sets])
    counts = np.bincount(index, minlength=h * w * N_CLASSES).astype(np.float32)
    return (counts / np.float32(max(len(sets), 1))).reshape(h, w, N_CLASSES)


def detect_box(image):
    """The most central face's detector box in ``image`` and the pass that found it.

    The passes are those of ``facesegment label``: as given, upsampled once,
    upsampled with the threshold lowered to -0.5.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB

    Returns
    -------
    box : float64 (4,) or None
        ``(left, top, right, bottom)`` in ``image``'s pixels; None when no face
        is found.
    how : str
        "default", "upsampled" or "low-threshold"; "" when no face is found.
    """
    detector, _ = get_models()
    image = np.ascontiguousarray(image)
    for (up, threshold), how in zip(((0, 0.0), (1, 0.0), (1, -0.5)),
                                    ("default", "upsampled", "low-threshold")):
        with DLIB_LOCK:   # dlib's detector is not safe to call from two threads at once
            rects, _, _ = detector.run(image, up, threshold)
        if len(rects):
            boxes = np.array([(r.left(), r.top(), r.right(), r.bottom()) for r in rects],
                             dtype=np.float64)
            return boxes[pick_central(boxes, image.shape)], how
    return None, ""


def face_votes(image, spec):
    """Votes of the most central face of ``image`` (e.g. a 250 x 250 crop).

    ``(None, None, "")`` when no face is found (the caller takes its
    landmark-free path).

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    spec : VoteSpec

    Returns
    -------
    votes : float32 (H, W, C) or None
        :func:`vote_maps` of the face's landmark sets.
    sets : float64 (spec.n_sets, 68, 2) or None
    how : str
        The detector pass that found the face (:func:`detect_box`).
    """
    box, how = detect_box(image)
    if box is None:
        return None, None, ""
    sets = landmark_sets(image, box, spec)
    return vote_maps(sets, image.shape), sets, how


def fit_offset(sets, human):
    """The landmark offset ``(dx, dy)``: mean of ``human - median(sets)``.

    The mean is over faces and landmarks; faces with a non-finite set or human
    landmark are left out.

    Parameters
    ----------
    sets : float (n, k, 68, 2)
        Per face, ``k`` predicted landmark sets made with no offset (NaN for
        faces not found).
    human : float (n, 68, 2)
        The faces' human landmarks.

    Returns
    -------
    (dx, dy) : tuple of float
        Rounded to 4 decimals, in pixels.

    Raises
    ------
    ValueError
        Shapes that do not fit, or no face with both predicted and human
        landmarks.
    """
    sets = np.asarray(sets, dtype=np.float64)
    human = np.asarray(human, dtype=np.float64)
    if sets.ndim != 4 or human.shape != (sets.shape[0], 68, 2):
        raise ValueError(f"sets must be (n, k, 68, 2) and human (n, 68, 2); got {sets.shape} "
                         f"and {human.shape}")
    keep = np.isfinite(sets).all(axis=(1, 2, 3)) & np.isfinite(human).all(axis=(1, 2))
    if not keep.any():
        raise ValueError("no face has both predicted and human landmarks: cannot fit the offset")
    d = human[keep] - np.median(sets[keep], axis=1)
    return tuple(round(float(v), 4) for v in d.mean(axis=(0, 1)))


__all__ = ["FLIP", "VoteSpec", "landmark_sets", "vote_maps", "detect_box", "face_votes",
           "fit_offset", "LANDMARK_PATH", "FREE_PATH"]
