"""Per-pixel features of a face crop cut around a face mesh.

A face found by :class:`facesegment.faces.mesh.MeshFinder` is cut out as a
square crop (:func:`mesh_box`: centred on the mesh, side ``MESH_SCALE`` times its
larger extent) resampled to ``size`` x ``size`` pixels.  :func:`crop_planes`
stacks, per pixel of the crop, uint8 planes that a forest reads:

* the crop's colour in CIE Lab, and the same smoothed (sigma 3 px at size 128);
* the gradient magnitude of L;
* the signed distance to each drawn part of the mesh (face oval, nose, mouth,
  both eyes, both brows; :func:`facesegment.faces.mesh.draw_mesh_parts`):
  negative inside, in 1/64 of the crop, offset by 128 and clipped to uint8;
* the position relative to the nose tip (same units);
* the head's turn as the mesh shows it (the nose tip's offset from the oval's
  centre, over the oval's width) and how far back each eye lies (its depth
  behind the nose tip, over the oval's width): a turned-away eye is hidden;
* L at eight offsets of 3 and of 6 px, and a at eight offsets of 6 px (at size
  128) around the pixel;
* the pixel's coordinates in each part's own frame (``FRAMES``): along and
  across the line through the part's corners (eye corners, mouth corners, nose
  wings), from the part's centre, over the corners' distance; so the shape a
  person draws around a part is a fixed region in these coordinates.

So a forest sees where the mesh puts each part, how the pixels look, and the
pose; it learns how hand-drawn boundaries lie relative to the mesh's.
"""

import cv2
import numpy as np

from .mesh import (FACE_OVAL, LEFT_EYE, LIPS, NOSE, NOSE_TIP, RIGHT_EYE, draw_mesh_parts,
                   side_parts)

#: Side of the crop relative to the mesh's larger extent.
MESH_SCALE = 1.5
#: Crop side (pixels) the features are computed at.
CROP_SIZE = 128
#: The drawn regions measured by signed distances: the face oval (classes 1-7),
#: then each part class.
DIST_CLASSES = (2, 3, 4, 5, 6, 7)
_OFFSETS = ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1))
#: Probes: (name, Lab channel, step in pixels at size 128); each reads the
#: channel at the eight offsets of that step around the pixel.
PROBES = (("L", 0, 6), ("L3", 0, 3), ("a", 1, 6))
#: Part frames: (name, point set, corner indices); an eye's set and corners are
#: those of the subject's eye, assigned to the image's side as the drawing does.
FRAMES = (("nose", NOSE, (64, 294)), ("mouth", LIPS, (61, 291)),
          ("eyeR", RIGHT_EYE, (33, 133)), ("eyeL", LEFT_EYE, (362, 263)))
PLANE_NAMES = (("L", "a", "b", "L_smooth", "a_smooth", "b_smooth", "grad", "d_oval")
               + tuple(f"d_{c}" for c in DIST_CLASSES)
               + ("dx_nose", "dy_nose", "turn", "depth_eye4", "depth_eye5")
               + tuple(f"{name}_{dy}{dx}" for name, _, _ in PROBES for dy, dx in _OFFSETS)
               + tuple(f"{a}_{name}" for name in ("nose", "mouth", "eye4", "eye5")
                       for a in ("u", "v")))
N_PLANES = len(PLANE_NAMES)


def mesh_box(mesh, scale=MESH_SCALE):
    """The square crop box around a mesh, in its image's pixels.

    Centred on the mesh's bounding box, side ``scale`` times its larger extent.

    Parameters
    ----------
    mesh : float (N, 2) or (N, 3)
        Mesh points ``(x, y[, z])``; only x and y are used.
    scale : float
        Side relative to the mesh's larger extent.

    Returns
    -------
    (x0, y0, side) : tuple of float
    """
    pts = np.asarray(mesh, np.float64)[:, :2]
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    side = float(scale * max(hi - lo))
    cx, cy = (lo + hi) / 2
    return (float(cx - side / 2), float(cy - side / 2), side)


