"""Auto-context cascades in the face pipeline (``[cascade]`` of the config).

Each entry of ``[cascade] chains`` ("axis>axis": stage kinds in order) is a
method of the run, named ``ac-<kind>_<kind>...`` (``ac-axis_axis``), trained by
the stage ``train:<name>`` after ``train:<first kind>``:

* stage 1 is the run's own model of the first kind (``models/RUN/<kind>-N``);
* every later stage is a forest of its kind with the settings selection chose
  for that kind (``chosen.json``), trained on ``[window | context]`` rows whose
  context comes from out-of-fold maps (``n_folds`` image folds; the fold
  forests have ``fold_trees`` trees and, for two-probe, at most ``fold_pairs``
  candidates per node: they only make training maps;
  facesegment.autocontext.cascade_fit);
* a chain that is the start of a longer configured chain ("two-probe>axis"
  and "two-probe>axis>axis") is not fitted again: its train stage takes the
  longer cascade's first stages (identical to fitting it: same seeds, same
  out-of-fold maps) and chooses its own alpha, beta and sigma;
* α and β (the position prior) are chosen on the validation images with the
  final cascade, as for the forests.

Its evaluate and time stages are the forests' own (they load any model
folder); the report, the timings page and the figures list cascades after the
forests.  The chains' names and labels: :mod:`pipelines.common`.
docs/pipeline-config.md, "[cascade]: auto-context".
"""

from facesegment.autocontext.context import ContextSpec
from facesegment.dense import default_alpha, default_beta

from . import backend, prior, selection
from .calibration import calibrate
from .common import forest_bytes, setting_of


def spec_of(cfg, first=None):
    """The context spec of the config; with ``stage1_maps = "decisions"``, stage 1's
    maps are reweighted with the alpha and beta chosen for ``first`` (its model)."""
    c = cfg["cascade"]
    decisions = c["stage1_maps"] == "decisions" and first is not None
    return ContextSpec(n_classes=8, directions=c["directions"], radii=tuple(c["radii"]),
                       boxes=tuple(c["boxes"]), position=c["position"],
                       prior=c["prior_planes"] and cfg["position"]["enabled"],
                       stage1_alpha=default_alpha(first) if decisions else None,
                       stage1_beta=default_beta(first) if decisions else 0.0)


def train_config(name, kinds, longer=None):
    def config(ctx):
        c = ctx.cfg
        chosen = ctx.read_json("chosen.json")
        # this cascade's own settings (not the list of the other chains)
        own = {k: v for k, v in c["cascade"].items() if k != "chains"}
        return {"cascade": own, "kinds": kinds, "forest": c["forest"],
                "kind_tables": {k: c[f"forest.{k}"] for k in kinds},
                "chosen": {k: chosen[k] for k in kinds}, "position": c["position"],
                "smoothing": c["smoothing"],
                "select": {k: c["select"][k] for k in ("alphas", "n_images", "pixel_stride")},
                "seed": c["run"]["seed"], **({"first_stages_of": longer} if longer else {})}
    return config


def train_inputs(kinds, longer=None):
    def inputs(ctx):
        n = ctx.cfg["forest"]["n_trees"]
        out = [ctx.windows, ctx.reports / "splits.json", ctx.model_dir(kinds[0], n)]
        if longer is not None:   # derived from that chain's folder
            out.append(ctx.model_dir(longer, n) / "cascade.json")
        return out + ([prior.prior_path(ctx)] if ctx.cfg["position"]["enabled"] else [])
    return inputs


def longer_chain(kinds, all_chains):
    """The first configured chain that starts with ``kinds`` and is longer (its train
    stage trains this chain's stages too: this one is derived from it), or None."""
    for other, ok in all_chains:
        if len(ok) > len(kinds) and ok[:len(kinds)] == list(kinds):
            return other
    return None


def train(name, kinds, longer=None):
    """The ``train:<name>`` stage: fit the cascade, or with ``longer`` (the name of a
    chain that starts with these stages, trained first) take its first stages:
    fit_cascade trains stage k with the same seeds and out-of-fold maps whatever
    the length of the chain, so the prefix is the cascade this chain would fit."""
    def run(ctx):
        n = ctx.cfg["forest"]["n_trees"]
        if longer is None:
            cascade, spec, n_windows = _fit(ctx, kinds)
        else:
            full = backend.load_model(ctx.model_dir(longer, n))
            cascade, spec = full.stage_model(len(kinds)), full.spec
            cascade.position = full.position      # its context may read the prior
            cascade.provenance["first_stages_of"] = longer
            keep = {f"stage{i}" for i in range(2, len(kinds) + 1)} | {
                f"stage{i}_out_of_fold" for i in range(1, len(kinds))}
            cascade.metrics["cascade_fit_seconds"] = {
                k: v for k, v in full.metrics["cascade_fit_seconds"].items() if k in keep}
            n_windows = int(cascade.provenance["n_windows"])
        return _finish(ctx, name, kinds, cascade, spec, n_windows)
    return run


