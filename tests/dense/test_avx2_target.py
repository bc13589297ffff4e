"""Integer dense inference compiled for an AVX2-only CPU (no AVX-512, no VNNI):
a child process with ``NUMBA_CPU_NAME=haswell`` and its features (a fresh Numba
cache) picks the AVX2 form of facesegment/dense/_simd.py on first use, its
kernel is ``vpmaddwd`` on 256-bit registers, and a fitted pooled forest with
int16 rows gives there the very probabilities this process gives in every form
it has (the float32 kernels on the same integer weights included)."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from facesegment.dense import predict_proba_raw
from facesegment.modelio.model import Model, save_model
from tests.dense.test_pooled import FORESTS, _case
from tests.forest.test_co2_cpu import AVX2

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import hashlib, json, re, sys
import numpy as np
from facesegment.dense import _pooled_oblique, _pooled, _simd
from facesegment.dense._numba import layout_kernels
from facesegment.dense import predict_proba_raw
from facesegment.models import load_model
form = _simd.FORM
model = load_model(sys.argv[1])
image = np.load(sys.argv[2])
digests = {}
for variant in ("i16avx2", "u8"):
    _pooled.INT_VARIANT = variant
    digests[variant] = hashlib.sha256(predict_proba_raw(model, image).tobytes()).hexdigest()
cells = model.layout.cells
asm = "".join(layout_kernels(_pooled_oblique, cells, model.layout.channels, "i16avx2")
              .leaves.func.inspect_asm().values())
print(json.dumps({"form": form, "digests": digests, "vpmaddwd": asm.count("vpmaddwd"),
                  "avx512": len(re.findall(r"zmm|vpdp", asm))}))
"""


@pytest.mark.slow
def test_avx2_target_gets_the_avx2_form_and_the_same_bits(tmp_path):
    image, X, ys, xs, y, model = _case(3, FORESTS["co2-int16"]())
    a = model.arrays
    as_float = Model.from_estimator(model.to_estimator(), kind=model.kind, layout=model.layout)
    as_float.arrays = a._replace(weights=a.weights.astype(np.float32))
    want = predict_proba_raw(as_float, image)
    digest = hashlib.sha256(want.tobytes()).hexdigest()
    np.save(tmp_path / "image.npy", image)
    folder = save_model(model, tmp_path / "m")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES=AVX2,
                   NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT), FACESEGMENT_SIMD="")
        done = subprocess.run([sys.executable, "-c", CHILD, str(folder),
                               str(tmp_path / "image.npy")], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(done.stdout.strip().splitlines()[-1])
    assert res["form"] == "avx2"
    assert res["digests"] == {"i16avx2": digest, "u8": digest}
    assert res["vpmaddwd"] > 0 and res["avx512"] == 0
