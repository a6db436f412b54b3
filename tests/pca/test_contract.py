"""The estimator contract of DESIGN.md where it is particular to online PCA
(PerturbedLeaderPCA, FollowTheLeaderPCA): dense instances (bad input,
pickling, chunking), bad parameters, the PCA-only bad vectors, accepted input
layouts, other seeds giving other decisions, scale invariance, get/set_params
and repr, orthonormal components; the GOE generator; and the protocol's
bookkeeping (regret_ and cumulative_gain_) against NumPy oracles. The stream
contract every estimator shares (vector input) is
streamfit.utils.estimator_checks, run on every configuration in
tests/test_estimator_checks.py."""
import copy
import pickle

import numpy as np
import pytest

from streamfit import FollowTheLeaderPCA, PerturbedLeaderPCA
from streamfit.pca import goe_matrix
from streamfit._kernels import _pca
from streamfit.simulate import make_ftl_adversary

from ._cases import (BAD_DENSE, PCA_BAD_VECTOR, REJECTED_FIT, VARIANTS, assert_unchanged,
                     check_bad_data, check_bad_params, check_fresh_rejects,
                     check_not_mutated_nor_aliased, check_rejected_fit,
                     check_same_seed_same_decisions, check_shallow_copy, dense, indefinite,
                     names, snapshot, spiked, two_calls, variant_of)

NOISES = ("fixed", "random_walk", "independent")
# n = 80, k = 3: block 8, so both solvers are allowed ("auto" picks krylov)
N_MID, K_MID = 80, 3


def make(noise="fixed", k=2, **kw):
    """noise="ftl" gives Follow the Leader; anything else FPL with that noise."""
    if noise == "ftl":
        return FollowTheLeaderPCA(k, **kw)
    return PerturbedLeaderPCA(k, noise=noise, **{"random_state": 0, **kw})


def top_k_sum(A, k):
    return float(np.linalg.eigvalsh(A)[-k:].sum())


# -- state comparisons (snapshot and assert_unchanged are in _cases) ----------------

def assert_same_state(a, b):
    """Two estimators in bit-identical states (arrays, counters, rng)."""
    assert_unchanged(b, snapshot(a))


def assert_same_results(a, b):
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.cumulative_gain_ == b.cumulative_gain_
    assert a.regret_ == b.regret_
    assert a.solver_stats_ == b.solver_stats_
    assert a.n_trials_ == b.n_trials_
    assert a.sigma_ == b.sigma_
    assert a.gap_tolerance_ == b.gap_tolerance_


# -- bad input: a clear error naming the argument, state bit-identical -------------

# The cases (PCA_BAD_VECTOR, BAD_DENSE, REJECTED_FIT) and their checks are in _cases,
# shared with test_capped.py; BAD_PARAMS below are those of the FPL family.

def prefit(noise, kind):
    """Two calls, so the state, the rng and the Krylov warm start all exist."""
    return two_calls(make(noise, solver="krylov") if kind == "vector" else make(noise), kind)


@pytest.mark.parametrize("noise", ["fixed", "independent", "ftl"])
@pytest.mark.parametrize("kind, bad", [("vector", b) for b in sorted(PCA_BAD_VECTOR)]
                         + [("dense", b) for b in sorted(BAD_DENSE)])
def test_bad_data_rejected_and_state_unchanged(noise, kind, bad):
    est, ref = check_bad_data(lambda kind: prefit(noise, kind), kind,
                              {**PCA_BAD_VECTOR, **BAD_DENSE}[bad])
    assert_same_results(est, ref)


