"""Exact (non-fast) loss-augmented inference (facesegment/forest/_nongreedy_exact.py):
against the fast kernel, a per-leaf reference (the paper's Eq. 11) and the
brute force of tests/naive_nongreedy.py; its SGD pass against ``sgd_pass``
(radius 1: the same updates) and a dense brute-force reference (all bit vectors)."""

import numpy as np
import pytest

from facesegment.forest._nongreedy_exact import lai_exact_values, sgd_pass_exact
from facesegment.forest._nongreedy_kernels import sgd_pass
from facesegment.forest.nongreedy import evaluate, tree_tables
from tests import naive_nongreedy as naive
from tests.forest.test_nongreedy import _problem

#: Largest number of internal nodes the brute force enumerates (2^m bit vectors).
BRUTE_MAX_ROWS = 12


def _assign(tb, rng, n, ssgd):
    if not ssgd:
        return np.full(n, -1, np.int32)
    return rng.integers(0, tb["path_len"].shape[0], size=n).astype(np.int32)


def _args(tb):
    return (tb["left"], tb["right"], tb["row"], tb["leaf"], tb["path_node"], tb["path_dir"],
            tb["path_len"])


def _exact(Z, y, assign, W, Theta, tb, full):
    sur = np.empty(Z.shape[0])
    chosen = np.empty(Z.shape[0], np.int32)
    lai_exact_values(Z, y, assign, W, Theta, *_args(tb), full, sur, chosen)
    return sur, chosen


def per_leaf_reference(W, Theta, tb, z, c, assigned, full):
    """The paper's Eq. (11) leaf by leaf, float64: for each leaf the best g
    reaching it (its path's bits; elsewhere sgn(a) for the full bound, h for the
    Hamming ball of radius 1, where at most one bit may differ from h)."""
    a = naive.activations(W, z)
    h = naive.reference_bits(a, assigned, tb["path_node"], tb["path_dir"], tb["path_len"],
                             tb["row"])
    s = np.where(a > 0, 1, -1)
    vals = np.full(Theta.shape[0], -np.inf)
    for lf in range(Theta.shape[0]):
        g = (s if full else h).copy()
        for k in range(tb["path_len"][lf]):
            g[tb["row"][tb["path_node"][lf, k]]] = tb["path_dir"][lf, k]
        if not full and np.count_nonzero(g != h) > 1:
            continue
        vals[lf] = float((g - h) @ a) + naive.log_loss(Theta[lf], c)
    return vals


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("ssgd", [False, True])
def test_exact_inference_equals_fast_per_leaf_and_brute_force(depth, ssgd):
    for seed in range(3):
        tb, W, Theta, Z, y, rng = _problem(100 * depth + seed, depth, scale=0.3 + seed,
                                           p_split=0.8 if depth <= 4 else 0.55)
        assign = _assign(tb, rng, Z.shape[0], ssgd)
        fast, _, _ = evaluate(Z, y, assign, W, Theta, tb)
        ball, ball_leaf = _exact(Z, y, assign, W, Theta, tb, False)
        full, full_leaf = _exact(Z, y, assign, W, Theta, tb, True)
        np.testing.assert_allclose(ball, fast, rtol=1e-6, atol=1e-6)  # same bound as _lai
        assert (full >= ball - 1e-6).all()  # the full bound is the larger (looser) one
        brute = W.shape[0] <= BRUTE_MAX_ROWS
        for i in range(Z.shape[0]):
            for got, leaf_i, full_i in ((ball, ball_leaf, False), (full, full_leaf, True)):
                ref = per_leaf_reference(W, Theta, tb, Z[i], y[i], assign[i], full_i)
                assert got[i] == pytest.approx(ref.max(), rel=1e-5, abs=1e-5)
                assert leaf_i[i] == int(np.argmax(ref))
                if brute:
                    bv, g, _ = naive.brute_surrogate(W, Theta, tb, Z[i], y[i], assign[i],
                                                     radius=None if full_i else 1)
                    assert got[i] == pytest.approx(bv, rel=1e-5, abs=1e-5)
                    assert leaf_i[i] == naive.leaf_of_bits(g, tb["left"], tb["right"],
                                                           tb["row"], tb["leaf"])


