"""The low-rank learner's state object, LowRankState: one row and a block
give the same state bit for bit, predict_one agrees with predict, copies and
pickles are independent, a state dict is checked field by field before it is
loaded, an interrupted block keeps whole samples, an error keeps the state,
one call at a time (a second thread waits, a signal handler's re-entry is
refused)."""
import copy
import pickle
import signal
import threading

import numpy as np
import pytest

from streamfit import OnlineLowRankQuantileRegressor
from streamfit._kernels import _lowrank as _lr
from streamfit._kernels._lowrank import LowRankState
from streamfit.schedules import StatisticalSchedule

from .test_lowrank import stream

D1, D2, R = 12, 9, 2
# short windows: the warm-up, phase one's end and several windows within 300 rows
SCHEDULE = StatisticalSchedule(n_warmup=20, window=30, decay=0.5)


def params(loss="quantile", tau=0.4):
    est = OnlineLowRankQuantileRegressor(rank=R, tau=tau, loss=loss, schedule=SCHEDULE)
    return est._params((D1, D2))


def rows(form, X, i):
    """Row i of X as learn_one takes it."""
    if form == "rank1":
        return (X[0][i], X[1][i])
    if form == "index":
        return (int(X[i, 0]), int(X[i, 1]))
    return X[i]


def block(form, X, start, stop):
    if form == "rank1":
        return (X[0][start:stop], X[1][start:stop])
    if form == "index":
        return np.ascontiguousarray(X[start:stop], dtype=np.intp)
    return X[start:stop]


def same(a, b):
    sa, sb = a.to_state(), b.to_state()
    assert sa.keys() == sb.keys()
    for key, value in sa.items():
        if isinstance(value, np.ndarray):
            assert value.tobytes() == sb[key].tobytes(), key
        else:
            assert value == sb[key], key


@pytest.mark.parametrize("form", ["dense", "rank1", "index"])
@pytest.mark.parametrize("loss", ["quantile", "squared"])
def test_rows_one_by_one_give_the_blocks_state_bit_for_bit(form, loss):
    X, y, _ = stream(form, 300, D1, D2, R, seed=4)
    one = LowRankState((D1, D2), R, params(loss))
    blocks = LowRankState((D1, D2), R, params(loss))
    for i in range(300):
        one.learn_one(rows(form, X, i), float(y[i]))
    for start, stop in ((0, 7), (7, 150), (150, 300)):
        blocks.learn(block(form, X, start, stop), y[start:stop])
    assert one.n_seen == 300 and one.schedule_state["phase"] >= 1
    same(one, blocks)


@pytest.mark.parametrize("form", ["dense", "rank1", "index"])
def test_predict_one_is_predicts_row(form):
    X, y, _ = stream(form, 200, D1, D2, R, seed=5)
    st = LowRankState((D1, D2), R, params())
    st.learn(block(form, X, 0, 200), y)
    many = st.predict(block(form, X, 0, 50))
    one = [st.predict_one(rows(form, X, i)) for i in range(50)]
    np.testing.assert_allclose(one, many, rtol=1e-13, atol=1e-13)
    M = st.coef
    if form == "index":
        np.testing.assert_allclose(many, M[X[:50, 0], X[:50, 1]], atol=1e-12)
    else:
        dense = X[:50] if form == "dense" else np.einsum("ti,tj->tij", X[0][:50], X[1][:50])
        np.testing.assert_allclose(many, np.einsum("tij,ij->t", dense, M), atol=1e-12)


def test_copies_and_pickles_are_independent_and_resume_bit_for_bit():
    X, y, _ = stream("rank1", 300, D1, D2, R, seed=6)
    est = OnlineLowRankQuantileRegressor(rank=R, schedule=SCHEDULE)
    est.partial_fit(block("rank1", X, 0, 150), y[:150])
    shallow, deep = copy.copy(est), copy.deepcopy(est)
    loaded = pickle.loads(pickle.dumps(est))
    frozen = est._state.to_state()
    est.partial_fit(block("rank1", X, 150, 300), y[150:])
    for other in (shallow, deep, loaded):
        assert other.n_samples_seen_ == 150
        assert other._state.to_state()["U"].tobytes() == frozen["U"].tobytes()
        other.partial_fit(block("rank1", X, 150, 300), y[150:])
        same(other._state, est._state)


