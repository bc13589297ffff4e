"""Auto-context features: a stage's class-probability maps as the next stage's input.

Auto-context (Tu & Bai, CVPR 2008 / PAMI 2010; the "autocontext" of
pixel-classification tools such as ilastik) trains a cascade: stage ``k``
sees, besides the image window, the class probabilities that stage ``k-1``
gave at and around the pixel, and so learns the layout of the parts together
with their appearance.

A :class:`ContextSpec` says which values of the previous stage's maps ``P``
(H, W, C) a pixel gets, as uint8 planes (probability x 255):

* ``P`` at the pixel (C values);
* ``P`` at ``directions`` rays x ``radii`` offsets around it (the sparse
  offsets of Tu & Bai; offsets leaving the image read its nearest border
  pixel);
* box averages of ``P`` over squares of side ``boxes`` centred on it;
* optionally the pixel's position in the image (row and column scaled to
  0..255: in an aligned crop, where the pixel is in the face);
* optionally (``prior``) the position prior's class frequencies at the pixel
  (:mod:`facesegment.position`, resized to the image; x 255), so the stage
  learns the layout together with the maps instead of having it multiplied in
  afterwards.  The cascade then carries the prior (its last stage's
  ``position``) and needs it at inference.

Stage 1's maps may enter the context as its *decisions* rather than its raw
forest probabilities (``stage1_alpha`` set): ``p * s**-alpha * (pos/pi)**beta``
renormalised, with stage 1's reweighting and position-prior exponents
(:func:`context_maps`), which are coherent maps where the raw ones are
class-balanced and speckled.  Measured on faces300w
(``studies/cascade_variants.py``): +1.6 points of test Jaccard over raw maps.

:func:`context_planes` computes these ``n_planes`` planes for a whole image.
A forest of the next stage is trained on rows ``[window features | context
values at the window's centre]`` (:func:`stage_features`) and then turned into
an ordinary model over the window layout with ``channels + n_planes`` planes
whose context features sit at the window's centre (:func:`to_context_layout`),
so dense inference reads them from the planes inside the usual kernels
(``predict_image(model, image, planes=context_planes(P, spec))``), without a
window matrix.
"""

from dataclasses import dataclass

import numpy as np

from ..dense._packing import cached
from ..reweight import class_scale
from ..position import position_factor
from ._context_kernels import shifted_planes
from ..layout import WindowLayout

#: Default rays, radii (pixels of a 250x250 crop, up to about half a face) and boxes.
DEFAULT_DIRECTIONS = 8
DEFAULT_RADII = (6, 15, 30, 55)
DEFAULT_BOXES = (11, 41)


