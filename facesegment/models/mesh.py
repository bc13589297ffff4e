"""Mesh-forest models: MediaPipe's face mesh places the parts, forests draw their edges.

A :class:`MeshModel` segments a photo face by face: the face mesh finds each
face (:class:`facesegment.faces.mesh.MeshFinder`, at every head turn), the face
is cut out around its mesh, the forest stages (:mod:`facesegment.faces.mesh_stages`,
trained on hand-drawn masks) give each crop pixel its class probabilities from
the pixels and the mesh's drawn parts, and the crop is mapped back onto the photo.
The head's pan is estimated from the mesh (:mod:`facesegment.faces.pose`).

Saved and loaded as a folder by :mod:`facesegment.models.mesh_folder`.
"""

from ..classes import CLASS_NAMES, N_CLASSES
from ..faces.mesh import MeshFinder, draw_mesh_parts, require_mesh
from ..faces.mesh_features import CROP_SIZE, crop_planes, face_crop
from ..faces.mesh_segment import mesh_crop_proba, mesh_photo_faces, photo_maps
from ..faces.mesh_mirror import average_fits, crop_stage_probas, mirrored_planes, twin_planes
from ..faces.mesh_refit import Refitter, check_refit, mesh_turn
from ..faces.mesh_read import Reading
from ..faces.mesh_stages import (apply_gains, check_gains, check_mix, mix_stages,
                                 to_face_classes)
from ..errors import DataError
from ..modelio.protocol import read_card
from .mesh_folder import MESH_FIX, read_mesh_folder, save_mesh_model
from ..rule import DecisionRule



