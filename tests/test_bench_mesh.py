"""benchmarks/bench_mesh.py: face-free images, tables and the run, on synthetic inputs.

The finders and models are stubbed here (no MediaPipe, dlib or shared data);
the one test of the real finders skips without MediaPipe or the shared photos.
"""

import json

import numpy as np
import pytest

from benchmarks import bench_mesh as B


def _label(h=300, w=260):
    """A label map with a face zone (254 / parts) and background around it."""
    label = np.zeros((h, w), np.uint8)
    label[60:260, 100:230] = 254
    label[120:140, 130:150] = 4
    label[5, 5] = 255                      # a speck: not background either
    return label


def _free(label, x0, y0, side):
    return not np.any(label[y0:y0 + side, x0:x0 + side])


def test_photos_are_ordered_so_that_the_first_ones_span_the_pans():
    faces = {f"p{p}{k}-{pan}": {"person": p, "pan": pan}
             for p in (2, 1) for k in (1, 2) for pan in (30, -90, 0)}
    assert B.order_photos(faces)[:7] == ["p11--90", "p11-0", "p11-30", "p12--90", "p12-0",
                                         "p12-30", "p21--90"]


def test_background_windows_hold_only_background_and_do_not_overlap():
    label = _label()
    wins = B.background_windows(label, "photo-a", seed=0)
    assert 1 <= len(wins) <= 2
    for x0, y0, side in wins:
        assert side >= 96 and side in B.SIDES and _free(label, x0, y0, side)
        assert x0 + side <= label.shape[1] and y0 + side <= label.shape[0]
    if len(wins) == 2:
        (ax, ay, a), (bx, by, b) = wins
        assert ax + a <= bx or bx + b <= ax or ay + a <= by or by + b <= ay
    # the largest side that fits anywhere is taken first
    assert wins[0][2] == max(s for s in B.SIDES
                             if any(_free(label, x, y, s)
                                    for y in range(0, label.shape[0] - s + 1, B.STRIDE)
                                    for x in range(0, label.shape[1] - s + 1, B.STRIDE)))


def test_background_windows_are_seeded_by_photo_name_and_seed():
    label = _label(400, 400)
    label[150:250, 150:250] = 254
    a = B.background_windows(label, "photo-a", seed=0)
    assert a == B.background_windows(label.copy(), "photo-a", seed=0)
    others = {tuple(B.background_windows(label, n, seed=s)) for n in ("a", "b", "c")
              for s in (0, 1, 2)}
    assert len(others) > 1                 # a seeded choice, not always the same window
    assert B.background_windows(label, "x", per_photo=1) == \
        B.background_windows(label, "x", per_photo=2)[:1]


def test_no_window_without_enough_background():
    label = np.full((300, 300), 254, np.uint8)
    label[:95, :95] = 0                    # less than the smallest side
    assert B.background_windows(label, "n") == []
    assert B.background_windows(np.zeros((80, 500), np.uint8), "thin") == []
    image = np.zeros((300, 300, 3), np.uint8)
    assert B.face_free_crops(image, label, "n") == []


def test_face_free_crops_are_resized_and_named_by_their_window():
    rng = np.random.default_rng(0)
    label = _label()
    image = rng.integers(0, 256, label.shape + (3,), dtype=np.uint8)
    crops = B.face_free_crops(image, label, "photo-a", seed=3)
    wins = B.background_windows(label, "photo-a", seed=3)
    assert [n for n, _ in crops] == [f"photo-a@{x},{y},{s}" for x, y, s in wins]
    for _, crop in crops:
        assert crop.shape == (B.CROP_SIDE, B.CROP_SIDE, 3) and crop.dtype == np.uint8