def box_affine(box, size):
    """The 2x3 affine map from image pixels to the crop's pixels.

    Parameters
    ----------
    box : (x0, y0, side)
        The crop box, in image pixels.
    size : int
        The crop's side, in pixels.

    Returns
    -------
    float64 (2, 3)
    """
    x0, y0, side = box
    s = size / side
    return np.array([[s, 0.0, -x0 * s], [0.0, s, -y0 * s]])


def cut(image, box, size, interpolation=cv2.INTER_LINEAR, border=0):
    """``image`` resampled into the ``size`` x ``size`` crop of ``box``.

    Parameters
    ----------
    image : array (H, W[, C])
    box : (x0, y0, side)
        The crop box, in ``image``'s pixels.
    size : int
        The crop's side, in pixels.
    interpolation : int
        OpenCV interpolation flag (bilinear by default).
    border : number or None
        Value of the pixels outside ``image``; None: the border replicated.

    Returns
    -------
    array (size, size[, C])
        Of ``image``'s dtype.
    """
    return cv2.warpAffine(image, box_affine(box, size), (size, size), flags=interpolation,
                          borderMode=cv2.BORDER_CONSTANT if border is not None
                          else cv2.BORDER_REPLICATE,
                          borderValue=0 if border is None else border)


def crop_mesh(mesh, box, size):
    """The mesh's points in the crop's pixels (z scaled alike).

    Parameters
    ----------
    mesh : float (N, 2) or (N, 3)
        In the image's pixels.
    box : (x0, y0, side)
        The crop box.
    size : int
        The crop's side, in pixels.

    Returns
    -------
    float64 (N, 2) or (N, 3)
        A new array.
    """
    x0, y0, side = box
    s = size / side
    out = np.asarray(mesh, np.float64).copy()
    out[:, 0] = (out[:, 0] - x0) * s
    out[:, 1] = (out[:, 1] - y0) * s
    if out.shape[1] > 2:
        out[:, 2] *= s
    return out


def face_crop(image, mesh, size=CROP_SIZE):
    """A face's crop around its mesh: :func:`mesh_box`, :func:`cut`, :func:`crop_mesh`.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    mesh : float (N, 3)
        The face's mesh, in ``image``'s pixels.
    size : int
        The crop's side, in pixels.

    Returns
    -------
    box : (x0, y0, side)
    crop : uint8 (size, size, 3)
    mesh_c : float64 (N, 3)
        The mesh in the crop's pixels.
    """
    box = mesh_box(mesh)
    return box, cut(image, box, size), crop_mesh(mesh, box, size)


def _signed_distance(mask):
    """Distance to the mask's edge: negative inside, positive outside (pixels)."""
    m = mask.astype(np.uint8)
    if not m.any():
        return np.full(m.shape, 1e3, np.float32)
    out = cv2.distanceTransform(1 - m, cv2.DIST_L2, 3)
    inside = cv2.distanceTransform(m, cv2.DIST_L2, 3)
    return out - inside


def _to_u8(x):
    return np.clip(np.rint(x + 128.0), 0, 255).astype(np.uint8)


