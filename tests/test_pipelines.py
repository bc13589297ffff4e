"""The main job (pipelines/): config validation, up-to-date logic, the no-data
message, truncation of forests, the results page, and an end-to-end ``smoke``
run on a tiny synthetic labelled folder."""

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from facesegment.atomic import write_json_atomic
from facesegment.classes import N_CLASSES
from facesegment.errors import DataError
from pipelines import backend, report, results_page, run, stamps, timings
from pipelines.config import ConfigError, load_config, q_features, run_name
from pipelines.stages import Context, Stage

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pipelines" / "config.toml"


# ------------------------------------------------------------------ helpers

def write_config(tmp_path, text):
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def synthetic_face(rng, size=64):
    """A 64x64 'face' (RGB uint8) and its 8-class label map: an ellipse (lower
    face) holding eyes, brows, a nose and a mouth, each with its own colour."""
    yy, xx = np.mgrid[:size, :size]
    c = size / 2 + rng.integers(-2, 3, size=2)
    label = np.zeros((size, size), np.uint8)
    face = ((yy - c[0]) / 20.0) ** 2 + ((xx - c[1]) / 16.0) ** 2 <= 1
    label[face] = 1
    parts = {  # class: (dy, dx, half-height, half-width) around the centre
        6: (-9, -7, 1, 4), 7: (-9, 7, 1, 4), 4: (-5, -7, 2, 3), 5: (-5, 7, 2, 3),
        2: (1, 0, 4, 2), 3: (9, 0, 2, 5),
    }
    for cls, (dy, dx, hh, hw) in parts.items():
        y0, x0 = int(c[0] + dy), int(c[1] + dx)
        label[y0 - hh:y0 + hh + 1, x0 - hw:x0 + hw + 1] = cls
    palette = np.array([(40, 90, 40), (200, 160, 130), (170, 120, 100), (150, 40, 50),
                        (30, 30, 60), (30, 30, 70), (80, 50, 30), (90, 50, 30)], np.int16)
    img = palette[label] + rng.integers(-25, 26, size=(size, size, 3))
    return np.clip(img, 0, 255).astype(np.uint8), label


def make_dataset(root, n_train=8, n_test=3, seed=0):
    from facesegment.data.imageio import write_png_atomic

    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            img, lab = synthetic_face(rng)
            write_png_atomic(root / split / f"face_{i:03d}.png", img)
            write_png_atomic(root / split / f"face_{i:03d}_label.png", lab)
    return root


# ------------------------------------------------------------------- config

def test_every_preset_of_the_shipped_config_loads():
    for preset in ("default", "paper", "small", "smoke"):
        cfg = load_config(CONFIG, preset, data="x/faces300w")
        assert run_name(cfg) == f"faces300w-{preset}"
        assert max(cfg["forest"]["eval_trees"]) <= cfg["forest"]["n_trees"]
    assert q_features("p^0.7", 2883) == round(2883 ** 0.7) == 264
    assert q_features(100, 2883) == 100


@pytest.mark.parametrize("text, words", [
    ("[data]\nn_validaton = 3\n", ["[data]", "n_validaton", "n_validation"]),
    ("[extract]\nn_windows = -5\n", ["[extract]", "n_windows", "-5", ">= 8"]),
    ("[evaluate]\nmode = 'loose'\n", ["mode", "'loose'", "strict"]),
    ("[forest.axis]\nq = 'p^1.5'\n", ["[forest.axis]", "q", "p^E"]),
    ("[forest.co2]\nnuu = 3\n", ["[forest.co2]", "nuu", "nu"]),
    ("[forest]\nmax_dept = 3\n", ["[forest]", "max_dept", "max_depth"]),
    ("[extracts]\nn_windows = 8\n", ["unknown section [extracts]"]),
    ("[forest.oblique]\nnu = 1\n", ["[forest.oblique]", "co2"]),
    ("[forest]\nn_trees = 8\neval_trees = [16]\n", ["eval_trees", "n_trees"]),
    ("[select]\nalphas = []\n", ["alphas", "non-empty"]),
    ("[select]\nenabled = 1\n", ["enabled", "true or false"]),
    ("[data\n", ["not valid TOML"]),
    ("[forest]\nmin_samples_leaf = 0\n", ["[forest]", "min_samples_leaf=0", ">= 1"]),
    ("[forest]\nmax_depth = 0\n", ["[forest]", "max_depth=0", ">= 1"]),
    ("[forest]\nn_trees = 1000000000\n", ["[forest]", "n_trees", "10000"]),
    ("[run]\nseed = 18446744073709551616\n", ["[run]", "seed", "4294967295"]),
    ("[evaluate]\npixel_stride = 1000000000\n", ["[evaluate]", "pixel_stride", "1000"]),
    ("[forest.co2]\nnu = -1.0\n", ["[forest.co2]", "nu=-1.0", "(0, inf)"]),
    ("[forest.two-probe]\nn_pairs = 0\n", ["[forest.two-probe]", "n_pairs=0"]),
    ("[cascade]\nchains = ['axis>co2']\n", ["[cascade]", "chains", "non-oblique", "'co2'"]),
    ("[cascade]\nchains = ['axis']\n", ["[cascade]", "chains", "at least two kinds"]),
    ("[cascade]\nchains = ['axis>oak']\n", ["[cascade]", "'oak' is not one"]),
    ("[position]\nsigma = -1.0\n", ["[position]", "sigma"]),
    ("[position]\ncrop_faces = -1\n", ["[position]", "crop_faces", ">= 0"]),
    ("[forest.co2-pooled]\npool = 40\n", ["[forest.co2-pooled]", "pool", "[1, 31]"]),
    ("[select]\nco2_pool = [0]\n", ["[select]", "co2_pool", "[1, 31]"]),
    # every [select] grid list through its estimator's own constraints
    ("[select]\nextra_q = [\"banana\"]\n", ["[select] extra_q = ['banana']", "kind extra",
                                            "max_features='banana' is invalid"]),
    ("[select]\nferns_test = [\"cube\"]\n", ["[select] ferns_test", "kind ferns", "'cube'"]),
    ("[select]\nfull_rotation_features = [0]\n", ["[select] full_rotation_features",
                                                  "kind rotation"]),
    ("[select]\nco2_sparse_dtype = [\"int4\"]\n", ["[select] co2_sparse_dtype", "int4"]),
    ("[cascade]\nstage1_maps = 'best'\n", ["[cascade]", "stage1_maps", "decisions"]),
    ("[cascade]\nq = 'p^2'\n", ["[cascade]", "q", "p^E"]),
    ("[smoothing]\nmodels = 'some'\n", ["[smoothing]", "models", "cascades"]),
    ("[smoothing]\nsigmas = [-1.0]\n", ["[smoothing]", "sigmas"]),
])
def test_bad_config_names_the_key(tmp_path, text, words):
    with pytest.raises(ConfigError) as err:
        load_config(write_config(tmp_path, text))
    msg = str(err.value)
    assert str(tmp_path / "c.toml") in msg and "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_presets_override_and_unknown_preset(tmp_path):
    p = write_config(tmp_path, "[extract]\nn_windows = 64\n"
                               "[presets.tiny]\nextract = { n_windows = 16 }\n")
    assert load_config(p)["extract"]["n_windows"] == 64
    assert load_config(p, "tiny")["extract"]["n_windows"] == 16
    with pytest.raises(ConfigError, match="unknown preset 'huge'.*tiny"):
        load_config(p, "huge")
    bad = write_config(tmp_path, "[presets.x]\nextract = { n_windos = 1 }\n")
    with pytest.raises(ConfigError, match=r"presets\.x.*n_windos"):
        load_config(bad, "x")


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_selection_settings_and_params():
    from pipelines import selection

    cfg = load_config(CONFIG, "default", data="d")
    g = selection.grids(cfg)
    assert [s["q"] for s in g["axis"]] == ["p^0.5", "p^0.6", "p^0.7"]
    assert [s["q"] for s in selection.grids(cfg, full=True)["axis"]][-1] == "p^0.9"
    assert len(selection.grids(cfg, full=True)["co2"]) == 36          # the paper's 6 x 6
    from facesegment.layout import DEFAULT_LAYOUT, WindowLayout

    p = selection.selection_params(cfg, "co2", {"q": "p^0.5", "nu": 4.0, "eta": 1e-4}, 128000,
                                   DEFAULT_LAYOUT)
    assert p["max_features"] == round(2883 ** 0.5) and p["nu"] == 4.0 and p["eta"] == 1e-4
    assert p["max_samples"] == 16000
    # oblique nodes down to the same depth: min samples scaled like samples per tree
    assert p["oblique_min_samples"] == cfg["forest.co2"]["oblique_min_samples"] * 16000 // 64000
    full = selection.estimator_params(cfg, "two-probe", {"n_pairs": 100}, DEFAULT_LAYOUT)
    assert full["n_pairs"] == 100 and full["max_samples"] == 64000 and "q" not in full
    off = selection.chosen_from_config(cfg)
    assert off["axis"] == {"q": "p^0.7", "alpha": 0.5}
    assert off["co2"]["nu"] == 1.0 and off["two-probe"]["n_pairs"] == 400
    # q counts the values of the windows' own layout (a grey one: 961), plus context values
    grey = WindowLayout(channels=1)
    assert selection.estimator_params(cfg, "axis", {"q": "p^0.5"}, grey)["max_features"] == 31
    assert selection.estimator_params(cfg, "axis", {"q": "p^0.5"}, grey,
                                      extra_features=39)["max_features"] == 32
    # a pooled kind: pool is the layout's, q counts the pooled values
    assert [(s["pool"], s["weight_dtype"]) for s in g["co2-pooled"]] == [
        (3, "int16"), (5, "int16")]
    pp = selection.estimator_params(cfg, "co2-pooled", {"q": "p^0.6", "pool": 5}, DEFAULT_LAYOUT)
    assert "pool" not in pp and pp["max_features"] == round(108 ** 0.6)
    assert pp["weight_dtype"] == "int16"
    lay = selection.kind_layout(cfg, "co2-pooled", {"pool": 5}, DEFAULT_LAYOUT)
    assert lay.pool == 5 and lay.n_features == 108
    assert selection.kind_layout(cfg, "co2-pooled", {}, DEFAULT_LAYOUT).pool == 3  # config's
    assert selection.kind_layout(cfg, "co2", {}, DEFAULT_LAYOUT) is DEFAULT_LAYOUT
    assert off["co2-pooled"]["pool"] == 3
    # co2-nongreedy's greedy levels take CO2's nu and eta (design "co2:nu")
    from pipelines.design import design_of

    chosen = {"co2": {"q": "p^0.6", "nu": 10.0, "eta": 1e-3}}
    assert design_of("co2-nongreedy").inherited(chosen) == {
        "q": "p^0.6", "init_nu": 10.0, "init_eta": 1e-3}


