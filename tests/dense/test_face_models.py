"""predict_image takes every model (facesegment.dense._face): the forests run on
the kernels as before, the landmark and mesh models read the crop themselves
(``model.predict_face``) and give the same shape of result; facesegment.dense
never imports facesegment.faces."""

import numpy as np
import pytest

from facesegment.api import load_model
from facesegment.data.imageio import read_image
from facesegment.dense import predict_image
from facesegment.faces.segment import segment_image
from facesegment.models import shipped
from facesegment.rule import DecisionRule
from tests.autocontext.test_cascade import fit, toy_faces, toy_windows


@pytest.fixture(scope="module")
def data():
    """The toy faces and windows a small cascade is fitted on."""
    images, labels = toy_faces()
    return images, labels, toy_windows(images, labels)


def _needs(name):
    """Skip a shipped model whose face finder is not installed here."""
    from facesegment.faces.mesh import mesh_available

    if name == "faces-handdrawn" and not mesh_available():
        pytest.skip("needs MediaPipe's face mesh (the mesh extra)")
    if name == "faces300w-landmarks":
        pytest.importorskip("dlib", reason="needs the landmarks extra (dlib-bin)")


@pytest.fixture(scope="module")
def crop():
    from tests.conftest import FACES300W

    paths = sorted((FACES300W / "test").glob("*.jpg"))[:1]
    if not paths:
        pytest.skip(f"needs the shared face data at {FACES300W} (absent on this machine)")
    return read_image(paths[0])


@pytest.mark.parametrize("name", shipped())
def test_predict_image_takes_every_shipped_model(name, crop):
    _needs(name)
    model = load_model(name)
    proba, labels = predict_image(model, crop)
    assert proba.shape == crop.shape[:2] + (8,) and proba.dtype == np.float32
    np.testing.assert_allclose(proba.sum(axis=-1), 1.0, atol=1e-5)
    assert labels.shape == crop.shape[:2] and labels.dtype == np.uint8
    np.testing.assert_array_equal(labels, np.argmax(proba, axis=-1))
    # the crop as the model sees it: what segment gives for it taken as one crop
    np.testing.assert_array_equal(model.predict_face(crop), proba)
    seg = segment_image(model, crop, detect="never", return_proba=True)
    np.testing.assert_array_equal(seg[0], labels)
    strict_p, strict_l = predict_image(model, crop, mode="strict")
    assert (strict_l[:15] == 255).all() and (strict_p[:, -15:] == 0).all()
    np.testing.assert_array_equal(strict_l[15:-15, 15:-15], labels[15:-15, 15:-15])


def test_predict_image_takes_a_small_cascade(data):
    cascade = fit(data)
    cascade.rule = DecisionRule(alpha=1.0)     # the paper's rule, stored (no warning)
    image = toy_faces(1, seed=7)[0][0]
    proba, labels = predict_image(cascade, image)
    assert proba.shape == image.shape[:2] + (3,) and proba.dtype == np.float32
    np.testing.assert_allclose(proba.sum(axis=-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(cascade.predict_face(image), proba)
    faces = cascade.photo_faces(image, detect="never")
    assert len(faces) == 1 and faces[0].whole and faces[0].path == "landmark-free"
    np.testing.assert_array_equal(cascade.photo_labels(image.shape, faces)[0], labels)


class _Reader:
    """A model outside the forests that reads crops itself (``dense`` false)."""

    kind, dense, class_names = "reader", False, tuple("abcdefgh")

    def __init__(self):
        self.terms = []

    def predict_face(self, crop, alpha=None, beta=None, sigma=None):
        self.terms.append((alpha, beta, sigma))
        proba = np.zeros(crop.shape[:2] + (8,), np.float32)
        proba[..., 3] = 1.0
        return proba


def test_a_model_reading_crops_itself_gets_the_forests_shape_of_result():
    model, crop = _Reader(), np.zeros((40, 50, 3), np.uint8)
    proba, labels = predict_image(model, crop, alpha=0.5, sigma=2.0, kernels="general")
    assert (labels == 3).all() and proba.shape == (40, 50, 8)
    assert model.terms == [(0.5, None, 2.0)]
    proba, labels = predict_image(model, crop, mode="strict")
    assert (labels[:15] == 255).all() and (labels[15:25, 15:35] == 3).all()
    assert (proba[:, :15] == 0).all() and (proba[20, 20, 3] == 1)
    for bad in ({"n_trees": 2}, {"max_depth": 3}, {"fft_levels": 1},
                {"planes": np.zeros((40, 50, 1), np.uint8)}):
        with pytest.raises(ValueError, match=f"{next(iter(bad))}: a reader model has no forest"):
            predict_image(model, crop, **bad)
    with pytest.raises(ValueError, match="reads RGB uint8 face crops"):
        predict_image(model, np.zeros((40, 50), np.uint8))
    with pytest.raises(ValueError, match="mode="):
        predict_image(model, crop, mode="nearly")
    with pytest.raises(ValueError, match="kernels must be one of"):
        predict_image(model, crop, kernels="fast")


def test_dense_never_imports_the_faces_package():
    from tests.test_import_graph import import_graph

    graph = import_graph(("facesegment",))
    bad = [f"{name} -> {target}" for name, edges in graph.items()
           if name.startswith("facesegment.dense") for target in edges
           if target.startswith("facesegment.faces")]
    assert not bad, "\n".join(bad)
