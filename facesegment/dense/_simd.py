"""Integer dot products of 8 windows at once, as Numba intrinsics (private).

A forest whose dense oblique rows are int8 (``weight_dtype="int8"``: one
scale per split folded into the threshold) over uint8 values computes every
split value as an exact integer, so the order and width of the arithmetic do
not matter: these kernels give the bits the float32 kernels give, and the
threshold chosen in training.  Numba's own loops over such integers become
32-bit multiplies; here the dot is written directly in LLVM IR with vector
types:

* ``vnni`` (``avx512vnni`` with ``avx512vl``, or ``avxvnni``): one
  ``vpdpbusd`` per 32 bytes of window row, multiplying 32 unsigned image
  bytes by 32 signed weights and adding them, four by four, into 8 int32
  lanes (4x the work of a float32 FMA per instruction, and a quarter of the
  bytes read);
* ``avx2`` (AVX2, no VNNI: :func:`idot8_avx2`): the image as uint16 and the
  rows as int16 (int8 rows widened, int16 rows in one plane), one
  ``vpmaddwd`` per 16 values: 16 products added in pairs into 8 int32 lanes,
  exact (``255 * 32768 * 2 < 2**31``; ``vpmaddubsw`` would saturate its
  16-bit pair sums on these rows: ``255 * (127 + 127) > 32767``).  Each
  window keeps 8 lanes, so the 8 sums fill 8 of AVX2's 16 registers; the
  portable form's 16 sums of 16 lanes (both planes of an int16 row) need 32,
  and compiled for AVX2 it spills them to the stack at every multiply-add;
* otherwise the portable form: the bytes widened to 32 bits, multiplied, and
  the products added in pairs, the pattern LLVM turns into ``vpmaddwd`` (AVX2;
  ``vpdpwssd`` where the CPU has AVX-512 VNNI), and which names no x86
  intrinsic (any target, aarch64 included).  Written as 32 separate
  products it runs 2.1x slower (measured on an AVX2-only target).

Either way each of the 8 windows keeps one vector sum across all its rows;
the 8 sums are reduced together (:func:`_sums8`).
The form follows the features Numba compiles for (:func:`target_features`:
``NUMBA_CPU_FEATURES``, else the host's); ``FACESEGMENT_SIMD=portable``
forces the portable form, ``FACESEGMENT_SIMD=avx2`` caps it at AVX2 (tests
compare them).  The choice is made once per process, on first use
(:func:`form`; the module attributes ``VNNI``, ``FORM`` and ``VARIANT`` ask
it, importing probes nothing), and the x86 forms refuse to compile for a
target without their instructions.  The kernels that use it take the form
in their layout's type (:class:`facesegment.dense._numba.KernelLayout`, e.g.
``KernelLayout(10x3,u8vnni)``) and carry the package's source tag in their
names (:func:`facesegment._jit.source_tag`), so Numba's disk cache never mixes
forms, nor serves kernels built on an older version of this file.

The window of pixel ``u`` starts at value ``bb[u]`` of ``img``; its row ``r``
is the ``32 * chunks`` values (``16 * chunks`` in the AVX2 form) from
``bb[u] + r * rowstride``, dotted with values ``r * 32 * chunks ..`` of ``w``.
Rows may run past the window's last value (those values meet zero weights)
but must stay inside ``img``.  A ``mask`` skips the chunks whose weights are
all zero (the high bytes of an int16 row are zero but for its few large
weights).
"""

import functools
import os

from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils, config
from numba.core.errors import TypingError
from numba.extending import intrinsic

#: Bytes per vector step (one 256-bit register).
CHUNK = 32
#: int16 values per vector step of the AVX2 form (one 256-bit register).
CHUNK16 = 16


