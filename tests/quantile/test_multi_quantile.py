"""Several quantiles from one pass (OnlineQuantileRegressor(tau=[...])): the
same as separate fits, never crossing, the estimator contract (pickling,
interrupts, refusals) and the projection option."""
import pickle
import signal
import sys

import numpy as np
import pytest
from sklearn.metrics import d2_pinball_score

from streamfit import OnlineQuantileRegressor
from streamfit._kernels import _testing
from streamfit.kernels import LinearSGD
from streamfit.schedules import ConstantSchedule, InverseTimeSchedule, StatisticalSchedule
from streamfit.simulate import make_linear_stream

from ._cases import learnt, state_bytes, state_of, stopped_at

TAUS = [0.1, 0.5, 0.9]


def hetero(n, seed, d=4):
    # quantile lines that fan out with x_0: separate fits can cross near x_0 = 0
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = X @ np.linspace(1, 2, d) + (0.05 + 2 * X[:, 0]) * rng.standard_t(3, n)
    return X, y


@pytest.mark.parametrize("kw", [{}, {"average": True},
                                {"schedule": ConstantSchedule(0.01), "fit_intercept": False}])
def test_one_pass_is_bit_identical_to_separate_fits(kw):
    X, y, _ = make_linear_stream(5000, 4, random_state=0)
    sw = np.random.default_rng(0).choice([0.0, 1.0, 2.5], len(y))
    multi = OnlineQuantileRegressor(tau=TAUS, **kw)
    for i in range(0, 5000, 999):
        multi.partial_fit(X[i:i + 999], y[i:i + 999], sample_weight=sw[i:i + 999])
    assert multi.coef_.shape == (3, 4) and multi.intercept_.shape == (3,)
    for q, t in enumerate(TAUS):
        one = OnlineQuantileRegressor(tau=t, **kw).fit(X, y, sample_weight=sw)
        np.testing.assert_array_equal(multi.coef_[q], one.coef_)
        assert multi.intercept_[q] == one.intercept_
        assert multi.cumulative_loss_[q] == one.cumulative_loss_
    assert multi.n_samples_seen_ == 5000


@pytest.mark.parametrize("kw", [
    {},                                                         # phase one by the rule
    {"schedule": StatisticalSchedule(t_switch=700, window=64)},  # a given switch time
    {"schedule": StatisticalSchedule(b0=1.5, window=64)},        # the continuity rule
    {"schedule": StatisticalSchedule(b0=1.5, t_switch=900, window=64)},
    {"schedule": StatisticalSchedule(start="phase2", t0=5000, window=64)},
    {"average": True, "schedule": StatisticalSchedule(window=64, patience=1)},
    {"average": True, "schedule": StatisticalSchedule(window=64, patience=1, avg_power=1.0)},
    {"schedule": InverseTimeSchedule(0.05)},
    # Cb = 64 makes the cached power's refresh interval scale / 64 = d + 1 an
    # integer, which unit-weight clocks land on exactly: the rule's boundary
    {"average": True, "schedule": StatisticalSchedule(Cb=64.0, window=64, patience=1)},
])
@pytest.mark.parametrize("weights", ["none", "mixed"])
def test_every_schedule_field_matches_the_separate_fits(kw, weights):
    """The whole state record of every quantile, not only its fit, equals its
    separate fit's bit for bit: the clocks, the windows' sums and fill, the
    stepsizes, the losses. Rows where every quantile is steady, where some
    are and some are not (a window filling, a phase ending, a weight other
    than 1 in phase one, a weight 0) and where none are, in calls of uneven
    lengths."""
    X, y, _ = make_linear_stream(6000, 5, random_state=4)
    sw = None
    if weights == "mixed":
        sw = np.ones(len(y))
        sw[np.random.default_rng(1).choice(len(y), 300, replace=False)] = 0.0
        sw[1500:1700] = 2.5      # inside phase one: its decay takes a power there
    multi = OnlineQuantileRegressor(tau=TAUS, **kw)
    for a, b in [(0, 37), (37, 1000), (1000, 1001), (1001, 6000)]:
        multi.partial_fit(X[a:b], y[a:b], sample_weight=None if sw is None else sw[a:b])
    states = state_of(multi)
    assert len(states) == len(TAUS)
    for q, t in enumerate(TAUS):
        one = OnlineQuantileRegressor(tau=t, **kw).fit(X, y, sample_weight=sw)
        ref = state_of(one)[0]
        assert states[q].tobytes() == ref.tobytes(), {
            name: (states[q][name], ref[name])
            for name in states.dtype.names if states[q][name] != ref[name]}
        np.testing.assert_array_equal(multi.coef_[q], one.coef_)


