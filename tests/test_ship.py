"""Packaging a run's model (pipelines/ship.py, `make model`) and the pipeline's
STAGE:KIND targets (pipelines/run.py)."""

import hashlib
import json

import pytest

from pipelines import run
from tests.test_position import model_with_prior


def _fake_run(tmp_path, kind="two-probe", n=4):
    from facesegment.modelio.model import save_model
    from facesegment.rule import DecisionRule

    model = model_with_prior(21, n_trees=n, max_depth=4)
    model.kind = "axis"
    model.metrics.update(fit_seconds=12.5, tree_seconds=[1.0] * n, alpha=0.75, beta=0.5)
    model.provenance = {"windows": "/home/someone/data/windows/x.h5", "preset": "default",
                        "n_windows": 800}
    model.rule = DecisionRule(alpha=0.75, beta=0.5, sigma=1.0)
    save_model(model, tmp_path / "models" / "r" / f"{kind}-{n}")
    rdir = tmp_path / "reports" / "r"
    rdir.mkdir(parents=True)

    def block(a, v):
        return {"trees": {str(n): {"alpha": {repr(a): {"mean_jaccard": v}}}}}

    cfg = {"forest": {"n_trees": n}, "data": {"n_validation": 100},
           "extract": {"n_windows": 800}, "select": {"n_images": 20},
           "run": {"seed": 0, "name": "r"}}
    (rdir / f"train-{kind}.json").write_text(json.dumps({"params": {"n_pairs": 100}}))
    (rdir / f"eval-{kind}.json").write_text(json.dumps(
        block(0.5, 30.0) | {"alpha": 0.5, "n_images": 3, "pixel_stride": 3,
                            "with_prior": block(0.75, 45.0) | {"alpha": 0.75, "beta": 0.5},
                            "detector": block(0.5, 29.0) | {
                                "alpha": 0.5, "n_found": 2, "n_missed": 1,
                                "with_prior": block(0.75, 44.0) | {"alpha": 0.75}},
                            "smoothed": {"alpha": 0.75, "beta": 0.5, "sigma": 1.0,
                                         "test": {"mean_jaccard": 46.0},
                                         "detector": {"mean_jaccard": 45.5}}}))
    return cfg


def test_ship_writes_the_model_without_machine_metrics_and_its_card(tmp_path):
    from facesegment.models import load_model
    from pipelines.ship import ship

    cfg = _fake_run(tmp_path)
    kw = dict(models_root=tmp_path / "models", reports_root=tmp_path / "reports",
              dest=tmp_path / "pkg", log=lambda m: None)
    (tmp_path / "pkg").mkdir()
    out = ship(cfg, "two-probe", "mine", **kw)
    model = load_model(out)
    assert model.rule.to_dict() == {"alpha": 0.75, "beta": 0.5, "sigma": 1.0}
    assert "fit_seconds" not in model.metrics and "tree_seconds" not in model.metrics
    assert "/home/someone" not in (out / "model.json").read_text()
    card = (out / "MODEL_CARD.md").read_text()
    assert "| forest alone | 0.5 | 0 | 0 | 30.00 | 29.00 |" in card
    assert "| with the position prior | 0.75 | 0.5 | 0 | 45.00 | 44.00 |" in card
    assert "46.00 | 45.50 |" in card and "dlib finds 2 of 3 test faces" in card
    assert "not measured" in card              # no time stage file in this fake run
    # shipping again gives the same bytes (nothing of the machine or the time)
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()}
    out = ship(cfg, "two-probe", "mine", **kw)
    assert digest == {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                      for p in out.iterdir()}


def test_stage_kind_targets_and_their_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):
        run.main(["--config", str(tmp_path / "c.toml"), "banana"])
    assert "invalid choice: 'banana'" in capsys.readouterr().err
    cfg = tmp_path / "c.toml"
    cfg.write_text("[data]\npath = 'nowhere'\n")
    assert run.main(["--config", str(cfg), "--dry-run", "evaluate:no-such-kind"]) == 2
    err = capsys.readouterr().err
    assert "has no stage 'evaluate:no-such-kind'" in err and "evaluate:two-probe" in err
    assert run.main(["--config", str(cfg), "--dry-run", "train:axis"]) == 0
    err = capsys.readouterr().err
    assert "[train:axis] would run" in err and "[train:co2]" not in err
