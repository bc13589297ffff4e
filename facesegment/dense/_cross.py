"""Numba kernels compiled to assembly for another CPU than this one (private).

Numba compiles for the process's own CPU only.  To see what a kernel becomes
on another target (aarch64 with NEON, an AVX2-only x86), :func:`captured_ir`
records the LLVM IR modules Numba lowers while it is active, before any
optimisation (so before the host CPU's cost model or instruction set has
touched them), and :func:`assembly` links them, gives them the other
target's triple and data layout, runs LLVM's ``O3`` pipeline for that target
machine (loop and SLP vectorisation on, as Numba does) and emits its
assembly.  Nothing is run: the code is compiled and assembled for the target,
not executed.

Numba lays out its structures (arrays, tuples) for the process's target when
it lowers; the 64-bit targets used here (x86-64, aarch64) share those sizes
and alignments.  IR that names another architecture's intrinsics
(``llvm.x86.*``) is refused with one readable line before LLVM sees it (its
backend would abort the process).  The tests use this for the portable form
of :mod:`facesegment.dense._simd` (tests/dense/test_aarch64.py).
"""

import collections
import contextlib
import re
import threading

from llvmlite import binding as llvm
from numba.core import codegen

from ..errors import FaceSegmentError

#: The triples the tests compile for.
AARCH64 = "aarch64-unknown-linux-gnu"
X86_64 = "x86_64-unknown-linux-gnu"

#: Intrinsic prefixes of each architecture (``llvm.<prefix>.``), by the
#: first part of a triple.
_INTRINSICS = {"x86_64": "x86", "i686": "x86", "i386": "x86", "aarch64": "aarch64",
               "arm": "arm", "powerpc64le": "ppc", "powerpc64": "ppc", "riscv64": "riscv",
               "s390x": "s390", "wasm32": "wasm", "nvptx64": "nvvm", "amdgcn": "amdgcn"}

_INIT_LOCK = threading.Lock()
_CAPTURE_LOCK = threading.Lock()
_READY = []


def _initialise():
    """Every target LLVM was built with, and their assembly printers (once)."""
    with _INIT_LOCK:
        if not _READY:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _READY.append(True)


def has_target(triple):
    """Whether this llvmlite build can compile for ``triple`` (some builds carry
    only the host's backend).

    Parameters
    ----------
    triple : str
        An LLVM target triple (:data:`AARCH64`, :data:`X86_64`).

    Returns
    -------
    bool
        True when ``llvm.Target.from_triple(triple)`` succeeds.
    """
    _initialise()
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError:
        return False
    return True


@contextlib.contextmanager
def captured_ir():
    """Record the IR of every module Numba lowers inside the ``with`` block.

    Yields a list that receives the modules' text (unoptimised).  A kernel
    served from Numba's disk cache, or compiled before the block, is not
    lowered again: compile a fresh, uncached dispatcher inside it."""
    modules = []
    add = codegen.CPUCodeLibrary.add_ir_module

    def recording(library, ir_module):
        """Append ``ir_module``'s text to the yielded list, then add it as usual.

        Parameters
        ----------
        library : numba.core.codegen.CPUCodeLibrary
            The library the module is added to.
        ir_module : llvmlite.ir.Module
            The module Numba lowered.

        Returns
        -------
        object
            What ``CPUCodeLibrary.add_ir_module`` returns.
        """
        modules.append(str(ir_module))
        return add(library, ir_module)

    with _CAPTURE_LOCK:
        codegen.CPUCodeLibrary.add_ir_module = recording
        try:
            yield modules
        finally:
            codegen.CPUCodeLibrary.add_ir_module = add


def _foreign_intrinsics(module, triple):
    """The intrinsics of ``module`` that belong to another architecture than
    ``triple``'s."""
    own = _INTRINSICS.get(triple.split("-")[0])
    foreign = {f"llvm.{p}." for p in _INTRINSICS.values() if p != own}
    return sorted(f.name for f in module.functions if f.name.startswith(tuple(foreign)))


def _linked(modules, triple, target_data):
    """One module of the IR texts ``modules``, retargeted to ``triple``."""
    out = None
    for text in modules:
        m = llvm.parse_assembly(text)
        m.triple = triple
        m.data_layout = str(target_data)
        if out is None:
            out = m
        else:
            out.link_in(m)
    if out is None:
        raise FaceSegmentError("no IR to compile: Numba lowered nothing inside "
                               "captured_ir() (compile an uncached dispatcher there)")
    out.verify()
    return out


def assembly(modules, triple, cpu="generic", features=""):
    """The assembly of the IR texts ``modules`` (:func:`captured_ir`) compiled
    for ``triple`` (e.g. :data:`AARCH64`), CPU ``cpu`` and LLVM ``features``
    (``"+neon,+dotprod"``) at ``O3``.  Refuses IR naming another
    architecture's intrinsics, and a target this llvmlite lacks.

    Parameters
    ----------
    modules : list of str
        LLVM IR texts, linked into one module (the list :func:`captured_ir`
        yields).
    triple : str
        The target triple the module is compiled for.
    cpu : str, optional
        The target CPU (LLVM's name; ``"generic"`` by default).
    features : str, optional
        LLVM target features, comma-separated (``"+neon,+dotprod"``).

    Returns
    -------
    str
        The target's assembly text after LLVM's ``O3`` pipeline (loop and SLP
        vectorisation on).

    Raises
    ------
    FaceSegmentError
        When this llvmlite has no backend for ``triple``, ``modules`` is empty,
        or the IR calls another architecture's intrinsics (``llvm.x86.*`` for
        aarch64, ...).
    """
    if not has_target(triple):
        raise FaceSegmentError(f"this llvmlite has no backend for {triple} "
                               "(llvm.Target.from_triple fails)")
    tm = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="pic", codemodel="default")
    module = _linked(modules, triple, tm.target_data)
    foreign = _foreign_intrinsics(module, triple)
    if foreign:
        raise FaceSegmentError(f"the IR calls {', '.join(foreign)}, which {triple} does not "
                               "have (compile a form that names no such intrinsic)")
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    return tm.emit_assembly(module)


def mnemonics(asm, vector=False):
    """How often each instruction occurs in ``asm`` (a Counter of mnemonics;
    directives and labels skipped).  ``vector``: only instructions with an
    aarch64 vector register operand (``v0.4s``, ``q1``).

    Parameters
    ----------
    asm : str
        Assembly text (:func:`assembly`).
    vector : bool, optional
        Count only instructions with an aarch64 vector register operand.

    Returns
    -------
    collections.Counter
        ``{mnemonic: occurrences}``; comments (``//``, ``#``) are ignored when
        looking for vector operands.
    """
    counts = collections.Counter()
    for line in asm.splitlines():
        m = re.match(r"\s+([a-z][a-z0-9.]*)\b(.*)", line)
        if m is None or m.group(1).startswith("."):
            continue
        ops = m.group(2).split("//")[0].split("#")[0]
        if vector and not re.search(r"\bv\d+\.\d*[bhsd]\b|\bq\d+\b", ops):
            continue
        counts[m.group(1)] += 1
    return counts


__all__ = ["AARCH64", "X86_64", "has_target", "captured_ir", "assembly", "mnemonics"]
