"""The averaged fit's intercept (check loss, single mode, average=True) is
the plug-in intercept whether or not inference is on: the average of two
intercepts stepping on y - x' coef_ (steps eta and 2 eta, extrapolated), moved
to the last average. The average of the iterate's own intercept keeps a bias
of the order of the stepsize at every tau but a symmetric noise's median
(measured at d = 5, n = 20,000, t_1.1 noise, 40 seeds: RMSE 0.90 at tau = 0.1
and 0.99 at tau = 0.9, against 0.136 and 0.137 for the plug-in)."""
import pickle

import numpy as np
import pytest

from streamfit import OnlineQuantileRegressor
from streamfit.kernels import LinearSGD
from streamfit.simulate import make_linear_stream

from ._cases import edited_pickle, learnt, state_bytes, state_of


@pytest.mark.parametrize("tau", [0.1, 0.9])
def test_the_averaged_intercept_is_the_plug_in_and_unbiased(tau):
    plug, iterate = [], []
    for seed in range(12):
        X, y, _ = make_linear_stream(20000, 5, tau=tau, random_state=300 + seed)
        est = OnlineQuantileRegressor(tau, average=True).fit(X, y)
        with_inference = OnlineQuantileRegressor(tau, average=True, inference=True).fit(X, y)
        # the same path, the same intercept: inference only adds the sums
        assert est.intercept_ == with_inference.intercept_
        np.testing.assert_array_equal(est.coef_, with_inference.coef_)
        # the kernel API's state object is the estimator's, row by row too;
        # the paper's average of the iterate's own intercept is the mean of
        # the iterates over the average's steps (the last n_avg rows: one
        # update a row, no restart of the average), which gives coef_ too
        state = LinearSGD(5, tau=tau, average=True)
        path = []
        for xi, yi in zip(X, y):
            state.learn_one(xi, yi)
            w, b = state.iterate
            path.append(np.append(w, b))
        np.testing.assert_array_equal(state.coef, est.coef_)
        assert state.intercept == est.intercept_
        k = int(state_of(state)["n_avg"][0])
        assert 10_000 < k < 20_000
        paper = np.mean(path[-k:], axis=0)
        np.testing.assert_allclose(paper[:5], est.coef_, rtol=1e-9, atol=1e-12)
        plug.append(est.intercept_)
        iterate.append(paper[5])
    # the noise's tau-quantile is 0: the truth is 0
    rmse_plug, rmse_iterate = np.sqrt(np.mean(np.square(plug))), \
        np.sqrt(np.mean(np.square(iterate)))
    assert rmse_plug < 0.35, rmse_plug
    assert rmse_iterate > 2 * rmse_plug, (rmse_iterate, rmse_plug)


def test_several_taus_carry_the_same_plug_in_intercepts():
    X, y, _ = make_linear_stream(8000, 4, tau=0.5, random_state=3)
    taus = [0.2, 0.8]
    multi = OnlineQuantileRegressor(tau=taus, average=True).fit(X, y)
    for q, tau in enumerate(taus):
        one = OnlineQuantileRegressor(tau, average=True).fit(X, y)
        assert multi.intercept_[q] == one.intercept_
        np.testing.assert_array_equal(learnt(multi).plug_in[q], learnt(one).plug_in)


@pytest.mark.parametrize("taus", [0.3, [0.3, 0.7]])
def test_pickled_mid_average_resumes_bit_identically(taus):
    X, y, _ = make_linear_stream(6000, 4, tau=0.3, random_state=8)
    est = OnlineQuantileRegressor(taus, average=True).fit(X[:3000], y[:3000])
    assert (state_of(est)["n_avg"] > 0).all()
    copy = pickle.loads(pickle.dumps(est))
    est.partial_fit(X[3000:], y[3000:])
    copy.partial_fit(X[3000:], y[3000:])
    np.testing.assert_array_equal(est.intercept_, copy.intercept_)
    np.testing.assert_array_equal(learnt(est).plug_in, learnt(copy).plug_in)
    assert state_of(est).tobytes() == state_of(copy).tobytes()


@pytest.mark.parametrize("taus", [0.3, [0.3, 0.7]])
def test_a_state_without_plug_in_is_refused_naming_it(taus):
    # the plug-in's means belong to every averaged single-mode state with an
    # intercept: a pickle (or a to_state dict) without them is damaged or of
    # another version, refused naming the field, the source unchanged
    X, y, _ = make_linear_stream(6000, 4, tau=0.3, random_state=8)
    est = OnlineQuantileRegressor(taus, average=True).fit(X[:3000], y[:3000])
    before = state_bytes(est)

    def drop(state):
        state["plug_in"] = None

    with pytest.raises(ValueError, match="'plug_in'"):
        pickle.loads(edited_pickle(est, drop))
    state = est._state.to_state()
    drop(state)
    with pytest.raises(ValueError, match="'plug_in'"):
        LinearSGD.from_state(state)
    assert state_bytes(est) == before


