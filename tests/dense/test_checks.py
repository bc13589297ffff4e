"""Validation of dense-inference arguments: images, planes and the model's layout."""

import numpy as np
import pytest

from facesegment.dense import model_layout, predict_image
from facesegment.dense._checks import window_image
from facesegment.layout import DEFAULT_LAYOUT, WindowLayout
from tests.dense.test_inference import random_image, random_model


@pytest.mark.parametrize("layout, image, planes, message", [
    (DEFAULT_LAYOUT, (32, 32), None,
     r"model expects 31x31 windows of 3 channels \(R, G, B\); image has 1 channel: give an "
     r"RGB image of shape \(H, W, 3\)"),
    (DEFAULT_LAYOUT, (32, 32, 1), None, r"image has 1 channel: give an RGB image"),
    # (an RGB image given to a grey model is turned grey: tests/test_grey.py)
    (WindowLayout(31, 1), (32, 32, 2), None,
     r"model expects 31x31 windows of 1 channel \(gray\); image has 2 channels: give a grey "
     r"image of shape \(H, W\) or \(H, W, 1\)"),
    (WindowLayout(15, 5, ("R", "G", "B", "p:a", "p:b")), (32, 32, 3), None,
     r"model expects 15x15 windows of 5 channels \(R, G, B, p:a, p:b\); image has 3 channels: "
     r"pass the other 2 planes \(p:a, p:b\) as planes=, uint8 of shape \(H, W, 2\)"),
    (WindowLayout(15, 5), (32, 32, 3), (32, 32, 3),
     r"image has 3 channels and planes 3 planes: give image channels \+ planes = 5"),
    (DEFAULT_LAYOUT, (32, 32, 3), (32, 32, 1),
     r"image has 3 channels and planes 1 plane: give image channels \+ planes = 3"),
])
def test_channel_mismatch_messages(layout, image, planes, message):
    img = np.zeros(image, np.uint8)
    pl = None if planes is None else np.zeros(planes, np.uint8)
    with pytest.raises(ValueError, match=message):
        window_image(img, pl, layout)
    model = random_model(1, layout=layout, n_trees=1, max_depth=2, kinds=("axis",))
    with pytest.raises(ValueError, match=message):
        predict_image(model, img, planes=pl)


@pytest.mark.parametrize("planes, message", [
    (np.zeros((31, 32, 2), np.uint8), r"planes must be uint8 of shape \(32, 32, 'k'\)"),
    (np.zeros((32, 32, 2), np.float32), r"got dtype float32 shape \(32, 32, 2\) \(scale"),
    ([[1]], r"planes must be uint8 .* got list"),
])
def test_bad_planes(planes, message):
    layout = WindowLayout(31, 5)
    with pytest.raises(ValueError, match=message):
        window_image(np.zeros((32, 32, 3), np.uint8), planes, layout)


def test_window_image_stacks_without_copying_a_plain_image():
    img = random_image(0, 20, 21)
    assert np.shares_memory(window_image(img, None, DEFAULT_LAYOUT), img)
    grey = random_image(0, 20, 21, channels=None)
    out = window_image(grey, None, WindowLayout(3, 1))
    assert out.shape == (20, 21, 1) and np.shares_memory(out, grey)
    planes = random_image(1, 20, 21, channels=2)
    out = window_image(img, planes, WindowLayout(3, 5))
    assert out.shape == (20, 21, 5) and out.flags.c_contiguous
    np.testing.assert_array_equal(out[:, :, :3], img)
    np.testing.assert_array_equal(out[:, :, 3:], planes)
    with pytest.raises(ValueError, match="non-empty uint8"):
        window_image(np.zeros((0, 4, 3), np.uint8), None, DEFAULT_LAYOUT)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        window_image(np.zeros(4, np.uint8), None, DEFAULT_LAYOUT)


def test_model_layout():
    model = random_model(2, layout=WindowLayout(15, 1), n_trees=1, max_depth=2)
    assert model_layout(model) == WindowLayout(15, 1)
    model.layout = None  # a model that records no layout: the paper's, if it fits
    with pytest.raises(ValueError, match=r"model has 225 features but its window layout is "
                                         r"31x31 windows of 3 channels \(R, G, B\): 2883 "
                                         r"features \(dense inference needs"):
        model_layout(model)
    rgb = random_model(3, n_trees=1, max_depth=2)
    rgb.layout = None
    assert model_layout(rgb) == DEFAULT_LAYOUT
    with pytest.raises(TypeError, match="model must be a facesegment.modelio.model.Model"):
        model_layout(rgb.arrays)
