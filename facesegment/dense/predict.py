"""Dense per-pixel inference of a forest over a whole image (the orchestration).

Every pixel's window (``layout.window`` square, ``layout.channels`` planes:
31x31x3 for the paper's RGB models) is read straight from the (padded) image
inside the Numba kernels: a feature index is a byte offset from the window's
top-left corner, so axis-aligned and two-probe nodes read one or two bytes
and oblique (CO2) nodes dot their weights with the window's rows of
``layout.row`` contiguous bytes.  No ``(H*W, n_features)`` window matrix is
ever built.  The layout comes from the model (``model.layout``); the image's
channels, followed by the optional extra ``planes``, must make up its
``layout.channels``.

Which kernels run (each compiled for the model's layout, see
:mod:`facesegment.dense._numba`):

* forests without oblique nodes: packed 64-bit records, tree-major over one
  block of rows per thread (:mod:`facesegment.dense._probe_forests`);
  an auto-context stage of axis-aligned nodes reads the image and its
  context planes from a split buffer (:mod:`facesegment.dense._split`), in
  blocks of ``SPLIT_BLOCK_ROWS`` rows;
* forests with oblique nodes: pixels grouped by node, level by level
  (:mod:`facesegment.dense._oblique_forests`);
* otherwise (``kernels=`` excluding the others (:data:`KERNELS`), ``fft_levels > 0``, images too wide for the fast
  records): the general per-pixel kernels (:mod:`facesegment.dense._any_forest`).

Modes
-----
``"strict"``  the paper's protocol: pixels within ``layout.half`` (15) px of
              the border (whose windows would leave the image) are not
              predicted: probabilities 0, label 255 (ignore).
``"full"``    the image is reflect-padded by ``layout.half`` px
              (``numpy.pad`` mode ``"reflect"``: ``dcb|abcd|cba``) so every
              pixel gets a prediction.

The module-level switches below are read at every call (tests and the
benchmark set them).
"""

from collections import namedtuple

import numba
import numpy as np

from ..classes import IGNORE
from . import _probe_forests, _any_forest, _oblique_forests, _pooled, _visits
from ._face import face_prediction
from ._checks import (KERNELS, check_fft_levels, check_kernels, check_limit,  # noqa: F401
                      image_and_planes)
from ._numba import layout_kernels
from ..forest._arrays import n_sparse
from ._packing import cached, pack_fast, pack_nodes, pack_sparse
from ._scores import confusion_many
from ._split import split_buffer
from .image import ROW_SLACK, fft_responses, float_image, pad_image
from ..position import position_factor, position_scales
from ..reweight import (MODES, check_alpha, check_beta, check_mode, check_sigma,  # noqa: F401
                        class_scales, forest_arrays, forest_stages, model_layout, reweight,
                        smooth, strict_region)
# a model's stored terms: the rule's module reads them (re-exported here and by the package)
from ..rule import decision_rule, default_alpha, default_beta, default_sigma  # noqa: F401

FAST_CHUNK = 2048  # pixels per chunk of the fast confusion sweep
SWEEP_SCALE_BYTES = 1 << 27  # per-pixel class scales one sweep pass holds (more betas: passes)
FAST_BLOCK_ROWS = None  # rows per block of the fast dense kernel (None: one block per thread)
SPLIT_BLOCK_ROWS = 4  # ... on a context stage's split buffer (measured: 4 rows 53 ms, one
                      # block per thread 88 ms: its context copies then outgrow the cache)
_NO_LIMIT = 2 ** 30

#: Kernel-ready inputs of one image: the layout, the padded image flattened
#: (``rowstride`` values per row), the trees, the depth limit and the general
#: records (``nodes``, ``thr``, ``value``, ``weights``, FFT ``resp``).
_Prepared = namedtuple("_Prepared", "layout arrays shape img rowstride roots steps nodes thr "
                                    "value weights sp_off sp_w resp")


