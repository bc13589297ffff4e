"""Float32 dot products in a fixed order, the same bits on every CPU (private).

A split value ``w @ x`` decides on which side a sample falls, in training
(the CO2 split search, the partition of a node's samples) and in
prediction.  Summed in a loop that the compiler may reassociate, the order
follows the vector width it targets (8 float32 lanes with AVX2, 16 with
AVX-512), so a forest trained on one CPU could differ from one trained on
another.  Here the order is written out: 32 partial sums, lane ``k`` adding
``w[j] * x[j]`` for ``j = k, k + 32, ...`` in order, the values after the
last multiple of 32 added one by one, the lanes halved pairwise (``a[k] +=
a[k + m]`` for m = 16, 8, 4, 2, 1) and the rest added last.  Compiled with
IEEE arithmetic (:data:`facesegment._jit.NJIT`: no reassociation, no fused
multiply-add), each lane's operations are independent, so the compiler
vectorises them over any width without changing a bit.  Measured by
``benchmarks/co2_fixed_order.py`` against the reassociated loop.
"""

import numpy as np

from .._jit import NJIT, njit

#: Partial sums (lanes) of every dot product.
LANES = 32


@njit(**NJIT)
def dot(w, x):
    """``sum_j w[j] * float32(x[j])`` over ``j < len(w)`` in float32, in the
    fixed order of the module docstring (``x`` uint8 or float32, at least as
    long as ``w``)."""
    p = w.shape[0]
    n = p - p % LANES
    a = np.zeros(LANES, np.float32)
    for j in range(0, n, LANES):
        for k in range(LANES):
            a[k] += w[j + k] * np.float32(x[j + k])
    rest = np.float32(0.0)
    for j in range(n, p):
        rest += w[j] * np.float32(x[j])
    m = LANES
    while m > 1:
        m //= 2
        for k in range(m):
            a[k] += a[k + m]
    return a[0] + rest


@njit(**NJIT)
def dot2(x, u, u2):
    """``(dot(u, x), dot(u2, x))`` in one pass over ``x`` (the same bits as two
    :func:`dot` calls)."""
    p = u.shape[0]
    n = p - p % LANES
    a = np.zeros(LANES, np.float32)
    b = np.zeros(LANES, np.float32)
    for j in range(0, n, LANES):
        for k in range(LANES):
            xv = np.float32(x[j + k])
            a[k] += u[j + k] * xv
            b[k] += u2[j + k] * xv
    ra = np.float32(0.0)
    rb = np.float32(0.0)
    for j in range(n, p):
        xv = np.float32(x[j])
        ra += u[j] * xv
        rb += u2[j] * xv
    m = LANES
    while m > 1:
        m //= 2
        for k in range(m):
            a[k] += a[k + m]
            b[k] += b[k + m]
    return a[0] + ra, b[0] + rb


__all__ = ["LANES", "dot", "dot2"]
