"""A turned face's mesh fitted again, in a region drawn from the mesh itself.

MediaPipe's face mesh reads a face in a region of the photo.  On a still photo
that region comes from BlazeFace's box, which is least reliable on full
profiles: its eye keypoints, which level the region, lie on one side of the
face.  In a video the next frame's region comes from the previous frame's mesh
instead.  :func:`refit_mesh` does that once on the same photo: the landmark
network (with attention, 478 points, as the face mesh runs it) reads the region
around the mesh's own points, levelled by its eye corners, 1.5 times their
extent, squared (MediaPipe's tracking rule).

A mesh model with ``refit`` (``MeshModel.refit``) reads a face turned at least
that far (:func:`mesh_turn`) twice, with its fits as found and as refitted
(:meth:`Refitter.refits`), and averages the two: the
fits err differently on profiles.
"""

import math
import threading

import numpy as np

from .mesh import _quiet_stderr, _unmirror, require_mesh
from .pose import pan_features

#: The network's region: the mesh's extent scaled by this, squared (MediaPipe's
#: face-landmark tracking uses 1.5).
REFIT_SCALE = 1.5
#: The eye corners that level the region (MediaPipe's tracking uses 33 and 263).
_EYE_CORNERS = (33, 263)

_REFIT_GRAPH = """
input_stream: "image"
input_stream: "roi"
output_stream: "landmarks"
node {
  calculator: "FaceLandmarkCpu"
  input_stream: "IMAGE:image"
  input_stream: "ROI:roi"
  input_side_packet: "WITH_ATTENTION:with_attention"
  output_stream: "LANDMARKS:landmarks"
}
"""


def refit_graph():
    """MediaPipe's landmark subgraph with attention (478 points), reading one
    region of an image: inputs ``image`` and ``roi``, output ``landmarks``."""
    from google.protobuf import text_format
    from mediapipe.framework import calculator_pb2
    from mediapipe.python.solution_base import PacketDataType, SolutionBase

    config = text_format.Parse(_REFIT_GRAPH, calculator_pb2.CalculatorGraphConfig())
    return SolutionBase(graph_config=config, outputs=["landmarks"],
                        side_inputs={"with_attention": True},
                        stream_type_hints={"image": PacketDataType.IMAGE_FRAME,
                                           "roi": PacketDataType.PROTO})


def mesh_turn(mesh):
    """The head turn of a mesh as the nose tip's offset from the face oval's
    middle over the oval's width (``turn`` of
    :func:`facesegment.faces.pose.pan_features`; about 0.35 at a 45-60 degree
    pan, 0.55 in full profile).

    Parameters
    ----------
    mesh : float (478, 3)

    Returns
    -------
    float
        Its absolute value.
    """
    return abs(float(pan_features(mesh)[0]))


def mesh_region(mesh, width, height):
    """The region the landmark network reads to refit ``mesh``.

    Parameters
    ----------
    mesh : float (478, 3)
        In the image's pixels.
    width, height : int
        The image's size.

    Returns
    -------
    (x_center, y_center, side_x, side_y, rotation)
        Centre and sides relative to the image's width and height, rotation in
        radians (MediaPipe's ``NormalizedRect``).
    """
    mesh = np.asarray(mesh, np.float64)
    lo, hi = mesh[:468, :2].min(axis=0), mesh[:468, :2].max(axis=0)
    centre = (lo + hi) / 2.0
    d = mesh[_EYE_CORNERS[1], :2] - mesh[_EYE_CORNERS[0], :2]
    rotation = -math.atan2(-d[1], d[0]) if np.all(np.isfinite(d)) else 0.0
    side = REFIT_SCALE * float(max(hi - lo))
    return (centre[0] / width, centre[1] / height, side / width, side / height, rotation)


def refit_mesh(graph, rgb, mesh):
    """``mesh`` fitted again by the landmark network in its own region.

    Parameters
    ----------
    graph : mediapipe SolutionBase
        :func:`refit_graph`'s graph.
    rgb : uint8 (H, W, 3)
        The photo the mesh was found in.
    mesh : float (478, 3)
        Its points in ``rgb``'s pixels.

    Returns
    -------
    float64 (478, 3) or None
        The new points (x, y in pixels, z in the same scale); None when the
        network finds no face in the region or the mesh is degenerate.
    """
    from mediapipe.framework.formats import rect_pb2

    h, w = rgb.shape[:2]
    if not np.all(np.isfinite(np.asarray(mesh)[:, :2])):
        return None
    cx, cy, sx, sy, rot = mesh_region(mesh, w, h)
    if not (sx > 0 and sy > 0):
        return None
    roi = rect_pb2.NormalizedRect(x_center=cx, y_center=cy, width=sx, height=sy,
                                  rotation=rot)
    res = graph.process({"image": np.ascontiguousarray(rgb), "roi": roi})
    if res.landmarks is None:
        return None
    pts = np.array([(p.x * w, p.y * h, p.z * w) for p in res.landmarks.landmark], np.float64)
    return pts if len(pts) == len(mesh) else None


class Refitter:
    """The landmark network that refits a face's fits (one graph per refitter,
    built when first used, used under a lock)."""

    def __init__(self):
        self._graph = None
        self._lock = threading.Lock()

    def refits(self, image, mesh, twin=None):
        """A face's mesh and its mirror fit, each fitted again by the landmark
        network in a region drawn from its own points (:func:`refit_mesh`; the
        mirror fit on the mirrored photo, then mirrored back).  A fit for which
        the network finds no face in that region stays as it was.

        Parameters
        ----------
        image : uint8 (H, W, 3) RGB
            The photo.
        mesh : float (478, 3)
            A face's mesh in the photo's pixels
            (:meth:`facesegment.faces.mesh.MeshFinder.find`).
        twin : float (478, 3) or None
            Its fit on the mirrored photo
            (:meth:`facesegment.faces.mesh.MeshFinder.mirror_fits`).

        Returns
        -------
        (float64 (478, 3), float64 (478, 3) or None)
            The refitted mesh and twin (None stays None).

        Raises
        ------
        DataError
            MediaPipe's face mesh is not installed.
        """
        image = np.ascontiguousarray(image)
        w = image.shape[1]
        with self._lock, _quiet_stderr():
            if self._graph is None:
                require_mesh()
                self._graph = refit_graph()
            new = refit_mesh(self._graph, image, mesh)
            new_twin = None
            if twin is not None:
                new_twin = refit_mesh(self._graph, np.ascontiguousarray(image[:, ::-1]),
                                      _unmirror(twin, w))
        if new_twin is not None:
            new_twin = _unmirror(new_twin, w)
        return _kept(mesh, new), (None if twin is None else _kept(twin, new_twin))


def _kept(old, new):
    """``new``, or ``old`` as float64 where the network gave up (None)."""
    return np.asarray(old, np.float64) if new is None else new


def check_refit(refit):
    """A model's ``refit``: None, or a finite number >= 0 (a :func:`mesh_turn`).

    Parameters
    ----------
    refit : object

    Returns
    -------
    float or None

    Raises
    ------
    ValueError
        Anything else.
    """
    if refit is None:
        return None
    if isinstance(refit, bool) or not isinstance(refit, (int, float)) \
            or not math.isfinite(refit) or refit < 0:
        raise ValueError(f"refit must be null or a number >= 0, got {refit!r}")
    return float(refit)


__all__ = ["REFIT_SCALE", "Refitter", "refit_graph", "mesh_turn", "mesh_region", "refit_mesh",
           "check_refit"]
