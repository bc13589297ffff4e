"""Non-greedy decision trees (Norouzi, Collins, Johnson, Fleet & Kohli, NIPS 2015).

A tree of fixed structure (that of a greedy tree of depth ``max_depth``
grown on the same samples: axis-aligned, ``init="axis"``, or CO2,
``init="co2"``) whose oblique splits ``W`` (one row per internal node, each
``||w||^2 <= nu``) and leaf log-probabilities ``Theta`` are optimised jointly
by SGD on the paper's convex-concave upper bound of the tree's log loss,
with the fast loss-augmented inference (Hamming ball of radius 1, Eq. 13),
mini-batches and momentum (kernels: :mod:`facesegment.forest._nongreedy_kernels`;
the training loop: :mod:`facesegment.forest._nongreedy_train`).

Splits act on normalised features ``z = (x - mean) / max(std, std_floor *
max(std))`` (the floor keeps nearly constant features, e.g. MNIST's border
pixels, from dominating the gradients; constant features get weight 0) with
the offset inside the norm (the paper's constant feature).  Stable SGD
(``ssgd_refresh = k >= 1``, the paper's SSGD): every ``k`` epochs each
sample's leaf is fixed to the one it reaches, and the bound of Eq. (14) keeps
it there unless a flip is worth its margin; ``ssgd_refresh=0`` is plain SGD.
``leaf_refit=True`` (our addition) sets ``Theta`` to the Laplace-smoothed
log-frequencies of the samples reaching each leaf at each refresh and after the
last epoch (the minimiser of the empirical loss for fixed splits); SGD still
updates ``Theta`` between refreshes, as in the paper's Algorithm 1.

Storage: every internal node is an oblique node on raw features (the
normalisation folded into ``weights`` and ``threshold``), so prediction, the
model format and the dense kernels reuse the flat :class:`ForestArrays`.
Leaves hold ``softmax(Theta)``; internal nodes the smoothed class frequencies
of the training samples under them.
"""

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._graft import graft_below, greedy_params, trunk_depth
from ._grow import grow_tree
from ._missing import has_nan
from ._nongreedy_kernels import row_keys, standardise
from ._nongreedy_train import (LEAF_ALPHA, _refit, evaluate, initial_parameters,
                               smoothed_log_frequencies, train_tree, tree_tables)
from .base import BaseForest
from .estimators import feature_stats
from .families import AxisSplitter, CO2Splitter, Splitter
from .params import (COMMON_CONSTRAINTS, FOREST_OPTIONS_CONSTRAINTS, MAX_COUNT, MAX_DEPTH,
                     MAX_SAMPLES, Boolean, Integer, MaxFeatures, Options, Real,
                     resolve_max_features)

#: Default of ``oblique_min_samples``: nodes of the greedy CO2 trees with fewer
#: samples keep their univariate split (CO2Forest's default).
OBLIQUE_MIN_SAMPLES = 100
#: Seed of the fixed projection giving samples their canonical order.
_KEY_SEED = 20151112


# ------------------------------------------------------------------ output

