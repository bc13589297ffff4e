"""Segmenting photos with a mesh-forest model (:mod:`facesegment.models.mesh`).

:func:`mesh_faces` finds every face of a photo with the face mesh, segments
each from its crop and maps it back onto the photo; ``facesegment.segment`` and
``facesegment segment`` both use it through the model's ``photo_faces``
(:func:`mesh_photo_faces`) and ``photo_labels`` (:func:`photo_maps`).  An image
taken as one face crop (``detect="never"``, or a 250x250 image with
``detect="auto"``) is searched for its mesh the same way, since the mesh places
the parts; when none is found the image is all background
(:func:`mesh_crop_proba`, the model's ``predict_face``).
"""

from dataclasses import dataclass

import cv2
import numpy as np

from .mesh_features import box_affine
from .photo import PhotoFace

#: The path a face found by the mesh takes (``PhotoFace.path``, the CSV's ``paths``).
MESH_PATH = "mesh"


@dataclass
class MeshFace:
    """One face of a photo under a mesh model."""

    box: tuple            # (x0, y0, side) of the crop, photo pixels
    mesh: np.ndarray      # float64 (478, 3), photo pixels
    proba: np.ndarray     # float32 (S, S, 8): the crop's class probabilities
    crop: np.ndarray      # uint8 (S, S, 3)
    pan: float            # degrees, + = turned toward the image's left
    detection: str        # the finder's pass that found it


def mesh_faces(model, image):
    """Every face of ``image`` under a mesh model, largest first.

    Parameters
    ----------
    model : MeshModel
        Finds meshes (``model.find``) and their fits on the mirrored photo
        (``model.mirror_fits``), segments a face's crop (``model.face_proba``)
        and measures its pan (``model.pan``).
    image : uint8 (H, W, 3) RGB

    Returns
    -------
    faces : list of MeshFace
    detection : str
        The finder's pass that found them ("" when none).
    """
    info = {}
    meshes = model.find(image, info)
    faces = []
    for mesh, twin in zip(meshes, model.mirror_fits(image, meshes)):
        box, proba, crop = model.face_proba(image, mesh, twin)
        faces.append(MeshFace(box, mesh, proba, crop, model.pan(mesh), info["detection"]))
    return faces, info.get("detection", "")


def mesh_photo_faces(model, image):
    """:func:`mesh_faces` as :class:`facesegment.faces.photo.PhotoFace` (``model.photo_faces``).

    The mesh's ``(x, y)`` are the face's landmarks; the path is :data:`MESH_PATH`.

    Parameters
    ----------
    model : MeshModel
    image : uint8 (H, W, 3) RGB

    Returns
    -------
    list of PhotoFace
        Largest first.
    """
    return [PhotoFace(f.box, f.mesh[:, :2].copy(), f.proba, f.crop, MESH_PATH, f.detection,
                      f.pan) for f in mesh_faces(model, image)[0]]


def mesh_crop_proba(model, crop):
    """One face crop's class probabilities under a mesh model (``model.predict_face``).

    The crop's faces are mapped back onto it (:func:`photo_maps`); where the
    mesh finds none, the crop is background.

    Parameters
    ----------
    model : MeshModel
    crop : uint8 (H, W, 3) RGB

    Returns
    -------
    float32 (H, W, 8)
    """
    faces = mesh_photo_faces(model, crop)
    if not faces:
        proba = np.zeros(crop.shape[:2] + (8,), np.float32)
        proba[..., 0] = 1.0
        return proba
    return photo_maps(crop.shape, faces, return_proba=True)[1]


