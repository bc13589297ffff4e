"""``facesegment train --kind KIND --windows FILE.h5 --out models/NAME``: grow a forest."""

import sys
import time
from pathlib import Path

from ..bounds import arg_type
from ..data.imageio import IMAGE_EXTENSIONS
from ..data.windows import read_windows
from ..errors import DataError, FaceSegmentError
from ..evaluation.calibrate import choose_rule, held_out_records
from ..forest.params import COMMON_CONSTRAINTS, InvalidParameterError, constraints_of
from ..forest import registry
from ..forest.registry import get_kind
from ..limits import read_text_file
from ..modelio.model import Model, check_model_output, save_model
from ..parallel import default_workers
from ._common import add_parallel_arguments, nonneg_int, positive_int, seed_int
from ._estimator_options import add_estimator_options, kind_options
from .extract import resolve_data_dir

HELP = "train a forest of any registered kind on a windows file and save the model"
_DESCRIPTION = """\
Grow a decision forest on the class-balanced windows of an extraction file
(`facesegment extract`) and write a self-describing model folder
(model.json + forest.h5: kind, parameters, classes, sampling factors for the
prior reweighting, normalisation, provenance of the windows, format version,
training time). The windows are read as uint8 (never copied to float).

Kinds (the table of forest kinds, facesegment.forest.registry), with the
options of their own:
{kinds}

The estimator options are generated from each estimator's table of parameter
constraints (facesegment.forest.params): options a kind does not use are
refused; options not given take the estimator's defaults, so the library and
the command line agree.

Each tree draws --max-samples windows from the file (with replacement unless
--no-bootstrap). Trees grow in parallel on --workers local threads or on a Dask
cluster (--scheduler); the model is identical for a given --seed whatever the
number of workers. Progress (nodes, depth, seconds per tree, ETA) goes to
stderr. An existing model at --out is replaced atomically; --out is checked
before training (writable; a new folder, an empty one or a model folder).

After training, the model's decision rule (the prior-reweighting alpha, and
the smoothing sigma with --sigmas) is chosen on labelled faces that gave no
windows (--calibrate; by default the training images of the same data folder
that gave none, i.e. the validation images `facesegment extract --split
train` left out; 20 of them on a 3x3 pixel grid, as the pipeline does) and stored in the model: `segment`,
`evaluate` and facesegment.segment apply it. Without such faces the command
says so and stores no rule.

examples:
  facesegment train --kind axis --trees 16 --windows data/windows/train.h5 --out models/axis-16
  facesegment train --kind two-probe --trees 16 --pairs 400 --windows data/windows/train.h5 --out models/tp-16
  facesegment train --kind co2 --trees 16 --max-depth 20 --max-samples 64000 \\
      --windows data/windows/train.h5 --out models/co2-16
  facesegment train --kind co2-best --pairs 400 --windows data/windows/train.h5 --out models/ours-16
  facesegment train --kind co2-sparse --max-nonzero 32 --weight-dtype int8 \\
      --windows data/windows/train.h5 --out models/sparse-16
  facesegment train --kind co2-pooled --pool 3 --windows data/windows/train.h5 --out models/pooled-16
  facesegment train --kind co2-nongreedy --refine-depth 6 --epochs 10 --eta 0.01 --init-nu 10 \\
      --max-depth 20 --windows data/windows/train.h5 --out models/ng-16
  facesegment train --kind ferns --depth 12 --test two-probe --windows data/windows/train.h5 --out models/ferns
"""


def _classify_kinds():
    return [k for k in registry.KINDS.values() if k.task == "classify"]


def _kinds_text():
    """One line per classifier kind, then its own (non-common) options."""
    lines = []
    for k in _classify_kinds():
        lines.append(f"  {k.name:<13} {k.description}")
        own = [flag for name, (flag, _) in kind_options(k).items()
               if name not in COMMON_CONSTRAINTS]
        if own:
            lines.append(f"  {'':<13} options: {', '.join(own)}")
    return "\n".join(lines)


