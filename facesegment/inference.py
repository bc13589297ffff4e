"""Dense per-pixel inference of a forest over a whole image, and prior reweighting.

Every pixel's 31x31x3 window is read straight from the (padded) image inside the
Numba kernel (:mod:`facesegment._dense_kernels`): a feature index is a byte
offset from the window's top-left corner, so axis-aligned and two-probe nodes
read one or two bytes and oblique (CO2) nodes dot their weights with the
window's 31 rows of 93 contiguous bytes.  No ``(H*W, 2883)`` window matrix is
ever built.

Modes
-----
``"strict"``  the paper's protocol: pixels within 15 px of the border (whose
              windows would leave the image) are not predicted: probabilities
              0, label 255 (ignore).  ``facesegment evaluate`` uses it.
``"full"``    the image is reflect-padded by 15 px (``numpy.pad`` mode
              ``"reflect"``: ``dcb|abcd|cba``) so every pixel gets a
              prediction.  ``facesegment segment`` uses it.

Prior reweighting (section 6.2 of the paper): forests are trained on
class-balanced windows; :func:`reweight` multiplies probabilities by
``s_c ** -alpha`` (``s_c`` the sampling factor of class ``c`` stored in the
model) and renormalises.  ``alpha=1`` undoes the balancing fully (the paper),
``alpha=0`` leaves the forest's output unchanged.
"""

import cv2
import numba
import numpy as np

from . import _dense_kernels as K
from . import _fast_kernels as F
from . import _level_kernels as L
from ._packing import cached, pack_fast, pack_nodes
from .classes import HALF, IGNORE, N_CHANNELS, WINDOW

MODES = ("full", "strict")
_NO_LIMIT = 2 ** 30


# --------------------------------------------------------------- validation

def _check_image(image, name="image"):
    if not isinstance(image, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(image).__name__} "
                        "(read files with facesegment.imageio.read_image)")
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != N_CHANNELS:
        raise ValueError(f"{name} must be RGB uint8 of shape (H, W, 3), got dtype "
                         f"{image.dtype} shape {image.shape} (use facesegment.imageio.read_image)")
    return image


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {MODES} ('strict' ignores the 15-px "
                         "border like the paper, 'full' reflect-pads and predicts every pixel)")
    return mode


def _check_alpha(alpha, name="alpha"):
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {alpha!r}") from None
    if not np.isfinite(a) or a < 0:
        raise ValueError(f"{name}={alpha!r} must be finite and >= 0 "
                         "(1 = the paper's full prior reweighting, 0 = none)")
    return a


def _check_limit(value, name, upper):
    """Validate n_trees / max_depth: None (no limit) or an int >= 1 (or 0 for depth)."""
    if value is None:
        return upper
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int or None, got {value!r}")
    low = 0 if name == "max_depth" else 1
    if value < low:
        raise ValueError(f"{name}={value} must be >= {low} (or None for no limit)")
    return min(int(value), upper)


def _arrays_of(model):
    arrays = getattr(model, "arrays", None)
    if arrays is None or not hasattr(arrays, "roots"):
        raise TypeError(f"model must be a facesegment.model.Model (with .arrays), got "
                        f"{type(model).__name__} (load one with facesegment.model.load_model)")
    if arrays.n_features != WINDOW * WINDOW * N_CHANNELS:
        raise ValueError(f"model has {arrays.n_features} features; dense inference needs "
                         f"{WINDOW * WINDOW * N_CHANNELS} (31x31 RGB windows)")
    return arrays


def _f32(a):
    return a if a.dtype == np.float32 and a.flags.c_contiguous else np.ascontiguousarray(
        a, dtype=np.float32)


def _weights_f32(weights):
    """float32 C-contiguous weights (a float16 forest is converted once, cached)."""
    if weights.dtype == np.float32 and weights.flags.c_contiguous:
        return weights
    return cached("f32", weights, None,
                  lambda: np.ascontiguousarray(weights, dtype=np.float32))


