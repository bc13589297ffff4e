"""Growing one tree breadth first (Python driver over Numba split kernels).

The tree's samples are one int64 index array; each node owns a contiguous
segment of it, partitioned in place (stably) when the node splits.  Nodes are
numbered in breadth-first order and all random draws come from one generator
per tree, consumed in that order, so truncating a tree at depth d gives exactly
the tree grown with ``max_depth=d`` from the same seed.

Split families: ``"axis"``, ``"two-probe"``, ``"co2"`` and ``"extra"``
(extremely randomized cuts, :mod:`facesegment.forest._extra_kernels`) are
grown here; ``"ferns"`` and ``"rotation"`` have their own tree functions
(:data:`OWN_GROWERS`), which reuse :func:`draw_tree_samples` and, for
rotation, :func:`grow_tree` itself.

:func:`fit_tree_task` is the top-level (picklable) task that the estimators hand
to :func:`facesegment.parallel.map_tasks`, locally or on a Dask cluster.
"""

import importlib
import time
from collections import deque

import numpy as np

from .._jit import NJIT, njit
from ._cart_kernels import grow_cart
from ._criteria import class_counts, sorted_gain_of_values
from ._extra_kernels import random_axis_split
from ._predict import oblique_values, partition, partition_sparse
from ._sparse import quantise
from .axis import best_axis_split
from .twoprobe import best_pair_split, sample_pairs

FAMILIES = ("axis", "two-probe", "co2", "extra", "ferns", "rotation")

#: Families whose trees are built by a function of their own module:
#: ``{family: (module of facesegment.forest, function)}``, imported when first used
#: (the modules import this one).  Same signature as :func:`grow_tree`.
OWN_GROWERS = {"ferns": ("ferns", "grow_fern"), "rotation": ("rotation", "grow_rotation_tree")}


#: Largest total weight accepted with bootstrap=False (each unit is one row copy;
#: node sample counts are int32).
MAX_REPEATED_ROWS = 2**31 - 1


def sampling_pool(sample_weight, bootstrap):
    """How each tree draws its rows under ``sample_weight``: ``(pool, cdf)``.

    ``pool`` (sorted int64) lists the rows a tree draws from, a row appearing
    once per copy; ``cdf`` (float64, ending at 1.0) gives, with ``bootstrap``,
    the cumulative draw probabilities of the pool's entries.  ``(None, None)``
    stands for the unweighted draw over all rows (the byte-identical path).

    * ``bootstrap=True``: weights are relative draw probabilities (their
      scale does not matter): the pool is the rows of positive weight, drawn
      with probability proportional to the weight.  All-equal weights give
      ``(None, None)``; zero weights only: the positive rows, uniformly.
    * ``bootstrap=False``: integer weights repeat rows (the pool is ``w[i]``
      copies of row ``i``), exactly like repeating the rows of X; all-ones
      weights give ``(None, None)``.  Non-integer weights raise ``ValueError``:
      without replacement a fractional row has no meaning.
    """
    if sample_weight is None:
        return None, None
    w = np.asarray(sample_weight, dtype=np.float64)
    if bootstrap:
        if w.min() == w.max():
            return None, None
        pool = np.flatnonzero(w > 0).astype(np.int64)
        wp = w[pool]
        if wp.min() == wp.max():
            return pool, None
        cdf = np.cumsum(wp)
        return pool, cdf / cdf[-1]
    frac = np.flatnonzero(w != np.floor(w))
    if frac.size:
        i = int(frac[0])
        raise ValueError(
            f"sample_weight has non-integer values (e.g. {w[i]!r} for sample {i}); with "
            "bootstrap=False a weight is a number of copies of the row, so it must be a "
            "whole number: round the weights, or use bootstrap=True (rows drawn with "
            "probability proportional to their weight)")
    if (w == 1).all():
        return None, None
    if w.sum() > MAX_REPEATED_ROWS:
        raise ValueError(f"sample_weight sums to {w.sum():.0f}, more than the "
                         f"{MAX_REPEATED_ROWS} row copies a tree can hold with "
                         "bootstrap=False; scale the weights down or use bootstrap=True")
    return np.repeat(np.arange(w.shape[0], dtype=np.int64), w.astype(np.int64)), None


