"""The window layout: which per-pixel values a forest's features are.

A feature vector is the square ``window x window`` patch centred on a pixel of
a ``channels``-plane uint8 image, flattened in C order::

    feature f = (dy * window + dx) * channels + c

The planes are the image's own channels (3 for RGB, 1 for grey) followed by
any extra per-pixel planes (e.g. a previous stage's class-probability maps,
scaled to uint8).  A :class:`WindowLayout` is data: it is recorded in the
windows file and in the model folder, and passed to the extraction and
dense-inference code, so nothing hard-codes 31x31x3 = 2883 features.

``WindowLayout()`` is the paper's layout (31x31 RGB, 2883 features); it is
also the layout of a windows file or model that records none.

A *pooled* layout (``pool = s > 1``, a model's layout, never a windows
file's) reads, instead of the window's values, the rounded means of its
``s x s`` boxes at stride ``s`` (``cells = window // s`` per side, the last
``window - cells * s`` rows and columns unused)::

    feature f = (i * cells + j) * channels + c
              = round(mean(window[i*s:(i+1)*s, j*s:(j+1)*s, c]))

so a split weighs patches, not pixels: structured sparsity with ``s**2``
times fewer values per split.  Training computes them from the
stored windows (:meth:`WindowLayout.pooled`), dense inference from one
box-mean image per image (:func:`box_means`), with the same integer rounding,
so both read identical uint8 values.
"""

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class WindowLayout:
    """Geometry of the windows a forest reads.

    Parameters
    ----------
    window : int, odd, >= 1
        Side of the square window (31 in the paper).
    channels : int >= 1
        Planes per pixel: image channels plus extra planes.
    channel_names : tuple of str
        One name per plane, e.g. ``("R", "G", "B")``, ``("gray",)`` or
        ``("R", "G", "B", "p:background", ...)``.  Defaults are derived from
        ``channels`` (1: gray, 3: RGB, otherwise "c0", "c1", ...).
    pool : int >= 1, <= window
        Side ``s`` of the boxes whose rounded means a pooled layout reads (1:
        the window's own values; see the module's description).

    Raises
    ------
    ValueError
        When a number is not an integer >= 1, ``window`` is even, the number of
        ``channel_names`` differs from ``channels``, or ``pool > window``.
    """

    window: int = 31
    channels: int = 3
    channel_names: tuple = field(default=())
    pool: int = 1

    def __post_init__(self):
        for name in ("window", "channels", "pool"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"WindowLayout {name}={v!r} must be an integer >= 1")
            object.__setattr__(self, name, int(v))
        if self.window % 2 != 1:
            raise ValueError(f"WindowLayout window={self.window} must be odd so the window "
                             "is centred on its pixel (e.g. 31)")
        names = tuple(str(n) for n in self.channel_names) or default_channel_names(
            self.channels)
        if len(names) != self.channels:
            raise ValueError(f"WindowLayout channel_names has {len(names)} names for "
                             f"{self.channels} channels; give one name per channel")
        object.__setattr__(self, "channel_names", names)
        if self.pool > self.window:
            raise ValueError(f"WindowLayout pool={self.pool} must be at most the window "
                             f"({self.window}): boxes of pool x pool values inside the window")

    # ------------------------------------------------------------ derived
    @property
    def half(self):
        """Pixels between the centre and the window's edge (15 for 31)."""
        return self.window // 2

    @property
    def cells(self):
        """Values per side a forest reads: ``window // pool`` (the window itself unpooled)."""
        return self.window // self.pool

    @property
    def n_features(self):
        """``cells * cells * channels`` (2883 for 31x31 RGB; 300 pooled by 3)."""
        return self.cells * self.cells * self.channels

    def pooled(self, windows):
        """The features of raw windows: the windows flattened, or pooled.

        Pooled values are the rounded box means, exactly those :func:`box_means`
        gives at inference.

        Parameters
        ----------
        windows : ndarray of uint8, shape (n, window, window, channels)
            Raw windows.

        Returns
        -------
        ndarray of uint8, shape (n, n_features)
            One row of features per window (``windows`` reshaped when unpooled).
        """
        n = windows.shape[0]
        if self.pool == 1:
            return windows.reshape(n, -1)
        s, m = self.pool, self.cells
        v = windows[:, :m * s, :m * s].astype(np.uint32).reshape(n, m, s, m, s, -1)
        return _round_mean(v.sum(axis=(2, 4)), s).reshape(n, -1)

    @property
    def row(self):
        """Contiguous values per window row in a C-contiguous image (93 for 31x31 RGB)."""
        return self.window * self.channels

    @property
    def shape(self):
        """The shape of one window, ``(window, window, channels)``."""
        return (self.window, self.window, self.channels)

    def feature_offsets(self, width):
        """Offset of each feature from the window's top-left value in a C-contiguous image.

        Parameters
        ----------
        width : int
            Width of the ``(H, width, channels)`` image the windows are read from
            (pooled: of its :func:`box_means` image).

        Returns
        -------
        ndarray of int64, shape (n_features,)
        """
        return feature_offsets(width, self.channels, self.cells, self.pool)

    def describe(self):
        """E.g. ``"31x31 windows of 3 channels (R, G, B): 2883 features"``."""
        pooled = (f", {self.pool}x{self.pool} box means at stride {self.pool}"
                  if self.pool > 1 else "")
        return (f"{self.window}x{self.window} windows of {self.channels} channel"
                f"{'s' if self.channels != 1 else ''} ({', '.join(self.channel_names)})"
                f"{pooled}: {self.n_features} features")

    # ------------------------------------------------------- serialisation
    def to_dict(self):
        """JSON-serialisable form (stored in model.json and the windows file)."""
        doc = {"window": self.window, "channels": self.channels,
               "channel_names": list(self.channel_names)}
        if self.pool > 1:   # absent for unpooled layouts: older files read the same
            doc["pool"] = self.pool
        return doc

    @classmethod
    def from_dict(cls, doc):
        """Inverse of :meth:`to_dict`; ``None`` gives the default layout.

        Parameters
        ----------
        doc : dict or None
            Keys ``window`` (default 31), ``channels`` (default 3), ``channel_names``
            and ``pool`` (default 1), all optional.

        Returns
        -------
        WindowLayout

        Raises
        ------
        ValueError
            When ``doc`` is not a mapping, has other keys, or describes an invalid
            layout.
        """
        if doc is None:
            return cls()
        if not isinstance(doc, dict):
            raise ValueError(f"a window layout must be a mapping, got {type(doc).__name__}")
        unknown = set(doc) - {"window", "channels", "channel_names", "pool"}
        if unknown:
            raise ValueError(f"unknown window layout keys {sorted(unknown)}")
        return cls(window=doc.get("window", 31), channels=doc.get("channels", 3),
                   channel_names=tuple(doc.get("channel_names") or ()),
                   pool=doc.get("pool", 1))

    @classmethod
    def for_image(cls, image, window=31):
        """The layout of ``window``-sized windows over ``image``.

        Parameters
        ----------
        image : ndarray, shape (H, W) or (H, W, C)
            The image (grey when 2-D: one channel).
        window : int, default=31
            Side of the window (odd).

        Returns
        -------
        WindowLayout
            Unpooled, with the default channel names.
        """
        channels = 1 if image.ndim == 2 else int(image.shape[2])
        return cls(window=window, channels=channels)

    def matches(self, n_features):
        """Whether a forest of ``n_features`` features can use this layout.

        Parameters
        ----------
        n_features : int
            The forest's number of features.

        Returns
        -------
        bool
            True when it equals :attr:`n_features`.
        """
        return int(n_features) == self.n_features