def __getattr__(name):
    if name == "DESCRIPTION":  # the registry as it is now (rows may be registered at run time)
        return _DESCRIPTION.replace("{kinds}", _kinds_text())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def add_arguments(p):
    """Add the options of ``facesegment train`` to its sub-parser.

    The estimator options of every kind come from
    :func:`facesegment.commands._estimator_options.add_estimator_options`.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``train``.
    """
    names = [k.name for k in _classify_kinds()]
    p.add_argument("--kind", required=True, choices=names,
                   help="forest kind (see above): " + ", ".join(names))
    p.add_argument("--windows", required=True, metavar="FILE.h5",
                   help="windows file written by `facesegment extract`")
    p.add_argument("--out", "-o", required=True, metavar="DIR",
                   help="model folder to write, e.g. models/axis-16 (replaced if it exists)")
    p.set_defaults(_estimator_flags=add_estimator_options(p, _classify_kinds()))
    p.add_argument("--pool", type=positive_int, default=None, metavar="S",
                   help="read the means of the window's S x S boxes at stride S instead of "
                        "its values (S^2 fewer features; the model's layout records it; "
                        "default 1, or 3 for --kind co2-pooled)")
    p.add_argument("--exclude-images", metavar="FILE", default=None,
                   help="text file of image names (one per line) whose windows are left out, "
                        "e.g. validation images")
    p.add_argument("--calibrate", metavar="DIR", default="auto",
                   help="folder of labelled faces on which the model's decision rule "
                        "(alpha; sigma with --sigmas) is chosen and stored; faces whose windows "
                        "were trained on (by name, as the windows file records its sources) "
                        "are never used. 'auto' (default): the training images of the "
                        "windows' data folder that gave no windows (the validation images "
                        "`extract --split train` left out, those of --exclude-images); "
                        "'none': store no rule")
    p.add_argument("--calibrate-images", type=nonneg_int, default=20, metavar="N",
                   help="faces scored to choose the rule, drawn with --seed (0 = all; "
                        "default 20, as the pipeline)")
    p.add_argument("--calibrate-stride", type=positive_int, default=3, metavar="S",
                   help="score an S x S grid of their pixels (default 3, as the pipeline)")
    p.add_argument("--sigmas", type=arg_type("sigma", "--sigmas"), nargs="+", default=None, metavar="PX",
                   help="smoothing sigmas tried for the rule besides 0 (none), e.g. 1 2 "
                        "(default: no smoothing)")
    p.add_argument("--seed", type=seed_int, default=0,
                   help="random seed (default 0): same seed and windows -> identical model")
    add_parallel_arguments(p, "local threads growing trees in parallel (default: all cores)",
                           "no progress lines")


def read_names(path):
    """Image names from a text file: one per line, '#' comments, extensions dropped.

    The file must be a regular text file of bounded size (never a pipe or
    ``/dev/zero`` read until out of memory).

    Parameters
    ----------
    path : str or path-like
        The list of image names.

    Returns
    -------
    set of str
        The names, stripped; an image extension is removed.

    Raises
    ------
    DataError
        When the file cannot be read (see :func:`facesegment.limits.read_text_file`).
    """
    import os

    # a regular text file of bounded size (never a pipe or /dev/zero read until out of memory)
    lines = read_text_file(path, "list of image names",
                           "give a text file with one image name per line").splitlines()
    names = set()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            root, ext = os.path.splitext(line)
            names.add(root if ext.lower() in IMAGE_EXTENSIONS else line)
    return names


def build_estimator(args):
    """The unfitted estimator described by the parsed arguments.

    The chosen kind's options come from its class's constraints table
    (:mod:`facesegment.commands._estimator_options`); options not given keep
    the estimator's defaults.

    Parameters
    ----------
    args : argparse.Namespace
        ``train``'s parsed options (``kind``, ``seed``, ``workers``,
        ``scheduler``, ``quiet`` and the estimator options named in
        ``args._estimator_flags``).

    Returns
    -------
    estimator
        The kind's estimator, unfitted, with ``random_state``, ``n_jobs``,
        ``scheduler`` and ``verbose`` set from the options.

    Raises
    ------
    FaceSegmentError
        When an option given does not apply to the kind, or a value is out of
        the table's range (one line naming the option).
    """
    kind = get_kind(args.kind)
    mine = {flag: name for name, (flag, _) in kind_options(kind).items()}
    params, flags = {}, {"random_state": "--seed"}
    for dest, flag in args._estimator_flags.items():
        value = getattr(args, dest)
        if value is None:
            continue
        if flag not in mine:
            raise FaceSegmentError(f"{flag} does not apply to --kind {args.kind} "
                                   f"({kind.estimator}); drop it or choose another kind")
        params[mine[flag]] = value
        flags[mine[flag]] = flag
    params.update(random_state=args.seed, n_jobs=args.workers or default_workers(),
                  scheduler=args.scheduler, verbose=0 if args.quiet else 1)
    _check_bounds(kind, params, flags)
    return kind.make(**params)


