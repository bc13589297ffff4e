"""Out-of-bag accuracy against test accuracy as trees are added, beside scikit-learn.

    nice -n 10 python -m benchmarks.lectures_oob --max-train 50000
    python -m benchmarks.lectures_oob --datasets satimage --trees 30 100

For every dataset of ``../shared/data/uci`` (train.npz / test.npz as they are),
in one run:

* ``AxisAlignedForest(criterion="gini", max_features="sqrt", oob_score=True,
  warm_start=True)`` and ``RandomForestClassifier`` with the same settings,
  grown to each of ``--trees`` (30, 100, 300) by warm starts (both libraries
  give the added trees the seeds a fresh forest of that size would give
  them): ``oob_score_`` and test accuracy at each size, the out-of-bag
  estimate minus the test accuracy (target: within 1 point), and the mean
  number of trees that vote on a row's out-of-bag estimate (about 37 % of
  the trees).
* A ``--cv-folds``-fold stratified cross-validation accuracy of our forest
  of ``--cv-trees`` trees on the training set alone, beside its test
  accuracy at the same size: an estimate of accuracy on the training
  distribution that does not depend on out-of-bag votes.  Where the
  out-of-bag estimate, the CV estimate and the test accuracy disagree the
  same way, the test set is not drawn from the training distribution.

``--max-train N`` fits on a stratified subsample of N training rows (mnist and
covertype, to fit a shared 2-core machine).  Results are written after every
dataset: reports/lectures/oob.json and oob.md.
"""

import argparse
import os
import platform
import sys
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import StratifiedKFold

from benchmarks.lectures_cart import BIG_BYTES, load
from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.forest import AxisAlignedForest
from facesegment.progress import Progress
from pipelines.uci_data import find_datasets

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "nice -n 10 python -m benchmarks.lectures_oob"


def get_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=str(ROOT.parent / "shared" / "data" / "uci"))
    p.add_argument("--datasets", nargs="*", default=None, help="default: all under --root")
    p.add_argument("--trees", nargs="*", type=int, default=[30, 100, 300])
    p.add_argument("--cv-trees", type=int, default=100)
    p.add_argument("--cv-folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-train", type=int, default=0, help="0: every training row")
    p.add_argument("--out", default=str(ROOT / "reports" / "lectures"))
    return p


def ours(n, seed, **kw):
    return AxisAlignedForest(n, criterion="gini", max_features="sqrt", random_state=seed,
                             n_jobs=1, **kw)


def theirs(n, seed, **kw):
    return RandomForestClassifier(n, criterion="gini", max_features="sqrt",
                                  random_state=seed, n_jobs=1, **kw)


def votes_per_row(est):
    """Mean number of trees that vote on a training row's out-of-bag estimate
    (scikit-learn's forest: the rows each tree did not draw)."""
    n = est.oob_decision_function_.shape[0]
    return float(sum(n - np.unique(s).size for s in est.estimators_samples_) / n)


def growth(make, X, y, Xt, yt, trees, seed):
    """OOB and test accuracy (%) of one warm-started forest at each size."""
    est = make(trees[0], seed, oob_score=True, warm_start=True)
    rows = []
    for n in trees:
        est.set_params(n_estimators=n).fit(X, y)
        test = 100 * float(np.mean(est.predict(Xt) == yt))
        oob = 100 * float(est.oob_score_)
        rows.append({"trees": n, "oob": oob, "test": test, "oob_minus_test": oob - test})
        if hasattr(est, "estimators_samples_"):
            rows[-1]["votes"] = votes_per_row(est)
    return rows


def cross_validated(X, y, Xt, yt, n_trees, folds, seed):
    """Our forest's CV accuracy on the training set and its test accuracy (%)."""
    accs = []
    for tr, va in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y):
        est = ours(n_trees, seed).fit(X[tr], y[tr])
        accs.append(100 * float(np.mean(est.predict(X[va]) == y[va])))
    test = 100 * float(np.mean(ours(n_trees, seed).fit(X, y).predict(Xt) == yt))
    cv = float(np.mean(accs))
    return {"trees": n_trees, "folds": folds, "cv": cv,
            "cv_se": float(np.std(accs, ddof=1) / np.sqrt(folds)), "test": test,
            "cv_minus_test": cv - test}


def markdown(res):
    lines = [
        "# Out-of-bag accuracy against test accuracy as trees are added",
        "",
        f"Made by `{res['command']}` ({res['machine']}; seed {res['seed']}, "
        "criterion='gini', max_features='sqrt', n_jobs=1 for both; forests grown by warm "
        "starts). Accuracies in %; OOB − test in points (target: within 1). Votes: "
        "the mean number of trees that vote on a training row's out-of-bag estimate.",
        "",
        "| dataset | train rows | trees | votes | ours OOB | ours test | ours OOB − test "
        "| sklearn OOB | sklearn test | sklearn OOB − test |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res["datasets"].items():
        for o, s in zip(r["ours"], r["sklearn"]):
            lines.append(
                f"| {name} | {r['n_train']} | {o['trees']} | {s['votes']:.1f} "
                f"| {o['oob']:.2f} | {o['test']:.2f} | {o['oob_minus_test']:+.2f} "
                f"| {s['oob']:.2f} | {s['test']:.2f} | {s['oob_minus_test']:+.2f} |")
    lines += ["", "## Cross-validation on the training set (our forest)", "",
              "| dataset | trees | CV accuracy (± SE over folds) | test accuracy | CV − test "
              "| ours OOB (same trees) | ours OOB − test (same trees) |",
              "|---|---|---|---|---|---|---|"]
    for name, r in res["datasets"].items():
        c = r["cv"]
        same = [o for o in r["ours"] if o["trees"] == c["trees"]]
        oob = (f"{same[0]['oob']:.2f} | {same[0]['oob'] - c['test']:+.2f}" if same
               else "– | –")
        lines.append(f"| {name} | {c['trees']} | {c['cv']:.2f} ± {c['cv_se']:.2f} "
                     f"({c['folds']} folds) | {c['test']:.2f} | {c['cv_minus_test']:+.2f} "
                     f"| {oob} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = get_parser().parse_args(argv)
    names = args.datasets or find_datasets(args.root)
    size = {n: (Path(args.root) / n / "train.npz").stat().st_size for n in names}
    names = sorted(names, key=lambda n: (size[n] >= BIG_BYTES, names.index(n)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = COMMAND + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    res = {"command": cmd.strip(), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
           "seed": args.seed, "datasets": {}}
    with Progress(len(names) * 3, desc="oob benchmark", unit="steps") as progress:
        for name in names:
            X, y, Xt, yt, n_all = load(args.root, name, args.max_train)
            row = {"n_train": int(y.size), "n_train_all": n_all}
            for side, make in (("ours", ours), ("sklearn", theirs)):
                row[side] = growth(make, X, y, Xt, yt, args.trees, args.seed)
                progress.update(1, f"{name} {side}: OOB − test "
                                   f"{row[side][-1]['oob_minus_test']:+.2f}")
            row["cv"] = cross_validated(X, y, Xt, yt, args.cv_trees, args.cv_folds, args.seed)
            progress.update(1, f"{name} CV − test {row['cv']['cv_minus_test']:+.2f}")
            res["datasets"][name] = row
            write_json_atomic(out / "oob.json", res)
            write_text_atomic(out / "oob.md", markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
