"""CART options beside scikit-learn on the UCI datasets: Gini, out-of-bag, missing values.

    nice -n 10 python -m benchmarks.lectures_cart                 # everything
    python -m benchmarks.lectures_cart --datasets satimage --seeds 0 1

In one run, for every dataset of ``../shared/data/uci`` (train.npz / test.npz
as they are, no scaling: trees do not care):

* **Gini**: ``AxisAlignedForest(30, criterion="gini", max_features="sqrt",
  oob_score=True)`` and ``RandomForestClassifier(30, criterion="gini",
  max_features="sqrt", oob_score=True)``, both single-threaded, over the seeds:
  test accuracy, ``oob_score_`` and fit time (process CPU seconds) of each; the differences ours
  minus scikit-learn's in points (targets: |Δ test| <= 0.3, |Δ OOB| <= 0.5; the
  standard error of Δ test over the seeds), our OOB accuracy minus our test
  accuracy (target: within 1 point), and the single trees of both forests
  (nodes, depth, one tree's test accuracy).
* **Missing values**: on ``--missing-datasets``, ``--rates`` of the entries of
  both X matrices set to NaN at random (seeded; the same matrices for both
  forests), the same two forests (target: |Δ test| <= 0.5).

``--max-train N`` fits on a stratified subsample of N training rows (the
report says so); results are written after every dataset, so an interrupted
run keeps what finished: reports/lectures/cart.json and cart.md.
"""

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.forest import AxisAlignedForest
from facesegment.progress import Progress
from pipelines.uci_data import find_datasets, load_dataset, stratified_subsample

T = 30
OUT = ROOT / "reports" / "lectures"
COMMAND = "nice -n 10 python -m benchmarks.lectures_cart"
#: Datasets whose train.npz is at least this large run last (mnist, covertype).
BIG_BYTES = 8 << 20


def get_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=str(ROOT.parent / "shared" / "data" / "uci"))
    p.add_argument("--datasets", nargs="*", default=None, help="default: all under --root")
    p.add_argument("--missing-datasets", nargs="*", default=["satimage", "pendigits", "letter"])
    p.add_argument("--rates", nargs="*", type=float, default=[0.1, 0.3])
    p.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    p.add_argument("--max-train", type=int, default=0, help="0: every training row")
    p.add_argument("--out", default=str(OUT))
    return p


def forests(seed):
    return {
        "ours": AxisAlignedForest(T, criterion="gini", max_features="sqrt", oob_score=True,
                                  random_state=seed, n_jobs=1),
        "sklearn": RandomForestClassifier(T, criterion="gini", max_features="sqrt",
                                          oob_score=True, random_state=seed, n_jobs=1),
    }


def tree_shapes(est, Xt, yt):
    """Per tree: ``(nodes, depth, test accuracy in %)`` of a fitted forest of either library."""
    if hasattr(est, "forest_"):
        fa = est.forest_
        ends = np.append(fa.roots[1:], fa.n_nodes)
        nodes = ends - fa.roots
        depth = [int(fa.depth[a:b].max()) for a, b in zip(fa.roots, ends)]
    else:
        nodes = [e.tree_.node_count for e in est.estimators_]
        depth = [e.tree_.max_depth for e in est.estimators_]
    classes = est.classes_
    acc = [100 * float(np.mean(classes[np.argmax(e.predict_proba(Xt), axis=1)] == yt))
           for e in est.estimators_]
    return [[int(n), int(d), a] for n, d, a in zip(nodes, depth, acc)]


def fit_score(est, X, y, Xt, yt):
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(X, y)
    fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"test": 100 * float(np.mean(est.predict(Xt) == yt)),
            "oob": 100 * float(est.oob_score_), "fit_s": fit_s, "fit_cpu": fit_cpu,
            "trees": tree_shapes(est, Xt, yt)}


def compare(X, y, Xt, yt, seeds, progress, what):
    runs = {"ours": [], "sklearn": []}
    for seed in seeds:
        for name, est in forests(seed).items():
            runs[name].append(fit_score(est, X, y, Xt, yt))
            progress.update(1, f"{what} seed {seed} {name}: {runs[name][-1]['test']:.2f}%")
    row = {}
    for name, rs in runs.items():
        row[name] = {k: float(np.mean([r[k] for r in rs]))
                     for k in ("test", "oob", "fit_s", "fit_cpu")}
        tests = [r["test"] for r in rs]
        row[name]["test_sd"] = float(np.std(tests, ddof=1)) if len(rs) > 1 else 0.0
        row[name]["test_per_seed"] = [r["test"] for r in rs]
        row[name]["oob_per_seed"] = [r["oob"] for r in rs]
        trees = np.array([t for r in rs for t in r["trees"]], dtype=np.float64)
        row[name]["tree_mean"] = trees.mean(axis=0).tolist()  # nodes, depth, accuracy
        row[name]["tree_se"] = (trees.std(axis=0, ddof=1) / np.sqrt(len(trees))).tolist()
    o, s = row["ours"], row["sklearn"]
    row["delta_test"] = o["test"] - s["test"]
    # the two libraries' seeds are independent draws: the standard error of the
    # difference of the two means
    row["delta_test_se"] = (float(np.hypot(o["test_sd"], s["test_sd"]) / np.sqrt(len(seeds)))
                            if len(seeds) > 1 else 0.0)
    row["delta_oob"] = o["oob"] - s["oob"]
    row["ours_oob_minus_test"] = o["oob"] - o["test"]
    row["sklearn_oob_minus_test"] = s["oob"] - s["test"]
    row["fit_ratio"] = o["fit_cpu"] / s["fit_cpu"]
    row["fit_ratio_wall"] = o["fit_s"] / s["fit_s"]
    return row


