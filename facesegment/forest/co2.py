"""CO2: continuous optimisation of oblique split functions (Norouzi et al. 2015).

At one tree node, :func:`co2_split` starts from the best univariate split
(found by the grower with :func:`facesegment.forest.axis.best_axis_split`) and
minimises the convex-concave surrogate of Eq. (10) of the paper,

    L'(w) = sum_i  max(-a_i + l(theta0, y_i), a_i + l(theta1, y_i)) - |a_i|,
    a_i = w . [z_i, -1],     z_i = (x_i - mean) * inv_std,     ||w||^2 <= nu,

with the paper's Algorithm 1 as the paper actually runs it: stochastic
subgradient steps on mini-batches (gradients averaged), momentum, the concave
part ``-|a|`` linearised at ``w_old`` (CCCP) and ``w_old`` refreshed every
``tau`` steps, projection onto the nu-ball after each step, and the learning
rate halved when the surrogate, averaged over a CCCP round, rises in
``lr_patience`` rounds.  ``w`` has ``p + 1`` entries: the last one is the
offset ``b`` (the paper's constant ``-1`` feature), and it is *inside* the
nu-ball.  ``a <= 0`` goes left (leaf 0).

Leaves' log-probabilities ``theta0, theta1`` are the Laplace-smoothed empirical
class log-frequencies of the two sides: computed on all the node's samples for
the initial split (Algorithm 1, line 2), then re-estimated at every ``w_old``
refresh from the samples of the round just finished (sides under the moving
``w``), which is the minimiser over theta of the empirical loss, Eq. (2).

Candidates: the final ``w`` and, with ``keep_best`` (off by default: it did
not help on real windows, docs/studies/co2.md), the ``w_old`` whose round had the best
information gain estimated on the round's samples.  Each is
evaluated exactly on all the node's samples in float32 raw-feature arithmetic
(``w_raw @ x``, as inference does it); with ``refine_threshold`` its offset is
then chosen exactly (sort the projections, scan the thresholds: a line search
on the offset coordinate of ``w``).  The best candidate is returned only if
its information gain beats the univariate initialisation's.

Normalisation is never materialised: the kernels keep ``u = w[:p] * inv_std``
and ``c = u @ mean + b``, so ``a = u @ x - c`` reads raw uint8 rows, and the
stored split is ``u @ x <= c``.

Sparse splits (``max_nonzero=k``): with ``sparsity="learned"`` every SGD step
ends with a projection onto k-sparse vectors (keep the k largest ``|w_j|`` of
the normalised weights: iterative hard thresholding), so the split is learned
on its support; ``"prune"`` runs the dense optimisation and keeps the top k of
the result (the post-hoc baseline).  Either way the raw weights of the support
are rounded to ``sparse_dtype`` (float32, float16, or int8 with one scale per
split) and the threshold is refit exactly on the node's samples with the very
kernel inference uses (:func:`facesegment.forest._sparse.sparse_values`), so
no training sample changes side between training and inference.
"""

import math
import time

import numpy as np

from ._co2_kernels import (LR_PATIENCE, _axis_counts, _best_threshold, _co2_optimise, _fold,
                           _log_loss_table, _project, _threshold_gain)
from ._sparse import MAX_INT8_NONZERO, quantise, sparse_values, top_k_support

__all__ = ["CO2_DEFAULTS", "MIN_STEPS", "MAX_STEPS", "MAX_PASSES", "LR_PATIENCE", "co2_split",
           "co2_flops",
           "n_sgd_steps", "new_co2_stats"]

#: Defaults of the six hyper-parameters of the contract (CO2Forest uses them).
#: Evidence for the choice: docs/studies/co2.md.
CO2_DEFAULTS = {
    "nu": 1.0,
    "eta": 1e-3,
    "tau": 30,
    "n_passes": 4.0,
    "batch_size": 100,
    "momentum": 0.9,
}
#: Bounds on SGD steps per node (see :func:`n_sgd_steps`): at least MIN_STEPS
#: (but never more than MAX_PASSES passes over a small node), at most MAX_STEPS.
MIN_STEPS = 40
MAX_PASSES = 10
MAX_STEPS = 20000


# ---------------------------------------------------------------- wrapper

SPARSITY_MODES = ("learned", "prune")


