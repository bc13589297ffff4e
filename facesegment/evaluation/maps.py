"""Scores of maps other than a model's plain decision: the position prior alone
(:func:`evaluate_position_only`) and smoothed class maps (:func:`evaluate_smoothed`),
on the pixels :func:`facesegment.evaluation.scoring.evaluate` scores."""

import numpy as np

from ..data.datasets import load_face
from ..data.imageio import read_label
from ..dense import model_layout, predict_image, smooth
from ..layout import DEFAULT_LAYOUT
from ..parallel import map_tasks
from ..position import constant_labels
from ..progress import Progress
from ._common import (_alpha, _beta, _check_common, _score_missed, _summary,
                      scored_label)
from .metrics import confusion_matrix


def _position_one(record, prior, gammas, stride, mode, layout):
    """Task: confusion matrices of the position-only maps of one face."""
    label = scored_label(read_label(record.label), stride, mode, layout)
    missed = bool(getattr(record, "missed", False))   # no face found: all background
    return np.stack([confusion_matrix(
        label, np.zeros_like(label) if missed else constant_labels(prior, label.shape, g),
        prior.n_classes) for g in gammas])


def evaluate_position_only(prior, records, gammas=(0.0,), *, mode="strict", pixel_stride=1,
                           layout=None, desc="position only", progress=True):
    """Scores of the map that uses the position prior alone (no image).

    For each ``gamma`` the map is ``argmax_c pos_c(x) * pi_c**-gamma``
    (:func:`facesegment.position.constant_labels`), scored against the labels of
    ``records`` on the pixels :func:`facesegment.evaluation.scoring.evaluate`
    scores.  A ``missed`` record is all background.

    Parameters
    ----------
    prior : facesegment.position.PositionPrior
    records : list of FaceRecord
        Labelled faces.
    gammas : sequence of float
        Exponents of the class shares, each >= 0.
    mode : str
        Which pixels are scored (as for ``evaluate``).
    pixel_stride : int
        Score every ``pixel_stride``-th pixel.
    layout : facesegment.layout.WindowLayout, optional
        The window layout whose border "strict" leaves out; default 31x31.
    desc : str
        The progress line's label.
    progress : bool
        Progress line on stderr.

    Returns
    -------
    dict
        ``{"gamma": {repr(g): {mean_jaccard, pixel_accuracy, jaccard,
        confusion}}, "n_images", "n_pixels", "pixel_stride"}``.

    Raises
    ------
    ValueError
        ``records`` is empty, or an invalid ``mode``, ``pixel_stride`` or gamma.
    """
    records = list(records)
    if not records:
        raise ValueError("records is empty: give at least one labelled face to score")
    _check_common(mode, pixel_stride, 0, None)
    gammas = [_alpha(g, "gammas") for g in gammas]
    total = None
    with Progress(len(records), desc, "images", enabled=progress) as bar:
        for rec in records:
            conf = _position_one(rec, prior, gammas, int(pixel_stride), mode,
                                 layout or DEFAULT_LAYOUT)
            total = conf if total is None else total + conf
            bar.update(1)
    return {"gamma": {repr(g): _summary(total[i]) for i, g in enumerate(gammas)},
            "n_images": len(records), "n_pixels": int(total[0].sum()),
            "pixel_stride": int(pixel_stride)}


def smoothed_confusions(record, model, alpha, beta, sigmas, stride, mode, *, image=None,
                        label=None, planes=None):
    """Confusion matrices of one face's maps smoothed with each sigma.

    The labels are those ``predict_image(..., sigma=s)`` gives, from one
    prediction, on the pixels :func:`facesegment.evaluation.scoring.evaluate`
    scores.  A ``missed`` record is all background for every sigma.

    Parameters
    ----------
    record : FaceRecord
        A labelled face.
    model : Model or Cascade
    alpha : float
        Reweighting exponent.
    beta : float
        Position-prior exponent.
    sigmas : sequence of float
        Gaussian widths, in pixels (0: no smoothing).
    stride : int
        Score every ``stride``-th pixel.
    mode : str
        Which pixels are scored (as for ``evaluate``).
    image : uint8 (H, W, 3), optional
        The face, already loaded (with ``label``); spares loading it again.
    label : uint8 (H, W), optional
        Its label map, already loaded (with ``image``).
    planes : uint8 (H, W, K), optional
        A cascade's context planes for the image.

    Returns
    -------
    int64 (len(sigmas), C, C)
    """
    if getattr(record, "missed", False):   # no face found: all background, every sigma
        conf = _score_missed(record, model, [alpha], [1], [0], stride, mode)[1]
        return np.repeat(conf[0, 0], len(sigmas), axis=0)
    if image is None or label is None:
        image, label = load_face(record)
    label = scored_label(label, stride, mode, model_layout(model))
    proba, _ = predict_image(model, image, mode="full", alpha=alpha, beta=beta, sigma=0.0,
                             planes=planes)
    out = []
    for s in sigmas:
        pred = np.argmax(smooth(proba, s), axis=-1).astype(np.uint8)
        out.append(confusion_matrix(label, pred, proba.shape[2]))
    return np.stack(out)


