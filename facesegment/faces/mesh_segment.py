"""Segmenting photos with a mesh-forest model (:mod:`facesegment.faces.mesh_model`).

:func:`mesh_faces` finds every face of a photo with the face mesh, segments
each from its crop and maps it back onto the photo; ``facesegment.segment`` and
:func:`facesegment.faces.segment.segment_image` (``facesegment segment``) both
use it.  An image taken as one face crop (``detect="never"``, or a 250x250
image with ``detect="auto"``) is searched for its mesh the same way, since the
mesh places the parts; when none is found the image is all background.
"""

from dataclasses import dataclass

import cv2
import numpy as np

from .mesh_features import box_affine
from .mesh_model import MESH_PATH


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
    """Every face of ``image`` (RGB uint8) under ``model``, largest first,
    and the detection pass that found them ("" when none)."""
    info = {}
    meshes = model.find(image, info)
    faces = []
    for mesh in meshes:
        box, proba, crop = model.face_proba(image, mesh)
        faces.append(MeshFace(box, mesh, proba, crop, model.pan(mesh), info["detection"]))
    return faces, info.get("detection", "")


def paste_proba(shape, faces):
    """The photo's class probabilities (H, W, 8) from its faces' crops: each
    crop mapped back (bilinear) and the faces' maps summed where they overlap;
    background 1 outside every face."""
    h, w = shape[:2]
    out = np.zeros((h, w, 8), np.float32)
    cover = np.zeros((h, w), np.float32)
    for f in faces:
        size = f.proba.shape[0]
        inv = cv2.invertAffineTransform(box_affine(f.box, size))
        ones = np.ones((size, size), np.float32)
        weight = cv2.warpAffine(ones, inv, (w, h), flags=cv2.INTER_LINEAR,
                                borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
        for c in range(8):
            out[..., c] += cv2.warpAffine(np.ascontiguousarray(f.proba[..., c]), inv, (w, h),
                                          flags=cv2.INTER_LINEAR,
                                          borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
        cover += weight
    out[..., 0] += np.clip(1.0 - cover, 0.0, None)
    total = out.sum(axis=-1, keepdims=True)
    return out / np.maximum(total, 1e-12)


def face_labels(shape, face):
    """The photo's labels from one face: its classes inside its crop, 0 elsewhere."""
    return np.argmax(paste_proba(shape, [face]), axis=-1).astype(np.uint8)


def segment_image_mesh(model, image, return_proba, info):
    """:func:`facesegment.faces.segment.segment_image` for a mesh model."""
    faces, how = mesh_faces(model, image)
    info.update(detection=how, paths=[MESH_PATH] * len(faces),
                pans=[f.pan for f in faces],
                pan_marks=[(f.box[0] + 0.05 * f.box[2], f.box[1] + 0.08 * f.box[2],
                            f"pan {f.pan:+.0f}") for f in faces if f.pan == f.pan])
    if not faces:
        return (None, 0, None) if return_proba else (None, 0)
    proba = paste_proba(image.shape, faces)
    labels = np.argmax(proba, axis=-1).astype(np.uint8)
    return (labels, len(faces), proba) if return_proba else (labels, len(faces))


__all__ = ["MeshFace", "mesh_faces", "paste_proba", "face_labels", "segment_image_mesh"]
