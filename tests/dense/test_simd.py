"""The integer dot products of dense inference (facesegment/dense/_simd.py)
against tests/naive.py: every form the target has (``vpdpbusd`` with VNNI,
``vpmaddwd`` with AVX2, the portable one), extreme values, windows ending at
the buffer's end; which form a target gets, and that a target without AVX2 is
given no x86 intrinsic."""

import os

import numpy as np
import pytest
from numba import njit

from facesegment.dense import _simd
from tests import naive


def _runner(idot):
    @njit
    def run(img, bb, rowstride, w, rows, chunks, mask=-1):
        v = idot(img, bb, rowstride, w, rows, chunks, mask)
        out = np.empty(8, np.int64)
        for u in range(8):
            out[u] = v[u]
        return out

    return run


FORMS = {"portable": _simd.idot8_portable, "vnni": _simd.idot8_vnni, "avx2": _simd.idot8_avx2}


def _skip_unless_target_has(form):
    feats = _simd.target_features()
    if (form == "vnni" and _simd.form_of(feats) != "vnni") or (form == "avx2"
                                                                and "avx2" not in feats):
        pytest.skip(f"the target has no {form.upper()} (the portable form is tested)")


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("rows, chunks", [(1, 1), (10, 1), (15, 2), (31, 3), (70, 1)])
def test_idot8_matches_naive(form, rows, chunks):
    """Every form against the naive dots; the AVX2 form's windows are uint16 and
    its weights int16 (16 values per chunk), over the whole int16 range."""
    _skip_unless_target_has(form)
    run = _runner(FORMS[form])
    step = 16 if form == "avx2" else 32
    rng = np.random.default_rng(rows * 7 + chunks)
    rowstride = step * chunks + 13
    img = rng.integers(0, 256, rowstride * (rows + 3), dtype=np.uint8)
    w = rng.integers(-127, 128, step * chunks * rows).astype(np.int8)
    if form == "avx2":
        img = img.astype(np.uint16)
        w = rng.integers(-32768, 32768, w.size).astype(np.int16) // (rows * chunks)
    last = img.size - ((rows - 1) * rowstride + step * chunks)   # the window ending at the end
    bb = np.array([0, 1, 5, 31, rowstride, 2 * rowstride + 3, last - 1, last], np.int64)
    assert run(img, bb, rowstride, w, rows, chunks).tolist() == naive.naive_idot8(
        img, bb, rowstride, w, rows, chunks, step=step)
    for mask in (0, 0b101, int(rng.integers(0, 2 ** 62)), -1 << 3):   # chunks skipped
        assert run(img, bb, rowstride, w, rows, chunks, mask).tolist() == naive.naive_idot8(
            img, bb, rowstride, w, rows, chunks, mask, step=step)
    # the extremes: 255 * (+-127) everywhere, well inside int32; the AVX2 form's
    # pairs 255 * -32768 twice (vpmaddwd adds each pair in int32: no saturation)
    img[:] = 255
    n = rows * chunks
    for value in ((32767 // n, -(32768 // n)) if form == "avx2" else (127, -127)):
        w[:] = value
        assert run(img, bb, rowstride, w, rows, chunks).tolist() == \
            [255 * value * step * n] * 8


@pytest.mark.parametrize("form", ["portable", "vnni"])
@pytest.mark.parametrize("rows, chunks", [(10, 1), (15, 2)])
def test_two_plane_idot8_is_256_high_plus_low(form, rows, chunks):
    """int16 rows as two byte planes: ``256 h.x + l.x``, the high plane's chunks
    skipped where ``mask`` is clear (they are zero there)."""
    if form == "vnni" and not _simd.VNNI:
        pytest.skip("this CPU has no VNNI (the portable form is tested)")
    run = _runner(_simd.idot8x2_vnni if form == "vnni" else _simd.idot8x2_portable)
    rng = np.random.default_rng(rows + chunks)
    rowstride = 32 * chunks + 7
    img = rng.integers(0, 256, rowstride * (rows + 2), dtype=np.uint8)
    n = 32 * chunks * rows
    hi = rng.integers(-128, 128, n).astype(np.int8)
    lo = rng.integers(-128, 128, n).astype(np.int8)
    bb = np.array([0, 3, 8, rowstride, rowstride + 1, 2 * rowstride, 5, 9], np.int64)
    for mask in (-1, 0b1011, 0):
        keep = hi.copy()
        for k in range(rows * chunks):          # what the mask skips must be zero
            if k < 64 and not (mask >> k) & 1:
                keep[32 * k:32 * (k + 1)] = 0
        w = np.concatenate([keep, lo])
        want = [256 * a + b for a, b in zip(
            naive.naive_idot8(img, bb, rowstride, keep, rows, chunks),
            naive.naive_idot8(img, bb, rowstride, lo, rows, chunks))]
        assert run(img, bb, rowstride, w, rows, chunks, mask).tolist() == want


def test_process_form_is_recorded():
    assert _simd.FORM == _simd.form_of(_simd.target_features(),
                                       os.environ.get("FACESEGMENT_SIMD", ""))
    assert _simd.VARIANT == _simd.VARIANTS[_simd.FORM]
    assert _simd.VNNI == (_simd.FORM == "vnni")


#: Feature strings as Numba passes them to LLVM (NUMBA_CPU_FEATURES).
HASWELL = "+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+fma,+sse4.2,+ssse3,-avx512f,-avx512vnni"
ICELAKE = HASWELL + ",+avx512f,+avx512bw,+avx512vl,+avx512vnni"
ALDERLAKE = HASWELL + ",+avxvnni"
NEOVERSE = "+neon,+dotprod,+fp-armv8,+sve"


@pytest.mark.parametrize("features, simd, want", [
    (HASWELL, "", "avx2"), (ICELAKE, "", "vnni"), (ALDERLAKE, "", "vnni"),
    (ICELAKE, "avx2", "avx2"), (ICELAKE, "portable", "portable"), (HASWELL, "Portable", "portable"),
    ("+avx,+sse4.2", "", "portable"), (NEOVERSE, "", "portable"), ("", "avx2", "portable"),
    (HASWELL.replace("+avx512f,", "") + ",+avx512vnni", "", "avx2")])   # VNNI without VL
def test_form_follows_the_target_features(features, simd, want):
    feats = frozenset(f[1:] for f in features.split(",") if f.startswith("+"))
    assert _simd.form_of(feats, simd) == want


def test_target_features_are_numbas(monkeypatch):
    """The features Numba compiles for: NUMBA_CPU_FEATURES where given (``""``
    for the generic CPU), none for a CPU named without them, else the host's."""
    from numba.core import config

    monkeypatch.setattr(config, "CPU_NAME", "haswell", raising=False)
    monkeypatch.setattr(config, "CPU_FEATURES", HASWELL, raising=False)
    assert {"avx2", "fma"} <= _simd.target_features() and "avx512f" not in \
        _simd.target_features()
    monkeypatch.setattr(config, "CPU_FEATURES", "")
    assert _simd.target_features() == frozenset()
    monkeypatch.setattr(config, "CPU_FEATURES", None)
    assert _simd.target_features() == frozenset()
    monkeypatch.setattr(config, "CPU_NAME", None)
    from llvmlite import binding as llvm

    if llvm.get_process_triple().startswith("x86_64"):
        host = llvm.get_host_cpu_features().flatten()
        assert _simd.target_features() == {f[1:] for f in host.split(",") if f[0] == "+"}


def test_no_x86_intrinsic_where_the_target_lacks_it(monkeypatch):
    """A target without AVX2 (aarch64, generic x86) gets no x86 intrinsic: the
    AVX2 and VNNI forms refuse to compile there, the portable form's IR names
    none (so LLVM may lower it for any CPU)."""
    from numba.core.errors import TypingError

    monkeypatch.setattr(_simd, "target_features", lambda: frozenset({"neon", "dotprod"}))
    one = np.int16(1)   # a signature no other test compiles (Numba remembers an intrinsic's
    for idot in (_simd.idot8_avx2, _simd.idot8_vnni, _simd.idot8x2_vnni):   # typing per one)
        wide = idot is _simd.idot8_avx2
        with pytest.raises(TypingError, match="idot8"):
            _runner(idot)(np.zeros(64, np.uint16 if wide else np.uint8), np.zeros(8, np.int64),
                          np.int16(32), np.zeros(32, np.int16 if wide else np.int8), one, one)
    for idot in (_simd.idot8_portable, _simd.idot8x2_portable):
        run = _runner(idot)
        args = (np.zeros(96, np.uint8), np.zeros(8, np.int64), 32, np.zeros(64, np.int8), 1, 1)
        assert run(*args).tolist() == [0] * 8
        ir = "".join(run.inspect_llvm().values())
        assert "llvm.x86.avx" not in ir and "llvm.x86.sse" not in ir


def test_kernels_on_the_intrinsics_are_named_after_their_source():
    """Numba's disk cache only checks a kernel's own file: the integer kernels
    of dense/_pooled_oblique.py carry the package's source tag (a digest of every source,
    _simd.py included) in their names, so an edited _simd.py never runs from a
    stale cache (this happened: the portable form's rewrite was timed with the
    old kernels); each form is its own layout type, so its own cache entry."""
    import numba

    from facesegment._jit import source_digest, source_tag
    from facesegment.dense import _pooled_oblique
    from facesegment.dense._numba import layout_kernels

    tag = source_digest()[:10]
    assert source_tag() == tag
    seen = set()
    for variant in ("u8", "u8x2", None):
        k = layout_kernels(_pooled_oblique, 4, 3, variant)
        assert k.leaves.func.py_func.__qualname__ == f"leaves__src{tag}"
        typ = numba.typeof(k.layout)
        assert str(typ) == "KernelLayout(4x3" + (f",{variant})" if variant else ")")
        seen.add(typ)
    assert len(seen) == 3
