"""CO2 forests are the same bytes whatever vector width Numba compiles for
(facesegment/forest/_dots.py: dot products in a fixed order; facesegment/_jit.py:
no fast-math in the kernels that decide splits)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from facesegment.forest._dots import LANES, dot, dot2

ROOT = Path(__file__).resolve().parents[2]

#: An AVX2-only CPU (no AVX-512): what most laptops and older servers run.
AVX2 = ("+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+f16c,+fma,+fxsr,+lzcnt,+mmx,+movbe,"
        "+pclmul,+popcnt,+sahf,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave")
#: AVX-512 with 512-bit vectors preferred (LLVM's Skylake default is 256-bit).
AVX512 = AVX2 + ",+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512cd,-prefer-256-bit"

CHILD = """
import hashlib
import numpy as np
from facesegment.forest import CO2Forest
rng = np.random.default_rng(0)
X = rng.integers(0, 256, size=(700, 75), dtype=np.uint8)
s = X[:, 0].astype(int) + X[:, 1] - X[:, 2] + X[:, 40] // 2
y = np.digitize(s, np.quantile(s, [0.25, 0.5, 0.75]))
h = hashlib.sha256()
for init in ("axis", "best"):
    clf = CO2Forest(n_estimators=2, max_depth=5, max_features="all", oblique_min_samples=30,
                    init=init, random_state=0, n_jobs=1).fit(X, y)
    assert clf.forest_.weights.shape[0] > 0
    for name in clf.forest_._fields:
        h.update(np.ascontiguousarray(getattr(clf.forest_, name)).tobytes())
    h.update(clf.predict_proba(X).tobytes())
print(hashlib.sha256(h.digest()).hexdigest())
"""


def _host_has_avx512():
    from llvmlite import binding as llvm

    return "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")


@pytest.mark.slow
def test_co2_forest_bytes_do_not_depend_on_the_vector_width():
    """Trained in two child processes compiling for an AVX2-only CPU and for
    AVX-512 with 512-bit vectors (each with a fresh Numba cache), the CO2
    forests (init "axis" and "best") and their probabilities are the same bytes."""
    if not _host_has_avx512():
        pytest.skip("this CPU has no AVX-512: the AVX-512 child could not run")
    targets = {"avx2": ("haswell", AVX2), "avx512": ("skylake-avx512", AVX512)}
    procs, dirs = {}, []
    for name, (cpu, features) in targets.items():
        cache = tempfile.TemporaryDirectory()
        dirs.append(cache)
        env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features,
                   NUMBA_CACHE_DIR=cache.name, PYTHONPATH=str(ROOT))
        procs[name] = subprocess.Popen([sys.executable, "-c", CHILD], env=env, cwd=ROOT,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    digests = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=1500)
            assert proc.returncode == 0, err[-3000:]
            digests[name] = out.strip().splitlines()[-1]
    finally:
        for d in dirs:
            d.cleanup()
    assert digests["avx2"] == digests["avx512"], digests


@pytest.mark.parametrize("p", [1, 7, LANES, LANES + 5, 3 * LANES, 2883])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_fixed_order_dots_equal_their_reference(p, dtype):
    """dot and dot2 against tests/naive.py's reference of the same order, bit for
    bit, and against float64 NumPy within float32 rounding."""
    from tests import naive

    rng = np.random.default_rng(p)
    w = rng.standard_normal(p).astype(np.float32)
    w2 = rng.standard_normal(p).astype(np.float32)
    x = (rng.integers(0, 256, p) if dtype == np.uint8 else rng.standard_normal(p) * 50
         ).astype(dtype)
    ref = naive.naive_fixed_order_dot(w, x, LANES)
    assert np.float32(dot(w, x)).tobytes() == ref.tobytes()
    a, b = dot2(x, w, w2)
    assert np.float32(a).tobytes() == ref.tobytes()
    assert np.float32(b).tobytes() == naive.naive_fixed_order_dot(w2, x, LANES).tobytes()
    exact = float(w.astype(np.float64) @ x.astype(np.float64))
    assert abs(float(ref) - exact) <= 1e-4 * (np.abs(w).astype(np.float64)
                                              @ np.abs(x).astype(np.float64)) + 1e-6
