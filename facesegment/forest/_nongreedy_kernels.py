"""Numba kernels of non-greedy decision trees (see :mod:`facesegment.forest.nongreedy`).

Plain arrays and scalars only, no validation: the estimator validates once.
Every kernel has a brute-force NumPy reference in ``tests/naive_nongreedy.py``.
All release the GIL so trees are trained in parallel threads.

One tree, local to these kernels (nodes breadth first, root 0):

* ``left, right`` int32 (n_nodes,): children, -1 at leaves;
* ``row`` int32 (n_nodes,): row of ``W`` of an internal node, -1 at leaves;
* ``leaf`` int32 (n_nodes,): row of ``Theta`` of a leaf, -1 at internal nodes;
* ``path_node`` int32 (n_leaves, D), ``path_dir`` int8 (n_leaves, D),
  ``path_len`` int32 (n_leaves,): the internal nodes from the root to each leaf
  and the direction taken at each (+1 right, -1 left);
* ``W`` float32 (n_internal, p + 1): the split of row r on normalised features
  ``z`` is ``a_r = W[r, :p] @ z - W[r, p]`` (the paper's constant feature is -1);
  ``a_r > 0`` (bit +1) goes right, ``a_r <= 0`` (bit -1) goes left;
* ``Theta`` float32 (n_leaves, C): unnormalised log-probabilities of the leaves;
  the loss is the log loss ``l(theta, y) = logsumexp(theta) - theta[y]``.

Fast loss-augmented inference (the paper's Eq. 13, Hamming ball of radius 1):
with ``h`` the bits of the path taken (SGD: ``sgn(W z)``; SSGD: the path to
the sample's fixed leaf, other bits ``sgn(W z)``), the surrogate of one sample
is, relative to the score ``h . a``,

    max( l(theta_leaf(h), y),  max_k  -2 h_k a_k + l(theta_leaf(h with bit k flipped), y) )

over the path bits ``k`` (flipping an off-path bit costs ``-2 |a|`` and keeps
the leaf, so it never wins).  Flipping bit k leads to the other child of the
k-th path node and then down by ``sgn(W z)``: O(d^2) dot products per sample
at most; a flip whose bound ``-2 h_k a_k + max loss in that subtree`` cannot
beat the best so far is not descended (exact pruning).  Subgradients: the
flipped row r gets ``-2 h_k [z, -1]``, the chosen leaf ``softmax(theta) - e_y``.

SGD with momentum on mini-batches (gradients averaged), rows of ``W``
projected onto ``||w||^2 <= nu`` after each update.  Momentum is applied
lazily: a row not read nor updated during ``k`` steps is brought up to date
the next time it is needed (``w -= eta v (mu + ... + mu^k)``, ``v *= mu^k``,
then one projection), which equals the dense update whenever the ball
constraint is inactive during those steps.
"""

import math

import numpy as np

from .._jit import NJIT, REASSOC, njit


@njit(**REASSOC)
def _dot_row(W, r, Z, i):
    """``a_r(z_i) = W[r, :p] @ Z[i] - W[r, p]`` (float32)."""
    p = Z.shape[1]
    s = np.float32(0.0)
    for j in range(p):
        s += W[r, j] * Z[i, j]
    return s - W[r, p]


@njit(**REASSOC)
def _project(W, r, nu):
    """Scale row r of W back onto the ball ``||w||^2 <= nu``."""
    q = W.shape[1]
    s = 0.0
    for j in range(q):
        s += W[r, j] * W[r, j]
    if s > nu:
        f = np.float32(math.sqrt(nu / s))
        for j in range(q):
            W[r, j] *= f


@njit(**REASSOC)
def _sync(W, V, last, r, t, eta, mu, nu):
    """Bring row r to its state after step ``t - 1`` (lazy momentum, see module).

    The ``k = t - 1 - last[r]`` momentum steps the row missed are applied at
    once (``w -= eta v (mu + ... + mu^k)``, ``v *= mu^k``), then the row is
    projected; nothing happens when ``k <= 0``.

    Parameters
    ----------
    W : float32 (n_internal, p + 1)
        The split rows; row ``r`` updated in place.
    V : float32 (n_internal, p + 1)
        Their momenta; row ``r`` updated in place.
    last : int64 (n_internal,)
        Step of each row's last update; ``last[r]`` set to ``t - 1``.
    r : int
        The row.
    t : int
        The current step.
    eta : float
        Learning rate.
    mu : float
        Momentum, in [0, 1).
    nu : float
        Squared radius of the ball the rows are projected onto.
    """
    k = t - 1 - last[r]
    if k <= 0:
        return
    if mu > 0.0:
        mk = mu ** k
        g = np.float32(eta * mu * (1.0 - mk) / (1.0 - mu))
        q = W.shape[1]
        for j in range(q):
            W[r, j] -= g * V[r, j]
            V[r, j] *= np.float32(mk)
        _project(W, r, nu)
    last[r] = t - 1


