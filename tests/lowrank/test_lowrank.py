"""OnlineLowRankQuantileRegressor: the kernel against a NumPy oracle of the
same update, its schedule against the vector family's, the estimator contract
where it is particular to it (bad sensing matrices and parameters, read-only
state) and recovery. The stream contract every estimator shares (chunking,
pickling, bad input, interrupts, threads, float32, seeds, clone) is
streamfit.utils.estimator_checks, run on every form of X in
tests/test_estimator_checks.py."""
import pickle

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from streamfit import OnlineLowRankQuantileRegressor
from streamfit.quantile import OnlineLeastSquaresRegressor, OnlineQuantileRegressor
from streamfit._kernels import _lowrank as _lr
from streamfit.schedules import ConstantSchedule, StatisticalSchedule

Est = OnlineLowRankQuantileRegressor


def low_rank(d1, d2, r, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((d1, r)) @ rng.standard_normal((r, d2)) / np.sqrt(r)


def stream(form, T, d1=12, d2=9, r=2, seed=0, noise=0.5):
    """(X, y, M) of the model y = <X, M> + noise * t_1.1 in one form of X."""
    M = low_rank(d1, d2, r, seed)
    rng = np.random.default_rng(seed + 1)
    xi = noise * rng.standard_t(1.1, T)
    if form == "dense":
        X = rng.standard_normal((T, d1, d2))
        return X, np.einsum("tij,ij->t", X, M) + xi, M
    if form == "rank1":
        A, B = rng.standard_normal((T, d1)), rng.standard_normal((T, d2))
        return (A, B), np.einsum("ti,ij,tj->t", A, M, B) + xi, M
    idx = np.column_stack([rng.integers(0, d1, T), rng.integers(0, d2, T)])
    return idx, M[idx[:, 0], idx[:, 1]] + xi, M


def dense_of(form, X, d1, d2):
    if form == "dense":
        return X
    if form == "rank1":
        return np.einsum("ti,tj->tij", *X)
    out = np.zeros((X.shape[0], d1, d2))
    out[np.arange(X.shape[0]), X[:, 0], X[:, 1]] = 1.0
    return out


def oracle(Xd, y, r, tau, eta, loss="quantile"):
    """The documented update in plain NumPy, on full matrices: complete the
    basis of a rank-deficient M with the top singular pairs of
    (I - UU^T) X (I - VV^T), project g X on the tangent space, step, keep the
    best rank r. Returns the iterates M_t."""
    d1, d2 = Xd.shape[1:]
    U, s, V = np.zeros((d1, r)), np.zeros(r), np.zeros((d2, r))
    out = []
    for X, yt in zip(Xd, y):
        M = (U * s) @ V.T
        res = yt - np.sum(X * M)
        g = (float(res <= 0) - tau) if loss == "quantile" else -res
        k = int(np.count_nonzero(s > 0))
        if k < r:
            Pu, Pv = np.eye(d1) - U @ U.T, np.eye(d2) - V @ V.T
            a, sy, bt = np.linalg.svd(Pu @ X @ Pv)
            keep = sy > sy[0] * max(d1, d2) * np.finfo(float).eps
            n_new = min(r - k, int(keep.sum()))
            U[:, k:k + n_new], V[:, k:k + n_new] = a[:, :n_new], bt[:n_new].T
        PU, PV = U @ U.T, V @ V.T
        PT = PU @ X + X @ PV - PU @ X @ PV
        u, sv, vt = np.linalg.svd(M - eta * g * PT)
        U, s, V = u[:, :r].copy(), sv[:r].copy(), vt[:r].T.copy()
        small = s <= sv[0] * 2 * r * np.finfo(float).eps
        s[small], U[:, small], V[:, small] = 0.0, 0.0, 0.0
        out.append((U * s) @ V.T)
    return out


# -- the kernel against the oracle --------------------------------------------------

@pytest.fixture(params=["jacobi", "lapack"])
def core_svd(request):
    """The core's SVD by one-sided Jacobi (the default) or by its fallback,
    LAPACK's dgesvd (forced through the module's test hook)."""
    _lr._core_svd_by_lapack(request.param == "lapack")
    yield request.param
    _lr._core_svd_by_lapack(False)


@pytest.mark.parametrize("form", ["dense", "rank1", "index"])
@pytest.mark.parametrize("loss", ["quantile", "squared"])
def test_kernel_matches_numpy_oracle(form, loss, core_svd):
    d1, d2, r = 8, 6, 2
    X, y, _ = stream(form, 40, d1, d2, r, seed=3)
    eta = 0.05 if loss == "quantile" else 0.01
    ref = oracle(dense_of(form, X, d1, d2), y, r, 0.3, eta, loss)
    est = Est(rank=r, tau=0.3, loss=loss, schedule=ConstantSchedule(eta), shape=(d1, d2))
    scale = np.linalg.norm(ref[-1])
    for t in range(len(ref)):
        est.partial_fit(X[t:t + 1] if form != "rank1" else (X[0][t:t + 1], X[1][t:t + 1]),
                        y[t:t + 1])
        np.testing.assert_allclose(est.coef_, ref[t], rtol=0, atol=1e-10 * scale)
        U = est.U_[:, est.singular_values_ > 0]
        np.testing.assert_allclose(U.T @ U, np.eye(U.shape[1]), atol=1e-12)
    assert est.n_updates_ == 40


@pytest.mark.parametrize("form", ["dense", "rank1"])
def test_close_and_repeated_singular_values_match_the_oracle(form, core_svd):
    """r = 3 on a matrix of rank 3 with equal singular values, a long run:
    the core's singular values sit close together (Jacobi's hard case) and
    the iterate must still follow the oracle and stay orthonormal."""
    d1, d2, r = 9, 7, 3
    rng = np.random.default_rng(8)
    M = np.linalg.qr(rng.standard_normal((d1, r)))[0] @ np.linalg.qr(
        rng.standard_normal((d2, r)))[0].T
    T = 150
    if form == "dense":
        X = rng.standard_normal((T, d1, d2))
        y = np.einsum("tij,ij->t", X, M)
    else:
        X = (rng.standard_normal((T, d1)), rng.standard_normal((T, d2)))
        y = np.einsum("ti,ij,tj->t", X[0], M, X[1])
    ref = oracle(dense_of(form, X, d1, d2), y, r, 0.5, 0.02)
    est = Est(rank=r, schedule=ConstantSchedule(0.02), shape=(d1, d2)).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref[-1], rtol=0, atol=1e-10 * np.linalg.norm(M))
    np.testing.assert_allclose(est.U_.T @ est.U_, np.eye(r), atol=1e-12)
    np.testing.assert_allclose(est.V_.T @ est.V_, np.eye(r), atol=1e-12)


