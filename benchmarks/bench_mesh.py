"""The face mesh (MediaPipe) beside dlib's finder on fasseg-v3-train's photos.

1. Detection recall per head turn (pan): every photo is searched by
   :class:`facesegment.faces.mesh.MeshFinder` (its passes: default, padded,
   mirrored, rotated, detected) and by dlib's finder as ``segment`` uses it (the peer:
   ``find_crops(img, "landmarks", max_side=2000)``, passes default, upsampled,
   low-threshold).  "found": at least one face; "on face": the largest face's
   centre lies on the photo's labelled face (label != 0), so a false face
   elsewhere in the photo is not counted as a hit.  The pass that found each
   photo's faces is counted.
2. False faces on face-free images: square crops (side >= 96 px, resized to
   256x256) taken from the photos where the label map is 0 (background, hair
   outside the face zone) over the whole crop, at most 2 per photo (seeded
   choice, the largest side that fits first, the second not overlapping the
   first), plus synthetic scenes (gradients, noise, smooth blobs, shapes,
   stripes; seeded).  Faces found by each finder are counted (target 0) and
   the images with a false face named.  Nothing of the images is written.
3. Time per photo: ``segment_image(model, img, detect="always")`` for
   ``--model`` (default faces-handdrawn) and for faces300w-landmarks (the
   peer), taking turns photo by photo on the same photos after one untimed
   warm-up call each; median ms for frontal (|pan| <= 30), turned
   (|pan| >= 60) and all photos, and the ratio model / peer.  The finders alone
   are timed during step 1 (after an untimed warm-up call each).  When
   ``--model`` cannot be loaded this is said in one line and only the peer is
   timed.

A markdown summary is printed; the results go to ``reports/bench/mesh.json``.
The machine's load average is recorded: on a shared machine the absolute
times are pessimistic, the ratios less so.

    python -m benchmarks.bench_mesh [--data ../shared/data/fasseg-v3-train]
        [--model faces-handdrawn] [--limit N] [--out reports/bench/mesh.json]
"""

import argparse
import json
import os
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = (Path(os.environ.get("FACESEGMENT_SHARED", ROOT.parent / "shared")) / "data"
        / "fasseg-v3-train")
OUT = ROOT / "reports" / "bench" / "mesh.json"
PEER = "faces300w-landmarks"
#: Sides (photo pixels) of the face-free windows, tried largest first; the window step.
SIDES = (224, 192, 160, 128, 96)
STRIDE = 8
#: Side of the face-free images handed to the finders.
CROP_SIDE = 256
#: |pan| bounds of the "frontal" and "turned" groups (degrees).
FRONTAL, TURNED = 30, 60
SCENE_KINDS = ("gradient", "noise", "blobs", "shapes", "stripes")


# ---------------------------------------------------------------- the photos

def order_photos(faces):
    """The manifest's photo names ordered by person, then by their rank among the
    person's photos of the same pan (by name), then by pan, so that the first N
    photos (``--limit``) span the head turns."""
    def key(n):
        f = faces[n]
        same = sorted(m for m in faces if faces[m].get("person", 0) == f.get("person", 0)
                      and faces[m].get("pan", 0) == f.get("pan", 0))
        return f.get("person", 0), same.index(n), f.get("pan", 0), n

    return sorted(faces, key=key)


def pan_group(pan):
    """ "frontal" (|pan| <= 30), "turned" (|pan| >= 60) or None (in between)."""
    if abs(pan) <= FRONTAL:
        return "frontal"
    if abs(pan) >= TURNED:
        return "turned"
    return None


# ---------------------------------------------------- face-free images

