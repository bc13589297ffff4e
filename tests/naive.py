"""Plain NumPy/Python references for every Numba kernel (slow, obviously right).

Tests compare each kernel with its reference here on small random inputs.
Sections are grouped by the module whose kernels they mirror.
"""

import numpy as np  # noqa: F401

# ----------------------------------------------------------------- extraction


def naive_cut_windows(image, centers, half=15):
    """Windows around (row, col) centres by slicing, plus float64 feature sums.

    Returns ``(windows uint8 (k, 2h+1, 2h+1, C), sums (F,), sumsq (F,))`` with
    ``F = (2h+1)^2 C`` in C order.
    """
    wins = np.stack([image[r - half:r + half + 1, c - half:c + half + 1] for r, c in centers]) \
        if len(centers) else np.zeros((0, 2 * half + 1, 2 * half + 1, image.shape[2]), np.uint8)
    flat = wins.reshape(len(wins), -1).astype(np.float64)
    return wins, flat.sum(axis=0), (flat * flat).sum(axis=0)


def naive_eligible_counts(label, margin=15, n_classes=8):
    """Pixels per class at distance >= margin from every border (255 ignored), by loops."""
    h, w = label.shape
    counts = np.zeros(n_classes, np.int64)
    for r in range(h):
        for c in range(w):
            if min(r, c, h - 1 - r, w - 1 - c) >= margin and label[r, c] < n_classes:
                counts[label[r, c]] += 1
    return counts


# ------------------------------------------------- forest: axis and two-probe


def naive_entropy(labels, n_classes):
    """Natural-log entropy of a label vector."""
    if len(labels) == 0:
        return 0.0
    p = np.bincount(labels, minlength=n_classes) / len(labels)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def naive_gain(labels, go_left, n_classes):
    """Information gain H(parent) - n_l/n H(left) - n_r/n H(right)."""
    labels = np.asarray(labels)
    go_left = np.asarray(go_left, bool)
    n = len(labels)
    nl = int(go_left.sum())
    return (naive_entropy(labels, n_classes)
            - nl / n * naive_entropy(labels[go_left], n_classes)
            - (n - nl) / n * naive_entropy(labels[~go_left], n_classes))


def naive_midpoint(a, b):
    """float32 threshold t with a <= t < b (the midpoint when representable)."""
    t = np.float32((float(a) + float(b)) / 2)
    return t if np.float32(a) <= t < np.float32(b) else np.float32(a)


def naive_best_threshold(values, labels, n_classes, min_leaf=1):
    """Exhaustive best ``value <= t``: every midpoint of consecutive distinct values.

    Returns ``(threshold, gain)`` (first best, lowest threshold), gain -1 if none.
    """
    values = np.asarray(values)
    uniq = np.unique(values)
    best_t, best_g = np.float32(0), -1.0
    for a, b in zip(uniq[:-1], uniq[1:]):
        left = values <= a
        if left.sum() < min_leaf or (~left).sum() < min_leaf:
            continue
        g = naive_gain(labels, left, n_classes)
        if g > best_g + 1e-12:
            best_t, best_g = naive_midpoint(a, b), g
    return best_t, best_g


def naive_axis_split(X, y, idx, features, n_classes, min_leaf=1):
    """Reference of ``best_axis_split``: try every feature and every threshold."""
    best = (-1, 0.0, -1.0)
    for f in features:
        t, g = naive_best_threshold(X[idx, f].astype(np.float64), y[idx], n_classes, min_leaf)
        if g > best[2] + 1e-12:
            best = (int(f), float(t), g)
    return best


def naive_pair_split(X, y, idx, fa, fb, n_classes, min_leaf=1):
    """Reference of ``best_pair_split``: every pair, every threshold on x[a] - x[b]."""
    best = (-1, -1, 0.0, -1.0)
    for a, b in zip(fa, fb):
        d = X[idx, a].astype(np.float32) - X[idx, b].astype(np.float32)
        t, g = naive_best_threshold(d, y[idx], n_classes, min_leaf)
        if g > best[3] + 1e-12:
            best = (int(a), int(b), float(t), g)
    return best


