"""Auto-context cascade variants on faces300w ("coherent maps").

What it measures
----------------
Each variant re-trains the context stage(s) of the run's auto-context cascade
``two-probe > axis`` (models/faces300w-default/ac-two-probe_axis-32) with the
run's own inputs: stage 1 is the run's two-probe forest (two-probe-32, not
refitted), the windows file the run used (data/windows/faces300w-default/
train.h5: 128000 windows of 1107 training images), the run's estimator
settings (chosen.json through pipelines.selection.estimator_params and
pipelines.backend.make_estimator, as pipelines/cascades.py ``train`` does),
the same 4 image folds and 8-tree fold forests for the out-of-fold maps, and
the same seeds (stage ``s``: ``seed + 1000 s``; fold forest ``f``:
``seed + 1000 s + 17 (f + 1)``; facesegment.autocontext.cascade_fit).  Variants:

* ``A``  baseline: stage 2 exactly as the pipeline trains it;
* ``B``  + the 8 class frequencies of the position prior at the pixel
  (uint8 x 255, resized to the crop as facesegment.position does) as 8 more
  context values (training rows and test time);
* ``C``  3 stages (two-probe > axis > axis): stage 3's training context from
  out-of-fold stage-2 maps (fold forests whose own context came from the
  out-of-fold stage-1 maps);
* ``D``  context computed from stage 1's "forest x prior" maps
  ``p s^-a (pos/pi)^b`` renormalised (a, b: the run's choice for two-probe x
  prior, models/faces300w-default/two-probe-32/model.json) instead of ``p``;
* ``BD``, ``BC``, ``DC``, ``BDC``: combinations; ``DCC``: D with 4 stages;
  ``Q7``, ``DQ7``, ``DCQ7``: A, D, DC with q = "p^0.7" for the context
  stages (the run chose p^0.6; both computed for 2883 features, as the
  pipeline does); ``F32``, ``DF32``: A, D with 32-tree fold forests (the
  out-of-fold maps as good as the 32-tree stage 1 of test time; their own
  stage-1 maps, about 25 minutes to make); ``A1``, ``A2``: A with another
  stage-2 forest seed, ``DCQ7s1``: DCQ7 with other stage-2 and stage-3
  forest seeds (the noise of one refit; fold forests unchanged).

The context geometry, folds and fold trees are read from the run's
config.json ``[cascade]``; the variants add the prior planes and the
decision maps themselves (byte-identical to what facesegment.autocontext.context's
``ContextSpec(prior=True, stage1_alpha=, stage1_beta=)`` later made of them),
so the run's newer cascade settings do not change them.

For each: alpha and beta (position-prior exponent, 0 = none) chosen together on
the run's validation images (facesegment.evaluation.scoring.choose_alpha, the grids of
facesegment.evaluation.calibrate.choose_rule: alpha, beta in {0, .25, .5, .75, 1}), then
all 250 test images scored with the pipeline's protocol (strict mode, pixel
stride 3; facesegment.evaluation.scoring.evaluate) alone (beta 0, the alpha best on
validation at beta 0) and with the prior (the chosen pair), per-class Jaccard,
stage fit seconds and the share of the context stages' splits on context
features.

Outputs: reports/cascade/variants.json, reports/cascade/variants.md, one
reports/cascade/variant-<name>.json per finished variant (reused on a rerun:
the study resumes), and caches under reports/cascade/cache/ (git-ignored):
stage-1 out-of-fold maps (one uint8 npz per training image; about 7 minutes
to make) and the out-of-fold stage-2 maps of 3-stage variants.

Rerun (from the repository root; about 4 minutes a 2-stage variant and 8 a
3-stage one on 2 cores, plus 7 for the stage-1 maps once)::

    .venv/bin/python -m studies.cascade_variants --variants A,B,D,C
    .venv/bin/python -m studies.cascade_variants --variants A,B --val-images 20
    .venv/bin/python -m studies.cascade_variants --report   # tables only

(``--val-images 20`` uses the pipeline's 20-image validation draw; the
default is all 100 validation images; a finished variant is reused only with
the same number.  ``--force`` refits finished variants.)
"""

import argparse
import json
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.autocontext.cascade import Cascade
from facesegment.autocontext.context import ContextSpec, context_planes
from facesegment.progress import Progress

