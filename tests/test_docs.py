"""docs/ as a reference: no notebook remarks, links that resolve, format versions
that are the code's, and generated pages that are what their generators write.

The generated pages are compared with what their generator writes from the
committed report files, so a number in a generated page cannot disagree with
its report: regenerate the page (the command each page names) instead of
editing it.
"""

import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
#: The shipped models' cards, which say what a model is, never how busy the
#: machine that measured it was.
CARDS = sorted((ROOT / "facesegment" / "models").glob("*/MODEL_CARD.md"))
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)


def _rel(path):
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _prose(text):
    """The text without fenced code blocks (links and headings inside them do not count)."""
    return FENCE.sub("", text)


# ------------------------------------------------------------------ (a) wording

MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|"
          "December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
#: What a reference page never says: how loaded the machine was, whether a
#: target was met, when something was done, how the work was organised.
FORBIDDEN = {
    "quiet machine": re.compile(r"quiet\s+machine", re.I),
    "target met": re.compile(r"target\s+(was\s+)?met", re.I),
    "a date (YYYY-MM-DD)": re.compile(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b"),
    "a date (month and year)": re.compile(rf"\b({MONTHS})\.?,?\s+(19|20)\d\d\b"),
    "how the work was organised": re.compile(r"\bse(?:ss)ions?\b", re.I),
    "an issue number": re.compile(r"(?<![&\w])#\d+\b|\b(issue|ticket|PR|pull request)s?\s*#?\d+\b",
                                  re.I),
}


def test_pages_are_found():
    names = {_rel(p) for p in PAGES}
    assert {"docs/index.md", "docs/studies/index.md", "docs/results.md"} <= names, names


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_no_page_holds_notebook_remarks(what):
    pattern, bad = FORBIDDEN[what], []
    for path in PAGES:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                bad.append(f"{_rel(path)}:{i}: {line.strip()[:90]}")
    assert not bad, f"{what} in docs/ (history goes to CHANGELOG.md):\n" + "\n".join(bad[:20])


def test_model_cards_hold_no_notebook_remarks():
    assert CARDS
    load = re.compile(r"load\s+average|other jobs", re.I)
    bad = [f"{_rel(p)}:{i}: {line.strip()[:90]}" for p in CARDS
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if load.search(line) or any(pat.search(line) for pat in FORBIDDEN.values())]
    assert not bad, "\n".join(bad)


def test_the_wording_check_finds_each_remark():
    said = ["timed on the quiet machine", "the target met at last", "run on 2026-11-27",
            "measured in November 2026", "a " + "sess" + "ion of work", "fixes #12",
            "see issue 7"]
    for line in said:
        assert any(p.search(line) for p in FORBIDDEN.values()), line
    for line in ("InferenceSession", "`#!/bin/sh`", "[here](#run-time)", "model.json format 2",
                 "&#8212;", "up to 2026 pixels", "May be given twice"):
        assert not any(p.search(line) for p in FORBIDDEN.values()), line


# ------------------------------------------------------------------ (b) links

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())   # a link's text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def _anchors(path):
    seen, out = {}, set()
    for line in _prose(path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(path):
    """``file:line: target`` for each relative link of ``path`` that leads nowhere."""
    bad = []
    for i, line in enumerate(_prose(path.read_text(encoding="utf-8")).splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):      # http:, mailto:, ...
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                bad.append(f"{_rel(path)}:{i}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{_rel(path)}:{i}: {target} (no such heading)")
    return bad


def test_every_relative_link_resolves():
    bad = [b for path in [ROOT / "README.md", *PAGES] for b in broken_links(path)]
    assert not bad, "\n".join(bad)


def test_the_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / "there.md").write_text("# A heading, with `code`\n\n## Run time\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md) [ok](there.md#a-heading-with-code) [ok](#b)\n# B\n"
                    "[gone](studies/findings.md) [bad anchor](there.md#run-times)\n"
                    "![img](missing.png) [web](https://example.org/x.md)\n"
                    "```\n[in code](nowhere.md)\n```\n")
    found = broken_links(page)
    assert [b.split(": ", 1)[1] for b in found] == [
        "studies/findings.md (no such file)", "there.md#run-times (no such heading)",
        "missing.png (no such file)"], found


#: Where a page of docs/ may be named by path: the README, the docs, the code and
#: the configuration, the changelog.
NAMED_IN = ["README.md", "CHANGELOG.md", "Makefile", "pyproject.toml", "docs", "facesegment",
            "pipelines", "benchmarks", "studies", "tests", "notebooks"]


def test_every_docs_path_named_in_the_repository_exists():
    said = re.compile(r"(?<![\w/.])docs/[\w./-]*?\w\.(?:md|png)\b")
    bad = []
    for name in NAMED_IN:
        top = ROOT / name
        files = [top] if top.is_file() else sorted(
            p for p in top.rglob("*") if p.suffix in (".md", ".py", ".toml", ".ipynb"))
        for path in files:
            if path == Path(__file__):
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                bad += [f"{_rel(path)}:{i}: {m}" for m in said.findall(line)
                        if not (ROOT / m).is_file()]
    assert not bad, "pages named that do not exist (moved?):\n" + "\n".join(bad[:30])


