"""Train / validation / test splits of a labelled face dataset.

Rules (deterministic given the seed):

1. If ``ROOT/train`` and ``ROOT/test`` are folders they are the training and
   test sets as given (labels from ``LABELS/train`` and ``LABELS/test`` when a
   parallel label tree is used).
2. Otherwise the faces under ``ROOT`` are split by *person*, so that no person
   is in two splits.  The person of an image is, in order:
   the first group of ``person_pattern`` matched against the file name stem
   (when given), else its parent folder relative to ``ROOT`` (LFW:
   ``lfw/<Person>/<Person>_0001.jpg``), else (a flat folder) the image itself.
   Persons are shuffled with ``numpy.random.default_rng(seed)`` and assigned to
   the test set until it holds at least ``test_fraction`` of the images.
3. The validation set is drawn from the training images by person with an
   independent stream of the same seed: persons are shuffled and taken until
   at least ``n_validation`` images are held out (exactly ``n_validation`` when
   each image is its own person).  ``train`` excludes them; ``train_all`` is
   train + validation (for the final model after model selection).

Splits are computed over every image found, labelled or not; images without
labels that ``facesegment label`` reported as skipped are removed afterwards
(with ``require_labels=True``), so the split of an image never depends on
which others could be labelled.  Every list is sorted by record name.
"""

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .datasets import FaceRecord, find_faces, skipped_by_labeller
from ..errors import DataError

#: Person of an LFW-style name ``Person_Name_0001``.
LFW_PERSON_PATTERN = r"^(.+)_\d{4}$"


@dataclass(frozen=True)
class Splits:
    """Lists of FaceRecord: ``train`` (without validation), ``validation``, ``test``."""

    train: list
    validation: list
    test: list
    by_person: bool  # False when train/ and test/ folders were used as given
    seed: int

    @property
    def train_all(self):
        """Training plus validation records, sorted by name."""
        return sorted(self.train + self.validation, key=lambda r: r.name)

    def summary(self):
        """One line: counts per split."""
        how = "seeded split by person" if self.by_person else "train/ and test/ folders as given"
        return (f"{len(self.train)} train + {len(self.validation)} validation, "
                f"{len(self.test)} test ({how}, seed {self.seed})")


def person_of(record, person_pattern=None):
    """The person key of a record (see the module rules).

    Parameters
    ----------
    record : FaceRecord
    person_pattern : str or re.Pattern, optional
        Regular expression whose first group (or whole match) on the file
        name stem is the person.
    """
    parts = record.name.split("/")
    stem = parts[-1]
    if person_pattern is not None:
        m = re.search(person_pattern, stem)
        if m:
            return m.group(1) if m.groups() else m.group(0)
    if len(parts) > 1:
        return "/".join(parts[:-1])
    return stem


def _group_order(records, person_pattern, rng):
    groups = {}
    for r in records:
        groups.setdefault(person_of(r, person_pattern), []).append(r)
    keys = sorted(groups)
    order = rng.permutation(len(keys))
    return [groups[keys[i]] for i in order]


def _take(groups, n_wanted):
    taken, rest = [], []
    for g in groups:
        (taken if len(taken) < n_wanted else rest).extend(g)
    return taken, rest


def _sorted(recs):
    return sorted(recs, key=lambda r: r.name)


def _check(name, value, ok, what):
    if not ok:
        raise ValueError(f"{name}={value!r} is invalid: {what}")


