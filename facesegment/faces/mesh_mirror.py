"""The mirror image of a face crop for the forest stages (:mod:`.mesh_stages`).

A crop is read twice, as it is and mirrored, and the stages' probabilities are
averaged (``MeshModel.mirror``): the mirror image is the crop flipped with its
mesh's points renamed by their left/right twins (:func:`mirrored_planes`), or
the face mesh's own fit of the mirrored photo (:func:`twin_planes`,
``MeshModel.mirror_fit``); its probabilities are flipped back with the eyes'
classes swapped (:func:`unmirror_proba`) and, for a fit of its own, moved into
the crop's pixels (:func:`move_proba`).
"""

import cv2
import numpy as np

from .mesh import _unmirror
from .mesh_features import crop_planes, face_crop
from .mesh_read import stage_probas
from .mesh_stages import TRAIN_CLASSES, mix_stages


def mirrored_planes(crop, mesh_c):
    """The feature planes of the mirror image of a crop.

    Its mesh is flipped and renamed by the points' twins
    (:mod:`facesegment.faces.mesh_twins`).

    Parameters
    ----------
    crop : uint8 (S, S, 3) RGB
    mesh_c : float (478, 3)
        The mesh in the crop's pixels.

    Returns
    -------
    uint8 (S, S, N_PLANES)
    """
    return crop_planes(np.ascontiguousarray(crop[:, ::-1]), _unmirror(mesh_c, crop.shape[1]))


def unmirror_proba(proba):
    """Stage probabilities of a mirrored crop as the crop's.

    Flipped back, with the image-left and image-right eyes (classes 4 and 5)
    swapped.

    Parameters
    ----------
    proba : float (S, S, len(TRAIN_CLASSES))

    Returns
    -------
    array (S, S, len(TRAIN_CLASSES))
        A new array.
    """
    out = np.ascontiguousarray(proba[:, ::-1])
    i, j = TRAIN_CLASSES.index(4), TRAIN_CLASSES.index(5)
    out[..., [i, j]] = out[..., [j, i]]
    return out


def twin_planes(image, twin, size):
    """The mirror-image planes of a face's fit on the mirrored photo.

    ``twin`` is the face's mesh as the face mesh fits the mirrored photo, mapped
    back (:meth:`facesegment.faces.mesh.MeshFinder.mirror_fits`); mirrored
    again, it is the fit of that mirror image, so the planes are those the
    mirrored photo gives by itself, on its own crop.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
        The photo.
    twin : float (478, 3)
        The face's mirror fit, in the photo's pixels.
    size : int
        The crop's side, in pixels.

    Returns
    -------
    planes : uint8 (size, size, N_PLANES)
        The planes of the mirror image of ``twin``'s crop (:func:`mirrored_planes`).
    box : (x0, y0, side)
        That crop's box in the photo's pixels.
    """
    box, crop, mesh_c = face_crop(image, twin, size)
    return mirrored_planes(crop, mesh_c), box


def move_proba(proba, src_box, dst_box):
    """Crop maps of one crop box resampled (bilinear) into another box's pixels.

    The share of a pixel that ``src_box`` does not cover goes to background
    (channel 0).

    Parameters
    ----------
    proba : float32 (S, S, C)
        Maps over ``src_box``'s crop.
    src_box, dst_box : (x0, y0, side)
        Crop boxes in the photo's pixels.

    Returns
    -------
    float32 (S, S, C)
        The maps over ``dst_box``'s crop.
    """
    size = proba.shape[0]
    (x1, y1, s1), (x2, y2, s2) = dst_box, src_box
    a1, a2 = size / s1, size / s2
    inv = np.array([[a2 / a1, 0.0, (x1 - x2) * a2], [0.0, a2 / a1, (y1 - y2) * a2]])
    warp = dict(dsize=(size, size), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    out = np.stack([cv2.warpAffine(np.ascontiguousarray(proba[..., c], np.float32), inv,
                                   **warp) for c in range(proba.shape[2])], axis=-1)
    out[..., 0] += np.clip(1.0 - cv2.warpAffine(np.ones((size, size), np.float32), inv,
                                                **warp), 0.0, None)
    return out


def crop_stage_probas(forests, planes, mirror=None, reading=None, mirror_box=None, box=None):
    """Every stage's probabilities over a crop's planes, each averaged with its
    mirror image's when ``mirror`` is given.

    Parameters
    ----------
    forests, planes
        The stages and the crop's planes, as for
        :func:`facesegment.faces.mesh_read.stage_probas`.
    mirror : uint8 (S, S, P), optional
        The planes of a mirror image: of the crop itself (:func:`mirrored_planes`)
        or of the face's fit on the mirrored photo (:func:`twin_planes`, with
        ``mirror_box``).  Each stage's output is averaged with the mirror image's,
        mapped back (:func:`unmirror_proba`).
    reading : Reading or None
        How the stages read both crops
        (:class:`facesegment.faces.mesh_read.Reading`).
    mirror_box, box : (x0, y0, side), optional
        The boxes of the mirror planes' crop and of ``planes``' crop, when they
        differ (the mirror image's probabilities are moved into ``box``'s
        pixels, :func:`move_proba`).

    Returns
    -------
    list of float32 (S, S, len(TRAIN_CLASSES))
        One per stage.
    """
    probas = stage_probas(forests, planes, reading)
    if mirror is None:
        return probas
    out = []
    for proba, other in zip(probas, stage_probas(forests, mirror, reading)):
        other = unmirror_proba(other)
        if mirror_box is not None:
            other = move_proba(other, mirror_box, box)
        out.append(0.5 * (proba + other))
    return out


def crop_proba(forests, planes, mirror=None, reading=None, mirror_box=None, box=None, mix=0.0):
    """The stages' probabilities over a crop's planes, optionally with a mirror image
    (:func:`crop_stage_probas`, mixed by :func:`mix_stages`).

    Parameters
    ----------
    forests, planes, mirror, reading, mirror_box, box
        As for :func:`crop_stage_probas`.
    mix : float
        The first stage's share (:func:`mix_stages`; 0: the last stage alone).

    Returns
    -------
    float32 (S, S, len(TRAIN_CLASSES))
    """
    return mix_stages(crop_stage_probas(forests, planes, mirror, reading, mirror_box, box), mix)


def average_fits(probas, refit_probas, refit_box, box):
    """Each stage's probabilities averaged with those read with the face's
    refitted fits (:meth:`facesegment.faces.mesh_refit.Refitter.refits`), moved from
    their crop's box into ``box``'s pixels (:func:`move_proba`).

    Parameters
    ----------
    probas : list of float32 (S, S, C)
        Each stage's probabilities over the crop of ``box``.
    refit_probas : list of float32 (S, S, C)
        Those over the refitted mesh's crop.
    refit_box, box : (x0, y0, side)
        The two crops' squares in the photo's pixels.

    Returns
    -------
    list of float32 (S, S, C)
    """
    return [0.5 * (p + move_proba(q, refit_box, box)) for p, q in zip(probas, refit_probas)]


__all__ = ["average_fits", "mirrored_planes", "unmirror_proba", "twin_planes", "move_proba",
           "crop_stage_probas", "crop_proba"]
