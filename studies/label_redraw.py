"""How exactly the polygon renderer reproduces faces300w's label maps, and what
the nearest-neighbour warp of the detector-aligned protocol does to them.

(a) ``render_labels(NAME.pts)`` against ``NAME_label.png`` on the original
    crops (test and train): pixels that differ, faces identical, per-class
    Jaccard of the rendered map against the dataset's.
(b) On the detector-aligned test crops (:func:`facesegment.faces.aligned.realign_records`
    with ``labels="warp"``, the boxes of its ``aligned.json``): the label map
    warped by nearest neighbour against the one drawn from the human landmarks
    mapped through the same crop matrix
    (:func:`facesegment.faces.segment.crop_points`); pixels whose source lies
    outside the image are 255 in both and not compared.

    python -m studies.label_redraw --data /work/shared/data/faces300w

Writes ``reports/landmarks/label-redraw.json`` and ``.md``.  About a minute on
2 cores when the aligned folder is cached (dlib on 250 test faces otherwise).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.classes import IGNORE
from facesegment.data.datasets import find_faces
from facesegment.data.imageio import read_label
from facesegment.evaluation.metrics import confusion_matrix, jaccard
from facesegment.faces.aligned import INFO_NAME, realign_records
from facesegment.faces.landmarks import pts_path_for, read_pts, render_labels
from facesegment.faces.segment import crop_points

N = 8


def _compare(pairs):
    """Totals over ``(reference, other)`` label pairs (255 in either: not compared)."""
    conf = np.zeros((N, N), np.int64)
    diffs, same, total = [], 0, 0
    for ref, other in pairs:
        mask = (ref != IGNORE) & (other != IGNORE)
        conf += confusion_matrix(ref, other, N, mask=mask)
        d = int(((ref != other) & mask).sum())
        diffs.append(d)
        same += d == 0
        total += int(mask.sum())
    diffs = np.array(diffs)
    return {"n_faces": len(diffs), "n_identical": int(same), "n_pixels": total,
            "n_differ": int(diffs.sum()),
            "agreement_pct": round(100 * (1 - diffs.sum() / total), 5),
            "worst_face_differ": int(diffs.max()), "median_face_differ": float(np.median(diffs)),
            "jaccard": [round(float(v), 4) for v in jaccard(conf)],
            "area_ref": conf.sum(1).tolist(), "area_other": conf.sum(0).tolist()}


def _on_edge(ref):
    """Pixels with a differently labelled 8-neighbour."""
    p = np.pad(ref, 1, mode="edge")
    h, w = ref.shape
    return np.any([p[1 + dy:1 + dy + h, 1 + dx:1 + dx + w] != ref
                   for dy in (-1, 0, 1) for dx in (-1, 0, 1)], axis=0)


def original(records):
    """(a): the rendered maps against the dataset's, on the original crops; also
    how many differing pixels lie on a class edge, and how many pixels differ
    when the points are moved by half a pixel (the coordinate convention)."""
    pairs, edge, half = [], 0, 0
    for r in records:
        ref = read_label(r.label)
        pts = read_pts(pts_path_for(r.image))
        got = render_labels(pts, ref.shape)
        edge += int(((got != ref) & _on_edge(ref)).sum())
        half += int((render_labels(pts + 0.5, ref.shape) != ref).sum())
        pairs.append((ref, got))
    return {**_compare(pairs), "n_differ_on_edge": edge, "n_differ_half_pixel_shift": half}


def aligned(records, folder, workers):
    """(b): the warped maps against the redrawn ones, on the detector-aligned crops."""
    out = realign_records(records, folder, workers=workers, progress=False, labels="warp")
    info = json.loads((Path(folder) / INFO_NAME).read_text())
    boxes = {f["name"]: f["box"] for f in info["faces"]}
    pairs = []
    for src, r in zip(records, out):
        if r.missed:
            continue
        warped = read_label(r.label)
        drawn = render_labels(crop_points(read_pts(pts_path_for(src.image)), boxes[r.name]),
                              warped.shape)
        drawn[warped == IGNORE] = IGNORE
        pairs.append((drawn, warped))
    return _compare(pairs)


def _md(res, args):
    names = ["background", "lower face", "nose", "mouth", "eye L", "eye R", "brow L", "brow R"]
    lines = ["# Label maps: renderer vs dataset, nearest-neighbour warp vs redraw", "",
             f"`python -m studies.label_redraw --data {args.data}`", "",
             "| comparison | faces | identical | pixels differ | agreement % | worst face | "
             + " | ".join(names) + " |", "|" + "---|" * (6 + N)]
    for key, title in (("train", "(a) render(.pts) vs _label.png, train crops"),
                       ("test", "(a) render(.pts) vs _label.png, test crops"),
                       ("aligned", "(b) NN-warped vs redrawn, detector-aligned test")):
        r = res[key]
        lines.append(f"| {title} | {r['n_faces']} | {r['n_identical']} | {r['n_differ']} | "
                     f"{r['agreement_pct']} | {r['worst_face_differ']} | "
                     + " | ".join(f"{v:.2f}" for v in r["jaccard"]) + " |")
    lines += ["", "(a) differing pixels on a class edge: " + ", ".join(
        f"{k} {res[k]['n_differ_on_edge']} of {res[k]['n_differ']}" for k in ("train", "test"))
        + "; with every point moved by (+0.5, +0.5) px: " + ", ".join(
        f"{k} {res[k]['n_differ_half_pixel_shift']}" for k in ("train", "test"))
        + " pixels differ (so the .pts use the renderer's convention: integer = pixel centre, "
        "the one of the crop matrix)."]
    lines += ["", "Per-class columns: Jaccard (%) of the second map against the first "
              "(255 pixels not compared).", "",
              "Class areas in (b), pixels (redrawn / warped): " + ", ".join(
                  f"{n} {a}/{b}" for n, a, b in zip(names, res["aligned"]["area_ref"],
                                                     res["aligned"]["area_other"])), ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="/work/shared/data/faces300w")
    p.add_argument("--aligned-dir", default=None,
                   help="cache of the warped detector-aligned crops (default: under TMPDIR)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default=str(ROOT / "reports" / "landmarks" / "label-redraw"))
    args = p.parse_args(argv)
    data = Path(args.data)
    test, train = find_faces(data / "test"), find_faces(data / "train")
    folder = args.aligned_dir or Path(tempfile.gettempdir()) / "label-redraw-aligned"
    res = {"train": original(train), "test": original(test),
           "aligned": aligned(test, folder, args.workers)}
    write_json_atomic(args.out + ".json", res)
    write_text_atomic(args.out + ".md", _md(res, args))
    print(_md(res, args), file=sys.stderr)


if __name__ == "__main__":
    main()
