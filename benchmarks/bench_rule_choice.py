"""Choosing a decision rule (alpha and the position prior's beta) on validation
faces: one dense pass per face for every (beta, alpha)
(:func:`facesegment.evaluation.calibrate.choose_rule` as it is) against the
peer, one full evaluation pass per beta (``scoring.evaluate`` per beta, the
way rules were chosen before), on the shipped two-probe forest with its
position prior and labelled faces300w training crops.

Both take the pipeline's settings (``[select]``: alphas 0..1 by 0.25, a 3x3
pixel grid, strict mode; ``[position] betas``) and must give the same rule and
the same recorded scores (checked).  They take turns, ``--repeats`` times, so
that a change in the machine's load falls on both alike; the median seconds
and the ratio go to ``reports/bench/rule_choice.json`` with the load average
(on a shared machine absolute times are pessimistic, the ratio less so).

    python -m benchmarks.bench_rule_choice --faces 20
"""

import argparse
import json
import os
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "faces300w", "train")
ALPHAS = [0.0, 0.25, 0.5, 0.75, 1.0]
BETAS = [0.25, 0.5, 0.75, 1.0]


def per_beta(model, records, *, alphas, betas, n_trees=None, mode="strict", pixel_stride=1,
             workers=None, scheduler=None, desc="betas", progress=True):
    """The peer: one ``evaluate`` pass over the faces per beta."""
    from facesegment.evaluation.scoring import evaluate

    n = model.arrays.n_trees if n_trees is None else n_trees
    return [evaluate(model, records, alphas=alphas, tree_counts=[n], mode=mode,
                     pixel_stride=pixel_stride, beta=b, workers=workers, scheduler=scheduler,
                     progress=False) for b in betas]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv=None):
    from facesegment.api import load_model
    from facesegment.data.datasets import find_faces
    from facesegment.evaluation import scoring
    from facesegment.evaluation.calibrate import choose_rule
    from facesegment.models import FOREST

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--faces", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--out", default=os.path.join(ROOT, "reports", "bench", "rule_choice.json"))
    args = ap.parse_args(argv)
    model = load_model(FOREST)
    recs = [r for r in find_faces(args.data) if r.label is not None]
    pick = np.random.default_rng(0).choice(len(recs), size=min(args.faces, len(recs)),
                                           replace=False)
    recs = [recs[i] for i in sorted(pick)]
    kw = dict(alphas=ALPHAS, betas=BETAS, mode="strict", pixel_stride=3, progress=False)
    new = lambda: choose_rule(model, recs, **kw)  # noqa: E731
    real = scoring.evaluate_betas

    def old():
        scoring.evaluate_betas = per_beta
        try:
            return choose_rule(model, recs, **kw)
        finally:
            scoring.evaluate_betas = real
    choose_rule(model, recs[:1], **kw)           # kernels compiled, untimed
    t_new, t_old = [], []
    for _ in range(args.repeats):
        s, res_old = _timed(old)
        t_old.append(s)
        s, res_new = _timed(new)
        t_new.append(s)
        if res_new != res_old:
            raise SystemExit("the one-pass choice differs from the per-beta choice")
    rule, record = res_new
    res = {"model": os.path.basename(FOREST), "n_faces": len(recs), "alphas": ALPHAS,
           "betas": [0.0] + BETAS, "pixel_stride": 3, "mode": "strict",
           "rule": {"alpha": rule.alpha, "beta": rule.beta}, "identical": True,
           "seconds_one_pass": round(float(np.median(t_new)), 2),
           "seconds_per_beta": round(float(np.median(t_old)), 2),
           "ratio_per_beta_to_one_pass": round(float(np.median(t_old) / np.median(t_new)), 2),
           "repeats": args.repeats,
           "load_average": [round(v, 2) for v in os.getloadavg()], "cpu_count": os.cpu_count()}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
