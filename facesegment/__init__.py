"""facesegment: face-part segmentation with decision forests.

Every pixel of a face image gets one of 8 classes (see :mod:`facesegment.classes`).
A forest looks at the window around the pixel (31x31 RGB, 2883 uint8 values, by
default; the layout is data: :mod:`facesegment.layout`) and predicts its class.
The forests are scikit-learn estimators, one row each in the table of kinds
(:mod:`facesegment.forest.registry`): axis-aligned (random forest), two-probe
(``x[a] - x[b] <= t``), CO2 (continuously optimised oblique splits, Norouzi et
al. 2015) and our variant of it, extremely randomized trees, random ferns and
rotation forests.

The one-call API (imported on first use; importing the package loads nothing
else)::

    import facesegment
    faces = facesegment.segment("photo.jpg")      # the shipped model
    model = facesegment.load_model("faces300w-two-probe")   # or a model folder
"""

__version__ = "0.2.0"

#: Public names loaded on first use: ``facesegment.segment`` (the one-call API, a
#: function), ``facesegment.load_model``, ``Face``, ``DecisionRule``, ``choose_rule``.
_LAZY = {"segment": ("facesegment.api", "segment"),
         "load_model": ("facesegment.api", "load_model"), "Face": ("facesegment.api", "Face"),
         "DecisionRule": ("facesegment.rule", "DecisionRule"),
         "choose_rule": ("facesegment.evaluation.calibrate", "choose_rule")}


#: Subpackages reachable as attributes without their own import
#: (``facesegment.dense.predict_image(...)``), imported on first use.
_SUBPACKAGES = ("api", "autocontext", "classes", "data", "dense", "evaluation", "faces",
                "forest", "modelio", "rule")


def __getattr__(name):
    import importlib

    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'facesegment' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))