def test_an_error_in_a_block_leaves_the_state_and_names_the_sample():
    X, y, _ = stream("dense", 200, D1, D2, R, seed=7)
    st = LowRankState((D1, D2), R, params())
    st.learn(X[:100], y[:100])
    before = pickle.dumps(st)
    bad = X[100:150].copy()
    bad[30, 2, 3] = np.nan
    with pytest.raises(ValueError, match=r"X contains NaN or inf \(sample 30 of this call\)"):
        st.learn(bad, y[100:150])
    badly = y[100:150].copy()
    badly[49] = np.inf
    with pytest.raises(ValueError, match=r"y contains NaN or inf \(sample 49 of this call\)"):
        st.learn(X[100:150], badly)
    with pytest.raises(ValueError, match=r"y contains NaN"):
        st.learn_one(X[100], float("nan"))
    with pytest.raises(ValueError, match=r"x must have shape \(12, 9\)"):
        st.learn_one(X[100][:, :5].copy(), 1.0)
    assert pickle.dumps(st) == before


def test_set_params_refuses_what_belongs_to_the_learnt_state():
    st = LowRankState((D1, D2), R, params())
    before = pickle.dumps(st)
    for change, what in (({"tau": 0.6}, "tau changed"), ({"loss": _lr.LOSS_SQUARED}, "loss"),
                         ({"kind": _lr.KIND_CONSTANT, "c": 0.1}, "schedule kind"),
                         ({"window": 31.0}, "schedule window")):
        with pytest.raises(ValueError, match=what):
            st.set_params({**params(), **change})
    with pytest.raises(ValueError, match="unknown field"):
        st.set_params({**params(), "bogus": 1.0})
    assert pickle.dumps(st) == before
    st.set_params({**params(), "Ca": 5.0})
    assert st.params["Ca"] == 5.0


# -- the state dict, checked field by field ---------------------------------------------

def _fitted_state():
    X, y, _ = stream("rank1", 200, D1, D2, R, seed=9)
    st = LowRankState((D1, D2), R, params())
    st.learn(block("rank1", X, 0, 200), y)
    return st


def _edits(state):
    """(name, edited state dict) for every field: values out of range,
    wrong types, shapes and dtypes, each record field broken."""
    out = []
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            variants = {"nan": lambda a: np.full_like(a, np.nan),
                        "inf-first": lambda a: np.where(np.arange(a.size).reshape(a.shape) == 0,
                                                        np.inf, a),
                        "negative": lambda a: -np.abs(a) - 1.0,
                        "one-more-row": lambda a: np.concatenate([a, a[:1]]) if a.size else
                        np.zeros(1),
                        "flat": lambda a: a.reshape(-1)[:-1] if a.size else a,
                        "float32": lambda a: a.astype(np.float32),
                        "int64": lambda a: np.nan_to_num(a).astype(np.int64),
                        "object": lambda a: a.astype(object),
                        "list": lambda a: a.tolist(),
                        "huge": lambda a: np.full_like(a, 1e300)}
            if value.ndim == 2:
                variants["transposed"] = lambda a: np.ascontiguousarray(a.T)
            for name, f in variants.items():
                out.append((f"{key}:{name}", {**state, key: f(value)}))
        elif isinstance(value, int):
            for bad in (-1, 0, 2 ** 40, 3.0, True, "2", None, value + 1):
                out.append((f"{key}:{bad!r}", {**state, key: bad}))
        else:
            out.append((f"{key}:edited", {**state, key: value + " x"}))
    for rec in ("schedule", "params"):
        names = state[f"{rec}_fields"].split()
        for i, field in enumerate(names):
            for bad in (np.nan, -1.0, 1e300, 0.5):
                arr = state[rec].copy()
                arr[i] = bad
                out.append((f"{rec}.{field}={bad}", {**state, rec: arr}))
    s = state["s"].copy()
    out.append(("s:ascending", {**state, "s": s[::-1].copy()}))
    U = state["U"].copy()
    U[0] *= 2.0
    out.append(("U:not-orthonormal", {**state, "U": U}))
    extra = dict(state)
    extra["bogus"] = 1
    out.append(("extra-key", extra))
    missing = dict(state)
    del missing["window"]
    out.append(("missing-key", missing))
    return out


