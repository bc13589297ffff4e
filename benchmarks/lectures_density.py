"""Density forests against Gaussian mixtures and kernel density estimates, held out.

    python -m benchmarks.lectures_density              # both datasets, the figure
    python -m benchmarks.lectures_density --quick      # 10 trees (a smoke run)

On a 2-D mixture of five non-Gaussian clusters and on the features of UCI
pendigits (16-D, integers 0..100 dequantised by adding U(0, 1) noise, then
standardised with the training rows' statistics), every estimator is fitted on
the training rows, its hyper-parameter is chosen on validation rows, and the
mean log-likelihood of held-out test rows is reported (nats per row; higher is
better), all in one run:

* ``DensityForest`` (100 trees, 2 random cuts per feature and node,
  ``min_samples_leaf`` chosen on validation), and one tree alone;
* scikit-learn ``GaussianMixture`` (full covariances) with as many components
  as a tree of the forest has leaves (rounded mean over trees: each tree is a
  mixture of that many truncated Gaussians), and with the number of
  components chosen on validation;
* scikit-learn ``KernelDensity`` (Gaussian kernel, bandwidth chosen on
  validation).

Writes reports/lectures/density.json, density.md and density.png (the 2-D
data, one tree's density, the forest's density, the matched GMM's density
and samples drawn from the forest).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.mixture import GaussianMixture
from sklearn.neighbors import KernelDensity

from facesegment.atomic import atomic_path, write_json_atomic, write_text_atomic
from facesegment.forest import DensityForest
from facesegment.progress import Progress
from pipelines.uci_data import load_dataset

ROOT = Path(__file__).resolve().parents[1]

UCI = ROOT.parent / "shared" / "data" / "uci"


def mixture_2d(n, seed):
    """``n`` rows of five clusters: two Gaussians, a banana, a ring arc, a square."""
    rng = np.random.default_rng(seed)
    k = rng.choice(5, size=n, p=[0.25, 0.15, 0.25, 0.2, 0.15])
    X = np.empty((n, 2))
    for c in range(5):
        m = int((k == c).sum())
        if c == 0:
            X[k == c] = rng.multivariate_normal([-3, 2], [[0.6, 0.45], [0.45, 0.6]], m)
        elif c == 1:
            X[k == c] = rng.multivariate_normal([3, 3.5], [[0.15, 0], [0, 0.5]], m)
        elif c == 2:   # banana
            u = rng.normal(0, 1.1, m)
            X[k == c] = np.c_[u, 0.45 * u ** 2 - 3 + rng.normal(0, 0.3, m)]
        elif c == 3:   # arc of a ring
            a = rng.uniform(0.1 * np.pi, 0.9 * np.pi, m)
            r = 2.2 + rng.normal(0, 0.15, m)
            X[k == c] = np.c_[r * np.cos(a) + 0.5, r * np.sin(a) - 0.5]
        else:          # uniform square
            X[k == c] = rng.uniform([2.5, -2.5], [4.5, 0.5], (m, 2))
    return X


def datasets():
    """``{name: (train, validation, test, description)}``."""
    out = {}
    X = mixture_2d(1500 + 1000 + 5000, seed=0)
    out["mixture-2d"] = (X[:1500], X[1500:2500], X[2500:],
                         "2-D mixture of 5 clusters (2 Gaussians, banana, ring arc, uniform "
                         "square): 1,500 train / 1,000 validation / 5,000 test rows")
    ds = load_dataset(UCI / "pendigits")
    rng = np.random.default_rng(0)
    A = ds.X.astype(np.float64) + rng.uniform(0, 1, ds.X.shape)
    B = ds.X_test.astype(np.float64) + rng.uniform(0, 1, ds.X_test.shape)
    perm = rng.permutation(len(A))
    fit, val = A[perm[:5500]], A[perm[5500:]]
    mu, sd = fit.mean(0), fit.std(0)
    z = [(a - mu) / sd for a in (fit, val, B)]
    out["pendigits"] = (*z, f"UCI pendigits features (16-D, dequantised, standardised): "
                            f"{len(fit):,} train / {len(val):,} validation / {len(B):,} test "
                            "rows (the dataset's test split)")
    return out


def timed(est, X):
    t0 = time.perf_counter()
    est.fit(X)
    return est, time.perf_counter() - t0


def mean_ll(est, X):
    return float(np.mean(est.score_samples(X)))


def pick(make, values, train, val, progress):
    """``(best value, {value: validation mean log-likelihood}, fitted, seconds)``."""
    scores, best = {}, None
    for v in values:
        est, secs = timed(make(v), train)
        scores[v] = mean_ll(est, val)
        progress.update(1)
        if best is None or scores[v] > scores[best[0]]:
            best = (v, est, secs)
    return best[0], scores, best[1], best[2]


def gmm(k, seed=0):
    return GaussianMixture(k, covariance_type="full", n_init=1, random_state=seed)


def run_one(name, train, val, test, args, progress):
    d = train.shape[1]
    leaf_grid = ([5, 10, 20, 40, 80] if d == 2 else [2 * (d + 1), 4 * (d + 1), 8 * (d + 1)])
    gmm_grid = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]
    bw_grid = list(np.round(np.geomspace(0.05, 1.0, 10), 4))

    def forest(leaf, n=args.trees):
        return DensityForest(n, min_samples_leaf=leaf, n_thresholds=args.thresholds,
                             random_state=0, n_jobs=args.jobs)

    leaf, leaf_scores, df, df_secs = pick(forest, leaf_grid, train, val, progress)
    tree, tree_secs = timed(forest(leaf, 1), train)
    per_tree = np.bincount(np.searchsorted(df.forest_.roots, np.flatnonzero(
        df.forest_.left < 0), side="right") - 1)
    k_tree = int(round(per_tree.mean()))
    g_tree, g_tree_secs = timed(gmm(k_tree), train)
    progress.update(1)
    k_best, k_scores, g_best, g_best_secs = pick(gmm, gmm_grid, train, val, progress)
    bw, bw_scores, kde, kde_secs = pick(lambda b: KernelDensity(bandwidth=b), bw_grid,
                                        train, val, progress)
    rows = [
        (f"DensityForest ({args.trees} trees, min_samples_leaf {leaf})", df, df_secs,
         f"{per_tree.mean():.1f} leaves per tree, {df.n_leaves_} in all"),
        (f"one density tree (min_samples_leaf {leaf})", tree, tree_secs,
         f"{tree.n_leaves_} leaves"),
        (f"GaussianMixture, k = leaves per tree ({k_tree})", g_tree, g_tree_secs, ""),
        (f"GaussianMixture, k chosen on validation ({k_best})", g_best, g_best_secs, ""),
        (f"KernelDensity, bandwidth chosen on validation ({bw})", kde, kde_secs, ""),
    ]
    out = {"rows": [], "selection": {
        "min_samples_leaf": {str(k): v for k, v in leaf_scores.items()},
        "gmm_components": {str(k): v for k, v in k_scores.items()},
        "kde_bandwidth": {str(k): v for k, v in bw_scores.items()}}}
    for label, est, secs, note in rows:
        out["rows"].append({"method": label, "test_mean_log_likelihood": mean_ll(est, test),
                            "validation_mean_log_likelihood": mean_ll(est, val),
                            "fit_seconds": secs, "note": note})
    out["k_leaves_per_tree"] = k_tree
    out["n_leaves_forest"] = int(df.n_leaves_)
    models = {"forest": df, "tree": tree, "gmm_tree": g_tree, "gmm_best": g_best}
    return out, models


def figure(models, train, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = np.linspace(-6.5, 6.5, 260)
    xx, yy = np.meshgrid(g, g)
    grid = np.c_[xx.ravel(), yy.ravel()]
    panels = [("training data (1,500 rows)", None),
              ("one density tree", models["tree"]),
              (f"density forest ({models['forest'].n_estimators} trees)", models["forest"]),
              (f"GaussianMixture, k = {models['gmm_tree'].n_components}", models["gmm_tree"]),
              ("1,500 samples drawn from the forest", "sample")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4.2))
    for ax, (title, est) in zip(axes, panels):
        if est is None:
            ax.scatter(train[:, 0], train[:, 1], s=2, c="k")
        elif est == "sample":
            S = models["forest"].sample(1500, random_state=0)
            ax.scatter(S[:, 0], S[:, 1], s=2, c="tab:red")
        else:
            p = np.exp(est.score_samples(grid)).reshape(xx.shape)
            ax.imshow(p, origin="lower", extent=(g[0], g[-1], g[0], g[-1]), cmap="magma",
                      vmax=np.quantile(p, 0.999))
        ax.set_title(title, fontsize=10)
        ax.set_xlim(g[0], g[-1])
        ax.set_ylim(g[0], g[-1])
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    with atomic_path(path, suffix=".png", what="the figure") as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)


def markdown(report):
    lines = ["# Density forests: held-out mean log-likelihood", "",
             f"Command: `{report['command']}`", "",
             "Mean log-likelihood of the test rows (nats per row, higher is better); "
             "hyper-parameters chosen on the validation rows; fit seconds on this machine "
             f"({report['n_jobs']} thread(s)).", ""]
    for name, res in report["datasets"].items():
        lines += [f"## {name}", "", res["description"], "",
                  "| method | test mean log-likelihood | validation | fit s | note |",
                  "| --- | ---: | ---: | ---: | --- |"]
        for r in res["rows"]:
            lines.append(f"| {r['method']} | {r['test_mean_log_likelihood']:.3f} | "
                         f"{r['validation_mean_log_likelihood']:.3f} | {r['fit_seconds']:.2f} | "
                         f"{r['note']} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--thresholds", type=int, default=2, help="DensityForest n_thresholds")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="10 trees (a smoke run)")
    p.add_argument("--out", default=str(ROOT / "reports" / "lectures"))
    args = p.parse_args(argv)
    if args.quick:
        args.trees = 10
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    DensityForest(2, min_samples_leaf=20, random_state=0).fit(mixture_2d(200, 1))  # compile
    data = datasets()
    report = {"command": "python -m benchmarks.lectures_density"
              + (" --quick" if args.quick else "")
              + ("" if args.trees == 100 or args.quick else f" --trees {args.trees}")
              + ("" if args.thresholds == 2 else f" --thresholds {args.thresholds}"),
              "n_jobs": args.jobs, "trees": args.trees, "datasets": {}}
    progress = Progress(5 + 3 + 2 * (1 + 10 + 10), desc="density benchmark", unit="fits")
    for name, (train, val, test, desc) in data.items():
        res, models = run_one(name, train, val, test, args, progress)
        res["description"] = desc
        report["datasets"][name] = res
        if train.shape[1] == 2:
            figure(models, train, out / "density.png")
    progress.close()
    write_json_atomic(out / "density.json", report, indent=1)
    write_text_atomic(out / "density.md", markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
