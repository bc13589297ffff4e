"""The landmark renderer as a method: dlib's 68 predicted landmarks drawn as
the label polygons.

faces300w's label maps are polygons drawn from 68 *human* landmarks
(:func:`facesegment.faces.landmarks.render_labels`).  The same polygons drawn from
dlib's *predicted* landmarks (what ``facesegment label`` writes) are a face
parser that costs nothing to train; this module makes it a method scored
beside the forests:

* :func:`predict_landmarks`: dlib's detection passes of ``facesegment label``
  (the image as given; upsampled; upsampled with a lowered threshold), the
  most central face, its 68 landmarks and which pass found it;
* :func:`landmark_table`: the landmarks of a list of faces, cached in one
  ``.npz`` file keyed by the images' SHA-256 (dlib runs once per face);
* :func:`render_proba`: the rendered label map as one-hot class maps
  (smoothable, combinable with a forest's maps); a face without landmarks
  gets the fallback (all background, or the maps the caller gives);
* :func:`evaluate_renderer`: its scores with :func:`facesegment.evaluation.scoring.
  evaluate`'s protocol (same modes, pixel stride and confusion matrices),
  for several smoothing widths in one pass.

``facesegment evaluate --method landmarks`` and the pipeline's detector-aligned
stage score it on both protocols.
"""

import hashlib
import json
import os

import numpy as np

from ..atomic import atomic_path
from ..classes import N_CLASSES
from ..data.datasets import load_face
from ..data.download import sha256_file
from ..data.imageio import read_image
from ..dense import smooth
from ..evaluation.metrics import class_average, confusion_matrix, jaccard
from ..evaluation.scoring import _check_common, _summary, scored_label
from ..layout import DEFAULT_LAYOUT
from ..progress import Progress
from .label import detect_landmarks
from .landmarks import render_labels

#: Names of dlib's detection passes (:func:`facesegment.faces.label.detect_landmarks`).
PASSES = ("default", "upsampled", "low-threshold")
#: Format of a landmark table file.
TABLE_FORMAT = "facesegment-landmarks"
TABLE_VERSION = 1


def predict_landmarks(image, upsample=1, threshold=-0.5):
    """dlib's 68 landmarks of the most central face of ``image`` and the pass that found it.

    The passes of ``facesegment label`` (:func:`facesegment.faces.label.detect_landmarks`):
    the image as given, upsampled ``upsample`` times, then upsampled with the
    detector's threshold lowered by ``-threshold``.

    Parameters
    ----------
    image : uint8 (H, W, 3) RGB
    upsample : int
        Upsampling of the second and third passes (0 skips the second pass).
    threshold : float or None
        Threshold adjustment of the third pass, <= 0 (None skips it).

    Returns
    -------
    points : float64 (68, 2) or None
        ``(x, y)`` in ``image``'s pixels; None when no face is found.
    how : str
        The pass name (:data:`PASSES`), or "" when none found a face.
    """
    points, _, how = detect_landmarks(np.ascontiguousarray(image), upsample, threshold)
    return points, how


def _digest(path):
    return sha256_file(path)


class LandmarkTable:
    """Predicted landmarks of named faces.

    Attributes
    ----------
    names : list of str
    points : float64 (n, 68, 2)
        NaN for a face where no face was found.
    passes : list of str
        The detection pass that found each face ("" when none did).
    """

    def __init__(self, names, points, passes):
        self.names = list(names)
        self.points = np.asarray(points, dtype=np.float64).reshape(len(self.names), 68, 2)
        self.passes = list(passes)
        self._index = {n: i for i, n in enumerate(self.names)}

    def get(self, name):
        """The landmarks of one face.

        Parameters
        ----------
        name : str
            The face's name.

        Returns
        -------
        float64 (68, 2) or None
            A copy; None when no face was found.

        Raises
        ------
        KeyError
            Naming the face when the table does not hold it.
        """
        if name not in self._index:
            raise KeyError(f"no landmarks recorded for face {name!r}")
        p = self.points[self._index[name]]
        return None if np.isnan(p).any() else p.copy()

    def found(self):
        """Number of faces with landmarks."""
        return int((~np.isnan(self.points).any(axis=(1, 2))).sum())

    def __len__(self):
        return len(self.names)


def landmark_table(records, cache=None, progress=True, desc="landmarks"):
    """The predicted landmarks (:func:`predict_landmarks`) of ``records``' images.

    Parameters
    ----------
    records : list of FaceRecord
    cache : path, optional
        A ``.npz`` file: read when it holds these faces (same names and image
        SHA-256s, same dlib version), else computed and written atomically.

    Returns
    -------
    LandmarkTable
    """
    records = list(records)
    key = _table_key(records)
    if cache is not None and os.path.isfile(cache):
        table = _read_table(cache, key)
        if table is not None:
            return table
    names, points, passes = [], [], []
    with Progress(len(records), desc, "images", enabled=progress) as bar:
        for r in records:
            pts, how = predict_landmarks(read_image(r.image))
            names.append(r.name)
            points.append(np.full((68, 2), np.nan) if pts is None else pts)
            passes.append(how)
            bar.update(1)
    table = LandmarkTable(names, np.array(points).reshape(-1, 68, 2), passes)
    if cache is not None:
        os.makedirs(os.path.dirname(os.path.abspath(cache)), exist_ok=True)
        with atomic_path(cache, suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, format=TABLE_FORMAT, version=TABLE_VERSION, key=key,
                                    names=np.array(names), points=table.points,
                                    passes=np.array(passes))
    return table


