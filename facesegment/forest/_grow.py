"""Growing one tree breadth first (Python driver over Numba split kernels).

The tree's samples are one int64 index array; each node owns a contiguous
segment of it, partitioned in place (stably) when the node splits.  Nodes are
numbered in breadth-first order and all random draws come from one generator
per tree, consumed in that order, so truncating a tree at depth d gives exactly
the tree grown with ``max_depth=d`` from the same seed.

:func:`grow_tree` is the one greedy tree builder: it takes a
:class:`TreeParams` (the frozen settings of a fit) whose ``splitter`` (a
configured split family, :mod:`facesegment.forest.families`) finds, and
partitions on, each node's split, or grows the nodes in one Numba call
(CART, regression and density splitters, on the kernel-level node loop of
:mod:`facesegment.forest._node_loop`).  Ferns and non-greedy trees are
not grown node by node; their splitters' ``grow`` builds them
(:func:`facesegment.forest.ferns.grow_fern`,
:func:`facesegment.forest.nongreedy.grow_nongreedy_tree`).

:func:`fit_tree_task` is the top-level (picklable) task that the estimators hand
to :func:`facesegment.parallel.map_tasks`, locally or on a Dask cluster.
"""

import dataclasses
import time
from collections import deque
from dataclasses import dataclass

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

    Parameters
    ----------
    sample_weight : array-like of shape (n,), or None
        The row weights; None: unweighted.
    bootstrap : bool
        Rows drawn with replacement.

    Returns
    -------
    pool : ndarray int64 or None
        The rows (or row copies) drawn from; None: every row, uniformly.
    cdf : ndarray float64 or None
        With ``bootstrap``, the cumulative draw probabilities of ``pool``'s
        entries; None: uniform over the pool.

    Raises
    ------
    ValueError
        With ``bootstrap=False``, when a weight is not a whole number or the
        weights sum to more than :data:`MAX_REPEATED_ROWS`.
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


@dataclass(frozen=True, eq=False)
class RowDraw:
    """How every tree of a forest draws its rows (built once per ``fit``).

    Attributes
    ----------
    n_samples : int
        Rows drawn per tree.
    bootstrap : bool
        With replacement.
    pool, cdf : ndarray or None
        Weighted draws (:func:`sampling_pool`); None: uniform over all rows.
    strata : tuple or None
        ``class_weight="balanced_subsample"``: per-class ``(rows, cdf)``
        (:func:`draw_stratified`).
    """

    n_samples: int
    bootstrap: bool
    pool: object = None
    cdf: object = None
    strata: object = None

    def indices(self, rng, n):
        """The sorted int64 rows of one tree: its first use of ``rng`` (a fresh
        ``default_rng(seed)`` of the tree's seed), so the draw of a fitted tree
        is reproducible from its seed (out-of-bag estimates).

        Parameters
        ----------
        rng : numpy.random.Generator
            The tree's generator.
        n : int
            The rows of X.

        Returns
        -------
        ndarray int64
            The tree's rows, sorted (:func:`draw_stratified` with ``strata``,
            else :func:`draw_tree_samples`).
        """
        if self.strata is not None:
            return draw_stratified(rng, self.strata, self.n_samples)
        return draw_tree_samples(rng, n, self.n_samples, self.bootstrap, self.pool, self.cdf)


@dataclass(frozen=True, eq=False)
class TreeParams:
    """Everything a tree is grown with: one frozen object built once per ``fit``
    from the estimator's validated parameters, handed to :func:`grow_tree` (or
    to the splitter's own ``grow``) for every tree.

    Attributes
    ----------
    splitter : Splitter
        The split family, configured (:mod:`facesegment.forest.families`):
        carries its own settings (``max_features``, ``n_pairs``, CO2's...).
    draw : RowDraw
        How each tree draws its rows.
    max_depth : int
        -1: no limit.
    min_samples_split, min_samples_leaf : int
    missing : bool
        X holds NaN: splits learn a side for missing values.
    """

    splitter: object
    draw: RowDraw
    max_depth: int = -1
    min_samples_split: int = 2
    min_samples_leaf: int = 1
    missing: bool = False

    def replace(self, **changes):
        """A copy with ``changes`` (``dataclasses.replace``).

        Parameters
        ----------
        **changes
            New values of fields, by name.

        Returns
        -------
        TreeParams
            The copy.
        """
        return dataclasses.replace(self, **changes)


