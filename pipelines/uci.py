"""The CO2 paper's UCI benchmarks (Table I, Figure 2): ``python -m pipelines.uci``.

For every dataset folder under ``--root`` (``NAME/train.npz`` + ``NAME/test.npz``;
default ``../shared/data/uci``) and every kind of ``[run] kinds`` in
``pipelines/uci.toml`` (docs/uci.md), three stages:

* ``select``: hold out a stratified, seeded share of the training set
  (``validation``), fit a forest of ``select_trees`` trees for every setting
  of the kind's grid (the scaling, [0, 1] or zero mean / unit variance,
  included) and keep the one with the lowest validation error (the first in
  grid order on ties).  Parameters named in ``inherit`` come from the setting
  chosen for an earlier kind (CO2's q from the random forest's, as the paper).
* ``test``: fit one forest of ``trees`` trees with the chosen setting on the
  whole training set (scaler fitted on it) and record its test error with its
  first k trees for every k of ``curve`` and ``columns`` (the 10-tree forest is
  the first 10 trees of the 30-tree forest).
* ``big`` (only with ``--big-budget MINUTES``): the ``big_trees``-tree forest,
  grown ``big_chunk`` trees at a time, its first chunk being the test forest;
  run for the (dataset, kind) pairs whose estimated time fits in the budget,
  cheapest first (which ones ran is in timings.json and results.md).

The stages run on the shared stage runner (:mod:`pipelines.runner`), one
progress line per stage (done/total, elapsed, ETA).  Each stage writes
``OUT/NAME/<stage>-<kind>.json`` atomically, with a key
hashed from its settings, the code's layout version and the sha256 of the two
npz files; a rerun skips a stage whose file has the same key.  These files
hold no measured time, so two runs write the same bytes; the times go to
``OUT/timings.json``.  Then ``OUT/results.md``, ``OUT/timings.md``,
``OUT/figures/NAME.png`` and the results section of docs/uci.md are rendered
from the files (:mod:`pipelines.uci_report`).

A broken dataset folder is reported as one error line naming the file (exit
status 2 at the end) while the other datasets run.
"""

import argparse
import sys
import time
from pathlib import Path

from facesegment.atomic import write_json_atomic
from facesegment.errors import DataError, FaceSegmentError

from . import uci_report
from .runner import Bar, Stage, guarded, run_stages
from .uci_config import load_config
from .uci_data import check_dataset, find_datasets, folder_label, load_dataset
from .uci_stages import DatasetRun, Timings, key_of, kinds_to_run, summary

DEFAULT_ROOT = "../shared/data/uci"


# ------------------------------------------------------------------ driver

def get_parser():
    p = argparse.ArgumentParser(
        prog="python -m pipelines.uci",
        description="The CO2 paper's UCI benchmarks (Table I, Figure 2): model selection on a "
                    "validation split, then test error at 10 and 30 trees (1000 within "
                    "--big-budget) for every forest kind and scikit-learn's forests. "
                    "Finished stages are skipped (docs/uci.md).")
    p.add_argument("--root", default=DEFAULT_ROOT,
                   help="folder of datasets NAME/train.npz + NAME/test.npz (default: %(default)s)")
    p.add_argument("--out", default=None,
                   help="output folder (default: reports/uci, reports/uci/quick with --quick)")
    p.add_argument("--config", default="pipelines/uci.toml",
                   help="grids and defaults (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="the [quick] settings of the config: small grids and forests "
                        "(tests, smoke runs)")
    p.add_argument("--datasets", nargs="+", default=None, metavar="NAME",
                   help="only these dataset folders (default: every one under --root)")
    p.add_argument("--kinds", nargs="+", default=None, metavar="KIND",
                   help="only these kinds (the kinds they inherit settings from are selected too)")
    p.add_argument("--big-budget", type=float, default=0.0, metavar="MINUTES",
                   help="grow the big_trees-tree forests (1000) whose estimated time fits in "
                        "MINUTES, cheapest first (default 0: none)")
    p.add_argument("--workers", type=_positive, default=None,
                   help="threads per forest (overrides [run] workers)")
    p.add_argument("--force", action="store_true", help="redo the stages even if up to date")
    p.add_argument("--docs", default=None,
                   help="page whose results section is rewritten (default: docs/uci.md, "
                        "none with --quick or --out)")
    p.add_argument("--no-docs", action="store_true", help="do not touch the docs page")
    return p


