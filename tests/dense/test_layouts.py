"""Window layouts other than 31x31 RGB through every kernel path, against the naive
reference (tests/naive.py): grey images, window 15 (and 41), and extra per-pixel
planes stacked after the RGB channels."""

import numpy as np
import pytest

from facesegment.dense import (confusion_sweep, count_oblique_visits, fft_responses, pad_image,
                               predict_image, predict_proba_raw)
from facesegment.dense import predict as P
from facesegment.layout import WindowLayout
from tests import naive
from tests.dense.test_inference import random_image, random_model

GREY = WindowLayout(31, 1)
RGB15 = WindowLayout(15, 3)
PLANES = WindowLayout(31, 5, ("R", "G", "B", "p:face", "p:eyes"))
LAYOUTS = {"grey": GREY, "window15": RGB15, "rgb+2planes": PLANES}

#: kernel path -> (node kinds, the ``kernels=`` choice)
PATHS = {
    "fast-axis": (("axis",), "auto"),
    "fast-two-probe": (("axis", "two-probe"), "auto"),
    "levels": (("oblique", "axis", "two-probe"), "auto"),
    "general": (("oblique", "axis", "two-probe"), "no-levels"),
    "general-no-oblique": (("axis", "two-probe"), "no-fast"),
}


def inputs(layout, seed, h, w):
    """``(image, planes)`` for a layout: grey (H, W), RGB, or RGB + planes."""
    if layout.channels == 1:
        return random_image(seed, h, w, channels=None), None
    image = random_image(seed, h, w)
    if layout.channels == 3:
        return image, None
    return image, random_image(seed + 1, h, w, channels=layout.channels - 3)


def _spy_kernels(monkeypatch):
    """Record which kernel module predict_proba_raw / confusion_sweep dispatch to."""
    used = []
    real = P._kernels

    def spy(module, layout, *variant):
        used.append((module.__name__.rsplit(".", 1)[1], layout.window, layout.channels))
        return real(module, layout, *variant)

    monkeypatch.setattr(P, "_kernels", spy)
    return used


EXPECTED_MODULE = {"fast-axis": "_probe_forests", "fast-two-probe": "_probe_forests",
                   "levels": "_oblique_forests", "general": "_any_forest",
                   "general-no-oblique": "_any_forest"}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_dense_equals_naive_for_layout(name, path, monkeypatch):
    layout = LAYOUTS[name]
    kinds, kernels = PATHS[path]
    seed = 3 + len(name) + 7 * list(PATHS).index(path)
    model = random_model(seed, layout=layout, n_trees=4, max_depth=6, kinds=kinds)
    h, w = layout.window + 5, layout.window + 4
    image, planes = inputs(layout, seed, h, w)
    used = _spy_kernels(monkeypatch)
    for mode in ("full", "strict"):
        X, ys, xs = naive.naive_windows(image, mode, layout.window, planes)
        assert X.shape[1] == layout.n_features
        for n_trees, max_depth in [(None, None), (2, 3)]:
            raw = predict_proba_raw(model, image, mode=mode, n_trees=n_trees,
                                    max_depth=max_depth, planes=planes, kernels=kernels)
            ref = naive.naive_forest_proba(model.arrays, X, max_depth=max_depth,
                                           n_trees=n_trees)
            np.testing.assert_allclose(raw[ys, xs], ref, atol=1e-5)
            if mode == "strict":
                border = np.ones((h, w), bool)
                border[ys, xs] = False
                assert not raw[border].any()
                assert border.sum() == h * w - (h - 2 * layout.half) * (w - 2 * layout.half)
    assert set(used) == {(EXPECTED_MODULE[path], layout.window, layout.channels)}
    # labels, with the strict border of half a window ignored
    proba, labels = predict_image(model, image, mode="strict", alpha=0.5, planes=planes,
                                  kernels=kernels)
    X, ys, xs = naive.naive_windows(image, "strict", layout.window, planes)
    ref = naive.naive_reweight(naive.naive_forest_proba(model.arrays, X),
                               model.sampling_factors, 0.5)
    np.testing.assert_allclose(proba[ys, xs], ref, atol=1e-5)
    np.testing.assert_array_equal(labels[ys, xs], np.argmax(ref, axis=1))
    assert (labels == 255).sum() == h * w - len(ys)


