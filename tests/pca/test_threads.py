"""FPL's threads: its trial loop runs on OpenMP threads (``n_jobs``, as
scikit-learn counts them, visible to and limited by threadpoolctl), never
changes the BLAS thread count the caller set, and its decisions depend on
neither."""
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from streamfit import PerturbedLeaderPCA
from streamfit.simulate import make_spiked_stream

from .._registry import spec


def _blas_threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_threads():
    with threadpool_limits(limits=2, user_api="blas"):
        if not any(t > 1 for t in _blas_threads()):
            pytest.skip("no BLAS whose thread count can be raised")
        yield


def test_a_fit_leaves_the_blas_thread_count_alone(two_threads):
    """During and after a fit on two OpenMP threads, the BLAS libraries keep
    the count the caller set (read from another thread while the fit runs)."""
    X = make_spiked_stream(60, 900, n_spikes=5, random_state=0)
    before = _blas_threads()
    seen, done = [], threading.Event()

    def watch():
        while not done.is_set():
            seen.append(tuple(_blas_threads()))
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        PerturbedLeaderPCA(5, random_state=0, n_jobs=2).partial_fit(X)
    finally:
        done.set()
        watcher.join(timeout=30)
    assert seen and set(seen) == {tuple(before)}, set(seen)
    assert _blas_threads() == before


def test_fpl_decisions_follow_the_blas_thread_count_only_to_rounding(two_threads):
    """n = 600: LAPACK's solves run on the BLAS threads the caller set,
    whose sums may round differently on 1 and 2 threads (the library does
    not force one BLAS thread: that would change a process-wide count under
    the caller's feet). With exact solves the decisions agree to rounding --
    the same projections V^T V, the same gains; a warm-started solve, which
    stops at its tolerance, then follows its own path within that
    tolerance. For one thread count they are bit-identical."""
    X = make_spiked_stream(30, 600, n_spikes=10, random_state=0)
    est2 = PerturbedLeaderPCA(10, random_state=1, solver="exact").partial_fit(X)
    again = PerturbedLeaderPCA(10, random_state=1, solver="exact").partial_fit(X)
    np.testing.assert_array_equal(again.components_, est2.components_)
    assert max(_blas_threads()) == 2
    with threadpool_limits(limits=1, user_api="blas"):
        est1 = PerturbedLeaderPCA(10, random_state=1, solver="exact").partial_fit(X)
    V1, V2 = est1.components_, est2.components_
    np.testing.assert_allclose(V1.T @ V1, V2.T @ V2, rtol=0, atol=1e-12)
    assert est1.cumulative_gain_ == pytest.approx(est2.cumulative_gain_, rel=1e-12)


# -- the trial loop's own threads (n_jobs) -------------------------------------------------

from streamfit._kernels import _pca, _testing  # noqa: E402
from streamfit._validation import effective_n_threads  # noqa: E402

PAR_MIN_N = 768      # _symm_par.pxd's: the trial loop's threads from this n on
N_THREADED = 800


@pytest.mark.parametrize("n", [1, 15, 16, 40, 129, 383, 385, 512, 700, PAR_MIN_N, 1001])
@pytest.mark.parametrize("m", [1, 4, 15, 17])
def test_panelled_product_is_the_product_and_the_same_on_any_thread_count(n, m):
    """The Krylov product in row panels of 128 (each two off-diagonal
    products and its diagonal block by _skinny.h's kernels, on the valid
    triangle only): S @ B to rounding, and bit for bit the same on 1, 2 and
    3 threads (below PAR_MIN_N always one). The shapes cover the kernels'
    edges: a last shorter panel, register blocks with m not a multiple of
    theirs, sums with k % 8 != 0 rows."""
    rng = np.random.default_rng(n + m)
    G = rng.standard_normal((n, n))
    S = np.tril(G + G.T) + np.triu(np.full((n, n), np.nan), 1)   # upper: never read
    B = rng.standard_normal((m, n))
    full = np.tril(S) + np.tril(S, -1).T
    ref = _testing.symm_product(S, B, 1)
    np.testing.assert_allclose(ref, B @ full, rtol=0, atol=1e-12 * np.abs(full).sum(1).max())
    for threads in (1, 2, 3):
        np.testing.assert_array_equal(_testing.symm_product(S, B, threads), ref)


