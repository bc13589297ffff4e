"""Resuming a folder run: which images an earlier ``facesegment segment`` into the
same OUTPUT_DIR finished (``--resume``).

An image counts as finished when the earlier run's ``summary.csv`` (a file
facesegment wrote there, unchanged since) lists it as "ok" with its output
files all present and unchanged since facesegment wrote them (their sizes and
SHA-256 as recorded, :func:`facesegment.atomic.written_by_facesegment`), or as
"no face".  Anything else (unreadable, error, not done, a missing or edited
output) is segmented again.  The earlier run is assumed to have used the same
model and options; the summary keeps its rows for the images skipped.
"""

import csv
import os

from ..atomic import written_by_facesegment

#: Summary statuses that a resumed run keeps.
FINISHED = ("ok", "no face")


def previous_rows(out, items, suffixes):
    """``{index into items: summary row (dict of str)}`` of the finished images.

    Parameters
    ----------
    out : path
        The OUTPUT_DIR.
    items : list of facesegment.faces.folder.SegmentInput
    suffixes : tuple of str
        The output files each "ok" image must have (``_label.png``, ...).

    Returns
    -------
    dict
    """
    summary = os.path.join(out, "summary.csv")
    if not written_by_facesegment(summary):
        return {}
    try:
        with open(summary, newline="", encoding="utf-8", errors="surrogateescape") as fh:
            rows = {r["name"]: r for r in csv.DictReader(fh) if r.get("name")}
    except (OSError, csv.Error, KeyError):
        return {}
    done = {}
    for i, it in enumerate(items):
        row = rows.get(it.name)
        if row is None or row.get("status") not in FINISHED:
            continue
        if row["status"] == "ok":
            base = os.path.join(out, *it.output.split("/"))
            if row.get("output") != it.output or not all(
                    written_by_facesegment(base + s) for s in suffixes):
                continue
        done[i] = row
    return done
