"""Per-tree dicts (local node indices, as the growers return them) into one
:class:`~facesegment.forest._arrays.ForestArrays`."""

import numpy as np

from ._arrays import ForestArrays


def concat_trees(trees, n_features, weight_dtype=np.float32):
    """Concatenate per-tree dicts (local node indices) into one ForestArrays.

    Parameters
    ----------
    trees : list of dict
        One dict per tree, as the growers return them: ``"left"``, ``"right"``,
        ``"feature"``, ``"feature2"``, ``"oblique"``, ``"threshold"``,
        ``"value"``, ``"depth"``, ``"n_samples"`` and ``"weights"``, with node
        and weight-row indices local to the tree (-1 for none); optionally the
        sparse arrays and ``"missing_left"``.
    n_features : int
        Number of features (columns of the weights when there are none; picks
        uint16 sparse indices when it is at most 65536).
    weight_dtype : numpy dtype, default=np.float32
        The dtype of the weights array built when ``trees`` is empty (the
        node arrays cannot be concatenated then, so no forest is returned).

    Returns
    -------
    ForestArrays
        The forest, with absolute node and weight-row indices, int32 index
        arrays, float32 thresholds and values, the sparse arrays (empty when no
        tree has them) and ``missing_left`` (int8).
    """
    offsets = np.cumsum([0] + [t["left"].shape[0] for t in trees])
    w_off = np.cumsum([0] + [t["weights"].shape[0] for t in trees])

    def shift(a, off):
        """``a`` as int32 (a copy) with ``off`` added to its non-negative entries.

        Parameters
        ----------
        a : int ndarray
            Indices local to a tree, -1 for none.
        off : int
            The tree's offset.

        Returns
        -------
        int32 ndarray
            The shifted copy.
        """
        a = a.astype(np.int32, copy=True)
        a[a >= 0] += off
        return a

    cat = np.concatenate
    weights = [t["weights"] for t in trees]
    sparse = _concat_sparse(trees, offsets, n_features)
    sparse["missing_left"] = (cat([_missing_sides(t) for t in trees]) if trees
                              else np.zeros(0, np.int8))
    return ForestArrays(**sparse,
        roots=offsets[:-1].astype(np.int32),
        left=cat([shift(t["left"], o) for t, o in zip(trees, offsets)]),
        right=cat([shift(t["right"], o) for t, o in zip(trees, offsets)]),
        feature=cat([t["feature"] for t in trees]).astype(np.int32),
        feature2=cat([t["feature2"] for t in trees]).astype(np.int32),
        oblique=cat([shift(t["oblique"], o) for t, o in zip(trees, w_off)]),
        threshold=cat([t["threshold"] for t in trees]).astype(np.float32),
        value=cat([t["value"] for t in trees]).astype(np.float32),
        depth=cat([t["depth"] for t in trees]).astype(np.int32),
        n_samples=cat([t["n_samples"] for t in trees]).astype(np.int32),
        weights=(np.ascontiguousarray(cat(weights)) if weights
                 else np.zeros((0, n_features), dtype=weight_dtype)),
    )


def _missing_sides(tree):
    """A tree's ``missing_left`` (int8): the learned sides, or where the tree was
    grown without missing values, the larger child (ties left)."""
    if tree.get("missing_left") is not None:
        return np.asarray(tree["missing_left"], np.int8)
    left, right, n = tree["left"], tree["right"], tree["n_samples"]
    out = np.zeros(left.shape[0], dtype=np.int8)
    inner = np.flatnonzero(left >= 0)
    out[inner] = n[left[inner]] >= n[right[inner]]
    return out


def _concat_sparse(trees, offsets, n_features):
    """The sparse arrays of concatenated trees (a tree without them has none)."""
    n_nodes = int(offsets[-1])
    ptr, index, weight = [0], [], []
    sparse = np.full(n_nodes, -1, np.int32)
    for t, off in zip(trees, offsets):
        if t.get("sparse") is None:
            continue
        local = t["sparse"]
        has = local >= 0
        sparse[off:off + local.shape[0]][has] = local[has] + len(ptr) - 1
        tp = t["sparse_ptr"]
        ptr.extend((tp[1:] + ptr[-1]).tolist())
        index.append(t["sparse_index"])
        weight.append(t["sparse_weight"])
    dtypes = {w.dtype for w in weight if w.shape[0]}
    w_dtype = dtypes.pop() if len(dtypes) == 1 else np.dtype(np.float32)
    i_dtype = np.uint16 if n_features <= np.iinfo(np.uint16).max + 1 else np.int32
    return {
        "sparse": sparse,
        "sparse_ptr": np.asarray(ptr, np.int64),
        "sparse_index": (np.concatenate(index).astype(i_dtype) if index
                         else np.zeros(0, i_dtype)),
        "sparse_weight": (np.concatenate([w.astype(w_dtype) for w in weight]) if weight
                          else np.zeros(0, w_dtype)),
    }


__all__ = ["concat_trees"]