def test_synthetic_scenes_are_seeded_and_of_every_kind():
    scenes = B.synthetic_scenes(20, seed=0)
    assert len(scenes) == 20 and len({n for n, _ in scenes}) == 20
    assert {n.split("-")[1] for n, _ in scenes} == set(B.SCENE_KINDS)
    again = B.synthetic_scenes(20, seed=0)
    for (n1, a), (n2, b) in zip(scenes, again):
        assert n1 == n2 and a.shape == (256, 256, 3) and a.dtype == np.uint8
        np.testing.assert_array_equal(a, b)
        assert a.std() > 0 or n1.startswith("synthetic-gradient")
    other = B.synthetic_scenes(5, seed=1)
    assert any(not np.array_equal(a, b) for (_, a), (_, b) in zip(scenes, other))
    with pytest.raises(ValueError, match="unknown scene kind"):
        B.synthetic_scene("faces", 0)


def test_on_face_reads_the_label_at_the_centre_clipped_to_the_photo():
    label = _label()
    assert B.on_face(label, (160.4, 150.0)) and not B.on_face(label, (20, 20))
    assert not B.on_face(label, (-50, 1e4))     # clipped to the corner (0, h-1): background


def test_recall_table_counts_per_pan_and_in_total():
    rows = [{"pan": 0, "mesh": {"n": 1, "on_face": True}},
            {"pan": 0, "mesh": {"n": 2, "on_face": False}},
            {"pan": -90, "mesh": {"n": 0, "on_face": False}},
            {"pan": 15, "mesh": {"n": 1, "on_face": True}}]
    t = B.recall_table(rows, "mesh")
    assert list(t["per_pan"]) == ["-90", "0", "15"]
    assert t["per_pan"]["0"] == {"found": 2, "on_face": 1, "total": 2}
    assert t["per_pan"]["-90"] == {"found": 0, "on_face": 0, "total": 1}
    assert t["total"] == {"found": 3, "on_face": 2, "total": 4}


def test_group_medians_split_frontal_and_turned_and_ratios():
    pans = [0, 30, -30, 45, 60, -90]
    ms = [1.0, 2.0, 3.0, 100.0, 10.0, 20.0]
    g = B.group_medians(pans, ms)
    assert g["frontal"] == {"ms": 2.0, "n": 3} and g["turned"] == {"ms": 15.0, "n": 2}
    assert g["all"] == {"ms": 6.5, "n": 6}
    assert B.group_medians([0], [4.0])["turned"] == {"ms": None, "n": 0}
    assert B.ratio_of(3.0, 4.0) == 0.75
    assert B.ratio_of(None, 4.0) is None and B.ratio_of(3.0, 0.0) is None


def _fake_data(tmp_path, n=4):
    import cv2

    data = tmp_path / "fasseg"
    data.mkdir()
    faces = {}
    rng = np.random.default_rng(0)
    for i, pan in enumerate((0, 90, -60, 30)[:n]):
        name = f"photo{i}"
        faces[name] = {"person": 1, "pan": pan}
        label = _label()
        image = rng.integers(0, 256, label.shape + (3,), dtype=np.uint8)
        image[label == 254] = (200, 150, 130)       # the "face" the stub finders see
        cv2.imwrite(str(data / f"{name}.jpg"), image[..., ::-1])
        cv2.imwrite(str(data / f"{name}_label.png"), label)
    (data / "manifest.json").write_text(json.dumps({"faces": faces}))
    return data


def _stub_finders():
    """A "mesh" finding the skin-coloured zone anywhere, a "dlib" finding it only
    on photos (not on 256x256 images) and a false face on the first scene."""
    def zone(rgb):
        ys, xs = np.nonzero(np.all(np.abs(rgb.astype(int) - (200, 150, 130)) < 12, axis=2))
        return [(float(xs.mean()), float(ys.mean()))] if len(xs) > 500 else []

    def mesh(rgb):
        c = zone(rgb)
        return c, "default" if c else ""

    def dlib(rgb):
        if rgb.shape[:2] == (256, 256):
            first = B.synthetic_scenes(1)[0][1]
            return ([(5.0, 5.0)], "low-threshold") if np.array_equal(rgb, first) else ([], "")
        c = zone(rgb)
        return (c, "upsampled") if c else ([], "")

    return {"mesh": mesh, "dlib": dlib}


