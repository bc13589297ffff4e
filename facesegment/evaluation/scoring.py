"""Scoring a model on labelled faces: the one evaluation driver.

:func:`evaluate` makes one pass per image (``facesegment.dense.
confusion_sweep``, which walks each tree once per pixel and forms every
truncated forest by cumulative sums) and returns the confusion matrices and
Jaccard scores of every (alpha, maximum depth, number of trees) setting asked
for.  The first ``m`` trees of an ``n``-tree forest are exactly an ``m``-tree
forest with the same seed (trees are independent and seeded up front), the
alpha grid of the prior reweighting costs no extra inference, and Figure 4
(Jaccard vs trees and vs depth) comes from the same pass.  Images are Dask
tasks (``facesegment.parallel.map_tasks``: local threads or a cluster).

``facesegment evaluate``, ``facesegment figures`` and the pipeline's select,
train (alpha), evaluate and figures stages all score through it.
:func:`choose_alpha` picks the reweighting exponent (and the position prior's
beta, every beta from the same pass: :func:`evaluate_betas`) on validation
images; :mod:`facesegment.evaluation.timing` times ``predict_image`` per image.
"""

import numpy as np

# the shared checks and label helpers (re-exported: other modules import them from here)
from ..data.datasets import load_face
from ..dense import confusion_sweep
from ..parallel import map_tasks
from ._common import (MODES, _alpha, _alphas, _arrays, _beta, _check_common,  # noqa: F401
                      _depth_list, _int, _num, _score_missed, _summary, _tree_list,
                      grid_label, scored_label)
from .maps import smoothed_confusions, smoothed_summary
from .metrics import class_average, jaccard, pixel_accuracy, summarize


def _score_one(record, model, alphas, trees, depths, stride, fft_levels, mode, beta=0.0,
               betas=None, smoothed=None):
    """Task: the sweep confusion matrices of one face (top level: picklable); with
    ``betas``, every (beta, alpha) from one pass (rows beta-major); with
    ``smoothed`` ``(alpha, beta, sigmas)``, also the confusion matrices of the
    face's whole map smoothed with each sigma (:func:`maps.smoothed_confusions`),
    the earlier stages of a cascade run once for both."""
    if getattr(record, "missed", False):
        name, conf, d_out, t_out = _score_missed(record, model, alphas, trees, depths,
                                                 stride, mode)
        conf = conf if betas is None else np.tile(conf, (len(betas), 1, 1, 1, 1))
        if smoothed is not None:
            return name, conf, d_out, t_out, smoothed_confusions(
                record, model, *smoothed, stride, mode)
        return name, conf, d_out, t_out
    image, label = load_face(record)
    planes = model.context(image)   # a cascade's earlier stages, once (None: a forest)
    conf, d_out, t_out = confusion_sweep(model, image, grid_label(label, stride),
                                         n_trees_list=trees, max_depth_list=depths,
                                         alphas=alphas, mode=mode, fft_levels=fft_levels,
                                         beta=beta, betas=betas, planes=planes)
    out = (record.name, conf, [int(d) for d in d_out], [int(t) for t in t_out])
    if smoothed is not None:
        out += (smoothed_confusions(record, model, *smoothed, stride, mode, image=image,
                                    label=label, planes=planes),)
    return out


