"""Segmenting folders of face photos: inputs, output files and the summary CSV.

Each photo is segmented by :func:`facesegment.faces.segment.segment_image`.
Outputs per image: ``NAME_label.png`` (class ids as a paletted
PNG: viewers show the class colours), ``NAME_overlay.png`` (classes blended
over the photo), optionally ``NAME_proba.npz`` (the class-probability maps),
and a row of the summary CSV.

Output names (:mod:`facesegment.faces.folder_inputs`): ``NAME`` is the
input's path relative to the input folder without its extension
(``sub/a.jpg`` -> ``sub/a``), unless two inputs of one folder share a name
(``a.jpg`` and ``a.png``): then both keep their extension (``a.jpg_label.png``,
``a.png_label.png``), so no output overwrites another.  The CSV names every
input by its relative path with extension.
"""

import os
import posixpath
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from .. import parallel
from ..atomic import (OVERWRITE_FIX, atomic_path, check_output_path, check_writable_folder,
                      write_bytes_atomic, written_by_facesegment)
from ..data import imageio
from ..data.imageio import IMAGE_EXTENSIONS, read_image, write_label_png
from ..rule import decision_rule
from .crops import DETECT_MAX_SIDE, DETECT_MODES, DETECTORS
from .folder_inputs import (LABEL_SUFFIX, OVERLAY_SUFFIX, PROBA_SUFFIX, SegmentInput,
                            collect_inputs, output_names)
from ..errors import DataError, SchedulerLostError, Terminated
from .resume import previous_rows
from .segment import overlay, photo_labels, segment_image

#: Summary CSV columns.
SUMMARY_FIELDS = ("name", "status", "faces", "width", "height", "seconds", "message", "output",
                  "detection", "paths", "pan")


# --------------------------------------------------------------- one image

@dataclass(frozen=True)
class SegmentOptions:
    """How each photo is segmented and what is written for it (one value for a
    whole folder; picklable, so it travels with the tasks).  Each field is
    :func:`segment_folder`'s parameter of the same name.
    """

    alpha: float | None = None
    detect: str = "auto"
    detector: str = "landmarks"
    save_proba: bool = False
    detect_size: int = DETECT_MAX_SIDE
    beta: float | None = None
    sigma: float | None = None
    legend: bool = True
    records: bool = False


@dataclass
class SegmentResult:
    """Outcome of one image (a row of the summary CSV)."""

    name: str            # input path relative to the input folder, with extension
    status: str          # "ok", "no face", "unreadable", "error", "not done"
    faces: int = 0
    width: int = 0
    height: int = 0
    seconds: float = 0.0
    message: str = ""
    output: str = ""     # OUTPUT_DIR/<output>_label.png etc. (when status is "ok")
    fatal: str = ""      # an output could not be written: the run stops (not in the CSV)
    detection: str = ""  # the detection pass that found the faces (facesegment.faces.crops.PASSES)
    paths: str = ""      # per face, ";"-joined: "mesh", "landmarks" or "landmark-free"
    pan: str = ""        # per face, ";"-joined: the head's turn in degrees (mesh models)
    records: list = None  # with ``records``: one dict per face (face_record; not in the CSV)

    @classmethod
    def from_row(cls, row):
        """The result of a summary CSV row.

        Parameters
        ----------
        row : dict of str
            One row of the summary CSV read back (e.g. by :class:`csv.DictReader`),
            as :func:`write_summary_csv` wrote it; empty numbers read as 0.

        Returns
        -------
        SegmentResult
            Without ``fatal`` and ``records``.
        """
        return cls(row["name"], row["status"], int(row["faces"] or 0), int(row["width"] or 0),
                   int(row["height"] or 0), float(row["seconds"] or 0), row["message"],
                   row["output"], detection=row["detection"], paths=row["paths"],
                   pan=row["pan"])


