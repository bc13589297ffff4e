"""Grey windows end to end: extract --grey, train, and dense inference that
turns RGB photos grey for a grey model (the layout is data, not a constant)."""

import numpy as np
import pytest

from facesegment.cli import main
from facesegment.data.imageio import to_grey, write_png_atomic
from facesegment.dense import predict_image
from facesegment.layout import WindowLayout
from facesegment.models import load_model
from facesegment.data.windows import read_windows


def _faces(root, n=6, size=48, seed=0):
    import cv2

    rng = np.random.default_rng(seed)
    for i in range(n):
        img = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        lab = np.zeros((size, size), np.uint8)
        for c in range(8):  # one block per class, brighter for higher ids
            y, x = divmod(c, 4)
            lab[4 + 20 * y:20 + 20 * y, 2 + 11 * x:11 + 11 * x] = c
            img[lab == c] = np.clip(img[lab == c] // 4 + 25 * c, 0, 255)
        cv2.imwrite(str(root / f"f{i}.png"), img[:, :, ::-1])
        write_png_atomic(root / f"f{i}_label.png", lab)


@pytest.mark.slow
def test_grey_windows_train_and_segment_rgb_photos(tmp_path):
    data = tmp_path / "faces"
    data.mkdir()
    _faces(data)
    out = tmp_path / "w.h5"
    assert main(["extract", str(data), "--out", str(out), "--grey", "--window", "7",
                 "-n", "400", "-q"]) == 0
    ws = read_windows(out)
    assert ws.meta.layout == WindowLayout(window=7, channels=1)
    assert ws.X.shape[1:] == (7, 7, 1) and ws.meta.mean.shape == (49,)
    assert main(["train", "--kind", "axis", "--trees", "3", "--windows", str(out), "-q",
                 "--out", str(tmp_path / "m")]) == 0
    model = load_model(tmp_path / "m")
    assert model.layout == ws.meta.layout
    import cv2

    rgb = cv2.imread(str(data / "f0.png"))[:, :, ::-1].copy()
    p_rgb, l_rgb = predict_image(model, rgb, mode="full", alpha=0.0)
    p_grey, l_grey = predict_image(model, to_grey(rgb), mode="full", alpha=0.0)
    np.testing.assert_array_equal(l_rgb, l_grey)
    np.testing.assert_array_equal(p_rgb, p_grey)
    assert p_rgb.shape == (48, 48, 8)


def test_extract_rejects_an_even_window(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["extract", str(tmp_path), "--out", str(tmp_path / "w.h5"), "--window", "30"])
    assert "odd window side" in capsys.readouterr().err
