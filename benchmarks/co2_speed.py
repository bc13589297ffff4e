"""Speed and size of the CO2 variants of a finished run, timed side by side.

Loads the run's 32-tree (and 16-tree) model folders of the dense CO2 forests
(``co2-best``, ``co2``), their sparse and pooled variants (``co2-sparse``,
``co2-pooled``) and the cheap peers (``two-probe``, ``axis``), and times in
one process, one model after the other, dense inference of the first
``--images`` test faces (``predict_image``, every pixel, median of 3 runs per
face after a warm-up, wall and CPU ms).  Beside the times: the model's bytes
(arrays), its test Jaccard from the run (``eval-<kind>.json``, forest alone,
α chosen on validation), the multiply-adds of its dense oblique splits
(``count_oblique_visits`` × values per split × 2) and the rate they ran at,
against the peer of that bound: a float32 matrix product (BLAS, the same
threads) of the same inner size.  A pooled model with int8 or int16 rows runs
integer dot products (docs/sparse.md): it is timed with the kernels this CPU
uses (``vpdpbusd`` where it has VNNI), again with the portable integer
form on this CPU (where LLVM still uses AVX-512 and ``vpdpwssd``), and in two
child processes compiled for an AVX2-only target (``NUMBA_CPU_NAME=haswell``
and its features, a fresh Numba cache each): the AVX2 form (``vpmaddwd``)
such a CPU gets, and the portable form there (``FACESEGMENT_SIMD=portable``);
each integer row also gives its time as a multiple of the first (``vpdpbusd``
where this CPU has VNNI).  Writes ``reports/sparse/speed-<run>.json`` and ``.md``
(``speed-<run>-<kinds>.*`` when ``--kinds`` names some).

    python -m benchmarks.co2_speed [--run faces300w-default] [--images 3] [--kinds co2-pooled]
"""

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.data.datasets import load_face
from facesegment.dense import _pooled, _simd, count_oblique_visits, predict_image
from facesegment.models import load_model
from pipelines.backend import records_from_json
from pipelines.common import forest_bytes

#: The features of the AVX2-only target (Haswell) the integer kernels are also timed for.
AVX2_FEATURES = ("+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+f16c,+fma,+fxsr,+lzcnt,+mmx,"
                 "+movbe,+pclmul,+popcnt,+sahf,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave")
KINDS = ("co2-best", "co2", "co2-sparse", "co2-pooled", "two-probe", "rotation", "axis")


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _time(model, images, n_trees, reps=3):
    wall, cpu = [], []
    for im in images:
        predict_image(model, im, n_trees=n_trees)            # warm-up (compile, caches)
        w, c = [], []
        for _ in range(reps):
            c0, t0 = _cpu(), time.perf_counter()
            predict_image(model, im, n_trees=n_trees)
            w.append(1000 * (time.perf_counter() - t0))
            c.append(1000 * (_cpu() - c0))
        wall.append(float(np.median(w)))
        cpu.append(float(np.median(c)))
    return float(np.median(wall)), float(np.median(cpu))


def _arithmetics(model):
    """How the model's dense dots are timed: float32, or (int8/int16 rows over a
    pooled layout) the integer kernels this CPU runs, the portable form where
    those are ``vpdpbusd``, and the kernels compiled for an AVX2-only target
    (:func:`_time_avx2`)."""
    dt = model.arrays.weights.dtype
    if dt not in (np.int8, np.int16) or getattr(model.layout, "pool", 1) == 1:
        return [dt.name if dt != np.float16 else "float16 (as float32)"]
    return ([f"{dt.name} vpdpbusd", f"{dt.name} portable"] if _simd.VNNI
            else [f"{dt.name} portable"]) + [f"{dt.name} vpmaddwd (AVX2 target)",
                                             f"{dt.name} portable (AVX2 target)"]


def _time_avx2(folder, args, n, portable):
    """(wall, CPU) ms of the model in ``folder`` in a child process whose Numba
    compiles for an AVX2-only CPU (no AVX-512, no VNNI), with a fresh cache:
    the AVX2 form, or (``portable``) the portable one."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES=AVX2_FEATURES,
                   NUMBA_CACHE_DIR=cache, FACESEGMENT_SIMD="portable" if portable else "")
        # as a module from the repository root, so that the child imports
        # ``pipelines`` as this process does (a fresh clone installs only the package)
        done = subprocess.run([sys.executable, "-m", "benchmarks.co2_speed", "--run", args.run,
                               "--images", str(args.images), "--trees", str(n), "--child",
                               str(folder)],
                              env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"co2_speed: the AVX2-only child failed: "
                         f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    res = json.loads(done.stdout.strip().splitlines()[-1])
    want = "portable" if portable else "avx2"
    if res["form"] != want:
        raise SystemExit(f"co2_speed: the AVX2-only child ran the {res['form']} form, not "
                         f"{want}: check NUMBA_CPU_FEATURES ({AVX2_FEATURES})")
    return res["ms"], res["cpu_ms"]


@contextlib.contextmanager
def _integer_form(arith):
    before = _pooled.INT_VARIANT
    _pooled.INT_VARIANT = "u8" if arith.endswith("portable") else _simd.VARIANT
    try:
        yield
    finally:
        _pooled.INT_VARIANT = before


def _blas_gflops(k, reps=5):
    """float32 GEMM rate (GFLOP/s) for (4096 x k) @ (k x 256): the FLOP bound's peer."""
    rng = np.random.default_rng(0)
    a = rng.random((4096, k), dtype=np.float32)
    b = rng.random((k, 256), dtype=np.float32)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return reps * 2 * 4096 * k * 256 / (time.perf_counter() - t0) / 1e9