def test_a_damaged_state_is_refused_naming_its_field_or_loads_sanely():
    st = _fitted_state()
    state = st.to_state()
    X, y, _ = stream("rank1", 260, D1, D2, R, seed=9)
    must_refuse = (":float32", ":int64", ":object", ":list", ":one-more-row", ":flat",
                   ":transposed", "_fields:edited", "extra-key", "missing-key",
                   "not-orthonormal", "ascending", "U:nan", "s:nan", "V:nan", "window:nan",
                   "s:negative", "format_version:", "rank:0", "d1:-1", "d2:2")
    for name, edited in _edits(state):
        try:
            loaded = LowRankState.from_state(edited)
        except (ValueError, TypeError) as exc:
            assert "state" in str(exc) or "params" in str(exc) or "window" in str(exc), \
                (name, str(exc))
            continue
        # accepted: an edit inside the valid range; it must work sanely
        assert not any(m in name for m in must_refuse), f"{name} was accepted"
        loaded.learn(block("rank1", X, 200, 260), y[200:])
        assert loaded.n_seen == st.n_seen + 60, name
        assert np.isfinite(loaded.coef).all(), name
        np.testing.assert_allclose(loaded.U @ loaded.U.T * (loaded.s > 0)[:, None],
                                   np.diag((loaded.s > 0).astype(float)), atol=1e-8)


def test_a_pickle_of_another_format_version_is_refused():
    st = _fitted_state()
    func, (version, state) = st.__reduce__()
    assert version == _lr.FORMAT_VERSION
    with pytest.raises(ValueError, match="format version 0.*reads version 1 only"):
        func(0, state)
    assert func(version, state).n_seen == st.n_seen


def test_a_huge_declared_size_is_refused_before_any_allocation():
    state = _fitted_state().to_state()
    for key in ("d1", "d2"):
        with pytest.raises(ValueError, match="shape"):
            LowRankState.from_state({**state, key: 2 ** 31 - 1})


# -- faults -------------------------------------------------------------------------------

POSIX_SIGNALS = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals (SIGUSR1)")


@POSIX_SIGNALS
@pytest.mark.parametrize("at", [0, 1, 37])
def test_an_interrupted_block_keeps_the_samples_before_the_poll(at):
    X, y, _ = stream("rank1", 200, D1, D2, R, seed=10)

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt()

    old = signal.signal(signal.SIGUSR1, raise_interrupt)
    st = LowRankState((D1, D2), R, params())
    st.learn(block("rank1", X, 0, 50), y[:50])
    try:
        _lr._interrupt_at(at, signal.SIGUSR1)
        with pytest.raises(KeyboardInterrupt) as info:
            st.learn(block("rank1", X, 50, 200), y[50:])
    finally:
        _lr._interrupt_at(-1, 0)
        signal.signal(signal.SIGUSR1, old)
    assert f"interrupted after {at} of the call's 150 samples" in "".join(
        getattr(info.value, "__notes__", []))
    ref = LowRankState((D1, D2), R, params())
    ref.learn(block("rank1", X, 0, 50 + at), y[:50 + at])
    same(st, ref)