# name: (params, exception, argument named, FPL only)
BAD_PARAMS = {
    "n_components-0": ({"n_components": 0}, ValueError, "n_components", False),
    "n_components-above-n": ({"n_components": 21}, ValueError, "n_components", False),
    "n_components-negative": ({"n_components": -1}, ValueError, "n_components", False),
    "n_components-float": ({"n_components": 2.5}, TypeError, "n_components", False),
    # a valid k, but not the one the state was built for
    "n_components-changed": ({"n_components": 3}, ValueError, "n_components", False),
    "sigma-negative": ({"sigma": -1.0}, ValueError, "sigma", True),
    "sigma-0": ({"sigma": 0.0}, ValueError, "sigma", True),
    "sigma-str": ({"sigma": "foo"}, ValueError, "sigma", True),
    "sigma-nan": ({"sigma": float("nan")}, ValueError, "sigma", True),
    "noise-name": ({"noise": "gaussian"}, ValueError, "noise", True),
    "noise-changed": ({"noise": "random_walk"}, ValueError, "noise", True),
    "solver-name": ({"solver": "lanczos"}, ValueError, "solver", False),
    "tol-0": ({"tol": 0.0}, ValueError, "tol", False),
    "tol-negative": ({"tol": -0.01}, ValueError, "tol", False),
    "tol-str": ({"tol": "foo"}, TypeError, "tol", False),
}


@pytest.mark.parametrize("kind", ["vector", "dense"])
@pytest.mark.parametrize("noise, bad", [
    (noise, bad) for noise in ("fixed", "ftl") for bad in sorted(BAD_PARAMS)
    if not (noise == "ftl" and BAD_PARAMS[bad][3])])     # FTL has no sigma, noise
def test_bad_params_rejected_and_state_unchanged(noise, kind, bad):
    params, exc, arg, _ = BAD_PARAMS[bad]
    est, ref = check_bad_params(lambda kind: prefit(noise, kind), kind, params, exc, arg)
    assert_same_results(est, ref)


@pytest.mark.parametrize("params, exc, arg", [
    ({"n_components": 0}, ValueError, "n_components"),
    ({"n_components": 21}, ValueError, "n_components"),
    ({"sigma": -1.0}, ValueError, "sigma"),
    ({"sigma": "foo"}, ValueError, "sigma"),
    ({"noise": "gaussian"}, ValueError, "noise"),
    ({"solver": "lanczos"}, ValueError, "solver"),
    # block k + 5 = 7: the Krylov basis [V, W] needs 14 <= n features
    ({"n_components": 2, "solver": "krylov"}, ValueError, "solver"),
    ({"tol": 0.0}, ValueError, "tol"),
    ({"random_state": "seed"}, TypeError, "random_state"),
])
def test_bad_params_leave_fresh_estimator_unfitted(params, exc, arg):
    n = 12 if params.get("solver") == "krylov" else 20
    check_fresh_rejects(PerturbedLeaderPCA(**{"n_components": 2, **params}),
                        lambda est: est.partial_fit(spiked(20, n)), exc, arg)


@pytest.mark.parametrize("bad", sorted(REJECTED_FIT))
def test_rejected_fit_keeps_state(bad):
    check_rejected_fit(lambda kind: prefit("fixed", kind), REJECTED_FIT[bad])


def test_fit_starts_afresh():
    X = spiked(200, 20)
    est = make("fixed").partial_fit(X[:50])
    assert est.fit(X) is est
    assert_same_results(est, make("fixed").partial_fit(X))
    Xs = dense(20, 10)
    assert_same_results(est.fit_dense(Xs), make("fixed").partial_fit_dense(Xs))


def test_not_fitted():
    est = PerturbedLeaderPCA(2)
    for name in ("components_", "cumulative_gain_", "regret_", "n_trials_", "solver_stats_"):
        with pytest.raises(AttributeError, match="fit"):
            getattr(est, name)


# -- accepted input types (VARIANTS in _cases) -----------------------------------------

@pytest.mark.parametrize("variant, kind", [
    (variant, kind) for variant in sorted(VARIANTS) for kind in ("vector", "dense")
    if (variant, kind) != ("float32", "vector")])      # check_float32_input's
