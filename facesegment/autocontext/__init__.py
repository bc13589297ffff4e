"""Auto-context cascades: several forests in a row, each later one reading the maps
of the one before (Tu & Bai), stored as one model folder.

Modules
-------
``context``           the context features: a stage's probability maps as the next stage's input
``_context_kernels``  their Numba kernels
``cascade``           :class:`Cascade`: the model, its folder, prediction stage by stage
``cascade_fit``       training a cascade without leakage (out-of-fold maps)

The names below are loaded on first use (importing the package loads none of its modules).
"""

#: Public names and the module of each, imported on first use.
_LAZY = {"Cascade": "cascade", "save_cascade": "cascade", "load_cascade": "cascade",
         "is_cascade_folder": "cascade", "fit_cascade": "cascade_fit",
         "ContextSpec": "context", "context_layout": "context"}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