def naive_partial_shuffle(perm, u):
    """Partial Fisher-Yates on a copy of ``perm``: (sorted subset, new perm)."""
    perm = list(perm)
    p = len(perm)
    for j, uj in enumerate(u):
        r = j + min(int(uj * (p - j)), p - j - 1)
        perm[j], perm[r] = perm[r], perm[j]
    return np.sort(perm[:len(u)]), np.array(perm)


def naive_partition(X, idx, feature, feature2, w, threshold):
    """Stable partition of ``idx``: (left samples, right samples) in their order."""
    if w is not None:
        v = X[idx].astype(np.float64) @ np.asarray(w, np.float64)
    elif feature2 >= 0:
        v = X[idx, feature].astype(np.float32) - X[idx, feature2].astype(np.float32)
    else:
        v = X[idx, feature].astype(np.float32)
    left = v <= threshold
    return idx[left], idx[~left]

# ------------------------------------------------------------------ forest: co2
# References for facesegment/forest/_co2_kernels.py, in float64 on normalised
# features z = (x - mean) * inv_std with the offset appended: z_aug = [z, -1].


def co2_fold_naive(w, mean, inv_std):
    """(u, c) with w @ [(x - mean) * inv_std, -1] == u @ x - c."""
    w = np.asarray(w, np.float64)
    u = w[:-1] * np.asarray(inv_std, np.float64)
    return u, float(u @ np.asarray(mean, np.float64) + w[-1])


def co2_zaug_naive(X, mean, inv_std):
    """Normalised features with the constant -1 appended, (n, p + 1) float64."""
    Z = (np.asarray(X, np.float64) - np.asarray(mean, np.float64)) * np.asarray(inv_std, np.float64)
    return np.hstack([Z, -np.ones((Z.shape[0], 1))])


def co2_leaf_losses_naive(counts):
    """Laplace-smoothed log loss ell[j, k] = -log((n_jk + 1) / (n_j + K)), Eq. (3)."""
    counts = np.asarray(counts, np.float64)
    K = counts.shape[1]
    return -np.log((counts + 1.0) / (counts.sum(1, keepdims=True) + K))


def info_gain_counts_naive(counts):
    """Information gain (nats) of a split from its (2, K) side counts."""
    counts = np.asarray(counts, np.float64)

    def H(c):
        n = c.sum()
        if n == 0:
            return 0.0
        q = c[c > 0] / n
        return float(-(q * np.log(q)).sum())

    n0, n1 = counts[0].sum(), counts[1].sum()
    if n0 == 0 or n1 == 0:
        return 0.0
    n = n0 + n1
    return H(counts.sum(0)) - n0 / n * H(counts[0]) - n1 / n * H(counts[1])


def side_counts_naive(left, y, n_classes):
    """(2, K) class counts of the left (True) and right (False) sides."""
    counts = np.zeros((2, n_classes))
    for is_left, k in zip(left, y):
        counts[0 if is_left else 1, k] += 1
    return counts


def co2_surrogate_naive(Zaug, y, w, ell):
    """Per-sample bound of Eq. (5) and stump loss of Eq. (2) (a <= 0 goes to leaf 0).

    Returns (bound (m,), loss (m,)).
    """
    a = Zaug @ np.asarray(w, np.float64)
    ell = np.asarray(ell, np.float64)
    t0 = -a + ell[0, y]
    t1 = a + ell[1, y]
    bound = np.maximum(t0, t1) - np.abs(a)
    loss = np.where(a <= 0, ell[0, y], ell[1, y])
    return bound, loss


def co2_subgradient_naive(Zaug, y, w, w_old, ell):
    """Mean subgradient over the rows of the CCCP subproblem, Eq. (11).

    Returns (g (p + 1,), n_nonzero): per sample -(1 + s) z_aug when the leaf-0 term
    of the max wins (ties included), else (1 - s) z_aug, s = sign(w_old @ z_aug).
    """
    a = Zaug @ np.asarray(w, np.float64)
    s = np.sign(Zaug @ np.asarray(w_old, np.float64))
    ell = np.asarray(ell, np.float64)
    t0 = -a + ell[0, y]
    t1 = a + ell[1, y]
    coef = np.where(t0 >= t1, -(1 + s), 1 - s)
    return (coef[:, None] * Zaug).mean(0), int(np.count_nonzero(coef))


