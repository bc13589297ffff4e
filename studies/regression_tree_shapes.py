"""Single extra-trees regression trees beside scikit-learn's, on one split of
diabetes and of the face task of ``benchmarks.lectures_regression``: nodes and
depth per tree, one tree's test R², and how many of scikit-learn's internal
nodes have a variance below 1e-9 (pure nodes it splits because its variance
``E[y²] − E[y]²`` of equal targets rounds to a few 1e-15, not 0).

    nice -n 10 python -m studies.regression_tree_shapes [--split 0]
"""

import argparse

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.ensemble import ExtraTreesRegressor
from sklearn.metrics import r2_score

from benchmarks.lectures_regression import face_offsets, split
from facesegment.forest import ExtraTreesForestRegressor


def mean_se(v):
    v = np.asarray(v, np.float64)
    return f"{v.mean():.2f} ± {v.std(ddof=1) / np.sqrt(v.size):.2f}"


def shapes(name, X, y, extra, params, seed):
    Xtr, Xte, ytr, yte = split(X, y, extra, seed)
    ours = ExtraTreesForestRegressor(random_state=seed, n_jobs=1, **params).fit(Xtr, ytr)
    theirs = ExtraTreesRegressor(random_state=seed, n_jobs=1, **params).fit(Xtr, ytr)
    fa = ours.forest_
    ends = np.append(fa.roots[1:], fa.n_nodes)
    leaves = ours.apply(Xte)
    rows = {
        "nodes": (ends - fa.roots, [e.tree_.node_count for e in theirs.estimators_]),
        "depth": ([fa.depth[a:b].max() for a, b in zip(fa.roots, ends)],
                  [e.tree_.max_depth for e in theirs.estimators_]),
        "one tree's test R²": ([r2_score(yte, fa.value[leaves[:, t], 0])
                                for t in range(leaves.shape[1])],
                               [r2_score(yte, e.predict(Xte)) for e in theirs.estimators_]),
    }
    print(f"{name} (split {seed}, {params}): ours | scikit-learn, mean ± SE over the trees")
    for what, (a, b) in rows.items():
        print(f"  {what}: {mean_se(a)} | {mean_se(b)}")
    pure = [int(np.sum((e.tree_.children_left >= 0) & (e.tree_.impurity < 1e-9)))
            for e in theirs.estimators_]
    print(f"  scikit-learn's split nodes with variance < 1e-9 per tree: {mean_se(pure)}")
    print(f"  forest test R²: {r2_score(yte, ours.predict(Xte)):.4f} | "
          f"{r2_score(yte, theirs.predict(Xte)):.4f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", type=int, default=0)
    args = ap.parse_args(argv)
    X, y = load_diabetes(return_X_y=True)
    shapes("diabetes", X, y, {}, {"n_estimators": 100}, args.split)
    X, y, group = face_offsets()
    shapes("faces300w nose-tip offset", X, y, {"group": group},
           {"n_estimators": 50, "max_features": 0.2}, args.split)


if __name__ == "__main__":
    main()
