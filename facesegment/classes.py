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
    """Map each window feature to its byte offset in a C-contiguous image.

    Parameters
    ----------
    width : int
        Width (columns) of the (padded) image the windows are read from.

    Returns
    -------
    offsets : ndarray of int64, shape (window * window * channels,)
        ``image.ravel()[top_left + offsets[f]]`` is feature ``f`` of the window
        whose top-left pixel starts at flat index ``top_left``.
    """
    dy, dx, c = np.meshgrid(
        np.arange(window), np.arange(window), np.arange(channels), indexing="ij"
    )
    return ((dy * width + dx) * channels + c).ravel().astype(np.int64)
