"""How to cut a new face into a dataset's crop frame: landmark box or mean shape.

The detector-aligned protocol (facesegment.faces.aligned) cuts each test face by the
box of dlib's 68 predicted landmarks mapped by the crop rule measured on
training faces (``measure_crop_rule``: median scale and offset).  On
lfw-gray every model that uses position loses 6-14 Jaccard points against
LFW's own crops.  This study asks whether a better anchor closes the gap:

* ``box``: the landmark box and the measured rule (what the project does);
* ``shape``: the mean landmark shape of the training crops (in crop
  coordinates), and per test face the scale and translation that map its
  predicted landmarks onto it by least squares (all 68 points, no rotation:
  the crops are not rotation-normalised);
* ``crop``: the dataset's own crops, as they are (the reference).

For each, the test faces of a finished run are re-cut, their label maps warped
with the same box (outside pixels not scored), and the run's position-only
map (its prior, its gamma) is scored on them (strict mode, every 3rd pixel),
as the pipeline scores "position alone".  Also: the spread (interquartile
range) of each rule's boxes against the original crop.

    python -m studies.crop_rule_study --run lfw-gray-small
    python -m studies.crop_rule_study --run faces300w-default

Writes ``reports/cascade/crop-rule-<run>.json`` and ``.md``.  About a
minute per run on 2 cores (dlib on 200 training and 250 test faces).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.faces.aligned import detect_landmarks, warp_label
from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.data.datasets import FaceRecord, load_face
from facesegment.data.imageio import write_label_png
from facesegment.faces.crops import apply_crop_rule, landmark_box


def shape_box(pts, mean_shape, side):
    """The crop box that maps ``pts`` onto ``mean_shape * side`` by least-squares
    scale and translation."""
    target = mean_shape * side
    p0, q0 = pts.mean(axis=0), target.mean(axis=0)
    a = float(((pts - p0) * (target - q0)).sum() / ((pts - p0) ** 2).sum())
    t = q0 - a * p0
    return float(-t[0] / a), float(-t[1] / a), float(side / a)


def _score(prior, gamma, recs, cfg):
    from facesegment.evaluation.maps import evaluate_position_only

    r = evaluate_position_only(prior, recs, [gamma], mode=cfg["evaluate"]["mode"],
                               pixel_stride=cfg["evaluate"]["pixel_stride"], progress=False)
    return round(r["gamma"][repr(gamma)]["mean_jaccard"], 2)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="lfw-gray-small")
    p.add_argument("--train-faces", type=int, default=200)
    args = p.parse_args(argv)
    from pipelines.backend import records_from_json
    from pipelines.prior import load_prior

    run = ROOT / "reports" / "runs" / args.run
    cfg = json.loads((run / "config.json").read_text())
    splits = json.loads((run / "splits.json").read_text())
    train, test = records_from_json(splits["train"]), records_from_json(splits["test"])
    prior = load_prior(ROOT / "models" / args.run / "position-prior.npz")
    gamma = json.loads((run / "prior.json").read_text())["gamma"]
    pick = np.random.default_rng(0).choice(len(train), min(args.train_faces, len(train)),
                                           replace=False)
    shapes, side = [], None
    for i in sorted(pick):
        img = load_face(train[i])[0]
        side = float(np.sqrt(img.shape[0] * img.shape[1]))
        pts = detect_landmarks(img)
        if pts is not None:
            shapes.append(pts / side)
    mean_shape = np.mean(shapes, axis=0)
    rule = prior.crop_rule
    boxes = {"box": [], "shape": []}
    with tempfile.TemporaryDirectory() as tmp:
        recs = {"box": [], "shape": []}
        for rec in test:
            img, lab = load_face(rec)
            pts = detect_landmarks(img)
            for how in ("box", "shape"):
                if pts is None:
                    recs[how].append(FaceRecord(rec.name, rec.image, rec.label, missed=True))
                    continue
                box = (apply_crop_rule(landmark_box(pts), rule) if how == "box"
                       else shape_box(pts, mean_shape, img.shape[1]))
                boxes[how].append(box)
                path = Path(tmp, how, rec.name.replace("/", "__") + "_label.png")
                path.parent.mkdir(parents=True, exist_ok=True)
                write_label_png(str(path), warp_label(lab, box))
                recs[how].append(FaceRecord(rec.name, rec.image, str(path)))
        scores = {"crop": _score(prior, gamma, test, cfg)}
        scores.update({how: _score(prior, gamma, recs[how], cfg) for how in recs})
    spread = {}
    for how, b in boxes.items():
        b = np.array(b)
        iqr = np.percentile(b, 75, axis=0) - np.percentile(b, 25, axis=0)
        spread[how] = {"median_box": [round(float(v), 1) for v in np.median(b, axis=0)],
                       "iqr_px": [round(float(v), 1) for v in iqr]}
    out = {"run": args.run, "gamma": gamma, "crop_rule": list(rule), "n_train_faces":
           len(shapes), "n_test": len(test), "position_alone": scores, "boxes": spread}
    folder = ROOT / "reports" / "cascade"
    write_json_atomic(folder / f"crop-rule-{args.run}.json", out, sort_keys=True)
    lines = [f"# Cutting test faces into the crop frame: {args.run}", "",
             f"`python -m studies.crop_rule_study --run {args.run}`: the position-only "
             f"map (gamma {gamma:g}) on the {len(test)} test faces, cut three ways; box "
             "spread = interquartile ranges of (x0, y0, side) in pixels.", "",
             "| cut | position alone | median box | box spread (px) |",
             "| --- | ---: | --- | --- |",
             f"| the dataset's own crops | {scores['crop']:.2f} | (0, 0, 250) | 0 |"]
    for how, name in (("box", "landmark box + measured rule (the project's)"),
                      ("shape", "least-squares fit to the mean landmark shape")):
        lines.append(f"| {name} | {scores[how]:.2f} | {tuple(spread[how]['median_box'])} | "
                     f"{tuple(spread[how]['iqr_px'])} |")
    write_text_atomic(folder / f"crop-rule-{args.run}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
