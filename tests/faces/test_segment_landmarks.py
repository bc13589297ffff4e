"""`segment` and landmarks: label's detection passes, the shape prior applied per
face through its landmarks, the landmark-free fallback, the CSV's columns."""

import csv

import numpy as np
import pytest

import facesegment.faces.crops as crops
import facesegment.faces.folder as folder
import facesegment.faces.photo as photo
import facesegment.faces.segment as seg
from facesegment.faces import shape_prior as sp
from facesegment.data.imageio import write_png_atomic
from facesegment.faces.landmarks import render_labels
from tests.dense.test_inference import random_model
from tests.faces.test_shape_prior import face_points


class _Rect:
    def __init__(self, x, y, s):
        self.x, self.y, self.s = x, y, s

    def left(self):
        return self.x

    def top(self):
        return self.y

    def width(self):
        return self.s

    def height(self):
        return self.s


class _Detector:
    """A dlib detector that finds a face only in the pass named ``finds``."""

    def __init__(self, finds):
        self.finds, self.calls = finds, []

    def __call__(self, image, upsample):
        self.calls.append(("call", upsample))
        hit = {0: "default", 1: "upsampled"}[upsample] == self.finds
        return [_Rect(10, 20, 50)] if hit else []

    def run(self, image, upsample, threshold):
        self.calls.append(("run", upsample, threshold))
        return ([_Rect(10, 20, 50)] if self.finds == "low-threshold" else []), [], []


@pytest.mark.parametrize("finds", ["default", "upsampled", "low-threshold", ""])
def test_detection_uses_the_passes_of_label_and_names_the_one_that_found(finds, monkeypatch):
    det = _Detector(finds)
    monkeypatch.setattr(crops, "_dlib_models", lambda: (det, None))
    passes = []
    boxes = crops.detect_faces(np.zeros((300, 1200, 3), np.uint8), "dlib", passes=passes)
    assert passes == [finds] and len(boxes) == (1 if finds else 0)
    n = {"default": 1, "upsampled": 2, "low-threshold": 3, "": 3}[finds]
    assert len(det.calls) == n          # each pass only when the ones before found nothing
    if n == 3:                          # label's lowered threshold: upsampled, -0.5
        assert det.calls[-1] == ("run", 1, -0.5)
    info = {}
    crops.find_crops(np.zeros((300, 1200, 3), np.uint8), "dlib", info=info)
    assert info["detection"] == finds and info["points"] == [None] * len(boxes)


def _prior_model(gamma=1.0):
    labels = [render_labels(face_points(s), (250, 250)) for s in range(4)]
    model = random_model(0, n_trees=2, max_depth=3, kinds=("axis",))
    model.shape_prior = sp.fit_shape_prior(labels, [face_points(s) for s in range(4)], 8)
    model.metrics["gamma"] = gamma
    return model


def _plain(model):
    from dataclasses import replace

    return replace(model, shape_prior=None)


def test_each_face_takes_the_landmark_path_or_the_fallback(monkeypatch):
    model = _prior_model()
    image = np.random.default_rng(0).integers(0, 256, (400, 500, 3), dtype=np.uint8)
    good = face_points(7) + [100, 60]                  # a face at (100, 60) in the photo
    bad = np.random.default_rng(1).uniform(0, 400, (68, 2))   # points no face has
    boxes = [crops.landmark_box(good), (300.0, 100.0, 150.0), crops.landmark_box(bad)]

    def fake(*a, info=None, **k):
        info.update(detection="upsampled", points=[good, None, bad])
        return boxes

    monkeypatch.setattr(photo, "find_crops", fake)
    info = {}
    labels, faces, proba = seg.segment_image(model, image, detect="always", return_proba=True,
                                             info=info)
    assert faces == 3 and (info["detection"], info["paths"]) == (
        "upsampled", ["landmarks", "landmark-free", "landmark-free"])
    assert [f.landmarks is None for f in info["faces"]] == [False, True, False]
    assert sp.landmark_residual(bad, model.shape_prior.mean_shape) > sp.MAX_RESIDUAL
    # the prior moves the first face's decisions toward its landmarks' parts
    info0 = {}
    labels0 = seg.segment_image(_plain(model), image, detect="always", info=info0)[0]
    assert info0["paths"] == ["landmark-free"] * 3
    truth = render_labels(good, image.shape[:2])
    r0, r1, c0, c1 = 80, 250, 120, 250
    assert (labels[r0:r1, c0:c1] == truth[r0:r1, c0:c1]).mean() > \
        (labels0[r0:r1, c0:c1] == truth[r0:r1, c0:c1]).mean() + 0.2
    # points given in the photo are moved into the crop's pixels
    pts = seg.crop_points(good, boxes[0])
    x0, y0, side = boxes[0]
    np.testing.assert_allclose(pts, (good - [x0, y0] + 0.5) * 250 / side - 0.5, atol=1e-9)


def test_summary_csv_says_which_pass_and_which_path(tmp_path, monkeypatch):
    model = _prior_model()
    img = np.random.default_rng(2).integers(0, 256, (300, 320, 3), dtype=np.uint8)
    write_png_atomic(tmp_path / "in" / "a.png", img)
    write_png_atomic(tmp_path / "in" / "b.png", img)
    face = face_points(1) + [20, 10]

    def fake(image, *a, info=None, **k):
        info.update(detection="low-threshold", points=[face, None])
        return [crops.landmark_box(face), (200.0, 100.0, 90.0)]

    monkeypatch.setattr(photo, "find_crops", fake)
    folder.segment_folder(model, tmp_path / "in", tmp_path / "out", detect="always",
                       n_workers=1, progress=False)
    with open(tmp_path / "out" / "summary.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["detection"] for r in rows] == ["low-threshold"] * 2
    assert [r["paths"] for r in rows] == ["landmarks;landmark-free"] * 2


def test_a_crop_without_landmarks_falls_back(monkeypatch):
    import facesegment.faces.renderer as renderer

    model = _prior_model()
    img = np.random.default_rng(3).integers(0, 256, (250, 250, 3), dtype=np.uint8)
    monkeypatch.setattr(renderer, "predict_landmarks", lambda image: (None, ""))
    info = {}
    labels, faces = seg.segment_image(model, img, detect="auto", info=info)
    ref, _ = seg.segment_image(_plain(model), img, detect="auto")
    assert (info["detection"], info["paths"]) == ("", ["landmark-free"])
    np.testing.assert_array_equal(labels, ref)      # the forest's own decisions
    monkeypatch.setattr(renderer, "predict_landmarks",
                        lambda image: (face_points(4), "default"))
    info = {}
    seg.segment_image(model, img, detect="auto", info=info)
    assert (info["detection"], info["paths"]) == ("default", ["landmarks"])
    assert info["faces"][0].landmarks.shape == (68, 2)
