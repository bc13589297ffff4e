"""The fast kernels on an auto-context stage's split buffer and with 30-bit offsets
(mode 3), against the naive reference (tests/naive.py) and the general kernels."""

import numpy as np
import pytest

from facesegment.dense import confusion_sweep, pad_image, predict_proba_raw
from facesegment.dense import predict as P
from facesegment.dense._probe_forests import OFF_MASK, max_width
from facesegment.dense._split import split_buffer, split_offsets
from facesegment.layout import WindowLayout
from tests import naive
from tests.dense.test_inference import random_image, random_model

K = 7                                   # context planes (odd: the last copy is partial)
CTX = WindowLayout(31, 3 + K)
CTX_GREY = WindowLayout(15, 1 + K)


def context_model(seed, layout, c0, kinds=("axis",), off_centre=False, **kw):
    """A random forest over a context layout whose plane features sit at the window's
    centre (as :func:`facesegment.autocontext.context.to_context_layout` makes them)."""
    model = random_model(seed, kind="axis", layout=layout, kinds=kinds, **kw)
    a = model.arrays
    centre = (layout.half * layout.window + layout.half) * layout.channels

    def to_centre(f):
        ch = f % layout.channels
        return np.where((f >= 0) & (ch >= c0), centre + ch, f).astype(f.dtype)

    feature = to_centre(a.feature)
    if off_centre:      # one plane feature one pixel left of the centre
        node = int(np.flatnonzero(a.left >= 0)[0])
        feature[node] = centre - layout.channels + c0
    model.arrays = a._replace(feature=feature, feature2=to_centre(a.feature2))
    return model


def _inputs(seed, layout, c0, h, w):
    image = random_image(seed, h, w, channels=None if c0 == 1 else c0)
    return image, random_image(seed + 1, h, w, channels=layout.channels - c0)


@pytest.mark.parametrize("layout,c0", [(CTX, 3), (CTX_GREY, 1)])
def test_split_offsets_address_every_window_value_the_buffer_holds(layout, c0):
    image, planes = _inputs(3, layout, c0, 20, 23)
    img3 = image.reshape(20, 23, c0)
    padded = pad_image(img3, layout)
    buf = split_buffer(padded, planes, layout.half, 64)
    offs = split_offsets(layout, c0, padded.shape)
    stacked = pad_image(np.concatenate([img3, planes], axis=2), layout)
    rowstride = padded.shape[1] * c0
    f = np.arange(layout.n_features)
    pos, ch = np.divmod(f, layout.channels)
    dy, dx = np.divmod(pos, layout.window)
    held = offs >= 0
    assert np.array_equal(held, (ch < c0) | ((dy == layout.half) & (dx == layout.half)))
    for y, x in [(0, 0), (5, 17), (19, 22)]:
        b = y * rowstride + x * c0
        want = stacked[y + dy[held], x + dx[held], ch[held]]
        np.testing.assert_array_equal(buf[b + offs[held]], want)


@pytest.mark.parametrize("mode", ["full", "strict"])
@pytest.mark.parametrize("layout,c0", [(CTX, 3), (CTX_GREY, 1)])
def test_context_stage_runs_on_the_split_buffer_and_equals_naive(layout, c0, mode):
    model = context_model(11, layout, c0, n_trees=3, max_depth=7)
    image, planes = _inputs(11, layout, c0, 36, 41)
    prep = P._prepare(model, image, planes, None, None, 0, split_ok=True)
    # small grey buffers fit the 15-bit offsets; the RGB one needs mode 3
    assert isinstance(prep, P._Split) and prep.fast[1] == (3 if c0 == 3 else 0)
    raw = predict_proba_raw(model, image, mode=mode, planes=planes)
    X, ys, xs = naive.naive_windows(image, mode, layout.window, planes)
    np.testing.assert_allclose(raw[ys, xs], naive.naive_forest_proba(model.arrays, X),
                               atol=1e-5)
    # the general kernels: bit for bit
    np.testing.assert_array_equal(raw, predict_proba_raw(model, image, mode=mode,
                                                         planes=planes, kernels="no-fast"))


def test_context_stage_sweep_on_the_split_buffer_equals_the_general_kernels():
    model = context_model(12, CTX, 3, n_trees=4, max_depth=8)
    image, planes = _inputs(12, CTX, 3, 34, 45)
    label = np.random.default_rng(12).integers(0, 8, image.shape[:2]).astype(np.uint8)
    kw = dict(n_trees_list=[1, 4], max_depth_list=[2, None], alphas=[0.0, 1.0],
              mode="full", planes=planes)
    fast = confusion_sweep(model, image, label, **kw)
    general = confusion_sweep(model, image, label, kernels="no-fast", **kw)
    for a, b in zip(fast, general):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", ["two-probe", "off-centre"])
def test_stages_the_split_buffer_cannot_serve_use_the_general_kernels(case):
    kinds = ("axis", "two-probe") if case == "two-probe" else ("axis",)
    model = context_model(13, CTX, 3, kinds=kinds, off_centre=case == "off-centre",
                          n_trees=2, max_depth=6)
    image, planes = _inputs(13, CTX, 3, 33, 35)
    prep = P._prepare(model, image, planes, None, None, 0, split_ok=True)
    assert not isinstance(prep, P._Split)
    raw = predict_proba_raw(model, image, mode="full", planes=planes)
    X, ys, xs = naive.naive_windows(image, "full", 31, planes)
    np.testing.assert_allclose(raw[ys, xs], naive.naive_forest_proba(model.arrays, X),
                               atol=1e-5)


def test_wide_images_use_30_bit_offsets_for_axis_forests():
    """Past the 15-bit width an axis-aligned forest stays on the fast kernels (mode 3);
    a two-probe forest that reads past 15 bits falls back to the general ones."""
    from facesegment.layout import DEFAULT_LAYOUT as RGB

    width = max_width(31, 3) + 40
    axis = random_model(14, layout=RGB, n_trees=3, max_depth=7, kinds=("axis",))
    rec, mode, _ = P.pack_fast(axis.arrays, width + 30, RGB)
    assert mode == 3
    image = random_image(14, 33, width)
    raw = predict_proba_raw(axis, image, mode="strict")
    X, ys, xs = naive.naive_windows(image, "strict", 31)
    np.testing.assert_allclose(raw[ys, xs], naive.naive_forest_proba(axis.arrays, X),
                               atol=1e-5)
    two = random_model(15, layout=RGB, n_trees=2, max_depth=6, kinds=("two-probe",))
    a = two.arrays
    offs = RGB.feature_offsets(width + 30)
    used = np.concatenate([a.feature[a.feature >= 0], a.feature2[a.feature2 >= 0]])
    assert offs[used].max() > OFF_MASK     # this forest reads past 15 bits
    assert P.pack_fast(a, width + 30, RGB) is None
