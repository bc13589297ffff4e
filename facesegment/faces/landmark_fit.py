"""Fitting and scoring landmark models (:mod:`facesegment.models.landmark`).

* :func:`landmark_set_table`: every face's landmark sets (:func:`facesegment.
  votes.landmark_sets`, no offset), computed once and cached in one ``.npz``
  keyed by the images' SHA-256 and the vote spec;
* :func:`fit_votes`: the vote spec with its offset fitted on faces with human
  landmarks (``NAME.pts`` beside each image, as faces300w has them);
* :func:`evaluate_landmark_model`: the scores of a landmark model (or of any
  model that reads faces itself, such as a mesh model: the face-model
  protocol's ``photo_faces``) with :func:`facesegment.evaluation.scoring.evaluate`'s
  protocol (strict mode, every pixel, one confusion matrix), in the dictionary
  shape of :func:`facesegment.faces.renderer.evaluate_renderer`.
"""

import json
import os
from dataclasses import replace

import numpy as np

from ..atomic import atomic_path
from ..classes import N_CLASSES
from ..data.datasets import load_face
from ..data.imageio import read_image
from ..errors import DataError
from ..evaluation.metrics import class_average, confusion_matrix, jaccard
from ..evaluation.scoring import _check_common, _summary, scored_label
from ..layout import DEFAULT_LAYOUT
from ..progress import Progress
from .landmarks import pts_path_for, read_pts
from .mesh_segment import MESH_PATH
from .renderer import _table_key
from .votes import LANDMARK_PATH, VoteSpec, detect_box, fit_offset, landmark_sets

SET_TABLE_FORMAT = "facesegment-landmark-sets"
SET_TABLE_VERSION = 1


def _key(records, spec):
    base = replace(spec, offset=(0.0, 0.0)).to_dict()
    return json.dumps({"faces": _table_key(records), "spec": base}, sort_keys=True)


def landmark_set_table(records, spec, cache=None, progress=True, desc="landmark sets"):
    """Every face's landmark sets, made with ``spec`` but no offset (cached).

    Parameters
    ----------
    records : list of FaceRecord
        The faces; their images are read.
    spec : VoteSpec
        How the sets are made (its offset is ignored).
    cache : path, optional
        A ``.npz`` file: read when it holds these faces (by the images' SHA-256)
        with this spec, else written atomically.
    progress : bool
        Progress line on stderr.
    desc : str
        The progress line's label.

    Returns
    -------
    sets : float64 (n, spec.n_sets, 68, 2)
        NaN for a face where dlib finds none.
    passes : list of str
        Per face, the detector pass that found it ("" for none).
    """
    records = list(records)
    key = _key(records, spec)
    if cache is not None and os.path.isfile(cache):
        try:
            with np.load(cache, allow_pickle=False) as z:
                if str(z["format"]) == SET_TABLE_FORMAT and str(z["key"]) == key:
                    return z["sets"].copy(), [str(p) for p in z["passes"]]
        except (OSError, KeyError, ValueError):
            pass   # damaged or another table: computed again
    plain = replace(spec, offset=(0.0, 0.0))
    sets = np.full((len(records), plain.n_sets, 68, 2), np.nan)
    passes = []
    with Progress(len(records), desc, "faces", enabled=progress) as bar:
        for i, rec in enumerate(records):
            image = read_image(rec.image)
            box, how = detect_box(image)
            if box is not None:
                sets[i] = landmark_sets(image, box, plain)
            passes.append(how)
            bar.update(1)
    if cache is not None:
        os.makedirs(os.path.dirname(os.path.abspath(cache)), exist_ok=True)
        with atomic_path(cache, suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, format=SET_TABLE_FORMAT, version=SET_TABLE_VERSION,
                                    key=key, sets=sets, passes=np.array(passes))
    return sets, passes


def human_landmarks(records):
    """The human landmarks of ``records`` (``NAME.pts`` beside each image).

    Parameters
    ----------
    records : list of FaceRecord

    Returns
    -------
    float64 (n, 68, 2)
        NaN where a face has no ``.pts`` file.
    """
    out = np.full((len(records), 68, 2), np.nan)
    for i, rec in enumerate(records):
        path = pts_path_for(rec.image)
        if os.path.isfile(path):
            out[i] = read_pts(path)
    return out


