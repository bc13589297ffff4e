"""What the main job's stages and its pages share; it imports no other pipeline module
but the design (:mod:`pipelines.design`).

* the run's methods: the kinds of the pipeline's design (:data:`KINDS`), then the
  config's auto-context cascades (``[cascade] chains``: "axis>axis" is the
  method ``ac-axis_axis``), and their display names (:func:`label`);
* reading a run folder's files (:func:`load_json`, :func:`finished_runs`) and
  writing times (:func:`secs`), for the results and timings pages;
* what several stages compute alike: the validation images selection and the
  decision rule are scored on (:func:`validation_records`), a seeded draw of
  records (:func:`subset`), a selection setting without its scores
  (:func:`setting_of`), portable paths and a forest's size on disk.

The layers of ``pipelines/`` above it: config, then selection and the stages'
own modules (prior, smoothing, calibration, model_stages, cascades), then
stages and run; the pages (prior_report, timings, report) read only files.
"""

import json
import os
from pathlib import Path

import numpy as np

from facesegment.forest import registry

from .design import DESIGN

#: The forest kinds the pipeline trains, in selection order: the rows of its design
#: (pipelines/design.py), each a row of the one table (facesegment.forest.registry).
KINDS = tuple(DESIGN)
#: Display names of the kinds on the pages: the registry's labels, capitalised.
KIND_LABELS = {k: registry.KINDS[k].label[:1].upper() + registry.KINDS[k].label[1:]
               for k in KINDS}
#: Name prefix of an auto-context cascade method.
CASCADE_PREFIX = "ac-"


# ------------------------------------------------------------ the methods

def cascade_chains(cfg):
    """``[(name, [kind, ...])]`` of the config's enabled cascades."""
    c = cfg.get("cascade") or {}
    if not c.get("enabled"):
        return []
    return [(cascade_name(ch), ch.split(">")) for ch in c.get("chains", [])]


def cascade_name(chain):
    """The method name of a chain: "axis>axis" -> "ac-axis_axis"."""
    return CASCADE_PREFIX + "_".join(chain.split(">"))


def cascade_names(cfg):
    return [n for n, _ in cascade_chains(cfg)]


def cascade_label(name):
    """Display name: "auto-context axis → axis" (the stage kinds)."""
    return "auto-context " + " → ".join(name[len(CASCADE_PREFIX):].split("_"))


def check_chain(chain):
    """The error text of a bad chain ("axis>axis"), or None."""
    kinds = chain.split(">") if isinstance(chain, str) else []
    if len(kinds) < 2:
        return 'a chain of at least two kinds, e.g. "axis>axis"'
    for i, k in enumerate(kinds):
        if k not in registry.KINDS:
            return f"kinds of the registry ({', '.join(registry.KINDS)}); {k!r} is not one"
        if i > 0 and registry.KINDS[k].oblique:
            return f"a non-oblique kind after the first stage ({k!r} has oblique splits)"
    return None


def methods(run_dir):
    """A run's methods: the forest kinds, then its auto-context cascades."""
    return list(KINDS) + cascade_names(load_json(run_dir, "config.json") or {})


def label(k):
    """Display name of a forest kind or a cascade."""
    if k in KIND_LABELS:
        return KIND_LABELS[k]
    text = cascade_label(k)
    return text[:1].upper() + text[1:]


# ------------------------------------------------------------ run folders

def load_json(run_dir, name):
    """The JSON document ``run_dir/name``, or None when the file is missing."""
    try:
        with open(Path(run_dir) / name) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def finished_runs(runs_dir):
    """The finished runs under ``runs_dir``: faces300w first, smoke runs last."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    return sorted((p for p in runs_dir.iterdir() if (p / "eval-axis.json").exists()
                   or (p / "eval-co2.json").exists()),
                  key=lambda p: (not p.name.startswith("faces300w"), "smoke" in p.name, p.name))


def secs(s):
    """A duration for the pages: "4.2 s", "42 s", "4.2 min"; "–" for None."""
    if s is None:
        return "–"
    if s < 10:
        return f"{s:.1f} s"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def portable(path):
    """``path`` as written into the run folder: relative to the working directory
    (the repository root) when absolute, else as given; ``""``/None unchanged."""
    if not path:
        return path
    path = os.fspath(path)
    return os.path.relpath(path) if os.path.isabs(path) else path


def forest_bytes(path):
    """Bytes of a model folder without its ``model.json``: the forest's arrays.

    ``model.json`` (a few KB) records this run's fit times (and the folder it
    was truncated from), so its size changes from run to run; the arrays of the
    same forest are the same bytes (``facesegment.modelio.model.save_model``).
    """
    total = 0
    for dirpath, _, files in os.walk(path):
        for fn in files:
            if fn != "model.json":
                total += os.path.getsize(os.path.join(dirpath, fn))
    return total


# ------------------------------------------------------------ the stages

def subset(records, n, seed):
    """``n`` records drawn with ``seed`` (all when n is 0), kept in name order."""
    if not n or n >= len(records):
        return records
    pick = np.random.default_rng(seed).choice(len(records), size=n, replace=False)
    return [records[i] for i in sorted(pick)]


def validation_records(ctx):
    """The validation images model selection scores (``[select] n_images`` of them)."""
    # a seeded draw, not the first n by name (names group photos by source: AFW first)
    return subset(ctx.splits()["validation"], ctx.cfg["select"]["n_images"],
                  ctx.cfg["run"]["seed"] + 2)


def final_alpha_wanted(cfg):
    """Is alpha chosen with the final forest (else: the selection forests' alpha)?"""
    return cfg["evaluate"]["alpha_from"] == "final" and cfg["select"]["enabled"]


def setting_of(chosen):
    """A kind's entry of ``chosen.json`` without its alpha and score: its parameters."""
    return {k: v for k, v in chosen.items() if k not in ("alpha", "validation_jaccard")}
