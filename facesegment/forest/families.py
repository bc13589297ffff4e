"""Splitters: how the nodes of a tree are split (scikit-learn's splitter style).

A split family is a :class:`Splitter` subclass (a frozen dataclass whose
fields are its settings); its estimator names it (the class attribute
``_split_family``) and builds one configured instance per ``fit`` from its
validated parameters (``_splitter(params, X, y_enc, sample_weight)``; by
default :meth:`Splitter.from_params`), which travels in the fit's
:class:`~facesegment.forest._grow.TreeParams`.  The one greedy builder,
:func:`facesegment.forest._grow.grow_tree`, calls the splitter, never a
family name:

* :meth:`Splitter.transform` / :meth:`Splitter.untransform`: the data the
  nodes are grown on, and back (rotation trees; the identity by default);
* :meth:`Splitter.start` sets up a tree: attributes of the
  :class:`~facesegment.forest._grow.TreeGrowth` it is given (``X``, ``y``,
  ``n_classes``, ``params``, ``splitter``, ``rng``, ``perm``, ``min_leaf``,
  ``weights``, ``stats``, ``missing``);
* :meth:`Splitter.build_nodes` grows the nodes: by default the Python loop
  :func:`~facesegment.forest._grow.split_nodes`, which asks
  :meth:`Splitter.find` for each node's best :class:`Split` (drawing what it
  needs from ``tree.rng``, in node order: the draws decide the tree) and
  :meth:`Splitter.partition` to send the node's samples left or right;
  splitters whose node loop is one Numba kernel (:class:`CartSplitter`,
  regression, density) override it;
* :meth:`Splitter.finish` adds the splitter's entries to the tree's dict.

A family whose trees are not grown node by node (ferns, non-greedy trees)
overrides :meth:`Splitter.grow`.  Adding a family is one subclass plus one
row of :mod:`facesegment.forest.registry` naming it (``splitter=``);
docs/ARCHITECTURE.md has a worked example.  The split kernels stay in their
modules (:mod:`.axis`, :mod:`.twoprobe`, :mod:`._extra_kernels`, :mod:`.co2`,
:mod:`._cart_kernels`); the splitters here only call them.
"""

import dataclasses
import time
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from ._cart_kernels import cart_nodes
from ._criteria import sorted_gain_of_values
from ._extra_kernels import random_axis_split, random_axis_split_missing
from ._grow import _kernel_float, draw_features, grow_tree, split_nodes
from ._missing_splits import (best_values_split, imputed_node, pair_split_missing,
                              partition_missing, split_values)
from ._predict import oblique_values, partition, partition_sparse
from ._ranks import sort_inputs
from ._sparse import quantise
from .axis import best_axis_split, best_axis_split_cart
from .co2 import co2_split, new_co2_stats
from .params import resolve_max_features
from .twoprobe import best_pair_split, sample_pairs


class Split(NamedTuple):
    """One node's split, as :meth:`Splitter.find` returns it.

    ``feature`` (and ``feature2`` for ``x[a] - x[b] <= t``) with ``threshold``;
    ``oblique``: a row of ``tree.weights`` (dense ``w . x <= t``; -1: none);
    ``sparse``: ``(indices, stored weights)`` of a sparse oblique row, or
    None; ``missing_left``: where NaN goes (1 left, 0 right, -1 not decided).
    The node stays a leaf when ``gain <= 0`` or no split is given.
    """

    feature: int = -1
    feature2: int = -1
    threshold: float = 0.0
    gain: float = 0.0
    oblique: int = -1
    sparse: tuple = None
    missing_left: int = -1


