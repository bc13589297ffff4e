"""facesegment/_jit.py: Numba options decided in one place, kernels cached under
names that carry the package's source tag, and nothing done at import."""

import ast
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import facesegment
from facesegment import _jit

PACKAGE = Path(facesegment.__file__).resolve().parent
#: The files allowed to call Numba's decorators themselves.
OPTION_FILES = {"_jit.py"}
#: Numba's compiling decorators (options must come from facesegment/_jit.py).
DECORATORS = {"njit", "jit", "vectorize", "guvectorize", "stencil", "generated_jit"}

FIX = ("fix: import the decorator and an option set from facesegment/_jit.py "
       "(`from .._jit import NJIT, njit`, dots as deep as the file) and write "
       "`@njit(**NJIT)` (or `**INLINE`, `**PARALLEL`, `**FASTMATH`, `**REASSOC`; "
       "a kernel that decides splits keeps NJIT: no fast-math); never `from numba import njit`, a bare `@njit`, "
       "`fastmath=`/`cache=`/`parallel=` or a local option set")


def _kernel_files():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in OPTION_FILES:
            yield rel, path


def _problems(rel, source):
    """``file:line: what`` for every Numba option written outside facesegment/_jit.py."""
    out = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
            bad = [a.name for a in node.names if a.name in DECORATORS]
            if bad:
                out.append(f"{rel}:{line}: imports {', '.join(bad)} from numba")
        if isinstance(node, ast.Attribute) and node.attr in DECORATORS \
                and isinstance(node.value, ast.Name) and node.value.id == "numba":
            out.append(f"{rel}:{line}: numba.{node.attr}")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                name = dec.func if isinstance(dec, ast.Call) else dec
                name = getattr(name, "id", getattr(name, "attr", None))
                if name in DECORATORS:
                    if not isinstance(dec, ast.Call):
                        out.append(f"{rel}:{dec.lineno}: bare @{name} on {node.name}")
                        continue
                    ok = (not dec.args and len(dec.keywords) == 1
                          and dec.keywords[0].arg is None
                          and isinstance(dec.keywords[0].value, ast.Name)
                          and dec.keywords[0].value.id in _jit.OPTIONS)
                    if not ok:
                        out.append(f"{rel}:{dec.lineno}: @{ast.unparse(dec)} on {node.name}")
        if isinstance(node, ast.keyword) and node.arg in ("fastmath", "cache", "nogil",
                                                          "parallel", "boundscheck", "error_model"):
            out.append(f"{rel}:{line}: {node.arg}= written in the file")
        if isinstance(node, ast.Constant) and node.value in ("reassoc", "contract", "arcp", "nsz",
                                                             "afn", "nnan", "ninf"):
            out.append(f"{rel}:{line}: a fast-math flag ({node.value!r}) written in the file")
    return out


def test_numba_options_are_written_only_in_facesegment_jit():
    problems = []
    for rel, path in _kernel_files():
        problems += _problems(rel, path.read_text())
    assert not problems, "\n".join(problems + [FIX])


@pytest.mark.parametrize("source, what", [
    ("from numba import njit\n@njit(cache=True)\ndef f(x):\n    return x\n",
     ["imports njit from numba", "@njit(cache=True) on f", "cache= written"]),
    ("import numba\n@numba.njit\ndef f(x):\n    return x\n", ["numba.njit", "bare @njit on f"]),
    ("from .._jit import njit\n_FM = {'reassoc', 'contract'}\n@njit(fastmath=_FM)\n"
     "def f(x):\n    return x\n", ["fast-math flag ('reassoc')", "fastmath= written"]),
    ("from .._jit import NJIT, njit\n@njit(**NJIT)\ndef f(x):\n    return x\n", []),
])
def test_the_options_check_catches_options_written_elsewhere(source, what):
    """The check above fails on a new kernel file written the old way (a local
    option set, a literal fast-math, a bare or numba's own @njit)."""
    found = "\n".join(_problems("forest/_new_kernels.py", source))
    for w in what:
        assert w in found, found
    assert bool(found) == bool(what)


