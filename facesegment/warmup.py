"""Compiling the kernels ``segment`` uses ahead of time, with progress.

Numba compiles a kernel on its first call and keeps it in its disk cache
(``cache=True``: :mod:`facesegment._jit`); a fresh install's first
``facesegment segment`` compiles the one kernel the shipped model needs (a
few seconds: ``benchmarks/bench_first_use.py``) before its first image.
:func:`warm` runs each kernel family of dense inference once on a small
image, so they are compiled and cached ahead of time (``facesegment
warmup``), and :func:`prepare` does the same for one model before
``segment`` starts, with a progress line as soon as something compiles
(:func:`compiling`) instead of silence, and none when the kernels load from
the cache.

The kernel families (:func:`default_steps`) are those of every registry
kind on the paper's 31x31 RGB layout: integer records for axis-aligned and
two-probe forests, level kernels for float32 oblique (CO2) rows, sparse rows,
and the pooled layout's integer rows (int8 and int16, in the form this CPU
runs).  Each step is a tiny forest of that family whose arrays have the
dtypes a trained model has, so the compiled signatures are the ones a real
model calls.
"""

import math
import threading
import time
from contextlib import contextmanager

import numpy as np

from .classes import CLASS_NAMES
from .dense import predict_image
from .faces.segment import segment_image
from .forest._arrays import ForestArrays
from .layout import DEFAULT_LAYOUT, WindowLayout
from .modelio.model import Model
from .progress import Progress

#: Side of the image each synthetic step predicts (more than one window).
IMAGE_SIDE = 40
#: Side of the image a model's step segments (``segment``'s face crops).
CROP_SIDE = 250
#: How often the progress line's timer looks at the clock, and redraws the line.
POLL_SECONDS = 0.05
REDRAW_SECONDS = 2.0


def _tiny_model(kind, family, layout, weights_dtype=np.float32, seed=0):
    """A 2-tree forest of one node family (``axis``, ``two-probe``, ``oblique``,
    ``sparse``) on ``layout``, as a :class:`facesegment.modelio.model.Model`."""
    rng = np.random.default_rng(seed)
    p = layout.n_features
    n_classes = len(CLASS_NAMES)
    # each tree: root -> (1, 2); node 1 -> (3, 4); nodes 2, 3, 4 leaves
    left, right, feature, feature2, oblique, sparse = ([] for _ in range(6))
    threshold, depth = [], []
    roots, rows = [], []
    for t in range(2):
        base = 5 * t
        roots.append(base)
        for node, d, split in ((0, 0, True), (1, 1, True), (2, 1, False), (3, 2, False),
                               (4, 2, False)):
            kid = {0: 1, 1: 3}.get(node)
            left.append(base + kid if split else -1)
            right.append(base + kid + 1 if split else -1)
            depth.append(d)
            f = f2 = ob = sp = -1
            thr = 0.0
            if split and family == "axis":
                f, thr = int(rng.integers(p)), 127.5
            elif split and family == "two-probe":
                f, f2, thr = int(rng.integers(p)), int(rng.integers(p)), 0.5
            elif split and family == "oblique":
                ob = len(rows)
                rows.append(rng.integers(-100, 101, p))
            elif split and family == "sparse":
                sp = len(rows)
                rows.append(rng.integers(-100, 101, 4))
            feature.append(f)
            feature2.append(f2)
            oblique.append(ob)
            sparse.append(sp)
            threshold.append(thr)
    n = len(left)
    value = rng.dirichlet(np.ones(n_classes), n).astype(np.float32)
    i32 = np.int32
    weights = np.zeros((0, p), weights_dtype)
    extra = {}
    if family == "oblique":
        weights = np.asarray(rows, dtype=weights_dtype)
    if family == "sparse":
        extra = dict(sparse=np.asarray(sparse, i32),
                     sparse_ptr=np.arange(0, 4 * len(rows) + 1, 4, dtype=np.int64),
                     sparse_index=np.asarray([rng.choice(p, 4, replace=False) for _ in rows],
                                             dtype=np.int32).ravel(),
                     sparse_weight=np.asarray(rows, np.float32).ravel())
    arrays = ForestArrays(
        roots=np.asarray(roots, i32), left=np.asarray(left, i32), right=np.asarray(right, i32),
        feature=np.asarray(feature, i32), feature2=np.asarray(feature2, i32),
        oblique=np.asarray(oblique, i32), threshold=np.asarray(threshold, np.float32),
        value=value, depth=np.asarray(depth, i32), n_samples=np.full(n, 100, i32),
        weights=weights, **extra)
    return Model(kind=kind, params={"n_estimators": 2}, arrays=arrays, class_names=CLASS_NAMES,
                 sampling_factors=np.ones(n_classes), mean=np.zeros(p, np.float32),
                 std=np.ones(p, np.float32), layout=layout)


