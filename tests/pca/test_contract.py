"""The estimator contract of DESIGN.md for online PCA (PerturbedLeaderPCA,
FollowTheLeaderPCA): input validation that names the argument and leaves the
state bit-identical, accepted input types, pickling mid-stream, chunking
invariance, determinism, scale invariance, get/set_params, orthonormal
components; the GOE generator; and the protocol's bookkeeping (regret_ and
cumulative_gain_) against NumPy oracles."""
import copy
import pickle
import re

import numpy as np
import pytest

from streamfit import FollowTheLeaderPCA, PerturbedLeaderPCA
from streamfit._base import clone
from streamfit.pca import goe_matrix
from streamfit.simulate import make_dense_stream, make_ftl_adversary, make_spiked_stream

NOISES = ("fixed", "random_walk", "independent")
# n = 80, k = 3: block 8, so both solvers are allowed ("auto" picks krylov)
N_MID, K_MID = 80, 3


def spiked(T=300, n=20, seed=0, n_spikes=3):
    return make_spiked_stream(T, n, n_spikes=n_spikes, random_state=seed)


def dense(T=40, n=10, seed=0, rank=5):
    return make_dense_stream(T, n, rank=rank, random_state=seed)


def make(noise="fixed", k=2, **kw):
    """noise="ftl" gives Follow the Leader; anything else FPL with that noise."""
    if noise == "ftl":
        return FollowTheLeaderPCA(k, **kw)
    return PerturbedLeaderPCA(k, noise=noise, **{"random_state": 0, **kw})


def top_k_sum(A, k):
    return float(np.linalg.eigvalsh(A)[-k:].sum())


# -- state snapshots -------------------------------------------------------------

def snapshot(est):
    """Copies of every attribute ending in "_" stored in __dict__ (the arrays
    that are the state, n_features_in_, instances_) and of the rng state."""
    attrs = {name: (value.copy() if isinstance(value, np.ndarray) else copy.deepcopy(value))
             for name, value in vars(est).items() if name.endswith("_")}
    rng = copy.deepcopy(est._rng.bit_generator.state) if hasattr(est, "_rng") else None
    return attrs, rng


def assert_unchanged(est, before):
    attrs, rng = snapshot(est)
    assert attrs.keys() == before[0].keys()
    for name, old in before[0].items():
        new = attrs[name]
        if isinstance(old, np.ndarray):
            assert new.dtype == old.dtype and new.shape == old.shape, name
            assert np.array_equal(new, old), name
        else:
            assert new == old, name
    assert rng == before[1]


def assert_same_state(a, b):
    """Two estimators in bit-identical states (arrays, counters, rng)."""
    before = snapshot(a)
    if isinstance(a, FollowTheLeaderPCA):
        # FTL draws nothing: its (unused) generator is seeded from the OS
        before = (before[0], snapshot(b)[1])
    assert_unchanged(b, before)


def assert_same_results(a, b):
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.cumulative_gain_ == b.cumulative_gain_
    assert a.regret_ == b.regret_
    assert a.solver_stats_ == b.solver_stats_
    assert a.n_trials_ == b.n_trials_
    assert a.sigma_ == b.sigma_
    assert a.gap_tolerance_ == b.gap_tolerance_


def with_value(a, value, where=7):
    a = a.copy()
    a.flat[where] = value
    return a


def names(arg):
    """A regex that matches a message naming `arg` as a word."""
    return rf"(?<![\w.']){re.escape(arg)}(?![\w'])"


# -- bad input: a clear error naming the argument, state bit-identical -------------

def _nonsymmetric(Xs):
    Xs = Xs.copy()
    Xs[3, 0, 1] += 0.1          # a later instance: the earlier ones are valid
    return Xs


def _negative_diagonal(Xs):
    Xs = Xs.copy()
    Xs[2] = np.diag(np.r_[1.0, -1.0, np.ones(Xs.shape[1] - 2)])
    return Xs


