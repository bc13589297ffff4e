"""The landmark-conditioned shape prior: the warp against naive references and
scikit-image, fitting, the model folder, the landmark-free path, determinism."""

import json

import numpy as np
import pytest

from facesegment.faces import shape_frame as sf
from facesegment.faces import shape_prior as sp
from facesegment.faces.landmarks import render_labels


def face_points(seed=0, scale=1.0, shift=(0.0, 0.0), jitter=1.5):
    """A plausible 68-point face in a 250 x 250 crop: a fixed template (jaw arc,
    brows, nose, eyes, mouth) scaled, shifted and jittered."""
    rng = np.random.default_rng(seed)
    t = np.linspace(np.pi * 0.95, np.pi * 0.05, 17)
    jaw = np.stack([125 + 60 * np.cos(t), 110 + 70 * np.sin(t)], 1)
    brows = np.stack([np.r_[np.linspace(75, 115, 5), np.linspace(135, 175, 5)],
                      np.r_[85, 80, 78, 80, 84, 84, 80, 78, 80, 85]], 1)
    bridge = np.stack([np.full(4, 125.0), np.linspace(95, 130, 4)], 1)
    nose = np.stack([np.linspace(110, 140, 5), np.r_[138, 141, 143, 141, 138]], 1)

    def eye(cx):
        a = np.linspace(0, 2 * np.pi, 7)[:6]
        return np.stack([cx + 13 * np.cos(a), 100 + 5 * np.sin(a)], 1)

    a = np.linspace(0, 2 * np.pi, 13)[:12]
    mouth_out = np.stack([125 + 25 * np.cos(a), 162 + 9 * np.sin(a)], 1)
    b = np.linspace(0, 2 * np.pi, 9)[:8]
    mouth_in = np.stack([125 + 15 * np.cos(b), 162 + 4 * np.sin(b)], 1)
    pts = np.concatenate([jaw, brows, bridge, nose, eye(100), eye(150), mouth_out, mouth_in])
    assert pts.shape == (68, 2)
    c = np.array([125.0, 125.0])
    return (pts - c) * scale + c + np.asarray(shift) + rng.normal(0, jitter, pts.shape)


# ------------------------------------------------------------ naive references

def naive_piecewise_affine(src, dst, simplices, coords):
    """Map each point by the affine map of the first triangle of ``simplices``
    (over ``src``) that holds it, by barycentric coordinates; (-1, -1) outside."""
    out = np.full((len(coords), 2), -1.0)
    for i, (x, y) in enumerate(coords):
        for tri in simplices:
            (x1, y1), (x2, y2), (x3, y3) = src[tri]
            den = (y2 - y3) * (x1 - x3) + (x3 - x2) * (y1 - y3)
            l1 = ((y2 - y3) * (x - x3) + (x3 - x2) * (y - y3)) / den
            l2 = ((y3 - y1) * (x - x3) + (x1 - x3) * (y - y3)) / den
            l3 = 1.0 - l1 - l2
            if min(l1, l2, l3) >= -1e-9:
                out[i] = l1 * dst[tri[0]] + l2 * dst[tri[1]] + l3 * dst[tri[2]]
                break
    return out


def naive_bilinear(data, x, y):
    """Bilinear sample of ``data`` (H, W) at float ``(x, y)``, 0 outside."""
    h, w = data.shape
    x0, y0 = int(np.floor(x)), int(np.floor(y))
    fx, fy = x - x0, y - y0
    val = 0.0
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            yy, xx = y0 + dy, x0 + dx
            if 0 <= yy < h and 0 <= xx < w:
                val += wy * wx * data[yy, xx]
    return val


# --------------------------------------------------------------------- warp

