"""The paper's Figures 3 and 4 (Norouzi et al., NIPS 2015) for the non-greedy trees.

``--figure 3``: number of active leaves (leaves reached by at least one
training point) of non-greedy trees trained on MNIST, against the
regularisation constant ``nu``, one panel per depth, with the leaf count of
the axis-aligned initial tree as the dotted baseline (the paper's Figure 3).
Each point is one ``NonGreedyTree(max_depth=d, init="axis", nu=nu, eta=eta)``
fitted on the training images (all 60,000 unless ``--max-rows``), plain SGD,
20 epochs, leaf refit (the estimator's defaults); also its training and test
accuracy, final surrogate and time.  Writes ``reports/nongreedy/figure3.json``,
``.md`` and ``.png``.

``--figure 4``: time of ``--epochs`` SGD epochs with the fast loss-augmented
inference (``sgd_pass``, Eq. 13) against the exact one
(``sgd_pass_exact``, every internal node's activation and every leaf scored)
for trees of increasing depth (the paper's Figure 4 used Connect4, which is not
in ../shared/data/uci: default letter, 15,000 training rows).  Two exact
variants: ``full`` (all bit vectors, Eq. 10: the paper's baseline, a different
bound, so its trajectory differs) and ``ball`` (the Hamming ball of radius 1,
the same bound and updates as the fast pass: the cost of the inference alone).
Every variant starts from the same greedy tree (axis-aligned, grown by
``NonGreedyTree`` itself) and visits the samples in the same order; times are
CPU seconds of this process (one thread) and wall seconds, the speed-up the
ratio within this run.  A variant whose time exceeds ``--limit`` seconds at one
depth is not run at larger depths.  Writes ``reports/nongreedy/figure4.json``,
``.md`` and ``.png`` (``--name``: other names).

    python -m benchmarks.nongreedy_figures --figure 3 [--depths 10 13 16]
        [--nus 0.1 1 4 10 43 100 1000] [--eta 0.1] [--max-rows N]
    python -m benchmarks.nongreedy_figures --figure 4 [--dataset letter]
        [--depths 2 4 ... 16] [--epochs 2] [--limit 60] [--variants fast ball full]
    python -m benchmarks.nongreedy_figures --figure 3 --replot   # md/png from the JSON
"""

import argparse
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from facesegment.atomic import write_json_atomic, write_text_atomic
from facesegment.evaluation.figures import save_figure
from facesegment.forest import NonGreedyTree
from facesegment.forest import nongreedy as ng
from facesegment.forest._nongreedy_exact import sgd_pass_exact
from facesegment.forest._nongreedy_kernels import sgd_pass
from pipelines.uci_data import load_dataset

OUT = ROOT / "reports" / "nongreedy"
VARIANTS = {"fast": "fast (Eq. 13, pruned)", "ball": "exact, radius-1 ball (same updates)",
            "full": "exact, all bit vectors (Eq. 10)"}


def _subset(X, y, max_rows, seed):
    """A seeded random subset of ``max_rows`` rows (all of them when None)."""
    if max_rows is None or max_rows >= X.shape[0]:
        return X, y
    idx = np.sort(np.random.default_rng(seed).choice(X.shape[0], max_rows, replace=False))
    return np.ascontiguousarray(X[idx]), y[idx]


def _load(root, name, max_rows, seed):
    ds = load_dataset(Path(root) / name)
    X, y = _subset(ds.X, ds.y, max_rows, seed)
    return ds, X, y