# ------------------------------------------------------------------ (c) format versions

def _formats():
    """File name patterns -> (the version the code writes, the versions it reads)."""
    from facesegment.autocontext.cascade import CASCADE_FORMAT_VERSION
    from facesegment.data.windows import FORMAT_VERSION, READ_VERSIONS
    from facesegment.models import landmark as landmark_model
    from facesegment.models.mesh_folder import MESH_FORMAT_VERSION
    from facesegment.modelio._model_doc import MODEL_FORMAT_VERSION

    return {
        r"cascade\.json|facesegment-cascade": (CASCADE_FORMAT_VERSION, {CASCADE_FORMAT_VERSION}),
        r"mesh-model\.json|facesegment-mesh-model": (MESH_FORMAT_VERSION, {MESH_FORMAT_VERSION}),
        r"landmark-model\.json|facesegment-landmark-model": (
            landmark_model.LANDMARK_FORMAT_VERSION, set(landmark_model.READ_VERSIONS)),
        r"windows file|facesegment-windows|\.h5`? windows": (FORMAT_VERSION, set(READ_VERSIONS)),
        r"(?<![\w-])model\.json|forest\.h5|facesegment-model\b|model folder": (
            MODEL_FORMAT_VERSION, {1, MODEL_FORMAT_VERSION}),
    }


#: "format version 2", "`format_version` (2)", "format_version = 2", "versions 1 and 2"
VERSION = re.compile(r"(?:format[ _]version`?\s*(?:[=:(]\s*)?`?|\bversions?\s+|\bformat\s+)"
                     r"(\d+)(?:\s*(?:and|,|or)\s*(\d+))?", re.I)
#: A version a reader still accepts is named as such ("version 1 still loads",
#: "version 1 files ... are still read", "reads versions 1 and 2").
STILL = re.compile(r"\bstill\b|\bolder\b|\breads?\b|\bis read too\b", re.I)


def version_problems(text, formats):
    """``(problems, formats named)``: one line per format version named in ``text``
    that is not the code's, i.e. not the version the file named last before it (in
    its paragraph) is written with, nor, said as still read, one its reader accepts."""
    bad, seen = [], set()
    for para in re.split(r"\n\s*\n", text):
        for m in VERSION.finditer(para):
            named = [(mm.start(), key) for key in formats
                     for mm in re.finditer(key, para[:m.start()], re.I)]
            if not named:
                bad.append(f"format version {m.group(1)} of which file? {m.group(0)!r}")
                continue
            key = max(named)[1]
            written, accepted = formats[key]
            still = STILL.search(para[max(0, m.start() - 40):m.end() + 60])
            for n in filter(None, m.groups()):
                if int(n) != written and not (still and int(n) in accepted):
                    bad.append(f"{key.split('|')[0]} format version {n}: the code writes "
                               f"{written}" + (f" and reads {sorted(accepted)}" if still else ""))
            seen.add(key)
    return bad, seen


def test_every_format_version_named_is_the_codes():
    formats, bad, seen = _formats(), [], set()
    for path in [ROOT / "README.md", *PAGES]:
        found, named = version_problems(_prose(path.read_text(encoding="utf-8")), formats)
        bad += [f"{_rel(path)}: {b}" for b in found]
        seen |= named
    assert not bad, "\n".join(bad)
    assert seen == set(formats), f"formats no page names: {set(formats) - seen}"


def test_the_version_check_finds_a_stale_version():
    formats = _formats()
    assert version_problems("`model.json`: `format_version` (1), `kind`", formats)[0]
    assert version_problems("a windows file of format version 3", formats)[0]
    assert version_problems("format version 2 of something", formats)[0]
    assert not version_problems("`model.json` (format version 2; version 1 files still "
                                "load), `cascade.json` format version 1", formats)[0]
    assert not version_problems("`landmark-model.json` format version 2 (version 1 is read "
                                "too); a windows file, `format_version = 2`", formats)[0]


# ------------------------------------------------------------------ (d) generated pages

def _json(rel):
    path = ROOT / rel
    if not path.is_file():
        pytest.skip(f"{rel} is not there")
    return json.loads(path.read_text())


def _between(text, begin, end):
    assert begin in text and end in text, f"markers {begin!r} ... {end!r} missing"
    return text[text.index(begin) + len(begin):text.index(end)]


def _results():
    from pipelines.report import render_all

    return render_all(ROOT / "reports" / "runs", DOCS)


def _timings():
    from pipelines.timings import render_all_timings

    return render_all_timings(ROOT / "reports" / "runs", DOCS)


def _peers():
    """docs/peers.md: benchmarks.peers's table, then benchmarks.peers_oblique's part."""
    from benchmarks.peers import DOC
    from benchmarks.peers_oblique import page

    return DOC, page(_json("reports/bench/peers.json"), _json("reports/bench/peers_oblique.json"))


def _peers_ablation():
    from benchmarks.peers_ablation import DOC, markdown

    return DOC, markdown(_json("reports/bench/peers_ablation.json"))


