"""Where LightGBM's accuracy on the face windows comes from: one factor at a time.

``benchmarks/peers.py`` fits LightGBM's random forest (``boosting_type="rf"``)
and ours on the same windows; LightGBM's is more accurate. This script starts
from the two settings of that benchmark and changes one thing at a time, on
the same windows (:func:`benchmarks.peers.bench_windows`), reporting the
test-window accuracy and the fit time of each variant:

- LightGBM: one tree per class per round (its multiclass objective; the
  baseline grows ``classes x trees`` trees) against ``trees`` trees in all,
  the leaf cap (``num_leaves``), ``max_depth``, histogram bins (``max_bin``),
  ``min_child_samples``, the bagging fraction, features per node
  (``colsample_bynode``);
- ours (the axis forest): as many trees as LightGBM grows, one-vs-rest
  binary forests (one tree per class, as LightGBM), drawing without
  replacement (LightGBM's bagging), the Gini index (LightGBM's gain on a
  one-vs-rest target is its variance reduction), features per node, leaf size,
  depth;
- XGBoost's random forest, likewise with one tree per class per round, and
  ``trees`` trees in all.

Both libraries are given the very same uint8 matrices (checked: the rows'
digest is recorded). Fit and accuracy of each row, fit time as a multiple of
LightGBM's baseline in the same run, and which of our variants match LightGBM
(accuracy within 1 point at most half its fit time) go to
``reports/bench/peers_ablation.json`` (``--quick``: ``peers_ablation_quick.json``)
and to ``docs/studies/peers-ablation.md``, under a heading naming the command (a
rerun replaces its own part).

::

    python -m benchmarks.peers_ablation            # the windows of `peers --quick`, 8 trees
    python -m benchmarks.peers_ablation --quick    # 4,000 / 2,000 of them, 4 trees (minutes)
"""

import argparse
import hashlib
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.peers import (DATA, ROOT, THREADS, axis_params, bench_windows, lightgbm_params,
                              update_doc, xgboost_params)
from facesegment.atomic import write_json_atomic
from facesegment.forest import AxisAlignedForest
from facesegment.data.windows import read_windows

#: The study page this script writes (its part under a heading naming the command).
DOC = ROOT / "docs" / "studies" / "peers-ablation.md"
#: A variant of ours matches LightGBM within this many accuracy points...
MATCH_POINTS = 1.0
#: ...at no more than this fraction of LightGBM's fit time.
MATCH_FIT = 0.5
#: Share of the pool a bootstrap of half its size draws at least once: 1 - e^(-1/2).
BOOTSTRAP_UNIQUE = 1 - np.exp(-0.5)


# --------------------------------------------------------------- the data
def subset(ws, n, seed):
    """``(X, y)`` of ``n`` rows of a WindowSet, class-stratified (all rows when n >= N)."""
    X = ws.X.reshape(len(ws.y), -1)
    if n >= len(ws.y):
        return X, ws.y
    rng = np.random.default_rng(seed)
    classes = np.unique(ws.y)
    share = n // len(classes)
    rows = np.sort(np.concatenate([rng.choice(np.flatnonzero(ws.y == c), share, replace=False)
                                   for c in classes]))
    return np.ascontiguousarray(X[rows]), ws.y[rows]


