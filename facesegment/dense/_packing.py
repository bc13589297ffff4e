"""Node packings for the dense-inference kernels (private).

:func:`pack_nodes` builds the general records of
:mod:`facesegment.dense._any_forest` (any forest, oblique nodes included);
:func:`pack_fast` builds the 64-bit records of :mod:`facesegment.dense._probe_forests`
(forests of axis-aligned and two-probe nodes).  Feature indices become byte
offsets in the padded image, which depend on its width and on the window
layout.  Both are cached for the last few (forest, width, layout), keyed by
the identity of the forest's arrays, so a folder of images packs once.
"""

import threading
import weakref

import numpy as np

from ..forest._arrays import complete
from ..forest._predict import kernel_sparse
from . import _probe_forests as F
from ._split import split_offsets
from ._any_forest import LEFT, MUL, OBLIQUE, OFF1, OFF2, RESP, RIGHT, THRESHOLD

_CACHE = {}
_CACHE_SIZE = 8
#: Guards ``_CACHE``: worker threads look up, insert and evict concurrently.
_CACHE_LOCK = threading.Lock()


def cached(kind, owner, extra, build):
    """``build()`` memoised on (kind, the array ``owner``, extra) while ``owner`` lives.

    ``owner`` may be a tuple of arrays (every array the value is built from):
    the value is reused only while each of them is still the very same object,
    so a forest whose thresholds were replaced (``arrays._replace``) while it
    kept its ``left`` array is packed again.  Thread-safe: the lookup, the
    insertion and the eviction hold a lock; ``build()`` runs outside it (two
    threads may build the same value once each).

    Parameters
    ----------
    kind : str
        What is built (``"general"``, ``"fast"``, ...): part of the key.
    owner : numpy.ndarray or tuple of numpy.ndarray
        The array(s) the value is built from, keyed by identity and held by
        weak reference.
    extra : hashable
        The rest of the key (padded width, layout, ...).
    build : callable
        Called with no argument on a miss; its result is cached.

    Returns
    -------
    object
        The cached value, or ``build()``'s.  The cache keeps at most
        ``_CACHE_SIZE`` entries (oldest evicted first) and drops the entries of
        owners that no longer exist.
    """
    owners = owner if isinstance(owner, tuple) else (owner,)
    key = (kind, tuple(id(o) for o in owners), extra)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None and all(r() is o for r, o in zip(hit[0], owners)):
        return hit[1]
    value = build()
    try:
        refs = tuple(weakref.ref(o) for o in owners)
    except TypeError:  # pragma: no cover - plain arrays are weak-referenceable
        return value
    with _CACHE_LOCK:
        _CACHE[key] = (refs, value)
        for k in [k for k, v in _CACHE.items() if any(r() is None for r in v[0])]:
            del _CACHE[k]
        while len(_CACHE) > _CACHE_SIZE:
            del _CACHE[next(iter(_CACHE))]
    return value


def _node_arrays(arrays, *more):
    """The arrays node records are built from (their cache owners; a forest
    without sparse arrays has None there, which :func:`complete` fills anew)."""
    owners = (arrays.left, arrays.right, arrays.feature, arrays.feature2, arrays.oblique,
              arrays.threshold, arrays.sparse, arrays.sparse_ptr) + more
    return tuple(a for a in owners if a is not None)


