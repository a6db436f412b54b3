"""streamfit.kernels' quantile half as another package would use it (no
estimator): SGD over blocks of rows with given stepsizes against NumPy, the
statistical schedule state stepped by hand and fused, the same results as the
estimators, argument checks, pickling, interrupts; and the typed boundary of
the compiled kernel underneath (records checked by name, lengths checked,
one set of codes)."""
import pickle
import signal

import numpy as np
import pytest

from streamfit import OnlineLeastSquaresRegressor, OnlineQuantileRegressor
from streamfit._kernels import _common
from streamfit._kernels import _quantile as _k
from streamfit.kernels import LinearState, StatisticalScheduleState, sgd
from streamfit.schedules import StatisticalSchedule
from streamfit.simulate import make_linear_stream


def numpy_sgd(X, y, etas, *, loss="check", tau=0.5, block=1, sw=None, fit_intercept=True,
              coef=None, intercept=0.0):
    """The update as a NumPy loop: per row, or per block's weighted mean."""
    w = np.zeros(X.shape[1]) if coef is None else coef.copy()
    b, total, k = intercept, 0.0, 0
    sw = np.ones(len(y)) if sw is None else sw
    for start in range(0, len(y), block):
        Xb, yb, wb = X[start:start + block], y[start:start + block], sw[start:start + block]
        r = yb - (Xb @ w + b)
        if loss == "check":
            total += np.sum(wb * r * (tau - (r < 0)))
            g = (r <= 0) - tau
        else:
            total += np.sum(wb * 0.5 * r * r)
            g = -r
        if wb.sum() == 0:
            continue
        eta = etas[k]
        k += 1
        # one row: its weight multiplies the step; a block: the weighted mean
        norm = 1.0 if block == 1 else wb.sum()
        w = w - eta * (Xb.T @ (wb * g)) / norm
        if fit_intercept:
            b -= eta * np.sum(wb * g) / norm
    return w, b, total


@pytest.fixture
def data():
    X, y, beta = make_linear_stream(600, 6, tau=0.3, random_state=0)
    return X, y, beta


@pytest.mark.parametrize("loss", ["check", "squared"])
@pytest.mark.parametrize("block", [1, 4])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_sgd_with_stepsizes_is_the_numpy_loop(data, loss, block, weighted, fit_intercept):
    X, y, _ = data
    sw = np.random.default_rng(1).choice([0.0, 0.5, 1.0, 2.0], len(y)) if weighted else None
    n_updates = len(y) // block if sw is None else \
        int(np.count_nonzero(sw.reshape(-1, block).sum(axis=1) > 0))
    etas = (1e-3 if loss == "squared" else 0.05) / np.sqrt(np.arange(n_updates) + 1.0)
    state = LinearState(6, coef=np.full(6, 0.5), intercept=1.0 if fit_intercept else 0.0)
    done = sgd(X, y, state, etas, loss=loss, tau=0.3, block=block, sample_weight=sw,
               fit_intercept=fit_intercept)
    w, b, total = numpy_sgd(X, y, etas, loss=loss, tau=0.3, block=block, sw=sw,
                            fit_intercept=fit_intercept, coef=np.full(6, 0.5),
                            intercept=1.0 if fit_intercept else 0.0)
    assert done == len(y) and state.n_seen == len(y) and state.n_updates == n_updates
    np.testing.assert_allclose(state.coef, w, rtol=1e-12, atol=1e-12 * np.abs(w).max())
    assert state.intercept == pytest.approx(b, rel=1e-12, abs=1e-12)
    assert state.loss == pytest.approx(total, rel=1e-12)


def test_sgd_averages_the_iterates(data):
    X, y, _ = data
    etas = np.full(len(y), 0.01)
    state = LinearState(6)
    path = []
    for i in range(len(y)):
        sgd(X[i:i + 1], y[i:i + 1], state, etas[i:i + 1], average=True, tau=0.3)
        path.append(state.coef.copy())
    np.testing.assert_allclose(state.coef_avg, np.mean(path, axis=0), rtol=1e-12)
    assert state.n_avg == len(y)