def test_the_run_writes_the_json_and_summary_and_skips_a_missing_model(tmp_path, monkeypatch,
                                                                      capsys):
    from facesegment.errors import DataError

    data = _fake_data(tmp_path)
    calls = []

    def load_segmenter(name):
        if name == "no-such-model":
            raise DataError(name, "is neither a model folder nor a shipped model name")

        def seg(rgb):
            calls.append(name)
            return 1
        return seg

    monkeypatch.setattr(B, "make_finders", _stub_finders)
    monkeypatch.setattr(B, "load_segmenter", load_segmenter)
    out = tmp_path / "bench" / "mesh.json"
    assert B.main(["--data", str(data), "--model", "no-such-model", "--synthetic", "5",
                   "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "no-such-model: cannot be loaded (is neither a model folder" in text
    assert "| **all** | **4/4** | **4/4** |" in text
    res = json.loads(out.read_text())
    assert res["n_photos"] == 4 and res["model_error"].startswith("is neither")
    assert list(res["recall"]["mesh"]["per_pan"]) == ["-60", "0", "30", "90"]
    assert res["recall"]["dlib"]["passes"] == {"upsampled": 4}
    ff = res["false_faces"]
    assert ff["n_synthetic"] == 5 and ff["n_crops"] == 8 and ff["n_images"] == 13
    assert ff["mesh"]["faces"] == 0 and ff["mesh"]["images"] == []
    assert ff["dlib"] == {"faces": 1, "images": ["synthetic-gradient-0"],
                          "passes": {"low-threshold": 1}}
    t = res["time"]
    assert t["model"] is None and t["ratio"] is None
    assert t["peer"]["all"]["n"] == 4 and t["peer"]["frontal"]["n"] == 2
    assert t["peer"]["turned"]["n"] == 2 and set(t["find"]) == {"mesh", "dlib", "ratio"}
    assert calls == [B.PEER] * 5             # one warm-up, then each photo once
    assert not list(tmp_path.glob("bench/*.tmp*"))


def test_the_run_times_the_model_and_the_peer_in_turns(tmp_path, monkeypatch, capsys):
    data = _fake_data(tmp_path, n=2)
    calls = []

    def load_segmenter(name):
        def seg(rgb):
            calls.append(name)
            return 0 if name == B.PEER else 1
        return seg

    monkeypatch.setattr(B, "make_finders", _stub_finders)
    monkeypatch.setattr(B, "load_segmenter", load_segmenter)
    out = tmp_path / "mesh.json"
    assert B.main(["--data", str(data), "--model", "m", "--synthetic", "0", "--limit", "1",
                   "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert calls == ["m", B.PEER, "m", B.PEER]
    assert res["n_photos"] == 1 and res["limit"] == 1
    assert res["time"]["photos_segmented"] == {"model": 1, "peer": 0}
    assert set(res["time"]["ratio"]) == {"frontal", "turned", "all"}
    assert "ratio model / peer" in capsys.readouterr().out


def test_the_real_finders_on_one_photo():
    pytest.importorskip("mediapipe")
    pytest.importorskip("dlib")
    from facesegment.data.imageio import read_image

    photo = B.DATA / "fasseg-v3train-pan0-personne01146.jpg"
    if not photo.is_file():
        pytest.skip(f"needs the shared fasseg-v3-train photos at {B.DATA}")
    label = B._read_label(B.DATA / "fasseg-v3train-pan0-personne01146_label.png")
    finders = B.make_finders()
    for name, find in finders.items():
        centres, how = find(read_image(photo))
        assert centres and how == "default", name
        assert B.on_face(label, centres[0]), name
