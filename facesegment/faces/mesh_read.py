"""How the forest stages read a crop (:mod:`.mesh_stages`): which pixels, in what
order, and with how many trees.

:func:`stage_probas` runs the stages over a crop's planes, each reading the one
before; each stage's forest is asked only about the pixels near the mesh's face
oval (:func:`read_region`, the model's margin, one per stage or one for all),
in compact tiles (:func:`tile_order`), and, with the model's early reading,
only the pixels its first trees are unsure of are read by the other trees
(:func:`forest_proba`).
"""

import functools
import numbers

import numpy as np

from .mesh_features import PLANE_NAMES
from .mesh_stages import TRAIN_CLASSES, context_planes, mix_stages, smooth_proba

#: The pixels go to the forest in tiles of TILE rows x columns: the kernels walk
#: each tree with 32 pixels in lockstep, and a compact patch of 4 x 8 pixels shares
#: more of its path than a run of 32 pixels of one row (fewer nodes loaded; each
#: pixel's probabilities are the same in any order).
TILE = (4, 8)


def read_region(planes, margin):
    """The pixels the forests read: those near or inside the mesh's face oval.

    Taken from the planes' signed distance to the oval (a feature, never a
    label).

    Parameters
    ----------
    planes : uint8 (S, S, P)
        The crop's planes.
    margin : float or None
        Largest distance outside the oval, in 1/64 of the crop; None: every
        pixel.

    Returns
    -------
    bool (S, S) or None
        None for ``margin`` None.
    """
    if margin is None:
        return None

    d = planes[..., PLANE_NAMES.index("d_oval")].astype(np.int16) - 128
    return d <= float(margin)


def predict_stage(forest, planes, region=None, early=None):
    """A stage's class probabilities over a crop's planes.

    Parameters
    ----------
    forest : classifier
        With ``predict_proba`` and ``classes_`` (a subset of
        :data:`TRAIN_CLASSES`).
    planes : uint8 (S, S, P), or a tuple of such arrays
        The stage's input (:func:`stage_input`); a tuple stands for its arrays
        stacked along the last axis (only the region's pixels are stacked).
    region : bool (S, S), optional
        Pixels the forest is asked about (:func:`read_region`); outside it
        background has probability 1.  None: everywhere.
    early : (int, float), optional
        Each pixel is read by the forest's first ``early[0]`` trees; only where
        their leading class has less than ``early[1]`` are the other trees read
        too (:func:`forest_proba`).  None: every tree reads every pixel.

    Returns
    -------
    float32 (S, S, len(TRAIN_CLASSES))
        A zero column for a training class the forest never saw.
    """
    blocks = planes if isinstance(planes, tuple) else (planes,)
    s = blocks[0].shape[0]
    flats = [b.reshape(s * s, b.shape[2]) for b in blocks]
    out = np.zeros((s * s, len(TRAIN_CLASSES)), np.float32)
    rows = tile_order(s)
    if region is not None:
        rows = rows[region.ravel()[rows]]
        out[:, TRAIN_CLASSES.index(0)] = 1.0
        out[rows, TRAIN_CLASSES.index(0)] = 0.0
    flats = [f[rows] for f in flats]
    X = flats[0] if len(flats) == 1 else np.concatenate(flats, axis=1)
    proba = forest_proba(forest, X, early)
    for j, c in enumerate(np.asarray(forest.classes_).tolist()):
        out[rows, TRAIN_CLASSES.index(int(c))] = proba[:, j]
    return out.reshape(s, s, -1)


def forest_proba(forest, X, early=None):
    """A forest's class probabilities, its later trees read only where the first
    ones are unsure.

    Parameters
    ----------
    forest : classifier
        With ``predict_proba(X, n_trees=, first_tree=)``
        (:class:`facesegment.forest.base.BaseForest`) and ``n_estimators``.
    X : array (n, p)
    early : (int, float) or None
        ``(k, confidence)``: the first ``k`` trees read every row; a row whose
        leading class has at least ``confidence`` keeps their mean, the others
        get the mean of all the trees (the first ``k`` and the rest, weighted
        by their counts).  None, or ``k`` at least the forest's trees: every
        tree reads every row (``forest.predict_proba(X)``).

    Returns
    -------
    float64 (n, n_classes)
    """
    n_trees = int(forest.forest_.n_trees) if hasattr(forest, "forest_") else None
    if early is None or n_trees is None or early[0] >= n_trees or len(X) == 0:
        return forest.predict_proba(X)
    k, confidence = int(early[0]), float(early[1])
    proba = forest.predict_proba(X, n_trees=k)
    unsure = np.flatnonzero(proba.max(axis=1) < confidence)
    if len(unsure):
        rest = forest.predict_proba(np.ascontiguousarray(X[unsure]), first_tree=k)
        proba[unsure] = (k * proba[unsure] + (n_trees - k) * rest) / n_trees
    return proba


