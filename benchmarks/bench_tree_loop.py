"""Whole-tree kernels (CART, regression, density) against another revision's.

Loads the three kernel modules of a git revision (default ``main``) beside the
package's own, fits the same forests with each (the estimators' kernel
swapped in place, one thread, alternating runs) and prints each forest's
fit seconds and the ratio now / revision; the forests must be equal::

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.bench_tree_loop --rev main --repeat 7

The ratio is the median of the per-pair ratios (a pair: one fit with each
kernel, back to back, the order alternating), so a loaded machine's drifts
cancel; ``--json`` writes every time.
"""

import argparse
import importlib
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: criterion: (kernel file, the caller module and its name for the kernel, the
#: kernel's names, newest first).
KERNELS = {
    "cart": ("_cart_kernels.py", "facesegment.forest.families",
             ("cart_nodes", "grow_cart_tree")),
    "regression": ("_regression_kernels.py", "facesegment.forest.regression",
                   ("regression_nodes", "grow_regression_tree")),
    "density": ("_density_kernels.py", "facesegment.forest.density",
                ("density_nodes", "grow_density_tree")),
}


def _kernel(module, names):
    for name in names:
        if hasattr(module, name):
            return name, getattr(module, name)
    raise AttributeError(f"{module.__name__} has none of {names}")


def load_revision(rev, folder):
    """The kernels of ``rev`` ({criterion: dispatcher}), their modules loaded as
    ``facesegment.forest._rev_<file>`` so their relative imports resolve."""
    out = {}
    for crit, (fname, _, names) in KERNELS.items():
        src = subprocess.run(["git", "show", f"{rev}:facesegment/forest/{fname}"], cwd=ROOT,
                             check=True, capture_output=True, text=True).stdout
        path = Path(folder) / f"_rev_{fname}"
        if not path.exists() or path.read_text() != src:
            path.write_text(src)
        name = f"facesegment.forest._rev_{fname[:-3]}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        out[crit] = _kernel(mod, names)[1]
    return out


def data(n, p, seed=0):
    """uint8 and float32 rows, 3 classes, regression targets."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, p), dtype=np.uint8)
    y = ((X[:, 0].astype(int) + X[:, 1] > 255).astype(int) + (X[:, 2] > 200)).astype(int)
    flip = rng.random(n) < 0.2
    y[flip] = rng.integers(0, 3, flip.sum())
    Xf = (X.astype(np.float32) / 17.0 + rng.normal(scale=0.3, size=(n, p))).astype(np.float32)
    yr = X[:, 1] / 40.0 + np.sin(X[:, 2] / 30.0) + rng.normal(scale=0.3, size=n)
    return X, y, Xf, yr


def cases(quick):
    """(label, criterion, make estimator, X, y) of the forests timed."""
    from facesegment.forest import (AxisAlignedForest, AxisAlignedForestRegressor,
                                    DensityForest, ExtraTreesForestRegressor)

    k = 4 if quick else 1
    X, y, Xf, yr = data(20000 // k, 30)
    Xd = data(4000 // k, 4, seed=1)[2]
    Xnan = Xf.copy()
    Xnan[np.random.default_rng(2).random(Xnan.shape) < 0.05] = np.nan
    t = 8 // k if not quick else 2

    def cart(**kw):
        return lambda: AxisAlignedForest(t, criterion="gini", random_state=0, n_jobs=1, **kw)

    def reg(cls, **kw):
        return lambda: cls(t, random_state=0, n_jobs=1, **kw)

    return [
        ("cart gini uint8 q=sqrt", "cart", cart(), X, y),
        ("cart gini float32 q=sqrt", "cart", cart(), Xf, y),
        ("cart gini float32+NaN q=sqrt", "cart", cart(), Xnan, y),
        ("cart gini uint8 q=1", "cart", cart(max_features=1), X, y),
        ("regression float32 q=1/3", "regression",
         reg(AxisAlignedForestRegressor, max_features=1 / 3), Xf, yr),
        ("regression uint8 presort q=1.0", "regression",
         reg(AxisAlignedForestRegressor, max_features=1.0), X, yr),
        ("regression extra float32 q=1/3", "regression",
         reg(ExtraTreesForestRegressor, max_features=1 / 3), Xf, yr),
        ("density full q=all", "density",
         lambda: DensityForest(t, min_samples_leaf=5, random_state=0, n_jobs=1), Xd, None),
        ("density diag n_thr=4", "density",
         lambda: DensityForest(t, min_samples_leaf=2, n_thresholds=4, covariance_type="diag",
                               random_state=0, n_jobs=1), Xd, None),
    ]


def fit_seconds(make, X, y):
    est = make()
    t0 = time.perf_counter()
    est.fit(X) if y is None else est.fit(X, y)
    return time.perf_counter() - t0, est


def _same(a, b):
    fa, fb = a.forest_, b.forest_
    return all(np.asarray(getattr(fa, f)).tobytes() == np.asarray(getattr(fb, f)).tobytes()
               for f in fa._fields)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="main", help="git revision compared with the tree")
    ap.add_argument("--repeat", type=int, default=5, help="pairs of fits per forest")
    ap.add_argument("--quick", action="store_true", help="smaller data (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated criteria (cart,...)")
    ap.add_argument("--json", default=None, help="write the times here")
    args = ap.parse_args(argv)
    folder = Path(tempfile.gettempdir()) / f"bench_tree_loop_{args.rev.replace('/', '_')}"
    folder.mkdir(exist_ok=True)
    old = load_revision(args.rev, folder)
    slots = {}
    for crit, (_, caller, names) in KERNELS.items():
        mod = importlib.import_module(caller)
        slots[crit] = (mod, *_kernel(mod, names))
    only = set(filter(None, args.only.split(",")))
    report = []
    print(f"{'forest':34s} {'now s':>8s} {args.rev + ' s':>10s} {'ratio':>7s}  (median of "
          f"{args.repeat} pairs; ratio > 1: now slower)")
    for label, crit, make, X, y in cases(args.quick):
        if only and crit not in only:
            continue
        mod, name, new = slots[crit]
        times = {"now": [], "rev": []}
        fitted = {}
        for r in range(args.repeat + 1):  # the first pair compiles and is not counted
            order = ("now", "rev") if r % 2 == 0 else ("rev", "now")
            for which in order:
                setattr(mod, name, new if which == "now" else old[crit])
                try:
                    sec, est = fit_seconds(make, X, y)
                finally:
                    setattr(mod, name, new)
                if r > 0:
                    times[which].append(sec)
                fitted[which] = est
        assert _same(fitted["now"], fitted["rev"]), f"{label}: the forests differ"
        ratios = np.array(times["now"]) / np.array(times["rev"])
        row = {"forest": label, "now": float(np.median(times["now"])),
               "rev": float(np.median(times["rev"])), "ratio": float(np.median(ratios)),
               "ratios": ratios.round(4).tolist(), "times": times}
        report.append(row)
        print(f"{label:34s} {row['now']:8.3f} {row['rev']:10.3f} {row['ratio']:7.3f}  "
              f"(pairs {ratios.min():.3f}..{ratios.max():.3f})", flush=True)
    if args.json:
        from facesegment.atomic import write_json_atomic

        write_json_atomic(args.json, report)


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # a --json file of an earlier run is replaced
        main()
