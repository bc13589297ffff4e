"""Dense inference under its original name: re-exports :mod:`facesegment.dense`.

The code lives in the :mod:`facesegment.dense` package; existing callers keep
``from facesegment.inference import predict_image`` (and every other name of
:mod:`facesegment.dense.predict`, e.g. ``confusion_sweep``, ``reweight``,
``default_alpha``).  The kernel switches (``FAST_PATH``, ``LEVEL_PATH``, ...)
are read here but set on :mod:`facesegment.dense.predict`, where the code
reads them.

A plain module (not an alias in ``sys.modules``), so that worker threads
importing it for the first time at once always see a complete module.
"""

from .dense import predict as _predict
from .dense.predict import *  # noqa: F401,F403


def __getattr__(name):
    return getattr(_predict, name)
