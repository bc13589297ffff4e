"""scikit-learn's forest options on the flat forests: class weights, out-of-bag
estimates, warm starts and single-tree views.

* ``class_weight``: weights per class multiply ``sample_weight``, so they mean
  what weights mean here (:meth:`BaseForest.fit`): with ``bootstrap=True``
  draw probabilities.  ``"balanced"`` weighs class ``c`` by ``n / (k n_c)``
  (scikit-learn's :func:`~sklearn.utils.class_weight.compute_class_weight`),
  so each class is drawn equally often on average; ``"balanced_subsample"``
  draws every tree's sample with an equal share per class
  (:func:`facesegment.forest._grow.draw_stratified`), the counterpart of
  scikit-learn's per-bootstrap re-weighting for trees that count samples.
* out-of-bag: each tree's rows are redrawn from its seed
  (:meth:`facesegment.forest._grow.RowDraw.indices`); a row's OOB
  distribution is the mean over the trees that did not draw it.
* warm start: the new trees get the seeds a fresh forest of
  ``n_estimators`` trees would give them, and are appended
  (:func:`append_forests`), so the old trees stay bit-identical.
"""

import warnings

import numpy as np

from ._arrays import complete, n_sparse
from ._missing import has_nan, missing_directions
from ._predict import axis_only, oob_axis_packed, packed_nodes
from .params import InvalidParameterError

#: Rows of the training set traversed at once when computing out-of-bag estimates.
OOB_CHUNK = 65536


def class_weight_draws(class_weight, classes, y_enc, w, bootstrap):
    """``(sample_weight, strata)`` for ``class_weight`` (see the module docstring).

    Parameters
    ----------
    class_weight : None, "balanced", "balanced_subsample" or dict
        The estimator's ``class_weight``; a dict maps class labels to weights
        (classes it does not name weigh 1).
    classes : ndarray of shape (n_classes,)
        The class labels, in the order of the encoded labels.
    y_enc : int ndarray of shape (n_samples,)
        The encoded labels (indices into ``classes``).
    w : None or float64 ndarray of shape (n_samples,)
        The validated ``sample_weight``.
    bootstrap : bool
        Whether the trees draw bootstrap samples.

    Returns
    -------
    sample_weight : None or float64 ndarray of shape (n_samples,)
        ``w`` times the class weight of each row (``w`` unchanged for None and
        ``"balanced_subsample"``).
    strata : None or list of (rows, cdf)
        For ``"balanced_subsample"``, per class with a positively weighted row:
        its rows (int64) and None, or, where their ``w`` differ, the cumulative
        distribution (float64) of their normalised weights.  Otherwise None.

    Raises
    ------
    InvalidParameterError
        When ``class_weight`` is given and ``bootstrap`` is False.
    ValueError
        When a dict names a label not in ``classes``, or when every resulting
        weight is 0.
    """
    if class_weight is None:
        return w, None
    if not bootstrap:
        raise InvalidParameterError(
            f"class_weight={class_weight!r} needs bootstrap=True (class weights are draw "
            "probabilities); with bootstrap=False pass integer sample_weight (row copies) "
            "instead")
    k = len(classes)
    counts = np.bincount(y_enc, minlength=k).astype(np.float64)
    if class_weight == "balanced_subsample":
        strata = []
        for c in range(k):
            rows = np.flatnonzero(y_enc == c)
            if w is not None:
                rows = rows[w[rows] > 0]
            if rows.size == 0:
                continue
            cdf = None
            if w is not None and w[rows].min() != w[rows].max():
                cdf = np.cumsum(w[rows])
                cdf /= cdf[-1]
            strata.append((rows.astype(np.int64), cdf))
        return w, strata
    if class_weight == "balanced":
        per_class = y_enc.shape[0] / (k * counts)
    else:
        per_class = np.ones(k)
        known = {c.item() if hasattr(c, "item") else c: i for i, c in enumerate(classes)}
        unknown = [label for label in class_weight if label not in known]
        if unknown:
            raise ValueError(f"class_weight names labels that are not in y: {unknown!r}; "
                             f"the classes are {list(classes)!r}")
        for label, value in class_weight.items():
            per_class[known[label]] = value
    cw = per_class[y_enc]
    out = cw if w is None else w * cw
    if not (out > 0).any():
        raise ValueError("class_weight and sample_weight give every sample weight 0; "
                         "at least one sample needs a positive weight")
    return out, None


