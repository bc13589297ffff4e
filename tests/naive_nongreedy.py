"""Brute-force NumPy references of the non-greedy tree kernels
(:mod:`facesegment.forest._nongreedy_kernels`): enumerate every bit vector of
a tiny tree, no pruning, no laziness, float64."""

import itertools

import numpy as np


def random_tree(rng, max_depth, p_split=0.8):
    """Children arrays of a random binary tree, breadth first (right = left + 1),
    root always split when ``max_depth > 0``."""
    left, right, depth = [-1], [-1], [0]
    queue = [0]
    while queue:
        node = queue.pop(0)
        if depth[node] < max_depth and (node == 0 or rng.random() < p_split):
            left[node], right[node] = len(left), len(left) + 1
            for _ in range(2):
                left.append(-1)
                right.append(-1)
                depth.append(depth[node] + 1)
            queue += [left[node], right[node]]
    return np.array(left, np.int32), np.array(right, np.int32), np.array(depth, np.int32)


def activations(W, z):
    """``a = W[:, :p] @ z - W[:, p]`` in float64."""
    W = W.astype(np.float64)
    return W[:, :-1] @ z.astype(np.float64) - W[:, -1]


def leaf_of_bits(g, left, right, row, leaf):
    """The leaf (Theta row) the bit vector ``g`` (one bit per W row) leads to."""
    node = 0
    while left[node] >= 0:
        node = right[node] if g[row[node]] > 0 else left[node]
    return leaf[node]


def log_loss(theta, c):
    theta = theta.astype(np.float64)
    m = theta.max()
    return m + np.log(np.exp(theta - m).sum()) - theta[c]


def reference_bits(a, assigned, path_node, path_dir, path_len, row):
    """``h``: ``sgn(a)`` (bit +1 iff a > 0), with the path to ``assigned`` forced (SSGD)."""
    h = np.where(a > 0, 1, -1)
    if assigned >= 0:
        for k in range(path_len[assigned]):
            h[row[path_node[assigned, k]]] = path_dir[assigned, k]
    return h


def brute_surrogate(W, Theta, tb, z, c, assigned=-1, radius=1):
    """``max_g (g - h) . a + l(Theta[f(g)], c)`` over the bit vectors g within
    Hamming distance ``radius`` of h (None: all of them).  Returns (value, argmax g, h)."""
    a = activations(W, z)
    h = reference_bits(a, assigned, tb["path_node"], tb["path_dir"], tb["path_len"], tb["row"])
    m = a.shape[0]
    best, arg = -np.inf, None
    for g in itertools.product((-1, 1), repeat=m):
        g = np.array(g)
        if radius is not None and np.count_nonzero(g != h) > radius:
            continue
        lf = leaf_of_bits(g, tb["left"], tb["right"], tb["row"], tb["leaf"])
        val = float((g - h) @ a) + log_loss(Theta[lf], c)
        if val > best:
            best, arg = val, g
    return best, arg, h


def brute_gradients(W, Theta, tb, Z, y, assign):
    """Mean subgradients (dW, dTheta) of the fast surrogate over the samples."""
    gW = np.zeros(W.shape)
    gT = np.zeros(Theta.shape)
    for i in range(Z.shape[0]):
        _, g, h = brute_surrogate(W, Theta, tb, Z[i], y[i], assign[i])
        zt = np.append(Z[i].astype(np.float64), -1.0)
        gW += np.outer(g - h, zt)
        lf = leaf_of_bits(g, tb["left"], tb["right"], tb["row"], tb["leaf"])
        th = Theta[lf].astype(np.float64)
        sm = np.exp(th - th.max())
        gT[lf] += sm / sm.sum()
        gT[lf, y[i]] -= 1.0
    return gW / Z.shape[0], gT / Z.shape[0]


def dense_sgd(W, Theta, tb, Z, y, assign, order, eta, mu, nu, batch):
    """Mini-batch SGD with dense momentum and a projection of every row after
    every step (the reference of ``sgd_pass``); returns new (W, Theta)."""
    W = W.astype(np.float64).copy()
    Theta = Theta.astype(np.float64).copy()
    V, VT = np.zeros_like(W), np.zeros_like(Theta)
    for start in range(0, order.shape[0], batch):
        rows = order[start:start + batch]
        gW, gT = brute_gradients(W, Theta, tb, Z[rows], y[rows], assign[rows])
        V = mu * V + gW
        W -= eta * V
        norms = (W * W).sum(axis=1)
        scale = np.where(norms > nu, np.sqrt(nu / np.maximum(norms, 1e-300)), 1.0)
        W *= scale[:, None]
        VT = mu * VT + gT
        Theta -= eta * VT
    return W, Theta
