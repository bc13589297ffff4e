"""The pipeline's experiment design: which kinds ``make all`` trains and how
selection searches each (pipelines/design.py); the registry describes estimators only."""

import pytest

from facesegment.forest import registry
from pipelines import design
from pipelines.design import DESIGN, KindDesign, check_design, design_of


def test_the_design_rows_are_registry_classifiers_in_selection_order():
    check_design()
    assert list(DESIGN)[:3] == ["axis", "two-probe", "co2"]
    assert set(DESIGN) == {k for k in registry.kind_names(task="classify")
                           if k != "nongreedy"}


@pytest.mark.parametrize("name", list(DESIGN))
def test_each_grid_and_inheritance_names_real_parameters(name):
    row = design_of(name)
    valid = set(registry.make_estimator(name).get_params())
    assert set(row.grid) - {"q", "pool"} <= valid      # q: max_features; pool: the layout
    for param, (src, sname) in row.inherit_sources().items():   # only from kinds above it
        assert list(DESIGN).index(src) < list(DESIGN).index(name)
        assert param == "q" or param in valid
        assert sname == "q" or sname in set(registry.make_estimator(src).get_params())


def test_the_registry_holds_no_experiment_design():
    fields = set(registry.ForestKind.__dataclass_fields__)
    assert not fields & {"grid", "inherit", "pipeline"}


def test_registering_and_refusals():
    with pytest.raises(ValueError, match="does not train 'nongreedy'"):
        design_of("nongreedy")
    with pytest.raises(ValueError, match="trains 'axis' already"):
        design.register_design("axis")
    with pytest.raises(ValueError, match="not a forest kind"):
        design.register_design("nope")
    with pytest.raises(ValueError, match="inherits from kinds the pipeline does not train"):
        design.register_design("nongreedy", KindDesign(inherit={"q": "density"}))
    row = design.register_design("nongreedy", KindDesign(grid={"max_depth": "ng_depth"}))
    try:
        assert list(DESIGN)[-1] == "nongreedy" and design_of("nongreedy") is row
        check_design()
    finally:
        design.unregister_design("nongreedy")
    assert "nongreedy" not in DESIGN
    with pytest.raises(TypeError):
        DESIGN["x"] = KindDesign()            # read-only view