def test_input_types_match_float64(variant, kind):
    # float32 is converted once, exactly: the same result as float64 of the
    # same values; layouts and read-only buffers change nothing
    # full-rank dense instances: a rank-5 PSD matrix rounded to float32 has
    # eigenvalues of -5e-9, and is rightly rejected as indefinite (as is the
    # float64 array of the same values)
    data = spiked(150, N_MID, n_spikes=K_MID) if kind == "vector" else dense(40, 30, rank=40)
    data_in, data_ref = variant_of(variant, data)
    method = "partial_fit" if kind == "vector" else "partial_fit_dense"
    k = K_MID if kind == "vector" else 2
    est, ref = make(k=k), make(k=k)
    getattr(est, method)(data_in)
    getattr(ref, method)(data_ref)
    assert_same_results(est, ref)
    np.testing.assert_array_equal(est.transform(spiked(5, est.n_features_in_)),
                                  ref.transform(spiked(5, est.n_features_in_)))


def test_input_not_mutated_nor_aliased():
    check_not_mutated_nor_aliased([(make("independent").partial_fit, spiked(100, 20)),
                                   (make("fixed").partial_fit_dense, dense(20, 10))])


# -- pickling mid-stream ------------------------------------------------------------

@pytest.mark.parametrize("noise", ["random_walk", "ftl"])
def test_pickle_mid_stream_dense(noise):
    Xs = dense(60, 30, seed=3)      # n = 30, k = 2: "auto" is krylov
    est = make(noise).partial_fit_dense(Xs[:25])
    twin = pickle.loads(pickle.dumps(est))
    est.partial_fit_dense(Xs[25:])
    twin.partial_fit_dense(Xs[25:])
    assert_same_results(est, twin)
    assert_same_state(est, twin)
    assert est.solver_stats_["products"] > 0


# -- chunking and determinism ----------------------------------------------------------

@pytest.mark.parametrize("noise", ["fixed", "independent"])
def test_chunking_invariance_dense(noise):
    Xs = dense(50, 30, seed=4)
    one = make(noise).partial_fit_dense(Xs)
    chunked = make(noise)
    for a, b in zip((0, 0, 1, 17, 18, 50)[:-1], (0, 1, 17, 18, 50)):
        chunked.partial_fit_dense(Xs[a:b])
    assert_same_results(one, chunked)
    assert_same_state(one, chunked)


@pytest.mark.parametrize("noise", NOISES)
def test_same_seed_same_decisions_other_seed_other_components(noise):
    X = spiked(150, N_MID, n_spikes=K_MID, seed=5)
    a = check_same_seed_same_decisions(
        lambda seed: make(noise, k=K_MID, random_state=seed), X, assert_same_results)
    other = make(noise, k=K_MID, random_state=8).partial_fit(X)
    assert not np.array_equal(other.components_, a.components_)
    # not just another basis of the same subspace
    assert not np.allclose(other.components_.T @ other.components_,
                           a.components_.T @ a.components_, atol=1e-6)


# -- scale invariance ------------------------------------------------------------------

@pytest.mark.parametrize("solver", ["exact", "krylov"])
@pytest.mark.parametrize("noise", [*NOISES, "ftl"])
def test_scale_invariance_vector(noise, solver):
    # x -> 2x is exact in floating point; sigma="auto" scales with the data
    # (by 4, like x x^T), so every decision is the same, bit for bit, and
    # each gain is 4 times as large, exactly
    X = spiked(200, N_MID, n_spikes=K_MID, seed=6)
    a = make(noise, k=K_MID, solver=solver).partial_fit(X)
    b = make(noise, k=K_MID, solver=solver).partial_fit(2 * X)
    np.testing.assert_array_equal(b.components_, a.components_)
    assert b.cumulative_gain_ == 4 * a.cumulative_gain_
    assert b.sigma_ == 4 * a.sigma_


