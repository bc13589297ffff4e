"""Timing dense inference per image: :func:`time_inference` (the pipeline's time stages)."""

import time

import numpy as np

from ..data.datasets import load_face
from ..dense import count_oblique_visits, predict_image
from ..progress import Progress
from .scoring import _arrays, _check_common, _tree_list

__all__ = ["time_inference"]


def time_inference(model, records, tree_counts, mode="full", fft_levels=0, progress=True):
    """Median and mean milliseconds of ``predict_image`` per image per forest size.

    The images are loaded first and the kernels compiled outside the timing;
    each image is predicted with alpha 1, no prior and no smoothing.

    Parameters
    ----------
    model : Model
    records : list of FaceRecord
        The faces timed.
    tree_counts : iterable of int
        Forest sizes (the first ``n`` trees), each at most the model's.
    mode : str
        ``predict_image``'s mode.
    fft_levels : int
        Passed to ``predict_image``.
    progress : bool
        Progress line on stderr.

    Returns
    -------
    dict
        ``{str(n): {"ms_per_image", "ms_per_image_mean", "cpu_ms_per_image",
        "n_images", "mode", [oblique_* and dot_arithmetic ("float32", or
        "integer": int8/int16 rows, whose multiply-adds are integer ops) for
        forests with oblique nodes]}}``.

    Raises
    ------
    ValueError
        ``records`` is empty, or an invalid ``mode``, ``fft_levels`` or tree
        count.
    """
    arrays = _arrays(model)
    records = list(records)
    if not records:
        raise ValueError("records is empty: give at least one face to time")
    _check_common(mode, 1, fft_levels, None)
    counts = sorted(_tree_list(tree_counts, "tree_counts", arrays.n_trees))
    out = {}
    images = [load_face(r)[0] for r in records]
    predict_image(model, images[0][:40, :40], mode=mode, alpha=1.0, beta=0.0, sigma=0.0,
                  n_trees=1)  # compile outside timing
    oblique = bool(arrays.weights.shape[0])
    per_tree = []
    with Progress((len(counts) + oblique) * len(images), "time", "images",
                  enabled=progress) as bar:
        # oblique nodes visited per tree, counted once for the largest forest: the
        # first n trees' entries are the n-tree forest's (trees are independent)
        for img in images if oblique else ():
            per_tree.append(count_oblique_visits(model, img, mode=mode, n_trees=counts[-1],
                                                 per_tree=True))
            bar.update(1)
        for n in counts:
            times, cpu = [], []
            for img in images:
                c0, t0 = time.process_time(), time.perf_counter()
                predict_image(model, img, mode=mode, alpha=1.0, beta=0.0, sigma=0.0,
                              n_trees=n, fft_levels=fft_levels)
                times.append(1000.0 * (time.perf_counter() - t0))
                cpu.append(1000.0 * (time.process_time() - c0))
                bar.update(1)
            out[str(n)] = {"ms_per_image": round(float(np.median(times)), 2),
                           "ms_per_image_mean": round(float(np.mean(times)), 2),
                           "cpu_ms_per_image": round(float(np.median(cpu)), 2),
                           "n_images": len(images), "mode": mode}
            if oblique:
                visits = [int(v[:n].sum()) for v in per_tree]
                flops = 2.0 * arrays.n_features * float(np.mean(visits))
                out[str(n)].update({
                    "dot_arithmetic": "integer" if arrays.weights.dtype.kind == "i"
                    else "float32",
                    "oblique_visits_per_image": float(np.mean(visits)),
                    "oblique_gflop_per_image": round(flops / 1e9, 3),
                    "oblique_gflops_per_cpu_second": round(
                        flops / 1e9 / max(np.mean(cpu) / 1000.0, 1e-9), 3)})
    return out
