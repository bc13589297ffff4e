"""Summarise the benchmark results in reports/bench/*.json as one Markdown table.

Usage::

    python -m benchmarks.summarize   # prints Markdown; writes reports/bench/summary.md
                                     # and the table of docs/performance.md

The JSON files are written by ``bench_extract.py``, ``bench_label.py``,
``bench_forests.py``, ``bench_inference.py``, ``bench_cascade.py``, ``bench_votes.py``,
``bench_first_use.py``, ``bench_video.py`` and ``bench_folder.py``; this script only reads them, so
every number it prints comes from one of those commands.  The table goes into
:data:`DOC` between :data:`BEGIN` and :data:`END` (``tests/test_docs.py``
checks that the page holds what this script renders from the committed files).
"""

import json
import sys
from pathlib import Path

from facesegment.atomic import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "reports" / "bench"
#: The page whose table this script writes, between :data:`BEGIN` and :data:`END`.
DOC = ROOT / "docs" / "performance.md"
BEGIN = "<!-- bench-summary: begin (written by python -m benchmarks.summarize) -->"
END = "<!-- bench-summary: end -->"


def _load(name):
    p = BENCH / f"{name}.json"
    return json.loads(p.read_text()) if p.exists() else None


def rows():
    """``(stage, measured on, result, command)`` per benchmark result."""
    out = []
    ex = _load("extract")
    if ex:
        f = ex["faces300w_train"]
        out.append(("extraction", f"faces300w/train → {f['windows']:,} windows",
                    f"{f['seconds']:.1f} s ({f['windows_per_second']:,.0f} windows/s), "
                    f"{f['file_mb']:.0f} MB", "bench_extract.py"))
        if ex.get("lfw_gray"):
            g = ex["lfw_gray"]
            out.append(("extraction", f"all lfw-gray ({g['images']:,} images) → {g['windows']:,} windows",
                        f"{g['seconds']:.0f} s ({g['images_per_second']:.0f} images/s)",
                        "bench_extract.py"))
    lb = _load("label")
    if lb:
        a = lb["agreement"]["pillow ImageDraw.polygon (used)"]
        out.append(("labels from .pts", f"agreement with NAME_label.png, {a['images']} images",
                    f"worst {100 * a['min_agreement']:.3f}%, {a['identical_images']} identical",
                    "bench_label.py --agreement"))
        if lb.get("detect"):
            d = lb["detect"]
            out.append(("dlib labelling", f"{d['images']} lfw-gray images, one process",
                        f"{d['images_per_s']:.1f} images/s, {d['misses']} misses",
                        "bench_label.py --detect"))
    fo = _load("forests")
    if fo:
        a = fo["axis_vs_sklearn"]
        out.append(("axis vs scikit-learn", f"fit, {a['trees']} trees, q={a['q']}, depth {a['max_depth']}, "
                    f"{a['n_train']:,} windows", f"time ratio {a['fit_ratio']:.2f} "
                    f"({a['fit_seconds']['ours']:.0f} s vs {a['fit_seconds']['sklearn']:.0f} s, "
                    f"same run)", "bench_forests.py"))
        out.append(("axis vs scikit-learn", f"predict {a['n_test']:,} windows",
                    f"time ratio {a['predict_ratio']:.2f}; accuracy {a['accuracy']['ours']:.3f} vs "
                    f"{a['accuracy']['sklearn']:.3f}", "bench_forests.py"))
        c = fo.get("co2_tree", {}).get("float32")
        if c:
            out.append(("CO2 training", f"one tree, 256,000 windows, depth {c['depth']}",
                        f"{c['seconds']:.0f} s wall / {c['cpu_seconds']:.0f} s CPU "
                        f"(init search {c['init_search_seconds']:.0f} s, SGD {c['sgd_seconds']:.0f} s)",
                        "bench_forests.py"))
        m = fo.get("model_bytes")
        if m:
            out.append(("model size", f"{m['trees']} trees",
                        f"axis {m['axis_bytes'] / 1e6:.1f} MB, two-probe {m['two_probe_bytes'] / 1e6:.1f} MB, "
                        f"CO2 {m['co2_float32_bytes_per_tree'] / 1e6:.1f} MB/tree "
                        f"({m['co2_float16_bytes_per_tree'] / 1e6:.1f} float16)", "bench_forests.py"))
    for name in ("inference", "inference-faces300w-default", "inference-faces300w-default-full"):
        inf = _load(name)
        if not inf:
            continue
        where = (f"the pipeline's models ({inf['models']}), {inf.get('mode', 'strict')} mode"
                 if inf.get("models") else
                 f"quick depth-16 models, {inf.get('mode', 'strict')} mode")
        for r in inf["results"]:
            if r.get("method") not in ("default", "per-pixel"):  # per-pixel: older files
                continue
            extra = ""
            if r["kind"] == "co2":
                extra = f", {r['ratio']:.1f}× its FLOP bound (CPU: {r['ratio_cpu']:.1f}×)"
            out.append(("dense inference",
                        f"{r['kind']}, {r['n_trees']} trees, 250×250 image; {where}",
                        f"{r['ms_per_image']:.0f} ms wall, {r['cpu_ms_per_image_per_core']:.0f} ms "
                        f"CPU / 2 cores{extra}",
                        "bench_inference.py" + (f" --models {inf['models']} --mode "
                                                f"{inf.get('mode')}" if inf.get("models") else "")
                        + (" --skip-co2" if inf.get("models") and not any(
                            x["kind"] == "co2" for x in inf["results"]) else "")))
    out += _cascade_rows()
    out += _votes_rows()
    out += _first_use_rows()
    out += _video_rows()
    out += _folder_rows()
    return out


