"""Extremely randomized splits (Geurts et al. 2006): Numba kernel and node driver.

At a node, K = ``max_features`` features are drawn without replacement among
those that are *not constant* on the node's samples (Geurts' rule: a constant
feature is skipped and another one drawn, until K are found or every feature
was looked at).  Each gets one random cut drawn uniformly between the node's
minimum and maximum of that feature, and the candidate with the best
information gain is kept (the first one on ties).  Candidates leaving fewer
than ``min_samples_leaf`` samples on a side count as drawn but are not kept
(as scikit-learn's ``ExtraTreesClassifier``).

Thresholds follow the conventions of the other axis kernels
(``float32(x[f]) <= t`` goes left, ``t`` stored as float32):

* **uint8 features:** an integer cut ``c`` uniform in ``{min, ..., max - 1}``,
  stored as ``t = c + 0.5`` (like the midpoints ``x[f] <= 100.5`` of
  :mod:`facesegment.forest.axis`; the dense kernels compare ``x <= floor(t)``
  = ``x <= c``).  A continuous cut uniform in ``[min, max)`` gives exactly
  this distribution of partitions.
* **float features:** ``t = float32(min + u (max - min))``, with ``u`` uniform
  in [0, 1); if rounding lands on ``max`` the cut becomes ``min``.

Either way ``min <= t < max``: the sample(s) holding the minimum go left and
those holding the maximum go right, so every candidate separates the node.

Kernel: :func:`extra_candidates` (a batch of candidates, rows read once per
pass, feature by feature inside a row).  Driver: :func:`random_axis_split`
(draws the batches from the tree's generator).
"""

import numpy as np

from .._jit import NJIT, njit
from ._criteria import class_counts, xlogx_table


@njit(**NJIT)
def _draw_batch(perm, start, u_feat):
    """Partial Fisher-Yates from position ``start``: the next ``len(u_feat)``
    features of the permutation ``perm`` (int64 (p,), modified in place)."""
    p = perm.shape[0]
    k = u_feat.shape[0]
    feats = np.empty(k, dtype=np.int64)
    for j in range(k):
        pos = start + j
        r = pos + min(int(u_feat[j] * (p - pos)), p - pos - 1)
        tmp = perm[pos]
        perm[pos] = perm[r]
        perm[r] = tmp
        feats[j] = perm[pos]
    return feats


@njit(**NJIT)
def random_cut(lo, hi, u, integer):
    """float32 threshold ``t`` with ``lo <= t < hi`` (``lo < hi``) for a uniform ``u``.

    Parameters
    ----------
    lo, hi : number
        The node's minimum and maximum of the feature, ``lo < hi``.
    u : float
        A uniform draw in [0, 1).
    integer : bool
        Integer cuts (uint8 features).

    Returns
    -------
    float32
        ``c + 0.5`` with the integer cut ``c = lo + min(int(u (hi - lo)),
        hi - lo - 1)`` when ``integer``; else ``float32(lo + u (hi - lo))``, or
        ``lo`` where that rounds up to ``hi``.
    """
    if integer:
        span = int(hi - lo)
        c = int(lo) + min(int(u * span), span - 1)
        return np.float32(c) + np.float32(0.5)
    t = np.float32(np.float64(lo) + u * (np.float64(hi) - np.float64(lo)))
    if t >= np.float32(hi):
        t = np.float32(lo)
    return t


@njit(**NJIT)
def extra_candidates(X, y, idx, feats, u_thr, integer, tot, flog, min_leaf,
                     best_f, best_t, best_gain):
    """Score one random cut per feature of ``feats`` on the samples ``idx``.

    Parameters
    ----------
    X : uint8 or float32 (n, p); y : int32 (n,); idx : int64 (m,)
    feats : int64 (k,) candidate features, in draw order
    u_thr : float64 (k,) uniforms in [0, 1), one per candidate (its cut)
    integer : bool, integer cuts ``c + 0.5`` (uint8 data)
    tot : int64 (n_classes,) class counts of the node; flog : ``k log k`` table (m + 1,)
    min_leaf : minimum samples on each side
    best_f, best_t, best_gain : the best so far (-1, 0, -1.0 at the start)

    Returns
    -------
    (n_nonconstant, best_f, best_t, best_gain): how many candidates were not
    constant on the node, and the best split after this batch (strictly
    better gains replace it, so the first best candidate wins).
    """
    m = idx.shape[0]
    k = feats.shape[0]
    n_classes = tot.shape[0]
    lo = np.empty(k, dtype=X.dtype)
    hi = np.empty(k, dtype=X.dtype)
    first = X[idx[0]]
    for j in range(k):
        lo[j] = first[feats[j]]
        hi[j] = first[feats[j]]
    for i in range(1, m):  # pass 1: min and max, each row read once
        row = X[idx[i]]
        for j in range(k):
            v = row[feats[j]]
            if v < lo[j]:
                lo[j] = v
            elif v > hi[j]:
                hi[j] = v
    thr = np.empty(k, dtype=np.float32)
    n_ok = 0
    for j in range(k):
        if lo[j] < hi[j]:
            thr[j] = random_cut(lo[j], hi[j], u_thr[j], integer)
            n_ok += 1
    if n_ok == 0:
        return 0, best_f, best_t, best_gain
    left = np.zeros((k, n_classes), dtype=np.int64)
    for i in range(m):  # pass 2: class counts on the left of every cut
        row = X[idx[i]]
        c = y[idx[i]]
        for j in range(k):
            if lo[j] < hi[j] and np.float32(row[feats[j]]) <= thr[j]:
                left[j, c] += 1
    s_tot = 0.0
    for c in range(n_classes):
        s_tot += flog[tot[c]]
    parent = flog[m] - s_tot
    for j in range(k):
        if not lo[j] < hi[j]:
            continue
        nl = 0
        s_l = 0.0
        s_r = 0.0
        for c in range(n_classes):
            nl += left[j, c]
            s_l += flog[left[j, c]]
            s_r += flog[tot[c] - left[j, c]]
        nr = m - nl
        if nl < min_leaf or nr < min_leaf:
            continue
        gain = (parent - (flog[nl] - s_l) - (flog[nr] - s_r)) / m
        if gain > best_gain:
            best_gain = gain
            best_f = feats[j]
            best_t = thr[j]
    return n_ok, best_f, best_t, best_gain


