"""Ablation of the non-greedy tree's choices on MNIST (one depth, one setting):
SSGD vs plain SGD (Algorithm 1), the leaf refit (ours) on or off, momentum.
Fits on the 60,000 training images, reports training and test accuracy and the
final full-data surrogate and loss.  Writes ``reports/nongreedy/ablation-d<depth>-<init>.json``.

    python -m studies.ablation_nongreedy [--depth 10] [--init co2] [--nu 1000] [--eta 0.1]
"""

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic
from facesegment.forest import NonGreedyTree
from pipelines.uci_data import load_dataset

VARIANTS = {
    "greedy init (0 epochs)": {"n_epochs": 0},
    "SSGD + refit (default)": {},
    "SSGD, no refit": {"leaf_refit": False},
    "SGD + refit": {"ssgd_refresh": 0},
    "SGD, no refit (Algorithm 1)": {"ssgd_refresh": 0, "leaf_refit": False},
    "SSGD + refit, no momentum": {"momentum": 0.0},
    "SSGD every 5 epochs + refit": {"ssgd_refresh": 5},
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=str(ROOT.parent / "shared" / "data" / "uci"))
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--init", default="co2", choices=("axis", "co2"))
    p.add_argument("--nu", type=float, default=1000.0)
    p.add_argument("--eta", type=float, default=0.1)
    args = p.parse_args(argv)
    ds = load_dataset(Path(args.root) / args.dataset)
    rows = []
    for name, kw in VARIANTS.items():
        t0 = time.perf_counter()
        est = NonGreedyTree(max_depth=args.depth, init=args.init, nu=args.nu, eta=args.eta,
                            random_state=0, **kw).fit(ds.X, ds.y)
        ev = [e for e in est.tree_stats_[0]["epochs"] if "surrogate" in e]
        row = {"variant": name, "params": kw, "seconds": time.perf_counter() - t0,
               "train_acc": float(est.score(ds.X, ds.y)),
               "test_acc": float(est.score(ds.X_test, ds.y_test)),
               "surrogate": ev[-1]["surrogate"], "loss": ev[-1]["loss"],
               "active_leaves": ev[-1]["active_leaves"]}
        rows.append(row)
        print(f"| {name} | {100 * row['test_acc']:.2f} | {100 * row['train_acc']:.2f} | "
              f"{row['surrogate']:.3f} | {row['loss']:.3f} | {row['active_leaves']} | "
              f"{row['seconds']:.1f} |", flush=True)
    name = f"ablation-{args.dataset}-d{args.depth}-{args.init}.json"
    path = ROOT / "reports" / "nongreedy" / name
    write_json_atomic(path, {"args": vars(args), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
