"""Scoring models on labelled faces, choosing their decision rule, and the figures.

Modules
-------
``scoring``    the one evaluation driver: :func:`evaluate` and its summaries
``metrics``    confusion matrices, per-class and class-average Jaccard, tables
``calibrate``  choosing a model's decision rule on validation images
``timing``     timing dense inference per image (the pipeline's time stages)
``figures``    the paper's Figures 3 and 4 and confusion matrices (matplotlib Agg)

The names below are loaded on first use (importing the package loads none of its modules).
"""

from .._lazy import lazy_exports

#: Public names and the module of each, imported on first use.
_LAZY = {"evaluate": "scoring", "full_summary": "scoring", "confusion_matrix": "metrics",
         "jaccard": "metrics", "class_average": "metrics", "choose_rule": "calibrate",
         "make_figures": "figures"}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
