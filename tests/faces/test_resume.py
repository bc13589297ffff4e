"""Resuming a folder run (``segment --resume``): finished photos are skipped, the
rest are segmented again, and the summary keeps every row."""

import csv

import numpy as np
import pytest

import facesegment.faces.folder as folder
from facesegment.data.imageio import write_png_atomic
from facesegment.faces.resume import previous_rows
from tests.dense.test_inference import random_model


@pytest.fixture()
def photos(tmp_path):
    rng = np.random.default_rng(3)
    src = tmp_path / "in"
    src.mkdir()
    for name in ("a", "b"):
        write_png_atomic(src / f"{name}.png", rng.integers(0, 256, (250, 250, 3), np.uint8))
    write_png_atomic(src / "noface.png", rng.integers(0, 256, (90, 120, 3), np.uint8))
    (src / "broken.jpg").write_bytes(b"not a jpeg")
    return src


@pytest.fixture()
def calls(monkeypatch):
    seen = []
    real = folder._segment_item

    def spy(item, *args, **kw):
        seen.append(item.name)
        return real(item, *args, **kw)

    monkeypatch.setattr(folder, "_segment_item", spy)
    return seen


def _summary(out):
    with open(out / "summary.csv", newline="") as fh:
        return {r["name"]: r for r in csv.DictReader(fh)}


def test_resume_skips_finished_photos_and_redoes_the_rest(photos, tmp_path, calls):
    model = random_model(2, n_trees=2, max_depth=3, kinds=("axis",))
    out = tmp_path / "out"
    first = folder.segment_folder(model, photos, out, progress=False, n_workers=1)
    assert sorted(calls) == ["a.png", "b.png", "broken.jpg", "noface.png"]
    before = _summary(out)
    label_a = (out / "a_label.png").read_bytes()
    # an interrupted run: b not done; a's overlay lost
    rows = [r if r.name != "b.png" else folder.SegmentResult("b.png", "not done")
            for r in first]
    folder.write_summary_csv(out / "summary.csv", rows)
    (out / "a_overlay.png").unlink()
    calls.clear()
    again = folder.segment_folder(model, photos, out, progress=False, n_workers=1,
                                  resume=True)
    assert sorted(calls) == ["a.png", "b.png", "broken.jpg"]     # noface.png was finished
    assert [r.status for r in again] == [r.status for r in first]
    after = _summary(out)
    assert after["noface.png"] == before["noface.png"]
    assert after["b.png"]["status"] == "ok" and (out / "a_overlay.png").is_file()
    assert (out / "a_label.png").read_bytes() == label_a          # same model, same output
    calls.clear()
    folder.segment_folder(model, photos, out, progress=False, n_workers=1, resume=True)
    assert calls == ["broken.jpg"]
    assert {n: r["status"] for n, r in _summary(out).items()} == {
        n: r["status"] for n, r in after.items()}
    calls.clear()
    folder.segment_folder(model, photos, out, progress=False, n_workers=1)
    assert len(calls) == 4                                         # without --resume: all


def test_only_a_summary_facesegment_wrote_counts(photos, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.csv").write_text("name,status,faces,width,height,seconds,message,"
                                     "output,detection,paths,pan\na.png,ok,1,250,250,0.1,,a,,,\n")
    _, items = folder.collect_inputs(photos)
    assert previous_rows(out, items, (folder.LABEL_SUFFIX,)) == {}


def test_resume_on_the_command_line(photos, tmp_path):
    from facesegment.cli import main
    from facesegment.modelio.model import save_model

    model_dir = tmp_path / "model"
    save_model(random_model(2, n_trees=2, max_depth=3, kinds=("axis",)), model_dir)
    out = tmp_path / "out"
    argv = ["segment", str(photos), str(out), "--model", str(model_dir), "--workers", "1", "-q"]
    assert main(argv) == 1                       # broken.jpg and noface.png are skipped
    before = (out / "summary.csv").read_text()
    assert main(argv + ["--resume"]) == 1
    assert (out / "summary.csv").read_text().splitlines()[1:3] == before.splitlines()[1:3]
