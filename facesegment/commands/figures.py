"""``facesegment figures``: the paper's Figures 3 and 4 and confusion matrices."""

from ..evaluation.figures import make_figures
from ._common import (add_overwrite_argument, add_parallel_arguments, add_scoring_arguments,
                      add_test_face_arguments, alpha_value, check_output_folder, check_outputs,
                      load_image_model, model_names, nonneg_int, positive_int)
from .evaluate import test_records

HELP = "draw Figure 3 (examples), Figure 4 (Jaccard vs trees/depth), confusion matrices"
DESCRIPTION = """\
Evaluate the given models on the labelled test faces (as `facesegment
evaluate`: strict mode unless --mode full, every pixel unless --pixel-stride)
and draw, under OUT (the pipeline's figures stage draws the same from its
evaluation files):

  figure3.png            rows of test faces: input | ground truth | one column per
                         model; each model's median-Jaccard image, then random
                         ones; each prediction titled with its class-average
                         Jaccard; a shared 8-colour legend (grey: border, not
                         predicted in strict mode)
  figure4.png            class-average Jaccard vs number of trees (1..n, full
                         depth) and vs maximum depth (with --depth-trees trees)
  confusion_NAME.png     each model's row-normalised confusion matrix
  figures.json           the numbers drawn

Every number of trees and every depth is scored in one pass over the test
images per model (trees are walked once; truncated forests come from the
stored per-node distributions).  Give one model per kind (axis, two-probe,
co2) trained with 32 trees to reproduce the paper's figures.

example:
  facesegment figures --model models/axis-32 models/two-probe-32 models/co2-32 \\
      --data ../shared/data/faces300w
"""


def add_arguments(p):
    """Add the options of ``facesegment figures`` to its sub-parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``figures``.
    """
    add_test_face_arguments(
        p, "model folders (columns of Figure 3, curves of Figure 4)",
        "which faces (as for `facesegment evaluate`; default auto)",
        "seed of the by-person split and of the random example rows (default 0)")
    p.add_argument("--alpha", type=alpha_value, default=None,
                   help="prior-reweighting exponent (default: each model's selected alpha, else 1)")
    p.add_argument("--random-rows", type=nonneg_int, default=3, metavar="N",
                   help="random example rows in Figure 3 after the median ones (default 3)")
    p.add_argument("--depth-trees", type=positive_int, default=16, metavar="N",
                   help="number of trees of the Jaccard-vs-depth curve (default 16)")
    add_scoring_arguments(p)
    p.add_argument("--limit", type=positive_int, default=None, metavar="N",
                   help="use only the first N test faces (quick checks)")
    p.add_argument("--out", "-o", default="reports/figures", metavar="DIR",
                   help="output folder (default reports/figures)")
    add_overwrite_argument(p, "--out")
    add_parallel_arguments(p)


def run(args):
    """Draw Figures 3 and 4 and the confusion matrices of the models on the test faces.

    The output folder and files are checked before any work; each file written
    is printed.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment figures`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0.

    Raises
    ------
    DataError
        When the test faces, the output folder, an output file or a model is
        unusable (one line naming it).
    """
    records = test_records(args.data, args.labels, args.split, args.seed, args.limit)
    check_output_folder(args.out, "--out")
    from pathlib import Path

    names = model_names(args.model)
    check_outputs([Path(args.out) / n for n in
                   ["figure3.png", "figure4.png", "figures.json"]
                   + [f"confusion_{name}.png" for name in names]], "figure", "--out")
    models = {name: load_image_model(path)
              for path, name in zip(args.model, model_names(args.model))}
    res = make_figures(models, records, args.out, alpha=args.alpha, mode=args.mode,
                       pixel_stride=args.pixel_stride, n_random=args.random_rows,
                       seed=args.seed, depth_trees=args.depth_trees,
                       scheduler=args.scheduler, workers=args.workers,
                       progress=not args.quiet)
    for path in res["written"]:
        print(f"wrote {path}")
    return 0
