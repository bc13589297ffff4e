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

from .._lazy import lazy_exports

#: Public names and the module of each, imported on first use.
_LAZY = {"Cascade": "cascade", "save_cascade": "cascade", "load_cascade": "cascade",
         "is_cascade_folder": "cascade", "fit_cascade": "cascade_fit",
         "ContextSpec": "context", "context_layout": "context"}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
