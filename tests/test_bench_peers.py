"""benchmarks/peers.py builds the peers' window matrix exactly as our windows are laid out."""

import numpy as np

from benchmarks.peers import face_windows, ratios


def test_face_windows_are_the_reflect_padded_windows_in_our_feature_order():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(9, 7, 3), dtype=np.uint8)
    half = 2
    rows = face_windows(image, half)
    padded = np.pad(image, ((half, half), (half, half), (0, 0)), mode="reflect")
    assert rows.shape == (9 * 7, 5 * 5 * 3) and rows.dtype == np.uint8
    for r, c in [(0, 0), (4, 3), (8, 6)]:
        np.testing.assert_array_equal(rows[r * 7 + c], padded[r:r + 5, c:c + 5].reshape(-1))


def test_ratios_are_peer_over_ours_and_failed_peers_are_kept():
    rows = ratios([{"peer": "ours", "fit_s": 2.0, "face_ms": 10.0, "accuracy": 60.0},
                   {"peer": "a", "fit_s": 5.0, "face_ms": 250.0, "accuracy": 61.5},
                   {"peer": "b", "error": "MemoryError"}])
    assert rows[1]["fit_ratio"] == 2.5 and rows[1]["face_ratio"] == 25.0
    assert rows[1]["accuracy_vs_ours"] == 1.5 and rows[0]["fit_ratio"] == 1.0
    assert rows[2] == {"peer": "b", "error": "MemoryError"}


def test_update_doc_replaces_its_part_and_keeps_the_others(tmp_path):
    from benchmarks.peers import update_doc

    doc = tmp_path / "peers.md"
    update_doc(doc, "# Speed\n\nold table\n")
    update_doc(doc, "## Why\n\nfirst\n")
    update_doc(doc, "# Speed\n\nnew table\n")
    assert doc.read_text() == "# Speed\n\nnew table\n\n## Why\n\nfirst\n"
    update_doc(doc, "## Why\n\nsecond\n")
    assert doc.read_text() == "# Speed\n\nnew table\n\n## Why\n\nsecond\n"