RUN = "faces300w-default"
REPORTS = ROOT / "reports" / "runs" / RUN
MODELS = ROOT / "models" / RUN
OUT = ROOT / "reports" / "cascade"
CACHE = OUT / "cache"
GRID = (0.0, 0.25, 0.5, 0.75, 1.0)   # alphas and betas
N_TREES = 32


# ------------------------------------------------------------------ variants

@dataclass(frozen=True)
class Variant:
    name: str
    label: str
    n_stages: int = 2
    prior_planes: bool = False     # B: + 8 position-prior planes
    prior_context: bool = False    # D: context from forest x prior maps
    q: str = None                  # stage >= 2 features per node (None: chosen.json)
    seed_shift: int = 0            # added to the context stages' forest seeds
    fold_trees: int = None         # trees of the fold forests (None: the run's, 8)

    def key(self):
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "label"
                and not (f.name == "fold_trees" and self.fold_trees is None)}


VARIANTS = {v.name: v for v in [
    Variant("A", "baseline (pipeline's stage 2)"),
    Variant("B", "+ position-prior planes", prior_planes=True),
    Variant("C", "3 stages", n_stages=3),
    Variant("D", "context from forest × prior", prior_context=True),
    Variant("BD", "B + D", prior_planes=True, prior_context=True),
    Variant("BC", "B + C", n_stages=3, prior_planes=True),
    Variant("DC", "D + C", n_stages=3, prior_context=True),
    Variant("BDC", "B + D + C", n_stages=3, prior_planes=True, prior_context=True),
    Variant("Q7", "A with q = p^0.7", q="p^0.7"),
    Variant("A1", "A, stage-2 seed + 1", seed_shift=1),
    Variant("A2", "A, stage-2 seed + 2", seed_shift=2),
    Variant("DQ7", "D with q = p^0.7", prior_context=True, q="p^0.7"),
    Variant("F32", "A with 32-tree fold forests", fold_trees=32),
    Variant("DF32", "D with 32-tree fold forests", prior_context=True, fold_trees=32),
    Variant("DCC", "D + 4 stages", n_stages=4, prior_context=True),
    Variant("DCQ7", "D + C with q = p^0.7", n_stages=3, prior_context=True, q="p^0.7"),
    Variant("DCQ7s1", "DCQ7, seeds + 1", n_stages=3, prior_context=True, q="p^0.7",
            seed_shift=1),
]}


@dataclass(frozen=True)
class PriorPlanesSpec(ContextSpec):
    """The run's context spec plus ``extra`` position-prior planes (variant B)."""

    extra: int = 8

    @property
    def n_planes(self):
        return super().n_planes + self.extra

    def plane_names(self):
        return super().plane_names() + tuple(f"prior:p{k}" for k in range(self.extra))

    def base(self):
        return ContextSpec(self.n_classes, self.directions, self.radii, self.boxes,
                           self.position)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------- setup

