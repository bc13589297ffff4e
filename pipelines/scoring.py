"""Scoring models for selection and evaluation.

One pass over the images (``facesegment.inference.confusion_sweep``, which walks
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


def grid_label(label, stride, offset=0):
    """``label`` with 255 ("not scored") everywhere except a ``stride`` x ``stride``
    grid of pixels (rows and columns ``offset mod stride``); stride 1: unchanged."""
    if stride <= 1:
        return label
    out = np.full_like(label, 255)
    o = offset % stride
    out[o::stride, o::stride] = label[o::stride, o::stride]
    return out


def score_one(record, model, alphas, trees, depths, stride, fft_levels, mode="strict"):
    """Task: the sweep confusion matrices of one face (top level: picklable)."""
    from facesegment.inference import confusion_sweep

    image, label = backend.load_face(record)
    conf, d_out, t_out = confusion_sweep(model, image, grid_label(label, stride),
                                         n_trees_list=trees, max_depth_list=depths,
                                         alphas=alphas, mode=mode, fft_levels=fft_levels)
    return record.name, conf, [int(d) for d in d_out], [int(t) for t in t_out]


def score_model(model, records, tree_counts, alphas, depths=None, per_image_alpha=None,
                workers=None, scheduler=None, fft_levels=0, desc="evaluate",
                sweep_trees=(), pixel_stride=1, mode="strict"):
    """Scores of ``model`` on ``records`` for several forest sizes, depths and alphas.

    One pass per image (``facesegment.inference.confusion_sweep``) scores every
    setting; images are Dask tasks (``facesegment.parallel.map_tasks``).

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
    per_image_alpha : float, optional
        The alpha of the per-image scores (default: the first of ``alphas``).
    sweep_trees : list of int, optional
        Extra forest sizes scored in the same pass (in ``sweep`` only).
    pixel_stride : int
        Score the pixels of a ``stride`` x ``stride`` grid only (1 = every pixel;
        the paper's protocol); label 255 is never scored.
    mode : {"strict", "full"}
        ``"strict"`` (the paper's protocol) leaves the 15-px border unscored;
        ``"full"`` scores every pixel, border windows padded by reflection.

    Returns
    -------
    dict (JSON-ready)
        ``trees``: ``{"16": {"alpha": {"0.5": {mean_jaccard, pixel_accuracy,
        jaccard (8,), confusion}}}}`` at the forest's full depth;
        ``sweep``: the class-average Jaccard of every (alpha, depth, trees);
        ``per_image``: name -> class-average Jaccard at ``per_image_alpha``
        and the full forest; ``n_images``, ``n_pixels``.
    """
    from facesegment.metrics import class_average, jaccard, pixel_accuracy
    from facesegment.parallel import map_tasks

    arrays = model.arrays
    alphas = [float(a) for a in alphas]
    pa = float(per_image_alpha) if per_image_alpha is not None else alphas[0]
    alphas = [pa] + [a for a in alphas if a != pa]
    counts = sorted({int(n) for n in tree_counts})
    forest_depth = int(arrays.depth.max()) if arrays.n_nodes else 0
    trees = sorted(set(counts) | {int(t) for t in sweep_trees} | {arrays.n_trees})
    dl = sorted({min(int(d), forest_depth) for d in (depths or [])} | {forest_depth})
    total, per_image, per_image_jac = None, {}, {}
    for _, (name, conf, d_out, t_out) in map_tasks(
            score_one, records, args=(model, alphas, trees, dl, int(pixel_stride), fft_levels, mode),
            scheduler=scheduler, n_workers=workers, desc=desc, unit="images"):
        total = conf if total is None else total + conf
        jac = jaccard(conf[0, -1, -1])
        ca = float(class_average(jac))
        per_image[name] = None if np.isnan(ca) else round(ca, 4)
        per_image_jac[name] = [None if np.isnan(v) else round(float(v), 4) for v in jac]
    if total is None:
        raise ValueError("records is empty: nothing to score")
    sweep = {"alphas": alphas, "max_depth": d_out, "n_trees": t_out,
             "class_average_jaccard": np.round(class_average(jaccard(total)), 4).tolist(),
             "pixel_accuracy": np.round(pixel_accuracy(total), 4).tolist()}
    out = {"trees": {}, "n_images": len(per_image), "per_image_alpha": pa,
           "n_pixels": int(total[0, 0, 0].sum()), "pixel_stride": int(pixel_stride),
           "per_image": dict(sorted(per_image.items())),
           "per_image_jaccard": dict(sorted(per_image_jac.items())), "sweep": sweep}
    for n in counts:
        j = t_out.index(n)
        out["trees"][str(n)] = {"alpha": {repr(a): _summary(total[i, -1, j])
                                          for i, a in enumerate(alphas)}}
    return out


def time_inference(model, records, tree_counts, mode="full", fft_levels=0):
    """Median and mean milliseconds of ``predict_image`` per image per forest size."""
    from facesegment.inference import count_oblique_visits, predict_image

    out = {}
    images = [backend.load_face(r)[0] for r in records]
    predict_image(model, images[0][:40, :40], mode=mode, n_trees=1)  # compile outside timing
    for n in sorted({int(t) for t in tree_counts}):
        times, cpu = [], []
        for img in images:
            c0, t0 = backend.cpu_seconds(), time.perf_counter()
            predict_image(model, img, mode=mode, alpha=1.0, n_trees=n, fft_levels=fft_levels)
            times.append(1000.0 * (time.perf_counter() - t0))
            cpu.append(1000.0 * (backend.cpu_seconds() - c0))
        out[str(n)] = {"ms_per_image": round(float(np.median(times)), 2),
                       "ms_per_image_mean": round(float(np.mean(times)), 2),
                       "cpu_ms_per_image": round(float(np.median(cpu)), 2),
                       "n_images": len(images), "mode": mode}
        if model.arrays.weights.shape[0]:
            visits = [count_oblique_visits(model, img, mode=mode, n_trees=n) for img in images]
            flops = 2.0 * model.arrays.n_features * float(np.mean(visits))
            out[str(n)].update({
                "oblique_visits_per_image": float(np.mean(visits)),
                "oblique_gflop_per_image": round(flops / 1e9, 3),
                "oblique_gflops_per_cpu_second": round(
                    flops / 1e9 / max(np.mean(cpu) / 1000.0, 1e-9), 3)})
    return out


def best_alpha(result, n_trees):
    """The alpha with the highest class-average Jaccard at ``n_trees`` (ties: smaller)."""
    table = result["trees"][str(n_trees)]["alpha"]

    def key(a):
        v = table[a]["mean_jaccard"]
        return (-1.0 if v is None else v, -float(a))
    return max(table, key=key)
