"""A forest family that the library does not have, for the tests of adding one:
each node cuts one random feature at its median on the node (``x[f] <= median``),
kept when the information gain beats ``min_gain``."""

import numpy as np

from facesegment.forest.base import BaseForest
from dataclasses import dataclass
from typing import ClassVar

from facesegment.forest.families import Split, Splitter
from facesegment.forest.params import COMMON_CONSTRAINTS, Real
from facesegment.forest.registry import ForestKind, register_kind, unregister_kind

NAME = "median"


def _entropy(counts):
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


@dataclass(frozen=True)
class MedianSplit(Splitter):
    """One random feature per node, cut at its median on the node."""

    name: ClassVar[str] = "median"
    min_gain: float = 0.0

    def find(self, tree, seg):
        f = int(tree.rng.integers(0, tree.p))
        v = tree.X[seg, f].astype(np.float64)
        thr = float(np.float32(np.median(v)))
        left = v <= thr
        n, nl = left.shape[0], int(left.sum())
        if nl < tree.min_leaf or n - nl < tree.min_leaf:
            return Split()
        y = tree.y[seg]
        c = np.bincount(y, minlength=tree.n_classes).astype(np.float64)
        cl = np.bincount(y[left], minlength=tree.n_classes).astype(np.float64)
        gain = _entropy(c) - (nl * _entropy(cl) + (n - nl) * _entropy(c - cl)) / n
        if gain <= self.min_gain:
            return Split()
        return Split(f, -1, thr, gain)


class MedianForest(BaseForest):
    """Forest of median cuts (:class:`MedianSplit`)."""

    _split_family = MedianSplit
    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "min_gain": Real(0).cli("smallest information gain a median cut needs",
                                metavar="G"),
    }

    def __init__(self, n_estimators=4, *, min_gain=0.0, max_depth=None, min_samples_split=2,
                 min_samples_leaf=1, max_samples=None, bootstrap=True, random_state=None,
                 n_jobs=None, scheduler=None, verbose=0):
        self.n_estimators = n_estimators
        self.min_gain = min_gain
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_samples = max_samples
        self.bootstrap = bootstrap
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.scheduler = scheduler
        self.verbose = verbose


def register():
    """Register the row ``median``."""
    return register_kind(ForestKind(
        NAME, MedianForest, label="median cuts",
        description="median cuts: x[f] <= its median on the node, one random feature"))


def register_in_pipeline():
    """Make the face pipeline train it too (selection grid: ``[select] median_gain``)."""
    from pipelines.design import KindDesign, register_design

    return register_design(NAME, KindDesign(grid={"min_gain": "median_gain"}))


def unregister():
    unregister_kind(NAME)
