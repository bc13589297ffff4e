"""Hostile model folders and windows files: each tampered field is one DataError
line, never a crash, hang, traceback or read outside the file.

Kernels run in a subprocess (with a timeout) wherever a crash would otherwise
take pytest down with it; the fuzz tests flip seeded bytes over a model folder
and a windows file.
"""

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

from facesegment.classes import CLASS_NAMES
from facesegment.errors import DataError
from facesegment.forest import AxisAlignedForest, CO2Forest, TwoProbeForest
from facesegment.forest._arrays import ForestArrays
from facesegment.forest._verify import ForestProblem, verify_forest
from facesegment.layout import WindowLayout
from facesegment.modelio.model import Model, save_model
from facesegment.models import load_model
from facesegment.data.windows import WindowsWriter, read_windows

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = WindowLayout(window=5, channels=3)   # 75 features
P = LAYOUT.n_features
TIMEOUT = 600


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n, P), dtype=np.uint8)
    y = ((X[:, 37] > 100).astype(np.uint8) + 2 * (X[:, 40] > 150)).astype(np.uint8)
    return X, y


@pytest.fixture(scope="module")
def models():
    """Tiny face-layout models of three split families and a sparse one."""
    X, y = _data()
    kw = {"n_estimators": 2, "random_state": 0, "max_depth": 4}
    co2 = {"oblique_min_samples": 40}
    ests = {"axis": AxisAlignedForest(**kw), "two-probe": TwoProbeForest(**kw),
            "co2": CO2Forest(**kw, **co2),
            "co2-sparse": CO2Forest(**kw, **co2, init="best", max_nonzero=4,
                                    weight_dtype="int8")}
    return {k: Model.from_estimator(e.fit(X, y), k, layout=LAYOUT) for k, e in ests.items()}


def _with(model, **arrays):
    return Model(**{**model.__dict__, "arrays": model.arrays._replace(**arrays)})


def _first(mask):
    return int(np.flatnonzero(mask)[0])


def _set(model, name, where, value):
    """``model`` with ``arrays.name[where(arrays)] = value``."""
    a = model.arrays
    arr = getattr(a, name).copy()
    arr[where(a)] = value
    return _with(model, **{name: arr})


def _internal(a):
    return _first(a.left >= 0)


def _leaf(a):
    return _first(a.left < 0)


def _loop_to_root(model):
    """A leaf made internal, its children the root's: a child pointer loop, the
    leaf's depth set to 2**31 - 1."""
    a = model.arrays
    i = int(np.flatnonzero(a.left < 0)[-1])
    left, right, depth, feature = a.left.copy(), a.right.copy(), a.depth.copy(), a.feature.copy()
    left[i], right[i], depth[i], feature[i] = a.left[a.roots[0]], a.right[a.roots[0]], \
        2 ** 31 - 1, 0
    return _with(model, left=left, right=right, depth=depth, feature=feature)


def _orphan_cycle(model):
    """Two nodes appended that are each other's parent (no root reaches them)."""
    a = model.arrays
    n = a.n_nodes
    grow = {k: np.concatenate([getattr(a, k), getattr(a, k)[-4:]]) for k in
            ("threshold", "value", "n_samples", "feature2", "oblique")}
    left = np.concatenate([a.left, [n + 2, -1, n, -1]]).astype(np.int32)
    right = np.where(left >= 0, left + 1, -1).astype(np.int32)
    feature = np.concatenate([a.feature, [0, -1, 0, -1]]).astype(np.int32)
    grow["feature2"][-4:] = -1
    grow["oblique"][-4:] = -1
    depth = np.concatenate([a.depth, [5, 6, 6, 7]]).astype(np.int32)
    return _with(model, left=left, right=right, feature=feature, depth=depth, **grow)