def _kernels(module, layout, variant=None):
    return layout_kernels(module, layout.window, layout.channels, variant)


def _f32(a):
    return a if a.dtype == np.float32 and a.flags.c_contiguous else np.ascontiguousarray(
        a, dtype=np.float32)


def _weights_f32(weights):
    """float32 C-contiguous weights (a float16 forest is converted once, cached)."""
    if weights.dtype == np.float32 and weights.flags.c_contiguous:
        return weights
    return cached("f32", weights, None,
                  lambda: np.ascontiguousarray(weights, dtype=np.float32))


#: The fast kernels' inputs for a context stage read from the split buffer
#: (:mod:`facesegment.dense._split`): ``kernels`` compiled for the image's own
#: planes, ``img`` the buffer, ``fast`` = ``(rec, mode, sparse)``.
_Split = namedtuple("_Split", "layout kernels shape img rowstride roots steps value fast")


def _prepare(model, image, planes, n_trees, max_depth, fft_levels, split_ok=False):
    """Validate the arguments once and build the kernels' inputs: a ``_Prepared``,
    or with ``split_ok`` a ``_Split`` when the fast kernels can read the image
    and the context planes from a split buffer."""
    stages = forest_stages(model)
    if len(stages) > 1:  # a cascade: its last stage, on the earlier stages' planes
        if planes is None:
            planes = model.context(image)
        model = stages[-1]
    arrays = forest_arrays(model)
    layout = model_layout(model)
    image, planes = image_and_planes(image, planes, layout)
    n_trees = check_limit(n_trees, "n_trees", arrays.n_trees)
    max_depth = check_limit(max_depth, "max_depth", _NO_LIMIT)
    fft_levels = check_fft_levels(fft_levels)
    roots = np.ascontiguousarray(arrays.roots[:n_trees], dtype=np.int64)
    steps = min(max_depth, int(arrays.depth.max()) if arrays.n_nodes else 0)
    if split_ok and planes is not None and layout.pool == 1:
        split = _split_inputs(arrays, layout, image, planes, roots, steps)
        if split is not None:
            return split
    stacked = image if planes is None else np.ascontiguousarray(
        np.concatenate([image, planes], axis=2))
    padded = pad_image(stacked, layout)
    if layout.pool > 1:   # box means at a stride: the kernels run phase by phase
        if fft_levels > 0:
            raise ValueError(f"fft_levels={fft_levels}: FFT responses are for unpooled "
                             f"layouts; this model reads {layout.describe()}; use 0")
        return _pooled.Pooled(layout, arrays, stacked.shape, padded, roots, steps,
                              _f32(arrays.value), _weights_f32(arrays.weights))
    weights = _weights_f32(arrays.weights)
    nodes, thr = pack_nodes(arrays, padded.shape[1], layout)
    sp_off, sp_w = pack_sparse(arrays, padded.shape[1], layout)
    if fft_levels > 0 and weights.shape[0] > 0:
        resp, resp_index = fft_responses(padded, arrays, roots, min(fft_levels, steps),
                                         stacked.shape, layout)
        nodes = nodes.copy()
        nodes[:, _any_forest.RESP] = resp_index
        thr = nodes.view(np.float32)
    else:
        resp = np.zeros((0, 1, 1), dtype=np.float32)
    return _Prepared(layout, arrays, stacked.shape, padded.reshape(-1),
                     padded.shape[1] * layout.channels, roots, steps, nodes, thr,
                     _f32(arrays.value), weights, sp_off, sp_w, resp)


def _split_inputs(arrays, layout, image, planes, roots, steps):
    """A ``_Split`` for a forest the fast kernels run on the split buffer, or None."""
    c0 = image.shape[2]
    padded = pad_image(image, layout)
    fast = pack_fast(arrays, padded.shape[1], layout, split=(c0, padded.shape))
    if fast is None:
        return None
    buf = split_buffer(padded, planes, layout.half, _probe_forests.slack_bytes(c0))
    kernels = _probe_forests.kernels(layout.window, c0, fast[1])
    return _Split(layout, kernels, image.shape[:2] + (layout.channels,), buf,
                  padded.shape[1] * c0, roots, steps, _f32(arrays.value), fast)


