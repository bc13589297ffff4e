"""Float32 dot products in a fixed order, the same bits on every CPU (private).

A split value ``w @ x`` decides on which side a sample falls, in training
(the CO2 split search, the partition of a node's samples) and in
prediction.  Summed in a loop that the compiler may reassociate, the order
follows the vector width it targets (8 float32 lanes with AVX2, 16 with
AVX-512), so a forest trained on one CPU could differ from one trained on
another.  Here the order is fixed: 32 partial sums, lane ``k`` adding
``w[j] * x[j]`` for ``j = k, k + 32, ...`` in order, below the last
multiple of 32; the lanes halved pairwise (``a[k] += a[k + m]`` for m = 16,
8, 4, 2, 1); the values after the last multiple of 32 added one by one to
the result, in order (``tests/naive.py``'s ``naive_fixed_order_dot``).

The 32 lanes are written as four ``<8 x float>`` vectors in LLVM IR (a Numba
intrinsic, as :mod:`facesegment.dense._simd` does for integer dots), with
IEEE ``fmul`` and ``fadd`` (no fast-math flags: no reassociation, no fused
multiply-add), so the code is vectorised on every CPU the same way and gives
the same bits (SSE splits each vector in two, AVX-512 may join two: lanes
stay lanes).  Numba's own loops over such lanes are vectorised only for
some lane counts and input types (float32 inputs: 12x slower than the
reassociated loop).  Measured by ``benchmarks/co2_fixed_order.py``.
"""

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .._jit import NJIT, njit

#: Partial sums (lanes) of every dot product: four vectors of 8 float32.
LANES = 32
_WIDTH = 8


def _codegen(n_weights, x_is_float):
    def codegen(context, builder, sig, args):
        """Emit the LLVM IR of the fixed-order lanes of ``n_weights`` dot products.

        Parameters
        ----------
        context : numba.core.base.BaseContext
            Numba's target context.
        builder : llvmlite.ir.IRBuilder
            The builder the IR is emitted with.
        sig : numba.core.typing.Signature
            The intrinsic's signature (the weight arrays, ``x``, ``blocks``).
        args : tuple of llvmlite values
            The arguments, in the order of ``sig``.

        Returns
        -------
        llvmlite value
            The float32 reduced lanes (one dot product), or a tuple of them.
        """
        f32 = ir.FloatType()
        i64 = ir.IntType(64)
        vec = ir.VectorType(f32, _WIDTH)
        x_arg = args[n_weights]
        blocks = context.cast(builder, args[n_weights + 1], sig.args[n_weights + 1], types.int64)
        ws = [context.make_array(sig.args[i])(context, builder, args[i]).data
              for i in range(n_weights)]
        xa = context.make_array(sig.args[n_weights])(context, builder, x_arg).data
        x_t = vec if x_is_float else ir.VectorType(ir.IntType(8), _WIDTH)
        zero = ir.Constant(vec, None)
        accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(LANES // _WIDTH)]
                for _ in range(n_weights)]

        def load(ptr, off, t):
            """Load a value of type ``t`` (unaligned) at element ``off`` of ``ptr``.

            Parameters
            ----------
            ptr : llvmlite pointer
                The array's data.
            off : llvmlite i64 value
                Element offset.
            t : llvmlite type
                The vector type loaded.

            Returns
            -------
            llvmlite value
                The loaded vector.
            """
            return builder.load(builder.bitcast(builder.gep(ptr, [off]), t.as_pointer()),
                                align=1)

        with cgutils.for_range(builder, blocks) as loop:
            base = builder.mul(loop.index, ir.Constant(i64, LANES))
            for q in range(LANES // _WIDTH):
                off = builder.add(base, ir.Constant(i64, q * _WIDTH))
                xv = load(xa, off, x_t)
                if not x_is_float:
                    xv = builder.uitofp(xv, vec)
                for wi in range(n_weights):
                    wv = load(ws[wi], off, vec)
                    slot = accs[wi][q]
                    builder.store(builder.fadd(builder.load(slot), builder.fmul(wv, xv)), slot)

        def lanes(v, picks):
            """The vector ``v`` with its lanes permuted by ``picks``.

            Parameters
            ----------
            v : llvmlite value
                An 8 x float32 vector.
            picks : list of int
                The source lane of each result lane.

            Returns
            -------
            llvmlite value
                The shuffled vector.
            """
            return builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32),
                                                                         _WIDTH), picks))

        out = []
        for wi in range(n_weights):
            a0, a1, a2, a3 = (builder.load(s) for s in accs[wi])
            a0 = builder.fadd(a0, a2)           # m = 16: lanes k += k + 16
            a1 = builder.fadd(a1, a3)
            a0 = builder.fadd(a0, a1)           # m = 8
            for m in (4, 2, 1):                 # within the vector: k += k + m
                a0 = builder.fadd(a0, lanes(a0, [(k + m) % _WIDTH for k in range(_WIDTH)]))
            out.append(builder.extract_element(a0, ir.Constant(ir.IntType(32), 0)))
        if n_weights == 1:
            return out[0]
        return context.make_tuple(builder, sig.return_type, out)

    return codegen


