"""benchmarks/peers_oblique.py: treeple's SPORF and MORF beside our oblique forests.

treeple itself runs only in .venv-treeple (`make bench-peers`); these tests need
neither it nor the windows."""

import json
from pathlib import Path

import pytest

from benchmarks import peers, peers_oblique
from benchmarks.peers_oblique import compare, markdown, morf_patches, page, verdict

ROOT = Path(__file__).resolve().parents[1]
TP, CO2 = peers_oblique.OURS["two-probe"], peers_oblique.OURS["CO2"]


def test_quick_is_the_windows_and_forests_of_peers_quick():
    mine, theirs = peers_oblique.parse(["--quick"]), peers.parse(["--quick"])
    for key in ("data", "train", "test", "trees", "depth", "per_tree", "q", "faces"):
        assert getattr(mine, key) == getattr(theirs, key), key


def test_every_forest_has_the_axis_forests_trees_depth_leaves_and_draws():
    cfg = peers_oblique.parse(["--quick"])
    axis = peers.axis_params(cfg)
    shared = ("n_estimators", "max_depth", "min_samples_leaf", "max_samples", "random_state",
              "n_jobs")
    params = [peers_oblique.sporf_params(cfg), peers_oblique.morf_params(cfg, 31, 3, 4),
              *(peers_oblique.ours_params(cfg, k) for k in ("axis", "two-probe", "co2"))]
    for p in params:
        assert {k: p[k] for k in shared} == {k: axis[k] for k in shared}, p
        assert p["bootstrap"] is True
    assert params[0]["max_features"] == params[1]["max_features"] == cfg.q
    assert params[0]["criterion"] == "entropy"
    assert params[3]["n_pairs"] == cfg.pairs and params[4]["max_features"] == cfg.q
    with pytest.raises(ValueError):
        peers_oblique.ours_params(cfg, "ferns")


def test_morf_patches_are_the_window_rows_columns_channels():
    assert morf_patches(31, 3, 8) == ((31, 31, 3), (1, 1, 1), (8, 8, 3))
    assert morf_patches(15, 1, 40) == ((15, 15, 1), (1, 1, 1), (15, 15, 1))
    assert peers_oblique.morf_params(peers_oblique.parse([]), 31, 3, 4)["max_patch_dims"] == (
        4, 4, 3)


def test_one_morf_row_per_patch_side_and_forests_chosen_by_prefix():
    cfg = peers_oblique.parse(["--patch", "3", "5"])
    names = list(peers_oblique.forests(cfg))
    assert names[:4] == ["facesegment axis forest", TP, CO2, peers_oblique.SPORF]
    assert names[4:] == [peers_oblique.morf_name(3), peers_oblique.morf_name(5)]
    assert peers_oblique.chosen(names, []) == names
    assert peers_oblique.chosen(names, ["treeple MORF"]) == names[4:]
    assert peers_oblique.chosen(names, ["facesegment", "treeple SPORF"]) == names[:4]


def test_warm_up_fits_draw_fewer_windows_than_it_has():
    w = peers_oblique.warm({"n_estimators": 16, "max_samples": 64000, "max_depth": 20})
    assert w["max_samples"] < peers_oblique.WARM_ROWS and w["n_estimators"] == 2
    assert w["max_depth"] == 20


ROWS = [
    {"peer": "facesegment axis forest", "fit_s": 1.0, "accuracy": 50.0, "face_ms": 10.0},
    {"peer": TP, "fit_s": 4.0, "accuracy": 56.0, "face_ms": 20.0},
    {"peer": CO2, "fit_s": 8.0, "accuracy": 55.0, "face_ms": 400.0},
    {"peer": "treeple SPORF (ObliqueRandomForestClassifier)", "fit_s": 2.0, "accuracy": 55.5,
     "face_ms": 800.0},
    {"peer": "treeple MORF, patches to 4×4 (PatchObliqueRandomForestClassifier)",
     "error": "MemoryError"},
]


def _rows():
    return compare([dict(r) for r in ROWS])


def test_compare_gives_ratios_against_two_probe_and_co2():
    rows = _rows()
    sporf = rows[3]
    assert sporf["fit_x"] == {"two-probe": 0.5, "CO2": 0.25, "axis": 2.0}
    assert sporf["face_x"] == {"two-probe": 40.0, "CO2": 2.0, "axis": 80.0}
    assert sporf["accuracy_vs"] == {"two-probe": -0.5, "CO2": 0.5, "axis": 5.5}
    assert compare([{"peer": "x", "fit_s": 1.0, "face_ms": 1.0, "accuracy": 1.0}])[0][
        "fit_x"] == {}
    assert rows[1]["fit_x"]["two-probe"] == 1.0 and rows[2]["accuracy_vs"]["CO2"] == 0.0
    assert rows[4] == ROWS[4]   # a failed forest stays, without ratios


