"""The estimator contract of DESIGN.md ("Standards every part meets") where it
is particular to the online regressors, for both estimators and every mode:
bad parameters named and the state unchanged, accepted input types, no
aliasing of the caller's arrays, pickling with every kind of schedule, nested
get/set_params, fit resetting, the prequential loss and divergence handling.
The stream contract every estimator shares (bad input, chunking, pickling,
interrupts, threads, float32, seeds) is streamfit.utils.estimator_checks, run
on every configuration in tests/test_estimator_checks.py."""
import math
import pickle

import numpy as np
import pytest

from streamfit import OnlineQuantileRegressor
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning
from streamfit.schedules import ConstantSchedule, InverseTimeSchedule, StatisticalSchedule

from streamfit.utils.estimator_checks import check_pickle_resume

from .._registry import make as make_case
from ._cases import RTOL, SqrtSchedule, assert_same_results, state_bytes

TAU = 0.3

def stat_schedule(**kw):
    # a short warm-up and window, so that 400 rows reach the later phases
    return StatisticalSchedule(n_warmup=20, window=32, **kw)


# the registry's configurations (tests/_registry.py) of one estimator each
CASES = ("least-squares", "quantile-batch", "quantile-single", "quantile-storage")


@pytest.fixture(params=CASES)
def case(request):
    return request.param


@pytest.fixture
def make(case):
    return lambda **kw: make_case(case, **kw)


# -- helpers -------------------------------------------------------------------

_UNSET = "<unset>"


def snapshot(est):
    """Every attribute ending in "_" (learnt state and the public views of
    it), copied, plus the whole state object's state (every section, pending
    and stored rows included) and the pickled instance attributes ending in
    "_"."""
    attrs = {}
    for name in dir(est):
        if name.endswith("_") and not name.startswith("__"):
            try:
                value = getattr(est, name)
            except AttributeError:
                value = _UNSET
            attrs[name] = value.copy() if isinstance(value, np.ndarray) else value
    raw = pickle.dumps({k: v for k, v in vars(est).items() if k.endswith("_")})
    if "_state" in vars(est):
        raw += state_bytes(est)
    return attrs, raw


def assert_unchanged(est, before):
    attrs_before, raw_before = before
    attrs_after, raw_after = snapshot(est)
    assert attrs_before.keys() == attrs_after.keys()
    for name, old in attrs_before.items():
        new = attrs_after[name]
        if isinstance(old, np.ndarray):
            assert isinstance(new, np.ndarray) and old.shape == new.shape, name
            assert old.dtype == new.dtype, name
            # bytes: a NaN that was already there is no change (also in records)
            assert old.tobytes() == new.tobytes(), name
        else:
            assert old == new, name
    assert raw_before == raw_after


def results(est):
    return est.coef_, est.intercept_, est.cumulative_loss_, est.n_updates_


def prefit(est, X, y):
    # Two calls: state exists, batch rows are pending and stored data have
    # spare room, which the 20-row calls of the rejection tests fit into.
    return est.partial_fit(X[:60], y[:60]).partial_fit(X[60:100], y[60:100])


def with_value(a, value, where=7):
    a = a.copy()
    a.flat[where] = value
    return a


# -- bad parameters: a clear error naming the parameter, state unchanged --------