def test_piecewise_affine_matches_naive_reference_and_scikit_image():
    from skimage.transform import PiecewiseAffineTransform

    mean = sf.mean_shape_of([face_points(s) for s in range(5)])
    src, dst = sf.control_points(face_points(9, 1.1, (4, -3), 3.0), mean)
    pa = sf.PiecewiseAffine(src, dst)
    rng = np.random.default_rng(1)
    coords = np.concatenate([rng.uniform(-40, 290, (300, 2)), src[:10] + 0.25,
                             [[1e4, 1e4], [-1e4, 5.0]]])
    got = pa(coords)
    ref = naive_piecewise_affine(src, dst, pa.mesh.simplices, coords)
    np.testing.assert_allclose(got, ref, atol=1e-7)
    np.testing.assert_array_equal(got[-2:], -1.0)        # outside the mesh
    sk = PiecewiseAffineTransform.from_estimate(src, dst)
    np.testing.assert_allclose(got, sk(coords), atol=1e-7)
    np.testing.assert_allclose(pa(src), dst, atol=1e-7)   # control points land exactly


def test_the_map_back_from_a_face_inverts_the_map_into_the_frame():
    mean = sf.mean_shape_of([face_points(s) for s in range(5)])
    pts = face_points(4, 0.95, (3, 5), 3.0)
    fwd, inv = sf.frame_to_face(pts, mean), sf.face_to_frame(pts, mean)
    np.testing.assert_array_equal(fwd.triangles, inv.triangles)   # one mesh, both ways
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 250, (400, 2))
    y = fwd(x)
    np.testing.assert_allclose(inv(y), x, atol=1e-7)
    src, dst = sf.control_points(pts, mean)
    np.testing.assert_allclose(inv(y), naive_piecewise_affine(dst, src, inv.triangles, y),
                               atol=1e-7)
    # the pixel grid's triangles (rasterised, then checked) are the exact ones
    ys, xs = np.mgrid[0:250, 0:250]
    grid = np.column_stack([xs.ravel(), ys.ravel()]).astype(float)
    np.testing.assert_array_equal(inv.grid_simplices((250, 250)), inv.simplices(grid))


def test_coinciding_landmarks_make_flat_triangles_that_hold_no_pixel():
    mean = sf.mean_shape_of([face_points(s) for s in range(5)])
    pts = face_points(2, jitter=0.5)
    pts[61:64] = pts[65:68][::-1]          # a closed mouth: inner lips coincide
    inv = sf.face_to_frame(pts, mean)
    assert inv.flat.any()
    ys, xs = np.mgrid[0:250, 0:250]
    grid = np.column_stack([xs.ravel(), ys.ravel()]).astype(float)
    s = inv.grid_simplices((250, 250))
    np.testing.assert_array_equal(s, inv.simplices(grid))
    assert not inv.flat[s[s >= 0]].any()
    maps = sf.warp_from_frame(np.ones((250, 250, 2), np.float32), pts, mean, (250, 250))
    assert np.isfinite(maps).all() and (maps[40:210, 40:210] == 1).all()


def test_warp_to_frame_samples_the_face_where_the_naive_map_says():
    mean = sf.mean_shape_of([face_points(s) for s in range(4)], size=120)
    pts = face_points(3, 0.9, (6, 2), 2.0)
    rng = np.random.default_rng(2)
    data = rng.random((250, 250)).astype(np.float32)
    got = sf.warp_to_frame(data, pts, mean, 120)
    assert got.shape == (120, 120) and got.dtype == np.float32
    src, dst = sf.control_points(pts, mean)
    ys, xs = rng.integers(0, 120, 200), rng.integers(0, 120, 200)
    where = naive_piecewise_affine(src, dst, sf.PiecewiseAffine(src, dst).mesh.simplices,
                                   np.stack([xs, ys], 1).astype(float))
    want = [naive_bilinear(data, x, y) for x, y in where]
    # cv2.remap's bilinear weights are quantised to 1/32 px
    np.testing.assert_allclose(got[ys, xs], want, atol=0.06)


