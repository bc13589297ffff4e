"""Parameter constraints of the forests: one table per class, one validator.

Every estimator class carries its own table, ``_parameter_constraints``
(``{parameter: Constraint}``, scikit-learn's style); subclasses build theirs
from :data:`COMMON_CONSTRAINTS` and the entries here.  The defaults are *not*
in the tables: they are the estimators' ``__init__`` signatures (the one
place); :func:`constraints_of` checks, once per class, that every signature
parameter has exactly one constraint.  An entry made with
:meth:`Constraint.cli` also carries its command-line help (and flag): the
options of ``facesegment train`` are generated from the tables.

:func:`validate_params` checks a dict of parameters against an estimator's
table and returns the normalised values (Python ``int``/``float``/``bool``,
CO2 hyper-parameters left at None replaced by
:data:`facesegment.forest.co2.CO2_DEFAULTS`), raising
:class:`InvalidParameterError` (both a ``ValueError`` and a ``TypeError``)
that names the parameter, the value and what is accepted.  Estimators run it
once at the start of ``fit``; configuration code can run it up front::

    >>> from facesegment.forest import AxisAlignedForest, CO2Forest
    >>> from facesegment.forest.params import validate_params
    >>> validate_params(CO2Forest, {"nu": 2, "max_depth": None})
    {'nu': 2.0, 'max_depth': None}
    >>> validate_params(AxisAlignedForest, {"n_estimators": 0})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    facesegment...InvalidParameterError: n_estimators=0 is invalid ...: it must be an integer >= 1 and <= 10,000
"""

import copy
import functools
import math
import numbers
from abc import ABC, abstractmethod
from types import MappingProxyType

import numpy as np

from ..limits import MAX_SEED

__all__ = ["InvalidParameterError", "Constraint", "Integer", "Real", "Options", "Boolean",
           "MaxFeatures", "MaxSamples", "NJobs", "RandomState", "ClassWeight", "OOBScore",
           "Anything", "COMMON_CONSTRAINTS", "FOREST_OPTIONS_CONSTRAINTS", "CART_CONSTRAINTS",
           "CO2_CONSTRAINTS", "constraints_of",
           "validate_params", "resolve_max_features",
           "resolve_max_samples", "check_sample_weight"]


class InvalidParameterError(ValueError, TypeError):
    """A parameter value is out of range or of the wrong type (like scikit-learn's)."""


class Constraint(ABC):
    """One parameter's rule: ``normalise(value)`` returns the normalised value or
    raises ``ValueError`` whose message completes "it must be ..."."""

    description = "valid"
    default = None
    #: Command-line help (None: not a ``facesegment train`` option), flag and metavar.
    help = None
    flag = None
    metavar = None

    def cli(self, help, flag=None, metavar=None):
        """A copy of this constraint that is also a ``facesegment train`` option.

        Parameters
        ----------
        help : str
            One line of help (the default is added).
        flag : str or None, default=None
            The option without ``--``; None: the parameter's name with dashes.
        metavar : str or None, default=None
            The option's metavar.

        Returns
        -------
        Constraint
            A shallow copy with ``help``, ``flag`` and ``metavar`` set.
        """
        out = copy.copy(self)
        out.help, out.flag, out.metavar = help, flag, metavar
        return out

    def none_value(self):
        """What None stands for (``default``, called first when it is callable)."""
        return self.default() if callable(self.default) else self.default

    @abstractmethod
    def normalise(self, value):
        """The normalised ``value``; raises ``ValueError(description)`` when invalid.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        object
            The normalised value.

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """

    def __repr__(self):
        return f"{type(self).__name__}({self.description})"


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Integer(Constraint):
    """An integer ``>= low`` (``none_ok``: None is allowed; ``default``: None becomes
    it; ``bool_ok``: True/False count as 1/0)."""

    def __init__(self, low, high=None, *, none_ok=False, default=None, bool_ok=False):
        self.low, self.none_ok, self.default = low, none_ok or default is not None, default
        self.high, self.bool_ok = high, bool_ok
        rng = f">= {low}" if high is None else f">= {low} and <= {high:,}"
        self.description = (f"an integer {rng}" + (" or a bool" if bool_ok else "")
                            + (" or None" if self.none_ok else ""))

    def normalise(self, value):
        """``value`` as an int, or None's stand-in when None is allowed.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        int or object
            ``int(value)`` (1 or 0 for a bool when ``bool_ok``), or
            :meth:`none_value` for None when ``none_ok``.

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if value is None and self.none_ok:
            return self.none_value()
        if self.bool_ok and isinstance(value, (bool, np.bool_)):
            return int(value)
        if not _is_int(value) or value < self.low or (self.high is not None
                                                      and value > self.high):
            raise ValueError(self.description)
        return int(value)


class Real(Constraint):
    """A finite number in an interval; ``low_open``/``high_open`` exclude the ends."""

    def __init__(self, low=None, high=None, *, low_open=False, high_open=False,
                 none_ok=False, default=None):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        self.none_ok, self.default = none_ok or default is not None, default
        lo = "(-inf" if low is None else f"{'(' if low_open else '['}{low}"
        hi = "inf)" if high is None else f"{high}{')' if high_open else ']'}"
        self.description = (f"a finite number in {lo}, {hi}"
                            + (" or None" if self.none_ok else ""))

    def normalise(self, value):
        """``value`` as a float in the interval, or None's stand-in when None is allowed.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        float or object
            ``float(value)``, or :meth:`none_value` for None when ``none_ok``.

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if value is None and self.none_ok:
            return self.none_value()
        if not _is_real(value) or not math.isfinite(value):
            raise ValueError(self.description)
        v = float(value)
        if self.low is not None and (v < self.low or (self.low_open and v == self.low)):
            raise ValueError(self.description)
        if self.high is not None and (v > self.high or (self.high_open and v == self.high)):
            raise ValueError(self.description)
        return v


