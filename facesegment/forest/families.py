"""Split families: how the nodes of a tree are split (scikit-learn's splitter style).

A split family is an object its estimator owns (the class attribute
``_split_family``); the estimator puts it in the grower's spec
(``spec["split_family"]``) and the grower calls it, never a family name.
The breadth-first grower (:func:`facesegment.forest._grow.grow_tree`) asks
the family for each node's split:

* :meth:`SplitFamily.start` sets up a tree (after its samples are drawn):
  attributes of the :class:`~facesegment.forest._grow.TreeGrowth` it is
  given (``X``, ``y``, ``n_classes``, ``spec``, ``rng``, ``perm``,
  ``min_leaf``, ``weights``, ``stats``, ``missing``);
* :meth:`SplitFamily.find` returns the node's best :class:`Split` (drawing
  what it needs from ``tree.rng``, in node order: the draws decide the tree);
* :meth:`SplitFamily.partition` sends the node's samples left or right;
* :meth:`SplitFamily.finish` adds the family's entries to the tree's dict.

A family that builds its trees another way (ferns, rotation trees,
non-greedy trees) overrides :meth:`SplitFamily.grow` instead; every tree is
then grown by ``spec["split_family"].grow(X, y, n_classes, spec, seed)``.
The split kernels stay in their modules (:mod:`.axis`, :mod:`.twoprobe`,
:mod:`._extra_kernels`, :mod:`.co2`); the families here only call them.
"""

import time
from typing import NamedTuple

import numpy as np

from ._cart_kernels import grow_cart
from ._criteria import sorted_gain_of_values
from ._extra_kernels import random_axis_split, random_axis_split_missing
from ._grow import _dense_dtype, _kernel_float, draw_features, grow_tree
from ._missing_splits import (best_values_split, imputed_node, pair_split_missing,
                              partition_missing, split_values)
from ._predict import oblique_values, partition, partition_sparse
from ._sparse import quantise
from .axis import best_axis_split, best_axis_split_cart
from .co2 import co2_split, new_co2_stats
from .twoprobe import best_pair_split, sample_pairs