def target_features():
    """The CPU features Numba compiles for, as Numba's JIT target machine takes
    them: ``NUMBA_CPU_FEATURES`` where set (``""`` for ``NUMBA_CPU_NAME=generic``),
    else the host's; a CPU named by ``NUMBA_CPU_NAME`` without its features
    counts as none (its defaults are not known here), as does a CPU that is not
    x86 (the forms below are x86 instructions).  A frozenset of names (``avx2``)."""
    if not llvm.get_process_triple().startswith(("x86_64", "i386", "i686")):
        return frozenset()
    text = getattr(config, "CPU_FEATURES", None)
    if text is None:
        if getattr(config, "CPU_NAME", None) not in (None, "host"):
            return frozenset()
        try:
            text = llvm.get_host_cpu_features().flatten()
        except RuntimeError:  # pragma: no cover - llvmlite without host detection
            return frozenset()
    return frozenset(f[1:] for f in text.split(",") if f.startswith("+"))


def form_of(features, wanted=""):
    """``"vnni"``, ``"avx2"`` or ``"portable"``: the fastest form ``features``
    (:func:`target_features`) can run, at most ``wanted`` (``FACESEGMENT_SIMD``:
    ``portable`` or ``avx2``; anything else: no cap).

    Parameters
    ----------
    features : frozenset of str
        CPU feature names without their ``+`` (``"avx2"``, ``"avx512vnni"``).
    wanted : str, optional
        The cap, case-insensitive: ``"portable"``, ``"avx2"``, or anything
        else (``""``) for none.

    Returns
    -------
    str
        ``"vnni"`` with ``avx512vnni`` and ``avx512vl``, or ``avxvnni``
        (unless capped); else ``"avx2"`` with ``avx2`` (unless capped at
        portable); else ``"portable"``.
    """
    wanted = wanted.lower()
    if wanted == "portable":
        return "portable"
    if wanted != "avx2" and ({"avx512vnni", "avx512vl"} <= features or "avxvnni" in features):
        return "vnni"
    return "avx2" if "avx2" in features else "portable"


@functools.cache
def form():
    """The form this process compiles (:func:`form_of` the target's features and
    ``FACESEGMENT_SIMD``): decided on the first call, then remembered."""
    return form_of(target_features(), os.environ.get("FACESEGMENT_SIMD", ""))


def vnni():
    """Whether this process uses ``vpdpbusd`` (:func:`form` is ``"vnni"``)."""
    return form() == "vnni"


def _wanted(builder, mask, row, chunks, col):
    """Whether chunk ``k = row * chunks + col`` is dotted: bit k of ``mask``
    (chunks from the 64th on always are)."""
    i64 = ir.IntType(64)
    k = builder.add(builder.mul(row, chunks), col)
    low = builder.icmp_unsigned("<", k, ir.Constant(i64, 64))
    shift = builder.select(low, k, ir.Constant(i64, 0))
    bit = builder.and_(builder.lshr(mask, shift), ir.Constant(i64, 1))
    return builder.or_(builder.not_(low), builder.icmp_unsigned("!=", bit, ir.Constant(i64, 0)))


def _shuffle_add(builder, a, b, first, second):
    """``shuffle(a, b, first) + shuffle(a, b, second)`` (lane lists)."""
    i32 = ir.IntType(32)

    def pick(lanes):
        """``shuffle_vector(a, b, lanes)``.

        Parameters
        ----------
        lanes : list of int
            Lane indices into the concatenation of ``a`` and ``b``.

        Returns
        -------
        llvmlite.ir.Value
            An i32 vector of ``len(lanes)`` lanes.
        """
        return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(i32, len(lanes)), lanes))

    return builder.add(pick(first), pick(second))


