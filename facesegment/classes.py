"""The one place where the face classes (ids, names, colours, IGNORE) are defined.

Window geometry is data, not a constant: a :class:`facesegment.layout.WindowLayout`
recorded in every windows file and model.  ``WINDOW``, ``HALF``,
``N_CHANNELS`` and ``N_FEATURES`` below are only aliases of the paper's layout
(:data:`facesegment.layout.DEFAULT_LAYOUT`, 31x31 RGB) kept for backward
compatibility; no kernel uses them, and new code should read the layout of
its model or windows file.
"""

import numpy as np

from .layout import DEFAULT_LAYOUT

#: Class names by id.  "left"/"right" are the image's left and right.
CLASS_NAMES = (
    "background",
    "lower face",
    "nose",
    "mouth",
    "left eye",
    "right eye",
    "left eyebrow",
    "right eyebrow",
)
N_CLASSES = len(CLASS_NAMES)

#: Label value meaning "no label here" (ignored for training and scoring).
IGNORE = 255

#: Backward-compatible aliases of ``DEFAULT_LAYOUT`` (the paper's 31x31 RGB
#: windows): its side, half-width (the border strict mode ignores), channels and
#: number of features (feature ``f = (dy * 31 + dx) * 3 + c``).  Use a model's or
#: windows file's ``layout`` instead.
WINDOW = DEFAULT_LAYOUT.window  # 31
HALF = DEFAULT_LAYOUT.half  # 15
N_CHANNELS = DEFAULT_LAYOUT.channels  # 3
N_FEATURES = DEFAULT_LAYOUT.n_features  # 2883

#: RGB colours of the classes for overlays and figures (uint8, (8, 3)).
CLASS_COLORS = np.array(
    [
        (0, 0, 0),        # background
        (230, 180, 140),  # lower face
        (60, 180, 75),    # nose
        (230, 25, 75),    # mouth
        (0, 130, 200),    # left eye
        (70, 240, 240),   # right eye
        (145, 30, 180),   # left eyebrow
        (245, 130, 48),   # right eyebrow
    ],
    dtype=np.uint8,
)


def feature_offsets(width, channels=N_CHANNELS, window=WINDOW):
    """Byte offsets of a window's features (default: the paper's layout); see
    :func:`facesegment.layout.feature_offsets` and ``WindowLayout.feature_offsets``."""
    from .layout import feature_offsets as _offsets

    return _offsets(width, channels, window)