@dataclass(frozen=True, eq=False)
class Splitter:
    """Base of the split families; subclasses define :meth:`find` (or override
    :meth:`build_nodes` or :meth:`grow`).  Fields of a subclass (a frozen
    dataclass) are its settings."""

    #: Display name (progress lines: "axis forest").
    name: ClassVar[str] = "tree"

    @classmethod
    def from_params(cls, params, X):
        """The splitter of a fit, each field taken from the estimator parameters of the same name.

        Parameters
        ----------
        params : dict
            The validated estimator parameters; fields without a parameter of
            their name keep their defaults.
        X : ndarray of shape (n_samples, n_features)
            The training samples (``max_features`` is resolved to a count of its
            features).

        Returns
        -------
        Splitter
            An instance of ``cls``.
        """
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name == "max_features":
                kw[f.name] = resolve_max_features(params["max_features"], X.shape[1])
            elif f.name in params:
                kw[f.name] = params[f.name]
        return cls(**kw)

    @property
    def dense_dtype(self):
        """Storage of the dense oblique rows (``weights``)."""
        return "float32"

    @property
    def sparse_dtype(self):
        """Storage of the sparse rows' weights."""
        return "float32"

    def grow(self, X, y, n_classes, params, seed):
        """Grow one tree: the dict of :func:`facesegment.forest._grow.grow_tree`.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            The training samples.
        y : int32 ndarray of shape (n_samples,)
            The encoded labels.
        n_classes : int
            Number of classes.
        params : TreeParams
            The fit's tree parameters.
        seed : int
            The tree's seed.

        Returns
        -------
        dict
            The tree's arrays (local node indices) and its ``"stats"``.
        """
        return grow_tree(X, y, n_classes, params, seed)

    def transform(self, X, y, n_classes, params, idx, rng):
        """The data the nodes are grown on (the identity here).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            The training samples.
        y : int32 ndarray of shape (n_samples,)
            The encoded labels.
        n_classes : int
            Number of classes.
        params : TreeParams
            The fit's tree parameters.
        idx : int64 ndarray
            The tree's rows.
        rng : numpy.random.Generator
            The tree's generator.

        Returns
        -------
        tuple
            ``(X, y, idx, rng, params, state)``: the arguments unchanged and
            ``state`` None (what :meth:`untransform` receives).
        """
        return X, y, idx, rng, params, None

    def untransform(self, out, state):
        """The grown tree's dict back on the original features (the identity here).

        Parameters
        ----------
        out : dict
            The grown tree's arrays.
        state : object
            What :meth:`transform` returned as its ``state``.

        Returns
        -------
        dict
            ``out``.
        """
        return out

    def start(self, tree):
        """Per-tree set-up (no random draws: the tree's generator is the nodes').

        Does nothing here; subclasses add their per-tree attributes to ``tree``.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        """

    def build_nodes(self, tree, idx):
        """The tree's nodes on the rows ``idx``: the Python loop over :meth:`find`.

        The loop is :func:`facesegment.forest._grow.split_nodes`.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        idx : int64 ndarray
            The tree's rows (repeated once per draw with bootstrap).

        Returns
        -------
        dict
            The tree's arrays, local node indices.
        """
        return split_nodes(tree, idx)

    def find(self, tree, seg):
        """The best :class:`Split` of the node holding the samples ``seg``.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        seg : int64 ndarray of shape (m,)
            The node's samples.

        Returns
        -------
        Split
            The node's split (a leaf when its gain is not positive).

        Raises
        ------
        NotImplementedError
            Here: a subclass defines it (or overrides :meth:`build_nodes` or
            :meth:`grow`).
        """
        raise NotImplementedError(f"{type(self).__name__} defines no find(tree, seg)")

    def partition(self, tree, seg, buf, split):
        """Partition ``seg`` in place: left first, stably.

        With NaN in X the missing values go to ``split.missing_left``
        (:func:`~facesegment.forest._missing_splits.partition_missing`).

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        seg : int64 ndarray of shape (m,)
            The node's samples; reordered in place.
        buf : int64 ndarray of at least m entries
            Scratch.
        split : Split
            The node's split.

        Returns
        -------
        n_left : int
            The number going left.
        missing_left : int
            The side of missing values (``split.missing_left``, or the side chosen
            when it is -1 and X holds NaN).
        """
        if tree.missing:
            return partition_missing(tree, seg, buf, split)
        thr = np.float32(split.threshold)
        if split.sparse is not None:
            nl = partition_sparse(tree.X, seg, buf, split.sparse[0],
                                  _kernel_float(split.sparse[1]), thr)
            return nl, split.missing_left
        ob = split.oblique
        w_row = tree.weights[ob] if ob >= 0 else tree.empty_w[0]
        nl = partition(tree.X, seg, buf, split.feature, split.feature2, ob if ob < 0 else 0,
                       thr, w_row[None, :])
        return nl, split.missing_left

    def finish(self, tree, out):
        """Add the family's entries to the tree's dict ``out`` (and ``tree.stats``).

        Does nothing here.

        Parameters
        ----------
        tree : TreeGrowth
            The grown tree.
        out : dict
            The tree's arrays; entries added in place.
        """