def test_rank_grows_one_step_at_a_time_from_zero_for_rank_one_samples():
    X, y, _ = stream("rank1", 3, r=3)
    est = Est(rank=3, schedule=ConstantSchedule(0.1))
    ranks = [int(np.count_nonzero(est.partial_fit((X[0][t:t + 1], X[1][t:t + 1]),
                                                  y[t:t + 1]).singular_values_))
             for t in range(3)]
    assert ranks == [1, 2, 3]


@pytest.mark.parametrize("loss", ["quantile", "squared"])
def test_statistical_schedule_is_the_vector_familys(loss):
    """The kernel's stepsizes are those of the vector family's single-sample
    schedule with d = d_eff and ||x||^2 = d_eff ||X||^2 / (d1 d2), fed the
    same residuals: a vector estimator on d_eff features, each row
    (sqrt(d_eff ||X_t||^2 / (d1 d2)), 0, ..., 0) with the target that makes
    its residual the low-rank one's."""
    d1, d2, r = 10, 8, 2
    X, y, _ = stream("dense", 600, d1, d2, r, seed=5)
    # decay 0.5: a phase one short enough to end within the 600 samples
    sched = StatisticalSchedule(n_warmup=20, window=40, decay=0.5)
    est = Est(rank=r, tau=0.4, loss=loss, schedule=sched)
    deff = r * (d1 + d2 - r)
    vec = (OnlineQuantileRegressor(0.4, schedule=sched, fit_intercept=False)
           if loss == "quantile" else
           OnlineLeastSquaresRegressor(schedule=sched, fit_intercept=False))
    phases, n_steps = [], 0
    for t in range(600):
        M_before = est.coef_ if t else np.zeros((d1, d2))
        res = y[t] - np.sum(X[t] * M_before)
        x = np.zeros(deff)
        x[0] = np.sqrt(np.sum(X[t] ** 2) * deff / (d1 * d2))
        w = vec.coef_ if t else np.zeros(deff)
        vec.learn_one(x, res + x @ w)        # its residual: res (to rounding)
        est.partial_fit(X[t:t + 1], y[t:t + 1])
        assert est.n_updates_ == vec.n_updates_
        if est.n_updates_ > n_steps:
            n_steps = est.n_updates_
            # (the residuals agree to rounding: <X, M> is summed differently)
            assert est.schedule_state_["stepsize"] == pytest.approx(
                vec.schedule_state_["stepsize"], rel=1e-9)
        phases.append(est.schedule_state_["phase"])
        assert (phases[-1], est.schedule_state_["t_switch"]) == (
            vec.schedule_state_["phase"], vec.schedule_state_["t_switch"])
    assert est.n_updates_ == 580
    assert 2 in phases         # phase one ended within the run


# -- the contract -------------------------------------------------------------------

