"""The three forests: axis-aligned, two-probe and CO2 (continuously optimised oblique).

Common parameters
-----------------
n_estimators : int, default 16
    Number of trees (the paper uses 16 and 32).
max_depth : int or None, default None
    Maximum depth (root 0); None grows until the other stopping rules hold.
min_samples_split : int, default 2
    Nodes with fewer samples become leaves.
min_samples_leaf : int, default 1
    Minimum samples on each side of a split.
max_samples : int, float or None, default None
    Samples per tree: a count, a fraction of the pool, or None (the pool size).
bootstrap : bool, default True
    Draw each tree's samples with replacement (the paper) or without.
random_state : int, numpy Generator/RandomState or None
    One seed per tree is drawn from it up front.
n_jobs : int or None, default None
    Local threads growing trees in parallel, and Numba threads of
    ``predict_proba``/``predict``/``apply`` (None: 1, -1: all cores, as in
    scikit-learn).
scheduler : str, distributed.Client or None
    Address of a Dask ``distributed`` scheduler to grow trees on a cluster.
verbose : int, default 0
    > 0 prints one progress line per tree (nodes, depth, seconds, ETA) on stderr.
oob_score : bool or callable, default False
    Estimate the accuracy from the out-of-bag rows of each tree
    (``oob_score_``, ``oob_decision_function_``); a callable
    ``score(y_true, y_pred)`` (class indices) replaces the accuracy.  Needs
    ``bootstrap=True``.
class_weight : None, "balanced", "balanced_subsample" or dict, default None
    Weights per class, multiplying ``sample_weight``: draw probabilities, so
    they need ``bootstrap=True``; "balanced_subsample" draws each tree's
    sample with equal class shares.
warm_start : bool, default False
    ``fit`` again with a larger ``n_estimators`` grows only the new trees
    and keeps the old ones bit-identical.

(Every classifier of the registry has the last three:
docs/forests-cart.md, "CART options".)

Leaves (and every node) hold the plain class frequencies of the training
samples reaching them; no smoothing.

The estimators are scikit-learn classifiers (``ClassifierMixin,
BaseEstimator``): ``get_params``/``set_params``/``clone``, Pipeline,
GridSearchCV, ``check_estimator``.  Parameters are checked at ``fit`` against
each class's ``_parameter_constraints`` table.  ``fit(X, y,
sample_weight=None)``: see :meth:`BaseForest.fit` for the weights' meaning.
Learned attributes: ``classes_`` (the labels, their dtype kept),
``n_classes_``, ``n_features_in_``, ``forest_`` (a ``ForestArrays``),
``tree_stats_``, and the property ``feature_importances_``.
"""

import numpy as np

from ._missing import has_nan
from .base import BaseForest, check_X
from .families import AxisSplitter, CartSplitter, CO2Splitter, TwoProbeSplitter
from ._sparse import MAX_INT8_DENSE, MAX_INT8_NONZERO
from .params import (CART_CONSTRAINTS, CO2_CONSTRAINTS, COMMON_CONSTRAINTS,
                     FOREST_OPTIONS_CONSTRAINTS, MAX_COUNT, MAX_SAMPLES, Integer,
                     InvalidParameterError, MaxFeatures, Options, resolve_max_features,
                     validate_params)

#: ``n_pairs`` of the two-probe and CO2 forests.
N_PAIRS = Integer(1, MAX_COUNT).cli(
    "feature pairs sampled per node (co2 kinds: for the two-probe start of init='best')",
    flag="pairs", metavar="N")


