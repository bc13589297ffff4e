"""Landmark-conditioned shape prior: where each class lies relative to dlib's
68 predicted landmarks.

faces300w's label maps are polygons of 68 *human* landmarks; dlib predicts
68 landmarks of its own, with its own errors and biases.  A
:class:`ShapePrior` learns, in a canonical face frame, the per-pixel class
frequencies of the human-labelled parts *as seen through the predicted
landmarks*:

1. the frame: the mean of the training faces' predicted landmarks (after a
   similarity alignment), centred in a ``size`` x ``size`` square with its
   larger extent ``size / 2.2`` (the LFW-style crop of
   :func:`facesegment.faces.crops.landmark_box`), plus two rings of anchor points
   around it so that the mesh covers the whole frame;
2. each training face's label map (one-hot) is warped into the frame by the
   piecewise-affine map whose control points are its predicted landmarks
   (and the anchors carried over by the similarity from the mean shape to
   them): a Delaunay mesh of the frame's control points (scipy), one affine
   map per triangle (:class:`PiecewiseAffine`, the map of scikit-image's
   ``PiecewiseAffineTransform``, batched) gives every frame pixel's place in
   the face, and ``cv2.remap`` samples there (bilinear);
3. the warped maps are averaged, smoothed by a Gaussian of ``sigma`` frame
   pixels and shrunk toward the class shares (``pseudo`` images' worth).

At inference the frame's maps are warped back onto a face through that
face's predicted landmarks, over the same triangles (the exact inverse map;
:func:`shape_maps`).  Combined with a forest's
reweighted probabilities ``q`` a pixel gets ``q_c * (shape_c / pi_c) **
gamma`` (:func:`combine`); the prior alone gives ``argmax_c shape_c *
pi_c ** -g`` (:func:`prior_labels`).  A face without landmarks has no shape
prior: :func:`shape_maps` returns None and callers take their
landmark-free path.  The frame and its warps: :mod:`facesegment.faces.shape_frame`.
"""

from dataclasses import dataclass

import numpy as np

from ..position import _nonneg
from ..progress import Progress
from .shape_frame import (DEFAULT_SIZE, RING_POINTS, RINGS, _check_points, _similarity,
                          mean_shape_of, warp_from_frame, warp_to_frame)

#: Default smoothing (frame pixels) and shrinkage (images).
DEFAULT_SIGMA = 1.0
DEFAULT_PSEUDO = 0.5


@dataclass
class ShapePrior:
    """Class frequencies in a canonical face frame (see the module docstring).

    Attributes
    ----------
    maps : float32 (size, size, C)
        Per-pixel class frequencies in the frame (sum 1 over C).
    mean_shape : float64 (68, 2)
        The frame's landmarks, ``(x, y)`` in frame pixels.
    class_prior : float64 (C,)
        Share of each class among the training pixels (``pi``).
    sigma, pseudo : float
    n_images : int
        Faces averaged (those with predicted landmarks).
    """

    maps: np.ndarray
    mean_shape: np.ndarray
    class_prior: np.ndarray
    sigma: float = DEFAULT_SIGMA
    pseudo: float = DEFAULT_PSEUDO
    n_images: int = 0

    @property
    def size(self):
        return int(self.maps.shape[0])

    @property
    def n_classes(self):
        return int(self.maps.shape[2])

    def describe(self):
        """JSON-ready summary (``model.json``)."""
        return {"size": self.size, "n_classes": self.n_classes, "sigma": float(self.sigma),
                "pseudo": float(self.pseudo), "n_images": int(self.n_images),
                "rings": list(RINGS), "ring_points": RING_POINTS}


# ------------------------------------------------------------------ fitting

def fit_shape_prior(labels, point_sets, n_classes, size=DEFAULT_SIZE, sigma=DEFAULT_SIGMA,
                    pseudo=DEFAULT_PSEUDO, progress=False, desc="shape prior"):
    """Fit a :class:`ShapePrior` (see the module docstring).

    Parameters
    ----------
    labels : list of uint8 (H, W)
        Training label maps (ids ``0..n_classes-1``; 255 not counted).
    point_sets : list of (68, 2) arrays or None
        Each face's *predicted* landmarks in its label map's pixels; faces
        with None (no face found) are left out.
    n_classes, size, sigma, pseudo
        Classes; frame side; Gaussian smoothing of the averaged maps (frame
        pixels); shrinkage toward the class shares (images).
    """
    import cv2

    sigma, pseudo = _nonneg(sigma, "sigma"), _nonneg(pseudo, "pseudo")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 16:
        raise ValueError(f"size={size!r} must be an integer >= 16 (the frame's side in pixels)")
    labels, point_sets = list(labels), list(point_sets)
    if len(labels) != len(point_sets):
        raise ValueError(f"{len(labels)} label maps but {len(point_sets)} landmark sets")
    keep = [i for i, p in enumerate(point_sets) if p is not None]
    if not keep:
        raise ValueError("no training face has landmarks: the shape prior needs at least one")
    mean = mean_shape_of([point_sets[i] for i in keep], size)
    eye = np.eye(n_classes, dtype=np.float32)
    total = np.zeros((size, size, n_classes))
    pix = np.zeros(n_classes)
    with Progress(len(keep), desc, "faces", enabled=progress) as bar:
        for i in keep:
            lab = np.asarray(labels[i])
            valid = lab < n_classes          # 255 (not scored): no class counted
            onehot = np.where(valid[..., None], eye[np.minimum(lab, n_classes - 1)], 0)
            pix += onehot.sum(axis=(0, 1))
            total += warp_to_frame(onehot, point_sets[i], mean, size)
            bar.update(1)
    if pix.sum() <= 0:
        raise ValueError("no labelled pixels were counted: give label maps with class ids "
                         f"0..{n_classes - 1}")
    pi = pix / pix.sum()
    if sigma > 0:
        total = np.stack([cv2.GaussianBlur(total[..., c], (0, 0), sigma,
                                           borderType=cv2.BORDER_REPLICATE)
                          for c in range(n_classes)], axis=-1)
    total = total + pseudo * pi
    den = total.sum(axis=-1, keepdims=True)
    # frame pixels no face reached (outside every image): the class shares
    maps = np.where(den > 1e-9, total / np.maximum(den, 1e-12), pi)
    return ShapePrior(maps.astype(np.float32), mean, pi, float(sigma), float(pseudo),
                      len(keep))


