"""Command line of the main job: ``python -m pipelines.run [options] STAGE``.

The stages form a graph (one node per stage, per forest kind for train and
evaluate)::

    data -> extract -> select -> train:{axis,two-probe,co2,co2-best} -> evaluate:{...}
         -> figures -> report

Asking for a stage runs what it depends on first; stages whose stamp is up to
date are skipped.  The shared stage runner (:mod:`pipelines.runner`) runs them
one at a time, so that each stage has the machine to itself (the training and
inference times it reports are then honest); the work inside a stage is
parallel (threads, or a Dask ``distributed`` cluster with ``--scheduler``).
"""

import argparse
import os
import sys
import time

from facesegment.errors import DataError

from . import STAGES
from .common import CASCADE_PREFIX
from .config import load_config, section_hash
from .runner import Stage, StageLog, guarded, run_stages
from .stages import Context, build_stages
from .stamps import is_up_to_date, read_stamp, stage_key, write_stamp

TARGETS = ("all",) + STAGES + ("label",)


def get_parser():
    p = argparse.ArgumentParser(
        prog="python -m pipelines.run",
        description="The main job of facesegment: data -> extract -> select -> train -> "
                    "evaluate -> figures -> report, driven by one TOML config "
                    "(docs/pipeline.md). Up-to-date stages are skipped.")
    p.add_argument("stage", type=_target, metavar="STAGE",
                   help="stage to bring up to date, with everything it depends on: "
                        + ", ".join(TARGETS) + " ('label' = 'data': download and label LFW "
                        "when no DATA is given), or one kind's stage such as "
                        "evaluate:two-probe")
    p.add_argument("--config", default="pipelines/config.toml",
                   help="the TOML configuration (default: %(default)s)")
    p.add_argument("--preset", default=None,
                   help="preset of the config to apply (default: the file's run.preset)")
    p.add_argument("--data", default=None,
                   help="labelled folder to use (overrides [data] path), e.g. "
                        "../shared/data/faces300w")
    p.add_argument("--labels", default=None,
                   help="parallel tree of NAME_label.png files (overrides [data] labels)")
    p.add_argument("--name", default=None,
                   help="dataset name used in the run folder name (overrides [data] name)")
    p.add_argument("--force", action="append", default=[], metavar="STAGE",
                   help="redo this stage even if up to date (repeatable; 'all' redoes "
                        "everything; 'train' / 'evaluate' / 'time' cover the four kinds)")
    p.add_argument("--full-grid", action="store_true",
                   help="model selection over the full grids ([select] full_* keys)")
    p.add_argument("--workers", type=_n_workers, default=None,
                   help="local threads (overrides [run] workers; 0 = all cores)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address for the work inside stages "
                        "(overrides [run] scheduler)")
    p.add_argument("--dry-run", action="store_true",
                   help="print which stages would run or be skipped, and stop")
    return p


def _target(text):
    """argparse type of STAGE: one of TARGETS, or ``STAGE:KIND`` (one kind's stage)."""
    if text in TARGETS or (text.split(":")[0] in STAGES and ":" in text):
        return text
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r} (choose from {', '.join(TARGETS)}, or STAGE:KIND "
        "such as train:co2)")


