"""Prior reweighting (section 6.2 of the paper) and smoothing of the class maps.

Forests are trained on class-balanced windows; :func:`reweight` multiplies
probabilities by ``s_c ** -alpha`` (``s_c`` the sampling factor of class
``c`` stored in the model) and renormalises.  ``alpha=1`` undoes the
balancing fully (the paper), ``alpha=0`` leaves the forest's output unchanged.

:func:`smooth` blurs the reweighted class maps before the argmax (the cheap
alternative to auto-context, with ``sigma`` chosen on validation and stored in
the model's decision rule).  The terms together are the model's
:class:`facesegment.rule.DecisionRule`, which applies them with these functions;
a model's stored terms are read by :mod:`facesegment.rule` (``default_alpha``,
``default_beta``, ``default_sigma``), which sits above this module.
"""

import numpy as np

from ._checks import check_alpha, check_factors
from ._scores import reweight_rows


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
    ``s / min(s)``, computed without overflow warnings."""
    with np.errstate(over="ignore", under="ignore"):
        scale = s ** -alpha
        if np.all(np.isfinite(scale)) and np.any(scale > 0):
            return scale
        return np.exp(-alpha * (np.log(s) - np.log(s.min())))


def reweight_labels(proba, s, alpha):
    """(reweighted float32 probabilities, uint8 argmax labels), one fused pass."""
    scale = class_scale(s, alpha).astype(np.float32)
    raw = np.ascontiguousarray(proba, dtype=np.float32).reshape(-1, s.shape[0])
    out = np.empty_like(raw)
    labels = np.empty(raw.shape[0], dtype=np.uint8)
    reweight_rows(raw, scale, out, labels)
    return out.reshape(proba.shape), labels.reshape(proba.shape[:-1])


def class_scales(sampling_factors, alphas):
    """``s ** -alpha`` for each alpha: float64 ``(len(alphas), n_classes)``."""
    s = np.asarray(sampling_factors, dtype=np.float64)
    return np.stack([class_scale(s, check_alpha(a, "alphas")) for a in alphas])


def check_beta(model, beta):
    """``beta`` checked (a number >= 0); > 0 needs a model with a position prior."""
    beta = check_alpha(beta, "beta")
    if beta > 0 and getattr(model, "position", None) is None:
        raise ValueError(f"beta={beta} needs a model with a position prior (model.position "
                         "is None): give beta=0, or train the model with a position prior")
    return beta


def check_sigma(sigma):
    """``sigma`` (pixels) checked: a finite number >= 0 (0: no smoothing)."""
    return check_alpha(sigma, "sigma")


def smooth(proba, sigma):
    """Every class map of ``proba`` (H, W, C) blurred with a Gaussian of ``sigma``
    pixels (borders replicated), then renormalised per pixel: float32 (H, W, C).
    ``sigma = 0`` returns ``proba`` unchanged."""
    import cv2

    sigma = check_sigma(sigma)
    if sigma == 0:
        return proba
    out = np.stack([cv2.GaussianBlur(np.ascontiguousarray(proba[..., c], dtype=np.float32),
                                     (0, 0), sigma, borderType=cv2.BORDER_REPLICATE)
                    for c in range(proba.shape[-1])], axis=-1)
    total = out.sum(axis=-1, keepdims=True)
    return np.where(total > 0, out / np.where(total > 0, total, 1), 0).astype(np.float32)