def _folder_rows():
    """``bench_folder.py``: whole-folder throughput of the default model on lfw-gray,
    beside ``facesegment label`` in the same run."""
    out = []
    for name in ("folder", "folder-lfw"):
        f = _load(name)
        if not f:
            continue
        s = f["segment"]
        parts = [f"{s['images_per_s']:.1f} images/s with {f['workers']} threads "
                 f"({s['seconds']:.0f} s)"]
        if f.get("all_lfw_minutes"):
            parts[0] += f": all of lfw-gray in {f['all_lfw_minutes']:.1f} min"
        if f.get("segment_cluster"):
            parts.append(f"a local Dask cluster of {f['workers']} processes "
                         f"{f['segment_cluster']['images_per_s']:.1f} images/s "
                         f"({f['cluster_speedup']:.2f}× threads; the workers' start-up, model "
                         "transfer and kernel loading included)")
        if f.get("label"):
            parts.append(f"`facesegment label` {f['label']['images_per_s']:.1f} images/s "
                         f"(segment: {f['segment_vs_label']:.2f}× its rate)")
        ident = f.get("identical_to_single")
        if ident and ident[1]:
            parts.append(f"outputs of the first {ident[1]} identical to image-at-a-time: "
                         f"{ident[0]}")
        out.append(("folder of photos", f"`facesegment segment` on the first {s['images']:,} "
                    f"lfw-gray images ({f['model']})", "; ".join(parts),
                    "bench_folder.py" + (" --n 0 --no-cluster --no-label"
                                         if name == "folder-lfw" else "")))
    return out


def _video_rows():
    """``bench_video.py``: frames/s of a 640x480 clip, and label flicker with and
    without smoothing."""
    v = _load("video")
    if not v:
        return []
    t, sm = v["throughput"], v["smoothing"]
    w, h = v["size"]
    rows = [("video", f"{t['frames_in']} frames ({t['frames_in'] / v['fps']:.0f} s at "
             f"{v['fps']:.0f} frames/s), {w}×{h}, one face (a FASSEG photo, jittered), "
             "the default model",
             f"{t['frames_per_s']:.1f} frames/s ({t['seconds']:.1f} s, reading and writing "
             f"both videos included; {t['median_segment_ms']:.0f} ms median per frame); "
             f"videos of {t['frames_labels_video']} and {t['frames_overlay_video']} frames",
             "bench_video.py")]
    by = sm["by_window"]
    base = by.get("0")
    if base:
        parts = "; ".join(f"--smooth {k}: {d['mean_flicker']:.2%}, {d['mean_parts_jaccard']:.3f}"
                          for k, d in by.items() if k != "0")
        rows.append(("video smoothing", f"{len(sm['photos'])} held-out FASSEG photos × "
                     f"{sm['frames_per_photo']} frames, shifted up to ±{v['jitter_px']:g} px "
                     "and scaled ±1% per frame",
                     f"flicker (part pixels whose label changes between frames) and parts "
                     f"Jaccard: none {base['mean_flicker']:.2%}, {base['mean_parts_jaccard']:.3f}; "
                     f"{parts}" + (f" (the pixel grid alone: {sm['floor']['mean_flicker']:.2%})"
                                   if sm.get("floor") else ""),
                     "bench_video.py"))
    return rows


