"""A CO2 auto-context cascade on the faces300w run: its Jaccard and its time.

This measures the time of a CO2 cascade beside the 2-stage cascades of
cheap forests.  The chain ``co2-best > axis`` is not one of the pipeline's
default chains (its stage 1 costs 1.25 s per face at every out-of-fold map
and every test face: about 20 more minutes of ``make all``), so this script
trains it the way the pipeline's ``train:ac-...`` stage would, on the
finished run's own inputs:

* ``pipelines.cascades._fit``: stage 1 is the run's ``co2-best-32``, stage 2
  an axis-aligned forest with the settings selection chose, trained on
  ``[window | context]`` rows whose context comes from out-of-fold maps of
  4 image folds (8-tree co2-best fold forests), the run's seeds;
* alpha chosen on the validation images with the final cascade
  (``facesegment.evaluation.scoring.choose_alpha``, the run's alpha grid, no position
  prior: one pass of 1.3 s per face; the pipeline's joint choice of alpha,
  beta and sigma would take about ten passes), then the test crops scored
  with it, the cascade alone (the pipeline's protocol: strict mode, every
  3rd pixel) beside the peers' own "alone" scores from the run's evaluate
  files (theirs: alpha chosen the same way);
* ``predict_image`` timed on 3 test faces (median, all pixels, after a
  warm-up) for this cascade and, in the same script, the run's
  ``ac-two-probe_axis-32``, ``ac-axis_axis-32`` and ``co2-best-32``.

The cascade is saved in ``models/RUN/ac-co2-best_axis-32`` (reused on a
rerun; ``--refit`` trains it again); results go to
``reports/cascade/co2-cascade.json`` and ``.md``.  Needs the finished run
(``make all DATA=../shared/data/faces300w``).  About 20 minutes on 2 cores.

    python -m studies.co2_cascade            # train (once), score, time
    python -m studies.co2_cascade --retime   # time again only
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
os.chdir(ROOT)

from facesegment.atomic import write_json_atomic, write_text_atomic

CHAIN = ["co2-best", "axis"]
NAME = "ac-co2-best_axis"
PEERS = ("ac-two-probe_axis", "ac-axis_axis", "co2-best")


def _context(data):
    from pipelines.config import load_config
    from pipelines.stages import Context

    cfg = load_config("pipelines/config.toml", None, data=data)
    return Context(cfg, log=lambda m: print(m, file=sys.stderr, flush=True))


def _train(ctx, path, refit):
    """The cascade folder at ``path`` (fitted, alpha chosen and saved unless it is there)."""
    from facesegment.evaluation import scoring as evaluation
    from facesegment.autocontext.cascade import save_cascade

    from pipelines import backend, cascades
    from pipelines.common import validation_records

    if path.exists() and not refit:
        ctx.log(f"co2 cascade: reusing {path}")
        return backend.load_model(path), None
    t0 = time.perf_counter()
    cascade, _, _ = cascades._fit(ctx, CHAIN)
    fit_s = time.perf_counter() - t0
    for key in ("alpha", "beta", "alpha_no_prior", "position_selection", "sigma",
                "alpha_final_forest", "alpha_selection_forests", "sigma_selection"):
        cascade.final.metrics.pop(key, None)
    sel = ctx.cfg["select"]
    rec = evaluation.choose_alpha(cascade, validation_records(ctx), sel["alphas"],
                                  mode=ctx.cfg["evaluate"]["mode"],
                                  pixel_stride=sel["pixel_stride"], workers=ctx.workers,
                                  desc=f"alpha {NAME}")
    cascade.metrics.update({"alpha": rec["alpha"], "alpha_no_prior": rec["alpha"],
                            "alpha_selection": rec})
    save_cascade(cascade, path)
    return backend.load_model(path), round(fit_s, 1)


def _scores(ctx, model):
    from facesegment.evaluation import scoring as evaluation

    cfg, ev = ctx.cfg, ctx.cfg["evaluate"]
    alpha = float(model.metrics["alpha"])
    alone = evaluation.evaluate(model, ctx.splits()["test"], alphas=[alpha], beta=0.0,
                                tree_counts=[cfg["forest"]["n_trees"]],
                                pixel_stride=ev["pixel_stride"], mode=ev["mode"],
                                workers=ctx.workers, desc=f"evaluate {NAME}")
    return {"alpha": alpha, "trees": alone["trees"]}


def _times(ctx, models, n_images):
    from facesegment.evaluation.timing import time_inference

    test = ctx.splits()["test"][:n_images]
    out = {}
    for name, model in models.items():
        n = model.arrays.n_trees if hasattr(model, "arrays") else 32
        r = time_inference(model, test, [n], progress=False)[str(n)]
        out[name] = {"ms_per_image": r["ms_per_image"],
                     "cpu_ms_per_image": r["cpu_ms_per_image"], "n_images": r["n_images"]}
        ctx.log(f"time: {name}: {r['ms_per_image']:.0f} ms per face")
    return out


def _jaccard(trees, n, alpha):
    s = (trees or {}).get(str(n), {}).get("alpha", {}).get(repr(float(alpha)))
    return None if s is None else round(s["mean_jaccard"], 2)


def _row(name, res, n):
    """A markdown row: alpha, test Jaccard alone, ms per face."""
    j = _jaccard(res["trees"], n, res["alpha"])
    return f"| {name} | {res['alpha']:g} | {'' if j is None else f'{j:.2f}'} | {res['ms']:.0f} |"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data/faces300w")
    p.add_argument("--images", type=int, default=3, help="test faces timed (median)")
    p.add_argument("--refit", action="store_true", help="train the cascade again")
    p.add_argument("--retime", action="store_true",
                   help="only time the models again (e.g. on a quieter machine); the "
                        "scores come from the last reports/cascade/co2-cascade.json")
    args = p.parse_args(argv)
    from pipelines import backend

    ctx = _context(args.data)
    n = ctx.cfg["forest"]["n_trees"]
    path = ctx.model_dir(NAME, n)
    folder = ROOT / "reports" / "cascade"
    if args.retime:
        last = json.loads((folder / "co2-cascade.json").read_text())
        model, fit_s = backend.load_model(path), last["results"][NAME]["fit_seconds"]
        res = {NAME: {k: last["results"][NAME][k] for k in ("alpha", "trees", "fit_seconds")}}
    else:
        model, fit_s = _train(ctx, path, args.refit)
        res = {NAME: {**_scores(ctx, model), "fit_seconds": fit_s}}
    peers = {k: backend.load_model(ctx.model_dir(k, n)) for k in PEERS}
    load0 = os.getloadavg()[0]
    times = _times(ctx, {NAME: model, **peers}, args.images)
    for k in PEERS:   # the peers' scores: the run's own evaluate stage files
        ev = json.loads((ctx.reports / f"eval-{k}.json").read_text())
        res[k] = {"alpha": ev["alpha"], "trees": ev["trees"]}
    for k, t in times.items():
        res[k]["ms"] = t["ms_per_image"]
    out = {"run": ctx.run, "chain": CHAIN, "model": str(path.relative_to(ROOT)),
           "times": times, "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)],
           "cpu_count": os.cpu_count(), "results": res}
    write_json_atomic(folder / "co2-cascade.json", out, sort_keys=True)
    lines = [f"# A CO2 auto-context cascade ({' > '.join(CHAIN)}) on {ctx.run}", "",
             f"`python -m studies.co2_cascade`; {n} trees per stage; test class-average "
             "Jaccard of the model alone (no position prior, no smoothing; strict mode, "
             "every 3rd pixel; alpha chosen on the validation images); "
             f"ms per 250x250 face (all pixels, median of {args.images} test faces, "
             f"{os.cpu_count()} cores, load {out['load_average'][0]}-"
             f"{out['load_average'][1]}, all timed in this script).", "",
             "| model | α | Jaccard | ms/face |",
             "| --- | ---: | ---: | ---: |"]
    lines += [_row(k, res[k], n) for k in (NAME, *PEERS)]
    if fit_s is not None:
        lines += ["", f"Training of the cascade (out-of-fold maps included): {fit_s:.0f} s."]
    write_text_atomic(folder / "co2-cascade.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
