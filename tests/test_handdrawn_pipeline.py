"""The hand-drawn pipeline: its report renders the docs and the README's table,
and the shipped default is the method it chose."""

import json

import numpy as np
import pytest

from pipelines.handdrawn import REPORT, ROOT, _dilated, gain_candidates, summarise
from pipelines.handdrawn_common import Method
from pipelines.handdrawn_report import render, with_readme_table
from pipelines.handdrawn_ship import best_method


@pytest.fixture(scope="module")
def cv():
    if not REPORT.is_file():
        pytest.skip(f"{REPORT} is not there (python -m pipelines.handdrawn cv)")
    return json.loads(REPORT.read_text())


def test_readme_and_docs_hold_the_reports_numbers(cv):
    readme = (ROOT / "README.md").read_text()
    assert with_readme_table(readme, cv, best_method(cv)) == readme, \
        "README.md's hand-drawn table is stale: python -m pipelines.handdrawn doc"
    bench = ROOT / "reports" / "bench" / "mesh.json"
    assert (ROOT / "docs" / "handdrawn.md").read_text() == render(
        cv, json.loads(bench.read_text()) if bench.is_file() else None)


def test_the_shipped_default_is_the_chosen_method(cv):
    from facesegment.models import DEFAULT, model_path

    doc = json.loads((model_path(DEFAULT) / "mesh-model.json").read_text())
    method = best_method(cv)
    assert doc["metrics"]["method"] == method
    assert doc["gains"] == cv["methods"][method]["gains"]
    assert doc.get("mix", 0.0) == cv["methods"][method].get("mix", 0.0)
    assert doc["metrics"]["leave_people_out"] == cv["methods"][method]


def test_dilation_grows_and_shrinks_each_part():
    drawn = np.zeros((20, 20), np.uint8)
    drawn[5:15, 5:15] = 1
    drawn[8:12, 8:12] = 2
    grown = _dilated(drawn, {2: 2, 3: 0, 4: 0, 5: 0})
    assert (grown == 2).sum() > (drawn == 2).sum() and (grown == 1).sum() > 0
    shrunk = _dilated(drawn, {2: -1, 3: 0, 4: 0, 5: 0})
    assert 0 < (shrunk == 2).sum() < (drawn == 2).sum()


def test_gain_candidates_keep_background_and_other_at_one():
    gains = list(gain_candidates())
    assert len(set(gains)) == len(gains) and (1.0,) * 6 in gains
    assert all(g[0] == g[1] == 1.0 and g[4] == g[5] for g in gains)


def test_summaries_sum_counts_before_dividing():
    class F:
        def __init__(self, name, pan):
            self.name, self.pan = name, pan
    faces = [F("a", 0.0), F("b", 15.0)]
    counts = {"a": np.array([[1, 2]] * 5), "b": np.array([[3, 4]] * 5)}
    out = summarise(faces, counts, subset={"a"})
    assert out["all"]["mean"] == round(100 * 4 / 6, 2)
    assert out["default_found"]["mean"] == 50.0 and out["default_found"]["n"] == 1
    assert out["per_pan"] == {"0": 50.0, "15": 75.0}
    assert out["per_pan_class"]["15"] == {str(c): 75.0 for c in (0, 2, 3, 4, 5)}


def test_per_pan_classes_leave_an_empty_class_out_and_name_the_far_eye():
    """A class never drawn nor predicted at a pan is None there; the far eye of a
    turn is eye R for a negative pan and eye L for a positive one."""
    from pipelines.handdrawn import far_eye_drawn

    class F:
        def __init__(self, name, pan, labels=None):
            self.name, self.pan, self.labels = name, pan, labels
    counts = {"a": np.array([[1, 2], [1, 2], [1, 2], [1, 2], [0, 0]])}
    out = summarise([F("a", -90.0)], counts)
    assert out["per_pan_class"]["-90"]["5"] is None and out["per_pan"]["-90"] == 50.0
    lab = np.zeros((4, 4), np.uint8)
    right, left = lab.copy(), lab.copy()
    right[0, 0], left[0, 0] = 5, 4
    faces = [F("l", -90.0, right), F("m", -90.0, left), F("n", 90.0, left),
             F("o", 90.0, right), F("p", 0.0, right)]
    assert far_eye_drawn(faces) == {"-90": {"drawn": 1, "photos": 2},
                                    "90": {"drawn": 1, "photos": 2}}


