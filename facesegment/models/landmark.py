"""Landmark models: face parsers that read dlib's 68 landmarks.

A :class:`LandmarkModel` segments a face crop with the *vote renderer*
(:mod:`facesegment.faces.votes`: dlib's predictor run from many boxes, mirrored and
at sub-pixel scale, each landmark set drawn as the label polygons, the class
votes averaged) and falls back on a landmark-free model (any model folder: a
forest or a cascade) for a face where dlib finds no face in the crop.

The folder::

    landmark-model.json   format "facesegment-landmark-model", format_version
                          (2; 1 is read too), package_version, kind
                          ("landmark-votes"), votes (VoteSpec.to_dict()),
                          fallback (null, "fallback" or "shipped:NAME"),
                          provenance, metrics
    fallback/             optional: a landmark-free model (or cascade) folder
    MODEL_CARD.md         optional
"""

from pathlib import Path

import numpy as np

from .. import __version__
from ..atomic import MANIFEST, write_json_atomic
from ..autocontext.cascade import is_cascade_folder, load_cascade
from ..classes import CLASS_NAMES, N_CLASSES
from ..dense import predict_image
from ..errors import DataError
from ..faces.crops import model_image
from ..faces.photo import OWN_LANDMARKS, crop_faces
from ..faces.votes import FREE_PATH, LANDMARK_PATH, VoteSpec, face_votes
from ..modelio._forest_faces import DlibFaces
from ..modelio._model_class import Model
from ..modelio._model_doc import read_format_doc
from ..modelio._model_files import check_model_output, jsonable, load_model_folder, write_folder
from ..modelio.protocol import read_card
from ..rule import DecisionRule
from . import model_path

LANDMARK_FORMAT = "facesegment-landmark-model"
#: Version 2 added ``votes.flip_all`` (the mirrored face run from every box);
#: version 1 files (without it: the mirrored face from the detector's box) are read too.
LANDMARK_FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
LANDMARK_FILE = "landmark-model.json"
_FIX = "build the landmark model again (or point at another model folder)"


