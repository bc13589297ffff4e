"""The forests examples of docs/forests.md and README.md run and print what they claim."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["docs/forests.md"])
def test_forests_doc_example_runs(doc, capsys):
    path = ROOT / doc
    blocks = [b for b in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
              if "TwoProbeForest(" in b]
    assert blocks, f"{doc} has no python example of the three forests"
    exec(compile(blocks[0], str(path), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["AxisAlignedForest", "TwoProbeForest",
                                                 "CO2Forest"]
    assert all(line.endswith("True True") for line in out), out


def test_forests_doc_scikit_learn_example_runs(capsys):
    path = ROOT / "docs" / "forests.md"
    blocks = [b for b in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
              if "GridSearchCV(" in b]
    assert blocks, "docs/forests.md has no scikit-learn example"
    exec(compile(blocks[0], str(path), "exec"), {})
    assert capsys.readouterr().out.split() == ["True", "True", "True"]


def test_readme_forest_example_runs_and_saves_a_model(tmp_path, monkeypatch, capsys):
    from facesegment.models import load_model

    path = ROOT / "README.md"
    blocks = [b for b in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
              if "CO2Forest(" in b]
    assert blocks, "README.md has no forest example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], str(path), "exec"), {})
    assert float(capsys.readouterr().out.split()[-1]) > 0.6
    assert load_model(tmp_path / "models" / "demo").kind == "co2"
