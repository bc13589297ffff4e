"""Non-greedy trees: the fast loss-augmented inference and the SGD pass against
brute force (tests/naive_nongreedy.py), the surrogate as an upper bound of the
tree's loss, SGD decreasing it, the greedy initialisation, determinism, the
flat arrays (predict, dense inference, save/load) and scikit-learn's checks."""

import inspect
import warnings

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

from facesegment.forest import (constraints_of, AxisAlignedForest, NonGreedyForest,
                                NonGreedyTree, validate_params)
from facesegment.forest._nongreedy_kernels import sgd_pass
from facesegment.forest.nongreedy import (evaluate, initial_parameters, train_tree,
                                          tree_tables)
from facesegment.forest.registry import kind_of, make_estimator
from tests import naive_nongreedy as naive
from tests.forest.test_extra import (BOOTSTRAP_XFAIL, NO_BOOTSTRAP_XFAIL, dense_matches_predict,
                                     same_forest)


def _problem(seed, depth=3, n=12, p=4, C=3, scale=1.0, p_split=0.8):
    """A random tree with random W (rows of norm ~scale), Theta, samples."""
    rng = np.random.default_rng(seed)
    left, right, _ = naive.random_tree(rng, depth, p_split)
    tb = tree_tables(left, right)
    m = int((left >= 0).sum())
    W = (rng.normal(size=(m, p + 1)) * scale).astype(np.float32)
    Theta = (rng.normal(size=(int((left < 0).sum()), C)) * 2).astype(np.float32)
    Z = rng.normal(size=(n, p)).astype(np.float32)
    y = rng.integers(0, C, size=n).astype(np.int32)
    return tb, W, Theta, Z, y, rng


def _assignments(tb, rng, n):
    return rng.integers(0, tb["path_len"].shape[0], size=n).astype(np.int32)


# ------------------------------------------------------------------ kernels
def test_tree_tables_paths():
    left = np.array([1, 3, -1, 5, -1, -1, -1], np.int32)
    right = np.array([2, 4, -1, 6, -1, -1, -1], np.int32)
    tb = tree_tables(left, right)
    assert tb["row"].tolist() == [0, 1, -1, 2, -1, -1, -1]
    assert tb["leaf"].tolist() == [-1, -1, 0, -1, 1, 2, 3]
    assert tb["path_len"].tolist() == [1, 2, 3, 3]
    assert tb["path_node"][3].tolist() == [0, 1, 3] and tb["path_dir"][3].tolist() == [-1, -1, 1]
    assert tb["path_dir"][0, 0] == 1


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ssgd", [False, True])
def test_fast_loss_augmented_inference_equals_brute_force(seed, ssgd):
    tb, W, Theta, Z, y, rng = _problem(seed, depth=3 + seed % 2, scale=0.3 + seed)
    assign = _assignments(tb, rng, Z.shape[0]) if ssgd else np.full(Z.shape[0], -1, np.int32)
    sur, loss, reached = evaluate(Z, y, assign, W, Theta, tb)
    for i in range(Z.shape[0]):
        ref, _, _ = naive.brute_surrogate(W, Theta, tb, Z[i], y[i], assign[i], radius=1)
        assert sur[i] == pytest.approx(ref, rel=1e-5, abs=1e-5)
        a = naive.activations(W, Z[i])
        lf = naive.leaf_of_bits(np.where(a > 0, 1, -1), tb["left"], tb["right"], tb["row"],
                                tb["leaf"])
        assert reached[i] == lf
        assert loss[i] == pytest.approx(naive.log_loss(Theta[lf], y[i]), rel=1e-5)


@pytest.mark.parametrize("seed", range(20))
def test_surrogate_upper_bounds_the_loss_for_random_w(seed):
    """Property: for any W (any scale), Theta and sample, loss <= fast surrogate <=
    full surrogate (every bit vector); with fixed leaves (SSGD) the surrogate also
    bounds the loss at the fixed leaf; scaling W up tightens the full bound."""
    tb, W, Theta, Z, y, rng = _problem(seed, depth=1 + seed % 4, scale=10.0 ** rng_scale(seed))
    no = np.full(Z.shape[0], -1, np.int32)
    sur, loss, _ = evaluate(Z, y, no, W, Theta, tb)
    assert (sur >= loss - 1e-5).all()
    assign = _assignments(tb, rng, Z.shape[0])
    sur_s, loss_s, _ = evaluate(Z, y, assign, W, Theta, tb)
    assert (sur_s >= loss_s - 1e-5).all()  # the tree's own loss...
    fixed = np.array([naive.log_loss(Theta[a], c) for a, c in zip(assign, y)])
    assert (sur_s >= fixed - 1e-5).all()  # ...and the fixed leaf's
    for i in range(min(4, Z.shape[0])):
        full, _, _ = naive.brute_surrogate(W, Theta, tb, Z[i], y[i], radius=None)
        assert full >= sur[i] - 1e-5
        full2, _, _ = naive.brute_surrogate(W * 2, Theta, tb, Z[i], y[i], radius=None)
        assert full2 <= full + 1e-5  # Proposition 1: tighter as W grows


