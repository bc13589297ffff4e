"""Information-gain scans shared by every split family (Numba kernels).

Entropies use natural logarithms.  With ``F(k) = k log k`` the weighted entropy
of a set of ``n`` samples with class counts ``c`` is ``n H = F(n) - sum_c F(c)``,
so the information gain of a split of ``n`` samples into ``n_l`` and ``n_r`` is

    gain = (F(n) - sum F(c) - [F(n_l) - sum F(c_l)] - [F(n_r) - sum F(c_r)]) / n

Moving samples from the right to the left side changes the sums in O(1) per
class, and ``F`` is read from a table ``flog[k] = k log k`` built once per node.
"""

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from .._jit import NJIT, njit
from ._sort import argsort_f32, exclusive_prefix, sort_scratch


@njit(**NJIT)
def xlogx_table(n):
    """``flog[k] = k * log(k)`` for ``k = 0..n`` (float64, shape (n + 1,)).

    Parameters
    ----------
    n : int
        Largest count of the table (the node's number of samples).

    Returns
    -------
    float64 (n + 1,)
        The table; ``flog[0] = flog[1] = 0``.
    """
    out = np.zeros(n + 1, dtype=np.float64)
    for k in range(2, n + 1):
        out[k] = k * np.log(k)
    return out


@njit(**NJIT)
def class_counts(y, idx, n_classes):
    """Class counts (int64 (n_classes,)) of the samples ``idx`` (int64 (m,)).

    Parameters
    ----------
    y : int (n,)
        Class ids of all samples, in ``0..n_classes - 1``.
    idx : int64 (m,)
        The samples counted.
    n_classes : int
        Number of classes.

    Returns
    -------
    int64 (n_classes,)
        ``out[c]``: number of samples of ``idx`` of class ``c``.
    """
    out = np.zeros(n_classes, dtype=np.int64)
    for i in range(idx.shape[0]):
        out[y[idx[i]]] += 1
    return out


@njit(**NJIT)
def midpoint_threshold(a, b):
    """A float32 threshold ``t`` with ``a <= t < b`` (a < b, both float32-exact).

    Parameters
    ----------
    a, b : float
        The last value going left and the first going right.

    Returns
    -------
    float32
        The midpoint of ``a`` and ``b`` rounded to float32, or ``a`` where that
        rounding reaches ``b``.
    """
    a32 = np.float32(a)
    t = np.float32(0.5 * (np.float64(a) + np.float64(b)))
    if t >= np.float32(b) or t < a32:
        t = a32
    return t


@njit(**NJIT)
def scan_histogram(hist, tot, n, min_leaf, flog, edges):
    """Best split of a class histogram over ordered bins.

    Parameters
    ----------
    hist : int32 or int64 (n_bins, n_classes)
        Class counts per bin; bin ``b`` holds samples whose value is ``edges[b]``.
    tot : int64 (n_classes,)
        Class counts of the node (the column sums of ``hist``).
    n : int
        Number of samples of the node.
    min_leaf : int
        Minimum samples on each side.
    flog : float64 (n + 1,)
        ``k log k`` table.
    edges : float64 (n_bins,)
        Value represented by each bin (increasing).

    Returns
    -------
    (threshold float32, gain float64); gain is -1.0 when no valid split exists.
    Samples with value <= threshold go left.  The threshold is the midpoint
    between the last non-empty bin on the left and the next non-empty bin.
    """
    n_bins, n_classes = hist.shape
    left = np.zeros(n_classes, dtype=np.int64)
    s_l = 0.0
    s_r = 0.0
    for c in range(n_classes):
        s_r += flog[tot[c]]
    parent = flog[n] - s_r
    best_gain = -1.0
    best_bin = -1
    nl = 0
    for b in range(n_bins):
        bt = 0
        for c in range(n_classes):
            k = hist[b, c]
            if k:
                cl = left[c]
                cr = tot[c] - cl
                s_l += flog[cl + k] - flog[cl]
                s_r += flog[cr - k] - flog[cr]
                left[c] = cl + k
                bt += k
        if bt == 0:
            continue
        nl += bt
        nr = n - nl
        if nr < min_leaf:
            break
        if nl < min_leaf:
            continue
        gain = (parent - (flog[nl] - s_l) - (flog[nr] - s_r)) / n
        if gain > best_gain:
            best_gain = gain
            best_bin = b
    if best_bin < 0:
        return np.float32(0.0), -1.0
    nxt = best_bin + 1
    while nxt < n_bins:
        empty = True
        for c in range(n_classes):
            if hist[nxt, c]:
                empty = False
                break
        if not empty:
            break
        nxt += 1
    return midpoint_threshold(edges[best_bin], edges[nxt]), best_gain


