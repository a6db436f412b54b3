"""streamfit.kernels' quantile half as another package would use it (no
estimator): the LinearSGD state object over blocks of rows and one row at a
time with given stepsizes against NumPy, the statistical schedule fused, the
same results as the estimators, argument checks, pickling and loading,
interrupts; and the typed boundary underneath (records checked by name and
layout on load, lengths checked, one set of codes)."""
import pickle
import signal

import numpy as np
import pytest

from streamfit import OnlineLeastSquaresRegressor, OnlineQuantileRegressor
from streamfit._kernels import _common
from streamfit._kernels import _quantile as _k
from streamfit.kernels import IntervalState, LinearSGD
from streamfit.schedules import ConstantSchedule, StatisticalSchedule
from streamfit.simulate import make_linear_stream

from ..quantile._cases import state_bytes, state_of


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


class GivenStepsizes:
    """A user schedule: the stepsizes of updates start..start+count-1 from a
    given array (what the old kernel API took as ``stepsizes``)."""

    def __init__(self, etas):
        self.etas = etas

    def stepsizes(self, start, count):
        return self.etas[start:start + count]


def records(state):
    return state_of(state)


@pytest.fixture
def data():
    X, y, beta = make_linear_stream(600, 6, tau=0.3, random_state=0)
    return X, y, beta


@pytest.mark.parametrize("loss", ["check", "squared"])
@pytest.mark.parametrize("block", [1, 4])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_learn_with_stepsizes_is_the_numpy_loop(data, loss, block, weighted, fit_intercept):
    X, y, _ = data
    if loss == "squared" and block > 1:
        # least squares takes one row per update (its statistical schedule is
        # the single-sample one): batches of it are refused, naming the loss
        with pytest.raises(ValueError, match="squared loss is implemented for one target "
                                             "in mode 'single'"):
            LinearSGD(6, loss=loss, mode="batch", batch_size=block)
        return
    sw = np.random.default_rng(1).choice([0.0, 0.5, 1.0, 2.0], len(y)) if weighted else None
    n_updates = len(y) // block if sw is None else \
        int(np.count_nonzero(sw.reshape(-1, block).sum(axis=1) > 0))
    etas = (1e-3 if loss == "squared" else 0.05) / np.sqrt(np.arange(n_updates) + 1.0)
    start = dict(coef_init=np.full(6, 0.5), intercept_init=1.0 if fit_intercept else 0.0)
    state = LinearSGD(6, loss=loss, tau=0.3, mode="single" if block == 1 else "batch",
                      batch_size=None if block == 1 else block,
                      schedule=GivenStepsizes(etas), fit_intercept=fit_intercept, **start)
    done = state.learn(X, y, sw)
    w, b, total = numpy_sgd(X, y, etas, loss=loss, tau=0.3, block=block, sw=sw,
                            fit_intercept=fit_intercept, coef=np.full(6, 0.5),
                            intercept=1.0 if fit_intercept else 0.0)
    assert done == len(y) and state.n_samples_seen == len(y) and state.n_updates == n_updates
    np.testing.assert_allclose(state.coef, w, rtol=1e-12, atol=1e-12 * np.abs(w).max())
    assert state.intercept == pytest.approx(b, rel=1e-12, abs=1e-12)
    assert state.cumulative_loss == pytest.approx(total, rel=1e-12)
    if block == 1:
        # one row at a time: the same rows give the block's state, bit for bit
        one = LinearSGD(6, loss=loss, tau=0.3, schedule=GivenStepsizes(etas),
                        fit_intercept=fit_intercept, **start)
        for i in range(len(y)):
            one.learn_one(X[i], y[i], 1.0 if sw is None else sw[i])
        assert state_bytes(one) == state_bytes(state)


