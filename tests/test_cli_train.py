"""`facesegment train`: a tiny windows file -> model folder, options, errors."""

import json

import numpy as np
import pytest

from facesegment.classes import CLASS_NAMES
from facesegment.cli import main
from facesegment.models import load_model
from facesegment.data.windows import WindowsWriter


def _windows_file(path, n=160, seed=0):
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 8).astype(np.uint8)
    X = rng.integers(0, 256, (n, 31, 31, 3), dtype=np.uint8)
    X[:, 15, 15, 0] = y * 30 + rng.integers(0, 20, n).astype(np.uint8)  # learnable
    ii = (np.arange(n) % 4).astype(np.int32)
    with WindowsWriter(path, n) as w:
        w.write(0, X, y, ii, np.full((n, 2), 20, np.int32))
        w.set_strings("sources", ["img0", "img1", "img2", "img3"])
        w.set_attrs(class_names=list(CLASS_NAMES), pixel_counts=np.arange(1, 9, dtype=np.int64),
                    class_counts=np.bincount(y, minlength=8).astype(np.int64),
                    sampling_factors=np.linspace(0.5, 2, 8), with_replacement=np.zeros(8, bool),
                    mean=X.reshape(n, -1).mean(0).astype(np.float32),
                    std=X.reshape(n, -1).std(0).astype(np.float32) + 1,
                    seed=3, n_windows=n, margin=15, data_root="/data")
        w.finish()
    return X, y


@pytest.fixture(scope="module")
def wfile(tmp_path_factory):
    p = tmp_path_factory.mktemp("w") / "train.h5"
    X, y = _windows_file(p)
    return p, X, y


@pytest.mark.parametrize("kind, extra", [("axis", ["--max-features", "p^0.7"]),
                                         ("two-probe", ["--pairs", "50"]),
                                         ("co2", ["--max-depth", "4", "--oblique-min-samples", "40",
                                                  "--weight-dtype", "float16"]),
                                         ("co2-best", ["--max-depth", "3", "--pairs", "20",
                                                       "--oblique-min-samples", "40"]),
                                         ("co2-sparse", ["--max-depth", "4", "--pairs", "20",
                                                         "--oblique-min-samples", "40",
                                                         "--max-nonzero", "5",
                                                         "--sparsity", "prune"]),
                                         ("extra", ["--max-features", "all"]),
                                         ("ferns", ["--depth", "6", "--prior", "0.5"]),
                                         ("rotation", ["--subset-size", "3", "--rotated-features",
                                                       "60", "--subsets", "consecutive",
                                                       "--max-depth", "6"]),
                                         ("nongreedy", ["--max-depth", "4", "--nu", "10",
                                                        "--eta", "0.01", "--init-tree", "co2",
                                                        "--epochs", "3",
                                                        "--ssgd-refresh", "1"]),
                                         ("co2-nongreedy", ["--max-depth", "6", "--refine-depth",
                                                            "2", "--epochs", "2", "--init-nu", "4",
                                                            "--oblique-min-samples", "40"]),
                                         ("co2-pooled", ["--max-depth", "5", "--pairs", "20",
                                                         "--oblique-min-samples", "40"])])