def test_inference_switched_off_keeps_the_plug_in_path():
    # the plug-in's running means move out of the sums' tail: the intercept
    # goes on exactly as with inference on all along
    X, y, _ = make_linear_stream(6000, 4, tau=0.8, random_state=11)
    on = OnlineQuantileRegressor(0.8, average=True, inference=True).fit(X, y)
    est = OnlineQuantileRegressor(0.8, average=True, inference=True).fit(X[:3000], y[:3000])
    assert state_of(est)["n_avg"][0] > 0
    est.set_params(inference=False).partial_fit(X[3000:], y[3000:])
    assert learnt(est).sums is None and learnt(est).plug_in is not None
    assert est.intercept_ == on.intercept_
    np.testing.assert_array_equal(est.coef_, on.coef_)


def test_where_there_is_no_plug_in():
    # least squares, no intercept, batch mode and scale="online" keep the
    # average of the iterate's intercept (and no running means)
    from streamfit import OnlineLeastSquaresRegressor
    X, y, _ = make_linear_stream(3000, 3, random_state=4)
    for est in (OnlineLeastSquaresRegressor(average=True),
                OnlineQuantileRegressor(average=True, fit_intercept=False),
                OnlineQuantileRegressor(average=True, mode="batch", batch_size=8),
                OnlineQuantileRegressor(average=True, scale="online")):
        est.fit(X, y)
        assert learnt(est).plug_in is None, est


def uncentred_warm_start(t0, switch_at=None, switch_to=None):
    """Row by row, a warm start (start="phase2", t0) from a cold fit on an
    uncentred stream (where the lag matters): the estimator, the rows of its
    average, the path of wbar after each of them, and wbar when the average
    began; at row ``switch_at`` the schedule becomes ``switch_to``."""
    from streamfit.schedules import StatisticalSchedule
    X, y, beta = make_linear_stream(4000, 3, tau=0.8, random_state=9)
    X, y = X + 2.0, y + 2.0 * beta.sum()
    cold = OnlineQuantileRegressor(0.8, average=True).fit(X, y)
    est = OnlineQuantileRegressor(0.8, average=True,
                                  schedule=StatisticalSchedule(start="phase2", t0=t0))
    rows, path, start = [], [], None
    for i in range(len(y)):
        before = None if i == 0 else learnt(est).coef_avg.copy()
        if i == 0:
            est.partial_fit(X[:1], y[:1], coef_init=cold.coef_, intercept_init=cold.intercept_)
        else:
            est.partial_fit(X[i:i + 1], y[i:i + 1])
        k = int(state_of(est)["n_avg"][0])
        if k and start is None:
            assert k == t0 + 1
            start = before
        if k > t0 + len(path):
            rows.append(X[i])
            path.append(learnt(est).coef_avg.copy())
        if i == switch_at:
            assert k > t0
            est.set_params(schedule=switch_to)
    np.testing.assert_array_equal(start, cold.coef_)
    return est, np.array(rows), np.array(path), start


def test_a_warm_start_counts_its_prior_iterates_in_the_lag():
    # StatisticalSchedule(start="phase2", t0=T0) (parallel_quantile_fit's
    # later rounds) starts the average with its starting point as T0
    # iterates: the plug-in's average of the wbar path counts them too. Its
    # running means from zeros instead pulled the intercept by about
    # m'(0 - wbar): -0.85 against the truth 0 at T0 = 5000 (d = 10).
    from streamfit.schedules import StatisticalSchedule
    t0 = 3000
    est, rows, path, start = uncentred_warm_start(t0)
    assert len(path) > 300
    wwbar = (t0 * start + np.sum(path, axis=0)) / (t0 + len(path))
    lag = np.mean(rows, axis=0) @ (wwbar - path[-1])
    np.testing.assert_allclose(est.intercept_, state_of(est)["pi_avg"][0] + lag,
                               rtol=1e-9, atol=1e-9)
    # and on a centred stream, a later round's intercept stays at the truth
    X, y, _ = make_linear_stream(5000, 10, tau=0.5, random_state=100)
    cold = OnlineQuantileRegressor(0.5, average=True).fit(X, y)
    for t0 in (5000, 25000):
        warm = OnlineQuantileRegressor(
            0.5, average=True, schedule=StatisticalSchedule(start="phase2", t0=t0)).fit(
            X, y, coef_init=cold.coef_, intercept_init=cold.intercept_)
        assert abs(warm.intercept_) < 0.2, (t0, warm.intercept_)   # the truth is 0


