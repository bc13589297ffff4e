"""What is byte-identical across runs, thread counts and CPU targets, and what moves.

Usage::

    python -m benchmarks.determinism            # runs, compares with the docs (exit 1 if they disagree)
    python -m benchmarks.determinism --write    # runs, writes reports/determinism.json and the docs' section
    python -m benchmarks.determinism --render   # rewrites the docs' section from the committed JSON
    make check-determinism                      # the first line

The pipeline's ``smoke`` preset (``pipelines/config.toml``) on
``../shared/data/faces300w`` (``--test-images`` of its test faces, drawn with
the seed; 24 by default) runs from ``data`` to ``report`` in a temporary
folder per variant (:data:`VARIANTS`), each a fresh process:

* ``base``: 2 threads (``--workers 2``, Numba's default thread pool), the
  host CPU as Numba sees it;
* ``rerun``: the same again;
* ``threads-1``: one thread everywhere (``--workers 1``,
  ``NUMBA_NUM_THREADS=1``, ``OMP_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``);
* ``numba-generic``: Numba compiles for a generic x86-64 CPU
  (``NUMBA_CPU_NAME=generic``: no AVX, AVX2 or AVX-512, so another vector
  width), with its own ``NUMBA_CACHE_DIR``;
* ``no-simd-dispatch``: as ``numba-generic``, and NumPy, OpenCV and glibc's
  libm are told not to pick their AVX/AVX2/AVX-512 code paths at run time
  (``NPY_DISABLE_CPU_FEATURES``, ``OPENCV_CPU_DISABLE``, ``GLIBC_TUNABLES``):
  the closest this machine comes to another CPU.  dlib has no such switch
  (its wheel is compiled for AVX, the same code on every CPU that runs it).

Every variant's folder is compared with ``base``'s file by file
(:mod:`benchmarks.determinism_compare`): windows files, forests, the position
prior, the detector-aligned crops, the JSON reports, figures and results
pages.  The per-file results and a summary per artefact go to
:data:`OUT`; :func:`markdown` renders the summary into :data:`DOC` between
:data:`BEGIN` and :data:`END` (``tests/test_determinism.py`` checks that the
page holds what this renders from the committed JSON).  Without ``--write``
the command compares its fresh verdicts (which artefacts are identical, which
move) with the committed JSON's, prints both sizes of every move, and exits
1 when a verdict differs.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from facesegment.atomic import write_json_atomic, write_text_atomic

from .determinism_compare import compare_trees

ROOT = Path(__file__).resolve().parents[1]
#: The per-file results and the summary.
OUT = ROOT / "reports" / "determinism.json"
#: The page whose section this script writes, between :data:`BEGIN` and :data:`END`.
DOC = ROOT / "docs" / "reliability.md"
BEGIN = "<!-- determinism: begin (written by python -m benchmarks.determinism --write) -->"
END = "<!-- determinism: end -->"
CONFIG = ROOT / "pipelines" / "config.toml"
DATA = ROOT.parent / "shared" / "data" / "faces300w"
PRESET = "smoke"
#: The group of the models' JSON records (they hold measured fit times too).
MODEL_RECORDS = "model records (model.json, train-*.json)"

_OCV = "SSE4.1,SSE4.2,POPCNT,AVX,FP16,FMA3,AVX2,AVX_VNNI,AVX512F,AVX512-SKX,AVX512-CLX"
_GENERIC = {"NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": "{work}/numba-cache"}
#: ``{name: (workers, environment)}``; ``{work}`` is the temporary folder.
VARIANTS = {
    "base": (2, {}),
    "rerun": (2, {}),
    "threads-1": (1, {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                      "OPENBLAS_NUM_THREADS": "1"}),
    "numba-generic": (2, _GENERIC),
    "no-simd-dispatch": (2, {**_GENERIC, "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 "
                             "AVX512_ICL AVX512_SPR", "OPENCV_CPU_DISABLE": _OCV,
                             "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX2,-FMA,-AVX"}),
}
#: ``(variant, heading)``: each is compared with ``base``.
COMPARISONS = (("rerun", "rerun"), ("threads-1", "1 vs 2 threads"),
               ("numba-generic", "Numba generic vs host"),
               ("no-simd-dispatch", "no SIMD dispatch vs host"))


# ------------------------------------------------------------------ running

def child(root, workers, test_images, data, preset=PRESET):
    """Run the pipeline's ``all`` in ``root`` (the process's own run; called in
    the subprocess :func:`run_variant` starts)."""
    from pipelines.config import load_config
    from pipelines.run import run_target
    from pipelines.stages import Context
    from facesegment.atomic import overwriting

    cfg = load_config(CONFIG, preset, data=str(data))
    cfg["run"]["workers"] = workers
    cfg["data"]["max_test_images"] = test_images
    ctx = Context(cfg, root=Path(root), log=lambda m: print(m, file=sys.stderr, flush=True))
    with overwriting():
        bad = {k: o.status for k, o in run_target(ctx, "all").items()
               if o.status not in ("ran", "skipped")}
    if bad:
        raise SystemExit(f"stages failed: {bad}")


def run_variant(work, name, test_images, data, log=print):
    """Run variant ``name`` of :data:`VARIANTS` in ``work/name`` (a fresh process);
    its ``{"workers", "env", "seconds"}``."""
    workers, env = VARIANTS[name]
    env = {k: v.format(work=work) for k, v in env.items()}
    root = Path(work) / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "benchmarks.determinism", "--child", str(root),
           "--workers", str(workers), "--test-images", str(test_images), "--data", str(data)]
    log(f"determinism: {name}: {' '.join(f'{k}={v}' for k, v in env.items())} "
        f"--workers {workers}")
    t0 = time.perf_counter()
    with open(Path(work) / f"{name}.log", "w") as fh:
        rc = subprocess.run(cmd, cwd=root, env=full, stdout=fh, stderr=subprocess.STDOUT).returncode
    secs = time.perf_counter() - t0
    if rc:
        raise SystemExit(f"determinism: variant {name} failed (exit {rc}); see "
                         f"{Path(work) / (name + '.log')}")
    log(f"determinism: {name}: {secs:.0f} s")
    return {"workers": workers, "env": {k: VARIANTS[name][1][k] for k in env},
            "seconds": round(secs, 1)}


def crops_child(out, data, n_faces):
    """Cut the first ``n_faces`` test faces of ``data`` (sorted names) around their
    human landmarks' box with :func:`facesegment.faces.crops.crop_face` (OpenCV's
    bilinear warp, as the detector-aligned crops are cut) into ``out`` (``.npz``)."""
    import cv2
    import numpy as np

    from facesegment.data.imageio import read_image
    from facesegment.faces.crops import crop_face, landmark_box
    from facesegment.faces.landmarks import read_pts

    crops = {}
    for pts in sorted((Path(data) / "test").glob("*.pts"))[:n_faces]:
        image = read_image(pts.with_suffix(".jpg"))
        crops[pts.stem] = crop_face(image, landmark_box(read_pts(pts)))
    np.savez(out, **crops)
    print(cv2.__version__)


def compare_opencv(work, other, data, n_faces=80):
    """The crops of :func:`crops_child` with this environment's OpenCV and with
    the one installed under ``other`` (``pip install --target other
    opencv-python-headless==VERSION``), compared: ``{"versions", "faces",
    "crops_differing", "share" (of pixels), "max_grey"}``."""
    import numpy as np

    res = {}
    for name, path in (("here", str(ROOT)), ("other", f"{other}{os.pathsep}{ROOT}")):
        out = Path(work) / f"crops-{name}.npz"
        done = subprocess.run([sys.executable, "-m", "benchmarks.determinism", "--crops",
                               str(out), "--data", str(data), "--test-images", str(n_faces)],
                              env={**os.environ, "PYTHONPATH": path}, check=True,
                              capture_output=True, text=True)
        res[name] = (done.stdout.split()[-1], dict(np.load(out)))
    (va, a), (vb, b) = res["here"], res["other"]
    diff = [a[k] != b[k] for k in a]
    return {"versions": [va, vb], "faces": len(a),
            "crops_differing": sum(bool(d.any()) for d in diff),
            "share": float(np.mean([d.any(axis=-1).mean() for d in diff])),
            "max_grey": int(max(np.abs(a[k].astype(int) - b[k]).max() for k in a))}


# ------------------------------------------------------------------ summary

def group_of(rel):
    """The artefact a run folder's file belongs to (e.g. ``"forest co2"`` for a
    model folder's ``forest.h5``, ``"scores axis"``, ``"windows"``)."""
    parts = rel.split("/")
    name = parts[-1]
    if parts[0] == "data":
        return {"windows": "windows", "aligned": "detector-aligned crops",
                "landmarks": "dlib landmarks"}.get(parts[1], "data")
    if parts[0] == "models":
        if name == "position-prior.npz":
            return "position prior"
        if name.endswith(".json"):
            return MODEL_RECORDS
        return "forest " + re.sub(r"-\d+$", "", parts[2])
    m = re.match(r"(train|eval)-(.+)\.json$", name)
    if m:
        return MODEL_RECORDS if m.group(1) == "train" else "scores " + m.group(2)
    if "figures" in parts:
        return "figures"
    if name in ("selection.json", "selection.md", "chosen.json"):
        return "model selection"
    if name == "prior.json":
        return "position prior"
    if name.endswith(".md"):
        return "results pages"
    return name


