"""Missing values (NaN) in the breadth-first grower's families: the NaN-aware
split searches and partition (two-probe, CO2; extra-trees' cuts are in
:mod:`facesegment.forest._extra_kernels`).

A split's value is missing when it is NaN, computed as prediction computes it
(:func:`facesegment.forest._missing.split_value`): ``x[a] - x[b]`` when either
probe is missing, an oblique row's ``w @ x`` when a feature it reads is.  At
a node, every candidate's present values are sorted and every cut is scored
with the missing values on the right and on the left, and "every present
value left, the missing ones right" is a candidate too
(:func:`facesegment.forest._cart_kernels.scan_cart_copies`, information gain);
the split keeps the side that gains most (scikit-learn's rule).  A node whose
samples miss none of the split's values sends future missing values to the
larger child (:func:`partition_missing`).

These searches run only when ``X`` holds a NaN; without one the families'
own exact kernels run.
"""

import copy

import numpy as np

from .._jit import NJIT, njit
from ._cart_kernels import scan_cart_copies
from ._criteria import midpoint_threshold, phi_table
from ._missing import split_value
from ._predict import split_by_mask


@njit(**NJIT)
def scan_missing(vals, lab, n_classes, min_leaf, phi):
    """Best cut of one candidate's values with missing ones (NaN) on either side.

    Parameters
    ----------
    vals : float32 (m,)
        The candidate's value of each sample of the node (NaN: missing).
    lab : int32 (m,)
        The samples' classes.
    n_classes, min_leaf : int
    phi : float64 (m + 1,)
        ``k log k`` (:func:`facesegment.forest._criteria.phi_table`).

    Returns
    -------
    (threshold float32, gain, missing_left): ``value <= threshold`` goes left,
    missing values left when ``missing_left`` is 1, right when 0, -1 when no
    sample misses the value; gain -1.0 when no cut leaves ``min_leaf``
    samples on each side.
    """
    m = vals.shape[0]
    tot = np.zeros(n_classes, np.int64)
    miss = np.zeros(n_classes, np.int64)
    m0 = 0
    for i in range(m):
        if vals[i] != vals[i]:
            miss[lab[i]] += 1
        else:
            tot[lab[i]] += 1
            m0 += 1
    if m0 == 0:
        return np.float32(0.0), -1.0, -1
    pv = np.empty(m0, np.float32)
    pl = np.empty(m0, np.int32)
    k = 0
    for i in range(m):
        if vals[i] == vals[i]:
            pv[k] = vals[i]
            pl[k] = lab[i]
            k += 1
    order = np.argsort(pv, kind="mergesort")
    vs = pv[order]
    ls = pl[order]
    copies = np.ones(m0, np.int64)
    left = np.zeros(n_classes, np.int64)
    i, gain, ml = scan_cart_copies(vs, ls, copies, m0, tot, miss, min_leaf, False, phi, left)
    if i < 0:
        return np.float32(0.0), -1.0, -1
    if i == m0 - 1:
        return np.float32(vs[i]), gain, ml
    return midpoint_threshold(vs[i], vs[i + 1]), gain, ml


@njit(**NJIT)
def pair_split_missing(X, y, idx, fa, fb, n_classes, min_leaf):
    """Best two-probe split ``x[a] - x[b] <= t`` of the samples ``idx`` when X
    holds NaN (a difference is missing when either probe is).

    Parameters
    ----------
    X : float32 (n, p); y : int32 (n,); idx : int64 (m,) the node's samples
    fa, fb : int64 (q,) the candidate pairs
    n_classes, min_leaf : int

    Returns
    -------
    (k, threshold, gain, missing_left): the best pair's position in ``fa``
    (-1: none splits the node; the first best wins), as :func:`scan_missing`.
    """
    m = idx.shape[0]
    lab = np.empty(m, np.int32)
    for i in range(m):
        lab[i] = y[idx[i]]
    phi = phi_table(m, False)
    vals = np.empty(m, np.float32)
    best_k = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    best_ml = -1
    for k in range(fa.shape[0]):
        a = fa[k]
        b = fb[k]
        for i in range(m):
            vals[i] = np.float32(X[idx[i], a]) - np.float32(X[idx[i], b])
        t, g, ml = scan_missing(vals, lab, n_classes, min_leaf, phi)
        if g > best_gain:
            best_k, best_t, best_gain, best_ml = k, t, g, ml
    return best_k, best_t, best_gain, best_ml


@njit(**NJIT)
def node_split_values(X, idx, f, f2, ob, sp, weights, sp_ptr, sp_index, sp_w):
    """float32 (m,) values of one split for the rows ``X[idx]`` (NaN: missing),
    as :func:`facesegment.forest._missing.split_value` computes them.

    Parameters
    ----------
    X : uint8 or float32 (n, p); idx : int64 (m,) the rows
    f, f2, ob, sp : int
        The split's feature, second feature, dense row and sparse row (-1: none).
    weights : float32 (n_rows, p) the dense rows ``ob`` indexes
    sp_ptr, sp_index, sp_w : the sparse rows ``sp`` indexes
    """
    out = np.empty(idx.shape[0], np.float32)
    for i in range(idx.shape[0]):
        out[i] = split_value(X[idx[i]], f, f2, ob, sp, weights, sp_ptr, sp_index, sp_w)
    return out


