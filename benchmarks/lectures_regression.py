"""Regression forests beside scikit-learn's, same settings, same splits, one run.

    python -m benchmarks.lectures_regression            # diabetes, friedman1, faces
    python -m benchmarks.lectures_regression --quick    # 2 splits, no face task
    python -m benchmarks.lectures_regression --datasets diabetes --splits 30 \
        --out reports/lectures/regression-diabetes-30
    python -m benchmarks.lectures_regression --datasets faces --forests extra-trees

Our AxisAlignedForestRegressor and ExtraTreesForestRegressor against
scikit-learn's RandomForestRegressor and ExtraTreesRegressor with the same
parameters (100 trees, scikit-learn's defaults: every feature scored per
node, min_samples_leaf 1, bootstrap for the random forests, none for
extra-trees; ``n_jobs=1``, so both grow one tree at a time on one core).
Each dataset is split 75/25 at random with seeds 0..S-1 (S = 30 for datasets
under 1,000 rows, whose 25 % test sets are small, 5 otherwise); the test R² is
averaged over the splits, with the standard error of the mean difference
(paired: both forests see the same splits), the fit time is the median over the splits of the
process CPU time (``time.process_time``; less sensitive to a busy machine
than wall time, which is reported beside it).

Datasets: scikit-learn's bundled diabetes data (442 x 10), ``make_friedman1``
(2,000 x 10, noise 1), and a face task: the horizontal offset (pixels) of the
nose tip from the centre of a 31 x 31 grey window drawn at most 12 pixels
from it, on faces300w's training images (windows uint8, 961 features;
``max_features=0.2``, 50 trees, for both libraries; 300 faces, 12 windows each).

Writes reports/lectures/regression.json and regression.md.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.forest import (AxisAlignedForestRegressor,
                                ExtraTreesForestRegressor)
from facesegment.progress import Progress

PAIRS = {
    "random forest": (AxisAlignedForestRegressor, RandomForestRegressor),
    "extra-trees": (ExtraTreesForestRegressor, ExtraTreesRegressor),
}
FACES = ROOT.parent / "shared" / "data" / "faces300w" / "train"
NOSE_TIP = 30  # index of the nose tip among the 68 landmarks (0-based)


def face_offsets(n_faces=300, per_face=12, half=15, reach=12, seed=0):
    """``(X uint8 (n, 961), y float64 (n,), group (n,))``: grey windows around
    points within ``reach`` pixels of the nose tip; y is the tip's column minus
    the window centre's (the offset a detector would have to correct)."""
    from facesegment.data.imageio import read_image, to_grey
    from facesegment.faces.landmarks import read_pts

    rng = np.random.default_rng(seed)
    images = sorted(FACES.glob("*.jpg"))
    images = [images[i] for i in sorted(rng.choice(len(images), min(n_faces, len(images)),
                                                   replace=False))]
    X, y, group = [], [], []
    for k, path in enumerate(images):
        grey = to_grey(read_image(path))
        tx, ty = read_pts(path.with_suffix(".pts"))[NOSE_TIP]
        for _ in range(per_face):
            dx, dy = rng.integers(-reach, reach + 1, size=2)
            cx, cy = int(round(tx)) - dx, int(round(ty)) - dy
            if half <= cy < grey.shape[0] - half and half <= cx < grey.shape[1] - half:
                X.append(grey[cy - half:cy + half + 1, cx - half:cx + half + 1].ravel())
                y.append(tx - cx)
                group.append(k)
    return np.asarray(X, np.uint8), np.asarray(y, np.float64), np.asarray(group)


def datasets(quick, names=None):
    out = {"diabetes": load_diabetes(return_X_y=True) + ({},),
           "friedman1": make_friedman1(2000, noise=1.0, random_state=0) + ({},)}
    if names is not None:
        out = {k: v for k, v in out.items() if k in names}
    if not quick and FACES.is_dir() and (names is None or "faces" in names):
        X, y, group = face_offsets()
        out["faces300w nose-tip offset"] = (X, y, {"n_estimators": 50, "max_features": 0.2,
                                                   "group": group})
    return out


