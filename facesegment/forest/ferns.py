"""Random ferns (Özuysal, Calonder, Lepetit & Fua, 2010): :class:`RandomFernsForest`.

A fern is a list of ``depth`` random binary tests; a sample's outcomes form a
``depth``-bit number that picks one of the fern's 2^depth leaves, each holding
class posteriors.  It is a decision tree whose nodes of one level all ask the
same question (the Leibe lecture: "keep the same query for all nodes at a
certain level"), so each fern is stored as a **complete binary tree of depth
``depth``** in ordinary :class:`~facesegment.forest._arrays.ForestArrays`
(node ``i`` -> children ``2i+1``, ``2i+2``; every node of level ``l`` has the
fern's test ``l``).  Prediction, ``apply``, truncation (``max_depth``), the
model format, the CLI and the dense per-pixel kernels all work unchanged; a
fern of depth d has 2^(d+1) - 1 nodes (68 bytes each with 8 classes: 139 kB
at the default depth 10).

Tests (``test``):

* ``"axis"`` (default): ``x[a] <= t`` for a random feature;
* ``"two-probe"`` (Özuysal's pixel comparisons, suited to image windows):
  ``x[a] - x[b] <= t`` for a random pair ``a != b``.  On data with few
  features it sees few directions (with 2 features, only ``x[0] - x[1]``),
  hence the default; the face pipeline can select between the two.

The threshold is drawn from the data: the value of a random sample of the
fern (a random quantile), moved to the midpoint towards the next value
present (``x <= 100.5`` on integers, as for the other forests), so the test
splits the fern's samples.  A test constant on the fern's samples is redrawn
(up to :data:`MAX_TEST_DRAWS` times).  Nothing is optimised: ferns are
trained by counting.

Missing values (NaN in float ``X``): a level's threshold is a quantile of
the *present* values, and the side missing values take at that level is
drawn at random (one draw per level from the fern's generator, like its test:
nothing is learned); the leaves count the samples where they arrive.

Leaves (and every node: truncating a fern at depth k gives the fern of depth
k) hold the class posteriors of the fern's training samples reaching them,
regularised by a symmetric Dirichlet prior: ``(counts + prior) / (n +
n_classes * prior)`` (``prior=1``: Laplace; a node no sample reaches gets the
uniform distribution).

Combination: ferns are **semi-naive Bayes** classifiers (full joint
distribution inside a fern, independence between ferns), and Özuysal et al.
combine them by the product of the ferns' distributions.  The shared forest
machinery (``predict_proba``, ``predict``, ``score``, the model, dense
inference) **averages** the ferns' posteriors, as for every forest;
:meth:`RandomFernsForest.predict_proba_product` gives the product rule
(naive Bayes over ferns, with Özuysal's regularised likelihoods) for the same
fitted ferns; it is clearly the better combination for random ferns.

Parameters
----------
n_estimators : int, default 16
    Number of ferns (M).
depth : int, default 10
    Tests per fern (S); 2^depth leaves.  At most :data:`MAX_DEPTH`.
test : {"axis", "two-probe"}, default "axis"
prior : float >= 0, default 1.0
    Dirichlet prior added to every class count (0: plain frequencies).
max_samples : int, float or None, default None
    Samples per fern (a count, a fraction of the pool, None: the pool).
bootstrap : bool, default False
    False: every fern counts the whole pool (Özuysal); True: with replacement.
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
    As for the other forests; the same seed gives the same ferns whatever
    ``n_jobs`` or ``scheduler``.
"""

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._fern_kernels import fern_counts, fern_counts_missing, fern_test_values, quantile_cut
from .base import BaseForest
from .families import Splitter
from .params import (COMMON_CONSTRAINTS, FOREST_OPTIONS_CONSTRAINTS, MAX_FERN_DEPTH,
                     Integer, InvalidParameterError, Options, Real, validate_params)
from .twoprobe import sample_pairs

#: Largest accepted ``depth`` (2^21 - 1 nodes, 143 MB per fern with 8 classes).
MAX_DEPTH = 20
#: Candidate tests drawn per level before accepting one constant on the fern's samples.
MAX_TEST_DRAWS = 32
#: Samples per block of :meth:`RandomFernsForest.predict_proba_product`.
PRODUCT_BLOCK = 4096
#: Floor of the probabilities whose logarithm the product rule takes.
_TINY = 1e-300