def pack_nodes(arrays, padded_width, layout):
    """General kernel records (see :mod:`facesegment.dense._any_forest`).

    Returns ``(nodes int32 (n_nodes, 8), thr float32 view of the same memory)``;
    feature indices become byte offsets in a padded image of ``padded_width``
    pixels of ``layout.channels`` planes, and leaves point to themselves.

    Parameters
    ----------
    arrays : facesegment.forest._arrays.ForestArrays
        The forest (sparse arrays filled in when missing).
    padded_width : int
        Width in pixels of the padded image the offsets are for.
    layout : facesegment.layout.WindowLayout
        The window layout (its ``feature_offsets``).

    Returns
    -------
    nodes : int32 (n_nodes, 8)
        Columns ``LEFT, RIGHT, OFF1, OFF2, OBLIQUE, THRESHOLD, MUL, RESP``:
        ``OBLIQUE`` is a dense oblique node's weights row, -2 for a sparse
        oblique node (its entry range in ``OFF1``/``OFF2``), -1 otherwise
        (leaves included); ``RESP`` is -1.
    thr : float32 (n_nodes, 8)
        ``nodes.view(float32)``: ``THRESHOLD`` (0 at leaves) and ``MUL`` (1
        for a two-probe node, else 0).

    Cached (:func:`cached`) per forest arrays, padded width and layout: do not
    write into the result.
    """
    owners = _node_arrays(arrays)
    arrays = complete(arrays)

    def build():
        offs = layout.feature_offsets(padded_width)
        f1 = arrays.feature.astype(np.int64)
        f2 = arrays.feature2.astype(np.int64)
        leaf = arrays.left < 0
        idx = np.arange(arrays.n_nodes, dtype=np.int32)
        nodes = np.zeros((arrays.n_nodes, 8), dtype=np.int32)
        nodes[:, LEFT] = np.where(leaf, idx, arrays.left)
        nodes[:, RIGHT] = np.where(leaf, idx, arrays.right)
        nodes[:, OFF1] = np.where(f1 >= 0, offs[np.clip(f1, 0, None)], 0)
        nodes[:, OFF2] = np.where(f2 >= 0, offs[np.clip(f2, 0, None)], 0)
        nodes[:, OBLIQUE] = np.where(leaf, -1, arrays.oblique)
        sp = (arrays.sparse >= 0) & ~leaf
        if sp.any():  # sparse oblique: OBLIQUE -2, entries OFF1 .. OFF2 - 1
            row = arrays.sparse[sp]
            nodes[sp, OBLIQUE] = -2
            nodes[sp, OFF1] = arrays.sparse_ptr[row]
            nodes[sp, OFF2] = arrays.sparse_ptr[row + 1]
        thr = nodes.view(np.float32)
        thr[:, THRESHOLD] = np.where(leaf, 0, arrays.threshold)
        thr[:, MUL] = np.where(f2 >= 0, 1.0, 0.0)
        nodes[:, RESP] = -1
        return nodes, thr

    return cached("general", owners, (int(padded_width), layout.window, layout.channels),
                  build)


def _fast_sparse(arrays, padded_width, layout, sp):
    """The sparse rows of the fast kernels (see :func:`pack_fast`): those of
    :func:`pack_sparse`, offsets as uint64, plus each row's threshold."""
    if not sp.any():
        return (np.zeros(2, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.float32),
                np.zeros(1, np.float32))
    sp_off, sp_w = pack_sparse(arrays, padded_width, layout)
    thr = np.zeros(arrays.sparse_ptr.shape[0] - 1, np.float32)
    thr[arrays.sparse[sp]] = arrays.threshold[sp]
    return (np.ascontiguousarray(arrays.sparse_ptr, dtype=np.uint64),
            sp_off.astype(np.uint64), sp_w, thr)


def pack_sparse(arrays, padded_width, layout):
    """The sparse rows for the general kernels: ``(sp_off int32, sp_w float32)``,
    each entry's byte offset in the window of a padded image of
    ``padded_width`` pixels and its weight (one dummy entry when there are none).

    Parameters
    ----------
    arrays : facesegment.forest._arrays.ForestArrays
        The forest (sparse arrays filled in when missing).
    padded_width : int
        Width in pixels of the padded image the offsets are for.
    layout : facesegment.layout.WindowLayout
        The window layout (its ``feature_offsets``).

    Returns
    -------
    sp_off : int32 (n_entries,)
        Each sparse entry's byte offset in the window (``[0]`` when none).
    sp_w : float32 (n_entries,)
        Each entry's weight (``[0.0]`` when none).
    """
    arrays = complete(arrays)
    if arrays.sparse_index.shape[0] == 0:
        return np.zeros(1, np.int32), np.zeros(1, np.float32)

    def build():
        offs = layout.feature_offsets(padded_width)
        return (np.ascontiguousarray(offs[arrays.sparse_index.astype(np.int64)],
                                     dtype=np.int32),
                kernel_sparse(arrays)[2])

    return cached("sparse", (arrays.sparse_index, arrays.sparse_weight),
                  (int(padded_width), layout.window, layout.channels), build)


