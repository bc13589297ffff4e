"""The stages of the main job and where they write.

Layout of one run (``<run>`` = ``<dataset>-<preset>``)::

    reports/runs/<run>/splits.json          data: train / validation / test records
    data/windows/<run>/train.h5             extract: class-balanced windows
    reports/runs/<run>/selection.{json,md}  select: validation score of every setting
    reports/runs/<run>/chosen.json          select: the settings train uses
    models/<run>/<kind>-<n>/                train: one model per kind and forest size,
                                            with its alpha (model.metrics["alpha"])
    reports/runs/<run>/train-<kind>.json    train: params, sizes, nodes, the alpha and its table
    reports/runs/<run>/eval-<kind>.json     evaluate: test scores for every size and alpha
    reports/runs/<run>/figures/*.png        figures
    reports/runs/<run>/results.md           report (and docs/results.md over all runs)
    reports/runs/<run>/timings.{json,md}    report: every measured time of the run
                                            (and docs/timings.md over all runs)
    reports/runs/<run>/stamps/<stage>.json  up-to-date stamps (git-ignored)
    reports/runs/<run>/stamps/timings/      select, train and time: what they measured
                                            (select.json, train-<kind>.json,
                                            time-<kind>.json; git-ignored)

Measured times (wall and CPU seconds, load averages, thread and core counts,
dates) go only to ``stamps/timings/`` and from there, merged by the report
stage, to ``timings.json`` / ``timings.md``: every other file of the run folder
is a function of the code, the data, the config and the seed, so a rerun
leaves it byte-identical (tests/test_pipelines.py checks it) and ``git status``
after ``make all`` shows what changed besides the timings.  Paths written into
the run folder are relative to the repository root (the working directory).

Each stage is a :class:`Stage`: ``config(ctx)`` (what its outputs depend on
besides its inputs), ``inputs(ctx)`` (paths fingerprinted into the stamp key),
and ``run(ctx)`` which returns the paths it wrote.
"""

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from facesegment import evaluation
from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.errors import DataError

from . import backend, cascades, prior, report, selection, smoothing
from .config import KINDS, run_name
from .stamps import ByContent, fingerprint

#: Version of what the stages write (in the stage keys of data, select, train,
#: evaluate and time): 2 = measured times moved out of the tracked files into
#: ``stamps/timings/`` and ``timings.json``, paths made relative.  Bumping it
#: redoes those stages on a machine whose stamps predate the change.
LAYOUT = 2


def portable(path):
    """``path`` as written into the run folder: relative to the working directory
    (the repository root) when absolute, else as given; ``""``/None unchanged."""
    if not path:
        return path
    path = os.fspath(path)
    return os.path.relpath(path) if os.path.isabs(path) else path


@dataclass
class Context:
    """Everything a stage needs: the config, the run's folders, options."""

    cfg: dict
    root: Path = field(default_factory=Path.cwd)
    full_grid: bool = False
    log: object = print
    cache: dict = field(default_factory=dict)

    @property
    def run(self):
        return run_name(self.cfg)

    @property
    def reports(self):
        return self.root / "reports" / "runs" / self.run

    @property
    def windows(self):
        return self.root / "data" / "windows" / self.run / "train.h5"

    @property
    def models(self):
        return self.root / "models" / self.run

    def model_dir(self, kind, n):
        return self.models / f"{kind}-{n}"

    @property
    def timings(self):
        """``stamps/timings/``: what the stages measured (git-ignored, per machine)."""
        return self.reports / "stamps" / "timings"

    def write_timings(self, name, obj):
        """Write a stage's measured times to ``stamps/timings/<name>.json``; its path."""
        path = self.timings / f"{name}.json"
        write_json_atomic(path, obj, sort_keys=True)
        return path

    @property
    def workers(self):
        return self.cfg["run"]["workers"] or None

    @property
    def scheduler(self):
        return self.cfg["run"]["scheduler"] or None

    def read_json(self, name):
        path = self.reports / name
        try:
            with open(path) as fh:
                return json.load(fh)
        except FileNotFoundError:
            raise DataError(path, "is missing", "run the earlier stages first "
                            "(`make all` runs them in order)") from None

    def splits(self):
        s = self.read_json("splits.json")
        return {k: backend.records_from_json(s[k]) for k in ("train", "validation", "test")}

    def windows_set(self):
        if "ws" not in self.cache:
            self.cache["ws"] = backend.read_windows(self.windows)
        return self.cache["ws"]