@pytest.mark.parametrize("solver", ["exact", "krylov"])
@pytest.mark.parametrize("noise", ["fixed", "ftl"])
def test_scale_invariance_dense(noise, solver):
    Xs = dense(100, 30, seed=6)
    a = make(noise, solver=solver).partial_fit_dense(Xs)
    b = make(noise, solver=solver).partial_fit_dense(2 * Xs)
    np.testing.assert_array_equal(b.components_, a.components_)
    assert b.cumulative_gain_ == 2 * a.cumulative_gain_


# -- parameters --------------------------------------------------------------------------

def flat_repr(est):
    # scikit-learn's repr wraps long lines
    return " ".join(repr(est).split())


def test_get_set_params_repr_clone():
    est = PerturbedLeaderPCA(3, noise="random_walk", random_state=0)
    assert est.get_params() == dict(n_components=3, sigma="auto", noise="random_walk",
                                    solver="auto", tol=0.01, random_state=0, n_jobs=None)
    assert flat_repr(est) == "PerturbedLeaderPCA(n_components=3, noise='random_walk', random_state=0)"
    assert est.set_params(sigma=0.5, tol=0.001) is est
    assert est.sigma == 0.5 and est.get_params()["tol"] == 0.001
    assert flat_repr(est) == ("PerturbedLeaderPCA(n_components=3, noise='random_walk', "
                         "random_state=0, sigma=0.5, tol=0.001)")
    with pytest.raises(ValueError, match="bogus"):
        est.set_params(bogus=1)

    ftl = FollowTheLeaderPCA(2, solver="exact")
    assert ftl.get_params() == dict(n_components=2, solver="exact", tol=0.01, n_jobs=None)
    assert flat_repr(ftl) == "FollowTheLeaderPCA(n_components=2, solver='exact')"


# -- components ---------------------------------------------------------------------------

def test_components_orthonormal_after_long_run():
    # the Krylov warm start is never re-orthonormalised as such: rounding must
    # not accumulate over thousands of trials
    X = spiked(3000, 60, n_spikes=4, seed=7)
    est = PerturbedLeaderPCA(4, solver="krylov", random_state=0).partial_fit(X)
    assert est.solver_stats_["products"] > 0
    V = est.components_
    assert V.shape == (4, 60)
    assert np.abs(V @ V.T - np.eye(4)).max() <= 1e-12
    np.testing.assert_array_equal(est.transform(X[:5]), X[:5] @ V.T)


# -- GOE noise ---------------------------------------------------------------------------------

def test_goe_symmetric_exactly():
    N = goe_matrix(100, sigma=0.7, random_state=0)
    assert N.shape == (100, 100) and N.dtype == np.float64
    assert np.array_equal(N, N.T)


def test_goe_entry_distribution():
    # n = 400: 400 diagonal and 79800 off-diagonal independent entries.
    # Margins are 5 standard errors (var of a sample variance ~ 2 s^4 / m).
    n, sigma = 400, 2.0
    N = goe_matrix(n, sigma=sigma, random_state=12345)
    diag, off = np.diag(N), N[np.tril_indices(n, -1)]
    assert abs(diag.mean()) <= 5 * sigma / np.sqrt(n)
    assert abs(diag.var() / sigma**2 - 1) <= 5 * np.sqrt(2 / n)
    m = off.size
    assert abs(off.mean()) <= 5 * sigma / np.sqrt(2 * m)
    assert abs(off.var() / (sigma**2 / 2) - 1) <= 5 * np.sqrt(2 / m)
    # off-diagonal entries of different rows and columns are uncorrelated
    assert abs(np.corrcoef(off[:-1], off[1:])[0, 1]) <= 5 / np.sqrt(m)