def _predict_step(model):
    channels = 3 if model.layout is None else min(3, model.layout.channels)
    image = np.random.default_rng(1).integers(0, 256, (IMAGE_SIDE, IMAGE_SIDE, channels),
                                              dtype=np.uint8)

    def run():
        predict_image(model, image, mode="full", alpha=1.0)

    return run


def default_steps():
    """``[(label, callable)]``: one step per kernel family of dense inference on
    the paper's 31x31 RGB layout (see the module docstring)."""
    pooled = WindowLayout(pool=3)
    families = [
        ("axis-aligned forests (integer records)", "axis", "axis", DEFAULT_LAYOUT, np.float32),
        ("two-probe forests (integer records)", "two-probe", "two-probe", DEFAULT_LAYOUT,
         np.float32),
        ("CO2 forests (float32 rows, level kernels)", "co2", "oblique", DEFAULT_LAYOUT,
         np.float32),
        ("sparse CO2 forests (sparse rows)", "co2-sparse", "sparse", DEFAULT_LAYOUT, np.float32),
        ("pooled CO2 forests (int16 rows)", "co2-pooled", "oblique", pooled, np.int16),
        ("pooled CO2 forests (int8 rows)", "co2-pooled", "oblique", pooled, np.int8),
        ("pooled CO2 forests (float32 rows)", "co2-pooled", "oblique", pooled, np.float32),
    ]
    return [(label, _predict_step(_tiny_model(kind, family, layout, dtype)))
            for label, kind, family, layout, dtype in families]


def model_step(model, alpha=1.0, beta=None, sigma=None, label="the model's kernels"):
    """What ``segment`` runs for one face crop of ``model``, as a warm-up step.

    The step is :func:`facesegment.faces.segment.segment_image` of a blank crop
    (grey when the model's layout has fewer than 3 channels), without face
    detection.

    Parameters
    ----------
    model : Model
        A loaded model.
    alpha : float, default=1.0
        Exponent of the sampling-factor reweighting passed to ``segment_image``.
    beta, sigma : float, optional
        Position-prior exponent and smoothing passed to ``segment_image``
        (None: the model's own).
    label : str, default="the model's kernels"
        The step's name in the progress line.

    Returns
    -------
    tuple of (str, callable)
        ``(label, run)``; ``run()`` takes no argument.
    """
    channels = 3 if model.layout is None or model.layout.channels >= 3 else 1
    crop = np.zeros((CROP_SIDE, CROP_SIDE, channels) if channels == 3
                    else (CROP_SIDE, CROP_SIDE), np.uint8)

    def run():
        segment_image(model, crop, alpha=alpha, detect="never", beta=beta, sigma=sigma)

    return label, run


