"""Class-balanced window extraction as a two-pass Dask pipeline.

Pass 1 (one task per small batch of images) counts the *eligible* pixels of
each class: at least ``margin`` (half the window: 15 for 31x31 windows) pixels
from every border and not labelled 255; bad images are skipped or fail the run
here, and the images' number of channels is read (3 for RGB, 1 for grey),
which with the ``window`` size makes the file's window layout.  The windows are then
allocated: every class gets ``n_windows // 8`` windows (the remainder goes one
each to the first classes), shared among the images by a multivariate
hypergeometric draw over their eligible-pixel counts, i.e. exactly as a
uniform draw without replacement from all the class's eligible pixels of the
split would share them.  Only a class with fewer eligible pixels than
requested is drawn with replacement (recorded in ``with_replacement``).

Pass 2 (again batches of images) draws the centres within each image with
that image's own seed and cuts the windows; results are written at their
image's offset in the output, so the file is identical whatever the
scheduler, the number of workers, the batching or the order in which tasks
finish.  Seeds are spawned up front from ``numpy.random.SeedSequence(seed)``.
Mean and standard deviation come from exact integer sums (order-independent).
The kernel, the tasks and the allocation: :mod:`facesegment.data.sampling`.
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..classes import CLASS_NAMES, N_CLASSES
from ..errors import DataError
from ..layout import DEFAULT_LAYOUT, WindowLayout
from ..atomic import check_output_path, check_writable_folder
from ..parallel import default_workers, map_tasks
from ..progress import Progress
from .windows import (CHUNK_ROWS, FORMAT, BackgroundSink, OrderedSink, WindowsWriter,
                      read_windows_meta)
from .sampling import (allocate, class_targets, count_batch, cut_batch, finish_stats,
                       sampling_factors, seed_states)

#: Bound on the windows one pass-2 task returns (memory in flight).
_WINDOWS_PER_TASK = 4096


def group_ranges(weights, max_items, max_weight=None):
    """Split ``range(len(weights))`` into consecutive ``(start, stop)`` groups.

    A group holds at most ``max_items`` items and, unless it is a single item,
    at most ``max_weight`` total weight.

    Parameters
    ----------
    weights : sequence of int
        Weight of each item (e.g. its windows).
    max_items : int
        Most items per group.
    max_weight : int, optional
        Most total weight per group of several items (None: no bound).

    Returns
    -------
    list of tuple of (int, int)
        The groups, in order, covering every item once (empty for no items).
    """
    groups, start, acc = [], 0, 0
    for i, wt in enumerate(weights):
        if i > start and (i - start >= max_items or (max_weight is not None and acc + wt > max_weight)):
            groups.append((start, i))
            start, acc = i, 0
        acc += int(wt)
    if len(weights):
        groups.append((start, len(weights)))
    return groups


# ----------------------------------------------------------------- public API

@dataclass
class ExtractResult:
    """What :func:`extract_windows` did.

    Attributes
    ----------
    path : str
    meta : WindowsMeta
    skipped : list of (path, problem, fix)
    n_images : int
    seconds : dict
        ``count``, ``cut`` and ``total`` wall-clock seconds.
    file_bytes : int
    """

    path: str
    meta: object
    skipped: list = field(default_factory=list)
    n_images: int = 0
    seconds: dict = field(default_factory=dict)
    file_bytes: int = 0


def check_output(path, inputs=(), allow_inside=False):
    """Fail early when ``path`` cannot or must not be written.

    ``path`` may be new or a windows file written by ``facesegment extract``
    (which is replaced when the new one is complete); anything else (a
    folder, a label map, a user's file) is never overwritten.  Unless
    ``allow_inside``, ``path`` must not lie inside one of the ``inputs``
    folders (the labelled data): a file written there could be taken for
    data.  The output's folder is created and must be writable.

    Parameters
    ----------
    path : str or path-like
        The windows file to write.
    inputs : iterable of str or path-like or None, default=()
        The input folders (None entries are ignored).
    allow_inside : bool, default=False
        Allow ``path`` inside an input folder (``--out-inside-data``).

    Raises
    ------
    DataError
        Naming ``path`` and the fix when it may not be written there.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise DataError(path, "output is an existing folder", "give a file name such as data/windows/train.h5")

    # never a link, a pipe or a device (opening a FIFO to look inside would hang)
    check_output_path(path, "windows file", "give a new --out file name, e.g. "
                      "data/windows/train.h5", ours=_is_windows_file)
    if os.path.exists(path) and not _is_windows_file(path):
        raise DataError(path, "exists and is not a windows file written by `facesegment extract`; "
                        "it would be replaced", "give a new --out file name, e.g. data/windows/train.h5")
    out = os.path.realpath(path)
    for root in inputs:
        if root and not allow_inside and _inside(out, os.path.realpath(os.fspath(root))):
            raise DataError(path, f"is inside the input folder {root}",
                            "write the windows file elsewhere (e.g. data/windows/), or pass "
                            "--out-inside-data if that is really meant")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        check_writable_folder(folder)
    except DataError as exc:
        raise DataError(path, f"cannot write output ({exc.problem.split('(', 1)[-1]}",
                        "choose a writable output folder with --out") from exc


def _inside(path, root):
    return os.path.commonpath([path, root]) == root


def _is_windows_file(path):
    if not os.path.isfile(path) or os.path.islink(path):
        return False
    try:
        import h5py

        with h5py.File(path, "r") as f:
            return f.attrs.get("format") == FORMAT
    except (OSError, ValueError):
        return False


def _validate(n_windows, seed, on_error, compression, n_workers, images_per_task=None,
              window=DEFAULT_LAYOUT.window):
    if isinstance(n_windows, bool) or not isinstance(n_windows, (int, np.integer)) \
            or n_windows < N_CLASSES:
        raise ValueError(f"n_windows must be an integer >= {N_CLASSES} (at least one window per "
                         f"class, or a class would get none); got {n_windows!r} "
                         "(the paper uses 256000 per tree)")
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1 \
            or window % 2 == 0:
        raise ValueError(f"window must be an odd positive integer (the window is centred on "
                         f"its pixel); got {window!r} (the paper uses 31)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    if on_error not in ("skip", "fail"):
        raise ValueError(f"on_error must be 'skip' or 'fail'; got {on_error!r}")
    if compression not in ("lzf", "gzip", None):
        raise ValueError(f"compression must be 'lzf', 'gzip' or None; got {compression!r}")
    if n_workers is not None and (not isinstance(n_workers, (int, np.integer)) or n_workers < 1):
        raise ValueError(f"n_workers must be a positive integer; got {n_workers!r}")
    if images_per_task is not None and (not isinstance(images_per_task, (int, np.integer))
                                        or images_per_task < 1):
        raise ValueError(f"images_per_task must be a positive integer or None; got {images_per_task!r}")


def extract_windows(records, out, n_windows=64000, seed=0, *, window=DEFAULT_LAYOUT.window,
                    grey=False,
                    scheduler=None, n_workers=None, on_error="skip", margin=None,
                    compression="gzip", compression_opts=1, chunk_rows=CHUNK_ROWS, progress=True,
                    data_root=None, labels_root=None, images_per_task=None,
                    out_inside_data=False):
    """Sample class-balanced windows from labelled faces into a windows file.

    Parameters
    ----------
    records : sequence of FaceRecord
        Faces (``facesegment.data.datasets.find_faces``); order defines ``sources``.
    out : str or Path
        Output ``.h5`` path, written as ``<out>.tmp-<pid>`` then renamed.
    n_windows : int
        Total windows N (the paper: 256,000 per tree).
    seed : int
    window : int, odd
        Side of the square windows (31 in the paper).  Their channels come
        from the images (3 for RGB, 1 for grey images); the file records the
        resulting :class:`facesegment.layout.WindowLayout`.
    grey : bool
        Convert RGB images to grey first (``facesegment.data.imageio.to_grey``):
        one channel, a third of the features.  Grey models convert RGB
        images the same way at inference.
    scheduler : None, str or distributed.Client
        None: local threads; else a ``distributed`` scheduler address.
    n_workers : int, optional
        Local threads (default: all cores).
    on_error : {"skip", "fail"}
        A bad image (unreadable, missing/mis-sized/invalid label map) is
        left out and reported ("skip") or stops the run with DataError and no
        output ("fail").
    margin : int, optional
        Minimum distance of a centre from the border (default and minimum:
        ``window // 2``, 15 for 31x31 windows, so the window fits).
    compression, compression_opts, chunk_rows
        HDF5 storage of the windows dataset (default gzip level 1 in chunks
        of 1024 windows: measured faster to write and 2x smaller than lzf).
    progress : bool
        Progress lines (images done, rate, ETA) on stderr.
    data_root, labels_root : path, optional
        Recorded in the file's attributes; ``out`` may not lie inside them
        unless ``out_inside_data``.
    images_per_task : int, optional
        Images per Dask task (default: up to 32, fewer for small splits; a
        pass-2 task also holds at most ~4096 windows unless one image has
        more).  Results do not depend on it.

    Returns
    -------
    ExtractResult

    Raises
    ------
    DataError
        Unwritable output, no usable images, images of different numbers of
        channels, a class with no eligible pixel, or (``on_error="fail"``)
        the first bad image.
    """
    _validate(n_windows, seed, on_error, compression, n_workers, images_per_task, window)
    margin = _checked_margin(margin, window)
    records = list(records)
    if not records:
        raise DataError(data_root, "no images to extract from", "give a folder of labelled faces")
    check_output(out, (data_root, labels_root), out_inside_data)
    t0 = time.perf_counter()

    n_threads = n_workers or default_workers()
    per_task = images_per_task or max(1, min(32, len(records) // (16 * n_threads)))
    counts, channels, ok, skipped = _count_pass(records, margin, grey, per_task, on_error,
                                                scheduler, n_workers, progress)
    t1 = time.perf_counter()
    used = np.flatnonzero(ok)
    if used.size == 0:
        raise DataError(data_root, f"none of the {len(records)} images could be read",
                        "fix the files listed above or point at another folder")
    counts = counts[used]
    layout = _layout_of(records, used, channels[used], window)
    plan = _allocation(records, used, counts, n_windows, seed, margin, data_root)
    attrs = dict(seed=int(seed), n_windows=int(n_windows), margin=int(margin),
                 std_kind="population (divide by N); 0 replaced by 1",
                 data_root=os.path.abspath(data_root) if data_root is not None else "",
                 labels_root=os.path.abspath(labels_root) if labels_root is not None else "",
                 compression=str(compression), n_images=int(used.size))
    storage = dict(compression=compression, compression_opts=compression_opts,
                   chunk_rows=chunk_rows, layout=layout)
    try:
        with WindowsWriter(out, n_windows, **storage) as writer:
            sums, sumsq = _cut_pass(writer, plan["items"],
                                    group_ranges(plan["per_image"], per_task, _WINDOWS_PER_TASK),
                                    plan["offsets"], layout, margin, grey, n_threads, scheduler,
                                    n_workers, progress)
            mean, std = finish_stats(sums, sumsq, n_windows)
            class_counts = plan["alloc"].sum(axis=0)
            factors = sampling_factors(class_counts, plan["pixel_counts"])
            writer.set_strings("sources", [records[j].name for j in used])
            writer.set_strings("skipped", [str(e[0]) for e in skipped])
            writer.set_attrs(
                class_names=list(CLASS_NAMES), pixel_counts=plan["pixel_counts"],
                class_counts=class_counts, sampling_factors=factors,
                with_replacement=plan["replace"], mean=mean, std=std, **attrs)
            writer.finish()
    except OSError as exc:  # e.g. the disk filled up: the partial file is removed
        raise DataError(out, f"cannot write the windows file ({exc.strerror or exc})",
                        "free some disk space or choose another --out") from exc
    t2 = time.perf_counter()
    meta = read_windows_meta(out)
    return ExtractResult(path=os.fspath(out), meta=meta, skipped=skipped, n_images=int(used.size),
                         seconds={"count": t1 - t0, "cut": t2 - t1, "total": t2 - t0},
                         file_bytes=os.path.getsize(out))


def _checked_margin(margin, window):
    """``margin`` (None: half the window), or ValueError when windows would not fit."""
    half = int(window) // 2
    margin = half if margin is None else margin
    if isinstance(margin, bool) or not isinstance(margin, (int, np.integer)) or margin < half:
        raise ValueError(f"margin must be an integer >= {half} (half the window) so windows fit "
                         f"in the image; got {margin!r}")
    return margin


def _allocation(records, used, counts, n_windows, seed, margin, data_root):
    """How many windows of each class each used image gives, and its pass-2 task item.

    Returns a dict: ``alloc`` (images x classes), ``replace`` (drawn with
    replacement), ``per_image``, ``offsets`` (each image's first row),
    ``pixel_counts`` (eligible pixels per class) and ``items`` (one
    ``(record, alloc, counts, rng state, replace)`` per used image).  Raises
    DataError when a class with a target has no eligible pixel.
    """
    pixel_counts = counts.sum(axis=0)
    targets = class_targets(n_windows)
    empty = [CLASS_NAMES[c] for c in range(N_CLASSES) if targets[c] and pixel_counts[c] == 0]
    if empty:
        raise DataError(data_root, f"no eligible pixel (>= {margin} px from the border) of "
                        f"class(es) {', '.join(empty)} in {used.size} images",
                        "add images that show every face part")
    alloc_rng, states = seed_states(seed, used.size)
    alloc, replace = allocate(counts, targets, alloc_rng)
    per_image = alloc.sum(axis=1)
    return {"alloc": alloc, "replace": replace, "per_image": per_image,
            "offsets": np.concatenate([[0], np.cumsum(per_image)]),
            "pixel_counts": pixel_counts,
            "items": [(records[j], alloc[k], counts[k], states[k], replace)
                      for k, j in enumerate(used)]}


def _count_pass(records, margin, grey, per_task, on_error, scheduler, n_workers, progress):
    """Pass 1: each image's eligible pixels per class and its channels.

    Returns ``(counts (n, N_CLASSES), channels (n,), ok (n,) bool, skipped)``;
    a bad image is skipped (its error kept) or, with ``on_error="fail"``,
    raised as DataError.
    """
    counts = np.zeros((len(records), N_CLASSES), np.int64)
    channels = np.zeros(len(records), np.int64)
    ok = np.ones(len(records), bool)
    skipped = []
    groups = group_ranges(np.ones(len(records)), per_task)
    with Progress(len(records), desc="extract 1/2 count pixels", unit="images", enabled=progress) as bar:
        for g, results in map_tasks(count_batch, [records[a:b] for a, b in groups], args=(margin, grey),
                                    scheduler=scheduler, n_workers=n_workers, progress=False):
            a = groups[g][0]
            for i, (cnt, err, nc) in enumerate(results, start=a):
                if err is not None:
                    if on_error == "fail":
                        raise DataError(*err)
                    skipped.append(err)
                    ok[i] = False
                else:
                    counts[i] = cnt
                    channels[i] = nc
            bar.update(len(results))
    return counts, channels, ok, skipped


def _cut_pass(writer, items, groups, offsets, layout, margin, grey, n_threads, scheduler,
              n_workers, progress):
    """Pass 2: cut every image's allotted windows into ``writer``, in image order
    whatever order the tasks finish in; returns the features' sums and sums of
    squares (int64) for the mean and standard deviation."""
    sums = np.zeros(layout.n_features, np.int64)
    sumsq = np.zeros(layout.n_features, np.int64)
    with ThreadPoolExecutor(n_threads) as pool:
        sink = BackgroundSink(OrderedSink(writer, offsets, np.arange(len(items), dtype=np.int32),
                                            4 * writer.chunk_rows, pool))
        bar = Progress(len(items), desc="extract 2/2 cut windows", unit="images", enabled=progress)
        try:
            for g, (results, s1, s2) in map_tasks(cut_batch, [items[a:b] for a, b in groups],
                                                  args=(margin, layout.window, grey),
                                                  scheduler=scheduler, n_workers=n_workers,
                                                  progress=False):
                if s1 is not None:
                    sums += s1
                    sumsq += s2
                for k, res in enumerate(results, start=groups[g][0]):
                    sink.add(k, res)
                bar.update(len(results))
        finally:
            bar.close()
            sink.stop()
        sink.close()
    return sums, sumsq


def _layout_of(records, used, channels, window):
    """The window layout of the used images (they must share their number of channels)."""
    first = int(channels[0])
    odd = np.flatnonzero(channels != first)
    if odd.size:
        rec = records[used[odd[0]]]
        raise DataError(rec.image, f"has {int(channels[odd[0]])} channel(s) but "
                        f"{records[used[0]].image} has {first}",
                        "use images of one kind (all RGB or all grey) in one windows file")
    return WindowLayout(window=int(window), channels=first)


__all__ = ["extract_windows", "check_output", "group_ranges", "ExtractResult"]
