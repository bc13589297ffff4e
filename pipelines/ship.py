"""Copy a model of a finished run into the package, with its model card (``make model``).

    python -m pipelines.ship --config pipelines/shipped.toml --kind two-probe --name faces300w-two-probe

Reads ``models/RUN/KIND-N`` (RUN and N: the run's name and ``[forest] n_trees``
in the config) and the run's files (``reports/runs/RUN``: train and eval JSON,
the time stage's measurement), and writes ``facesegment/models/NAME/``: the model folder
(``model.json`` + ``forest.h5``, or a cascade's folders) with its decision rule
and without the measurements that change from machine to machine (fit times,
paths of the machine), so that training twice gives the same bytes, and
``MODEL_CARD.md`` (training data and its terms, the rule, the scores on both
protocols, size, speed, and the commands that produced them).
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "facesegment" / "models"
#: Metrics that depend on the machine or the run's folders (not shipped).
MACHINE_METRICS = ("fit_seconds", "fit_seconds_sum", "tree_seconds", "fit_seconds_is_estimate",
                   "truncated_from", "cascade_fit_seconds")


def _clean(model, run, kind):
    """The model as shipped: machine measurements dropped, provenance portable."""
    for stage in model.stages:   # a cascade's forests, or the forest itself
        for key in MACHINE_METRICS:
            stage.metrics.pop(key, None)
        stage.provenance = {"run": run, "kind": kind, "trained_by": "make model",
                            "config": "pipelines/shipped.toml",
                            **{k: v for k, v in stage.provenance.items()
                               if k in ("preset", "n_windows", "selected", "seed")}}
    if len(model.stages) > 1:   # a cascade's own provenance
        model.provenance = {"run": run, "kind": kind, "trained_by": "make model"}
    return model


def _score(block, n, alpha):
    if not block:
        return None
    try:
        return block["trees"][str(n)]["alpha"][repr(float(alpha))]["mean_jaccard"]
    except (KeyError, TypeError):
        return None


def _fmt(v):
    return "–" if v is None else f"{v:.2f}"


def model_card(name, model, run_dir, kind, n, size, conf):
    """The text of MODEL_CARD.md from the run's files and configuration ``conf``."""
    from facesegment.rule import rule_of

    ev = json.loads((run_dir / f"eval-{kind}.json").read_text())
    train = json.loads((run_dir / f"train-{kind}.json").read_text())
    rule = rule_of(model)
    det = ev.get("detector") or {}
    wp, dwp = ev.get("with_prior") or {}, det.get("with_prior") or {}
    sm = ev.get("smoothed") or {}
    rows = [("forest alone", ev["alpha"], 0.0, 0.0, _score(ev, n, ev["alpha"]),
             _score(det, n, det.get("alpha", ev["alpha"])))]
    rows.append(("the paper's rule (alpha 1, nothing else)", 1.0, 0.0, 0.0, _score(ev, n, 1.0),
                 _score(det, n, 1.0)))
    if wp:
        rows.append(("with the position prior", wp["alpha"], wp["beta"], 0.0,
                     _score(wp, n, wp["alpha"]), _score(dwp, n, dwp.get("alpha", 0))))
    if sm:
        rows.append(("the model's rule (prior, smoothed maps)", sm["alpha"], sm["beta"],
                     sm["sigma"], (sm.get("test") or {}).get("mean_jaccard"),
                     (sm.get("detector") or {}).get("mean_jaccard")))
    table = "\n".join(f"| {r[0]} | {r[1]:g} | {r[2]:g} | {r[3]:g} | {_fmt(r[4])} | {_fmt(r[5])} |"
                      for r in rows)
    timing = run_dir / "stamps" / "timings" / f"time-{kind}.json"
    speed = "not measured (the time stage's file is missing)"
    if timing.is_file():
        t = json.loads(timing.read_text())
        one = t["trees"][str(n)]
        speed = (f"{one['ms_per_image']:.0f} ms per 250x250 crop (median of {one['n_images']}, "
                 f"every pixel, forest alone; {one['cpu_ms_per_image']:.0f} ms of CPU) on the "
                 f"machine that ran `make model` ({t.get('cpu_count')} cores)")
    data = conf["data"]
    params = ", ".join(f"{k} = {v}" for k, v in sorted(train["params"].items()))
    found = (f"; dlib finds {det['n_found']} of {det['n_found'] + det['n_missed']} test faces, "
             "a missed face is scored as all background") if det else ""
    return f"""# Model card: {name}

The shipped landmark-free forest of facesegment (`facesegment.models.FOREST`:
`--model faces300w-two-probe`), and the landmark votes' fallback.

## What it is

A {kind} forest ({model.arrays.n_trees} trees, {model.arrays.n_nodes} nodes; {params})
over 31x31 RGB windows, with a position prior (per-pixel class frequencies of
the {model.position.n_images if model.position is not None else 0} training crops) and its decision rule
**{rule.describe() if rule else "none"}** (`facesegment.rule`): the class
probabilities are reweighted by `s^-alpha`, multiplied by the position prior
to the power beta, and each class map is blurred by sigma pixels before the
argmax. The rule was chosen on {conf['select']['n_images']} validation images
(held out of training) with the final forest
(`facesegment.evaluation.calibrate.choose_rule`). It segments faces into 8 classes:
{", ".join(model.class_names)}.

Size: {size / 1e6:.1f} MB. Speed: {speed}.

## Training data and its terms

faces300w: 1,207 training faces (AFW 337, HELEN train 870) and 250 test faces
(HELEN test), cropped LFW-style to 250x250, with 8-class label maps drawn from
the 300-W challenge's 68 human-annotated landmarks (Sagonas et al., 300 Faces
in-the-Wild; the dataset's README, `../shared/data/README.md`).
{conf['extract']['n_windows']} class-balanced windows from the training images,
{data['n_validation']} of which were held out for validation (choosing the
rule); the test faces were used for neither.

**Terms: research use only.** The dataset is distributed for research use (the
300-W annotations; the AFW and HELEN photos are Flickr images under their
owners' terms). This model is derived from it and carries the same
restriction: use it for research; check those terms before anything else.

## Scores (class-average Jaccard, %)

{ev['n_images']} test faces, strict mode (15 px border not scored), every
{ev['pixel_stride']}rd pixel of every {ev['pixel_stride']}rd row. **Crops**: the test crops as
the dataset cuts them (around the human landmarks). **Detector-aligned**: the
same faces re-cropped the way `segment` crops a photo, around dlib's predicted
landmarks{found}.

| decision | α | β | σ | crops | detector-aligned |
| --- | ---: | ---: | ---: | ---: | ---: |
{table}

"–": not scored on that protocol. `docs/results.md` compares every kind of
forest on the same protocol (the default run, `make all`).

## How it was made

    make model     # python -m pipelines.run --config pipelines/shipped.toml time:{kind}
                   # python -m pipelines.ship --config pipelines/shipped.toml --kind {kind} --name {name}

Training is deterministic: the same data and config give the same
`forest.h5` bytes (the seed is {conf['run']['seed']}). The scores above are the
run's files `reports/runs/{run_dir.name}/eval-{kind}.json`.
"""


