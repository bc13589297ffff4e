"""Time one CO2Forest tree (one thread) and report its CO2 statistics and weight size.

Usage (from the repository root)::

    nice .venv/bin/python studies/co2/one_tree.py WINDOWS.npz DEPTH [CO2FOREST_KWARGS_JSON]

e.g. ``studies/co2/one_tree.py win256k.npz 16``. WINDOWS.npz comes from
``sample_windows.py`` (a bare file name is read from ``data/bench/``); the
optional JSON dict is passed to ``CO2Forest``. Prints fit wall/CPU time, the
split of time between univariate initialisation and CO2, the SGD GFLOP per
CPU-second and the oblique weights in MB. Used by docs/studies/co2.md.
"""
import sys, time, json

import numpy as np

from _paths import bench_path
from facesegment.forest import CO2Forest

d = np.load(bench_path(sys.argv[1])); X, y = d["X"], d["y"]
depth = int(sys.argv[2]); kw = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
t0 = time.time(); c0 = time.process_time()
est = CO2Forest(n_estimators=1, max_depth=depth, max_features=264, n_jobs=1, random_state=0, **kw)
est.fit(X, y, feature_mean=d["mean"], feature_std=d["std"])
st = est.tree_stats_[0]; c = st["co2"]
print(f"fit {time.time()-t0:.1f}s (cpu {time.process_time()-c0:.1f}s) tree {st['seconds']:.1f}s nodes {st['n_nodes']} depth {st['max_depth']} "
      f"axis-init {st['t_init']:.1f}s oblique {st['t_oblique']:.1f}s co2 calls {st['n_co2_calls']} oblique kept {st['n_oblique']}")
print(f"co2: sgd {c['sgd_seconds']:.1f}s (cpu {c['sgd_cpu_seconds']:.1f}s) {c['sgd_flops']/1e9:.1f} GFLOP = {c['sgd_flops']/c['sgd_cpu_seconds']/1e9:.1f} GFLOP/s per cpu-second, "
      f"eval {c['eval_seconds']:.1f}s (cpu {c['eval_cpu_seconds']:.1f}s) {c['eval_flops']/1e9:.1f} GFLOP, steps {c['sgd_steps']}, accepted {c['accepted']}/{c['calls']}")
print("weights MB", est.forest_.weights.nbytes / 1e6)
