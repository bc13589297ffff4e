"""The detector-aligned label maps: drawn from the mapped human landmarks, or the
nearest-neighbour warp (no .pts, ``labels="warp"``); the cache key holds the choice."""

import json
from pathlib import Path

import numpy as np
import pytest

import facesegment.faces.aligned as aligned
from facesegment.data.datasets import FaceRecord
from facesegment.data.imageio import read_label, write_png_atomic
from facesegment.faces.aligned import INFO_NAME, draw_label, realign_records, warp_label
from facesegment.faces.landmarks import read_pts, render_labels, write_pts
from facesegment.faces.segment import crop_points
from tests.faces.test_shape_prior import face_points

#: A box that shrinks a 300 x 280 image by 250 / 190 and reaches past its left edge.
BOX = (-20.0, 30.0, 190.0)


def _face(folder, name, pts=True, seed=0):
    """A synthetic face: noise image, labels rendered from landmarks (a 255 strip),
    and (``pts``) the landmarks as ``NAME.pts``."""
    rng = np.random.default_rng(seed)
    points = face_points(seed) * 0.8 + [10.0, 20.0]
    label = render_labels(points, (280, 300))
    label[:, -12:] = 255
    base = Path(folder) / name
    write_png_atomic(str(base) + ".png", rng.integers(0, 256, (280, 300, 3), dtype=np.uint8))
    write_png_atomic(str(base) + "_label.png", label)
    if pts:
        write_pts(str(base) + ".pts", points)
    return FaceRecord(name, str(base) + ".png", str(base) + "_label.png"), label


@pytest.fixture
def fixed_box(monkeypatch):
    """dlib replaced by a fixed box (the label maps alone are under test)."""
    monkeypatch.setattr(aligned, "detect_box", lambda image, *a, **k: BOX)


def test_drawn_label_is_the_render_of_the_mapped_points(tmp_path):
    rec, label = _face(tmp_path, "f")
    points = read_pts(tmp_path / "f.pts")
    got = draw_label(points, label, BOX)
    want = render_labels(crop_points(points, BOX), (250, 250))
    outside = warp_label(label, BOX) == 255
    assert outside[:, :20].all() and outside.sum() > 250 * 20
    np.testing.assert_array_equal(got[~outside], want[~outside])
    assert np.all(got[outside] == 255)


def test_nearest_neighbour_warp_and_redraw_differ_on_the_thin_parts(tmp_path):
    rec, label = _face(tmp_path, "f")
    points = read_pts(tmp_path / "f.pts")
    drawn, warped = draw_label(points, label, BOX), warp_label(label, BOX)
    both = (drawn != 255) & (warped != 255)
    differ = both & (drawn != warped)
    assert 20 < differ.sum() < 0.02 * both.sum()   # a few edge pixels, not a shift
    thin = np.isin(drawn, (4, 5, 6, 7)) | np.isin(warped, (4, 5, 6, 7))
    assert (differ & thin).sum() > 5
    # the redraw is the renderer's on the mapped points; the warp is not
    want = render_labels(crop_points(points, BOX), (250, 250))
    assert np.array_equal(drawn[both], want[both]) and not np.array_equal(warped[both], want[both])


def test_realign_records_draws_with_pts_and_warps_without(tmp_path, fixed_box):
    with_pts, label = _face(tmp_path / "data", "a")
    without, label_b = _face(tmp_path / "data", "b", pts=False, seed=1)
    out = realign_records([with_pts, without], tmp_path / "al", workers=1, progress=False)
    points = read_pts(tmp_path / "data" / "a.pts")
    np.testing.assert_array_equal(read_label(out[0].label), draw_label(points, label, BOX))
    np.testing.assert_array_equal(read_label(out[1].label), warp_label(label_b, BOX))
    info = json.loads((tmp_path / "al" / INFO_NAME).read_text())
    assert info["labels"] == "landmarks"
    assert [f["labels"] for f in info["faces"]] == ["landmarks", "warp"]
    warped = realign_records([with_pts, without], tmp_path / "w", workers=1, progress=False,
                             labels="warp")
    np.testing.assert_array_equal(read_label(warped[0].label), warp_label(label, BOX))
    assert not np.array_equal(read_label(warped[0].label), read_label(out[0].label))
    with pytest.raises(ValueError, match="labels"):
        realign_records([with_pts], tmp_path / "x", labels="nearest")


def test_cache_key_holds_the_label_choice_and_the_pts(tmp_path, fixed_box):
    rec, _ = _face(tmp_path / "data", "a")
    folder = tmp_path / "al"

    def key(**kw):
        realign_records([rec], folder, workers=1, progress=False, **kw)
        return json.loads((folder / INFO_NAME).read_text())["key"]

    drawn, warped = key(), key(labels="warp")
    assert drawn != warped and json.loads((folder / INFO_NAME).read_text())["version"] == 4
    assert key() == drawn
    write_pts(tmp_path / "data" / "a.pts", read_pts(tmp_path / "data" / "a.pts") + 0.5)
    assert key() != drawn
    assert key(labels="warp") == warped   # the warp does not read the .pts


def test_a_damaged_pts_is_one_line_naming_it(tmp_path, fixed_box):
    from facesegment.errors import DataError

    rec, _ = _face(tmp_path / "data", "a")
    (tmp_path / "data" / "a.pts").write_text("version: 1\nn_points: 68\n{\n1 2\n}\n")
    with pytest.raises(DataError, match=r"a\.pts") as err:
        realign_records([rec], tmp_path / "al", workers=1, progress=False)
    assert "\n" not in str(err.value)
    # the warp reads no .pts, so it still runs
    assert not realign_records([rec], tmp_path / "w", workers=1, progress=False,
                               labels="warp")[0].missed
