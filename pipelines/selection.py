"""Model selection on the validation images (held out from training, not test).

As in the paper: q for the axis-aligned forest from {p^0.5, ..., p^0.9}; then
CO2's nu and eta with that q; the number of sampled pairs for two-probe; and for
each, the prior-reweighting exponent alpha (``p * s**-alpha``; 1 is the
paper's full reweighting).  Our CO2 variant ``co2-best`` (each node starts
from the better of the best univariate and the best two-probe split) reuses
q, nu and eta chosen for ``co2`` (one setting; its alpha is selected).  What is
searched comes from the pipeline's design (``pipelines/design.py``): each
kind's ``grid`` names the [select] lists of its parameters and ``inherit`` the
parameters copied from a kind chosen before.  Every setting trains a small forest
(``[select] n_trees`` trees of ``max_samples`` windows each, from the same
training windows as the final forests) and is scored on the validation images
for every alpha in one inference pass.  The best (setting, alpha) by
class-average Jaccard is chosen per kind.

The result holds no measured times (``selection.json`` and ``selection.md``
are a function of the code, data, config and seed): the wall and CPU times of
every setting are returned apart, under ``result["timings"]``, which the select
stage pops and writes to the run's git-ignored ``stamps/timings/select.json``
(merged into ``timings.json`` by the report).
"""

import dataclasses
import itertools
import time

from facesegment.forest.registry import get_kind

from . import backend, scoring
from .design import design_of
from .config import KINDS, as_values, has_q, is_co2, q_features


def grids(cfg, full=False):
    """The settings tried per kind (before inherited parameters are added):
    lists of dicts of parameters, from the design's grids and the [select] lists.
    A grid list missing from the config is not searched."""
    s = cfg["select"]
    pre = "full_" if full else ""
    out = {}
    for kind in KINDS:
        grid = {p: as_values("select", pre + key, s[pre + key])
                for p, key in design_of(kind).grid.items() if s.get(pre + key) is not None}
        out[kind] = [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())]
    return out


def pool_of(cfg, kind, setting):
    """The pooling of ``kind``'s window layout: the setting's, the config's, or 1."""
    return int(setting.get("pool", cfg[f"forest.{kind}"].get("pool", 1)))


def kind_layout(cfg, kind, setting, windows_layout):
    """The layout ``kind``'s forest reads: the windows' own, pooled by :func:`pool_of`."""
    pool = pool_of(cfg, kind, setting)
    return windows_layout if pool == 1 else dataclasses.replace(windows_layout, pool=pool)


def estimator_params(cfg, kind, setting, windows_layout, extra_features=0):
    """Estimator keywords for ``kind`` from the config plus a selection setting.

    ``q`` becomes ``max_features`` of the values the kind's forest reads: those
    of ``windows_layout`` (the training windows' layout, pooled as
    :func:`kind_layout` says) plus ``extra_features`` (an auto-context stage's
    context values); ``pool`` is the layout's, not the estimator's.
    """
    valid = set(get_kind(kind).estimator_class().get_params())
    # a common [forest] key applies to the kinds that have that parameter (random
    # ferns have no max_depth / min_samples_leaf)
    params = {k: v for k, v in cfg["forest"].items()
              if k not in ("n_trees", "eval_trees") and k in valid}
    params.update({k: v for k, v in cfg[f"forest.{kind}"].items() if k not in ("q", "pool")})
    setting = dict(setting)
    n_features = kind_layout(cfg, kind, setting, windows_layout).n_features + extra_features
    setting.pop("pool", None)
    q = setting.pop("q", cfg[f"forest.{kind}"].get("q"))
    if has_q(kind) and q is not None:
        params["max_features"] = q_features(q, n_features)
    params.update(setting)
    return params


def selection_params(cfg, kind, setting, n_pool, windows_layout):
    """Estimator keywords of a selection forest: ``[select] max_samples`` windows per
    tree, and CO2's ``oblique_min_samples`` scaled by the same ratio, so that the
    smaller selection trees have oblique splits down to the same depth."""
    params = estimator_params(cfg, kind, setting, windows_layout)
    full = min(cfg["forest"].get("max_samples") or n_pool, n_pool)
    small = min(cfg["select"]["max_samples"], n_pool)
    params["max_samples"] = small
    if is_co2(kind) and "oblique_min_samples" in params:
        params["oblique_min_samples"] = max(
            2, int(round(params["oblique_min_samples"] * small / max(full, 1))))
    return params


def _label(setting):
    return ", ".join(f"{k}={v}" for k, v in setting.items())


