"""The position prior in the face pipeline (``[position]`` of the config).

Stage ``prior`` (after ``extract``): the per-pixel class frequencies of the
training crops' label maps (the images the windows come from: neither the
validation nor the test images), smoothed (``sigma``) and shrunk toward the
class shares (``pseudo``) -> ``models/RUN/position-prior.npz``; the map that
uses the position alone (no image, :func:`facesegment.position.constant_labels`)
with its exponent ``gamma`` chosen on the validation images, scored on the
test set -> ``reports/runs/RUN/prior.json``.

The train stage attaches the prior to every model of the run and chooses its
exponent ``beta`` together with ``alpha`` on the validation images
(:func:`choose_alphas`); the evaluate stage scores each forest alone and
times the prior (:func:`score_with_prior`).  docs/pipeline.md, "Position prior".
"""

import os

import numpy as np

from facesegment import evaluation
from facesegment.atomic import atomic_path, write_json_atomic
from facesegment.classes import CLASS_NAMES
from facesegment.errors import DataError
from facesegment.imageio import read_label
from facesegment.position import PositionPrior, PriorCounter, crop_rule_of
from facesegment.progress import Progress

PRIOR_FILE = "position-prior.npz"


def prior_path(ctx):
    return ctx.models / PRIOR_FILE


def prior_config(ctx):
    return {"position": ctx.cfg["position"], "seed": ctx.cfg["run"]["seed"],
            "detector_protocol": ctx.cfg["evaluate"]["detector_protocol"],
            "landmarks": ctx.cfg["evaluate"].get("landmarks", False),
            "select": {k: ctx.cfg["select"][k] for k in ("n_images", "pixel_stride")},
            "mode": ctx.cfg["evaluate"]["mode"], "pixel_stride": ctx.cfg["evaluate"]
            ["pixel_stride"]}


def fit_prior(records, n_classes, shape, sigma, pseudo, desc="prior"):
    """A :class:`PositionPrior` of the label maps of ``records``."""
    counter = PriorCounter(n_classes, shape)
    with Progress(len(records), desc, "label maps") as bar:
        for rec in records:
            counter.add(read_label(rec.label))
            bar.update(1)
    return counter.prior(sigma, pseudo)


