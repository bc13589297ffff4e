"""Decision forests over uint8 windows: axis-aligned, two-probe and CO2.

The estimators follow scikit-learn's conventions (``fit``, ``predict_proba``,
``predict``, ``get_params``/``set_params``, learned ``classes_``,
``n_features_in_`` and ``forest_``, a :class:`ForestArrays`).
"""

from ._arrays import FOREST_ARRAY_NAMES, ForestArrays
from .axis import best_axis_split
from .base import BaseForest
from .estimators import AxisAlignedForest, CO2Forest, TwoProbeForest, feature_stats
from .twoprobe import best_pair_split

__all__ = [
    "AxisAlignedForest", "TwoProbeForest", "CO2Forest", "BaseForest", "ForestArrays",
    "FOREST_ARRAY_NAMES", "best_axis_split", "best_pair_split", "feature_stats",
]