@dataclass(frozen=True, eq=False)
class AxisSplitter(Splitter):
    """``x[f] <= t``: the best threshold (information gain) of ``max_features``
    random features (256-bin histograms on uint8)."""

    name: ClassVar[str] = "axis"
    max_features: int = 1

    def find(self, tree, seg):
        """The best ``x[f] <= t`` among ``max_features`` features drawn from ``tree.rng``.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        seg : int64 ndarray of shape (m,)
            The node's samples.

        Returns
        -------
        Split
            The split (``missing_left`` -1: the partition decides).
        """
        f, thr, gain, _ = _best_univariate(tree, seg)
        return Split(f, -1, thr, gain)


@dataclass(frozen=True, eq=False)
class CartSplitter(Splitter):
    """scikit-learn's CART rules (Gini index or entropy, NaN sent to the side that
    gains most, features in random order): the whole node loop in one Numba
    kernel (:func:`facesegment.forest._cart_kernels.cart_nodes`) on the
    tree's distinct rows and their copies."""

    name: ClassVar[str] = "axis"
    max_features: int = 1
    criterion: str = "gini"

    def build_nodes(self, tree, idx):
        """The kernel's tree; the tree's generator draws the kernel's seed.

        The kernel runs on the distinct rows of ``idx`` and their copies.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        idx : int64 ndarray
            The tree's rows (repeated once per draw with bootstrap).

        Returns
        -------
        dict
            The tree's arrays (local node indices; class frequencies as ``value``;
            empty oblique and sparse tables; ``missing_left`` when X holds NaN).
        """
        X, p = tree.X, tree.p
        rows, counts = np.unique(idx, return_counts=True)
        left, right, feature, thr, value, depth, n_samples, ml = cart_nodes(
            X, *sort_inputs(X), tree.y, rows.astype(np.int64), counts.astype(np.int64),
            tree.n_classes, self.max_features, tree.params.max_depth,
            tree.params.min_samples_split, tree.min_leaf, self.criterion == "gini",
            X.dtype == np.uint8, int(tree.rng.integers(0, 2**63 - 1)))
        k = left.shape[0]
        none = np.full(k, -1, np.int32)
        freq = (value / np.maximum(value.sum(axis=1, keepdims=True), 1)).astype(np.float32)
        out = {"left": left, "right": right, "feature": feature, "feature2": none,
               "oblique": none.copy(), "threshold": thr, "value": freq, "depth": depth,
               "n_samples": n_samples.astype(np.int32),
               "weights": np.zeros((0, p), np.float32), "sparse": none.copy(),
               "sparse_ptr": np.zeros(1, np.int64), "sparse_index": np.zeros(0, np.int32),
               "sparse_weight": np.zeros(0, np.float32)}
        if tree.missing:
            out["missing_left"] = ml
        return out


def _best_univariate(tree, seg):
    """The best ``x[f] <= t`` among ``max_features`` features drawn from ``tree.rng``:
    ``(feature, threshold, gain, missing_left)`` (with NaN in X by the CART search
    with the entropy, :func:`facesegment.forest.axis.best_axis_split_cart`)."""
    feats = draw_features(tree.rng, tree.perm, tree.splitter.max_features)
    t0 = time.perf_counter()
    if tree.missing:
        out = best_axis_split_cart(tree.X, tree.y, seg, feats, tree.n_classes, tree.min_leaf,
                                   "entropy")
    else:
        out = best_axis_split(tree.X, tree.y, seg, feats, tree.n_classes, tree.min_leaf) + (-1,)
    tree.stats["t_init"] += time.perf_counter() - t0
    return out


def _best_pair(tree, seg):
    """The best ``x[a] - x[b] <= t`` among ``n_pairs`` pairs drawn from ``tree.rng``:
    ``(a, b, threshold, gain, missing_left)``."""
    fa, fb = sample_pairs(tree.rng, tree.p, tree.splitter.n_pairs)
    if tree.missing:
        k, t, g, ml = pair_split_missing(tree.X, tree.y, seg, fa, fb, tree.n_classes,
                                         max(tree.min_leaf, 1))
        return ((int(fa[k]), int(fb[k]), float(t), float(g), int(ml)) if k >= 0
                else (-1, -1, 0.0, -1.0, -1))
    return best_pair_split(tree.X, tree.y, seg, fa, fb, tree.n_classes, tree.min_leaf) + (-1,)