def rng_scale(seed):
    return (seed % 5) - 2  # W scales 1e-2 .. 1e2


@pytest.mark.parametrize("ssgd", [False, True])
def test_one_step_of_sgd_pass_equals_brute_force_gradient(ssgd):
    tb, W, Theta, Z, y, rng = _problem(3, depth=3, n=30, scale=0.5)
    assign = _assignments(tb, rng, 30) if ssgd else np.full(30, -1, np.int32)
    eta, nu = 0.05, 100.0
    Wk, Tk = W.copy(), Theta.copy()
    _run_pass(Z, y, np.arange(30, dtype=np.int64), assign, Wk, Tk, tb, eta, 0.0, nu, 30)
    gW, gT = naive.brute_gradients(W, Theta, tb, Z, y, assign)
    np.testing.assert_allclose(Wk, W - eta * gW, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Tk, Theta - eta * gT, rtol=1e-5, atol=1e-5)
    assert np.abs(gW).sum() > 0


@pytest.mark.parametrize("nu", [1e6, 0.3])
def test_sgd_pass_with_momentum_equals_dense_reference(nu):
    """Lazy momentum equals the dense update while the ball is not hit (nu large),
    and stays close (rows on the ball) when it is."""
    tb, W, Theta, Z, y, rng = _problem(5, depth=3, n=40, scale=0.2)
    if nu < 1:  # start on the sphere: the projection is active from the first step
        W *= np.sqrt(nu / (W.astype(np.float64) ** 2).sum(axis=1, keepdims=True)).astype(
            np.float32)
    order = rng.permutation(40).astype(np.int64)
    assign = np.full(40, -1, np.int32)
    Wk, Tk = W.copy(), Theta.copy()
    _run_pass(Z, y, order, assign, Wk, Tk, tb, 0.02, 0.9, nu, 8)
    Wr, Tr = naive.dense_sgd(W, Theta, tb, Z, y, assign, order, 0.02, 0.9, nu, 8)
    np.testing.assert_allclose(Tk, Tr, rtol=1e-4, atol=1e-4)
    if nu > 1:
        np.testing.assert_allclose(Wk, Wr, rtol=1e-4, atol=1e-4)
    else:
        assert ((Wk.astype(np.float64) ** 2).sum(axis=1) <= nu * (1 + 1e-5)).all()
        np.testing.assert_allclose(Wk, Wr, atol=0.05)


def _run_pass(Z, y, order, assign, W, Theta, tb, eta, mu, nu, batch):
    V, VT = np.zeros_like(W), np.zeros_like(Theta)
    G, GT = np.zeros_like(W), np.zeros_like(Theta)
    last = np.full(W.shape[0], -1, np.int64)
    flag = np.zeros(W.shape[0], np.bool_)
    counters = np.zeros(4, np.int64)
    sgd_pass(Z, y, order, assign, W, V, last, Theta, VT, tb["left"], tb["right"], tb["row"],
             tb["leaf"], tb["path_node"], tb["path_dir"], tb["path_len"], np.float32(eta),
             mu, nu, batch, 0, G, GT, flag, counters)
    assert not G.any() and not GT.any() and not flag.any()
    assert counters[2] == order.shape[0]


def _toy(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] - X[:, 3] > 0.5)
    return X, y


@pytest.mark.parametrize("refresh", [0, 1, 3])
def test_sgd_decreases_the_surrogate_on_a_toy_problem(refresh):
    X, y = _toy()
    est = NonGreedyTree(max_depth=4, n_epochs=15, nu=4.0, eta=0.05, ssgd_refresh=refresh,
                        leaf_refit=False, random_state=0).fit(X, y)
    ev = [e for e in est.tree_stats_[0]["epochs"] if "surrogate" in e]
    assert ev[-1]["surrogate"] < 0.7 * ev[0]["surrogate"]
    assert ev[-1]["surrogate"] >= ev[-1]["loss"] - 1e-9
    assert est.score(X, y) > 0.75


