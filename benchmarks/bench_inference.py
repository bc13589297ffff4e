"""Benchmarks of dense inference (and the face-detector choice of `segment`).

    python -m benchmarks.bench_inference              # inference speed -> reports/bench/inference.json
    python -m benchmarks.bench_inference --detectors  # detector measurement -> reports/bench/detectors.json

Inference: milliseconds per 250x250 test image (strict mode by default, median
over test images) for each forest kind at 16 and 32 trees, on forests trained
quickly (max depth 16) with the project's estimators on windows sampled
directly from faces300w/train (the 16-tree forest is the first 16 trees of the
32-tree one), or with ``--models models/faces300w-default`` on the pipeline's
trained 32-tree models (``--mode full`` times every pixel, as ``segment``), and
for CO2 the lower bound from FLOPs (2 * 2883 (the features) per oblique node evaluated, counted
exactly) at the float32 GEMM rate measured here with numpy; ratio measured/bound.
Rows "default" time what ``predict_image`` does: the integer fast path for
axis-aligned and two-probe forests, pixels grouped by node level by level for
CO2.  For comparison, under the same load: axis-aligned / two-probe with
blocks of 4 rows ("blocks-of-4-rows") and through the general kernel
("general-kernel"); CO2 through the per-pixel kernel ("per-pixel-kernel") and
with its top levels by FFT correlation ("fft-top", ``fft_levels``).

Detectors: on the faces300w test crops (whose LFW-style crop box is known:
the whole image) dlib's HOG detector (box + calibration, or box + 68 landmarks
-> the dataset's crop rule) is run (OpenCV's Haar cascade is not in the
installed OpenCV 5, so it is reported unavailable) on the
crops and on "photos" made by scaling each crop (0.6-1.6x) into a larger
noisy canvas at a random place; the crop calibration (k, ox, oy) is fitted on
the even-numbered images and the IoU of the resulting crop box with the true
one is measured on the odd-numbered ones.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("FACESEGMENT_SHARED", ROOT.parent / "shared")) / "data" / "faces300w"


def gemm_rate(n=1024, repeats=5):
    """float32 GEMM FLOP/s measured with numpy (best of ``repeats``)."""
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    a @ b
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def sample_windows(records, n_per_image, seed, layout=None):
    """Class-balanced-ish windows (of ``layout``, default 31x31 RGB) sampled directly
    from labelled faces (grey layouts: the image's mean over its channels)."""
    from facesegment.data.datasets import load_face
    from facesegment.dense import pad_image
    from facesegment.layout import DEFAULT_LAYOUT

    layout = layout or DEFAULT_LAYOUT
    h, win = layout.half, layout.window
    rng = np.random.default_rng(seed)
    X, y = [], []
    for rec in records:
        image, label = load_face(rec)
        pad = pad_image(to_layout(image, layout), layout)
        ys, xs = np.nonzero(label[h:label.shape[0] - h, h:label.shape[1] - h] != 255)
        ys, xs = ys + h, xs + h
        lab = label[ys, xs]
        w = 1.0 / np.bincount(lab, minlength=8)[lab]
        pick = rng.choice(len(ys), n_per_image, replace=False, p=w / w.sum())
        for i in pick:
            X.append(pad[ys[i]:ys[i] + win, xs[i]:xs[i] + win].reshape(-1))
            y.append(lab[i])
    return np.asarray(X, dtype=np.uint8), np.asarray(y, dtype=np.int64)


def to_layout(image, layout):
    """An RGB image as ``layout`` wants it: grey (H, W) for one channel, else RGB."""
    if layout.channels == 1:
        return np.round(image.mean(axis=2)).astype(np.uint8)
    if layout.channels != 3:
        sys.exit(f"--layout {layout.describe()}: only 1 (grey) or 3 (RGB) channels here")
    return image


def train_models(n_trees, seed=0, n_images=200, per_image=100, layout=None):
    """Quick real models of each kind (project estimators) on faces300w/train."""
    import facesegment.forest as F
    from facesegment.data.datasets import find_faces
    from facesegment.classes import CLASS_NAMES
    from facesegment.layout import DEFAULT_LAYOUT
    from facesegment.modelio.model import Model

    layout = layout or DEFAULT_LAYOUT
    recs = find_faces(DATA / "train")
    rng = np.random.default_rng(seed)
    recs = [recs[i] for i in sorted(rng.choice(len(recs), n_images, replace=False))]
    X, y = sample_windows(recs, per_image, seed, layout)
    prior = np.bincount(y, minlength=8) / len(y)
    pix = np.array([0.85, 0.12, 0.008, 0.008, 0.0013, 0.0013, 0.0027, 0.0027])
    models = {}
    for kind, cls in (("axis", "AxisAlignedForest"), ("two-probe", "TwoProbeForest"),
                      ("co2", "CO2Forest")):
        est = getattr(F, cls)(n_estimators=n_trees, max_depth=16, random_state=seed)
        t0 = time.perf_counter()
        est.fit(X, y)
        print(f"  trained {kind} {n_trees} trees in {time.perf_counter() - t0:.1f}s "
              f"({est.forest_.n_nodes} nodes)", flush=True)
        models[kind] = Model(kind, {}, est.forest_, CLASS_NAMES, prior / pix,
                             np.zeros(layout.n_features, np.float32),
                             np.ones(layout.n_features, np.float32), layout=layout)
    return models


def load_models(folder, n_trees):
    """The pipeline's trained models ``FOLDER/{axis,two-probe,co2}-N`` (N = the largest size)."""
    from facesegment.models import load_model

    models = {}
    for kind in ("axis", "two-probe", "co2"):
        path = Path(folder) / f"{kind}-{n_trees}"
        if not path.is_dir():
            sys.exit(f"{path} is missing: train it first (make train) or drop --models")
        models[kind] = load_model(path)
        print(f"  loaded {path} ({models[kind].arrays.n_nodes} nodes)", flush=True)
    return models


def bench_inference(args):
    from facesegment.data.datasets import find_faces, load_face
    from facesegment.dense import predict as inference
    from facesegment.dense import count_oblique_visits, model_layout, predict_image

    rate = gemm_rate()
    print(f"float32 GEMM: {rate / 1e9:.1f} GFLOP/s", flush=True)
    recs = find_faces(DATA / "test")[: args.images]
    # One forest per kind with the most trees; smaller forests are its first
    # trees (n_trees=...), exactly what training fewer trees with the same seed gives.
    models = (load_models(args.models, max(args.trees)) if args.models
              else train_models(max(args.trees), n_images=args.train_images, layout=args.layout))
    layout = model_layout(next(iter(models.values())))
    images = [to_layout(load_face(r)[0], layout) for r in recs]
    out = {"gemm_gflops": rate / 1e9, "images": len(images), "cores": os.cpu_count(),
           "layout": layout.describe(),
           "mode": args.mode, "models": str(args.models) if args.models else None,
           "train_images": None if args.models else args.train_images,
           "windows_per_image": None if args.models else 100, "results": []}
    for n_trees in args.trees:
        for kind, model in models.items():
            if kind == "co2" and args.skip_co2:
                continue
            # "default": what predict_image does (the integer fast path for axis /
            # two-probe, pixels grouped by node level by level for CO2); the other
            # variants, timed under the same load, are the alternatives it replaced
            variants = [("default", 0)] + ([("per-pixel-kernel", 0), ("fft-top", args.fft_levels)]
                                           if kind == "co2" else
                                           [("blocks-of-4-rows", 0), ("general-kernel", 0)])
            for label, fft in variants:
                # "general-kernel": axis / two-probe forests through the general
                # (CO2-capable) kernel instead of the integer fast path, for comparison
                kernels = {"general-kernel": "no-fast",
                           "per-pixel-kernel": "no-levels"}.get(label, "auto")
                # "blocks-of-4-rows": the fast kernel with small row blocks (each tree
                # is reloaded for every block) instead of one block per thread
                inference.FAST_BLOCK_ROWS = 4 if label == "blocks-of-4-rows" else None
                # "per-pixel-kernel": CO2 through the per-pixel general kernel
                predict_image(model, images[0], mode=args.mode, fft_levels=fft,
                              n_trees=n_trees, kernels=kernels)  # compile / warm up
                times, cpu = [], []
                for img in images:
                    t0, c0 = time.perf_counter(), time.process_time()
                    predict_image(model, img, mode=args.mode, fft_levels=fft, n_trees=n_trees,
                                  kernels=kernels)
                    times.append(time.perf_counter() - t0)
                    cpu.append(time.process_time() - c0)
                ms = 1000 * float(np.median(times))
                # On a shared machine the wall time includes waiting for the CPU;
                # CPU seconds / cores is what a dedicated 2-core machine would take
                # if both threads were busy all along.
                ms_cpu = 1000 * float(np.median(cpu)) / min(2, os.cpu_count() or 1)
                row = {"kind": kind, "n_trees": n_trees, "method": label, "fft_levels": fft,
                       "kernel": ("general" if label in ("general-kernel", "per-pixel-kernel",
                                                         "fft-top")
                                  else "grouped by node" if kind == "co2"
                                  else "integer fast path"),
                       "ms_per_image": round(ms, 2), "cpu_ms_per_image_per_core": round(ms_cpu, 2),
                       "load_average": round(os.getloadavg()[0], 1),
                       "n_nodes": model.arrays.n_nodes,
                       "max_depth": int(model.arrays.depth.max())}
                if kind == "co2":
                    visits = count_oblique_visits(model, images[0], mode=args.mode,
                                                  n_trees=n_trees)
                    bound = 1000 * 2 * model.arrays.n_features * visits / rate
                    row.update(oblique_visits_first_image=int(visits), bound_ms=round(bound, 2),
                               ratio=round(ms / bound, 2) if bound > 0 else None,
                               ratio_cpu=round(ms_cpu / bound, 2) if bound > 0 else None)
                out["results"].append(row)
                print(json.dumps(row), flush=True)
    inference.FAST_BLOCK_ROWS = None
    return out


def bench_sweep(args):
    """CO2 confusion sweep (evaluation): level-grouped vs per-pixel kernel."""
    from facesegment.dense import predict as inference
    from facesegment.data.datasets import find_faces, load_face

    if not args.models:
        sys.exit("--sweep needs --models FOLDER (the pipeline's models)")
    model = load_models(args.models, max(args.trees))["co2"]
    faces = [load_face(r) for r in find_faces(DATA / "test")[: args.images]]
    out = {"models": str(args.models), "images": len(faces), "mode": args.mode,
           "n_trees_list": args.trees, "alphas": [0.5, 1.0], "results": {}}
    confs = {}
    for label, kernels in (("grouped by node", "auto"), ("per-pixel kernel", "no-levels")):
        inference.confusion_sweep(model, faces[0][0], faces[0][1], n_trees_list=[1],
                                  mode=args.mode, kernels=kernels)  # compile
        t0, c0 = time.perf_counter(), time.process_time()
        confs[label] = [inference.confusion_sweep(model, img, lab, n_trees_list=args.trees,
                                                  alphas=[0.5, 1.0], mode=args.mode,
                                                  kernels=kernels)[0]
                        for img, lab in faces]
        out["results"][label] = {"seconds": round(time.perf_counter() - t0, 2),
                                 "cpu_seconds": round(time.process_time() - c0, 2)}
        print(label, out["results"][label], flush=True)
    out["identical_confusions"] = bool(all(
        (a == b).all() for a, b in zip(*confs.values())))
    return out


def _canvas(crop, scale, rng):
    import cv2

    side = int(round(250 * scale))
    face = cv2.resize(crop, (side, side), interpolation=cv2.INTER_LINEAR)
    H = int(side * rng.uniform(1.3, 2.0))
    W = int(side * rng.uniform(1.3, 2.0))
    noise = rng.integers(60, 200, (H // 8 + 1, W // 8 + 1, 3)).astype(np.uint8)
    canvas = cv2.resize(noise, (W, H), interpolation=cv2.INTER_LINEAR)
    x0, y0 = int(rng.integers(0, W - side + 1)), int(rng.integers(0, H - side + 1))
    canvas[y0:y0 + side, x0:x0 + side] = face
    return canvas, (x0, y0, side)


def _iou(a, b):
    ax, ay, asd = a
    bx, by, bsd = b
    ix = max(0, min(ax + asd, bx + bsd) - max(ax, bx))
    iy = max(0, min(ay + asd, by + bsd) - max(ay, by))
    inter = ix * iy
    return inter / (asd * asd + bsd * bsd - inter)


def bench_detectors(args):
    from facesegment.data.datasets import find_faces
    from facesegment.data.imageio import read_image
    import cv2

    from facesegment.faces.crops import detect_faces, find_crops

    recs = find_faces(DATA / "test")[: args.detector_images]
    crops = [read_image(r.image) for r in recs]
    rng = np.random.default_rng(0)
    canvases = [_canvas(c, rng.uniform(0.6, 1.6), rng) for c in crops]
    out = {"images": len(crops), "protocol": "calibration fitted on even-numbered crops; "
           "IoU of the crop box with the true one on odd-numbered canvases"}
    for det in ("landmarks", "dlib", "haar"):
        if det == "haar":  # OpenCV 5 moved the Haar cascades to contrib
            out[det] = {"available": hasattr(cv2, "CascadeClassifier"),
                        "opencv": cv2.__version__, "measured": False}
            print(det, "unavailable in this OpenCV", flush=True)
            continue
        t0 = time.perf_counter()
        found = [detect_faces(c, "dlib" if det == "landmarks" else det) for c in crops]
        calib = None
        if det != "landmarks":
            ratios = np.array([(250 / b[0, 2], (125 - b[0, 0] - b[0, 2] / 2) / b[0, 2],
                                (125 - b[0, 1] - b[0, 3] / 2) / b[0, 3])
                               for i, b in enumerate(found) if len(b) and i % 2 == 0])
            calib = {det: tuple(float(v) for v in np.median(ratios, axis=0))}
        t_crops = time.perf_counter() - t0
        ious, hits, t_canvas = [], 0, 0.0
        for i, (canvas, truth) in enumerate(canvases):
            t1 = time.perf_counter()
            boxes = find_crops(canvas, det, calib)
            t_canvas += time.perf_counter() - t1
            hits += len(boxes) > 0
            if i % 2 == 1:
                ious.append(_iou(boxes[0], truth) if len(boxes) else 0.0)
        res = {"available": True,
               "crop_detection_rate": float(np.mean([len(b) > 0 for b in found])),
               "crop_multiple_faces": int(sum(len(b) > 1 for b in found)),
               "canvas_detection_rate": hits / len(canvases),
               "calibration_k_ox_oy": [round(v, 3) for v in calib[det]] if calib else None,
               "canvas_crop_iou_median": round(float(np.median(ious)), 3),
               "canvas_crop_iou_p10": round(float(np.percentile(ious, 10)), 3),
               "canvas_crop_iou_ge_0.8": round(float(np.mean(np.array(ious) >= 0.8)), 3),
               "ms_per_crop_detection": round(1000 * t_crops / len(crops), 1),
               "ms_per_canvas": round(1000 * t_canvas / len(canvases), 1)}
        out[det] = res
        print(det, json.dumps(res), flush=True)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--detectors", action="store_true",
                   help="measure the face detectors instead of inference speed")
    p.add_argument("--trees", type=int, nargs="+", default=[16, 32],
                   help="forest sizes to time (default 16 32)")
    p.add_argument("--images", type=int, default=20, help="test images timed (default 20)")
    p.add_argument("--train-images", type=int, default=200,
                   help="training images sampled for the quick models (default 200)")
    p.add_argument("--detector-images", type=int, default=250,
                   help="faces300w test images used by --detectors (default all 250)")
    p.add_argument("--models", type=Path, default=None,
                   help="time the trained models FOLDER/{axis,two-probe,co2}-N (e.g. "
                        "models/faces300w-default) instead of training quick ones")
    p.add_argument("--mode", choices=("strict", "full"), default="strict",
                   help="pixels predicted: strict (the paper's, 220x220) or full (every pixel)")
    p.add_argument("--skip-co2", action="store_true", help="time axis-aligned and two-probe only")
    p.add_argument("--sweep", action="store_true",
                   help="time the CO2 confusion sweep (evaluation) instead, level-grouped vs "
                        "per-pixel kernel (needs --models)")
    p.add_argument("--out", type=Path, default=None,
                   help="result file (default reports/bench/inference.json, or "
                        "reports/bench/inference-MODELS.json with --models)")
    p.add_argument("--fft-levels", type=int, default=2,
                   help="CO2 levels evaluated by FFT correlation in the second variant")
    p.add_argument("--layout", default="31x3", metavar="WxC",
                   help="window side x channels of the quick models (default 31x3, the paper's "
                        "RGB; e.g. 15x3, 31x1 for grey)")
    args = p.parse_args(argv)
    from facesegment.layout import WindowLayout

    try:
        win, ch = (int(v) for v in args.layout.lower().split("x"))
        args.layout = WindowLayout(win, ch)
    except ValueError as exc:
        p.error(f"--layout {args.layout!r}: give WINDOWxCHANNELS such as 31x3 ({exc})")
    if not (DATA / "test").is_dir():
        sys.exit(f"needs {DATA} (the shared faces300w data)")
    from facesegment.atomic import write_json_atomic

    if args.detectors:
        res = bench_detectors(args)
        write_json_atomic(ROOT / "reports" / "bench" / "detectors.json", res)
    elif args.sweep:
        res = bench_sweep(args)
        write_json_atomic(args.out or ROOT / "reports" / "bench" / "sweep-co2.json", res)
    else:
        res = bench_inference(args)
        name = f"inference-{args.models.name}" if args.models else "inference"
        name += "-full.json" if args.mode == "full" else ".json"  # the two modes side by side
        write_json_atomic(args.out or ROOT / "reports" / "bench" / name, res)
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