def test_learn_averages_the_iterates(data):
    X, y, _ = data
    state = LinearSGD(6, tau=0.3, schedule=ConstantSchedule(0.01), average=True)
    path = []
    for i in range(len(y)):
        state.learn_one(X[i], y[i])
        path.append(state.iterate[0])
    np.testing.assert_allclose(state.coef, np.mean(path, axis=0), rtol=1e-12)
    assert records(state)["n_avg"][0] == len(y)


@pytest.mark.parametrize("mode, block", [("single", 1), ("batch", 16)])
@pytest.mark.parametrize("average", [False, True])
def test_the_fused_schedule_is_the_estimators(data, mode, block, average):
    # the kernels API and the estimator run the same code: bit for bit
    X, y, _ = data
    X, y = X[:576], y[:576]         # whole blocks of 16 in 96-row calls
    sched = StatisticalSchedule(n_warmup=20, window=32)
    est = OnlineQuantileRegressor(0.3, mode=mode, batch_size=block, schedule=sched,
                                  average=average).fit(X, y)
    state = LinearSGD(6, tau=0.3, mode=mode, batch_size=block, average=average,
                      schedule=sched)
    for start in range(0, len(y), 96):
        state.learn(X[start:start + 96], y[start:start + 96])
    np.testing.assert_array_equal(state.coef, est.coef_)
    assert state.intercept == est.intercept_
    assert state.cumulative_loss == est.cumulative_loss_ and state.n_updates == est.n_updates_
    assert state.schedule_state == est.schedule_state_
    assert state_bytes(state) == state_bytes(est._state)


def test_least_squares_schedule_through_the_api(data):
    X, y, _ = data
    est = OnlineLeastSquaresRegressor(schedule=StatisticalSchedule(n_warmup=20)).fit(X, y)
    state = LinearSGD(6, loss="squared", schedule=StatisticalSchedule(n_warmup=20))
    state.learn(X, y)
    np.testing.assert_array_equal(state.coef, est.coef_)
    assert state.schedule_state == est.schedule_state_


@pytest.mark.parametrize("kw", [{}, {"average": True}, {"tau": [0.2, 0.5, 0.8]},
                                {"average": True, "inference": True},
                                {"scale": "online"}, {"loss": "squared", "tau": 0.5}])
def test_learn_one_row_by_row_is_the_block_call(data, kw):
    # the statistical schedule, fused: its warm-up takes no step (50 rows),
    # then every row does; rows one at a time (learn_one's in-place path) and
    # one block give the same state, every section bit for bit
    X, y, _ = data
    kw = {"tau": 0.3, **kw}
    block, rows = LinearSGD(6, **kw), LinearSGD(6, **kw)
    block.learn(X, y)
    for i in range(len(y)):
        rows.learn_one(X[i], y[i])
        if i == 49:
            assert rows.n_updates == 0 and not rows.iterate[0].any()
        elif i == 50:
            assert rows.n_updates == 1 and rows.iterate[0].all()
    assert state_bytes(rows) == state_bytes(block)
    # a sequence of floats is the same row
    other = LinearSGD(6, **kw)
    for i in range(len(y)):
        other.learn_one(X[i].tolist(), float(y[i]))
    assert state_bytes(other) == state_bytes(block)


@pytest.mark.parametrize("kw", [
    {}, {"average": True}, {"tau": [0.2, 0.5, 0.8]}, {"tau": [k / 10 for k in range(1, 9)]},
    {"loss": "squared"}, {"average": True, "fit_intercept": False},
    {"tau": [k / 10 for k in range(1, 10)]}, {"scale": "online"}])
def test_predict_one_is_predict_of_one_row(data, kw):
    # one row predicted alone is the block prediction's row, bit for bit
    X, y, _ = data
    state = LinearSGD(6, **kw)
    state.learn(X, y)
    block = state.predict(X[:50])
    for i in range(50):
        assert np.atleast_1d(state.predict_one(X[i])).tobytes() == \
            np.atleast_1d(block[i]).tobytes()


