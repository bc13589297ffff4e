"""Compare forests (AxisAlignedForest and CO2Forest settings) on held-out windows.

Usage (from the repository root)::

    nice .venv/bin/python studies/co2/forest_compare.py TRAIN.npz TEST.npz N_TREES DEPTH CONFIGS_JSON

e.g. ``studies/co2/forest_compare.py win48k.npz test16k.npz 4 16 '[{"kind":"axis"}, {"tau":30}]'``.
TRAIN/TEST.npz come from ``sample_windows.py`` (bare file names are read from
``data/bench/``). CONFIGS_JSON is a list of dicts: ``{"kind":"axis"}`` for an
AxisAlignedForest, anything else is passed to ``CO2Forest``. Prints window
accuracy, class-average window Jaccard and the CO2 splits kept. Used by docs/studies/co2.md.
"""
import sys, time, json

import numpy as np

from _paths import bench_path
from facesegment.forest import CO2Forest, AxisAlignedForest

d = np.load(bench_path(sys.argv[1])); X, y = d["X"], d["y"]
t = np.load(bench_path(sys.argv[2])); Xt, yt = t["X"], t["y"]
n_trees, depth = int(sys.argv[3]), int(sys.argv[4])
configs = json.loads(sys.argv[5])
def jaccard(pred, yt):
    return np.mean([100 * np.sum((pred == k) & (yt == k)) / np.sum((pred == k) | (yt == k)) for k in range(8)])
for cfg in configs:
    kind = cfg.pop("kind", "co2")
    t0 = time.time()
    common = dict(n_estimators=n_trees, max_depth=depth, max_features=264, n_jobs=1, random_state=0)
    if kind == "axis":
        est = AxisAlignedForest(**common).fit(X, y)
    else:
        est = CO2Forest(**common, **cfg).fit(X, y, feature_mean=d["mean"], feature_std=d["std"])
    pred = est.predict(Xt)
    extra = ""
    if kind != "axis":
        acc = sum(s["co2"]["accepted"] for s in est.tree_stats_); calls = sum(s["co2"]["calls"] for s in est.tree_stats_)
        extra = f" accepted {acc}/{calls}"
    print(f"{kind} {json.dumps(cfg):40s} window acc {np.mean(pred == yt)*100:.1f}%  window Jaccard {jaccard(pred, yt):.1f}  {time.time()-t0:.0f}s{extra}", flush=True)