#: (name, model kind, tampering, message the error contains)
CASES = [
    ("right child -1,000,000", "axis",
     lambda m: _set(m, "right", _internal, -1_000_000), "forest/right entry"),
    ("right child -3 (wraps to a valid index)", "axis",
     lambda m: _set(m, "right", _internal, -3), "is -3, expected left + 1"),
    ("left child -1,000,000", "axis",
     lambda m: _set(m, "left", _internal, -1_000_000), "forest/left entry"),
    ("left child past the end", "axis",
     lambda m: _set(m, "left", _internal, 10 ** 6), "forest/left entry"),
    ("right child at a leaf", "axis",
     lambda m: _set(m, "right", _leaf, 2), "at a leaf (left = -1), expected -1"),
    ("axis feature -1,000,000", "axis",
     lambda m: _set(m, "feature", _internal, -1_000_000), f"is -1000000, outside [-1, {P})"),
    ("axis feature past the layout", "axis",
     lambda m: _set(m, "feature", _internal, P), f"is {P}, outside [-1, {P})"),
    ("second probe past the layout", "two-probe",
     lambda m: _set(m, "feature2", lambda a: _first(a.feature2 >= 0), 10 ** 6),
     "forest/feature2 entry"),
    ("oblique code -2", "co2",
     lambda m: _set(m, "oblique", lambda a: _first(a.oblique >= 0), -2), "is -2, outside [-1,"),
    ("oblique row past the weights", "co2",
     lambda m: _set(m, "oblique", lambda a: _first(a.oblique >= 0), 10 ** 6),
     "forest/oblique entry"),
    ("oblique node with a feature too", "co2",
     lambda m: _set(m, "feature", lambda a: _first(a.oblique >= 0), 3), "2 split kinds"),
    ("internal node without a split", "axis",
     lambda m: _set(m, "feature", _internal, -1), "0 split kinds"),
    ("child pointer loop, depth 2**31-1", "axis", _loop_to_root, "forest/"),
    ("depth 2**31-1", "axis",
     lambda m: _set(m, "depth", _leaf, 2 ** 31 - 1), "forest/depth"),
    ("orphan cycle", "axis", _orphan_cycle, "forest/depth"),
    ("root out of range", "axis",
     lambda m: _set(m, "roots", lambda a: 0, 10 ** 6), "forest/roots entry 0"),
    ("root that is a child", "axis",
     lambda m: _set(m, "roots", lambda a: 1, 1), "another node's child"),
    ("value NaN", "axis",
     lambda m: _set(m, "value", lambda a: (3, 1), np.nan), "forest/value node 3"),
    ("weights inf", "co2",
     lambda m: _set(m, "weights", lambda a: (0, 5), np.inf), "forest/weights row 0"),
    ("negative n_samples", "axis",
     lambda m: _set(m, "n_samples", lambda a: 2, -1), "forest/n_samples entry 2"),
    ("sparse row -2", "co2-sparse",
     lambda m: _set(m, "sparse", lambda a: _first(a.sparse >= 0), -2), "forest/sparse entry"),
    ("sparse row past the table", "co2-sparse",
     lambda m: _set(m, "sparse", lambda a: _first(a.sparse >= 0), 10 ** 6),
     "forest/sparse entry"),
    ("sparse feature past the layout", "co2-sparse",
     lambda m: _set(m, "sparse_index", lambda a: 0, 60000), "forest/sparse_index entry 0"),
    ("sparse offsets past the entries", "co2-sparse",
     lambda m: _set(m, "sparse_ptr", lambda a: -1, 10 ** 9), "forest/sparse_ptr runs"),
    ("sparse offsets decreasing", "co2-sparse",
     lambda m: _set(m, "sparse_ptr", lambda a: 1, 10 ** 6), "forest/sparse_ptr"),
    ("node array of another length", "axis",
     lambda m: _with(m, feature=m.arrays.feature[:-1]), "forest/feature has"),
    ("float child indices", "axis",
     lambda m: _with(m, left=m.arrays.left.astype(np.float64)), "forest/left has dtype float64"),
    ("value with a class missing", "axis",
     lambda m: _with(m, value=m.arrays.value[:, :-1]), "forest/value"),
]


