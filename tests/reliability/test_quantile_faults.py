"""Regression tests of the online quantile regression family, one per failure
mode: interrupts (a real SIGINT in a subprocess, a SIGALRM timer
whose handler raises, a signal raised at an exact row), two threads on one
estimator, mid-stream parameter changes, extreme scales, a stuck sensor,
loading with mmap_mode="r", and the small things (empty calls, huge buffers,
complex stepsizes, BLAS thread counts).

Each test says what happened before the fix ("before: ...")."""
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import joblib
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from streamfit import (OnlineLeastSquaresRegressor, OnlineQuantileRegressor,
                       offline_quantile_regression)
from streamfit._kernels import _quantile as _k
from streamfit.exceptions import WarmupWarning
from streamfit.schedules import ConstantSchedule, StatisticalSchedule
from streamfit.simulate import make_linear_stream

from ._quantile_cases import assert_same_state, learnt, state_dict

MODES = ["single", "batch", "storage"]
POSIX_SIGNALS = pytest.mark.skipif(not hasattr(signal, "setitimer"),
                                   reason="needs POSIX signals (setitimer, SIGUSR1)")


def make(mode, **kw):
    base = dict(mode=mode, batch_size=4 if mode == "batch" else 500)
    return OnlineQuantileRegressor(**{**base, **kw})


def stream(n, d=8, seed=0, tau=0.5):
    X, y, _ = make_linear_stream(n, d, tau=tau, random_state=seed)
    return X, y


# -- interrupts ---------------------------------------------------------------------

CHILD = textwrap.dedent(r'''
    import json, signal, sys, time
    import numpy as np
    from threadpoolctl import threadpool_limits
    from streamfit import OnlineQuantileRegressor

    mode = sys.argv[1]
    rng = np.random.default_rng(0)
    n, d = 1_000_000, 8
    X = rng.standard_normal((n, d))
    y = X @ np.arange(1.0, d + 1) + rng.standard_normal(n)
    # single, batch: the whole stream, fed again and again; storage: a large
    # first call, then small ones (each step runs over all data stored, and
    # the NumPy work of appending a call's rows stays small beside it)
    if mode == "storage":
        calls = [(0, 400_000)] + [(a, a + 5_000) for a in range(400_000, n, 5_000)]
    else:
        calls = [(0, n)] * 200

    def make():
        return OnlineQuantileRegressor(mode=mode, batch_size=4)

    def seen(est):
        return est.n_samples_seen_ if est.__sklearn_is_fitted__() else 0

    est, fed, out = make(), [], {"missed": 0}
    todo = list(calls)
    # A SIGINT landing in this loop's own bookkeeping, outside the try, would
    # kill the child with nothing printed: only while a call runs does it
    # raise; elsewhere it is reported as missed, and the parent sends another.
    armed = [False]

    def on_sigint(signum, frame):
        if armed[0]:
            raise KeyboardInterrupt
        out["missed"] += 1
        print("missed", flush=True)

    signal.signal(signal.SIGINT, on_sigint)
    with threadpool_limits(1):
        print("ready", flush=True)
        while todo:
            a, b = todo.pop(0)
            before = seen(est)
            try:
                armed[0] = True
                est.partial_fit(X[a:b], y[a:b])
                armed[0] = False
                fed.append((a, b))
                continue
            except KeyboardInterrupt as exc:
                armed[0] = False
                caught = time.monotonic()
                in_kernel = any("was interrupted after" in note
                                for note in getattr(exc, "__notes__", []))
            taken = seen(est) - before
            if taken:
                fed.append((a, a + taken))
            if not in_kernel:
                # it landed in Python code between two kernel calls: the state
                # is consistent; finish the call and wait for the next signal
                out["missed"] += 1
                print("missed", flush=True)
                todo.insert(0, (a + taken, b))
                continue
            out.update(caught=caught, taken=int(taken), n=b - a)
            # continue the stream from the next row; an uninterrupted run split
            # at that row must end in the same state
            est.partial_fit(X[a + taken:b], y[a + taken:b])
            ref = make()
            for a0, b0 in fed + [(a + taken, b)]:
                ref.partial_fit(X[a0:b0], y[a0:b0])
            out["same"] = bool(np.array_equal(est.coef_, ref.coef_)
                               and est.intercept_ == ref.intercept_
                               and est.n_samples_seen_ == ref.n_samples_seen_
                               and est.n_updates_ == ref.n_updates_
                               and est.cumulative_loss_ == ref.cumulative_loss_
                               and est.schedule_state_ == ref.schedule_state_)
            break
    print(json.dumps(out), flush=True)
''')


