"""`facesegment segment` (the CLI) and `facesegment.segment` (the API) agree on
every field for the same file: exactly 250x250, smaller, larger and face-free
inputs, under the default (face-mesh) model and the faces300w landmark model."""

import csv

import cv2
import numpy as np
import pytest

from facesegment.cli import main
from tests.conftest import FACES300W, SHARED_DATA

PHOTO = SHARED_DATA / "fasseg-v3-train" / "fasseg-v3train-pan0-personne01146.jpg"


def _inputs(folder):
    """The test images: {kind: path}."""
    from facesegment.data.imageio import read_image, write_png_atomic

    crops = sorted((FACES300W / "test").glob("*.jpg"))
    if not PHOTO.is_file() or not crops:
        pytest.skip("needs the shared face photos (../shared/data)")
    photo = read_image(PHOTO)                                   # 425x512
    y, x = np.mgrid[0:300, 0:400]
    free = np.stack([x * 255 // 400, y * 255 // 300, (x + y) % 256], -1).astype(np.uint8)
    images = {"exact": read_image(crops[0]),                   # a 250x250 face crop
              "smaller": cv2.resize(photo, (166, 200), interpolation=cv2.INTER_AREA),
              "larger": cv2.copyMakeBorder(photo, 40, 60, 90, 30, cv2.BORDER_REFLECT),
              "face-free": free}
    paths = {}
    for kind, image in images.items():
        paths[kind] = folder / f"{kind}.png"
        write_png_atomic(paths[kind], image)
    assert images["exact"].shape[:2] == (250, 250)
    return paths


def _cli(path, out, model):
    """The CLI's summary row and label map (None without one) for one file."""
    from facesegment.data.imageio import read_label

    status = main(["segment", str(path), str(out), "-q", "--workers", "1"]
                  + (["--model", model] if model else []))
    with open(out / "summary.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    label = out / f"{path.stem}_label.png"
    return status, row, (read_label(str(label)) if label.is_file() else None)


def _agree(path, out, model):
    import facesegment

    status, row, labels = _cli(path, out, model)
    faces = facesegment.segment(path, model)
    assert int(row["faces"]) == len(faces)
    assert (status, row["status"]) == ((0, "ok") if faces else (1, "no face"))
    assert row["paths"] == ";".join(f.path for f in faces)
    assert row["detection"] == (faces[0].detection if faces else "")
    assert all(f.detection == faces[0].detection for f in faces)
    assert row["pan"] == ";".join(f"{f.pan:+.0f}" for f in faces if f.pan == f.pan)
    if not faces:
        assert labels is None
        return faces
    assert (int(row["height"]), int(row["width"])) == faces[0].labels.shape
    if len(faces) == 1:
        np.testing.assert_array_equal(labels, faces[0].labels)
    else:   # where one face alone is labelled, the photo's labels are its labels
        mine = np.stack([f.labels for f in faces])
        alone = (mine > 0).sum(0) == 1
        np.testing.assert_array_equal(labels[alone], mine.max(0)[alone])
    return faces


@pytest.mark.parametrize("kind", ["exact", "smaller", "larger", "face-free"])
def test_cli_and_api_agree_under_the_landmark_model(tmp_path, kind):
    pytest.importorskip("dlib")
    path = _inputs(tmp_path)[kind]
    faces = _agree(path, tmp_path / "out", "faces300w-landmarks")
    if kind == "exact":      # a 250x250 crop: taken as one crop, its landmarks found in it
        assert len(faces) == 1 and faces[0].box == (0.0, 0.0, 250.0)
        assert faces[0].path == "landmarks" and faces[0].landmarks.shape == (68, 2)
    if kind == "larger":     # found by the detector: its pass and 68 landmarks
        assert len(faces) == 1 and faces[0].detection in ("default", "upsampled",
                                                          "low-threshold")
        assert faces[0].landmarks.shape == (68, 2)


@pytest.mark.parametrize("kind", ["exact", "smaller", "larger", "face-free"])
def test_cli_and_api_agree_under_the_default_model(tmp_path, kind):
    from facesegment.faces.mesh import mesh_available

    if not mesh_available():
        pytest.skip("needs MediaPipe's face mesh (make setup installs it)")
    path = _inputs(tmp_path)[kind]
    faces = _agree(path, tmp_path / "out", None)
    assert (len(faces) == 0) == (kind == "face-free")
    assert all(f.path == "mesh" and f.landmarks.shape == (478, 2) for f in faces)
