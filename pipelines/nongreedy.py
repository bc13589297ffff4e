"""Non-greedy decision trees against greedy ones (Norouzi et al. 2015, Figure 2):
``python -m pipelines.nongreedy`` / ``make nongreedy`` (docs/nongreedy.md).

For every dataset folder under ``--root`` (``NAME/train.npz`` + ``test.npz``,
the format of ``../shared/data/uci``) two experiments:

* **single trees**, for every depth of ``depths`` and every method:
  ``cart`` (scikit-learn's DecisionTreeClassifier, entropy), ``axis`` (our
  greedy axis-aligned tree: the best split over all features), ``co2`` (the
  greedy CO2 tree grown from it), ``ng-axis`` and ``ng-co2`` (non-greedy trees
  initialised from those two).  Each method's grid (``GRIDS``) is searched on a
  stratified validation split of the training set (``validation``; the fits
  use at most ``tune_max_rows`` rows of the rest, 0: all); the chosen setting
  (the first in grid order on ties) is refitted on the whole training set and
  its training and test accuracy recorded.  The greedy ``axis`` and ``co2``
  trees are the non-greedy trees' starting points exactly (``n_epochs=0``).
* **forests** of ``forest_depth``: random forest (axis-aligned, sqrt features),
  CO2 forest and a forest of non-greedy trees (with the setting chosen for
  ``ng-axis`` at that depth, when there is one), test accuracy of their first
  k trees for k in ``forest_trees``.

Every unit of work is a stage of the shared runner (:mod:`pipelines.runner`)
writing ``OUT/runs/NAME/<unit>.json`` atomically with a key hashed from its
settings and the dataset's sha256; a rerun skips the units whose file has the
same key (resumable).  One progress line per unit (done/total, elapsed, ETA).
A dataset that fails is one error line (exit status 2 at the end) while the
others run.  Then ``OUT/results.json``, ``OUT/tables.md`` and
``OUT/nongreedy.png`` are rendered from the files, and, for the default
output folder, docs/studies/nongreedy-tables.md.  ``--quick``: tiny grids
(tests, smoke runs).
"""

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.errors import DataError

from .runner import Counter, Stage, exit_code, guarded, keyed_result, run_stages
from .uci_data import find_datasets, load_dataset, stratified_split, stratified_subsample

DEFAULT_ROOT = "../shared/data/uci"
#: Datasets run by default (those of ``--root`` that exist; covertype, 500,000
#: rows, is left out: give it with ``--datasets`` to run it).
DEFAULT_DATASETS = ("mnist", "satimage", "pendigits", "letter", "usps")
VERSION = 1
METHODS = ("cart", "axis", "co2", "ng-axis", "ng-co2")
FORESTS = ("rf", "co2-forest", "ng-forest")
#: Everything the experiment depends on (``--quick`` replaces some keys).
SETTINGS = {
    "seed": 0,
    "validation": 0.2,
    "tune_max_rows": 0,
    "depths": [4, 6, 8, 10, 12, 14, 16],
    "grids": {
        "cart": {"min_samples_leaf": [1, 5, 20]},
        "axis": {}, "co2": {},
        "ng-axis": {"nu": [10.0, 100.0, 1000.0], "eta": [0.1, 0.3], "ssgd_refresh": [0, 1]},
        "ng-co2": {"nu": [10.0, 100.0, 1000.0], "eta": [0.1, 0.3], "ssgd_refresh": [0, 1]},
    },
    "ng_fixed": {"n_epochs": 20, "ssgd_refresh": 1, "batch_size": 128, "momentum": 0.9},
    "forest_depth": 12,
    "forest_trees": [10, 30],
}
QUICK = {
    "depths": [2, 3],
    "grids": {"cart": {"min_samples_leaf": [1, 5]}, "axis": {}, "co2": {},
              "ng-axis": {"nu": [1.0, 10.0], "eta": [0.1]}, "ng-co2": {"nu": [10.0], "eta": [0.1]}},
    "ng_fixed": {"n_epochs": 3, "ssgd_refresh": 1, "batch_size": 32, "momentum": 0.9},
    "forest_depth": 3,
    "forest_trees": [2, 3],
}


# --------------------------------------------------------------- estimators

