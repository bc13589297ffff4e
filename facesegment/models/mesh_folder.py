"""A mesh model's folder (:class:`facesegment.models.mesh.MeshModel`): written
atomically (:func:`save_mesh_model`) and read back with every field of the file
checked (:func:`read_mesh_folder`; the model checks its own settings).

The folder::

    mesh-model.json   format "facesegment-mesh-model", format_version (1),
                      package_version, kind ("mesh-forest"), crop (size),
                      finder (max_faces, min_confidence), stages (folder names),
                      gains (the decision rule: a factor per training class),
                      mirror (optional, default false: average each crop's
                      probabilities with its mirror image's),
                      mirror_fit (optional, default false: with mirror, the
                      mirror image is the face mesh's own fit of the mirrored
                      photo, where it finds the face),
                      margin (optional, default null: the forests read the
                      pixels at most this far outside the face oval, in 1/64
                      of the crop; background beyond; a number, or a list
                      with one per stage),
                      early (optional, default null: [k, confidence], the
                      forests' later trees read only the pixels where the
                      first k are less sure than confidence),
                      coarse (optional, default null: a number in [0, 1),
                      the forests read the pixels of even row and column
                      first, and the others only where those around them
                      disagree or lead by less than it),
                      refit (optional, default null: a face whose mesh is
                      turned at least this far is read with its fits as
                      found and refitted, the two averaged),
                      mix (optional, default 0: the first stage's share of the
                      stages' output, mixed into the last stage's; a number or
                      one per training class),
                      pan (PanModel.to_dict()), provenance, metrics
    stage-1/ ...      one model folder per stage (model.json + forest.h5)
    MODEL_CARD.md     optional
"""

from pathlib import Path

from .. import __version__
from ..atomic import MANIFEST, write_json_atomic
from ..errors import DataError
from ..faces.pose import PanModel
from ..modelio._model_class import Model
from ..modelio._model_doc import read_format_doc
from ..modelio._model_files import (check_model_output, jsonable, load_model_folder,
                                    save_model_folder, write_folder)

MESH_FORMAT = "facesegment-mesh-model"
MESH_FORMAT_VERSION = 1
MESH_FILE = "mesh-model.json"
MESH_FIX = "build the mesh model again (or point at another model folder)"


def is_mesh_folder(path):
    """Does ``path`` hold a mesh model (a ``mesh-model.json`` file)?

    Parameters
    ----------
    path : str or Path
        A folder.

    Returns
    -------
    bool
    """
    return (Path(path) / MESH_FILE).is_file()


def save_mesh_model(model, path):
    """Write the folder atomically; an existing mesh-model folder at ``path`` is
    replaced, anything else is refused.

    Each forest stage is written as a model folder ``stage-N``; a
    ``MODEL_CARD.md`` already in ``path`` is kept.

    Parameters
    ----------
    model : MeshModel
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
        When ``path`` is a mesh model folder holding other files, is a file or
        folder that :func:`facesegment.modelio.model.check_model_output`
        refuses, or cannot be written.
    """
    path = Path(path)
    names = [f"stage-{k + 1}" for k in range(len(model.forests))]
    if is_mesh_folder(path):
        own = {MESH_FILE, "MODEL_CARD.md", MANIFEST, *names}
        other = sorted(p.name for p in path.iterdir()
                       if p.name not in own and not p.name.startswith("stage-"))
        if other:
            raise DataError(path, f"holds files that are not the model's ({', '.join(other)})",
                            "move them away or choose another output folder")
    else:
        check_model_output(path)
    card = path / "MODEL_CARD.md"
    card_text = card.read_text() if card.is_file() else None

    def fill(tmp):
        """Write the stages' folders, the model card and the JSON file.

        Parameters
        ----------
        tmp : Path
            The temporary folder that replaces ``path`` afterwards.
        """
        for name, est in zip(names, model.forests):
            save_model_folder(Model.from_estimator(est), tmp / name)
        if card_text is not None:
            (tmp / "MODEL_CARD.md").write_text(card_text)
        write_json_atomic(tmp / MESH_FILE, {
            "format": MESH_FORMAT, "format_version": MESH_FORMAT_VERSION,
            "package_version": __version__, "kind": model.kind,
            "crop": {"size": model.crop_size}, "finder": jsonable(model.finder_params),
            "stages": names, "gains": model.gains, "mirror": model.mirror,
            "mirror_fit": model.mirror_fit,
            "margin": model.margin, "mix": model.mix, "early": model.early,
            "coarse": model.coarse, "refit": model.refit,
            "pan": None if model.pan_model is None else model.pan_model.to_dict(),
            "provenance": jsonable(model.provenance), "metrics": jsonable(model.metrics)},
            indent=2, sort_keys=True)

    return write_folder(path, fill, "the mesh model", "choose a writable folder with free space")


def read_mesh_folder(path, verify=True):
    """The fields of a folder written by :func:`save_mesh_model`, checked as far
    as the file format goes (DataError naming the file when it is not one);
    :func:`facesegment.models.mesh.load_mesh_model` makes the model of them.

    Parameters
    ----------
    path : str or Path
        The mesh model folder.
    verify : bool, optional
        Check the recorded sizes and SHA-256 of each stage's ``forest.h5``
        (default True).

    Returns
    -------
    js : Path
        Its ``mesh-model.json``.
    fields : dict
        ``MeshModel``'s arguments by name (the stages loaded as estimators).

    Raises
    ------
    DataError
        When ``mesh-model.json`` is missing, unreadable, of another format or
        version, or incomplete or malformed, or a stage cannot be loaded.
    """
    path = Path(path)
    js = path / MESH_FILE
    doc = read_format_doc(js, MESH_FORMAT, (MESH_FORMAT_VERSION,), "mesh-model", MESH_FIX)
    try:
        names = doc["stages"]
        if (not isinstance(names, list) or not names
                or any(not isinstance(n, str) or not n.startswith("stage-") or "/" in n
                       or ".." in n for n in names)):
            raise ValueError(f"field stages is {names!r}; expected a list of stage-N names")
        pan = None if doc.get("pan") is None else PanModel.from_dict(doc["pan"])
        size = int(doc["crop"]["size"])
        finder = doc.get("finder") or {}
        if not isinstance(finder, dict) or set(finder) - {"max_faces", "min_confidence"}:
            raise ValueError(f"field finder is {finder!r}")
        for field in ("provenance", "metrics"):
            if not isinstance(doc.get(field) or {}, dict):
                raise TypeError(f"field {field} is not a JSON object")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(js, f"is incomplete or malformed ({exc})", MESH_FIX) from None
    stages = [load_model_folder(Model, path / n, verify).to_estimator() for n in names]
    return js, dict(stages=stages, pan_model=pan, crop_size=size, finder=finder,
                    provenance=doc.get("provenance"), metrics=doc.get("metrics"),
                    gains=doc.get("gains"), mirror=doc.get("mirror", False),
                    margin=doc.get("margin"), mirror_fit=doc.get("mirror_fit", False),
                    mix=doc.get("mix", 0.0), early=doc.get("early"),
                    coarse=doc.get("coarse"), refit=doc.get("refit"))


__all__ = ["MESH_FORMAT", "MESH_FORMAT_VERSION", "MESH_FILE", "MESH_FIX", "is_mesh_folder",
           "save_mesh_model", "read_mesh_folder"]