def _positive(text):
    """argparse type of ``--workers``: an integer >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of threads >= 1")
    return int(text)


def _error(msg):
    print(f"uci: error: {msg}", file=sys.stderr, flush=True)


def main(argv=None, log=None):
    args = get_parser().parse_args(argv)
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return guarded("uci", lambda: _main(args, log))


#: Failures of one dataset reported as one line while the others go on.
DATASET_ERRORS = (DataError, MemoryError, ValueError, ArithmeticError)


def _dataset_error(root, name, runner, exc):
    if isinstance(exc, DataError):
        _error(exc)
    elif isinstance(exc, MemoryError):
        _error(f"{root / name}: out of memory in {getattr(runner, 'current', 'loading')} "
               "(set [large] select_max_rows, or leave it out with --datasets)")
    else:
        _error(f"{root / name}: {getattr(runner, 'current', 'loading')} failed: "
               f"{type(exc).__name__}: {exc}")


class Datasets:
    """The :class:`DatasetRun` of one dataset at a time, loaded when a stage of it
    first needs it (the previous dataset's arrays are let go)."""

    def __init__(self, root, cfg, out, workers, timings, log):
        self.root, self.make = root, (lambda ds: DatasetRun(ds, cfg, out, workers, timings, log))
        self.name = self.loaded = None

    def __call__(self, name):
        if name != self.name:
            self.name, self.loaded = name, None
            self.loaded = self.make(load_dataset(self.root / name))
        return self.loaded

    def on_error(self, stage, exc):
        """A failed stage: one error line (the runner skips the dataset's other stages)."""
        _dataset_error(self.root, stage.group, self.loaded if self.name == stage.group
                       else None, exc)


def dataset_stages(names, sel, tst, get, tables, on_test=None):
    """The select and test stages of every dataset, in order (a select stage after
    those of the kinds it inherits from, a test stage after its select);
    ``on_test(result)`` is called with every test result, fresh or new."""
    then = (lambda res: _then(res, on_test)) if on_test else (lambda res: res)
    stages = []
    for name in names:
        for kind in sel:
            deps = tuple(f"{name} {src} select"
                         for src in tables.get(kind, {}).get("inherit", {}).values())
            stages.append(Stage(f"{name} {kind} select", lambda n=name, k=kind: get(n).select(k),
                                deps, lambda n=name, k=kind: get(n).select_fresh(k), group=name))
        for kind in tst:
            stages.append(Stage(f"{name} {kind} test",
                                lambda n=name, k=kind: then(get(n).test(k)),
                                (f"{name} {kind} select",),
                                lambda n=name, k=kind: then(get(n).test_fresh(k)), group=name))
    return stages


def _datasets(args, cfg):
    """``(root, names that pass the fast check, number that failed it)``."""
    root = Path(args.root)
    names = find_datasets(root)
    if args.datasets:
        missing = [d for d in args.datasets if d not in names]
        if missing:
            raise DataError(root / missing[0], "no such dataset folder (with train.npz and "
                            f"test.npz); datasets here: {', '.join(names) or 'none'}")
        names = [d for d in names if d in args.datasets]
    bad = [k for k in args.kinds or () if k not in cfg["run"]["kinds"]]
    if bad:
        raise FaceSegmentError(f"--kinds {bad[0]}: not in [run] kinds of {args.config} "
                               f"({', '.join(cfg['run']['kinds'])})")
    ok, failed = [], 0
    for name in names:  # every folder checked first: a broken one is reported at once
        try:
            check_dataset(root / name)
            ok.append(name)
        except DataError as exc:
            _error(exc)
            failed += 1
    return root, ok, failed


def _main(args, log):
    cfg = load_config(args.config, quick=args.quick)
    out = Path(args.out or ("reports/uci/quick" if args.quick else "reports/uci"))
    docs = None if args.no_docs else (
        args.docs or (None if args.quick or args.out else "docs/uci.md"))
    root, ok, failed = _datasets(args, cfg)
    log(f"uci: {len(ok)} dataset(s) under {folder_label(root)}: {', '.join(ok) or 'none'}; "
        f"output in {out}{' (quick settings)' if args.quick else ''}")
    timings = Timings(out)
    sel, tst = kinds_to_run(cfg["run"]["kinds"], cfg["kinds"], args.kinds)
    t_start = time.perf_counter()
    get = Datasets(root, cfg, out, args.workers, timings, log)
    big_todo = []

    def estimate(res):  # a test result, fresh or new: the big forest's estimated time
        if args.big_budget > 0:
            big_todo.append((res["dataset"], res["kind"],
                             _big_estimate(get(res["dataset"]), res["kind"], timings,
                                           args.force)))

    stages = dataset_stages(ok, sel, tst, get, cfg["kinds"], estimate)
    outcomes = run_stages(stages, Bar(len(stages), "uci", summary), force=args.force,
                          keep_going=DATASET_ERRORS, on_error=get.on_error)
    failed += _failed_groups(stages, outcomes)
    if big_todo:
        failed += _run_big(big_todo, args.big_budget * 60, get, cfg, args, timings, log)
    timings.data["last_run_seconds"] = round(time.perf_counter() - t_start, 1)
    write_json_atomic(timings.path, timings.data, sort_keys=True)
    written = uci_report.write_reports(out, docs=docs)
    log(f"uci: wrote {', '.join(map(str, written))}")
    if failed:
        log(f"uci: {failed} dataset(s) failed (see the error lines above); the others finished")
        return 2
    return 0


def _then(res, fn):
    if res is not None:
        fn(res)
    return res


def _failed_groups(stages, outcomes):
    """How many datasets had a stage fail."""
    return len({st.group for st in stages if outcomes[st.name].status == "failed"})


def _big_estimate(runner, kind, timings, force=False):
    """``(estimated seconds or None, already done)`` of the big stage of ``kind``."""
    if not force and runner.big_fresh(kind) is not None:
        return 0.0, True
    t = timings.get(f"{runner.ds.name}/{kind}/test", key_of(runner.test_spec(kind)))
    if not t:
        return None, False
    return round((t["fit_s"] + t["eval_s"]) / t["trees"] * runner.run["big_trees"], 1), False


def _run_big(todo, budget_s, get, cfg, args, timings, log):
    """Grow the big forests whose estimates fit in ``budget_s``, cheapest first;
    return the number of datasets that failed."""
    plan, left = {}, budget_s
    old = timings.data.get("big_plan", {})
    timings.data["big_plan"] = {}
    for name, kind, (est, done) in sorted(todo, key=lambda t: (t[2][0] is None, t[2][0] or 0)):
        run = done or (est is not None and est <= left)
        if run:
            left -= 0 if done else est
            plan.setdefault(name, []).append(kind)
        if not done or f"{name}/{kind}" not in old:
            timings.data["big_plan"][f"{name}/{kind}"] = {"estimate_s": est, "ran": bool(run),
                                                           "budget_s": budget_s}
        else:
            timings.data["big_plan"][f"{name}/{kind}"] = old[f"{name}/{kind}"]
    log(f"uci: {cfg['run']['big_trees']}-tree forests within {budget_s / 60:g} min: "
        + (", ".join(f"{n} {k}" for n, ks in plan.items() for k in ks) or "none"))

    def chosen(name, kind):  # the settings of kind and those it inherits (select files)
        runner = get(name)
        for k in kinds_to_run(cfg["run"]["kinds"], cfg["kinds"], [kind])[0]:
            if k not in runner.chosen and runner.select_fresh(k) is None:
                runner.select(k)
        return runner

    stages = [Stage(f"{name} {kind} big", lambda n=name, k=kind: chosen(n, k).big(k),
                    fresh=lambda n=name, k=kind: chosen(n, k).big_fresh(k), group=name)
              for name, kinds in plan.items() for kind in kinds]
    outcomes = run_stages(stages, Bar(len(stages), "uci big", summary), force=args.force,
                          keep_going=DATASET_ERRORS, on_error=get.on_error)
    return _failed_groups(stages, outcomes)


if __name__ == "__main__":  # pragma: no cover
    from facesegment.atomic import overwriting

    with overwriting():   # the repository\'s own reports and models are regenerated
        sys.exit(main())
