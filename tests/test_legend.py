"""The class key: `facesegment classes`, the key on the overlays (`--no-legend`
leaves it off), the label PNGs' palette and the README's legend image are one
palette."""

import numpy as np
import pytest

from facesegment.classes import CLASS_COLORS, CLASS_NAMES
from facesegment.cli import main
from tests.test_readme import ROOT


def _has_colour(image, rgb):
    return bool((image.reshape(-1, 3) == np.asarray(rgb, np.uint8)).all(axis=1).any())


def test_classes_lists_ids_names_and_the_palette(tmp_path, capsys):
    from facesegment.data.imageio import label_palette, read_image

    assert main(["classes", "--legend", str(tmp_path / "key.png")]) == 0
    lines = capsys.readouterr().out.splitlines()
    palette = label_palette()
    for i, name in enumerate(CLASS_NAMES):
        row = next(line for line in lines if line.split()[:1] == [str(i)])
        r, g, b = (int(v) for v in palette[i])
        assert name in row and f"#{r:02x}{g:02x}{b:02x}" in row and f"{r},{g},{b}" in row
    key = read_image(tmp_path / "key.png")
    assert all(_has_colour(key, CLASS_COLORS[i]) for i in range(1, len(CLASS_NAMES)))
    with pytest.raises(SystemExit) as exc:
        main(["classes", "--legend", str(tmp_path / "k.png"), "--scale", "9"])
    assert exc.value.code == 2
    assert "expected a number in 0.2..4" in capsys.readouterr().err


def test_the_readme_legend_is_the_one_the_command_writes(tmp_path):
    from facesegment.data.imageio import read_image

    assert main(["classes", "--legend", str(tmp_path / "key.png")]) == 0
    np.testing.assert_array_equal(read_image(ROOT / "docs" / "legend.png"),
                                  read_image(tmp_path / "key.png"))
    assert "docs/legend.png" in (ROOT / "README.md").read_text()


def test_the_key_is_drawn_only_where_it_fits():
    from facesegment.faces.segment import overlay
    from facesegment.classes import add_legend

    photo = np.full((400, 300, 3), 128, np.uint8)
    labels = np.zeros((400, 300), np.uint8)
    keyed = overlay(photo, labels, legend=True)
    assert (keyed[:200] == 128).all()                       # the top is the photo
    corner = keyed[250:, 150:]
    assert all(_has_colour(corner, CLASS_COLORS[i]) for i in range(1, len(CLASS_NAMES)))
    np.testing.assert_array_equal(overlay(photo, labels), photo)   # no key by default
    tiny = np.full((40, 40, 3), 128, np.uint8)
    np.testing.assert_array_equal(add_legend(tiny), tiny)     # no room: left off


def test_segment_overlays_carry_the_key_unless_no_legend(tmp_path):
    from PIL import Image

    from facesegment.data.imageio import label_palette, read_image, write_png_atomic

    rng = np.random.default_rng(0)
    write_png_atomic(tmp_path / "in" / "crop.png",
                     rng.integers(100, 140, (250, 250, 3), dtype=np.uint8))
    runs = {}
    for flag in ([], ["--no-legend"]):
        out = tmp_path / ("plain" if flag else "keyed")
        assert main(["segment", str(tmp_path / "in"), str(out), "-q", "--workers", "1",
                     "--model", "faces300w-two-probe", "--detect", "never"] + flag) == 0
        runs[bool(flag)] = read_image(out / "crop_overlay.png")
        with Image.open(out / "crop_label.png") as im:
            assert im.mode == "P"
            pal = np.array(im.getpalette()[:768], np.uint8).reshape(-1, 3)
        np.testing.assert_array_equal(pal[:len(CLASS_NAMES)], CLASS_COLORS)
        np.testing.assert_array_equal(pal, label_palette())
    keyed, plain = runs[False], runs[True]
    differ = (keyed != plain).any(axis=-1)
    assert differ.any() and not differ[:125].any()          # only the bottom corner
    if not _has_colour(keyed, CLASS_COLORS[6]):
        pytest.fail("the key's swatches are missing from the overlay")