def _table_key(records):
    try:
        import dlib
        version = dlib.__version__
    except ImportError:
        version = None
    text = json.dumps({"version": TABLE_VERSION, "dlib": version,
                       "faces": [[r.name, _digest(r.image)] for r in records]})
    return hashlib.sha256(text.encode()).hexdigest()


def _read_table(path, key):
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["format"]) != TABLE_FORMAT or str(z["key"]) != key:
                return None
            return LandmarkTable([str(n) for n in z["names"]], z["points"],
                                 [str(p) for p in z["passes"]])
    except (OSError, KeyError, ValueError):
        return None


def render_proba(points, shape, fallback=None):
    """The label polygons of ``points`` as one-hot class maps.

    Parameters
    ----------
    points : float (68, 2) or None
        Landmarks ``(x, y)``; None: no face found.
    shape : tuple
        ``(H, W, ...)`` of the image.
    fallback : float (H, W, C), optional
        Returned (as float32) when ``points`` is None; without it every pixel is
        background.

    Returns
    -------
    float32 (H, W, C)
    """
    h, w = int(shape[0]), int(shape[1])
    if points is None:
        if fallback is not None:
            return np.asarray(fallback, dtype=np.float32)
        out = np.zeros((h, w, N_CLASSES), dtype=np.float32)
        out[..., 0] = 1.0
        return out
    labels = render_labels(np.asarray(points, dtype=np.float64), (h, w))
    return np.eye(N_CLASSES, dtype=np.float32)[labels]


def _renderer_one(record, points, sigmas, stride, mode, layout):
    """Confusion matrices (len(sigmas), C, C) of the rendered maps of one face."""
    _, label = load_face(record)
    label = scored_label(label, stride, mode, layout)
    if getattr(record, "missed", False):
        points = None
    proba = render_proba(points, label.shape)
    return np.stack([confusion_matrix(label, np.argmax(smooth(proba, s), axis=-1)
                                      .astype(np.uint8), N_CLASSES) for s in sigmas])


def evaluate_renderer(records, table, *, sigmas=(0.0,), mode="strict", pixel_stride=1,
                      desc="renderer", progress=True):
    """Scores of the rendered polygons on labelled ``records``.

    The pixels scored are those :func:`facesegment.evaluation.scoring.evaluate`
    scores with the same ``mode`` and ``pixel_stride`` (31x31 layout border in
    "strict" mode).  A face without landmarks (or a ``missed`` record) is
    predicted all background.

    Parameters
    ----------
    records : list of FaceRecord
        Labelled faces.
    table : LandmarkTable
        Their predicted landmarks (:func:`landmark_table`).
    sigmas : sequence of float
        Each ``sigma`` > 0 blurs the one-hot maps with a Gaussian of that many
        pixels before the argmax; all are scored in one pass.
    mode : str
        Which pixels are scored (as for ``evaluate``).
    pixel_stride : int
        Score every ``pixel_stride``-th pixel.
    desc : str
        The progress line's label.
    progress : bool
        Progress line on stderr.

    Returns
    -------
    dict
        ``{"sigma": {repr(s): {mean_jaccard, pixel_accuracy, jaccard,
        confusion}}, "n_images", "n_found", "n_pixels", "per_image"}``
        (per-image class-average Jaccard at the first sigma).

    Raises
    ------
    ValueError
        ``records`` is empty, ``sigmas`` is empty or holds a negative or
        non-finite value, or ``mode`` / ``pixel_stride`` is invalid.
    KeyError
        A record's face is not in ``table``.
    """
    records = list(records)
    if not records:
        raise ValueError("records is empty: give at least one labelled face to score")
    _check_common(mode, pixel_stride, 0, None)
    sigmas = [float(s) for s in sigmas]
    if any(not np.isfinite(s) or s < 0 for s in sigmas) or not sigmas:
        raise ValueError(f"sigmas={sigmas!r} must be finite numbers >= 0")
    total, per_image, found = None, {}, 0
    with Progress(len(records), desc, "images", enabled=progress) as bar:
        for rec in records:
            pts = None if getattr(rec, "missed", False) else table.get(rec.name)
            found += pts is not None
            conf = _renderer_one(rec, pts, sigmas, int(pixel_stride), mode, DEFAULT_LAYOUT)
            total = conf if total is None else total + conf
            j = class_average(jaccard(conf[0]))
            per_image[rec.name] = None if np.isnan(j) else round(float(j), 4)
            bar.update(1)
    return {"sigma": {repr(s): _summary(total[i]) for i, s in enumerate(sigmas)},
            "n_images": len(records), "n_found": found, "n_pixels": int(total[0].sum()),
            "per_image": per_image}


__all__ = ["PASSES", "LandmarkTable", "predict_landmarks", "landmark_table", "render_proba",
           "evaluate_renderer"]
