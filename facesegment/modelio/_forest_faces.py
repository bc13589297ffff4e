"""The face-model protocol's methods of the forests: :class:`ForestFaces`.

:class:`facesegment.modelio.model.Model` and
:class:`facesegment.autocontext.cascade.Cascade` both inherit them (each
saves itself its own way); they segment a face crop densely with
:mod:`facesegment.dense` and find a photo's faces with dlib
(:mod:`facesegment.faces.forest_face`).
"""

from ..faces.forest_face import forest_photo_faces, forest_predict_face
from ..faces.photo import detector_words, paste_faces, require_detector
from .protocol import read_card


class DlibFaces:
    """The protocol's methods of the models whose faces dlib finds (forests,
    cascades, landmark votes): pasting faces back, the install check, the finder's
    name (:mod:`facesegment.faces.photo`)."""

    def photo_labels(self, shape, faces, return_proba=False):
        """The photo's labels uint8 (H, W) and probabilities (or None) from
        :meth:`photo_faces`'s faces (:func:`facesegment.faces.photo.paste_faces`).

        Parameters
        ----------
        shape : tuple
            ``(H, W, ...)`` of the photo.
        faces : list of facesegment.faces.photo.PhotoFace
            :meth:`photo_faces`'s faces.
        return_proba : bool, optional
            Also give the photo's probabilities (default False).

        Returns
        -------
        labels : uint8 (H, W)
            0 outside the faces' crops.
        proba : float32 (H, W, C) or None
            With ``return_proba``, else None.
        """
        return paste_faces(shape, faces, return_proba)

    def require(self, detect=True):
        """Raise a one-line DataError when dlib (to detect faces) is not installed;
        nothing when ``detect`` is false (images taken as face crops).

        Parameters
        ----------
        detect : bool, optional
            Whether faces are to be detected (default True).

        Raises
        ------
        DataError
            When ``detect`` and dlib or its landmark model is not installed.
        """
        require_detector(detect)

    def face_finder(self, detector="landmarks"):
        """What searches a photo for faces, in words (dlib's ``detector``).

        Parameters
        ----------
        detector : {"landmarks", "dlib"}, optional
            The detector's name (default ``"landmarks"``).

        Returns
        -------
        str
        """
        return detector_words(detector)


class ForestFaces(DlibFaces):
    """:class:`facesegment.modelio.protocol.FaceModel` for the forests and cascades
    (everything but ``kind``, ``rule``, ``class_names`` and ``save``)."""

    #: :mod:`facesegment.dense` runs them over any image's pixels.
    dense = True
    #: The folder the model was loaded from (None: built in memory); a Model has it
    #: as a field.
    folder = None

    @property
    def card(self):
        """The text of the ``MODEL_CARD.md`` of the folder it was loaded from, or None."""
        return read_card(self.folder)

    def predict_face(self, crop, alpha=None, beta=None, sigma=None):
        """Class probabilities of one face crop, every pixel predicted.

        Parameters
        ----------
        crop : uint8 (H, W, 3)
            An RGB face crop (a 250x250 LFW-style crop for the face models);
            a model over grey windows reads its luminance.
        alpha, beta, sigma : float, optional
            Terms of the decision rule (None: the model's own; :mod:`facesegment.rule`).

        Returns
        -------
        float32 (H, W, n_classes)
            Reweighted, renormalised probabilities: those of
            :func:`facesegment.dense.predict_image` in full mode, with the model's
            shape prior (if any) applied through the landmarks dlib finds in the crop.
        """
        return forest_predict_face(self, crop, alpha, beta, sigma)

    def photo_faces(self, image, detect="auto", detector="landmarks", detect_size=None,
                    alpha=None, beta=None, sigma=None):
        """Every face of a photo, largest first.

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
            Terms of the decision rule (None: the model's own).

        Returns
        -------
        list of facesegment.faces.photo.PhotoFace
        """
        return forest_photo_faces(self, image, detect, detector, detect_size, alpha, beta, sigma)