def _sums8(builder, vs):
    """One vector of 8 int32: lane ``u`` the sum of the lanes of ``vs[u]``.

    Each vector is first folded to 8 lanes (its halves added), then the 8 are
    summed in three rounds of pairwise shuffles and adds (14 shuffles and 7 adds
    instead of 8 separate reductions; integer sums, so the order is free)."""
    folded = []
    for v in vs:
        while v.type.count > 8:
            h = v.type.count // 2
            v = _shuffle_add(builder, v, v, list(range(h)), list(range(h, 2 * h)))
        folded.append(v)
    s = [_shuffle_add(builder, folded[2 * k], folded[2 * k + 1],
                      [0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15]) for k in range(4)]
    t = [_shuffle_add(builder, s[2 * k], s[2 * k + 1],
                      [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]) for k in range(2)]
    return _shuffle_add(builder, t[0], t[1], [0, 1, 2, 3, 8, 9, 10, 11],
                        [4, 5, 6, 7, 12, 13, 14, 15])


def _arguments(context, builder, sig, args):
    """The dots' arguments in IR: the image, box offsets and weight arrays, and
    ``rowstride``, ``rows``, ``chunks``, ``mask`` as int64."""
    img, bb, rowstride, w, rows, chunks, mask = args
    rowstride, rows, chunks, mask = (
        context.cast(builder, v, t, types.int64) for v, t in
        ((rowstride, sig.args[2]), (rows, sig.args[4]), (chunks, sig.args[5]),
         (mask, sig.args[6])))
    arrays = (context.make_array(sig.args[i])(context, builder, v)
              for i, v in ((0, img), (1, bb), (3, w)))
    return (*arrays, rowstride, rows, chunks, mask)