@njit(**REASSOC)
def _act(W, V, last, t, eta, mu, nu, r, Z, i):
    """Activation ``a_r(z_i)`` of row r on sample i; with ``t >= 0`` the row is synced first.

    Parameters
    ----------
    W, V : float32 (n_internal, p + 1)
        The split rows and their momenta (row ``r`` synced in place when
        ``t >= 0``).
    last : int64 (n_internal,)
        Step of each row's last update.
    t : int
        The current step; -1: no sync (evaluation).
    eta, mu, nu : float
        Learning rate, momentum and squared ball radius (:func:`_sync`).
    r : int
        The row.
    Z : float32 (n, p)
        Normalised samples.
    i : int
        The sample.

    Returns
    -------
    float32
        ``W[r, :p] @ Z[i] - W[r, p]``.
    """
    if t >= 0:
        _sync(W, V, last, r, t, eta, mu, nu)
    return _dot_row(W, r, Z, i)


@njit(**REASSOC)
def _descend(W, V, last, t, eta, mu, nu, Z, i, left, right, row, node):
    """Node reached from ``node`` following ``sgn(W z_i)``.

    Parameters
    ----------
    W, V : float32 (n_internal, p + 1)
        The split rows and their momenta (rows read are synced in place when
        ``t >= 0``).
    last : int64 (n_internal,)
        Step of each row's last update.
    t : int
        The current step; -1: no sync.
    eta, mu, nu : float
        Learning rate, momentum and squared ball radius (:func:`_sync`).
    Z : float32 (n, p)
        Normalised samples.
    i : int
        The sample.
    left, right, row : int32 (n_nodes,)
        The tree's children and each internal node's row of ``W``.
    node : int
        The starting node.

    Returns
    -------
    int
        The leaf node reached.
    """
    while left[node] >= 0:
        if _act(W, V, last, t, eta, mu, nu, row[node], Z, i) > 0:
            node = right[node]
        else:
            node = left[node]
    return node


@njit(**NJIT)
def leaf_tables(Theta, leaf, left, right, lse, submax):
    """Each leaf's log-sum-exp, and the largest loss under each node.

    ``lse[l] = logsumexp(Theta[l])`` and ``submax[node, c]`` is the largest
    loss ``lse[l] - Theta[l, c]`` over the leaves l under ``node`` (children
    after parents: one pass from the last node).

    Parameters
    ----------
    Theta : float32 (n_leaves, C)
        The leaves' unnormalised log-probabilities.
    leaf : int32 (n_nodes,)
        Row of ``Theta`` of each leaf, -1 at internal nodes.
    left, right : int32 (n_nodes,)
        The tree's children.
    lse : float64 (n_leaves,)
        Written in place.
    submax : float64 (n_nodes, C)
        Written in place.
    """
    n_leaves, C = Theta.shape
    for l in range(n_leaves):
        m = Theta[l, 0]
        for c in range(1, C):
            m = max(m, Theta[l, c])
        s = 0.0
        for c in range(C):
            s += math.exp(Theta[l, c] - m)
        lse[l] = m + math.log(s)
    for node in range(left.shape[0] - 1, -1, -1):
        if left[node] < 0:
            lf = leaf[node]
            for c in range(C):
                submax[node, c] = lse[lf] - Theta[lf, c]
        else:
            a, b = left[node], right[node]
            for c in range(C):
                submax[node, c] = max(submax[a, c], submax[b, c])


