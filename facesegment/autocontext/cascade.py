"""Auto-context cascades: several forests in a row, one model folder.

Stage 1 is an ordinary model over the image's windows; stage ``k >= 2`` is a
model over the context layout (:func:`facesegment.autocontext.context.context_layout`):
the image window plus the context planes of stage ``k-1``'s class
probabilities (``predict_proba_raw`` in "full" mode, before any reweighting).
A :class:`Cascade` behaves like its last stage for everything that scores or
reweights (``arrays``, ``sampling_factors``, ``metrics`` with the selected α
and β, ``position``, ``classes``), with the image's layout as its ``layout``;
dense inference (:mod:`facesegment.dense`) runs the earlier stages first to
build the last stage's planes (:meth:`Cascade.context`), so ``predict_image``,
``evaluate``, ``segment`` and the figures take a cascade like any model.
Training: :mod:`facesegment.autocontext.cascade_fit` (out-of-fold maps, no leakage).

The folder::

    cascade.json   format "facesegment-cascade", format_version, package_version,
                   kind ("cascade"), stage_kinds, context (ContextSpec.to_dict()),
                   provenance, metrics (of the last stage)
    stage-1/       a model folder (facesegment.modelio.model)
    stage-2/ ...   model folders over the context layout
"""

from pathlib import Path

from .. import __version__, dense
from ..atomic import MANIFEST, write_json_atomic
from ..modelio._model_class import Model
from ..modelio._model_doc import parse, read_json_text
from ..modelio._model_files import (check_model_output, jsonable, load_model_folder,
                                    save_model_folder, write_folder)
from .context import ContextSpec, as_u8, context_maps, context_planes
from ..errors import DataError
from ..modelio._forest_faces import ForestFaces

CASCADE_FORMAT = "facesegment-cascade"
CASCADE_FORMAT_VERSION = 1
CASCADE_FILE = "cascade.json"
#: Most stages of a cascade (folders stage-1 .. stage-63).
MAX_STAGES = 63
_FIX = "train the cascade again (or point at another model folder)"


class Cascade(ForestFaces):
    """Stages of an auto-context cascade (a list of Models) and their context spec:
    a :class:`facesegment.modelio.protocol.FaceModel` (its face methods are the
    forests', :class:`facesegment.modelio._forest_faces.ForestFaces`)."""

    def __init__(self, stages, spec, provenance=None):
        if len(stages) < 2:
            raise ValueError(f"a cascade needs at least 2 stages, got {len(stages)}")
        if not isinstance(spec, ContextSpec):
            raise TypeError(f"spec must be a ContextSpec, got {type(spec).__name__}")
        self.stages = list(stages)
        self.spec = spec
        self.provenance = dict(provenance or {})

    def __repr__(self):
        return f"Cascade(stages={len(self.stages)}, kinds={self.stage_kinds})"

    # ------------------------------------------------ the model-like face
    @property
    def final(self):
        return self.stages[-1]

    @property
    def layout(self):
        """The image's layout (stage 1's)."""
        return self.stages[0].layout

    def __getattr__(self, name):
        # arrays, sampling_factors, class_names, classes, metrics, position, params, rule
        if name in ("arrays", "sampling_factors", "class_names", "classes", "metrics",
                    "position", "params", "mean", "std", "n_features", "rule"):
            return getattr(self.stages[-1], name)
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if name in ("metrics", "position", "rule"):
            setattr(self.stages[-1], name, value)
        else:
            object.__setattr__(self, name, value)

    @property
    def kind(self):
        return "cascade:" + ">".join(s.kind for s in self.stages)

    @property
    def stage_kinds(self):
        return [s.kind for s in self.stages]

    # ---------------------------------------------------------- inference
    def context(self, image, n_stages=None):
        """The context planes the stage ``n_stages`` (default: the last) reads:
        uint8 (H, W, spec.n_planes), from running the stages before it.

        Parameters
        ----------
        image : uint8 (H, W, C)
            The image, as :func:`facesegment.dense.predict_proba_raw` takes it.
        n_stages : int, optional
            The stage (1-based) whose planes are made; None (default): the last.

        Returns
        -------
        uint8 (H, W, spec.n_planes) or None
            None for stage 1, which reads no context.
        """
        n = len(self.stages) if n_stages is None else int(n_stages)
        planes = None
        for k, stage in enumerate(self.stages[:n - 1], 1):
            raw = dense.predict_proba_raw(stage, image, mode="full", planes=planes)
            maps = context_maps(as_u8(raw), self.spec, k, stage.sampling_factors,
                                self.position)
            planes = context_planes(maps, self.spec, self.position)
        return planes

    def save(self, folder):
        """Write the cascade as the folder ``folder`` (:func:`save_cascade`).

        Parameters
        ----------
        folder : str or Path

        Returns
        -------
        Path
            ``folder``.
        """
        return save_cascade(self, folder)

    def stage_model(self, k):
        """A cascade of the first ``k`` stages (k >= 2), or stage 1's model (k = 1).

        Parameters
        ----------
        k : int
            How many stages to keep, from 1 to ``len(self.stages)``.

        Returns
        -------
        Cascade or Model
        """
        return self.stages[0] if k == 1 else Cascade(self.stages[:k], self.spec,
                                                     self.provenance)


# ------------------------------------------------------------------ files

