"""Training mesh-forest stages on hand-drawn masks, and scoring them by person.

:func:`prepare_faces` runs the face mesh on each labelled photo and keeps its
crop's feature planes, crop labels and geometry; :func:`fit_stages` trains
auto-context stages on them (a later stage learns from the earlier stages'
predictions on people they were not trained on: out-of-fold by person);
:func:`photo_labels` maps a face's crop probabilities back onto its photo;
:func:`cross_validate` scores a configuration leaving each person out.
"""

from dataclasses import dataclass, field

import cv2
import numpy as np

from .mesh import draw_mesh_parts
from .mesh_features import CROP_SIZE, crop_planes, cut, face_crop
from .mesh_segment import MeshFace, photo_maps
from .mesh_mirror import average_fits, crop_stage_probas, mirrored_planes, twin_planes
from .mesh_read import predict_stages
from .mesh_refit import mesh_turn
from .mesh_stages import (IGNORE, apply_gains, near_parts, sample_pixels, stage_input,
                          to_face_classes)

#: Pixels drawn near the mesh's parts per pixel drawn over the whole crop.
N_NEAR = 1


@dataclass
class PreparedFace:
    """One labelled photo with its mesh's crop (``planes`` None: no face found)."""

    name: str
    group: object          # the person: folds never split a group
    pan: float
    labels: np.ndarray     # the photo's hand-drawn labels
    mesh: object = None
    detection: str = ""
    box: tuple = None
    planes: np.ndarray = None
    crop_labels: np.ndarray = None
    drawn: np.ndarray = None    # the mesh drawn on the crop
    mirror: np.ndarray = None   # the planes of the crop's mirror image (when asked for)
    twin: np.ndarray = None     # those of the mirror fit's crop (twin_planes; when asked for)
    twin_box: tuple = None      # that crop's box
    weight: float = 1.0         # its trained pixels, as a share of ``n_pixels``
    refit: object = None        # the face prepared with its refitted fits (when asked for)
    extra: dict = field(default_factory=dict)


def prepare_face(image, labels, mesh, name="", group=None, pan=float("nan"), detection="",
                 size=CROP_SIZE, mirror=False, twin=None):
    """A :class:`PreparedFace` of one photo and its (largest) mesh.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
        The photo.
    labels : uint8 (H, W)
        Its hand-drawn labels.
    mesh : float (478, 3) or None
        The face's mesh in the photo's pixels; None: no face found (only the
        name, group, pan, labels and detection are kept).
    name : str
    group : hashable, optional
        The person: folds never split a group.
    pan : float
        The head's turn, in degrees (NaN: unknown).
    detection : str
        The finder's pass that found the mesh.
    size : int
        The crop's side, in pixels.
    mirror : bool
        Also compute the planes of the crop's mirror image.
    twin : float (478, 3), optional
        The face's fit on the mirrored photo
        (:meth:`facesegment.faces.mesh.MeshFinder.mirror_fits`): its mirror
        image's planes are kept too (``twin``, ``twin_box``;
        :func:`facesegment.faces.mesh_mirror.twin_planes`).

    Returns
    -------
    PreparedFace
    """
    face = PreparedFace(name, group, pan, np.asarray(labels), mesh, detection)
    if mesh is None:
        return face
    face.box, crop, mesh_c = face_crop(image, mesh, size)
    face.planes = crop_planes(crop, mesh_c)
    if mirror:
        face.mirror = mirrored_planes(crop, mesh_c)
    if twin is not None:
        face.twin, face.twin_box = twin_planes(image, twin, size)
    face.crop_labels = cut(face.labels, face.box, size, interpolation=cv2.INTER_NEAREST,
                           border=IGNORE)
    face.drawn = draw_mesh_parts(mesh_c, (size, size))
    return face


def _stage_samples(faces, previous, n_pixels, seed):
    xs, ys = [], []
    for i, f in enumerate(faces):
        n = int(round(n_pixels * f.weight))
        idx, y = sample_pixels(f.crop_labels, n, seed + i, near_parts(f.planes), N_NEAR * n)
        planes = stage_input(f.planes, None if previous is None else previous[i])
        xs.append(planes.reshape(-1, planes.shape[2])[idx])
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


def fit_stages(faces, make_forest, n_stages=1, n_pixels=3000, seed=0, progress=None,
               reading=None):
    """Train ``n_stages`` auto-context stages on prepared faces (those with a mesh).

    Parameters
    ----------
    faces : list of PreparedFace
    make_forest : callable () -> unfitted forest classifier
    n_stages : int
    n_pixels : int
        Trained pixels drawn per face of weight 1 (uniformly: the classes keep
        their shares); a face draws ``n_pixels * face.weight``.
    seed : int
        Seed of the pixel draws (face ``i`` uses ``seed + i``).
    progress : callable (str) or None
    reading : Reading or None
        How the model will read a crop (:class:`facesegment.faces.mesh_read.Reading`):
        the earlier stages' predictions that later stages read as context are
        made that way (margins, early and coarse reading; the last stage's
        margin plays no part in training).  Training pixels are drawn over the
        whole crop either way.

    Returns
    -------
    list of fitted forests, first stage first.
    """
    faces = [f for f in faces if f.planes is not None]
    forests, previous = [], None
    for k in range(n_stages):
        if k > 0:   # the earlier stages' out-of-fold predictions, by group
            previous = out_of_fold(faces, make_forest, k, n_pixels, seed, reading)
        X, y = _stage_samples(faces, previous, n_pixels, seed)
        if progress:
            progress(f"stage {k + 1}/{n_stages}: {len(y)} pixels of {len(faces)} faces")
        forests.append(make_forest().fit(X, y))
    return forests


