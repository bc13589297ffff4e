"""Every public function and every large kernel says what its parameters are.

A public function or method (its name does not start with ``_``) that takes
parameters besides ``self``/``cls``, and every ``@njit`` kernel with more than
five parameters, has a numpydoc ``Parameters`` section in its docstring.  The
source is read with :mod:`ast`, so nothing is imported.  :data:`PENDING` names
the modules not yet complete; it may only shrink (a listed module that is
complete fails, so the list stays exact).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "facesegment"
#: Kernels with more parameters than this need a Parameters section even when private.
KERNEL_PARAMETERS = 5
#: Modules (relative to the repository) whose functions are not all documented yet.
PENDING = frozenset()


def _parameters(node):
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
             if a.arg not in ("self", "cls")]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return names


def _is_kernel(node):
    """An ``@njit`` kernel."""
    return any("njit" in ast.unparse(d) for d in node.decorator_list)


def undocumented(path):
    """``[(line, name)]`` of the functions of one module that need a Parameters
    section and have none."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = _parameters(node)
        public = not node.name.startswith("_") and bool(names)
        kernel = _is_kernel(node) and len(names) > KERNEL_PARAMETERS
        if (public or kernel) and "Parameters" not in (ast.get_docstring(node) or ""):
            out.append((node.lineno, node.name))
    return out


MODULES = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("module", MODULES)
def test_public_functions_document_their_parameters(module):
    missing = undocumented(ROOT / module)
    if module in PENDING:
        assert missing, f"{module} is complete: remove it from PENDING"
        return
    assert not missing, (f"{module}: no numpydoc Parameters section in "
                         + ", ".join(f"{name} (line {line})" for line, name in missing))


def test_pending_lists_existing_modules():
    assert PENDING <= set(MODULES)


def test_the_check_sees_a_missing_section(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('def f(a):\n    """Sum."""\n\n\ndef g(a):\n    """Sum.\n\n    Parameters\n'
                   '    ----------\n    a : int\n    """\n\n\ndef _h(a):\n    pass\n\n\n'
                   '@njit(**NJIT)\ndef _k(a, b, c, d, e, f):\n    pass\n', encoding="utf-8")
    assert undocumented(src) == [(1, "f"), (19, "_k")]
