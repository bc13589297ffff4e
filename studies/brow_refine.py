"""A learned, image-based refinement of the 10 brow landmarks (ids 17-26) of the
landmark votes, on the validation faces.

The shipped landmark votes (:mod:`facesegment.faces.votes`) draw 54 dlib
landmark sets per face; their brows are the weakest classes (the table's last
row: the same sets with the human brow points, a ceiling, not a method).  This study moves the brow points of every set by one or two stages of
cascaded shape regression trained on the training faces of faces300w's split
(seed 0, 1107 faces; the 100 validation faces and the test faces held out):

* the frame of one set: origin the midpoint of its eye centres (means of
  landmarks 36-41 and 42-47), x along the eye line, unit the inter-ocular
  distance (IOD);
* shape-indexed features: the grey crop sampled (bilinear) at 24 fixed random
  offsets within 0.3 IOD of each current brow point, the offsets in that
  frame, the 240 values of a set standardised (their mean and deviation); the
  grey profile across each brow point (along the frame's y, +-0.25 IOD) and its
  differences; the brow points' own frame coordinates; for the forest also 400
  differences of pairs of samples around the same or neighbouring brow points;
* target: human minus current brow points in that frame (IOD units);
* regressor: ridge (alpha 1e4) on all 54 sets of each training face, or
  scikit-learn's ExtraTreesRegressor (100 trees, leaves of 20 or more) on 9
  fixed sets of each; training faces where dlib failed (the median set's brow
  error over 0.2 IOD, a few faces whose residuals of whole IODs would rule a
  squared loss) are left out;
* dlib's predictor was trained on 300-W training images (our training and
  validation faces), so its residuals there might be smaller than on unseen
  faces: the first table compares the brow error on training, validation and
  test faces (the test faces for this diagnosis only), the third the
  regressors' error on training faces held out of a 2-fold fit.  ``aug``
  variants train from the current points plus Gaussian noise in the frame (a
  shift of the whole brow, 0.03 IOD, and a per-point jitter, 0.02 IOD), as
  cascaded regression trains from perturbed starts; the second stage is
  trained on out-of-fold first-stage answers (2 folds over training faces).

Each variant moves all 54 sets of a validation face (the shipped offset added
first) and scores the vote renderer as ``evaluate_landmark_model`` does (strict
mode, every pixel); the brow landmark error is the mean Euclidean distance (px)
to the human brow points of each set and of the per-landmark median set.
"at the median set": the stages run once on the per-landmark median of the
sets and their move is added to every set.  The variant with the best
validation class average is scored on the test crops only when it gains more
than 0.3 points, once, after the choice.

    python -m studies.brow_refine --data /work/shared/data/faces300w
    python -m studies.brow_refine --no-test  # never scores the test crops

Writes ``reports/landmarks/brow-refine.json`` and ``.md``.  The landmark sets
are cached by ``landmark_set_table`` (``--cache``, default ``/tmp/brows``).
"""

import argparse
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.classes import N_CLASSES
from facesegment.data.datasets import load_face
from facesegment.data.splits import split_dataset
from facesegment.evaluation.metrics import class_average, confusion_matrix, jaccard
from facesegment.evaluation.scoring import scored_label
from facesegment.faces.landmark_fit import human_landmarks, landmark_set_table
from facesegment.faces.votes import VoteSpec, vote_maps
from facesegment.layout import DEFAULT_LAYOUT
from facesegment.models import load_model
from facesegment.models import DEFAULT, model_path

ROOT = Path(__file__).resolve().parents[1]
BROWS = np.arange(17, 27)
N_OFF, RADIUS, N_PAIRS = 24, 0.3, 400
PROFILE_X, PROFILE_Y = np.array([-0.04, 0.0, 0.04]), np.linspace(-0.25, 0.25, 21)
OUTLIER_IOD = 0.2


# ------------------------------------------------------------------ frame and features