def _check_sparse(max_nonzero, sparsity, sparse_dtype, p):
    """``max_nonzero`` checked (None: dense), with ``sparsity`` and ``sparse_dtype``."""
    if sparsity not in SPARSITY_MODES:
        raise ValueError(f"sparsity={sparsity!r} must be one of {SPARSITY_MODES}")
    if sparse_dtype not in ("float32", "float16", "int8"):
        raise ValueError(f"sparse_dtype={sparse_dtype!r} must be float32, float16 or int8")
    if max_nonzero is None:
        return None
    k = _check_positive("max_nonzero", max_nonzero, integer=True)
    if sparse_dtype == "int8" and k > MAX_INT8_NONZERO:
        raise ValueError(f"max_nonzero={k} is above {MAX_INT8_NONZERO}, the most int8 "
                         "weights whose sums stay exact in float32; lower it or use "
                         "sparse_dtype='float16'")
    return min(k, p)


def _sparse_candidate(X, idx, yv, wc, u, inv_std, k, dtype, n_classes, min_leaf):
    """``((index, stored weights), threshold, gain)`` of the sparse split from ``wc``.

    The support is the ``k`` largest normalised weights ``|wc_j|`` (all of a
    learned split's non-zeros); its raw weights ``u`` are rounded to ``dtype``
    and the threshold refit on the rounded split's exact values.  None when no
    weight survives or no threshold separates the samples.
    """
    p = u.shape[0]
    support = top_k_support(np.where(inv_std > 0, wc[:p], 0.0), k)
    if support.shape[0] == 0:
        return None
    stored, kw, _ = quantise(u[support], dtype)
    keep = kw != 0
    if not keep.any():
        return None
    index = support[keep].astype(np.int32)
    stored, kw = stored[keep], np.ascontiguousarray(kw[keep])
    vals = sparse_values(X, idx, index, kw)
    thr, gain = _best_threshold(vals, yv, n_classes, min_leaf)
    if not math.isfinite(float(thr)):
        return None
    return (index, stored), float(thr), float(gain)


def new_co2_stats():
    """A fresh per-call statistics accumulator for :func:`co2_split` (``stats=``).

    Keys: ``calls``, ``accepted`` (splits returned), ``samples`` (node samples
    seen), ``sgd_steps``, ``sgd_seconds``, ``sgd_cpu_seconds``, ``sgd_flops``,
    ``eval_seconds``, ``eval_cpu_seconds`` (initial leaf estimate, exact gain of
    the candidates, threshold search), ``eval_flops``.  ``*_seconds`` are wall
    time, ``*_cpu_seconds`` the calling thread's CPU time (what the GFLOP/s
    should be computed from on a loaded machine).  Use one accumulator per
    thread (one per tree).
    """
    return {"calls": 0, "accepted": 0, "samples": 0, "sgd_steps": 0,
            "sgd_seconds": 0.0, "sgd_cpu_seconds": 0.0, "sgd_flops": 0.0,
            "eval_seconds": 0.0, "eval_cpu_seconds": 0.0, "eval_flops": 0.0}


def co2_flops(n_dot, n_axpy, n_steps, p, n_eval=0):
    """Floating-point operations of the CO2 kernels (multiply and add count 2).

    Parameters
    ----------
    n_dot : int
        Samples processed by SGD steps (two dot products each: ``w`` and ``w_old``).
    n_axpy : int
        Of those, samples with a non-zero subgradient (one axpy each).
    n_steps : int
        SGD steps (each updates, projects and refolds ``w``: about 10 p flops).
    p : int
        Number of features.
    n_eval : int
        Samples projected in the exact evaluation (one dot each).

    Returns
    -------
    (sgd_flops, eval_flops) : floats
    """
    sgd = 4.0 * p * n_dot + 2.0 * p * n_axpy + 10.0 * p * n_steps
    return sgd, 2.0 * p * n_eval


def n_sgd_steps(m, n_passes, batch_size, min_steps=MIN_STEPS, max_steps=MAX_STEPS,
                max_passes=MAX_PASSES):
    """SGD steps for a node of ``m`` samples.

    ``ceil(n_passes * m / B)`` with ``B = min(batch_size, m)``, raised to
    ``min(min_steps, ceil(max_passes * m / B))`` (small nodes get enough steps
    to move ``w`` without costing more than ``max_passes`` passes), capped at
    ``max_steps``.  The cost of a tree level is thus at most ``max_passes``
    passes over its samples, and ``n_passes`` passes once nodes hold more than
    ``min_steps * B / n_passes`` samples.

    Parameters
    ----------
    m : int
        Number of samples of the node.
    n_passes : float
        Passes over the node's samples.
    batch_size : int
        Mini-batch size (at least 1 and at most ``m`` is used).
    min_steps : int, default=MIN_STEPS
        Steps small nodes are raised to (within ``max_passes`` passes).
    max_steps : int, default=MAX_STEPS
        Largest number of steps.
    max_passes : float, default=MAX_PASSES
        Most passes the raise to ``min_steps`` may cost.

    Returns
    -------
    int
        The number of steps.
    """
    b = max(1, min(batch_size, m))
    steps = int(math.ceil(n_passes * m / b))
    floor = min(min_steps, int(math.ceil(max_passes * m / b)))
    return int(min(max(steps, floor), max_steps))


