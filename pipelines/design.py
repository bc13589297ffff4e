"""The face pipeline's experiment design: which forest kinds ``make all`` trains,
in selection order, and how model selection searches each.

The kinds themselves (their estimators, fixed parameters, labels) are the rows
of the library's one table, :mod:`facesegment.forest.registry`; what the main
job does with them is the pipeline's own business and lives here:

* :data:`DESIGN` ``{kind: KindDesign}``: the kinds trained, in the order
  selection visits them (a kind may inherit only from kinds above it);
* a :class:`KindDesign`'s ``grid``: ``{estimator parameter: [select] config
  key}``: selection tries the product of those lists (``q`` stands for
  ``max_features``, an int or ``"p^E"``; ``pool`` is the window layout's
  pooling, handled by the pipeline);
* its ``inherit``: parameters copied from the settings chosen for an earlier
  kind (``{parameter: kind}``, or ``{parameter: "kind:name"}`` for that kind's
  parameter ``name``: ``co2-nongreedy`` takes CO2's ``nu`` as its ``init_nu``).

A kind added to the registry at run time joins the pipeline with
:func:`register_design` (before the pipeline's modules are imported: they read
:data:`DESIGN` then).
"""

from dataclasses import dataclass, field
from types import MappingProxyType

from facesegment.forest import registry


@dataclass(frozen=True)
class KindDesign:
    """How the pipeline selects one kind's parameters (see the module's docstring)."""

    grid: dict = field(default_factory=dict)
    inherit: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("grid", "inherit"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def inherit_sources(self):
        """``{parameter: (kind, name)}``: where each inherited parameter comes from."""
        return {p: tuple(src.split(":", 1)) if ":" in src else (src, p)
                for p, src in self.inherit.items()}

    def inherited(self, chosen):
        """The inherited parameters, from ``chosen`` (``{kind: {name: value}}``)."""
        return {p: chosen[k][n] for p, (k, n) in self.inherit_sources().items()}


_CO2 = {"q": "co2", "nu": "co2", "eta": "co2"}

#: The kinds ``make all`` trains, in selection order, with their selection design.
_ROWS = {
    "axis": KindDesign(grid={"q": "axis_q"}),
    "two-probe": KindDesign(grid={"n_pairs": "two_probe_pairs"}),
    "co2": KindDesign(grid={"nu": "co2_nu", "eta": "co2_eta"}, inherit={"q": "axis"}),
    "co2-best": KindDesign(inherit=_CO2),
    "co2-sparse": KindDesign(grid={"max_nonzero": "co2_sparse_k",
                                   "weight_dtype": "co2_sparse_dtype"}, inherit=_CO2),
    "co2-pooled": KindDesign(grid={"pool": "co2_pool", "weight_dtype": "co2_pooled_dtype"},
                             inherit=_CO2),
    "extra": KindDesign(grid={"q": "extra_q"}),
    "ferns": KindDesign(grid={"depth": "ferns_depth", "test": "ferns_test"}),
    "rotation": KindDesign(grid={"max_rotated_features": "rotation_features"},
                           inherit={"q": "axis"}),
    "co2-nongreedy": KindDesign(grid={"eta": "nongreedy_eta"},
                                inherit={"q": "co2", "init_nu": "co2:nu",
                                         "init_eta": "co2:eta"}),
}
#: Read-only view of the design rows (:func:`register_design` adds to it).
DESIGN = MappingProxyType(_ROWS)


def design_of(kind):
    """The :class:`KindDesign` of a kind the pipeline trains.

    Raises
    ------
    ValueError
        For a kind the pipeline does not train (naming those it does).
    """
    try:
        return DESIGN[kind]
    except (KeyError, TypeError):
        raise ValueError(f"the face pipeline does not train {kind!r}; it trains "
                         f"{', '.join(DESIGN)}") from None


def register_design(kind, design=None):
    """Make the pipeline train ``kind`` (a row of the registry) after the kinds it
    has, selected as ``design`` says (default: nothing searched or inherited).
    Returns the :class:`KindDesign`; :func:`unregister_design` undoes it.

    Raises
    ------
    ValueError
        When ``kind`` is not in the registry or trained already, or inherits from
        a kind the pipeline does not train.
    """
    design = design or KindDesign()
    if kind not in registry.KINDS:
        raise ValueError(f"{kind!r} is not a forest kind (register_kind it first)")
    if kind in _ROWS:
        raise ValueError(f"the face pipeline trains {kind!r} already")
    unknown = sorted({k for k, _ in design.inherit_sources().values()} - set(_ROWS))
    if unknown:
        raise ValueError(f"kind {kind!r} inherits from kinds the pipeline does not train: "
                         f"{unknown}")
    _ROWS[kind] = design
    return design


def unregister_design(kind):
    """Stop training ``kind`` (added by :func:`register_design`)."""
    design_of(kind)
    del _ROWS[kind]


def check_design():
    """ValueError unless every design row is a registry classifier and inherits
    only from rows above it."""
    seen = set()
    for kind, design in _ROWS.items():
        if kind not in registry.KINDS or registry.KINDS[kind].task != "classify":
            raise ValueError(f"design row {kind!r} is not a classifier of the registry")
        for src, _ in design.inherit_sources().values():
            if src not in seen:
                raise ValueError(f"design row {kind!r} inherits from {src!r}, not above it")
        seen.add(kind)


__all__ = ["KindDesign", "DESIGN", "design_of", "register_design", "unregister_design",
           "check_design"]