def default_channel_names(channels):
    """``("gray",)``, ``("R", "G", "B")`` or ``("c0", "c1", ...)``.

    Parameters
    ----------
    channels : int
        Number of planes.

    Returns
    -------
    tuple of str
        1: gray, 3: RGB, otherwise ``"c0"``, ``"c1"``, ...
    """
    if channels == 1:
        return ("gray",)
    if channels == 3:
        return ("R", "G", "B")
    return tuple(f"c{i}" for i in range(channels))


def feature_offsets(width, channels=3, window=31, stride=1):
    """Map each window feature to its offset in a C-contiguous image.

    Parameters
    ----------
    width : int
        Width (columns) of the (padded) image the windows are read from.
    channels, window : int
        The layout (see :class:`WindowLayout`); ``window`` values per side.
    stride : int
        Pixels between neighbouring values (a pooled layout's ``pool``).

    Returns
    -------
    offsets : ndarray of int64, shape (window * window * channels,)
        ``image.ravel()[top_left + offsets[f]]`` is feature ``f`` of the window
        whose top-left pixel starts at flat index ``top_left``.
    """
    dy, dx, c = np.meshgrid(np.arange(window) * stride, np.arange(window) * stride,
                            np.arange(channels), indexing="ij")
    return ((dy * width + dx) * channels + c).ravel().astype(np.int64)


def _round_mean(sums, s):
    """uint8 ``round(sums / s**2)`` (halves up), the one rounding of pooled values."""
    return ((sums + (s * s) // 2) // (s * s)).astype(np.uint8)


def box_means(image, s):
    """The rounded mean of each ``s x s`` box of an image.

    These are the values a pooled layout reads, as :meth:`WindowLayout.pooled`
    computes them (halves rounded up).

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W, C)
        The image.
    s : int
        Side of the boxes (a layout's ``pool``), at most ``H`` and ``W``.

    Returns
    -------
    ndarray of uint8, shape (H - s + 1, W - s + 1, C)
        C-contiguous, indexed by each box's top-left pixel.
    """
    cs = np.zeros((image.shape[0] + 1, image.shape[1] + 1, image.shape[2]), np.uint32)
    np.cumsum(np.cumsum(image, axis=0, dtype=np.uint32), axis=1, dtype=np.uint32,
              out=cs[1:, 1:])
    sums = cs[s:, s:] - cs[:-s, s:] - cs[s:, :-s] + cs[:-s, :-s]
    return np.ascontiguousarray(_round_mean(sums, s))


#: The paper's layout: 31x31 RGB windows, 2883 features.
DEFAULT_LAYOUT = WindowLayout()

__all__ = ["WindowLayout", "DEFAULT_LAYOUT", "feature_offsets", "default_channel_names",
           "box_means"]
