"""Our forests against the tools a practitioner would reach for instead.

The same class-balanced face windows feed every forest:

- our axis-aligned forest;
- scikit-learn's ``RandomForestClassifier``;
- LightGBM's random-forest mode (``boosting_type="rf"``);
- XGBoost's random forest (``XGBRFClassifier``).

The same scikit-learn forest is also compiled to C by TL2cgen (through
Treelite) and exported to ONNX Runtime (through skl2onnx), for inference only.

Three things are timed, in one process, one after the other (2 threads each):

- ``fit``;
- accuracy and time of ``predict_proba`` on the test windows;
- the time to label every pixel of whole 250×250 test faces.

A peer has no dense path. It must first build the matrix of every pixel's
window: 62,500 rows of 2,883 values, from a reflect-padded image, like our
"full" mode. That cost counts, since the user would pay it. Ours runs
``predict_image``.

::

    make bench-peers                        # installs the [peers] extra, runs this, then
                                            # benchmarks.peers_oblique (treeple) in .venv-treeple
    python -m benchmarks.peers --train 128000 --test 16000 --trees 16
    python -m benchmarks.peers --quick      # 16,000 / 4,000 windows, 8 trees, 2 faces

The windows are extracted once into ``data/bench/`` (``facesegment extract``,
train and test splits of ``--data``). Results go to ``reports/bench/peers.json``
and ``docs/peers.md`` (its first part; ``benchmarks/peers_oblique.py`` writes the
treeple part after it). A peer that fails (out of memory, say) is recorded with
its error; the others still run.
"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.data.datasets import find_faces, load_face
from facesegment.dense import predict_image
from facesegment.forest import AxisAlignedForest
from facesegment.modelio.model import Model
from facesegment.data.windows import read_windows

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "faces300w"
#: The page this benchmark writes (its part under the first heading).
DOC = ROOT / "docs" / "peers.md"
THREADS = 2


def windows_file(data, split, n, seed):
    """``data/bench/peers-SPLIT-N.h5``, extracted with the CLI when absent."""
    out = ROOT / "data" / "bench" / f"peers-{split}-{n}.h5"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "facesegment", "extract", str(data / split),
                        "--out", str(out), "--windows", str(n), "--seed", str(seed)],
                       check=True)
    return out


def bench_windows(data, n_train, n_test):
    """The train and test windows every peer is fitted and scored on (two WindowSets)."""
    return (read_windows(windows_file(data, "train", n_train, 0)),
            read_windows(windows_file(data, "test", n_test, 1)))


def update_doc(path, text):
    """Write ``text`` (a markdown part under one heading) into ``path``: it replaces
    the part under the same heading, up to the next heading, or is appended."""
    path = Path(path)
    old = path.read_text().splitlines() if path.exists() else []
    heading = text.splitlines()[0]
    new = text.rstrip("\n").splitlines()
    if heading in old:
        start = old.index(heading)
        end = next((i for i in range(start + 1, len(old)) if old[i].startswith("#")), len(old))
        lines = old[:start] + new + ([""] if end < len(old) else []) + old[end:]
    else:
        lines = old + ([""] if old and old[-1] else []) + new if old else new
    write_text_atomic(path, "\n".join(lines) + "\n")


def face_windows(image, half):
    """Every pixel's window of ``image`` (reflect-padded) as a uint8 matrix."""
    padded = np.pad(image, ((half, half), (half, half), (0, 0)), mode="reflect")
    side = 2 * half + 1
    view = np.lib.stride_tricks.sliding_window_view(padded, (side, side), axis=(0, 1))
    # view: (H, W, C, side, side) -> rows in the windows' (row, col, channel) order
    return np.ascontiguousarray(view.transpose(0, 1, 3, 4, 2)).reshape(
        image.shape[0] * image.shape[1], -1)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def median_ms(fn, images):
    """Median wall time of ``fn(image)`` over the images, in ms (one warm-up call)."""
    fn(images[0])
    return 1000 * float(np.median([timed(fn, im)[1] for im in images]))


