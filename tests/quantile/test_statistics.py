"""Statistical claims of the paper, at reduced sizes, with fixed seeds.

Margins: each bound below holds with room to spare on every seed we tried
(observed values in the comments), and fails for a broken schedule (e.g. no
phase two, a b0 off by 10x, averaging over the transient).
"""
import numpy as np
import pytest

from streamfit import (OnlineLeastSquaresRegressor, OnlineQuantileRegressor,
                       offline_quantile_regression)
from streamfit.experiments import stepsize_comparison
from streamfit.experiments.quantile import CONSTANT_GRID, INVERSE_TIME_GRID
from streamfit.schedules import StatisticalSchedule
from streamfit.simulate import make_linear_stream, noise_sparsity


def relerr(coef, beta):
    return np.linalg.norm(coef - beta) / np.linalg.norm(beta)


@pytest.fixture(scope="module")
def figure4():
    # The paper's Figure 4 at T = 2e4 instead of 1e5 (d = 100 kept: the gap to
    # c/(t+1) comes from its early steps, whose size grows with d).
    return stepsize_comparison(20_000, 100, seeds=(0, 1))


def test_statistical_beats_best_constant_and_inverse_time(figure4):
    for i, snr in enumerate(figure4["snr"]):
        # observed: constant/statistical 2.7-3.4 at SNR 20, 17-23 at SNR 200
        assert figure4["constant_over_statistical"][i] > (1.5 if snr < 100 else 5.0)
        # observed: 250-3300
        assert figure4["inverse_time_over_statistical"][i] > 20.0
        # the comparators' best points lie inside their grids, so the grids
        # are wide enough for the comparison to be fair
        assert CONSTANT_GRID[0] < figure4["best_constant_eta"][i] < CONSTANT_GRID[-1]
        assert INVERSE_TIME_GRID[0] < figure4["best_inverse_time_c"][i] < INVERSE_TIME_GRID[-1]


def test_averaging_improves_on_the_last_iterate(figure4):
    # Ca = 20 makes the 1/t phase ~10x the optimal variance; averaging under
    # a t^-2/3 phase recovers most of it (observed ratio 0.45-0.55)
    for plain, avg in zip(figure4["statistical"], figure4["statistical_avg"]):
        assert avg < 0.75 * plain


@pytest.fixture(scope="module")
def offline_runs():
    out = []
    for tau in (0.25, 0.5, 0.75):
        for seed in (0, 1, 2):
            X, y, beta = make_linear_stream(20_000, 20, tau=tau, snr=20, random_state=seed)
            coef, _ = offline_quantile_regression(X, y, tau)
            out.append((tau, X, y, beta, relerr(coef, beta)))
    return out


def test_averaged_single_pass_is_close_to_offline(offline_runs):
    ratios = []
    for tau, X, y, beta, off in offline_runs:
        est = OnlineQuantileRegressor(tau, average=True, fit_intercept=False).fit(X, y)
        ratios.append(relerr(est.coef_, beta) / off)
    # observed median 1.1, worst 1.6
    assert np.median(ratios) < 1.5
    assert max(ratios) < 2.5


def test_storage_mode_reaches_offline_accuracy(offline_runs):
    for tau, X, y, beta, off in offline_runs:
        est = OnlineQuantileRegressor(tau, mode="storage", batch_size=500,
                                      fit_intercept=False).fit(X, y)
        # one step per 500 new rows on all data so far (observed 0.91-1.01)
        assert relerr(est.coef_, beta) < 1.25 * off


def test_batch_mode_converges(offline_runs):
    for tau, X, y, beta, off in offline_runs:
        plain = OnlineQuantileRegressor(tau, mode="batch", batch_size=40,
                                        fit_intercept=False).fit(X, y)
        avg = OnlineQuantileRegressor(tau, mode="batch", batch_size=40, average=True,
                                      fit_intercept=False).fit(X, y)
        assert plain.schedule_state_["phase"] == 3
        assert relerr(plain.coef_, beta) < 8 * off
        assert relerr(avg.coef_, beta) < 2.5 * off


def test_estimates_of_the_unknowns(offline_runs):
    for tau, X, y, beta, off in offline_runs:
        est = OnlineQuantileRegressor(tau, fit_intercept=False).fit(X, y)
        state = est.schedule_state_
        # D0 ~ ||beta_0 - beta*|| = ||beta*|| (observed 0.86-1.15)
        assert 0.6 < state["d0"] / np.linalg.norm(beta) < 1.5
        # b0 ~ 1 / f(Q(tau)) of the noise (observed 0.84-1.31)
        assert 0.6 < state["b0"] / noise_sparsity(tau) < 1.6
        # phase one ends after O(d log(D0 / gamma)) samples
        assert state["phase"] == 2
        assert 50 < state["t_switch"] < 5_000


def test_oracle_b0_uses_the_papers_continuity_rule():
    X, y, beta = make_linear_stream(20_000, 20, random_state=3)
    b0 = noise_sparsity(0.5)
    est = OnlineQuantileRegressor(schedule=StatisticalSchedule(b0=b0),
                                  fit_intercept=False).fit(X, y)
    state = est.schedule_state_
    assert state["b0"] == b0
    # the switch happens when eta0 (1 - 0.2/d)^t (the default decay) falls to
    # b0 Ca / (Cl Cb d)
    d, cl = 20, state["cl"]
    eta0 = 2.0 * state["d0"] / (d * cl)
    t1 = np.ceil(np.log((b0 * 20 / (cl * 30 * d)) / eta0) / np.log(1 - 0.2 / d))
    assert abs(state["t_switch"] - t1) <= 1
    assert relerr(est.coef_, beta) < 5e-3


