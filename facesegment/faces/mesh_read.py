"""How the forest stages read a crop (:mod:`.mesh_stages`): which pixels, in what
order, and with how many trees.

:func:`stage_probas` runs the stages over a crop's planes, each reading the one
before; each stage's forest is asked only about the pixels near the mesh's face
oval (:func:`read_region`, the model's margin, one per stage or one for all),
in compact tiles (:func:`tile_order`), and, with the model's early reading,
only the pixels its first trees are unsure of are read by the other trees
(:func:`forest_proba`); with the model's coarse reading, the forest reads every
other pixel of every other row first, and the pixels between them only where
those around them disagree on the class or are unsure of it (:func:`predict_stage`,
:func:`coarse_fill`).
"""

import functools
import numbers
from dataclasses import dataclass

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


def predict_stage(forest, planes, region=None, early=None, coarse=None):
    """A stage's class probabilities over a crop's planes.

    Parameters
    ----------
    forest : classifier
        With ``predict_proba`` and ``classes_`` (a subset of
        :data:`TRAIN_CLASSES`).
    planes : uint8 (S, S, P), or a tuple of such arrays
        The stage's input (:func:`stage_input`); a tuple stands for its arrays
        stacked along the last axis (only the pixels read are stacked).
    region : bool (S, S), optional
        Pixels the forest is asked about (:func:`read_region`); outside it
        background has probability 1.  None: everywhere.
    early : (int, float), optional
        Each pixel is read by the forest's first ``early[0]`` trees; only where
        their leading class has less than ``early[1]`` are the other trees read
        too (:func:`forest_proba`).  None: every tree reads every pixel.
    coarse : float, optional
        Read the pixels of even row and column first, and the others only where
        those around them disagree on the leading class or one of them has its
        two leading classes less than ``coarse`` apart; elsewhere a pixel gets
        their mean (:func:`coarse_fill`).  None: every pixel is read.

    Returns
    -------
    float32 (S, S, len(TRAIN_CLASSES))
        A zero column for a training class the forest never saw.
    """
    blocks = planes if isinstance(planes, tuple) else (planes,)
    s = blocks[0].shape[0]
    flats = [b.reshape(s * s, b.shape[2]) for b in blocks]
    out = np.zeros((s * s, len(TRAIN_CLASSES)), np.float32)
    out[:, TRAIN_CLASSES.index(0)] = 1.0
    columns = [TRAIN_CLASSES.index(int(c)) for c in np.asarray(forest.classes_).tolist()]
    order = tile_order(s)
    region = np.ones((s, s), bool) if region is None else region

    def read(mask):
        """Ask the forest about the pixels of ``mask``, in tiles, into ``out``.

        Parameters
        ----------
        mask : bool (S, S)
        """
        rows = order[mask.ravel()[order]]
        if len(rows) == 0:
            return
        X = flats[0][rows] if len(flats) == 1 else np.concatenate([f[rows] for f in flats], 1)
        out[rows] = 0.0
        out[np.ix_(rows, columns)] = forest_proba(forest, X, early)

    if coarse is None:
        read(region)
        return out.reshape(s, s, -1)
    grid = region & coarse_grid(s)
    read(grid)
    proba = out.reshape(s, s, -1)
    filled, values = coarse_fill(proba, grid, coarse)
    filled &= region
    proba[filled] = values[filled]
    read(region & ~grid & ~filled)
    return proba


@functools.lru_cache(maxsize=8)
def coarse_grid(size):
    """The pixels of even row and even column of a crop, read first by a coarse
    reading (:func:`predict_stage`).

    Parameters
    ----------
    size : int
        The crop's side.

    Returns
    -------
    bool (size, size)
        Read-only.
    """
    grid = np.zeros((size, size), bool)
    grid[0::2, 0::2] = True
    grid.flags.writeable = False
    return grid


