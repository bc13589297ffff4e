"""Loading and validating the pipeline's TOML configuration.

The file has fixed sections (``run``, ``data``, ``extract``, ``forest``,
``forest.axis``, ``forest.two-probe``, ``forest.co2``, ``forest.co2-best``, ``select``,
``evaluate``, ``figures``) and named presets under ``[presets.NAME]`` whose
tables override those sections.  Every key is documented in docs/pipeline-config.md.

Keys of the ``forest`` tables other than the pipeline's own (``n_trees``,
``eval_trees``, ``q``) are keyword parameters of the estimators
(``facesegment.forest``); they are checked against ``get_params()`` when the
estimators can be imported.
"""

import copy
import hashlib
import json
import math
import os
import tomllib

from facesegment.errors import FaceSegmentError
from facesegment.forest import registry
from facesegment.layout import DEFAULT_LAYOUT
from facesegment.forest.params import MAX_TREES
from facesegment.limits import MAX_PIXEL_STRIDE, MAX_SEED, MAX_WINDOWS

from .common import KINDS, check_chain
from .design import design_of

N_FEATURES = DEFAULT_LAYOUT.n_features
#: Display names of the kinds (tables, figures).
KIND_NAMES = {k: registry.KINDS[k].label for k in KINDS}


def is_co2(kind):
    """Kinds with oblique (CO2) splits: fitted with the windows' normalisation."""
    return registry.get_kind(kind).oblique


def has_q(kind):
    """Kinds whose estimator takes ``max_features`` (the config's ``q``)."""
    return "max_features" in registry.get_kind(kind).estimator_class().get_params()


class ConfigError(FaceSegmentError, ValueError):
    """A configuration key or value is wrong; the message names the key."""


# ---------------------------------------------------------------- validators

def _int(lo=None, hi=None):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int):
            return "an integer"
        if hi is not None and (v < lo or v > hi):
            return f"an integer in [{lo}, {hi}]"
        if lo is not None and v < lo:
            return f"an integer >= {lo}"
        return None
    return check


def _count(lo, limit):
    """An integer >= ``lo`` up to a resource limit (facesegment.limits, forest.params)."""
    low = _int(lo)

    def check(v):
        problem = low(v)
        if problem is None and v > limit:
            return f"an integer <= {limit} (a resource limit)"
        return problem
    return check


def _num(lo=None, hi=None):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return "a number"
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            return f"a number in [{lo}, {hi}]"
        return None
    check.real = True  # values are read as floats
    return check


def _str(choices=None):
    def check(v):
        if not isinstance(v, str):
            return "a string"
        if choices is not None and v not in choices:
            return "one of " + ", ".join(repr(c) for c in choices)
        return None
    return check


def _bool(v):
    return None if isinstance(v, bool) else "true or false"


def _list(item):
    def check(v):
        if not isinstance(v, list) or not v:
            return "a non-empty list"
        for x in v:
            bad = item(x)
            if bad:
                return f"a non-empty list of {bad}s"
        return None
    check.item = item
    return check


def as_values(section, key, values):
    """The values of a list key, as floats when the key holds real numbers."""
    item = getattr(SCHEMA[section][key], "item", None)
    return [float(v) for v in values] if getattr(item, "real", False) else list(values)


def _q(v):
    """q: an int (features per node), or "p^E" with E in (0, 1] (parsed by the
    estimators' own ``resolve_max_features``)."""
    from facesegment.forest.params import resolve_max_features

    if isinstance(v, int) and not isinstance(v, bool):
        return None if 1 <= v <= N_FEATURES else f"an integer in [1, {N_FEATURES}]"
    if isinstance(v, str) and v.startswith("p^"):
        try:
            resolve_max_features(v, N_FEATURES)
        except ValueError:
            return '"p^E" with 0 < E <= 1'
        return None
    return 'an integer or "p^E" (e.g. "p^0.7")'


def _chain(v):
    """An auto-context chain "kind>kind...": None when valid, else what it must be."""
    return check_chain(v)


