"""Hand-drawn masks: leave-people-out scores of every method, and the mesh-forest model.

    python -m pipelines.handdrawn cv --data ../shared/data/fasseg-v3-train
    python -m pipelines.handdrawn model --data ../shared/data/fasseg-v3-train --name faces-handdrawn

``cv`` scores, leaving each person out in turn (folds by the manifest's
``person``; never by photo), on every pixel of every photo
(:mod:`facesegment.evaluation.handdrawn`: 254 is a negative for the parts, 255
unscored):

* the shipped models run end to end as ``facesegment segment`` runs them
  (``faces300w-landmarks``: dlib's landmark votes; ``faces300w-two-probe``: the
  landmark-free forest);
* the face mesh drawn as polygons, and drawn with each part dilated or eroded
  by the amounts that score best on the other people;
* the mesh-forest stages (:mod:`facesegment.faces.mesh_stages`) of each forest
  kind and stage count in ``--methods``, with the class gains of the decision
  rule chosen on the other people's held-out predictions.

Results go to ``reports/handdrawn/cv.json`` and ``docs/handdrawn.md``: per
class, per pan, on all photos and on those where the previous default
(``faces300w-landmarks``) finds a face.  ``model`` trains the best method of
``cv.json`` on every photo and writes ``facesegment/models/NAME/`` with its card.
``cv --methods M --keep-others`` computes only M's rows again (and the shipped
models' and the drawn mesh's), keeping the other forest rows of the report;
``cv --cache DIR`` keeps each forest method's leave-people-out stage
probabilities and reuses them while its forests, the photos and the code are the
same (:mod:`pipelines.handdrawn_cache`): a new decision-rule grid then costs
seconds, not a cross-validation.
"""

import argparse
import json
import sys
import time
from itertools import product
from pathlib import Path

import numpy as np

from pipelines.handdrawn_common import (CLASSES, DEFAULT_METHODS, DILATE_GRID, DOC,
                                        FACES300W, FOREST_METHODS, GAIN_GRID, REPORT, ROOT,
                                        SEED, TURNED, far_eye, log, make_forest, margin_text,
                                        prepare, prepare_faces300w, weigh_turned)


def counts_of(faces, labels_of):
    """{name: (5, 2) counts} of a labelling function over the faces."""
    from facesegment.evaluation.handdrawn import handdrawn_counts

    return {f.name: handdrawn_counts(labels_of(f), f.labels) for f in faces}


def summarise(faces, counts, subset=None):
    """Scores of per-face counts: all photos, the subset, per pan, per person."""
    from facesegment.evaluation.handdrawn import jaccard_of_counts

    def score(names):
        tot = sum((counts[n] for n in names), np.zeros((len(CLASSES), 2), np.int64))
        mean, per = jaccard_of_counts(tot)
        return {"mean": round(mean, 2), "per_class": {str(c): round(v, 2) for c, v in per.items()},
                "n": len(names)}

    out = {"all": score([f.name for f in faces])}
    if subset is not None:
        out["default_found"] = score([f.name for f in faces if f.name in subset])
    pans = sorted({f.pan for f in faces if f.pan == f.pan})
    by_pan = {str(int(p)): score([f.name for f in faces if f.pan == p]) for p in pans}
    out["per_pan"] = {p: s["mean"] for p, s in by_pan.items()}
    out["per_pan_class"] = {p: {c: (v if v == v else None) for c, v in s["per_class"].items()}
                            for p, s in by_pan.items()}
    return out


def far_eye_drawn(faces, min_pan=60):
    """``{pan: photos of that pan whose far eye is drawn}`` for ``|pan| >= min_pan``
    (the far eye: eye R, class 5, for a negative pan; eye L, 4, for a positive one)."""
    pans = sorted({f.pan for f in faces if f.pan == f.pan and abs(f.pan) >= min_pan})
    return {str(int(p)): {"drawn": sum(bool((f.labels == far_eye(p)).any())
                                       for f in faces if f.pan == p),
                          "photos": sum(f.pan == p for f in faces)} for p in pans}


