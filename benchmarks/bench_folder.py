"""Whole-folder throughput of ``facesegment segment`` with the default model,
beside ``facesegment label`` (one dlib landmark rendering per face) in the same
run (results in reports/bench/folder.json).

On the first ``--n`` images of lfw-gray (sorted by path; ``--n 0``: all
13,233), each timed end to end from the file names to the written outputs
(label maps, overlays and the summary CSV), with a warm model (its kernels
compiled and the face mesh loaded on one image first):

* ``segment``: :func:`facesegment.faces.folder.segment_folder`, local threads
  (one per core);
* ``segment --scheduler``: the same on a local Dask cluster of ``--workers``
  worker processes (one thread each; needs the pipeline extra), the model
  sent to each worker once;
* ``label``: :func:`facesegment.faces.label.label_folder` (dlib's detector and 68
  landmarks, the polygons drawn), ``--workers`` processes.

The label maps of the first ``--check`` images are compared with
``facesegment.segment`` run image by image (they must be identical).

    nice python -m benchmarks.bench_folder [--n 500] [--workers 2] [--check 20]
    nice python -m benchmarks.bench_folder --n 0 --no-cluster --no-label \
        --out reports/bench/folder-lfw.json        # all of lfw-gray, threads only
"""

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FACESEGMENT_SHARED", ROOT.parent / "shared")) / "data"
LFW = SHARED / "lfw-gray" / "lfw"
OUT = ROOT / "reports" / "bench" / "folder.json"


def images(n):
    paths = sorted(str(p) for p in LFW.glob("*/*.jpg"))
    if not paths:
        raise SystemExit(f"bench_folder: no images under {LFW}")
    return paths if n <= 0 else paths[:n]


def timed_segment(model, paths, out, scheduler=None, n_workers=None):
    from facesegment.faces.folder import segment_folder

    t0 = time.perf_counter()
    res = segment_folder(model, paths, out, scheduler=scheduler, n_workers=n_workers,
                         progress=True)
    seconds = time.perf_counter() - t0
    faces = sum(r.faces for r in res)
    return {"images": len(paths), "seconds": round(seconds, 1),
            "images_per_s": round(len(paths) / seconds, 2), "faces": faces,
            "no_face": sum(r.status == "no face" for r in res)}


def timed_label(paths, out, n_workers):
    import shutil

    from facesegment.faces.label import label_folder

    src = Path(out) / "in"   # label reads a folder: link the images into one
    for p in paths:
        dst = src / Path(p).parent.name / Path(p).name
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(p, dst)
        except OSError:
            shutil.copyfile(p, dst)
    t0 = time.perf_counter()
    rows = label_folder(src, Path(out) / "labels", n_workers=n_workers, progress=True)
    seconds = time.perf_counter() - t0
    return {"images": len(paths), "seconds": round(seconds, 1),
            "images_per_s": round(len(paths) / seconds, 2),
            "faces": sum(int(r.get("faces") or 0) for r in rows)}


def identical_to_single(model, paths, out, n):
    """How many of the first ``n`` folder outputs equal the labels of
    ``segment_image`` (what ``facesegment.segment`` runs) image by image."""
    from PIL import Image

    from facesegment.data.imageio import read_image
    from facesegment.faces.folder import LABEL_SUFFIX, collect_inputs
    from facesegment.faces.segment import segment_image

    _, items = collect_inputs(paths[:n])
    same = 0
    for it in items:
        image = read_image(it.path)
        labels, _ = segment_image(model, image)
        if labels is None:
            labels = np.zeros(image.shape[:2], np.uint8)
        got = np.array(Image.open(Path(out) / (it.output + LABEL_SUFFIX)))
        same += bool(np.array_equal(got, labels))
    return same


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_folder",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=500, help="images (0: all of lfw-gray)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--check", type=int, default=20)
    p.add_argument("--no-cluster", action="store_true", help="skip the local Dask cluster run")
    p.add_argument("--no-label", action="store_true", help="skip facesegment label")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)
    from facesegment.api import load_model, segment
    from facesegment.atomic import write_json_atomic
    from facesegment.data.imageio import read_image

    paths = images(args.n)
    model = load_model()
    segment(read_image(paths[0]), model)       # warm: kernels compiled, the mesh loaded
    from facesegment.models import default_name

    result = {"data": "lfw-gray", "model": default_name(),
              "cpu_count": os.cpu_count(), "workers": args.workers}
    with tempfile.TemporaryDirectory() as tmp:
        result["segment"] = timed_segment(model, paths, Path(tmp) / "threads",
                                          n_workers=args.workers)
        if args.check > 0:
            result["identical_to_single"] = [identical_to_single(
                model, paths, Path(tmp) / "threads", args.check), min(args.check, len(paths))]
        if not args.no_cluster:
            from distributed import LocalCluster

            with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                              dashboard_address=":0", silence_logs=logging.ERROR) as cluster:
                fresh = load_model()   # sent to the workers before any use
                result["segment_cluster"] = timed_segment(fresh, paths, Path(tmp) / "cluster",
                                                          scheduler=cluster.scheduler_address)
            result["cluster_speedup"] = round(result["segment_cluster"]["images_per_s"]
                                              / result["segment"]["images_per_s"], 2)
        if not args.no_label:
            result["label"] = timed_label(paths, tmp, args.workers)
            result["segment_vs_label"] = round(result["segment"]["images_per_s"]
                                               / result["label"]["images_per_s"], 2)
    if args.n <= 0:
        result["all_lfw_minutes"] = round(result["segment"]["seconds"] / 60, 1)
    for k in ("segment", "segment_cluster", "label"):
        if k in result:
            print(f"{k}: {result[k]['images_per_s']} images/s ({result[k]['seconds']} s)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out, result, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own report is regenerated
        sys.exit(main())
