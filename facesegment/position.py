"""Position priors: where each class lies in the aligned face crop.

Faces in the crops are aligned (the crop rule centres the landmarks), so the
class of a pixel depends strongly on its place in the crop.  A
:class:`PositionPrior` holds, for every pixel of the crop, the class
frequencies among the training label maps, smoothed with a Gaussian of
``sigma`` pixels and shrunk toward the global class shares (``pseudo``
images' worth of them), and those global pixel shares ``pi``.

Combined with a forest trained on class-balanced windows (section 6.2 of the
paper reweights its output ``p`` by the sampling factors ``s``), a pixel at
``x`` gets the scores

    p_c * s_c ** -alpha * (pos_c(x) / pi_c) ** beta

(Bayes' rule with alpha = beta = 1 when the window and the position are
independent given the class; both exponents are chosen on validation images).
:func:`position_factor` gives ``pos(x) / pi`` resized to an image's size (a crop
of another size is the same face layout at another scale), and
:func:`constant_labels` the map that uses the position alone (no image).

A model keeps its prior (``model.position``) and its exponent
(``model.metrics["beta"]``); ``predict_image``, the evaluation driver,
``segment`` and the figures apply them.
"""

from dataclasses import dataclass

import numpy as np

#: Default smoothing (pixels of a 250x250 crop) and shrinkage (images).
DEFAULT_SIGMA = 4.0
DEFAULT_PSEUDO = 1.0


@dataclass
class PositionPrior:
    """Per-pixel class frequencies of aligned crops.

    Attributes
    ----------
    freq : float32 (H, W, C)
        Smoothed class frequencies at every pixel of the crop (sum 1 over C).
    class_prior : float64 (C,)
        Share of each class among all scored training pixels (``pi``).
    sigma : float
        Gaussian smoothing of the counts, in pixels.
    pseudo : float
        Shrinkage toward ``class_prior``, in images.
    n_images : int
        Label maps counted.
    crop_rule : tuple of 3 floats
        ``(k, ox, oy)``: how a crop box made from 68 predicted landmarks
        (:func:`facesegment.faces.segment.landmark_box`) maps to the crops these
        label maps are in, measured on training faces
        (:func:`facesegment.faces.aligned.measure_crop_rule`); ``segment`` and the
        detector-aligned protocol cut crops by it, so that a new face is in
        the prior's frame.  ``(1, 0, 0)``: the landmark rule as it is.
    """

    freq: np.ndarray
    class_prior: np.ndarray
    sigma: float = DEFAULT_SIGMA
    pseudo: float = DEFAULT_PSEUDO
    n_images: int = 0
    crop_rule: tuple = (1.0, 0.0, 0.0)

    @property
    def shape(self):
        return tuple(self.freq.shape[:2])

    @property
    def n_classes(self):
        return int(self.freq.shape[2])

    def describe(self):
        """JSON-ready summary (``model.json``)."""
        return {"shape": list(self.shape), "n_classes": self.n_classes,
                "sigma": float(self.sigma), "pseudo": float(self.pseudo),
                "n_images": int(self.n_images),
                "crop_rule": [float(v) for v in self.crop_rule]}


class PriorCounter:
    """Accumulates per-pixel class counts of label maps of one shape.

    ``add(label)`` counts ids ``0..n_classes-1`` (255 and other ids are not
    counted); :meth:`prior` smooths and normalises.
    """

    def __init__(self, n_classes, shape):
        if int(n_classes) < 1:
            raise ValueError(f"n_classes={n_classes!r} must be >= 1")
        self.n_classes = int(n_classes)
        self.shape = tuple(int(v) for v in shape)
        self.counts = np.zeros(self.shape + (self.n_classes,), dtype=np.int64)
        self.n_images = 0

    def add(self, label):
        """Count the classes of one label map.

        Parameters
        ----------
        label : array-like of uint8, shape (H, W)
            A label map; one of another shape is resized (nearest) to the counter's
            shape first.  Ids outside ``0..n_classes-1`` (255) are not counted.
        """
        label = np.asarray(label)
        if label.shape != self.shape:
            label = resize_labels(label, self.shape)
        for c in range(self.n_classes):
            self.counts[..., c] += label == c
        self.n_images += 1

    def merge(self, other):
        """Add the counts of another counter (of the same shape and classes) to these.

        Parameters
        ----------
        other : PriorCounter
            Counts of other label maps (e.g. from another worker).

        Returns
        -------
        PriorCounter
            ``self``.
        """
        self.counts += other.counts
        self.n_images += other.n_images
        return self

    def prior(self, sigma=DEFAULT_SIGMA, pseudo=DEFAULT_PSEUDO):
        """The position prior of the label maps counted (see :func:`prior_from_counts`).

        Parameters
        ----------
        sigma : float >= 0, default=DEFAULT_SIGMA
            Gaussian smoothing of the counts, in pixels.
        pseudo : float >= 0, default=DEFAULT_PSEUDO
            Shrinkage toward the global class shares, in images.

        Returns
        -------
        PositionPrior

        Raises
        ------
        ValueError
            When no labelled pixel was counted, or ``sigma``/``pseudo`` is negative or
            not finite.
        """
        return prior_from_counts(self.counts, self.n_images, sigma, pseudo)


