"""Sparse, low-precision CO2 splits: Jaccard, ms/image and MB against k and precision.

For a finished face run (default: faces300w-default), trains CO2 forests with
the run's chosen settings (the dense model folder's parameters: q, nu, eta,
depth, windows per tree...) on the run's windows, with sparse splits of at
most k features (``CO2Forest(max_nonzero=k, weight_dtype=..., sparsity=...)``),
and for each forest measures, on the run's own protocol:

* class-average Jaccard on the test images (``facesegment.evaluation.scoring.evaluate``,
  strict mode, the run's pixel stride), alpha chosen on the run's validation
  images like the pipeline does (``choose_alpha``);
* ms per 250x250 image (``predict_image``, every pixel, median over the first
  test images, after a warm-up), beside the peers timed in the same script:
  the run's dense model of the same kind and its axis-aligned forest, both cut
  to the same number of trees;
* MB of the model folder's arrays, and the gather bound: sparse nodes visited
  and window values gathered per image (``count_sparse_entries``), the
  achieved gathers per second, and the rate of a plain NumPy gather
  (``np.take`` of uint8 values at random offsets in an image-sized buffer) as
  the peer.

``--pools`` adds *pooled* forests (structured sparsity): co2-best's dense splits
over the window's s x s box means at stride s (``WindowLayout(pool=s)``, the
pipeline's ``co2-pooled``), in each ``--pool-dtypes`` precision; their cost is
reported as the FLOPs of their dot products (``count_oblique_visits`` x values
per split x 2).

Results are appended to ``reports/sparse/curve-<run>.json`` keyed by the
setting (the script resumes: settings already there are skipped), and a
Markdown table is written beside it.

    python -m studies.sparse_co2_curve [--run faces300w-default] [--trees 16]
        [--kinds co2-best co2] [--k 8 16 32 64 128] [--dtypes int8]
        [--extra "32:float16:learned" "32:float32:learned" "32:int8:prune"]
        [--pools 2 3 4 5] [--pool-dtypes float32 float16 int8]
        [--oblique-min-samples 200 100 50] [--pool-q p^0.8 all]
"""

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.evaluation import scoring as evaluation
from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.data.datasets import load_face
from facesegment.dense import count_oblique_visits, count_sparse_entries
from facesegment.layout import WindowLayout
from facesegment.modelio.model import save_model
from facesegment.models import load_model
from benchmarks.bench_cascade import _median_ms
from pipelines import backend
from pipelines.backend import records_from_json
from pipelines.config import q_features
from pipelines.common import forest_bytes

ALPHAS = [0.0, 0.25, 0.5, 0.75, 1.0]


