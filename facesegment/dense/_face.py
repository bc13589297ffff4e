""":func:`facesegment.dense.predict_image` for the models that are not forests over
windows (``model.dense`` false: landmark votes, the face mesh): the model reads
the crop itself (``model.predict_face`` of the face-model protocol,
:mod:`facesegment.modelio.protocol`), and the result has the forests' shape.

Called by duck typing: this package never imports :mod:`facesegment.faces`.
"""

import numpy as np

from ..classes import IGNORE
from ..layout import DEFAULT_LAYOUT
from ..reweight import check_mode, strict_region


def face_prediction(model, image, mode="full", alpha=None, beta=None, sigma=None,
                    forest_terms=None):
    """``(proba float32 (H, W, C), labels uint8 (H, W))`` of one face crop under a
    model that reads it itself.

    ``mode="strict"`` blanks the border the forests' paper protocol ignores
    (half a 31x31 window: probabilities 0, label 255), so scores compare; the
    model still sees the whole crop.  ``forest_terms``: the arguments only a
    forest takes (``max_depth``, ``n_trees``, ``fft_levels``, ``planes``),
    refused unless at their defaults.

    Parameters
    ----------
    model : object
        A model whose ``dense`` is false: it has ``kind`` and
        ``predict_face(image, alpha=, beta=, sigma=)`` (the face-model
        protocol of :mod:`facesegment.modelio.protocol`).
    image : array_like, uint8 (H, W, 3)
        The RGB face crop.
    mode : {"full", "strict"}, optional
        ``"strict"`` blanks the border half a window wide.
    alpha, beta, sigma : float or None, optional
        Passed to ``model.predict_face`` as they are.
    forest_terms : dict or None, optional
        ``{name: value}`` of the forest-only arguments; a value other than
        None (or ``fft_levels`` 0) is refused.

    Returns
    -------
    proba : float32 (H, W, C)
        The model's class probabilities (0 on the blanked border).
    labels : uint8 (H, W)
        Their argmax (``IGNORE``, 255, on the blanked border).

    Raises
    ------
    ValueError
        For an unknown ``mode``, a forest-only argument given, or an image
        that is not uint8 ``(H, W, 3)``.
    """
    check_mode(mode)
    kind = model.kind
    given = [name for name, value in (forest_terms or {}).items()
             if value is not None and not (name == "fft_levels" and value == 0)]
    if given:
        raise ValueError(f"{', '.join(given)}: a {kind} model has no forest over windows to "
                         "limit or feed (these are for forests and cascades); leave them out")
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"a {kind} model reads RGB uint8 face crops (H, W, 3), got "
                         f"{arr.dtype} {arr.shape}")
    proba = np.asarray(model.predict_face(arr, alpha=alpha, beta=beta, sigma=sigma),
                       dtype=np.float32)
    labels = np.argmax(proba, axis=-1).astype(np.uint8)
    if mode == "strict":
        y0, y1, x0, x1 = strict_region(arr.shape, DEFAULT_LAYOUT)
        keep = np.zeros(arr.shape[:2], bool)
        keep[y0:y1, x0:x1] = True
        proba = np.where(keep[..., None], proba, np.float32(0))
        labels[~keep] = IGNORE
    return proba, labels


__all__ = ["face_prediction"]
