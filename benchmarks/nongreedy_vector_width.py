"""The co2-nongreedy selection forests compiled for two vector widths.

The non-greedy trees' kernels may reassociate their sums (``REASSOC`` in
``facesegment/_jit.py``), so their forests follow the vector width Numba
compiles for.  This script shows by how much: for each setting of the quick
grid's co2-nongreedy row, the selection forest (``[select]`` trees and
windows, the settings it inherits from the run's ``chosen.json``) is fitted on
the run's windows and scored on the selection's validation images exactly as
``make select`` does, in two child processes, each with a fresh Numba cache:

* ``avx2``: Numba compiling for an AVX2-only CPU (Haswell: 256-bit vectors);
* ``avx512``: AVX-512 with 512-bit vectors preferred (needs a CPU with
  AVX-512 to run; skipped otherwise).

Each child reports the forest's node count, a digest of its arrays and its
validation Jaccard; the result goes to ``reports/bench/nongreedy-vector-width.json``.
Needs a finished ``make select`` (the windows file, ``chosen.json`` and
``selection.json`` of the run).

    python -m benchmarks.nongreedy_vector_width [--run faces300w-default]
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.co2_speed import AVX2_FEATURES

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "reports" / "bench" / "nongreedy-vector-width.json"
KIND = "co2-nongreedy"

#: Numba targets: (CPU name, features); the AVX2-only features are co2_speed's.
TARGETS = {"avx2": ("haswell", AVX2_FEATURES),
           "avx512": ("skylake-avx512", AVX2_FEATURES + ",+avx512f,+avx512bw,+avx512dq,"
                      "+avx512vl,+avx512cd,-prefer-256-bit")}


def _digest(fa):
    h = hashlib.sha256()
    for name in ("left", "feature", "threshold", "value", "weights"):
        h.update(getattr(fa, name).tobytes())
    return h.hexdigest()[:16]


def child(run):
    """Fit and score every co2-nongreedy setting of the quick grid; print JSON."""
    import numpy as np

    from pipelines import backend, scoring, selection
    from pipelines.config import load_config
    from pipelines.design import design_of
    from pipelines.stages import Context

    reports = ROOT / "reports" / "runs" / run
    data = json.loads((reports / "config.json").read_text())["data"]["path"]
    cfg = load_config(ROOT / "pipelines" / "config.toml", data=str((ROOT / data).resolve()))
    ctx = Context(cfg, root=ROOT)
    if ctx.run != run:
        raise SystemExit(f"nongreedy_vector_width: the config names the run {ctx.run!r}, "
                         f"not {run!r}")
    ws = ctx.windows_set()
    chosen = ctx.read_json("chosen.json")
    sel = ctx.read_json("selection.json")
    names = sel["validation_images"]
    by_name = {r.name: r for r in ctx.splits()["validation"]}
    records = [by_name[n] for n in names]
    n = cfg["select"]["n_trees"]
    rows = []
    for s in selection.grids(cfg)[KIND]:
        setting = {**design_of(KIND).inherited(chosen), **s}
        params = selection.selection_params(cfg, KIND, setting, len(ws.y), ws.meta.layout)
        est = backend.make_estimator(KIND, params, n, cfg["run"]["seed"], None, None)
        est.verbose = 0
        layout = selection.kind_layout(cfg, KIND, setting, ws.meta.layout)
        backend.fit(est, ws, layout)
        model = backend.to_model(est, KIND, ws.meta, {"purpose": "selection"}, layout)
        res = scoring.score_model(model, records, [n], sel["alphas"],
                                  mode=cfg["evaluate"]["mode"],
                                  pixel_stride=sel["pixel_stride"])
        a = scoring.best_alpha(res, n)
        rows.append({"setting": s, "n_nodes": int(est.forest_.n_nodes),
                     "digest": _digest(est.forest_),
                     "validation_jaccard": float(np.round(
                         res["trees"][str(n)]["alpha"][a]["mean_jaccard"], 4))})
    print(json.dumps(rows))


def _host_has_avx512():
    from llvmlite import binding as llvm

    return "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")


def run_target(run, cpu, features):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features,
                   NUMBA_CACHE_DIR=cache)
        done = subprocess.run([sys.executable, "-m", "benchmarks.nongreedy_vector_width",
                               "--run", run, "--child"], cwd=ROOT, env=env,
                              capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"nongreedy_vector_width: the {cpu} child failed:\n"
                         f"{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", default="faces300w-default")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.run)
    targets = dict(TARGETS)
    if not _host_has_avx512():
        targets.pop("avx512")
        print("nongreedy_vector_width: this CPU has no AVX-512: the avx512 target is skipped")
    res = {name: run_target(args.run, cpu, feats) for name, (cpu, feats) in targets.items()}
    for name, rows in res.items():
        for r in rows:
            print(f"{name:7s} {r['setting']}: {r['n_nodes']} nodes, forest {r['digest']}, "
                  f"validation {r['validation_jaccard']:.4f}")
    from facesegment.atomic import write_json_atomic

    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out, {"run": args.run, "kind": KIND, "targets": res}, indent=1,
                      sort_keys=True)
    print(f"written {args.out}")


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own report is regenerated
        sys.exit(main())
