"""Mean decrease in impurity per feature of a classification forest."""

import numpy as np


def _sparse_importances(fa, imp, tree, dec, inner, scale):
    """Add the sparse oblique splits' decreases to ``imp`` (as for dense rows)."""
    if fa.sparse is None:
        return
    sp = fa.sparse[inner]
    for r in np.flatnonzero(sp >= 0):
        row = sp[r]
        lo, hi = fa.sparse_ptr[row], fa.sparse_ptr[row + 1]
        feats = fa.sparse_index[lo:hi].astype(np.int64)
        share = np.abs(fa.sparse_weight[lo:hi].astype(np.float64))
        if scale is not None:
            share = share * scale[feats]
        total = share.sum()
        if total > 0:
            np.add.at(imp[tree[r]], feats, share / total * dec[r])


def forest_feature_importances(fa, n_features, feature_std=None, chunk=256,
                               criterion="entropy"):
    """Mean decrease in impurity per feature of the forest ``fa``.

    See :attr:`BaseForest.feature_importances_`.  Each internal node's weighted
    impurity decrease (never negative) goes to its feature (axis), half to each
    probe (two-probe), or is shared among an oblique row's features in
    proportion to ``|w_j|`` (times ``feature_std`` when given); each tree's
    importances are normalised to sum to 1, the trees without a split are left
    out, and the mean is normalised to sum to 1.

    Parameters
    ----------
    fa : ForestArrays
        The forest.
    n_features : int
        Number of features.
    feature_std : array-like of shape (n_features,) or None, default=None
        Scales the oblique weights back to the normalised features the splits
        were optimised on; None: the raw weights.
    chunk : int, default=256
        Dense oblique rows processed at a time.
    criterion : {"entropy", "gini"}, default="entropy"
        The impurity (any other value means entropy).

    Returns
    -------
    float64 ndarray of shape (n_features,)
        The importances, summing to 1 (all zeros when no tree splits).
    """
    v = fa.value.astype(np.float64)
    if criterion == "gini":
        h = 1.0 - np.sum(v * v, axis=1)
    else:
        h = -np.sum(v * np.log(np.where(v > 0, v, 1.0)), axis=1)
    n = fa.n_samples.astype(np.float64)
    inner = np.flatnonzero(fa.left >= 0)
    lt, rt = fa.left[inner], fa.right[inner]
    dec = np.maximum(n[inner] * h[inner] - n[lt] * h[lt] - n[rt] * h[rt], 0.0)
    tree = np.searchsorted(fa.roots, inner, side="right") - 1
    f1, f2, ob = fa.feature[inner], fa.feature2[inner], fa.oblique[inner]
    imp = np.zeros((fa.n_trees, n_features), dtype=np.float64)
    axis = (ob < 0) & (f1 >= 0) & (f2 < 0)
    np.add.at(imp, (tree[axis], f1[axis]), dec[axis])
    two = (ob < 0) & (f1 >= 0) & (f2 >= 0)
    np.add.at(imp, (tree[two], f1[two]), dec[two] / 2)
    np.add.at(imp, (tree[two], f2[two]), dec[two] / 2)
    rows = np.flatnonzero(ob >= 0)
    scale = None if feature_std is None else np.asarray(feature_std, np.float64).ravel()
    _sparse_importances(fa, imp, tree, dec, inner, scale)
    for start in range(0, rows.shape[0], chunk):
        r = rows[start:start + chunk]
        share = np.abs(fa.weights[ob[r]].astype(np.float64))
        if scale is not None:
            share *= scale
        total = share.sum(axis=1, keepdims=True)
        share = np.divide(share, total, out=np.zeros_like(share), where=total > 0)
        np.add.at(imp, tree[r], share * dec[r, None])
    per_tree = imp.sum(axis=1)
    used = per_tree > 0
    if not used.any():
        return np.zeros(n_features, dtype=np.float64)
    out = (imp[used] / per_tree[used, None]).mean(axis=0)
    return out / out.sum()


__all__ = ["forest_feature_importances"]