def run_interrupted_child(mode):
    """Start the child, and send it SIGINTs until one lands inside a kernel
    (the child says "missed" for those that land between two calls)."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    try:
        for line in proc.stdout:            # an editable install may print its rebuild
            if line.strip() == "ready":
                break
        time.sleep(0.3)
        for _ in range(8):
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            line = proc.stdout.readline().strip()
            if line != "missed":
                break
            time.sleep(0.2)
        rest = proc.communicate(timeout=120)[0]
    finally:
        proc.kill()
    result = json.loads((line + "\n" + rest).strip().splitlines()[-1])
    result["latency"] = result.get("caught", float("inf")) - sent
    return result


@POSIX_SIGNALS
@pytest.mark.parametrize("mode", MODES)
def test_sigint_stops_a_long_call_between_rows(mode):
    """A real Ctrl-C (SIGINT from another process) while a kernel runs.
    Before: no kernel polled for signals; the interrupt landed when the call
    ended (0.4-0.7 s per 4M-row call here, 6-72 s on the issue's streams)."""
    result = run_interrupted_child(mode)
    assert result["same"], result           # continuing equals the split run
    assert result["latency"] < 0.5, result
    # a whole number of rows (batches of 4) was taken (all of them when the
    # signal came after the call's last step)
    assert 0 <= result["taken"] <= result["n"]
    if mode == "batch":
        assert result["taken"] % 4 == 0
    if mode == "storage":      # one step over all data: all or nothing
        assert result["taken"] in (0, result["n"])


@POSIX_SIGNALS
@pytest.mark.parametrize("mode", MODES)
def test_timer_handler_exception_stops_the_kernel(mode):
    """A SIGALRM handler that raises TimeoutError (a time limit on a fit): the
    kernel stops between rows and the estimator holds the rows before."""
    X, y = stream(200_000)

    def handler(signum, frame):
        raise TimeoutError("time is up")

    old = signal.signal(signal.SIGALRM, handler)
    est = make(mode)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.02)
        with pytest.raises(TimeoutError, match="time is up") as info:
            for _ in range(1000):
                est.partial_fit(X, y)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    # What was learnt, from the estimator alone: the handler can also raise in
    # the loop's own bytecodes, between two calls, where a count kept here
    # would be one call off
    calls, taken = divmod(est.n_samples_seen_ if est.__sklearn_is_fitted__() else 0, len(y))
    notes = getattr(info.value, "__notes__", [])
    # a signal after the kernel's last row, before the call returned, reports
    # every row of that call: the state is the same as at the next call's start
    said = [taken] + ([len(y)] if calls and not taken else [])
    assert not notes or any(f"interrupted after {k} of its {len(y)} rows" in notes[0]
                            for k in said)
    ref = make(mode)
    for _ in range(calls):
        ref.partial_fit(X, y)
    if taken:
        ref.partial_fit(X[:taken], y[:taken])
    est.partial_fit(X[taken:], y[taken:])
    ref.partial_fit(X[taken:], y[taken:])
    assert_same_state(est, ref)


class Stop(Exception):
    pass


@pytest.fixture
def raise_at():
    """raise_at(polls): a real SIGUSR1 at the kernel's poll number `polls`,
    whose handler raises Stop (the kernel polls before every row then)."""
    def handler(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGUSR1, handler)
    yield lambda polls: _k._interrupt_at(polls, signal.SIGUSR1)
    _k._interrupt_at(-1, 0)
    signal.signal(signal.SIGUSR1, old)