@dataclass(frozen=True)
class ContextSpec:
    """Which context values a pixel gets from the previous stage's maps."""

    n_classes: int = 8
    directions: int = DEFAULT_DIRECTIONS
    radii: tuple = DEFAULT_RADII
    boxes: tuple = DEFAULT_BOXES
    position: bool = True
    prior: bool = False
    stage1_alpha: float = None
    stage1_beta: float = 0.0

    def __post_init__(self):
        for name in ("n_classes", "directions"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"ContextSpec {name}={v!r} must be an integer >= 1")
        for name in ("radii", "boxes"):
            vals = tuple(getattr(self, name))
            if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1
                   for v in vals):
                raise ValueError(f"ContextSpec {name}={vals!r} must be integers >= 1 "
                                 "(pixels)")
            object.__setattr__(self, name, tuple(int(v) for v in vals))
        object.__setattr__(self, "position", bool(self.position))
        object.__setattr__(self, "prior", bool(self.prior))
        for name in ("stage1_alpha", "stage1_beta"):
            v = getattr(self, name)
            if v is None and name == "stage1_alpha":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(v) or v < 0:
                raise ValueError(f"ContextSpec {name}={v!r} must be a finite number >= 0"
                                 + (" (or None: stage 1's raw maps)"
                                    if name == "stage1_alpha" else ""))
            object.__setattr__(self, name, float(v))
        if self.stage1_alpha is None and self.stage1_beta:
            raise ValueError("ContextSpec stage1_beta needs stage1_alpha (stage 1's decision "
                             "maps); give stage1_alpha too, or stage1_beta=0")

    @property
    def offsets(self):
        """``(dy, dx)`` of every ray point, radius-major (int arrays)."""
        ang = 2 * np.pi * np.arange(self.directions) / self.directions
        dy = [int(round(r * np.sin(a))) for r in self.radii for a in ang]
        dx = [int(round(r * np.cos(a))) for r in self.radii for a in ang]
        return np.asarray(dy, np.int64), np.asarray(dx, np.int64)

    @property
    def needs_prior(self):
        """Does computing the context need the position prior?"""
        return self.prior or bool(self.stage1_beta)

    @property
    def n_planes(self):
        c = self.n_classes
        return (c * (1 + self.directions * len(self.radii) + len(self.boxes)
                     + (1 if self.prior else 0)) + (2 if self.position else 0))

    def plane_names(self):
        c = range(self.n_classes)
        names = [f"p{k}" for k in c]
        dy, dx = self.offsets
        names += [f"p{k}@{y:+d},{x:+d}" for y, x in zip(dy, dx) for k in c]
        names += [f"box{b}:p{k}" for b in self.boxes for k in c]
        names += ["row", "col"] if self.position else []
        return tuple(names + ([f"prior:p{k}" for k in c] if self.prior else []))

    def to_dict(self):
        return {"n_classes": self.n_classes, "directions": self.directions,
                "radii": list(self.radii), "boxes": list(self.boxes),
                "position": self.position, "prior": self.prior,
                "stage1_alpha": self.stage1_alpha, "stage1_beta": self.stage1_beta}

    @classmethod
    def from_dict(cls, d):
        """The spec of :meth:`to_dict`'s dictionary.

        Parameters
        ----------
        d : dict
            ``n_classes``, ``directions``, ``radii``, ``boxes``, ``position`` and
            optionally ``prior`` (default False), ``stage1_alpha`` (None) and
            ``stage1_beta`` (0).

        Returns
        -------
        ContextSpec

        Raises
        ------
        KeyError
            A required key is missing.
        ValueError
            A value out of range (see :class:`ContextSpec`).
        """
        return cls(int(d["n_classes"]), int(d["directions"]), tuple(d["radii"]),
                   tuple(d["boxes"]), bool(d["position"]), bool(d.get("prior", False)),
                   d.get("stage1_alpha"), d.get("stage1_beta", 0.0))


def _as_u8(p):
    return np.clip(np.rint(np.asarray(p, np.float32) * 255.0), 0, 255).astype(np.uint8)


def as_u8(proba):
    """Probabilities as the uint8 maps (x 255, rounded) the context is computed from.

    Parameters
    ----------
    proba : float array
        Probabilities in 0..1 (clipped).

    Returns
    -------
    uint8 array of ``proba``'s shape
    """
    return _as_u8(proba)


def context_maps(q, spec, stage, sampling_factors, prior=None):
    """The maps of one stage as the next stage's context reads them.

    Training stores out-of-fold maps as uint8 (:func:`as_u8`), and inference
    rounds the same way.  Stage 1 with ``spec.stage1_alpha`` set gives its
    decisions: ``p * s**-alpha * (pos/pi)**beta`` renormalised; otherwise ``p``.

    Parameters
    ----------
    q : uint8 (H, W, C)
        The stage's probabilities x 255.
    spec : ContextSpec
    stage : int
        The stage whose maps they are (1-based).
    sampling_factors : float (C,)
        The training windows' per-class sampling factors ``s``.
    prior : facesegment.position.PositionPrior, optional
        Gives ``pos`` (and ``pi``); needed when ``spec.stage1_beta`` > 0.

    Returns
    -------
    float32 (H, W, C)
        ``p = q / 255``, or stage 1's decision maps (0 where every class is 0).

    Raises
    ------
    ValueError
        ``spec.stage1_beta`` > 0 for stage 1 without ``prior``.
    """
    p = np.asarray(q, np.float32) / np.float32(255.0)
    if stage != 1 or spec.stage1_alpha is None:
        return p

    scale = class_scale(np.asarray(sampling_factors, np.float64), spec.stage1_alpha)
    scale = (scale / scale.max()).astype(np.float32)   # renormalised below: any common factor
    if spec.stage1_beta:
        if prior is None:
            raise ValueError("this context spec reweights stage 1's maps with the position "
                             "prior (stage1_beta > 0): give prior=")
        scale = _position_power(prior, p.shape[:2], spec.stage1_beta) * scale
    out = p * scale
    total = out.sum(axis=-1, keepdims=True)
    return np.where(total > 0, out / np.where(total > 0, total, 1), 0).astype(np.float32)