def q_features(q, n_features):
    """Features per node for a q spec and ``n_features`` values per window:
    ``("p^0.7", 2883)`` -> ``round(2883 ** 0.7)`` = 264."""
    from facesegment.forest.params import resolve_max_features

    return q if isinstance(q, int) else resolve_max_features(q, n_features)


#: A pooled layout's box side: 1 .. the window side.
_POOL = _int(1, DEFAULT_LAYOUT.window)

#: Pipeline keys of every section: name -> validator.  The defaults are the
#: values of pipelines/config.toml (the one place): a configuration file of
#: one's own only overrides them.
SCHEMA = {
    "run": {
        "name": _str(),
        "workers": _int(0),
        "scheduler": _str(),
        "seed": _count(0, MAX_SEED),
    },
    "data": {
        "path": _str(),
        "labels": _str(),
        "name": _str(),
        "n_validation": _int(0),
        "test_fraction": _num(0.0, 1.0),
        "max_train_images": _int(0),
        "max_test_images": _int(0),
        "lfw_dest": _str(),
        "lfw_labels": _str(),
    },
    "extract": {
        "n_windows": _count(8, MAX_WINDOWS),
    },
    "forest": {
        "n_trees": _count(1, MAX_TREES),
        "eval_trees": _list(_count(1, MAX_TREES)),
    },
    # "forest.KIND" sections: one per registry kind (added below)
    "select": {
        "enabled": _bool,
        "n_trees": _count(1, MAX_TREES),
        "max_samples": _int(1),
        "n_images": _int(0),
        "pixel_stride": _count(1, MAX_PIXEL_STRIDE),
        "axis_q": _list(_q),
        "two_probe_pairs": _list(_int(1)),
        "co2_nu": _list(_num(0.0)),
        "co2_eta": _list(_num(0.0)),
        "nongreedy_eta": _list(_num(0.0)),
        "co2_pool": _list(_POOL),
        "alphas": _list(_num(0.0, 4.0)),
        "full_axis_q": _list(_q),
        "full_two_probe_pairs": _list(_int(1)),
        "full_co2_nu": _list(_num(0.0)),
        "full_co2_eta": _list(_num(0.0)),
        "full_nongreedy_eta": _list(_num(0.0)),
        "full_co2_pool": _list(_POOL),
    },
    "evaluate": {
        "alpha": _num(0.0, 4.0),
        "extra_alphas": _list(_num(0.0, 4.0)),
        "alpha_from": _str(("final", "selection")),
        "mode": _str(("strict", "full")),
        "pixel_stride": _count(1, MAX_PIXEL_STRIDE),
        "time_images": _int(1),
        "time_mode": _str(("strict", "full")),
        "fft_levels": _int(0),
        "detector_protocol": _bool,
        "aligned_labels": _str(("landmarks", "warp")),
        "landmarks": _bool,
    },
    "position": {
        "enabled": _bool,
        "sigma": _num(0.0, 100.0),
        "pseudo": _num(0.0),
        "betas": _list(_num(0.0, 4.0)),
        "gammas": _list(_num(0.0, 4.0)),
        "crop_faces": _int(0),
    },
    "smoothing": {
        "sigmas": _list(_num(0.0, 50.0)),
        "models": _str(("cascades", "non-oblique", "all")),
    },
    "cascade": {
        "enabled": _bool,
        "chains": _list(lambda v: _chain(v)),
        "n_folds": _int(2),
        "fold_trees": _int(1),
        "fold_pairs": _int(0),
        "directions": _int(1),
        "radii": _list(_int(1)),
        "boxes": _list(_int(1)),
        "position": _bool,
        "prior_planes": _bool,
        "stage1_maps": _str(("decisions", "raw")),
        "q": lambda v: None if v == "" else _q(v),
    },
    "figures": {
        "enabled": _bool,
        "n_random": _int(0),
        "depths": _list(_int(1)),
    },
}

SCHEMA.update({f"forest.{k}": ({"q": _q} if has_q(k) else {})
               | ({"pool": _POOL} if "pool" in design_of(k).grid else {})
               for k in KINDS})


