"""Scoring models for selection and evaluation, through facesegment.metrics.

One pass over the images (``facesegment.metrics.evaluate_model``, which walks
each tree once per pixel and forms every truncated forest by cumulative sums)
gives the confusion matrices of every (alpha, maximum depth, number of trees)
setting asked for: the 16-tree scores are those of the first 16 trees of the
32-tree forest (trees are independent and seeded up front, so those are
exactly a 16-tree forest with the same seed), the alpha grid of the prior
reweighting costs no extra inference, and Figure 4 comes from the same pass.
Inference time is measured separately with ``facesegment.inference.
predict_image`` on a few images.
"""

import time

import numpy as np

from . import backend


def _summary(conf):
    from facesegment.metrics import summarize

    s = summarize(conf)
    return {"mean_jaccard": s["class_average_jaccard"], "pixel_accuracy": s["pixel_accuracy"],
            "jaccard": list(s["jaccard"].values()), "confusion": s["confusion"]}


def score_model(model, records, tree_counts, alphas, depths=None, per_image_alpha=None,
                workers=None, scheduler=None, fft_levels=0, desc="evaluate",
                sweep_trees=()):
    """Scores of ``model`` on ``records`` for several forest sizes and alphas.

    Parameters
    ----------
    model : facesegment.model.Model
    records : list of FaceRecord (labelled)
    tree_counts : list of int
        Forest sizes reported in ``trees`` (prefixes of the model's trees).
    alphas : list of float
        Prior-reweighting exponents (``p * s**-alpha``).
    depths : list of int, optional
        Extra depth limits scored in the same pass (Figure 4).
    sweep_trees : list of int, optional
        Extra forest sizes scored in the same pass (in ``sweep`` only).
    per_image_alpha : float, optional
        The alpha of the per-image scores (default: the first of ``alphas``).

    Returns
    -------
    dict (JSON-ready)
        ``trees``: ``{"16": {"alpha": {"0.5": {mean_jaccard, pixel_accuracy,
        jaccard (8,), confusion}}}}`` for the unlimited depth;
        ``sweep``: every (alpha, depth, trees) class-average Jaccard;
        ``per_image``: name -> class-average Jaccard at ``per_image_alpha``
        and the full forest; ``n_images``.
    """
    from facesegment.metrics import evaluate_model

    alphas = [float(a) for a in alphas]
    pa = float(per_image_alpha) if per_image_alpha is not None else alphas[0]
    sweep_alphas = [a for a in alphas if a != pa]
    counts = sorted({int(n) for n in tree_counts})
    n_all = model.arrays.n_trees
    res = evaluate_model(model, records, alpha=pa, sweep_alphas=sweep_alphas,
                         n_trees_list=sorted(set(counts) | {int(t) for t in sweep_trees}
                                             | {n_all}),
                         max_depth_list=depths,
                         scheduler=scheduler, n_workers=workers, progress=True,
                         fft_levels=fft_levels, desc=desc)
    conf = res["confusion_sweep"]            # (alphas, depths, trees, C, C)
    sw = res["sweep"]
    k = len(sw["max_depth"]) - 1              # the unlimited depth is the largest
    out = {"trees": {}, "n_images": res["n_images"], "per_image_alpha": pa,
           "per_image": res["per_image"], "per_image_jaccard": res["per_image_jaccard"],
           "sweep": sw}
    for n in counts:
        j = sw["n_trees"].index(n)
        out["trees"][str(n)] = {"alpha": {repr(a): _summary(conf[i, k, j])
                                          for i, a in enumerate(sw["alphas"])}}
    return out


def time_inference(model, records, tree_counts, mode="full", fft_levels=0):
    """Median and mean milliseconds of ``predict_image`` per image per forest size."""
    from facesegment.inference import predict_image

    out = {}
    images = [backend.load_face(r)[0] for r in records]
    for n in sorted({int(t) for t in tree_counts}):
        times = []
        for img in images:
            t0 = time.perf_counter()
            predict_image(model, img, mode=mode, alpha=1.0, n_trees=n, fft_levels=fft_levels)
            times.append(1000.0 * (time.perf_counter() - t0))
        out[str(n)] = {"ms_per_image": round(float(np.median(times)), 2),
                       "ms_per_image_mean": round(float(np.mean(times)), 2),
                       "n_images": len(images), "mode": mode}
    return out


def best_alpha(result, n_trees):
    """The alpha with the highest class-average Jaccard at ``n_trees`` (ties: smaller)."""
    table = result["trees"][str(n_trees)]["alpha"]

    def key(a):
        v = table[a]["mean_jaccard"]
        return (-1.0 if v is None else v, -float(a))
    return max(table, key=key)
