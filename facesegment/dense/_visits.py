"""Counting the nodes dense inference evaluates, for FLOP and gather bounds (private).

:func:`count` runs the counting kernel of the family that predicts the
prepared inputs (:func:`facesegment.dense.predict._prepare`): a forest the
level kernels predict (dense oblique nodes, no sparse ones, no FFT levels) is
counted by :func:`facesegment.dense._oblique_forests.count_visits_levels`, which takes
the very decisions of :func:`facesegment.dense._oblique_forests.dense_proba_levels`
at the cost of about one prediction; pooled layouts by
:func:`facesegment.dense._pooled.visits`; any other forest by the general
per-pixel walk (:func:`facesegment.dense._any_forest.count_visits`, which also
counts sparse oblique nodes and their values).
"""

import numba
import numpy as np

from . import _any_forest, _oblique_forests, _pooled
from ._numba import layout_kernels
from ._packing import cached
from .image import float_image


def count(p, region, levels):
    """int64 ``(n_trees, 3)``: per tree, the dense oblique nodes, sparse oblique
    nodes and sparse values visited by the pixels of ``region`` (``(y0, y1,
    x0, x1)``) of the prepared inputs ``p``; ``levels``: whether the level
    kernels predict ``p``.

    Parameters
    ----------
    p : facesegment.dense.predict._Prepared or facesegment.dense._pooled.Pooled
        The prepared inputs of one image.
    region : tuple of int
        ``(y0, y1, x0, x1)``: the pixels counted, ``[y0, y1) x [x0, x1)``.
    levels : bool
        Whether the level kernels predict ``p`` (then only the dense oblique
        column is counted; the sparse columns stay 0).

    Returns
    -------
    int64 (n_trees, 3)
        Per tree: dense oblique nodes, sparse oblique nodes and sparse entries
        visited (all 0 for an empty region).
    """
    y0, y1, x0, x1 = region
    if y1 <= y0 or x1 <= x0:
        return np.zeros((len(p.roots), 3), dtype=np.int64)
    if isinstance(p, _pooled.Pooled):
        return _pooled.visits(p, y0, y1, x0, x1)
    kernels = layout_kernels(_any_forest if not levels else _oblique_forests, p.layout.window,
                             p.layout.channels)
    if not levels:
        return np.asarray(kernels.count_visits(
            p.img, p.rowstride, y0, y1, x0, x1, p.roots, p.steps, p.nodes, p.thr, p.weights,
            p.sp_off, p.sp_w, p.resp), dtype=np.int64)
    above = cached("above", (p.nodes, p.arrays.depth), None,
                   lambda: _oblique_forests.oblique_above(p.nodes, p.arrays.depth))
    # one block per thread, as predict_proba_raw (the decisions do not depend on it)
    block = -(-(y1 - y0) // max(1, numba.get_num_threads()))
    out = np.zeros((len(p.roots), 3), dtype=np.int64)
    out[:, 0] = kernels.count_visits_levels(
        float_image(p.img), p.rowstride, y0, y1, x0, x1, p.roots, p.steps, p.nodes, p.thr,
        p.weights, above, block)
    return out