class Options(Constraint):
    """One of a few strings."""

    def __init__(self, *options):
        self.options = options
        self.description = "one of " + ", ".join(map(repr, options))

    def normalise(self, value):
        """``value`` when it is one of the options.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        str
            ``value``.

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if not isinstance(value, str) or value not in self.options:
            raise ValueError(self.description)
        return value


class Boolean(Constraint):
    """True or False (numpy booleans too)."""

    description = "True or False"

    def normalise(self, value):
        """``value`` as a Python bool.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        bool
            ``bool(value)`` (numpy booleans accepted).

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(self.description)
        return bool(value)


class MaxFeatures(Constraint):
    """See :func:`resolve_max_features`."""

    description = ("an int >= 1, a fraction in (0, 1], 'sqrt', 'log2', 'all', None (all) "
                   "or an exponent like 'p^0.7' (0 < exponent <= 1)")

    def normalise(self, value):
        """``value`` as a ``max_features`` spec (see :func:`resolve_max_features`).

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        None, str, int or float
            None; ``"sqrt"``, ``"log2"``, ``"all"`` or ``"p^E"`` (stripped, lower
            case); an int in ``1..MAX_SAMPLES``; or a fraction in (0, 1].

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if value is None:
            return None
        if isinstance(value, str):
            s = value.strip().lower()
            if s in ("sqrt", "log2", "all"):
                return s
            if s.startswith("p^"):
                try:
                    e = float(s[2:])
                except ValueError:
                    e = -1.0
                if 0.0 < e <= 1.0:
                    return s
            raise ValueError(self.description)
        return _count_or_fraction(value, self.description)


#: Upper bounds of the integer parameters (resource limits: a value above them
#: would ask for more memory or time than any machine has).  ``facesegment
#: train`` and the pipeline's config check them before any work.
MAX_TREES = 10_000            # n_estimators
MAX_DEPTH = 1_000             # max_depth, refine_depth
MAX_FERN_DEPTH = 24           # a fern of depth D has 2**D leaves
MAX_COUNT = 1_000_000         # n_pairs, batch_size, tau, max_nonzero, subset sizes, epochs
MAX_SAMPLES = 2 ** 31 - 1     # max_samples, min_samples_* (int32 sample indices)


def _count_or_fraction(value, description, high=MAX_SAMPLES):
    """An int in 1..high or a fraction in (0, 1] (MaxFeatures and MaxSamples)."""
    if _is_int(value):
        if value < 1 or value > high:
            raise ValueError(description)
        return int(value)
    if _is_real(value) and 0.0 < value <= 1.0:
        return float(value)
    raise ValueError(description)


class MaxSamples(Constraint):
    """Samples per tree: None (the pool size), an int >= 1 or a fraction in (0, 1]."""

    description = f"None (the pool size), an int in 1..{MAX_SAMPLES:,} or a fraction in (0, 1]"

    def normalise(self, value):
        """``value`` as a ``max_samples`` spec.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        None, int or float
            None, an int in ``1..MAX_SAMPLES`` or a fraction in (0, 1].

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        return None if value is None else _count_or_fraction(value, self.description)


