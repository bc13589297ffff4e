"""The decision rule a model applies: from a forest's raw class probabilities
to per-pixel decisions.

A forest trained on class-balanced windows outputs probabilities ``p`` that
over-represent the rare classes; a :class:`DecisionRule` turns them into the
probabilities and labels a user sees, term by term::

    p * s ** -alpha          prior reweighting (s: the model's sampling factors;
                             alpha = 1 undoes the balancing fully, the paper's rule)
      * (pos / pi) ** beta   the model's position prior (0: not used)
    -> renormalised, each class map blurred by a Gaussian of sigma px (0: none)
    -> argmax

The rule is chosen on validation images (:func:`facesegment.evaluation.calibrate.choose_rule`),
stored in the model folder (``model.json`` key ``"rule"``) and applied by every
entry point (``predict_image``, ``segment_image``, ``facesegment.segment``, the
``evaluate`` and ``segment`` commands) unless a term is given explicitly.
A model without a stored rule may record the choice in ``metrics``
(``alpha``, ``beta``, ``sigma``); :func:`rule_of` reads it from there.

Adding a term is one field here (its neutral value as the default, so stored
rules without it load unchanged) plus its step in :meth:`DecisionRule.apply`
and, to choose it, a step in :func:`facesegment.evaluation.calibrate.choose_rule`.
"""

import dataclasses
import math
import warnings
from dataclasses import dataclass, fields

import numpy as np

from .bounds import BOUNDS
from .classes import IGNORE
from .position import position_scales
from .reweight import (check_factors, check_mode, class_scale, model_layout, reweight_labels,
                       smooth, strict_region)

__all__ = ["DecisionRule", "PAPER_RULE", "NoRuleWarning", "rule_of", "decision_rule",
           "missing_rule_note", "default_alpha", "default_beta", "default_sigma"]


class NoRuleWarning(UserWarning):
    """A model without a stored decision rule was applied with the paper's rule."""


def _term(value, name):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"decision rule: {name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"decision rule: {name}={value!r} must be finite and >= 0")

    bound = BOUNDS[name]
    if v > bound.high:
        raise ValueError(f"decision rule: {name}={value!r} is out of bounds: expected "
                         f"{bound.describe()} ({bound.reason})")
    return v


