"""Argument helpers shared by the subcommands."""

import argparse
import math


from ..atomic import OVERWRITE_FIX, check_output_path, check_writable_folder
from ..bounds import BOUNDS
from ..dense import default_beta, model_layout
from ..errors import DataError
from ..limits import (MAX_PIXEL_STRIDE, MAX_SEED, MAX_WINDOW_SIDE, MAX_WINDOWS,  # noqa: F401
                      MAX_WORKERS)
from ..models import resolve
from ..models.load import load_model
from ..reweight import check_factors
from ..rule import missing_rule_note, rule_of


def _int_at_least(text, low, expected, high=None):
    """``int(text)`` (``_`` and ``,`` separators allowed) if in ``low..high``, else an
    argparse error."""
    try:
        v = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        v = low - 1
    if v < low:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    if high is not None and v > high:
        raise argparse.ArgumentTypeError(f"expected {expected}, at most {high:,} (a resource "
                                         f"limit), got {text!r}")
    return v


def int_in(low, high, expected=None):
    """argparse type: an integer in ``low..high``.

    Parameters
    ----------
    low : int
        The smallest value allowed.
    high : int or None
        The largest value allowed (None: no upper bound).
    expected : str, optional
        What the error says is expected; default "a positive integer" (``low``
        1), "a non-negative integer" (``low`` 0) or "an integer >= low".

    Returns
    -------
    callable
        ``parse(text) -> int``; ``_`` and ``,`` separators are allowed.
    """
    expected = expected or ("a positive integer" if low == 1 else
                            "a non-negative integer" if low == 0 else f"an integer >= {low}")

    def parse(text):
        """``text`` as an integer in ``low..high``.

        Parameters
        ----------
        text : str
            The option's value (``_`` and ``,`` separators allowed).

        Returns
        -------
        int

        Raises
        ------
        argparse.ArgumentTypeError
            When ``text`` is not an integer in ``low..high``.
        """
        return _int_at_least(text, low, expected, high)

    parse.__name__ = f"int_in_{low}_{high}"
    return parse


def seed_int(text):
    """argparse type: a seed, an integer in 0..2**32-1 (``facesegment.limits.MAX_SEED``).

    Parameters
    ----------
    text : str
        The option's value (``_`` and ``,`` separators allowed).

    Returns
    -------
    int

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not an integer in that range.
    """
    return _int_at_least(text, 0, "a seed, an integer >= 0", MAX_SEED)


def positive_int(text):
    """argparse type: a positive integer, at most ``BOUNDS["count"]``'s upper bound.

    Parameters
    ----------
    text : str
        The option's value (``_`` and ``,`` separators allowed).

    Returns
    -------
    int

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not an integer in that range.
    """
    return _int_at_least(text, 1, "a positive integer", BOUNDS["count"].high)


def nonneg_int(text):
    """argparse type: an integer >= 0, at most ``BOUNDS["count"]``'s upper bound.

    Parameters
    ----------
    text : str
        The option's value (``_`` and ``,`` separators allowed).

    Returns
    -------
    int

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not an integer in that range.
    """
    return _int_at_least(text, 0, "a non-negative integer", BOUNDS["count"].high)


def _nonneg_number(text, meaning, name):
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0 ({meaning}), got {text!r}")
    bound = BOUNDS[name]
    if v > bound.high:
        raise argparse.ArgumentTypeError(f"expected {bound.describe()} ({meaning}; "
                                         f"{bound.reason}), got {text!r}")
    return v


def alpha_value(text):
    """argparse type: a prior-reweighting exponent (1: the paper's reweighting, 0: none).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not a finite number in ``0..BOUNDS["alpha"].high``.
    """
    return _nonneg_number(text, "1 = the paper's prior reweighting, 0 = none", "alpha")


def beta_value(text):
    """argparse type: the position prior's exponent beta (0: no position prior).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not a finite number in ``0..BOUNDS["beta"].high``.
    """
    return _nonneg_number(text, "beta, the exponent of the position prior (pos/pi)^beta; "
                                "0 = no position prior", "beta")


