"""Every (beta, alpha) of a rule's choice from one dense pass per validation face
(``confusion_sweep(..., betas=...)``, ``scoring.evaluate_betas``) gives exactly
what one pass per beta gives: the sweep's confusion matrices, ``evaluate``'s
tables and ``choose_rule``'s whole result (rule and every recorded score), for
forests with and without a position prior, of every kernel, and a cascade."""

import cv2
import numpy as np
import pytest

from facesegment.data.datasets import FaceRecord, load_face
from facesegment.dense import confusion_sweep
from facesegment.dense import predict as dense_predict
from facesegment.evaluation import maps, scoring
from facesegment.evaluation.calibrate import choose_rule
from facesegment.position import fit_position_prior
from tests.autocontext.test_cascade import fit, toy_faces, toy_windows
from tests.dense.test_inference import random_model
from tests.test_position import model_with_prior
from tests.test_rule import _records

ALPHAS = [0.0, 0.5, 1.0, 0.25]
BETAS = [0.0, 0.5, 1.0, 4.0]


def _per_beta(model, records, *, alphas, betas, n_trees=None, mode="strict", pixel_stride=1,
              workers=None, scheduler=None, desc="betas", progress=True):
    """The former computation: one full ``evaluate`` pass per beta."""
    n = model.arrays.n_trees if n_trees is None else n_trees
    return [scoring.evaluate(model, records, alphas=alphas, tree_counts=[n], mode=mode,
                             pixel_stride=pixel_stride, beta=b, workers=workers,
                             scheduler=scheduler, progress=progress)
            for b in betas]


def _choose_both(model, records, monkeypatch, **kw):
    new = choose_rule(model, records, progress=False, **kw)
    with monkeypatch.context() as m:
        m.setattr(scoring, "evaluate_betas", _per_beta)
        old = choose_rule(model, records, progress=False, **kw)
    return new, old


@pytest.mark.parametrize("kinds", [("axis",), ("two-probe",), ("oblique",)])
@pytest.mark.parametrize("mode", ["strict", "full"])
def test_sweep_of_all_betas_equals_one_sweep_per_beta(tmp_path, kinds, mode, monkeypatch):
    model = model_with_prior(21, n_trees=4, max_depth=5, kinds=kinds)
    image, label = load_face(_records(tmp_path, 1, 80)[0])
    for budget in (dense_predict.SWEEP_SCALE_BYTES, 1):   # one pass; one pass per beta
        monkeypatch.setattr(dense_predict, "SWEEP_SCALE_BYTES", budget)
        conf, d, t = confusion_sweep(model, image, label, n_trees_list=[2, 4], alphas=ALPHAS,
                                     mode=mode, betas=BETAS)
        assert conf.shape[0] == len(BETAS) * len(ALPHAS)
        for i, b in enumerate(BETAS):
            ref, d1, t1 = confusion_sweep(model, image, label, n_trees_list=[2, 4],
                                          alphas=ALPHAS, mode=mode, beta=b)
            np.testing.assert_array_equal(conf[i * len(ALPHAS):(i + 1) * len(ALPHAS)], ref)
            np.testing.assert_array_equal(d, d1)
            np.testing.assert_array_equal(t, t1)
    # the betas matter (else the comparison proves little)
    assert not np.array_equal(conf[:len(ALPHAS)], conf[-len(ALPHAS):])


@pytest.mark.parametrize("prior", [True, False])
def test_choose_rule_is_the_per_beta_choice(tmp_path, monkeypatch, prior):
    records = _records(tmp_path, 3, 90)
    records.append(FaceRecord("missed", records[0].image, records[0].label, missed=True))
    if prior:
        model = model_with_prior(31, n_trees=5, max_depth=5, kinds=("axis", "oblique"))
        kw = dict(betas=[0.25, 1.0, 4.0], sigmas=[1.5])
    else:
        model = random_model(32, n_trees=5, max_depth=5, kinds=("two-probe",))
        kw = dict(sigmas=[1.5])
    for extra in (dict(mode="full"), dict(mode="strict", pixel_stride=2, n_trees=3)):
        (rule, rec), (rule0, rec0) = _choose_both(model, records, monkeypatch,
                                                  alphas=ALPHAS, **kw, **extra)
        assert rule == rule0 and rec == rec0
        assert rec["forest_alone"]["validation_jaccard"]
    # the tables themselves, confusion matrices included
    betas = [0.0, 0.25, 1.0] if prior else [0.0]
    new = scoring.evaluate_betas(model, records, alphas=ALPHAS, betas=betas, progress=False)
    old = _per_beta(model, records, alphas=ALPHAS, betas=betas, progress=False)
    for r, r0, b in zip(new, old, betas):
        assert r["trees"] == r0["trees"] and r["n_images"] == r0["n_images"] == 4
        assert r["beta"] == r0["beta"] == b


def _face_records(tmp_path, images, labels, n=3):
    """The first ``n`` toy faces written as labelled records."""
    recs = []
    for i in range(n):
        img, lbl = tmp_path / f"c{i}.png", tmp_path / f"c{i}_label.png"
        cv2.imwrite(str(img), images[i])
        cv2.imwrite(str(lbl), labels[i])
        recs.append(FaceRecord(f"c{i}", str(img), str(lbl)))
    return recs


def _count_contexts(cascade, monkeypatch):
    """A list that grows by one at each call of ``cascade.context``."""
    calls = []
    real = cascade.context

    def counted(image, n_stages=None):
        calls.append(1)
        return real(image, n_stages)
    monkeypatch.setattr(cascade, "context", counted, raising=False)
    return calls


