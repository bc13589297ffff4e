"""Adding a family: a forest class defined outside the library, with its own split
family and constraints table, and one registry row registered at run time,
reaches make_estimator, `facesegment train` and model folders; with one design
row more (pipelines/design.py), the pipeline's config and selection.  The
fixture removes the row again."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from facesegment.cli import main
from facesegment.forest.registry import KINDS, kind_names, kind_of, make_estimator
from facesegment.modelio.model import Model, save_model
from facesegment.models import load_model
from tests.forest import median_family
from tests.forest.median_family import MedianForest, MedianSplit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def median_kind():
    row = median_family.register()
    try:
        yield row
    finally:
        median_family.unregister()
    assert median_family.NAME not in KINDS


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, (n, 8), dtype=np.uint8)
    return X, (X[:, 2] > 127).astype(int) + (X[:, 5] > 200)


def test_the_row_makes_a_fitted_forest_of_median_cuts(median_kind):
    X, y = _data()
    est = make_estimator("median", n_estimators=8, random_state=0).fit(X, y)
    assert isinstance(est, MedianForest) and kind_of(est) == "median"
    assert est.score(X, y) > 0.7  # chance is below 0.5
    fa = est.forest_
    inner = fa.left >= 0
    assert inner.any() and (fa.feature2[inner] == -1).all() and fa.weights.shape[0] == 0
    assert (fa.threshold[inner] % 0.5 == 0).all()  # medians of integers
    again = make_estimator("median", n_estimators=8, random_state=0, n_jobs=2).fit(X, y)
    assert again.forest_.threshold.tobytes() == fa.threshold.tobytes()
    strict = make_estimator("median", n_estimators=8, random_state=0, min_gain=0.2).fit(X, y)
    assert strict.forest_.n_nodes < fa.n_nodes
    with pytest.raises(ValueError, match="min_gain=-1 is invalid for MedianForest"):
        make_estimator("median", min_gain=-1).fit(X, y)


def test_model_folder_round_trip(median_kind, tmp_path):
    X, y = _data()
    est = make_estimator("median", n_estimators=3, random_state=1, min_gain=0.01).fit(X, y)
    model = load_model(save_model(Model.from_estimator(est), tmp_path / "m"))
    assert model.kind == "median" and model.params["min_gain"] == 0.01
    back = model.to_estimator()
    assert isinstance(back, MedianForest) and back._split_family is MedianSplit
    assert back.predict_proba(X).tobytes() == est.predict_proba(X).tobytes()


def test_train_command_takes_the_kind_and_its_generated_option(median_kind, tmp_path,
                                                               capsys):
    from facesegment.commands import train
    from tests.test_cli_train import _windows_file

    windows = tmp_path / "w.h5"
    _windows_file(windows)
    assert "median" in kind_names(task="classify") and "median" in train.DESCRIPTION
    out = tmp_path / "model"
    argv = ["train", "--kind", "median", "--windows", str(windows), "--trees", "2",
            "--workers", "1", "--calibrate", "none", "-q", "--seed", "3"]
    assert main(argv + ["--out", str(out), "--min-gain", "0.05", "--max-depth", "5"]) == 0
    model = load_model(out)
    assert model.kind == "median" and model.params["min_gain"] == 0.05
    assert model.params["max_depth"] == 5 and int(model.arrays.depth.max()) <= 5
    capsys.readouterr()
    assert main(argv + ["--out", str(tmp_path / "m2"), "--pairs", "3"]) == 2
    assert "--pairs does not apply to --kind median" in capsys.readouterr().err
    assert main(argv + ["--out", str(tmp_path / "m3"), "--min-gain", "nan"]) == 2
    assert "--min-gain nan: out of range for --kind median" in capsys.readouterr().err
    assert main(["train", "--kind", "axis", "--windows", str(windows), "--out",
                 str(tmp_path / "m4"), "--min-gain", "0.1"]) == 2
    assert "--min-gain does not apply to --kind axis" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "smallest information gain a median cut needs (default 0.0)" in " ".join(
        capsys.readouterr().out.split())


def test_without_the_row_nothing_knows_the_kind():
    assert "median" not in KINDS
    with pytest.raises(SystemExit):
        main(["train", "--kind", "median", "--windows", "w.h5", "--out", "m"])


def test_pipeline_config_and_selection_take_the_kind(tmp_path):
    """The pipeline's modules read the table when imported: a fresh interpreter
    registers the row first, then loads a config with its section and grid."""
    script = textwrap.dedent(f"""
        import numpy as np
        from tests.forest import median_family
        median_family.register()
        median_family.register_in_pipeline()
        from pipelines import backend, config, selection
        assert "median" in config.KINDS and "forest.median" in config.SCHEMA
        toml = open({str(ROOT / 'pipelines/config.toml')!r}).read()
        toml += '\\n[forest.median]\\nmax_depth = 4\\n'
        toml = toml.replace('[evaluate]', 'median_gain = [0.0, 0.05]\\n\\n[evaluate]', 1)
        open({str(tmp_path / 'c.toml')!r}, 'w').write(toml)
        cfg = config.load_config({str(tmp_path / 'c.toml')!r})
        assert cfg["forest.median"]["max_depth"] == 4
        settings = selection.grids(cfg)["median"]
        assert settings == [{{"min_gain": 0.0}}, {{"min_gain": 0.05}}], settings
        bad = toml.replace('max_depth = 4', 'min_gain = -1')
        open({str(tmp_path / 'bad.toml')!r}, 'w').write(bad)
        try:
            config.load_config({str(tmp_path / 'bad.toml')!r})
        except config.ConfigError as exc:
            assert "min_gain" in str(exc), exc
        else:
            raise AssertionError("min_gain = -1 was accepted")
        layout = config.DEFAULT_LAYOUT
        params = selection.estimator_params(cfg, "median", settings[1], layout)
        est = backend.make_estimator("median", params, n_trees=2, seed=0, workers=1)
        X = np.random.default_rng(0).integers(0, 256, (200, 6), dtype=np.uint8)
        est.fit(X, X[:, 0] > 127)
        assert type(est).__name__ == "MedianForest" and est.min_gain == 0.05
        assert est.max_depth == 4
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
