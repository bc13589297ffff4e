"""Numba options of every dense-inference kernel, and the kernel layout type.

Options
-------
Every kernel of :mod:`facesegment.dense` is compiled with one of the option
sets of :mod:`facesegment._jit` (re-exported here), the one place where the
package's Numba options are decided.

Kernel layouts
--------------
The window layout (:class:`facesegment.layout.WindowLayout`) reaches the
kernels as their first argument, ``lay``, a :class:`KernelLayout`: the side
of the window, the planes per pixel and a *form* (which node family or which
integer dot the kernel serves).  Numba types it by its values
(``KernelLayout(31x3)``, ``KernelLayout(10x3,u8vnni)``), so a kernel is
compiled once per layout, like once per array dtype, and inside the kernel
its attributes are compile-time constants:

``lay.window``, ``lay.channels``
    The window's side and the planes per pixel.
``lay.row``
    ``window * channels``: contiguous values per window row.
``lay.span``
    ``row`` rounded up to the form's granule (:func:`span`; 8 float32 values,
    32 bytes for the integer dots, 16 values for the AVX2 form): the row
    length of :mod:`facesegment.dense._pooled_oblique`.
``lay.mode``
    The node family of :mod:`facesegment.dense._probe_forests` (0 axis-aligned,
    1 two-probe, 2 sparse; -1 for the other forms).
``lay.integer``, ``lay.planes``, ``lay.head``
    Whether the form's dots are exact integers; the int8 planes of a weight
    row (2 for int16 rows split into bytes) and the mask bytes before them.

A helper whose *code* differs by form (the 8-window dot, the threshold a dot
is compared with, the descent step of a node family) is one Python stub with a
Numba ``overload`` that picks the implementation from ``lay``'s form when
the caller is typed, so a kernel compiles only the code its form runs.

Why constants and not plain integer arguments: the CO2 dot products loop over
window rows of ``row`` values, and LLVM unrolls and vectorises a loop of known
length much better.  Measured (one thread, the 8-window dot of
:mod:`facesegment.dense._oblique_forests`, 31x31x3, in cache): 44 GFLOP/s with
the row length a constant of the layout's type, the same as with the number 93
written in the loop, against 34 with it an integer argument.  A constant also makes a 31x31x3 kernel compile to the same code as
the loops written with the numbers 31 and 93, so its results are
bit-identical to theirs.

Each layout's machine code is cached on disk like any ``cache=True`` kernel
(the layout is part of the signature Numba's cache index is keyed by); the
kernels' names carry the package's source tag
(:func:`facesegment._jit.source_tag`), so an edited source compiles anew
instead of being served a kernel built from its older version.  A new layout
compiles the kernels it uses on their first call (a few seconds each on the
2-core machine), then loads them from the cache (under a second).
"""

import functools
import inspect
import threading
import types as pytypes
import warnings
from typing import NamedTuple

from numba import types
from numba.core.dispatcher import Dispatcher
from numba.core.errors import NumbaPerformanceWarning
from numba.extending import (NativeValue, models, overload_attribute, register_model,
                             typeof_impl, unbox)

from .._jit import FASTMATH, INLINE, NJIT, PARALLEL
from ._simd import CHUNK, CHUNK16


class Form(NamedTuple):
    """What a kernel form fixes besides the window: ``lay.span``'s granule
    (``step``), the probe kernels' node family (``mode``), and whether the dots
    are exact integers over one or two int8 planes (``integer``, ``wide``)."""

    step: int = 8
    mode: int = -1
    integer: bool = False
    wide: bool = False


#: Every form, by name (None: the float32 kernels of any forest).  The probe
#: kernels' node families (:mod:`facesegment.dense._probe_forests`) and the
#: integer dots of :mod:`facesegment.dense._pooled_oblique` (:mod:`._simd`:
#: int8 rows ``u8``, int16 rows as two int8 planes ``u8x2``, each with
#: ``vpdpbusd`` (``...vnni``) or portable; the AVX2 form ``i16avx2``).
FORMS = {None: Form(),
         "axis": Form(mode=0), "twoprobe": Form(mode=1), "sparse": Form(mode=2),
         "u8vnni": Form(CHUNK, integer=True), "u8": Form(CHUNK, integer=True),
         "u8x2vnni": Form(CHUNK, integer=True, wide=True),
         "u8x2": Form(CHUNK, integer=True, wide=True),
         "i16avx2": Form(CHUNK16, integer=True)}