def draw_stratified(rng, strata, n_samples):
    """``n_samples`` rows drawn with replacement, ``n_samples // k`` (one more for
    the first ``n_samples % k``) from each of the ``k`` strata ``(rows, cdf)``:
    uniformly within a stratum, or by its ``cdf`` (weighted rows).  Sorted int64.

    Parameters
    ----------
    rng : numpy.random.Generator
        The tree's generator.
    strata : sequence of (ndarray, ndarray or None)
        Per stratum, its rows (int64 (m_c,)) and the cumulative draw
        probabilities of those rows (float64 (m_c,)), or None for uniform.
    n_samples : int
        The rows drawn in all.

    Returns
    -------
    ndarray int64, shape (n_samples,)
        The rows drawn, sorted.
    """
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

    Parameters
    ----------
    rng : numpy.random.Generator
        The tree's generator.
    n : int
        The rows of X.
    n_samples : int
        The rows to draw.
    bootstrap : bool
        With replacement.
    pool : ndarray int64, optional
        The rows (or row copies) drawn from (:func:`sampling_pool`); None:
        ``0..n-1``.
    cdf : ndarray float64, optional
        The cumulative draw probabilities of ``pool``'s entries (read only with
        ``bootstrap``); None: uniform.

    Returns
    -------
    ndarray int64
        The tree's rows, sorted: ``n_samples`` of them, or, without
        replacement when ``n_samples`` is at least the rows (or pool entries)
        available, all of them.
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

    Parameters
    ----------
    perm : ndarray int64, shape (p,)
        A permutation of the features; permuted in place.
    u : ndarray float64, shape (q,)
        Uniform draws in [0, 1), ``q <= p``: ``u[j]`` picks the entry swapped
        into position ``j``.

    Returns
    -------
    ndarray int64, shape (q,)
        ``perm[:q]``, sorted (a new array).
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
    """``q`` distinct features drawn with ``rng`` (sorted int64; all when ``q >= p``).

    Parameters
    ----------
    rng : numpy.random.Generator
        The tree's generator; ``q`` uniforms are drawn when ``q < p``, none
        otherwise.
    perm : ndarray int64, shape (p,)
        The tree's feature permutation; permuted in place by
        :func:`partial_shuffle` when ``q < p``.
    q : int
        The features wanted.

    Returns
    -------
    ndarray int64, shape (min(q, p),)
        The features, sorted.
    """
    if q >= perm.shape[0]:
        return np.arange(perm.shape[0], dtype=np.int64)
    return partial_shuffle(perm, rng.random(q))


class TreeGrowth:
    """What a splitter sees of the tree being grown (see
    :mod:`facesegment.forest.families`): ``X``, ``y``, ``n_classes``,
    ``params`` (the :class:`TreeParams`), ``splitter`` (the configured split
    family), ``rng`` (the tree's generator), ``p``, ``min_leaf``, ``perm`` (a
    feature permutation reused by every draw), ``weights`` (the dense oblique
    rows so far; a split's ``oblique`` indexes it), ``empty_w``, ``stats`` and
    ``missing`` (NaN-aware partitions, ``missing_left`` stored).  A splitter
    keeps its own per-tree state as further attributes."""

    def __init__(self, X, y, n_classes, params, rng):
        self.X, self.y, self.n_classes, self.params, self.rng = X, y, n_classes, params, rng
        self.splitter = params.splitter
        self.p = X.shape[1]
        self.min_leaf = params.min_samples_leaf
        self.perm = np.arange(self.p, dtype=np.int64)
        self.weights = []
        self.empty_w = np.zeros((1, self.p), dtype=np.float32)
        self.stats = {"t_split": 0.0, "t_init": 0.0, "t_oblique": 0.0, "n_co2_calls": 0,
                      "n_oblique": 0}
        self.missing = bool(params.missing)


class _Nodes:
    """The node lists of a tree being grown (breadth first)."""

    def __init__(self, y, idx, n_classes):
        self.y, self.idx, self.n_classes = y, idx, n_classes
        self.left, self.right, self.feature, self.feature2 = [], [], [], []
        self.oblique, self.threshold, self.value, self.depth = [], [], [], []
        self.n_samp, self.sparse, self.sp_index, self.sp_weight = [], [], [], []
        self.miss_left = []

    def new(self, start, end, d):
        """Append a leaf holding the rows ``idx[start:end]`` at depth ``d``.

        Parameters
        ----------
        start, end : int
            The node's segment of ``idx``.
        d : int
            The node's depth.

        Returns
        -------
        node : int
            The new node's index.
        counts : ndarray int64, shape (n_classes,)
            Its class counts, also stored as its value.
        """
        counts = class_counts(self.y, self.idx[start:end], self.n_classes)
        for lst, v in ((self.left, -1), (self.right, -1), (self.feature, -1),
                       (self.feature2, -1), (self.oblique, -1), (self.sparse, -1),
                       (self.miss_left, 0), (self.threshold, 0.0), (self.value, counts),
                       (self.depth, d), (self.n_samp, end - start)):
            lst.append(v)
        return len(self.left) - 1, counts

    def set_split(self, node, split):
        """Record ``split``'s feature, second feature, oblique row, sparse row
        (appended to the sparse lists) and threshold at ``node``.

        Parameters
        ----------
        node : int
            The node split.
        split : facesegment.forest.families.Split
            Its split (``missing_left`` and the children are set by the caller).
        """
        self.feature[node] = split.feature
        self.feature2[node] = split.feature2
        self.oblique[node] = split.oblique
        if split.sparse is not None:
            self.sparse[node] = len(self.sp_index)
            self.sp_index.append(split.sparse[0])
            self.sp_weight.append(split.sparse[1])
        self.threshold[node] = split.threshold


