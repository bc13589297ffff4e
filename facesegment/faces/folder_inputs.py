"""The photos a folder run segments, and the names of their outputs.

Inputs are folders (searched recursively), image files and glob patterns
(:func:`collect_inputs`); each gets a relative name (the summary CSV's) and an
output name without suffix (:func:`output_names`): ``OUT/<output>`` plus
:data:`LABEL_SUFFIX`, :data:`OVERLAY_SUFFIX` or :data:`PROBA_SUFFIX`.
"""

import glob
import os
import posixpath
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..data.datasets import LABEL_SUFFIX as _LAB, find_images
from ..data.imageio import IMAGE_EXTENSIONS
from ..errors import DataError

#: Output files per image: NAME + suffix.
LABEL_SUFFIX, OVERLAY_SUFFIX, PROBA_SUFFIX = "_label.png", "_overlay.png", "_proba.npz"


@dataclass(frozen=True)
class SegmentInput:
    """One photo to segment."""

    path: str      # the file
    name: str      # relative path with extension ('/'-separated): the CSV's name
    output: str    # relative output name without suffix: OUT/<output>_label.png


def collect_inputs(inputs):
    """The photos named by ``inputs``: folders, image files and glob patterns.

    Parameters
    ----------
    inputs : path or str, or a list of them
        A folder is searched recursively (:func:`facesegment.data.datasets.find_images`);
        a file is taken as it is; a pattern with ``* ? [`` (``photos/*.jpg``,
        ``photos/**/*.png``) is expanded (``**`` recursively; folders it
        matches are searched like folders).

    Returns
    -------
    base : Path
        The folder names are relative to: the folder given; a file's or a
        pattern's folder (the part before the first wildcard); for several
        inputs, the deepest folder holding all of these.
    items : list of SegmentInput
        Unique files, in the order given (each folder or pattern sorted).

    Raises
    ------
    DataError
        For an input that does not exist, a pattern that matches no image, or
        no image at all.
    """
    specs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not specs:
        raise DataError(None, "no input given", "give a folder, an image or a quoted pattern")
    found = []  # (base folder, file)
    for spec in specs:
        text = os.fspath(spec)
        p = Path(text)
        if p.is_dir():
            files = find_images(p)
            if not files:
                raise DataError(p, "contains no images (.jpg, .jpeg, .png, .bmp)",
                                "point at a folder of photos")
            found += [(p, f) for f in files]
        elif p.is_file():
            found.append((p.parent, p))
        elif glob.has_magic(text):
            base = _pattern_base(text)
            files = []
            for m in sorted(glob.glob(text, recursive=True)):
                mp = Path(m)
                if mp.is_dir():
                    files += find_images(mp)
                elif mp.is_file():
                    low = mp.name.lower()
                    if low.endswith(IMAGE_EXTENSIONS) and not (
                            low.endswith(_LAB) or low.endswith(OVERLAY_SUFFIX)):
                        files.append(mp)
            if not files:
                raise DataError(text, "matches no images (.jpg, .jpeg, .png, .bmp)",
                                "check the pattern, and quote it ('photos/*.jpg') so that "
                                "the shell passes it on as it is")
            found += [(base, f) for f in files]
        else:
            raise DataError(text, "does not exist",
                            "give a folder of photos, an image file or a quoted pattern "
                            "such as 'photos/*.jpg'")
    bases = {os.path.abspath(b) for b, _ in found}
    base = Path(next(iter(bases)) if len(bases) == 1 else os.path.commonpath(sorted(bases)))
    seen, paths, names = set(), [], []
    for _, f in found:
        key = os.path.abspath(f)
        if key in seen:
            continue
        seen.add(key)
        paths.append(str(f))
        names.append(Path(os.path.relpath(key, base)).as_posix())
    outputs = output_names(names)
    return base, [SegmentInput(p, n, o) for p, n, o in zip(paths, names, outputs)]


def _pattern_base(pattern):
    """The folder part of ``pattern`` before its first wildcard ('.' if none)."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts[:-1]:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def output_names(names):
    """Output names (no suffix) for input names (relative paths with extension).

    The name without its extension (``sub/a.jpg`` -> ``sub/a``) unless another
    input of the same folder has the same one (compared ignoring case, as on
    case-insensitive file systems): then the name keeps its extension
    (``sub/a.jpg``, ``sub/a.png``).  Any remaining clash gets ``-2``, ``-3``...

    Parameters
    ----------
    names : list of str
        '/'-separated relative paths with extension.

    Returns
    -------
    list of str
        One unique (ignoring case) output name per input, in order.
    """
    stems = [posixpath.splitext(n)[0] for n in names]
    count = Counter(s.casefold() for s in stems)
    wanted = [n if count[s.casefold()] > 1 else s for n, s in zip(names, stems)]
    used, out = set(), []
    for n in wanted:
        cand, k = n, 2
        while cand.casefold() in used:
            cand, k = f"{n}-{k}", k + 1
        used.add(cand.casefold())
        out.append(cand)
    return out


__all__ = ["LABEL_SUFFIX", "OVERLAY_SUFFIX", "PROBA_SUFFIX", "SegmentInput",
           "collect_inputs", "output_names"]