def crop_planes(crop, mesh_c):
    """The feature planes of a crop.

    Parameters
    ----------
    crop : uint8 (S, S, 3)
        RGB face crop (:func:`cut` of the photo around :func:`mesh_box`).
    mesh_c : float (478, 3)
        The mesh in the crop's pixels (:func:`crop_mesh`).

    Returns
    -------
    uint8 (S, S, N_PLANES)
        The planes named by :data:`PLANE_NAMES`.
    """
    size = crop.shape[0]
    unit = size / 64.0
    lab = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_RGB2LAB)
    smooth = cv2.GaussianBlur(lab, (0, 0), 3.0 * size / CROP_SIZE)
    L = lab[..., 0].astype(np.float32)
    gx, gy = cv2.Sobel(L, cv2.CV_32F, 1, 0), cv2.Sobel(L, cv2.CV_32F, 0, 1)
    grad = np.clip(np.sqrt(gx * gx + gy * gy) / 4.0, 0, 255).astype(np.uint8)
    drawn = draw_mesh_parts(mesh_c, (size, size))
    planes = [lab, smooth, grad[..., None], _to_u8(_signed_distance(drawn > 0) / unit)[..., None]]
    for c in DIST_CLASSES:
        planes.append(_to_u8(_signed_distance(drawn == c) / unit)[..., None])
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    nx, ny = mesh_c[NOSE_TIP, 0], mesh_c[NOSE_TIP, 1]
    planes.append(_to_u8((xx - nx) / unit * 2)[..., None])
    planes.append(_to_u8((yy - ny) / unit * 2)[..., None])
    for value in turn_features(mesh_c):
        planes.append(np.full((size, size, 1), _to_u8(value * 127), np.uint8))
    for _, channel, px in PROBES:
        planes.extend(_probes(lab[..., channel], int(round(px * size / CROP_SIZE))))
    planes.extend(_frame_planes(mesh_c, xx, yy))
    return np.ascontiguousarray(np.concatenate(planes, axis=2))


def _probes(plane, step):
    """The plane shifted by ``step`` pixels toward each of the 8 neighbours."""
    pad = cv2.copyMakeBorder(plane, step, step, step, step, cv2.BORDER_REPLICATE)
    size = plane.shape[0]
    return [pad[step + dy * step:step + dy * step + size,
                step + dx * step:step + dx * step + size, None] for dy, dx in _OFFSETS]


def _frame_planes(mesh_c, xx, yy):
    """(u, v) planes of the nose, mouth and the image-left / image-right eye."""
    frames = {name: (pts, corners) for name, pts, corners in FRAMES}
    right_first = side_parts(mesh_c)[4] == RIGHT_EYE
    order = ("nose", "mouth") + (("eyeR", "eyeL") if right_first else ("eyeL", "eyeR"))
    out = []
    for name in order:
        pts, (i, j) = frames[name]
        centre = mesh_c[list(pts), :2].mean(axis=0)
        axis = mesh_c[j, :2] - mesh_c[i, :2]
        length = float(np.hypot(*axis))
        if length < 1e-6:
            axis, length = np.array([1.0, 0.0]), 1e-6
        ux, uy = axis / length
        dx, dy = xx - centre[0], yy - centre[1]
        scale = 32.0 / max(length, 1.0)
        out.append(_to_u8((dx * ux + dy * uy) * scale)[..., None])
        out.append(_to_u8((-dx * uy + dy * ux) * scale)[..., None])
    return out


def turn_features(mesh):
    """The head's turn and the eyes' depths as a mesh shows them.

    Parameters
    ----------
    mesh : float (N, 2) or (N, 3)
        Face mesh points; without z both depths are 0.

    Returns
    -------
    (turn, depth_eye4, depth_eye5) : tuple of float
        Each clipped to -1..1: the nose tip's x offset from the face oval's
        centre over the oval's width, and each image-side eye's (classes 4, 5)
        depth behind the nose tip over the oval's width.
    """
    mesh = np.asarray(mesh, np.float64)
    oval = mesh[list(FACE_OVAL)]
    width = max(float(np.ptp(oval[:, 0])), 1e-6)
    turn = (mesh[NOSE_TIP, 0] - oval[:, 0].mean()) / width
    sides = side_parts(mesh)
    z = mesh[:, 2] if mesh.shape[1] > 2 else np.zeros(len(mesh))
    depth = [(z[list(sides[c])].mean() - z[NOSE_TIP]) / width for c in (4, 5)]
    return (float(np.clip(turn, -1, 1)), float(np.clip(depth[0], -1, 1)),
            float(np.clip(depth[1], -1, 1)))
