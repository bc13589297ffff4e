"""Numba options of every kernel of the package, and the names its disk caches use (private).

Options
-------
Every ``@njit`` of the package is written ``@njit(**NAME)`` with ``njit`` and
``NAME`` imported from here (``tests/test_jit.py`` fails on anything else:
a bare ``@njit``, ``numba.njit``, ``fastmath=...`` or ``cache=...`` written in
a kernel file, a local option set).  So caching, the GIL and fast-math are
decided in this file, once:

* :data:`NJIT`: cached on disk, releases the GIL, IEEE arithmetic in program
  order.  Every kernel whose result decides a split (training) uses it or
  :data:`INLINE`/:data:`PARALLEL`, so a forest is the same bytes whatever the
  CPU's vector width (AVX2, AVX-512): no ``reassoc`` (the order of a sum
  would follow the vector width), no ``contract`` (FMA), no ``arcp``
  (approximate reciprocals differ between instruction sets).  Long dot
  products keep their speed by a fixed order instead
  (:mod:`facesegment.forest._dots`: 8 partial sums, the same on every CPU).
* :data:`FASTMATH` (all of LLVM's fast-math flags): dense inference's
  float32 dot products, whose order the compiler may choose to vectorise
  them (a pixel within float32 rounding of a threshold may go either way on
  another CPU; the int8/int16 rows of dense inference are exact integers).
* :data:`REASSOC` (reassociation, contraction, no signed zeros, approximate
  reciprocals): the non-greedy trees' kernels.  Their forests are not part of
  the CPU-independent guarantee (their sums follow the vector width).
* :data:`INLINE`: per-node helpers inlined into their caller.
* :data:`PARALLEL`: entry kernels parallel over blocks (``prange``).

Caches
------
Numba's ``cache=True`` checks only the file of the cached function itself;
a kernel that calls a kernel of another file, or reads a constant of another
module, would be served as compiled from that file's older version.  So
:func:`njit` appends :func:`source_tag` (a digest of every ``.py`` file of
the package, computed once per process when the first kernel is defined) to
each kernel's name (the dense kernels compiled per window layout included:
:mod:`facesegment.dense._numba`): Numba's disk cache is keyed by that name, so
an edited source is never served a kernel compiled from another version of
it; it compiles anew under the new name.  (The tag is read once per process:
a process keeps the sources it imported, so edit, then start a new one.)  Nothing is deleted or written at
import.  Cache files of older sources stay until ``facesegment warmup``
(which also compiles the kernels ``segment`` uses) removes them
(:func:`stale_cache_files`).
"""

import hashlib
import threading
from pathlib import Path

import numba

#: The package whose sources the tag covers and whose caches are pruned.
ROOT = Path(__file__).resolve().parent

#: Every kernel: cached on disk, releases the GIL, IEEE arithmetic in program order.
NJIT = dict(cache=True, nogil=True)
#: All fast-math flags (results may depend on the CPU's vector width).
FASTMATH = dict(NJIT, fastmath=True)
#: Sums the compiler may reassociate (results may depend on the CPU's vector width).
REASSOC = dict(NJIT, fastmath={"reassoc", "contract", "nsz", "arcp"})
#: Per-node helpers, inlined into their caller (as calls they passed ~10 array
#: structs per node visit: 10x slower).
INLINE = dict(NJIT, inline="always")
#: Entry kernels parallel over blocks of rows or chunks of pixels (``prange``).
PARALLEL = dict(NJIT, parallel=True)

#: The option sets, by name (:func:`njit` accepts only these).
OPTIONS = {"NJIT": NJIT, "FASTMATH": FASTMATH, "REASSOC": REASSOC, "INLINE": INLINE,
           "PARALLEL": PARALLEL}

#: What separates a kernel's name from the tag of the sources it was built from.
TAG_MARK = "__src"

_TAG = None
_TAG_LOCK = threading.Lock()


def source_digest(root=ROOT):
    """SHA-256 (hex) of every ``.py`` file under ``root`` (relative names and bytes).

    Parameters
    ----------
    root : pathlib.Path, default=ROOT
        Folder whose ``.py`` files (searched recursively, in sorted order) are
        hashed; the default is the package folder.

    Returns
    -------
    str
        64 hex digits over each file's POSIX path relative to ``root`` and its bytes.
    """
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def source_tag():
    """The first 10 hex digits of :func:`source_digest` of the package, computed
    once per process (files are only read)."""
    global _TAG
    with _TAG_LOCK:
        if _TAG is None:
            _TAG = source_digest()[:10]
        return _TAG


def tagged(qualname):
    """``qualname`` with the package's source tag: the name a kernel is cached under.

    Parameters
    ----------
    qualname : str
        A kernel's qualified name.

    Returns
    -------
    str
        ``qualname`` followed by :data:`TAG_MARK` and :func:`source_tag`.
    """
    return f"{qualname}{TAG_MARK}{source_tag()}"


def _option_name(options):
    for name, value in OPTIONS.items():
        if options == value:
            return name
    raise TypeError(f"Numba options {options!r} are not one of facesegment._jit's sets "
                    f"({', '.join(OPTIONS)}); write @njit(**NJIT) (or another set defined "
                    "in facesegment/_jit.py)")


def njit(**options):
    """``numba.njit(**options)`` for a kernel of the package.

    ``options`` must be one of :data:`OPTIONS` (``@njit(**NJIT)``), and the kernel
    is cached under its name tagged with :func:`source_tag`.

    Parameters
    ----------
    **options
        Numba options: exactly one of the sets :data:`NJIT`, :data:`FASTMATH`,
        :data:`REASSOC`, :data:`INLINE` or :data:`PARALLEL`.

    Returns
    -------
    callable
        A decorator that renames the function (``__qualname__`` tagged by
        :func:`tagged`) and compiles it with ``numba.njit(**options)``.

    Raises
    ------
    TypeError
        If ``options`` is not one of the sets of :data:`OPTIONS`.
    """
    _option_name(options)

    def decorate(func):
        """Tag ``func``'s qualified name and compile it with the chosen options.

        Parameters
        ----------
        func : function
            The kernel's Python source function.

        Returns
        -------
        numba dispatcher
            ``func`` compiled lazily by ``numba.njit(**options)``.
        """
        func.__qualname__ = tagged(func.__qualname__)
        return numba.njit(**options)(func)

    return decorate


def stale_cache_files(root=ROOT):
    """Numba cache files under ``root`` that belong to other versions of the sources.

    A cache file (``*.nbi``, ``*.nbc`` in a ``__pycache__`` folder) is stale when
    its name does not hold the current tag: a tagged name with another tag, or a
    name with no tag at all.

    Parameters
    ----------
    root : pathlib.Path, default=ROOT
        Folder whose ``__pycache__`` folders are searched recursively; the default
        is the package folder.

    Returns
    -------
    list of pathlib.Path
        The stale files, sorted (nothing is deleted here).
    """
    mark = TAG_MARK + source_tag()
    stale = []
    for pattern in ("__pycache__/*.nbi", "__pycache__/*.nbc"):
        for path in root.rglob(pattern):
            if mark not in path.name:
                stale.append(path)
    return sorted(stale)


__all__ = ["NJIT", "FASTMATH", "REASSOC", "INLINE", "PARALLEL", "OPTIONS", "njit",
           "source_digest", "source_tag", "tagged", "stale_cache_files"]