def _check_positive(name, value, integer=False):
    if integer:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive integer")
        return int(value)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}={value!r} must be a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name}={value!r} must be a positive finite number")
    return value


def initial_weights(mean, inv_std, nu, f, t, f2=-1):
    """The initial ``w`` (p + 1,) float32 on the surface of the ν-ball.

    It reproduces the initial split on normalised features
    ``z = (x - mean) * inv_std``: ``w[:p] @ z - w[p] <= 0`` iff ``x[f] <= t``
    (or ``x[f] - x[f2] <= t`` when ``f2 >= 0``).

    Parameters
    ----------
    mean, inv_std : ndarray of shape (p,)
        The normalisation of the features.
    nu : float
        Squared radius of the ball: ``||w||^2 = nu``.
    f : int
        The initial split's feature.
    t : float
        Its threshold.
    f2 : int, default=-1
        Its second probe (two-probe split), -1 for none.

    Returns
    -------
    float32 ndarray of shape (p + 1,) or None
        The weights; None when a feature is constant (``inv_std == 0``) or a
        value is not finite.
    """
    p = mean.shape[0]
    s_f = float(inv_std[f])
    s_2 = float(inv_std[f2]) if f2 >= 0 else 1.0
    if not (s_f > 0 and s_2 > 0 and math.isfinite(s_f) and math.isfinite(s_2)
            and math.isfinite(float(t))):
        return None
    w = np.zeros(p + 1, np.float64)
    if f2 < 0:
        w[f] = 1.0
        w[p] = (float(t) - float(mean[f])) * s_f
    else:
        # x_f - x_f2 = mean_f - mean_f2 + z_f / s_f - z_f2 / s_2 <= t
        w[f] = 1.0 / s_f
        w[f2] = -1.0 / s_2
        w[p] = float(t) - float(mean[f]) + float(mean[f2])
    w *= math.sqrt(nu / float(np.dot(w, w)))
    return w.astype(np.float32)


