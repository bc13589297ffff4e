"""Density forests (Criminisi, Shotton and Konukoglu): unsupervised trees of Gaussians.

:class:`DensityForest` follows scikit-learn's density estimators
(``KernelDensity``, ``GaussianMixture``): ``fit(X)``, ``score_samples(X)``
(log density), ``score(X)`` (total log-likelihood) and ``sample(n_samples,
random_state)``.

**Trees.**  Each tree splits its node's samples by ``x[f] <= t``, choosing,
among ``max_features`` random features and every cut between distinct values
(``n_thresholds=None``) or ``n_thresholds`` random cuts per feature, the one
that minimises the sample-weighted log-determinant of the children's Gaussian
covariances (the information gain of Gaussians, kernels in
:mod:`facesegment.forest._density_kernels`).  A node becomes a leaf at
``max_depth``, when it cannot leave ``min_samples_leaf`` rows on each side, or
when the best gain is not above ``min_gain``.

**Density.**  A tree's density is piecewise truncated Gaussian: a point ``x``
in the cell of leaf ``l`` has

    p_t(x) = pi_l N(x; mu_l, Sigma_l) / M_l,

``pi_l`` the leaf's share of the tree's training weight, ``(mu_l, Sigma_l)``
the weighted ML Gaussian of its samples (``reg_covar`` added to the
diagonal), and ``M_l`` that Gaussian's probability inside the cell (an
axis-aligned box, open where no split bounds it), so ``p_t`` integrates to 1.
``M_l`` is exact for ``covariance_type="diag"`` (a product of 1-D normal
CDFs) and for full covariances whose cell is bounded in at most one
coordinate; otherwise it is the Monte-Carlo share of ``n_mass_samples``
draws of the Gaussian that fall in the cell (standard error
``sqrt(M (1 - M) / n_mass_samples)``, draws from the tree's seed; a leaf
none of whose draws fall inside counts half a draw).  The forest's density
is the mean of its trees'.

**Sampling.**  Pick a tree uniformly, descend from the root to the left child
with probability ``|s_l| / (|s_l| + |s_r|)`` (training weights), draw from the
leaf's Gaussian until the draw falls in the leaf's cell.  After
``max_sample_tries`` rejected draws (a leaf whose Gaussian puts little mass in
its cell) the row is drawn coordinate by coordinate from the 1-D normals
``N(mu_j, Sigma_jj)`` truncated to the cell's interval (exact for diagonal
covariances; for full ones it ignores the correlations, inside the cell).

**Storage.**  The trees are :class:`~facesegment.forest._arrays.ForestArrays`
(axis-aligned nodes; ``value`` has one column, the node's share of its
tree's training weight); the leaf Gaussians and cells are the extra arrays
:data:`LEAF_ARRAY_NAMES` (``leaves_``), which model folders store beside the
forest.
"""

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..parallel import map_tasks
from ._arrays import ForestArrays
from ._density_kernels import (LOG_2PI, density_nodes, leaf_log_mass, sample_kernel,
                               score_kernel)
from ._grow import TreeParams, fit_tree_task
from .base import numba_threads, predict_threads, seeds_from
from .families import Splitter
from .params import (COMMON_CONSTRAINTS, Integer, MaxFeatures, Options, Real,
                     check_sample_weight, resolve_max_features, resolve_max_samples,
                     validate_params)

#: Arrays of ``leaves_`` (and of a model folder's ``leaves`` group).
LEAF_ARRAY_NAMES = ("node_leaf", "mean", "chol", "lower", "upper", "log_weight", "log_mass")


class DensityLeaves(NamedTuple):
    """The leaves of a fitted density forest (float64 unless said).

    Attributes
    ----------
    node_leaf : int32 (n_nodes,)    row of the leaf arrays of each node (-1 inside)
    mean : (n_leaves, d)            the leaf Gaussian's mean
    chol : (n_leaves, d, d)         lower Cholesky factor of its covariance
    lower, upper : (n_leaves, d)    the leaf's cell ``lower < x <= upper`` (+-inf: open)
    log_weight : (n_leaves,)        log of the leaf's share of its tree's weight
    log_mass : (n_leaves,)          log of the Gaussian's probability inside the cell
    """

    node_leaf: np.ndarray
    mean: np.ndarray
    chol: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    log_weight: np.ndarray
    log_mass: np.ndarray

    def log_norm(self):
        """Per leaf: ``log pi - log M - d/2 log 2 pi - log|L|`` (the constant of
        its truncated Gaussian's log density)."""
        d = self.mean.shape[1]
        logdet = np.log(np.diagonal(self.chol, axis1=1, axis2=2)).sum(axis=1)
        return self.log_weight - self.log_mass - 0.5 * d * LOG_2PI - logdet


