"""The one stage runner of the harnesses: the face pipeline (:mod:`pipelines.run`),
the UCI benchmarks (:mod:`pipelines.uci`) and the non-greedy study
(:mod:`pipelines.nongreedy`).

A harness describes its work as a list of :class:`Stage` objects and hands it
to :func:`run_stages`, which

* orders the stages so that each runs after the stages it depends on (``deps``;
  otherwise in the given order),
* skips a stage whose ``fresh()`` finds an up-to-date result (a stamp, or a
  result file holding the key the stage would compute: :func:`keyed_result`),
  unless it is forced; in a dry run it only says what would run,
* runs the others, times them and calls their ``record(result, seconds)``
  (stamps, timings files),
* reports every stage through one progress object (:class:`StageLog`,
  :class:`Counter` or :class:`Bar`: done/total, elapsed, ETA),
* on an exception of ``keep_going``, calls ``on_error``, marks the stages of the
  same ``group`` (a dataset) and those depending on the failed one as not run,
  and goes on with the others; any other exception stops the run.

Stages write their outputs atomically themselves (:mod:`facesegment.atomic`).
:func:`guarded` runs a harness's main under SIGTERM handling and turns its
interruptions into one line and the documented exit status: 2 for a readable
error (or a failed stage, :func:`exit_code`), 130 for Ctrl-C, 143 for SIGTERM.
"""

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from facesegment.cli import sigterm_raises
from facesegment.errors import FaceSegmentError, Terminated
from facesegment.progress import Progress

#: Exit status of a run whose stages failed (or of a readable error).
FAILED = 2


@dataclass
class Stage:
    """One unit of work: ``run()`` returns its result (or the paths it wrote)."""

    name: str
    run: Callable[[], Any]
    deps: tuple = ()
    fresh: Callable[[], Any] | None = None   # an up-to-date result, or None
    record: Callable[[Any, float], None] | None = None  # after run(): stamps, timings
    group: str = ""                          # a failure skips the rest of its group


@dataclass
class Outcome:
    """What became of a stage: ran, skipped, would run, failed or not run."""

    name: str
    status: str
    result: Any = None
    seconds: float = 0.0
    error: BaseException | None = field(default=None, repr=False)


def ordered(stages):
    """``stages`` with every stage after its dependencies (otherwise in order)."""
    by_name = {s.name: s for s in stages}
    out, state = [], {}

    def visit(s):
        if state.get(s.name) == "done":
            return
        if state.get(s.name) == "busy":
            raise ValueError(f"stage {s.name!r} depends on itself")
        state[s.name] = "busy"
        for d in s.deps:
            if d not in by_name:
                raise ValueError(f"stage {s.name!r} depends on {d!r}, which is not a stage")
            visit(by_name[d])
        state[s.name] = "done"
        out.append(s)

    for s in stages:
        visit(s)
    return out


def keyed_result(path, key):
    """The JSON object in ``path`` when its ``"key"`` is ``key``, else None."""
    try:
        with open(path) as fh:
            old = json.load(fh)
    except (OSError, ValueError):
        return None
    return old if isinstance(old, dict) and old.get("key") == key else None


def run_stages(stages, progress=None, force=(), dry_run=False, keep_going=(),
               on_error=None):
    """Run ``stages`` (see the module docstring); return ``{name: Outcome}`` in order.

    ``force``: True (every stage), False, or names of stages to redo even if fresh.
    """
    force = (lambda name: True) if force is True else set(force or ()).__contains__
    progress = progress or Quiet()
    outcomes = {}
    broken = set()  # groups with a failed stage
    try:
        _loop(ordered(stages), outcomes, broken, progress, force, dry_run, keep_going,
              on_error)
    finally:
        progress.close()
    return outcomes


def _loop(stages, outcomes, broken, progress, force, dry_run, keep_going, on_error):
    for st in stages:
        bad_dep = any(outcomes[d].status in ("failed", "not run") for d in st.deps)
        if bad_dep or (st.group and st.group in broken):
            outcomes[st.name] = Outcome(st.name, "not run")
            continue
        try:
            outcomes[st.name] = oc = _one(st, force(st.name), dry_run,
                                          any(outcomes[d].status == "would run"
                                              for d in st.deps), progress)
        except keep_going as exc:
            outcomes[st.name] = oc = Outcome(st.name, "failed", error=exc)
            if st.group:
                broken.add(st.group)
            if on_error:
                on_error(st, exc)
        progress.finish(st, oc)