def shipped_counts(faces, name):
    """Counts of a shipped model run end to end (``segment_image``), and the photos
    where it found a face."""
    from facesegment.api import load_model
    from facesegment.faces.segment import segment_image
    from facesegment.progress import Progress

    model = load_model(name)
    bar = Progress(len(faces), name, "photos")
    preds, found = {}, set()
    for f in faces:
        labels, n = segment_image(model, f.extra["image"], detect="always")
        preds[f.name] = labels if labels is not None else np.zeros(f.labels.shape[:2], np.uint8)
        if n:
            found.add(f.name)
        bar.update()
    bar.close()
    return counts_of(faces, lambda f: preds[f.name]), found


def _dilated(drawn, amounts):
    import cv2

    out = np.where(np.isin(drawn, (1, 6, 7)), drawn, 0).astype(np.uint8)
    for c in (2, 4, 5, 3):   # the order the mesh drawing paints them
        mask = (drawn == c).astype(np.uint8)
        a = amounts[c]
        if a:
            k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * abs(a) + 1, 2 * abs(a) + 1))
            mask = cv2.dilate(mask, k) if a > 0 else cv2.erode(mask, k)
        out[mask > 0] = c
    return out


def mesh_drawn_counts(faces, dilate=False):
    """Counts of the mesh drawn as polygons; with ``dilate``, each part grown by
    the amount best on the other people (each held-out person's own choice)."""
    from facesegment.faces.mesh import draw_mesh_parts

    drawn = {f.name: (np.zeros(f.labels.shape[:2], np.uint8) if f.mesh is None
                      else draw_mesh_parts(f.mesh, f.labels.shape[:2])) for f in faces}
    if not dilate:
        return counts_of(faces, lambda f: drawn[f.name]), {}
    grid = {}
    for a in DILATE_GRID:   # one class at a time: the others do not touch its score
        amounts = {c: a for c in (2, 3, 4, 5)}
        grid[a] = counts_of(faces, lambda f: _dilated(drawn[f.name], amounts))
    counts, chosen = {}, {}
    for g, held in _groups(faces):
        best = {}
        for i, c in enumerate(CLASSES):
            if c == 0:
                continue
            best[c] = max(DILATE_GRID, key=lambda a: _jac(grid[a], [f.name for f in faces
                                                                     if f.group != g], i))
        chosen[str(g)] = {str(c): a for c, a in best.items()}
        for f in held:
            counts[f.name] = counts_of([f], lambda f: _dilated(drawn[f.name], best))[f.name]
    return counts, chosen


def _groups(faces):
    groups = sorted({f.group for f in faces}, key=str)
    return [(g, [f for f in faces if f.group == g]) for g in groups]


def _jac(counts, names, i):
    tot = sum((counts[n][i] for n in names), np.zeros(2, np.int64))
    return tot[0] / tot[1] if tot[1] else 0.0


def gain_candidates():
    for n, m, e in product(GAIN_GRID["nose"], GAIN_GRID["mouth"], GAIN_GRID["eyes"]):
        yield (1.0, 1.0, n, m, e, e)