@dataclass(frozen=True, eq=False)
class DensityDraw:
    """How a density tree draws its rows: all the rows of positive weight
    (``rows``, sorted), or with ``bootstrap`` ``n_draw`` of them with
    probabilities ``p``."""

    rows: np.ndarray
    p: np.ndarray
    n_draw: int
    bootstrap: bool

    def indices(self, rng, n):
        """The tree's rows, a row once per draw (sorted int64).

        Parameters
        ----------
        rng : numpy.random.Generator
            The tree's generator (drawn from only with ``bootstrap``).
        n : int
            Number of rows of the training set (not read: the draw holds its rows).

        Returns
        -------
        int64 ndarray
            ``rows`` without bootstrap; else each row of ``rows`` repeated as many
            times as it was drawn in ``n_draw`` draws with probabilities ``p``.
        """
        if not self.bootstrap:
            return self.rows
        pick = rng.choice(self.rows.shape[0], size=self.n_draw, replace=True, p=self.p)
        counts = np.bincount(pick, minlength=self.rows.shape[0])
        return np.repeat(self.rows, counts)


@dataclass(frozen=True, eq=False)
class DensitySplitter(Splitter):
    """Density-tree splits ``x[f] <= t`` minimising the children's Gaussian
    log-determinants (``q`` random features, ``n_thresh`` random cuts each or
    every cut when 0, kept when the gain beats ``min_gain``; ``reg`` added to
    the covariances, diagonal when ``diag``), then each leaf's Gaussian, cell
    and log mass (``n_mc`` Monte-Carlo draws): the node loop in one Numba
    kernel (:func:`facesegment.forest._density_kernels.density_nodes`).
    ``weights``: the rows' sample weights (used without bootstrap; with it a
    row weighs its number of draws)."""

    name: ClassVar[str] = "density"
    q: int = 1
    n_thresh: int = 0
    min_gain: float = 0.0
    reg: float = 1e-6
    diag: bool = False
    n_mc: int = 4096
    weights: np.ndarray = None

    def build_nodes(self, tree, idx):
        """Grow the tree's nodes and its leaves' Gaussians in one Numba kernel.

        With bootstrap each row weighs its number of draws, else its sample
        weight; two seeds drawn from ``tree.rng`` seed the growth and the leaves'
        Monte-Carlo masses.

        Parameters
        ----------
        tree : TreeGrowth
            The tree being grown (``X``, ``rng``, ``min_leaf``, ``params``).
        idx : int64 ndarray
            The tree's rows (repeated once per draw with bootstrap).

        Returns
        -------
        dict
            The tree's node arrays (``left``, ``right``, ``feature``,
            ``threshold``, ``depth``, ``n_samples``, ``value``: each node's share
            of the root's weight, float32 (n_nodes, 1)), its leaf arrays
            (``node_leaf``, ``mean``, ``chol``, ``lower``, ``upper``,
            ``log_weight``, ``log_mass``) and an empty ``stats``.
        """
        X, rng = tree.X, tree.rng
        if tree.params.draw.bootstrap:
            rows, counts = np.unique(idx, return_counts=True)
            w = np.zeros(X.shape[0])
            w[rows] = counts
        else:
            rows, w = idx, self.weights
        grow_seed, mass_seed = (int(s) for s in rng.integers(0, 2**31 - 1, size=2))
        (left, right, feature, threshold, depth, n_samples, weight, leaf, mean, chol, lower,
         upper, leaf_weight) = density_nodes(
            X, w, np.ascontiguousarray(rows, np.int64), grow_seed, self.q, self.n_thresh,
            tree.min_leaf, tree.params.max_depth, self.min_gain, self.reg, self.diag)
        log_mass = leaf_log_mass(mean, chol, lower, upper, self.diag, self.n_mc, mass_seed)
        return {"left": left, "right": right, "feature": feature, "threshold": threshold,
                "depth": depth, "n_samples": n_samples,
                "value": (weight / weight[0]).astype(np.float32)[:, None],
                "node_leaf": leaf, "mean": mean, "chol": chol, "lower": lower,
                "upper": upper, "log_weight": np.log(leaf_weight / weight[0]),
                "log_mass": log_mass, "stats": {}}