def write_proba_npz(path, proba, class_names, alpha):
    """Write ``NAME_proba.npz`` atomically.

    Parameters
    ----------
    path : path
        The ``.npz`` file to write.
    proba : float array (H, W, C)
        Class probabilities; stored as float16 under ``proba``.
    class_names : sequence of str
        The C class names; stored as ``class_names`` (C,) str.
    alpha : float
        The reweighting exponent used; stored as ``alpha``.

    Raises
    ------
    DataError
        The file cannot be written (e.g. a full disk).
    """
    with atomic_path(path, suffix=".npz", what="probability maps",
                     fix="free disk space or choose another OUTPUT_DIR") as tmp:
        np.savez_compressed(tmp, proba=proba.astype(np.float16),
                            class_names=np.array([str(c) for c in class_names]),
                            alpha=np.float64(alpha))


def segment_file(path, model, out_dir, name, options=SegmentOptions(), output=None):
    """Task: segment one file and write its outputs (top level, picklable).

    The outputs are ``out_dir/<output>_label.png`` (paletted: class ids with the
    class colours), ``<output>_overlay.png`` and, with ``options.save_proba``,
    ``<output>_proba.npz``.  Bad inputs are reported, never raised.  An output
    that cannot be written (full disk) is reported with ``fatal`` set; the
    outputs of that image written before it are removed.

    Parameters
    ----------
    path : path
        The photo.
    model : FaceModel
        The model that segments it.
    out_dir : path
        The output folder (its subfolders already made).
    name : str
        Names the input in the summary (relative path with extension).
    options : SegmentOptions
        How it is segmented and what is written.
    output : str, optional
        Relative output name without suffix; None: ``name`` without extension.

    Returns
    -------
    SegmentResult
        Status "ok", "no face", "unreadable" or "error".
    """
    o = options
    alpha = decision_rule(model, o.alpha, o.beta, o.sigma).alpha  # None: the model's (npz)
    save_proba = o.save_proba
    output = output if output is not None else posixpath.splitext(name)[0]
    t0 = time.perf_counter()
    try:
        image = read_image(path, orient=True)
    except DataError as exc:
        return SegmentResult(name, "unreadable", message=str(exc))
    except MemoryError:
        return SegmentResult(name, "error", message=f"{path}: not enough memory to read it")
    h, w = image.shape[:2]
    info = {}
    try:
        res = segment_image(model, image, alpha=alpha, detect=o.detect, detector=o.detector,
                            return_proba=save_proba, detect_size=o.detect_size, beta=o.beta,
                            sigma=o.sigma, info=info)
        labels, faces, proba = res if save_proba else (*res, None)
    except (ValueError, cv2.error) as exc:
        return SegmentResult(name, "error", 0, w, h, time.perf_counter() - t0,
                             f"{path}: {exc}")
    except MemoryError:
        return SegmentResult(name, "error", 0, w, h, time.perf_counter() - t0,
                             f"{path}: not enough memory to segment a {w}x{h} image")
    if labels is None:
        how = model.face_finder(o.detector)
        return SegmentResult(name, "no face", 0, w, h, time.perf_counter() - t0,
                             f"{path}: no face found by {how}")
    base = os.path.join(out_dir, *output.split("/"))
    marks = info.get("pan_marks")
    written = []
    try:
        for suffix, write in ((LABEL_SUFFIX, lambda p: write_label_png(p, labels)),
                              (OVERLAY_SUFFIX, lambda p: imageio.write_png_atomic(
                                  p, overlay(image, labels, marks, legend=o.legend))),
                              (PROBA_SUFFIX, lambda p: write_proba_npz(
                                  p, proba, model.class_names, alpha))):
            if suffix == PROBA_SUFFIX and not save_proba:
                continue
            write(base + suffix)
            written.append(base + suffix)
    except DataError as exc:
        for p in written:  # an image's outputs are all there or none
            try:
                os.remove(p)
            except OSError:
                pass
        return SegmentResult(name, "error", faces, w, h, time.perf_counter() - t0,
                             str(exc), fatal=str(exc))
    seconds = time.perf_counter() - t0
    rows = ([face_record(model, path, name, image.shape, f, k, seconds)
             for k, f in enumerate(info["faces"])] if o.records else None)
    return SegmentResult(name, "ok", faces, w, h, seconds, output=output,
                         detection=info.get("detection", ""),
                         paths=";".join(info.get("paths") or ()),
                         pan=";".join(f"{p:+.0f}" for p in info.get("pans") or ()),
                         records=rows)


