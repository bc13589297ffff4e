"""Per-face cost of the landmark path: dlib's landmarks (facesegment label's
passes), the renderer, and the shape prior's warp back onto a face, beside the
same warp with scikit-image's ``PiecewiseAffineTransform`` + ``warp`` (the
peer), on faces300w test crops.  Median milliseconds per face (wall clock) and
the ratio to the peer; results in ``reports/bench/landmarks.json``.

    python -m benchmarks.bench_landmarks --faces 10
"""

import argparse
import json
import os
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from facesegment.faces import shape_frame as sf
from facesegment.faces import shape_prior as sp
from facesegment.data.datasets import find_faces
from facesegment.data.imageio import read_image
from facesegment.faces.landmarks import render_labels
from facesegment.faces.renderer import predict_landmarks

DATA = os.path.join(ROOT, "..", "shared", "data", "faces300w")


def peer_warp_back(prior, points, shape):
    """The warp back with scikit-image alone (its mesh of the face's points)."""
    from skimage.transform import PiecewiseAffineTransform, warp

    src, dst = sf.control_points(points, prior.mean_shape)
    t = PiecewiseAffineTransform.from_estimate(src, dst)    # frame -> face; inverse used
    return warp(prior.maps, t.inverse, output_shape=shape, order=1, mode="constant",
                cval=0.0, preserve_range=True)


def timed(fn, *a):
    t0 = time.perf_counter()
    out = fn(*a)
    return out, 1000.0 * (time.perf_counter() - t0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--faces", type=int, default=10)
    ap.add_argument("--prior", default=os.path.join(ROOT, "data", "landmarks",
                                                    "shape-prior-train.npz"),
                    help="a shape prior's arrays (studies/landmark_parsing.py writes it)")
    ap.add_argument("--out", default=os.path.join(ROOT, "reports", "bench", "landmarks.json"))
    args = ap.parse_args(argv)
    with np.load(args.prior, allow_pickle=False) as z:
        prior = sp.from_arrays(dict(z))
    recs = find_faces(os.path.join(DATA, "test"))[: args.faces]
    images = [read_image(r.image) for r in recs]
    predict_landmarks(images[0])                  # load dlib's models outside the timing
    sp.shape_maps(prior, predict_landmarks(images[0])[0], (250, 250))
    rows = {"dlib landmarks": [], "renderer": [], "shape prior warp back": [],
            "scikit-image warp back (peer)": []}
    for img in images:
        (pts, _), ms = timed(predict_landmarks, img)
        rows["dlib landmarks"].append(ms)
        if pts is None:
            continue
        rows["renderer"].append(timed(render_labels, pts, (250, 250))[1])
        ours, ms = timed(sp.shape_maps, prior, pts, (250, 250))
        rows["shape prior warp back"].append(ms)
        peer, ms = timed(peer_warp_back, prior, pts, (250, 250))
        rows["scikit-image warp back (peer)"].append(ms)
    med = {k: round(float(np.median(v)), 2) for k, v in rows.items() if v}
    res = {"n_faces": len(images), "ms_per_face": med,
           "peer_over_ours": round(med["scikit-image warp back (peer)"]
                                   / med["shape prior warp back"], 1)}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