def _warm_up():
    """Compile (or load from Numba's cache) every kernel used, outside the timings."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    NonGreedyTree(max_depth=3, n_epochs=1).fit(X, y)
    prob = initial_problem(X, y, 3, "axis", 1.0, 0)
    for kind in VARIANTS:
        run_epochs(kind, prob, 0.1, 0.9, 1.0, 128, 1, 0)


def _load_line(t0):
    la = os.getloadavg()
    return f"{time.perf_counter() - t0:6.0f} s, load {la[0]:.1f}"


# ---------------------------------------------------------------- figure 3

def figure3(args):
    t0 = time.perf_counter()
    ds, X, y = _load(args.root, "mnist", args.max_rows, args.seed)
    _warm_up()
    rows = []
    total = len(args.depths) * len(args.nus)
    print(f"figure 3: MNIST, {X.shape[0]} training images, depths {args.depths}, "
          f"nu {args.nus}, eta {args.eta}, {args.epochs} epochs", flush=True)
    for depth in args.depths:
        for nu in args.nus:
            c0, w0 = time.process_time(), time.perf_counter()
            est = NonGreedyTree(max_depth=depth, init=args.init, nu=nu, eta=args.eta,
                                n_epochs=args.epochs, ssgd_refresh=args.ssgd_refresh,
                                random_state=args.seed).fit(X, y)
            st = est.tree_stats_[0]
            ev = [e for e in st["epochs"] if "surrogate" in e]
            row = {"depth": depth, "nu": nu, "n_leaves": st["n_leaves"],
                   "init_active_leaves": ev[0]["active_leaves"],
                   "active_leaves": ev[-1]["active_leaves"],
                   "active_per_refresh": [e["active_leaves"] for e in ev],
                   "surrogate": ev[-1]["surrogate"], "loss": ev[-1]["loss"],
                   "train_acc": float(est.score(X, y)),
                   "test_acc": float(est.score(ds.X_test, ds.y_test)),
                   "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0,
                   "t_init": st["t_init"], "t_sgd": st["t_sgd"]}
            rows.append(row)
            print(f"[{len(rows)}/{total}] depth {depth} nu {nu:g}: {row['active_leaves']} of "
                  f"{row['n_leaves']} leaves active (init {row['init_active_leaves']}), "
                  f"test {100 * row['test_acc']:.2f} %, {row['cpu_s']:.1f} s cpu "
                  f"[{_load_line(t0)}]", flush=True)
    out = {"figure": 3, "args": vars(args), "n_train": int(X.shape[0]),
           "sha256": ds.sha256, "rows": rows, "seconds": time.perf_counter() - t0,
           "load_end": os.getloadavg()}
    _write(out, args.name, figure3_table, plot_figure3)


def _write(out, name, table, plot):
    """OUT/NAME.json, .md (``table(out)``) and .png (``plot(out, path)``)."""
    write_json_atomic(OUT / f"{name}.json", out)
    write_text_atomic(OUT / f"{name}.md", table(out))
    plot(out, OUT / f"{name}.png")
    print(f"wrote {OUT / name}.json, .md, .png ({out['seconds']:.0f} s)")


def figure3_table(out):
    a = out["args"]
    lines = [f"Active leaves (reached by at least one of the {out['n_train']:,} MNIST training "
             f"images) against nu; `init={a['init']}`, eta={a['eta']}, {a['epochs']} epochs, "
             f"ssgd_refresh={a['ssgd_refresh']}, seed {a['seed']}.", ""]
    for depth in sorted({r["depth"] for r in out["rows"]}):
        rs = [r for r in out["rows"] if r["depth"] == depth]
        lines += [f"Depth {depth} (the initial tree: {rs[0]['n_leaves']} leaves, "
                  f"{rs[0]['init_active_leaves']} active):", "",
                  "| nu | active leaves | % of init | train % | test % | surrogate | cpu s |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rs:
            lines.append(f"| {r['nu']:g} | {r['active_leaves']} | "
                         f"{100 * r['active_leaves'] / r['init_active_leaves']:.0f} | "
                         f"{100 * r['train_acc']:.2f} | {100 * r['test_acc']:.2f} | "
                         f"{r['surrogate']:.3f} | {r['cpu_s']:.1f} |")
        lines.append("")
    return "\n".join(lines)


def plot_figure3(out, path):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    depths = sorted({r["depth"] for r in out["rows"]})
    fig, axes = plt.subplots(1, len(depths), figsize=(4 * len(depths), 3.4), squeeze=False)
    for ax, depth in zip(axes[0], depths):
        rs = sorted((r for r in out["rows"] if r["depth"] == depth), key=lambda r: r["nu"])
        ax.plot([r["nu"] for r in rs], [r["active_leaves"] for r in rs], "o-", color="C0",
                label="non-greedy (SGD)")
        ax.axhline(rs[0]["init_active_leaves"], ls=":", color="k",
                   label="axis-aligned init")
        ax.set_xscale("log")
        ax.set_xlabel("regularisation parameter nu")
        ax.set_title(f"tree depth = {depth}")
        ax.set_ylim(0, rs[0]["init_active_leaves"] * 1.1)
    axes[0][0].set_ylabel("number of active leaves")
    axes[0][0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"MNIST ({out['n_train']:,} training images)", fontsize=10, y=1.03)
    save_figure(fig, path)


# ---------------------------------------------------------------- figure 4

def initial_problem(X, y, depth, init, nu, seed):
    """The greedy initial tree as the SGD kernels see it (``Z``, ``y``, tree
    tables ``tb``, ``W``, ``Theta``), built by ``NonGreedyTree``'s own code
    (``n_epochs=0``): ``train_tree`` is wrapped during that one fit to keep
    its arguments."""
    got = {}
    real = ng.train_tree

    def keep(Z, ys, n_classes, tb, W, Theta, opt, rng):
        got.update(Z=Z, y=ys, tb=tb, W=W.copy(), Theta=Theta.copy())
        return real(Z, ys, n_classes, tb, W, Theta, opt, rng)

    ng.train_tree = keep
    try:
        NonGreedyTree(max_depth=depth, init=init, nu=nu, n_epochs=0,
                      random_state=seed).fit(X, y)
    finally:
        ng.train_tree = real
    return got


def run_epochs(kind, prob, eta, mu, nu, batch, epochs, seed):
    """``epochs`` SGD passes of variant ``kind`` from the initial tree ``prob``;
    the sample orders depend only on ``seed``.  Returns times and counters."""
    Z, y, tb = prob["Z"], prob["y"], prob["tb"]
    W, Theta = prob["W"].copy(), prob["Theta"].copy()
    V, VT = np.zeros_like(W), np.zeros_like(Theta)
    G, GT = np.zeros_like(W), np.zeros_like(Theta)
    last = np.full(W.shape[0], -1, np.int64)
    flag = np.zeros(W.shape[0], np.bool_)
    counters = np.zeros(4, np.int64)
    assign = np.full(Z.shape[0], -1, np.int32)
    rng = np.random.default_rng(seed)
    t, cpu, wall, sur = 0, 0.0, 0.0, []
    for _ in range(epochs):
        order = rng.permutation(Z.shape[0]).astype(np.int64)
        a = (Z, y, order, assign, W, V, last, Theta, VT, *ng._tables_args(tb),
             np.float32(eta), mu, nu, batch, t, G, GT, flag, counters)
        c0, w0 = time.process_time(), time.perf_counter()
        t, total = sgd_pass(*a) if kind == "fast" else sgd_pass_exact(*a, kind == "full")
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        sur.append(total / Z.shape[0])
    n = epochs * Z.shape[0]
    return {"cpu_s": cpu, "wall_s": wall, "dots_per_sample": counters[0] / n,
            "alternatives_per_sample": counters[1] / n, "steps": int(counters[3]),
            "epoch_surrogates": sur, "W": W, "Theta": Theta}


def figure4(args):
    t0 = time.perf_counter()
    ds, X, y = _load(args.root, args.dataset, args.max_rows, args.seed)
    _warm_up()
    print(f"figure 4: {args.dataset}, {X.shape[0]} training rows x {X.shape[1]} features, "
          f"depths {args.depths}, {args.epochs} epochs, variants {args.variants}", flush=True)
    rows, stopped = [], set()
    for depth in args.depths:
        prob = initial_problem(X, y, depth, args.init, args.nu, args.seed)
        row = {"depth": depth, "max_depth": int(prob["tb"]["path_len"].max()),
               "n_internal": int(prob["W"].shape[0]), "n_leaves": int(prob["Theta"].shape[0])}
        res = {}
        for kind in args.variants:
            if kind in stopped:
                row[kind] = None
                continue
            r = run_epochs(kind, prob, args.eta, args.momentum, args.nu, args.batch_size,
                           args.epochs, args.seed)
            res[kind] = r
            row[kind] = {k: v for k, v in r.items() if k not in ("W", "Theta")}
            if r["cpu_s"] > args.limit:
                stopped.add(kind)
        if "fast" in res and "ball" in res:  # same bound, same orders: same updates
            row["ball_vs_fast_max_abs_dW"] = float(np.abs(res["ball"]["W"]
                                                          - res["fast"]["W"]).max())
        rows.append(row)
        times = ", ".join(f"{k} {row[k]['cpu_s']:.3g} s" for k in args.variants
                          if row.get(k))
        ratio = "".join(f", {k}/fast x{row[k]['cpu_s'] / row['fast']['cpu_s']:.1f}"
                        for k in args.variants if k != "fast" and row.get(k)
                        and row.get("fast"))
        print(f"[{len(rows)}/{len(args.depths)}] depth {depth} ({row['n_internal']} internal "
              f"nodes, {row['n_leaves']} leaves): {times}{ratio} [{_load_line(t0)}]",
              flush=True)
    out = {"figure": 4, "args": vars(args), "dataset": args.dataset,
           "n_train": int(X.shape[0]), "n_features": int(X.shape[1]), "sha256": ds.sha256,
           "rows": rows, "seconds": time.perf_counter() - t0, "load_end": os.getloadavg()}
    _write(out, args.name, figure4_table, plot_figure4)


def figure4_table(out):
    a = out["args"]
    kinds = a["variants"]
    lines = [f"CPU seconds of {a['epochs']} SGD epochs on {out['dataset']} ({out['n_train']:,} "
             f"rows x {out['n_features']} features; nu={a['nu']:g}, eta={a['eta']:g}, "
             f"momentum {a['momentum']:g}, batches of {a['batch_size']}); speed-up = exact / "
             "fast in this run; per sample and epoch, the fast pass computes the dot products "
             "of its path plus those of the alternative descents (pruned), the exact ones every "
             "internal node's.", "",
             "| depth | internal nodes | leaves | "
             + " | ".join(f"{k} s" for k in kinds)
             + "".join(f" | {k} / fast" for k in kinds if k != "fast")
             + " | fast: path dots + descents | exact: dots |",
             "|---:|---:|---:|" + "---:|" * len(kinds) + "---:|" * (len(kinds) - 1)
             + "---:|---:|"]
    for r in out["rows"]:
        cells = [str(r["depth"]), str(r["n_internal"]), str(r["n_leaves"])]
        cells += [f"{r[k]['cpu_s']:.3g}" if r.get(k) else "-" for k in kinds]
        cells += [f"{r[k]['cpu_s'] / r['fast']['cpu_s']:.1f}" if r.get(k) and r.get("fast")
                  else "-" for k in kinds if k != "fast"]
        ex = next((r[k] for k in ("full", "ball") if r.get(k)), None)
        cells += [f"{r['fast']['dots_per_sample']:.1f} + {r['fast']['alternatives_per_sample']:.2f}"
                  if r.get("fast") else "-",
                  f"{ex['dots_per_sample']:.0f}" if ex else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_figure4(out, path):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    styles = {"fast": "o-", "ball": "s--", "full": "^-"}
    for kind in out["args"]["variants"]:
        rs = [r for r in out["rows"] if r.get(kind)]
        ax.plot([r["depth"] for r in rs], [r[kind]["cpu_s"] for r in rs], styles[kind],
                label=VARIANTS[kind])
    ax.set_yscale("log")
    ax.set_xlabel("tree depth")
    ax.set_ylabel(f"CPU seconds, {out['args']['epochs']} epochs")
    ax.set_title(f"SGD on {out['dataset']} ({out['n_train']:,} rows)", fontsize=10)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--figure", type=int, required=True, choices=(3, 4))
    p.add_argument("--root", default=str(ROOT.parent / "shared" / "data" / "uci"))
    p.add_argument("--depths", nargs="+", type=int, default=None,
                   help="figure 3: 10 13 16 (the paper's); figure 4: 2 4 ... 16")
    p.add_argument("--nus", nargs="+", type=float, default=[0.1, 1, 4, 10, 43, 100, 1000])
    p.add_argument("--nu", type=float, default=100.0, help="figure 4")
    p.add_argument("--eta", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9, help="figure 4")
    p.add_argument("--batch-size", type=int, default=128, help="figure 4")
    p.add_argument("--epochs", type=int, default=None, help="figure 3: 20; figure 4: 2")
    p.add_argument("--ssgd-refresh", type=int, default=0, help="figure 3")
    p.add_argument("--init", default="axis", choices=("axis", "co2"))
    p.add_argument("--dataset", default="letter", help="figure 4 (figure 3: mnist)")
    p.add_argument("--max-rows", type=int, default=None,
                   help="a seeded random subset of the training rows")
    p.add_argument("--limit", type=float, default=60.0,
                   help="figure 4: a variant over this many seconds stops")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default=None,
                   help="output files reports/nongreedy/NAME.{json,md,png} (default: "
                        "figure3 / figure4)")
    p.add_argument("--replot", action="store_true",
                   help="redraw NAME.md and NAME.png from NAME.json")
    args = p.parse_args(argv)
    args.name = args.name or f"figure{args.figure}"
    if args.replot:  # tables and figure again from the JSON, nothing recomputed
        import json

        out = json.loads((OUT / f"{args.name}.json").read_text())
        table, plot = ((figure3_table, plot_figure3) if args.figure == 3
                       else (figure4_table, plot_figure4))
        write_text_atomic(OUT / f"{args.name}.md", table(out))
        plot(out, OUT / f"{args.name}.png")
        print(f"wrote {OUT / args.name}.md, .png")
        return
    if args.figure == 3:
        args.depths = args.depths or [10, 13, 16]
        args.epochs = 20 if args.epochs is None else args.epochs
        figure3(args)
    else:
        args.depths = args.depths or list(range(2, 17, 2))
        args.epochs = 2 if args.epochs is None else args.epochs
        if "fast" not in args.variants:
            args.variants = ["fast"] + args.variants
        figure4(args)


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        main()
