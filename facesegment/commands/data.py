"""``facesegment data``: download LFW, check a labelled folder, render labels, show splits."""

import os
import sys
import time
from ..atomic import check_output_path, write_bytes_atomic, write_json_atomic
from ..bounds import arg_type
from ..classes import CLASS_NAMES
from ..data.datasets import (LABEL_REPORT, LABEL_SUFFIX, check_face, find_faces, find_images,
                             skipped_by_labeller)
from ..data.download import fetch_lfw
from ..data.imageio import read_image
from ..data.splits import split_dataset
from ..errors import DataError, FaceSegmentError
from ..faces.landmarks import pts_path_for, read_pts, render_labels
from ..parallel import map_tasks
from ._common import MAX_WORKERS, int_in, nonneg_int, seed_int

HELP = "get and check face data: download LFW, validate a labelled folder, render .pts, show splits"
DESCRIPTION = """\
Actions:
  lfw     download lfw-funneled.tgz (or --unfunneled lfw.tgz), verify its SHA-256,
          extract it into --dest; resumes a partial download; --archive PATH
          uses a tarball fetched by hand (offline machines)
  check   validate every image and label map under DIR (one line per bad file)
          and print the pixel count of each class
  render  write OUT/<rel>/NAME_label.png from every DIR/<rel>/NAME.pts (68 points)
  splits  show (or --out FILE.json save) the train/validation/test split of DIR

Exit status: 0 ok, 1 some files bad (the rest was processed), 2 error.

examples:
  facesegment data lfw --dest data/lfw
  facesegment data lfw --archive ~/Downloads/lfw-funneled.tgz
  facesegment data check ../shared/data/faces300w/train
  facesegment data check ../shared/data/lfw-gray/lfw --labels data/labels/lfw-gray
  facesegment data splits ../shared/data/lfw-gray/lfw --labels data/labels/lfw-gray
"""


def add_arguments(p):
    """Add the options of ``facesegment data`` to its sub-parser.

    One sub-parser per action (``lfw``, ``check``, ``render``, ``splits``);
    the action is required.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``data``.
    """
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    q = sub.add_parser("lfw", help="download, verify and extract LFW",
                       description="Download LFW (funneled by default), verify the SHA-256, "
                                   "extract into --dest. A rerun after success returns at once.")
    q.add_argument("--unfunneled", action="store_true",
                   help="the original lfw.tgz instead of the funneled (aligned) lfw-funneled.tgz")
    q.add_argument("--dest", default="data/lfw", metavar="DIR",
                   help="folder for the archive and the images (default data/lfw)")
    q.add_argument("--url", default=None, help="download from this address instead (a mirror of the same file)")
    q.add_argument("--archive", default=None, metavar="PATH",
                   help="use this tarball (downloaded by hand) instead of downloading; it is checksummed")
    q.add_argument("--sha256", default=None, metavar="HEX",
                   help="expected SHA-256 (default: the published one of the chosen archive)")
    q.add_argument("--timeout", type=arg_type("timeout"), default=30.0, metavar="S",
                   help="seconds to wait for the server (default 30)")
    q.add_argument("--quiet", action="store_true", help="no progress line")

    q = sub.add_parser("check", help="validate a labelled folder and count pixels per class",
                       description="Read every image and label map; list bad files one per line.")
    q.add_argument("dir", metavar="DIR", help="folder of images (searched recursively)")
    q.add_argument("--labels", default=None, metavar="DIR",
                   help="parallel label tree (default: NAME_label.png beside each image)")
    q.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=None, metavar="N",
                   help="threads (default: all cores)")
    q.add_argument("--quiet", action="store_true", help="no progress line")

    q = sub.add_parser("render", help="render NAME_label.png from NAME.pts landmark files",
                       description="For every image with a 68-point NAME.pts beside it, write "
                                   "OUT/<rel>/NAME_label.png with the polygon rules of docs/data.md.")
    q.add_argument("dir", metavar="DIR", help="folder of images with .pts files (read-only)")
    q.add_argument("out", metavar="OUT", help="output folder (mirrors DIR)")
    q.add_argument("--overwrite", action="store_true", help="replace label maps that `data render` wrote before (label maps made by hand or by other tools are never replaced)")

    q = sub.add_parser("splits", help="show the train/validation/test split of a dataset",
                       description="train/ and test/ folders are used as given; otherwise a "
                                   "seeded split by person (the parent folder, as in LFW).")
    q.add_argument("dir", metavar="DIR", help="dataset folder")
    q.add_argument("--labels", default=None, metavar="DIR", help="parallel label tree")
    q.add_argument("--seed", type=seed_int, default=0, help="split seed (default 0)")
    q.add_argument("--validation", type=nonneg_int, default=100, metavar="N",
                   help="training images held out for model selection (default 100, as in the paper)")
    q.add_argument("--test-fraction", type=arg_type("test_fraction"), default=0.2, metavar="F",
                   help="minimum share of images in the test split when there are no train/test folders (default 0.2)")
    q.add_argument("--person-pattern", type=_regex, default=None, metavar="REGEX",
                   help=r"regex whose first group on the file name is the person, e.g. '^(.+)_\d{4}$'")
    q.add_argument("--out", default=None, metavar="FILE.json", help="write the lists of image names as JSON")
    q.add_argument("--overwrite", action="store_true",
                   help="let --out replace a file that facesegment did not write")