def _grid_keys():
    """[select] keys named by the design's selection grids (and their full_ twins)."""
    keys = {v for k in KINDS for v in design_of(k).grid.values()}
    return keys | {f"full_{k}" for k in keys}


for _key in sorted(_grid_keys() - set(SCHEMA["select"])):
    # a grid list of a newly registered kind: any non-empty list, no default
    SCHEMA["select"][_key] = _list(lambda v: None)

#: Tables whose other keys are estimator parameters.
FOREST_SECTIONS = ("forest",) + tuple(f"forest.{k}" for k in KINDS)


def _flatten(doc, where):
    """Turn the nested TOML document into ``{"forest.co2": {...}, ...}``."""
    out = {}
    for name, val in doc.items():
        if name == "presets":
            continue
        if not isinstance(val, dict):
            raise ConfigError(f"{where}: top-level key {name!r} is not a [section] "
                              f"(sections: {', '.join(SCHEMA)})")
        if name not in SCHEMA or "." in name:   # the top-level sections
            raise ConfigError(f"{where}: unknown section [{name}] "
                              f"(sections: {', '.join(SCHEMA)}, presets)")
        flat = {}
        for k, v in val.items():
            if name == "forest" and k in KINDS:
                if not isinstance(v, dict):
                    raise ConfigError(f"{where}: [forest] {k} must be a table [forest.{k}]")
                out[f"forest.{k}"] = dict(v)
            elif name == "forest" and isinstance(v, dict):
                raise ConfigError(f"{where}: unknown section [forest.{k}] "
                                  f"(forest kinds: {', '.join(KINDS)})")
            else:
                flat[k] = v
        out[name] = {**out.get(name, {}), **flat}
    return out


def _check_values(flat, where):
    for sec, table in flat.items():
        schema = SCHEMA[sec]
        for key, val in table.items():
            if key in schema:
                bad = schema[key](val)
                if bad:
                    raise ConfigError(f"{where}: [{sec}] {key} = {val!r} is invalid: "
                                      f"expected {bad}")
            elif sec not in FOREST_SECTIONS:
                raise ConfigError(f"{where}: [{sec}] has no key {key!r} "
                                  f"(valid keys: {', '.join(schema)})")


def _merge(base, over):
    out = copy.deepcopy(base)
    for sec, table in over.items():
        out.setdefault(sec, {}).update(copy.deepcopy(table))
    return out


#: The configuration file whose values are the defaults of every key.
DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.toml")


def _read_toml(path):
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: configuration file not found "
                          "(pass --config pipelines/config.toml)")
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def load_config(path, preset=None, data=None, labels=None, name=None):
    """Read, merge and validate the configuration.

    Parameters
    ----------
    path : path
        The TOML file.
    preset : str, optional
        Name of a ``[presets.NAME]`` table applied over the sections (default
        ``run.preset`` of the file, else ``"default"``).
    data, labels, name : str, optional
        Command-line overrides of ``data.path``, ``data.labels`` and ``data.name``.

    Returns
    -------
    dict
        ``{"forest.co2": {...}, "data": {...}, ...}`` with every key filled in,
        plus ``"_preset"`` and ``"_path"``.

    Raises
    ------
    ConfigError
        Naming the file, the section, the key and what is expected.
    """
    path = os.fspath(path)
    doc = _read_toml(path)
    base = doc if os.path.abspath(path) == DEFAULT_CONFIG else _read_toml(DEFAULT_CONFIG)
    presets = {**base.get("presets", {}), **doc.get("presets", {})}
    if not isinstance(doc.get("presets", {}), dict):
        raise ConfigError(f"{path}: 'presets' must be a table of [presets.NAME] tables")
    run = doc.get("run", {})
    default_preset = run.pop("preset", "default") if isinstance(run, dict) else "default"
    base.get("run", {}).pop("preset", None)
    preset = preset or default_preset
    flat = _flatten(doc, path)
    _check_values(flat, path)
    if preset not in presets and preset != "default":
        raise ConfigError(f"{path}: unknown preset {preset!r} "
                          f"(presets: {', '.join(sorted(presets)) or 'none'})")
    over = _flatten(presets.get(preset, {}), f"{path} [presets.{preset}]")
    _check_values(over, f"{path} [presets.{preset}]")
    cfg = {sec: {} for sec in SCHEMA}
    cfg = _merge(_merge(_merge(cfg, _flatten(base, DEFAULT_CONFIG)), flat), over)
    for key, val in (("path", data), ("labels", labels), ("name", name)):
        if val is not None:
            cfg["data"][key] = os.fspath(val)
    f = cfg["forest"]
    if max(f["eval_trees"]) > f["n_trees"]:
        raise ConfigError(f"{path}: [forest] eval_trees = {f['eval_trees']} asks for more "
                          f"trees than n_trees = {f['n_trees']} (raise n_trees)")
    check_estimator_params(cfg, path)
    cfg["_preset"] = preset
    cfg["_path"] = path
    return cfg


