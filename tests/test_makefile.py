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


def recipe_paths(target, cwd=ROOT):
    """The paths of the ``rm -rf`` lines of ``target``'s recipe, as make expands them
    (``make -n``: nothing is run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "-f", str(ROOT / "Makefile"), target], cwd=cwd,
                         capture_output=True, text=True, check=True).stdout
    paths = []
    for line in out.replace("\\\n", " ").splitlines():
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


def _user_and_build_folders(root):
    """A checkout's folders as the README has users make them, and as the build does."""
    mine = [root / "models" / "demo" / "model.json",
            root / "data" / "labels" / "photos" / "a_label.png",
            root / "reports" / "runs" / "faces300w-default" / "results.json"]
    built = [root / "models" / "faces300w-default" / "axis-32" / "model.json",
             root / "data" / "labels" / "lfw" / "x_label.png",
             root / "data" / "windows" / "faces300w-default" / "train.h5",
             root / "reports" / "runs" / "faces300w-default" / "stamps" / "train.json"]
    for f in mine + built:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    return mine, built


def test_clean_keeps_the_folders_the_readme_has_users_make(tmp_path):
    """`make clean` run in a copy of the layout: the README's models/demo (the
    save_model example) and data/labels/photos (`facesegment label`) stay; the
    runs' models, LFW's labels, windows and stamps go."""
    mine, built = _user_and_build_folders(tmp_path)
    paths = recipe_paths("clean", cwd=tmp_path)
    assert "models/faces300w-default" in paths
    assert not [p for p in paths if p.rstrip("/") in ("models", "data/labels", "data")
                or fnmatch.fnmatch("models/demo", p.rstrip("/"))
                or fnmatch.fnmatch("data/labels/photos", p.rstrip("/"))]
    subprocess.run(["make", "-f", str(ROOT / "Makefile"), "clean"], cwd=tmp_path,
                   check=True, capture_output=True)
    assert all(f.is_file() for f in mine), [str(f) for f in mine if not f.is_file()]
    assert not [str(f) for f in built if f.exists()]


def test_the_readme_makes_the_folders_clean_keeps():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert '"models/demo"' in text and "data/labels/photos" in text
