"""The evaluation driver (facesegment.evaluation.scoring) on a tiny random model and faces:
every setting of one pass equals predicting that setting alone, the pixel grid,
the modes, per-image scores, alpha choice, and validation at the boundary."""

import numpy as np
import pytest

from facesegment.data.datasets import load_face
from facesegment.evaluation.scoring import (best_alpha, choose_alpha, evaluate, full_summary,
                                            grid_label)
from facesegment.evaluation.timing import time_inference
from facesegment.dense import predict_image
from facesegment.evaluation.metrics import border_mask, class_average, confusion_matrix, jaccard
from tests.dense.test_inference import random_model
from tests.evaluation.test_metrics import _write_faces


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    return _write_faces(tmp_path_factory.mktemp("faces"), n=3, size=40)


@pytest.fixture(scope="module")
def model():
    return random_model(3, n_trees=4, max_depth=5)


def _reference(model, records, alpha, n_trees=None, max_depth=None, mode="strict", stride=1):
    """Confusion matrices from predicting one setting at a time: (total, per image)."""
    total, per_image = np.zeros((8, 8), np.int64), {}
    for r in records:
        image, label = load_face(r)
        _, pred = predict_image(model, image, mode=mode, alpha=alpha, n_trees=n_trees,
                                max_depth=max_depth)
        mask = border_mask(label.shape) if mode == "strict" else None
        conf = confusion_matrix(grid_label(label, stride), np.where(pred == 255, 0, pred),
                                mask=mask)
        total += conf
        per_image[r.name] = conf
    return total, per_image


def _run(model, faces, **kw):
    return evaluate(model, faces, progress=False, workers=2, **kw)


def test_one_pass_equals_every_setting_alone(model, faces):
    res = _run(model, faces, alphas=[0.5, 0.0, 1.0], tree_counts=[1, 2, 4], depths=[1, 3],
               sweep_trees=[3])
    sw = res["sweep"]
    assert sw["alphas"] == [0.5, 0.0, 1.0] and sw["n_trees"] == [1, 2, 3, 4]
    assert sw["max_depth"] == [1, 3, 5] and set(res["trees"]) == {"1", "2", "4"}
    for i, a in enumerate(sw["alphas"]):
        for k, d in enumerate(sw["max_depth"]):
            for j, n in enumerate(sw["n_trees"]):
                total, _ = _reference(model, faces, a, n_trees=n, max_depth=d)
                want = class_average(jaccard(total))
                assert sw["class_average_jaccard"][i][k][j] == pytest.approx(want, abs=1e-3)
                if d == 5 and str(n) in res["trees"]:
                    assert res["trees"][str(n)]["alpha"][repr(a)]["confusion"] == \
                        total.tolist()
    # the same numbers as separate runs of the driver
    alone = _run(model, faces, alphas=[1.0], tree_counts=[2])
    assert alone["trees"]["2"] == {"alpha": {"1.0": res["trees"]["2"]["alpha"]["1.0"]}}


def test_per_image_scores_and_summary(model, faces):
    res = _run(model, faces, alphas=[1.0, 0.25], per_image_alpha=0.25)
    assert res["per_image_alpha"] == 0.25 and res["sweep"]["alphas"] == [0.25, 1.0]
    _, per = _reference(model, faces, 0.25)
    for name, conf in per.items():
        assert res["per_image"][name] == pytest.approx(class_average(jaccard(conf)), abs=1e-3)
        assert res["per_image_jaccard"][name] == pytest.approx(
            [None if np.isnan(v) else v for v in jaccard(conf)], abs=1e-3)
    assert res["n_images"] == 3
    s = full_summary(res, model.class_names)
    assert s["confusion"] == res["trees"]["4"]["alpha"]["0.25"]["confusion"]
    assert s["class_average_jaccard"] == res["trees"]["4"]["alpha"]["0.25"]["mean_jaccard"]
    assert list(s["jaccard"]) == list(model.class_names)