@pytest.mark.parametrize("noncrossing", ["rearrange", "project"])
def test_predictions_never_cross_on_a_held_out_grid(noncrossing):
    X, y = hetero(1500, 1)
    est = OnlineQuantileRegressor(tau=[0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95],
                                  noncrossing=noncrossing).fit(X, y)
    g = np.linspace(-0.5, 1.5, 21)      # beyond the data too
    grid = np.array(np.meshgrid(g, g, [0.5], [0.5])).reshape(4, -1).T
    pred = est.predict(grid)
    assert pred.shape == (len(grid), 7)
    assert (np.diff(pred, axis=1) >= 0).all()
    raw = grid @ est.coef_.T + est.intercept_
    # the raw lines do cross somewhere on this grid: the sort is what orders them
    assert (np.diff(raw, axis=1) < 0).any()
    np.testing.assert_allclose(np.sort(raw, axis=1), pred, rtol=1e-12, atol=1e-12)


def test_projection_orders_the_training_residuals():
    # the kernel's PAV against a direct least-squares projection check
    rng = np.random.default_rng(2)
    for _ in range(200):
        v = rng.standard_normal(rng.integers(1, 8))
        out = v.copy()
        _testing.pav(out)
        assert (np.diff(out) >= -1e-15).all()
        # optimality: block means, and no other ordered vector is closer (spot check)
        other = np.sort(v)
        assert np.sum((out - v) ** 2) <= np.sum((other - v) ** 2) + 1e-12
        assert np.isclose(out.sum(), v.sum())
    X, y = hetero(3000, 3)
    a = OnlineQuantileRegressor(tau=TAUS, noncrossing="project").fit(X, y)
    b = OnlineQuantileRegressor(tau=TAUS).fit(X, y)
    assert not np.array_equal(a.coef_, b.coef_)
    assert a.score(X, y) > 0.5 * b.score(X, y)


def test_score_is_the_mean_d2_pinball_over_the_taus():
    X, y = hetero(3000, 4)
    est = OnlineQuantileRegressor(tau=TAUS).fit(X, y)
    pred = est.predict(X)
    expected = np.mean([d2_pinball_score(y, pred[:, q], alpha=t) for q, t in enumerate(TAUS)])
    assert est.score(X, y) == pytest.approx(expected, rel=1e-12)


def test_pickled_mid_stream_resumes_bit_identically():
    X, y, _ = make_linear_stream(6000, 3, random_state=5)
    est = OnlineQuantileRegressor(tau=TAUS, average=True).fit(X[:2500], y[:2500])
    copy = pickle.loads(pickle.dumps(est))
    est.partial_fit(X[2500:], y[2500:])
    copy.partial_fit(X[2500:], y[2500:])
    np.testing.assert_array_equal(est.coef_, copy.coef_)
    assert state_bytes(est) == state_bytes(copy)
    np.testing.assert_array_equal(learnt(est).window, learnt(copy).window)


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals (SIGUSR1)")
@pytest.mark.parametrize("kw", [{}, {"average": True, "inference": True}])
@pytest.mark.parametrize("at", [0, 1, 333])
def test_interrupt_keeps_whole_rows_of_every_quantile(at, kw):
    X, y, _ = make_linear_stream(3000, 3, random_state=6)
    est = OnlineQuantileRegressor(tau=TAUS, **kw).fit(X[:1000], y[:1000])
    with stopped_at(at):
        est.partial_fit(X[1000:], y[1000:])
    assert est.n_samples_seen_ == 1000 + at
    ref = OnlineQuantileRegressor(tau=TAUS, **kw).fit(X[:1000 + at], y[:1000 + at])
    assert state_of(est).tobytes() == state_of(ref).tobytes()
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)
    if kw:
        np.testing.assert_array_equal(learnt(est).sums, learnt(ref).sums)


