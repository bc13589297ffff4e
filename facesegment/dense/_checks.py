"""Validation of dense-inference arguments (private): each problem is one
ValueError/TypeError naming the parameter, the value and the fix."""

import numpy as np

from ..data.imageio import to_grey

#: The ``kernels`` argument of :func:`predict_image`, :func:`predict_proba_raw`
#: and :func:`confusion_sweep`: which kernel families may run a forest (every
#: choice gives the same results; tests and benchmarks compare them):
#: ``"auto"`` the fastest that can (the integer record kernels for forests
#: without dense oblique nodes, the level kernels for oblique forests, the
#: general per-pixel kernels otherwise), ``"no-fast"`` never the integer record
#: kernels, ``"no-levels"`` never the level kernels, ``"general"`` only the
#: general per-pixel kernels.
KERNELS = {"auto": (True, True), "no-fast": (False, True), "no-levels": (True, False),
           "general": (False, False)}


def check_kernels(kernels):
    """``(fast, levels)``: whether the integer record and the level kernels may
    run, for a ``kernels`` choice of :data:`KERNELS`.

    Parameters
    ----------
    kernels : {"auto", "no-fast", "no-levels", "general"}
        A key of :data:`KERNELS`.

    Returns
    -------
    fast : bool
        The integer record kernels may run.
    levels : bool
        The level kernels may run.

    Raises
    ------
    ValueError
        When ``kernels`` is not a key of :data:`KERNELS`.
    """
    try:
        return KERNELS[kernels]
    except (KeyError, TypeError):
        raise ValueError(f"kernels must be one of {', '.join(map(repr, KERNELS))}, "
                         f"got {kernels!r}") from None


def check_limit(value, name, upper):
    """Validate n_trees / max_depth: None (no limit) or an int >= 1 (or 0 for depth).

    Parameters
    ----------
    value : int or None
        The limit given; None: no limit.
    name : str
        The parameter's name, for messages; ``"max_depth"`` allows 0.
    upper : int
        The forest's own limit (its number of trees, or its depth).

    Returns
    -------
    int
        ``upper`` for None, else ``min(value, upper)``.

    Raises
    ------
    TypeError
        When ``value`` is not an int (a bool included) or None.
    ValueError
        When ``value`` is below 1 (below 0 for ``max_depth``).
    """
    if value is None:
        return upper
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int or None, got {value!r}")
    low = 0 if name == "max_depth" else 1
    if value < low:
        raise ValueError(f"{name}={value} must be >= {low} (or None for no limit)")
    return min(int(value), upper)


def check_fft_levels(fft_levels):
    """Validate ``fft_levels``: an int >= 0 (0: no levels evaluated by FFT).

    Parameters
    ----------
    fft_levels : int
        How many top tree levels to evaluate by FFT correlation.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        When ``fft_levels`` is not an int (a bool included) or is negative.
    """
    if isinstance(fft_levels, bool) or not isinstance(fft_levels, (int, np.integer)) \
            or fft_levels < 0:
        raise ValueError(f"fft_levels={fft_levels!r} must be an int >= 0 (0 = no FFT levels)")
    return int(fft_levels)


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def _channel_fix(layout, n_image, n_planes):
    names = layout.channel_names
    if n_image + n_planes < layout.channels and n_image in (1, 3) and n_planes == 0 \
            and layout.channels > 3:
        extra = layout.channels - n_image
        return (f"pass the other {_plural(extra, 'plane')} ({', '.join(names[n_image:])}) as "
                f"planes=, uint8 of shape (H, W, {extra})")
    if layout.channels == 1 and n_planes == 0:
        return ("give a grey image of shape (H, W) or (H, W, 1), e.g. "
                "cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)")
    if layout.channels == 3 and n_planes == 0:
        return ("give an RGB image of shape (H, W, 3) (facesegment.data.imageio.read_image reads "
                "grey files as RGB)")
    return f"give image channels + planes = {layout.channels}"


