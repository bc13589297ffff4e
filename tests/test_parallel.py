"""map_tasks: local threads and a distributed cluster; interrupts and a lost scheduler."""

import logging
import os
import signal
import threading
import time

import pytest

from facesegment.errors import FaceSegmentError, SchedulerLostError
from facesegment.parallel import map_tasks, numba_share


def _square(x, delay=0.0):
    time.sleep(delay)
    return x * x


def _fail_on_three(x):
    if x == 3:
        raise ValueError("three")
    return x


def test_local_threads_return_every_result():
    out = dict(map_tasks(_square, range(20), n_workers=3, progress=False))
    assert out == {i: i * i for i in range(20)}


def _numba_threads(_):
    import numba

    return numba.get_num_threads()


@pytest.mark.parametrize("n_workers", [1, 2, 3])
def test_local_workers_share_the_numba_threads(n_workers):
    """Each local worker runs parallel kernels on its share of Numba's threads
    (no more threads than cores when every worker calls one); the caller's
    setting is left alone."""
    import numba

    n_all = numba.config.NUMBA_NUM_THREADS
    before = numba.get_num_threads()
    got = {n for _, n in map_tasks(_numba_threads, range(6), n_workers=n_workers,
                                   progress=False)}
    assert got == {numba_share(n_workers)} == {max(1, n_all // n_workers)}
    assert numba.get_num_threads() == before


def test_local_results_in_input_order_while_threads_keep_working():
    """A slow first item: results still come in input order, and the other
    thread works through the rest meanwhile (no batch barrier)."""
    t0 = time.perf_counter()
    got = [(i, time.perf_counter() - t0) for i, _ in map_tasks(
        _slow_first, range(12), n_workers=2, batch=12, progress=False)]
    assert [i for i, _ in got] == list(range(12))
    assert got[-1][1] < 0.5 + 0.3  # the 11 quick ones ran while the first slept


def _slow_first(x):
    time.sleep(0.5 if x == 0 else 0.02)
    return x


def test_task_error_propagates_after_earlier_results():
    got = []
    with pytest.raises(ValueError, match="three"):
        for i, res in map_tasks(_fail_on_three, range(6), n_workers=1, batch=1, progress=False):
            got.append(res)
    assert got == [0, 1, 2]


def test_interrupt_lets_running_tasks_finish_and_skips_queued():
    """Ctrl-C while waiting: the running task's result is still yielded, queued
    tasks never start, then KeyboardInterrupt is raised."""
    started = []

    def task(x):
        started.append(x)
        if x == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C
            # long enough for the main thread to see the interrupt and cancel the
            # queued tasks even on a loaded machine (0.3 s once flaked under load 6)
            time.sleep(2.0)
        return x

    got = []
    with pytest.raises(KeyboardInterrupt):
        for i, res in map_tasks(task, range(10), n_workers=1, batch=10, progress=False):
            got.append(res)
    time.sleep(0.3)
    assert got == [0, 1]
    assert started == [0, 1]


# ------------------------------------------------------------ distributed

@pytest.fixture()
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0", silence_logs=logging.ERROR) as c:
        yield c


def test_cluster_results(cluster):
    out = dict(map_tasks(_square, range(10), scheduler=cluster.scheduler_address,
                         progress=False))
    assert out == {i: i * i for i in range(10)}


def test_lost_scheduler_is_one_error_and_earlier_results_stand(cluster, capfd):
    """The scheduler closed after the first results: SchedulerLostError naming
    the address (not FutureCancelledError as a result, not a traceback)."""
    address = cluster.scheduler_address
    got = []
    t0 = time.perf_counter()
    with pytest.raises(SchedulerLostError) as exc:
        for i, res in map_tasks(_square, range(40), args=(0.2,), scheduler=address,
                                batch=2, progress=False):
            got.append(res)
            assert isinstance(res, int)
            if len(got) == 1:
                cluster.close()
    assert time.perf_counter() - t0 < 60
    msg = str(exc.value)
    assert f"lost the Dask scheduler at {address}" in msg and "finished outputs kept" in msg
    assert isinstance(exc.value, FaceSegmentError)
    assert 1 <= len(got) < 40
    assert "Traceback" not in capfd.readouterr().err


def test_closed_client_is_a_lost_scheduler(cluster):
    from distributed import Client

    client = Client(cluster)
    got = []
    with pytest.raises(SchedulerLostError, match="lost the Dask scheduler"):
        for i, res in map_tasks(_square, range(20), args=(0.1,), scheduler=client,
                                batch=1, progress=False):
            got.append(res)
            if len(got) == 1:
                threading.Thread(target=client.close).start()
    assert got


def test_task_error_on_cluster_is_the_task_error(cluster):
    with pytest.raises(ValueError, match="three"):
        list(map_tasks(_fail_on_three, range(6), scheduler=cluster.scheduler_address,
                       progress=False))


class _Heavy:
    """A model-like object: no ``nbytes``, about 2 MB pickled."""

    def __init__(self):
        self.blob = bytes(2_000_000)


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("no")


def test_models_and_big_arrays_are_sent_once_small_values_with_each_task():
    import numpy as np

    from facesegment.parallel import _worth_scattering

    assert _worth_scattering(_Heavy())                       # a model: once per worker
    assert _worth_scattering(np.zeros(2_000_000, np.uint8))
    assert not _worth_scattering(np.zeros(10, np.uint8))
    for small in (None, "x", 3, 0.5, True, (1, 2), [_Heavy()], {"a": 1}, _Unpicklable()):
        assert not _worth_scattering(small), small           # lists: never split


def test_a_big_argument_reaches_every_cluster_task(cluster):
    heavy = _Heavy()
    got = dict(map_tasks(_blob_size, range(4), args=(heavy, 7), scheduler=cluster,
                         progress=False))
    assert got == {i: (i, 2_000_000, 7) for i in range(4)}


def _blob_size(i, heavy, k):
    return i, len(heavy.blob), k