# name: (params, exception, match, quantile only)
BAD_PARAMS = {
    "tau-0": ({"tau": 0}, ValueError, "tau", True),
    "tau-1": ({"tau": 1}, ValueError, "tau", True),
    "tau-negative": ({"tau": -0.1}, ValueError, "tau", True),
    "tau-1.5": ({"tau": 1.5}, ValueError, "tau", True),
    "tau-nan": ({"tau": float("nan")}, ValueError, "tau", True),
    "tau-str": ({"tau": "a"}, TypeError, "tau", True),
    "batch_size-0": ({"batch_size": 0}, ValueError, "batch_size", True),
    "batch_size-negative": ({"batch_size": -1}, ValueError, "batch_size", True),
    "batch_size-float": ({"batch_size": 2.5}, TypeError, "batch_size", True),
    "mode": ({"mode": "minibatch"}, ValueError, "mode", True),
    "average-int": ({"average": 1}, TypeError, "average", False),
    "fit_intercept-str": ({"fit_intercept": "yes"}, TypeError, "fit_intercept", False),
    "schedule-name": ({"schedule": "cosine"}, ValueError, "schedule", False),
    "schedule-type": ({"schedule": 3}, TypeError, "schedule", False),
    "statistical-Ca": ({"schedule": StatisticalSchedule(Ca=-1)}, ValueError,
                       r"schedule\.Ca", False),
    "statistical-n_warmup": ({"schedule": StatisticalSchedule(n_warmup=1)}, ValueError,
                             r"schedule\.n_warmup", False),
    "statistical-avg_power": ({"schedule": StatisticalSchedule(avg_power=0.4)}, ValueError,
                              r"schedule\.avg_power", False),
    "statistical-window-float": ({"schedule": StatisticalSchedule(window=64.5)}, TypeError,
                                 r"schedule\.window", False),
    "constant-0": ({"schedule": ConstantSchedule(0)}, ValueError, r"schedule\.eta", False),
    "constant-nan": ({"schedule": ConstantSchedule(float("nan"))}, ValueError,
                     r"schedule\.eta", False),
    "inverse_time-negative": ({"schedule": InverseTimeSchedule(-1)}, ValueError,
                              r"schedule\.c", False),
    "user-length": ({"schedule": SqrtSchedule(bad="length")}, ValueError, "stepsizes", False),
    "user-negative": ({"schedule": SqrtSchedule(bad="negative")}, ValueError, "stepsizes",
                      False),
    "user-nan": ({"schedule": SqrtSchedule(bad="nan")}, ValueError, "stepsizes", False),
}


@pytest.mark.parametrize("method", ["partial_fit", "fit"])
@pytest.mark.parametrize("case, bad", [
    (case, bad) for case in sorted(CASES) for bad in sorted(BAD_PARAMS)
    if not (BAD_PARAMS[bad][3] and case == "least-squares")])
def test_bad_params_rejected_and_state_unchanged(case, make, stream, bad, method):
    params, exc, match, _ = BAD_PARAMS[bad]
    X, y = stream
    est = prefit(make(), X, y)
    before = snapshot(est)
    est.set_params(**params)
    with pytest.raises(exc, match=match):
        getattr(est, method)(X[100:120], y[100:120])
    assert_unchanged(est, before)


def test_predict_before_fit_raises(make, stream):
    X, _ = stream
    est = make()
    with pytest.raises(AttributeError, match="fit"):
        est.predict(X)
    for name in ("coef_", "intercept_", "cumulative_loss_", "n_updates_", "n_samples_seen_"):
        with pytest.raises(AttributeError, match="fit"):
            getattr(est, name)


def test_predict_checks_its_input(make, stream):
    X, y = stream
    est = make().fit(X, y)
    before = snapshot(est)
    with pytest.raises(ValueError, match="X has 4 features"):
        est.predict(X[:, :-1])
    with pytest.raises(ValueError, match="X contains"):
        est.predict(with_value(X, np.nan))
    with pytest.raises(ValueError, match="X must be 2-dimensional"):
        est.predict(X[0])
    assert_unchanged(est, before)


def test_partial_fit_and_fit_return_self(make, stream):
    X, y = stream
    est = make()
    assert est.partial_fit(X[:50], y[:50]) is est
    assert est.fit(X, y) is est


# -- accepted input types give the float64 C-contiguous result -----------------

def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