def _assert_same_dict(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key], key


def assert_same_state(a, b):
    """Two estimators' states bit for bit: every array, counter and the bit
    generator (the n_jobs setting aside: it is not part of the decisions)."""
    sa, sb = a._state.to_state(), b._state.to_state()
    sa.pop("n_jobs")
    sb.pop("n_jobs")
    _assert_same_dict(sa, sb)


def _stream(n, T, dense=False, seed=0):
    if not dense:
        return make_spiked_stream(T, n, n_spikes=3, random_state=seed)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(T):
        Q = np.linalg.qr(rng.standard_normal((n, 2)))[0]
        out.append(Q @ Q.T)
    return np.array(out)


# name -> (class, parameters, dense instances): the registry's (tests/_registry.py)
CASES = {**{name: (*spec(name), False)
            for name in ("fpl-fixed", "fpl-random_walk", "fpl-independent", "ftl")},
         "fpl-dense": (*spec("fpl-fixed"), True)}


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
        assert_same_state(est, ref)
        assert est.solver_stats_ == ref.solver_stats_


def test_n_jobs_pickled_mid_stream_resumes_bit_identically():
    import pickle

    X = _stream(N_THREADED, 60)
    whole = PerturbedLeaderPCA(3, random_state=2, n_jobs=1).partial_fit(X)
    half = PerturbedLeaderPCA(3, random_state=2, n_jobs=2).partial_fit(X[:25])
    half = pickle.loads(pickle.dumps(half))
    half.set_params(n_jobs=-1).partial_fit(X[25:])      # n_jobs may change mid-stream
    assert_same_state(half, whole)
    np.testing.assert_array_equal(half.components_, whole.components_)


