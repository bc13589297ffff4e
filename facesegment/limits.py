"""Resource limits on inputs, and the one reader of a user's file.

Every limit is here, with the error that reports it (one
:class:`~facesegment.errors.DataError` line naming the file and the fix):

* :data:`MAX_IMAGE_PIXELS`: an image (or label map) is refused, before it is
  decoded, when its header declares more pixels than this (a "decompression
  bomb": a small PNG that decodes to 40000x40000 would need gigabytes);
  the environment variable ``FACESEGMENT_MAX_IMAGE_PIXELS`` raises or lowers it.
* :data:`MAX_IMAGE_BYTES`, :data:`MAX_TEXT_BYTES`: the most bytes read from an
  image file and from a text file (landmarks, lists of names), so that
  ``--exclude /dev/zero`` or a huge file is one error line, not an
  out-of-memory kill.
* only regular files are read (:func:`read_regular_file`): a named pipe
  (FIFO), a device or a socket given as, or found among, the inputs is
  refused at once rather than read forever.
* :data:`MAX_SEED`: seeds are integers in ``0 .. 2**32 - 1`` (as scikit-learn's);
  :data:`MAX_WORKERS`, :data:`MAX_WINDOWS`, :data:`MAX_PIXEL_STRIDE`,
  :data:`MAX_WINDOW_SIDE` bound the command line's counts, and
  ``facesegment.forest.params`` bounds the estimators' (``MAX_TREES``...).
"""

import os
import stat

#: Decoded pixels an image may have (width x height): 2**28, e.g. 16384 x 16384.
MAX_IMAGE_PIXELS = 1 << 28
#: Bytes read from one image or label-map file at most (1 GiB).
MAX_IMAGE_BYTES = 1 << 30
#: Bytes read from one text file (``.pts`` landmarks, lists of names) at most (64 MiB).
MAX_TEXT_BYTES = 64 << 20
from .bounds import (MAX_JSON_BYTES, MAX_PIXEL_STRIDE, MAX_SEED, MAX_WINDOW_SIDE,  # noqa: F401
                     MAX_WINDOWS, MAX_WORKERS, env_number)
from .errors import DataError

_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"))


def max_image_pixels():
    """:data:`MAX_IMAGE_PIXELS`, or ``FACESEGMENT_MAX_IMAGE_PIXELS`` when set.

    Raises
    ------
    DataError
        Naming the variable when it is set to anything but an integer within
        its bounds (:data:`facesegment.bounds.BOUNDS`).
    """
    return env_number("FACESEGMENT_MAX_IMAGE_PIXELS", MAX_IMAGE_PIXELS)


