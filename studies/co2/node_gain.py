"""Node-level CO2 study: grow axis-aligned nodes breadth first, run CO2 settings on each node.

Usage (from the repository root)::

    nice .venv/bin/python studies/co2/node_gain.py WINDOWS.npz N_NODES MIN_NODE SETTINGS_JSON

e.g. ``studies/co2/node_gain.py win48k.npz 40 200 '[{}, {"n_passes":1}, {"tau":3}]'``.
WINDOWS.npz comes from ``sample_windows.py`` (a bare file name is read from
``data/bench/``); SETTINGS_JSON is a list of keyword dicts for ``co2_split``.
Prints, per setting, the fraction of nodes where CO2 beats the univariate
initialisation, the mean gain and the relative gain. Used by docs/studies/co2.md.
"""
import sys, json, time

import numpy as np

from _paths import bench_path
from facesegment.forest.co2 import co2_split, new_co2_stats

d = np.load(bench_path(sys.argv[1])); X, y, mean, std = d["X"], d["y"], d["mean"], d["std"]
n_nodes, min_node = int(sys.argv[2]), int(sys.argv[3])
settings = json.loads(sys.argv[4])
K = 8; p = X.shape[1]; q = int(p ** 0.7)
inv_std = (1 / np.maximum(std, 1e-3)).astype(np.float32)
rng = np.random.default_rng(0)
def gain_vec(cnt):  # cnt (256, K) class hist of a feature -> best threshold gain
    left = np.cumsum(cnt, 0)[:-1]; tot = cnt.sum(0); right = tot - left
    nl = left.sum(1); nr = right.sum(1); n = tot.sum()
    def H(c, nn):
        with np.errstate(divide="ignore", invalid="ignore"):
            pr = c / nn[:, None]; return -np.nansum(np.where(pr > 0, pr * np.log(pr), 0), 1)
    hp = -np.sum((tot / n)[tot > 0] * np.log((tot / n)[tot > 0]))
    g = hp - nl / n * H(left, np.maximum(nl, 1)) - nr / n * H(right, np.maximum(nr, 1))
    g[(nl == 0) | (nr == 0)] = -1
    t = int(np.argmax(g)); return t, g[t]
def best_axis(idx):
    feats = rng.choice(p, q, replace=False); best = (-1, 0, -1.0)
    yv = y[idx]
    for f in feats:
        cnt = np.bincount(X[idx, f].astype(np.int64) * K + yv, minlength=256 * K).reshape(256, K)
        t, g = gain_vec(cnt)
        if g > best[2]: best = (int(f), float(t), float(g))
    return best
queue = [np.arange(len(y), dtype=np.int64)]
rows = []
stats = [new_co2_stats() for _ in settings]
t0 = time.time()
while queue and len(rows) < n_nodes:
    idx = queue.pop(0)
    if len(idx) < min_node or len(np.unique(y[idx])) < 2: continue
    f, t, g0 = best_axis(idx)
    row = [len(idx), g0]
    for s, (kw, st) in enumerate(zip(settings, stats)):
        r = co2_split(X, y, idx, K, mean, inv_std, f, t, g0, seed=len(rows) * 7 + 1, stats=st, **kw)
        row.append(g0 if r is None else r[2])
    rows.append(row)
    left = idx[X[idx, f] <= t]; right = idx[X[idx, f] > t]
    queue += [left, right]
rows = np.array(rows)
print(f"{len(rows)} nodes, sizes {int(rows[:,0].min())}..{int(rows[:,0].max())}, init gain mean {rows[:,1].mean():.4f}, {time.time()-t0:.0f}s")
for s, (kw, st) in enumerate(zip(settings, stats)):
    g = rows[:, 2 + s]; acc = np.mean(g > rows[:, 1])
    rel = np.mean(g / rows[:, 1] - 1)
    gf = st["sgd_flops"] / max(st["sgd_seconds"], 1e-9) / 1e9
    print(f"{json.dumps(kw):60s} beats init {acc*100:5.1f}%  mean gain {g.mean():.4f}  rel +{rel*100:5.1f}%  sgd {st['sgd_seconds']:.1f}s ({gf:.1f} GFLOP/s) eval {st['eval_seconds']:.1f}s")