def _check_bounds(kind, params, flags):
    """The estimator's constraints table (ranges and resource limits) checked before
    any work; a value out of range is one error line naming the option."""
    table = constraints_of(kind.estimator_class)
    for name, value in params.items():
        try:
            table[name].normalise(value)
        except (InvalidParameterError, ValueError) as exc:
            raise FaceSegmentError(f"{flags.get(name, name)} {value}: out of range for "
                                   f"--kind {kind.name}: it must be {exc}") from None


def check_windows(path, ws):
    """Refuse a windows file a model cannot be trained on, before any training.

    A file is refused for label ids outside its class names, and for classes
    with no windows or a sampling factor of 0 (a model trained on them would fail
    every image).

    Parameters
    ----------
    path : str or path-like
        The windows file, named in the message.
    ws : WindowSet
        Its contents (``y`` and ``meta`` are read).

    Raises
    ------
    DataError
        Naming ``path``, the bad ids or the classes without windows, and the fix.
    """
    import numpy as np

    y = ws.y
    names = list(ws.meta.class_names)
    if y.size and int(y.max()) >= len(names):
        bad = sorted(int(v) for v in np.unique(y[y >= len(names)]))
        raise DataError(path, f"has label ids {bad} but only {len(names)} class names "
                        f"({', '.join(names)})", "re-extract the windows from valid label maps")
    counts = np.bincount(y, minlength=len(names))
    sf = np.asarray(ws.meta.sampling_factors, dtype=np.float64)
    empty = [names[c] for c in range(len(names))
             if counts[c] == 0 or not np.isfinite(sf[c]) or sf[c] <= 0]
    if empty:
        raise DataError(path, f"has no windows (or a sampling factor of 0) for "
                        f"{', '.join(empty)}", "extract more windows (-n) so every class "
                        "gets some, or fix the labels")


def _read_windows(path):
    try:
        return read_windows(path, load=True)
    except OSError as exc:  # e.g. a damaged compressed chunk: "filter returned failure"
        raise DataError(path, f"cannot be read: {exc}", "the file is damaged; extract it "
                        "again with `facesegment extract`") from None


def _exclude(ws, X, y, list_path):
    """Drop the windows of the images named in ``list_path``; warn about names
    that match no image of the file."""
    import numpy as np

    names = read_names(list_path)
    sources = [str(s) for s in ws.meta.sources]
    unknown = sorted(names - set(sources))
    if unknown:
        print(f"train: warning: {len(unknown)} name(s) in {list_path} match no image of "
              f"the windows file: {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}",
              file=sys.stderr)
    drop = np.array([s in names for s in sources], dtype=bool)
    if not drop.any():
        return X, y, 0
    keep = ~drop[ws.image_index]
    return X[keep], y[keep], int((~keep).sum())


def _layout(args, ws):
    """The windows' layout, pooled by ``--pool`` (default: the kind's)."""
    import dataclasses

    pool = args.pool or get_kind(args.kind).pool
    base = ws.meta.layout
    if pool > base.window:
        raise FaceSegmentError(f"--pool {pool} is larger than the {base.window}x{base.window} "
                               "windows; use at most the window side")
    return base if pool == 1 else dataclasses.replace(base, pool=pool)


def check_calibrate(args):
    """Refuse a bad ``--calibrate`` folder before training.

    Parameters
    ----------
    args : argparse.Namespace
        ``train``'s parsed options (``calibrate``: "auto", "none" or a folder).

    Raises
    ------
    DataError
        When the folder does not exist, is not a folder, or is a dataset root
        (with ``train/``: its test faces must not choose the rule); exit 2.
    """
    if args.calibrate in ("auto", "none"):
        return

    if resolve_data_dir(args.calibrate) != Path(args.calibrate):   # (or: no such folder)
        raise DataError(args.calibrate, "is a dataset root (it has train/): its test faces "
                        "must not choose the rule", "give a folder of validation faces only, "
                        "or leave out --calibrate (auto: the training images that gave no "
                        "windows)")


