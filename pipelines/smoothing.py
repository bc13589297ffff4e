"""Smoothing the maps before the argmax: the cheap alternative to auto-context.

In the pipeline (``[smoothing]`` of the config): the train stage chooses each
model's ``sigma`` on the validation images with its chosen alpha and beta
(:func:`facesegment.evaluation.calibrate.choose_rule` with :func:`sigmas_for`; 0, no
smoothing, always competes) and stores it in the model's decision rule (used
by ``segment``); the evaluate stage
scores the test faces with it in the same pass as the plain scores
(:func:`smoothed_rule`, :func:`test_scores`), on both protocols.
``models``: "cascades" (the default: the models `segment` is pointed at),
"non-oblique" (the single forests too, but not CO2: full maps of the 250 test
faces cost ~11 minutes per CO2 model, 2.6 s per face) or "all".

The study below (``python -m pipelines.smoothing``) scores every sigma on the
test faces too, for the ablation.

For each model of a finished run (``make all``), with the forest alone
(``alpha_no_prior``, beta 0) and with its position prior (the model's alpha and
beta), every class's reweighted probability map is blurred with a Gaussian of
sigma pixels before the argmax (:func:`facesegment.evaluation.maps.evaluate_smoothed`).
Sigma is chosen on the run's validation images (those model selection scores);
the test scores of every sigma are reported, on the pixels the run's evaluation
scores.  Writes ``reports/runs/RUN/smoothing.json`` and prints a Markdown table.

    python -m pipelines.smoothing --run faces300w-default --kinds two-probe ac-two-probe_axis
"""

import argparse
import sys
from pathlib import Path

from facesegment.evaluation import maps
from facesegment.atomic import write_json_atomic
from facesegment.dense import default_alpha, default_beta, default_sigma

from . import backend
from .common import subset
from .prior import aligned_test


def for_forests(cfg):
    """Does ``[smoothing]`` choose a sigma for the single forests too (not only the
    cascades)?  Their train stages' configuration includes it only then."""
    sm = cfg.get("smoothing") or {}
    return bool(sm.get("sigmas")) and sm.get("models") != "cascades"


def applies(cfg, model):
    """Does the pipeline choose a sigma for ``model`` (``[smoothing]``)?"""
    sm = cfg.get("smoothing") or {}
    stages = model.stages   # a cascade's forests, or the forest itself
    if not sm.get("sigmas") or (len(stages) == 1 and not for_forests(cfg)):
        return False
    oblique = any(st.arrays.weights.shape[0] > 0
                  or (st.arrays.sparse_ptr is not None and len(st.arrays.sparse_ptr) > 1)
                  for st in stages)
    return sm.get("models") == "all" or not oblique


def sigmas_for(cfg, model):
    """The sigmas the train stage tries for ``model`` besides 0 (``[smoothing]
    sigmas``), or None when smoothing does not apply to it."""
    if not applies(cfg, model):
        return None
    return sorted({float(v) for v in cfg["smoothing"]["sigmas"]} - {0.0}) or None


def smoothed_rule(model):
    """``(alpha, beta, [sigma])`` of the evaluate stage's smoothed scores (the
    ``smoothed`` argument of :func:`facesegment.evaluation.evaluate`: scored in
    the same pass as the plain ones), or None when the model has no sigma > 0."""
    sigma = default_sigma(model)
    if sigma <= 0:
        return None
    return default_alpha(model), default_beta(model), [float(sigma)]


def test_scores(model, test, detector=None):
    """The evaluate stage's ``smoothed`` entry from the ``smoothed`` parts of the
    ``evaluate`` results of the test crops and (``detector_protocol``) the
    detector-aligned faces, both run with ``smoothed=smoothed_rule(model)``;
    None when the model has no sigma > 0."""
    rule = smoothed_rule(model)
    if rule is None:
        return None
    alpha, beta, (sigma,) = rule
    key = repr(float(sigma))
    return {"alpha": alpha, "beta": beta, "sigma": sigma, "n_trees": model.arrays.n_trees,
            "test": test["sigma"][key],
            "detector": None if detector is None else detector["sigma"][key]}


def _records(run_dir, key):
    import json

    splits = json.loads((run_dir / "splits.json").read_text())
    return backend.records_from_json(splits[key])


def study(run_dir, model_root, kinds, sigmas, n_trees, workers=None, log=print):
    import json

    conf = json.loads((run_dir / "config.json").read_text())
    ev, sel = conf["evaluate"], conf["select"]
    val = subset(_records(run_dir, "validation"), sel["n_images"], conf["run"]["seed"] + 2)
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
            v = maps.evaluate_smoothed(model, val, alpha=alpha, beta=beta, sigmas=sigmas,
                                             mode=ev["mode"], pixel_stride=sel["pixel_stride"],
                                             workers=workers, desc=f"{kind} {name} validation")
            table = {s: r["mean_jaccard"] for s, r in v["sigma"].items()}
            best = max(table, key=lambda s: (table[s], -float(s)))
            t = maps.evaluate_smoothed(model, test, alpha=alpha, beta=beta, sigmas=sigmas,
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
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