def _fast_records(p, fast=True):
    """``(rec, mode, sparse)`` for the fast kernels, or None (dense oblique nodes, too
    wide, not ``fast``): see :func:`facesegment.dense._packing.pack_fast`."""
    if not fast:
        return None
    return pack_fast(p.arrays, p.shape[1] + 2 * p.layout.half, p.layout)


def _float_image(p):
    """The padded image as float32 with ``ROW_SLACK`` values to spare (level kernels)."""
    return float_image(p.img)


def _uses_levels(p, fft_levels, levels=True):
    return (levels and fft_levels == 0 and p.weights.shape[0] > 0
            and n_sparse(p.arrays) == 0)


# ------------------------------------------------------------------- public

def predict_image(model, image, mode="full", alpha=None, max_depth=None, n_trees=None,
                  fft_levels=0, planes=None, beta=None, sigma=None, kernels="auto"):
    """Per-pixel class probabilities and labels of a whole image, as the model
    sees it: one face crop (a 250x250 LFW-style crop for the face models).

    For photos (faces anywhere, any size) use :func:`facesegment.segment`, which
    finds the faces, crops them as the model's training faces were cropped and
    maps the results back.

    Parameters
    ----------
    model : a face model (:class:`facesegment.modelio.protocol.FaceModel`)
        A forest (:class:`facesegment.modelio.model.Model`) or a cascade runs
        here over every pixel's window: it uses ``model.arrays``,
        ``model.layout``, ``model.sampling_factors`` and its decision rule
        (:mod:`facesegment.rule`).  Any other model (``model.dense`` false: the
        landmark votes, the face mesh) reads the crop itself
        (``model.predict_face``: RGB crops only; ``max_depth``, ``n_trees``,
        ``fft_levels`` and ``planes`` are for forests; ``alpha``, ``beta``,
        ``sigma`` go to the model, which may keep its own rule).
    image : uint8 (H, W, 3), or (H, W) / (H, W, 1) for a grey model
        The image (any size); its channels are the first of the layout's.
    mode : {"full", "strict"}
        "strict": border pixels (within ``layout.half`` px) get probabilities
        0, label 255.  "full": reflect-padding gives every pixel a prediction.
    alpha : float >= 0, optional
        Prior-reweighting exponent (1 = paper, 0 = none).  Default (None): the
        model's stored rule; a model without one gets the paper's rule and a
        one-time :class:`facesegment.rule.NoRuleWarning`.
    max_depth : int or None
        Evaluate the trees truncated at this depth (0 = the roots' distribution).
    n_trees : int or None
        Use only the first ``n_trees`` trees.
    fft_levels : int
        Evaluate oblique nodes of the top ``fft_levels`` levels by FFT
        correlation of the whole image (CO2 speed-up; 0 = every node per pixel).
    planes : uint8 (H, W, k) or (H, W), optional
        Extra per-pixel planes stacked after the image's channels, for models
        whose layout has them (e.g. a previous stage's class probabilities
        scaled to 0-255).
    beta : float >= 0, optional
        Exponent of the model's position prior (``model.position``): scores
        ``p * s**-alpha * (pos / pi)**beta`` (:mod:`facesegment.position`);
        0 = no position prior.  Default: the model's rule.
    sigma : float >= 0, optional
        Blur each reweighted class map with a Gaussian of ``sigma`` pixels
        before the argmax (:func:`facesegment.reweight.smooth`); 0 = none.
        Default: the model's rule.  The whole image is predicted ("full")
        before blurring; "strict" then blanks the border.
    kernels : {"auto", "no-fast", "no-levels", "general"}
        Which kernel families may run the forest (:data:`KERNELS`; the same
        results whichever: for tests and benchmarks).

    Returns
    -------
    proba : float32 (H, W, n_classes)
        Reweighted, renormalised class probabilities.
    labels : uint8 (H, W)
        Argmax class ids (255 at ignored border pixels in strict mode).

    Raises
    ------
    ValueError
        When the image's channels (plus planes) do not make up the model's
        layout, e.g. "model expects 31x31 windows of 3 channels (R, G, B);
        image has 1 channel: ...", or for a bad mode, alpha or limit.
    TypeError
        When ``model`` is not a model (no forest arrays, no ``predict_face``).
    """
    if getattr(model, "dense", True) is False:   # the model reads the crop itself
        check_kernels(kernels)
        return face_prediction(model, image, mode, alpha, beta, sigma, dict(
            max_depth=max_depth, n_trees=n_trees, fft_levels=fft_levels, planes=planes))
    if getattr(model, "arrays", None) is None:
        raise TypeError(f"predict_image needs a model (a forest Model, a Cascade, or one "
                        f"with predict_face: load one with facesegment.load_model), got "
                        f"{type(model).__name__}")
    check_mode(mode)
    rule = decision_rule(model, alpha=None if alpha is None else check_alpha(alpha),
                         beta=None if beta is None else check_beta(model, beta),
                         sigma=None if sigma is None else check_sigma(sigma))
    raw = predict_proba_raw(model, image, mode="full" if rule.needs_full_maps else mode,
                            max_depth=max_depth, n_trees=n_trees, fft_levels=fft_levels,
                            planes=planes, kernels=kernels)
    return rule.apply(model, raw, mode)


