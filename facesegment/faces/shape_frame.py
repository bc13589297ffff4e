"""The shape prior's canonical face frame and the piecewise-affine warps in and out of it.

The frame is the Procrustes mean of the training faces' predicted landmarks,
placed like an LFW-style crop of side ``size`` (:func:`mean_shape_of`), plus
two rings of anchor points around it (:func:`anchor_points`) carried onto
each face by the best similarity (:func:`control_points`).  A Delaunay mesh of
the frame's control points and one affine map per triangle
(:class:`PiecewiseAffine`) map the frame onto a face (:func:`frame_to_face`)
and back (:func:`face_to_frame`); :func:`warp_to_frame` and
:func:`warp_from_frame` resample maps through them.  The prior fitted and
applied in this frame: :mod:`facesegment.faces.shape_prior`.
"""

import numpy as np

from .crops import LANDMARK_SCALE

#: Default frame side (pixels).
DEFAULT_SIZE = 250
#: Anchor rings: radii in units of the mean shape's radius, points per ring.
RINGS = (1.6, 4.0)
RING_POINTS = 16


def _check_points(points, name="points"):
    p = np.asarray(points, dtype=np.float64)
    if p.shape != (68, 2) or not np.all(np.isfinite(p)):
        raise ValueError(f"{name} must be 68 finite (x, y) landmarks, shape (68, 2); "
                         f"got shape {p.shape}")
    return p


def _similarity(src, dst):
    """scikit-image's least-squares similarity from ``src`` to ``dst`` (None when
    it cannot be estimated); ``from_estimate`` where scikit-image has it (0.26),
    else ``estimate``."""
    from skimage.transform import SimilarityTransform

    if hasattr(SimilarityTransform, "from_estimate"):
        t = SimilarityTransform.from_estimate(src, dst)
        return t if t else None
    t = SimilarityTransform()
    return t if t.estimate(src, dst) else None


def anchor_points(mean_shape):
    """The frame's anchor points around the mean shape.

    ``RING_POINTS`` points lie on each ring of radius ``r * RINGS`` around the
    mean shape's centroid (``r``: its largest distance to the centroid), so
    that the mesh covers the whole frame.

    Parameters
    ----------
    mean_shape : float (68, 2)
        The frame's landmarks, ``(x, y)`` in frame pixels.

    Returns
    -------
    float64 (len(RINGS) * RING_POINTS, 2)

    Raises
    ------
    ValueError
        ``mean_shape`` is not 68 finite ``(x, y)`` points.
    """
    m = _check_points(mean_shape, "mean_shape")
    c = m.mean(axis=0)
    r = float(np.sqrt(((m - c) ** 2).sum(axis=1)).max())
    t = 2 * np.pi * (np.arange(RING_POINTS) + 0.5) / RING_POINTS
    ring = np.stack([np.cos(t), np.sin(t)], axis=1)
    return np.concatenate([c + k * r * ring for k in RINGS])


def control_points(points, mean_shape):
    """The 68 landmarks and the anchors in both the frame and the face.

    The anchors are carried to the face by the similarity that best maps the
    mean shape onto ``points`` (least squares).

    Parameters
    ----------
    points : float (68, 2)
        The face's landmarks, ``(x, y)`` in its image's pixels.
    mean_shape : float (68, 2)
        The frame's landmarks.

    Returns
    -------
    frame_points : float64 (n, 2)
    face_points : float64 (n, 2)
        The same control points, in the face's image.

    Raises
    ------
    ValueError
        Points that are not 68 finite ``(x, y)`` pairs, or degenerate landmarks
        (no similarity maps the mean shape onto them).
    """
    p = _check_points(points)
    m = _check_points(mean_shape, "mean_shape")
    sim = _similarity(m, p)
    if sim is None:
        raise ValueError("the landmarks are degenerate (all in one point?): no similarity "
                         "maps the mean shape onto them")
    a = anchor_points(m)
    return np.concatenate([m, a]), np.concatenate([p, sim(a)])