def sigma_value(text):
    """argparse type: the smoothing sigma of the class maps, in pixels (0: none).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not a finite number in ``0..BOUNDS["sigma"].high``.
    """
    return _nonneg_number(text, "sigma, the Gaussian blur of the class maps in pixels; "
                                "0 = none", "sigma")


def model_names(paths):
    """Unique names of model folders: the folder's name, ``NAME-i`` for a repeat.

    Parameters
    ----------
    paths : list of str
        Model folders in command-line order.

    Returns
    -------
    list of str
        One name per path; a name already taken by an earlier path gets the
        suffix ``-i`` (``i``: the path's position, then higher until unique),
        so outputs named after models never overwrite each other.
    """
    import os
    from pathlib import Path

    names = []
    for i, path in enumerate(paths):
        base = name = Path(os.path.abspath(path)).name
        k = i
        while name in names:
            name, k = f"{base}-{k}", k + 1
        names.append(name)
    return names


def check_output_folder(path, option):
    """Create the output folder ``path`` and make sure a file can be written in it.

    Parameters
    ----------
    path : str or path-like
        The output folder.
    option : str
        The command-line option that names it (e.g. ``"--out"``), for the fix.

    Raises
    ------
    DataError
        Naming the folder and ``option`` when it cannot be created or written.
    """
    check_writable_folder(path, "cannot write to the output folder",
                          f"choose a writable folder with {option}")


def add_overwrite_argument(p, what="the outputs"):
    """Add ``--overwrite``: let the command replace files facesegment did not write.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    what : str, default="the outputs"
        What may replace files, for the help text.
    """
    p.add_argument("--overwrite", action="store_true",
                   help=f"let {what} replace files that facesegment did not write (folders, "
                        "links, pipes and devices are never replaced)")


def check_outputs(paths, what="output", option=None):
    """Apply the output-path rule to every path in ``paths`` before any work starts.

    See :func:`facesegment.atomic.check_output_path`.

    Parameters
    ----------
    paths : iterable of str or path-like
        The files the command will write.
    what : str, default="output"
        What they are, for the message.
    option : str, optional
        The command-line option that names them, for the fix (None: the generic fix).

    Raises
    ------
    DataError
        One line naming the first path that may not be written and the fix.
    """
    fix = OVERWRITE_FIX if option is None else \
        f"give {option} another path, move the file away, or pass --overwrite to replace it"
    for path in paths:
        check_output_path(path, what, fix)


def add_parallel_arguments(p, workers_help="local worker threads (default: all cores)",
                           quiet_help="no progress line"):
    """Add ``--workers N``, ``--scheduler ADDRESS`` and ``--quiet/-q``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    workers_help : str, default="local worker threads (default: all cores)"
        Help text of ``--workers``.
    quiet_help : str, default="no progress line"
        Help text of ``--quiet``.
    """
    p.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=None, metavar="N",
                   help=workers_help)
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a Dask distributed scheduler (e.g. tcp://host:8786); "
                        "default: local threads")
    p.add_argument("--quiet", "-q", action="store_true", help=quiet_help)


def add_scoring_arguments(p):
    """Add ``--mode`` and ``--pixel-stride``: which pixels of the test faces are scored.

    They are those of ``facesegment.evaluation.scoring.evaluate`` (the pipeline's
    ``[evaluate]`` keys).

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    """
    p.add_argument("--mode", choices=("strict", "full"), default="strict",
                   help="strict = the paper's protocol: pixels within 15 px of the border "
                        "are not scored; full = every pixel (border windows padded by "
                        "reflection) (default strict)")
    p.add_argument("--pixel-stride", type=int_in(1, MAX_PIXEL_STRIDE), default=1, metavar="N",
                   help="score only the pixels of an N x N grid of each face (1 = every "
                        "pixel, the paper's protocol; the pipeline's default run uses 3) "
                        "(default 1)")