@dataclass(frozen=True, eq=False)
class TwoProbeSplitter(Splitter):
    """``x[a] - x[b] <= t``: the best of ``n_pairs`` random feature pairs."""

    name: ClassVar[str] = "two-probe"
    n_pairs: int = 1

    def find(self, tree, seg):
        """The best ``x[a] - x[b] <= t`` among ``n_pairs`` pairs drawn from ``tree.rng``.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        seg : int64 ndarray of shape (m,)
            The node's samples.

        Returns
        -------
        Split
            The split, with its missing side when X holds NaN.
        """
        f, f2, thr, gain, ml = _best_pair(tree, seg)
        return Split(f, f2, thr, gain, missing_left=ml)


@dataclass(frozen=True, eq=False)
class ExtraSplitter(Splitter):
    """Extremely randomized cuts: the best of ``max_features`` random cuts
    (:func:`facesegment.forest._extra_kernels.random_axis_split`)."""

    name: ClassVar[str] = "extra"
    max_features: int = 1

    def find(self, tree, seg):
        """The best of ``max_features`` random cuts drawn from ``tree.rng``.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        seg : int64 ndarray of shape (m,)
            The node's samples.

        Returns
        -------
        Split
            The split, with its missing side when X holds NaN.
        """
        args = (tree.X, tree.y, seg, tree.perm, tree.rng, self.max_features,
                tree.n_classes, tree.min_leaf)
        if tree.missing:
            f, thr, gain, ml = random_axis_split_missing(*args)
            return Split(f, -1, thr, gain, missing_left=ml)
        f, thr, gain = random_axis_split(*args)
        return Split(f, -1, thr, gain)


