"""Segmenting videos: every frame (or every n-th), faces tracked and smoothed.

A video file (:data:`VIDEO_EXTENSIONS`, read with OpenCV's ``cv2.VideoCapture``)
is segmented frame by frame with :func:`facesegment.faces.segment.photo_faces`,
the faces every entry point sees.  Outputs (``NAME`` as for photos):

``NAME_labels.mp4``   each frame's labels in the class colours
                      (:data:`facesegment.classes.CLASS_COLORS`), one frame per
                      frame processed, at the input's frame rate divided by ``every``
``NAME_overlay.mp4``  the classes blended over the frames (class key, pans)
``NAME_frames.csv``   one row per frame processed (:data:`FRAME_FIELDS`)

Tracking and smoothing (:func:`segment_frames`): each face is matched to the
face of the previous frame processed whose crop box overlaps it most
(intersection over union at least :data:`MATCH_IOU`, one face to one face),
and keeps that face's track id.  Each face's class probabilities (in its
crop, which follows the face) are then averaged with those of the same track
in the ``smooth`` frames before and after it, pixel by pixel of the crops
(:func:`smooth_proba`), and the frame's labels are the argmax of the averages
pasted back through the frame's own crop boxes.  ``benchmarks/bench_video.py`` measures what it does to
the label flicker of a jittered clip.  Output frames lag the input by
``smooth`` frames, held in memory.
"""

import contextlib
import os
import time
from collections import deque
from dataclasses import dataclass, replace

import cv2
import numpy as np

from ..atomic import atomic_path, write_bytes_atomic
from ..bounds import check
from ..classes import CLASS_COLORS
from ..errors import DataError
from ..progress import Progress
from .folder import SegmentResult, face_record
from .segment import overlay, photo_faces, photo_labels

#: The file extensions ``facesegment segment`` reads as videos.
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v")
#: Output files per video: NAME + suffix.
LABELS_VIDEO_SUFFIX, OVERLAY_VIDEO_SUFFIX, FRAMES_SUFFIX = ("_labels.mp4", "_overlay.mp4",
                                                            "_frames.csv")
#: Per-frame CSV columns.
FRAME_FIELDS = ("frame", "time", "faces", "tracks", "pan", "detection", "seconds")
#: Least crop-box overlap (intersection over union) that continues a track.
MATCH_IOU = 0.3
#: Frames before and after each frame whose faces are averaged with its own.
DEFAULT_SMOOTH = 2
#: Frame rate assumed when a video does not state one.
DEFAULT_FPS = 25.0
_UNREADABLE_FIX = ("check that it plays, or convert it: ffmpeg -i CLIP -c:v libx264 "
                   "clip.mp4")


def is_video(path):
    """Whether ``path`` names a video by its extension (:data:`VIDEO_EXTENSIONS`).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    bool
        Compared ignoring case.
    """
    return os.fspath(path).lower().endswith(VIDEO_EXTENSIONS)


@dataclass
class VideoInfo:
    """What a video says about itself (:func:`open_video`)."""

    fps: float       # frames per second (:data:`DEFAULT_FPS` when it states none)
    frames: int      # frame count the container states (0: unknown; may be approximate)
    width: int
    height: int


@dataclass
class VideoFrame:
    """One processed frame (:func:`segment_frames`)."""

    index: int            # the frame's index in the video (0-based)
    time: float           # seconds from the start
    image: np.ndarray     # RGB uint8 (H, W, 3)
    labels: np.ndarray    # uint8 (H, W): the smoothed labels
    faces: list           # PhotoFace, smoothed class probabilities
    tracks: list          # each face's track id
    seconds: float        # segmenting and smoothing it


