"""Videos given to `facesegment segment`: frame counts, per-frame CSV, JSON records,
tracking, smoothing, unreadable videos and the output-path rule."""

import csv
import json

import cv2
import numpy as np
import pytest

from facesegment.cli import main
from facesegment.faces.segment import PhotoFace
from facesegment.faces.video import (box_iou, match_tracks, segment_frames, smooth_proba,
                                     video_outputs)
from tests.test_cli_api_agree import PHOTO


def write_clip(path, frames, fps=25):
    """``frames`` (RGB uint8) as an MP4 file."""
    h, w = frames[0].shape[:2]
    out = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    assert out.isOpened()
    for f in frames:
        out.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    out.release()
    return path


def count_frames(path):
    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.read()[0]:
        n += 1
    cap.release()
    return n


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture()
def model_dir(tmp_path):
    from facesegment.modelio.model import save_model
    from tests.dense.test_inference import random_model

    model = random_model(4, kind="axis", n_trees=2, max_depth=2, kinds=("axis",))
    model.metrics["alpha"] = 0.5   # a decision rule: no warning about its absence
    return save_model(model, tmp_path / "model")


def synthetic_frames(n=7, size=48):
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, (size, size, 3), np.uint8) for _ in range(n)]


# --------------------------------------------------------------- tracking and smoothing

def test_box_iou_and_tracks_follow_the_most_overlapping_face():
    assert box_iou((0, 0, 10), (0, 0, 10)) == 1.0
    assert box_iou((0, 0, 10), (5, 0, 10)) == pytest.approx(50 / 150)
    assert box_iou((0, 0, 10), (20, 20, 10)) == 0.0
    prev = [(7, (0, 0, 100)), (3, (200, 0, 100))]
    ids, nxt = match_tracks(prev, [(205, 2, 98), (400, 0, 50), (3, 1, 100)], next_id=8)
    assert ids == [3, 8, 7] and nxt == 9
    # one previous face continues one track only; too little overlap starts a new one
    ids, nxt = match_tracks([(0, (0, 0, 100))], [(1, 0, 100), (2, 0, 100), (90, 0, 100)], 1)
    assert ids[0] == 0 and ids[1:] == [1, 2] and nxt == 3


def _blob_face(box, centre, size=64):
    """A face whose crop probabilities put class 1 in a disc at crop point ``centre``."""
    yy, xx = np.mgrid[0:size, 0:size]
    disc = ((xx - centre[0]) ** 2 + (yy - centre[1]) ** 2 <= 12 ** 2).astype(np.float32)
    proba = np.zeros((size, size, 8), np.float32)
    proba[..., 1] = 0.2 + 0.6 * disc
    proba[..., 0] = 1.0 - proba[..., 1]
    return PhotoFace(box, None, proba, np.zeros((size, size, 3), np.uint8), "mesh", "default")