def forest_counts(faces, method, extra=(), cache=None, name=None):
    """Counts of a method's mesh-forest stages, leave-people-out, with each held-out
    person's decision rule (the first stage's share from ``method.mixes`` and the
    class gains) chosen on the other people's held-out predictions.

    ``method`` is a :class:`pipelines.handdrawn_common.Method`; ``extra``: faces
    of another dataset trained in every fold; ``cache``: a folder where the stage
    probabilities of the method called ``name`` are kept
    (:mod:`pipelines.handdrawn_cache`)."""
    from facesegment.faces.mesh_stages import mix_stages
    from facesegment.faces.mesh_train import cross_validate, photo_labels
    from pipelines.handdrawn_cache import cache_key, load_stages, save_stages
    from pipelines.handdrawn_gains import GainSearch

    m = method
    train = weigh_turned(faces, m.turned_weight)
    key = cache_key(name, [m.kind, m.stages, m.trees, m.pixels, m.mirror, m.margin,
                           m.mirror_fit] + ([] if m.early is None else [m.early])
                    + ([] if m.coarse is None else [["coarse", m.coarse]])
                    + ([] if m.refit is None else [["refit", m.refit]]),
                    list(train) + list(extra), SEED) if cache is not None else None
    hit = load_stages(cache, name, key)
    if hit is None:
        t0 = time.perf_counter()
        stages = cross_validate(train, lambda: make_forest(m.kind, m.trees), m.stages,
                                m.pixels, SEED, progress=log, extra=extra, mirror=m.mirror,
                                mirror_fit=m.mirror_fit, reading=m.reading, refit=m.refit)
        seconds = time.perf_counter() - t0
        save_stages(cache, name, key, stages, seconds)
    else:
        stages, seconds = hit
    mixes = m.mixes
    raws, by_rule = {}, {}
    for w in mixes:   # the search ranks the candidates; the chosen ones are scored exactly
        raws[w] = {n: None if p is None else mix_stages(p, w) for n, p in stages.items()}
        search = GainSearch(faces, raws[w])
        by_rule.update({(w, g): search.counts(g) for g in gain_candidates()})
    exact = {}
    counts, chosen = {}, {}
    for g, held in _groups(faces):
        others = [f.name for f in faces if f.group != g]
        best = max(by_rule, key=lambda rule: _mean_jac(by_rule[rule], others))
        chosen[str(g)] = {"mix": best[0], "gains": list(best[1])}
        if best not in exact:
            w, gains = best
            exact[best] = counts_of(faces, lambda f: photo_labels(f, raws[w][f.name], gains))
        for f in held:
            counts[f.name] = exact[best][f.name]
    every = [f.name for f in faces]
    overall = max(by_rule, key=lambda rule: _mean_jac(by_rule[rule], every))
    return counts, {"gains_per_fold": {g: c["gains"] for g, c in chosen.items()},
                    "mix_per_fold": {g: c["mix"] for g, c in chosen.items()},
                    "gains": list(overall[1]), "mix": overall[0], "mixes": list(mixes),
                    "cv_seconds": round(seconds, 1)}


def pan_cv(faces):
    """Leave-people-out error of the pan estimate (:mod:`facesegment.faces.pose`)."""
    from facesegment.faces.pose import fit_pan_model

    have = [f for f in faces if f.mesh is not None and f.pan == f.pan]
    err = {}
    for g, _ in _groups(have):
        train = [f for f in have if f.group != g]
        model = fit_pan_model([f.mesh for f in train], [f.pan for f in train])
        for f in have:
            if f.group == g:
                err[f.name] = model.predict(f.mesh) - f.pan
    pans = sorted({f.pan for f in have})
    per = {str(int(p)): round(float(np.mean([abs(err[f.name]) for f in have if f.pan == p])), 1)
           for p in pans}
    return {"mae": round(float(np.mean(np.abs(list(err.values())))), 2),
            "max_error": round(float(np.max(np.abs(list(err.values())))), 1),
            "n": len(err), "per_pan_mae": per}


def _mean_jac(counts, names):
    return float(np.mean([_jac(counts, names, i) for i in range(len(CLASSES))]))


