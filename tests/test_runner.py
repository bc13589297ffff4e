"""The shared stage runner (pipelines/runner.py): order, skip-if-fresh, force,
dry runs, failures that keep the other stages' outputs, exit statuses; and the
face, UCI and non-greedy harnesses run their stages through it."""

import json
import signal

import numpy as np
import pytest

from facesegment.errors import DataError, FaceSegmentError
from pipelines import nongreedy, run, runner, uci
from pipelines.runner import Stage, exit_code, guarded, keyed_result, ordered, run_stages


class Files:
    """Fake stages writing ``NAME.json`` with a key; fresh when the file has it."""

    def __init__(self, root, key="k1"):
        self.root, self.key, self.calls = root, key, []

    def stage(self, name, deps=(), group="", fail=None):
        path = self.root / f"{name}.json"

        def go():
            self.calls.append(name)
            if fail:
                raise fail
            path.write_text(json.dumps({"key": self.key, "name": name}))
            return name

        return Stage(name, go, deps, lambda: keyed_result(path, self.key), group=group)


def test_stages_run_after_their_dependencies_then_are_skipped_until_forced(tmp_path):
    f = Files(tmp_path)
    stages = [f.stage("c", ("b",)), f.stage("a"), f.stage("b", ("a",)), f.stage("d")]
    assert [s.name for s in ordered(stages)] == ["a", "b", "c", "d"]
    res = run_stages(stages)
    assert f.calls == ["a", "b", "c", "d"] and list(res) == ["a", "b", "c", "d"]
    assert {o.status for o in res.values()} == {"ran"} and exit_code(res) == 0
    f.calls.clear()
    res = run_stages(stages)                      # every file holds its key
    assert f.calls == [] and {o.status for o in res.values()} == {"skipped"}
    assert res["a"].result == {"key": "k1", "name": "a"}
    run_stages(stages, force={"b"})
    assert f.calls == ["b"]
    run_stages(stages, force=True)
    assert f.calls == ["b", "a", "b", "c", "d"]
    f.key = "k2"                                  # what they depend on changed
    f.calls.clear()
    res = run_stages(stages, dry_run=True)
    assert f.calls == [] and {o.status for o in res.values()} == {"would run"}


def test_a_stage_after_one_that_would_run_would_run_too(tmp_path):
    f = Files(tmp_path)
    stages = [f.stage("a"), f.stage("b", ("a",)), f.stage("c")]
    run_stages(stages)
    (tmp_path / "a.json").unlink()
    res = run_stages(stages, dry_run=True)
    assert [res[n].status for n in "abc"] == ["would run", "would run", "skipped"]


def test_a_failing_stage_keeps_the_others_outputs_and_gives_exit_status_2(tmp_path):
    f = Files(tmp_path)
    seen = []
    stages = [f.stage("x1", group="x"), f.stage("x2", group="x", fail=ValueError("bad row")),
              f.stage("x3", group="x"), f.stage("y1", group="y"),
              f.stage("z", ("x2",))]
    res = run_stages(stages, keep_going=(ValueError,),
                     on_error=lambda st, exc: seen.append((st.name, str(exc))))
    assert [res[n].status for n in ("x1", "x2", "x3", "y1", "z")] == \
        ["ran", "failed", "not run", "ran", "not run"]
    assert seen == [("x2", "bad row")] and exit_code(res) == runner.FAILED == 2
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["x1.json", "y1.json"]
    with pytest.raises(KeyError):                 # not in keep_going: stops the run
        run_stages([f.stage("w", fail=KeyError("w"))], keep_going=(ValueError,))


def test_cycles_and_unknown_dependencies_are_refused(tmp_path):
    f = Files(tmp_path)
    with pytest.raises(ValueError, match="depends on itself"):
        ordered([f.stage("a", ("b",)), f.stage("b", ("a",))])
    with pytest.raises(ValueError, match="'nope', which is not a stage"):
        ordered([f.stage("a", ("nope",))])


def test_progress_lines_count_done_total_and_give_an_eta(tmp_path):
    f = Files(tmp_path)
    lines = []
    stages = [f.stage("a"), f.stage("b")]
    run_stages(stages, runner.Counter(lines.append, "t", 2, summary=lambda r: f"made {r}"))
    assert lines[0].startswith("[t] 1/2 a: made a (") and "ETA" in lines[1]
    lines.clear()
    run_stages(stages, runner.StageLog(lines.append))
    assert lines == ["[a] up to date, skipped", "[b] up to date, skipped"]


def test_guarded_turns_errors_and_interruptions_into_exit_statuses(capsys):
    def boom(exc):
        def fn():
            raise exc
        return fn

    assert guarded("h", boom(FaceSegmentError("x.npz: broken; fix it"))) == 2
    assert guarded("h", boom(KeyboardInterrupt())) == 130
    assert guarded("h", lambda: signal.raise_signal(signal.SIGTERM), "units") == 143
    err = capsys.readouterr().err.splitlines()
    assert err == ["h: error: x.npz: broken; fix it",
                   "h: interrupted; finished stages were kept",
                   "h: terminated (SIGTERM); finished units were kept"]
    assert guarded("h", lambda: 0) == 0