def co2_sgd_step_naive(X, y, rows, mean, inv_std, w, vel, w_old, ell, eta, momentum, nu):
    """One step of Algorithm 1 as implemented: mini-batch mean subgradient,
    momentum, projection onto ||w||^2 <= nu.

    Returns (w_new, vel_new, surrogate sum of the batch at w, n_nonzero,
    counts under w, counts under w_old).
    """
    Zaug = co2_zaug_naive(X[rows], mean, inv_std)
    yr = y[rows]
    g, nnz = co2_subgradient_naive(Zaug, yr, w, w_old, ell)
    vel = momentum * np.asarray(vel, np.float64) - eta * g
    w_new = np.asarray(w, np.float64) + vel
    norm2 = w_new @ w_new
    if norm2 > nu:
        w_new = w_new * np.sqrt(nu / norm2)
    bound, _ = co2_surrogate_naive(Zaug, yr, w, ell)
    K = ell.shape[1]
    cur = side_counts_naive(Zaug @ np.asarray(w, np.float64) <= 0, yr, K)
    old = side_counts_naive(Zaug @ np.asarray(w_old, np.float64) <= 0, yr, K)
    return w_new, vel, float(bound.sum()), nnz, cur, old


def co2_optimise_naive(X, y, order, batch, mean, inv_std, w, ell, eta, tau, n_steps,
                       momentum, nu, lr_patience):
    """Algorithm 1 loop with CCCP rounds of tau steps (see _co2_optimise).

    Returns (final w, best w_old or None, final eta).
    """
    w = np.asarray(w, np.float64).copy()
    ell = np.asarray(ell, np.float64).copy()
    vel = np.zeros_like(w)
    w_old = w.copy()
    K = ell.shape[1]
    cur = np.zeros((2, K))
    old = np.zeros((2, K))
    best_est, best, prev, n_up, rounds, sur, cnt = -1.0, None, np.inf, 0, 0, 0.0, 0
    for step in range(n_steps):
        if step > 0 and step % tau == 0:
            est = info_gain_counts_naive(old)
            if est > best_est:
                best_est = est
                if rounds > 0:
                    best = w_old.copy()
            ell = co2_leaf_losses_naive(cur)
            mean_sur = sur / cnt
            if mean_sur > prev:
                n_up += 1
                if n_up >= lr_patience:
                    eta *= 0.5
                    n_up = 0
            prev = mean_sur
            cur[:] = 0
            old[:] = 0
            sur, cnt = 0.0, 0
            rounds += 1
            w_old = w.copy()
        rows = order[step * batch:(step + 1) * batch]
        w, vel, s, _, c1, c2 = co2_sgd_step_naive(X, y, rows, mean, inv_std, w, vel, w_old,
                                                   ell, eta, momentum, nu)
        cur += c1
        old += c2
        sur += s
        cnt += len(rows)
    return w, best, eta


def best_threshold_naive(v, y, n_classes, min_leaf=1):
    """Best information gain over thresholds between distinct sorted values
    leaving at least ``min_leaf`` samples on each side (0.0 if none)."""
    vals = np.unique(v)
    best = 0.0
    for lo, hi in zip(vals[:-1], vals[1:]):
        t = lo + (hi - lo) / 2
        nl = int(np.count_nonzero(v <= t))
        if nl >= min_leaf and len(v) - nl >= min_leaf:
            best = max(best, info_gain_counts_naive(side_counts_naive(v <= t, y, n_classes)))
    return best


def naive_fixed_order_dot(w, x, lanes):
    """Reference for facesegment/forest/_dots.py: float32 ``w @ x`` in its fixed
    order (lane k sums ``w[j] * x[j]`` for ``j = k, k + lanes, ...`` below the
    last multiple of ``lanes``; the lanes halved pairwise; then the values
    after the last multiple added one by one), one float32 operation at a time."""
    f = np.float32
    p = len(w)
    n = p - p % lanes
    acc = [f(0.0)] * lanes
    for j in range(0, n, lanes):
        for k in range(lanes):
            acc[k] = f(acc[k] + f(f(w[j + k]) * f(x[j + k])))
    m = lanes
    while m > 1:
        m //= 2
        for k in range(m):
            acc[k] = f(acc[k] + acc[k + m])
    s = acc[0]
    for j in range(n, p):
        s = f(s + f(f(w[j]) * f(x[j])))
    return s


