"""Scoring models on labelled faces, choosing their decision rule, and the figures.

Modules
-------
``scoring``    the one evaluation driver: :func:`evaluate` and its summaries
``metrics``    confusion matrices, per-class and class-average Jaccard, tables
``calibrate``  choosing a model's decision rule on validation images
``figures``    the paper's Figures 3 and 4 and confusion matrices (matplotlib Agg)

The names below are loaded on first use (importing the package loads none of its modules).
"""

#: Public names and the module of each, imported on first use.
_LAZY = {"evaluate": "scoring", "full_summary": "scoring", "confusion_matrix": "metrics",
         "jaccard": "metrics", "class_average": "metrics", "choose_rule": "calibrate",
         "make_figures": "figures"}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