def to_forest_tree(tree, W, Theta, reached, y, mean, inv_std, n_classes):
    """The trained tree as a dict of local arrays for ``concat_trees``.

    Every internal node is oblique on raw features (``u @ x <= c``,
    ``u = w[:p] * inv_std``, ``c = u @ mean + w[p]``); leaves hold
    ``softmax(Theta)``, internal nodes the smoothed frequencies of the samples
    reaching them, and ``n_samples`` counts the samples that reach each node.

    Parameters
    ----------
    tree : dict
        The tree's ``left``, ``right`` and ``depth`` (breadth first, root 0).
    W : float32 ndarray of shape (n_internal, p + 1)
        The trained split rows, in node order.
    Theta : float32 ndarray of shape (n_leaves, n_classes)
        The trained leaves' log-probabilities.
    reached : int ndarray of shape (n,)
        The leaf (row of ``Theta``) each training sample reaches.
    y : int ndarray of shape (n,)
        The training samples' classes.
    mean, inv_std : ndarray of shape (p,)
        The normalisation the rows were trained on.
    n_classes : int
        Number of classes.

    Returns
    -------
    dict
        ``left``, ``right``, ``feature``, ``feature2``, ``oblique``,
        ``threshold``, ``value``, ``depth``, ``n_samples`` and ``weights``
        (float32 (n_internal, p), the rows ``u``).
    """
    tb_left, tb_right = tree["left"], tree["right"]
    n = tb_left.shape[0]
    internal = tb_left >= 0
    p = mean.shape[0]
    U = (W[:, :p].astype(np.float64) * inv_std).astype(np.float32)
    c = U.astype(np.float64) @ mean.astype(np.float64) + W[:, p]
    leaves = np.flatnonzero(~internal)
    counts = np.zeros((n, n_classes), np.float64)
    counts[leaves] = _refit(y, reached, leaves.shape[0], n_classes)
    for node in range(n - 1, -1, -1):
        if internal[node]:
            counts[node] = counts[tb_left[node]] + counts[tb_right[node]]
    value = np.exp(smoothed_log_frequencies(counts)).astype(np.float64)
    th = Theta.astype(np.float64)
    soft = np.exp(th - th.max(axis=1, keepdims=True))
    value[leaves] = soft / soft.sum(axis=1, keepdims=True)
    value /= value.sum(axis=1, keepdims=True)
    oblique = np.full(n, -1, np.int32)
    oblique[internal] = np.arange(int(internal.sum()), dtype=np.int32)
    threshold = np.zeros(n, np.float32)
    threshold[internal] = c.astype(np.float32)
    return {"left": tb_left.astype(np.int32), "right": tb_right.astype(np.int32),
            "feature": np.full(n, -1, np.int32), "feature2": np.full(n, -1, np.int32),
            "oblique": oblique, "threshold": threshold, "value": value.astype(np.float32),
            "depth": tree["depth"].astype(np.int32),
            "n_samples": counts.sum(axis=1).astype(np.int32), "weights": U}


def canonical_order(X, idx, y):
    """``idx`` reordered by (class, fixed random projection of the row).

    The tree then does not depend on the order of the rows of X (repeated rows
    and integer sample weights give the same tree).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The samples.
    idx : int64 ndarray of shape (m,)
        The tree's rows.
    y : int ndarray of shape (n,)
        The samples' classes.

    Returns
    -------
    int64 ndarray of shape (m,)
        ``idx`` in canonical order.
    """
    r = np.random.default_rng(_KEY_SEED).standard_normal(X.shape[1])
    keys = row_keys(X, idx, r)
    return idx[np.lexsort((keys, y[idx]))]