def tree_sample_indices(rng, n, spec):
    """The sorted int64 rows of one tree: its first use of ``rng`` (a fresh
    ``default_rng(seed)`` of the tree's seed), so the draw of a fitted tree is
    reproducible from its seed (out-of-bag estimates).  With ``spec["strata"]``
    (``class_weight="balanced_subsample"``) every class gets an equal share of
    the draws (:func:`draw_stratified`), else :func:`draw_tree_samples`."""
    if spec.get("strata") is not None:
        return draw_stratified(rng, spec["strata"], spec["n_samples"])
    return draw_tree_samples(rng, n, spec["n_samples"], spec["bootstrap"],
                             spec.get("pool"), spec.get("cdf"))


def draw_stratified(rng, strata, n_samples):
    """``n_samples`` rows drawn with replacement, ``n_samples // k`` (one more for
    the first ``n_samples % k``) from each of the ``k`` strata ``(rows, cdf)``:
    uniformly within a stratum, or by its ``cdf`` (weighted rows).  Sorted int64."""
    k = len(strata)
    parts = []
    for c, (rows, cdf) in enumerate(strata):
        m_c = n_samples // k + (1 if c < n_samples % k else 0)
        if cdf is None:
            pos = rng.integers(0, rows.shape[0], size=m_c)
        else:
            pos = np.minimum(np.searchsorted(cdf, rng.random(m_c), side="right"),
                             rows.shape[0] - 1)
        parts.append(rows[pos])
    return np.sort(np.concatenate(parts)).astype(np.int64)


def draw_tree_samples(rng, n, n_samples, bootstrap, pool=None, cdf=None):
    """Sorted int64 indices of the samples of one tree (with or without replacement).

    Without ``pool`` (unweighted), ``n_samples`` of the ``n`` rows are drawn
    uniformly.  With ``pool``/``cdf`` from :func:`sampling_pool`, positions
    in the pool are drawn (with ``cdf``: with those probabilities) and mapped to
    rows, so zero-weight rows never enter a tree, and bootstrap=False with
    integer weights draws exactly as from the repeated rows.
    """
    if pool is None:
        if bootstrap:
            idx = rng.integers(0, n, size=n_samples)
        else:
            idx = (rng.choice(n, size=n_samples, replace=False) if n_samples < n
                   else np.arange(n))
        idx = np.sort(idx).astype(np.int64)
        return idx
    m = pool.shape[0]
    if bootstrap and cdf is not None:
        pos = np.minimum(np.searchsorted(cdf, rng.random(n_samples), side="right"), m - 1)
    elif bootstrap:
        pos = rng.integers(0, m, size=n_samples)
    else:
        pos = rng.choice(m, size=n_samples, replace=False) if n_samples < m else np.arange(m)
    return pool[np.sort(pos)].astype(np.int64)


@njit(**NJIT)
def partial_shuffle(perm, u):
    """Partial Fisher-Yates: a uniform random subset of ``perm`` (int64 (p,)).

    ``u`` (float64 (q,), uniform in [0, 1)) drives the swaps; on return
    ``perm[:q]`` is the subset, returned sorted (a new array).  ``perm`` stays a
    permutation, so it can be reused for the next draw.
    """
    p = perm.shape[0]
    q = u.shape[0]
    for j in range(q):
        r = j + min(int(u[j] * (p - j)), p - j - 1)
        tmp = perm[j]
        perm[j] = perm[r]
        perm[r] = tmp
    return np.sort(perm[:q])


def _draw_features(rng, perm, q):
    if q >= perm.shape[0]:
        return np.arange(perm.shape[0], dtype=np.int64)
    return partial_shuffle(perm, rng.random(q))