class Setup:
    """The run's inputs, loaded once: config, windows, splits, stage 1, prior."""

    def __init__(self, n_val):
        from pipelines import backend
        from pipelines.common import subset
        from pipelines.prior import load_prior

        self.cfg = json.loads((REPORTS / "config.json").read_text())
        self.chosen = json.loads((REPORTS / "chosen.json").read_text())
        self.seed = self.cfg["run"]["seed"]
        splits = json.loads((REPORTS / "splits.json").read_text())
        rec = {k: backend.records_from_json(splits[k]) for k in ("train", "validation", "test")}
        self.by_name = {r.name: r for r in rec["train"]}
        self.val = subset(rec["validation"], n_val, self.seed + 2)
        self.test = rec["test"]
        self.first = backend.load_model(MODELS / f"two-probe-{N_TREES}")
        self.prior = load_prior(MODELS / "position-prior.npz")
        self.spec = run_spec(self.cfg["cascade"])
        self.windows = ROOT / "data" / "windows" / RUN / "train.h5"
        log(f"loading {self.windows.relative_to(ROOT)}")
        self.ws = backend.read_windows(self.windows)
        self._finish()

    def _finish(self):
        from facesegment.autocontext.cascade_fit import fold_of_images

        ws, c = self.ws, self.cfg["cascade"]
        self.n_folds, self.fold_trees = c["n_folds"], c["fold_trees"]
        self.fold = fold_of_images(ws.image_index, self.n_folds, self.seed)
        self.images = np.unique(ws.image_index)
        self.X1 = ws.X.reshape(len(ws.y), -1)
        m = self.first.metrics
        self.d_alpha, self.d_beta = float(m["alpha"]), float(m["beta"])
        self._prior_u8 = {}
        self.maps1 = {}    # fold trees -> stage-1 out-of-fold maps (stage1_maps)

    def load_image(self, src):
        from facesegment.data.imageio import read_image

        return read_image(self.by_name[src].image)

    def maker(self, kind, trees, q=None):
        """``seed -> unfitted estimator`` as pipelines/cascades.py ``train`` makes it."""
        from pipelines import backend, selection
        from pipelines.common import setting_of

        setting = setting_of(self.chosen[kind]) | ({"q": q} if q else {})
        params = selection.estimator_params(self.cfg, kind, setting, self.ws.meta.layout)
        params["max_samples"] = min(params.get("max_samples", len(self.ws.y)), len(self.ws.y))
        return lambda s: backend.make_estimator(kind, params, trees, s, None, None)

    def prior_u8(self, shape):
        """The prior's class frequencies on a crop of ``shape``: uint8 (H, W, C)."""
        from facesegment.position import position_factor

        if shape not in self._prior_u8:
            pi = np.maximum(self.prior.class_prior, 1e-12).astype(np.float32)
            freq = position_factor(self.prior, shape) * pi
            self._prior_u8[shape] = _u8(freq / freq.sum(axis=-1, keepdims=True))
        return self._prior_u8[shape]


def run_spec(c):
    """The context spec the run's cascade was trained with (its config.json; raw maps,
    no prior planes: this script adds those itself, see :func:`planes_for`)."""
    return ContextSpec(n_classes=8, directions=c["directions"], radii=tuple(c["radii"]),
                       boxes=tuple(c["boxes"]), position=c["position"])


def _u8(p):
    return np.clip(np.rint(np.asarray(p, np.float32) * 255.0), 0, 255).astype(np.uint8)


def spec_of_variant(setup, v):
    if not v.prior_planes:
        return setup.spec
    s = setup.spec
    return PriorPlanesSpec(s.n_classes, s.directions, s.radii, s.boxes, s.position, extra=8)


# ------------------------------------------------------------ context planes

def prior_times(setup, maps):
    """Variant D: ``p s^-a (pos/pi)^b`` renormalised, from uint8 maps: float32."""
    from facesegment.reweight import class_scale
    from facesegment.position import position_scales

    h, w, c = maps.shape
    ys, xs = np.divmod(np.arange(h * w), w)
    scale = position_scales(setup.prior, (h, w), ys, xs,
                            class_scale(np.asarray(setup.first.sampling_factors, np.float64),
                                        setup.d_alpha), setup.d_beta)
    out = maps.reshape(-1, c).astype(np.float64) / 255.0 * scale
    total = out.sum(axis=1, keepdims=True)
    out = np.where(total > 0, out / np.where(total > 0, total, 1.0), 0.0)
    return out.astype(np.float32).reshape(h, w, c)


def planes_for(setup, v, maps, stage):
    """The context planes stage ``stage`` (>= 2) reads, from stage ``stage - 1``'s
    uint8 maps of one image (the same function at training and at test time)."""
    p = prior_times(setup, maps) if v.prior_context and stage == 2 else maps / np.float32(255)
    planes = context_planes(p, setup.spec)
    if v.prior_planes:
        planes = np.concatenate([planes, setup.prior_u8(maps.shape[:2])], axis=2)
    return planes


class VariantCascade(Cascade):
    """A cascade whose context planes come from :func:`planes_for`."""

    def __init__(self, stages, spec, setup, variant):
        super().__init__(stages, spec, {"variant": variant.name})
        object.__setattr__(self, "setup", setup)
        object.__setattr__(self, "variant", variant)

    def context(self, image, n_stages=None):
        from facesegment.dense import predict_proba_raw

        n = len(self.stages) if n_stages is None else int(n_stages)
        planes = None
        for k, stage in enumerate(self.stages[:n - 1], 1):
            raw = predict_proba_raw(stage, image, mode="full", planes=planes)
            planes = planes_for(self.setup, self.variant, _u8(raw), k + 1)
        return planes