@pytest.mark.parametrize("n", [1, 2, 5, 33, 70])    # around the kernel's 32-row tiles
@pytest.mark.parametrize("sigma", [1.0, 0.3])
def test_goe_draws_lower_triangle_in_row_order(n, sigma):
    # exactly n(n+1)/2 standard normals from the generator, row by row along
    # the lower triangle: diagonal scaled by sigma, off-diagonal by sigma/sqrt(2)
    m = n * (n + 1) // 2
    rng = np.random.default_rng(42)
    N = goe_matrix(n, sigma=sigma, random_state=rng)
    z = np.random.default_rng(42).standard_normal(m + 3)
    rows, cols = np.tril_indices(n)             # row-major order of the triangle
    expected = z[:m] * np.where(rows == cols, sigma, sigma / np.sqrt(2))
    np.testing.assert_array_equal(N[rows, cols][rows == cols], expected[rows == cols])
    np.testing.assert_allclose(N[rows, cols], expected, rtol=1e-15, atol=0)
    # nothing more was drawn: the generator continues where the m normals end
    np.testing.assert_array_equal(rng.standard_normal(3), z[m:])


def test_goe_edge_cases():
    rng = np.random.default_rng(3)
    state = copy.deepcopy(rng.bit_generator.state)
    N0 = goe_matrix(0, random_state=rng)
    assert N0.shape == (0, 0)
    assert rng.bit_generator.state == state         # n = 0 draws nothing
    N1 = goe_matrix(1, sigma=2.0, random_state=5)
    assert N1.shape == (1, 1)
    assert N1[0, 0] == 2.0 * np.random.default_rng(5).standard_normal()
    assert not goe_matrix(3, sigma=0.0, random_state=0).any()
    np.testing.assert_array_equal(goe_matrix(50, random_state=9), goe_matrix(50, random_state=9))
    with pytest.raises(ValueError, match=names("n")):
        goe_matrix(-1)
    with pytest.raises(TypeError, match=names("n")):
        goe_matrix(2.5)
    with pytest.raises(ValueError, match=names("sigma")):
        goe_matrix(3, sigma=-1.0)


# -- the protocol against NumPy oracles ---------------------------------------------------

@pytest.mark.parametrize("n, k", [(10, 2), (40, 3)])   # exact and (auto) krylov solvers
def test_ftl_adversary_forces_linear_regret(n, k):
    T = 3000
    est = FollowTheLeaderPCA(k).partial_fit(make_ftl_adversary(T, n, k))
    preamble = sum(i / (2 * n) for i in range(1, n))
    # after the preamble the leader never contains the coming axis
    assert est.cumulative_gain_ < preamble
    assert est.regret_ >= 0.9 * (k * T / n - n)


REGRET_VECTOR = [("fixed", 2000), ("random_walk", 800), ("independent", 800), ("ftl", 800)]


@pytest.mark.parametrize("noise, T", REGRET_VECTOR)
def test_regret_matches_numpy_vector(noise, T):
    # fixed noise recovers sum x x^T as S - s N after T incremental updates
    # of s: the longest run there
    X = spiked(T, 30, seed=8)
    est = make(noise, k=3).partial_fit(X)
    best = top_k_sum(X.T @ X, 3)
    np.testing.assert_allclose(est.regret_, best - est.cumulative_gain_, rtol=1e-8)
    np.testing.assert_allclose(est.best_gain_, best, rtol=1e-12)
    np.testing.assert_allclose(est.cumulative_matrix(), X.T @ X, rtol=0, atol=1e-10 * T)


@pytest.mark.parametrize("noise", [*NOISES, "ftl"])
def test_regret_matches_numpy_dense(noise):
    Xs = dense(200, 20, seed=8)
    est = make(noise, k=3).partial_fit_dense(Xs)
    best = top_k_sum(Xs.sum(axis=0), 3)
    np.testing.assert_allclose(est.regret_, best - est.cumulative_gain_, rtol=1e-8)
    np.testing.assert_allclose(est.best_gain_, best, rtol=1e-12)


