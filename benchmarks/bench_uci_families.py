"""Test error and fit time of the forest families on one UCI dataset (30 trees, n_jobs=1).

    python -m benchmarks.bench_uci_families satimage     # or pendigits, letter, ...

Our ExtraTreesForest, RandomFernsForest (mean and product rules),
RotationForest and AxisAlignedForest beside scikit-learn's RandomForest and
ExtraTrees (entropy criterion) in the same run; mean and standard deviation
of the test error over seeds 0-2, median fit time.  Writes
reports/bench/uci-families-NAME.json.  (The full Table I harness is
`make uci`; this is the quick comparison docs/forests-families.md quotes.)
"""
import json
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

from facesegment.forest import (AxisAlignedForest, ExtraTreesForest, RandomFernsForest,
                                RotationForest)

ROOT = Path(__file__).resolve().parents[1]
name = sys.argv[1] if len(sys.argv) > 1 else "satimage"
root = ROOT.parent / "shared" / "data" / "uci" / name
tr, te = np.load(f"{root}/train.npz"), np.load(f"{root}/test.npz")
X, y, Xt, yt = tr["X"], tr["y"], te["X"], te["y"]
T = 30
MODELS = {
    "ExtraTreesForest (ours)": lambda s: ExtraTreesForest(T, random_state=s, n_jobs=1),
    "RandomFernsForest (ours, depth 10, axis tests, mean)": lambda s: RandomFernsForest(T, random_state=s, n_jobs=1),
    "RandomFernsForest (ours, depth 10, two-probe tests, mean)": lambda s: RandomFernsForest(T, test="two-probe", random_state=s, n_jobs=1),
    "RotationForest (ours, M=3, all features)": lambda s: RotationForest(T, random_state=s, n_jobs=1),
    "AxisAlignedForest (ours)": lambda s: AxisAlignedForest(T, random_state=s, n_jobs=1),
    "sklearn RandomForestClassifier (entropy)": lambda s: RandomForestClassifier(T, criterion="entropy", random_state=s, n_jobs=1),
    "sklearn ExtraTreesClassifier (entropy)": lambda s: ExtraTreesClassifier(T, criterion="entropy", random_state=s, n_jobs=1),
}
for make in MODELS.values():  # load / compile the Numba kernels before timing
    make(0).set_params(n_estimators=1).fit(X[:200], y[:200])
rows = {}
for label, make in MODELS.items():
    errs, wall, cpu, extra = [], [], [], []
    for seed in (0, 1, 2):
        est = make(seed)
        c0, t0 = time.process_time(), time.perf_counter()
        est.fit(X, y)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        errs.append(100 * (1 - est.score(Xt, yt)))
        if isinstance(est, RandomFernsForest):
            pred = est.classes_[est.predict_proba_product(Xt).argmax(axis=1)]
            extra.append(100 * np.mean(pred != yt))
    rows[label] = {"error_mean": float(np.mean(errs)), "error_std": float(np.std(errs)),
                   "fit_wall_median": float(np.median(wall)), "fit_cpu_median": float(np.median(cpu)),
                   "product_error_mean": float(np.mean(extra)) if extra else None}
    r = rows[label]
    print(f"| {label} | {r['error_mean']:.2f} ± {r['error_std']:.2f} | {r['fit_wall_median']:.2f} | "
          f"{r['fit_cpu_median']:.2f} |" + (f" product rule: {r['product_error_mean']:.2f}" if extra else ""),
          flush=True)
from facesegment.atomic import write_json_atomic

write_json_atomic(ROOT / "reports" / "bench" / f"uci-families-{name}.json",
                  {"dataset": name, "n_train": len(y), "n_test": len(yt), "trees": T, "rows": rows})
