"""Rotation forest (Rodríguez, Kuncheva & Alonso 2006): :class:`RotationForest`.

Each tree gets its own rotation of the feature space and is an ordinary
axis-aligned tree (this package's grower with
:class:`~facesegment.forest.families.AxisSplitter`) grown on the rotated features:

1. the tree draws its samples (by default all of them, ``bootstrap=False``,
   as in the paper: the diversity comes from the rotations);
2. its features (all p, or ``max_rotated_features`` of them) are split into
   disjoint subsets of M = ``n_features_per_subset`` features: random
   subsets (``subsets="random"``, the paper) or blocks of M consecutive
   features (``subsets="consecutive"``: with M = 3 on RGB windows, the three
   channels of one pixel, i.e. a colour rotation per pixel);
3. for each subset, a non-empty random subset of the classes is chosen (each
   class with probability 1/2), a bootstrap sample of ``pca_sample_fraction``
   (75 %) of the tree's samples of those classes is drawn, and PCA on the
   subset's features keeps **all** M components (eigenvectors of the
   covariance, by decreasing variance, each signed so that its largest
   coefficient is positive);
4. the components form the block-diagonal rotation R (p x r), and the tree
   is grown with axis splits on ``Z = X R`` (the r rotated features; the
   others are not used by this tree).

Storage: a split ``z_k <= t`` on rotated feature k is a *sparse* oblique
node on raw features, ``R[:, k] @ x <= t`` with R's at most M non-zero
entries of column k stored as (index, float32 weight) pairs (no centring is
applied, so there is nothing to fold into the threshold); prediction, the
model format and the dense kernels read raw inputs.  A component of a
one-feature subset (weight 1) is stored as an axis node ``x[f] <= t``.  Each
oblique node has its own row (the fast dense-inference kernels keep one
threshold per row).

Cost.  A node's row costs M (index, weight) pairs (18 bytes for M = 3 on a
window's 2,883 values), and inference gathers M values per oblique node visited (the
fast dense-inference kernels read them as bytes from the image), so a rotation
forest over windows is as cheap to apply as a two-probe forest.  Training
holds Z, ``4 m r`` bytes (m samples of the tree) per tree in flight: keep r
small for wide inputs (``max_rotated_features``, e.g. ``"sqrt"``, ``"p^0.7"``
or a count) or the tree's samples few (``max_samples``).  A rotated value is
summed in float32 in the order of its subset, in training (``rotate_rows``)
and at inference alike, so no sample changes side.

Parameters
----------
n_estimators : int, default 16
n_features_per_subset : int, default 3
    M, features per rotated subset (1: no rotation, a random forest on the
    chosen features).
max_rotated_features : int, float, str or None, default None
    r, the features each tree rotates and uses: None (all p, the paper), an
    int, a fraction of p, "sqrt", "log2" or "p^E" (as ``max_features``).
subsets : {"random", "consecutive"}, default "random"
    Random disjoint subsets, or random blocks of M consecutive features.
pca_sample_fraction : float in (0, 1], default 0.75
    Bootstrap sample per subset's PCA, as a fraction of the tree's samples
    of the chosen classes.
max_features : int, float, str, default "all"
    Rotated features tried at each node of the base tree (of the r): "all"
    as the paper's C4.5 trees, or "sqrt", "p^E", ... (of r).
max_depth, min_samples_split, min_samples_leaf, max_samples
    The base tree's growing rules and samples per tree, as for the other forests.
bootstrap : bool, default False
    Each tree's samples drawn with replacement (True) or the whole pool (False).
oob_score : bool or callable, default False
    Out-of-bag estimate (``oob_score_``, ``oob_decision_function_``), as for
    :class:`AxisAlignedForest` (docs/forests-cart.md, "CART options"); needs
    ``bootstrap=True``.
class_weight : None, "balanced", "balanced_subsample" or dict, default None
    Weights per class multiplying ``sample_weight``: draw probabilities, so
    they need ``bootstrap=True``.
warm_start : bool, default False
    A larger ``n_estimators`` at the next ``fit`` adds trees, the old ones kept.
random_state, n_jobs, scheduler, verbose
    As for the other forests (identical trees whatever ``n_jobs``).

Features of very different scales should be standardised first (e.g. a
``StandardScaler`` in a ``Pipeline``): the PCA works on raw covariances.

Missing values (NaN in float ``X``): each subset's PCA is fitted on the
sampled rows that have all of its features (the identity rotation when none
has); a rotated value is missing when a feature of its subset is, and the
tree on the rotated features learns a side for missing values at each split
(scikit-learn's CART rules, :class:`facesegment.forest.families.CartSplitter`),
so a sample missing a feature that a split's row reads takes that side.
"""

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._grow import RowDraw
from ._missing import has_nan
from ._rotation_kernels import rotate_rows, subset_covariance
from .base import BaseForest
from .families import AxisSplitter, CartSplitter, Splitter
from .params import (COMMON_CONSTRAINTS, FOREST_OPTIONS_CONSTRAINTS, MAX_COUNT, Integer,
                     MaxFeatures, Options, Real, resolve_max_features)