@njit(**NJIT)
def _extra_batch(X, y, idx, perm, start, u, integer, n_classes, min_leaf,
                 best_f, best_t, best_gain):
    """One batch of candidates drawn, cut and scored in one call.

    ``k = len(u) // 2`` features are drawn with ``u[:k]`` from position
    ``start`` of ``perm`` (:func:`_draw_batch`), cut with ``u[k:]`` and scored
    by :func:`extra_candidates`.

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    y : int32 (n,)
        Class ids.
    idx : int64 (m,)
        The node's samples.
    perm : int64 (p,)
        The tree's feature permutation; entries ``start .. start + k - 1`` are
        shuffled in place.
    start : int
        Position of ``perm`` the batch starts at.
    u : float64 (2 k,)
        Uniforms in [0, 1): the features' draws, then their cuts'.
    integer : bool
        Integer cuts (uint8 features).
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side.
    best_f, best_t, best_gain : int, float32, float
        The best split so far (-1, 0, -1.0 at the start).

    Returns
    -------
    n_nonconstant : int
        Candidates of the batch that were not constant on the node.
    best_f, best_t, best_gain : int, float32, float64
        The best split after this batch.
    """
    k = u.shape[0] // 2
    feats = _draw_batch(perm, start, u[:k])
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(idx.shape[0])
    return extra_candidates(X, y, idx, feats, u[k:], integer, tot, flog, min_leaf,
                            best_f, best_t, best_gain)


def random_axis_split(X, y, idx, perm, rng, q, n_classes, min_samples_leaf=1):
    """The extremely randomized split ``x[f] <= t`` of the node's samples ``idx``.

    Candidates are drawn in batches from ``rng`` (the tree's generator): a
    batch of ``k = q - found`` features continues a partial Fisher-Yates
    shuffle of ``perm`` with ``k`` uniforms, then ``k`` more uniforms give
    their cuts (``rng.random(2 k)``); batches go on until ``q`` non-constant
    features were scored or all ``p`` features were drawn.  Deterministic
    given the generator's state.

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p)
        Raw features.
    y : ndarray int32, shape (n,)
        Class ids in ``0..n_classes-1``.
    idx : ndarray int64, shape (m,)
        Samples of the node.
    perm : ndarray int64, shape (p,)
        The tree's reusable feature permutation; shuffled in place.
    rng : numpy.random.Generator
        The tree's generator.
    q : int
        Number of non-constant features to score (``max_features``).
    n_classes : int
        Number of classes.
    min_samples_leaf : int, default=1
        Minimum samples on each side of the split.

    Returns
    -------
    feature : int
        The best candidate's feature (the first on ties); -1 when no candidate
        splits the node with ``min_samples_leaf`` samples on each side.
    threshold : float
        ``x[feature] <= threshold`` goes left (a float32 value).
    gain : float
        Information gain; -1.0 when there is no valid split.
    """
    p = perm.shape[0]
    integer = X.dtype == np.uint8
    best_f, best_t, best_gain = -1, np.float32(0.0), -1.0
    found = start = 0
    while found < q and start < p:
        k = min(q - found, p - start)
        n_ok, best_f, best_t, best_gain = _extra_batch(
            X, y, idx, perm, start, rng.random(2 * k), integer, n_classes,
            min_samples_leaf, best_f, best_t, best_gain)
        found += n_ok
        start += k
    return int(best_f), float(best_t), float(best_gain)