def _regex(text):
    """argparse type: a valid regular expression (returned as given)."""
    import argparse
    import re

    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(
            f"not a valid regular expression {text!r} ({exc}); e.g. '^(.+)_\\d{{4}}$'") from None
    return text


def run(args):
    """Run the chosen action of ``facesegment data`` (``args.action``).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment data`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0 done; 1 some files bad or skipped (``check``, ``render``),
        the rest processed.

    Raises
    ------
    DownloadError
        ``lfw``: the download, its checksum or the extraction failed (one line
        naming the file and the fix).
    DataError
        One line naming the file and the fix (a folder without faces or
        ``.pts`` files, an output that may not be written...).
    FaceSegmentError
        When ``splits`` cannot split the dataset.
    """
    return {"lfw": _lfw, "check": _check, "render": _render, "splits": _splits}[args.action](args)


def _lfw(args):
    t0 = time.perf_counter()
    folder = fetch_lfw(args.dest, unfunneled=args.unfunneled, url=args.url, archive=args.archive,
                       sha256=args.sha256, progress=not args.quiet, timeout=args.timeout)
    n = sum(1 for _, _, fs in os.walk(folder) for f in fs if f.lower().endswith(".jpg"))
    print(f"LFW ready: {n} images in {folder} ({time.perf_counter() - t0:.1f} s)")
    return 0


def _check(args):
    recs = find_faces(args.dir, args.labels, require_labels=False)
    label_root = args.labels if args.labels is not None else args.dir
    skipped = skipped_by_labeller(label_root)
    n_skipped = sum(1 for r in recs if r.label is None and r.name in skipped)
    recs = [r for r in recs if not (r.label is None and r.name in skipped)]
    total = None
    bad = []
    for _, (counts, msg) in map_tasks(check_face, recs, n_workers=args.workers, desc="check",
                                      unit="images", progress=not args.quiet):
        if msg is not None:
            bad.append(msg)
        else:
            total = counts if total is None else total + counts
    for msg in bad:
        print(f"facesegment: bad: {msg}", file=sys.stderr)
    good = len(recs) - len(bad)
    print(f"{args.dir}: {good} labelled faces OK, {len(bad)} bad")
    if n_skipped:
        print(f"{n_skipped} images have no label because `facesegment label` skipped them "
              f"(no face / unreadable); they are listed in {os.path.join(label_root, LABEL_REPORT)}")
    if total is not None:
        s = max(int(total.sum()), 1)
        print(f"{'id':>3}  {'class':<14}{'pixels':>12}{'share':>9}")
        for i, name in enumerate(CLASS_NAMES):
            print(f"{i:>3}  {name:<14}{int(total[i]):>12}{100 * total[i] / s:>8.2f}%")
        print(f"{255:>3}  {'ignore':<14}{int(total[-1]):>12}{100 * total[-1] / s:>8.2f}%")
    return 1 if bad else 0