def test_states_pickle_and_resume_bit_identically(data):
    X, y, _ = data
    state = LinearSGD(6, tau=0.3, average=True)
    ref = LinearSGD(6, tau=0.3, average=True)
    ref.learn(X, y)
    for start in range(0, len(y), 150):
        state = pickle.loads(pickle.dumps(state))
        state.learn(X[start:start + 150], y[start:start + 150])
        state = LinearSGD.from_state(state.to_state())
    np.testing.assert_array_equal(state.coef, ref.coef)
    assert state_bytes(state) == state_bytes(ref)
    # a state of another layout is refused, not misread
    payload = state.to_state()
    payload["state_fields"] = payload["state_fields"][:-1]
    with pytest.raises(ValueError, match="another layout"):
        LinearSGD.from_state(payload)


@pytest.mark.parametrize("kind, kw", [
    (LinearSGD, {"mode": "batch", "batch_size": 16}),           # rows pending
    (LinearSGD, {"mode": "storage"}),                          # rows stored
    (LinearSGD, {"average": True, "drift": "restart"}),
    (LinearSGD, {"tau": [0.2, 0.8], "average": True, "inference": True}),
    # a schedule object (a parameter named as a state field: "window")
    (LinearSGD, {"schedule": StatisticalSchedule(n_warmup=20, window=32)}),
    (IntervalState, {"alpha": 0.2})])
def test_an_unpickled_state_pickles_to_the_same_bytes(data, kind, kw):
    # pickle bytes are how estimator_checks (and users' caches) compare
    # objects; before: a loaded state kept the unpickled arrays' dtype
    # objects, and a loaded schedule its attribute names as unpickled (not
    # interned), which pickle again as new objects (other bytes, same values)
    X, y, _ = data
    state = kind(6, **kw)
    state.learn(X[:203], y[:203])
    loaded = pickle.loads(pickle.dumps(state))
    assert pickle.dumps(loaded) == pickle.dumps(state)
    for s in (state, loaded):
        s.learn(X[203:], y[203:])
    assert pickle.dumps(loaded) == pickle.dumps(state)


@pytest.mark.parametrize("call, exc, match", [
    (lambda X, y, s: s.learn(X.tolist(), y), TypeError, "X must be a float64 ndarray"),
    (lambda X, y, s: s.learn(X.astype(np.int64), y), TypeError, "X must be a float64"),
    (lambda X, y, s: s.learn(X[:, :3], y), ValueError, "X has 3 features"),
    (lambda X, y, s: s.learn(X, y[:-1]), ValueError, "y must have"),
    (lambda X, y, s: s.learn(X, y, -np.ones(len(y))), ValueError, "non-negative"),
    (lambda X, y, s: s.learn(X, y, np.ones(3)), ValueError, "sample_weight must have"),
    (lambda X, y, s: s.learn(np.where(np.arange(6) == 2, np.nan, X), y), ValueError,
     r"X contains NaN or inf \(row 0 of this call\)"),
    (lambda X, y, s: s.learn(X, np.where(np.arange(len(y)) == 9, np.inf, y)), ValueError,
     r"y contains NaN or inf \(row 9 of this call\)"),
    (lambda X, y, s: s.learn(X, y, None, np.zeros((len(y), 1))), ValueError, "predictions"),
    (lambda X, y, s: s.learn_one(X[0, :5], y[0]), ValueError, "x must be a 1-D array of 6"),
    (lambda X, y, s: s.learn_one("abcdef", y[0]), TypeError, "x must be a 1-D array"),
    (lambda X, y, s: s.learn_one(np.where(np.arange(6) == 2, np.nan, X[0]), y[0]),
     ValueError, "X contains NaN or inf"),
    (lambda X, y, s: s.learn_one(X[0], "a"), TypeError, "y must be a real number"),
    (lambda X, y, s: s.learn_one(X[0], np.nan), ValueError, "y contains NaN or inf"),
    (lambda X, y, s: s.learn_one(X[0], y[0], -1.0), ValueError, "weight must be finite"),
    (lambda X, y, s: s.configure(tau=0.9), ValueError, "tau changed"),
    (lambda X, y, s: s.configure(loss="huber"), ValueError, "loss must be"),
    (lambda X, y, s: s.configure(bogus=1), TypeError, "unknown or fixed settings"),
    (lambda X, y, s: s.predict(X[:, :3]), ValueError, "X has 3 features"),
    (lambda X, y, s: s.predict_one(X[0, :3]), ValueError, "x must be a 1-D array of 6"),
])
def test_bad_arguments_are_refused_and_the_state_stays(data, call, exc, match):
    X, y, _ = data
    state = LinearSGD(6, tau=0.3, schedule=ConstantSchedule(0.01))
    state.learn(X[:100], y[:100])
    before = state_bytes(state)
    with pytest.raises(exc, match=match):
        call(X[100:], y[100:], state)
    assert state_bytes(state) == before