class LandmarkModel(DlibFaces):
    """The vote renderer and a landmark-free fallback: a
    :class:`facesegment.modelio.protocol.FaceModel`."""

    kind = "landmark-votes"

    def __init__(self, votes, fallback=None, provenance=None, metrics=None, fallback_name=None):
        if not isinstance(votes, VoteSpec):
            raise TypeError(f"votes must be a VoteSpec, got {type(votes).__name__}")
        self.votes = votes
        self.fallback = fallback
        self.fallback_name = fallback_name   # a shipped model's name: referred to, not copied
        self.provenance = dict(provenance or {})
        self.metrics = dict(metrics or {})
        self.class_names = tuple(CLASS_NAMES)
        self.position = None    # crops are cut by the landmark rule as it is
        self.layout = None      # reads RGB photos (the fallback has its own layout)
        self.rule = DecisionRule(alpha=0.0)   # the votes are decisions already

    @property
    def n_classes(self):
        return N_CLASSES

    def __repr__(self):
        fallback = self.fallback_name or ("none" if self.fallback is None else
                                          getattr(self.fallback, "kind", "model"))
        return f"LandmarkModel(votes={self.votes.n_sets} sets, fallback={fallback!r})"

    #: Reads faces from dlib's landmarks, not window by window (:mod:`facesegment.dense`).
    dense = False
    #: The folder the model was loaded from (None: built in memory).
    folder = None

    @property
    def card(self):
        """The text of the ``MODEL_CARD.md`` of the folder it was loaded from, or None."""
        return read_card(self.folder)

    def predict_crop(self, image):
        """Class probabilities of a face crop (RGB uint8 (H, W, 3)).

        Parameters
        ----------
        image : uint8 (H, W, 3)
            An RGB face crop.

        Returns
        -------
        proba : float32 (H, W, C)
            The landmark votes, or the fallback model's maps.
        path : str
            :data:`LANDMARK_PATH` when dlib found the face in the crop, else
            :data:`FREE_PATH` (the fallback model's maps; all background
            without one).
        detection : str
            The dlib pass that found the face ("" when none).
        """
        return self.read_face(image)[:3]

    def read_face(self, image):
        """:meth:`predict_crop` and the face's landmarks.

        Parameters
        ----------
        image : uint8 (H, W, 3)
            An RGB face crop.

        Returns
        -------
        proba, path, detection
            As :meth:`predict_crop`.
        points : float64 (68, 2) or None
            The median of the finite landmark sets, in ``image``'s pixels; None
            on the landmark-free path or when no set is finite.
        """
        votes, sets, how = face_votes(image, self.votes)
        if votes is None:
            return self._fallback(image), FREE_PATH, "", None
        sets = np.asarray(sets, np.float64)
        ok = np.isfinite(sets).all(axis=(1, 2))
        points = np.median(sets[ok], axis=0) if ok.any() else None
        return votes, LANDMARK_PATH, how, points

    def predict_face(self, crop, alpha=None, beta=None, sigma=None):
        """Class probabilities of one face crop: the landmark votes of the face dlib
        finds in it, else the fallback's maps (all background without one).

        Parameters
        ----------
        crop : uint8 (H, W, 3)
            An RGB face crop.
        alpha, beta, sigma : float, optional
            Taken for the protocol and not used: the votes are decisions
            already (the model's rule is alpha 0), and the fallback applies its
            own rule (as :meth:`photo_faces` does).

        Returns
        -------
        float32 (H, W, 8)
            Each pixel's share of the votes for each class (sums to 1).
        """
        return self.read_face(crop)[0]

    def photo_faces(self, image, detect="auto", detector="landmarks", detect_size=None,
                    alpha=None, beta=None, sigma=None):
        """Every face of a photo, largest first: dlib's faces, each crop cut as the
        training faces were and segmented by :meth:`read_face`.

        Parameters
        ----------
        image : uint8 (H, W, 3)
            An RGB photo.
        detect : {"auto", "always", "never"}
            "auto" takes an exactly-250x250 image as one face crop, "never" any
            image, "always" none.
        detector : {"landmarks", "dlib"}
            How dlib's faces are cut (:func:`facesegment.faces.crops.find_crops`).
        detect_size : int, optional
            Faces are detected on a copy of this longer side (None: 2000; 0: full size).
        alpha, beta, sigma : float, optional
            Not used (see :meth:`predict_face`).

        Returns
        -------
        list of facesegment.faces.photo.PhotoFace
            A face's ``landmarks`` are the detector's (its crop's own landmark
            sets for an image taken as one crop).
        """
        def one(crop, points):
            """One crop's ``(proba, path, detection, landmarks)``.

            Parameters
            ----------
            crop : uint8 (S, S, 3)
                The face crop.
            points : float64 (68, 2), None or OWN_LANDMARKS
                The detector's landmarks in the crop's pixels; for
                :data:`facesegment.faces.photo.OWN_LANDMARKS` (an image taken
                as one crop) the crop's own landmark sets are returned instead.

            Returns
            -------
            tuple
                :meth:`read_face`'s proba, path and detection, and the landmarks.
            """
            proba, path, how, own = self.read_face(crop)
            return proba, path, how, (own if points is OWN_LANDMARKS else points)

        return crop_faces(self, image, one, detect, detector, detect_size)

    def save(self, folder):
        """Write the model as the folder ``folder`` (:func:`save_landmark_model`).

        Parameters
        ----------
        folder : str or Path

        Returns
        -------
        Path
            ``folder``.
        """
        return save_landmark_model(self, folder)

    def _fallback(self, image):
        h, w = image.shape[:2]
        if self.fallback is None:
            out = np.zeros((h, w, N_CLASSES), np.float32)
            out[..., 0] = 1.0
            return out

        return predict_image(self.fallback, model_image(self.fallback, image), mode="full")[0]


# ------------------------------------------------------------------ files

def is_landmark_folder(path):
    """Does ``path`` hold a landmark model (a ``landmark-model.json`` file)?

    Parameters
    ----------
    path : str or Path
        A folder.

    Returns
    -------
    bool
    """
    return (Path(path) / LANDMARK_FILE).is_file()


