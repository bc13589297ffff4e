"""Configuration and forests of the UCI harness (``python -m pipelines.uci``).

:func:`load_config` reads ``pipelines/uci.toml`` (the one place of the grids
and defaults; docs/uci.md explains them), applies ``[quick]`` and checks every
key and every candidate value against the estimators, raising
:class:`UciConfigError` naming the key.  :func:`dataset_config` applies
``[large]`` to a big dataset.

The kinds are the rows of :data:`facesegment.forest.registry.KINDS` plus
scikit-learn's ``RandomForestClassifier`` and ``ExtraTreesClassifier``
(``criterion="entropy"``) as outside references (:data:`SKLEARN`).
:func:`make_forest`, :func:`fit_forest` and :func:`proba_sums` build, fit and
evaluate any of them the same way.
"""

import copy
import itertools
import tomllib

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

from facesegment.errors import FaceSegmentError
from facesegment.forest import registry
from facesegment.forest.params import resolve_max_features, validate_params

from .uci_data import SCALINGS

#: scikit-learn's forests as outside references: name -> (label, class).
SKLEARN = {
    "sklearn-rf": ("scikit-learn RandomForestClassifier (entropy)", RandomForestClassifier),
    "sklearn-et": ("scikit-learn ExtraTreesClassifier (entropy)", ExtraTreesClassifier),
}
#: Keys of [run] and what they must be.
RUN_KEYS = {
    "seed": "int", "validation": "fraction", "select_trees": "count",
    "select_max_rows": "int", "trees": "count", "columns": "counts", "curve": "counts",
    "big_trees": "count", "big_curve": "counts", "big_chunk": "count", "workers": "count",
    "kinds": "kinds",
}
#: Keys of a [kinds.KIND] table that are not estimator parameters.
KIND_KEYS = ("inherit", "fixed", "scale")
#: Parameters the harness sets itself.
OWN_PARAMS = ("n_estimators", "random_state", "n_jobs", "criterion", "verbose", "scheduler")


class UciConfigError(FaceSegmentError, ValueError):
    """A key or value of the UCI configuration is wrong; the message names it."""


def label(kind):
    """Display name of a kind."""
    return SKLEARN[kind][0] if kind in SKLEARN else registry.KINDS[kind].label


def known_kinds():
    return registry.kind_names(task="classify") + tuple(SKLEARN)