def test_warp_of_a_linear_ramp_is_the_map_itself_and_round_trips():
    mean = sf.mean_shape_of([face_points(s) for s in range(4)])
    pts = face_points(5, 1.05, (-5, 4), 2.0)
    ys, xs = np.mgrid[0:250, 0:250].astype(np.float32)
    ramp = np.stack([xs, ys], -1)
    fwd = sf.warp_to_frame(ramp, pts, mean, 250)      # face (x, y) of each frame pixel
    src, dst = sf.control_points(pts, mean)
    gx, gy = np.mgrid[0:250, 0:250]
    mapped = sf.PiecewiseAffine(src, dst)(np.stack([gy.ravel(), gx.ravel()], 1))
    inside = ((mapped >= 1) & (mapped <= 248)).all(1).reshape(250, 250)
    np.testing.assert_allclose(fwd[inside], mapped.reshape(250, 250, 2)[inside], atol=0.05)
    back = sf.warp_from_frame(fwd, pts, mean, (250, 250))
    core = np.zeros((250, 250), bool)
    core[60:190, 60:190] = True
    # two bilinear resamplings (cv2.remap: weights in 1/32 px) of a stretched mesh
    np.testing.assert_allclose(back[core], ramp[core], atol=0.5)
    assert np.median(np.abs(back[core] - ramp[core])) < 0.05


def test_bad_landmarks_are_refused_with_a_clear_message():
    mean = sf.mean_shape_of([face_points(0)])
    with pytest.raises(ValueError, match=r"68 finite \(x, y\) landmarks"):
        sf.control_points(np.zeros((5, 2)), mean)
    bad = face_points(0)
    bad[3] = np.nan
    with pytest.raises(ValueError, match="68 finite"):
        sf.warp_to_frame(np.zeros((10, 10)), bad, mean, 50)
    with pytest.raises(ValueError, match="degenerate"):
        sf.control_points(np.ones((68, 2)), mean)
    with pytest.raises(ValueError, match="only degenerate triangles"):
        sf.PiecewiseAffine(np.zeros((4, 2)) + [[0, 0], [1, 1], [2, 2], [3, 3]], np.zeros((4, 2)),
                           simplices=[[0, 1, 2], [1, 2, 3]])
    with pytest.raises(ValueError, match="must both be"):
        sf.PiecewiseAffine(np.zeros((4, 2)), np.zeros((5, 2)))


# ------------------------------------------------------------------ fitting

def toy_faces(n=6):
    pts = [face_points(s, 1 + 0.03 * (s % 3), (s % 4 - 2, s % 3 - 1)) for s in range(n)]
    return [render_labels(p, (250, 250)) for p in pts], pts


def test_fit_shape_prior_puts_each_part_where_the_landmarks_draw_it():
    labels, pts = toy_faces()
    # a face without landmarks (None) is left out
    prior = sp.fit_shape_prior(labels + [labels[0]], pts + [None], 8, sigma=0, pseudo=0)
    assert prior.n_images == 6 and prior.maps.shape == (250, 250, 8)
    np.testing.assert_allclose(prior.maps.sum(-1), 1.0, atol=1e-5)
    for lab, p in zip(labels, pts):
        pred = np.argmax(sp.shape_maps(prior, p, lab.shape), -1)
        assert (pred == lab).mean() > 0.98
        for c in range(1, 8):   # every part found where it is drawn
            inter = ((pred == c) & (lab == c)).sum()
            assert inter / ((pred == c) | (lab == c)).sum() > 0.6
    assert (sp.prior_labels(prior, pts[0], (250, 250)) == np.argmax(
        sp.shape_maps(prior, pts[0], (250, 250)), -1)).all()


def test_fit_refuses_mismatched_or_empty_inputs():
    labels, pts = toy_faces(2)
    with pytest.raises(ValueError, match="2 label maps but 1 landmark sets"):
        sp.fit_shape_prior(labels, pts[:1], 8)
    with pytest.raises(ValueError, match="no training face has landmarks"):
        sp.fit_shape_prior(labels, [None, None], 8)
    with pytest.raises(ValueError, match="sigma=-1 must be a finite number >= 0"):
        sp.fit_shape_prior(labels, pts, 8, sigma=-1)
    with pytest.raises(ValueError, match="size=8 must be an integer >= 16"):
        sp.fit_shape_prior(labels, pts, 8, size=8)