def test_brute_force_is_reached():
    """The parametrised test above enumerates bit vectors for most of its trees."""
    n_brute = sum(_problem(100 * d + s, d, p_split=0.8 if d <= 4 else 0.55)[1].shape[0]
                  <= BRUTE_MAX_ROWS for d in range(1, 7) for s in range(3))
    assert n_brute >= 12


def _state(W, Theta):
    return dict(V=np.zeros_like(W), VT=np.zeros_like(Theta), G=np.zeros_like(W),
                GT=np.zeros_like(Theta), last=np.full(W.shape[0], -1, np.int64),
                flag=np.zeros(W.shape[0], np.bool_), counters=np.zeros(4, np.int64))


def _passes(kind, Z, y, assign, W, Theta, tb, eta, mu, nu, batch, epochs, seed=0):
    """``epochs`` passes with ``kind`` in {"fast", "ball", "full"}; returns the
    surrogate sums of the passes and the state."""
    st = _state(W, Theta)
    rng = np.random.default_rng(seed)
    t, totals = 0, []
    for _ in range(epochs):
        order = rng.permutation(Z.shape[0]).astype(np.int64)
        args = (Z, y, order, assign, W, st["V"], st["last"], Theta, st["VT"], *_args(tb),
                np.float32(eta), mu, nu, batch, t, st["G"], st["GT"], st["flag"],
                st["counters"])
        if kind == "fast":
            t, total = sgd_pass(*args)
        else:
            t, total = sgd_pass_exact(*args, kind == "full")
        totals.append(total)
        assert not st["G"].any() and not st["GT"].any() and not st["flag"].any()
    return totals, st


def _toy_tree(seed=0, n=300, depth=5):
    """A random tree on a separable-ish toy problem (rows of norm ~1)."""
    rng = np.random.default_rng(seed)
    left, right, _ = naive.random_tree(rng, depth, 0.85)
    tb = tree_tables(left, right)
    p, C = 5, 3
    Z = rng.normal(size=(n, p)).astype(np.float32)
    y = ((Z[:, 0] + Z[:, 1] > 0).astype(int) + (Z[:, 2] - Z[:, 3] > 0.5)).astype(np.int32)
    W = (rng.normal(size=(int((left >= 0).sum()), p + 1)) * 0.5).astype(np.float32)
    Theta = np.zeros((int((left < 0).sum()), C), np.float32)
    return tb, W, Theta, Z, y, rng