def background_windows(label, name, seed=0, per_photo=2, sides=SIDES, stride=STRIDE):
    """Square windows ``(x0, y0, side)`` of ``label`` holding only 0 (background).

    At most ``per_photo``: each one of the largest side (of ``sides``) that has a
    free window not overlapping those already chosen, picked at random among
    those (the generator seeded by ``seed`` and the photo's ``name``, so the
    choice does not depend on which other photos are used).
    """
    label = np.asarray(label)
    h, w = label.shape[:2]
    bad = np.pad((label != 0).astype(np.int64).cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    rng = np.random.default_rng([int(seed), zlib.crc32(name.encode("utf-8"))])
    chosen = []
    for _ in range(per_photo):
        for side in sorted(sides, reverse=True):
            if side > h or side > w:
                continue
            ys = np.arange(0, h - side + 1, stride)
            xs = np.arange(0, w - side + 1, stride)
            yy, xx = np.meshgrid(ys, xs, indexing="ij")
            count = (bad[yy + side, xx + side] - bad[yy, xx + side] - bad[yy + side, xx]
                     + bad[yy, xx])
            free = count == 0
            for x0, y0, s in chosen:   # no overlap with the windows already chosen
                free &= ~((xx < x0 + s) & (xx + side > x0) & (yy < y0 + s) & (yy + side > y0))
            if free.any():
                i = int(rng.choice(np.flatnonzero(free.ravel())))
                chosen.append((int(xx.ravel()[i]), int(yy.ravel()[i]), int(side)))
                break
        else:
            break
    return chosen


def face_free_crops(image, label, name, seed=0, per_photo=2, size=CROP_SIDE):
    """``[(crop name, uint8 (size, size, 3))]``: the photo's :func:`background_windows`
    resized to ``size`` (area interpolation down, cubic up)."""
    import cv2

    out = []
    for x0, y0, side in background_windows(label, name, seed, per_photo):
        crop = np.ascontiguousarray(image[y0:y0 + side, x0:x0 + side])
        interp = cv2.INTER_AREA if side > size else cv2.INTER_CUBIC
        out.append((f"{name}@{x0},{y0},{side}",
                    cv2.resize(crop, (size, size), interpolation=interp)))
    return out


def synthetic_scene(kind, seed, size=CROP_SIDE):
    """One face-free uint8 RGB (size, size, 3) scene of ``kind`` (:data:`SCENE_KINDS`)."""
    import cv2

    if kind not in SCENE_KINDS:
        raise ValueError(f"unknown scene kind {kind!r} (one of {', '.join(SCENE_KINDS)})")
    rng = np.random.default_rng([int(seed), SCENE_KINDS.index(kind)])
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) / (size - 1)
    if kind == "gradient":      # linear or radial, between two random colours
        a, b = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        if rng.random() < 0.5:
            t = np.clip(np.hypot(xx - rng.random(), yy - rng.random()) / 1.2, 0, 1)
        else:
            ang = rng.uniform(0, 2 * np.pi)
            t = xx * np.cos(ang) + yy * np.sin(ang)
            t = (t - t.min()) / max(np.ptp(t), 1e-9)
        img = a + (b - a) * t[..., None]
    elif kind == "noise":       # uniform colour noise around a random mean
        mean = rng.uniform(40, 215, 3)
        img = mean + rng.uniform(-1, 1, (size, size, 3)) * rng.uniform(20, 100)
    elif kind == "blobs":       # smooth colour noise (upsampled coarse noise, blurred)
        cells = int(rng.integers(3, 12))
        coarse = rng.uniform(0, 255, (cells, cells, 3)).astype(np.float32)
        img = cv2.resize(coarse, (size, size), interpolation=cv2.INTER_CUBIC)
        img = cv2.GaussianBlur(img, (0, 0), size / cells / 3)
    elif kind == "shapes":      # random filled rectangles and ellipses on a plain ground
        img = np.empty((size, size, 3), np.uint8)
        img[:] = rng.integers(0, 256, 3, dtype=np.uint8)
        for _ in range(int(rng.integers(4, 12))):
            colour = tuple(int(v) for v in rng.integers(0, 256, 3))
            x0, y0 = (int(v) for v in rng.integers(0, size, 2))
            if rng.random() < 0.5:
                x1, y1 = (int(v) for v in rng.integers(0, size, 2))
                cv2.rectangle(img, (x0, y0), (x1, y1), colour, -1)
            else:
                axes = tuple(int(v) for v in rng.integers(size // 20, size // 3, 2))
                cv2.ellipse(img, (x0, y0), axes, float(rng.uniform(0, 180)), 0, 360, colour, -1)
    else:                       # "stripes": sinusoidal or square-wave, at a random angle
        ang = rng.uniform(0, np.pi)
        period = rng.uniform(0.03, 0.25)
        t = (xx * np.cos(ang) + yy * np.sin(ang)) / period
        wave = np.sin(2 * np.pi * t)
        if rng.random() < 0.5:
            wave = np.sign(wave)
        a, b = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        img = a + (b - a) * (0.5 + 0.5 * wave)[..., None]
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def synthetic_scenes(n=20, seed=0, size=CROP_SIDE):
    """``[(name, image)]``: ``n`` scenes, the kinds taken in turn."""
    out = []
    for i in range(n):
        kind = SCENE_KINDS[i % len(SCENE_KINDS)]
        out.append((f"synthetic-{kind}-{i // len(SCENE_KINDS)}",
                    synthetic_scene(kind, seed * 1000 + i, size)))
    return out


# ---------------------------------------------------------------- the finders

def make_finders():
    """``{"mesh": find, "dlib": find}``: each ``find(rgb)`` returns ``(faces, pass)``
    where ``faces`` is a list of ``(cx, cy)`` face centres (photo pixels),
    largest face first, and ``pass`` the detection pass ("" when none)."""
    from facesegment.faces.crops import find_crops
    from facesegment.faces.mesh import MeshFinder

    finder = MeshFinder()

    def mesh(rgb):
        info = {}
        meshes = finder.find(rgb, info)
        centres = [(float((m[:, 0].min() + m[:, 0].max()) / 2),
                    float((m[:, 1].min() + m[:, 1].max()) / 2)) for m in meshes]
        return centres, info.get("detection", "")

    def dlib(rgb):
        info = {}
        boxes = find_crops(rgb, "landmarks", max_side=2000, info=info)
        return [(float(x0 + s / 2), float(y0 + s / 2)) for x0, y0, s in boxes], \
            info.get("detection", "")

    return {"mesh": mesh, "dlib": dlib}


def load_segmenter(name):
    """``segment(rgb)`` for the model ``name`` (``segment_image(model, rgb,
    detect="always")``, returning its number of faces); raises DataError when
    the model cannot be loaded."""
    from facesegment.api import load_model
    from facesegment.faces.segment import segment_image

    model = load_model(name)
    return lambda rgb: segment_image(model, rgb, detect="always")[1]


def on_face(label, centre):
    """Whether ``centre`` (x, y) lies on the labelled face (label != 0)."""
    h, w = label.shape[:2]
    x = int(np.clip(round(centre[0]), 0, w - 1))
    y = int(np.clip(round(centre[1]), 0, h - 1))
    return bool(label[y, x] != 0)


# ---------------------------------------------------------------- tables

def recall_table(rows, finder):
    """Per pan (ascending, as strings) and in total: ``{"found", "on_face", "total"}``
    of ``finder`` over ``rows`` (``{"pan", finder: {"n", "on_face", ...}}``)."""
    per = {}
    for r in sorted(rows, key=lambda r: r["pan"]):
        d = per.setdefault(str(r["pan"]), {"found": 0, "on_face": 0, "total": 0})
        d["total"] += 1
        d["found"] += int(r[finder]["n"] > 0)
        d["on_face"] += int(bool(r[finder]["on_face"]))
    total = {k: sum(d[k] for d in per.values()) for k in ("found", "on_face", "total")}
    return {"per_pan": per, "total": total}


def group_medians(pans, ms):
    """Median of ``ms`` for frontal (|pan| <= 30), turned (|pan| >= 60) and all
    photos, rounded to 0.1 ms (None for an empty group), with the counts."""
    pans, ms = np.asarray(pans, float), np.asarray(ms, float)
    groups = {"frontal": np.abs(pans) <= FRONTAL, "turned": np.abs(pans) >= TURNED,
              "all": np.ones(len(pans), bool)}
    return {g: {"ms": round(float(np.median(ms[m])), 1) if m.any() else None, "n": int(m.sum())}
            for g, m in groups.items()}


def ratio_of(a, b):
    """``a / b`` rounded to 0.01, None when either is missing or b is 0."""
    return round(a / b, 2) if a is not None and b else None


def _cell(d):
    return f"{d['found']}/{d['total']}" + (f" ({d['on_face']} on face)"
                                           if d["on_face"] != d["found"] else "")


def markdown(res):
    """The short markdown summary of a result (:func:`run`'s dict)."""
    rec = res["recall"]
    lines = [f"## Face mesh vs dlib on {res['n_photos']} fasseg-v3-train photos", "",
             "Detection recall (photos with a face found / photos; \"on face\": the largest "
             "face's centre on the labelled face, when fewer):", "",
             "| pan | MeshFinder | dlib (peer) |", "| ---: | --- | --- |"]
    for pan in rec["mesh"]["per_pan"]:
        lines.append(f"| {pan} | {_cell(rec['mesh']['per_pan'][pan])} | "
                     f"{_cell(rec['dlib']['per_pan'][pan])} |")
    lines.append(f"| **all** | **{_cell(rec['mesh']['total'])}** | "
                 f"**{_cell(rec['dlib']['total'])}** |")
    lines += ["", "Passes: " + "; ".join(
        f"{f} " + ", ".join(f"{k or 'none'} {v}" for k, v in rec[f]["passes"].items())
        for f in ("mesh", "dlib")), ""]
    ff = res["false_faces"]
    lines.append(f"False faces on {ff['n_images']} face-free images ({ff['n_crops']} background "
                 f"crops, {ff['n_synthetic']} synthetic): "
                 + "; ".join(f"{f} {ff[f]['faces']} face(s) on {len(ff[f]['images'])} image(s)"
                             + (f" ({', '.join(ff[f]['images'][:8])}"
                                + (", ..." if len(ff[f]["images"]) > 8 else "") + ")"
                                if ff[f]["images"] else "")
                             for f in ("mesh", "dlib")))
    t = res["time"]
    lines += ["", f"Time per photo (median ms, warm; load average {res['load_average'][0]}, "
              f"{res['cpu_count']} cores):", ""]
    head = ["frontal", "turned", "all"]
    lines += ["| | " + " | ".join(head) + " |", "| --- |" + " ---: |" * len(head)]

    def row(title, d):
        return f"| {title} | " + " | ".join("-" if d[g]["ms"] is None else f"{d[g]['ms']}"
                                            for g in head) + " |"

    if t["model"] is not None:
        lines.append(row(f"segment, {res['model']}", t["model"]))
    lines.append(row(f"segment, {PEER} (peer)", t["peer"]))
    if t["model"] is not None:
        lines.append("| ratio model / peer | " + " | ".join(
            "-" if t["ratio"][g] is None else f"{t['ratio'][g]}" for g in head) + " |")
    lines.append(row("MeshFinder.find", t["find"]["mesh"]))
    lines.append(row("dlib find_crops", t["find"]["dlib"]))
    lines.append("| ratio mesh / dlib find | " + " | ".join(
        "-" if t["find"]["ratio"][g] is None else f"{t['find']['ratio'][g]}" for g in head)
        + " |")
    seg = t["photos_segmented"]
    lines += ["", "Photos with a face segmented: " + ", ".join(
        f"{res['model'] if k == 'model' else PEER} {v}/{res['n_photos']}" for k, v in seg.items())]
    if res.get("model_error"):
        lines += ["", f"{res['model']}: not timed ({res['model_error']})"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the run

def _ms(fn, *a):
    t0 = time.perf_counter()
    out = fn(*a)
    return out, 1000.0 * (time.perf_counter() - t0)


def _read_label(path):
    import cv2

    label = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if label is None:
        from facesegment.errors import DataError

        raise DataError(str(path), "cannot be read as a label map", "check the data folder")
    return label if label.ndim == 2 else label[..., 0]


def run(args, log=print):
    """The three measurements; returns the result dict."""
    from facesegment.data.imageio import read_image
    from facesegment.progress import Progress

    data = Path(args.data)
    faces = json.loads((data / "manifest.json").read_text(encoding="utf-8"))["faces"]
    names = [n for n in order_photos(faces) if (data / f"{n}.jpg").is_file()]
    if args.limit:
        names = names[: args.limit]
    pans = [int(faces[n]["pan"]) for n in names]
    finders = make_finders()

    # 1. recall per pan, the finders timed
    rows = []
    first = read_image(data / f"{names[0]}.jpg")
    for find in finders.values():       # graphs and dlib's models loaded, untimed
        find(first)
    with Progress(len(names), "recall", "photos") as bar:
        for name, pan in zip(names, pans):
            img = read_image(data / f"{name}.jpg")
            label = _read_label(data / f"{name}_label.png")
            row = {"name": name, "pan": pan}
            for f, find in finders.items():
                (centres, how), ms = _ms(find, img)
                row[f] = {"n": len(centres), "pass": how, "ms": ms,
                          "on_face": bool(centres) and on_face(label, centres[0])}
            rows.append(row)
            bar.update()
    recall = {f: dict(recall_table(rows, f),
                      passes=dict(sorted(Counter(r[f]["pass"] for r in rows).items())),
                      missed=[r["name"] for r in rows if not r[f]["on_face"]])
              for f in finders}

    # 2. false faces on face-free images
    images = []
    for name in names:
        img = read_image(data / f"{name}.jpg")
        images += face_free_crops(img, _read_label(data / f"{name}_label.png"), name,
                                  args.seed, args.crops_per_photo)
    n_crops = len(images)
    images += synthetic_scenes(args.synthetic, args.seed)
    false = {f: {"faces": 0, "images": [], "passes": Counter()} for f in finders}
    with Progress(len(images), "face-free", "images") as bar:
        for name, img in images:
            for f, find in finders.items():
                centres, how = find(img)
                if centres:
                    false[f]["faces"] += len(centres)
                    false[f]["images"].append(name)
                    false[f]["passes"][how] += 1
            bar.update()
    for f in false:
        false[f]["passes"] = dict(sorted(false[f]["passes"].items()))

    # 3. time per photo under segment_image: the model and the peer take turns
    segmenters, model_error = {}, None
    try:
        segmenters["model"] = load_segmenter(args.model)
    except Exception as exc:    # DataError (missing model), or a model that fails to load
        model_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        model_error = model_error.removeprefix(f"{args.model}: ")
        log(f"{args.model}: cannot be loaded ({model_error}); its timing is skipped")
    segmenters["peer"] = load_segmenter(PEER)
    for seg in segmenters.values():     # warm-up, untimed
        seg(first)
    ms = {k: [] for k in segmenters}
    n_seg = {k: 0 for k in segmenters}
    with Progress(len(names), "segment", "photos") as bar:
        for name in names:
            img = read_image(data / f"{name}.jpg")
            for k, seg in segmenters.items():
                n, t = _ms(seg, img)
                ms[k].append(t)
                n_seg[k] += int(n > 0)
            bar.update()
    timing = {k: group_medians(pans, v) for k, v in ms.items()}
    find_t = {f: group_medians(pans, [r[f]["ms"] for r in rows]) for f in finders}
    groups = ("frontal", "turned", "all")
    find_t["ratio"] = {g: ratio_of(find_t["mesh"][g]["ms"], find_t["dlib"][g]["ms"])
                       for g in groups}
    time_res = {"model": timing.get("model"), "peer": timing["peer"],
                "ratio": ({g: ratio_of(timing["model"][g]["ms"], timing["peer"][g]["ms"])
                           for g in groups} if "model" in timing else None),
                "photos_segmented": n_seg,
                "find": find_t}
    return {"data": str(data), "n_photos": len(names), "limit": args.limit, "seed": args.seed,
            "model": args.model, "peer": PEER, "model_error": model_error,
            "recall": recall,
            "false_faces": {"n_images": len(images), "n_crops": n_crops,
                            "n_synthetic": len(images) - n_crops,
                            "crop_side": CROP_SIDE, "window_sides": list(SIDES), **false},
            "time": time_res,
            "photos": [{"name": r["name"], "pan": r["pan"],
                        **{f: {k: v for k, v in r[f].items() if k != "ms"} for f in finders}}
                       for r in rows],
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "cpu_count": os.cpu_count()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                epilog=__doc__.split("\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DATA,
                   help="the fasseg-v3-train folder (default ../shared/data/fasseg-v3-train)")
    p.add_argument("--model", default="faces-handdrawn",
                   help="the mesh model timed beside faces300w-landmarks (a shipped name or a "
                        "model folder; default faces-handdrawn)")
    p.add_argument("--limit", type=int, default=0,
                   help="use the first N photos (ordered by person, then pan; default all)")
    p.add_argument("--crops-per-photo", type=int, default=2,
                   help="face-free background crops taken per photo (default 2)")
    p.add_argument("--synthetic", type=int, default=20,
                   help="synthetic face-free scenes (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the face-free images (default 0)")
    p.add_argument("--out", type=Path, default=OUT, help="result file (default %(default)s)")
    args = p.parse_args(argv)
    if not (args.data / "manifest.json").is_file():
        sys.exit(f"needs {args.data} (the shared fasseg-v3-train data: manifest.json, "
                 "NAME.jpg, NAME_label.png)")
    from facesegment.atomic import write_json_atomic

    res = run(args)
    write_json_atomic(args.out, res)
    print(markdown(res))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