def digest(*arrays):
    """Short SHA-256 of the arrays' bytes: the same digest, the same matrices."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


# --------------------------------------------------------------- the fits
def fit_lightgbm(cfg, X, y, **change):
    import lightgbm as lgb

    clf = lgb.LGBMClassifier(**{**lightgbm_params(cfg, len(y), X.shape[1]), **change})
    return clf, {"trees_grown": lambda: clf.booster_.num_trees()}


def fit_xgboost(cfg, X, y, **change):
    import xgboost as xgb

    clf = xgb.XGBRFClassifier(**{**xgboost_params(cfg, len(y), X.shape[1]), **change})
    return clf, {"trees_grown": lambda: len(clf.get_booster().get_dump())}


def fit_ours(cfg, X, y, one_vs_rest=False, **change):
    params = {**axis_params(cfg), **change}
    if one_vs_rest:
        from sklearn.multiclass import OneVsRestClassifier

        clf = OneVsRestClassifier(AxisAlignedForest(**params))
        return clf, {"trees_grown": lambda: sum(e.n_estimators for e in clf.estimators_)}
    clf = AxisAlignedForest(**params)
    return clf, {"trees_grown": lambda: clf.n_estimators}


def variants(cfg, n_classes):
    """``(who, factor, setting, fit function, changes)`` of every row, baselines first."""
    t, q, lgb_q = cfg.trees, cfg.q, lambda f: f / cfg.p
    per_class = max(1, t // n_classes)
    lg, xg, us = fit_lightgbm, fit_xgboost, fit_ours
    return [
        ("LightGBM", "baseline", f"peers.py: {t} rounds x {n_classes} classes", lg, {}),
        ("ours", "baseline", f"peers.py: {t} multiclass trees", us, {}),
        ("LightGBM", "trees", f"{per_class} round(s): {per_class * n_classes} trees in all", lg,
         {"n_estimators": per_class}),
        ("ours", "trees", f"{t * n_classes} multiclass trees (as many as LightGBM)", us,
         {"n_estimators": t * n_classes}),
        ("ours", "one tree per class", f"one-vs-rest: {t} trees per class", us,
         {"one_vs_rest": True}),
        ("ours", "one tree per class", f"one-vs-rest: {per_class} tree(s) per class", us,
         {"one_vs_rest": True, "n_estimators": per_class}),
        ("LightGBM", "leaf cap", "num_leaves 255 (1023)", lg, {"num_leaves": 255}),
        ("LightGBM", "depth", "no depth limit, leaf-wise to the cap (20)", lg, {"max_depth": -1}),
        ("ours", "depth", "no depth limit (20)", us, {"max_depth": None}),
        ("LightGBM", "histogram bins", "max_bin 63 (255)", lg, {"max_bin": 63}),
        ("LightGBM", "leaf size", "min_child_samples 20 (5)", lg, {"min_child_samples": 20}),
        ("ours", "leaf size", "min_samples_leaf 20 (5)", us, {"min_samples_leaf": 20}),
        ("LightGBM", "bagging", f"bagging_fraction {BOOTSTRAP_UNIQUE:.3f}: as many distinct "
         "windows as our bootstrap (0.5)", lg, {"subsample": BOOTSTRAP_UNIQUE}),
        ("ours", "bagging", "half the windows without replacement (with)", us,
         {"bootstrap": False}),
        ("LightGBM", "features per node", f"colsample_bynode {4 * q}/{cfg.p} ({q})", lg,
         {"colsample_bynode": lgb_q(4 * q)}),
        ("ours", "features per node", f"q = {4 * q} ({q})", us, {"max_features": 4 * q}),
        ("ours", "split criterion", "Gini index (entropy)", us, {"criterion": "gini"}),
        ("XGBoost", "baseline", f"peers.py: {t} rounds x {n_classes} classes", xg, {}),
        ("XGBoost", "trees", f"{per_class} round(s): {per_class * n_classes} trees in all", xg,
         {"n_estimators": per_class}),
    ]


def wanted(cfg, row):
    """Whether ``--only`` and ``--factors`` keep the row (LightGBM's baseline: always)."""
    who, factor = row[:2]
    if who == "LightGBM" and factor == "baseline":
        return True
    return ((cfg.only is None or who in cfg.only)
            and (cfg.factors is None or factor in cfg.factors))


def run_row(cfg, row, X, y, Xt, yt):
    who, factor, setting, fit, change = row
    clf, info = fit(cfg, X, y, **change)
    t0 = time.perf_counter()
    clf.fit(X, y)
    fit_s = time.perf_counter() - t0
    proba = clf.predict_proba(Xt)
    acc = float(np.mean(np.asarray(clf.classes_)[np.argmax(proba, axis=1)] == yt))
    out = {"who": who, "factor": factor, "setting": setting,
           "change": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in change.items()},
           "trees_grown": int(info["trees_grown"]()), "accuracy": round(100 * acc, 2),
           "fit_s": round(fit_s, 2), "load_average": round(os.getloadavg()[0], 1)}
    print(f"  {who:8s} {factor:20s} {setting:45s} {out['accuracy']:6.2f} %  "
          f"{out['fit_s']:7.1f} s", flush=True)
    return out


def compare(rows):
    """Accuracy and fit time against each library's baseline and LightGBM's; our
    rows that match LightGBM (accuracy within MATCH_POINTS at <= MATCH_FIT of its
    fit time)."""
    base = {r["who"]: r for r in rows if r["factor"] == "baseline"}
    lgb = base["LightGBM"]
    for r in rows:
        own = base.get(r["who"])
        r["vs_own_baseline"] = None if own is None else round(r["accuracy"] - own["accuracy"], 2)
        r["vs_lightgbm"] = round(r["accuracy"] - lgb["accuracy"], 2)
        r["fit_vs_lightgbm"] = round(r["fit_s"] / lgb["fit_s"], 3)
    return [r["setting"] for r in rows if r["who"] == "ours"
            and r["vs_lightgbm"] >= -MATCH_POINTS and r["fit_vs_lightgbm"] <= MATCH_FIT]


# --------------------------------------------------------------- the report
def _signed(v):
    return "" if v is None else f"{v:+.2f}"


