"""Density trees (Criminisi, Shotton and Konukoglu): Numba kernels.

A density tree splits a node's samples ``S`` by ``x[f] <= t`` so as to
maximise the information gain of Gaussians,

    gain = log|Sigma_S| - sum_{c in (l, r)} (W_c / W_S) log|Sigma_c|,

where ``W`` are the (sample-weighted) sizes and ``Sigma`` the weighted
maximum-likelihood covariances plus ``reg * I`` (diagonal covariances: the
sum of the log variances).  Equivalently it minimises the children's cost
``sum_c W_c log|Sigma_c|``, which is what the scan below compares.

Kernels:

* :func:`gaussian_cost` -- ``W log|C|`` of weighted first/second moments.
* :func:`best_density_split` -- the best axis-aligned cut of one node over
  ``q`` random features: every cut between distinct values (``n_thresh <= 0``)
  or ``n_thresh`` random cuts per feature (uniform between the smallest and
  largest value that leave ``min_leaf`` rows on each side).
* :func:`density_nodes` -- one tree, breadth first (the node loop
  of :mod:`facesegment.forest._node_loop`; the right child
  is always ``left + 1``), then its leaves' Gaussians and cells.
* :func:`leaf_log_mass` -- each leaf Gaussian's log probability inside its
  cell: exact products of 1-D normal CDFs for diagonal covariances, a
  Monte-Carlo estimate for full ones.
* :func:`score_kernel` -- the forest's log density of each row.
* :func:`sample_kernel` -- draws by descending trees and rejection in cells.

Every random draw comes from Numba's generator seeded by the tree's (or the
call's) seed on entry, so results do not depend on threads.  Features are
float32 (like every forest of the package) and a cut ``t`` is float32: the
cell of a left child is ``x[f] <= t``, of a right child ``x[f] > t``.
"""

import math

import numpy as np
from numba import prange

from .._jit import NJIT, PARALLEL, njit
from ._criteria import midpoint_threshold
from ._node_loop import END, START, node_rows, split_node, tree_arrays, tree_links

LOG_2PI = math.log(2.0 * math.pi)


@njit(**NJIT)
def cholesky_inplace(C):
    """Lower Cholesky factor of the SPD matrix ``C`` (d, d), in place; returns
    ``log det C``, or ``inf`` when ``C`` is not positive definite.

    Parameters
    ----------
    C : ndarray float64, shape (d, d)
        The matrix (its lower triangle is read); overwritten by its lower
        Cholesky factor ``L`` (upper triangle zeroed).  Left partly factored
        when a pivot is not positive.

    Returns
    -------
    float
        ``log det C = 2 sum_j log L_jj``; ``inf`` when a pivot is not positive
        (or is NaN).
    """
    d = C.shape[0]
    logdet = 0.0
    for j in range(d):
        s = C[j, j]
        for k in range(j):
            s -= C[j, k] * C[j, k]
        if not s > 0.0:
            return np.inf
        ljj = math.sqrt(s)
        C[j, j] = ljj
        logdet += 2.0 * math.log(ljj)
        for i in range(j + 1, d):
            s = C[i, j]
            for k in range(j):
                s -= C[i, k] * C[j, k]
            C[i, j] = s / ljj
        for i in range(j):
            C[i, j] = 0.0
    return logdet


@njit(**NJIT)
def covariance(W, s1, s2, reg, diag, out):
    """Weighted ML covariance ``s2/W - (s1/W)(s1/W)^T + reg I`` into ``out``
    (diagonal only when ``diag``; off-diagonal entries then 0).

    Parameters
    ----------
    W : float
        The total weight.
    s1 : ndarray float64, shape (d,)
        ``sum w x``.
    s2 : ndarray float64, shape (d, d)
        ``sum w x x^T``.
    reg : float
        Added to the diagonal.
    diag : bool
        Only the diagonal is computed; the other entries are set to 0.
    out : ndarray float64, shape (d, d)
        Written: the covariance.
    """
    d = s1.shape[0]
    for i in range(d):
        mi = s1[i] / W
        for j in range(d):
            if diag and i != j:
                out[i, j] = 0.0
            else:
                out[i, j] = s2[i, j] / W - mi * (s1[j] / W)
        out[i, i] += reg


