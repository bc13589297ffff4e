"""Scores on hand-drawn masks that label only some classes (FASSEG's convention).

A hand-drawn label map holds class ids of the classes it scores (``SCORED``:
background 0, nose 2, mouth 3, eyes 4 and 5), ``NONE`` (254: face, but none of
those parts; skin, brows and hair inside the face) and ``IGNORE`` (255: no label).
Per class ``c``, Jaccard counts the pixels labelled with a scored class, plus,
for the parts (c >= 2), the ``NONE`` pixels predicted as ``c`` as false positives
(a part that spills onto the skin is wrong; background is not scored there,
because facesegment's background includes the forehead).  ``IGNORE`` is never
scored.  Sums run over all photos before dividing (the dataset's Jaccard).
"""

import numpy as np

SCORED = (0, 2, 3, 4, 5)
NONE, IGNORE = 254, 255


def handdrawn_counts(pred, truth, classes=SCORED):
    """Intersections and unions of one photo, per class of ``classes``.

    Parameters
    ----------
    pred : uint8 (H, W)
        Predicted class ids (0..7).
    truth : uint8 (H, W)
        The hand-drawn map (scored ids, :data:`NONE`, :data:`IGNORE`).

    Returns
    -------
    int64 (len(classes), 2)
        ``[intersection, union]`` per class.
    """
    pred, truth = np.asarray(pred), np.asarray(truth)
    if pred.shape != truth.shape:
        raise ValueError(f"prediction {pred.shape} and labels {truth.shape} differ in size")
    scored = np.isin(truth, classes)
    none = truth == NONE
    out = np.zeros((len(classes), 2), np.int64)
    for i, c in enumerate(classes):
        p, t = pred == c, truth == c
        out[i, 0] = np.count_nonzero(p & t)
        union = np.count_nonzero((p | t) & scored)
        if c >= 2:
            union += np.count_nonzero(p & none)
        out[i, 1] = union
    return out


def jaccard_of_counts(counts, classes=SCORED):
    """Class-average and per-class Jaccard, in percent, from summed counts.

    Parameters
    ----------
    counts : int (len(classes), 2)
        Per class, intersection and union pixels (summed :func:`handdrawn_counts`).
    classes : sequence of int
        The classes of the rows.

    Returns
    -------
    average : float
        Mean over the classes with a non-empty union (NaN when none has one).
    per_class : dict of int to float
        ``{class: Jaccard}``, NaN for an empty union.
    """
    counts = np.asarray(counts, np.float64)
    per = {c: (100.0 * counts[i, 0] / counts[i, 1] if counts[i, 1] else float("nan"))
           for i, c in enumerate(classes)}
    vals = [v for v in per.values() if v == v]
    return (float(np.mean(vals)) if vals else float("nan")), per
