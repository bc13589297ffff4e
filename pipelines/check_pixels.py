"""Does the evaluation's pixel grid change the scores?  Score every pixel.

``python -m pipelines.check_pixels --run faces300w-default`` (``make check-pixels``)
scores the run's 32-tree models on **every** scored pixel of its test images
(``pixel_stride = 1``: the paper's protocol, strict mode) at the run's selected
α and at α = 1, and writes, per kind, the class-average Jaccard at 16 and 32
trees next to the grid's numbers from ``eval-<kind>.json`` to
``reports/runs/<run>/check-all-pixels.json``.  The default preset scores a 3×3
grid of pixels (``[evaluate] pixel_stride = 3``) to keep ``make all`` short;
this check says how much that costs in accuracy of the reported numbers.
``--alphas 0.5 0.75`` also scores other reweighting exponents (on a run that
scored every pixel already, e.g. ``PRESET=paper``, that is its only use:
``--out alphas.json``).
"""

import argparse
import json
import sys
import time
from pathlib import Path

from facesegment.atomic import write_json_atomic
from facesegment.evaluation.scoring import evaluate

from . import backend
from .config import KINDS


def check_run(run_dir, model_root, kinds=KINDS, workers=None, log=print, alphas=()):
    """Every-pixel scores of the run's models next to its grid scores.

    Parameters
    ----------
    run_dir : path
        ``reports/runs/<run>`` (reads ``splits.json``, ``chosen.json``,
        ``eval-<kind>.json``).
    model_root : path
        ``models/<run>`` (reads ``<kind>-<n>`` for the largest evaluated n).
    kinds : list of str
        Kinds to check (those without an evaluation are skipped).
    alphas : list of float
        Exponents scored besides the run's selected α and α = 1 (the grid
        column has only those the evaluation scored).

    Returns
    -------
    dict (JSON-ready)
        ``{kind: {"16": {"0.5": all-pixel J, ...}, "grid": {"16": {...}},
        "max_abs_difference", "n_pixels", "seconds"}}``.
    """
    run_dir, model_root = Path(run_dir), Path(model_root)
    splits = json.loads((run_dir / "splits.json").read_text())
    test = backend.records_from_json(splits["test"])
    out = {}
    for kind in kinds:
        ev_path = run_dir / f"eval-{kind}.json"
        if not ev_path.is_file():
            continue
        ev = json.loads(ev_path.read_text())
        sizes = sorted(int(n) for n in ev["trees"])
        these = sorted({float(ev["alpha"]), 1.0, *map(float, alphas)})
        model = backend.load_model(model_root / f"{kind}-{max(sizes)}")
        t0 = time.perf_counter()
        res = evaluate(model, test, alphas=these, tree_counts=sizes,
                       per_image_alpha=float(ev["alpha"]), pixel_stride=1, workers=workers,
                       desc=f"all pixels {kind}")
        secs = time.perf_counter() - t0
        mine = {str(n): {repr(a): res["trees"][str(n)]["alpha"][repr(a)]["mean_jaccard"]
                         for a in these} for n in sizes}
        grid = {str(n): {repr(a): ev["trees"][str(n)]["alpha"][repr(a)]["mean_jaccard"]
                         for a in these if repr(a) in ev["trees"][str(n)]["alpha"]}
                for n in sizes}
        diffs = [abs(mine[n][a] - grid[n][a]) for n in grid for a in grid[n]]
        out[kind] = {**mine, "grid": grid, "n_pixels": res["n_pixels"],
                     "selected_alpha": float(ev["alpha"]),
                     "grid_pixel_stride": ev.get("pixel_stride", 1),
                     "max_abs_difference": round(max(diffs), 4) if diffs else None,
                     "seconds": round(secs, 1)}
        log(f"check-pixels: {kind}: all pixels " + ", ".join(
            f"{n} trees {mine[n]}" for n in mine) + f" (grid {grid}); {secs:.0f} s")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pipelines.check_pixels",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default",
                   help="run to check (reports/runs/RUN, models/RUN; default: %(default)s)")
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS,
                   help="kinds to check (default: all four)")
    p.add_argument("--alphas", nargs="+", type=float, default=[], metavar="A",
                   help="reweighting exponents scored besides the selected one and 1")
    p.add_argument("--out", default="check-all-pixels.json",
                   help="file name in reports/runs/RUN (default: %(default)s)")
    p.add_argument("--workers", type=int, default=None, help="threads (default: all cores)")
    args = p.parse_args(argv)
    if any(not (a >= 0) for a in args.alphas) or "/" in args.out:
        p.error("--alphas must be >= 0 and --out a plain file name")
    run_dir, model_root = Path("reports/runs") / args.run, Path("models") / args.run
    if not (run_dir / "splits.json").is_file() or not model_root.is_dir():
        print(f"check-pixels: error: {run_dir}/splits.json or {model_root} does not exist "
              f"(run `make all` for that run first)", file=sys.stderr)
        return 2
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    res = check_run(run_dir, model_root, args.kinds, args.workers, log, args.alphas)
    if not res:
        print(f"check-pixels: error: {run_dir} has no eval-<kind>.json (run `make evaluate`)",
              file=sys.stderr)
        return 2
    out = run_dir / args.out
    write_json_atomic(out, res, sort_keys=True)
    log(f"check-pixels: wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from facesegment.atomic import overwriting

    with overwriting():   # the repository\'s own reports and models are regenerated
        sys.exit(main())