def test_zero_epochs_reproduce_the_greedy_tree():
    X, y = _toy(400, seed=1)
    greedy = AxisAlignedForest(n_estimators=1, max_features="all", bootstrap=False,
                               max_depth=5, random_state=0).fit(X, y)
    ng = NonGreedyTree(max_depth=5, n_epochs=0, random_state=0).fit(X, y)
    leaves_g = greedy.apply(X)[:, 0]
    leaves_n = ng.apply(X)[:, 0]
    np.testing.assert_array_equal(leaves_n, leaves_g)  # same structure, same routes
    assert ng.forest_.n_nodes == greedy.forest_.n_nodes
    assert (ng.forest_.oblique[ng.forest_.left >= 0] >= 0).all()
    np.testing.assert_array_equal(ng.predict(X), greedy.predict(X))


@pytest.mark.parametrize("family", ["axis", "co2"])
def test_initial_parameters_keep_the_greedy_routes(family):
    """W from a greedy tree (axis or CO2 oblique splits on raw features) routes every
    training sample, in normalised space, to the same leaf as the greedy tree."""
    from facesegment.forest._grow import RowDraw, TreeParams, grow_tree
    from facesegment.forest.co2 import CO2_DEFAULTS

    X, y = _toy(400, seed=2)
    mean, std = X.mean(0), X.std(0)
    inv_std = (1 / std).astype(np.float32)
    cls = NonGreedyForest._init_families[family]
    splitter = (cls(max_features=5) if family == "axis" else
                cls(max_features=5, co2=dict(CO2_DEFAULTS), oblique_min_samples=50,
                    mean=mean, inv_std=inv_std, n_pairs=1))
    params = TreeParams(splitter=splitter, draw=RowDraw(400, False), max_depth=4)
    tree = grow_tree(X, y.astype(np.int32), 3, params, 0)
    if family == "co2":
        assert (tree["oblique"] >= 0).any()
    W, Theta = initial_parameters(tree, mean, inv_std, 4.0, 3)
    np.testing.assert_allclose((W.astype(np.float64) ** 2).sum(axis=1), 4.0, rtol=1e-4)
    tb = tree_tables(tree["left"], tree["right"])
    Z = ((X - mean) * inv_std).astype(np.float32)
    _, _, reached = evaluate(Z, y.astype(np.int32), np.full(400, -1, np.int32), W, Theta, tb)
    expect = []
    for x in X:
        node = 0
        while tree["left"][node] >= 0:
            ob, f = tree["oblique"][node], tree["feature"][node]
            v = tree["weights"][ob] @ x if ob >= 0 else x[f]
            node = tree["left"][node] if v <= tree["threshold"][node] else tree["right"][node]
        expect.append(tb["leaf"][node])
    assert np.count_nonzero(reached != np.array(expect)) <= 1


# ------------------------------------------------------------- estimator
def test_same_seed_identical_arrays_any_n_jobs():
    X, y = _toy(500)
    kw = dict(n_estimators=3, max_depth=4, n_epochs=3, random_state=7)
    a = NonGreedyForest(**kw).fit(X, y)
    same_forest(a, NonGreedyForest(**kw).fit(X, y))
    same_forest(a, NonGreedyForest(**kw, n_jobs=2).fit(X, y))
    b = NonGreedyForest(**{**kw, "random_state": 8}).fit(X, y)
    assert a.forest_.weights.tobytes() != b.forest_.weights.tobytes()


def test_fit_does_not_depend_on_the_fits_before_it_in_the_process():
    """The process's earlier fits (other kinds, other settings) leave no state a
    later non-greedy fit reads: the same seed gives the same arrays (what moves
    its forests is the vector width, benchmarks/nongreedy_vector_width.py)."""
    X, y = _toy(500)
    kw = dict(n_estimators=2, max_depth=5, refine_depth=3, n_epochs=2, init="co2",
              oblique_min_samples=30, random_state=3)
    first = NonGreedyForest(**kw).fit(X, y)
    for kind in ("axis", "two-probe", "co2", "extra"):
        make_estimator(kind, n_estimators=2, max_depth=5, random_state=1).fit(X, y)
    NonGreedyForest(**{**kw, "eta": 0.5, "random_state": 4}).fit(X, y)
    same_forest(first, NonGreedyForest(**kw).fit(X, y))


def test_integer_weights_equal_repeated_shuffled_rows():
    X, y = _toy(200, seed=3)
    w = np.random.default_rng(1).integers(0, 3, size=200)
    kw = dict(max_depth=3, n_epochs=3, random_state=0)
    a = NonGreedyTree(**kw).fit(X, y, sample_weight=w)
    perm = np.random.default_rng(2).permutation(int(w.sum()))
    Xr, yr = np.repeat(X, w, axis=0)[perm], np.repeat(y, w)[perm]
    same_forest(a, NonGreedyTree(**kw).fit(Xr, yr))


