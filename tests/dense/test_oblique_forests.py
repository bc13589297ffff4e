"""The level kernels (oblique forests, pixels grouped by node): a window's dot
product, so every decision, does not depend on the pixels it is grouped with,
hence not on the blocks of rows, hence not on the number of threads."""

import numba
import numpy as np

from facesegment.dense import _oblique_forests, predict_proba_raw
from facesegment.dense._any_forest import THRESHOLD
from facesegment.dense._numba import layout_kernels
from facesegment.dense.image import float_image
from facesegment.dense.predict import _prepare
from tests.dense.test_inference import random_image, random_model


def _levels_proba(p, nodes, block_rows):
    h, w = p.shape[:2]
    out = np.zeros((h, w, p.value.shape[1]), np.float32)
    k = layout_kernels(_oblique_forests, p.layout.window, p.layout.channels)
    return k.dense_proba_levels(float_image(p.img), p.rowstride, 0, h, 0, w, p.roots, p.steps,
                                nodes, nodes.view(np.float32), p.value, p.weights, out,
                                block_rows)


def test_decisions_do_not_depend_on_the_blocks():
    # rows of 17 pixels: with one row per block the last pixel of each row ends a
    # group of one; with the whole image in one block it sits in a group of 8.
    # Each tree's root threshold is the dot of one such pixel exactly, so a dot
    # that rounded differently in a smaller group would send it the other way.
    model = random_model(3, n_trees=8, max_depth=5, kinds=("oblique",))
    image = random_image(3, 12, 17)
    p = _prepare(model, image, None, None, None, 0)
    k = layout_kernels(_oblique_forests, p.layout.window, p.layout.channels)
    imgf = float_image(p.img)
    nodes = p.nodes.copy()
    thr = nodes.view(np.float32)
    for t, r in enumerate(p.roots):
        o = int(p.arrays.oblique[r])
        assert o >= 0
        base = np.full(8, t * p.rowstride + 16 * p.layout.channels, np.int64)
        thr[r, THRESHOLD] = k._dot8g(imgf, base, p.rowstride, p.weights[o])[0]
    one = _levels_proba(p, nodes, 1)
    for block_rows in (2, 5, 12):
        np.testing.assert_array_equal(_levels_proba(p, nodes, block_rows), one)


def with_one_thread(func, *args):
    """``func(*args)`` run with one Numba thread (the setting restored after)."""
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        return func(*args)
    finally:
        numba.set_num_threads(before)


def test_prediction_is_the_same_with_one_thread():
    model = random_model(5, n_trees=6, max_depth=6, kinds=("oblique", "axis"))
    image = random_image(5, 41, 29)
    np.testing.assert_array_equal(with_one_thread(predict_proba_raw, model, image),
                                  predict_proba_raw(model, image))