def _first_use_rows():
    """``bench_first_use.py``: a fresh install's first ``segment`` (empty Numba
    cache) beside the same command on the cache it left."""
    fu = _load("first_use")
    if not fu:
        return []
    cli, api = fu["cli"], fu["api"]
    return [("first use", f"`facesegment segment DIR OUT` (shipped model), one 250×250 face "
                          f"({fu['image']}), empty Numba cache vs the cache it left",
             f"first output {cli['cold']['first_output_s']:.1f} s cold, "
             f"{cli['warm']['first_output_s']:.1f} s warm "
             f"({fu['ratios']['cli_first_output_cold_over_warm']:.1f}×; CPU "
             f"{cli['cold']['cpu_s']:.1f} / {cli['warm']['cpu_s']:.1f} s); API first call "
             f"{api['cold']['first_s']:.1f} / {api['warm']['first_s']:.1f} s, later calls "
             f"{1000 * api['cold']['later_median_s']:.0f} / "
             f"{1000 * api['warm']['later_median_s']:.0f} ms", "bench_first_use.py")]


def _cascade_rows():
    """``bench_cascade.py``: a cascade per face, beside its stage-1 forest alone."""
    out = []
    for p in sorted(BENCH.glob("cascade-*.json")):
        c = json.loads(p.read_text())
        ms = c["ms_per_image"]
        out.append(("cascade inference",
                    f"{' → '.join(c['stage_kinds'])}, 32 trees per stage, 250×250 image, full "
                    f"mode ({c['model']})",
                    f"{ms['cascade']:.0f} ms (stage 1 {ms['stage1']:.0f}, context planes "
                    f"{ms['planes']:.0f}, last stage {ms['last_stage']:.0f}: "
                    f"{c.get('last_stage_kernel', '?')}); {c['ratio_cascade_to_peer']:.1f}× its "
                    "stage-1 forest alone", f"bench_cascade.py --model {c['model']}"))
    return out


def _votes_rows():
    """``bench_votes.py``: the landmark-vote model per face, beside the renderer."""
    v = _load("votes")
    if not v:
        return []
    ms, r = v["ms_per_face"], v["over_renderer"]
    return [("landmark votes", f"{v['models']['votes']}, "
             f"{v['n_faces']} faces300w test crops, dlib included",
             f"crop {ms['landmark votes, crop']:.0f} ms ({r['landmark votes, crop']:.1f}× the "
             f"renderer's {ms['renderer (peer)']:.0f} ms), photo path "
             f"{ms['landmark votes, photo']:.0f} ms{_vs28(ms)}", "bench_votes.py")]


def _vs28(ms):
    old = ms.get("landmark votes, crop, 28 sets")
    if not old:
        return ""
    return (f"; the 28-set spec (mirror from one box) {old:.0f} ms, "
            f"the 54 sets {ms['landmark votes, crop'] / old:.2f}× its time")


def markdown():
    lines = ["| stage | measured on | result | command (benchmarks/) |",
             "| --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows()]
    return "\n".join(lines) + "\n"


def with_table(page, table):
    """``page`` with the text between :data:`BEGIN` and :data:`END` replaced by ``table``."""
    if BEGIN not in page or END not in page:
        raise ValueError(f"{DOC.name} has no {BEGIN} ... {END} block")
    a, b = page.index(BEGIN) + len(BEGIN), page.index(END)
    return page[:a] + "\n\n" + table + "\n" + page[b:]


def main(argv=None):
    text = markdown()
    write_text_atomic(BENCH / "summary.md", text)
    write_text_atomic(DOC, with_table(DOC.read_text(), text))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