# name: (X, y) -> (X_in, y_in, X_ref, y_ref, rtol); float32 is check_float32_input's
VARIANTS = {
    "read-only": lambda X, y: (_readonly(X), _readonly(y), X, y, 0.0),
    "fortran": lambda X, y: (np.asfortranarray(X), y, X, y, 0.0),
    "strided": lambda X, y: (np.repeat(X, 2, axis=0)[::2], np.repeat(y, 2)[::2], X, y, 0.0),
    "integer-y": lambda X, y: (X, np.round(y).astype(np.int64), X, np.round(y), 0.0),
    "lists": lambda X, y: (X.tolist(), y.tolist(), X, y, 0.0),
    "y-column": lambda X, y: (X, y[:, None], X, y, 0.0),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.DataConversionWarning")
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_input_types_match_float64(make, stream, variant):
    X_in, y_in, X_ref, y_ref, rtol = VARIANTS[variant](*stream)
    if variant == "strided":
        assert not X_in.flags.c_contiguous and not y_in.flags.c_contiguous
    ref = make().fit(X_ref, y_ref)
    assert_same_results(make().fit(X_in, y_in), ref, rtol)
    # partial_fit too, with rows left pending in batch mode
    X_part, y_part = X_in[:150], y_in[:150]
    ref_part = make().partial_fit(X_ref[:150], y_ref[:150])
    assert_same_results(make().partial_fit(X_part, y_part), ref_part, rtol)
    if rtol == 0.0:
        np.testing.assert_array_equal(ref.predict(X_in[:20]), ref.predict(X_ref[:20]))
    else:
        np.testing.assert_allclose(ref.predict(X_in[:20]), ref.predict(X_ref[:20]), rtol=rtol)


def test_column_y_warns_as_scikit_learn_does(make, stream):
    X, y = stream
    for method in ("fit", "partial_fit"):
        with pytest.warns(DataConversionWarning, match="column-vector y"):
            getattr(make(), method)(X, y[:, None])


def test_state_does_not_alias_input(make, stream):
    # A stream is often read into one reused buffer: the estimator must own
    # copies of whatever it keeps (pending batch rows, stored data).
    X, y = stream
    bx, by = X[:150].copy(), y[:150].copy()
    est = make().partial_fit(bx, by)
    before = state_bytes(est)
    bx[:] = X[150:300]
    by[:] = y[150:300]
    # the whole state (pending batch rows and stored data included) is as it
    # was: nothing of it lives in the caller's buffers
    assert state_bytes(est) == before
    est.partial_fit(bx, by)
    ref = make().partial_fit(X[:150], y[:150]).partial_fit(X[150:300], y[150:300])
    assert_same_results(est, ref)


# -- pickling mid-stream --------------------------------------------------------

@pytest.mark.parametrize("schedule", ["constant", "user"])
def test_pickle_mid_stream_with_other_schedules(case, schedule):
    # the registry's configurations use the statistical schedule
    kw = {"constant": dict(schedule=ConstantSchedule(0.05)),
          "user": dict(schedule=SqrtSchedule(), average=True)}[schedule]
    check_pickle_resume(make_case(case, **kw))


# -- parameters -------------------------------------------------------------------

def test_get_set_params_clone(make, stream):
    X, y = stream
    est = make(schedule=StatisticalSchedule(Ca=5.0), average=True)
    params = est.get_params()
    assert params["schedule__Ca"] == 5.0 and params["average"] is True
    shallow = est.get_params(deep=False)
    assert not any("__" in key for key in shallow)
    assert set(shallow) <= set(params)

    # round trip through the constructor and through set_params
    twin = type(est)(**shallow)
    assert twin.get_params() == params
    assert est.set_params(**params) is est
    assert est.get_params() == params

    # nested parameters reach the schedule
    est.set_params(schedule__Ca=7.0, average=False)
    assert est.schedule.Ca == 7.0 and est.get_params()["schedule__Ca"] == 7.0
    with pytest.raises(ValueError, match="bogus"):
        est.set_params(bogus=1)

    # clone: same parameters, unfitted, and a schedule of its own
    est.fit(X, y)
    copy = clone(est)
    assert not hasattr(copy, "n_features_in_")
    assert copy.schedule is not est.schedule
    assert copy.schedule.get_params() == est.schedule.get_params()
    assert {k: v for k, v in copy.get_params().items() if k != "schedule"} == \
        {k: v for k, v in est.get_params().items() if k != "schedule"}
    assert_same_results(copy.fit(X, y), est)
    copy.set_params(schedule__Ca=9.0)
    assert est.schedule.Ca == 7.0

    # a nested change has the same effect as constructing with it
    fresh = make(schedule=StatisticalSchedule(Ca=9.0)).fit(X, y)
    assert_same_results(copy.fit(X, y), fresh)


def test_schedule_get_set_params():
    sched = StatisticalSchedule(Ca=3.0, window=64)
    assert sched.get_params()["Ca"] == 3.0
    assert sched.set_params(Cb=4.0) is sched and sched.Cb == 4.0
    assert clone(sched).get_params() == sched.get_params()


# -- fit starts afresh -------------------------------------------------------------

def test_fit_twice_gives_identical_results(make, stream):
    X, y = stream
    est = make().fit(X, y)
    first = results(est)
    coef = first[0].copy()
    est.fit(X, y)
    np.testing.assert_array_equal(est.coef_, coef)
    assert results(est)[1:] == first[1:]
    assert_same_results(est, make().fit(X, y))


def test_fit_after_partial_fit_with_other_n_features(make, stream):
    X, y = stream
    est = make().partial_fit(X[:100, :3], y[:100])
    est.fit(X, y)
    assert est.n_features_in_ == 5
    assert_same_results(est, make().fit(X, y))


# -- prequential loss ------------------------------------------------------------------

def check_loss(r, tau):
    return r * (tau - (r < 0))


def test_cumulative_loss_is_prequential_manual_loop(stream):
    # single mode, constant stepsize: score each sample, then update on it
    X, y = stream
    eta = 0.05
    w, b, loss = np.zeros(X.shape[1]), 0.0, 0.0
    for x, target in zip(X, y):
        r = target - (x @ w + b)
        loss += check_loss(r, TAU)
        g = float(r <= 0) - TAU
        w -= eta * g * x
        b -= eta * g
    est = OnlineQuantileRegressor(tau=TAU, schedule=ConstantSchedule(eta)).fit(X, y)
    rtol = RTOL[np.float64]
    np.testing.assert_allclose(est.cumulative_loss_, loss, rtol=rtol)
    np.testing.assert_allclose(est.coef_, w, rtol=rtol)
    np.testing.assert_allclose(est.intercept_, b, rtol=rtol)


@pytest.mark.parametrize("schedule", ["statistical", "constant"])
def test_cumulative_loss_is_prequential_black_box(case, make, stream, schedule):
    # One update per call (1 row in single mode, the whole call otherwise): the
    # loss added by a call is that of its rows under the coefficients before it.
    X, y = stream
    kw = dict(schedule=stat_schedule() if schedule == "statistical" else ConstantSchedule(0.05))
    if case == "quantile-batch":
        kw["batch_size"] = None
    est = make(**kw)
    step = 1 if case in ("quantile-single", "least-squares") else 25
    expected = 0.0
    for a in range(0, 300, step):
        Xa, ya = X[a:a + step], y[a:a + step]
        r = ya - (est.predict(Xa) if a else 0.0)
        expected += np.sum(0.5 * r * r if case == "least-squares" else check_loss(r, TAU))
        est.partial_fit(Xa, ya)
    np.testing.assert_allclose(est.cumulative_loss_, expected, rtol=RTOL[np.float64])


# -- divergence ----------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["partial_fit", "fit"])
def test_diverging_stepsize_raises_and_state_unchanged(make, stream, diverging_stream, method):
    X, y = stream
    est = prefit(make(), X, y)
    before = snapshot(est)
    est.set_params(schedule=ConstantSchedule(1e305))
    Xd, yd = diverging_stream
    with pytest.raises(FloatingPointError, match="diverged"):
        getattr(est, method)(Xd, yd)
    assert_unchanged(est, before)


def test_refused_call_leaves_the_old_parameters_in_force(make, stream, diverging_stream, case):
    # A call refused under new parameters (a diverging schedule here) leaves
    # the estimator as before it, its parameters' effect included: with the
    # old parameters set back, the stream goes on as if the call never was
    # (the statistical schedule does not warm up afresh).
    X, y = stream
    est, ref = prefit(make(), X, y), prefit(make(), X, y)
    old = est.get_params(deep=False)["schedule"]
    est.set_params(schedule=ConstantSchedule(1e305))
    with pytest.raises(FloatingPointError, match="diverged"):
        est.partial_fit(*diverging_stream)
    est.set_params(schedule=old)
    assert_same_results(est.partial_fit(X[100:], y[100:]), ref.partial_fit(X[100:], y[100:]))


def test_parameters_set_before_pickling_take_effect_after_unpickling(make, stream):
    # An unpickled state does not know what it was configured from: its first
    # call configures it unless its settings are the parameters already (the
    # usual case, a Dask task's, skips configuring); parameters set before
    # pickling must still take effect, as without the pickle.
    X, y = stream
    est, ref = prefit(make(), X, y), prefit(make(), X, y)
    for e in (est, ref):
        e.set_params(average=not e.average, schedule="constant")
    est = pickle.loads(pickle.dumps(est))
    assert_same_results(est.partial_fit(X[100:], y[100:]), ref.partial_fit(X[100:], y[100:]))
    # and unpickled under its own parameters, it resumes as the original
    again = pickle.loads(pickle.dumps(ref))
    assert_same_results(again.partial_fit(X[:50], y[:50]), ref.partial_fit(X[:50], y[:50]))


def test_diverging_from_scratch_leaves_estimator_unfitted(make, diverging_stream):
    est = make(schedule=ConstantSchedule(1e305))
    with pytest.raises(FloatingPointError, match="diverged"):
        est.partial_fit(*diverging_stream)
    assert not hasattr(est, "n_features_in_")


def test_finite_results(make, stream):
    # sanity: the default statistical schedule gives finite, fitted state
    X, y = stream
    est = make(schedule="statistical").fit(X, y)
    assert np.isfinite(est.coef_).all() and math.isfinite(est.intercept_)
    assert math.isfinite(est.cumulative_loss_) and est.n_samples_seen_ == 400


def test_window_shrunk_mid_stream_with_larger_batches_is_safe():
    # the residual window keeps what it holds when `window` is lowered; the
    # buffer must still take the next (larger) block (once a heap overflow)
    from streamfit.schedules import StatisticalSchedule
    from streamfit.simulate import make_linear_stream
    X, y, beta = make_linear_stream(12_000, 5, random_state=0)
    est = OnlineQuantileRegressor(mode="batch", batch_size=10,
                                  schedule=StatisticalSchedule(window=4000))
    est.partial_fit(X[:3990], y[:3990])
    est.set_params(schedule__window=16, batch_size=8000)
    est.partial_fit(X[3990:11990], y[3990:11990])
    assert np.isfinite(est.coef_).all() and est.n_samples_seen_ == 11990


@pytest.mark.parametrize("mode", ["single", "batch", "storage"])
def test_features_too_large_for_float64_are_rejected(mode):
    # ||x||^2 overflows: the statistical schedule's scale is inf, which would
    # silently freeze learning; it is reported instead, state unchanged
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 4)) * 1e160
    y = rng.standard_normal(400)
    est = OnlineQuantileRegressor(mode=mode, batch_size=100)
    with pytest.raises(ValueError, match="X is too large"):
        est.fit(X, y)
    assert not hasattr(est, "n_features_in_")
