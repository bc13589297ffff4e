"""Plain NumPy/SciPy references for the density-forest kernels (slow, obviously right).

Mirrors :mod:`facesegment.forest._density_kernels`: the split criterion (the
information gain of Gaussians, every cut tried), the leaf Gaussians and cells
rebuilt from the training rows by walking each tree, their masses inside the
cells (SciPy's normal CDFs), and the forest's log density.
"""

import numpy as np
from scipy import stats


def naive_cov(X, w, reg, diag):
    """Weighted ML covariance of the rows of ``X`` plus ``reg I`` (diagonal: ``diag``)."""
    X = np.asarray(X, np.float64)
    mu = np.average(X, axis=0, weights=w)
    C = ((X - mu) * w[:, None]).T @ (X - mu) / w.sum()
    if diag:
        C = np.diag(np.diag(C))
    return mu, C + reg * np.eye(X.shape[1])


def naive_cost(X, w, reg, diag):
    """``W log|Sigma|`` of the weighted rows."""
    return w.sum() * np.linalg.slogdet(naive_cov(X, w, reg, diag)[1])[1]


def naive_density_split(X, w, rows, min_leaf, reg, diag):
    """Best cut over every feature and every cut between distinct values:
    ``(feature, threshold (float32 midpoint), gain per unit weight)``."""
    X = np.asarray(X)
    Xs, ws = X[rows], w[rows]
    parent = naive_cost(Xs, ws, reg, diag)
    best = (np.inf, -1, 0.0)
    for f in range(X.shape[1]):
        v = np.sort(Xs[:, f])
        for p in range(min_leaf, len(v) - min_leaf + 1):
            if v[p - 1] == v[p]:
                continue
            t = np.float32(0.5 * (np.float64(v[p - 1]) + np.float64(v[p])))
            if t >= v[p] or t < v[p - 1]:
                t = np.float32(v[p - 1])
            go = Xs[:, f] <= t
            cost = (naive_cost(Xs[go], ws[go], reg, diag)
                    + naive_cost(Xs[~go], ws[~go], reg, diag))
            if cost < best[0]:
                best = (cost, f, t)
    return best[1], best[2], (parent - best[0]) / ws.sum()


def naive_cells(arrays, root, d):
    """``{leaf node: (lower, upper)}`` of one tree, by walking it from ``root``."""
    out, stack = {}, [(root, np.full(d, -np.inf), np.full(d, np.inf))]
    while stack:
        node, lo, hi = stack.pop()
        left = arrays.left[node]
        if left < 0:
            out[node] = (lo, hi)
            continue
        f, t = arrays.feature[node], np.float64(arrays.threshold[node])
        hl, lr = hi.copy(), lo.copy()
        hl[f], lr[f] = t, t
        stack += [(left, lo, hl), (arrays.right[node], lr, hi)]
    return out


def naive_leaf_node(arrays, x, root):
    node = root
    while arrays.left[node] >= 0:
        node = (arrays.left[node] if x[arrays.feature[node]] <= arrays.threshold[node]
                else arrays.right[node])
    return node


def naive_box_mass(mu, C, lo, hi):
    """Probability of N(mu, C) in the box ``lo < x <= hi``: SciPy's normal CDFs
    (diagonal C: a product of 1-D CDFs; else ``multivariate_normal.cdf``)."""
    if np.allclose(C, np.diag(np.diag(C))):
        sd = np.sqrt(np.diag(C))
        return float(np.prod(stats.norm.cdf(hi, mu, sd) - stats.norm.cdf(lo, mu, sd)))
    big = 50 * np.sqrt(np.diag(C))
    return float(stats.multivariate_normal(mu, C).cdf(
        np.minimum(hi, mu + big), lower_limit=np.maximum(lo, mu - big), rng=0))


def naive_log_density(arrays, X_train, w, Q, reg, diag):
    """Forest log density of the rows ``Q`` for trees grown on every row of
    ``X_train`` with weights ``w`` (``bootstrap=False``): each leaf's Gaussian
    refitted from the training rows that reach it, truncated to its cell."""
    X_train = np.asarray(X_train, np.float32)
    d = X_train.shape[1]
    dens = np.zeros(len(Q))
    for root in arrays.roots:
        cells = naive_cells(arrays, root, d)
        reach = np.array([naive_leaf_node(arrays, x, root) for x in X_train])
        fit = {}
        for leaf, (lo, hi) in cells.items():
            sel = (reach == leaf) & (w > 0)
            mu, C = naive_cov(X_train[sel], w[sel], reg, diag)
            fit[leaf] = (w[sel].sum() / w.sum(), mu, C, naive_box_mass(mu, C, lo, hi))
        for i, x in enumerate(np.asarray(Q, np.float32)):
            pi, mu, C, mass = fit[naive_leaf_node(arrays, x, root)]
            dens[i] += pi * stats.multivariate_normal(mu, C).pdf(x) / mass
    return np.log(dens / len(arrays.roots))