def _render(args):
    from pathlib import Path

    root, out = Path(args.dir), Path(args.out)
    images = find_images(root)
    n_ok, n_pts, present, bad, kept, warned = 0, 0, 0, [], [], []
    for img in images:
        pts = pts_path_for(img)
        if not os.path.exists(pts):
            continue
        n_pts += 1
        rel = img.relative_to(root).with_suffix("")
        target = out / (rel.as_posix() + LABEL_SUFFIX)
        if os.path.lexists(target) and not args.overwrite:
            present += 1  # kept as it is: rendered before, or made by hand
            continue
        if os.path.lexists(target) and not rendered_by_us(target):
            kept.append(str(target))  # a label map this command did not write: never replaced
            continue
        try:
            # the size as every reader sees it (EXIF orientation applied)
            shape = read_image(img).shape[:2]
            labels = render_labels(read_pts(pts), shape)
            if not (labels > 0).any():
                warned.append(f"{pts}: no landmark polygon falls inside the {shape[1]}x"
                              f"{shape[0]} image, so {target.name} is all background "
                              "(check the .pts coordinates)")
            write_rendered_label(target, labels)
            n_ok += 1
        except DataError as exc:
            if "cannot write" in exc.problem:
                raise
            bad.append(str(exc))
    for msg in bad:
        print(f"facesegment: skipped: {msg}", file=sys.stderr)
    for msg in warned:
        print(f"facesegment: warning: {msg}", file=sys.stderr)
    for path in kept:
        print(f"facesegment: kept: {path}: not a label map written by `data render` "
              "(made by hand or by another tool), so --overwrite leaves it as it is "
              "(move it away to render it again)", file=sys.stderr)
    print(f"rendered {n_ok} label maps into {out}; {len(bad)} skipped"
          + (f"; {present} already there, kept (--overwrite renders the ones `data render` "
             "wrote again)" if present else "")
          + (f"; {len(kept)} kept (not written by `data render`)" if kept else ""))
    if n_pts == 0:
        raise DataError(root, "has no images with a NAME.pts beside them",
                        "point at a folder with 68-point .pts files")
    return 1 if bad else 0


#: PNG text chunk that marks a label map written by `data render` (key, value).
RENDER_MARK = ("facesegment", "data render")


def write_rendered_label(path, labels):
    """Write a rendered label map atomically, marked as written by ``data render``.

    The mark is the PNG text chunk :data:`RENDER_MARK`, so that ``--overwrite``
    knows it may replace the file.

    Parameters
    ----------
    path : str or path-like
        The ``NAME_label.png`` to write.
    labels : array-like, shape (H, W)
        Class ids (written as an 8-bit grey PNG).

    Raises
    ------
    DataError
        When the path may not be written or the write fails
        (:func:`facesegment.atomic.atomic_path`).
    """
    import io

    from PIL import Image
    import numpy as np
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text(*RENDER_MARK)
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(labels, dtype=np.uint8)).save(buf, format="PNG", pnginfo=info)
    write_bytes_atomic(os.fspath(path), buf.getvalue())


def rendered_by_us(path):
    """Whether the file ``path`` is a label map ``data render`` wrote (its PNG mark).

    Parameters
    ----------
    path : str or path-like
        The file to test.

    Returns
    -------
    bool
        False also for a missing, non-regular or unreadable file.
    """
    from PIL import Image

    try:
        if not os.path.isfile(path):
            return False
        with Image.open(path) as im:
            return getattr(im, "text", {}).get(RENDER_MARK[0]) == RENDER_MARK[1]
    except Exception:  # noqa: BLE001 - unreadable: not ours, so never replaced
        return False


def _splits(args):
    if args.out:  # before any work
        check_output_path(args.out, "split lists")
    try:
        s = split_dataset(args.dir, args.labels, test_fraction=args.test_fraction,
                          n_validation=args.validation, seed=args.seed,
                          person_pattern=args.person_pattern)
    except ValueError as exc:
        if isinstance(exc, FaceSegmentError):
            raise
        raise FaceSegmentError(str(exc)) from exc
    print(s.summary())
    if args.out:
        doc = {"root": str(args.dir), "labels": args.labels, "seed": s.seed, "by_person": s.by_person,
               "train": [r.name for r in s.train], "validation": [r.name for r in s.validation],
               "test": [r.name for r in s.test]}
        write_json_atomic(args.out, doc, fix="choose a writable path for --out")
        print(f"wrote {args.out}")
    return 0
