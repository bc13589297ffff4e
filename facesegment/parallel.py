"""Run independent tasks: local threads by default, or a Dask ``distributed`` cluster.

Every stage of the pipeline that has independent units of work (images to
extract or label, trees to train, images to segment) goes through
:func:`map_tasks`.  Functions passed in must be top-level (picklable) so that the
same code runs on a ``distributed`` cluster given ``--scheduler ADDRESS``.

A bounded number of tasks is in flight, so memory stays bounded whatever the
number of items.  Local threads yield results in input order, each as soon as
it and the ones before it are done (the threads keep working meanwhile); a
cluster yields them as they complete.

Interruptions (Ctrl-C, or SIGTERM turned into
:class:`~facesegment.errors.Terminated` by the CLI) and failures:

* local threads: queued tasks are cancelled; the tasks already running are let
  finish (a thread cannot be stopped; their outputs are written atomically)
  and their results are still yielded, then the interruption is re-raised;
* cluster: the outstanding futures are cancelled and the client closed;
* losing the scheduler (or the client's connection to it) raises
  :class:`~facesegment.errors.SchedulerLostError` ("lost the Dask scheduler at
  ADDRESS; finished outputs kept"): the results yielded before it stand;
* losing every worker (none for :data:`WORKER_TIMEOUT` seconds) raises
  :class:`~facesegment.errors.WorkersLostError` ("lost every Dask worker of the
  scheduler at ADDRESS"), the scheduler being still there.

Connecting has a timeout too: a malformed address, an unreachable scheduler,
an address that accepts the connection and never answers
(:data:`CONNECT_TIMEOUT`) and a scheduler without workers
(:data:`WORKER_TIMEOUT`) are each one error line, never a hang.
"""

import concurrent.futures as cf
import logging
import os
import pickle
from contextlib import contextmanager

from .errors import FaceSegmentError, SchedulerLostError, WorkersLostError
from .extras import require
from .progress import Progress

#: Seconds between checks of the client's state while waiting for results.
POLL_SECONDS = 1.0
#: Seconds a finished task's result may take to arrive while workers are up.
FETCH_TIMEOUT = 60.0


def default_workers():
    """Number of local worker threads (all cores)."""
    return max(1, os.cpu_count() or 1)


#: Seconds to connect to a scheduler (the TCP connection and its handshake).
CONNECT_TIMEOUT = 15.0
#: Seconds a run waits for a scheduler's first worker, and for a new one after
#: every worker is gone; then it stops with one line naming what is missing.
WORKER_TIMEOUT = 60.0
#: Schemes of Dask comm addresses; those of TCP-like transports need HOST:PORT.
_HOST_PORT_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_OTHER_SCHEMES = ("inproc",)


def check_address(address):
    """Refuse a scheduler address that is not ``[SCHEME://]HOST:PORT``.

    SCHEME is one of tcp, tls, ws, wss, ucx (tcp when omitted); ``inproc://...``
    is accepted as it is.

    Parameters
    ----------
    address : str
        The ``--scheduler`` value.

    Returns
    -------
    str
        The address, stripped of surrounding spaces.

    Raises
    ------
    FaceSegmentError
        One line naming the address, when it is malformed or its port is not in
        1..65535.
    """
    import re

    text = str(address).strip()
    scheme, sep, loc = text.partition("://")
    if not sep:
        scheme, loc = "tcp", text
    fix = ("give the address the scheduler prints, e.g. tcp://10.0.0.5:8786, or omit "
           "--scheduler to use local threads")
    if scheme in _OTHER_SCHEMES and loc:
        return text
    m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})", loc)
    if scheme not in _HOST_PORT_SCHEMES or not m or not 0 < int(m.group(2)) < 65536:
        raise FaceSegmentError(f"--scheduler {text!r} is not a Dask scheduler address ({fix})")
    return text