# ---------------------------------------------------------- out-of-fold maps

def _rows_by_image(setup):
    from facesegment.autocontext.cascade_fit import rows_of_images

    return rows_of_images(setup.ws.image_index)


def context_rows(setup, v, maps, stage):
    """Context values at every window's centre: uint8 (n, K)."""
    ws, rows = setup.ws, _rows_by_image(setup)
    out = None
    with Progress(len(setup.images), f"{v.name}: stage {stage} context rows", "images") as bar:
        for img in setup.images:
            planes = planes_for(setup, v, maps[int(img)], stage)
            if out is None:
                out = np.empty((len(ws.y), planes.shape[2]), np.uint8)
            sel = rows[int(img)]
            c = ws.centers[sel]
            out[sel] = planes[c[:, 0], c[:, 1]]
            bar.update(1)
    return out


def oof_maps(setup, v, stage, rows, make, prev, folder):
    """``{image: uint8 (H, W, C)}``: stage ``stage``'s out-of-fold maps of every
    training image (fold forest seeds as facesegment.autocontext.cascade_fit), cached one npz
    per image in ``folder``; a fold whose images are all cached is not refitted."""
    from facesegment.autocontext.cascade_fit import fit_timed, stage_model
    from facesegment.dense import predict_proba_raw

    ws, spec = setup.ws, spec_of_variant(setup, v)
    folder.mkdir(parents=True, exist_ok=True)
    img_fold = {i: int(setup.fold[r[0]]) for i, r in _rows_by_image(setup).items()}
    maps, t0 = {}, time.perf_counter()
    with Progress(len(setup.images), f"stage {stage} out-of-fold maps", "images") as bar:
        for f in range(setup.n_folds):
            todo = [int(i) for i in setup.images if img_fold[int(i)] == f]
            names = {i: folder / f"{ws.meta.sources[i]}.npz" for i in todo}
            if all(p.exists() for p in names.values()):
                for i in todo:
                    maps[i] = np.load(names[i])["maps"]
                bar.update(len(todo))
                continue
            keep = setup.fold != f
            est = make(setup.seed + 1000 * stage + 17 * (f + 1))
            fit_timed(est, rows[keep], setup.ws.y[keep], ws.meta)
            model = stage_model(est, est_kind(stage), ws.meta, stage, spec)
            for i in todo:
                image = setup.load_image(ws.meta.sources[i])
                planes = None if prev is None else planes_for(setup, v, prev[i], stage)
                maps[i] = _u8(predict_proba_raw(model, image, mode="full", planes=planes))
                np.savez_compressed(names[i], maps=maps[i])
                bar.update(1)
    log(f"stage {stage} out-of-fold maps: {time.perf_counter() - t0:.0f} s")
    return maps


def est_kind(stage):
    return "two-probe" if stage == 1 else "axis"


def fold_trees(setup, v):
    return v.fold_trees or setup.fold_trees


def stage1_maps(setup, v):
    """Stage 1's out-of-fold maps (shared by the variants with the same fold forests)."""
    n, memo = fold_trees(setup, v), setup.maps1
    if n not in memo:
        memo.clear()   # one set in memory at a time
        make = setup.maker("two-probe", n)
        folder = CACHE / ("oof-stage1" if n == setup.fold_trees else f"oof-stage1-t{n}")
        memo[n] = oof_maps(setup, VARIANTS["A"], 1, setup.X1, make, None, folder)
    return memo[n]


# ------------------------------------------------------------------- fitting

def fit_variant(setup, v, maps1):
    """The variant's cascade and its stages' fit seconds."""
    from facesegment.autocontext.cascade_fit import fit_timed, stage_model

    spec, stages, seconds, prev = spec_of_variant(setup, v), [setup.first], {}, maps1
    for s in range(2, v.n_stages + 1):
        rows = np.concatenate([setup.X1, context_rows(setup, v, prev, s)], axis=1)
        est = setup.maker("axis", N_TREES, v.q)(setup.seed + 1000 * s + v.seed_shift)
        log(f"{v.name}: fitting stage {s} on {rows.shape[0]} rows x {rows.shape[1]} features")
        seconds[f"stage{s}"] = round(fit_timed(est, rows, setup.ws.y, setup.ws.meta), 2)
        stages.append(stage_model(est, "axis", setup.ws.meta, s, spec))
        log(f"{v.name}: stage {s} fit {seconds[f'stage{s}']:.1f} s")
        if s < v.n_stages:
            folder = CACHE / f"oof-stage{s}-{v.name}"
            _check_cache_key(folder, v)
            prev = oof_maps(setup, v, s, rows, setup.maker("axis", fold_trees(setup, v), v.q),
                            prev, folder)
        del rows
    return VariantCascade(stages, spec, setup, v), seconds