@njit(**NJIT)
def _cut_gain(left, tot, miss, m, min_leaf, flog, parent, miss_left):
    """Information gain of a cut of a node of ``m`` samples; -1.0 when a side has
    fewer than ``min_leaf`` samples.

    Parameters
    ----------
    left, tot, miss : int64 (n_classes,)
        Class counts of the present values on the cut's left, of all the present
        values, and of the missing ones.
    m, min_leaf : int
    flog : float64 (m + 1,) the ``k log k`` table; parent : the node's ``n H``
    miss_left : bool, the missing values go left
    """
    nl = 0
    s_l = 0.0
    s_r = 0.0
    for c in range(tot.shape[0]):
        cl = left[c] + (miss[c] if miss_left else 0)
        cr = tot[c] - left[c] + (0 if miss_left else miss[c])
        nl += cl
        s_l += flog[cl]
        s_r += flog[cr]
    nr = m - nl
    if nl < min_leaf or nr < min_leaf:
        return -1.0
    return (parent - (flog[nl] - s_l) - (flog[nr] - s_r)) / m


@njit(**NJIT)
def extra_candidates_missing(X, y, idx, feats, u_thr, integer, n_classes, min_leaf, best):
    """:func:`extra_candidates` when X holds NaN: each candidate's cut is drawn
    between the minimum and maximum of its *present* values (a feature whose
    present values are constant is not a candidate), and is scored with the
    node's missing values on the right, then on the left (kept when strictly
    better).

    Parameters
    ----------
    X : float32 (n, p) (NaN: missing); y : int32 (n,); idx : int64 (m,)
    feats : int64 (k,) candidate features; u_thr : float64 (k,) their uniforms
    integer : bool (always False for data holding NaN)
    n_classes, min_leaf : int
    best : float64 (4,) the best so far, updated in place: gain, feature,
        threshold, missing side (1 left, 0 right, -1 none missing)

    Returns
    -------
    The number of candidates whose present values were not constant.
    """
    m = idx.shape[0]
    flog = xlogx_table(m)
    n_ok = 0
    for j in range(feats.shape[0]):
        f = feats[j]
        lo = np.inf
        hi = -np.inf
        for i in range(m):
            v = np.float64(X[idx[i], f])
            if v == v:
                lo = min(lo, v)
                hi = max(hi, v)
        if not lo < hi:
            continue
        n_ok += 1
        t = random_cut(lo, hi, u_thr[j], integer)
        left = np.zeros(n_classes, np.int64)
        tot = np.zeros(n_classes, np.int64)
        miss = np.zeros(n_classes, np.int64)
        for i in range(m):
            c = y[idx[i]]
            v = np.float32(X[idx[i], f])
            if v != v:
                miss[c] += 1
            else:
                tot[c] += 1
                if v <= t:
                    left[c] += 1
        s_all = 0.0
        n_miss = 0
        for c in range(n_classes):
            s_all += flog[tot[c] + miss[c]]
            n_miss += miss[c]
        parent = flog[m] - s_all
        for side in range(2 if n_miss > 0 else 1):
            g = _cut_gain(left, tot, miss, m, min_leaf, flog, parent, side == 1)
            if g > best[0]:
                best[0] = g
                best[1] = f
                best[2] = t
                best[3] = side if n_miss > 0 else -1
    return n_ok


def random_axis_split_missing(X, y, idx, perm, rng, q, n_classes, min_samples_leaf=1):
    """:func:`random_axis_split` when X holds NaN (:func:`extra_candidates_missing`).

    The draws from ``rng`` are those of :func:`random_axis_split`.

    Parameters
    ----------
    X : ndarray float32, shape (n, p)
        Raw features; NaN marks a missing value.
    y : ndarray int32, shape (n,)
        Class ids in ``0..n_classes-1``.
    idx : ndarray int64, shape (m,)
        Samples of the node.
    perm : ndarray int64, shape (p,)
        The tree's reusable feature permutation; shuffled in place.
    rng : numpy.random.Generator
        The tree's generator.
    q : int
        Number of non-constant features to score (``max_features``).
    n_classes : int
        Number of classes.
    min_samples_leaf : int, default=1
        Minimum samples on each side of the split.

    Returns
    -------
    feature : int
        The best candidate's feature; -1 when no candidate splits the node.
    threshold : float
        ``x[feature] <= threshold`` goes left (a float32 value; 0.0 when
        ``feature`` is -1).
    gain : float
        Information gain; -1.0 when there is no valid split.
    missing_left : int
        1 when the node's missing values go left, 0 right, -1 when none of the
        node's samples misses ``feature``.
    """
    p = perm.shape[0]
    best = np.array([-1.0, -1.0, 0.0, -1.0])
    found = start = 0
    while found < q and start < p:
        k = min(q - found, p - start)
        u = rng.random(2 * k)
        feats = _draw_batch(perm, start, u[:k])
        found += extra_candidates_missing(X, y, idx, feats, u[k:], X.dtype == np.uint8,
                                          n_classes, min_samples_leaf, best)
        start += k
    if best[1] < 0:
        return -1, 0.0, -1.0, -1
    return int(best[1]), float(np.float32(best[2])), float(best[0]), int(best[3])


__all__ = ["random_axis_split", "random_axis_split_missing", "extra_candidates",
           "extra_candidates_missing", "random_cut"]
