"""Non-greedy trees (:mod:`facesegment.forest.nongreedy`): the tree's kernel
tables, its initial parameters from a greedy tree, and the SGD training loop
over :mod:`facesegment.forest._nongreedy_kernels`."""

import math
import time

import numpy as np

from ._nongreedy_kernels import leaf_counts, sgd_pass, surrogate_values
from .co2 import initial_weights

#: Laplace smoothing of leaf frequencies (initial Theta, refits, node values).
LEAF_ALPHA = 1.0

# ------------------------------------------------------------- tree tables

def tree_tables(left, right):
    """Kernel tables of a tree given by its children (breadth first, root 0).

    Parameters
    ----------
    left, right : array-like of int, shape (n_nodes,)
        The children, -1 at leaves; parents come before their children.

    Returns
    -------
    dict
        ``left``, ``right``, ``row``, ``leaf``, ``path_node``, ``path_dir`` and
        ``path_len`` (see :mod:`facesegment.forest._nongreedy_kernels`).
    """
    left = np.ascontiguousarray(left, np.int32)
    right = np.ascontiguousarray(right, np.int32)
    n = left.shape[0]
    internal = left >= 0
    row = np.full(n, -1, np.int32)
    row[internal] = np.arange(int(internal.sum()), dtype=np.int32)
    leaf = np.full(n, -1, np.int32)
    leaf[~internal] = np.arange(int((~internal).sum()), dtype=np.int32)
    paths = [None] * n
    paths[0] = []
    for node in range(n):  # parents come first
        if internal[node]:
            paths[left[node]] = paths[node] + [(node, -1)]
            paths[right[node]] = paths[node] + [(node, 1)]
    leaves = np.flatnonzero(~internal)
    D = max(1, max(len(paths[i]) for i in leaves))
    path_node = np.zeros((leaves.shape[0], D), np.int32)
    path_dir = np.zeros((leaves.shape[0], D), np.int8)
    path_len = np.zeros(leaves.shape[0], np.int32)
    for k, node in enumerate(leaves):
        path = paths[node]
        path_len[k] = len(path)
        for j, (a, s) in enumerate(path):
            path_node[k, j] = a
            path_dir[k, j] = s
    return dict(left=left, right=right, row=row, leaf=leaf, path_node=path_node,
                path_dir=path_dir, path_len=path_len)


def _tables_args(tb):
    return (tb["left"], tb["right"], tb["row"], tb["leaf"], tb["path_node"], tb["path_dir"],
            tb["path_len"])


def smoothed_log_frequencies(counts, alpha=LEAF_ALPHA):
    """``log((counts + alpha) / (n + C alpha))`` per row, float32.

    Parameters
    ----------
    counts : array-like of shape (n_leaves, C)
        Class counts per leaf.
    alpha : float, default=LEAF_ALPHA
        Laplace smoothing.

    Returns
    -------
    float32 ndarray of shape (n_leaves, C)
        The smoothed log-frequencies.
    """
    c = np.asarray(counts, np.float64) + alpha
    return np.log(c / c.sum(axis=1, keepdims=True)).astype(np.float32)


def initial_parameters(tree, mean, inv_std, nu, n_classes):
    """``(W, Theta)`` reproducing a greedy tree (``grow_tree``'s dict).

    Each split becomes a row ``w`` with ``w[:p] @ z - w[p] <= 0`` iff the
    greedy split sends x left, scaled onto the sphere ``||w||^2 = nu``; each
    leaf's ``Theta`` is the smoothed log-frequency of its training samples.

    Parameters
    ----------
    tree : dict
        The greedy tree (``left``, ``feature``, ``feature2``, ``oblique``,
        ``threshold``, ``weights``, ``value``, ``n_samples``).
    mean, inv_std : ndarray of shape (p,)
        The normalisation ``z = (x - mean) * inv_std``.
    nu : float
        Squared norm of the rows.
    n_classes : int
        Number of classes.

    Returns
    -------
    W : float32 ndarray of shape (n_internal, p + 1)
        The split rows, in node order.
    Theta : float32 ndarray of shape (n_leaves, n_classes)
        The leaves' log-probabilities.
    """
    p = mean.shape[0]
    internal = np.flatnonzero(tree["left"] >= 0)
    W = np.zeros((internal.shape[0], p + 1), np.float32)
    std = np.where(inv_std > 0, 1.0 / np.where(inv_std > 0, inv_std, 1.0), 0.0)
    for r, node in enumerate(internal):
        ob, f, f2 = tree["oblique"][node], tree["feature"][node], tree["feature2"][node]
        t = float(tree["threshold"][node])
        if ob >= 0:
            u = tree["weights"][ob].astype(np.float64)
            w = np.concatenate([u * std, [t - float(u @ mean)]])
        else:
            w = initial_weights(mean, inv_std, nu, int(f), t, int(f2))
            w = np.zeros(p + 1) if w is None else w.astype(np.float64)
        norm = float(np.sqrt(w @ w))
        W[r] = w * (math.sqrt(nu) / norm) if norm > 0 else w
    leaves = np.flatnonzero(tree["left"] < 0)
    counts = tree["value"][leaves].astype(np.float64) * tree["n_samples"][leaves, None]
    return W, smoothed_log_frequencies(counts.reshape(-1, n_classes))


# ---------------------------------------------------------------- training

