"""First use of a fresh install: how long until the first face is segmented
(results in reports/bench/first_use.json).

A fresh install has an empty Numba cache, so its first ``segment`` compiles
the kernels the shipped model needs; later runs load them from the cache.
Each measurement is a child process with its own ``NUMBA_CACHE_DIR``:

* ``cold``: an empty cache (a fresh install's first run);
* ``warm`` (the peer): the same command again on the cache the cold run left.

Two commands are timed, each cold then warm, on one face image:

* the CLI, ``facesegment segment DIR OUT`` (no ``--model``): seconds until
  the image's label map is written, and until the process exits;
* the API, ``facesegment.segment(path)``: seconds to import facesegment, for
  the first call (model loading and the kernels included), for a second call
  and the median of 5 more (the speed once compiled).

CPU seconds are recorded too (the CLI child's, and the API child's per
phase): on a shared machine they move less with the load than wall time.

``--root`` times another checkout's package (e.g. an older commit unpacked
with ``git archive``), for a before/after comparison.

    nice python -m benchmarks.bench_first_use
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FACESEGMENT_SHARED", ROOT.parent / "shared")) / "data"
OUT = ROOT / "reports" / "bench" / "first_use.json"

#: The API child: prints one JSON line of its timings.
API_CHILD = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import facesegment, facesegment.api
t1, c1 = time.perf_counter(), time.process_time()
faces = facesegment.segment(sys.argv[1])
t2, c2 = time.perf_counter(), time.process_time()
faces = facesegment.segment(sys.argv[1])
t3, c3 = time.perf_counter(), time.process_time()
later = []
for _ in range(5):
    t = time.perf_counter()
    facesegment.segment(sys.argv[1])
    later.append(time.perf_counter() - t)
print(json.dumps({"import_s": t1 - t0, "first_s": t2 - t1, "second_s": t3 - t2,
                  "later_median_s": sorted(later)[2],
                  "import_cpu_s": c1 - c0, "first_cpu_s": c2 - c1, "second_cpu_s": c3 - c2,
                  "faces": len(faces), "module": facesegment.__file__}))
"""


def default_image():
    test = SHARED / "faces300w" / "test"
    images = sorted(test.glob("*.jpg")) if test.is_dir() else []
    if not images:
        raise SystemExit(f"no face image under {test}: give one with --image PATH")
    return images[0]


def _env(root, cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(root))
    env.pop("NUMBA_DISABLE_JIT", None)
    return env


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_cli(root, image, cache, work):
    """Seconds until ``NAME_label.png`` exists and until ``facesegment segment`` exits,
    and the CPU seconds it used (all threads)."""
    inputs, out = work / "in", work / "out"
    shutil.rmtree(out, ignore_errors=True)
    inputs.mkdir(exist_ok=True)
    shutil.copy(image, inputs / image.name)
    label = out / f"{image.stem}_label.png"
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "facesegment", "segment", str(inputs),
                             str(out)], cwd=work, env=_env(root, cache),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = None
    while proc.poll() is None:
        if first is None and label.exists():
            first = time.perf_counter() - t0
        time.sleep(0.02)
    total = time.perf_counter() - t0
    stdout, stderr = proc.communicate()
    cpu = _children_cpu() - cpu0
    if proc.returncode != 0 or not label.exists():
        raise SystemExit(f"facesegment segment failed ({proc.returncode}): {stderr.strip()}")
    return {"first_output_s": round(first if first is not None else total, 3),
            "exit_s": round(total, 3), "cpu_s": round(cpu, 3), "stderr_lines": len(stderr.splitlines()),
            "stderr_first_line": (stderr.splitlines() or [""])[0][:160]}


def time_api(root, image, cache, work):
    """The API child's timings (import, first and second ``facesegment.segment``)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", API_CHILD, str(image)], cwd=work,
                          env=_env(root, cache), capture_output=True, text=True)
    total = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the API child failed: {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out = {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}
    out["exit_s"] = round(total, 3)
    return out


def measure(root, image):
    """``{"cli": {"cold", "warm"}, "api": {"cold", "warm"}}``, each pair on its own
    fresh cache."""
    result = {}
    with tempfile.TemporaryDirectory(prefix="facesegment-first-use-") as tmp:
        tmp = Path(tmp)
        for name, timer in (("cli", time_cli), ("api", time_api)):
            cache, work = tmp / f"cache-{name}", tmp / f"work-{name}"
            cache.mkdir()
            work.mkdir()
            cold = timer(root, image, cache, work)
            warm = timer(root, image, cache, work)
            result[name] = {"cold": cold, "warm": warm}
            print(f"{name}: cold {cold}\n{' ' * len(name)}  warm {warm}", flush=True)
    cli, api = result["cli"], result["api"]
    result["ratios"] = {
        "cli_first_output_cold_over_warm": round(cli["cold"]["first_output_s"]
                                                 / cli["warm"]["first_output_s"], 2),
        "cli_cpu_cold_over_warm": round(cli["cold"]["cpu_s"] / cli["warm"]["cpu_s"], 2),
        "api_first_cold_over_warm": round(api["cold"]["first_s"] / api["warm"]["first_s"], 2),
        "api_first_cpu_cold_over_warm": round(api["cold"]["first_cpu_s"]
                                              / api["warm"]["first_cpu_s"], 2),
        "api_later_cold_over_warm": round(api["cold"]["later_median_s"]
                                          / api["warm"]["later_median_s"], 2),
    }
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=Path, default=None,
                    help="one face image (default: the first of ../shared/data/faces300w/test)")
    ap.add_argument("--root", type=Path, default=ROOT,
                    help="the checkout whose facesegment package is timed (default: this one)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"JSON report (default {OUT})")
    args = ap.parse_args(argv)
    image = (args.image or default_image()).resolve()
    root = args.root.resolve()
    result = {"image": image.name, "root": str(root), "cpu_count": os.cpu_count(),
              "load_average_before": round(os.getloadavg()[0], 2)}
    result.update(measure(root, image))
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["ratios"]), f"-> {args.out}")
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
