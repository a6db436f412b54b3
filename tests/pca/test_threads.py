"""FPL's threading policy: its kernel runs BLAS on one thread whatever the
caller's setting, restores the caller's setting afterwards (also when calls
overlap in several threads), and its decisions do not depend on the thread
count."""
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from streamfit import PerturbedLeaderPCA
from streamfit.pca._common import _one_blas_thread
from streamfit.simulate import make_spiked_stream


def _blas_threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_threads():
    with threadpool_limits(limits=2, user_api="blas"):
        if not any(t > 1 for t in _blas_threads()):
            pytest.skip("no BLAS whose thread count can be raised")
        yield


def test_one_blas_thread_inside_and_the_callers_count_after(two_threads):
    before = _blas_threads()
    with _one_blas_thread:
        assert set(_blas_threads()) == {1}
        with _one_blas_thread:                      # nested: still one
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}          # the inner exit does not restore
    assert _blas_threads() == before


def test_overlapping_calls_in_threads_restore_the_callers_count(two_threads):
    """Two threads whose calls overlap: save/restore per call would let the
    first one out restore 2 threads under the second (and the second restore
    1 at the end); the shared count restores once, after both."""
    before = _blas_threads()
    inside, release = threading.Barrier(2), threading.Event()
    seen = []

    def worker():
        with _one_blas_thread:
            inside.wait(timeout=30)
            seen.append(tuple(_blas_threads()))
            if not release.wait(timeout=30):
                raise TimeoutError
            seen.append(tuple(_blas_threads()))

    first = threading.Thread(target=worker)
    second = threading.Thread(target=worker)
    first.start()
    second.start()
    release.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert not first.is_alive() and not second.is_alive()
    assert len(seen) == 4 and all(set(s) == {1} for s in seen), seen
    assert _blas_threads() == before


def test_fpl_decisions_do_not_depend_on_the_blas_thread_count(two_threads):
    """n = 600: OpenBLAS threads dsyr, dsymm and the QR at this size when
    allowed to. Same seed and stream on 1 and 2 threads: the same projections
    bit for bit, and the caller's 2 threads back afterwards."""
    X = make_spiked_stream(30, 600, n_spikes=10, random_state=0)
    est2 = PerturbedLeaderPCA(10, random_state=1).partial_fit(X)
    assert max(_blas_threads()) == 2
    with threadpool_limits(limits=1):
        est1 = PerturbedLeaderPCA(10, random_state=1).partial_fit(X)
    np.testing.assert_array_equal(est1.components_, est2.components_)
    np.testing.assert_array_equal(est1.perturbed_, est2.perturbed_)
    assert est1.cumulative_gain_ == est2.cumulative_gain_


# -- the trial loop's own threads (n_jobs) -------------------------------------------------

from streamfit import FollowTheLeaderPCA  # noqa: E402
from streamfit._kernels import _pca  # noqa: E402
from streamfit._validation import trial_threads  # noqa: E402

PANEL_MIN = 384      # _symm_par.pxd's SYMM_PANEL_MIN (dgemm panels)
PANEL_MIN_SKINNY = 16    # its SYMM_PANEL_MIN_SKINNY (the AVX-512 kernels' panels)
PAR_MIN_N = 768      # _pca.pyx's: the trial loop's threads from this n on
N_THREADED = 800


SKINNY = [False, True] if _pca._skinny_kernels() else [False]