def calibrate(model, meta, args):
    """Choose ``model``'s decision rule on faces held out of its windows and store it.

    The rule goes to ``model.rule`` and its scores to
    ``model.metrics["rule_selection"]``; without such faces a note says so and
    the model keeps no rule.  ``--calibrate none`` does nothing.

    Parameters
    ----------
    model : Model
        The trained model (modified in place).
    meta : WindowsMeta
        The windows file's metadata (which images gave windows).
    args : argparse.Namespace
        ``train``'s parsed options (``calibrate``, ``exclude_images``,
        ``calibrate_images``, ``calibrate_stride``, ``sigmas``, ``seed``,
        ``workers``, ``scheduler``, ``quiet``).
    """
    if args.calibrate == "none":
        return
    data = None if args.calibrate == "auto" else args.calibrate
    excluded = read_names(args.exclude_images) if args.exclude_images else ()
    records, note = held_out_records(meta, data, n_images=args.calibrate_images,
                                     seed=args.seed, excluded=excluded)
    if not records:
        print(f"train: note: no decision rule chosen ({note}); the model will be applied "
              "with alpha 1 (the paper's rule) until one is: give --calibrate DIR "
              "(labelled faces not used for the windows)", file=sys.stderr)
        return
    if not args.quiet:
        print(f"train: choosing the decision rule on {note}", file=sys.stderr)
    rule, record = choose_rule(model, records, sigmas=args.sigmas,
                               pixel_stride=args.calibrate_stride, workers=args.workers,
                               scheduler=args.scheduler, progress=not args.quiet,
                               desc="calibrate")
    model.rule = rule
    model.metrics["rule_selection"] = record | {"images": note}
    table = ", ".join(f"{a}: {v:.2f}" for a, v in record["validation_jaccard"].items())
    print(f"train: decision rule {rule.describe()} (validation Jaccard by alpha: {table})",
          file=sys.stderr)


def run(args):
    """Train a forest on a windows file and write its model folder.

    The output folder, ``--calibrate`` and the estimator options are checked
    before the windows are read; the decision rule is then chosen
    (:func:`calibrate`) and one summary line is printed.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment train`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0.

    Raises
    ------
    DataError
        One line naming the file and the fix: an output that may not be written,
        a damaged or unusable windows file, no windows left, ``--max-samples``
        above the windows without bootstrap.
    FaceSegmentError
        For options that do not apply or are out of range, or when training fails
        on the data.
    """
    check_model_output(args.out)  # before any training: --out must be writable
    check_calibrate(args)
    est = build_estimator(args)
    ws = _read_windows(args.windows)
    layout = _layout(args, ws)
    X, mean, std = ws.features(layout)
    y = ws.y
    check_windows(args.windows, ws)
    excluded = 0
    if args.exclude_images:
        X, y, excluded = _exclude(ws, X, y, args.exclude_images)
    if len(y) == 0:
        raise DataError(args.windows, "has no windows left to train on",
                        "extract more windows or exclude fewer images")
    n_max = est.max_samples
    if not est.bootstrap and isinstance(n_max, int) and n_max > len(y):
        raise DataError(args.windows, f"has {len(y)} windows, fewer than --max-samples {n_max} "
                        "without replacement", "lower --max-samples or drop --no-bootstrap")
    if not args.quiet:
        print(f"train: {args.kind}: {est.n_estimators} trees on {len(y)} windows from {args.windows}"
              + (f" ({excluded} excluded)" if excluded else ""), file=sys.stderr)
    t0 = time.perf_counter()
    try:
        if get_kind(args.kind).oblique:  # normalised as the windows (or box means) say
            est.fit(X, y, feature_mean=mean, feature_std=std)
        else:
            est.fit(X, y)
    except ValueError as exc:
        if isinstance(exc, DataError):
            raise

        raise FaceSegmentError(f"cannot train: {exc}") from exc
    fit_s = time.perf_counter() - t0
    prov = {"windows": str(args.windows), "n_windows_used": int(len(y)),
            "excluded_windows": excluded, "seed": args.seed}
    model = Model.from_estimator(est, args.kind, ws.meta, provenance=prov, layout=layout)
    model.metrics["fit_seconds"] = round(fit_s, 3)
    calibrate(model, ws.meta, args)
    path = save_model(model, args.out)
    a = model.arrays
    size = sum(f.stat().st_size for f in path.iterdir())
    print(f"wrote {path}: {a.n_trees} trees, {a.n_nodes} nodes, max depth {int(a.depth.max())}, "
          f"{a.weights.shape[0]} oblique, {size / 1e6:.1f} MB, trained in {fit_s:.1f} s")
    return 0