def test_flat_arrays_follow_the_contract_and_match_training_routes():
    X, y = _toy(500)
    est = NonGreedyTree(max_depth=4, n_epochs=5, random_state=0).fit(X, y)
    fa = est.forest_
    inner = fa.left >= 0
    assert (fa.right[inner] == fa.left[inner] + 1).all()
    assert (fa.feature == -1).all() and (fa.oblique[inner] >= 0).all()
    assert fa.weights.shape == (int(inner.sum()), 5) and fa.weights.dtype == np.float32
    np.testing.assert_allclose(fa.value.sum(axis=1), 1.0, rtol=1e-5)
    assert fa.n_samples[0] == 500
    # truncated prediction reads the internal nodes' distributions
    assert est.predict_proba(X, max_depth=0).std(axis=0).max() < 1e-6
    st = est.tree_stats_[0]
    assert st["max_depth"] == 4 and st["lai_samples_per_s"] > 0


def test_dense_inference_equals_predict_proba():
    dense_matches_predict(NonGreedyForest(n_estimators=2, max_depth=4, n_epochs=3,
                                          random_state=0))


def test_save_and_load_round_trip(tmp_path):
    from facesegment.modelio.model import Model, save_model
    from facesegment.models import load_model

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (300, 12), dtype=np.uint8)
    y = (X[:, 0].astype(int) + X[:, 1] > 255).astype(int)
    est = make_estimator("nongreedy", n_estimators=2, max_depth=3, n_epochs=3,
                         random_state=0).fit(X, y)
    assert kind_of(est) == "nongreedy"
    m = load_model(save_model(Model.from_estimator(est), tmp_path / "m"))
    back = m.to_estimator()
    assert m.kind == "nongreedy" and back.n_epochs == 3
    assert back.predict_proba(X).tobytes() == est.predict_proba(X).tobytes()


def test_check_estimator_tree():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(NonGreedyTree(max_depth=4, n_epochs=3, random_state=0),
                        expected_failed_checks=NO_BOOTSTRAP_XFAIL)
        check_estimator(NonGreedyForest(n_estimators=2, max_depth=3, n_epochs=2,
                                        random_state=0), expected_failed_checks=BOOTSTRAP_XFAIL)


def test_parameters():
    sig = inspect.signature(NonGreedyForest.__init__)
    defaults = {n: p.default for n, p in sig.parameters.items() if n != "self"}
    assert set(constraints_of(NonGreedyForest)) == set(defaults)
    validate_params(NonGreedyForest, defaults)
    tree = {n: p.default for n, p in inspect.signature(NonGreedyTree.__init__).parameters.items()
            if n != "self"}
    assert set(tree) == set(defaults) and tree["n_estimators"] == 1 and not tree["bootstrap"]
    X, y = _toy(50)
    for bad, match in [({"nu": 0}, "nu=0"), ({"init": "oc1"}, "init='oc1'.*'axis', 'co2'"),
                       ({"momentum": 1.0}, "momentum=1.0"), ({"n_epochs": -1}, "n_epochs=-1"),
                       ({"ssgd_refresh": 1.5}, "ssgd_refresh=1.5")]:
        with pytest.raises(ValueError, match=match):
            NonGreedyTree(**bad).fit(X, y)
    with pytest.raises(ValueError, match="feature_std must be 5 finite"):
        NonGreedyTree().fit(X, y, feature_mean=np.zeros(5), feature_std=np.ones(4))


def test_train_tree_keeps_rows_in_the_ball():
    X, y = _toy(300)
    Z = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
    rng = np.random.default_rng(0)
    left, right, _ = naive.random_tree(rng, 3, p_split=1.0)
    tb = tree_tables(left, right)
    W = rng.normal(size=(7, 6)).astype(np.float32) * 0.1
    Theta = np.zeros((8, 3), np.float32)
    opt = dict(nu=0.5, eta=0.1, momentum=0.9, batch_size=16, n_epochs=4, ssgd_refresh=2,
               leaf_refit=True)
    epochs, reached = train_tree(Z, y.astype(np.int32), 3, tb, W, Theta, opt, rng)
    assert ((W.astype(np.float64) ** 2).sum(axis=1) <= 0.5 * (1 + 1e-5)).all()
    assert reached.shape == (300,) and epochs[-1]["epoch"] == 4
