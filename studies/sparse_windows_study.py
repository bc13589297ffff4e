"""Why sparse CO2 splits lose accuracy: a window-level study (quick, ~6 min on 2 cores).

On the windows of a finished face run (default faces300w-default), 4-tree CO2
forests (the run's co2-best settings, 16,000 windows per tree,
``oblique_min_samples`` 50) are trained on 100,000 windows and scored on the
other 28,000 (window accuracy, class-balanced windows):

* dense splits (all 2,883 values) against sparse splits of k = 4 ... 1,024
  features, learned by hard thresholding or pruned from the dense split;
* *structured* sparsity: the same sparse splits over the raw values plus the
  values of box-filtered planes (each channel averaged over an s x s box
  inside the window, rounded to uint8), so one entry can stand for a patch.

Writes ``reports/sparse/windows-study.json`` and prints one line per setting.

    python -m studies.sparse_windows_study [--run faces300w-default]
"""

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic
from facesegment.forest import CO2Forest
from facesegment.models import load_model
from pipelines import backend

SETTINGS = [
    (None, {}), (None, {"max_nonzero": 4}), (None, {"max_nonzero": 16}),
    (None, {"max_nonzero": 16, "sparsity": "prune"}), (None, {"max_nonzero": 64}),
    (None, {"max_nonzero": 64, "sparsity": "prune"}),
    (None, {"max_nonzero": 256, "sparsity": "prune"}),
    (None, {"max_nonzero": 1024, "sparsity": "prune"}),
    (5, {"max_nonzero": 16}), (5, {"max_nonzero": 16, "sparsity": "prune"}),
    (9, {"max_nonzero": 16}), (15, {"max_nonzero": 16}),
]


def box_planes(W, s):
    """uint8 (n, 31, 31, 3): each channel's s x s box mean (rounded) where the box
    lies inside the window, 0 elsewhere; and the mask of those positions."""
    n, h, w, c = W.shape
    cs = np.cumsum(np.cumsum(np.pad(W.astype(np.int32), ((0, 0), (1, 0), (1, 0), (0, 0))),
                             1), 2)
    box = cs[:, s:, s:] - cs[:, :-s, s:] - cs[:, s:, :-s] + cs[:, :-s, :-s]
    out = np.zeros_like(W)
    o, k = s // 2, h - s + 1
    out[:, o:o + k, o:o + k] = ((box + s * s // 2) // (s * s)).astype(np.uint8)
    valid = np.zeros((h, w, c), bool)
    valid[o:o + k, o:o + k] = True
    return out, valid.ravel()


def study_inputs(run):
    """``(windows, train rows, test rows, co2-best parameters)`` of a window study:
    the run's windows split 100,000 / the rest with seed 0, and the run's
    co2-best settings with 16,000 windows per tree and oblique splits down to 50."""
    ws = backend.read_windows(ROOT / "data" / "windows" / run / "train.h5")
    perm = np.random.default_rng(0).permutation(len(ws.y))
    tr, te = np.sort(perm[:100000]), np.sort(perm[100000:])
    dense = load_model(ROOT / "models" / run / "co2-best-32")
    params = {k: v for k, v in dense.params.items()
              if k not in ("n_estimators", "n_jobs", "verbose", "scheduler", "random_state")}
    params.update(max_samples=16000, oblique_min_samples=50)
    return ws, tr, te, params


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default")
    p.add_argument("--trees", type=int, default=4)
    args = p.parse_args(argv)
    ws, tr, te, params = study_inputs(args.run)
    W, y = ws.X, ws.y
    n = len(y)
    rows = []
    for box, extra in SETTINGS:
        X = W.reshape(n, -1)
        mean, std = ws.meta.mean, ws.meta.std
        if box:
            B, valid = box_planes(W, box)
            X = np.concatenate([X, B.reshape(n, -1)], 1)
            mean = X[:20000].mean(0).astype(np.float32)
            std = X[:20000].std(0).astype(np.float32)
            std[W[0].size:][~valid] = 0.0   # positions whose box leaves the window: unused
        t0 = time.perf_counter()
        est = CO2Forest(args.trees, random_state=0, n_jobs=2, **{**params, **extra})
        est.fit(np.ascontiguousarray(X[tr]), y[tr], feature_mean=mean, feature_std=std)
        fa = est.forest_
        acc = float(est.score(np.ascontiguousarray(X[te]), y[te]))
        nsp = 0 if fa.sparse_ptr is None else int(fa.sparse_ptr.shape[0] - 1)
        row = {"box": box, **extra, "accuracy": round(acc, 4),
               "dense_rows": int(fa.weights.shape[0]), "sparse_rows": nsp,
               "entries_on_box_planes": int((fa.sparse_index >= W[0].size).sum()) if nsp else 0,
               "entries": int(fa.sparse_index.size) if nsp else 0,
               "fit_seconds": round(time.perf_counter() - t0, 1)}
        rows.append(row)
        print(row, flush=True)
    out = ROOT / "reports" / "sparse" / "windows-study.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, {"run": args.run, "n_trees": args.trees, "train_windows": 100000,
                            "test_windows": int(len(te)), "settings": rows}, sort_keys=True)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