def _one(st, forced, dry_run, after_pending, progress):
    if not forced and not after_pending and st.fresh is not None:
        old = st.fresh()
        if old is not None:
            return Outcome(st.name, "skipped", old)
    if dry_run:
        return Outcome(st.name, "would run")
    progress.start(st)
    t0 = time.perf_counter()
    result = st.run()
    secs = time.perf_counter() - t0
    if st.record is not None:
        st.record(result, secs)
    return Outcome(st.name, "ran", result, secs)


def exit_code(outcomes):
    """0, or :data:`FAILED` when a stage failed."""
    return FAILED if any(o.status == "failed" for o in outcomes.values()) else 0


def guarded(prog, fn, what="stages"):
    """``fn()`` under SIGTERM handling; readable errors and interruptions become
    one line on stderr and exit status 2, 130 (Ctrl-C) or 143 (SIGTERM)."""
    with sigterm_raises():  # SIGTERM (a job scheduler) unwinds like Ctrl-C
        try:
            return fn()
        except FaceSegmentError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
            return FAILED
        except Terminated:
            print(f"{prog}: terminated (SIGTERM); finished {what} were kept", file=sys.stderr)
            return 143
        except KeyboardInterrupt:
            print(f"{prog}: interrupted; finished {what} were kept", file=sys.stderr)
            return 130


# ------------------------------------------------------------------ progress

class Quiet:
    """Progress that says nothing (the base of the others)."""

    def start(self, stage):
        pass

    def finish(self, stage, outcome):
        pass

    def close(self):
        pass


def _took(result):
    if isinstance(result, dict) and "seconds" in result and "finished" in result:
        return f" (took {result['seconds']:.1f} s, finished {result['finished']})"
    return ""


class StageLog(Quiet):
    """One line when a stage starts and one when it ends: ``[NAME] running``,
    ``[NAME] done in 1.2 s``, ``[NAME] up to date, skipped (took ...)``,
    ``[NAME] would run``."""

    def __init__(self, log):
        self.log = log

    def start(self, stage):
        self.log(f"[{stage.name}] running")

    def finish(self, stage, oc):
        if oc.status == "ran":
            self.log(f"[{stage.name}] done in {oc.seconds:.1f} s")
        elif oc.status == "skipped":
            self.log(f"[{stage.name}] up to date, skipped{_took(oc.result)}")
        elif oc.status == "would run":
            self.log(f"[{stage.name}] would run")


def _fmt_s(s):
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Counter(Quiet):
    """``[PREFIX] done/total NAME: SUMMARY (1.2 s); elapsed 0m03s, ETA 1m10s`` per
    stage, ``...: done before`` for a fresh one; the ETA is the mean time of the
    stages run so far times those left of ``todo`` (the stages expected to run)."""

    def __init__(self, log, prefix, total, todo=None, summary=str):
        self.log, self.prefix, self.total, self.summary = log, prefix, total, summary
        self.todo = total if todo is None else todo
        self.done = self.ran = 0
        self.run_s = 0.0
        self.t0 = time.perf_counter()

    def finish(self, stage, oc):
        if oc.status not in ("ran", "skipped"):
            return
        self.done += 1
        head = f"[{self.prefix}] {self.done}/{self.total} {stage.name}"
        if oc.status == "skipped":
            self.log(f"{head}: done before")
            return
        self.ran += 1
        self.run_s += oc.seconds
        eta = self.run_s / self.ran * max(self.todo - self.ran, 0)
        self.log(f"{head}: {self.summary(oc.result)} ({oc.seconds:.1f} s); "
                 f"elapsed {_fmt_s(time.perf_counter() - self.t0)}, ETA {_fmt_s(eta)}")


class Bar(Quiet):
    """A :class:`facesegment.progress.Progress` line per finished or fresh stage
    (done/total, rate, elapsed, ETA), ending with ``summary(result)``."""

    def __init__(self, total, desc, summary=str, unit="stages"):
        self.bar = Progress(total, desc=desc, unit=unit)
        self.summary = summary

    def finish(self, stage, oc):
        if oc.status in ("ran", "skipped"):
            self.bar.update(1, self.summary(oc.result))

    def close(self):
        self.bar.close()