def summarize(files):
    """``{group: summary}`` of :func:`compare_trees`'s ``files``: ``status``
    ("identical": every byte; "same values": only measured times differ;
    "differs"), and for "differs" ``files`` (how many of ``n_files``) and the
    largest ``share`` (of array elements or pixels), ``max_abs``,
    ``test_points``, ``detector_points``, ``shape_differs``."""
    out = {}
    for rel, res in files.items():
        g = out.setdefault(group_of(rel), {"status": "identical", "n_files": 0, "files": 0})
        g["n_files"] += 1
        st = res["status"]
        if st == "same content" and g["status"] == "identical":
            g["status"] = "same values"
        if st in ("differs", "missing"):
            g["status"] = "differs"
            g["files"] += 1
            for key in ("test_points", "detector_points", "max_abs"):
                if res.get(key):
                    g[key] = max(g.get(key, 0.0), res[key])
            share = res.get("max_share", res.get("share"))
            if share:
                g["share"] = max(g.get("share", 0.0), share)
            if res.get("shape_differs") or st == "missing":
                g["shape_differs"] = True
    for g in out.values():
        if g["status"] != "differs":
            del g["files"]
    return dict(sorted(out.items()))


def cell(s):
    """One table cell: how an artefact compares."""
    if s["status"] == "identical":
        return "identical"
    if s["status"] == "same values":
        return "same values"
    bits = []
    if "test_points" in s or "detector_points" in s:
        bits.append(f"test ±{s.get('test_points', 0):.4f}, detector-aligned "
                    f"±{s.get('detector_points', 0):.4f} points")
    elif s.get("shape_differs"):
        bits.append("other trees")
    elif "share" in s:
        bits.append(f"{100 * s['share']:.2g}% of values differ")
    return f"**moves**: {', '.join(bits) or 'differs'} ({s['files']}/{s['n_files']} files)"