def test_the_pan_section_says_what_the_far_eye_costs_a_full_turn():
    from pipelines.handdrawn_report import _per_class_pan

    per = {"-90": {"0": 99.0, "2": 70.0, "3": 60.0, "4": 50.0, "5": 0.0},
           "0": {"0": 99.0, "2": 80.0, "3": 80.0, "4": 80.0, "5": 80.0},
           "90": {"0": 99.0, "2": 70.0, "3": 60.0, "4": None, "5": 51.0}}
    cv = {"default_found": None, "far_eye_drawn": {"-90": {"drawn": 2, "photos": 14},
                                                   "90": {"drawn": 0, "photos": 14}},
          "methods": {"mesh-axis-2": {"all": {"mean": 1.0}, "per_pan_class": per}}}
    text = "\n".join(_per_class_pan(cv))
    assert "| eye R | 0.00 | 80.00 | 51.00 |" in text and "| eye L | 50.00 | 80.00 | – |" in text
    assert "2 of the 14 photos at -90 and 0 of the 14 photos at 90" in text
    assert "69.75 at -90 and 70.00 at 90" in text


def test_the_gain_search_ranks_as_the_exact_labels_score():
    """GainSearch re-weights maps pasted once; its counts match the labels
    photo_labels draws under the same gains up to a few boundary pixels."""
    from pathlib import Path

    from facesegment.faces.mesh_train import photo_labels, prepare_face
    from pipelines.handdrawn_gains import GainSearch
    from tests.faces.test_mesh_model import TEMPLATE, synthetic

    mesh = np.load(TEMPLATE).astype(np.float64) * 160.0 + np.array([200.0, 210.0, 0.0])
    image, labels = synthetic(mesh)
    face = prepare_face(image, labels, mesh, "f", 1, 0.0)
    rng = np.random.default_rng(0)
    s = face.planes.shape[0]
    import cv2

    proba = cv2.GaussianBlur(rng.random((s, s, 6)).astype(np.float32) ** 4, (0, 0), 2.0)
    proba[..., 0] += (face.drawn == 0) * 0.5      # background outside the drawn face
    proba /= proba.sum(axis=-1, keepdims=True)
    search = GainSearch([face], {"f": proba})
    for gains in ((1, 1, 1, 1, 1, 1), (1, 1, 1.5, 1.25, 3.0, 3.0)):
        from facesegment.evaluation.handdrawn import handdrawn_counts

        exact = handdrawn_counts(photo_labels(face, proba, gains), face.labels)
        fast = search.counts(gains)["f"]
        assert np.all(np.abs(fast - exact) <= 0.03 * exact[:, 1:2] + 5), (gains, fast, exact)
    assert Path(TEMPLATE).is_file()


