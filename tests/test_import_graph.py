"""Layers point one way and no modules import each other in a circle.

The graph is read from the source with :mod:`ast`, so it sees every import a
module can run: module-level ones and those inside functions alike (a deferred
import still ties the two modules together). Relative imports are resolved;
``from pkg import name`` points at ``pkg.name`` when that is a module, else at
``pkg``. Only imports between modules of ``facesegment`` and ``pipelines``
count; a package's ``__init__`` is an edge only when it is named.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("facesegment", "pipelines")
OUTSIDE = ("pipelines", "studies", "benchmarks")
#: What kernels and estimators may not reach: the command line and the one-call API.
TOP = ("facesegment.cli", "facesegment.commands", "facesegment.api", "facesegment.__main__")


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules(packages=PACKAGES):
    """``{module name: path}`` of every ``.py`` file under the packages."""
    return {module_name(p): p for pkg in packages for p in sorted((ROOT / pkg).rglob("*.py"))}


def _base(name, path, level, module):
    """The absolute module a (possibly relative) ``from`` import names."""
    if not level:
        return module
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = package[:len(package) - (level - 1)]
    return ".".join(package + ([module] if module else []))


def imported(name, path, known):
    """``{(imported module, line)}`` of every import in one module's source."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, path, node.level, node.module)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        for target in targets:
            while target and target not in known:     # `import a.b.c` of a name inside a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add((target, node.lineno))
    return found


def import_graph(packages=PACKAGES):
    """``{module: {imported module: first line}}`` over the packages' modules."""
    modules = all_modules(packages)
    graph = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for target, line in sorted(imported(name, path, modules)):
            edges.setdefault(target, line)
    return graph


def find_cycle(graph):
    """One cycle as a list of modules (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def _describe(graph, cycle):
    return "\n".join(f"  {a} -> {b} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:]))


def is_kernel_module(name, path):
    """Numba kernel modules: ``_private`` modules with ``@njit`` kernels, and all of
    ``facesegment.dense`` / ``facesegment.forest`` (the kernels and the estimators)."""
    if name.startswith(("facesegment.dense", "facesegment.forest")):
        return True
    return name.rpartition(".")[2].startswith("_") and "@njit" in path.read_text(encoding="utf-8")


def test_the_graph_sees_every_kind_of_import(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for rel in ("pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/b.py", "pkg/c.py", "pkg/d.py"):
        (tmp_path / rel).write_text("")
    (tmp_path / "pkg" / "a.py").write_text(
        "from .sub import b\nfrom . import c as cc\n\ndef f():\n    import pkg.d\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("from ..c import NAME\n")
    (tmp_path / "pkg" / "c.py").write_text("def g():\n    from .a import f\n")
    known = {"pkg", "pkg.a", "pkg.c", "pkg.d", "pkg.sub", "pkg.sub.b"}
    names = {n: tmp_path / (n.replace(".", "/") + ".py") for n in known - {"pkg", "pkg.sub"}}
    graph = {n: {t: line for t, line in imported(n, p, known)} for n, p in names.items()}
    assert set(graph["pkg.a"]) == {"pkg.sub.b", "pkg.c", "pkg.d"}
    assert set(graph["pkg.sub.b"]) == {"pkg.c"}
    assert set(graph["pkg.c"]) == {"pkg.a"}
    assert find_cycle(graph) in (["pkg.a", "pkg.c", "pkg.a"],
                                 ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"])
    del graph["pkg.c"]
    assert find_cycle(graph) is None


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 50 and any(graph.values())
    cycle = find_cycle(graph)
    assert cycle is None, ("modules import each other in a circle (move the shared code down "
                           "into a lower module):\n" + _describe(graph, cycle))


def test_the_library_never_imports_the_layers_above_it():
    bad = []
    for name, path in all_modules(("facesegment",)).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                    else [])
            bad += [f"{name} -> {m} (line {node.lineno})" for m in mods
                    if m.split(".")[0] in OUTSIDE]
    assert not bad, "facesegment imports a layer above it:\n" + "\n".join(sorted(bad))


def test_kernels_and_estimators_never_import_the_cli_or_the_api():
    modules = all_modules(("facesegment",))
    graph = import_graph(("facesegment",))
    kernels = [n for n, p in modules.items() if is_kernel_module(n, p)]
    assert "facesegment.autocontext._context_kernels" in kernels and len(kernels) > 20
    bad = [f"{name} -> {target} (line {line})" for name in kernels
           for target, line in graph[name].items()
           if target == "facesegment" or any(target == t or target.startswith(t + ".")
                                             for t in TOP)]
    assert not bad, "a kernel module imports the command line or the API:\n" + "\n".join(bad)


@pytest.mark.parametrize("top", TOP[:3])
def test_nothing_below_reaches_the_cli_or_the_api(top):
    """Only the command line, the API and the package root lead to the top layer."""
    graph = import_graph(("facesegment",))
    allowed = ("facesegment.cli", "facesegment.commands", "facesegment.api",
               "facesegment.__main__", "facesegment.faces.segment")
    bad = [f"{name} -> {target} (line {line})" for name, edges in graph.items()
           for target, line in edges.items()
           if (target == top or target.startswith(top + ".")) and not name.startswith(allowed)]
    assert not bad, f"a library module imports {top}:\n" + "\n".join(bad)


#: The root's cross-cutting modules: every layer may use them, they use only each other.
FOUNDATION = tuple(f"facesegment.{m}" for m in ("errors", "atomic", "limits", "bounds", "progress",
                                                 "parallel", "_jit", "classes", "layout", "extras",
                                                 "position"))
#: What the data layer (datasets, splits, windows, extraction) may not reach.
ABOVE_DATA = tuple(f"facesegment.{p}" for p in ("faces", "autocontext", "modelio", "evaluation",
                                                "dense", "forest", "commands", "models", "api",
                                                "cli", "rule", "warmup"))


def _edges_out_of(prefixes, into):
    graph = import_graph(("facesegment",))
    return [f"{name} -> {target} (line {line})" for name, edges in graph.items()
            if name.startswith(prefixes) for target, line in edges.items()
            if any(target == t or target.startswith(t + ".") for t in into)]


def test_the_foundation_modules_import_only_each_other():
    graph = import_graph(("facesegment",))
    assert all(m in graph for m in FOUNDATION)
    bad = [f"{m} -> {t} (line {line})" for m in FOUNDATION for t, line in graph[m].items()
           if t not in FOUNDATION]
    assert not bad, "a cross-cutting root module imports a layer above it:\n" + "\n".join(bad)


def test_the_data_layer_imports_no_model_face_or_evaluation_code():
    assert "facesegment.data.extract" in all_modules(("facesegment",))
    bad = _edges_out_of(("facesegment.data.",), ABOVE_DATA)
    assert not bad, "facesegment.data imports a layer above it:\n" + "\n".join(bad)
