"""The pipeline's scoring: :mod:`facesegment.evaluation.scoring` under its old names.

Kept for ``pipelines/selection.py``: ``score_model(model, records,
tree_counts, alphas, **kw)`` is :func:`facesegment.evaluation.scoring.evaluate` with
the forest sizes and alphas given by position; ``best_alpha`` is the
library's.  New code calls :mod:`facesegment.evaluation.scoring` directly.
"""

from facesegment.evaluation.scoring import best_alpha, evaluate, grid_label
from facesegment.evaluation.timing import time_inference


def score_model(model, records, tree_counts, alphas, **kw):
    """:func:`facesegment.evaluation.scoring.evaluate` (``tree_counts``, ``alphas`` by position)."""
    return evaluate(model, records, alphas=alphas, tree_counts=tree_counts, **kw)


__all__ = ["score_model", "best_alpha", "grid_label", "time_inference"]