def check_estimator_params(cfg, where="config"):
    """Check the estimator keys of the forest tables against ``get_params()``.

    Skipped silently when ``facesegment.forest`` has no estimators yet.
    """
    try:
        from . import backend
        classes = {k: backend.estimator_class(k) for k in KINDS}
    except (ImportError, AttributeError):
        return
    common = {k for k in cfg["forest"] if k not in SCHEMA["forest"]}
    every = set().union(*(cls().get_params() for cls in classes.values()))
    for key in sorted(common - every):
        raise ConfigError(f"{where}: [forest] key {key!r} is not a parameter of any kind "
                          f"({', '.join(sorted(every))})")
    for kind, cls in classes.items():
        valid = set(cls().get_params())
        mine = common & valid      # a common key applies to the kinds that have it
        own = {k for k in cfg[f"forest.{kind}"] if k not in SCHEMA[f"forest.{kind}"]}
        for key in sorted(own):
            if key not in valid:
                raise ConfigError(f"{where}: [forest.{kind}] has no key {key!r} "
                                  f"({cls.__name__} parameters: {', '.join(sorted(valid))})")
        _check_estimator_values(cls, kind, {k: cfg["forest"][k] for k in mine}
                                | {k: cfg[f"forest.{kind}"][k] for k in own}, where)
    _check_grids(cfg, classes, where)


def _check_grids(cfg, classes, where):
    """Every value of every ``[select]`` grid list (and its ``full_`` twin)
    through its estimator's own parameter constraints (``q`` stands for
    ``max_features``; ``pool`` is the layout's, checked by the schema)."""
    from facesegment.forest.params import resolve_max_features, validate_params

    for kind, cls in classes.items():
        for param, key in design_of(kind).grid.items():
            if param == "pool":
                continue
            name = "max_features" if param == "q" else param
            for k in (key, f"full_{key}"):
                for v in cfg["select"].get(k) or ():
                    try:
                        validate_params(cls, {name: v})
                        if name == "max_features":
                            resolve_max_features(v, N_FEATURES)
                    except (TypeError, ValueError) as exc:
                        raise ConfigError(f"{where}: [select] {k} = {cfg['select'][k]!r} "
                                          f"(kind {kind}): {exc}") from None


def _check_estimator_values(cls, kind, params, where):
    """Run the estimator's own parameter checks now, not hours later at ``fit``."""
    from facesegment.forest.params import resolve_max_features, validate_params

    try:
        validate_params(cls, params)
        if "max_features" in params:
            resolve_max_features(params["max_features"], N_FEATURES)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: [forest] / [forest.{kind}]: {exc}") from None


def section_hash(cfg, *sections):
    """A short hash of some sections (what a stage's outputs depend on)."""
    blob = json.dumps({s: cfg[s] for s in sections}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_name(cfg):
    """``<dataset>-<preset>``: the folder name of this run's outputs."""
    if cfg["run"]["name"]:
        return cfg["run"]["name"]
    data = cfg["data"]
    base = data["name"] or (os.path.basename(os.path.normpath(data["path"]))
                            if data["path"] else "lfw")
    return f"{base}-{cfg['_preset']}"