# ---------------------------------------------------------------- helpers

def pad_image(image):
    """Reflect-pad an RGB image by 15 px on each side (C-contiguous uint8)."""
    return np.ascontiguousarray(
        np.pad(image, ((HALF, HALF), (HALF, HALF), (0, 0)), mode="reflect"))


def strict_region(shape):
    """``(y0, y1, x0, x1)``: the pixels whose window lies inside the image."""
    h, w = shape[:2]
    y0, x0 = HALF, HALF
    y1, x1 = max(y0, h - HALF), max(x0, w - HALF)
    return y0, y1, x0, x1


FAST_PATH = True  # use the integer record kernels for forests without oblique nodes
FAST_CHUNK = 2048  # pixels per chunk of the fast confusion sweep
FAST_BLOCK_ROWS = None  # rows per block of the fast dense kernel (None: one block per thread)
LEVEL_PATH = True  # forests with oblique nodes: group pixels by node, level by level
ROW_SLACK = 32  # float32 values the level kernel may read past the padded image


def _fast_args(model, image, n_trees):
    """``(rec, two, roots)`` for the fast kernels, or None (oblique nodes / disabled)."""
    if not FAST_PATH:
        return None
    arrays = _arrays_of(model)
    packed = pack_fast(arrays, image.shape[1] + 2 * HALF)
    if packed is None:
        return None
    n = _check_limit(n_trees, "n_trees", arrays.n_trees)
    return packed[0], packed[1], np.ascontiguousarray(arrays.roots[:n], dtype=np.int64)