# ---------------------------------------------------------------- inference

def shape_maps(prior, points, shape):
    """The prior's class frequencies on a face image with predicted landmarks.

    Parameters
    ----------
    prior : ShapePrior
    points : float (68, 2) or None
        The face's predicted landmarks, in its image's pixels.
    shape : tuple
        ``(H, W, ...)`` of the face image.

    Returns
    -------
    float32 (H, W, C) or None
        Sum 1 per pixel (pixels the mesh does not reach get the class shares);
        None when ``points`` is None (no landmarks: the caller's landmark-free
        path).
    """
    if points is None:
        return None
    m = warp_from_frame(prior.maps, points, prior.mean_shape, shape)
    tot = m.sum(axis=-1, keepdims=True)
    out = np.where(tot > 1e-6, m / np.maximum(tot, 1e-12), prior.class_prior)
    return out.astype(np.float32)


def shape_factor(prior, points, shape):
    """The prior's ratio ``shape_c(x) / pi_c`` on a face image.

    Parameters
    ----------
    prior : ShapePrior
    points : float (68, 2) or None
        The face's predicted landmarks, in its image's pixels.
    shape : tuple
        ``(H, W, ...)`` of the face image.

    Returns
    -------
    float32 (H, W, C) or None
        None without landmarks.
    """
    m = shape_maps(prior, points, shape)
    if m is None:
        return None
    return (m / np.maximum(prior.class_prior, 1e-12)).astype(np.float32)


def combine(scores, factor, gamma):
    """``scores * factor ** gamma`` renormalised per pixel.

    Parameters
    ----------
    scores : float (H, W, C)
        Reweighted class probabilities.
    factor : float (H, W, C) or None
        :func:`shape_factor`; None (no landmarks) leaves ``scores`` unchanged.
    gamma : float
        Exponent of the prior; 0 leaves ``scores`` unchanged.

    Returns
    -------
    float32 (H, W, C)
        Summing to 1 per pixel (unless returned unchanged).
    """
    gamma = float(gamma)
    if factor is None or gamma == 0:
        return np.asarray(scores, dtype=np.float32)
    logs = np.log(np.maximum(scores, 1e-30)) + gamma * np.log(np.maximum(factor, 1e-30))
    out = np.exp(logs - logs.max(axis=-1, keepdims=True))
    return (out / out.sum(axis=-1, keepdims=True)).astype(np.float32)


def prior_labels(prior, points, shape, g=0.0):
    """The label map of the prior alone: ``argmax_c shape_c * pi_c ** -g``.

    Parameters
    ----------
    prior : ShapePrior
    points : float (68, 2) or None
        The face's predicted landmarks, in its image's pixels.
    shape : tuple
        ``(H, W, ...)`` of the face image.
    g : float
        Reweighting exponent of the class shares.

    Returns
    -------
    uint8 (H, W) or None
        None without landmarks.
    """
    m = shape_maps(prior, points, shape)
    if m is None:
        return None
    logs = np.log(np.maximum(m, 1e-30)) - float(g) * np.log(np.maximum(prior.class_prior,
                                                                      1e-30))
    return np.argmax(logs, axis=-1).astype(np.uint8)


# ------------------------------------------------------- a model's decision

#: What ``segment`` reports per face: the shape prior applied, or not.
LANDMARK_PATH, FALLBACK_PATH = "landmarks", "landmark-free"
#: Landmarks whose best similarity fit to the mean shape leaves an RMS residual
#: above this share of their RMS radius are not trusted (a face dlib's
#: predictor could not fit: profiles, occlusion).  The largest among the 1198
#: faces with landmarks of faces300w's training crops is 0.357.
MAX_RESIDUAL = 0.45


