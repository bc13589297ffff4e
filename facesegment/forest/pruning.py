"""Minimal cost-complexity pruning of grown classification trees (CART's weakest link).

For a subtree ``T`` of a grown tree, ``C_alpha(T) = sum over leaves m of
Q_m(T) + alpha |T|`` with ``Q_m = (N_m / N) impurity(m)`` (``N_m`` the
samples reaching leaf m, ``N`` those at the root) and ``|T|`` its number of
leaves.  For every ``alpha`` one smallest subtree ``T(alpha)`` minimises it,
and these subtrees are nested (Breiman et al. 1984): starting from the grown
tree, the branch ``T_t`` whose removal costs least per leaf removed, its
*effective alpha* ``g(t) = (Q(t) - Q(T_t)) / (|T_t| - 1)``, is cut (the node
becomes a leaf); every branch tied at the smallest ``g`` is cut in the same
step (ties within :data:`TIE`).  The first step, ``alpha = 0``, removes the
branches that do not lower ``Q`` at all.

:func:`cost_complexity_pruning_path` returns the steps' ``alpha`` values,
the total leaf impurity ``Q(T(alpha))`` and the number of leaves of
``T(alpha)``; :func:`prune` returns ``T(alpha)`` as flat arrays (or an
estimator holding them), with the same node values and depths, so
prediction, model folders and dense inference serve it unchanged.

The counts ``N_m`` and the class distributions come either from data
(``X, y``, e.g. the training rows: every node counts the rows routed
through it) or, without data, from the tree itself (each node's stored
class frequencies times its drawn samples, ``value * n_samples``).
``criterion`` is the impurity: ``"entropy"`` (natural log, what the trees are
grown with) or ``"gini"``.

Example
-------
>>> import numpy as np
>>> from facesegment.forest import AxisAlignedForest
>>> from facesegment.forest.pruning import cost_complexity_pruning_path, prune
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(300, 4)); y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int)
>>> tree = AxisAlignedForest(1, max_features="all", bootstrap=False, random_state=0).fit(X, y)
>>> path = cost_complexity_pruning_path(tree, X, y)
>>> int(path.n_leaves[-1]), bool(np.all(np.diff(path.ccp_alphas) > 0))
(1, True)
>>> small = prune(tree, path.ccp_alphas[-3], X, y)
>>> bool((small.forest_.left < 0).sum() == path.n_leaves[-3])
True
"""

import copy
from typing import NamedTuple

import numpy as np
from .._jit import NJIT, njit

from ._arrays import ForestArrays, complete
from ._concat import concat_trees
from ._predict import apply_kernel, kernel_sparse, kernel_weights
from .base import check_X

#: Branches whose effective alphas are within this of the step's alpha are cut together.
TIE = 1e-12
CRITERIA = ("entropy", "gini")


class PruningPath(NamedTuple):
    """The weakest-link path: one entry per step, ``ccp_alphas`` increasing
    (the first is 0), ``impurities`` the total leaf impurity ``Q(T(alpha))`` and
    ``n_leaves`` the leaves of ``T(alpha)`` (the last entry is the root alone)."""

    ccp_alphas: np.ndarray
    impurities: np.ndarray
    n_leaves: np.ndarray


@njit(**NJIT)
def node_risks(counts, gini):
    """``Q(t) = (N_t / N_root) impurity(t)`` per node from class counts.

    Parameters
    ----------
    counts : float64 (n_nodes, n_classes)
        Class counts per node, node 0 the root.
    gini : bool
        The Gini index (True) or entropy, natural log (False).

    Returns
    -------
    float64 (n_nodes,)
        Each node's weighted impurity; 0 for a node no sample reaches.
    """
    n_nodes, k = counts.shape
    total = 0.0
    for c in range(k):
        total += counts[0, c]
    out = np.zeros(n_nodes, np.float64)
    for t in range(n_nodes):
        n_t = 0.0
        for c in range(k):
            n_t += counts[t, c]
        if n_t <= 0.0:
            continue
        h = 1.0 if gini else 0.0
        for c in range(k):
            pc = counts[t, c] / n_t
            if gini:
                h -= pc * pc
            elif pc > 0.0:
                h -= pc * np.log(pc)
        out[t] = n_t / total * h
    return out


