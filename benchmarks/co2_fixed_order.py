"""The speed cost of CO2 results that do not depend on the CPU's vector width.

CO2's split search and its partition of a node's samples use float32 dot
products in a fixed order (``facesegment/forest/_dots.py``: 32 lanes, IEEE
arithmetic) instead of loops the compiler reassociates (``fastmath``), so a
forest trained with AVX2 and with AVX-512 is the same bytes
(``tests/forest/test_co2_cpu.py``).  This script measures what that costs,
side by side in one run:

* ``fit``: ``CO2Forest.fit`` on the same data (uint8 windows of the paper's
  2,883 values, classes by an oblique rule) with this checkout's code and
  with the code of ``--baseline`` (a git revision whose kernels reassociate;
  exported with ``git archive`` to a temporary folder), each in a child
  process with a fresh Numba cache, timed after a small warm-up fit that
  compiles the kernels;
* ``dot``: the 2,883-value dot alone, the fixed order against the
  reassociated loop, in this process.

Each timing is the median of ``--repeats`` runs; ratios are after / before.

    python -m benchmarks.co2_fixed_order [--baseline HEAD~3] [--out reports/bench/co2-fixed-order.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, statistics, sys, time
import numpy as np
from facesegment.forest import CO2Forest
n, p, trees, depth, repeats = (int(v) for v in sys.argv[1:6])
rng = np.random.default_rng(0)
X = rng.integers(0, 256, size=(n, p), dtype=np.uint8)
s = X[:, :p // 2].astype(np.int64).sum(axis=1) - X[:, p // 2:].astype(np.int64).sum(axis=1)
y = np.digitize(s, np.quantile(s, [0.2, 0.4, 0.6, 0.8]))
kw = dict(max_features=int(p ** 0.7), oblique_min_samples=100, random_state=0, n_jobs=1)
CO2Forest(n_estimators=1, max_depth=3, **kw).fit(X[:800], y[:800])   # compile
times = []
for _ in range(repeats):
    t0 = time.perf_counter()
    CO2Forest(n_estimators=trees, max_depth=depth, **kw).fit(X, y)
    times.append(time.perf_counter() - t0)
print(json.dumps({"seconds": statistics.median(times), "runs": times}))
"""


def _fit_time(source_root, args):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(source_root))
        done = subprocess.run([sys.executable, "-c", CHILD, str(args.samples), str(args.features),
                               str(args.trees), str(args.depth), str(args.repeats)],
                              env=env, cwd=source_root, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"child with the code of {source_root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _dot_times(args):
    from numba import njit

    from facesegment.forest._dots import dot

    @njit(fastmath={"reassoc", "contract", "nsz", "arcp"})   # the loop before, as it was
    def reassociated(w, x):
        s = np.float32(0.0)
        for j in range(w.shape[0]):
            s += w[j] * np.float32(x[j])
        return s

    def driver(f):
        @njit
        def run(w, X):
            t = np.float32(0.0)
            for i in range(X.shape[0]):
                t += f(w, X[i])
            return t
        return run

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (4000, args.features), dtype=np.uint8)
    w = rng.standard_normal(args.features).astype(np.float32)
    out = {}
    for name, f in (("fixed order", dot), ("reassociated", reassociated)):
        run = driver(f)
        run(w, X)
        times = []
        for _ in range(max(5, args.repeats)):
            t0 = time.perf_counter()
            run(w, X)
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times) / X.shape[0] * 1e9   # ns per dot
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="f10e3bf",
                    help="git revision whose CO2 kernels reassociate (default f10e3bf)")
    ap.add_argument("--samples", type=int, default=6000)
    ap.add_argument("--features", type=int, default=2883)
    ap.add_argument("--trees", type=int, default=2)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="JSON file of the results (default: print only)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as base:
        archive = subprocess.run(["git", "archive", args.baseline, "facesegment"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
        before = _fit_time(Path(base), args)
    after = _fit_time(ROOT, args)
    dots = _dot_times(args)
    doc = {"baseline": args.baseline, "samples": args.samples, "features": args.features,
           "trees": args.trees, "depth": args.depth, "repeats": args.repeats,
           "fit_seconds": {"reassociated (baseline)": before, "fixed order": after},
           "fit_ratio": round(after["seconds"] / before["seconds"], 3),
           "dot_ns": {k: round(v, 1) for k, v in dots.items()},
           "dot_ratio": round(dots["fixed order"] / dots["reassociated"], 3)}
    print(json.dumps(doc, indent=1))
    if args.out:
        from facesegment.atomic import write_json_atomic

        write_json_atomic(args.out, doc)


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