def run_cv(data, methods, with_shipped=True, faces300w=FACES300W, cache=None):
    refits = [FOREST_METHODS[m].refit for m in methods if FOREST_METHODS[m].refit is not None]
    faces = prepare(data, mirror=any(FOREST_METHODS[m].mirror for m in methods),
                    mirror_fit=any(FOREST_METHODS[m].mirror_fit for m in methods),
                    refit=min(refits) if refits else None)
    out = {"data": str(data), "n_photos": len(faces),
           "n_people": len({f.group for f in faces}),
           "mesh_found": sum(f.mesh is not None for f in faces),
           "detection": {}, "methods": {}}
    for f in faces:
        out["detection"][f.detection or "none"] = out["detection"].get(f.detection or "none", 0) + 1
    subset = None
    rows = {}
    if with_shipped:
        for name in ("faces300w-landmarks", "faces300w-two-probe"):
            log(f"{name} end to end")
            counts, found = shipped_counts(faces, name)
            if name == "faces300w-landmarks":
                subset = found
            rows[name] = (counts, {"found": len(found)})
    rows["mesh-drawn"] = (mesh_drawn_counts(faces)[0], {})
    counts, chosen = mesh_drawn_counts(faces, dilate=True)
    rows["mesh-drawn-dilated"] = (counts, {"dilation_per_fold": chosen})
    crops = {}
    for m in methods:
        me = FOREST_METHODS[m]
        log(f"{m}: {me.stages} stage(s) of {me.trees} {me.kind} trees, {me.pixels} pixels per "
            "face" + (f", faces300w's crops at weight {me.faces300w}" if me.faces300w else "")
            + ((", mirror-averaged (the mirrored photo's own mesh fit)" if me.mirror_fit
                else ", mirror-averaged") if me.mirror else "")
            + ("" if me.margin is None else f", {margin_text(me.margin)} outside the oval")
            + ("" if me.early is None else
               f", the last {me.trees - me.early[0]} trees only where the first {me.early[0]} "
               f"are below {me.early[1]:g}")
            + ("" if me.coarse is None else
               f", every other pixel read first (gap {me.coarse:g})")
            + ("" if me.refit is None else
               f", faces turned {me.refit:g} or more read with their fits refitted too")
            + ("" if me.turned_weight == 1.0 else
               f", photos turned {TURNED} degrees or more weigh {me.turned_weight:g}")
            + ("" if me.mixes == (0.0,) else
               f", stage 1's share from {len(me.mixes)} candidates")
            + ", leave-people-out")
        if me.faces300w and me.faces300w not in crops:
            crops[me.faces300w] = prepare_faces300w(faces300w, me.faces300w)
        counts, extra = forest_counts(faces, me, crops.get(me.faces300w, ()), cache, m)
        rows[m] = (counts, {**extra, "trees": me.trees, "pixels_per_face": me.pixels,
                            "faces300w_weight": me.faces300w, "mirror": me.mirror,
                            "margin": me.margin, "mirror_fit": me.mirror_fit,
                            "early": me.early, "coarse": me.coarse, "refit": me.refit,
                            "turned_weight": me.turned_weight})
    for name, (counts, extra) in rows.items():
        out["methods"][name] = {**summarise(faces, counts, subset), **extra}
    out["pan"] = pan_cv(faces)
    out["far_eye_drawn"] = far_eye_drawn(faces)
    out["default_found"] = None if subset is None else len(subset)
    return out


def write_docs(cv):
    """docs/handdrawn.md and the README's hand-drawn table from a cv report."""
    from facesegment.atomic import write_text_atomic
    from pipelines.handdrawn_report import with_readme_table, write_doc
    from pipelines.handdrawn_common import best_method

    bench = ROOT / "reports" / "bench" / "mesh.json"
    write_doc(cv, DOC, json.loads(bench.read_text()) if bench.is_file() else None)
    readme = ROOT / "README.md"
    write_text_atomic(readme, with_readme_table(readme.read_text(), cv, best_method(cv)))
    log(f"wrote {DOC} and the README's table")


def faces300w_scores(data, names=("faces-handdrawn", "faces300w-landmarks")):
    """Each shipped model's class-average Jaccard (8 classes, strict: 15-px border
    excluded) on faces300w's test crops, each crop searched and segmented as
    ``facesegment.segment`` does; a crop without a face found is background."""
    from facesegment.api import load_model, segment
    from facesegment.data.imageio import read_image, read_label
    from facesegment.evaluation.metrics import (border_mask, class_average, confusion_matrix,
                                                jaccard)
    from facesegment.progress import Progress

    paths = sorted((Path(data) / "test").glob("*.jpg"))
    out = {}
    for name in names:
        model = load_model(name)
        conf, found = 0, 0
        bar = Progress(len(paths), f"faces300w {name}", "crops")
        for p in paths:
            img = read_image(p)
            faces = segment(img, model)
            pred = faces[0].labels if faces else np.zeros(img.shape[:2], np.uint8)
            found += bool(faces)
            truth = read_label(str(p)[:-4] + "_label.png")
            conf = conf + confusion_matrix(truth, pred, mask=border_mask(truth.shape))
            bar.update()
        bar.close()
        jac = jaccard(conf)
        out[name] = {"mean": round(float(class_average(jac)), 2), "found": found,
                     "n": len(paths), "per_class": [round(float(v), 1) for v in jac]}
        log(f"faces300w test crops: {name} {out[name]['mean']} ({found} of {len(paths)} found)")
    return out