def make_tree(method, depth, params, seed, fixed):
    """An unfitted single tree of ``method`` at ``depth`` with ``params``."""
    from sklearn.tree import DecisionTreeClassifier

    from facesegment.forest import NonGreedyTree

    if method == "cart":
        return DecisionTreeClassifier(criterion="entropy", max_depth=depth, random_state=seed,
                                      **params)
    init = "co2" if method.endswith("co2") else "axis"
    kw = dict(fixed) if method.startswith("ng-") else {"n_epochs": 0}
    return NonGreedyTree(max_depth=depth, init=init, random_state=seed, **{**kw, **params})


def make_forest(kind, n_trees, depth, params, seed, fixed):
    from facesegment.forest import AxisAlignedForest, CO2Forest, NonGreedyForest

    common = dict(n_estimators=n_trees, max_depth=depth, random_state=seed, n_jobs=1)
    if kind == "rf":
        return AxisAlignedForest(max_features="sqrt", **common)
    if kind == "co2-forest":
        return CO2Forest(max_features="sqrt", **common)
    return NonGreedyForest(max_features="sqrt", init="axis", **common, **{**fixed, **params})


def grid_points(grid):
    """The product of ``{name: [values]}`` in order (one empty point for ``{}``)."""
    points = [{}]
    for name, values in grid.items():
        points = [{**p, name: v} for p in points for v in values]
    return points


def tree_stats(est):
    """Timing and structure of a fitted non-greedy tree (None for others)."""
    st = getattr(est, "tree_stats_", None)
    if not st:
        return None
    s = st[0]
    ev = [e for e in s["epochs"] if "surrogate" in e]
    return {"seconds": s["seconds"], "t_init": s["t_init"], "t_sgd": s["t_sgd"],
            "sgd_seconds_per_epoch": s["sgd_seconds_per_epoch"],
            "lai_samples_per_s": s["lai_samples_per_s"], "n_leaves": s["n_leaves"],
            "active_leaves": ev[-1]["active_leaves"] if ev else None,
            "surrogate": [e["surrogate"] for e in ev], "loss": [e["loss"] for e in ev]}


# ------------------------------------------------------------------- units

def run_tree(ds, method, depth, cfg):
    """One (method, depth): tune on the validation split, refit, evaluate."""
    seed, fixed = cfg["seed"], cfg["ng_fixed"]
    fit_idx, val_idx = stratified_split(ds.y, cfg["validation"], seed)
    fit_idx = stratified_subsample(fit_idx, ds.y, cfg["tune_max_rows"], seed)
    points = grid_points(cfg["grids"][method])
    val = []
    if len(points) > 1:
        for params in points:
            est = make_tree(method, depth, params, seed, fixed).fit(ds.X[fit_idx], ds.y[fit_idx])
            val.append(float(est.score(ds.X[val_idx], ds.y[val_idx])))
    best = points[int(np.argmax(val))] if val else points[0]
    t0 = time.perf_counter()
    est = make_tree(method, depth, best, seed, fixed).fit(ds.X, ds.y)
    fit_s = time.perf_counter() - t0
    return {"dataset": ds.name, "depth": depth, "method": method, "params": best,
            "grid": points, "val_acc": val, "tune_rows": int(len(fit_idx)), "train_acc": float(est.score(ds.X, ds.y)),
            "test_acc": float(est.score(ds.X_test, ds.y_test)), "fit_seconds": fit_s,
            "stats": tree_stats(est)}


def run_forest(ds, kind, cfg, chosen):
    """One forest kind: the largest forest fitted once, its first k trees evaluated."""
    n = max(cfg["forest_trees"])
    params = chosen if kind == "ng-forest" else {}
    t0 = time.perf_counter()
    est = make_forest(kind, n, cfg["forest_depth"], params, cfg["seed"], cfg["ng_fixed"])
    est.fit(ds.X, ds.y)
    fit_s = time.perf_counter() - t0
    out = {"dataset": ds.name, "kind": kind, "depth": cfg["forest_depth"], "params": params,
           "fit_seconds": fit_s, "test_acc": {}, "train_acc": {}}
    for k in cfg["forest_trees"]:
        out["test_acc"][str(k)] = float(np.mean(est.predict(ds.X_test, n_trees=k) == ds.y_test))
        out["train_acc"][str(k)] = float(np.mean(est.predict(ds.X, n_trees=k) == ds.y))
    return out