#: Cases that only the loader can tell (a model built in memory may have any
#: number of classes): no kernel reads outside the arrays for them.
IN_MEMORY_HARMLESS = ("value with a class missing",)


@pytest.mark.parametrize("name, kind, tamper, message", CASES, ids=[c[0] for c in CASES])
def test_tampered_forest_is_one_data_error(tmp_path, models, name, kind, tamper, message):
    path = save_model(tamper(models[kind]), tmp_path / "m")   # model.json's SHA-256 matches
    with pytest.raises(DataError) as err:
        load_model(path)
    text = str(err.value)
    assert message in text and str(path / "forest.h5") in text and "\n" not in text


def test_untampered_models_load_and_verify(tmp_path, models):
    for kind, m in models.items():
        back = load_model(save_model(m, tmp_path / kind))
        assert verify_forest(back.arrays) is back.arrays   # the format's dtypes: no copies


_KERNELS = textwrap.dedent("""
    import sys
    import numpy as np
    from tests.modelio.test_hostile_models import CASES, IN_MEMORY_HARMLESS, _data
    from facesegment.dense import predict_image
    from facesegment.forest._verify import ForestProblem
    from facesegment.models import load_model
    X, _ = _data()
    models = {kind: load_model(f"{sys.argv[1]}/{kind}") for kind in
              ("axis", "two-probe", "co2", "co2-sparse")}
    image = np.random.default_rng(0).integers(0, 256, (12, 14, 3), dtype=np.uint8)
    for name, kind, tamper, message in CASES:
        if name in IN_MEMORY_HARMLESS:
            continue
        m = tamper(models[kind])
        for what, run in (("predict_proba", lambda: m.to_estimator().predict_proba(X[:40])),
                          ("apply", lambda: m.to_estimator().apply(X[:40])),
                          ("predict_image", lambda: predict_image(m, image))):
            try:
                run()
                print(f"RAN {name} / {what}", flush=True)
            except ValueError as exc:
                ok = isinstance(exc, ForestProblem)
                print(f"{'REFUSED' if ok else 'OTHER'} {name} / {what}: {exc}", flush=True)
""")


