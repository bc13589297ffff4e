"""Numba kernels of the CO2 split optimisation (see :mod:`facesegment.forest.co2`).

Plain arrays and scalars only, no validation: the wrapper ``co2_split``
validates once.  Every kernel has a plain NumPy reference in ``tests/naive.py``
(section "forest: co2").  All release the GIL so trees grow in parallel threads.
"""

import math

import numpy as np

from .._jit import NJIT, njit
from ._dots import dot, dot2
from ._sort import stable_argsort
from ._sparse import keep_top_k

#: Rounds (of ``tau`` steps) with a rising mean surrogate before eta is halved.
LR_PATIENCE = 2


# ---------------------------------------------------------------- kernels

@njit(**NJIT)
def _fold(w, mean, inv_std, u):
    """Fold the normalisation into raw weights: u = w[:p] * inv_std, c = u @ mean + w[p].

    ``w @ [(x - mean) * inv_std, -1] == u @ x - c``.  Writes ``u`` (p,) float32,
    returns ``c`` (float32).
    """
    p = u.shape[0]
    for j in range(p):
        u[j] = w[j] * inv_std[j]
    return dot(u, mean) + w[p]


@njit(**NJIT)
def _log_loss_table(counts, ell):
    """Leaf losses from side counts: ell[j, k] = -log((counts[j,k]+1)/(n_j+K)).

    counts : (2, K) float64; ell : (2, K) float32 output (Laplace-smoothed
    log loss of Eq. (3) with theta_j the smoothed empirical log-frequencies).
    """
    K = counts.shape[1]
    for j in range(2):
        n = 0.0
        for k in range(K):
            n += counts[j, k]
        for k in range(K):
            ell[j, k] = -math.log((counts[j, k] + 1.0) / (n + K))


@njit(**NJIT)
def _gain_counts(counts):
    """Information gain (nats) of a split given its (2, K) side counts."""
    K = counts.shape[1]
    n0 = 0.0
    n1 = 0.0
    for k in range(K):
        n0 += counts[0, k]
        n1 += counts[1, k]
    n = n0 + n1
    if n0 <= 0.0 or n1 <= 0.0:
        return 0.0
    hp = 0.0
    h0 = 0.0
    h1 = 0.0
    for k in range(K):
        t = counts[0, k] + counts[1, k]
        if t > 0:
            hp -= t / n * math.log(t / n)
        if counts[0, k] > 0:
            q = counts[0, k] / n0
            h0 -= q * math.log(q)
        if counts[1, k] > 0:
            q = counts[1, k] / n1
            h1 -= q * math.log(q)
    return hp - n0 / n * h0 - n1 / n * h1


@njit(**NJIT)
def _surrogate_values(X, y, idx, u, c, ell, out):
    """Per-sample surrogate of Eq. (5) and 0/1-side stump loss of Eq. (2).

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    y : int32 (n,)
        Their classes.
    idx : int64 (m,)
        The node's samples.
    u : float32 (p,)
        The folded weights (on raw features).
    c : float32
        The folded offset: a sample goes to side 0 when ``u @ x - c <= 0``.
    ell : float32 (2, K)
        Leaf losses ``l(theta_j, k)`` of the two sides.
    out : float64 (m, 2)
        Written in place: column 0 the bound ``max(-a + ell[0, y], a +
        ell[1, y]) - |a|`` (``a = u @ x - c``), column 1 the empirical loss
        ``ell[0, y]`` if ``a <= 0`` else ``ell[1, y]``.
    """
    for r in range(idx.shape[0]):
        i = idx[r]
        a = dot(u, X[i]) - c
        k = y[i]
        t0 = -a + ell[0, k]
        t1 = a + ell[1, k]
        out[r, 0] = max(t0, t1) - abs(a)
        out[r, 1] = ell[0, k] if a <= 0 else ell[1, k]