def draw_test(X, idx, rng, test, missing=False):
    """One level's test ``(a, b, threshold)`` (``b = -1`` for an axis test).

    Draws a feature (axis) or a pair (two-probe) and a uniform for the
    quantile; redraws while the test is constant on the samples ``idx``, at
    most :data:`MAX_TEST_DRAWS` times (then the last one is kept, all samples
    going left).  With ``missing`` (NaN in X) the quantile is one of the
    present values (a test missing on every sample is redrawn).

    Parameters
    ----------
    X : ndarray uint8 or float32 (n, p)
        The samples.
    idx : int64 ndarray of shape (m,)
        The fern's samples.
    rng : numpy.random.Generator
        The fern's generator.
    test : {"axis", "two-probe"}
        The kind of test.
    missing : bool, default=False
        Whether X holds NaN.

    Returns
    -------
    a : int
        The test's feature.
    b : int
        Its second probe, -1 for an axis test.
    threshold : float32
        ``value <= threshold`` goes left.
    """
    p = X.shape[1]
    for _ in range(MAX_TEST_DRAWS):
        if test == "two-probe":
            fa, fb = sample_pairs(rng, p, 1)
            a, b = int(fa[0]), int(fb[0])
        else:
            a, b = int(rng.integers(0, p)), -1
        values = fern_test_values(X, idx, a, b)
        if missing:
            values = values[~np.isnan(values)]
            if values.shape[0] == 0:
                ok, t = False, np.float32(0.0)
                continue
        ok, t = quantile_cut(values, rng.random())
        if ok:
            break
    return a, b, np.float32(t)


def fern_arrays(fa, fb, thr, counts, prior, miss_left=None):
    """The fern's node arrays (complete binary tree, breadth-first).

    Each node's ``value`` is ``(counts + prior) / (n + C prior)`` (uniform for
    an empty node with ``prior=0``).

    Parameters
    ----------
    fa, fb : int64 ndarray of shape (d,)
        The levels' features (``fb[l] = -1``: axis test).
    thr : float32 ndarray of shape (d,)
        The levels' thresholds.
    counts : int64 ndarray of shape (2^(d+1) - 1, n_classes)
        Class counts per node
        (:func:`facesegment.forest._fern_kernels.fern_counts`).
    prior : float
        Dirichlet prior added to every node's class counts.
    miss_left : int8 ndarray of shape (d,) or None, default=None
        The side of missing values per level; None: no ``missing_left``.

    Returns
    -------
    dict
        ``left``, ``right``, ``feature``, ``feature2``, ``oblique``,
        ``threshold``, ``value``, ``depth`` and ``n_samples``, and with
        ``miss_left`` also ``missing_left`` (0 at leaves).
    """
    d = fa.shape[0]
    n_nodes, n_classes = counts.shape
    node = np.arange(n_nodes)
    level = np.repeat(np.arange(d + 1, dtype=np.int32), 2 ** np.arange(d + 1))
    internal = node < 2 ** d - 1
    lev_in = np.minimum(level, d - 1)  # d >= 1
    n = counts.sum(axis=1)
    num = counts + prior
    den = (n + n_classes * prior)[:, None].astype(np.float64)
    value = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0 / n_classes)
    out = {
        "left": np.where(internal, 2 * node + 1, -1).astype(np.int32),
        "right": np.where(internal, 2 * node + 2, -1).astype(np.int32),
        "feature": np.where(internal, fa[lev_in], -1).astype(np.int32),
        "feature2": np.where(internal, fb[lev_in], -1).astype(np.int32),
        "oblique": np.full(n_nodes, -1, dtype=np.int32),
        "threshold": np.where(internal, thr[lev_in], 0).astype(np.float32),
        "value": value.astype(np.float32),
        "depth": level,
        "n_samples": n.astype(np.int32),
    }
    if miss_left is not None:
        out["missing_left"] = np.where(internal, miss_left[lev_in], 0).astype(np.int8)
    return out


