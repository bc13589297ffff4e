"""Figures are written (non-empty PNGs) from tiny random models and results."""

import json

import numpy as np
import pytest

from facesegment.evaluation.scoring import evaluate
from facesegment.evaluation.figures import (colorize, confusion_figure, curves, figure3, figure4,
                                 make_figures, pick_examples)
from facesegment.data.imageio import read_image
from tests.dense.test_inference import random_model
from tests.evaluation.test_metrics import _write_faces


def _png_ok(path):
    img = read_image(path)
    assert img.shape[0] > 50 and img.shape[1] > 50 and img.std() > 0


def test_colorize_and_pick_examples():
    lab = np.array([[0, 3], [255, 7]], np.uint8)
    rgb = colorize(lab)
    assert tuple(rgb[1, 0]) == (128, 128, 128) and tuple(rgb[0, 0]) == (0, 0, 0)
    per = {"a": {"x": 10.0, "y": 20.0, "z": 30.0, "w": None},
           "b": {"x": 5.0, "y": 1.0, "z": 9.0, "w": 2.0}}
    picked = pick_examples(per, n_random=5, seed=0)
    assert picked[0] == ("y", "median a") and picked[1] == ("w", "median b")
    assert sorted(n for n, _ in picked) == ["w", "x", "y", "z"]
    assert pick_examples(per, 1, 0) == pick_examples(per, 1, 0)


def test_drawing_functions(tmp_path):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)
    lab = rng.integers(0, 8, (40, 40)).astype(np.uint8)
    rows = [{"title": "r", "image": img, "truth": lab, "preds": {"axis": lab, "co2": lab},
             "scores": {"axis": 50.0, "co2": None}}]
    _png_ok(figure3(rows, tmp_path / "f3.png", ["axis", "co2"],
                    labels={"co2": "a long display name of the CO2 forest"}))
    _png_ok(figure4({"axis": ([1, 2, 4], [10, 12, 13])}, {"axis": ([1, 2], [5, 9])},
                    tmp_path / "f4.png", labels={"axis": "random forest"}))
    _png_ok(confusion_figure(rng.integers(0, 100, (8, 8)), tmp_path / "c.png", "t"))
    assert not list(tmp_path.glob("*.tmp*"))


@pytest.mark.slow
def test_make_figures_from_random_models(tmp_path):
    recs = _write_faces(tmp_path / "faces", n=3, size=36)
    models = {"axis": random_model(1, kind="axis", n_trees=3, max_depth=3, kinds=("axis",)),
              "co2": random_model(2, kind="co2", n_trees=2, max_depth=3)}
    res = make_figures(models, recs, tmp_path / "out", alpha=0.5, n_random=1, depth_trees=2,
                       progress=False, workers=1)
    for name in ("figure3.png", "figure4.png", "confusion_axis.png", "confusion_co2.png"):
        _png_ok(tmp_path / "out" / name)
    numbers = json.loads((tmp_path / "out" / "figures.json").read_text())
    assert numbers["trees"]["axis"][0] == [1, 2, 3]
    assert len(numbers["depth"]["co2"][0]) == len(numbers["depth"]["co2"][1])
    titles = "".join(res["figure3_rows"])
    assert "median axis" in titles and "median co2" in titles
    assert sum("random" in t for t in res["figure3_rows"]) == 1


def test_curves_of_an_evaluation():
    ev = {"sweep": {"alphas": [0.5, 1.0], "max_depth": [2, 4], "n_trees": [1, 2, 4],
                    "class_average_jaccard": [[[1, 2, 3], [4, 5, 6]], [[0, 0, 0], [0, 0, 0]]]}}
    trees, depth, n = curves(ev, depth_trees=2)
    assert trees == ([1, 2, 4], [4, 5, 6]) and depth == ([2, 4], [2, 5]) and n == 2
    assert curves(ev, depth_trees=16)[2] == 4      # capped at the forest's size


@pytest.mark.slow
def test_make_figures_draws_given_evaluations(tmp_path):
    """The pipeline's way: results already computed are drawn, not recomputed,
    with display names; a result without its model is refused."""
    recs = _write_faces(tmp_path / "faces", n=2, size=36)
    model = random_model(1, kind="axis", n_trees=3, max_depth=3, kinds=("axis",))
    ev = evaluate(model, recs, alphas=[1.0, 0.5], per_image_alpha=0.5, tree_counts=[2, 3],
                  sweep_trees=[1], depths=[2], progress=False, workers=1)
    res = make_figures({"axis": model}, recs, tmp_path / "out", evaluations={"axis": ev},
                       labels={"axis": "random forest (axis-aligned)"}, n_random=0,
                       progress=False)
    assert res["alphas"] == {"axis": 0.5} and res["per_image"]["axis"] == ev["per_image"]
    assert res["trees"]["axis"] == curves(ev)[0] and res["depth_trees"] == 3
    assert res["labels"] == {"axis": "random forest (axis-aligned)"}
    for name in ("figure3.png", "figure4.png", "confusion_axis.png"):
        _png_ok(tmp_path / "out" / name)
    assert str(tmp_path / "out" / "figures.json") in res["written"]
    with pytest.raises(ValueError, match="co2"):
        make_figures({"axis": model}, recs, tmp_path / "out", evaluations={"co2": ev})
    with pytest.raises(ValueError, match="n_random=-1"):
        make_figures({"axis": model}, recs, tmp_path / "out", n_random=-1)