def test_njit_accepts_only_the_option_sets():
    with pytest.raises(TypeError, match=r"Numba options \{'cache': True\} are not one of "
                                        r"facesegment._jit's sets .*write @njit\(\*\*NJIT\)"):
        _jit.njit(cache=True)
    assert _jit.OPTIONS["NJIT"] == {"cache": True, "nogil": True}
    for name, opts in _jit.OPTIONS.items():
        assert opts["cache"] and opts["nogil"], name


def _kernel_modules():
    for info in pkgutil.walk_packages([str(PACKAGE)], "facesegment."):
        if info.name.startswith(("facesegment.commands", "facesegment.cli",
                                 "facesegment.__main__", "facesegment.faces.label")):
            continue
        yield importlib.import_module(info.name)


def test_every_kernel_is_named_with_the_source_tag():
    """Numba's disk cache only checks a kernel's own file, and kernels call
    kernels (and read constants) of other files: each kernel's name carries a
    digest of all the package's sources, so a changed source compiles anew
    under a new name instead of being served a kernel built from the old one."""
    from numba.core.dispatcher import Dispatcher

    tag = _jit.source_tag()
    assert tag == _jit.source_digest()[:10]
    seen = 0
    for module in _kernel_modules():
        for name, obj in vars(module).items():
            if isinstance(obj, Dispatcher) and obj.py_func.__module__ == module.__name__:
                assert obj.py_func.__qualname__.endswith(f"__src{tag}"), (module.__name__, name)
                assert type(obj._cache).__name__ == "FunctionCache", (module.__name__, name)
                seen += 1
    assert seen > 50


def test_the_source_tag_follows_every_file(tmp_path):
    (tmp_path / "a.py").write_text("X = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("Y = 2\n")
    first = _jit.source_digest(tmp_path)
    assert _jit.source_digest(tmp_path) == first
    (tmp_path / "sub" / "b.py").write_text("Y = 3\n")
    assert _jit.source_digest(tmp_path) != first


def test_stale_cache_files_are_the_other_tags(tmp_path):
    tag = _jit.source_tag()
    cache = tmp_path / "forest" / "__pycache__"
    cache.mkdir(parents=True)
    names = [f"_criteria.gini__src{tag}-17.py311.nbi", f"_criteria.gini__src{tag}-17.py311.1.nbc",
             "_criteria.gini__src0123456789-17.py311.nbi", "_criteria.gini-17.py311.nbi",
             "_criteria.cpython-311.pyc"]
    for n in names:
        (cache / n).write_bytes(b"")
    assert [p.name for p in _jit.stale_cache_files(tmp_path)] == [
        "_criteria.gini-17.py311.nbi", "_criteria.gini__src0123456789-17.py311.nbi"]


def _snapshot(root):
    return {p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in root.rglob("*") if p.is_file()}


def test_importing_the_package_writes_and_deletes_nothing(tmp_path):
    """``import facesegment`` (and its library modules) leaves the package's
    files as they were (no cache pruning, no stamp), probes no CPU and leaves
    matplotlib's backend alone, even when a figure is drawn.  A copy of the
    package is imported, so that tests compiling kernels in other processes
    cannot touch the tree it watches."""
    import shutil

    package = tmp_path / "facesegment"
    shutil.copytree(PACKAGE, package)
    before = _snapshot(package)
    code = """
import json, matplotlib
backend = matplotlib.get_backend()
import facesegment
import facesegment.forest, facesegment.dense, facesegment.evaluation.figures, facesegment.evaluation.scoring
import facesegment.faces.segment, facesegment.cli
from facesegment.dense import _simd
probed = _simd.form.cache_info().currsize
fig, ax = facesegment.evaluation.figures.subplots(figsize=(2, 2))
ax.plot([0, 1], [0, 1])
print(json.dumps({"probed": probed, "backend": [backend, matplotlib.get_backend()],
                  "pyplot": "matplotlib.pyplot" in __import__("sys").modules}))
"""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="svg",
               PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code + "assert facesegment.__file__.startswith("
                          f"{str(tmp_path)!r})\n"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"probed": 0, "backend": ["svg", "svg"], "pyplot": False}
    assert _snapshot(package) == before
