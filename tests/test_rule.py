"""The decision rule (facesegment.rule) and its choice (facesegment.evaluation.calibrate):
the rule's terms applied as the naive formula, stored with the model (and read
from older models' metrics), applied by default everywhere, chosen on
validation faces exactly as the evaluation driver scores them."""

import json
import warnings

import numpy as np
import pytest

from facesegment.evaluation import maps, scoring as evaluation
from facesegment.evaluation.calibrate import choose_rule, held_out_records
from facesegment.dense import predict_image, predict_proba_raw
from facesegment.modelio.model import save_model
from facesegment.models import load_model
from facesegment.rule import (PAPER_RULE, DecisionRule, NoRuleWarning, decision_rule,
                              rule_of)
from tests.dense.test_inference import random_image, random_model
from tests.test_position import model_with_prior, toy_labels


def test_rule_round_trips_and_checks_its_terms():
    rule = DecisionRule(alpha=0.5, beta=0.75, sigma=1)
    assert rule.to_dict() == {"alpha": 0.5, "beta": 0.75, "sigma": 1.0}
    assert DecisionRule.from_dict(rule.to_dict()) == rule
    assert DecisionRule.from_dict({"alpha": 0.25}) == DecisionRule(alpha=0.25)  # defaults
    assert rule.replace(alpha=None, sigma=0) == DecisionRule(0.5, 0.75, 0.0)
    with pytest.raises(ValueError, match="unknown term.*shape_weight.*upgrade facesegment"):
        DecisionRule.from_dict({"alpha": 1, "shape_weight": 2})
    with pytest.raises(ValueError, match="alpha=-1 must be finite and >= 0"):
        DecisionRule(alpha=-1)
    with pytest.raises(TypeError, match="sigma must be a number"):
        DecisionRule(sigma="wide")
    with pytest.raises(Exception):
        rule.alpha = 2          # frozen
    with pytest.raises(ValueError, match="beta=0.5 needs a model with a position prior"):
        DecisionRule(beta=0.5).check(random_model(0, n_trees=1, max_depth=2))


@pytest.mark.parametrize("mode", ["full", "strict"])
def test_apply_is_the_naive_formula(mode):
    """p * s^-alpha * (pos/pi)^beta, renormalised, blurred by sigma, argmax."""
    import cv2

    from facesegment.position import position_factor

    model = model_with_prior(3, n_trees=3, max_depth=4)
    image = random_image(3, 40, 37)
    rule = DecisionRule(alpha=0.6, beta=0.8, sigma=1.5)
    raw = predict_proba_raw(model, image, mode="full")
    proba, labels = rule.apply(model, raw, mode)
    ref = raw.astype(np.float64) * model.sampling_factors ** -0.6
    ref = ref * position_factor(model.position, (40, 37)).astype(np.float64) ** 0.8
    ref /= ref.sum(-1, keepdims=True)
    ref = np.stack([cv2.GaussianBlur(ref[..., c].astype(np.float32), (0, 0), 1.5,
                                     borderType=cv2.BORDER_REPLICATE)
                    for c in range(ref.shape[-1])], -1)
    ref /= ref.sum(-1, keepdims=True)
    inner = (slice(15, 25), slice(15, 22))
    np.testing.assert_allclose(proba[inner], ref[inner], atol=1e-4)
    agree = (labels[inner] == ref[inner].argmax(-1)).mean()
    assert agree > 0.98
    if mode == "strict":
        assert (labels[:15] == 255).all() and (proba[:15] == 0).all()
    # predict_image with the same terms is exactly the rule applied
    np.testing.assert_array_equal(predict_image(model, image, mode=mode, alpha=0.6, beta=0.8,
                                                sigma=1.5)[1], labels)