@pytest.mark.parametrize("bad, err", [(0, ValueError), (1.5, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_a_bad_n_jobs_is_refused_naming_it_with_the_state_unchanged(bad, err):
    X = _stream(N_THREADED, 20)
    est = PerturbedLeaderPCA(3, random_state=0, n_jobs=2).partial_fit(X[:10])
    before = est._state.to_state()
    with pytest.raises(err, match="n_jobs"):
        est.set_params(n_jobs=bad).partial_fit(X[10:])
    _assert_same_dict(est._state.to_state(), before)
    assert est.n_trials_ == 10


def test_n_jobs_means_what_it_means_in_scikit_learn():
    """None and -1: the OpenMP runtime's count for this thread, capped at
    the usable cores (sklearn's _openmp_effective_n_threads); -k all but
    k - 1; k > 0 that many; threadpoolctl's OpenMP limit is followed."""
    import joblib

    from streamfit._kernels._threads import openmp_max_threads

    cores = joblib.cpu_count()
    most = openmp_max_threads() if os.environ.get("OMP_NUM_THREADS") else \
        min(openmp_max_threads(), cores)
    assert effective_n_threads(None) == effective_n_threads(-1) == most
    assert effective_n_threads(1) == 1 and effective_n_threads(3) == 3
    assert effective_n_threads(-(most + 5)) == 1
    with threadpool_limits(1, user_api="openmp"):
        assert effective_n_threads(None) == 1
    try:
        from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
    except ImportError:         # pragma: no cover - a private helper
        return
    for n_jobs in (None, -1, -2, 1, 2):
        assert effective_n_threads(n_jobs) == _openmp_effective_n_threads(n_jobs)


def test_the_kernels_openmp_runtime_is_visible_to_and_limited_by_threadpoolctl():
    """The OpenMP runtime the kernels call (omp_get_max_threads, compiled in
    streamfit) follows threadpoolctl's limit: threadpoolctl found that very
    library. (With another copy it would not see, the count would stay.)"""
    from streamfit._kernels._threads import openmp_max_threads

    if not any(lib["user_api"] == "openmp" for lib in threadpool_info()):
        pytest.skip("a build without OpenMP")
    with threadpool_limits(2, user_api="openmp"):
        assert openmp_max_threads() == 2
        with threadpool_limits(1, user_api="openmp"):
            assert openmp_max_threads() == 1
        assert openmp_max_threads() == 2


_FORK_CHILD = """
import os, sys, numpy as np
from streamfit import PerturbedLeaderPCA
X = np.random.default_rng(0).standard_normal((40, 800)) / 30
est = PerturbedLeaderPCA(3, random_state=0, n_jobs=2).partial_fit(X[:20])   # threads ran
pid = os.fork()
if pid == 0:
    try:
        est.partial_fit(X[20:])         # a parallel region in the child
        PerturbedLeaderPCA(3, random_state=0, n_jobs=2).partial_fit(X)
        os._exit(0)
    except BaseException:
        os._exit(3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_fork_after_a_parallel_region_does_not_hang():
    """libgomp's thread pool does not survive fork: a child's parallel region
    after the parent's must still run (and end)."""
    out = subprocess.run([sys.executable, "-c", _FORK_CHILD], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr


class _Stop(Exception):
    pass


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals (SIGUSR1)")
@pytest.mark.parametrize("at", [1, 17])
def test_interrupt_with_openmp_threads_keeps_whole_trials(at):
    """A signal handler that raises stops the call at the poll before trial
    `at` while the trial loop runs on two OpenMP threads (the caller's
    thread takes the signal): exactly `at` trials played, and the state that
    of `at` trials on one thread."""

    def handler(signum, frame):
        raise _Stop()

    X = _stream(N_THREADED, 80)
    old = signal.signal(signal.SIGUSR1, handler)
    try:
        est = PerturbedLeaderPCA(3, random_state=1, n_jobs=2).partial_fit(X[:5])
        _pca._interrupt_at(at, signal.SIGUSR1)
        with pytest.raises(_Stop):
            est.partial_fit(X[5:])
    finally:
        _pca._interrupt_at(-1, 0)
        signal.signal(signal.SIGUSR1, old)
    assert est.n_trials_ == 5 + at
    ref = PerturbedLeaderPCA(3, random_state=1, n_jobs=1).partial_fit(X[:5 + at])
    assert_same_state(est, ref)
    np.testing.assert_array_equal(est.components_, ref.components_)


@pytest.mark.parametrize("n", [833, 1031])
def test_three_threads_and_odd_sizes_change_nothing(n):
    """Three threads in the trial loop (oversubscribed on two cores, where
    races would show) at sizes whose last panels are partial: the
    one-thread state bit for bit."""
    X = _stream(n, 24, seed=n)
    ref = PerturbedLeaderPCA(3, random_state=4, n_jobs=1).partial_fit(X)
    est = PerturbedLeaderPCA(3, random_state=4, n_jobs=3).partial_fit(X[:10]).partial_fit(X[10:])
    assert_same_state(est, ref)
    np.testing.assert_array_equal(est.components_, ref.components_)


WAIT_PROBE = """
import os, sys
before = {k: os.environ.get(k) for k in ("GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_WAIT_POLICY")}
import streamfit._kernels
from streamfit import PerturbedLeaderPCA
from streamfit.simulate import make_spiked_stream
after = {k: os.environ.get(k) for k in before}
PerturbedLeaderPCA(2, random_state=0).partial_fit(make_spiked_stream(5, 800, random_state=0))
print(before == after)
"""


@pytest.mark.parametrize("user", [None, ("OMP_WAIT_POLICY", "active"), ("GOMP_SPINCOUNT", "5")])
def test_loading_the_kernels_leaves_the_environment_as_it_was(user):
    """The runtime's spin-wait is chosen around its first load only: the
    process's environment afterwards is what it was (with or without a
    user's own setting)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_WAIT_POLICY")}
    if user is not None:
        env[user[0]] = user[1]
    out = subprocess.run([sys.executable, "-c", WAIT_PROBE], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # (the last line: an editable install's rebuild-on-import prints first)
    assert out.stdout.strip().splitlines()[-1:] == ["True"], out.stdout
