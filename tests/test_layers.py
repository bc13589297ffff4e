"""Layers point one way: pipelines/ and studies/ use the library's public names only."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _private_imports(path):
    """``(line, name)`` of every import of a private facesegment module or name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("facesegment"):
            parts = node.module.split(".")
            names = [a.name for a in node.names]
            if any(p.startswith("_") for p in parts) or any(n.startswith("_") for n in names):
                found.append((node.lineno, f"from {node.module} import {', '.join(names)}"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("facesegment") and any(
                        p.startswith("_") for p in a.name.split(".")):
                    found.append((node.lineno, f"import {a.name}"))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id == "facesegment":
                found.append((node.lineno, ast.unparse(node)))
    return found


@pytest.mark.parametrize("folder", ["pipelines", "studies"])
def test_no_private_library_names(folder):
    bad = [f"{p.relative_to(ROOT)}:{line}: {what}"
           for p in sorted((ROOT / folder).rglob("*.py")) for line, what in _private_imports(p)]
    assert not bad, "use public library names (or make the name public):\n" + "\n".join(bad)


@pytest.mark.parametrize("folder", ["pipelines", "studies", "benchmarks"])
def test_no_sys_path_edits(folder):
    bad = [str(p.relative_to(ROOT)) for p in sorted((ROOT / folder).rglob("*.py"))
           if "sys.path.insert" in p.read_text(encoding="utf-8")
           or "sys.path.append" in p.read_text(encoding="utf-8")]
    assert not bad, "import the installed package instead of editing sys.path: " + ", ".join(bad)
