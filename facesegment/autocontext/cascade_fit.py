"""Training an auto-context cascade without leakage (out-of-fold maps).

The windows that train stage ``k >= 2`` get their context from stage
``k-1``'s probability maps of their own image, and those maps must come from
forests that never saw that image, or stage ``k`` learns to trust maps that are
better than they will be at test time.  So (Tu & Bai; ilastik does the same):

1. the training images are split into ``n_folds`` folds (seeded permutation);
2. for each fold, stage ``k-1`` is trained on the rows of the other folds'
   images and predicts the maps (every pixel, "full" mode) of the fold's
   images: the out-of-fold maps, kept as uint8;
3. stage ``k`` trains on ``[window | context at the centre]`` rows of all
   images, the context computed from the out-of-fold maps;
4. stage ``k-1`` for test time is the one trained on all images.

Stage ``k-1``'s fold forests for ``k-1 >= 2`` read the out-of-fold maps of
stage ``k-2`` of their images, so no stage ever sees a map made with its own
image.  Cost: ``n_folds`` extra fits of every stage but the last, and one dense
prediction per training image per stage but the last.
"""

import inspect
import time
from dataclasses import replace

import numpy as np

from .. import dense
from ..modelio.model import Model
from .cascade import Cascade
from .context import ContextSpec, as_u8, context_maps, context_planes, to_context_layout
from ..progress import Progress


def fold_of_images(image_index, n_folds, seed):
    """The fold of every window, by image (all windows of an image share a fold).

    The images are permuted with ``seed`` and dealt round-robin into the folds.

    Parameters
    ----------
    image_index : int (n,)
        Each window's training image (non-negative).
    n_folds : int
        Folds, 2..number of images.
    seed : int
        Seeds the permutation.

    Returns
    -------
    int64 (n,)
        Folds 0..n_folds-1.

    Raises
    ------
    ValueError
        ``n_folds`` outside 2..number of images.
    """
    images = np.unique(image_index)
    if n_folds < 2 or n_folds > len(images):
        raise ValueError(f"n_folds={n_folds} must be in 2..{len(images)} (the number of "
                         "training images)")
    perm = np.random.default_rng(seed).permutation(images)
    lookup = np.empty(int(images.max()) + 1, np.int64)
    lookup[perm] = np.arange(len(perm)) % n_folds
    return lookup[image_index]


def fit_timed(est, X, y, meta=None):
    """Fit ``est`` on ``(X, y)`` and time it.

    The windows' normalisation statistics are passed (``feature_mean``,
    ``feature_std``) when ``est.fit`` takes them and ``X`` has their width.

    Parameters
    ----------
    est : estimator
        Unfitted; fitted in place.
    X : array (n, F)
        Training rows.
    y : int array (n,)
        Their classes.
    meta : WindowMeta, optional
        The windows' metadata (``mean``, ``std``).

    Returns
    -------
    float
        The seconds the fit took.
    """
    kw = {}
    if meta is not None and "feature_mean" in inspect.signature(est.fit).parameters \
            and X.shape[1] == len(meta.mean):
        kw = {"feature_mean": meta.mean, "feature_std": meta.std}
    t0 = time.perf_counter()
    est.fit(X, y, **kw)
    return time.perf_counter() - t0


def stage_model(est, kind, meta, stage, spec):
    """The :class:`~facesegment.modelio.model.Model` of a fitted cascade stage.

    Stage 1 is on the windows' layout; a later stage is remapped from
    ``[window | context]`` columns onto the window layout with ``spec``'s
    context planes (:func:`facesegment.autocontext.context.to_context_layout`).

    Parameters
    ----------
    est : estimator
        The fitted stage.
    kind : str
        Its registry kind.
    meta : WindowMeta
        The training windows' metadata (layout, classes, normalisation).
    stage : int
        The stage's number (1 = first).
    spec : ContextSpec
        The context the stages after the first read.

    Returns
    -------
    Model
    """
    if stage == 1:
        return Model.from_estimator(est, kind, meta)
    tab = Model.from_estimator(est, kind, replace(meta, layout=None, mean=None, std=None))
    return to_context_layout(tab, meta.layout, spec)


