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
    """Mean decrease in impurity per feature of the forest ``fa`` (see
    :attr:`BaseForest.feature_importances_`); float64 (n_features,).  The
    impurity is the entropy, or the Gini index with ``criterion="gini"``."""
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
