"""Landmark votes: the spec, the mirrored markup, the vote maps, the fitted offset."""

import numpy as np
import pytest

from facesegment.faces import votes
from facesegment.faces.landmarks import read_pts, render_labels
from facesegment.evaluation.metrics import class_average, confusion_matrix, jaccard
from tests.faces.test_shape_prior import face_points


def test_spec_validates_and_round_trips():
    spec = votes.VoteSpec(offset=(1.0, 0.5))
    assert spec.n_sets == 54 and spec.flip_all                    # 27 boxes, each mirrored too
    assert votes.VoteSpec(flip_all=False).n_sets == 28            # the mirror from one box
    assert votes.VoteSpec(flip=False).n_sets == 27
    assert votes.VoteSpec.from_dict(spec.to_dict()) == spec
    old = {k: v for k, v in spec.to_dict().items() if k != "flip_all"}   # written before it
    assert votes.VoteSpec.from_dict(old) == votes.VoteSpec(offset=(1.0, 0.5), flip_all=False)
    for bad in (dict(zoom=0), dict(zoom=True), dict(scales=()), dict(shifts=(0.9,)),
                dict(offset=(1.0,)), dict(offset=(np.nan, 0.0)), dict(scales=(0.1,))):
        with pytest.raises(ValueError, match="VoteSpec"):
            votes.VoteSpec(**bad)


def test_boxes_start_with_the_detector_box_and_are_squares_about_shifted_centres():
    spec = votes.VoteSpec(scales=(0.9, 1.0), shifts=(-0.1, 0.0, 0.1), flip=False)
    boxes = spec.boxes((10, 20, 110, 120))
    assert boxes[0] == (10.0, 20.0, 110.0, 120.0)
    assert len(boxes) == spec.n_sets == 18
    assert len(set(boxes)) == 18
    sides = {round(r - l, 6) for l, t, r, b in boxes}
    assert sides == {90.0, 100.0}
    assert (50.0, 60.0, 150.0, 160.0)[0] - 40 in {round(b[0], 6) for b in boxes}


def test_flip_is_an_involution_that_mirrors_the_label_polygons():
    f = votes.FLIP
    assert sorted(f) == list(range(68))
    np.testing.assert_array_equal(f[f], np.arange(68))
    p = face_points(2)
    w = 250
    mirrored = p.copy()
    mirrored[:, 0] = w - 1 - mirrored[:, 0]
    mirrored = mirrored[f]
    a = render_labels(p, (250, w))[:, ::-1]
    b = render_labels(mirrored, (250, w))
    swap = np.array([0, 1, 2, 3, 5, 4, 7, 6], np.uint8)   # left and right parts trade names
    def score(x, y):
        return class_average(jaccard(confusion_matrix(x, y)))

    assert score(swap[a], b) > 85     # 89.6: PIL rasterises left and right edges differently
    unflipped = p.copy()
    unflipped[:, 0] = w - 1 - unflipped[:, 0]
    assert score(swap[a], render_labels(unflipped, (250, w))) < 60   # 47.1


def test_vote_maps_are_shares_and_one_set_is_its_rendering():
    p = face_points(1)
    one = votes.vote_maps(p[None], (250, 240))
    np.testing.assert_array_equal(np.argmax(one, -1), render_labels(p, (250, 240)))
    np.testing.assert_array_equal(one.sum(-1), 1.0)
    two = votes.vote_maps(np.stack([p, p + 3.0]), (250, 240))
    assert set(np.unique(two)) <= {0.0, 0.5, 1.0}
    np.testing.assert_allclose(two.sum(-1), 1.0)


def test_fit_offset_recovers_a_shift_and_skips_faces_without_landmarks():
    rng = np.random.default_rng(0)
    human = np.stack([face_points(i) for i in range(4)])
    sets = human[:, None] - np.array([1.5, -0.25]) + rng.normal(0, 0.01, (4, 5, 68, 2))
    sets[2] = np.nan
    assert votes.fit_offset(sets, human) == pytest.approx((1.5, -0.25), abs=0.01)
    with pytest.raises(ValueError, match="no face"):
        votes.fit_offset(np.full((2, 3, 68, 2), np.nan), human[:2])
    with pytest.raises(ValueError, match="must be"):
        votes.fit_offset(sets[0], human)


