"""Labelled face datasets: discovery of image/label pairs, loading, splits.

A *labelled face* is an RGB uint8 image plus a uint8 label map of the same size
(ids 0-7, 255 = ignore).  On disk: ``NAME.<jpg|png|...>`` beside ``NAME_label.png``
(searched recursively), or labels in a parallel tree ``LABELS/<rel>/NAME_label.png``
mirroring the image tree (so read-only image folders can be labelled).
"""

import os
from dataclasses import dataclass
from pathlib import Path

from ..classes import IGNORE, N_CLASSES
from ..errors import DataError
from .imageio import IMAGE_EXTENSIONS, read_image, read_label, to_grey

LABEL_SUFFIX = "_label.png"
#: Report written by `facesegment label` into its output folder.
LABEL_REPORT = "label_report.csv"
#: Report statuses of images that `facesegment label` skipped (no label map).
SKIPPED_STATUSES = ("no-face", "unreadable", "error")


def skipped_by_labeller(labels_root):
    """Names (relative, no extension) that ``facesegment label`` listed as skipped.

    Parameters
    ----------
    labels_root : str or path-like
        The label folder, whose ``label_report.csv`` is read when it exists.

    Returns
    -------
    set of str
        The names of the report's rows with a status of :data:`SKIPPED_STATUSES`;
        empty when there is no report.

    Raises
    ------
    DataError
        When the report exists but cannot be read or parsed.
    """
    import csv

    path = Path(labels_root) / LABEL_REPORT
    if not path.is_file():
        return set()
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return {row["name"] for row in csv.DictReader(fh)
                    if row.get("status") in SKIPPED_STATUSES and row.get("name")}
    except (OSError, KeyError, csv.Error) as exc:
        raise DataError(path, f"unreadable label report ({exc})",
                        "rerun `facesegment label` or delete the report") from exc


@dataclass(frozen=True)
class FaceRecord:
    """One face on disk: its name, image path and (maybe missing) label path."""

    name: str          # relative path of the image without extension, '/'-separated
    image: str         # image path
    label: str | None  # label path, or None when no label was found
    #: the detector found no face (facesegment.faces.aligned): scored as all background
    missed: bool = False


def find_images(root):
    """All image files under ``root`` (recursively, sorted), excluding label maps.

    Symlinked subfolders are followed, with a guard: a folder is visited once
    (a link back to an ancestor, a link loop, or a second link to the same
    folder is not entered again), and a link that points inside ``root`` or to
    a folder that contains ``root`` is not entered (the walk reaches those
    images under their own names anyway).  ``NAME_label.png`` and
    ``NAME_overlay.png`` files are not images here; unreadable folders are
    skipped.

    Parameters
    ----------
    root : str or path-like
        The folder to search.

    Returns
    -------
    list of pathlib.Path
        The images of each folder in name order, then those of its subfolders.

    Raises
    ------
    DataError
        When ``root`` is not a folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, "is not a folder", "give the folder that holds the face images")
    root_real = os.path.realpath(root)
    out = []
    _scan(str(root), root_real, root_real, {root_real}, out)
    return out


def _scan(folder, real, root_real, seen, out):
    """Append the images of ``folder`` (real path ``real``), then those of its
    subfolders in name order (the order of ``os.walk``), to ``out``."""
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:  # an unreadable folder is skipped, as os.walk does
        return
    subdirs = []
    for e in entries:
        try:
            is_dir = e.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            link = e.is_symlink()
            sub_real = os.path.realpath(e.path) if link else os.path.join(real, e.name)
            if sub_real in seen:
                continue
            if link and (_within(sub_real, root_real) or _within(root_real, sub_real)):
                continue
            seen.add(sub_real)
            subdirs.append((e.path, sub_real))
            continue
        low = e.name.lower()
        if low.endswith(LABEL_SUFFIX) or low.endswith("_overlay.png"):
            continue
        if low.endswith(IMAGE_EXTENSIONS):
            out.append(Path(e.path))
    for path, sub_real in subdirs:
        _scan(path, sub_real, root_real, seen, out)


def _within(path, folder):
    """Whether the real path ``path`` is ``folder`` or inside it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def find_faces(root, labels=None, require_labels=True):
    """Discover labelled faces under ``root``.

    Parameters
    ----------
    root : path
        Folder of images, searched recursively.
    labels : path, optional
        A parallel tree holding ``<rel>/NAME_label.png``; default: beside the images.
    require_labels : bool
        When True, an image without a label map is an error naming it, unless
        ``facesegment label`` listed it as skipped (no face found, unreadable)
        in ``label_report.csv`` of the label folder: such images are left out
        (the report is the record of them).

    Returns
    -------
    list of FaceRecord, sorted by name.
    """
    root = Path(root)
    images = find_images(root)
    if not images:
        raise DataError(root, "contains no images (.jpg, .jpeg, .png, .bmp)",
                        "point at a folder of face images, e.g. ../shared/data/faces300w/train")
    skipped = skipped_by_labeller(labels if labels is not None else root) if require_labels else set()
    recs = []
    for img in images:
        rel = img.relative_to(root).with_suffix("")
        base = Path(labels) / rel if labels is not None else img.with_suffix("")
        lab = Path(str(base) + LABEL_SUFFIX)
        if not lab.exists():
            if rel.as_posix() in skipped:
                continue
            if require_labels:
                raise DataError(img, f"has no label map (looked for {lab})",
                                "run `facesegment label` on the folder or remove the image")
            lab = None
        recs.append(FaceRecord(rel.as_posix(), str(img), str(lab) if lab else None))
    return recs


def load_face(record, grey=False):
    """Load the image and label map of a labelled face.

    Parameters
    ----------
    record : FaceRecord
        The face.
    grey : bool, default=False
        Return the image as grey ``(H, W)`` (see ``imageio.to_grey``).

    Returns
    -------
    image : ndarray of uint8, shape (H, W, 3), or (H, W) with ``grey``
    label : ndarray of uint8, shape (H, W)
        Class ids (255: ignore).

    Raises
    ------
    DataError
        When the image or label map cannot be read, the record has no label map,
        or the label map's size differs from the image's.
    """
    image = read_image(record.image)
    if grey:
        image = to_grey(image)
    if record.label is None:
        raise DataError(record.image, "has no label map",
                        "run `facesegment label` on the folder or remove the image")
    label = read_label(record.label, image.shape[:2])
    return image, label


def check_face(record):
    """Validate one labelled face (a top-level, picklable task).

    Parameters
    ----------
    record : FaceRecord
        The face.

    Returns
    -------
    counts : ndarray of int64, shape (9,), or None
        Pixels per class 0-7 plus ignored pixels (last entry); None when the face
        is bad.
    message : str or None
        The one-line problem when the image or its label map is bad, else None.
    """
    import numpy as np

    try:
        _, label = load_face(record)
    except DataError as exc:
        return None, str(exc)
    counts = np.bincount(label.ravel(), minlength=256).astype(np.int64)
    return np.append(counts[:N_CLASSES], counts[IGNORE]), None
