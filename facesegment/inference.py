"""Dense inference under its original name: this module *is* :mod:`facesegment.dense.predict`.

The code lives in the :mod:`facesegment.dense` package.  ``facesegment.inference``
is kept for existing callers and is the same module object as
``facesegment.dense.predict`` (so ``inference.FAST_PATH = False`` and
monkeypatching ``inference.LEVEL_PATH`` still switch the kernels); it has
every public name of :mod:`facesegment.dense` (``predict_image``,
``predict_proba_raw``, ``reweight``, ``class_scales``, ``confusion_sweep``,
``count_oblique_visits``, ``pad_image``, ``strict_region``, ``default_alpha``,
``fft_responses``, ``MODES``, ...).
"""

import sys

from .dense import predict as _predict

sys.modules[__name__] = _predict
