"""Choosing a model's decision rule on validation images: :func:`choose_rule`.

The rule (:class:`facesegment.rule.DecisionRule`: the prior-reweighting
exponent alpha, the position prior's beta, the smoothing sigma) is chosen
term by term on labelled faces that were not used to train the forest:

1. alpha and beta together: every alpha of ``alphas`` with every beta of
   ``{0} | betas`` (betas only for a model with a position prior) is scored from
   one dense pass per face (:func:`facesegment.evaluation.scoring.choose_alpha`:
   the forest's sums are formed once, each (beta, alpha) applied to them); the
   best class-average
   Jaccard wins (ties: the smaller beta, then the smaller alpha).  The beta = 0
   pass is the forest alone: its best alpha is recorded too.
2. sigma, at that (alpha, beta): the maps of every face are predicted once and
   blurred with each sigma of ``{0} | sigmas``
   (:func:`facesegment.evaluation.maps.evaluate_smoothed`); ties: the smaller sigma.

A term with a single candidate is taken as given, without scoring.  The
pipeline (``make all``), ``facesegment train`` and ``facesegment calibrate``
all choose rules with this function.  A new term of the rule adds its step here.
"""

from ..data.datasets import find_faces
from ..data.splits import split_dataset
from ..reweight import check_alpha
from ..rule import DecisionRule
from .maps import evaluate_smoothed
from .scoring import choose_alpha

#: The alphas tried by default (the pipeline's ``[select] alphas``).
DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)

__all__ = ["choose_rule", "held_out_records", "DEFAULT_ALPHAS"]


def _sorted_with_zero(values, name):
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of numbers, got {values!r}")
    return [0.0] + sorted({check_alpha(v, name) for v in values} - {0.0})


def choose_rule(model, records, *, alphas=DEFAULT_ALPHAS, betas=None, sigmas=None,
                n_trees=None, mode="strict", pixel_stride=1, workers=None, scheduler=None,
                desc="rule", progress=True):
    """The decision rule that scores best on ``records`` (labelled validation faces).

    Parameters
    ----------
    model : Model or Cascade
    records : list of facesegment.data.datasets.FaceRecord
        Labelled faces the forest was not trained on.
    alphas : list of float
        Prior-reweighting exponents tried (one value: taken as given).
    betas : list of float, optional
        Position-prior exponents tried besides 0 (the forest alone); None or
        empty: beta = 0.  Needs ``model.position``.
    sigmas : list of float, optional
        Smoothing sigmas (pixels) tried besides 0 (none); None or empty: 0.
    n_trees, mode, pixel_stride, workers, scheduler, desc, progress
        As :func:`facesegment.evaluation.scoring.evaluate` (``n_trees``: score the
        first trees only; default all).

    Returns
    -------
    rule : DecisionRule
    record : dict (JSON-ready)
        ``alpha``, ``beta``, ``sigma``, ``n_images``; when alpha was scored,
        ``n_trees``, ``validation_jaccard`` (``{repr(alpha): Jaccard}`` at the
        chosen beta) and ``forest_alone`` (the beta = 0 pass: ``{alpha, beta,
        n_images, n_trees, validation_jaccard}``); with betas also
        ``alpha_no_prior`` and ``position_selection`` (``{betas: {repr(beta):
        {repr(alpha): Jaccard}}, n_images, n_trees}``); with sigmas
        ``sigma_selection`` (``{alpha, beta, n_images, validation_jaccard:
        {repr(sigma): Jaccard}}``).
    """
    records = list(records)
    if not records:
        raise ValueError("records is empty: give at least one labelled validation face")
    alphas = list(alphas) if hasattr(alphas, "__iter__") and not isinstance(
        alphas, (str, bytes)) else alphas
    if not isinstance(alphas, list) or not alphas:
        raise ValueError(f"alphas must be a non-empty list of numbers, got {alphas!r}")
    betas = [] if not betas else _sorted_with_zero(betas, "betas")
    sigmas = [] if not sigmas else _sorted_with_zero(sigmas, "sigmas")
    if betas and getattr(model, "position", None) is None:
        raise ValueError("betas need a model with a position prior (model.position is None): "
                         "give betas=None, or attach the prior first")
    kw = dict(mode=mode, pixel_stride=pixel_stride, workers=workers, scheduler=scheduler,
              progress=progress)
    record = {"n_images": len(records)}
    if len(alphas) == 1 and not betas:
        alpha, beta = DecisionRule(alpha=alphas[0]).alpha, 0.0
    else:
        rec = choose_alpha(model, records, alphas, betas=betas or None, n_trees=n_trees,
                           desc=f"{desc}: alpha" + ("/beta" if betas else ""), **kw)
        alpha, beta = rec["alpha"], rec["beta"]
        tables = rec.get("validation_jaccard_beta") or {repr(rec["beta"]):
                                                        rec["validation_jaccard"]}
        zero = tables[repr(0.0)]
        alpha0 = float(max(zero, key=lambda a: (-1.0 if zero[a] is None else zero[a],
                                                -float(a))))
        record |= {"n_trees": rec["n_trees"], "validation_jaccard": rec["validation_jaccard"],
                   "forest_alone": {"alpha": alpha0, "beta": 0.0,
                                    "n_images": rec["n_images"], "n_trees": rec["n_trees"],
                                    "validation_jaccard": zero}}
        if betas:
            record |= {"alpha_no_prior": alpha0,
                       "position_selection": {"betas": tables, "n_images": rec["n_images"],
                                              "n_trees": rec["n_trees"]}}
    sigma = 0.0
    if sigmas:
        r = evaluate_smoothed(model, records, alpha=alpha, beta=beta, sigmas=sigmas,
                              desc=f"{desc}: sigma", **kw)
        table = {k: v["mean_jaccard"] for k, v in r["sigma"].items()}
        best = max(table, key=lambda k: (-1.0 if table[k] is None else table[k], -float(k)))
        sigma = float(best)
        record["sigma_selection"] = {"alpha": alpha, "beta": beta, "n_images": len(records),
                                     "validation_jaccard": table}
    record |= {"alpha": float(alpha), "beta": float(beta), "sigma": sigma}
    return DecisionRule(alpha=alpha, beta=beta, sigma=sigma), record