@pytest.mark.parametrize("skinny", SKINNY)
@pytest.mark.parametrize("n", [PANEL_MIN_SKINNY, 40, 129, 383, PANEL_MIN, 385, 512, 700, 1001])
@pytest.mark.parametrize("m", [1, 4, 15, 17])
def test_panelled_product_is_the_product_and_the_same_on_any_thread_count(n, m, skinny):
    """The Krylov product in row panels (a dsymm and two off-diagonal
    products each, by dgemm or by _skinny.h's AVX-512 kernels, on the valid
    triangle only; below PANEL_MIN one dsymm, except on the kernels' path,
    which takes panels from n = 16): S @ B to rounding, and bit for bit the same on 1, 2 and
    3 threads and on repeated calls (which switch between the pool and
    inline as the timings choose). The shapes cover the kernels' edges:
    panels of 128 rows and a last shorter one, blocks of 4 x 5 and 16 x 8
    with m not a multiple of either, sums with k % 8 != 0 rows."""
    rng = np.random.default_rng(n + m)
    G = rng.standard_normal((n, n))
    S = np.tril(G + G.T) + np.triu(np.full((n, n), np.nan), 1)   # upper: never read
    B = rng.standard_normal((m, n))
    full = np.tril(S) + np.tril(S, -1).T
    ref = _pca._symm_product(S, B, 1, skinny=skinny)
    np.testing.assert_allclose(ref, B @ full, rtol=0, atol=1e-12 * np.abs(full).sum(1).max())
    for threads, calls in [(1, 3), (2, 1), (2, 40), (3, 5)]:
        np.testing.assert_array_equal(_pca._symm_product(S, B, threads, calls, skinny=skinny),
                                      ref)


