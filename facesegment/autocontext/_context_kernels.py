"""Numba kernels of the auto-context features (private; see facesegment.autocontext.context)."""

from numba import prange

from .._jit import PARALLEL, njit


@njit(**PARALLEL)
def shifted_planes(q, dy, dx, out):
    """Each pixel's planes followed by the planes at each offset.

    ``out[y, x, c] = q[y, x, c]`` and
    ``out[y, x, (1 + o) * C + c] = q[clip(y + dy[o]), clip(x + dx[o]), c]``:
    offsets leaving the image read its nearest border pixel.  Parallel over
    rows; each pixel's values are written contiguously.

    Parameters
    ----------
    q : uint8 (H, W, C)
        The planes.
    dy, dx : int (n_o,)
        The offsets' rows and columns, in pixels.
    out : uint8 (H, W, (1 + n_o) * C)
        Filled in place.

    Returns
    -------
    uint8 (H, W, (1 + n_o) * C)
        ``out``.
    """
    h, w, n_c = q.shape
    n_o = dy.shape[0]
    for y in prange(h):
        for x in range(w):
            for c in range(n_c):
                out[y, x, c] = q[y, x, c]
            k = n_c
            for o in range(n_o):
                yy = min(max(y + dy[o], 0), h - 1)
                xx = min(max(x + dx[o], 0), w - 1)
                for c in range(n_c):
                    out[y, x, k] = q[yy, xx, c]
                    k += 1
    return out
