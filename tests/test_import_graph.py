"""Layers point one way and no modules import each other in a circle.

The graph is read from the source with :mod:`ast`, so it sees every import a
module can run: module-level ones and those inside functions alike (a deferred
import still ties the two modules together). Relative imports are resolved;
``from pkg import name`` points at ``pkg.name`` when that is a module, else at
``pkg``. Only imports between modules of ``facesegment`` and ``pipelines``
count; a package's ``__init__`` is an edge only when it is named.

The same graph, with each subpackage of ``facesegment`` (and each module at its
root) as one node, orders the library in layers (:data:`LAYERS`). A module
imports the package's own modules at module level; an import inside a function
is kept only where it keeps an optional dependency or the command line's
start-up lazy, and says why on its line (``# lazy: <reason>``).
"""

import ast
import re
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


# ------------------------------------------------------------ subpackages and layers

def subpackage(name):
    """The node of a ``facesegment`` module: its subpackage, or itself at the root."""
    return ".".join(name.split(".")[:2])


def subpackage_graph():
    """``{node: {imported node: "module -> module (line n)"}}`` over ``facesegment``."""
    graph = {}
    for name, edges in import_graph(("facesegment",)).items():
        out = graph.setdefault(subpackage(name), {})
        for target, line in edges.items():
            if subpackage(target) != subpackage(name):
                out.setdefault(subpackage(target), f"{name} -> {target} (line {line})")
    return graph


def strongly_connected(graph):
    """The node sets of ``graph`` that import each other in a circle (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(frozenset(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


_F = "facesegment."
#: The library's layers, lowest first: a node imports only its own layer and those below.
#: kernels and estimators (``forest``) <- data <- reweighting <- dense inference and the
#: decision rule <- evaluation <- photos (``faces``) <- the forest model and its folder
#: (``modelio``) <- cascades (``autocontext``) <- every model kind and the shipped models
#: (``models``) <- the one-call API <- the command line.
LAYERS = (
    ("facesegment",) + tuple(_F + m for m in (
        "errors", "layout", "position", "progress", "_jit", "_lazy", "bounds", "atomic",
        "extras", "classes", "limits", "parallel")),
    (_F + "forest",),
    (_F + "data",),
    (_F + "reweight",),
    (_F + "dense", _F + "rule"),
    (_F + "evaluation",),
    (_F + "faces",),
    (_F + "modelio",),
    (_F + "autocontext",),
    (_F + "models",),
    (_F + "warmup", _F + "api"),
    (_F + "commands", _F + "cli", _F + "__main__"),
)


def test_every_subpackage_has_a_layer():
    layered = [node for layer in LAYERS for node in layer]
    assert len(layered) == len(set(layered))
    missing = set(subpackage_graph()) - set(layered)
    assert not missing, f"give these a layer in LAYERS: {sorted(missing)}"


def test_no_subpackage_cycles():
    graph = subpackage_graph()
    cycles = strongly_connected(graph)
    assert not cycles, "subpackages import each other in a circle (move the shared code down a "\
        "layer):\n" + "\n".join(
            "  " + graph[a][b] for c in cycles for a in sorted(c) for b in sorted(graph[a]) if b in c)


def test_subpackage_layers_point_one_way():
    layer_of = {node: i for i, layer in enumerate(LAYERS) for node in layer}
    bad = [why for node, edges in subpackage_graph().items() for target, why in edges.items()
           if layer_of.get(target, 0) > layer_of.get(node, 0)]
    assert not bad, "a layer imports one above it (see LAYERS):\n" + "\n".join(sorted(bad))


def test_the_subpackage_graph_sees_function_level_imports(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("def f():\n    from .b import g  # lazy: why\n")
    found = imported("pkg.a", tmp_path / "pkg" / "a.py", {"pkg", "pkg.a", "pkg.b"})
    assert found == {("pkg.b", 2)}
    assert [line for *_, line in function_level_imports("pkg.a", tmp_path / "pkg" / "a.py")] \
        == ["    from .b import g  # lazy: why"]
    assert subpackage("facesegment.faces.label") == "facesegment.faces"
    assert subpackage("facesegment.rule") == "facesegment.rule"
    assert strongly_connected({"a": {"b": ""}, "b": {"a": ""}, "c": {"a": ""}}) \
        == [frozenset({"a", "b"})]


# ------------------------------------------------------------ imports inside functions

#: Imports of the package's own modules inside functions, at most (each with a reason).
MAX_FUNCTION_LEVEL = 30
#: Their reasons are checked everywhere but here: ``facesegment.forest`` keeps its own
#: until its modules are rearranged (they still count towards the limit).
REASONS_LATER = ("facesegment.forest",)


def function_level_imports(name, path):
    """``[(line number, source line)]`` of the imports of its own package's modules
    inside the functions of one module (the first line of a statement)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [_base(name, path, node.level, node.module)]
                    if isinstance(node, ast.ImportFrom) else [])
            if any(m.split(".")[0] == name.split(".")[0] for m in mods if m):
                found.append((node.lineno, lines[node.lineno - 1]))
    return sorted(set(found))


def _own_function_level_imports():
    return [(name, path, line, text) for name, path in all_modules(("facesegment",)).items()
            for line, text in function_level_imports(name, path)]


def test_few_imports_inside_functions():
    found = _own_function_level_imports()
    assert len(found) <= MAX_FUNCTION_LEVEL, (
        f"{len(found)} imports of facesegment's modules inside functions (at most "
        f"{MAX_FUNCTION_LEVEL}): import them at module level\n"
        + "\n".join(f"  {p.relative_to(ROOT)}:{line}" for _, p, line, _ in found))


def test_each_import_inside_a_function_says_why():
    bad = [f"  {p.relative_to(ROOT)}:{line}: {text.strip()}"
           for name, p, line, text in _own_function_level_imports()
           if not name.startswith(REASONS_LATER)
           and not re.search(r"#\s*lazy:\s*\S", text)]
    assert not bad, ("an import inside a function without `# lazy: <reason>` (import it at "
                     "module level, or say which dependency or start-up it keeps lazy):\n"
                     + "\n".join(bad))
