"""The Markdown of one run's results, rendered only from files the pipeline wrote.

``render_run(run_dir)`` reads ``config.json``, ``splits.json``, ``chosen.json``,
``selection.json``, ``train-<kind>.json`` and ``eval-<kind>.json`` of one run
and returns Markdown: the paper-form table (class-average Jaccard at 16 and 32
trees next to the paper's LFW numbers) at the selected alpha and at alpha = 1,
per-class Jaccard, model size, the selected settings, the check of the paper's
claim, and the figures.  None of it is a measured time, so a rerun of the same
code on the same data and config gives the same bytes.  The pages are written
by :mod:`pipelines.report`.
"""

import math
from pathlib import Path

from facesegment.classes import CLASS_NAMES

from facesegment.forest.registry import KINDS as REGISTRY

from . import prior_report
from .common import KINDS, label, load_json, methods

#: The paper's three forests (the claim is about them), from the table of kinds.
PAPER_KINDS = tuple(k for k in KINDS if REGISTRY[k].paper)
#: Table II of the paper (LFW, class-average Jaccard at 16 / 32 trees).
PAPER = {"axis": (32.28, 34.61), "two-probe": (36.03, 38.61), "co2": (40.33, 42.55)}

DATA_NOTES = {
    "faces300w": (
        "**How this differs from the paper.** The paper used colour LFW faces with its "
        "own face-part annotations (the paper does not say how they were made). Here "
        "the faces are 300-W photos (AFW and HELEN, cropped LFW-style to 250x250) and "
        "the labels are polygons drawn from the 68 human-annotated landmarks "
        "(../shared/data/README.md): the parts have straight polygon edges, eyebrows "
        "are thin bands drawn from 5 landmarks each, and the lower face ends at the jaw "
        "line and the brows (no forehead). The photos are more varied (pose, "
        "resolution, lighting) than LFW. Absolute scores are therefore not "
        "comparable with the paper's; the comparison between the forests is "
        "the point."),
    "lfw": (
        "**How this differs from the paper.** Same photos as the paper (LFW) but "
        "greyscale (the three channels are identical, so a window carries 961 distinct "
        "values, not 2883), and labelled automatically: dlib's 68-landmark detector, "
        "rendered with the same polygon rules as faces300w, so the ground truth itself "
        "has detector errors. Train and test are split by person."),
    "lfw-colour": (
        "**How this differs from the paper.** Same photos as the paper (colour LFW), but "
        "labelled automatically: dlib's 68-landmark detector, rendered with the polygon "
        "rules of `facesegment label`, so the ground truth itself has detector errors "
        "(the paper's own annotations are not public). Train and test are split by person."),
    "other": (
        "**How this differs from the paper.** The paper used colour LFW faces with its "
        "own face-part annotations; this run used another labelled folder, so absolute "
        "scores are not comparable with the paper's; the comparison between the forests "
        "is the point."),
}


def _f(v, nd=2):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{nd}f}"


def _mb(n):
    return "–" if n is None else f"{n / 1e6:.1f} MB"


def _score(ev, n, alpha):
    t = ev["trees"].get(str(n))
    if not t:
        return None
    a = t["alpha"].get(repr(float(alpha)))
    return a


def _ord(n):
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def _data_note(cfg, splits=None):
    """The "how this differs from the paper" note for the run's data folder."""
    cfg, splits = cfg or {}, splits or {}
    root = str(splits.get("root") or (cfg.get("data") or {}).get("path") or "")
    parts = Path(root.rstrip("/\\")).parts
    if "faces300w" in parts:
        return DATA_NOTES["faces300w"]
    if "lfw-gray" in parts:
        return DATA_NOTES["lfw"]
    if splits.get("labels") and "lfw" in {p.lower() for p in parts}:
        return DATA_NOTES["lfw-colour"]
    return DATA_NOTES["other"]