class AxisAlignedForest(BaseForest):
    """Random forest with univariate splits ``x[f] <= t`` (the paper's RF baseline).

    At each node ``max_features`` random features are tried and the threshold
    with the best information gain is kept (256-bin histograms for uint8).
    With ``criterion="gini"``, or NaN in float ``X``, the node visits
    ``max_features`` features in random order (more while all were constant
    on it), and keeps the largest decrease of the Gini index (or entropy), NaN values
    sent to the side that gains most (scikit-learn's CART rules; see
    docs/forests-cart.md, "CART options").

    Parameters
    ----------
    criterion : {"entropy", "gini"}, default "entropy"
        Split quality: information gain (the paper) or Gini impurity decrease.
    oob_score : bool or callable, default False
        Estimate the accuracy from the out-of-bag rows of each tree
        (``oob_score_``, ``oob_decision_function_``); a callable
        ``score(y_true, y_pred)`` (class indices) replaces the accuracy; needs
        ``bootstrap=True``.
    class_weight : None, "balanced", "balanced_subsample" or dict, default None
        Weights per class, multiplying ``sample_weight`` (draw probabilities);
        "balanced_subsample" draws each tree's sample with equal class shares.
    warm_start : bool, default False
        ``fit`` again with a larger ``n_estimators`` adds trees and keeps the
        old ones bit-identical.
    max_features : int, float, str, default "sqrt"
        q: an int, a fraction of the features, "sqrt", "log2", "all", or an
        exponent "p^0.7" (round(p ** 0.7); the paper picks the exponent from
        0.5..0.9 on validation data).
    (see the module docstring for the common parameters)

    Examples
    --------
    >>> import numpy as np
    >>> from facesegment.forest import AxisAlignedForest
    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(0, 256, size=(400, 20), dtype=np.uint8)
    >>> y = (X[:, 3] > 127).astype(int)
    >>> clf = AxisAlignedForest(n_estimators=4, max_features="all", random_state=0).fit(X, y)
    >>> float(clf.score(X, y))
    1.0
    """

    _split_family = AxisSplitter
    _missing_values = True

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "max_features": MaxFeatures().cli(
        "features tried per node: sqrt, log2, all, p^E (round(p**E), the paper picks E in "
        "0.5..0.9), a count or a fraction", metavar="Q"),
        **CART_CONSTRAINTS,
    }

    def __init__(self, n_estimators=16, *, criterion="entropy", max_features="sqrt",
                 max_depth=None, min_samples_split=2, min_samples_leaf=1, max_samples=None,
                 bootstrap=True, oob_score=False, class_weight=None, warm_start=False,
                 random_state=None, n_jobs=None, scheduler=None, verbose=0):
        self.n_estimators = n_estimators
        self.criterion = criterion
        self.oob_score = oob_score
        self.class_weight = class_weight
        self.warm_start = warm_start
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
        """The entropy histograms of :class:`AxisSplitter`; scikit-learn's CART rules
        (:class:`CartSplitter`, one Numba kernel per tree) for the Gini index or
        NaN in X."""
        q = resolve_max_features(params["max_features"], X.shape[1])
        if params["criterion"] != "entropy" or has_nan(X):
            return CartSplitter(max_features=q, criterion=params["criterion"])
        return AxisSplitter(max_features=q)


class TwoProbeForest(BaseForest):
    """Forest with two-probe splits ``x[a] - x[b] <= t`` (Shotton et al. style).

    Parameters
    ----------
    n_pairs : int, default 500
        Random feature pairs ``(a, b)`` sampled at each node; for each the exact
        best threshold is found (511-bin histogram of differences for uint8),
        and the pair and threshold with the best information gain are kept.
    oob_score : bool or callable, default False
        Out-of-bag estimate (``oob_score_``, ``oob_decision_function_``); needs
        ``bootstrap=True``.
    class_weight : None, "balanced", "balanced_subsample" or dict, default None
        Weights per class, multiplying ``sample_weight`` (draw probabilities).
    warm_start : bool, default False
        A larger ``n_estimators`` at the next ``fit`` adds trees, the old ones kept.
    (see the module docstring for the common parameters)

    NaN in float ``X``: ``x[a] - x[b]`` is missing when either value is, and
    each split keeps the side for missing values that gains most.
    """

    _split_family = TwoProbeSplitter
    _missing_values = True

    _parameter_constraints = {**COMMON_CONSTRAINTS, "n_pairs": N_PAIRS,
                              **FOREST_OPTIONS_CONSTRAINTS}

    def __init__(self, n_estimators=16, *, n_pairs=500, max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, max_samples=None,
                 bootstrap=True, oob_score=False, class_weight=None, warm_start=False,
                 random_state=None, n_jobs=None, scheduler=None, verbose=0):
        self.n_estimators = n_estimators
        self.n_pairs = n_pairs
        self.oob_score = oob_score
        self.class_weight = class_weight
        self.warm_start = warm_start
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
        if X.shape[1] < 2:
            raise ValueError(f"TwoProbeForest needs at least 2 features (its splits compare "
                             f"x[a] - x[b]); X has {X.shape[1]} feature(s) (shape="
                             f"{X.shape}): use AxisAlignedForest for a single feature")
        return TwoProbeSplitter(n_pairs=params["n_pairs"])