@dataclass
class Stage:
    name: str
    config: object       # ctx -> JSON-able dict
    inputs: object       # ctx -> list of paths
    run: object          # ctx -> list of written paths
    deps: tuple = ()


# --------------------------------------------------------------------- data

def _data_config(ctx):
    d = ctx.cfg["data"]
    return {"data": d, "seed": ctx.cfg["run"]["seed"], "layout": LAYOUT}


def _data_inputs(ctx):
    d = ctx.cfg["data"]
    # by content: a re-copied dataset (same bytes, new mtimes) is not a new dataset
    return [ByContent(p) for p in (d["path"], d["labels"]) if p and os.path.isdir(p)]


def resolve_data(ctx):
    """``(image_root, labels_root or "")``: DATA, else LFW downloaded and labelled."""
    d = ctx.cfg["data"]
    if d["path"]:
        if not os.path.isdir(d["path"]):
            raise backend.NoDataError(f"no data: DATA={d['path']} is not a folder; "
                                      + backend.NO_DATA_HELP)
        if d["labels"] and not os.path.isdir(d["labels"]):
            raise DataError(d["labels"], "labels folder does not exist",
                            "label the images with `facesegment label IN OUT` first")
        return d["path"], d["labels"]
    return backend.fetch_lfw(d["lfw_dest"], d["lfw_labels"], ctx.workers, ctx.scheduler)


def _subset(records, n, seed):
    """``n`` records drawn with ``seed`` (all when n is 0), kept in name order."""
    if not n or n >= len(records):
        return records
    pick = np.random.default_rng(seed).choice(len(records), size=n, replace=False)
    return [records[i] for i in sorted(pick)]


def run_data(ctx):
    d = ctx.cfg["data"]
    seed = ctx.cfg["run"]["seed"]
    root, labels = resolve_data(ctx)
    # relative paths in splits.json (and its records): no machine's absolute paths
    root, labels = portable(root), portable(labels)
    train, val, test, how = backend.split_dataset(root, labels, d["n_validation"],
                                                  d["test_fraction"], seed)
    n_tr, n_te = len(train), len(test)
    train = _subset(train, d["max_train_images"], seed)
    test = _subset(test, d["max_test_images"], seed + 1)
    if len(train) < n_tr:
        how += f"; {len(train)} of the {n_tr} training images used (drawn with the seed)"
    if len(test) < n_te:
        how += f"; {len(test)} of the {n_te} test images used (drawn with the seed)"
    if not train or not test:
        raise DataError(root, f"split into {len(train)} training and {len(test)} test images",
                        "give a folder with more labelled faces")
    out = ctx.reports / "splits.json"
    write_json_atomic(out, {
        "root": root, "labels": labels, "how": how,
        # the bytes of the data: every later stage reads splits.json, so editing an
        # image or a label in place redoes extraction and what follows
        "fingerprint": {"images": fingerprint(ByContent(root)),
                        "labels": fingerprint(ByContent(labels)) if labels else None},
        "counts": {"train": len(train), "validation": len(val), "test": len(test)},
        "train": [[r.name, r.image, r.label] for r in train],
        "validation": [[r.name, r.image, r.label] for r in val],
        "test": [[r.name, r.image, r.label] for r in test],
    }, sort_keys=True)
    ctx.log(f"data: {root}: {len(train)} training, {len(val)} validation, "
            f"{len(test)} test images")
    return [out]


# ------------------------------------------------------------------ extract

def run_extract(ctx):
    recs = ctx.splits()["train"]
    out = ctx.windows
    out.parent.mkdir(parents=True, exist_ok=True)
    ctx.cache.pop("ws", None)
    backend.extract(recs, out, ctx.cfg["extract"]["n_windows"], ctx.cfg["run"]["seed"],
                    ctx.workers, ctx.scheduler)
    return [out]


