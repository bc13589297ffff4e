"""Image and label-map reading: channel conversion and every bad-input message."""

import cv2
import os

import numpy as np
import pytest

from facesegment.errors import DataError
from facesegment.data.imageio import read_image, read_label, write_png_atomic


def _rgb(h=12, w=10, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_rgb_png_roundtrip(tmp_path):
    img = _rgb()
    write_png_atomic(tmp_path / "a.png", img)
    out = read_image(tmp_path / "a.png")
    assert out.dtype == np.uint8 and out.shape == (12, 10, 3)
    np.testing.assert_array_equal(out, img)


def test_greyscale_becomes_three_identical_channels(tmp_path):
    g = _rgb()[:, :, 0]
    cv2.imwrite(str(tmp_path / "g.png"), g)
    out = read_image(tmp_path / "g.png")
    assert out.shape == (12, 10, 3)
    for c in range(3):
        np.testing.assert_array_equal(out[:, :, c], g)


def test_rgba_drops_alpha(tmp_path):
    img = _rgb()
    bgra = np.dstack([img[:, :, ::-1], np.full(img.shape[:2], 7, np.uint8)])
    cv2.imwrite(str(tmp_path / "a.png"), bgra)
    np.testing.assert_array_equal(read_image(tmp_path / "a.png"), img)


def test_16bit_scaled_to_8bit(tmp_path):
    g16 = np.array([[0, 257, 65535, 32896]], dtype=np.uint16)
    cv2.imwrite(str(tmp_path / "g16.png"), g16)
    out = read_image(tmp_path / "g16.png")
    np.testing.assert_array_equal(out[0, :, 0], [0, 1, 255, 128])


def test_truncated_jpeg(tmp_path):
    ok, buf = cv2.imencode(".jpg", _rgb(64, 64))
    p = tmp_path / "t.jpg"
    p.write_bytes(buf.tobytes()[:40])
    with pytest.raises(DataError, match=r"t\.jpg: not a readable image .*check that it is a "
                                        r"\.jpg, \.png or \.bmp image") as err:
        read_image(p)
    assert "delete" not in str(err.value)


@pytest.mark.parametrize("name, fourcc", [("clip.mp4", "mp4v"), ("clip.avi", "MJPG")])
def test_a_video_is_named_as_one_and_never_to_be_deleted(tmp_path, name, fourcc):
    path = tmp_path / name
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), 10, (64, 48))
    if not writer.isOpened():
        pytest.skip(f"this OpenCV cannot write {fourcc}")
    for k in range(5):
        writer.write(np.full((48, 64, 3), 40 * k, np.uint8))
    writer.release()
    with pytest.raises(DataError, match=rf"{name}: is a video, not an image.*extract them") as err:
        read_image(path)
    assert "delete" not in str(err.value)


def test_zero_byte_file(tmp_path):
    p = tmp_path / "z.jpg"
    p.write_bytes(b"")
    with pytest.raises(DataError, match=r"z\.jpg: image file is empty \(0 bytes\)"):
        read_image(p)


def test_non_image_file(tmp_path):
    p = tmp_path / "notes.jpg"
    p.write_text("this is not a picture\n")
    with pytest.raises(DataError, match=r"notes\.jpg: not a readable image"):
        read_image(p)


def test_missing_image(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_image(tmp_path / "nope.png")


def test_label_wrong_size(tmp_path):
    cv2.imwrite(str(tmp_path / "l.png"), np.zeros((5, 6), np.uint8))
    with pytest.raises(DataError, match=r"l\.png: label map is 6x5 but its image is 10x12 .*regenerate"):
        read_label(tmp_path / "l.png", (12, 10))


def test_label_ids_out_of_range(tmp_path):
    lab = np.zeros((5, 6), np.uint8)
    lab[1, 1] = 9
    lab[2, 2] = 255
    cv2.imwrite(str(tmp_path / "l.png"), lab)
    with pytest.raises(DataError, match=r"label ids \[9\] are outside 0-7 and 255"):
        read_label(tmp_path / "l.png")


def test_label_valid_with_ignore(tmp_path):
    lab = np.arange(30, dtype=np.uint8).reshape(5, 6) % 8
    lab[0, 0] = 255
    write_png_atomic(tmp_path / "l.png", lab)
    np.testing.assert_array_equal(read_label(tmp_path / "l.png", (5, 6, 3)), lab)


def test_label_colour_png_rejected(tmp_path):
    cv2.imwrite(str(tmp_path / "c.png"), _rgb(5, 6))
    with pytest.raises(DataError, match="colour channels"):
        read_label(tmp_path / "c.png")


def test_unwritable_output(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataError, match=r"file/sub/a\.png: .*choose a writable output folder"):
        write_png_atomic(blocker / "sub" / "a.png", _rgb())


def test_16bit_rgb_scaled_and_reordered(tmp_path):
    rgb16 = np.zeros((2, 2, 3), np.uint16)
    rgb16[..., 0] = 65535  # red
    rgb16[..., 2] = 257    # blue
    cv2.imwrite(str(tmp_path / "c16.png"), rgb16[:, :, ::-1])
    out = read_image(tmp_path / "c16.png")
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out[0, 0], [255, 0, 1])