def fit_votes(records, spec=None, cache=None, progress=True):
    """``spec`` with its offset fitted on ``records``.

    The offset is :func:`facesegment.faces.votes.fit_offset` over the faces with
    a ``.pts`` file and a face found by dlib.

    Parameters
    ----------
    records : list of FaceRecord
        Training faces with ``NAME.pts`` beside their images.
    spec : VoteSpec, optional
        Default :class:`VoteSpec`.
    cache : path, optional
        The landmark sets' cache (:func:`landmark_set_table`).
    progress : bool
        Progress line on stderr.

    Returns
    -------
    VoteSpec

    Raises
    ------
    DataError
        No record has a ``.pts`` file.
    ValueError
        No face has both predicted and human landmarks.
    """
    spec = VoteSpec() if spec is None else spec
    records = list(records)
    human = human_landmarks(records)
    if not np.isfinite(human).all(axis=(1, 2)).any():
        raise DataError(os.path.dirname(str(records[0].image)) if records else "records",
                        "has no NAME.pts landmark files beside the images",
                        "give faces with their 68 human landmarks (faces300w has them)")
    sets, _ = landmark_set_table(records, spec, cache, progress, "landmark sets (fit)")
    return replace(spec, offset=fit_offset(sets, human))


def _confusion_one(model, record, mode, stride):
    image, label = load_face(record)
    label = scored_label(label, stride, mode, DEFAULT_LAYOUT)
    faces = [] if getattr(record, "missed", False) else model.photo_faces(image, detect="never")
    if faces:   # the image taken as one crop
        pred, path = model.photo_labels(image.shape, faces)[0], faces[0].path
    else:
        pred = np.zeros(label.shape, np.uint8)
        path = "missed" if getattr(record, "missed", False) else "no face"
    return confusion_matrix(label, pred, N_CLASSES), path


def evaluate_landmark_model(model, records, *, mode="strict", pixel_stride=1,
                            desc="landmark model", progress=True):
    """Scores of ``model`` on labelled ``records``.

    The pixels are those :func:`facesegment.evaluation.evaluate` scores with the
    same mode and stride.  A ``missed`` record (the detector-aligned protocol) is
    all background.

    Parameters
    ----------
    model : FaceModel
        A landmark model, or any model that reads a face crop itself
        (``model.photo_faces(image, detect="never")``, e.g. a mesh model, whose
        crop without a mesh is all background).
    records : list of FaceRecord
        Labelled faces, each image taken as one crop.
    mode : str
        Which pixels are scored (:func:`facesegment.evaluation.scoring.evaluate`).
    pixel_stride : int
        Score every ``pixel_stride``-th pixel.
    desc : str
        The progress line's label.
    progress : bool
        Progress line on stderr.

    Returns
    -------
    dict
        ``summary`` (:func:`facesegment.evaluation.scoring.evaluate`'s),
        ``confusion``, ``n_images``, ``n_found`` (the faces whose landmarks or
        mesh placed the parts), ``n_pixels``, ``per_image`` (class-average
        Jaccard per face name, None when undefined) and ``paths`` (the images
        per segmentation path).

    Raises
    ------
    ValueError
        ``records`` is empty, or ``mode`` / ``pixel_stride`` is invalid.
    """
    records = list(records)
    if not records:
        raise ValueError("records is empty: give at least one labelled face to score")
    _check_common(mode, pixel_stride, 0, None)
    total = np.zeros((N_CLASSES, N_CLASSES), np.int64)
    per_image, paths = {}, {}
    with Progress(len(records), desc, "images", enabled=progress) as bar:
        for rec in records:
            conf, path = _confusion_one(model, rec, mode, int(pixel_stride))
            total += conf
            j = class_average(jaccard(conf))
            per_image[rec.name] = None if np.isnan(j) else round(float(j), 4)
            paths[path] = paths.get(path, 0) + 1
            bar.update(1)
    out = _summary(total)
    out.update(n_images=len(records),
               n_found=paths.get(LANDMARK_PATH, 0) + paths.get(MESH_PATH, 0),
               n_pixels=int(total.sum()), per_image=per_image, paths=paths)
    return out


__all__ = ["landmark_set_table", "human_landmarks", "fit_votes",
           "evaluate_landmark_model"]
