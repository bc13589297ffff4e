"""Faces under a forest or a cascade: the face methods of those models.

:class:`facesegment.modelio.model.Model` and
:class:`facesegment.autocontext.cascade.Cascade` call these for their
``predict_face`` and ``photo_faces`` (:class:`facesegment.modelio.protocol.FaceModel`):
a crop is segmented densely in full mode (:func:`facesegment.dense.predict_image`,
every pixel predicted) under the model's decision rule, in the channels the
model's windows were cut from, and a model with a landmark-conditioned shape
prior applies it through the face's landmarks
(:func:`facesegment.faces.shape_prior.apply_model_prior`).
"""

from ..dense import predict_image
from ..rule import decision_rule
from . import renderer
from .crops import model_image
from .photo import OWN_LANDMARKS, crop_faces
from .shape_prior import apply_model_prior, model_gamma


def rule_terms(model, alpha=None, beta=None, sigma=None):
    """The decision rule's terms for ``model`` (:func:`facesegment.rule.decision_rule`).

    Parameters
    ----------
    model : Model or Cascade
    alpha, beta, sigma : float, optional
        Terms replacing the model's own; None: the model's.

    Returns
    -------
    dict
        ``alpha``, ``beta`` and ``sigma``.
    """
    rule = decision_rule(model, alpha, beta, sigma)
    return dict(alpha=rule.alpha, beta=rule.beta, sigma=rule.sigma)


def forest_face(model, crop, points, terms):
    """One crop under a forest or a cascade, its shape prior (if any) applied.

    Parameters
    ----------
    model : Model or Cascade
    crop : uint8 (S, S, 3) RGB
        The face crop.
    points : float (68, 2), None or OWN_LANDMARKS
        The crop's landmarks in its pixels (None: none);
        :data:`facesegment.faces.photo.OWN_LANDMARKS`: found in the crop by
        ``facesegment label``'s passes when the model has a shape prior.
    terms : dict
        ``alpha``, ``beta``, ``sigma`` (:func:`rule_terms`).

    Returns
    -------
    proba : float32 (S, S, C)
        Class probabilities.
    path : str
        The segmentation path ("landmarks" or "landmark-free").
    detection : str
        The pass that found the crop's own landmarks ("" when none ran).
    points : float (68, 2) or None
        The landmarks used.
    """
    proba = predict_image(model, model_image(model, crop), mode="full", **terms)[0]
    how = ""
    if points is OWN_LANDMARKS:
        points = None
        if model_gamma(model) > 0:
            points, how = renderer.predict_landmarks(crop)
    proba, path = apply_model_prior(model, proba, points)
    return proba, path, how, points


def forest_predict_face(model, crop, alpha=None, beta=None, sigma=None):
    """One face crop's class probabilities under a forest or a cascade.

    This is the ``predict_face`` of both (see the module's docstring).

    Parameters
    ----------
    model : Model or Cascade
    crop : uint8 (H, W, 3) RGB
    alpha, beta, sigma : float, optional
        The decision rule's terms; None: the model's.

    Returns
    -------
    float32 (H, W, C)
    """
    return forest_face(model, crop, OWN_LANDMARKS, rule_terms(model, alpha, beta, sigma))[0]


def forest_photo_faces(model, image, detect="auto", detector="landmarks", detect_size=None,
                       alpha=None, beta=None, sigma=None):
    """Every face of a photo under a forest or a cascade (the ``photo_faces`` of both).

    Parameters
    ----------
    model : Model or Cascade
    image : uint8 (H, W, 3) RGB
    detect, detector, detect_size
        As for :func:`facesegment.faces.photo.crop_faces`.
    alpha, beta, sigma : float, optional
        The decision rule's terms; None: the model's.

    Returns
    -------
    list of facesegment.faces.photo.PhotoFace
        Largest first.
    """
    terms = rule_terms(model, alpha, beta, sigma)
    return crop_faces(model, image, lambda crop, pts: forest_face(model, crop, pts, terms),
                      detect, detector, detect_size)


__all__ = ["rule_terms", "forest_face", "forest_predict_face", "forest_photo_faces"]
