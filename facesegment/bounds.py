"""The one table of bounds on the numbers a user can pass.

Every number that reaches facesegment from outside (a command-line option, an
argument of the Python API, a field of ``model.json`` / ``cascade.json``, an
environment variable) has a lower and an upper bound in :data:`BOUNDS`,
chosen from what the algorithm can use; it is checked once, where it enters,
by :func:`check` (or :func:`arg_type` for the command line, :func:`env_number`
for the environment), and the error names the number and its bounds.  The
estimators' own parameters are bounded in :mod:`facesegment.forest.params`.
:func:`markdown_table` renders the table for docs/reliability.md.
"""

import math
import os
import sys
from dataclasses import dataclass

from .errors import DataError

#: Largest seed (the command line's ``--seed``, ``random_state``).
MAX_SEED = 2 ** 32 - 1
#: Upper bounds of counts that are not estimator parameters (those are in
#: ``facesegment.forest.params``): beyond them a run would need more memory or
#: time than any machine has, so they are one error line instead.
MAX_WORKERS = 4096           # --workers
MAX_WINDOWS = 100_000_000    # extract --windows (about 290 GB of 31x31 RGB windows)
MAX_PIXEL_STRIDE = 1000      # --pixel-stride, the pipeline's pixel_stride
MAX_WINDOW_SIDE = 255        # extract --window
#: Bytes read from a model's JSON file (model.json, cascade.json...) at most (8 MiB).
MAX_JSON_BYTES = 8 << 20

#: Largest smoothing sigma (pixels): the Gaussian's kernel spans about 6 sigma,
#: so beyond a face crop's side (about 250 px) the blur is flat and only slower.
MAX_SIGMA = 256.0
#: Largest prior-reweighting and position-prior exponent: any finite one (the
#: reweighting computes huge exponents without overflow).
MAX_EXPONENT = sys.float_info.max
#: Sampling factors (class share among windows / among pixels) a model may record.
MIN_FACTOR, MAX_FACTOR = 1e-12, 1e12


@dataclass(frozen=True)
class Bound:
    """The bounds of one number.

    Attributes
    ----------
    name : str
        The number's name, as the error says it.
    low, high : float
        The smallest and largest value allowed (both included unless ``low_open``).
    integer : bool
        Whether only integers are allowed.
    where : str
        Where a user passes it.
    reason : str
        Why the upper bound is what it is.
    low_open : bool
        ``low`` itself is not allowed (``> low``).
    """

    name: str
    low: float
    high: float
    integer: bool
    where: str
    reason: str
    low_open: bool = False

    def describe(self):
        """``"an integer in 1..4,096"``, ``"a number > 0 and <= 3,600"``..."""
        kind = "an integer" if self.integer else "a number"
        if self.low_open:
            return f"{kind} > {_num(self.low)} and <= {_num(self.high)}"
        return f"{kind} in {_num(self.low)}..{_num(self.high)}"

    def parse(self, value):
        """``value`` as an int or float within the bounds.

        Parameters
        ----------
        value : number or str
            A number, or text such as ``"1_000"`` or ``"1,000"`` (underscores and
            commas are dropped).  A bool is never a number.

        Returns
        -------
        int or float
            An int when :attr:`integer`, else a float (always finite).

        Raises
        ------
        ValueError
            Naming the number, the value and its bounds, when the value is not a
            (finite, for ``integer`` whole) number or lies outside the bounds.
        """
        v = _as_number(value, self.integer)
        if v is None or not (self.low < v if self.low_open else self.low <= v) \
                or v > self.high:
            raise ValueError(f"{self.name}={_show(value)} is out of bounds: expected "
                             f"{self.describe()} ({self.reason})")
        return v


