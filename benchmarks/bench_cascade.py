"""Where the time of an auto-context cascade goes, per 250x250 face.

For a cascade model of a finished run (default: the faces300w run's axis>axis
cascade), times on the first N test faces (median of each, after one warm-up):
stage 1 (``predict_proba_raw`` in "full" mode), the context planes
(``Cascade.context`` minus stage 1: for two stages, stage 1's maps as the
context reads them and ``context_planes``), the last stage on those planes, and the whole
``predict_image``; beside them, the peer: the run's single forest of stage 1's
kind (the same model as stage 1) through ``predict_image``.  Also reports
which kernel family the last stage runs: the fast integer records on the
split buffer (image, then the context planes with the image's strides;
facesegment.dense._split) when its nodes are axis-aligned, the general
kernels otherwise.  Writes ``reports/bench/cascade-<model folder>.json``.

    python -m benchmarks.bench_cascade [--model models/faces300w-default/ac-axis_axis-32]
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic
from facesegment.data.datasets import load_face
from facesegment.dense import predict as dense
from facesegment.models import load_model
from pipelines.backend import records_from_json


def _median_ms(fn, reps):
    fn()                                   # compile / warm caches outside the timing
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(1000.0 * (time.perf_counter() - t0))
    return float(np.median(out))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="models/faces300w-default/ac-axis_axis-32")
    p.add_argument("--run", default="reports/runs/faces300w-default")
    p.add_argument("--images", type=int, default=5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", default=None,
                   help="default: reports/bench/cascade-<model folder name>.json")
    args = p.parse_args(argv)
    cascade = load_model(args.model)
    first, last = cascade.stages[0], cascade.final
    splits = json.loads((Path(args.run) / "splits.json").read_text())
    images = [load_face(r)[0] for r in records_from_json(splits["test"][:args.images])]
    rows = {k: [] for k in ("stage1", "planes", "last_stage", "cascade", "peer_forest")}
    for img in images:
        planes = cascade.context(img)
        stage1 = _median_ms(lambda: dense.predict_proba_raw(first, img, mode="full"),
                            args.reps)
        rows["stage1"].append(stage1)    # the context = the stages before the last + planes
        rows["planes"].append(_median_ms(lambda: cascade.context(img), args.reps) - stage1)
        rows["last_stage"].append(_median_ms(
            lambda: dense.predict_proba_raw(last, img, mode="full", planes=planes), args.reps))
        rows["cascade"].append(_median_ms(
            lambda: dense.predict_image(cascade, img, mode="full"), args.reps))
        rows["peer_forest"].append(_median_ms(
            lambda: dense.predict_image(first, img, mode="full"), args.reps))
    prep = dense._prepare(last, images[0], planes, None, None, 0, split_ok=True)
    split = isinstance(prep, dense._Split)
    res = {"model": args.model, "n_images": len(images), "reps": args.reps,
           "image_shape": list(images[0].shape), "stage_kinds": cascade.stage_kinds,
           "n_context_planes": cascade.spec.n_planes,
           "last_stage_channels": last.layout.channels,
           "last_stage_kernel": ("fast, split buffer, mode %d" % prep.fast[1] if split
                                 else "fast" if dense._fast_records(prep) is not None
                                 else "general"),
           "split_buffer_mb": round(prep.img.nbytes / 1e6, 1) if split else None,
           "ms_per_image": {k: round(float(np.median(v)), 1) for k, v in rows.items()}}
    res["load_average"] = round(os.getloadavg()[0], 2)
    res["ratio_cascade_to_peer"] = round(res["ms_per_image"]["cascade"]
                                         / res["ms_per_image"]["peer_forest"], 2)
    out = args.out or ROOT / "reports" / "bench" / f"cascade-{Path(args.model).name}.json"
    write_json_atomic(out, res, indent=1, sort_keys=True)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
