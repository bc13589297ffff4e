"""Optional dependencies: the plain install leaves out the pipeline extra, and a
missing extra is one line naming it (facesegment.extras)."""

import sys
import tomllib

import pytest

from facesegment.errors import DataError
from tests.conftest import ROOT


@pytest.fixture()
def without(monkeypatch):
    """Make top-level modules unimportable (as if not installed)."""

    def block(*names):
        for name in names:
            for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
                monkeypatch.delitem(sys.modules, mod)
            monkeypatch.setitem(sys.modules, name, None)   # import raises ImportError

    return block


def test_the_plain_install_leaves_the_pipeline_extra_out():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(meta["dependencies"])
    assert "distributed" not in core and "matplotlib" not in core
    extras = meta["optional-dependencies"]
    assert any("distributed" in r for r in extras["pipeline"])
    assert any(r.startswith("matplotlib") for r in extras["pipeline"])
    assert any(r.startswith("matplotlib") for r in extras["mesh"])   # MediaPipe imports it
    assert "pipeline" in (ROOT / "Makefile").read_text().split(".[dev,")[1].split("]")[0]


@pytest.mark.parametrize("module,extra", [("distributed", "pipeline"),
                                          ("matplotlib", "pipeline")])
def test_require_names_the_extra(without, module, extra):
    from facesegment.extras import available, require

    without(module)
    assert not available(module)
    with pytest.raises(DataError) as exc:
        require(module, "this feature")
    msg = str(exc.value)
    assert f"pip install 'facesegment[{extra}]'" in msg and "\n" not in msg
    assert msg.startswith(f"{module}: is not installed, and this feature needs it")


def test_a_scheduler_without_distributed_is_one_line(without):
    import facesegment.parallel as par

    without("distributed")
    with pytest.raises(DataError, match=r"facesegment\[pipeline\]"):
        list(par.map_tasks(abs, [1, 2], scheduler="tcp://127.0.0.1:8786", progress=False))


def test_figures_without_matplotlib_is_one_line(without):
    from facesegment.evaluation.figures import subplots

    without("matplotlib")
    with pytest.raises(DataError, match=r"drawing figures needs it .*facesegment\[pipeline\]"):
        subplots()


def test_local_work_needs_no_extra(without):
    import facesegment.parallel as par

    without("distributed", "matplotlib")
    assert sorted(r for _, r in par.map_tasks(abs, [-1, 2, -3], n_workers=2,
                                               progress=False)) == [1, 2, 3]


def test_install_size_walks_each_route():
    pytest.importorskip("distributed")
    from benchmarks.install_size import closure

    plain = closure()
    assert "numba" in plain and "opencv-python-headless" in plain
    assert "distributed" not in plain and "matplotlib" not in plain
    full = closure(("pipeline",))
    assert {"distributed", "matplotlib", "tornado"} <= set(full)