def test_smoothing_averages_in_the_faces_own_crop():
    face = _blob_face((10.0, 20.0, 100.0), (30, 30))
    # the face moved in the photo and its box with it: the same crop pixels, kept as is
    moved = [_blob_face((14.0, 17.0, 104.0), (30, 30)), _blob_face((6.0, 25.0, 96.0), (30, 30))]
    np.testing.assert_allclose(smooth_proba(face, moved), face.proba, atol=1e-6)
    # a disc at another place of the face's crop (a prediction that flickered) is averaged in
    other = _blob_face((10.0, 20.0, 100.0), (40, 30))
    avg = smooth_proba(face, [other, _blob_face((0, 0, 1), (30, 30), size=32)])  # size: left out
    np.testing.assert_allclose(avg.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(avg, (face.proba + other.proba) / 2, atol=1e-6)


def test_segment_frames_yields_every_frame_in_order(tmp_path, model_dir):
    from facesegment.models import load_model

    model = load_model(model_dir)
    frames = synthetic_frames(7)
    items = [(i * 3, i * 0.1, f) for i, f in enumerate(frames)]
    for smooth in (0, 1, 2, 10):
        got = list(segment_frames(model, items, smooth=smooth, detect="never"))
        assert [v.index for v in got] == [i * 3 for i in range(7)]
        assert all(v.labels.shape == (48, 48) and len(v.faces) == 1 for v in got)
        assert {t for v in got for t in v.tracks} == {0}   # one track through the clip
    # identical frames: smoothing changes nothing
    same = [(i, 0.0, frames[0]) for i in range(5)]
    plain = [v.labels for v in segment_frames(model, same, smooth=0, detect="never")]
    smooth = [v.labels for v in segment_frames(model, same, smooth=2, detect="never")]
    for a, b in zip(plain, smooth):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------- the command

def test_video_gives_videos_of_as_many_frames_and_a_csv(tmp_path, model_dir, capsys):
    clip = write_clip(tmp_path / "clip.mp4", synthetic_frames(7))
    out = tmp_path / "out"
    argv = ["segment", str(clip), str(out), "--model", str(model_dir), "--detect", "never",
            "-q"]
    assert main(argv) == 0
    labels, over, frames_csv = video_outputs(out, "clip")
    assert count_frames(labels) == count_frames(over) == 7
    rows = read_csv(frames_csv)
    assert [int(r["frame"]) for r in rows] == list(range(7))
    assert float(rows[1]["time"]) == pytest.approx(0.04, abs=1e-3)
    (summary,) = read_csv(out / "summary.csv")
    assert summary["name"] == "clip.mp4" and summary["status"] == "ok"
    assert (summary["width"], summary["height"], summary["output"]) == ("48", "48", "clip")
    text = capsys.readouterr().out
    assert "clip.mp4: 7 frames in" in text and "frames/s" in text
    # --every 3: frames 0, 3, 6, and a rerun replaces its own outputs
    assert main(argv + ["--every", "3", "--smooth", "0"]) == 0
    assert count_frames(labels) == count_frames(over) == 3
    assert [int(r["frame"]) for r in read_csv(frames_csv)] == [0, 3, 6]
    cap = cv2.VideoCapture(str(labels))
    assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(25 / 3, rel=0.01)
    cap.release()


def test_unreadable_video_is_one_line_and_the_other_inputs_are_processed(
        tmp_path, model_dir, capsys):
    from facesegment.data.imageio import write_png_atomic

    (tmp_path / "bad.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"garbage" * 50)
    clip = write_clip(tmp_path / "good.mp4", synthetic_frames(3))
    write_png_atomic(tmp_path / "photos" / "a.png", synthetic_frames(1)[0])
    out = tmp_path / "out"
    code = main(["segment", str(tmp_path / "bad.mp4"), str(clip), str(tmp_path / "photos"),
                 str(out), "--model", str(model_dir), "--detect", "never", "-q"])
    assert code == 1
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if "bad.mp4" in x]
    assert "not a readable video" in line and "ffmpeg" in line and "delete" not in line
    rows = {r["name"]: r["status"] for r in read_csv(out / "summary.csv")}
    assert rows == {"a.png": "ok", "bad.mp4": "unreadable", "good.mp4": "ok"}
    assert count_frames(out / "good_labels.mp4") == 3 and (out / "a_label.png").is_file()
    assert not (out / "bad_labels.mp4").exists()


def test_a_users_file_in_the_way_is_kept_and_refused_before_any_work(tmp_path, model_dir,
                                                                      capsys):
    clip = write_clip(tmp_path / "clip.mp4", synthetic_frames(3))
    out = tmp_path / "out"
    out.mkdir()
    (out / "clip_overlay.mp4").write_bytes(b"mine")
    argv = ["segment", str(clip), str(out), "--model", str(model_dir), "--detect", "never",
            "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "clip_overlay.mp4" in err and "--overwrite" in err
    assert (out / "clip_overlay.mp4").read_bytes() == b"mine"
    assert not (out / "clip_labels.mp4").exists() and not (out / "summary.csv").exists()
    assert main(argv + ["--overwrite"]) == 0 and count_frames(out / "clip_overlay.mp4") == 3


def test_video_to_stdout_is_refused(tmp_path, model_dir, capsys):
    clip = write_clip(tmp_path / "clip.mp4", synthetic_frames(2))
    assert main(["segment", str(clip), "-", "--model", str(model_dir)]) == 2
    assert "OUTPUT_DIR" in capsys.readouterr().err


def test_a_real_clip_gives_one_json_record_per_face_per_frame(tmp_path, capsys):
    from facesegment.data.imageio import read_image
    from facesegment.faces.mesh import mesh_available

    if not mesh_available():
        pytest.skip("needs MediaPipe's face mesh (make setup installs it)")
    if not PHOTO.is_file():
        pytest.skip(f"needs {PHOTO}")
    photo = read_image(PHOTO)
    photo = cv2.resize(photo, (photo.shape[1] * 320 // photo.shape[0], 320),
                       interpolation=cv2.INTER_AREA)
    h, w = photo.shape[:2]
    frames = [cv2.warpAffine(photo, np.float32([[1, 0, dx], [0, 1, dy]]), (w, h),
                             borderMode=cv2.BORDER_REPLICATE)
              for dx, dy in np.random.default_rng(1).uniform(-3, 3, (10, 2))]
    clip = write_clip(tmp_path / "clip.mp4", frames)
    out = tmp_path / "out"
    assert main(["segment", str(clip), str(out), "--json", "-q"]) == 0
    captured = capsys.readouterr()
    records = [json.loads(x) for x in captured.out.splitlines()]
    assert [r["frame"] for r in records] == list(range(10))
    assert {r["track"] for r in records} == {0} and {r["face"] for r in records} == {0}
    assert all(r["name"] == "clip.mp4" and len(r["landmarks"]) == 478 for r in records)
    assert all(sum(r["class_pixels"].values()) == r["width"] * r["height"] for r in records)
    assert abs(records[0]["width"] - w) <= 1 and records[0]["height"] == h
    assert all(r["class_pixels"]["nose"] > 0 for r in records)
    assert "frames/s" in captured.err
    assert count_frames(out / "clip_labels.mp4") == count_frames(out / "clip_overlay.mp4") == 10
    rows = read_csv(out / "clip_frames.csv")
    assert [r["faces"] for r in rows] == ["1"] * 10
    assert all(r["pan"] and r["detection"] for r in rows)
