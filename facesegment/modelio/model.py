"""A trained model: a forest plus everything needed to use it.

A model is a self-describing folder (never a pickle)::

    models/NAME/
        model.json   kind (a row of facesegment.forest.registry), the estimator's
                     parameters (effective values), classes with their dtype,
                     class names, sampling factors (priors), the window layout,
                     the number of features, provenance (paths relative to the
                     folder), metrics (training time, the validation scores of
                     the decision rule, ...), the decision rule (alpha, beta,
                     sigma: facesegment.rule), the package version and the
                     format version
        forest.h5    the flat forest arrays (facesegment.forest._arrays) and the
                     normalisation statistics (mean, std), compressed

A regression forest keeps one ``value`` column, the leaf means, named
``target`` (classes ``[0]``, sampling factor 1).  Any classification problem round-trips exactly (classes of any dtype, any
number of features); face models also keep their class names, sampling
factors and window layout.  :func:`facesegment.models.load_model` validates the
folder and says what is wrong with one that is not a model, is truncated, or has
another format version; models of format version 1 (which record no layout
or classes) load too.  The :class:`Model` dataclass is defined in
:mod:`facesegment.modelio._model_class`, one model folder's files in
:mod:`facesegment.modelio._model_files`, ``model.json``'s fields in
:mod:`facesegment.modelio._model_doc`; :func:`facesegment.models.load_model`
opens every other kind of model folder too (a cascade, landmark votes, the face mesh).
"""

from ._model_class import Model
from ._model_doc import FOREST_FORMAT, MODEL_FORMAT, MODEL_FORMAT_VERSION, kinds  # noqa: F401
from ._model_files import check_model_output as _check, save_model as _save


def save_model(model, path):
    """Write ``model`` as a folder ``path`` (``model.json`` + ``forest.h5``), atomically.

    The folder is written under a temporary name beside ``path`` and renamed;
    an existing model at ``path`` is replaced (any other folder is not: see
    :func:`check_model_output`).  ``forest.h5`` holds no timestamps, so the
    same forest gives the same bytes.

    Parameters
    ----------
    model : Model
        The model to write.
    path : str or Path
        The model folder.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    DataError
        When ``path`` cannot be written; nothing is left behind then.
    ValueError
        When ``model.kind`` is not a registry kind.
    """
    return _save(model, path)


def check_model_output(path):
    """Fail early (DataError) when a model cannot be saved as the folder ``path``.

    ``path`` may be new, an empty folder or an existing model folder (which
    :func:`save_model` replaces); any other file or folder is kept, never
    replaced.  The parent folder is created and must be writable.

    Parameters
    ----------
    path : str or Path
        The model folder to be written.

    Raises
    ------
    DataError
        When ``path`` is a file, an unreadable folder, a non-empty folder
        without ``model.json``, a model folder holding other files, or its
        parent is not writable.
    """
    return _check(path)


def __getattr__(name):
    if name == "KINDS":  # the registry's names, read through this module too
        return tuple(kinds())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Model", "save_model", "check_model_output",
           "MODEL_FORMAT_VERSION"]