def test_train_each_kind(tmp_path, wfile, capsys, kind, extra):
    path, X, y = wfile
    out = tmp_path / "models" / kind
    rc = main(["train", "--kind", kind, "--trees", "3", "--windows", str(path),
               "--out", str(out), "--workers", "2", "--seed", "5"] + extra)
    assert rc == 0
    cap = capsys.readouterr()
    assert f"wrote {out}" in cap.out and "3/3 trees" in cap.err and "nodes, depth" in cap.err
    m = load_model(out)
    assert m.kind == kind and m.arrays.n_trees == 3 and m.class_names == CLASS_NAMES
    np.testing.assert_allclose(m.sampling_factors, np.linspace(0.5, 2, 8))
    # provenance paths are relative to the model folder
    assert (out / m.provenance["windows"]).resolve() == path.resolve()
    assert m.provenance["n_windows_used"] == 160
    assert m.metrics["fit_seconds"] >= 0 and m.params["random_state"] == 5
    acc = np.mean(m.to_estimator().predict(m.layout.pooled(X)) == y)
    assert acc > (0.6 if m.layout.pool == 1 else 0.3)  # chance is 0.125 (pooled: the
    # signal, one pixel, is averaged with 8 random ones)
    if kind == "co2":
        assert m.arrays.weights.dtype == np.float16
        assert m.params["weight_dtype"] == "float16"
    if kind == "co2-best":
        assert m.params["init"] == "best" and m.params["n_pairs"] == 20
    if kind == "co2-sparse":  # int8 by default; no split over 5 features
        assert m.arrays.sparse_weight.dtype == np.int8 and m.arrays.weights.shape[0] == 0
        assert np.diff(m.arrays.sparse_ptr).max() <= 5 and m.params["sparsity"] == "prune"
    if kind == "nongreedy":
        assert (m.params["init"], m.params["n_epochs"], m.params["ssgd_refresh"]) == ("co2", 3, 1)
    if kind == "co2-nongreedy":
        assert (m.params["init"], m.params["refine_depth"], m.params["init_nu"]) == ("co2", 2, 4)
        assert int(m.arrays.depth.max()) > 2
    if kind == "co2-pooled":   # 3x3 box means by default: 10x10 cells of 31x31 windows
        assert m.layout.pool == 3 and m.arrays.n_features == m.layout.n_features
    if kind == "ferns":
        assert m.params["depth"] == 6 and m.params["prior"] == 0.5
    if kind == "rotation":
        assert m.params["max_rotated_features"] == 60 and m.params["subsets"] == "consecutive"


def test_train_covers_every_registered_kind():
    from facesegment.commands import train
    from facesegment.forest.registry import kind_names

    kinds = {c[0] for c in test_train_each_kind.pytestmark[0].args[1]}
    assert kinds == set(kind_names(task="classify"))
    assert all(k in train.DESCRIPTION for k in kind_names(task="classify"))


def test_option_of_another_kind_is_refused(wfile, tmp_path, capsys):
    path, _, _ = wfile
    rc = main(["train", "--kind", "axis", "--windows", str(path), "--out",
               str(tmp_path / "m"), "--nu", "2"])
    assert rc == 2 and "--nu does not apply to --kind axis" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_same_seed_identical_forest_bytes(tmp_path, wfile):
    path = wfile[0]
    for i, workers in enumerate(["1", "2"]):
        assert main(["train", "--kind", "axis", "--trees", "2", "--windows", str(path), "-q",
                     "--out", str(tmp_path / f"m{i}"), "--workers", workers]) == 0
    assert (tmp_path / "m0/forest.h5").read_bytes() == (tmp_path / "m1/forest.h5").read_bytes()


def test_exclude_images_and_max_samples(tmp_path, wfile):
    path = wfile[0]
    names = tmp_path / "val.txt"
    names.write_text("img1\n# comment\nimg3.jpg\n")
    out = tmp_path / "m"
    assert main(["train", "--kind", "axis", "--trees", "1", "--windows", str(path), "-q",
                 "--out", str(out), "--exclude-images", str(names), "--max-samples", "0.5",
                 "--no-bootstrap"]) == 0
    m = load_model(out)
    assert m.provenance["excluded_windows"] == 80 and m.provenance["n_windows_used"] == 80
    assert m.arrays.n_samples[0] == 40
    assert json.loads((out / "model.json").read_text())["params"]["bootstrap"] is False


