"""The paper's Figure 3 (example segmentations) and Figure 4 (Jaccard vs trees
and vs depth), and confusion matrices, drawn with matplotlib's Agg renderer.

Figures are ``matplotlib.figure.Figure`` objects made by :func:`subplots`,
never through ``pyplot``: importing or using this module leaves the caller's
matplotlib backend and pyplot's figures alone.

The drawing functions take plain results (label maps, curves, matrices) and
write one PNG each, atomically.  :func:`make_figures` is the one driver (the
``facesegment figures`` command and the pipeline's figures stage): it takes
each model's :func:`facesegment.evaluation.scoring.evaluate` result (the pipeline's
``eval-<kind>.json``) or makes it, in one pass per model (every number of
trees and every depth at once), and draws everything.
"""

import os
import textwrap

import numpy as np

from ..atomic import atomic_path, write_json_atomic
from ..classes import CLASS_COLORS, CLASS_NAMES, N_CLASSES
from ..data.datasets import load_face
from ..dense import default_alpha, predict_image
from ..extras import require
from .scoring import evaluate

IGNORE_COLOR = (128, 128, 128)


def subplots(nrows=1, ncols=1, *, figsize=None, **kwargs):
    """``(figure, axes)`` like ``pyplot.subplots``, on a figure of its own.

    The figure has an Agg canvas that no backend or pyplot state knows of.

    Parameters
    ----------
    nrows, ncols : int
        The grid of axes.
    figsize : (float, float), optional
        Inches.
    **kwargs
        Passed to :meth:`matplotlib.figure.Figure.subplots` (e.g. ``squeeze``).

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : Axes or array of Axes

    Raises
    ------
    FaceSegmentError
        matplotlib is not installed (:func:`facesegment.extras.require`).
    """
    require("matplotlib", "drawing figures")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def save_figure(fig, path, dpi=100):
    """Save a matplotlib figure as PNG atomically (temporary name, then rename).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or path-like
    dpi : int

    Returns
    -------
    str
        ``path``.
    """
    path = os.fspath(path)
    with atomic_path(path, suffix=".png", what="figure") as tmp:
        fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight")
    return path


def colorize(labels):
    """RGB image of a label map in the class colours.

    Parameters
    ----------
    labels : int array (H, W)
        Class ids; ids >= ``N_CLASSES`` (255: ignore) are drawn grey.

    Returns
    -------
    uint8 (H, W, 3)
    """
    labels = np.asarray(labels)
    out = np.empty(labels.shape + (3,), dtype=np.uint8)
    out[:] = IGNORE_COLOR
    ok = labels < N_CLASSES
    out[ok] = CLASS_COLORS[labels[ok]]
    return out


def _legend(fig, class_names=CLASS_NAMES):
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=np.asarray(c) / 255, edgecolor="k", label=n)
               for c, n in zip(CLASS_COLORS, class_names)]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8,
               frameon=False)