def is_cascade_folder(path):
    """Does ``path`` hold a cascade (a ``cascade.json`` file)?

    Parameters
    ----------
    path : str or Path
        A folder.

    Returns
    -------
    bool
    """
    return (Path(path) / CASCADE_FILE).is_file()


def save_cascade(cascade, path):
    """Write the cascade folder atomically (a temporary folder renamed into place);
    an existing cascade or model folder at ``path`` is replaced, anything else is
    refused (as :func:`facesegment.modelio.model.save_model`).

    Parameters
    ----------
    cascade : Cascade
        The cascade to write; each stage becomes a model folder ``stage-N``.
    path : str or Path
        The cascade folder.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    DataError
        When ``path`` is a cascade folder holding other files, is a file or
        folder that :func:`facesegment.modelio.model.check_model_output`
        refuses, or cannot be written.
    """
    path = Path(path)
    if is_cascade_folder(path):
        _check_own_files(path)
    else:
        check_model_output(path)

    def fill(tmp):
        """Write the stages' folders and the cascade's JSON file.

        Parameters
        ----------
        tmp : Path
            The temporary folder that replaces ``path`` afterwards.
        """
        for i, stage in enumerate(cascade.stages, 1):
            save_model_folder(stage, tmp / f"stage-{i}")
        write_json_atomic(tmp / CASCADE_FILE, {
            "format": CASCADE_FORMAT, "format_version": CASCADE_FORMAT_VERSION,
            "package_version": __version__, "kind": "cascade",
            "stage_kinds": cascade.stage_kinds, "n_stages": len(cascade.stages),
            "context": cascade.spec.to_dict(), "provenance": jsonable(cascade.provenance),
            "metrics": jsonable(cascade.metrics)}, indent=2, sort_keys=True)

    return write_folder(path, fill, "the cascade", "choose a writable folder with free space")


def _check_own_files(path):
    """Refuse to replace a cascade folder that holds someone else's files."""
    own = {CASCADE_FILE, MANIFEST} | {f"stage-{i}" for i in range(1, MAX_STAGES + 1)}
    other = sorted(p.name for p in path.iterdir() if p.name not in own)
    if other:
        raise DataError(path, f"holds files that are not the cascade's ({', '.join(other)})",
                        "move them away or choose another output folder")


def load_cascade(path, verify=True):
    """Load a cascade folder written by :func:`save_cascade`.

    Parameters
    ----------
    path : str or Path
        The cascade folder.
    verify : bool, optional
        Check the recorded sizes and SHA-256 of each stage's ``forest.h5``
        (default True).

    Returns
    -------
    Cascade
        Its ``folder`` is ``path``.

    Raises
    ------
    DataError
        When ``cascade.json`` is missing, unreadable, of another format or
        version, or incomplete; ``n_stages`` is not 2 to ``MAX_STAGES``; a
        stage cannot be loaded; or the stages' classes, layouts or position
        prior do not fit the cascade's context.
    """
    path = Path(path)

    doc = parse(read_json_text(path / CASCADE_FILE, _FIX), path / CASCADE_FILE)
    if not isinstance(doc, dict) or doc.get("format") != CASCADE_FORMAT:
        raise DataError(path / CASCADE_FILE, "is not a facesegment cascade file", _FIX)
    if doc.get("format_version") != CASCADE_FORMAT_VERSION:
        raise DataError(path / CASCADE_FILE, f"has format version {doc.get('format_version')}"
                        f", this facesegment reads {CASCADE_FORMAT_VERSION}", _FIX)
    try:
        spec = ContextSpec.from_dict(doc["context"])
        n = doc["n_stages"]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(path / CASCADE_FILE, f"is incomplete ({exc})", _FIX) from None
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_STAGES:
        raise DataError(path / CASCADE_FILE, f"field n_stages is {n!r}; expected an integer "
                        f"from 2 to {MAX_STAGES}", _FIX)
    if not isinstance(doc.get("provenance") or {}, dict):
        raise DataError(path / CASCADE_FILE, "field provenance is not a JSON object", _FIX)
    stages = [load_model_folder(Model, path / f"stage-{i}", verify) for i in range(1, n + 1)]
    for i, st in enumerate(stages[:-1], 1):
        if len(st.class_names) != spec.n_classes:
            raise DataError(path / f"stage-{i}", f"has {len(st.class_names)} classes, but the "
                            f"cascade's context reads {spec.n_classes}", _FIX)
    for i, st in enumerate(stages[1:], 2):
        want = stages[0].layout.channels + spec.n_planes
        if st.layout is None or st.layout.channels != want:
            raise DataError(path / f"stage-{i}", f"has layout "
                            f"{None if st.layout is None else st.layout.describe()}, not the "
                            f"context layout of {want} channels", _FIX)
    if spec.needs_prior and stages[-1].position is None:
        raise DataError(path / f"stage-{n}", "has no position prior, but the cascade's context "
                        "reads one (its prior planes or stage 1's decision maps)", _FIX)
    cascade = Cascade(stages, spec, doc.get("provenance"))
    cascade.folder = path   # its model card is read from there when asked
    return cascade


__all__ = ["Cascade", "save_cascade", "load_cascade", "is_cascade_folder",
           "CASCADE_FORMAT", "CASCADE_FORMAT_VERSION"]
