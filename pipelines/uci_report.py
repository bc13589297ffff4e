"""Pages and figures of the UCI harness, rendered only from its result files.

``write_reports(out, docs=None)`` reads ``OUT/NAME/{select,test,big}-KIND.json``
and ``OUT/timings.json`` and writes:

* ``OUT/results.md``: Table I in the paper's form (datasets as rows, our
  random forest, CO2 and CO2 + two-probe init at 10 / 30 / 1000 trees with the
  paper's numbers beside ours), every kind's test error, the chosen settings,
  and the Figure 2 curves.  No measured time: the same files give the same bytes.
* ``OUT/timings.md``: fit and test times per forest and per tree, against
  scikit-learn's forests on the same data.
* ``OUT/figures/NAME.png``: test error vs (log) number of trees (Figure 2).
* the results section of ``docs`` (docs/uci.md), between the markers
  :data:`BEGIN` and :data:`END`.

``python -m pipelines.uci_report [OUT]`` renders them again.
"""

import json
import os
import sys
from pathlib import Path

from facesegment.atomic import write_text_atomic

from .uci_config import CART_KINDS, known_kinds, label

#: The page whose results section :func:`write_reports` rewrites by default.
DOC = Path(__file__).resolve().parent.parent / "docs" / "uci.md"
BEGIN = "<!-- uci-results: begin (written by python -m pipelines.uci) -->"
END = "<!-- uci-results: end -->"

#: Table I of Norouzi et al., "CO2 Forest: Improved Random Forest by Continuous
#: Optimization of Oblique Splits" (2015): test error (%) at 10, 30 and 1000
#: trees; None where the paper has N/A (OC1 too slow).  Connect4 and Covertype
#: used the authors' own (unpublished) train / test splits.
PAPER_TABLE_I = {
    "satimage": dict(n_train=4435, n_test=2000, classes=6, dim=36,
                     rf=(10.1, 9.4, 8.9), oc1=(10.1, 9.9, 9.5), co2=(9.6, 9.1, 8.9)),
    "usps": dict(n_train=7291, n_test=2007, classes=10, dim=256,
                 rf=(9.0, 7.2, 6.4), oc1=(7.1, 7.1, 6.8), co2=(5.8, 5.9, 5.5)),
    "pendigits": dict(n_train=7494, n_test=3498, classes=10, dim=16,
                      rf=(3.9, 3.3, 3.5), oc1=(3.2, 2.2, 2.3), co2=(1.8, 1.7, 1.7)),
    "letter": dict(n_train=15000, n_test=5000, classes=26, dim=16,
                   rf=(6.6, 4.7, 3.7), oc1=(7.6, 5.0, 3.8), co2=(3.2, 2.3, 1.8)),
    "protein": dict(n_train=17766, n_test=6621, classes=3, dim=357,
                    rf=(39.9, 35.5, 30.9), oc1=(39.1, 34.6, 30.8), co2=(33.8, 31.2, 30.3)),
    "connect4": dict(n_train=55000, n_test=12557, classes=3, dim=126,
                     rf=(18.9, 17.4, 16.2), oc1=None, co2=(17.1, 15.7, 14.7)),
    "mnist": dict(n_train=60000, n_test=10000, classes=10, dim=784,
                  rf=(4.5, 3.5, 2.8), oc1=None, co2=(2.5, 2.0, 1.9)),
    "sensit": dict(n_train=78823, n_test=19705, classes=3, dim=100,
                   rf=(15.5, 14.0, 13.4), oc1=None, co2=(14.1, 13.0, 12.5)),
    "covertype": dict(n_train=500000, n_test=81012, classes=7, dim=54,
                      rf=(3.2, 2.8, 2.6), oc1=None, co2=(3.1, 2.7, 2.6)),
}
PAPER_TREES = (10, 30, 1000)
#: Other folder names of the paper's datasets.
ALIASES = {"connect-4": "connect4", "sensit-vehicle": "sensit", "combined": "sensit",
           "covtype": "covertype", "shuttle": None}
#: The kinds of the paper-form table: (kind, paper's column).
PAPER_FORM = (("axis", "rf"), ("co2", "co2"), ("co2-best", None))


