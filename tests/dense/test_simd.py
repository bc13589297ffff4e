"""The integer dot products of dense inference (facesegment/dense/_simd.py)
against tests/naive.py: both forms (``vpdpbusd`` where this CPU has VNNI, and
the portable one), extreme values, windows ending at the buffer's end."""

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


FORMS = {"portable": _simd.idot8_portable, "vnni": _simd.idot8_vnni}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("rows, chunks", [(1, 1), (10, 1), (15, 2), (31, 3), (70, 1)])
def test_idot8_matches_naive(form, rows, chunks):
    if form == "vnni" and not _simd.VNNI:
        pytest.skip("this CPU has no VNNI (the portable form is tested)")
    run = _runner(FORMS[form])
    rng = np.random.default_rng(rows * 7 + chunks)
    rowstride = 32 * chunks + 13
    img = rng.integers(0, 256, rowstride * (rows + 3), dtype=np.uint8)
    w = rng.integers(-127, 128, 32 * chunks * rows).astype(np.int8)
    last = img.size - ((rows - 1) * rowstride + 32 * chunks)   # the window ending at the end
    bb = np.array([0, 1, 5, 31, rowstride, 2 * rowstride + 3, last - 1, last], np.int64)
    assert run(img, bb, rowstride, w, rows, chunks).tolist() == naive.naive_idot8(
        img, bb, rowstride, w, rows, chunks)
    for mask in (0, 0b101, int(rng.integers(0, 2 ** 62)), -1 << 3):   # chunks skipped
        assert run(img, bb, rowstride, w, rows, chunks, mask).tolist() == naive.naive_idot8(
            img, bb, rowstride, w, rows, chunks, mask)
    # the extremes: 255 * (+-127) everywhere, well inside int32
    img[:] = 255
    for sign in (1, -1):
        w[:] = sign * 127
        assert run(img, bb, rowstride, w, rows, chunks).tolist() == \
            [sign * 255 * 127 * 32 * chunks * rows] * 8


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
    assert _simd.VARIANT == ("u8vnni" if _simd.VNNI else "u8")


def test_kernels_on_the_intrinsics_are_named_after_their_source():
    """Numba's disk cache only checks a kernel's own file: the integer kernels
    of dense/_flat.py carry the package's source tag (a digest of every source,
    _simd.py included) in their names, so an edited _simd.py never runs from a
    stale cache (this happened: the portable form's rewrite was timed with the
    old kernels)."""
    from facesegment._jit import source_digest, source_tag
    from facesegment.dense import _flat
    from facesegment.dense._numba import layout_kernels

    tag = source_digest()[:10]
    assert source_tag() == tag
    for variant in ("u8", "u8x2"):
        name = layout_kernels(_flat, 4, 3, variant).leaves.py_func.__qualname__
        assert name.endswith(f"__4x3_{variant}__src{tag}"), name
    assert layout_kernels(_flat, 4, 3).leaves.py_func.__qualname__.endswith(f"__4x3__src{tag}")