def figure3(rows, path, kinds, class_names=CLASS_NAMES, labels=None):
    """Figure 3: input | ground truth | one prediction per method, per row.

    Parameters
    ----------
    rows : list of dict
        ``{"title": str, "image": (H,W,3) uint8, "truth": (H,W) uint8,
        "preds": {kind: (H,W) uint8}, "scores": {kind: float or None}}``.
    path : str
    kinds : list of str
        Column order of the methods.
    labels : dict kind -> display name, optional
    """
    labels = labels or {}
    n_cols = 2 + len(kinds)
    fig, axes = subplots(len(rows), n_cols, figsize=(2.0 * n_cols, 2.1 * len(rows) + 0.5),
                         squeeze=False)
    for r, row in enumerate(rows):
        panels = [(row["image"], "input"), (colorize(row["truth"]), "ground truth")]
        for k in kinds:
            s = row["scores"].get(k)
            name = textwrap.fill(str(labels.get(k, k)), 22)
            panels.append((colorize(row["preds"][k]),
                           name + ("" if s is None else f" ({s:.1f})")))
        for c, (img, title) in enumerate(panels):
            ax = axes[r, c]
            ax.imshow(img, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(title, fontsize=8)
            if c == 0:
                ax.set_ylabel(row["title"], fontsize=7)
    _legend(fig, class_names)
    fig.subplots_adjust(bottom=0.08, wspace=0.05, hspace=0.25)
    return save_figure(fig, path)


def figure4(tree_curves, depth_curves, path, depth_trees=16, labels=None):
    """Figure 4: class-average Jaccard vs number of trees, and vs maximum depth.

    Parameters
    ----------
    tree_curves : dict kind -> (n_trees list, jaccard list)
    depth_curves : dict kind -> (depth list, jaccard list)
    depth_trees : int or str
        The forest size of the depth curves (a str such as ``"8/16 trees"``).
    labels : dict kind -> display name (legend), optional
    """
    labels = labels or {}
    fig, (a1, a2) = subplots(1, 2, figsize=(10, 4 + 0.2 * -(-len(tree_curves) // 3)))
    for kind, (x, y) in tree_curves.items():
        a1.plot(x, y, marker="o", ms=3, label=labels.get(kind, kind))
    a1.set_xlabel("number of trees")
    a1.set_ylabel("class-average Jaccard (%)")
    a1.set_xscale("log", base=2)
    a1.set_title("Jaccard vs number of trees")
    for kind, (x, y) in depth_curves.items():
        a2.plot(x, y, marker="o", ms=3, label=labels.get(kind, kind))
    a2.set_xlabel("maximum depth")
    a2.set_title(f"Jaccard vs depth ({depth_trees} trees)" if not isinstance(depth_trees, str)
                 else f"Jaccard vs depth ({depth_trees})")
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
    # one legend below both panels (with 9+ curves, one inside a panel hid them)
    handles, names = a1.get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(3, max(1, len(names))),
               fontsize=8, frameon=False)
    fig.subplots_adjust(bottom=0.12 + 0.045 * -(-len(names) // 3), wspace=0.2)
    return save_figure(fig, path)


def confusion_figure(conf, path, title="", class_names=CLASS_NAMES):
    """Draw a row-normalised confusion matrix (% of each true class).

    Parameters
    ----------
    conf : (C, C) counts
        Rows: true class; columns: predicted class.
    path : str or path-like
        The PNG written (:func:`save_figure`).
    title : str
    class_names : sequence of str
        The C classes' names.

    Returns
    -------
    str
        ``path``.
    """
    conf = np.asarray(conf, dtype=np.float64)
    rows = conf.sum(axis=1, keepdims=True)
    pct = np.divide(100 * conf, rows, out=np.zeros_like(conf), where=rows > 0)
    fig, ax = subplots(figsize=(6.5, 5.5))
    im = ax.imshow(pct, cmap="Blues", vmin=0, vmax=100)
    n = len(class_names)
    ax.set_xticks(range(n), class_names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(n), class_names, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for i in range(n):
        for j in range(n):
            ax.text(j, i, f"{pct[i, j]:.0f}", ha="center", va="center", fontsize=7,
                    color="white" if pct[i, j] > 50 else "black")
    fig.colorbar(im, ax=ax, label="% of true class")
    ax.set_title(title, fontsize=9)
    return save_figure(fig, path)


def pick_examples(per_image, n_random=3, seed=0):
    """Rows of Figure 3: each method's median-Jaccard image, then random ones.

    Parameters
    ----------
    per_image : dict kind -> dict name -> class-average Jaccard (None allowed)

    Returns
    -------
    list of (name, reason); names scored by every method only, no repeats (an
    image that is the median of several methods gets one row naming them all).
    """
    kinds = list(per_image)
    common = sorted(set.intersection(*(set(per_image[k]) for k in kinds))) if kinds else []
    picked = []
    for k in kinds:
        scored = sorted((v, n) for n, v in per_image[k].items() if n in common and v is not None)
        if scored:
            name = scored[(len(scored) - 1) // 2][1]
            names = [p[0] for p in picked]
            if name in names:
                i = names.index(name)
                picked[i] = (name, f"{picked[i][1]}, median {k}")
            else:
                picked.append((name, f"median {k}"))
    rest = [n for n in common if n not in [p[0] for p in picked]]
    rng = np.random.default_rng(seed)
    for i in sorted(rng.choice(len(rest), min(n_random, len(rest)), replace=False)):
        picked.append((rest[int(i)], "random"))
    return picked


def curves(result, depth_trees=16):
    """The curves of Figure 4 from an :func:`facesegment.evaluation.scoring.evaluate` result.

    Both curves are at the result's first sweep alpha (``per_image_alpha``).

    Parameters
    ----------
    result : dict
        An ``evaluate`` result with a ``sweep`` over forest sizes and depths.
    depth_trees : int
        Forest size of the depth curve; when the sweep did not score it (or it is
        larger than the largest size), the largest size scored.

    Returns
    -------
    (trees, jaccard) : tuple of lists
        Class-average Jaccard vs forest size, at full depth.
    (depths, jaccard) : tuple of lists
        Class-average Jaccard vs depth, at ``n`` trees.
    n : int
        The forest size of the depth curve.
    """
    sw = result["sweep"]
    cav = sw["class_average_jaccard"][0]           # (depths, trees) at alphas[0]
    depths, trees = sw["max_depth"], sw["n_trees"]
    kmax = len(depths) - 1
    n = min(depth_trees, trees[-1])
    j = trees.index(n) if n in trees else len(trees) - 1
    return ((trees, [cav[kmax][i] for i in range(len(trees))]),
            (depths, [cav[k][j] for k in range(len(depths))]), trees[j])


def _check_figure_args(models, evaluations, n_random, depth_trees):
    if not isinstance(models, dict) or not models:
        raise TypeError(f"models must be a non-empty dict name -> Model, got {models!r}")
    extra = sorted(set(evaluations) - set(models))
    if extra:
        raise ValueError(f"evaluations has results for {extra} that are not in models "
                         f"({sorted(models)}): give each result under its model's name")
    for name, v, low in (("n_random", n_random, 0), ("depth_trees", depth_trees, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise ValueError(f"{name}={v!r} must be an int >= {low}")


def _evaluation(name, model, records, alpha, kw):
    """``evaluate`` result of one model: every forest size and every depth."""
    a = default_alpha(model) if alpha is None else alpha
    n = model.arrays.n_trees
    dmax = int(model.arrays.depth.max()) if model.arrays.n_nodes else 0
    return evaluate(model, records, alphas=[a], sweep_trees=range(1, n + 1),
                    depths=range(1, dmax + 1), desc=f"figures {name}", **kw)


def _example_rows(models, records, per_image, alphas, betas, n_random, seed, mode):
    """Rows of Figure 3: each model's median face, then ``n_random`` random ones."""
    by_name = {r.name: r for r in records}
    per_image = {k: {n: v for n, v in p.items() if n in by_name} for k, p in per_image.items()}
    rows = []
    for face, reason in pick_examples(per_image, n_random, seed):
        image, truth = load_face(by_name[face])
        preds = {k: predict_image(m, image, mode=mode, alpha=alphas[k], beta=betas[k],
                                  sigma=0.0)[1]
                 for k, m in models.items()}
        rows.append({"title": f"{face}\n{reason}", "image": image, "truth": truth,
                     "preds": preds, "scores": {k: per_image[k].get(face) for k in models}})
    return rows


def make_figures(models, records, out_dir, *, evaluations=None, alpha=None, labels=None,
                 mode="strict", pixel_stride=1, n_random=3, seed=0, depth_trees=16,
                 workers=None, scheduler=None, progress=True):
    """Write Figure 3, Figure 4, one confusion matrix per model and figures.json.

    Parameters
    ----------
    models : dict name -> Model
        The methods, in column order (e.g. one model per forest kind).
    records : list of FaceRecord
        The labelled test faces (those of ``evaluations``, when given).
    out_dir : path
        Receives ``figure3.png``, ``figure4.png``, ``confusion_<name>.png`` and
        ``figures.json`` (the numbers drawn).
    evaluations : dict name -> evaluate() result, optional
        Results already computed (the pipeline's ``eval-<kind>.json``); drawn at
        their ``per_image_alpha``.  Models without one are evaluated here on
        ``records`` (every forest size and depth, one pass).
    alpha : float, optional
        Reweighting exponent of the models evaluated here (default: each
        model's selected alpha, ``facesegment.dense.default_alpha``).
    labels : dict name -> display name, optional
        Legends and titles (default: the names).
    mode, pixel_stride :
        As for :func:`facesegment.evaluation.scoring.evaluate`; ``mode`` is also the
        one of Figure 3's predictions (whole images).
    depth_trees : int
        Forest size of the Jaccard-vs-depth curve (the paper: 16).

    Returns
    -------
    dict: ``written`` (paths) and the numbers of figures.json.
    """
    evaluations = dict(evaluations or {})
    _check_figure_args(models, evaluations, n_random, depth_trees)
    labels = {k: str((labels or {}).get(k, k)) for k in models}
    kw = {"mode": mode, "pixel_stride": pixel_stride, "workers": workers,
          "scheduler": scheduler, "progress": progress}
    out_dir = os.fspath(out_dir)
    tree_c, depth_c, used, alphas, per_image, written = {}, {}, set(), {}, {}, []
    betas = {}
    for name, model in models.items():
        res = evaluations.get(name) or _evaluation(name, model, records, alpha, kw)
        tree_c[name], depth_c[name], n_depth = curves(res, depth_trees)
        used.add(n_depth)
        a = alphas[name] = float(res["per_image_alpha"])
        betas[name] = float(res.get("beta") or 0.0)    # the position prior's, if scored
        per_image[name] = res["per_image"]
        n = max(int(t) for t in res["trees"])
        s = res["trees"][str(n)]["alpha"][repr(a)]
        mj = "n/a" if s["mean_jaccard"] is None else f"{s['mean_jaccard']:.2f}"
        written.append(confusion_figure(
            s["confusion"], os.path.join(out_dir, f"confusion_{name}.png"),
            f"{labels[name]}, {n} trees, alpha={a:g}: class-average Jaccard {mj}",
            model.class_names))
    depth_n = used.pop() if len(used) == 1 else "/".join(map(str, sorted(used))) + " trees"
    written.append(figure4(tree_c, depth_c, os.path.join(out_dir, "figure4.png"), depth_n,
                           labels))
    rows = _example_rows(models, records, per_image, alphas, betas, n_random, seed, mode)
    if rows:
        written.append(figure3(rows, os.path.join(out_dir, "figure3.png"), list(models),
                               labels=labels))
    numbers = {"alphas": alphas, "labels": labels, "trees": tree_c, "depth": depth_c,
               "depth_trees": depth_n, "per_image": per_image,
               "figure3_rows": [r["title"] for r in rows]}
    js = os.path.join(out_dir, "figures.json")
    write_json_atomic(js, numbers)
    return {"written": written + [js], **numbers}