def markdown(doc):
    """The docs' section: the table of every artefact and the statements, from
    the JSON :func:`main` writes."""
    comps = [c for c, _ in COMPARISONS if c in doc["summary"]]
    heads = dict(COMPARISONS)
    groups = sorted({g for c in comps for g in doc["summary"][c]})
    lines = [f"`python -m benchmarks.determinism --write` (`make check-determinism` "
             f"checks it) runs the `{doc['preset']}` preset on `{doc['data']}` "
             f"({doc['test_images']} test faces) from `data` to `report` once per variant, "
             "each in its own folder and process, and compares every file with the "
             f"`base` run's (host CPU `{doc['host']['cpu']}`, 2 threads): by its bytes, "
             "then by its content (HDF5 datasets, JSON leaves without measured times, "
             f"PNG pixels). Result: `reports/determinism.json`; the {len(doc['variants'])} "
             f"runs and the comparison took {doc['seconds'] / 60:.0f} min.", "",
             "| artefact | " + " | ".join(heads[c] for c in comps) + " |",
             "| --- |" + " --- |" * len(comps)]
    for g in groups:
        lines.append(f"| {g} | " + " | ".join(
            cell(doc["summary"][c][g]) if g in doc["summary"][c] else "(none)"
            for c in comps) + " |")
    lines.append("")
    for c in comps:
        summ = doc["summary"][c]
        moved = [g for g, s in summ.items() if s["status"] == "differs"]
        same = [g for g, s in summ.items() if s["status"] != "differs"]
        if not moved:
            lines.append(f"- **{heads[c]}**: every artefact is identical "
                         f"({len(same)} of {len(summ)}; " + _bytes(summ) + ").")
        else:
            lines.append(f"- **{heads[c]}**: {len(moved)} of {len(summ)} artefacts move: "
                         + ", ".join(moved) + "; the rest are identical.")
    lines.append("")
    lines += _why(doc)
    return "\n".join(lines).rstrip() + "\n"


