"""Cost-complexity pruning of one tree, ours beside scikit-learn's, one run.

    python -m benchmarks.lectures_pruning                 # satimage and letter
    python -m benchmarks.lectures_pruning --datasets satimage --max-alphas 50

Protocol, the same for both libraries, per dataset (../shared/data/uci):
20 % of the training rows (stratified, seed 0) are held out for validation;
one full-depth tree is grown on the other 80 % with every feature scored at
every node and no bootstrap (ours: ``AxisAlignedForest(1,
max_features="all", bootstrap=False)``, entropy; scikit-learn:
``DecisionTreeClassifier(criterion="entropy")``); its weakest-link path is
computed on those same rows (ours: ``cost_complexity_pruning_path``;
scikit-learn: ``cost_complexity_pruning_path``); at most ``--max-alphas``
alphas of the path (evenly spaced along it, the first and last included) are
tried: ours prunes the grown tree (:func:`facesegment.forest.pruning.prune`),
scikit-learn refits with ``ccp_alpha``; the alpha with the best validation
accuracy is kept (ties: the larger alpha, the smaller tree) and its test
error reported.  scikit-learn with the Gini criterion, and our tree pruned
with Gini impurities, are extra rows.

Writes reports/lectures/pruning.json, pruning.md and pruning.png (per
dataset: the two paths, total leaf impurity against alpha in nats, and the
validation / test error against the number of leaves).
"""

import argparse
import time
from pathlib import Path

import numpy as np
from sklearn.tree import DecisionTreeClassifier

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import atomic_path, write_json_atomic, write_text_atomic
from facesegment.forest import AxisAlignedForest
from facesegment.forest.pruning import cost_complexity_pruning_path, prune
from facesegment.progress import Progress
from pipelines.uci_data import load_dataset, stratified_split

UCI = ROOT.parent / "shared" / "data" / "uci"


def grid(alphas, k):
    """At most ``k`` entries of the increasing ``alphas``, evenly spaced, ends kept."""
    alphas = np.unique(alphas)
    if alphas.size <= k:
        return alphas
    return alphas[np.unique(np.round(np.linspace(0, alphas.size - 1, k)).astype(int))]


def choose(alphas, val_err):
    """Index of the lowest validation error, the largest alpha among ties."""
    val_err = np.asarray(val_err)
    return int(np.flatnonzero(val_err == val_err.min())[-1])


def ours(X, y, Xv, yv, Xt, yt, criterion, k, bar):
    t0 = time.process_time()
    tree = AxisAlignedForest(1, max_features="all", bootstrap=False, random_state=0).fit(X, y)
    t_fit = time.process_time() - t0
    t0 = time.process_time()
    path = cost_complexity_pruning_path(tree, X, y, criterion=criterion)
    t_path = time.process_time() - t0
    alphas = grid(path.ccp_alphas, k)
    rows = []
    for a in alphas:
        small = prune(tree, float(a), X, y, criterion=criterion)
        rows.append((int((small.forest_.left < 0).sum()),
                     100 * (1 - small.score(Xv, yv)), 100 * (1 - small.score(Xt, yt))))
        bar.update(1)
    return tree_result(path.ccp_alphas, path.impurities, alphas, rows,
                       100 * (1 - tree.score(Xt, yt)), t_fit, t_path, nats=1.0)


def sklearn(X, y, Xv, yv, Xt, yt, criterion, k, bar):
    t0 = time.process_time()
    tree = DecisionTreeClassifier(criterion=criterion, random_state=0).fit(X, y)
    t_fit = time.process_time() - t0
    t0 = time.process_time()
    path = tree.cost_complexity_pruning_path(X, y)
    t_path = time.process_time() - t0
    alphas = grid(path.ccp_alphas, k)
    rows = []
    for a in alphas:
        small = DecisionTreeClassifier(criterion=criterion, random_state=0,
                                       ccp_alpha=float(a)).fit(X, y)
        rows.append((int(small.get_n_leaves()), 100 * (1 - small.score(Xv, yv)),
                     100 * (1 - small.score(Xt, yt))))
        bar.update(1)
    # scikit-learn's entropy is in bits: alphas and impurities times ln 2 are in nats
    nats = np.log(2) if criterion == "entropy" else 1.0
    return tree_result(path.ccp_alphas, path.impurities, alphas, rows,
                       100 * (1 - tree.score(Xt, yt)), t_fit, t_path, nats)


def tree_result(path_alphas, path_impurities, alphas, rows, full_test, t_fit, t_path, nats):
    leaves, val, test = (np.asarray(c) for c in zip(*rows))
    i = choose(alphas, val)
    return {"path_alphas": (np.asarray(path_alphas) * nats).tolist(),
            "path_impurities": (np.asarray(path_impurities) * nats).tolist(),
            "alphas": (np.asarray(alphas) * nats).tolist(), "leaves": leaves.tolist(),
            "val_error": val.tolist(), "test_error": test.tolist(),
            "chosen_alpha": float(alphas[i] * nats), "chosen_leaves": int(leaves[i]),
            "chosen_val_error": float(val[i]), "chosen_test_error": float(test[i]),
            "full_leaves": int(leaves[0]), "full_test_error": float(full_test),
            "fit_cpu_s": t_fit, "path_cpu_s": t_path}


