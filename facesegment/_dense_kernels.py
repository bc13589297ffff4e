"""Numba kernels of dense inference (private; see :mod:`facesegment.inference`).

Kernels take plain arrays and scalars and do no validation.  The image is the
*padded* RGB uint8 image flattened in C order (``img``), with ``rowstride`` bytes
per row; the window of the pixel whose window top-left corner is padded pixel
``(y, x)`` starts at byte ``base = y * rowstride + x * 3``.  Per node the wrapper
precomputes ``off1``/``off2``: the byte offsets (inside the window) of the node's
first and second probe for this padded width, so axis-aligned and two-probe
nodes read one or two bytes.  Oblique nodes dot a weights row, laid out as 31
rows of 93 contiguous values, with the window's 31 rows of 93 contiguous bytes.

Nodes are packed for the kernels into one int32 array ``nodes (n_nodes, 8)``
(32 bytes, half a cache line, per node) with columns
``LEFT, RIGHT, OFF1, OFF2, OBLIQUE, THRESHOLD, MUL, RESP``; ``thr`` is the
float32 view of the same memory (``thr[n, THRESHOLD]``, ``thr[n, MUL]``).
An axis-aligned or two-probe node's value is
``img[base + OFF1] - MUL * img[base + OFF2]`` (MUL 0 or 1), with no branch.
Leaves point to themselves (``LEFT == RIGHT == node``), so every pixel takes
exactly ``steps`` steps down every tree, the child is chosen without a branch
(``nodes[node, v > threshold]``), and after ``d`` steps a pixel is at the node
of depth ``min(d, leaf depth)``: truncating at depth ``d`` is taking ``d``
steps.  ``RESP``: row of optional precomputed oblique responses (the top
levels of CO2 trees evaluated for the whole image at once by FFT
correlation): ``resp[nodes[n, RESP], y, x]`` replaces the dot product when it
is >= 0.
"""

import numpy as np
from numba import njit, prange

from .classes import WINDOW, N_CHANNELS

ROW = WINDOW * N_CHANNELS  # 93 contiguous bytes per window row
LEFT, RIGHT, OFF1, OFF2, OBLIQUE, THRESHOLD, MUL, RESP = range(8)


@njit(cache=True, nogil=True, fastmath=True)
def _dot_window(img, base, rowstride, weights, row):
    """``weights[row] @ window`` for the window starting at byte ``base``."""
    acc = np.float32(0.0)
    for dy in range(WINDOW):
        p = base + dy * rowstride
        q = dy * ROW
        for j in range(ROW):
            acc += weights[row, q + j] * np.float32(img[p + j])
    return acc


@njit(cache=True, nogil=True)
def _node_value(img, base, rowstride, y, x, node, nodes, thr, weights, resp):
    """The split value of ``node`` for the window at ``base``."""
    o = nodes[node, OBLIQUE]
    if o >= 0:
        r = nodes[node, RESP]
        if r >= 0:
            return resp[r, y, x]
        return _dot_window(img, base, rowstride, weights, o)
    return (np.float32(img[base + nodes[node, OFF1]])
            - thr[node, MUL] * np.float32(img[base + nodes[node, OFF2]]))


@njit(cache=True, nogil=True)
def _step_all(img, rowstride, y, xs, bases, cur, nodes, thr, weights, resp):
    """Move every pixel of a batch one level down (leaves stay put).

    The iterations are independent, so the CPU overlaps their memory accesses,
    and neighbouring pixels, which mostly share nodes, reuse a node's data (a
    CO2 node's weights) while it is in cache.
    """
    for i in range(cur.shape[0]):
        node = cur[i]
        v = _node_value(img, bases[i], rowstride, y, xs[i], node, nodes, thr, weights, resp)
        cur[i] = nodes[node, np.int64(v > thr[node, THRESHOLD])]


@njit(cache=True, nogil=True, parallel=True)
def dense_proba(img, rowstride, y0, y1, x0, x1, roots, steps, nodes, thr, value,
                weights, resp, out):
    """Mean class distribution over ``roots`` for every pixel of a rectangle.

    Writes ``out[y, x, :]`` (float32, ``(H, W, C)``) for ``y0 <= y < y1`` and
    ``x0 <= x < x1``; pixel ``(y, x)`` has its window top-left at padded
    ``(y, x)`` (the padded image has a 15-px margin).  Each tree is descended
    ``steps`` levels.  Parallel over rows; a row's pixels descend in lockstep.
    """
    n_trees = roots.shape[0]
    n_classes = value.shape[1]
    inv = np.float32(1.0) / np.float32(n_trees)
    width = x1 - x0
    for y in prange(y0, y1):
        acc = np.zeros((width, n_classes), dtype=np.float32)
        cur = np.empty(width, dtype=np.int64)
        xs = np.arange(x0, x1)
        bases = y * rowstride + xs * 3
        for t in range(n_trees):
            cur[:] = roots[t]
            for _ in range(steps):
                _step_all(img, rowstride, y, xs, bases, cur, nodes, thr, weights, resp)
            for i in range(width):
                for c in range(n_classes):
                    acc[i, c] += value[cur[i], c]
        for i in range(width):
            for c in range(n_classes):
                out[y, x0 + i, c] = acc[i, c] * inv
    return out