def split_values(tree, seg, split):
    """The values of the grower's ``split`` for the samples ``seg`` of ``tree``.

    Parameters
    ----------
    tree : TreeGrowth
        The tree being grown (its ``X``; its dense rows are ``tree.weights``).
    seg : int64 ndarray of shape (m,)
        The node's samples.
    split : Split
        The split (:class:`~facesegment.forest.families.Split`).

    Returns
    -------
    float32 ndarray of shape (m,)
        The split's value of each sample (NaN: missing), as
        :func:`node_split_values` computes it.
    """
    none_w = tree.empty_w
    sp_ptr, sp_index, sp_w = np.zeros(1, np.int64), np.zeros(1, np.int32), np.zeros(1, np.float32)
    sp = ob = -1
    if split.sparse is not None:
        sp_index = np.ascontiguousarray(split.sparse[0], np.int32)
        sp_w = np.ascontiguousarray(split.sparse[1], np.float32)
        sp_ptr = np.array([0, sp_index.shape[0]], np.int64)
        sp = 0
    elif split.oblique >= 0:
        none_w = np.ascontiguousarray(tree.weights[split.oblique], np.float32)[None, :]
        ob = 0
    return node_split_values(tree.X, seg, split.feature, split.feature2, ob, sp, none_w,
                             sp_ptr, sp_index, sp_w)


def partition_missing(tree, seg, buf, split):
    """Stable partition of ``seg`` by ``split``, missing values sent to one side.

    Missing values go to ``split.missing_left``'s side, or when it is -1 to the
    side of the larger child of the present values (ties left).

    Parameters
    ----------
    tree : TreeGrowth
        The tree being grown.
    seg : int64 ndarray of shape (m,)
        The node's samples; reordered in place, left ones first.
    buf : int64 ndarray of at least m entries
        Scratch.
    split : Split
        The split.

    Returns
    -------
    n_left : int
        The number going left.
    missing_left : int
        The side missing values took (1 left, 0 right).
    """
    vals = split_values(tree, seg, split)
    nan = np.isnan(vals)
    present_left = vals <= np.float32(split.threshold)
    ml = split.missing_left
    if ml < 0:
        n_left = int(present_left.sum())
        ml = int(n_left >= int((~nan).sum()) - n_left)
    nl = split_by_mask(seg, buf, np.where(nan, bool(ml), present_left))
    return nl, ml


def best_values_split(vals, y, seg, n_classes, min_leaf):
    """:func:`scan_missing` of one candidate's values ``vals`` on the samples ``seg``.

    Parameters
    ----------
    vals : float32 array of shape (m,)
        The candidate's value of each sample of ``seg`` (NaN: missing).
    y : int ndarray of shape (n,)
        Class ids of all samples.
    seg : int64 ndarray of shape (m,)
        The node's samples.
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side (at least 1 is used).

    Returns
    -------
    threshold : float
        ``value <= threshold`` goes left.
    gain : float
        Information gain; -1.0 when no cut is valid.
    missing_left : int
        1 left, 0 right, -1 when no sample misses the value.
    """
    m = seg.shape[0]
    lab = np.ascontiguousarray(y[seg], np.int32)
    t, g, ml = scan_missing(np.ascontiguousarray(vals, np.float32), lab, n_classes,
                            max(int(min_leaf), 1), phi_table(m, False))
    return float(t), float(g), int(ml)


def imputed_node(tree, seg):
    """The node's rows with their missing values imputed, as a view of ``tree``.

    Parameters
    ----------
    tree : TreeGrowth
        The tree being grown (``tree.splitter.mean`` gives the imputed values:
        the feature means, zeros after normalisation).
    seg : int64 ndarray of shape (m,)
        The node's samples.

    Returns
    -------
    tuple or None
        ``(view, local)``: a shallow copy of ``tree`` whose ``X`` (float32
        (m, p)) holds the rows ``seg`` with their missing values replaced and
        ``y`` (int32 (m,)) their classes, and the local sample indices
        ``0..m-1`` (int64); None when those rows miss nothing.
    """
    Xn = np.array(tree.X[seg], dtype=np.float32)
    nan = np.isnan(Xn)
    if not nan.any():
        return None
    Xn[nan] = np.broadcast_to(tree.splitter.mean, Xn.shape)[nan]
    view = copy.copy(tree)
    view.X = Xn
    view.y = np.ascontiguousarray(tree.y[seg], np.int32)
    return view, np.arange(seg.shape[0], dtype=np.int64)


__all__ = ["scan_missing", "pair_split_missing", "node_split_values", "split_values",
           "partition_missing", "best_values_split", "imputed_node"]