def _num(x):
    if isinstance(x, float) and (abs(x) >= 1e7 or 0 < abs(x) < 1e-3):
        return f"{x:g}"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _show(value):
    text = repr(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _as_number(value, integer):
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip().replace("_", "").replace(",", "")
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                return None
            value = f
    try:
        if integer:
            if isinstance(value, float) or not float(value).is_integer():
                f = float(value)
                return int(f) if math.isfinite(f) and f.is_integer() else None
            return int(value)
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


_GENERIC = "more than any machine can process"
BOUNDS = {b.name: b for b in (
    Bound("seed", 0, MAX_SEED, True, "--seed; random_state=; the pipeline's seed",
          "NumPy's and scikit-learn's seeds are 32-bit"),
    Bound("workers", 1, MAX_WORKERS, True, "--workers; n_workers=, workers=", _GENERIC),
    Bound("windows", 8, MAX_WINDOWS, True, "extract --windows",
          "about 290 GB of 31x31 RGB windows"),
    Bound("window", 1, MAX_WINDOW_SIDE, True, "extract --window (odd)",
          "the window's offsets are stored as 8-bit values"),
    Bound("pixel_stride", 1, MAX_PIXEL_STRIDE, True, "--pixel-stride; pixel_stride=",
          "a coarser grid scores no pixel of a face"),
    Bound("detect_size", 0, 65536, True, "segment/label --detect-size; detect_size=",
          "four times the side of the largest image allowed"),
    Bound("every", 1, 1_000_000, True, "segment --every; every=",
          "a million frames is over nine hours of video at 30 frames/s"),
    Bound("smooth", 0, 100, True, "segment --smooth; smooth=",
          "the frames of the window are held in memory (201 at most)"),
    Bound("alpha", 0, MAX_EXPONENT, False,
          "--alpha, --sweep-alphas; alpha=; model.json rule.alpha, metrics.alpha",
          "any finite exponent: the reweighting computes it without overflow"),
    Bound("beta", 0, MAX_EXPONENT, False, "--beta; beta=; model.json rule.beta, metrics.beta",
          "any finite exponent"),
    Bound("sigma", 0, MAX_SIGMA, False,
          "--sigma, train --sigmas; sigma=, sigmas=; model.json rule.sigma, metrics.sigma",
          "the blur spans 6 sigma: beyond a face crop's side it is flat and only slower"),
    Bound("sampling_factors", MIN_FACTOR, MAX_FACTOR, False,
          "model.json sampling_factors (each)",
          "a class share among windows over its share among pixels; beyond, "
          "reweighting overflows"),
    Bound("upsample", 0, 4, True, "label --upsample; upsample=",
          "each step doubles the side (4: 256 times the pixels)"),
    Bound("threshold", -10, 0, False, "label --threshold; threshold=",
          "dlib's detector scores lie within a few units of 0"),
    Bound("timeout", 0, 86400, False, "data lfw --timeout", "one day", low_open=True),
    Bound("legend_scale", 0.2, 4, False, "classes --scale",
          "the key's text from barely readable to four times the default size"),
    Bound("test_fraction", 0, 1, False, "data splits / extract --test-fraction",
          "a share of the images", low_open=True),
    Bound("count", 0, 1_000_000_000, True,
          "every other count option: --limit, --random-rows, --calibrate-images, "
          "--calibrate-stride, --sweep-trees, --sweep-depths, --depth-trees, --pool, "
          "--validation, the estimators' options", _GENERIC),
    Bound("FACESEGMENT_MAX_IMAGE_PIXELS", 1, 1 << 34, True,
          "environment variable (default 2**28)",
          "a decoded RGB image of 2**34 pixels needs 48 GiB"),
    Bound("json_bytes", 0, MAX_JSON_BYTES, True,
          "size of model.json, cascade.json, mesh-model.json, landmark-model.json",
          "the shipped ones are a few kB; a larger file is not read"),
)}


def check(name, value, where=None, fix=None):
    """``value`` checked against ``BOUNDS[name]``; the parsed int or float.

    Parameters
    ----------
    name : str
        A key of :data:`BOUNDS`.
    value : number or str
        The value given.
    where : str or path, optional
        The file (or option) it came from; the error is then a
        :class:`~facesegment.errors.DataError` naming it (still a ValueError).
    fix : str, optional
        What to do, for the DataError.

    Raises
    ------
    ValueError
        Naming the number, the value and its bounds.
    """
    bound = BOUNDS[name]
    try:
        return bound.parse(value)
    except ValueError as exc:
        if where is None:
            raise

        raise DataError(where, str(exc), fix) from None


def arg_type(name, label=None):
    """argparse type for the number ``BOUNDS[name]``; out of bounds is a usage error (exit 2).

    Parameters
    ----------
    name : str
        A key of :data:`BOUNDS`.
    label : str, optional
        The number's name in argparse's error, e.g. ``"--sigma"``; default ``name``.

    Returns
    -------
    callable
        ``parse(text)``: the number, as :meth:`Bound.parse` returns it; raises
        ``argparse.ArgumentTypeError`` naming the bounds otherwise.
    """
    import argparse

    bound = BOUNDS[name]

    def parse(text):
        """``text`` parsed within the bounds (see :meth:`Bound.parse`).

        Parameters
        ----------
        text : str
            The option's value.

        Returns
        -------
        int or float

        Raises
        ------
        argparse.ArgumentTypeError
            When ``text`` is not a number within the bounds.
        """
        try:
            return bound.parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {bound.describe()} ({bound.reason}), got {_show(text)}") from None

    parse.__name__ = label or name
    return parse


def env_number(var, default):
    """The environment variable ``var`` as a number within its bounds.

    Parameters
    ----------
    var : str
        The variable's name, a key of :data:`BOUNDS`.
    default : object
        Returned when the variable is unset or empty (or only spaces).

    Returns
    -------
    int or float or object
        The parsed value (see :meth:`Bound.parse`), else ``default``.

    Raises
    ------
    DataError
        Naming the variable when it is set to anything but a number within its
        bounds (``abc``, ``-1``, ``1e30``): a setting is never silently ignored.
    """
    text = os.environ.get(var, "").strip()
    if not text:
        return default
    bound = BOUNDS[var]
    try:
        return bound.parse(text)
    except ValueError:
        raise DataError(f"environment variable {var}", f"is set to {_show(text)}, not "
                        f"{bound.describe()} ({bound.reason})",
                        f"set {var} to {bound.describe()}, or unset it") from None


def markdown_table():
    """The bounds table as Markdown (docs/reliability.md holds it verbatim)."""
    rows = ["| number | bounds | where it is passed | why the upper bound |",
            "| --- | --- | --- | --- |"]
    for b in BOUNDS.values():
        rows.append(f"| `{b.name}` | {b.describe()} | {b.where} | {b.reason} |")
    return "\n".join(rows) + "\n"


#: The output-path rule, as docs/reliability.md states it.
OUTPUT_RULE = """\
Every command and API function that writes goes through `facesegment.atomic`
(`check_output_path`, applied by every `atomic_*` writer and checked by each
command for all its outputs before any work starts). A path is written only
when:

- nothing is there; or
- a regular file that facesegment wrote is there: every write is recorded, with
  its size and SHA-256, in the hidden manifest `.facesegment-outputs` of its
  folder (some outputs are also recognised by their header: windows files,
  `aligned.json`), so a rerun into the same folder replaces its own outputs;
- or the user passed `--overwrite` (`facesegment.atomic.overwriting()` in Python).

A folder, a symbolic link, a named pipe (FIFO), a device or a socket is never
written over, even with `--overwrite`. A refusal is one line naming the path
and the fix (exit status 2). `tests/test_output_rule.py` walks every output
option of every command and every name written inside an output folder, and
fails when a module other than `facesegment/atomic.py` renames or opens a file
for writing outside the rule.
"""


def reliability_section():
    """The generated part of docs/reliability.md: the output-path rule and the
    bounds table (``python -c "from facesegment.bounds import reliability_section;
    print(reliability_section())"``)."""
    return ("### The output-path rule\n\n" + OUTPUT_RULE + "\n### Bounds of every number\n\n"
            "Checked once, where the number enters (`facesegment/bounds.py`); a value "
            "outside is one line naming the number and its bounds (exit status 2). "
            "The estimators' parameters have their own table in "
            "`facesegment/forest/params.py`.\n\n" + markdown_table())


__all__ = ["Bound", "BOUNDS", "MAX_SIGMA", "MAX_EXPONENT", "check", "arg_type", "env_number",
           "markdown_table", "reliability_section", "OUTPUT_RULE"]