def ship(cfg, kind, name, models_root=None, reports_root=None, dest=None, log=print):
    """Write ``facesegment/models/NAME`` (or ``dest/NAME``) from the run of the
    loaded configuration ``cfg`` (:func:`pipelines.config.load_config`)."""
    from facesegment.models import load_model

    from .config import run_name

    run = run_name(cfg)
    models_root = Path(models_root or ROOT / "models")
    run_dir = Path(reports_root or ROOT / "reports" / "runs") / run
    n = cfg["forest"]["n_trees"]
    model = _clean(load_model(models_root / run / f"{kind}-{n}"), run, kind)
    out = Path(dest or DEST) / name
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        folder = Path(tmp) / "model"
        model.save(folder)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        card = model_card(name, load_model(folder), run_dir, kind, n, size, cfg)
        (folder / "MODEL_CARD.md").write_text(card)
        if out.exists():
            shutil.rmtree(out)
        folder.rename(out)
    log(f"ship: wrote {out} ({size / 1e6:.1f} MB) and its MODEL_CARD.md")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pipelines.ship", description=__doc__.split("\n")[0])
    p.add_argument("--config", default="pipelines/shipped.toml",
                   help="the run's configuration (default: %(default)s)")
    p.add_argument("--kind", required=True, help="the kind (or cascade) to ship")
    p.add_argument("--name", required=True, help="its name under facesegment/models/")
    args = p.parse_args(argv)
    from facesegment.errors import FaceSegmentError

    from .config import ConfigError, load_config

    try:
        ship(load_config(args.config), args.kind, args.name)
    except (FaceSegmentError, ConfigError, OSError, KeyError) as exc:
        print(f"ship: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    from facesegment.atomic import overwriting

    with overwriting():   # the repository\'s own reports and models are regenerated
        sys.exit(main())