def coarse_fill(proba, grid, gap=0.0):
    """The pixels between a grid's that its neighbours agree on, and their mean.

    A pixel of odd column and even row lies between its left and right
    neighbours, one of odd row and even column between those above and below,
    one of odd row and column between its four diagonal neighbours.  It is
    filled where those neighbours are all in ``grid``, share their leading
    class, and each leads by at least ``gap`` over its second class; its value
    is their mean.

    Parameters
    ----------
    proba : float (S, S, C)
        Probabilities, read at ``grid``'s pixels.
    grid : bool (S, S)
        The pixels read: even row and column (:func:`coarse_grid`), or a subset.
    gap : float
        The least lead of a neighbour's leading class over its second.

    Returns
    -------
    filled : bool (S, S)
        Never a pixel of ``grid``.
    values : float32 (S, S, C)
        The neighbours' mean where ``filled``.
    """
    s = grid.shape[0]
    n, m = (s + 1) // 2, s // 2        # grid pixels and pixels between, per axis
    # the grid's leading classes (-1: not read) and values, padded past the edge
    lead = np.full((n + 1, n + 1), -1, np.int64)
    at_grid = proba[0::2, 0::2]
    top = np.sort(at_grid, axis=-1)
    sure = grid[0::2, 0::2] & (top[..., -1] - top[..., -2] >= gap)
    lead[:n, :n] = np.where(sure, at_grid.argmax(axis=-1), -1)
    value = np.zeros((n + 1, n + 1, proba.shape[2]), np.float32)
    value[:n, :n] = at_grid
    filled = np.zeros((s, s), bool)
    values = np.zeros(proba.shape, np.float32)
    # (pixels, their neighbours as grid offsets): between left and right, above
    # and below, the four diagonals
    for at, around in (((slice(0, None, 2), slice(1, None, 2)), ((0, 0), (0, 1))),
                       ((slice(1, None, 2), slice(0, None, 2)), ((0, 0), (1, 0))),
                       ((slice(1, None, 2), slice(1, None, 2)),
                        ((0, 0), (0, 1), (1, 0), (1, 1)))):
        h, w = (n if at[0].start == 0 else m), (n if at[1].start == 0 else m)
        leads = [lead[dy:dy + h, dx:dx + w] for dy, dx in around]
        agree = leads[0] >= 0
        for other in leads[1:]:
            agree &= other == leads[0]
        filled[at] = agree
        values[at] = sum(value[dy:dy + h, dx:dx + w] for dy, dx in around) / len(around)
    return filled, values


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


def check_coarse(coarse):
    """The model's coarse reading (:func:`predict_stage`), checked: None or a
    number in [0, 1) (the least lead of a read pixel's leading class for its
    neighbours to be filled without reading).

    Parameters
    ----------
    coarse : object

    Returns
    -------
    float or None

    Raises
    ------
    ValueError
        Anything else.
    """
    if coarse is None:
        return None
    if isinstance(coarse, numbers.Real) and not isinstance(coarse, bool) and 0 <= coarse < 1:
        return float(coarse)
    raise ValueError(f"coarse must be null or a number in [0, 1), got {coarse!r}")


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


def stage_probas(forests, planes, reading=None):
    """Every stage's probabilities over a crop, each stage reading the one before.

    Parameters
    ----------
    forests : list of classifiers
        The stages, first to last.
    planes : uint8 (S, S, P)
        The crop's planes.
    reading : Reading or None
        Which pixels each stage's forest reads, and how (:class:`Reading`;
        None: every pixel, with every tree).

    Returns
    -------
    list of float32 (S, S, len(TRAIN_CLASSES))
        One per stage, first to last.
    """
    reading = reading or Reading()
    out = []
    regions = {}
    for forest, m in zip(forests, reading.margins(len(forests))):
        if m not in regions:
            regions[m] = read_region(planes, m)
        # stage_input's planes, stacked for the region's pixels only
        out.append(predict_stage(forest, planes if not out
                                 else (planes, context_planes(out[-1])), regions[m],
                                 reading.early, reading.coarse))
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


@dataclass(frozen=True)
class Reading:
    """How a mesh model's stages read a crop: one object, stored in the model
    (``MeshModel.reading``) and taken by every function that runs the stages.

    Parameters
    ----------
    margin : float, sequence of float, or None
        Pixels farther than this outside the face oval (1/64 of the crop) are
        background, never read (:func:`read_region`); a sequence: one margin per
        stage, first to last (:func:`stage_margins`); None: every pixel is read.
    early : (int, float) or None
        ``(trees, confidence)``: the other trees read only the pixels whose
        leading class after the first ``trees`` has less than ``confidence``
        (:func:`forest_proba`); None: every tree reads every pixel.
    coarse : float or None
        Each stage reads the pixels of even row and column first, and the others
        only where their neighbours disagree or lead by less than this
        (:func:`predict_stage`); None: every pixel.
    """

    margin: object = None
    early: object = None
    coarse: object = None

    def checked(self, n_stages):
        """The reading with each field validated for a model of ``n_stages`` stages
        (:func:`check_margin`, :func:`check_early`, :func:`check_coarse`).

        Parameters
        ----------
        n_stages : int

        Returns
        -------
        Reading
            Numbers as floats, sequences as lists.

        Raises
        ------
        ValueError
            A field out of its range.
        """
        return Reading(check_margin(self.margin, n_stages), check_early(self.early),
                       check_coarse(self.coarse))

    def margins(self, n_stages):
        """Each stage's margin (:func:`stage_margins`).

        Parameters
        ----------
        n_stages : int

        Returns
        -------
        list of float or None
        """
        return stage_margins(self.margin, n_stages)


def predict_stages(forests, planes, sigma=0.0, reading=None, mix=0.0):
    """The stages' probabilities over a crop (:func:`stage_probas`, mixed by
    :func:`mix_stages`).

    Parameters
    ----------
    forests, planes, reading
        As for :func:`stage_probas`.
    sigma : float
        Gaussian smoothing of the result, in crop pixels (0: not smoothed).
    mix : float
        The first stage's share (:func:`mix_stages`; 0: the last stage alone).

    Returns
    -------
    float32 (S, S, len(TRAIN_CLASSES))
    """
    return smooth_proba(mix_stages(stage_probas(forests, planes, reading), mix), sigma)