@pytest.mark.parametrize("mode, block", [("single", 1), ("batch", 16)])
@pytest.mark.parametrize("average", [False, True])
def test_the_fused_schedule_is_the_estimators(data, mode, block, average):
    # the kernels API and the estimator run the same code: bit for bit
    X, y, _ = data
    X, y = X[:576], y[:576]         # whole blocks of 16 in 96-row calls
    sched = StatisticalSchedule(n_warmup=20, window=32)
    est = OnlineQuantileRegressor(0.3, mode=mode, batch_size=block, schedule=sched,
                                  average=average).fit(X, y)
    state = LinearState(6)
    sstate = StatisticalScheduleState(6, tau=0.3, block=block, average=average,
                                      schedule=sched)
    for start in range(0, len(y), 96):
        sgd(X[start:start + 96], y[start:start + 96], state, schedule=sstate, block=block)
    coef = state.coef_avg if average and state.n_avg else state.coef
    np.testing.assert_array_equal(coef, est.coef_)
    assert state.loss == est.cumulative_loss_ and state.n_updates == est.n_updates_
    info = est.schedule_state_
    assert (sstate.phase, sstate.d0, sstate.b0, sstate.cl, sstate.stepsize) == \
        (info["phase"], info["d0"], info["b0"], info["cl"], info["stepsize"])


def test_least_squares_schedule_through_the_api(data):
    X, y, _ = data
    est = OnlineLeastSquaresRegressor(schedule=StatisticalSchedule(n_warmup=20)).fit(X, y)
    state = LinearState(6)
    sstate = StatisticalScheduleState(6, loss="squared",
                                      schedule=StatisticalSchedule(n_warmup=20))
    sgd(X, y, state, schedule=sstate)
    np.testing.assert_array_equal(state.coef, est.coef_)


def test_stepping_the_schedule_by_hand_gives_the_fused_trajectory(data):
    X, y, _ = data
    fused, fused_sched = LinearState(6), StatisticalScheduleState(6, tau=0.3)
    sgd(X, y, fused, schedule=fused_sched)
    sched = StatisticalScheduleState(6, tau=0.3)
    w, b, stepsizes = np.zeros(6), 0.0, []
    for x, target in zip(X, y):
        r = target - (x @ w + b)
        eta = sched.step(r, x)
        stepsizes.append(eta)
        g = float(r <= 0) - 0.3
        w -= eta * g * x
        b -= eta * g
    assert stepsizes[:50] == [0.0] * 50 and min(stepsizes[50:]) > 0     # the warm-up
    # NumPy's dot products round differently from the kernel's: not bit for bit
    np.testing.assert_allclose(w, fused.coef, rtol=1e-9)
    assert (sched.phase, sched.restarts) == (fused_sched.phase, fused_sched.restarts)
    assert sched.stepsize == pytest.approx(fused_sched.stepsize, rel=1e-9)


def test_states_pickle_and_resume_bit_identically(data):
    X, y, _ = data
    state, sched = LinearState(6), StatisticalScheduleState(6, tau=0.3, average=True)
    ref, ref_sched = LinearState(6), StatisticalScheduleState(6, tau=0.3, average=True)
    sgd(X, y, ref, schedule=ref_sched)
    for start in range(0, len(y), 150):
        state, sched = pickle.loads(pickle.dumps((state, sched)))
        sgd(X[start:start + 150], y[start:start + 150], state, schedule=sched)
    np.testing.assert_array_equal(state.coef, ref.coef)
    np.testing.assert_array_equal(state.coef_avg, ref.coef_avg)
    assert pickle.dumps((state, sched)) == pickle.dumps((ref, ref_sched))
    # a state pickled under another layout is refused, not misread
    payload = state.__getstate__()
    layout, raw = payload["state"]
    payload["state"] = (layout[:-1], raw)
    with pytest.raises(ValueError, match="another state layout"):
        LinearState.__new__(LinearState).__setstate__(payload)


def snapshot(*objs):
    return pickle.dumps(objs)


