"""``facesegment extract DATA_DIR --out FILE.h5``: class-balanced training windows."""

import os
import sys
from pathlib import Path

from ..bounds import arg_type
from ..classes import CLASS_NAMES
from ..data.datasets import find_faces, skipped_by_labeller
from ..data.extract import check_output, extract_windows
from ..data.splits import split_dataset
from ..errors import DataError, FaceSegmentError
from ..limits import read_text_file
from ._common import (MAX_WINDOW_SIDE, MAX_WINDOWS, MAX_WORKERS, _int_at_least, int_in, nonneg_int,
                      positive_int, seed_int)

HELP = "sample class-balanced windows (31x31 RGB by default) from labelled faces into an HDF5 windows file"
DESCRIPTION = """\
Sample --window x --window windows (31x31, the paper's, by default) of the
image's channels (RGB, or grey with --grey) centred on pixels at least
window//2 px from every border of the labelled faces under DATA_DIR, so that each of the 8 classes gets the same
number of windows over the whole file (the CO2 Forest paper's class balancing),
and write them with their labels, source images, centres, the per-class pixel
counts and sampling factors and the per-feature mean/std to one HDF5 file.

DATA_DIR is a folder of labelled faces (NAME.jpg + NAME_label.png, or labels in
the --labels tree), or a dataset root with train/ (then train/ is used). With
--split, DATA_DIR is split by facesegment.data.splits (train/ and test/ folders as
given, else by person) and only that split is used, e.g. --split train leaves
out the validation images kept for model selection.

Runs as a Dask graph (two passes, one task per image) on local threads, or on a
distributed cluster with --scheduler. The result is identical for a given seed
whatever the scheduler or number of workers. The file is written as
OUT.tmp-<pid> and renamed when complete.

Bad images (unreadable, missing label map, label of the wrong size or with bad
ids): --on-error skip (default) leaves them out, names them, writes the file
from the rest and exits 1; --on-error fail stops at the first one, writes
nothing and exits 2.

Exit status: 0 ok, 1 some images skipped, 2 error.

examples:
  facesegment extract ../shared/data/faces300w --out data/windows/train.h5 --windows 64000
  facesegment extract ../shared/data/faces300w --split train --windows 256000 --out data/windows/train256k.h5
  facesegment extract ../shared/data/lfw-gray/lfw --labels data/labels/lfw-gray --split train --out data/windows/lfw.h5
  facesegment extract ../shared/data/lfw-gray/lfw --labels data/labels/lfw-gray --grey --window 41 --out data/windows/lfw-grey41.h5

The file records its window layout (size and channels); models trained on it
keep it, and dense inference reads windows of that layout (a grey model turns
RGB photos grey the same way).
"""




def _windows_count(text):
    """argparse type: at least one window per class (8)."""
    return _int_at_least(text, 8, "an integer >= 8 (at least one window per class)",
                         MAX_WINDOWS)


def _odd_window(text):
    import argparse

    v = int_in(1, MAX_WINDOW_SIDE)(text)
    if v % 2 == 0:
        raise argparse.ArgumentTypeError(f"expected an odd window side (centred on its pixel), "
                                         f"got {text!r}")
    return v