class Split(NamedTuple):
    """One node's split, as :meth:`SplitFamily.find` returns it.

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


class SplitFamily:
    """Base of the split families; subclasses define :meth:`find` (or :meth:`grow`)."""

    #: Display name (progress lines: "axis forest").
    name = "tree"

    def grow(self, X, y, n_classes, spec, seed):
        """Grow one tree: the dict of :func:`facesegment.forest._grow.grow_tree`."""
        return grow_tree(X, y, n_classes, spec, seed)

    def start(self, tree):
        """Per-tree set-up (no random draws: the tree's generator is the nodes')."""

    def find(self, tree, seg):
        """The best :class:`Split` of the node holding the samples ``seg`` (int64)."""
        raise NotImplementedError(f"{type(self).__name__} defines no find(tree, seg)")

    def partition(self, tree, seg, buf, split):
        """Partition ``seg`` in place (left first, stably; ``buf`` is scratch):
        ``(number going left, missing_left)``; with NaN in X the missing values
        go to ``split.missing_left`` (:func:`~facesegment.forest._missing_splits.
        partition_missing`)."""
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
        """Add the family's entries to the tree's dict ``out`` (and ``out["stats"]``)."""

    def __repr__(self):
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


class AxisSplit(SplitFamily):
    """``x[f] <= t``: the best threshold of ``max_features`` random features
    (256-bin histograms on uint8); with ``criterion="gini"`` or NaN in X, the
    whole tree is grown by scikit-learn's CART rules in one kernel
    (:func:`facesegment.forest._cart_kernels.grow_cart`: features in random
    order, NaN sent to the side that gains most)."""

    name = "axis"

    def grow(self, X, y, n_classes, spec, seed):
        if spec.get("criterion", "entropy") != "entropy" or spec.get("missing", False):
            return grow_cart(X, y, n_classes, spec, seed)
        return grow_tree(X, y, n_classes, spec, seed)

    def find(self, tree, seg):
        f, thr, gain, _ = _best_univariate(tree, seg)
        return Split(f, -1, thr, gain)


def _best_univariate(tree, seg):
    """The best ``x[f] <= t`` among ``max_features`` features drawn from ``tree.rng``:
    ``(feature, threshold, gain, missing_left)`` (with NaN in X by the CART search
    with the entropy, :func:`facesegment.forest.axis.best_axis_split_cart`)."""
    feats = draw_features(tree.rng, tree.perm, tree.spec["max_features"])
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
    fa, fb = sample_pairs(tree.rng, tree.p, tree.spec["n_pairs"])
    if tree.missing:
        k, t, g, ml = pair_split_missing(tree.X, tree.y, seg, fa, fb, tree.n_classes,
                                         max(tree.min_leaf, 1))
        return ((int(fa[k]), int(fb[k]), float(t), float(g), int(ml)) if k >= 0
                else (-1, -1, 0.0, -1.0, -1))
    return best_pair_split(tree.X, tree.y, seg, fa, fb, tree.n_classes, tree.min_leaf) + (-1,)


class TwoProbeSplit(SplitFamily):
    """``x[a] - x[b] <= t``: the best of ``n_pairs`` random feature pairs."""

    name = "two-probe"

    def find(self, tree, seg):
        f, f2, thr, gain, ml = _best_pair(tree, seg)
        return Split(f, f2, thr, gain, missing_left=ml)


class ExtraSplit(SplitFamily):
    """Extremely randomized cuts: the best of ``max_features`` random cuts
    (:func:`facesegment.forest._extra_kernels.random_axis_split`)."""

    name = "extra"

    def find(self, tree, seg):
        args = (tree.X, tree.y, seg, tree.perm, tree.rng, tree.spec["max_features"],
                tree.n_classes, tree.min_leaf)
        if tree.missing:
            f, thr, gain, ml = random_axis_split_missing(*args)
            return Split(f, -1, thr, gain, missing_left=ml)
        f, thr, gain = random_axis_split(*args)
        return Split(f, -1, thr, gain)


class CO2Split(SplitFamily):
    """CO2 oblique splits ``w . x <= t`` (dense or sparse rows), optimised from
    the best univariate split (or, with ``co2_init="best"``, the better of it
    and the best two-probe split) by :func:`facesegment.forest.co2.co2_split`;
    kept when they gain more."""

    name = "co2"

    def start(self, tree):
        tree.co2_stats = new_co2_stats()
        tree.w_dtype = np.dtype(_dense_dtype(tree.spec))

    def find(self, tree, seg):
        spec = tree.spec
        f, thr, gain, ml = _best_univariate(tree, seg)
        f2 = -1
        if spec.get("co2_init") == "best" and tree.p >= 2:
            t0 = time.perf_counter()
            # start from the better of the univariate and the two-probe split
            pa, pb, pthr, pgain, pml = _best_pair(tree, seg)
            if pa >= 0 and pgain > gain:
                f, f2, thr, gain, ml = pa, pb, pthr, pgain, pml
            tree.stats["t_init"] += time.perf_counter() - t0
        node_seed = int(tree.rng.integers(0, 2**31 - 1))
        if f < 0 or seg.shape[0] < spec["oblique_min_samples"]:
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
        spec, co2 = tree.spec, tree.spec["co2"]
        res = co2_split(tree.X, tree.y, seg, tree.n_classes, spec["mean"], spec["inv_std"],
                        f, thr, gain, co2["nu"], co2["eta"], co2["tau"], co2["n_passes"],
                        co2["batch_size"], co2["momentum"], node_seed,
                        min_samples_leaf=tree.min_leaf, init_feature2=f2,
                        stats=tree.co2_stats, max_nonzero=spec.get("max_nonzero"),
                        sparsity=spec.get("sparsity", "learned"),
                        sparse_dtype=spec.get("sparse_dtype", "float32"))
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
        out["stats"]["co2"] = tree.co2_stats


__all__ = ["Split", "SplitFamily", "AxisSplit", "TwoProbeSplit", "ExtraSplit", "CO2Split"]