class MeshModel:
    """Face mesh + forest stages + pan estimate (see the module's docstring): a
    :class:`facesegment.modelio.protocol.FaceModel`.

    Parameters
    ----------
    stages : list of fitted forest classifiers
        Auto-context stages over :func:`facesegment.faces.mesh_features.crop_planes`.
    pan_model : facesegment.faces.pose.PanModel or None
    crop_size : int
        Side of the crop the stages read (pixels).
    finder : dict
        ``MeshFinder`` arguments (``max_faces``, ``min_confidence``).
    gains : list of 6 floats or None
        The decision rule: each training class's probability is multiplied by its
        gain before the argmax (:func:`facesegment.faces.mesh_stages.apply_gains`).
    mirror : bool
        Average each crop's probabilities with those of its mirror image
        (:func:`facesegment.faces.mesh_mirror.crop_proba`).
    mirror_fit : bool
        With ``mirror``: the mirror image is read with the face mesh's own fit
        of the mirrored photo (:meth:`MeshFinder.mirror_fits`,
        :func:`facesegment.faces.mesh_mirror.twin_planes`), so two independent
        fits are averaged; a face the mirrored photo does not give is mirrored
        with its own mesh.
    margin : float, list of float, or None
        The forests read only the crop pixels at most this far (1/64 of the crop)
        outside the mesh's face oval; background beyond
        (:func:`facesegment.faces.mesh_read.read_region`; None: every pixel);
        a list: one margin per stage (the last stage may read fewer pixels
        than the earlier ones, whose output it reads as context).
    early : [int, float] or None
        ``[k, confidence]``: each stage's first ``k`` trees read every pixel,
        the others only those where the first ones' leading class has less
        than ``confidence`` (:func:`facesegment.faces.mesh_read.forest_proba`);
        None: every tree reads every pixel.
    coarse : float or None
        Each stage's forest reads the crop's pixels of even row and column
        first, then only the pixels whose neighbours among those disagree on
        the leading class or lead by less than ``coarse`` over their second;
        the others get their neighbours' mean
        (:func:`facesegment.faces.mesh_read.predict_stage`).  None: every pixel
        is read.  ``margin``, ``early`` and ``coarse`` are kept, checked, as one
        :attr:`reading` (:class:`facesegment.faces.mesh_read.Reading`), which
        the stage functions take.
    refit : float or None
        A face whose mesh is turned at least this far
        (:func:`facesegment.faces.mesh_refit.mesh_turn`) is read twice, with its
        fits as found and as the landmark network fits them again in their own
        regions (:meth:`facesegment.faces.mesh_refit.Refitter.refits`), and the two readings' stage
        probabilities averaged (:func:`facesegment.faces.mesh_mirror.average_fits`);
        None: every face is read once.
    mix : float or list of 6 floats
        The first stage's share of the output, mixed into the last stage's
        probabilities before the gains, or one share per training class
        (:func:`facesegment.faces.mesh_stages.mix_stages`; 0: the last stage alone).
    """

    kind = "mesh-forest"

    def __init__(self, stages, pan_model=None, crop_size=CROP_SIZE, finder=None,
                 provenance=None, metrics=None, gains=None, mirror=False, margin=None,
                 mirror_fit=False, mix=0.0, early=None, coarse=None, refit=None):
        if not stages:
            raise ValueError("a mesh model needs at least one forest stage")
        self.forests = list(stages)
        self.pan_model = pan_model
        self.crop_size = int(crop_size)
        if not 32 <= self.crop_size <= 512:
            raise ValueError(f"crop size {self.crop_size} is outside 32..512")
        self.finder_params = dict(finder or {"max_faces": 4, "min_confidence": 0.6})
        self.gains = None if gains is None else [float(g) for g in gains]
        check_gains(self.gains)
        if not isinstance(mirror, bool):
            raise ValueError(f"mirror must be true or false, got {mirror!r}")
        self.mirror = mirror
        if not isinstance(mirror_fit, bool) or (mirror_fit and not mirror):
            raise ValueError(f"mirror_fit must be true or false, and true only with mirror, "
                             f"got {mirror_fit!r}")
        self.mirror_fit = mirror_fit
        self.reading = Reading(margin, early, coarse).checked(len(self.forests))
        self.refit = check_refit(refit)
        check_mix(mix)
        self.mix = ([float(v) for v in mix] if isinstance(mix, (list, tuple))
                    else float(mix))
        self.provenance = dict(provenance or {})
        self.metrics = dict(metrics or {})
        self.class_names = tuple(CLASS_NAMES)
        self.position = None
        self.layout = None
        self.rule = DecisionRule(alpha=0.0)   # the stages learned the classes' real shares
        self._finder = None
        self._refitter = None

    @property
    def refitter(self):
        """The landmark network that refits a turned face's fits
        (:class:`facesegment.faces.mesh_refit.Refitter`, made when first asked)."""
        if self._refitter is None:
            self._refitter = Refitter()
        return self._refitter

    @property
    def margin(self):
        """The stages' read margin (:attr:`reading`)."""
        return self.reading.margin

    @property
    def early(self):
        """The forests' early reading (:attr:`reading`)."""
        return self.reading.early

    @property
    def coarse(self):
        """The stages' coarse reading (:attr:`reading`)."""
        return self.reading.coarse

    @property
    def n_classes(self):
        return N_CLASSES

    def __repr__(self):
        return (f"MeshModel(forests={len(self.forests)}, crop_size={self.crop_size}, "
                f"mirror={self.mirror}, mirror_fit={self.mirror_fit}, margin={self.margin}, "
                f"early={self.early}, coarse={self.coarse}, refit={self.refit}, "
                f"mix={self.mix!r}, "
                f"pan={'yes' if self.pan_model is not None else 'no'})")

    @property
    def finder(self):
        if self._finder is None:
            self._finder = MeshFinder(**self.finder_params)
        return self._finder

    def find(self, image, info=None):
        """The face meshes of a photo (:meth:`MeshFinder.find`), largest first.

        Parameters
        ----------
        image : uint8 (H, W, 3)
            An RGB photo.
        info : dict, optional
            Gets ``"detection"``: the finder's pass that found the faces.

        Returns
        -------
        list of float64 (478, 3)
            The meshes in the photo's pixels.

        Raises
        ------
        DataError
            When MediaPipe's face mesh is not installed.
        """
        return self.finder.find(image, info)

    def mirror_fits(self, image, meshes):
        """Each mesh's fit on the mirrored photo when :attr:`mirror_fit`
        (:meth:`MeshFinder.mirror_fits`), else None for each.

        Parameters
        ----------
        image : uint8 (H, W, 3)
            An RGB photo.
        meshes : list of float (478, 3)
            :meth:`find`'s meshes of ``image``.

        Returns
        -------
        list of float64 (478, 3) or None
            One per mesh.
        """
        if not self.mirror_fit:
            return [None] * len(meshes)
        return self.finder.mirror_fits(image, meshes)

    def face_proba(self, image, mesh, twin=None):
        """One face's crop and its class probabilities (the stages' forests, with
        a mirror image when :attr:`mirror`, the first stage mixed in by :attr:`mix`,
        the gains applied, then the mesh's drawn parts mapped to the face classes).

        Parameters
        ----------
        image : uint8 (H, W, 3)
            An RGB photo.
        mesh : float (478, 3)
            One face's mesh in ``image``'s pixels (:meth:`find`).
        twin : float (478, 3), optional
            Its fit on the mirrored photo (:meth:`mirror_fits`): with
            :attr:`mirror_fit`, the mirror image is read with it; None: the crop
            is mirrored with ``mesh``.

        Returns
        -------
        box : (x0, y0, side)
            The crop's square in the photo's pixels.
        proba : float32 (S, S, 8)
            S is :attr:`crop_size`.
        crop : uint8 (S, S, 3)
        """
        box, crop, mesh_c, stages = self._stage_probas(image, mesh, twin)
        if self.refit is not None and mesh_turn(mesh) >= self.refit:
            again, twin_again = self.refitter.refits(image, mesh,
                                                     twin if self.mirror_fit else None)
            box2, _, _, stages2 = self._stage_probas(image, again, twin_again)
            stages = average_fits(stages, stages2, box2, box)
        proba = apply_gains(mix_stages(stages, self.mix), self.gains)
        return box, to_face_classes(proba, draw_mesh_parts(mesh_c, proba.shape[:2])), crop

    def _stage_probas(self, image, mesh, twin):
        """A face's crop box, crop, mesh in the crop and every stage's
        probabilities (mirror-averaged as the model reads a crop)."""
        box, crop, mesh_c = face_crop(image, mesh, self.crop_size)
        mirror, mirror_box = None, None
        if self.mirror and self.mirror_fit and twin is not None:
            mirror, mirror_box = twin_planes(image, twin, self.crop_size)
        elif self.mirror:
            mirror = mirrored_planes(crop, mesh_c)
        return box, crop, mesh_c, crop_stage_probas(self.forests, crop_planes(crop, mesh_c),
                                                    mirror, self.reading, mirror_box, box)

    def pan(self, mesh):
        """The head's pan in degrees (+ = turned toward the image's left), or NaN.

        Parameters
        ----------
        mesh : float (478, 3)
            One face's mesh.

        Returns
        -------
        float
            NaN when the model has no pan estimate.
        """
        if self.pan_model is None:
            return float("nan")
        return float(self.pan_model.predict(mesh))

    # ------------------------------------------------ the face-model protocol
    #: Reads faces from their mesh, not window by window (:mod:`facesegment.dense`).
    dense = False
    #: The folder the model was loaded from (None: built in memory).
    folder = None

    @property
    def card(self):
        """The text of the ``MODEL_CARD.md`` of the folder it was loaded from, or None."""
        return read_card(self.folder)

    def predict_face(self, crop, alpha=None, beta=None, sigma=None):
        """Class probabilities of one face crop: the faces the mesh finds in it,
        segmented and mapped back onto the crop's pixels (all background where
        none is); what ``facesegment.segment`` gives for the crop as a photo.

        Parameters
        ----------
        crop : uint8 (H, W, 3)
            An RGB face crop (any size).
        alpha, beta, sigma : float, optional
            Taken for the protocol and not used: the stages' gains are the
            model's decision rule (as in :meth:`photo_faces`).

        Returns
        -------
        float32 (H, W, 8)
            Sums to 1 per pixel.
        """
        return mesh_crop_proba(self, crop)

    def photo_faces(self, image, detect="auto", detector="landmarks", detect_size=None,
                    alpha=None, beta=None, sigma=None):
        """Every face of a photo the face mesh finds, largest first (every image is
        searched, whatever ``detect``, since the mesh places the parts).

        Parameters
        ----------
        image : uint8 (H, W, 3)
            An RGB photo.
        detect, detector, detect_size, alpha, beta, sigma
            Taken for the protocol and not used (the mesh finder has its own
            passes and copy size; the gains are the rule).

        Returns
        -------
        list of facesegment.faces.photo.PhotoFace
            ``landmarks``: the mesh's points (x, y) in the photo's pixels;
            ``pan``: the head's pan in degrees.
        """
        return mesh_photo_faces(self, image)

    def photo_labels(self, shape, faces, return_proba=False):
        """The photo's labels uint8 (H, W) and probabilities (or None) from
        :meth:`photo_faces`'s faces (:func:`facesegment.faces.mesh_segment.photo_maps`).

        Parameters
        ----------
        shape : tuple
            ``(H, W, ...)`` of the photo.
        faces : non-empty list of facesegment.faces.photo.PhotoFace
            :meth:`photo_faces`'s faces.
        return_proba : bool, optional
            Also compute the probabilities (default False).

        Returns
        -------
        labels : uint8 (H, W)
            0 outside the faces' crops.
        proba : float32 (H, W, 8) or None
            With ``return_proba``, else None.
        """
        return photo_maps(shape, faces, return_proba)

    def require(self, detect=True):
        """Raise a one-line DataError when MediaPipe's face mesh is not installed
        (needed for every image, ``detect`` or not).

        Parameters
        ----------
        detect : bool, optional
            Taken for the protocol and not used.

        Raises
        ------
        DataError
            When MediaPipe's face mesh is not installed.
        """
        require_mesh()

    def face_finder(self, detector="landmarks"):
        """What searches a photo for faces, in words (the face mesh, whatever ``detector``).

        Parameters
        ----------
        detector : str, optional
            Taken for the protocol and not used.

        Returns
        -------
        str
        """
        return "the face mesh (passes: as given, with a border, mirrored, turned)"

    def save(self, folder):
        """Write the model as the folder ``folder`` (:func:`save_mesh_model`).

        Parameters
        ----------
        folder : str or Path

        Returns
        -------
        Path
            ``folder``.
        """
        return save_mesh_model(self, folder)


def load_mesh_model(path, verify=True):
    """Load a folder written by :func:`facesegment.models.mesh_folder.save_mesh_model`
    (DataError naming the file when it is not one).

    Parameters
    ----------
    path, verify
        As for :func:`facesegment.models.mesh_folder.read_mesh_folder`.

    Returns
    -------
    MeshModel
        Its ``folder`` is ``path``.

    Raises
    ------
    DataError
        When ``mesh-model.json`` is missing, unreadable, of another format or
        version, incomplete or malformed, or a stage cannot be loaded.
    """
    js, fields = read_mesh_folder(path, verify)
    try:
        model = MeshModel(**fields)
    except (TypeError, ValueError) as exc:
        raise DataError(js, f"is malformed ({exc})", MESH_FIX) from None
    model.folder = js.parent   # its model card is read from there when asked
    return model


__all__ = ["MeshModel", "save_mesh_model", "load_mesh_model"]