def resize_labels(label, shape):
    """Nearest-neighbour resize of a label map to ``shape``.

    Parameters
    ----------
    label : array-like, shape (h, w)
        Label map (converted to uint8).
    shape : tuple of int
        ``(H, W)`` of the result.

    Returns
    -------
    ndarray of uint8, shape (H, W)
    """
    import cv2

    h, w = shape
    return cv2.resize(np.ascontiguousarray(label, dtype=np.uint8), (w, h),
                      interpolation=cv2.INTER_NEAREST)


def prior_from_counts(counts, n_images, sigma=DEFAULT_SIGMA, pseudo=DEFAULT_PSEUDO):
    """A :class:`PositionPrior` from per-pixel class counts.

    The counts are smoothed with a Gaussian of ``sigma`` pixels (replicated
    border), ``pseudo`` times the global class shares are added at each pixel,
    and each pixel is normalised to sum 1.

    Parameters
    ----------
    counts : array-like, shape (H, W, C)
        Label maps whose class at each pixel is each class, per pixel.
    n_images : int
        Label maps counted.
    sigma : float >= 0, default=DEFAULT_SIGMA
        Gaussian smoothing of the counts, in pixels (0: none).
    pseudo : float >= 0, default=DEFAULT_PSEUDO
        Shrinkage toward the global class shares, in images.

    Returns
    -------
    PositionPrior
        With ``crop_rule`` ``(1, 0, 0)``.

    Raises
    ------
    ValueError
        When ``n_images < 1`` or nothing was counted, or ``sigma``/``pseudo`` is
        negative or not finite.
    """
    import cv2

    sigma, pseudo = _nonneg(sigma, "sigma"), _nonneg(pseudo, "pseudo")
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum(axis=(0, 1))
    if n_images < 1 or total.sum() <= 0:
        raise ValueError("no labelled pixels were counted: give at least one label map "
                         "with class ids 0..n_classes-1")
    pi = total / total.sum()
    sm = counts
    if sigma > 0:
        sm = np.stack([cv2.GaussianBlur(counts[..., c], (0, 0), sigma,
                                        borderType=cv2.BORDER_REPLICATE)
                       for c in range(counts.shape[2])], axis=-1)
    sm = sm + pseudo * pi
    den = sm.sum(axis=-1, keepdims=True)
    freq = np.where(den > 0, sm / np.where(den > 0, den, 1.0), pi)
    return PositionPrior(freq.astype(np.float32), pi, float(sigma), float(pseudo),
                         int(n_images))


def fit_position_prior(labels, n_classes, shape=None, sigma=DEFAULT_SIGMA,
                       pseudo=DEFAULT_PSEUDO):
    """The position prior of label maps.

    Parameters
    ----------
    labels : iterable of uint8 (H, W) arrays
        Training label maps of aligned crops (ids ``0..n_classes-1``; 255 not
        counted).  Maps of another shape are resized (nearest) to ``shape``.
    n_classes : int
    shape : (H, W), optional
        The prior's grid (default: the first map's shape).
    sigma : float >= 0
        Gaussian smoothing of the counts, in pixels.
    pseudo : float >= 0
        Shrinkage toward the global class shares, in images.
    """
    counter = None
    for label in labels:
        if counter is None:
            counter = PriorCounter(n_classes, shape or np.asarray(label).shape[:2])
        counter.add(label)
    if counter is None:
        raise ValueError("labels is empty: give at least one training label map")
    return counter.prior(sigma, pseudo)


