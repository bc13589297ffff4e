"""Single-threaded float32 GEMM rate (2048x2883 @ 2883x1024), the reference for the CO2 SGD rate.

Usage (from the repository root)::

    OPENBLAS_NUM_THREADS=1 nice .venv/bin/python studies/co2/gemm_rate.py

Prints GFLOP/s per wall second and per CPU second (5 products after a warm-up).
The "1 thread" in the output is only true with OPENBLAS_NUM_THREADS=1 (or the
equivalent for your BLAS). Used by docs/studies/co2.md.
"""
import time

import numpy as np

a=np.random.rand(2048,2883).astype(np.float32); b=np.random.rand(2883,1024).astype(np.float32)
a@b; t=time.perf_counter(); c=time.process_time(); n=5
for _ in range(n): a@b
dt=(time.perf_counter()-t)/n; dc=(time.process_time()-c)/n
f=2*2048*2883*1024
print(f'sgemm 1 thread: {f/dt/1e9:.1f} GFLOP/s wall, {f/dc/1e9:.1f} GFLOP/s per cpu-second')
