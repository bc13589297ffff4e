"""68-point landmarks: ``.pts`` I/O and rendering of 8-class label maps.

The ``.pts`` format is the iBUG / 300-W markup::

    version: 1
    n_points: 68
    {
    x y
    ... (68 lines)
    }

Coordinates are pixel positions in the image (x = column, y = row, floats).

Label maps are rendered with the polygon rules of ``../shared/data/README.md``
(0-based landmark indices; later polygons paint over earlier ones):

====  ==============  ==================================================
id    class           polygon
====  ==============  ==================================================
1     lower face      jaw 0..16 followed by brows 26..17
2     nose            27, 31, 32, 33, 34, 35
3     mouth           outer lip 48..59
4     left eye        36..41 (the image's left)
5     right eye       42..47
6     left eyebrow    brow 17..21, closed by the same points shifted down by
                      30% of (mean y of eye 36..41 - mean y of brow 17..21)
7     right eyebrow   brow 22..26, likewise with eye 42..47
====  ==============  ==================================================

Polygons are filled with Pillow's ``ImageDraw.polygon`` on the float
coordinates (interior plus outline, Pillow's rasterisation).  This reproduces
the shared ``faces300w`` label maps: on the 1207 training images 1145 are
identical, the worst agrees on 99.936% of pixels, the mean is 99.9993%
(``python -m benchmarks.bench_label --agreement``; the few differing edge
pixels are consistent with the .pts files storing 3 decimals).  cv2.fillPoly
and skimage.draw.polygon were measured too and disagree on 0.2-1% of pixels
(see docs/data.md).
"""

import os

import numpy as np

from ..atomic import write_text_atomic
from ..errors import DataError
from ..limits import read_text_file

N_LANDMARKS = 68

#: Fraction of the brow-to-eye distance by which the lower edge of a brow
#: polygon sits below the brow landmarks.
BROW_DEPTH = 0.3

JAW = tuple(range(0, 17))
LEFT_BROW = tuple(range(17, 22))
RIGHT_BROW = tuple(range(22, 27))
NOSE = (27, 31, 32, 33, 34, 35)
LEFT_EYE = tuple(range(36, 42))
RIGHT_EYE = tuple(range(42, 48))
MOUTH = tuple(range(48, 60))


def read_pts(path):
    """Read a 68-point ``.pts`` file.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    points : ndarray of float64, shape (68, 2)
        ``(x, y)`` per landmark.

    Raises
    ------
    DataError
        Missing, empty or malformed file, or not exactly 68 points.
    """
    path = os.fspath(path)
    fix = "a .pts file needs 'version: 1', 'n_points: 68', '{', 68 'x y' lines, '}'"

    text = read_text_file(path, "landmark file", fix)  # a regular file, of bounded size
    if not text.strip():
        raise DataError(path, "landmark file is empty", fix)
    declared = None
    for line in text.splitlines():
        if line.strip().lower().startswith("n_points"):
            try:
                declared = int(line.split(":", 1)[1])
            except (IndexError, ValueError):
                raise DataError(path, f"bad header line {line.strip()!r}", fix) from None
    if "{" in text:
        body = text.split("{", 1)[1]
        if "}" not in body:
            raise DataError(path, "landmark file is truncated (no closing '}')", fix)
        body = body.split("}", 1)[0]
    else:
        body = text
    rows = [ln.split() for ln in body.splitlines() if ln.strip()]
    try:
        pts = np.array([[float(r[0]), float(r[1])] for r in rows if len(r) >= 2], dtype=np.float64)
    except ValueError:
        raise DataError(path, "landmark file has a non-numeric coordinate", fix) from None
    if any(len(r) != 2 for r in rows):
        raise DataError(path, "every landmark line must hold exactly two numbers 'x y'", fix)
    n = len(pts)
    if n != N_LANDMARKS or (declared is not None and declared != N_LANDMARKS):
        got = f"{n} points" + (f" (header says {declared})" if declared not in (None, n) else "")
        raise DataError(path, f"has {got}, expected {N_LANDMARKS}",
                        "use the 68-point iBUG/300-W markup")
    if not np.all(np.isfinite(pts)):
        raise DataError(path, "landmark file has non-finite coordinates", fix)
    return pts


def write_pts(path, points):
    """Write 68 landmarks as a ``.pts`` file atomically (temporary name, then rename).

    Parameters
    ----------
    path : str or Path
    points : array-like, shape (68, 2)
        ``(x, y)`` per landmark.
    """
    path = os.fspath(path)
    pts = np.asarray(points, dtype=np.float64)
    if pts.shape != (N_LANDMARKS, 2):
        raise ValueError(f"points must have shape (68, 2), got {pts.shape}")
    text = "version: 1\nn_points: 68\n{\n" + "".join(
        f"{x:.3f} {y:.3f}\n" for x, y in pts) + "}\n"
    write_text_atomic(path, text)


def _brow_polygon(points, brow, eye):
    b = points[list(brow)]
    shift = BROW_DEPTH * (points[list(eye), 1].mean() - b[:, 1].mean())
    lower = b[::-1].copy()
    lower[:, 1] += shift
    return np.vstack([b, lower])


def face_polygons(points):
    """The 7 face-part polygons of 68 landmarks, in painting order.

    Parameters
    ----------
    points : ndarray, shape (68, 2)

    Returns
    -------
    list of (class_id, ndarray (k, 2) of float64 (x, y))
    """
    p = np.asarray(points, dtype=np.float64)
    return [
        (1, np.vstack([p[list(JAW)], p[list(RIGHT_BROW)[::-1]], p[list(LEFT_BROW)[::-1]]])),
        (2, p[list(NOSE)]),
        (3, p[list(MOUTH)]),
        (4, p[list(LEFT_EYE)]),
        (5, p[list(RIGHT_EYE)]),
        (6, _brow_polygon(p, LEFT_BROW, LEFT_EYE)),
        (7, _brow_polygon(p, RIGHT_BROW, RIGHT_EYE)),
    ]


def render_labels(points, shape):
    """Render an 8-class label map from 68 landmarks.

    Parameters
    ----------
    points : array-like, shape (68, 2)
        ``(x, y)`` landmarks in pixel coordinates.
    shape : tuple
        ``(H, W)`` (or ``(H, W, C)``) of the image.

    Returns
    -------
    labels : ndarray of uint8, shape (H, W)
        Class ids 0-7 (0 = background).
    """
    from PIL import Image, ImageDraw

    pts = np.asarray(points, dtype=np.float64)
    if pts.shape != (N_LANDMARKS, 2):
        raise ValueError(f"points must have shape (68, 2), got {pts.shape}; "
                         "pass the 68 (x, y) landmarks")
    if not np.all(np.isfinite(pts)):
        raise ValueError("points contain NaN or infinity; pass finite landmark coordinates")
    h, w = int(shape[0]), int(shape[1])
    if h <= 0 or w <= 0:
        raise ValueError(f"shape must be positive (H, W), got {tuple(shape)}")
    img = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(img)
    for cls, poly in face_polygons(pts):
        draw.polygon([(float(x), float(y)) for x, y in poly], fill=cls)
    return np.asarray(img, dtype=np.uint8).copy()


def pts_path_for(image_path):
    """The ``.pts`` path beside an image: ``NAME.jpg -> NAME.pts``.

    Parameters
    ----------
    image_path : str or path-like

    Returns
    -------
    str
    """
    root, _ = os.path.splitext(os.fspath(image_path))
    return root + ".pts"
