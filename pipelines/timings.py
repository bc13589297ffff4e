"""Every measured time of a run, in one place (the results pages hold none).

:func:`collect_timings` merges what the stages measured (``stamps/timings/``:
select, train and time; the stage stamps' wall times) into ``timings.json``;
:func:`render_timings` renders it as ``timings.md`` and
:func:`render_all_timings` as docs/timings.md over all runs.  Run folders of
the earlier layout (times inside ``train-<kind>.json``, ``time-<kind>.json``,
``selection.json`` and results.md's "Run time" table) are read as a fallback.
"""

import json
import os
import re
from pathlib import Path

from .common import finished_runs, label, load_json, methods, secs

TRAIN_TIME_KEYS = ("fit_seconds", "fit_cpu_seconds", "tree_seconds", "split_seconds",
                   "threads", "cpu_count", "load_average")


def _old_train_times(run_dir, kind):
    t = load_json(run_dir, f"train-{kind}.json") or {}
    if t.get("fit_seconds") is None:
        return None
    return {"kind": kind, "n_trees": t.get("n_trees"),
            **{k: t[k] for k in TRAIN_TIME_KEYS if k in t}}


def _old_select_times(run_dir):
    sel = load_json(run_dir, "selection.json") or {}
    rows = [{"kind": r["kind"], "setting": r["setting"],
             **{k: r[k] for k in ("fit_seconds", "fit_cpu_seconds", "score_seconds") if k in r}}
            for r in sel.get("settings", []) if "fit_seconds" in r]
    return {"settings": rows} if rows else None


def _old_stage_times(run_dir):
    """The "Run time of the main job" table of an earlier results.md (rounded times)."""
    try:
        text = (Path(run_dir) / "results.md").read_text()
    except OSError:
        return {}
    if "# Run time of the main job" not in text:
        return {}
    text = text.split("# Run time of the main job", 1)[1]
    out = {}
    for m in re.finditer(r"^\| ([\w:-]+) \| ([\d.]+) (s|min) \|(?: [^|\n]* \|)* ([\dT:Z-]+) \|$", text, re.M):
        secs = float(m.group(2)) * (60.0 if m.group(3) == "min" else 1.0)
        out[m.group(1)] = {"seconds": secs, "finished": m.group(4), "rounded": True}
    return out


def _stamp_times(run_dir):
    """``{stage: {"seconds", "finished"}}`` from the run's stage stamps (report left out:
    its stamp is the previous report's)."""
    out = {}
    for p in sorted((Path(run_dir) / "stamps").glob("*.json")):
        try:
            st = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if (isinstance(st, dict) and isinstance(st.get("seconds"), (int, float))
                and st.get("stage") and st["stage"] != "report"):
            out[st["stage"]] = {"seconds": st["seconds"], "finished": st.get("finished", ""),
                                **{k: st[k] for k in ("cpu_seconds", "load_average")
                                   if k in st}}
    return out


def collect_timings(run_dir):
    """Every measured time of a run, merged (what ``timings.json`` holds).

    Each part comes from the first of: this machine's ``stamps/timings/<part>.json``
    (written by the stage that measured it), the run's ``timings.json`` (the last
    report's, e.g. committed), and the earlier layout's files (times inside
    ``train-<kind>.json``, ``time-<kind>.json``, ``selection.json``; stage times from
    the stage stamps, else from the old results.md's "Run time" table).

    Returns ``{"run", "select", "train": {kind: ...}, "time": {kind: ...},
    "stages": {stage: {"seconds", "finished"}}}``.
    """
    run_dir = Path(run_dir)
    live = run_dir / "stamps" / "timings"
    last = load_json(run_dir, "timings.json") or {}
    out = {"run": run_dir.name,
           "select": (load_json(live, "select.json") or last.get("select")
                      or _old_select_times(run_dir)),
           "train": {}, "time": {}}
    for k in methods(run_dir):
        t = (load_json(live, f"train-{k}.json") or (last.get("train") or {}).get(k)
             or _old_train_times(run_dir, k))
        if t:
            out["train"][k] = t
        t = (load_json(live, f"time-{k}.json") or (last.get("time") or {}).get(k)
             or load_json(run_dir, f"time-{k}.json"))
        if t:
            out["time"][k] = t
    stages = dict(last.get("stages") or {}) or _old_stage_times(run_dir)
    stages.update(_stamp_times(run_dir))
    out["stages"] = dict(sorted(stages.items(), key=lambda kv: (kv[1].get("finished", ""),
                                                                kv[0])))
    return out


