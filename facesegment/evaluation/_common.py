"""Checks and label helpers shared by the scoring drivers (private): the argument
validation of :func:`facesegment.evaluation.scoring.evaluate` and its siblings,
the pixels a driver scores, the all-background confusion of a missed face and
a confusion matrix's summary.  Lower than ``scoring`` and ``maps``, which both
import it."""

import numpy as np

from ..classes import IGNORE
from ..data.datasets import load_face
from ..dense import model_layout
from ..limits import MAX_PIXEL_STRIDE
from ..reweight import check_alpha, check_beta, strict_region
from ..rule import default_beta
from .metrics import summarize

MODES = ("strict", "full")


# ------------------------------------------------------------- validation

def _int(value, name, low, upper=None, what=""):
    """``value`` as an int in ``low..upper`` (ValueError/TypeError naming it)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < low or (upper is not None and value > upper):
        rng = f">= {low}" if upper is None else f"in {low}..{upper}"
        raise ValueError(f"{name}={value} must be {rng}{what}")
    return int(value)


def _alpha(value, name="alphas"):
    return check_alpha(value, name)


def _alphas(alphas, per_image_alpha):
    """The alphas scored, the per-image alpha first (no repeats)."""
    if alphas is None or isinstance(alphas, (str, bytes)) or not hasattr(alphas, "__iter__"):
        raise TypeError(f"alphas must be a list of numbers, got {alphas!r}")
    vals = [_alpha(a) for a in alphas]
    if not vals:
        raise ValueError("alphas is empty: give at least one reweighting exponent, e.g. [1.0]")
    pa = vals[0] if per_image_alpha is None else _alpha(per_image_alpha, "per_image_alpha")
    out = [pa]
    for a in vals:
        if a not in out:
            out.append(a)
    return pa, out


def _tree_list(values, name, n_trees):
    what = (f" (the forest has {n_trees} trees; give sizes up to {n_trees}, "
            "or train a bigger forest)")
    return {_int(v, name, 1, n_trees, what) for v in (values or ())}


def _depth_list(values, forest_depth):
    """Depth limits clipped to the forest's depth (None: no limit)."""
    return {forest_depth if d is None else min(_int(d, "depths", 0), forest_depth)
            for d in (values or ())}


def _arrays(model):
    arrays = getattr(model, "arrays", None)
    if arrays is None or not hasattr(arrays, "n_trees"):
        raise TypeError(f"model must be a facesegment.modelio.model.Model, got {type(model).__name__} "
                        "(load one with facesegment.models.load_model)")
    return arrays


def _beta(model, beta):
    return default_beta(model) if beta is None else check_beta(model, beta)


def _check_common(mode, pixel_stride, fft_levels, workers):
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} must be one of {', '.join(map(repr, MODES))} "
                         "('strict': the paper's protocol, 15-px border not scored)")

    _int(pixel_stride, "pixel_stride", 1, what=" (1 = every pixel)")
    if pixel_stride > MAX_PIXEL_STRIDE:
        raise ValueError(f"pixel_stride={pixel_stride} must be <= {MAX_PIXEL_STRIDE} "
                         "(a resource limit; 1 = every pixel)")
    _int(fft_levels, "fft_levels", 0, what=" (0 = no FFT levels)")
    if workers is not None:
        _int(workers, "workers", 1, what=" (or None for all cores)")


# --------------------------------------------------------------- scoring

def grid_label(label, stride, offset=0):
    """``label`` with 255 ("not scored") everywhere except a ``stride`` x ``stride`` grid.

    Parameters
    ----------
    label : uint8 (H, W)
        Class ids, 255 = not scored.
    stride : int
        Grid step, in pixels; 1 (or less): ``label`` unchanged.
    offset : int
        The grid's rows and columns are those ``offset mod stride``.

    Returns
    -------
    uint8 (H, W)
        A new array, or ``label`` itself for stride 1.
    """
    if stride <= 1:
        return label
    out = np.full_like(label, 255)
    o = offset % stride
    out[o::stride, o::stride] = label[o::stride, o::stride]
    return out


def scored_label(label, stride, mode, layout):
    """``label`` with 255 ("not scored") outside the pixels the driver scores.

    Those are the ``stride`` grid (:func:`grid_label`) and, in "strict" mode,
    the pixels at least ``layout.half`` px from the border.

    Parameters
    ----------
    label : uint8 (H, W)
        Class ids, 255 = not scored.
    stride : int
        Grid step, in pixels (1: every pixel).
    mode : str
        "strict" keeps only the pixels whose whole window lies inside the image;
        any other mode keeps the border.
    layout : facesegment.layout.WindowLayout
        Gives the window's half side.

    Returns
    -------
    uint8 (H, W)
    """
    label = grid_label(label, stride)
    if mode != "strict":
        return label
    y0, y1, x0, x1 = strict_region(label.shape, layout)
    keep = np.full_like(label, 255)
    keep[y0:y1, x0:x1] = label[y0:y1, x0:x1]
    return keep


def _score_missed(record, model, alphas, trees, depths, stride, mode):
    """The sweep confusion matrices of a face the detector missed
    (``record.missed``, see :mod:`facesegment.faces.aligned`): every pixel predicted
    background (class 0), over the pixels ``mode`` and ``stride`` score, in the
    shape and with the settings :func:`facesegment.dense.confusion_sweep`
    returns (alphas x depths x trees x C x C; depths and trees sorted)."""
    label = scored_label(load_face(record)[1], stride, mode, model_layout(model))
    elig = label != IGNORE
    n_c = int(_arrays(model).n_classes)
    counts = np.bincount(label[elig], minlength=n_c)
    if len(counts) > n_c:
        raise ValueError(f"{record.label}: label ids up to {len(counts) - 1} but the model "
                         f"has {n_c} classes")
    d_out, t_out = sorted({int(d) for d in depths}), sorted({int(t) for t in trees})
    conf = np.zeros((len(alphas), len(d_out), len(t_out), n_c, n_c), dtype=np.int64)
    conf[..., 0] = counts
    return record.name, conf, d_out, t_out


def _summary(conf):
    s = summarize(conf)
    return {"mean_jaccard": s["class_average_jaccard"], "pixel_accuracy": s["pixel_accuracy"],
            "jaccard": list(s["jaccard"].values()), "confusion": s["confusion"]}


def _num(v):
    return None if np.isnan(v) else round(float(v), 4)
