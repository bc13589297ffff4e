"""Photos with hand-drawn label maps that label only some classes (e.g. FASSEG).

A folder holds ``NAME.jpg`` (or .png/.bmp) photos and ``NAME_label.png`` maps of
class ids; ``254`` marks face pixels of none of the labelled parts (never
background), ``255`` unlabelled pixels (never trained, never scored).  An
optional ``manifest.json`` (``{"faces": {NAME: {"person": ..., "pan": ...}}}``)
gives each photo its group (the person: folds never split a group) and head
turn.  Without one, each photo is its own group and its pan is unknown.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError

_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
_FIX = "give a folder of NAME.jpg photos with NAME_label.png maps (see docs/handdrawn.md)"


@dataclass(frozen=True)
class HanddrawnPhoto:
    """One photo of a hand-drawn dataset."""

    name: str
    image: Path
    labels: Path
    group: object
    pan: float


def read_handdrawn(folder):
    """The photos of a hand-drawn dataset folder, sorted by name.

    A ``NAME_label.png`` without a photo beside it is left out.

    Parameters
    ----------
    folder : str or path-like
        The dataset folder (not searched recursively).

    Returns
    -------
    list of HanddrawnPhoto
        Each with its manifest's person as ``group`` (default: its name) and its
        ``pan`` (NaN when unknown).

    Raises
    ------
    DataError
        When the folder is missing, holds no labelled photo, or its manifest is
        not valid JSON.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, "is not a folder", _FIX)
    meta = {}
    man = folder / "manifest.json"
    if man.is_file():
        try:
            doc = json.loads(man.read_text())
            meta = doc.get("faces", {}) if isinstance(doc, dict) else {}
            if not isinstance(meta, dict):
                raise ValueError("field faces is not an object")
        except (OSError, ValueError) as exc:
            raise DataError(man, f"cannot be read ({exc})", "fix or remove the manifest") from None
    photos = []
    for lab in sorted(folder.glob("*_label.png")):
        name = lab.name[: -len("_label.png")]
        image = next((folder / (name + s) for s in _IMAGE_SUFFIXES
                      if (folder / (name + s)).is_file()), None)
        if image is None:
            continue
        m = meta.get(name) if isinstance(meta.get(name), dict) else {}
        pan = m.get("pan")
        photos.append(HanddrawnPhoto(name, image, lab, m.get("person", name),
                                     float(pan) if isinstance(pan, (int, float)) else float("nan")))
    if not photos:
        raise DataError(folder, "holds no photo with a NAME_label.png map", _FIX)
    return photos


def group_folds(photos):
    """Leave-one-group-out folds; no group is on both sides of a fold.

    Parameters
    ----------
    photos : sequence of HanddrawnPhoto
        The photos (their ``group`` is read).

    Returns
    -------
    list of tuple
        ``(group, train indices, held-out indices)`` per group, groups sorted by
        their text; indices into ``photos``.
    """
    groups = sorted({p.group for p in photos}, key=str)
    return [(g, [i for i, p in enumerate(photos) if p.group != g],
             [i for i, p in enumerate(photos) if p.group == g]) for g in groups]


__all__ = ["HanddrawnPhoto", "read_handdrawn", "group_folds"]
