"""Padding and FFT responses of a window layout."""

import cv2
import numpy as np

from ..layout import DEFAULT_LAYOUT

#: float32 values the level kernels may read past the end of an image.
ROW_SLACK = 32


def pad_image(image, layout=DEFAULT_LAYOUT):
    """Reflect-pad an image by ``layout.half`` px on each side (C-contiguous uint8).

    ``image`` (H, W) or (H, W, C); ``numpy.pad`` mode ``"reflect"``
    (``dcb|abcd|cba``).  15 px for the paper's 31x31 windows.

    Parameters
    ----------
    image : uint8 (H, W) or (H, W, C)
        The image.
    layout : facesegment.layout.WindowLayout, optional
        Gives the padding ``layout.half`` (default: the paper's layout).

    Returns
    -------
    uint8 (H + 2 half, W + 2 half[, C])
    """
    h = layout.half
    pad = ((h, h), (h, h)) + ((0, 0),) * (image.ndim - 2)
    return np.ascontiguousarray(np.pad(image, pad, mode="reflect"))


def float_image(img):
    """A uint8 image (any shape) flattened to float32 with ``ROW_SLACK`` zeros to
    spare (the level kernels' input).

    Parameters
    ----------
    img : uint8 ndarray
        Any shape.

    Returns
    -------
    float32 (img.size + ROW_SLACK,)
    """
    imgf = np.zeros(img.size + ROW_SLACK, dtype=np.float32)
    imgf[:img.size] = img.reshape(-1)
    return imgf


def fft_responses(padded, arrays, roots, levels, shape, layout=DEFAULT_LAYOUT):
    """Oblique split values of the top ``levels`` levels for the whole image at once.

    Each oblique node with depth < ``levels`` in the trees ``roots`` is evaluated
    for every pixel by correlating the padded image (``(H + 2 half, W + 2 half,
    layout.channels)``) with the node's weights, plane by plane (OpenCV
    ``filter2D``, which uses the FFT for large kernels such as 31x31).

    Parameters
    ----------
    padded : uint8 (H + 2 half, W + 2 half, layout.channels)
        The padded image (:func:`pad_image`); any shape of those values, it
        is reshaped.
    arrays : facesegment.forest._arrays.ForestArrays
        The forest's flat arrays (``left``, ``right``, ``depth``, ``oblique``,
        ``weights``).
    roots : int array
        The root nodes of the trees to evaluate.
    levels : int
        Nodes of depth below this are evaluated here.
    shape : tuple
        ``(H, W, ...)`` of the unpadded image.
    layout : facesegment.layout.WindowLayout, optional
        The window layout (default: the paper's).

    Returns
    -------
    resp : float32 (n, H, W)
        ``resp[r, y, x]`` = weights @ window of pixel (y, x).
    resp_index : int32 (n_nodes,)
        Row of ``resp`` for each node, -1 for nodes evaluated by the kernel.
    """
    h, w = shape[:2]
    resp_index = np.full(arrays.n_nodes, -1, dtype=np.int32)
    nodes = []
    frontier = [int(r) for r in roots]
    while frontier:
        nxt = []
        for n in frontier:
            if arrays.left[n] < 0 or arrays.depth[n] >= levels:
                continue
            if arrays.oblique[n] >= 0:
                nodes.append(n)
            nxt += [int(arrays.left[n]), int(arrays.right[n])]
        frontier = nxt
    resp = np.empty((len(nodes), h, w), dtype=np.float32)
    if not nodes:
        return resp, resp_index
    padded = padded.reshape(padded.shape[0], padded.shape[1], layout.channels)
    planes = [np.ascontiguousarray(padded[:, :, c], dtype=np.float32)
              for c in range(layout.channels)]
    for r, n in enumerate(nodes):
        wk = np.asarray(arrays.weights[arrays.oblique[n]], dtype=np.float32).reshape(
            layout.shape)
        acc = None
        for c in range(layout.channels):
            out = cv2.filter2D(planes[c], cv2.CV_32F, np.ascontiguousarray(wk[:, :, c]),
                               anchor=(0, 0), borderType=cv2.BORDER_CONSTANT)
            acc = out if acc is None else acc + out
        resp[r] = acc[:h, :w]
        resp_index[n] = r
    return resp, resp_index
