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
    """``(__getattr__, __dir__)`` for ``package`` whose names in ``table``
    (name -> module inside the package) are imported on first use."""

    def __getattr__(name):
        if name in table:
            return getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