def _codegen(vnni, two):
    """The IR of the 8 dots: one weight plane (int8 rows, ``mask`` skipping its
    chunks), or two (``two``: int16 rows as their high-byte plane, dotted where
    ``mask`` says, then their low-byte plane, always; ``256 h.x + l.x`` is
    formed in the vector sums, which :func:`_sums8` then reduces together)."""
    def codegen(context, builder, sig, args):
        """Emit the 8 dots at the call site (Numba's intrinsic code generator).

        Parameters
        ----------
        context : numba.core.base.BaseContext
            Numba's target context.
        builder : llvmlite.ir.IRBuilder
            Where the IR is emitted.
        sig : numba.core.typing.Signature
            The typed call: ``(img, bb, rowstride, w, rows, chunks, mask)``.
        args : tuple of llvmlite.ir.Value
            The call's arguments in IR.

        Returns
        -------
        llvmlite.ir.Value
            The UniTuple of 8 int32 dots.
        """
        a_img, a_bb, a_w, rowstride, rows, chunks, mask = _arguments(context, builder, sig, args)
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        v32i8 = ir.VectorType(i8, CHUNK)
        acc_t = ir.VectorType(i32, 8 if vnni else CHUNK // 2)
        wide_t = ir.VectorType(i32, CHUNK)
        mod = builder.module
        dp = cgutils.get_or_insert_function(
            mod, ir.FunctionType(acc_t, [acc_t, acc_t, acc_t]),
            "llvm.x86.avx512.vpdpbusd.256") if vnni else None
        p_img = builder.bitcast(a_img.data, i8.as_pointer())
        p_w = builder.bitcast(a_w.data, i8.as_pointer())
        offs = [builder.load(builder.gep(a_bb.data, [ir.Constant(i64, u)])) for u in range(8)]
        zero = ir.Constant(acc_t, None)
        accs = [cgutils.alloca_once_value(builder, zero) for _ in range(8)]
        highs = [cgutils.alloca_once_value(builder, zero) for _ in range(8)] if two else None
        step = ir.Constant(i64, CHUNK)
        plane = builder.mul(builder.mul(rows, chunks), step)   # bytes of one weight plane

        def load(ptr, off):
            """The 32 bytes at ``ptr + off`` (unaligned load).

            Parameters
            ----------
            ptr : llvmlite.ir.Value
                An i8 pointer (image or weights).
            off : llvmlite.ir.Value
                i64 offset in bytes.

            Returns
            -------
            llvmlite.ir.Value
                A ``<32 x i8>`` vector.
            """
            return builder.load(builder.bitcast(builder.gep(ptr, [off]), v32i8.as_pointer()),
                                align=1)

        def mac(slot, x, wv):
            """Add the products of ``x`` (unsigned) and ``wv`` (signed) to ``slot``.

            Parameters
            ----------
            slot : llvmlite.ir.Value
                Pointer to one window's accumulator vector (loaded, updated
                and stored back).
            x : llvmlite.ir.Value
                ``<32 x i8>`` image bytes.
            wv : llvmlite.ir.Value
                ``<32 x i8>`` weights.
            """
            acc = builder.load(slot)
            if vnni:
                acc = builder.call(dp, [acc, builder.bitcast(x, acc_t),
                                        builder.bitcast(wv, acc_t)])
            else:       # products added in pairs: the pattern LLVM makes vpmaddwd of
                prod = builder.mul(builder.zext(x, wide_t), builder.sext(wv, wide_t))
                acc = builder.add(acc, _shuffle_add(builder, prod, prod, list(range(0, CHUNK, 2)),
                                                    list(range(1, CHUNK, 2))))
            builder.store(acc, slot)

        with cgutils.for_range(builder, rows) as lr:
            row_img = builder.mul(rowstride, lr.index)
            row_w = builder.mul(builder.mul(lr.index, chunks), step)
            with cgutils.for_range(builder, chunks) as lc:
                co = builder.mul(lc.index, step)
                wanted = _wanted(builder, mask, lr.index, chunks, lc.index)

                def xs():
                    return [load(p_img, builder.add(builder.add(o, row_img), co)) for o in offs]

                if two:
                    x = xs()
                    w_lo = load(p_w, builder.add(plane, builder.add(row_w, co)))
                    for u in range(8):
                        mac(accs[u], x[u], w_lo)
                    with builder.if_then(wanted):
                        w_hi = load(p_w, builder.add(row_w, co))
                        for u in range(8):
                            mac(highs[u], x[u], w_hi)
                else:
                    with builder.if_then(wanted):
                        x = xs()
                        wv = load(p_w, builder.add(row_w, co))
                        for u in range(8):
                            mac(accs[u], x[u], wv)
        totals = []
        for u in range(8):
            total = builder.load(accs[u])
            if two:
                shl = builder.shl(builder.load(highs[u]), ir.Constant(acc_t, [8] * acc_t.count))
                total = builder.add(total, shl)
            totals.append(total)
        sums = _sums8(builder, totals)
        return context.make_tuple(builder, sig.return_type,
                                  [builder.extract_element(sums, ir.Constant(i32, u))
                                   for u in range(8)])

    return codegen


def _codegen_avx2(context, builder, sig, args):
    """The IR of the 8 dots of the AVX2 form: uint16 windows, int16 weights,
    ``vpmaddwd`` per 16 values (16 products added in pairs into 8 int32 lanes:
    exact, as ``255 * 32768 * 2 < 2**31``), one 8-lane sum per window (8
    registers: AVX2 has 16)."""
    a_img, a_bb, a_w, rowstride, rows, chunks, mask = _arguments(context, builder, sig, args)
    i16, i32, i64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
    v16 = ir.VectorType(i16, CHUNK16)
    acc_t = ir.VectorType(i32, 8)
    pmadd = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(acc_t, [v16, v16]), "llvm.x86.avx2.pmadd.wd")
    p_img = builder.bitcast(a_img.data, i16.as_pointer())
    p_w = builder.bitcast(a_w.data, i16.as_pointer())
    offs = [builder.load(builder.gep(a_bb.data, [ir.Constant(i64, u)])) for u in range(8)]
    accs = [cgutils.alloca_once_value(builder, ir.Constant(acc_t, None)) for _ in range(8)]
    step = ir.Constant(i64, CHUNK16)

    def load(ptr, off):
        """The 16 int16 values at ``ptr + off`` (2-byte aligned load).

        Parameters
        ----------
        ptr : llvmlite.ir.Value
            An i16 pointer (image or weights).
        off : llvmlite.ir.Value
            i64 offset in values.

        Returns
        -------
        llvmlite.ir.Value
            A ``<16 x i16>`` vector.
        """
        return builder.load(builder.bitcast(builder.gep(ptr, [off]), v16.as_pointer()), align=2)

    with cgutils.for_range(builder, rows) as lr:
        row_img = builder.mul(rowstride, lr.index)
        row_w = builder.mul(builder.mul(lr.index, chunks), step)
        with cgutils.for_range(builder, chunks) as lc:
            co = builder.mul(lc.index, step)
            with builder.if_then(_wanted(builder, mask, lr.index, chunks, lc.index)):
                wv = load(p_w, builder.add(row_w, co))
                for u in range(8):
                    x = load(p_img, builder.add(builder.add(offs[u], row_img), co))
                    builder.store(builder.add(builder.load(accs[u]),
                                              builder.call(pmadd, [x, wv])), accs[u])
    sums = _sums8(builder, [builder.load(a) for a in accs])
    return context.make_tuple(builder, sig.return_type,
                              [builder.extract_element(sums, ir.Constant(i32, u))
                               for u in range(8)])