@njit(**REASSOC)
def _lai(Z, i, yi, assigned, W, V, last, t, eta, mu, nu, left, right, row, leaf,
         path_node, path_dir, path_len, Theta, lse, submax, pn, pa, ph, counters):
    """Fast loss-augmented inference of sample i (see module).

    Parameters
    ----------
    Z : float32 (n, p)
        Normalised samples.
    i : int
        The sample.
    yi : int
        Its class.
    assigned : int
        Its fixed leaf (row of ``Theta``, SSGD), or -1 (the path of
        ``sgn(W z)``).
    W, V : float32 (n_internal, p + 1)
        The split rows and their momenta (rows read are synced in place when
        ``t >= 0``).
    last : int64 (n_internal,)
        Step of each row's last update.
    t : int
        The current step; -1: no sync.
    eta, mu, nu : float
        Learning rate, momentum and squared ball radius (:func:`_sync`).
    left, right, row, leaf : int32 (n_nodes,)
        The tree's children, rows of ``W`` and rows of ``Theta``.
    path_node : int32 (n_leaves, D)
        Each leaf's path nodes.
    path_dir : int8 (n_leaves, D)
        The direction taken at each (+1 right, -1 left).
    path_len : int32 (n_leaves,)
        Each path's length.
    Theta : float32 (n_leaves, C)
        The leaves' log-probabilities.
    lse : float64 (n_leaves,)
        From :func:`leaf_tables`.
    submax : float64 (n_nodes, C)
        From :func:`leaf_tables`.
    pn : int32 (D,)
        Written: the path's nodes.
    pa : float32 (D,)
        Written: their activations.
    ph : int8 (D,)
        Written: the path's bits.
    counters : int64 (4,)
        ``counters[0]`` += dot products on the path, ``counters[1]`` +=
        alternative descents.

    Returns
    -------
    surrogate : float
        The sample's surrogate.
    k : int
        The flipped path position, -1 for none.
    leaf : int
        The chosen leaf (row of ``Theta``).
    depth : int
        The path's length.
    path_leaf : int
        The leaf at the end of the path (row of ``Theta``).
    """
    if assigned < 0:
        node = 0
        d = 0
        while left[node] >= 0:
            a = _act(W, V, last, t, eta, mu, nu, row[node], Z, i)
            pn[d] = node
            pa[d] = a
            ph[d] = 1 if a > 0 else -1
            node = right[node] if a > 0 else left[node]
            d += 1
        lf = leaf[node]
    else:
        d = path_len[assigned]
        for k in range(d):
            node = path_node[assigned, k]
            pn[k] = node
            pa[k] = _act(W, V, last, t, eta, mu, nu, row[node], Z, i)
            ph[k] = path_dir[assigned, k]
        lf = assigned
    counters[0] += d
    best = lse[lf] - Theta[lf, yi]
    kbest = -1
    lbest = lf
    for k in range(d):
        margin = -2.0 * ph[k] * pa[k]
        child = left[pn[k]] if ph[k] > 0 else right[pn[k]]
        if margin + submax[child, yi] <= best:
            continue
        end = _descend(W, V, last, t, eta, mu, nu, Z, i, left, right, row, child)
        counters[1] += 1
        lk = leaf[end]
        val = margin + lse[lk] - Theta[lk, yi]
        if val > best:
            best = val
            kbest = k
            lbest = lk
    return best, kbest, lbest, d, lf


@njit(**REASSOC)
def _row_grad(G, flag, touched, nt, r, coef, Z, i):
    """Add ``coef * [-z_i, 1]`` to row r's gradient, listing r once per batch in ``touched``.

    Parameters
    ----------
    G : float32 (n_internal, p + 1)
        Gradient buffer; row ``r`` added to in place.
    flag : bool (n_internal,)
        Whether a row is listed; ``flag[r]`` set.
    touched : int32 (>= nt + 1,)
        The rows listed so far; ``r`` appended when not yet listed.
    nt : int
        Number of rows listed.
    r : int
        The row.
    coef : float32
        The coefficient (``2 h_k / m``).
    Z : float32 (n, p)
        Normalised samples.
    i : int
        The sample.

    Returns
    -------
    int
        The new number of listed rows.
    """
    if not flag[r]:
        flag[r] = True
        touched[nt] = r
        nt += 1
    p = Z.shape[1]
    for j in range(p):
        G[r, j] -= coef * Z[i, j]
    G[r, p] += coef
    return nt