def split(X, y, extra, seed):
    group = extra.get("group")
    if group is None:
        return train_test_split(X, y, test_size=0.25, random_state=seed)
    faces = np.unique(group)  # whole faces on one side: no window of a test face is seen
    rng = np.random.default_rng(seed)
    test = np.isin(group, rng.choice(faces, len(faces) // 4, replace=False))
    return X[~test], X[test], y[~test], y[test]


def timed_fit(est, X, y):
    c0, t0 = time.process_time(), time.perf_counter()
    est.fit(X, y)
    return time.process_time() - c0, time.perf_counter() - t0


#: Datasets of fewer rows get :data:`SMALL_SPLITS` random splits by default (their
#: test sets are small: one split's R² moves by a few hundredths).
SMALL_ROWS = 1000
SMALL_SPLITS = 30


def default_splits(n_rows, quick, splits):
    """Random splits of a dataset: ``splits`` when given, 2 with ``quick``, else
    :data:`SMALL_SPLITS` below :data:`SMALL_ROWS` rows and 5 above."""
    if splits:
        return splits
    return 2 if quick else (SMALL_SPLITS if n_rows < SMALL_ROWS else 5)


def run(quick, names=None, splits=None, forests=None):
    data = datasets(quick, names)
    pairs = {k: v for k, v in PAIRS.items() if forests is None or k.replace(" ", "-") in forests}
    results = {}
    total = sum(default_splits(len(y), quick, splits) for _, y, _ in data.values())
    bar = Progress(total * len(pairs), desc="regression", unit="fits")
    with bar:
        for name, (X, y, extra) in data.items():
            n_splits = default_splits(len(y), quick, splits)
            params = {k: v for k, v in extra.items() if k != "group"}
            params = {"n_estimators": 100, **params}
            for label, (ours, theirs) in pairs.items():
                ours(n_estimators=1).fit(X[:50], y[:50])  # compile the kernels first
                rec = {"ours": [], "sklearn": [], "cpu_ours": [], "cpu_sklearn": [],
                       "wall_ours": [], "wall_sklearn": []}
                for seed in range(n_splits):
                    Xtr, Xte, ytr, yte = split(X, y, extra, seed)
                    for side, cls in (("ours", ours), ("sklearn", theirs)):
                        est = cls(random_state=seed, n_jobs=1, **params)
                        cpu, wall = timed_fit(est, Xtr, ytr)
                        rec[side].append(r2_score(yte, est.predict(Xte)))
                        rec[f"cpu_{side}"].append(cpu)
                        rec[f"wall_{side}"].append(wall)
                    bar.update(1)
                results.setdefault(name, {"n": int(len(y)), "p": int(X.shape[1]),
                                          "params": params, "splits": n_splits, "pairs": {}})
                results[name]["pairs"][label] = summarise(rec)
    return results


def paired_se(a, b):
    """Standard error of the mean of ``a - b`` over the splits (both forests
    saw the same split, so the differences are paired); 0 for one split."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    return float(np.std(d, ddof=1) / np.sqrt(d.size)) if d.size > 1 else 0.0


def summarise(rec):
    med = {k: float(np.median(v)) for k, v in rec.items() if k.startswith(("cpu", "wall"))}
    return {"r2_ours": float(np.mean(rec["ours"])), "r2_sklearn": float(np.mean(rec["sklearn"])),
            "r2_ours_splits": [float(v) for v in rec["ours"]],
            "r2_sklearn_splits": [float(v) for v in rec["sklearn"]],
            "r2_diff": float(np.mean(rec["ours"]) - np.mean(rec["sklearn"])),
            "r2_diff_se": paired_se(rec["ours"], rec["sklearn"]),
            "fit_cpu_ours": med["cpu_ours"], "fit_cpu_sklearn": med["cpu_sklearn"],
            "fit_wall_ours": med["wall_ours"], "fit_wall_sklearn": med["wall_sklearn"],
            "cpu_ratio": med["cpu_ours"] / med["cpu_sklearn"],
            "wall_ratio": med["wall_ours"] / med["wall_sklearn"]}


def markdown(results, command):
    lines = [f"Regression forests beside scikit-learn (`{command}`; test R² averaged over "
             "the random 75/25 splits; difference ours − scikit-learn's ± its standard error "
             "over the splits (paired: the same splits for both); fit time the median over "
             "the splits, n_jobs=1 for both).", "",
             "| data (n x p) | splits | forest | R² ours | R² scikit-learn | difference | fit CPU s "
             "ours / scikit-learn | CPU ratio | wall ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        for label, r in res["pairs"].items():
            lines.append(f"| {name} ({res['n']} x {res['p']}) | {res['splits']} | {label} "
                         f"| {r['r2_ours']:.4f} | "
                         f"{r['r2_sklearn']:.4f} | {r['r2_diff']:+.4f} "
                         f"± {r.get('r2_diff_se', 0):.4f} | "
                         f"{r['fit_cpu_ours']:.3f} / {r['fit_cpu_sklearn']:.3f} | "
                         f"{r['cpu_ratio']:.2f} | {r['wall_ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 splits, no face task")
    ap.add_argument("--datasets", nargs="+", choices=("diabetes", "friedman1", "faces"),
                    help="only these (default: all)")
    ap.add_argument("--forests", nargs="+", choices=("random-forest", "extra-trees"),
                    help="only these pairs (default: both)")
    ap.add_argument("--splits", type=int, help=f"random splits (default {SMALL_SPLITS} for "
                    f"datasets under {SMALL_ROWS} rows, else 5; --quick 2)")
    ap.add_argument("--out", default=str(ROOT / "reports" / "lectures"),
                    help="folder of regression.json / regression.md")
    args = ap.parse_args(argv)
    results = run(args.quick, args.datasets, args.splits, args.forests)
    command = " ".join(["python -m benchmarks.lectures_regression"] + (argv if argv is not None
                                                                      else sys.argv[1:]))
    out = Path(args.out)
    write_json_atomic(out / "regression.json", {"command": command, "datasets": results})
    text = markdown(results, command)
    write_text_atomic(out / "regression.md", text)
    print(text)


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