def test_models_store_their_rule_and_older_metrics_load_into_one(tmp_path):
    model = model_with_prior(4, n_trees=2, max_depth=3)
    model.rule = DecisionRule(alpha=0.25, beta=0.5, sigma=2.0)
    save_model(model, tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    assert doc["rule"] == {"alpha": 0.25, "beta": 0.5, "sigma": 2.0}
    assert load_model(tmp_path / "m").rule == model.rule
    # a model saved before rules were stored: its metrics carry the choice
    del doc["rule"]
    doc["metrics"].update(alpha=0.75, beta=0.25, sigma=1.0)
    (tmp_path / "m" / "model.json").write_text(json.dumps(doc))
    old = load_model(tmp_path / "m")
    assert old.rule == DecisionRule(0.75, 0.25, 1.0) == rule_of(old)
    # neither: no rule
    plain = random_model(5, n_trees=2, max_depth=3)
    save_model(plain, tmp_path / "p")
    assert "rule" not in json.loads((tmp_path / "p" / "model.json").read_text())
    assert load_model(tmp_path / "p").rule is None
    # an unusable stored rule is one error naming the file
    doc["rule"] = {"alpha": -2}
    (tmp_path / "m" / "model.json").write_text(json.dumps(doc))
    from facesegment.errors import DataError

    with pytest.raises(DataError, match="model.json: has an unusable decision rule"):
        load_model(tmp_path / "m")


def test_entry_points_default_to_the_stored_rule_and_note_a_missing_one():
    model = model_with_prior(6, n_trees=2, max_depth=3)
    image = random_image(6, 40, 37)
    model.rule = DecisionRule(alpha=0.3, beta=0.6, sigma=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a model with a rule: no note
        got = predict_image(model, image)
    want = predict_image(model, image, alpha=0.3, beta=0.6, sigma=1.0)
    np.testing.assert_array_equal(got[1], want[1])
    assert not np.array_equal(got[1], predict_image(model, image, alpha=1, beta=0,
                                                    sigma=0)[1])
    from facesegment.faces.segment import segment_image

    np.testing.assert_array_equal(segment_image(model, image, detect="never")[0], want[1])
    # no rule: the paper's rule, and one note per model
    bare = random_model(7, n_trees=2, max_depth=3)
    with pytest.warns(NoRuleWarning, match="stores no decision rule.*choose_rule"):
        first = predict_image(bare, image)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = predict_image(bare, image)                   # once per model
        explicit = predict_image(random_model(7, n_trees=2, max_depth=3), image,
                                 alpha=1.0)                 # alpha given: no note
    np.testing.assert_array_equal(first[1], again[1])
    np.testing.assert_array_equal(first[1], explicit[1])
    assert decision_rule(bare) == PAPER_RULE


def _records(tmp_path, n, seed):
    import cv2

    from facesegment.data.datasets import FaceRecord

    out = []
    for i, lab in enumerate(toy_labels(n, (40, 37), seed)):
        img, lbl = tmp_path / f"f{seed}-{i}.png", tmp_path / f"f{seed}-{i}_label.png"
        cv2.imwrite(str(img), random_image(seed + i, 40, 37))
        cv2.imwrite(str(lbl), lab)
        out.append(FaceRecord(f"f{seed}-{i}", str(img), str(lbl)))
    return out


def test_choose_rule_picks_the_best_scores_of_the_evaluation_driver(tmp_path):
    model = model_with_prior(11, n_trees=3, max_depth=4, kinds=("axis",))
    records = _records(tmp_path, 3, 50)
    rule, rec = choose_rule(model, records, alphas=[0.0, 0.5, 1.0], betas=[1.0, 4.0],
                            sigmas=[2.0], mode="full", progress=False)
    ref = evaluation.choose_alpha(model, records, [0.0, 0.5, 1.0], betas=[0.0, 1.0, 4.0],
                                  mode="full", progress=False)
    assert (rule.alpha, rule.beta) == (ref["alpha"], ref["beta"])
    assert rec["position_selection"]["betas"] == ref["validation_jaccard_beta"]
    zero = ref["validation_jaccard_beta"]["0.0"]
    assert zero[repr(rec["alpha_no_prior"])] == max(zero.values())
    sm = maps.evaluate_smoothed(model, records, alpha=rule.alpha, beta=rule.beta,
                                      sigmas=[0.0, 2.0], mode="full", progress=False)
    table = {k: v["mean_jaccard"] for k, v in sm["sigma"].items()}
    assert rec["sigma_selection"]["validation_jaccard"] == table
    assert table[repr(rule.sigma)] == max(table.values())
    assert rec["alpha"] == rule.alpha and rec["n_images"] == 3
    # one alpha and nothing else: taken as given, nothing scored
    fixed, r = choose_rule(model, records, alphas=[0.25], progress=False)
    assert fixed == DecisionRule(alpha=0.25) and r == {"n_images": 3, "alpha": 0.25,
                                                       "beta": 0.0, "sigma": 0.0}


def test_choose_rule_errors_name_the_fix(tmp_path):
    model = random_model(12, n_trees=2, max_depth=3)
    with pytest.raises(ValueError, match="records is empty"):
        choose_rule(model, [])
    records = _records(tmp_path, 1, 70)
    with pytest.raises(ValueError, match="betas need a model with a position prior"):
        choose_rule(model, records, betas=[0.5])
    with pytest.raises(ValueError, match="alphas must be a non-empty list"):
        choose_rule(model, records, alphas=[])


def test_held_out_records_never_include_a_source_of_the_windows(tmp_path):
    from types import SimpleNamespace

    records = _records(tmp_path, 4, 80)
    meta = SimpleNamespace(sources=[r.name for r in records[:3]], attrs={})
    got, note = held_out_records(meta, tmp_path, n_images=0)
    assert [r.name for r in got] == [records[3].name] and "held out" in note
    got, _ = held_out_records(meta, tmp_path, n_images=0, excluded={records[0].name})
    assert sorted(r.name for r in got) == sorted([records[0].name, records[3].name])
    meta.sources = [r.name for r in records]
    got, note = held_out_records(meta, tmp_path)
    assert got == [] and "all 4 labelled faces were used for the windows" in note
    assert held_out_records(meta)[1] == "the windows file records no data folder"