@pytest.mark.parametrize("taus", [0.8, [0.8]])
def test_an_average_switched_on_after_a_warm_start_has_no_prior(taus):
    # start="phase2", t0 > 0 with average=False: the schedule's average
    # starts (n_avg = t0) but never runs; average=True then restarts it from
    # zero. The plug-in's means must cover exactly the rows since (they
    # counted n_avg - t0 rows: negative weights, xbar near -2 x's mean).
    from streamfit.schedules import StatisticalSchedule
    X, y, beta = make_linear_stream(4000, 3, tau=0.8, random_state=9)
    X, y = X + 2.0, y + 2.0 * beta.sum()
    cold = OnlineQuantileRegressor(0.8, average=True).fit(X, y)
    est = OnlineQuantileRegressor(taus, average=False,
                                  schedule=StatisticalSchedule(start="phase2", t0=3000))
    est.partial_fit(X[:2000], y[:2000], coef_init=cold.coef_, intercept_init=cold.intercept_)
    assert (state_of(est)["n_avg"] == 3000).all()
    est.set_params(average=True)
    rows, path = [], []
    for i in range(2000, 4000):
        est.partial_fit(X[i:i + 1], y[i:i + 1])
        rows.append(X[i])
        path.append(np.ravel(learnt(est).coef_avg).copy())
    fit = learnt(est)
    assert (fit.records["n_avg"] == len(rows)).all()
    plug_in = np.ravel(fit.plug_in)
    np.testing.assert_allclose(plug_in[:3], np.mean(rows, axis=0), rtol=1e-12)
    np.testing.assert_allclose(plug_in[3:], np.mean(path, axis=0), rtol=1e-12)
    lag = np.mean(rows, axis=0) @ (np.mean(path, axis=0) - path[-1])
    np.testing.assert_allclose(np.ravel(est.intercept_)[0], fit.records["pi_avg"][0] + lag,
                               rtol=1e-9, atol=1e-9)



def test_a_t0_changed_mid_average_keeps_the_means_row_count():
    # the prior iterates are those the average began with: a schedule whose
    # t0 changes mid-average must not re-weight the means (they counted
    # n_avg - the new t0 rows)
    from streamfit.schedules import StatisticalSchedule
    t0 = 3000
    est, rows, path, start = uncentred_warm_start(
        t0, switch_at=2500, switch_to=StatisticalSchedule(start="phase2", t0=100))
    assert len(rows) > 1000
    np.testing.assert_allclose(learnt(est).plug_in[:3], np.mean(rows, axis=0), rtol=1e-12)
    wwbar = (t0 * start + np.sum(path, axis=0)) / (t0 + len(path))
    np.testing.assert_allclose(learnt(est).plug_in[3:], wwbar, rtol=1e-12)


@pytest.mark.parametrize("taus", [0.7, [0.3, 0.7]])
def test_the_lag_uses_the_rows_weighted_mean(taus):
    # the plug-ins take weighted steps: their fixed point moves with the
    # weighted mean row, so the lag's xbar is the weighted mean of the
    # average's rows (weights that depend on x: the plain mean is far off)
    rng = np.random.default_rng(5)
    X = rng.normal(1.0, 1.0, size=(6000, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(6000)
    sw = np.where(X[:, 0] > 1.0, 10.0, 1.0)
    sw[::9] = 0.0
    est = OnlineQuantileRegressor(taus, average=True)
    for a in range(0, 6000, 1500):
        est.partial_fit(X[a:a + 1500], y[a:a + 1500], sample_weight=sw[a:a + 1500])
    fit = learnt(est)
    for q, k in enumerate(fit.records["n_avg"].astype(int)):
        assert k > 1000
        rows = np.flatnonzero(sw > 0)[-k:]      # no restart: the last k updates
        xw = np.average(X[rows], axis=0, weights=sw[rows])
        xbar = np.atleast_2d(fit.plug_in)[q, :3]
        np.testing.assert_allclose(xbar, xw, rtol=1e-12)
        assert np.abs(xbar - X[rows].mean(axis=0)).max() > 0.1


@pytest.mark.parametrize("taus", [0.3, [0.3, 0.7]])
def test_a_state_of_another_layout_is_refused_on_load(taus):
    # an estimator pickled by a streamfit whose state record had other fields
    # (x_wsum is new in API_VERSION 3), or a state of another format: a clear
    # error when it loads (states of earlier versions cannot be resumed), the
    # estimator it was taken from unchanged
    X, y, _ = make_linear_stream(2000, 3, random_state=5)
    est = OnlineQuantileRegressor(taus, average=True).fit(X, y)
    before, pred = state_bytes(est), est.predict(X[:5])

    def older(state):
        at = state["state_fields"].index("x_wsum")
        state["state_fields"].pop(at)
        state["records"] = np.delete(state["records"], at, axis=1)

    def other_format(state):
        state["format"] += 1

    for edit, match in ((older, "another layout"), (other_format, "format")):
        with pytest.raises(ValueError, match=match):
            pickle.loads(edited_pickle(est, edit))
        state = est._state.to_state()
        edit(state)
        with pytest.raises(ValueError, match=match):
            LinearSGD.from_state(state)
    assert state_bytes(est) == before
    np.testing.assert_array_equal(est.predict(X[:5]), pred)
    est.partial_fit(X[:10], y[:10])