class PiecewiseAffine:
    """The piecewise-affine map of control points ``src`` -> ``dst`` (float64
    (n, 2) each, ``(x, y)``) over a triangle mesh: on each triangle the affine
    map that takes its three corners to their ``dst``; points outside the
    mesh map to ``(-1, -1)``.

    The mesh is scipy's Delaunay triangulation of ``src`` (``mesh``: one given),
    or the triangles ``simplices`` (indices into the points) given explicitly:
    the frame's mesh carried onto a face, so that the map back from a face is
    the exact inverse of the map into the frame.  With the Delaunay mesh it is
    the map of scikit-image's ``PiecewiseAffineTransform.from_estimate(src,
    dst)`` (tested against it and a naive per-point reference), with the
    triangles' matrices solved in one batch and the points mapped in one
    gather (scikit-image's per-triangle loops take seconds per 250 x 250 face
    on two cores; this takes milliseconds).
    """

    def __init__(self, src, dst, mesh=None, simplices=None):
        from scipy.spatial import Delaunay

        src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
        if src.shape != dst.shape or src.ndim != 2 or src.shape[1] != 2:
            raise ValueError(f"src {src.shape} and dst {dst.shape} must both be (n, 2)")
        self.src = src
        if simplices is None:
            self.mesh = Delaunay(src) if mesh is None else mesh
            self.triangles = self.mesh.simplices
        else:
            self.mesh, self.triangles = None, np.asarray(simplices, np.int64)
        corners = np.concatenate([src[self.triangles],
                                  np.ones(self.triangles.shape + (1,))], axis=2)   # (t, 3, 3)
        # a triangle of zero area (e.g. dlib's inner-lip points of a closed mouth
        # coincide) holds no point: it gets no map and is never chosen
        flat = np.abs(np.linalg.det(corners)) < 1e-9
        if flat.all():
            raise ValueError("the control points make only degenerate triangles (points "
                             "repeated or in a line?)")
        corners[flat] = np.eye(3)
        self.matrices = np.linalg.solve(corners, dst[self.triangles])               # (t, 3, 2)
        self.matrices[flat] = 0.0
        self.flat = flat

    def simplices(self, coords):
        """Index of the triangle holding each point.

        Parameters
        ----------
        coords : float (n, 2)
            Points ``(x, y)`` in ``src`` space.

        Returns
        -------
        int (n,)
            Triangle indices; -1 outside the mesh.  With explicit ``simplices`` the
            first triangle holding a point wins; triangles of zero area hold none.
        """
        coords = np.asarray(coords, np.float64)
        if self.mesh is not None:
            return self.mesh.find_simplex(coords)
        out = np.full(len(coords), -1, np.int64)
        corners = self.src[self.triangles]
        for t in range(len(self.triangles) - 1, -1, -1):   # the first holding one wins
            if not self.flat[t]:
                lam = _barycentric(corners[t], coords)
                out[(lam >= -1e-9).all(axis=1)] = t
        return out

    def grid_simplices(self, shape):
        """:meth:`simplices` of every pixel centre of a grid, row-major.

        A Delaunay mesh uses scipy's point location.  Otherwise the triangles are
        rasterised by OpenCV (``cv2.fillConvexPoly``, 1/16-px corners) as a first
        guess, each pixel's guess is checked by its barycentric coordinates, and the
        pixels that fail (edges, folds, outside) are located exactly.

        Parameters
        ----------
        shape : (h, w)
            The grid's size; pixel ``(x, y)`` has its centre at ``(x, y)``.

        Returns
        -------
        int (h * w,)
            Triangle index per pixel, -1 outside the mesh.
        """
        import cv2

        h, w = int(shape[0]), int(shape[1])
        ys, xs = np.mgrid[0:h, 0:w]
        grid = np.column_stack([xs.ravel(), ys.ravel()]).astype(np.float64)
        if self.mesh is not None:
            return self.mesh.find_simplex(grid)
        idx = np.full((h, w), -1, np.int32)
        corners = np.round(self.src[self.triangles] * 16).astype(np.int32)
        for t in range(len(self.triangles) - 1, -1, -1):
            cv2.fillConvexPoly(idx, corners[t], int(t), lineType=cv2.LINE_8, shift=4)
        out = idx.ravel().astype(np.int64)
        tri = self.src[self.triangles[np.maximum(out, 0)]]                 # (n, 3, 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = _barycentric_many(tri, grid)
        check = (out < 0) | ~(lam >= -1e-9).all(axis=1) | self.flat[np.maximum(out, 0)]
        # a pixel inside its guess is exact unless an earlier triangle also holds it
        # (a folded mesh): those pixels, the failed ones, are located exactly
        check |= self._folded(out)
        if check.any():
            out[check] = self.simplices(grid[check])
        return out

    def _folded(self, guess):
        """Pixels whose guessed triangle overlaps an earlier one (a folded mesh)."""
        sign = np.sign(np.linalg.det(np.concatenate(
            [self.src[self.triangles], np.ones(self.triangles.shape + (1,))], axis=2)))
        sign[self.flat] = 0
        major = 1.0 if (sign > 0).sum() >= (sign < 0).sum() else -1.0
        flipped = (sign != major) & ~self.flat
        if not flipped.any():
            return np.zeros(len(guess), bool)
        # a flipped triangle and the ones beside it overlap: check their pixels
        near = np.zeros(len(self.triangles), bool)
        verts = np.unique(self.triangles[flipped])
        near |= np.isin(self.triangles, verts).any(axis=1)
        return near[np.maximum(guess, 0)] & (guess >= 0)

    def __call__(self, coords, simplex=None):
        coords = np.asarray(coords, np.float64)
        s = self.simplices(coords) if simplex is None else simplex
        m = self.matrices[np.maximum(s, 0)]
        out = coords[:, :1] * m[:, 0] + coords[:, 1:2] * m[:, 1] + m[:, 2]
        out[s < 0] = -1.0
        return out