def grow_nongreedy_tree(X, y, n_classes, params, seed):
    """One non-greedy tree (the task of :class:`NonGreedyForest`): draw the
    tree's samples, grow the greedy initial tree on them, optimise, convert
    (and with ``refine_depth``, grow greedily below the refined levels).

    Parameters
    ----------
    X : ndarray uint8 or float32 (n, p)
    y : ndarray int32 (n,)
    n_classes : int
    params : TreeParams
        ``params.splitter`` is the :class:`NonGreedySplitter`.
    seed : int

    Returns
    -------
    dict
        The tree's local arrays (every internal node oblique) and ``stats``.
    """
    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    n, p = X.shape
    idx = params.draw.indices(rng, n)
    idx = canonical_order(X, idx, y)
    Xs, ys = np.ascontiguousarray(X[idx]), np.ascontiguousarray(y[idx], dtype=np.int32)
    ng = params.splitter
    mean, inv_std = ng.mean, ng.inv_std
    depth, below = trunk_depth(params)
    tree = grow_tree(Xs, ys, n_classes, greedy_params(params, depth, idx.shape[0]),
                     int(rng.integers(0, 2**31 - 1)))
    init_stats = tree.pop("stats")
    t_init = time.perf_counter() - t_start
    Z = np.empty((idx.shape[0], p), np.float32)
    standardise(Xs, np.arange(idx.shape[0], dtype=np.int64), mean, inv_std, Z)
    if not below:
        del Xs
    tb = tree_tables(tree["left"], tree["right"])
    W, Theta = initial_parameters(tree, mean, inv_std, ng.nu, n_classes)
    opt = {k: getattr(ng, k) for k in ("nu", "eta", "momentum", "batch_size", "n_epochs",
                                "ssgd_refresh", "leaf_refit")}
    t1 = time.perf_counter()
    epochs, reached = train_tree(Z, ys, n_classes, tb, W, Theta, opt, rng)
    t_sgd = time.perf_counter() - t1
    del Z
    out = to_forest_tree(tree, W, Theta, reached, ys, mean, inv_std, n_classes)
    t_below = 0.0
    if below:
        out, t_below = graft_below(out, Xs, ys, reached, n_classes, params, rng)
    sgd = [e for e in epochs if "sgd_seconds" in e]
    out["stats"] = {
        "seconds": time.perf_counter() - t_start, "t_init": t_init, "t_sgd": t_sgd,
        "t_below": t_below, "n_nodes": int(out["left"].shape[0]),
        "max_depth": int(out["depth"].max()), "refined_depth": int(tree["depth"].max()),
        "n_leaves": int(Theta.shape[0]), "epochs": epochs, "init": init_stats,
        "sgd_seconds_per_epoch": (float(np.mean([e["sgd_seconds"] for e in sgd]))
                                  if sgd else 0.0),
        "lai_samples_per_s": (float(sum(e["samples"] for e in sgd)
                                    / max(sum(e["sgd_seconds"] for e in sgd), 1e-12))
                              if sgd else 0.0),
    }
    return out


@dataclass(frozen=True, eq=False)
class NonGreedySplitter(Splitter):
    """Non-greedy trees: a greedy tree's splits and leaves optimised jointly
    (:func:`grow_nongreedy_tree`).  Fields: the estimator's parameters of the
    same names (``max_features`` resolved), and the normalisation ``mean`` and
    ``inv_std`` of the features."""

    name: ClassVar[str] = "nongreedy"
    init: str = "axis"
    nu: float = 100.0
    eta: float = 0.1
    momentum: float = 0.9
    batch_size: int = 128
    n_epochs: int = 20
    ssgd_refresh: int = 0
    leaf_refit: bool = True
    refine_depth: int = None
    init_nu: float = 1.0
    init_eta: float = 1e-3
    oblique_min_samples: int = 100
    max_features: int = 1
    mean: np.ndarray = None
    inv_std: np.ndarray = None

    def grow(self, X, y, n_classes, params, seed):
        """Grow one non-greedy tree (:func:`grow_nongreedy_tree`).

        Parameters
        ----------
        X : ndarray uint8 or float32 (n, p)
            The training samples.
        y : int32 ndarray of shape (n,)
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
            The tree's local arrays (every internal node oblique) and ``stats``.
        """
        return grow_nongreedy_tree(X, y, n_classes, params, seed)



# --------------------------------------------------------------- estimators

def _check_stats(feature_mean, feature_std, p):
    mean = np.asarray(feature_mean, dtype=np.float32).ravel()
    std = np.asarray(feature_std, dtype=np.float32).ravel()
    for name, a in (("feature_mean", mean), ("feature_std", std)):
        if a.shape != (p,) or not np.isfinite(a).all():
            raise ValueError(f"{name} must be {p} finite values (one per feature), got "
                             f"shape {a.shape}; pass the statistics of X's columns")
    if (std < 0).any():
        raise ValueError("feature_std has negative values; pass standard deviations")
    return mean, std


_NG_PARAMS = ("init", "nu", "eta", "momentum", "batch_size", "n_epochs", "ssgd_refresh",
              "leaf_refit", "refine_depth", "init_nu", "init_eta", "oblique_min_samples")