# ------------------------------------------------------------------- select

def _select_config(ctx):
    c = ctx.cfg
    keys = ("select", "forest") + tuple(f"forest.{k}" for k in KINDS)
    return {k: c[k] for k in keys} | {"mode": c["evaluate"]["mode"],
                                      "alpha": c["evaluate"]["alpha"],
                                      "seed": c["run"]["seed"], "full_grid": ctx.full_grid,
                                      "layout": LAYOUT}


def validation_records(ctx):
    """The validation images model selection scores (``[select] n_images`` of them)."""
    # a seeded draw, not the first n by name (names group photos by source: AFW first)
    return _subset(ctx.splits()["validation"], ctx.cfg["select"]["n_images"],
                   ctx.cfg["run"]["seed"] + 2)


def run_select(ctx):
    cfg = ctx.cfg
    if not cfg["select"]["enabled"]:
        chosen = selection.chosen_from_config(cfg)
        write_json_atomic(ctx.reports / "chosen.json", chosen, sort_keys=True)
        ctx.log("select: [select] enabled = false: using the config's q, n_pairs, nu, "
                "eta and alpha")
        return [ctx.reports / "chosen.json"]
    val = validation_records(ctx)
    if not val:
        raise DataError(ctx.reports / "splits.json", "has no validation images",
                        "set [data] n_validation > 0 or [select] enabled = false")
    result = selection.run_selection(cfg, ctx.windows_set(), val, ctx.full_grid, ctx.log)
    timings = result.pop("timings")
    outs = [ctx.reports / "selection.json", ctx.reports / "selection.md",
            ctx.reports / "chosen.json"]
    write_json_atomic(outs[0], result, sort_keys=True)
    write_text_atomic(outs[1], "# Model selection\n\n" + selection.selection_markdown(result))
    write_json_atomic(outs[2], result["chosen"], sort_keys=True)
    outs.append(ctx.write_timings("select", {"settings": timings, "threads": ctx.workers,
                                              "cpu_count": os.cpu_count()}))
    return outs


# -------------------------------------------------------------------- train

def _setting(chosen):
    return {k: v for k, v in chosen.items() if k not in ("alpha", "validation_jaccard")}


def _final_alpha_wanted(cfg):
    """Is alpha chosen with the final forest (else: the selection forests' alpha)?"""
    return cfg["evaluate"]["alpha_from"] == "final" and cfg["select"]["enabled"]


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
        if _final_alpha_wanted(c):
            alpha |= {"mode": c["evaluate"]["mode"],
                      "select": {k: c["select"][k] for k in ("alphas", "n_images",
                                                             "pixel_stride")}}
        return {"forest": c["forest"], "kind": c[f"forest.{kind}"],
                "chosen": _setting(chosen), "alpha": alpha, "seed": c["run"]["seed"],
                "position": c["position"], "layout": LAYOUT,
                **({"smoothing": c["smoothing"]} if smoothing.for_forests(c) else {})}
    return config


def _choose_alpha(ctx, kind, model, alpha_sel):
    """``(alpha, record)``: the alpha every model folder of ``kind`` gets.

    With ``[evaluate] alpha_from = "final"`` (and selection on), the
    reweighting exponent that scores best on the validation images with the
    final forest ``model`` (not the test set): the small selection forests
    rank q, pairs, nu and eta well, but the best alpha moves with the forest's
    size (bigger forests give more peaked probabilities).  Same images, grid,
    alphas and mode as the selection.  Else the selection's ``alpha_sel``.
    """
    cfg = ctx.cfg
    val = validation_records(ctx) if _final_alpha_wanted(cfg) else []
    if not val:
        return alpha_sel, None
    sel = cfg["select"]
    rec = evaluation.choose_alpha(model, val, sel["alphas"], mode=cfg["evaluate"]["mode"],
                                  pixel_stride=sel["pixel_stride"], workers=ctx.workers,
                                  scheduler=ctx.scheduler, desc=f"alpha {kind}")
    table = ", ".join(f"{a}: {v:.2f}" for a, v in rec["validation_jaccard"].items())
    ctx.log(f"train: {kind}-{rec['n_trees']}: alpha {rec['alpha']:g} on {rec['n_images']} "
            f"validation images with the final forest ({table})")
    return rec["alpha"], rec