def test_cascade_choice_is_the_per_beta_choice(tmp_path, monkeypatch):
    images, labels = toy_faces()
    cascade = fit((images, labels, toy_windows(images, labels)))
    cascade.position = fit_position_prior(labels, 3, sigma=1.0, pseudo=0.5)
    calls = _count_contexts(cascade, monkeypatch)
    recs = _face_records(tmp_path, images, labels)
    kw = dict(alphas=ALPHAS, betas=[0.5, 2.0], mode="full", workers=1, progress=False)
    rule, rec = choose_rule(cascade, recs, **kw)
    assert len(calls) == 3          # stage 1 once per face for every (beta, alpha)
    with monkeypatch.context() as m:
        m.setattr(scoring, "evaluate_betas", _per_beta)
        rule0, rec0 = choose_rule(cascade, recs, **kw)
    assert len(calls) == 3 + 3 * 3  # the former way: once per face and beta (0, 0.5, 2)
    assert rule == rule0 and rec == rec0 and len(rec["position_selection"]["betas"]) == 3


@pytest.mark.parametrize("kinds", [("axis", "oblique"), ("two-probe",)])
def test_extra_rules_equal_their_own_evaluate(tmp_path, kinds):
    """``evaluate(..., extra_rules=...)`` (the pipeline's test scores with the
    prior, from the forest alone's pass) gives each rule what its own
    ``evaluate`` call gives, and leaves the main result as it was."""
    records = _records(tmp_path, 3, 90)
    records.append(FaceRecord("missed", records[0].image, records[0].label, missed=True))
    model = model_with_prior(41, n_trees=5, max_depth=6, kinds=kinds)
    kw = dict(tree_counts=[3, 5], mode="strict", pixel_stride=2, progress=False)
    main_kw = dict(alphas=[0.5, 1.0, 0.25], depths=[2, 4], sweep_trees=range(1, 6),
                   per_image_alpha=0.5, beta=0.0, **kw)
    rules = [(0.75, 1.0), (0.5, 0.5), (0.5, 0.0)]   # a new alpha, a new beta, a main row
    both = scoring.evaluate(model, records, extra_rules=rules, **main_kw)
    extras = both.pop("extra_rules")
    assert both == scoring.evaluate(model, records, **main_kw)
    assert len(extras) == len(rules)
    for (a, b), got in zip(rules, extras):
        want = scoring.evaluate(model, records, alphas=[a], beta=b, **kw)
        assert (got["alpha"], got["beta"]) == (a, b)
        for key in ("trees", "per_image", "per_image_jaccard", "n_pixels"):
            assert got[key] == want[key], key
    # beta 0 is a main row; the prior changes the scores (else this proves little)
    row = both["trees"]["5"]["alpha"]["0.5"]
    assert extras[2]["trees"]["5"]["alpha"]["0.5"] == row
    assert extras[1]["trees"]["5"]["alpha"]["0.5"] != row
    assert scoring.evaluate(model, records, extra_rules=[], **main_kw)["extra_rules"] == []


@pytest.mark.parametrize("kinds", [("axis", "oblique"), ("two-probe",)])
def test_smoothed_scores_equal_their_own_pass(tmp_path, kinds):
    """``evaluate(..., smoothed=(alpha, beta, sigmas))`` (the evaluate stage's
    smoothed test scores, from the plain pass's tasks) gives what
    ``evaluate_smoothed`` gives, a missed face included, and leaves the plain
    result as it was."""
    records = _records(tmp_path, 3, 90)
    records.append(FaceRecord("missed", records[0].image, records[0].label, missed=True))
    model = model_with_prior(43, n_trees=4, max_depth=6, kinds=kinds)
    kw = dict(mode="strict", pixel_stride=2, progress=False)
    main_kw = dict(alphas=[0.5, 1.0], tree_counts=[2, 4], beta=0.0, **kw)
    rule = (0.75, 1.0, [0.0, 1.5])
    both = scoring.evaluate(model, records, smoothed=rule, **main_kw)
    got = both.pop("smoothed")
    assert both == scoring.evaluate(model, records, **main_kw)
    want = maps.evaluate_smoothed(model, records, alpha=0.75, beta=1.0, sigmas=[0.0, 1.5],
                                  **kw)
    assert got == want
    assert got["sigma"]["0.0"] != got["sigma"]["1.5"]   # the sigma matters
    with pytest.raises(ValueError, match="smoothed"):
        scoring.evaluate(model, records, smoothed=(0.5, 0.0), **main_kw)
    with pytest.raises(ValueError, match="smoothed sigmas"):
        scoring.evaluate(model, records, smoothed=(0.5, 0.0, []), **main_kw)


def test_cascade_smoothed_scores_run_the_earlier_stages_once(tmp_path, monkeypatch):
    images, labels = toy_faces()
    cascade = fit((images, labels, toy_windows(images, labels)))
    recs = _face_records(tmp_path, images, labels)
    kw = dict(mode="full", pixel_stride=1, workers=1, progress=False)
    want = maps.evaluate_smoothed(cascade, recs, alpha=0.5, beta=0.0, sigmas=[1.0], **kw)
    plain = scoring.evaluate(cascade, recs, alphas=[0.5], **kw)
    calls = _count_contexts(cascade, monkeypatch)
    both = scoring.evaluate(cascade, recs, alphas=[0.5], smoothed=(0.5, 0.0, [1.0]), **kw)
    assert len(calls) == 3          # once per face for both scores
    assert both.pop("smoothed") == want
    assert both == plain