def _values_per_split(a):
    """Values an oblique split reads: the mean entries of sparse rows, else all features."""
    if a.sparse_ptr is not None and a.sparse_ptr.shape[0] > 1 and a.weights.shape[0] == 0:
        return round(float(np.diff(a.sparse_ptr).mean()), 1)
    if a.weights.shape[0] == 0:
        return 2 if (a.feature2 >= 0).any() else 1   # two-probe / axis-aligned nodes
    return int(a.n_features)


def _jaccard(rdir, kind, n):
    try:
        ev = json.loads((rdir / f"eval-{kind}.json").read_text())
        return ev["trees"][str(n)]["alpha"][repr(float(ev["alpha"]))]["mean_jaccard"]
    except (OSError, KeyError, ValueError):
        return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default")
    p.add_argument("--images", type=int, default=3)
    p.add_argument("--trees", nargs="+", type=int, default=[16, 32])
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    p.add_argument("--child", help=argparse.SUPPRESS)   # time this model folder only
    args = p.parse_args(argv)
    rdir = ROOT / "reports" / "runs" / args.run
    splits = json.loads((rdir / "splits.json").read_text())
    images = [load_face(r)[0] for r in records_from_json(splits["test"][:args.images])]
    if args.child:
        ms, cpu_ms = _time(load_model(args.child), images, args.trees[0])
        print(json.dumps({"ms": ms, "cpu_ms": cpu_ms, "form": _simd.FORM}))
        return
    rows = []
    load0 = os.getloadavg()[0]
    for kind in args.kinds:
        for n in args.trees:
            folder = ROOT / "models" / args.run / f"{kind}-{n}"
            if not (folder / "model.json").is_file():
                continue
            model = load_model(folder)
            first = None
            for arith in _arithmetics(model):
                if arith.endswith("(AVX2 target)"):
                    ms, cpu_ms = _time_avx2(folder, args, n, "portable" in arith)
                else:
                    with _integer_form(arith):
                        ms, cpu_ms = _time(model, images, n)
                visits = count_oblique_visits(model, images[0])
                gflop = 2 * visits * model.arrays.n_features / 1e9   # dense rows only
                row = {"kind": kind, "n_trees": n, "ms_per_image": round(ms, 1),
                       "cpu_ms_per_image": round(cpu_ms, 1), "arithmetic": arith,
                       "mb": round(forest_bytes(folder) / 1e6, 2),
                       "values_per_split": _values_per_split(model.arrays),
                       "pool": int(getattr(model.layout, "pool", 1)),
                       "oblique_gflop_per_image": round(gflop, 2),
                       "gflops_achieved": round(gflop / (ms / 1000), 1) if gflop else 0.0,
                       "test_jaccard": _jaccard(rdir, kind, n)}
                if model.arrays.weights.dtype in (np.int8, np.int16) and row["pool"] > 1:
                    first = first or (ms, cpu_ms)    # integer rows: x the first form's time
                    row["x_first_form"] = round(ms / first[0], 2)
                    row["x_first_form_cpu"] = round(cpu_ms / first[1], 2)
                rows.append(row)
                print(row, flush=True)
    blas = {k: round(_blas_gflops(k), 1) for k in sorted({r["values_per_split"] for r in rows
                                                          if r["oblique_gflop_per_image"]})}
    doc = {"run": args.run, "images": args.images, "cpu_count": os.cpu_count(),
           "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)],
           "blas_gflops_by_inner_size": blas, "rows": rows}
    part = "" if args.kinds == list(KINDS) else "-" + "-".join(args.kinds)
    out = ROOT / "reports" / "sparse" / f"speed-{args.run}{part}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, doc, sort_keys=True)
    lines = [f"CO2 variants of {args.run}, timed in one script (median ms per 250x250 face, "
             f"every pixel, {args.images} test faces x 3 runs; {os.cpu_count()} cores; load "
             f"{doc['load_average'][0]}-{doc['load_average'][1]}). Jaccard: the run's test "
             "score (forest alone).", "",
             "Dot products of integer rows (int8, int16) are integer multiply-adds "
             "(counted as 2 ops each, like FLOP); their peer is still numpy's float32 GEMM. "
             "× first: an integer row's time (wall, CPU) over its model's first integer row's.",
             "" if max(doc["load_average"]) < os.cpu_count() else
             "\nTimed under load (load average at or above the core count): compare the "
             "ratios, not the absolute times.\n",
             "| kind | trees | values/split | dots in | Jaccard | ms/face | CPU ms | × first "
             "| MB | GFLOP/face | GFLOP/s | BLAS GFLOP/s |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        jac = "" if r["test_jaccard"] is None else f"{r['test_jaccard']:.2f}"
        b = blas.get(r["values_per_split"], "") if r["oblique_gflop_per_image"] else ""
        ratio = (f"{r['x_first_form']:.2f}, {r['x_first_form_cpu']:.2f}"
                 if "x_first_form" in r else "")
        lines.append(f"| {r['kind']} | {r['n_trees']} | {r['values_per_split']} | "
                     f"{r['arithmetic'] if r['oblique_gflop_per_image'] else ''} | {jac} | "
                     f"{r['ms_per_image']:.0f} | {r['cpu_ms_per_image']:.0f} | {ratio} | "
                     f"{r['mb']:.1f} | "
                     f"{r['oblique_gflop_per_image']:.1f} | {r['gflops_achieved']:.1f} | {b} |")
    write_text_atomic(out.with_suffix(".md"), "\n".join(lines) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