def evaluate(model, records, *, alphas, tree_counts=None, depths=None, mode="strict",
             pixel_stride=1, per_image_alpha=None, sweep_trees=None, fft_levels=0,
             beta=None, extra_rules=None, smoothed=None, workers=None, scheduler=None,
             desc="evaluate", progress=True):
    """Scores of ``model`` on ``records`` for several forest sizes, depths and alphas.

    Parameters
    ----------
    model : facesegment.modelio.model.Model
    records : list of facesegment.data.datasets.FaceRecord (labelled)
        A record with ``missed=True`` (no face found by the detector, see
        :mod:`facesegment.faces.aligned`) is scored as predicted all background.
    alphas : list of float
        Prior-reweighting exponents (``p * s**-alpha``), all scored in one pass.
    tree_counts : list of int, optional
        Forest sizes reported in full under ``trees`` (prefixes of the model's
        trees, 1..n_trees); default: the whole forest.
    depths : list of int or None, optional
        Extra depth limits scored in the same pass (Figure 4); limits above the
        forest's depth (and None) mean its full depth.
    mode : {"strict", "full"}
        ``"strict"`` (the paper's protocol) leaves the 15-px border unscored;
        ``"full"`` scores every pixel, border windows padded by reflection.
    pixel_stride : int
        Score the pixels of a ``stride`` x ``stride`` grid only (1 = every
        pixel, the paper's protocol); label 255 is never scored.
    per_image_alpha : float, optional
        The alpha of the per-image scores and the sweep's first alpha
        (default: the first of ``alphas``).
    sweep_trees : list of int, optional
        Extra forest sizes (1..n_trees) scored in the same pass (``sweep`` only).
    fft_levels : int
        CO2: top oblique levels evaluated by FFT correlation.
    beta : float, optional
        Exponent of the model's position prior, applied with every alpha
        (default: the model's selected one, 0 without a prior; give 0 to
        score the forest alone).
    extra_rules : list of (alpha, beta), optional
        More decision rules scored from the same pass over the images (each
        face's forest sums are formed once): each gives what
        ``evaluate(..., alphas=[alpha], beta=beta)`` gives for ``trees``,
        ``per_image``, ``per_image_jaccard`` and ``n_pixels``, in the list
        ``extra_rules`` of the result (with its ``alpha`` and ``beta``).
    smoothed : (alpha, beta, sigmas), optional
        Also score each face's whole map smoothed before the argmax, from the
        same task (a cascade's earlier stages run once per face for both):
        ``result["smoothed"]`` is what :func:`facesegment.evaluation.maps.evaluate_smoothed`
        returns for these arguments.
    workers, scheduler :
        Local threads (None: all cores) or a Dask ``distributed`` scheduler.

    Returns
    -------
    dict (JSON-ready)
        ``trees``: ``{"16": {"alpha": {"0.5": {mean_jaccard, pixel_accuracy,
        jaccard (8,), confusion}}}}`` at the forest's full depth;
        ``sweep``: ``alphas``, ``max_depth``, ``n_trees`` and the class-average
        Jaccard / pixel accuracy of every (alpha, depth, trees);
        ``per_image`` / ``per_image_jaccard``: name -> class-average / per-class
        Jaccard at ``per_image_alpha`` and the whole forest; ``n_images``,
        ``n_pixels``, ``pixel_stride``, ``per_image_alpha``.

    Raises
    ------
    ValueError, TypeError
        Naming the parameter and the value (e.g. a forest size above the
        model's number of trees), before any work.
    """
    arrays = _arrays(model)
    records = list(records)
    if not records:
        raise ValueError("records is empty: give at least one labelled face to score")
    _check_common(mode, pixel_stride, fft_levels, workers)
    pa, alphas = _alphas(alphas, per_image_alpha)
    beta = _beta(model, beta)
    n_all = arrays.n_trees
    counts = sorted(_tree_list(tree_counts, "tree_counts", n_all) or {n_all})
    trees = sorted(set(counts) | _tree_list(sweep_trees, "sweep_trees", n_all) | {n_all})
    forest_depth = int(arrays.depth.max()) if arrays.n_nodes else 0
    dl = sorted(_depth_list(depths, forest_depth) | {forest_depth})
    extras = [(_alpha(a, "extra_rules alpha"), _beta(model, b)) for a, b in extra_rules or ()]
    grid_a = alphas + sorted({a for a, _ in extras} - set(alphas))
    grid_b = [beta] + sorted({b for _, b in extras} - {beta})
    rows = [0] + [grid_b.index(b) * len(grid_a) + grid_a.index(a) for a, b in extras]
    total, per_image, per_image_jac = None, [{} for _ in rows], [{} for _ in rows]
    smooth_args, smooth_total = _smoothed_args(model, smoothed), None
    for _, (name, conf, d_out, t_out, *sm) in map_tasks(
            _score_one, records, args=(model, grid_a, trees, dl, int(pixel_stride),
                                       int(fft_levels), mode, beta,
                                       grid_b if extras else None, smooth_args),
            scheduler=scheduler, n_workers=workers, desc=desc, unit="images",
            progress=progress):
        total = conf if total is None else total + conf
        if sm:
            smooth_total = sm[0] if smooth_total is None else smooth_total + sm[0]
        for r, row in enumerate(rows):
            jac = jaccard(conf[row, -1, -1])
            per_image[r][name] = _num(class_average(jac))
            per_image_jac[r][name] = [_num(v) for v in jac]
    main = total[:len(alphas)]    # beta's rows, the main alphas first
    sweep = {"alphas": alphas, "max_depth": d_out, "n_trees": t_out,
             "class_average_jaccard": np.round(class_average(jaccard(main)), 4).tolist(),
             "pixel_accuracy": np.round(pixel_accuracy(main), 4).tolist()}
    out = {"trees": _tree_table(total, counts, t_out, alphas, range(len(alphas))),
           "n_images": len(per_image[0]), "per_image_alpha": pa, "beta": beta,
           "n_pixels": int(total[0, 0, 0].sum()), "pixel_stride": int(pixel_stride),
           "per_image": dict(sorted(per_image[0].items())),
           "per_image_jaccard": dict(sorted(per_image_jac[0].items())), "sweep": sweep}
    if extra_rules is not None:
        out["extra_rules"] = [
            {"alpha": a, "beta": b, "trees": _tree_table(total, counts, t_out, [a], [row]),
             "per_image": dict(sorted(per_image[r].items())),
             "per_image_jaccard": dict(sorted(per_image_jac[r].items())),
             "n_pixels": out["n_pixels"]}
            for r, ((a, b), row) in enumerate(zip(extras, rows[1:]), start=1)]
    if smooth_args is not None:
        out["smoothed"] = smoothed_summary(smooth_total, *smooth_args, len(records))
    return out


