"""The model folder: a fitted forest and everything needed to use it, on disk.

(The shipped models themselves, the other kinds of model and
:func:`facesegment.models.load_model`, which opens any model folder, are the
:mod:`facesegment.models` package.)

Modules
-------
``model``          public API: :class:`Model`, :func:`save_model`
``protocol``       :class:`FaceModel`, the interface of every face model (forests,
                   cascades, landmark votes, the face mesh)
``_model_class``   the :class:`Model` dataclass
``_forest_faces``  the face-model methods of the forests and cascades
``_model_doc``     types and values of a ``model.json`` document, checked before use
``_model_files``   building, writing and validating a model folder
``_forest_h5``     the folder's ``forest.h5``: the forest arrays written, and read back verified

The names below are loaded on first use (importing the package loads none of its modules).
"""

from .._lazy import lazy_exports

#: Public names and the module of each, imported on first use.
_LAZY = {"Model": "model", "save_model": "model", "check_model_output": "model",
         "FaceModel": "protocol"}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
