import os
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FACESEGMENT_SHARED", ROOT.parent / "shared")).resolve()
SHARED_DATA = SHARED / "data"
FACES300W = SHARED_DATA / "faces300w"
LFW_GRAY = SHARED_DATA / "lfw-gray" / "lfw"


@pytest.fixture()
def faces300w():
    """Path to ../shared/data/faces300w (skips when absent)."""
    if not (FACES300W / "train").is_dir():
        pytest.skip(f"needs the shared face data at {FACES300W} (absent on this machine)")
    return FACES300W


@pytest.fixture()
def lfw_gray():
    """Path to ../shared/data/lfw-gray/lfw (skips when absent)."""
    if not LFW_GRAY.is_dir():
        pytest.skip(f"needs the shared LFW data at {LFW_GRAY} (absent on this machine)")
    return LFW_GRAY


def pytest_configure(config):
    """Ctrl-C as Python normally gets it, even when the test run was started with
    SIGINT ignored (a background job of a non-interactive shell, ``nohup``): the
    interrupt tests send SIGINT to this process and to the commands it starts,
    which inherit an ignored signal but not a handler."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

