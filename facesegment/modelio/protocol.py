"""The one interface every model that segments faces has: :class:`FaceModel`.

Four classes implement it, so callers never ask which class a model is:

* :class:`facesegment.modelio.model.Model`: one forest over image windows;
* :class:`facesegment.autocontext.cascade.Cascade`: auto-context stages of forests;
* :class:`facesegment.models.landmark.LandmarkModel`: dlib's landmark votes
  with a landmark-free forest as its fallback;
* :class:`facesegment.models.mesh.MeshModel`: MediaPipe's face mesh and
  forest stages.

Forests and cascades (``dense`` true) are also what :mod:`facesegment.dense`
runs over a whole image, pixel by pixel; the other two read the parts of a
face from its landmarks or mesh, and :func:`facesegment.dense.predict_image`
hands them the image through :meth:`FaceModel.predict_face`.  This module
imports nothing of the package, so every layer may name it.
"""

from pathlib import Path
from typing import Protocol, runtime_checkable

#: The model card beside a model's files (what it was trained on, its scores).
CARD_FILE = "MODEL_CARD.md"


@runtime_checkable
class FaceModel(Protocol):
    """What every face model has (see the module's docstring for who implements it).

    Attributes
    ----------
    kind : str
        What the model is: a forest kind of :mod:`facesegment.forest.registry`,
        ``"cascade:KIND>KIND..."``, ``"landmark-votes"`` or ``"mesh-forest"``.
    rule : facesegment.rule.DecisionRule or None
        Its decision rule (None: a forest that stores none; the paper's rule
        then applies, :func:`facesegment.rule.decision_rule`).
    card : str or None
        The text of the ``MODEL_CARD.md`` of the folder it was loaded from
        (read when asked), None when there is none.
    class_names : tuple of str
        One display name per class.
    dense : bool
        True for forests and cascades: :mod:`facesegment.dense` runs them over
        any image's pixels (``predict_image``, ``evaluate``'s sweeps, kernel
        warm-up); False for models that find their own landmarks or mesh.
    """

    kind: str
    rule: object
    card: object
    class_names: tuple
    dense: bool

    def predict_face(self, crop, alpha=None, beta=None, sigma=None):
        """Class probabilities float32 (H, W, 8) of one face crop (RGB uint8).

        Parameters
        ----------
        crop : uint8 (H, W, 3)
            An RGB face crop.
        alpha, beta, sigma : float, optional
            Terms of the decision rule (None: the model's); models whose rule
            is built in do not use them.

        Returns
        -------
        float32 (H, W, 8)
        """

    def photo_faces(self, image, detect="auto", detector="landmarks", detect_size=None,
                    alpha=None, beta=None, sigma=None):
        """Every face of a photo: a list of :class:`facesegment.faces.photo.PhotoFace`.

        Parameters
        ----------
        image : uint8 (H, W, 3)
            An RGB photo.
        detect, detector, detect_size, alpha, beta, sigma
            As :func:`facesegment.segment`.

        Returns
        -------
        list of facesegment.faces.photo.PhotoFace
            Largest first.
        """

    def photo_labels(self, shape, faces, return_proba=False):
        """The photo's labels (and probabilities) from :meth:`photo_faces`'s faces.

        Parameters
        ----------
        shape : tuple
            ``(H, W, ...)`` of the photo.
        faces : list of facesegment.faces.photo.PhotoFace
            :meth:`photo_faces`'s faces.
        return_proba : bool, optional
            Also give the photo's class probabilities.

        Returns
        -------
        labels : uint8 (H, W)
        proba : float32 (H, W, C) or None
        """

    def require(self, detect=True):
        """Raise a one-line DataError when what finding faces needs is not installed.

        Parameters
        ----------
        detect : bool, optional
            Whether faces are to be detected (False: the image is taken as one
            face crop).

        Raises
        ------
        DataError
        """

    def face_finder(self, detector="landmarks"):
        """What searches a photo for faces, in words (for messages).

        Parameters
        ----------
        detector : str, optional
            The ``detector`` of :meth:`photo_faces`.

        Returns
        -------
        str
        """

    def save(self, folder):
        """Write the model as the folder ``folder`` (atomically).

        Parameters
        ----------
        folder : str or Path
            The model folder.

        Returns
        -------
        Path
        """


def read_card(folder):
    """The text of ``folder``'s model card, or None (no folder, or no card in it).

    Parameters
    ----------
    folder : str, Path or None
        The folder a model was loaded from.

    Returns
    -------
    str or None
    """
    if folder is None:
        return None
    path = Path(folder) / CARD_FILE
    return path.read_text(encoding="utf-8") if path.is_file() else None


__all__ = ["FaceModel", "CARD_FILE", "read_card"]