def held_out_records(meta, data=None, labels=None, n_images=20, seed=0, excluded=()):
    """Labelled faces to choose a rule for a model trained on the windows ``meta``.

    None of them is a source of its windows.  With ``data``: the labelled faces
    under that folder.  Otherwise every training image of the folder the
    windows were extracted from (recorded in the windows file; the split of
    :func:`facesegment.data.splits.split_dataset`, test images never).  Either
    way faces whose names are among the windows' sources are dropped, then
    ``n_images`` are drawn with ``seed``.  Names are compared as the windows
    file records them (relative to the folder it was extracted from, without
    extension).

    Parameters
    ----------
    meta : facesegment.data.windows.WindowsMeta
        The training windows' metadata (``sources``, ``attrs``).
    data : path, optional
        A folder of labelled faces to draw from.
    labels : path, optional
        Folder of their label maps (as for ``find_faces``), with ``data``.
    n_images : int
        Faces drawn; 0 (or at least as many as there are): all.
    seed : int
        Seeds the draw.
    excluded : iterable of str
        Names of sources whose windows were left out of training
        (``facesegment train --exclude-images``): they count as held out.

    Returns
    -------
    records : list of FaceRecord
        Empty when no face is held out.
    note : str
        Where they came from, or why there are none.
    """
    import numpy as np

    used = {str(s) for s in meta.sources} - set(excluded)
    if data is not None:
        recs = [r for r in find_faces(data, labels=labels) if r.label is not None]
        where = str(data)
    else:
        root = (meta.attrs or {}).get("data_root") or ""
        lab = (meta.attrs or {}).get("labels_root") or None
        if not root:
            return [], "the windows file records no data folder"
        from pathlib import Path

        if not Path(root).is_dir():
            return [], f"the windows' data folder {root} is not there"
        # every training image (test images never: the dataset's test/ folder, or the
        # seed-0 by-person test split); those that gave no windows are held out
        try:
            sp = split_dataset(root, lab, n_validation=0, require_labels=False)
        except ValueError as exc:      # DataError too: a folder that cannot be split
            return [], f"the windows' data folder {root} cannot be split ({exc})"
        recs = [r for r in sp.train if r.label is not None]
        where = f"the training images of {root}"
    n_all = len(recs)
    recs = [r for r in recs if r.name not in used]
    if not recs:
        return [], (f"{where}: all {n_all} labelled faces were used for the windows"
                    if n_all else f"{where}: no labelled faces")
    if n_images and n_images < len(recs):
        pick = np.random.default_rng(seed).choice(len(recs), size=n_images, replace=False)
        recs = [recs[i] for i in sorted(pick)]
    return recs, f"{len(recs)} of {where} (held out of the windows)"
