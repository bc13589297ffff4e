"""A turned face's mesh fitted again in its own region (facesegment.faces.mesh_refit)."""

import math
from pathlib import Path

import numpy as np
import pytest

from facesegment.faces import mesh as M
from facesegment.faces.mesh_refit import REFIT_SCALE, Refitter, check_refit, mesh_region, mesh_turn

TEMPLATE = Path(__file__).parent / "data" / "pan0_mesh_template.npy"
FASSEG = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "fasseg-v3-train"


def _mesh():
    return np.load(TEMPLATE).astype(np.float64)


def test_the_region_is_the_meshs_extent_scaled_and_levelled_by_its_eye_corners():
    mesh = _mesh()
    lo, hi = mesh[:468, :2].min(0), mesh[:468, :2].max(0)
    cx, cy, sx, sy, rot = mesh_region(mesh, 400, 300)
    assert (cx * 400, cy * 300) == pytest.approx(tuple((lo + hi) / 2))
    assert sx * 400 == pytest.approx(REFIT_SCALE * max(hi - lo))
    assert sy * 300 == pytest.approx(sx * 400)                  # square in pixels
    assert abs(rot) < math.radians(10)                           # a level face
    turned = mesh.copy()
    c = turned[:, :2].mean(0)
    a = math.radians(20)                                         # the head rolled 20 degrees
    r = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    turned[:, :2] = (turned[:, :2] - c) @ r.T + c
    assert mesh_region(turned, 400, 300)[4] == pytest.approx(rot + a, abs=1e-9)


def test_the_turn_grows_with_the_nose_tips_offset_and_ignores_its_sign():
    mesh = _mesh()
    moved = mesh.copy()
    moved[M.NOSE_TIP, 0] += 0.3 * np.ptp(mesh[list(M.FACE_OVAL), 0])
    assert mesh_turn(mesh) < 0.1 < mesh_turn(moved)
    mirrored = M._mirror_x(moved, 500)[list(M.TWINS)]
    assert mesh_turn(mirrored) == pytest.approx(mesh_turn(moved))


@pytest.mark.parametrize("bad", [-0.1, float("nan"), "0.3", True, [0.3]])
def test_a_bad_refit_is_refused(bad):
    with pytest.raises(ValueError, match="refit"):
        check_refit(bad)
    assert check_refit(None) is None and check_refit(0) == 0.0


def test_refits_keep_a_fit_the_network_gives_up_on_and_mirror_the_twin(monkeypatch):
    """Refitter.refits refits the mesh on the photo and the twin on the mirrored
    photo (mirrored back, points renamed); a fit the network drops stays."""
    import facesegment.faces.mesh_refit as R

    mesh = _mesh()
    twin = mesh + 2.0
    w = 500
    seen = []

    def fake_refit(graph, rgb, m):
        seen.append((rgb[0, 0, 0], m.copy()))
        return None if rgb[0, 0, 0] == 0 and len(seen) > 2 else m + 1.0

    monkeypatch.setattr(R, "refit_graph", lambda: object())
    monkeypatch.setattr(R, "refit_mesh", fake_refit)
    monkeypatch.setattr(R, "require_mesh", lambda: None)
    image = np.zeros((400, w, 3), np.uint8)
    image[:, -1] = 9                      # the mirrored photo starts with 9
    finder = R.Refitter()
    again, twin_again = finder.refits(image, mesh, twin)
    np.testing.assert_array_equal(again, mesh + 1.0)
    assert seen[1][0] == 9                                      # read on the mirrored photo
    np.testing.assert_allclose(seen[1][1], M._unmirror(twin, w))
    np.testing.assert_allclose(twin_again, M._unmirror(M._unmirror(twin, w) + 1.0, w))
    again, none = finder.refits(image, mesh)                   # dropped: kept as found
    np.testing.assert_array_equal(again, mesh)
    assert none is None


@pytest.fixture()
def finder():
    if not M.mesh_available():
        pytest.skip("needs MediaPipe's face mesh (make setup installs it)")
    return M.MeshFinder()


def test_a_full_profile_is_refitted_near_the_face_the_hand_drew(finder):
    import cv2

    from facesegment.data.imageio import read_image

    path = FASSEG / "fasseg-v3train-panp90-personne01152.jpg"
    if not path.is_file():
        pytest.skip(f"needs {path}")
    image = read_image(path)
    (found,) = finder.find(image)
    (twin,) = finder.mirror_fits(image, [found])
    again, twin_again = Refitter().refits(image, found, twin)
    assert again.shape == twin_again.shape == (478, 3)
    assert np.isfinite(again).all() and np.isfinite(twin_again).all()
    assert mesh_turn(found) >= 0.45 and not np.array_equal(again, found)
    truth = cv2.imread(str(path)[:-4] + "_label.png", -1)
    ys, xs = np.nonzero(truth == 2)
    for m in (again, twin_again):     # both nose tips lie on the nose the hand drew
        tip = m[M.NOSE_TIP, :2]
        assert xs.min() - 15 <= tip[0] <= xs.max() + 15
        assert ys.min() - 15 <= tip[1] <= ys.max() + 15