def test_errors_exit_2_with_one_line(tmp_path, wfile, capsys):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    rc = main(["train", "--kind", "axis", "--windows", str(bad), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert rc == 2 and str(bad) in err and err.count("\n") == 1
    assert not (tmp_path / "m").exists()
    rc = main(["train", "--kind", "axis", "--windows", str(wfile[0]), "-q", "--no-bootstrap",
               "--max-samples", "1000", "--out", str(tmp_path / "m")])
    assert rc == 2 and "--max-samples" in capsys.readouterr().err
    rc = main(["train", "--kind", "co2-pooled", "--windows", str(wfile[0]), "-q", "--pool", "40",
               "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert rc == 2 and "--pool 40 is larger than the 31x31 windows" in err and err.count("\n") == 1
    assert not (tmp_path / "m").exists()
    with pytest.raises(SystemExit):
        main(["train", "--kind", "axis", "--windows", "w.h5", "--out", "m", "--max-features", "x"])


def test_unwritable_out_fails_before_training(tmp_path, wfile, capsys, monkeypatch):
    from facesegment.forest import AxisAlignedForest

    def no_fit(*args, **kwargs):
        raise AssertionError("trained although --out cannot be written")

    monkeypatch.setattr(AxisAlignedForest, "fit", no_fit)
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keep.txt").write_text("precious")
    for out, problem in ((blocker / "m", "cannot write the model"),
                         (blocker, "exists and is not a model folder"),
                         (docs, "is a folder that holds no model.json")):
        rc = main(["train", "--kind", "axis", "--trees", "1", "--windows", str(wfile[0]),
                   "-q", "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and f"{out}: {problem}" in err
    assert (docs / "keep.txt").read_text() == "precious"


# ---------------------------------------------------------------- hardening

def _copy_windows(src, dst, **changes):
    """A copy of the windows file ``src`` with datasets/attributes replaced."""
    import shutil

    import h5py

    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        for key, value in changes.items():
            if key in f:
                f[key][...] = value
            else:
                f.attrs[key] = value
    return dst


def test_label_id_outside_the_class_names_is_refused_before_training(tmp_path, wfile, capsys,
                                                                      monkeypatch):
    """A windows file whose labels contain id 9 (of 8 classes): one line, exit 2, no fit."""
    from facesegment.forest import AxisAlignedForest

    monkeypatch.setattr(AxisAlignedForest, "fit", lambda *a, **k: 1 / 0)
    path, _, y = wfile
    bad = _copy_windows(path, tmp_path / "bad.h5", labels=np.where(y == 3, 9, y))
    rc = main(["train", "--kind", "axis", "--windows", str(bad), "-q",
               "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert rc == 2 and "class id 9" in err and str(bad) in err and err.count("\n") == 1


def test_class_without_windows_is_refused(tmp_path, wfile, capsys):
    """extract -n 7 can leave a class with 0 windows and sampling factor 0."""
    path, _, y = wfile
    sf = np.linspace(0.5, 2, 8)
    sf[5] = 0.0
    bad = _copy_windows(path, tmp_path / "bad.h5", sampling_factors=sf)
    rc = main(["train", "--kind", "axis", "--windows", str(bad), "-q",
               "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert rc == 2 and "right eye" in err and "extract more windows" in err
    assert not (tmp_path / "m").exists()


def test_damaged_chunk_is_one_line(tmp_path, wfile, capsys):
    """A windows file with a damaged compressed chunk: no h5py traceback."""
    import h5py

    path = wfile[0]
    bad = tmp_path / "bad.h5"
    bad.write_bytes(path.read_bytes())
    with h5py.File(bad, "r") as f:
        offset = f["windows"].id.get_chunk_info(0).byte_offset
    data = bytearray(bad.read_bytes())
    data[offset + 10:offset + 200] = b"\xff" * 190
    bad.write_bytes(bytes(data))
    rc = main(["train", "--kind", "axis", "--windows", str(bad), "-q",
               "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert rc == 2 and str(bad) in err and "damaged" in err and "facesegment extract" in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_exclude_names_matching_nothing_are_reported(tmp_path, wfile, capsys):
    names = tmp_path / "val.txt"
    names.write_text("img1\nnot-an-image\n")
    assert main(["train", "--kind", "axis", "--trees", "1", "--windows", str(wfile[0]), "-q",
                 "--out", str(tmp_path / "m"), "--exclude-images", str(names)]) == 0
    assert "1 name(s)" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--epochs", "--ssgd-refresh"])
def test_negative_nongreedy_counts_are_refused(wfile, tmp_path, capsys, flag):
    path, _, _ = wfile
    with pytest.raises(SystemExit) as exc:
        main(["train", "--kind", "nongreedy", "--windows", str(path),
              "--out", str(tmp_path / "m"), flag, "-1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and "non-negative integer" in err and "Traceback" not in err