def _n_workers(text):
    """argparse type of ``--workers``: an integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of threads: give an integer >= 0 (0 = all cores)")
    return n


def _expand(names, stages):
    out = set()
    for n in names:
        if n == "all":
            out |= set(stages)
        elif n == "label":
            out.add("data")
        else:
            out |= {s for s in stages if s == n or s.startswith(n + ":")}
    return out


def runner_stage(ctx, stage, dry_run=False):
    """``stage`` of :func:`build_stages` as a :class:`pipelines.runner.Stage`: fresh
    when its stamp holds the key of its config and inputs; the stamp is written
    after it ran."""
    stamp = ctx.reports / "stamps" / f"{stage.name.replace(':', '-')}.json"
    keys = {}

    def key():
        return stage_key(section_hash({"c": stage.config(ctx)}, "c"), stage.inputs(ctx))

    def fresh():
        try:
            keys["key"] = key()
        except DataError:
            if not dry_run:
                raise
            return None  # an earlier stage has not written what this one reads yet
        return read_stamp(stamp) if is_up_to_date(stamp, keys["key"]) else None

    def run():
        if "key" not in keys:  # forced: fresh() was not asked
            keys["key"] = key()
        keys["load"], keys["cpu"] = os.getloadavg()[0], time.process_time()
        return stage.run(ctx)

    def record(outputs, secs):
        # the key from before the run: inputs written by this very stage do not count;
        # CPU seconds of the process (all threads) and the 1-min load at start and end
        write_stamp(stamp, stage.name, keys["key"], outputs, secs, extra={
            "cpu_seconds": round(time.process_time() - keys["cpu"], 1),
            "load_average": [round(keys["load"], 2), round(os.getloadavg()[0], 2)]})

    return Stage(stage.name, run, tuple(stage.deps), fresh, record)


def execute(ctx, stage, force=False, dry_run=False):
    """Run one stage unless its stamp is up to date; return its status."""
    return _run_all(ctx, [runner_stage(ctx, stage, dry_run)], [stage.name] if force else [],
                    dry_run)[stage.name].status


def run_target(ctx, target, force=(), dry_run=False):
    """Bring ``target`` and everything it depends on up to date; ``{name: Outcome}``."""
    stages = build_stages(ctx.cfg)
    wanted = _expand([target], stages) if target != "all" else set(stages)
    need, todo = set(), list(wanted)
    while todo:
        name = todo.pop()
        if name not in need:
            need.add(name)
            todo += list(stages[name].deps)
    return _run_all(ctx, [runner_stage(ctx, st, dry_run) for name, st in stages.items()
                          if name in need], _expand(force, stages), dry_run)


def _run_all(ctx, stages, forced, dry_run):
    from facesegment.atomic import overwriting

    # a stage's outputs are the pipeline's own (its stamps record them): a rerun
    # replaces them even when they were changed by hand
    with overwriting():
        outcomes = run_stages(stages, StageLog(ctx.log), force=forced, dry_run=dry_run)
    ctx.cache.setdefault("status", {}).update({k: o.status for k, o in outcomes.items()})
    return outcomes


def main(argv=None, log=None):
    parser = get_parser()
    args = parser.parse_args(argv)
    names = build_stages()
    for n in args.force:
        if not _expand([n], names) and not n.split(":")[-1].startswith(CASCADE_PREFIX):
            parser.error(f"--force {n}: no such stage; use one of all, "
                         + ", ".join(sorted({s.split(':')[0] for s in names}))
                         + " or a single stage such as train:co2")
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return guarded("pipeline", lambda: _run(args, log))


def _run(args, log):
    cfg = load_config(args.config, args.preset, data=args.data, labels=args.labels,
                      name=args.name)
    if args.workers is not None:
        cfg["run"]["workers"] = args.workers
    if args.scheduler is not None:
        cfg["run"]["scheduler"] = args.scheduler
    ctx = Context(cfg, full_grid=args.full_grid, log=log)
    log(f"pipeline: run {ctx.run} (preset {cfg['_preset']}), target {args.stage}")
    if args.stage != "all" and not _expand([args.stage], build_stages(ctx.cfg)):
        raise DataError(args.config, f"has no stage {args.stage!r}",
                        "name a kind or cascade of the config, e.g. evaluate:two-probe")
    t0 = time.perf_counter()
    status = {k: o.status for k, o in run_target(ctx, args.stage, args.force,
                                                  args.dry_run).items()}
    ran = [k for k, v in status.items() if v != "skipped"]
    log(f"pipeline: {args.stage} finished in {time.perf_counter() - t0:.1f} s "
        f"({len(ran)} stage(s) {'to run' if args.dry_run else 'ran'}: "
        f"{', '.join(ran) or 'none'}; {len(status) - len(ran)} up to date)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from facesegment.atomic import overwriting

    with overwriting():   # the repository\'s own reports and models are regenerated
        sys.exit(main())