def test_unreadable_file_is_data_error(tmp_path, monkeypatch):
    """A file that cannot be opened (permissions) is a DataError naming it, not a crash."""
    path = tmp_path / "locked.png"
    write_png_atomic(path, _rgb())
    write_png_atomic(tmp_path / "locked_label.png", np.zeros((12, 10), np.uint8))

    import facesegment.limits as limits

    real_open = os.open

    def denied(file, *args, **kwargs):
        if str(file).endswith(".png"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(limits.os, "open", denied)
    with pytest.raises(DataError, match=r"locked\.png: cannot read the image file "
                                        r"\(Permission denied\).*permissions"):
        read_image(path)
    with pytest.raises(DataError, match=r"locked_label\.png: cannot read the label map"):
        read_label(tmp_path / "locked_label.png")


def test_folder_named_like_an_image(tmp_path):
    (tmp_path / "dir.jpg").mkdir()
    with pytest.raises(DataError, match=r"dir\.jpg: image file is a folder"):
        read_image(tmp_path / "dir.jpg")


def _exif(orientation):
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def test_jpeg_exif_orientation_turns_photo_upright(tmp_path):
    """Orientation 6 (phones held upright): the stored landscape pixels are shown
    rotated 90 degrees clockwise; read_image reads them that way by default
    (as label, extract, evaluate and segment all do); orient=False as stored."""
    from PIL import Image

    stored = np.zeros((20, 40, 3), np.uint8)  # landscape, as the sensor wrote it
    stored[:8, :8] = (255, 0, 0)  # red block at the top left
    Image.fromarray(stored).save(tmp_path / "plain.jpg", quality=95)
    Image.fromarray(stored).save(tmp_path / "phone.jpg", quality=95, exif=_exif(6))
    as_stored = read_image(tmp_path / "phone.jpg", orient=False)
    np.testing.assert_array_equal(as_stored, read_image(tmp_path / "plain.jpg"))
    assert as_stored.shape == (20, 40, 3)
    upright = read_image(tmp_path / "phone.jpg")
    assert upright.shape == (40, 20, 3)
    np.testing.assert_array_equal(upright, np.rot90(as_stored, k=-1))
    assert upright[2, -3, 0] > 200 and upright[2, 2, 0] < 50  # top left -> top right
    np.testing.assert_array_equal(read_image(tmp_path / "phone.jpg", orient=True), upright)
    np.testing.assert_array_equal(read_image(tmp_path / "plain.jpg", orient=False),
                                  read_image(tmp_path / "plain.jpg"))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_exif_orientation_matches_pillow(tmp_path, orientation):
    from PIL import Image, ImageOps

    path = tmp_path / f"o{orientation}.png"
    Image.fromarray(_rgb(5, 7, seed=orientation)).save(path, exif=_exif(orientation))
    with Image.open(path) as im:
        expected = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
    np.testing.assert_array_equal(read_image(path), expected)
    np.testing.assert_array_equal(read_image(path, orient=False), _rgb(5, 7, seed=orientation))


def test_paletted_label_map_reads_as_ids(tmp_path):
    """write_label_png: class colours as the palette (viewers), ids as pixels (read_label)."""
    from PIL import Image

    from facesegment.classes import CLASS_COLORS
    from facesegment.data.imageio import write_label_png

    lab = np.random.default_rng(0).integers(0, 8, (12, 10)).astype(np.uint8)
    lab[0, 0] = 255
    write_label_png(tmp_path / "l_label.png", lab)
    np.testing.assert_array_equal(read_label(tmp_path / "l_label.png", (12, 10)), lab)
    with Image.open(tmp_path / "l_label.png") as im:
        assert im.mode == "P"
        rgb = np.asarray(im.convert("RGB"))
    np.testing.assert_array_equal(rgb[lab < 8], CLASS_COLORS[lab[lab < 8]])
    assert tuple(rgb[0, 0]) == (255, 255, 255)
    # a paletted PNG made elsewhere (e.g. an annotation tool) reads as its indices too
    im = Image.fromarray(np.array([[0, 9], [3, 1]], np.uint8))
    im.putpalette([0, 0, 0] * 256)
    im.save(tmp_path / "tool_label.png")
    with pytest.raises(DataError, match=r"label ids \[9\] are outside 0-7 and 255"):
        read_label(tmp_path / "tool_label.png")
    with pytest.raises(ValueError, match="uint8"):
        write_label_png(tmp_path / "x.png", lab.astype(np.int32))