def run(names, k):
    methods = {"ours (entropy)": (ours, "entropy"),
               "scikit-learn (entropy)": (sklearn, "entropy"),
               "ours, Gini impurities": (ours, "gini"),
               "scikit-learn (gini)": (sklearn, "gini")}
    results = {}
    Xw = np.random.default_rng(0).normal(size=(60, 3)).astype(np.float32)
    warm = AxisAlignedForest(1, random_state=0).fit(Xw, Xw[:, 0] > 0)  # compile first
    prune(warm, 0.01, Xw, Xw[:, 0] > 0)
    bar = Progress(len(names) * len(methods) * k, desc="pruning", unit="alphas")
    with bar:
        for name in names:
            ds = load_dataset(UCI / name)
            fit, val = stratified_split(ds.y, 0.2, seed=0)
            X, y, Xv, yv = ds.X[fit], ds.y[fit], ds.X[val], ds.y[val]
            res = {"n_fit": int(fit.size), "n_val": int(val.size),
                   "n_test": int(ds.y_test.size), "methods": {}}
            for label, (func, criterion) in methods.items():
                res["methods"][label] = func(X, y, Xv, yv, ds.X_test, ds.y_test, criterion,
                                             k, bar)
            results[name] = res
    return results


def markdown(results, command):
    lines = [f"One pruned tree, ours beside scikit-learn's (`{command}`): the alpha with the "
             "best validation accuracy on 20 % of the training rows, test error of the tree "
             "pruned at it.", "",
             "| dataset | tree | leaves grown | test error grown % | alpha chosen (nats) | "
             "leaves pruned | validation error % | test error pruned % | fit CPU s | "
             "path CPU s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, res in results.items():
        for label, r in res["methods"].items():
            lines.append(f"| {name} | {label} | {r['full_leaves']} | {r['full_test_error']:.2f} "
                         f"| {r['chosen_alpha']:.3g} | {r['chosen_leaves']} | "
                         f"{r['chosen_val_error']:.2f} | {r['chosen_test_error']:.2f} | "
                         f"{r['fit_cpu_s']:.3f} | {r['path_cpu_s']:.3f} |")
    lines += ["", "Test error of our pruned tree minus scikit-learn's (entropy): " + ", ".join(
        f"{name} {r['methods']['ours (entropy)']['chosen_test_error'] - r['methods']['scikit-learn (entropy)']['chosen_test_error']:+.2f} points"  # noqa: E501
        for name, r in results.items()) + "."]
    return "\n".join(lines) + "\n"


def figure(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, axes = plt.subplots(len(names), 2, figsize=(11, 3.8 * len(names)), squeeze=False)
    styles = {"ours (entropy)": ("C0", "-"), "scikit-learn (entropy)": ("C1", "--")}
    for row, name in zip(axes, names):
        for label, (colour, ls) in styles.items():
            r = results[name]["methods"][label]
            a = np.asarray(r["path_alphas"])
            row[0].step(np.maximum(a, 1e-7), r["path_impurities"], where="post", color=colour,
                        ls=ls, label=label)
            row[1].plot(r["leaves"], r["val_error"], color=colour, ls=ls,
                        label=f"{label}, validation")
            row[1].plot(r["leaves"], r["test_error"], color=colour, ls=":", alpha=0.7,
                        label=f"{label}, test")
            row[1].scatter([r["chosen_leaves"]], [r["chosen_test_error"]], color=colour,
                           zorder=3)
        row[0].set(xscale="log", xlabel="alpha (nats; 0 drawn at 1e-7)",
                   ylabel="total leaf impurity Q(T(alpha))",
                   title=f"{name}: weakest-link path (training rows)")
        row[1].set(xscale="log", xlabel="leaves of T(alpha)", ylabel="error %",
                   title=f"{name}: error along the path (dot: alpha chosen)")
        row[0].legend(fontsize=8)
        row[1].legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["satimage", "letter"])
    ap.add_argument("--max-alphas", type=int, default=120,
                    help="alphas of each path tried on the validation rows")
    ap.add_argument("--out", default=str(ROOT / "reports" / "lectures"))
    args = ap.parse_args(argv)
    results = run(args.datasets, args.max_alphas)
    command = "python -m benchmarks.lectures_pruning" + (
        "" if args.datasets == ["satimage", "letter"] else " --datasets "
        + " ".join(args.datasets)) + ("" if args.max_alphas == 120
                                      else f" --max-alphas {args.max_alphas}")
    out = Path(args.out)
    write_json_atomic(out / "pruning.json", {"command": command, "datasets": results})
    text = markdown(results, command)
    write_text_atomic(out / "pruning.md", text)
    figure(results, out / "pruning.png")
    print(text)


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