def not_regular(mode):
    """What a file is when it is not a regular file; None for a regular file.

    Parameters
    ----------
    mode : int
        The file's ``st_mode`` (from ``os.stat`` or ``os.fstat``).

    Returns
    -------
    str or None
        "a named pipe (FIFO)", "a character device", "a block device",
        "a socket", "a folder" or "not a regular file"; None for a regular file.
    """
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular_file(path, what, max_bytes, fix="give a regular file"):
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    The file is opened without blocking (a FIFO never hangs the open) and
    checked with ``fstat`` on the open descriptor, so it cannot be swapped
    between the check and the read.

    Parameters
    ----------
    path : str or path-like
        The file to read.
    what : str
        What the file is, for messages (e.g. "landmarks file").
    max_bytes : int
        The most bytes read; a larger file (or one that grows past it while it
        is read) is refused.
    fix : str, default="give a regular file"
        The fix named when the file is not a regular file or is too large.

    Returns
    -------
    bytes
        The file's content.

    Raises
    ------
    DataError
        Naming ``path`` when it is missing ("does not exist"), not a regular file
        (a FIFO, a device, a socket, a folder), unreadable, or larger than
        ``max_bytes``.
    """
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise DataError(path, f"{what} does not exist", "check the path") from None
    except IsADirectoryError:
        raise DataError(path, f"{what} is a folder, not a file", "give the path of a file") from None
    except OSError as exc:
        raise DataError(path, f"cannot read the {what} ({exc.strerror or exc})",
                        "check that the file is readable (permissions)") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise DataError(path, f"{what} is a folder, not a file", "give the path of a file")
        kind = not_regular(st.st_mode)
        if kind:
            raise DataError(path, f"{what} is {kind}, not a regular file; it is not read", fix)
        if st.st_size > max_bytes:
            raise DataError(path, f"{what} is {st.st_size:,} bytes, more than the "
                            f"{max_bytes:,} read at most", fix)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 24, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # grew while read
                raise DataError(path, f"{what} is more than the {max_bytes:,} bytes read "
                                "at most", fix)
        return b"".join(chunks)
    except OSError as exc:
        raise DataError(path, f"cannot read the {what} ({exc.strerror or exc})",
                        "check that the file is readable") from None
    finally:
        os.close(fd)


def read_text_file(path, what, fix="give a UTF-8 text file"):
    """The text of a regular file of at most :data:`MAX_TEXT_BYTES` bytes.

    Parameters
    ----------
    path : str or path-like
        The file to read.
    what : str
        What the file is, for messages.
    fix : str, default="give a UTF-8 text file"
        The fix named when the file is not a regular file or is too large.

    Returns
    -------
    str
        The content decoded as UTF-8, undecodable bytes replaced.

    Raises
    ------
    DataError
        As :func:`read_regular_file`.
    """
    return read_regular_file(path, what, MAX_TEXT_BYTES, fix).decode("utf-8", errors="replace")


def image_size(data):
    """``(width, height)`` from the header of PNG, JPEG, BMP or GIF bytes.

    Parameters
    ----------
    data : bytes-like
        The encoded image (only the header is parsed; a JPEG is scanned for its
        first frame marker).

    Returns
    -------
    tuple of int or None
        ``(width, height)``, or None for another format or a header this cannot
        parse (the decoder then decides).
    """
    head = bytes(memoryview(data)[:1 << 16])
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24 and head[12:16] == b"IHDR":
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:2] == b"BM" and len(head) >= 26:
        w = int.from_bytes(head[18:22], "little", signed=True)
        h = int.from_bytes(head[22:26], "little", signed=True)
        return abs(w), abs(h)
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(bytes(memoryview(data)))
    return None


def _jpeg_size(buf):
    """The frame size of a JPEG (its first SOF marker), or None."""
    i, n = 2, len(buf)
    while i + 4 <= n:
        if buf[i] != 0xFF:
            i += 1
            continue
        marker = buf[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0x01,) or 0xD0 <= marker <= 0xD9:
            i += 2
            continue
        length = int.from_bytes(buf[i + 2:i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > n:
                return None
            h = int.from_bytes(buf[i + 5:i + 7], "big")
            w = int.from_bytes(buf[i + 7:i + 9], "big")
            return w, h
        if length < 2:
            return None
        i += 2 + length
    return None


def check_image_pixels(path, data, what="image"):
    """Refuse an encoded image that declares too many pixels, before it is decoded.

    Parameters
    ----------
    path : str or path-like
        The image's file, named in the message.
    data : bytes-like
        The encoded image.
    what : str, default="image"
        What the file is, for the message.

    Raises
    ------
    DataError
        Naming ``path`` when its header declares more than
        :func:`max_image_pixels` pixels (also when the limit's environment
        variable is invalid).  An image whose size cannot be read from its
        header passes.
    """
    size = image_size(data)
    if size is None:
        return
    w, h = size
    limit = max_image_pixels()
    if w * h > limit:
        raise DataError(path, f"{what} declares {w}x{h} = {w * h:,} pixels, more than the "
                        f"limit of {limit:,} (a decompression bomb, or a photo too big)",
                        "shrink the image, or raise FACESEGMENT_MAX_IMAGE_PIXELS if it is "
                        "genuine")