def face_region(shape, faces):
    """The part of the photo the faces' crops cover.

    Parameters
    ----------
    shape : tuple
        ``(H, W, ...)`` of the photo.
    faces : non-empty list of MeshFace or PhotoFace
        Each with its crop ``box`` ``(x0, y0, side)`` in photo pixels.

    Returns
    -------
    (r0, r1, c0, c1) : tuple of int
        Rows ``r0:r1`` and columns ``c0:c1``, clipped to the photo.
    """
    h, w = shape[:2]
    x0 = min(f.box[0] for f in faces)
    y0 = min(f.box[1] for f in faces)
    x1 = max(f.box[0] + f.box[2] for f in faces)
    y1 = max(f.box[1] + f.box[2] for f in faces)
    c0, r0 = max(int(np.floor(x0)), 0), max(int(np.floor(y0)), 0)
    c1, r1 = min(int(np.ceil(x1)) + 1, w), min(int(np.ceil(y1)) + 1, h)
    return r0, max(r1, r0), c0, max(c1, c0)


def warp_back(shape, faces, region=None):
    """The faces' crop maps mapped back (bilinear) onto a region of the photo.

    The maps are summed where crops overlap, and the share no crop covers is
    added to channel 0 (background); the result is not renormalised.

    Parameters
    ----------
    shape : tuple
        ``(H, W, ...)`` of the photo.
    faces : non-empty list of MeshFace or PhotoFace
        Each with its ``box`` and ``proba`` (S, S, C), any number of channels.
    region : (r0, r1, c0, c1), optional
        Default: :func:`face_region`.

    Returns
    -------
    float32 (r1 - r0, c1 - c0, C)
    """
    r0, r1, c0, c1 = face_region(shape, faces) if region is None else region
    h, w = r1 - r0, c1 - c0
    out = np.zeros((h, w, faces[0].proba.shape[2]), np.float32)
    cover = np.zeros((h, w), np.float32)
    for f in faces:
        size = f.proba.shape[0]
        inv = cv2.invertAffineTransform(box_affine(f.box, size))
        inv[:, 2] -= (c0, r0)          # into the region's pixels
        warp = dict(flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
        cover += cv2.warpAffine(np.ones((size, size), np.float32), inv, (w, h), **warp)
        for c in range(out.shape[2]):
            out[..., c] += cv2.warpAffine(np.ascontiguousarray(f.proba[..., c]), inv, (w, h),
                                          **warp)
    out[..., 0] += np.clip(1.0 - cover, 0.0, None)
    return out


def paste_proba(shape, faces, region=None):
    """The class probabilities of a region of the photo from its faces' crops.

    Each crop is mapped back (bilinear), the faces' maps summed where they
    overlap and renormalised; background is 1 outside every face.

    Parameters
    ----------
    shape : tuple
        ``(H, W, ...)`` of the photo.
    faces : non-empty list of MeshFace or PhotoFace
    region : (r0, r1, c0, c1), optional
        Default: :func:`face_region`.

    Returns
    -------
    float32 (r1 - r0, c1 - c0, 8)
    """
    out = warp_back(shape, faces, region)
    return out / np.maximum(out.sum(axis=-1, keepdims=True), 1e-12)


def photo_maps(shape, faces, return_proba=False):
    """The photo's labels from its faces and, optionally, its probabilities.

    Only the faces' region is computed, so a big photo needs little memory for
    labels.

    Parameters
    ----------
    shape : tuple
        ``(H, W, ...)`` of the photo.
    faces : non-empty list of MeshFace or PhotoFace
    return_proba : bool
        Also return the probabilities.

    Returns
    -------
    labels : uint8 (H, W)
        0 outside the faces' crops.
    proba : float32 (H, W, 8) or None
        With ``return_proba`` (background 1 outside the faces), else None.
    """
    h, w = shape[:2]
    labels = np.zeros((h, w), np.uint8)
    region = face_region(shape, faces)
    r0, r1, c0, c1 = region
    part = paste_proba(shape, faces, region)
    labels[r0:r1, c0:c1] = np.argmax(part, axis=-1)
    proba = None
    if return_proba:
        proba = np.zeros((h, w, 8), np.float32)
        proba[..., 0] = 1.0
        proba[r0:r1, c0:c1] = part
    return labels, proba


__all__ = ["MESH_PATH", "MeshFace", "mesh_faces", "mesh_photo_faces", "mesh_crop_proba",
           "face_region", "warp_back", "paste_proba", "photo_maps"]