def _fit(ctx, kinds):
    """``(cascade, spec, n_windows)``: the chain fitted on the run's windows."""
    from facesegment.autocontext.cascade_fit import fit_cascade
    from facesegment.data.imageio import read_image

    cfg = ctx.cfg
    n, seed = cfg["forest"]["n_trees"], cfg["run"]["seed"]
    chosen = ctx.read_json("chosen.json")
    ws = ctx.windows_set()
    by_name = {r.name: r for r in ctx.splits()["train"]}

    first = backend.load_model(ctx.model_dir(kinds[0], n))
    spec = spec_of(cfg, first)

    def maker(kind, trees, context=True, fold=False):
        # a context stage's rows: the window's features plus the context values; its q
        # ([cascade] q, else the one selection chose for the kind) is of all of them
        setting = setting_of(chosen[kind])
        if context and cfg["cascade"].get("q"):
            setting["q"] = cfg["cascade"]["q"]
        pairs = cfg["cascade"].get("fold_pairs", 0)
        if fold and pairs and "n_pairs" in setting:   # fold forests only make training maps
            setting["n_pairs"] = min(int(setting["n_pairs"]), int(pairs))
        params = selection.estimator_params(cfg, kind, setting, ws.meta.layout,
                                            spec.n_planes if context else 0)
        params["max_samples"] = min(params.get("max_samples", len(ws.y)), len(ws.y))
        return lambda s: backend.make_estimator(kind, params, trees, s, ctx.workers,
                                                ctx.scheduler)

    cascade = fit_cascade(
        ws, lambda src: read_image(by_name[src].image),
        [(k, maker(k, n, i > 0)) for i, k in enumerate(kinds)],
        spec, n_folds=cfg["cascade"]["n_folds"], seed=seed, log=ctx.log,
        prior=prior.load_prior(prior.prior_path(ctx)) if spec.needs_prior else None,
        first=first, fold_stages=[maker(k, cfg["cascade"]["fold_trees"], i > 0, fold=True)
                                  for i, k in enumerate(kinds[:-1])],
        provenance={"run": ctx.run, "windows": str(ctx.windows), "first": str(
            ctx.model_dir(kinds[0], n))})
    return cascade, spec, int(len(ws.y))


def _finish(ctx, name, kinds, cascade, spec, n_windows):
    """Choose alpha, beta and sigma on the validation images, save the cascade folder,
    its train summary and its timings; the stage's outputs."""
    import os

    from facesegment.atomic import write_json_atomic
    from facesegment.autocontext.cascade import save_cascade

    cfg = ctx.cfg
    n = cfg["forest"]["n_trees"]
    for key in ("alpha", "beta", "alpha_no_prior", "position_selection",
                "alpha_final_forest", "alpha_selection_forests", "sigma", "sigma_selection"):
        cascade.final.metrics.pop(key, None)
    chosen = ctx.read_json("chosen.json")
    alphas = calibrate(ctx, name, cascade, float(chosen[kinds[-1]]["alpha"]))
    cascade.metrics.update(alphas)
    path = ctx.model_dir(name, n)
    save_cascade(cascade, path)
    a = cascade.final.arrays
    summary = {"kind": name, "stage_kinds": kinds, "n_trees": n,
               "fold_trees": cfg["cascade"]["fold_trees"],
               "fold_pairs": cfg["cascade"].get("fold_pairs", 0),
               "n_folds": cfg["cascade"]["n_folds"], "context": spec.to_dict(),
               "n_context_planes": spec.n_planes,
               "model_bytes": {str(n): _bytes(path)}, "n_nodes": a.n_nodes,
               "n_oblique": 0, "max_depth_reached": int(a.depth.max()),
               "n_windows": n_windows, **alphas}
    js = ctx.reports / f"train-{name}.json"
    write_json_atomic(js, summary, sort_keys=True)
    parts = cascade.metrics["cascade_fit_seconds"]
    tm = ctx.write_timings(f"train-{name}", {
        "kind": name, "n_trees": n, "fit_seconds": round(sum(parts.values()), 3),
        "parts": parts, "threads": ctx.workers, "cpu_count": os.cpu_count(),
        **({"first_stages_of": cascade.provenance["first_stages_of"]}
           if "first_stages_of" in cascade.provenance else {})})
    return [path, js, tm]


def _bytes(path):
    total = 0
    for sub in sorted(path.iterdir()):
        if sub.is_dir():
            total += forest_bytes(sub)
    return total
