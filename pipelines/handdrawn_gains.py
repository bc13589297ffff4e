"""Choosing the decision rule's class gains of a mesh-forest on held-out people.

A face's labels under gains ``g`` are the argmax, per photo pixel, of its crop's
stage probabilities times ``g``, mapped back onto the photo
(:func:`facesegment.faces.mesh_train.photo_labels`).  Scoring every candidate
that way maps every face back once per candidate.  :class:`GainSearch` maps
each face's class probabilities back once and re-weights them on the photo: the
same argmax except where the crop's per-pixel renormalisation and the bilinear
mapping do not commute (a pixel or so along the boundaries).  It only *ranks*
the candidates; the scores reported for the chosen gains are computed exactly.
Pixels where no part has any probability keep one label whatever the gains, so
they are counted once.
"""

import numpy as np

from facesegment.evaluation.handdrawn import handdrawn_counts
from facesegment.faces.mesh_segment import face_region
from facesegment.faces.mesh_stages import OTHER, TRAIN_CLASSES, to_face_classes

PARTS = (2, 3, 4, 5)


def _pasted(face, proba_crop):
    """The region's mapped-back maps: train classes (h, w, 6), the OTHER mass per
    face class 0/1/6/7 (h, w, 4), and the uncovered share (h, w)."""
    from facesegment.faces.mesh_segment import MeshFace, warp_back

    n = len(TRAIN_CLASSES)
    maps = np.zeros(proba_crop.shape[:2] + (8 + n,), np.float32)
    maps[..., :8] = to_face_classes(proba_crop * _other_only(n), face.drawn)
    maps[..., 8:] = proba_crop
    mf = MeshFace(face.box, face.mesh, maps, None, face.pan, face.detection)
    region = face_region(face.labels.shape, [mf])
    pasted = warp_back(face.labels.shape, [mf], region)   # uncovered share: background
    return pasted[..., 8:], pasted[..., [0, 1, 6, 7]], region


def _other_only(n):
    w = np.zeros(n, np.float32)
    w[TRAIN_CLASSES.index(OTHER)] = 1.0
    return w


class GainSearch:
    """Per-face counts under candidate gains, from maps pasted once per face.

    Parameters
    ----------
    faces : list of PreparedFace
    raw : dict
        ``{name: float32 (S, S, 6) or None}``: held-out crop probabilities.
    """

    def __init__(self, faces, raw):
        self.faces = {}
        for f in faces:
            p = raw.get(f.name)
            if p is None:
                self.faces[f.name] = (handdrawn_counts(np.zeros(f.labels.shape[:2], np.uint8),
                                                       f.labels), None)
                continue
            train, other, (r0, r1, c0, c1) = _pasted(f, p)
            live = (train[..., [TRAIN_CLASSES.index(c) for c in PARTS]] > 0).any(axis=-1)
            # pixels where no part has mass: the argmax of bg, 1, 6, 7 (gains of 1)
            fixed = np.zeros(f.labels.shape[:2], np.uint8)
            rest = np.stack([train[..., 0] + other[..., 0], other[..., 1], other[..., 2],
                             other[..., 3]], axis=-1)
            fixed[r0:r1, c0:c1] = np.array([0, 1, 6, 7], np.uint8)[np.argmax(rest, axis=-1)]
            truth_live = f.labels[r0:r1, c0:c1][live]
            fixed[r0:r1, c0:c1][live] = 0
            mask = np.ones(f.labels.shape[:2], bool)
            mask[r0:r1, c0:c1][live] = False
            base = handdrawn_counts(fixed[mask], f.labels[mask])
            self.faces[f.name] = (base, (train[live], other[live], truth_live))

    def counts(self, gains):
        """``{name: (5, 2) counts}`` under ``gains`` (one per training class)."""
        g = np.asarray(gains, np.float32)
        out = {}
        for name, (base, live) in self.faces.items():
            if live is None:
                out[name] = base
                continue
            train, other, truth = live
            scores = np.empty((len(truth), 8), np.float32)
            scores[:, 0] = g[0] * train[:, 0] + g[TRAIN_CLASSES.index(OTHER)] * other[:, 0]
            for k, c in enumerate((1, 6, 7)):
                scores[:, c] = g[TRAIN_CLASSES.index(OTHER)] * other[:, k + 1]
            for c in PARTS:
                j = TRAIN_CLASSES.index(c)
                scores[:, c] = g[j] * train[:, j]
            pred = np.argmax(scores, axis=-1).astype(np.uint8)
            out[name] = base + handdrawn_counts(pred, truth)
        return out


__all__ = ["GainSearch"]