def grow_tree(X, y, n_classes, spec, seed):
    """Grow one tree.

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p), C-contiguous
    y : ndarray int32, shape (n,)
    n_classes : int
    spec : dict
        ``family`` ("axis", "two-probe", "co2", "extra"), ``max_depth`` (-1: none),
        ``min_samples_split``, ``min_samples_leaf``, ``n_samples``, ``bootstrap``,
        optionally ``pool`` and ``cdf`` (weighted draws: :func:`sampling_pool`),
        ``strata`` (per-class draws: :func:`draw_stratified`), ``criterion``
        ("entropy" or "gini") and ``missing`` (X holds NaN; both for the axis
        family, whose trees :func:`facesegment.forest._cart_kernels.grow_cart` grows),
        ``max_features`` (q), ``n_pairs``; for CO2 also ``co2`` (dict of
        nu, eta, tau, n_passes, batch_size, momentum), ``oblique_min_samples``,
        ``weight_dtype``, ``mean``, ``inv_std`` (float32 (p,)), and optionally
        ``max_nonzero``, ``sparsity``, ``sparse_dtype`` (sparse splits).
    seed : int
        Seed of the tree's random generator.

    Returns
    -------
    dict with the tree's arrays (node indices local to the tree: ``left``,
    ``right``, ``feature``, ``feature2``, ``oblique``, ``threshold``, ``value``,
    ``depth``, ``n_samples``, ``weights`` (n_oblique, p), the sparse rows
    ``sparse``, ``sparse_ptr``, ``sparse_index``, ``sparse_weight``) and ``stats``.
    """
    family = spec["family"]
    if family == "axis" and (spec.get("criterion", "entropy") != "entropy"
                             or spec.get("missing", False)):
        return grow_cart(X, y, n_classes, spec, seed)
    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    n, p = X.shape
    max_depth = spec["max_depth"]
    min_split = spec["min_samples_split"]
    min_leaf = spec["min_samples_leaf"]
    idx = tree_sample_indices(rng, n, spec)
    buf = np.empty_like(idx)
    co2 = None
    if family == "co2":
        from .co2 import co2_split, new_co2_stats

        co2 = spec["co2"]
        co2_stats = new_co2_stats()
        w_dtype = np.dtype(_dense_dtype(spec))
    empty_w = np.zeros((1, p), dtype=np.float32)
    perm = np.arange(p, dtype=np.int64)  # feature permutation reused by every draw

    left, right, feature, feature2, oblique, threshold = [], [], [], [], [], []
    value, depth, n_samp, weights = [], [], [], []
    sparse, sp_index, sp_weight = [], [], []
    stats = {"t_init": 0.0, "t_oblique": 0.0, "n_co2_calls": 0, "n_oblique": 0}

    def new_node(start, end, d):
        seg = idx[start:end]
        counts = class_counts(y, seg, n_classes)
        left.append(-1)
        right.append(-1)
        feature.append(-1)
        feature2.append(-1)
        oblique.append(-1)
        sparse.append(-1)
        threshold.append(0.0)
        value.append(counts)
        depth.append(d)
        n_samp.append(end - start)
        return len(left) - 1, counts

    root, root_counts = new_node(0, idx.shape[0], 0)
    queue = deque([(root, 0, idx.shape[0], 0, root_counts)])
    while queue:
        node, start, end, d, counts = queue.popleft()
        m = end - start
        if ((max_depth >= 0 and d >= max_depth) or m < min_split or m < 2 * min_leaf
                or np.count_nonzero(counts) <= 1):
            continue
        seg = idx[start:end]
        f = f2 = ob = -1
        sp = None
        if family == "two-probe":
            fa, fb = sample_pairs(rng, p, spec["n_pairs"])
            f, f2, thr, gain = best_pair_split(X, y, seg, fa, fb, n_classes, min_leaf)
        elif family == "extra":
            f, thr, gain = random_axis_split(X, y, seg, perm, rng, spec["max_features"],
                                             n_classes, min_leaf)
        else:
            feats = _draw_features(rng, perm, spec["max_features"])
            t0 = time.perf_counter()
            f, thr, gain = best_axis_split(X, y, seg, feats, n_classes, min_leaf)
            if co2 is not None and spec.get("co2_init") == "best" and p >= 2:
                # start from the better of the univariate and the two-probe split
                fa, fb = sample_pairs(rng, p, spec["n_pairs"])
                pa, pb, pthr, pgain = best_pair_split(X, y, seg, fa, fb, n_classes, min_leaf)
                if pa >= 0 and pgain > gain:
                    f, f2, thr, gain = pa, pb, pthr, pgain
            stats["t_init"] += time.perf_counter() - t0
            if co2 is not None:
                node_seed = int(rng.integers(0, 2**31 - 1))
                if f >= 0 and m >= spec["oblique_min_samples"]:
                    t0 = time.perf_counter()
                    res = co2_split(X, y, seg, n_classes, spec["mean"], spec["inv_std"],
                                    f, thr, gain, co2["nu"], co2["eta"], co2["tau"],
                                    co2["n_passes"], co2["batch_size"], co2["momentum"],
                                    node_seed, min_samples_leaf=min_leaf,
                                    init_feature2=f2, stats=co2_stats,
                                    max_nonzero=spec.get("max_nonzero"),
                                    sparsity=spec.get("sparsity", "learned"),
                                    sparse_dtype=spec.get("sparse_dtype", "float32"))
                    stats["n_co2_calls"] += 1
                    if res is not None and isinstance(res[0], tuple):
                        if res[2] > gain:
                            sp = res[0]
                            f = f2 = -1
                            thr, gain = res[1], res[2]
                            stats["n_oblique"] += 1
                    elif res is not None:
                        w, thr_o, gain_o = res
                        w = np.ascontiguousarray(w, dtype=np.float32)
                        if w_dtype != np.float32:  # round, then refit the threshold
                            w = np.ascontiguousarray(quantise(w, w_dtype.name)[1])
                            thr_o, gain_o = sorted_gain_of_values(
                                oblique_values(w, X, seg), y, seg, n_classes, min_leaf)
                        if gain_o > gain:
                            ob = len(weights)
                            weights.append(w)
                            f = f2 = -1
                            thr, gain = float(thr_o), float(gain_o)
                            stats["n_oblique"] += 1
                    stats["t_oblique"] += time.perf_counter() - t0
        if gain <= 0.0 or (f < 0 and ob < 0 and sp is None):
            continue
        if sp is not None:
            nl = partition_sparse(X, seg, buf, sp[0], _kernel_float(sp[1]), np.float32(thr))
        else:
            w_row = weights[ob] if ob >= 0 else empty_w[0]
            nl = partition(X, seg, buf, f, f2, ob if ob < 0 else 0, np.float32(thr),
                           w_row[None, :])
        if nl < min_leaf or m - nl < min_leaf:  # cannot happen for exact kernels
            continue
        feature[node] = f
        feature2[node] = f2
        oblique[node] = ob
        if sp is not None:
            sparse[node] = len(sp_index)
            sp_index.append(sp[0])
            sp_weight.append(sp[1])
        threshold[node] = thr
        lnode, lcounts = new_node(start, start + nl, d + 1)
        rnode, rcounts = new_node(start + nl, end, d + 1)
        left[node] = lnode
        right[node] = rnode
        queue.append((lnode, start, start + nl, d + 1, lcounts))
        queue.append((rnode, start + nl, end, d + 1, rcounts))

    w_store = np.dtype(_dense_dtype(spec))
    out = {
        "left": np.asarray(left, dtype=np.int32),
        "right": np.asarray(right, dtype=np.int32),
        "feature": np.asarray(feature, dtype=np.int32),
        "feature2": np.asarray(feature2, dtype=np.int32),
        "oblique": np.asarray(oblique, dtype=np.int32),
        "threshold": np.asarray(threshold, dtype=np.float32),
        "value": _frequencies(value, n_classes),
        "depth": np.asarray(depth, dtype=np.int32),
        "n_samples": np.asarray(n_samp, dtype=np.int32),
        "weights": (np.asarray(weights, dtype=np.float32).astype(w_store) if weights
                    else np.zeros((0, p), dtype=w_store)),
        "sparse": np.asarray(sparse, dtype=np.int32),
        "sparse_ptr": np.cumsum([0] + [len(a) for a in sp_index]).astype(np.int64),
        "sparse_index": (np.concatenate(sp_index).astype(np.int32) if sp_index
                         else np.zeros(0, np.int32)),
        "sparse_weight": (np.concatenate(sp_weight) if sp_weight else
                          np.zeros(0, np.dtype(spec.get("sparse_dtype", "float32")))),
    }
    if co2 is not None:
        stats["co2"] = co2_stats
    stats["seconds"] = time.perf_counter() - t_start
    stats["n_nodes"] = len(left)
    stats["max_depth"] = int(max(depth))
    out["stats"] = stats
    return out