@dataclass(frozen=True, eq=False)
class CO2Splitter(Splitter):
    """CO2 oblique splits ``w . x <= t`` (dense or sparse rows), optimised from
    the best univariate split among ``max_features`` features (or, with
    ``init="best"``, the better of it and the best two-probe split among
    ``n_pairs`` pairs) by :func:`facesegment.forest.co2.co2_split` on features
    normalised by ``mean`` and ``inv_std`` (nodes of at least
    ``oblique_min_samples`` samples; ``co2``: the optimiser's settings, a dict
    of ``nu``, ``eta``, ``tau``, ``n_passes``, ``batch_size``, ``momentum``);
    kept when they gain more.  ``max_nonzero``: sparse rows of at most k
    features (``sparsity``: "learned" or "prune"); ``weight_dtype``: storage of
    the rows."""

    name: ClassVar[str] = "co2"
    max_features: int = 1
    co2: dict = None
    oblique_min_samples: int = 100
    weight_dtype: str = "float32"
    init: str = "axis"
    n_pairs: int = 1
    max_nonzero: int = None
    sparsity: str = "learned"
    mean: np.ndarray = None
    inv_std: np.ndarray = None

    @property
    def dense_dtype(self):
        """``weight_dtype``, but float32 in a sparse forest whose rows are int8."""
        if self.weight_dtype == "int8" and self.max_nonzero is not None:
            return "float32"
        return self.weight_dtype

    @property
    def sparse_dtype(self):
        return self.weight_dtype if self.max_nonzero is not None else "float32"

    def start(self, tree):
        """Set up the tree's CO2 statistics and dense weight storage type.

        Adds ``tree.co2_stats`` and ``tree.w_dtype``.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        """
        tree.co2_stats = new_co2_stats()
        tree.w_dtype = np.dtype(self.dense_dtype)

    def find(self, tree, seg):
        """The node's univariate (or two-probe) split, optimised into an oblique one.

        The starting split draws from ``tree.rng``, then one node seed is drawn;
        nodes of fewer than ``oblique_min_samples`` samples keep the starting
        split, others keep the CO2 split when it gains more.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown.
        seg : int64 ndarray of shape (m,)
            The node's samples.

        Returns
        -------
        Split
            The split; an oblique one refers to the row it appended to
            ``tree.weights`` (or holds its sparse row).
        """
        f, thr, gain, ml = _best_univariate(tree, seg)
        f2 = -1
        if self.init == "best" and tree.p >= 2:
            t0 = time.perf_counter()
            # start from the better of the univariate and the two-probe split
            pa, pb, pthr, pgain, pml = _best_pair(tree, seg)
            if pa >= 0 and pgain > gain:
                f, f2, thr, gain, ml = pa, pb, pthr, pgain, pml
            tree.stats["t_init"] += time.perf_counter() - t0
        node_seed = int(tree.rng.integers(0, 2**31 - 1))
        if f < 0 or seg.shape[0] < self.oblique_min_samples:
            return Split(f, f2, thr, gain, missing_left=ml)
        t0 = time.perf_counter()
        if tree.missing:
            split = self._optimise_missing(tree, seg, Split(f, f2, thr, gain, missing_left=ml),
                                           node_seed)
        else:
            split = self._optimise(tree, seg, f, f2, thr, gain, node_seed)
        tree.stats["t_oblique"] += time.perf_counter() - t0
        return split

    def _optimise_missing(self, tree, seg, start, node_seed):
        """:meth:`_optimise` with NaN in X: optimised on the node's rows with their
        missing values imputed by the means (:func:`~facesegment.forest.
        _missing_splits.imputed_node`), then the threshold and the missing side
        refit on the true values (missing where a feature the row reads is) and
        the split kept when it still gains more than ``start``."""
        imputed = imputed_node(tree, seg)
        view, rows = imputed if imputed is not None else (tree, seg)
        split = self._optimise(view, rows, start.feature, start.feature2, start.threshold,
                               start.gain, node_seed)
        if split.oblique < 0 and split.sparse is None:
            return start
        thr, gain, ml = best_values_split(split_values(tree, seg, split), tree.y, seg,
                                          tree.n_classes, tree.min_leaf)
        if gain > start.gain:
            return split._replace(threshold=thr, gain=gain, missing_left=ml)
        if split.oblique >= 0:  # the row just added is not used
            tree.weights.pop()
        tree.stats["n_oblique"] -= 1
        return start

    def _optimise(self, tree, seg, f, f2, thr, gain, node_seed):
        co2 = self.co2
        res = co2_split(tree.X, tree.y, seg, tree.n_classes, self.mean, self.inv_std,
                        f, thr, gain, co2["nu"], co2["eta"], co2["tau"], co2["n_passes"],
                        co2["batch_size"], co2["momentum"], node_seed,
                        min_samples_leaf=tree.min_leaf, init_feature2=f2,
                        stats=tree.co2_stats, max_nonzero=self.max_nonzero,
                        sparsity=self.sparsity, sparse_dtype=self.sparse_dtype)
        tree.stats["n_co2_calls"] += 1
        if res is None:
            return Split(f, f2, thr, gain)
        if isinstance(res[0], tuple):  # a sparse row
            if res[2] > gain:
                tree.stats["n_oblique"] += 1
                return Split(threshold=res[1], gain=res[2], sparse=res[0])
            return Split(f, f2, thr, gain)
        w, thr_o, gain_o = res
        w = np.ascontiguousarray(w, dtype=np.float32)
        if tree.w_dtype != np.float32:  # round, then refit the threshold
            w = np.ascontiguousarray(quantise(w, tree.w_dtype.name)[1])
            thr_o, gain_o = sorted_gain_of_values(oblique_values(w, tree.X, seg), tree.y, seg,
                                                  tree.n_classes, tree.min_leaf)
        if gain_o > gain:
            ob = len(tree.weights)
            tree.weights.append(w)
            tree.stats["n_oblique"] += 1
            return Split(threshold=float(thr_o), gain=float(gain_o), oblique=ob)
        return Split(f, f2, thr, gain)

    def finish(self, tree, out):
        """Store the tree's CO2 statistics in ``tree.stats["co2"]``.

        Parameters
        ----------
        tree : TreeGrowth
            The grown tree.
        out : dict
            The tree's arrays (unchanged).
        """
        tree.stats["co2"] = tree.co2_stats


__all__ = ["Split", "Splitter", "AxisSplitter", "CartSplitter", "TwoProbeSplitter",
           "ExtraSplitter", "CO2Splitter"]
