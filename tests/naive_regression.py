"""Plain-Python references of the regression tree kernels
(facesegment/forest/_regression_kernels.py): the same random stream and rules,
one candidate at a time, sums recomputed from scratch."""

import numpy as np

from tests.naive import naive_random_cut

MASK = (1 << 64) - 1


class NaiveSplitMix:
    """SplitMix64 in Python integers: ``uniform()`` is the kernels' ``next_uniform``."""

    def __init__(self, seed):
        self.state = seed & MASK

    def uniform(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        return (z >> 11) / 9007199254740992.0


def naive_draw(perm, j, rng):
    """Step ``j`` of a partial Fisher-Yates shuffle of the list ``perm``."""
    p = len(perm)
    r = j + min(int(rng.uniform() * (p - j)), p - j - 1)
    perm[j], perm[r] = perm[r], perm[j]
    return perm[j]


def naive_proxy(y, c, left, order):
    """``S_l^2 / W_l + S_r^2 / W_r`` of a partition (lists), with ``W_l``, ``S_l``
    summed over ``order`` (the kernels' summation order) and the right side
    as the node's totals minus the left (as the kernels do); ``(proxy, W_l, W_r)``,
    proxy None when a side is empty."""
    w_tot = sum(c)
    s_tot = sum(ci * yi for ci, yi in zip(c, y))
    wl = sum(c[i] for i in order if left[i])
    sl = sum(c[i] * y[i] for i in order if left[i])
    wr, sr = w_tot - wl, s_tot - sl
    if wl == 0 or wr == 0:
        return None, wl, wr
    return sl * sl / wl + sr * sr / wr, wl, wr


def naive_best_cut(v, y, c, min_leaf):
    """Best threshold of one feature over every midpoint of neighbouring distinct
    values (sums taken in value order, ties in row order, as the kernels sort)."""
    best, thr = -np.inf, None
    order = sorted(range(len(v)), key=lambda i: v[i])
    distinct = sorted(set(v))
    for a, b in zip(distinct[:-1], distinct[1:]):
        left = [vi <= a for vi in v]
        proxy, wl, wr = naive_proxy(y, c, left, order)
        if proxy is None or wl < min_leaf or wr < min_leaf:
            continue
        if proxy > best:
            t = np.float32((float(np.float32(a)) + float(np.float32(b))) / 2)
            best, thr = proxy, (np.float32(a) if t >= np.float32(b) else t)
    return best, thr


def naive_node_split(X, y, c, perm, rng, q, min_leaf, extra):
    """The split of one node (rows of ``X``, targets ``y``, copies ``c``):
    ``(feature, threshold)`` or ``(-1, None)``."""
    p = X.shape[1]
    integer = X.dtype == np.uint8
    best, best_f, best_t = -np.inf, -1, None
    found = j = 0
    while j < p and (j < q or found == 0):  # q looked at, more only until one splits
        if extra:
            k = min(q - j, p - j) if j < q else 1
            feats = []
            for _ in range(k):
                feats.append(naive_draw(perm, j, rng))
                j += 1
            cands = []
            for f in feats:
                lo, hi = X[:, f].min(), X[:, f].max()
                if lo < hi:
                    cands.append((f, naive_random_cut(lo, hi, rng.uniform(), integer)))
            found += len(cands)
            for f, t in cands:
                proxy, wl, wr = naive_proxy(y, c, [np.float32(v) <= t for v in X[:, f]],
                                            range(len(y)))
                if proxy is not None and wl >= min_leaf and wr >= min_leaf and proxy > best:
                    best, best_f, best_t = proxy, f, t
        else:
            f = naive_draw(perm, j, rng)
            j += 1
            if X[:, f].min() == X[:, f].max():
                continue
            found += 1
            proxy, t = naive_best_cut(list(X[:, f]), y, c, min_leaf)
            if t is not None and proxy > best:
                best, best_f, best_t = proxy, f, t
    return best_f, best_t


def naive_regression_tree(X, y, rows, counts, q, max_depth, min_split, min_leaf, extra, seed):
    """The tree of ``regression_nodes``: lists ``(left, right, feature, threshold,
    value, depth, n_samples)`` (nodes in creation order, processed first in first out)."""
    rng = NaiveSplitMix(seed)
    perm = list(range(X.shape[1]))
    nodes = [{"ids": list(range(len(rows))), "depth": 0}]
    out = {k: [] for k in ("left", "right", "feature", "threshold", "value", "depth",
                           "n_samples")}
    i = 0
    while i < len(nodes):
        node = nodes[i]
        ids = node["ids"]
        yy = [float(y[rows[k]]) for k in ids]
        cc = [float(counts[k]) for k in ids]
        w = sum(cc)
        for key, val in (("left", -1), ("right", -1), ("feature", -1), ("threshold", 0.0),
                         ("value", sum(a * b for a, b in zip(cc, yy)) / w),
                         ("depth", node["depth"]), ("n_samples", int(w))):
            out[key].append(val)
        i += 1
        d = node["depth"]
        if ((max_depth >= 0 and d >= max_depth) or w < min_split or w < 2 * min_leaf
                or min(yy) == max(yy) or len(ids) < 2):
            continue
        Xn = X[[rows[k] for k in ids]]
        f, t = naive_node_split(Xn, yy, cc, perm, rng, q, min_leaf, extra)
        if f < 0:
            continue
        go = [np.float32(X[rows[k], f]) <= t for k in ids]
        me = i - 1
        out["feature"][me], out["threshold"][me] = f, float(t)
        out["left"][me], out["right"][me] = len(nodes), len(nodes) + 1
        nodes.append({"ids": [k for k, g in zip(ids, go) if g], "depth": d + 1})
        nodes.append({"ids": [k for k, g in zip(ids, go) if not g], "depth": d + 1})
    return out


def naive_sse_importances(fa, X, y, n_features):
    """Mean decrease in squared error per feature, each node's decrease computed from
    the training rows routed to it (a forest grown without bootstrap, no weights)."""
    imp = np.zeros((fa.n_trees, n_features))
    for t, root in enumerate(fa.roots):
        stack = [(root, np.arange(len(y)))]
        while stack:
            node, idx = stack.pop()
            if fa.left[node] < 0:
                continue
            go = X[idx, fa.feature[node]].astype(np.float32) <= fa.threshold[node]
            a, b = idx[go], idx[~go]

            def sse(r):
                return float(((y[r] - y[r].mean()) ** 2).sum())

            imp[t, fa.feature[node]] += sse(idx) - sse(a) - sse(b)
            stack += [(fa.left[node], a), (fa.right[node], b)]
    per = imp.sum(axis=1)
    out = (imp[per > 0] / per[per > 0, None]).mean(axis=0)
    return out / out.sum()