def get_client(scheduler):
    """Connect to a ``distributed`` scheduler given as an address or a Client.

    A malformed address, a scheduler that cannot be reached, and one that
    accepts the connection but does not answer within :data:`CONNECT_TIMEOUT`
    seconds are each one FaceSegmentError line.

    Parameters
    ----------
    scheduler : str, distributed.Client or distributed.LocalCluster
        A client (used as it is), a cluster (a client is made for it), or an
        address string such as ``tcp://10.0.0.5:8786``.

    Returns
    -------
    client : distributed.Client
        The connected client.
    owned : bool
        True when this call made the client (the caller closes it).

    Raises
    ------
    DataError
        When ``distributed`` is not installed (see :func:`~facesegment.extras.require`).
    FaceSegmentError
        When the address is malformed or the scheduler cannot be reached in time.
    """
    Client = require("distributed", "a Dask cluster (--scheduler)").Client
    if isinstance(scheduler, Client):
        return scheduler, False
    if hasattr(scheduler, "scheduler_address"):
        return Client(scheduler), True
    address = check_address(scheduler)
    hint = "(start one with `dask scheduler` or omit --scheduler to use local threads)"
    out = {}

    def connect():  # in a thread: distributed's own timeout does not cover a silent peer
        try:
            out["client"] = Client(address, timeout=f"{CONNECT_TIMEOUT}s")
        except BaseException as exc:  # noqa: BLE001 - reported below
            out["error"] = exc

    import threading

    thread = threading.Thread(target=connect, name="facesegment-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT + 5)
    if thread.is_alive():
        raise FaceSegmentError(
            f"cannot connect to the Dask scheduler at {address!r}: it accepted the connection "
            f"but did not answer within {CONNECT_TIMEOUT + 5:g} s (is a Dask scheduler "
            f"listening there? check the address and port) {hint}")
    exc = out.get("error")
    if isinstance(exc, (OSError, TimeoutError, ValueError, TypeError)):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise FaceSegmentError(f"cannot reach the Dask scheduler at {address!r}: {first} "
                               f"{hint}") from None
    if exc is not None:
        raise exc
    return out["client"], True


def wait_for_workers(client, address, timeout=None):
    """Wait until the scheduler has a worker.

    Parameters
    ----------
    client : distributed.Client
        A client connected to the scheduler.
    address : str
        The scheduler's address, for the message.
    timeout : float, optional
        Seconds to wait for a first worker; default :data:`WORKER_TIMEOUT`.

    Raises
    ------
    FaceSegmentError
        Naming the scheduler when no worker joins within ``timeout`` seconds.
    """
    timeout = WORKER_TIMEOUT if timeout is None else timeout
    try:
        if _n_workers(client) > 0:
            return
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise FaceSegmentError(
            f"the Dask scheduler at {address} has no workers (none joined within "
            f"{timeout:g} s); start some with `dask worker {address}`, or omit --scheduler "
            "to use local threads") from None


def _n_workers(client):
    """Workers the scheduler has now (one round trip)."""
    return len(client.nthreads())


def scheduler_address(scheduler, client=None):
    """A printable address for ``scheduler``.

    Parameters
    ----------
    scheduler : str, distributed.Client or distributed.LocalCluster
        What the user gave (a string is returned as it is).
    client : distributed.Client, optional
        The client connected to it, asked when ``scheduler`` does not tell.

    Returns
    -------
    str
        The scheduler's address, else ``repr(scheduler)``.
    """
    if isinstance(scheduler, str):
        return scheduler
    for obj in (scheduler, client):
        addr = getattr(obj, "scheduler_address", None)
        if addr:
            return str(addr)
        try:
            addr = obj.scheduler.address
        except Exception:  # noqa: BLE001 - any client state: fall back to repr
            addr = None
        if addr:
            return str(addr)
    return repr(scheduler)


def map_tasks(func, items, *, args=(), scheduler=None, n_workers=None, batch=None,
              desc="tasks", unit="items", progress=True, info=None):
    """Apply ``func(item, *args)`` to every item; yield ``(index, result)``.

    Results come back in input order (local threads: each as soon as it and
    the ones before it are done) or as they complete (cluster), with at most
    ``batch`` tasks in flight or finished but not yet yielded, so memory stays
    bounded by ``batch`` results whatever the number of items.

    Parameters
    ----------
    func : callable
        A top-level function (picklable for a cluster).
    items : sequence
        Work items; ``len(items)`` must be defined.
    args : tuple
        Extra arguments passed to every call (scattered once on a cluster).
    scheduler : None, str or distributed.Client
        None runs on local threads; otherwise the address of (or a client
        for, or a ``LocalCluster``) a ``distributed`` scheduler.
    n_workers : int, optional
        Local threads (default: all cores).
    batch : int, optional
        Tasks in flight at once (default ``4 * n_workers``; twice that on a
        cluster).
    info : callable, optional
        ``info(result) -> str`` appended to the progress line.

    Raises
    ------
    SchedulerLostError
        When the cluster's scheduler goes away mid-run.
    KeyboardInterrupt
        Re-raised after the local tasks already running have finished and
        their results were yielded (see the module docstring).
    Exception
        The exception a task raised (local threads: in input order, after the
        results of the items before it; the results yielded before it stand).
    """
    items = list(items)
    n_workers = n_workers or default_workers()
    batch = batch or max(1, 4 * n_workers)
    bar = Progress(len(items), desc=desc, unit=unit, enabled=progress)
    with bar:
        if scheduler is None:
            yield from _map_local(func, items, args, n_workers, batch, bar, info)
        else:
            yield from _map_distributed(func, items, args, scheduler, 2 * batch, bar, info)


def numba_share(n_workers):
    """Numba threads of each of ``n_workers`` local worker threads.

    The process's Numba threads are shared out (at least 1 each), so that
    workers whose tasks call parallel kernels do not start more threads than
    there are cores.

    Parameters
    ----------
    n_workers : int
        Local worker threads (values below 1 count as 1).

    Returns
    -------
    int
        ``max(1, NUMBA_NUM_THREADS // n_workers)``.
    """
    import numba

    return max(1, numba.config.NUMBA_NUM_THREADS // max(1, n_workers))


def _set_numba_threads(n):   # a worker thread's initializer (the setting is per thread)
    import numba

    numba.set_num_threads(n)


def _map_local(func, items, args, n_workers, batch, bar, info):
    """Local threads; results in input order, each as soon as it and the ones
    before it are done (later ones keep the threads busy meanwhile).  Each
    thread runs Numba's parallel kernels on its share of the cores
    (:func:`numba_share`); no result depends on it."""
    n_threads = min(n_workers, max(1, len(items)))
    pool = cf.ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix="facesegment",
                                 initializer=_set_numba_threads,
                                 initargs=(numba_share(n_threads),))
    it = iter(enumerate(items))
    running = {}   # future -> index
    ready = {}     # index -> future, finished but not yet yielded
    state = {"next": 0, "failed": False}

    def submit_next():
        if state["failed"] or len(running) + len(ready) >= batch:
            return
        nxt = next(it, None)
        if nxt is not None:
            i, item = nxt
            running[pool.submit(func, item, *args)] = i

    try:
        for _ in range(batch):
            submit_next()
        while running or ready:
            if state["next"] in ready:
                fut = ready.pop(state["next"])
                state["next"] += 1
                res = fut.result()  # a task's exception is raised in input order
                bar.update(1, info(res) if info else "")
                yield state["next"] - 1, res
                submit_next()
                continue
            try:
                # a timeout, so that a signal handled by another thread is seen
                done, _ = cf.wait(list(running), timeout=POLL_SECONDS,
                                  return_when=cf.FIRST_COMPLETED)
            except KeyboardInterrupt:
                for i, res in _drain(running, ready):
                    bar.update(1, info(res) if info else "")
                    yield i, res
                raise
            for fut in done:
                ready[running.pop(fut)] = fut
                if fut.exception() is not None:
                    state["failed"] = True  # start nothing new; earlier results still come
            submit_next()
    finally:
        for fut in running:
            fut.cancel()
        pool.shutdown(wait=False, cancel_futures=True)


def _drain(running, ready):
    """After an interrupt: cancel queued tasks, wait for the running ones, and
    yield every finished result in input order (a second interrupt stops the
    wait)."""
    for fut in list(running):
        if fut.cancel():
            running.pop(fut)
    if running:
        cf.wait(list(running))
    for fut, i in list(running.items()):
        del running[fut]
        ready[i] = fut
    for i in sorted(ready):
        fut = ready.pop(i)
        if not fut.cancelled() and fut.exception() is None:
            yield i, fut.result()


def _lost_errors():
    """What the client raises when the scheduler or the connection to it is gone."""
    from asyncio import CancelledError

    from distributed.client import ClosedClientError
    from distributed.comm.core import CommClosedError

    return (CancelledError, ClosedClientError, CommClosedError, OSError, TimeoutError)


@contextmanager
def _quiet_distributed_logs():
    """Silence distributed's own error logs (tracebacks of its reconnection
    attempts) while a client whose scheduler is gone is closed."""
    names = ["distributed"] + [n for n in logging.root.manager.loggerDict
                               if n.startswith("distributed.")]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def _map_distributed(func, items, args, scheduler, in_flight, bar, info):
    require("distributed", "a Dask cluster (--scheduler)")
    from distributed import wait
    from distributed.client import FuturesCancelledError

    lost_errors = _lost_errors()
    client, owned = get_client(scheduler)
    address = scheduler_address(scheduler, client)
    futures = {}
    lost = None
    try:
        try:
            wait_for_workers(client, address)
            scattered = [client.scatter(a, broadcast=True) if _worth_scattering(a) else a
                         for a in args]
        except lost_errors as exc:
            lost = SchedulerLostError(address, _reason(exc))
            raise lost from exc
        it = iter(enumerate(items))

        def submit_next():
            nxt = next(it, None)
            if nxt is None:
                return
            i, item = nxt
            try:
                fut = client.submit(func, item, *scattered, pure=False)
            except lost_errors as exc:
                raise SchedulerLostError(address, _reason(exc)) from exc
            futures[fut] = i

        try:
            for _ in range(in_flight):
                submit_next()
        except SchedulerLostError as exc:
            lost = exc
            raise
        while futures:
            try:
                done = _wait_some(wait, client, list(futures), address,
                                  (FuturesCancelledError,) + lost_errors)
                results = [(futures.pop(f), _result(f, address, lost_errors, client))
                           for f in sorted(done, key=futures.get)]
            except (SchedulerLostError, WorkersLostError) as exc:
                lost = exc
                raise
            for i, res in results:
                bar.update(1, info(res) if info else "")
                yield i, res
                try:
                    submit_next()
                except SchedulerLostError as exc:
                    lost = exc
                    raise
    finally:
        if lost is not None:
            with _quiet_distributed_logs():
                _close(client, futures, owned)
        else:
            _close(client, futures, owned)


def _wait_some(wait, client, pending, address, errors):
    """Futures of ``pending`` that are done (at least one); SchedulerLostError
    when the client is closed or its connection lost, WorkersLostError when the
    scheduler has had no worker for :data:`WORKER_TIMEOUT` seconds."""
    import time

    no_workers_since = None
    while True:
        if client.status in ("closing", "closed"):
            raise SchedulerLostError(address, f"the client is {client.status}")
        try:
            done, _ = wait(pending, timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = None
        except errors as exc:
            raise SchedulerLostError(address, _reason(exc)) from exc
        if done:
            return done
        try:
            workers = _n_workers(client)
        except errors as exc:
            raise SchedulerLostError(address, _reason(exc)) from exc
        if workers:
            no_workers_since = None
        elif no_workers_since is None:
            no_workers_since = time.monotonic()
        elif time.monotonic() - no_workers_since > WORKER_TIMEOUT:
            raise WorkersLostError(address, WORKER_TIMEOUT)


def _result(fut, address, lost_errors, client=None):
    """The result of a finished future; the task's own exception is raised as
    it is, a future cancelled by the loss of the scheduler (or a result that
    can no longer be fetched) becomes SchedulerLostError.  A result whose
    worker was retired before it was fetched waits for the task to be run
    again: WorkersLostError when no worker is left for :data:`WORKER_TIMEOUT`
    seconds."""
    if fut.status == "error":
        exc = fut.exception()
        if type(exc).__name__ == "KilledWorker":
            raise FaceSegmentError(
                f"Dask workers died running a task ({exc}); finished outputs kept "
                "(check the workers' memory and logs, then run the command again)") from exc
        return fut.result()  # raises the task's exception
    if fut.status == "cancelled":
        raise SchedulerLostError(address, "its tasks were cancelled")
    return _fetch(fut, address, lost_errors, client)


def _fetch(fut, address, lost_errors, client):
    """``fut.result()``, polled so that losing every worker meanwhile is noticed."""
    import time

    start, no_workers_since = time.monotonic(), None
    while True:
        try:
            return fut.result(timeout=POLL_SECONDS)
        except TimeoutError:
            pass
        except lost_errors as exc:
            raise SchedulerLostError(address, _reason(exc)) from exc
        now = time.monotonic()
        try:
            workers = 1 if client is None else _n_workers(client)
        except lost_errors as exc:
            raise SchedulerLostError(address, _reason(exc)) from exc
        if workers:
            no_workers_since = None
        elif no_workers_since is None:
            no_workers_since = now
        elif now - no_workers_since > WORKER_TIMEOUT:
            raise WorkersLostError(address, WORKER_TIMEOUT)
        if now - start > FETCH_TIMEOUT and workers:
            raise SchedulerLostError(address, f"a finished task's result could not be "
                                     f"fetched in {FETCH_TIMEOUT:.0f} s")


def _reason(exc):
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if "scheduler-connection-lost" in str(exc) or "connection to the scheduler" in str(exc):
        return "connection lost"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _close(client, futures, owned):
    """Cancel what is still outstanding and close a client this module opened."""
    if futures and client.status == "running":
        try:
            client.cancel(list(futures), asynchronous=False)
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
    futures.clear()
    if owned:
        try:
            client.close(timeout=5)
        except Exception:  # noqa: BLE001 - the scheduler may already be gone
            pass


#: A task argument at least this big (pickled) is sent to every worker once.
SCATTER_BYTES = 1_000_000


def _worth_scattering(obj):
    """Whether a task argument goes to every worker once, before the tasks (a
    model, a big array: each worker then unpickles it once and every task of
    that worker reuses it), rather than with each task (plain values, small
    arrays and options).  Containers travel with the tasks: scattering a list
    would scatter its items one by one."""
    if obj is None or isinstance(obj, (str, bytes, int, float, bool, os.PathLike, list, tuple,
                                       dict, set, frozenset)):
        return False
    nbytes = getattr(obj, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes >= SCATTER_BYTES
    try:   # the object's size, measured once per map_tasks call
        return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)) >= SCATTER_BYTES
    except Exception:   # noqa: BLE001 - unpicklable here: let submit report it as it would
        return False
