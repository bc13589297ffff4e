"""Opening any model folder: its files say which kind of model it holds.

A forest's folder (``model.json`` + ``forest.h5``: :mod:`facesegment.modelio`),
an auto-context cascade (:mod:`facesegment.autocontext.cascade`), landmark votes
(:mod:`facesegment.models.landmark`) or the face mesh with its forest stages
(:mod:`facesegment.models.mesh`): :func:`load_model` opens each with its own
loader.  This is the layer that knows every kind of model.
"""

from ..autocontext.cascade import is_cascade_folder, load_cascade
from ..modelio._model_class import Model
from ..modelio._model_files import load_model_folder
from .landmark import is_landmark_folder, load_landmark_model
from .mesh import load_mesh_model
from .mesh_folder import is_mesh_folder


def load_model(path, verify=True):
    """Load and validate a model folder written by :func:`save_model`.

    Parameters
    ----------
    path : str or Path
        The model folder (or its ``model.json``).
    verify : bool
        Check the size and SHA-256 of ``forest.h5`` recorded in ``model.json``.

    Raises
    ------
    DataError
        When the folder is not a model, is truncated or corrupt, or has another
        format version.
    """
    if is_cascade_folder(path):   # an auto-context cascade: all its stages in one folder
        return load_cascade(path, verify)
    if is_landmark_folder(path):  # a landmark model: its vote spec and a fallback model
        return load_landmark_model(path, verify)
    if is_mesh_folder(path):      # a mesh-forest model: its stages and pan estimate
        return load_mesh_model(path, verify)
    return load_model_folder(Model, path, verify)


__all__ = ["load_model"]