def frames(pts):
    """Eye-line frames of landmark sets ``pts`` (..., 68, 2): ``(origin (..., 2),
    rot (..., 2, 2) whose columns are the frame's x and y axes, iod (...))``."""
    left, right = pts[..., 36:42, :].mean(-2), pts[..., 42:48, :].mean(-2)
    d = right - left
    iod = np.linalg.norm(d, axis=-1)
    ux = d / iod[..., None]
    uy = np.stack([-ux[..., 1], ux[..., 0]], -1)
    return (left + right) / 2, np.stack([ux, uy], -1), iod


def to_frame(vec, rot, iod):
    """Image vectors (..., P, 2) into frame units."""
    return np.einsum("...ij,...pi->...pj", rot, vec) / iod[..., None, None]


def from_frame(vec, rot, iod):
    return np.einsum("...ij,...pj->...pi", rot, vec) * iod[..., None, None]


class Sampler:
    """The fixed random offsets (frame units) and pixel-difference pairs."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        r = RADIUS * np.sqrt(rng.uniform(size=(10, N_OFF)))
        a = rng.uniform(0, 2 * np.pi, size=(10, N_OFF))
        self.offsets = np.stack([r * np.cos(a), r * np.sin(a)], -1)       # (10, K, 2)
        first = rng.integers(0, 10 * N_OFF, N_PAIRS)
        point = first // N_OFF + rng.integers(-1, 2, N_PAIRS)
        point = np.clip(point, 0, 9)
        self.pairs = np.stack([first, point * N_OFF + rng.integers(0, N_OFF, N_PAIRS)], 1)

    def features(self, grey, pts, brows=None, diffs=False):
        """Features of sets ``pts`` (S, 68, 2) of one face (``brows`` (S, 10, 2)
        replaces their brow points)."""
        origin, rot, iod = frames(pts)
        brows = pts[:, BROWS] if brows is None else brows
        off = from_frame(np.broadcast_to(self.offsets.reshape(1, -1, 2),
                                         (len(pts), 10 * N_OFF, 2)), rot, iod)
        at = np.repeat(brows, N_OFF, axis=1) + off                          # (S, 10K, 2)
        vals = _sample(grey, at, N_OFF).reshape(len(pts), -1)
        vals = (vals - vals.mean(1, keepdims=True)) / (vals.std(1, keepdims=True) + 1.0)
        geo = to_frame(brows - origin[:, None], rot, iod).reshape(len(pts), -1)
        parts = [vals, geo, profiles(grey, brows, rot, iod)]
        if diffs:
            parts.append(vals[:, self.pairs[:, 0]] - vals[:, self.pairs[:, 1]])
        return np.concatenate(parts, 1).astype(np.float32)


def _sample(grey, at, width):
    """``grey`` at points ``at`` (..., 2), bilinear, in rows of ``width`` (cv2's
    maps must stay under 32767 rows)."""
    flat = at.reshape(-1, 2).astype(np.float32)
    return cv2.remap(grey, flat[:, 0].reshape(-1, width).copy(),
                     flat[:, 1].reshape(-1, width).copy(), cv2.INTER_LINEAR,
                     borderMode=cv2.BORDER_REPLICATE).ravel()


def profiles(grey, brows, rot, iod):
    """The grey profile across each brow point (along the frame's y, -0.25..0.25
    IOD, 21 steps, averaged over 3 columns 0.04 IOD apart), standardised, and
    its differences: (S, 10 * 41)."""
    off = np.array([(x, y) for x in PROFILE_X for y in PROFILE_Y])
    at = brows[:, :, None, :] + (np.einsum("sij,pj->spi", rot, off)
                                 * iod[:, None, None])[:, None]
    v = _sample(grey, at, len(off)).reshape(len(brows), 10, len(PROFILE_X), len(PROFILE_Y))
    v = v.mean(2)
    v = (v - v.mean(-1, keepdims=True)) / (v.std(-1, keepdims=True) + 1.0)
    return np.concatenate([v, np.diff(v, axis=-1)], -1).reshape(len(brows), -1)


def target(pts, brows, human):
    _, rot, iod = frames(pts)
    return to_frame(human[None, BROWS] - brows, rot, iod).reshape(len(pts), -1)


# ------------------------------------------------------------------ training

class Faces:
    """Grey images, landmark sets (offset added) and human landmarks of records."""

    def __init__(self, records, sets, offset):
        keep = np.isfinite(sets).all(axis=(1, 2, 3))
        self.records = list(records)
        self.keep = keep
        self.sets = sets + np.asarray(offset)
        self.human = human_landmarks(self.records)
        self.grey = [np.ascontiguousarray(load_face(r, grey=True)[0], dtype=np.float32)
                     for r in self.records]


def training_faces(faces):
    """Indices of the faces to train on: found by dlib, with human landmarks,
    and the median set's brow error under ``OUTLIER_IOD`` (dlib's few failures,
    whose residuals of whole IODs would rule a squared loss)."""
    out = []
    for i in np.flatnonzero(faces.keep & np.isfinite(faces.human).all(axis=(1, 2))):
        med = np.median(faces.sets[i], axis=0)
        _, _, iod = frames(med)
        if np.linalg.norm(med[BROWS] - faces.human[i][BROWS], axis=-1).mean() < OUTLIER_IOD * iod:
            out.append(i)
    return np.array(out)


def make_rows(faces, sampler, brows, idx, pick, diffs, noise, rng):
    """Rows (features, targets) of faces ``idx``, sets ``pick`` of each, from
    brow points ``brows[i]`` (S, 10, 2) plus frame noise ``(shift, jitter)``."""
    X, Y = [], []
    for i in idx:
        pts = faces.sets[i][pick]
        b = brows[i][pick]
        if noise is not None:
            _, rot, iod = frames(pts)
            n = (rng.normal(0, noise[0], (len(pts), 1, 2))
                 + rng.normal(0, noise[1], (len(pts), 10, 2)))
            b = b + from_frame(n, rot, iod)
        X.append(sampler.features(faces.grey[i], pts, b, diffs))
        Y.append(target(pts, b, faces.human[i]))
    return np.concatenate(X), np.concatenate(Y)


def fit_regressor(kind, X, Y):
    if kind == "ridge":
        from sklearn.linear_model import Ridge

        return Ridge(alpha=1e4).fit(X, Y)
    from sklearn.ensemble import ExtraTreesRegressor

    forest = ExtraTreesRegressor(n_estimators=100, min_samples_leaf=20, max_features=0.2,
                                 n_jobs=2, random_state=0).fit(X, Y)
    forest.n_jobs = 1   # a parallel predict sums the trees in any order: not repeatable
    return forest


def apply_stage(model, faces, sampler, brows, i, diffs):
    pts = faces.sets[i]
    _, rot, iod = frames(pts)
    d = model.predict(sampler.features(faces.grey[i], pts, brows[i], diffs))
    return brows[i] + from_frame(d.reshape(-1, 10, 2), rot, iod)


def train_cascade(cfg, faces, sampler, log):
    """A list of fitted stages for ``cfg`` on the training ``faces``."""
    rng = np.random.default_rng(0)
    diffs = cfg["kind"] == "forest"
    idx = training_faces(faces)
    k = faces.sets.shape[1]
    pick = np.sort(np.random.default_rng(1).choice(k, cfg["sets"], replace=False))
    brows = {i: faces.sets[i][:, BROWS].copy() for i in idx}
    stages = []
    for stage in range(cfg["stages"]):
        t = time.time()
        X, Y = make_rows(faces, sampler, brows, idx, pick, diffs, cfg["noise"], rng)
        stages.append(fit_regressor(cfg["kind"], X, Y))
        if stage + 1 < cfg["stages"]:   # out-of-fold answers for the next stage
            fold = np.arange(len(idx)) % 2
            moved = {}
            for f in (0, 1):
                Xf, Yf = make_rows(faces, sampler, brows, idx[fold != f], pick, diffs,
                                   cfg["noise"], np.random.default_rng(10 + f))
                m = fit_regressor(cfg["kind"], Xf, Yf)
                for i in idx[fold == f]:
                    moved[i] = apply_stage(m, faces, sampler, brows, i, diffs)
            brows = moved
        log(f"brow_refine: {cfg['name']}: stage {stage + 1} on {len(X)} rows, "
            f"{time.time() - t:.0f} s")
    return stages


def cross_validated(cfg, faces, sampler):
    """Brow error (px) of ``cfg``'s first stage on training faces it did not
    see (2 folds over the training faces; all sets of a held-out face), beside the
    error of the sets it starts from: does the residual carry over within the
    training faces?"""
    diffs = cfg["kind"] == "forest"
    idx = training_faces(faces)
    pick = np.sort(np.random.default_rng(1).choice(faces.sets.shape[1], cfg["sets"],
                                                   replace=False))
    brows = {i: faces.sets[i][:, BROWS] for i in idx}
    fold = np.arange(len(idx)) % 2
    before, after = [], []
    for f in (0, 1):
        X, Y = make_rows(faces, sampler, brows, idx[fold != f], pick, diffs, cfg["noise"],
                         np.random.default_rng(10 + f))
        m = fit_regressor(cfg["kind"], X, Y)
        for i in idx[fold == f]:
            h = faces.human[i][BROWS]
            new = apply_stage(m, faces, sampler, brows, i, diffs)
            before.append(np.linalg.norm(brows[i] - h, axis=-1).mean())
            after.append(np.linalg.norm(new - h, axis=-1).mean())
    return {"name": cfg["name"], "n_faces": len(idx),
            "brow_error_px": round(float(np.mean(before)), 3),
            "refined_brow_error_px": round(float(np.mean(after)), 3)}


def refine(stages, faces, sampler, i, diffs, at_median=False):
    """The refined brow points (S, 10, 2) of face ``i``'s sets; ``at_median``:
    the stages run on the per-landmark median set and its move is added to
    every set."""
    sets = faces.sets[i]
    start = np.median(sets, axis=0)[None] if at_median else sets
    brows = start[:, BROWS].copy()
    for m in stages:
        _, rot, iod = frames(start)
        d = m.predict(sampler.features(faces.grey[i], start, brows, diffs))
        brows = brows + from_frame(d.reshape(-1, 10, 2), rot, iod)
    return sets[:, BROWS] + (brows - start[:, BROWS])


# ------------------------------------------------------------------ scoring

def brow_error(faces, i, brows):
    h = faces.human[i][BROWS]
    per_set = np.linalg.norm(brows - h, axis=-1).mean()
    median = np.linalg.norm(np.median(brows, axis=0) - h, axis=-1).mean()
    return per_set, median


def score(faces, brows_of, labels):
    """Vote-renderer scores of ``faces`` with brow points ``brows_of(i)``."""
    conf = np.zeros((N_CLASSES, N_CLASSES), np.int64)
    errs = []
    for i, label in enumerate(labels):
        if not faces.keep[i]:
            pred = np.zeros(label.shape, np.uint8)   # not met on these faces
        else:
            sets = faces.sets[i].copy()
            sets[:, BROWS] = brows_of(i)
            pred = np.argmax(vote_maps(sets, label.shape), axis=-1).astype(np.uint8)
            if np.isfinite(faces.human[i]).all():
                errs.append(brow_error(faces, i, sets[:, BROWS]))
        conf += confusion_matrix(label, pred, N_CLASSES)
    j = jaccard(conf)
    e = np.array(errs)
    return {"mean_jaccard": round(float(class_average(j)), 2),
            "jaccard": [round(float(v), 1) for v in j],
            "brow_error_px": round(float(e[:, 0].mean()), 3),
            "brow_error_median_set_px": round(float(e[:, 1].mean()), 3)}


def residual_table(named):
    """Brow error (px and IOD units) of the shipped sets on each group of faces,
    and on its AFW and HELEN faces apart (name prefix)."""
    out = {}
    for name, faces in named.items():
        src = np.array([r.name.split("_")[0] for r in faces.records])
        out[name] = _residuals(faces, np.flatnonzero(faces.keep))
        for s in np.unique(src) if len(np.unique(src)) > 1 else ():
            out[f"{name}, {s}"] = _residuals(faces, np.flatnonzero(faces.keep & (src == s)))
    return out


def _residuals(faces, rows):
    """Mean and median over faces of the sets' mean brow error (px, IOD units)."""
    px, rel = [], []
    for i in rows:
        _, _, iod = frames(faces.sets[i])
        d = np.linalg.norm(faces.sets[i][:, BROWS] - faces.human[i][BROWS], axis=-1).mean(-1)
        px.append(d.mean())
        rel.append((d / iod).mean())
    _, _, iod = frames(faces.human[rows])
    return {"n_faces": len(rows), "brow_error_px": round(float(np.mean(px)), 3),
            "brow_error_iod": round(float(np.mean(rel)), 4),
            "median_brow_error_iod": round(float(np.median(rel)), 4),
            "median_iod_px": round(float(np.median(iod)), 1)}