def test_compare_leaves_out_a_forest_of_ours_that_failed():
    rows = compare([dict(ROWS[0]), {"peer": TP, "error": "x"}, dict(ROWS[2]), dict(ROWS[3])])
    assert set(rows[3]["fit_x"]) == {"CO2", "axis"} and rows[3]["fit_x"]["CO2"] == 0.25


def test_verdict_names_what_wins_and_what_loses():
    rows = _rows()
    said = verdict(rows[3])
    assert said.startswith("treeple SPORF: ")
    assert ("against our two-probe forest it wins on fit time (0.5×) and loses on accuracy "
            "(-0.50 points), time per face (40×)") in said
    assert ("against our CO2 forest it wins on accuracy (+0.50 points), fit time (0.25×) "
            "and loses on time per face (2×)") in said
    assert said.endswith("against our axis forest it wins on accuracy (+5.50 points) and loses "
                         "on fit time (2×), time per face (80×).")
    assert verdict(rows[4]).startswith("treeple MORF, patches to 4×4 did not run (MemoryError")


def test_summary_names_treeples_most_accurate_row_and_ours():
    assert peers_oblique.summary(_rows()) == (
        "treeple's most accurate forest here, treeple SPORF, labels 55.50% of the test windows "
        "right; ours: two-probe 56.00%, CO2 55.00%, axis 50.00%.")
    assert peers_oblique.summary(_rows()[:3]) is None


def _doc(rows):
    return {"command": "python -m benchmarks.peers_oblique --quick", "machine": "x86_64, 2 cores",
            "versions": {"treeple": "0.10.3", "scikit-learn": "1.6.1"},
            "settings": {"train": 16000, "test": 4000, "trees": 8, "depth": 20,
                         "per_tree": 8000, "q": 119, "pairs": 400, "patch": [4, 8], "faces": 2,
                         "morf_patches": [[[31, 31, 3], [1, 1, 1], [4, 4, 3]],
                                          [[31, 31, 3], [1, 1, 1], [8, 8, 3]]]},
            "rows": rows}


def test_markdown_holds_every_row_and_the_verdicts():
    text = markdown(_doc(_rows()))
    assert text.startswith(peers_oblique.HEADING + "\n")
    assert "treeple 0.10.3, scikit-learn 1.6.1" in text and "31×31×3" in text
    assert ("| treeple SPORF (ObliqueRandomForestClassifier) | 2.0 | 0.5 | 0.25 | 55.50 | -0.50 "
            "| +0.50 | 800 | 40 | 2 |") in text
    assert ("| treeple MORF, patches to 4×4 (PatchObliqueRandomForestClassifier) | failed: "
            "MemoryError |") in text
    assert "largest side P (4, 8)" in text
    assert "- treeple SPORF: against our two-probe forest" in text
    # one heading: benchmarks.peers's update_doc replaces up to the next one
    assert sum(line.startswith("#") for line in text.splitlines()) == 1


def test_page_is_what_the_two_benchmarks_leave_in_either_order(tmp_path):
    peers_doc = json.loads((ROOT / "reports" / "bench" / "peers.json").read_text())
    ours = _doc(_rows())
    doc = tmp_path / "peers.md"
    peers.update_doc(doc, peers.markdown(peers_doc))
    peers.update_doc(doc, markdown(ours))
    assert doc.read_text() == page(peers_doc, ours)
    peers.update_doc(doc, peers.markdown(peers_doc))   # a rerun of benchmarks.peers
    peers.update_doc(doc, markdown(ours))              # and of this one
    assert doc.read_text() == page(peers_doc, ours)


def test_the_docs_page_holds_the_reports_treeple_numbers():
    path = ROOT / "reports" / "bench" / "peers_oblique.json"
    if not path.is_file():
        pytest.skip("no reports/bench/peers_oblique.json")
    doc = json.loads(path.read_text())
    text = (ROOT / "docs" / "peers.md").read_text()
    assert peers_oblique.HEADING in text
    text = text[text.index(peers_oblique.HEADING):]   # the axis forest is in both tables
    names = [r["peer"] for r in doc["rows"]]
    assert any(n.startswith("treeple SPORF") for n in names)
    assert any(n.startswith("treeple MORF") for n in names)
    assert doc["versions"]["scikit-learn"] == "1.6.1"
    for r in doc["rows"]:
        assert "error" not in r, r
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {r['peer']} |"))
        for number in (f"{r['fit_s']:.1f}", f"{r['accuracy']:.2f}", f"{r['face_ms']:.0f}"):
            assert f"| {number} |" in line, (number, line)


def test_main_without_treeple_says_where_it_runs(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(peers_oblique, "treeple_available", lambda: False)
    out = tmp_path / "x.json"
    assert peers_oblique.main(["--quick", "--out", str(out)]) == 2
    assert ".venv-treeple" in capsys.readouterr().err and not out.exists()