def render_run(run_dir, figure_prefix="figures/", heading="##"):
    """Markdown of one run's results (see the module docstring)."""
    run_dir = Path(run_dir)
    conf = load_json(run_dir, "config.json") or {}
    splits = load_json(run_dir, "splits.json") or {}
    every = methods(run_dir)
    train = {k: load_json(run_dir, f"train-{k}.json") for k in every}
    evals = {k: load_json(run_dir, f"eval-{k}.json") for k in every}
    kinds = [k for k in every if evals[k]]
    if not kinds:
        return f"{heading} {run_dir.name}\n\nNo evaluation results yet.\n"
    sizes = sorted({int(n) for k in kinds for n in evals[k]["trees"]})
    h = heading
    L = [f"{h} {run_dir.name}", ""] + _data_section(conf, splits, evals[kinds[0]])
    L += _paper_tables(evals, kinds, sizes, h)
    L += _claim(evals, kinds, sizes, h)
    # beyond the paper: the position prior
    L += prior_report.markdown(load_json(run_dir, "prior.json"), evals, kinds, sizes,
                               {k: label(k) for k in kinds}, CLASS_NAMES, h)
    L += _per_class(evals, kinds, sizes, h)
    L += _size_table(train, kinds, sizes, h)    # times: timings.md
    L += _selection(load_json(run_dir, "selection.json"),
                    load_json(run_dir, "chosen.json") or {}, kinds, figure_prefix, h)
    inv = load_json(run_dir, "investigation.json")   # python -m pipelines.investigate
    if inv:
        from .investigate_report import markdown

        L.append(markdown(inv, heading=h + "#"))
        L += _findings(evals, kinds, sizes, inv, conf)
    L += _figures(run_dir / "figures", figure_prefix, h)
    return "\n".join(L) + "\n"


def _data_section(conf, splits, ev0):
    """Markdown: the data, the preset and the scored pixels."""
    counts = splits.get("counts", {})
    L = [f"Data: `{splits.get('root', '?')}`"
         + (f" (labels `{splits['labels']}`)" if splits.get("labels") else "")
         + f": {counts.get('train', '?')} training images and {counts.get('validation', '?')} "
         f"validation images for model selection (held out of the training images), "
         f"{counts.get('test', '?')} test images"
         + (f" (split: {splits['how']})" if splits.get("how") else "")
         + f". Preset `{conf.get('preset', '?')}`: "
         f"{conf.get('extract', {}).get('n_windows', '?')} class-balanced training windows, "
         f"{conf.get('forest', {}).get('max_samples', '?')} windows (bootstrap) per tree, "
         f"maximum depth {conf.get('forest', {}).get('max_depth', '?')}.", ""]
    stride = ev0.get("pixel_stride", 1)
    npix = ev0.get("n_pixels")
    L.append(f"Scored pixels: {npix:,}" if isinstance(npix, int) else "Scored pixels: ?")
    L[-1] += (f" over {ev0.get('n_images', '?')} test "
              "images: " + ("all pixels at least 15 px from the border (the paper's protocol)"
                            if stride == 1 else
                            f"those of a {stride}×{stride} grid (every {_ord(stride)} pixel of "
                            f"every {_ord(stride)} row) at least 15 px from the border of "
                            "every test image, the same for every forest "
                            "(`[evaluate] pixel_stride`; docs/pipeline.md says why)") + ".")
    return L + ["", _data_note(conf, splits), ""]


def _paper_tables(evals, kinds, sizes, h):
    """Markdown: the paper's table at the selected alpha and at alpha = 1."""
    L = []
    for title, which in (("selected α (chosen on validation)", "sel"),
                         ("α = 1 (the paper's full prior reweighting)", "one")):
        L.append(f"{h}# Class-average Jaccard on the test set, {title}")
        L.append("")
        cols = " | ".join(f"{n} trees" for n in sizes)
        L.append(f"| method | α | {cols} | paper (LFW) 16 / 32 |")
        L.append("| --- | ---: | " + " | ".join("---:" for _ in sizes) + " | ---: |")
        for k in kinds:
            a = evals[k]["alpha"] if which == "sel" else 1.0
            cells = [_f((_score(evals[k], n, a) or {}).get("mean_jaccard")) for n in sizes]
            p = PAPER.get(k)
            L.append(f"| {label(k)} | {a:g} | " + " | ".join(cells)
                     + (f" | {p[0]:.2f} / {p[1]:.2f} |" if p else " | (not in the paper) |"))
        L.append("")
        if which == "sel":
            L += _alpha_note(evals, kinds)
    return L


def _per_class(evals, kinds, sizes, h):
    """Markdown: per-class Jaccard of every method, size and alpha (test set)."""
    L = [f"{h}# Per-class Jaccard (test set)", "",
         "| method | trees | α | " + " | ".join(CLASS_NAMES) + " | mean | pixel acc. |",
         "| --- | ---: | ---: | " + " | ".join("---:" for _ in CLASS_NAMES) + " | ---: | ---: |"]
    for k in kinds:
        for n in sizes:
            for a in sorted({evals[k]["alpha"], 1.0}):
                s = _score(evals[k], n, a)
                if not s:
                    continue
                L.append(f"| {label(k)} | {n} | {a:g} | "
                         + " | ".join(_f(v, 1) for v in s["jaccard"])
                         + f" | {_f(s['mean_jaccard'])} | {_f(s['pixel_accuracy'], 1)} |")
    return L + [""]


