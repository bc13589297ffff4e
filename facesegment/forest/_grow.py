"""Growing one tree breadth first (Python driver over Numba split kernels).

The tree's samples are one int64 index array; each node owns a contiguous
segment of it, partitioned in place (stably) when the node splits.  Nodes are
numbered in breadth-first order and all random draws come from one generator
per tree, consumed in that order, so truncating a tree at depth d gives exactly
the tree grown with ``max_depth=d`` from the same seed.

Each node's split comes from the spec's split family (an object, see
:mod:`facesegment.forest.families`); families that build their trees another
way (ferns, rotation and non-greedy trees) grow them in their own ``grow``,
reusing :func:`draw_tree_samples` and, for rotation, :func:`grow_tree`.

:func:`fit_tree_task` is the top-level (picklable) task that the estimators hand
to :func:`facesegment.parallel.map_tasks`, locally or on a Dask cluster.
"""

import time
from collections import deque

import numpy as np

from .._jit import NJIT, njit
from ._criteria import class_counts


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


def draw_features(rng, perm, q):
    """``q`` distinct features drawn with ``rng`` (sorted int64; all when ``q >= p``)."""
    if q >= perm.shape[0]:
        return np.arange(perm.shape[0], dtype=np.int64)
    return partial_shuffle(perm, rng.random(q))


class TreeGrowth:
    """What a split family sees of the tree being grown (see
    :mod:`facesegment.forest.families`): ``X``, ``y``, ``n_classes``, ``spec``,
    ``rng`` (the tree's generator), ``p``, ``min_leaf``, ``perm`` (a feature
    permutation reused by every draw), ``weights`` (the dense oblique rows so
    far; a split's ``oblique`` indexes it), ``empty_w``, ``stats`` and
    ``missing`` (NaN-aware partitions, ``missing_left`` stored).  A family
    keeps its own per-tree state as further attributes."""

    def __init__(self, X, y, n_classes, spec, rng):
        self.X, self.y, self.n_classes, self.spec, self.rng = X, y, n_classes, spec, rng
        self.p = X.shape[1]
        self.min_leaf = spec["min_samples_leaf"]
        self.perm = np.arange(self.p, dtype=np.int64)
        self.weights = []
        self.empty_w = np.zeros((1, self.p), dtype=np.float32)
        self.stats = {"t_split": 0.0, "t_init": 0.0, "t_oblique": 0.0, "n_co2_calls": 0,
                      "n_oblique": 0}
        self.missing = bool(spec.get("missing", False))


class _Nodes:
    """The node lists of a tree being grown (breadth first)."""

    def __init__(self, y, idx, n_classes):
        self.y, self.idx, self.n_classes = y, idx, n_classes
        self.left, self.right, self.feature, self.feature2 = [], [], [], []
        self.oblique, self.threshold, self.value, self.depth = [], [], [], []
        self.n_samp, self.sparse, self.sp_index, self.sp_weight = [], [], [], []
        self.miss_left = []

    def new(self, start, end, d):
        counts = class_counts(self.y, self.idx[start:end], self.n_classes)
        for lst, v in ((self.left, -1), (self.right, -1), (self.feature, -1),
                       (self.feature2, -1), (self.oblique, -1), (self.sparse, -1),
                       (self.miss_left, 0), (self.threshold, 0.0), (self.value, counts),
                       (self.depth, d), (self.n_samp, end - start)):
            lst.append(v)
        return len(self.left) - 1, counts

    def set_split(self, node, split):
        self.feature[node] = split.feature
        self.feature2[node] = split.feature2
        self.oblique[node] = split.oblique
        if split.sparse is not None:
            self.sparse[node] = len(self.sp_index)
            self.sp_index.append(split.sparse[0])
            self.sp_weight.append(split.sparse[1])
        self.threshold[node] = split.threshold