@njit(**NJIT)
def gaussian_cost(W, s1, s2, reg, diag, work):
    """``W * log|C|`` of the covariance of the moments (``work``: (d, d) scratch).

    ``C`` is :func:`covariance` of the moments.

    Parameters
    ----------
    W : float
        The total weight.
    s1 : ndarray float64, shape (d,)
        ``sum w x``.
    s2 : ndarray float64, shape (d, d)
        ``sum w x x^T`` (only its diagonal is read when ``diag``).
    reg : float
        Added to the covariance's diagonal.
    diag : bool
        Diagonal covariance: ``log|C|`` is the sum of the log variances.
    work : ndarray float64, shape (d, d)
        Scratch (the covariance and its Cholesky factor); unused when ``diag``.

    Returns
    -------
    float
        ``W log|C|``; ``inf`` when ``C`` is not positive definite (a variance
        not positive, when ``diag``).
    """
    d = s1.shape[0]
    if diag:
        acc = 0.0
        for i in range(d):
            m = s1[i] / W
            v = s2[i, i] / W - m * m + reg
            if not v > 0.0:
                return np.inf
            acc += math.log(v)
        return W * acc
    covariance(W, s1, s2, reg, diag, work)
    return W * cholesky_inplace(work)


@njit(**NJIT)
def _moments(Xc, w, s1, s2):
    """``s1 = sum w x``, ``s2 = sum w x x^T`` of the rows of ``Xc``."""
    s1[:] = 0.0
    s2[:, :] = 0.0
    for r in range(Xc.shape[0]):
        wr = w[r]
        for i in range(Xc.shape[1]):
            a = wr * Xc[r, i]
            s1[i] += a
            for j in range(i + 1):
                s2[i, j] += a * Xc[r, j]
    for i in range(Xc.shape[1]):
        for j in range(i):
            s2[j, i] = s2[i, j]


@njit(**NJIT)
def _candidates(v, min_leaf, n_thresh):
    """Cut positions ``p`` (rows ``< p`` go left) of sorted values ``v``: sorted,
    distinct, each with ``v[p-1] < v[p]`` and ``min_leaf`` rows on each side."""
    m = v.shape[0]
    lo, hi = min_leaf - 1, m - min_leaf
    if hi <= lo or v[lo] >= v[hi]:
        return np.zeros(0, np.int64)
    if n_thresh <= 0:
        out = np.empty(hi - lo, np.int64)
        k = 0
        for p in range(lo + 1, hi + 1):
            if v[p - 1] < v[p]:
                out[k] = p
                k += 1
        return out[:k]
    pos = np.empty(n_thresh, np.int64)
    a, b = np.float64(v[lo]), np.float64(v[hi])
    for k in range(n_thresh):
        t = a + np.random.random() * (b - a)
        pos[k] = np.searchsorted(v, t, side="right")  # v[p-1] <= t < v[p]
    pos = np.unique(pos)
    keep = (pos >= lo + 1) & (pos <= hi)
    return pos[keep]


