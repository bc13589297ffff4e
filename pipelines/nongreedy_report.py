"""Tables and figure of ``python -m pipelines.nongreedy`` (rendered from the unit files)."""

from pathlib import Path

from facesegment.atomic import write_json_atomic, write_text_atomic

LABELS = {"cart": "sklearn CART", "axis": "greedy axis", "co2": "greedy CO2",
          "ng-axis": "non-greedy (axis init)", "ng-co2": "non-greedy (CO2 init)",
          "rf": "random forest", "co2-forest": "CO2 forest", "ng-forest": "non-greedy forest"}


def _clean(rec):
    return {k: v for k, v in rec.items() if k not in ("key", "grid")}


def tree_table(trees, dataset, what):
    """Markdown table: depth x method of ``what`` (test_acc / train_acc), best test in bold."""
    rows = [r for r in trees if r["dataset"] == dataset]
    methods = [m for m in LABELS if any(r["method"] == m for r in rows)]
    depths = sorted({r["depth"] for r in rows})
    by = {(r["depth"], r["method"]): r for r in rows}
    lines = ["| depth | " + " | ".join(LABELS[m] for m in methods) + " |",
             "|---:|" + "---:|" * len(methods)]
    for d in depths:
        vals = [by[(d, m)][what] if (d, m) in by else None for m in methods]
        top = max(v for v in vals if v is not None)
        cells = ["" if v is None else (f"**{100 * v:.2f}**" if v == top and what == "test_acc"
                                       else f"{100 * v:.2f}") for v in vals]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chosen_table(trees, dataset):
    rows = [r for r in trees if r["dataset"] == dataset and r["method"].startswith("ng-")]
    lines = ["| depth | method | chosen | fit s | s/epoch | LAI samples/s | leaves (active) |",
             "|---:|---|---|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r["depth"], r["method"])):
        st = r.get("stats") or {}
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items())
        lines.append(f"| {r['depth']} | {r['method']} | {params} | {r['fit_seconds']:.1f} | "
                     f"{st.get('sgd_seconds_per_epoch', 0):.2f} | "
                     f"{st.get('lai_samples_per_s', 0):,.0f} | "
                     f"{st.get('n_leaves')} ({st.get('active_leaves')}) |")
    return "\n".join(lines)


def forest_table(forests, dataset):
    rows = [r for r in forests if r["dataset"] == dataset]
    if not rows:
        return ""
    ks = list(rows[0]["test_acc"])
    lines = ["| forest (depth %d) | " % rows[0]["depth"]
             + " | ".join(f"test {k} trees" for k in ks) + " | train (all) | fit s |",
             "|---|" + "---:|" * (len(ks) + 2)]
    for r in rows:
        lines.append(f"| {LABELS[r['kind']]} | "
                     + " | ".join(f"{100 * r['test_acc'][k]:.2f}" for k in ks)
                     + f" | {100 * r['train_acc'][ks[-1]]:.2f} | {r['fit_seconds']:.1f} |")
    return "\n".join(lines)


def figure(trees, path):
    from facesegment.evaluation.figures import save_figure, subplots

    names = sorted({r["dataset"] for r in trees})
    ncol = min(3, len(names))
    nrow = -(-len(names) // ncol)
    fig, axes = subplots(nrow, ncol, figsize=(4.6 * ncol, 3.8 * nrow), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names):
        rows = [r for r in trees if r["dataset"] == name]
        for i, m in enumerate(m for m in LABELS if any(r["method"] == m for r in rows)):
            rs = sorted((r for r in rows if r["method"] == m), key=lambda r: r["depth"])
            d = [r["depth"] for r in rs]
            color = f"C{i}"
            ax.plot(d, [100 * r["test_acc"] for r in rs], "-o", color=color, ms=3,
                    label=LABELS[m])
            ax.plot(d, [100 * r["train_acc"] for r in rs], "--", color=color, lw=0.8)
        ax.set_title(f"{name} (solid: test, dashed: train)", fontsize=9)
        ax.set_xlabel("tree depth")
        ax.set_ylabel("accuracy (%)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def render(out, cfg, trees, forests, argv):
    out = Path(out)
    write_json_atomic(out / "results.json", {"settings": cfg, "argv": argv,
                                             "trees": [_clean(r) for r in trees],
                                             "forests": [_clean(r) for r in forests]})
    parts = ["# Non-greedy trees: results", "",
             "Rendered by `python -m pipelines.nongreedy` from the unit files under runs/.", ""]
    for name in sorted({r["dataset"] for r in trees} | {r["dataset"] for r in forests}):
        parts += [f"## {name}", ""]
        if any(r["dataset"] == name for r in trees):
            parts += ["Test accuracy (%), single tree:", "", tree_table(trees, name, "test_acc"),
                      "", "Training accuracy (%):", "", tree_table(trees, name, "train_acc"),
                      "", "Non-greedy settings and timing (final fit on the whole training "
                      "set):", "", chosen_table(trees, name), ""]
        ft = forest_table(forests, name)
        if ft:
            parts += ["Forests:", "", ft, ""]
    write_text_atomic(out / "tables.md", "\n".join(parts))
    if trees:
        figure(trees, out / "nongreedy.png")