def _barycentric_many(tri, coords):
    """Barycentric coordinates (n, 3) of point ``i`` in triangle ``tri[i]`` (n, 3, 2)."""
    x1, y1 = tri[:, 0, 0], tri[:, 0, 1]
    x2, y2 = tri[:, 1, 0], tri[:, 1, 1]
    x3, y3 = tri[:, 2, 0], tri[:, 2, 1]
    den = (y2 - y3) * (x1 - x3) + (x3 - x2) * (y1 - y3)
    x, y = coords[:, 0], coords[:, 1]
    l1 = ((y2 - y3) * (x - x3) + (x3 - x2) * (y - y3)) / den
    l2 = ((y3 - y1) * (x - x3) + (x1 - x3) * (y - y3)) / den
    return np.stack([l1, l2, 1.0 - l1 - l2], axis=1)


def _barycentric(tri, coords):
    """Barycentric coordinates (n, 3) of points in the triangle ``tri`` (3, 2)."""
    (x1, y1), (x2, y2), (x3, y3) = tri
    den = (y2 - y3) * (x1 - x3) + (x3 - x2) * (y1 - y3)
    x, y = coords[:, 0], coords[:, 1]
    l1 = ((y2 - y3) * (x - x3) + (x3 - x2) * (y - y3)) / den
    l2 = ((y3 - y1) * (x - x3) + (x1 - x3) * (y - y3)) / den
    return np.stack([l1, l2, 1.0 - l1 - l2], axis=1)


_FRAME_CACHE = {}


def _frame_mesh(mean_shape, size):
    """The Delaunay mesh of the frame's control points, the frame's pixel grid
    and the triangle of every frame pixel (cached per mean shape and size: the
    same for every face)."""
    from scipy.spatial import Delaunay

    key = (np.asarray(mean_shape, np.float64).tobytes(), int(size))
    if key not in _FRAME_CACHE:
        m = _check_points(mean_shape, "mean_shape")
        mesh = Delaunay(np.concatenate([m, anchor_points(m)]))
        ys, xs = np.mgrid[0:size, 0:size]
        grid = np.column_stack([xs.ravel(), ys.ravel()]).astype(np.float64)
        if len(_FRAME_CACHE) > 8:
            _FRAME_CACHE.clear()
        _FRAME_CACHE[key] = (mesh, grid, mesh.find_simplex(grid))
    return _FRAME_CACHE[key]


def frame_to_face(points, mean_shape, size=DEFAULT_SIZE):
    """The piecewise-affine map from frame ``(x, y)`` to the face's image ``(x, y)``.

    It uses the frame's Delaunay mesh.

    Parameters
    ----------
    points : float (68, 2)
        The face's landmarks, in its image's pixels.
    mean_shape : float (68, 2)
        The frame's landmarks.
    size : int
        The frame's side, in pixels.

    Returns
    -------
    PiecewiseAffine

    Raises
    ------
    ValueError
        Invalid or degenerate landmarks (:func:`control_points`).
    """
    src, dst = control_points(points, mean_shape)
    return PiecewiseAffine(src, dst, _frame_mesh(mean_shape, size)[0])


def face_to_frame(points, mean_shape, size=DEFAULT_SIZE):
    """The inverse of :func:`frame_to_face`: the face's image ``(x, y)`` to the frame.

    It uses the frame's triangles carried onto the face, so it is the exact
    inverse.

    Parameters
    ----------
    points : float (68, 2)
        The face's landmarks, in its image's pixels.
    mean_shape : float (68, 2)
        The frame's landmarks.
    size : int
        The frame's side, in pixels.

    Returns
    -------
    PiecewiseAffine

    Raises
    ------
    ValueError
        Invalid or degenerate landmarks (:func:`control_points`).
    """
    src, dst = control_points(points, mean_shape)
    return PiecewiseAffine(dst, src, simplices=_frame_mesh(mean_shape, size)[0].simplices)