def _check_cache_key(folder, v):
    """Refuse a cache folder made by another definition of the variant."""
    key = folder / "variant.json"
    folder.mkdir(parents=True, exist_ok=True)
    if key.exists() and json.loads(key.read_text()) != v.key():
        raise SystemExit(f"{folder} was made by another definition of variant {v.name}: "
                         "delete it")
    key.write_text(json.dumps(v.key()))


# ------------------------------------------------------------------- scoring

def choose(setup, model, name):
    from facesegment.evaluation.scoring import choose_alpha

    model.position = setup.prior
    rec = choose_alpha(model, setup.val, list(GRID), betas=list(GRID), mode="strict",
                       pixel_stride=setup.cfg["select"]["pixel_stride"],
                       desc=f"{name}: validation alpha/beta")
    zero = rec["validation_jaccard_beta"][repr(0.0)]
    a0 = float(max(zero, key=lambda a: (zero[a], -float(a))))
    return {"alpha": rec["alpha"], "beta": rec["beta"], "alpha_no_prior": a0,
            "val": rec["validation_jaccard"][repr(rec["alpha"])], "val_alone": zero[repr(a0)],
            "val_tables": rec["validation_jaccard_beta"], "n_val": rec["n_images"]}


def score_test(setup, model, beta, name):
    """Test scores at every alpha for one beta: ``{repr(alpha): summary}``."""
    from facesegment.evaluation.scoring import evaluate

    ev = setup.cfg["evaluate"]
    r = evaluate(model, setup.test, alphas=list(GRID), tree_counts=[N_TREES], mode=ev["mode"],
                 pixel_stride=ev["pixel_stride"], beta=beta, desc=f"{name}: test beta={beta:g}")
    return {a: {"mean": s["mean_jaccard"], "per_class": s["jaccard"]}
            for a, s in r["trees"][str(N_TREES)]["alpha"].items()}


def test_scores(setup, model, sel, name):
    betas = sorted({0.0, sel["beta"]} | ({0.75} if name == "A" else set()))
    return {repr(b): score_test(setup, model, b, name) for b in betas}


# -------------------------------------------------------------------- splits

def split_shares(model, image_channels):
    """Per context stage: share of splits on context features, overall and by group."""
    out = {}
    for k, st in enumerate(model.stages[1:], 2):
        f = st.arrays.feature[st.arrays.feature >= 0].astype(np.int64)
        plane = f % st.layout.channels - image_channels
        ctx = plane[plane >= 0]
        groups = _groups(model.spec, model.variant)
        counts = {g: int(np.isin(ctx, idx).sum()) for g, idx in groups.items()}
        out[f"stage{k}"] = {"n_splits": int(len(f)), "context_share": round(len(ctx) / len(f), 4),
                            "by_group": {g: round(c / len(f), 4) for g, c in counts.items()}}
    return out


def _groups(spec, v):
    """Plane indices of the context groups (pixel, each ray radius, boxes, position, prior)."""
    c, d = spec.n_classes, spec.directions
    g, k = {"pixel": np.arange(c)}, c
    for r in spec.radii:
        g[f"ray{r}"] = np.arange(k, k + c * d)
        k += c * d
    g["boxes"] = np.arange(k, k + c * len(spec.boxes))
    k += c * len(spec.boxes)
    if spec.position:
        g["rowcol"] = np.arange(k, k + 2)
        k += 2
    if v.prior_planes:
        g["prior"] = np.arange(k, k + 8)
    return g


# ------------------------------------------------------------------- driver

