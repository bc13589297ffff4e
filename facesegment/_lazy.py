"""Lazy exports: a package's public names, each imported from its module on first use.

A subpackage's ``__init__`` names its public names and their modules in one table
and takes ``__getattr__`` and ``__dir__`` from :func:`lazy_exports`, so importing
the package loads none of its modules::

    _LAZY = {"Cascade": "cascade", "fit_cascade": "cascade_fit"}
    __all__ = sorted(_LAZY)
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY)
"""

import importlib
import sys


def lazy_exports(package, table):
    """``(__getattr__, __dir__)`` for ``package``: names of ``table`` imported on first use.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    table : dict of str to str
        Public name -> name of the module inside ``package`` that defines it.

    Returns
    -------
    __getattr__ : callable
        Module ``__getattr__``: imports ``package.table[name]`` and returns its
        ``name``; raises ``AttributeError`` for a name not in ``table``.
    __dir__ : callable
        Module ``__dir__``: the package's attributes and the names of ``table``, sorted.
    """

    def __getattr__(name):
        if name in table:
            return getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