def save_prior(prior, path):
    """``position-prior.npz`` (plain arrays, no pickles), written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, suffix=".npz", what="position prior",
                     fix="free disk space") as tmp:
        np.savez_compressed(tmp, freq=prior.freq, class_prior=prior.class_prior,
                            sigma=prior.sigma, pseudo=prior.pseudo, n_images=prior.n_images,
                            crop_rule=np.asarray(prior.crop_rule, np.float64))
    return path


def load_prior(path):
    try:
        with np.load(path, allow_pickle=False) as z:
            return PositionPrior(z["freq"], z["class_prior"], float(z["sigma"]),
                                 float(z["pseudo"]), int(z["n_images"]),
                                 crop_rule_of(z["crop_rule"] if "crop_rule" in z else None))
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(path, f"cannot be read as a position prior ({exc})",
                        "run the prior stage again (`make all PIPE_ARGS='--force prior'`)") \
            from None


def run_prior(ctx, validation_records):
    """Fit, save and score the prior (see the module docstring); ``validation_records``
    is :func:`pipelines.stages.validation_records`."""
    cfg, splits = ctx.cfg, ctx.splits()
    pos = cfg["position"]
    train = splits["train"]
    if not train:
        raise DataError(ctx.reports / "splits.json", "has no training images",
                        "check [data] path")
    shape = read_label(train[0].label).shape
    prior = fit_prior(train, len(CLASS_NAMES), shape, pos["sigma"], pos["pseudo"])
    rule = None
    if pos["crop_faces"]:
        from facesegment.aligned import measure_crop_rule

        rule = measure_crop_rule(train, pos["crop_faces"], cfg["run"]["seed"],
                                 workers=ctx.workers)
        prior.crop_rule = tuple(rule["crop_rule"])
        ctx.log(f"prior: crop rule (k, ox, oy) = {tuple(rule['crop_rule'])} from "
                f"{rule['n_found']} of {rule['n_faces']} training faces")
    path = save_prior(prior, prior_path(ctx))
    ev = cfg["evaluate"]
    val = validation_records(ctx)
    chosen, table = 0.0, None
    if val and len(pos["gammas"]) > 1:
        r = evaluation.evaluate_position_only(
            prior, val, pos["gammas"], mode=ev["mode"],
            pixel_stride=cfg["select"]["pixel_stride"], desc="prior gamma")
        table = {g: v["mean_jaccard"] for g, v in r["gamma"].items()}
        chosen = float(max(table, key=lambda g: (table[g], -float(g))))
    elif pos["gammas"]:
        chosen = float(pos["gammas"][0])
    test = evaluation.evaluate_position_only(prior, splits["test"], [chosen], mode=ev["mode"],
                                             pixel_stride=ev["pixel_stride"],
                                             desc="prior test")
    res = {"prior": prior.describe(), "file": os.path.relpath(path, ctx.root),
           "gamma": chosen, "validation_jaccard": table,
           "n_validation_images": len(val), "test": test["gamma"][repr(chosen)],
           "n_images": test["n_images"], "n_pixels": test["n_pixels"],
           "pixel_stride": test["pixel_stride"], "mode": ev["mode"], "crop_rule": rule}
    if ev["detector_protocol"]:
        recs = aligned_test(ctx)
        det = evaluation.evaluate_position_only(prior, recs, [chosen], mode=ev["mode"],
                                                pixel_stride=ev["pixel_stride"],
                                                desc="prior test (detector)")
        from facesegment.aligned import aligned_counts

        found, missed = aligned_counts(recs)
        res["detector"] = {"test": det["gamma"][repr(chosen)], "n_pixels": det["n_pixels"],
                           "n_found": found, "n_missed": missed}
    if ev.get("landmarks"):
        res["landmarks"] = landmark_scores(ctx)
    out = ctx.reports / "prior.json"
    write_json_atomic(out, res, sort_keys=True)
    ctx.log(f"prior: {prior.n_images} label maps, sigma {prior.sigma:g}; position alone "
            f"(gamma {chosen:g}): test Jaccard {res['test']['mean_jaccard']:.2f}")
    return [path, out]


def landmark_scores(ctx):
    """The renderer's test scores (dlib's 68 predicted landmarks drawn as the
    label polygons, :mod:`facesegment.renderer`; nothing trained) on the test
    crops and, with ``detector_protocol``, on the detector-aligned faces (the
    landmarks predicted on the re-cropped faces); the landmarks are cached in
    ``data/landmarks/RUN/``."""
    from facesegment.renderer import evaluate_renderer, landmark_table

    ev = ctx.cfg["evaluate"]
    folder = ctx.root / "data" / "landmarks" / ctx.run
    out = {}
    sets = [("test", ctx.splits()["test"])]
    if ev["detector_protocol"]:
        sets.append(("detector", aligned_test(ctx)))
    for name, recs in sets:
        table = landmark_table(recs, folder / f"{name}.npz", desc=f"landmarks ({name})")
        r = evaluate_renderer(recs, table, mode=ev["mode"], pixel_stride=ev["pixel_stride"],
                              desc=f"renderer ({name})")
        one = r["sigma"]["0.0"]
        out[name] = {"mean_jaccard": one["mean_jaccard"], "jaccard": one["jaccard"],
                     "pixel_accuracy": one["pixel_accuracy"], "n_images": r["n_images"],
                     "n_found": r["n_found"], "n_pixels": r["n_pixels"]}
    ctx.log(f"prior: landmarks renderer test Jaccard {out['test']['mean_jaccard']:.2f}"
            + (f", detector-aligned {out['detector']['mean_jaccard']:.2f}"
               if "detector" in out else ""))
    return out


def choose_alphas(ctx, kind, model, alpha_sel):
    """Choose the decision rule of every model folder of ``kind`` (forests and
    cascades): set ``model.rule`` and return the metrics that record the choice.

    The rule is chosen by the library (:func:`facesegment.calibrate.choose_rule`)
    on the run's validation images: alpha with the final forest (``[evaluate]
    alpha_from = "final"``, selection on) or, else, the selection forests'
    ``alpha_sel``; with ``[position] enabled`` the run's prior is attached and
    alpha and beta are chosen together (whose beta = 0 pass gives the
    forest-alone alpha); sigma where ``[smoothing]`` applies to the model.
    Metrics: ``alpha`` (and ``beta``, ``alpha_no_prior``, ``position_selection``
    with the prior; ``sigma``, ``sigma_selection`` with smoothing),
    ``alpha_selection_forests``, ``alpha_final_forest`` (the forest alone's
    choice with the final forest, or None).
    """
    from facesegment.calibrate import choose_rule
    from facesegment.rule import DecisionRule

    from .smoothing import sigmas_for
    from .stages import _final_alpha_wanted, validation_records

    cfg = ctx.cfg
    records = validation_records(ctx)
    final_wanted = bool(records) and _final_alpha_wanted(cfg)
    position = bool(records) and cfg["position"]["enabled"]
    if position:
        model.position = load_prior(prior_path(ctx))
    out = {"alpha": alpha_sel, "alpha_selection_forests": alpha_sel, "alpha_final_forest": None}
    if not records:
        model.rule = DecisionRule(alpha=alpha_sel)
        return out
    sel = cfg["select"]
    rule, rec = choose_rule(
        model, records, alphas=sel["alphas"] if final_wanted or position else [alpha_sel],
        betas=cfg["position"]["betas"] if position else None, sigmas=sigmas_for(cfg, model),
        mode=cfg["evaluate"]["mode"], pixel_stride=sel["pixel_stride"],
        workers=ctx.workers, scheduler=ctx.scheduler, desc=kind)
    model.rule = rule
    alone = rec.get("forest_alone")
    if final_wanted:
        out["alpha_final_forest"] = alone
        ctx.log(f"train: {kind}-{alone['n_trees']}: alpha {alone['alpha']:g} on "
                f"{alone['n_images']} validation images with the final forest ("
                + ", ".join(f"{a}: {v:.2f}" for a, v in alone["validation_jaccard"].items())
                + ")")
    out["alpha"] = rule.alpha
    if position:
        zero = alone["validation_jaccard"]
        ctx.log(f"train: {kind}: with the position prior alpha {rule.alpha:g}, beta "
                f"{rule.beta:g} ({rec['validation_jaccard'][repr(rule.alpha)]:.2f} on "
                f"validation; forest alone {zero[repr(alone['alpha'])]:.2f} at alpha "
                f"{alone['alpha']:g})")
        out |= {"beta": rule.beta, "alpha_no_prior": rec["alpha_no_prior"],
                "position_selection": rec["position_selection"]}
    if "sigma_selection" in rec:
        table = rec["sigma_selection"]["validation_jaccard"]
        ctx.log(f"train: {kind}: smoothing sigma {rule.sigma:g} on {len(records)} validation "
                f"images ({table[repr(rule.sigma)]:.2f}; none {table[repr(0.0)]:.2f})")
        out |= {"sigma": rule.sigma, "sigma_selection": rec["sigma_selection"]}
    return out


def aligned_test(ctx):
    """The test faces re-cropped by `segment`'s rule (facesegment.aligned) with the
    prior's crop rule (the one every model of the run carries), cached in
    ``data/aligned/RUN/test``: the detector-aligned protocol's records."""
    from facesegment.aligned import realign_records

    if "aligned" not in ctx.cache:
        path = prior_path(ctx)
        rule = load_prior(path).crop_rule if path.exists() else None
        ctx.cache["aligned"] = realign_records(
            ctx.splits()["test"], ctx.root / "data" / "aligned" / ctx.run / "test",
            workers=ctx.workers, crop_rule=rule)
    return ctx.cache["aligned"]