def run_variant(setup, v, maps1):
    model, seconds = fit_variant(setup, v, maps1)
    sel = choose(setup, model, v.name)
    log(f"{v.name}: validation {sel['val']:.2f} at alpha {sel['alpha']:g}, beta "
        f"{sel['beta']:g} (alone {sel['val_alone']:.2f} at alpha {sel['alpha_no_prior']:g})")
    test = test_scores(setup, model, sel, v.name)
    alone = test[repr(0.0)][repr(sel["alpha_no_prior"])]
    prior = test[repr(sel["beta"])][repr(sel["alpha"])]
    res = {"variant": v.key(), "label": v.label, "fit_seconds": seconds, **sel,
           "test_alone": alone, "test_prior": prior, "test_tables": test,
           "splits": split_shares(model, setup.first.layout.channels),
           "test_images": len(setup.test), "pixel_stride": setup.cfg["evaluate"]["pixel_stride"],
           "mode": setup.cfg["evaluate"]["mode"]}
    if v.name == "A":
        res["same_stage2_as_pipeline"] = same_as_pipeline(model)
    log(f"{v.name}: test alone {alone['mean']:.2f}, x prior {prior['mean']:.2f}")
    return res


def same_as_pipeline(model):
    """Is A's stage 2 node for node the run's (models/RUN/ac-two-probe_axis-32; True when
    the run's cascade is the raw-map one of commit 9062a80, False once retrained)?"""
    from facesegment.models import load_model

    ref = load_model(MODELS / f"ac-two-probe_axis-{N_TREES}").final.arrays
    a = model.final.arrays
    return bool(a.n_nodes == ref.n_nodes and np.array_equal(a.feature, ref.feature)
                and np.array_equal(a.threshold, ref.threshold))


def variant_path(name):
    return OUT / f"variant-{name}.json"


def finished(v, n_val):
    p = variant_path(v.name)
    if not p.exists():
        return None
    r = json.loads(p.read_text())
    return r if r["variant"] == v.key() and r["n_val"] == n_val else None


def main(argv=None):
    args = parse(argv)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    bad = [n for n in names if n not in VARIANTS]
    if bad:
        raise SystemExit(f"unknown variants {bad}; known: {', '.join(VARIANTS)}")
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.report:
        run_all(names, args)
    write_reports()


def run_all(names, args):
    n_val = args.val_images or 100
    todo = [n for n in names if args.force or not finished(VARIANTS[n], n_val)]
    log(f"variants to run: {todo or 'none'} ({len(names) - len(todo)} reused)")
    if not todo:
        return
    setup = Setup(args.val_images)
    with Progress(len(todo), "variants", "variants", log_interval=0) as bar:
        for n in todo:
            res = run_variant(setup, VARIANTS[n], stage1_maps(setup, VARIANTS[n]))
            variant_path(n).write_text(json.dumps(res, indent=1, sort_keys=True))
            write_reports()
            bar.update(1, n)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", default="A,B,D,C",
                   help=f"comma-separated, of {', '.join(VARIANTS)} (default A,B,D,C)")
    p.add_argument("--val-images", type=int, default=0,
                   help="validation images (the pipeline's seeded draw; 0 = all 100)")
    p.add_argument("--force", action="store_true", help="refit finished variants")
    p.add_argument("--report", action="store_true", help="only rewrite the tables")
    return p.parse_args(argv)


# ------------------------------------------------------------------ reports

def write_reports():
    done = [json.loads(variant_path(n).read_text()) for n in VARIANTS
            if variant_path(n).exists()]
    if not done:
        return
    (OUT / "variants.json").write_text(json.dumps(
        {r["variant"]["name"]: r for r in done}, indent=1, sort_keys=True))
    (OUT / "variants.md").write_text("\n".join(markdown(done)) + "\n")


#: The run's two-probe>axis cascade as the study started (its raw-map context, α and β
#: chosen on 20 validation images; reports/runs/faces300w-default/
#: eval-ac-two-probe_axis.json at commit 9062a80; the run has since been retrained).
PIPELINE = {"alone": 47.5942, "alpha": 0.5, "prior": 53.9079, "prior_alpha": 1.0,
            "prior_beta": 0.75}


def _pipeline_numbers():
    p = PIPELINE
    return p["alone"], p["alpha"], p["prior"], p["prior_alpha"], p["prior_beta"]