@njit(**NJIT)
def _branches(left, right, risk, leaf, alive, r_branch, n_leaves):
    """Bottom-up ``Q(T_t)`` and ``|T_t|`` of the current tree (children after parents).

    Parameters
    ----------
    left, right : int32 (n_nodes,)
        The tree's children (local indices).
    risk : float64 (n_nodes,)
        Each node's ``Q(t)`` (:func:`node_risks`).
    leaf : bool (n_nodes,)
        Whether each node is a leaf of the current (pruned) tree.
    alive : bool (n_nodes,)
        Whether each node belongs to the current tree.
    r_branch : float64 (n_nodes,)
        Written for the current tree's nodes: ``Q`` of the branch rooted there.
    n_leaves : int64 (n_nodes,)
        Written for the current tree's nodes: the branch's leaves.
    """
    for t in range(left.shape[0] - 1, -1, -1):
        if not alive[t]:
            continue
        if leaf[t]:
            r_branch[t] = risk[t]
            n_leaves[t] = 1
        else:
            r_branch[t] = r_branch[left[t]] + r_branch[right[t]]
            n_leaves[t] = n_leaves[left[t]] + n_leaves[right[t]]


@njit(**NJIT)
def _reach(left, right, leaf, alive):
    """Nodes of the current tree: the root and the children of its internal nodes."""
    alive[:] = False
    alive[0] = True
    for t in range(left.shape[0]):
        if alive[t] and not leaf[t]:
            alive[left[t]] = True
            alive[right[t]] = True


@njit(**NJIT)
def weakest_link_path(left, right, risk, tie):
    """The weakest-link path of one tree (local node indices, children after parents).

    Each step cuts every branch whose ``g(t) = (Q(t) - Q(T_t)) / (|T_t| - 1)``
    is within ``tie`` of the step's alpha.

    Parameters
    ----------
    left, right : int32 (n_nodes,)
        The tree's children, local indices, -1 at leaves.
    risk : float64 (n_nodes,)
        Each node's ``Q(t)`` (:func:`node_risks`).
    tie : float
        Branches whose ``g`` is at most ``alpha + tie`` are cut at ``alpha``.

    Returns
    -------
    alphas : float64 (n_steps,)
        The steps' alphas, increasing from 0.
    impurities : float64 (n_steps,)
        The total leaf impurity ``Q(T(alpha))`` of each step.
    n_leaves : int64 (n_steps,)
        The leaves of ``T(alpha)`` (1 at the last step).
    pruned_at : float64 (n_nodes,)
        For every node the alpha of the step that made it a leaf (inf for the
        grown tree's leaves and for nodes never cut because an ancestor was).
    """
    n = left.shape[0]
    leaf = left < 0
    alive = np.zeros(n, np.bool_)
    _reach(left, right, leaf, alive)
    r_branch = np.zeros(n, np.float64)
    n_leaves = np.zeros(n, np.int64)
    pruned_at = np.full(n, np.inf)
    alphas = []
    impurities = []
    leaves = []
    alpha = 0.0
    while True:
        g_min = np.inf
        cut = True
        while cut:  # cut every branch tied at alpha, until none is left
            _branches(left, right, risk, leaf, alive, r_branch, n_leaves)
            cut = False
            g_min = np.inf
            for t in range(n):
                if alive[t] and not leaf[t]:
                    g = (risk[t] - r_branch[t]) / (n_leaves[t] - 1)
                    if g <= alpha + tie:
                        leaf[t] = True
                        pruned_at[t] = alpha
                        cut = True
                    elif g < g_min:
                        g_min = g
            if cut:
                _reach(left, right, leaf, alive)
        alphas.append(alpha)
        impurities.append(r_branch[0])
        leaves.append(n_leaves[0])
        if leaf[0]:
            break
        alpha = g_min
    return (np.array(alphas), np.array(impurities), np.array(leaves, dtype=np.int64),
            pruned_at)