# ------------------------------------------------------- inference and metrics


def naive_windows(image, mode="full", window=31, planes=None):
    """Explicit windows of every predicted pixel of ``image``, for any window layout.

    ``image`` uint8 (H, W) or (H, W, C), followed by the extra ``planes``
    (H, W, k) when given.  Returns ``(X (n, window * window * (C + k)) uint8,
    ys, xs)`` with features in the order ``(dy * window + dx) * channels + c``:
    "full" reflect-pads by ``window // 2`` px and takes every pixel; "strict"
    takes only pixels at least ``window // 2`` px from the border.
    """
    img = image[:, :, None] if image.ndim == 2 else image
    if planes is not None:
        img = np.concatenate([img, planes[:, :, None] if planes.ndim == 2 else planes], axis=2)
    h, w, c = img.shape
    half = window // 2
    pad = np.pad(img, ((half, half), (half, half), (0, 0)), mode="reflect")
    if mode == "full":
        ys, xs = np.mgrid[0:h, 0:w]
    else:
        ys, xs = np.mgrid[half:max(half, h - half), half:max(half, w - half)]
    ys, xs = ys.ravel(), xs.ravel()
    X = np.empty((len(ys), window * window * c), dtype=np.uint8)
    for i, (y, x) in enumerate(zip(ys, xs)):
        X[i] = pad[y:y + window, x:x + window, :].reshape(-1)
    return X, ys, xs


def naive_oblique_visits(arrays, X, max_depth=None, n_trees=None):
    """Oblique nodes passed through by the windows ``X`` (the FLOP count)."""
    roots = arrays.roots[:n_trees] if n_trees else arrays.roots
    total = 0
    for x in X:
        for r in roots:
            node = r
            while arrays.left[node] >= 0 and (max_depth is None
                                              or arrays.depth[node] < max_depth):
                total += int(arrays.oblique[node] >= 0)
                node = naive_leaf(arrays, x, node, max_depth=arrays.depth[node] + 1)
    return total


def naive_leaf(arrays, x, root, max_depth=None):
    """Node reached by window ``x`` from ``root`` (stopping at ``max_depth``)."""
    node = root
    sparse = getattr(arrays, "sparse", None)
    while arrays.left[node] >= 0 and (max_depth is None or arrays.depth[node] < max_depth):
        if sparse is not None and sparse[node] >= 0:
            v = naive_sparse_value(arrays, sparse[node], x)
        elif arrays.oblique[node] >= 0:
            v = float(np.dot(arrays.weights[arrays.oblique[node]].astype(np.float64),
                             x.astype(np.float64)))
        elif arrays.feature2[node] >= 0:
            v = float(x[arrays.feature[node]]) - float(x[arrays.feature2[node]])
        else:
            v = float(x[arrays.feature[node]])
        node = arrays.left[node] if v <= arrays.threshold[node] else arrays.right[node]
    return node


def naive_forest_proba(arrays, X, max_depth=None, n_trees=None, first_tree=0):
    """A forest's ``predict_proba`` on explicit windows: mean leaf distribution
    over ``n_trees`` trees (default: the rest) from ``first_tree`` on."""
    roots = arrays.roots[first_tree:first_tree + n_trees if n_trees else None]
    out = np.zeros((X.shape[0], arrays.value.shape[1]))
    for i in range(X.shape[0]):
        for r in roots:
            out[i] += arrays.value[naive_leaf(arrays, X[i], r, max_depth)]
    return out / len(roots)


def naive_reweight(proba, sampling_factors, alpha):
    """``p * s**-alpha`` renormalised (rows summing to 0 stay 0)."""
    p = np.asarray(proba, dtype=np.float64) * np.asarray(sampling_factors, float) ** -alpha
    tot = p.sum(axis=-1, keepdims=True)
    return np.where(tot > 0, p / np.where(tot > 0, tot, 1), 0)