def keep_other_methods(res, old_path, methods):
    """``res`` with the forest-method rows of the report at ``old_path`` that
    ``methods`` did not compute again (same data and photos only)."""
    if not old_path.is_file():
        raise SystemExit(f"handdrawn: --keep-others needs an existing report at {old_path}")
    old = json.loads(old_path.read_text())
    same = ("data", "n_photos", "n_people", "mesh_found", "default_found")
    if any(old.get(k) != res.get(k) for k in same):
        raise SystemExit(f"handdrawn: {old_path} is of other photos ({', '.join(same)} "
                         "differ); run cv without --keep-others")
    for m, row in old["methods"].items():
        if m in FOREST_METHODS and m not in methods:
            res["methods"][m] = row
    if "faces300w" in old:   # the shipped models' faces300w scores: not computed by cv
        res.setdefault("faces300w", old["faces300w"])
    res["methods"] = dict(sorted(res["methods"].items()))
    return res


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pipelines.handdrawn", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    cv = sub.add_parser("cv", help="leave-people-out scores of every method")
    cv.add_argument("--data", default="../shared/data/fasseg-v3-train")
    cv.add_argument("--methods", nargs="*", default=list(DEFAULT_METHODS),
                    choices=list(FOREST_METHODS))
    cv.add_argument("--no-shipped", action="store_true", help="skip the shipped models' rows")
    cv.add_argument("--faces300w", default=str(FACES300W),
                    help="faces300w (its train/ crops) for the methods that add them")
    cv.add_argument("--out", default=str(REPORT))
    cv.add_argument("--cache", default=None, metavar="DIR",
                    help="keep each forest method's leave-people-out stage probabilities in "
                         "DIR and reuse them while its forests, the photos and the code are "
                         "the same (pipelines/handdrawn_cache.py)")
    cv.add_argument("--keep-others", action="store_true",
                    help="keep the rows of the forest methods not in --methods from the "
                         "existing report (every other row is computed again)")
    md = sub.add_parser("model", help="train the best method on every photo and ship it")
    md.add_argument("--data", default="../shared/data/fasseg-v3-train")
    md.add_argument("--name", default="faces-handdrawn")
    md.add_argument("--cv", default=str(REPORT))
    md.add_argument("--dest", default=None, help="models folder (default: the package's)")
    md.add_argument("--faces300w", default=str(FACES300W),
                    help="faces300w (its train/ crops) when the chosen method adds them")
    sub.add_parser("doc", help="write docs/handdrawn.md and the README's table from the "
                              "cv report")
    cd = sub.add_parser("card", help="write the shipped model's card and its "
                                     "leave-people-out metrics again (after "
                                     "benchmarks/bench_mesh.py or a cv run)")
    cd.add_argument("--name", default="faces-handdrawn")
    fw = sub.add_parser("faces300w", help="the shipped default and the landmark votes on "
                                          "faces300w's test crops (into the cv report)")
    fw.add_argument("--data", default="../shared/data/faces300w")
    args = p.parse_args(argv)
    from facesegment.atomic import write_json_atomic

    if args.cmd == "cv":
        res = run_cv(args.data, args.methods, not args.no_shipped, args.faces300w,
                     args.cache)
        if args.keep_others:
            res = keep_other_methods(res, Path(args.out), args.methods)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(args.out, res, indent=2, sort_keys=True)
        log(f"wrote {args.out}")
        write_docs(res)
        return 0
    if args.cmd == "doc":
        write_docs(json.loads(REPORT.read_text()))
        return 0
    if args.cmd == "card":
        from pipelines.handdrawn_ship import rewrite_card

        rewrite_card(args.name)
        return 0
    if args.cmd == "faces300w":
        cv = json.loads(REPORT.read_text())
        cv["faces300w"] = faces300w_scores(args.data)
        write_json_atomic(REPORT, cv, indent=2, sort_keys=True)
        write_docs(cv)
        return 0
    from pipelines.handdrawn_ship import ship

    ship(args.data, args.name, json.loads(Path(args.cv).read_text()), args.dest, args.faces300w)
    return 0


if __name__ == "__main__":
    from facesegment.atomic import overwriting

    with overwriting():   # the repository's own reports and models are regenerated
        sys.exit(main())