CONFIGS = [
    {"name": "ridge, 1 stage", "kind": "ridge", "stages": 1, "sets": 54, "noise": None},
    {"name": "ridge, 1 stage, aug", "kind": "ridge", "stages": 1, "sets": 54,
     "noise": (0.03, 0.02)},
    {"name": "forest, 1 stage", "kind": "forest", "stages": 1, "sets": 9, "noise": None},
    {"name": "forest, 1 stage, aug", "kind": "forest", "stages": 1, "sets": 9,
     "noise": (0.03, 0.02)},
    {"name": "forest, 2 stages, aug", "kind": "forest", "stages": 2, "sets": 9,
     "noise": (0.03, 0.02)},
]


# ------------------------------------------------------------------ the study

def _labels(records):
    return [scored_label(load_face(r)[1], 1, "strict", DEFAULT_LAYOUT) for r in records]


def _group(records, spec, cache, name):
    sets, _ = landmark_set_table(records, VoteSpec(), f"{cache}/sets-{name}.npz",
                                 progress=False)
    return Faces(records, sets, spec.offset)


def study(data, cache, test=True, log=print):
    spec = load_model(model_path(DEFAULT)).votes
    splits = split_dataset(data)
    train = _group(splits.train, spec, cache, "train")
    val = _group(splits.validation, spec, cache, "validation")
    groups = {"fit (training) faces": train, "validation faces": val}
    test_faces = _group(splits.test, spec, cache, "test")   # diagnosis only
    groups["test crops (diagnosis only)"] = test_faces
    res = {"offset": list(spec.offset), "n_train": len(train.records),
           "n_train_used": len(training_faces(train)),
           "residuals": residual_table(groups), "validation": {}}
    log(f"brow_refine: residuals {res['residuals']}")
    sampler = Sampler()
    labels = _labels(val.records)
    res["validation"]["shipped"] = score(val, lambda i: val.sets[i][:, BROWS], labels)
    log(f"brow_refine: shipped {res['validation']['shipped']}")
    fitted = {}
    for cfg in CONFIGS:
        stages = train_cascade(cfg, train, sampler, log)
        diffs = cfg["kind"] == "forest"
        fitted[cfg["name"]] = (stages, diffs, False)
        fitted[cfg["name"] + ", at the median set"] = (stages, diffs, True)
        res["validation"][cfg["name"]] = score(
            val, lambda i: refine(stages, val, sampler, i, diffs), labels)
        log(f"brow_refine: {cfg['name']}: {res['validation'][cfg['name']]}")
        name = cfg["name"] + ", at the median set"
        res["validation"][name] = score(
            val, lambda i: refine(stages, val, sampler, i, diffs, True), labels)
        log(f"brow_refine: {name}: {res['validation'][name]}")
    res["cross_validated"] = [cross_validated(c, train, sampler) for c in CONFIGS[:3:2]]
    log(f"brow_refine: cross-validated on training faces {res['cross_validated']}")
    res["validation"]["human brow points (ceiling)"] = score(
        val, lambda i: np.broadcast_to(val.human[i][BROWS], val.sets[i][:, BROWS].shape), labels)
    best = max(fitted, key=lambda n: res["validation"][n]["mean_jaccard"])
    gain = res["validation"][best]["mean_jaccard"] - res["validation"]["shipped"]["mean_jaccard"]
    res["chosen"] = {"name": best, "gain": round(gain, 2)}
    if test and gain > 0.3:
        stages, diffs, at_median = fitted[best]
        tl = _labels(test_faces.records)
        res["test"] = {"shipped": score(test_faces, lambda i: test_faces.sets[i][:, BROWS], tl),
                       best: score(test_faces,
                                   lambda i: refine(stages, test_faces, sampler, i, diffs,
                                                          at_median), tl)}
    return res


