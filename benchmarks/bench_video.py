"""Video throughput and what smoothing does to label flicker (results in
reports/bench/video.json).

Clips are made from FASSEG photos of held-out people (6 and 7), each placed
on a 640x480 grey canvas and jittered per frame (a random shift of up to
``--jitter`` pixels each way and a scale within 1 +/- 1%), as a hand-held
camera would, then written as MP4 and read back (so the frames carry the
codec's noise too):

* throughput: ``--seconds`` of 25 frames/s video from the first photo through
  :func:`facesegment.faces.video.segment_video` (reading, segmenting, smoothing,
  writing both videos and the CSV), with the shipped model; the videos' frame
  counts are checked against the input's;
* smoothing: ``--flicker-frames`` frames of each photo segmented with
  ``--smooth`` 0 (each frame alone) and larger windows; each frame's labels are
  mapped back onto the canvas by the frame's known jitter, then
  *flicker* is the share of the pixels labelled a face part in either of two
  consecutive frames whose label differs, and *parts Jaccard* the mean Jaccard
  of nose, mouth and both eyes against the photo's hand-drawn mask (FASSEG's
  rule: skin, 254, counts against a part predicted there; 255 is not scored);
  the *floor* is the flicker of the hand-drawn mask itself moved and mapped
  back the same way (what the pixel grid alone gives).

    nice python -m benchmarks.bench_video [--seconds 10] [--flicker-frames 40]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FACESEGMENT_SHARED", ROOT.parent / "shared")) / "data"
FASSEG = SHARED / "fasseg-v3-train"
OUT = ROOT / "reports" / "bench" / "video.json"
PHOTOS = ("fasseg-v3train-pan0-personne06146", "fasseg-v3train-panp15-personne07147",
          "fasseg-v3train-panm15-personne06245")
SIZE = (640, 480)
FPS = 25.0
#: Class ids scored against the hand-drawn masks: nose, mouth, the two eyes.
PARTS = (2, 3, 4, 5)


def canvas(name):
    """``(photo on a 640x480 grey canvas, its hand-drawn mask there (255 outside))``."""
    import cv2
    from PIL import Image

    from facesegment.data.imageio import read_image

    photo = read_image(FASSEG / f"{name}.jpg")
    mask = np.array(Image.open(FASSEG / f"{name}_label.png"))
    w, h = SIZE
    s = h / photo.shape[0]
    pw = int(round(photo.shape[1] * s))
    x0 = (w - pw) // 2
    img = np.full((h, w, 3), 128, np.uint8)
    lab = np.full((h, w), 255, np.uint8)
    img[:, x0:x0 + pw] = cv2.resize(photo, (pw, h), interpolation=cv2.INTER_AREA)
    lab[:, x0:x0 + pw] = cv2.resize(mask, (pw, h), interpolation=cv2.INTER_NEAREST)
    return img, lab


def jitters(n, amplitude, seed):
    """``n`` 2x3 maps from the canvas to each frame: shift and scale about the centre."""
    rng = np.random.default_rng(seed)
    cx, cy = SIZE[0] / 2, SIZE[1] / 2
    out = []
    for dx, dy, ds in zip(rng.uniform(-amplitude, amplitude, n),
                          rng.uniform(-amplitude, amplitude, n), rng.uniform(-0.01, 0.01, n)):
        s = 1 + ds
        out.append(np.float32([[s, 0, cx - s * cx + dx], [0, s, cy - s * cy + dy]]))
    return out


def write_clip(path, image, maps):
    import cv2

    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), FPS, SIZE)
    for m in maps:
        frame = cv2.warpAffine(image, m, SIZE, flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REPLICATE)
        wr.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    wr.release()


def count_frames(path):
    import cv2

    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.grab():
        n += 1
    cap.release()
    return n


def throughput(model, folder, seconds, amplitude):
    """Segment a ``seconds`` long 640x480 clip; frames/s and the frame counts."""
    import csv

    from facesegment.faces.video import segment_video, video_outputs

    img, _ = canvas(PHOTOS[0])
    n = int(round(seconds * FPS))
    clip = folder / "clip.mp4"
    write_clip(clip, img, jitters(n, amplitude, seed=0))
    res, done, secs = segment_video(model, clip, folder, "clip.mp4", "clip", progress=True)
    labels, over, frames_csv = video_outputs(folder, "clip")
    with open(frames_csv, newline="") as f:
        per_frame = [float(r["seconds"]) for r in csv.DictReader(f)]
    return {"photo": PHOTOS[0], "frames_in": count_frames(clip), "frames_processed": done,
            "frames_labels_video": count_frames(labels),
            "frames_overlay_video": count_frames(over), "status": res.status,
            "seconds": round(secs, 2), "frames_per_s": round(done / secs, 2),
            "median_segment_ms": round(1000 * float(np.median(per_frame)), 1),
            "first_frame_ms": round(1000 * per_frame[0], 1)}


def flicker_scores(labels, masks, maps):
    """``(flicker, parts Jaccard)`` of frames' labels, mapped back onto the canvas."""
    import cv2

    back = [cv2.warpAffine(lab, m, SIZE, flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=0)
            for lab, m in zip(labels, maps)]
    inner = np.zeros(back[0].shape, bool)
    inner[8:-8, 8:-8] = True                        # away from the jittered border
    changes = []
    for a, b in zip(back, back[1:]):
        part = inner & (np.isin(a, PARTS + (1, 6, 7)) | np.isin(b, PARTS + (1, 6, 7)))
        changes.append(float((a[part] != b[part]).mean()) if part.any() else 0.0)
    scored = inner & (masks != 255)
    jac = []
    for lab in back:
        per = []
        for c in PARTS:
            p, g = (lab == c) & scored, (masks == c) & scored
            if g.any() or p.any():
                per.append((p & g).sum() / (p | g).sum())
        jac.append(float(np.mean(per)))
    return float(np.mean(changes)), float(np.mean(jac))


