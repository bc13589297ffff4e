import io

from facesegment.progress import Progress


def test_progress_counts_and_eta_ignores_slow_first_unit(monkeypatch):
    t = [0.0]
    monkeypatch.setattr("facesegment.progress.time.perf_counter", lambda: t[0])
    out = io.StringIO()
    bar = Progress(11, desc="trees", unit="trees", stream=out, log_interval=0)
    t[0] = 10.0           # first unit: 10 s of start-up
    bar.update()
    for _ in range(9):    # then 1 s per unit
        t[0] += 1.0
        bar.update()
    line = bar.line()
    assert "10/11 trees" in line
    assert "ETA 00:01" in line  # one unit left at 1 unit/s, not ~11 s
    assert out.getvalue().count("\n") == 10


def test_progress_units_finishing_together_do_not_zero_the_eta(monkeypatch):
    t = [0.0]
    monkeypatch.setattr("facesegment.progress.time.perf_counter", lambda: t[0])
    bar = Progress(16, stream=io.StringIO(), log_interval=0)
    t[0] = 32.0
    bar.update()
    bar.update()          # a second worker finishes at the same moment
    assert "ETA 03:44" in bar.line()   # 14 left at 2 per 32 s


def test_progress_disabled_prints_nothing():
    out = io.StringIO()
    with Progress(3, stream=out, enabled=False) as bar:
        bar.update(3)
    assert bar.n == 3 and out.getvalue() == ""
