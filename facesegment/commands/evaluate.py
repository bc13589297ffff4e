"""``facesegment evaluate``: Jaccard scores of trained models on labelled test faces."""

import os
import sys
import time
from pathlib import Path
from ..atomic import write_json_atomic, write_text_atomic
from ..classes import CLASS_NAMES
from ..data.datasets import find_faces
from ..data.splits import split_dataset
from ..dense import default_alpha, default_sigma
from ..errors import DataError, FaceSegmentError
from ..evaluation.maps import evaluate_smoothed
from ..evaluation.metrics import markdown_table, summarize
from ..evaluation.scoring import evaluate, full_summary
from ..faces.aligned import PAD_FRACTION, aligned_counts, realign_records
from ..faces.crops import model_crop_rule
from ..faces.landmark_fit import evaluate_landmark_model
from ..faces.renderer import evaluate_renderer, landmark_table
from ._common import (add_overwrite_argument, add_parallel_arguments, add_scoring_arguments,
                      add_test_face_arguments, alpha_value, beta_value, check_output_folder,
                      check_outputs, load_image_model, model_beta, model_names, nonneg_int,
                      note_missing_rule, positive_int, sigma_value)

PROTOCOLS = ("crops", "detector")
#: Methods scored without a model (``--method``).
METHODS = ("landmarks",)

HELP = "score models on labelled test faces (per-class and class-average Jaccard)"
DESCRIPTION = """\
Score one or more trained models on labelled test faces with the paper's
protocol: dense prediction in strict mode (pixels within 15 px of the border
are not scored, nor pixels labelled 255), an 8x8 confusion matrix accumulated
over all test images, per-class Jaccard 100*tp/(tp+fp+fn), the class average
over the 8 classes, pixel accuracy, and each image's class-average Jaccard.
A class absent from both prediction and ground truth has no Jaccard (null) and
is left out of the average.  --mode full also scores the border; --pixel-stride
N scores an N x N grid of pixels (the pipeline's [evaluate] mode and
pixel_stride: the same options give the pipeline's test scores).  alpha, beta
and sigma default to the model's decision rule (chosen on validation images
and stored by `facesegment train` and the pipeline); a model without one is
scored at alpha 1, with a note.

Writes OUT/NAME.json (all numbers, per-image scores) and OUT/NAME.md per model
(NAME: the model's folder name; NAME-i for a later model whose folder has the
same name) and OUT/summary.md (one row per model), and prints the table.

--protocol detector scores detector-aligned crops instead of the test crops
as they are (which are cut around the human landmarks, so a model that uses
the position in the crop gets ground-truth alignment for free): each test
face is first re-cropped the way `facesegment segment` crops a photo (dlib
face detector and 68 predicted landmarks on the face image padded by 25% of
its side, then the model's crop rule: how the landmarks' box maps to its
training crops, measured on training faces), its label map redrawn from its
human landmarks (NAME.pts beside the image) mapped into the new crop, or, for a
face without a .pts or with --aligned-labels warp, warped with the same box by
nearest neighbour (pixels from outside the image are not scored either way),
and a face where no face is found is scored on its original label map as
predicted all background.
The re-cropped faces are cached in --aligned-dir (reused while the inputs are
unchanged); OUT/NAME.json records the protocol and the faces found and missed.

Test faces: DIR/test when DIR has train/ and test/ folders (faces300w);
otherwise the test split of DIR by person (--split test, as `facesegment
train` splits it) or every labelled face under DIR (--split all).

example:
  facesegment evaluate --model models/co2-16 --data ../shared/data/faces300w
  facesegment evaluate --model models/co2-16 --data ../shared/data/faces300w --protocol detector
  facesegment evaluate --method landmarks --data ../shared/data/faces300w

--method landmarks scores dlib's 68 predicted landmarks drawn as the label
polygons (no model, nothing trained: the same detection passes as `facesegment
label`, the most central face, no smoothing unless --sigma is given), beside
the models, with the same protocol; a face where dlib finds no face is scored
as all background.  On --protocol detector the landmarks are predicted on the
re-cropped faces.
"""