def test_each_held_out_person_gets_the_stage_mix_best_on_the_others(monkeypatch, tmp_path):
    """forest_counts chooses the first stage's share per held-out person among
    the method's mixes, on the other people: with a first stage that is right
    and a last stage that is noise, every person gets the largest share, and the
    counts are those of the mixed probabilities' exact labels."""
    import cv2

    from facesegment.evaluation.handdrawn import handdrawn_counts
    from facesegment.faces import mesh_train
    from facesegment.faces.mesh_stages import LABEL_TO_TRAIN, mix_stages
    from facesegment.faces.mesh_train import photo_labels, prepare_face
    from pipelines import handdrawn
    from tests.faces.test_mesh_model import TEMPLATE, synthetic

    mesh = np.load(TEMPLATE).astype(np.float64) * 160.0 + np.array([200.0, 210.0, 0.0])
    image, labels = synthetic(mesh)
    faces = [prepare_face(image, labels, mesh, f"p{g}", g, 0.0) for g in (1, 2, 3)]
    lut = np.zeros(256, np.int64)
    for label, c in LABEL_TO_TRAIN.items():
        lut[label] = c
    rng = np.random.default_rng(1)
    s = faces[0].planes.shape[0]
    stages = {}
    for f in faces:
        good = cv2.GaussianBlur(np.eye(6, dtype=np.float32)[lut[f.crop_labels]], (0, 0), 1.0)
        noise = rng.random((s, s, 6)).astype(np.float32)
        stages[f.name] = [good, noise / noise.sum(axis=-1, keepdims=True)]
    calls = []
    monkeypatch.setattr(mesh_train, "cross_validate", lambda *a, **k: calls.append(1) or stages)
    method = Method("axis", 2, 1, 10, mixes=(0.0, 0.5))
    counts, extra = handdrawn.forest_counts(faces, method, cache=tmp_path, name="m")
    # the cache gives the same stages back without training; other forests miss it
    again, extra2 = handdrawn.forest_counts(faces, method, cache=tmp_path, name="m")
    assert len(calls) == 1 and extra2 == extra
    assert all(np.array_equal(again[n], counts[n]) for n in counts)
    handdrawn.forest_counts(faces, Method("axis", 2, 2, 10), cache=tmp_path, name="m")
    assert len(calls) == 2
    assert extra["mix_per_fold"] == {"1": 0.5, "2": 0.5, "3": 0.5} and extra["mix"] == 0.5
    for f in faces:
        gains = extra["gains_per_fold"][str(f.group)]
        want = handdrawn_counts(photo_labels(f, mix_stages(stages[f.name], 0.5), gains),
                                f.labels)
        np.testing.assert_array_equal(counts[f.name], want)


def test_keep_others_takes_only_other_forest_rows_of_the_same_photos(tmp_path):
    """cv --keep-others keeps the forest methods not run again from the old report,
    never an old row of a method it ran or of a non-forest method, and refuses a
    report of other photos."""
    from pipelines.handdrawn import keep_other_methods

    base = {"data": "d", "n_photos": 3, "n_people": 2, "mesh_found": 3, "default_found": 2}
    old = {**base, "methods": {"mesh-axis": {"mean": 1}, "mesh-axis-2": {"mean": 2},
                               "mesh-drawn": {"mean": 3}}, "faces300w": {"x": 1}}
    path = tmp_path / "cv.json"
    path.write_text(json.dumps(old))
    new = {**base, "methods": {"mesh-axis-2": {"mean": 5}, "mesh-drawn": {"mean": 6}}}
    got = keep_other_methods(new, path, ["mesh-axis-2"])
    assert got["methods"] == {"mesh-axis": {"mean": 1}, "mesh-axis-2": {"mean": 5},
                              "mesh-drawn": {"mean": 6}}
    assert got["faces300w"] == {"x": 1}   # not computed by cv: kept
    with pytest.raises(SystemExit, match="other photos"):
        keep_other_methods({**new, "n_photos": 4}, path, ["mesh-axis-2"])
    with pytest.raises(SystemExit, match="existing report"):
        keep_other_methods(new, tmp_path / "none.json", ["mesh-axis-2"])


def test_card_refreshes_the_metrics_only_for_the_models_own_rule(cv, tmp_path, monkeypatch):
    """``handdrawn card`` writes the cv report's row into the shipped model's
    metrics (forests untouched) and refuses a report that chose another rule."""
    import shutil

    import pipelines.handdrawn_common as common
    from facesegment.atomic import overwriting
    from facesegment.models import DEFAULT, model_path
    from pipelines.handdrawn_ship import rewrite_card

    shutil.copytree(model_path(DEFAULT), tmp_path / DEFAULT)
    forest = (tmp_path / DEFAULT / "stage-1" / "forest.h5").read_bytes()
    method = best_method(cv)
    report = tmp_path / "cv.json"
    monkeypatch.setattr(common, "REPORT", report)
    changed = json.loads(json.dumps(cv))
    changed["methods"][method]["cv_seconds"] = 1.5
    report.write_text(json.dumps(changed))
    with overwriting():   # as `python -m pipelines.handdrawn` runs it: the copy is a
        rewrite_card(DEFAULT, tmp_path)   # checkout's file, not one facesegment wrote
    doc = json.loads((tmp_path / DEFAULT / "mesh-model.json").read_text())
    assert doc["metrics"]["leave_people_out"]["cv_seconds"] == 1.5
    assert (tmp_path / DEFAULT / "stage-1" / "forest.h5").read_bytes() == forest
    changed["methods"][method]["gains"] = [1.0] * 6
    report.write_text(json.dumps(changed))
    with overwriting(), pytest.raises(SystemExit, match="another method or rule"):
        rewrite_card(DEFAULT, tmp_path)