def _merge(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else copy.deepcopy(v)
    return out


def load_config(path, quick=False):
    """The checked configuration: ``{"run", "kinds", "large", "quick"}`` (``quick``:
    the ``[quick]`` overrides applied).  ``large`` is applied per dataset by
    :func:`dataset_config`."""
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise UciConfigError(f"{path}: cannot read the configuration ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UciConfigError(f"{path}: not valid TOML ({exc})") from exc
    unknown = sorted(set(raw) - {"run", "kinds", "large", "quick"})
    if unknown:
        raise UciConfigError(f"{path}: unknown section [{unknown[0]}] (sections: run, kinds, "
                             "large, quick)")
    cfg = {"run": raw.get("run", {}), "kinds": raw.get("kinds", {}),
           "large": raw.get("large", {}), "quick": raw.get("quick", {}), "path": str(path)}
    check(cfg["run"], cfg["kinds"], f"{path}")
    for name, allowed in (("large", {"min_cells", "run", "kinds"}), ("quick", {"run", "kinds"})):
        part = cfg[name]
        extra = sorted(set(part) - allowed)
        if extra:
            raise UciConfigError(f"{path}: [{name}] {extra[0]}: [{name}] takes "
                                 f"{', '.join(sorted(allowed))}")
        run, kinds = _apply(cfg, part)
        check(run, kinds, f"{path} [{name}]")
    mc = cfg["large"].get("min_cells", 0)
    if isinstance(mc, bool) or not isinstance(mc, int) or mc < 0:
        raise UciConfigError(f"{path}: [large] min_cells = {mc!r} must be an integer >= 0 "
                             "(0: never)")
    if not quick:
        cfg["quick"] = {}
    return cfg


def _apply(cfg, part):
    return (_merge(cfg["run"], part.get("run", {})),
            _merge(cfg["kinds"], part.get("kinds", {})))


def dataset_config(cfg, n_cells):
    """``(run, kinds, is_large)`` for a dataset of ``n_cells`` training values:
    the base settings, then ``[large]`` when ``n_cells >= [large] min_cells``,
    then ``[quick]`` when it was asked for."""
    large = bool(cfg["large"].get("min_cells")) and n_cells >= cfg["large"]["min_cells"]
    run, kinds = cfg["run"], cfg["kinds"]
    for part in ((cfg["large"],) if large else ()) + (cfg["quick"],):
        run, kinds = _merge(run, part.get("run", {})), _merge(kinds, part.get("kinds", {}))
    return run, kinds, large


def _check_run(run, where):
    for key in RUN_KEYS:
        if key not in run:
            raise UciConfigError(f"{where}: [run] {key} is missing")
    for key, val in run.items():
        want = RUN_KEYS.get(key)
        bad = None
        if want is None:
            raise UciConfigError(f"{where}: [run] {key} is not a key (keys: {', '.join(RUN_KEYS)})")
        if want in ("int", "count"):
            lo = 1 if want == "count" else 0
            if isinstance(val, bool) or not isinstance(val, int) or val < lo:
                bad = f"an integer >= {lo}"
        elif want == "fraction":
            if not isinstance(val, (int, float)) or not 0 < val < 1:
                bad = "a number in (0, 1)"
        elif want == "counts":
            if (not isinstance(val, list) or not val
                    or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in val)):
                bad = "a non-empty list of integers >= 1"
        elif want == "kinds":
            if not isinstance(val, list) or not val or any(v not in known_kinds() for v in val):
                bad = "a list of kinds among " + ", ".join(known_kinds())
        if bad:
            raise UciConfigError(f"{where}: [run] {key} = {val!r} must be {bad}")
    if max(run["columns"]) > run["trees"] or max(run["curve"]) > run["trees"]:
        raise UciConfigError(f"{where}: [run] columns and curve must be <= trees ({run['trees']})")
    if max(run["big_curve"]) > run["big_trees"]:
        raise UciConfigError(f"{where}: [run] big_curve must be <= big_trees")


def estimator_params(kind):
    if kind in SKLEARN:
        return set(SKLEARN[kind][1]().get_params())
    return set(registry.KINDS[kind].estimator_class().get_params())


def _check_value(kind, param, value, where):
    try:
        if kind in SKLEARN:
            if param == "max_features":
                resolve_max_features(value, 100)
            else:
                SKLEARN[kind][1]().set_params(**{param: value})
        else:
            validate_params(registry.KINDS[kind].estimator_class, {param: value})
    except (ValueError, TypeError) as exc:
        raise UciConfigError(f"{where}: [kinds.{kind}] {param} = {value!r}: {exc}") from None


def _check_inherit(kind, table, order, valid, where):
    for param, src in table.items():
        if param != "scale" and param not in valid:
            raise UciConfigError(f"{where}: [kinds.{kind}] inherit: {kind} has no parameter "
                                 f"{param!r}")
        if kind in order and (src not in order or order.index(src) >= order.index(kind)):
            raise UciConfigError(f"{where}: [kinds.{kind}] inherit {param} from {src!r}: it "
                                 f"must be a kind listed before {kind} in [run] kinds")


def check(run, kinds, where):
    """Check [run] and the [kinds.*] tables; raise UciConfigError naming the key."""
    _check_run(run, where)
    for kind, table in kinds.items():
        if kind not in known_kinds():
            raise UciConfigError(f"{where}: [kinds.{kind}]: no such kind (kinds: "
                                 f"{', '.join(known_kinds())})")
        fixed_by_kind = set(registry.KINDS[kind].fixed) if kind in registry.KINDS else set()
        valid = estimator_params(kind) - set(OWN_PARAMS) - fixed_by_kind
        for key, val in table.items():
            if key == "inherit":
                _check_inherit(kind, val, run["kinds"], valid, where)
            elif key == "fixed":
                for param, v in val.items():
                    if param not in valid:
                        raise UciConfigError(f"{where}: [kinds.{kind}] fixed: {kind} has no "
                                             f"parameter {param!r}")
                    _check_value(kind, param, v, where)
            elif not isinstance(val, list) or not val:
                raise UciConfigError(f"{where}: [kinds.{kind}] {key} must be a non-empty list "
                                     "of candidate values")
            elif key == "scale":
                if any(v not in SCALINGS for v in val):
                    raise UciConfigError(f"{where}: [kinds.{kind}] scale = {val!r}: use "
                                         f"{' and/or '.join(SCALINGS)}")
            elif key not in valid:
                raise UciConfigError(f"{where}: [kinds.{kind}] {key}: not a parameter of {kind} "
                                     f"(parameters: {', '.join(sorted(valid))})")
            else:
                for v in val:
                    _check_value(kind, key, v, where)


def grid(table):
    """The settings of a [kinds.KIND] table, in order: a list of dicts over its
    list-valued keys (``scale`` included), product in the table's key order."""
    keys = [k for k in table if k not in ("inherit", "fixed")]
    return [dict(zip(keys, vals)) for vals in itertools.product(*(table[k] for k in keys))]


# ------------------------------------------------------------------ forests

#: Kinds whose test forests also report the out-of-bag error and a Gini twin
#: (``criterion="gini"``, same settings and seed): the "Gini and out-of-bag" table.
CART_KINDS = ("axis", "sklearn-rf")


def make_forest(kind, params, n_trees, seed, workers, n_features, **own):
    """An unfitted forest of ``kind`` with ``params`` (no ``scale``); ``own``: the
    harness's own settings of :data:`CART_KINDS` (``criterion``, ``oob_score``)."""
    params = {k: v for k, v in params.items() if k != "scale"}
    if kind in SKLEARN:
        if "max_features" in params:  # "p^E" -> q, as our forests read it
            params["max_features"] = resolve_max_features(params["max_features"], n_features)
        return SKLEARN[kind][1](**{"n_estimators": n_trees, "criterion": "entropy",
                                   "random_state": seed, "n_jobs": workers, **params, **own})
    return registry.KINDS[kind].make(n_estimators=n_trees, random_state=seed, n_jobs=workers,
                                     **params, **own)


def fit_forest(est, X, y):
    """Fit; CO2 forests on the scaled features as they are (no normalisation of their own)."""
    if type(est).__name__ == "CO2Forest":
        p = X.shape[1]
        return est.fit(X, y, feature_mean=np.zeros(p, np.float32),
                       feature_std=np.ones(p, np.float32))
    return est.fit(X, y)


def proba_sums(est, X, points):
    """``{k: sum over the first k trees of their class probabilities}`` (n, K)
    float64 for every k of ``points``; the trees are taken in order, one at a
    time for scikit-learn's forests (its own predict_proba adds them in
    completion order)."""
    points = sorted(set(points))
    if not hasattr(est, "forest_"):  # scikit-learn's (ours have estimators_ views too)
        acc = np.zeros((X.shape[0], len(est.classes_)))
        out = {}
        for i, tree in enumerate(est.estimators_[:points[-1]], start=1):
            acc += tree.predict_proba(X)
            if i in points:
                out[i] = acc.copy()
        return out
    return {k: est.predict_proba(X, n_trees=k).astype(np.float64) * k for k in points}


def n_errors(classes, sums, y):
    """Misclassified rows when predicting the argmax of ``sums`` (first class on ties)."""
    return int(np.count_nonzero(np.asarray(classes)[np.argmax(sums, axis=1)] != y))
