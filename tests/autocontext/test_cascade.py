"""Auto-context cascades (facesegment.autocontext.cascade, facesegment.autocontext.cascade_fit) on tiny
synthetic faces: out-of-fold training never predicts an image with a forest
that saw it, dense cascade inference equals running its stages by hand, save /
load, the evaluation driver and segment take a cascade like any model."""

import numpy as np
import pytest

from facesegment.autocontext.cascade import Cascade, load_cascade, save_cascade
from facesegment.autocontext.cascade_fit import fit_cascade, fold_of_images
from facesegment.autocontext.context import ContextSpec, as_u8, context_maps, context_planes
from facesegment.forest import AxisAlignedForest, TwoProbeForest
from facesegment.dense import confusion_sweep, predict_image, predict_proba_raw
from facesegment.layout import WindowLayout
from facesegment.models import load_model
from facesegment.data.windows import WindowSet, WindowsMeta

LAYOUT = WindowLayout(5, 3)
SPEC = ContextSpec(n_classes=3, directions=4, radii=(2, 5), boxes=(3,), position=True)
H = W = 18


def toy_faces(n_images=8, seed=0):
    """Images whose class is a blob in the middle (1) with a dot (2), noisy colours;
    pixel (0, 0, 0) of image i is i (so tests can tell images apart)."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for i in range(n_images):
        lab = np.zeros((H, W), np.uint8)
        cy, cx = 9 + rng.integers(-1, 2), 9 + rng.integers(-1, 2)
        lab[cy - 4:cy + 4, cx - 4:cx + 4] = 1
        lab[cy - 1:cy + 1, cx - 1:cx + 1] = 2
        img = rng.integers(0, 120, (H, W, 3)).astype(np.uint8)
        img[lab == 1] += 60
        img[lab == 2, 1] += 100
        img[0, 0, 0] = i
        images.append(img)
        labels.append(lab)
    return images, labels


def toy_windows(images, labels):
    half = LAYOUT.half
    X, y, idx, cen = [], [], [], []
    for i, (img, lab) in enumerate(zip(images, labels)):
        pad = np.pad(img, ((half, half), (half, half), (0, 0)), mode="reflect")
        for r in range(0, H, 2):
            for c in range(0, W, 2):
                X.append(pad[r:r + 5, c:c + 5])
                y.append(lab[r, c])
                idx.append(i)
                cen.append((r, c))
    X = np.stack(X)
    y = np.asarray(y, np.uint8)
    counts = np.bincount(y, minlength=3).astype(np.int64)
    meta = WindowsMeta(class_names=("bg", "face", "dot"), pixel_counts=counts,
                       sampling_factors=np.ones(3), mean=np.zeros(75, np.float32),
                       std=np.ones(75, np.float32), sources=[f"f{i}" for i in range(len(images))],
                       seed=0, n_windows=len(y), path="", layout=LAYOUT)
    return WindowSet(X, y, np.asarray(idx, np.int32), np.asarray(cen, np.int32), meta)


def stages(kinds=("axis", "axis")):
    cls = {"axis": AxisAlignedForest, "two-probe": TwoProbeForest}
    return [(k, lambda seed, k=k: cls[k](n_estimators=3, max_depth=6, min_samples_leaf=1,
                                         random_state=seed)) for k in kinds]


@pytest.fixture(scope="module")
def data():
    images, labels = toy_faces()
    return images, labels, toy_windows(images, labels)


def fit(data, kinds=("axis", "axis"), **kw):
    images, _, ws = data
    return fit_cascade(ws, lambda name: images[int(name[1:])], stages(kinds), SPEC,
                       n_folds=4, seed=0, log=lambda m: None, progress=False, **kw)


def test_folds_split_images_not_windows(data):
    ws = data[2]
    fold = fold_of_images(ws.image_index, 4, 0)
    for i in np.unique(ws.image_index):
        assert len(set(fold[ws.image_index == i])) == 1
    assert sorted(set(fold)) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="n_folds=1"):
        fold_of_images(ws.image_index, 1, 0)


def test_no_image_is_predicted_by_a_forest_that_saw_it(data, monkeypatch):
    """Every out-of-fold map (stages 1 and 2 of a 3-stage cascade) comes from a
    fold forest whose training rows hold no window of that image."""
    import facesegment.autocontext.cascade_fit as cf
    import facesegment.dense as dense

    ws = data[2]
    flat = {row.tobytes(): int(i) for row, i in zip(ws.X.reshape(len(ws.y), -1),
                                                    ws.image_index)}
    trained_on, owner, predicted = {}, {}, []
    alive = []    # the hooks key on id(): keep the objects, so no id is reused
    real_fit, real_model, real_raw = cf.fit_timed, cf.stage_model, dense.predict_proba_raw

    def fit_hook(est, X, y, meta=None):
        alive.append(est)
        trained_on[id(est)] = {flat[row[:75].tobytes()] for row in X}
        return real_fit(est, X, y, meta)

    def model_hook(est, kind, meta, stage, spec):
        m = real_model(est, kind, meta, stage, spec)
        alive.append(m.arrays)
        owner[id(m.arrays)] = id(est)
        return m

    def raw_hook(model, image, **kw):
        if id(model.arrays) in owner:
            predicted.append((int(image[0, 0, 0]), owner[id(model.arrays)]))
        return real_raw(model, image, **kw)

    monkeypatch.setattr(cf, "fit_timed", fit_hook)
    monkeypatch.setattr(cf, "stage_model", model_hook)
    monkeypatch.setattr(dense, "predict_proba_raw", raw_hook)
    cascade = fit(data, ("axis", "two-probe", "axis"))
    assert len(cascade.stages) == 3 and cascade.kind == "cascade:axis>two-probe>axis"
    assert len(predicted) == 2 * 8          # stages 1 and 2: every training image once
    assert len({est for _, est in predicted}) == 2 * 4      # four fold forests per stage
    for img, est in predicted:
        assert img not in trained_on[est]
        assert len(trained_on[est]) == 6    # the other three folds' images


def test_dense_cascade_equals_its_stages_by_hand_and_round_trips(data, tmp_path):
    images, labels, _ = data
    cascade = fit(data, ("axis", "two-probe"))
    image = images[0]
    raw1 = predict_proba_raw(cascade.stages[0], image, mode="full")
    planes = context_planes(raw1, SPEC)
    by_hand = predict_proba_raw(cascade.final, image, mode="full", planes=planes)
    np.testing.assert_array_equal(predict_proba_raw(cascade, image, mode="full"), by_hand)
    cascade.metrics["alpha"] = 0.5
    path = save_cascade(cascade, tmp_path / "casc")
    back = load_model(path)
    assert isinstance(back, Cascade) and back.spec == SPEC
    assert back.stage_kinds == ["axis", "two-probe"] and back.metrics["alpha"] == 0.5
    np.testing.assert_array_equal(predict_image(back, image, alpha=0.5)[1],
                                  predict_image(cascade, image, alpha=0.5)[1])
    # the sweep and the driver take it like any model
    conf, _, _ = confusion_sweep(back, image, labels[0], mode="full")
    _, lab = predict_image(back, image, mode="full", alpha=1.0)
    truth = labels[0].ravel()
    expect = np.zeros((3, 3), np.int64)
    np.add.at(expect, (truth, lab.ravel()), 1)
    np.testing.assert_array_equal(conf[0, 0, 0], expect)
    # a folder holding a user's file is not replaced
    (path / "NOTES.txt").write_text("mine")
    with pytest.raises(Exception, match="not the cascade's"):
        save_cascade(cascade, path)
    assert (path / "NOTES.txt").read_text() == "mine"


def test_context_helps_on_the_toy_problem(data):
    """Stage 2 sees the blob around the dot: on held-out toy faces it is at least
    as good as stage 1 (a sanity check of the wiring, not a benchmark)."""
    images, labels = toy_faces(4, seed=9)
    cascade = fit(data)
    acc1 = acc2 = 0
    for img, lab in zip(images, labels):
        acc1 += (predict_image(cascade.stages[0], img, alpha=0)[1] == lab).mean()
        acc2 += (predict_image(cascade, img, alpha=0)[1] == lab).mean()
    assert acc2 >= acc1 - 0.02


def test_bad_cascades_are_refused(tmp_path, data):
    with pytest.raises(ValueError, match="at least 2 stages"):
        Cascade([fit(data).stages[0]], SPEC)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cascade.json").write_text('{"format": "nope"}')
    with pytest.raises(Exception, match="not a facesegment cascade"):
        load_cascade(tmp_path / "c")


def test_cascade_folder_errors_name_the_file(tmp_path, data):
    """Another format version, a missing key, a stage of the wrong layout: one
    DataError naming the file and saying to retrain."""
    import json as _json

    from facesegment.errors import DataError

    path = save_cascade(fit(data), tmp_path / "c")
    doc = _json.loads((path / "cascade.json").read_text())
    for change, words in (({"format_version": 9}, "has format version 9"),
                          ({"context": None}, "is incomplete"),
                          ({"context": {**doc["context"], "radii": [2]}}, "not the context layout")):
        (path / "cascade.json").write_text(_json.dumps({**doc, **change}))
        with pytest.raises(DataError) as err:
            load_cascade(path)
        assert words in str(err.value) and "train the cascade again" in str(err.value)


def test_cascade_with_prior_planes_carries_its_prior(data, tmp_path):
    """Context with the position prior's planes and stage 1's decision maps: the prior is required to train, the
    cascade's last stage carries it, inference reads it, save/load keeps it."""
    from dataclasses import replace

    from facesegment.errors import DataError
    from facesegment.position import fit_position_prior

    images, labels, ws = data
    spec = replace(SPEC, prior=True, stage1_alpha=0.5, stage1_beta=1.0)
    prior = fit_position_prior(labels, 3, sigma=1.0, pseudo=0.5)
    make = lambda name: images[int(name[1:])]  # noqa: E731
    with pytest.raises(ValueError, match="give prior="):
        fit_cascade(ws, make, stages(), spec, n_folds=4, log=lambda m: None, progress=False)
    cascade = fit_cascade(ws, make, stages(), spec, n_folds=4, seed=0, log=lambda m: None,
                          progress=False, prior=prior)
    assert cascade.position is prior and cascade.final.layout.channels == 3 + spec.n_planes
    raw1 = predict_proba_raw(cascade.stages[0], images[0], mode="full")
    maps = context_maps(as_u8(raw1), spec, 1, cascade.stages[0].sampling_factors, prior)
    by_hand = predict_proba_raw(cascade.final, images[0], mode="full",
                                planes=context_planes(maps, spec, prior))
    np.testing.assert_array_equal(predict_proba_raw(cascade, images[0], mode="full"), by_hand)
    back = load_model(save_cascade(cascade, tmp_path / "c"))
    assert back.spec.prior and back.position is not None
    np.testing.assert_array_equal(predict_proba_raw(back, images[0], mode="full"), by_hand)
    back.final.position = None
    path = save_cascade(back, tmp_path / "c")
    with pytest.raises(DataError, match="has no position prior"):
        load_cascade(path)


def test_a_first_stage_of_other_windows_is_refused(data):
    """first= must be the stage-1 model of these windows (its sampling factors are the
    ones stage 1's decision maps are reweighted with): one ValueError saying so."""
    images, _, ws = data
    first = fit(data).stages[0]
    first.sampling_factors = np.asarray(first.sampling_factors) * 2
    with pytest.raises(ValueError, match="first= was not trained on these windows"):
        fit_cascade(ws, lambda n: images[int(n[1:])], stages(), SPEC, n_folds=4,
                    log=lambda m: None, progress=False, first=first)
