"""The table of forest kinds: rows build estimators; every consumer reads the table."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from facesegment.forest import registry
from facesegment.forest.registry import KINDS, get_kind, kind_of, make_estimator

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(KINDS))
def test_each_row_builds_its_estimator(name):
    kind = KINDS[name]
    est = make_estimator(name, n_estimators=2)
    assert type(est).__name__ == kind.estimator and est.n_estimators == 2
    assert all(getattr(est, k) == v for k, v in kind.fixed.items())
    assert kind_of(est) == name    # recorded when made, whatever its parameters
    assert kind.label and kind.description


def test_variant_is_a_row_not_a_code_path():
    assert get_kind("co2-best").estimator == get_kind("co2").estimator == "CO2Forest"
    assert make_estimator("co2-best").init == "best"


def test_bad_names_and_parameters_are_clear():
    with pytest.raises(ValueError, match="unknown forest kind 'rf'.*axis, two-probe"):
        get_kind("rf")
    with pytest.raises(ValueError, match="has no parameter 'colour'"):
        make_estimator("axis", colour=3)
    with pytest.raises(ValueError, match="fixes init='best'"):
        make_estimator("co2-best", init="axis")


def test_paper_kinds():
    assert [k for k, v in KINDS.items() if v.paper] == ["axis", "two-probe", "co2"]


def test_adding_a_row_reaches_cli_config_selection_and_models(tmp_path):
    """One registry row is all a new kind needs for the CLI's --kind and the model
    format; one design row more puts it in the pipeline (its config's [forest.KIND]
    section and selection grids)."""
    script = textwrap.dedent(f"""
        import sys, numpy as np
        from types import MappingProxyType
        from facesegment.forest import registry as r
        r.KINDS = MappingProxyType({{**r.KINDS, "axis-all": r.ForestKind(
            "axis-all", "AxisAlignedForest", fixed={{"max_features": "all"}},
            label="random forest, all features", description="every feature at every node")}})
        from pipelines.design import KindDesign, register_design
        register_design("axis-all", KindDesign(grid={{"min_samples_leaf": "axis_all_leaf"}}))
        from pipelines import config, selection
        assert "axis-all" in config.KINDS and "forest.axis-all" in config.SCHEMA
        toml = open({str(ROOT / 'pipelines/config.toml')!r}).read() + (
            '\\n[forest.axis-all]\\nmax_depth = 3\\n')
        toml = toml.replace('[evaluate]', 'axis_all_leaf = [1, 4]\\n\\n[evaluate]', 1)
        open({str(tmp_path / 'c.toml')!r}, 'w').write(toml)
        cfg = config.load_config({str(tmp_path / 'c.toml')!r})
        assert selection.grids(cfg)["axis-all"] == [{{"min_samples_leaf": 1}},
                                                    {{"min_samples_leaf": 4}}]
        from facesegment.commands import train
        assert "axis-all" in train.DESCRIPTION
        from facesegment.modelio.model import Model, save_model
        from facesegment.models import load_model
        X = np.random.default_rng(0).integers(0, 256, (80, 6), dtype=np.uint8)
        est = r.make_estimator("axis-all", n_estimators=2).fit(X, X[:, 0] > 127)
        m = load_model(save_model(Model.from_estimator(est), {str(tmp_path / 'm')!r}))
        assert m.kind == "axis-all" and m.to_estimator().max_features == "all"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_a_kind_is_recorded_never_inferred_from_parameters(monkeypatch):
    """With a row ``axis-d10`` (``max_depth=10`` fixed), an ``axis`` estimator of
    depth 10 is still recorded as ``axis`` (as ``facesegment train --kind axis
    --max-depth 10`` records it); an estimator not made by ``make_estimator`` is
    its class's own kind, or refused when its parameters are another row's."""
    from types import MappingProxyType

    from facesegment.forest import AxisAlignedForest, CO2Forest
    from facesegment.modelio.model import Model

    d10 = registry.ForestKind("axis-d10", "AxisAlignedForest", fixed={"max_depth": 10},
                              label="random forest, depth 10", description="depth 10")
    monkeypatch.setattr(registry, "KINDS", MappingProxyType({**KINDS, "axis-d10": d10}))
    X = np.random.default_rng(0).integers(0, 256, (120, 8), dtype=np.uint8)
    y = (X[:, 0] > 127).astype(int)
    est = make_estimator("axis", max_depth=10, n_estimators=2).fit(X, y)
    assert kind_of(est) == "axis" and Model.from_estimator(est).kind == "axis"
    est = make_estimator("axis-d10", n_estimators=2).fit(X, y)
    assert Model.from_estimator(est).kind == "axis-d10"
    plain = AxisAlignedForest(max_depth=10, n_estimators=2).fit(X, y)
    assert kind_of(plain) == "axis" and Model.from_estimator(plain).kind == "axis"
    assert Model.from_estimator(plain, kind="axis-d10").kind == "axis-d10"
    best = CO2Forest(init="best", n_estimators=1, max_depth=2).fit(X, y)
    assert kind_of(best) is None
    with pytest.raises(ValueError, match=r"^CO2Forest was not made by make_estimator and does "
                                         r"not have the parameters of its class's own kind; "
                                         r"pass kind= \(one of: co2, co2-best, co2-sparse, "
                                         r"co2-pooled\)$"):
        Model.from_estimator(best)
    assert Model.from_estimator(best, kind="co2-best").kind == "co2-best"


def test_kind_of_unregistered_estimator_is_none():
    from sklearn.base import BaseEstimator

    class Other(BaseEstimator):
        pass

    assert kind_of(Other()) is None
    assert isinstance(np.asarray(list(registry.kind_names())), np.ndarray)
