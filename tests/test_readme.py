"""The README: a product page whose kinds table is the registry's."""

import re
from pathlib import Path

from pipelines.readme import README, kinds_table, with_table
from facesegment.forest.registry import KINDS

ROOT = Path(__file__).resolve().parent.parent


def test_the_kinds_table_is_generated_from_the_registry():
    text = README.read_text(encoding="utf-8")
    assert with_table(text) == text, "README.md's kinds table is stale: run make readme"
    for name in KINDS:
        assert f"| `{name}` |" in kinds_table()


def test_the_readme_is_a_product_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make test" in text and "make all" in text
    first_table = text[text.index("## Results"):]
    rows = [ln for ln in first_table.splitlines() if ln.startswith("|")]
    assert len(rows[:rows.index(next(r for r in rows if r.startswith("| *reference")))]) < 25


def test_no_text_speaks_of_how_the_work_was_organised():
    said = re.compile(r"\bsessions?\b|issue #\d", re.IGNORECASE)
    bad = []
    for folder in ("docs", "facesegment", "pipelines", "tests", "benchmarks", "notebooks"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".md", ".py", ".toml", ".ipynb") or path == Path(__file__):
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if said.search(line) and "InferenceSession" not in line:
                    bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:80]}")
    for name in ("README.md", "CHANGELOG.md"):
        for i, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
            if said.search(line):
                bad.append(f"{name}:{i}")
    assert not bad, "\n".join(bad[:20])