def _row(name, s):
    return (f"| {name} | **{s['mean_jaccard']:.2f}** | {s['jaccard'][6]:.1f} | "
            f"{s['jaccard'][7]:.1f} | {s['brow_error_px']:.2f} | "
            f"{s['brow_error_median_set_px']:.2f} |")


def report(res):
    lines = [f"Brow refinement of the landmark votes (`python -m studies.brow_refine`): "
             f"trained on the training split ({res['n_train']} faces, {res['n_train_used']} "
             f"used), offset {tuple(res['offset'])} px.",
             "", "Brow landmark error of the shipped sets (mean over sets and brow points):", "",
             "| faces | n | error (px) | error (IOD) | median over faces (IOD) | "
             "median IOD (px) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in res["residuals"].items():
        lines.append(f"| {name} | {r['n_faces']} | {r['brow_error_px']:.2f} | "
                     f"{r['brow_error_iod']:.4f} | {r['median_brow_error_iod']:.4f} | "
                     f"{r['median_iod_px']:.1f} |")
    head = ("| sets | class average | left brow | right brow | brow error per set (px) | "
            "brow error of median set (px) |")
    rule = "| --- | ---: | ---: | ---: | ---: | ---: |"
    lines += ["", "Validation faces (100, strict mode, every pixel):", "", head, rule]
    lines += [_row(n, s) for n, s in res["validation"].items()]
    lines += ["", "Brow error (px, every set) on training faces held out of a 2-fold fit "
              "(faces with the median set's brow error under "
              f"{OUTLIER_IOD} IOD):", "", "| regressor | faces | sets | refined |",
              "| --- | ---: | ---: | ---: |"]
    lines += [f"| {c['name']} | {c['n_faces']} | {c['brow_error_px']:.3f} | "
              f"{c['refined_brow_error_px']:.3f} |" for c in res["cross_validated"]]
    lines += ["", f"Chosen on validation: {res['chosen']['name']} "
              f"({res['chosen']['gain']:+.2f} class-average points)."]
    if "test" in res:
        lines += ["", "**Test crops, scored once with the chosen variant (not used for "
                  "choosing):**", "", head, rule]
        lines += [_row(n, s) for n, s in res["test"].items()]
    else:
        lines += ["", "The gain is not above 0.3 points: the test crops were not scored."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m studies.brow_refine",
                                description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "faces300w"))
    p.add_argument("--cache", default="/tmp/brows", help="folder of the landmark-set tables")
    p.add_argument("--out", default=str(ROOT / "reports" / "landmarks" / "brow-refine"))
    p.add_argument("--no-test", action="store_true", help="never score the test crops")
    args = p.parse_args(argv)
    res = study(args.data, args.cache, test=not args.no_test)
    write_json_atomic(args.out + ".json", res, indent=1, sort_keys=True)
    write_text_atomic(args.out + ".md", report(res))
    print(report(res))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