@pytest.mark.parametrize("noise", [*NOISES, "ftl"])
def test_cumulative_gain_is_sum_of_projections_vector(noise):
    # the gain of trial t uses the components_ visible before the trial; an
    # empty first call exposes the first decision (before any data)
    X = spiked(200, N_MID, n_spikes=K_MID, seed=9)
    est = make(noise, k=K_MID).partial_fit(X[:0])
    gain = 0.0
    for x in X:
        gain += float(np.sum((est.components_ @ x) ** 2))
        est.partial_fit(x[None])
    np.testing.assert_allclose(est.cumulative_gain_, gain, rtol=1e-10)
    assert est.n_trials_ == len(X)


@pytest.mark.parametrize("noise", ["fixed", "independent"])
def test_cumulative_gain_is_sum_of_projections_dense(noise):
    Xs = dense(80, 30, seed=9)
    est = make(noise).partial_fit_dense(Xs[:0])
    gain = 0.0
    for Xt in Xs:
        V = est.components_
        gain += float(np.trace(V @ Xt @ V.T))
        est.partial_fit_dense(Xt[None])
    np.testing.assert_allclose(est.cumulative_gain_, gain, rtol=1e-10)


# -- parameters changed mid-stream, noise bookkeeping, failures ------------------------

def test_n_components_change_is_rejected_even_when_the_block_size_is_clamped():
    # at n = 10 the block is clamped to n for k = 5 and k = 8 alike
    est = PerturbedLeaderPCA(5, random_state=0).partial_fit(spiked(50, n=10))
    before = snapshot(est)
    with pytest.raises(ValueError, match="n_components"):
        est.set_params(n_components=8).partial_fit(spiked(50, n=10, seed=1))
    assert_unchanged(est, before)
    assert est.set_params(n_components=5).components_.shape == (5, 10)


def test_switch_between_random_walk_and_independent_is_rejected():
    est = PerturbedLeaderPCA(2, noise="random_walk", random_state=0).partial_fit(spiked(30))
    before = snapshot(est)
    with pytest.raises(ValueError, match="noise"):
        est.set_params(noise="independent").partial_fit(spiked(30, seed=1))
    assert_unchanged(est, before)


@pytest.mark.parametrize("noise", ["random_walk", "independent"])
def test_noise_in_S_has_the_papers_variance(noise):
    # S - C = sqrt(t + 1) sigma N for the next decision: variance (t + 1) sigma^2 on
    # the diagonal and (t + 1) sigma^2 / 2 off it; n = 200 gives 200 and 19,900
    # samples, and the bounds are 5 standard errors wide
    n, sigma, T = 200, 0.3, 50
    est = PerturbedLeaderPCA(2, noise=noise, sigma=sigma, random_state=0)
    est.partial_fit(spiked(T, n=n))
    E = est.perturbed_matrix() - est.cumulative_matrix()
    var = (T + 1) * sigma ** 2
    d, off = np.diag(E), E[np.tril_indices(n, -1)]
    assert abs(np.var(d) / var - 1) < 5 * np.sqrt(2 / n)
    assert abs(np.var(off) / (var / 2) - 1) < 5 * np.sqrt(2 / off.size)


def test_lowering_sigma_mid_stream_shrinks_the_random_walk():
    n = 200
    est = PerturbedLeaderPCA(2, noise="random_walk", sigma=1.0, random_state=0)
    est.partial_fit(spiked(100, n=n))
    est.set_params(sigma=0.01).partial_fit(spiked(100, n=n, seed=1))
    E = est.perturbed_matrix() - est.cumulative_matrix()
    # sqrt(201) * 0.01 = 0.14, not the ~10 the walk had reached
    assert np.std(E[np.tril_indices(n, -1)]) * np.sqrt(2) == pytest.approx(
        np.sqrt(201) * 0.01, rel=0.05)


def test_overflow_of_the_cumulative_matrix_is_rejected():
    est = make().partial_fit(spiked(5))
    before = snapshot(est)
    with pytest.raises(ValueError, match="X is too large"):
        est.partial_fit(np.full((100, 20), 1e153))
    assert_unchanged(est, before)


