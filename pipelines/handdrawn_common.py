"""What the hand-drawn pipeline's commands share: the methods, forests, data and
the choice of the shipped method (:mod:`pipelines.handdrawn`)."""

import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "reports" / "handdrawn" / "cv.json"
DOC = ROOT / "docs" / "handdrawn.md"
CLASSES = (0, 2, 3, 4, 5)


class Method(NamedTuple):
    """A forest-stage method: its forest kind, stages, trees per stage, trained
    pixels per hand-drawn face, the weight of faces300w's training crops (their
    pixels per face as a share of ``pixels``; 0: hand-drawn faces only),
    whether each crop's probabilities are averaged with its mirror image's, how
    far outside the face oval the forests read (1/64 of the crop; None: every
    pixel, :func:`facesegment.faces.mesh_read.read_region`), and whether the
    mirror image is read with the face mesh's own fit of the mirrored photo
    (``MeshModel.mirror_fit``), the candidate shares of the first stage mixed
    into the last one's output (``MeshModel.mix``; each held-out person's chosen on
    the other people, with the gains), and how the forests' later trees read the
    pixels (``MeshModel.early``; None: every tree reads every pixel), whether
    they read every other pixel first (``MeshModel.coarse``, the least lead of
    a read pixel's class for its neighbours to go unread; None: every pixel is
    read; the earlier stages' context in training is read the same way), and the
    pixels drawn from each photo turned :data:`TURNED` degrees or more, as a
    multiple of another photo's (:func:`weigh_turned`), and how far a face's
    mesh must be turned for it to be read with its refitted fits too
    (``MeshModel.refit``; None: never)."""

    kind: str
    stages: int
    trees: int
    pixels: int
    faces300w: float = 0.0
    mirror: bool = False
    margin: float | tuple | None = None
    mirror_fit: bool = False
    mixes: tuple = (0.0,)
    early: tuple | None = None
    coarse: float | None = None
    turned_weight: float = 1.0
    refit: float | None = None

    @property
    def reading(self):
        """How the method's stages read a crop
        (:class:`facesegment.faces.mesh_read.Reading`)."""
        from facesegment.faces.mesh_read import Reading

        return Reading(self.margin, self.early, self.coarse)


def margin_text(margin):
    """A method's or model's margin in words: ``6`` or ``6 (stage 1), 3 (stage 2)``."""
    if isinstance(margin, (list, tuple)):
        return ", ".join(f"{v:g} (stage {k + 1})" for k, v in enumerate(margin))
    return f"{margin:g}"


def one_margin(margin):
    """A margin as one number when every stage reads the same (None stays None);
    otherwise the list of per-stage margins."""
    if isinstance(margin, (list, tuple)):
        return margin[0] if len(set(margin)) == 1 else list(margin)
    return margin


#: The default method's coarse reading (``MeshModel.coarse``): a read pixel's
#: neighbours go unread where it leads by at least this much over its second class.
COARSE = 0.1
#: The default method's refit (``MeshModel.refit``): a face whose mesh is turned
#: this far (the nose tip's offset over the face oval's width,
#: :func:`facesegment.faces.mesh_refit.mesh_turn`; 0.45 lies between the 60 and
#: 90 degree pans of fasseg-v3-train) is read with its fits as found and refitted.
REFIT = 0.45

#: Photos turned this far (degrees, either way) or more are the turned ones
#: (:func:`weigh_turned`).
TURNED = 75


def weigh_turned(faces, weight):
    """The faces, those turned :data:`TURNED` degrees or more (by their labelled
    pan) as copies of ``weight`` times their weight (training pixels); the
    list itself when ``weight`` is 1."""
    import dataclasses

    if weight == 1.0:
        return faces
    return [dataclasses.replace(f, weight=f.weight * weight)
            if f.pan == f.pan and abs(f.pan) >= TURNED else f for f in faces]


def far_eye(pan):
    """The class of the eye turned away from the camera at ``pan`` degrees: eye R
    (5) for a negative pan, eye L (4) for a positive one."""
    return 5 if pan < 0 else 4


