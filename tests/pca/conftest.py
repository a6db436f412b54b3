"""Fixtures for the online PCA tests."""
import pytest

# _cases holds the contract checks test_contract.py and test_capped.py share:
# rewrite its asserts as pytest does a test module's, for the same failure
# messages. Its name as the test modules' relative import gives it.
pytest.register_assert_rewrite("tests.pca._cases")


@pytest.fixture(scope="module", autouse=True)
def single_thread_blas():
    # These tests make thousands of small LAPACK calls (n <= 400), on a shared
    # 2-core machine: an OpenBLAS thread pool makes each ~10x slower there.
    # Module scope, so that the limit never outlives tests/pca. Results are
    # compared within one process, so the thread count does not affect them.
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1):
        yield
