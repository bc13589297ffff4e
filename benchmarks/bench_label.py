"""Benchmarks of the labelling area (results in reports/bench/label.json).

--agreement   landmark -> label rendering vs the shared faces300w label maps, for
              the rasterisations that were considered (Pillow is the one used).
--detect N    dlib detection + 68 landmarks + rendering on the first N LFW images
              (one process; `facesegment label --workers K` spreads it).

    nice .venv/bin/python -m benchmarks.bench_label --agreement --detect 300
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FACESEGMENT_SHARED", ROOT.parent / "shared")) / "data"


def _cv2_fill(points, shape, offset):
    import cv2

    from facesegment.faces.landmarks import face_polygons

    lab = np.zeros(shape, np.uint8)
    for cls, poly in face_polygons(points):
        pts = np.round((poly + offset) * 16).astype(np.int32)
        cv2.fillPoly(lab, [pts], int(cls), lineType=cv2.LINE_8, shift=4)
    return lab


def _skimage_fill(points, shape, offset):
    from skimage.draw import polygon

    from facesegment.faces.landmarks import face_polygons

    lab = np.zeros(shape, np.uint8)
    for cls, poly in face_polygons(points):
        rr, cc = polygon(poly[:, 1] + offset, poly[:, 0] + offset, shape)
        lab[rr, cc] = cls
    return lab


def agreement(split="train"):
    from facesegment.data.datasets import find_faces
    from facesegment.data.imageio import read_label
    from facesegment.faces.landmarks import pts_path_for, read_pts, render_labels

    methods = {
        "pillow ImageDraw.polygon (used)": render_labels,
        "cv2.fillPoly (subpixel, shift=4)": lambda p, s: _cv2_fill(p, s, 0.0),
        "cv2.fillPoly (subpixel, -0.5 px)": lambda p, s: _cv2_fill(p, s, -0.5),
        "skimage.draw.polygon": lambda p, s: _skimage_fill(p, s, 0.0),
        "skimage.draw.polygon (-0.5 px)": lambda p, s: _skimage_fill(p, s, -0.5),
    }
    recs = find_faces(SHARED / "faces300w" / split)
    res = {m: [] for m in methods}
    t = {m: 0.0 for m in methods}
    for r in recs:
        ref = read_label(r.label)
        pts = read_pts(pts_path_for(r.image))
        for m, f in methods.items():
            t0 = time.perf_counter()
            lab = f(pts, ref.shape)
            t[m] += time.perf_counter() - t0
            res[m].append(float((lab == ref).mean()))
    out = {}
    for m, a in res.items():
        a = np.array(a)
        out[m] = {"images": len(a), "min_agreement": float(a.min()), "mean_agreement": float(a.mean()),
                  "identical_images": int((a == 1).sum()), "ms_per_image": 1000 * t[m] / len(a)}
        print(f"{m:<36} min {100 * a.min():.3f}%  mean {100 * a.mean():.4f}%  "
              f"identical {int((a == 1).sum())}/{len(a)}  {1000 * t[m] / len(a):.2f} ms/image")
    return out


def detect(n):
    from facesegment.data.datasets import find_images
    from facesegment.data.imageio import read_image
    from facesegment.faces.label import detect_landmarks, get_models
    from facesegment.faces.landmarks import render_labels

    t0 = time.perf_counter()
    get_models()
    load = time.perf_counter() - t0
    images = find_images(SHARED / "lfw-gray" / "lfw")[:n]
    t0 = time.perf_counter()
    misses = 0
    for p in images:
        img = read_image(p)
        pts, _, _ = detect_landmarks(img, 1, -0.5)
        if pts is None:
            misses += 1
        else:
            render_labels(pts, img.shape)
    dt = time.perf_counter() - t0
    print(f"dlib: model load {load:.2f} s; {len(images)} LFW images in {dt:.1f} s "
          f"({len(images) / dt:.1f} images/s, one process), {misses} without a face")
    return {"images": len(images), "seconds": dt, "images_per_s": len(images) / dt,
            "misses": misses, "model_load_s": load}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agreement", action="store_true", help="rendering agreement on faces300w/train")
    ap.add_argument("--detect", type=int, default=0, metavar="N", help="time dlib on the first N LFW images")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "label.json"), help="results JSON")
    args = ap.parse_args(argv)
    if not (args.agreement or args.detect):
        args.agreement, args.detect = True, 300
    results = {"cpu_count": os.cpu_count()}
    if args.agreement:
        results["agreement"] = agreement()
    if args.detect:
        results["detect"] = detect(args.detect)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(results, fh, indent=1)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