def check_early(early):
    """The model's early reading (:func:`forest_proba`), checked: None or
    ``[trees, confidence]`` with trees >= 1 and confidence in (0, 1].

    Parameters
    ----------
    early : object

    Returns
    -------
    list [int, float] or None

    Raises
    ------
    ValueError
        Anything else.
    """
    if early is None:
        return None
    if (isinstance(early, (list, tuple)) and len(early) == 2
            and isinstance(early[0], numbers.Integral) and not isinstance(early[0], bool)
            and early[0] >= 1 and isinstance(early[1], numbers.Real)
            and not isinstance(early[1], bool) and 0 < early[1] <= 1):
        return [int(early[0]), float(early[1])]
    raise ValueError("early must be null or [trees, confidence] with trees >= 1 and "
                     f"confidence in (0, 1], got {early!r}")


@functools.lru_cache(maxsize=8)
def tile_order(size, tile=TILE):
    """The pixels of a ``size`` x ``size`` crop in tiles of ``tile`` (rows,
    columns), tile by tile in raster order, raster order within a tile (a
    partial tile at the right or bottom edge keeps that order too).

    Parameters
    ----------
    size : int
        The crop's side.
    tile : (int, int)
        Tile rows and columns.

    Returns
    -------
    int64 (size * size,)
        Flat pixel indices, each once (read-only).
    """
    th, tw = tile
    yy, xx = np.mgrid[0:size, 0:size]
    n_cols = -(-size // tw)
    key = (((yy // th) * n_cols + xx // tw) * (th * tw) + (yy % th) * tw + xx % tw).ravel()
    order = np.argsort(key, kind="stable")
    order.flags.writeable = False
    return order


def stage_probas(forests, planes, margin=None, early=None):
    """Every stage's probabilities over a crop, each stage reading the one before.

    Parameters
    ----------
    forests : list of classifiers
        The stages, first to last.
    planes : uint8 (S, S, P)
        The crop's planes.
    margin : float, sequence of float, or None
        Pixels farther than this outside the face oval are background
        (:func:`read_region`); a sequence: one margin per stage, first to
        last (:func:`stage_margins`); None: the forests read every pixel.
    early : (int, float) or None
        How each forest reads its pixels (:func:`forest_proba`).

    Returns
    -------
    list of float32 (S, S, len(TRAIN_CLASSES))
        One per stage, first to last.
    """
    out = []
    regions = {}
    for forest, m in zip(forests, stage_margins(margin, len(forests))):
        if m not in regions:
            regions[m] = read_region(planes, m)
        # stage_input's planes, stacked for the region's pixels only
        out.append(predict_stage(forest, planes if not out
                                 else (planes, context_planes(out[-1])), regions[m], early))
    return out


def stage_margins(margin, n_stages):
    """Each stage's read margin (:func:`read_region`) from one margin or one per stage.

    Parameters
    ----------
    margin : float, sequence of float, or None
        One margin for every stage, or a sequence of at least ``n_stages``
        (its first ``n_stages`` are used: the stages before a later one read
        as they do in the whole model).
    n_stages : int

    Returns
    -------
    list of float or None
        ``n_stages`` margins.

    Raises
    ------
    ValueError
        A sequence shorter than ``n_stages``.
    """
    if margin is None or isinstance(margin, (int, float)):
        return [margin] * n_stages
    margin = list(margin)
    if len(margin) < n_stages:
        raise ValueError(f"{len(margin)} margins for {n_stages} stages")
    return margin[:n_stages]


def _is_margin(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 64


def check_margin(margin, n_stages):
    """The model's read margin, checked: None, a number in 0..64, or a list of
    ``n_stages`` such numbers (one per stage).

    Parameters
    ----------
    margin : object
    n_stages : int

    Returns
    -------
    float, list of float, or None

    Raises
    ------
    ValueError
        Anything else.
    """
    if margin is None:
        return None
    if _is_margin(margin):
        return float(margin)
    if (isinstance(margin, (list, tuple)) and len(margin) == n_stages
            and all(_is_margin(v) for v in margin)):
        return [float(v) for v in margin]
    raise ValueError(f"margin must be null, a number in 0..64 or a list of {n_stages} such "
                     f"numbers (one per stage), got {margin!r}")


def predict_stages(forests, planes, sigma=0.0, margin=None, mix=0.0, early=None):
    """The stages' probabilities over a crop (:func:`stage_probas`, mixed by
    :func:`mix_stages`).

    Parameters
    ----------
    forests, planes, margin, early
        As for :func:`stage_probas`.
    sigma : float
        Gaussian smoothing of the result, in crop pixels (0: not smoothed).
    mix : float
        The first stage's share (:func:`mix_stages`; 0: the last stage alone).

    Returns
    -------
    float32 (S, S, len(TRAIN_CLASSES))
    """
    return smooth_proba(mix_stages(stage_probas(forests, planes, margin, early), mix), sigma)