def markdown(done):
    from facesegment.classes import CLASS_NAMES

    base = next((r for r in done if r["variant"]["name"] == "A"), None)
    L = ["# Auto-context cascade variants", "",
         f"Stage 1: the run's two-probe-32; context stages: axis-aligned, {N_TREES} trees. "
         f"α, β chosen on {done[0]['n_val']} validation images; test: "
         f"{done[0]['test_images']} images, {done[0]['mode']} mode, pixel stride "
         f"{done[0]['pixel_stride']}. Class-average Jaccard (%); per class: test × prior. "
         "Δ: test × prior minus variant A's. Generated by studies/cascade_variants.py.", "",
         "| variant | val alone (α) | val × prior (α, β) | test alone (α) | test × prior | "
         "Δ vs A | " + " | ".join(CLASS_NAMES) + " | fit s | context splits |",
         "| --- | ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in CLASS_NAMES)
         + " | ---: | ---: |"]
    L += [_row(r, base) for r in done]
    L += [""] + _notes(done, base) + [""] + _split_table(done)
    return L


def _notes(done, base):
    pa, aa, pp, ap, bp = _pipeline_numbers()
    L = [f"The pipeline's cascade (α, β chosen on 20 validation images): test alone "
         f"{pa:.2f} (α {aa:g}), × prior {pp:.2f} (α {ap:g}, β {bp:g})."]
    if base:
        t = base["test_tables"].get(repr(0.75), {}).get(repr(1.0))
        a5 = base["test_tables"][repr(0.0)][repr(0.5)]["mean"]
        L.append(f"Variant A at the pipeline's choices: alone {a5:.2f} (α 0.5)"
                 + (f", × prior {t['mean']:.2f} (α 1, β 0.75)" if t else "") +
                 f"; A's stage 2 is node for node the pipeline's: "
                 f"{base.get('same_stage2_as_pipeline')}.")
    for names in (("A", "A1", "A2"), ("DCQ7", "DCQ7s1")):
        seeds = [r["test_prior"]["mean"] for r in done if r["variant"]["name"] in names]
        if len(seeds) > 1:
            L.append(f"Refit noise ({', '.join(names)}: the context stages' forest seeds "
                     f"shifted by 0-{len(names) - 1}): test × prior "
                     f"{min(seeds):.2f}-{max(seeds):.2f}.")
    L.append("Fit s: wall seconds of each context stage's 32-tree fit on 2 cores shared "
             "with other jobs (noisy: A took 18 s in one run, 38 s in another).")
    return L


def _split_table(done):
    groups = sorted({g for r in done for s in r["splits"].values() for g in s["by_group"]},
                    key=_group_order)
    L = ["Where the context stages split: share of all splits (image features are the rest).",
         "", "| variant, stage | context | " + " | ".join(groups) + " |",
         "| --- | ---: | " + " | ".join("---:" for _ in groups) + " |"]
    for r in done:
        for st, s in r["splits"].items():
            L.append(f"| {r['variant']['name']}, {st} | {s['context_share']:.1%} | "
                     + " | ".join(f"{s['by_group'][g]:.1%}" if g in s["by_group"] else ""
                                  for g in groups) + " |")
    return L


def _group_order(g):
    order = ["pixel", "ray", "boxes", "rowcol", "prior"]
    i = next(k for k, o in enumerate(order) if g.startswith(o))
    return (i, int(g[3:]) if g.startswith("ray") else 0)


def _row(r, base):
    v = r["variant"]["name"]
    d = "" if base is None else f"{r['test_prior']['mean'] - base['test_prior']['mean']:+.2f}"
    shares = "/".join(f"{s['context_share']:.0%}" for s in r["splits"].values())
    fit = "+".join(f"{s:.0f}" for s in r["fit_seconds"].values())
    return (f"| {v}: {r['label']} | {r['val_alone']:.2f} ({r['alpha_no_prior']:g}) | "
            f"{r['val']:.2f} ({r['alpha']:g}, {r['beta']:g}) | "
            f"{r['test_alone']['mean']:.2f} ({r['alpha_no_prior']:g}) | "
            f"{r['test_prior']['mean']:.2f} | {d} | "
            + " | ".join(f"{x:.1f}" for x in r["test_prior"]["per_class"])
            + f" | {fit} | {shares} |")


if __name__ == "__main__":
    main()
