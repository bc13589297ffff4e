"""``facesegment evaluate``: Jaccard scores of trained models on labelled test faces."""

import os
import time
from pathlib import Path
from ._common import add_parallel_arguments, add_test_face_arguments

HELP = "score models on labelled test faces (per-class and class-average Jaccard)"
DESCRIPTION = """\
Score one or more trained models on labelled test faces with the paper's
protocol: dense prediction in strict mode (pixels within 15 px of the border
are not scored, nor pixels labelled 255), an 8x8 confusion matrix accumulated
over all test images, per-class Jaccard 100*tp/(tp+fp+fn), the class average
over the 8 classes, pixel accuracy, and each image's class-average Jaccard.
A class absent from both prediction and ground truth has no Jaccard (null) and
is left out of the average.

Writes OUT/NAME.json (all numbers, per-image scores) and OUT/NAME.md per model
and OUT/summary.md (one row per model), and prints the table.

Test faces: DIR/test when DIR has train/ and test/ folders (faces300w);
otherwise the test split of DIR by person (--split test, as `facesegment
train` splits it) or every labelled face under DIR (--split all).

example:
  facesegment evaluate --model models/co2-16 --data ../shared/data/faces300w
"""


def add_arguments(p):
    add_test_face_arguments(
        p, "model folder(s) written by `facesegment train`",
        "which faces: auto = DIR/test if present else all labelled faces; "
        "test = the seeded by-person test split; all = every face (default auto)",
        "seed of the by-person split for --split test (default 0)")
    p.add_argument("--alpha", type=float, default=None,
                   help="prior-reweighting exponent: p*s^-alpha (1 = paper, 0 = none; "
                        "default: the model's selected alpha, else 1)")
    p.add_argument("--sweep-alphas", type=float, nargs="*", default=None, metavar="A",
                   help="also score these alphas in the same pass (reported under 'sweep')")
    p.add_argument("--sweep-trees", type=int, nargs="*", default=None, metavar="N",
                   help="also score forests of the first N trees (Figure 4), same pass")
    p.add_argument("--sweep-depths", type=int, nargs="*", default=None, metavar="D",
                   help="also score the trees truncated at depth D (Figure 4), same pass")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="score only the first N test faces (quick checks)")
    p.add_argument("--out", "-o", default="reports/eval", metavar="DIR",
                   help="folder for NAME.json / NAME.md / summary.md (default reports/eval)")
    add_parallel_arguments(p)


def test_records(data, labels=None, split="auto", seed=0, limit=None):
    """The labelled faces to score (see DESCRIPTION)."""
    from ..datasets import find_faces
    from ..errors import DataError

    data = Path(data)
    if not data.is_dir():
        raise DataError(data, "is not a folder", "give the dataset folder, e.g. "
                        "../shared/data/faces300w")
    if split == "auto" and (data / "test").is_dir():
        recs = find_faces(data / "test", Path(labels) / "test" if labels else None)
    elif split == "test":
        from ..splits import split_dataset

        recs = split_dataset(data, labels, seed=seed).test
    else:
        recs = find_faces(data, labels)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"--limit {limit} must be >= 1")
        recs = recs[:limit]
    return recs


def run(args):
    from ..inference import default_alpha
    from ..metrics import evaluate_model, markdown_table, write_json_atomic, write_text_atomic
    from ..model import load_model

    records = test_records(args.data, args.labels, args.split, args.seed, args.limit)
    rows = {}
    for path in args.model:
        model = load_model(path)
        name = Path(os.path.normpath(path)).name
        alpha = default_alpha(model) if args.alpha is None else args.alpha
        t0 = time.perf_counter()
        res = evaluate_model(model, records, alpha=alpha, sweep_alphas=args.sweep_alphas,
                             n_trees_list=args.sweep_trees, max_depth_list=args.sweep_depths,
                             scheduler=args.scheduler, n_workers=args.workers,
                             progress=not args.quiet, desc=f"evaluate {name}")
        seconds = time.perf_counter() - t0
        res.pop("confusion_sweep")
        res.update(model=str(path), data=str(args.data), seconds=round(seconds, 2),
                   seconds_per_image=round(seconds / max(1, res["n_images"]), 4),
                   class_names=list(model.class_names))
        title = (f"{name}: {res['n_images']} images, alpha={alpha:g}, strict mode "
                 f"(15-px border and label 255 excluded)")
        table = markdown_table({name: res["summary"]}, title)
        write_json_atomic(Path(args.out) / f"{name}.json", res)
        write_text_atomic(Path(args.out) / f"{name}.md", table)
        rows[f"{name} (alpha={alpha:g})"] = res["summary"]
    table = markdown_table(rows, f"Test faces: {len(records)} from {args.data}")
    write_text_atomic(Path(args.out) / "summary.md", table)
    print(table)
    print(f"wrote {args.out}/summary.md and one NAME.json / NAME.md per model")
    return 0