@POSIX_SIGNALS
def test_a_signal_handler_calling_the_busy_state_is_refused():
    X, y, _ = stream("rank1", 120, D1, D2, R, seed=11)
    st = LowRankState((D1, D2), R, params())
    seen = []

    def reenter(signum, frame):
        try:
            st.predict_one((X[0][0], X[1][0]))
        except RuntimeError as exc:
            seen.append(str(exc))
            raise

    old = signal.signal(signal.SIGUSR1, reenter)
    try:
        _lr._interrupt_at(5, signal.SIGUSR1)
        with pytest.raises(RuntimeError, match="called again by the thread"):
            st.learn(block("rank1", X, 0, 120), y)
    finally:
        _lr._interrupt_at(-1, 0)
        signal.signal(signal.SIGUSR1, old)
    assert seen and st.n_seen == 5


def test_a_second_thread_waits_for_the_first():
    X, y, _ = stream("dense", 600, D1, D2, R, seed=12)
    st = LowRankState((D1, D2), R, params())
    barrier = threading.Barrier(2)
    errors = []

    def feed(start, stop):
        barrier.wait()
        try:
            st.learn(X[start:stop], y[start:stop])
        except Exception as exc:      # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=feed, args=(0, 300)),
               threading.Thread(target=feed, args=(300, 600))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and st.n_seen == 600
    orders = []
    for first, second in (((0, 300), (300, 600)), ((300, 600), (0, 300))):
        ref = LowRankState((D1, D2), R, params())
        ref.learn(X[slice(*first)], y[slice(*first)])
        ref.learn(X[slice(*second)], y[slice(*second)])
        orders.append(ref.to_state()["U"].tobytes() == st.to_state()["U"].tobytes())
    assert any(orders)


# -- the estimator's event API --------------------------------------------------------------

def test_learn_one_and_predict_one_on_the_estimator():
    X, y, M = stream("rank1", 300, D1, D2, R, seed=13)
    one = OnlineLowRankQuantileRegressor(rank=R, schedule=SCHEDULE)
    for i in range(300):
        # lists take the converting path, arrays the direct one: the same rows
        x = (X[0][i].tolist(), X[1][i]) if i % 2 else (X[0][i], X[1][i])
        one.learn_one(x, y[i])
    ref = OnlineLowRankQuantileRegressor(rank=R, schedule=SCHEDULE).fit(X, y)
    same(one._state, ref._state)
    assert one.predict_one((X[0][0], X[1][0])) == pytest.approx(ref.predict(
        (X[0][:1], X[1][:1]))[0], rel=1e-13)
    one.set_params(tau=0.7)
    with pytest.raises(ValueError, match="tau changed from 0.5 to 0.7.*call fit"):
        one.learn_one((X[0][0], X[1][0]), 1.0)
    one.set_params(tau=0.5, rank=R + 1)
    with pytest.raises(ValueError, match="rank changed"):
        one.learn_one((X[0][0], X[1][0]), 1.0)
    one.set_params(rank=R)
    with pytest.raises(ValueError, match=r"x = \(a, b\) must have lengths \(12, 9\)"):
        one.learn_one((X[0][0][:3], X[1][0]), 1.0)
    with pytest.raises(TypeError, match="y must be a real number"):
        one.learn_one((X[0][0], X[1][0]), "1.0")
    same(one._state, ref._state)


def test_learn_one_on_a_fresh_estimator_and_index_pairs():
    est = OnlineLowRankQuantileRegressor(rank=1, shape=(4, 3), schedule=SCHEDULE)
    with pytest.raises(ValueError, match="outside shape"):
        est.learn_one((4, 0), 1.0)
    assert not est.__sklearn_is_fitted__()
    est.learn_one((1, 2), 1.0)
    assert est.n_samples_seen_ == 1
    with pytest.raises(ValueError, match=r"index pair \(4, 0\) \(sample 0 of this call\)"):
        est.learn_one((4, 0), 1.0)
    assert est.n_samples_seen_ == 1