def _remap(data, coords, shape):
    """``data`` (H, W[, C]) resampled on a grid of ``shape`` (h, w) whose pixel
    ``(x, y)`` reads ``data`` at ``coords`` (row-major (h*w, 2), ``(x, y)``;
    -1 = outside the mesh) bilinearly with ``cv2.remap``; points outside the
    mesh or ``data`` give 0.  float32 (h, w[, C])."""
    import cv2

    h, w = int(shape[0]), int(shape[1])
    src = np.array(coords, dtype=np.float64)
    src[np.all(src == -1, axis=1)] = -1e6
    mx = src[:, 0].reshape(h, w).astype(np.float32)
    my = src[:, 1].reshape(h, w).astype(np.float32)
    data = np.asarray(data, dtype=np.float32)
    flat = data.reshape(data.shape[0], data.shape[1], -1)
    out = np.empty((h, w, flat.shape[2]), dtype=np.float32)
    for c0 in range(0, flat.shape[2], 4):
        part = np.ascontiguousarray(flat[:, :, c0:c0 + 4])
        res = cv2.remap(part, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                        borderValue=0)
        out[:, :, c0:c0 + 4] = res.reshape(h, w, -1)
    return out.reshape((h, w) + data.shape[2:])


def warp_to_frame(data, points, mean_shape, size):
    """Resample a face's maps (bilinear) in the ``size`` x ``size`` frame.

    Parameters
    ----------
    data : array (H, W) or (H, W, C)
        Maps on the face's image (e.g. one-hot labels).
    points : float (68, 2)
        The face's landmarks, in its image's pixels.
    mean_shape : float (68, 2)
        The frame's landmarks.
    size : int
        The frame's side, in pixels.

    Returns
    -------
    float32 (size, size) or (size, size, C)
        Frame pixels the mesh does not reach, or that map outside ``data``, are 0.
    """
    _, grid, simplex = _frame_mesh(mean_shape, size)
    return _remap(data, frame_to_face(points, mean_shape, size)(grid, simplex), (size, size))


def warp_from_frame(maps, points, mean_shape, shape):
    """Resample frame maps (bilinear) on a face image.

    The map is the inverse of :func:`warp_to_frame`'s.

    Parameters
    ----------
    maps : array (S, S) or (S, S, C)
        Maps in the frame (its side S is taken from them).
    points : float (68, 2)
        The face's landmarks, in its image's pixels.
    mean_shape : float (68, 2)
        The frame's landmarks.
    shape : tuple
        ``(H, W, ...)`` of the face image.

    Returns
    -------
    float32 (H, W) or (H, W, C)
        Pixels the mesh does not reach are 0.
    """
    h, w = int(shape[0]), int(shape[1])
    t = face_to_frame(points, mean_shape, np.asarray(maps).shape[0])
    ys, xs = np.mgrid[0:h, 0:w]
    grid = np.column_stack([xs.ravel(), ys.ravel()]).astype(np.float64)
    return _remap(maps, t(grid, t.grid_simplices((h, w))), (h, w))


def mean_shape_of(point_sets, size=DEFAULT_SIZE, iterations=3):
    """The frame's landmarks: the Procrustes mean of ``point_sets``.

    The sets are aligned by similarities to the running mean for a few rounds,
    then the mean is placed like an LFW-style crop of side ``size``
    (larger extent ``size / LANDMARK_SCALE``, centred).

    Parameters
    ----------
    point_sets : list of float (68, 2)
        Landmark sets ``(x, y)``; the first is the initial reference.
    size : int
        The frame's side, in pixels.
    iterations : int
        Alignment rounds.

    Returns
    -------
    float64 (68, 2)

    Raises
    ------
    ValueError
        No landmark set, or a set that is not 68 finite ``(x, y)`` points.
    """
    sets = [_check_points(p) for p in point_sets]
    if not sets:
        raise ValueError("no faces with landmarks: give at least one (68, 2) landmark set")
    ref = sets[0]
    for _ in range(iterations):
        fits = [(_similarity(p, ref), p) for p in sets]
        ref = np.mean([t(p) for t, p in fits if t is not None], axis=0)
    lo, hi = ref.min(axis=0), ref.max(axis=0)
    scale = size / LANDMARK_SCALE / float(max(hi - lo))
    return (ref - (lo + hi) / 2) * scale + (size - 1) / 2.0


__all__ = ["PiecewiseAffine", "anchor_points", "control_points", "frame_to_face", "face_to_frame",
           "warp_to_frame", "warp_from_frame", "mean_shape_of", "DEFAULT_SIZE"]