def _selection(sel, chosen, kinds, figure_prefix, h):
    """Markdown: the selection grid and each method's chosen settings."""
    L = [f"{h}# Selected settings (validation images, not the test set)", ""]
    if sel:
        grid = ("full" if sel["full_grid"]
                else "quick (the default; `--full-grid` for the paper’s grids)")
        stride = sel.get("pixel_stride", 1)
        L.append(f"Grid: {grid}; "
                 f"forests of {sel['n_trees']} trees × {sel['max_samples']} windows, scored on "
                 f"{len(sel['validation_images'])} validation images"
                 + (f" (pixels of a {stride}×{stride} grid)" if stride > 1 else "")
                 + ". Every setting: "
                 "[selection.md](" + ("selection.md" if figure_prefix == "figures/" else
                                      figure_prefix.replace("figures/", "selection.md")) + ").")
    else:
        L.append("Model selection was off; the config's values were used.")
    L.append("")
    for k in kinds:
        c = chosen.get(k, {})
        items = ", ".join(f"{a}={b}" for a, b in c.items() if a != "validation_jaccard")
        vj = c.get("validation_jaccard")
        L.append(f"- {label(k)}: {items}"
                 + (f" (validation Jaccard {vj:.2f})" if vj is not None else ""))
    return L + [""]


def _figures(fig_dir, figure_prefix, h):
    """Markdown: the run's figures (the paper's first)."""
    if not fig_dir.is_dir():
        return []
    pngs = sorted((p.name for p in fig_dir.glob("*.png")),
                  key=lambda n: (not n.startswith("figure"), n))
    if not pngs:
        return []
    L = [f"{h}# Figures", ""]
    for p in pngs:
        L += [f"![{p}]({figure_prefix}{p})", ""]
    return L


def _size_table(train, kinds, sizes, h):
    """Markdown: model size and nodes per forest (deterministic), pointing to timings.md."""
    L = [f"{h}# Model size", "",
         "Bytes of each saved forest (its arrays; a smaller forest is the first trees of the "
         "largest) and nodes of the largest. Training and inference times, measured on the "
         "machine that ran the pipeline and different on every run, are in "
         "[timings.md](timings.md).", "",
         "| method | trees | model size | nodes |", "| --- | ---: | ---: | ---: |"]
    for k in kinds:
        t = train[k] or {}
        for n in sizes:
            L.append(f"| {label(k)} | {n} | "
                     f"{_mb((t.get('model_bytes') or {}).get(str(n)))} | "
                     f"{t.get('n_nodes', '–') if n == t.get('n_trees') else ''} |")
    return L + [""]


# ------------------------------------------------------------------ timings

#: The measured fields of the earlier layout's ``train-<kind>.json``.
def _alpha_note(evals, kinds):
    """Where the selected α came from: the final forest on validation, or the selection forests."""
    fin = {k: evals[k].get("alpha_final_forest") for k in kinds}
    if not any(fin.values()):
        return ["α: the one the small selection forests chose on the validation images.", ""]
    parts = []
    for k in kinds:
        f, small = fin[k], evals[k].get("alpha_selection_forests")
        if f:
            at_small = f["validation_jaccard"].get(repr(float(small))) if small is not None else None
            parts.append(f"{label(k)} {f['alpha']:g} (validation {_f(max(f['validation_jaccard'].values()))}"
                         + (f"; the selection forests' α = {small:g}: {_f(at_small)}"
                            if small is not None and float(small) != f["alpha"] else "") + ")")
    n = next(f for f in fin.values() if f)
    return [f"α: chosen with each final {n['n_trees']}-tree forest on the {n['n_images']} "
            f"validation images (`[evaluate] alpha_from = \"final\"`): " + "; ".join(parts) + ".",
            ""]


