"""The one place where the face classes (ids, names, colours, IGNORE) are defined.

Window geometry is data, not a constant: a :class:`facesegment.layout.WindowLayout`
recorded in every windows file and model.  ``WINDOW``, ``HALF``,
``N_CHANNELS`` and ``N_FEATURES`` below are only aliases of the paper's layout
(:data:`facesegment.layout.DEFAULT_LAYOUT`, 31x31 RGB) for code that imports
them; no kernel uses them, and code should read the layout of its model or
windows file.

The class key (each class's id, name and colour) as text (:func:`class_table`,
``facesegment classes``) and as an image (:func:`legend_image`, drawn on the
overlays by :func:`add_legend`) uses :data:`CLASS_COLORS`, the palette of the
label PNGs (:func:`facesegment.data.imageio.label_palette`), so all are one.
"""

import numpy as np

from .layout import DEFAULT_LAYOUT, feature_offsets as _offsets

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
    """Byte offsets of a window's features (default: the paper's layout).

    See :func:`facesegment.layout.feature_offsets` and
    ``WindowLayout.feature_offsets``.

    Parameters
    ----------
    width : int
        Width (columns) of the C-contiguous image the windows are read from.
    channels : int, default=N_CHANNELS
        Planes per pixel (3: RGB).
    window : int, default=WINDOW
        Side of the square window (31).

    Returns
    -------
    ndarray of int64, shape (window * window * channels,)
        Offset of each feature from the window's top-left value.
    """
    return _offsets(width, channels, window)


# ------------------------------------------------------------------ the class key

_FONT = 0  # cv2.FONT_HERSHEY_SIMPLEX (cv2 is imported when a key is drawn)
#: The key is left off an image where it would cover more than this share of its
#: width or height at the smallest legible size.
MAX_SHARE = 0.5
_MIN_SCALE, _MAX_SCALE = 0.35, 1.2


def class_table(names=CLASS_NAMES, colors=CLASS_COLORS):
    """Rows ``(id, name, "#rrggbb", (r, g, b))`` of the classes, by id.

    Parameters
    ----------
    names : sequence of str, default=CLASS_NAMES
        Class names by id.
    colors : array-like of uint8, shape (n_classes, 3), default=CLASS_COLORS
        RGB colour of each class.

    Returns
    -------
    list of tuple
        ``(id, name, hex colour, (r, g, b))`` per class, with Python ints.
    """
    return [(i, name, "#{:02x}{:02x}{:02x}".format(*(int(v) for v in colors[i])),
             tuple(int(v) for v in colors[i])) for i, name in enumerate(names)]


def _key(scale, names, colors, ids):
    """The key at text ``scale``: uint8 (h, w, 3) RGB on a dark panel."""
    import cv2

    thick = 1 if scale < 0.8 else 2
    rows = [f"{i} {names[i]}" for i in ids]
    sizes = [cv2.getTextSize(t, _FONT, scale, thick)[0] for t in rows]
    th = max(s[1] for s in sizes)
    pad, gap = max(2, int(round(6 * scale))), max(2, int(round(5 * scale)))
    sw = th + gap                                   # the colour swatch's side
    w = pad * 3 + sw + max(s[0] for s in sizes)
    h = pad * 2 + len(rows) * sw + (len(rows) - 1) * gap
    key = np.full((h, w, 3), 32, np.uint8)
    for k, (i, text) in enumerate(zip(ids, rows)):
        y = pad + k * (sw + gap)
        cv2.rectangle(key, (pad, y), (pad + sw - 1, y + sw - 1),
                      tuple(int(v) for v in colors[i]), -1)
        cv2.rectangle(key, (pad, y), (pad + sw - 1, y + sw - 1), (200, 200, 200), 1)
        cv2.putText(key, text, (2 * pad + sw, y + (sw + th) // 2), _FONT, scale,
                    (255, 255, 255), thick, cv2.LINE_AA)
    return key


def legend_image(names=CLASS_NAMES, colors=CLASS_COLORS, scale=0.6, background=False):
    """The class key as an image: one row per class (id, colour swatch, name).

    Parameters
    ----------
    names : sequence of str, default=CLASS_NAMES
        Class names by id.
    colors : array-like of uint8, shape (n_classes, 3), default=CLASS_COLORS
        RGB colour of each class.
    scale : float, default=0.6
        OpenCV font scale of the text (the key's size follows it).
    background : bool, default=False
        Whether background (class 0) has a row.

    Returns
    -------
    ndarray of uint8, shape (h, w, 3)
        The key, RGB on a dark panel.
    """
    ids = list(range(0 if background else 1, len(names)))
    return _key(float(scale), names, colors, ids)


def add_legend(image, names=CLASS_NAMES, colors=CLASS_COLORS):
    """A copy of ``image`` with the class key in its bottom-right corner.

    The key lists the face classes (not background) and is sized to the image.
    When it would cover more than :data:`MAX_SHARE` of the image's width or
    height even at the smallest legible size, no key is drawn.

    Parameters
    ----------
    image : array-like of uint8, shape (H, W, 3)
        RGB image (not modified).
    names : sequence of str, default=CLASS_NAMES
        Class names by id.
    colors : array-like of uint8, shape (n_classes, 3), default=CLASS_COLORS
        RGB colour of each class.

    Returns
    -------
    ndarray of uint8, shape (H, W, 3)
        A copy of ``image``, with the key when it fits.
    """
    out = np.array(image, dtype=np.uint8, copy=True)
    h, w = out.shape[:2]
    scale = float(np.clip(min(h, w) / 1000.0, _MIN_SCALE, _MAX_SCALE))
    key = legend_image(names, colors, scale)
    while (key.shape[0] > MAX_SHARE * h or key.shape[1] > MAX_SHARE * w) and scale > _MIN_SCALE:
        scale = max(_MIN_SCALE, scale * 0.8)
        key = legend_image(names, colors, scale)
    kh, kw = key.shape[:2]
    if kh > MAX_SHARE * h or kw > MAX_SHARE * w:
        return out
    m = max(2, min(h, w) // 100)
    out[h - kh - m:h - m, w - kw - m:w - m] = key     # opaque: the swatches are the palette
    return out