def save_landmark_model(model, path):
    """Write the folder atomically; an existing landmark model, model or cascade
    folder at ``path`` is replaced, anything else is refused.

    The fallback is written as ``fallback/`` unless it is a shipped model
    (``model.fallback_name``), which is referred to by name.

    Parameters
    ----------
    model : LandmarkModel
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
        When ``path`` is a landmark model folder holding other files, is a
        file or folder that :func:`facesegment.modelio.model.check_model_output`
        refuses, or cannot be written.
    """
    path = Path(path)
    if is_landmark_folder(path):
        own = (LANDMARK_FILE, "fallback", "MODEL_CARD.md", MANIFEST)
        other = sorted(p.name for p in path.iterdir() if p.name not in own)
        if other:
            raise DataError(path, f"holds files that are not the model's ({', '.join(other)})",
                            "move them away or choose another output folder")
    else:
        check_model_output(path)

    def fill(tmp):
        """Write the fallback folder (when not shipped) and the JSON file.

        Parameters
        ----------
        tmp : Path
            The temporary folder that replaces ``path`` afterwards.
        """
        if model.fallback is not None and model.fallback_name is None:
            model.fallback.save(tmp / "fallback")
        write_json_atomic(tmp / LANDMARK_FILE, {
            "format": LANDMARK_FORMAT, "format_version": LANDMARK_FORMAT_VERSION,
            "package_version": __version__, "kind": model.kind,
            "votes": model.votes.to_dict(),
            "fallback": (None if model.fallback is None else "fallback"
                         if model.fallback_name is None else "shipped:" + model.fallback_name),
            "provenance": jsonable(model.provenance), "metrics": jsonable(model.metrics)},
            indent=2, sort_keys=True)

    return write_folder(path, fill, "the landmark model", "choose a writable folder with free space")


def load_landmark_model(path, verify=True):
    """Load a folder written by :func:`save_landmark_model` (DataError naming
    the file when it is not one).

    Parameters
    ----------
    path : str or Path
        The landmark model folder.
    verify : bool, optional
        Check the recorded sizes and SHA-256 of the fallback model's files
        (default True).

    Returns
    -------
    LandmarkModel
        Its ``folder`` is ``path``.

    Raises
    ------
    DataError
        When ``landmark-model.json`` is missing, unreadable, of another format
        or version, incomplete or malformed, or the fallback cannot be loaded.
    """
    path = Path(path)
    js = path / LANDMARK_FILE
    doc = read_format_doc(js, LANDMARK_FORMAT, READ_VERSIONS, "landmark-model", _FIX)
    version = doc["format_version"]
    try:
        votes = VoteSpec.from_dict(doc["votes"])
        if version == 1 and "flip_all" in doc["votes"]:
            raise ValueError("field votes.flip_all needs format version 2")
        for field in ("provenance", "metrics"):
            if not isinstance(doc.get(field) or {}, dict):
                raise TypeError(f"field {field} is not a JSON object")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(js, f"is incomplete or malformed ({exc})", _FIX) from None
    fallback, name = _load_fallback(path, doc.get("fallback"), verify)
    try:
        model = LandmarkModel(votes, fallback, doc.get("provenance"), doc.get("metrics"), name)
    except (TypeError, ValueError) as exc:
        raise DataError(js, f"is malformed ({exc})", _FIX) from None
    model.folder = path   # its model card is read from there when asked
    return model


def _load_fallback(path, ref, verify):
    """The fallback model and, for a shipped one, its name."""
    def load_model(folder, verify):   # a model or cascade folder (never a landmark model)
        """The cascade or forest model of ``folder``.

        Parameters
        ----------
        folder : Path
            A cascade or model folder.
        verify : bool
            Check the recorded sizes and SHA-256 of its files.

        Returns
        -------
        Cascade or Model
        """
        if is_cascade_folder(folder):
            return load_cascade(folder, verify)
        return load_model_folder(Model, folder, verify)

    if ref is None:
        return None, None
    if ref == "fallback":
        return load_model(path / "fallback", verify), None
    if isinstance(ref, str) and ref.startswith("shipped:"):
        name = ref[len("shipped:"):]
        return load_model(model_path(name), verify), name
    raise DataError(path / LANDMARK_FILE, f"field fallback is {ref!r}; expected null, "
                    "\"fallback\" or \"shipped:NAME\"", _FIX)


__all__ = ["LandmarkModel", "LANDMARK_PATH", "FREE_PATH", "is_landmark_folder",
           "save_landmark_model", "load_landmark_model"]