def test_intercept_is_learnt():
    X, y, beta = make_linear_stream(30_000, 10, tau=0.75, random_state=4)
    est = OnlineQuantileRegressor(0.75, average=True).fit(X, y + 7.0)
    assert abs(est.intercept_ - 7.0) < 0.3
    assert relerr(est.coef_, beta) < 0.01


def test_quantile_regression_is_robust_where_least_squares_is_not():
    # Figure 7: under t_1.1 noise online least squares does not converge
    X, y, beta = make_linear_stream(20_000, 20, snr=20, random_state=5)
    qr = OnlineQuantileRegressor(fit_intercept=False).fit(X, y)
    ls = OnlineLeastSquaresRegressor(fit_intercept=False).fit(X, y)
    assert relerr(ls.coef_, beta) > 5 * relerr(qr.coef_, beta)


def test_least_squares_schedule_under_gaussian_noise():
    X, y, beta = make_linear_stream(20_000, 20, noise="gaussian", snr=20, random_state=6)
    ls = OnlineLeastSquaresRegressor(fit_intercept=False).fit(X, y)
    # the OLS error at n = 20,000 is about sigma sqrt(d / n) / ||beta*||
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    assert ls.schedule_state_["phase"] == 2
    assert relerr(ls.coef_, beta) < 2.0 * relerr(ols, beta)


def test_cumulative_loss_grows_like_the_noise_loss():
    # prequential regret: the average online loss approaches the loss at beta*
    X, y, beta = make_linear_stream(50_000, 20, noise="gaussian", random_state=7)
    est = OnlineQuantileRegressor(fit_intercept=False).fit(X, y)
    r = y - X @ beta
    oracle = np.sum(r * (0.5 - (r < 0)))
    assert oracle < est.cumulative_loss_ < 1.2 * oracle


@pytest.mark.parametrize("batch_size", [1, 4])
def test_batches_smaller_than_d_scale_like_single_samples(batch_size):
    # blocks of m < d rows are m single-sample steps in one: the schedule
    # shrinks by m / d instead of taking d-times-too-large steps
    X, y, beta = make_linear_stream(20_000, 10, tau=0.1, random_state=1)
    off = relerr(offline_quantile_regression(X, y, 0.1)[0], beta)
    est = OnlineQuantileRegressor(0.1, mode="batch", batch_size=batch_size, average=True,
                                  fit_intercept=False).fit(X, y)
    # observed 0.5-0.8 x offline; before the fix 10-300 x
    assert relerr(est.coef_, beta) < 2.0 * off


@pytest.mark.parametrize("tau", [0.1, 0.9])
def test_storage_mode_at_extreme_quantiles(tau):
    X, y, beta = make_linear_stream(20_000, 10, tau=tau, random_state=1)
    off = relerr(offline_quantile_regression(X, y, tau)[0], beta)
    est = OnlineQuantileRegressor(tau, mode="storage", batch_size=200,
                                  fit_intercept=False).fit(X, y)
    # a half-Newton constant step: observed ~1.0 x offline; a full step with
    # an error-inflated b0 oscillated at 100 x
    assert relerr(est.coef_, beta) < 1.5 * off


@pytest.mark.parametrize("mode", ["batch", "storage"])
def test_block_steps_stay_stable_on_anisotropic_features(mode):
    # one feature 30x the others: a step scaled by the mean eigenvalue made
    # storage mode diverge; the top eigenvalue keeps it stable (the small
    # directions stay slow: scalar stepsizes cannot fix conditioning)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20_000, 10))
    X[:, 0] *= 30
    beta = np.ones(10)
    y = X @ beta + rng.standard_normal(20_000)
    est = OnlineQuantileRegressor(mode=mode, batch_size=200, fit_intercept=False).fit(X, y)
    assert np.linalg.norm(est.coef_ - beta) < np.linalg.norm(beta)
    assert abs(est.coef_[0] - 1.0) < 0.05          # the well-scaled direction is learnt


def test_zero_inflated_response_gets_a_scale():
    # more than half of y exactly 0: the median |residual| is 0, the mean
    # stands in for D0, and phase one moves
    X, y, beta = make_linear_stream(20_000, 5, tau=0.9, noise="gaussian", snr=5,
                                    random_state=2)
    y = np.maximum(y - np.quantile(y, 0.6), 0.0)
    est = OnlineQuantileRegressor(0.9, fit_intercept=True).fit(X, y)
    assert est.schedule_state_["d0"] > 0.1 * np.std(y)
    coef, b = offline_quantile_regression(X, y, 0.9, fit_intercept=True)
    assert np.linalg.norm(est.coef_ - coef) < 0.5 * np.linalg.norm(coef)


def test_regret_grows_like_log_t_not_t():
    # Theorem 4: with the statistical schedule the prequential regret against
    # beta* is O(log T) after phase one; a constant stepsize's grows linearly
    from streamfit.experiments import regret_dynamics
    table = regret_dynamics(40_000, 50, checkpoints=(4_000, 40_000))
    stat, const = table["statistical_regret"], table["constant_regret"]
    # observed over the last decade: statistical x1.03-1.05, constant x4.7
    # (its best stepsize at this horizon); constant/statistical 48-75 at the end
    assert stat[1] < 1.5 * stat[0]
    assert const[1] > 3 * const[0]
    assert stat[1] < const[1] / 10