def add_test_face_arguments(p, model_help, split_help, seed_help, model_required=True):
    """Add ``--model M...``, ``--data DIR``, ``--labels DIR``, ``--split``, ``--seed``.

    The options that name the models and the labelled test faces (resolved by
    ``facesegment.commands.evaluate.test_records``) for `evaluate` and `figures`.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The command's parser.
    model_help, split_help, seed_help : str
        Help texts of ``--model``, ``--split`` and ``--seed``.
    model_required : bool, default=True
        Whether ``--model`` is required (False: the command checks itself that
        something is scored).
    """
    p.add_argument("--model", "-m", nargs="+", required=model_required, default=None,
                   metavar="MODEL", help=model_help)
    p.add_argument("--data", "-d", required=True, metavar="DIR",
                   help="dataset folder (with test/) or a folder of labelled faces")
    p.add_argument("--labels", metavar="DIR", default=None,
                   help="parallel tree of NAME_label.png (default: beside the images)")
    p.add_argument("--split", choices=("auto", "test", "all"), default="auto", help=split_help)
    p.add_argument("--seed", type=seed_int, default=0, help=seed_help)


def load_image_model(path):
    """Load a model for the commands that read face images (evaluate, figures, segment).

    It checks up front that it is a model of image windows those images can
    give: a tabular model, or one whose layout needs extra planes, is one
    DataError naming the folder (exit 2) instead of a failure per image.  A model
    that is not a forest over windows (landmark votes, the face mesh) is checked
    for what reading any face needs.

    Parameters
    ----------
    path : str
        A model folder, or the name of a shipped model.

    Returns
    -------
    Model

    Raises
    ------
    DataError
        When the model cannot be loaded, has no usable window layout, needs more
        planes than an image has, or has bad sampling factors.
    """
    model = load_model(resolve(path))     # a folder, or the name of a shipped model
    if not model.dense:   # landmark votes, the face mesh: their forests were checked on loading
        model.require(detect=False)       # what reading any face needs (the face mesh)
        return model
    fix = "give a model trained by `facesegment train` on a windows file of face images"
    try:
        layout = model_layout(model)
    except ValueError as exc:
        raise DataError(path, f"cannot segment images: {exc}", fix) from None
    if layout.channels not in (1, 3):
        raise DataError(path, f"needs {layout.describe()}, more planes than an image has "
                        "(extra planes such as probability maps are given with "
                        "facesegment.dense.predict_image(..., planes=))", fix)

    try:  # the model's fault, said once, rather than every image 'skipped'
        check_factors(model.sampling_factors, model.arrays.n_classes)
    except (TypeError, ValueError) as exc:
        raise DataError(path, f"model has bad sampling factors: {exc}",
                        "retrain the model, or restore its model.json") from None
    return model


def note_missing_rule(model, path, alpha):
    """Print (stderr) the one-line note for a model without a stored decision rule.

    Nothing is printed when ``alpha`` was given.

    Parameters
    ----------
    model : Model
        The loaded model.
    path : str
        Its folder or name, for the note.
    alpha : float or None
        ``--alpha`` as given (None: not given).

    Returns
    -------
    bool
        Whether the note was printed.
    """
    import sys

    if rule_of(model) is not None or alpha is not None:
        return False
    print(f"note: {path}: {missing_rule_note(model)}", file=sys.stderr)
    return True


def model_beta(model, path, beta):
    """The position prior's exponent to use: ``--beta``, or the model's selected one.

    Parameters
    ----------
    model : Model
        The loaded model.
    path : str
        Its folder or name, for the message.
    beta : float or None
        ``--beta`` as given (None: the model's selected one).

    Returns
    -------
    float

    Raises
    ------
    DataError
        Naming the model when ``beta > 0`` and it has no position prior.
    """
    if beta is None:
        return default_beta(model)
    if beta > 0 and getattr(model, "position", None) is None:
        raise DataError(path, f"has no position prior, so --beta {beta:g} cannot apply",
                        "leave out --beta (or give 0), or use a model trained with a "
                        "position prior (`make all`)")
    return float(beta)
