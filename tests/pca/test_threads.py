"""FPL's threading policy: its kernel runs BLAS on one thread whatever the
caller's setting, restores the caller's setting afterwards (also when calls
overlap in several threads), and its decisions do not depend on the thread
count."""
import threading

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