def with_missing(X, rate, seed):
    X = np.array(X, dtype=np.float32, copy=True)
    X[np.random.default_rng(seed).random(X.shape) < rate] = np.nan
    return X


def load(root, name, max_train):
    d = load_dataset(Path(root) / name)
    keep = stratified_subsample(np.arange(d.y.size), d.y, max_train, 0)
    return d.X[keep], d.y[keep], d.X_test, d.y_test, int(d.y.size)


def markdown(res):
    lines = [
        "# CART options beside scikit-learn (Gini, out-of-bag, missing values)",
        "",
        f"Made by `{res['command']}` ({res['machine']}; seeds {res['seeds']}, {T} trees, "
        "max_features='sqrt', n_jobs=1 for both). Accuracies in %, means over the seeds "
        "(± their standard deviation); Δ = ours − scikit-learn's, in points (± its standard "
        "error over the seeds, the two libraries' runs counted as independent). Fit time: "
        "process CPU seconds of `fit` (out-of-bag estimate included), mean over the seeds.",
        "",
        "## Gini: AxisAlignedForest(criterion='gini') vs RandomForestClassifier(criterion='gini')",
        "",
        "| dataset | train rows | ours test | sklearn test | Δ test (≤0.3) | ours OOB | sklearn OOB "
        "| Δ OOB (≤0.5) | ours OOB − test (≤1) | sklearn OOB − test | fit time ours / sklearn |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res["gini"].items():
        o, s = r["ours"], r["sklearn"]
        lines.append(
            f"| {name} | {r['n_train']}{' (of ' + str(r['n_train_all']) + ')' if r['n_train'] < r['n_train_all'] else ''} "
            f"| {o['test']:.2f} ± {o.get('test_sd', 0):.2f} "
            f"| {s['test']:.2f} ± {s.get('test_sd', 0):.2f} "
            f"| {r['delta_test']:+.2f} ± {r.get('delta_test_se', 0):.2f} | {o['oob']:.2f} "
            f"| {s['oob']:.2f} | {r['delta_oob']:+.2f} | {r['ours_oob_minus_test']:+.2f} "
            f"| {r['sklearn_oob_minus_test']:+.2f} | {r['fit_ratio']:.2f} ({o['fit_cpu']:.2f} s / "
            f"{s['fit_cpu']:.2f} s) |")
    lines += ["", "## Single trees of the Gini forests (mean ± standard error over every tree "
              "of every seed)", "",
              "| dataset | nodes ours | nodes sklearn | depth ours | depth sklearn "
              "| one tree's test accuracy ours | sklearn |", "|---|---|---|---|---|---|---|"]
    for name, r in res["gini"].items():
        if "tree_mean" not in r["ours"]:
            continue
        cells = [f"{r[side]['tree_mean'][i]:.{dec}f} ± {r[side]['tree_se'][i]:.{dec}f}"
                 for i, dec in ((0, 0), (1, 1), (2, 2)) for side in ("ours", "sklearn")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Missing values: entries of train and test X set to NaN at random", "",
              "| dataset | NaN share | ours test | sklearn test | Δ test (≤0.5) | fit time ours / sklearn |",
              "|---|---|---|---|---|---|"]
    for key, r in res["missing"].items():
        o, s = r["ours"], r["sklearn"]
        lines.append(f"| {r['dataset']} | {r['rate']:.0%} | {o['test']:.2f} | {s['test']:.2f} "
                     f"| {r['delta_test']:+.2f} | {r['fit_ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = get_parser().parse_args(argv)
    names = args.datasets or find_datasets(args.root)
    miss = [n for n in args.missing_datasets if n in names or args.datasets is None]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = COMMAND + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    res = {"command": cmd.strip(), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
           "seeds": args.seeds, "n_trees": T, "gini": {}, "missing": {}}
    warm = AxisAlignedForest(2, criterion="gini", oob_score=True, random_state=0)
    Xw = np.random.default_rng(0).random((300, 4)).astype(np.float32)
    warm.fit(Xw, np.arange(300) % 3)  # compile the kernels before timing
    Xw[::7, 1] = np.nan
    warm.fit(Xw, np.arange(300) % 3).predict(Xw)
    total = len(args.seeds) * 2 * (len(names) + len(miss) * len(args.rates))
    size = {n: (Path(args.root) / n / "train.npz").stat().st_size for n in names}
    small = [n for n in names if size[n] < BIG_BYTES]
    tasks = ([("gini", n, None) for n in small] + [("missing", n, r) for n in miss
                                                   for r in args.rates]
             + [("gini", n, None) for n in names if n not in small])
    with Progress(total, desc="cart benchmark", unit="fits") as progress:
        for what, name, rate in tasks:  # small datasets, missing values, then big ones
            X, y, Xt, yt, n_all = load(args.root, name, args.max_train)
            if what == "gini":
                row = compare(X, y, Xt, yt, args.seeds, progress, name)
                row.update(n_train=int(y.size), n_train_all=n_all)
                res["gini"][name] = row
            else:
                Xm, Xtm = with_missing(X, rate, 1), with_missing(Xt, rate, 2)
                row = compare(Xm, y, Xtm, yt, args.seeds, progress, f"{name} NaN {rate:.0%}")
                row.update(dataset=name, rate=rate, n_train=int(y.size))
                res["missing"][f"{name}@{rate}"] = row
            write_json_atomic(out / "cart.json", res)
            write_text_atomic(out / "cart.md", markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
