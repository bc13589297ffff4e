"""Old vs new split kernels (two-probe and axis on uint8, axis on float) on the real windows.

    python -m benchmarks.bench_split_kernels              # -> reports/bench/split_kernels.json
    python -m benchmarks.bench_split_kernels --quick      # fewer sizes and reps, no tree fit
    python -m benchmarks.bench_split_kernels --no-fit     # skip the one-tree fit

"Old" is the frozen copy of the kernels before the rewrite
(tests/forest/legacy_split_kernels.py, also the oracle of
tests/forest/test_split_blocks.py).  For each node size m, random nodes
(sorted random subsets of the windows, as the grower's index segments are
sorted) are split with fresh random pairs/features by both, interleaved,
several repetitions; the script reports min and median ns per (sample,
candidate) and checks that both choose the same split with the same gain.
The one-tree fit grows a TwoProbeForest tree (64,000 windows, bootstrap,
1600 pairs, depth 20, min_samples_leaf 5) with the old kernels patched into
the grower and with the new ones, and checks that the trees are identical.

The float rows time the axis search on float32 values (sums of 3 weighted
window values, as a rotation forest's rotated features) against the frozen
merge-sort kernel (tests/forest/legacy_float_kernels.py), and the rotation fit
grows one RotationForest tree (the run's selected setting: 119 of 264
rotated features per node) with that kernel and with the radix one.

Uses data/windows/faces300w-default/train.h5 when present, else synthetic
windows (smooth random images, so that pixel differences look natural-ish).
The machine's load average is recorded: timings depend on what else runs.
"""

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic
from facesegment.forest import axis, families, twoprobe
from tests.forest import legacy_float_kernels
from tests.forest import legacy_split_kernels as legacy

WINDOWS = ROOT / "data" / "windows" / "faces300w-default" / "train.h5"


def load(n):
    if WINDOWS.exists():
        import h5py

        with h5py.File(WINDOWS, "r") as f:
            n = min(n, f["windows"].shape[0])
            X = f["windows"][:n].reshape(n, -1)
            y = f["labels"][:n].astype(np.int32)
        return np.ascontiguousarray(X), y, str(WINDOWS.relative_to(ROOT))
    rng = np.random.default_rng(0)
    base = rng.normal(size=(n, 8, 8, 3))
    img = np.repeat(np.repeat(base, 4, axis=1), 4, axis=2)[:, :31, :31]
    X = np.clip(128 + 40 * img + rng.normal(scale=8, size=img.shape), 0, 255).astype(np.uint8)
    y = (rng.integers(0, 8, size=n) * (X[:, 15, 15, 0] > 100)).astype(np.int32)
    return X.reshape(n, -1), y, "synthetic"


def same(a, b):
    return a[0] == b[0] and float(a[1]) == float(b[1]) and (
        a[2] == b[2] or abs(a[2] - b[2]) <= 1e-12 * max(abs(a[2]), 1e-300))


def time_kernels(X, y, sizes, reps, q_pairs, q_axis, min_leaf, rng):
    p = X.shape[1]
    out = []
    for m in sizes:
        for family in ("two-probe", "axis"):
            t_old, t_new, n_same, n_checked = [], [], 0, 0
            for r in range(reps):
                idx = np.sort(rng.choice(X.shape[0], m, replace=False)).astype(np.int64)
                if family == "two-probe":
                    fa, fb = twoprobe.sample_pairs(rng, p, q_pairs)
                    q = q_pairs
                    run_old = lambda: legacy.legacy_pair_split(X, y, idx, fa, fb, 8, min_leaf)  # noqa: E731
                    run_new = lambda: twoprobe.best_pair_split(X, y, idx, fa, fb, 8, min_leaf)  # noqa: E731
                else:
                    feats = np.sort(rng.choice(p, q_axis, replace=False)).astype(np.int64)
                    q = q_axis
                    run_old = lambda: legacy.legacy_axis_split(X, y, idx, feats, 8, min_leaf)  # noqa: E731
                    run_new = lambda: axis.best_axis_split(X, y, idx, feats, 8, min_leaf)  # noqa: E731
                first_new = r % 2 == 0  # interleave the order
                for which in ((run_new, run_old) if first_new else (run_old, run_new)):
                    t0 = time.perf_counter()
                    res = which()
                    dt = time.perf_counter() - t0
                    if which is run_old:
                        t_old.append(dt)
                        old = res
                    else:
                        t_new.append(dt)
                        new = res
                if family == "two-probe":
                    k = old[0]
                    old_std = (-1, -1, 0.0, -1.0) if k < 0 else (int(fa[k]), int(fb[k]), float(old[1]), float(old[2]))
                    ok = (new[0], new[1]) == old_std[:2] and same(new[1:], old_std[1:])
                else:
                    ok = same(new, (int(old[0]), float(old[1]), float(old[2])))
                n_checked += 1
                n_same += bool(ok)
            out.append(timing_row(family, m, q, reps, t_old, t_new, f"{n_same}/{n_checked}"))
    return out


