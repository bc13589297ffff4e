"""The "Position prior" section of results.md, rendered from the run's files.

:func:`markdown` reads what the prior stage wrote (``prior.json``) and the
evaluate stage's scores (``eval-<kind>.json``: the forests alone, with the
prior, smoothed, on both protocols); like the rest of the report it reads
only files (the stage itself: :mod:`pipelines.prior`).
"""


def _cell(trees, n, alpha):
    s = (trees or {}).get(str(n), {}).get("alpha", {}).get(repr(float(alpha)))
    return "" if s is None else f"{s['mean_jaccard']:.2f}"


def _smoothed_row(name, sm, sizes, det):
    """A table row of a model's smoothed test scores (its full forest only)."""
    cells = [f"{sm['test']['mean_jaccard']:.2f}" if m == sm["n_trees"] else "" for m in sizes]
    d = sm.get("detector")
    tail = (f" | {d['mean_jaccard']:.2f} |" if d else " | |") if det else " |"
    return f"| {name} | {sm['alpha']:g} | {sm['beta']:g} | " + " | ".join(cells) + tail


def markdown(prior_res, evals, kinds, sizes, labels, class_names, h="##"):
    """Lines of results.md's "Position prior" section (empty without prior.json)."""
    if not prior_res:
        return []
    t, g, n = prior_res["test"], prior_res["gamma"], sizes[-1]
    det = prior_res.get("detector")
    L = [f"{h}# Position prior and the detector-aligned protocol (beyond the paper)", "",
         f"Per-pixel class frequencies of the {prior_res['prior']['n_images']} training "
         f"crops' label maps (Gaussian σ = {prior_res['prior']['sigma']:g} px, shrunk toward "
         f"the class shares by {prior_res['prior']['pseudo']:g} image), combined with a "
         "forest as `p · s^−α · (pos/π)^β`, α and β chosen together on the validation "
         "images (`[position]`, docs/pipeline-config.md). The test crops are cut around the human "
         "landmarks, which gives a position prior the alignment for free; the "
         "**detector-aligned** columns score the same test faces re-cropped the way "
         "`segment` crops a photo, around dlib's predicted landmarks (docs/evaluation.md)"
         + (f": dlib finds {det['n_found']} of the {det['n_found'] + det['n_missed']} faces; "
            "a face it misses is scored as all background." if det else "."), "",
         "| method | α | β | " + " | ".join(f"{m} trees" for m in sizes)
         + (f" | detector-aligned, {n} trees |" if det else " |"),
         "| --- | ---: | ---: | " + " | ".join("---:" for _ in sizes)
         + (" | ---: |" if det else " |"),
         f"| position alone, no image (γ = {g:g}) | | | "
         + " | ".join(f"{t['mean_jaccard']:.2f}" for _ in sizes)
         + (f" | {det['test']['mean_jaccard']:.2f} |" if det else " |")]
    lm = prior_res.get("landmarks")
    if lm:
        d = lm.get("detector")
        L.append("| dlib's 68 predicted landmarks → label polygons (nothing trained) | | | "
                 + " | ".join(f"{lm['test']['mean_jaccard']:.2f}" for _ in sizes)
                 + ((f" | {d['mean_jaccard']:.2f} |" if d else " | |") if det else " |"))
    best = None
    for k in kinds:
        ev = evals[k]
        d = ev.get("detector") or {}
        L.append(f"| {labels[k]} | {ev['alpha']:g} | 0 | "
                 + " | ".join(_cell(ev["trees"], m, ev["alpha"]) for m in sizes)
                 + (f" | {_cell(d.get('trees'), n, ev['alpha'])} |" if det else " |"))
        wp = ev.get("with_prior")
        if wp:
            dw = d.get("with_prior") or {}
            L.append(f"| {labels[k]} × position prior | {wp['alpha']:g} | {wp['beta']:g} | "
                     + " | ".join(_cell(wp["trees"], m, wp["alpha"]) for m in sizes)
                     + (f" | {_cell(dw.get('trees'), n, wp['alpha'])} |" if det else " |"))
            last = wp["trees"].get(str(n), {}).get("alpha", {}).get(repr(wp["alpha"]))
            if last and (best is None or last["mean_jaccard"] > best[1]["mean_jaccard"]):
                best = (f"{labels[k]} × position prior, {n} trees", last)
        sm = ev.get("smoothed")
        if sm:
            name = (f"{labels[k]}{' × position prior' if sm['beta'] else ''}, smoothed "
                    f"(σ = {sm['sigma']:g})")
            L.append(_smoothed_row(name, sm, sizes, det))
            if best is None or sm["test"]["mean_jaccard"] > best[1]["mean_jaccard"]:
                best = (f"{name}, {sm['n_trees']} trees", sm["test"])
    L.append("")
    rows = [("position alone", t)] + ([("landmarks → polygons", lm["test"])] if lm else []) \
        + ([best] if best else [])
    L += ["| per class | " + " | ".join(class_names) + " | mean |",
          "| --- | " + " | ".join("---:" for _ in class_names) + " | ---: |"]
    for name, s in rows:
        L.append(f"| {name} | " + " | ".join(f"{v:.1f}" for v in s["jaccard"])
                 + f" | {s['mean_jaccard']:.2f} |")
    L.append("")
    return L
