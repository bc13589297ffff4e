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
and ``run(ctx)`` which returns the paths it wrote.  The train, evaluate and
time stages of a kind are written in :mod:`pipelines.model_stages`, an
auto-context cascade's train stage in :mod:`pipelines.cascades`; the helpers
they share are in :mod:`pipelines.common`.
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.errors import DataError

from . import backend, cascades, prior, report, selection
from .common import (cascade_chains, cascade_label, cascade_names, portable, subset,
                     validation_records)
from .config import KINDS, run_name
from .model_stages import LAYOUT, _eval_config, _evaluate, _timing, _train, _train_config
from .stamps import ByContent, fingerprint



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


def run_data(ctx):
    d = ctx.cfg["data"]
    seed = ctx.cfg["run"]["seed"]
    root, labels = resolve_data(ctx)
    # relative paths in splits.json (and its records): no machine's absolute paths
    root, labels = portable(root), portable(labels)
    train, val, test, how = backend.split_dataset(root, labels, d["n_validation"],
                                                  d["test_fraction"], seed)
    n_tr, n_te = len(train), len(test)
    train = subset(train, d["max_train_images"], seed)
    test = subset(test, d["max_test_images"], seed + 1)
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


# ------------------------------------------------------------ figures, report

def run_figures(ctx):
    """Figure 3, Figure 4 and the confusion matrices (facesegment.evaluation.figures) from the
    run's models and ``eval-<kind>.json``: only Figure 3's faces are predicted again."""
    from facesegment.evaluation.figures import make_figures
    from facesegment.forest.registry import KINDS as TABLE

    cfg = ctx.cfg
    if not cfg["figures"]["enabled"]:
        ctx.log("figures: [figures] enabled = false, nothing to do")
        return []
    n = cfg["forest"]["n_trees"]
    kinds = [row.name for row in TABLE.values() if row.name in KINDS] + cascade_names(cfg)
    labels = {k: TABLE[k].label if k in TABLE else cascade_label(k) for k in kinds}
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
    chains = cascade_chains(cfg) if cfg else []
    methods = list(KINDS) + [name for name, _ in chains]
    st = [
        Stage("data", _data_config, _data_inputs, run_data),
        Stage("extract", lambda c: {"extract": c.cfg["extract"], "seed": c.cfg["run"]["seed"]},
              _reports("splits.json"), run_extract, ("data",)),
        Stage("select", _select_config, lambda c: [c.windows, c.reports / "splits.json"],
              run_select, ("extract",)),
    ]
    st.append(Stage("prior", prior.prior_config, _reports("splits.json"),
                    prior.run_prior, ("extract",)))
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