@POSIX_SIGNALS
@pytest.mark.parametrize("mode", MODES)
# 1499: the poll after the call's last row (a signal there reports every row taken)
@pytest.mark.parametrize("at", [0, 1, 37, 333, 1499])
def test_interrupt_at_an_exact_row_keeps_whole_rows(mode, at, raise_at):
    """Stopped at an exact poll: the state is that of the rows before it
    (single: `at` rows; batch: whole batches; storage: the call is not taken),
    pending batch rows and stored data included, and continuing gives the
    uninterrupted run. Before: FPL/QR states mixed counts and contents."""
    X, y = stream(3000)
    est = make(mode, average=True).partial_fit(X[:1001], y[:1001])   # rows pending
    raise_at(at)
    with pytest.raises(Stop):
        est.partial_fit(X[1001:2500], y[1001:2500])
    taken = est.n_samples_seen_ - 1001
    expected = {"single": at, "batch": max(0, (at // 4) * 4 - 1), "storage": 0}[mode]
    assert taken == expected
    ref = make(mode, average=True).partial_fit(X[:1001], y[:1001])
    ref.partial_fit(X[1001:1001 + taken], y[1001:1001 + taken])
    assert_same_state(est, ref)
    est.partial_fit(X[1001 + taken:], y[1001 + taken:])
    ref.partial_fit(X[1001 + taken:], y[1001 + taken:])
    assert_same_state(est, ref)


# Findings for the lead (src/csrc), strict xfails until fixed on main:
# fit() publishes the fresh state on an interrupt only if the interrupted
# span took rows (quantile/_sgd.py: `new.n_samples_seen > seen`); storage
# mode takes none of an interrupted block, so an interrupt in fit's second
# block leaves the previous fit (while the note says the estimator holds the
# state after the rows before). Comparing with 0 instead would also publish a
# partial fit on a *failure* in a later block: the fix needs the state object
# to tell an interrupt from a failure.
XFAIL_STORAGE_FIT_INTERRUPT = pytest.mark.xfail(
    strict=True, raises=AssertionError,
    reason="lead: an interrupt in a later block of fit (storage) keeps the previous fit, "
           "not the fresh fit of the blocks before")


@POSIX_SIGNALS
@pytest.mark.parametrize("mode", ["single", "batch",
                                  pytest.param("storage", marks=XFAIL_STORAGE_FIT_INTERRUPT)])
def test_interrupted_fit_holds_the_fresh_fit_of_the_rows_before(mode, raise_at):
    X, y = stream(3000)
    old = make(mode).fit(X[:500] * 2, y[:500])          # an older fit, to be replaced
    est = pickle.loads(pickle.dumps(old))
    # storage: the first call (500 rows) polls 500 + 30 * 500 times (its
    # warm-up's power iteration): 16,000 lands in the second call
    for at in (40, 1500 if mode != "storage" else 16_000):
        raise_at(at)
        with pytest.raises(Stop):
            est.fit(X, y)
        taken = est.n_samples_seen_
        if mode == "storage" and at == 40:
            # the first call's step was interrupted: no row taken, the old fit stays
            assert_same_state(est, old)
        else:
            assert 0 < taken < len(y)
            with warnings.catch_warnings():
                # 40 rows end inside the default warm-up: the reference fit
                # says so (the interrupted one raised before it could)
                warnings.simplefilter("ignore", WarmupWarning)
                ref = make(mode).fit(X[:taken], y[:taken])
            assert_same_state(est, ref)
        est = pickle.loads(pickle.dumps(old))


@POSIX_SIGNALS
@pytest.mark.parametrize("mode", MODES)
def test_first_call_interrupted_before_any_row_leaves_it_unfitted(mode, raise_at):
    X, y = stream(1000)
    est = make(mode)
    raise_at(0)
    with pytest.raises(Stop):
        est.partial_fit(X, y)
    assert not est.__sklearn_is_fitted__() and not hasattr(est, "n_features_in_")


@POSIX_SIGNALS
def test_a_handler_that_does_not_raise_lets_the_call_finish(raise_at):
    X, y = stream(2000)
    seen = []
    old = signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))
    try:
        _k._interrupt_at(100, signal.SIGUSR2)
        est = make("single").partial_fit(X, y)
    finally:
        signal.signal(signal.SIGUSR2, old)
    assert seen == [signal.SIGUSR2]
    assert_same_state(est, make("single").partial_fit(X, y))


# -- threads --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_two_threads_feeding_one_estimator_lose_nothing(mode):
    """Before: two 1M-row partial_fit calls from two threads gave
    n_samples_seen_ = 1,000,000 (one update lost)."""
    X0, y0 = stream(1000, d=5, seed=1)
    XA, yA = stream(1_000_000, d=5, seed=2)
    XB, yB = stream(1_000_000, d=5, seed=3)
    est = make(mode).partial_fit(X0, y0)
    threads = [threading.Thread(target=est.partial_fit, args=args)
               for args in ((XA, yA), (XB, yB))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert est.n_samples_seen_ == 2_001_000
    orders = [make(mode).partial_fit(X0, y0).partial_fit(*first).partial_fit(*second)
              for first, second in (((XA, yA), (XB, yB)), ((XB, yB), (XA, yA)))]
    matches = []
    for ref in orders:
        try:
            assert_same_state(est, ref)
            matches.append(True)
        except AssertionError:
            matches.append(False)
    assert any(matches), "the state is neither sequential order"


@pytest.mark.parametrize("mode", MODES)
def test_two_threads_on_a_fresh_estimator_initialise_it_once(mode):
    XA, yA = stream(200_000, d=5, seed=2)
    XB, yB = stream(200_000, d=5, seed=3)
    est = make(mode)
    gate = threading.Barrier(2)

    def feed(X, y):
        gate.wait()
        est.partial_fit(X, y)

    threads = [threading.Thread(target=feed, args=args) for args in ((XA, yA), (XB, yB))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert est.n_samples_seen_ == 400_000
    refs = [make(mode).partial_fit(XA, yA).partial_fit(XB, yB),
            make(mode).partial_fit(XB, yB).partial_fit(XA, yA)]
    assert any(learnt(est)["coef"] == learnt(ref)["coef"] and
               est.n_updates_ == ref.n_updates_ for ref in refs)


def test_pickling_while_another_thread_fits_gives_whole_calls():
    X, y = stream(20_000, d=5)
    est = make("single").partial_fit(X[:1000], y[:1000])
    done = threading.Event()

    def feed():
        for _ in range(30):
            est.partial_fit(X, y)
        done.set()

    t = threading.Thread(target=feed)
    t.start()
    snapshots = []
    while not done.is_set():
        snapshots.append(pickle.loads(pickle.dumps(est)))
    t.join()
    for snap in snapshots:
        calls, rest = divmod(snap.n_samples_seen_ - 1000, len(y))
        assert rest == 0            # between two calls, never inside one
        assert snap.n_updates_ == snap.n_samples_seen_ - 50      # warm-up takes 50


# -- mid-stream parameter changes ----------------------------------------------------------

def test_lowering_batch_size_while_rows_wait_keeps_every_row():
    """Before: the waiting rows were dropped or misordered, or the call raised
    'internal error: residual window too small'."""
    X, y = stream(1000)
    est = make("batch", batch_size=100, schedule=ConstantSchedule(0.01))
    est.partial_fit(X[:150], y[:150])          # one batch, 50 rows wait
    est.set_params(batch_size=10)
    est.partial_fit(X[150:165], y[150:165])     # the 50 go first: 6 batches, 5 wait
    assert est.n_samples_seen_ == 165 and est.n_updates_ == 1 + 6
    ref = make("batch", batch_size=100, schedule=ConstantSchedule(0.01))
    ref.partial_fit(X[:100], y[:100]).set_params(batch_size=10)
    ref.partial_fit(X[100:165], y[100:165])
    assert_same_state(est, ref)
    assert state_dict(est)["pending_X"].shape[0] == 5


@pytest.mark.parametrize("new", [1, 3, 7, 64, 500])
def test_batch_size_changes_with_rows_waiting_under_the_statistical_schedule(new):
    X, y = stream(6000)
    est = make("batch", batch_size=37).partial_fit(X[:1000], y[:1000])   # 1 row waits
    est.set_params(batch_size=new)
    est.partial_fit(X[1000:1003], y[1000:1003])
    est.partial_fit(X[1003:6000], y[1003:6000])
    assert est.n_samples_seen_ == 6000
    assert est.n_updates_ > 0 and np.isfinite(est.coef_).all()


@pytest.mark.parametrize("name, value", [("mode", "storage"), ("mode", "single"),
                                         ("tau", 0.7), ("fit_intercept", False)])
def test_changing_what_the_state_belongs_to_is_refused(name, value):
    """Before: a mode change was not checked and later raised FloatingPointError."""
    X, y = stream(1000)
    est = make("batch", batch_size=16).partial_fit(X[:500], y[:500])
    before = learnt(est)
    est.set_params(**{name: value})
    with pytest.raises(ValueError, match=f"{name} changed from"):
        est.partial_fit(X[500:], y[500:])
    assert learnt(est) == before
    est.fit(X, y)           # fit starts afresh with the new value
    assert est.n_samples_seen_ == 1000


def n_avg(est):
    return int(state_dict(est)["records"].view(_k.STATE_DTYPE)["n_avg"][0, 0])


def test_average_switched_mid_stream_takes_effect_at_the_next_call():
    X, y = stream(4000)
    est = make("single", schedule=ConstantSchedule(0.01)).partial_fit(X[:2000], y[:2000])
    est.set_params(average=True)
    iterate = est._state.iterate[0]
    np.testing.assert_array_equal(est.coef_, iterate)          # not before the next call
    est.partial_fit(X[2000:3000], y[2000:3000])
    assert n_avg(est) == 1000                                   # restarted at the call
    assert not np.array_equal(est.coef_, est._state.iterate[0])
    est.set_params(average=False).partial_fit(X[3000:], y[3000:])
    np.testing.assert_array_equal(est.coef_, est._state.iterate[0])


def test_a_new_schedule_takes_over_mid_stream():
    X, y = stream(6000)
    est = make("single", schedule=ConstantSchedule(0.001)).partial_fit(X[:1000], y[:1000])
    est.set_params(schedule=StatisticalSchedule())
    est.partial_fit(X[1000:1020], y[1000:1020])
    assert est.schedule_state_["phase"] == 0       # warms up afresh from the iterate
    est.partial_fit(X[1020:], y[1020:])
    assert est.schedule_state_["phase"] >= 1
    # new constants of the current schedule act at the next call
    last = est.schedule_state_["stepsize"]
    est.set_params(schedule__Ca=40.0)
    est.partial_fit(X[:200], y[:200])
    assert est.schedule_state_["stepsize"] > 1.5 * last


# -- extreme scales ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scale", [1e154, 1e170, 1e200, 1e300])
@pytest.mark.parametrize("when", ["fresh", "after warm-up"])
def test_rows_too_large_for_float64_are_refused_naming_the_row(mode, scale, when):
    """Before: after the warm-up, batch/storage accepted rows of scale
    1e154-1e200 and returned |coef| ~ 1e199; single mode blamed the stepsizes."""
    X, y = stream(2000)
    est = make(mode)
    if when == "after warm-up":
        est.partial_fit(X[:1000], y[:1000])
    before = learnt(est)
    Xb = X[1000:1100].copy()
    Xb[7] *= scale
    with pytest.raises(ValueError, match=r"X is too large.*X's row 7 of this call"):
        est.partial_fit(Xb, y[1000:1100])
    assert learnt(est) == before


@pytest.mark.parametrize("mode", MODES)
def test_online_fits_are_scale_equivariant_over_1e150(mode):
    # powers of two scale exactly: X * s gives coef / s and y * s gives
    # coef * s, bit for bit, over 2^-498..2^498 (1e-150..1e150)
    X, y = stream(3000, d=5)
    ref = make(mode, fit_intercept=False).fit(X, y).coef_
    for k in (-498, -300, -100, -7, 9, 100, 300, 498):
        s = np.ldexp(1.0, k)
        np.testing.assert_array_equal(make(mode, fit_intercept=False).fit(X * s, y).coef_ * s,
                                      ref)
        np.testing.assert_array_equal(make(mode, fit_intercept=False).fit(X, y * s).coef_ / s,
                                      ref)


# LinearSGD._raise (csrc/_quantile.pyx) names X's largest entry for a scale
# error only when it has the row (one-row calls): a block of tiny X is told
# that "the sum of ||x||^2 ... overflows" (it underflows); and the detail for
# a first stepsize that overflows (y's scale, D0, against X's, Cl), which the
# estimator gave before the state objects, is gone: "the iterate diverged".
XFAIL_TINY_X_MESSAGE = pytest.mark.xfail(
    strict=True, raises=AssertionError,
    reason="lead: a block of tiny X is refused saying ||x||^2 overflows, without "
           "X's largest entry")
XFAIL_D0_MESSAGE = pytest.mark.xfail(
    strict=True, raises=AssertionError,
    reason="lead: an overflowing first stepsize says 'the iterate diverged', not that y's "
           "scale (D0) is too large against X's")


@pytest.mark.parametrize("mode", ["single", pytest.param("batch", marks=XFAIL_TINY_X_MESSAGE),
                                  pytest.param("storage", marks=XFAIL_TINY_X_MESSAGE)])
def test_tiny_X_is_refused_saying_what_to_rescale(mode):
    X, y = stream(3000, d=5)
    with pytest.raises(ValueError, match=r"too small.*entries are at most \d\.\d+e-1[67]\d"):
        make(mode).fit(X * 1e-170, y)


@XFAIL_D0_MESSAGE
@pytest.mark.parametrize("mode", MODES)
def test_y_too_large_against_X_is_refused_saying_what_to_rescale(mode):
    X, y = stream(3000, d=5)
    with pytest.raises(FloatingPointError, match=r"y's scale \(D0 = .*\) is too large "
                                                 r"against X's"):
        make(mode, fit_intercept=False).fit(X * 1e-140, y * 1e180)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_offline_quantile_regression_is_right_at_every_scale(fit_intercept):
    """Before: X * 1e-12 gave zeros, y * 1e-12 a 13% error."""
    X, y, beta = make_linear_stream(400, 3, random_state=0)
    X = X * np.array([1.0, 1e-3, 1e5])           # columns on different scales too
    coef, b = offline_quantile_regression(X, y, 0.3, fit_intercept=fit_intercept)
    for sx in (1e-150, 1e-100, 1e-12, 1e12, 1e100, 1e150):
        for sy in (1e-150, 1e-12, 1.0, 1e12, 1e150):
            c, i = offline_quantile_regression(X * sx, y * sy, 0.3, fit_intercept=fit_intercept)
            np.testing.assert_allclose(c * sx / sy, coef, rtol=1e-9)
            assert abs(i / sy - b) <= 1e-9 * (abs(b) + 1)


# -- stuck sensor --------------------------------------------------------------------------

def relerr(coef, beta):
    return np.linalg.norm(coef - beta) / np.linalg.norm(beta)


@pytest.fixture(scope="module")
def stuck_streams():
    X, y, beta = make_linear_stream(50_000 + 20_000, 20, random_state=0)
    return X, y, beta


# Finding (this round's merge): issue 40 case 5's phase-one cap for the block
# modes, max(b0, the Gaussian sparsity of the best window's median |r|),
# lets storage mode's restarted phase one take steps the stored stuck rows
# make unstable: 5,000 constant-y rows then 20,000 clean ones end at relative
# error 0.77 (0.05 before the cap; the other stuck cases unchanged). Kept
# strict until the cap tells an offset from a stale store.
XFAIL_STORAGE_STUCK = pytest.mark.xfail(
    strict=True, raises=AssertionError,
    reason="storage mode after 5,000 stuck rows: the case-5 phase-one cap overshoots")


def _stuck_params():
    for prefix, kind in [(500, "constant y"), (5000, "constant y"), (50_000, "constant y"),
                         (5000, "dead sensor")]:
        for mode, calls in [("single", 5000), ("batch", 5000), ("storage", 1000)]:
            marks = XFAIL_STORAGE_STUCK if (mode, prefix, kind) == (
                "storage", 5000, "constant y") else ()
            yield pytest.param(mode, calls, prefix, kind, marks=marks,
                               id=f"{prefix}-{kind}-{mode}-{calls}")


@pytest.mark.parametrize("mode, calls, prefix, kind", list(_stuck_params()))
def test_schedule_recovers_from_a_stuck_sensor(stuck_streams, mode, calls, prefix, kind):
    """Constant y (or X = 0 and y = 0) for `prefix` rows, then 20,000 clean rows.
    Before (d = 20, 200,000 clean rows): relative error 0.37-0.85 (single),
    0.79-1.0 (batch); storage with 1,000-row calls 0.93. After: the error of a
    clean start over the same 20,000 rows, within a factor 2 (observed 0.8-1.5;
    storage, whose objective keeps the stuck rows, only after more rows)."""
    if mode == "storage" and prefix == 50_000:
        pytest.skip("storage keeps every stuck row: 50,000 of them outweigh 20,000 clean")
    X, y, beta = stuck_streams
    X, y = X[:prefix + 20_000].copy(), y[:prefix + 20_000].copy()
    if kind == "dead sensor":
        X[:prefix] = 0.0
        y[:prefix] = 0.0
    else:
        y[:prefix] = y[0]

    def run(X, y):
        est = make(mode, batch_size=50)
        for a in range(0, len(y), calls):
            est.partial_fit(X[a:a + calls], y[a:a + calls])
        return est

    clean = relerr(run(X[prefix:], y[prefix:]).coef_, beta)
    est = run(X, y)
    assert est.schedule_state_["restarts"] >= 1
    if mode == "storage":
        # 5,000 stuck rows are a fifth of its data: biased, but no longer lost
        assert relerr(est.coef_, beta) < (2 * clean if prefix == 500 else 0.1)
    else:
        assert relerr(est.coef_, beta) < 2 * clean


def test_least_squares_is_unaffected_by_the_restart_rule(stuck_streams):
    # least squares' schedule has no D0 or b0 to go stale: no restarts
    X, y, beta = stuck_streams
    y = y.copy()
    y[:5000] = y[0]
    est = OnlineLeastSquaresRegressor().fit(X, y)
    assert est.schedule_state_["restarts"] == 0


# -- loading with mmap_mode="r" ---------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("average", [False, True])
def test_joblib_mmap_loaded_estimator_keeps_learning(tmp_path, mode, average):
    """Before: storage mode wrote into the read-only memory map ('assignment
    destination is read-only'). The state object's loader takes copies of
    what it loads (joblib hands it memory maps of the state's arrays)."""
    X, y = stream(3000)
    est = make(mode, average=average, batch_size=16)
    for a, b in ((0, 100), (100, 150), (150, 181)):    # stored data, rows pending
        est.partial_fit(X[a:b], y[a:b])
    if mode == "storage":
        assert state_dict(est)["store_X"].shape == (181, 8)
    if mode == "batch":
        assert state_dict(est)["pending_X"].shape == (181 % 16, 8)
    path = tmp_path / "est.joblib"
    joblib.dump(est, path)
    loaded = joblib.load(path, mmap_mode="r")
    assert_same_state(loaded, est)
    on_disk = path.read_bytes()
    for a, b in ((181, 190), (190, 2000)):     # the first fits in storage's spare room
        loaded.partial_fit(X[a:b], y[a:b])
        est.partial_fit(X[a:b], y[a:b])
    assert_same_state(loaded, est)
    assert path.read_bytes() == on_disk          # the file was not written


# -- small things --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_empty_calls(mode):
    """Before: batch mode's 0-row partial_fit with nothing waiting raised
    ZeroDivisionError; storage fit on an empty array deleted the previous fit."""
    X, y = stream(500)
    fresh = make(mode).partial_fit(X[:0], y[:0])        # a no-op, still unfitted
    assert not fresh.__sklearn_is_fitted__()
    est = make(mode, batch_size=None).partial_fit(X[:300], y[:300])
    before = learnt(est)
    est.partial_fit(X[:0], y[:0])
    assert learnt(est) == before
    with pytest.raises(ValueError, match="0 sample"):
        est.fit(X[:0], y[:0])
    assert learnt(est) == before          # the previous fit stays


# the machine's memory comes from os.sysconf (POSIX): without it (Windows)
# the buffer is attempted and its allocation fails with a MemoryError
@pytest.mark.skipif(not hasattr(os, "sysconf"), reason="needs os.sysconf (POSIX)")
@pytest.mark.parametrize("params, name", [
    (dict(mode="batch", batch_size=10**12), "batch_size"),
    (dict(schedule=StatisticalSchedule(window=10**12)), "schedule.window"),
    (dict(schedule=StatisticalSchedule(n_warmup=10**12)), "schedule.n_warmup")])
def test_buffers_that_cannot_exist_are_refused_up_front(params, name):
    """Before: numpy's raw MemoryError ('Unable to allocate 7.28 TiB')."""
    X, y = stream(100)
    est = OnlineQuantileRegressor(**params)
    with pytest.raises(ValueError, match=f"{name}=1000000000000 needs .* GiB, more than"):
        est.partial_fit(X, y)
    assert not est.__sklearn_is_fitted__()


class ValuesSchedule:
    def __init__(self, value):
        self.value = value

    def stepsizes(self, start, count):
        return np.full(count, self.value)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("value, what", [(0.01 + 0j, "complex"), ("0.01", "<U4"),
                                         (np.timedelta64(1, "s"), "timedelta64")])
def test_user_stepsizes_must_be_real_numbers(mode, value, what):
    """Before: complex and string stepsizes were converted silently."""
    X, y = stream(200)
    with pytest.raises(TypeError, match=rf"schedule\.stepsizes\(0, \d+\) must hold real "
                                        rf"numbers.*{what}"):
        make(mode, schedule=ValuesSchedule(value)).fit(X, y)


@pytest.mark.parametrize("kw", [dict(mode="single"), dict(mode="single", average=True),
                                dict(mode="batch", batch_size=64),
                                dict(mode="storage", batch_size=2000)])
def test_results_do_not_depend_on_the_blas_thread_count(kw):
    """Before: storage mode differed between 1 and 2 BLAS threads (the
    gradient's gemv split its sums by thread). The kernels call no BLAS now."""
    X, y = stream(20_000, d=50)
    fits = []
    for threads in (1, 2):
        with threadpool_limits(threads):
            est = OnlineQuantileRegressor(**kw).fit(X, y)
            fits.append((learnt(est), est.predict(X[:500]).tobytes()))
    assert fits[0] == fits[1]


@POSIX_SIGNALS
@pytest.mark.parametrize("signum", [signal.SIGINT, getattr(signal, "SIGALRM", None)])
def test_a_signal_around_the_commit_sees_the_state_before_or_after(signum):
    """fit publishes the new state with one assignment (est._state = new): a
    signal handler, which Python runs between bytecodes, cannot see half of
    it. Raised right before and right after the assignment (through
    __setattr__), the handler's exception leaves the estimator with the
    previous fit or the new one. Before: several assignments, with only
    SIGINT held back; a SIGALRM handler raising between them left a
    half-updated estimator."""
    X, y = stream(2000)

    def handler(s, frame):
        raise TimeoutError("signal")

    class Raising(OnlineQuantileRegressor):
        when = None

        def __setattr__(self, name, value):
            if name == "_state" and self.when == "before":
                signal.raise_signal(signum)
            super().__setattr__(name, value)
            if name == "_state" and self.when == "after":
                signal.raise_signal(signum)

    old = signal.signal(signum, handler)
    try:
        for when in ("before", "after"):
            est = Raising(mode="batch", batch_size=16).fit(X[:1000], y[:1000])
            before = learnt(est)
            est.when = when
            with pytest.raises(TimeoutError):
                est.fit(X[1000:1503], y[1000:1503])
            ref = make("batch", batch_size=16).fit(X[1000:1503], y[1000:1503])
            if when == "after":
                assert learnt(est) == learnt(ref)
            else:
                assert learnt(est) == before
    finally:
        signal.signal(signum, old)