def _claim(evals, kinds, sizes, h):
    L = [f"{h}# The paper's claim: CO2 > two-probe > axis-aligned, CO2-16 ≈ +25% over RF-16", ""]
    if not all(k in kinds for k in PAPER_KINDS):
        return L + ["Not all three forests were evaluated.", ""]
    co2s = [c for c in kinds if c in REGISTRY and REGISTRY[c].oblique]  # each CO2 kind against the two baselines
    for co2 in co2s:
        trio = ("axis", "two-probe", co2)
        for which, pick in (("selected α", lambda k: evals[k]["alpha"]),
                            ("α = 1", lambda k: 1.0)):
            parts = []
            for n in sizes:
                s = {k: (_score(evals[k], n, pick(k)) or {}).get("mean_jaccard") for k in trio}
                if None in s.values():
                    continue
                order = sorted(trio, key=lambda k: -s[k])
                holds = order == [co2, "two-probe", "axis"]
                rel = 100.0 * (s[co2] / s["axis"] - 1.0) if s["axis"] else float("nan")
                paper = ""
                if n in (16, 32):
                    i = 0 if n == 16 else 1
                    paper = (f" (paper: {100.0 * (PAPER['co2'][i] / PAPER['axis'][i] - 1.0):+.1f}%)")
                parts.append(f"{n} trees: order {' > '.join(order)} "
                             f"({'as in the paper' if holds else 'not the paper’s order'}); "
                             f"{co2} vs axis-aligned {rel:+.1f}%{paper}")
            L.append(f"- {label(co2)}, {which}: " + "; ".join(parts) + ".")
    L.append("")
    return L


def _oblique_depth(conf):
    """Where the run's CO2 forests stop making oblique splits (from config.json)."""
    oms = (conf.get("forest.co2") or {}).get("oblique_min_samples")
    per_tree = (conf.get("forest") or {}).get("max_samples")
    if not oms or not per_tree:
        return ""
    return (f" This run's CO2 forests make oblique splits down to nodes of {oms:,} windows "
            f"(1/{per_tree / oms:.0f} of a tree's {per_tree:,}); every oblique level a pixel "
            "crosses costs a 2883-long dot product at inference (inference times: "
            "timings.md).")


def _findings(evals, kinds, sizes, inv, conf=None):
    """Sentences comparing the test Jaccard with the window-level study (numbers
    from the files)."""
    conf = conf or {}
    if not all(k in kinds for k in PAPER_KINDS):
        return []
    n = sizes[0]
    j = {k: (_score(evals[k], n, evals[k]["alpha"]) or {}).get("mean_jaccard")
         for k in PAPER_KINDS}
    v = {r["label"]: r for r in inv["variants"]}
    acc = {r["kind"]: r["accuracy"] for r in reversed(inv["variants"])}  # first of each kind
    co2 = [r for r in inv["variants"] if r["kind"] == "co2"]
    best = max(co2, key=lambda r: r["accuracy"])
    deep = next((r for r in co2 if "1/160" in r["label"]), None)
    top = next((r for r in co2 if "1/4" in r["label"]), None)
    L = ["What the two measurements say together:", ""]
    L.append(f"- On held-out windows CO2 (default settings) scores "
             f"{acc['co2'] - acc['axis']:+.1f} points of accuracy against the axis-aligned "
             f"forest and {acc['co2'] - acc['two-probe']:+.1f} against two-probe; on the test "
             f"images at {n} trees, {j['co2'] - j['axis']:+.2f} and "
             f"{j['co2'] - j['two-probe']:+.2f} Jaccard points.")
    verdict = ("above" if best["accuracy"] > acc["two-probe"] else "still below")
    L.append(f"- The best CO2 variant of the study is “{best['label']}” "
             f"({best['accuracy']:.2f}%), {verdict} two-probe ({acc['two-probe']:.2f}%).")
    if deep and top:
        L.append(f"- How deep oblique splits go matters: oblique splits down to nodes of "
                 f"1/160 of a tree's windows give {deep['accuracy']:.2f}% "
                 f"({deep['n_oblique']} oblique splits), only at nodes of ≥ 1/4 of them "
                 f"{top['accuracy']:.2f}% ({top['n_oblique']})." + _oblique_depth(conf))
    paper = v.get("CO2 ν=1 η=1e-4 (the paper's)")
    dflt = v.get("CO2 ν=1 η=1e-3 (default)")
    if paper and dflt:
        why = (": with the SGD step budget used here the smaller rate moves w less far "
               "from its axis-aligned start" if paper["accuracy"] < dflt["accuracy"] else "")
        L.append(f"- The paper's η = 1e-4 gives {paper['accuracy']:.2f}% against "
                 f"{dflt['accuracy']:.2f}% for η = 1e-3 (the default of docs/co2.md){why}.")
    L.append("")
    return L