def _why(doc):
    """The paragraphs that say where each move comes from (from the JSON's numbers)."""
    out = []
    cpu = {g for c in ("numba-generic", "no-simd-dispatch") if c in doc["summary"]
           for g, s in doc["summary"][c].items() if s["status"] == "differs"}
    forests = sorted(g.split(" ", 1)[1] for g in cpu if g.startswith("forest "))
    scores = sorted(g.split(" ", 1)[1] for g in cpu if g.startswith("scores "))
    if forests or scores:
        out.append(
            "On another CPU target (Numba compiling without AVX, AVX2 or AVX-512, "
            "another vector width) the training kernels in IEEE program order "
            "(`facesegment/_jit.py`) give the same windows and the same forests, except "
            + (", ".join(f"`{k}`" for k in forests) or "none")
            + ": the non-greedy trees' kernels may reassociate sums (`REASSOC`), so "
            "their forests follow the vector width. Scores that move: "
            + (", ".join(f"`{k}`" for k in scores) or "none")
            + "; a score moves when its forest does or when dense inference's "
            "fast-math float32 dots (`FASTMATH`, the CO2 kinds' oblique splits) "
            "send a pixel within float32 rounding of a threshold the other way.")
        out.append("")
    ocv = doc.get("opencv")
    if ocv:
        a, b = ocv["versions"]
        out.append(
            "The detector-aligned crops are cut with OpenCV's bilinear warp "
            "(`cv2.warpAffine`, `facesegment.faces.crops.crop_face`), whose output "
            f"depends on OpenCV's version, not on the CPU: the first {ocv['faces']} "
            f"test faces cut around their human landmarks with OpenCV {a} and {b} "
            f"give {ocv['crops_differing']} different crops, "
            f"{100 * ocv['share']:.1f}% of their pixels differing by up to "
            f"{ocv['max_grey']} grey levels (`--opencv DIR`). The test crops are read "
            "as stored, so only the detector-aligned scores (forests, cascades, the "
            "landmark renderer) follow OpenCV's version; `pyproject.toml` asks for "
            "`opencv-python-headless>=4.8`, so results committed with one version "
            "are reproduced to the byte only with that version. Versions of this "
            "measurement: " + ", ".join(f"{k} {v}" for k, v in
                                       doc["host"]["versions"].items()) + ".")
    return out


def _bytes(summ):
    n = sum(1 for s in summ.values() if s["status"] == "same values")
    return "byte for byte" if not n else f"{n} of them in values only: measured times differ"


