"""Non-greedy trees on face windows: what joint optimisation does to a CO2 tree (window level).

On the windows of a finished face run (default faces300w-default), forests of
4 trees of depth d (16,000 windows per tree, bootstrap, ``max_features``
"sqrt") are trained on 100,000 windows and scored on the other 28,000
(accuracy over class-balanced windows; mean log loss): the greedy CO2 trees
a non-greedy forest starts from (``NonGreedyForest(init="co2",
n_epochs=0)``: the paper's univariate start, CO2's default settings, leaves
smoothed) against the same trees refined non-greedily for a few learning
rates (every split and leaf optimised jointly, docs/nongreedy.md), and the
random forest of the same depth as the cheap peer.  Every tree of depth d has
up to 2^d - 1 dense oblique rows of 2,883 weights (11.5 KB each), so depths
stay small.  Writes ``reports/nongreedy/faces-windows.json``.

    python -m studies.nongreedy_faces [--run faces300w-default] [--depths 6 8]
"""

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic
from facesegment.forest.registry import make_estimator
from pipelines import backend


def _score(est, X, y):
    proba = est.predict_proba(X)
    acc = float(np.mean(est.classes_[np.argmax(proba, 1)] == y))
    idx = np.searchsorted(est.classes_, y)
    loss = float(-np.mean(np.log(np.maximum(proba[np.arange(len(y)), idx], 1e-6))))
    return acc, loss


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default")
    p.add_argument("--depths", nargs="+", type=int, default=[6, 8])
    p.add_argument("--trees", type=int, default=4)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--etas", nargs="+", type=float, default=[0.1, 0.01, 0.001],
                   help="learning rates of the refinement (0.1: the estimator's default, "
                        "chosen on the UCI sets)")
    args = p.parse_args(argv)
    ws = backend.read_windows(ROOT / "data" / "windows" / args.run / "train.h5")
    n = len(ws.y)
    X, y = ws.X.reshape(n, -1), ws.y
    perm = np.random.default_rng(0).permutation(n)
    tr, te = np.sort(perm[:100000]), np.sort(perm[100000:])
    Xtr, ytr = np.ascontiguousarray(X[tr]), y[tr]
    Xte, yte = np.ascontiguousarray(X[te]), y[te]
    stats = {"feature_mean": ws.meta.mean, "feature_std": ws.meta.std}
    common = dict(n_estimators=args.trees, max_samples=16000, random_state=0, n_jobs=2)
    rows = []
    for d in args.depths:
        ng = {"init": "co2", "max_features": "p^0.6"}
        plans = [
            ("random forest", "axis", {"max_features": "p^0.6"}, {}),
            ("greedy CO2 (the start: 0 epochs)", "nongreedy", {**ng, "n_epochs": 0}, stats),
        ] + [(f"non-greedy from CO2, eta {eta}", "nongreedy",
              {**ng, "n_epochs": args.epochs, "eta": eta}, stats) for eta in args.etas]
        for label, kind, extra, fit_kw in plans:
            est = make_estimator(kind, max_depth=d, **common, **extra)
            t0 = time.perf_counter()
            est.fit(Xtr, ytr, **fit_kw)
            fit_s = time.perf_counter() - t0
            acc, loss = _score(est, Xte, yte)
            row = {"depth": d, "method": label, "kind": kind, "accuracy": round(acc, 4),
                   "log_loss": round(loss, 4), "fit_seconds": round(fit_s, 1),
                   "n_oblique": int(est.forest_.weights.shape[0]), "params": extra}
            rows.append(row)
            print(row, flush=True)
    out = ROOT / "reports" / "nongreedy" / "faces-windows.json"
    write_json_atomic(out, {"run": args.run, "n_trees": args.trees, "train_windows": 100000,
                            "test_windows": int(len(te)), "rows": rows}, sort_keys=True)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