def pack_fast(arrays, padded_width, layout, split=None):
    """64-bit records of :mod:`facesegment.dense._probe_forests`, or None.

    Returns ``(rec uint64 (n_nodes,), mode, sparse)``: ``mode`` 0 (axis-aligned
    nodes only), 1 (two-probe nodes too), 2 (sparse oblique nodes too) or 3
    (axis-aligned nodes only, 30-bit offsets), and
    ``sparse = (sp_ptr uint64, sp_off uint64, sp_w float32, sp_thr float32)``
    the sparse rows (their byte offsets in the padded window, weights and
    thresholds; one dummy row when there are none).  ``split = (c0,
    padded_shape)``: offsets in the split buffer of a context stage
    (:mod:`facesegment.dense._split`) instead of an interleaved image.  None
    when the forest has dense oblique nodes, a right child that is not
    ``left + 1``, more nodes than the left-child field holds, offsets too
    large for the fields (15 bits with two-probe or sparse nodes, 30 bits
    otherwise) or, split, a context feature off the window's centre; the
    general kernels are used then.

    Parameters
    ----------
    arrays : facesegment.forest._arrays.ForestArrays
        The forest (sparse arrays filled in when missing).
    padded_width : int
        Width in pixels of the padded image (or of copy 0 of the split
        buffer) the offsets are for.
    layout : facesegment.layout.WindowLayout
        The window layout the forest reads.
    split : tuple or None, optional
        ``(c0, padded_shape)``: pack for the split buffer of a context stage
        (:func:`facesegment.dense._split.split_offsets`); None for an
        interleaved padded image.

    Returns
    -------
    tuple or None
        ``(rec, mode, sparse)`` as above: ``rec`` uint64 ``(n_nodes,)``,
        ``mode`` int in 0..3, ``sparse`` four 1-d arrays; None when the fast
        records cannot hold the forest.  Cached (:func:`cached`): do not write
        into the result.
    """
    owners = _node_arrays(arrays, arrays.sparse_index, arrays.sparse_weight)
    arrays = complete(arrays)

    def build():
        internal = arrays.left >= 0
        offs = (layout.feature_offsets(padded_width) if split is None
                else split_offsets(layout, split[0], split[1]))
        if (np.any(arrays.oblique[internal] >= 0)
                or not np.array_equal(arrays.right[internal], arrays.left[internal] + 1)
                or arrays.n_nodes >= F.MAX_NODES):
            return None
        n = arrays.n_nodes
        f1 = arrays.feature.astype(np.int64)
        f2 = arrays.feature2.astype(np.int64)
        sp = internal & (arrays.sparse >= 0)
        if np.unique(arrays.sparse[sp]).shape[0] < np.count_nonzero(sp):
            return None          # a row shared by nodes: one threshold per row does not do
        two = internal & (f2 >= 0) & ~sp
        used = np.concatenate([f1[internal & (f1 >= 0)], f2[two],
                               arrays.sparse_index.astype(np.int64)])
        top = int(offs[used].max()) if used.size else 0
        if (used.size and int(offs[used].min()) < 0) or top > F.WIDE_MASK:
            return None
        wide = top > F.OFF_MASK
        if (wide and (sp.any() or two.any())) or (split is not None and sp.any()):
            return None
        t = np.asarray(arrays.threshold, dtype=np.float64)
        # integer values v in [-255, 255]: v <= t  <=>  v <= floor(t); NaN: never right
        ti = np.clip(np.floor(np.nan_to_num(t, nan=256.0, posinf=256.0, neginf=-256.0)),
                     -256, 256).astype(np.int64)
        ti = np.where(internal, ti, 256) + 256
        ti = np.where(sp, F.SPARSE_CODE, ti)
        left = np.where(internal, arrays.left, np.arange(n, dtype=np.int64)).astype(np.int64)
        o1 = np.where(internal & (f1 >= 0), offs[np.clip(f1, 0, None)], 0)
        o2 = np.where(two, offs[np.clip(f2, 0, None)], 0)
        row = np.where(sp, arrays.sparse, 0).astype(np.int64)
        u = np.uint64
        probes = np.where(sp, row, (o2 << F.OFF_BITS) | o1).astype(u)
        rec = ((left.astype(u) << u(F.LEFT_SHIFT)) | (ti.astype(u) << u(F.THR_SHIFT))
               | (two.astype(u) << u(F.MUL_SHIFT)) | probes)
        mode = 3 if wide else 2 if sp.any() else int(bool(np.any(two)))
        return np.ascontiguousarray(rec), mode, _fast_sparse(arrays, padded_width, layout, sp)

    key = (int(padded_width), layout.window, layout.channels,
           None if split is None else (int(split[0]), tuple(int(v) for v in split[1][:2])))
    return cached("fast", owners, key, build)