def co2_split(X, y, idx, n_classes, mean, inv_std, init_feature, init_threshold, init_gain,
              nu=CO2_DEFAULTS["nu"], eta=CO2_DEFAULTS["eta"], tau=CO2_DEFAULTS["tau"],
              n_passes=CO2_DEFAULTS["n_passes"], batch_size=CO2_DEFAULTS["batch_size"],
              momentum=CO2_DEFAULTS["momentum"], seed=0, *, min_steps=MIN_STEPS,
              max_steps=MAX_STEPS, max_passes=MAX_PASSES, keep_best=False,
              refine_threshold=True, min_samples_leaf=1, init_feature2=-1, stats=None,
              max_nonzero=None, sparsity="learned", sparse_dtype="float32"):
    """Optimise an oblique split at one node from its best univariate (or two-probe) split.

    Parameters
    ----------
    X : ndarray (n, p), uint8 or float32, C-contiguous
        Raw features (never copied).
    y : ndarray (n,) int32
        Class ids in ``0 .. n_classes - 1``.
    idx : ndarray (m,) int64
        The node's samples (rows of X), m >= 2.
    n_classes : int
    mean, inv_std : ndarray (p,) float32
        Normalisation: the optimisation works on ``z = (x - mean) * inv_std``.
    init_feature, init_threshold, init_gain : int, float, float
        The best univariate split ``x[f] <= t -> left`` (raw units) and its
        information gain in nats.
    nu, eta, tau, n_passes, batch_size, momentum : numbers
        ``||w||^2 <= nu`` (offset included); initial learning rate; SGD steps
        between ``w_old`` refreshes; passes over the node's samples; mini-batch
        size; momentum.  Defaults: :data:`CO2_DEFAULTS`.
    seed : int
        Seeds the mini-batch order (the result depends only on it and the data).
    min_steps, max_steps, max_passes : int
        Bounds on the SGD steps (see :func:`n_sgd_steps`).
    keep_best : bool
        Also evaluate the ``w_old`` with the best per-round gain estimate
        (costs one more projection of the node's samples).
    refine_threshold : bool
        Choose each candidate's threshold exactly on its projections.
    min_samples_leaf : int
        Candidate thresholds leave at least this many samples on each side.
    init_feature2 : int, default -1
        When >= 0 the initial split is the two-probe split
        ``x[init_feature] - x[init_feature2] <= init_threshold`` instead
        (``CO2Forest(init="best")``).
    stats : dict, optional
        Accumulator from :func:`new_co2_stats` (times, FLOPs, counts).
    max_nonzero : int, optional
        Return a sparse split of at most this many features (None: dense).
    sparsity : {"learned", "prune"}
        How the support is found (see the module docstring).
    sparse_dtype : {"float32", "float16", "int8"}
        Storage of a sparse split's weights (its threshold is refit for them).

    Returns
    -------
    None when the optimised split's information gain on the node's samples is
    not larger than ``init_gain``; else ``(w_raw, threshold_raw, gain)`` with
    ``w_raw`` (p,) float32 and ``w_raw @ x <= threshold_raw`` going left,
    ``gain`` measured on that stored split in float32.  A sparse split's
    ``w_raw`` is the pair ``(index int32 (k',), weight (k',) sparse_dtype)``,
    k' <= max_nonzero, and its threshold is in the stored weights' units.
    """
    y, idx, yv, n_classes, mean, inv_std, f, f2, min_leaf, k = _check_split_args(
        X, y, idx, n_classes, mean, inv_std, init_feature, init_feature2, min_samples_leaf,
        max_nonzero, sparsity, sparse_dtype)
    nu = _check_positive("nu", nu)
    eta = _check_positive("eta", eta)
    tau = _check_positive("tau", tau, integer=True)
    n_passes = _check_positive("n_passes", n_passes)
    batch_size = _check_positive("batch_size", batch_size, integer=True)
    if not (0.0 <= float(momentum) < 1.0):
        raise ValueError(f"momentum={momentum!r} must be in [0, 1)")
    t_init = np.float32(init_threshold)
    w = initial_weights(mean, inv_std, nu, f, t_init, f2)
    if w is None:
        return None  # degenerate initial feature (constant): nothing to optimise from

    clock = [(time.perf_counter(), time.thread_time())]
    # Algorithm 1, lines 1-2: w from the initial split on the nu-ball's surface,
    # theta from that split's sides on all node samples.
    ell = _initial_loss(X, y, idx, yv, f, f2, t_init, n_classes)
    clock.append((time.perf_counter(), time.thread_time()))

    m = idx.shape[0]
    p = X.shape[1]
    steps = n_sgd_steps(m, n_passes, batch_size, min_steps, max_steps, max_passes)
    w_best = np.zeros(p + 1, np.float32)
    kstats = np.zeros(4)
    batch = min(batch_size, m)
    rng = np.random.default_rng(int(seed) % (2 ** 64))
    reps = -(-(steps * batch) // m)
    order = np.concatenate([rng.permutation(idx) for _ in range(reps)])
    learned = k is not None and sparsity == "learned"
    have_best = _co2_optimise(X, y, order, batch, mean, inv_std, w, ell, eta, tau, steps,
                              float(momentum), nu, bool(keep_best), w_best, kstats,
                              k if learned else -1)
    clock.append((time.perf_counter(), time.thread_time()))

    cands = [w, w_best] if have_best else [w]
    best = _best_candidate(X, idx, yv, cands, mean, inv_std, k, sparse_dtype, n_classes,
                           min_leaf, refine_threshold)
    clock.append((time.perf_counter(), time.thread_time()))

    margin = 1e-9 * max(1.0, abs(float(init_gain)))
    accepted = best is not None and best[2] > float(init_gain) + margin
    if stats is not None:
        _record_stats(stats, clock, kstats, steps, p, m, len(cands), k, accepted)
    return best if accepted else None


def _check_split_args(X, y, idx, n_classes, mean, inv_std, init_feature, init_feature2,
                      min_samples_leaf, max_nonzero, sparsity, sparse_dtype):
    """:func:`co2_split`'s data and initial split checked; returns ``(y, idx,
    yv, n_classes, mean, inv_std, f, f2, min_leaf, k)`` with ``yv = y[idx]`` and
    ``mean`` and ``inv_std`` as float32."""
    if not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype not in (np.uint8, np.float32):
        raise TypeError(f"X must be a 2-D uint8 or float32 array, got "
                        f"{getattr(X, 'dtype', type(X))} with shape {getattr(X, 'shape', None)}")
    if not X.flags.c_contiguous:
        raise ValueError("X must be C-contiguous (np.ascontiguousarray it once, outside the "
                         "node loop)")
    n, p = X.shape
    y = np.asarray(y)
    if y.shape != (n,) or y.dtype != np.int32:
        raise TypeError(f"y must be int32 of shape ({n},), got {y.dtype} {y.shape}")
    idx = np.asarray(idx)
    if idx.ndim != 1 or idx.dtype != np.int64 or idx.shape[0] < 2:
        raise ValueError(f"idx must be a 1-D int64 array of at least 2 sample indices, got "
                         f"{idx.dtype} {idx.shape}")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"idx has values outside 0..{n - 1}")
    n_classes = _check_positive("n_classes", n_classes, integer=True)
    yv = y[idx]
    if yv.min() < 0 or yv.max() >= n_classes:
        raise ValueError(f"y has class ids outside 0..{n_classes - 1} at this node")
    mean = np.ascontiguousarray(mean, dtype=np.float32)
    inv_std = np.ascontiguousarray(inv_std, dtype=np.float32)
    if mean.shape != (p,) or inv_std.shape != (p,):
        raise ValueError(f"mean and inv_std must have shape ({p},), got {mean.shape}, "
                         f"{inv_std.shape}")
    if not (0 <= int(init_feature) < p):
        raise ValueError(f"init_feature={init_feature} is outside 0..{p - 1}")
    min_leaf = _check_positive("min_samples_leaf", min_samples_leaf, integer=True)
    f, f2 = int(init_feature), int(init_feature2)
    if not (-1 <= f2 < p) or f2 == f:
        raise ValueError(f"init_feature2={init_feature2} must be -1 or another feature in "
                         f"0..{p - 1}")
    k = _check_sparse(max_nonzero, sparsity, sparse_dtype, p)
    return y, idx, yv, n_classes, mean, inv_std, f, f2, min_leaf, k


