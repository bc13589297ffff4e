"""The portable form of facesegment/dense/_simd.py compiled for aarch64 on this
x86 machine (facesegment/dense/_cross.py): the IR Numba lowers for it, given
LLVM's AArch64 backend, becomes NEON widening multiplies with no x86 name in
it; the same IR given an AVX2-only x86-64 target becomes ``vpmaddwd`` (the
method's positive control).  An aarch64 target gets the portable form, the x86
forms refuse to type there, and IR that names x86 intrinsics is refused before
LLVM sees it.  Compiled and assembled, never run."""

import re

import numba
import pytest
from numba import types
from numba.core.errors import TypingError

from facesegment.dense import _cross, _pooled_oblique, _simd
from facesegment.dense._numba import layout_kernels
from facesegment.errors import FaceSegmentError

#: LLVM features of an aarch64 CPU with NEON and the dot-product extension.
ARM_FEATURES = "+neon,+fp-armv8,+dotprod"
#: NEON instructions that multiply vectors (widening, accumulating, dot products).
NEON_MULTIPLIES = {"smull", "smull2", "umull", "umull2", "smlal", "smlal2", "umlal", "umlal2",
                   "mul", "mla", "sdot", "udot", "usdot"}
#: What x86 assembly looks like (registers, the x86 forms' instructions).
X86_NAMES = re.compile(r"%?\b[xyz]mm\d+\b|\bvpmadd|\bvpdp|llvm\.x86")

pytestmark = pytest.mark.skipif(not _cross.has_target(_cross.AARCH64),
                                reason="this llvmlite was built without LLVM's AArch64 backend")

A = types.Array
DOT_SIG = (A(types.uint8, 1, "C"), A(types.int64, 1, "C"), types.int64, A(types.int8, 1, "C"),
           types.int64, types.int64, types.int64)


def _ir_of(idot, sig=DOT_SIG):
    """The unoptimised IR of a fresh function around the intrinsic ``idot``."""
    with _cross.captured_ir() as modules:
        @numba.njit
        def run(img, bb, rowstride, w, rows, chunks, mask):
            v = idot(img, bb, rowstride, w, rows, chunks, mask)
            return v[0] + v[7]

        run.compile(sig)
    return modules


def _neon_multiplies(asm):
    return sum(n for m, n in _cross.mnemonics(asm, vector=True).items() if m in NEON_MULTIPLIES)


@pytest.mark.parametrize("idot", [_simd.idot8_portable, _simd.idot8x2_portable],
                         ids=["int8-rows", "int16-rows"])
def test_portable_dots_compile_to_neon(idot):
    """One chunk of 8 windows is 256 byte products: at least 64 NEON multiplies
    of 4 lanes (``smull``/``smull2`` here); x86-64 (haswell) from the same IR
    makes ``vpmaddwd`` on ymm registers."""
    modules = _ir_of(idot)
    assert not any("llvm.x86" in m for m in modules)
    for cpu in ("generic", "neoverse-n1", "apple-m1"):
        asm = _cross.assembly(modules, _cross.AARCH64, cpu, "+neon")
        assert _neon_multiplies(asm) >= 64, (cpu, _cross.mnemonics(asm, vector=True))
        assert X86_NAMES.search(asm) is None
    x86 = _cross.assembly(modules, _cross.X86_64, "haswell", "+avx2")
    assert _cross.mnemonics(x86)["vpmaddwd"] >= 8 and "ymm" in x86
    assert _neon_multiplies(x86) == 0