def unit_settings(cfg, method=None):
    """The settings a unit depends on (a tree unit: its method's grid; a forest unit:
    the forests' sizes), so that adding depths or methods redoes nothing else."""
    base = {"seed": cfg["seed"], "ng_fixed": cfg["ng_fixed"]}
    if method is None:
        return {**base, "forest_depth": cfg["forest_depth"], "forest_trees": cfg["forest_trees"]}
    return {**base, "validation": cfg["validation"], "tune_max_rows": cfg["tune_max_rows"],
            "grid": cfg["grids"][method]}


def unit_key(name, ds, settings, extra=None):
    blob = json.dumps({"unit": name, "sha256": ds.sha256, "settings": settings,
                       "extra": extra, "version": VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _read(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def unit_summary(res):
    """A unit's accuracies, for its progress line."""
    acc = res.get("test_acc")
    return (f"test {acc:.4f} train {res['train_acc']:.4f}" if isinstance(acc, float)
            else "test " + " ".join(f"{k}:{v:.4f}" for k, v in acc.items()))


class Datasets:
    """One dataset at a time, loaded when a unit of it first needs it."""

    def __init__(self, root):
        self.root, self.name, self.ds = Path(root), None, None

    def __call__(self, name):
        if name != self.name:
            self.name, self.ds = name, None
            self.ds = load_dataset(self.root / name)
        return self.ds


def unit_stage(out, get, name, unit, fn, settings, extra=lambda: None):
    """A :class:`pipelines.runner.Stage` writing ``OUT/runs/NAME/UNIT.json`` (with its
    key) from ``fn(ds)``; fresh when that file holds the key."""
    path = Path(out) / "runs" / name / f"{unit}.json"

    def key():
        return unit_key(unit, get(name), settings, extra())

    def run():
        k = key()
        res = fn(get(name))
        res["key"] = k
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, res)
        return res

    return Stage(f"{name} {unit}", run, fresh=lambda: keyed_result(path, key()), group=name)


def dataset_units(out, get, name, cfg, methods, forests):
    """The units of one dataset: every (depth, method) tree, then the forests (the
    non-greedy forest with the setting chosen for ng-axis at ``forest_depth``)."""
    stages, results = [], {}

    def keep(unit, fn):  # the tree results, fresh or new, for chosen()
        def run(ds=None):
            results[unit] = fn(ds)
            return results[unit]
        return run

    for depth in cfg["depths"]:
        for method in methods:
            unit = f"tree-d{depth:02d}-{method}"
            st = unit_stage(out, get, name, unit,
                            keep(unit, lambda ds, m=method, d=depth: run_tree(ds, m, d, cfg)),
                            unit_settings(cfg, method))
            st.fresh = keep(unit, lambda ds, fresh=st.fresh: fresh())
            stages.append(st)
    ng = f"tree-d{cfg['forest_depth']:02d}-ng-axis"

    def chosen():
        return (results.get(ng) or {}).get("params", {})

    for kind in forests:
        st = unit_stage(out, get, name, f"forest-{kind}",
                        lambda ds, k=kind: run_forest(ds, k, cfg, chosen()),
                        unit_settings(cfg),
                        extra=chosen if kind == "ng-forest" else (lambda: None))
        if kind == "ng-forest" and any(s.name == f"{name} {ng}" for s in stages):
            st.deps = (f"{name} {ng}",)
        stages.append(st)
    return stages


def pending(out, root, names, cfg, methods, forests):
    """Units without an up-to-date file (a non-greedy forest: without a file), from
    the datasets' sha256 alone (nothing is loaded)."""
    from types import SimpleNamespace

    from .uci_data import FILES, sha256_file

    n = 0
    for name in names:
        ds = SimpleNamespace(name=name, sha256={f: sha256_file(Path(root) / name / f)
                                                for f in FILES})
        units = [(f"tree-d{d:02d}-{m}", m) for d in cfg["depths"] for m in methods]
        units += [(f"forest-{k}", None) for k in forests]
        for unit, method in units:
            old = _read(Path(out) / "runs" / name / f"{unit}.json")
            if unit == "forest-ng-forest":
                n += old is None
            else:
                n += old is None or old.get("key") != unit_key(
                    unit, ds, unit_settings(cfg, method))
    return n


def collect(out):
    """``(trees, forests)``: the records of every unit file under ``OUT/runs``, plus
    those of ``OUT/results.json`` whose unit files are gone (the unit caches are
    not kept in git: rerunning one dataset on a fresh clone must not drop the
    others' results from the tables)."""
    runs = Path(out) / "runs"
    trees = [r for r in map(_read, sorted(runs.glob("*/tree-*.json"))) if r]
    forests = [r for r in map(_read, sorted(runs.glob("*/forest-*.json"))) if r]
    old = _read(Path(out) / "results.json") or {}
    have = {(r["dataset"], r["depth"], r["method"]) for r in trees}
    trees += [r for r in old.get("trees", [])
              if (r["dataset"], r["depth"], r["method"]) not in have]
    have = {(r["dataset"], r["kind"]) for r in forests}
    forests += [r for r in old.get("forests", []) if (r["dataset"], r["kind"]) not in have]
    trees.sort(key=lambda r: (r["dataset"], r["depth"], METHODS.index(r["method"])))
    forests.sort(key=lambda r: (r["dataset"], FORESTS.index(r["kind"])))
    return trees, forests


# ------------------------------------------------------------------ driver

def get_parser():
    p = argparse.ArgumentParser(
        prog="python -m pipelines.nongreedy",
        description="Non-greedy trees (Norouzi et al. 2015) against greedy axis-aligned, "
                    "CO2 and scikit-learn trees across depths, and forests of them; "
                    "finished units are skipped (docs/nongreedy.md; tables in "
                    "docs/studies/nongreedy-tables.md).")
    p.add_argument("--root", default=DEFAULT_ROOT, help="folder of NAME/train.npz + test.npz")
    p.add_argument("--out", default=None,
                   help="output folder (default reports/nongreedy, reports/nongreedy/quick "
                        "with --quick)")
    p.add_argument("--datasets", nargs="+", default=None, metavar="NAME",
                   help="dataset folders under --root (default: those of DEFAULT_DATASETS "
                        "present, else all)")
    p.add_argument("--depths", nargs="+", type=int, default=None, metavar="D")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--forests", nargs="+", default=list(FORESTS), choices=FORESTS + ("none",))
    p.add_argument("--tune-max-rows", type=int, default=None, metavar="N",
                   help="tuning fits use at most N rows (stratified; 0: all)")
    p.add_argument("--forest-depth", type=int, default=None)
    p.add_argument("--quick", action="store_true", help="tiny grids (tests, smoke runs)")
    p.add_argument("--force", action="store_true", help="redo finished units")
    return p


def config(args):
    cfg = json.loads(json.dumps(SETTINGS))
    if args.quick:
        cfg.update(json.loads(json.dumps(QUICK)))
    for key, val in (("depths", args.depths), ("tune_max_rows", args.tune_max_rows),
                     ("forest_depth", args.forest_depth)):
        if val is not None:
            cfg[key] = val
    return cfg


#: Failures of one dataset reported as one line while the others go on.
DATASET_ERRORS = (DataError, MemoryError, ValueError, ArithmeticError)


def main(argv=None, log=None):
    args = get_parser().parse_args(argv)
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return guarded("nongreedy", lambda: _main(args, argv, log), what="units")


def _error(stage, exc):
    print(f"nongreedy: error: {stage.group}: {type(exc).__name__}: {exc}"
          if not isinstance(exc, DataError) else f"nongreedy: error: {exc}",
          file=sys.stderr, flush=True)


def _main(args, argv, log):
    from . import nongreedy_report

    cfg = config(args)
    out = Path(args.out or ("reports/nongreedy/quick" if args.quick else "reports/nongreedy"))
    found = find_datasets(args.root)
    names = args.datasets or [d for d in DEFAULT_DATASETS if d in found] or found
    forests = [] if "none" in args.forests else args.forests
    get = Datasets(args.root)
    stages = [st for name in names
              for st in dataset_units(out, get, name, cfg, args.methods, forests)]
    todo = (len(stages) if args.force
            else pending(out, args.root, names, cfg, args.methods, forests))
    outcomes = run_stages(stages, Counter(log, "nongreedy", len(stages), todo, unit_summary),
                          force=args.force, keep_going=DATASET_ERRORS, on_error=_error)
    trees, forest_res = collect(out)  # every dataset run so far, not only these
    nongreedy_report.render(out, cfg, trees, forest_res,
                            sys.argv[1:] if argv is None else list(argv))
    log(f"[nongreedy] wrote {out / 'tables.md'}, {out / 'results.json'}, "
        f"{out / 'nongreedy.png'}")
    if args.out is None and not args.quick:   # the default folder: the docs' tables too
        write_text_atomic(nongreedy_report.DOC, nongreedy_report.docs_page(trees, forest_res))
        log(f"[nongreedy] wrote {nongreedy_report.DOC}")
    return exit_code(outcomes)


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