def paper_row(name):
    return PAPER_TABLE_I.get(ALIASES.get(name, name) or "")


def _read(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def collect(out):
    """``{dataset: {"select"|"test"|"big": {kind: result}}}`` from the files in ``out``."""
    res = {}
    for d in sorted(Path(out).iterdir()) if Path(out).is_dir() else ():
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.json")):
            r = _read(f)
            if r and r.get("dataset") == d.name and r.get("stage") in ("select", "test", "big"):
                res.setdefault(d.name, {}).setdefault(r["stage"], {})[r["kind"]] = r
    return {k: v for k, v in res.items() if v.get("test")}


def order(names):
    paper = [n for n in PAPER_TABLE_I]
    key = {n: (paper.index(ALIASES.get(n, n) or "") if (ALIASES.get(n, n) or "") in paper
               else len(paper), n) for n in names}
    return sorted(names, key=key.get)


def kinds_of(results):
    """The kinds with test results, in the order of the table of kinds."""
    seen = {k for r in results.values() for k in r["test"]}
    return [k for k in known_kinds() if k in seen] + sorted(seen - set(known_kinds()))


def _e(v):
    return "—" if v is None else f"{v:.2f}"


def _p(v):
    return "—" if v is None else f"{v:.1f}"


def error_at(r, kind, n):
    """Test error (%) of ``kind`` with ``n`` trees (test forest, else big forest)."""
    for stage in ("test", "big"):
        c = r.get(stage, {}).get(kind, {}).get("curve", {})
        if str(n) in c:
            return c[str(n)]
    return None


def columns(results):
    cols = sorted({c for r in results.values() for t in r["test"].values()
                   for c in t.get("columns", [])})
    bigs = sorted({b["trees"] for r in results.values() for b in r.get("big", {}).values()})
    return cols + [b for b in bigs if b not in cols]


def render_results(results, figure_prefix="figures/", heading="##"):
    names = order(results)
    kinds = kinds_of(results)
    cols = columns(results)
    h = heading
    lines = [f"{h} Table I: test error (%), ours (paper)", "",
             "Cells: our test error, the paper's in parentheses (Table I of the paper; "
             "its random forest was scikit-learn's). The 10-tree forest is the first 10 "
             "trees of the 30-tree one. A dash: not run (the 1000-tree forests are grown "
             "only within `--big-budget`) or not in the paper.", ""]
    pcols = cols + ([1000] if 1000 not in cols else [])
    head = ["dataset", "#train", "#test", "#class", "dim"]
    for kind, _ in PAPER_FORM:
        if kind in kinds:
            head += [f"{kind} {c}" for c in pcols]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for n in names:
        r = results[n]
        info = next(iter(r["test"].values()))["data"]
        row = [n, f"{info['n_train']:,}", f"{info['n_test']:,}", str(info["n_classes"]),
               str(info["n_features"])]
        paper = paper_row(n)
        for kind, pcol in PAPER_FORM:
            if kind not in kinds:
                continue
            for c in pcols:
                ours = _e(error_at(r, kind, c))
                ref = paper and pcol and paper[pcol] and c in PAPER_TREES \
                    and paper[pcol][PAPER_TREES.index(c)]
                row.append(f"{ours} ({_p(ref)})" if ref else ours)
        lines.append("| " + " | ".join(row) + " |")
    missing = [k for k in PAPER_TABLE_I if k not in {ALIASES.get(n, n) for n in names}]
    if missing:
        lines += ["", "The paper's other datasets, not in these results: " + ", ".join(missing)
                  + " (their numbers are in `PAPER_TABLE_I`, pipelines/uci_report.py)."]
    lines += ["", f"{h} Every kind: test error (%) at " + " / ".join(map(str, cols))
              + " trees", ""]
    head = ["dataset"] + [f"{k}" for k in kinds]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for n in names:
        r = results[n]
        lines.append("| " + " | ".join([n] + [" / ".join(_e(error_at(r, k, c)) for c in cols)
                                              for k in kinds]) + " |")
    lines += ["", "Kinds: " + "; ".join(f"`{k}` {label(k)}" for k in kinds) + "."]
    prod = [(n, r["test"]["ferns"]["product_rule"]) for n in names
            for r in [results[n]] if "product_rule" in r["test"].get("ferns", {})]
    if prod:
        lines += ["", "Random ferns with the product rule (naive Bayes over ferns) instead "
                  f"of the mean, at {' / '.join(map(str, cols[:len(prod[0][1])]))} ferns: "
                  + "; ".join(
                      f"{n} " + " / ".join(_e(v) for v in pr.values()) for n, pr in prod) + "."]
    lines += render_cart(results, names, h)
    lines += ["", f"{h} Chosen settings (validation error %, forests of the selection)", "",
              "| dataset | kind | chosen | validation error | settings tried "
              "| rows fit / validation |",
              "| --- | --- | --- | --- | --- | --- |"]
    for n in names:
        sel = results[n].get("select", {})
        for k in [k for k in known_kinds() if k in sel]:
            s = sel[k]
            best = [x["val_error"] for x in s["settings"] if x["params"] == s["chosen"]]
            how = (f"{len(s['settings'])}" if s["searched"] else
                   "inherited" if s["inherited"] else "none")
            size = f"{s['n_fit']:,} / {s['n_validation']:,}" if s["searched"] else "—"
            chosen = ", ".join(f"{a}={b}" for a, b in s["chosen"].items())
            lines.append(f"| {n} | {k} | {chosen} | {_e(best[0]) if best else '—'} | {how} | "
                         f"{size} |")
    lines += ["", f"{h} Test error vs number of trees (Figure 2)", ""]
    for n in names:
        lines.append(f"![{n}]({figure_prefix}{n}.png)")
    return "\n".join(lines) + "\n"


def render_cart(results, names, h):
    """The "Gini and out-of-bag" table: for our random forest and scikit-learn's, the
    test error of the test forest (entropy) and of its Gini twin, each with its
    out-of-bag estimate (lines; none when no result has them)."""
    kinds = [k for k in CART_KINDS if any("cart" in results[n]["test"].get(k, {})
                                          for n in names)]
    if not kinds:
        return []
    head = ["dataset"]
    for k in kinds:
        head += [f"{k} entropy", f"{k} entropy OOB", f"{k} gini", f"{k} gini OOB"]
    lines = ["", f"{h} Gini and out-of-bag errors (%)", "",
             "The test forests (entropy) and their Gini twins (`criterion=\"gini\"`, same "
             "settings and seed), each with its out-of-bag error, at the test forests' "
             "number of trees.", "",
             "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for n in names:
        row = [n]
        for k in kinds:
            t = results[n]["test"].get(k, {})
            c, trees = t.get("cart", {}), t.get("trees")
            row += [_e(t.get("curve", {}).get(str(trees))), _e(c.get("oob")),
                    _e(c.get("gini")), _e(c.get("gini_oob"))]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def render_timings(results, timings):
    st = timings.get("stages", {})
    m = timings.get("machine", {})
    lines = ["# UCI harness: measured times", "",
             f"Wall seconds on this machine ({m.get('cpu_count', '?')} cores, last written "
             f"{m.get('date', '?')}; `workers` threads per forest; other jobs may have shared "
             "the cores, see the load averages). `fit` is the test forest grown on the whole "
             "training set; `predict` one `predict_proba` over the test set with all its "
             "trees; ratios are to scikit-learn's RandomForestClassifier (entropy) on the same "
             "data. Selection: every setting tried on the validation split.", ""]
    for n in order(results):
        r = results[n]
        lines += [f"## {n}", "",
                  "| kind | trees | fit s | fit s/tree | fit / sklearn-rf | predict s | "
                  "predict ms/tree | predict / sklearn-rf | selection s (settings) | "
                  "big forest fit s | load |", "|" + " --- |" * 11]
        tests = {k: r["test"][k] for k in kinds_of({n: r})}
        ref = st.get(f"{n}/sklearn-rf/test")
        if ref and not (ref.get("key") == r["test"].get("sklearn-rf", {}).get("key")
                        and ref["fit_s"] > 0 and ref["predict_s"] > 0):
            ref = None
        for k, t in tests.items():
            e = st.get(f"{n}/{k}/test")
            if not e or e.get("key") != t["key"]:
                lines.append(f"| {k} | {t['trees']} | (no timing for these results) |"
                             + " |" * 8)
                continue
            s = st.get(f"{n}/{k}/select")
            b = st.get(f"{n}/{k}/big")
            row = [k, str(e["trees"]), f"{e['fit_s']:.2f}", f"{e['fit_s'] / e['trees']:.3f}",
                   f"{e['fit_s'] / ref['fit_s']:.2f}" if ref else "—", f"{e['predict_s']:.3f}",
                   f"{1000 * e['predict_s'] / e['trees']:.2f}",
                   f"{e['predict_s'] / ref['predict_s']:.2f}" if ref else "—",
                   f"{s['seconds']:.1f} ({s['settings']})" if s else "—",
                   f"{b['fit_s']:.1f} ({b['trees']})" if b else "—", str(e.get("load_avg"))]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    plan = timings.get("big_plan")
    if plan:
        lines += ["## 1000-tree forests: estimates and budget", "",
                  "| dataset/kind | estimated s | ran |", "| --- | --- | --- |"]
        lines += [f"| {k} | {v['estimate_s']} | {'yes' if v['ran'] else 'no'} |"
                  for k, v in sorted(plan.items())]
        lines.append("")
    if "last_run_seconds" in timings:
        lines.append(f"Last run of `python -m pipelines.uci`: {timings['last_run_seconds']} s.")
    return "\n".join(lines) + "\n"


def figure(name, r, path):
    """Test error vs (log) number of trees for every kind, the paper's points too."""
    from facesegment.evaluation.figures import save_figure, subplots

    fig, ax = subplots(figsize=(6, 4))
    for k in kinds_of({name: r}):
        c = dict(r["test"][k]["curve"])
        c.update(r.get("big", {}).get(k, {}).get("curve", {}))
        xs = sorted(map(int, c))
        ax.plot(xs, [c[str(x)] for x in xs], marker=".", label=k,
                linestyle="--" if k.startswith("sklearn") else "-")
    paper = paper_row(name)
    if paper:
        for col, mk in (("rf", "s"), ("co2", "^")):
            ax.plot(PAPER_TREES, paper[col], linestyle="none", marker=mk, color="k",
                    fillstyle="none", label=f"paper {col}")
    ax.set_xscale("log")
    ax.set_xlabel("number of trees")
    ax.set_ylabel("test error (%)")
    ax.set_title(name)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


def write_reports(out, docs=None):
    """Write results.md, timings.md, the figures and the docs section; return the paths."""
    out = Path(out)
    results = collect(out)
    timings = _read(out / "timings.json") or {}
    written = []
    head = ["# UCI benchmarks (the CO2 paper's Table I and Figure 2)", "",
            "Written by `python -m pipelines.uci` (docs/uci.md: protocol, grids, defaults) "
            "from the result files beside this page; measured times are in timings.md.", ""]
    if not results:
        text = "\n".join(head + ["No results yet."]) + "\n"
    else:
        text = "\n".join(head) + "\n" + render_results(results)
        for n, r in results.items():
            written.append(figure(n, r, out / "figures" / f"{n}.png"))
    write_text_atomic(out / "results.md", text)
    write_text_atomic(out / "timings.md", render_timings(results, timings))
    written = [out / "results.md", out / "timings.md"] + written
    if docs and results:
        prefix = os.path.relpath(out / "figures", Path(docs).parent) + "/"
        if _update_docs(docs, render_results(results, prefix, heading="###")):
            written.append(Path(docs))
    return written


def _update_docs(path, body):
    try:
        text = Path(path).read_text()
    except OSError:
        return False
    if BEGIN not in text or END not in text:
        return False
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    write_text_atomic(path, text[:a] + "\n\n" + body + "\n" + text[b:])
    return True


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    out = argv[0] if argv else "reports/uci"
    for p in write_reports(out, docs=None if len(argv) > 1 else "docs/uci.md"):
        print(p)
    return 0


if __name__ == "__main__":  # pragma: no cover
    from facesegment.atomic import overwriting

    with overwriting():   # the repository\'s own reports and models are regenerated
        sys.exit(main())
