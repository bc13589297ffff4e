"""Decision forests over uint8 windows: axis-aligned, two-probe and CO2.

The estimators are scikit-learn classifiers (``ClassifierMixin,
BaseEstimator``: ``fit(X, y, sample_weight=None)``, ``predict_proba``,
``predict``, ``score``, ``get_params``/``set_params``, learned ``classes_``,
``n_features_in_``, ``forest_`` (a :class:`ForestArrays`) and
``feature_importances_``).  Each class carries its table of parameter
constraints (``_parameter_constraints``), checked by :func:`validate_params`;
each owns its split family (``_split_family``, :mod:`.families`).
"""

from .._lazy import lazy_exports

#: Where each public name lives: the submodules are imported on first use, so
#: that reading a model (:mod:`facesegment.forest.registry`,
#: :mod:`facesegment.forest._arrays`) does not import every estimator and
#: scikit-learn.
_EXPORTS = {
    "FOREST_ARRAY_NAMES": "_arrays", "ForestArrays": "_arrays",
    "best_axis_split": "axis", "BaseForest": "base",
    "AxisAlignedForest": "estimators", "CO2Forest": "estimators",
    "TwoProbeForest": "estimators", "feature_stats": "estimators",
    "InvalidParameterError": "params", "constraints_of": "params",
    "resolve_max_features": "params", "validate_params": "params",
    "best_pair_split": "twoprobe", "ExtraTreesForest": "extra",
    "RandomFernsForest": "ferns", "RotationForest": "rotation",
    "NonGreedyForest": "nongreedy", "NonGreedyTree": "nongreedy",
    "DensityForest": "density", "AxisAlignedForestRegressor": "regression",
    "ExtraTreesForestRegressor": "regression",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


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
