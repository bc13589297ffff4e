"""Splits: given train/test folders, seeded split by person, validation subset."""

import numpy as np
import pytest

from facesegment.data.datasets import FaceRecord
from facesegment.errors import DataError
from facesegment.data.imageio import write_png_atomic
from facesegment.data.splits import (LFW_PERSON_PATTERN, person_of, records_persons, split_dataset,
                                split_records)


def _recs(spec):
    """FaceRecords for {person: n_images} in LFW layout."""
    return [FaceRecord(f"{p}/{p}_{k:04d}", f"/x/{p}/{p}_{k:04d}.jpg", f"/l/{p}_{k:04d}_label.png")
            for p, n in spec.items() for k in range(1, n + 1)]


def _spec(n_people=40, seed=3):
    sizes = np.random.default_rng(seed).integers(1, 8, n_people)
    return {f"Person_{i:02d}": int(s) for i, s in enumerate(sizes)}


def test_person_rules():
    r = FaceRecord("George_Bush/George_Bush_0001", "a", None)
    assert person_of(r) == "George_Bush"
    flat = FaceRecord("George_Bush_0001", "a", None)
    assert person_of(flat) == "George_Bush_0001"
    assert person_of(flat, LFW_PERSON_PATTERN) == "George_Bush"


def test_split_by_person_disjoint_and_complete():
    recs = _recs(_spec())
    s = split_records(recs, test_fraction=0.25, n_validation=10, seed=7)
    names = [r.name for r in s.train + s.validation + s.test]
    assert sorted(names) == sorted(r.name for r in recs)
    tr, va, te = (records_persons(x) for x in (s.train, s.validation, s.test))
    assert not (tr & te) and not (tr & va) and not (va & te)
    assert len(s.test) >= 0.25 * len(recs)
    assert 10 <= len(s.validation) < 10 + 8
    assert s.by_person and len(s.train_all) == len(s.train) + len(s.validation)


def test_split_deterministic_and_seed_dependent():
    recs = _recs(_spec())
    a = split_records(recs, seed=1, n_validation=5)
    b = split_records(list(reversed(recs)), seed=1, n_validation=5)
    c = split_records(recs, seed=2, n_validation=5)
    assert a == b
    assert [r.name for r in a.test] != [r.name for r in c.test]


def test_validation_exact_for_one_image_per_person():
    train = [FaceRecord(f"img{i:03d}", "a", "b") for i in range(300)]
    test = [FaceRecord(f"t{i}", "a", "b") for i in range(20)]
    s = split_records(train, test=test, n_validation=100, seed=0)
    assert len(s.validation) == 100 and len(s.train) == 200 and len(s.test) == 20
    assert not s.by_person
    assert split_records(train, test=test, n_validation=0).validation == []


def test_bad_parameters():
    recs = _recs({"A": 2, "B": 2})
    with pytest.raises(ValueError, match=r"n_validation=10 is not smaller than the 2 training"):
        split_records(recs, n_validation=10, test_fraction=0.5)
    with pytest.raises(ValueError, match=r"test_fraction=1.5 is invalid"):
        split_records(recs, test_fraction=1.5)
    with pytest.raises(ValueError, match=r"seed=-1 is invalid"):
        split_records(recs, seed=-1)


def _labelled(root, name):
    img = np.zeros((4, 4, 3), np.uint8)
    write_png_atomic(root / f"{name}.png", img)
    write_png_atomic(root / f"{name}_label.png", img[:, :, 0])


def test_split_dataset_given_folders(tmp_path):
    for i in range(6):
        _labelled(tmp_path / "train", f"a{i}")
    for i in range(3):
        _labelled(tmp_path / "test", f"b{i}")
    s = split_dataset(tmp_path, n_validation=2, seed=0)
    assert [r.name for r in s.test] == ["b0", "b1", "b2"]
    assert len(s.train) == 4 and len(s.validation) == 2
    assert "train/ and test/ folders as given" in s.summary()


def test_split_dataset_lfw_layout(tmp_path):
    for p in ("Ann", "Bob", "Cid", "Dan", "Eve"):
        for k in range(2):
            _labelled(tmp_path / p, f"{p}_{k:04d}")
    s = split_dataset(tmp_path, n_validation=2, test_fraction=0.2, seed=0)
    assert len(s.test) == 2 and len(s.validation) == 2 and len(s.train) == 6
    assert len({r.name.split("/")[0] for r in s.test}) == 1


@pytest.mark.shared
def test_faces300w_split(faces300w):
    s = split_dataset(faces300w)
    assert (len(s.train), len(s.validation), len(s.test)) == (1107, 100, 250)


def test_split_does_not_depend_on_skipped_images(tmp_path):
    imgs, labs = tmp_path / "imgs", tmp_path / "labs"
    rows = ["name,image,status,faces,detection,seconds,message"]
    for i in range(12):
        p = f"P{i:02d}"
        write_png_atomic(imgs / p / f"{p}_0001.png", np.zeros((4, 4, 3), np.uint8))
        if i % 4 == 3:  # every 4th person: the labeller found no face
            rows.append(f"{p}/{p}_0001,x,no-face,0,,0.1,no face")
        else:
            write_png_atomic(labs / p / f"{p}_0001_label.png", np.zeros((4, 4), np.uint8))
    (labs / "label_report.csv").write_text("\n".join(rows) + "\n")
    full = split_dataset(imgs, labs, n_validation=2, test_fraction=0.25, require_labels=False)
    lab = split_dataset(imgs, labs, n_validation=2, test_fraction=0.25)
    for a, b in ((full.train, lab.train), (full.validation, lab.validation),
                 (full.test, lab.test)):
        assert [r.name for r in b] == [r.name for r in a if r.label is not None]
    assert sum(len(x) for x in (lab.train, lab.validation, lab.test)) == 9
    (labs / "label_report.csv").unlink()
    with pytest.raises(DataError, match=r"P03_0001\.png: has no label map"):
        split_dataset(imgs, labs, n_validation=2, test_fraction=0.25)
