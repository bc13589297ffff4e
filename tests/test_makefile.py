"""`make clean` removes only what the build made: none of the paths its recipe
deletes holds a file git tracks (the results under reports/runs, the shipped
model, READMEs), and every one of them is ignored by git."""

import fnmatch
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def recipe_paths(target):
    """The paths of the ``rm -rf`` lines of ``target``'s recipe in the Makefile."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    m = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M)
    assert m, f"no {target} target"
    paths = []
    for line in m.group(1).splitlines():
        words = line.split()
        if words[:2] == ["rm", "-rf"]:
            paths += words[2:]
    return paths


def tracked_files():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return out.stdout.splitlines()


@pytest.mark.parametrize("target", ["clean", "distclean"])
def test_clean_removes_no_tracked_file(target):
    paths = recipe_paths(target)
    assert paths, f"{target} removes nothing?"
    tracked = tracked_files()
    for p in paths:
        pat = p.rstrip("/")
        hit = [f for f in tracked if fnmatch.fnmatch(f, pat) or fnmatch.fnmatch(f, pat + "/*")]
        if p.endswith("/"):       # directories only: a tracked file inside one counts
            hit = [f for f in tracked if fnmatch.fnmatch(f, pat + "/*")]
        assert not hit, f"make {target} would delete tracked files: {hit[:5]}"


def test_clean_paths_are_ignored_by_git():
    tracked_files()
    for p in recipe_paths("clean"):
        base = p.rstrip("/").replace("*", "x")
        ok = [subprocess.run(["git", "check-ignore", "-q", "--no-index", probe],
                             cwd=ROOT).returncode == 0 for probe in (base, base + "/f")]
        assert any(ok), f"{p} is not ignored by git: make clean removes something the " \
                        "build does not make"


def test_the_recipe_parser_sees_a_tracked_path():
    """The check can fail: a recipe deleting reports/runs would be caught."""
    tracked = tracked_files()
    assert any(fnmatch.fnmatch(f, "reports/runs/*") for f in tracked)