def position_factor(prior, shape):
    """``pos_c(x) / pi_c`` on an image of ``shape``.

    The prior is resized bilinearly when the image's size differs from the
    prior's grid, then renormalised per pixel.  A class with no training pixel
    gets the factor 0.

    Parameters
    ----------
    prior : PositionPrior
        The model's position prior.
    shape : tuple of int
        ``(H, W)`` (further entries are ignored).

    Returns
    -------
    ndarray of float32, shape (H, W, C)
    """
    import cv2

    h, w = int(shape[0]), int(shape[1])
    freq = prior.freq
    if (h, w) != prior.shape:
        freq = np.stack([cv2.resize(freq[..., c], (w, h), interpolation=cv2.INTER_LINEAR)
                         for c in range(prior.n_classes)], axis=-1)
        freq = freq / np.maximum(freq.sum(axis=-1, keepdims=True), 1e-12)
    pi = np.maximum(prior.class_prior, 1e-12).astype(np.float32)   # unseen class: factor 0
    return (freq / pi).astype(np.float32)


def position_scales(prior, shape, ys, xs, class_scale, beta, factor=None, power=None):
    """Per-pixel class scales ``s**-alpha * (pos/pi)**beta`` at pixels ``(ys, xs)``.

    Parameters
    ----------
    prior : PositionPrior
        The model's position prior.
    shape : tuple of int
        ``(H, W)`` of the image.
    ys, xs : array-like of int, shape (n,)
        Rows and columns of the pixels.
    class_scale : array-like of float, shape (C,)
        ``s**-alpha``, the reweighting of the sampling factors.
    beta : float
        Exponent of the position factor.
    factor : ndarray of float64, shape (n, C), optional
        ``position_factor(prior, shape)[ys, xs]``, when already computed.
    power : ndarray of float64, shape (n, C), optional
        ``factor ** beta``, when already computed (several alphas at one image);
        the result is the same.

    Returns
    -------
    ndarray of float64, shape (n, C)
        The scales.  When they overflow (a huge ``beta``), each pixel's scales
        are divided by their largest, computed in logarithms, so their order and
        ratios per pixel are the same.
    """
    f = position_factor(prior, shape)[ys, xs].astype(np.float64) if factor is None else factor
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        if power is None:
            power = np.power(f, float(beta))
        out = power * np.asarray(class_scale, np.float64)
    if not np.all(np.isfinite(out)):  # a huge beta: the same up to a per-pixel factor
        logs = float(beta) * np.log(np.maximum(f, 1e-300)) + np.log(
            np.maximum(np.asarray(class_scale, np.float64), 1e-300))
        out = np.exp(logs - logs.max(axis=-1, keepdims=True))
    return out


def constant_labels(prior, shape, gamma=0.0):
    """The map that uses the position alone: ``argmax_c pos_c(x) * pi_c**-gamma``.

    Parameters
    ----------
    prior : PositionPrior
        The model's position prior.
    shape : tuple of int
        ``(H, W)`` of the map.
    gamma : float >= 0, default=0.0
        0: the most frequent class at each pixel; ``gamma > 0`` favours the rare
        classes, as prior reweighting does for a forest.

    Returns
    -------
    ndarray of uint8, shape (H, W)
        Class ids.

    Raises
    ------
    ValueError
        When ``gamma`` is negative or not finite.
    """
    gamma = _nonneg(gamma, "gamma")
    f = position_factor(prior, shape).astype(np.float64)      # pos / pi
    logs = np.log(np.maximum(f, 1e-300)) + (1.0 - gamma) * np.log(
        np.maximum(prior.class_prior, 1e-300))
    return np.argmax(logs, axis=-1).astype(np.uint8)


def crop_rule_of(value):
    """A crop rule ``(k, ox, oy)`` checked: three finite numbers, ``k > 0``.

    Parameters
    ----------
    value : sequence of 3 numbers or None
        The rule; None gives ``(1, 0, 0)``, the landmark rule as it is.

    Returns
    -------
    tuple of 3 float

    Raises
    ------
    ValueError
        When ``value`` is not three finite numbers with ``k > 0``.
    """
    if value is None:
        return (1.0, 0.0, 0.0)
    try:
        rule = tuple(float(v) for v in np.asarray(value, dtype=np.float64).ravel())
    except (TypeError, ValueError):
        rule = ()
    if len(rule) != 3 or not all(np.isfinite(rule)) or rule[0] <= 0:
        raise ValueError(f"crop_rule={value!r} must be three finite numbers (k, ox, oy) "
                         "with k > 0")
    return rule


def _nonneg(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name}={value!r} must be a finite number >= 0")
    return float(value)


__all__ = ["PositionPrior", "PriorCounter", "crop_rule_of", "fit_position_prior", "prior_from_counts",
           "position_factor", "position_scales", "constant_labels", "resize_labels",
           "DEFAULT_SIGMA", "DEFAULT_PSEUDO"]
