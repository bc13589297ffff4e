"""Which landmark sets the vote renderer should draw: variants on validation faces.

The shipped landmark votes (:mod:`facesegment.faces.votes`) run dlib's predictor
from 27 boxes and on the mirrored crop.  This study scores, on the 100
validation faces of faces300w's split (seed 0; never the test faces), the
class-average Jaccard (strict mode, every pixel) of votes over other sets:

* the 27 boxes alone; with the mirrored crop from the detector's box only
  (landmark-model format 1); with every box mirrored (the shipped spec);
* the 27 boxes on the crop enlarged 3 or 5 times instead of 4;
* the shipped sets plus 27 sets on the crop rotated by -4 and +4 degrees about
  the box centre (landmarks rotated back), or plus 27 sets on the crop with
  gamma 0.7 and 1.4;
* the shipped sets aggregated as landmarks (the per-landmark median or mean
  drawn once) instead of as votes;
* on the same faces re-cropped the way ``segment`` crops a photo
  (:func:`facesegment.faces.aligned.realign_records`): the votes of the re-cropped
  face (what the model does), the source image's landmark sets mapped into
  the re-crop and drawn there, and the source image's votes resampled into
  the re-crop (bilinear; and, to see what the re-cropped label maps cost,
  nearest-neighbour as the labels themselves are warped).

Every variant takes the shipped model's offset.

    python -m studies.vote_variants --data ../shared/data/faces300w

Writes ``reports/landmarks/variants.json`` and ``.md``.  A few minutes on 2
cores (dlib about 270 times per face).
"""

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

from facesegment.faces.aligned import realign_records, warp_label
from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.classes import CLASS_NAMES, N_CLASSES
from facesegment.faces.crops import crop_face
from facesegment.data.datasets import load_face
from facesegment.evaluation.scoring import scored_label
from facesegment.faces.landmarks import render_labels
from facesegment.layout import DEFAULT_LAYOUT
from facesegment.evaluation.metrics import class_average, confusion_matrix, jaccard
from facesegment.models import load_model
from facesegment.models import DEFAULT, model_path
from facesegment.faces.segment import crop_points
from facesegment.data.splits import split_dataset
from facesegment.faces.votes import VoteSpec, detect_box, landmark_sets, vote_maps

ROOT = Path(__file__).resolve().parents[1]
PLAIN = VoteSpec(flip=False)


def rotated_sets(image, box, degrees):
    """27 sets on ``image`` rotated about the box centre, rotated back."""
    l, t, r, b = box
    m = cv2.getRotationMatrix2D(((l + r) / 2, (t + b) / 2), degrees, 1.0)
    turned = cv2.warpAffine(image, m, image.shape[1::-1], flags=cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_REPLICATE)
    back = cv2.invertAffineTransform(m)
    return landmark_sets(turned, box, PLAIN) @ back[:, :2].T + back[:, 2]


def gamma_sets(image, box, gamma):
    lut = np.clip(255 * (np.arange(256) / 255) ** gamma, 0, 255).astype(np.uint8)
    return landmark_sets(lut[image], box, PLAIN)


def face_sets(image, box):
    """The sets of one face, by kind (no offset)."""
    full = landmark_sets(image, box, VoteSpec())
    return {"boxes": full[:27], "mirrored": full[27:],
            "zoom3": landmark_sets(image, box, VoteSpec(zoom=3, flip=False)),
            "zoom5": landmark_sets(image, box, VoteSpec(zoom=5, flip=False)),
            "rot-4": rotated_sets(image, box, -4), "rot+4": rotated_sets(image, box, 4),
            "gamma0.7": gamma_sets(image, box, 0.7), "gamma1.4": gamma_sets(image, box, 1.4)}


def _cat(*kinds):
    return lambda d: np.concatenate([d[k] for k in kinds])


VARIANTS = {
    "27 boxes": (_cat("boxes"), "votes"),
    "27 boxes + the mirrored detector box (format 1)":
        (lambda d: np.concatenate([d["boxes"], d["mirrored"][:1]]), "votes"),
    "27 boxes + 27 mirrored (shipped)": (_cat("boxes", "mirrored"), "votes"),
    "27 boxes, zoom 3": (_cat("zoom3"), "votes"),
    "27 boxes, zoom 5": (_cat("zoom5"), "votes"),
    "shipped + rotations -4, +4 degrees": (_cat("boxes", "mirrored", "rot-4", "rot+4"), "votes"),
    "shipped + gamma 0.7, 1.4": (_cat("boxes", "mirrored", "gamma0.7", "gamma1.4"), "votes"),
    "shipped sets, median landmarks drawn once": (_cat("boxes", "mirrored"), "median"),
    "shipped sets, mean landmarks drawn once": (_cat("boxes", "mirrored"), "mean"),
}


