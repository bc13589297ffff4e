"""The Python example of docs/forests.md runs and prints what it claims."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "forests.md"


def test_forests_doc_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "docs/forests.md has no python example"
    exec(compile(blocks[0], str(DOC), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["AxisAlignedForest", "TwoProbeForest",
                                                 "CO2Forest"]
    assert all(line.endswith("True True") for line in out), out