def _numpy_gather_rate(n=20_000_000, size=280 * 280 * 3, seed=0):
    """Gathers per second of ``np.take`` (uint8 image, random offsets, float32 FMA)."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, size, dtype=np.uint8)
    off = rng.integers(0, size, n).astype(np.int64)
    w = rng.normal(size=n).astype(np.float32)
    t0 = time.perf_counter()
    float(np.dot(np.take(img, off).astype(np.float32), w))
    return n / (time.perf_counter() - t0)


def _timed(model, images, n_trees):
    from facesegment.dense import predict_image

    def one(im):
        return _median_ms(lambda: predict_image(model, im, n_trees=n_trees), 3)

    return float(np.median([one(im) for im in images]))


def _setting_name(kind, k, dtype, sparsity):
    return f"{kind}:k={k}:{dtype}:{sparsity}"


def _pooled_name(pool, dtype, oms=None, q=None):
    return (f"co2-pooled:pool={pool}:{dtype}" + ("" if oms is None else f":oms={oms}")
            + ("" if q is None else f":q={q}"))


def _measure(args, run, kind, k, dtype, sparsity, ws, splits, images, pool=1, oms=None,
             q_pool=None):
    dense = load_model(ROOT / "models" / run / f"{kind}-32")
    params = {key: v for key, v in dense.params.items()
              if key not in ("n_estimators", "n_jobs", "verbose", "scheduler")}
    layout = ws.meta.layout
    if pool > 1:   # dense splits over box means; q of the pooled values
        layout = WindowLayout(layout.window, layout.channels, layout.channel_names, pool)
        q = json.loads((ROOT / "reports" / "runs" / run / "chosen.json").read_text())
        params.update(weight_dtype=dtype,
                      max_features=q_features(q_pool or q["co2"]["q"], layout.n_features))
        if oms is not None:
            params["oblique_min_samples"] = oms
        target = "co2-pooled"
    else:
        params.update(max_nonzero=k, weight_dtype=dtype, sparsity=sparsity)
        target = kind if kind != "co2-best" else "co2-sparse"
    est = backend.make_estimator(target, params, args.trees, args.seed, workers=None)
    fit_s, cpu_s = backend.fit(est, ws, layout)
    model = backend.to_model(est, target, ws.meta,
                             {"run": run, "benchmark": "sparse_co2_curve"}, layout)
    alpha, jac = _score(model, splits, args.trees, args.seed)
    name = (_pooled_name(pool, dtype, oms, q_pool) if pool > 1
            else _setting_name(kind, k, dtype, sparsity))
    folder = _folder(run, name, args.trees)
    if folder.exists():
        shutil.rmtree(folder)
    save_model(model, folder)
    mb = forest_bytes(folder) / 1e6
    a = model.arrays
    row = {"kind": kind, "k": k, "dtype": dtype, "sparsity": sparsity, "n_trees": args.trees,
           "pool": pool, "test_jaccard": jac, "alpha": alpha,
           "oblique_min_samples": int(params["oblique_min_samples"]),
           "max_features": int(params.get("max_features") or 0),
           "model_mb": round(mb, 2),
           "fit_seconds": round(fit_s, 1), "fit_cpu_seconds": round(cpu_s, 1),
           "n_sparse_rows": int(a.sparse_ptr.shape[0] - 1) if a.sparse_ptr is not None else 0,
           "n_dense_rows": int(a.weights.shape[0]),
           "mean_nonzero": (round(float(np.diff(a.sparse_ptr).mean()), 2)
                            if a.sparse_ptr is not None and a.sparse_ptr.shape[0] > 1
                            else int(a.n_features)),
           "folder": str(folder.relative_to(ROOT))}
    row.update(_time_row(model, images, args.trees))
    return row


def _score(model, splits, n_trees, seed):
    """``(alpha, test Jaccard)``: alpha chosen on 20 seeded validation images, then
    the test split (strict, every 3rd pixel, forest alone)."""
    val = records_from_json(splits["validation"])
    rng = np.random.default_rng(seed + 2)
    val = [val[i] for i in sorted(rng.choice(len(val), min(20, len(val)), replace=False))]
    alpha = evaluation.choose_alpha(model, val, ALPHAS, pixel_stride=3, progress=False)
    test = records_from_json(splits["test"])
    res = evaluation.evaluate(model, test, alphas=[alpha["alpha"]], tree_counts=[n_trees],
                              pixel_stride=3, beta=0.0, progress=False)
    jac = res["trees"][str(n_trees)]["alpha"][repr(float(alpha["alpha"]))]["mean_jaccard"]
    return alpha["alpha"], round(float(jac), 3)


def _folder(run, name, n_trees):
    return ROOT / "models" / run / "sparse-curve" / f"{name.replace(':', '_')}-{n_trees}"


def _time_row(model, images, n_trees):
    """ms/image and the gather counts (sparse) or dot-product FLOPs (dense rows:
    a pooled model) of one model (timed now)."""
    ms = _timed(model, images, n_trees)
    visits, entries = count_sparse_entries(model, images[0])
    dense = count_oblique_visits(model, images[0])
    flops = 2 * dense * model.arrays.n_features
    return {"ms_per_image": round(ms, 1), "sparse_visits_per_image": visits,
            "gathers_per_image": entries, "gathers_per_second": round(entries / (ms / 1000.0)),
            "dense_visits_per_image": dense, "gflop_per_image": round(flops / 1e9, 3),
            "load_average": round(os.getloadavg()[0], 2)}


def _peers(args, run, kinds, splits, images, ws):
    out = {}
    test = records_from_json(splits["test"])
    for name in [f"{k}-32" for k in kinds] + ["axis-32"]:
        model = load_model(ROOT / "models" / run / name)
        alpha = float(model.metrics.get("alpha_no_prior", 0.5))
        res = evaluation.evaluate(model, test, alphas=[alpha], tree_counts=[args.trees],
                                  pixel_stride=3, beta=0.0, progress=False)
        jac = res["trees"][str(args.trees)]["alpha"][repr(alpha)]["mean_jaccard"]
        out[name.rsplit("-", 1)[0]] = {
            "n_trees": args.trees, "test_jaccard": round(float(jac), 3), "alpha": alpha,
            "ms_per_image": round(_timed(model, images, args.trees), 1),
            "model_mb_32_trees": round(forest_bytes(ROOT / "models" / run / name) / 1e6, 2)}
        print(f"peer {name}: {out[name.rsplit('-', 1)[0]]}", flush=True)
    return out


def _markdown(doc):
    lines = [f"Sparse CO2 on {doc['run']} ({doc['n_trees']} trees; test class-average "
             "Jaccard, strict mode, every 3rd pixel; alpha chosen on 20 validation images; "
             f"ms per 250x250 image on {doc['cpu_count']} cores).", "",
             "| forest | k | weights | support | Jaccard | ms/image | MB | gathers/image "
             "| Mgathers/s |", "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, p in doc["peers"].items():
        mb = p["model_mb_32_trees"] * doc["n_trees"] / 32
        lines.append(f"| {name} (dense, the run's model) | | | | {p['test_jaccard']:.2f} | "
                     f"{p['ms_per_image']:.0f} | {mb:.1f}* | | |")
    for name, r in sorted(doc["settings"].items(),
                          key=lambda nr: (nr[1].get("pool", 1), nr[1]["kind"], nr[1]["k"],
                                          nr[1]["dtype"], nr[1]["sparsity"], nr[0])):
        if r.get("pool", 1) > 1:
            oms = r.get("oblique_min_samples") if ":oms=" in name else None
            qset = name.split(":q=")[1] if ":q=" in name else None
            lines.append(f"| co2-best pooled | {r['mean_nonzero']} | {r['dtype']} | "
                         f"{r['pool']}x{r['pool']} boxes"
                         f"{'' if oms is None else f', oblique nodes >= {oms}'}"
                         f"{'' if qset is None else f', q = {qset}'} | "
                         f"{r['test_jaccard']:.2f} | "
                         f"{r['ms_per_image']:.0f} | {r['model_mb']:.1f} | "
                         f"{r['gflop_per_image']:.1f} GFLOP | |")
            continue
        lines.append(f"| {r['kind']} sparse | {r['k']} | {r['dtype']} | {r['sparsity']} | "
                     f"{r['test_jaccard']:.2f} | {r['ms_per_image']:.0f} | "
                     f"{r['model_mb']:.1f} | {r['gathers_per_image'] / 1e6:.1f} M | "
                     f"{r['gathers_per_second'] / 1e6:.0f} |")
    lines += ["", f"\\* the run's 32-tree folder scaled to {doc['n_trees']} trees.",
              f"Peer gather rate (np.take of uint8 at random offsets + float32 dot, one "
              f"thread): {doc['numpy_gathers_per_second'] / 1e6:.0f} M/s."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", default="faces300w-default")
    p.add_argument("--trees", type=int, default=16)
    p.add_argument("--kinds", nargs="+", default=["co2-best", "co2"])
    p.add_argument("--k", nargs="+", type=int, default=[8, 16, 32, 64, 128])
    p.add_argument("--dtypes", nargs="+", default=["int8"])
    p.add_argument("--extra", nargs="*", default=["32:float16:learned", "32:float32:learned",
                                                  "32:int8:prune"],
                   help="more co2-best settings k:dtype:sparsity")
    p.add_argument("--pools", nargs="*", type=int, default=[],
                   help="pooled co2-best forests (box side = stride), e.g. 2 3 4 5")
    p.add_argument("--pool-dtypes", nargs="+", default=["float32"],
                   help="precisions of the pooled forests' dense weights")
    p.add_argument("--oblique-min-samples", nargs="+", type=int, default=[None],
                   help="the pooled forests' oblique_min_samples (default: the run's)")
    p.add_argument("--pool-q", nargs="+", default=[None],
                   help="the pooled forests' q (e.g. p^0.8; default: the run's CO2 q)")
    p.add_argument("--only-pools", action="store_true",
                   help="measure only the pooled settings (not the sparse grid)")
    p.add_argument("--images", type=int, default=3, help="test images timed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rescore", action="store_true",
                   help="re-score (alpha, test Jaccard) and re-time the saved models of the "
                        "settings already measured (with --only-pools: the pooled ones) and "
                        "re-time the peers, e.g. after a change of the dense-inference kernels")
    p.add_argument("--retime", action="store_true",
                   help="only re-time the settings already measured (with --only-pools: the "
                        "pooled ones) and the peers, e.g. on a quiet machine or after a kernel "
                        "change; their models are in models/RUN/sparse-curve/")
    args = p.parse_args(argv)
    run = args.run
    rdir = ROOT / "reports" / "runs" / run
    splits = json.loads((rdir / "splits.json").read_text())
    out = ROOT / "reports" / "sparse" / f"curve-{run}.json"
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc.update(run=run, n_trees=args.trees, cpu_count=os.cpu_count())
    doc.setdefault("settings", {})
    ws = backend.read_windows(ROOT / "data" / "windows" / run / "train.h5")
    images = [load_face(r)[0] for r in records_from_json(splits["test"][:args.images])]
    if args.rescore:
        for name, row in doc["settings"].items():
            if args.only_pools and row.get("pool", 1) == 1:
                continue
            model = load_model(ROOT / row["folder"])
            before = (row["alpha"], row["test_jaccard"])
            row["alpha"], row["test_jaccard"] = _score(model, splits, row["n_trees"], args.seed)
            row.update(_time_row(model, images, row["n_trees"]))
            print(f"rescored {name}: (alpha, Jaccard) {before} -> "
                  f"{(row['alpha'], row['test_jaccard'])}; {row['ms_per_image']} ms", flush=True)
        doc.pop("peers", None)    # re-timed beside the settings, as --retime does
    if args.retime:
        for name, row in doc["settings"].items():
            if args.only_pools and row.get("pool", 1) == 1:
                continue
            row.update(_time_row(load_model(ROOT / row["folder"]), images, row["n_trees"]))
            print(f"retimed {name}: {row['ms_per_image']} ms", flush=True)
        doc.pop("peers", None)
    if "peers" not in doc or doc.get("peer_trees") != args.trees:
        doc["peers"] = _peers(args, run, args.kinds, splits, images, ws)
        doc["peer_trees"] = args.trees
        doc["numpy_gathers_per_second"] = round(_numpy_gather_rate())
    sparse_plan = args.retime or args.rescore or args.only_pools
    plan = [] if sparse_plan else [(kind, k, dt, "learned", 1, (None, None)) for kind in args.kinds
                                   for k in args.k for dt in args.dtypes]
    for e in ([] if sparse_plan else args.extra):
        k, dt, sp = e.split(":")
        plan.append((args.kinds[0], int(k), dt, sp, 1, (None, None)))
    if not (args.retime or args.rescore):
        plan += [("co2-best", 0, dt, "dense", s, (oms, q)) for s in args.pools
                 for dt in args.pool_dtypes for oms in args.oblique_min_samples
                 for q in args.pool_q]
    t_start = time.perf_counter()
    for i, (kind, k, dt, sp, pool, (oms, q)) in enumerate(plan):
        name = _pooled_name(pool, dt, oms, q) if pool > 1 else _setting_name(kind, k, dt, sp)
        if name in doc["settings"] and doc["settings"][name]["n_trees"] == args.trees:
            continue
        print(f"[{i + 1}/{len(plan)}] {name}: training {args.trees} trees "
              f"({time.perf_counter() - t_start:.0f} s elapsed)", flush=True)
        doc["settings"][name] = _measure(args, run, kind, k, dt, sp, ws, splits, images,
                                         pool, oms, q)
        print(f"  {doc['settings'][name]}", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out, doc, sort_keys=True)
        write_text_atomic(out.with_suffix(".md"), _markdown(doc))
    write_json_atomic(out, doc, sort_keys=True)
    write_text_atomic(out.with_suffix(".md"), _markdown(doc))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