class NJobs(Constraint):
    """None (1 thread, as in scikit-learn), -1 (all cores) or a positive integer."""

    description = "a positive integer, -1 (all cores) or None (1)"

    def normalise(self, value):
        """``value`` as an ``n_jobs`` setting.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        int or None
            None, -1 or a positive int.

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if value is None:
            return None
        if not _is_int(value) or value == 0 or value < -1:
            raise ValueError(self.description)
        return int(value)


class RandomState(Constraint):
    """None, an int >= 0, a numpy Generator/RandomState or SeedSequence."""

    description = (f"None, an int in 0..{MAX_SEED:,}, a numpy Generator, RandomState or "
                   "SeedSequence")

    def normalise(self, value):
        """``value`` as a ``random_state``.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        None, int, Generator, RandomState or SeedSequence
            ``value`` (an int in ``0..MAX_SEED`` as a Python int).

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if value is None or isinstance(value, (np.random.Generator, np.random.RandomState,
                                               np.random.SeedSequence)):
            return value
        if _is_int(value) and 0 <= value <= MAX_SEED:
            return int(value)
        raise ValueError(self.description)


class ClassWeight(Constraint):
    """None, "balanced", "balanced_subsample" or a dict ``{class label: weight > 0}``."""

    description = ("None, 'balanced', 'balanced_subsample' or a dict {class label: "
                   "finite weight >= 0}")

    def normalise(self, value):
        """``value`` as a ``class_weight``.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        None, str or dict
            ``value``; a dict is copied (non-empty, finite weights >= 0).

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if value is None or value in ("balanced", "balanced_subsample"):
            return value
        if not isinstance(value, dict) or not value:
            raise ValueError(self.description)
        for w in value.values():
            if not _is_real(w) or not math.isfinite(w) or w < 0:
                raise ValueError(self.description)
        return dict(value)


class OOBScore(Constraint):
    """True, False, or a callable ``score(y_true, y_pred)`` giving ``oob_score_``
    (scikit-learn's forests: it is called with the class indices)."""

    description = "True, False or a callable score(y_true, y_pred)"

    def normalise(self, value):
        """``value`` as an ``oob_score``.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        bool or callable
            ``bool(value)`` for booleans, else the callable.

        Raises
        ------
        ValueError
            With this constraint's ``description`` when ``value`` is invalid.
        """
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if callable(value):
            return value
        raise ValueError(self.description)


class Anything(Constraint):
    """No check (e.g. ``scheduler``: an address or a ``distributed.Client``)."""

    description = "anything"

    def normalise(self, value):
        """``value``, unchecked.

        Parameters
        ----------
        value : object
            The parameter's value.

        Returns
        -------
        object
            ``value``.
        """
        return value


def _co2_default(name):
    """A callable giving ``CO2_DEFAULTS[name]`` (imported when first needed)."""
    def default():
        # lazy: co2 imports Numba and its kernels; the parameter tables are read
        # by code (the CLI's options, config checks) that grows no forest
        from .co2 import CO2_DEFAULTS

        return CO2_DEFAULTS[name]

    return default


#: The parameters every forest of :class:`~facesegment.forest.base.BaseForest` has.
COMMON_CONSTRAINTS = MappingProxyType({
    "n_estimators": Integer(1, MAX_TREES).cli(
        "number of trees (the paper uses 16 and 32)", flag="trees", metavar="N"),
    "max_depth": Integer(1, MAX_DEPTH, none_ok=True).cli(
        "maximum tree depth (by default: grow until pure or too small)", metavar="D"),
    "min_samples_split": Integer(2, MAX_SAMPLES).cli(
        "nodes with fewer windows become leaves", metavar="N"),
    "min_samples_leaf": Integer(1, MAX_SAMPLES).cli(
        "minimum windows on each side of a split", metavar="N"),
    "max_samples": MaxSamples().cli(
        "windows per tree: a count or a fraction of the file (by default: all; the paper "
        "uses 256000)", metavar="N|F"),
    "bootstrap": Boolean().cli(
        "draw each tree's windows with replacement (the paper) or without (--no-bootstrap)"),
    "random_state": RandomState(),
    "n_jobs": NJobs(),
    "scheduler": Anything(),
    "verbose": Integer(0, bool_ok=True),
})

#: scikit-learn's forest options every classifier has (docs/forests-cart.md, "CART
#: options"): out-of-bag estimates, class weights, warm starts.
FOREST_OPTIONS_CONSTRAINTS = MappingProxyType({
    "oob_score": OOBScore(),
    "class_weight": ClassWeight(),
    "warm_start": Boolean(),
})

#: The axis-aligned family's options: the criterion and the forest options.
CART_CONSTRAINTS = MappingProxyType({
    "criterion": Options("gini", "entropy").cli(
        "split quality: information gain (entropy, the paper) or Gini impurity decrease"),
    **FOREST_OPTIONS_CONSTRAINTS,
})

#: The CO2 optimiser's hyper-parameters (None: :data:`facesegment.forest.co2.CO2_DEFAULTS`).
CO2_CONSTRAINTS = MappingProxyType({
    "nu": Real(0, low_open=True, default=_co2_default("nu")).cli(
        "regulariser: ||w||^2 <= nu"),
    "eta": Real(0, low_open=True, default=_co2_default("eta")).cli(
        "initial SGD learning rate"),
    "tau": Integer(1, MAX_COUNT, default=_co2_default("tau")).cli(
        "SGD steps between refreshes of w_old"),
    "n_passes": Real(0, low_open=True, default=_co2_default("n_passes")).cli(
        "passes of SGD over each node's windows", flag="passes"),
    "batch_size": Integer(1, MAX_COUNT, default=_co2_default("batch_size")).cli(
        "SGD mini-batch size"),
    "momentum": Real(0, 1, high_open=True, default=_co2_default("momentum")).cli(
        "SGD momentum in [0, 1)"),
})


@functools.cache
def constraints_of(cls):
    """The constraints table of an estimator class (read-only), checked once per
    class: exactly one constraint per ``__init__`` parameter.

    Raises
    ------
    ValueError
        When the class has no table, or the table and the signature differ.
    """
    table = getattr(cls, "_parameter_constraints", None)
    if table is None:
        raise ValueError(f"{cls.__name__} has no _parameter_constraints table; give the "
                         "class one ({parameter: Constraint} for every __init__ parameter)")
    names = set(cls._get_param_names()) if hasattr(cls, "_get_param_names") else set(table)
    if names != set(table):
        raise ValueError(f"{cls.__name__}._parameter_constraints does not match __init__: "
                         f"no constraint for {sorted(names - set(table))}, constraints of "
                         f"no parameter {sorted(set(table) - names)}")
    return MappingProxyType(dict(table))


def _constraints_of(estimator_or_class):
    cls = estimator_or_class if isinstance(estimator_or_class, type) else type(estimator_or_class)
    return cls.__name__, constraints_of(cls)


def _normalise(owner, key, constraint, value):
    try:
        return constraint.normalise(value)
    except ValueError as exc:
        where = f" for {owner}" if owner else ""
        raise InvalidParameterError(f"{key}={value!r} is invalid{where}: it must be "
                                    f"{exc}") from None


def validate_params(estimator_or_class, params):
    """Check ``params`` (a dict, any subset of the parameters) against the table.

    Parameters
    ----------
    estimator_or_class : estimator or estimator class
    params : mapping
        ``{parameter: value}``, e.g. ``est.get_params()`` or a config section.

    Returns
    -------
    dict
        The same keys with normalised values (numpy scalars become Python
        scalars; CO2 hyper-parameters left at None become their defaults).

    Raises
    ------
    InvalidParameterError
        (a ``ValueError`` and a ``TypeError``) for an unknown parameter or a
        value out of range, naming the parameter, the value and what is accepted.
    """
    name, table = _constraints_of(estimator_or_class)
    out = {}
    for key, value in params.items():
        if key not in table:
            raise InvalidParameterError(
                f"{key!r} is not a parameter of {name}; valid parameters: "
                f"{', '.join(sorted(table))}")
        out[key] = _normalise(name, key, table[key], value)
    return out


def resolve_max_features(spec, n_features):
    """Number of candidate features q (1..n_features) for a ``max_features`` spec.

    Parameters
    ----------
    spec : int, float, str or None
        An int (clipped to ``n_features``), a fraction of the features in
        (0, 1], ``"sqrt"``, ``"log2"``, ``"all"`` or None (all features), or an
        exponent ``"p^E"`` with 0 < E <= 1 (``round(p ** E)``; the paper picks E
        in 0.5..0.9).
    n_features : int
        Number of features p.

    Returns
    -------
    int
        The number of candidate features, at least 1 (for ``n_features >= 1``)
        and at most ``n_features``.

    Raises
    ------
    InvalidParameterError
        For any other ``spec``.

    Examples
    --------
    >>> resolve_max_features("p^0.7", 2883), resolve_max_features("sqrt", 2883)
    (264, 53)
    """
    s = _normalise(None, "max_features", MaxFeatures(), spec)
    p = int(n_features)
    if s is None or s == "all":
        return p
    if s == "sqrt":
        return max(1, int(np.sqrt(p)))
    if s == "log2":
        return max(1, int(np.log2(p))) if p > 0 else 1
    if isinstance(s, str):  # "p^E"
        return max(1, min(p, int(round(p ** float(s[2:])))))
    if isinstance(s, int):
        return min(s, p)
    return max(1, int(round(s * p)))


def resolve_max_samples(spec, pool):
    """Samples per tree for a ``max_samples`` spec and a pool of ``pool`` rows.

    Parameters
    ----------
    spec : None, int or float
        None: ``pool``; an int: as it is; a fraction in (0, 1]:
        ``round(fraction * pool)``, at least 1.
    pool : int
        Number of rows the trees draw from.

    Returns
    -------
    int
        Samples per tree.

    Raises
    ------
    InvalidParameterError
        For any other ``spec``.
    """
    s = _normalise(None, "max_samples", MaxSamples(), spec)
    if s is None:
        return int(pool)
    if isinstance(s, int):
        return s
    return max(1, int(round(s * pool)))


def check_sample_weight(sample_weight, n_samples):
    """Validated sample weights: None, or float64 (n_samples,) finite and >= 0.

    Parameters
    ----------
    sample_weight : None, number or array-like of shape (n_samples,)
        The weights; a scalar is broadcast to every sample.
    n_samples : int
        Number of samples.

    Returns
    -------
    None or float64 ndarray of shape (n_samples,)
        The weights (None for None).

    Raises
    ------
    ValueError
        For non-numbers, a wrong shape, NaN or infinite values, negative values,
        or all zeros (naming what is wrong and what to pass).
    """
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Number):
        sample_weight = np.full(n_samples, sample_weight)
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("sample_weight must be numbers, one per sample; got "
                         f"{type(sample_weight).__name__}") from None
    if w.shape != (n_samples,):
        raise ValueError(f"sample_weight has shape {w.shape}, expected ({n_samples},): "
                         "one non-negative weight per sample of X")
    if not np.isfinite(w).all():
        raise ValueError("sample_weight contains NaN or infinite values; pass finite "
                         "non-negative weights")
    if (w < 0).any():
        raise ValueError(f"sample_weight has negative values (e.g. {w[w < 0][0]!r} at "
                         f"sample {int(np.flatnonzero(w < 0)[0])}); pass weights >= 0")
    if not (w > 0).any():
        raise ValueError("sample weights are all zero; at least one sample needs a "
                         "non-zero weight")
    return w