@njit(**NJIT)
def scan_sorted(vals, labels, tot, min_leaf, flog):
    """Best split of values sorted increasingly, with their class labels.

    Parameters
    ----------
    vals : (m,) numeric, sorted increasingly
    labels : (m,) int32 class ids
    tot : int64 (n_classes,) class counts of the node
    min_leaf : int
    flog : float64 (m + 1,) ``k log k`` table

    Returns
    -------
    (threshold float32, gain float64); gain -1.0 when no valid split.
    """
    m = vals.shape[0]
    n_classes = tot.shape[0]
    left = np.zeros(n_classes, dtype=np.int64)
    s_l = 0.0
    s_r = 0.0
    for c in range(n_classes):
        s_r += flog[tot[c]]
    parent = flog[m] - s_r
    best_gain = -1.0
    best_i = -1
    for i in range(m - 1):
        c = labels[i]
        cl = left[c]
        cr = tot[c] - cl
        s_l += flog[cl + 1] - flog[cl]
        s_r += flog[cr - 1] - flog[cr]
        left[c] = cl + 1
        if vals[i] == vals[i + 1]:
            continue
        nl = i + 1
        nr = m - nl
        if nr < min_leaf:
            break
        if nl < min_leaf:
            continue
        gain = (parent - (flog[nl] - s_l) - (flog[nr] - s_r)) / m
        if gain > best_gain:
            best_gain = gain
            best_i = i
    if best_i < 0:
        return np.float32(0.0), -1.0
    return midpoint_threshold(vals[best_i], vals[best_i + 1]), best_gain


@njit(**NJIT)
def scan_values(vals, m, labs, scratch, vs, ls, tot, min_leaf, flog):
    """Best split of one candidate's values ``vals[:m]`` with the samples' labels.

    The values are put in stable sorted order
    (:func:`facesegment.forest._sort.argsort_f32`) into ``vs``/``ls``, then
    scanned by :func:`scan_sorted`.

    Parameters
    ----------
    vals : float32 or uint8 (>= m,)
        The candidate's value of each sample (only ``vals[:m]`` is read).
    m : int
        Number of samples, ``m >= 1``.
    labs : int32 (>= m,)
        Class id of each sample.
    scratch : tuple
        ``(order, tmp, keys, kt, cnt)`` from
        :func:`facesegment.forest._sort.sort_scratch` for at least ``m`` values;
        overwritten.
    vs : same dtype as ``vals`` (>= m,)
        Overwritten with the sorted values.
    ls : int32 (>= m,)
        Overwritten with the labels in that order.
    tot : int64 (n_classes,)
        Class counts of the ``m`` samples.
    min_leaf : int
        Minimum samples on each side.
    flog : float64 (m + 1,)
        ``k log k`` table (:func:`xlogx_table`).

    Returns
    -------
    threshold : float32
        Samples with value ``<= threshold`` go left.
    gain : float64
        The information gain; -1.0 when the values are constant or no split
        leaves ``min_leaf`` samples on each side.
    """
    order, tmp, keys, kt, cnt = scratch
    argsort_f32(vals, m, order, tmp, keys, kt, cnt)
    for i in range(m):
        vs[i] = vals[order[i]]
        ls[i] = labs[order[i]]
    if vs[0] == vs[m - 1]:
        return np.float32(0.0), -1.0
    return scan_sorted(vs, ls, tot, min_leaf, flog)


