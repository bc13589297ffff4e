"""The package root holds only the public API and the cross-cutting modules;
everything else lives in a subpackage (docs/ARCHITECTURE.md).

A new module goes into the subpackage it serves; adding one to the root means
adding it to ``ROOT_MODULES`` here, with a reason in docs/ARCHITECTURE.md.
"""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "facesegment"

#: Modules allowed at the root: the API and command line, and the small
#: modules every layer uses (errors, atomic writes, limits, progress, threads,
#: Numba options, lazy exports, classes, the window layout, the decision rule, its
#: position prior and the reweighting it shares with dense inference).
ROOT_MODULES = {"__init__", "__main__", "_jit", "_lazy", "api", "atomic", "bounds", "classes",
                "cli", "errors",
                "layout", "limits", "parallel", "position", "progress", "reweight", "rule",
                "warmup", "extras"}
SUBPACKAGES = {"autocontext", "commands", "data", "dense", "evaluation", "faces", "forest",
               "modelio", "models"}
#: Subpackages whose ``__init__`` re-exports public names on first use.
LAZY = ("faces", "data", "autocontext", "modelio", "evaluation")


def test_the_root_holds_only_the_allowed_modules():
    found = {p.stem for p in PACKAGE.glob("*.py")}
    assert found == ROOT_MODULES, (
        f"modules at the package root that are not allowed: {sorted(found - ROOT_MODULES)} "
        f"(move them into the subpackage they serve); missing: {sorted(ROOT_MODULES - found)}")


def test_the_root_holds_only_the_known_subpackages():
    dirs = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert dirs == SUBPACKAGES, sorted(dirs ^ SUBPACKAGES)
    for name in SUBPACKAGES:
        assert (PACKAGE / name / "__init__.py").is_file(), name


@pytest.mark.parametrize("name", LAZY)
def test_a_subpackage_import_loads_none_of_its_modules(name):
    code = (f"import sys, facesegment.{name} as p; "
            f"print(sorted(m for m in sys.modules if m.startswith('facesegment.') "
            f"and m not in ('facesegment.{name}', 'facesegment._lazy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize("name", LAZY)
def test_each_public_name_of_a_subpackage_resolves_to_its_module(name):
    pkg = importlib.import_module(f"facesegment.{name}")
    assert pkg.__all__ and sorted(pkg.__all__) == sorted(pkg._LAZY)
    for attr in pkg.__all__:
        obj = getattr(pkg, attr)
        module = f"facesegment.{name}.{pkg._LAZY[attr]}"
        assert obj is getattr(importlib.import_module(module), attr)
        assert set(pkg.__all__) <= set(dir(pkg))
    with pytest.raises(AttributeError, match=f"facesegment.{name}' has no attribute 'nothing'"):
        pkg.nothing


def test_the_public_api_of_the_root_is_unchanged():
    import facesegment

    assert callable(facesegment.segment)
    assert facesegment.segment.__module__ == "facesegment.api"
    assert facesegment.load_model.__module__ == "facesegment.api"
    assert facesegment.Face.__module__ == "facesegment.api"
    assert facesegment.DecisionRule.__module__ == "facesegment.rule"
    assert facesegment.choose_rule.__module__ == "facesegment.evaluation.calibrate"
    assert {"segment", "load_model", "Face", "DecisionRule", "choose_rule"} <= set(dir(facesegment))