@pytest.mark.parametrize("mode, stride", [("strict", 3), ("full", 1), ("full", 2)])
def test_pixel_grid_and_modes(model, faces, mode, stride):
    res = _run(model, faces, alphas=[1.0], mode=mode, pixel_stride=stride)
    total, _ = _reference(model, faces, 1.0, mode=mode, stride=stride)
    assert res["trees"]["4"]["alpha"]["1.0"]["confusion"] == total.tolist()
    assert res["n_pixels"] == total.sum() and res["pixel_stride"] == stride
    labels = [grid_label(load_face(r)[1], stride) for r in faces]
    if mode == "full":   # every pixel but label 255
        assert res["n_pixels"] == sum(int((lab != 255).sum()) for lab in labels)
    else:                # the 15-px border is not scored
        assert res["n_pixels"] == sum(int(((lab != 255) & border_mask(lab.shape)).sum())
                                      for lab in labels)


def test_grid_label():
    lab = (np.arange(64 * 64).reshape(64, 64) % 8).astype(np.uint8)
    g = grid_label(lab, 3)
    assert (g != 255).sum() == 22 * 22 and (g[::3, ::3] == lab[::3, ::3]).all()
    assert grid_label(lab, 1) is lab


def test_best_and_chosen_alpha(model, faces):
    res = _run(model, faces, alphas=[0.0, 0.5, 1.0])
    table = {a: v["mean_jaccard"] for a, v in res["trees"]["4"]["alpha"].items()}
    best = best_alpha(res, 4)
    assert table[best] == max(table.values())
    rec = choose_alpha(model, faces, [0.0, 0.5, 1.0], workers=2, progress=False)
    assert rec == {"alpha": float(best), "beta": 0.0, "n_images": 3, "n_trees": 4,
                   "validation_jaccard": table}
    tie = {"trees": {"2": {"alpha": {"1.0": {"mean_jaccard": 5.0},
                                     "0.5": {"mean_jaccard": 5.0},
                                     "0.0": {"mean_jaccard": None}}}}}
    assert best_alpha(tie, 2) == "0.5"          # ties: the smaller alpha


@pytest.mark.parametrize("kw, err, words", [
    ({"sweep_trees": [5]}, ValueError, ["sweep_trees=5", "4 trees"]),
    ({"tree_counts": [0]}, ValueError, ["tree_counts=0", "4 trees"]),
    ({"tree_counts": [2.5]}, TypeError, ["tree_counts", "2.5"]),
    ({"alphas": []}, ValueError, ["alphas is empty"]),
    ({"alphas": [-1]}, ValueError, ["alphas=-1", ">= 0"]),
    ({"alphas": 0.5}, TypeError, ["alphas must be a list"]),
    ({"mode": "loose"}, ValueError, ["mode='loose'", "strict"]),
    ({"pixel_stride": 0}, ValueError, ["pixel_stride=0", ">= 1"]),
    ({"depths": [-1]}, ValueError, ["depths=-1"]),
    ({"per_image_alpha": float("nan")}, ValueError, ["per_image_alpha"]),
])
def test_bad_settings_are_refused_before_any_work(model, faces, kw, err, words):
    kw = {"alphas": [1.0], **kw}
    with pytest.raises(err) as exc:
        evaluate(model, faces, progress=False, **kw)
    for w in words:
        assert w in str(exc.value), str(exc.value)


def test_no_records_and_not_a_model(model):
    with pytest.raises(ValueError, match="records is empty"):
        evaluate(model, [], alphas=[1.0])
    with pytest.raises(TypeError, match="load_model"):
        evaluate(object(), [], alphas=[1.0])


def test_depths_above_the_forest_mean_its_depth(model, faces):
    res = _run(model, faces, alphas=[1.0], depths=[99, None, 2])
    assert res["sweep"]["max_depth"] == [2, 5]


def test_time_inference(model, faces):
    res = time_inference(model, faces[:1], [2, 4], mode="strict", progress=False)
    assert set(res) == {"2", "4"}
    r = res["4"]
    assert r["n_images"] == 1 and r["mode"] == "strict" and r["ms_per_image"] > 0
    assert r["oblique_visits_per_image"] > 0       # the random forest has oblique nodes
    assert r["dot_arithmetic"] == "float32"        # (int8/int16 rows: "integer")
    with pytest.raises(ValueError, match="tree_counts=9"):
        time_inference(model, faces[:1], [9], progress=False)
