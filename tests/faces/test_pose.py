"""Head pan from a face mesh: features, the ridge model, mirroring, its dict.

The face is ``data/pan0_mesh_template.npy``: the mean MediaPipe mesh (478 x 3,
float32) of the 14 frontal (pan 0) fasseg-v3-train photos and of their mirror
images, centred and scaled to a face-oval width of 1 (z larger = farther).  It
is turned about the vertical axis by known angles and projected orthographically.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from facesegment.faces.pose import (DEFAULT_TERMS, FEATURE_NAMES, N_FEATURES, N_ODD, PanModel,
                                    fit_pan_model, mirror_features, pan_features)

TEMPLATE = Path(__file__).parent / "data" / "pan0_mesh_template.npy"


@pytest.fixture(scope="module")
def template():
    face = np.load(TEMPLATE).astype(np.float64)
    assert face.shape == (478, 3)
    return face


def turned(face, pan, scale=200.0, at=(300.0, 250.0)):
    """The face turned by ``pan`` degrees (+ = toward the image's left), in pixels."""
    t = np.radians(pan)
    rot = np.array([[np.cos(t), 0, np.sin(t)], [0, 1, 0], [-np.sin(t), 0, np.cos(t)]])
    return face @ rot.T * scale + np.array([at[0], at[1], 0.0])


def mirrored(mesh):
    out = mesh.copy()
    out[:, 0] = 640 - out[:, 0]
    return out


@pytest.fixture(scope="module")
def model(template):
    pans = np.arange(-90, 91, 10)
    return fit_pan_model([turned(template, p) for p in pans], pans)


def test_features_are_scale_free_and_odd_ones_flip_with_the_mirror(template):
    mesh = turned(template, 35)
    f = pan_features(mesh)
    assert f.shape == (N_FEATURES,) == (len(FEATURE_NAMES),) and f.dtype == np.float64
    assert np.allclose(pan_features(turned(template, 35, scale=37.0, at=(10, -5))), f)
    assert np.allclose(pan_features(mirrored(mesh)), mirror_features(f))
    assert np.all(f[:N_ODD] < 0)          # turned toward the image's left: offsets negative
    assert abs(pan_features(template)[0]) < 0.01     # the frontal template is symmetric
    # a mirrored MediaPipe mesh names each left/right twin by the other's index:
    # features read point sets, so swapping the eyes' indices changes nothing
    from facesegment.faces.mesh import LEFT_EYE, RIGHT_EYE
    swapped = mesh.copy()
    swapped[list(LEFT_EYE)], swapped[list(RIGHT_EYE)] = mesh[list(RIGHT_EYE)], mesh[list(LEFT_EYE)]
    assert np.allclose(pan_features(swapped), f)


def test_turned_template_gives_monotone_pans_within_15_degrees(template, model):
    held_out = np.arange(-85, 86, 10)
    pred = np.array([model.predict(turned(template, p)) for p in held_out])
    assert np.all(np.diff(pred) > 0)
    assert np.abs(pred - held_out).max() < 15
    assert abs(model.predict(template)) < 3


def test_mirrored_mesh_gives_the_negated_pan(template, model):
    for pan in (-70, -25, 5, 40, 80):
        mesh = turned(template, pan)
        assert model.predict(mirrored(mesh)) == pytest.approx(-model.predict(mesh), abs=1e-6)


def test_prediction_is_clipped_and_fit_is_deterministic(template):
    pans = np.arange(-90, 91, 15)
    meshes = [turned(template, p) for p in pans]
    a, b = fit_pan_model(meshes, pans), fit_pan_model(meshes, pans)
    assert a == b and a.terms == DEFAULT_TERMS
    huge = PanModel(((0,),), (-1e6,))
    assert huge.predict(turned(template, 30)) == 90.0
    assert huge.predict(turned(template, -30)) == -90.0
    with pytest.raises(ValueError, match="meshes but"):
        fit_pan_model(meshes, pans[:-1])
    with pytest.raises(ValueError, match="not odd"):
        fit_pan_model(meshes, pans, terms=((6,),))


def test_dict_round_trips_through_json_and_rejects_bad_dicts(model):
    d = json.loads(json.dumps(model.to_dict()))
    assert PanModel.from_dict(d) == model
    bad = [
        {**d, "kind": "other"},
        {**d, "weights": d["weights"][:-1]},
        {**d, "weights": [float("nan")] + d["weights"][1:]},
        {**d, "weights": ["1.0"] + d["weights"][1:]},
        {**d, "ridge": float("inf")},
        {**d, "ridge": -1.0},
        {**d, "terms": [[0], [99]]},
        {**d, "terms": [[0], []]},
        {**d, "terms": [[0], [0, 1]]},           # even in x
        {**d, "features": d["features"][:-1]},
        {k: v for k, v in d.items() if k != "terms"},
        [d],
    ]
    for b in bad:
        with pytest.raises(ValueError, match="pan model"):
            PanModel.from_dict(b)


@pytest.mark.parametrize("mesh", [np.zeros((478, 3)), np.full((478, 3), 7.5),
                                  np.full((478, 2), 3.0), np.full((478, 3), np.nan),
                                  np.where(np.arange(478)[:, None] % 2, 1e300, -1e300)
                                  * np.ones((1, 3))])
def test_features_are_finite_on_degenerate_meshes(mesh, model):
    f = pan_features(mesh)
    assert f.shape == (N_FEATURES,) and np.all(np.isfinite(f))
    assert np.isfinite(model.predict(mesh))


def test_bad_shapes_are_refused():
    for shape in ((10, 3), (478,), (478, 1)):
        with pytest.raises(ValueError, match="pan_features"):
            pan_features(np.zeros(shape))