def _indefinite(Xs):
    # positive diagonal, eigenvalues 3 and -1: only a factorisation can tell
    Xs = Xs.copy()
    Xs[2] = np.eye(Xs.shape[1])
    Xs[2, 0, 1] = Xs[2, 1, 0] = 2.0
    return Xs


# name: (method, transform of the fresh data block, exception, argument named, detail)
BAD_VECTOR = {
    "X-nan": ("partial_fit", lambda X, Xs: with_value(X, np.nan), ValueError, "X", "NaN"),
    "X-inf": ("partial_fit", lambda X, Xs: with_value(X, np.inf), ValueError, "X", "inf"),
    "X-minus-inf": ("partial_fit", lambda X, Xs: with_value(X, -np.inf), ValueError, "X",
                    "inf"),
    "X-nan-last-row": ("partial_fit", lambda X, Xs: with_value(X, np.nan, -1), ValueError,
                       "X", "NaN"),
    "X-1d": ("partial_fit", lambda X, Xs: X[0], ValueError, "X", "2-dimensional"),
    "X-3d": ("partial_fit", lambda X, Xs: X[:, :, None], ValueError, "X", "2-dimensional"),
    "X-strings": ("partial_fit", lambda X, Xs: X.astype(str), TypeError, "X", "real numbers"),
    "X-n-features": ("partial_fit", lambda X, Xs: X[:, :-1], ValueError, "X", "19 features"),
    "X-too-large": ("partial_fit", lambda X, Xs: X * 1e160, ValueError, "X", "too large"),
    # a fitted-with-vectors estimator given dense instances: the message should
    # name the argument (Xs) and say what was expected (vector instances)
    "Xs-after-vectors": ("partial_fit_dense", lambda X, Xs: Xs, ValueError, "Xs", "vector"),
}

BAD_DENSE = {
    "Xs-nan": ("partial_fit_dense", lambda X, Xs: with_value(Xs, np.nan), ValueError, "Xs",
               "NaN"),
    "Xs-inf": ("partial_fit_dense", lambda X, Xs: with_value(Xs, np.inf), ValueError, "Xs",
               "inf"),
    "Xs-2d": ("partial_fit_dense", lambda X, Xs: Xs[0], ValueError, "Xs", "3-dimensional"),
    "Xs-not-square": ("partial_fit_dense", lambda X, Xs: Xs[:, :, :-1], ValueError, "Xs",
                      "shape"),
    "Xs-n-features": ("partial_fit_dense", lambda X, Xs: Xs[:, :-1, :-1], ValueError, "Xs",
                      "9 features"),
    "Xs-non-symmetric": ("partial_fit_dense", lambda X, Xs: _nonsymmetric(Xs), ValueError,
                         "Xs[3]", "not symmetric"),
    "Xs-negative-diagonal": ("partial_fit_dense", lambda X, Xs: _negative_diagonal(Xs),
                             ValueError, "Xs[2]", "not positive semidefinite"),
    "Xs-indefinite": ("partial_fit_dense", lambda X, Xs: _indefinite(Xs), ValueError,
                      "Xs[2]", "not positive semidefinite"),
    "Xs-too-large": ("partial_fit_dense", lambda X, Xs: Xs * 1e160, ValueError, "Xs",
                     "too large"),
    # the mirror image: vector rows to an estimator fitted with dense instances
    "X-after-dense": ("partial_fit", lambda X, Xs: X, ValueError, "X", "dense"),
}


def prefit(noise, kind):
    """Two calls, so the state, the rng and the Krylov warm start all exist."""
    est = make(noise, solver="krylov") if kind == "vector" else make(noise)
    if kind == "vector":
        X = spiked(100, 20)
        return est.partial_fit(X[:40]).partial_fit(X[40:100])
    Xs = dense(30, 10)
    return est.partial_fit_dense(Xs[:10]).partial_fit_dense(Xs[10:30])


@pytest.mark.parametrize("noise", ["fixed", "independent", "ftl"])
@pytest.mark.parametrize("kind, bad", [("vector", b) for b in sorted(BAD_VECTOR)]
                         + [("dense", b) for b in sorted(BAD_DENSE)])