@njit(**NJIT)
def sorted_gain_of_values(values, y, idx, n_classes, min_leaf):
    """Best threshold on per-sample values (float32 (m,)) of the samples ``idx``.

    Refits the threshold of an oblique split after its weights were rounded
    (float16 storage).

    Parameters
    ----------
    values : float32 (m,)
        The split's value of each sample of ``idx``, in that order.
    y : int (n,)
        Class ids of all samples.
    idx : int64 (m,)
        The node's samples, ``m >= 1``.
    n_classes : int
        Number of classes.
    min_leaf : int
        Minimum samples on each side.

    Returns
    -------
    threshold : float32
        Samples with value ``<= threshold`` go left.
    gain : float64
        The information gain; -1.0 when there is no valid split.
    """
    m = idx.shape[0]
    return scan_values(values, m, node_labels(y, idx), sort_scratch(m),
                       np.empty(m, dtype=values.dtype), np.empty(m, dtype=np.int32),
                       class_counts(y, idx, n_classes), min_leaf, xlogx_table(m))


# ---------------------------------------------------------------------------
# Building blocks of the uint8 split kernels (axis.py, twoprobe.py).
#
# A node's candidate columns are first copied into a feature-major buffer
# (``gather_columns``), so each candidate's values are read contiguously and
# its class histogram (n_bins x n_classes int32, 8-16 KB) stays in L1.  The
# scans below reproduce the floating-point operations of ``scan_histogram``
# (per-bin updates, nodes with >= HIST_MIN_SAMPLES samples) and ``scan_sorted``
# (per-sample updates in stable sorted order, smaller nodes: ``scan_codes``) operation by
# operation, so the kernels return bit-identical gains and the same split:
# the best is carried across candidates with ``gain > best_gain`` in the
# candidates' order.  The division by n is only done when the undivided gain
# exceeds the current best's (division by n > 0 is monotone, so no candidate
# that the old comparison would keep is skipped).
# ---------------------------------------------------------------------------


@njit(**NJIT)
def gather_columns(X, idx, s0, s1, feats, T):
    """``T[j, i - s0] = X[idx[i], feats[j]]`` for ``s0 <= i < s1`` (feature-major copy).

    Rows are copied 32 at a time into a contiguous buffer first (a streaming
    copy), then transposed from there (a cache-resident gather).

    Parameters
    ----------
    X : (n, p) array, C-contiguous
        The samples (uint8 in the split kernels).
    idx : int64 (m,)
        The node's samples.
    s0, s1 : int
        The range of positions of ``idx`` copied, ``0 <= s0 <= s1 <= m``.
    feats : int64 (nf,)
        The columns copied.
    T : X's dtype (>= nf, >= s1 - s0)
        Written in place: row ``j`` holds column ``feats[j]``.
    """
    nf = feats.shape[0]
    p = X.shape[1]
    R = np.empty((32, p), dtype=X.dtype)
    for i0 in range(s0, s1, 32):
        i1 = min(i0 + 32, s1)
        for i in range(i0, i1):
            src = X[idx[i]]
            dst = R[i - i0]
            for f in range(p):
                dst[f] = src[f]
        for j in range(nf):
            f = feats[j]
            for i in range(i0, i1):
                T[j, i - s0] = R[i - i0, f]


@njit(**NJIT)
def node_labels(y, idx):
    """``y[idx]`` as int32 (m,).

    Parameters
    ----------
    y : int (n,)
        Class ids of all samples.
    idx : int64 (m,)
        The node's samples.

    Returns
    -------
    int32 (m,)
        The class id of each sample of ``idx``.
    """
    m = idx.shape[0]
    lab = np.empty(m, dtype=np.int32)
    for i in range(m):
        lab[i] = y[idx[i]]
    return lab


@njit(**NJIT)
def entropy_terms(tot, n, flog):
    """``(parent, s_r0)``: ``s_r0 = sum_c F(tot[c])`` and ``parent = F(n) - s_r0``.

    Parameters
    ----------
    tot : int64 (n_classes,)
        Class counts of the node.
    n : int
        Number of samples of the node.
    flog : float64 (>= n + 1,)
        ``F(k) = k log k`` table (:func:`xlogx_table`).

    Returns
    -------
    parent : float64
        ``n`` times the node's entropy.
    s_r0 : float64
        The right side's ``sum_c F(c)`` before any sample moves left.
    """
    s_r0 = 0.0
    for c in range(tot.shape[0]):
        s_r0 += flog[tot[c]]
    return flog[n] - s_r0, s_r0


