"""Integer CO2 rows: what int8 and int16 rounding do to a pooled forest,
and what the integer dot products cost against float32, measured in one script.

1. Rounding.  The 16-tree pooled forest of the sparse curve
   (``models/<run>/sparse-curve/co2-pooled_pool=<s>_float32-16``, float32 rows)
   is rounded *after training* to float16, int8 and int16
   (``facesegment.forest._sparse.quantise``: one scale per split, the
   threshold divided by it, no refit), and compared with itself: the share of
   weights rounded to zero, the rows' relative error ``|w - w_q| / |w|``
   (median), and the share of pixels whose label changes on the first
   ``--images`` test faces (``predict_image``, every pixel); for int16 rows,
   how many of a row's 32-byte chunks have high bytes that are not all zero
   (what the integer kernels dot besides the low bytes).  Training with
   ``weight_dtype`` refits each threshold instead, so this bounds the harm.
2. Dot products.  One thread, 8 windows of ``rows`` x 32 values per pass (a
   3x3-box window: 10 rows), random offsets in an image-sized buffer: ns per
   window dot for the float32 loop the float kernels use, and the two integer
   forms of ``facesegment.dense._simd`` (portable; ``vpdpbusd`` where this CPU
   has VNNI).

Writes ``reports/sparse/integer-rows-<run>.json`` and ``.md``.

    python -m benchmarks.integer_rows_check [--run faces300w-default] [--pools 3 2]
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
from numba import njit

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.data.datasets import load_face
from facesegment.dense import _simd, predict_image
from facesegment.forest._sparse import quantise
from facesegment.models import load_model
from pipelines.backend import records_from_json

DTYPES = ("float16", "int16", "int8")


def _rounded(model, dtype):
    """``model``'s dense rows rounded to ``dtype`` and its thresholds divided by
    each row's scale: ``(weights, thresholds, scales (n_rows, 1))``."""
    a = model.arrays
    w = a.weights.astype(np.float32)
    q = np.empty(w.shape, np.dtype(dtype))
    scales = np.ones((w.shape[0], 1))
    thr = a.threshold.copy()
    for o in range(w.shape[0]):
        q[o], _, scales[o] = quantise(w[o], dtype)
        nodes = np.flatnonzero(a.oblique == o)
        thr[nodes] = np.float32(thr[nodes] / scales[o])
    return q, thr, scales


