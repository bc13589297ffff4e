"""benchmarks/bench_folder.py: whole-folder throughput of the default model, its
outputs equal to image-at-a-time segmentation."""

import json

import pytest

from benchmarks import bench_folder as B

pytestmark = pytest.mark.shared


def test_a_small_folder_run_is_reported_and_matches_single_images(tmp_path, monkeypatch):
    if not B.LFW.is_dir():
        pytest.skip("needs ../shared/data/lfw-gray")
    pytest.importorskip("mediapipe")
    out = tmp_path / "folder.json"
    assert B.main(["--n", "4", "--check", "4", "--no-cluster", "--no-label",
                   "--workers", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["segment"]["images"] == 4 and res["segment"]["images_per_s"] > 0
    assert res["identical_to_single"] == [4, 4]
    assert res["model"] == "faces-handdrawn" and "label" not in res
    assert B.main(["--n", "2", "--check", "0", "--no-cluster", "--no-label",
                   "--out", str(out)]) == 0
    assert "identical_to_single" not in json.loads(out.read_text())


def test_the_images_are_the_first_ones_sorted():
    if not B.LFW.is_dir():
        pytest.skip("needs ../shared/data/lfw-gray")
    first = B.images(3)
    assert first == sorted(first) and len(first) == 3 and B.images(0)[:3] == first