def span(window, channels, multiple=8):
    """``lay.span``: a window row's ``window * channels`` values rounded up to a
    multiple of ``multiple`` (8 float32 values, or 32 bytes for the integer
    kernels).

    Parameters
    ----------
    window, channels : int
        The layout (``layout.window``, ``layout.channels``).
    multiple : int, optional
        The granule rounded up to (8 by default).

    Returns
    -------
    int
        The smallest multiple of ``multiple`` at least ``window * channels``.
    """
    return -(-window * channels // multiple) * multiple


class KernelLayout:
    """A window layout as the dense kernels take it (their first argument).

    Parameters
    ----------
    window, channels : int
        The window's side and the planes per pixel.
    form : str or None
        A key of :data:`FORMS`.

    Raises
    ------
    ValueError
        An unknown ``form``, or a window or channel count below 1.
    """

    __slots__ = ("window", "channels", "form")

    def __init__(self, window, channels, form=None):
        if form not in FORMS:
            raise ValueError(f"kernel form {form!r} is not one of {sorted(map(str, FORMS))}")
        if int(window) < 1 or int(channels) < 1:
            raise ValueError(f"kernel layout {window}x{channels}: window and channels "
                             "must be at least 1")
        self.window, self.channels, self.form = int(window), int(channels), form

    def __repr__(self):
        return f"KernelLayout({self.window}, {self.channels}, {self.form!r})"

    def __eq__(self, other):
        return isinstance(other, KernelLayout) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _key(self):
        return (self.window, self.channels, self.form)


class KernelLayoutType(types.Type):
    """Numba's type of a :class:`KernelLayout`: its values are the type's
    parameters (the value itself carries no data)."""

    def __init__(self, window, channels, form):
        self.window, self.channels, self.form = window, channels, form
        suffix = "" if form is None else f",{form}"
        super().__init__(name=f"KernelLayout({window}x{channels}{suffix})")

    @property
    def key(self):
        return (self.window, self.channels, self.form)

    @property
    def spec(self):
        """The form's :class:`Form`."""
        return FORMS[self.form]


@typeof_impl.register(KernelLayout)
def _typeof_layout(val, c):
    return KernelLayoutType(val.window, val.channels, val.form)


register_model(KernelLayoutType)(models.OpaqueModel)


@unbox(KernelLayoutType)
def _unbox_layout(typ, obj, c):
    return NativeValue(c.context.get_constant_null(types.voidptr))


def _constant(value_of):
    """An attribute of :class:`KernelLayoutType` that is the constant
    ``value_of(type)`` in compiled code."""
    def _typer(lay):
        value = value_of(lay)
        return lambda lay: value
    return _typer


_ATTRIBUTES = {
    "window": lambda t: t.window,
    "channels": lambda t: t.channels,
    "row": lambda t: t.window * t.channels,
    "span": lambda t: span(t.window, t.channels, t.spec.step),
    "mode": lambda t: t.spec.mode,
    "integer": lambda t: t.spec.integer,
    "planes": lambda t: 2 if t.spec.wide else 1,
    "head": lambda t: 8 if t.spec.wide else 0,
}
for _name, _value_of in _ATTRIBUTES.items():
    overload_attribute(KernelLayoutType, _name, inline="always")(_constant(_value_of))


def form_of(lay):
    """The form name of a typed layout (in an ``overload``'s typing function).

    Parameters
    ----------
    lay : KernelLayoutType
        The type Numba gives the kernel's ``lay`` argument.

    Returns
    -------
    str or None
        A key of :data:`FORMS`.

    Raises
    ------
    TypeError
        When ``lay`` is not a kernel layout's type.
    """
    if not isinstance(lay, KernelLayoutType):
        raise TypeError(f"expected a KernelLayout's type, got {lay}")
    return lay.form


_LOCK = threading.Lock()
_BOUND = {}


def layout_kernels(module, window, channels, variant=None):
    """The kernels of ``module`` bound to one kernel layout.

    Parameters
    ----------
    module : module
        A kernel module of :mod:`facesegment.dense`; its layout kernels are
        the Numba dispatchers defined there whose first argument is ``lay``.
    window, channels : int
        The layout (``layout.window``, ``layout.channels``).
    variant : str, optional
        The form (a key of :data:`FORMS`; None: float32).

    Returns
    -------
    types.SimpleNamespace
        ``layout`` (the :class:`KernelLayout`), ``window``, ``channels``,
        ``row``, and one ``functools.partial(kernel, layout)`` per layout kernel,
        by name (``.func`` is the Numba dispatcher).  Built once per (module,
        layout) and process (thread-safe); the dispatchers compile for the
        layout on their first call, or load it from the disk cache.
    """
    lay = KernelLayout(window, channels, variant)
    key = (module.__name__, lay)
    with _LOCK:
        bound = _BOUND.get(key)
        if bound is None:
            _quiet_parallel_passes()
            kernels = {name: functools.partial(obj, lay) for name, obj in vars(module).items()
                       if _takes_layout(obj, module)}
            bound = _BOUND[key] = pytypes.SimpleNamespace(
                layout=lay, window=lay.window, channels=lay.channels,
                row=lay.window * lay.channels, **kernels)
    return bound


def _takes_layout(obj, module):
    """Whether ``obj`` is a Numba kernel defined in ``module`` whose first argument
    is ``lay``."""
    if not isinstance(obj, Dispatcher) or obj.py_func.__module__ != module.__name__:
        return False
    params = list(inspect.signature(obj.py_func).parameters)
    return bool(params) and params[0] == "lay"


def _quiet_parallel_passes():
    """Silence Numba's note that a ``parallel=True`` kernel has no ``prange``
    (the fast block kernels take that option for its passes, not for threads:
    see :mod:`facesegment.dense._probe_forests`); set on first use, not at import."""
    warnings.filterwarnings("ignore", message=r"\s*The keyword argument 'parallel=True' was "
                            "specified but no transformation", category=NumbaPerformanceWarning)


__all__ = ["NJIT", "FASTMATH", "INLINE", "PARALLEL", "FORMS", "Form", "KernelLayout",
           "KernelLayoutType", "form_of", "span", "layout_kernels"]
