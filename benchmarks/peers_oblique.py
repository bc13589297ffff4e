"""Our oblique forests against treeple's: SPORF and MORF on the face windows.

treeple (scikit-learn-compatible oblique forests) has the published relatives
of our two-probe and CO2 forests:

- SPORF (``ObliqueRandomForestClassifier``): each node tries ``max_features``
  sparse random projections, about ``feature_combinations`` (1.5) features of
  weight +1 or -1 each, and splits on the best of them;
- MORF (``PatchObliqueRandomForestClassifier``): each projection is the sum of
  one random patch of the window, of 1 to P rows and columns by 1 to 3 channels
  (``data_dims`` is the window's rows × columns × channels, the order of its
  features); one MORF row per largest side P of ``--patch`` (default: 2, 4
  and 8).

They are fitted beside our axis-aligned, two-probe and CO2 (the paper's,
``init="axis"``) forests on the windows of ``benchmarks/peers.py``
(:func:`benchmarks.peers.bench_windows`), with its trees, depth, windows per
tree (drawn with replacement), leaf size and ``q`` (treeple's criterion is the
entropy, as the axis forest's and scikit-learn's forest there): treeple's
``max_features`` is ``q`` projections per node, CO2 starts from the best of
``q`` features, two-probe tries ``--pairs`` pairs. Its protocol is this one's:
``fit``; accuracy and time of ``predict_proba`` on the test windows; the median
time to label every pixel of whole 250×250 test faces, where a peer first
builds the matrix of every pixel's window (that cost counts) and ours runs
``predict_image``. Every forest is first fitted once, untimed, on 500 windows
and 2 trees (Numba's compilation, imports).

treeple is binary-coupled to scikit-learn's tree internals and runs with
scikit-learn 1.6.1 only, so this script runs in its own environment,
``.venv-treeple`` (``make bench-peers`` makes it and runs this there after
``benchmarks.peers``)::

    .venv-treeple/bin/python -m benchmarks.peers_oblique --quick   # the windows of peers --quick

Results go to ``reports/bench/peers_oblique.json`` and to ``docs/peers.md``
under the heading of :data:`HEADING` (the rest of the page is
``benchmarks.peers``'s). A forest that fails is recorded with its error.
"""

import argparse
import os
import textwrap
import platform
import sys
from pathlib import Path

import numpy as np

from benchmarks.peers import (DATA, ROOT, THREADS, _matrix_route, bench_windows, median_ms,
                              timed, update_doc)
from facesegment.atomic import write_json_atomic
from facesegment.data.datasets import find_faces, load_face

#: The page this benchmark writes its part of (after benchmarks.peers's table).
DOC = ROOT / "docs" / "peers.md"
#: The heading of that part.
HEADING = "## Oblique forests: treeple's SPORF and MORF"
OUT = ROOT / "reports" / "bench" / "peers_oblique.json"
#: Our forests every other row is compared with (their row names); the table's ratio
#: columns are the oblique ones, the verdicts name all three.
OURS = {"two-probe": "facesegment two-probe forest", "CO2": "facesegment CO2 forest",
        "axis": "facesegment axis forest"}
COLUMNS = ("two-probe", "CO2")
#: Windows and trees of the untimed warm-up fit.
WARM_ROWS, WARM_TREES = 500, 2


# --------------------------------------------------------------- parameters
def common_params(cfg):
    """What every forest here shares: trees, depth, leaf size, windows per tree (with
    replacement), seed, threads."""
    return dict(n_estimators=cfg.trees, max_depth=cfg.depth, min_samples_leaf=5,
                max_samples=cfg.per_tree, bootstrap=True, random_state=0, n_jobs=THREADS)


def morf_patches(window, channels, patch):
    """``(data_dims, min_patch_dims, max_patch_dims)`` of MORF on ``window`` × ``window``
    windows of ``channels`` channels: patches of 1 to ``patch`` rows and columns (at
    most the window) by 1 to all channels."""
    side = min(patch, window)
    return (window, window, channels), (1, 1, 1), (side, side, channels)


def sporf_params(cfg):
    return dict(common_params(cfg), criterion="entropy", max_features=cfg.q)


def morf_params(cfg, window, channels, patch):
    dims, lo, hi = morf_patches(window, channels, patch)
    return dict(sporf_params(cfg), data_dims=dims, min_patch_dims=lo, max_patch_dims=hi)


