"""Labelled face datasets: discovery of image/label pairs, loading, splits.

A *labelled face* is an RGB uint8 image plus a uint8 label map of the same size
(ids 0-7, 255 = ignore).  On disk: ``NAME.<jpg|png|...>`` beside ``NAME_label.png``
(searched recursively), or labels in a parallel tree ``LABELS/<rel>/NAME_label.png``
mirroring the image tree (so read-only image folders can be labelled).
"""

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import DataError
from .imageio import IMAGE_EXTENSIONS, read_image, read_label

LABEL_SUFFIX = "_label.png"


@dataclass(frozen=True)
class FaceRecord:
    """One face on disk: its name, image path and (maybe missing) label path."""

    name: str          # relative path of the image without extension, '/'-separated
    image: str         # image path
    label: str | None  # label path, or None when no label was found


def find_images(root):
    """All image files under ``root`` (recursively, sorted), excluding label maps."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, "is not a folder", "give the folder that holds the face images")
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            low = fn.lower()
            if low.endswith(LABEL_SUFFIX) or low.endswith("_overlay.png"):
                continue
            if low.endswith(IMAGE_EXTENSIONS):
                out.append(Path(dirpath) / fn)
    return out


def find_faces(root, labels=None, require_labels=True):
    """Discover labelled faces under ``root``.

    Parameters
    ----------
    root : path
        Folder of images, searched recursively.
    labels : path, optional
        A parallel tree holding ``<rel>/NAME_label.png``; default: beside the images.
    require_labels : bool
        When True, an image without a label map is an error naming it.

    Returns
    -------
    list of FaceRecord, sorted by name.
    """
    root = Path(root)
    images = find_images(root)
    if not images:
        raise DataError(root, "contains no images (.jpg, .jpeg, .png, .bmp)",
                        "point at a folder of face images, e.g. ../shared/data/faces300w/train")
    recs = []
    for img in images:
        rel = img.relative_to(root).with_suffix("")
        base = Path(labels) / rel if labels is not None else img.with_suffix("")
        lab = Path(str(base) + LABEL_SUFFIX)
        if not lab.exists():
            if require_labels:
                raise DataError(img, f"has no label map (looked for {lab})",
                                "run `facesegment label` on the folder or remove the image")
            lab = None
        recs.append(FaceRecord(rel.as_posix(), str(img), str(lab) if lab else None))
    return recs


def load_face(record):
    """Load ``(image (H,W,3) uint8, label (H,W) uint8)`` for a FaceRecord."""
    image = read_image(record.image)
    if record.label is None:
        raise DataError(record.image, "has no label map",
                        "run `facesegment label` on the folder or remove the image")
    label = read_label(record.label, image.shape[:2])
    return image, label
