"""Shared path handling for the CO2 measurement scripts in ``studies/co2/``.

A bare file name (no directory part, e.g. ``win48k.npz``) means a file under
``data/bench/`` of the repository (git-ignored); any other path is used as
given (relative to the current directory, i.e. the repository root when the
scripts are run as ``.venv/bin/python studies/co2/<script>.py``).
"""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "data" / "bench"


def bench_path(name, create=False):
    """Resolve ``name``: bare file names go to ``data/bench/``; ``create`` makes the directory."""
    p = Path(name)
    if not p.is_absolute() and p.parent == Path("."):
        p = BENCH_DIR / p
    if create:
        p.parent.mkdir(parents=True, exist_ok=True)
    return os.fspath(p)