def oob_decision(fa, X, y_enc, seeds, draw, apply_rows):
    """Out-of-bag class distributions, float64 (n, n_classes), and per-row tree counts.

    Axis-aligned forests on data without NaN are traversed by
    :func:`~facesegment.forest._predict.oob_axis_packed`; other forests through
    ``apply_rows`` in chunks of :data:`OOB_CHUNK` rows.  Warns (``UserWarning``)
    when some rows were drawn by every tree.

    Parameters
    ----------
    fa : ForestArrays
        The fitted forest.
    X : ndarray of shape (n_samples, n_features)
        The training samples.
    y_enc : int ndarray of shape (n_samples,)
        The encoded training labels (not read).
    seeds : sequence of int
        The trees' seeds, one per tree.
    draw : RowDraw
        The trees' row draw (:class:`~facesegment.forest._grow.RowDraw`), which
        gives each tree's rows from its seed.
    apply_rows : callable
        ``apply_rows(X_chunk)`` gives the leaves (int32 (m, n_trees)) of rows.

    Returns
    -------
    proba : float64 ndarray of shape (n_samples, n_classes)
        Mean class distribution over the trees that did not draw each row
        (0 for rows that every tree drew).
    count : int64 ndarray of shape (n_samples,)
        Number of trees that did not draw each row.
    """
    n = X.shape[0]
    inbag = np.zeros((len(seeds), n), dtype=bool)
    for t, seed in enumerate(seeds):
        inbag[t, draw.indices(np.random.default_rng(int(seed)), n)] = True
    proba = np.zeros((n, fa.n_classes), dtype=np.float64)
    count = np.zeros(n, dtype=np.int64)
    if axis_only(fa) and not has_nan(X):  # each row down the trees that did not draw it
        oob_axis_packed(X, fa.roots, *packed_nodes(fa), fa.value, inbag, proba, count)
    else:
        _oob_by_leaves(fa, X, inbag, apply_rows, proba, count)
    if (count == 0).any():
        warnings.warn(f"{int((count == 0).sum())} of the {n} training samples were drawn by "
                      "every tree, so they have no out-of-bag estimate (their "
                      "oob_decision_function_ rows are 0); grow more trees", UserWarning)
    proba /= np.maximum(count, 1)[:, None]
    return proba, count


def _oob_by_leaves(fa, X, inbag, apply_rows, proba, count):
    """:func:`oob_decision`'s sums from the leaves of every row in every tree, in
    chunks of :data:`OOB_CHUNK` rows (any split kind, missing values)."""
    n = X.shape[0]
    for s in range(0, n, OOB_CHUNK):
        leaves = apply_rows(X[s:s + OOB_CHUNK])
        for t in range(leaves.shape[1]):
            oob = ~inbag[t, s:s + leaves.shape[0]]
            proba[s:s + leaves.shape[0]][oob] += fa.value[leaves[oob, t]]
            count[s:s + leaves.shape[0]] += oob