@njit(**REASSOC)
def _leaf_grad(GT, Theta, lse, lb, yi, inv_m):
    """Add the log loss gradient of leaf ``lb`` for label ``yi`` (softmax - one-hot).

    Parameters
    ----------
    GT : float32 (n_leaves, C)
        Gradient buffer; row ``lb`` added to in place.
    Theta : float32 (n_leaves, C)
        The leaves' log-probabilities.
    lse : float64 (n_leaves,)
        Their log-sum-exp (:func:`leaf_tables`).
    lb : int
        The leaf (row of ``Theta``).
    yi : int
        The sample's class.
    inv_m : float32
        ``1 / batch size``, the weight of one sample.
    """
    for c in range(Theta.shape[1]):
        GT[lb, c] += np.float32(math.exp(Theta[lb, c] - lse[lb])) * inv_m
    GT[lb, yi] -= inv_m


@njit(**REASSOC)
def _batch_step(W, V, last, G, GT, VT, Theta, flag, touched, nt, t, eta, mu, nu):
    """Momentum step of the touched rows (then projected) and of every leaf.

    The gradient buffers and flags are left zeroed.

    Parameters
    ----------
    W, V : float32 (n_internal, p + 1)
        The split rows and their momenta; touched rows updated in place.
    last : int64 (n_internal,)
        Step of each row's last update; set to ``t`` for touched rows.
    G : float32 (n_internal, p + 1)
        Rows' gradients; touched rows zeroed.
    GT : float32 (n_leaves, C)
        Leaves' gradients; zeroed.
    VT : float32 (n_leaves, C)
        Leaves' momenta; updated in place.
    Theta : float32 (n_leaves, C)
        The leaves' log-probabilities; updated in place.
    flag : bool (n_internal,)
        Listed rows; cleared.
    touched : int32 (>= nt,)
        The rows with a gradient this batch.
    nt : int
        Their number.
    t : int
        The step.
    eta, mu, nu : float
        Learning rate, momentum and squared ball radius.
    """
    p1 = W.shape[1]
    for s in range(nt):
        r = touched[s]
        _sync(W, V, last, r, t, eta, mu, nu)
        for j in range(p1):
            V[r, j] = mu * V[r, j] + G[r, j]
            W[r, j] -= eta * V[r, j]
            G[r, j] = 0.0
        _project(W, r, nu)
        last[r] = t
        flag[r] = False
    for lf in range(Theta.shape[0]):
        for c in range(Theta.shape[1]):
            VT[lf, c] = mu * VT[lf, c] + GT[lf, c]
            Theta[lf, c] -= eta * VT[lf, c]
            GT[lf, c] = 0.0


@njit(**REASSOC)
def sgd_pass(Z, y, order, assign, W, V, last, Theta, VT, left, right, row, leaf,
             path_node, path_dir, path_len, eta, mu, nu, batch, t0, G, GT, flag, counters):
    """One pass of mini-batch SGD over ``order`` (positions into Z/y).

    Rows are left up to date with the last step taken.

    Parameters
    ----------
    Z : float32 (n, p)
        Normalised samples.
    y : int (n,)
        Their classes.
    order : int64 (n_order,)
        The samples of the pass, in order.
    assign : int32 (n,)
        Each sample's fixed leaf (SSGD) or -1 (SGD: the leaf of ``sgn(W z)``).
    W, V : float32 (n_internal, p + 1)
        The split rows and their momenta; updated in place.
    last : int64 (n_internal,)
        Step of each row's last update (lazy momentum); updated in place.
    Theta, VT : float32 (n_leaves, C)
        The leaves' log-probabilities and momenta; updated in place.
    left, right, row, leaf : int32 (n_nodes,)
        The tree's tables (see the module docstring).
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
        Added to: dot products on paths, alternative descents, samples, steps.

    Returns
    -------
    t : int
        The next step's number.
    total : float
        Sum of the samples' surrogates (each at its step's parameters).
    """
    n = order.shape[0]
    n_leaves, C = Theta.shape
    D = max(path_node.shape[1], 1)
    lse = np.empty(n_leaves)
    submax = np.empty((left.shape[0], C))
    pn = np.empty(D, np.int32)
    pa = np.empty(D, np.float32)
    ph = np.empty(D, np.int8)
    touched = np.empty(max(batch, 1), np.int32)
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
            best, k, lb, d, lf = _lai(Z, i, yi, assign[i], W, V, last, t, eta, mu, nu, left,
                                      right, row, leaf, path_node, path_dir, path_len, Theta,
                                      lse, submax, pn, pa, ph, counters)
            total += best
            if k >= 0:
                nt = _row_grad(G, flag, touched, nt, row[pn[k]],
                               np.float32(2.0 * ph[k]) * inv_m, Z, i)
            _leaf_grad(GT, Theta, lse, lb, yi, inv_m)
        _batch_step(W, V, last, G, GT, VT, Theta, flag, touched, nt, t, eta, mu, nu)
        t += 1
        counters[3] += 1
    counters[2] += n
    for r in range(W.shape[0]):
        _sync(W, V, last, r, t, eta, mu, nu)
    return t, total