def open_video(path):
    """Open a video and read what it states.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    capture : cv2.VideoCapture
        Opened; the caller releases it.
    info : VideoInfo

    Raises
    ------
    DataError
        One line naming the file and the fix when it is missing, not a regular
        file, or cannot be opened or decoded.
    """
    import stat

    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise DataError(path, f"video cannot be read ({exc.strerror or exc})",
                        "check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataError(path, "is not a regular file", "give a video file")
    if st.st_size == 0:
        raise DataError(path, "video is empty (0 bytes)", "copy the video again")
    cap = cv2.VideoCapture(path)
    if not cap.isOpened():
        cap.release()
        raise DataError(path, "not a readable video (corrupt, truncated or not a video)",
                        _UNREADABLE_FIX)
    fps = cap.get(cv2.CAP_PROP_FPS)
    frames = cap.get(cv2.CAP_PROP_FRAME_COUNT)
    info = VideoInfo(fps if fps == fps and 0 < fps < 1000 else DEFAULT_FPS,
                     int(frames) if frames == frames and frames > 0 else 0,
                     int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
                     int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    return cap, info


def read_frames(capture, fps, every=1):
    """Read every ``every``-th frame of an opened capture, until it ends.

    Frames 0, every, 2*every, ... are decoded; those between are only grabbed.

    Parameters
    ----------
    capture : cv2.VideoCapture
        Opened (:func:`open_video`).
    fps : float
        Frames per second, for the frames' times.
    every : int
        Keep one frame in ``every``.

    Yields
    ------
    index : int
        The frame's index in the video (0-based).
    seconds : float
        ``index / fps``.
    frame : uint8 (H, W, 3)
        RGB (grey frames converted).
    """
    index = 0
    while True:
        if index % every:
            if not capture.grab():
                return
        else:
            ok, frame = capture.read()
            if not ok or frame is None:
                return
            if frame.ndim == 2:
                frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2RGB)
            else:
                frame = cv2.cvtColor(frame[..., :3], cv2.COLOR_BGR2RGB)
            yield index, index / fps, frame
        index += 1


# --------------------------------------------------------------- tracking and smoothing

def box_iou(a, b):
    """Intersection over union of two square boxes.

    Parameters
    ----------
    a, b : (x0, y0, side)

    Returns
    -------
    float
        In 0..1; 0 when the union is empty.
    """
    iw = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    ih = min(a[1] + a[2], b[1] + b[2]) - max(a[1], b[1])
    inter = max(iw, 0.0) * max(ih, 0.0)
    union = a[2] * a[2] + b[2] * b[2] - inter
    return inter / union if union > 0 else 0.0


def match_tracks(previous, boxes, next_id, min_iou=MATCH_IOU):
    """Track ids for the faces ``boxes`` of a frame.

    Parameters
    ----------
    previous : list of (track id, box)
        The faces of the previous frame processed.
    boxes : list of (x0, y0, side)
    next_id : int
        The id a new track gets (then the next ones).
    min_iou : float
        Least overlap that continues a track.

    Returns
    -------
    ids : list of int
        One per box: the track of the previous face it overlaps most (pairs
        taken greedily, best overlap first, one face to one face), else a new id.
    next_id : int
        The id the next new track gets.
    """
    pairs = sorted(((box_iou(pb, b), i, j) for i, (_, pb) in enumerate(previous)
                    for j, b in enumerate(boxes)), reverse=True)
    ids, used = [None] * len(boxes), set()
    for iou, i, j in pairs:
        if iou < min_iou:
            break
        if i not in used and ids[j] is None:
            ids[j] = previous[i][0]
            used.add(i)
    for j, v in enumerate(ids):
        if v is None:
            ids[j], next_id = next_id, next_id + 1
    return ids, next_id


def smooth_proba(face, others):
    """``face``'s crop probabilities averaged with those of ``others``, crop pixel by pixel.

    Each face's crop box follows the face (its mesh or landmarks), so a crop
    pixel is the same point of the face in every frame: the average is taken
    in the face's own frame, and a face that moved is not blurred by its
    motion.  (Averaging the same *photo* pixels instead, i.e. warping each crop
    by the boxes' offset, blurs by the motion: ``benchmarks/bench_video.py``
    measured twice the flicker of no smoothing that way.)  Faces whose crop
    has another size are left out.

    Parameters
    ----------
    face : PhotoFace
        The face whose probabilities are smoothed.
    others : list of PhotoFace
        Faces of the same track in neighbouring frames.

    Returns
    -------
    float32 (S, S, C)
        Summing to 1 per pixel.
    """
    total = face.proba.astype(np.float32, copy=True)
    n = 1
    for g in others:
        if g.proba.shape == face.proba.shape:
            total += g.proba
            n += 1
    total /= n
    return total / np.maximum(total.sum(axis=-1, keepdims=True), 1e-12)


def segment_frames(model, frames, smooth=DEFAULT_SMOOTH, **photo_kw):
    """Segment a sequence of frames, tracking and smoothing its faces.

    Parameters
    ----------
    model : the model (``facesegment.load_model``)
    frames : iterable of (index, seconds, RGB uint8 image)
        E.g. :func:`read_frames`.
    smooth : int
        Average each face's class probabilities with those of its track in
        this many frames before and after it (0: each frame alone).
    **photo_kw
        ``detect``, ``detector``, ``detect_size``, ``alpha``, ``beta``,
        ``sigma``: as :func:`facesegment.faces.segment.photo_faces`.

    Yields
    ------
    VideoFrame
        In order, ``smooth`` frames behind the input.
    """
    smooth = check("smooth", smooth)
    window = deque()           # (index, seconds, image, faces, tracks, seconds of work)
    previous, next_id = [], 0

    def finish(k):
        """The finished :class:`VideoFrame` of the window's frame ``k``.

        Parameters
        ----------
        k : int
            Position in the window of frames held; its faces are smoothed with those
            of the same track in every other frame of the window.

        Returns
        -------
        VideoFrame
        """
        index, when, image, faces, tracks, secs = window[k]
        t0 = time.perf_counter()
        if smooth and faces:
            faces = [replace(f, proba=smooth_proba(f, [
                g for j, (_, _, _, fs, ts, _) in enumerate(window) if j != k
                for g, t in zip(fs, ts) if t == track])) for f, track in zip(faces, tracks)]
        if faces:
            labels = photo_labels(model, image.shape, faces)[0]
        else:
            labels = np.zeros(image.shape[:2], np.uint8)
        return VideoFrame(index, when, image, labels, faces, tracks,
                          secs + time.perf_counter() - t0)

    for index, when, image in frames:
        t0 = time.perf_counter()
        faces = photo_faces(model, image, **photo_kw)
        tracks, next_id = match_tracks(previous, [f.box for f in faces], next_id)
        previous = list(zip(tracks, [f.box for f in faces]))
        window.append((index, when, image, faces, tracks, time.perf_counter() - t0))
        if len(window) > smooth:                  # the frame ``smooth`` behind is complete
            yield finish(len(window) - 1 - smooth)
        if len(window) > 2 * smooth:
            window.popleft()
    start = max(len(window) - smooth, 0) if len(window) > smooth else 0
    for k in range(start, len(window)):
        yield finish(k)


# --------------------------------------------------------------- files

def label_colours(labels):
    """Each label in its class colour.

    Parameters
    ----------
    labels : uint8 (H, W)
        Class ids; ids beyond the colours get the last colour.

    Returns
    -------
    uint8 (H, W, 3)
        RGB.
    """
    return np.asarray(CLASS_COLORS, np.uint8)[np.minimum(labels, len(CLASS_COLORS) - 1)]


def _writer(path, fps, size):
    out = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
    if not out.isOpened():
        out.release()
        raise DataError(path, "cannot write a video here (OpenCV's MP4 writer failed)",
                        "choose another OUTPUT_DIR, or install opencv-python with FFmpeg")
    return out


def write_frames_csv(path, rows):
    """Write the per-frame CSV (:data:`FRAME_FIELDS`) atomically.

    Parameters
    ----------
    path : path
        The CSV file.
    rows : iterable of sequences
        One row per frame processed, in the order of :data:`FRAME_FIELDS`.

    Raises
    ------
    DataError
        The file cannot be written.
    """
    import csv
    import io

    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(FRAME_FIELDS)
    wr.writerows(rows)
    write_bytes_atomic(path, buf.getvalue().encode("utf-8", "surrogateescape"),
                       what="per-frame CSV")


def video_outputs(out_dir, output):
    """The paths :func:`segment_video` writes for the output name ``output``.

    Parameters
    ----------
    out_dir : str or path-like
        The output folder.
    output : str
        ``NAME`` of the outputs ('/'-separated: subfolders).

    Returns
    -------
    list of str
        The label video, the overlay video and the per-frame CSV.
    """
    base = os.path.join(os.fspath(out_dir), *output.split("/"))
    return [base + s for s in (LABELS_VIDEO_SUFFIX, OVERLAY_VIDEO_SUFFIX, FRAMES_SUFFIX)]


def segment_video(model, path, out_dir, name, output, every=1, smooth=DEFAULT_SMOOTH,
                  legend=True, on_record=None, progress=True, **photo_kw):
    """Segment a video file into a label video, an overlay video and a per-frame CSV.

    Parameters
    ----------
    model : the model
    path : str or path-like
        The video (opened with ``cv2.VideoCapture``).
    out_dir : str or path-like
        Existing folder of the outputs (:func:`video_outputs`), each written
        through :func:`facesegment.atomic.atomic_path` (so only when new or
        written by facesegment, and whole or not at all).
    name : str
        The input's name in the summary CSV and the JSON records.
    output : str
        ``NAME`` of the outputs (``OUT/NAME_labels.mp4``...).
    every : int
        Process frames 0, every, 2*every, ...; the videos written hold those
        frames, at the input's frame rate divided by ``every``.
    smooth : int
        Frames before and after whose faces are averaged (:func:`segment_frames`).
    legend : bool
        Draw the class key on the overlay frames.
    on_record : callable, optional
        Called with one dict per face per frame: the photo record of
        ``--json`` (:func:`facesegment.faces.folder.face_record`) plus
        ``frame``, ``time`` and ``track``.
    progress : bool
        Print done/total frames, rate and ETA to stderr.
    **photo_kw
        ``detect``, ``detector``, ``detect_size``, ``alpha``, ``beta``, ``sigma``.

    Returns
    -------
    result : facesegment.faces.folder.SegmentResult
        Status "ok" (some frame had a face), "no face" (none had; the outputs
        are written all the same) or "unreadable" (nothing written).
    frames : int
        Frames processed (= frames of each video written).
    seconds : float
        Wall time, reading and writing included.
    """
    every, smooth = check("every", every), check("smooth", smooth)
    t_start = time.perf_counter()
    try:
        cap, info = open_video(path)
    except DataError as exc:
        return SegmentResult(name, "unreadable", message=str(exc)), 0, 0.0
    fix = "free disk space or choose another OUTPUT_DIR"
    labels_path, overlay_path, csv_path = video_outputs(out_dir, output)
    total = -(-info.frames // every) if info.frames else 0
    rows, n, with_faces, tracks_seen, size = [], 0, 0, set(), None
    with contextlib.ExitStack() as stack:
        stack.callback(cap.release)
        frames = read_frames(cap, info.fps, every)
        first = next(frames, None)
        if first is None:
            return (SegmentResult(name, "unreadable", message=str(DataError(
                path, "not a readable video (no frame could be decoded)", _UNREADABLE_FIX))),
                0, time.perf_counter() - t_start)
        h, w = first[2].shape[:2]
        size = (w, h)
        tmps = [stack.enter_context(atomic_path(p, suffix=".mp4", what=what, fix=fix))
                for p, what in ((labels_path, "label video"), (overlay_path, "overlay video"))]
        writers = [_writer(t, info.fps / every, size) for t in tmps]
        for wr in writers:
            stack.callback(wr.release)   # released before the renames (last in, first out)
        bar = stack.enter_context(Progress(total or 1, desc=f"segment {name}", unit="frames",
                                           enabled=progress))

        def chained():
            yield first
            for index, when, image in frames:
                if image.shape[:2] != (h, w):   # a stream that changes size: fit the first
                    image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
                yield index, when, image

        for vf in segment_frames(model, chained(), smooth=smooth, **photo_kw):
            marks = [(f.box[0] + 0.05 * f.box[2], f.box[1] + 0.08 * f.box[2],
                      f"pan {f.pan:+.0f}") for f in vf.faces if f.pan == f.pan]
            writers[0].write(cv2.cvtColor(label_colours(vf.labels), cv2.COLOR_RGB2BGR))
            writers[1].write(cv2.cvtColor(overlay(vf.image, vf.labels, marks, legend=legend),
                                          cv2.COLOR_RGB2BGR))
            n += 1
            with_faces += bool(vf.faces)
            tracks_seen.update(vf.tracks)
            rows.append([vf.index, f"{vf.time:.3f}", len(vf.faces),
                         ";".join(str(t) for t in vf.tracks),
                         ";".join(f"{f.pan:+.0f}" for f in vf.faces if f.pan == f.pan),
                         vf.faces[0].detection if vf.faces else "", f"{vf.seconds:.3f}"])
            if on_record is not None:
                for k, (f, t) in enumerate(zip(vf.faces, vf.tracks)):
                    rec = face_record(model, path, name, vf.image.shape, f, k, vf.seconds)
                    on_record(dict(rec, frame=vf.index, time=round(vf.time, 3), track=t))
            bar.total = max(bar.total, n)
            bar.update()
    write_frames_csv(csv_path, rows)
    seconds = time.perf_counter() - t_start
    status = "ok" if with_faces else "no face"
    message = (f"{n} frames, {with_faces} with a face, {n / max(seconds, 1e-9):.2f} frames/s"
               + ("" if with_faces else f"; {path}: no face in any frame processed"))
    return (SegmentResult(name, status, len(tracks_seen), size[0], size[1], seconds, message,
                          output), n, seconds)


__all__ = ["VIDEO_EXTENSIONS", "FRAME_FIELDS", "VideoInfo", "VideoFrame", "is_video",
           "open_video", "read_frames", "box_iou", "match_tracks", "smooth_proba",
           "segment_frames", "label_colours", "write_frames_csv", "video_outputs",
           "segment_video"]
