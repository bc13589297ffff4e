"""The one place where class ids, names, colours and window geometry are defined."""

import numpy as np

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

#: Side of the square window around a pixel, and its half-width (the border
#: that strict mode ignores).
WINDOW = 31
HALF = WINDOW // 2  # 15
N_CHANNELS = 3
#: Number of features of one window: a (31, 31, 3) uint8 array flattened in C
#: order, so feature ``f = (dy * 31 + dx) * 3 + c``.
N_FEATURES = WINDOW * WINDOW * N_CHANNELS  # 2883

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
    """Byte offsets of a window's features; see :func:`facesegment.layout.feature_offsets`."""
    from .layout import feature_offsets as _offsets

    return _offsets(width, channels, window)
