"""Density forests: kernels against naive references, the density integrates to 1,
samples match the data, model folders round-trip, determinism, the sklearn API."""

import json
import warnings

import h5py
import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import check_estimator

from facesegment.errors import DataError
from facesegment.forest import (constraints_of, DensityForest, InvalidParameterError,
                                validate_params)
from facesegment.forest._density_kernels import (best_density_split, leaf_log_mass,
                                                 sample_kernel)
from facesegment.forest.density import _fallback
from facesegment.forest.registry import kind_of, make_estimator
from facesegment.modelio.model import Model, save_model
from facesegment.models import load_model
from tests.naive_density import (naive_box_mass, naive_cells, naive_density_split,
                                 naive_log_density)


def _mixture(n=600, seed=0):
    """Two correlated Gaussian blobs in 2-D."""
    rng = np.random.default_rng(seed)
    a = rng.multivariate_normal([0, 0], [[1.0, 0.6], [0.6, 0.8]], size=n // 2)
    b = rng.multivariate_normal([3, 2], [[0.3, -0.1], [-0.1, 0.5]], size=n - n // 2)
    return rng.permutation(np.concatenate([a, b]))


def _small(**kw):
    return DensityForest(**{"n_estimators": 4, "min_samples_leaf": 25, "random_state": 0,
                            **kw})


# --------------------------------------------------------------- kernels
@pytest.mark.parametrize("diag", [False, True])
def test_split_matches_naive_reference(diag):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 3)).astype(np.float32)
    X[:, 1] += 2 * (X[:, 0] > 0.3)
    w = rng.uniform(0.5, 2.0, size=80)
    rows = np.arange(5, 75, dtype=np.int64)
    f, t, gain = best_density_split(X, w, rows, 3, 0, 6, 1e-6, diag)
    nf, nt, ngain = naive_density_split(X, w, rows, 6, 1e-6, diag)
    assert (f, t) == (nf, nt)
    assert gain == pytest.approx(ngain, rel=1e-9, abs=1e-12) and gain > 0


def test_split_refuses_when_no_cut_leaves_min_rows():
    X = np.random.default_rng(0).normal(size=(10, 2)).astype(np.float32)
    f, _, _ = best_density_split(X, np.ones(10), np.arange(10, dtype=np.int64), 2, 0, 6,
                                 1e-6, False)
    assert f == -1


def test_random_cuts_are_among_the_exhaustive_ones():
    X = _mixture(200).astype(np.float32)
    rows = np.arange(200, dtype=np.int64)
    f, t, gain = best_density_split(X, np.ones(200), rows, 2, 8, 10, 1e-6, False)
    _, _, best = naive_density_split(X, np.ones(200), rows, 10, 1e-6, False)
    assert f >= 0 and 0 < gain <= best + 1e-12


@pytest.mark.parametrize("diag", [False, True])
def test_leaf_masses_match_scipy(diag):
    rng = np.random.default_rng(2)
    mean = rng.normal(size=(6, 2))
    A = rng.normal(size=(6, 2, 2)) * 0.7
    C = A @ A.transpose(0, 2, 1) + 0.2 * np.eye(2)
    if diag:
        C = C * np.eye(2)
    chol = np.linalg.cholesky(C)
    lower = mean - rng.uniform(0.2, 1.5, size=(6, 2))
    upper = mean + rng.uniform(0.2, 1.5, size=(6, 2))
    lower[0, 1], upper[1, 0] = -np.inf, np.inf   # half-open cells
    lower[2, :], upper[2, :] = -np.inf, np.inf   # open in one coordinate (exact)
    lower[2, 0] = mean[2, 0]
    got = np.exp(leaf_log_mass(mean, chol, lower, upper, diag, 20000, 3))
    want = [naive_box_mass(mean[k], C[k], lower[k], upper[k]) for k in range(6)]
    tol = 1e-12 if diag else 0.015   # Monte-Carlo: 20000 draws, standard error <= 0.0036
    np.testing.assert_allclose(got, want, atol=tol)
    assert got[2] == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize("cov", ["diag", "full"])
def test_score_samples_matches_naive_density(cov):
    X = _mixture(300)
    rng = np.random.default_rng(4)
    w = rng.integers(0, 3, size=300).astype(float)
    est = _small(n_estimators=3, covariance_type=cov, bootstrap=False, max_depth=3,
                 n_mass_samples=100000).fit(X, sample_weight=w)
    Q = np.concatenate([X[:20], rng.normal(1, 2, size=(20, 2))])
    want = naive_log_density(est.forest_, X, w, Q, 1e-6, cov == "diag")
    got = est.score_samples(Q)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 if cov == "diag" else 0.03)


