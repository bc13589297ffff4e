"""Plain-Python references of the cost-complexity pruning kernels
(facesegment/forest/pruning.py): recursion over the current tree, every
branch's impurity and leaf count recomputed from scratch at every step."""

import itertools
import math

import numpy as np


def naive_node_risks(counts, gini):
    """``(N_t / N_root) impurity(t)`` per node, by Python loops."""
    total = sum(counts[0])
    out = []
    for row in counts:
        n_t = sum(row)
        if n_t <= 0:
            out.append(0.0)
            continue
        h = 1.0 if gini else 0.0
        for c in row:
            p = c / n_t
            if gini:
                h -= p * p
            elif p > 0:
                h -= p * math.log(p)
        out.append(n_t / total * h)
    return out


def naive_weakest_link_path(left, right, risk, tie):
    """Weakest link by the definition: at each step alpha is the smallest
    ``(Q(t) - Q(T_t)) / (|T_t| - 1)`` over the current tree's internal nodes and
    every branch within ``tie`` of it is cut (again until none is).  Returns
    ``(alphas, impurities, n_leaves)`` lists."""
    leaf = [int(l) < 0 for l in left]

    def branch(t):
        if leaf[t]:
            return risk[t], 1
        a, na = branch(int(left[t]))
        b, nb = branch(int(right[t]))
        return a + b, na + nb

    def internal():
        out, stack = [], [0]
        while stack:
            t = stack.pop()
            if not leaf[t]:
                out.append(t)
                stack += [int(left[t]), int(right[t])]
        return out

    alphas, impurities, leaves = [], [], []
    alpha = 0.0
    while True:
        while True:
            g = {}
            for t in internal():
                rb, nl = branch(t)
                g[t] = (risk[t] - rb) / (nl - 1)
            cut = [t for t in g if g[t] <= alpha + tie]
            for t in cut:
                leaf[t] = True
            if not cut:
                break
        rb, nl = branch(0)
        alphas.append(alpha)
        impurities.append(rb)
        leaves.append(nl)
        if leaf[0]:
            return alphas, impurities, leaves
        alpha = min(g.values())


def naive_subtrees(left, right, t=0):
    """Every pruned subtree rooted at ``t``, as frozensets of its leaves."""
    if int(left[t]) < 0:
        return [frozenset([t])]
    out = [frozenset([t])]
    for a, b in itertools.product(naive_subtrees(left, right, int(left[t])),
                                  naive_subtrees(left, right, int(right[t]))):
        out.append(a | b)
    return out


def naive_best_subtree(left, right, risk, alpha):
    """The smallest subtree minimising ``sum of leaf risks + alpha * leaves`` (by
    enumerating them all): its set of leaves (ties within 1e-12 go to fewer leaves)."""
    best = None
    for leaves in naive_subtrees(left, right):
        cost = sum(risk[t] for t in leaves) + alpha * len(leaves)
        if best is None or cost < best[0] - 1e-12 or (abs(cost - best[0]) <= 1e-12
                                                       and len(leaves) < len(best[1])):
            best = (cost, leaves)
    return best[1]


def naive_node_counts(fa, tree, X, y):
    """Class counts of every node of tree ``tree`` (local indices) by routing each row."""
    first = int(fa.roots[tree])
    end = int(fa.roots[tree + 1]) if tree + 1 < fa.n_trees else fa.n_nodes
    counts = np.zeros((end - first, fa.n_classes))
    for x, c in zip(X, y):
        node = first
        while True:
            counts[node - first, c] += 1
            if fa.left[node] < 0:
                break
            node = fa.left[node] if np.float32(x[fa.feature[node]]) <= fa.threshold[node] \
                else fa.right[node]
    return counts