def _smoothed_args(model, smoothed):
    """Validated ``(alpha, beta, sigmas)`` of ``evaluate(..., smoothed=...)``, or None."""
    if smoothed is None:
        return None
    if not isinstance(smoothed, (tuple, list)) or len(smoothed) != 3:
        raise ValueError(f"smoothed must be (alpha, beta, sigmas), got {smoothed!r}")
    alpha, beta, sigmas = smoothed
    sigmas = [_alpha(v, "smoothed sigmas") for v in sigmas]
    if not sigmas:
        raise ValueError("smoothed sigmas is empty: give at least one sigma (0 = none)")
    return _alpha(alpha, "smoothed alpha"), _beta(model, beta), sigmas


def _tree_table(total, counts, t_out, alphas, rows):
    """``evaluate``'s ``trees``: the confusion summaries of rows ``rows`` (one per
    alpha) of ``total`` at the forest sizes ``counts`` and full depth."""
    return {str(n): {"alpha": {repr(a): _summary(total[i, -1, t_out.index(n)])
                               for i, a in zip(rows, alphas)}}
            for n in counts}


def full_summary(result, class_names, n_trees=None, alpha=None):
    """:func:`facesegment.evaluation.metrics.summarize` of one forest size and alpha of a result.

    Parameters
    ----------
    result : dict
        An :func:`evaluate` result.
    class_names : sequence of str
        The classes' names.
    n_trees : int, optional
        Forest size; default: the largest the result scored.
    alpha : float, optional
        Reweighting exponent; default: the result's ``per_image_alpha``.

    Returns
    -------
    dict
        :func:`facesegment.evaluation.metrics.summarize`'s.

    Raises
    ------
    KeyError
        The result did not score that forest size or alpha.
    """
    n = max(map(int, result["trees"])) if n_trees is None else int(n_trees)
    a = result["per_image_alpha"] if alpha is None else float(alpha)
    return summarize(result["trees"][str(n)]["alpha"][repr(float(a))]["confusion"],
                     class_names)


# ----------------------------------------------------------------- alpha

def best_alpha(result, n_trees):
    """The alpha with the highest class-average Jaccard at ``n_trees`` in a result.

    Ties go to the smaller alpha; an undefined score counts as -1.

    Parameters
    ----------
    result : dict
        An :func:`evaluate` (or :func:`evaluate_betas`) result.
    n_trees : int
        A forest size it scored.

    Returns
    -------
    str
        The alpha's key (``repr`` of the float).
    """
    table = result["trees"][str(n_trees)]["alpha"]

    def key(a):
        """Sort key of an alpha: its class-average Jaccard (None: -1), then minus alpha.

        Parameters
        ----------
        a : str
            An alpha key of the table.

        Returns
        -------
        (float, float)
        """
        v = table[a]["mean_jaccard"]
        return (-1.0 if v is None else v, -float(a))
    return max(table, key=key)