@njit(**NJIT)
def _sgd_step(X, y, rows, mean, inv_std, w, vel, u, c, u_old, c_old, ell,
              eta, momentum, nu, acc, counts_cur, counts_old):
    """One mini-batch step of Algorithm 1 with momentum and projection.

    The subgradient of the CCCP subproblem, Eq. (11), averaged over ``rows``:
    per sample ``coef * [z, -1]`` with ``coef = -(1 + s)`` when the leaf-0 term
    of the max wins, else ``1 - s``, ``s = sgn(w_old . [z, -1])``.  Then
    ``vel = momentum * vel - eta * g``, ``w += vel``, projection onto
    ``||w||^2 <= nu``, and ``u`` refolded.

    Parameters
    ----------
    X : (n, p) uint8 or float32;  y : (n,) int32;  rows : (B,) int64
    mean, inv_std : (p,) float32
    w, vel : (p + 1,) float32, updated in place
    u, u_old : (p,) float32 folded current / old weights (u updated in place)
    c, c_old : float32 folded offsets
    ell : (2, K) float32 leaf losses l(theta_j, k)
    acc : (p,) float32 scratch
    counts_cur, counts_old : (2, K) float64, side counts under w / w_old, added to

    Returns
    -------
    c : float32 new folded offset;  sur : float64 summed surrogate of the batch
    (at the pre-step w);  n_axpy : int samples with a non-zero gradient
    """
    p = u.shape[0]
    B = rows.shape[0]
    for j in range(p):
        acc[j] = 0.0
    coef_sum = np.float32(0.0)
    sur = 0.0
    n_axpy = 0
    for r in range(B):
        i = rows[r]
        xi = X[i]
        a, ao = dot2(xi, u, u_old)
        a -= c
        ao -= c_old
        s = np.float32(1.0) if ao > 0 else (np.float32(-1.0) if ao < 0 else np.float32(0.0))
        k = y[i]
        t0 = -a + ell[0, k]
        t1 = a + ell[1, k]
        sur += max(t0, t1) - abs(a)
        counts_cur[0 if a <= 0 else 1, k] += 1.0
        counts_old[0 if ao <= 0 else 1, k] += 1.0
        coef = -(np.float32(1.0) + s) if t0 >= t1 else np.float32(1.0) - s
        if coef != 0:
            n_axpy += 1
            coef_sum += coef
            for j in range(p):
                acc[j] += coef * np.float32(xi[j])
    inv_b = np.float32(1.0 / B)
    for j in range(p):
        g = inv_std[j] * (acc[j] - coef_sum * mean[j]) * inv_b
        vel[j] = momentum * vel[j] - eta * g
        w[j] += vel[j]
    vel[p] = momentum * vel[p] + eta * coef_sum * inv_b
    w[p] += vel[p]
    norm2 = dot(w, w)     # the fixed order: the same projection on every CPU
    if norm2 > nu:
        scale = np.float32(math.sqrt(nu / norm2))
        for j in range(p + 1):
            w[j] *= scale
    c = _fold(w, mean, inv_std, u)
    return c, sur, n_axpy


@njit(**NJIT)
def _axis_counts(X, y, idx, feature, threshold, counts):
    """Side counts (2, K) of the univariate split ``x[feature] <= threshold``.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    y : int32 (n,)
        Their classes.
    idx : int64 (m,)
        The node's samples.
    feature : int
        The split's feature.
    threshold : float32
        ``float32(x[feature]) <= threshold`` is side 0.
    counts : float64 (2, K)
        Added to in place: samples per side and class.
    """
    for r in range(idx.shape[0]):
        i = idx[r]
        counts[0 if np.float32(X[i, feature]) <= threshold else 1, y[i]] += 1.0