def _position_power(prior, shape, beta):
    """``(pos/pi)**beta`` on an image of ``shape``, float32 (H, W, C), scaled to a
    maximum of 1 per pixel (cached per prior, shape and beta: the same for every crop)."""
    def build():
        f = position_factor(prior, shape).astype(np.float64) ** float(beta)
        return (f / np.maximum(f.max(axis=-1, keepdims=True), 1e-300)).astype(np.float32)

    return cached("position-power", prior.freq, (tuple(int(v) for v in shape), float(beta)),
                  build)


def context_planes(proba, spec, prior=None):
    """The context planes of one image: uint8 ``(H, W, spec.n_planes)``.

    Parameters
    ----------
    proba : float (H, W, C)
        The previous stage's class probabilities at every pixel ("full" mode),
        ``C = spec.n_classes``; they are first rounded to uint8 (x 255) and
        every plane is computed from those values.
    spec : ContextSpec
    prior : facesegment.position.PositionPrior
        Needed when ``spec.prior`` (ignored otherwise).
    """
    import cv2

    proba = np.asarray(proba, np.float32)
    if proba.ndim != 3 or proba.shape[2] != spec.n_classes:
        raise ValueError(f"proba must be (H, W, {spec.n_classes}), got shape {proba.shape}")
    if spec.prior and (prior is None or prior.n_classes != spec.n_classes):
        raise ValueError("this context spec has position-prior planes (prior=True): give "
                         f"prior=, a PositionPrior of {spec.n_classes} classes (the "
                         "cascade's position prior)")
    h, w, c = proba.shape
    out = np.empty((h, w, spec.n_planes), np.uint8)
    q = _as_u8(proba)      # everything below is computed from the uint8 maps, so maps
    qf = q.astype(np.float32) / np.float32(255.0)   # stored as uint8 give the same planes
    dy, dx = spec.offsets
    shifted_planes(np.ascontiguousarray(q), dy, dx, out)     # the pixel, then the rays
    k = c * (1 + len(dy))
    rows, cols = np.arange(h), np.arange(w)
    for b in spec.boxes:
        out[..., k:k + c] = _as_u8(cv2.blur(qf, (b, b), borderType=cv2.BORDER_REPLICATE)
                                   .reshape(h, w, c))
        k += c
    if spec.position:
        out[..., k] = _as_u8((rows / max(h - 1, 1))[:, None] * np.ones((1, w)))
        out[..., k + 1] = _as_u8(np.ones((h, 1)) * (cols / max(w - 1, 1))[None, :])
        k += 2
    if spec.prior:
        out[..., k:k + c] = prior_planes(prior, (h, w))
    return out


def prior_planes(prior, shape):
    """The position prior's class frequencies on an image, x 255.

    Resized as :func:`facesegment.position.position_factor` resizes them, and
    renormalised per pixel; cached per prior and shape.

    Parameters
    ----------
    prior : facesegment.position.PositionPrior
    shape : (H, W)
        The image's size.

    Returns
    -------
    uint8 (H, W, C)
    """
    def build():
        freq = position_factor(prior, shape) * np.maximum(prior.class_prior, 1e-12).astype(
            np.float32)
        return _as_u8(freq / np.maximum(freq.sum(axis=-1, keepdims=True), 1e-12))

    return cached("prior-planes", prior.freq, tuple(int(v) for v in shape), build)


def stage_features(windows, planes, centers):
    """Training rows of a context stage: ``[window features | context values]``.

    Parameters
    ----------
    windows : uint8 (n, w, w, ch) or (n, w*w*ch)
        The windows of one image.
    planes : uint8 (H, W, K)
        The context planes of their image (:func:`context_planes`).
    centers : int (n, 2)
        The windows' centre pixels ``(row, col)``.

    Returns
    -------
    uint8 (n, w*w*ch + K)
    """
    windows = np.asarray(windows)
    flat = windows.reshape(windows.shape[0], -1)
    centers = np.asarray(centers)
    ctx = planes[centers[:, 0], centers[:, 1]]
    return np.concatenate([flat, ctx], axis=1)