def add_arguments(p):
    """Add the options of ``facesegment extract`` to its sub-parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``extract``.
    """
    p.add_argument("--window", type=_odd_window, default=31, metavar="W",
                   help="side of the square windows, odd (default 31, the paper's)")
    p.add_argument("--grey", "--gray", action="store_true",
                   help="turn RGB images grey first: one channel, a third of the features")
    p.add_argument("data_dir", metavar="DATA_DIR",
                   help="folder of labelled faces, or a dataset root with train/ (then train/ is used)")
    p.add_argument("--out", "-o", required=True, metavar="FILE.h5",
                   help="output windows file, e.g. data/windows/train.h5 (replaced atomically if it exists)")
    p.add_argument("--windows", "-n", type=_windows_count, default=64000, metavar="N",
                   help="total number of windows, N/8 per class (default 64000; the paper uses 256000 per tree)")
    p.add_argument("--seed", type=seed_int, default=0,
                   help="random seed of the sampling (default 0); same seed and data -> identical file")
    p.add_argument("--labels", metavar="LABEL_TREE", default=None,
                   help="parallel tree of label maps <rel>/NAME_label.png (e.g. the OUT_DIR of "
                        "`facesegment label`); default: beside the images")
    p.add_argument("--split", choices=("train", "train_all", "validation", "test"), default=None,
                   help="use only this split of DATA_DIR as made by facesegment.data.splits (train excludes "
                        "the validation images; default: all images of DATA_DIR or DATA_DIR/train)")
    p.add_argument("--validation", type=nonneg_int, default=100, metavar="N",
                   help="with --split: training images held out for validation (default 100)")
    p.add_argument("--test-fraction", type=arg_type("test_fraction"), default=0.2, metavar="F",
                   help="with --split, when DATA_DIR has no train/ and test/: share of images (by person) "
                        "in the test split (default 0.2)")
    p.add_argument("--split-seed", type=seed_int, default=0, metavar="S",
                   help="with --split: seed of the split (default 0)")
    p.add_argument("--exclude", metavar="FILE", default=None,
                   help="text file of image names to leave out (one per line, relative name or file stem; "
                        "'#' starts a comment)")
    p.add_argument("--on-error", choices=("skip", "fail"), default="skip",
                   help="bad images: skip them, list them and exit 1 (default), or fail at the first with "
                        "exit 2 and no output")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a Dask distributed scheduler (e.g. tcp://host:8786); default: local threads")
    p.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=None, metavar="N",
                   help="local worker threads (default: all cores)")
    p.add_argument("--compression", choices=("gzip", "lzf", "none"), default="gzip",
                   help="HDF5 compression of the windows (default gzip level 1: fastest and smallest measured)")
    p.add_argument("--out-inside-data", action="store_true",
                   help="allow --out inside DATA_DIR or the --labels tree (refused by default: "
                        "a file written there could be taken for data)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


def resolve_data_dir(data_dir):
    """The folder of faces of ``data_dir``: its ``train/`` for a dataset root, else itself.

    Parameters
    ----------
    data_dir : str or path-like
        A folder of labelled faces, or a dataset root with ``train/``.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    DataError
        When ``data_dir`` does not exist or is not a folder.
    """
    p = Path(data_dir)
    if not p.exists():
        raise DataError(p, "does not exist", "give a folder of labelled faces or a dataset root with train/")
    if not p.is_dir():
        raise DataError(p, "is not a folder", "give a folder of labelled faces or a dataset root with train/")
    return p / "train" if (p / "train").is_dir() else p


def read_name_list(path):
    """Image names (one per line, ``#`` comments) from a text file.

    The file must be a regular text file of bounded size (never a pipe or
    ``/dev/zero`` read until out of memory).

    Parameters
    ----------
    path : str or path-like
        The ``--exclude`` file.

    Returns
    -------
    set of str
        The names, stripped; an image extension (``.jpg``, ``.jpeg``, ``.png``,
        ``.bmp``) is removed.

    Raises
    ------
    DataError
        When the file cannot be read (see :func:`facesegment.limits.read_text_file`).
    """
    # a regular text file of bounded size (never a pipe or /dev/zero read until out of memory)
    lines = read_text_file(path, "--exclude name list",
                           "give a text file with one image name per line").splitlines()
    names = set()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(Path(line).with_suffix("").as_posix() if Path(line).suffix.lower()
                      in (".jpg", ".jpeg", ".png", ".bmp") else line)
    return names


def filter_records(records, exclude=(), labels_root=None):
    """Drop excluded names and images that ``facesegment label`` reported as skipped.

    Parameters
    ----------
    records : list of FaceRecord
        The faces found.
    exclude : set of str
        Names (relative, no extension) or file stems to leave out.
    labels_root : path, optional
        Folder whose ``label_report.csv`` lists the images the labeller
        skipped (no face found); those without a label map are left out
        silently, since the report already records them.

    Returns
    -------
    list of FaceRecord
        The records kept, in their order.
    """
    exclude = set(exclude)
    unlabelled = skipped_by_labeller(labels_root) if labels_root is not None else set()
    return [r for r in records
            if r.name not in exclude and r.name.rsplit("/", 1)[-1] not in exclude
            and not (r.label is None and r.name in unlabelled)]


def find_training_faces(data_dir, labels=None, exclude=()):
    """Records to extract from: images under ``data_dir`` minus ``exclude`` names.

    Images without a label map are kept (with ``label=None``) so that the
    error policy of :func:`extract_windows` decides about them, except those
    that ``facesegment label`` reported as skipped (see :func:`filter_records`).

    Parameters
    ----------
    data_dir : str or path-like
        A folder of labelled faces, or a dataset root with ``train/``.
    labels : str or path-like, optional
        Parallel tree of label maps (its ``train/`` for a dataset root, when it
        has one); None: beside the images.
    exclude : set of str, default=()
        Names or file stems to leave out.

    Returns
    -------
    root : pathlib.Path
        The folder used (``data_dir/train`` for a dataset root).
    records : list of FaceRecord

    Raises
    ------
    DataError
        When ``data_dir`` is not a folder or no image is left.
    """
    root = resolve_data_dir(data_dir)
    if labels is not None and root != Path(data_dir) and (Path(labels) / "train").is_dir():
        labels = Path(labels) / "train"  # a label tree mirroring the dataset root
    recs = filter_records(find_faces(root, labels=labels, require_labels=False), exclude,
                          labels if labels is not None else root)
    if not recs:
        raise DataError(root, "no images left after --exclude", "check the exclusion list")
    return root, recs


def _records(args):
    exclude = read_name_list(args.exclude) if args.exclude else set()
    if args.split is None:
        return find_training_faces(args.data_dir, labels=args.labels, exclude=exclude)

    root = args.data_dir
    if not os.path.isdir(root):
        resolve_data_dir(root)  # raises the DataError naming the folder
    try:
        sp = split_dataset(root, args.labels, test_fraction=args.test_fraction,
                           n_validation=args.validation, seed=args.split_seed, require_labels=False)
    except ValueError as exc:
        if isinstance(exc, FaceSegmentError):
            raise
        raise FaceSegmentError(f"cannot split {root}: {exc}") from exc
    recs = filter_records(getattr(sp, args.split), exclude, args.labels if args.labels else root)
    if not recs:
        raise DataError(root, f"split {args.split!r} has no images", "lower --validation or check --exclude")
    return root, recs


def run(args):
    # before any work: never replace a file that is not a windows file, never
    # write into the labelled data unless asked
    """Sample the class-balanced training windows of the faces into a windows file.

    The output path is checked before any work; a summary line and a table of
    the classes' pixels, windows and sampling factors are printed.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment extract`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0 every image used; 1 some images skipped (listed on stderr
        and in the file's ``skipped`` dataset).

    Raises
    ------
    DataError
        One line naming the file and the fix: an output that may not be written
        or lies inside the data, a missing folder, no images left, a bad image
        with ``--on-error fail``.
    FaceSegmentError
        When ``--split`` cannot split DATA_DIR.
    """
    check_output(args.out, (args.data_dir, args.labels), args.out_inside_data)
    root, recs = _records(args)
    res = extract_windows(
        recs, args.out, n_windows=args.windows, seed=args.seed, window=args.window,
        grey=args.grey, scheduler=args.scheduler,
        n_workers=args.workers, on_error=args.on_error,
        compression=None if args.compression == "none" else args.compression,
        compression_opts=1 if args.compression == "gzip" else None,
        progress=not args.quiet, data_root=root, labels_root=args.labels,
        out_inside_data=args.out_inside_data,
    )
    m = res.meta
    dt = res.seconds["total"]
    print(f"wrote {res.path}: {m.n_windows} windows from {res.n_images} images of {root}"
          + (f" (split {args.split})" if args.split else "")
          + f" in {dt:.1f} s ({m.n_windows / dt if dt > 0 else 0:.0f} windows/s), "
            f"{res.file_bytes / 1e6:.1f} MB, seed {m.seed}")
    print(f"{'class':<14} {'eligible px':>12} {'px share':>9} {'windows':>8} {'factor':>8}")
    share = m.pixel_counts / max(1, m.pixel_counts.sum())
    for c, name in enumerate(CLASS_NAMES):
        note = " (with replacement)" if m.with_replacement[c] else ""
        print(f"{name:<14} {m.pixel_counts[c]:>12d} {100 * share[c]:>8.2f}% {m.class_counts[c]:>8d} "
              f"{m.sampling_factors[c]:>8.3f}{note}")
    if res.skipped:
        for path, problem, fix in res.skipped:
            tail = f" ({fix})" if fix else ""
            print(f"facesegment: skipped: {path}: {problem}{tail}", file=sys.stderr)
        print(f"facesegment: {len(res.skipped)} of {len(recs)} images skipped; they are listed above "
              f"and in the file's 'skipped' dataset (use --on-error fail to stop at the first)",
              file=sys.stderr)
        return 1
    return 0