def _train(kind):
    def run(ctx):
        cfg = ctx.cfg
        n = cfg["forest"]["n_trees"]
        chosen = _chosen(ctx, kind)
        ws = ctx.windows_set()
        params = selection.estimator_params(cfg, kind, _setting(chosen), ws.meta.layout)
        params["max_samples"] = min(params.get("max_samples", len(ws.y)), len(ws.y))
        est = backend.make_estimator(kind, params, n, cfg["run"]["seed"], ctx.workers,
                                     ctx.scheduler)
        ctx.log(f"train: {kind}: {n} trees on {len(ws.y)} windows ({params})")
        load0 = os.getloadavg()[0]
        layout = selection.kind_layout(cfg, kind, _setting(chosen), ws.meta.layout)
        fit_s, cpu_s = backend.fit(est, ws, layout)
        load1 = os.getloadavg()[0]
        tree_s = backend.tree_times(est)
        prov = {"windows": str(ctx.windows), "run": ctx.run, "preset": cfg["_preset"],
                "selected": chosen, "n_windows": int(len(ws.y))}
        model = backend.to_model(est, kind, ws.meta, prov, layout)
        # every model folder of this kind: `segment` / `evaluate` use these
        alphas = prior.choose_alphas(ctx, kind, model, float(chosen["alpha"]))
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
            "threads": ctx.workers, "cpu_count": os.cpu_count(),
            "load_average": [round(load0, 2), round(load1, 2)]})
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


def forest_bytes(path):
    """Bytes of a model folder without its ``model.json``: the forest's arrays.

    ``model.json`` (a few KB) records this run's fit times (and the folder it
    was truncated from), so its size changes from run to run; the arrays of the
    same forest are the same bytes (``facesegment.model.save_model``).
    """
    total = 0
    for dirpath, _, files in os.walk(path):
        for fn in files:
            if fn != "model.json":
                total += os.path.getsize(os.path.join(dirpath, fn))
    return total


# ----------------------------------------------------------------- evaluate