def grow_fern(X, y, n_classes, params, seed):
    """Grow one fern (:meth:`FernSplitter.grow`).

    The fern's generator draws its samples (as every tree does), then the
    tests level by level, so the first k tests of a fern of depth d are those
    of the fern of depth k from the same seed.  Returns the dict of
    :func:`facesegment.forest._grow.grow_tree`.

    Parameters
    ----------
    X : ndarray uint8 or float32 (n, p)
    y : ndarray int32 (n,)
    n_classes : int
    params : TreeParams
        ``params.splitter`` is the :class:`FernSplitter` (``depth``, ``test``,
        ``prior``); ``params.draw`` the rows' draw; ``params.missing`` NaN in X.
    seed : int

    Returns
    -------
    dict
        The fern's arrays (as :func:`facesegment.forest._grow.grow_tree`'s) and ``stats``.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n, p = X.shape
    idx = params.draw.indices(rng, n)
    fern = params.splitter
    d = fern.depth
    missing = bool(params.missing)
    fa = np.empty(d, dtype=np.int64)
    fb = np.empty(d, dtype=np.int64)
    thr = np.empty(d, dtype=np.float32)
    ml = np.zeros(d, dtype=np.int8)
    for lev in range(d):
        fa[lev], fb[lev], thr[lev] = draw_test(X, idx, rng, fern.test, missing)
        if missing:  # the level's side for missing values: drawn, like its test
            ml[lev] = rng.random() < 0.5
    if missing:
        counts = fern_counts_missing(X, y, idx, fa, fb, thr, ml, n_classes)
    else:
        counts = fern_counts(X, y, idx, fa, fb, thr, n_classes)
    out = fern_arrays(fa, fb, thr, counts, fern.prior, ml if missing else None)
    out["weights"] = np.zeros((0, p), dtype=np.float32)
    leaves = counts[2 ** d - 1:]
    out["stats"] = {"seconds": time.perf_counter() - t0, "n_nodes": int(counts.shape[0]),
                    "max_depth": d, "empty_leaves": int(np.count_nonzero(leaves.sum(1) == 0))}
    return out


@dataclass(frozen=True, eq=False)
class FernSplitter(Splitter):
    """Ferns: one random test per level, shared by the level (:func:`grow_fern`);
    ``depth`` levels of ``test`` ("axis" or "two-probe"), leaves smoothed by
    ``prior``."""

    name: ClassVar[str] = "ferns"
    depth: int = 10
    test: str = "axis"
    prior: float = 1.0

    def grow(self, X, y, n_classes, params, seed):
        """Grow one fern (:func:`grow_fern`).

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
            The fern's seed.

        Returns
        -------
        dict
            As :func:`facesegment.forest._grow.grow_tree` returns it.
        """
        return grow_fern(X, y, n_classes, params, seed)


class RandomFernsForest(BaseForest):
    """Random ferns: ``n_estimators`` ferns of ``depth`` shared random tests each.

    See the module docstring (:mod:`facesegment.forest.ferns`) for the
    parameters, the storage as complete trees, the Dirichlet prior and the
    mean / product combination.

    Examples
    --------
    >>> import numpy as np
    >>> from facesegment.forest import RandomFernsForest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(0, 256, size=(600, 8), dtype=np.uint8)
    >>> y = (X[:, 0].astype(int) > X[:, 1]).astype(int)
    >>> clf = RandomFernsForest(n_estimators=30, depth=6, random_state=0).fit(X, y)
    >>> clf.forest_.n_nodes == 30 * (2 ** 7 - 1)
    True
    >>> bool(clf.score(X, y) > 0.8)
    True
    """

    _split_family = FernSplitter
    _missing_values = True

    _parameter_constraints = {
        **{k: COMMON_CONSTRAINTS[k] for k in ("n_estimators", "max_samples", "bootstrap",
                                              "random_state", "n_jobs", "scheduler",
                                              "verbose")},
        "depth": Integer(1, MAX_FERN_DEPTH).cli("levels of every fern: 2^D leaves",
                                                metavar="D"),
        "test": Options("axis", "two-probe").cli(
            "the test shared by a level: x[f] <= t (axis) or x[a] - x[b] <= t (two-probe)"),
        "prior": Real(0).cli("Dirichlet prior added to every leaf's class counts"),
        **FOREST_OPTIONS_CONSTRAINTS,
    }

    def __init__(self, n_estimators=16, *, depth=10, test="axis", prior=1.0,
                 max_samples=None, bootstrap=False, oob_score=False, class_weight=None,
                 warm_start=False, random_state=None, n_jobs=None, scheduler=None,
                 verbose=0):
        self.n_estimators = n_estimators
        self.oob_score = oob_score
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.depth = depth
        self.test = test
        self.prior = prior
        self.max_samples = max_samples
        self.bootstrap = bootstrap
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.scheduler = scheduler
        self.verbose = verbose

    def _check_common(self):
        """The parameters checked, plus the growing rules every fern has by
        construction (depth ``depth``, no minimum node size) for the shared
        ``fit``."""
        params = super()._check_common()
        if params["depth"] > MAX_DEPTH:
            raise InvalidParameterError(
                f"depth={self.depth!r} is invalid for RandomFernsForest: it must be at most "
                f"{MAX_DEPTH} (a fern has 2^(depth+1) - 1 nodes)")
        return {**params, "max_depth": params["depth"], "min_samples_split": 2,
                "min_samples_leaf": 1}

    def _splitter(self, params, X, y_enc, sample_weight):
        if params["test"] == "two-probe" and X.shape[1] < 2:
            raise ValueError(f"RandomFernsForest(test='two-probe') needs at least 2 features "
                             f"(its tests compare x[a] - x[b]); X has {X.shape[1]} feature(s) "
                             f"(shape={X.shape}): use test='axis'")
        return FernSplitter(depth=params["depth"], test=params["test"], prior=params["prior"])

    def predict_proba_product(self, X, max_depth=None, n_trees=None):
        """Class probabilities by the ferns' product rule (semi-naive Bayes).

        ``P(c | F_1..F_M) ∝ P(c) prod_j P(F_j = k_j | c)`` with Özuysal et al.'s
        regularised likelihoods ``P(F_j = k | c) = (N_kc + prior) / (N_c + L
        prior)`` (``N_kc``: the fern's training samples of class c in the node k
        reached, ``N_c``: at its root, ``L``: nodes of that depth) and ``P(c)`` the
        ferns' mean class frequency at the root.  The counts are recovered from the
        stored posteriors, ``value (n + C prior) - prior``.  With ``prior=0`` a
        class absent from a reached node gets (almost) zero probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, 31, 31, 3)
            The input samples.
        max_depth : int, optional
            Evaluate the ferns truncated at this depth, as in :meth:`predict_proba`.
        n_trees : int, optional
            Use only the first ``n_trees`` ferns.

        Returns
        -------
        proba : float64 ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``; rows sum to 1.
        """
        leaves = self.apply(X, max_depth=max_depth)
        _, nt = self._limits(max_depth, n_trees)
        fa = self.forest_
        prior = validate_params(self, {"prior": self.prior})["prior"]
        n_cls = fa.n_classes
        n = fa.n_samples.astype(np.float64)[:, None]
        counts = np.maximum(np.rint(fa.value * (n + n_cls * prior) - prior), 0.0)
        log_num = np.log(np.maximum(counts + prior, _TINY))
        root = counts[fa.roots[:nt]]                                     # (nt, C)
        log_prior = np.log(np.maximum((root / np.maximum(root.sum(axis=1, keepdims=True), 1))
                                      .mean(axis=0), _TINY))
        out = np.empty((leaves.shape[0], n_cls), dtype=np.float64)
        for s in range(0, leaves.shape[0], PRODUCT_BLOCK):
            lv = leaves[s:s + PRODUCT_BLOCK, :nt]
            n_level = np.exp2(fa.depth[lv].astype(np.float64))[..., None]  # (b, nt, 1)
            z = (log_num[lv] - np.log(np.maximum(root + n_level * prior, _TINY))).sum(axis=1)
            z = np.exp(z + log_prior - (z + log_prior).max(axis=1, keepdims=True))
            out[s:s + PRODUCT_BLOCK] = z / z.sum(axis=1, keepdims=True)
        return out


__all__ = ["RandomFernsForest", "FernSplitter", "grow_fern", "draw_test", "fern_arrays", "MAX_DEPTH",
           "MAX_TEST_DRAWS"]