@pytest.mark.parametrize("ssgd", [False, True])
def test_sgd_pass_exact_radius1_makes_the_fast_passes_updates(ssgd):
    """Radius 1 (the same bound): without momentum, W, Theta and the surrogate
    sums are identical bit for bit; with momentum the exact inference brings
    every row up to date at every sample (lazy momentum, different rounding):
    equal to float32 precision."""
    tb, W, Theta, Z, y, rng = _toy_tree()
    assign = _assign(tb, rng, Z.shape[0], ssgd)
    for mu, nu in ((0.0, 4.0), (0.9, 4.0), (0.9, 1e6)):
        Wf, Tf = W.copy(), Theta.copy()
        We, Te = W.copy(), Theta.copy()
        tot_f, st_f = _passes("fast", Z, y, assign, Wf, Tf, tb, 0.1, mu, nu, 16, 3)
        tot_e, st_e = _passes("ball", Z, y, assign, We, Te, tb, 0.1, mu, nu, 16, 3)
        assert not np.array_equal(Wf, W) and not np.array_equal(Tf, Theta)  # it learnt
        assert st_e["counters"][2] == st_f["counters"][2] and st_e["counters"][3] == \
            st_f["counters"][3]
        if mu == 0.0:
            np.testing.assert_array_equal(We, Wf)
            np.testing.assert_array_equal(Te, Tf)
            assert tot_e == tot_f
        else:
            np.testing.assert_allclose(We, Wf, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(Te, Tf, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(tot_e, tot_f, rtol=1e-5)
        # the exact inference computes every row's dot product for every sample
        assert st_e["counters"][0] == 3 * Z.shape[0] * W.shape[0]
        assert st_f["counters"][0] < st_e["counters"][0]


def _dense_full_sgd(W, Theta, tb, Z, y, assign, order, eta, mu, nu, batch):
    """Dense SGD on the full bound (every bit vector, brute force), float64."""
    W = W.astype(np.float64).copy()
    Theta = Theta.astype(np.float64).copy()
    V, VT = np.zeros_like(W), np.zeros_like(Theta)
    for start in range(0, order.shape[0], batch):
        rows = order[start:start + batch]
        gW, gT = np.zeros_like(W), np.zeros_like(Theta)
        for i in rows:
            _, g, h = naive.brute_surrogate(W, Theta, tb, Z[i], y[i], assign[i], radius=None)
            gW += np.outer(g - h, np.append(Z[i].astype(np.float64), -1.0))
            lf = naive.leaf_of_bits(g, tb["left"], tb["right"], tb["row"], tb["leaf"])
            sm = np.exp(Theta[lf] - Theta[lf].max())
            gT[lf] += sm / sm.sum()
            gT[lf, y[i]] -= 1.0
        V = mu * V + gW / rows.shape[0]
        W -= eta * V
        norms = (W * W).sum(axis=1)
        W *= np.where(norms > nu, np.sqrt(nu / np.maximum(norms, 1e-300)), 1.0)[:, None]
        VT = mu * VT + gT / rows.shape[0]
        Theta -= eta * VT
    return W, Theta


@pytest.mark.parametrize("ssgd", [False, True])
@pytest.mark.parametrize("mu", [0.0, 0.9])
def test_sgd_pass_exact_full_equals_dense_brute_force(ssgd, mu):
    """All bit vectors (Eq. 10): several rows may flip per sample; equals dense
    SGD on brute-force subgradients (ball inactive, so lazy momentum is exact)."""
    tb, W, Theta, Z, y, rng = _problem(7, depth=3, n=48, scale=0.3)
    assert W.shape[0] <= BRUTE_MAX_ROWS
    assign = _assign(tb, rng, Z.shape[0], ssgd)
    order = rng.permutation(Z.shape[0]).astype(np.int64)
    Wk, Tk = W.copy(), Theta.copy()
    st = _state(Wk, Tk)
    sgd_pass_exact(Z, y, order, assign, Wk, st["V"], st["last"], Tk, st["VT"], *_args(tb),
                   np.float32(0.05), mu, 1e6, 8, 0, st["G"], st["GT"], st["flag"],
                   st["counters"], True)
    Wr, Tr = _dense_full_sgd(W, Theta, tb, Z, y, assign, order, 0.05, mu, 1e6, 8)
    np.testing.assert_allclose(Wk, Wr, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(Tk, Tr, rtol=1e-4, atol=1e-4)
    assert not np.allclose(Wk, W)


def test_full_bound_flips_several_bits_and_stays_in_the_ball():
    """With small activations (small W) the full inference flips more than one
    bit, unlike the radius-1 ball; rows stay in the ball after the pass."""
    tb, W, Theta, Z, y, rng = _problem(11, depth=4, n=64, scale=0.02)
    assign = _assign(tb, rng, Z.shape[0], False)
    sur_ball, _ = _exact(Z, y, assign, W, Theta, tb, False)
    sur_full, _ = _exact(Z, y, assign, W, Theta, tb, True)
    assert (sur_full > sur_ball + 1e-6).any()
    Wk, Tk = W.copy(), Theta.copy()
    _passes("full", Z, y, assign, Wk, Tk, tb, 0.5, 0.9, 0.01, 16, 2)
    assert ((Wk.astype(np.float64) ** 2).sum(axis=1) <= 0.01 * (1 + 1e-5)).all()