# --------------------------------------------------------------- density
@pytest.mark.parametrize("cov, tol", [("diag", 0.01), ("full", 0.03)])
def test_density_integrates_to_one_on_a_grid(cov, tol):
    X = _mixture(600)
    est = _small(covariance_type=cov).fit(X)
    g = np.linspace(-9, 11, 801)
    xx, yy = np.meshgrid(g, g)
    p = np.exp(est.score_samples(np.c_[xx.ravel(), yy.ravel()]))
    assert p.sum() * (g[1] - g[0]) ** 2 == pytest.approx(1.0, abs=tol)


def test_cells_and_weights_are_the_trees():
    X = _mixture(400)
    est = _small(n_estimators=2).fit(X)
    fa, lv = est.forest_, est.leaves_
    for root in fa.roots:
        for node, (lo, hi) in naive_cells(fa, root, 2).items():
            k = lv.node_leaf[node]
            np.testing.assert_array_equal(lv.lower[k], lo)
            np.testing.assert_array_equal(lv.upper[k], hi)
        leaves = [n for n in naive_cells(fa, root, 2)]
        assert np.exp(lv.log_weight[lv.node_leaf[leaves]]).sum() == pytest.approx(1.0)
    inner = fa.left >= 0
    np.testing.assert_allclose(fa.value[fa.left[inner], 0] + fa.value[fa.right[inner], 0],
                               fa.value[inner, 0], rtol=1e-6)
    assert (fa.right[inner] == fa.left[inner] + 1).all() and est.n_leaves_ == (~inner).sum()