@pytest.mark.parametrize("call, exc, match", [
    (lambda X, y, s: sgd(X, y, "state", np.ones(len(y))), TypeError, "state must be"),
    (lambda X, y, s: sgd(X[:, :3], y, s, np.ones(len(y))), ValueError, "X has 3 features"),
    (lambda X, y, s: sgd(X, y[:-1], s, np.ones(len(y))), ValueError, "y has"),
    (lambda X, y, s: sgd(X, y, s), ValueError, "either stepsizes or schedule"),
    (lambda X, y, s: sgd(X, y, s, np.ones(len(y) - 1)), ValueError, "stepsizes must have"),
    (lambda X, y, s: sgd(X, y, s, -np.ones(len(y))), ValueError, "stepsizes must be positive"),
    (lambda X, y, s: sgd(X, y, s, np.ones(len(y)) + 0j), TypeError, "stepsizes must hold real"),
    (lambda X, y, s: sgd(X, y, s, np.ones(len(y) // 7), block=7), ValueError, "whole blocks"),
    (lambda X, y, s: sgd(X, y, s, np.ones(len(y)), loss="huber"), ValueError, "loss must be"),
    (lambda X, y, s: sgd(X, y, s, np.ones(len(y)), sample_weight=-np.ones(len(y))),
     ValueError, "non-negative"),
    (lambda X, y, s: sgd(X, y, s, schedule=StatisticalScheduleState(6, block=2)), ValueError,
     "blocks of 2"),
    (lambda X, y, s: sgd(np.where(np.arange(6) == 2, np.nan, X), y, s, np.ones(len(y))),
     ValueError, r"X contains NaN or inf \(row 0\)"),
    (lambda X, y, s: sgd(X, np.where(np.arange(len(y)) == 9, np.inf, y), s, np.ones(len(y))),
     ValueError, r"y contains NaN or inf \(row 9\)"),
    (lambda X, y, s: sgd(X, y, s, np.full(len(y), 1e305), loss="squared"), FloatingPointError,
     "diverged"),
])
def test_bad_arguments_are_refused_and_the_states_stay(data, call, exc, match):
    X, y, _ = data
    state = LinearState(6)
    sgd(X[:100], y[:100], state, np.full(100, 0.01))
    before = snapshot(state)
    with pytest.raises(exc, match=match):
        call(X[100:], y[100:], state)
    assert snapshot(state) == before


def test_schedule_step_checks_its_row():
    sched = StatisticalScheduleState(3)
    before = snapshot(sched)
    with pytest.raises(ValueError, match="x has 2 values"):
        sched.step(1.0, np.ones(2))
    with pytest.raises(ValueError, match="residual must be finite"):
        sched.step(np.nan, np.ones(3))
    with pytest.raises(ValueError, match="weight must be >= 0"):
        sched.step(1.0, np.ones(3), weight=-1.0)
    assert snapshot(sched) == before
    with pytest.raises(ValueError, match="single-sample"):
        StatisticalScheduleState(3, block=4).step(1.0, np.ones(3))


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs POSIX signals (SIGUSR1)")
def test_an_interrupt_leaves_whole_rows_and_propagates(data):
    X, y, _ = data

    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        state, sched = LinearState(6), StatisticalScheduleState(6, tau=0.3)
        _k._interrupt_at(321, signal.SIGUSR1)
        with pytest.raises(Stop):
            sgd(X, y, state, schedule=sched)
    finally:
        _k._interrupt_at(-1, 0)
        signal.signal(signal.SIGUSR1, old)
    assert state.n_seen == 321
    ref, ref_sched = LinearState(6), StatisticalScheduleState(6, tau=0.3)
    sgd(X[:321], y[:321], ref, schedule=ref_sched)
    assert snapshot(state, sched) == snapshot(ref, ref_sched)


# -- the typed boundary underneath -----------------------------------------------------

def kernel_args(d=4, n=10, state=None, params=None, window=100, w=None):
    X = np.random.default_rng(0).standard_normal((n, d))
    y = X.sum(axis=1)
    params = _k.new_params() if params is None else params
    if params is not None and params.dtype == _k.PARAMS_DTYPE:
        params["kind"], params["c"], params["tau"] = _k.KIND_CONSTANT, 0.1, 0.5
    return (X, y, np.zeros(0), np.zeros(d) if w is None else w, np.zeros(d),
            _k.new_state() if state is None else state, params, np.zeros(window), np.zeros(0))


def test_records_are_checked_by_layout_and_name():
    assert _k.STATE_DTYPE.names[:3] == ("t", "n_updates", "n_seen")
    assert _k.PARAMS_DTYPE.names[-2:] == ("drift_arm", "drift_clock")
    # a 3-double state was once written past its end: now refused
    with pytest.raises(ValueError, match=r"state must be a record array of shape \(1,\)"):
        _k.sgd_single(*kernel_args(state=np.zeros(3)))
    # the right size and layout, other names: refused too (Cython alone would take it)
    renamed = np.zeros(1, [(f"f{i}", "<f8") for i in range(len(_k.STATE_DTYPE.names))])
    with pytest.raises(ValueError, match="state must be a record array"):
        _k.sgd_single(*kernel_args(state=renamed))
    with pytest.raises(ValueError, match="params must be a record array"):
        _k.sgd_single(*kernel_args(params=np.zeros(2, _k.PARAMS_DTYPE)))


def test_array_lengths_are_checked_against_the_data():
    with pytest.raises(ValueError, match="w and wbar must have 4 values"):
        _k.sgd_single(*kernel_args(w=np.zeros(3)))
    args = list(kernel_args())
    args[2] = np.ones(3)                  # sample weights for 3 of 10 rows
    with pytest.raises(ValueError, match="sample_weight must have 10 values"):
        _k.sgd_single(*args)
    # a statistical schedule's window too short for its constants: refused, no write
    params = _k.new_params()
    for key, value in StatisticalSchedule()._kernel_params(_k.LOSS_CHECK, "single", 5).items():
        params[key] = value
    params["tau"] = 0.5
    args = list(kernel_args(window=10))
    args[6] = params
    state = args[5].copy()
    with pytest.raises(ValueError, match=r"window: the residual window holds 10 values"):
        _k.sgd_single(*args)
    assert args[5].tobytes() == state.tobytes()
    out = np.zeros(3)
    with pytest.raises(ValueError, match="out 10"):
        _k.predict(np.ones((10, 4)), np.zeros(4), 0.0, out)


def test_one_set_of_distinct_codes():
    codes = _common.CODES
    assert len(set(codes.values())) == len(codes)
    assert not hasattr(_k, "ERR_WINDOW") and not hasattr(_k, "ROW_SCALE")
    # every kernel result is one of them
    result = _k.sgd_single(*kernel_args())
    assert result[0] == codes["OK"] and result[1:] == (10, None, -1)


def test_a_coef_or_window_set_to_another_type_is_refused_naming_it(data):
    """coef is public (a warm start may set it): a list, another dtype or
    length is refused naming it, by sgd and by pickling, not an
    AttributeError or Cython's buffer mismatch; so is a schedule's window
    replaced by an array of another dtype."""
    X, y, _ = data
    state = LinearState(6)
    for bad in ([0.0] * 6, np.zeros(6, np.float32), np.zeros(5), np.full(6, np.nan)):
        state.coef = bad
        with pytest.raises(ValueError, match=r"state\.coef "):
            sgd(X[:2], y[:2], state, np.full(2, 0.1))
        with pytest.raises(ValueError, match=r"state\.coef "):
            pickle.dumps(state)
    state.coef = np.zeros(6)
    assert sgd(X[:2], y[:2], state, np.full(2, 0.1)) == 2
    sched = StatisticalScheduleState(6)
    sched._window = sched._window.astype(np.float32)
    with pytest.raises(ValueError, match="window"):
        sgd(X, y, LinearState(6), schedule=sched)
    with pytest.raises(ValueError, match="window"):
        sched.step(0.5, X[0])
