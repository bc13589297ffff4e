"""Run independent tasks with Dask: local threads by default, or a cluster.

Every stage of the pipeline that has independent units of work (images to
extract or label, trees to train, images to segment) goes through
:func:`map_tasks`.  Functions passed in must be top-level (picklable) so that the
same code runs on a ``distributed`` cluster given ``--scheduler ADDRESS``.
"""

import os
from itertools import islice

import dask

from .progress import Progress


def default_workers():
    """Number of local worker threads (all cores)."""
    return max(1, os.cpu_count() or 1)


def get_client(scheduler):
    """Connect to a ``distributed`` scheduler given as an address or a Client.

    ``scheduler`` may be a ``distributed.Client``, a ``LocalCluster``, or an
    address string such as ``tcp://10.0.0.5:8786``.
    """
    from distributed import Client

    if isinstance(scheduler, Client):
        return scheduler, False
    if hasattr(scheduler, "scheduler_address"):
        return Client(scheduler), True
    try:
        return Client(str(scheduler), timeout="10s"), True
    except OSError as exc:  # pragma: no cover - message depends on network stack
        from .errors import FaceSegmentError

        raise FaceSegmentError(
            f"cannot reach the Dask scheduler at {scheduler!r}: {exc} "
            "(start one with `dask scheduler` or omit --scheduler to use local threads)"
        ) from exc


def map_tasks(func, items, *, args=(), scheduler=None, n_workers=None, batch=None,
              desc="tasks", unit="items", progress=True, info=None):
    """Apply ``func(item, *args)`` to every item; yield ``(index, result)``.

    Results come back as they complete (cluster) or batch by batch in order
    (local threads), so memory stays bounded by ``batch`` results whatever the
    number of items.

    Parameters
    ----------
    func : callable
        A top-level function (picklable for a cluster).
    items : sequence
        Work items; ``len(items)`` must be defined.
    args : tuple
        Extra arguments passed to every call (scattered once on a cluster).
    scheduler : None, str or distributed.Client
        None runs on Dask's local threaded scheduler; otherwise the address
        of (or a client for) a ``distributed`` scheduler.
    n_workers : int, optional
        Local threads (default: all cores).
    batch : int, optional
        Tasks in flight at once (default ``4 * n_workers``).
    info : callable, optional
        ``info(result) -> str`` appended to the progress line.
    """
    items = list(items)
    n_workers = n_workers or default_workers()
    batch = batch or max(1, 4 * n_workers)
    bar = Progress(len(items), desc=desc, unit=unit, enabled=progress)
    with bar:
        if scheduler is None:
            it = iter(enumerate(items))
            while True:
                chunk = list(islice(it, batch))
                if not chunk:
                    break
                tasks = [dask.delayed(func, pure=False)(item, *args) for _, item in chunk]
                results = dask.compute(*tasks, scheduler="threads", num_workers=n_workers)
                for (i, _), res in zip(chunk, results):
                    bar.update(1, info(res) if info else "")
                    yield i, res
        else:
            yield from _map_distributed(func, items, args, scheduler, batch, bar, info)


def _map_distributed(func, items, args, scheduler, batch, bar, info):
    from distributed import as_completed

    client, owned = get_client(scheduler)
    try:
        scattered = [client.scatter(a, broadcast=True) if _is_big(a) else a for a in args]
        it = iter(enumerate(items))
        futures = {}

        def submit_next():
            nxt = next(it, None)
            if nxt is None:
                return None
            i, item = nxt
            fut = client.submit(func, item, *scattered, pure=False)
            futures[fut.key] = i
            return fut

        pending = [f for f in (submit_next() for _ in range(batch * 2)) if f is not None]
        ac = as_completed(pending, with_results=True)
        for fut, res in ac:
            i = futures.pop(fut.key)
            bar.update(1, info(res) if info else "")
            yield i, res
            new = submit_next()
            if new is not None:
                ac.add(new)
    finally:
        if owned:
            client.close()


def _is_big(obj):
    return getattr(obj, "nbytes", 0) > 1_000_000
