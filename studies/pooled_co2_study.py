"""Can dense CO2 splits over box-pooled windows keep dense CO2's accuracy? (window level)

The goal: CO2 splits that cost ~10x less than dense ones at the same
Jaccard. Sparse splits over single window values lose 3-4 points of window
accuracy whatever k (``studies/sparse_windows_study.py``): what a dense
split gains is a smoothing filter. This study ties the weights over s x s
patches instead: each window (31 x 31 x 3) becomes its s x s box means at
stride s (non-overlapping boxes, rounded to uint8, the last row and column
dropped: 15 x 15 x 3 = 675 values for s = 2, 10 x 10 x 3 = 300 for s = 3,
6 x 6 x 3 = 108 for s = 5), and CO2 grows dense splits over those values: a
split reads p / s^2 values (computable at inference from box-filtered image
planes at a stride), so its cost falls by about s^2.

On the windows of a finished face run, 4-tree forests (the run's co2-best
settings, 16,000 windows per tree, ``oblique_min_samples`` 50) are trained on
100,000 windows and scored on the other 28,000, exactly as the sparse study
(whose dense and sparse rows are read from ``reports/sparse/windows-study.json``
when present); the axis-aligned and two-probe forests on the same pooled values
are the cheap peers. Writes ``reports/sparse/pooled-study.json``.

    python -m studies.pooled_co2_study [--run faces300w-default] [--strides 2 3 5]
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic
from facesegment.forest import AxisAlignedForest, CO2Forest, TwoProbeForest
from benchmarks.sparse_windows_study import study_inputs


def pooled(W, s):
    """uint8 (n, m, m, c): the s x s box means (rounded) at stride s, m = h // s."""
    n, h, w, c = W.shape
    m = h // s
    V = W[:, :m * s, :m * s].astype(np.uint16).reshape(n, m, s, m, s, c).sum(axis=(2, 4))
    return ((V + s * s // 2) // (s * s)).astype(np.uint8)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default")
    p.add_argument("--trees", type=int, default=4)
    p.add_argument("--strides", type=int, nargs="+", default=[2, 3, 5])
    args = p.parse_args(argv)
    ws, tr, te, params = study_inputs(args.run)
    W, y = ws.X, ws.y
    n = len(y)
    common = {k: params[k] for k in ("max_samples", "max_depth", "min_samples_leaf",
                                     "bootstrap")}
    rows = []
    for s in args.strides:
        X = pooled(W, s).reshape(n, -1)
        mean = X[tr[:20000]].mean(0).astype(np.float32)
        std = X[tr[:20000]].std(0).astype(np.float32)
        q = max(1, int(round(X.shape[1] ** 0.6)))
        for name, est in (
                ("co2-best", CO2Forest(args.trees, random_state=0, n_jobs=2,
                                       **{**params, "max_features": q})),
                ("axis", AxisAlignedForest(args.trees, random_state=0, n_jobs=2,
                                           max_features=q, **common)),
                ("two-probe", TwoProbeForest(args.trees, random_state=0, n_jobs=2,
                                             n_pairs=params.get("n_pairs", 400), **common))):
            t0 = time.perf_counter()
            fit_kw = {"feature_mean": mean, "feature_std": std} if name == "co2-best" else {}
            est.fit(np.ascontiguousarray(X[tr]), y[tr], **fit_kw)
            acc = float(est.score(np.ascontiguousarray(X[te]), y[te]))
            row = {"stride": s, "features": int(X.shape[1]), "forest": name,
                   "accuracy": round(acc, 4), "dense_rows": int(est.forest_.weights.shape[0]),
                   "fit_seconds": round(time.perf_counter() - t0, 1)}
            rows.append(row)
            print(row, flush=True)
    ref_path = ROOT / "reports" / "sparse" / "windows-study.json"
    ref = json.loads(ref_path.read_text())["settings"] if ref_path.is_file() else []
    out = ROOT / "reports" / "sparse" / "pooled-study.json"
    write_json_atomic(out, {"run": args.run, "n_trees": args.trees, "train_windows": 100000,
                            "test_windows": int(len(te)), "settings": rows,
                            "raw_windows_reference": ref}, sort_keys=True)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
