"""The split buffer of auto-context stages for the fast kernels (private).

A context stage's layout (:func:`facesegment.autocontext.context.context_layout`) has the
image's ``c0`` planes followed by ``K`` context planes, and its forest reads
the context planes only at the window's centre.  Interleaving all
``c0 + K`` planes (285 for RGB) makes a padded image of 22 MB whose window
offsets overflow the fast records' 15-bit fields, and puts the 8 pixels a
kernel descends together 285 bytes apart.  The split buffer instead holds::

    copy 0          the padded image, (Hp, Wp, c0) bytes
    copy 1 .. n     the context planes, c0 at a time, each copy (Hp, Wp, c0)
                    with plane j of pixel (y, x) at padded position
                    (y + half, x + half), channel j % c0, of copy 1 + j // c0
    slack           bytes the kernels may read past the end

so every feature the forest reads is one constant byte offset from the
window's first byte in copy 0 (:func:`split_offsets`), neighbouring pixels
read neighbouring bytes, and the fast kernels compiled for the image's own
layout (``lay.channels = c0``) run unchanged, in mode 3 (30-bit offsets) when the
offsets are large.
"""

import numpy as np
from numba import prange

from .._jit import PARALLEL, njit


def n_copies(c0, n_planes):
    """Copies of the padded image's shape in the split buffer (image included).

    Parameters
    ----------
    c0 : int
        Planes of the image (and of each context copy).
    n_planes : int
        Context planes ``K``.

    Returns
    -------
    int
        ``1 + ceil(n_planes / c0)``.
    """
    return 1 + -(-int(n_planes) // int(c0))


def split_offsets(layout, c0, padded_shape):
    """Byte offset of every feature of ``layout`` in the split buffer (int64,
    -1 for a context-plane feature away from the window's centre, which the
    buffer does not hold).

    Parameters
    ----------
    layout : facesegment.layout.WindowLayout
        The context stage's layout: ``layout.channels`` is ``c0 + K``.
    c0 : int
        Planes of the image.
    padded_shape : tuple of int
        ``(Hp, Wp, ...)``: the padded image's shape (only the first two are
        read).

    Returns
    -------
    int64 (layout.n_features,)
        Each feature's byte offset from the window's first byte in copy 0;
        -1 for a context plane off the window's centre.
    """
    hp, wp = int(padded_shape[0]), int(padded_shape[1])
    w, c, half = layout.window, layout.channels, layout.half
    rowstride = wp * c0
    f = np.arange(layout.n_features, dtype=np.int64)
    pos, ch = np.divmod(f, c)
    dy, dx = np.divmod(pos, w)
    img = dy * rowstride + dx * c0 + ch
    j = ch - c0
    copy = 1 + np.maximum(j, 0) // c0
    ctx = copy * (hp * rowstride) + half * rowstride + half * c0 + np.maximum(j, 0) % c0
    centre = (dy == half) & (dx == half)
    return np.where(ch < c0, img, np.where(centre, ctx, -1))


@njit(**PARALLEL)
def _fill(buf, planes, c0, hp, wp, half):
    """Copy the context planes into their copies (parallel over rows; each copy's
    row written left to right).

    Parameters
    ----------
    buf : uint8 (n_bytes,)
        The split buffer; copies 1 .. n written in place at the padded
        positions of the image's pixels (margins and slack left as they are).
    planes : uint8 (H, W, K)
        The context planes, C-contiguous.
    c0 : int
        Planes per copy (the image's).
    hp, wp : int
        The padded image's height and width.
    half : int
        The padding margin (``window // 2``).
    """
    h, w, k = planes.shape
    copy = hp * wp * c0
    for y in prange(h):
        row = (y + half) * wp * c0 + half * c0
        for g in range((k + c0 - 1) // c0):
            dst = (1 + g) * copy + row
            for x in range(w):
                for cc in range(min(c0, k - g * c0)):
                    buf[dst + x * c0 + cc] = planes[y, x, g * c0 + cc]


def split_buffer(padded, planes, half, slack):
    """The split buffer (uint8, flat) of a padded image ``(Hp, Wp, c0)`` and its
    context ``planes`` ``(H, W, K)``, with ``slack`` spare bytes at the end
    (bytes no pixel reads are 0).

    Parameters
    ----------
    padded : uint8 (Hp, Wp, c0)
        The padded image (copy 0).
    planes : uint8 (H, W, K)
        The context planes, ``H = Hp - 2 * half``, ``W = Wp - 2 * half``.
    half : int
        The padding margin (``window // 2``).
    slack : int
        Zero bytes appended after the last copy.

    Returns
    -------
    uint8 (n_copies(c0, K) * Hp * Wp * c0 + slack,)
        The split buffer (module docstring).
    """
    hp, wp, c0 = padded.shape
    copy = hp * wp * c0
    buf = np.zeros(n_copies(c0, planes.shape[2]) * copy + slack, dtype=np.uint8)
    buf[:copy] = padded.reshape(-1)
    _fill(buf, np.ascontiguousarray(planes), c0, hp, wp, half)
    return buf