class NonGreedyForest(BaseForest):
    """Forest of non-greedy oblique trees (Norouzi et al., NIPS 2015).

    Each tree draws its samples (bootstrap by default), grows a greedy tree of
    depth ``max_depth`` on them (``init``: axis-aligned with ``max_features``
    random features per node, or CO2), then optimises all its splits and leaves
    jointly by SGD on the paper's surrogate (see :mod:`facesegment.forest.nongreedy`).

    Parameters
    ----------
    init : {"axis", "co2"}, default "axis"
        The greedy initial tree (the paper starts from an axis-aligned tree
        refined by CO2: ``"co2"``).
    max_features : int, float, str, default "sqrt"
        Features tried per node by the greedy initial tree ("all": the best split).
    nu : float, default 100.0
        Bound on the squared norm of each split's weights (the regulariser;
        features are normalised, so ``|a| <= sqrt(nu) ||z||``).
    eta : float, default 0.1
        SGD learning rate (W and Theta).
    momentum : float in [0, 1), default 0.9
    batch_size : int, default 128
    n_epochs : int, default 20
        Passes over the tree's samples (0: the greedy tree, as oblique rows).
    ssgd_refresh : int, default 0
        Epochs between refreshes of the fixed leaf assignments (SSGD); 0: plain
        SGD (the defaults are the settings chosen most often on validation
        splits in docs/studies/nongreedy.md).
    leaf_refit : bool, default True
        Refit Theta to the smoothed leaf frequencies at each refresh and at the end.
    std_floor : float in [0, 1], default 0.1
        Features are divided by ``max(std, std_floor * max(std))``.
    max_depth : int or None, default 10
        Depth of the greedy initial tree, hence of the non-greedy tree.
    refine_depth : int or None, default None
        Optimise only the top ``refine_depth`` levels (a greedy tree of that
        depth, refined), then grow greedy subtrees (``init``) under each refined
        leaf on the samples it receives, down to ``max_depth`` (None: pure
        leaves).  None: the whole tree is non-greedy.
    init_nu, init_eta : float, default 1.0, 1e-3
        CO2's nu and eta for the greedy trees' oblique splits (``init="co2"``).
    oblique_min_samples : int, default 100
        Nodes of the greedy CO2 trees with fewer samples keep their univariate split.
    oob_score : bool or callable, default False
        Out-of-bag estimate (``oob_score_``, ``oob_decision_function_``); needs
        ``bootstrap=True``.
    class_weight : None, "balanced", "balanced_subsample" or dict, default None
        Weights per class multiplying ``sample_weight`` (draw probabilities;
        the normalisation statistics are weighted by them too).
    warm_start : bool, default False
        A larger ``n_estimators`` at the next ``fit`` adds trees, the old ones kept.

    Missing values (NaN in float ``X``) are read as their feature's mean, in
    ``fit`` and in prediction (:meth:`fill_missing`): a missing value adds
    nothing to a split's normalised value.  Unlike the greedy kinds, no split
    learns a side for them, so missingness itself carries no information.

    (min_samples_split, min_samples_leaf, max_samples, bootstrap, random_state,
    n_jobs, scheduler, verbose: as for the other forests.)

    Examples
    --------
    >>> import numpy as np
    >>> from facesegment.forest import NonGreedyForest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)).astype(np.float32)
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = NonGreedyForest(n_estimators=3, max_depth=3, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    _split_family = NonGreedySplitter
    #: NaN is taken: a missing value is its feature's training mean (z = 0).
    _missing_values = True
    #: The greedy trees' split family for each ``init`` (see
    #: :func:`facesegment.forest._graft.greedy_params`).
    _init_families = {"axis": AxisSplitter, "co2": CO2Splitter}

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "init": Options("axis", "co2").cli(
            "the greedy tree each non-greedy tree starts from", flag="init-tree"),
        "max_features": MaxFeatures().cli(
            "features tried per node by the greedy initial tree", metavar="Q"),
        "nu": Real(0, low_open=True).cli("bound on the squared norm of each split's weights"),
        "eta": Real(0, low_open=True).cli("SGD learning rate"),
        "momentum": Real(0, 1, high_open=True).cli("SGD momentum in [0, 1)"),
        "batch_size": Integer(1, MAX_COUNT).cli("SGD mini-batch size"),
        "n_epochs": Integer(0, MAX_COUNT).cli(
            "SGD epochs over the tree's samples (0: the greedy tree)", flag="epochs",
            metavar="E"),
        "ssgd_refresh": Integer(0, MAX_COUNT).cli(
            "stable SGD: fix each sample's leaf, refreshed every K epochs (0: plain SGD)",
            metavar="K"),
        "leaf_refit": Boolean().cli(
            "refit the leaves to the smoothed frequencies at each refresh and at the end"),
        "std_floor": Real(0, 1).cli(
            "features are divided by max(std, F * max(std))", metavar="F"),
        "refine_depth": Integer(1, MAX_DEPTH, none_ok=True).cli(
            "optimise only the top D levels jointly, grow greedy trees below them down to "
            "--max-depth (by default: the whole tree)", metavar="D"),
        "init_nu": Real(0, low_open=True).cli(
            "CO2's nu for the greedy trees' oblique splits"),
        "init_eta": Real(0, low_open=True).cli(
            "CO2's eta for the greedy trees' oblique splits"),
        "oblique_min_samples": Integer(2, MAX_SAMPLES).cli(
            "nodes of the greedy CO2 trees with fewer windows keep their univariate split",
            metavar="N"),
        **FOREST_OPTIONS_CONSTRAINTS,
    }

    def __init__(self, n_estimators=16, *, init="axis", max_features="sqrt", max_depth=10,
                 min_samples_split=2, min_samples_leaf=1, max_samples=None, bootstrap=True,
                 nu=100.0, eta=0.1, momentum=0.9, batch_size=128, n_epochs=20,
                 ssgd_refresh=0, leaf_refit=True, std_floor=0.1, refine_depth=None,
                 init_nu=1.0, init_eta=1e-3, oblique_min_samples=OBLIQUE_MIN_SAMPLES,
                 oob_score=False, class_weight=None, warm_start=False,
                 random_state=None, n_jobs=None, scheduler=None, verbose=0):
        self.n_estimators = n_estimators
        self.init = init
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_samples = max_samples
        self.bootstrap = bootstrap
        self.nu = nu
        self.eta = eta
        self.momentum = momentum
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.ssgd_refresh = ssgd_refresh
        self.leaf_refit = leaf_refit
        self.std_floor = std_floor
        self.refine_depth = refine_depth
        self.init_nu = init_nu
        self.init_eta = init_eta
        self.oblique_min_samples = oblique_min_samples
        self.oob_score = oob_score
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.scheduler = scheduler
        self.verbose = verbose

    def fit(self, X, y, sample_weight=None, *, feature_mean=None, feature_std=None):
        """Build a forest of non-greedy trees from the training set (X, y).

        See :meth:`BaseForest.fit` for ``X``, ``y`` and ``sample_weight``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, 31, 31, 3)
            The training input samples; uint8 is used as it is, other numbers
            become float32.
        y : array-like of shape (n_samples,)
            The target values (class labels).
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights (see :meth:`BaseForest.fit`).
        feature_mean, feature_std : array-like of shape (n_features,), default=None
            The normalisation statistics (e.g. the windows file's); computed from
            X (:func:`~facesegment.forest.estimators.feature_stats`, weighted by
            ``sample_weight``) when either is not given.

        Returns
        -------
        self : NonGreedyForest
            Fitted estimator.

        Raises
        ------
        ValueError
            When ``feature_mean`` or ``feature_std`` is not ``n_features`` finite
            values, or ``feature_std`` is negative.
        """
        return self._fit(X, y, sample_weight, feature_mean=feature_mean,
                         feature_std=feature_std)

    def fill_missing(self, X):
        """``X`` with each NaN replaced by its feature's mean (``feature_mean_``).

        A missing value then adds nothing to a split's normalised value
        (``z = 0``); fit and prediction both read ``X`` this way, so the trees
        never meet a NaN (their ``missing_left`` is never read).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Validated input (uint8 or float32).

        Returns
        -------
        ndarray
            ``X`` itself when it holds no NaN, else a filled copy of its dtype.
        """
        if not has_nan(X):
            return X
        return np.where(np.isnan(X), self.feature_mean_.astype(X.dtype), X)

    def _check_predict(self, X):
        return self.fill_missing(super()._check_predict(X))

    def _apply_array(self, X, md):
        return super()._apply_array(self.fill_missing(X), md)

    def _grow_trees(self, X, y_enc, n_classes, tp, params, seeds=None):
        return super()._grow_trees(self.fill_missing(X), y_enc, n_classes,
                                   tp.replace(missing=False), params, seeds)

    def _splitter(self, params, X, y_enc, sample_weight, feature_mean=None,
                    feature_std=None):
        if feature_mean is None or feature_std is None:
            mean, std = feature_stats(X, sample_weight=sample_weight)
        else:
            mean, std = _check_stats(feature_mean, feature_std, X.shape[1])
        floor = params["std_floor"] * float(std.max()) if std.size else 0.0
        eff = np.maximum(std.astype(np.float64), floor)
        inv_std = np.where(std > 1e-12, 1.0 / np.where(eff > 0, eff, 1.0), 0.0)
        self.feature_mean_ = mean
        self.feature_std_ = std
        return NonGreedySplitter(
            **{k: params[k] for k in _NG_PARAMS},
            max_features=resolve_max_features(params["max_features"], X.shape[1]),
            mean=mean.astype(np.float32), inv_std=inv_std.astype(np.float32))


class NonGreedyTree(NonGreedyForest):
    """One non-greedy tree: :class:`NonGreedyForest` with ``n_estimators=1``,
    ``bootstrap=False`` (all the samples) and ``max_features="all"`` (the best
    greedy split at each node of the initial tree) by default."""

    def __init__(self, n_estimators=1, *, init="axis", max_features="all", max_depth=10,
                 min_samples_split=2, min_samples_leaf=1, max_samples=None, bootstrap=False,
                 nu=100.0, eta=0.1, momentum=0.9, batch_size=128, n_epochs=20,
                 ssgd_refresh=0, leaf_refit=True, std_floor=0.1, refine_depth=None,
                 init_nu=1.0, init_eta=1e-3, oblique_min_samples=OBLIQUE_MIN_SAMPLES,
                 oob_score=False, class_weight=None, warm_start=False,
                 random_state=None, n_jobs=None, scheduler=None, verbose=0):
        super().__init__(
            n_estimators, init=init, max_features=max_features, max_depth=max_depth,
            min_samples_split=min_samples_split, min_samples_leaf=min_samples_leaf,
            max_samples=max_samples, bootstrap=bootstrap, nu=nu, eta=eta, momentum=momentum,
            batch_size=batch_size, n_epochs=n_epochs, ssgd_refresh=ssgd_refresh,
            leaf_refit=leaf_refit, std_floor=std_floor, refine_depth=refine_depth,
            init_nu=init_nu, init_eta=init_eta, oblique_min_samples=oblique_min_samples,
            oob_score=oob_score, class_weight=class_weight, warm_start=warm_start,
            random_state=random_state,
            n_jobs=n_jobs, scheduler=scheduler, verbose=verbose)


__all__ = ["NonGreedyForest", "NonGreedyTree", "NonGreedySplitter", "grow_nongreedy_tree", "tree_tables",
           "initial_parameters", "train_tree", "evaluate", "to_forest_tree",
           "canonical_order", "smoothed_log_frequencies", "LEAF_ALPHA"]
