"""Kernel templates compiled per window layout (facesegment.dense._numba)."""

import numpy as np
import pytest

from facesegment._jit import source_tag
from facesegment.dense import _probe_forests, _any_forest, _oblique_forests
from facesegment.dense._numba import FASTMATH, INLINE, NJIT, PARALLEL, layout_kernels


def test_one_compiled_namespace_per_module_and_layout():
    a = layout_kernels(_oblique_forests, 31, 3)
    assert layout_kernels(_oblique_forests, 31, 3) is a
    assert (a.window, a.channels, a.row) == (31, 3, 93)
    b = layout_kernels(_oblique_forests, 15, 3)
    assert b is not a and b.dense_proba_levels is not a.dense_proba_levels
    # each layout has its own name, hence its own on-disk cache files
    # (and the package's source tag: a kernel is never served from another version's cache)
    tag = source_tag()
    assert a.dense_proba_levels.py_func.__qualname__ == f"dense_proba_levels__31x3__src{tag}"
    assert b._dot8g.py_func.__qualname__ == f"_dot8g__15x3__src{tag}"
    # a template calls the other templates compiled for the same layout
    assert a.dense_proba_levels.py_func.__globals__["_tree_levels"] is a._tree_levels
    assert a.dense_proba_levels.py_func.__globals__["ROW"] == 93
    assert b.dense_proba_levels.py_func.__globals__["ROW"] == 45


def test_templates_and_options():
    """Templates are plain functions (the layout names are None in their module);
    layout-free helpers are ordinary kernels."""
    for module in (_any_forest, _probe_forests, _oblique_forests):
        assert module.WINDOW is None and module.CHANNELS is None and module.ROW is None
    assert not hasattr(_oblique_forests.dense_proba_levels, "py_func")
    assert hasattr(_any_forest.is_leaf, "py_func")
    k = layout_kernels(_any_forest, 31, 3)
    assert k.dense_proba.targetoptions["parallel"] is True
    assert k._dot4.targetoptions["fastmath"] is True
    for opts in (FASTMATH, INLINE, PARALLEL):
        assert opts["cache"] and opts["nogil"] and NJIT.items() <= opts.items()


@pytest.mark.parametrize("window, channels", [(31, 3), (15, 1), (5, 5)])
def test_dot_kernels_equal_numpy(window, channels):
    """The level kernels' 8-window dot against numpy on a padded image, and each
    lane the same bits whatever the other lanes hold (a node's last pass repeats
    its last window)."""
    k = layout_kernels(_oblique_forests, window, channels)
    rng = np.random.default_rng(window * channels)
    h, w = window + 6, window + 9
    img = rng.integers(0, 256, (h, w, channels)).astype(np.float32)
    wrow = rng.normal(0, 1, window * window * channels).astype(np.float32)
    flat = np.concatenate([img.ravel(), np.zeros(32, np.float32)])
    rowstride = w * channels
    bb = np.array([(y * w + x) * channels for y, x in
                   [(0, 0), (1, 2), (3, 4), (6, 9), (0, 9), (5, 1), (2, 2), (6, 0)]], np.int64)
    ref = [img[b // rowstride:b // rowstride + window,
               (b % rowstride) // channels:(b % rowstride) // channels + window].ravel() @ wrow
           for b in bb]
    v = np.array(k._dot8g(flat, bb, rowstride, wrow))
    np.testing.assert_allclose(v, ref, rtol=1e-4, atol=1e-2)
    for u in range(8):
        alone = k._dot8g(flat, np.full(8, bb[u]), rowstride, wrow)
        assert np.float32(alone[0]) == v[u] and len(set(alone)) == 1
    perm = rng.permutation(8)
    np.testing.assert_array_equal(np.array(k._dot8g(flat, bb[perm], rowstride, wrow)),
                                  v[perm])


def test_max_width_formula():
    """The largest probe offset of the widest image fits the 15-bit field, one more does not."""
    for window, channels in [(31, 3), (31, 1), (15, 3), (41, 3), (31, 11)]:
        wmax = _probe_forests.max_width(window, channels)
        for width, fits in [(wmax, True), (wmax + 1, False)]:
            rowstride = (width + window - 1) * channels
            largest = (window - 1) * rowstride + window * channels - 1
            assert (largest <= _probe_forests.OFF_MASK) == fits, (window, channels, width)
    assert _probe_forests.max_width(31, 3) == 333