@njit(**NJIT)
def best_density_split(X, w, rows, q, n_thresh, min_leaf, reg, diag):
    """Best cut of the node holding ``rows`` (int64) of ``X`` (float32 (n, d))
    with weights ``w`` (float64 (n,), > 0 on ``rows``).

    Returns ``(feature, threshold, gain)``; feature -1 when no cut leaves
    ``min_leaf`` rows on each side.  ``gain`` is the information gain of
    Gaussians per unit weight (see the module docstring).

    The ``q`` features are drawn without replacement (a partial Fisher-Yates
    shuffle) and the random cuts drawn from Numba's generator, as seeded by
    the caller.  The cut of least children's cost wins; among equal costs the
    first (features in draw order, cuts in increasing order).

    Parameters
    ----------
    X : ndarray float32, shape (n, d)
        The data.
    w : ndarray float64, shape (n,)
        Row weights, > 0 on ``rows``.
    rows : ndarray int64, shape (m,)
        The node's rows of ``X``.
    q : int
        Features scored, at most ``d``.
    n_thresh : int
        Random cuts per feature, each uniform between the ``min_leaf``-th
        smallest and the ``min_leaf``-th largest value (duplicate positions
        merged); <= 0: every cut between two distinct values.
    min_leaf : int
        The fewest rows a child may hold.
    reg : float
        Added to the covariances' diagonals.
    diag : bool
        Diagonal covariances.

    Returns
    -------
    feature : int
        The best cut's feature; -1 when there is none.
    threshold : float32
        The float32 midpoint of the values either side of the cut
        (:func:`facesegment.forest._criteria.midpoint_threshold`); 0.0 when
        there is none.
    gain : float
        ``(parent cost - children's cost) / W`` with ``W`` the node's weight;
        0.0 when there is no cut.
    """
    m = rows.shape[0]
    d = X.shape[1]
    Xc = np.empty((m, d))
    wn = np.empty(m)
    W = 0.0
    mean = np.zeros(d)
    for r in range(m):
        wn[r] = w[rows[r]]
        W += wn[r]
        for i in range(d):
            mean[i] += wn[r] * X[rows[r], i]
    mean /= W
    for r in range(m):
        for i in range(d):
            Xc[r, i] = np.float64(X[rows[r], i]) - mean[i]
    t1 = np.empty(d)
    t2 = np.empty((d, d))
    _moments(Xc, wn, t1, t2)
    work = np.empty((d, d))
    parent = gaussian_cost(W, t1, t2, reg, diag, work)
    # q features without replacement (partial Fisher-Yates)
    feats = np.arange(d)
    for k in range(q):
        j = k + np.random.randint(0, d - k)
        feats[k], feats[j] = feats[j], feats[k]
    best_cost, best_f, best_t = np.inf, -1, np.float32(0.0)
    s1 = np.empty(d)
    s2 = np.empty((d, d))
    r1 = np.empty(d)
    r2 = np.empty((d, d))
    v = np.empty(m, np.float32)
    for k in range(q):
        f = feats[k]
        for r in range(m):
            v[r] = X[rows[r], f]
        order = np.argsort(v, kind="mergesort")
        vs = v[order]
        cand = _candidates(vs, min_leaf, n_thresh)
        if cand.shape[0] == 0:
            continue
        s1[:] = 0.0
        s2[:, :] = 0.0
        wl = 0.0
        r = 0
        for c in range(cand.shape[0]):
            p = cand[c]
            while r < p:
                o = order[r]
                wr = wn[o]
                wl += wr
                for i in range(d):
                    a = wr * Xc[o, i]
                    s1[i] += a
                    for j in range(i + 1):
                        s2[i, j] += a * Xc[o, j]
                r += 1
            for i in range(d):
                for j in range(i):
                    s2[j, i] = s2[i, j]
            r1[:] = t1 - s1
            r2[:, :] = t2 - s2
            cost = (gaussian_cost(wl, s1, s2, reg, diag, work)
                    + gaussian_cost(W - wl, r1, r2, reg, diag, work))
            if cost < best_cost:
                best_cost, best_f = cost, f
                best_t = midpoint_threshold(vs[p - 1], vs[p])
    if best_f < 0:
        return -1, np.float32(0.0), 0.0
    return best_f, best_t, (parent - best_cost) / W


