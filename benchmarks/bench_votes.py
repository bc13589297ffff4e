"""Per-face time of the shipped models beside the renderer (the peer: dlib's
landmarks drawn once as the polygons), on faces300w test crops.

* renderer: ``facesegment label``'s detection passes + 68 landmarks + the polygons;
* landmark votes, crop: the default model's ``predict_crop`` (detection, the
  vote spec's landmark sets, the averaged polygons);
* landmark votes, photo: ``segment_image`` finding the face in the image first
  (as ``facesegment segment`` does on a photo), then the crop's votes;
* landmark votes, crop, 28 sets: the same model with the mirrored crop run
  from the detector's box only (``VoteSpec.flip_all=False``, the spec of
  landmark-model files of format version 1);
* forest: the shipped two-probe forest on the crop (its decision rule), no
  landmarks.

The steps take turns face by face, so that a change in the machine's load
falls on all of them alike.

Median wall-clock milliseconds per face and the ratio to the renderer; results
in ``reports/bench/votes.json``.  The machine's load average is recorded: on a
shared machine the absolute times are pessimistic, the ratios less so.

    python -m benchmarks.bench_votes --faces 20
"""

import argparse
import json
import os
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "faces300w")


def _ms(fn, *a, **k):
    t0 = time.perf_counter()
    fn(*a, **k)
    return 1000.0 * (time.perf_counter() - t0)


def main(argv=None):
    from facesegment.api import load_model
    from facesegment.data.datasets import find_faces
    from facesegment.dense import predict_image
    from facesegment.data.imageio import read_image
    from facesegment.faces.landmarks import render_labels
    from facesegment.models import DEFAULT, FOREST
    from facesegment.faces.renderer import predict_landmarks
    from facesegment.faces.segment import segment_image

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--faces", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(ROOT, "reports", "bench", "votes.json"))
    args = ap.parse_args(argv)
    from dataclasses import replace

    from facesegment.models.landmark import LandmarkModel

    votes, forest = load_model(DEFAULT), load_model(FOREST)
    votes28 = LandmarkModel(replace(votes.votes, flip_all=False), votes.fallback)
    images = [read_image(r.image) for r in find_faces(os.path.join(DATA, "test"))[: args.faces]]

    def renderer(img):
        pts, _ = predict_landmarks(img)
        if pts is not None:
            render_labels(pts, img.shape)

    steps = {"renderer (peer)": renderer,
             "landmark votes, crop": votes.predict_crop,
             "landmark votes, photo": lambda img: segment_image(votes, img, detect="always"),
             "landmark votes, crop, 28 sets": votes28.predict_crop,
             "forest, crop": lambda img: predict_image(forest, img, mode="full")}
    for fn in steps.values():          # dlib's models loaded, kernels compiled, untimed
        fn(images[0])
    rows = {name: [] for name in steps}
    for img in images:
        for name, fn in steps.items():
            rows[name].append(_ms(fn, img))
    med = {k: round(float(np.median(v)), 1) for k, v in rows.items()}
    peer = med["renderer (peer)"]
    res = {"n_faces": len(images), "ms_per_face": med,
           "over_renderer": {k: round(v / peer, 2) for k, v in med.items()},
           "load_average": [round(v, 2) for v in os.getloadavg()], "cpu_count": os.cpu_count(),
           "models": {"votes": DEFAULT, "forest": FOREST}}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