def ours_params(cfg, kind):
    base = common_params(cfg)
    if kind == "axis":
        return dict(base, max_features=cfg.q)
    if kind == "two-probe":
        return dict(base, n_pairs=cfg.pairs)
    if kind == "co2":   # the paper's CO2; nu, eta, oblique_min_samples: pipelines/config.toml
        return dict(base, max_features=cfg.q, nu=1.0, eta=1e-3, oblique_min_samples=200)
    raise ValueError(kind)


# --------------------------------------------------------------- the forests
def warm(params):
    """The parameters of the untimed warm-up fit on :data:`WARM_ROWS` windows."""
    return dict(params, n_estimators=WARM_TREES, max_samples=WARM_ROWS // 2)


def ours(kind):
    def make(cfg, train):
        from facesegment.dense import predict_image
        from facesegment.forest.registry import make_estimator
        from facesegment.modelio.model import Model

        X = train.X.reshape(len(train.y), -1)
        make_estimator(kind, **warm(ours_params(cfg, kind))).fit(X[:WARM_ROWS],
                                                                 train.y[:WARM_ROWS])
        clf = make_estimator(kind, **ours_params(cfg, kind))
        _, fit_s = timed(clf.fit, X, train.y)
        model = Model.from_estimator(clf, kind=kind, windows_meta=train.meta)
        return clf, fit_s, lambda im: predict_image(model, im, mode="full", alpha=0.5)
    return make


def treeple_forest(name, patch=None):
    def make(cfg, train):
        import treeple

        X = train.X.reshape(len(train.y), -1)
        if name == "sporf":
            cls, params = treeple.ObliqueRandomForestClassifier, sporf_params(cfg)
        else:
            layout = train.meta.layout
            cls = treeple.PatchObliqueRandomForestClassifier
            side = 2 * layout.half + 1
            params = morf_params(cfg, side, X.shape[1] // side ** 2, patch)
        cls(**warm(params)).fit(X[:WARM_ROWS], train.y[:WARM_ROWS])
        clf = cls(**params)
        _, fit_s = timed(clf.fit, X, train.y)
        return clf, fit_s, _matrix_route(clf.predict_proba, train)
    return make


SPORF = "treeple SPORF (ObliqueRandomForestClassifier)"


def morf_name(patch):
    return f"treeple MORF, patches to {patch}×{patch} (PatchObliqueRandomForestClassifier)"


def forests(cfg):
    """Every forest of the run, by row name: ours, SPORF, one MORF per patch side."""
    out = {OURS["axis"]: ours("axis"), OURS["two-probe"]: ours("two-probe"),
           OURS["CO2"]: ours("co2"), SPORF: treeple_forest("sporf")}
    out.update({morf_name(p): treeple_forest("morf", p) for p in cfg.patch})
    return out


def chosen(names, wanted):
    """The names that start with one of ``wanted`` (all when ``wanted`` is empty)."""
    return [n for n in names if not wanted or any(n.startswith(w) for w in wanted)]


def run_forest(name, make, cfg, train, test, faces):
    print(f"{name} ...", flush=True)
    try:
        clf, fit_s, face_fn = make(cfg, train)
        Xt = test.X.reshape(len(test.y), -1)
        clf.predict_proba(Xt[:64])   # warm-up: first-call costs are not timed
        proba, pred_s = timed(clf.predict_proba, Xt)
        acc = float(np.mean(np.asarray(clf.classes_)[np.argmax(proba, axis=1)] == test.y))
        row = {"peer": name, "fit_s": round(fit_s, 2), "accuracy": round(100 * acc, 2),
               "predict_windows_s": round(pred_s, 3),
               "face_ms": round(median_ms(face_fn, faces), 1)}
    except Exception as exc:  # a forest that cannot run is a result too
        print(f"  {name}: failed: {exc!r}", flush=True)
        return {"peer": name, "error": f"{type(exc).__name__}: {exc}"[:300]}
    print(f"  {row}", flush=True)
    return row


# --------------------------------------------------------------- the comparison
def sig3(x):
    """``x`` to 3 significant digits (ratios range from 0.04 to 200 here)."""
    return float(f"{x:.3g}")


def compare(rows):
    """Each row's fit and per-face times as multiples of each of ours (``fit_x``,
    ``face_x``: {"two-probe": ..., "CO2": ..., "axis": ...}) and its accuracy minus theirs
    (``accuracy_vs``); ours that failed are left out."""
    base = {k: r for k, name in OURS.items() for r in rows
            if r["peer"] == name and "error" not in r}
    for row in rows:
        if "error" in row:
            continue
        row["fit_x"] = {k: sig3(row["fit_s"] / b["fit_s"]) for k, b in base.items()}
        row["face_x"] = {k: sig3(row["face_ms"] / b["face_ms"]) for k, b in base.items()}
        row["accuracy_vs"] = {k: round(row["accuracy"] - b["accuracy"], 2)
                              for k, b in base.items()}
    return rows


def verdict(row):
    """Where a peer's row wins against each of ours and where it loses, in words."""
    if "error" in row:
        return f"{row['peer'].split(' (')[0]} did not run ({row['error'][:80]})."
    parts = []
    for k in row.get("accuracy_vs", {}):
        acc, fit, face = row["accuracy_vs"][k], row["fit_x"][k], row["face_x"][k]
        said = [(acc > 0, f"accuracy ({acc:+.2f} points)"), (fit < 1, f"fit time ({fit:g}×)"),
                (face < 1, f"time per face ({face:g}×)")]
        won = [text for better, text in said if better]
        lost = [text for better, text in said if not better]
        parts.append(f"against our {k} forest it wins on " + (", ".join(won) or "nothing")
                     + " and loses on " + (", ".join(lost) or "nothing"))
    return f"{row['peer'].split(' (')[0]}: " + "; ".join(parts) + "."


def summary(rows):
    """One sentence: treeple's most accurate row against each of ours (None without both)."""
    ran = [r for r in rows if "error" not in r]
    theirs = [r for r in ran if r["peer"].startswith("treeple")]
    mine = [(k, r) for k, name in OURS.items() for r in ran if r["peer"] == name]
    if not theirs or not mine:
        return None
    best = max(theirs, key=lambda r: r["accuracy"])
    return (f"treeple's most accurate forest here, {best['peer'].split(' (')[0]}, labels "
            f"{best['accuracy']:.2f}% of the test windows right; ours: "
            + ", ".join(f"{k} {r['accuracy']:.2f}%" for k, r in mine) + ".")


def _x(d, k, fmt):
    return format(d[k], fmt) if k in d else ""


def markdown(doc):
    """The part of docs/peers.md under :data:`HEADING`, from the JSON ``doc``."""
    cfg, v = doc["settings"], doc["versions"]
    dims = cfg["morf_patches"][0][0]
    sides = ", ".join(str(hi[0]) for _, _, hi in cfg["morf_patches"])
    ks = COLUMNS
    about = (
        f"in `.venv-treeple` (treeple {v['treeple']}, scikit-learn {v['scikit-learn']}), on "
        f"{doc['machine']}, {THREADS} threads for every forest. The windows of the table above, "
        f"and its trees ({cfg['trees']}), depth ({cfg['depth']}), windows per tree "
        f"({cfg['per_tree']:,}, drawn with replacement), leaf size (5) and faces ({cfg['faces']}). "
        f"Per node, SPORF and MORF try q = {cfg['q']} random projections, the axis and CO2 "
        f"forests q = {cfg['q']} features (CO2 starts from the best of them, the paper's CO2), "
        f"two-probe {cfg['pairs']} pairs. SPORF's projections combine about 1.5 features with "
        f"weights ±1; MORF's are sums over one patch of the window's "
        f"{dims[0]}×{dims[1]}×{dims[2]} pixels, of 1 to P rows and columns by 1 to "
        f"{dims[2]} channels, one row per largest side P ({sides}). Every forest is first "
        f"fitted once, untimed, on {WARM_ROWS} windows (compilation). Per face, as above: a "
        f"treeple forest's time includes building the window matrix. Ratios: the row's time "
        f"over our two-probe or CO2 forest's (below 1: the row is faster); vs: the row's "
        f"accuracy minus theirs.")
    lines = [
        HEADING,
        "",
        f"`{doc['command']}`",
        textwrap.fill(about, 90, break_on_hyphens=False, break_long_words=False),
        "",
        "| forest | fit (s) | × two-probe | × CO2 | test-window accuracy (%) | vs two-probe "
        "| vs CO2 | ms per face | × two-probe | × CO2 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in doc["rows"]:
        if "error" in r:
            lines.append(f"| {r['peer']} | failed: {r['error'][:80]} | | | | | | | | |")
            continue
        lines.append(
            f"| {r['peer']} | {r['fit_s']:.1f} | {_x(r['fit_x'], ks[0], 'g')} | "
            f"{_x(r['fit_x'], ks[1], 'g')} | {r['accuracy']:.2f} | "
            f"{_x(r['accuracy_vs'], ks[0], '+.2f')} | {_x(r['accuracy_vs'], ks[1], '+.2f')} | "
            f"{r['face_ms']:.0f} | {_x(r['face_x'], ks[0], 'g')} | {_x(r['face_x'], ks[1], 'g')} |")
    said = summary(doc["rows"])
    lines += ["", *([said, ""] if said else []), "Where treeple wins and where it does not:", ""]
    lines += [f"- {verdict(r)}" for r in doc["rows"] if r["peer"].startswith("treeple")]
    return "\n".join(lines) + "\n"


def page(peers_doc, oblique_doc):
    """docs/peers.md as the two benchmarks leave it: benchmarks.peers's table, then
    this part."""
    from benchmarks.peers import markdown as peers_markdown

    return peers_markdown(peers_doc).rstrip("\n") + "\n\n" + markdown(oblique_doc)


# --------------------------------------------------------------- the run
def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help="labelled folder with train/ and test/")
    p.add_argument("--train", type=int, default=128000, help="training windows")
    p.add_argument("--test", type=int, default=16000, help="test windows")
    p.add_argument("--trees", type=int, default=16)
    p.add_argument("--depth", type=int, default=20)
    p.add_argument("--per-tree", type=int, default=None, help="windows per tree (default: half)")
    p.add_argument("--q", type=int, default=119,
                   help="features (axis, CO2) or projections (treeple) tried per node")
    p.add_argument("--pairs", type=int, default=400, help="pairs two-probe tries per node")
    p.add_argument("--patch", type=int, nargs="+", default=[2, 4, 8],
                   help="MORF's largest patch sides (pixels), one MORF row each")
    p.add_argument("--faces", type=int, default=3, help="test faces timed")
    p.add_argument("--forests", nargs="+", default=[], metavar="NAME",
                   help="only the forests whose row names start so (default: all)")
    p.add_argument("--quick", action="store_true", help="16,000 / 4,000 windows, 8 trees, 2 faces")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--doc", type=Path, default=DOC)
    args = p.parse_args(argv)
    if args.quick:
        args.train, args.test, args.trees, args.faces = 16000, 4000, 8, 2
    args.per_tree = args.per_tree or args.train // 2
    return args


def treeple_available():
    from importlib.util import find_spec

    return find_spec("treeple") is not None


def versions():
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("treeple", "scikit-learn", "numpy", "numba"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = parse(argv)
    names = chosen(forests(cfg), cfg.forests)
    if any(name.startswith("treeple") for name in names) and not treeple_available():
        print("treeple is not installed in this environment: `make bench-peers` makes "
              ".venv-treeple (treeple with scikit-learn 1.6.1) and runs this there",
              file=sys.stderr)
        return 2
    train, test = bench_windows(cfg.data, cfg.train, cfg.test)
    faces = [load_face(r)[0] for r in find_faces(cfg.data / "test")[:cfg.faces]]
    rows = [run_forest(name, make, cfg, train, test, faces)
            for name, make in forests(cfg).items() if name in names]
    side = 2 * train.meta.layout.half + 1
    settings = {k: getattr(cfg, k) for k in ("train", "test", "trees", "depth", "per_tree", "q",
                                             "pairs", "patch", "faces")}
    settings["morf_patches"] = [morf_patches(side, train.X[0].size // side ** 2, p)
                                for p in cfg.patch]
    doc = {"command": " ".join(["python -m benchmarks.peers_oblique", *argv]).strip(),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "load_average": os.getloadavg(), "versions": versions(), "settings": settings,
           "rows": compare(rows)}
    write_json_atomic(cfg.out, doc)
    update_doc(cfg.doc, markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports are regenerated
        sys.exit(main())
