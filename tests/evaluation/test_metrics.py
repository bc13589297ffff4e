"""Known-answer tests of the confusion matrix, Jaccard scores and summaries
(scoring a model: tests/evaluation/test_evaluation.py)."""

import numpy as np
import pytest

from facesegment.data.datasets import FaceRecord
from facesegment.data.imageio import write_png_atomic
from facesegment.evaluation.metrics import (border_mask, class_average, confusion_matrix, jaccard,
                                 markdown_table, pixel_accuracy, summarize)
from tests import naive
from tests.dense.test_inference import random_image


def test_identical_maps_score_100():
    rng = np.random.default_rng(0)
    t = rng.integers(0, 8, (20, 30)).astype(np.uint8)
    conf = confusion_matrix(t, t)
    assert np.all(jaccard(conf) == 100)
    assert class_average(jaccard(conf)) == 100
    assert pixel_accuracy(conf) == 100


def test_hand_computed_case():
    truth = np.array([[0, 0, 1, 1], [2, 2, 255, 1]], np.uint8)
    pred = np.array([[0, 1, 1, 1], [2, 0, 3, 0]], np.uint8)
    conf = confusion_matrix(truth, pred)
    # class 0: tp 1; fp 2 (truth 2 -> 0, truth 1 -> 0); fn 1 (truth 0 -> 1)  -> 25
    # class 1: tp 2; fp 1 (truth 0 -> 1); fn 1 (truth 1 -> 0)                  -> 50
    # class 2: tp 1; fp 0; fn 1 (truth 2 -> 0)                                -> 50
    # class 3 is predicted only at an ignored pixel: absent (NaN), not averaged
    jac = jaccard(conf)
    np.testing.assert_allclose(jac[:3], [25.0, 50.0, 50.0])
    assert np.all(np.isnan(jac[3:]))
    assert class_average(jac) == pytest.approx(125 / 3)
    assert pixel_accuracy(conf) == pytest.approx(100 * 4 / 7)
    np.testing.assert_array_equal(conf, naive.naive_confusion(truth, pred))


def test_absent_in_truth_but_predicted_counts_as_zero():
    truth = np.zeros((4, 4), np.uint8)
    pred = truth.copy()
    pred[0, 0] = 5
    jac = jaccard(confusion_matrix(truth, pred))
    assert jac[5] == 0 and jac[0] == pytest.approx(100 * 15 / 16)
    assert np.isnan(jac[1])
    assert class_average(jac) == pytest.approx((100 * 15 / 16) / 2)


def test_empty_and_random_against_reference():
    conf = np.zeros((8, 8), np.int64)
    assert np.all(np.isnan(jaccard(conf))) and np.isnan(class_average(jaccard(conf)))
    assert np.isnan(pixel_accuracy(conf))
    rng = np.random.default_rng(1)
    t = rng.choice([0, 1, 2, 255], (30, 30)).astype(np.uint8)
    p = rng.integers(0, 4, (30, 30)).astype(np.uint8)
    conf = confusion_matrix(t, p)
    np.testing.assert_array_equal(conf, naive.naive_confusion(t, p))
    np.testing.assert_allclose(jaccard(conf), naive.naive_jaccard(conf), equal_nan=True)
    stacked = np.stack([conf, 2 * conf])
    np.testing.assert_allclose(jaccard(stacked)[1], jaccard(conf), equal_nan=True)


def test_mask_and_validation():
    t = np.zeros((40, 40), np.uint8)
    assert confusion_matrix(t, t, mask=border_mask(t.shape)).sum() == 100
    assert border_mask((20, 50)).sum() == 0
    with pytest.raises(ValueError, match="same image"):
        confusion_matrix(t, t[:3])
    with pytest.raises(ValueError, match="0..7"):
        confusion_matrix(t, np.full_like(t, 9))


def test_summary_and_table():
    t = np.array([[0, 1], [1, 1]], np.uint8)
    s = summarize(confusion_matrix(t, t))
    assert s["jaccard"]["nose"] is None and s["class_average_jaccard"] == 100
    assert s["pixels"] == 4
    table = markdown_table({"m": s}, "title")
    assert "| m | 100.0 | 100.0 | n/a" in table


def _write_faces(tmp_path, n=3, size=40):
    recs = []
    for i in range(n):
        img = random_image(100 + i, size, size + 2)
        lab = np.random.default_rng(i).integers(0, 8, img.shape[:2]).astype(np.uint8)
        lab[:2] = 255
        write_png_atomic(tmp_path / f"f{i}.png", img)
        write_png_atomic(tmp_path / f"f{i}_label.png", lab)
        recs.append(FaceRecord(f"f{i}", str(tmp_path / f"f{i}.png"),
                               str(tmp_path / f"f{i}_label.png")))
    return recs
