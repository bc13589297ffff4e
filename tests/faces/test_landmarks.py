""".pts I/O and landmark -> label rendering (exact agreement with the shared maps)."""

import numpy as np
import pytest

from facesegment.errors import DataError
from facesegment.faces.landmarks import face_polygons, read_pts, render_labels, write_pts


def _synthetic_face(scale=1.0, offset=(0.0, 0.0)):
    """68 plausible landmarks of a frontal face in a 100x100 image."""
    p = np.zeros((68, 2))
    t = np.linspace(np.pi, 0, 17)
    p[0:17] = np.c_[50 - 35 * np.cos(t), 45 + 40 * np.sin(t)]       # jaw, left to right
    p[17:22] = np.c_[np.linspace(22, 44, 5), [30, 27, 26, 27, 29]]  # left brow
    p[22:27] = np.c_[np.linspace(56, 78, 5), [29, 27, 26, 27, 30]]  # right brow
    p[27:31] = np.c_[[50] * 4, np.linspace(38, 56, 4)]              # nose bridge
    p[31:36] = np.c_[np.linspace(42, 58, 5), [60, 62, 63, 62, 60]]  # nostrils
    ang = np.linspace(0, 2 * np.pi, 7)[:-1]
    p[36:42] = np.c_[33 + 7 * np.cos(ang), 40 - 3 * np.sin(ang)]     # left eye
    p[42:48] = np.c_[67 + 7 * np.cos(ang), 40 - 3 * np.sin(ang)]     # right eye
    ang = np.linspace(0, 2 * np.pi, 13)[:-1]
    p[48:60] = np.c_[50 + 12 * np.cos(ang), 72 - 5 * np.sin(ang)]    # outer lip
    ang = np.linspace(0, 2 * np.pi, 9)[:-1]
    p[60:68] = np.c_[50 + 8 * np.cos(ang), 72 - 2 * np.sin(ang)]      # inner lip
    return p * scale + np.asarray(offset)


def test_pts_roundtrip(tmp_path):
    p = _synthetic_face()
    write_pts(tmp_path / "a.pts", p)
    text = (tmp_path / "a.pts").read_text()
    assert text.startswith("version: 1\nn_points: 68\n{\n") and text.endswith("}\n")
    np.testing.assert_allclose(read_pts(tmp_path / "a.pts"), p, atol=5e-4)


def test_pts_with_67_points(tmp_path):
    lines = ["version: 1", "n_points: 67", "{"] + ["1.0 2.0"] * 67 + ["}"]
    (tmp_path / "b.pts").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"b\.pts: has 67 points, expected 68 .*68-point iBUG/300-W"):
        read_pts(tmp_path / "b.pts")


def test_pts_header_disagrees(tmp_path):
    lines = ["version: 1", "n_points: 70", "{"] + ["1.0 2.0"] * 68 + ["}"]
    (tmp_path / "h.pts").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"has 68 points \(header says 70\), expected 68"):
        read_pts(tmp_path / "h.pts")


def test_pts_empty_truncated_and_garbage(tmp_path):
    (tmp_path / "e.pts").write_text("")
    with pytest.raises(DataError, match=r"e\.pts: landmark file is empty"):
        read_pts(tmp_path / "e.pts")
    (tmp_path / "t.pts").write_text("version: 1\nn_points: 68\n{\n1 2\n3 4\n")
    with pytest.raises(DataError, match=r"t\.pts: landmark file is truncated"):
        read_pts(tmp_path / "t.pts")
    (tmp_path / "g.pts").write_text("version: 1\nn_points: 68\n{\n" + "a b\n" * 68 + "}\n")
    with pytest.raises(DataError, match="non-numeric"):
        read_pts(tmp_path / "g.pts")
    with pytest.raises(DataError, match="does not exist"):
        read_pts(tmp_path / "missing.pts")


def test_render_classes_and_order():
    p = _synthetic_face()
    lab = render_labels(p, (100, 100))
    assert lab.dtype == np.uint8 and lab.shape == (100, 100)
    assert set(np.unique(lab)) == set(range(8))
    # sample points well inside each part get that part's id
    assert lab[5, 5] == 0
    assert lab[85, 50] == 1                  # chin area, inside the jaw
    assert lab[59, 50] == 2                  # nose, above the nostril line
    assert lab[72, 50] == 3                  # mouth centre
    assert lab[40, 33] == 4 and lab[40, 67] == 5
    assert lab[28, 33] == 6 and lab[28, 67] == 7
    # brows paint over the lower face; their lower edge is a parallel shift
    poly6 = dict(face_polygons(p))[6]
    shift = 0.3 * (p[36:42, 1].mean() - p[17:22, 1].mean())
    np.testing.assert_allclose(poly6[5:, 1] - poly6[:5][::-1, 1], shift)


def test_render_translation_equivariant():
    p = _synthetic_face()
    a = render_labels(p, (100, 100))
    b = render_labels(p + [7, 3], (110, 110))
    np.testing.assert_array_equal(a, b[3:103, 7:107])


def test_render_validation():
    with pytest.raises(ValueError, match=r"shape \(68, 2\)"):
        render_labels(np.zeros((67, 2)), (10, 10))
    p = _synthetic_face()
    p[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        render_labels(p, (100, 100))


def _agreement_check(recs):
    from facesegment.data.imageio import read_label
    from facesegment.faces.landmarks import pts_path_for

    worst = 1.0
    for r in recs:
        ref = read_label(r.label)
        agree = (render_labels(read_pts(pts_path_for(r.image)), ref.shape) == ref).mean()
        worst = min(worst, agree)
        assert agree >= 0.995, (r.name, agree)
    assert worst >= 0.999


@pytest.mark.shared
def test_render_matches_shared_label_maps_sample(faces300w):
    """Every 12th faces300w/train image (101 images): >= 99.5% agreement each."""
    from facesegment.data.datasets import find_faces

    _agreement_check(find_faces(faces300w / "train")[::12])


@pytest.mark.shared
@pytest.mark.slow
def test_render_matches_shared_label_maps(faces300w):
    """Acceptance: >= 99.5% agreement on every faces300w/train image (all 1207, 2-7 s)."""
    from facesegment.data.datasets import find_faces

    recs = find_faces(faces300w / "train")
    assert len(recs) == 1207
    _agreement_check(recs)