def _require(name, wanted):
    """Refuse (Numba's TypingError, one line) to type the x86 intrinsic ``name``
    for a target whose features (:func:`target_features`) lack the form
    ``wanted`` (``"avx2"`` or ``"vnni"``)."""
    feats = target_features()
    if form_of(feats) == wanted or (wanted == "avx2" and "avx2" in feats):
        return
    shown = ", ".join(sorted(feats)[:8]) + (", ..." if len(feats) > 8 else "") or "none"
    raise TypingError(f"{name} needs a target with {wanted.upper()}; the features Numba "
                      f"compiles for ({shown}) have none: use the portable form "
                      "(FACESEGMENT_SIMD=portable, idot8_portable)")


@intrinsic
def idot8_avx2(typingctx, img, bb, rowstride, w, rows, chunks, mask):
    """:func:`idot8` of the AVX2 form: ``img`` uint16 and ``w`` int16 (int8 rows
    widened, int16 rows as they are: one plane), rows of ``chunks`` x 16
    values, ``mask`` over those 16-value chunks.  Typed only where the target
    has AVX2 (elsewhere a TypingError says so).

    Called from jitted code as ``idot8_avx2(img, bb, rowstride, w, rows,
    chunks, mask)``; Numba passes ``typingctx`` and the arguments' types.

    Parameters
    ----------
    typingctx : numba.core.typing.Context
        Numba's typing context (not used).
    img : uint16 (n_values,)
        The image values the windows are read from.
    bb : int64 (8,)
        Each window's first value in ``img``.
    rowstride : int
        Values between two window rows in ``img``.
    w : int16 (rows * chunks * 16,)
        The weights row, window rows padded to ``chunks * 16`` values.
    rows : int
        Window rows.
    chunks : int
        16-value chunks per window row.
    mask : int
        Bit ``k`` set: chunk ``k = row * chunks + col`` is dotted (-1: all;
        chunks from the 64th on always are).

    Returns
    -------
    tuple or None
        At typing: ``(signature, codegen)`` with the result a UniTuple of 8
        int32 dots; None for arguments of other types (no match).

    Raises
    ------
    numba.core.errors.TypingError
        When the target Numba compiles for lacks AVX2.
    """
    ok = (isinstance(img, types.Array) and img.dtype == types.uint16
          and isinstance(w, types.Array) and w.dtype == types.int16
          and isinstance(bb, types.Array) and bb.dtype == types.int64
          and all(isinstance(t, types.Integer) for t in (rowstride, rows, chunks, mask)))
    if not ok:
        return None
    _require("idot8_avx2", "avx2")
    sig = types.UniTuple(types.int32, 8)(img, bb, rowstride, w, rows, chunks, mask)
    return sig, _codegen_avx2