def grow_tree(X, y, n_classes, spec, seed):
    """Grow one tree, breadth first, splitting each node with ``spec["split_family"]``.

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p), C-contiguous
    y : ndarray int32, shape (n,)
    n_classes : int
    spec : dict
        ``split_family`` (a :class:`facesegment.forest.families.SplitFamily`),
        ``max_depth`` (-1: none), ``min_samples_split``, ``min_samples_leaf``,
        ``n_samples``, ``bootstrap``, optionally ``pool`` and ``cdf``
        (weighted draws: :func:`sampling_pool`), ``strata`` (per-class draws:
        :func:`draw_stratified`), and the family's own entries (the
        estimator's ``_split_spec``: e.g. ``max_features``, ``n_pairs``,
        ``criterion``, ``missing``, CO2's ``co2``, ``mean``, ``inv_std``).
    seed : int
        Seed of the tree's random generator.

    Returns
    -------
    dict with the tree's arrays (node indices local to the tree: ``left``,
    ``right``, ``feature``, ``feature2``, ``oblique``, ``threshold``, ``value``,
    ``depth``, ``n_samples``, ``weights`` (n_oblique, p), the sparse rows
    ``sparse``, ``sparse_ptr``, ``sparse_index``, ``sparse_weight``) and ``stats``.
    """
    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    family = spec["split_family"]
    max_depth = spec["max_depth"]
    min_split = spec["min_samples_split"]
    min_leaf = spec["min_samples_leaf"]
    idx = tree_sample_indices(rng, X.shape[0], spec)
    tree = TreeGrowth(X, y, n_classes, spec, rng)
    family.start(tree)
    buf = np.empty_like(idx)
    nodes = _Nodes(y, idx, n_classes)
    root, root_counts = nodes.new(0, idx.shape[0], 0)
    queue = deque([(root, 0, idx.shape[0], 0, root_counts)])
    while queue:
        node, start, end, d, counts = queue.popleft()
        m = end - start
        if ((max_depth >= 0 and d >= max_depth) or m < min_split or m < 2 * min_leaf
                or np.count_nonzero(counts) <= 1):
            continue
        seg = idx[start:end]
        t0 = time.perf_counter()
        split = family.find(tree, seg)
        tree.stats["t_split"] += time.perf_counter() - t0
        if split.gain <= 0.0 or (split.feature < 0 and split.oblique < 0
                                 and split.sparse is None):
            continue
        nl, ml = family.partition(tree, seg, buf, split)
        if tree.missing:
            nodes.miss_left[node] = ml
        if nl < min_leaf or m - nl < min_leaf:  # cannot happen for exact kernels
            continue
        nodes.set_split(node, split)
        lnode, lcounts = nodes.new(start, start + nl, d + 1)
        rnode, rcounts = nodes.new(start + nl, end, d + 1)
        nodes.left[node] = lnode
        nodes.right[node] = rnode
        queue.append((lnode, start, start + nl, d + 1, lcounts))
        queue.append((rnode, start + nl, end, d + 1, rcounts))
    out = _tree_dict(nodes, tree, spec, n_classes)
    family.finish(tree, out)
    stats = out["stats"]
    stats["seconds"] = time.perf_counter() - t_start
    stats["n_nodes"] = len(nodes.left)
    stats["max_depth"] = int(max(nodes.depth))
    return out


def _tree_dict(nodes, tree, spec, n_classes):
    """The tree's arrays (see :func:`grow_tree`) from its node lists."""
    w_store = np.dtype(_dense_dtype(spec))
    weights, sp_index, sp_weight = tree.weights, nodes.sp_index, nodes.sp_weight
    out = {
        "left": np.asarray(nodes.left, dtype=np.int32),
        "right": np.asarray(nodes.right, dtype=np.int32),
        "feature": np.asarray(nodes.feature, dtype=np.int32),
        "feature2": np.asarray(nodes.feature2, dtype=np.int32),
        "oblique": np.asarray(nodes.oblique, dtype=np.int32),
        "threshold": np.asarray(nodes.threshold, dtype=np.float32),
        "value": _frequencies(nodes.value, n_classes),
        "depth": np.asarray(nodes.depth, dtype=np.int32),
        "n_samples": np.asarray(nodes.n_samp, dtype=np.int32),
        "weights": (np.asarray(weights, dtype=np.float32).astype(w_store) if weights
                    else np.zeros((0, tree.p), dtype=w_store)),
        "sparse": np.asarray(nodes.sparse, dtype=np.int32),
        "sparse_ptr": np.cumsum([0] + [len(a) for a in sp_index]).astype(np.int64),
        "sparse_index": (np.concatenate(sp_index).astype(np.int32) if sp_index
                         else np.zeros(0, np.int32)),
        "sparse_weight": (np.concatenate(sp_weight) if sp_weight else
                          np.zeros(0, np.dtype(spec.get("sparse_dtype", "float32")))),
    }
    if tree.missing:
        out["missing_left"] = np.asarray(nodes.miss_left, dtype=np.int8)
    out["stats"] = tree.stats
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
    """Top-level task: ``item = (tree_index, seed)``; returns the tree dict that
    ``spec["split_family"].grow`` returns (:func:`grow_tree`'s, unless the
    family grows its trees another way)."""
    return spec["split_family"].grow(X, y, n_classes, spec, item[1])