# ------------------------------------------------------------------ wrappers
def _span(fa, tree):
    """``(first, end)`` node indices of tree ``tree`` (trees are stored one after another)."""
    if not isinstance(tree, (int, np.integer)) or isinstance(tree, bool) \
            or not 0 <= tree < fa.n_trees:
        raise ValueError(f"tree={tree!r} must be an integer in 0..{fa.n_trees - 1} (the "
                         f"forest has {fa.n_trees} trees)")
    first = int(fa.roots[tree])
    end = int(fa.roots[tree + 1]) if tree + 1 < fa.n_trees else fa.n_nodes
    return first, end


def _resolve(forest, X, y):
    """``(ForestArrays, X or None, y as class indices or None)``."""
    if isinstance(forest, ForestArrays):
        fa, classes = forest, None
    elif hasattr(forest, "forest_") and hasattr(forest, "classes_"):
        fa, classes = forest.forest_, np.asarray(forest.classes_)
    else:
        raise TypeError("cost-complexity pruning needs a fitted classification forest of "
                        "facesegment.forest or its ForestArrays, got "
                        f"{type(forest).__name__}")
    if (X is None) != (y is None):
        raise ValueError("give both X and y (the rows whose counts define the impurities), "
                         "or neither (the tree's own stored counts)")
    if X is None:
        return fa, None, None
    X = check_X(X)
    if X.shape[1] != fa.n_features:
        raise ValueError(f"X has {X.shape[1]} features but the forest was grown on "
                         f"{fa.n_features}")
    y = np.asarray(y).ravel()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} labels for the {X.shape[0]} rows of X")
    if classes is not None:
        pos = np.clip(np.searchsorted(classes, y), 0, len(classes) - 1)
        bad = classes[pos] != y
        if bad.any():
            raise ValueError(f"y holds labels the forest does not know (e.g. "
                             f"{y[bad][0]!r}); its classes are {classes.tolist()}")
        y = pos
    elif (y.dtype.kind not in "iu" or (y.size and (y.min() < 0
                                                   or y.max() >= fa.n_classes))):
        raise ValueError(f"y must hold class indices 0..{fa.n_classes - 1} when pruning "
                         "ForestArrays (pass the estimator to use its labels)")
    return fa, X, y.astype(np.int64)


def tree_class_counts(fa, tree, X=None, y=None):
    """Class counts per node of tree ``tree``.

    Parameters
    ----------
    fa : ForestArrays
        The forest.
    tree : int
        The tree, ``0 <= tree < fa.n_trees``.
    X : ndarray of shape (n_samples, n_features) or None, default=None
        Rows routed through the tree (no NaN); None: the stored counts.
    y : int ndarray of shape (n_samples,) or None, default=None
        The rows' class indices (with ``X``).

    Returns
    -------
    float64 ndarray of shape (n_nodes of the tree, n_classes)
        The rows of ``X`` reaching each node per class, or without data the
        stored ``value * n_samples`` (rounded).

    Raises
    ------
    ValueError
        When ``tree`` is not a tree of ``fa``.
    """
    first, end = _span(fa, tree)
    if X is None:
        return np.rint(fa.value[first:end].astype(np.float64)
                       * fa.n_samples[first:end, None])
    full = complete(fa)
    leaf = np.empty((X.shape[0], 1), dtype=np.int32)
    apply_kernel(X, full.roots[tree:tree + 1], full.left, full.right, full.feature,
                 full.feature2, full.oblique, full.threshold, full.depth,
                 kernel_weights(full), full.sparse, *kernel_sparse(full), -1, leaf)
    counts = np.zeros((end - first, fa.n_classes), np.float64)
    np.add.at(counts, (leaf[:, 0] - first, y), 1.0)
    left = fa.left[first:end]
    depth = fa.depth[first:end]
    for d in range(int(depth.max()) - 1, -1, -1):  # children's counts add up to their parent
        inner = np.flatnonzero((depth == d) & (left >= 0))
        kids = left[inner] - first
        counts[inner] = counts[kids] + counts[kids + 1]
    return counts


def _local_path(fa, tree, X, y, criterion):
    if criterion not in CRITERIA:
        raise ValueError(f"criterion={criterion!r} must be one of {', '.join(CRITERIA)}")
    first, end = _span(fa, tree)
    left = fa.left[first:end].astype(np.int64)
    local_left = np.where(left >= 0, left - first, -1)
    local_right = np.where(left >= 0, fa.right[first:end] - first, -1)
    risk = node_risks(tree_class_counts(fa, tree, X, y), criterion == "gini")
    return weakest_link_path(local_left, local_right, risk, TIE)