def fit_cascade(ws, load_image, stages, spec=None, n_folds=4, seed=0, log=print,
                progress=True, provenance=None, first=None, fold_stages=None, prior=None):
    """Train a cascade on a windows set.

    Parameters
    ----------
    ws : facesegment.data.windows.WindowSet (loaded)
        Training windows with ``image_index`` and ``centers``; ``ws.meta``
        gives the classes, sampling factors and layout.
    load_image : callable(source name) -> uint8 image
        Reads a training image by its name in ``ws.meta.sources``.
    stages : list of (kind, make_estimator)
        One per stage: the registry kind and a callable ``seed -> unfitted
        estimator`` (stages >= 2 must not be oblique).
    spec : ContextSpec, optional
    n_folds : int >= 2
    seed : int
    first : facesegment.modelio.model.Model, optional
        Stage 1 already trained on all of ``ws`` (e.g. the pipeline's forest of
        that kind): used as is instead of fitting stage 1 again.
    fold_stages : list of callables ``seed -> unfitted estimator``, optional
        The fold forests of each stage but the last (default: ``stages``'
        makers), e.g. smaller forests: their maps only train the next stage.
    prior : facesegment.position.PositionPrior, optional
        The position prior whose planes the context holds when ``spec.prior``
        (required then); the cascade's last stage carries it (``position``).

    Returns
    -------
    Cascade (its stages' metrics hold fit times; the out-of-fold folds and
    cost are in ``cascade.provenance``).
    """
    spec = spec or ContextSpec(n_classes=len(ws.meta.class_names))
    if len(stages) < 2:
        raise ValueError("stages must list at least 2 (kind, make_estimator) pairs")
    if spec.needs_prior and prior is None:
        raise ValueError("the context spec reads the position prior (prior planes or stage "
                         "1's decision maps): give prior=, the run's PositionPrior")
    if first is not None and not np.array_equal(np.asarray(first.sampling_factors),
                                                np.asarray(ws.meta.sampling_factors)):
        raise ValueError("first= was not trained on these windows (its sampling factors "
                         "differ from ws.meta's): give the stage-1 model of this windows file")

    def planes_of(maps, img, stage):   # stage `stage`'s uint8 maps -> the next one's planes
        """Stage ``stage``'s uint8 maps of one image as the next stage's context planes.

        Parameters
        ----------
        maps : dict of int to uint8 (H, W, C)
            The stage's maps per image.
        img : int
            The image's index.
        stage : int
            The stage whose maps they are.

        Returns
        -------
        uint8 (H, W, spec.n_planes)
        """
        return context_planes(context_maps(maps[int(img)], spec, stage,
                                           ws.meta.sampling_factors, prior), spec, prior)

    n = len(ws.y)
    fold = fold_of_images(ws.image_index, n_folds, seed)
    X1 = ws.X.reshape(n, -1)
    y = ws.y
    images = np.unique(ws.image_index)
    rows, models, oof, times = X1, [], [], {}
    for s, (kind, make) in enumerate(stages, 1):
        if s == 1 and first is not None:
            models.append(first)
            log(f"cascade: stage 1 ({kind}): the given model")
        else:
            est = make(seed + 1000 * s)
            times[f"stage{s}"] = fit_timed(est, rows, y, ws.meta)
            models.append(stage_model(est, kind, ws.meta, s, spec))
            log(f"cascade: stage {s} ({kind}) on {n} rows of {rows.shape[1]} features: "
                f"{times[f'stage{s}']:.1f} s")
        if s == len(stages):
            break
        fold_make = fold_stages[s - 1] if fold_stages else make
        maps = _out_of_fold_maps(ws, load_image, rows, y, fold, images, kind, fold_make, s,
                                 spec, oof[-1] if oof else None, seed, log, progress, times,
                                 planes_of)
        oof.append(maps)
        rows = np.concatenate([X1, _context_rows(ws, maps, spec, images, planes_of, s)],
                              axis=1)
    if spec.needs_prior:
        models[-1].position = prior
    prov = dict(provenance or {})
    prov.update({"n_folds": n_folds, "fold_seed": seed, "n_windows": n,
                 "n_images": int(len(images)), "stage_kinds": [k for k, _ in stages]})
    cascade = Cascade(models, spec, prov)
    cascade.metrics["cascade_fit_seconds"] = {k: round(v, 3) for k, v in times.items()}
    return cascade


def rows_of_images(image_index):
    """The windows of each image (one stable sort, not a scan per image).

    Parameters
    ----------
    image_index : int (n,)
        Each window's image.

    Returns
    -------
    dict of int to int64 array
        ``{image: indices of its windows}``, in window order.
    """
    order = np.argsort(image_index, kind="stable")
    images, starts = np.unique(image_index[order], return_index=True)
    return dict(zip(images.tolist(), np.split(order, starts[1:])))


def _context_rows(ws, maps, spec, images, planes_of, stage):
    """Context values at every window's centre from its image's (uint8) map."""
    out = np.empty((len(ws.y), spec.n_planes), np.uint8)
    rows = rows_of_images(ws.image_index)
    for img in images:
        sel = rows[int(img)]
        planes = planes_of(maps, img, stage)
        c = ws.centers[sel]
        out[sel] = planes[c[:, 0], c[:, 1]]
    return out


def _out_of_fold_maps(ws, load_image, rows, y, fold, images, kind, make, s, spec, prev_maps,
                      seed, log, progress, times, planes_of):
    """``{image: uint8 (H, W, C)}``: stage ``s``'s maps of every training image,
    each from the fold forest that did not see it."""
    n_folds = int(fold.max()) + 1
    img_fold = {i: int(fold[r[0]]) for i, r in rows_of_images(ws.image_index).items()}
    maps = {}
    t0 = time.perf_counter()
    models = []   # the fold forests first (each with its own progress), so that the
    for f in range(n_folds):   # maps' progress line and ETA count only the maps
        keep = fold != f
        est = make(seed + 1000 * s + 17 * (f + 1))
        fit_timed(est, rows[keep], y[keep], ws.meta)
        models.append(stage_model(est, kind, ws.meta, s, spec))
    with Progress(len(images), f"cascade stage {s} out-of-fold maps", "images",
                  enabled=progress) as bar:
        for f, model in enumerate(models):
            for img in (i for i in images if img_fold[int(i)] == f):
                image = load_image(ws.meta.sources[int(img)])
                planes = None if prev_maps is None else planes_of(prev_maps, img, s - 1)
                raw = dense.predict_proba_raw(model, image, mode="full", planes=planes)
                maps[int(img)] = as_u8(raw)
                bar.update(1)
    times[f"stage{s}_out_of_fold"] = time.perf_counter() - t0
    log(f"cascade: stage {s} out-of-fold maps of {len(images)} images with {n_folds} fold "
        f"forests: {times[f'stage{s}_out_of_fold']:.1f} s")
    return maps


__all__ = ["fit_cascade", "fit_timed", "fold_of_images", "rows_of_images", "stage_model"]
