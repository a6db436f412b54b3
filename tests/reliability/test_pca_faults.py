"""Regression tests of the online PCA family (FPL with each noise, FTL, MEG,
GD), one per failure mode: LAPACK failures and the degenerate-stream sweep,
exact regret accounting, interrupts (a real SIGINT in a subprocess, a SIGALRM
timer whose handler raises, a signal raised at an exact trial), two threads on
one estimator, extreme scales, loading with mmap_mode="r", the small things,
and mid-stream set_params for every parameter.

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

import joblib
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from streamfit import MatrixEGPCA, MatrixGDPCA, PerturbedLeaderPCA
from streamfit._kernels import _capped, _linalg, _pca
from streamfit.pca import auto_sigma, goe_matrix, regret_bound
from streamfit.simulate import make_dense_stream, make_spiked_stream

from ._pca_cases import (ALGOS, FOUR, assert_same_state, assert_sane, cyclic,
                         dense_projections, make, rank_one, repeated_rows, rotated_cyclic)

def _symmetric(lower):
    low = np.tril(lower)
    return low + np.tril(low, -1).T


POSIX_SIGNALS = pytest.mark.skipif(not hasattr(signal, "setitimer"),
                                   reason="needs POSIX signals (setitimer, SIGUSR1)")


def feed(est, data, bounds):
    """est given data[a:b] for consecutive bounds, vector rows or dense."""
    fit = est.partial_fit_dense if data.ndim == 3 else est.partial_fit
    for a, b in zip(bounds[:-1], bounds[1:]):
        fit(data[a:b])
    return est


# == 1. LAPACK: the eigen-solver chain, and the degenerate-stream sweep ==================

# (n, k, trial) where scipy's dsyevr refused FPL's cumulative matrix on the
# cyclic stream before (the first failing trial of each pair, from the issue's
# reproduction at n <= 15)
OLD_FAILURES = [(9, 2, 37), (10, 1, 50), (12, 1, 11), (12, 2, 33), (13, 1, 11),
                (13, 2, 14), (14, 1, 42), (14, 2, 15), (15, 1, 25)]


@pytest.mark.parametrize("n, k, trial", OLD_FAILURES)
def test_regret_on_the_cyclic_stream_at_every_trial(n, k, trial):
    """Before: regret_ raised LinAlgError('Internal Error') at these trials
    (~20% of the (n, k) pairs with n <= 30 failed somewhere)."""
    X = cyclic(trial + n, n)
    est = PerturbedLeaderPCA(k, random_state=0)
    for t in range(len(X)):
        est.partial_fit(X[t:t + 1])
        counts = np.bincount(np.arange(t + 1) % n, minlength=n)
        assert est.best_gain_ == np.sort(counts)[-k:].sum()      # exact: integer sums
        assert np.isfinite(est.regret_)
    assert_sane(est)


@pytest.mark.parametrize("n, k, trial", OLD_FAILURES[::3])
def test_the_matrices_scipy_refused_go_through_the_chain(n, k, trial):
    """The cumulative matrices the old accounting formed (S - s N: a diagonal
    with rounding noise) are those scipy's dsyevr refused; the chain solves
    them (whichever routine it starts with), as NumPy's eigvalsh does."""
    est = PerturbedLeaderPCA(k, random_state=0).partial_fit(cyclic(trial, n))
    kept = est._state.to_state()
    old = _symmetric(kept["S"] - kept["s"] * kept["N"])
    ref = np.linalg.eigvalsh(old)[-k:]
    for first in range(4):
        code, w, Z, _, _ = _linalg.eigh_top(old, k, True, first)
        assert code == 0
        np.testing.assert_allclose(w, ref, rtol=0, atol=1e-12 * trial)
        np.testing.assert_allclose(Z @ Z.T, np.eye(k), atol=1e-12)