@njit(**NJIT)
def density_nodes(X, w, rows, seed, q, n_thresh, min_leaf, max_depth, min_gain, reg, diag):
    """One density tree: the node loop of :mod:`facesegment.forest._node_loop`,
    each node split by :func:`best_density_split`, then the leaves' Gaussians
    and cells.

    Parameters
    ----------
    X : ndarray float32, shape (n, d)
    w : ndarray float64, shape (n,)
        Row weights (> 0 on ``rows``).
    rows : ndarray int64, shape (m,)
        The tree's rows.
    seed : int
        Seeds Numba's generator (the random cuts and features).
    q, n_thresh, min_leaf : int
        :func:`best_density_split`'s settings.
    max_depth : int
        -1: no limit.
    min_gain : float
        A split is kept when its gain is larger.
    reg : float
        Added to the covariances' diagonals.
    diag : bool
        Diagonal covariances.

    Returns
    -------
    left, right, feature : ndarray int32, shape (n_nodes,)
    threshold : ndarray float32, shape (n_nodes,)
    depth, n_samples : ndarray int32, shape (n_nodes,)
    weight : ndarray float64, shape (n_nodes,)
        The node's weight.
    leaf : ndarray int32, shape (n_nodes,)
        The node's row of the leaf arrays, -1 inside.
    mean : ndarray float64, shape (n_leaves, d)
        Each leaf's Gaussian's mean.
    chol : ndarray float64, shape (n_leaves, d, d)
        The Cholesky factor of its covariance (``reg`` added; diagonal when
        ``diag``).
    lower, upper : ndarray float64, shape (n_leaves, d)
        Its cell's bounds (``lower < x <= upper``, +-inf where open).
    leaf_weight : ndarray float64, shape (n_leaves,)
    """
    np.random.seed(seed)
    d = X.shape[1]
    nodes, count, ids, buf, feature, threshold = tree_arrays(rows.shape[0])
    no_weights = np.empty(0, np.float64)
    for node in range(feature.shape[0]):  # the nodes in creation order
        if node == count[0]:
            break
        s, e, may_split = node_rows(nodes, node, max_depth)
        if not may_split or e - s < 2 * min_leaf:
            continue
        f, t, gain = best_density_split(X, w, rows[ids[s:e]], q, n_thresh, min_leaf, reg, diag)
        if f >= 0 and gain > min_gain:
            split_node(X, rows, no_weights, nodes, count, ids, buf, feature, threshold, node, f,
                       t, -1)
    n_nodes = count[0]
    left, right, depth = tree_links(nodes, n_nodes)
    feature, threshold = feature[:n_nodes], threshold[:n_nodes]
    start, end = nodes[:n_nodes, START], nodes[:n_nodes, END]
    idx = rows[ids]  # the nodes' rows, each node's in idx[start[node]:end[node]]
    n_samples = (end[:n_nodes] - start[:n_nodes]).astype(np.int32)
    weight = np.zeros(n_nodes)
    for node in range(n_nodes):
        for r in range(start[node], end[node]):
            weight[node] += w[idx[r]]
    # cells: bounds pushed down in node order (parents come before children)
    lo = np.full((n_nodes, d), -np.inf)
    hi = np.full((n_nodes, d), np.inf)
    leaf = np.full(n_nodes, -1, np.int32)
    n_leaves = 0
    for node in range(n_nodes):
        l = left[node]
        if l < 0:
            leaf[node] = n_leaves
            n_leaves += 1
            continue
        f = feature[node]
        lo[l], hi[l], lo[l + 1], hi[l + 1] = lo[node], hi[node], lo[node], hi[node]
        hi[l, f] = threshold[node]
        lo[l + 1, f] = threshold[node]
    mean = np.zeros((n_leaves, d))
    chol = np.zeros((n_leaves, d, d))
    lower = np.empty((n_leaves, d))
    upper = np.empty((n_leaves, d))
    leaf_weight = np.empty(n_leaves)
    s1 = np.empty(d)
    s2 = np.empty((d, d))
    for node in range(n_nodes):
        k = leaf[node]
        if k < 0:
            continue
        a, b = start[node], end[node]
        m = b - a
        Xc = np.empty((m, d))
        wn = np.empty(m)
        for r in range(m):
            i = idx[a + r]
            wn[r] = w[i]
            for j in range(d):
                mean[k, j] += w[i] * X[i, j]
        mean[k] /= weight[node]
        for r in range(m):
            for j in range(d):
                Xc[r, j] = np.float64(X[idx[a + r], j]) - mean[k, j]
        _moments(Xc, wn, s1, s2)
        covariance(weight[node], s1, s2, reg, diag, chol[k])
        cholesky_inplace(chol[k])
        lower[k], upper[k] = lo[node], hi[node]
        leaf_weight[k] = weight[node]
    return (left, right, feature, threshold, depth, n_samples, weight, leaf, mean, chol,
            lower, upper, leaf_weight)


