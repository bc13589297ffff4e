"""The package as a user gets it: a wheel built from the repository, installed
into a fresh virtual environment, used from a folder outside the repository.

The wheel is built without build isolation when this environment has a
setuptools that reads the project's metadata (>= 77, the dev extra installs
one), else with pip's isolated build (which needs the package index).  The
fresh environment sees this one's dependencies (a ``.pth`` file naming its
site-packages) but not its facesegment: the children check that they import
the wheel's copy.  No ``NUMBA_CACHE_DIR`` is passed on, so the first
``segment`` compiles into the installed package's own cache and the second
run loads it, as on a user's machine.
"""

import csv
import importlib.metadata
import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FACES300W, ROOT

pytestmark = pytest.mark.slow

#: What a source tree needs for the wheel (pipelines/, studies/ and benchmarks/
#: come along so that the wheel leaving them out is tested).
SOURCES = ("pyproject.toml", "README.md", "facesegment", "pipelines", "studies", "benchmarks")
SHIPPED = ("model.json", "forest.h5", "MODEL_CARD.md")
#: Generous: a cold first ``segment`` compiles its kernels (seconds on a quiet machine).
TIMEOUT = 600


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)
    assert proc.returncode == 0, (f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def _setuptools_reads_metadata():
    try:
        major = int(importlib.metadata.version("setuptools").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return major >= 77


def _copy_sources(dest):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc", "*.egg-info",
                                    "build")
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy(src, dest / name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel of a copy of the repository's sources (the checkout is left as it is)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src, dist = tmp / "src", tmp / "dist"
    src.mkdir()
    _copy_sources(src)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist),
           str(src)]
    if _setuptools_reads_metadata():
        cmd.insert(5, "--no-build-isolation")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if proc.returncode != 0 and "--no-build-isolation" not in cmd and (
            "No matching distribution found for setuptools" in proc.stderr):
        pytest.skip("cannot build the wheel offline: this environment's setuptools is older "
                    "than 77 and the package index is out of reach (`make setup` installs "
                    "the dev extra's setuptools)")
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    (found,) = dist.glob("facesegment-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """``(python, facesegment script, environment)`` of a fresh venv holding the wheel."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; "
                                            "print(sysconfig.get_paths()['purelib'])"]
                        ).stdout.strip())
    # this environment's dependencies; its own .pth files (an editable facesegment) are
    # not processed for a folder named in a .pth file
    (purelib / "_facesegment_test_deps.pth").write_text(
        "\n".join(site.getsitepackages() + [site.getusersitepackages()]) + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
          "--no-index", "--quiet", str(wheel)])
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    return python, venv / "bin" / "facesegment", purelib, env


@pytest.fixture()
def face_dir(faces300w, tmp_path):
    """A folder (outside the repository) with one face of the faces300w test split."""
    image = sorted((faces300w / "test").glob("*.jpg"))[0]
    inputs = tmp_path / "photos"
    inputs.mkdir()
    shutil.copy(image, inputs / image.name)
    return inputs / image.name


def test_wheel_holds_the_shipped_model_and_only_the_library(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for name in SHIPPED:
        assert f"facesegment/models/faces300w-two-probe/{name}" in names, names
    for name in ("landmark-model.json", "MODEL_CARD.md"):   # landmark votes
        assert f"facesegment/models/faces300w-landmarks/{name}" in names, names
    for name in ("mesh-model.json", "MODEL_CARD.md", "stage-1/model.json",
                 "stage-1/forest.h5"):                      # the default: mesh forest
        assert f"facesegment/models/faces-handdrawn/{name}" in names, names
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"facesegment"}, tops
    assert not any(n.startswith(("pipelines/", "studies/", "benchmarks/", "tests/"))
                   for n in names)
    assert "facesegment/cli.py" in names and "facesegment/dense/_probe_forests.py" in names
    for sub in ("faces/segment.py", "data/windows.py", "autocontext/cascade.py",
                "modelio/_forest_h5.py", "evaluation/scoring.py"):
        assert f"facesegment/{sub}" in names, sub


def test_installed_wheel_segments_a_face_with_the_shipped_model(installed, face_dir, tmp_path):
    python, script, purelib, env = installed
    work = face_dir.parent.parent
    from facesegment.data.imageio import write_png_atomic

    proc = _run([str(script), "segment", str(face_dir.parent), "out"], cwd=work, env=env)
    assert "W0000" not in proc.stderr and "INFO:" not in proc.stderr, proc.stderr  # MediaPipe's log
    stem = face_dir.stem
    out = work / "out"
    for name in (f"{stem}_label.png", f"{stem}_overlay.png", "summary.csv"):
        assert (out / name).is_file(), (name, proc.stdout, proc.stderr)
    rows = {r["name"]: r for r in csv.DictReader((out / "summary.csv").open())}
    row = rows[face_dir.name]
    assert row["status"] == "ok" and int(row["faces"]) >= 1, row
    assert row["paths"] == "mesh" and row["pan"], row     # the default: the face mesh
    # the stage forest's kernels were compiled into the installed package's own cache
    assert list((purelib / "facesegment").rglob("__pycache__/*.nbi")), "no Numba cache files"

    blank = np.full((250, 250, 3), 128, np.uint8)
    write_png_atomic(face_dir.parent / "blank.png", blank)    # a crop without a face
    child = ("import json, sys, facesegment\n"
             "assert facesegment.segment(sys.argv[2]) == []\n"
             "faces = facesegment.segment(sys.argv[1])\n"
             "print(json.dumps({'file': facesegment.__file__, 'faces': len(faces),\n"
             "                  'shape': list(faces[0].labels.shape) if faces else None,\n"
             "                  'classes': sorted({int(v) for f in faces\n"
             "                                     for v in set(f.labels.ravel().tolist())})}))")
    proc = _run([str(python), "-c", child, str(face_dir), str(face_dir.parent / "blank.png")],
                cwd=tmp_path, env=env)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(got["file"]).resolve().is_relative_to(purelib.resolve()), got["file"]
    assert got["faces"] >= 1 and got["shape"] == [250, 250], got
    assert len(got["classes"]) >= 4, got   # background and several face parts
