"""Exact (non-fast) loss-augmented inference of non-greedy trees, and an SGD
pass using it (the paper's Eq. 10-12 and its Figure 4 baseline).

Plain arrays and scalars only, no validation; the tree tables, ``W``,
``Theta`` and the SGD state are those of
:mod:`facesegment.forest._nongreedy_kernels` (same layout, same lazy
momentum, same update code), so a pass here differs from ``sgd_pass`` only in
how each sample's bit vector ``g`` is found.

For one sample the kernel computes the activation ``a_r`` of *every* internal
node (O(2^d p) for a complete tree of depth d), then scores *every* leaf in one
top-down pass over the nodes (parents before children: O(2^d)), each leaf's
score being the sum of its path's split terms ``(dir_k - ref_k) a_k``, and
keeps the best ``score + l(theta_leaf, y)``.  Two bounds:

* ``full=False``: the Hamming ball of radius 1 around ``h`` (Eq. 13/14),
  ``ref = h``, leaves whose path disagrees with ``h`` in at most one bit.  The
  same maximisation as the fast ``_lai`` (which descends only the d subtrees
  a flip can reach, with pruning), so the same value and the same ``g`` (up
  to exact ties, which have probability zero); the two passes make the same
  updates.
* ``full=True``: every bit vector (Eq. 10, the bound of Eq. 7): off-path
  bits are set to ``sgn(a)``, so ``ref = sgn(a)`` and every leaf competes;
  with a fixed leaf (SSGD) the bits ``h`` forces against ``sgn(a)`` add the
  constant ``sum (sgn(a) - h) . a``.  ``g`` may differ from ``h`` in several
  bits, each giving its row the subgradient ``(g_r - h_r) [z, -1]``.

Cost per sample: every row's dot product plus O(number of nodes), against
about d dot products (plus pruned descents) for the fast inference.
"""


import numpy as np

from .._jit import REASSOC, njit
from ._nongreedy_kernels import _act, _batch_step, _leaf_grad, _row_grad, _sync, leaf_tables


@njit(**REASSOC)
def _lai_exact(Z, i, yi, assigned, W, V, last, t, eta, mu, nu, left, right, row, leaf,
               path_node, path_dir, path_len, Theta, lse, full, a, hb, sb, acc, cnt,
               counters):
    """Exact loss-augmented inference of sample i (see module).

    Parameters
    ----------
    Z : float32 (n, p)
        Normalised samples.
    i : int
        The sample.
    yi : int
        Its class.
    assigned : int
        Its fixed leaf (row of ``Theta``, SSGD), or -1 (``h = sgn(a)``).
    W, V : float32 (n_internal, p + 1)
        The split rows and their momenta (every row is synced in place when
        ``t >= 0``).
    last : int64 (n_internal,)
        Step of each row's last update.
    t : int
        The current step; -1: no sync.
    eta, mu, nu : float
        Learning rate, momentum and squared ball radius.
    left, right, row, leaf : int32 (n_nodes,)
        The tree's tables.
    path_node : int32 (n_leaves, D)
        Each leaf's path nodes.
    path_dir : int8 (n_leaves, D)
        The direction taken at each (+1 right, -1 left).
    path_len : int32 (n_leaves,)
        Each path's length.
    Theta : float32 (n_leaves, C)
        The leaves' log-probabilities.
    lse : float64 (n_leaves,)
        Their log-sum-exp (:func:`leaf_tables`).
    full : bool
        Every bit vector (True) or the Hamming ball of radius 1 (False).
    a : float32 (>= n_internal,)
        Written: each row's activation.
    hb : int8 (>= n_internal,)
        Written: the bits ``h``.
    sb : int8 (>= n_internal,)
        Written: ``sgn(a)``.
    acc : float64 (n_nodes,)
        Scratch: each node's path sum.
    cnt : int32 (n_nodes,)
        Scratch: each node's disagreements with ``h``.
    counters : int64 (4,)
        ``counters[0]`` += dot products, ``counters[1]`` += leaves scored.

    Returns
    -------
    surrogate : float
        The sample's surrogate, relative to ``h . a``.
    chosen : int
        The chosen leaf node.
    path_leaf : int
        The leaf node the bits ``h`` reach.
    """
    m = W.shape[0]
    n_nodes = left.shape[0]
    for r in range(m):
        v = _act(W, V, last, t, eta, mu, nu, r, Z, i)
        a[r] = v
        s = 1 if v > 0 else -1
        sb[r] = s
        hb[r] = s
    if assigned >= 0:
        for k in range(path_len[assigned]):
            hb[row[path_node[assigned, k]]] = path_dir[assigned, k]
    counters[0] += m
    base = 0.0
    if full:
        for r in range(m):
            if sb[r] != hb[r]:
                base += float(sb[r] - hb[r]) * float(a[r])
    # the path leaf: follow h from the root
    node = 0
    while left[node] >= 0:
        node = right[node] if hb[row[node]] > 0 else left[node]
    hnode = node
    # one top-down pass: parents come before children (breadth-first ids)
    acc[0] = 0.0
    cnt[0] = 0
    for node in range(n_nodes):
        if left[node] < 0:
            continue
        r = row[node]
        ref = sb[r] if full else hb[r]
        av = float(a[r])
        rn, ln = right[node], left[node]
        if ref > 0:
            acc[rn] = acc[node]
            cnt[rn] = cnt[node]
            acc[ln] = acc[node] + float(-1 - ref) * av
            cnt[ln] = cnt[node] + 1
        else:
            acc[ln] = acc[node]
            cnt[ln] = cnt[node]
            acc[rn] = acc[node] + float(1 - ref) * av
            cnt[rn] = cnt[node] + 1
    lf = leaf[hnode]
    best = base + acc[hnode] + lse[lf] - Theta[lf, yi]
    nbest = hnode
    scored = 0
    for node in range(n_nodes):
        if left[node] >= 0 or node == hnode:
            continue
        if not full and cnt[node] > 1:
            continue
        scored += 1
        lk = leaf[node]
        val = base + acc[node] + lse[lk] - Theta[lk, yi]
        if val > best:
            best = val
            nbest = node
    counters[1] += scored
    return best, nbest, hnode


