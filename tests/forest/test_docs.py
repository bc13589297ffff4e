"""The forests example of docs/forests.md and README.md runs and prints what it claims."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["docs/forests.md", "README.md"])
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


def test_readme_scikit_learn_example_runs(capsys):
    path = ROOT / "README.md"
    blocks = [b for b in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
              if "GridSearchCV(" in b]
    assert blocks, "README.md has no scikit-learn example"
    exec(compile(blocks[0], str(path), "exec"), {})
    assert capsys.readouterr().out.split() == ["True", "True", "True"]