@njit(**NJIT)
def delta_xlogx_table(flog):
    """``dflog[k] = flog[k + 1] - flog[k]`` (the per-sample updates of scan_sorted).

    Parameters
    ----------
    flog : float64 (n + 1,)
        ``k log k`` table (:func:`xlogx_table`).

    Returns
    -------
    float64 (max(n, 1),)
        The differences (one uninitialised entry when ``n == 0``).
    """
    n = flog.shape[0] - 1
    out = np.empty(max(n, 1), dtype=np.float64)
    for k in range(n):
        out[k] = flog[k + 1] - flog[k]
    return out


@njit(**NJIT)
def class_mask_words(n_classes):
    """uint64 words of a bin's class mask (:func:`scan_bins_clear`).

    Parameters
    ----------
    n_classes : int
        Number of classes.

    Returns
    -------
    int
        ``ceil(n_classes / 64)``.
    """
    return (n_classes + 63) // 64


@njit(**NJIT)
def add_to_bin(hist, mask, b, c):
    """One sample of class ``c`` in bin ``b``: its count, and the bin's class mask.

    Parameters
    ----------
    hist : int32 (n_bins, n_classes)
        Class counts per bin; ``hist[b, c]`` incremented in place.
    mask : uint64 (n_bins, n_words)
        Class mask per bin (:func:`class_mask_words` words); bit ``c`` of bin
        ``b`` set in place.
    b : int
        The bin.
    c : int
        The sample's class.
    """
    hist[b, c] += 1
    mask[b, c >> 6] |= np.uint64(1) << np.uint64(c & 63)


@njit(**NJIT)
def _add_bin(hist, mask, b, left, tot, flog, s_l, s_r):
    """Move bin ``b``'s samples to the left side and clear the bin.

    The bin's classes are visited in increasing order, from its mask, and the
    entropy sums updated as :func:`scan_histogram` updates them.

    Parameters
    ----------
    hist : int32 (n_bins, n_classes)
        Class counts per bin; row ``b`` zeroed in place.
    mask : uint64 (n_bins, n_words)
        Class mask per bin (:func:`add_to_bin`); row ``b`` zeroed in place.
    b : int
        The bin moved.
    left : int64 (n_classes,)
        Class counts of the left side; updated in place.
    tot : int64 (n_classes,)
        Class counts of the node.
    flog : float64 (n + 1,)
        ``k log k`` table.
    s_l, s_r : float
        ``sum_c F(c)`` of the left and right sides before the move.

    Returns
    -------
    bt : int
        Samples moved.
    s_l, s_r : float64
        The sums after the move.
    """
    bt = 0
    for w in range(mask.shape[1]):
        mk = mask[b, w]
        if mk == 0:
            continue
        mask[b, w] = 0
        while mk:
            c = w * 64 + trailing_zeros(mk)
            mk &= mk - np.uint64(1)
            k = hist[b, c]
            cl = left[c]
            cr = tot[c] - cl
            s_l += flog[cl + k] - flog[cl]
            s_r += flog[cr - k] - flog[cr]
            left[c] = cl + k
            hist[b, c] = 0
            bt += k
    return bt, s_l, s_r


