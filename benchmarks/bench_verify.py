"""Cost of proving a forest safe (facesegment.forest._verify.verify_forest) beside
the SHA-256 check that load_model already runs over the same bytes.

A synthetic forest of complete binary trees (axis splits over the paper's 2883
features, 8 classes) plus dense float16 oblique weights, about the size of the
largest models the pipeline writes.  Prints milliseconds (best of --repeat)
and the ratio verify / SHA-256.

    python -m benchmarks.bench_verify [--trees 16] [--depth 18] [--oblique 2000]
"""

import argparse
import hashlib
import time

import numpy as np

from facesegment.forest._arrays import ForestArrays
from facesegment.forest._verify import verify_forest


def synthetic_forest(n_trees, depth, n_oblique, n_features=2883, n_classes=8):
    per = 2 ** depth - 1
    idx = np.arange(per)
    kid = np.where(2 * idx + 1 < per, 2 * idx + 1, -1)
    left = np.concatenate([np.where(kid >= 0, kid + t * per, -1) for t in range(n_trees)])
    left = left.astype(np.int32)
    n = left.shape[0]
    return ForestArrays(
        roots=(np.arange(n_trees) * per).astype(np.int32), left=left,
        right=np.where(left >= 0, left + 1, -1).astype(np.int32),
        feature=np.where(left >= 0, np.arange(n) % n_features, -1).astype(np.int32),
        feature2=np.full(n, -1, np.int32), oblique=np.full(n, -1, np.int32),
        threshold=np.zeros(n, np.float32),
        value=np.full((n, n_classes), 1.0 / n_classes, np.float32),
        depth=np.tile(np.floor(np.log2(idx + 1)).astype(np.int32), n_trees),
        n_samples=np.ones(n, np.int32),
        weights=np.zeros((n_oblique, n_features), np.float16))


def best_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", type=int, default=16)
    ap.add_argument("--depth", type=int, default=18)
    ap.add_argument("--oblique", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    fa = synthetic_forest(args.trees, args.depth, args.oblique)
    arrays = [a for a in fa if a is not None]
    mb = sum(a.nbytes for a in arrays) / 1e6

    def sha():
        h = hashlib.sha256()
        for a in arrays:
            h.update(memoryview(a).cast("B"))
        return h.hexdigest()

    t_verify = best_ms(lambda: verify_forest(fa), args.repeat)
    t_sha = best_ms(sha, args.repeat)
    print(f"{fa.n_nodes} nodes, {fa.n_trees} trees, {args.oblique} oblique rows: {mb:.0f} MB of "
          f"arrays")
    print(f"verify_forest {t_verify:.0f} ms, SHA-256 of the same bytes {t_sha:.0f} ms, "
          f"ratio {t_verify / t_sha:.2f}")


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