def _energy_pvalue(A, B, n_perm=200, seed=0):
    """Permutation p-value of the energy distance between samples A and B."""
    Z = np.concatenate([A, B])
    D = np.sqrt(((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1))
    n = len(A)

    def stat(idx):
        a, b = idx[:n], idx[n:]
        return 2 * D[np.ix_(a, b)].mean() - D[np.ix_(a, a)].mean() - D[np.ix_(b, b)].mean()

    rng = np.random.default_rng(seed)
    base = stat(np.arange(len(Z)))
    perms = [stat(rng.permutation(len(Z))) for _ in range(n_perm)]
    return (1 + sum(s >= base for s in perms)) / (1 + n_perm)


@pytest.mark.parametrize("cov, tries", [("full", 100), ("diag", 100), ("diag", 1)])
def test_samples_match_the_data(cov, tries):
    """Two-sample tests (KS per coordinate, energy distance) of draws against
    held-out data; tries=1 sends most draws through the fallback (exact for diag)."""
    X = _mixture(1000, seed=5)
    train, held = X[:600], X[600:]
    est = _small(n_estimators=10, covariance_type=cov, max_sample_tries=tries).fit(train)
    S = est.sample(400, random_state=7)
    for j in range(2):
        assert stats.ks_2samp(S[:, j], held[:, j]).pvalue > 0.01
    assert _energy_pvalue(S, held) > 0.01
    # the test can fail: a shifted sample is rejected
    assert _energy_pvalue(S + [0.8, 0.0], held) < 0.01


def test_draws_lie_in_the_cells_of_their_leaves():
    """Rejection draws and fallback draws (max_tries=1 sends most to it) alike."""
    X = _mixture(400)
    est = _small(n_estimators=3).fit(X)
    fa, lv = est.forest_, est.leaves_
    S, rows, ok = sample_kernel(500, 11, fa.roots, fa.left, fa.value[:, 0].astype(float),
                                lv.node_leaf, lv.mean, lv.chol, lv.lower, lv.upper, 1)
    assert 0 < ok.sum() < 500
    _fallback(S, rows, ~ok, lv, np.random.default_rng(0))
    assert ((S > lv.lower[rows]) & (S <= lv.upper[rows])).all()
    # leaves are drawn in proportion to their weights (tree uniform, then descent)
    counts = np.bincount(rows, minlength=est.n_leaves_)
    want = np.exp(lv.log_weight) / len(fa.roots) * 500
    assert stats.chisquare(counts, want).pvalue > 0.01


# --------------------------------------------------------- determinism, API
def test_same_seed_same_forest_whatever_the_threads():
    X = _mixture(500)
    a = _small(n_jobs=1).fit(X)
    b = _small(n_jobs=2).fit(X)
    for x, y in zip(a.forest_ + a.leaves_, b.forest_ + b.leaves_):
        if x is not None:
            assert x.tobytes() == y.tobytes()
    np.testing.assert_array_equal(a.score_samples(X), b.score_samples(X))
    np.testing.assert_array_equal(a.sample(50, random_state=3), b.sample(50, random_state=3))
    c = _small(random_state=1).fit(X)
    assert c.forest_.threshold.tobytes() != a.forest_.threshold.tobytes()
    assert not np.array_equal(a.sample(5, random_state=3), a.sample(5, random_state=4))


def test_zero_weights_are_rows_left_out():
    X = _mixture(300)
    w = np.ones(300)
    w[::3] = 0
    a = _small(bootstrap=False).fit(X, sample_weight=w)
    b = _small(bootstrap=False).fit(X[w > 0])
    np.testing.assert_array_equal(a.score_samples(X), b.score_samples(X))


def test_check_estimator_passes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SkipTestWarning for pandas / array API checks
        check_estimator(DensityForest(3, min_samples_leaf=5, random_state=0))


def test_sklearn_density_api():
    X = _mixture(300)
    est = _small()
    assert clone(est).get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        est.score_samples(X)
    est.fit(X)
    assert est.n_features_in_ == 2 and est.score(X) == pytest.approx(
        est.score_samples(X).sum())
    assert est.sample().shape == (1, 2) and est.sample(7).shape == (7, 2)
    with pytest.raises(ValueError, match="X has 3 features, but DensityForest is expecting 2"):
        est.score_samples(np.zeros((2, 3)))
    grid = GridSearchCV(_small(), {"min_samples_leaf": [10, 60]}, cv=3).fit(X)
    assert grid.best_params_["min_samples_leaf"] in (10, 60)


def test_constraints_table_matches_the_signature():
    defaults = DensityForest().get_params()
    assert set(constraints_of(DensityForest)) == set(defaults)
    assert validate_params(DensityForest, defaults) == defaults


@pytest.mark.parametrize("params, message", [
    ({"covariance_type": "spherical"},
     r"covariance_type='spherical' is invalid for DensityForest: it must be one of 'full', "
     r"'diag'"),
    ({"reg_covar": 0.0}, r"reg_covar=0.0 is invalid for DensityForest: it must be a finite "
                         r"number in \(0, inf\)"),
    ({"n_thresholds": 0}, r"n_thresholds=0 is invalid .*an integer >= 1 or None"),
])
def test_bad_parameters_are_named(params, message):
    with pytest.raises(InvalidParameterError, match=message):
        _small(**params).fit(_mixture(50))


def test_bad_sample_requests_are_named():
    est = _small().fit(_mixture(200))
    with pytest.raises(ValueError, match="n_samples=0 must be an integer >= 1"):
        est.sample(0)
    with pytest.raises(InvalidParameterError, match="random_state=-1 is invalid"):
        est.sample(3, random_state=-1)
    with pytest.raises(InvalidParameterError, match="max_sample_tries=0 is invalid"):
        est.set_params(max_sample_tries=0).sample(3)
    with pytest.raises(ValueError, match="sample_weight has negative values"):
        _small().fit(_mixture(20), sample_weight=-np.ones(20))


# --------------------------------------------------------------- models
def test_model_folder_round_trip(tmp_path):
    X = _mixture(400)
    est = make_estimator("density", n_estimators=3, min_samples_leaf=30, random_state=2).fit(X)
    assert kind_of(est) == "density"
    path = save_model(Model.from_estimator(est), tmp_path / "m")
    doc = json.loads((path / "model.json").read_text())
    assert doc["kind"] == "density" and doc["estimator"] == "DensityForest"
    assert doc["leaf_arrays"] == sorted(est.leaves_._fields)
    back = load_model(path).to_estimator()
    np.testing.assert_array_equal(back.score_samples(X), est.score_samples(X))
    np.testing.assert_array_equal(back.sample(20, random_state=1), est.sample(20, random_state=1))
    assert back.get_params() == {**est.get_params(), "n_jobs": None, "verbose": 0}


def test_model_folder_with_broken_leaves_is_refused(tmp_path):
    est = _small(n_estimators=2).fit(_mixture(200))
    path = save_model(Model.from_estimator(est), tmp_path / "m")
    with h5py.File(path / "forest.h5", "a") as f:
        del f["leaves/log_mass"]
    with pytest.raises(DataError, match="not a consistent density forest: leaf arrays "
                                        "log_mass are missing"):
        load_model(path, verify=False)
    with h5py.File(path / "forest.h5", "a") as f:
        f["leaves/log_mass"] = np.zeros(3)
    with pytest.raises(DataError, match="leaf arrays have inconsistent shapes"):
        load_model(path, verify=False)


def test_set_fitted_refuses_leaves_of_another_forest():
    a = _small(n_estimators=2).fit(_mixture(200))
    b = _small(n_estimators=3).fit(_mixture(200))
    with pytest.raises(ValueError, match="leaf arrays do not fit its trees: node_leaf has "
                                         "shape"):
        DensityForest()._set_fitted(a.forest_, b.leaves_)