@njit(**NJIT)
def scan_bins_clear(hist, mask, tot, n, min_leaf, flog, parent, s_r0, left,
                    best_raw, best_gain):
    """``scan_histogram``'s arithmetic on one candidate; clears ``hist`` and ``mask``.

    ``mask[b]`` (uint64 words, :func:`add_to_bin`) has bit ``c`` set when bin
    ``b`` holds class ``c``: a bin's classes are visited in increasing order
    from its set bits, so the updates (and their order) are those of the scan
    over every class with a non-zero count, without testing the empty ones.
    A bin's gain is divided by ``n`` only when its undivided gain exceeds
    ``best_raw``, so candidates are compared as :func:`scan_histogram` compares
    them.

    Parameters
    ----------
    hist : int32 (n_bins, n_classes)
        The candidate's class counts per bin; zeroed in place.
    mask : uint64 (n_bins, n_words)
        Each bin's class mask; zeroed in place.
    tot : int64 (n_classes,)
        Class counts of the node.
    n : int
        Number of samples of the node.
    min_leaf : int
        Minimum samples on each side, ``>= 1``.
    flog : float64 (n + 1,)
        ``k log k`` table.
    parent, s_r0 : float
        From :func:`entropy_terms`.
    left : int64 (n_classes,)
        Scratch (the left side's class counts); overwritten.
    best_raw, best_gain : float
        The undivided and divided gain of the best split so far (over earlier
        candidates; ``-inf`` and -1.0 before the first).

    Returns
    -------
    b_best : int
        The first bin whose gain beats ``best_gain`` and is maximal for this
        candidate (-1 when none beats it); the split sends bins ``<= b_best``
        left.
    b_next : int
        The next non-empty bin after ``b_best``.
    raw, gain : float64
        The updated ``best_raw`` and ``best_gain``.
    """
    n_bins, n_classes = hist.shape
    one_word = mask.shape[1] == 1
    for c in range(n_classes):
        left[c] = 0
    s_l = 0.0
    s_r = s_r0
    nl = 0
    b_best = -1
    b_next = -1
    pending = False
    b = 0
    while b < n_bins:
        if one_word and mask[b, 0] == 0:
            b += 1
            continue
        bt, s_l, s_r = _add_bin(hist, mask, b, left, tot, flog, s_l, s_r)
        b += 1
        if bt == 0:
            continue
        if pending:
            b_next = b - 1
            pending = False
        nl += bt
        nr = n - nl
        if nr < min_leaf:
            break
        if nl < min_leaf:
            continue
        raw = parent - (flog[nl] - s_l) - (flog[nr] - s_r)
        if raw > best_raw:
            gain = raw / n
            if gain > best_gain:
                best_gain = gain
                best_raw = raw
                b_best = b - 1
                pending = True
    while b < n_bins:  # bins after the break: clear for the next candidate
        _add_bin(hist, mask, b, left, tot, flog, 0.0, 0.0)
        b += 1
    return b_best, b_next, best_raw, best_gain


@njit(**NJIT)
def insertion_sort_codes(codes, m, shift, out):
    """Stable sort of ``codes[:m]`` by ``codes >> shift`` into ``out``, by insertion.

    The array :func:`radix_sort_codes` gives (a stable sort's result is
    unique), cheaper for a few dozen codes (no counters to clear and sum).

    Parameters
    ----------
    codes : int32 (>= m,)
        ``(value << shift) | label`` per sample.
    m : int
        Number of codes.
    shift : int
        Bits of the label.
    out : int32 (>= m,)
        Overwritten with the sorted codes.
    """
    for i in range(m):
        v = codes[i]
        key = v >> shift
        j = i
        while j > 0 and (out[j - 1] >> shift) > key:
            out[j] = out[j - 1]
            j -= 1
        out[j] = v


@njit(**NJIT)
def radix_sort_codes(codes, m, shift, tmp, out, c1, c2):
    """Stable sort of ``codes[:m]`` by ``codes >> shift`` (a 9-bit key), into ``out``.

    Two LSD passes of 5 and 4 bits; samples with equal keys keep their order.

    Parameters
    ----------
    codes : int32 (>= m,)
        ``(value << shift) | label`` per sample, value in ``0..511``.
    m : int
        Number of codes.
    shift : int
        Bits of the label.
    tmp : int32 (>= m,)
        Scratch; overwritten.
    out : int32 (>= m,)
        Overwritten with the sorted codes.
    c1 : int32 (32,)
        Counters of the first pass; overwritten.
    c2 : int32 (16,)
        Counters of the second pass; overwritten.
    """
    c1[:] = 0
    c2[:] = 0
    for i in range(m):
        d = codes[i] >> shift
        c1[d & 31] += 1
        c2[d >> 5] += 1
    exclusive_prefix(c1, 32)
    exclusive_prefix(c2, 16)
    for i in range(m):
        v = codes[i]
        b = (v >> shift) & 31
        tmp[c1[b]] = v
        c1[b] += 1
    for i in range(m):
        v = tmp[i]
        b = v >> (shift + 5)
        out[c2[b]] = v
        c2[b] += 1