@njit(**NJIT)
def _co2_optimise(X, y, order, batch, mean, inv_std, w, ell, eta, tau, n_steps,
                  momentum, nu, keep_best, w_best, stats, max_nonzero=-1):
    """Run ``n_steps`` of Algorithm 1 from ``w`` (updated in place to the final w).

    Step ``t`` uses the mini-batch ``order[t * batch:(t + 1) * batch]`` (the
    wrapper draws ``order`` up front: successive random permutations of the
    node's samples).  Every ``tau`` steps a CCCP round ends: the round's gain
    estimate for ``w_old`` (sides by ``w_old`` on the round's samples) is
    compared with the best so far (``w_best`` receives a better ``w_old`` when
    ``keep_best``), theta is re-estimated from the round's sides under ``w``
    (``ell`` updated in place), eta is halved after ``LR_PATIENCE`` rounds whose
    mean surrogate rose, and ``w_old = w``.

    Parameters
    ----------
    X : (n, p) uint8 or float32;  y : (n,) int32;  order : (>= n_steps * batch,) int64
    batch : int;  mean, inv_std : (p,) float32;  w : (p + 1,) float32 (in/out)
    ell : (2, K) float32 initial leaf losses (in/out);  eta, nu, momentum : float
    tau, n_steps : int;  keep_best : bool;  w_best : (p + 1,) float32 (out)
    stats : (4,) float64 out: [samples dotted, samples with a gradient, final eta,
    CCCP rounds]
    max_nonzero : int
        When ``0 < max_nonzero < p``, every step ends with hard thresholding:
        all but the ``max_nonzero`` largest ``|w_j|`` (normalised features,
        offset excluded) are set to zero (projected SGD onto k-sparse vectors,
        as in iterative hard thresholding).  -1: dense.

    Returns
    -------
    True when ``w_best`` holds a candidate other than the initial ``w``.
    """
    p = X.shape[1]
    K = ell.shape[1]
    B = batch
    u = np.empty(p, np.float32)
    c = _fold(w, mean, inv_std, u)
    u_old = u.copy()
    c_old = c
    w_old = w.copy()
    vel = np.zeros(p + 1, np.float32)
    acc = np.empty(p, np.float32)
    counts_cur = np.zeros((2, K))
    counts_old = np.zeros((2, K))
    best_est = -1.0
    have_best = False
    prev_sur = np.inf
    n_up = 0
    round_sur = 0.0
    round_n = 0
    n_axpy = 0
    n_rounds = 0
    eta32 = np.float32(eta)
    sparse = 0 < max_nonzero < p
    scratch = np.empty(p if sparse else 0, np.float32)
    if sparse:
        keep_top_k(w, p, max_nonzero, scratch)
        c = _fold(w, mean, inv_std, u)
        u_old[:] = u
        c_old = c
        w_old[:] = w
    for step in range(n_steps):
        if step > 0 and step % tau == 0:
            est = _gain_counts(counts_old)
            if est > best_est:
                best_est = est
                if n_rounds > 0 and keep_best:
                    w_best[:] = w_old
                    have_best = True
            _log_loss_table(counts_cur, ell)
            mean_sur = round_sur / round_n
            if mean_sur > prev_sur:
                n_up += 1
                if n_up >= LR_PATIENCE:
                    eta32 = np.float32(eta32 * 0.5)
                    n_up = 0
            prev_sur = mean_sur
            counts_cur[:] = 0.0
            counts_old[:] = 0.0
            round_sur = 0.0
            round_n = 0
            n_rounds += 1
            w_old[:] = w
            u_old[:] = u
            c_old = c
        rows = order[step * B:(step + 1) * B]
        c, sur, nax = _sgd_step(X, y, rows, mean, inv_std, w, vel, u, c, u_old, c_old,
                                ell, eta32, np.float32(momentum), np.float32(nu), acc,
                                counts_cur, counts_old)
        if sparse:
            keep_top_k(w, p, max_nonzero, scratch)
            c = _fold(w, mean, inv_std, u)
        round_sur += sur
        round_n += B
        n_axpy += nax
    stats[0] = float(n_steps) * B
    stats[1] = n_axpy
    stats[2] = eta32
    stats[3] = n_rounds
    return have_best


@njit(**NJIT)
def _project(X, idx, u, out):
    """out[r] = u @ X[idx[r]] in float32 (the stored split's value)."""
    for r in range(idx.shape[0]):
        out[r] = dot(u, X[idx[r]])


@njit(**NJIT)
def _threshold_gain(v, yv, threshold, n_classes, min_leaf):
    """Information gain of ``v <= threshold`` (float32 comparison); -1.0 when a
    side has fewer than ``min_leaf`` samples."""
    counts = np.zeros((2, n_classes))
    t = np.float32(threshold)
    nl = 0
    for r in range(v.shape[0]):
        side = 0 if v[r] <= t else 1
        counts[side, yv[r]] += 1.0
        nl += 1 - side
    if nl < min_leaf or v.shape[0] - nl < min_leaf:
        return -1.0
    return _gain_counts(counts)


@njit(**NJIT)
def _best_threshold(v, yv, n_classes, min_leaf):
    """Best threshold on values ``v`` (m,) float32 with labels ``yv`` (m,).

    Returns ``(threshold, gain)``: float32 threshold strictly between two
    consecutive distinct sorted values (so ``v <= threshold`` is robust to
    rounding) leaving at least ``min_leaf`` samples on each side, and its
    information gain; ``(nan, 0.0)`` if there is none.
    """
    m = v.shape[0]
    order = stable_argsort(v)
    total = np.zeros(n_classes)
    for r in range(m):
        total[yv[r]] += 1.0
    counts = np.zeros((2, n_classes))
    counts[1, :] = total
    best_gain = -1.0
    best_t = np.float32(np.nan)
    for r in range(m - 1):
        k = yv[order[r]]
        counts[0, k] += 1.0
        counts[1, k] -= 1.0
        lo = v[order[r]]
        hi = v[order[r + 1]]
        if hi > lo and r + 1 >= min_leaf and m - r - 1 >= min_leaf:
            g = _gain_counts(counts)
            if g > best_gain:
                t = np.float32(lo + (hi - lo) * np.float32(0.5))
                if not (t >= lo and t < hi):
                    t = lo
                best_gain = g
                best_t = t
    if best_gain < 0:
        return best_t, 0.0
    return best_t, best_gain
