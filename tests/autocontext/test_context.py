"""Auto-context features (facesegment.autocontext.context): the planes against a naive
per-pixel reference, and a forest trained on [window | context] rows predicts
the same through the context layout's dense kernels as on explicit rows."""

import numpy as np
import pytest

from facesegment.autocontext.context import (ContextSpec, context_layout, context_planes, feature_map,
                                 stage_features, to_context_layout)
from facesegment.forest import AxisAlignedForest, TwoProbeForest
from facesegment.dense import predict_proba_raw
from facesegment.layout import WindowLayout
from facesegment.modelio.model import Model


def random_proba(h, w, c, seed):
    p = np.random.default_rng(seed).random((h, w, c)).astype(np.float32)
    return p / p.sum(-1, keepdims=True)


def naive_planes(proba, spec, prior=None):
    """Per pixel, in the order of ContextSpec.plane_names."""
    import cv2

    h, w, c = proba.shape
    q = np.clip(np.rint(proba * 255), 0, 255)
    dy, dx = spec.offsets
    qf = (q / 255).astype(np.float32)
    boxes = [cv2.blur(qf, (b, b), borderType=cv2.BORDER_REPLICATE) for b in spec.boxes]
    out = np.zeros((h, w, spec.n_planes))
    for y in range(h):
        for x in range(w):
            vals = list(q[y, x])
            for oy, ox in zip(dy, dx):
                vals += list(q[min(max(y + oy, 0), h - 1), min(max(x + ox, 0), w - 1)])
            for bx in boxes:
                vals += list(np.clip(np.rint(bx[y, x] * 255), 0, 255))
            if spec.position:
                vals += [round(255 * y / (h - 1)), round(255 * x / (w - 1))]
            if spec.prior:   # class frequencies at the pixel (the prior's grid = the image's)
                f = prior.freq[y, x].astype(np.float64)
                vals += list(np.clip(np.rint(255 * f / f.sum()), 0, 255))
            out[y, x] = vals
    return out


def test_prior_planes_are_the_position_priors_frequencies():
    from facesegment.position import fit_position_prior

    rng = np.random.default_rng(3)
    labels = [rng.integers(0, 3, (9, 11)).astype(np.uint8) for _ in range(4)]
    prior = fit_position_prior(labels, 3, sigma=1.0, pseudo=0.5)
    spec = ContextSpec(n_classes=3, directions=4, radii=(2,), boxes=(3,), prior=True)
    assert spec.n_planes == 3 * (1 + 4 + 1 + 1) + 2
    assert spec.plane_names()[-3:] == ("prior:p0", "prior:p1", "prior:p2")
    proba = random_proba(9, 11, 3, 4)
    planes = context_planes(proba, spec, prior)
    np.testing.assert_allclose(planes, naive_planes(proba, spec, prior), atol=1)
    assert ContextSpec.from_dict(spec.to_dict()) == spec
    old = {k: v for k, v in spec.to_dict().items() if k != "prior"}   # older cascade files
    assert ContextSpec.from_dict(old).prior is False
    with pytest.raises(ValueError, match="give prior="):
        context_planes(proba, spec)


def test_planes_equal_naive_reference():
    spec = ContextSpec(n_classes=3, directions=4, radii=(2, 5), boxes=(3,), position=True)
    proba = random_proba(9, 11, 3, 0)
    planes = context_planes(proba, spec)
    assert planes.shape == (9, 11, spec.n_planes) == (9, 11, 3 * (1 + 8 + 1) + 2)
    np.testing.assert_array_equal(planes, naive_planes(proba, spec))
    assert len(spec.plane_names()) == spec.n_planes
    assert ContextSpec.from_dict(spec.to_dict()) == spec


def test_spec_validation():
    with pytest.raises(ValueError, match="radii"):
        ContextSpec(radii=(0, 3))
    with pytest.raises(ValueError, match="must be"):
        context_planes(np.zeros((4, 4, 2)), ContextSpec(n_classes=3))