def predict_proba_raw(model, image, mode="full", max_depth=None, n_trees=None, fft_levels=0,
                      planes=None, kernels="auto"):
    """The forest's mean leaf distribution per pixel, before reweighting.

    Parameters
    ----------
    model : Model or Cascade
        A forest (or cascade stage) with ``arrays`` and ``layout``.
    image : uint8 (H, W, 3), or (H, W) / (H, W, 1) for a grey model
        As :func:`predict_image`.
    mode : {"full", "strict"}, optional
        "strict": only pixels at least ``layout.half`` px from the border are
        predicted (the others stay 0); "full" (default): every pixel.
    max_depth, n_trees, fft_levels, planes, kernels
        As :func:`predict_image`.

    Returns
    -------
    float32 (H, W, C)
        C is the forest's number of ``value`` columns.

    Raises
    ------
    ValueError
        For a bad mode, kernels choice or limit, or an image (with planes)
        that does not make up the model's layout.
    """
    check_mode(mode)
    use_fast, use_levels = check_kernels(kernels)
    p = _prepare(model, image, planes, n_trees, max_depth, fft_levels, split_ok=use_fast)
    h, w = p.shape[:2]
    out = np.zeros((h, w, p.value.shape[1]), dtype=np.float32)
    y0, y1, x0, x1 = strict_region(p.shape, p.layout) if mode == "strict" else (0, h, 0, w)
    if y1 <= y0 or x1 <= x0:
        return out
    threads = max(1, numba.get_num_threads())
    if isinstance(p, _pooled.Pooled):
        return _pooled.proba(p, y0, y1, x0, x1, out)
    if isinstance(p, _Split):   # a context stage: image and planes from the split buffer
        rec, mode, sp = p.fast
        _probe_forests.dense_proba_fast(p.kernels, p.img, p.rowstride, y0, y1, x0, x1,
                                        p.roots, p.steps, rec, sp, p.value, out,
                                        FAST_BLOCK_ROWS or SPLIT_BLOCK_ROWS, threads)
        return out
    fast = _fast_records(p, use_fast)
    if fast is not None:
        rec, mode, sp = fast
        buf = np.zeros(p.img.size + _probe_forests.slack_bytes(p.layout.channels), dtype=np.uint8)
        buf[:p.img.size] = p.img  # room to read past x1
        # one block of rows per thread: each tree stays in a core's cache
        block = FAST_BLOCK_ROWS or -(-(y1 - y0) // threads)
        kernels = _kernels(_probe_forests, p.layout, _probe_forests.VARIANT[mode])
        _probe_forests.dense_proba_fast(kernels, buf, p.rowstride, y0, y1, x0, x1, p.roots,
                                        p.steps, rec, sp, p.value, out, block, threads)
    elif _uses_levels(p, fft_levels, use_levels):
        # oblique nodes: pixels grouped by node, level by level (a node's
        # weights are read once per block instead of once per pixel)
        block = -(-(y1 - y0) // threads)
        _kernels(_oblique_forests, p.layout).dense_proba_levels(
            _float_image(p), p.rowstride, y0, y1, x0, x1, p.roots, p.steps, p.nodes, p.thr,
            p.value, p.weights, out, block)
    else:
        _kernels(_any_forest, p.layout).dense_proba(
            p.img, p.rowstride, y0, y1, x0, x1, p.roots, p.steps, p.nodes, p.thr, p.value,
            p.weights, p.sp_off, p.sp_w, p.resp, out)
    return out


def _count_visits(model, image, mode, max_depth, n_trees, planes):
    """int64 ``(n_trees, 3)``: per tree, the dense oblique nodes, sparse oblique
    nodes and sparse values visited when predicting ``image`` (:mod:`facesegment.dense._visits`)."""
    check_mode(mode)
    p = _prepare(model, image, planes, n_trees, max_depth, 0)
    h, w = p.shape[:2]
    region = strict_region(p.shape, p.layout) if mode == "strict" else (0, h, 0, w)
    return _visits.count(p, region, _uses_levels(p, 0))


def count_oblique_visits(model, image, mode="full", max_depth=None, n_trees=None,
                         planes=None, per_tree=False):
    """Dense oblique nodes evaluated when predicting ``image`` (for FLOP
    accounting); with ``per_tree``, an int64 array of them per tree (the first
    ``m`` entries add up to the count of an ``m``-tree forest).  Counted by the
    kernels that predict the forest: for dense oblique forests the level
    kernels' descent (each pixel's end node gives the oblique nodes above it:
    about the cost of one prediction), else the general per-pixel walk.

    Parameters
    ----------
    model, image, mode, max_depth, n_trees, planes
        As :func:`predict_proba_raw`.
    per_tree : bool, optional
        Return the counts per tree instead of their total (default False).

    Returns
    -------
    int or int64 (n_trees,)
    """
    counts = _count_visits(model, image, mode, max_depth, n_trees, planes)[:, 0]
    return counts if per_tree else int(counts.sum())


def count_sparse_entries(model, image, mode="full", max_depth=None, n_trees=None,
                         planes=None):
    """``(sparse oblique nodes evaluated, window values they gathered)`` when
    predicting ``image`` (for the gather bound of sparse forests).

    Parameters
    ----------
    model, image, mode, max_depth, n_trees, planes
        As :func:`predict_proba_raw`.

    Returns
    -------
    nodes : int
        Sparse oblique nodes evaluated.
    values : int
        Window values they gathered.
    """
    counts = _count_visits(model, image, mode, max_depth, n_trees, planes).sum(axis=0)
    return int(counts[1]), int(counts[2])


def _as_sorted_ints(values, name, low, upper):
    vals = sorted({check_limit(v, name, upper) for v in values})
    if not vals or vals[0] < low:
        raise ValueError(f"{name} must be a non-empty list of ints >= {low}, got {values!r}")
    return np.asarray(vals, dtype=np.int64)


def confusion_sweep(model, image, label, n_trees_list=None, max_depth_list=None,
                    alphas=(1.0,), mode="strict", fft_levels=0, chunk=256, planes=None,
                    beta=0.0, kernels="auto", betas=None):
    """Confusion matrices of many truncated forests and alphas in one pass.

    Each tree is walked once per pixel to the deepest limit asked for, keeping
    the path, and cumulative sums over trees give every ``n_trees`` setting, so
    Figure 4 (Jaccard vs number of trees and vs depth) needs one pass over the
    test images.

    Parameters
    ----------
    model : Model
    image : uint8 (H, W, C)
        As for :func:`predict_image` (with ``planes`` when the layout has them).
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
    beta : float >= 0
        Exponent of the model's position prior (0: none), with every alpha.
    kernels : {"auto", "no-fast", "no-levels", "general"}
        As for :func:`predict_image`.
    betas : list of float >= 0, optional
        Several position-prior exponents scored from the same pass (replaces
        ``beta``): the forest's sums are formed once per pixel and every
        (beta, alpha) row of class scales is applied to them, with the very
        operations of a one-beta call.

    Returns
    -------
    conf : int64 (len(alphas), len(depths), len(trees), C, C)
        ``conf[a, k, j, true, pred]``; depths and trees are returned sorted.
        With ``betas``: ``len(betas) * len(alphas)`` rows, beta-major
        (row ``b * len(alphas) + a``).
    depths, trees : int arrays
        The sorted settings (an unlimited depth is reported as the forest's
        maximum depth).
    """
    check_mode(mode)
    use_fast, use_levels = check_kernels(kernels)
    arrays = forest_arrays(model)
    forest_depth = int(arrays.depth.max()) if arrays.n_nodes else 0
    trees = _as_sorted_ints(n_trees_list or [arrays.n_trees], "n_trees", 1, arrays.n_trees)
    depths = _as_sorted_ints([forest_depth if d is None else d
                              for d in (max_depth_list or [None])], "max_depth", 0,
                             forest_depth)
    betas = [check_beta(model, b) for b in ([beta] if betas is None else betas)]
    class_sc = class_scales(model.sampling_factors, alphas)
    p = _prepare(model, image, planes, int(trees[-1]), None, fft_levels, split_ok=use_fast)
    h, w = p.shape[:2]
    label = np.asarray(label)
    if label.dtype != np.uint8 or label.shape != (h, w):
        raise ValueError(f"label must be uint8 of shape {(h, w)}, got dtype "
                         f"{label.dtype} shape {label.shape}")
    elig = label != IGNORE
    if mode == "strict":
        y0, y1, x0, x1 = strict_region(p.shape, p.layout)
        inside = np.zeros((h, w), dtype=bool)
        inside[y0:y1, x0:x1] = True
        elig &= inside
    ys, xs = np.nonzero(elig)
    ys, xs = ys.astype(np.int64), xs.astype(np.int64)
    n_c = p.value.shape[1]
    truth = label[ys, xs].astype(np.int64)
    confs = []
    for group in _beta_groups(betas, len(alphas), len(ys), n_c):
        scales = _sweep_scales(model, (h, w), ys, xs, class_sc, group)
        preds = np.zeros((len(scales), len(depths), len(trees), len(ys)), dtype=np.uint8)
        if len(ys):
            _sweep_preds(p, ys, xs, depths, trees, scales, chunk, fft_levels, use_fast,
                         use_levels, preds)
        conf = np.zeros((len(scales) * len(depths) * len(trees), n_c, n_c), dtype=np.int64)
        if len(ys):  # no pixel scored (a pixel stride wider than the face): zero counts
            confusion_many(preds.reshape(-1, len(ys)), truth, n_c, conf)
        confs.append(conf.reshape(len(scales), len(depths), len(trees), n_c, n_c))
    return np.concatenate(confs) if len(confs) > 1 else confs[0], depths, trees


def _beta_groups(betas, n_alphas, n_pixels, n_classes):
    """``betas`` in runs whose per-pixel class scales take at most
    :data:`SWEEP_SCALE_BYTES` (at least one beta per run: a one-beta sweep's
    memory); each run is one pass of the kernels."""
    per_beta = max(1, n_alphas * n_pixels * n_classes * 8)
    size = max(1, SWEEP_SCALE_BYTES // per_beta)
    return [betas[i:i + size] for i in range(0, len(betas), size)]


def _sweep_scales(model, shape, ys, xs, class_sc, betas):
    """The sweeps' rows of class scales, beta-major: float64 (len(betas) *
    len(alphas), 1 or len(ys), C); a beta > 0 gives one row per scored pixel
    (:func:`facesegment.position.position_scales`), beta 0 the alpha's row
    (repeated per pixel when a beta > 0 shares the pass: the same factors)."""
    per_pixel = any(b > 0 for b in betas)
    rows = []
    if per_pixel:   # the prior's factor at the pixels, computed once
        f = position_factor(model.position, shape)[ys, xs].astype(np.float64)
    for b in betas:
        if b > 0:
            with np.errstate(over="ignore", under="ignore", divide="ignore"):
                power = np.power(f, float(b))
        for sc in class_sc:
            if b > 0:
                rows.append(position_scales(model.position, shape, ys, xs, sc, b, f, power))
            else:
                rows.append(np.broadcast_to(sc, (len(ys), len(sc))) if per_pixel
                            else sc[None, :])
    return np.ascontiguousarray(np.stack(rows), dtype=np.float64)


def _sweep_preds(p, ys, xs, depths, trees, scales, chunk, fft_levels, use_fast, use_levels,
                 preds):
    """``preds[a, k, j, i]``: the sweep's labels of the scored pixels (the kernel
    the prepared inputs ``p`` call for)."""
    split = isinstance(p, _Split)
    pooled = isinstance(p, _pooled.Pooled)
    fast = p.fast if split else _fast_records(p, use_fast) if not pooled else None
    if pooled:
        _pooled.sweep(p, ys, xs, depths, trees, scales, chunk, preds)
    elif fast is not None:
        rec, mode, sp = fast
        # large chunks: a tree is descended by many pixels while it is in cache
        kernels = p.kernels if split else _kernels(_probe_forests, p.layout,
                                                   _probe_forests.VARIANT[mode])
        _probe_forests.sweep_predict_fast(kernels, p.img, p.rowstride, ys, xs, p.roots, depths,
                                          trees, scales, rec, sp, p.value,
                                          max(int(chunk), FAST_CHUNK), preds,
                                          max(1, numba.get_num_threads()))
    elif _uses_levels(p, fft_levels, use_levels):
        # one chunk per thread (a window's decisions do not depend on its chunk)
        chunk_l = -(-len(ys) // max(1, numba.get_num_threads()))
        _kernels(_oblique_forests, p.layout).sweep_predict_levels(
            _float_image(p), p.rowstride, ys, xs, p.roots, depths, trees, scales, p.nodes,
            p.thr, p.value, p.weights, chunk_l, preds)
    else:
        _kernels(_any_forest, p.layout).sweep_predict(
            p.img, p.rowstride, ys, xs, p.roots, depths, trees, scales, p.nodes, p.thr,
            p.value, p.weights, p.sp_off, p.sp_w, p.resp, int(chunk), preds)
    return preds


__all__ = ["MODES", "KERNELS", "check_kernels", "FAST_CHUNK", "FAST_BLOCK_ROWS", "SPLIT_BLOCK_ROWS", "ROW_SLACK",
           "predict_image", "predict_proba_raw", "count_oblique_visits", "count_sparse_entries",
           "confusion_sweep",
           "reweight", "class_scales", "default_alpha", "default_beta", "default_sigma", "smooth",
           "pad_image", "strict_region",
           "fft_responses", "model_layout", "pack_fast", "pack_nodes"]