def naive_confusion(truth, pred, n_classes=8):
    """8x8 confusion ``conf[true, pred]`` over pixels with truth != 255."""
    conf = np.zeros((n_classes, n_classes), dtype=np.int64)
    for t, p in zip(np.ravel(truth), np.ravel(pred)):
        if t != 255:
            conf[t, p] += 1
    return conf


def naive_jaccard(conf):
    """Per-class ``100 tp / (tp + fp + fn)``; NaN where the denominator is 0."""
    n = conf.shape[0]
    out = np.full(n, np.nan)
    for c in range(n):
        tp = conf[c, c]
        fp = conf[:, c].sum() - tp
        fn = conf[c, :].sum() - tp
        if tp + fp + fn > 0:
            out[c] = 100.0 * tp / (tp + fp + fn)
    return out


# ------------------------------------------ forest: extra-trees, ferns, rotation
# References for facesegment/forest/_extra_kernels.py, _fern_kernels.py and
# _rotation_kernels.py (and the drivers in extra/ferns/rotation.py).


def naive_random_cut(lo, hi, u, integer):
    """Extra-trees cut for ``lo < hi``: ``c + 0.5`` with ``c = lo + floor(u (hi - lo))``
    (integer data), else float32 ``lo + u (hi - lo)`` (``lo`` if it rounds to ``hi``)."""
    if integer:
        c = int(lo) + min(int(u * (int(hi) - int(lo))), int(hi) - int(lo) - 1)
        return np.float32(c + 0.5)
    t = np.float32(float(lo) + u * (float(hi) - float(lo)))
    return np.float32(lo) if t >= np.float32(hi) else t


def naive_extra_split(X, y, idx, perm, rng, q, n_classes, min_leaf=1):
    """Reference of ``random_axis_split``: the same draws from ``rng``, one candidate
    at a time.  Returns ``((feature, threshold, gain), perm after the draws)``."""
    perm = list(perm)
    p = len(perm)
    labels = y[idx]
    best = (-1, 0.0, -1.0)
    found = start = 0
    while found < q and start < p:
        k = min(q - found, p - start)
        u_feat, u_thr = rng.random(k), rng.random(k)
        for j in range(k):
            pos = start + j
            r = pos + min(int(u_feat[j] * (p - pos)), p - pos - 1)
            perm[pos], perm[r] = perm[r], perm[pos]
            f = perm[pos]
            vals = X[idx, f]
            if vals.min() == vals.max():
                continue
            found += 1
            t = naive_random_cut(vals.min(), vals.max(), u_thr[j], X.dtype == np.uint8)
            left = vals.astype(np.float32) <= t
            if left.sum() < min_leaf or (~left).sum() < min_leaf:
                continue
            g = naive_gain(labels, left, n_classes)
            if g > best[2] + 1e-12:
                best = (int(f), float(t), g)
        start += k
    return best, np.array(perm)


def naive_quantile_cut(values, u):
    """Fern threshold: midpoint between the value of rank ``floor(u m)`` and the next
    larger value present (the previous smaller one at the maximum); ``(ok, t)``."""
    values = np.asarray(values, np.float32)
    v = np.sort(values)[min(int(u * len(values)), len(values) - 1)]
    above, below = values[values > v], values[values < v]
    if above.size:
        return True, naive_midpoint(v, above.min())
    if below.size:
        return True, naive_midpoint(below.max(), v)
    return False, np.float32(v)


def naive_fern_counts(X, y, idx, fa, fb, thr, n_classes):
    """Class counts of every node of a fern (complete tree, breadth first), by
    following each sample's bits: the node after bits b_1..b_l is
    ``2^l - 1 + int(b_1..b_l)`` (bit 1 = right)."""
    d = len(fa)
    counts = np.zeros((2 ** (d + 1) - 1, n_classes), np.int64)
    for i in idx:
        x = X[i].astype(np.float32)
        code = 0
        counts[0, y[i]] += 1
        for lev in range(d):
            v = x[fa[lev]] - (x[fb[lev]] if fb[lev] >= 0 else 0)
            code = 2 * code + int(not v <= thr[lev])
            counts[2 ** (lev + 1) - 1 + code, y[i]] += 1
    return counts