def fft_responses(padded, arrays, roots, levels, shape):
    """Oblique split values of the top ``levels`` levels for the whole image at once.

    Each oblique node with depth < ``levels`` in the trees ``roots`` is evaluated
    for every pixel by correlating the padded image with the node's weights
    (OpenCV ``filter2D``, which uses the FFT for 31x31 kernels).

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
    planes = [np.ascontiguousarray(padded[:, :, c], dtype=np.float32) for c in range(N_CHANNELS)]
    for r, n in enumerate(nodes):
        wk = np.asarray(arrays.weights[arrays.oblique[n]], dtype=np.float32).reshape(
            WINDOW, WINDOW, N_CHANNELS)
        acc = None
        for c in range(N_CHANNELS):
            out = cv2.filter2D(planes[c], cv2.CV_32F, np.ascontiguousarray(wk[:, :, c]),
                               anchor=(0, 0), borderType=cv2.BORDER_CONSTANT)
            acc = out if acc is None else acc + out
        resp[r] = acc[:h, :w]
        resp_index[n] = r
    return resp, resp_index


def _kernel_args(model, image, n_trees, max_depth, fft_levels):
    """Validated, kernel-ready arrays shared by the dense entry points."""
    arrays = _arrays_of(model)
    _check_image(image)
    n_trees = _check_limit(n_trees, "n_trees", arrays.n_trees)
    max_depth = _check_limit(max_depth, "max_depth", _NO_LIMIT)
    if isinstance(fft_levels, bool) or not isinstance(fft_levels, (int, np.integer)) \
            or fft_levels < 0:
        raise ValueError(f"fft_levels={fft_levels!r} must be an int >= 0 (0 = no FFT levels)")
    padded = pad_image(image)
    roots = np.ascontiguousarray(arrays.roots[:n_trees], dtype=np.int64)
    weights = _weights_f32(arrays.weights)
    nodes, thr = pack_nodes(arrays, padded.shape[1])
    steps = min(max_depth, int(arrays.depth.max()) if arrays.n_nodes else 0)
    if fft_levels > 0 and weights.shape[0] > 0:
        resp, resp_index = fft_responses(padded, arrays, roots, min(fft_levels, steps),
                                         image.shape)
        nodes = nodes.copy()
        nodes[:, K.RESP] = resp_index
        thr = nodes.view(np.float32)
    else:
        resp = np.zeros((0, 1, 1), dtype=np.float32)
    tree = (nodes, thr, _f32(arrays.value), weights, resp)
    return padded.reshape(-1), padded.shape[1] * N_CHANNELS, roots, steps, tree


# ------------------------------------------------------------------- public

def reweight(proba, sampling_factors, alpha=1.0):
    """Prior reweighting: ``p_c * s_c ** -alpha``, renormalised over classes.

    Parameters
    ----------
    proba : float array (..., n_classes)
        Class probabilities (the forest's mean leaf distribution).
    sampling_factors : array (n_classes,)
        Share of each class among training windows / share among pixels (> 0).
    alpha : float >= 0
        1 undoes the class balancing fully (paper section 6.2), 0 is a no-op.

    Returns
    -------
    float32 array like ``proba``; rows that sum to 0 (strict-mode border) stay 0.
    """
    proba = np.asarray(proba)
    s = _check_factors(sampling_factors, proba.shape[-1])
    return _reweight_labels(proba, s, _check_alpha(alpha))[0]


def _check_factors(sampling_factors, n_classes):
    s = np.asarray(sampling_factors, dtype=np.float64)
    if s.ndim != 1 or s.shape[0] != n_classes:
        raise ValueError(f"sampling_factors has shape {s.shape}; expected "
                         f"({n_classes},) (one factor per class)")
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"sampling_factors={s.tolist()} must be finite and > 0")
    return s


def _reweight_labels(proba, s, alpha):
    """(reweighted float32 probabilities, uint8 argmax labels), one fused pass."""
    scale = (s ** -alpha).astype(np.float32)
    raw = np.ascontiguousarray(proba, dtype=np.float32).reshape(-1, s.shape[0])
    out = np.empty_like(raw)
    labels = np.empty(raw.shape[0], dtype=np.uint8)
    K.reweight_rows(raw, scale, out, labels)
    return out.reshape(proba.shape), labels.reshape(proba.shape[:-1])


def class_scales(sampling_factors, alphas):
    """``s ** -alpha`` for each alpha: float64 ``(len(alphas), n_classes)``."""
    s = np.asarray(sampling_factors, dtype=np.float64)
    return np.stack([s ** -_check_alpha(a, "alphas") for a in alphas])


def predict_image(model, image, mode="full", alpha=1.0, max_depth=None, n_trees=None,
                  fft_levels=0):
    """Per-pixel class probabilities and labels of a whole image.

    Parameters
    ----------
    model : facesegment.model.Model
        Uses ``model.arrays`` and ``model.sampling_factors``.
    image : uint8 (H, W, 3)
        RGB image (any size).
    mode : {"full", "strict"}
        "strict": border pixels (within 15 px) get probabilities 0, label 255.
        "full": reflect-padding gives every pixel a prediction.
    alpha : float >= 0
        Prior-reweighting exponent (1 = paper, 0 = none).
    max_depth : int or None
        Evaluate the trees truncated at this depth (0 = the roots' distribution).
    n_trees : int or None
        Use only the first ``n_trees`` trees.
    fft_levels : int
        Evaluate oblique nodes of the top ``fft_levels`` levels by FFT
        correlation of the whole image (CO2 speed-up; 0 = every node per pixel).

    Returns
    -------
    proba : float32 (H, W, n_classes)
        Reweighted, renormalised class probabilities.
    labels : uint8 (H, W)
        Argmax class ids (255 at ignored border pixels in strict mode).
    """
    _check_mode(mode)
    alpha = _check_alpha(alpha)
    raw = predict_proba_raw(model, image, mode=mode, max_depth=max_depth,
                            n_trees=n_trees, fft_levels=fft_levels)
    s = _check_factors(model.sampling_factors, raw.shape[-1])
    proba, labels = _reweight_labels(raw, s, alpha)
    if mode == "strict":
        y0, y1, x0, x1 = strict_region(image.shape)
        keep = np.zeros(image.shape[:2], dtype=bool)
        keep[y0:y1, x0:x1] = True
        labels[~keep] = IGNORE
    return proba, labels


def predict_proba_raw(model, image, mode="full", max_depth=None, n_trees=None, fft_levels=0):
    """The forest's mean leaf distribution per pixel, before reweighting.

    Same parameters as :func:`predict_image`; returns float32 ``(H, W, C)``.
    """
    _check_mode(mode)
    img, rowstride, roots, steps, tree = _kernel_args(model, image, n_trees, max_depth,
                                                      fft_levels)
    h, w = image.shape[:2]
    out = np.zeros((h, w, tree[2].shape[1]), dtype=np.float32)
    y0, y1, x0, x1 = strict_region(image.shape) if mode == "strict" else (0, h, 0, w)
    if y1 > y0 and x1 > x0:
        fast = _fast_args(model, image, n_trees)
        if fast is not None:
            rec, two, roots_f = fast
            buf = np.zeros(img.size + F.SLACK, dtype=np.uint8)  # room to read past x1
            buf[:img.size] = img
            # one block of rows per thread: each tree stays in a core's cache
            block = FAST_BLOCK_ROWS or -(-(y1 - y0) // max(1, numba.get_num_threads()))
            F.dense_proba_fast(buf, rowstride, y0, y1, x0, x1, roots_f, steps, rec, two,
                               tree[2], out, block)
        elif LEVEL_PATH and fft_levels == 0 and tree[3].shape[0] > 0:
            # oblique nodes: pixels grouped by node, level by level (a node's
            # weights are read once per block instead of once per pixel)
            imgf = np.zeros(img.size + ROW_SLACK, dtype=np.float32)
            imgf[:img.size] = img
            block = -(-(y1 - y0) // max(1, numba.get_num_threads()))
            L.dense_proba_levels(imgf, rowstride, y0, y1, x0, x1, roots, steps, tree[0],
                                 tree[1], tree[2], tree[3], out, block)
        else:
            K.dense_proba(img, rowstride, y0, y1, x0, x1, roots, steps, *tree, out)
    return out


def count_oblique_visits(model, image, mode="full", max_depth=None, n_trees=None):
    """Oblique nodes evaluated when predicting ``image`` (for FLOP accounting)."""
    img, rowstride, roots, steps, tree = _kernel_args(model, image, n_trees, max_depth, 0)
    h, w = image.shape[:2]
    y0, y1, x0, x1 = strict_region(image.shape) if mode == "strict" else (0, h, 0, w)
    if y1 <= y0 or x1 <= x0:
        return 0
    nodes, thr, _, weights, resp = tree
    return int(K.count_oblique_visits(img, rowstride, y0, y1, x0, x1, roots, steps,
                                      nodes, thr, weights, resp))


def _as_sorted_ints(values, name, low, upper):
    vals = sorted({_check_limit(v, name, upper) for v in values})
    if not vals or vals[0] < low:
        raise ValueError(f"{name} must be a non-empty list of ints >= {low}, got {values!r}")
    return np.asarray(vals, dtype=np.int64)


def confusion_sweep(model, image, label, n_trees_list=None, max_depth_list=None,
                    alphas=(1.0,), mode="strict", fft_levels=0, chunk=256):
    """Confusion matrices of many truncated forests and alphas in one pass.

    Each tree is walked once per pixel to the deepest limit asked for, keeping
    the path, and cumulative sums over trees give every ``n_trees`` setting, so
    Figure 4 (Jaccard vs number of trees and vs depth) needs one pass over the
    test images.

    Parameters
    ----------
    model : Model
    image : uint8 (H, W, 3)
    label : uint8 (H, W)
        Ground truth (ids 0-7, 255 ignored).
    n_trees_list : list of int, optional
        Forest sizes (first n trees); default ``[all trees]``.
    max_depth_list : list of int or None, optional
        Depth limits (None = unlimited); default ``[None]``.
    alphas : list of float
        Reweighting exponents.
    mode : {"strict", "full"}
        Which pixels are scored (label 255 is always excluded).

    Returns
    -------
    conf : int64 (len(alphas), len(depths), len(trees), C, C)
        ``conf[a, k, j, true, pred]``; depths and trees are returned sorted.
    depths, trees : int arrays
        The sorted settings (an unlimited depth is reported as the forest's
        maximum depth).
    """
    _check_mode(mode)
    arrays = _arrays_of(model)
    label = np.asarray(label)
    if label.dtype != np.uint8 or label.shape != image.shape[:2]:
        raise ValueError(f"label must be uint8 of shape {image.shape[:2]}, got dtype "
                         f"{label.dtype} shape {label.shape}")
    forest_depth = int(arrays.depth.max()) if arrays.n_nodes else 0
    trees = _as_sorted_ints(n_trees_list or [arrays.n_trees], "n_trees", 1, arrays.n_trees)
    depths = _as_sorted_ints([forest_depth if d is None else d
                              for d in (max_depth_list or [None])], "max_depth", 0,
                             forest_depth)
    scales = class_scales(model.sampling_factors, alphas)
    img, rowstride, roots, _, tree = _kernel_args(model, image, int(trees[-1]), None,
                                                  fft_levels)
    h, w = image.shape[:2]
    elig = label != IGNORE
    if mode == "strict":
        y0, y1, x0, x1 = strict_region(image.shape)
        inside = np.zeros((h, w), dtype=bool)
        inside[y0:y1, x0:x1] = True
        elig &= inside
    ys, xs = np.nonzero(elig)
    n_c = tree[2].shape[1]
    preds = np.zeros((len(scales), len(depths), len(trees), len(ys)), dtype=np.uint8)
    fast = _fast_args(model, image, int(trees[-1])) if len(ys) else None
    if fast is not None:
        rec, two, roots_f = fast
        # large chunks: a tree is descended by many pixels while it is in cache
        F.sweep_predict_fast(img, rowstride, ys.astype(np.int64), xs.astype(np.int64),
                             roots_f, depths, trees, scales, rec, two, tree[2],
                             max(int(chunk), FAST_CHUNK), preds)
    elif len(ys) and LEVEL_PATH and fft_levels == 0 and tree[3].shape[0] > 0:
        imgf = np.zeros(img.size + ROW_SLACK, dtype=np.float32)
        imgf[:img.size] = img
        chunk_l = -(-len(ys) // max(1, numba.get_num_threads()))
        L.sweep_predict_levels(imgf, rowstride, ys.astype(np.int64), xs.astype(np.int64),
                               roots, depths.astype(np.int64), trees.astype(np.int64), scales,
                               tree[0], tree[1], tree[2], tree[3], chunk_l, preds)
    elif len(ys):
        K.sweep_predict(img, rowstride, ys.astype(np.int64), xs.astype(np.int64), roots,
                        depths, trees, scales, *tree, int(chunk), preds)
    conf = np.zeros((len(scales) * len(depths) * len(trees), n_c, n_c), dtype=np.int64)
    K.confusion_many(preds.reshape(-1, len(ys)), label[ys, xs].astype(np.int64), n_c, conf)
    return conf.reshape(len(scales), len(depths), len(trees), n_c, n_c), depths, trees


def default_alpha(model):
    """The model's selected reweighting exponent, else 1.0 (the paper's rule).

    Looked up, in order, as ``model.metrics["alpha"]``,
    ``model.metrics["selection"]["alpha"]`` and ``model.params["alpha"]``
    (the model-selection stage records it there).
    """
    metrics = getattr(model, "metrics", None) or {}
    params = getattr(model, "params", None) or {}
    for value in (metrics.get("alpha"), (metrics.get("selection") or {}).get("alpha"),
                  params.get("alpha")):
        if value is not None:
            return _check_alpha(value, "the model's selected alpha")
    return 1.0