def _eval_config(kind):
    def config(ctx):
        c = ctx.cfg
        # the alpha comes from the model folder (an input), chosen by train
        ev = {k: c["evaluate"][k] for k in ("extra_alphas", "mode", "pixel_stride",
                                            "fft_levels", "detector_protocol")}
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
        res = evaluation.evaluate(model, test, alphas=alphas,
                                  tree_counts=cfg["forest"]["eval_trees"],
                                  depths=cfg["figures"]["depths"], per_image_alpha=alpha,
                                  sweep_trees=range(1, n + 1),
                                  pixel_stride=ev["pixel_stride"], mode=ev["mode"],
                                  workers=ctx.workers, scheduler=ctx.scheduler,
                                  fft_levels=ev["fft_levels"], beta=0.0,
                                  desc=f"evaluate {kind}")
        res["with_prior"] = prior.score_with_prior(ctx, kind, model)
        res["smoothed"] = smoothing.test_scores(ctx, kind, model)
        res["detector"] = prior.detector_scores(ctx, kind, model, alpha)
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
        res = evaluation.time_inference(model, test, cfg["forest"]["eval_trees"],
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


# ------------------------------------------------------------ figures, report

def run_figures(ctx):
    """Figure 3, Figure 4 and the confusion matrices (facesegment.figures) from the
    run's models and ``eval-<kind>.json``: only Figure 3's faces are predicted again."""
    from facesegment.figures import make_figures
    from facesegment.forest.registry import KINDS as TABLE

    cfg = ctx.cfg
    if not cfg["figures"]["enabled"]:
        ctx.log("figures: [figures] enabled = false, nothing to do")
        return []
    n = cfg["forest"]["n_trees"]
    kinds = [row.name for row in TABLE.values() if row.name in KINDS] + cascades.names(cfg)
    labels = {k: TABLE[k].label if k in TABLE else cascades.label(k) for k in kinds}
    res = make_figures({k: backend.load_model(ctx.model_dir(k, n)) for k in kinds},
                       ctx.splits()["test"], ctx.reports / "figures",
                       evaluations={k: ctx.read_json(f"eval-{k}.json") for k in kinds},
                       labels=labels,
                       mode=cfg["evaluate"]["mode"], n_random=cfg["figures"]["n_random"],
                       seed=cfg["run"]["seed"], workers=ctx.workers, scheduler=ctx.scheduler)
    return [Path(f) for f in res["written"]]


def run_report(ctx):
    """config.json, results.md, timings.json, timings.md and docs/{results,timings}.md."""
    return report.write_reports(ctx.root, ctx.reports, ctx.cfg)


def _reports(*names):
    return lambda ctx: [ctx.reports / n for n in names]


def build_stages(cfg=None):
    """All stages by name, in their order (with ``cfg``, its auto-context cascades too)."""
    chains = cascades.chains(cfg) if cfg else []
    methods = list(KINDS) + [name for name, _ in chains]
    st = [
        Stage("data", _data_config, _data_inputs, run_data),
        Stage("extract", lambda c: {"extract": c.cfg["extract"], "seed": c.cfg["run"]["seed"]},
              _reports("splits.json"), run_extract, ("data",)),
        Stage("select", _select_config, lambda c: [c.windows, c.reports / "splits.json"],
              run_select, ("extract",)),
    ]
    st.append(Stage("prior", prior.prior_config, _reports("splits.json"),
                    lambda c: prior.run_prior(c, validation_records), ("extract",)))
    for k in KINDS:
        # the validation images (splits.json) score the final forest's alpha
        st.append(Stage(f"train:{k}", _train_config(k),
                        lambda c: [c.windows, c.reports / "splits.json"]
                        + ([prior.prior_path(c)] if c.cfg["position"]["enabled"] else []),
                        _train(k), ("select", "prior")))
    for name, kinds in chains:
        longer = cascades.longer_chain(kinds, chains)   # derived from its first stages
        st.append(Stage(f"train:{name}", cascades.train_config(name, kinds, longer),
                        cascades.train_inputs(kinds, longer),
                        cascades.train(name, kinds, longer),
                        ("select", "prior", f"train:{kinds[0]}")
                        + ((f"train:{longer}",) if longer else ())))
    for k in methods:
        st.append(Stage(f"evaluate:{k}", _eval_config(k),
                        lambda c, k=k: [c.model_dir(k, c.cfg["forest"]["n_trees"]),
                                        c.reports / "splits.json"],
                        _evaluate(k), (f"train:{k}",)))
    for k in methods:
        st.append(Stage(f"time:{k}", lambda c: {k: c.cfg["evaluate"][k] for k in
                                                ("time_images", "time_mode", "fft_levels")}
                        | {"trees": c.cfg["forest"]["eval_trees"], "layout": LAYOUT},
                        lambda c, k=k: [c.model_dir(k, c.cfg["forest"]["n_trees"]),
                                        c.reports / "splits.json"],
                        _timing(k), (f"evaluate:{k}",)))
    st.append(Stage("figures", lambda c: {"figures": c.cfg["figures"],
                                          "mode": c.cfg["evaluate"]["mode"]},
                    lambda c: [c.reports / f"eval-{k}.json" for k in methods]
                    + [c.model_dir(k, c.cfg["forest"]["n_trees"]) for k in methods],
                    run_figures, tuple(f"time:{k}" for k in methods)))
    st.append(Stage("report", lambda c: {"version": report.REPORT_VERSION},
                    lambda c: _report_inputs(c, methods), run_report, ("figures",)))
    return {s.name: s for s in st}


def _report_inputs(ctx, methods=KINDS):
    """What the report renders: the run's files, the measured times, and the other
    stages' stamps (their wall times go to timings.json)."""
    r = ctx.reports
    return ([r / f for f in ("selection.json", "chosen.json", "investigation.json",
                             "prior.json")]
            + [r / f"{p}-{k}.json" for k in methods for p in ("train", "eval")]
            + [r / "figures", ctx.timings]
            + sorted(p for p in (r / "stamps").glob("*.json") if p.name != "report.json"))