def add_arguments(p):
    """Add the options of ``facesegment evaluate`` to its sub-parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``evaluate``.
    """
    add_test_face_arguments(
        p, "model folder(s) written by `facesegment train`, or shipped model names",
        "which faces: auto = DIR/test if present else all labelled faces; "
        "test = the seeded by-person test split; all = every face (default auto)",
        "seed of the by-person split for --split test (default 0)", model_required=False)
    p.add_argument("--method", nargs="+", choices=METHODS, default=None, metavar="METHOD",
                   help="also score methods that need no model: landmarks = dlib's 68 "
                        "predicted landmarks drawn as the label polygons (the faces300w "
                        "labelling rule, what `facesegment label` writes); at least one of "
                        "--model and --method")
    p.add_argument("--landmarks-cache", metavar="FILE.npz", default=None,
                   help="--method landmarks: cache of the predicted landmarks, reused while "
                        "the faces are unchanged (default: TMPDIR/facesegment-landmarks/"
                        "DATA-<hash of the test faces>[-detector].npz)")
    p.add_argument("--alpha", type=alpha_value, default=None,
                   help="prior-reweighting exponent: p*s^-alpha (1 = paper, 0 = none; "
                        "default: the model's decision rule; a model without one: 1, "
                        "with a note)")
    p.add_argument("--beta", type=beta_value, default=None,
                   help="exponent of the model's position prior, p*s^-alpha*(pos/pi)^beta "
                        "(default: the model's selected beta; 0 = the forest alone)")
    p.add_argument("--sigma", type=sigma_value, default=None, metavar="PX",
                   help="also score the maps blurred with a Gaussian of PX pixels before "
                        "the argmax, reported under 'smoothed' (default: the model's "
                        "selected sigma; 0 = not scored)")
    p.add_argument("--sweep-alphas", type=alpha_value, nargs="*", default=None, metavar="A",
                   help="also score these alphas in the same pass (reported under 'sweep')")
    p.add_argument("--sweep-trees", type=positive_int, nargs="*", default=None, metavar="N",
                   help="also score forests of the first N trees (Figure 4), same pass; "
                        "N above the model's number of trees means all of them")
    p.add_argument("--sweep-depths", type=nonneg_int, nargs="*", default=None, metavar="D",
                   help="also score the trees truncated at depth D (Figure 4), same pass")
    add_scoring_arguments(p)
    p.add_argument("--protocol", choices=PROTOCOLS, default="crops",
                   help="crops = score the test crops as they are; detector = re-crop every "
                        "test face the way `segment` does (dlib face + 68 predicted landmarks), "
                        "redraw (or warp) its label map into it, score faces without a "
                        "detected face as all background (default crops)")
    p.add_argument("--aligned-labels", choices=("landmarks", "warp"), default="landmarks",
                   help="--protocol detector's label maps: landmarks = drawn from the face's "
                        "human landmarks (NAME.pts) mapped into the new crop, warped when a "
                        "face has no .pts; warp = the label map warped by nearest neighbour "
                        "(default landmarks)")
    p.add_argument("--aligned-dir", metavar="DIR", default=None,
                   help="cache of the re-cropped faces of --protocol detector, reused while "
                        "the inputs are unchanged (default: "
                        "TMPDIR/facesegment-aligned/DATA-<hash of the test faces>; a model "
                        "with a measured crop rule uses DIR-rule-K_OX_OY; with "
                        "--scheduler give a folder the Dask workers can read)")
    p.add_argument("--limit", type=positive_int, default=None, metavar="N",
                   help="score only the first N test faces (quick checks)")
    p.add_argument("--out", "-o", default="reports/eval", metavar="DIR",
                   help="folder for NAME.json / NAME.md / summary.md (default reports/eval)")
    add_overwrite_argument(p, "--out and --landmarks-cache")
    add_parallel_arguments(p)