def grow_tree(X, y, n_classes, params, seed):
    """Grow one tree: the one greedy builder of every split family but ferns and
    non-greedy trees.

    The tree's generator (``default_rng(seed)``) draws the rows first
    (``params.draw``); then the splitter's hooks run in this order:

    1. ``transform(X, y, n_classes, params, idx, rng)``: the data the nodes
       are grown on (rotation trees: the rotated rows, a fresh generator and
       an inner axis splitter); the identity by default;
    2. ``start(tree)``: per-tree set-up (no random draws);
    3. ``build_nodes(tree, idx)``: the nodes, breadth first.  By default the
       Python loop :func:`split_nodes` asks the splitter for each node's
       split (``find``) and partition (``partition``); splitters whose whole
       node loop runs in Numba (CART, regression, density: the loop of
       :mod:`facesegment.forest._node_loop`) override it;
    4. ``finish(tree, out)``, then ``untransform(out, state)``.

    Parameters
    ----------
    X : ndarray uint8 or float32, shape (n, p), C-contiguous
    y : ndarray, shape (n,)
        int32 classes (float64 targets for the regression splitter).
    n_classes : int
    params : TreeParams
    seed : int
        Seed of the tree's random generator.

    Returns
    -------
    dict
        The tree's arrays (node indices local to the tree: ``left``,
        ``right``, ``feature``, ``feature2``, ``oblique``, ``threshold``,
        ``value``, ``depth``, ``n_samples``, ``weights`` (n_oblique, p), the
        sparse rows ``sparse``, ``sparse_ptr``, ``sparse_index``,
        ``sparse_weight``, ``missing_left`` with NaN in X; the splitter may
        add its own) and ``stats``.
    """
    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    idx = params.draw.indices(rng, X.shape[0])
    outer = params.splitter
    X, y, idx, rng, params, state = outer.transform(X, y, n_classes, params, idx, rng)
    tree = TreeGrowth(X, y, n_classes, params, rng)
    splitter = params.splitter
    splitter.start(tree)
    out = splitter.build_nodes(tree, idx)
    splitter.finish(tree, out)
    out.setdefault("stats", tree.stats)
    out = outer.untransform(out, state)
    stats = out["stats"]
    stats["seconds"] = time.perf_counter() - t_start
    stats["n_nodes"] = int(out["left"].shape[0])
    stats["max_depth"] = int(out["depth"].max())
    return out


def split_nodes(tree, idx):
    """The Python node loop of :func:`grow_tree`: nodes split breadth first by
    ``tree.splitter.find`` / ``partition`` on the rows ``idx`` (int64); returns
    the tree's arrays (without ``stats``).

    A node stays a leaf at ``max_depth``, with fewer than ``min_samples_split``
    or ``2 min_samples_leaf`` rows, when it is pure, when the split found has
    no gain (or is none), or when the partition leaves fewer than
    ``min_samples_leaf`` rows on a side.

    Parameters
    ----------
    tree : TreeGrowth
        The tree being grown (its ``params``, ``splitter``, ``y``,
        ``n_classes``; ``stats["t_split"]`` accumulates the split search time).
    idx : ndarray int64, shape (m,)
        The tree's rows; each node's segment is partitioned in place by the
        splitter.

    Returns
    -------
    dict
        The tree's arrays, as :func:`grow_tree` describes them.
    """
    params, family, y, n_classes = tree.params, tree.splitter, tree.y, tree.n_classes
    max_depth, min_split = params.max_depth, params.min_samples_split
    min_leaf = params.min_samples_leaf
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
    return _tree_dict(nodes, tree, n_classes)


def _tree_dict(nodes, tree, n_classes):
    """The tree's arrays (see :func:`grow_tree`) from its node lists."""
    w_store = np.dtype(tree.splitter.dense_dtype)
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
                          np.zeros(0, np.dtype(tree.splitter.sparse_dtype))),
    }
    if tree.missing:
        out["missing_left"] = np.asarray(nodes.miss_left, dtype=np.int8)
    return out


def _kernel_float(stored):
    """float32 values of stored sparse weights (exact for float16 and int8)."""
    return np.ascontiguousarray(stored, dtype=np.float32)


def _frequencies(counts, n_classes):
    """float32 (n_nodes, n_classes) class frequencies from per-node counts."""
    c = np.asarray(counts, dtype=np.float64).reshape(-1, n_classes)
    return (c / np.maximum(c.sum(axis=1, keepdims=True), 1)).astype(np.float32)


def fit_tree_task(item, X, y, n_classes, params):
    """Top-level task: ``item = (tree_index, seed)``; returns the tree dict that
    ``params.splitter.grow`` returns (:func:`grow_tree`'s, unless the family
    grows its trees another way: ferns, non-greedy trees).

    Parameters
    ----------
    item : tuple
        ``(tree_index, seed)``; only the seed is used.
    X : ndarray uint8 or float32, shape (n, p)
        The data.
    y : ndarray, shape (n,)
        Classes (or targets).
    n_classes : int
        The classes.
    params : TreeParams
        The fit's settings.

    Returns
    -------
    dict
        The tree's arrays and ``stats``.
    """
    return params.splitter.grow(X, y, n_classes, params, item[1])