def _smoothed_one(record, model, alpha, beta, sigmas, stride, mode):
    """Task: :func:`smoothed_confusions` of one face (top level: picklable)."""
    return smoothed_confusions(record, model, alpha, beta, sigmas, stride, mode)


def smoothed_summary(total, alpha, beta, sigmas, n_images):
    """:func:`evaluate_smoothed`'s result from the summed confusion matrices.

    Parameters
    ----------
    total : int (len(sigmas), C, C)
        Confusion matrices summed over the faces.
    alpha, beta : float
        The decision rule's exponents used.
    sigmas : sequence of float
        The smoothing widths, in the order of ``total``.
    n_images : int
        Faces scored.

    Returns
    -------
    dict
        ``{"sigma": {repr(s): {mean_jaccard, pixel_accuracy, jaccard,
        confusion}}, "alpha", "beta", "n_images", "n_pixels"}``.
    """
    return {"sigma": {repr(s): _summary(total[i]) for i, s in enumerate(sigmas)},
            "alpha": alpha, "beta": beta, "n_images": n_images,
            "n_pixels": int(total[0].sum())}


def evaluate_smoothed(model, records, *, alpha, beta=0.0, sigmas=(0.0,), mode="strict",
                      pixel_stride=1, workers=None, scheduler=None, desc="smoothed",
                      progress=True):
    """Scores of the model's maps smoothed before the argmax.

    For each ``sigma``, every class's reweighted probability map (the whole image
    predicted in "full" mode) is blurred with a Gaussian of ``sigma`` pixels (0:
    none), then the argmax is scored on the pixels
    :func:`facesegment.evaluation.scoring.evaluate` scores.

    Parameters
    ----------
    model : Model or Cascade
    records : list of FaceRecord
        Labelled faces.
    alpha : float
        Reweighting exponent (required).
    beta : float
        Position-prior exponent.
    sigmas : sequence of float
        Gaussian widths, in pixels, each >= 0.
    mode : str
        Which pixels are scored (as for ``evaluate``).
    pixel_stride : int
        Score every ``pixel_stride``-th pixel.
    workers : int, optional
        Local threads (default: all cores).
    scheduler : None, str or distributed.Client
        As for :func:`facesegment.parallel.map_tasks`.
    desc : str
        The progress line's label.
    progress : bool
        Progress line on stderr.

    Returns
    -------
    dict
        ``{"sigma": {repr(s): {mean_jaccard, pixel_accuracy, jaccard,
        confusion}}, "alpha", "beta", "n_images", "n_pixels"}``.

    Raises
    ------
    ValueError
        ``records`` is empty, or an invalid ``mode``, ``pixel_stride``,
        ``workers``, alpha, beta or sigma.
    """
    records = list(records)
    if not records:
        raise ValueError("records is empty: give at least one labelled face to score")
    _check_common(mode, pixel_stride, 0, workers)
    sigmas = [_alpha(s, "sigmas") for s in sigmas]
    alpha, beta = _alpha(alpha, "alpha"), _beta(model, beta)
    total = None
    for _, conf in map_tasks(_smoothed_one, records,
                             args=(model, alpha, beta, sigmas, int(pixel_stride), mode),
                             scheduler=scheduler, n_workers=workers, desc=desc,
                             unit="images", progress=progress):
        total = conf if total is None else total + conf
    return smoothed_summary(total, alpha, beta, sigmas, len(records))


__all__ = ["evaluate_position_only", "evaluate_smoothed", "smoothed_confusions",
           "smoothed_summary"]
