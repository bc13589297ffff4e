"""Kernels compiled per window layout (facesegment.dense._numba)."""

import numba
import numpy as np
import pytest

from facesegment._jit import source_tag
from facesegment.dense import _probe_forests, _any_forest, _oblique_forests, _pooled_oblique
from facesegment.dense._numba import (FASTMATH, FORMS, INLINE, NJIT, PARALLEL, KernelLayout,
                                      layout_kernels, span)


def test_one_bound_namespace_per_module_and_layout():
    a = layout_kernels(_oblique_forests, 31, 3)
    assert layout_kernels(_oblique_forests, 31, 3) is a
    assert (a.window, a.channels, a.row) == (31, 3, 93)
    assert a.layout == KernelLayout(31, 3)
    b = layout_kernels(_oblique_forests, 15, 3)
    assert b is not a and b.layout != a.layout
    # one kernel, one dispatcher: the layout is its first argument, so each layout
    # compiles (and caches on disk) under its own signature; the name carries the
    # package's source tag (a kernel is never served from another version's cache)
    assert a.dense_proba_levels.func is b.dense_proba_levels.func
    assert a.dense_proba_levels.args == (a.layout,)
    tag = source_tag()
    assert a.dense_proba_levels.func.py_func.__qualname__ == f"dense_proba_levels__src{tag}"
    assert numba.typeof(a.layout) != numba.typeof(b.layout)
    assert str(numba.typeof(KernelLayout(10, 3, "u8vnni"))) == "KernelLayout(10x3,u8vnni)"


def test_layout_attributes_are_constants_of_the_type():
    @numba.njit
    def attrs(lay):
        return (lay.window, lay.channels, lay.row, lay.span, lay.mode, lay.integer,
                lay.planes, lay.head)

    assert attrs(KernelLayout(31, 3)) == (31, 3, 93, 96, -1, False, 1, 0)
    assert attrs(KernelLayout(10, 3, "u8x2")) == (10, 3, 30, 32, -1, True, 2, 8)
    assert attrs(KernelLayout(10, 3, "i16avx2")) == (10, 3, 30, 32, -1, True, 1, 0)
    assert attrs(KernelLayout(31, 3, "sparse"))[4] == 2
    for form, spec in FORMS.items():
        got = attrs(KernelLayout(7, 5, form))
        assert got[3] == span(7, 5, spec.step) and got[4] == spec.mode


def test_bad_layouts_are_refused():
    with pytest.raises(ValueError, match="not one of"):
        KernelLayout(31, 3, "avx9")
    with pytest.raises(ValueError, match="at least 1"):
        KernelLayout(0, 3)


def test_kernels_and_options():
    """Layout kernels take ``lay`` first; layout-free helpers are ordinary kernels;
    the form-dependent helpers are stubs Numba resolves when a kernel is typed."""
    k = layout_kernels(_any_forest, 31, 3)
    assert k.dense_proba.func.targetoptions["parallel"] is True
    assert k._dot4.func.targetoptions["fastmath"] is True
    assert not hasattr(k, "is_leaf") and hasattr(_any_forest.is_leaf, "py_func")
    assert set(vars(layout_kernels(_probe_forests, 31, 3, "axis"))) >= {"_proba_rows",
                                                                         "_sweep_chunk"}
    with pytest.raises(TypeError, match="compiled kernels only"):
        _pooled_oblique._cut(KernelLayout(4, 3), 1.0)
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