@njit(**NJIT)
def _log_interval_mass(a, b):
    """``log(Phi(b) - Phi(a))`` for standardised bounds ``a < b`` (+-inf allowed),
    computed on the side of the smaller tail so it does not cancel."""
    if a > 0.0:   # both in the upper tail: Phi(-a) - Phi(-b)
        a, b = -b, -a
    pa = 0.5 * math.erfc(-a / math.sqrt(2.0))
    pb = 0.5 * math.erfc(-b / math.sqrt(2.0))
    diff = pb - pa
    if diff > 0.0:
        return math.log(diff)
    return -np.inf


@njit(**NJIT)
def leaf_log_mass(mean, chol, lower, upper, diag, n_mc, seed):
    """Log probability of each leaf's Gaussian inside its cell (float64 (L,)).

    Diagonal covariances: exactly ``sum_j log(Phi(u_j) - Phi(l_j))`` of the
    standardised bounds.  Full covariances: the share of ``n_mc`` draws
    ``mean + L z`` (``z`` standard normal, drawn once from ``seed`` and shared
    by every leaf) that fall in the cell, a draw counted as ``1/2`` when none
    does; a cell open in every coordinate has mass 1 exactly, and a cell
    bounded in one coordinate ``j`` only gets the exact 1-D mass.

    Parameters
    ----------
    mean : ndarray float64, shape (L, d)
        Each leaf Gaussian's mean.
    chol : ndarray float64, shape (L, d, d)
        The lower Cholesky factor of its covariance.
    lower, upper : ndarray float64, shape (L, d)
        Its cell's bounds (``lower < x <= upper``, +-inf where open).
    diag : bool
        Diagonal covariances (exact masses; no draws).
    n_mc : int
        Monte-Carlo draws per leaf for full covariances.
    seed : int
        Seeds Numba's generator before the draws.

    Returns
    -------
    ndarray float64, shape (L,)
        Each leaf's log mass (0.0 for a cell open in every coordinate).
    """
    np.random.seed(seed)
    L, d = mean.shape
    out = np.zeros(L)
    z = np.random.standard_normal((n_mc, d)) if not diag else np.zeros((0, d))
    dims = np.empty(d, np.int64)
    for k in range(L):
        nb = 0
        for j in range(d):
            if np.isfinite(lower[k, j]) or np.isfinite(upper[k, j]):
                dims[nb] = j
                nb += 1
        if nb == 0:
            continue
        if diag or nb == 1:
            acc = 0.0
            for jj in range(nb):
                j = dims[jj]
                sd = chol[k, j, j] if diag else math.sqrt(np.sum(chol[k, j, :j + 1] ** 2))
                acc += _log_interval_mass((lower[k, j] - mean[k, j]) / sd,
                                          (upper[k, j] - mean[k, j]) / sd)
            out[k] = acc
            continue
        inside = 0
        for s in range(n_mc):
            ok = True
            for jj in range(nb):
                j = dims[jj]
                x = mean[k, j]
                for i in range(j + 1):
                    x += chol[k, j, i] * z[s, i]
                if not (x > lower[k, j] and x <= upper[k, j]):
                    ok = False
                    break
            if ok:
                inside += 1
        out[k] = math.log(max(inside, 0.5) / n_mc)
    return out


@njit(**NJIT)
def _leaf_of(x, root, left, feature, threshold):
    node = root
    while left[node] >= 0:
        node = left[node] if x[feature[node]] <= threshold[node] else left[node] + 1
    return node


