"""Numba kernels of dense inference (private; see :mod:`facesegment.inference`).

Kernels take plain arrays and scalars and do no validation.  The image is the
*padded* RGB uint8 image flattened in C order (``img``), with ``rowstride`` bytes
per row; the window of the pixel whose window top-left corner is padded pixel
``(y, x)`` starts at byte ``base = y * rowstride + x * 3``.  Per node the wrapper
precomputes ``off1``/``off2``: the byte offsets (inside the window) of the node's
first and second probe for this padded width, so axis-aligned and two-probe
nodes read one or two bytes.  Oblique nodes dot a weights row, laid out as 31
rows of 93 contiguous values, with the window's 31 rows of 93 contiguous bytes.

``resp``/``resp_index``: optional precomputed oblique responses (the top levels
of CO2 trees evaluated for the whole image at once by FFT correlation):
``resp[resp_index[node], y, x]`` replaces the dot product when
``resp_index[node] >= 0``.
"""

import numpy as np
from numba import njit, prange

from .classes import WINDOW, N_CHANNELS

ROW = WINDOW * N_CHANNELS  # 93 contiguous bytes per window row


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
def _node_value(img, base, rowstride, y, x, node, off1, off2, oblique, weights,
                resp, resp_index):
    """The split value of ``node`` for the window at ``base``."""
    o = oblique[node]
    if o >= 0:
        r = resp_index[node]
        if r >= 0:
            return resp[r, y, x]
        return _dot_window(img, base, rowstride, weights, o)
    v = np.float32(img[base + off1[node]])
    if off2[node] >= 0:
        v -= np.float32(img[base + off2[node]])
    return v


@njit(cache=True, nogil=True)
def _walk(img, base, rowstride, y, x, node, max_depth, left, right, off1, off2,
          oblique, threshold, depth, weights, resp, resp_index):
    """Descend from ``node`` until a leaf or ``depth == max_depth``; return the node."""
    while left[node] >= 0 and depth[node] < max_depth:
        v = _node_value(img, base, rowstride, y, x, node, off1, off2, oblique,
                        weights, resp, resp_index)
        if v <= threshold[node]:
            node = left[node]
        else:
            node = right[node]
    return node


@njit(cache=True, nogil=True, parallel=True)
def dense_proba(img, rowstride, y0, y1, x0, x1, roots, max_depth, left, right,
                off1, off2, oblique, threshold, depth, value, weights, resp,
                resp_index, out):
    """Mean class distribution over ``roots`` for every pixel of a rectangle.

    Writes ``out[y, x, :]`` (float32, ``(H, W, C)``) for ``y0 <= y < y1`` and
    ``x0 <= x < x1``; pixel ``(y, x)`` has its window top-left at padded
    ``(y, x)`` (the padded image has a 15-px margin).  Parallel over rows.
    """
    n_trees = roots.shape[0]
    n_classes = value.shape[1]
    inv = np.float32(1.0) / np.float32(n_trees)
    for y in prange(y0, y1):
        acc = np.zeros(n_classes, dtype=np.float32)
        for x in range(x0, x1):
            base = y * rowstride + x * 3
            acc[:] = 0.0
            for t in range(n_trees):
                node = _walk(img, base, rowstride, y, x, roots[t], max_depth, left,
                             right, off1, off2, oblique, threshold, depth, weights,
                             resp, resp_index)
                for c in range(n_classes):
                    acc[c] += value[node, c]
            for c in range(n_classes):
                out[y, x, c] = acc[c] * inv
    return out


@njit(cache=True, nogil=True)
def count_oblique_visits(img, rowstride, y0, y1, x0, x1, roots, max_depth, left,
                         right, off1, off2, oblique, threshold, depth, weights,
                         resp, resp_index):
    """Number of oblique nodes evaluated over a rectangle (for the FLOP bound)."""
    total = 0
    for y in range(y0, y1):
        for x in range(x0, x1):
            base = y * rowstride + x * 3
            for t in range(roots.shape[0]):
                node = roots[t]
                while left[node] >= 0 and depth[node] < max_depth:
                    if oblique[node] >= 0:
                        total += 1
                    v = _node_value(img, base, rowstride, y, x, node, off1, off2,
                                    oblique, weights, resp, resp_index)
                    node = left[node] if v <= threshold[node] else right[node]
    return total


@njit(cache=True, nogil=True, parallel=True)
def sweep_predict(img, rowstride, ys, xs, roots, depth_list, tree_counts, scales,
                  left, right, off1, off2, oblique, threshold, depth, value, weights,
                  resp, resp_index, chunk, preds):
    """Labels of many truncated forests in one traversal per pixel and tree.

    For pixel ``i`` (window top-left at padded ``(ys[i], xs[i])``), every depth
    limit ``depth_list[k]`` and every forest made of the first
    ``tree_counts[j]`` trees (ascending), and every row ``scales[a]`` of
    per-class factors ``s^-alpha``, writes
    ``preds[a, k, j, i] = argmax_c scales[a, c] * sum_{t < tree_counts[j]} value[node_t,k, c]``
    where ``node_t,k`` is the node tree ``t`` reaches with depth limit
    ``depth_list[k]``.  Each tree is traversed once (to the deepest limit) and
    the path is kept, so all depth limits come from one walk.  Ties go to the
    lowest class id.  Parallel over chunks of ``chunk`` pixels.
    """
    n_pix = ys.shape[0]
    n_classes = value.shape[1]
    n_d = depth_list.shape[0]
    n_t = tree_counts.shape[0]
    n_a = scales.shape[0]
    deepest = 0
    for k in range(n_d):
        if depth_list[k] > deepest:
            deepest = depth_list[k]
    max_path = 0
    for i in range(depth.shape[0]):
        if depth[i] > max_path:
            max_path = depth[i]
    max_path = min(max_path, deepest) + 1
    n_chunks = (n_pix + chunk - 1) // chunk
    for ch in prange(n_chunks):
        path = np.empty(max_path, dtype=np.int64)
        sums = np.empty((n_d, n_classes), dtype=np.float64)
        for i in range(ch * chunk, min(n_pix, (ch + 1) * chunk)):
            y = ys[i]
            x = xs[i]
            base = y * rowstride + x * 3
            sums[:, :] = 0.0
            j = 0
            for t in range(tree_counts[n_t - 1]):
                node = roots[t]
                length = 0
                path[0] = node
                while left[node] >= 0 and depth[node] < deepest:
                    v = _node_value(img, base, rowstride, y, x, node, off1, off2,
                                    oblique, weights, resp, resp_index)
                    node = left[node] if v <= threshold[node] else right[node]
                    length += 1
                    path[length] = node
                for k in range(n_d):
                    nd = path[min(depth_list[k], length)]
                    for c in range(n_classes):
                        sums[k, c] += value[nd, c]
                while j < n_t and tree_counts[j] == t + 1:
                    for a in range(n_a):
                        for k in range(n_d):
                            best = 0
                            bv = sums[k, 0] * scales[a, 0]
                            for c in range(1, n_classes):
                                s = sums[k, c] * scales[a, c]
                                if s > bv:
                                    bv = s
                                    best = c
                            preds[a, k, j, i] = best
                    j += 1
    return preds


@njit(cache=True, nogil=True)
def confusion_many(preds, truth, n_classes, out):
    """``out[s, t, p] += #{i : truth[i] == t and preds[s, i] == p}`` (int64)."""
    for s in range(preds.shape[0]):
        for i in range(truth.shape[0]):
            out[s, truth[i], preds[s, i]] += 1
    return out