@njit(**REASSOC)
def lai_exact_values(Z, y, assign, W, Theta, left, right, row, leaf, path_node, path_dir,
                     path_len, full, sur, chosen):
    """Per sample: the exact surrogate (relative to ``h . a``) and the chosen leaf.

    Nothing but the outputs is modified.

    Parameters
    ----------
    Z : float32 (n, p)
        Normalised samples.
    y : int (n,)
        Their classes.
    assign : int32 (n,)
        Each sample's fixed leaf or -1.
    W : float32 (n_internal, p + 1)
        The split rows.
    Theta : float32 (n_leaves, C)
        The leaves' log-probabilities.
    left, right, row, leaf : int32 (n_nodes,)
        The tree's tables.
    path_node : int32 (n_leaves, D)
        Each leaf's path nodes.
    path_dir : int8 (n_leaves, D)
        The direction taken at each.
    path_len : int32 (n_leaves,)
        Each path's length.
    full : bool
        Every bit vector (True) or the Hamming ball of radius 1 (False).
    sur : float64 (n,)
        Written: the surrogate.
    chosen : int (n,)
        Written: the chosen leaf (row of ``Theta``).
    """
    n_leaves, C = Theta.shape
    n_nodes = left.shape[0]
    m = W.shape[0]
    lse = np.empty(n_leaves)
    submax = np.empty((n_nodes, C))
    leaf_tables(Theta, leaf, left, right, lse, submax)
    a = np.empty(max(m, 1), np.float32)
    hb = np.empty(max(m, 1), np.int8)
    sb = np.empty(max(m, 1), np.int8)
    acc = np.empty(n_nodes)
    cnt = np.empty(n_nodes, np.int32)
    V = np.zeros((1, 1), np.float32)
    last = np.zeros(1, np.int64)
    counters = np.zeros(4, np.int64)
    for i in range(Z.shape[0]):
        best, nb, _ = _lai_exact(Z, i, y[i], assign[i], W, V, last, -1, 0.0, 0.0, 1.0,
                                    left, right, row, leaf, path_node, path_dir, path_len,
                                    Theta, lse, full, a, hb, sb, acc, cnt, counters)
        sur[i] = best
        chosen[i] = leaf[nb]


