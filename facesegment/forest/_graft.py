"""Grafting greedy subtrees under the leaves of a tree (local tree dicts).

A tree dict is what :func:`facesegment.forest._grow.grow_tree` returns (and
:func:`facesegment.forest.nongreedy.to_forest_tree`): per-node arrays with
local node indices (root 0) plus the dense oblique rows ``weights``.
:func:`graft` replaces leaves of a *trunk* by whole subtrees: the subtree's
root takes the leaf's index, its other nodes are appended after the trunk's
(children keep larger indices than their parents), its oblique rows after the
trunk's, and its depths are shifted by the leaf's depth.  Used by
``NonGreedyForest(refine_depth=k)``: the top k levels optimised non-greedily,
the levels below grown greedily on the samples each refined leaf receives.
"""

import time

import numpy as np

from ._grow import grow_tree
from .co2 import CO2_DEFAULTS

#: Per-node arrays of a tree dict (``weights`` is per oblique row).
NODE_KEYS = ("left", "right", "feature", "feature2", "oblique", "threshold", "value",
             "depth", "n_samples")


def graft(trunk, subtrees):
    """The tree ``trunk`` with ``subtrees[leaf]`` grown under each given leaf.

    Parameters
    ----------
    trunk : dict of local arrays (``NODE_KEYS`` and ``weights``)
    subtrees : dict ``{leaf node of trunk: tree dict}``; a subtree's root
        replaces the leaf (its split, class values and sample count), so a
        one-node subtree only refreshes the leaf's class values.  Subtrees must
        be dense (no sparse rows) and have the trunk's number of features.

    Returns
    -------
    dict of local arrays (``NODE_KEYS`` and ``weights``, float32).
    """
    parts = {k: [np.asarray(trunk[k])] for k in NODE_KEYS}
    weights = [np.asarray(trunk["weights"], np.float32)]
    n_nodes = trunk["left"].shape[0]
    n_rows = weights[0].shape[0]
    root_rows = {}
    for leaf in sorted(subtrees):
        sub = subtrees[leaf]
        if trunk["left"][leaf] >= 0:
            raise ValueError(f"node {leaf} of the trunk is not a leaf")
        m = sub["left"].shape[0]
        # subtree node j > 0 -> n_nodes + j - 1; its root -> the trunk's leaf
        index = np.concatenate([[leaf], n_nodes + np.arange(m - 1)]).astype(np.int32)
        children = {k: np.where(sub[k] >= 0, index[np.maximum(sub[k], 0)], -1).astype(np.int32)
                    for k in ("left", "right")}
        oblique = np.where(sub["oblique"] >= 0, sub["oblique"] + n_rows, -1).astype(np.int32)
        depth = (sub["depth"] + trunk["depth"][leaf]).astype(np.int32)
        fields = {**{k: sub[k] for k in NODE_KEYS}, **children, "oblique": oblique,
                  "depth": depth}
        root_rows[leaf] = {k: fields[k][0] for k in NODE_KEYS}
        for k in NODE_KEYS:
            parts[k].append(np.asarray(fields[k][1:]))
        weights.append(np.asarray(sub["weights"], np.float32))
        n_nodes += m - 1
        n_rows += sub["weights"].shape[0]
    out = {k: np.concatenate(parts[k]).astype(parts[k][0].dtype) for k in NODE_KEYS}
    for leaf, row in root_rows.items():
        for k in NODE_KEYS:
            out[k][leaf] = row[k]
    out["weights"] = np.concatenate(weights, axis=0)
    return out


# --------------------------------------- refined trunk + greedy subtrees

def greedy_spec(spec, max_depth, n_samples):
    """``grow_tree``'s spec of the greedy trees: the initial tree and the subtrees
    grown under a refined trunk (all the rows given, CO2 with ``init_nu``,
    ``init_eta`` and ``oblique_min_samples``)."""
    return {"split_family": spec["init_family"], "max_depth": max_depth,
            "min_samples_split": spec["min_samples_split"],
            "min_samples_leaf": spec["min_samples_leaf"], "n_samples": n_samples,
            "bootstrap": False, "pool": None, "cdf": None,
            "max_features": spec["max_features"],
            "co2": {**CO2_DEFAULTS, "nu": spec["init_nu"], "eta": spec["init_eta"]},
            "oblique_min_samples": spec["oblique_min_samples"],
            "weight_dtype": "float32", "mean": spec["mean"], "inv_std": spec["inv_std"],
            "co2_init": "axis", "n_pairs": 1}


def trunk_depth(spec):
    """Depth of the non-greedy part: ``refine_depth`` when it is shallower than
    ``max_depth`` (-1: unlimited), else ``max_depth``; and whether to grow below."""
    md, rd = spec["max_depth"], spec.get("refine_depth")
    if rd is None or (md >= 0 and rd >= md):
        return md, False
    return rd, True


def grow_below(tree, Xs, ys, reached, n_classes, spec, rng):
    """``tree`` with a greedy subtree grown under each refined leaf, on the samples
    the refined trunk sends there (``reached``: leaf number of each row), down
    to ``max_depth`` levels in all.  Returns ``(tree, seconds)``."""
    t0 = time.perf_counter()
    md, rd = spec["max_depth"], spec["refine_depth"]
    leaves = np.flatnonzero(tree["left"] < 0)
    seeds = rng.integers(0, 2**31 - 1, size=leaves.shape[0])
    order = np.argsort(reached, kind="stable")
    bounds = np.searchsorted(reached[order], np.arange(leaves.shape[0] + 1))
    subtrees = {}
    for k, node in enumerate(leaves):
        rows = order[bounds[k]:bounds[k + 1]]
        if rows.shape[0] == 0:
            continue
        sub = grow_tree(np.ascontiguousarray(Xs[rows]), np.ascontiguousarray(ys[rows]),
                        n_classes, greedy_spec(spec, md - rd if md >= 0 else -1,
                                                rows.shape[0]), int(seeds[k]))
        sub.pop("stats")
        subtrees[int(node)] = sub
    return graft(tree, subtrees), time.perf_counter() - t0