def face_record(model, path, name, shape, face, index, seconds):
    """One face as a JSON-ready dict (``facesegment segment --json``).

    Parameters
    ----------
    model : FaceModel
        The model that segmented the photo.
    path : path
        The photo's file.
    name : str
        The photo's name in the summary.
    shape : tuple
        ``(H, W, ...)`` of the photo.
    face : PhotoFace
        The face (:func:`facesegment.faces.segment.photo_faces`).
    index : int
        The face's index in the photo (largest first).
    seconds : float
        The seconds its photo took (reading, segmenting, writing).

    Returns
    -------
    dict
        ``file``, ``name``, ``face``, ``width``, ``height``, ``box`` (rounded to
        0.01 pixel), ``landmarks`` (or None), ``pan`` (degrees, or None),
        ``detection``, ``path``, ``class_pixels`` (pixels of each class this face
        labels on the photo) and ``seconds``.
    """
    labels = photo_labels(model, shape, [face])[0]
    counts = np.bincount(labels.ravel(), minlength=len(model.class_names))
    marks = face.landmarks
    return {"file": os.fspath(path), "name": name, "face": index,
            "width": int(shape[1]), "height": int(shape[0]),
            "box": [round(float(v), 2) for v in face.box],
            "landmarks": None if marks is None else np.round(np.asarray(marks, float), 2).tolist(),
            "pan": None if face.pan != face.pan else round(float(face.pan), 1),
            "detection": face.detection, "path": face.path,
            "class_pixels": {str(c): int(n) for c, n in zip(model.class_names, counts)},
            "seconds": round(seconds, 4)}


def write_summary_csv(path, results):
    """Write the summary CSV (one row per input image) atomically.

    A file name that is not UTF-8 is written as its own bytes
    (surrogateescape): read the CSV back with ``errors="surrogateescape"``.

    Parameters
    ----------
    path : path
        The CSV file.
    results : iterable of SegmentResult
        One row each, with the columns :data:`SUMMARY_FIELDS`.

    Raises
    ------
    DataError
        The file cannot be written.
    """
    import csv
    import io

    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(SUMMARY_FIELDS)
    for r in results:
        wr.writerow([r.name, r.status, r.faces, r.width, r.height, f"{r.seconds:.3f}",
                     r.message, r.output, r.detection, r.paths, r.pan])
    # a file name that is not UTF-8 (the OS allows any bytes) is written as its own
    # bytes (surrogateescape): read the CSV back with errors="surrogateescape"
    write_bytes_atomic(path, buf.getvalue().encode("utf-8", "surrogateescape"),
                       what="summary")


# --------------------------------------------------------------- many images