def out_of_fold(faces, make_forest, n_stages, n_pixels, seed, reading=None):
    """Each face's probabilities after ``n_stages`` stages trained without its group.

    Parameters
    ----------
    faces : list of PreparedFace
        Faces with a mesh.
    make_forest, n_pixels, seed, reading
        As for :func:`fit_stages`.
    n_stages : int
        Stages trained per fold.

    Returns
    -------
    list of float32 (S, S, 6)
        In the order of ``faces``.
    """
    groups = sorted({f.group for f in faces}, key=str)
    out = [None] * len(faces)
    for g in groups:
        train = [f for f in faces if f.group != g]
        stages = fit_stages(train, make_forest, n_stages, n_pixels, seed, reading=reading)
        for i, f in enumerate(faces):
            if f.group == g:
                out[i] = predict_stages(stages, f.planes, reading=reading)
    return out


def cross_validate(faces, make_forest, n_stages=1, n_pixels=3000, seed=0, progress=None,
                   extra=(), mirror=False, mirror_fit=False, reading=None, refit=None):
    """Leave-one-group-out probabilities of every stage.

    Parameters
    ----------
    faces : list of PreparedFace
        Each group (person) is held out once.
    make_forest, n_stages, n_pixels, seed, progress, reading
        As for :func:`fit_stages`.
    extra : sequence of PreparedFace
        Faces of another dataset, trained in every fold, never held out.
    mirror : bool
        Average each face's probabilities with its mirror image's.
    mirror_fit : bool
        With ``mirror``: the mirror image of a face prepared with a ``twin`` is
        read with that fit (as ``MeshModel.mirror_fit`` does).
    refit : float or None
        A face turned at least this far
        (:func:`facesegment.faces.mesh_refit.mesh_turn`) and prepared with a
        ``refit`` face is read with both and the two averaged
        (:func:`facesegment.faces.mesh_mirror.average_fits`, as
        ``MeshModel.refit`` does); None: never.

    Returns
    -------
    dict of str to list of float32 (S, S, 6), or None
        Per face name: each stage's crop probabilities, first to last (mirror-
        averaged with ``mirror``; :func:`facesegment.faces.mesh_stages.mix_stages`
        gives the model's output); None for a face without a mesh
        (:func:`photo_labels` turns them into labels).

    Raises
    ------
    ValueError
        ``mirror`` with faces not prepared with ``mirror=True``.
    """
    if mirror and any(f.planes is not None and f.mirror is None for f in faces):
        raise ValueError("mirror=True needs faces prepared with mirror=True")
    groups = sorted({f.group for f in faces}, key=str)
    out = {}
    for k, g in enumerate(groups):
        if progress:
            progress(f"fold {k + 1}/{len(groups)} (without {g})")
        stages = fit_stages([f for f in faces if f.group != g] + list(extra), make_forest,
                            n_stages, n_pixels, seed, reading=reading)
        for f in faces:
            if f.group == g:
                out[f.name] = None if f.planes is None else _face_proba(
                    stages, f, mirror, mirror_fit, reading, refit)
    return out


def _face_proba(stages, face, mirror, mirror_fit, reading, refit=None):
    """A prepared face's crop probabilities of every stage, as ``MeshModel.face_proba``
    reads them before mixing the stages."""
    if mirror and mirror_fit and face.twin is not None:
        probas = crop_stage_probas(stages, face.planes, face.twin, reading, face.twin_box,
                                   face.box)
    else:
        probas = crop_stage_probas(stages, face.planes, face.mirror if mirror else None,
                                   reading)
    if refit is not None and face.refit is not None and mesh_turn(face.mesh) >= refit:
        probas = average_fits(probas, _face_proba(stages, face.refit, mirror, mirror_fit,
                                                  reading), face.refit.box, face.box)
    return probas


def photo_labels(face, proba_crop, gains=None):
    """A face's labels on its photo from its crop's stage probabilities.

    Mapped back as ``segment`` maps a face
    (:func:`facesegment.faces.mesh_segment.photo_maps`).

    Parameters
    ----------
    face : PreparedFace
    proba_crop : float (S, S, 6) or None
        Stage probabilities of its crop; None: all background.
    gains : sequence of float, optional
        The decision rule's per-class gains
        (:func:`facesegment.faces.mesh_stages.apply_gains`).

    Returns
    -------
    uint8 (H, W)
        On the photo's pixels.
    """
    if proba_crop is None:
        return np.zeros(face.labels.shape[:2], np.uint8)
    p8 = to_face_classes(apply_gains(proba_crop, gains), face.drawn)
    return photo_maps(face.labels.shape, [MeshFace(face.box, face.mesh, p8, None, face.pan,
                                                    face.detection)])[0]


__all__ = ["PreparedFace", "prepare_face", "fit_stages", "out_of_fold",
           "cross_validate", "photo_labels"]
