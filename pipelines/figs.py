"""The run's figures, drawn with facesegment.figures from the evaluation files.

Figure 4 (class-average Jaccard vs number of trees, and vs maximum depth at 16
trees) and the confusion matrices come straight from ``eval-<kind>.json`` (the
evaluation pass already scored every forest size and depth); Figure 3 needs
the predictions of a few test faces, which are recomputed here.
"""

import os

from . import backend
from .config import KINDS
from .stamps import write_json_atomic


def curves(ev, depth_trees=16):
    """``(trees, jaccard)`` at full depth and ``(depths, jaccard)`` at ``depth_trees``
    trees, both at the evaluation's selected alpha (the sweep's first alpha)."""
    sw = ev["sweep"]
    cav = sw["class_average_jaccard"][0]           # (depths, trees) at alpha[0]
    depths, trees = sw["max_depth"], sw["n_trees"]
    kmax = len(depths) - 1
    n = min(depth_trees, trees[-1])
    j = trees.index(n) if n in trees else len(trees) - 1
    return ((trees, [cav[kmax][i] for i in range(len(trees))]),
            (depths, [cav[k][j] for k in range(len(depths))]), trees[j])


def make_run_figures(model_dirs, evals, records, out_dir, n_random=5, seed=0, mode="strict"):
    """Write figure3.png, figure4.png, confusion_<kind>.png and figures.json.

    Parameters
    ----------
    model_dirs : dict kind -> model folder (the largest forest)
    evals : dict kind -> the eval-<kind>.json contents
    records : list of FaceRecord (the test faces the evaluation used)
    out_dir : path

    Returns
    -------
    list of written paths
    """
    from facesegment import figures
    from facesegment.inference import predict_image

    kinds = [k for k in KINDS if k in evals]
    out_dir = os.fspath(out_dir)
    written = []
    tree_c, depth_c, depth_n = {}, {}, None
    for k in kinds:
        tree_c[k], depth_c[k], depth_n = curves(evals[k])
        n = max(int(t) for t in evals[k]["trees"])
        a = evals[k]["alpha"]
        s = evals[k]["trees"][str(n)]["alpha"][repr(float(a))]
        written.append(figures.confusion_figure(
            s["confusion"], os.path.join(out_dir, f"confusion_{k}.png"),
            f"{k}, {n} trees, alpha={a:g}: class-average Jaccard {s['mean_jaccard']:.2f}"))
    written.append(figures.figure4(tree_c, depth_c, os.path.join(out_dir, "figure4.png"),
                                   depth_n))
    per_image = {k: evals[k]["per_image"] for k in kinds}
    models = {k: backend.load_model(model_dirs[k]) for k in kinds}
    by_name = {r.name: r for r in records}
    rows = []
    for name, reason in figures.pick_examples(per_image, n_random, seed):
        image, truth = backend.load_face(by_name[name])
        preds = {k: predict_image(models[k], image, mode=mode, alpha=evals[k]["alpha"])[1]
                 for k in kinds}
        rows.append({"title": f"{name}\n{reason}", "image": image, "truth": truth,
                     "preds": preds, "scores": {k: per_image[k].get(name) for k in kinds}})
    if rows:
        written.append(figures.figure3(rows, os.path.join(out_dir, "figure3.png"), kinds))
    js = os.path.join(out_dir, "figures.json")
    write_json_atomic(js, {"trees": tree_c, "depth": depth_c, "depth_trees": depth_n,
                           "figure3_rows": [r["title"] for r in rows],
                           "alphas": {k: evals[k]["alpha"] for k in kinds}})
    return [str(w) for w in written] + [js]
