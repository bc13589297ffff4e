"""Writing windows files (see :mod:`facesegment.data.windows` for the format).

:class:`WindowsWriter` writes a file atomically; :class:`OrderedSink` and
:class:`BackgroundSink` stream results arriving out of order into it from a
writer thread with bounded memory.
"""

import json
import os
import queue
import threading
import zlib

import h5py
import numpy as np

from ..atomic import replace_into
from ..errors import DataError
from ..layout import DEFAULT_LAYOUT

FORMAT = "facesegment-windows"
#: Version 2 records the window layout (``layout`` attribute, JSON); version 1
#: files (31x31 RGB windows, no ``layout``) are still read.
FORMAT_VERSION = 2
CHUNK_ROWS = 1024
#: Shape of one window of the paper's layout (version 1 files; ``layout.shape`` in general).
WINDOW_SHAPE = DEFAULT_LAYOUT.shape

#: Upper bound on results an OrderedSink holds back waiting for an earlier image (bytes).
PENDING_BYTES = 256 * 2**20

def remove_stale_temporaries(path):
    """Remove ``<path>.tmp-<pid>`` files left by processes that no longer run.

    Such files are left by a process killed by SIGKILL or a power cut; those of
    live processes (and of this one) are kept.

    Parameters
    ----------
    path : str or path-like
        The windows file whose temporaries are looked for.

    Returns
    -------
    list of str
        The removed paths (files that cannot be removed are skipped).
    """
    import glob
    import re

    removed = []
    for tmp in glob.glob(glob.escape(os.fspath(path)) + ".tmp-*"):
        m = re.fullmatch(r".*\.tmp-(\d+)", tmp)
        if not m or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        try:
            os.remove(tmp)
            removed.append(tmp)
        except OSError:
            pass
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