def section(text, body):
    """``text`` with its generated section replaced by ``body``."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC}: markers {BEGIN!r} ... {END!r} missing")
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n\n" + body + "\n" + END + rest.split(END, 1)[1]


def verdicts(doc):
    """``{(comparison, artefact): "identical" | "same values" | "differs"}``."""
    return {(c, g): s["status"] for c, summ in doc["summary"].items() for g, s in summ.items()}


def host_cpu():
    """The CPU name and whether AVX-512 is there, as LLVM (Numba) sees the host."""
    import llvmlite.binding as ll

    from importlib.metadata import version

    feats = ll.get_host_cpu_features()
    return {"cpu": ll.get_host_cpu_name(), "avx512f": bool(feats.get("avx512f")),
            "avx2": bool(feats.get("avx2")),
            "versions": {p: version(p) for p in ("numpy", "numba", "llvmlite", "h5py",
                                                 "opencv-python-headless", "dlib-bin")}}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.determinism",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true",
                   help=f"write {OUT.relative_to(ROOT)} and the section of "
                        f"{DOC.relative_to(ROOT)} (default: compare with them)")
    p.add_argument("--render", action="store_true",
                   help="only rewrite the docs' section from the committed JSON")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--test-images", type=int, default=24)
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--work", default=None, help="keep the run folders here (default: a "
                                                "temporary folder, removed)")
    p.add_argument("--reuse", action="store_true",
                   help="compare the run folders already in --work instead of running")
    p.add_argument("--opencv", default=None, metavar="DIR",
                   help="also compare the detector-aligned crops' warp with another OpenCV "
                        "installed under DIR (pip install --target DIR "
                        "opencv-python-headless==4.10.0.84); default: keep the committed "
                        "JSON's comparison")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--crops", default=None, help=argparse.SUPPRESS)
    p.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, args.workers, args.test_images, args.data)
        return 0
    if args.crops:
        crops_child(args.crops, args.data, args.test_images)
        return 0
    if args.render:
        write_text_atomic(DOC, section(DOC.read_text(), markdown(json.loads(OUT.read_text()))))
        return 0
    if "base" not in args.variants:
        args.variants.insert(0, "base")
    work = Path(args.work or tempfile.mkdtemp(prefix="facesegment-determinism-"))
    t0 = time.perf_counter()
    try:
        doc = measure(work, args)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    # the variants' own run times (also when --reuse read them) and the comparison's
    doc["seconds"] = round(sum(v["seconds"] for v in doc["variants"].values())
                           + time.perf_counter() - t0 - doc.pop("_ran"))
    return report(doc, args.write)


def measure(work, args):
    """Run (or with ``--reuse`` read) the variants in ``work``; the JSON document."""
    runs, t0 = {}, time.perf_counter()
    for name in args.variants:
        info = Path(work) / f"{name}.json"
        if args.reuse and info.is_file():
            runs[name] = json.loads(info.read_text())
        else:
            runs[name] = run_variant(work, name, args.test_images, args.data)
            write_json_atomic(info, runs[name])
    doc = {"command": "python -m benchmarks.determinism --write", "preset": PRESET,
           "data": os.path.relpath(args.data, ROOT), "test_images": args.test_images,
           "host": host_cpu(), "variants": runs, "files": {}, "summary": {},
           "_ran": time.perf_counter() - t0}
    for name, _ in COMPARISONS:
        if name in runs:
            files = compare_trees(Path(work) / "base", Path(work) / name)
            doc["files"][name] = {k: v for k, v in files.items() if v["status"] != "identical"}
            doc["summary"][name] = summarize(files)
    old = json.loads(OUT.read_text()) if OUT.is_file() else {}
    doc["opencv"] = (compare_opencv(work, args.opencv, args.data) if args.opencv
                     else old.get("opencv"))
    return doc


def report(doc, write):
    """Write (``write``) or compare with the committed JSON; the exit status."""
    if write:
        write_json_atomic(OUT, doc, indent=1, sort_keys=True)
        write_text_atomic(DOC, section(DOC.read_text(), markdown(doc)))
        print(f"wrote {OUT.relative_to(ROOT)} and {DOC.relative_to(ROOT)} "
              f"({doc['seconds']} s)")
        return 0
    old = json.loads(OUT.read_text())
    new_v, old_v = verdicts(doc), verdicts(old)
    bad = []
    for key in sorted(set(new_v) | set(old_v)):
        a, b = old_v.get(key), new_v.get(key)
        c, g = key
        if c in doc["summary"] and a != b:
            bad.append(f"{c} / {g}: the docs say {a}, this run: {b}")
        if b == "differs":
            print(f"{c} / {g}: docs {cell(old['summary'][c][g]) if a else '-'}; "
                  f"this run {cell(doc['summary'][c][g])}")
    print(f"determinism: {len(new_v)} verdicts compared in {doc['seconds']} s")
    for b in bad:
        print("determinism: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own report and page are regenerated
        sys.exit(main())
