"""Decision forests over uint8 windows: axis-aligned, two-probe and CO2.

The estimators are scikit-learn classifiers (``ClassifierMixin,
BaseEstimator``: ``fit(X, y, sample_weight=None)``, ``predict_proba``,
``predict``, ``score``, ``get_params``/``set_params``, learned ``classes_``,
``n_features_in_``, ``forest_`` (a :class:`ForestArrays`) and
``feature_importances_``).  Their parameter constraints are one public table,
:data:`PARAMETER_CONSTRAINTS`, checked by :func:`validate_params`.
"""

from ._arrays import FOREST_ARRAY_NAMES, ForestArrays
from .axis import best_axis_split
from .base import BaseForest
from .estimators import AxisAlignedForest, CO2Forest, TwoProbeForest, feature_stats
from .params import (PARAMETER_CONSTRAINTS, InvalidParameterError, resolve_max_features,
                     validate_params)
from .twoprobe import best_pair_split
from .extra import ExtraTreesForest
from .ferns import RandomFernsForest
from .rotation import RotationForest
from .nongreedy import NonGreedyForest, NonGreedyTree
from .density import DensityForest
from .regression import AxisAlignedForestRegressor, ExtraTreesForestRegressor

__all__ = [
    "AxisAlignedForest", "TwoProbeForest", "CO2Forest", "BaseForest", "ForestArrays",
    "FOREST_ARRAY_NAMES", "best_axis_split", "best_pair_split", "feature_stats",
    "PARAMETER_CONSTRAINTS", "InvalidParameterError", "validate_params",
    "resolve_max_features",
    "ExtraTreesForest", "RandomFernsForest", "RotationForest",
    "NonGreedyForest", "NonGreedyTree",
    "DensityForest",
    "AxisAlignedForestRegressor", "ExtraTreesForestRegressor",
]
