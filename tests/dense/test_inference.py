"""Dense inference of the paper's 31x31 RGB models through ``facesegment.dense``:
kernels against explicit windows (tests/naive.py), modes, options.  Other window
layouts: tests/dense/."""

import numpy as np
import pytest

from facesegment.classes import N_CLASSES
from facesegment.forest._arrays import ForestArrays
from facesegment.dense import (confusion_sweep, count_oblique_visits, fft_responses,
                                   pad_image, predict_image, predict_proba_raw, reweight)
from facesegment.layout import DEFAULT_LAYOUT
from facesegment.modelio.model import Model
from tests import naive


def random_forest(seed, n_trees=3, max_depth=5, kinds=("axis", "two-probe", "oblique"),
                  n_classes=N_CLASSES, weights_dtype=np.float32, split_prob=0.8,
                  n_features=DEFAULT_LAYOUT.n_features):
    """A random forest as ForestArrays: trees grown breadth first with random depths.

    Node kinds are drawn from ``kinds`` independently per node (mixed in one
    tree).  Thresholds are drawn so that splits are neither always-left nor
    always-right on images with uniform random bytes.
    """
    rng = np.random.default_rng(seed)
    cols = {k: [] for k in ("left", "right", "feature", "feature2", "oblique",
                            "threshold", "value", "depth", "n_samples")}
    weights, roots = [], []

    def new_node(d):
        cols["left"].append(-1)
        cols["right"].append(-1)
        cols["feature"].append(-1)
        cols["feature2"].append(-1)
        cols["oblique"].append(-1)
        cols["threshold"].append(0.0)
        cols["value"].append(rng.dirichlet(np.full(n_classes, 0.5)))
        cols["depth"].append(d)
        cols["n_samples"].append(int(rng.integers(1, 1000)))
        return len(cols["left"]) - 1

    for _ in range(n_trees):
        tree_depth = int(rng.integers(1, max_depth + 1))
        root = new_node(0)
        roots.append(root)
        frontier = [root]
        while frontier:
            nxt = []
            for n in frontier:
                d = cols["depth"][n]
                if d >= tree_depth or (d > 0 and rng.random() > split_prob):
                    continue
                kind = kinds[int(rng.integers(len(kinds)))]
                if kind == "axis":
                    cols["feature"][n] = int(rng.integers(n_features))
                    cols["threshold"][n] = float(rng.integers(40, 215)) + 0.5
                elif kind == "two-probe":
                    a, b = rng.choice(n_features, 2, replace=False)
                    cols["feature"][n], cols["feature2"][n] = int(a), int(b)
                    cols["threshold"][n] = float(rng.integers(-60, 60)) + 0.5
                else:
                    w = rng.normal(0, 0.05, n_features).astype(weights_dtype)
                    cols["oblique"][n] = len(weights)
                    weights.append(w)
                    spread = 0.5 * 74 * np.sqrt(np.sum(w.astype(np.float64) ** 2))
                    cols["threshold"][n] = float(127.5 * w.astype(np.float64).sum()
                                                 + rng.normal(0, spread))
                cols["left"][n] = new_node(d + 1)
                cols["right"][n] = new_node(d + 1)
                nxt += [cols["left"][n], cols["right"][n]]
            frontier = nxt
    i32 = lambda k: np.asarray(cols[k], dtype=np.int32)  # noqa: E731
    w = (np.stack(weights) if weights else np.zeros((0, n_features))).astype(weights_dtype)
    return ForestArrays(
        roots=np.asarray(roots, dtype=np.int32), left=i32("left"), right=i32("right"),
        feature=i32("feature"), feature2=i32("feature2"), oblique=i32("oblique"),
        threshold=np.asarray(cols["threshold"], dtype=np.float32),
        value=np.asarray(cols["value"], dtype=np.float32), depth=i32("depth"),
        n_samples=i32("n_samples"), weights=w)


def random_model(seed, kind="co2", layout=DEFAULT_LAYOUT, **kw):
    """A Model of window ``layout`` around :func:`random_forest` with random sampling factors."""
    arrays = random_forest(seed, n_features=layout.n_features, **kw)
    rng = np.random.default_rng(seed + 1000)
    return Model(kind=kind, params={"n_estimators": arrays.n_trees}, arrays=arrays,
                 class_names=tuple(f"c{i}" for i in range(arrays.n_classes)),
                 sampling_factors=rng.uniform(0.2, 5.0, arrays.n_classes),
                 mean=np.zeros(layout.n_features, np.float32),
                 std=np.ones(layout.n_features, np.float32), layout=layout)


