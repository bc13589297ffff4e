"""A small progress line with rate and ETA (written to stderr)."""

import sys
import time

from .errors import raise_if_terminated


def _fmt_seconds(s):
    s = int(round(max(s, 0)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


class Progress:
    """Progress of ``total`` units of work: done/total, rate, elapsed and ETA.

    Parameters
    ----------
    total : int
        Number of units (images, trees, ...).
    desc : str
        Short label printed first.
    unit : str
        Name of one unit ("images", "trees").
    enabled : bool
        When False nothing is printed (the counters still work).
    stream : file, optional
        Defaults to ``sys.stderr``.
    min_interval : float
        Minimum seconds between redraws on a terminal.

    On a terminal the line is redrawn in place; otherwise (logs, CI) a line is
    printed at most every ``log_interval`` seconds and at the end.
    """

    def __init__(self, total, desc="", unit="items", enabled=True, stream=None,
                 min_interval=0.2, log_interval=10.0):
        self.total = int(total)
        self.desc = desc
        self.unit = unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.n = 0
        self.start = time.perf_counter()
        self._last = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._interval = min_interval if self._tty else log_interval
        self._closed = False
        self._t_first = None
        self._n_first = 0

    def line(self, info=""):
        """The progress text: done/total, elapsed, ETA and rate.

        Once some time has passed since the first unit finished, the rate is
        measured from then on, so the start-up costs of the first unit (JIT
        compilation, model loading) do not inflate the ETA.

        Parameters
        ----------
        info : str, default=""
            Appended after the counters.

        Returns
        -------
        str
            E.g. ``"train: 3/10 trees [00:12 elapsed, ETA 00:28, 0.25 trees/s] info"``;
            the ETA is ``?`` before the rate is known.
        """
        now = time.perf_counter()
        elapsed = now - self.start
        # The first unit often carries start-up costs (JIT compilation, model
        # loading): once enough time has passed since the first completion,
        # estimate the rate from it onwards so the ETA is not inflated by them
        # (units finishing together on parallel workers do not count as fast).
        since_first = now - self._t_first if self._t_first is not None else 0.0
        if self.n > self._n_first and since_first >= 0.2 * (self._t_first - self.start):
            rate = (self.n - self._n_first) / since_first
        else:
            rate = self.n / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.n) / rate if rate > 0 else float("nan")
        eta_s = _fmt_seconds(eta) if eta == eta else "?"
        text = (f"{self.desc}: {self.n}/{self.total} {self.unit} "
                f"[{_fmt_seconds(elapsed)} elapsed, ETA {eta_s}, {rate:.2f} {self.unit}/s]")
        return f"{text} {info}".rstrip()

    def update(self, n=1, info=""):
        """Count ``n`` more units done and redraw the line when due.

        The line is drawn when all units are done, when ``info`` is given, or after
        the redraw interval.

        Parameters
        ----------
        n : int, default=1
            Units just finished.
        info : str, default=""
            Appended to the line (e.g. the unit's result).

        Raises
        ------
        Terminated
            When a SIGTERM arrived in a destructor and its exception was
            swallowed (:func:`facesegment.errors.raise_if_terminated`).
        """
        raise_if_terminated()
        self.n += n
        if self._t_first is None:
            self._t_first, self._n_first = time.perf_counter(), self.n
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.n >= self.total or now - self._last >= self._interval or info:
            self._last = now
            self._write(self.line(info))

    def show(self, info=""):
        """Draw the line now (e.g. while one long unit is still running).

        Parameters
        ----------
        info : str, default=""
            Appended to the line.
        """
        if self.enabled:
            self._write(self.line(info))

    def _write(self, text):
        if self._tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self):
        if self.enabled and not self._closed and self._tty:
            self.stream.write("\n")
            self.stream.flush()
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