def split_records(records, *, test_fraction=0.2, n_validation=100, seed=0, person_pattern=None,
                  test=None):
    """Split records by person into train / validation / test.

    Parameters
    ----------
    records : list of FaceRecord
        All records (or the training records when ``test`` is given).
    test_fraction : float in (0, 1)
        Minimum share of images in the test split (ignored when ``test`` is given).
    n_validation : int >= 0
        Training images held out for model selection.
    seed : int
    person_pattern : str, optional
    test : list of FaceRecord, optional
        A test set given separately (then ``records`` are all training records).

    Returns
    -------
    Splits
    """
    _check("n_validation", n_validation, isinstance(n_validation, (int, np.integer))
           and n_validation >= 0, "use an integer >= 0")
    _check("seed", seed, isinstance(seed, (int, np.integer)) and seed >= 0,
           "use a non-negative integer")
    if test is None:
        _check("test_fraction", test_fraction, 0.0 < float(test_fraction) < 1.0,
               "use a fraction strictly between 0 and 1, e.g. 0.2")
    ss_test, ss_val = np.random.SeedSequence(int(seed)).spawn(2)
    records = list(records)
    if test is None:
        groups = _group_order(records, person_pattern, np.random.default_rng(ss_test))
        n_test = int(np.ceil(test_fraction * len(records)))
        test_recs, train_recs = _take(groups, n_test)
        by_person = True
    else:
        test_recs, train_recs, by_person = list(test), records, False
    if n_validation >= len(train_recs) and n_validation > 0:
        raise ValueError(f"n_validation={n_validation} is not smaller than the {len(train_recs)} "
                         "training images; lower it (e.g. --validation 10)")
    groups = _group_order(train_recs, person_pattern, np.random.default_rng(ss_val))
    val_recs, train_recs = _take(groups, n_validation)
    return Splits(_sorted(train_recs), _sorted(val_recs), _sorted(test_recs), by_person, int(seed))


def has_given_splits(root):
    """Whether ``root`` has ``train/`` and ``test/`` subfolders.

    Parameters
    ----------
    root : str or path-like
        The dataset folder.

    Returns
    -------
    bool
    """
    root = Path(root)
    return (root / "train").is_dir() and (root / "test").is_dir()


def split_dataset(root, labels=None, *, test_fraction=0.2, n_validation=100, seed=0,
                  person_pattern=None, require_labels=True):
    """Find the labelled faces under ``root`` and split them (see the module rules).

    Parameters
    ----------
    root : path
        Dataset folder (with ``train/`` and ``test/``, or any tree of images).
    labels : path, optional
        Parallel label tree (e.g. the OUT_DIR of ``facesegment label``).
    test_fraction, n_validation, seed, person_pattern
        See :func:`split_records`.
    require_labels : bool
        When True, an image without a label map is an error naming it, except
        images that ``facesegment label`` reported as skipped, which are left
        out.  The split itself is computed over all images either way, so it
        does not depend on this flag.

    Returns
    -------
    Splits
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, "is not a folder", "give the dataset folder")
    lab = Path(labels) if labels is not None else None
    # Splits are computed over every image found, labelled or not, so that
    # whether labels are required (or some images were skipped by the
    # labeller) never changes which split an image is in.
    if has_given_splits(root):
        train = find_faces(root / "train", lab / "train" if lab else None, False)
        test = find_faces(root / "test", lab / "test" if lab else None, False)
        s = split_records(train, test=test, n_validation=n_validation, seed=seed,
                          person_pattern=person_pattern)
        label_roots = {"train": lab / "train" if lab else root / "train",
                       "test": lab / "test" if lab else root / "test"}
    else:
        recs = find_faces(root, labels, False)
        s = split_records(recs, test_fraction=test_fraction, n_validation=n_validation,
                          seed=seed, person_pattern=person_pattern)
        label_roots = {"train": lab or root, "test": lab or root}
    if not require_labels:
        return s
    keep_train = _labelled(s.train + s.validation, label_roots["train"])
    keep_test = _labelled(s.test, label_roots["test"])
    return Splits([r for r in s.train if r.name in keep_train],
                  [r for r in s.validation if r.name in keep_train],
                  [r for r in s.test if r.name in keep_test], s.by_person, s.seed)


def _labelled(records, label_root):
    """Names of records that have a label; error for unlabelled ones the labeller did not skip."""
    skipped = skipped_by_labeller(label_root)
    keep = set()
    for r in records:
        if r.label is not None:
            keep.add(r.name)
        elif r.name not in skipped:
            raise DataError(r.image, "has no label map",
                            "run `facesegment label` on the folder or remove the image")
    return keep


def records_persons(records, person_pattern=None):
    """The person keys of some records.

    Parameters
    ----------
    records : iterable of FaceRecord
        The faces.
    person_pattern : str or re.Pattern, optional
        As :func:`person_of`.

    Returns
    -------
    set of str
        ``person_of(r, person_pattern)`` of every record.
    """
    return {person_of(r, person_pattern) for r in records}


__all__ = ["Splits", "FaceRecord", "LFW_PERSON_PATTERN", "person_of", "split_records",
           "split_dataset", "has_given_splits", "records_persons"]