def run_selection(cfg, ws, records, full=False, log=print):
    """Score every setting; return ``{"settings": [...], "chosen": {...}, ...}``.

    ``result["timings"]`` (a list, one entry per setting: kind, setting,
    ``fit_seconds``, ``fit_cpu_seconds``, ``score_seconds``) holds the measured
    times; every other key is deterministic.

    Parameters
    ----------
    cfg : dict (loaded config)
    ws : WindowSet of the training windows
    records : list of FaceRecord, the validation images to score
    full : bool
        Use the full grids (``full_*`` keys) instead of the quick ones.
    """
    sel = cfg["select"]
    seed = cfg["run"]["seed"]
    workers = cfg["run"]["workers"] or None
    scheduler = cfg["run"].get("scheduler") or None
    alphas = sel["alphas"]
    n = sel["n_trees"]
    grid = grids(cfg, full)
    rows, chosen, timings = [], {}, []
    for kind in KINDS:
        best = None
        inherited = design_of(kind).inherited(chosen)
        settings = [{**inherited, **s} for s in grid[kind]]
        for setting in settings:
            params = selection_params(cfg, kind, setting, len(ws.y), ws.meta.layout)
            est = backend.make_estimator(kind, params, n, seed, workers, scheduler)
            log(f"select: {kind} {_label(setting)}: training {n} trees "
                f"of {params['max_samples']} windows")
            layout = kind_layout(cfg, kind, setting, ws.meta.layout)
            fit_s, fit_cpu = backend.fit(est, ws, layout)
            model = backend.to_model(est, kind, ws.meta, {"purpose": "selection"}, layout)
            t0 = time.perf_counter()
            res = scoring.score_model(model, records, [n], alphas, workers=workers,
                                      scheduler=scheduler, mode=cfg["evaluate"]["mode"],
                                      desc=f"select {kind} {_label(setting)}",
                                      pixel_stride=sel["pixel_stride"])
            table = res["trees"][str(n)]["alpha"]
            a = scoring.best_alpha(res, n)
            timings.append({"kind": kind, "setting": setting, "fit_seconds": round(fit_s, 2),
                            "fit_cpu_seconds": round(fit_cpu, 2),
                            "score_seconds": round(time.perf_counter() - t0, 2)})
            row = {"kind": kind, "setting": setting, "params": params, "n_trees": n,
                   "jaccard_by_alpha": {k: v["mean_jaccard"] for k, v in table.items()},
                   "per_class_at_best": table[a]["jaccard"],
                   "best_alpha": float(a), "best_jaccard": table[a]["mean_jaccard"]}
            rows.append(row)
            log(f"select: {kind} {_label(setting)}: validation Jaccard "
                f"{row['best_jaccard']:.2f} at alpha={float(a)} "
                f"(alpha=1: {row['jaccard_by_alpha'].get(repr(1.0), float('nan'))})")
            if best is None or row["best_jaccard"] > best["best_jaccard"]:
                best = row
        chosen[kind] = {**best["setting"], "alpha": best["best_alpha"],
                        "validation_jaccard": best["best_jaccard"]}
    return {"settings": rows, "chosen": chosen, "full_grid": bool(full),
            "pixel_stride": sel["pixel_stride"],
            "n_trees": n, "max_samples": sel["max_samples"], "alphas": alphas,
            "validation_images": [r.name for r in records], "timings": timings}


def chosen_from_config(cfg):
    """The settings used when selection is off: straight from the config."""
    out = {}
    for kind in KINDS:
        sec = cfg[f"forest.{kind}"]
        row = design_of(kind)
        c = {"alpha": float(cfg["evaluate"]["alpha"])}
        for name in list(row.inherit) + [p for p in row.grid if p not in row.inherit]:
            if name == "q" and has_q(kind):
                c["q"] = sec["q"]
            elif name in sec:
                c[name] = sec[name]
        out[kind] = c
    return out


def selection_markdown(result):
    """A Markdown table of every setting's validation Jaccard at every alpha
    (no times: those are in the run's timings.md)."""
    alphas = [repr(float(a)) for a in result["alphas"]]
    lines = [
        f"Validation class-average Jaccard ({len(result['validation_images'])} validation "
        f"images, forests of {result['n_trees']} trees x {result['max_samples']} windows; "
        f"{'full' if result['full_grid'] else 'quick'} grid).",
        "",
        "| kind | setting | " + " | ".join(f"α={a}" for a in alphas) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in alphas) + " |",
    ]
    for r in result["settings"]:
        cells = []
        for a in alphas:
            v = r["jaccard_by_alpha"].get(a)
            txt = "" if v is None else f"{v:.2f}"
            if v is not None and float(a) == r["best_alpha"]:
                txt = f"**{txt}**"
            cells.append(txt)
        lines.append(f"| {r['kind']} | {_label(r['setting'])} | " + " | ".join(cells) + " |")
    lines += ["", "Training and scoring times of these forests: [timings.md](timings.md).",
              "", "Chosen:", ""]
    for kind, c in result["chosen"].items():
        shown = {k: v for k, v in c.items() if k != "validation_jaccard"}
        lines.append(f"- {kind}: {_label(shown)}"
                     f" (validation Jaccard {c['validation_jaccard']:.2f})")
    return "\n".join(lines) + "\n"