class WindowsWriter:
    """Write a windows file atomically: ``<path>.tmp-<pid>``, then rename.

    Parameters
    ----------
    path : str or Path
        Final file name.
    n_windows : int
        Number of rows (known up front).
    compression : {"gzip", "lzf", None}
    compression_opts : int, optional
        gzip level (default 1).
    chunk_rows : int
        Rows per chunk.
    layout : WindowLayout
        Window size and channels: the ``windows`` dataset is
        ``(n_windows,) + layout.shape`` and the ``layout`` attribute records it.

    Use as a context manager: leaving the block with an exception removes the
    temporary file; :meth:`finish` sets ``complete`` and renames it.
    """

    def __init__(self, path, n_windows, compression="gzip", compression_opts=1,
                 chunk_rows=CHUNK_ROWS, layout=DEFAULT_LAYOUT):
        if layout.pool != 1:
            raise ValueError(f"a windows file stores the windows' values: layout "
                             f"{layout.describe()} is a model's (pool it when training)")
        self.path = os.fspath(path)
        self.layout = layout
        shape = layout.shape
        self.tmp = f"{self.path}.tmp-{os.getpid()}"
        remove_stale_temporaries(self.path)
        self.n_windows = int(n_windows)
        n = self.n_windows
        self.chunk_rows = max(1, min(int(chunk_rows), n))
        self.compression = compression
        self.level = int(compression_opts if compression_opts is not None else 4)
        # a signal (Ctrl-C, SIGTERM) may land anywhere in here, before `with` owns the
        # writer: whatever was created is removed before the exception goes on
        self.file = None
        try:
            self.file = h5py.File(self.tmp, "w")
        except OSError as exc:
            self.abort()
            raise DataError(self.path, f"cannot create output: {exc}",
                            "choose a writable output folder") from exc
        except BaseException:
            self.abort()
            raise
        try:
            self._create_datasets(n, shape, compression, compression_opts)
        except BaseException:
            self.abort()
            raise
        self._done = False

    def _create_datasets(self, n, shape, compression, compression_opts):
        f = self.file
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = FORMAT_VERSION
        f.attrs["layout"] = json.dumps(self.layout.to_dict())
        rows = self.chunk_rows
        kw = dict(compression=compression,
                  compression_opts=compression_opts if compression == "gzip" else None)
        self.X = f.create_dataset("windows", (n,) + shape, np.uint8,
                                  chunks=(rows,) + shape, **kw)
        self.y = f.create_dataset("labels", (n,), np.uint8)
        self.image_index = f.create_dataset("image_index", (n,), np.int32)
        self.centers = f.create_dataset("centers", (n, 2), np.int32)

    def write(self, start, X, y, image_index, centers, pool=None):
        """Write rows ``start : start + len(X)``.

        With gzip, whole chunks starting at a chunk boundary are deflated by
        ``zlib`` (which releases the GIL; in parallel on ``pool`` when given) and
        stored with ``write_direct_chunk``; the bytes equal what HDF5's deflate
        filter writes.  Other rows go through h5py.

        Parameters
        ----------
        start : int
            First row.
        X : ndarray of uint8, shape (k,) + layout.shape
            The windows.
        y : array-like of uint8, shape (k,)
            Their labels.
        image_index : array-like of int32, shape (k,)
            The image each window comes from.
        centers : array-like of int32, shape (k, 2)
            Each window's centre pixel in its image.
        pool : concurrent.futures.Executor, optional
            Threads that deflate the chunks.
        """
        start = int(start)
        stop = start + len(X)
        if stop > start:
            self._write_windows(start, X, pool)
            self.y[start:stop] = y
            self.image_index[start:stop] = image_index
            self.centers[start:stop] = centers

    def _write_windows(self, start, X, pool):
        rows = self.chunk_rows
        if self.compression != "gzip" or start % rows:
            self.X[start:start + len(X)] = X
            return
        n_full = len(X) // rows
        pieces = [X[i * rows:(i + 1) * rows] for i in range(n_full)]
        tail = X[n_full * rows:]
        if len(tail) and start + len(X) == self.n_windows:  # the last, partial chunk: pad
            last = np.zeros((rows,) + self.layout.shape, np.uint8)
            last[:len(tail)] = tail
            pieces.append(last)
            tail = tail[:0]
        levels = [self.level] * len(pieces)
        packed = list(pool.map(_deflate, pieces, levels)) if pool is not None else \
            [_deflate(p, lv) for p, lv in zip(pieces, levels)]
        for i, data in enumerate(packed):
            self.X.id.write_direct_chunk((start + i * rows, 0, 0, 0), data)
        if len(tail):
            self.X[start + n_full * rows:start + len(X)] = tail

    def set_strings(self, name, values):
        """Store a list of strings as a 1-D UTF-8 dataset.

        File names the OS allows but that are not UTF-8 (a byte 0xff) come as str
        with surrogate escapes (``os.fsdecode``); they are stored as their original
        bytes (``os.fsencode``), so nothing is lost (the reader decodes with
        ``surrogateescape``).

        Parameters
        ----------
        name : str
            The dataset's name.
        values : sequence of str or bytes
            The strings.
        """
        dt = h5py.string_dtype("utf-8")
        data = [v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v
                for v in values]
        self.file.create_dataset(name, data=np.array(data, dtype=object), dtype=dt)

    def set_attrs(self, **attrs):
        """Set file attributes.

        Parameters
        ----------
        **attrs
            Name -> value: strings, numbers, arrays; a list or tuple of strings is
            stored as a UTF-8 string array and None as "".
        """
        for k, v in attrs.items():
            if isinstance(v, (list, tuple)) and v and isinstance(v[0], str):
                v = np.array(v, dtype=h5py.string_dtype("utf-8"))
            elif v is None:
                v = ""
            self.file.attrs[k] = v

    def finish(self):
        """Mark complete, close and rename into place."""
        self.file.attrs["complete"] = True
        self.file.close()

        # extract checked --out first: a new path, or a windows file it wrote (its format)
        replace_into(self.tmp, self.path, "windows file", ours=lambda p: True)
        self._done = True

    def abort(self):
        """Close and remove the temporary file."""
        try:
            if self.file is not None:
                self.file.close()
        except Exception:  # pragma: no cover - already closed
            pass
        if os.path.exists(self.tmp):
            os.remove(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._done:
            self.abort()
        return False


def _deflate(arr, level):
    return zlib.compress(memoryview(np.ascontiguousarray(arr)).cast("B"), level)


# ---------------------------------------------------------- streaming writes

class OrderedSink:
    """Write per-image results at their offsets, in whole chunks when in order.

    Parameters
    ----------
    writer : WindowsWriter
    offsets : int64 (n_images + 1,)
        Image ``i`` owns rows ``offsets[i]:offsets[i + 1]``.
    image_ids : int32 (n_images,)
        Value stored in ``image_index`` for each image's rows.
    buffer_rows : int
        Rows assembled before a write (a multiple of the chunk rows).
    pool : concurrent.futures.Executor, optional
        Threads that deflate chunks (see :meth:`WindowsWriter.write`).

    ``add(i, (windows (k,) + layout.shape, labels (k,), centers (k,2)))`` may be called
    in any order; in-order results are buffered into whole chunks, results
    held back waiting for an earlier image beyond :data:`PENDING_BYTES` are
    written directly at their offsets.  Call :meth:`close` at the end.
    """

    def __init__(self, writer, offsets, image_ids, buffer_rows, pool=None):
        self.w = writer
        self.pool = pool
        self.offsets = offsets
        self.image_ids = image_ids
        self.next = 0
        self.pending = {}
        self.pending_bytes = 0
        self.buf_rows = int(buffer_rows)
        self.bX = np.empty((self.buf_rows,) + writer.layout.shape, np.uint8)
        self.by = np.empty(self.buf_rows, np.uint8)
        self.bi = np.empty(self.buf_rows, np.int32)
        self.bc = np.empty((self.buf_rows, 2), np.int32)
        self.bn = 0
        self.bstart = 0

    def add(self, i, res):
        """Take image ``i``'s result; write what is in order (or held back too long).

        Parameters
        ----------
        i : int
            The image's position (its rows are ``offsets[i]:offsets[i + 1]``).
        res : tuple or None
            ``(windows (k,) + layout.shape, labels (k,), centers (k, 2))``; None for an
            image whose rows are not buffered here (none, or written already).
        """
        self.pending[i] = res
        self.pending_bytes += res[0].nbytes
        while self.next in self.pending:
            r = self.pending.pop(self.next)
            if r is not None:
                self.pending_bytes -= r[0].nbytes
                self._append(self.next, r)
            else:
                self._flush()
                self.bstart = self.offsets[self.next + 1]
            self.next += 1
        if self.pending_bytes > PENDING_BYTES:
            for j, r in list(self.pending.items()):
                if r is not None:
                    self._direct(j, r)
                    self.pending[j] = None
            self.pending_bytes = 0

    def _direct(self, i, r):
        X, y, cen = r[0], r[1], r[2]
        self.w.write(self.offsets[i], X, y, np.full(len(y), self.image_ids[i], np.int32), cen)

    def _append(self, i, r):
        X, y, cen = r[0], r[1], r[2]
        k, pos = len(y), 0
        while pos < k:
            take = min(k - pos, self.buf_rows - self.bn)
            s = slice(self.bn, self.bn + take)
            self.bX[s] = X[pos:pos + take]
            self.by[s] = y[pos:pos + take]
            self.bi[s] = self.image_ids[i]
            self.bc[s] = cen[pos:pos + take]
            self.bn += take
            pos += take
            if self.bn == self.buf_rows:
                self._flush()

    def _flush(self):
        if self.bn:
            n = self.bn
            self.w.write(self.bstart, self.bX[:n], self.by[:n], self.bi[:n], self.bc[:n], self.pool)
            self.bstart += n
            self.bn = 0

    def close(self):
        self._flush()


class BackgroundSink:
    """Run a sink's ``add`` on a writer thread behind a bounded queue.

    The main thread goes back to computing the next batch of images while this
    thread deflates and writes (zlib releases the GIL); the queue bound keeps
    memory bounded.  Errors on the thread are re-raised by ``add``/``close``.
    """

    def __init__(self, sink, maxsize=8):
        self.sink = sink
        self.q = queue.Queue(maxsize=maxsize)
        self.error = None
        self.thread = threading.Thread(target=self._loop, name="facesegment-writer", daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            if self.error is None:
                try:
                    self.sink.add(*item)
                except BaseException as exc:  # re-raised in the main thread
                    self.error = exc

    def _check(self):
        if self.error is not None:
            raise self.error

    def add(self, i, res):
        """Queue image ``i``'s result for the writer thread (blocks while the queue is full).

        Parameters
        ----------
        i : int
            The image's position.
        res : tuple or None
            Its result, as :meth:`OrderedSink.add` takes it.

        Raises
        ------
        BaseException
            The error the writer thread met on an earlier result.
        """
        self._check()
        self.q.put((i, res))

    def close(self):
        """Wait for every queued result to be written, then flush."""
        self.stop()
        self._check()
        self.sink.close()

    def stop(self):
        if self.thread.is_alive():
            self.q.put(None)
            self.thread.join()
