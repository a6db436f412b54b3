"""Property-based tests (hypothesis) of the online PCA estimators' contract:

- random shapes, dtypes, layouts and splits of one stream into calls give the
  state of one float64 call, bit for bit;
- pickling at any point resumes bit-identically;
- interrupts at random points -- a real signal at a random trial of the
  kernel, or a SIGINT delivered at a random line of the estimator's Python
  code (as Python delivers signals, between bytecodes, to whatever handler is
  installed then) -- leave a state that is that of the trials played, or the
  state before the call;
- random sequences of mid-stream set_params calls: every change takes effect
  or is refused naming the parameter with the state unchanged, and the run is
  reproducible.

Settings: derandomized (the same examples on every run, as the project's
fixed seeds), no example database, 20-40 examples per property; the whole
file runs in ~40 s on one core."""
import pickle
import signal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamfit._kernels import _capped, _pca
from streamfit.simulate import make_spiked_stream

from ._pca_cases import ALGOS, DROPOUT, assert_same_state, assert_sane, make
from ._signals import blocked_elsewhere, interrupted_at, lines_run

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NAMES = sorted(ALGOS)


@st.composite
def streams(draw, max_n=10, max_T=70):
    """(algo, k, X): a stream of vector rows, some zero and some repeated."""
    algo = draw(st.sampled_from(NAMES))
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, n))
    T = draw(st.integers(0, max_T))
    seed = draw(st.integers(0, 2 ** 16))
    X = make_spiked_stream(max(T, 1), n, n_spikes=min(2, n), random_state=seed)[:T]
    if T and draw(st.booleans()):
        X[draw(st.integers(0, T - 1))] = 0.0
    if T > 1 and draw(st.booleans()):
        X[T // 2:] = X[T // 2]
    return algo, k, X


def cuts(draw, T):
    """Sorted cut points in [0, T], empty calls allowed."""
    inner = draw(st.lists(st.integers(0, T), max_size=6))
    return [0, *sorted(inner), T]


# -- shapes, dtypes, layouts, splits --------------------------------------------------

LAYOUTS = {
    "c": lambda a: a,
    "fortran": np.asfortranarray,
    "strided": lambda a: np.repeat(a, 2, axis=1)[:, ::2],
    "read-only": lambda a: np.lib.stride_tricks.as_strided(a, writeable=False),
    "list": lambda a: a.tolist(),
}
DTYPES = [np.float64, np.float32, np.int64, np.int8]


@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_splits_dtypes_and_layouts_give_the_one_call_state(data):
    algo, k, X = data.draw(streams())
    dtype = data.draw(st.sampled_from(DTYPES))
    if np.issubdtype(dtype, np.integer):
        X = np.round(X * 8)            # small integers: exact in every dtype
    X = X.astype(dtype)
    ref = make(algo, k).partial_fit(X.astype(np.float64))
    est = make(algo, k)
    bounds = cuts(data.draw, len(X))
    for a, b in zip(bounds[:-1], bounds[1:]):
        # an empty list cannot say how many features it has
        layout = data.draw(st.sampled_from(sorted(LAYOUTS))) if b > a else "c"
        est.partial_fit(LAYOUTS[layout](np.ascontiguousarray(X[a:b])))
    assert_same_state(est, ref)
    if len(X):
        assert_sane(est)


@settings(max_examples=30, **SETTINGS)
@given(data=st.data())
def test_pickling_at_any_point_resumes_bit_identically(data):
    algo, k, X = data.draw(streams())
    at = data.draw(st.integers(0, len(X)))
    est = make(algo, k).partial_fit(X[:at])
    if data.draw(st.booleans()):
        est.components_                 # reading changes nothing
        est.regret_
    twin = pickle.loads(pickle.dumps(est))
    assert_same_state(twin, est)
    twin.partial_fit(X[at:])
    assert_same_state(twin, make(algo, k).partial_fit(X))


# -- interrupts ------------------------------------------------------------------------

class Stop(Exception):
    pass


@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs POSIX signals")
def test_a_signal_at_a_random_trial_keeps_whole_trials(data):
    algo, k, X = data.draw(streams(max_T=80))
    at = data.draw(st.integers(0, len(X)))
    poll = data.draw(st.integers(0, 90))
    est = make(algo, k).partial_fit(X[:at])

    def handler(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGUSR1, handler)
    module = _capped if algo in ("meg", "gd") else _pca
    module._interrupt_at(poll, signal.SIGUSR1)
    try:
        est.partial_fit(X[at:])
        assert poll >= len(X) - at          # the call ended before that poll
    except Stop:
        assert poll < len(X) - at
    finally:
        module._interrupt_at(-1, 0)
        signal.signal(signal.SIGUSR1, old)
    t = est.n_trials_
    assert t == min(len(X), at + poll)
    assert_same_state(est, make(algo, k).partial_fit(X[:t]))
    est.partial_fit(X[t:])
    assert_same_state(est, make(algo, k).partial_fit(X))


@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_sigint_at_a_random_line_leaves_a_consistent_state(data):
    """Python delivers a signal between two bytecodes of whatever runs: here,
    at any line of partial_fit's Python code (validation, the first decision,
    the commit, the rollback paths). Afterwards the estimator is in the state
    of the trials it holds -- or unfitted -- and carries on as if it had fed
    them in one call."""
    algo, k, X = data.draw(streams(max_T=40))
    at = data.draw(st.integers(0, len(X)))
    line = data.draw(st.integers(1, 200))     # a call runs 150-180 lines
    est = make(algo, k).partial_fit(X[:at]) if data.draw(st.booleans()) else make(algo, k)
    start = est.n_trials_ if est.__sklearn_is_fitted__() else 0
    rest = X[start:]
    interrupted = not interrupted_at(line, lambda: est.partial_fit(rest))
    if not est.__sklearn_is_fitted__():
        assert interrupted and start == 0
        assert "_state" not in vars(est)
        return
    t = est.n_trials_
    assert start <= t <= len(X) and (interrupted or t == len(X))
    assert_same_state(est, make(algo, k).partial_fit(X[:t]))
    est.partial_fit(X[t:])
    assert_same_state(est, make(algo, k).partial_fit(X))


@pytest.mark.parametrize("algo", NAMES + sorted(DROPOUT))
@pytest.mark.parametrize("method", ["partial_fit-fresh", "partial_fit", "fit"])
def test_sigint_at_every_line_of_a_call(algo, method):
    """The same, exhaustively: a SIGINT at each line a call executes, in turn
    (a fresh estimator's first call, a continuing call, a fit replacing an
    older one)."""
    X = make_spiked_stream(30, 6, n_spikes=2, random_state=1)

    def start():
        if method == "partial_fit-fresh":
            return make(algo, 2)
        return make(algo, 2).partial_fit(2 * X[:12] if method == "fit" else X[:12])

    def call(est):
        if method == "fit":
            return est.fit(X)
        return est.partial_fit(X[est.n_trials_ if est.__sklearn_is_fitted__() else 0:])

    total = lines_run(lambda: call(start()))
    outcomes = set()
    for line in range(1, total + 1):
        est = start()
        old = pickle.dumps(est)
        state = est.__dict__.get("_state")
        if interrupted_at(line, lambda: call(est)):
            outcomes.add("finished")
        # no interrupt left a lock held -- the state objects' (the old one and
        # the one it holds now) and a first call's gate: another thread's
        # next call would wait forever
        for obj in {id(o): o for o in (state, est.__dict__.get("_state"),
                                       est.__dict__.get("_gate")) if o is not None}.values():
            assert not blocked_elsewhere(obj), line
        if not est.__sklearn_is_fitted__():
            assert method == "partial_fit-fresh", line
            outcomes.add("unfitted")
            continue
        t = est.n_trials_
        if method == "fit" and learnt_equal(est, pickle.loads(old)):
            outcomes.add("previous fit")
            continue
        assert_same_state(est, make(algo, 2).partial_fit(X[:t]))
        outcomes.add("whole trials")
    assert "finished" in outcomes and len(outcomes) >= 2, outcomes


def learnt_equal(a, b):
    try:
        assert_same_state(a, b)
        return True
    except AssertionError:
        return False


# -- mid-stream set_params ------------------------------------------------------------

# per estimator: parameter -> values to draw; and which of them the state
# depends on (refused mid-stream)
PARAMS = {
    "fpl": ({"sigma": ["auto", 0.01, 0.3, 2.0], "solver": ["auto", "exact", "krylov"],
             "tol": [0.01, 0.2, 1e-4], "noise": ["fixed", "random_walk", "independent"],
             "n_components": [1, 2, 3], "random_state": [0, 1]},
            ("noise", "n_components", "random_state")),
    "fpl-random_walk": ({"sigma": ["auto", 0.001, 0.5], "tol": [0.01, 0.3]}, ()),
    "ftl": ({"solver": ["auto", "exact", "krylov"], "tol": [0.01, 0.5],
             "n_components": [1, 2]}, ("n_components",)),
    "meg": ({"eta": ["auto", 0.5], "n_components": [1, 2], "random_state": [0, 3]},
            ("eta", "n_components", "random_state")),
    "gd": ({"eta": ["auto", 0.2], "n_components": [2, 3], "random_state": [0, 7]},
           ("eta", "n_components", "random_state")),
}


@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_random_set_params_sequences(data):
    algo = data.draw(st.sampled_from(sorted(PARAMS)))
    values, refused = PARAMS[algo]
    n = 16
    X = make_spiked_stream(160, n, n_spikes=2, random_state=data.draw(st.integers(0, 99)))
    bounds = [0, *sorted(data.draw(st.lists(st.integers(0, 160), max_size=5))), 160]
    changes = [data.draw(st.dictionaries(st.sampled_from(sorted(values)),
                                         st.integers(0, 3), max_size=2))
               for _ in bounds[1:]]

    def run():
        est, log = make(algo, 2), []
        for (a, b), change in zip(zip(bounds[:-1], bounds[1:]), changes):
            new = {p: values[p][i % len(values[p])] for p, i in change.items()}
            fitted = est.__sklearn_is_fitted__()
            before = pickle.dumps(est) if fitted else None
            old = est.get_params()
            est.set_params(**new)
            try:
                est.partial_fit(X[a:b])
                log.append(("ok", est.n_trials_))
            except ValueError as exc:
                bad = [p for p in new if p in refused and new[p] != old[p]]
                assert fitted and bad and any(p in str(exc) for p in bad), (new, exc)
                assert_same_state(est, pickle.loads(before))
                est.set_params(**old)             # put it back and carry on
                est.partial_fit(X[a:b])
                log.append(("refused", est.n_trials_))
        return est, log

    est, log = run()
    assert est.n_trials_ == 160
    assert_sane(est)
    twin, log2 = run()                    # the same sequence: the same run
    assert log == log2
    assert_same_state(est, twin)