def choose_alpha(model, records, alphas, *, betas=None, n_trees=None, mode="strict",
                 pixel_stride=1, workers=None, scheduler=None, desc="alpha", progress=True):
    """The reweighting exponent(s) that score best on ``records`` (validation faces).

    Scores the first ``n_trees`` trees at every alpha and every position-prior
    exponent of ``betas`` from one pass per face (:func:`evaluate_betas`: each
    beta's scores are :func:`evaluate`'s) and keeps the best class-average
    Jaccard (ties: the smaller beta, then the smaller alpha).

    Parameters
    ----------
    model : Model or Cascade
    records : list of FaceRecord
        Labelled validation faces.
    alphas : sequence of float
        Reweighting exponents tried.
    betas : sequence of float, optional
        Position-prior exponents tried; default ``[0]`` (no position prior;
        other values need ``model.position``).
    n_trees : int, optional
        Forest size scored; default: all trees.
    mode : str
        Which pixels are scored (as for :func:`evaluate`).
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
    dict (JSON-ready)
        ``{"alpha": float, "beta": float, "n_images": int, "n_trees": int,
        "validation_jaccard": {repr(alpha): class-average Jaccard} (at the
        chosen beta)}``, plus ``"validation_jaccard_beta": {repr(beta):
        {repr(alpha): ...}}`` when several betas were tried.

    Raises
    ------
    ValueError
        ``betas`` is empty, or invalid records, alphas, betas or options (as
        for :func:`evaluate_betas`).
    """
    n = _arrays(model).n_trees if n_trees is None else n_trees
    betas = [0.0] if betas is None else [_beta(model, b) for b in betas]
    if not betas:
        raise ValueError("betas is empty: give at least one position-prior exponent, e.g. [0]")
    betas = sorted(set(betas))
    results = evaluate_betas(model, records, alphas=alphas, betas=betas, n_trees=n, mode=mode,
                             pixel_stride=pixel_stride, workers=workers, scheduler=scheduler,
                             desc=desc if betas == [0.0] else f"{desc} betas", progress=progress)
    tables, best = {}, None
    for b, r in zip(betas, results):
        tables[repr(b)] = {a: v["mean_jaccard"] for a, v in r["trees"][str(n)]["alpha"].items()}
        a = best_alpha(r, n)
        score = tables[repr(b)][a]
        score = -1.0 if score is None else score
        if best is None or score > best[0]:
            best = (score, b, a, r["n_images"])
    _, b, a, n_images = best
    out = {"alpha": float(a), "beta": float(b), "n_images": n_images, "n_trees": int(n),
           "validation_jaccard": tables[repr(b)]}
    if len(tables) > 1:
        out["validation_jaccard_beta"] = tables
    return out


def evaluate_betas(model, records, *, alphas, betas, n_trees=None, mode="strict",
                   pixel_stride=1, workers=None, scheduler=None, desc="betas", progress=True):
    """:func:`evaluate`'s ``trees`` scores for each position-prior exponent, in one pass.

    The first ``n_trees`` trees are scored at every alpha for each beta: the
    forest's sums are formed once per image and every (beta, alpha) applied to
    them (``confusion_sweep(..., betas=...)``), so each beta's scores equal
    ``evaluate(..., tree_counts=[n_trees], beta=beta)``'s.

    Parameters
    ----------
    model : Model or Cascade
    records : list of FaceRecord
        Labelled faces.
    alphas : sequence of float
        Reweighting exponents.
    betas : sequence of float
        Position-prior exponents (values other than 0 need ``model.position``).
    n_trees : int, optional
        Forest size scored; default: all trees.
    mode : str
        Which pixels are scored (as for :func:`evaluate`).
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
    list of dict
        One per beta, in order: ``{"trees": {str(n_trees): {"alpha":
        {repr(alpha): {mean_jaccard, pixel_accuracy, jaccard, confusion}}}},
        "n_images", "beta", "per_image_alpha"}``.

    Raises
    ------
    ValueError
        ``records`` or ``betas`` is empty, or an invalid alpha, beta, tree
        count, ``mode``, ``pixel_stride`` or ``workers``.
    """
    arrays = _arrays(model)
    records = list(records)
    if not records:
        raise ValueError("records is empty: give at least one labelled face to score")
    _check_common(mode, pixel_stride, 0, workers)
    pa, alphas = _alphas(alphas, None)
    betas = [_beta(model, b) for b in betas]
    if not betas:
        raise ValueError("betas is empty: give at least one position-prior exponent, e.g. [0]")
    n_all = arrays.n_trees
    n = n_all if n_trees is None else min(_tree_list([n_trees], "n_trees", n_all))
    trees = sorted({n, n_all})
    forest_depth = int(arrays.depth.max()) if arrays.n_nodes else 0
    total, names = None, set()
    for _, (name, conf, _, t_out) in map_tasks(
            _score_one, records, args=(model, alphas, trees, [forest_depth],
                                       int(pixel_stride), 0, mode, 0.0, betas),
            scheduler=scheduler, n_workers=workers, desc=desc, unit="images",
            progress=progress):
        total = conf if total is None else total + conf
        names.add(name)
    j, k = t_out.index(n), len(alphas)
    return [{"trees": {str(n): {"alpha": {repr(a): _summary(total[i * k + q, -1, j])
                                          for q, a in enumerate(alphas)}}},
             "n_images": len(names), "beta": b, "per_image_alpha": pa}
            for i, b in enumerate(betas)]


__all__ = ["MODES", "evaluate", "evaluate_betas", "full_summary", "best_alpha", "choose_alpha",
           "grid_label", "scored_label"]