def _high_chunks(q, cells, row):
    """Per int16 row, its 32-byte chunks (window rows padded to 32 bytes) whose
    high bytes are not all zero: what the integer kernels dot besides the low
    bytes (``q = 256 h + l``, both signed)."""
    q = q.astype(np.int32)
    high = (q - (((q + 128) & 255) - 128)) >> 8
    span = -(-row // 32) * 32
    padded = np.zeros((q.shape[0], cells, span), np.int32)
    padded[:, :, :row] = high.reshape(-1, cells, row)
    nz = (padded.reshape(q.shape[0], cells, span // 32, 32) != 0).any(axis=3)
    per_row = nz.sum(axis=(1, 2))
    return {"chunks_per_row": cells * span // 32,
            "high_chunks_mean": round(float(per_row.mean()), 2),
            "high_chunks_median": float(np.median(per_row))}


def rounding(folder, images):
    base = load_model(folder)
    w = base.arrays.weights.astype(np.float64)
    norm = np.linalg.norm(w, axis=1)
    labels = [predict_image(base, im)[1] for im in images]
    rows = {}
    for dt in DTYPES:
        q, thr, scale = _rounded(base, dt)
        err = np.linalg.norm(w - q.astype(np.float64) * scale, axis=1) / norm
        other = load_model(folder)
        other.arrays = base.arrays._replace(weights=q, threshold=thr)
        changed = [float((predict_image(other, im)[1] != lab).mean())
                   for im, lab in zip(images, labels)]
        rows[dt] = {"zeroed": round(float((q == 0).mean()), 4),
                    "relative_error_median": float(f"{np.median(err):.3g}"),
                    "labels_changed": float(f"{np.mean(changed):.3g}")}
        if dt == "int16":
            lay = base.layout
            rows[dt].update(_high_chunks(q, lay.cells, lay.cells * lay.channels))
        print(f"{folder.name} {dt}: {rows[dt]}", flush=True)
    return rows


@njit(fastmath=True)
def _fdot8(img, bb, rs, w, rows):
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    for dy in range(rows):
        o = dy * rs
        i0 = img[bb[0] + o:bb[0] + o + 32]
        i1 = img[bb[1] + o:bb[1] + o + 32]
        i2 = img[bb[2] + o:bb[2] + o + 32]
        i3 = img[bb[3] + o:bb[3] + o + 32]
        i4 = img[bb[4] + o:bb[4] + o + 32]
        i5 = img[bb[5] + o:bb[5] + o + 32]
        i6 = img[bb[6] + o:bb[6] + o + 32]
        i7 = img[bb[7] + o:bb[7] + o + 32]
        wr = w[dy * 32:dy * 32 + 32]
        for j in range(32):
            a0 += wr[j] * i0[j]
            a1 += wr[j] * i1[j]
            a2 += wr[j] * i2[j]
            a3 += wr[j] * i3[j]
            a4 += wr[j] * i4[j]
            a5 += wr[j] * i5[j]
            a6 += wr[j] * i6[j]
            a7 += wr[j] * i7[j]
    return a0, a1, a2, a3, a4, a5, a6, a7


def _driver(dot):
    @njit
    def run(img, bases, rs, w, rows, out):
        bb = np.empty(8, np.int64)
        n = 0
        for q in range(0, bases.shape[0] - 7, 8):
            for u in range(8):
                bb[u] = bases[q + u]
            v = dot(img, bb, rs, w, rows)
            for u in range(8):
                out[n] = bases[q + u]
                n += np.int64(v[u] > 0)
        return n

    return run


def _int_dot(idot):
    @njit
    def dot(img, bb, rs, w, rows):
        return idot(img, bb, rs, w, rows, 1, -1)

    return dot


def dots(rows=10, n=400_000, seed=0):
    rng = np.random.default_rng(seed)
    rs = 100 * 3
    img8 = rng.integers(0, 256, 300 * rs + 64).astype(np.uint8)
    bases = np.sort(rng.integers(0, 280 * rs, n)).astype(np.int64)
    wf = rng.standard_normal(rows * 32).astype(np.float32)
    w8 = rng.integers(-127, 128, rows * 32).astype(np.int8)
    out = np.empty(n, np.int64)
    forms = {"float32": (_driver(_fdot8), img8.astype(np.float32), wf),
             "int8 portable": (_driver(_int_dot(_simd.idot8_portable)), img8, w8)}
    if _simd.VNNI:
        forms["int8 vpdpbusd"] = (_driver(_int_dot(_simd.idot8_vnni)), img8, w8)
    res = {}
    for name, (run, img, w) in forms.items():
        run(img, bases, rs, w, rows, out)
        best = min(_timed(run, img, bases, rs, w, rows, out) for _ in range(5))
        res[name] = round(1e9 * best / n, 2)
        print(f"dot {name}: {res[name]} ns per window", flush=True)
    return res


def _timed(run, *args):
    t0 = time.perf_counter()
    run(*args)
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default")
    p.add_argument("--pools", nargs="+", type=int, default=[3, 2])
    p.add_argument("--images", type=int, default=3)
    args = p.parse_args(argv)
    splits = json.loads((ROOT / "reports" / "runs" / args.run / "splits.json").read_text())
    images = [load_face(r)[0] for r in records_from_json(splits["test"][:args.images])]
    doc = {"run": args.run, "images": args.images, "vnni": _simd.VNNI, "rounding": {}}
    for s in args.pools:
        folder = ROOT / "models" / args.run / "sparse-curve" / f"co2-pooled_pool={s}_float32-16"
        doc["rounding"][str(s)] = rounding(folder, images)
    doc["dot_ns_per_window"] = dots()
    out = ROOT / "reports" / "sparse" / f"integer-rows-{args.run}.json"
    write_json_atomic(out, doc, sort_keys=True)
    lines = [f"Integer rows on {args.run}: the curve's 16-tree pooled float32 forests rounded "
             f"after training (no refit); labels of every pixel of {args.images} test faces.",
             "", "| boxes | rounded to | weights zeroed | row error (median) | labels changed |",
             "| --- | --- | ---: | ---: | ---: |"]
    for s, rows in doc["rounding"].items():
        for dt, r in rows.items():
            lines.append(f"| {s}x{s} | {dt} | {100 * r['zeroed']:.1f}% | "
                         f"{100 * r['relative_error_median']:.3f}% | "
                         f"{100 * r['labels_changed']:.2f}% |")
    for s, rows in doc["rounding"].items():
        h = rows["int16"]
        lines.append(f"\n{s}x{s} boxes, int16: {h['high_chunks_mean']} of the "
                     f"{h['chunks_per_row']} chunks of a row have high bytes not all zero "
                     f"(median {h['high_chunks_median']:g}).")
    lines += ["", "Dot of 8 windows of 10 x 32 values, one thread, ns per window: "
              + ", ".join(f"{k} {v}" for k, v in doc["dot_ns_per_window"].items()) + "."]
    write_text_atomic(out.with_suffix(".md"), "\n".join(lines) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