#: The forests read the pixels at most MARGIN (1/64 of the crop) outside the mesh's
#: face oval, background beyond (MeshModel.margin): wider than the farthest any
#: hand-drawn part of fasseg-v3-train lies outside it.
MARGIN = 6.0
#: The last of two stages reads only the pixels at most LAST_MARGIN outside the
#: oval (its context, the first stage's output, is read out to MARGIN as in
#: training): about a fifth fewer pixels for the second stage's forest.
LAST_MARGIN = 3.0


def part_mixes(base=0.25, nose=(0.25, 0.5), mouth=(0.25, 0.5, 0.75), eyes=(0.25, 0.5)):
    """Candidate shares of the first stage per training class (background and
    OTHER at ``base``; the parts from their grids; both eyes alike)."""
    return tuple((base, base, n, m, e, e) for n in nose for m in mouth for e in eyes)


#: Forest stage methods by name, each crop averaged with its mirror image as the
#: face mesh fits the mirrored photo (mesh-axis-2-crop-mirror: the crop mirrored
#: with its own mesh, the cheaper alternative).
#: mesh-co2 is not in the default run: one CO2 stage takes hours here.
_MIRRORED = dict(mirror=True, margin=MARGIN, mirror_fit=True)
FOREST_METHODS = {"mesh-axis": Method("axis", 1, 32, 4000, **_MIRRORED),
                  "mesh-axis-2": Method("axis", 2, 32, 2000, mixes=part_mixes(), coarse=COARSE,
                                        refit=REFIT,
                                        **{**_MIRRORED, "margin": (MARGIN, LAST_MARGIN)}),
                  "mesh-axis-2-as-found": Method("axis", 2, 32, 2000, mixes=part_mixes(),
                                                 coarse=COARSE,
                                                 **{**_MIRRORED,
                                                    "margin": (MARGIN, LAST_MARGIN)}),
                  "mesh-axis-2-full": Method("axis", 2, 32, 2000, mixes=part_mixes(),
                                             **{**_MIRRORED,
                                                "margin": (MARGIN, LAST_MARGIN)}),
                  "mesh-axis-2-early": Method("axis", 2, 32, 2000, mixes=part_mixes(),
                                              early=(16, 0.7),
                                              **{**_MIRRORED,
                                                 "margin": (MARGIN, LAST_MARGIN)}),
                  "mesh-axis-2-turned": Method("axis", 2, 32, 2000, mixes=part_mixes(),
                                               turned_weight=2.0,
                                               **{**_MIRRORED,
                                                  "margin": (MARGIN, LAST_MARGIN)}),
                  "mesh-axis-2-crop-mirror": Method("axis", 2, 16, 2000, mirror=True,
                                                    margin=MARGIN),
                  "mesh-two-probe": Method("two-probe", 1, 16, 2000, **_MIRRORED),
                  "mesh-axis-faces300w": Method("axis", 1, 32, 4000, 0.25, **_MIRRORED),
                  "mesh-co2": Method("co2", 1, 16, 2000, **_MIRRORED)}
DEFAULT_METHODS = ("mesh-axis", "mesh-axis-2", "mesh-axis-2-crop-mirror", "mesh-two-probe")
FACES300W = ROOT.parent / "shared" / "data" / "faces300w"
SEED = 0
#: Candidate gains of the parts (nose, mouth, eyes); background and OTHER keep 1.
GAIN_GRID = {"nose": (1.0, 1.2, 1.5), "mouth": (1.0, 1.25, 1.5, 2.0),
             "eyes": (1.0, 1.5, 2.0, 2.5, 3.0)}
#: Candidate dilations (pixels; negative: erosion) of the mesh's drawn parts.
DILATE_GRID = (-2, 0, 2, 4, 6)


def make_forest(kind, n_trees, seed=SEED):
    """An unfitted forest of one kind with the stage settings."""
    from facesegment.forest import AxisAlignedForest, CO2Forest, TwoProbeForest

    common = dict(min_samples_leaf=3, random_state=seed, n_jobs=-1)   # same trees any n_jobs
    if kind == "axis":
        return AxisAlignedForest(n_trees, max_features=16, **common)
    if kind == "two-probe":
        return TwoProbeForest(n_trees, n_pairs=200, **common)
    if kind == "co2":
        return CO2Forest(n_trees, init="best", n_pairs=200, **common)
    raise ValueError(f"unknown forest kind {kind!r}")