@pytest.mark.parametrize("cls", [AxisAlignedForest, TwoProbeForest])
def test_context_stage_dense_equals_explicit_rows(cls):
    """Train on [window | context-at-centre] rows; the remapped model's dense
    prediction with planes equals predict_proba on the explicit rows."""
    image_layout = WindowLayout(5, 3)
    spec = ContextSpec(n_classes=3, directions=4, radii=(2, 4), boxes=(3,))
    rng = np.random.default_rng(1)
    h, w = 14, 13
    image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    planes = context_planes(random_proba(h, w, 3, 2), spec)
    half = image_layout.half
    ys, xs = np.meshgrid(np.arange(half, h - half), np.arange(half, w - half), indexing="ij")
    centers = np.stack([ys.ravel(), xs.ravel()], 1)
    wins = np.stack([image[y - half:y + half + 1, x - half:x + half + 1] for y, x in centers])
    X = stage_features(wins, planes, centers)
    assert X.shape == (len(centers), image_layout.n_features + spec.n_planes)
    # labels that depend on the context (so the trees use context features)
    y = (planes[centers[:, 0], centers[:, 1], spec.n_planes - 1] > 128).astype(int) \
        + (X[:, 7] > 128).astype(int)
    est = cls(n_estimators=3, max_depth=6, random_state=0, min_samples_leaf=1).fit(X, y)
    tab = Model.from_estimator(est, layout=None)
    model = to_context_layout(tab, image_layout, spec)
    assert model.layout == context_layout(image_layout, spec)
    used = model.arrays.feature[model.arrays.feature >= 0]
    centre = (half * 5 + half) * model.layout.channels
    assert np.any(used >= centre + 3)                       # context features are used
    dense = predict_proba_raw(model, image, mode="strict", planes=planes)
    expect = est.predict_proba(X)
    got = dense[centers[:, 0], centers[:, 1]]
    cols = np.searchsorted(model.classes, est.classes_)
    np.testing.assert_allclose(got[:, cols], expect, rtol=1e-5, atol=1e-6)


def test_feature_map_and_refusals():
    lay = WindowLayout(3, 1)
    spec = ContextSpec(n_classes=2, directions=1, radii=(1,), boxes=(), position=False)
    fmap = feature_map(lay, spec)           # 9 window values, then 4 context planes
    c = 1 + spec.n_planes
    assert fmap[:9].tolist() == [k * c for k in range(9)]
    assert fmap[9:].tolist() == [4 * c + 1 + k for k in range(spec.n_planes)]
    from facesegment.forest import CO2Forest

    X = np.random.default_rng(0).integers(0, 256, (300, 9 + spec.n_planes)).astype(np.uint8)
    y = (X[:, 0].astype(int) - X[:, 3] > 0).astype(int)
    est = CO2Forest(n_estimators=1, max_depth=3, random_state=0,
                    oblique_min_samples=10).fit(X, y)
    model = Model.from_estimator(est, layout=None)
    if model.arrays.weights.shape[0]:
        with pytest.raises(ValueError, match="oblique"):
            to_context_layout(model, lay, spec)
    with pytest.raises(ValueError, match="has 9 features"):
        to_context_layout(Model.from_estimator(
            AxisAlignedForest(n_estimators=1, random_state=0).fit(X[:, :9], y), layout=None),
            lay, spec)


def test_stage1_decision_maps_are_the_reweighted_prior_products():
    """stage1_alpha/beta: stage 1's maps enter the context as p s^-a (pos/pi)^b, renormalised,
    computed from the uint8 maps; other stages' maps (and alpha None) stay raw."""
    from facesegment.autocontext.context import as_u8, context_maps
    from facesegment.position import fit_position_prior, position_factor

    rng = np.random.default_rng(5)
    prior = fit_position_prior([rng.integers(0, 3, (7, 8)).astype(np.uint8) for _ in range(3)],
                               3, sigma=1.0, pseudo=0.5)
    s = np.array([0.5, 2.0, 4.0])
    q = as_u8(random_proba(7, 8, 3, 6))
    spec = ContextSpec(n_classes=3, stage1_alpha=0.5, stage1_beta=0.75)
    got = context_maps(q, spec, 1, s, prior)
    want = q / 255.0 * s ** -0.5 * position_factor(prior, (7, 8)).astype(np.float64) ** 0.75
    np.testing.assert_allclose(got, want / want.sum(-1, keepdims=True), atol=1e-6)
    np.testing.assert_array_equal(context_maps(q, spec, 2, s, prior), q / np.float32(255))
    raw = ContextSpec(n_classes=3)
    np.testing.assert_array_equal(context_maps(q, raw, 1, s), q / np.float32(255))
    # raw maps give the planes of the float probabilities they were rounded from
    p = random_proba(7, 8, 3, 7)
    np.testing.assert_array_equal(context_planes(context_maps(as_u8(p), raw, 1, s), raw),
                                  context_planes(p, raw))
    with pytest.raises(ValueError, match="give prior="):
        context_maps(q, spec, 1, s)
    with pytest.raises(ValueError, match="stage1_beta needs stage1_alpha"):
        ContextSpec(stage1_beta=0.5)
    with pytest.raises(ValueError, match="stage1_alpha"):
        ContextSpec(stage1_alpha=-1)
    assert ContextSpec.from_dict(spec.to_dict()) == spec and spec.needs_prior