def test_the_pooled_kernel_compiles_for_aarch64():
    """The integer tree descent of co2-pooled forests (``_tree`` of the ``u8x2``
    layout kernels, int16 rows, 10 x 10 x 3 cells) recompiled uncached."""
    k = layout_kernels(_pooled_oblique, 10, 3, "u8x2")
    a1, a2 = (lambda t: A(t, 1, "C")), (lambda t: A(t, 2, "C"))
    sig = (numba.typeof(k.layout), a1(types.uint8), a1(types.int64), types.int64, types.int64, a2(types.int32),
           a2(types.float32), a2(types.int8), a1(types.int64), a2(types.int32), a1(types.int64),
           a1(types.int64), a2(types.int64), a2(types.int64), a1(types.int64))
    with _cross.captured_ir() as modules:
        numba.njit(k._tree.func.py_func).compile(sig)
    asm = _cross.assembly(modules, _cross.AARCH64, "neoverse-n1", ARM_FEATURES)
    assert _neon_multiplies(asm) >= 128 and X86_NAMES.search(asm) is None


ARM = frozenset(f[1:] for f in ARM_FEATURES.split(","))


def test_an_aarch64_target_gets_the_portable_form(monkeypatch):
    """:func:`form_of` the aarch64 features is ``portable`` whatever is asked;
    on an aarch64 process :func:`target_features` counts no x86 feature, even
    with ``NUMBA_CPU_FEATURES`` set."""
    from numba.core import config

    for wanted in ("", "avx2", "portable", "vnni"):
        assert _simd.form_of(ARM, wanted) == "portable"
    monkeypatch.setattr(_simd.llvm, "get_process_triple", lambda: _cross.AARCH64)
    monkeypatch.setattr(config, "CPU_FEATURES", ARM_FEATURES, raising=False)
    assert _simd.target_features() == frozenset()


@pytest.mark.parametrize("idot", [_simd.idot8_avx2, _simd.idot8_vnni, _simd.idot8x2_vnni],
                         ids=["avx2", "vnni", "vnni-int16-rows"])
def test_x86_forms_refuse_an_aarch64_target(monkeypatch, idot):
    monkeypatch.setattr(_simd, "target_features", lambda: ARM)
    wide = idot is _simd.idot8_avx2
    sig = list(DOT_SIG)
    sig[0], sig[3] = (A(types.uint16, 1, "A"), A(types.int16, 1, "A")) if wide else \
        (A(types.uint8, 1, "A"), A(types.int8, 1, "A"))   # a signature no other test types
    with pytest.raises(TypingError, match=r"needs a target with (AVX2|VNNI).*portable form"):
        _ir_of(idot, tuple(sig))


def test_x86_intrinsics_are_refused_before_llvm():
    """IR naming an x86 intrinsic (the AVX2 form's, where this CPU has it) is
    refused with one line; for x86-64 it compiles."""
    if "avx2" not in _simd.target_features():
        pytest.skip("this CPU has no AVX2 (the AVX2 form cannot be typed here)")
    sig = (A(types.uint16, 1, "C"), A(types.int64, 1, "C"), types.int64, A(types.int16, 1, "C"),
           types.int64, types.int64, types.int64)
    modules = _ir_of(_simd.idot8_avx2, sig)
    with pytest.raises(FaceSegmentError, match=r"llvm\.x86\.avx2\.pmadd\.wd.*aarch64"):
        _cross.assembly(modules, _cross.AARCH64, "generic", "+neon")
    assert "vpmaddwd" in _cross.assembly(modules, _cross.X86_64, "haswell", "+avx2")


def test_nothing_captured_is_refused():
    with pytest.raises(FaceSegmentError, match="no IR"):
        _cross.assembly([], _cross.AARCH64)
    assert not _cross.has_target("nonexistent-unknown-none")


def test_mnemonics_reads_both_syntaxes():
    asm = ("\t.text\nfoo:\n\tsmull2\tv1.4s, v2.8h, v3.8h\n\tadd\tx0, x0, #1  // x\n"
           "\tstr\tq0, [sp, #16]\n\tvpmaddwd\t%ymm1, %ymm2, %ymm3\n")
    assert _cross.mnemonics(asm) == {"smull2": 1, "add": 1, "str": 1, "vpmaddwd": 1}
    assert _cross.mnemonics(asm, vector=True) == {"smull2": 1, "str": 1}
    assert _neon_multiplies(asm) == 1