@dataclass(frozen=True)
class DecisionRule:
    """How a model turns raw class probabilities into decisions.

    Attributes
    ----------
    alpha : float >= 0
        Prior-reweighting exponent: ``p * s ** -alpha`` (1 = the paper, 0 = none).
    beta : float >= 0
        Exponent of the model's position prior ``(pos / pi) ** beta``
        (0 = not used; > 0 needs a model with ``model.position``).
    sigma : float >= 0
        Gaussian blur (pixels of the crop) of every class map before the argmax
        (0 = none).
    """

    alpha: float = 1.0
    beta: float = 0.0
    sigma: float = 0.0

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, _term(getattr(self, f.name), f.name))

    # ---------------------------------------------------------------- data
    def to_dict(self):
        """``{"alpha": ..., "beta": ..., "sigma": ...}`` (JSON-ready)."""
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data):
        """The rule of a :meth:`to_dict` dictionary; missing terms take their
        neutral defaults, unknown ones are an error (a newer facesegment's rule).

        Parameters
        ----------
        data : dict
            ``{"alpha": ..., "beta": ..., "sigma": ...}``, any term left out.

        Returns
        -------
        DecisionRule

        Raises
        ------
        TypeError
            When ``data`` is not a dict, or a term is not a number.
        ValueError
            When ``data`` names an unknown term, or a term is negative, not
            finite or out of its bounds (:data:`facesegment.bounds.BOUNDS`).
        """
        if not isinstance(data, dict):
            raise TypeError(f"decision rule: expected a dict, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"decision rule: unknown term(s) {', '.join(unknown)} (this "
                             f"facesegment knows {', '.join(sorted(names))}): upgrade "
                             "facesegment to apply this model")
        return cls(**data)

    @classmethod
    def from_metrics(cls, metrics, params=None):
        """The rule a model records in its metrics rather than as a stored rule:
        ``alpha`` (or ``selection.alpha``, or ``params["alpha"]``), ``beta`` and
        ``sigma`` of ``metrics``.

        Parameters
        ----------
        metrics : dict or None
            The model's metrics; None counts as empty.
        params : dict or None, optional
            The estimator's parameters, read for ``alpha`` when ``metrics`` has
            none; None (default) counts as empty.

        Returns
        -------
        DecisionRule or None
            The rule (alpha 1, beta 0, sigma 0 where a term is not recorded);
            None when none of the three terms is recorded.

        Raises
        ------
        TypeError, ValueError
            When a recorded term is not a valid term (see :meth:`from_dict`).
        """
        metrics, params = metrics or {}, params or {}
        alpha = next((v for v in (metrics.get("alpha"),
                                  (metrics.get("selection") or {}).get("alpha"),
                                  params.get("alpha")) if v is not None), None)
        beta, sigma = metrics.get("beta"), metrics.get("sigma")
        if alpha is None and beta is None and sigma is None:
            return None
        return cls(alpha=1.0 if alpha is None else alpha, beta=beta or 0.0,
                   sigma=sigma or 0.0)

    def replace(self, **terms):
        """A copy with the given terms changed (None leaves a term as it is).

        Parameters
        ----------
        **terms : float or None
            New values by term name (``alpha``, ``beta``, ``sigma``); None
            keeps the term.

        Returns
        -------
        DecisionRule

        Raises
        ------
        TypeError
            When a name is not a term, or a value is not a number.
        ValueError
            When a value is negative, not finite or out of its bounds.
        """
        return dataclasses.replace(self, **{k: v for k, v in terms.items() if v is not None})

    def describe(self):
        return ", ".join(f"{f.name} {getattr(self, f.name):g}" for f in fields(self))

    # ------------------------------------------------------------ applying
    def check(self, model):
        """This rule checked against ``model`` (beta > 0 needs a position prior).

        Parameters
        ----------
        model : Model or Cascade
            The model the rule is applied to (its ``position`` is read).

        Returns
        -------
        DecisionRule
            This rule itself.

        Raises
        ------
        ValueError
            When beta > 0 and the model has no position prior.
        """
        if self.beta > 0 and getattr(model, "position", None) is None:
            raise ValueError(f"beta={self.beta:g} needs a model with a position prior "
                             "(model.position is None): give beta=0, or train the model "
                             "with a position prior")
        return self

    @property
    def needs_full_maps(self):
        """Does :meth:`apply` need the raw maps of every pixel (a blur reads the
        border too)?  The raw probabilities are then predicted in "full" mode."""
        return self.sigma > 0

    def apply(self, model, raw, mode="full"):
        """Decisions from the forest's raw class probabilities of one image.

        Parameters
        ----------
        model : Model or Cascade
            Gives the sampling factors, the position prior and the layout.
        raw : float (H, W, C)
            The forest's mean leaf distributions
            (:func:`facesegment.dense.predict_proba_raw`), predicted in "full"
            mode when :attr:`needs_full_maps`, else in ``mode``.
        mode : {"full", "strict"}
            "strict": border pixels (within ``layout.half`` px) get label 255
            (and, after a blur, probabilities 0).

        Returns
        -------
        proba : float32 (H, W, C), renormalised per pixel
        labels : uint8 (H, W)
        """
        check_mode(mode)
        self.check(model)
        s = check_factors(model.sampling_factors, raw.shape[-1])
        if self.beta > 0:
            proba, labels = _reweight_position(raw, model.position, s, self.alpha, self.beta)
        else:
            proba, labels = reweight_labels(raw, s, self.alpha)
        if self.sigma > 0:
            proba = smooth(proba, self.sigma)
            labels = np.argmax(proba, axis=-1).astype(np.uint8)
        if mode == "strict":
            y0, y1, x0, x1 = strict_region(raw.shape, model_layout(model))
            keep = np.zeros(raw.shape[:2], dtype=bool)
            keep[y0:y1, x0:x1] = True
            labels[~keep] = IGNORE
            if self.sigma > 0:
                proba[~keep] = 0
        return proba, labels


#: The paper's rule: full prior reweighting, nothing else.
PAPER_RULE = DecisionRule()


def _reweight_position(raw, position, s, alpha, beta):
    """``raw * s**-alpha * (pos/pi)**beta`` renormalised per pixel, and its argmax."""
    h, w, c = raw.shape
    ys, xs = np.divmod(np.arange(h * w), w)
    scale = position_scales(position, (h, w), ys, xs, class_scale(s, alpha), beta)
    out = raw.reshape(-1, c).astype(np.float64) * scale
    total = out.sum(axis=1, keepdims=True)
    labels = np.argmax(out, axis=-1).astype(np.uint8)
    out = np.where(total > 0, out / np.where(total > 0, total, 1.0), 0.0)
    return out.astype(np.float32).reshape(h, w, c), labels.reshape(h, w)


# -------------------------------------------------------------- a model's rule

def rule_of(model):
    """The decision rule stored with ``model``, or None when it has none.

    ``model.rule`` when set, else the choice a model records in its
    ``metrics`` (:meth:`DecisionRule.from_metrics`).  A beta recorded for a
    model without a position prior counts as 0.

    Parameters
    ----------
    model : Model, Cascade or object
        Its ``rule``, ``metrics``, ``params`` and ``position`` attributes are
        read where present.

    Returns
    -------
    DecisionRule or None
    """
    rule = getattr(model, "rule", None)
    if rule is None:
        rule = DecisionRule.from_metrics(getattr(model, "metrics", None),
                                         getattr(model, "params", None))
    if rule is not None and rule.beta > 0 and getattr(model, "position", None) is None:
        rule = rule.replace(beta=0.0)
    return rule


def default_alpha(model):
    """The alpha of the model's decision rule (:func:`rule_of`: its stored rule, or
    the alpha recorded in its ``metrics``), else 1.0 (the paper's rule).

    Parameters
    ----------
    model : Model, Cascade or object
        The model (see :func:`rule_of`).

    Returns
    -------
    float
    """
    rule = rule_of(model)
    return 1.0 if rule is None else rule.alpha


def default_beta(model):
    """The beta of the model's decision rule; 0 for a model without a position
    prior (or without a rule).

    Parameters
    ----------
    model : Model, Cascade or object
        The model (see :func:`rule_of`).

    Returns
    -------
    float
    """
    rule = rule_of(model)
    return 0.0 if rule is None else rule.beta


def default_sigma(model):
    """The sigma (pixels) of the model's decision rule, 0 when none.

    Parameters
    ----------
    model : Model, Cascade or object
        The model (see :func:`rule_of`).

    Returns
    -------
    float
    """
    rule = rule_of(model)
    return 0.0 if rule is None else rule.sigma


def missing_rule_note(model):
    """The one-line note for a model without a stored rule.

    Parameters
    ----------
    model : Model, Cascade or object
        The model; its ``kind`` (``"?"`` when it has none) is named.

    Returns
    -------
    str
    """
    kind = getattr(model, "kind", "?")
    return (f"this {kind} model stores no decision rule: applying the paper's alpha 1 "
            "(no position prior, no smoothing), which scores far below an alpha chosen on "
            "validation images; choose a rule with facesegment.evaluation.calibrate.choose_rule (or "
            "train with `facesegment train --calibrate`, which stores it)")


_NOTED = set()


def decision_rule(model, alpha=None, beta=None, sigma=None, warn=True):
    """The rule to apply to ``model``: its stored rule with the terms given here
    replaced (None: the stored term).

    A model without a stored rule gets :data:`PAPER_RULE` and, unless alpha is
    given or ``warn`` is false, a :class:`NoRuleWarning` (once per model).

    Parameters
    ----------
    model : Model, Cascade or object
        The model (see :func:`rule_of`); checked by :meth:`DecisionRule.check`.
    alpha, beta, sigma : float or None, optional
        Terms replacing the stored ones; None (default) keeps the stored term.
    warn : bool, optional
        Warn when the model stores no rule (default True).

    Returns
    -------
    DecisionRule

    Raises
    ------
    TypeError, ValueError
        When a given term is not a valid term, or beta > 0 for a model without
        a position prior.
    """
    rule = rule_of(model)
    if rule is None:
        rule = PAPER_RULE
        if warn and alpha is None and id(model) not in _NOTED:
            _NOTED.add(id(model))
            warnings.warn(missing_rule_note(model), NoRuleWarning, stacklevel=3)
    return rule.replace(alpha=alpha, beta=beta, sigma=sigma).check(model)
