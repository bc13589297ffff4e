"""Pooled layouts (structured sparsity): the box means a forest reads
(training: ``WindowLayout.pooled``; inference: ``box_means`` phase by phase)
against naive references, dense inference and the sweep against the
estimator's own ``predict_proba`` on the pooled windows, FLOP counts, the model
folder round trip, and the refusals."""

import numba
import numpy as np
import pytest

from facesegment.forest import CO2Forest, TwoProbeForest
from facesegment.dense import count_oblique_visits, predict_proba_raw
from facesegment.layout import WindowLayout, box_means
from facesegment.modelio.model import Model, save_model
from facesegment.models import load_model
from tests import naive
from tests.dense.test_oblique_forests import with_one_thread
from tests.dense.test_sparse import assert_sweep_matches_predict


def naive_pooled(window, s):
    """The pooled features of one raw window, box by box."""
    m = window.shape[0] // s
    out = []
    for i in range(m):
        for j in range(m):
            for c in range(window.shape[2]):
                box = window[i * s:(i + 1) * s, j * s:(j + 1) * s, c].astype(np.int64)
                out.append(int(np.floor(box.sum() / (s * s) + 0.5)))
    return np.array(out, np.uint8)


def test_pooled_features_and_box_means_match_naive_boxes():
    rng = np.random.default_rng(0)
    W = rng.integers(0, 256, (4, 31, 31, 3), dtype=np.uint8)
    img = rng.integers(0, 256, (40, 45, 2), dtype=np.uint8)
    for s in (1, 2, 3, 4, 5, 31):
        lay = WindowLayout(pool=s)
        F = lay.pooled(W)
        assert F.dtype == np.uint8 and F.shape == (4, lay.n_features)
        assert lay.n_features == (31 // s) ** 2 * 3
        for k in range(4):
            np.testing.assert_array_equal(F[k], naive_pooled(W[k], s))
        B = box_means(img, s)
        assert B.shape == (41 - s, 46 - s, 2)
        for y, x in ((0, 0), (7, 3), (40 - s, 45 - s)):
            box = img[y:y + s, x:x + s].astype(np.int64).sum(axis=(0, 1))
            np.testing.assert_array_equal(B[y, x], np.floor(box / (s * s) + 0.5))


def test_layout_records_its_pooling():
    lay = WindowLayout(pool=3)
    assert lay.cells == 10 and lay.n_features == 300 and "3x3 box means" in lay.describe()
    assert WindowLayout.from_dict(lay.to_dict()) == lay
    assert "pool" not in WindowLayout().to_dict()        # unpooled files are unchanged
    assert WindowLayout.from_dict({"window": 31, "channels": 3}).pool == 1
    for bad in (0, 32, 2.5, True):
        with pytest.raises(ValueError, match="pool"):
            WindowLayout(pool=bad)


def _kind(est):
    """The registry row of a test forest (a kind is recorded as given, never guessed)."""
    from facesegment.forest.registry import kind_of

    kind = kind_of(est)
    if kind is None and type(est).__name__ == "CO2Forest":
        kind = "co2-sparse" if est.max_nonzero else ("co2-best" if est.init == "best" else "co2")
    return kind


def _case(s, est):
    rng = np.random.default_rng(s)
    image = rng.integers(0, 256, (37, 42, 3), dtype=np.uint8)
    image[:, :20, 1] //= 3
    lay = WindowLayout(pool=s)
    Xraw, ys, xs = naive.naive_windows(image, "full")
    X = lay.pooled(Xraw.reshape(-1, 31, 31, 3))
    y = np.digitize(X[:, 0].astype(int) - X[:, -1] + (X[:, 7] > 120) * 50, [-40, 0, 40])
    est.fit(X, y)
    return image, X, ys, xs, y, Model.from_estimator(est, kind=_kind(est), layout=lay)


FORESTS = {
    "co2": lambda: CO2Forest(3, max_depth=7, oblique_min_samples=30, init="best", n_pairs=20,
                             random_state=0),
    "co2-int8": lambda: CO2Forest(3, max_depth=7, oblique_min_samples=30, init="best",
                                  n_pairs=20, weight_dtype="int8", random_state=0),
    "co2-int16": lambda: CO2Forest(3, max_depth=7, oblique_min_samples=30, init="best",
                                   n_pairs=20, weight_dtype="int16", random_state=0),
    "sparse": lambda: CO2Forest(3, max_depth=7, oblique_min_samples=30, max_nonzero=5,
                                random_state=0),
    "two-probe": lambda: TwoProbeForest(3, max_depth=7, n_pairs=30, random_state=0),
}


@pytest.mark.parametrize("forest, s", [("co2", 2), ("co2", 3), ("co2", 5), ("co2-int16", 3),
                                       ("sparse", 3), ("two-probe", 5)])
def test_dense_inference_equals_predict_proba_on_pooled_windows(forest, s):
    image, X, ys, xs, y, model = _case(s, FORESTS[forest]())
    est = model.to_estimator()
    raw = predict_proba_raw(model, image)
    np.testing.assert_allclose(raw[ys, xs], est.predict_proba(X), atol=1e-6)
    part = predict_proba_raw(model, image, n_trees=2, max_depth=3)
    np.testing.assert_allclose(part[ys, xs], est.predict_proba(X, n_trees=2, max_depth=3),
                               atol=1e-6)
    strict = predict_proba_raw(model, image, mode="strict")
    inner = (ys >= 15) & (ys < 37 - 15) & (xs >= 15) & (xs < 42 - 15)
    np.testing.assert_allclose(strict[ys[inner], xs[inner]], raw[ys[inner], xs[inner]])
    assert not strict[ys[~inner], xs[~inner]].any()
    # the sweep (evaluation) labels every pixel as predict_image does
    assert_sweep_matches_predict(model, image, ys, xs, y)
    assert count_oblique_visits(model, image) == naive.naive_oblique_visits(model.arrays, X)
    per = count_oblique_visits(model, image, per_tree=True)
    assert int(per[:2].sum()) == naive.naive_oblique_visits(model.arrays, X, n_trees=2)


@pytest.mark.parametrize("forest", ["co2", "co2-int16"])
def test_pooled_model_folder_round_trip(tmp_path, forest):
    image, X, ys, xs, y, model = _case(3, FORESTS[forest]())
    back = load_model(save_model(model, tmp_path / "m"))
    assert back.layout == model.layout and back.layout.pool == 3
    assert back.arrays.weights.dtype == model.arrays.weights.dtype
    np.testing.assert_array_equal(back.arrays.weights, model.arrays.weights)
    if forest == "co2-int16":   # stored zigzag-encoded (small magnitudes, small bytes)
        import h5py

        with h5py.File(tmp_path / "m" / "forest.h5", "r") as f:
            ds = f["forest/weights"]
            assert ds.dtype == np.uint16 and ds.attrs["encoding"] == "zigzag-int16"
    np.testing.assert_array_equal(predict_proba_raw(back, image), predict_proba_raw(model, image))


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_integer_rows_kernels_equal_the_float_kernels(monkeypatch, dtype):
    """int8 and int16 dense rows run as exact integer dots on the uint8 stacked
    image (dense/_simd.py; int16 rows as their two bytes), with the very bits
    of the float32 kernels on the same integer weights (the threshold was refit
    on those exact values).  Both widths are checked in every integer form the
    target has: vpdpbusd (VNNI), the AVX2 form (uint16 image, int16 rows,
    vpmaddwd) and the portable one."""
    from facesegment.dense import _pooled, _simd
    from facesegment.dense import predict_image

    image, X, ys, xs, y, model = _case(3, FORESTS[f"co2-{dtype}"]())
    a = model.arrays
    assert a.weights.dtype == np.dtype(dtype) and a.weights.shape[0] > 0
    assert (255 * np.abs(a.weights.astype(np.int64)).sum(axis=1)).max() < 2 ** 24
    as_float = Model.from_estimator(model.to_estimator(), kind=model.kind, layout=model.layout)
    as_float.arrays = a._replace(weights=a.weights.astype(np.float32))
    ref = predict_proba_raw(as_float, image)
    feats = _simd.target_features()
    forms = [_simd.VARIANTS[f] for f, ok in (("vnni", _simd.form_of(feats) == "vnni"),
                                             ("avx2", "avx2" in feats), ("portable", True)) if ok]
    assert _simd.VARIANT in forms
    for form in forms:
        monkeypatch.setattr(_pooled, "INT_VARIANT", form)
        np.testing.assert_array_equal(predict_proba_raw(model, image), ref)
        for got, want in zip(predict_image(model, image, mode="strict"),
                             predict_image(as_float, image, mode="strict")):
            np.testing.assert_array_equal(got, want)
        assert_sweep_matches_predict(model, image, ys, xs, y)


def test_integer_cut_is_the_float_threshold_on_integer_dots():
    """The integer variants compare an exact integer dot ``v`` with ``floor(t)``
    (dense/_pooled_oblique.py ``_cut`` of an integer form): ``v > t`` must hold exactly when the float32
    compare does, integer-valued and negative thresholds included."""
    from facesegment.dense import _pooled_oblique, _simd
    from facesegment.dense._numba import layout_kernels

    lay = layout_kernels(_pooled_oblique, 15, 3, _simd.VARIANT).layout
    typed_cut = numba.njit(lambda lay, t: _pooled_oblique._cut(lay, t))
    v = np.arange(-40, 41)
    for t in (-7.0, -6.5, -0.25, 0.0, 0.5, 3.0, 3.999, 16777215.0, -16777216.5):
        c = typed_cut(lay, np.float32(t))
        assert isinstance(c, int) and not isinstance(c, float)
        for vv in (v, v + int(np.floor(t))):
            np.testing.assert_array_equal(vv > c, vv > np.float32(t))


def test_mean_distribution_blocks_match_tree_order_sums():
    """dense/_pooled_oblique.py ``mean_distribution`` runs blocks of ``SUM_BLOCK`` pixels
    through the trees; each pixel's sum must still be added in tree order in
    float32, whole blocks and a partial last one alike."""
    from facesegment.dense import _pooled_oblique

    rng = np.random.default_rng(5)
    n_trees, n = 7, 2 * _pooled_oblique.SUM_BLOCK + 333
    value = rng.random((50, 8), dtype=np.float32)
    rec = rng.integers(0, 50, (n_trees, n, 1)).astype(np.int32)
    want = np.zeros((n, 8), np.float32)
    for t in range(n_trees):
        want += value[rec[t, :, 0]]
    want *= np.float32(1.0) / np.float32(n_trees)
    got = _pooled_oblique.mean_distribution(rec, value, np.full((n, 8), np.nan, np.float32))
    np.testing.assert_array_equal(got, want)


def test_pooled_refusals():
    image, X, ys, xs, y, model = _case(3, FORESTS["co2"]())
    with pytest.raises(ValueError, match="fft_levels=2.*unpooled"):
        predict_proba_raw(model, image, fft_levels=2)
    with pytest.raises(ValueError, match="does not match"):
        Model.from_estimator(model.to_estimator(), kind=model.kind,
                             layout=WindowLayout(pool=2))


def test_windows_files_are_never_pooled(tmp_path):
    from facesegment.data.windows import WindowsWriter

    with pytest.raises(ValueError, match="is a model's"):
        WindowsWriter(tmp_path / "w.h5", 4, layout=WindowLayout(pool=2))
    assert not list(tmp_path.iterdir())


def _shuffled(arrays, seed):
    """The same forest with its nodes renumbered at random (not breadth first),
    siblings kept side by side (the format's ``right == left + 1``)."""
    units = [[int(r)] for r in arrays.roots]
    units += [[int(a), int(a) + 1] for a in arrays.left if a >= 0]
    order = np.random.default_rng(seed).permutation(len(units))
    inv = np.array([node for i in order for node in units[i]], dtype=np.int32)  # new -> old
    perm = np.empty_like(inv)
    perm[inv] = np.arange(arrays.n_nodes, dtype=np.int32)                        # old -> new
    remap = {"roots": lambda a: perm[a],
             "left": lambda a: np.where(a[inv] >= 0, perm[np.maximum(a[inv], 0)], -1),
             "right": lambda a: np.where(a[inv] >= 0, perm[np.maximum(a[inv], 0)], -1)}
    out = {}
    for name, a in arrays._asdict().items():
        if name in remap:
            out[name] = remap[name](a).astype(a.dtype)
        elif a is not None and name != "weights" and a.shape[:1] == (arrays.n_nodes,):
            out[name] = a[inv]
        else:
            out[name] = a
    return type(arrays)(**out)


def test_pooled_level_kernels_threads_chunks_and_node_order(monkeypatch):
    """The pooled level kernels (dense/_pooled_oblique.py): the same result whatever the
    number of threads (bit for bit), the chunk size, and the numbering of the
    nodes (runs of pixels stay whole only for breadth-first trees; any other
    order must still give the same forest)."""
    from facesegment.dense import _pooled

    image, X, ys, xs, y, model = _case(3, FORESTS["co2"]())
    est = model.to_estimator()
    base = predict_proba_raw(model, image)
    np.testing.assert_array_equal(with_one_thread(predict_proba_raw, model, image), base)
    monkeypatch.setattr(_pooled, "CHUNK_PIXELS", 97)
    np.testing.assert_allclose(predict_proba_raw(model, image), base, atol=1e-6)
    shuffled = Model.from_estimator(est, kind=model.kind, layout=model.layout)
    shuffled.arrays = _shuffled(model.arrays, 1)
    np.testing.assert_allclose(predict_proba_raw(shuffled, image), base, atol=1e-6)
    np.testing.assert_allclose(predict_proba_raw(shuffled, image, max_depth=3, n_trees=2)[ys, xs],
                               est.predict_proba(X, n_trees=2, max_depth=3), atol=1e-6)
