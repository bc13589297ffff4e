"""Discovery of labelled faces: beside the images, a parallel label tree, bad folders."""

import numpy as np
import pytest

from facesegment.data.datasets import check_face, find_faces, find_images, load_face
from facesegment.errors import DataError
from facesegment.data.imageio import write_png_atomic


def _face(dirpath, name, h=8, w=9, label=True, seed=0, ext="png"):
    rng = np.random.default_rng(seed)
    dirpath.mkdir(parents=True, exist_ok=True)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    write_png_atomic(dirpath / f"{name}.{ext}", img)
    lab = rng.integers(0, 8, (h, w), dtype=np.uint8)
    if label:
        write_png_atomic(dirpath / f"{name}_label.png", lab)
    return img, lab


def test_find_faces_beside_images_recursive(tmp_path):
    _face(tmp_path / "b", "y")
    img, lab = _face(tmp_path / "a", "x", seed=1)
    recs = find_faces(tmp_path)
    assert [r.name for r in recs] == ["a/x", "b/y"]
    i2, l2 = load_face(recs[0])
    np.testing.assert_array_equal(i2, img)
    np.testing.assert_array_equal(l2, lab)
    assert [p.name for p in find_images(tmp_path)] == ["x.png", "y.png"]


def test_find_faces_parallel_label_tree(tmp_path):
    imgs, labs = tmp_path / "imgs", tmp_path / "labs"
    _face(imgs / "P", "P_0001", label=False)
    _, lab = _face(tmp_path / "tmp", "P_0001")
    (labs / "P").mkdir(parents=True)
    (tmp_path / "tmp" / "P_0001_label.png").rename(labs / "P" / "P_0001_label.png")
    recs = find_faces(imgs, labels=labs)
    assert recs[0].name == "P/P_0001" and recs[0].label.endswith("labs/P/P_0001_label.png")
    np.testing.assert_array_equal(load_face(recs[0])[1], lab)


def test_image_without_label(tmp_path):
    _face(tmp_path, "lonely", label=False)
    with pytest.raises(DataError, match=r"lonely\.png: has no label map .*run `facesegment label`"):
        find_faces(tmp_path)
    recs = find_faces(tmp_path, require_labels=False)
    assert recs[0].label is None
    counts, msg = check_face(recs[0])
    assert counts is None and "lonely.png: has no label map" in msg


def test_empty_folder(tmp_path):
    with pytest.raises(DataError, match=r"contains no images .*point at a folder of face images"):
        find_faces(tmp_path)


def test_not_a_folder(tmp_path):
    with pytest.raises(DataError, match="is not a folder"):
        find_faces(tmp_path / "missing")


def test_check_face_counts(tmp_path):
    _, lab = _face(tmp_path, "f")
    counts, msg = check_face(find_faces(tmp_path)[0])
    assert msg is None and counts.shape == (9,)
    np.testing.assert_array_equal(counts[:8], np.bincount(lab.ravel(), minlength=8))
    assert counts[8] == 0


def test_check_face_wrong_size_label(tmp_path):
    _face(tmp_path, "f", label=False)
    write_png_atomic(tmp_path / "f_label.png", np.zeros((3, 3), np.uint8))
    counts, msg = check_face(find_faces(tmp_path)[0])
    assert counts is None and "label map is 3x3 but its image is 9x8" in msg


def test_images_skipped_by_labeller_are_left_out(tmp_path):
    imgs, labs = tmp_path / "imgs", tmp_path / "labs"
    _face(imgs / "A", "A_0001", label=False)
    _face(imgs / "B", "B_0001", label=False)
    _face(labs / "A", "A_0001_tmp")
    (labs / "A" / "A_0001_tmp_label.png").rename(labs / "A" / "A_0001_label.png")
    with pytest.raises(DataError, match=r"B_0001\.png: has no label map"):
        find_faces(imgs, labels=labs)
    (labs / "label_report.csv").write_text(
        "name,image,status,faces,seconds,message\n"
        "A/A_0001,x,ok,1,0.1,\nB/B_0001,y,no-face,0,0.1,no face found\n")
    assert [r.name for r in find_faces(imgs, labels=labs)] == ["A/A_0001"]
    assert len(find_faces(imgs, labels=labs, require_labels=False)) == 2


def test_symlinked_subfolders_are_followed_once(tmp_path):
    """A symlinked person folder is searched; a link loop, a link back into the
    tree and a second link to the same folder add nothing and do not hang."""
    import os

    root, outside = tmp_path / "data", tmp_path / "elsewhere"
    _face(root / "A", "A_0001")
    _face(outside / "B", "B_0001", seed=1)
    os.symlink(outside / "B", root / "B")                 # the common case: follow it
    os.symlink(outside / "B", root / "B_again")           # the same folder twice: once
    os.symlink(root, root / "A" / "loop")                 # a loop back to the root
    os.symlink(root / "A", root / "Z_alias")              # a link inside the tree
    os.symlink(outside / "missing", root / "broken")      # a dangling link
    names = [r.name for r in find_faces(root)]
    assert names == ["A/A_0001", "B/B_0001"]
    assert [p.name for p in find_images(root)] == ["A_0001.png", "B_0001.png"]


def test_exif_rotated_photo_loads_upright_with_its_label(tmp_path):
    """Label maps are drawn on the upright photo (as `facesegment label` makes
    them): a phone photo with EXIF orientation 6 loads with a label of the
    upright size (extract/evaluate read faces through load_face)."""
    from PIL import Image

    stored = np.random.default_rng(0).integers(0, 256, (6, 10, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(stored).save(tmp_path / "p.png", exif=exif.tobytes())
    write_png_atomic(tmp_path / "p_label.png", np.ones((10, 6), np.uint8))
    image, label = load_face(find_faces(tmp_path)[0])
    assert image.shape == (10, 6, 3) and label.shape == (10, 6)
    np.testing.assert_array_equal(image, np.rot90(stored, k=-1))