@njit(**REASSOC)
def sgd_pass_exact(Z, y, order, assign, W, V, last, Theta, VT, left, right, row, leaf,
                   path_node, path_dir, path_len, eta, mu, nu, batch, t0, G, GT, flag,
                   counters, full):
    """``sgd_pass`` (same arguments, same state, same updates) with exact inference.

    Parameters
    ----------
    Z : float32 (n, p)
        Normalised samples.
    y : int (n,)
        Their classes.
    order : int64 (n_order,)
        The samples of the pass, in order.
    assign : int32 (n,)
        Each sample's fixed leaf (SSGD) or -1.
    W, V : float32 (n_internal, p + 1)
        The split rows and their momenta; updated in place.
    last : int64 (n_internal,)
        Step of each row's last update; updated in place.
    Theta, VT : float32 (n_leaves, C)
        The leaves' log-probabilities and momenta; updated in place.
    left, right, row, leaf : int32 (n_nodes,)
        The tree's tables.
    path_node : int32 (n_leaves, D)
        Each leaf's path nodes.
    path_dir : int8 (n_leaves, D)
        The direction taken at each.
    path_len : int32 (n_leaves,)
        Each path's length.
    eta : float32
        Learning rate.
    mu : float
        Momentum.
    nu : float
        Squared radius of the rows' ball.
    batch : int
        Mini-batch size.
    t0 : int
        The first step's number.
    G : float32 (n_internal, p + 1)
        Zeroed gradient buffer; left zeroed.
    GT : float32 (n_leaves, C)
        Zeroed gradient buffer; left zeroed.
    flag : bool (n_internal,)
        Zeroed buffer; left zeroed.
    counters : int64 (4,)
        Added to: dot products, leaves scored, samples, steps.
    full : bool
        Every bit vector (True) or the Hamming ball of radius 1 (False), as in
        the module docstring.

    Returns
    -------
    t : int
        The next step's number.
    total : float
        Sum of the samples' surrogates.
    """
    n = order.shape[0]
    n_leaves, C = Theta.shape
    n_nodes = left.shape[0]
    m = W.shape[0]
    lse = np.empty(n_leaves)
    submax = np.empty((n_nodes, C))
    a = np.empty(max(m, 1), np.float32)
    hb = np.empty(max(m, 1), np.int8)
    sb = np.empty(max(m, 1), np.int8)
    gb = np.empty(max(m, 1), np.int8)
    acc = np.empty(n_nodes)
    cnt = np.empty(n_nodes, np.int32)
    touched = np.empty(max(m, 1), np.int32)
    t = t0
    total = 0.0
    for start in range(0, n, batch):
        end = min(n, start + batch)
        inv_m = np.float32(1.0 / (end - start))
        leaf_tables(Theta, leaf, left, right, lse, submax)
        nt = 0
        for q in range(start, end):
            i = order[q]
            yi = y[i]
            best, nb, hnode = _lai_exact(Z, i, yi, assign[i], W, V, last, t, eta, mu, nu,
                                            left, right, row, leaf, path_node, path_dir,
                                            path_len, Theta, lse, full, a, hb, sb, acc, cnt,
                                            counters)
            total += best
            lb = leaf[nb]
            if nb != hnode:  # at the path leaf g = h (off its path h = sgn(a))
                # g: the chosen leaf's path, elsewhere sgn(a) (full) or h (radius 1)
                for r in range(m):
                    gb[r] = sb[r] if full else hb[r]
                for k in range(path_len[lb]):
                    gb[row[path_node[lb, k]]] = path_dir[lb, k]
                for r in range(m):
                    if gb[r] != hb[r]:
                        nt = _row_grad(G, flag, touched, nt, r,
                                       np.float32(2.0 * hb[r]) * inv_m, Z, i)
            _leaf_grad(GT, Theta, lse, lb, yi, inv_m)
        _batch_step(W, V, last, G, GT, VT, Theta, flag, touched, nt, t, eta, mu, nu)
        t += 1
        counters[3] += 1
    counters[2] += n
    for r in range(m):
        _sync(W, V, last, r, t, eta, mu, nu)
    return t, total


__all__ = ["lai_exact_values", "sgd_pass_exact"]
