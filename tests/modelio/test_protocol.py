"""The face-model protocol (facesegment.modelio.protocol): every model class has
it, the shipped models carry their cards, ``save`` round-trips each class, and no
caller tells the classes apart any more."""

import re
from pathlib import Path

import numpy as np
import pytest

from facesegment.autocontext.cascade import Cascade
from facesegment.models.landmark import LandmarkModel
from facesegment.models.mesh import MeshModel
from facesegment.faces.votes import VoteSpec
from facesegment.modelio.model import Model
from facesegment.models import load_model
from facesegment.modelio.protocol import CARD_FILE, FaceModel, read_card
from facesegment.models import model_path, shipped
from facesegment.rule import DecisionRule
from tests.autocontext.test_cascade import fit, toy_faces, toy_windows
from tests.dense.test_inference import random_model

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = ("kind", "rule", "card", "class_names", "dense", "predict_face", "photo_faces",
           "photo_labels", "require", "face_finder", "save")


@pytest.fixture(scope="module")
def data():
    """The toy faces and windows a small cascade is fitted on."""
    images, labels = toy_faces()
    return images, labels, toy_windows(images, labels)


def _models(data):
    """One in-memory model of each class."""
    forest = random_model(3, kind="axis", n_trees=2, max_depth=3, kinds=("axis",))
    return {"forest": forest, "cascade": fit(data),
            "landmarks": LandmarkModel(VoteSpec(), fallback=forest),
            "mesh": MeshModel([forest.to_estimator()])}


def test_every_class_is_a_face_model(data):
    models = _models(data)
    assert [type(m) for m in models.values()] == [Model, Cascade, LandmarkModel, MeshModel]
    for name, m in models.items():
        assert isinstance(m, FaceModel), name
        assert all(hasattr(m, member) for member in MEMBERS), name
        assert isinstance(m.kind, str) and m.kind
        assert m.rule is None or isinstance(m.rule, DecisionRule)
        assert m.card is None                           # built in memory: no folder, no card
        assert m.dense is (name in ("forest", "cascade"))
        assert isinstance(m.face_finder("dlib"), str)
    assert not isinstance(object(), FaceModel)


@pytest.mark.parametrize("name", shipped())
def test_each_shipped_model_is_a_face_model_with_its_card(name):
    m = load_model(model_path(name))
    assert isinstance(m, FaceModel) and isinstance(m.rule, DecisionRule)
    assert m.card == (model_path(name) / CARD_FILE).read_text(encoding="utf-8")
    assert name in m.card


def test_save_round_trips_every_class_and_the_card_is_read_from_the_folder(tmp_path, data):
    for name, m in _models(data).items():
        folder = tmp_path / name
        assert Path(m.save(folder)) == folder
        back = load_model(folder)
        assert type(back) is type(m) and back.kind == m.kind and back.card is None
        (folder / CARD_FILE).write_text(f"# {name}\n", encoding="utf-8")
        assert load_model(folder).card == f"# {name}\n"
    assert read_card(None) is None and read_card(tmp_path) is None


def test_a_forest_is_a_chain_of_one_stage(data):
    forest = random_model(4, n_trees=1, max_depth=2)
    assert forest.stages == [forest] and forest.final is forest
    assert forest.context(np.zeros((5, 5, 3), np.uint8)) is None
    cascade = fit(data)
    assert len(cascade.stages) == 2 and cascade.final is cascade.stages[-1]


#: Telling the model classes apart where the protocol answers instead.
DISPATCH = [re.compile(p) for p in (
    r"hasattr\([\w.]+,\s*[\"']stages[\"']\)",
    r"isinstance\([\w.]+,\s*\(?\s*(Model|Cascade|LandmarkModel|MeshModel)\b",
    r"[\"']mesh-forest[\"']\s*(==|!=|in\b)|(==|!=)\s*[\"']mesh-forest[\"']",
    r"getattr\([\w.]+,\s*[\"']kind[\"'],[^)]*\)\s*(==|!=|in\b)")]


def test_no_caller_tells_the_model_classes_apart():
    bad = []
    for folder in ("facesegment", "pipelines"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if any(p.search(line) for p in DISPATCH):
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, "use the face-model protocol (facesegment.modelio.protocol):\n" + \
        "\n".join(bad)
