"""The decision rule of every model folder the pipeline writes, chosen by the library.

The train stages of the forests (:mod:`pipelines.model_stages`) and of the
cascades (:mod:`pipelines.cascades`) call :func:`calibrate`, which hands the
run's validation images and its ``[select]``, ``[position]`` and ``[smoothing]``
candidates to :func:`facesegment.evaluation.calibrate.choose_rule` (the one function that
chooses alpha, beta and sigma, as ``facesegment train --calibrate`` does) and
stores the rule in the model (``model.rule``); the metrics it returns record
the choice in ``train-<kind>.json`` and the model folder.
"""

from facesegment.evaluation.calibrate import choose_rule
from facesegment.rule import DecisionRule

from .common import final_alpha_wanted, validation_records
from .prior import load_prior, prior_path
from .smoothing import sigmas_for


def calibrate(ctx, kind, model, alpha_sel):
    """Choose the decision rule of every model folder of ``kind`` (forests and
    cascades): set ``model.rule`` and return the metrics that record the choice.

    The rule is chosen by the library (:func:`facesegment.evaluation.calibrate.choose_rule`)
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
    cfg = ctx.cfg
    records = validation_records(ctx)
    final_wanted = bool(records) and final_alpha_wanted(cfg)
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