def segment_folder(model, input_dir, output_dir, alpha=None, detect="auto",
                   detector="landmarks", scheduler=None, n_workers=None, progress=True,
                   save_proba=False, detect_size=DETECT_MAX_SIDE, beta=None, sigma=None,
                   legend=True, records=False, resume=False):
    """Segment the photos of ``input_dir`` into ``output_dir``.

    The output tree mirrors the input tree (``OUT/<rel>/NAME_label.png``,
    ``OUT/<rel>/NAME_overlay.png``, with ``save_proba`` ``OUT/<rel>/NAME_proba.npz``;
    names as in :func:`output_names`) and ``OUT/summary.csv`` lists every input.

    The summary is also written when the run stops early (Ctrl-C, SIGTERM,
    the loss of the Dask scheduler, an output that cannot be written): the
    images not finished are listed with status "not done", then the error is
    raised again.

    Parameters
    ----------
    model : FaceModel
        The model that segments the photos.
    input_dir : path, str or list of them
        A folder (searched recursively), an image file, a glob pattern, or a
        list of them (see :func:`collect_inputs`).
    output_dir : path
        The output folder; created if needed.
    alpha : float, optional
        Reweighting exponent; None: the model's decision rule's.
    detect : {"auto", "always", "never"}
        When a photo is searched for faces
        (:func:`facesegment.faces.segment.photo_faces`).
    detector : {"landmarks", "dlib"}
        How faces are found (:func:`facesegment.faces.crops.find_crops`).
    scheduler : None, str or distributed.Client
        None: local threads; otherwise a ``distributed`` scheduler
        (:func:`facesegment.parallel.map_tasks`).
    n_workers : int, optional
        Local workers (default: all cores).
    progress : bool
        Progress line on stderr.
    save_proba : bool
        Also write each photo's probability maps (:func:`write_proba_npz`).
    detect_size : int
        Longer side of the copy faces are detected on.
    beta, sigma : float, optional
        The position prior's exponent and the smoothing of the class maps
        (pixels of the crop); None: the model's decision rule's.
    legend : bool
        Draw the class key on the overlays.
    records : bool
        Fill each result's ``records`` (one :func:`face_record` per face).
    resume : bool
        Skip the images an earlier run into ``output_dir`` finished
        (:mod:`facesegment.faces.resume`; their summary rows are kept, they get
        no ``records``).

    Returns
    -------
    list of SegmentResult
        In input order.

    Raises
    ------
    ValueError
        ``detect`` or ``detector`` is not a known value.
    DataError
        No input; ``output_dir`` is an input folder or a file; it holds files
        this run would replace but did not write; it cannot be written; or an
        output could not be written (after the summary is written).
    """
    rule = decision_rule(model, alpha, beta, sigma)
    if detect not in DETECT_MODES:
        raise ValueError(f"detect={detect!r} is not one of {DETECT_MODES}")
    if detector not in DETECTORS:
        raise ValueError(f"detector={detector!r} is not one of {DETECTORS}")
    base, items = collect_inputs(input_dir)
    out = Path(output_dir)
    _prepare_output_folder(out, input_dir, base, items, save_proba)
    results = [None] * len(items)
    if resume:
        suffixes = (LABEL_SUFFIX, OVERLAY_SUFFIX) + ((PROBA_SUFFIX,) if save_proba else ())
        for i, row in previous_rows(out, items, suffixes).items():
            results[i] = SegmentResult.from_row(row)
    options = SegmentOptions(rule.alpha, detect, detector, save_proba, detect_size, rule.beta,
                             rule.sigma, legend, records)
    return _segment_items(model, items, results, out, options, scheduler, n_workers,
                          progress)


def _prepare_output_folder(out, input_dir, base, items, save_proba):
    """Check that ``out`` may take the outputs of ``items`` and create its folders.

    Raises DataError when ``out`` is an input folder or a file, holds label
    maps this run would replace but did not write, or cannot be written.
    """
    specs = [input_dir] if isinstance(input_dir, (str, os.PathLike)) else list(input_dir)
    input_folders = {base.resolve()} | {Path(s).resolve() for s in specs if Path(s).is_dir()}
    if out.resolve() in input_folders:
        raise DataError(out, "is the input folder", "write the outputs to another folder")
    if out.is_file():
        hint = (" (did the shell expand a pattern? quote it: 'photos/*.jpg')"
                if out.name.lower().endswith(_image_extensions()) else "")
        raise DataError(out, f"is a file, not a folder{hint}",
                        "give the output folder last")
    _refuse_label_maps_of_others(out, items)
    _check_outputs(out, items, save_proba)
    _make_output_folders(out, {posixpath.dirname(it.output) for it in items})