def test_landmark_sets_on_a_real_face_are_sub_pixel_and_near_dlibs_own(faces300w):
    pytest.importorskip("dlib")
    from facesegment.data.imageio import read_image
    from facesegment.faces.label import detect_landmarks

    path = sorted((faces300w / "test").glob("*.jpg"))[0]
    image = read_image(path)
    box, how = votes.detect_box(image)
    assert box is not None and how in ("default", "upsampled", "low-threshold")
    spec = votes.VoteSpec()
    sets = votes.landmark_sets(image, box, spec)
    assert sets.shape == (54, 68, 2) and np.isfinite(sets).all()
    one = votes.landmark_sets(image, box, votes.VoteSpec(flip_all=False))
    np.testing.assert_array_equal(one, sets[:28])   # the boxes, then the mirrored boxes in order
    assert np.abs(sets[27:].mean(0) - sets[:27].mean(0)).mean() < 1.0   # mirrors agree
    assert np.any(sets % 1 != 0)                                  # a quarter pixel
    plain = detect_landmarks(image)[0]
    assert np.abs(sets[0] - plain).mean() < 1.5
    again = votes.landmark_sets(image, box, spec)
    np.testing.assert_array_equal(sets, again)                    # deterministic
    maps, sets2, how2 = votes.face_votes(image, votes.VoteSpec(offset=(1.0, 0.5)))
    np.testing.assert_allclose(sets2, sets + [1.0, 0.5])
    human = read_pts(path.with_suffix(".pts"))
    assert np.abs(np.median(sets2, 0) - human).mean() < 4.0
    assert maps.shape == (250, 250, 8)


def test_face_votes_without_a_face_is_none():
    pytest.importorskip("dlib")
    maps, sets, how = votes.face_votes(np.zeros((250, 250, 3), np.uint8), votes.VoteSpec())
    assert maps is None and sets is None and how == ""


def test_votes_from_two_threads_at_once_equal_the_sequential_ones(faces300w):
    """dlib's models are shared by a process's threads and are not safe to call
    concurrently (a blank crop's three detection passes beside another face's
    crashed `segment`): the calls are serialised, the results unchanged."""
    pytest.importorskip("dlib")
    from concurrent.futures import ThreadPoolExecutor

    from facesegment.data.imageio import read_image

    images = [read_image(p) for p in sorted((faces300w / "test").glob("*.jpg"))[:3]]
    images += [np.full((250, 250, 3), 128, np.uint8)] * 3
    spec = votes.VoteSpec()
    alone = [votes.face_votes(img, spec)[0] for img in images]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda img: votes.face_votes(img, spec)[0], images * 2))
    for a, b in zip(alone * 2, together):
        assert (a is None and b is None) or np.array_equal(a, b)


def test_the_variants_study_rotates_sets_back_and_draws_each_aggregate(faces300w):
    pytest.importorskip("dlib")
    from facesegment.data.imageio import read_image
    from studies import vote_variants as vv

    path = sorted((faces300w / "test").glob("*.jpg"))[0]
    image = read_image(path)
    box, _ = votes.detect_box(image)
    plain = votes.landmark_sets(image, box, vv.PLAIN)
    np.testing.assert_allclose(vv.rotated_sets(image, box, 0), plain, atol=1e-9)
    for deg in (-4, 4):                        # rotated back into the crop's frame
        turned = vv.rotated_sets(image, box, deg)
        assert np.abs(np.median(turned, 0) - np.median(plain, 0)).mean() < 1.5
    human = read_pts(path.with_suffix(".pts"))
    for how in ("votes", "median", "mean"):
        drawn = vv.draw(plain, how)
        assert drawn.shape == (250, 250)
        conf = confusion_matrix(render_labels(human, (250, 250)), drawn.astype(np.uint8), 8)
        assert class_average(jaccard(conf)) > 60
