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

from ._grow import RowDraw, TreeParams, grow_tree
from .co2 import CO2_DEFAULTS
from .families import AxisSplitter, CO2Splitter

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

def greedy_params(params, max_depth, n_samples):
    """The :class:`~facesegment.forest._grow.TreeParams` of a non-greedy forest's greedy trees.

    These grow the initial tree and the subtrees under a refined trunk, on all
    the ``n_samples`` rows given (no bootstrap): an axis splitter, or CO2 with
    ``init_nu``, ``init_eta`` and ``oblique_min_samples`` when the
    :class:`~facesegment.forest.nongreedy.NonGreedySplitter` starts from CO2
    (``init == "co2"``).

    Parameters
    ----------
    params : TreeParams
        The non-greedy forest's parameters; ``params.splitter`` is its
        :class:`~facesegment.forest.nongreedy.NonGreedySplitter`.
    max_depth : int
        Depth of the greedy trees (-1: unlimited).
    n_samples : int
        Number of rows the trees are grown on.

    Returns
    -------
    TreeParams
        The greedy trees' parameters, with ``params``' ``min_samples_split``
        and ``min_samples_leaf``.
    """
    ng = params.splitter
    if ng.init == "co2":
        splitter = CO2Splitter(max_features=ng.max_features,
                               co2={**CO2_DEFAULTS, "nu": ng.init_nu, "eta": ng.init_eta},
                               oblique_min_samples=ng.oblique_min_samples,
                               weight_dtype="float32", init="axis", n_pairs=1,
                               mean=ng.mean, inv_std=ng.inv_std)
    else:
        splitter = AxisSplitter(max_features=ng.max_features)
    return TreeParams(splitter=splitter, draw=RowDraw(n_samples, False), max_depth=max_depth,
                      min_samples_split=params.min_samples_split,
                      min_samples_leaf=params.min_samples_leaf)


def trunk_depth(params):
    """Depth of the non-greedy part, and whether to grow greedy subtrees below it.

    Parameters
    ----------
    params : TreeParams
        The non-greedy forest's parameters (``max_depth``, -1: unlimited, and
        ``splitter.refine_depth``, None: the whole tree).

    Returns
    -------
    depth : int
        ``refine_depth`` when it is shallower than ``max_depth``, else
        ``max_depth``.
    grow_below : bool
        True when ``refine_depth`` is the shallower.
    """
    md, rd = params.max_depth, params.splitter.refine_depth
    if rd is None or (md >= 0 and rd >= md):
        return md, False
    return rd, True


def graft_below(tree, Xs, ys, reached, n_classes, params, rng):
    """``tree`` with a greedy subtree grown under each refined leaf: the builder
    (:func:`~facesegment.forest._grow.grow_tree`) started at the leaf, on the
    samples the refined trunk sends there (``reached``: leaf number of each row),
    down to ``max_depth`` levels in all, then grafted (:func:`graft`).

    Parameters
    ----------
    tree : dict
        The refined trunk's local arrays.
    Xs, ys : ndarray
        The tree's rows and classes; ``reached`` (n,) the leaf number of each.
    n_classes : int
    params : TreeParams
        The non-greedy forest's (``max_depth``, ``splitter.refine_depth``).
    rng : numpy Generator
        Draws one seed per leaf.

    Returns
    -------
    (dict, float)
        The grafted tree and the seconds it took.
    """
    t0 = time.perf_counter()
    md, rd = params.max_depth, params.splitter.refine_depth
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
                        n_classes, greedy_params(params, md - rd if md >= 0 else -1,
                                                 rows.shape[0]), int(seeds[k]))
        sub.pop("stats")
        subtrees[int(node)] = sub
    return graft(tree, subtrees), time.perf_counter() - t0
