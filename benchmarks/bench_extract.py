"""Benchmark of window extraction (`facesegment extract`).

    python -m benchmarks.bench_extract                    # -> reports/bench/extract.json
    python -m benchmarks.bench_extract --windows 64000    # a quicker run
    python -m benchmarks.bench_extract --skip-lfw         # faces300w only

1. faces300w/train -> 256,000 class-balanced windows (the paper's windows per
   tree): wall-clock and CPU seconds of both passes, windows/s, file size.
2. All of lfw-gray with the label maps of ``facesegment label`` in
   data/labels/lfw-gray (skipped with a message when absent): images/s over the
   images that have a label map (the others are skipped by the error policy).

The machine's load average before and after each run is recorded, since the
figures depend on what else runs on the cores.  Outputs go to a temporary
folder and are deleted unless --keep.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FACESEGMENT_SHARED", ROOT.parent / "shared")) / "data"


def _run(records, out, n_windows, seed, workers, data_root, labels_root=None, window=31):
    from facesegment.data.extract import extract_windows

    load0 = os.getloadavg()[0]
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    res = extract_windows(records, out, n_windows=n_windows, seed=seed, n_workers=workers,
                          data_root=data_root, labels_root=labels_root, progress=True,
                          window=window)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return res, {
        "images": res.n_images,
        "skipped_images": len(res.skipped),
        "windows": int(res.meta.n_windows),
        "seconds": round(wall, 2),
        "seconds_count_pass": round(res.seconds["count"], 2),
        "seconds_cut_pass": round(res.seconds["cut"], 2),
        "cpu_seconds": round(cpu, 2),
        "windows_per_second": round(res.meta.n_windows / wall, 1),
        "images_per_second": round((res.n_images + len(res.skipped)) / wall, 1),
        "file_mb": round(res.file_bytes / 1e6, 1),
        "layout": res.meta.layout.describe(),
        "raw_mb": round(res.meta.n_windows * res.meta.layout.n_features / 1e6, 1),
        "load_average_before": round(load0, 2),
        "load_average_after": round(os.getloadavg()[0], 2),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=256000, help="windows from faces300w/train (default 256000)")
    ap.add_argument("--lfw-windows", type=int, default=64000, help="windows from lfw-gray (default 64000)")
    ap.add_argument("--workers", type=int, default=None, help="local threads (default: all cores)")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--window", type=int, default=31, help="window side (default 31, the paper's)")
    ap.add_argument("--lfw-labels", default=str(ROOT / "data" / "labels" / "lfw-gray"),
                    help="label tree of lfw-gray made by `facesegment label`")
    ap.add_argument("--skip-lfw", action="store_true", help="only the faces300w part")
    ap.add_argument("--keep", metavar="DIR", default=None, help="keep the windows files in DIR")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "extract.json"), help="result JSON")
    args = ap.parse_args(argv)

    from facesegment.data.datasets import find_faces
    from facesegment.parallel import default_workers

    report = {"cpu_count": os.cpu_count(), "workers": args.workers or default_workers(),
              "command": "python -m benchmarks.bench_extract " + " ".join(argv or sys.argv[1:])}
    tmp = tempfile.mkdtemp(prefix="bench_extract_") if args.keep is None else args.keep
    os.makedirs(tmp, exist_ok=True)
    try:
        train = SHARED / "faces300w" / "train"
        if train.is_dir():
            recs = find_faces(train)
            print(f"faces300w/train: {len(recs)} images -> {args.windows} windows", file=sys.stderr)
            _, r = _run(recs, os.path.join(tmp, "faces300w_train.h5"), args.windows, args.seed,
                        args.workers, train, window=args.window)
            report["faces300w_train"] = r
            print(json.dumps(r), file=sys.stderr)
        else:
            print(f"skipped faces300w: {train} is absent", file=sys.stderr)
        lfw = SHARED / "lfw-gray" / "lfw"
        labels = Path(args.lfw_labels)
        if args.skip_lfw:
            pass
        elif not lfw.is_dir():
            print(f"skipped lfw-gray: {lfw} is absent", file=sys.stderr)
        elif not labels.is_dir():
            print(f"skipped lfw-gray: no label maps at {labels} (make them with "
                  f"`facesegment label {lfw} {labels}`)", file=sys.stderr)
        else:
            recs = find_faces(lfw, labels=labels, require_labels=False)
            n_lab = sum(r.label is not None for r in recs)
            print(f"lfw-gray: {len(recs)} images, {n_lab} with label maps -> {args.lfw_windows} windows",
                  file=sys.stderr)
            _, r = _run(recs, os.path.join(tmp, "lfw_gray.h5"), args.lfw_windows, args.seed,
                        args.workers, lfw, labels, window=args.window)
            r["images_with_labels"] = n_lab
            report["lfw_gray"] = r
            print(json.dumps(r), file=sys.stderr)
    finally:
        if args.keep is None:
            for f in os.listdir(tmp):
                os.remove(os.path.join(tmp, f))
            os.rmdir(tmp)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + f".tmp{os.getpid()}")
    part.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(part, out)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