def _initial_loss(X, y, idx, yv, f, f2, t_init, n_classes):
    """The leaves' log-loss table ``(2, n_classes)`` of the initial split on all
    the node's samples (Algorithm 1, line 2); ``yv`` is ``y[idx]``."""
    counts = np.zeros((2, n_classes))
    if f2 < 0:
        _axis_counts(X, y, idx, f, t_init, counts)
    else:
        diff = X[idx, f].astype(np.float32) - X[idx, f2].astype(np.float32)
        go_left = diff <= t_init
        counts[0] = np.bincount(yv[go_left], minlength=n_classes)
        counts[1] = np.bincount(yv[~go_left], minlength=n_classes)
    ell = np.empty((2, n_classes), np.float32)
    _log_loss_table(counts, ell)
    return ell


def _best_candidate(X, idx, yv, cands, mean, inv_std, k, sparse_dtype, n_classes, min_leaf,
                    refine_threshold):
    """The candidate weight vector whose stored split has the largest exact
    information gain on the node's samples: ``(w_raw, threshold_raw, gain)`` or
    None."""
    p = X.shape[1]
    best = None
    v = np.empty(idx.shape[0], np.float32)
    for wc in cands:
        u = np.empty(p, np.float32)
        c = _fold(wc, mean, inv_std, u)
        if k is not None:
            cand = _sparse_candidate(X, idx, yv, wc, u, inv_std, k, sparse_dtype, n_classes,
                                     min_leaf)
            if cand is not None and (best is None or cand[2] > best[2]):
                best = cand
            continue
        _project(X, idx, u, v)
        if refine_threshold:
            thr, gain = _best_threshold(v, yv, n_classes, min_leaf)
            if not math.isfinite(float(thr)):
                continue
        else:
            thr = np.float32(c)
            gain = _threshold_gain(v, yv, thr, n_classes, min_leaf)
        if best is None or gain > best[2]:
            best = (u, float(thr), float(gain))
    return best


def _record_stats(stats, clock, kstats, steps, p, m, n_cands, k, accepted):
    """Add one :func:`co2_split` call to a :func:`new_co2_stats` accumulator;
    ``clock`` holds (wall, thread CPU) at the start, after the initial loss,
    after the SGD and after the candidates' evaluation."""
    (t0, c0), (t1, c1), (t2, c2), (t3, c3) = clock
    sgd_fl, eval_fl = co2_flops(kstats[0], kstats[1], steps, p, n_eval=n_cands * m)
    if k is not None:
        eval_fl = 2.0 * k * n_cands * m
    stats["calls"] += 1
    stats["accepted"] += int(accepted)
    stats["samples"] += m
    stats["sgd_steps"] += steps
    stats["sgd_seconds"] += t2 - t1
    stats["sgd_cpu_seconds"] += c2 - c1
    stats["sgd_flops"] += sgd_fl
    stats["eval_seconds"] += (t1 - t0) + (t3 - t2)
    stats["eval_cpu_seconds"] += (c1 - c0) + (c3 - c2)
    stats["eval_flops"] += eval_fl
