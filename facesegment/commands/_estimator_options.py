"""The estimator options of ``facesegment train``, generated from the forests'
constraints tables (:mod:`facesegment.forest.params`).

A parameter whose constraint carries command-line help
(:meth:`~facesegment.forest.params.Constraint.cli`) is an option: its flag,
help, metavar and argument type come from the table, its default (per kind)
from the estimator.  The parser offers the options of every classifier kind
(so a flag of another kind is refused by name, not as unknown); the chosen
kind takes those of its own class that its row does not fix.
"""

import argparse

from ..forest import params as P
from ..forest.params import COMMON_CONSTRAINTS, constraints_of, resolve_max_features
from ._common import _int_at_least


def positive_int(text):
    """argparse type: a positive integer (``_`` and ``,`` separators allowed).

    Its upper bound is the estimator's, checked by ``facesegment.forest.params``.

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    int

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not an integer >= 1.
    """
    return _int_at_least(text, 1, "a positive integer")


def nonneg_int(text):
    """argparse type: an integer >= 0 (upper bound: ``facesegment.forest.params``).

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
        When ``text`` is not an integer >= 0.
    """
    return _int_at_least(text, 0, "a non-negative integer")


def class_options(cls):
    """The command-line options of an estimator class.

    A parameter is an option when its constraint has help text; its flag is the
    constraint's ``flag``, else ``--`` and the name with ``-`` for ``_``.

    Parameters
    ----------
    cls : type
        An estimator class with a constraints table.

    Returns
    -------
    dict
        ``{parameter: (flag, constraint)}``.
    """
    return {name: ("--" + (c.flag or name.replace("_", "-")), c)
            for name, c in constraints_of(cls).items() if c.help}


def kind_options(kind):
    """The options of a registry row: its class's options less the parameters the row fixes.

    Parameters
    ----------
    kind : registry row
        A classifier kind (its ``estimator_class`` and ``fixed`` parameters).

    Returns
    -------
    dict
        ``{parameter: (flag, constraint)}``.
    """
    return {name: v for name, v in class_options(kind.estimator_class).items()
            if name not in kind.fixed}


def _argument_kw(constraint):
    """argparse keywords for a constraint: its type (bounds beyond the type's
    are checked against the chosen kind's table before training)."""
    if isinstance(constraint, P.Boolean):
        return {"action": argparse.BooleanOptionalAction}
    if isinstance(constraint, P.Options):
        return {"choices": constraint.options}
    if isinstance(constraint, P.Integer):
        return {"type": positive_int if constraint.low >= 1 else nonneg_int}
    if isinstance(constraint, P.Real):
        return {"type": float}
    if isinstance(constraint, P.MaxFeatures):
        return {"type": max_features_arg}
    if isinstance(constraint, P.MaxSamples):
        return {"type": samples_arg}
    return {"type": str}


def samples_arg(text):
    """argparse type: a count (an int >= 1) or a fraction in (0, 1].

    Text without a decimal point or exponent, or above 1, is a count.

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    int or float
        The count, or the fraction.

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is neither.
    """
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count or a fraction, got {text!r}") from None
    if v > 1 or ("." not in text and "e" not in text.lower()):
        return positive_int(text)
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"expected a count >= 1 or a fraction in (0, 1], got {text!r}")
    return v


def max_features_arg(text):
    """argparse type: 'sqrt', 'log2', 'all', 'p^E', a count or a fraction.

    The value is checked by the estimators' own ``resolve_max_features`` (on
    2883 features).

    Parameters
    ----------
    text : str
        The option's value (case and surrounding spaces ignored).

    Returns
    -------
    str or int or float
        The lower-case keyword or ``p^E`` text, or the count or fraction.

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is none of these.
    """
    t = text.strip().lower()
    try:
        value = t if (t in ("sqrt", "log2", "all") or t.startswith("p^")) else samples_arg(t)
        resolve_max_features(value, 2883)
    except (argparse.ArgumentTypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"expected sqrt, log2, all, p^E (e.g. p^0.7), a count or a fraction, got {text!r}") from None
    return value


def _show(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _defaults(param, constraint, kinds):
    """`` (default X)`` or `` (kind, kind: X; kind: Y)``: the defaults of the kinds
    taking the option (their estimators' own, with the rows' defaults)."""
    by_value = {}
    for kind in kinds:
        value = kind.make().get_params()[param]
        try:
            value = constraint.normalise(value)
        except ValueError:
            pass
        by_value.setdefault(_show(value) if value is not None else None, []).append(kind.name)
    by_value.pop(None, None)
    if not by_value:
        return ""
    if len(by_value) == 1 and len(next(iter(by_value.values()))) == len(kinds):
        return f" (default {next(iter(by_value))})"
    return " (defaults: " + "; ".join(f"{', '.join(ks)}: {v}" for v, ks in by_value.items()) + ")"


def add_estimator_options(parser, kinds):
    """Add the options of the registry rows ``kinds`` to ``parser``.

    The common parameters (:data:`~facesegment.forest.params.COMMON_CONSTRAINTS`)
    go in the main group, the others in one group per estimator class (where
    first declared).  Every option defaults to None (the estimator's default,
    named in the help).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The ``train`` parser.
    kinds : sequence of registry rows
        The classifier kinds the command offers.

    Returns
    -------
    dict
        ``{dest: flag}`` of the options added.

    Raises
    ------
    ValueError
        When two classes give one flag to different parameters.
    """
    options = {}   # flag -> (param, constraint, cls)
    takers = {}    # flag -> [kinds]
    for kind in kinds:
        for param, (flag, c) in kind_options(kind).items():
            first = options.setdefault(flag, (param, c, kind.estimator_class))
            if first[0] != param:
                raise ValueError(f"{flag} is {first[2].__name__}'s {first[0]} and "
                                 f"{kind.estimator}'s {param}; give one of them another flag")
            takers.setdefault(flag, []).append(kind)
    groups = {}
    dests = {}
    for flag, (param, c, cls) in options.items():
        if param in COMMON_CONSTRAINTS:
            group = parser
        else:
            if cls not in groups:
                names = ", ".join(k.name for k in kinds if k.estimator_class is cls)
                groups[cls] = parser.add_argument_group(f"{cls.__name__} options (--kind {names})")
            group = groups[cls]
        text = (c.help + _defaults(param, c, takers[flag])).replace("%", "%%")
        kw = _argument_kw(c)
        if c.metavar and "choices" not in kw and "action" not in kw:
            kw["metavar"] = c.metavar
        action = group.add_argument(flag, default=None, help=text, **kw)
        dests[action.dest] = flag
    return dests


__all__ = ["class_options", "kind_options", "add_estimator_options", "samples_arg",
           "max_features_arg"]