def render_timings(run_dir, timings=None, heading="##", dates=True):
    """Markdown of one run's measured times (``timings.json``, else :func:`collect_timings`);
    ``dates=False`` leaves out when each stage finished (the docs page)."""
    run_dir = Path(run_dir)
    T = timings if timings is not None else collect_timings(run_dir)
    train, times = T.get("train") or {}, T.get("time") or {}
    every = methods(run_dir)
    evals = {k: load_json(run_dir, f"eval-{k}.json") for k in every}
    kinds = [k for k in every if k in train or k in times]
    h = heading
    L = [f"{h} {run_dir.name}", ""]
    if not kinds and not T.get("stages"):
        return "\n".join(L + ["No times measured yet.", ""]) + "\n"
    sizes = sorted({int(n) for k in kinds for n in ((evals[k] or {}).get("trees") or {})}
                   | {int(n) for k in kinds for n in ((times.get(k) or {}).get("trees") or {})}
                   | {int(t["n_trees"]) for t in train.values() if t.get("n_trees")})
    if kinds:
        L += _time_table(train, times, kinds, sizes, h)
    L += _select_times(T.get("select"), h)
    L += _stage_table(T.get("stages") or {}, h, dates)
    return "\n".join(L) + "\n"


def _time_table(train, times, kinds, sizes, h):
    L = [f"{h}# Training and inference time", ""]
    threads = next((t.get("threads") for t in train.values() if t), None)
    cores = next((t.get("cpu_count") for t in list(train.values()) + list(times.values())
                  if t and t.get("cpu_count")), None)
    L.append(f"Measured on the machine that ran the pipeline ({cores or '?'} cores; "
             f"{'all cores' if not threads else f'{threads} threads'}), one stage at a "
             "time. Training time is the wall time of `fit` for the largest forest; a "
             "smaller forest is its first trees, so its time (marked ≈) is that wall time "
             "times those trees' share of the per-tree times. Inference is the median "
             "wall time of dense per-pixel prediction of one 250×250 test image "
             "(all pixels, windows read from the image; `facesegment.dense."
             "predict_image`). In brackets: CPU time of the process (all threads).")
    L += ["", "| method | trees | training (CPU) | inference / image (CPU) |",
          "| --- | ---: | ---: | ---: |"]
    for k in kinds:
        t = train.get(k) or {}
        for n in sizes:
            ts = t.get("tree_seconds") or []
            share = 1.0 if n == t.get("n_trees") else (
                (sum(ts[:n]) / sum(ts)) if ts and sum(ts) else n / (t.get("n_trees") or n))
            fit = "–"
            if t.get("fit_seconds") is not None:
                fit = ("" if share == 1.0 else "≈ ") + secs(t["fit_seconds"] * share)
                if t.get("fit_cpu_seconds") is not None:
                    fit += f" ({secs(t['fit_cpu_seconds'] * share)})"
            tm = ((times.get(k) or {}).get("trees") or {}).get(str(n), {})
            inf = "–"
            if tm.get("ms_per_image") is not None:
                inf = f"{tm['ms_per_image']:.0f} ms ({tm.get('cpu_ms_per_image', 0):.0f} ms)"
            L.append(f"| {label(k)} | {n} | {fit} | {inf} |")
    for k in kinds:
        tm = ((times.get(k) or {}).get("trees") or {}).get(str(sizes[-1]), {}) if sizes else {}
        if tm.get("oblique_gflop_per_image"):
            integer = tm.get("dot_arithmetic") == "integer"
            unit = "G integer ops" if integer else "GFLOP"
            L.append("")
            L.append(f"{label(k)}, {sizes[-1]} trees: "
                     f"{tm['oblique_visits_per_image'] / 62500:.1f} oblique nodes per pixel "
                     f"(all trees), {tm['oblique_gflop_per_image']:.1f} {unit}"
                     f"{' (multiply-adds counted as 2)' if integer else ''} of dot products "
                     f"per image, {tm['oblique_gflops_per_cpu_second']:.2f} {unit} per CPU "
                     "second.")
    return L + [""] + _split_table(train, kinds, h)