@njit(**PARALLEL)
def score_kernel(X, roots, left, feature, threshold, leaf, mean, chol, log_norm):
    """Log density of each row of ``X`` (float32 (n, d)): the log of the mean
    over trees of ``exp(log_norm[k] - |L_k^-1 (x - mean_k)|^2 / 2)`` for the
    leaf ``k`` reached in each tree.

    Rows are scored in parallel (``prange``).  A row goes left where
    ``x[feature] <= threshold``.

    Parameters
    ----------
    X : ndarray float32, shape (n, d)
        The rows.
    roots : ndarray int32, shape (T,)
        Each tree's root in the node arrays.
    left : ndarray int32, shape (n_nodes,)
        The forest's nodes (every tree's, concatenated): each node's left
        child as an index into these arrays (the right one is ``left + 1``);
        -1 at a leaf.
    feature : ndarray int32, shape (n_nodes,)
        Each node's split feature.
    threshold : ndarray float32, shape (n_nodes,)
        Each node's split threshold.
    leaf : ndarray int32, shape (n_nodes,)
        Each node's row of the leaf arrays (-1 inside).
    mean : ndarray float64, shape (n_leaves, d)
        Each leaf Gaussian's mean.
    chol : ndarray float64, shape (n_leaves, d, d)
        The lower Cholesky factor ``L_k`` of its covariance.
    log_norm : ndarray float64, shape (n_leaves,)
        Each leaf's log normalising constant.

    Returns
    -------
    ndarray float64, shape (n,)
        The log density of each row.
    """
    n, d = X.shape
    T = roots.shape[0]
    out = np.empty(n)
    for i in prange(n):
        lp = np.empty(T)
        y = np.empty(d)
        for t in range(T):
            k = leaf[_leaf_of(X[i], roots[t], left, feature, threshold)]
            q = 0.0
            for j in range(d):   # forward substitution L y = x - mean
                s = np.float64(X[i, j]) - mean[k, j]
                for r in range(j):
                    s -= chol[k, j, r] * y[r]
                y[j] = s / chol[k, j, j]
                q += y[j] * y[j]
            lp[t] = log_norm[k] - 0.5 * q
        mx = lp.max()
        acc = 0.0
        for t in range(T):
            acc += math.exp(lp[t] - mx)
        out[i] = mx + math.log(acc / T)
    return out


@njit(**NJIT)
def sample_kernel(n, seed, roots, left, weight, leaf, mean, chol, lower, upper, max_tries):
    """``n`` draws: a tree uniformly, then down from its root to the left child
    with probability ``weight[l] / (weight[l] + weight[l + 1])``, then the
    leaf's Gaussian until a draw falls in the leaf's cell (at most
    ``max_tries`` draws).  Returns ``(x float64 (n, d), leaf row int64 (n,),
    accepted bool (n,))``; a row not accepted holds its last draw.

    Parameters
    ----------
    n : int
        The draws.
    seed : int
        Seeds Numba's generator on entry.
    roots : ndarray int32, shape (T,)
        Each tree's root in the node arrays.
    left : ndarray int32, shape (n_nodes,)
        Each node's left child as an index into the node arrays (the right one
        is ``left + 1``); -1 at a leaf.
    weight : ndarray float64, shape (n_nodes,)
        Each node's weight.
    leaf : ndarray int32, shape (n_nodes,)
        Each node's row of the leaf arrays (-1 inside).
    mean : ndarray float64, shape (n_leaves, d)
        Each leaf Gaussian's mean.
    chol : ndarray float64, shape (n_leaves, d, d)
        The lower Cholesky factor of its covariance.
    lower, upper : ndarray float64, shape (n_leaves, d)
        Each leaf's cell (``lower < x <= upper``).
    max_tries : int
        The most Gaussian draws per row.

    Returns
    -------
    x : ndarray float64, shape (n, d)
        The draws.
    rows : ndarray int64, shape (n,)
        The leaf row each was drawn from.
    accepted : ndarray bool, shape (n,)
        Whether the draw fell in its leaf's cell within ``max_tries`` tries.
    """
    np.random.seed(seed)
    d = mean.shape[1]
    out = np.empty((n, d))
    rows = np.empty(n, np.int64)
    ok = np.zeros(n, np.bool_)
    z = np.empty(d)
    for s in range(n):
        node = roots[np.random.randint(0, roots.shape[0])]
        while left[node] >= 0:
            l = left[node]
            p = weight[l] / (weight[l] + weight[l + 1])
            node = l if np.random.random() < p else l + 1
        k = leaf[node]
        rows[s] = k
        for _ in range(max_tries):
            inside = True
            for j in range(d):
                z[j] = np.random.standard_normal()
                x = mean[k, j]
                for r in range(j + 1):
                    x += chol[k, j, r] * z[r]
                out[s, j] = x
                if not (x > lower[k, j] and x <= upper[k, j]):
                    inside = False
            if inside:
                ok[s] = True
                break
    return out, rows, ok