def feature_stats(X, chunk=1024, sample_weight=None):
    """Per-feature mean and standard deviation (float32 (p,)) computed in chunks.

    Only ``chunk`` rows at a time are converted to float64, so uint8 windows
    are never copied to float as a whole.  Missing values (NaN) are left out of
    their feature's statistics (a feature with no present value gets mean 0
    and standard deviation 0).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or (n_samples, 31, 31, 3)
        The samples (validated by :func:`check_X`, NaN allowed).
    chunk : int, default=1024
        Rows converted at a time.
    sample_weight : array-like of shape (n_samples,) or None, default=None
        Weights of the mean and variance (the distribution the trees draw
        from); None: unweighted.

    Returns
    -------
    mean : float32 ndarray of shape (n_features,)
        The feature means.
    std : float32 ndarray of shape (n_features,)
        The (biased) standard deviations.
    """
    X = check_X(X, allow_nan=True)
    n, p = X.shape
    s = np.zeros(p, dtype=np.float64)
    s2 = np.zeros(p, dtype=np.float64)
    cnt = np.zeros(p, dtype=np.float64) if has_nan(X) else None
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    for start in range(0, n, chunk):
        block = X[start:start + chunk].astype(np.float64)
        wb = np.ones(block.shape[0]) if w is None else w[start:start + chunk]
        if cnt is not None:
            present = ~np.isnan(block)
            block = np.where(present, block, 0.0)
            cnt += wb @ present
        if w is None:
            s += block.sum(axis=0)
            s2 += np.square(block).sum(axis=0)
        else:
            s += wb @ block
            s2 += wb @ np.square(block)
    total = (n if w is None else w.sum()) if cnt is None else np.maximum(cnt, 1e-300)
    mean = s / total
    var = np.maximum(s2 / total - mean * mean, 0.0)
    return mean.astype(np.float32), np.sqrt(var).astype(np.float32)


_CO2_PARAMS = ("nu", "eta", "tau", "n_passes", "batch_size", "momentum")