def evaluate(Z, y, assign, W, Theta, tb):
    """``(surrogate, loss, reached)`` per sample (see ``surrogate_values``).

    Parameters
    ----------
    Z : float32 ndarray of shape (n, p)
        Normalised samples.
    y : int ndarray of shape (n,)
        Their classes.
    assign : int32 ndarray of shape (n,)
        Each sample's fixed leaf or -1.
    W : float32 ndarray of shape (n_internal, p + 1)
        The split rows.
    Theta : float32 ndarray of shape (n_leaves, C)
        The leaves' log-probabilities.
    tb : dict
        The tree's tables (:func:`tree_tables`).

    Returns
    -------
    surrogate, loss : float64 ndarray of shape (n,)
        Each sample's surrogate and log loss.
    reached : int32 ndarray of shape (n,)
        The leaf (row of ``Theta``) each sample reaches.
    """
    n = Z.shape[0]
    sur, loss = np.empty(n), np.empty(n)
    reached = np.empty(n, np.int32)
    surrogate_values(Z, y, assign, W, Theta, *_tables_args(tb), sur, loss, reached)
    return sur, loss, reached


def _refit(y, reached, n_leaves, n_classes):
    counts = np.zeros((n_leaves, n_classes), np.int64)
    leaf_counts(y, reached, counts)
    return counts


def train_tree(Z, y, n_classes, tb, W, Theta, opt, rng):
    """Optimise ``W`` and ``Theta`` in place by SGD.

    Each epoch evaluates the full data first when SSGD refreshes (every
    ``ssgd_refresh`` epochs, or every epoch when it is 0): the samples' leaves
    become their fixed leaves (``ssgd_refresh > 0``) and with ``leaf_refit``
    ``Theta`` is refitted to the leaves' smoothed frequencies; then one
    :func:`sgd_pass` over a permutation from ``rng``.

    Parameters
    ----------
    Z : float32 ndarray of shape (n, p)
        Normalised samples.
    y : int ndarray of shape (n,)
        Their classes.
    n_classes : int
        Number of classes.
    tb : dict
        The tree's tables (:func:`tree_tables`).
    W : float32 ndarray of shape (n_internal, p + 1)
        The split rows; optimised in place.
    Theta : float32 ndarray of shape (n_leaves, n_classes)
        The leaves' log-probabilities; optimised in place.
    opt : dict
        ``nu``, ``eta``, ``momentum``, ``batch_size``, ``n_epochs``,
        ``ssgd_refresh`` and ``leaf_refit``.
    rng : numpy.random.Generator
        Draws each epoch's order.

    Returns
    -------
    epochs : list of dict
        Per-epoch stats: the full-data surrogate, loss and number of active
        leaves when evaluated, the SGD and evaluation seconds and counters, and
        a last entry after training.
    reached : int32 ndarray of shape (n,)
        The leaf each sample reaches with the final parameters.
    """
    n = Z.shape[0]
    n_leaves = Theta.shape[0]
    V = np.zeros_like(W)
    VT = np.zeros_like(Theta)
    G = np.zeros_like(W)
    GT = np.zeros_like(Theta)
    flag = np.zeros(W.shape[0], np.bool_)
    last = np.full(W.shape[0], -1, np.int64)
    assign = np.full(n, -1, np.int32)
    no_assign = assign
    counters = np.zeros(4, np.int64)
    t = 0
    epochs = []
    for e in range(opt["n_epochs"]):
        t0 = time.perf_counter()
        refresh = opt["ssgd_refresh"] == 0 or e % opt["ssgd_refresh"] == 0
        if refresh:
            sur, loss, reached = evaluate(Z, y, no_assign, W, Theta, tb)
            epochs.append({"epoch": e, "surrogate": float(sur.mean()),
                           "loss": float(loss.mean()),
                           "active_leaves": int(np.unique(reached).shape[0])})
            if opt["ssgd_refresh"] > 0:
                assign = reached
            if opt["leaf_refit"]:
                Theta[:] = smoothed_log_frequencies(_refit(y, reached, n_leaves, n_classes))
                VT[:] = 0.0
        t1 = time.perf_counter()
        order = rng.permutation(n).astype(np.int64)
        c0 = counters.copy()
        t, _ = sgd_pass(Z, y, order, assign, W, V, last, Theta, VT, *_tables_args(tb),
                        np.float32(opt["eta"]), float(opt["momentum"]), float(opt["nu"]),
                        int(opt["batch_size"]), t, G, GT, flag, counters)
        t2 = time.perf_counter()
        dc = counters - c0
        epochs.append({"epoch": e, "sgd_seconds": t2 - t1, "eval_seconds": t1 - t0,
                       "path_dots": int(dc[0]), "descents": int(dc[1]),
                       "samples": int(dc[2]), "steps": int(dc[3])})
    sur, loss, reached = evaluate(Z, y, no_assign, W, Theta, tb)
    if opt["leaf_refit"] and opt["n_epochs"] > 0:
        Theta[:] = smoothed_log_frequencies(_refit(y, reached, n_leaves, n_classes))
        sur, loss, reached = evaluate(Z, y, no_assign, W, Theta, tb)
    epochs.append({"epoch": opt["n_epochs"], "surrogate": float(sur.mean()),
                   "loss": float(loss.mean()),
                   "active_leaves": int(np.unique(reached).shape[0])})
    return epochs, reached


__all__ = ["tree_tables", "smoothed_log_frequencies", "initial_parameters",
           "evaluate", "train_tree", "LEAF_ALPHA"]