def _split_table(train, kinds, h):
    """Where the fit time went: the split families' search against the rest."""
    rows = [(k, train[k]["split_seconds"]) for k in kinds
            if isinstance((train.get(k) or {}).get("split_seconds"), dict)]
    if not rows:
        return []
    L = [f"{h}# Where the training time goes", "",
         "Seconds summed over the trees of the largest forest (each tree's own thread; "
         "about twice the wall time on 2 busy cores): the split search (the split "
         "family's `find` at every node), and for CO2 its start (the best univariate "
         "and two-probe splits) and its optimisation; the rest is partitioning and "
         "bookkeeping.", "",
         "| method | trees | split search | CO2 start | CO2 optimisation |",
         "| --- | ---: | ---: | ---: | ---: |"]
    for k, sp in rows:
        tot = sp.get("trees") or 0.0

        def part(v):
            return f"{secs(v)} ({100.0 * v / tot:.0f}%)" if tot and v else "–"
        co2 = sp.get("oblique", 0.0) > 0   # other families time their own searches as "init"
        L.append(f"| {label(k)} | {secs(tot)} | {part(sp.get('split_search', 0.0))} | "
                 f"{part(sp.get('init', 0.0)) if co2 else '–'} | "
                 f"{part(sp.get('oblique', 0.0))} |")
    return L + [""]


def _select_times(sel, h):
    rows = (sel or {}).get("settings") or []
    if not rows:
        return []
    total = sum(r.get("fit_seconds", 0) + r.get("score_seconds", 0) for r in rows)
    L = [f"{h}# Model selection", "",
         f"Training (CPU) and scoring wall time of every selection forest "
         f"(selection.md has their scores): {secs(total)} in all.", "",
         "| kind | setting | training (CPU) | scoring |", "| --- | --- | ---: | ---: |"]
    for r in rows:
        setting = ", ".join(f"{a}={b}" for a, b in r.get("setting", {}).items())
        fit = secs(r.get("fit_seconds"))
        if r.get("fit_cpu_seconds") is not None:
            fit += f" ({secs(r['fit_cpu_seconds'])})"
        L.append(f"| {r.get('kind', '?')} | {setting} | {fit} | "
                 f"{secs(r.get('score_seconds'))} |")
    return L + [""]


def _stage_table(stages, h, dates=True):
    if not stages:
        return []
    total = sum(st["seconds"] for st in stages.values())
    rounded = any(st.get("rounded") for st in stages.values())
    L = [f"{h}# Run time of the main job", "",
         f"Wall time of each stage when it last ran (from `stamps/`), in order: "
         f"**{secs(total)} in all** ({len(stages)} stages; a stage that was redone counts "
         "once, with its last time; the report stage, under a second, is not listed)"
         + ("; times read back from an earlier results.md, rounded" if rounded else "")
         + ".", "",
         "| stage | time | CPU |" + (" finished (UTC) |" if dates else ""),
         "| --- | ---: | ---: |" + (" --- |" if dates else "")]
    order = sorted(stages.items(), key=lambda kv: (kv[1].get("finished", ""), kv[0]))
    L += [f"| {name} | {secs(st['seconds'])} | {_cpu(st)} |"
          + (f" {st.get('finished', '')} |" if dates else "") for name, st in order]
    if any("cpu_seconds" in st for st in stages.values()):
        L += ["", "CPU: seconds of the process, all threads (2 busy cores give about twice "
              "the wall time)."]
    return L + [""]


def _cpu(st):
    return secs(st["cpu_seconds"]) if isinstance(st.get("cpu_seconds"), (int, float)) else ""


def stage_times(run_dir, h="##"):
    """Markdown: the wall time of every stage of the run (timings.md's table)."""
    return _stage_table(collect_timings(run_dir)["stages"], h)


def render_all_timings(runs_dir, docs_dir):
    """docs/timings.md: the measured times of every run under ``runs_dir``."""
    L = ["# Timings", "",
         "Every measured time of the runs under `reports/runs/` (their `timings.json`, "
         "written by `python -m pipelines.run report`, part of `make all`; do not edit by "
         "hand): training, inference, model selection and stage wall times, with the "
         "stage order of each run. These change on every run, unlike "
         "the scores of [results.md](results.md). How they were measured: "
         "[pipeline.md](pipeline.md).", ""]
    runs = finished_runs(runs_dir)
    if not runs:
        L.append("No finished runs yet: `make all DATA=../shared/data/faces300w`.")
    for p in runs:
        L.append(render_timings(p, load_json(p, "timings.json"), heading="##", dates=False))
        L.append(f"Files: `{os.path.relpath(p, Path(docs_dir).parent)}/timings.json`.")
        L.append("")
    return "\n".join(L) + "\n"
