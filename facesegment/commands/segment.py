"""``facesegment segment``: segment every face photo in a folder."""

from ._common import add_parallel_arguments, alpha_value

HELP = "segment a folder of face photos into NAME_label.png / NAME_overlay.png"
DESCRIPTION = """\
Segment every image under INPUT_DIR (any size; jpg/png/bmp; grey, RGB or RGBA)
with a trained model and write, mirroring the input tree under OUTPUT_DIR:

  NAME_label.png    class ids 0-7 on the original image's pixels
  NAME_overlay.png  the classes' colours blended over the photo
  summary.csv       one row per input: status, faces found, size, seconds

Images that are exactly 250x250 are taken to be LFW-style face crops already
(--detect auto); in others faces are found with dlib's HOG detector and its
68 landmarks, each face is cut out LFW-style (a square centred on the
landmarks, 2.2x their extent, as faces300w was made), resized to 250x250, segmented with every pixel predicted
(full mode: reflect padding at the border), and mapped back onto the photo;
pixels outside every face's crop are background.

Photos are turned upright by their EXIF orientation tag (as phones store
them and viewers show them), so the outputs match the photo as displayed.

Unreadable files and images without a face are reported and skipped; the
rest is processed.  Exit status 0 when every image was segmented, 1 when some
were skipped, 2 on an error that stops the run.

example:
  facesegment segment ../shared/data/lfw-gray/lfw/George_W_Bush out/bush --model models/co2-16
"""


def add_arguments(p):
    p.add_argument("input_dir", metavar="INPUT_DIR", help="folder of photos (searched recursively)")
    p.add_argument("output_dir", metavar="OUTPUT_DIR", help="folder for the outputs (created)")
    p.add_argument("--model", "-m", required=True, metavar="MODEL",
                   help="model folder written by `facesegment train`")
    p.add_argument("--alpha", type=alpha_value, default=None,
                   help="prior-reweighting exponent p*s^-alpha (default: the model's "
                        "selected alpha, else 1)")
    p.add_argument("--detect", choices=("auto", "always", "never"), default="auto",
                   help="auto: detect faces unless the image is exactly 250x250; always; "
                        "never: treat every image as a face crop (default auto)")
    p.add_argument("--detector", choices=("landmarks", "dlib"), default="landmarks",
                   help="how the face crop is found: landmarks = dlib face box + 68 landmarks, "
                        "cropped by the dataset's rule (default; crop IoU 0.97 on faces300w); "
                        "dlib = calibrated dlib box only (faster, IoU 0.83)")
    add_parallel_arguments(p)


def run(args):
    import sys

    from ..inference import default_alpha
    from ..model import load_model
    from ..segment import segment_folder

    model = load_model(args.model)
    alpha = default_alpha(model) if args.alpha is None else args.alpha
    results = segment_folder(model, args.input_dir, args.output_dir, alpha=alpha,
                             detect=args.detect, detector=args.detector,
                             scheduler=args.scheduler, n_workers=args.workers,
                             progress=not args.quiet)
    skipped = [r for r in results if r.status != "ok"]
    for r in skipped:
        print(f"skipped {r.name}: {r.status}: {r.message}", file=sys.stderr)
    ok = len(results) - len(skipped)
    faces = sum(r.faces for r in results)
    secs = sum(r.seconds for r in results)
    print(f"segmented {ok}/{len(results)} images ({faces} faces, {secs:.1f} s of work, "
          f"alpha={alpha:g}); skipped {len(skipped)}; summary in "
          f"{args.output_dir}/summary.csv")
    return 1 if skipped else 0