def random_image(seed, h=40, w=37, channels=3):
    """Uniform random uint8 pixels, (h, w, channels) ((h, w) for channels=None)."""
    shape = (h, w) if channels is None else (h, w, channels)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


@pytest.mark.parametrize("mode", ["full", "strict"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dense_equals_forest_on_explicit_windows(mode, seed):
    model = random_model(seed, n_trees=4, max_depth=6)
    image = random_image(seed, 38 + seed, 35 + 2 * seed)
    raw = predict_proba_raw(model, image, mode=mode)
    X, ys, xs = naive.naive_windows(image, mode)
    ref = naive.naive_forest_proba(model.arrays, X)
    np.testing.assert_allclose(raw[ys, xs], ref, atol=1e-5)
    proba, labels = predict_image(model, image, mode=mode, alpha=1.0)
    ref_rw = naive.naive_reweight(ref, model.sampling_factors, 1.0)
    np.testing.assert_allclose(proba[ys, xs], ref_rw, atol=1e-5)
    np.testing.assert_array_equal(labels[ys, xs], np.argmax(ref_rw, axis=1))
    if mode == "strict":
        border = np.ones(image.shape[:2], bool)
        border[ys, xs] = False
        assert np.all(labels[border] == 255) and np.all(proba[border] == 0)
        h, w = image.shape[:2]
        assert border.sum() == h * w - (h - 30) * (w - 30)


@pytest.mark.parametrize("n_trees,max_depth", [(1, None), (2, 0), (3, 2), (None, 3)])
def test_truncation_equals_reference(n_trees, max_depth):
    model = random_model(7, n_trees=4, max_depth=6)
    image = random_image(7, 33, 34)
    raw = predict_proba_raw(model, image, n_trees=n_trees, max_depth=max_depth)
    X, ys, xs = naive.naive_windows(image, "full")
    ref = naive.naive_forest_proba(model.arrays, X, max_depth=max_depth, n_trees=n_trees)
    np.testing.assert_allclose(raw[ys, xs], ref, atol=1e-5)


def test_float16_weights_and_kind_families():
    for kinds in [("axis",), ("two-probe",), ("oblique",)]:
        model = random_model(11, n_trees=2, max_depth=4, kinds=kinds,
                             weights_dtype=np.float16)
        image = random_image(3, 32, 33)
        X, ys, xs = naive.naive_windows(image, "full")
        ref = naive.naive_forest_proba(model.arrays, X)
        np.testing.assert_allclose(predict_proba_raw(model, image)[ys, xs], ref, atol=1e-5)


def test_reweight_known_values():
    p = np.array([[0.5, 0.5], [0.0, 0.0]], dtype=np.float32)
    out = reweight(p, [1.0, 4.0], alpha=1.0)
    np.testing.assert_allclose(out[0], [0.8, 0.2], atol=1e-6)
    assert np.all(out[1] == 0)
    np.testing.assert_allclose(reweight(p, [1.0, 4.0], alpha=0.0)[0], [0.5, 0.5])
    np.testing.assert_allclose(reweight(p, [1.0, 4.0], alpha=0.5)[0], [2 / 3, 1 / 3], atol=1e-6)
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.ones(8), (5, 6)).astype(np.float32)
    s = rng.uniform(0.1, 10, 8)
    np.testing.assert_allclose(reweight(q, s, 0.7), naive.naive_reweight(q, s, 0.7), atol=1e-6)


def test_fft_levels_match_direct():
    model = random_model(5, n_trees=3, max_depth=5, kinds=("oblique", "axis"))
    image = random_image(5, 36, 40)
    padded = pad_image(image)
    resp, idx = fft_responses(padded, model.arrays, model.arrays.roots, 3, image.shape)
    X, ys, xs = naive.naive_windows(image, "full")
    for n in np.nonzero(idx >= 0)[0]:
        w = model.arrays.weights[model.arrays.oblique[n]].astype(np.float64)
        np.testing.assert_allclose(resp[idx[n]][ys, xs], X @ w, rtol=1e-4, atol=0.05)
    assert len(resp) > 0
    direct = predict_image(model, image)[1]
    fast = predict_image(model, image, fft_levels=3)[1]
    assert np.mean(direct == fast) > 0.99


def test_sweep_equals_truncated_forests():
    model = random_model(9, n_trees=5, max_depth=5)
    image = random_image(9, 36, 33)
    label = np.random.default_rng(9).integers(0, 8, image.shape[:2]).astype(np.uint8)
    label[3:6, 20:30] = 255
    alphas = [0.0, 1.0]
    conf, depths, trees = confusion_sweep(model, image, label, n_trees_list=[1, 3, 5],
                                          max_depth_list=[1, 2, None], alphas=alphas,
                                          mode="full")
    assert conf.shape == (2, 3, 3, 8, 8)
    X, ys, xs = naive.naive_windows(image, "full")
    truth = label[ys, xs]
    for a, alpha in enumerate(alphas):
        for k, d in enumerate(depths):
            for j, t in enumerate(trees):
                p = naive.naive_forest_proba(model.arrays, X, max_depth=int(d), n_trees=int(t))
                pred = np.argmax(naive.naive_reweight(p, model.sampling_factors, alpha), axis=1)
                np.testing.assert_array_equal(conf[a, k, j], naive.naive_confusion(truth, pred))


def test_sweep_strict_counts_only_inner_labelled_pixels():
    model = random_model(4, n_trees=2, max_depth=3)
    image = random_image(4, 40, 41)
    label = np.zeros(image.shape[:2], np.uint8)
    label[20, 20] = 255
    conf, _, _ = confusion_sweep(model, image, label, mode="strict")
    assert conf.sum() == (40 - 30) * (41 - 30) - 1
    _, labels = predict_image(model, image, mode="strict")
    inner = labels[15:25, 15:26].ravel()
    keep = np.ones(inner.shape, bool)
    keep[5 * 11 + 5] = False
    expect = naive.naive_confusion(np.zeros(keep.sum(), np.uint8), inner[keep])
    np.testing.assert_array_equal(conf[0, 0, 0], expect)


def test_small_image_strict_has_no_predictions_and_full_works():
    model = random_model(2, n_trees=2, max_depth=3)
    image = random_image(2, 20, 12)
    proba, labels = predict_image(model, image, mode="strict")
    assert np.all(labels == 255) and not proba.any()
    proba, labels = predict_image(model, image, mode="full")
    assert labels.max() < 8 and np.allclose(proba.sum(-1), 1, atol=1e-5)


def test_deterministic_and_counts_visits():
    model = random_model(6, n_trees=3, max_depth=4, kinds=("oblique",))
    image = random_image(6, 32, 32)
    a = predict_image(model, image)
    b = predict_image(model, image)
    np.testing.assert_array_equal(a[0], b[0])
    X, _, _ = naive.naive_windows(image, "full")
    assert count_oblique_visits(model, image) == naive.naive_oblique_visits(model.arrays, X)


def test_visits_per_tree_are_the_truncated_forests_counts():
    model = random_model(16, n_trees=4, max_depth=5, kinds=("oblique", "axis"))
    image = random_image(16, 30, 26)
    X, _, _ = naive.naive_windows(image, "full")
    per = count_oblique_visits(model, image, per_tree=True)
    assert per.shape == (4,) and per.dtype == np.int64 and per.min() > 0
    for m in range(1, 5):
        want = naive.naive_oblique_visits(model.arrays, X, n_trees=m)
        assert int(per[:m].sum()) == want == count_oblique_visits(model, image, n_trees=m)
    np.testing.assert_array_equal(count_oblique_visits(model, image, n_trees=2, per_tree=True),
                                  per[:2])
    assert count_oblique_visits(model, image[:5, :5], mode="strict", per_tree=True).tolist() \
        == [0, 0, 0, 0]


@pytest.mark.parametrize("kinds", [("axis", "two-probe"), ("oblique", "axis")])
def test_replaced_thresholds_are_packed_again(kinds):
    """The packed node records are cached per forest; a forest whose thresholds
    were replaced (``arrays._replace``, sharing every other array) must not
    reuse the old records (fast integer and general kernels)."""
    model = random_model(7, n_trees=3, max_depth=5, kinds=kinds)
    image = random_image(7, 34, 33)
    predict_proba_raw(model, image)                      # packs and caches
    moved = Model(**{**model.__dict__, "arrays": model.arrays._replace(
        threshold=(model.arrays.threshold + 40.0).astype(np.float32))})
    X, ys, xs = naive.naive_windows(image, "full")
    np.testing.assert_allclose(predict_proba_raw(moved, image)[ys, xs],
                               naive.naive_forest_proba(moved.arrays, X), atol=1e-5)


@pytest.mark.parametrize("kwargs,exc,words", [
    ({"mode": "half"}, ValueError, "mode='half'"),
    ({"alpha": -1}, ValueError, "alpha=-1"),
    ({"alpha": "x"}, TypeError, "alpha"),
    ({"n_trees": 0}, ValueError, "n_trees=0"),
    ({"max_depth": 2.5}, TypeError, "max_depth"),
    ({"fft_levels": -1}, ValueError, "fft_levels"),
])
def test_validation_messages(kwargs, exc, words):
    model = random_model(1, n_trees=1, max_depth=2)
    with pytest.raises(exc, match=words):
        predict_image(model, random_image(1, 32, 32), **kwargs)


def test_bad_image_and_model():
    model = random_model(1, n_trees=1, max_depth=2)
    with pytest.raises(ValueError, match=r"model expects 31x31 windows of 3 channels "
                                         r"\(R, G, B\); image has 1 channel: give an RGB image"):
        predict_image(model, np.zeros((32, 32), np.uint8))
    with pytest.raises(ValueError, match=r"image must be a non-empty uint8 array .* got "
                                         r"dtype float32"):
        predict_image(model, np.zeros((32, 32, 3), np.float32))
    with pytest.raises(TypeError, match="image must be a numpy array, got list"):
        predict_image(model, [[1, 2], [3, 4]])
    with pytest.raises(TypeError, match="Model"):
        predict_image(model.arrays, random_image(1, 32, 32))
    with pytest.raises(ValueError, match="sampling_factors"):
        reweight(np.ones((2, 8)), np.ones(7), 1.0)


@pytest.mark.parametrize("seed", [20, 21, 22])
@pytest.mark.parametrize("kinds", [("axis",), ("two-probe",), ("axis", "two-probe")])
def test_fast_integer_path_equals_reference(seed, kinds, monkeypatch):
    """Forests without oblique nodes take the packed integer kernels: same results."""
    from facesegment.dense import predict as inference

    model = random_model(seed, n_trees=5, max_depth=7, kinds=kinds)
    # thresholds at and beyond the ends of the uint8 / difference ranges too
    thr = model.arrays.threshold
    thr[:3] = np.where(model.arrays.feature2[:3] >= 0, -255.5, -0.5)
    thr[3:5] = np.where(model.arrays.feature2[3:5] >= 0, 254.5, 255.5)
    image = random_image(seed, 35 + seed % 3, 33)
    label = np.random.default_rng(seed).integers(0, 8, image.shape[:2]).astype(np.uint8)
    calls = []
    real_pack = inference.pack_fast

    def spy(*args, **kw):
        calls.append(1)
        return real_pack(*args, **kw)

    monkeypatch.setattr(inference, "pack_fast", spy)
    for mode in ("full", "strict"):
        X, ys, xs = naive.naive_windows(image, mode)
        for n_trees, max_depth in [(None, None), (2, 3)]:
            raw = predict_proba_raw(model, image, mode=mode, n_trees=n_trees,
                                    max_depth=max_depth)
            ref = naive.naive_forest_proba(model.arrays, X, max_depth=max_depth,
                                           n_trees=n_trees)
            np.testing.assert_allclose(raw[ys, xs], ref, atol=1e-5)
    conf, depths, trees = confusion_sweep(model, image, label, n_trees_list=[1, 5],
                                          max_depth_list=[2, None], alphas=[0.5],
                                          mode="full")
    X, ys, xs = naive.naive_windows(image, "full")
    for k, d in enumerate(depths):
        for j, t in enumerate(trees):
            p = naive.naive_forest_proba(model.arrays, X, max_depth=int(d), n_trees=int(t))
            pred = np.argmax(naive.naive_reweight(p, model.sampling_factors, 0.5), axis=1)
            np.testing.assert_array_equal(conf[0, k, j],
                                          naive.naive_confusion(label[ys, xs], pred))
    assert calls, "the packed integer kernels were not used"


def test_fast_path_wide_image_falls_back_to_general_kernel():
    """Two-probe forests reading past the 15-bit probe offsets of a wide image use the
    general kernels: same results (axis-aligned ones use 30-bit offsets: tests/dense/test_split.py)."""
    from facesegment.dense import predict as inference
    from facesegment.dense._probe_forests import max_width

    widest = max_width(31, 3)
    assert widest == 333
    model = random_model(30, n_trees=3, max_depth=6, kinds=("two-probe",))
    a = model.arrays    # one node reads the window's last value: the largest offset
    feature = a.feature.copy()
    feature[int(np.flatnonzero(a.left >= 0)[0])] = DEFAULT_LAYOUT.n_features - 1
    model.arrays = a._replace(feature=feature)
    image = random_image(30, 31, widest + 1)
    assert inference.pack_fast(model.arrays, widest + 31, DEFAULT_LAYOUT) is None
    assert inference.pack_fast(model.arrays, widest + 30, DEFAULT_LAYOUT) is not None
    X, ys, xs = naive.naive_windows(image, "full")
    raw = predict_proba_raw(model, image, mode="full")
    np.testing.assert_allclose(raw[ys, xs], naive.naive_forest_proba(model.arrays, X),
                               atol=1e-5)


@pytest.mark.parametrize("kinds", [("axis",), ("oblique",)])
def test_labels_are_argmax_of_reweighted_probabilities(kinds):
    model = random_model(31, n_trees=4, max_depth=6, kinds=kinds)
    image = random_image(31, 36, 34)
    for mode in ("full", "strict"):
        proba, labels = predict_image(model, image, mode=mode, alpha=0.5)
        raw = predict_proba_raw(model, image, mode=mode)
        ref = naive.naive_reweight(raw.reshape(-1, N_CLASSES), model.sampling_factors, 0.5)
        np.testing.assert_allclose(proba.reshape(-1, N_CLASSES), ref, atol=1e-6)
        inside = labels != 255
        np.testing.assert_array_equal(labels[inside], np.argmax(proba, axis=-1)[inside])
        assert np.all(labels[~inside] == 255) and (mode == "strict") == bool(np.any(~inside))


@pytest.mark.parametrize("seed", [40, 41])
def test_level_kernel_equals_reference(seed):
    """Forests with oblique nodes: pixels grouped by node, level by level (8, 4 and
    single dots), against the naive forest and the per-pixel kernel."""
    model = random_model(seed, n_trees=4, max_depth=6, kinds=("oblique", "axis", "two-probe"))
    image = random_image(seed, 37, 41)
    assert model.arrays.weights.shape[0] > 0
    for mode in ("full", "strict"):
        X, ys, xs = naive.naive_windows(image, mode)
        for n_trees, max_depth in [(None, None), (3, 2)]:
            raw = predict_proba_raw(model, image, mode=mode, n_trees=n_trees,
                                    max_depth=max_depth)
            ref = naive.naive_forest_proba(model.arrays, X, max_depth=max_depth,
                                           n_trees=n_trees)
            np.testing.assert_allclose(raw[ys, xs], ref, atol=1e-5)
            per_pixel = predict_proba_raw(model, image, mode=mode, n_trees=n_trees,
                                          max_depth=max_depth, kernels="no-levels")
            np.testing.assert_allclose(raw, per_pixel, atol=1e-5)
    label = np.random.default_rng(seed).integers(0, 8, image.shape[:2]).astype(np.uint8)
    kw = dict(n_trees_list=[1, 4], max_depth_list=[0, 2, None], alphas=[0.5, 1.0], mode="full")
    conf = confusion_sweep(model, image, label, **kw)[0]
    np.testing.assert_array_equal(conf, confusion_sweep(model, image, label, kernels="no-levels",
                                                        **kw)[0])


def test_dense_exports_the_predict_module_names():
    """``facesegment.dense``'s names are those of dense.predict, which holds the
    ``kernels=`` choices and switches."""
    import facesegment.dense as dense
    import facesegment.dense.predict as predict

    for name in dense.__all__:
        assert getattr(predict, name) is getattr(dense, name), name
    for name in ("KERNELS", "FAST_BLOCK_ROWS", "pack_fast"):
        assert hasattr(predict, name)


def test_kernel_choices_give_the_same_results(monkeypatch):
    """Every ``kernels=`` choice (and FAST_BLOCK_ROWS set on
    ``facesegment.dense.predict``) changes the kernel used, not the result; an
    unknown choice is refused naming the choices."""
    from facesegment.dense import predict as inference

    for kinds in [("axis", "two-probe"), ("oblique", "axis")]:
        model = random_model(50, n_trees=3, max_depth=5, kinds=kinds)
        image = random_image(50, 34, 36)
        ref = predict_proba_raw(model, image)
        for kernels in inference.KERNELS:
            np.testing.assert_allclose(predict_proba_raw(model, image, kernels=kernels), ref,
                                       atol=1e-5)
        monkeypatch.setattr(inference, "FAST_BLOCK_ROWS", 3)
        np.testing.assert_allclose(predict_proba_raw(model, image), ref, atol=1e-5)
        monkeypatch.undo()
    with pytest.raises(ValueError, match="kernels must be one of 'auto', 'no-fast', "
                                         "'no-levels', 'general', got 'fast'"):
        predict_proba_raw(model, image, kernels="fast")


def test_model_without_layout_attribute_uses_the_paper_layout():
    """Objects from before layouts were recorded (no ``layout``) are read as 31x31 RGB."""
    from types import SimpleNamespace

    model = random_model(12, n_trees=2, max_depth=4)
    old = SimpleNamespace(arrays=model.arrays, sampling_factors=model.sampling_factors)
    image = random_image(12, 33, 32)
    np.testing.assert_array_equal(predict_image(old, image)[0], predict_image(model, image)[0])


def test_first_import_from_many_threads_sees_a_complete_module():
    """Worker threads importing facesegment.dense for the first time at
    once (the evaluation tasks do) must all get every name (a sys.modules
    alias used to hand some of them a half-made module)."""
    import subprocess
    import sys

    code = (
        "import threading\n"
        "barrier = threading.Barrier(8); errors = []\n"
        "def work():\n"
        "    barrier.wait()\n"
        "    try:\n"
        "        from facesegment.dense import confusion_sweep, predict_image\n"
        "    except ImportError as exc:\n"
        "        errors.append(exc)\n"
        "ts = [threading.Thread(target=work) for _ in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(len(errors))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.strip() == "0", out.stderr[-2000:]


def test_huge_alpha_reweights_without_overflow_warnings():
    """alpha = 1e308 used to print numpy overflow warnings; the limit is the
    class with the smallest sampling factor."""
    import warnings

    from facesegment.dense import class_scales, reweight

    p = np.random.default_rng(0).random((5, 8)).astype(np.float32)
    s = np.linspace(0.5, 2, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = reweight(p, s, 1e308)
        scales = class_scales(s, [1e308, 1.0])
    assert np.all(np.isfinite(out)) and (np.argmax(out, axis=1) == 0).all()
    np.testing.assert_allclose(out.sum(axis=1), 1, rtol=1e-6)
    np.testing.assert_array_equal(scales[1], s ** -1.0)  # ordinary alphas: unchanged


@pytest.mark.parametrize("mode", ["full", "strict"])
def test_smoothing_blurs_the_reweighted_maps_before_the_argmax(mode):
    import cv2

    from facesegment.dense import default_sigma, smooth

    model = random_model(33, n_trees=3, max_depth=5, kinds=("axis",))
    image = random_image(33, 40, 43)
    full, _ = predict_image(model, image, mode="full", alpha=0.5)
    proba, labels = predict_image(model, image, mode=mode, alpha=0.5, sigma=1.5)
    blur = np.stack([cv2.GaussianBlur(full[..., c], (0, 0), 1.5,
                                      borderType=cv2.BORDER_REPLICATE)
                     for c in range(full.shape[2])], axis=-1)
    blur /= blur.sum(axis=-1, keepdims=True)
    inside = labels != 255
    if mode == "strict":   # the whole image is predicted, then the border blanked
        assert inside.sum() == (40 - 30) * (43 - 30) and np.all(proba[~inside] == 0)
    np.testing.assert_allclose(proba[inside], blur[inside], atol=1e-5)
    np.testing.assert_array_equal(labels[inside], np.argmax(proba, axis=-1)[inside])
    assert not np.array_equal(labels[inside], np.argmax(full, axis=-1)[inside])
    assert smooth(full, 0) is full
    assert default_sigma(model) == 0.0
    model.metrics["sigma"] = 2
    assert default_sigma(model) == 2.0
    with pytest.raises(ValueError, match="sigma"):
        predict_image(model, image, sigma=-1)