# ------------------------------------------------------------ stamps/skips

def test_fingerprints_change_with_content(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one")
    a = stamps.fingerprint(f)
    f.write_text("two")
    assert stamps.fingerprint(f) != a
    d = tmp_path / "d"
    d.mkdir()
    t0 = stamps.fingerprint(d)
    (d / "x").write_text("1")
    assert stamps.fingerprint(d) != t0
    assert stamps.fingerprint(tmp_path / "missing") is None


def test_data_fingerprint_ignores_mtimes_but_not_bytes(tmp_path):
    d = tmp_path / "faces"
    (d / "train").mkdir(parents=True)
    (d / "train" / "a.jpg").write_bytes(b"jpeg-bytes")
    (d / "train" / "a_label.png").write_bytes(b"png-bytes")
    by_content = stamps.fingerprint(stamps.ByContent(d))
    by_mtime = stamps.fingerprint(d)
    os.utime(d / "train" / "a.jpg", ns=(1, 1))  # a re-copied dataset: same bytes, new mtime
    assert stamps.fingerprint(stamps.ByContent(d)) == by_content
    assert stamps.fingerprint(d) != by_mtime
    (d / "train" / "a.jpg").write_bytes(b"jpeg-bytez")  # same size, other bytes
    assert stamps.fingerprint(stamps.ByContent(d)) != by_content
    f = d / "train" / "a_label.png"
    assert stamps.fingerprint(f, content=True) == stamps.fingerprint(stamps.ByContent(f))
    assert stamps.stage_key("c", [stamps.ByContent(d)]) != stamps.stage_key("c", [str(d)])


def _fake_stage(name, calls, out_name, deps=(), value=lambda c: c.cfg["extract"]):
    def go(ctx):
        calls.append(name)
        out = ctx.reports / out_name
        stamps.write_text_atomic(out, f"{name} {len(calls)}")
        return [out]
    return Stage(name, value, lambda c: [c.reports / "in.txt"], go, deps)


def test_stage_runs_once_then_is_skipped_until_something_changes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(write_config(tmp_path, "[extract]\nn_windows = 64\n"), data="d")
    logs = []
    ctx = Context(cfg, root=tmp_path, log=logs.append)
    ctx.reports.mkdir(parents=True)
    (ctx.reports / "in.txt").write_text("input")
    calls = []
    st = _fake_stage("s", calls, "out.txt")
    assert run.execute(ctx, st) == "ran"
    assert run.execute(ctx, st) == "skipped"                # stamp matches
    assert run.execute(ctx, st, force=True) == "ran"        # --force
    (ctx.reports / "in.txt").write_text("changed input")     # input changed
    assert run.execute(ctx, st) == "ran"
    assert run.execute(ctx, st) == "skipped"
    ctx.cfg["extract"]["n_windows"] = 128                    # its config changed
    assert run.execute(ctx, st) == "ran"
    (ctx.reports / "out.txt").write_text("tampered, longer output")  # output damaged
    assert run.execute(ctx, st) == "ran"
    os.remove(ctx.reports / "out.txt")                        # output deleted
    assert run.execute(ctx, st) == "ran"
    assert calls == ["s"] * 6
    ctx.cfg["select"]["n_trees"] = 3                         # not its section: no rerun
    assert run.execute(ctx, st) == "skipped"
    assert run.execute(ctx, st, dry_run=True) == "skipped"
    assert any("up to date" in m for m in logs)


def test_graph_runs_dependencies_in_order_and_only_what_is_needed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(write_config(tmp_path, ""), data="d")
    ctx = Context(cfg, root=tmp_path, log=lambda m: None)
    ctx.reports.mkdir(parents=True)
    (ctx.reports / "in.txt").write_text("x")
    calls = []
    fake = {"data": _fake_stage("data", calls, "a"),
            "extract": _fake_stage("extract", calls, "b", ("data",)),
            "select": _fake_stage("select", calls, "c", ("extract",)),
            "train:axis": _fake_stage("train:axis", calls, "d", ("select",)),
            "train:co2": _fake_stage("train:co2", calls, "e", ("select",))}
    monkeypatch.setattr(run, "build_stages", lambda cfg=None: fake)

    run.run_target(ctx, "extract")
    assert calls == ["data", "extract"]
    run.run_target(ctx, "train")
    assert calls[:3] == ["data", "extract", "select"]
    assert sorted(calls[3:]) == ["train:axis", "train:co2"]
    calls.clear()
    status = run.run_target(ctx, "all")
    assert calls == [] and {o.status for o in status.values()} == {"skipped"}
    run.run_target(ctx, "all", force=["train"])
    assert sorted(calls) == ["train:axis", "train:co2"]


def test_bad_force_and_workers_are_one_line_errors(capsys):
    for argv in (["--force", "trian", "all"], ["--workers", "-2", "all"],
                 ["--workers", "many", "all"]):
        with pytest.raises(SystemExit) as ex:
            run.main(["--config", str(CONFIG)] + argv)
        assert ex.value.code == 2
        err = capsys.readouterr().err
        assert argv[1] in err and "Traceback" not in err, err


def test_no_data_stops_at_once_with_the_way_out(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = run.main(["--config", str(CONFIG), "--data", str(tmp_path / "nope"), "all"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "is not a folder" in err and "DATA=../shared/data/faces300w" in err
    # no DATA, nothing downloaded, offline: stops before trying to download
    monkeypatch.setattr(backend, "online", lambda *a, **k: False)
    t0 = time.perf_counter()
    rc = run.main(["--config", str(CONFIG), "all"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "offline" in err and "make all DATA=" in err
    assert time.perf_counter() - t0 < 30  # not a download timeout


def test_label_tree_split_by_person_leaves_out_unlabelled(tmp_path):
    """Images in person folders, labels in a parallel tree (as `facesegment label`
    writes them); an image the detector missed (in its report) has no label and is
    left out; the split is the library's."""
    from facesegment.data.imageio import write_png_atomic

    rng = np.random.default_rng(1)
    for p in range(6):
        for i in range(2):
            img, lab = synthetic_face(rng)
            name = f"Person_{p}/Person_{p}_{i + 1:04d}"
            write_png_atomic(tmp_path / "img" / f"{name}.png", img)
            if (p, i) != (5, 1):
                write_png_atomic(tmp_path / "lab" / f"{name}_label.png", lab)
    # not in the labeller's report: an error naming the image
    with pytest.raises(DataError, match="Person_5_0002"):
        backend.split_dataset(tmp_path / "img", tmp_path / "lab", 2, 0.3, 0)
    (tmp_path / "lab" / "label_report.csv").write_text(
        "name,status\nPerson_5/Person_5_0002,no-face\n")
    train, val, test, how = backend.split_dataset(tmp_path / "img", tmp_path / "lab", 2,
                                                  0.3, 0)
    assert len(train) + len(val) + len(test) == 11
    assert "1 images without a label map left out" in how
    person = lambda r: r.name.split("/")[0]  # noqa: E731
    assert not {person(r) for r in test} & {person(r) for r in train + val}
    assert len(val) == 2
    # the same split as the library's (and `facesegment data splits`)
    from facesegment.data import splits

    ref = splits.split_dataset(tmp_path / "img", tmp_path / "lab", test_fraction=0.3,
                               n_validation=2, seed=0)
    for mine, theirs in zip((train, val, test), (ref.train, ref.validation, ref.test)):
        assert [r.name for r in mine] == [r.name for r in theirs]
    with pytest.raises(Exception, match="n_validation"):
        backend.split_dataset(tmp_path / "img", tmp_path / "lab", 50, 0.3, 0)


# ------------------------------------------------------ forest truncation

def _model(est, kind="axis"):
    from facesegment.modelio.model import Model

    return Model(kind=kind, params=est.get_params(), arrays=est.forest_,
                 class_names=tuple(str(c) for c in range(N_CLASSES)),
                 sampling_factors=np.ones(N_CLASSES), mean=np.zeros(12, np.float32),
                 std=np.ones(12, np.float32))


@pytest.mark.parametrize("kind", ["axis", "two-probe", "co2"])
def test_first_trees_of_a_forest_are_the_smaller_forest(kind):
    """The 16-tree scores are those of the 32-tree forest's first 16 trees:
    check that this equals training 16 trees with the same seed."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(300, 12)).astype(np.uint8)
    y = (X[:, 0] // 32).astype(np.int64)
    extra = {"oblique_min_samples": 50} if kind == "co2" else {}
    if kind != "two-probe":
        extra["max_features"] = 4
    big = backend.make_estimator(kind, {"max_depth": 5, **extra}, 4, 7, 1)
    big.fit(X, y)
    small = backend.make_estimator(kind, {"max_depth": 5, **extra}, 2, 7, 1)
    small.fit(X, y)
    head = backend.subforest(_model(big, kind), 0, 2).arrays
    for name, a, b in zip(head._fields, head, small.forest_):
        np.testing.assert_array_equal(a, b, err_msg=name)
    tail = backend.subforest(_model(big, kind), 2, 4).arrays
    np.testing.assert_array_equal(tail.roots, big.forest_.roots[2:])


def _random_axis_model(n_trees=3, n=400):
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(n, 2883)).astype(np.uint8)
    est = backend.make_estimator("axis", {"max_depth": 4, "max_features": 20}, n_trees, 0, 1)
    est.fit(X, rng.integers(0, N_CLASSES, size=n))
    model = _model(est)
    model.mean, model.std = np.zeros(2883, np.float32), np.ones(2883, np.float32)
    return model


def test_scoring_is_the_library_driver(tmp_path):
    """pipelines.scoring (kept for selection.py) is facesegment.evaluation.scoring.evaluate
    with the forest sizes and alphas by position; a pixel grid scores exactly the
    grid's pixels, full mode the border too."""
    from facesegment.data.datasets import find_faces
    from facesegment.evaluation.scoring import evaluate
    from pipelines import scoring

    data = make_dataset(tmp_path / "f", n_train=3, n_test=2)
    recs = find_faces(data / "test")
    model = _random_axis_model()
    mine = scoring.score_model(model, recs, [2, 3], [0.5, 1.0], depths=[2], workers=1)
    ref = evaluate(model, recs, alphas=[0.5, 1.0], tree_counts=[2, 3], depths=[2], workers=1,
                   progress=False)
    assert mine == ref and scoring.best_alpha(mine, 3) in ("0.5", "1.0")
    grid = scoring.score_model(model, recs, [3], [0.5], workers=1, pixel_stride=2)
    assert grid["n_pixels"] == 2 * 17 * 17   # 34 x 34 scored pixels -> every 2nd row/col
    full = scoring.score_model(model, recs, [3], [0.5], workers=1, mode="full")
    assert full["n_pixels"] == 2 * 64 * 64   # the border is scored too


def test_check_pixels_scores_every_pixel_next_to_the_grid(tmp_path, capsys):
    from facesegment.data.datasets import find_faces
    from facesegment.evaluation.scoring import evaluate
    from facesegment.modelio.model import save_model
    from pipelines import check_pixels

    data = make_dataset(tmp_path / "f", n_train=2, n_test=2)
    recs = find_faces(data / "test")
    model = _random_axis_model(n_trees=4)
    save_model(model, tmp_path / "models" / "r" / "axis-4")
    run_dir = tmp_path / "reports" / "runs" / "r"
    write_json_atomic(run_dir / "splits.json",
                      {"test": [list(r.__dict__.values()) for r in recs]})
    grid = evaluate(model, recs, alphas=[0.5, 1.0], tree_counts=[2, 4], workers=1,
                    pixel_stride=2, progress=False)
    write_json_atomic(run_dir / "eval-axis.json", grid | {"alpha": 0.5, "pixel_stride": 2})
    res = check_pixels.check_run(run_dir, tmp_path / "models" / "r", workers=1,
                                 log=lambda m: None, alphas=[0.25])
    assert set(res["axis"]["4"]) == {"0.25", "0.5", "1.0"}  # 0.25 only in the all-pixel scores
    assert set(res["axis"]["grid"]["4"]) == {"0.5", "1.0"}
    assert list(res) == ["axis"]
    full = evaluate(model, recs, alphas=[0.5, 1.0, 0.25], tree_counts=[2, 4], workers=1,
                    progress=False)
    for n in ("2", "4"):
        for a in ("0.5", "1.0"):
            assert res["axis"][n][a] == full["trees"][n]["alpha"][a]["mean_jaccard"]
            assert res["axis"]["grid"][n][a] == grid["trees"][n]["alpha"][a]["mean_jaccard"]
    assert res["axis"]["n_pixels"] == 2 * 34 * 34 and res["axis"]["grid_pixel_stride"] == 2
    # the command: a missing run is one line and exit 2
    assert check_pixels.main(["--run", "nope"]) == 2
    assert "does not exist" in capsys.readouterr().err


# ---------------------------------------------------------------- report

@pytest.mark.parametrize("root, labels, note", [
    ("../shared/data/faces300w", "", "300-W photos"),
    ("../shared/data/lfw-gray", "data/labels/lfw-gray", "greyscale"),
    ("data/lfw/lfw", "data/labels/lfw", "colour LFW"),
    ("/home/me/my-faces", "", "another labelled folder"),
])
def test_report_describes_the_data_by_its_folder_not_the_run_name(root, labels, note):
    text = results_page._data_note({"run_name": "lfw-default"}, {"root": root, "labels": labels})
    assert note in text


def _fake_eval(kind, base, alpha):
    def summ(v):
        return {"mean_jaccard": v, "pixel_accuracy": 90.0, "jaccard": [v] * 8,
                "confusion": np.eye(8, dtype=int).tolist()}
    trees = {str(n): {"alpha": {repr(alpha): summ(base + n / 10), repr(1.0): summ(base - 1)}}
             for n in (16, 32)}
    return {"kind": kind, "alpha": alpha, "trees": trees, "per_image": {"a": base},
            "sweep": {"alphas": [alpha, 1.0], "max_depth": [4, 8], "n_trees": [1, 16, 32],
                      "class_average_jaccard": [[[1, 2, 3], [4, 5, base]]] * 2}}


def test_report_renders_only_from_files(tmp_path, monkeypatch):
    run_dir = tmp_path / "reports" / "runs" / "faces300w-default"
    for k, base in (("axis", 20.0), ("two-probe", 22.0), ("co2", 25.0), ("co2-best", 21.0)):
        write_json_atomic(run_dir / f"eval-{k}.json", _fake_eval(k, base, 0.5))
        write_json_atomic(run_dir / f"train-{k}.json", {
            "n_trees": 32, "fit_seconds": 64.0, "tree_seconds": [1.0] * 32,
            "model_bytes": {"16": 1e6, "32": 2e6}, "n_nodes": 100, "threads": None,
            "fit_cpu_seconds": 120.0})
        write_json_atomic(run_dir / f"time-{k}.json", {"trees": {
            "16": {"ms_per_image": 28.0, "cpu_ms_per_image": 50.0},
            "32": {"ms_per_image": 44.0, "cpu_ms_per_image": 80.0}}})
    write_json_atomic(run_dir / "chosen.json", {
        "axis": {"q": "p^0.7", "alpha": 0.5, "validation_jaccard": 19.0}})
    write_json_atomic(run_dir / "splits.json", {
        "root": "../shared/data/faces300w", "labels": "",
        "counts": {"train": 1107, "validation": 100, "test": 250}})
    from pipelines.investigate import VARIANTS

    write_json_atomic(run_dir / "investigation.json", {
        "trees": 4, "samples_per_tree": 100, "max_depth": 5, "n_train_windows": 300,
        "n_heldout_windows": 100,
        "variants": [{"label": lab, "kind": kind, "accuracy": 40.0 + i, "n_oblique": i,
                      "co2_calls": 2 * i, "co2_accepted": i, "fit_seconds": 1.0}
                     for i, (lab, kind, _) in enumerate(VARIANTS)]})
    for stage, secs, fin in (("train:axis", 64.0, "2026-01-01T00:01:00Z"),
                             ("report", 0.1, "2026-01-01T00:00:00Z")):
        write_json_atomic(run_dir / "stamps" / f"{stage.replace(':', '-')}.json",
                                 {"stage": stage, "seconds": secs, "finished": fin})
    text = report.render_run(run_dir)
    # the results hold no measured time; timings.md (from the old layout here) has them
    assert "| train:axis |" not in text and "64 s" not in text and "28 ms" not in text
    assert "[timings.md](timings.md)" in text
    assert "| Random forest (axis-aligned) | 16 | 1.0 MB |  |" in text
    assert "| Random forest (axis-aligned) | 32 | 2.0 MB | 100 |" in text
    times = report.render_timings(run_dir)
    assert "| train:axis | 64 s |" in times and "| report |" not in times
    assert "**64 s in all** (1 stages" in times
    assert "| CO2 ν=1 η=1e-4 (the paper's) | 43.00% | 3 | 3 / 6 | 1 s |" in text
    assert "CO2 (default settings) scores +2.0 points of accuracy against the axis" in text
    assert "+5.00 and +3.00 Jaccard points" in text  # 26.6 - 21.6, 26.6 - 23.6
    assert "The paper's η = 1e-4 gives 43.00% against 42.00%" in text
    assert "| Random forest (axis-aligned) | 0.5 | 21.60 | 23.20 | 32.28 / 34.61 |" in text
    assert "| CO2 forest (paper's univariate init) | 1 | 24.00 | 24.00 | 40.33 / 42.55 |" in text
    assert "| CO2 + two-probe init (ours) | 0.5 | 22.60 | 24.20 | (not in the paper) |" in text
    assert "co2 > two-probe > axis (as in the paper)" in text
    # the extension is checked against the same claim on its own line
    assert "two-probe > co2-best > axis (not the paper’s order)" in text
    assert "+23.1%" in text                       # 26.6 / 21.6 - 1 at 16 trees
    assert "300-W" in text and "1107 training images" in text
    row = "| Random forest (axis-aligned) | 16 | ≈ 32 s (60 s) | 28 ms (50 ms) |"
    assert row in times
    assert "(paper: +24.9%)" in text and "(paper: +22.9%)" in text
    page = report.render_all(tmp_path / "reports" / "runs", tmp_path / "docs")
    assert "# Results" in page and "make all DATA=../shared/data/faces300w" in page
    assert "64 s" not in page
    # the pages again from the files, no stage run: timings.json gathers the old fields
    monkeypatch.chdir(tmp_path)
    assert report.main(["--run", "faces300w-default"]) == 0
    merged = json.loads((run_dir / "timings.json").read_text())
    assert merged["train"]["axis"]["fit_seconds"] == 64.0
    assert merged["time"]["co2"]["trees"]["16"]["ms_per_image"] == 28.0
    assert merged["stages"]["train:axis"]["seconds"] == 64.0 and "report" not in merged["stages"]
    assert row in (run_dir / "timings.md").read_text()
    assert row in (tmp_path / "docs" / "timings.md").read_text()
    assert "64 s" not in (run_dir / "results.md").read_text()
    # timings.json is now the source: the old fields may go (a converted or new run)
    for k in ("axis", "two-probe", "co2", "co2-best"):
        os.remove(run_dir / f"time-{k}.json")
    os.remove(run_dir / "stamps" / "train-axis.json")
    assert row in report.render_timings(run_dir)
    assert "| train:axis | 64 s |" in report.render_timings(run_dir)
    assert report.main(["--run", "nope"]) == 2


def test_old_results_run_time_table_is_read_back(tmp_path):
    """A run folder of the earlier layout without its stamps (another machine's run):
    the stage times come from its results.md's "Run time" table."""
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "results.md").write_text(
        "## r\n\n### Run time of the main job\n\n| stage | time | finished (UTC) |\n"
        "| --- | ---: | --- |\n| data | 4 s | 2026-11-23T03:17:59Z |\n"
        "| train:co2 | 2.7 min | 2026-11-23T03:21:30Z |\n\n### Selected settings\n")
    st = report.collect_timings(run_dir)["stages"]
    assert st == {"data": {"seconds": 4.0, "finished": "2026-11-23T03:17:59Z", "rounded": True},
                  "train:co2": {"seconds": 162.0, "finished": "2026-11-23T03:21:30Z",
                                "rounded": True}}
    assert "rounded" in report.render_timings(run_dir)


def test_split_times_add_up_and_render(tmp_path):
    """``backend.split_times`` sums each tree's split search (and CO2's start and
    optimisation); the timings page shows their shares."""
    from facesegment.forest import CO2Forest, TwoProbeForest

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(600, 12), dtype=np.uint8)
    y = (X[:, 0] > X[:, 1]).astype(int) + (X[:, 2] > 128)
    tp_est = TwoProbeForest(3, n_pairs=10, random_state=0).fit(X, y)
    co2_est = CO2Forest(2, init="best", n_pairs=10, max_features=4,
                        oblique_min_samples=50, random_state=0).fit(X, y)
    # every tree records where its time went (the values are timers: only their
    # presence and signs are checked, never that a fast fit took measurable time)
    for est, keys in ((tp_est, {"t_split"}), (co2_est, {"t_split", "t_init", "t_oblique"})):
        for st in est.tree_stats_:
            assert keys <= set(st) and all(st[k] >= 0 for k in keys)
    tp = backend.split_times(tp_est)
    assert set(tp) == {"trees", "split_search", "init", "oblique"}
    assert tp["init"] == tp["oblique"] == 0 and tp["split_search"] <= tp["trees"] + 0.01
    co2 = backend.split_times(co2_est)
    assert co2["init"] + co2["oblique"] <= co2["split_search"] + 0.02
    # the sums themselves, on known per-tree figures
    fake = type("F", (), {"tree_stats_": [
        {"seconds": 1.0, "t_split": 0.5, "t_init": 0.1, "t_oblique": 0.2},
        {"seconds": 2.0, "t_split": 1.5, "t_init": 0.3, "t_oblique": 0.4}]})()
    assert backend.split_times(fake) == {"trees": 3.0, "split_search": 2.0,
                                         "init": 0.4, "oblique": 0.6}
    fake.tree_stats_ = [{"seconds": 1.0}]
    assert backend.split_times(fake) is None
    assert backend.split_times(object()) is None
    lines = timings._split_table({"two-probe": {"split_seconds": {
        "trees": 100.0, "split_search": 80.0, "init": 0.0, "oblique": 0.0}}},
        ["two-probe"], "##")
    assert "| Two-probe forest | 100 s | 80 s (80%) | – | – |" in lines


def test_stage_table_shows_cpu_in_run_order(tmp_path):
    """Stamps with the stage's CPU seconds and load averages (what the runner writes):
    the CPU seconds render as a column, in the order the stages finished, the load
    averages stay in the data; a table written so reads back as the earlier
    layout's was."""
    from pipelines.stamps import write_stamp

    run_dir = tmp_path / "r"
    (run_dir / "stamps").mkdir(parents=True)
    write_stamp(run_dir / "stamps" / "b.json", "train:b", "k", [], 90.0,
                extra={"cpu_seconds": 170.0, "load_average": [0.4, 2.1]})
    time.sleep(1.1)
    write_stamp(run_dir / "stamps" / "a.json", "evaluate:a", "k", [], 3.0)
    st = report.collect_timings(run_dir)["stages"]
    assert st["train:b"]["cpu_seconds"] == 170.0 and st["train:b"]["load_average"] == [0.4, 2.1]
    table = report.render_timings(run_dir)
    assert "| train:b | 90 s | 2.8 min |" in table and "→" not in table
    assert "| evaluate:a | 3.0 s |  |" in table
    assert table.index("| train:b |") < table.index("| evaluate:a |")
    (run_dir / "results.md").write_text(table.replace("## r", "## r\n\n#", 1))
    for p in (run_dir / "stamps").glob("*.json"):
        p.unlink()
    back = report.collect_timings(run_dir)["stages"]
    assert back["train:b"]["seconds"] == 90.0 and back["evaluate:a"]["seconds"] == 3.0


@pytest.mark.slow
def test_investigation_study_runs_and_renders(tmp_path):
    from facesegment.data.datasets import find_faces
    from facesegment.data.extract import extract_windows
    from pipelines import investigate

    data = make_dataset(tmp_path / "f", n_train=8, n_test=1)
    extract_windows(find_faces(data / "train"), tmp_path / "w.h5", n_windows=800, seed=0,
                    progress=False)
    ws = backend.read_windows(tmp_path / "w.h5")
    study = investigate.run_study(ws, trees=1, samples=300, depth=3, workers=1,
                                  log=lambda m: None)
    assert len(study["variants"]) == len(investigate.VARIANTS)
    assert all(0 <= r["accuracy"] <= 100 for r in study["variants"])
    co2 = [r for r in study["variants"] if r["kind"] == "co2"]
    assert all(r["params"]["oblique_min_samples"] >= 2 for r in co2)
    md = investigate.markdown(study)
    assert "| CO2 ν=1 η=1e-4 (the paper's) |" in md and "chance 12.5%" in md


# ----------------------------------------------------------- end to end

def _smoke_argv(data, workers=2):
    return ["--config", str(CONFIG), "--preset", "smoke", "--data", str(data),
            "--workers", str(workers), "all"]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One `make all` of the smoke preset on 8 training and 3 test faces, run
    once for this module: ``(root, err, copy)``, ``copy`` a copy of the whole
    folder made before any test changes it."""
    import contextlib
    import io
    import shutil

    root = tmp_path_factory.mktemp("smoke") / "run"    # the copy lies as deep: the
    data = make_dataset(root / "faces")                 # config's relative path is the same
    err, cwd = io.StringIO(), os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stderr(err):
            code = run.main(_smoke_argv(data))
    finally:
        os.chdir(cwd)
    assert code == 0, err.getvalue()[-3000:]
    copy = tmp_path_factory.mktemp("smoke-copy") / "run"
    shutil.copytree(root, copy, symlinks=True)
    return root, err.getvalue(), copy


@pytest.mark.slow
def test_smoke_pipeline_end_to_end(smoke_run, monkeypatch, capsys):
    tmp_path, err, _ = smoke_run
    data = tmp_path / "faces"
    monkeypatch.chdir(tmp_path)
    argv = _smoke_argv(data)
    rdir = tmp_path / "reports" / "runs" / "faces-smoke"
    for f in ("splits.json", "selection.json", "selection.md", "chosen.json",
              "stamps/timings/time-co2.json", "eval-axis.json", "eval-two-probe.json",
              "eval-co2.json", "eval-co2-best.json", "stamps/timings/time-co2-best.json",
              "results.md", "timings.json", "timings.md",
              "figures/figure3.png", "figures/figure4.png", "figures/confusion_co2.png"):
        assert (rdir / f).is_file(), (f, err[-3000:])
    for k in ("axis", "two-probe", "co2", "co2-best", "co2-nongreedy", "co2-pooled"):
        for n in (2, 4):
            assert (tmp_path / "models" / "faces-smoke" / f"{k}-{n}" / "model.json").is_file()
    best = backend.load_model(tmp_path / "models" / "faces-smoke" / "co2-best-4")
    assert best.kind == "co2-best" and best.params["init"] == "best"
    # non-greedy refinement of the top levels of CO2 trees is a kind of the pipeline
    ng = backend.load_model(tmp_path / "models" / "faces-smoke" / "co2-nongreedy-4")
    assert ng.kind == "co2-nongreedy" and ng.params["refine_depth"] == 3
    assert ng.params["init"] == "co2" and ng.params["n_epochs"] == 2
    assert "CO2, top levels non-greedy (ours)" in (rdir / "results.md").read_text()
    assert (rdir / "eval-co2-nongreedy.json").is_file()
    # structured sparsity: co2-best over 3x3 box means of the window
    pooled = backend.load_model(tmp_path / "models" / "faces-smoke" / "co2-pooled-4")
    assert pooled.kind == "co2-pooled" and pooled.layout.pool == 3
    assert pooled.arrays.n_features == 300 and pooled.mean.shape == (300,)
    assert pooled.arrays.weights.shape[1] == 300
    assert "CO2 + two-probe init (ours)" in (rdir / "results.md").read_text()
    # rotation forest: its splits are sparse rows of M = 3 window values
    rot = backend.load_model(tmp_path / "models" / "faces-smoke" / "rotation-4")
    assert rot.kind == "rotation" and rot.arrays.weights.shape == (0, 2883)
    assert rot.arrays.sparse_ptr.shape[0] > 1 and (np.diff(rot.arrays.sparse_ptr) <= 3).all()
    assert "| Rotation forest |" in (rdir / "results.md").read_text()
    assert "| train:co2-best |" in (rdir / "timings.md").read_text()  # stage times table
    ev = json.loads((rdir / "eval-co2.json").read_text())
    assert set(ev["trees"]) == {"2", "4"}
    # alpha re-chosen on the validation images with the final forest, both alphas scored
    fin = ev["alpha_final_forest"]
    assert fin["n_images"] == 2 and fin["n_trees"] == 4 and ev["alpha"] == fin["alpha"]
    assert max(fin["validation_jaccard"], key=lambda a: fin["validation_jaccard"][a]) in (
        repr(ev["alpha"]), str(ev["alpha"]))
    assert {repr(ev["alpha"]), repr(ev["alpha_selection_forests"])} <= set(ev["trees"]["4"]["alpha"])
    assert "chosen with each final 4-tree forest on the 2" in (rdir / "results.md").read_text()
    # beyond the paper: the position prior and the detector-aligned test protocol
    results = (rdir / "results.md").read_text()
    assert "Position prior and the detector-aligned protocol" in results
    assert "| position alone, no image" in results
    det = ev["detector"]
    assert det["n_found"] + det["n_missed"] == ev["n_images"] and set(det["trees"]) == {"2", "4"}
    # the crop rule is measured on training faces, carried by every model, used by the
    # detector-aligned protocol
    rule = json.loads((rdir / "prior.json").read_text())["crop_rule"]
    assert rule["n_found"] > 0 and rule["crop_rule"][0] > 0
    m = backend.load_model(tmp_path / "models" / "faces-smoke" / "co2-4")
    assert list(m.position.crop_rule) == rule["crop_rule"]
    info = json.loads((tmp_path / "data" / "aligned" / "faces-smoke" / "test" / "aligned.json")
                      .read_text())
    assert info["crop_rule"] == rule["crop_rule"]
    # the auto-context cascade of the smoke config: one folder, scored like the forests
    from facesegment.autocontext.cascade import Cascade

    casc = backend.load_model(tmp_path / "models" / "faces-smoke" / "ac-axis_axis-4")
    assert isinstance(casc, Cascade) and casc.stage_kinds == ["axis", "axis"]
    assert not casc.spec.prior and casc.position is not None  # prior_planes off; beta > 0
    stage1 = backend.load_model(tmp_path / "models" / "faces-smoke" / "axis-4")
    assert casc.spec.stage1_alpha == stage1.metrics["alpha"]    # stage1_maps = "decisions"
    assert casc.spec.stage1_beta == stage1.metrics["beta"]
    from pipelines.config import q_features      # [cascade] q, of window + context values
    n_ctx = casc.stages[0].layout.n_features + casc.spec.n_planes
    assert casc.final.params["max_features"] == q_features("p^0.7", n_ctx)
    ac = json.loads((rdir / "eval-ac-axis_axis.json").read_text())
    assert set(ac["trees"]) == {"2", "4"} and ac["detector"]["trees"]
    assert "| Auto-context axis → axis |" in results
    assert (rdir / "figures" / "confusion_ac-axis_axis.png").is_file()
    # [smoothing] (models = "cascades"): sigma chosen on validation, scored on test
    assert "sigma" not in backend.load_model(tmp_path / "models" / "faces-smoke"
                                             / "axis-4").metrics
    for kind in ("ac-axis_axis",):
        m = backend.load_model(tmp_path / "models" / "faces-smoke" / f"{kind}-4")
        sel = m.metrics["sigma_selection"]
        assert sel["n_images"] == 2 and set(sel["validation_jaccard"]) == {"0.0", "1.0", "2.0"}
        table = sel["validation_jaccard"]
        assert table[repr(m.metrics["sigma"])] == max(table.values())
        e = json.loads((rdir / f"eval-{kind}.json").read_text())
        if m.metrics["sigma"] > 0:
            assert e["smoothed"]["sigma"] == m.metrics["sigma"] and e["smoothed"]["detector"]
            assert f"smoothed (σ = {m.metrics['sigma']:g})" in results
        else:
            assert e["smoothed"] is None
    # the smoothing study on the finished run: sigma 0 is the evaluation's own score
    from pipelines import smoothing

    assert smoothing.main(["--run", "faces-smoke", "--kinds", "axis", "--trees", "4",
                           "--sigmas", "0", "1", "--workers", "2"]) == 0
    sm = json.loads((rdir / "smoothing.json").read_text())["kinds"]["axis"]
    ev_axis = json.loads((rdir / "eval-axis.json").read_text())
    assert sm["alone"]["test"]["0.0"] == \
        ev_axis["trees"]["4"]["alpha"][repr(ev_axis["alpha"])]["mean_jaccard"]
    assert ev["n_images"] == 3
    _check_alpha_is_the_models(tmp_path, data, rdir)
    capsys.readouterr()
    text = (rdir / "results.md").read_text()
    assert "CO2 forest" in text and "40.33 / 42.55" in text
    assert (tmp_path / "docs" / "results.md").is_file()
    assert (tmp_path / "docs" / "timings.md").is_file()
    # the 2-tree model folder scores what the 2-tree prefix scored
    from facesegment.dense import predict_proba_raw
    from facesegment.data.imageio import read_image

    m4 = backend.load_model(tmp_path / "models" / "faces-smoke" / "co2-4")
    m2 = backend.load_model(tmp_path / "models" / "faces-smoke" / "co2-2")
    img = read_image(data / "test" / "face_000.png")
    np.testing.assert_allclose(predict_proba_raw(m2, img), predict_proba_raw(m4, img, n_trees=2),
                               atol=1e-6)
    # a second run finds everything up to date
    assert run.main(argv) == 0
    err = capsys.readouterr().err
    assert "0 stage(s) ran" in err or "ran: none" in err, err[-2000:]
    # changing only the evaluation reruns evaluation and what follows, not training
    argv2 = argv[:-1] + ["--force", "evaluate:axis", "all"]
    assert run.main(argv2) == 0
    err = capsys.readouterr().err
    assert "[evaluate:axis] running" in err and "[train:axis] up to date" in err
    # a time-<kind>.json of the earlier layout goes when the time stage runs again
    (rdir / "time-axis.json").write_text('{"kind": "axis", "trees": {}}')
    assert run.main(argv[:-1] + ["--force", "time:axis", "all"]) == 0
    err = capsys.readouterr().err
    assert not (rdir / "time-axis.json").exists() and "[report] running" in err
    # a chosen.json written before a kind existed: a dry run says what would run
    # (it read chosen[kind] and stopped on a KeyError traceback)
    chosen = json.loads((rdir / "chosen.json").read_text())
    del chosen["co2-nongreedy"]
    (rdir / "chosen.json").write_text(json.dumps(chosen))
    assert run.main(argv[:-1] + ["--dry-run", "all"]) == 0
    err = capsys.readouterr().err
    assert "[select] would run" in err and "[train:co2-nongreedy] would run" in err


#: What a rerun may change in a run folder: the measured times, and nothing else.
TIMING_FILES = {"timings.json", "timings.md"}


def _run_folder_bytes(root, rdir):
    """Every file of the run folder but the git-ignored stamps/, plus docs/*.md."""
    out = {p.relative_to(rdir).as_posix(): p.read_bytes() for p in sorted(rdir.rglob("*"))
           if p.is_file() and p.relative_to(rdir).parts[0] != "stamps"}
    for name in ("results.md", "timings.md"):
        out[f"docs/{name}"] = (root / "docs" / name).read_bytes()
    return out


@pytest.mark.slow
def test_a_rerun_changes_only_the_timings(smoke_run, monkeypatch, capsys):
    """`make all` run twice, every stage redone the second time (stamps removed, as
    on another machine; other --workers): every file of the run folder except timings.json and
    timings.md is byte-identical (scores, models' sizes, selection, figures, the
    results pages), so after `make all` on a fresh clone `git status` shows only
    what a rerun legitimately changes.  No tracked file holds a time, a load, a
    thread or core count, or an absolute path."""
    tmp_path = smoke_run[2]            # the first run (2 workers), copied untouched
    monkeypatch.chdir(tmp_path)
    argv = _smoke_argv(tmp_path / "faces")
    rdir = tmp_path / "reports" / "runs" / "faces-smoke"
    first = _run_folder_bytes(tmp_path, rdir)
    timings1 = json.loads((rdir / "timings.json").read_text())
    import shutil

    shutil.rmtree(rdir / "stamps")
    # again, on one thread: how the machine runs the stages is no part of the results
    argv[argv.index("--workers") + 1] = "1"
    assert run.main(argv) == 0, capsys.readouterr().err[-3000:]
    err = capsys.readouterr().err
    assert "[train:axis] running" in err and "[figures] running" in err, err[-2000:]
    second = _run_folder_bytes(tmp_path, rdir)
    assert set(first) == set(second)
    # the output manifests record every write (with the timings' hashes): left out
    changed = sorted(f for f in first if first[f] != second[f]
                     and not f.endswith(".facesegment-outputs"))
    assert set(changed) <= TIMING_FILES | {"docs/timings.md"}, changed
    # the times are all in timings.json (and were measured again)
    from pipelines.config import KINDS

    timings = json.loads((rdir / "timings.json").read_text())
    assert set(timings["train"]) == set(timings["time"]) == set(KINDS) | {"ac-axis_axis"}
    assert timings["train"]["co2"]["fit_seconds"] >= 0 and timings["train"]["co2"]["load_average"]
    assert timings["time"]["axis"]["trees"]["4"]["ms_per_image"] >= 0
    assert len(timings["select"]["settings"]) == len(json.loads(
        (rdir / "selection.json").read_text())["settings"])
    assert {"data", "select", "train:axis", "time:co2", "figures"} <= set(timings["stages"])
    assert timings["stages"]["figures"]["finished"] >= timings1["stages"]["figures"]["finished"]
    assert "| train:axis |" in (rdir / "timings.md").read_text()
    assert timings1["train"]["axis"]["threads"] == 2 and timings["train"]["axis"]["threads"] == 1
    assert "workers" not in json.loads((rdir / "config.json").read_text())["run"]
    for name, blob in second.items():
        if name in TIMING_FILES or name.startswith("docs/timings") or name.endswith(".png"):
            continue
        text = blob.decode()
        assert str(tmp_path) not in text, name
        for word in ("seconds", "load_average", "cpu_count", "threads", "ms_per_image",
                     "Load average", " ms (", "finished"):
            assert word not in text, (name, word)


def _check_alpha_is_the_models(tmp_path, data, rdir):
    """alpha is chosen once (train) and stored in every model folder: `segment` and
    `evaluate` use the alpha of the published results, and `facesegment evaluate`
    on the pipeline's test images, mode and pixel stride gives its test scores."""
    from facesegment.cli import main as cli
    from facesegment.forest.registry import KINDS as TABLE
    from facesegment.dense import default_alpha, default_beta
    from pipelines.config import KINDS

    models = tmp_path / "models" / "faces-smoke"
    kinds = [k for k in TABLE if k in KINDS]
    evals = {k: json.loads((rdir / f"eval-{k}.json").read_text()) for k in kinds}
    prior = json.loads((rdir / "prior.json").read_text())
    assert 0 < prior["test"]["mean_jaccard"] <= 100 and prior["prior"]["n_images"] > 0
    for k, ev in evals.items():
        train = json.loads((rdir / f"train-{k}.json").read_text())
        # the forest alone is scored at its own alpha; the models keep (alpha, beta)
        # chosen with the position prior, and evaluate scores that pair too
        assert train["alpha_no_prior"] == ev["alpha"]
        assert train["alpha_final_forest"] == ev["alpha_final_forest"] is not None
        assert train["alpha_selection_forests"] == ev["alpha_selection_forests"]
        assert ev["beta"] == 0.0
        if train["beta"] > 0:
            assert ev["with_prior"]["alpha"] == train["alpha"]
            assert ev["with_prior"]["beta"] == train["beta"]
        else:
            assert ev["with_prior"] is None
        for n in (2, 4):
            model = backend.load_model(models / f"{k}-{n}")
            assert default_alpha(model) == train["alpha"], (k, n)
            assert default_beta(model) == train["beta"] and model.position is not None
            assert model.metrics["alpha_final_forest"] == ev["alpha_final_forest"]
    cfg = load_config(CONFIG, "smoke", data=str(data))["evaluate"]
    out = tmp_path / "cli-eval"
    assert cli(["evaluate", "--model", *[str(models / f"{k}-4") for k in kinds],
                "--data", str(data), "--out", str(out), "-q", "--workers", "2",
                "--mode", cfg["mode"], "--pixel-stride", str(cfg["pixel_stride"])]) == 0
    for k, ev in evals.items():
        mine = json.loads((out / f"{k}-4.json").read_text())
        same = ev["with_prior"] or ev       # the CLI uses the model's (alpha, beta)
        pipe = same["trees"]["4"]["alpha"][repr(same["alpha"])]
        assert mine["alpha"] == same["alpha"] and mine["n_images"] == ev["n_images"]
        assert mine["summary"]["class_average_jaccard"] == pipe["mean_jaccard"]
        assert mine["summary"]["confusion"] == pipe["confusion"]
        assert mine["per_image"] == same["per_image"]


def test_stage_keys_follow_the_alpha(tmp_path):
    """train's key holds what the alpha stored in the models depends on (the
    selection's alpha, alpha_from, the validation grid); evaluate's does not:
    it reads the alpha from the model folder (an input)."""
    from pipelines import stages

    cfg = load_config(CONFIG, "smoke", data="d")
    ctx = Context(cfg, root=tmp_path, log=lambda m: None)
    chosen = {"axis": {"q": "p^0.7", "alpha": 0.5, "validation_jaccard": 1.0}}
    write_json_atomic(ctx.reports / "chosen.json", chosen)
    train, ev = stages._train_config("axis"), stages._eval_config("axis")
    t0, e0 = train(ctx), ev(ctx)
    for section, key, value in (("evaluate", "alpha_from", "selection"),
                                ("select", "pixel_stride", 2), ("select", "alphas", [0.25]),
                                ("select", "n_images", 1), ("evaluate", "mode", "full")):
        old, cfg[section][key] = cfg[section][key], value
        assert train(ctx) != t0, key
        assert key == "mode" or ev(ctx) == e0, key
        cfg[section][key] = old
    cfg["evaluate"]["alpha_from"] = "selection"    # the validation grid is not used then
    t1 = train(ctx)
    cfg["select"]["pixel_stride"] = 2
    assert train(ctx) == t1
    write_json_atomic(ctx.reports / "chosen.json", {"axis": chosen["axis"] | {"alpha": 1.0}})
    t2 = train(ctx)
    assert t2 != t1 and ev(ctx) == e0
    cfg["evaluate"]["pixel_stride"] = 2             # evaluate's own keys: not train's
    assert ev(ctx) != e0 and train(ctx) == t2
    st = stages.build_stages()
    assert ctx.reports / "splits.json" in st["train:axis"].inputs(ctx)
    assert ctx.model_dir("axis", 4) in st["evaluate:axis"].inputs(ctx)


def test_recopied_data_is_up_to_date_but_an_edited_image_redoes_extraction(
        tmp_path, monkeypatch, capsys):
    data = make_dataset(tmp_path / "faces", n_train=6, n_test=2)
    monkeypatch.chdir(tmp_path)
    argv = ["--config", str(CONFIG), "--preset", "smoke", "--data", str(data),
            "--workers", "1", "extract"]
    assert run.main(argv) == 0
    capsys.readouterr()
    for p in sorted(data.rglob("*.png")):  # a fresh copy: same bytes, new mtimes
        os.utime(p, ns=(10**18, 10**18))
    assert run.main(argv) == 0
    err = capsys.readouterr().err
    assert "[data] up to date" in err and "[extract] up to date" in err, err
    from facesegment.data.imageio import read_image, write_png_atomic

    img = read_image(data / "train" / "face_000.png")
    img[20:30, 20:30] = 255 - img[20:30, 20:30]  # an image edited in place, same name
    write_png_atomic(data / "train" / "face_000.png", img)
    assert run.main(argv) == 0
    err = capsys.readouterr().err
    assert "[data] running" in err and "[extract] running" in err, err


def test_stage_key_does_not_depend_on_where_the_checkout_lives(tmp_path, monkeypatch):
    for root in (tmp_path / "a", tmp_path / "b"):
        (root / "data").mkdir(parents=True)
        (root / "data" / "x.txt").write_text("same")
    keys = []
    for root in (tmp_path / "a", tmp_path / "b"):
        monkeypatch.chdir(root)
        keys.append(stamps.stage_key("cfg", [root / "data" / "x.txt"]))
        assert keys[-1] == stamps.stage_key("cfg", ["data/x.txt"])
    assert keys[0] == keys[1]
    (tmp_path / "b" / "data" / "x.txt").write_text("changed")
    assert stamps.stage_key("cfg", ["data/x.txt"]) != keys[0]


def test_config_defaults_live_in_config_toml_only(tmp_path):
    """A configuration file of one's own overrides the packaged config.toml, whose
    values are the defaults of every key (the schema holds validators only)."""
    from pipelines.config import DEFAULT_CONFIG, SCHEMA

    mine = write_config(tmp_path, "[forest]\nn_trees = 8\neval_trees = [4, 8]\n")
    cfg = load_config(mine, preset="smoke")
    base = load_config(DEFAULT_CONFIG, preset="smoke")
    assert cfg["forest"]["n_trees"] == 4  # the preset still applies on top
    assert cfg["select"] == base["select"] and cfg["forest.co2"] == base["forest.co2"]
    assert all(callable(v) for table in SCHEMA.values() for v in table.values())
    assert all(k in base[s] for s, table in SCHEMA.items() for k in table)


def test_pipeline_sigterm_unwinds_like_ctrl_c():
    """`make all` under a job scheduler: SIGTERM is one line and exit 143."""
    import signal
    import subprocess
    import sys
    import time

    code = ("import sys, time\n"
            "import pipelines.run as r\n"
            "r.load_config = lambda *a, **k: (print('started', flush=True), time.sleep(60))\n"
            "sys.exit(r.main(['data']))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "terminated (SIGTERM)" in err and "Traceback" not in err


def test_smoothing_covers_the_models_the_config_names():
    """[smoothing] models: cascades only, non-oblique forests too, or all; [] sigmas: none;
    the forests' train configuration names [smoothing] only when it covers them."""
    from facesegment.autocontext.cascade import Cascade
    from facesegment.autocontext.context import ContextSpec
    from pipelines import smoothing
    from tests.dense.test_inference import random_model

    axis = random_model(1, kind="axis", n_trees=1, max_depth=3, kinds=("axis",))
    co2 = random_model(2, n_trees=1, max_depth=3, kinds=("oblique",))
    casc = Cascade([axis, axis], ContextSpec())
    table = {"cascades": (False, False, True), "non-oblique": (True, False, True),
             "all": (True, True, True)}
    for models, want in table.items():
        cfg = {"smoothing": {"sigmas": [1.0], "models": models}}
        assert tuple(smoothing.applies(cfg, m) for m in (axis, co2, casc)) == want
        assert smoothing.for_forests(cfg) == (models != "cascades")
    off = {"smoothing": {"sigmas": [], "models": "all"}}
    assert not any(smoothing.applies(off, m) for m in (axis, co2, casc))


def test_a_chain_that_starts_a_longer_one_is_its_first_stages(tmp_path, monkeypatch, capsys):
    """chains ["axis>axis", "axis>axis>axis"]: the 2-stage cascade is not fitted again but
    taken from the 3-stage one (the same stages fit_cascade would train), with its own
    alpha/beta/sigma; both are evaluated."""
    text = CONFIG.read_text().replace(
        'cascade = { chains = ["axis>axis"],', 'cascade = { chains = ["axis>axis", "axis>axis>axis"],')
    assert '"axis>axis>axis"' in text
    cfg = tmp_path / "config.toml"
    cfg.write_text(text)
    data = make_dataset(tmp_path / "faces")
    monkeypatch.chdir(tmp_path)
    argv = ["--config", str(cfg), "--preset", "smoke", "--data", str(data), "--workers", "2",
            "evaluate"]
    assert run.main(argv) == 0
    err = capsys.readouterr().err
    assert err.index("[train:ac-axis_axis_axis] running") < err.index("[train:ac-axis_axis] running")
    models = tmp_path / "models" / "faces-smoke"
    two, three = (backend.load_model(models / f"{n}-4") for n in ("ac-axis_axis", "ac-axis_axis_axis"))
    assert len(two.stages) == 2 and len(three.stages) == 3
    for a, b in zip(two.stages, three.stages[:2]):
        for field in ("left", "feature", "threshold", "value"):
            np.testing.assert_array_equal(getattr(a.arrays, field), getattr(b.arrays, field))
    rdir = tmp_path / "reports" / "runs" / "faces-smoke"
    assert json.loads((rdir / "train-ac-axis_axis.json").read_text())["alpha"] == two.metrics["alpha"]
    assert two.provenance["first_stages_of"] == "ac-axis_axis_axis"
    assert (rdir / "eval-ac-axis_axis.json").is_file() and (rdir / "eval-ac-axis_axis_axis.json").is_file()


def test_timings_name_integer_dot_products_integer_ops():
    """Forests with int8/int16 rows do integer multiply-adds: the timings page
    says so instead of calling them FLOP (float32 rows keep GFLOP)."""
    from pipelines import timings

    def entry(arith):
        return {"trees": {"32": {"ms_per_image": 120.0, "cpu_ms_per_image": 240.0,
                                 "oblique_visits_per_image": 62500.0 * 270,
                                 "oblique_gflop_per_image": 23.0,
                                 "oblique_gflops_per_cpu_second": 95.0,
                                 **({"dot_arithmetic": arith} if arith else {})}}}

    for arith, want, not_want in (("integer", "23.0 G integer ops", "GFLOP"),
                                  ("float32", "23.0 GFLOP of dot products", "integer"),
                                  (None, "23.0 GFLOP of dot products", "integer")):
        text = "\n".join(timings._time_table({}, {"co2-pooled": entry(arith)},
                                              ["co2-pooled"], [32], "##"))
        line = [t for t in text.splitlines() if "oblique nodes per pixel" in t][0]
        assert want in line and not_want not in line, line
