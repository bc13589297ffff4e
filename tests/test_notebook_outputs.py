"""The walkthrough notebook is committed with its outputs (``make notebook``
executes it from the shipped models), so it reads well on a code host."""

import json
import re

from tests.test_readme import ROOT

NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"


def test_every_code_cell_is_committed_with_its_outputs():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c.get("outputs") for c in code), \
        [i for i, c in enumerate(code) if not c.get("outputs")]
    outputs = [o for c in code for o in c["outputs"]]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum(bool({"image/png", "image/jpeg"} & set(o.get("data", {}))) for o in outputs) >= 2
    counts = [c.get("execution_count") for c in code]
    assert counts == list(range(1, len(code) + 1))       # run top to bottom, once


def test_the_saved_notebook_stays_small():
    """Its figures are embedded shrunk (JPEG, 760 pixels wide): no megabytes of
    base64 images in the repository."""
    assert NOTEBOOK.stat().st_size < 1_000_000, NOTEBOOK.stat().st_size


def test_make_notebook_executes_it():
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^notebook:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe and "-m pipelines.notebook" in recipe.group(1)