def same_state(a, b):
    """The two estimators' whole states are equal, bit for bit."""
    fa, fb = a._state.to_state(), b._state.to_state()
    assert fa.keys() == fb.keys()
    for name, value in fa.items():
        if isinstance(value, np.ndarray):
            assert value.tobytes() == fb[name].tobytes(), name
        else:
            assert value == fb[name], name


def test_bad_input_names_the_argument_and_leaves_the_state():
    # the bad input of every stream estimator (NaN, inf, lengths, dtypes of
    # X[0] and y) is check_rejected_input's; these are the sensing forms' own
    X, y, _ = stream("rank1", 200)
    est = Est(rank=2).partial_fit((X[0][:100], X[1][:100]), y[:100])
    before = pickle.dumps(est._state)
    B = X[1][100:110]
    cases = [
        (((X[0][100:110], B[:, :5]), y[100:110]), ValueError, r"shape \(12, 5\)"),
        (((X[0][100:110], B.astype(complex)), y[100:110]), TypeError, "complex"),
        # finite, but its square (and the residual) leave float64: a scale
        # error naming the sample, not 'contains NaN or inf'
        (((X[0][100:110] * 1e300, B), y[100:110]), ValueError,
         r"too large or too small.* at sample 0 .*\|\|X\|\|\^2 or the residual"),
        ((np.full((10, 12, 9), 1e300), y[100:110]), ValueError,
         r"too large or too small.* at sample 0 "),
        ((np.array([[0, 0], [12, 1]]), [1.0, 2.0]), ValueError,
         r"index pair \(12, 1\) \(sample 1 of this call\) lies outside shape"),
        (((X[0][100:110], np.where(B > 1, np.nan, B)), y[100:110]), ValueError,
         r"X contains NaN or inf \(sample \d+ of this call\)"),
        (((X[0][100:110], B), np.r_[y[100:109], np.inf]), ValueError,
         r"y contains NaN or inf \(sample 9 of this call\)"),
        ((np.zeros((3, 12)), np.zeros(3)), ValueError, r"shape \(T, d1, d2\)"),
        ((np.array(["a"] * 3), np.zeros(3)), TypeError, "real numbers"),
    ]
    for args, exc, match in cases:
        with pytest.raises(exc, match=match):
            est.partial_fit(*args)
        assert pickle.dumps(est._state) == before
    with pytest.raises(ValueError, match="tau changed"):
        est.set_params(tau=0.7).partial_fit((X[0][100:], X[1][100:]), y[100:])
    est.set_params(tau=0.5)
    with pytest.raises(ValueError, match="rank changed"):
        est.set_params(rank=3).partial_fit((X[0][100:], X[1][100:]), y[100:])
    est.set_params(rank=2)
    for bad, match in [({"rank": 0}, "rank must be >= 1"), ({"tau": 1.0}, "tau must be <"),
                       ({"loss": "huber"}, "loss must be"), ({"rank": 13}, "rank=13 exceeds")]:
        with pytest.raises((ValueError, TypeError), match=match):
            Est(**{"rank": 2, **bad}).fit((X[0], X[1]), y)
    with pytest.raises(ValueError, match=r"shape=\(d1, d2\)"):
        Est(rank=2).fit(np.array([[0, 1]]), [1.0])
    with pytest.raises(NotFittedError):
        Est(rank=2).predict(np.zeros((1, 3, 3)))
    assert pickle.dumps(est._state) == before


def test_a_state_loaded_from_read_only_arrays_learns_on():
    X, y, _ = stream("index", 400)
    est = Est(rank=2, shape=(12, 9)).fit(X[:200], y[:200])
    saved = est._state.to_state()
    for value in saved.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    est._state = type(est._state).from_state(saved)
    ref = Est(rank=2, shape=(12, 9)).fit(X[:200], y[:200])
    est.partial_fit(X[200:], y[200:])
    ref.partial_fit(X[200:], y[200:])
    same_state(est, ref)


# -- statistics ---------------------------------------------------------------------

@pytest.mark.parametrize("form,T", [("dense", 6000), ("rank1", 20000), ("index", 40000)])
def test_recovers_a_low_rank_matrix_under_heavy_tailed_noise(form, T):
    """t_1.1 noise (no mean, nearly no tails bound): the median regression
    recovers M; least squares, on the same stream, does markedly worse."""
    d1, d2, r = 20, 15, 2
    X, y, M = stream(form, T, d1, d2, r, seed=11, noise=0.3)
    q = Est(rank=r, shape=(d1, d2)).fit(X, y)
    err = np.linalg.norm(q.coef_ - M) / np.linalg.norm(M)
    assert err < 0.15         # 0.005-0.08 over seeds; a broken update stays near 1
    ls = Est(rank=r, loss="squared", shape=(d1, d2))
    try:
        ls.fit(X, y)
        err_ls = np.linalg.norm(ls.coef_ - M) / np.linalg.norm(M)
    except FloatingPointError:
        err_ls = np.inf
    assert err_ls > 2 * err
