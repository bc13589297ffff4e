"""The videos of ``facesegment segment``: outputs checked first, each video
segmented by :func:`facesegment.faces.video.segment_video`, a row each in
summary.csv (after the images' rows), throughput printed."""

import os
import posixpath
import sys

from ..atomic import OVERWRITE_FIX, check_output_path, check_writable_folder
from ..errors import DataError
from ..faces.folder import SegmentResult, _stop_reason, output_names, write_summary_csv
from ..faces.video import segment_video, video_outputs


def video_items(videos):
    """Each video with its name and output name.

    Videos are named by their file names; outputs are named as photos' are
    (:func:`facesegment.faces.folder.output_names`: a clash keeps the extension,
    then ``-2``...).

    Parameters
    ----------
    videos : sequence of str or path-like
        The video files, in command-line order.

    Returns
    -------
    list of tuple
        ``(path, name, output)`` per video.
    """
    names = [os.path.basename(os.fspath(v)) for v in videos]
    return list(zip(videos, names, output_names(names)))


def check_video_outputs(videos, out_dir):
    """Check, before any work, every file the videos would write.

    The output-path rule is applied to each video's outputs and to summary.csv,
    and OUTPUT_DIR must be writable.

    Parameters
    ----------
    videos : sequence of str or path-like
        The video files.
    out_dir : str or path-like
        OUTPUT_DIR (created when missing).

    Raises
    ------
    DataError
        Naming the folder when it cannot be written, or the first output that
        may not be written.
    """
    check_writable_folder(out_dir, "cannot write the outputs here", "choose a writable OUTPUT_DIR")
    check_output_path(os.path.join(out_dir, "summary.csv"), "summary", OVERWRITE_FIX)
    for _, _, output in video_items(videos):
        for path in video_outputs(out_dir, output):
            check_output_path(path, "segmentation", OVERWRITE_FIX)


def segment_videos(model, videos, args, image_results, photo_kw):
    """Segment ``videos`` into ``args.output_dir``, with a row per video in summary.csv.

    summary.csv is rewritten with ``image_results`` and a row per video, also
    when the run stops early (the videos not reached are "not done").  A line of
    frames and throughput per video is printed (to stderr with ``--json``, whose
    records go to stdout).

    Parameters
    ----------
    model : Model
        The loaded model.
    videos : sequence of str or path-like
        The video files.
    args : argparse.Namespace
        ``segment``'s arguments (``output_dir``, ``json``, ``save_proba``,
        ``every``, ``smooth``, ``legend``, ``quiet``).
    image_results : list of SegmentResult
        The rows of the images segmented before.
    photo_kw : dict
        Keywords passed on to :func:`facesegment.faces.video.segment_video`.

    Returns
    -------
    list of SegmentResult
        One per video segmented.
    """
    import json

    out = args.output_dir
    stream = sys.stderr if args.json else sys.stdout
    on_record = ((lambda rec: print(json.dumps(rec, separators=(",", ":")), flush=True))
                 if args.json else None)
    if args.save_proba:
        print("note: --save-proba applies to images; videos write no probability maps",
              file=sys.stderr)
    results, why = [], ""
    items = video_items(videos)
    try:
        for path, name, output in items:
            res, n, secs = segment_video(model, path, out, name, output, every=args.every,
                                         smooth=args.smooth, legend=args.legend,
                                         on_record=on_record, progress=not args.quiet,
                                         **photo_kw)
            results.append(res)
            if res.status != "unreadable":
                files = ", ".join(posixpath.join(out.rstrip("/"), output + s)
                                  for s in ("_labels.mp4", "_overlay.mp4", "_frames.csv"))
                print(f"{name}: {n} frames in {secs:.1f} s ({n / max(secs, 1e-9):.2f} "
                      f"frames/s); {files}", file=stream)
    except BaseException as exc:
        why = (f"not segmented: {exc}" if isinstance(exc, DataError)
               else _stop_reason(exc))
        raise
    finally:
        done = results + [SegmentResult(name, "not done", message=why)
                          for _, name, _ in items[len(results):]]
        try:
            write_summary_csv(os.path.join(out, "summary.csv"), image_results + done)
        except DataError:
            if not why:
                raise
    return results