def draw_subsets(rng, p, r, size, mode):
    """The subsets of one tree: int64 (K, size), -1 padded (the last may be smaller).

    Parameters
    ----------
    rng : numpy.random.Generator
        The tree's generator.
    p : int
        Number of features.
    r : int
        Number of features rotated.
    size : int
        Features per subset.
    mode : {"random", "consecutive"}
        ``"random"``: r features drawn without replacement, split in draw order
        into subsets of ``size``; ``"consecutive"``: ``ceil(r / size)`` random
        blocks ``[b size, (b + 1) size)`` of the p features (clipped at p), in
        increasing order.

    Returns
    -------
    int64 ndarray of shape (K, size)
        Each subset's features, -1 padded.
    """
    if mode == "consecutive":
        n_blocks = -(-p // size)
        blocks = np.sort(rng.permutation(n_blocks)[:max(1, -(-r // size))])
        feats = blocks[:, None] * size + np.arange(size)[None, :]
        return np.where(feats < p, feats, -1).astype(np.int64)
    chosen = rng.permutation(p)[:r]
    k = -(-r // size)
    out = np.full(k * size, -1, dtype=np.int64)
    out[:r] = chosen
    return out.reshape(k, size)


def pca_components(cov):
    """All principal axes of a covariance, by decreasing variance.

    Parameters
    ----------
    cov : float64 ndarray of shape (k, k)
        A symmetric covariance matrix.

    Returns
    -------
    float64 ndarray of shape (k, k)
        The axes as columns, by decreasing variance (ties in ``eigh``'s order),
        each signed so that its largest-magnitude coefficient is positive.
    """
    vals, vecs = np.linalg.eigh(cov)
    vecs = vecs[:, np.argsort(-vals, kind="stable")]
    top = np.argmax(np.abs(vecs), axis=0)
    sign = np.where(vecs[top, np.arange(vecs.shape[1])] < 0, -1.0, 1.0)
    return vecs * sign


def _class_rows(y_tree, n_classes):
    """Positions of each class's samples among the tree's samples."""
    order = np.argsort(y_tree, kind="stable")
    bounds = np.searchsorted(y_tree[order], np.arange(n_classes + 1))
    return [order[bounds[c]:bounds[c + 1]] for c in range(n_classes)]


def _pca_sample(rng, X, idx, by_class, feats, fraction):
    """Rows of one subset's PCA: a bootstrap sample of ``fraction`` of the tree's
    samples of a non-empty random subset of the classes present (an empty array
    when none of them has all of ``feats``: rows missing one of them are left out).

    The candidates are ordered by class, then by their values of ``feats``
    before the draw, so the sample (hence the rotation) does not depend on the
    order of the rows of X: repeated rows and integer sample weights give the
    same forest.
    """
    present = [c for c, rows in enumerate(by_class) if rows.size]
    keep = rng.random(len(present)) < 0.5
    if not keep.any():
        keep[int(rng.integers(0, len(present)))] = True
    rows = []
    for c, k in zip(present, keep):
        if k:
            r = idx[by_class[c]]
            vals = X[r[:, None], feats[None, :]]
            if vals.dtype.kind == "f":
                complete = ~np.isnan(vals).any(axis=1)
                r, vals = r[complete], vals[complete]
            rows.append(r[np.lexsort(vals.T[::-1])])
    rows = np.concatenate(rows)
    if rows.shape[0] == 0:
        return rows
    size = max(1, int(round(fraction * rows.shape[0])))
    return rows[rng.integers(0, rows.shape[0], size=size)]


def tree_rotation(X, y, idx, n_classes, splitter, rng):
    """One tree's rotation: each subset's PCA axes as rotated features.

    Rotated feature k is ``sum_j w[k, j] x[feats[k, j]]``; a subset whose PCA
    sample is empty keeps its features (the identity).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The training samples.
    y : int ndarray of shape (n_samples,)
        The encoded labels.
    idx : int64 ndarray
        The tree's rows.
    n_classes : int
        Number of classes.
    splitter : RotationSplitter
        ``n_rotated``, ``subset_size``, ``subsets`` and ``pca_fraction`` are
        read.
    rng : numpy.random.Generator
        Draws the subsets and the PCA samples.

    Returns
    -------
    feats : int64 ndarray of shape (r, M)
        Each rotated feature's raw features, -1 padded (``M = subset_size``).
    w : float32 ndarray of shape (r, M)
        Their weights.
    """
    p = X.shape[1]
    size = splitter.subset_size
    groups = draw_subsets(rng, p, splitter.n_rotated, size, splitter.subsets)
    by_class = _class_rows(y[idx], n_classes)
    feats, weights = [], []
    for g in groups:
        g = g[g >= 0]
        rows = _pca_sample(rng, X, idx, by_class, g, splitter.pca_fraction)
        comp = (pca_components(subset_covariance(X, rows, g)) if rows.shape[0]
                else np.eye(g.shape[0]))
        for j in range(g.shape[0]):
            f = np.full(size, -1, dtype=np.int64)
            w = np.zeros(size, dtype=np.float32)
            f[:g.shape[0]] = g
            w[:g.shape[0]] = comp[:, j]
            feats.append(f)
            weights.append(w)
    return np.array(feats, dtype=np.int64), np.array(weights, dtype=np.float32)


def to_raw_features(tree, feats, w, p):
    """Rewrite a tree grown on rotated features as splits on raw features (in place).

    A split on rotated feature k becomes a sparse oblique node whose row is
    k's column of the rotation: its (at most M) raw features and weights, in
    the order of ``feats[k]`` (one row per node: the fast dense-inference
    kernels keep a threshold per row); or an axis node ``x[f] <= t`` when k
    is a one-feature subset with weight 1.  Thresholds are unchanged.  A
    sparse row is evaluated as ``sum_j w_j * float32(x[f_j])`` in float32, in
    stored order (:func:`facesegment.forest._sparse.sparse_value`): the very
    arithmetic of :func:`rotate_rows`, so every split sends each value where
    training did.  The dense ``weights`` table stays empty (``(0, p)``).

    Parameters
    ----------
    tree : dict
        The tree's arrays; ``feature`` rewritten and ``weights``, ``sparse``,
        ``sparse_ptr``, ``sparse_index`` and ``sparse_weight`` set in place.
    feats : int64 ndarray of shape (r, M)
        The rotation's raw features (:func:`tree_rotation`).
    w : float32 ndarray of shape (r, M)
        Their weights.
    p : int
        Number of raw features.

    Returns
    -------
    dict
        ``tree``.
    """
    internal = np.flatnonzero(tree["left"] >= 0)
    axis = (feats[:, 1:] < 0).all(axis=1) & (w[:, 0] == 1.0)
    sparse = np.full(tree["left"].shape[0], -1, dtype=np.int32)
    index, weight = [], []
    for node in internal:
        k = int(tree["feature"][node])
        if axis[k]:
            tree["feature"][node] = feats[k, 0]
            continue
        used = feats[k] >= 0
        sparse[node] = len(index)
        index.append(feats[k, used].astype(np.int32))
        weight.append(w[k, used].astype(np.float32))
        tree["feature"][node] = -1
    tree["weights"] = np.zeros((0, p), dtype=np.float32)
    tree["sparse"] = sparse
    tree["sparse_ptr"] = np.cumsum([0] + [a.shape[0] for a in index]).astype(np.int64)
    tree["sparse_index"] = np.concatenate(index) if index else np.zeros(0, np.int32)
    tree["sparse_weight"] = np.concatenate(weight) if weight else np.zeros(0, np.float32)
    return tree


@dataclass(frozen=True, eq=False)
class RotationSplitter(Splitter):
    """Rotation trees: axis-aligned splits (:class:`AxisSplitter`, or
    :class:`CartSplitter` with the entropy where the rotated rows hold NaN) on
    a per-tree PCA rotation of ``n_rotated`` features in subsets of
    ``subset_size`` (``subsets``: "random" or "consecutive"; each PCA fitted
    on ``pca_fraction`` of the tree's samples), ``max_features`` rotated
    features tried per node.

    In :func:`facesegment.forest._grow.grow_tree` the tree's generator draws
    its samples, then (:meth:`transform`) the subsets and the PCA samples,
    then the seed of the generator the nodes are grown with; :meth:`untransform`
    stores the splits on raw features (:func:`to_raw_features`).
    """

    name: ClassVar[str] = "rotation"
    n_rotated: int = 1
    subset_size: int = 3
    subsets: str = "random"
    pca_fraction: float = 0.75
    max_features: int = 1

    def transform(self, X, y, n_classes, params, idx, rng):
        """The rotated rows the nodes are grown on, and the inner splitter's parameters.

        Draws the subsets and PCA samples from ``rng``, then the seed of the
        generator the nodes are grown with.

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
        idx : int64 ndarray of shape (m,)
            The tree's rows.
        rng : numpy.random.Generator
            The tree's generator.

        Returns
        -------
        tuple
            ``(Z, y, idx, rng, params, state)``: the rotated rows (float32
            (m, r)), their labels, ``0..m-1``, the nodes' generator, the inner
            parameters (an :class:`AxisSplitter`, or a :class:`CartSplitter` with
            the entropy when ``Z`` holds NaN; every row drawn once) and the state
            :meth:`untransform` needs.
        """
        t0 = time.perf_counter()
        feats, w = tree_rotation(X, y, idx, n_classes, self, rng)
        Z = rotate_rows(X, idx, feats, w)
        missing = has_nan(Z)
        inner = (CartSplitter(max_features=self.max_features, criterion="entropy")
                 if missing else AxisSplitter(max_features=self.max_features))
        m = idx.shape[0]
        inner_params = params.replace(splitter=inner, draw=RowDraw(m, False),
                                      missing=missing)
        rng = np.random.default_rng(int(rng.integers(0, 2**31 - 1)))
        state = (feats, w, X.shape[1], time.perf_counter() - t0)
        return (Z, np.ascontiguousarray(y[idx]), np.arange(m, dtype=np.int64), rng,
                inner_params, state)

    def untransform(self, tree, state):
        """The tree's splits stored on raw features (:func:`to_raw_features`).

        Parameters
        ----------
        tree : dict
            The tree grown on the rotated features.
        state : tuple
            ``(feats, w, p, t_rotation)`` from :meth:`transform`.

        Returns
        -------
        dict
            The tree on raw features, its ``stats`` given ``t_rotation``,
            ``n_oblique_nodes`` and ``n_rotated_used``.
        """
        feats, w, p, t_rot = state
        n_used = int(np.unique(tree["feature"][tree["left"] >= 0]).shape[0])
        tree = to_raw_features(tree, feats, w, p)
        tree["stats"].update(t_rotation=t_rot,
                             n_oblique_nodes=int(np.count_nonzero(tree["sparse"] >= 0)),
                             n_rotated_used=n_used)
        return tree


class RotationForest(BaseForest):
    """Rotation forest: axis-aligned trees on per-tree PCA rotations of feature subsets.

    See the module docstring (:mod:`facesegment.forest.rotation`) for the
    algorithm, the parameters, the storage as sparse oblique nodes on raw
    features (at most M entries per node).

    Examples
    --------
    >>> import numpy as np
    >>> from facesegment.forest import RotationForest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 6)).astype(np.float32)
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)       # an oblique boundary
    >>> clf = RotationForest(n_estimators=8, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) == 1.0), clf.n_features_in_
    (True, 6)
    """

    _split_family = RotationSplitter
    _missing_values = True

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "n_features_per_subset": Integer(1, MAX_COUNT).cli(
            "features per PCA subset", flag="subset-size", metavar="M"),
        "max_rotated_features": MaxFeatures().cli(
            "rotate only R random features per tree (by default: all; each rotated feature "
            "a split uses stores 4 x n_features bytes)", flag="rotated-features", metavar="R"),
        "subsets": Options("random", "consecutive").cli(
            "random feature subsets, or consecutive ones (with M=3 on RGB windows: the 3 "
            "channels of a pixel)"),
        "pca_sample_fraction": Real(0, 1, low_open=True).cli(
            "fraction of the tree's samples each subset's PCA is fitted on", metavar="F"),
        "max_features": MaxFeatures().cli(
            "rotated features tried per node (as --max-features of --kind axis)", metavar="Q"),
        **FOREST_OPTIONS_CONSTRAINTS,
    }

    def __init__(self, n_estimators=16, *, n_features_per_subset=3,
                 max_rotated_features=None, subsets="random", pca_sample_fraction=0.75,
                 max_features="all", max_depth=None, min_samples_split=2,
                 min_samples_leaf=1, max_samples=None, bootstrap=False, oob_score=False,
                 class_weight=None, warm_start=False, random_state=None, n_jobs=None,
                 scheduler=None, verbose=0):
        self.n_estimators = n_estimators
        self.oob_score = oob_score
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.n_features_per_subset = n_features_per_subset
        self.max_rotated_features = max_rotated_features
        self.subsets = subsets
        self.pca_sample_fraction = pca_sample_fraction
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_samples = max_samples
        self.bootstrap = bootstrap
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.scheduler = scheduler
        self.verbose = verbose

    def _splitter(self, params, X, y_enc, sample_weight):
        p = X.shape[1]
        size = min(params["n_features_per_subset"], p)
        r = resolve_max_features(params["max_rotated_features"], p)
        if params["subsets"] == "consecutive":  # whole blocks: the features actually used
            r = min(p, -(-r // size) * size)
        return RotationSplitter(n_rotated=r, subset_size=size, subsets=params["subsets"],
                                pca_fraction=params["pca_sample_fraction"],
                                max_features=resolve_max_features(params["max_features"], r))


__all__ = ["RotationForest", "RotationSplitter", "tree_rotation", "draw_subsets",
           "pca_components", "to_raw_features"]