def cost_complexity_pruning_path(forest, X=None, y=None, *, tree=0, criterion="entropy"):
    """The weakest-link path of one tree (see the module docstring).

    Parameters
    ----------
    forest : fitted classification forest of :mod:`facesegment.forest`, or its ForestArrays
    X, y : optional
        Rows and labels defining the impurities (with ForestArrays, ``y`` holds
        class indices); both None: the tree's stored counts.
    tree : int
        Which tree of the forest (default the first).
    criterion : "entropy" or "gini"

    Returns
    -------
    PruningPath (ccp_alphas, impurities, n_leaves)
    """
    fa, X, y = _resolve(forest, X, y)
    alphas, impurities, leaves, _ = _local_path(fa, tree, X, y, criterion)
    return PruningPath(alphas, impurities, leaves)


def _pruned_tree(fa, tree, cut):
    """The tree ``tree`` with the nodes ``cut`` (local bool mask) made leaves: a dict of
    local arrays in breadth-first order (children created in pairs, right = left + 1)."""
    first, end = _span(fa, tree)
    old = [first]
    new_left = [-1]
    i = 0
    while i < len(old):
        g = old[i]
        if fa.left[g] >= 0 and not cut[g - first]:
            new_left[i] = len(old)
            old += [int(fa.left[g]), int(fa.right[g])]
            new_left += [-1, -1]
        i += 1
    old = np.asarray(old)
    left = np.asarray(new_left, np.int32)
    inner = left >= 0
    oblique = np.where(inner, fa.oblique[old], -1)
    rows = np.unique(oblique[oblique >= 0])
    remap = np.full(fa.weights.shape[0] + 1, -1, np.int32)
    remap[rows] = np.arange(rows.size, dtype=np.int32)
    return {
        "left": left, "right": np.where(inner, left + 1, -1).astype(np.int32),
        "feature": np.where(inner, fa.feature[old], -1).astype(np.int32),
        "feature2": np.where(inner, fa.feature2[old], -1).astype(np.int32),
        "oblique": remap[oblique].astype(np.int32),
        "threshold": np.where(inner, fa.threshold[old], 0).astype(np.float32),
        "value": fa.value[old], "depth": fa.depth[old], "n_samples": fa.n_samples[old],
        "weights": fa.weights[rows],
    }


def prune(forest, alpha, X=None, y=None, *, tree=None, criterion="entropy"):
    """``T(alpha)`` of every tree (or of the one tree ``tree``): the smallest subtree
    minimising ``C_alpha`` (the steps of the path with ``ccp_alpha <= alpha`` applied).

    Parameters are those of :func:`cost_complexity_pruning_path`; ``alpha``
    is a number >= 0.  Returns ForestArrays for ForestArrays, else a copy of
    the estimator whose ``forest_`` is the pruned forest (with ``tree`` given:
    that tree alone).  Node values, depths and sample counts are kept; a node
    made a leaf predicts its stored class distribution.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer,
                                                        np.floating)) \
            or not np.isfinite(alpha) or alpha < 0:
        raise ValueError(f"alpha={alpha!r} must be a finite number >= 0")
    fa, X, y = _resolve(forest, X, y)
    if fa.sparse is not None and (fa.sparse >= 0).any():
        raise ValueError("pruning forests with sparse oblique splits is not supported; "
                         "prune a forest grown without max_nonzero")
    trees = range(fa.n_trees) if tree is None else [tree]
    out = []
    for t in trees:
        pruned_at = _local_path(fa, t, X, y, criterion)[3]
        out.append(_pruned_tree(fa, t, pruned_at <= alpha))
    arrays = concat_trees(out, fa.n_features, fa.weights.dtype)
    if isinstance(forest, ForestArrays):
        return arrays
    est = copy.copy(forest)
    est.forest_ = arrays
    return est


__all__ = ["PruningPath", "cost_complexity_pruning_path", "prune", "node_risks",
           "weakest_link_path", "tree_class_counts", "TIE"]
