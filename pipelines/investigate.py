"""Why does (or doesn't) CO2 beat the baselines? A window-level study.

``python -m pipelines.investigate --run faces300w-default`` (``make investigate``)
takes the run's training windows, holds out the windows of every 4th training
image, trains small forests (``--trees`` trees of ``--samples`` windows, depth
``--depth``) of each kind and of CO2 variants (learning rate η, ν, SGD passes,
how small a node may be and still get an oblique split), and writes the
held-out window accuracy (classes balanced, so chance is 12.5%), training time
and the CO2 optimiser's statistics (how often the oblique split beat the
univariate one) to ``reports/runs/<run>/investigation.json``.  The report stage
renders it.  Window accuracy isolates the split functions from the
prior reweighting and the dense evaluation.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from facesegment.atomic import write_json_atomic

from . import backend
from .investigate_report import markdown  # noqa: F401  (re-exported)

#: (label, kind, extra estimator parameters); oblique_min_samples is given as a
#: fraction of the windows per tree.
VARIANTS = [
    ("axis-aligned, q = p^0.7", "axis", {"max_features": 264}),
    ("two-probe, 400 pairs", "two-probe", {"n_pairs": 400}),
    ("CO2 ν=1 η=1e-3 (default)", "co2", {"nu": 1.0, "eta": 1e-3}),
    ("CO2 ν=1 η=1e-4 (the paper's)", "co2", {"nu": 1.0, "eta": 1e-4}),
    ("CO2 ν=1 η=1e-2", "co2", {"nu": 1.0, "eta": 1e-2}),
    ("CO2 ν=10 η=1e-3", "co2", {"nu": 10.0, "eta": 1e-3}),
    ("CO2 ν=0.1 η=1e-3", "co2", {"nu": 0.1, "eta": 1e-3}),
    ("CO2 ν=1 η=1e-3, 6 SGD passes (default 4)", "co2", {"nu": 1.0, "eta": 1e-3, "n_passes": 6.0}),
    ("CO2 ν=1 η=1e-3, oblique down to nodes of 1/160 of the sample", "co2",
     {"nu": 1.0, "eta": 1e-3, "min_frac": 1 / 160}),
    ("CO2 ν=1 η=1e-3, oblique only at nodes of ≥ 1/4 of the sample", "co2",
     {"nu": 1.0, "eta": 1e-3, "min_frac": 1 / 4}),
]


def run_study(ws, trees=4, samples=32000, depth=16, seed=0, workers=None, log=print):
    """Train every variant on 3/4 of the images' windows, score the rest."""
    X = ws.X.reshape(len(ws.y), -1)
    held = (ws.image_index % 4) == 0
    Xtr, ytr, Xte, yte = X[~held], ws.y[~held], X[held], ws.y[held]
    samples = min(samples, len(ytr))
    rows = []
    for label, kind, extra in VARIANTS:
        extra = dict(extra)
        params = {"max_depth": depth, "max_samples": samples, "min_samples_leaf": 5,
                  "bootstrap": True}
        if kind == "co2":
            params["max_features"] = 264
            params["oblique_min_samples"] = max(2, int(samples * extra.pop("min_frac", 1 / 32)))
        params.update(extra)
        est = backend.make_estimator(kind, params, trees, seed, workers)
        est.verbose = 0
        sub = type(ws)(Xtr, ytr, ws.image_index[~held], ws.centers[~held], ws.meta)
        t0 = time.perf_counter()
        wall, cpu = backend.fit(est, sub)
        acc = 100.0 * float(np.mean(est.predict(Xte) == yte))
        per_class = [100.0 * float(np.mean(est.predict(Xte[yte == c]) == c))
                     for c in range(len(ws.meta.class_names))]
        stats = {}
        for st in est.tree_stats_:
            for k, v in (st.get("co2") or {}).items():
                if isinstance(v, (int, float)):
                    stats[k] = stats.get(k, 0) + v
        row = {"label": label, "kind": kind, "params": params, "accuracy": round(acc, 2),
               "per_class_accuracy": [round(v, 1) for v in per_class],
               "fit_seconds": round(wall, 1), "fit_cpu_seconds": round(cpu, 1),
               "n_oblique": int(est.forest_.weights.shape[0]),
               "co2_calls": stats.get("calls"), "co2_accepted": stats.get("accepted")}
        rows.append(row)
        log(f"investigate: {label}: held-out window accuracy {acc:.2f}% "
            f"({wall:.0f} s, {row['n_oblique']} oblique splits"
            + (f", {row['co2_accepted']}/{row['co2_calls']} accepted" if row["co2_calls"]
               else "") + f") [{time.perf_counter() - t0:.0f} s]")
    return {"trees": trees, "samples_per_tree": samples, "max_depth": depth,
            "n_train_windows": int(len(ytr)), "n_heldout_windows": int(len(yte)),
            "variants": rows}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pipelines.investigate",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default",
                   help="run whose training windows are used (default: %(default)s)")
    p.add_argument("--trees", type=int, default=4, help="trees per forest (default: 4)")
    p.add_argument("--samples", type=int, default=32000,
                   help="windows per tree (default: 32000)")
    p.add_argument("--depth", type=int, default=16, help="maximum depth (default: 16)")
    p.add_argument("--workers", type=int, default=None, help="threads (default: all cores)")
    args = p.parse_args(argv)
    windows = Path("data/windows") / args.run / "train.h5"
    if not windows.exists():
        print(f"investigate: error: {windows} does not exist (run `make extract` first)",
              file=sys.stderr)
        return 2
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    study = run_study(backend.read_windows(windows), args.trees, args.samples, args.depth,
                      workers=args.workers, log=log)
    out = Path("reports/runs") / args.run / "investigation.json"
    write_json_atomic(out, study, sort_keys=True)
    log(f"investigate: wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from facesegment.atomic import overwriting

    with overwriting():   # the repository\'s own reports and models are regenerated
        sys.exit(main())