def detector_scores(ctx, kind, model, alpha):
    """Scores on the detector-aligned test faces: the forest alone at ``alpha`` and,
    when the model has a prior, at its chosen ``(alpha, beta)``; None when
    ``[evaluate] detector_protocol`` is off."""
    from facesegment.aligned import aligned_counts
    from facesegment.dense import default_alpha, default_beta

    cfg, ev = ctx.cfg, ctx.cfg["evaluate"]
    if not ev["detector_protocol"]:
        return None
    recs = aligned_test(ctx)
    found, missed = aligned_counts(recs)
    kw = {"tree_counts": cfg["forest"]["eval_trees"], "pixel_stride": ev["pixel_stride"],
          "mode": ev["mode"], "workers": ctx.workers, "scheduler": ctx.scheduler,
          "fft_levels": ev["fft_levels"]}
    r = evaluation.evaluate(model, recs, alphas=[alpha], beta=0.0,
                            desc=f"evaluate {kind} (detector)", **kw)
    out = {"n_found": found, "n_missed": missed, "alpha": alpha, "trees": r["trees"],
           "n_pixels": r["n_pixels"], "with_prior": None}
    beta = default_beta(model)
    if beta > 0:
        a = default_alpha(model)
        w = evaluation.evaluate(model, recs, alphas=[a], beta=beta,
                                desc=f"evaluate {kind} x prior (detector)", **kw)
        out["with_prior"] = {"alpha": a, "beta": beta, "trees": w["trees"]}
    return out


def score_with_prior(ctx, kind, model):
    """Test scores of ``model`` with its prior at its chosen ``(alpha, beta)``;
    None for a model without a prior or with beta 0."""
    from facesegment.dense import default_alpha, default_beta

    beta = default_beta(model)
    if beta <= 0:
        return None
    cfg, ev = ctx.cfg, ctx.cfg["evaluate"]
    alpha = default_alpha(model)
    r = evaluation.evaluate(model, ctx.splits()["test"], alphas=[alpha], beta=beta,
                            tree_counts=cfg["forest"]["eval_trees"],
                            pixel_stride=ev["pixel_stride"], mode=ev["mode"],
                            workers=ctx.workers, scheduler=ctx.scheduler,
                            fft_levels=ev["fft_levels"], desc=f"evaluate {kind} x prior")
    return {"alpha": alpha, "beta": beta, "trees": r["trees"], "per_image": r["per_image"],
            "n_pixels": r["n_pixels"]}


# ------------------------------------------------------------------- report

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
         "images (`[position]`, docs/pipeline.md). The test crops are cut around the human "
         "landmarks, which gives a position prior the alignment for free; the "
         "**detector-aligned** columns score the same test faces re-cropped the way "
         "`segment` crops a photo, around dlib's predicted landmarks (docs/inference.md)"
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
