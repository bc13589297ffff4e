"""Prior reweighting, smoothing, and the window-border checks that dense
inference and the decision rule share.

Forests are trained on class-balanced windows; :func:`reweight` multiplies
probabilities by ``s_c ** -alpha`` (``s_c`` the sampling factor of class
``c`` stored in the model) and renormalises (section 6.2 of the paper).
``alpha=1`` undoes the balancing fully (the paper), ``alpha=0`` leaves the
forest's output unchanged.  :func:`smooth` blurs the reweighted class maps
before the argmax.  The terms together are the model's
:class:`facesegment.rule.DecisionRule`, which applies them with these
functions; :mod:`facesegment.dense` runs them after its kernels.  The checks
of a model's window layout (:func:`model_layout`) and of the strict-mode
border (:func:`strict_region`) are shared the same way.
"""

import numpy as np
from numba import prange

from ._jit import PARALLEL, njit
from .bounds import BOUNDS
from .forest._verify import verified
from .layout import DEFAULT_LAYOUT

MODES = ("full", "strict")


def check_mode(mode):
    """``mode`` checked: one of :data:`MODES`.

    Parameters
    ----------
    mode : {"full", "strict"}
        How the window border is predicted.

    Returns
    -------
    str
        ``mode``.

    Raises
    ------
    ValueError
        When ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {MODES} ('strict' ignores the border "
                         "of half a window like the paper, 'full' reflect-pads and predicts "
                         "every pixel)")
    return mode


def check_alpha(alpha, name="alpha"):
    """``alpha`` checked: a finite number >= 0 within its bound in
    :data:`facesegment.bounds.BOUNDS`.

    Parameters
    ----------
    alpha : float
        The value.
    name : str, optional
        Its name in messages, and which bound applies (a trailing ``s``
        dropped: ``"alphas"`` is alpha's; a name without a bound gets
        alpha's); default ``"alpha"``.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        When ``alpha`` is not a number.
    ValueError
        When it is not finite, negative or above its bound.
    """
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {alpha!r}") from None
    if not np.isfinite(a) or a < 0:
        raise ValueError(f"{name}={alpha!r} must be finite and >= 0 "
                         "(1 = the paper's full prior reweighting, 0 = none)")
    return _upper(name, a)


def _upper(name, value):
    """``value`` within the upper bound of ``BOUNDS`` for alpha, beta or sigma."""
    bound = BOUNDS.get(name.rstrip("s")) or BOUNDS["alpha"]
    if value > bound.high:
        raise ValueError(f"{name}={value!r} is out of bounds: expected {bound.describe()} "
                         f"({bound.reason})")
    return value


def check_factors(sampling_factors, n_classes):
    """The sampling factors checked: one finite factor > 0 per class, each
    within its bound in :data:`facesegment.bounds.BOUNDS`.

    Parameters
    ----------
    sampling_factors : array-like (n_classes,)
        The model's sampling factors.
    n_classes : int
        The number of classes.

    Returns
    -------
    float64 (n_classes,)

    Raises
    ------
    ValueError
        When the shape is wrong, or a factor is not finite, not > 0 or out of
        its bounds.
    """
    s = np.asarray(sampling_factors, dtype=np.float64)
    if s.ndim != 1 or s.shape[0] != n_classes:
        raise ValueError(f"sampling_factors has shape {s.shape}; expected "
                         f"({n_classes},) (one factor per class)")
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"sampling_factors={s.tolist()} must be finite and > 0")

    bound = BOUNDS["sampling_factors"]
    if np.any(s < bound.low) or np.any(s > bound.high):
        raise ValueError(f"sampling_factors={s.tolist()} are out of bounds: expected each "
                         f"{bound.describe()} ({bound.reason})")
    return s


def forest_arrays(model):
    """``model.arrays`` proved safe for the kernels (TypeError when ``model`` is not
    a Model; :class:`facesegment.forest._verify.ForestProblem`, a ValueError,
    when its arrays are inconsistent).

    Parameters
    ----------
    model : Model or object
        Anything with forest ``arrays``.

    Returns
    -------
    facesegment.forest._arrays.ForestArrays
        The verified arrays (:func:`facesegment.forest._verify.verified`).

    Raises
    ------
    TypeError
        When ``model`` has no ``arrays`` with ``roots``.
    facesegment.forest._verify.ForestProblem
        When the arrays are inconsistent.
    """
    arrays = getattr(model, "arrays", None)
    if arrays is None or not hasattr(arrays, "roots"):
        raise TypeError(f"model must be a facesegment.modelio.model.Model (with .arrays), got "
                        f"{type(model).__name__} (load one with facesegment.models.load_model)")
    return verified(arrays)


def forest_stages(model):
    """The forests ``model`` runs one after the other (``model.stages``: a cascade's
    stages, a forest Model itself); a bare forest object without ``stages`` is
    its own one stage.

    Parameters
    ----------
    model : Model, Cascade or object
        The model.

    Returns
    -------
    list
        The stages, first to last.
    """
    stages = getattr(model, "stages", None)
    return [model] if stages is None else list(stages)


def model_layout(model):
    """The model's window layout (the paper's 31x31 RGB one when it records none).

    A cascade's stages are each checked and the cascade's own layout returned.

    Parameters
    ----------
    model : Model or Cascade
        The model.

    Returns
    -------
    facesegment.layout.WindowLayout

    Raises
    ------
    ValueError
        When the layout does not match the forest's features (e.g. a model
        trained on tabular data, which dense inference cannot use), or the
        forest's arrays are inconsistent.
    TypeError
        When a stage has no forest arrays.
    """
    stages = forest_stages(model)
    if len(stages) > 1:   # a cascade: its stages are checked, the image's layout
        for stage in stages:
            model_layout(stage)
        return model.layout
    arrays = forest_arrays(model)
    layout = getattr(model, "layout", None) or DEFAULT_LAYOUT
    if not layout.matches(arrays.n_features):
        raise ValueError(f"model has {arrays.n_features} features but its window layout is "
                         f"{layout.describe()} (dense inference needs a model trained on "
                         "image windows, e.g. by `facesegment train` on a windows file)")
    return layout


def strict_region(shape, layout=DEFAULT_LAYOUT):
    """``(y0, y1, x0, x1)``: the pixels whose window lies inside an image of ``shape``.

    Parameters
    ----------
    shape : tuple
        ``(H, W, ...)`` of the image.
    layout : facesegment.layout.WindowLayout, optional
        Gives the border ``layout.half`` (default: the paper's layout).

    Returns
    -------
    tuple of int
        Rows ``y0:y1`` and columns ``x0:x1``; empty ranges (``y1 == y0``) for
        an image too small.
    """
    h, w = shape[:2]
    y0 = x0 = layout.half
    y1, x1 = max(y0, h - layout.half), max(x0, w - layout.half)
    return y0, y1, x0, x1


@njit(**PARALLEL)
def reweight_rows(raw, scale, out, labels):
    """Prior reweighting and argmax of ``raw`` float32 (n, C) in one pass.

    ``out[i] = raw[i] * scale / sum(raw[i] * scale)`` (rows summing to 0 stay
    0), ``labels[i]`` = the first class of maximal ``out[i]`` (uint8).

    Parameters
    ----------
    raw : float32 (n, C)
        Raw class probabilities, one row per pixel.
    scale : float32 (C,)
        Per-class scales (:func:`class_scale`).
    out : float32 (n, C)
        Written: the reweighted, renormalised rows.
    labels : uint8 (n,)
        Written: each row's argmax.

    Returns
    -------
    float32 (n, C)
        ``out``.
    """
    n, n_classes = raw.shape
    for i in prange(n):
        total = np.float32(0.0)
        best = 0
        bv = np.float32(-1.0)
        for c in range(n_classes):
            v = raw[i, c] * scale[c]
            out[i, c] = v
            total += v
            if v > bv:
                bv = v
                best = c
        if total > 0:
            for c in range(n_classes):
                out[i, c] = out[i, c] / total
        labels[i] = best
    return out


def reweight(proba, sampling_factors, alpha=1.0):
    """Prior reweighting: ``p_c * s_c ** -alpha``, renormalised over classes.

    Parameters
    ----------
    proba : float array (..., n_classes)
        Class probabilities (the forest's mean leaf distribution).
    sampling_factors : array (n_classes,)
        Share of each class among training windows / share among pixels (> 0).
    alpha : float >= 0
        1 undoes the class balancing fully (paper section 6.2), 0 is a no-op.

    Returns
    -------
    float32 array like ``proba``; rows that sum to 0 (strict-mode border) stay 0.
    """
    proba = np.asarray(proba)
    s = check_factors(sampling_factors, proba.shape[-1])
    return reweight_labels(proba, s, check_alpha(alpha))[0]


def class_scale(s, alpha):
    """``s ** -alpha`` (float64), or, when that overflows (a huge alpha), the
    same up to a common factor (which renormalisation removes): the powers of
    ``s / min(s)``, computed without overflow warnings.

    Parameters
    ----------
    s : float64 (C,)
        Sampling factors (> 0).
    alpha : float
        The reweighting exponent.

    Returns
    -------
    float64 (C,)
    """
    with np.errstate(over="ignore", under="ignore"):
        scale = s ** -alpha
        if np.all(np.isfinite(scale)) and np.any(scale > 0):
            return scale
        return np.exp(-alpha * (np.log(s) - np.log(s.min())))


def reweight_labels(proba, s, alpha):
    """(reweighted float32 probabilities, uint8 argmax labels), one fused pass.

    Parameters
    ----------
    proba : float array (..., C)
        Class probabilities.
    s : float64 (C,)
        Checked sampling factors (:func:`check_factors`).
    alpha : float
        Checked reweighting exponent (:func:`check_alpha`).

    Returns
    -------
    proba : float32 (..., C)
        Renormalised; rows that sum to 0 stay 0.
    labels : uint8 (...)
        The first class of maximal probability.
    """
    scale = class_scale(s, alpha).astype(np.float32)
    raw = np.ascontiguousarray(proba, dtype=np.float32).reshape(-1, s.shape[0])
    out = np.empty_like(raw)
    labels = np.empty(raw.shape[0], dtype=np.uint8)
    reweight_rows(raw, scale, out, labels)
    return out.reshape(proba.shape), labels.reshape(proba.shape[:-1])


def class_scales(sampling_factors, alphas):
    """``s ** -alpha`` for each alpha: float64 ``(len(alphas), n_classes)``.

    Parameters
    ----------
    sampling_factors : array-like (n_classes,)
        The model's sampling factors.
    alphas : iterable of float
        Reweighting exponents, each checked (:func:`check_alpha`).

    Returns
    -------
    float64 (len(alphas), n_classes)
        Rows as :func:`class_scale`.

    Raises
    ------
    TypeError, ValueError
        When an alpha is not a valid exponent.
    """
    s = np.asarray(sampling_factors, dtype=np.float64)
    return np.stack([class_scale(s, check_alpha(a, "alphas")) for a in alphas])


def check_beta(model, beta):
    """``beta`` checked (a number >= 0); > 0 needs a model with a position prior.

    Parameters
    ----------
    model : Model, Cascade or object
        Its ``position`` is read.
    beta : float
        The position prior's exponent.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        When ``beta`` is not a number.
    ValueError
        When it is not finite, negative or above its bound, or > 0 for a model
        without a position prior.
    """
    beta = check_alpha(beta, "beta")
    if beta > 0 and getattr(model, "position", None) is None:
        raise ValueError(f"beta={beta} needs a model with a position prior (model.position "
                         "is None): give beta=0, or train the model with a position prior")
    return beta


def check_sigma(sigma):
    """``sigma`` (pixels) checked: a finite number >= 0 (0: no smoothing).

    Parameters
    ----------
    sigma : float
        The blur's standard deviation in pixels.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        When ``sigma`` is not a number.
    ValueError
        When it is not finite, negative or above its bound.
    """
    return check_alpha(sigma, "sigma")


def smooth(proba, sigma):
    """Every class map of ``proba`` (H, W, C) blurred with a Gaussian of ``sigma``
    pixels (borders replicated), then renormalised per pixel: float32 (H, W, C).
    ``sigma = 0`` returns ``proba`` unchanged.

    Parameters
    ----------
    proba : float (H, W, C)
        Class probability maps.
    sigma : float
        The Gaussian's standard deviation in pixels (checked:
        :func:`check_sigma`).

    Returns
    -------
    float32 (H, W, C)
        Pixels whose blurred maps sum to 0 stay 0; ``proba`` itself for
        ``sigma = 0``.

    Raises
    ------
    TypeError, ValueError
        When ``sigma`` is not a valid value.
    """
    import cv2

    sigma = check_sigma(sigma)
    if sigma == 0:
        return proba
    out = np.stack([cv2.GaussianBlur(np.ascontiguousarray(proba[..., c], dtype=np.float32),
                                     (0, 0), sigma, borderType=cv2.BORDER_REPLICATE)
                    for c in range(proba.shape[-1])], axis=-1)
    total = out.sum(axis=-1, keepdims=True)
    return np.where(total > 0, out / np.where(total > 0, total, 1), 0).astype(np.float32)
