"""Dense inference of forests with sparse oblique splits: the fast (integer-record)
path, the general per-pixel path and the sweep against the tabular kernels and
tests/naive.py; mixed dense/sparse forests; model files."""

import json

import numpy as np
import pytest

import facesegment.dense.predict as P
from facesegment.errors import DataError
from facesegment.forest import CO2Forest
from facesegment.forest._arrays import n_sparse
from facesegment.dense import confusion_sweep, predict_image, predict_proba_raw
from facesegment.modelio.model import Model, save_model
from facesegment.models import load_model
from tests import naive
from tests.forest.test_sparse import mixed_forest


def _image_and_windows(seed=0, h=36, w=40):
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    image[:, : w // 2, 0] //= 2  # some structure for the labels
    X, ys, xs = naive.naive_windows(image, "full")
    score = X[:, 1440].astype(int) - X[:, 1500] + (X[:, 100] > 100) * 60
    y = np.digitize(score, [-60, 0, 60])
    return image, X, ys, xs, y


def _model(est, kind="co2-sparse"):
    return Model.from_estimator(est, kind)


@pytest.fixture(scope="module", params=["int8", "float16", "float32"])
def sparse_case(request):
    image, X, ys, xs, y = _image_and_windows()
    est = CO2Forest(3, max_nonzero=6, weight_dtype=request.param, init="best", n_pairs=30,
                    oblique_min_samples=60, max_depth=8, random_state=0).fit(X, y)
    assert n_sparse(est.forest_) > 0
    return image, X, ys, xs, y, est


@pytest.mark.parametrize("fast", [True, False])
def test_dense_sparse_equals_tabular(sparse_case, fast):
    image, X, ys, xs, _, est = sparse_case
    model = _model(est)
    kernels = "auto" if fast else "no-fast"
    assert (P._fast_records(P._prepare(model, image, None, None, None, 0), fast)
            is not None) == fast
    raw = predict_proba_raw(model, image, kernels=kernels)
    np.testing.assert_allclose(raw[ys, xs], est.predict_proba(X), atol=1e-6)
    np.testing.assert_allclose(raw[ys, xs], naive.naive_forest_proba(est.forest_, X),
                               atol=1e-6)
    part = predict_proba_raw(model, image, n_trees=2, max_depth=3, kernels=kernels)
    np.testing.assert_allclose(part[ys, xs], est.predict_proba(X, n_trees=2, max_depth=3),
                               atol=1e-6)


def assert_sweep_matches_predict(model, image, ys, xs, y, n_classes=4, kernels="auto"):
    """The confusion sweep (1 and 3 trees, depth 2 and unlimited) counts what
    ``predict_image`` labels at the pixels ``(ys, xs)`` of truth ``y``."""
    label = np.zeros(image.shape[:2], np.uint8)
    label[ys, xs] = y
    conf, depths, trees = confusion_sweep(model, image, label, n_trees_list=[1, 3],
                                          max_depth_list=[2, None], mode="full",
                                          kernels=kernels)
    for k, d in enumerate(depths):
        for j, t in enumerate(trees):
            _, lab = predict_image(model, image, alpha=1.0, n_trees=int(t), max_depth=int(d),
                                   kernels=kernels)
            np.testing.assert_array_equal(
                conf[0, k, j], naive.naive_confusion(y, lab[ys, xs], n_classes=n_classes))


@pytest.mark.parametrize("fast", [True, False])
def test_sweep_sparse_equals_predict(sparse_case, fast):
    image, X, ys, xs, y, est = sparse_case
    model = _model(est)
    assert_sweep_matches_predict(model, image, ys, xs, y, kernels="auto" if fast else "no-fast")


def test_mixed_forest_dense_inference():
    image, X, ys, xs, y = _image_and_windows(1)
    est = mixed_forest(X, y)
    model = _model(est, "co2")
    assert P._fast_records(P._prepare(model, image, None, None, None, 0)) is None
    raw = predict_proba_raw(model, image)
    np.testing.assert_allclose(raw[ys, xs], naive.naive_forest_proba(est.forest_, X),
                               atol=1e-5)


def test_sparse_model_folder_round_trip(sparse_case, tmp_path):
    image, X, _, _, _, est = sparse_case
    save_model(_model(est), tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    fa = est.forest_
    assert doc["n_sparse"] == n_sparse(fa) and doc["sparse_nonzero"] == fa.sparse_index.size
    assert doc["sparse_dtype"] == str(fa.sparse_weight.dtype)
    back = load_model(tmp_path / "m")
    for name in ("sparse", "sparse_ptr", "sparse_index", "sparse_weight"):
        a, b = getattr(fa, name), getattr(back.arrays, name)
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(back.to_estimator().predict_proba(X), est.predict_proba(X))


def test_mixed_model_folder_round_trip(tmp_path):
    _, X, _, _, y = _image_and_windows(2)
    est = mixed_forest(X, y)
    save_model(_model(est, "co2"), tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.arrays.weights.shape[0] > 0 and n_sparse(back.arrays) > 0
    np.testing.assert_array_equal(back.to_estimator().predict_proba(X), est.predict_proba(X))


def test_damaged_sparse_arrays_are_refused(sparse_case, tmp_path):
    import h5py

    *_, est = sparse_case
    save_model(_model(est), tmp_path / "m")
    with h5py.File(tmp_path / "m" / "forest.h5", "r+") as f:
        ptr = f["forest/sparse_ptr"][()]
        ptr[-1] += 5
        del f["forest/sparse_ptr"]
        f["forest/sparse_ptr"] = ptr
    with pytest.raises(DataError, match="sparse_ptr"):
        load_model(tmp_path / "m", verify=False)


def test_count_sparse_entries_matches_naive(sparse_case):
    from facesegment.dense import count_sparse_entries

    image, X, _, _, _, est = sparse_case
    fa = est.forest_
    visits = entries = 0
    for x in X:
        for r in fa.roots:
            node = r
            while fa.left[node] >= 0:
                if fa.sparse[node] >= 0:
                    visits += 1
                    row = fa.sparse[node]
                    entries += int(fa.sparse_ptr[row + 1] - fa.sparse_ptr[row])
                node = naive.naive_leaf(fa, x, node, max_depth=fa.depth[node] + 1)
    assert count_sparse_entries(_model(est), image) == (visits, entries)