def context_layout(image_layout, spec):
    """The window layout of a context stage.

    The image's planes, then the context planes (only their values at the
    window's centre are features).

    Parameters
    ----------
    image_layout : facesegment.layout.WindowLayout
        The layout of the image's windows.
    spec : ContextSpec

    Returns
    -------
    facesegment.layout.WindowLayout
        Same window, ``channels + spec.n_planes`` channels.
    """
    return WindowLayout(image_layout.window, image_layout.channels + spec.n_planes,
                        tuple(image_layout.channel_names) + spec.plane_names())


def feature_map(image_layout, spec):
    """Layout feature index of every column of :func:`stage_features` rows.

    Parameters
    ----------
    image_layout : facesegment.layout.WindowLayout
        The layout of the image's windows.
    spec : ContextSpec

    Returns
    -------
    int64 (image_layout.n_features + spec.n_planes,)
        Indices into :func:`context_layout`'s features: the window's pixels,
        then the context planes at the window's centre.
    """
    lay = context_layout(image_layout, spec)
    w, c0, c = image_layout.window, image_layout.channels, lay.channels
    cell = np.arange(w * w)
    img = (cell[:, None] * c + np.arange(c0)[None, :]).ravel()
    centre = (image_layout.half * w + image_layout.half) * c
    ctx = centre + c0 + np.arange(spec.n_planes)
    return np.concatenate([img, ctx]).astype(np.int64)


def to_context_layout(model, image_layout, spec):
    """A model trained on :func:`stage_features` rows as a model over :func:`context_layout`.

    The nodes' feature indices are remapped (:func:`feature_map`), for dense
    inference with ``planes=context_planes(...)``.  Oblique (CO2) nodes are
    refused: their dense weight rows would span the whole context layout.

    Parameters
    ----------
    model : facesegment.modelio.model.Model
        Trained on ``[window | context]`` rows.
    image_layout : facesegment.layout.WindowLayout
        The layout of the image's windows.
    spec : ContextSpec

    Returns
    -------
    facesegment.modelio.model.Model
        A copy with the new layout, mean 0 and std 1 (no normalisation).

    Raises
    ------
    ValueError
        The model's feature count does not match, or it has oblique nodes.
    """
    from dataclasses import replace

    a = model.arrays
    n_cols = image_layout.n_features + spec.n_planes
    if a.n_features != n_cols:
        raise ValueError(f"the model has {a.n_features} features; a context stage over "
                         f"{image_layout.describe()} with {spec.n_planes} context planes has "
                         f"{n_cols}")
    if a.weights.shape[0]:
        raise ValueError("a context stage with oblique (CO2) nodes is not supported: use an "
                         "axis-aligned, two-probe, extra-trees or ferns forest for stage 2+")
    fmap = feature_map(image_layout, spec)
    lay = context_layout(image_layout, spec)

    def remap(f):
        """Node feature indices mapped to the context layout (negative ones kept).

        Parameters
        ----------
        f : int array
            Feature indices into :func:`stage_features` columns; < 0: no feature.

        Returns
        -------
        array of ``f``'s shape and dtype
        """
        return np.where(f >= 0, fmap[np.maximum(f, 0)], f).astype(a.feature.dtype)

    arrays = a._replace(feature=remap(a.feature), feature2=remap(a.feature2),
                        weights=np.zeros((0, lay.n_features), a.weights.dtype))
    return replace(model, arrays=arrays, layout=lay,
                   mean=np.zeros(lay.n_features, np.float32),
                   std=np.ones(lay.n_features, np.float32))


__all__ = ["ContextSpec", "context_planes", "context_maps", "as_u8", "prior_planes", "stage_features", "context_layout",
           "feature_map", "to_context_layout", "DEFAULT_RADII", "DEFAULT_BOXES",
           "DEFAULT_DIRECTIONS"]
