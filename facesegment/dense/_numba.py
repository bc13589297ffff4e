"""Numba options of every dense-inference kernel, and their compilation per window layout.

Options
-------
Every kernel of :mod:`facesegment.dense` is compiled with one of the option
sets of :mod:`facesegment._jit` (re-exported here), the one place where the
package's Numba options are decided.

Layout templates
----------------
The window layout (:class:`facesegment.layout.WindowLayout`) reaches the
kernels as compile-time constants: ``WINDOW`` (side of the window),
``CHANNELS`` (planes per pixel) and ``ROW = WINDOW * CHANNELS`` (contiguous
values per window row), plus ``SPAN`` (``ROW`` rounded up to a multiple of
8: the row length of :mod:`facesegment.dense._pooled_oblique`).  A function that uses
them is a *template*: it is marked with :func:`template` and never run as it stands (the names are
``None`` in its module); :func:`layout_kernels` compiles a module's templates
for one ``(window, channels)`` with the names bound to that layout's
values, and every template a template calls bound to its compiled
counterpart for the same layout.

Why constants and not arguments: the CO2 dot products loop over window rows
of ``ROW`` values, and LLVM unrolls and vectorises a loop of known length
much better.  Measured on this machine (one thread, the 8-window dot of
:mod:`facesegment.dense._oblique_forests`, 31x31x3): 47 GFLOP/s with the row length a
constant against 35 with it a run-time argument (and 28 with
``numba.literally``, whose literal values do not survive ``prange``).  A
constant also makes a 31x31x3 kernel compile to the same code as the loops
written with the numbers 31 and 93, so its results are bit-identical to
theirs.

Each compiled layout is cached on disk like any ``cache=True`` kernel: its
functions are named ``NAME__<window>x<channels>__src<tag>`` (e.g.
``dense_proba_levels__31x3__src0123456789``), so the cache files of different
layouts never mix, and the tag (a digest of the package's sources,
:func:`facesegment._jit.source_tag`) makes an edited source compile anew
instead of being served a kernel built from its older version.  A new layout
compiles the kernels it uses on their first call (a few seconds each on the
2-core machine), then loads them from the cache (under a second).
"""

import threading
import types
import warnings

import numba

from .._jit import FASTMATH, INLINE, NJIT, PARALLEL, source_tag

_MARK = "_dense_layout_template"
_COMPILED = {}
_LOCK = threading.Lock()


def span(window, channels, multiple=8):
    """``SPAN``: a window row's ``window * channels`` values rounded up to a
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


def template(options):
    """Mark a function as a layout template compiled with Numba ``options``.

    Parameters
    ----------
    options : dict
        Keyword arguments of ``numba.njit`` (one of the option sets, e.g.
        ``PARALLEL``); copied when the function is marked.

    Returns
    -------
    callable
        The decorator: it stores the options on the function and returns the
        function itself, uncompiled.
    """
    def mark(func):
        """Store the options on ``func`` (its template mark).

        Parameters
        ----------
        func : function
            A module-level function that uses the layout constants.

        Returns
        -------
        function
            ``func`` itself.
        """
        setattr(func, _MARK, dict(options))
        return func

    return mark


def layout_kernels(module, window, channels, variant=None):
    """The templates of ``module`` compiled for ``window`` x ``window`` x ``channels``.

    Parameters
    ----------
    module : module
        A kernel module of :mod:`facesegment.dense` (its templates are the
        functions marked with :func:`template`).
    window, channels : int
        The layout (``layout.window``, ``layout.channels``).
    variant : str, optional
        A key of ``module.VARIANTS``: a function of ``(window, channels)``
        returning more names to bind (e.g. another ``SPAN``, an intrinsic) and
        ``aliases`` (``{name: template}``: calls to ``name`` go to that
        template instead) and ``tag`` (appended to the names: Numba's disk
        cache only notices changes to the template's own file, so a variant
        built on code from another file tags its names with that code's
        digest).  The compiled names end in ``_<variant><tag>``, so the disk
        cache keeps variants apart.

    Returns
    -------
    types.SimpleNamespace
        One Numba dispatcher per template, by name, plus ``window``,
        ``channels`` and ``row``.  Built once per (module, window, channels)
        and process (thread-safe); dispatchers compile on their first call.
    """
    key = (module.__name__, int(window), int(channels), variant)
    with _LOCK:
        kernels = _COMPILED.get(key)
        if kernels is None:
            _quiet_parallel_passes()
            kernels = _COMPILED[key] = _specialise(module, key[1], key[2], variant)
    return kernels


def _quiet_parallel_passes():
    """Silence Numba's note that a ``parallel=True`` kernel has no ``prange``
    (the fast block kernels take that option for its passes, not for threads:
    see :mod:`facesegment.dense._probe_forests`); set on first use, not at import."""
    from numba.core.errors import NumbaPerformanceWarning

    warnings.filterwarnings("ignore", message=r"\s*The keyword argument 'parallel=True' was "
                            "specified but no transformation", category=NumbaPerformanceWarning)


def _specialise(module, window, channels, variant=None):
    env = dict(vars(module))
    env.update(WINDOW=window, CHANNELS=channels, ROW=window * channels,
               SPAN=span(window, channels))
    suffix = f"__{window}x{channels}"
    aliases = {}
    if variant is not None:
        binds = dict(module.VARIANTS[variant](window, channels))
        aliases = binds.pop("aliases", {})
        suffix += f"_{variant}" + binds.pop("tag", "")
        env.update(binds)
    compiled = {}
    for name, func in vars(module).items():
        options = getattr(func, _MARK, None)
        if options is None or getattr(func, "__module__", None) != module.__name__:
            continue
        clone = types.FunctionType(func.__code__, env, func.__name__, func.__defaults__,
                                   func.__closure__)
        clone.__qualname__ = func.__qualname__ + suffix + "__src" + source_tag()
        clone.__doc__ = func.__doc__
        compiled[name] = env[name] = numba.njit(**options)(clone)
    for name, target in aliases.items():
        compiled[name] = env[name] = compiled[target]
    return types.SimpleNamespace(window=window, channels=channels, row=window * channels,
                                 **compiled)


__all__ = ["NJIT", "FASTMATH", "INLINE", "PARALLEL", "span", "template", "layout_kernels"]