def test_fit_is_deterministic():
    labels, pts = toy_faces(4)
    a = sp.fit_shape_prior(labels, pts, 8)
    b = sp.fit_shape_prior(labels, pts, 8)
    np.testing.assert_array_equal(a.maps, b.maps)
    np.testing.assert_array_equal(a.mean_shape, b.mean_shape)
    np.testing.assert_array_equal(sp.shape_maps(a, pts[1], (200, 230)),
                                  sp.shape_maps(b, pts[1], (200, 230)))


# ----------------------------------------------------------- the fallback

def test_a_face_without_landmarks_takes_the_landmark_free_path():
    labels, pts = toy_faces(3)
    prior = sp.fit_shape_prior(labels, pts, 8)
    assert sp.shape_maps(prior, None, (250, 250)) is None
    assert sp.shape_factor(prior, None, (250, 250)) is None
    assert sp.prior_labels(prior, None, (250, 250)) is None
    scores = np.random.default_rng(0).random((250, 250, 8)).astype(np.float32)
    np.testing.assert_array_equal(sp.combine(scores, None, 1.0), scores)
    f = sp.shape_factor(prior, pts[0], (250, 250))
    np.testing.assert_array_equal(sp.combine(scores, f, 0.0), scores)
    out = sp.combine(scores, f, 1.0)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-5)
    want = scores * f
    np.testing.assert_array_equal(np.argmax(out, -1), np.argmax(want, -1))


# ------------------------------------------------------------ model folder

def test_the_prior_round_trips_in_a_model_folder(tmp_path):
    from facesegment.modelio.model import save_model
    from facesegment.models import load_model
    from tests.dense.test_inference import random_model

    labels, pts = toy_faces(3)
    prior = sp.fit_shape_prior(labels, pts, 8, size=64)
    model = random_model(0, n_trees=2, max_depth=3)
    model.shape_prior = prior
    model.metrics["gamma"] = 0.75
    save_model(model, tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    assert doc["shape_prior"]["size"] == 64 and "shape-prior.npz" in doc["files"]
    back = load_model(tmp_path / "m")
    for name in ("maps", "mean_shape", "class_prior"):
        np.testing.assert_array_equal(getattr(back.shape_prior, name), getattr(prior, name))
    assert back.metrics["gamma"] == 0.75 and back.shape_prior.n_images == 3
    save_model(back, tmp_path / "m")           # a model folder with a prior is replaced
    plain = random_model(0, n_trees=2, max_depth=3)
    save_model(plain, tmp_path / "p")
    assert load_model(tmp_path / "p").shape_prior is None
    assert not (tmp_path / "p" / "shape-prior.npz").exists()


def test_a_model_missing_or_with_a_corrupt_prior_file_is_one_clear_error(tmp_path):
    from facesegment.errors import DataError
    from facesegment.modelio.model import save_model
    from facesegment.models import load_model
    from tests.dense.test_inference import random_model

    labels, pts = toy_faces(2)
    model = random_model(0, n_trees=2, max_depth=3)
    model.shape_prior = sp.fit_shape_prior(labels, pts, 8, size=32)
    save_model(model, tmp_path / "m")
    f = tmp_path / "m" / "shape-prior.npz"
    f.write_bytes(f.read_bytes()[:-10])
    with pytest.raises(DataError, match="truncated or altered"):
        load_model(tmp_path / "m")
    f.unlink()
    with pytest.raises(DataError, match="is missing shape-prior.npz"):
        load_model(tmp_path / "m")


def test_from_arrays_refuses_inconsistent_arrays():
    labels, pts = toy_faces(2)
    arrays = sp.save_arrays(sp.fit_shape_prior(labels, pts, 8, size=32))
    arrays["class_prior"] = arrays["class_prior"][:5]
    with pytest.raises(ValueError, match="do not fit together"):
        sp.from_arrays(arrays, "x.npz")
    del arrays["maps"]
    with pytest.raises(ValueError, match="missing array 'maps'"):
        sp.from_arrays(arrays, "x.npz")