def warm(steps, progress=True, desc="compiling kernels", quiet_seconds=0.0, stream=None,
         speak_up=None):
    """Run warm-up steps in order, with a progress line.

    The line shows done/total steps, elapsed time and ETA, and is redrawn every
    few seconds while a step compiles.  With ``quiet_seconds`` > 0 nothing is
    shown unless the steps take longer than that (kernels already cached load in
    well under a second), or until ``speak_up`` is set.

    Parameters
    ----------
    steps : list of tuple of (str, callable)
        ``(label, run)`` pairs; ``run()`` takes no argument.
    progress : bool, default=True
        Whether a progress line may be drawn at all.
    desc : str, default="compiling kernels"
        The line's label.
    quiet_seconds : float, default=0.0
        Seconds before the line is first shown (``math.inf``: only when
        ``speak_up`` is set).
    stream : file, optional
        Where the line is written (default ``sys.stderr``).
    speak_up : threading.Event, optional
        Shows the line as soon as it is set (e.g. :func:`compiling`'s).

    Returns
    -------
    list of tuple of (str, float)
        ``(label, seconds)`` per step run.
    """
    bar = Progress(len(steps), desc=desc, unit="steps", enabled=progress, stream=stream,
                   min_interval=0.0, log_interval=0.0)
    done = threading.Event()
    lock = threading.Lock()
    current = [steps[0][0] if steps else ""]
    shown = [quiet_seconds <= 0]
    start = time.perf_counter()
    last = [start]

    def due(now):
        """Whether the line is to be drawn now.

        Parameters
        ----------
        now : float
            ``time.perf_counter()``.

        Returns
        -------
        bool
            Once shown: whether :data:`REDRAW_SECONDS` have passed since the last
            draw; before: whether ``quiet_seconds`` have passed or ``speak_up`` is set.
        """
        if shown[0]:
            return now - last[0] >= REDRAW_SECONDS
        return now - start >= quiet_seconds or (speak_up is not None and speak_up.is_set())

    def tick():
        while not done.wait(POLL_SECONDS):
            with lock:
                now = time.perf_counter()
                if not done.is_set() and due(now):
                    shown[0], last[0] = True, now
                    bar.show(f"({current[0]})")

    timer = threading.Thread(target=tick, daemon=True)
    timer.start()
    out = []
    try:
        if shown[0]:
            bar.show(f"({current[0]})")
        for label, run in steps:
            current[0] = label
            t0 = time.perf_counter()
            run()
            out.append((label, time.perf_counter() - t0))
            with lock:
                if shown[0]:
                    bar.update(1, f"({label}: {out[-1][1]:.1f} s)")
                    last[0] = time.perf_counter()
                else:
                    bar.n += 1
    finally:
        done.set()
        timer.join()
        if shown[0]:
            bar.close()
    return out


@contextmanager
def compiling():
    """A :class:`threading.Event` set as soon as Numba compiles anything (a kernel
    not in its disk cache) inside the ``with`` block; loading cached kernels
    leaves it unset."""
    from numba.core import event

    flag = threading.Event()

    class _Listener(event.Listener):
        def on_start(self, ev):
            """Set the flag: Numba starts compiling.

            Parameters
            ----------
            ev : numba.core.event.Event
                The compile event (unused).
            """
            flag.set()

        def on_end(self, ev):
            """Nothing to do when a compilation ends.

            Parameters
            ----------
            ev : numba.core.event.Event
                The compile event (unused).
            """
            pass

    with event.install_listener("numba:compile", _Listener()):
        yield flag


def prepare(model, alpha=1.0, beta=None, sigma=None, progress=True, stream=None):
    """Compile (or load from Numba's cache) the kernels ``model`` needs before ``segment``.

    It is silent when they are cached (however long loading takes), and shows a
    progress line as soon as one compiles (a fresh install's first run;
    ``facesegment warmup`` does it ahead of time).  A model that is not a forest
    over windows (``model.dense`` false, :mod:`facesegment.modelio.protocol`)
    needs none before its first face: a landmark model's fallback compiles if a
    crop without a face comes, a mesh model's stage forests with its first face.

    Parameters
    ----------
    model : Model
        The loaded model.
    alpha : float, default=1.0
        Exponent of the sampling-factor reweighting ``segment`` will use.
    beta, sigma : float, optional
        Position-prior exponent and smoothing ``segment`` will use (None: the
        model's own).
    progress : bool, default=True
        Whether a progress line may be shown.
    stream : file, optional
        Where the line is written (default ``sys.stderr``).

    Returns
    -------
    list of tuple of (str, float)
        ``(label, seconds)`` of the step run, as :func:`warm` returns it; empty
        for a model that is not dense.
    """
    if not model.dense:
        return []
    with compiling() as flag:
        return warm([model_step(model, alpha, beta, sigma)], progress=progress,
                    desc="compiling kernels for first use (cached after; `facesegment "
                         "warmup` does it ahead)", quiet_seconds=math.inf, stream=stream,
                    speak_up=flag)


__all__ = ["default_steps", "model_step", "warm", "compiling", "prepare"]