def timing_row(family, m, q, reps, t_old, t_new, identical):
    """The report row (ns per (sample, candidate), min and median) of one size; printed."""
    ns = lambda t: 1e9 * np.array(t) / (m * q)  # noqa: E731
    row = {"family": family, "m": m, "q": q, "reps": reps,
           "old_ns_min": float(ns(t_old).min()), "old_ns_median": float(np.median(ns(t_old))),
           "new_ns_min": float(ns(t_new).min()), "new_ns_median": float(np.median(ns(t_new))),
           "identical": identical}
    row["speedup_median"] = row["old_ns_median"] / row["new_ns_median"]
    print(f"{family:10s} m={m:6d} q={q:5d}  old {row['old_ns_min']:6.2f}/{row['old_ns_median']:6.2f}"
          f"  new {row['new_ns_min']:6.2f}/{row['new_ns_median']:6.2f} ns per sample-candidate"
          f" (min/median)  x{row['speedup_median']:.1f}  identical {identical}", flush=True)
    return row


def rotated_like(X, n_out, rng):
    """float32 (n, n_out): each column a random unit-weighted sum of 3 window values."""
    cols = rng.integers(0, X.shape[1], size=(n_out, 3))
    w = rng.normal(size=(n_out, 3))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    Z = np.zeros((X.shape[0], n_out), np.float32)
    for j in range(3):
        Z += X[:, cols[:, j]].astype(np.float32) * w[:, j].astype(np.float32)
    return Z


def time_float_kernels(Z, y, sizes, reps, q, min_leaf, rng):
    warm = np.arange(300, dtype=np.int64)
    feats = np.arange(4, dtype=np.int64)
    legacy_float_kernels._axis_split_sorted(Z, y, warm, feats, 8, min_leaf)   # compile both
    axis._axis_split_sorted(Z, y, warm, feats, 8, min_leaf)
    out = []
    for m in sizes:
        t_old, t_new, n_same = [], [], 0
        for r in range(reps):
            idx = np.sort(rng.choice(Z.shape[0], m, replace=True)).astype(np.int64)
            feats = rng.choice(Z.shape[1], q, replace=False).astype(np.int64)
            runs = [("old", lambda: legacy_float_kernels._axis_split_sorted(  # noqa: E731
                Z, y, idx, feats, 8, min_leaf)),
                ("new", lambda: axis._axis_split_sorted(Z, y, idx, feats, 8, min_leaf))]
            res = {}
            for name, run in (runs if r % 2 == 0 else runs[::-1]):
                t0 = time.perf_counter()
                res[name] = run()
                (t_old if name == "old" else t_new).append(time.perf_counter() - t0)
            n_same += res["old"] == res["new"]
        out.append(timing_row("float-axis", m, q, reps, t_old, t_new, f"{n_same}/{reps}"))
    return out


def fit_rotation_tree(X, y, seed):
    """One rotation tree with the merge-sort float kernel, then with the radix one."""
    from facesegment.forest import RotationForest

    def fit():
        clf = RotationForest(n_estimators=1, max_features=119,
                             max_rotated_features=int(X.shape[1] ** 0.7), max_depth=20,
                             min_samples_leaf=5, max_samples=64000, random_state=seed)
        t0 = time.perf_counter()
        clf.fit(X, y)
        return clf, time.perf_counter() - t0

    new_fn = axis._axis_split_sorted
    axis._axis_split_sorted = legacy_float_kernels._axis_split_sorted
    try:
        clf_old, t_old = fit()
    finally:
        axis._axis_split_sorted = new_fn
    clf_new, t_new = fit()
    identical = all(np.array_equal(a, b) for a, b in zip(clf_old.forest_, clf_new.forest_))
    res = {"max_features": 119, "max_rotated_features": int(X.shape[1] ** 0.7),
           "max_samples": 64000, "max_depth": 20, "min_samples_leaf": 5, "seed": seed,
           "old_s": t_old, "new_s": t_new, "speedup": t_old / t_new,
           "identical_trees": bool(identical)}
    print(f"one rotation tree (64000 windows, 119 of {res['max_rotated_features']} rotated "
          f"features per node): old {t_old:.1f} s, new {t_new:.1f} s (x{t_old / t_new:.1f}), "
          f"identical trees: {identical}", flush=True)
    return res


