"""Errors that the command line reports as one readable line."""

import threading


class FaceSegmentError(Exception):
    """Base class for problems with the user's input or environment.

    The CLI prints ``facesegment: error: <message>`` and exits non-zero.  The
    message names the file (or parameter), what is wrong, and what to do.
    """


class DataError(FaceSegmentError, ValueError):
    """An input file (image, label map, landmarks, windows file, model) is bad."""

    def __init__(self, path, problem, fix=None):
        self.path = str(path) if path is not None else None
        self.problem = problem
        self.fix = fix
        where = f"{self.path}: " if self.path else ""
        tail = f" ({fix})" if fix else ""
        super().__init__(f"{where}{problem}{tail}")


class DownloadError(FaceSegmentError, OSError):
    """A download failed, could not start (offline), or had the wrong checksum."""


class SchedulerLostError(FaceSegmentError):
    """The Dask ``distributed`` scheduler (or the client's connection to it) went away
    while a command was running; the outputs finished before it are kept."""

    def __init__(self, address, reason=None):
        self.address = address
        self.reason = reason
        why = f" ({reason})" if reason else ""
        super().__init__(f"lost the Dask scheduler at {address}{why}; finished outputs kept "
                         "(restart the scheduler and its workers, or omit --scheduler to use "
                         "local threads, and run the command again)")


class WorkersLostError(FaceSegmentError):
    """Every worker of the Dask scheduler went away while a command was running
    (the scheduler itself still answers); the outputs finished before are kept."""

    def __init__(self, address, seconds):
        self.address = address
        super().__init__(f"lost every Dask worker of the scheduler at {address} (none for "
                         f"{seconds:g} s; the scheduler still answers); finished outputs kept "
                         f"(start workers with `dask worker {address}`, or omit --scheduler "
                         "to use local threads, and run the command again)")


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process gets SIGTERM (e.g. from a job
    scheduler), so it unwinds exactly like Ctrl-C: finished outputs kept,
    partial ones removed."""


#: Set when a :class:`Terminated` raised by the SIGTERM handler was swallowed: the
#: signal arrived while a destructor or a weakref callback ran, where Python can
#: only print an exception (``sys.unraisablehook``), and the run would go on.
_SWALLOWED = threading.Event()


def terminated_was_swallowed():
    """Record that a :class:`Terminated` was raised where Python could not
    propagate it (the command line's ``sys.unraisablehook`` calls this); the next
    :func:`raise_if_terminated` in the main thread raises it again."""
    _SWALLOWED.set()


def forget_swallowed_terminated():
    """Drop a swallowed :class:`Terminated` that no progress update raised (the
    command ended first), so a later command of the same process does not get it."""
    _SWALLOWED.clear()


def raise_if_terminated():
    """Raise :class:`Terminated` once if a SIGTERM's exception was swallowed
    (:func:`terminated_was_swallowed`); called by every progress update, so a
    long loop stops at its next unit of work.  Only in the main thread.

    Raises
    ------
    Terminated
        When a swallowed SIGTERM is pending (it is then cleared).
    """
    if _SWALLOWED.is_set() and threading.current_thread() is threading.main_thread():
        _SWALLOWED.clear()
        raise Terminated()
