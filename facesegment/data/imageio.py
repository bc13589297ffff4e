"""Reading images and label maps into the project's one notion of a labelled face.

Images become RGB uint8 ``(H, W, 3)``: greyscale is repeated to 3 channels, RGBA
drops alpha, 16-bit images are scaled to 8 bits.  Label maps are uint8 ``(H, W)``
with ids 0-7 and 255 for "ignore".  Photos are turned upright by their EXIF
orientation tag (as viewers show them) wherever they are read, so `label`,
`extract`, `evaluate` and `segment` all see the same pixels; label maps and
``.pts`` landmarks are in those upright coordinates.
``read_image(path, orient=False)`` returns the pixels as stored.

Label maps may be plain 8-bit greyscale PNGs or paletted PNGs (the palette
indices are the class ids): :func:`write_label_png` writes the latter, with the
class colours of :data:`facesegment.classes.CLASS_COLORS` as the palette, so a
label map opens readably in any image viewer and still reads back as ids.
"""

import io
import os

import cv2
import numpy as np

from ..classes import CLASS_COLORS, IGNORE, N_CLASSES
from ..atomic import write_bytes_atomic
from ..errors import DataError
from ..limits import MAX_IMAGE_BYTES, check_image_pixels, max_image_pixels, read_regular_file

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")