@pytest.mark.parametrize("algo", FOUR)
@pytest.mark.parametrize("first", [1, 2, 3], ids=["evd-or-evr", "ev", "jacobi"])
def test_every_routine_of_the_chain_runs_in_the_kernels(algo, first):
    """Each routine of the chain (dsyevr, dsyevd, dsyev, Jacobi) run first
    inside the real kernels plays the decisions the default routine plays, to
    rounding. (FTL's first trials see rank-deficient leaders, whose top-k any
    basis of a null space completes: there only the final decision, of a
    leader with a separated top-k, is compared.) n = 48 > 6 b: FPL's and FTL's
    default is dsyevr there (below, dsyevd), so "evd-or-evr" runs the other."""
    cls = type(make(algo))
    other = 0 if first == 1 and cls in (MatrixEGPCA, MatrixGDPCA) else first
    forced = type("Forced", (cls,), {"_eig_first": other})
    X = make_spiked_stream(120, 48, n_spikes=2, random_state=1)
    solver = {"solver": "exact"} if algo in ("fpl", "ftl") else {}
    a = make(algo, **solver).partial_fit(X)
    b = forced(2, **{**ALGOS[algo][1], **solver}).partial_fit(X)
    np.testing.assert_allclose(b.components_.T @ b.components_,
                               a.components_.T @ a.components_, atol=1e-9)
    assert_sane(b)
    if algo != "ftl":
        np.testing.assert_allclose(b.cumulative_gain_, a.cumulative_gain_, rtol=1e-9)


def test_a_kernel_whose_chain_fails_keeps_the_previous_decision():
    """Only a non-finite matrix defeats the whole chain (validated input never
    gets one into S, so the test plants it): the trials still complete,
    replaying the last orthonormal decision, counted in solver_stats_.
    Before: RuntimeError and the estimator reset; and on NaN, dsyevr's
    bisection never returned (now refused before any routine runs)."""
    est = PerturbedLeaderPCA(2, solver="krylov", random_state=0)
    est.partial_fit(make_spiked_stream(30, 20, random_state=0))
    V = est.components_
    _pca._plant(est._state, 5, 2, np.inf)
    est.partial_fit(make_spiked_stream(4, 20, random_state=1))
    assert est.n_trials_ == 34 and est.solver_stats_["kept"] == 4
    np.testing.assert_array_equal(est.components_, V)


# -- the degenerate-stream sweep ---------------------------------------------------------

