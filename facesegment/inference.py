"""Dense inference under its original name: re-exports :mod:`facesegment.dense`.

The code lives in the :mod:`facesegment.dense` package; existing callers keep
``from facesegment.inference import predict_image`` (and every other name of
:mod:`facesegment.dense.predict`, e.g. ``confusion_sweep``, ``reweight``,
``default_alpha``).  Which kernels run is a call parameter (``kernels=``)
of those functions.

A plain module (not an alias in ``sys.modules``), so that worker threads
importing it for the first time at once always see a complete module.
"""

from .dense import predict as _predict
from .dense.predict import *  # noqa: F401,F403


def __getattr__(name):
    return getattr(_predict, name)
