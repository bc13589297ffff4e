"""Position priors (facesegment.position): fitting, the combined scores in dense
inference and in the evaluation sweep (all three kernel families) against a naive
per-pixel reference, the position-only map, save/load with the model."""

import numpy as np
import pytest

from facesegment.evaluation import maps, scoring as evaluation
from facesegment.dense import confusion_sweep, predict_image
from facesegment.modelio.model import save_model
from facesegment.models import load_model
from facesegment.position import (PositionPrior, constant_labels, fit_position_prior,
                                  position_factor)
from tests import naive
from tests.dense.test_inference import random_image, random_model


def toy_labels(n=6, shape=(40, 37), seed=0, all_classes=False):
    """Label maps with a 'face' (class 1) in the middle and a class-2 blob above it
    (and with ``all_classes``, small blobs of classes 3..7 inside the face)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        lab = np.zeros(shape, np.uint8)
        cy, cx = shape[0] // 2 + rng.integers(-2, 3), shape[1] // 2 + rng.integers(-2, 3)
        lab[cy - 8:cy + 8, cx - 6:cx + 6] = 1
        lab[cy - 5:cy - 1, cx - 2:cx + 2] = 2
        if all_classes:
            for c in range(3, 8):
                lab[cy + c - 1, cx - 5 + c - 3 + int(rng.integers(0, 2))] = c
        lab[0, 0] = 255
        out.append(lab)
    return out


def test_unsmoothed_prior_is_the_per_pixel_frequency():
    labels = toy_labels()
    prior = fit_position_prior(labels, 8, sigma=0, pseudo=0)
    stack = np.stack(labels)
    for c in (0, 1, 2):
        counted = (stack != 255).sum(0)
        expect = np.where(counted > 0, (stack == c).sum(0) / np.maximum(counted, 1), 0)
        inner = counted > 0
        np.testing.assert_allclose(prior.freq[..., c][inner], expect[inner], atol=1e-6)
    valid = stack[stack != 255]
    np.testing.assert_allclose(prior.class_prior, np.bincount(valid, minlength=8) / valid.size)
    np.testing.assert_allclose(prior.freq.sum(-1), 1.0, atol=1e-5)
    assert prior.n_images == 6 and prior.shape == (40, 37)


def test_smoothing_and_shrinkage_keep_distributions_and_resize():
    prior = fit_position_prior(toy_labels(), 8, sigma=3, pseudo=2)
    assert np.all(prior.freq[..., :3] > 0) and np.all(prior.freq[..., 3:] == 0)  # 3..7 unseen
    assert np.allclose(prior.freq.sum(-1), 1.0, atol=1e-5)
    f = position_factor(prior, (80, 74))            # another crop size: same layout
    assert f.shape == (80, 74, 8)
    back = f * prior.class_prior.astype(np.float32)
    np.testing.assert_allclose(back.sum(-1), 1.0, atol=1e-4)
    assert np.argmax(back[40, 37]) == 1 and np.argmax(back[2, 2]) == 0
    with pytest.raises(ValueError, match="sigma=-1"):
        fit_position_prior(toy_labels(), 8, sigma=-1)
    with pytest.raises(ValueError, match="labels is empty"):
        fit_position_prior([], 8)


def test_constant_map_gamma():
    prior = fit_position_prior(toy_labels(), 8, sigma=0, pseudo=0.5)
    lab = constant_labels(prior, (40, 37), 0.0)
    assert lab[20, 18] == 1 and lab[2, 2] == 0
    # gamma = 1: argmax pos/pi favours the rare class 2 where it ever appears
    assert (constant_labels(prior, (40, 37), 1.0) == 2).sum() >= (lab == 2).sum()


def model_with_prior(seed, **kw):
    model = random_model(seed, **kw)
    h, w = 40, 37
    model.position = fit_position_prior(toy_labels(8, (h, w), seed, all_classes=True),
                                        model.arrays.n_classes,
                                        sigma=2, pseudo=1)
    return model


def naive_scores(model, image, alpha, beta, mode="full", n_trees=None, max_depth=None):
    """Per-pixel ``p * s**-alpha * (pos/pi)**beta`` from explicit windows."""
    X, ys, xs = naive.naive_windows(image, mode)
    p = naive.naive_forest_proba(model.arrays, X, max_depth=max_depth, n_trees=n_trees)
    s = np.asarray(model.sampling_factors, np.float64)
    f = model.position.freq[ys, xs].astype(np.float64) / model.position.class_prior
    return p * s ** -alpha * f ** beta, ys, xs


@pytest.mark.parametrize("kinds", [("axis",), ("two-probe",), ("oblique",)])
def test_predict_image_with_prior_equals_naive(kinds):
    model = model_with_prior(3, n_trees=4, max_depth=5, kinds=kinds)
    image = random_image(3, 40, 37)
    proba, labels = predict_image(model, image, mode="full", alpha=0.5, beta=0.7)
    scores, ys, xs = naive_scores(model, image, 0.5, 0.7)
    np.testing.assert_array_equal(labels[ys, xs], np.argmax(scores, axis=1))
    np.testing.assert_allclose(proba[ys, xs], scores / scores.sum(1, keepdims=True),
                               rtol=1e-4, atol=1e-6)
    # beta = 0 is exactly the model without its prior
    p0, l0 = predict_image(model, image, mode="full", alpha=0.5, beta=0.0)
    model.position = None
    p1, l1 = predict_image(model, image, mode="full", alpha=0.5)
    np.testing.assert_array_equal(l0, l1)
    np.testing.assert_array_equal(p0, p1)


@pytest.mark.parametrize("path", ["fast", "levels", "general"])
def test_sweep_with_prior_equals_naive_in_every_kernel(path):
    kinds = ("oblique",) if path == "levels" else ("axis", "two-probe")
    model = model_with_prior(5, n_trees=5, max_depth=5, kinds=kinds)
    image = random_image(5, 40, 37)
    label = np.random.default_rng(5).integers(0, 8, image.shape[:2]).astype(np.uint8)
    label[3:6, 20:30] = 255
    alphas = [0.0, 1.0]
    conf, depths, trees = confusion_sweep(model, image, label, n_trees_list=[2, 5],
                                          max_depth_list=[2, None], alphas=alphas,
                                          mode="full", beta=0.8,
                                          kernels="no-fast" if path == "general" else "auto")
    for a, alpha in enumerate(alphas):
        for k, d in enumerate(depths):
            for j, t in enumerate(trees):
                scores, ys, xs = naive_scores(model, image, alpha, 0.8, n_trees=int(t),
                                              max_depth=int(d))
                keep = label[ys, xs] != 255
                pred = np.argmax(scores, axis=1)
                np.testing.assert_array_equal(
                    conf[a, k, j], naive.naive_confusion(label[ys, xs][keep], pred[keep]))


def test_beta_needs_a_prior_and_is_checked():
    model = random_model(1, n_trees=2, max_depth=3)
    image = random_image(1, 40, 37)
    with pytest.raises(ValueError, match="needs a model with a position prior"):
        predict_image(model, image, beta=0.5)
    with pytest.raises(ValueError, match="beta=-1"):
        predict_image(model_with_prior(1, n_trees=2, max_depth=3), image, beta=-1)


def test_model_folder_keeps_the_prior(tmp_path):
    model = model_with_prior(7, n_trees=2, max_depth=3)
    model.metrics["beta"] = 0.5
    save_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert isinstance(back.position, PositionPrior)
    np.testing.assert_array_equal(back.position.freq, model.position.freq)
    np.testing.assert_array_equal(back.position.class_prior, model.position.class_prior)
    assert back.position.describe() == model.position.describe()
    from facesegment.dense import default_beta
    assert default_beta(back) == 0.5
    image = random_image(7, 40, 37)
    np.testing.assert_array_equal(predict_image(back, image, beta=0.5)[1],
                                  predict_image(model, image, beta=0.5)[1])


def test_choose_alpha_and_beta_and_position_only(tmp_path):
    import cv2

    from facesegment.data.datasets import FaceRecord

    model = model_with_prior(11, n_trees=3, max_depth=4, kinds=("axis",))
    records = []
    for i, lab in enumerate(toy_labels(3, (40, 37), 50)):
        img, lbl = tmp_path / f"f{i}.png", tmp_path / f"f{i}_label.png"
        cv2.imwrite(str(img), random_image(i, 40, 37))
        cv2.imwrite(str(lbl), lab)
        records.append(FaceRecord(f"f{i}", str(img), str(lbl)))
    res = evaluation.choose_alpha(model, records, [0.0, 1.0], betas=[0.0, 1.0, 4.0],
                                  mode="full", progress=False)
    table = res["validation_jaccard_beta"]
    assert set(table) == {"0.0", "1.0", "4.0"}
    best = max(v for t in table.values() for v in t.values())
    assert table[repr(res["beta"])][repr(res["alpha"])] == best
    again = evaluation.evaluate(model, records, alphas=[res["alpha"]], mode="full",
                                beta=res["beta"], progress=False)
    assert again["trees"]["3"]["alpha"][repr(res["alpha"])]["mean_jaccard"] == best
    only = maps.evaluate_position_only(model.position, records, [0.0, 1.0],
                                             mode="full", progress=False)
    assert only["n_pixels"] == 3 * 40 * 37 - 3        # one 255 pixel per map
    assert 0 < only["gamma"]["0.0"]["mean_jaccard"] <= 100          # percent


def test_smoothed_maps_sigma_zero_is_the_plain_argmax(tmp_path):
    """evaluate_smoothed with sigma 0 scores exactly what evaluate scores at the
    same alpha/beta; a blur changes the maps (and stays a valid score)."""
    import cv2

    from facesegment.data.datasets import FaceRecord

    model = model_with_prior(13, n_trees=3, max_depth=4, kinds=("axis",))
    records = []
    for i, lab in enumerate(toy_labels(3, (40, 37), 60)):
        img, lbl = tmp_path / f"f{i}.png", tmp_path / f"f{i}_label.png"
        cv2.imwrite(str(img), random_image(i + 5, 40, 37))
        cv2.imwrite(str(lbl), lab)
        records.append(FaceRecord(f"f{i}", str(img), str(lbl)))
    for mode in ("full", "strict"):
        plain = evaluation.evaluate(model, records, alphas=[0.5], beta=0.5, mode=mode,
                                    progress=False)["trees"]["3"]["alpha"]["0.5"]
        sm = maps.evaluate_smoothed(model, records, alpha=0.5, beta=0.5,
                                          sigmas=[0.0, 3.0], mode=mode, progress=False)
        assert sm["sigma"]["0.0"]["confusion"] == plain["confusion"]
        assert sm["sigma"]["3.0"]["confusion"] != plain["confusion"]
        assert np.sum(sm["sigma"]["3.0"]["confusion"]) == np.sum(plain["confusion"])


def test_bad_prior_files_are_one_error_naming_the_file(tmp_path):
    """A model whose stored prior has the wrong number of classes, and the
    pipeline's prior file when damaged: DataError naming the file and the fix."""
    import h5py

    from facesegment.errors import DataError
    from pipelines.prior import load_prior, save_prior

    model = model_with_prior(8, n_trees=2, max_depth=3)
    path = save_model(model, tmp_path / "m")
    with h5py.File(path / "forest.h5", "a") as f:
        del f["position/class_prior"]
        f["position"].create_dataset("class_prior", data=np.ones(3))
    with pytest.raises(DataError) as err:
        load_model(path, verify=False)
    assert "forest.h5" in str(err.value) and "position prior" in str(err.value)
    good = save_prior(model.position, tmp_path / "p" / "position-prior.npz")
    np.testing.assert_array_equal(load_prior(good).freq, model.position.freq)
    good.write_bytes(b"not an npz")
    with pytest.raises(DataError) as err:
        load_prior(good)
    assert str(good) in str(err.value) and "--force prior" in str(err.value)


@pytest.mark.parametrize("call", ["position_only", "smoothed"])
def test_empty_records_are_refused(call):
    model = model_with_prior(9, n_trees=1, max_depth=2)
    with pytest.raises(ValueError, match="records is empty"):
        if call == "position_only":
            maps.evaluate_position_only(model.position, [], progress=False)
        else:
            maps.evaluate_smoothed(model, [], alpha=0.5, progress=False)
