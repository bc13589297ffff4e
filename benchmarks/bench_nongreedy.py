"""Time of one non-greedy tree on MNIST's 60,000 training images (the target:
a depth-12 tree in under 10 minutes on 2 cores).

Fits ``NonGreedyTree`` (one thread) and reports the greedy initialisation, every
SGD epoch (seconds, loss-augmented inferences per second, dot products on the
samples' paths and alternative descents per sample: the fast inference with
pruning) and the full-data surrogate and loss at each refresh.  Writes
``reports/nongreedy/bench-d<depth>-<init>.json``.

    python -m benchmarks.bench_nongreedy [--depth 12] [--init co2] [--nu 100] [--eta 0.1]
                                         [--ssgd-refresh 0]
"""

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic
from facesegment.forest import NonGreedyTree
from pipelines.uci_data import load_dataset


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=str(ROOT.parent / "shared" / "data" / "uci"))
    p.add_argument("--depth", type=int, default=12)
    p.add_argument("--init", default="co2", choices=("axis", "co2"))
    p.add_argument("--nu", type=float, default=100.0)
    p.add_argument("--eta", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--ssgd-refresh", type=int, default=0)
    args = p.parse_args(argv)
    ds = load_dataset(Path(args.root) / "mnist")
    NonGreedyTree(max_depth=2, n_epochs=1).fit(ds.X[:500], ds.y[:500])  # compile / load cache
    t0 = time.perf_counter()
    est = NonGreedyTree(max_depth=args.depth, init=args.init, nu=args.nu, eta=args.eta,
                        n_epochs=args.epochs, ssgd_refresh=args.ssgd_refresh,
                        random_state=0).fit(ds.X, ds.y)
    total = time.perf_counter() - t0
    st = est.tree_stats_[0]
    sgd = [e for e in st["epochs"] if "sgd_seconds" in e]
    n = ds.X.shape[0]
    rows = [{"epoch": e["epoch"], "sgd_s": e["sgd_seconds"], "refresh_s": e["eval_seconds"],
             "lai_per_s": e["samples"] / e["sgd_seconds"], "path_dots": e["path_dots"] / n,
             "descents": e["descents"] / n} for e in sgd]
    for r in rows:
        print(f"epoch {r['epoch']:2d}: {r['sgd_s']:.3f} s SGD ({r['lai_per_s']:,.0f} samples/s, "
              f"{r['path_dots']:.1f} path dots + {r['descents']:.2f} descents per sample), "
              f"{r['refresh_s']:.3f} s refresh")
    out = {"args": vars(args), "fit_seconds": total, "t_init": st["t_init"],
           "t_sgd": st["t_sgd"], "n_leaves": st["n_leaves"], "max_depth": st["max_depth"],
           "mean_sgd_s_per_epoch": float(np.mean([r["sgd_s"] for r in rows])),
           "mean_lai_per_s": float(np.mean([r["lai_per_s"] for r in rows])),
           "train_acc": float(est.score(ds.X, ds.y)),
           "test_acc": float(est.score(ds.X_test, ds.y_test)), "epochs": rows,
           "refreshes": [e for e in st["epochs"] if "surrogate" in e]}
    print(f"fit {total:.1f} s (greedy init {st['t_init']:.1f} s, SGD + refreshes "
          f"{st['t_sgd']:.1f} s); test {out['test_acc']:.4f} train {out['train_acc']:.4f}")
    name = f"bench-d{args.depth}-{args.init}-ssgd{args.ssgd_refresh}.json"
    path = ROOT / "reports" / "nongreedy" / name
    write_json_atomic(path, out)
    print(f"wrote {path}")


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