def _segment_items(model, items, results, out, options, scheduler, n_workers, progress):
    """Segment the items whose ``results`` entry is None, then write the summary.

    The summary is written also when the run stops early (every image not
    finished listed as "not done"), then the error is raised again.
    """
    todo = [i for i, r in enumerate(results) if r is None]
    stop, why = None, ""
    tasks = parallel.map_tasks(_segment_item, [items[i] for i in todo],
                               args=(model, str(out), options), scheduler=scheduler,
                               n_workers=n_workers, desc="segment", unit="images",
                               progress=progress)
    try:
        for j, res in tasks:
            results[todo[j]] = res
            if res.fatal:
                stop = DataError(None, f"{res.fatal}; stopped: {out / 'summary.csv'} lists the "
                                 "images finished")
                why = "not segmented: the run stopped because an output could not be written"
                break
    except BaseException as exc:
        why = _stop_reason(exc)
        raise
    finally:
        tasks.close()
        done = [r if r is not None else SegmentResult(it.name, "not done", message=why)
                for r, it in zip(results, items)]
        if why:  # the run stopped early: the summary is a best effort
            try:
                write_summary_csv(out / "summary.csv", done)
            except DataError:
                pass  # the error that stopped the run is the one reported
    if stop is not None:
        raise stop
    write_summary_csv(out / "summary.csv", done)
    return done


def _stop_reason(exc):
    """The summary's message for the images a stopped run did not segment."""
    if isinstance(exc, SchedulerLostError):
        return "not segmented: the Dask scheduler was lost"
    if type(exc).__name__ == "WorkersLostError":
        return "not segmented: every Dask worker was lost"
    if isinstance(exc, Terminated):
        return "not segmented: terminated (SIGTERM)"
    if isinstance(exc, KeyboardInterrupt):
        return "not segmented: interrupted"
    return f"not segmented: the run stopped ({type(exc).__name__})"


def _refuse_label_maps_of_others(out, items):
    """Refuse an OUTPUT_DIR holding a ``NAME_label.png`` this command would replace
    but did not write (ground truth: a label tree or a labelled-face folder).
    segment writes ``NAME_label.png`` and ``NAME_overlay.png`` together, so a
    label map without its overlay is someone else's, unless the folder's record
    says facesegment wrote it (:func:`facesegment.atomic.written_by_facesegment`)."""
    if not out.is_dir():
        return
    for it in items:
        base = os.path.join(out, *it.output.split("/"))
        if (os.path.lexists(base + LABEL_SUFFIX) and not os.path.lexists(base + OVERLAY_SUFFIX)
                and not written_by_facesegment(base + LABEL_SUFFIX)):
            raise DataError(out, f"holds label maps that `segment` did not write (e.g. "
                            f"{it.output}{LABEL_SUFFIX}, ground truth?); they would be "
                            "replaced", "write the outputs to a new or empty OUTPUT_DIR")


def _check_outputs(out, items, save_proba):
    """The output-path rule (:func:`facesegment.atomic.check_output_path`) on every
    file this run would write, before any work: a user's ``summary.csv`` or
    ``NAME_overlay.png`` in OUTPUT_DIR is refused, not replaced."""
    if not out.is_dir():
        return
    check_output_path(out / "summary.csv", "summary", OVERWRITE_FIX)
    suffixes = (LABEL_SUFFIX, OVERLAY_SUFFIX) + ((PROBA_SUFFIX,) if save_proba else ())
    for it in items:
        base = os.path.join(out, *it.output.split("/"))
        for suffix in suffixes:
            check_output_path(base + suffix, "segmentation", OVERWRITE_FIX)


def _image_extensions():
    return IMAGE_EXTENSIONS


def _make_output_folders(out, subfolders):
    """Create ``out`` and its ``subfolders`` and check that ``out`` can be written.

    Raises
    ------
    DataError
        Naming the folder that cannot be created or written, before any work.
    """
    problem, fix = "cannot write the outputs here", "choose a writable OUTPUT_DIR"
    check_writable_folder(out, problem, fix)
    folder = out
    try:
        for sub in sorted(s for s in subfolders if s):
            folder = os.path.join(out, sub)
            os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise DataError(folder, f"{problem} ({exc.strerror or exc})", fix) from exc


def _segment_item(item, model, out_dir, options):
    return segment_file(item.path, model, out_dir, item.name, options, output=item.output)
