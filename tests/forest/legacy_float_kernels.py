"""Frozen copy of the float axis split kernel before the radix argsort
(per feature: a strided gather, then ``np.argsort(kind="mergesort")``).

The reference (a test oracle) of tests/forest/test_split_blocks.py and the
"old" side of benchmarks/bench_split_kernels.py's float rows: the axis and
two-probe float searches must choose the same split with the same gain as
these (the two-probe float kernel's frozen copy is
``legacy_split_kernels._pair_split_sorted``).  Do not edit (except to fix imports).
"""

import numpy as np
from numba import njit

from tests.forest.legacy_split_kernels import class_counts, scan_sorted, xlogx_table


@njit(cache=True, nogil=True)
def _axis_split_sorted(X, y, idx, features, n_classes, min_leaf):
    m = idx.shape[0]
    q = features.shape[0]
    tot = class_counts(y, idx, n_classes)
    flog = xlogx_table(m)
    vals = np.empty(m, dtype=X.dtype)
    vs = np.empty(m, dtype=X.dtype)
    ls = np.empty(m, dtype=np.int32)
    best_f = -1
    best_t = np.float32(0.0)
    best_gain = -1.0
    for k in range(q):
        f = features[k]
        for i in range(m):
            vals[i] = X[idx[i], f]
        order = np.argsort(vals, kind="mergesort")
        for i in range(m):
            vs[i] = vals[order[i]]
            ls[i] = y[idx[order[i]]]
        if vs[0] == vs[m - 1]:
            continue
        t, g = scan_sorted(vs, ls, tot, min_leaf, flog)
        if g > best_gain:
            best_gain = g
            best_f = f
            best_t = t
    return best_f, best_t, best_gain
