"""Sample class-balanced 31x31 windows from a faces300w split (tuning data for CO2).

Usage (from the repository root)::

    nice .venv/bin/python studies/co2/sample_windows.py IMAGE_DIR N_IMAGES PER_CLASS OUT.npz SEED

e.g. ``studies/co2/sample_windows.py ../shared/data/faces300w/train 600 6000 win48k.npz 0``.
Picks N_IMAGES random images, up to PER_CLASS windows per class, and saves
``X`` (uint8 windows), ``y``, ``mean`` and ``std`` to OUT.npz; a bare file name
is written under ``data/bench/``. Used by docs/studies/co2.md.
"""
import sys

import numpy as np

from _paths import bench_path
from facesegment.data.datasets import find_faces, load_face
from facesegment.classes import HALF, N_CLASSES

root, n_img, per_class, out, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
out = bench_path(out, create=True)
rng = np.random.default_rng(seed)
recs = find_faces(root)
recs = [recs[i] for i in rng.choice(len(recs), n_img, replace=False)]
per_img = -(-per_class // n_img)
Xs, ys = [], []
for rec in recs:
    img, lab = load_face(rec)
    H, W = lab.shape
    inner = lab[HALF:H-HALF, HALF:W-HALF]
    for k in range(N_CLASSES):
        rr, cc = np.nonzero(inner == k)
        if len(rr) == 0: continue
        sel = rng.choice(len(rr), min(per_img, len(rr)), replace=False)
        for r, c in zip(rr[sel] + HALF, cc[sel] + HALF):
            Xs.append(img[r-HALF:r+HALF+1, c-HALF:c+HALF+1].reshape(-1)); ys.append(k)
X = np.stack(Xs); y = np.array(ys, np.int32)
keep = []
for k in range(N_CLASSES):
    ik = np.nonzero(y == k)[0]
    keep.append(rng.choice(ik, min(per_class, len(ik)), replace=False))
keep = rng.permutation(np.concatenate(keep))
X, y = np.ascontiguousarray(X[keep]), y[keep]
np.savez(out, X=X, y=y, mean=X.mean(0).astype(np.float32), std=X.std(0).astype(np.float32))
print(X.shape, np.bincount(y))