def _dense_dtype(spec):
    """Storage of dense oblique rows: ``weight_dtype``, but int8 in a sparse forest
    (whose ``weight_dtype`` is the sparse rows') is float32."""
    dt = spec.get("weight_dtype", "float32")
    return "float32" if dt == "int8" and spec.get("max_nonzero") is not None else dt


def _kernel_float(stored):
    """float32 values of stored sparse weights (exact for float16 and int8)."""
    return np.ascontiguousarray(stored, dtype=np.float32)


def _frequencies(counts, n_classes):
    """float32 (n_nodes, n_classes) class frequencies from per-node counts."""
    c = np.asarray(counts, dtype=np.float64).reshape(-1, n_classes)
    return (c / np.maximum(c.sum(axis=1, keepdims=True), 1)).astype(np.float32)


def fit_tree_task(item, X, y, n_classes, spec):
    """Top-level task: ``item = (tree_index, seed)``; returns :func:`grow_tree`'s dict
    (or that of the family's own tree function, :data:`OWN_GROWERS`)."""
    _, seed = item
    own = OWN_GROWERS.get(spec["family"])
    if own is not None:
        module = importlib.import_module(f".{own[0]}", __package__)
        return getattr(module, own[1])(X, y, n_classes, spec, seed)
    return grow_tree(X, y, n_classes, spec, seed)