def log(msg):
    print(f"handdrawn: {msg}", file=sys.stderr, flush=True)


def prepare(data, finder=None, mirror=False, mirror_fit=False, refit=None):
    """Photos, labels and meshes of a hand-drawn dataset as PreparedFace records
    (with ``mirror``, the planes of each crop's mirror image too; with
    ``mirror_fit``, those of the face's fit on the mirrored photo, where the
    face mesh finds it; with ``refit``, a face turned at least that far gets its
    ``refit`` face, prepared with its fits refitted: ``Refitter.refits``)."""
    import cv2

    from facesegment.data.handdrawn import read_handdrawn
    from facesegment.data.imageio import read_image
    from facesegment.faces.mesh import MeshFinder
    from facesegment.faces.mesh_refit import Refitter, mesh_turn
    from facesegment.faces.mesh_train import prepare_face
    from facesegment.progress import Progress

    finder = finder or MeshFinder()
    refitter = Refitter()
    photos = read_handdrawn(data)
    bar = Progress(len(photos), "face mesh", "photos")
    faces = []
    for p in photos:
        image = read_image(p.image)
        labels = cv2.imread(str(p.labels), cv2.IMREAD_UNCHANGED)
        info = {}
        meshes = finder.find(image, info)[:1]
        twins = finder.mirror_fits(image, meshes) if mirror_fit else [None]
        face = prepare_face(image, labels, meshes[0] if meshes else None, p.name, p.group,
                            p.pan, info.get("detection", ""), mirror=mirror,
                            twin=twins[0] if twins else None)
        if refit is not None and meshes and mesh_turn(meshes[0]) >= refit:
            mesh, twin = refitter.refits(image, meshes[0], twins[0])
            face.refit = prepare_face(image, labels, mesh, p.name, p.group, p.pan,
                                      face.detection, mirror=mirror, twin=twin)
        face.extra["image"] = image
        faces.append(face)
        bar.update()
    bar.close()
    return faces


def prepare_faces300w(data, weight, finder=None):
    """faces300w's training crops as extra PreparedFace records (group
    ``"faces300w"``, never held out) of pixel weight ``weight``: their polygon
    labels with lower face and brows (1, 6, 7) as 254, face without a scored part,
    as the hand-drawn masks mark them."""
    import numpy as np

    from facesegment.data.imageio import read_image, read_label
    from facesegment.faces.mesh import MeshFinder
    from facesegment.faces.mesh_train import prepare_face
    from facesegment.progress import Progress

    finder = finder or MeshFinder()
    paths = sorted((Path(data) / "train").glob("*.jpg"))
    if not paths:
        raise SystemExit(f"handdrawn: no faces300w training crops in {Path(data) / 'train'}; "
                         "pass --faces300w")
    faces = []
    with Progress(len(paths), "faces300w mesh", "crops") as bar:
        for p in paths:
            image = read_image(p)
            labels = read_label(str(p)[:-4] + "_label.png").astype(np.uint8)
            labels = np.where(np.isin(labels, (1, 6, 7)), 254, labels).astype(np.uint8)
            meshes = finder.find(image)
            if meshes:
                face = prepare_face(image, labels, meshes[0], p.stem, "faces300w")
                face.weight = float(weight)
                faces.append(face)
            bar.update()
    return faces


def best_method(cv):
    """The method of :data:`DEFAULT_METHODS` with the best leave-people-out mean
    on the photos the previous default finds (all photos when that row is
    missing); the other forest methods are measured beside them, never shipped."""
    key = "default_found" if cv.get("default_found") else "all"
    forests = {m: r for m, r in cv["methods"].items() if m in DEFAULT_METHODS}
    if not forests:
        raise SystemExit("handdrawn: the cv report has no forest method; run `cv` first")
    return max(forests, key=lambda m: forests[m][key]["mean"])