def _uci():
    from pipelines.uci_report import BEGIN, DOC, END, collect, render_results

    out = ROOT / "reports" / "uci"
    body = render_results(collect(out), os.path.relpath(out / "figures", DOC.parent) + "/",
                          heading="###")
    return DOC, BEGIN, END, "\n\n" + body + "\n"


def _nongreedy():
    from pipelines.nongreedy_report import DOC, RESULTS, docs_page

    res = _json(os.path.relpath(RESULTS / "results.json", ROOT))
    return DOC, docs_page(res["trees"], res["forests"])


def _performance():
    from benchmarks.summarize import BEGIN, DOC, END, markdown

    return DOC, BEGIN, END, "\n\n" + markdown() + "\n"


def test_results_and_timings_pages_are_their_reports():
    assert (DOCS / "results.md").read_text() == _results(), \
        "docs/results.md is stale: python -m pipelines.report"
    assert (DOCS / "timings.md").read_text() == _timings(), \
        "docs/timings.md is stale: python -m pipelines.report"


def test_timings_pages_state_times_not_machine_load():
    """The timings pages render measured times only: the load averages stay in
    each run's timings.json (data), never in a page."""
    load = re.compile(r"load\s+average|\bload\b.*→", re.I)
    pages = [DOCS / "timings.md"] + sorted((ROOT / "reports" / "runs").glob("*/timings.md"))
    bad = [f"{_rel(p)}:{i}" for p in pages
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if load.search(line)]
    assert len(pages) > 1 and not bad, bad


def test_peer_and_nongreedy_pages_are_their_reports():
    doc, text = _peers()
    assert doc == DOCS / "peers.md" and doc.read_text() == text, \
        "docs/peers.md is stale: python -m benchmarks.peers --quick, then " \
        ".venv-treeple/bin/python -m benchmarks.peers_oblique --quick"
    doc, text = _peers_ablation()
    assert doc.parent == DOCS / "studies" and text.rstrip("\n") in doc.read_text(), \
        f"{_rel(doc)} is stale: python -m benchmarks.peers_ablation"
    doc, text = _nongreedy()
    assert doc.parent == DOCS / "studies" and doc.read_text() == text, \
        f"{_rel(doc)} is stale: python -m pipelines.nongreedy"


@pytest.mark.parametrize("section", [_uci, _performance], ids=["uci", "performance"])
def test_generated_sections_are_their_reports(section):
    doc, begin, end, body = section()
    assert _between(doc.read_text(), begin, end) == body, \
        f"{_rel(doc)}'s generated section is stale: {begin}"


def test_handdrawn_and_reliability_pages_are_their_reports():
    from facesegment.bounds import reliability_section
    from pipelines.handdrawn_common import DOC
    from pipelines.handdrawn_report import render

    bench = ROOT / "reports" / "bench" / "mesh.json"
    cv = _json("reports/handdrawn/cv.json")
    assert DOC.read_text() == render(cv, json.loads(bench.read_text())
                                     if bench.is_file() else None)
    assert reliability_section() in (DOCS / "reliability.md").read_text()


def test_the_install_page_is_its_report():
    from benchmarks.install_size import DOC, OUT, render

    assert DOC.read_text() == render(json.loads(OUT.read_text())), \
        "docs/install.md is stale: python -m benchmarks.install_size"


def test_a_changed_report_number_fails_the_comparison(tmp_path):
    """The comparison sees one digit: a run folder copied with one score changed
    renders another page."""
    import shutil

    from pipelines.report import render_all

    runs = tmp_path / "reports" / "runs"
    src = ROOT / "reports" / "runs" / "faces300w-default"
    if not src.is_dir():
        pytest.skip("no committed default run")
    shutil.copytree(src, runs / src.name, ignore=shutil.ignore_patterns("*.png", "stamps"))
    ev = runs / src.name / "eval-axis.json"
    before = render_all(runs, tmp_path / "docs")
    doc = json.loads(ev.read_text())
    score = doc["trees"]["32"]["alpha"][str(doc["alpha"])]
    assert f"{score['mean_jaccard']:.2f}" in before
    score["mean_jaccard"] += 1.0
    ev.write_text(json.dumps(doc))
    assert render_all(runs, tmp_path / "docs") != before


def test_every_generated_page_names_its_command():
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        if "generated by" in text.lower() or "written by" in text.lower():
            assert "python -m" in text or "make " in text, _rel(path)


def test_the_index_lists_every_page():
    index = (DOCS / "index.md").read_text() + (DOCS / "studies" / "index.md").read_text()
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in LINK.findall(
        (DOCS / "index.md").read_text())}
    linked |= {(DOCS / "studies" / t.partition("#")[0]).resolve() for t in LINK.findall(
        (DOCS / "studies" / "index.md").read_text())}
    missing = [_rel(p) for p in PAGES if p.resolve() not in linked
               and p.name != "index.md"]
    assert not missing, f"pages the indexes do not list: {missing}"
    assert "studies/index.md" in index
    assert "docs/index.md" in (ROOT / "README.md").read_text()