def naive_pca_axes(Z):
    """Principal axes (columns, by decreasing variance) of the rows of ``Z`` by SVD of
    the centred data, each signed so that its largest-magnitude entry is positive."""
    Z = np.asarray(Z, np.float64)
    _, _, vt = np.linalg.svd(Z - Z.mean(axis=0), full_matrices=True)
    axes = vt.T
    for j in range(axes.shape[1]):
        if axes[np.argmax(np.abs(axes[:, j])), j] < 0:
            axes[:, j] = -axes[:, j]
    return axes


def naive_rotate(X, idx, feats, w):
    """Rotated features ``Z[i, k] = sum_j w[k, j] x[feats[k, j]]`` (float64; -1 pads)."""
    Z = np.zeros((len(idx), len(feats)))
    for k, (fk, wk) in enumerate(zip(feats, w)):
        for f, wj in zip(fk, wk):
            if f >= 0:
                Z[:, k] += float(wj) * X[idx, f].astype(np.float64)
    return Z


# ------------------------------------------------------------------ forest: sparse
# References for facesegment/forest/_sparse.py.

def naive_sparse_value(arrays, row, x):
    """Sparse row ``row`` of ``arrays`` on window ``x``: the float32 sum in entry
    order (what every kernel must reproduce bit for bit)."""
    lo, hi = int(arrays.sparse_ptr[row]), int(arrays.sparse_ptr[row + 1])
    acc = np.float32(0.0)
    for k in range(lo, hi):
        w = np.float32(arrays.sparse_weight[k])
        acc = np.float32(acc + np.float32(w * np.float32(x[int(arrays.sparse_index[k])])))
    return float(acc)


def naive_keep_top_k(w, p, k):
    """``w`` with all but the k largest |w[:p]| zeroed (ties: lower index kept)."""
    w = np.array(w, dtype=np.float64)
    if k >= p:
        return w
    order = sorted(range(p), key=lambda j: (-abs(w[j]), j))
    keep = {j for j in order[:k] if w[j] != 0}
    for j in range(p):
        if j not in keep:
            w[j] = 0.0
    return w


# ------------------------------------------------ dense inference: integer dots
# Reference for facesegment/dense/_simd.py.

def naive_idot8(img, bb, rowstride, w, rows, chunks, mask=-1, step=32):
    """The 8 exact integer dots of uint8 windows with int8 weights: window ``u``
    row ``r`` is the ``step * chunks`` values from ``bb[u] + r * rowstride``; only
    the ``step``-value chunks ``k = r * chunks + c`` with bit k of ``mask`` set
    (k < 64).  ``step=16``: the AVX2 form (uint16 windows, int16 weights)."""
    width = step * chunks
    out = []
    for b in bb:
        s = 0
        for r in range(rows):
            for j in range(width):
                k = r * chunks + j // step
                if k < 64 and not (mask >> k) & 1:
                    continue
                s += int(img[int(b) + r * rowstride + j]) * int(w[r * width + j])
        out.append(s)
    return out


# ------------------------------------- forest: CART (Gini, missing values)


def naive_impurity(labels, n_classes, criterion):
    """Entropy (natural log) or Gini index ``1 - sum p_c^2`` of a label vector."""
    if len(labels) == 0:
        return 0.0
    if criterion == "entropy":
        return naive_entropy(labels, n_classes)
    p = np.bincount(labels, minlength=n_classes) / len(labels)
    return float(1.0 - (p * p).sum())


def naive_cart_gain(labels, go_left, n_classes, criterion):
    """Impurity decrease I(parent) - n_l/n I(left) - n_r/n I(right)."""
    labels = np.asarray(labels)
    go_left = np.asarray(go_left, bool)
    n, nl = len(labels), int(go_left.sum())
    return (naive_impurity(labels, n_classes, criterion)
            - nl / n * naive_impurity(labels[go_left], n_classes, criterion)
            - (n - nl) / n * naive_impurity(labels[~go_left], n_classes, criterion))


def naive_cart_goes_left(values, threshold, missing_left):
    """Sides of values (NaN = missing) for ``value <= threshold``, NaN by ``missing_left``."""
    values = np.asarray(values, np.float64)
    miss = np.isnan(values)
    return np.where(miss, bool(missing_left == 1), values <= threshold)