def smoothing(model, folder, n_frames, windows, amplitude):
    """Flicker and parts Jaccard per photo and smoothing window."""
    from facesegment.faces.video import open_video, read_frames, segment_frames

    out = {str(k): {"flicker": [], "parts_jaccard": []} for k in windows}
    floor = []
    for i, name in enumerate(PHOTOS):
        img, mask = canvas(name)
        maps = jitters(n_frames, amplitude, seed=100 + i)
        floor.append(round(flicker_floor(mask, maps), 5))
        clip = folder / f"flicker-{i}.mp4"
        write_clip(clip, img, maps)
        cap, info = open_video(clip)
        frames = list(read_frames(cap, info.fps))
        cap.release()
        for k in windows:
            t = time.perf_counter()
            labels = [v.labels for v in segment_frames(model, frames, smooth=k)]
            fl, jac = flicker_scores(labels, mask, maps)
            out[str(k)]["flicker"].append(round(fl, 5))
            out[str(k)]["parts_jaccard"].append(round(jac, 4))
            print(f"{name}: smooth {k}: flicker {fl:.4f}, parts Jaccard {jac:.4f} "
                  f"({time.perf_counter() - t:.1f} s)", file=sys.stderr)
    for v in out.values():
        v["mean_flicker"] = round(float(np.mean(v["flicker"])), 5)
        v["mean_parts_jaccard"] = round(float(np.mean(v["parts_jaccard"])), 4)
    return out, {"flicker": floor, "mean_flicker": round(float(np.mean(floor)), 5)}


def flicker_floor(mask, maps):
    """The flicker of a perfect segmentation: the hand-drawn mask moved with each
    frame (nearest pixel) and mapped back as the labels are; what the pixel grid
    alone gives (FASSEG's 254 skin counted as lower face)."""
    import cv2

    truth = np.where(mask == 254, 1, np.where(mask == 255, 0, mask)).astype(np.uint8)
    frames = [cv2.warpAffine(truth, m, SIZE, flags=cv2.INTER_NEAREST,
                             borderMode=cv2.BORDER_REPLICATE) for m in maps]
    return flicker_scores(frames, mask, maps)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="throughput clip length")
    ap.add_argument("--flicker-frames", type=int, default=40, help="frames per smoothing clip")
    ap.add_argument("--windows", type=int, nargs="+", default=[0, 1, 2, 4],
                    help="--smooth values compared")
    ap.add_argument("--jitter", type=float, default=3.0, help="largest shift, pixels")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if not FASSEG.is_dir():
        print(f"needs the FASSEG photos at {FASSEG}", file=sys.stderr)
        return 2
    import facesegment

    load = os.getloadavg()[0]
    model = facesegment.load_model()
    with tempfile.TemporaryDirectory(prefix="bench-video-") as tmp:
        folder = Path(tmp)
        tp = throughput(model, folder, args.seconds, args.jitter)
        print(f"throughput: {tp['frames_processed']} frames in {tp['seconds']} s, "
              f"{tp['frames_per_s']} frames/s", file=sys.stderr)
        sm, floor = smoothing(model, folder, args.flicker_frames, args.windows, args.jitter)
    result = {"model": "faces-handdrawn (the default)", "size": list(SIZE), "fps": FPS,
              "jitter_px": args.jitter, "scale_jitter": 0.01, "throughput": tp,
              "smoothing": {"photos": list(PHOTOS), "frames_per_photo": args.flicker_frames,
                            "by_window": sm, "floor": floor},
              "load_average_before": round(load, 2),
              "load_average_after": round(os.getloadavg()[0], 2),
              "cpu_count": os.cpu_count()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