@njit(cache=True, nogil=True)
def count_oblique_visits(img, rowstride, y0, y1, x0, x1, roots, steps, nodes, thr,
                         weights, resp):
    """Number of oblique nodes evaluated over a rectangle (for the FLOP bound)."""
    total = 0
    for y in range(y0, y1):
        for x in range(x0, x1):
            base = y * rowstride + x * 3
            for t in range(roots.shape[0]):
                node = roots[t]
                for _ in range(steps):
                    if nodes[node, LEFT] == node:
                        break
                    if nodes[node, OBLIQUE] >= 0:
                        total += 1
                    v = _node_value(img, base, rowstride, y, x, node, nodes, thr, weights, resp)
                    node = nodes[node, np.int64(v > thr[node, THRESHOLD])]
    return total


@njit(cache=True, nogil=True, parallel=True)
def sweep_predict(img, rowstride, ys, xs, roots, depth_list, tree_counts, scales,
                  nodes, thr, value, weights, resp, chunk, preds):
    """Labels of many truncated forests in one traversal per pixel and tree.

    For pixel ``i`` (window top-left at padded ``(ys[i], xs[i])``), every depth
    limit ``depth_list[k]`` (ascending), every forest made of the first
    ``tree_counts[j]`` trees (ascending), and every row ``scales[a]`` of
    per-class factors ``s^-alpha``, writes
    ``preds[a, k, j, i] = argmax_c scales[a, c] * sum_{t < tree_counts[j]} value[node(t, k), c]``
    where ``node(t, k)`` is the node tree ``t`` reaches in ``depth_list[k]``
    steps.  Each tree is descended once (to the deepest limit); the node
    distributions are summed as the descent passes each limit.  Ties go to the
    lowest class id.  Parallel over chunks of ``chunk`` pixels (in lockstep).
    """
    n_pix = ys.shape[0]
    n_classes = value.shape[1]
    n_d = depth_list.shape[0]
    n_t = tree_counts.shape[0]
    n_a = scales.shape[0]
    deepest = depth_list[n_d - 1]
    n_chunks = (n_pix + chunk - 1) // chunk
    for ch in prange(n_chunks):
        lo = ch * chunk
        hi = min(n_pix, lo + chunk)
        m = hi - lo
        cur = np.empty(m, dtype=np.int64)
        sums = np.zeros((m, n_d, n_classes), dtype=np.float64)
        bases = ys[lo:hi] * rowstride + xs[lo:hi] * 3
        j = 0
        for t in range(tree_counts[n_t - 1]):
            cur[:] = roots[t]
            k = 0
            for s in range(deepest + 1):
                if s > 0:
                    for i in range(m):
                        node = cur[i]
                        v = _node_value(img, bases[i], rowstride, ys[lo + i], xs[lo + i],
                                        node, nodes, thr, weights, resp)
                        cur[i] = nodes[node, np.int64(v > thr[node, THRESHOLD])]
                while k < n_d and depth_list[k] == s:
                    for i in range(m):
                        for c in range(n_classes):
                            sums[i, k, c] += value[cur[i], c]
                    k += 1
            while j < n_t and tree_counts[j] == t + 1:
                for i in range(m):
                    for a in range(n_a):
                        for kk in range(n_d):
                            best = 0
                            bv = sums[i, kk, 0] * scales[a, 0]
                            for c in range(1, n_classes):
                                sv = sums[i, kk, c] * scales[a, c]
                                if sv > bv:
                                    bv = sv
                                    best = c
                            preds[a, kk, j, lo + i] = best
                j += 1
    return preds


@njit(cache=True, nogil=True)
def confusion_many(preds, truth, n_classes, out):
    """``out[s, t, p] += #{i : truth[i] == t and preds[s, i] == p}`` (int64)."""
    for s in range(preds.shape[0]):
        for i in range(truth.shape[0]):
            out[s, truth[i], preds[s, i]] += 1
    return out