def test_turned_photos_draw_more_pixels_in_copies():
    """weigh_turned weighs only the photos turned TURNED degrees or more (either
    way), in copies: the faces it is given keep their weights."""
    from facesegment.faces.mesh_train import PreparedFace
    from pipelines.handdrawn_common import TURNED, weigh_turned

    faces = [PreparedFace(str(p), "a", float(p), None)
             for p in (-90, -TURNED, -60, 0, TURNED - 1, 90)]
    faces.append(PreparedFace("nan", "a", float("nan"), None))
    assert weigh_turned(faces, 1.0) is faces
    out = weigh_turned(faces, 2.0)
    assert [f.weight for f in out] == [2.0, 2.0, 1.0, 1.0, 1.0, 2.0, 1.0]
    assert all(f.weight == 1.0 for f in faces) and out[3] is faces[3]


def test_a_margin_per_stage_is_said_per_stage():
    """The cv log, the docs and the model card name each stage's margin."""
    from pipelines.handdrawn_common import margin_text
    from pipelines.handdrawn_report import _reading
    from pipelines.handdrawn_ship import margin_words

    assert margin_text(6.0) == "6" and margin_text((6.0, 3.0)) == "6 (stage 1), 3 (stage 2)"
    assert "the second about those at most 3/64" in _reading({"margin": [6.0, 3.0]})
    assert "more than 6/64" in _reading({"margin": 6.0}) and _reading({}) == ""
    assert "first 16 trees" in _reading({"margin": None, "early": [16, 0.7]})
    assert "stage 2 those at most 3/64" in margin_words([6.0, 3.0])
    assert margin_words(None) == "" and "more than 6/64" in margin_words([6.0, 6.0])


def test_only_the_default_methods_are_shipped_and_the_coarse_reading_is_said():
    """best_method ranks the rows of DEFAULT_METHODS only: an experiment beside them
    (here one that scores higher) is measured, never shipped; the docs and the
    method say when a method reads every other pixel first."""
    from pipelines.handdrawn_common import DEFAULT_METHODS, FOREST_METHODS
    from pipelines.handdrawn_report import _reading

    row = lambda v: {"all": {"mean": v}}   # noqa: E731
    cv = {"methods": {"mesh-axis": row(70.0), "mesh-axis-2": row(79.0),
                      "mesh-axis-2-full": row(79.1), "faces300w-landmarks": row(90.0)}}
    assert best_method(cv) == "mesh-axis-2"
    assert "mesh-axis-2-full" not in DEFAULT_METHODS
    assert FOREST_METHODS["mesh-axis-2"].coarse is not None
    assert FOREST_METHODS["mesh-axis-2-full"].coarse is None
    assert "less than 0.1, giving" in _reading({"margin": 6.0, "coarse": 0.1})
    assert "less than 0, giving" in _reading({"margin": 6.0, "coarse": 0.0})
    assert "coarse" not in _reading({"margin": 6.0, "coarse": None}) + _reading({})
    both = _reading({"early": [16, 0.7], "coarse": 0.1})
    assert both.index("(`MeshModel.early`)") < both.index("Each stage reads") \
        < both.index("(`MeshModel.coarse`)")
    from pipelines.handdrawn_report import reading_sentences

    assert reading_sentences(None, None) == []
    assert [w in s for w, s in zip(("first 16 trees", "less than 0.1"),
                                   reading_sentences([16, 0.7], 0.1))] == [True, True]
