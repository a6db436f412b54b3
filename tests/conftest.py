"""Shared fixtures: one BLAS thread, small synthetic streams with fixed seeds."""
import signal

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from streamfit.simulate import make_linear_stream

# tests/quantile/_cases holds what the quantile test modules share (and
# tests/kernels reads the state through it): rewrite its asserts as pytest
# does a test module's, for the same failure messages. Registered here, since
# tests/kernels imports it before tests/quantile/conftest.py is loaded.
pytest.register_assert_rewrite("tests.quantile._cases")

# A shell starts background jobs with SIGINT ignored, and Python then keeps it
# ignored: the interrupt tests (tests/reliability) would see no
# KeyboardInterrupt. They test Python's default handling, so put it back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module", autouse=True)
def single_thread_blas():
    # The tests make thousands of small BLAS/LAPACK calls (the PCA solvers,
    # the README's examples), on shared 2-core machines: an OpenBLAS thread
    # pool makes them ~10x slower there. Module scope, so the limit never
    # outlives a test module. Results are compared within one process, so the
    # thread count does not affect them.
    with threadpool_limits(limits=1):
        yield


@pytest.fixture
def stream():
    """(X, y): 400 rows of the paper's model, d = 5, tau = 0.3, t_1.1 noise.

    Function-scoped fresh arrays, so that no test can leak a mutation into another.
    """
    X, y, _ = make_linear_stream(400, 5, tau=0.3, snr=5.0, random_state=0)
    return X, y


@pytest.fixture
def diverging_stream():
    """Positive X and huge positive y: every residual starts positive, so the
    first (sub-)gradient step of a huge constant stepsize overflows."""
    rng = np.random.default_rng(1)
    X = 1.0 + np.abs(rng.standard_normal((24, 5)))
    y = 1e100 * (1.0 + np.abs(rng.standard_normal(24)))
    return X, y