def test_refusals_name_the_argument_and_leave_the_state():
    X, y, _ = make_linear_stream(2000, 3, random_state=7)
    for kw, match in [({"tau": [0.5, 0.1]}, "tau must be strictly increasing"),
                      ({"tau": [0.1, 1.0]}, "tau"),
                      ({"tau": [[0.1, 0.5]]}, "tau must be a number or a 1-D list"),
                      ({"tau": TAUS, "mode": "batch"}, "mode must be 'single'"),
                      ({"tau": TAUS, "inference": True}, "inference=True needs average"),
                      ({"tau": TAUS, "noncrossing": "sort"}, "noncrossing must be one of")]:
        with pytest.raises(ValueError, match=match):
            OnlineQuantileRegressor(**kw).fit(X, y)
    est = OnlineQuantileRegressor(tau=TAUS).fit(X, y)
    before = state_bytes(est)
    with pytest.raises(ValueError, match="tau changed"):
        est.set_params(tau=0.1).partial_fit(X[:5], y[:5])
    with pytest.raises(ValueError, match="tau changed"):
        est.set_params(tau=[0.1, 0.5]).partial_fit(X[:5], y[:5])
    bad = X[:5].copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.set_params(tau=TAUS).partial_fit(bad, y[:5])
    with pytest.raises(ValueError, match="coef_init must have shape"):
        OnlineQuantileRegressor(tau=TAUS).fit(X, y, coef_init=np.zeros((2, 3)))
    assert state_bytes(est) == before
    one = OnlineQuantileRegressor(tau=0.5).fit(X, y)
    with pytest.raises(ValueError, match="tau changed"):
        one.set_params(tau=[0.5]).partial_fit(X[:5], y[:5])


def test_warm_start_per_quantile():
    X, y, _ = make_linear_stream(3000, 3, random_state=8)
    ref = OnlineQuantileRegressor(tau=TAUS).fit(X, y)
    est = OnlineQuantileRegressor(tau=TAUS, schedule=ConstantSchedule(1e-6)).fit(
        X[:10], y[:10], coef_init=ref.coef_, intercept_init=ref.intercept_)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-3)


def test_one_row_calls_equal_one_call_and_switching_tau_count_is_safe():
    # One-row calls (learn_one's in-place path) end where one fit ends, every
    # record bit for bit; fit() from three taus to one and back, then
    # partial_fit, learns with the new count's state only.
    X, y, _ = make_linear_stream(600, 4, random_state=3)
    multi = OnlineQuantileRegressor(tau=TAUS, average=True)
    for i in range(600):
        multi.partial_fit(X[i:i + 1], y[i:i + 1])
    whole = OnlineQuantileRegressor(tau=TAUS, average=True).fit(X, y)
    np.testing.assert_array_equal(multi.coef_, whole.coef_)
    np.testing.assert_array_equal(multi.intercept_, whole.intercept_)
    assert state_of(multi).tobytes() == state_of(whole).tobytes()
    multi.set_params(tau=0.5).fit(X[:300], y[:300])
    multi.partial_fit(X[300:], y[300:])
    one = OnlineQuantileRegressor(tau=0.5, average=True).fit(X, y)
    np.testing.assert_array_equal(multi.coef_, one.coef_)
    multi.set_params(tau=TAUS).fit(X[:300], y[:300])
    multi.partial_fit(X[300:], y[300:])
    np.testing.assert_array_equal(multi.coef_, whole.coef_)