def draw(sets, how, shape=(250, 250)):
    if how == "votes":
        return np.argmax(vote_maps(sets, shape), axis=-1)
    agg = np.median(sets, axis=0) if how == "median" else sets.mean(axis=0)
    return render_labels(agg, shape)


def _resample(votes, box):
    """Votes of a source image resampled into its re-crop ``box`` (bilinear)."""
    return np.concatenate([crop_face(np.ascontiguousarray(votes[..., c:c + 4]), box)
                           for c in range(0, votes.shape[-1], 4)], axis=-1)


def _summary(conf):
    j = jaccard(conf)
    return {"mean_jaccard": round(float(class_average(j)), 2),
            "jaccard": [round(float(v), 1) for v in j]}


def _label(record):
    return scored_label(load_face(record)[1], 1, "strict", DEFAULT_LAYOUT)


def study(data, aligned_dir, n_faces=None, log=print):
    spec = load_model(model_path(DEFAULT)).votes
    offset = np.asarray(spec.offset)
    records = split_dataset(data).validation[:n_faces]
    aligned = realign_records(records, aligned_dir, workers=1, progress=False)
    boxes = {f["name"]: f["box"] for f in
             json.loads((Path(aligned_dir) / "aligned.json").read_text())["faces"]}
    names = list(VARIANTS) + ["re-cropped: votes of the re-crop (the model)",
                              "re-cropped: source sets mapped and drawn there",
                              "re-cropped: source votes resampled",
                              "re-cropped: source votes resampled as the labels (nearest)"]
    conf = {n: np.zeros((N_CLASSES, N_CLASSES), np.int64) for n in names}
    for i, (rec, arec) in enumerate(zip(records, aligned)):
        image = np.ascontiguousarray(load_face(rec)[0])
        label = _label(rec)
        box, _ = detect_box(image)
        sets = None if box is None else {k: v + offset for k, v in face_sets(image, box).items()}
        for name, (pick, how) in VARIANTS.items():
            pred = np.zeros(label.shape, np.uint8) if sets is None else draw(pick(sets), how)
            conf[name] += confusion_matrix(label, pred.astype(np.uint8), N_CLASSES)
        _score_recrop(conf, names[-4:], rec, arec, sets, boxes.get(rec.name), spec)
        if i % 20 == 19:
            log(f"vote_variants: {i + 1}/{len(records)} faces")
    return {"offset": list(spec.offset), "n_faces": len(records),
            "scores": {n: _summary(c) for n, c in conf.items()}}


def _score_recrop(conf, names, rec, arec, sets, box, spec):
    """The ways to segment the re-cropped face (a missed face: all background)."""
    if arec.missed:
        label = _label(rec)
        for n in names:
            conf[n] += confusion_matrix(label, np.zeros(label.shape, np.uint8), N_CLASSES)
        return
    image = np.ascontiguousarray(load_face(arec)[0])
    label = _label(arec)
    own, _ = detect_box(image)
    preds = [None if own is None else draw(landmark_sets(image, own, spec), "votes")]
    if sets is None:
        preds += [None, None, None]
    else:
        shipped = np.concatenate([sets["boxes"], sets["mirrored"]])
        preds.append(draw(np.array([crop_points(s, box) for s in shipped]), "votes"))
        source = vote_maps(shipped, (250, 250))
        preds.append(np.argmax(_resample(source, box), axis=-1))
        nearest = warp_label(np.argmax(source, axis=-1).astype(np.uint8), box)
        preds.append(np.where(nearest == 255, 0, nearest))
    for n, p in zip(names, preds):
        p = np.zeros(label.shape, np.uint8) if p is None else p.astype(np.uint8)
        conf[n] += confusion_matrix(label, p, N_CLASSES)


def table(res):
    head = ("| sets (validation faces, strict mode, every pixel) | class average | "
            + " | ".join(CLASS_NAMES) + " |")
    rows = [head, "| --- | ---: |" + " ---: |" * len(CLASS_NAMES)]
    for name, s in res["scores"].items():
        rows.append(f"| {name} | **{s['mean_jaccard']:.2f}** | "
                    + " | ".join(f"{v:.1f}" for v in s["jaccard"]) + " |")
    return "\n".join(rows) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m studies.vote_variants",
                                description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "faces300w"))
    p.add_argument("--out", default=str(ROOT / "reports" / "landmarks" / "variants"))
    p.add_argument("--aligned-dir", default=str(ROOT / "data" / "landmarks" / "aligned-validation"))
    p.add_argument("--faces", type=int, default=None, help="only the first N validation faces")
    args = p.parse_args(argv)
    res = study(args.data, args.aligned_dir, args.faces)
    write_json_atomic(args.out + ".json", res, indent=1, sort_keys=True)
    write_text_atomic(args.out + ".md", f"Offset {tuple(res['offset'])} px, {res['n_faces']} "
                      "validation faces (`python -m studies.vote_variants`).\n\n" + table(res))
    print(table(res))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