def window_image(image, planes, layout, name="image"):
    """The ``(H, W, layout.channels)`` uint8 image the windows are cut from.

    ``image`` (H, W) or (H, W, C) uint8, followed by ``planes`` (H, W) or
    (H, W, k) uint8 when given (an RGB image given to a model of one image
    channel is turned grey with ``facesegment.data.imageio.to_grey``); C-contiguous (a
    view of ``image`` when possible).  Raises TypeError/ValueError naming the
    problem and the fix.

    Parameters
    ----------
    image : uint8 (H, W) or (H, W, C)
        The image, non-empty.
    planes : uint8 (H, W) or (H, W, k), or None
        Extra planes stacked after the image's channels.
    layout : facesegment.layout.WindowLayout
        The model's layout; the image's channels plus the planes must be
        ``layout.channels``.
    name : str, optional
        The image's name in messages (default ``"image"``).

    Returns
    -------
    uint8 (H, W, layout.channels)
        C-contiguous.

    Raises
    ------
    TypeError
        When ``image`` is not a numpy array.
    ValueError
        When ``image`` or ``planes`` has the wrong dtype or shape, or their
        channels do not add up to ``layout.channels``.
    """
    stack = image_and_planes(image, planes, layout, name)
    if stack[1] is None:
        return stack[0]
    return np.ascontiguousarray(np.concatenate(stack, axis=2))


def image_and_planes(image, planes, layout, name="image"):
    """``(image (H, W, c0), planes (H, W, k) or None)``, both uint8 and
    C-contiguous, checked as :func:`window_image` checks them, not stacked.

    Parameters
    ----------
    image, planes, layout, name
        As :func:`window_image`.

    Returns
    -------
    image : uint8 (H, W, c0)
        The image (turned grey for a model of one image channel given RGB).
    planes : uint8 (H, W, k) or None
        None when no planes are given.

    Raises
    ------
    TypeError, ValueError
        As :func:`window_image`.
    """
    if not isinstance(image, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(image).__name__} "
                        "(read files with facesegment.data.imageio.read_image)")
    if image.dtype != np.uint8 or image.ndim not in (2, 3) or image.size == 0:
        raise ValueError(f"{name} must be a non-empty uint8 array of shape (H, W) or (H, W, C), "
                         f"got dtype {image.dtype} shape {image.shape} "
                         "(use facesegment.data.imageio.read_image)")
    nd = getattr(planes, "ndim", 0)
    n_planes_given = 0 if planes is None else (1 if nd == 2 else planes.shape[-1] if nd == 3
                                               else -1)
    if image.ndim == 3 and image.shape[2] == 3 and layout.channels - n_planes_given == 1:
        # a grey model given an RGB image: grey it as grey windows files were made

        image = to_grey(image)
    stack = [image[:, :, None] if image.ndim == 2 else image]
    n_planes = 0
    if planes is not None:
        if not isinstance(planes, np.ndarray) or planes.dtype != np.uint8 \
                or planes.ndim not in (2, 3) or planes.shape[:2] != image.shape[:2]:
            got = (f"dtype {planes.dtype} shape {planes.shape}" if isinstance(planes, np.ndarray)
                   else type(planes).__name__)
            raise ValueError(f"planes must be uint8 of shape {image.shape[:2] + ('k',)} (the "
                             f"image's height and width), got {got} (scale probability "
                             "maps to 0-255 uint8 first)")
        stack.append(planes[:, :, None] if planes.ndim == 2 else planes)
        n_planes = stack[1].shape[2]
    n_image = stack[0].shape[2]
    if n_image + n_planes != layout.channels:
        have = f"{name} has {_plural(n_image, 'channel')}"
        if planes is not None:
            have += f" and planes {_plural(n_planes, 'plane')}"
        raise ValueError(f"model expects {layout.window}x{layout.window} windows of "
                         f"{_plural(layout.channels, 'channel')} ({', '.join(layout.channel_names)}); "
                         f"{have}: {_channel_fix(layout, n_image, n_planes)}")
    return (np.ascontiguousarray(stack[0]),
            np.ascontiguousarray(stack[1]) if len(stack) > 1 else None)