def test_tampered_forests_never_reach_a_kernel(tmp_path, models):
    """Forests tampered in memory (after a clean load), one per field: estimators'
    predict_proba/apply and dense inference refuse them (ValueError naming the
    array) instead of crashing in a kernel; run in a subprocess with a timeout."""
    for kind, m in models.items():
        save_model(m, tmp_path / kind)
    out = subprocess.run([sys.executable, "-c", _KERNELS, str(tmp_path)],
                         capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert out.returncode == 0, (out.returncode, out.stdout[-3000:], out.stderr[-3000:])
    lines = out.stdout.splitlines()
    assert len(lines) == 3 * (len(CASES) - len(IN_MEMORY_HARMLESS)), out.stdout[-3000:]
    bad = [line for line in lines if not line.startswith("REFUSED")]
    assert not bad, bad


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_cli_prints_one_line_and_exits_2(tmp_path, models):
    path = save_model(CASES[0][2](models["axis"]), tmp_path / "m")
    img = tmp_path / "face.png"
    import cv2

    cv2.imwrite(str(img), np.zeros((20, 20, 3), np.uint8))
    out = subprocess.run([sys.executable, "-m", "facesegment", "segment", str(img),
                          str(tmp_path / "out"), "--model", str(path), "--detect", "never"],
                         capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "forest/right entry" in out.stderr
    assert "Traceback" not in out.stderr


# ---------------------------------------------------------------- verify_forest

def _tree(**change):
    """One tree: root 0 with leaves 1, 2 (axis feature 0 of 3)."""
    i32 = np.int32
    base = dict(roots=np.array([0], i32), left=np.array([1, -1, -1], i32),
                right=np.array([2, -1, -1], i32), feature=np.array([0, -1, -1], i32),
                feature2=np.full(3, -1, i32), oblique=np.full(3, -1, i32),
                threshold=np.zeros(3, np.float32), value=np.full((3, 2), .5, np.float32),
                depth=np.array([0, 1, 1], i32), n_samples=np.array([4, 2, 2], i32),
                weights=np.zeros((0, 3), np.float32))
    base.update(change)
    return ForestArrays(**base)


def test_verify_forest_accepts_a_tree_and_normalises_dtypes():
    fa = _tree()
    assert verify_forest(fa) is fa
    wide = _tree(left=np.array([1, -1, -1], np.int64), threshold=np.zeros(3))
    got = verify_forest(wide)
    assert got.left.dtype == np.int32 and got.threshold.dtype == np.float32


@pytest.mark.parametrize("change, message", [
    ({"roots": np.zeros(0, np.int32)}, "roots: is empty"),
    ({"weights": np.zeros((0, 3), np.float64)}, "weights: is float64"),
    ({"depth": np.array([0, 1, 2], np.int32)}, "depth: node 2 (right child of node 0)"),
    ({"left": np.array([1, 0, -1], np.int32), "right": np.array([2, 1, -1], np.int32),
      "feature": np.array([0, 0, -1], np.int32)}, "child of two nodes"),
    ({"feature2": np.array([1, -1, -1], np.int32), "feature": np.array([-1, -1, -1], np.int32)},
     "0 split kinds"),
    ({"sparse": np.full(3, -1, np.int32)}, "sparse_ptr: is missing"),
])
def test_verify_forest_names_the_array(change, message):
    with pytest.raises(ForestProblem) as err:
        verify_forest(_tree(**change))
    assert message in str(err.value)


def test_a_two_node_cycle_is_refused_by_depth():
    # 1 -> (2, 3), 2 -> (1, 2)... as far as right = left + 1 allows: nodes 1 and 3
    # are each other's parent; node 0 is a lone root leaf
    i32 = np.int32
    fa = _tree(roots=np.array([0], i32), left=np.array([-1, 3, -1, 1, -1], i32),
               right=np.array([-1, 4, -1, 2, -1], i32), feature=np.array([-1, 0, -1, 0, -1], i32),
               feature2=np.full(5, -1, i32), oblique=np.full(5, -1, i32),
               threshold=np.zeros(5, np.float32), value=np.full((5, 2), .5, np.float32),
               depth=np.array([0, 7, 8, 8, 9], i32), n_samples=np.ones(5, i32))
    with pytest.raises(ForestProblem, match="depth"):
        verify_forest(fa)


# ------------------------------------------------------------------ model.json

def _doc_case(tmp_path, models, edit):
    path = save_model(models["axis"], tmp_path / "m")
    js = path / "model.json"
    doc = json.loads(js.read_text())
    text = edit(doc)
    js.write_text(text if isinstance(text, str) else json.dumps(doc))
    return path


def _put(section, key, value):
    def edit(doc):
        if key is None:
            doc[section] = value
        else:
            doc.setdefault(section, {})[key] = value
    return edit


@pytest.mark.parametrize("edit, message", [
    (_put("class_names", None, 5), "field class_names is a number"),
    (_put("class_names", None, [1, 2, 3, 4]), "field class_names must be"),
    (_put("params", None, "x"), "field params is a string"),
    (_put("files", None, []), "field files is an array"),
    (_put("files", None, {"forest.h5": 3}), "field files must map"),
    (_put("sampling_factors", None, "abc"), "field sampling_factors is a string"),
    (_put("sampling_factors", None, [1, 1, 1]), "field sampling_factors must be 4"),
    (_put("sampling_factors", None, [1, 1, -1, 1]), "field sampling_factors must be 4"),
    (_put("metrics", "alpha", "x"), "field metrics.alpha is 'x'"),
    (_put("metrics", "alpha", -3), "field metrics.alpha is -3"),
    (_put("metrics", "sigma", -5), "field metrics.sigma is -5"),
    (_put("metrics", "beta", True), "field metrics.beta is True"),
    (_put("metrics", None, [1]), "field metrics is an array"),
    (_put("provenance", None, "x"), "field provenance is a string"),
    (_put("classes_dtype", None, "V999999999"), "field classes_dtype"),
    (_put("classes", None, 7), "field classes must be"),
    (_put("layout", None, 5), "field layout is a number"),
    (lambda doc: json.dumps(doc)[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "is nested too deeply"),
])
def test_model_json_with_wrong_types_is_one_data_error(tmp_path, models, edit, message):
    path = _doc_case(tmp_path, models, edit)
    with pytest.raises(DataError) as err:
        load_model(path)
    assert message in str(err.value) and "model.json" in str(err.value)


# ---------------------------------------------------------------- HDF5 hygiene

def _rehash(folder):
    """model.json's record of forest.h5 made to match its bytes (as a tamperer would)."""
    js = folder / "model.json"
    doc = json.loads(js.read_text())
    h5 = folder / "forest.h5"
    doc["files"]["forest.h5"] = {"bytes": h5.stat().st_size,
                                 "sha256": hashlib.sha256(h5.read_bytes()).hexdigest()}
    js.write_text(json.dumps(doc))


def _replace_dataset(f, name, **kw):
    data = f[name][()]
    del f[name]
    if kw.pop("same_data", False):
        kw["data"] = data
    return f.create_dataset(name, **kw)


def _external(tmp_path):
    raw = tmp_path / "outside.bin"
    raw.write_bytes(os.urandom(4096))
    return raw


@pytest.mark.parametrize("damage, message", [
    (lambda f, t: f.__setitem__("forest/extra", h5py.ExternalLink("/etc/passwd", "/")),
     "forest/extra is an external link to /etc/passwd"),
    (lambda f, t: f.__setitem__("other", h5py.SoftLink("/forest/value")), "is a SoftLink"),
    (lambda f, t: _replace_dataset(f, "forest/value", shape=f["forest/value"].shape,
                                   dtype=np.float32, external=[(str(_external(t)), 0, 4096)]),
     "keeps its data in external files"),
    (lambda f, t: _replace_dataset(f, "forest/value", shape=(2 ** 31 - 1, 4), dtype=np.float32,
                                   chunks=(1024, 4), compression="gzip"),
     "stores 0 of its"),
    (lambda f, t: _replace_dataset(f, "forest/value", shape=(2 ** 28, 4), dtype=np.float32),
     "but the file stores 0 bytes"),
    (lambda f, t: _virtual(f, t), "is a virtual dataset"),
    (lambda f, t: _replace_dataset(f, "forest/value", same_data=True, chunks=True,
                                   scaleoffset=4), "uses the HDF5 filter 6"),
])
def test_forest_h5_reads_nothing_outside_itself(tmp_path, models, damage, message):
    path = save_model(models["axis"], tmp_path / "m")
    with h5py.File(path / "forest.h5", "a") as f:
        damage(f, tmp_path)
    _rehash(path)
    with pytest.raises(DataError) as err:
        load_model(path)
    assert message in str(err.value) and "forest.h5" in str(err.value)


def _virtual(f, tmp_path):
    src = tmp_path / "src.h5"
    with h5py.File(src, "w") as g:
        g["value"] = f["forest/value"][()]
    shape = f["forest/value"].shape
    lay = h5py.VirtualLayout(shape=shape, dtype=np.float32)
    lay[:] = h5py.VirtualSource(str(src), "value", shape=shape)
    del f["forest/value"]
    f["forest"].create_virtual_dataset("value", lay)


# -------------------------------------------------------------- windows files

def _windows(path, n=40, seed=0, sources=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, (n,) + LAYOUT.shape, dtype=np.uint8)
    y = (np.arange(n) % 8).astype(np.uint8)
    with WindowsWriter(path, n, chunk_rows=7, layout=LAYOUT) as w:
        w.write(0, X, y, rng.integers(0, len(sources), n).astype(np.int32),
                rng.integers(2, 20, (n, 2)).astype(np.int32))
        w.set_strings("sources", list(sources))
        w.set_attrs(class_names=list(CLASS_NAMES), pixel_counts=np.arange(1, 9, dtype=np.int64),
                    class_counts=np.bincount(y, minlength=8).astype(np.int64),
                    sampling_factors=np.ones(8), with_replacement=np.zeros(8, bool),
                    mean=np.full(P, 100, np.float32), std=np.full(P, 3, np.float32),
                    seed=7, n_windows=n, margin=LAYOUT.half)
        w.finish()
    return path


def _set_rows(name, index, value):
    def damage(f, tmp_path):
        d = f[name]
        d[index] = value
    return damage


@pytest.mark.parametrize("damage, message", [
    (lambda f, t: f.attrs.__setitem__("seed", "abc"), "attribute 'seed' is 'abc'"),
    (lambda f, t: f.attrs.__setitem__("n_windows", -4), "attribute 'n_windows' is -4"),
    (_set_rows("image_index", 3, 99999), "dataset 'image_index' holds 99999, outside the 3"),
    (_set_rows("image_index", 5, -5), "dataset 'image_index' holds -5"),
    (_set_rows("labels", 5, 200), "dataset 'labels' holds class id 200"),
    (lambda f, t: f.__setitem__("extra", h5py.ExternalLink("/etc/passwd", "/")),
     "extra is an external link"),
    (lambda f, t: f.__setitem__("again", f["/"]), "/again is a group linked twice"),
    (lambda f, t: _replace_dataset(f, "labels", shape=(40,), dtype=np.uint8,
                                   external=[(str(_external(t)), 0, 4096)]),
     "/labels keeps its data in external files"),
    (lambda f, t: _replace_dataset(f, "windows", shape=(2 ** 31,) + LAYOUT.shape,
                                   dtype=np.uint8, chunks=(1024,) + LAYOUT.shape),
     "/windows declares"),
])
def test_hostile_windows_file_is_one_data_error(tmp_path, damage, message):
    path = _windows(tmp_path / "w.h5")
    with h5py.File(path, "a") as f:
        damage(f, tmp_path)
    with pytest.raises(DataError) as err:
        read_windows(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_exclude_images_with_a_bad_image_index_is_one_line(tmp_path):
    path = _windows(tmp_path / "w.h5")
    with h5py.File(path, "a") as f:
        f["image_index"][0] = 99999
    names = tmp_path / "exclude.txt"
    names.write_text("a\n")
    out = subprocess.run([sys.executable, "-m", "facesegment", "train", "--windows", str(path),
                          "--kind", "axis", "--trees", "1", "--out", str(tmp_path / "m"),
                          "--exclude-images", str(names)],
                         capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert out.returncode == 2, out.stderr
    assert "image_index" in out.stderr and "Traceback" not in out.stderr


# ---------------------------------------------------------------------- fuzzing

_FUZZ = textwrap.dedent("""
    import json, hashlib, os, shutil, sys, traceback
    import numpy as np
    from facesegment.errors import DataError
    from facesegment.models import load_model
    from facesegment.data.windows import read_windows, read_windows_meta

    def flip(data, rng, n_flips):
        data = bytearray(data)
        for pos in rng.integers(0, len(data), n_flips):
            data[pos] ^= int(rng.integers(1, 256))
        return bytes(data)

    def attempt(label, run):
        try:
            run()
            print("OK", label, flush=True)
        except DataError as exc:
            line = str(exc)
            print(("ERR" if "\\n" not in line else "MULTILINE"), label, flush=True)
        except Exception:
            print("CRASH", label, traceback.format_exc().replace("\\n", " | "), flush=True)

    kind, src, work, n_variants = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    X = np.random.default_rng(0).integers(0, 256, (20, 75), dtype=np.uint8)
    for seed in range(n_variants):
        rng = np.random.default_rng(seed)
        if kind == "windows":
            dst = os.path.join(work, f"w{seed}.h5")
            with open(src, "rb") as fh:
                data = fh.read()
            with open(dst, "wb") as fh:
                fh.write(flip(data, rng, 20))
            attempt(f"windows {seed} meta", lambda: read_windows_meta(dst))
            attempt(f"windows {seed} all", lambda: read_windows(dst))
            os.remove(dst)
        else:
            dst = os.path.join(work, f"m{seed}")
            shutil.copytree(src, dst)
            target = "model.json" if seed % 4 == 0 else "forest.h5"
            with open(os.path.join(dst, target), "rb") as fh:
                data = fh.read()
            with open(os.path.join(dst, target), "wb") as fh:
                fh.write(flip(data, rng, 1 + seed % 8))
            if target == "forest.h5":   # a tamperer fixes the recorded checksum
                js = os.path.join(dst, "model.json")
                doc = json.load(open(js))
                doc["files"]["forest.h5"] = {"bytes": len(data), "sha256":
                    hashlib.sha256(open(os.path.join(dst, target), "rb").read()).hexdigest()}
                json.dump(doc, open(js, "w"))
            def run():
                m = load_model(dst)
                m.to_estimator().predict_proba(X)
            attempt(f"model {seed} {target}", run)
            shutil.rmtree(dst)
""")


def _fuzz(kind, src, tmp_path, n):
    work = tmp_path / "work"
    work.mkdir()
    out = subprocess.run([sys.executable, "-c", _FUZZ, kind, str(src), str(work), str(n)],
                         capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-3000:])
    lines = out.stdout.splitlines()
    bad = [line for line in lines if not line.startswith(("OK", "ERR"))]
    assert not bad, bad[:5]
    return lines


def test_fuzzed_windows_files_give_data_errors_only(tmp_path):
    src = _windows(tmp_path / "w.h5", n=40)
    lines = _fuzz("windows", src, tmp_path, 150)
    assert len(lines) == 300
    assert sum(line.startswith("ERR") for line in lines) > 30   # the flips do damage


def test_fuzzed_model_folders_give_data_errors_only(tmp_path, models):
    src = save_model(models["co2"], tmp_path / "m")
    lines = _fuzz("model", src, tmp_path, 200)
    assert len(lines) == 200
    assert sum(line.startswith("ERR") for line in lines) > 30


# --------------------------------------------------------------------- cascades

@pytest.mark.parametrize("n_stages, message", [
    (-1, "field n_stages is -1"), ("3", "field n_stages is '3'"),
    (10 ** 9, "field n_stages is 1000000000"), (None, "field n_stages is None")])
def test_cascade_json_with_wrong_types_is_one_data_error(tmp_path, n_stages, message):
    from facesegment.autocontext.cascade import CASCADE_FILE, CASCADE_FORMAT, CASCADE_FORMAT_VERSION
    from facesegment.autocontext.context import ContextSpec

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / CASCADE_FILE).write_text(json.dumps(
        {"format": CASCADE_FORMAT, "format_version": CASCADE_FORMAT_VERSION,
         "context": ContextSpec(n_classes=4).to_dict(), "n_stages": n_stages}))
    with pytest.raises(DataError, match="cascade.json: " + message.replace("(", r"\(")):
        load_model(tmp_path / "c")


@pytest.mark.parametrize("text, message", [
    ("[" * 100_000 + "]" * 100_000, "is nested too deeply"),
    ("[1, 2]", "is not a facesegment cascade file")])
def test_cascade_json_that_is_not_a_document(tmp_path, text, message):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cascade.json").write_text(text)
    with pytest.raises(DataError, match=message):
        load_model(tmp_path / "c")