def test_bad_data_rejected_and_state_unchanged(noise, kind, bad):
    method, transform, exc, arg, detail = {**BAD_VECTOR, **BAD_DENSE}[bad]
    est = prefit(noise, kind)
    before = snapshot(est)
    # fresh blocks with the fitted n_features: rows of 20 / 10 x 10 instances
    # for the fitted kind, and the other kind's shape for the mixing cases
    n = est.n_features_in_
    X, Xs = spiked(20, n, seed=1), dense(6, n, seed=1)
    with pytest.raises(exc) as info:
        getattr(est, method)(transform(X, Xs))
    msg = str(info.value)
    assert re.search(names(arg), msg), f"the message does not name {arg!r}: {msg!r}"
    assert detail in msg
    assert_unchanged(est, before)
    # and the estimator carries on as if the call had never happened
    ref = prefit(noise, kind)
    more_X, more_Xs = spiked(30, n, seed=2), dense(5, n, seed=2)
    for e in (est, ref):
        e.partial_fit(more_X) if kind == "vector" else e.partial_fit_dense(more_Xs)
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
    est = prefit(noise, kind)
    before = snapshot(est)
    good = est.get_params()
    est.set_params(**params)
    n = est.n_features_in_
    with pytest.raises(exc, match=names(arg)):
        if kind == "vector":
            est.partial_fit(spiked(20, n, seed=1))
        else:
            est.partial_fit_dense(dense(6, n, seed=1))
    assert_unchanged(est, before)
    # with the parameters put back it carries on as if nothing had happened
    est.set_params(**good)
    ref = prefit(noise, kind)
    for e in (est, ref):
        e.partial_fit(spiked(30, n, seed=2)) if kind == "vector" else \
            e.partial_fit_dense(dense(5, n, seed=2))
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
    est = PerturbedLeaderPCA(**{"n_components": 2, **params})
    n = 12 if params.get("solver") == "krylov" else 20
    with pytest.raises(exc, match=names(arg)):
        est.partial_fit(spiked(20, n))
    assert not hasattr(est, "state_") and not hasattr(est, "n_features_in_")
    with pytest.raises(AttributeError, match="fit"):
        est.components_


@pytest.mark.parametrize("bad", ["X-nan", "X-1d", "X-strings"])
def test_bad_data_leaves_fresh_estimator_unfitted(bad):
    _, transform, exc, arg, _ = BAD_VECTOR[bad]
    est = PerturbedLeaderPCA(2, random_state=0)
    with pytest.raises(exc, match=names(arg)):
        est.partial_fit(transform(spiked(20, 20), None))
    assert not hasattr(est, "state_") and not hasattr(est, "_rng")


# method, transform, argument named
REJECTED_FIT = {
    "fit-X-nan": ("fit", lambda X, Xs: with_value(X, np.nan), "X"),
    "fit-X-1d": ("fit", lambda X, Xs: X[0], "X"),
    "fit_dense-Xs-nan": ("fit_dense", lambda X, Xs: with_value(Xs, np.nan), "Xs"),
    "fit_dense-Xs-indefinite": ("fit_dense", lambda X, Xs: _indefinite(Xs), "Xs"),
}


@pytest.mark.parametrize("bad", sorted(REJECTED_FIT))
def test_rejected_fit_keeps_state(bad):
    # DESIGN.md: "the estimator's state is unchanged after a rejected call";
    # fit starts afresh, but only once its input has been accepted (as the
    # quantile estimators' fit does)
    method, transform, arg = REJECTED_FIT[bad]
    kind = "dense" if method == "fit_dense" else "vector"
    est = prefit("fixed", kind)
    before = snapshot(est)
    n = est.n_features_in_
    with pytest.raises(ValueError, match=names(arg)):
        getattr(est, method)(transform(spiked(20, n, seed=1), dense(6, n, seed=1)))
    assert_unchanged(est, before)


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


# -- accepted input types ------------------------------------------------------------

def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _strided_columns(a):
    # every other column of a wider buffer: neither C- nor F-contiguous
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
    wide[..., ::2] = a
    return wide[..., ::2]


