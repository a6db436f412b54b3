"""float32 rows to Follow the (Perturbed) Leader: read as float32 by the kernel
(no float64 copy of the block), accumulated in float64, with the decisions of
the same rows given as float64 (float32 -> float64 is exact)."""
import tracemalloc

import numpy as np
import pytest

from streamfit import FollowTheLeaderPCA, PerturbedLeaderPCA
from streamfit.simulate import make_spiked_stream


def _pair(make):
    return make(), make()


@pytest.mark.parametrize("make", [
    lambda: PerturbedLeaderPCA(3, random_state=0),
    lambda: PerturbedLeaderPCA(3, noise="random_walk", random_state=1),
    lambda: PerturbedLeaderPCA(3, noise="independent", random_state=2),
    lambda: PerturbedLeaderPCA(3, sigma=0.05, solver="exact", random_state=3),
    lambda: FollowTheLeaderPCA(3),
], ids=["fixed", "random_walk", "independent", "given-sigma-exact", "ftl"])
def test_float32_rows_make_the_decisions_of_their_float64_copy(make):
    X32 = (3.0 * make_spiked_stream(300, 40, n_spikes=3, random_state=5)).astype(np.float32)
    X64 = X32.astype(np.float64)
    a, b = _pair(make)
    # blocks of several sizes, the row buffer (64 rows) crossed mid-call
    for lo, hi in [(0, 1), (1, 70), (70, 71), (71, 300)]:
        a.partial_fit(X32[lo:hi])
        b.partial_fit(X64[lo:hi])
        np.testing.assert_array_equal(a.components_, b.components_)
    assert a.cumulative_gain_ == b.cumulative_gain_
    assert a.sigma_ == b.sigma_
    np.testing.assert_array_equal(a.perturbed_matrix(), b.perturbed_matrix())
    np.testing.assert_array_equal(a.cumulative_matrix(), b.cumulative_matrix())
    assert a.cumulative_matrix().dtype == np.float64
    # fit takes the same path
    c, d = _pair(make)
    np.testing.assert_array_equal(c.fit(X32).components_, d.fit(X64).components_)


def test_float32_rows_are_not_copied_to_float64():
    """The estimator's state exists already; a call with a float32 block then
    allocates far less than a float64 copy of the block (2x its bytes): the
    norms are widened in chunks of ~4 MB, the rows one at a time in the
    kernel. Measured through tracemalloc, which sees NumPy's allocations."""
    n, T = 500, 6000                                      # 12 MB of float32 rows
    X = make_spiked_stream(T + 5, n, n_spikes=3, random_state=0).astype(np.float32)
    est = PerturbedLeaderPCA(3, random_state=0).partial_fit(X[:5])
    block = np.ascontiguousarray(X[5:])
    tracemalloc.start()
    try:
        est.partial_fit(block[:1])                        # warm the parameter cache
        tracemalloc.reset_peak()
        est.partial_fit(block[1:])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.5 * block.nbytes, (peak, block.nbytes)
    assert est.n_trials_ == T + 5


def test_other_dtypes_and_other_estimators_still_convert_to_float64():
    from streamfit import MatrixEGPCA
    X = make_spiked_stream(40, 12, n_spikes=2, random_state=0)
    ints = np.rint(10 * X).astype(np.int32)
    a = PerturbedLeaderPCA(2, random_state=0).partial_fit(ints)
    b = PerturbedLeaderPCA(2, random_state=0).partial_fit(ints.astype(np.float64))
    np.testing.assert_array_equal(a.components_, b.components_)
    # float16 is not float32: converted (and so the same decisions too)
    h = X.astype(np.float16)
    a = PerturbedLeaderPCA(2, random_state=0).partial_fit(h)
    b = PerturbedLeaderPCA(2, random_state=0).partial_fit(h.astype(np.float64))
    np.testing.assert_array_equal(a.components_, b.components_)
    m = MatrixEGPCA(2).partial_fit(X.astype(np.float32))
    assert m.n_trials_ == 40