def _typed(n_weights):
    def typer(typingctx, *args):
        """Type the intrinsic: float32 C-contiguous weights, a uint8 or float32 ``x``.

        Parameters
        ----------
        typingctx : numba.core.typing.Context
            Numba's typing context.
        *args : numba types
            The ``n_weights`` weight arrays, ``x`` and ``blocks``.

        Returns
        -------
        tuple or None
            ``(signature, codegen)``, or None when the arguments do not fit (1-d
            C-contiguous float32 weights, 1-d C-contiguous uint8 or float32 ``x``,
            an integer ``blocks``).
        """
        arrays, x, blocks = args[:n_weights], args[n_weights], args[n_weights + 1]
        ok = (all(isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"
                  and a.dtype == types.float32 for a in arrays)
              and isinstance(x, types.Array) and x.ndim == 1 and x.layout == "C"
              and x.dtype in (types.uint8, types.float32)
              and isinstance(blocks, types.Integer))
        if not ok:
            return None
        ret = types.float32 if n_weights == 1 else types.UniTuple(types.float32, n_weights)
        return ret(*args), _codegen(n_weights, x.dtype == types.float32)

    return typer


@intrinsic
def _lanes1(typingctx, w, x, blocks):
    """The 32 lanes of ``w @ x`` over ``blocks`` blocks of 32 values, reduced."""
    return _typed(1)(typingctx, w, x, blocks)


@intrinsic
def _lanes2(typingctx, u, u2, x, blocks):
    """:func:`_lanes1` for two weight vectors sharing ``x``."""
    return _typed(2)(typingctx, u, u2, x, blocks)


@njit(**NJIT)
def dot(w, x):
    """``sum_j w[j] * float32(x[j])`` over ``j < len(w)`` in float32, in a fixed order.

    The order is that of the module docstring.

    Parameters
    ----------
    w : float32 (p,), C-contiguous
        The weights.
    x : uint8 or float32 (>= p,), C-contiguous
        The sample.

    Returns
    -------
    float32
        The dot product.
    """
    p = w.shape[0]
    blocks = p // LANES
    s = _lanes1(w, x, blocks)
    for j in range(blocks * LANES, p):
        s += w[j] * np.float32(x[j])
    return s


@njit(**NJIT)
def dot2(x, u, u2):
    """``(dot(u, x), dot(u2, x))`` in one pass over ``x`` (the same bits).

    Parameters
    ----------
    x : uint8 or float32 (>= p,), C-contiguous
        The sample.
    u, u2 : float32 (p,), C-contiguous
        The two weight vectors.

    Returns
    -------
    a, b : float32
        ``dot(u, x)`` and ``dot(u2, x)``.
    """
    p = u.shape[0]
    blocks = p // LANES
    a, b = _lanes2(u, u2, x, blocks)
    for j in range(blocks * LANES, p):
        xv = np.float32(x[j])
        a += u[j] * xv
        b += u2[j] * xv
    return a, b


__all__ = ["LANES", "dot", "dot2"]
