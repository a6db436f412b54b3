"""sample_weight (the weighted check loss) and warm starts (coef_init,
intercept_init, StatisticalSchedule(start="phase2")) of the online regressors.
The reference implementation checks both against NumPy in every mode
(test_reference.py); here: what they mean, and what is refused."""
import pickle
import warnings

import numpy as np
import pytest

from streamfit import (OnlineLeastSquaresRegressor, OnlineQuantileRegressor,
                       offline_quantile_regression)
from streamfit.schedules import ConstantSchedule, StatisticalSchedule
from streamfit.simulate import make_linear_stream

from ._cases import state_of

MODES = ["single", "batch", "storage"]


def learnt(est):
    return pickle.dumps({k: v for k, v in vars(est).items() if k.endswith("_")})


@pytest.fixture
def far_above():
    """Rows whose residuals stay positive under small steps: the sub-gradient
    is -tau x for every row, so the order of updates and a row's repetition
    are exact to rounding."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 4))
    y = 1000.0 + rng.standard_normal(300)
    return X, y


@pytest.mark.parametrize("est", [OnlineQuantileRegressor(0.3, schedule=ConstantSchedule(1e-4)),
                                 OnlineQuantileRegressor(0.3, schedule=ConstantSchedule(1e-4),
                                                         average=True)])
def test_a_weight_of_two_is_the_row_twice(est, far_above):
    X, y = far_above
    sw = np.random.default_rng(4).integers(1, 4, len(y)).astype(float)
    params = est.get_params(deep=False)
    weighted = OnlineQuantileRegressor(**params).fit(X, y, sample_weight=sw)
    reps = sw.astype(int)
    repeated = OnlineQuantileRegressor(**params).fit(np.repeat(X, reps, axis=0),
                                                     np.repeat(y, reps))
    if not est.average:     # the average is over updates: one per row, not per weight
        np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=1e-12)
        assert weighted.intercept_ == pytest.approx(repeated.intercept_, rel=1e-12)
    # the prequential loss scores a repeated row's second copy after the first
    # copy's update, a weight-2 row once before it: equal to the step's size
    assert weighted.cumulative_loss_ == pytest.approx(repeated.cumulative_loss_, rel=1e-6)
    # the schedule's clock counts weights; the counters count rows and updates
    assert state_of(weighted)["t"][0] == state_of(repeated)["t"][0] == reps.sum()
    assert weighted.n_samples_seen_ == weighted.n_updates_ == len(y)
    assert repeated.n_updates_ == reps.sum()


def test_the_inverse_time_clock_moves_by_the_weights(far_above):
    # c / (t + 1) with t the sum of the weights of the rows before
    X, y = far_above
    from streamfit.schedules import InverseTimeSchedule
    sw = np.random.default_rng(6).choice([0.0, 0.5, 2.0, 3.0], len(y))
    est = OnlineQuantileRegressor(0.3, schedule=InverseTimeSchedule(1e-2)).fit(
        X, y, sample_weight=sw)
    last = np.flatnonzero(sw)[-1]
    assert est.schedule_state_["stepsize"] == pytest.approx(1e-2 / (sw[:last].sum() + 1),
                                                            rel=1e-12)
    assert state_of(est)["t"][0] == sw.sum()


@pytest.mark.parametrize("schedule", ["statistical", ConstantSchedule(0.01)])
def test_a_weight_of_zero_is_a_row_left_out(schedule):
    X, y, _ = make_linear_stream(3000, 5, random_state=1)
    sw = np.random.default_rng(2).choice([0.0, 1.0, 1.0, 2.5], len(y))
    keep = sw > 0
    est = OnlineQuantileRegressor(average=True, schedule=schedule).fit(X, y, sample_weight=sw)
    ref = OnlineQuantileRegressor(average=True, schedule=schedule).fit(
        X[keep], y[keep], sample_weight=sw[keep])
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    assert est.cumulative_loss_ == ref.cumulative_loss_
    assert est.schedule_state_ == ref.schedule_state_
    assert est.n_samples_seen_ == len(y) and ref.n_samples_seen_ == keep.sum()


@pytest.mark.parametrize("mode", MODES)
def test_unit_and_scalar_weights(mode):
    X, y, _ = make_linear_stream(2000, 5, random_state=1)
    kw = dict(mode=mode, batch_size=16)
    plain = OnlineQuantileRegressor(**kw).fit(X, y)
    ones = OnlineQuantileRegressor(**kw).fit(X, y, sample_weight=np.ones(len(y)))
    scalar = OnlineQuantileRegressor(**kw).fit(X, y, sample_weight=1.0)
    assert learnt(plain) == learnt(scalar)
    np.testing.assert_array_equal(plain.coef_, ones.coef_)
    twos = OnlineQuantileRegressor(**kw).fit(X, y, sample_weight=np.full(len(y), 2.0))
    assert learnt(twos) == learnt(OnlineQuantileRegressor(**kw).fit(X, y, sample_weight=2.0))


@pytest.mark.parametrize("mode", MODES)
def test_weights_in_partial_fit_and_pending_rows(mode):
    # batch rows wait with their weights; storage keeps them with the data
    X, y, _ = make_linear_stream(2000, 5, random_state=1)
    sw = np.random.default_rng(5).random(len(y))
    kw = dict(mode=mode, batch_size=16, schedule=ConstantSchedule(0.05))
    one = OnlineQuantileRegressor(**kw).partial_fit(X, y, sample_weight=sw)
    split = OnlineQuantileRegressor(**kw)
    for a, b in ((0, 7), (7, 900), (900, 901), (901, 2000)):
        split.partial_fit(X[a:b], y[a:b], sample_weight=sw[a:b])
    if mode != "storage":   # storage takes one step per call: other calls, other steps
        assert learnt(one) == learnt(split)
    assert split.n_samples_seen_ == 2000
    # zero-weight rows: counted, never learnt from
    fresh = OnlineQuantileRegressor(**kw).partial_fit(X[:100], y[:100],
                                                      sample_weight=np.zeros(100))
    assert fresh.n_samples_seen_ == 100 and fresh.n_updates_ == 0
    assert not fresh.coef_.any() and fresh.cumulative_loss_ == 0.0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bad, exc, match", [
    (lambda n: -np.ones(n), ValueError, "sample_weight must be non-negative"),
    (lambda n: np.full(n, np.nan), ValueError, "sample_weight contains NaN"),
    (lambda n: np.full(n, np.inf), ValueError, "sample_weight contains inf"),
    (lambda n: np.ones(n - 1), ValueError, "sample_weight has"),
    (lambda n: np.ones((n, 2)), ValueError, "sample_weight must be 1-dimensional"),
    (lambda n: np.array(["1"] * n), TypeError, "sample_weight must hold real numbers"),
    (lambda n: -1.0, ValueError, "sample_weight must be >= 0"),
])
def test_bad_weights_are_refused_and_change_nothing(mode, bad, exc, match):
    X, y, _ = make_linear_stream(400, 5, random_state=1)
    est = OnlineQuantileRegressor(mode=mode, batch_size=16).partial_fit(X[:230], y[:230])
    before = learnt(est)
    for method in ("partial_fit", "fit"):
        with pytest.raises(exc, match=match):
            getattr(est, method)(X[230:], y[230:], sample_weight=bad(170))
        assert learnt(est) == before


def test_fit_with_every_weight_zero_is_refused():
    X, y, _ = make_linear_stream(400, 5, random_state=1)
    est = OnlineQuantileRegressor().fit(X, y)
    before = learnt(est)
    with pytest.raises(ValueError, match="every weight is zero"):
        est.fit(X, y, sample_weight=np.zeros(len(y)))
    assert learnt(est) == before


# -- warm starts -----------------------------------------------------------------------

@pytest.mark.parametrize("cls", [OnlineQuantileRegressor, OnlineLeastSquaresRegressor])
def test_coef_init_starts_the_iterate_there(cls):
    X, y, beta = make_linear_stream(500, 5, noise="gaussian", random_state=1)
    est = cls(schedule=ConstantSchedule(1e-3))
    est.partial_fit(X[:0], y[:0], coef_init=beta, intercept_init=0.25)    # no rows: nothing
    assert not est.__sklearn_is_fitted__()
    est.partial_fit(X[:1], y[:1], coef_init=beta, intercept_init=0.25)
    # one step of size 1e-3 away from the start
    assert np.abs(est.coef_ - beta).max() < 1e-2 and abs(est.intercept_ - 0.25) < 1e-2
    assert not np.array_equal(est.coef_, beta)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(coef_init=np.ones(4)), ValueError, r"coef_init must have 5 values .* \(4,\)"),
    (dict(coef_init=np.full(5, np.nan)), ValueError, "coef_init contains NaN"),
    (dict(coef_init=np.ones(5) + 1j), TypeError, "coef_init must hold real numbers"),
    (dict(intercept_init=np.nan), ValueError, "intercept_init must be finite"),
    (dict(intercept_init="a"), TypeError, "intercept_init"),
])
def test_bad_warm_starts_are_refused(kw, exc, match):
    X, y, _ = make_linear_stream(100, 5, random_state=1)
    est = OnlineQuantileRegressor()
    with pytest.raises(exc, match=match):
        est.fit(X, y, **kw)
    assert not est.__sklearn_is_fitted__()


def test_intercept_init_needs_an_intercept():
    X, y, _ = make_linear_stream(100, 5, random_state=1)
    with pytest.raises(ValueError, match="intercept_init is given but fit_intercept=False"):
        OnlineQuantileRegressor(fit_intercept=False).fit(X, y, intercept_init=1.0)


def test_a_warm_start_is_for_a_fresh_fit_only():
    X, y, _ = make_linear_stream(400, 5, random_state=1)
    est = OnlineQuantileRegressor().partial_fit(X[:200], y[:200])
    before = learnt(est)
    with pytest.raises(ValueError, match="coef_init and intercept_init start a fresh fit"):
        est.partial_fit(X[200:], y[200:], coef_init=np.zeros(5))
    assert learnt(est) == before
    with pytest.warns(UserWarning, match="phase one"):
        est.fit(X, y, coef_init=np.zeros(5))    # fit starts afresh: allowed
    assert est.n_samples_seen_ == 400


@pytest.mark.parametrize("tau", [0.5, 0.9])
def test_a_warm_start_at_the_offline_solution_beats_a_cold_start(tau):
    # start="phase2" at the offline fit of the first 20,000 rows, then 10,000
    # more rows: closer to beta* than a cold start on those rows (observed
    # 2.4x/1.4x the offline error against 2.7x/5.1x cold). Staying within 1.1x
    # of offline needs the clock to start at the 20,000 rows behind
    # the warm start (schedule.t0, tested below): here the last phase begins at
    # its largest step.
    X, y, beta = make_linear_stream(30_000, 10, tau=tau, random_state=6)
    coef, b = offline_quantile_regression(X[:20_000], y[:20_000], tau, fit_intercept=True)
    est = OnlineQuantileRegressor(tau, average=True, schedule=StatisticalSchedule(start="phase2"))
    est.fit(X[20_000:], y[20_000:], coef_init=coef, intercept_init=b)
    assert est.schedule_state_["phase"] == 2 and est.schedule_state_["t_switch"] == 0
    cold = OnlineQuantileRegressor(tau, average=True).fit(X[20_000:], y[20_000:])
    assert np.linalg.norm(est.coef_ - beta) < 0.95 * np.linalg.norm(cold.coef_ - beta)


@pytest.mark.parametrize("tau", [0.5, 0.9])
def test_a_warm_start_continuing_the_clock_stays_at_the_offline_error(tau):
    """start="phase2", t0=20,000 at the offline fit of 20,000 rows, then
    10,000 more rows: the error stays at the offline one (within
    1.1x). Measured per seed 1.26 0.62 1.00 1.24 (tau 0.5) and 0.88 0.94 0.77
    0.91 (tau 0.9); the offline fit of all 30,000 rows itself scores 1.24 0.63
    0.92 1.39 and 0.85 0.99 0.67 0.91 against the 20,000-row one, so single
    seeds scatter both ways: the mean over four seeds is tested. With t0=0
    (the clock restarting) the means are 2.35 and 1.41."""
    ratios, fresh = [], []
    for seed in (6, 7, 8, 9):
        X, y, beta = make_linear_stream(30_000, 10, tau=tau, random_state=seed)
        coef, b = offline_quantile_regression(X[:20_000], y[:20_000], tau, fit_intercept=True)
        off = np.linalg.norm(coef - beta)
        for t0, out in ((20_000, ratios), (0, fresh)):
            est = OnlineQuantileRegressor(tau, average=True,
                                          schedule=StatisticalSchedule(start="phase2", t0=t0))
            est.fit(X[20_000:], y[20_000:], coef_init=coef, intercept_init=b)
            out.append(np.linalg.norm(est.coef_ - beta) / off)
    assert np.mean(ratios) <= 1.1, ratios
    assert np.mean(ratios) < 0.8 * np.mean(fresh), (ratios, fresh)


def test_t0_needs_phase2_and_no_inference():
    X, y, _ = make_linear_stream(500, 3, random_state=0)
    with pytest.raises(ValueError, match="schedule.t0=100 is the clock behind a warm start"):
        OnlineQuantileRegressor(schedule=StatisticalSchedule(t0=100)).fit(X, y)
    with pytest.raises(ValueError, match="schedule.t0"):
        OnlineQuantileRegressor(schedule=StatisticalSchedule(start="phase2", t0=-1)).fit(X, y)
    with pytest.raises(ValueError, match="inference=True with a warm start"):
        OnlineQuantileRegressor(average=True, inference=True,
                                schedule=StatisticalSchedule(start="phase2", t0=100)).fit(X, y)


def test_t0_beyond_float64_is_refused_naming_it():
    # before: t0=10**400 (a Python int float64 cannot hold) failed inside
    # np.isfinite with "ufunc 'isfinite' not supported for the input types"
    X, y, _ = make_linear_stream(500, 3, random_state=0)
    est = OnlineQuantileRegressor(schedule=StatisticalSchedule(start="phase2", t0=10**400))
    with pytest.raises(ValueError, match="schedule.t0 must be finite"):
        est.fit(X, y)
    # a huge clock float64 holds is a (tiny) stepsize, not an error
    est.set_params(schedule=StatisticalSchedule(start="phase2", t0=10**300)).fit(X, y)
    assert np.isfinite(est.coef_).all() and 0 < est.schedule_state_["stepsize"] < 1e-290


@pytest.mark.parametrize("cls", [OnlineQuantileRegressor, OnlineLeastSquaresRegressor])
@pytest.mark.parametrize("how", ["fit", "partial_fit", "several taus"])
def test_a_warm_start_under_the_default_schedule_warns_with_the_fix(cls, how):
    # the default schedule's phase one would start over from the warm start
    # (2-4x worse than an offline start at d = 20): the warning
    # names the call that continues its clock, and points at the caller's line
    X, y, beta = make_linear_stream(300, 5, random_state=2)
    if how == "several taus":
        if cls is OnlineLeastSquaresRegressor:
            pytest.skip("least squares has no taus")
        est, call = cls(tau=[0.25, 0.75]), "fit"
    else:
        est, call = cls(), how
    with pytest.warns(UserWarning, match=r"StatisticalSchedule\(start='phase2', t0=n\)") as got:
        getattr(est, call)(X, y, coef_init=beta)
    assert got[0].filename == __file__
    assert est.n_samples_seen_ == 300


def test_a_warm_start_that_says_its_schedule_does_not_warn():
    X, y, beta = make_linear_stream(300, 5, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for schedule in (StatisticalSchedule(start="phase2", t0=1000),
                         StatisticalSchedule(start="phase1"), ConstantSchedule(1e-3), "constant"):
            OnlineQuantileRegressor(schedule=schedule).fit(X, y, coef_init=beta)
        OnlineQuantileRegressor().fit(X, y)                        # no warm start
        OnlineQuantileRegressor().partial_fit(X[:0], y[:0], coef_init=beta)   # no rows


def test_the_warned_fix_keeps_an_offline_start():
    # the numbers behind the warning (d = 20, an offline start from 20,000
    # rows, 10,000 further rows, averaged): restarting phase one ends ~2x the
    # start's error, continuing the clock stays near it
    X, y, beta = make_linear_stream(30_000, 20, tau=0.5, random_state=0)
    coef, b = offline_quantile_regression(X[:20_000], y[:20_000], 0.5, fit_intercept=True)
    start = np.linalg.norm(coef - beta)
    with pytest.warns(UserWarning, match="phase one"):
        restarted = OnlineQuantileRegressor(0.5, average=True).fit(
            X[20_000:], y[20_000:], coef_init=coef, intercept_init=b)
    fixed = OnlineQuantileRegressor(0.5, average=True, schedule=StatisticalSchedule(
        start="phase2", t0=20_000)).fit(X[20_000:], y[20_000:], coef_init=coef, intercept_init=b)
    assert np.linalg.norm(restarted.coef_ - beta) > 1.5 * start
    assert np.linalg.norm(fixed.coef_ - beta) < 1.2 * start