def pairs(stride, full=()):
    """(n, k) with n <= 30: every k for n in `full`, else k in {1, 2, n // 2,
    n - 1, n} and every k with (3 n + k) % stride == 0 -- a deterministic
    subsample that still sees every k for some n."""
    out = []
    for n in range(1, 31):
        ks = set(range(1, n + 1)) if n in full else (
            {1, 2, n // 2, n - 1, n} | {k for k in range(1, n + 1) if (3 * n + k) % stride == 0})
        out += [(n, k) for k in sorted(ks) if 1 <= k <= n]
    return out


STREAMS = {
    "cyclic": lambda T, n: cyclic(T, n),
    "rotated": lambda T, n: rotated_cyclic(T, n, seed=n),
    "repeated": lambda T, n: repeated_rows(T, n, seed=n),
    "rank-one": lambda T, n: rank_one(T, n, seed=n),
    "dense-cyclic": lambda T, n: dense_projections(T, n),
    "dense-rotated": lambda T, n: dense_projections(T, n, seed=n),
}
# per algorithm: how densely (n, k) is sampled (FPL and FTL are cheap; a MEG
# or GD trial is a full eigendecomposition) and the n seeing every k -- the
# small n where the cyclic stream failed among them
SAMPLING = {"fpl": (3, range(9, 17)), "ftl": (4, (12, 13, 30)), "meg": (6, (12, 30)),
            "gd": (6, (14, 30))}


@pytest.mark.slow
@pytest.mark.parametrize("stream", list(STREAMS))
@pytest.mark.parametrize("algo", FOUR)
def test_degenerate_streams_sweep(algo, stream):
    """Finite orthonormal components, gains within the stream's energy,
    regret within the algorithm's bound and no exception, checked after
    each of five uneven calls (3n + 5 trials), over n <= 30 and every k (see
    SAMPLING). Before: LinAlgError on ~20% of the (n, k) pairs (FPL cyclic,
    FTL/MEG/GD rotated cyclic, dense cyclic projections)."""
    stride, full = SAMPLING[algo]
    todo = pairs(stride, full)
    seen_k = {}
    for n, k in todo:
        T = 3 * n + 5
        data = STREAMS[stream](T, n)
        est = make(algo, k)
        cuts = sorted({0, 1, n // 2 + 1, n + 2, 2 * n + 3, T})
        for a, b in zip(cuts[:-1], cuts[1:]):
            feed(est, data, [a, b])
            try:
                assert_sane(est)
            except AssertionError as exc:
                raise AssertionError(f"{algo} on {stream}, n = {n}, k = {k}, after "
                                     f"{b} trials: {exc}") from exc
        seen_k.setdefault(n, set()).add(k)
    assert any(seen_k[n] == set(range(1, n + 1)) for n in full)
    assert sum(len(v) for v in seen_k.values()) == len(todo)


def test_degenerate_streams_quick():
    """The sweep's smallest cases on every stream and algorithm (the sweep
    itself is marked slow)."""
    for algo in FOUR:
        for stream in STREAMS:
            for n, k in ((1, 1), (2, 1), (3, 2), (5, 5)):
                est = make(algo, k)
                feed(est, STREAMS[stream](2 * n + 3, n), [0, 1, n + 1, 2 * n + 3])
                assert_sane(est)


# == 2. exact regret accounting ==========================================================

@pytest.mark.parametrize("sigma", [1e16, 1e12, 1.0, 1e-12])
@pytest.mark.parametrize("noise", ["fixed", "random_walk"])
def test_best_gain_is_exact_whatever_sigma(sigma, noise):
    """Before (fixed noise): cumulative_matrix() was S - s N, so sigma = 1e16
    gave best_gain_ 5183 against a true 533 and sigma = 1e12 was 0.02% off."""
    X = make_spiked_stream(2000, 30, n_spikes=3, random_state=0)
    est = PerturbedLeaderPCA(3, sigma=sigma, noise=noise, random_state=0).partial_fit(X)
    true = np.linalg.eigvalsh(X.T @ X)[-3:].sum()
    np.testing.assert_allclose(est.best_gain_, true, rtol=1e-12)
    np.testing.assert_allclose(est.cumulative_matrix(), X.T @ X, rtol=0, atol=1e-11)


@pytest.mark.parametrize("algo", list(ALGOS))
def test_cumulative_matrix_of_integer_data_is_exact(algo):
    """Integer rows sum exactly in float64: the cumulative matrix must equal
    X^T X bit for bit (pending rows of the buffer included). Before: S - s N
    left rounding noise of ~1e-12 in exact data."""
    X = np.random.default_rng(1).integers(-3, 4, size=(203, 12)).astype(float)
    est = make(algo, 2).partial_fit(X[:100]).partial_fit(X[100:])
    assert np.array_equal(est.cumulative_matrix(), X.T @ X)
    Xs = np.einsum("tij,tkj->tik", *[np.random.default_rng(2).integers(
        -2, 3, size=(37, 8, 3)).astype(float)] * 2)         # integer PSD matrices
    est = make(algo, 2).partial_fit_dense(Xs)
    assert np.array_equal(est.cumulative_matrix(), Xs.sum(axis=0))


def test_the_row_buffer_keeps_decisions_and_pickles():
    """C is fed by a 64-row buffer (one dsyrk per 64 trials, no second pass
    over an n x n matrix per trial): the decisions are those of S alone
    (independent of C), and pickling with rows pending resumes bit for bit."""
    X = make_spiked_stream(300, 20, random_state=4)
    est = PerturbedLeaderPCA(2, random_state=0).partial_fit(X[:150])
    assert est._state.to_state()["pending"] == 150 % 64
    twin = pickle.loads(pickle.dumps(est))
    est.partial_fit(X[150:])
    twin.partial_fit(X[150:])
    assert_same_state(est, twin)
    ref = PerturbedLeaderPCA(2, random_state=0)
    for a in range(0, 300, 7):
        ref.partial_fit(X[a:a + 7])
    assert_same_state(est, ref)


# == 3. interrupts ==========================================================================

CHILD = textwrap.dedent(r'''
    import json, pickle, sys, time
    import numpy as np
    from threadpoolctl import threadpool_limits
    sys.path.insert(0, sys.argv[2])
    from _pca_cases import make, assert_same_state, learnt

    algo = sys.argv[1]
    n, k = {"meg": (120, 3), "gd": (120, 3)}.get(algo, (300, 5))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20_000, n))
    X /= np.linalg.norm(X, axis=1)[:, None]
    out = {}
    with threadpool_limits(1):
        est = make(algo, k).partial_fit(X[:5])
        print("ready", flush=True)
        try:
            est.partial_fit(X[5:])           # 10-60 s
            out["finished"] = True
        except KeyboardInterrupt as exc:
            out["caught"] = time.monotonic()
            out["notes"] = getattr(exc, "__notes__", [])
            done = est.n_trials_
            out["done"] = done
            C = est.cumulative_matrix()
            out["trace_ok"] = bool(abs(np.trace(C) - done) < 1e-8 * done)
            # the state is that of the first `done` trials, in every field, and
            # continuing gives the uninterrupted run's state
            ref = make(algo, k).partial_fit(X[:5]).partial_fit(X[5:done])
            try:
                assert_same_state(est, ref)
                out["same"] = True
            except AssertionError as e:
                out["same"] = str(e)
            est.partial_fit(X[done:done + 20])
            ref.partial_fit(X[done:done + 20])
            out["same_after"] = learnt(est) == learnt(ref)
    print(json.dumps(out), flush=True)
''')


def run_interrupted_child(algo, delay):
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, algo, here], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    try:
        for line in proc.stdout:            # an editable install may print its rebuild
            if line.strip() == "ready":
                break
        time.sleep(delay)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=300)[0]
    finally:
        proc.kill()
    result = json.loads(out.strip().splitlines()[-1])
    result["latency"] = result.get("caught", float("inf")) - sent
    return result


@POSIX_SIGNALS
@pytest.mark.parametrize("algo", FOUR)
def test_sigint_stops_a_long_call_between_trials(algo):
    """A real Ctrl-C (SIGINT from another process) while the kernel runs a call
    of 20,000 trials (10-60 s). Before: no kernel polled for signals; the
    interrupt landed when the call ended (6-72 s measured), and FPL/FTL were
    left with n_trials_ of the old count while the matrix held every row."""
    result = run_interrupted_child(algo, 0.5)
    assert "finished" not in result
    assert result["latency"] < 1.0, result       # polled about once a millisecond
    assert 5 < result["done"] < 20_000
    assert result["trace_ok"] and result["same"] is True and result["same_after"], result
    if sys.version_info >= (3, 11):
        assert f"after {result['done'] - 5} of the call's" in result["notes"][0]


@POSIX_SIGNALS
@pytest.mark.parametrize("algo", list(ALGOS))
def test_timer_handler_exception_stops_the_kernel(algo):
    """A SIGALRM handler that raises TimeoutError (a time limit on a fit): the
    kernel stops between trials, the estimator holds the trials before, and
    MEG/GD's generator has moved on by exactly their uniforms."""
    X = make_spiked_stream(60_000, 60, n_spikes=3, random_state=2)

    def handler(signum, frame):
        raise TimeoutError("time is up")

    old = signal.signal(signal.SIGALRM, handler)
    est = make(algo, 3).partial_fit(X[:10])
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(TimeoutError, match="time is up"):
            est.partial_fit(X[10:])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    done = est.n_trials_
    assert 10 <= done < len(X)
    ref = make(algo, 3).partial_fit(X[:10]).partial_fit(X[10:done])
    assert_same_state(est, ref)
    est.partial_fit(X[done:done + 50])
    ref.partial_fit(X[done:done + 50])
    assert_same_state(est, ref)


class Stop(Exception):
    pass


@pytest.fixture
def raise_at():
    """raise_at(polls, algo): a real SIGUSR1 at the kernel's poll number
    `polls` (one before each trial), whose handler raises Stop."""
    def handler(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGUSR1, handler)
    modules = {"meg": _capped, "gd": _capped}
    yield lambda polls, algo: modules.get(algo, _pca)._interrupt_at(polls, signal.SIGUSR1)
    _pca._interrupt_at(-1, 0)
    _capped._interrupt_at(-1, 0)
    signal.signal(signal.SIGUSR1, old)


@POSIX_SIGNALS
@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("at", [0, 1, 63, 64, 100])
def test_interrupt_at_an_exact_trial_keeps_whole_trials(algo, at, raise_at):
    """Stopped at the poll before trial `at` of a call: exactly `at` trials
    played, every field (buffered rows, counters, generator) theirs."""
    X = make_spiked_stream(400, 20, random_state=3)
    est = make(algo).partial_fit(X[:37])
    raise_at(at, algo)
    with pytest.raises(Stop):
        est.partial_fit(X[37:300])
    assert est.n_trials_ == 37 + at
    ref = make(algo).partial_fit(X[:37]).partial_fit(X[37:37 + at])
    assert_same_state(est, ref)


@POSIX_SIGNALS
@pytest.mark.parametrize("algo", FOUR)
def test_interrupted_fit_keeps_the_previous_fit(algo, raise_at):
    X = make_spiked_stream(300, 20, random_state=5)
    old = make(algo).fit(2 * X[:50])
    est = pickle.loads(pickle.dumps(old))
    raise_at(120, algo)
    with pytest.raises(Stop):
        est.fit(X)
    assert_same_state(est, old)


@POSIX_SIGNALS
@pytest.mark.parametrize("algo", FOUR)
def test_first_call_interrupted_before_any_trial(algo, raise_at):
    """The first decision is set up (the generator drawn for it), then the
    signal lands before trial 1: the estimator is fitted with 0 trials, as
    partial_fit(X[:0]) leaves it."""
    X = make_spiked_stream(50, 20, random_state=6)
    est = make(algo)
    raise_at(0, algo)
    with pytest.raises(Stop):
        est.partial_fit(X)
    assert_same_state(est, make(algo).partial_fit(X[:0]))


@POSIX_SIGNALS
def test_a_handler_that_does_not_raise_lets_the_call_finish(raise_at):
    X = make_spiked_stream(300, 20, random_state=7)
    seen = []
    old = signal.signal(signal.SIGUSR2, lambda signum, frame: seen.append(signum))
    try:
        _pca._interrupt_at(100, signal.SIGUSR2)
        est = make("fpl").partial_fit(X)
    finally:
        signal.signal(signal.SIGUSR2, old)
    assert seen == [signal.SIGUSR2]
    assert_same_state(est, make("fpl").partial_fit(X))


# == 4. threads ================================================================================

@pytest.mark.parametrize("algo", FOUR)
def test_two_threads_feeding_one_estimator_lose_nothing(algo):
    """Before (FPL): n_trials_ 6000 with 6001 trials in the matrix; lost
    calls. Many small calls from two threads: every trial counted once."""
    n = 12
    blocks = [make_spiked_stream(300, n, random_state=s) for s in (1, 2)]
    est = make(algo).partial_fit(blocks[0][:1])

    def run(X):
        for a in range(0, len(X), 3):
            est.partial_fit(X[a:a + 3])

    threads = [threading.Thread(target=run, args=(X,)) for X in blocks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = np.vstack([blocks[0][:1], *blocks])
    assert est.n_trials_ == len(every)
    np.testing.assert_allclose(est.cumulative_matrix(), every.T @ every, atol=1e-10)
    assert_sane(est)
    if algo in ("fpl", "ftl"):
        assert est.solver_stats_["solves"] == len(every)


@pytest.mark.parametrize("algo", FOUR)
def test_two_threads_on_a_fresh_estimator_initialise_it_once(algo):
    """Before: both threads initialised the estimator (two noise draws, one
    lost with the trials played on it)."""
    X = make_spiked_stream(400, 12, random_state=8)
    for _ in range(5):
        est = make(algo)
        threads = [threading.Thread(target=est.partial_fit, args=(B,))
                   for B in (X[:200], X[200:])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert est.n_trials_ == 400
        # one first decision, from the seed: the same noise as a serial run
        first = make(algo).partial_fit(X[:0])
        if algo == "fpl":
            np.testing.assert_array_equal(est._state.to_state()["N"],
                                          first._state.to_state()["N"])
        np.testing.assert_allclose(est.cumulative_matrix(), X.T @ X, atol=1e-10)


def test_pickling_while_another_thread_fits_gives_whole_calls():
    X = make_spiked_stream(3000, 40, random_state=9)
    est = make("fpl").partial_fit(X[:10])
    pickles = []
    stop = threading.Event()

    def snap():
        while not stop.is_set():
            pickles.append(pickle.dumps(est))

    t = threading.Thread(target=snap)
    t.start()
    for a in range(10, 3000, 100):
        est.partial_fit(X[a:a + 100])
    stop.set()
    t.join()
    assert pickles
    for blob in pickles[::max(1, len(pickles) // 10)]:
        twin = pickle.loads(blob)
        t = twin.n_trials_
        # whole calls only: 10, 110, ..., 2910, and the last call's 90 rows
        assert t == 3000 or (t - 10) % 100 == 0
        assert abs(np.trace(twin.cumulative_matrix()) - t) < 1e-9 * t


# == 5. extreme scales ============================================================================

@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("e", [-480, -240, 240, 480])
def test_vector_decisions_are_scale_invariant_up_to_1e144(algo, e):
    """Rows scaled by 2^e (exact): the same decisions bit for bit, gains
    scaled by 4^e exactly, while the instances' products x_i x_j stay normal
    numbers (2^-480 ~ 1e-144.5). Before: sigma="auto" formed ||x||^4 (inf for
    ||x|| ~ 1e77: non-orthonormal components, gain above the best possible)
    and the random walk's increments underflowed to 0 at small scales."""
    X = make_spiked_stream(200, 30, n_spikes=3, random_state=10)
    a = make(algo, 3).partial_fit(X)
    b = make(algo, 3).partial_fit(2.0 ** e * X)
    np.testing.assert_array_equal(b.components_, a.components_)
    assert b.cumulative_gain_ == 4.0 ** e * a.cumulative_gain_
    if algo.startswith("fpl"):
        assert b.sigma_ == 4.0 ** e * a.sigma_


@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("e", [-500, 500])
def test_dense_decisions_are_scale_invariant_over_1e150(algo, e):
    Xs = make_dense_stream(60, 12, random_state=11)
    a = make(algo).partial_fit_dense(Xs)
    b = make(algo).partial_fit_dense(2.0 ** e * Xs)
    np.testing.assert_array_equal(b.components_, a.components_)
    assert b.cumulative_gain_ == 2.0 ** e * a.cumulative_gain_


@pytest.mark.parametrize("algo", FOUR)
@pytest.mark.parametrize("scale", [1e-150, 1e-100, 1e77, 3e77, 1e100])
def test_rows_from_1e_150_to_1e100_are_learnt_sanely(algo, scale):
    """Scales that are not powers of two round the data differently, so the
    decisions are compared loosely (FTL's early, rank-deficient leaders break
    their ties differently): sane, and the gains of the same size."""
    X = make_spiked_stream(150, 20, n_spikes=2, random_state=12)
    est = make(algo, 2).partial_fit(scale * X)
    assert_sane(est)
    ref = make(algo, 2).partial_fit(X)
    np.testing.assert_allclose(est.cumulative_gain_ / scale ** 2, ref.cumulative_gain_,
                               rtol=2e-2)
    if algo == "fpl":
        assert np.isfinite(est.sigma_) and est.sigma_ > 0


@pytest.mark.parametrize("algo", FOUR)
def test_data_beyond_float64_are_refused_naming_them(algo):
    est = make(algo, 2).partial_fit(make_spiked_stream(10, 20, random_state=0))
    with pytest.raises(ValueError, match="X is too large"):
        est.partial_fit(1e150 * make_spiked_stream(10, 20, random_state=1))
    with pytest.raises(ValueError, match="Xs is too large"):
        make(algo, 2).partial_fit_dense(1e300 * make_dense_stream(10, 12, random_state=1))


def test_a_given_sigma_that_would_overflow_is_refused_naming_it():
    est = PerturbedLeaderPCA(2, sigma=1e298, random_state=0)
    with pytest.raises(ValueError, match="sigma"):
        est.partial_fit(make_spiked_stream(100, 20, random_state=0))
    assert not est.__sklearn_is_fitted__()


# == 6. loading read-only =========================================================================

@pytest.mark.parametrize("algo", list(ALGOS))
@pytest.mark.parametrize("kind", ["vector", "dense"])
def test_joblib_mmap_loaded_estimator_keeps_learning(tmp_path, algo, kind):
    """Before: FPL/FTL raised 'buffer source array is read-only' (noise_ and
    the state arrays were handed to the kernel as they were loaded). Now the
    state object takes copies of what it is handed."""
    data = make_spiked_stream(120, 16, random_state=13) if kind == "vector" else \
        make_dense_stream(40, 10, random_state=13)
    fit = "partial_fit" if kind == "vector" else "partial_fit_dense"
    est = getattr(make(algo), fit)(data[:70])
    path = tmp_path / "est.joblib"
    joblib.dump(est, path)
    loaded = joblib.load(path, mmap_mode="r")
    getattr(loaded, fit)(data[70:])
    getattr(est, fit)(data[70:])
    assert_same_state(loaded, est)


def test_a_pickle_of_another_state_layout_is_refused_clearly():
    """An earlier streamfit pickled an estimator's state as attributes (a
    record of the kernel's C struct beside its arrays), and a state object
    writes a format version: loading either of another version says so,
    never reads fields wrongly."""
    from streamfit._kernels import _dropout
    for algo in ("fpl", "meg", "dropout"):
        est = make(algo).partial_fit(make_spiked_stream(20, 8, n_spikes=2, random_state=0))
        state = est.__getstate__()
        old = {k: v for k, v in state.items() if k != "_state"}
        old.update(state_=np.zeros(1), block_=np.zeros((2, 8)), _rng=np.random.default_rng())
        with pytest.raises(ValueError, match="earlier streamfit"):
            type(est).__new__(type(est)).__setstate__(old)
        rebuild, (version, fields) = est._state.__reduce__()
        assert version == 1
        with pytest.raises(ValueError, match="state format 0.*format 1"):
            rebuild(0, fields)
    assert {_pca._rebuild, _capped._rebuild, _dropout._rebuild} >= {rebuild}


# == 7. small things ===============================================================================

@pytest.mark.parametrize("cls", [PerturbedLeaderPCA, MatrixEGPCA, MatrixGDPCA])
def test_negative_seed_is_refused_naming_random_state(cls):
    """Before: 'expected non-negative integer', from NumPy, naming nothing."""
    with pytest.raises(ValueError, match="random_state"):
        cls(2, random_state=-1).partial_fit(np.ones((3, 4)))
    with pytest.raises(ValueError, match="random_state"):
        goe_matrix(3, random_state=-1)


@pytest.mark.parametrize("call, name", [
    (lambda: auto_sigma(3, 5), "n_components"),
    (lambda: auto_sigma(3, 0), "n_components"),
    (lambda: auto_sigma(0, 1), "n_features"),
    (lambda: auto_sigma(10, 2, scale=-1.0), "scale"),
    (lambda: auto_sigma(10, 2, instances="sparse"), "instances"),
    (lambda: auto_sigma(10, 2, instances="dense", max_trace_sq=0.0), "max_trace_sq"),
    (lambda: regret_bound(100, 3, 5, 1.0), "n_components"),
    (lambda: regret_bound(-1, 10, 2, 1.0), "n_trials"),
    (lambda: regret_bound(100, 10, 2, 0.0), "sigma"),
])
def test_bound_helpers_check_their_arguments(call, name):
    """Before: auto_sigma(k > n) returned a number."""
    with pytest.raises(ValueError, match=name):
        call()


def test_bound_helpers_at_extreme_scales():
    assert auto_sigma(100, 4, scale=1e200) == pytest.approx(1e200 * auto_sigma(100, 4))
    assert auto_sigma(100, 4, scale=2.0 ** -1000) == 2.0 ** -1000 * auto_sigma(100, 4)
    r = regret_bound(1e4, 100, 4, 1e200 * auto_sigma(100, 4), scale=1e200)
    assert r == pytest.approx(1e200 * regret_bound(1e4, 100, 4, auto_sigma(100, 4)))


@pytest.mark.parametrize("solver", ["krylov", "exact"])
def test_what_is_reproducible_across_blas_thread_counts(solver):
    """The documented split (PerturbedLeaderPCA's docstring): the data's
    cumulative matrix and n_trials_ are the same bit for bit on 1 and 2 BLAS
    threads; the decisions are bit-reproducible at a fixed thread count, and
    across counts agree to the solver's tolerance (the block products and
    LAPACK split their sums by thread: ~3e-5 in the projections measured at
    n = 500, k = 10, Krylov; 4e-16 exact)."""
    # 130 trials: two flushes of the row buffer and two rows pending (numpy's
    # matmul of those split its sums by thread: cumulative_matrix() adds them
    # with the kernel's own dsyrk)
    X = make_spiked_stream(130, 500, n_spikes=5, random_state=14)
    runs = []
    for threads in (1, 2):
        with threadpool_limits(threads):
            runs.append(PerturbedLeaderPCA(5, solver=solver, random_state=0).partial_fit(X))
    a, b = runs
    assert np.array_equal(a.cumulative_matrix(), b.cumulative_matrix())
    assert a.best_gain_ == pytest.approx(b.best_gain_, rel=1e-13)
    for est in runs:
        assert_sane(est)
        assert est.solver_stats_["max_gap_ratio"] <= 1.0


# == 8. mid-stream set_params ========================================================================

# (algo, parameter, new value, what happens: "effect" or "refused")
SET_PARAMS = [
    ("fpl", "sigma", 0.05, "effect"), ("fpl", "sigma", "auto", "effect"),
    ("fpl", "solver", "exact", "effect"), ("fpl", "tol", 0.5, "effect"),
    ("fpl", "n_components", 3, "refused"), ("fpl", "noise", "independent", "refused"),
    ("fpl", "random_state", 1, "refused"),
    ("fpl-random_walk", "sigma", 0.001, "effect"),
    ("ftl", "solver", "krylov", "effect"), ("ftl", "tol", 0.1, "effect"),
    ("ftl", "n_components", 1, "refused"),
    ("meg", "eta", 0.3, "refused"), ("meg", "n_components", 3, "refused"),
    ("meg", "random_state", 5, "refused"),
    ("gd", "eta", "auto", "refused"), ("gd", "n_components", 1, "refused"),
    ("gd", "random_state", None, "refused"),
]


@pytest.mark.parametrize("algo, name, value, outcome", SET_PARAMS,
                         ids=[f"{a}-{n}-{v}" for a, n, v, _ in SET_PARAMS])
def test_set_params_mid_stream(algo, name, value, outcome):
    """Each parameter set between calls either takes effect at the next call
    (as a fresh estimator with it would, from the state so far) or is refused
    by that call with a ValueError naming it, leaving the state as it was; fit
    starts afresh with it. Before: unchecked changes corrupted later calls."""
    X = make_spiked_stream(200, 24, n_spikes=2, random_state=15)
    kw = {"eta": 0.5} if algo == "gd" else {}
    est = make(algo, 2, **kw).partial_fit(X[:80])
    before = pickle.loads(pickle.dumps(est))
    est.set_params(**{name: value})
    if outcome == "refused":
        with pytest.raises(ValueError, match=name):
            est.partial_fit(X[80:])
        assert_same_state(est, before)
        est.fit(X)                      # starts afresh, with the new value
        assert est.n_trials_ == 200 and getattr(est, name) == value
        return
    est.partial_fit(X[80:])
    assert est.n_trials_ == 200
    assert_sane(est)
    if name == "sigma" and value != "auto":
        assert est.sigma_ == value
    if name == "tol":
        assert est.gap_tolerance_ > 0
    if name == "solver" and value == "exact":
        assert est.solver_stats_["last_gap"] == 0.0