def _stream(n, T, dense=False, seed=0):
    if not dense:
        return make_spiked_stream(T, n, n_spikes=3, random_state=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(T):
        Q = np.linalg.qr(rng.standard_normal((n, 2)))[0]
        out.append(Q @ Q.T)
    return np.array(out)


CASES = {
    "fpl-fixed": (PerturbedLeaderPCA, {"random_state": 0}, False),
    "fpl-walk": (PerturbedLeaderPCA, {"random_state": 0, "noise": "random_walk"}, False),
    "fpl-independent": (PerturbedLeaderPCA, {"random_state": 0, "noise": "independent"}, False),
    "ftl": (FollowTheLeaderPCA, {}, False),
    "fpl-dense": (PerturbedLeaderPCA, {"random_state": 0}, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_decisions_do_not_depend_on_n_jobs(case):
    """n = 800 (panels and threads on): the same stream in two calls with
    n_jobs = 1, 2, 3, -1 and None: every state array bit for bit."""
    cls, kw, dense = CASES[case]
    n, T = N_THREADED, (4 if dense else 50)
    X = _stream(n, T, dense)
    fit = "partial_fit_dense" if dense else "partial_fit"
    states = []
    for n_jobs in (1, 2, 3, -1, None):
        est = cls(3, n_jobs=n_jobs, **kw)
        getattr(getattr(est, fit)(X[:T // 2]), fit)(X[T // 2:])
        states.append(est)
    ref = states[0]
    for est in states[1:]:
        for name in ("perturbed_", "cumulative_", "block_", "rows_"):
            np.testing.assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)
        assert est.state_.tobytes() == ref.state_.tobytes()
        assert est.solver_stats_ == ref.solver_stats_


def test_n_jobs_pickled_mid_stream_resumes_bit_identically():
    import pickle

    X = _stream(N_THREADED, 60)
    whole = PerturbedLeaderPCA(3, random_state=2, n_jobs=1).partial_fit(X)
    half = PerturbedLeaderPCA(3, random_state=2, n_jobs=2).partial_fit(X[:25])
    half = pickle.loads(pickle.dumps(half))
    half.set_params(n_jobs=-1).partial_fit(X[25:])      # n_jobs may change mid-stream
    np.testing.assert_array_equal(half.perturbed_, whole.perturbed_)
    np.testing.assert_array_equal(half.components_, whole.components_)


@pytest.mark.parametrize("bad, err", [(0, ValueError), (1.5, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_a_bad_n_jobs_is_refused_naming_it_with_the_state_unchanged(bad, err):
    X = _stream(N_THREADED, 20)
    est = PerturbedLeaderPCA(3, random_state=0, n_jobs=2).partial_fit(X[:10])
    before = est.perturbed_.copy(), est.state_.tobytes()
    with pytest.raises(err, match="n_jobs"):
        est.set_params(n_jobs=bad).partial_fit(X[10:])
    assert np.array_equal(est.perturbed_, before[0]) and est.state_.tobytes() == before[1]
    assert est.n_trials_ == 10


def test_trial_threads_rule():
    import joblib

    cores = joblib.cpu_count()
    assert trial_threads(1) == 1
    assert trial_threads(None, blas_threads=1) == 1          # threadpool_limits(1) is followed
    assert trial_threads(None, blas_threads=0) == cores      # unknown BLAS count: the cores
    assert trial_threads(None, blas_threads=10 ** 6) == cores
    assert trial_threads(-1) == cores
    assert trial_threads(10 ** 6) == cores
    assert trial_threads(-(cores + 5)) == 1


class _Stop(Exception):
    pass


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR1"), reason="POSIX signals")
@pytest.mark.parametrize("at", [1, 17])
def test_interrupt_with_helper_threads_keeps_whole_trials(at):
    """A signal handler that raises stops the call at the poll before trial
    `at` while the pool's helpers are alive (they block signals; the caller's
    thread takes it): exactly `at` trials played, the pool stopped, and the
    state that of `at` trials on one thread."""
    import os
    import signal

    def pool_helpers():
        # the pool's helpers by their name (C threads, which threading does not
        # see): other threads of the process -- an earlier test's, OpenBLAS's --
        # may start or end during the call, so the process's thread set is no
        # measure of them
        ids = set()
        for tid in (os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ()):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    if f.read().strip() == "streamfit-pool":
                        ids.add(tid)
            except OSError:                 # the thread ended while we looked
                pass
        return ids

    def no_helpers_left():
        # a joined helper's /proc entry can outlast pthread_join by a moment
        # (join returns when the kernel clears the thread id, before the task
        # is reaped): wait up to 2 s for it; a helper that was not joined
        # stays, and fails this
        deadline = time.monotonic() + 2.0
        while pool_helpers() and time.monotonic() < deadline:
            time.sleep(0.01)
        return not pool_helpers()

    inside = []

    def handler(signum, frame):
        inside.append(pool_helpers())       # during the call: the pool's helper is alive
        raise _Stop()

    X = _stream(N_THREADED, 80)
    old = signal.signal(signal.SIGUSR1, handler)
    try:
        est = PerturbedLeaderPCA(3, random_state=1, n_jobs=2).partial_fit(X[:5])
        _pca._interrupt_at(at, signal.SIGUSR1)
        assert no_helpers_left()            # no pool outlives its call
        with pytest.raises(_Stop):
            est.partial_fit(X[5:])
    finally:
        _pca._interrupt_at(-1, 0)
        signal.signal(signal.SIGUSR1, old)
    assert no_helpers_left()                # the helpers were joined
    if os.path.isdir("/proc/self/task") and two_cores():
        assert len(inside) == 1 and len(inside[0]) == 1     # one helper, alive inside
    assert est.n_trials_ == 5 + at
    ref = PerturbedLeaderPCA(3, random_state=1, n_jobs=1).partial_fit(X[:5 + at])
    np.testing.assert_array_equal(est.perturbed_, ref.perturbed_)
    np.testing.assert_array_equal(est.components_, ref.components_)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_pool_runs_every_task_once_and_its_helpers_take_part(threads):
    """_par.h's loops: every task of every loop runs exactly once, and with
    tasks long enough for a helper to wake (32 x 0.3 ms) the helpers run
    some of them (threads = 1 starts none)."""
    import joblib

    runs, by_helpers = _pca._pool_probe(threads, 32, 6, 3e-4)
    assert (runs == 6).all(), runs
    if threads == 1:
        assert by_helpers == 0
    elif joblib.cpu_count() >= 2:
        assert 0 < by_helpers < 6 * 32


def two_cores():
    import joblib

    from streamfit._kernels._threads import one_blas_thread

    with one_blas_thread:       # (looks the BLAS libraries up)
        safe = one_blas_thread.concurrent_calls_safe
    return joblib.cpu_count() >= 2 and safe


@pytest.mark.parametrize("n", [833, 1031])
def test_three_threads_and_odd_sizes_change_nothing(n, monkeypatch):
    """Three threads in the trial loop (past the core cap, which only
    trial_threads applies: oversubscribed, where races would show) at sizes
    whose last panels are partial: the one-thread state bit for bit."""
    from streamfit.pca import _fpl

    X = _stream(n, 24, seed=n)
    ref = PerturbedLeaderPCA(3, random_state=4, n_jobs=1).partial_fit(X)
    monkeypatch.setattr(_fpl, "trial_threads", lambda n_jobs, blas: 3)
    est = PerturbedLeaderPCA(3, random_state=4).partial_fit(X[:10]).partial_fit(X[10:])
    np.testing.assert_array_equal(est.perturbed_, ref.perturbed_)
    np.testing.assert_array_equal(est.components_, ref.components_)
    assert est.state_.tobytes() == ref.state_.tobytes()


def test_pool_policy_prefers_the_faster_way_and_probes_the_other_rarely():
    """_par.h's choice, replayed on given loop times (no clock)."""
    n = 3000
    fast, slow = np.full(n, 1.0), np.full(n, 2.0)
    # the pool faster: after the first two loops (one each way) inline runs
    # only as probes, at doubling intervals (16, 32, ..., 1024)
    on_pool, probes = _pca._par_policy(fast, slow)
    assert on_pool[0] == 1 and on_pool[1] == 0
    inline_later = np.flatnonzero(on_pool[2:] == 0) + 2
    assert (probes[inline_later] == 1).all()
    assert 5 <= len(inline_later) <= 12, inline_later
    assert np.all(np.diff(inline_later) >= 16)
    # inline faster: the mirror image
    on_pool, probes = _pca._par_policy(slow, fast)
    pool_later = np.flatnonzero(on_pool[2:] == 1) + 2
    assert (probes[pool_later] == 1).all() and 5 <= len(pool_later) <= 12
    # the costs swap at loop 1000: within one probe interval (<= 1024
    # loops) the choice follows, and a probe that wins resets the interval
    pool_dt = np.where(np.arange(n) < 1000, 1.0, 2.0)
    inline_dt = np.where(np.arange(n) < 1000, 2.0, 1.0)
    on_pool, _ = _pca._par_policy(pool_dt, inline_dt)
    assert on_pool[200:1000].mean() > 0.97
    assert on_pool[1000 + 1024 + 1:].mean() < 0.03


def test_the_pools_timings_carry_over_calls_and_are_not_pickled():
    """Small calls keep what the threads cost (no fresh learning each call):
    the estimator's _pool_timings count loops across calls; they describe
    the machine, not the model, so a pickle leaves them out; a wrong-length
    record is refused by the kernel."""
    import pickle

    from streamfit.pca import _fpl

    X = _stream(N_THREADED, 12)
    est = PerturbedLeaderPCA(3, random_state=0, n_jobs=2)
    for i in range(0, 12, 3):
        est.partial_fit(X[i:i + 3])
    tm = est._pool_timings
    if two_cores():
        assert tm[-1] == N_THREADED
        # loops so far (each call would start from 0 if it relearnt): the
        # row updates, each inside its trial's first product (their own
        # timings: they cost about twice a plain product), and the products
        assert tm[2] == 12 and tm[7] >= 12
    assert "_pool_timings" not in pickle.loads(pickle.dumps(est)).__dict__
    if two_cores():     # (the record is only read when the threads start)
        with pytest.raises(ValueError, match="timings"):
            _fpl._run(2, np.zeros(3), X[:1], np.ones(1), np.ones(1), est.state_.copy(),
                      _fpl.PerturbedLeaderPCA(3)._params(N_THREADED, "vector"),
                      est.perturbed_.copy(), est.noise_, est.cumulative_.copy(),
                      est.rows_.copy(), est.block_.copy(), est._rng.bit_generator.capsule)