def _concat(trees, d):
    """One ForestArrays and one DensityLeaves from per-tree dicts."""
    sizes = np.array([t["left"].shape[0] for t in trees])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    leaf_sizes = np.array([t["mean"].shape[0] for t in trees])
    leaf_off = np.concatenate([[0], np.cumsum(leaf_sizes)[:-1]])

    def shift(a, off):
        """``a`` with ``off`` added to its non-negative entries, as int32 (-1 kept).

        Parameters
        ----------
        a : int ndarray
            Indices local to a tree, -1 for none.
        off : int
            The tree's offset.

        Returns
        -------
        int32 ndarray
            The shifted indices.
        """
        return np.where(a >= 0, a + off, -1).astype(np.int32)

    cat = np.concatenate
    n = int(sizes.sum())
    fa = ForestArrays(
        roots=offsets.astype(np.int32),
        left=cat([shift(t["left"], o) for t, o in zip(trees, offsets)]),
        right=cat([shift(t["right"], o) for t, o in zip(trees, offsets)]),
        feature=cat([t["feature"] for t in trees]).astype(np.int32),
        feature2=np.full(n, -1, np.int32), oblique=np.full(n, -1, np.int32),
        threshold=cat([t["threshold"] for t in trees]).astype(np.float32),
        value=cat([t["value"] for t in trees]).astype(np.float32),
        depth=cat([t["depth"] for t in trees]).astype(np.int32),
        n_samples=cat([t["n_samples"] for t in trees]).astype(np.int32),
        weights=np.zeros((0, d), np.float32))
    leaves = DensityLeaves(
        node_leaf=cat([shift(t["node_leaf"], o) for t, o in zip(trees, leaf_off)]),
        **{k: cat([t[k] for t in trees]).astype(np.float64)
           for k in LEAF_ARRAY_NAMES[1:]})
    return fa, leaves


def check_leaves(fa, leaves):
    """What is inconsistent between a forest and its leaf arrays (None: nothing).

    Parameters
    ----------
    fa : ForestArrays
        The density forest's trees.
    leaves : DensityLeaves
        Its leaf arrays.

    Returns
    -------
    str or None
        The first problem found (shapes, ``node_leaf`` not mapping leaves to
        leaf rows, a non-positive Cholesky diagonal), or None.
    """
    L = leaves.mean.shape[0] if leaves.mean.ndim == 2 else -1
    d = fa.n_features
    if leaves.node_leaf.shape != (fa.n_nodes,):
        return f"node_leaf has shape {leaves.node_leaf.shape}, expected ({fa.n_nodes},)"
    if L < 0 or leaves.mean.shape[1] != d or leaves.chol.shape != (L, d, d) \
            or leaves.lower.shape != (L, d) or leaves.upper.shape != (L, d) \
            or leaves.log_weight.shape != (L,) or leaves.log_mass.shape != (L,):
        return "leaf arrays have inconsistent shapes"
    is_leaf = fa.left < 0
    if (leaves.node_leaf[is_leaf] < 0).any() or (leaves.node_leaf[~is_leaf] != -1).any() \
            or (leaves.node_leaf >= L).any():
        return "node_leaf does not map leaves to leaf rows"
    if not (np.diagonal(leaves.chol, axis1=1, axis2=2) > 0).all():
        return "a leaf covariance factor is not positive definite"
    return None