# ------------------------------------------------ the harnesses use the runner

@pytest.fixture
def spy(monkeypatch):
    """Every call of the shared runner, by harness: ``{module: [stage names]}``."""
    calls = {}
    real = runner.run_stages

    def wrapped(mod):
        def call(stages, *a, **k):
            calls.setdefault(mod.__name__, []).append([s.name for s in stages])
            return real(stages, *a, **k)
        return call

    for mod in (run, uci, nongreedy):
        assert mod.run_stages is real  # imported from pipelines.runner, not their own
        monkeypatch.setattr(mod, "run_stages", wrapped(mod))
    return calls


def _uci_data(root, names=("toya", "toyb")):
    rng = np.random.default_rng(0)
    for name in names:
        d = root / name
        d.mkdir(parents=True)
        for f, n in (("train.npz", 200), ("test.npz", 80)):
            X = rng.normal(size=(n, 4)).astype(np.float32)
            y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
            np.savez_compressed(d / f, X=X, y=y, classes=np.arange(2))
    return root


def test_uci_and_nongreedy_run_their_stages_through_the_runner(tmp_path, spy, capsys):
    root = _uci_data(tmp_path / "data")
    argv = ["--root", str(root), "--out", str(tmp_path / "u"), "--quick", "--no-docs",
            "--kinds", "axis", "sklearn-rf"]
    assert uci.main(argv, log=lambda m: None) == 0
    assert spy["pipelines.uci"] == [[f"{n} {k} {s}" for n in ("toya", "toyb")
                                     for s, ks in (("select", ("axis", "sklearn-rf")),
                                                   ("test", ("axis", "sklearn-rf")))
                                     for k in ks]]
    # a dataset that cannot be read: one error line, exit status 2, the other's files kept
    capsys.readouterr()
    (root / "toyb" / "test.npz").write_bytes(b"not a zip file")
    out = tmp_path / "n"
    argv = ["--root", str(root), "--out", str(out), "--quick", "--depths", "2",
            "--methods", "cart", "axis", "--forests", "rf"]
    assert nongreedy.main(argv, log=lambda m: None) == 2
    assert spy["pipelines.nongreedy"] == [[f"{n} {u}" for n in ("toya", "toyb")
                                           for u in ("tree-d02-cart", "tree-d02-axis",
                                                     "forest-rf")]]
    err = capsys.readouterr().err
    assert "Traceback" not in err
    err = [ln for ln in err.splitlines() if ln.startswith("nongreedy: error:")]
    assert len(err) == 1 and str(root / "toyb" / "test.npz") in err[0], err
    assert sorted(p.name for p in (out / "runs" / "toya").glob("*.json")) == \
        ["forest-rf.json", "tree-d02-axis.json", "tree-d02-cart.json"]
    assert not (out / "runs" / "toyb").exists()
    assert json.loads((out / "results.json").read_text())["trees"]


def test_face_pipeline_runs_its_stages_through_the_runner(tmp_path, monkeypatch, spy):
    from pipelines.config import load_config
    from pipelines.stages import Context

    monkeypatch.chdir(tmp_path)
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text("")
    ctx = Context(load_config(cfg_path, data="d"), root=tmp_path, log=lambda m: None)
    calls = []

    class Fake:
        def __init__(self, name, deps=()):
            self.name, self.deps = name, deps

        def config(self, c):
            return {}

        def inputs(self, c):
            return []

        def run(self, c):
            calls.append(self.name)
            if self.name == "select":
                raise DataError("x", "is broken", "fix it")
            return []

    fake = {"data": Fake("data"), "extract": Fake("extract", ("data",)),
            "select": Fake("select", ("extract",))}
    monkeypatch.setattr(run, "build_stages", lambda cfg=None: fake)
    with pytest.raises(DataError):  # the face pipeline stops at its first error
        run.run_target(ctx, "select")
    assert calls == ["data", "extract", "select"]
    assert spy["pipelines.run"] == [["data", "extract", "select"]]
    assert (ctx.reports / "stamps" / "extract.json").is_file()
    assert not (ctx.reports / "stamps" / "select.json").exists()


# ------------------------------------------------------------------ layers

#: The pages: rendered from the files the stages wrote.
REPORTS = ("report", "results_page", "prior_report", "timings", "investigate_report", "uci_report",
           "nongreedy_report")
#: What the pages may read besides each other: names, labels and file helpers.
CONFIG = ("common", "config", "design", "uci_config", "uci_data")


def test_the_report_modules_import_no_stage_code():
    """config -> stages -> report: a page reads files, never a stage or the runner."""
    from tests.test_import_graph import import_graph

    graph = import_graph()
    allowed = {f"pipelines.{m}" for m in REPORTS + CONFIG}
    for page in REPORTS:
        seen, todo = set(), [f"pipelines.{page}"]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += [t for t in graph[m] if t.startswith("pipelines.")]
        assert seen <= allowed, (page, sorted(seen - allowed))
    for harness in ("run", "uci", "nongreedy"):
        assert "pipelines.runner" in graph[f"pipelines.{harness}"]
    assert not [t for t in graph["pipelines.runner"] if t.startswith("pipelines")]