def test_float16_dense_instances_still_get_a_psd_check():
    Xs = indefinite(dense(5, n=120)).astype(np.float16)
    with pytest.raises(ValueError, match="positive semidefinite"):
        make().partial_fit_dense(Xs)


@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_a_solve_whose_every_eigen_solver_fails_keeps_the_previous_decision(kind):
    # Only a non-finite S makes the whole chain (dsyevr, dsyevd, dsyev, Jacobi)
    # fail; validated input cannot get one there, so the test plants a NaN.
    # The trial still completes: the previous (orthonormal) decision is
    # played again and counted, and the estimator stays consistent.
    est = make(solver="exact").partial_fit(spiked(10)) if kind == "vector" else \
        make(solver="exact").partial_fit_dense(dense(10))
    V = est.components_
    _pca._plant(est._state, 3, 1, np.nan)
    if kind == "vector":
        est.partial_fit(spiked(3, seed=1))
    else:
        est.partial_fit_dense(dense(3, seed=1))
    assert est.n_trials_ == 13
    assert est.solver_stats_["kept"] == 3 and est.solver_stats_["solves"] == 13
    np.testing.assert_array_equal(est.components_, V)
    assert np.isfinite(est.cumulative_matrix()).all()


def test_overflow_on_a_fresh_estimator_leaves_it_and_its_generator_alone():
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    est = PerturbedLeaderPCA(2, random_state=rng)
    with pytest.raises(ValueError, match="X is too large"):
        est.partial_fit(np.full((1, 20), 5e149))    # ||x||^2 = 5e300 is finite
    assert not est.__sklearn_is_fitted__()
    assert rng.bit_generator.state == before


def test_shallow_copy_does_not_share_the_matrices():
    X = spiked(60)
    check_shallow_copy(make().partial_fit(X[:30]), X[30:], assert_same_results)


def test_read_only_state_arrays_are_accepted():
    # e.g. a state loaded with joblib's mmap_mode="r": its arrays are read
    # only, and the state object takes copies
    X = spiked(60)
    est = make(noise="random_walk").partial_fit(X[:30])
    twin = pickle.loads(pickle.dumps(est))
    state = est._state.to_state()
    for value in state.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    est._state = type(est._state).from_state(state)
    assert_same_results(est.partial_fit(X[30:]), twin.partial_fit(X[30:]))


def test_learn_one_is_partial_fit_of_one_row_bit_for_bit():
    # the event API and a one-row partial_fit take the same trial as a block
    X = spiked(120, N_MID, n_spikes=K_MID, seed=12)
    for noise in (*NOISES, "ftl"):
        block = make(noise, k=K_MID).partial_fit(X)
        one = make(noise, k=K_MID).partial_fit(X[:1])
        for i, x in enumerate(X[1:], start=1):
            if i % 2:
                one.learn_one(x)
            else:
                one.partial_fit(X[i:i + 1])
        assert_same_state(block, one)
        # (transform is numpy's product, transform_one the kernel's dot: to rounding)
        np.testing.assert_allclose(one.transform_one(X[0]), one.transform(X[:1])[0],
                                   rtol=1e-13, atol=1e-15)
        one.learn_one(list(X[0]))           # a sequence of floats
        block.partial_fit(X[:1])
        assert_same_state(block, one)


@pytest.mark.parametrize("x, exc, words", [
    (np.full(20, np.nan), ValueError, "NaN"),
    (np.r_[np.ones(19), np.inf], ValueError, "inf"),
    (np.ones(19), ValueError, "19 features"),
    (["1"] * 20, TypeError, "not a real number"),
    ([b"1"] * 20, TypeError, "not a real number"),
    ("x" * 20, TypeError, "sequence"),
    (np.ones((1, 20)), ValueError, "1-dimensional"),
])
def test_learn_one_refuses_bad_rows_naming_x(x, exc, words):
    est = make().partial_fit(spiked(30))
    before = snapshot(est)
    with pytest.raises(exc, match=words):
        est.learn_one(x)
    assert_unchanged(est, before)