@njit(**NJIT)
def scan_codes(codes, m, shift, tot, min_leaf, dflog, flog, parent, s_r0, left,
               best_raw, best_gain):
    """``scan_sorted``'s arithmetic on sorted codes ``(value << shift) | label``.

    Parameters
    ----------
    codes : int32 (>= m,)
        The codes sorted by value (stable), ``m >= 1``.
    m : int
        Number of codes.
    shift : int
        Bits of the label.
    tot : int64 (n_classes,)
        Class counts of the node.
    min_leaf : int
        Minimum samples on each side.
    dflog : float64 (>= m,)
        :func:`delta_xlogx_table` of ``flog``.
    flog : float64 (m + 1,)
        ``k log k`` table.
    parent, s_r0 : float
        From :func:`entropy_terms`.
    left : int64 (n_classes,)
        Scratch (the left side's class counts); overwritten.
    best_raw, best_gain : float
        The undivided and divided gain of the best split over earlier candidates.

    Returns
    -------
    v_best : int
        The value ending the best split that beats ``best_gain`` (values
        ``<= v_best`` go left); -1 when none beats it.
    v_next : int
        The next value present after ``v_best``.
    raw, gain : float64
        The updated ``best_raw`` and ``best_gain``.
    """
    n_classes = tot.shape[0]
    mask = (1 << shift) - 1
    for c in range(n_classes):
        left[c] = 0
    s_l = 0.0
    s_r = s_r0
    v_best = -1
    v_next = -1
    nxt = codes[0]
    for i in range(m - 1):
        cur = nxt
        nxt = codes[i + 1]
        c = cur & mask
        cl = left[c]
        s_l += dflog[cl]
        s_r -= dflog[tot[c] - cl - 1]
        left[c] = cl + 1
        if (cur >> shift) == (nxt >> shift):
            continue
        nl = i + 1
        nr = m - nl
        if nr < min_leaf:
            break
        if nl < min_leaf:
            continue
        raw = parent - (flog[nl] - s_l) - (flog[nr] - s_r)
        if raw > best_raw:
            gain = raw / m
            if gain > best_gain:
                best_gain = gain
                best_raw = raw
                v_best = cur >> shift
                v_next = nxt >> shift
    return v_best, v_next, best_raw, best_gain


# ---------------------------------------------------------------------------
# CART scans: the Gini index beside entropy, and missing values (NaN) sent to
# the side that gains most.  With ``phi(k) = k log k`` (entropy) or ``k^2``
# (Gini), the cost of a set of ``s`` samples with class counts ``c`` is
# ``s H = F(s) - sum_c F(c)`` (entropy) or ``s G = s - sum_c c^2 / s`` (Gini),
# and the gain of a split is ``(cost(node) - cost(left) - cost(right)) / n``:
# the information gain, or the decrease of the Gini index weighted by the
# children's shares (scikit-learn's impurity decrease).
# ---------------------------------------------------------------------------

#: ``criterion`` names and their kernel codes.
CRITERIA = {"entropy": 0, "gini": 1}


@njit(**NJIT)
def phi_table(n, gini):
    """``phi[k]`` for ``k = 0..n``: ``k log k`` (entropy) or ``k^2`` (Gini), float64.

    Parameters
    ----------
    n : int
        Largest count of the table.
    gini : bool
        True for the Gini index, False for entropy.

    Returns
    -------
    float64 (n + 1,)
        The table.
    """
    if not gini:
        return xlogx_table(n)
    out = np.empty(n + 1, dtype=np.float64)
    for k in range(n + 1):
        out[k] = np.float64(k) * np.float64(k)
    return out


@njit(**NJIT)
def set_cost(s, sum_phi, gini, phi):
    """``s`` times the impurity of a set of ``s`` samples (0 for an empty set).

    Parameters
    ----------
    s : int
        Number of samples of the set.
    sum_phi : float
        ``sum_c phi(c)`` over the set's class counts.
    gini : bool
        True for the Gini index, False for entropy.
    phi : float64 (>= s + 1,)
        :func:`phi_table` (read for entropy only).

    Returns
    -------
    float64
        ``s - sum_phi / s`` (Gini) or ``phi[s] - sum_phi`` (entropy).
    """
    if s <= 0:
        return 0.0
    if gini:
        return s - sum_phi / s
    return phi[s] - sum_phi