def landmark_residual(points, mean_shape):
    """How badly the mean shape fits the landmarks, as a share of their size.

    The RMS residual of the best similarity fit of ``mean_shape`` to ``points``,
    divided by the RMS distance of ``points`` to their centroid.

    Parameters
    ----------
    points : float (68, 2)
        The face's landmarks.
    mean_shape : float (68, 2)
        The frame's landmarks.

    Returns
    -------
    float
        ``inf`` when no similarity can be estimated or the points coincide.

    Raises
    ------
    ValueError
        Either set is not 68 finite ``(x, y)`` points.
    """
    p, m = _check_points(points), _check_points(mean_shape, "mean_shape")
    sim = _similarity(m, p)
    scale = float(np.sqrt(((p - p.mean(axis=0)) ** 2).sum(axis=1).mean()))
    if sim is None or scale <= 0:
        return float("inf")
    return float(np.sqrt(((sim(m) - p) ** 2).sum(axis=1).mean()) / scale)


def model_gamma(model):
    """The exponent of a model's shape prior.

    Parameters
    ----------
    model : object
        A trained model; its ``shape_prior`` and ``metrics`` are read.

    Returns
    -------
    float
        ``model.metrics["gamma"]``; 0 for a model without a shape prior or
        without the metric.
    """
    if getattr(model, "shape_prior", None) is None:
        return 0.0
    return float((getattr(model, "metrics", None) or {}).get("gamma", 0.0))


def apply_model_prior(model, scores, points):
    """A face's decision scores with the model's shape prior.

    With a shape prior, ``metrics["gamma"] > 0`` and plausible landmarks
    (finite, :func:`landmark_residual` <= :data:`MAX_RESIDUAL`): :func:`combine`
    with :func:`shape_factor` and :data:`LANDMARK_PATH`; otherwise ``scores``
    unchanged and :data:`FALLBACK_PATH` (the model's landmark-free path).

    Parameters
    ----------
    model : object
        A trained model (:func:`model_gamma`).
    scores : float (H, W, C)
        The model's reweighted probabilities of a face crop.
    points : float (68, 2) or None
        That face's predicted landmarks in the crop's pixels (None: no landmarks).

    Returns
    -------
    scores : float (H, W, C)
    path : str
        :data:`LANDMARK_PATH` or :data:`FALLBACK_PATH`.
    """
    prior, gamma = getattr(model, "shape_prior", None), model_gamma(model)
    if prior is None or gamma <= 0 or points is None or not np.all(np.isfinite(points)) \
            or landmark_residual(points, prior.mean_shape) > MAX_RESIDUAL:
        return scores, FALLBACK_PATH
    return combine(scores, shape_factor(prior, points, scores.shape[:2]), gamma), LANDMARK_PATH


# ------------------------------------------------------------------ files

def save_arrays(prior):
    """The prior as named plain arrays (``.npz`` / HDF5; no pickles).

    Parameters
    ----------
    prior : ShapePrior

    Returns
    -------
    dict of str to numpy array
        ``maps``, ``mean_shape``, ``class_prior``, ``sigma``, ``pseudo``,
        ``n_images`` (read back by :func:`from_arrays`).
    """
    return {"maps": np.asarray(prior.maps, np.float32),
            "mean_shape": np.asarray(prior.mean_shape, np.float64),
            "class_prior": np.asarray(prior.class_prior, np.float64),
            "sigma": np.float64(prior.sigma), "pseudo": np.float64(prior.pseudo),
            "n_images": np.int64(prior.n_images)}


def from_arrays(arrays, where="shape prior"):
    """A :class:`ShapePrior` from :func:`save_arrays`' arrays.

    Parameters
    ----------
    arrays : mapping of str to array
        As :func:`save_arrays` wrote them.
    where : str
        Names the source in error messages.

    Returns
    -------
    ShapePrior

    Raises
    ------
    ValueError
        An array is missing, or the arrays' shapes do not fit together.
    """
    try:
        maps = np.asarray(arrays["maps"], np.float32)
        mean = np.asarray(arrays["mean_shape"], np.float64)
        pi = np.asarray(arrays["class_prior"], np.float64)
        prior = ShapePrior(maps, mean, pi, float(arrays["sigma"]), float(arrays["pseudo"]),
                           int(arrays["n_images"]))
    except KeyError as exc:
        raise ValueError(f"{where}: missing array {exc}") from None
    if maps.ndim != 3 or maps.shape[0] != maps.shape[1] or mean.shape != (68, 2) \
            or pi.shape != (maps.shape[2],):
        raise ValueError(f"{where}: maps {maps.shape}, mean_shape {mean.shape}, class_prior "
                         f"{pi.shape} do not fit together")
    return prior


__all__ = ["ShapePrior", "fit_shape_prior", "shape_maps", "shape_factor", "combine",
           "prior_labels", "save_arrays", "from_arrays", "landmark_residual", "model_gamma",
           "apply_model_prior", "LANDMARK_PATH", "FALLBACK_PATH", "MAX_RESIDUAL",
           "DEFAULT_SIGMA", "DEFAULT_PSEUDO"]