VARIANTS = {
    "float32": lambda a: (a.astype(np.float32), a.astype(np.float32).astype(np.float64)),
    "read-only": lambda a: (_readonly(a), a),
    "strided-rows": lambda a: (np.repeat(a, 2, axis=0)[::2], a),
    "strided-columns": lambda a: (_strided_columns(a), a),
    "fortran": lambda a: (np.asfortranarray(a), a),
    "lists": lambda a: (a.tolist(), a),
}


@pytest.mark.parametrize("kind", ["vector", "dense"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_input_types_match_float64(variant, kind):
    # float32 is converted once, exactly: the same result as float64 of the
    # same values; layouts and read-only buffers change nothing
    # full-rank dense instances: a rank-5 PSD matrix rounded to float32 has
    # eigenvalues of -5e-9, and is rightly rejected as indefinite (as is the
    # float64 array of the same values)
    data = spiked(150, N_MID, n_spikes=K_MID) if kind == "vector" else dense(40, 30, rank=40)
    data_in, data_ref = VARIANTS[variant](data)
    if variant.startswith("strided"):
        assert not data_in.flags.c_contiguous and not data_in.flags.f_contiguous
    if variant == "read-only":
        assert not data_in.flags.writeable
    method = "partial_fit" if kind == "vector" else "partial_fit_dense"
    k = K_MID if kind == "vector" else 2
    est, ref = make(k=k), make(k=k)
    getattr(est, method)(data_in)
    getattr(ref, method)(data_ref)
    assert_same_results(est, ref)
    np.testing.assert_array_equal(est.transform(spiked(5, est.n_features_in_)),
                                  ref.transform(spiked(5, est.n_features_in_)))


def test_input_not_mutated_nor_aliased():
    X, Xs = spiked(100, 20), dense(20, 10)
    X0, Xs0 = X.copy(), Xs.copy()
    a = make("independent").partial_fit(X)
    b = make("fixed").partial_fit_dense(Xs)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Xs, Xs0)
    for est, data in ((a, X), (b, Xs)):
        assert not [name for name, v in vars(est).items()
                    if isinstance(v, np.ndarray) and np.shares_memory(v, data)]


# -- pickling mid-stream ------------------------------------------------------------

@pytest.mark.parametrize("solver", ["exact", "krylov"])
@pytest.mark.parametrize("noise", [*NOISES, "ftl"])
def test_pickle_mid_stream_resumes_bit_identically(noise, solver):
    X = spiked(160, N_MID, n_spikes=K_MID, seed=3)
    est = make(noise, k=K_MID, solver=solver).partial_fit(X[:70])
    twin = pickle.loads(pickle.dumps(est))
    assert_same_state(est, twin)
    est.partial_fit(X[70:])
    twin.partial_fit(X[70:])
    assert_same_results(est, twin)
    assert_same_state(est, twin)
    assert est.n_trials_ == 160
    # and the same as never stopping
    assert_same_results(est, make(noise, k=K_MID, solver=solver).partial_fit(X))


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

BOUNDS = (0, 0, 1, 38, 38, 39, 130, 200)      # uneven, with empty calls


@pytest.mark.parametrize("noise", [*NOISES, "ftl"])
def test_chunking_invariance(noise):
    X = spiked(200, N_MID, n_spikes=K_MID, seed=4)
    one = make(noise, k=K_MID).partial_fit(X)
    chunked = make(noise, k=K_MID)
    for a, b in zip(BOUNDS[:-1], BOUNDS[1:]):
        chunked.partial_fit(X[a:b])
    assert_same_results(one, chunked)
    assert_same_state(one, chunked)


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
    a, b = make(noise, k=K_MID, random_state=7), make(noise, k=K_MID, random_state=7)
    # a Generator seeded alike is the same source of randomness as the int seed
    g = make(noise, k=K_MID, random_state=np.random.default_rng(7))
    for lo, hi in ((0, 0), (0, 1), (1, 60), (60, 150)):
        for est in (a, b, g):
            est.partial_fit(X[lo:hi])
        np.testing.assert_array_equal(a.components_, b.components_)
        np.testing.assert_array_equal(a.components_, g.components_)
    assert_same_results(a, b)
    assert_same_results(a, g)
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

def test_get_set_params_repr_clone():
    est = PerturbedLeaderPCA(3, noise="random_walk", random_state=0)
    assert est.get_params() == dict(n_components=3, sigma="auto", noise="random_walk",
                                    solver="auto", tol=0.01, random_state=0)
    assert repr(est) == "PerturbedLeaderPCA(n_components=3, noise='random_walk', random_state=0)"
    assert est.set_params(sigma=0.5, tol=0.001) is est
    assert est.sigma == 0.5 and est.get_params()["tol"] == 0.001
    assert repr(est) == ("PerturbedLeaderPCA(n_components=3, noise='random_walk', "
                         "random_state=0, sigma=0.5, tol=0.001)")
    with pytest.raises(ValueError, match="bogus"):
        est.set_params(bogus=1)

    ftl = FollowTheLeaderPCA(2, solver="exact")
    assert ftl.get_params() == dict(n_components=2, solver="exact", tol=0.01)
    assert repr(ftl) == "FollowTheLeaderPCA(n_components=2, solver='exact')"

    X = spiked(200, 40, n_spikes=K_MID)
    for est in (PerturbedLeaderPCA(K_MID, noise="random_walk", random_state=1),
                FollowTheLeaderPCA(K_MID, solver="krylov")):
        est.partial_fit(X[:100])
        twin = type(est)(**est.get_params())
        assert twin.get_params() == est.get_params() and not hasattr(twin, "state_")
        copied = clone(est)
        assert copied.get_params() == est.get_params() and not hasattr(copied, "state_")
        est.fit(X)
        assert_same_results(twin.fit(X), est)
        assert_same_results(copied.partial_fit(X), est)


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
    Xs = _indefinite(dense(5, n=120)).astype(np.float16)
    with pytest.raises(ValueError, match="positive semidefinite"):
        make().partial_fit_dense(Xs)


@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_lapack_failure_resets_the_estimator(monkeypatch, kind):
    from streamfit.pca import _fpl

    est = make().partial_fit(spiked(10)) if kind == "vector" else \
        make().partial_fit_dense(dense(10))
    name = "run_vector" if kind == "vector" else "run_dense"
    monkeypatch.setattr(_fpl._k, name, lambda *args: _fpl._k.ERR_LAPACK)
    with pytest.raises(RuntimeError, match="reset"):
        if kind == "vector":
            est.partial_fit(spiked(3, seed=1))
        else:
            est.partial_fit_dense(dense(3, seed=1))
    assert not hasattr(est, "state_")
    with pytest.raises(AttributeError, match="not fitted"):
        est.components_


def test_overflow_on_a_fresh_estimator_leaves_it_and_its_generator_alone():
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    est = PerturbedLeaderPCA(2, random_state=rng)
    with pytest.raises(ValueError, match="X is too large"):
        est.partial_fit(np.full((1, 20), 5e149))    # ||x||^2 = 5e300 is finite
    assert not hasattr(est, "state_")
    assert rng.bit_generator.state == before


def test_shallow_copy_does_not_share_the_matrices():
    X = spiked(60)
    est = make().partial_fit(X[:30])
    twin = pickle.loads(pickle.dumps(est))
    copy.copy(est).partial_fit(X[30:])             # must not touch est
    assert_same_results(est.partial_fit(X[30:]), twin.partial_fit(X[30:]))


def test_read_only_state_arrays_are_accepted():
    # e.g. an estimator loaded with joblib's mmap_mode="r"
    X = spiked(60)
    est = make(noise="random_walk").partial_fit(X[:30])
    twin = pickle.loads(pickle.dumps(est))
    for name in ("perturbed_", "cumulative_", "state_", "block_"):
        getattr(est, name).flags.writeable = False
    assert_same_results(est.partial_fit(X[30:]), twin.partial_fit(X[30:]))
