"""facesegment/warmup.py and `facesegment warmup`: kernels compiled ahead of the
first segment, with progress."""

import io
import math
import time

import numpy as np
import pytest

from facesegment import warmup
from facesegment.cli import main
from facesegment.dense._packing import pack_fast
from facesegment.layout import DEFAULT_LAYOUT
from facesegment.modelio.model import save_model
from tests.dense.test_inference import random_model


def _steps(seconds):
    return [(f"step {i}", lambda: time.sleep(seconds)) for i in range(3)]


def test_warm_shows_done_total_and_eta():
    out = io.StringIO()
    done = warmup.warm(_steps(0.01), stream=out, desc="compiling kernels")
    assert [label for label, _ in done] == ["step 0", "step 1", "step 2"]
    text = out.getvalue()
    for n in (1, 2, 3):
        assert f"compiling kernels: {n}/3 steps" in text, text
    assert "ETA" in text and "(step 2:" in text


def test_warm_is_silent_when_quick_and_speaks_up_when_slow():
    """``quiet_seconds``: cached kernels load silently; a compile (a slow step)
    gets a progress line while it runs, not only after it."""
    out = io.StringIO()
    warmup.warm(_steps(0.0), stream=out, quiet_seconds=5.0)
    assert out.getvalue() == ""
    out = io.StringIO()
    warmup.warm([("slow", lambda: time.sleep(0.6))], stream=out, quiet_seconds=0.2)
    text = out.getvalue()
    assert "0/1 steps" in text and "(slow)" in text and "1/1 steps" in text, text


def test_warm_speaks_up_when_told_and_not_before():
    """``speak_up`` (prepare passes :func:`warmup.compiling`'s flag) shows the line
    at once, however long ``quiet_seconds``; unset, a slow step stays silent."""
    import threading

    flag = threading.Event()
    out = io.StringIO()
    warmup.warm([("slow", lambda: time.sleep(0.3))], stream=out, quiet_seconds=math.inf,
                speak_up=flag)
    assert out.getvalue() == ""
    out = io.StringIO()
    seen = []

    def step():
        flag.set()
        time.sleep(0.4)
        seen.append(out.getvalue())

    warmup.warm([("compiles", step)], stream=out, quiet_seconds=math.inf, speak_up=flag)
    assert "0/1 steps" in seen[0] and "(compiles)" in seen[0], seen
    assert "1/1 steps" in out.getvalue()


def test_compiling_is_set_by_a_compile_and_not_by_a_compiled_kernel():
    import numba

    add = numba.njit(lambda x: x + 1)   # not cached: compiles on its first call
    with warmup.compiling() as flag:
        assert not flag.is_set()
        assert add(1) == 2
        assert flag.is_set()
    with warmup.compiling() as flag:
        assert add(2) == 3
        assert not flag.is_set()


def test_default_steps_cover_every_kernel_family():
    labels = [label for label, _ in warmup.default_steps()]
    for word in ("axis-aligned", "two-probe", "CO2 forests (float32", "sparse", "int16", "int8"):
        assert any(word in label for label in labels), (word, labels)
    axis = warmup._tiny_model("axis", "axis", DEFAULT_LAYOUT)
    assert pack_fast(axis.arrays, 100, DEFAULT_LAYOUT) is not None
    pooled = warmup._tiny_model("co2-pooled", "oblique", warmup.WindowLayout(pool=3), np.int16)
    assert pooled.arrays.weights.dtype == np.int16 and pooled.layout.pool == 3


def test_warmup_command_prepares_a_model(tmp_path, capsys):
    model = warmup._tiny_model("axis", "axis", DEFAULT_LAYOUT)
    path = save_model(model, tmp_path / "m")
    assert main(["warmup", "--model", str(path), "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernels ready: 1 steps in ") and "source tag" in out


def test_warmup_command_refuses_a_missing_model(tmp_path, capsys):
    assert main(["warmup", "--model", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "nope") in err[0]


@pytest.mark.parametrize("step", range(7))
def test_each_default_step_runs(step):
    label, run = warmup.default_steps()[step]
    run()


def test_a_landmark_model_prepares_nothing_before_its_first_face(monkeypatch):
    """Its votes need no kernel; its fallback compiles only for a crop without a face."""
    from facesegment.models.landmark import LandmarkModel
    from facesegment.faces.votes import VoteSpec

    calls = []
    monkeypatch.setattr(warmup, "warm", lambda *a, **k: calls.append(a) or [("x", 1.0)])
    assert warmup.prepare(LandmarkModel(VoteSpec()), progress=False) == []
    assert calls == []
    warmup.prepare(random_model(0, n_trees=1, max_depth=2), progress=False)
    assert len(calls) == 1                  # a forest's kernels are still prepared