def _make(vnni, two=False):
    @intrinsic
    def idot8(typingctx, img, bb, rowstride, w, rows, chunks, mask):
        """Exact int32 dots of the 8 uint8 windows at ``img[bb[u]:]`` with the
        int8 weights ``w`` (``rows`` rows of ``chunks`` x 32 bytes), over the
        chunks ``k = row * chunks + col`` whose bit is set in ``mask`` (-1: all;
        chunks from the 64th on always).  The two-plane form: ``w`` holds the
        high bytes' plane then the low bytes' plane of int16 rows, ``mask``
        applies to the high one, and the dots are ``256 h.x + l.x``.

        Called from jitted code as ``idot8(img, bb, rowstride, w, rows, chunks,
        mask)``; Numba passes ``typingctx`` and the arguments' types.

        Parameters
        ----------
        typingctx : numba.core.typing.Context
            Numba's typing context (not used).
        img : uint8 (n_bytes,)
            The image bytes the windows are read from.
        bb : int64 (8,)
            Each window's first byte in ``img``.
        rowstride : int
            Bytes between two window rows in ``img``.
        w : int8 (rows * chunks * 32,) or (2 * rows * chunks * 32,)
            The weights row (two planes in the two-plane form), window rows
            padded to ``chunks * 32`` bytes.
        rows : int
            Window rows.
        chunks : int
            32-byte chunks per window row.
        mask : int
            Bit ``k`` set: chunk ``k`` is dotted (of the high plane in the
            two-plane form).

        Returns
        -------
        tuple or None
            At typing: ``(signature, codegen)`` with the result a UniTuple of
            8 int32 dots; None for arguments of other types (no match).

        Raises
        ------
        numba.core.errors.TypingError
            For the ``vnni`` forms, when the target Numba compiles for lacks
            AVX-512 VNNI (with VL) and AVX-VNNI.
        """
        ok = (isinstance(img, types.Array) and img.dtype == types.uint8
              and isinstance(w, types.Array) and w.dtype == types.int8
              and isinstance(bb, types.Array) and bb.dtype == types.int64
              and all(isinstance(t, types.Integer) for t in (rowstride, rows, chunks, mask)))
        if not ok:
            return None
        if vnni:     # vpdpbusd only where the target has it
            _require("idot8x2_vnni" if two else "idot8_vnni", "vnni")
        sig = types.UniTuple(types.int32, 8)(img, bb, rowstride, w, rows, chunks, mask)
        return sig, _codegen(vnni, two)

    return idot8


#: The byte forms (tests run each the target has), for int8 rows and (``x2``)
#: int16 rows split into two byte planes.
idot8_vnni = _make(True)
idot8_portable = _make(False)
idot8x2_vnni = _make(True, two=True)
idot8x2_portable = _make(False, two=True)


#: The :mod:`._pooled_oblique` variant of each form (int8 rows; ``u8`` becomes ``u8x2``
#: for int16 rows, which the AVX2 form runs as they are).
VARIANTS = {"vnni": "u8vnni", "avx2": "i16avx2", "portable": "u8"}


def variant():
    """The :mod:`._pooled_oblique` variant of the form this process uses (its compiled
    kernels' names end in it, so Numba's cache keeps the forms apart)."""
    return VARIANTS[form()]


def __getattr__(name):
    """``VNNI`` (:func:`vnni`), ``FORM`` (:func:`form`) and ``VARIANT``
    (:func:`variant`), probed when first read."""
    if name == "VNNI":
        return vnni()
    if name == "FORM":
        return form()
    if name == "VARIANT":
        return variant()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CHUNK", "CHUNK16", "VARIANTS", "target_features", "form_of", "form", "vnni",
           "variant", "idot8_vnni", "idot8_portable", "idot8x2_vnni", "idot8x2_portable",
           "idot8_avx2"]