class DensityForest(DensityMixin, BaseEstimator):
    """A forest of density trees (see the module docstring).

    Parameters
    ----------
    n_estimators : int, default=100
        Number of trees.
    max_depth : int or None, default=None
        Maximum depth (None: until another rule stops).
    min_samples_leaf : int or None, default=None
        Rows on each side of a split; None: ``2 * (n_features + 1)``.
    max_features : int, float, str or None, default=None
        Features tried per node (as the classification forests; None: all).
    n_thresholds : int or None, default=16
        Random cuts tried per feature (uniform between the smallest and the
        largest value that leave ``min_samples_leaf`` rows on each side);
        None tries every cut between distinct values.
    min_gain : float, default=0.0
        A node is split only when the best information gain (nats per unit
        weight) exceeds it.
    covariance_type : {"full", "diag"}, default="full"
        Leaf covariances (and the split criterion's).
    reg_covar : float, default=1e-6
        Added to the diagonal of every covariance (as ``GaussianMixture``).
    bootstrap : bool, default=True
        Each tree grows on ``max_samples`` rows drawn with replacement
        (probability proportional to ``sample_weight``); a row drawn ``k``
        times weighs ``k``.  False: every tree sees every row, weighted by
        ``sample_weight``.
    max_samples : int, float or None, default=None
        Rows drawn per tree with ``bootstrap`` (None: as many as rows of
        positive weight).
    n_mass_samples : int, default=4096
        Monte-Carlo draws per leaf for the cell mass of full covariances.
    max_sample_tries : int, default=100
        Rejection draws per sample before the coordinate-wise fallback.
    random_state : None, int, Generator, RandomState or SeedSequence
        Seeds: one per tree, drawn up front.
    n_jobs : int or None, default=None
        Threads for growing trees and scoring (None: 1, -1: all cores).
        Results do not depend on it.
    verbose : int, default=0
        Progress line while growing.

    Attributes
    ----------
    forest_ : ForestArrays
        The trees (``value[:, 0]``: the node's share of its tree's weight).
    leaves_ : DensityLeaves
        The leaf Gaussians and cells.
    n_features_in_ : int
    n_leaves_ : int
        Leaves of all trees.
    """

    _parameter_constraints = {
        **{k: COMMON_CONSTRAINTS[k] for k in ("n_estimators", "max_depth", "max_samples",
                                              "bootstrap", "random_state", "n_jobs",
                                              "verbose")},
        "min_samples_leaf": Integer(1, none_ok=True),
        "max_features": MaxFeatures(),
        "n_thresholds": Integer(1, none_ok=True),
        "min_gain": Real(0),
        "covariance_type": Options("full", "diag"),
        "reg_covar": Real(0, low_open=True),
        "n_mass_samples": Integer(1),
        "max_sample_tries": Integer(1),
    }

    def __init__(self, n_estimators=100, *, max_depth=None, min_samples_leaf=None,
                 max_features=None, n_thresholds=16, min_gain=0.0, covariance_type="full",
                 reg_covar=1e-6, bootstrap=True, max_samples=None, n_mass_samples=4096,
                 max_sample_tries=100, random_state=None, n_jobs=None, verbose=0):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.n_thresholds = n_thresholds
        self.min_gain = min_gain
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.n_mass_samples = n_mass_samples
        self.max_sample_tries = max_sample_tries
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        return tags

    def __sklearn_is_fitted__(self):
        return hasattr(self, "leaves_")

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, sample_weight=None):
        """Grow the forest on the rows of ``X`` (``y`` is ignored).

        Parameters
        ----------
        X : array (n, d)
            Finite numbers (converted to float32, like every forest here).
        y : ignored
        sample_weight : array (n,), optional
            Non-negative weights: the split criterion and the leaf Gaussians
            are weighted by them (with ``bootstrap``, rows are drawn with
            probability proportional to them).

        Returns
        -------
        self
        """
        params = validate_params(self, self.get_params())
        X = validate_data(self, X, dtype=np.float32, order="C", reset=True,
                          ensure_min_samples=2)
        n, d = X.shape
        w = check_sample_weight(sample_weight, n)
        w = np.ones(n) if w is None else w
        rows = np.flatnonzero(w > 0).astype(np.int64)
        min_leaf = params["min_samples_leaf"] or 2 * (d + 1)
        draw = DensityDraw(rows, w[rows] / w[rows].sum(),
                           resolve_max_samples(params["max_samples"], rows.shape[0]),
                           params["bootstrap"])
        splitter = DensitySplitter(
            q=resolve_max_features(params["max_features"], d),
            n_thresh=params["n_thresholds"] or 0, min_gain=params["min_gain"],
            reg=params["reg_covar"], diag=params["covariance_type"] == "diag",
            n_mc=params["n_mass_samples"], weights=w)
        tp = TreeParams(splitter=splitter, draw=draw, min_samples_leaf=int(min_leaf),
                        max_depth=-1 if params["max_depth"] is None else params["max_depth"])
        seeds = seeds_from(params["random_state"], params["n_estimators"])
        n_jobs = predict_threads(params["n_jobs"])
        trees = [None] * len(seeds)
        items = [(i, int(s)) for i, s in enumerate(seeds)]
        for i, res in map_tasks(fit_tree_task, items, args=(X, None, 1, tp),
                                n_workers=n_jobs, batch=max(n_jobs, 1),
                                desc="density forest", unit="trees",
                                progress=bool(params["verbose"])):
            trees[i] = res
        self.forest_, self.leaves_ = _concat(trees, d)
        self.n_leaves_ = int(self.leaves_.mean.shape[0])
        return self

    def _set_fitted(self, arrays, leaves):
        """Restore a fitted forest from its arrays (a model folder's)."""
        leaves = leaves if isinstance(leaves, DensityLeaves) else DensityLeaves(**leaves)
        problem = check_leaves(arrays, leaves)
        if problem:
            raise ValueError(f"the density forest's leaf arrays do not fit its trees: "
                             f"{problem}")
        self.forest_, self.leaves_ = arrays, leaves
        self.n_features_in_ = arrays.n_features
        self.n_leaves_ = int(leaves.mean.shape[0])
        return self

    # -------------------------------------------------------------- density
    def _check_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float32, order="C", reset=False)

    def score_samples(self, X):
        """Log density of each row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples (converted to float32).

        Returns
        -------
        float64 ndarray of shape (n_samples,)
            The forest's log density at each sample.
        """
        X = self._check_X(X)
        fa, lv = self.forest_, self.leaves_
        with numba_threads(predict_threads(validate_params(self, {"n_jobs": self.n_jobs})
                                           ["n_jobs"])):
            return score_kernel(X, fa.roots, fa.left, fa.feature, fa.threshold,
                                lv.node_leaf, lv.mean, lv.chol, lv.log_norm())

    def score(self, X, y=None):
        """Total log-likelihood of the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples.
        y : None
            Ignored.

        Returns
        -------
        float
            The sum of :meth:`score_samples`.
        """
        return float(np.sum(self.score_samples(X)))

    def sample(self, n_samples=1, random_state=None):
        """Draw ``n_samples`` rows from the forest's density.

        See the module docstring; ``random_state`` gives the seeds, so the same
        seed gives the same rows.

        Parameters
        ----------
        n_samples : int, default=1
            Number of rows drawn, at least 1.
        random_state : None, int, Generator, RandomState or SeedSequence, default=None
            Seeds the draws.

        Returns
        -------
        float64 ndarray of shape (n_samples, n_features)
            The rows.

        Raises
        ------
        ValueError
            When ``n_samples`` is not an integer >= 1.
        """
        check_is_fitted(self)
        if (not isinstance(n_samples, (int, np.integer)) or isinstance(n_samples, bool)
                or n_samples < 1):
            raise ValueError(f"n_samples={n_samples!r} must be an integer >= 1")
        valid = validate_params(self, {"random_state": random_state,
                                       "max_sample_tries": self.max_sample_tries})
        state = valid["random_state"]
        seed, fallback_seed = (int(s) for s in seeds_from(state, 2))
        fa, lv = self.forest_, self.leaves_
        weight = fa.value[:, 0].astype(np.float64)
        X, rows, ok = sample_kernel(int(n_samples), seed, fa.roots, fa.left, weight,
                                    lv.node_leaf, lv.mean, lv.chol, lv.lower, lv.upper,
                                    valid["max_sample_tries"])
        if not ok.all():
            _fallback(X, rows, ~ok, lv, np.random.default_rng(fallback_seed))
        return X


def _fallback(X, rows, bad, lv, rng):
    """Rows ``bad`` of ``X`` redrawn coordinate by coordinate from the leaf's
    normals ``N(mu_j, Sigma_jj)`` truncated to the cell (inverse CDF)."""
    from scipy.special import ndtr, ndtri

    k = rows[bad]
    sd = np.sqrt(np.einsum("kji,kji->kj", lv.chol[k], lv.chol[k]))
    mu = lv.mean[k]
    a, b = (lv.lower[k] - mu) / sd, (lv.upper[k] - mu) / sd
    flip = a > 0   # draw in the smaller tail, where the CDF does not round to 1
    a2, b2 = np.where(flip, -b, a), np.where(flip, -a, b)
    u = rng.random(a.shape)
    pa, pb = ndtr(a2), ndtr(b2)
    z = ndtri(pa + u * (pb - pa))
    z = np.where(flip, -z, z)
    X[bad] = np.clip(mu + sd * z, np.nextafter(lv.lower[k], np.inf), lv.upper[k])


__all__ = ["DensityForest", "DensityLeaves", "LEAF_ARRAY_NAMES", "check_leaves"]