def _to_uint8(arr):
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == np.uint16:
        return ((arr.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    if np.issubdtype(arr.dtype, np.floating):
        return np.clip(np.rint(arr * 255.0), 0, 255).astype(np.uint8)
    return np.clip(arr, 0, 255).astype(np.uint8)


def _file_bytes(path, what, missing_fix, empty_fix):
    """The bytes of the file ``path`` as uint8; DataError naming it when it cannot be read.

    Only a regular file of at most :data:`facesegment.limits.MAX_IMAGE_BYTES` is
    read (a named pipe or a device is refused, never waited on); an image whose
    header declares more than :func:`facesegment.limits.max_image_pixels`
    pixels is refused before it is decoded.
    """
    if not os.path.lexists(path):
        raise DataError(path, f"{what} does not exist", missing_fix)
    raw = read_regular_file(path, what, MAX_IMAGE_BYTES,
                            "remove it, or give an image file (jpg, png, bmp)")
    if not raw:
        raise DataError(path, f"{what} is empty (0 bytes)", empty_fix)
    data = np.frombuffer(raw, dtype=np.uint8)
    check_image_pixels(path, data, what)
    return data


def _decode(path, data, flags):
    """``cv2.imdecode`` with its failures (and a decoded size over the pixel
    limit) as None or a DataError naming ``path``."""
    try:
        img = cv2.imdecode(data, flags)
    except cv2.error:
        return None
    except MemoryError:
        raise DataError(path, "not enough memory to decode the image",
                        "shrink the image or free memory") from None
    if img is not None and img.shape[0] * img.shape[1] > max_image_pixels():
        raise DataError(path, f"decodes to {img.shape[1]}x{img.shape[0]} pixels, more than "
                        f"the limit of {max_image_pixels():,}",
                        "shrink the image, or raise FACESEGMENT_MAX_IMAGE_PIXELS")
    return img


#: EXIF orientation -> (transpose, flip rows, flip columns) that turn the stored
#: pixels upright (the transforms of ``PIL.ImageOps.exif_transpose``).
_ORIENTATIONS = {2: (False, False, True), 3: (False, True, True), 4: (False, True, False),
                 5: (True, False, False), 6: (True, False, True), 7: (True, True, True),
                 8: (True, True, False)}


def exif_orientation(data):
    """The EXIF orientation tag (1-8) of an encoded image; 1 when it has none.

    Parameters
    ----------
    data : bytes or uint8 array
        The image file's bytes (JPEG APP1 ``Exif`` segment or PNG ``eXIf`` chunk).
    """
    head = bytes(memoryview(data)[:1 << 16])
    if b"Exif\x00\x00" not in head and b"eXIf" not in head:
        return 1
    try:
        from PIL import Image

        with Image.open(io.BytesIO(memoryview(data))) as im:
            value = im.getexif().get(0x0112, 1)
    except Exception:  # noqa: BLE001 - bad metadata never makes a readable image unreadable
        return 1
    return value if value in _ORIENTATIONS else 1


def apply_orientation(img, orientation):
    """Turn an image upright by an EXIF orientation.

    Parameters
    ----------
    img : ndarray, shape (H, W, ...)
        The pixels as stored.
    orientation : int
        The EXIF orientation tag, 1-8 (other values: unchanged).

    Returns
    -------
    ndarray
        A view of ``img`` transposed and/or flipped (``(W, H, ...)`` for the
        orientations 5-8).
    """
    transpose, flip_rows, flip_cols = _ORIENTATIONS.get(orientation, (False, False, False))
    if transpose:
        img = np.swapaxes(img, 0, 1)
    if flip_rows:
        img = img[::-1]
    if flip_cols:
        img = img[:, ::-1]
    return img


def read_image(path, orient=True):
    """Read an image file as RGB uint8 ``(H, W, 3)``.

    Parameters
    ----------
    path : str or Path
    orient : bool
        Turn the image upright by its EXIF orientation tag (photos from
        phones and cameras), as viewers show it (default).  False returns
        the pixels as stored.  (Images without the tag, such as all of
        faces300w and LFW, read the same either way.)

    Raises
    ------
    DataError
        If the file is missing, a folder, unreadable (permissions), empty, not
        an image, or corrupt.
    """
    path = os.fspath(path)
    data = _file_bytes(path, "image file", "check the path", "re-copy or delete it")
    img = _decode(path, data, cv2.IMREAD_UNCHANGED)
    if img is None or img.size == 0:
        if _is_video(data):
            raise DataError(path, "is a video, not an image",
                            "segment its frames: extract them first (e.g. ffmpeg -i CLIP "
                            "frames/%05d.png), then give the frames' folder")
        raise DataError(path, "not a readable image (corrupt, truncated or not an image)",
                        "check that it is a .jpg, .png or .bmp image, or copy it again")
    img = _to_uint8(img)
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    elif img.ndim == 3 and img.shape[2] == 1:
        img = np.repeat(img, 3, axis=2)
    elif img.ndim == 3 and img.shape[2] == 4:
        img = cv2.cvtColor(img, cv2.COLOR_BGRA2RGB)
    elif img.ndim == 3 and img.shape[2] == 3:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    else:
        raise DataError(path, f"unsupported image shape {img.shape}",
                        "use a greyscale, RGB or RGBA image")
    if orient:
        img = apply_orientation(img, exif_orientation(data))
    return np.ascontiguousarray(img)


def _is_video(data):
    """True for the first bytes of a common video container (MP4/MOV, AVI, Matroska/WebM,
    MPEG program or transport stream)."""
    head = bytes(data[:16])
    return (head[4:8] == b"ftyp" or (head[:4] == b"RIFF" and head[8:12] == b"AVI ")
            or head[:4] in (b"\x1aE\xdf\xa3", b"\x00\x00\x01\xba")
            or (len(data) > 376 and data[0] == data[188] == data[376] == 0x47))


def to_grey(image):
    """An RGB image as grey (ITU-R 601 luma, OpenCV's ``COLOR_RGB2GRAY``).

    Grey windows files (``facesegment extract --grey``) and grey models use it.

    Parameters
    ----------
    image : ndarray of uint8, shape (H, W, 3) or (H, W)
        RGB image; a grey ``(H, W)`` image is returned as it is.

    Returns
    -------
    ndarray of uint8, shape (H, W)
    """
    import cv2

    if image.ndim == 2:
        return image
    return cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)


def read_label(path, shape=None):
    """Read a label map as uint8 ``(H, W)`` and validate its ids.

    Parameters
    ----------
    path : str or Path
    shape : tuple (H, W), optional
        The image's size; a label map of another size is an error.
    """
    path = os.fspath(path)
    data = _file_bytes(path, "label map",
                       "create it with `facesegment label` or point --labels at the label tree",
                       "regenerate it with `facesegment label`")
    lab = _decode_palette_png(data) if _is_palette_png(data) else _decode(
        path, data, cv2.IMREAD_UNCHANGED)
    if lab is None:
        raise DataError(path, "label map is not a readable PNG", "regenerate it with `facesegment label`")
    if lab.ndim == 3:
        if np.all(lab == lab[:, :, :1]):
            lab = lab[:, :, 0]
        else:
            raise DataError(path, "label map has colour channels; expected one channel of class ids 0-7/255",
                            "save the class ids as a single-channel 8-bit PNG")
    if lab.dtype != np.uint8:
        raise DataError(path, f"label map has dtype {lab.dtype}; expected 8-bit class ids",
                        "save the class ids as a single-channel 8-bit PNG")
    if shape is not None and tuple(lab.shape[:2]) != tuple(shape[:2]):
        raise DataError(path, f"label map is {lab.shape[1]}x{lab.shape[0]} but its image is "
                        f"{shape[1]}x{shape[0]}", "regenerate the label map for this image")
    bad = (lab >= N_CLASSES) & (lab != IGNORE)
    if bad.any():
        vals = sorted(set(np.unique(lab[bad]).tolist()))[:5]
        raise DataError(path, f"label ids {vals} are outside 0-{N_CLASSES - 1} and {IGNORE}",
                        f"use ids 0-{N_CLASSES - 1} for classes and {IGNORE} for 'ignore'")
    return np.ascontiguousarray(lab)


def _is_palette_png(data):
    """Whether the bytes are a PNG with colour type 3 (palette indices)."""
    head = bytes(memoryview(data)[:26])
    return len(head) == 26 and head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" \
        and head[25] == 3


def _decode_palette_png(data):
    """The palette indices of a paletted PNG as uint8 ``(H, W)`` (None if unreadable).

    OpenCV would expand the palette to colours; the indices are the class ids.
    """
    from PIL import Image

    try:
        with Image.open(io.BytesIO(memoryview(data))) as im:
            if im.mode != "P":
                return None
            return np.array(im, dtype=np.uint8)
    except Exception:  # noqa: BLE001 - any decoding problem: "not a readable PNG"
        return None


def label_palette():
    """The 256-entry RGB palette of label maps: class colours for ids 0-7, white
    for 255 ("ignore"), grey for ids that are not classes."""
    pal = np.full((256, 3), 128, dtype=np.uint8)
    pal[:N_CLASSES] = CLASS_COLORS[:N_CLASSES]
    pal[IGNORE] = 255
    return pal


def encode_label_png(labels):
    """PNG bytes of a label map: palette indices = class ids.

    The palette is :func:`label_palette`, so viewers show the class colours.

    Parameters
    ----------
    labels : ndarray of uint8, shape (H, W)
        Class ids.

    Returns
    -------
    bytes

    Raises
    ------
    ValueError
        When ``labels`` is not a 2-D uint8 array.
    """
    from PIL import Image

    lab = np.asarray(labels)
    if lab.dtype != np.uint8 or lab.ndim != 2:
        raise ValueError(f"labels must be uint8 (H, W), got {lab.dtype} {lab.shape}")
    im = Image.fromarray(np.ascontiguousarray(lab))
    im.putpalette(label_palette().tobytes())
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()


def write_label_png(path, labels):
    """Write a label map as a paletted PNG atomically (see :func:`encode_label_png`).

    Viewers show the class colours; :func:`read_label` reads the class ids.

    Parameters
    ----------
    path : str or path-like
        The PNG to write.
    labels : ndarray of uint8, shape (H, W)
        Class ids.

    Raises
    ------
    ValueError
        When ``labels`` is not a 2-D uint8 array.
    DataError
        When the path may not be written or the write fails.
    """
    write_bytes_atomic(os.fspath(path), encode_label_png(labels))


def write_png_atomic(path, array):
    """Write a PNG atomically: temporary name, then rename.

    Parameters
    ----------
    path : str or path-like
        The PNG to write.
    array : ndarray of uint8, shape (H, W) or (H, W, 3)
        Grey or RGB pixels.

    Raises
    ------
    ValueError
        When ``array`` is not uint8 grey or RGB.
    DataError
        When the PNG cannot be encoded, the path may not be written or the
        write fails.
    """
    path = os.fspath(path)
    arr = np.asarray(array)
    if arr.dtype != np.uint8 or not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):
        raise ValueError(f"array must be uint8 (H, W) or (H, W, 3), got {arr.dtype} {arr.shape}")
    if arr.ndim == 3 and arr.shape[2] == 3:
        arr = cv2.cvtColor(arr, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".png", arr)
    if not ok:  # pragma: no cover
        raise DataError(path, "could not encode PNG")
    write_bytes_atomic(path, buf.tobytes())