@njit(**REASSOC)
def surrogate_values(Z, y, assign, W, Theta, left, right, row, leaf, path_node, path_dir,
                     path_len, sur, loss, reached):
    """Per sample: the fast surrogate, the tree's log loss and the leaf reached.

    Nothing but the outputs is modified.

    Parameters
    ----------
    Z : float32 (n, p)
        Normalised samples.
    y : int (n,)
        Their classes.
    assign : int32 (n,)
        Each sample's fixed leaf or -1 (the surrogate then follows
        ``sgn(W z)``).
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
    sur : float64 (n,)
        Written: the surrogate (the fixed leaf's when ``assign[i] >= 0``).
    loss : float64 (n,)
        Written: the log loss at the leaf reached by ``sgn(W z)``.
    reached : int32 (n,)
        Written: that leaf (row of ``Theta``).
    """
    n_leaves, C = Theta.shape
    D = max(path_node.shape[1], 1)
    lse = np.empty(n_leaves)
    submax = np.empty((left.shape[0], C))
    leaf_tables(Theta, leaf, left, right, lse, submax)
    pn = np.empty(D, np.int32)
    pa = np.empty(D, np.float32)
    ph = np.empty(D, np.int8)
    V = np.zeros((1, 1), np.float32)
    last = np.zeros(1, np.int64)
    counters = np.zeros(4, np.int64)
    for i in range(Z.shape[0]):
        yi = y[i]
        sur[i] = _lai(Z, i, yi, assign[i], W, V, last, -1, 0.0, 0.0, 1.0, left, right, row,
                      leaf, path_node, path_dir, path_len, Theta, lse, submax, pn, pa, ph,
                      counters)[0]
        lf = leaf[_descend(W, V, last, -1, 0.0, 0.0, 1.0, Z, i, left, right, row, 0)]
        reached[i] = lf
        loss[i] = lse[lf] - Theta[lf, yi]


@njit(**NJIT)
def leaf_counts(y, reached, counts):
    """``counts[l, c] += 1`` for each sample reaching leaf l with class c.

    Parameters
    ----------
    y : int (n,)
        Classes.
    reached : int32 (n,)
        Leaf (row of ``Theta``) of each sample.
    counts : int64 (n_leaves, C)
        Added to in place.
    """
    for i in range(y.shape[0]):
        counts[reached[i], y[i]] += 1


@njit(**REASSOC)
def standardise(X, idx, mean, inv_std, Z):
    """``Z[k] = (X[idx[k]] - mean) * inv_std`` as float32 (X uint8 or float32).

    Parameters
    ----------
    X : uint8 or float32 (n, p)
        The samples.
    idx : int64 (m,)
        The rows.
    mean, inv_std : float32 (p,)
        Feature means and inverse standard deviations.
    Z : float32 (m, p)
        Written in place.
    """
    p = X.shape[1]
    for k in range(idx.shape[0]):
        i = idx[k]
        for j in range(p):
            Z[k, j] = (np.float32(X[i, j]) - mean[j]) * inv_std[j]


@njit(**NJIT)
def row_keys(X, idx, r):
    """A float64 key per row ``X[idx[k]] @ r``, summed in order.

    Identical rows get identical keys whatever their position: an order-free
    canonical order.

    Parameters
    ----------
    X : uint8 or float (n, p)
        The samples.
    idx : int64 (m,)
        The rows.
    r : float64 (p,)
        The projection.

    Returns
    -------
    float64 (m,)
        The keys.
    """
    out = np.empty(idx.shape[0])
    for k in range(idx.shape[0]):
        s = 0.0
        for j in range(X.shape[1]):
            s += float(X[idx[k], j]) * r[j]
        out[k] = s
    return out


__all__ = ["leaf_tables", "sgd_pass", "surrogate_values", "leaf_counts", "standardise",
           "row_keys"]
