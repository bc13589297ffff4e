"""The paper's Figure 3 (example segmentations) and Figure 4 (Jaccard vs trees
and vs depth), and confusion matrices, drawn with matplotlib's Agg backend.

The drawing functions take plain results (label maps, curves, matrices) and
write one PNG each, atomically.  :func:`make_figures` evaluates models on test
faces in one pass per model (every number of trees and every depth at once,
see :func:`facesegment.inference.confusion_sweep`) and draws everything.
"""

import os

import numpy as np

from .atomic import atomic_path
from .classes import CLASS_COLORS, CLASS_NAMES, IGNORE, N_CLASSES

IGNORE_COLOR = (128, 128, 128)


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path, dpi=100):
    """Save a matplotlib figure as PNG atomically (temporary name, then rename)."""
    plt = _plt()
    path = os.fspath(path)
    try:
        with atomic_path(path, suffix=".png", what="figure") as tmp:
            fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def colorize(labels):
    """RGB uint8 image of a label map (255/ignore drawn grey)."""
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


def figure3(rows, path, kinds, class_names=CLASS_NAMES):
    """Figure 3: input | ground truth | one prediction per method, per row.

    Parameters
    ----------
    rows : list of dict
        ``{"title": str, "image": (H,W,3) uint8, "truth": (H,W) uint8,
        "preds": {kind: (H,W) uint8}, "scores": {kind: float or None}}``.
    path : str
    kinds : list of str
        Column order of the methods.
    """
    plt = _plt()
    n_cols = 2 + len(kinds)
    fig, axes = plt.subplots(len(rows), n_cols, figsize=(2.0 * n_cols, 2.1 * len(rows) + 0.5),
                             squeeze=False)
    for r, row in enumerate(rows):
        panels = [(row["image"], "input"), (colorize(row["truth"]), "ground truth")]
        for k in kinds:
            s = row["scores"].get(k)
            panels.append((colorize(row["preds"][k]),
                           f"{k}" + ("" if s is None else f" ({s:.1f})")))
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


def figure4(tree_curves, depth_curves, path, depth_trees=16):
    """Figure 4: class-average Jaccard vs number of trees, and vs maximum depth.

    Parameters
    ----------
    tree_curves : dict kind -> (n_trees list, jaccard list)
    depth_curves : dict kind -> (depth list, jaccard list)
    """
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for kind, (x, y) in tree_curves.items():
        a1.plot(x, y, marker="o", ms=3, label=kind)
    a1.set_xlabel("number of trees")
    a1.set_ylabel("class-average Jaccard (%)")
    a1.set_xscale("log", base=2)
    a1.set_title("Jaccard vs number of trees")
    for kind, (x, y) in depth_curves.items():
        a2.plot(x, y, marker="o", ms=3, label=kind)
    a2.set_xlabel("maximum depth")
    a2.set_title(f"Jaccard vs depth ({depth_trees} trees)" if not isinstance(depth_trees, str)
                 else f"Jaccard vs depth ({depth_trees})")
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
        ax.legend()
    return save_figure(fig, path)


def confusion_figure(conf, path, title="", class_names=CLASS_NAMES):
    """Row-normalised confusion matrix (% of each true class) with counts."""
    plt = _plt()
    conf = np.asarray(conf, dtype=np.float64)
    rows = conf.sum(axis=1, keepdims=True)
    pct = np.divide(100 * conf, rows, out=np.zeros_like(conf), where=rows > 0)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
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


def make_figures(models, records, out_dir, alpha=None, n_random=3, seed=0,
                 depth_trees=16, scheduler=None, n_workers=None, progress=True):
    """Evaluate models on test faces and write Figure 3, Figure 4 and confusion PNGs.

    Parameters
    ----------
    models : dict name -> Model
        Typically one model per kind (axis, two-probe, co2) with 32 trees.
    records : list of FaceRecord
        Labelled test faces.
    out_dir : path
        Receives ``figure3.png``, ``figure4.png``, ``confusion_NAME.png`` and
        ``figures.json`` (the curves and per-image scores).
    alpha : float, optional
        Reweighting exponent (default: each model's selected alpha, else 1).
    depth_trees : int
        Number of trees of the Jaccard-vs-depth curve (the paper: 16).

    Returns
    -------
    dict of the written paths and the numbers drawn.
    """
    from .datasets import load_face
    from .inference import default_alpha, predict_image
    from .metrics import class_average, evaluate_model, jaccard, write_json_atomic

    out_dir = os.fspath(out_dir)
    tree_curves, depth_curves, per_image, written, alphas = {}, {}, {}, [], {}
    for name, model in models.items():
        a = default_alpha(model) if alpha is None else float(alpha)
        alphas[name] = a
        n = model.arrays.n_trees
        dmax = int(model.arrays.depth.max())
        res = evaluate_model(model, records, alpha=a, n_trees_list=list(range(1, n + 1)),
                             max_depth_list=list(range(1, dmax + 1)), scheduler=scheduler,
                             n_workers=n_workers, progress=progress, desc=f"figures {name}")
        conf = res["confusion_sweep"][0]  # (depths, trees, C, C)
        depths, trees = res["sweep"]["max_depth"], res["sweep"]["n_trees"]
        cav = class_average(jaccard(conf))
        tree_curves[name] = (trees, cav[depths.index(dmax)].tolist())
        jt = trees.index(min(depth_trees, n)) if min(depth_trees, n) in trees else -1
        depth_curves[name] = (depths, cav[:, jt].tolist())
        per_image[name] = res["per_image"]
        written.append(confusion_figure(
            conf[depths.index(dmax), trees.index(n)],
            os.path.join(out_dir, f"confusion_{name}.png"),
            f"{name} ({model.kind}, {n} trees, alpha={a:g}): class-average Jaccard "
            f"{res['summary']['class_average_jaccard']}", model.class_names))
    used = sorted({min(depth_trees, m.arrays.n_trees) for m in models.values()})
    written.append(figure4(tree_curves, depth_curves, os.path.join(out_dir, "figure4.png"),
                           used[0] if len(used) == 1 else
                           "/".join(map(str, used)) + " trees"))
    by_name = {r.name: r for r in records}
    rows = []
    for ex, reason in pick_examples(per_image, n_random, seed):
        image, truth = load_face(by_name[ex])
        preds = {k: predict_image(m, image, mode="strict", alpha=alphas[k])[1]
                 for k, m in models.items()}
        scores = {}
        for k in models:
            from .metrics import confusion_matrix

            truth_s = np.where(preds[k] == IGNORE, IGNORE, truth).astype(np.uint8)
            scores[k] = float(class_average(jaccard(confusion_matrix(
                truth_s, np.where(preds[k] == IGNORE, 0, preds[k])))))
        rows.append({"title": f"{ex}\n{reason}", "image": image, "truth": truth,
                     "preds": preds, "scores": scores})
    if rows:
        written.append(figure3(rows, os.path.join(out_dir, "figure3.png"), list(models)))
    numbers = {"alphas": alphas, "trees": tree_curves, "depth": depth_curves,
               "depth_trees": depth_trees, "per_image": per_image,
               "figure3_rows": [r["title"] for r in rows]}
    write_json_atomic(os.path.join(out_dir, "figures.json"), numbers)
    return {"written": written, **numbers}