# --------------------------------------------------------------- the peers
def axis_params(cfg):
    """Our axis forest's parameters in this benchmark."""
    return dict(n_estimators=cfg.trees, max_depth=cfg.depth, max_features=cfg.q,
                min_samples_leaf=5, max_samples=cfg.per_tree, random_state=0, n_jobs=THREADS)


def lightgbm_params(cfg, n_rows, n_features):
    """``LGBMClassifier`` parameters of LightGBM's random forest in this benchmark."""
    return dict(boosting_type="rf", n_estimators=cfg.trees, num_leaves=cfg.leaves,
                max_depth=cfg.depth, subsample=cfg.per_tree / n_rows, subsample_freq=1,
                colsample_bynode=cfg.q / n_features, min_child_samples=5, max_bin=255,
                histogram_pool_size=cfg.lgb_pool_mb, random_state=0, n_jobs=THREADS,
                verbose=-1)


def xgboost_params(cfg, n_rows, n_features):
    """``XGBRFClassifier`` parameters of XGBoost's random forest in this benchmark."""
    return dict(n_estimators=cfg.trees, max_depth=cfg.xgb_depth, subsample=cfg.per_tree / n_rows,
                colsample_bynode=cfg.q / n_features, min_child_weight=5, tree_method="hist",
                max_bin=256, random_state=0, n_jobs=THREADS)


def ours(cfg, train, test, faces):
    clf = AxisAlignedForest(**axis_params(cfg))
    _, fit_s = timed(clf.fit, train.X, train.y)
    model = Model.from_estimator(clf, kind="axis", windows_meta=train.meta)
    return clf, fit_s, lambda im: predict_image(model, im, mode="full", alpha=0.5)


def sklearn_rf(cfg, train, test, faces):
    from sklearn.ensemble import RandomForestClassifier

    clf = RandomForestClassifier(n_estimators=cfg.trees, criterion="entropy", max_depth=cfg.depth,
                                 max_features=cfg.q, min_samples_leaf=5,
                                 max_samples=cfg.per_tree, random_state=0, n_jobs=THREADS)
    X = train.X.reshape(len(train.y), -1)
    _, fit_s = timed(clf.fit, X, train.y)
    return clf, fit_s, _matrix_route(clf.predict_proba, train)


def lightgbm_rf(cfg, train, test, faces):
    import lightgbm as lgb

    clf = lgb.LGBMClassifier(**lightgbm_params(cfg, len(train.y), train.X[0].size))
    X = train.X.reshape(len(train.y), -1)
    _, fit_s = timed(clf.fit, X, train.y)
    return clf, fit_s, _matrix_route(clf.predict_proba, train)


def xgboost_rf(cfg, train, test, faces):
    import xgboost as xgb

    clf = xgb.XGBRFClassifier(**xgboost_params(cfg, len(train.y), train.X[0].size))
    X = train.X.reshape(len(train.y), -1)
    _, fit_s = timed(clf.fit, X, train.y)
    return clf, fit_s, _matrix_route(clf.predict_proba, train)


def _matrix_route(predict_proba, train):
    half = train.meta.layout.half
    return lambda im: predict_proba(face_windows(im, half))


def tl2cgen_of(rf, workdir):
    """The scikit-learn forest compiled to a shared library by TL2cgen."""
    import tl2cgen
    import treelite

    model = treelite.sklearn.import_model(rf)
    lib = Path(workdir) / "rf.so"
    _, compile_s = timed(lambda: tl2cgen.export_lib(model, toolchain="gcc", libpath=str(lib),
                                                    params={"parallel_comp": 32},
                                                    nthread=THREADS))
    predictor = tl2cgen.Predictor(str(lib), nthread=THREADS)

    def proba(X):   # TL2cgen gives (rows, targets, classes): one target here
        out = predictor.predict(tl2cgen.DMatrix(np.asarray(X, np.float32)))
        return np.asarray(out).reshape(len(X), -1)
    return proba, compile_s


