"""The model stages of the main job: train, evaluate and time one kind.

Split from :mod:`pipelines.stages` (which builds every stage and re-exports
these names): ``_train(kind)``, ``_evaluate(kind)`` and ``_timing(kind)``
return the ``run(ctx)`` of a kind's stages, ``_train_config`` /
``_eval_config`` their ``config(ctx)``.  The helpers they share with the other
stages live in :mod:`pipelines.common`; the decision rule of each model is
chosen by :func:`pipelines.calibration.calibrate`.
"""

import os
import shutil

from facesegment.evaluation import scoring as evaluation
from facesegment.evaluation.timing import time_inference
from facesegment.atomic import write_json_atomic
from facesegment.errors import DataError

from . import backend, prior, selection, smoothing
from .calibration import calibrate
from .common import final_alpha_wanted, forest_bytes, portable, setting_of

#: Version of what the stages write (in the stage keys of data, select, train,
#: evaluate and time): 2 = measured times moved out of the tracked files into
#: ``stamps/timings/`` and ``timings.json``, paths made relative.  Bumping it
#: redoes those stages on a machine whose stamps predate the change.
LAYOUT = 2


# -------------------------------------------------------------------- train

def _chosen(ctx, kind):
    """The settings selection chose for ``kind`` (DataError when chosen.json predates it)."""
    chosen = ctx.read_json("chosen.json")
    if kind not in chosen:
        raise DataError(ctx.reports / "chosen.json", f"has no settings for the kind {kind!r}",
                        "run the select stage again (make select)")
    return chosen[kind]


def _train_config(kind):
    def config(ctx):
        c = ctx.cfg
        chosen = _chosen(ctx, kind)
        # the alpha stored in the model folders: the selection's, or chosen with
        # the final forest on the validation images (their grid, alphas and mode)
        alpha = {"alpha_from": c["evaluate"]["alpha_from"], "selection": chosen["alpha"]}
        if final_alpha_wanted(c):
            alpha |= {"mode": c["evaluate"]["mode"],
                      "select": {k: c["select"][k] for k in ("alphas", "n_images",
                                                             "pixel_stride")}}
        return {"forest": c["forest"], "kind": c[f"forest.{kind}"],
                "chosen": setting_of(chosen), "alpha": alpha, "seed": c["run"]["seed"],
                "position": c["position"], "layout": LAYOUT,
                **({"smoothing": c["smoothing"]} if smoothing.for_forests(c) else {})}
    return config


def _train(kind):
    def run(ctx):
        cfg = ctx.cfg
        n = cfg["forest"]["n_trees"]
        chosen = _chosen(ctx, kind)
        ws = ctx.windows_set()
        params = selection.estimator_params(cfg, kind, setting_of(chosen), ws.meta.layout)
        params["max_samples"] = min(params.get("max_samples", len(ws.y)), len(ws.y))
        est = backend.make_estimator(kind, params, n, cfg["run"]["seed"], ctx.workers,
                                     ctx.scheduler)
        ctx.log(f"train: {kind}: {n} trees on {len(ws.y)} windows ({params})")
        load0 = os.getloadavg()[0]
        layout = selection.kind_layout(cfg, kind, setting_of(chosen), ws.meta.layout)
        fit_s, cpu_s = backend.fit(est, ws, layout)
        load1 = os.getloadavg()[0]
        tree_s = backend.tree_times(est)
        prov = {"windows": str(ctx.windows), "run": ctx.run, "preset": cfg["_preset"],
                "selected": chosen, "n_windows": int(len(ws.y))}
        model = backend.to_model(est, kind, ws.meta, prov, layout)
        # every model folder of this kind: its decision rule (model.rule, which
        # `segment` / `evaluate` apply) and the metrics recording the choice
        alphas = calibrate(ctx, kind, model, float(chosen["alpha"]))
        model.metrics.update({"fit_seconds": round(fit_s, 3), **alphas})
        outs, sizes = _save_models(ctx, kind, model, fit_s, tree_s)
        a = model.arrays
        # what the forest is (deterministic: tracked) ...
        summary = {
            "kind": kind, "n_trees": n, "params": params, "model_bytes": sizes,
            "n_nodes": a.n_nodes, "n_oblique": int(a.weights.shape[0]),
            "max_depth_reached": int(a.depth.max()) if a.n_nodes else 0,
            "n_windows": int(len(ws.y)), **alphas,
        }
        js = ctx.reports / f"train-{kind}.json"
        write_json_atomic(js, summary, sort_keys=True)
        # ... and what fitting it took on this machine (stamps/timings -> timings.json)
        tm = ctx.write_timings(f"train-{kind}", {
            "kind": kind, "n_trees": n, "fit_seconds": round(fit_s, 3),
            "fit_cpu_seconds": round(cpu_s, 3), "tree_seconds": tree_s,
            "split_seconds": backend.split_times(est), "threads": ctx.workers,
            "cpu_count": os.cpu_count(), "load_average": [round(load0, 2), round(load1, 2)]})
        ctx.log(f"train: {kind}: {fit_s:.1f} s, {a.n_nodes} nodes, "
                f"{sizes[str(n)] / 1e6:.1f} MB")
        return outs + [js, tm]
    return run


