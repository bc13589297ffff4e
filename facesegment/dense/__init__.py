"""Dense per-pixel inference: a forest over every pixel's window of a whole image.

Public API (the names of :mod:`facesegment.dense.predict` and of the modules below)::

    from facesegment.dense import predict_image
    proba, labels = predict_image(model, image, mode="full", alpha=1.0)

Modules
-------
``predict``           orchestration: :func:`predict_image`, :func:`predict_proba_raw`,
                      :func:`count_oblique_visits`, :func:`confusion_sweep`, and the
                      ``kernels=`` choice (``KERNELS``), ``FAST_BLOCK_ROWS``
``image``             :func:`pad_image`, :func:`fft_responses`
``_checks``           argument validation, image + planes stacking, the ``kernels=`` choices
``_face``             :func:`predict_image` of the models that read a crop themselves
                      (``model.dense`` false: ``model.predict_face``)
``_packing``          node records of the kernels, cached per forest, width and layout
``_numba``            the Numba options of every kernel; the kernel layout type
``_any_forest``       per-pixel kernels (any forest; FFT top levels)
``_probe_forests``    axis-aligned / two-probe / sparse forests: 64-bit records, tree-major
``_oblique_forests``  forests with dense oblique nodes: pixels grouped by node, level by level
``_pooled``           forests over a pooled layout (box means at a stride), phase by phase
``_pooled_oblique``   pooled forests with dense oblique rows: runs of equal node, no sorting
``_simd``             integer dot products of 8 windows at once (int8 / int16 rows)
``_cross``            the kernels compiled for another CPU (assembly for tests)
``_split``            the split buffer of auto-context stages for the probe kernels
``_visits``           oblique visit counts, by the kernels that predict the forest
``_scores``           layout-free kernels: sweep labels, confusion

Prior reweighting (:func:`reweight`, :func:`class_scales`), smoothing the maps
(:func:`smooth`), the modes, :func:`model_layout` and :func:`strict_region` are
:mod:`facesegment.reweight`'s, which the decision rule shares; a model's stored
terms (:func:`default_alpha`, :func:`default_beta`, :func:`default_sigma`) are
:mod:`facesegment.rule`'s; both re-exported here.

The window layout (window side, channels) comes from ``model.layout``; see
docs/inference.md.
"""

from ..reweight import MODES, class_scales, model_layout, reweight, smooth, strict_region
from .image import fft_responses, pad_image
from .predict import (confusion_sweep, count_oblique_visits, count_sparse_entries,
                      default_alpha, default_beta, default_sigma, predict_image,
                      predict_proba_raw)

__all__ = ["MODES", "predict_image", "predict_proba_raw", "count_oblique_visits",
           "count_sparse_entries", "confusion_sweep", "reweight", "class_scales", "default_alpha", "default_beta",
           "default_sigma", "smooth",
           "pad_image", "strict_region", "fft_responses", "model_layout"]