def onnx_of(rf, n_features):
    """The scikit-learn forest exported to ONNX and run by ONNX Runtime."""
    import onnxruntime as ort
    from skl2onnx import to_onnx

    onx, export_s = timed(lambda: to_onnx(rf, np.zeros((1, n_features), np.float32),
                                          options={id(rf): {"zipmap": False}}))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    sess = ort.InferenceSession(onx.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name

    def proba(X):
        return sess.run(None, {name: np.asarray(X, np.float32)})[1]
    return proba, export_s


# --------------------------------------------------------------- the run
def score(label, predict_proba, test, classes, face_fn, faces, extra=None):
    Xt = test.X.reshape(len(test.y), -1)
    predict_proba(Xt[:64])  # warm-up: compilation and first-call costs are not timed
    proba, pred_s = timed(predict_proba, Xt)
    acc = float(np.mean(np.asarray(classes)[np.argmax(proba, axis=1)] == test.y))
    row = {"peer": label, "accuracy": round(100 * acc, 2), "predict_windows_s": round(pred_s, 3),
           "face_ms": round(median_ms(face_fn, faces), 1)}
    row.update(extra or {})
    print(f"  {label}: {row}", flush=True)
    return row


def run_peer(name, make, cfg, train, test, faces):
    print(f"{name} ...", flush=True)
    try:
        clf, fit_s, face_fn = make(cfg, train, test, faces)
    except Exception as exc:  # a peer that cannot run is a result too
        print(f"  {name}: failed: {exc!r}", flush=True)
        return None, {"peer": name, "error": f"{type(exc).__name__}: {exc}"[:300]}
    row = score(name, lambda X: clf.predict_proba(X), test, clf.classes_, face_fn, faces,
                {"fit_s": round(fit_s, 2)})
    return clf, row


def exported_rows(rf, train, test, faces):
    rows = []
    half = train.meta.layout.half
    for name, build in (("scikit-learn RF via TL2cgen", lambda: tl2cgen_of(rf, tmp)),
                        ("scikit-learn RF via ONNX Runtime",
                         lambda: onnx_of(rf, train.X[0].size))):
        print(f"{name} ...", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                proba, build_s = build()
                rows.append(score(name, proba, test, rf.classes_,
                                  lambda im, f=proba: f(face_windows(im, half)), faces,
                                  {"build_s": round(build_s, 2)}))
            except Exception as exc:
                print(f"  {name}: failed: {exc!r}", flush=True)
                rows.append({"peer": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
    return rows


PEERS = {"facesegment axis forest": ours, "scikit-learn RandomForestClassifier": sklearn_rf,
         "LightGBM rf mode": lightgbm_rf, "XGBoost XGBRFClassifier": xgboost_rf}


def ratios(rows):
    """Each row's fit and per-face times as multiples of ours (ours = 1)."""
    base = rows[0]
    for row in rows:
        if "error" in row:
            continue
        if "fit_s" in row:
            row["fit_ratio"] = round(row["fit_s"] / base["fit_s"], 2)
        row["face_ratio"] = round(row["face_ms"] / base["face_ms"], 1)
        row["accuracy_vs_ours"] = round(row["accuracy"] - base["accuracy"], 2)
    return rows


def markdown(doc):
    cfg = doc["settings"]
    lines = [
        "# Speed against the peers",
        "",
        f"`{doc['command']}` on {doc['machine']}, {THREADS} threads for every peer.",
        f"Settings: {cfg['train']:,} training and {cfg['test']:,} test windows (class-balanced,",
        f"31×31 RGB), {cfg['trees']} trees, depth {cfg['depth']} (XGBoost: {cfg['xgb_depth']}),",
        f"{cfg['per_tree']:,} windows per tree, q = {cfg['q']} features per node, LightGBM",
        f"{cfg['leaves']} leaves per tree. Per face: median over {cfg['faces']} faces300w test",
        "faces of 250×250 pixels, every pixel labelled. A peer's time includes building the",
        "window matrix.",
        "",
        "| peer | fit (s) | × ours | test-window accuracy (%) | vs ours | ms per face | × ours |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in doc["rows"]:
        if "error" in r:
            lines.append(f"| {r['peer']} | failed: {r['error'][:80]} | | | | | |")
            continue
        fit = f"{r['fit_s']:.1f}" if "fit_s" in r else f"(build {r['build_s']:.1f})"
        lines.append(f"| {r['peer']} | {fit} | {r.get('fit_ratio', '')} | {r['accuracy']:.2f} | "
                     f"{r['accuracy_vs_ours']:+.2f} | {r['face_ms']:.0f} | {r['face_ratio']} |")
    lines += ["", "Fit and per-face ratios are peer time / our time (above 1: we are faster).",
              "TL2cgen and ONNX Runtime run the scikit-learn forest; their build time is the",
              "compilation or export.", ""]
    return "\n".join(lines)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help="labelled folder with train/ and test/")
    p.add_argument("--train", type=int, default=128000, help="training windows")
    p.add_argument("--test", type=int, default=16000, help="test windows")
    p.add_argument("--trees", type=int, default=16)
    p.add_argument("--depth", type=int, default=20)
    p.add_argument("--xgb-depth", type=int, default=12,
                   help="XGBoost's depth (its depth-wise hist grower allocates 2^depth nodes)")
    p.add_argument("--leaves", type=int, default=1023, help="LightGBM's num_leaves")
    p.add_argument("--lgb-pool-mb", type=int, default=2048,
                   help="LightGBM's histogram cache (MB); its default keeps one histogram of "
                        "every feature per leaf: 12 GB at 1,023 leaves over 2,883 features")
    p.add_argument("--per-tree", type=int, default=None, help="windows per tree (default: half)")
    p.add_argument("--q", type=int, default=119, help="features tried per node")
    p.add_argument("--faces", type=int, default=3, help="test faces timed")
    p.add_argument("--peers", nargs="+", default=list(PEERS) + ["exported"], metavar="PEER")
    p.add_argument("--quick", action="store_true", help="16,000 / 4,000 windows, 8 trees, 2 faces")
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "peers.json")
    p.add_argument("--doc", type=Path, default=DOC)
    args = p.parse_args(argv)
    if args.quick:
        args.train, args.test, args.trees, args.faces = 16000, 4000, 8, 2
    args.per_tree = args.per_tree or args.train // 2
    return args


def main(argv=None):
    cfg = parse(argv)
    train, test = bench_windows(cfg.data, cfg.train, cfg.test)
    records = find_faces(cfg.data / "test")[:cfg.faces]
    faces = [load_face(r)[0] for r in records]
    rows, rf = [], None
    for name, make in PEERS.items():
        if name in cfg.peers or name == "facesegment axis forest":
            clf, row = run_peer(name, make, cfg, train, test, faces)
            rows.append(row)
            if make is sklearn_rf:
                rf = clf
    if "exported" in cfg.peers and rf is not None:
        rows += exported_rows(rf, train, test, faces)
    settings = {k: getattr(cfg, k) for k in ("train", "test", "trees", "depth", "xgb_depth",
                                             "leaves", "lgb_pool_mb", "per_tree", "q", "faces")}
    doc = {"command": "python -m benchmarks.peers " + " ".join(argv if argv is not None
                                                                else sys.argv[1:]),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "load_average": os.getloadavg(), "settings": settings, "rows": ratios(rows)}
    write_json_atomic(cfg.out, doc)
    update_doc(cfg.doc, markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
