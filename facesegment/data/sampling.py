"""Class-balanced window sampling: the pieces each extraction task runs.

The Numba kernel that cuts windows and sums their features, the eligible-pixel
counts of a label map, the tasks of both passes (count, then draw and cut),
the allocation of each class's windows among the images, the seeds, and the
statistics stored with the windows.  The two-pass pipeline that runs them:
:mod:`facesegment.data.extract`.
"""

import numpy as np

from .._jit import NJIT, njit
from ..classes import N_CLASSES
from .datasets import load_face
from ..errors import DataError
from ..layout import DEFAULT_LAYOUT

_HYPERGEOMETRIC_LIMIT = 10**9


# -------------------------------------------------------------------- kernels

@njit(**NJIT)
def cut_windows_kernel(image, centers, half, out, sums, sumsq):
    """Copy the windows around ``centers`` and add their feature sums.

    Parameters
    ----------
    image : uint8 (H, W, C)
    centers : int32/int64 (k, 2)
        (row, col); every window must lie inside the image.
    half : int
        Half-width; windows are ``2 * half + 1`` square.
    out : uint8 (k, 2*half+1, 2*half+1, C), C-contiguous
        Receives the windows.
    sums, sumsq : int64 (w * w * C,)
        Incremented by the per-feature sums and sums of squares.
    """
    k = centers.shape[0]
    w = 2 * half + 1
    for i in range(k):
        r0 = centers[i, 0] - half
        c0 = centers[i, 1] - half
        for dy in range(w):
            out[i, dy] = image[r0 + dy, c0:c0 + w]
    flat = out.reshape(k, -1)  # contiguous: the sums loop vectorises
    for i in range(k):
        for f in range(flat.shape[1]):
            v = np.int64(flat[i, f])
            sums[f] += v
            sumsq[f] += v * v


def eligible_counts(label, margin=DEFAULT_LAYOUT.half):
    """Eligible pixels per class of one label map.

    Parameters
    ----------
    label : uint8 (H, W)
    margin : int

    Returns
    -------
    counts : int64 (8,)
    """
    h, w = label.shape
    inner = label[margin:h - margin, margin:w - margin]
    if inner.size == 0:
        return np.zeros(N_CLASSES, np.int64)
    return np.bincount(inner.ravel(), minlength=256)[:N_CLASSES].astype(np.int64)


# ---------------------------------------------------------------------- tasks

def _error(exc):
    return (exc.path, exc.problem, exc.fix)


def _planes(image):
    """The image as ``(H, W, C)``: a grey ``(H, W)`` image has one channel."""
    return image[:, :, None] if image.ndim == 2 else image


def count_task(record, margin, grey=False):
    """Pass 1 task: the eligible pixels per class of one labelled face.

    Parameters
    ----------
    record : FaceRecord
        The face.
    margin : int
        Pixels of the border whose windows would leave the image (not eligible).
    grey : bool, default=False
        Read the image as grey (one channel).

    Returns
    -------
    counts : ndarray of int64, shape (8,), or None
        Eligible pixels per class (see :func:`eligible_counts`); None when the
        face cannot be read.
    error : tuple of (path, problem, fix) or None
        The DataError's parts when the face cannot be read.
    channels : int or None
        The image's channels (None with an error).
    """
    try:
        image, label = load_face(record, grey)
    except DataError as exc:
        return None, _error(exc), None
    return eligible_counts(label, margin), None, _planes(image).shape[2]