@pytest.mark.parametrize("path", ["fast-two-probe", "levels", "general"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_sweep_equals_naive_for_layout(name, path, monkeypatch):
    layout = LAYOUTS[name]
    kinds, kernels = PATHS[path]
    model = random_model(60 + len(name), layout=layout, n_trees=4, max_depth=5, kinds=kinds)
    h, w = layout.window + 3, layout.window + 2
    image, planes = inputs(layout, 61, h, w)
    label = np.random.default_rng(6).integers(0, 8, (h, w)).astype(np.uint8)
    label[1:3, 2:9] = 255
    used = _spy_kernels(monkeypatch)
    alphas = [0.0, 1.0]
    conf, depths, trees = confusion_sweep(model, image, label, n_trees_list=[1, 4],
                                          max_depth_list=[1, 3, None], alphas=alphas,
                                          mode="full", planes=planes, kernels=kernels)
    assert set(used) == {(EXPECTED_MODULE[path], layout.window, layout.channels)}
    X, ys, xs = naive.naive_windows(image, "full", layout.window, planes)
    truth = label[ys, xs]
    for a, alpha in enumerate(alphas):
        for k, d in enumerate(depths):
            for j, t in enumerate(trees):
                p = naive.naive_forest_proba(model.arrays, X, max_depth=int(d), n_trees=int(t))
                pred = np.argmax(naive.naive_reweight(p, model.sampling_factors, alpha), axis=1)
                np.testing.assert_array_equal(conf[a, k, j], naive.naive_confusion(truth, pred))


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_oblique_visits_and_fft_levels_for_layout(name):
    layout = LAYOUTS[name]
    model = random_model(70, layout=layout, n_trees=3, max_depth=5, kinds=("oblique", "axis"))
    h, w = layout.window + 4, layout.window + 6
    image, planes = inputs(layout, 70, h, w)
    X, ys, xs = naive.naive_windows(image, "full", layout.window, planes)
    assert count_oblique_visits(model, image, planes=planes) == \
        naive.naive_oblique_visits(model.arrays, X)
    stacked = image[:, :, None] if image.ndim == 2 else image
    if planes is not None:
        stacked = np.concatenate([stacked, planes], axis=2)
    padded = pad_image(stacked, layout)
    assert padded.shape == (h + layout.window - 1, w + layout.window - 1, layout.channels)
    resp, idx = fft_responses(padded, model.arrays, model.arrays.roots, 3, (h, w), layout)
    assert len(resp) > 0
    for n in np.nonzero(idx >= 0)[0]:
        wn = model.arrays.weights[model.arrays.oblique[n]].astype(np.float64)
        np.testing.assert_allclose(resp[idx[n]][ys, xs], X @ wn, rtol=1e-4, atol=0.05)
    direct = predict_image(model, image, planes=planes)[1]
    fft = predict_image(model, image, planes=planes, fft_levels=3)[1]
    assert np.mean(direct == fft) > 0.99


def test_grey_image_as_2d_or_one_channel_and_rgb_planes_stacking():
    """(H, W) and (H, W, 1) are the same grey image; image + planes equals the
    stacked array given as one image."""
    model = random_model(80, layout=GREY, n_trees=2, max_depth=4, kinds=("axis", "oblique"))
    grey = random_image(80, 36, 35, channels=None)
    a = predict_proba_raw(model, grey)
    np.testing.assert_array_equal(a, predict_proba_raw(model, grey[:, :, None]))
    m5 = random_model(81, layout=PLANES, n_trees=2, max_depth=4, kinds=("two-probe", "oblique"))
    image, planes = inputs(PLANES, 81, 34, 33)
    stacked = np.concatenate([image, planes], axis=2)
    np.testing.assert_array_equal(predict_proba_raw(m5, image, planes=planes),
                                  predict_proba_raw(m5, stacked))
    one = WindowLayout(31, 4)
    m4 = random_model(82, layout=one, n_trees=2, max_depth=3, kinds=("axis",))
    np.testing.assert_array_equal(predict_proba_raw(m4, image, planes=planes[:, :, 0]),
                                  predict_proba_raw(m4, image, planes=planes[:, :, :1]))


def test_window_41_and_small_windows():
    """A larger window (41: wider padding and strict border) and tiny ones (1, 3)."""
    for layout, kinds in [(WindowLayout(41, 3), ("axis", "two-probe", "oblique")),
                          (WindowLayout(3, 1), ("axis", "oblique")),
                          (WindowLayout(1, 3), ("two-probe", "oblique"))]:
        model = random_model(90 + layout.window, layout=layout, n_trees=3, max_depth=5,
                             kinds=kinds)
        image, planes = inputs(layout, 90, layout.window + 3, layout.window + 4)
        for mode in ("full", "strict"):
            X, ys, xs = naive.naive_windows(image, mode, layout.window, planes)
            raw = predict_proba_raw(model, image, mode=mode)
            np.testing.assert_allclose(raw[ys, xs], naive.naive_forest_proba(model.arrays, X),
                                       atol=1e-5)


def test_wide_grey_image_falls_back_to_general_kernel():
    """The fast records' 15-bit offsets allow wider images for 1 channel than for 3;
    past them a two-probe forest that reads the far end of its window falls back."""
    from facesegment.dense._probe_forests import max_width

    widest = max_width(31, 1)
    assert widest > max_width(31, 3)
    model = random_model(95, layout=GREY, n_trees=2, max_depth=5, kinds=("two-probe",))
    a = model.arrays    # one node reads the window's last pixel: the largest offset
    node = int(np.flatnonzero(a.left >= 0)[0])
    feature = a.feature.copy()
    feature[node] = GREY.n_features - 1
    model.arrays = a._replace(feature=feature)
    assert P.pack_fast(model.arrays, widest + 30, GREY) is not None
    assert P.pack_fast(model.arrays, widest + 31, GREY) is None
    image = random_image(95, 31, widest + 1, channels=None)
    X, ys, xs = naive.naive_windows(image, "strict", 31)
    raw = predict_proba_raw(model, image, mode="strict")
    np.testing.assert_allclose(raw[ys, xs], naive.naive_forest_proba(model.arrays, X),
                               atol=1e-5)