def naive_cart_split(X, y, idx, features, n_classes, min_leaf=1, criterion="gini",
                     n_visit=None):
    """Reference of ``best_axis_split_cart``: every feature (in order, ``n_visit``
    of them, more while all were constant), every cut between distinct present values
    with the missing values on either side, and "present left, missing right".

    Returns ``(feature, threshold, gain, missing_left)`` of the first best
    (gain -1 when none); ``missing_left`` -1 when the node misses no value of it.
    """
    n_visit = len(features) if n_visit is None else n_visit
    best = (-1, 0.0, -1.0, -1)
    visited = found = 0
    lab = y[idx]
    for f in features:
        if visited >= n_visit and found:
            break
        visited += 1
        v = X[idx, f].astype(np.float64)
        miss = np.isnan(v)
        uniq = np.unique(v[~miss])
        if uniq.size == 0 or (uniq.size == 1 and not miss.any()):
            continue
        found += 1
        cands = [(naive_midpoint(a, b), a) for a, b in zip(uniq[:-1], uniq[1:])]
        options = []
        for t, _ in cands:
            options.append((t, 0 if miss.any() else -1))
            if miss.any():
                options.append((t, 1))
        if miss.any():
            options.append((np.float32(uniq[-1]), 0))
        for t, ml in options:
            left = naive_cart_goes_left(v, float(t), ml)
            if left.sum() < min_leaf or (~left).sum() < min_leaf:
                continue
            g = naive_cart_gain(lab, left, n_classes, criterion)
            if g > best[2] + 1e-12:
                best = (int(f), float(t), g, ml)
    return best


def naive_leaf_missing(arrays, x, root, missing_left):
    """Node reached by ``x`` (axis-aligned splits, NaN by ``missing_left``)."""
    node = root
    while arrays.left[node] >= 0:
        v = float(x[arrays.feature[node]])
        if np.isnan(v):
            go = missing_left[node] == 1
        else:
            go = v <= arrays.threshold[node]
        node = arrays.left[node] if go else arrays.right[node]
    return node


def naive_oob(estimator, X, y):
    """Out-of-bag distributions by redrawing each tree's bootstrap rows from its
    seed (``default_rng(seed).integers(0, n, n)``) and asking that tree alone."""
    n = X.shape[0]
    proba = np.zeros((n, len(estimator.classes_)))
    count = np.zeros(n)
    for tree, seed in zip(estimator.estimators_, estimator.tree_seeds_):
        drawn = np.random.default_rng(int(seed)).integers(0, n, size=n)
        oob = np.ones(n, bool)
        oob[drawn] = False
        proba[oob] += tree.predict_proba(X[oob])
        count[oob] += 1
    return proba / np.maximum(count, 1)[:, None], count


# ------------------------------------------------- faces: coarse stage reading


def naive_coarse_fill(proba, grid, gap=0.0):
    """coarse_fill by loops: each pixel off the grid, its neighbours by parity
    (left/right, above/below, or the four diagonals), filled with their mean when
    all are in ``grid``, share their argmax and lead their second class by ``gap``."""
    s = grid.shape[0]
    filled = np.zeros((s, s), bool)
    values = np.zeros(proba.shape, np.float32)
    for y in range(s):
        for x in range(s):
            if y % 2 == 0 and x % 2 == 0:
                continue
            if y % 2 == 0:
                around = [(y, x - 1), (y, x + 1)]
            elif x % 2 == 0:
                around = [(y - 1, x), (y + 1, x)]
            else:
                around = [(y - 1, x - 1), (y - 1, x + 1), (y + 1, x - 1), (y + 1, x + 1)]
            inside = [(a, b) for a, b in around if 0 <= a < s and 0 <= b < s]
            if len(inside) == len(around) and all(grid[a, b] for a, b in inside):
                leads = {int(np.argmax(proba[a, b])) for a, b in inside}
                gaps = [np.diff(np.sort(proba[a, b]))[-1] for a, b in inside]
                values[y, x] = np.mean([proba[a, b] for a, b in inside], axis=0)
                filled[y, x] = len(leads) == 1 and min(gaps) >= gap
    return filled, values