def cut_task(item, margin, window=DEFAULT_LAYOUT.window, grey=False):
    """Pass 2 task: draw one image's windows and cut them.

    Parameters
    ----------
    item : tuple
        ``(record, alloc, expected, state, replace)``: the FaceRecord, windows
        per class ``(8,)``, the eligible pixels per class counted in pass 1
        ``(8,)``, the image's random state (``(4,) uint32`` from
        :func:`seed_states`) and the classes drawn with replacement ``(8,) bool``.
    margin : int
        Pixels of the border whose windows would leave the image.
    window : int, default=DEFAULT_LAYOUT.window
        Side of the windows (odd).
    grey : bool, default=False
        Read the image as grey (one channel).

    Returns
    -------
    windows : ndarray of uint8, shape (k, window, window, C)
    labels : ndarray of uint8, shape (k,)
    centers : ndarray of int32, shape (k, 2)
        (row, col) of each window's centre.
    sums, sumsq : ndarray of int64, shape (window * window * C,)
        Per-feature sums and sums of squares of the windows.

    Raises
    ------
    DataError
        When the face cannot be read, or its label map's eligible pixels differ
        from pass 1's count (the data changed during extraction).
    """
    record, alloc, expected, state, replace = item
    image, label = load_face(record, grey)
    image = _planes(image)
    h, w = label.shape
    inner = label[margin:h - margin, margin:w - margin]
    iw = max(w - 2 * margin, 0)
    flat = np.ascontiguousarray(inner).ravel()
    rng = np.random.default_rng(state)
    chosen, labs = [], []
    for c in range(N_CLASSES):
        k = int(alloc[c])
        if k == 0:
            continue
        pos = np.flatnonzero(flat == c)
        if pos.size != expected[c]:
            raise DataError(record.label, "label map changed during extraction",
                            "do not modify the data while `facesegment extract` runs")
        sel = rng.choice(pos.size, size=k, replace=bool(replace[c]))
        sel.sort()
        chosen.append(pos[sel])
        labs.append(np.full(k, c, np.uint8))
    k_total = int(alloc.sum())
    flat_pos = np.concatenate(chosen) if chosen else np.zeros(0, np.int64)
    centers = np.empty((k_total, 2), np.int32)
    if k_total:
        centers[:, 0] = flat_pos // iw + margin
        centers[:, 1] = flat_pos % iw + margin
    windows = np.empty((k_total, window, window, image.shape[2]), np.uint8)
    n_values = window * window * image.shape[2]   # an image may be allotted no window
    sums = np.zeros(n_values, np.int64)
    sumsq = np.zeros(n_values, np.int64)
    cut_windows_kernel(image, centers, window // 2, windows, sums, sumsq)
    labels = np.concatenate(labs) if labs else np.zeros(0, np.uint8)
    return windows, labels, centers, sums, sumsq


def count_batch(records, margin, grey=False):
    """Pass 1 task over a few images: a list of :func:`count_task` results.

    Parameters
    ----------
    records : sequence of FaceRecord
        The faces.
    margin : int
        As :func:`count_task`.
    grey : bool, default=False
        As :func:`count_task`.

    Returns
    -------
    list of tuple
        One :func:`count_task` result per record, in order.
    """
    return [count_task(r, margin, grey) for r in records]


def cut_batch(items, margin, window=DEFAULT_LAYOUT.window, grey=False):
    """Pass 2 task over a few images.

    Parameters
    ----------
    items : sequence of tuple
        :func:`cut_task` items.
    margin : int
        As :func:`cut_task`.
    window : int, default=DEFAULT_LAYOUT.window
        As :func:`cut_task`.
    grey : bool, default=False
        As :func:`cut_task`.

    Returns
    -------
    per_image : list of tuple
        ``(windows, labels, centers)`` per image.
    sums, sumsq : ndarray of int64, shape (n_features,), or None
        The batch's feature sums and sums of squares (None when ``items`` is
        empty).

    Raises
    ------
    DataError
        As :func:`cut_task`.
    """
    per_image = []
    sums = sumsq = None
    for it in items:
        w, y, c, s, q = cut_task(it, margin, window, grey)
        per_image.append((w, y, c))
        sums = s if sums is None else sums + s
        sumsq = q if sumsq is None else sumsq + q
    return per_image, sums, sumsq


# ----------------------------------------------------------------- allocation

def class_targets(n_windows):
    """Windows per class: ``n // 8`` each, the remainder one each to the first classes.

    Parameters
    ----------
    n_windows : int
        Total windows.

    Returns
    -------
    ndarray of int64, shape (8,)
        Sums to ``n_windows``.
    """
    base, rem = divmod(int(n_windows), N_CLASSES)
    t = np.full(N_CLASSES, base, np.int64)
    t[:rem] += 1
    return t


def allocate(counts, targets, rng):
    """Share each class's windows among images.

    Parameters
    ----------
    counts : int64 (n_images, 8)
        Eligible pixels per image and class.
    targets : int64 (8,)
        Windows wanted per class.
    rng : numpy.random.Generator

    Returns
    -------
    alloc : int64 (n_images, 8)
        Windows per image and class; column sums equal ``targets``.
    replace : bool (8,)
        Classes drawn with replacement (fewer eligible pixels than wanted).
    """
    n_img = counts.shape[0]
    alloc = np.zeros((n_img, N_CLASSES), np.int64)
    replace = np.zeros(N_CLASSES, bool)
    for c in range(N_CLASSES):
        col = counts[:, c].astype(np.int64)
        total, k = int(col.sum()), int(targets[c])
        if k == 0:
            continue
        if total >= k and total < _HYPERGEOMETRIC_LIMIT:
            alloc[:, c] = rng.multivariate_hypergeometric(col, k, method="marginals")
        else:
            replace[c] = total < k
            alloc[:, c] = rng.multinomial(k, col / total)
            if not replace[c]:
                _repair_over(alloc[:, c], col)
    return alloc, replace


def _repair_over(a, cap):
    """Move counts above ``cap`` to the next images with room (huge splits only)."""
    excess = int(np.maximum(a - cap, 0).sum())
    np.minimum(a, cap, out=a)
    i = 0
    while excess:
        room = int(cap[i] - a[i])
        take = min(room, excess)
        a[i] += take
        excess -= take
        i += 1


def seed_states(seed, n_images):
    """The random states of an extraction, all from one seed.

    Parameters
    ----------
    seed : int
        The extraction's seed.
    n_images : int
        Images to give a state.

    Returns
    -------
    rng : numpy.random.Generator
        Generator of the allocation (:func:`allocate`).
    states : ndarray of uint32, shape (n_images, 4)
        Each image's state (independent spawned seed sequences).
    """
    ss = np.random.SeedSequence(int(seed))
    alloc_ss, images_ss = ss.spawn(2)
    states = np.array([s.generate_state(4) for s in images_ss.spawn(n_images)], np.uint32)
    return np.random.default_rng(alloc_ss), states.reshape(n_images, 4)


def finish_stats(sums, sumsq, n):
    """Mean and population std of the features from exact integer sums.

    Parameters
    ----------
    sums, sumsq : ndarray of int64, shape (n_features,)
        Per-feature sums and sums of squares.
    n : int
        Windows summed (> 0).

    Returns
    -------
    mean : ndarray of float32, shape (n_features,)
    std : ndarray of float32, shape (n_features,)
        Zeros replaced by 1, so dividing by it is safe.
    """
    mean = sums / float(n)
    var = np.maximum(sumsq / float(n) - mean * mean, 0.0)
    std = np.sqrt(var)
    std[std == 0] = 1.0
    return mean.astype(np.float32), std.astype(np.float32)


def sampling_factors(class_counts, pixel_counts):
    """Each class's share among the windows over its share among the eligible pixels.

    Parameters
    ----------
    class_counts : array-like, shape (8,)
        Windows per class.
    pixel_counts : array-like, shape (8,)
        Eligible pixels per class.

    Returns
    -------
    ndarray of float64, shape (8,)
        The factors; 0 where a class has no pixels.
    """
    cc = np.asarray(class_counts, np.float64)
    pc = np.asarray(pixel_counts, np.float64)
    win_share = cc / cc.sum()
    pix_share = pc / pc.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(pix_share > 0, win_share / pix_share, 0.0)
    return f


__all__ = ["allocate", "class_targets", "seed_states", "eligible_counts", "cut_windows_kernel",
           "count_task", "cut_task", "count_batch", "cut_batch", "finish_stats", "sampling_factors"]
