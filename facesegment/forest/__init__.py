"""Decision forests over uint8 windows: axis-aligned, two-probe and CO2.

The estimators are scikit-learn classifiers (``ClassifierMixin,
BaseEstimator``: ``fit(X, y, sample_weight=None)``, ``predict_proba``,
``predict``, ``score``, ``get_params``/``set_params``, learned ``classes_``,
``n_features_in_``, ``forest_`` (a :class:`ForestArrays`) and
``feature_importances_``).  Each class carries its table of parameter
constraints (``_parameter_constraints``), checked by :func:`validate_params`;
each owns its split family (``_split_family``, :mod:`.families`).
"""

from ._arrays import FOREST_ARRAY_NAMES, ForestArrays
from .axis import best_axis_split
from .base import BaseForest
from .estimators import AxisAlignedForest, CO2Forest, TwoProbeForest, feature_stats
from .params import InvalidParameterError, constraints_of, resolve_max_features, validate_params
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
    "constraints_of", "InvalidParameterError", "validate_params",
    "resolve_max_features",
    "ExtraTreesForest", "RandomFernsForest", "RotationForest",
    "NonGreedyForest", "NonGreedyTree",
    "DensityForest",
    "AxisAlignedForestRegressor", "ExtraTreesForestRegressor",
]
