"""Confusion matrices, per-class and class-average Jaccard, summaries and tables.

The paper's metric (section 6.2) is the per-class Jaccard index
``100 * tp / (tp + fp + fn)`` from the 8x8 confusion matrix accumulated over all
eligible pixels of all test images (pixels >= 15 px from the border, label not
255), averaged over the 8 classes.

Absent classes: a class with ``tp + fp + fn == 0`` (neither in the ground truth
nor predicted anywhere in the pixels scored) has no defined Jaccard.  It is
reported as NaN (``null`` in JSON) and left out of the class average, which is
then the mean over the classes that occur.  Over the whole test set every class
occurs; the rule matters for per-image scores (e.g. an image whose eyes are not
visible and are not predicted either).  A class that occurs in the ground truth
but is never predicted correctly scores 0 and counts.

Scoring a model on labelled faces (every forest size, depth and alpha in one
pass) is :func:`facesegment.evaluation.scoring.evaluate`; JSON is written with
:func:`facesegment.atomic.write_json_atomic`.
"""

import numpy as np

from ..atomic import write_text_atomic  # noqa: F401  (facesegment/faces/segment.py imports it here)
from ..classes import CLASS_NAMES, IGNORE, N_CLASSES


def confusion_matrix(truth, pred, n_classes=N_CLASSES, mask=None):
    """Confusion matrix ``conf[true, pred]`` (int64 ``(C, C)``).

    Parameters
    ----------
    truth : uint8 array (...)
        Ground-truth ids; pixels with 255 are ignored.
    pred : uint8 array, same shape
        Predicted ids 0..C-1 (pixels with 255 where truth is eligible are an error).
    mask : bool array, optional
        Only pixels where ``mask`` is True are counted.
    """
    truth = np.asarray(truth)
    pred = np.asarray(pred)
    if truth.shape != pred.shape:
        raise ValueError(f"truth has shape {truth.shape} but pred has {pred.shape}; "
                         "they must be label maps of the same image")
    keep = truth != IGNORE
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    t = truth[keep].astype(np.int64)
    p = pred[keep].astype(np.int64)
    if t.size and (t.max() >= n_classes or p.max() >= n_classes or p.min() < 0):
        raise ValueError(f"labels must be 0..{n_classes - 1} (or 255 in truth) at scored "
                         f"pixels; got truth max {t.max()}, pred range {p.min()}..{p.max()}")
    return np.bincount(t * n_classes + p, minlength=n_classes * n_classes).reshape(
        n_classes, n_classes).astype(np.int64)


def border_mask(shape, border=15):
    """The pixels at least ``border`` px from every edge (the scored region).

    Parameters
    ----------
    shape : tuple
        ``(H, W, ...)`` of the image.
    border : int
        Margin, in pixels.

    Returns
    -------
    bool (H, W)
        All False when the image is not larger than ``2 * border`` both ways.
    """
    m = np.zeros(shape[:2], dtype=bool)
    h, w = shape[:2]
    if h > 2 * border and w > 2 * border:
        m[border:h - border, border:w - border] = True
    return m


def jaccard(conf):
    """Per-class Jaccard ``100 tp / (tp + fp + fn)`` of a confusion matrix.

    Classes with ``tp + fp + fn == 0`` are NaN (see the module docstring).

    Parameters
    ----------
    conf : (..., C, C) counts
        Rows: true class; columns: predicted class.

    Returns
    -------
    float64 (..., C)
        Percent.
    """
    conf = np.asarray(conf, dtype=np.float64)
    tp = np.diagonal(conf, axis1=-2, axis2=-1)
    denom = conf.sum(axis=-1) + conf.sum(axis=-2) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 100.0 * tp / np.where(denom > 0, denom, 1), np.nan)


def class_average(jac):
    """Mean Jaccard over the classes that occur (NaN entries excluded).

    Parameters
    ----------
    jac : float (..., C)
        Per-class Jaccard (:func:`jaccard`).

    Returns
    -------
    float64 array of shape (...)
        NaN when no class occurs (no scored pixels); a 0-d array for one
        confusion.
    """
    jac = np.asarray(jac, dtype=np.float64)
    n = np.sum(~np.isnan(jac), axis=-1)
    s = np.nansum(jac, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan)


def pixel_accuracy(conf):
    """``100 * trace / total`` of a confusion matrix.

    Parameters
    ----------
    conf : (..., C, C) counts

    Returns
    -------
    float64 array of shape (...)
        Percent; NaN when the matrix is empty.
    """
    conf = np.asarray(conf, dtype=np.float64)
    tot = conf.sum(axis=(-2, -1))
    tr = np.trace(conf, axis1=-2, axis2=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, 100.0 * tr / np.where(tot > 0, tot, 1), np.nan)


def _num(x):
    x = float(x)
    return None if np.isnan(x) else round(x, 4)


def summarize(conf, class_names=CLASS_NAMES):
    """JSON-ready scores of one confusion matrix.

    Parameters
    ----------
    conf : (C, C) counts
        Rows: true class; columns: predicted class.
    class_names : sequence of str
        The C classes' names.

    Returns
    -------
    dict
        ``class_average_jaccard``, ``pixel_accuracy``, ``jaccard`` (name ->
        value), ``pixels`` and ``confusion`` (nested lists); scores rounded to 4
        decimals, None where undefined.
    """
    conf = np.asarray(conf, dtype=np.int64)
    jac = jaccard(conf)
    return {
        "class_average_jaccard": _num(class_average(jac)),
        "pixel_accuracy": _num(pixel_accuracy(conf)),
        "jaccard": {name: _num(v) for name, v in zip(class_names, jac)},
        "pixels": int(conf.sum()),
        "confusion": conf.tolist(),
    }


def markdown_table(results, title=None):
    """A Markdown table of per-class Jaccard, class average and pixel accuracy.

    Parameters
    ----------
    results : dict of str to dict
        Row name (model) -> :func:`summarize` dict; the columns are the first
        row's classes.
    title : str, optional
        A ``###`` heading above the table.

    Returns
    -------
    str
        Ending in a newline; undefined scores read "n/a".
    """
    names = list(next(iter(results.values()))["jaccard"].keys()) if results else []
    fmt = lambda v: "n/a" if v is None else f"{v:.1f}"  # noqa: E731
    head = ["model"] + list(names) + ["class avg", "pixel acc"]
    lines = [f"### {title}", ""] if title else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row, r in results.items():
        cells = [row] + [fmt(r["jaccard"][n]) for n in names]
        cells += [fmt(r["class_average_jaccard"]), fmt(r["pixel_accuracy"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