def append_forests(a, b):
    """The forest of ``a``'s trees followed by ``b``'s.

    Node, oblique and sparse indices of ``b`` are shifted; ``a``'s arrays are
    copied unchanged.  The result has sparse arrays when either input has them,
    and ``missing_left`` when either has it.

    Parameters
    ----------
    a, b : ForestArrays
        The forests (same number of classes and features).

    Returns
    -------
    ForestArrays
        The concatenated forest, of ``type(a)``.
    """
    off, w_off, s_off = a.n_nodes, a.weights.shape[0], n_sparse(a)

    def shift(x, d):
        """A copy of ``x`` with ``d`` added to its non-negative entries.

        Parameters
        ----------
        x : int ndarray
            Indices, -1 for none.
        d : int
            The offset.

        Returns
        -------
        ndarray
            The shifted copy.
        """
        x = x.copy()
        x[x >= 0] += d
        return x

    cat = np.concatenate
    out = dict(
        roots=cat([a.roots, b.roots + off]).astype(np.int32),
        left=cat([a.left, shift(b.left, off)]), right=cat([a.right, shift(b.right, off)]),
        feature=cat([a.feature, b.feature]), feature2=cat([a.feature2, b.feature2]),
        oblique=cat([a.oblique, shift(b.oblique, w_off)]),
        threshold=cat([a.threshold, b.threshold]), value=cat([a.value, b.value]),
        depth=cat([a.depth, b.depth]), n_samples=cat([a.n_samples, b.n_samples]),
        weights=cat([a.weights, b.weights.astype(a.weights.dtype)]))
    if a.sparse is not None or b.sparse is not None:
        ca, cb = complete(a), complete(b)
        out.update(sparse=cat([ca.sparse, shift(cb.sparse, s_off)]),
                   sparse_ptr=cat([ca.sparse_ptr, cb.sparse_ptr[1:] + ca.sparse_ptr[-1]]),
                   sparse_index=cat([ca.sparse_index, cb.sparse_index.astype(
                       ca.sparse_index.dtype)]),
                   sparse_weight=cat([ca.sparse_weight, cb.sparse_weight.astype(
                       ca.sparse_weight.dtype)]))
    if a.missing_left is not None or b.missing_left is not None:
        out["missing_left"] = cat([missing_directions(a), missing_directions(b)])
    return type(a)(**out)


def tree_slice(fa, i):
    """Tree ``i`` of ``fa`` as a forest of one tree.

    Its nodes are copied and renumbered from 0; the oblique and sparse tables
    are shared, not copied.

    Parameters
    ----------
    fa : ForestArrays
        The forest.
    i : int
        The tree, ``0 <= i < fa.n_trees``.

    Returns
    -------
    ForestArrays
        The one-tree forest, of ``type(fa)``.
    """
    lo = int(fa.roots[i])
    hi = int(fa.roots[i + 1]) if i + 1 < fa.n_trees else fa.n_nodes

    def local(x):
        """Entries ``lo:hi`` of ``x`` (copied) with ``lo`` subtracted from the non-negative ones.

        Parameters
        ----------
        x : int ndarray of shape (n_nodes,)
            Child indices of the whole forest, -1 at leaves.

        Returns
        -------
        ndarray
            The tree's child indices, local to the tree.
        """
        x = x[lo:hi].copy()
        x[x >= 0] -= lo
        return x

    fields = {name: getattr(fa, name) for name in fa._fields}
    for name in ("feature", "feature2", "oblique", "threshold", "value", "depth",
                 "n_samples", "sparse", "missing_left"):
        if fields[name] is not None:
            fields[name] = fields[name][lo:hi].copy()
    fields.update(roots=np.zeros(1, np.int32), left=local(fa.left), right=local(fa.right))
    return type(fa)(**fields)


def warm_start_seeds(params, seeds_from, n_old):
    """The seeds of the trees to add in a warm start.

    These are the seeds a fresh forest of ``n_estimators`` trees gives its trees
    ``n_old..`` (scikit-learn's rule).  Warns (``UserWarning``) and returns an
    empty array when ``n_estimators`` equals ``n_old``.

    Parameters
    ----------
    params : dict
        The estimator's parameters (``"n_estimators"`` and ``"random_state"`` are
        read).
    seeds_from : callable
        ``seeds_from(random_state, n)`` gives the seeds of ``n`` trees.
    n_old : int
        Number of trees already grown.

    Returns
    -------
    ndarray
        The seeds of trees ``n_old .. n_estimators - 1``.

    Raises
    ------
    ValueError
        When ``n_estimators`` is below ``n_old``.
    """
    n_new = params["n_estimators"]
    if n_new < n_old:
        raise ValueError(f"n_estimators={n_new} must be at least the {n_old} trees already "
                         "grown when warm_start=True; set warm_start=False to grow a new "
                         "forest")
    if n_new == n_old:
        warnings.warn(f"warm_start=True and n_estimators={n_new} equals the trees already "
                      "grown: no tree was added", UserWarning)
    return seeds_from(params["random_state"], n_new)[n_old:]
