"""A cache of the hand-drawn cross-validation's stage probabilities
(``python -m pipelines.handdrawn cv --cache DIR``).

Cross-validating a forest method trains its stages once per held-out person
(minutes); choosing its decision rule from them (the gains, the first stage's
share) takes seconds.  With a cache, a method's leave-people-out stage
probabilities are stored once and read back by any later ``cv`` whose forests
would be the same: same method settings (every field but the rule's candidate
mixes), seed, faces (names, people, label sizes, weights) and the same package code
(a digest of every ``.py`` file of ``facesegment/``).  Anything else computes
them again.  A hit is exactly what the computation gives (the stages are
deterministic); the cross-validation time recorded is the one measured when
they were computed.
"""

import hashlib
import json
from pathlib import Path

import numpy as np

from pipelines.handdrawn_common import ROOT, log


def code_digest():
    """SHA-256 of every ``.py`` file of the package (paths and bytes, sorted)."""
    h = hashlib.sha256()
    for p in sorted((ROOT / "facesegment").rglob("*.py")):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def cache_key(method, params, faces, seed):
    """The key of a method's stage probabilities: a hex digest of its forest
    settings, the seed, the faces (held out or trained in every fold: name,
    group, labelled pixels, weight, whether the mesh found it) and the package code."""
    doc = {"method": method, "params": params, "seed": seed, "code": code_digest(),
           "faces": [(f.name, str(f.group), int(np.asarray(f.labels).size),
                      float(getattr(f, "weight", 1.0)), f.planes is not None) for f in faces]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def _path(cache, method, key):
    return Path(cache) / f"{method}-{key[:20]}.npz"


def load_stages(cache, method, key):
    """``(stages, seconds)`` stored under ``key``, or None.

    Parameters
    ----------
    cache : str or Path or None
        The cache folder (None: no cache).
    method, key : str
        The method's name and :func:`cache_key`.

    Returns
    -------
    tuple or None
        ``stages``: ``{name: list of float32 (S, S, 6) or None}``, as
        :func:`facesegment.faces.mesh_train.cross_validate` returns them;
        ``seconds``: the cross-validation time measured when they were computed.
    """
    if cache is None:
        return None
    path = _path(cache, method, key)
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta["key"] != key:
            return None
        stages = {n: None if k == 0 else [z[f"{i}/{s}"] for s in range(k)]
                  for i, (n, k) in enumerate(meta["faces"])}
    log(f"{method}: stage probabilities from {path} (computed in {meta['seconds']:.0f} s)")
    return stages, float(meta["seconds"])


def save_stages(cache, method, key, stages, seconds):
    """Store ``stages`` under ``key`` (atomically: a temporary file renamed).

    Parameters
    ----------
    cache : str or Path or None
        The cache folder (None: nothing stored).
    method, key : str
        As for :func:`load_stages`.
    stages : dict
        ``{name: list of arrays or None}``.
    seconds : float
        The cross-validation time.
    """
    if cache is None:
        return
    path = _path(cache, method, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays, faces = {}, []
    for i, (name, probas) in enumerate(stages.items()):
        faces.append((name, 0 if probas is None else len(probas)))
        for s, p in enumerate(probas or []):
            arrays[f"{i}/{s}"] = p
    meta = json.dumps({"key": key, "faces": faces, "seconds": seconds})
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, meta=np.array(meta), **arrays)
    tmp.replace(path)


__all__ = ["cache_key", "code_digest", "load_stages", "save_stages"]