@pytest.mark.parametrize("one_row", [False, True])
def test_a_diverging_iterate_is_refused_and_the_state_stays(data, one_row):
    X, y, _ = data
    state = LinearSGD(6, loss="squared", schedule=ConstantSchedule(1e-3))
    state.learn(X[:100], y[:100])
    assert state.configure(schedule=ConstantSchedule(1e305))
    before = state_bytes(state)
    with pytest.raises(FloatingPointError, match="diverged"):
        if one_row:
            state.learn_one(X[100], 1e300)
        else:
            state.learn(X[100:], 1e300 * y[100:])
    assert state_bytes(state) == before


@pytest.mark.parametrize("bad", ["length", "negative", "nan"])
def test_bad_user_stepsizes_are_refused_and_the_state_stays(data, bad):
    X, y, _ = data

    class Bad:
        def stepsizes(self, start, count):
            eta = np.full(count, 0.01)
            return {"length": eta[1:], "negative": -eta,
                    "nan": np.where(np.arange(count) == count - 1, np.nan, eta)}[bad]

    state = LinearSGD(6, schedule=Bad())
    with pytest.raises(ValueError, match=r"schedule\.stepsizes\(0, 600\) must return 600"):
        state.learn(X, y)
    with pytest.raises(ValueError, match=r"schedule\.stepsizes\(0, 1\)"):
        state.learn_one(X[0], y[0])
    assert state.n_samples_seen == 0 and not state.coef.any()


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs POSIX signals (SIGUSR1)")
def test_an_interrupt_leaves_whole_rows_and_propagates(data):
    X, y, _ = data

    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        state = LinearSGD(6, tau=0.3)
        _k._interrupt_at(321, signal.SIGUSR1)
        with pytest.raises(Stop) as info:
            state.learn(X, y)
    finally:
        _k._interrupt_at(-1, 0)
        signal.signal(signal.SIGUSR1, old)
    assert state.n_samples_seen == 321
    assert any("interrupted after 321 of its 600 rows" in note
               for note in getattr(info.value, "__notes__", []))
    ref = LinearSGD(6, tau=0.3)
    ref.learn(X[:321], y[:321])
    assert state_bytes(state) == state_bytes(ref)
    state.learn(X[321:], y[321:])
    ref.learn(X[321:], y[321:])
    assert state_bytes(state) == state_bytes(ref)


# -- the typed boundary underneath -----------------------------------------------------

def loaded(edit, **kw):
    """from_state of a fitted learner's state with ``edit`` applied to it."""
    X, y, _ = make_linear_stream(100, 4, random_state=0)
    state = LinearSGD(4, schedule=StatisticalSchedule(n_warmup=20, window=32), **kw)
    state.learn(X, y)
    payload = state.to_state()
    edit(payload)
    return LinearSGD.from_state(payload)


