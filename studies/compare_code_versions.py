"""Do two versions of the code give the same forests and scores on this machine?

Trains the pipeline's selection forest of one setting (default: the CO2 row
q=p^0.6, nu=1, eta=1e-3 of a finished run's ``selection.json``) on a windows
file with each version, scores it on the run's validation images with that
version's own scoring code, and compares: forest arrays (SHA-256) and the
validation class-average Jaccard.  Used to tell a change of code from a
change of machine: CO2's Numba kernels use ``fastmath`` (reassociated float
sums), so their results depend on the CPU's vector width and the compiler,
while axis-aligned and two-probe forests (integer histograms) do not.

    git archive 8d59b39 | (mkdir -p /tmp/old && tar -x -C /tmp/old)
    python -m studies.compare_code_versions --old /tmp/old \\
        --run reports/runs/faces300w-default --windows data/windows/faces300w-default/train.h5

Writes ``reports/bench/code-versions.json``.  Windows are read with h5py
directly, so versions with another windows-file format version compare too.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import hashlib, json, sys
import h5py, numpy as np
root, windows, run, data, index, n_trees = sys.argv[1:7]
from facesegment.data.datasets import find_faces
from facesegment.forest import CO2Forest, AxisAlignedForest, TwoProbeForest
from facesegment.modelio.model import Model
from pipelines import scoring
sel = json.load(open(run + "/selection.json"))
row = sel["settings"][int(index)]
cls = {"axis": AxisAlignedForest, "two-probe": TwoProbeForest}.get(row["kind"], CO2Forest)
params = dict(row["params"])
if row["kind"] == "co2-best":
    params["init"] = "best"
with h5py.File(windows) as f:
    X = f["windows"][()].reshape(f["labels"].shape[0], -1)
    y = f["labels"][()]
    mean, std, sf = f.attrs["mean"], f.attrs["std"], f.attrs["sampling_factors"]
est = cls(n_estimators=int(n_trees), random_state=0, n_jobs=2, **params)
if cls is CO2Forest:
    est.fit(X, y, feature_mean=mean, feature_std=std)
else:
    est.fit(X, y)
fa = est.forest_
digest = hashlib.sha256(b"".join(np.ascontiguousarray(getattr(fa, k)).tobytes()
                                 for k in fa._fields)).hexdigest()
model = Model(row["kind"].replace("co2-best", "co2"), {}, fa,
              tuple(str(c) for c in range(len(sf))), sf, mean, std)
names = set(sel["validation_images"])
recs = [r for r in find_faces(data) if r.name in names]
res = scoring.score_model(model, recs, [int(n_trees)], [0.5, 1.0], mode="strict",
                          pixel_stride=sel.get("pixel_stride", 3), desc="compare")
print(json.dumps({"setting": row["setting"], "kind": row["kind"], "forest_sha256": digest,
                  "n_images": len(recs),
                  "validation_jaccard": {a: v["mean_jaccard"] for a, v in
                                         res["trees"][str(n_trees)]["alpha"].items()}}))
"""


def run_version(root, args):
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(args.windows),
                          str(args.run), str(args.data), str(args.setting), str(args.trees)],
                         cwd=root, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"compare_code_versions: the version in {root} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _machine():
    """CPU model and vector extensions (fastmath float sums depend on them)."""
    import numba
    import numpy

    info = {"machine": platform.machine(), "python": platform.python_version(),
            "numpy": numpy.__version__, "numba": numba.__version__}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        if line.startswith("model name"):
            info["cpu"] = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = line.split(":", 1)[1].split()
            info["simd"] = sorted(f for f in flags if f.startswith(("avx", "sse4", "fma")))
            break
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="folder of the older version (git archive)")
    ap.add_argument("--run", required=True, help="a finished run folder (selection.json)")
    ap.add_argument("--windows", required=True, help="the run's windows file")
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/faces300w/train"),
                    help="where the validation images are")
    ap.add_argument("--setting", type=int, default=9,
                    help="row of selection.json (default 9: co2 q=p^0.6 nu=1 eta=1e-3)")
    ap.add_argument("--trees", type=int, default=8)
    ap.add_argument("--out", default=str(ROOT / "reports/bench/code-versions.json"))
    args = ap.parse_args(argv)
    for name in ("run", "windows", "data"):
        setattr(args, name, Path(getattr(args, name)).resolve())
    old, new = run_version(Path(args.old).resolve(), args), run_version(ROOT, args)
    same = old["forest_sha256"] == new["forest_sha256"] and \
        old["validation_jaccard"] == new["validation_jaccard"]
    doc = {"old": {**old, "path": str(args.old)}, "new": new, "identical": same,
           "machine": _machine()}
    from facesegment.atomic import write_json_atomic

    write_json_atomic(args.out, doc, sort_keys=True)
    print(json.dumps(doc, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