def _legacy_best_pair_split(X, y, idx, fa, fb, n_classes, min_samples_leaf=1):
    k, t, g = legacy.legacy_pair_split(X, y, idx, fa, fb, n_classes, min_samples_leaf)
    if k < 0:
        return -1, -1, 0.0, -1.0
    return int(fa[k]), int(fb[k]), float(t), float(g)


def fit_one_tree(X, y, n_pairs, seed):
    from facesegment.forest.estimators import TwoProbeForest

    def fit():
        clf = TwoProbeForest(n_estimators=1, n_pairs=n_pairs, max_depth=20, min_samples_leaf=5,
                             max_samples=64000, bootstrap=True, random_state=seed)
        t0 = time.perf_counter()
        clf.fit(X, y)
        return clf, time.perf_counter() - t0

    new_fn = families.best_pair_split
    families.best_pair_split = _legacy_best_pair_split
    try:
        clf_old, t_old = fit()
    finally:
        families.best_pair_split = new_fn
    clf_new, t_new = fit()
    fo, fn = clf_old.forest_, clf_new.forest_
    identical = all(np.array_equal(a, b) for a, b in zip(fo, fn))  # ForestArrays fields
    res = {"n_pairs": n_pairs, "max_samples": 64000, "max_depth": 20, "min_samples_leaf": 5,
           "bootstrap": True, "seed": seed, "old_s": t_old, "new_s": t_new,
           "speedup": t_old / t_new, "n_nodes": int(clf_new.tree_stats_[0]["n_nodes"]),
           "identical_trees": bool(identical)}
    print(f"one tree (64000 windows, {n_pairs} pairs, depth 20, min_samples_leaf 5): "
          f"old {t_old:.1f} s, new {t_new:.1f} s (x{t_old / t_new:.1f}), "
          f"{res['n_nodes']} nodes, identical trees: {identical}", flush=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-fit", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--pairs", type=int, default=1600)
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "split_kernels.json"))
    args = ap.parse_args(argv)
    X, y, source = load(128000)
    p = X.shape[1]
    q_axis = int(round(p ** 0.7))
    sizes = [64, 511, 4000] if args.quick else [16, 64, 200, 383, 384, 511, 512, 2000, 8000, 64000]
    reps = args.reps or (3 if args.quick else 7)
    rng = np.random.default_rng(0)
    # compile both sides first
    idx = np.arange(600, dtype=np.int64)
    fa, fb = twoprobe.sample_pairs(rng, p, 8)
    for m in (100, 600):
        legacy.legacy_pair_split(X, y, idx[:m], fa, fb, 8, 5)
        twoprobe.best_pair_split(X, y, idx[:m], fa, fb, 8, 5)
        legacy.legacy_axis_split(X, y, idx[:m], fa, 8, 5)
        axis.best_axis_split(X, y, idx[:m], fa, 8, 5)
    load0 = os.getloadavg()
    rows = time_kernels(X, y, sizes, reps, args.pairs, q_axis, 5, rng)
    Z = rotated_like(X[:64000], int(round(p ** 0.7)), rng)
    fsizes = [200, 4000] if args.quick else [128, 1000, 8000, 64000]
    rows += time_float_kernels(Z, y[:64000], fsizes, reps, 119, 5, rng)
    report = {"source": source, "n_windows": int(X.shape[0]), "n_features": p,
              "min_samples_leaf": 5, "kernels": rows, "loadavg_before": load0}
    if not args.no_fit and not args.quick:
        report["one_tree_fit"] = fit_one_tree(X, y, args.pairs, seed=0)
        report["rotation_tree_fit"] = fit_rotation_tree(X, y, seed=0)
    report["loadavg_after"] = os.getloadavg()
    report["cpu"] = os.cpu_count()
    write_json_atomic(args.out, report)
    print("wrote", args.out)


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