def test_records_are_checked_by_layout_and_name():
    assert _k.STATE_DTYPE.names[:3] == ("t", "n_updates", "n_seen")
    assert _k.PARAMS_DTYPE.names[-3:] == ("drift_arm", "drift_clock", "window_auto")
    n = len(_k.STATE_FIELDS)
    assert _k.STATE_DTYPE.itemsize == 8 * n
    # a 3-double state was once written past its end: refused on load
    with pytest.raises(ValueError, match=rf"'records' must be a float64 array of shape "
                                         rf"\(1, {n}\)"):
        loaded(lambda st: st.__setitem__("records", np.zeros((1, 3))))
    # the right size and layout, other names: refused too
    with pytest.raises(ValueError, match="another layout"):
        loaded(lambda st: st.__setitem__("state_fields", [f"f{i}" for i in range(n)]))
    with pytest.raises(ValueError, match="'records' must be a float64 array"):
        loaded(lambda st: st.__setitem__("records", np.zeros((2, n))))
    # a counter out of its range, named
    with pytest.raises(ValueError, match="field 'n_updates' is 0.5"):
        loaded(lambda st: st["records"].view(_k.STATE_DTYPE)[0].__setitem__("n_updates", 0.5))


def test_array_lengths_are_checked_against_the_data():
    with pytest.raises(ValueError, match=r"'coef' must be a float64 array of shape \(1, 4\)"):
        loaded(lambda st: st.__setitem__("coef", np.zeros((1, 3))))
    # a window shorter than the residuals its record counts: refused, not read past
    with pytest.raises(ValueError, match=r"field 'fill' is \d+\.0, expected an integer in "
                                         r"\[0, 3\]"):
        loaded(lambda st: st.__setitem__("window", st["window"][:, :3]))
    with pytest.raises(ValueError, match="'sums' must be a float64 array"):
        loaded(lambda st: st.__setitem__("sums", st["sums"][:, 1:]), average=True,
               inference=True)
    with pytest.raises(ValueError, match="'pending_X' must be None in this mode"):
        loaded(lambda st: st.update(pending_X=np.zeros((2, 4)), pending_y=np.zeros(2)))
    X = np.ones((10, 4))
    with pytest.raises(ValueError, match="sample_weight must have 10 values"):
        LinearSGD(4).learn(X, X.sum(axis=1), np.ones(3))


def test_one_set_of_distinct_codes():
    codes = _common.CODES
    assert len(set(codes.values())) == len(codes)
    assert not hasattr(_k, "ERR_WINDOW") and not hasattr(_k, "ROW_SCALE")
    # a block call returns the rows it took; failures raise (no code leaks out)
    X = np.random.default_rng(0).standard_normal((10, 4))
    assert LinearSGD(4, schedule="constant").learn(X, X.sum(axis=1)) == 10


def test_state_arrays_are_read_only_copies_and_loaded_arrays_are_checked(data):
    """The state's arrays are snapshots: a caller writing to them changes
    nothing (they are copies), and the properties cannot be set; a loaded
    state's coef or window of another type, length or with NaN is refused
    naming it, not read as Cython's buffer mismatch or an AttributeError."""
    X, y, _ = data
    state = LinearSGD(6, schedule=ConstantSchedule(0.1))
    state.learn(X[:2], y[:2])
    before = state_bytes(state)
    state.coef[:] = 99.0
    state.iterate[0][:] = 99.0
    for name in ("coef", "intercept", "n_samples_seen"):
        with pytest.raises(AttributeError):
            setattr(state, name, 0.0)
    assert state_bytes(state) == before
    for bad in ([[0.0] * 4], np.zeros((1, 4), np.float32), np.zeros((1, 3)),
                np.full((1, 4), np.nan)):
        with pytest.raises(ValueError, match="'coef'"):
            loaded(lambda st: st.__setitem__("coef", bad))
    with pytest.raises(ValueError, match="'window'"):
        loaded(lambda st: st.__setitem__("window", st["window"].astype(np.float32)))
    with pytest.raises(ValueError, match="'window' holds NaN"):
        loaded(lambda st: st["window"].__setitem__((0, 2), np.nan))