class CO2Forest(BaseForest):
    """Forest of continuously optimised oblique (CO2) splits ``w @ x <= t``.

    Each node starts from the best univariate split among ``max_features``
    random features; nodes with at least ``oblique_min_samples`` samples then
    optimise an oblique split with the paper's convex-concave surrogate
    (:func:`facesegment.forest.co2.co2_split`) on normalised features
    ``z = (x - mean) / std``.  The optimised split is kept only when its
    empirical information gain beats the univariate one; the normalisation is
    folded into the stored weights and threshold, so prediction reads raw uint8.

    Parameters
    ----------
    max_features : int, float, str, default "sqrt"
        q for the univariate initialisation (as in AxisAlignedForest).
    nu, eta, tau, n_passes, batch_size, momentum : optional
        The surrogate's regulariser ν, learning rate η, steps τ between
        refreshes of w_old, passes over the node's samples, mini-batch size and
        momentum; None takes ``facesegment.forest.co2.CO2_DEFAULTS``.
    oblique_min_samples : int, default 100
        Smaller nodes keep axis-aligned splits (bounds the model size: at most
        about 2 n / oblique_min_samples oblique rows of p weights per tree).
    weight_dtype : {"float32", "float16", "int8", "int16"}, default "float32"
        Storage of the oblique weights; float16 halves the size and refits the
        threshold on the node's samples after rounding.  ``"int8"``: one scale
        per split, folded into the threshold, the threshold refit on the
        rounded split's exact integer values; dense int8 rows need uint8
        features (window values), and the scale also keeps every sum below
        2**24, so any kernel computes it exactly (dense inference then runs
        integer dot products: docs/sparse.md).  ``"int16"`` (dense rows only):
        the same with integers up to 32,639, so the sum bound, not the
        largest weight, sets the scale: finer than float16 on CO2 rows, at
        about int8's inference cost on pooled rows (their high bytes are
        mostly zero).  With ``max_nonzero`` it is the storage
        of the sparse weights.
    max_nonzero : int or None, default None
        k: grow *sparse* oblique splits of at most k features (stored as
        indices and weights; inference gathers only those k window values).
        None: dense splits over all p features (the paper).
    sparsity : {"learned", "prune"}, default "learned"
        How sparse splits find their support: hard thresholding to the k
        largest normalised weights after every SGD step ("learned"), or the
        dense optimisation pruned to its top k afterwards ("prune").  Either
        way the threshold is refit exactly in the stored precision.
    init : {"axis", "best"}, default "axis"
        The split the optimisation starts from: the best univariate split (the
        paper), or the better of it and the best two-probe split among
        ``n_pairs`` random pairs (an extension: the node keeps the two-probe
        split when the optimised one does not beat it).
    n_pairs : int, default 400
        Pairs sampled per node when ``init="best"``.
    oob_score : bool or callable, default False
        Out-of-bag estimate (``oob_score_``, ``oob_decision_function_``); needs
        ``bootstrap=True``.
    class_weight : None, "balanced", "balanced_subsample" or dict, default None
        Weights per class, multiplying ``sample_weight`` (draw probabilities;
        the normalisation statistics are weighted by them too).
    warm_start : bool, default False
        A larger ``n_estimators`` at the next ``fit`` adds trees, the old ones kept.
    (see the module docstring for the common parameters)

    ``fit(X, y, feature_mean=None, feature_std=None)``: the normalisation
    statistics, computed from X in chunks when not given (the windows file
    stores them).

    NaN in float ``X``: the univariate and two-probe starts learn a side for
    missing values as :class:`AxisAlignedForest` and :class:`TwoProbeForest`
    do; an oblique row is optimised on the node's rows with missing values
    replaced by the feature means, then its threshold and side are refit on
    the true values, where the row's value is missing when a feature it reads
    is (all of them for a dense row, its k for a sparse one).
    """

    _split_family = CO2Splitter
    _missing_values = True

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "max_features": MaxFeatures().cli(
            "features tried per node for the univariate start (as --kind axis)", metavar="Q"),
        **CO2_CONSTRAINTS,
        "oblique_min_samples": Integer(2, MAX_SAMPLES).cli(
            "nodes with fewer windows keep axis-aligned splits (bounds the model size)",
            metavar="N"),
        "weight_dtype": Options("float32", "float16", "int8", "int16").cli(
            "storage of oblique weights (float16 halves the size, threshold refitted; "
            "int8/int16: exact integer rows, dense ones need uint8 windows, int16 dense "
            "only; with --max-nonzero: the sparse rows' weights)"),
        "init": Options("axis", "best"),
        "n_pairs": N_PAIRS,
        "max_nonzero": Integer(1, MAX_COUNT, none_ok=True).cli(
            "sparse splits of at most K features (docs/sparse.md)", metavar="K"),
        "sparsity": Options("learned", "prune").cli(
            "how sparse splits find their K features: hard thresholding in every SGD step "
            "(learned) or top K of the dense split (prune)"),
        **FOREST_OPTIONS_CONSTRAINTS,
    }

    def __init__(self, n_estimators=16, *, max_features="sqrt", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, max_samples=None,
                 bootstrap=True, nu=None, eta=None, tau=None, n_passes=None,
                 batch_size=None, momentum=None, oblique_min_samples=100,
                 weight_dtype="float32", init="axis", n_pairs=400, max_nonzero=None,
                 sparsity="learned", oob_score=False, class_weight=None, warm_start=False,
                 random_state=None, n_jobs=None, scheduler=None, verbose=0):
        self.n_estimators = n_estimators
        self.oob_score = oob_score
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_samples = max_samples
        self.bootstrap = bootstrap
        self.nu = nu
        self.eta = eta
        self.tau = tau
        self.n_passes = n_passes
        self.batch_size = batch_size
        self.momentum = momentum
        self.oblique_min_samples = oblique_min_samples
        self.weight_dtype = weight_dtype
        self.init = init
        self.n_pairs = n_pairs
        self.max_nonzero = max_nonzero
        self.sparsity = sparsity
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.scheduler = scheduler
        self.verbose = verbose

    def co2_params(self):
        """The effective ν, η, τ, passes, batch size and momentum (defaults filled in,
        checked: raises ``InvalidParameterError``, a ``ValueError``)."""
        return validate_params(self, {name: getattr(self, name) for name in _CO2_PARAMS})

    def fit(self, X, y, sample_weight=None, *, feature_mean=None, feature_std=None):
        """Build a forest of trees from the training set (X, y).

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
            The normalisation statistics, as in the windows file; computed from X
            in chunks (:func:`feature_stats`) when not given, weighted by
            ``sample_weight`` when it is not all equal.

        Returns
        -------
        self : CO2Forest
            Fitted estimator.
        """
        return self._fit(X, y, sample_weight, feature_mean=feature_mean,
                         feature_std=feature_std)

    def _splitter(self, params, X, y_enc, sample_weight, feature_mean=None,
                    feature_std=None):
        p = X.shape[1]
        if feature_mean is None or feature_std is None:
            mean, std = feature_stats(X, sample_weight=sample_weight)
        else:
            mean = np.asarray(feature_mean, dtype=np.float32).ravel()
            std = np.asarray(feature_std, dtype=np.float32).ravel()
            for name, a in (("feature_mean", mean), ("feature_std", std)):
                if a.shape != (p,) or not np.isfinite(a).all():
                    raise ValueError(f"{name} must be {p} finite values (one per "
                                     f"feature), got shape {a.shape}")
            if (std < 0).any():
                raise ValueError("feature_std has negative values; pass standard "
                                 "deviations")
        inv_std = np.where(std > 1e-12, 1.0 / np.maximum(std, 1e-12), 0.0)
        dt = params["weight_dtype"]
        if dt == "int16" and params["max_nonzero"] is not None:
            raise InvalidParameterError(
                "weight_dtype='int16' is for dense rows; sparse splits store float32, "
                "float16 or int8 weights")
        if dt in ("int8", "int16") and params["max_nonzero"] is None:
            if X.dtype != np.uint8:
                raise InvalidParameterError(
                    f"weight_dtype={dt!r} dense rows need uint8 features (window values), "
                    f"got {X.dtype}; use weight_dtype='float16', or set max_nonzero for "
                    "sparse int8 splits")
            if p > MAX_INT8_DENSE:
                raise InvalidParameterError(
                    f"weight_dtype={dt!r} dense rows are for at most {MAX_INT8_DENSE} "
                    f"features (exact sums), got {p}; use weight_dtype='float16'")
        elif params["weight_dtype"] == "int8" and params["max_nonzero"] > MAX_INT8_NONZERO:
            raise InvalidParameterError(
                f"max_nonzero={params['max_nonzero']} is above {MAX_INT8_NONZERO}, the most "
                "int8 weights whose sums stay exact in float32; lower it or use "
                "weight_dtype='float16'")
        self.feature_mean_ = mean
        self.feature_std_ = std
        return CO2Splitter(
            max_features=resolve_max_features(params["max_features"], p),
            co2={k: params[k] for k in _CO2_PARAMS},
            oblique_min_samples=params["oblique_min_samples"],
            weight_dtype=params["weight_dtype"], init=params["init"],
            n_pairs=params["n_pairs"], max_nonzero=params["max_nonzero"],
            sparsity=params["sparsity"], mean=mean, inv_std=inv_std.astype(np.float32))