def _save_models(ctx, kind, model, fit_s, tree_s):
    """Save ``model`` and its first-m-tree forests (``eval_trees``); ``(paths, bytes)``."""
    n = model.arrays.n_trees
    outs, sizes = [], {}
    for m in sorted(set(ctx.cfg["forest"]["eval_trees"]) | {n}):
        sub = model if m == n else backend.subforest(model, 0, m)
        if m != n:  # the first m trees: exactly an m-tree forest with the same seed
            share = sum(tree_s[:m]) / sum(tree_s) if tree_s and sum(tree_s) else m / n
            sub.params = {**sub.params, "n_estimators": m}
            sub.metrics.update({
                "fit_seconds": round(fit_s * share, 3), "fit_seconds_is_estimate": True,
                "truncated_from": str(ctx.model_dir(kind, n)),
                "n_nodes": sub.arrays.n_nodes, "n_oblique": int(sub.arrays.weights.shape[0])})
            if tree_s:
                sub.metrics["tree_seconds"] = tree_s[:m]
        path = ctx.model_dir(kind, m)
        if path.exists():
            shutil.rmtree(path)
        backend.save_model(sub, path)
        sizes[str(m)] = forest_bytes(path)
        outs.append(path)
    return outs, sizes


# ----------------------------------------------------------------- evaluate

def _eval_config(kind):
    def config(ctx):
        c = ctx.cfg
        # the alpha comes from the model folder (an input), chosen by train
        ev = {k: c["evaluate"][k] for k in ("extra_alphas", "mode", "pixel_stride",
                                            "fft_levels", "detector_protocol",
                                            "aligned_labels")}
        return {"evaluate": ev, "position": c["position"]["enabled"], "eval_trees": c["forest"]["eval_trees"],
                "depths": c["figures"]["depths"], "layout": LAYOUT}
    return config


def _evaluate(kind):
    def run(ctx):
        from facesegment.dense import default_alpha

        cfg = ctx.cfg
        n = cfg["forest"]["n_trees"]
        model = backend.load_model(ctx.model_dir(kind, n))
        ev = cfg["evaluate"]
        # chosen by the train stage (for the forest alone: without its position prior)
        alpha = float(model.metrics.get("alpha_no_prior", default_alpha(model)))
        alpha_sel = float(model.metrics.get("alpha_selection_forests", alpha))
        alphas = sorted({alpha, alpha_sel, *map(float, ev["extra_alphas"])})
        test = ctx.splits()["test"]
        smooth = smoothing.smoothed_rule(model)
        res = evaluation.evaluate(model, test, alphas=alphas,
                                  tree_counts=cfg["forest"]["eval_trees"],
                                  depths=cfg["figures"]["depths"], per_image_alpha=alpha,
                                  sweep_trees=range(1, n + 1),
                                  pixel_stride=ev["pixel_stride"], mode=ev["mode"],
                                  workers=ctx.workers, scheduler=ctx.scheduler,
                                  fft_levels=ev["fft_levels"], beta=0.0,
                                  extra_rules=prior.prior_rules(model), smoothed=smooth,
                                  desc=f"evaluate {kind}")
        # the scores with the prior and the smoothed ones come from the same pass
        res["with_prior"] = prior.with_prior(res)
        res["detector"] = prior.detector_scores(ctx, kind, model, alpha, smooth)
        res["smoothed"] = smoothing.test_scores(model, res.pop("smoothed", None),
                                                (res["detector"] or {}).pop("smoothed", None))
        res.update({"kind": kind, "alpha": alpha,
                    "model": os.path.relpath(ctx.model_dir(kind, n), ctx.root),
                    "alpha_selection_forests": alpha_sel,
                    "alpha_final_forest": model.metrics.get("alpha_final_forest"),
                    "mode": ev["mode"]})
        out = ctx.reports / f"eval-{kind}.json"
        write_json_atomic(out, res, sort_keys=True)
        for m, r in res["trees"].items():
            ctx.log(f"evaluate: {kind}-{m}: test Jaccard "
                    + ", ".join(f"{v['mean_jaccard']:.2f} (alpha={a})"
                                for a, v in r["alpha"].items()))
        return [out]
    return run


def _timing(kind):
    def run(ctx):
        cfg = ctx.cfg
        ev = cfg["evaluate"]
        n = cfg["forest"]["n_trees"]
        model = backend.load_model(ctx.model_dir(kind, n))
        test = ctx.splits()["test"][: ev["time_images"]]
        load0 = os.getloadavg()[0]
        res = time_inference(model, test, cfg["forest"]["eval_trees"],
                                        ev["time_mode"], ev["fft_levels"])
        out = ctx.write_timings(f"time-{kind}", {
            "kind": kind, "trees": res, "cpu_count": os.cpu_count(),
            "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)]})
        old = ctx.reports / f"time-{kind}.json"   # where layout 1 kept these times
        if old.exists():
            old.unlink()
            ctx.log(f"time: {kind}: removed {portable(old)} (the times are in timings.json now)")
        for m, r in res.items():
            ctx.log(f"time: {kind}-{m}: {r['ms_per_image']:.0f} ms/image "
                    f"({r['cpu_ms_per_image']:.0f} ms CPU)")
        return [out]
    return run
