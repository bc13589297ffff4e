"""Smoothing the maps before the argmax: the cheap alternative to auto-context.

For each model of a finished run (``make all``), with the forest alone
(``alpha_no_prior``, beta 0) and with its position prior (the model's alpha and
beta), every class's reweighted probability map is blurred with a Gaussian of
sigma pixels before the argmax (:func:`facesegment.evaluation.evaluate_smoothed`).
Sigma is chosen on the run's validation images (those model selection scores);
the test scores of every sigma are reported, on the pixels the run's evaluation
scores.  Writes ``reports/runs/RUN/smoothing.json`` and prints a Markdown table.

    python -m pipelines.smoothing --run faces300w-default --kinds two-probe ac-two-probe_axis
"""

import argparse
import sys
from pathlib import Path

from facesegment import evaluation
from facesegment.atomic import write_json_atomic
from facesegment.dense import default_alpha, default_beta

from . import backend


def _records(run_dir, key):
    import json

    splits = json.loads((run_dir / "splits.json").read_text())
    return backend.records_from_json(splits[key])


def study(run_dir, model_root, kinds, sigmas, n_trees, workers=None, log=print):
    import json

    from .stages import _subset

    conf = json.loads((run_dir / "config.json").read_text())
    ev, sel = conf["evaluate"], conf["select"]
    val = _subset(_records(run_dir, "validation"), sel["n_images"], conf["run"]["seed"] + 2)
    test = _records(run_dir, "test")
    out = {"sigmas": sigmas, "n_validation": len(val), "n_test": len(test), "kinds": {}}
    for kind in kinds:
        model = backend.load_model(model_root / f"{kind}-{n_trees}")
        rows = {}
        settings = [("alone", float(model.metrics.get("alpha_no_prior", default_alpha(model))),
                     0.0)]
        if default_beta(model) > 0:
            settings.append(("with prior", default_alpha(model), default_beta(model)))
        for name, alpha, beta in settings:
            v = evaluation.evaluate_smoothed(model, val, alpha=alpha, beta=beta, sigmas=sigmas,
                                             mode=ev["mode"], pixel_stride=sel["pixel_stride"],
                                             workers=workers, desc=f"{kind} {name} validation")
            table = {s: r["mean_jaccard"] for s, r in v["sigma"].items()}
            best = max(table, key=lambda s: (table[s], -float(s)))
            t = evaluation.evaluate_smoothed(model, test, alpha=alpha, beta=beta, sigmas=sigmas,
                                             mode=ev["mode"], pixel_stride=ev["pixel_stride"],
                                             workers=workers, desc=f"{kind} {name} test")
            rows[name] = {"alpha": alpha, "beta": beta, "validation": table,
                          "chosen_sigma": float(best),
                          "test": {s: r["mean_jaccard"] for s, r in t["sigma"].items()},
                          "test_per_class_chosen": t["sigma"][best]["jaccard"]}
            log(f"{kind} {name}: sigma {best} on validation; test "
                + ", ".join(f"{s}: {j:.2f}" for s, j in rows[name]["test"].items()))
        out["kinds"][kind] = rows
    return out


def markdown(res):
    sig = res["sigmas"]
    L = ["| model | α | β | " + " | ".join(f"σ = {s:g}" for s in sig) + " | σ chosen on validation |",
         "| --- | ---: | ---: | " + " | ".join("---:" for _ in sig) + " | ---: |"]
    for kind, rows in res["kinds"].items():
        for name, r in rows.items():
            L.append(f"| {kind} {name} | {r['alpha']:g} | {r['beta']:g} | "
                     + " | ".join(f"{r['test'][repr(float(s))]:.2f}" for s in sig)
                     + f" | {r['chosen_sigma']:g} |")
    return "\n".join(L) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pipelines.smoothing",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default", help="run name (reports/runs/RUN)")
    p.add_argument("--kinds", nargs="+", default=["two-probe", "ac-two-probe_axis"])
    p.add_argument("--sigmas", nargs="+", type=float, default=[0.0, 1.0, 2.0, 4.0, 8.0])
    p.add_argument("--trees", type=int, default=32)
    p.add_argument("--workers", type=int, default=None)
    args = p.parse_args(argv)
    run_dir = Path("reports/runs") / args.run
    res = study(run_dir, Path("models") / args.run, args.kinds, [float(s) for s in args.sigmas],
                args.trees, args.workers, log=lambda m: print(m, file=sys.stderr, flush=True))
    write_json_atomic(run_dir / "smoothing.json", res, sort_keys=True)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