def markdown(doc):
    s = doc["settings"]
    lines = [
        f"### `{doc['command']}`", "",
        f"On {doc['machine']}, {THREADS} threads. {s['train']:,} training and "
        f"{s['test']:,} test windows (those of `python -m benchmarks.peers --quick`), the "
        f"same uint8 matrix for every library (digest `{doc['digest']}`). Each row changes "
        "one thing from its library's baseline (the setting it replaces in parentheses).", "",
        "| library | factor | setting | trees grown | accuracy (%) | vs its baseline | "
        "vs LightGBM | fit (s) | × LightGBM's fit |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in doc["rows"]:
        lines.append(f"| {r['who']} | {r['factor']} | {r['setting']} | {r['trees_grown']} | "
                     f"{r['accuracy']:.2f} | {_signed(r['vs_own_baseline'])} | "
                     f"{r['vs_lightgbm']:+.2f} | {r['fit_s']:.1f} | {r['fit_vs_lightgbm']:.2f} |")
    match = doc["matches"]
    lines += ["", "Ours within {:g} point of LightGBM at ≤ {:g}× its fit time: {}.".format(
        MATCH_POINTS, MATCH_FIT, "; ".join(match) if match else "none"), ""]
    lines += [p for p in doc.get("notes", [])]
    return "\n".join(lines) + "\n"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help="labelled folder with train/ and test/")
    p.add_argument("--windows", type=Path, nargs=2, default=None, metavar=("TRAIN.h5", "TEST.h5"),
                   help="fit and score these windows files (default: those of peers.py, "
                        "extracted from --data)")
    p.add_argument("--train", type=int, default=16000, help="training windows (peers --quick)")
    p.add_argument("--test", type=int, default=4000, help="test windows")
    p.add_argument("--use-train", type=int, default=None,
                   help="fit on a class-stratified subset of this many training windows")
    p.add_argument("--use-test", type=int, default=None, help="score this many test windows")
    p.add_argument("--trees", type=int, default=8, help="trees (LightGBM/XGBoost: rounds)")
    p.add_argument("--depth", type=int, default=20)
    p.add_argument("--xgb-depth", type=int, default=12)
    p.add_argument("--leaves", type=int, default=1023)
    p.add_argument("--lgb-pool-mb", type=int, default=2048)
    p.add_argument("--q", type=int, default=119, help="features tried per node")
    p.add_argument("--only", nargs="+", default=None, metavar="LIBRARY",
                   help="only these libraries' rows (LightGBM, ours, XGBoost)")
    p.add_argument("--factors", nargs="+", default=None, metavar="FACTOR",
                   help="only these factors' rows, e.g. baseline trees (LightGBM's baseline "
                        "always runs)")
    p.add_argument("--quick", action="store_true",
                   help="4,000 / 2,000 of the windows, 4 trees")
    p.add_argument("--out", type=Path, default=None,
                   help="default: reports/bench/peers_ablation.json (--quick: "
                        "peers_ablation_quick.json)")
    p.add_argument("--doc", type=Path, default=DOC)
    args = p.parse_args(argv)
    if args.quick:
        args.use_train, args.use_test, args.trees = 4000, 2000, 4
    name = "peers_ablation_quick.json" if args.quick else "peers_ablation.json"
    args.out = args.out or ROOT / "reports" / "bench" / name
    args.use_train = args.use_train or args.train
    args.use_test = args.use_test or args.test
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    cfg = parse(argv)
    if cfg.windows:
        train, test = (read_windows(f) for f in cfg.windows)
    else:
        train, test = bench_windows(cfg.data, cfg.train, cfg.test)
    X, y = subset(train, cfg.use_train, 0)
    Xt, yt = subset(test, cfg.use_test, 1)
    cfg.p, cfg.per_tree = X.shape[1], len(y) // 2   # half the windows per tree, as peers.py
    n_classes = len(np.unique(y))
    load = os.getloadavg()
    rows = []
    for row in variants(cfg, n_classes):
        if wanted(cfg, row):
            rows.append(run_row(cfg, row, X, y, Xt, yt))
            write_json_atomic(cfg.out, {"partial": True, "rows": rows})
    settings = {"train": len(y), "test": len(yt), "trees": cfg.trees, "depth": cfg.depth,
                "xgb_depth": cfg.xgb_depth, "leaves": cfg.leaves, "per_tree": cfg.per_tree,
                "q": cfg.q, "features": cfg.p, "classes": n_classes}
    doc = {"command": shlex.join(["python", "-m", "benchmarks.peers_ablation", *argv]),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_average": load,
           "settings": settings, "digest": digest(X, y, Xt, yt),
           "features_with_256_values": int(sum(len(np.unique(X[:, j])) > 255
                                               for j in range(X.shape[1]))),
           "rows": rows}
    doc["matches"] = compare(rows)
    write_json_atomic(cfg.out, doc)
    update_doc(cfg.doc, markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
