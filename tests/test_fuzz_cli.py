"""Property-based fuzzing of every command with Hypothesis.

Generated option values (extremes, NaN, negative, huge, wrong types) and output
paths of every kind (new, a user's file, a FIFO, a symbolic link, a folder)
must end with exit status 0, 1 or 2, no traceback, within a per-case time
limit, and leave every file that was there before unchanged.  A fixed, seeded
number of examples keeps the run short (``derandomize=True``).
"""

import contextlib
import io
import shutil
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from facesegment.cli import main  # noqa: E402
from facesegment.commands import COMMANDS  # noqa: E402
from tests.sandbox import KINDS, changed, plant, snapshot  # noqa: E402

#: Seconds one generated command may take before it counts as a hang (generous:
#: the slowest case, an extraction, takes seconds on a quiet machine and more than
#: 20 s on a busy one; a hang never ends).
CASE_SECONDS = 90
#: Values for numeric options: extremes, NaN, negatives, huge, wrong types.
NUMBERS = ("0", "1", "2", "-1", "0.5", "nan", "inf", "-inf", "1e308", "1e-308", "1e9",
           "100000", "99999999999999999999", "abc", "", "3,000", "1_0", "0x10", "--")
SETTINGS = settings(max_examples=10, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Tiny inputs every command can use: a model, labelled faces, a photo."""
    from facesegment.data.imageio import write_png_atomic
    from facesegment.modelio.model import save_model
    from tests.dense.test_inference import random_model
    from tests.evaluation.test_metrics import _write_faces

    root = tmp_path_factory.mktemp("fuzz-world")
    model = random_model(4, kind="axis", n_trees=2, max_depth=2, kinds=("axis",))
    model.metrics["alpha"] = 0.5
    save_model(model, root / "model")
    _write_faces(root / "data" / "test", n=2, size=34)
    _write_faces(root / "data" / "train", n=2, size=34)
    write_png_atomic(root / "photos" / "face.png",
                     np.random.default_rng(0).integers(0, 256, (48, 48, 3), dtype=np.uint8))
    return root


def _options(pairs):
    """A strategy of argv tails: a subset of ``pairs`` (option, values) with values drawn."""
    return st.lists(st.sampled_from(pairs), unique=True, max_size=3).flatmap(
        lambda chosen: st.tuples(*[st.sampled_from(NUMBERS).map(lambda v, o=o: [o, v])
                                   for o in chosen]) if chosen else st.just(()))


def _pooled_oblique(tail):
    return [x for pair in tail for x in pair]


_num = list(NUMBERS)
#: Per command: (fixed argv before the output (world, out path), the numeric options).
COMMAND_SPECS = {
    "segment": (lambda w, o: ["segment", str(w / "photos"), o, "--model", str(w / "model"),
                              "-q", "--workers", "1"],
                ("--alpha", "--beta", "--sigma", "--detect-size", "--every", "--smooth")),
    "evaluate": (lambda w, o: ["evaluate", "--model", str(w / "model"), "--data",
                               str(w / "data"), "--out", o, "-q", "--workers", "1"],
                 ("--alpha", "--sigma", "--pixel-stride", "--limit", "--sweep-trees",
                  "--seed")),
    "figures": (lambda w, o: ["figures", "--model", str(w / "model"), "--data", str(w / "data"),
                              "--out", o, "-q", "--workers", "1", "--limit", "1"],
                ("--random-rows", "--depth-trees", "--pixel-stride", "--seed")),
    "data": (lambda w, o: ["data", "splits", str(w / "data"), "--out", o],
             ("--seed", "--validation", "--test-fraction")),
    "extract": (lambda w, o: ["extract", str(w / "data"), "--out", o, "--quiet",
                              "--workers", "1"],
                ("--windows", "--window", "--seed", "--validation")),
    "train": (lambda w, o: ["train", "--kind", "axis", "--windows", str(w / "missing.h5"),
                            "--out", o, "--quiet"],
              ("--trees", "--max-depth", "--sigmas", "--seed", "--calibrate-stride")),
    "label": (lambda w, o: ["label", str(w / "photos"), o, "--quiet"],
              ("--upsample", "--threshold", "--workers", "--detect-size")),
    "warmup": (lambda w, o: ["warmup", "--model", o, "-q"], ()),
    "models": (lambda w, o: ["models"], ()),
    "classes": (lambda w, o: ["classes", "--legend", o], ("--scale",)),
}


def test_every_command_is_fuzzed():
    assert set(COMMAND_SPECS) == set(COMMANDS)


class Hang(Exception):
    """A generated command ran past :data:`CASE_SECONDS`."""


@contextlib.contextmanager
def time_limit(seconds):
    def alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(world, argv_of, tail, kind, name):
    """Run one generated command in a fresh sandbox; return (status, stderr)."""
    box = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        out = box / name
        if kind != "new":
            plant(str(out), kind, str(box / "elsewhere"))
        before, world_before = snapshot(box), snapshot(world)
        err = io.StringIO()
        argv = argv_of(world, str(out)) + _pooled_oblique(tail)
        with time_limit(CASE_SECONDS), contextlib.redirect_stderr(err), \
                contextlib.redirect_stdout(io.StringIO()):
            try:
                status = main(argv)
            except SystemExit as exc:  # argparse: usage errors (2), --help (0)
                status = exc.code
        text = err.getvalue()
        assert status in (0, 1, 2), (argv, status, text)
        assert "Traceback" not in text, (argv, text)
        assert not changed(before, snapshot(box)), (argv, kind, text)
        assert not changed(world_before, snapshot(world)), (argv, text)
        return status, text
    finally:
        shutil.rmtree(box, ignore_errors=True)


_OUT_NAMES = {"data": "notes.json", "extract": "windows.h5", "warmup": "model-dir"}


@pytest.mark.parametrize("command", sorted(COMMAND_SPECS))
def test_fuzz_command(world, command):
    argv_of, numeric = COMMAND_SPECS[command]
    name = _OUT_NAMES.get(command, "out")

    @SETTINGS
    @given(tail=_options(numeric) if numeric else st.just(()),
           kind=st.sampled_from(("new",) + KINDS))
    def case(tail, kind):
        run_case(world, argv_of, tail, kind, name)

    case()
