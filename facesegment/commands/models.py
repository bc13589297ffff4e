"""``facesegment models``: the shipped models, their terms and headline scores."""

from ..faces import mesh
from ..models import DEFAULT, LANDMARKS, model_path, shipped

HELP = "list the shipped models: what each is, its terms of use and its headline score"
DESCRIPTION = """\
List the models shipped with facesegment (give one to --model by name): its
kind, whether it is the default, what it needs, the terms its training data
puts on it, and its headline score with the protocol it comes from. The code
is MIT; every shipped model is for research use, because each was trained on
data with research-only terms (each folder's MODEL_CARD.md says which).

examples:
  facesegment models
"""

#: Terms of each shipped model (its training data's), and its headline score's source.
TERMS = {
    "faces-handdrawn": "research use: FASSEG's hand-drawn masks (cite Khan, Mauro, Leonardi); "
                       "MediaPipe's face mesh networks: Apache 2.0",
    "faces300w-landmarks": "research use: 300-W annotations, AFW/HELEN photos, dlib's "
                           "iBUG-trained 68-point predictor",
    "faces300w-two-probe": "research use: 300-W annotations, AFW/HELEN photos",
}


def add_arguments(p):
    """Add the options of ``facesegment models`` to its sub-parser.

    ``models`` has no options.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The sub-parser of ``models``.
    """


def _score(name, path):
    """The headline score line of a shipped model (from its own files)."""
    import json

    for doc_name in ("mesh-model.json", "landmark-model.json", "model.json"):
        doc_path = path / doc_name
        if not doc_path.is_file():
            continue
        metrics = json.loads(doc_path.read_text()).get("metrics") or {}
        if "leave_people_out" in metrics:
            row = metrics["leave_people_out"]
            return (f"{row['all']['mean']:.2f} leave-people-out on fasseg-v3-train's hand-drawn "
                    "masks (class-average Jaccard, all photos)")
        if "test crops" in metrics:
            return f"{metrics['test crops']:.2f} on faces300w's test crops (polygon labels)"
        break
    return "in MODEL_CARD.md"


def run(args):
    """List the shipped models: kind, whether default, terms, headline score, card.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``facesegment models`` (see :func:`add_arguments`).

    Returns
    -------
    int
        The exit status: 0.
    """
    for name in shipped():
        path = model_path(name)
        kind = ("mesh-forest" if (path / "mesh-model.json").is_file() else "landmark-votes"
                if (path / "landmark-model.json").is_file() else "forest")
        marks = []
        if name == DEFAULT:
            marks.append("the default" + ("" if mesh.mesh_available() else
                                          f" (needs MediaPipe's face mesh; now {LANDMARKS})"))
        elif name == LANDMARKS and not mesh.mesh_available():
            marks.append("the default now (MediaPipe's face mesh is not installed)")
        print(f"{name}  [{kind}{'; ' + '; '.join(marks) if marks else ''}]")
        print(f"    terms: {TERMS.get(name, 'see MODEL_CARD.md')}")
        print(f"    score: {_score(name, path)}")
        print(f"    card:  {path / 'MODEL_CARD.md'}")
    return 0
