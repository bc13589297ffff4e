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
(:mod:`pipelines.calibration`); the evaluate stage scores each forest with
the prior (:func:`prior_rules`: in the same pass over the test faces as the
forest alone) and on the detector-aligned faces (:func:`detector_scores`).  Its section of results.md:
:mod:`pipelines.prior_report`.  docs/pipeline-config.md, "[position]".
"""

import os

import numpy as np

from facesegment.evaluation import maps, scoring as evaluation
from facesegment.atomic import atomic_path, write_json_atomic
from facesegment.classes import CLASS_NAMES
from facesegment.errors import DataError
from facesegment.data.imageio import read_label
from facesegment.position import PositionPrior, PriorCounter, crop_rule_of
from facesegment.progress import Progress

from .common import validation_records

PRIOR_FILE = "position-prior.npz"


def prior_path(ctx):
    return ctx.models / PRIOR_FILE


def prior_config(ctx):
    return {"position": ctx.cfg["position"], "seed": ctx.cfg["run"]["seed"],
            "detector_protocol": ctx.cfg["evaluate"]["detector_protocol"],
            "aligned_labels": ctx.cfg["evaluate"]["aligned_labels"],
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


def run_prior(ctx):
    """Fit, save and score the prior (see the module docstring)."""
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
        from facesegment.faces.aligned import measure_crop_rule

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
        r = maps.evaluate_position_only(
            prior, val, pos["gammas"], mode=ev["mode"],
            pixel_stride=cfg["select"]["pixel_stride"], desc="prior gamma")
        table = {g: v["mean_jaccard"] for g, v in r["gamma"].items()}
        chosen = float(max(table, key=lambda g: (table[g], -float(g))))
    elif pos["gammas"]:
        chosen = float(pos["gammas"][0])
    test = maps.evaluate_position_only(prior, splits["test"], [chosen], mode=ev["mode"],
                                             pixel_stride=ev["pixel_stride"],
                                             desc="prior test")
    res = {"prior": prior.describe(), "file": os.path.relpath(path, ctx.root),
           "gamma": chosen, "validation_jaccard": table,
           "n_validation_images": len(val), "test": test["gamma"][repr(chosen)],
           "n_images": test["n_images"], "n_pixels": test["n_pixels"],
           "pixel_stride": test["pixel_stride"], "mode": ev["mode"], "crop_rule": rule}
    if ev["detector_protocol"]:
        recs = aligned_test(ctx)
        det = maps.evaluate_position_only(prior, recs, [chosen], mode=ev["mode"],
                                                pixel_stride=ev["pixel_stride"],
                                                desc="prior test (detector)")
        from facesegment.faces.aligned import aligned_counts

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
    label polygons, :mod:`facesegment.faces.renderer`; nothing trained) on the test
    crops and, with ``detector_protocol``, on the detector-aligned faces (the
    landmarks predicted on the re-cropped faces); the landmarks are cached in
    ``data/landmarks/RUN/``."""
    from facesegment.faces.renderer import evaluate_renderer, landmark_table

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


def aligned_test(ctx):
    """The test faces re-cropped by `segment`'s rule (facesegment.faces.aligned) with the
    prior's crop rule (the one every model of the run carries), their label maps
    made as ``[evaluate] aligned_labels`` says, cached in ``data/aligned/RUN/test``:
    the detector-aligned protocol's records."""
    from facesegment.faces.aligned import realign_records

    if "aligned" not in ctx.cache:
        path = prior_path(ctx)
        rule = load_prior(path).crop_rule if path.exists() else None
        ctx.cache["aligned"] = realign_records(
            ctx.splits()["test"], ctx.root / "data" / "aligned" / ctx.run / "test",
            workers=ctx.workers, crop_rule=rule,
            labels=ctx.cfg["evaluate"]["aligned_labels"])
    return ctx.cache["aligned"]


def prior_rules(model):
    """``[(alpha, beta)]``: the model's decision rule with its position prior, for
    ``evaluate(..., extra_rules=...)`` (scored from the same pass as the forest
    alone); None for a model without a prior or with beta 0."""
    from facesegment.dense import default_alpha, default_beta

    beta = default_beta(model)
    return [(default_alpha(model), beta)] if beta > 0 else None


def with_prior(result, keys=("trees", "per_image", "n_pixels")):
    """The scores with the prior that ``evaluate(..., extra_rules=prior_rules(model))``
    returned beside the forest alone's (removed from ``result``): ``{"alpha",
    "beta", *keys}``, or None when no prior rule was scored."""
    extra = result.pop("extra_rules", None)
    if not extra:
        return None
    return {"alpha": extra[0]["alpha"], "beta": extra[0]["beta"],
            **{k: extra[0][k] for k in keys}}


def detector_scores(ctx, kind, model, alpha, smoothed=None):
    """Scores on the detector-aligned test faces: the forest alone at ``alpha`` and,
    when the model has a prior, at its chosen ``(alpha, beta)`` (one pass over the
    faces for both, and for ``smoothed``: see ``evaluate``); None when
    ``[evaluate] detector_protocol`` is off."""
    from facesegment.faces.aligned import aligned_counts

    cfg, ev = ctx.cfg, ctx.cfg["evaluate"]
    if not ev["detector_protocol"]:
        return None
    recs = aligned_test(ctx)
    found, missed = aligned_counts(recs)
    r = evaluation.evaluate(model, recs, alphas=[alpha], beta=0.0,
                            extra_rules=prior_rules(model),
                            tree_counts=cfg["forest"]["eval_trees"],
                            pixel_stride=ev["pixel_stride"], mode=ev["mode"],
                            workers=ctx.workers, scheduler=ctx.scheduler,
                            fft_levels=ev["fft_levels"], smoothed=smoothed,
                            desc=f"evaluate {kind} (detector)")
    out = {"n_found": found, "n_missed": missed, "alpha": alpha, "trees": r["trees"],
           "n_pixels": r["n_pixels"], "with_prior": with_prior(r, keys=("trees",))}
    if smoothed is not None:
        out["smoothed"] = r["smoothed"]
    return out