def bits(a):
    # bit patterns: assert_array_equal takes -0.0 for 0.0
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize("d", [1, 2, 6, 8, 10, 13, 38])
@pytest.mark.parametrize("m", [9, 4])
@pytest.mark.parametrize("average", [False, True])
def test_fused_pass_is_bit_identical_across_widths_and_quantile_counts(d, m, average):
    # The kernel updates 8-element chunks of a group of 2 or 3 quantiles at a
    # time, then a tail that GCC vectorizes in its own way per loop (the
    # tail's sums, and ||x||^2 in the state's win_sumsq, once differed in the
    # last bit at d % 4 = 2, 3): widths below, at and past one chunk, every
    # tail length mod 4, m = 9 (groups 2, 3, 3, 1) and m = 4 (2, 2). Weights of 0 skip every
    # quantile's update (their next predictions still come out of the pass),
    # uneven calls start each from a plain prediction pass.
    taus = [k / (m + 1) for k in range(1, m + 1)]
    X, y, _ = make_linear_stream(2000, d, random_state=d)
    sw = np.random.default_rng(d).choice([0.0, 1.0, 3.0], len(y), p=[0.2, 0.6, 0.2])
    multi = OnlineQuantileRegressor(tau=taus, average=average)
    for a, b in zip((0, 1, 450, 1333), (1, 450, 1333, 2000)):
        multi.partial_fit(X[a:b], y[a:b], sample_weight=sw[a:b])
    for q, t in enumerate(taus):
        one = OnlineQuantileRegressor(tau=t, average=average).fit(X, y, sample_weight=sw)
        np.testing.assert_array_equal(bits(learnt(multi).coef[q]), bits(learnt(one).coef))
        np.testing.assert_array_equal(bits(learnt(multi).coef_avg[q]),
                                      bits(learnt(one).coef_avg))
        assert state_of(multi)[q].tobytes() == state_of(one).tobytes(), f"tau={t}"


def test_quantiles_that_skip_a_row_are_left_alone():
    # Quantiles whose warm-up ends at different rows: for a while some update
    # and the others do not, within one row's pass (the groups fall apart).
    # A skipped quantile's w is not touched (adding 0 * x would turn its -0.0
    # into +0.0); each quantile is still its own single-quantile run. The
    # quantiles of one stream end their warm-ups together, so the state is
    # put together from single-quantile states at different points of their
    # warm-up (n_warmup = 50 rows), loaded through from_state.
    d, taus = 11, [0.1, 0.3, 0.5, 0.7, 0.9]
    X, y, _ = make_linear_stream(1500, d, random_state=11)
    ahead = [10, 25, 0, 25, 20]
    zero = np.full(d, -0.0)
    ones = [LinearSGD(d, tau=t, coef_init=zero) for t in taus]
    for one, k in zip(ones, ahead):
        for i in range(k):
            one.learn_one(X[i], y[i])
    parts = [one.to_state() for one in ones]
    state = LinearSGD(d, tau=taus, coef_init=zero).to_state()
    fill = max(p["window"].shape[1] for p in parts)
    for name in ("records", "coef", "coef_avg"):
        state[name] = np.vstack([p[name] for p in parts])
    state["window"] = np.vstack([np.pad(p["window"], ((0, 0), (0, fill - p["window"].shape[1])))
                                 for p in parts])
    multi = LinearSGD.from_state(state)
    assert multi.learn(X[:30], y[:30]) == 30
    # rows 1-30: quantiles 1 and 3 (25 rows ahead) have moved, the others not yet
    W = multi.iterate[0]
    assert np.all(np.signbit(W[[0, 2, 4]]) & (W[[0, 2, 4]] == 0)) and np.all(W[[1, 3]] != 0)
    assert multi.learn(X[30:], y[30:]) == 1470
    W, records = multi.iterate[0], state_of(multi)
    for q, one in enumerate(ones):
        one.learn(X[:30], y[:30])
        one.learn(X[30:], y[30:])
        np.testing.assert_array_equal(bits(W[q]), bits(one.iterate[0]))
        assert records[q].tobytes() == state_of(one).tobytes()
