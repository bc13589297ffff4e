"""The README's generated parts: the table of forest kinds, from the registry.

``python -m pipelines.readme`` rewrites the block between the ``kinds:start``
and ``kinds:end`` markers of README.md (``make readme``); ``--check`` exits 1
when the block is out of date (the tests run the same comparison).
"""

import argparse
import sys
from pathlib import Path

from facesegment.forest import registry

from .design import DESIGN

START, END = "<!-- kinds:start -->", "<!-- kinds:end -->"
README = Path(__file__).resolve().parent.parent / "README.md"


def kinds_table():
    """The kinds as a Markdown table: name, estimator class, its task, what it
    is, and whether the face pipeline trains it."""
    rows = ["| kind | estimator | task | what it is | face pipeline |",
            "| --- | --- | --- | --- | :---: |"]
    for kind in registry.KINDS.values():
        fixed = ", ".join(f"{k}={v!r}" for k, v in kind.fixed.items())
        estimator = f"`{kind.estimator}({fixed})`"
        rows.append(f"| `{kind.name}` | {estimator} | {kind.task} | {kind.description} | "
                    f"{'yes' if kind.name in DESIGN else ''} |")
    return "\n".join(rows)


def with_table(text):
    """``text`` with the block between the markers replaced by :func:`kinds_table`."""
    head, sep, rest = text.partition(START)
    if not sep or END not in rest:
        raise ValueError(f"README.md has no {START} ... {END} block")
    return f"{head}{START}\n{kinds_table()}\n{END}{rest.partition(END)[2]}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 (and change nothing) when the table is out of date")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    new = with_table(text)
    if args.check:
        if new != text:
            print("README.md: the kinds table is out of date; run: make readme", file=sys.stderr)
            return 1
        return 0
    if new != text:
        README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
