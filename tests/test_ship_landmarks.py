"""Shipping the landmark model (pipelines/ship_landmarks.py, `make model`)."""

import json

import facesegment.faces.landmark_fit as lf
from facesegment.models.landmark import is_landmark_folder
from facesegment.models import load_model
from facesegment.faces.votes import VoteSpec
from pipelines import ship_landmarks
from tests.test_pipelines import make_dataset


def test_ship_writes_the_folder_its_card_and_the_scores(tmp_path, monkeypatch):
    data = make_dataset(tmp_path / "faces", n_train=3, n_test=2)
    seen = {}

    def fake_fit(records, spec=None, cache=None, progress=True):
        seen["n_train"] = len(list(records))
        return VoteSpec(offset=(1.25, -0.5))

    def fake_scores(model, splits, aligned_dir, log=print):
        row = {"mean_jaccard": 80.5, "jaccard": [99.0, 90.0, 85.0, 85.0, 75.0, 75.0, 65.0, 65.0]}
        ren = dict(row, mean_jaccard=78.9)
        return {k: {"votes": row, "renderer": ren, "n_faces": 2, "votes_found": 2,
                    "renderer_found": 2}
                for k in ("validation", "test crops", "detector-aligned")}

    monkeypatch.setattr(lf, "fit_votes", fake_fit)
    monkeypatch.setattr(ship_landmarks, "score_all", fake_scores)
    out = ship_landmarks.ship(data, "lm", dest=tmp_path / "dest", reports=tmp_path / "rep",
                              n_validation=1, log=lambda *a: None)
    assert is_landmark_folder(out) and seen["n_train"] >= 1
    model = load_model(out)
    assert model.votes.offset == (1.25, -0.5) and model.fallback_name == "faces300w-two-probe"
    assert model.metrics["test crops"] == 80.5
    card = (out / "MODEL_CARD.md").read_text()
    assert "| test crops (2) | lm | **80.50** |" in card and "renderer (one landmark set)" in card
    assert "research use only" in card.lower()
    rep = json.loads((tmp_path / "rep" / "shipped.json").read_text())
    assert rep["offset"] == [1.25, -0.5] and rep["scores"]["validation"]["votes"]["mean_jaccard"] == 80.5
    again = ship_landmarks.ship(data, "lm", dest=tmp_path / "dest", reports=tmp_path / "rep",
                                n_validation=1, log=lambda *a: None)
    assert (again / "landmark-model.json").read_bytes() == (out / "landmark-model.json").read_bytes()