def test_records(data, labels=None, split="auto", seed=0, limit=None):
    """The labelled faces to score (see DESCRIPTION).

    Parameters
    ----------
    data : str or path-like
        The dataset folder (with ``test/``) or a folder of labelled faces.
    labels : str or path-like, optional
        Parallel tree of ``NAME_label.png`` (None: beside the images).
    split : {"auto", "test", "all"}, default="auto"
        auto: ``data/test`` when it exists, else every labelled face; test: the
        seeded by-person test split (the one ``facesegment train`` leaves out);
        all: every labelled face under ``data``.
    seed : int, default=0
        Seed of the by-person split.
    limit : int, optional
        Keep only the first ``limit`` faces.

    Returns
    -------
    list of FaceRecord
        The faces, in the order :func:`facesegment.data.datasets.find_faces` gives.

    Raises
    ------
    DataError
        When ``data`` is not a folder, cannot be split, or holds no test faces.
    FaceSegmentError
        When ``limit`` is not a positive integer.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise FaceSegmentError(f"--limit {limit!r} must be a positive integer "
                               "(or leave it out to score every test face)")
    data = Path(data)
    if not data.is_dir():
        raise DataError(data, "is not a folder", "give the dataset folder, e.g. "
                        "../shared/data/faces300w")
    if split == "auto" and (data / "test").is_dir():
        recs = find_faces(data / "test", Path(labels) / "test" if labels else None)
    elif split == "test":
        recs = _test_split(data, labels, seed)
    else:
        recs = find_faces(data, labels)
    if not recs:
        raise DataError(data, f"has no labelled test faces (--split {split})",
                        "label the faces or choose another --split")
    return recs if limit is None else recs[:limit]


def _test_split(data, labels, seed):
    """The by-person test split of ``data`` (the one `facesegment train` leaves out).

    The test split does not depend on the number of validation images, so none
    are asked for: a folder with few training images still has a test split.
    """
    try:
        return split_dataset(data, labels, seed=seed, n_validation=0).test
    except ValueError as exc:
        if isinstance(exc, FaceSegmentError):
            raise
        raise DataError(data, f"cannot split the faces by person ({exc})",
                        "use --split all, or a dataset with train/ and test/ folders") from exc


def _beta_text(beta):
    return f", position prior beta={beta:g}" if beta else ""


def run(args):
    """Score the models and methods on the test faces and write the reports.

    Every input and output is checked before any scoring.  Each model writes
    ``OUT/NAME.json`` and ``OUT/NAME.md``, each ``--method`` ``OUT/METHOD.json``
    and ``.md``; ``OUT/summary.md`` holds one row per score and is printed.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment evaluate`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0.

    Raises
    ------
    FaceSegmentError
        When neither ``--model`` nor ``--method`` is given.
    DataError
        One line naming the file and the fix: no test faces, an output that may
        not be written, a model that cannot score images, ``--beta`` for a model
        without a position prior.
    """
    if not args.model and not getattr(args, "method", None):
        raise FaceSegmentError("nothing to score: give --model FOLDER (a trained model) "
                               "and/or --method landmarks")
    args.model = args.model or []
    records = test_records(args.data, args.labels, args.split, args.seed, args.limit)
    check_output_folder(args.out, "--out")  # before hours of scoring
    names = model_names(args.model) + list(getattr(args, "method", None) or ())
    check_outputs([Path(args.out) / f"{n}{ext}" for n in names for ext in (".json", ".md")]
                  + [Path(args.out) / "summary.md"], "report", "--out")
    if getattr(args, "landmarks_cache", None):
        check_outputs([args.landmarks_cache], "landmarks cache", "--landmarks-cache")
    models = [load_image_model(path) for path in args.model]  # every model checked first
    betas = [model_beta(m, path, args.beta) for path, m in zip(args.model, models)]
    for path, m in zip(args.model, models):
        note_missing_rule(m, path, args.alpha)
    crops, detector, per_rule = records, None, {}
    rows = {}
    for path, name, model, beta in zip(args.model, model_names(args.model), models, betas):
        if getattr(args, "protocol", "crops") == "detector":  # after the cheap checks
            rule = model_crop_rule(model)   # each model's faces cut into its own frame
            if rule not in per_rule:
                per_rule[rule] = _detector_records(crops, args, rule)
            records, detector = per_rule[rule]
        if name != Path(os.path.abspath(path)).name:
            print(f"evaluate: {path} is named {name!r} in the outputs (another model "
                  "has the same folder name)", file=sys.stderr)
        if not model.dense:   # landmark votes, the face mesh: the model reads each crop
            rows.update(_score_face_model(model, path, name, records, detector, args))
            continue
        alpha = default_alpha(model) if args.alpha is None else args.alpha
        t0 = time.perf_counter()
        res = evaluate(model, records, alphas=[alpha] + list(args.sweep_alphas or []),
                       sweep_trees=_sweep_trees(args.sweep_trees, model),
                       depths=args.sweep_depths, mode=args.mode, pixel_stride=args.pixel_stride,
                       scheduler=args.scheduler, workers=args.workers, beta=beta,
                       progress=not args.quiet, desc=f"evaluate {name}")
        sigma = default_sigma(model) if args.sigma is None else args.sigma
        if sigma > 0:
            res["smoothed"] = _smoothed(model, records, alpha, beta, sigma, args, name)
        seconds = time.perf_counter() - t0
        res.update(kind=model.kind, alpha=alpha, mode=args.mode, model=str(path),
                   data=str(args.data), seconds=round(seconds, 2),
                   seconds_per_image=round(seconds / max(1, res["n_images"]), 4),
                   class_names=list(model.class_names),
                   summary=full_summary(res, model.class_names),
                   protocol="detector" if detector else "crops")
        if detector:
            res["detector"] = detector
        table = markdown_table({name: res["summary"]}, f"{name}: {res['n_images']} images, "
                               f"alpha={alpha:g}{_beta_text(beta)}, "
                               f"{_protocol(args.mode, args.pixel_stride)}"
                               f"{_detector_text(detector)}")
        write_json_atomic(Path(args.out) / f"{name}.json", res)
        write_text_atomic(Path(args.out) / f"{name}.md", table)
        rows[f"{name} (alpha={alpha:g}{_beta_text(beta)})"] = res["summary"]
        if sigma > 0:
            rows[f"{name} (alpha={alpha:g}{_beta_text(beta)}, sigma={sigma:g})"] = \
                res["smoothed"]["summary"]
    for method in getattr(args, "method", None) or ():
        if getattr(args, "protocol", "crops") == "detector":
            if None not in per_rule:   # the landmark box as it is: no model's rule
                per_rule[None] = _detector_records(crops, args, None)
            records, detector = per_rule[None]
        rows.update(_score_method(method, records, detector, args))
    table = markdown_table(rows, f"Test faces: {len(records)} from {args.data}"
                                 f"{_detector_text(detector)}")
    write_text_atomic(Path(args.out) / "summary.md", table)
    print(table)
    print(f"wrote {args.out}/summary.md and one NAME.json / NAME.md per model")
    return 0


def _score_face_model(model, path, name, records, detector, args):
    """Score a model that reads each crop itself (``model.dense`` false: landmark
    votes, the face mesh; :func:`facesegment.faces.landmark_fit.evaluate_landmark_model`):
    writes OUT/NAME.json and .md and returns its summary-table row."""
    t0 = time.perf_counter()
    res = evaluate_landmark_model(model, records, mode=args.mode, pixel_stride=args.pixel_stride,
                                  progress=not args.quiet, desc=f"evaluate {name}")
    seconds = time.perf_counter() - t0
    res.update(kind=model.kind, mode=args.mode, model=str(path), data=str(args.data),
               seconds=round(seconds, 2),
               seconds_per_image=round(seconds / max(1, res["n_images"]), 4),
               class_names=list(model.class_names),
               summary=summarize(res["confusion"], model.class_names),
               protocol="detector" if detector else "crops")
    if detector:
        res["detector"] = detector
    label = f"{name} ({model.kind})"
    text = markdown_table({label: res["summary"]},
                          f"{name}: {res['n_images']} images, landmarks found on "
                          f"{res['n_found']}, {_protocol(args.mode, args.pixel_stride)}"
                          f"{_detector_text(detector)}")
    write_json_atomic(Path(args.out) / f"{name}.json", res)
    write_text_atomic(Path(args.out) / f"{name}.md", text)
    return {label: res["summary"]}


def _score_method(method, records, detector, args):
    """Score a method without a model (``--method``): writes OUT/METHOD.json and
    .md and returns its summary-table rows."""
    cache = args.landmarks_cache or default_landmarks_cache(args.data, records, detector)
    t0 = time.perf_counter()
    table = landmark_table(records, cache, progress=not args.quiet,
                           desc=f"landmarks ({len(records)} faces)")
    sigma = float(args.sigma or 0.0)
    sigmas = [0.0] + ([sigma] if sigma > 0 else [])
    res = evaluate_renderer(records, table, sigmas=sigmas, mode=args.mode,
                            pixel_stride=args.pixel_stride, progress=not args.quiet,
                            desc=f"evaluate {method}")
    seconds = time.perf_counter() - t0
    passes = {p: table.passes.count(p) for p in sorted(set(table.passes)) if p}
    res.update(kind=method, mode=args.mode, data=str(args.data), seconds=round(seconds, 2),
               landmarks_cache=str(cache), detection_passes=passes,
               class_names=list(CLASS_NAMES),
               summary=summarize(res["sigma"]["0.0"]["confusion"], CLASS_NAMES),
               protocol="detector" if detector else "crops")
    if detector:
        res["detector"] = detector
    label = f"{method} (dlib's 68 predicted landmarks -> label polygons)"
    rows = {label: res["summary"]}
    if sigma > 0:
        rows[f"{label}, sigma={sigma:g}"] = summarize(res["sigma"][repr(sigma)]["confusion"],
                                                      CLASS_NAMES)
    text = markdown_table(rows, f"{method}: {res['n_images']} images, landmarks found on "
                                f"{res['n_found']}, {_protocol(args.mode, args.pixel_stride)}"
                                f"{_detector_text(detector)}")
    write_json_atomic(Path(args.out) / f"{method}.json", res)
    write_text_atomic(Path(args.out) / f"{method}.md", text)
    return rows


def default_landmarks_cache(data, records, detector=None):
    """Where ``--method landmarks`` caches the predicted landmarks by default.

    The cache lies beside :func:`default_aligned_dir`'s folders, one ``.npz``
    per set of faces.

    Parameters
    ----------
    data : str or path-like
        The dataset folder given.
    records : list of FaceRecord
        The faces scored.
    detector : dict, optional
        The detector-aligned protocol's entry (truthy: ``-detector`` is appended
        to the name).

    Returns
    -------
    pathlib.Path
        ``TMPDIR/facesegment-landmarks/<data folder name>-<hash>[-detector].npz``.
    """
    base = default_aligned_dir(data, records)
    tail = "-detector" if detector else ""
    return base.parent.parent / "facesegment-landmarks" / f"{base.name}{tail}.npz"


def _smoothed(model, records, alpha, beta, sigma, args, name):
    """The scores of the maps smoothed with ``sigma`` (evaluate's protocol)."""
    r = evaluate_smoothed(model, records, alpha=alpha, beta=beta, sigmas=[sigma],
                          mode=args.mode, pixel_stride=args.pixel_stride,
                          scheduler=args.scheduler, workers=args.workers,
                          progress=not args.quiet, desc=f"smoothed {name}")
    one = r["sigma"][repr(float(sigma))]
    return {"sigma": sigma, "mean_jaccard": one["mean_jaccard"],
            "pixel_accuracy": one["pixel_accuracy"], "jaccard": one["jaccard"],
            "summary": summarize(one["confusion"], model.class_names)}


def default_aligned_dir(data, records):
    """Where ``--protocol detector`` caches the re-cropped faces by default.

    The hash is over the test faces' names and absolute paths (one folder per
    set of test faces); the folder is not beside ``--out``, which may be a folder
    under version control.

    Parameters
    ----------
    data : str or path-like
        The dataset folder given.
    records : list of FaceRecord
        The test faces.

    Returns
    -------
    pathlib.Path
        ``TMPDIR/facesegment-aligned/<data folder name>-<hash>`` (12 hex digits).
    """
    import hashlib
    import json
    import tempfile

    text = json.dumps([[r.name, os.path.abspath(r.image), os.path.abspath(r.label or "")]
                       for r in records])
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    name = Path(os.path.abspath(data)).name or "data"
    return Path(tempfile.gettempdir()) / "facesegment-aligned" / f"{name}-{digest}"


def _detector_records(records, args, crop_rule=None):
    """The detector-aligned records to score and the JSON's ``detector`` entry, the
    faces cut by ``crop_rule`` (a model's, :func:`facesegment.faces.segment.model_crop_rule`)."""
    folder = Path(args.aligned_dir) if args.aligned_dir else default_aligned_dir(
        args.data, records)
    labels = getattr(args, "aligned_labels", "landmarks")
    if crop_rule is not None:  # one folder per rule (the cache key would refuse a mix)
        folder = folder.parent / (folder.name + "-rule-" + "_".join(f"{v:g}" for v in crop_rule))
    if labels != "landmarks":
        folder = folder.parent / f"{folder.name}-{labels}"
    aligned = realign_records(records, folder, workers=args.workers,
                              progress=not args.quiet, crop_rule=crop_rule, labels=labels)
    n_found, n_missed = aligned_counts(aligned)
    print(f"evaluate: detector-aligned faces in {folder}: {n_found} of {len(aligned)} found, "
          f"{n_missed} missed (scored as all background)", file=sys.stderr)
    return aligned, {"n_faces": len(aligned), "n_found": n_found, "n_missed": n_missed,
                     "missed": sorted(r.name for r in aligned if r.missed),
                     "pad_fraction": PAD_FRACTION, "choose": "central", "labels": labels,
                     "crop_rule": None if crop_rule is None else list(crop_rule)}


def _detector_text(detector):
    """The table titles' words for the detector-aligned protocol ("" for crops)."""
    if not detector:
        return ""
    return (f", detector-aligned crops ({detector['n_found']} of {detector['n_faces']} "
            "faces found; missed faces scored as all background)")


def _protocol(mode, stride):
    """The scored pixels, in words (table titles)."""
    text = ("strict mode (15-px border and label 255 excluded)" if mode == "strict"
            else "full mode (every pixel but label 255)")
    return text + (f", pixels of a {stride}x{stride} grid" if stride > 1 else "")


def _sweep_trees(values, model):
    """``--sweep-trees`` for one model: counts above its number of trees mean all of them."""
    if values is None:
        return None
    return sorted({min(int(v), model.arrays.n_trees) for v in values})
