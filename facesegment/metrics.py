"""Confusion matrices, per-class and class-average Jaccard, and test-set evaluation.

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
"""

import numpy as np

from .atomic import write_text_atomic
from .classes import CLASS_NAMES, IGNORE, N_CLASSES


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
    """True for pixels at least ``border`` px from every edge (the scored region)."""
    m = np.zeros(shape[:2], dtype=bool)
    h, w = shape[:2]
    if h > 2 * border and w > 2 * border:
        m[border:h - border, border:w - border] = True
    return m


def jaccard(conf):
    """Per-class Jaccard ``100 tp / (tp + fp + fn)`` of a ``(..., C, C)`` confusion.

    Classes with ``tp + fp + fn == 0`` are NaN (see the module docstring).
    """
    conf = np.asarray(conf, dtype=np.float64)
    tp = np.diagonal(conf, axis1=-2, axis2=-1)
    denom = conf.sum(axis=-1) + conf.sum(axis=-2) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 100.0 * tp / np.where(denom > 0, denom, 1), np.nan)


def class_average(jac):
    """Mean Jaccard over the classes that occur (NaN entries excluded).

    Returns NaN when no class occurs (no scored pixels).
    """
    jac = np.asarray(jac, dtype=np.float64)
    n = np.sum(~np.isnan(jac), axis=-1)
    s = np.nansum(jac, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan)


def pixel_accuracy(conf):
    """``100 * trace / total`` of a ``(..., C, C)`` confusion (NaN if empty)."""
    conf = np.asarray(conf, dtype=np.float64)
    tot = conf.sum(axis=(-2, -1))
    tr = np.trace(conf, axis1=-2, axis2=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, 100.0 * tr / np.where(tot > 0, tot, 1), np.nan)


def _num(x):
    x = float(x)
    return None if np.isnan(x) else round(x, 4)


def summarize(conf, class_names=CLASS_NAMES):
    """JSON-ready scores of one ``(C, C)`` confusion matrix."""
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

    ``results`` maps a row name (model) to a :func:`summarize` dict.
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


# ---------------------------------------------------------- evaluating a model

def _evaluate_one(record, model, alphas, n_trees_list, max_depth_list, fft_levels):
    """Task: the sweep confusion matrices of one test image (top level: picklable)."""
    from .datasets import load_face
    from .inference import confusion_sweep

    image, label = load_face(record)
    conf, depths, trees = confusion_sweep(model, image, label, n_trees_list=n_trees_list,
                                          max_depth_list=max_depth_list, alphas=alphas,
                                          mode="strict", fft_levels=fft_levels)
    return record.name, conf, depths, trees


def evaluate_model(model, records, alpha=1.0, sweep_alphas=None, n_trees_list=None,
                   max_depth_list=None, scheduler=None, n_workers=None, progress=True,
                   fft_levels=0, desc="evaluate"):
    """Evaluate a model on labelled faces with the paper's protocol (strict mode).

    Parameters
    ----------
    model : Model
    records : list of facesegment.datasets.FaceRecord
        Labelled test faces.
    alpha : float
        Prior-reweighting exponent of the main result.
    sweep_alphas, n_trees_list, max_depth_list : lists, optional
        Extra settings scored in the same pass (Figure 4, alpha selection).
    scheduler : None or str
        Dask scheduler address (None = local threads).

    Returns
    -------
    dict with ``summary`` (:func:`summarize` of the full forest at ``alpha``),
    ``per_image`` (name -> class-average Jaccard), ``per_image_jaccard``
    (name -> per-class list), ``sweep`` (settings and the class-average
    Jaccard / pixel accuracy of each), and ``confusion_sweep`` (the int64
    array ``(alphas, depths, trees, C, C)``, not JSON).
    """
    from .parallel import map_tasks

    arrays = model.arrays
    alphas = [float(alpha)] + [float(a) for a in (sweep_alphas or []) if float(a) != alpha]
    forest_depth = int(arrays.depth.max()) if arrays.n_nodes else 0
    trees = sorted({int(t) for t in (n_trees_list or [])} | {arrays.n_trees})
    depths = [forest_depth if d is None else min(int(d), forest_depth)
              for d in (max_depth_list or [])]
    depths = sorted(set(depths) | {forest_depth})
    total = None
    per_image, per_image_jac = {}, {}
    ia, ik, it = 0, depths.index(forest_depth), trees.index(arrays.n_trees)
    for _, (name, conf, d_out, t_out) in map_tasks(
            _evaluate_one, records, args=(model, alphas, trees, depths, fft_levels),
            scheduler=scheduler, n_workers=n_workers, desc=desc, unit="images",
            progress=progress):
        total = conf if total is None else total + conf
        jac = jaccard(conf[ia, ik, it])
        per_image[name] = _num(class_average(jac))
        per_image_jac[name] = [_num(v) for v in jac]
    if total is None:
        raise ValueError("records is empty: nothing to evaluate")
    main = summarize(total[ia, ik, it], model.class_names)
    sweep = {
        "alphas": alphas, "max_depth": [int(d) for d in depths],
        "n_trees": [int(t) for t in trees],
        "class_average_jaccard": np.round(class_average(jaccard(total)), 4).tolist(),
        "pixel_accuracy": np.round(pixel_accuracy(total), 4).tolist(),
    }
    return {"kind": model.kind, "alpha": float(alpha), "mode": "strict",
            "n_images": len(per_image), "summary": main,
            "per_image": dict(sorted(per_image.items())),
            "per_image_jaccard": dict(sorted(per_image_jac.items())),
            "sweep": sweep, "confusion_sweep": total}


# ------------------------------------------------------------------ writing

def to_jsonable(obj):
    """Replace NaN by None and numpy scalars/arrays by Python values, recursively."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return None if np.isnan(obj) else float(obj)
    return obj


def write_json_atomic(path, obj):
    """Write ``obj`` as indented JSON (NaN written as null), atomically."""
    import json

    write_text_atomic(path, json.dumps(to_jsonable(obj), indent=1) + "\n")
