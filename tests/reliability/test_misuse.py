"""What a user can hand streamfit or do around it that streamfit did not
arrange: records edited to -1e6, -1 or NaN (in the pickle of a kernel state
object, and of a fitted estimator), a NaN window, kernel objects shared between
threads, a fork while a thread is inside a call (with os.fork and the 'fork'
start method), a threadpool_limits block in one thread while FPL fits in
another, an FPL fit inside a fork multiprocessing worker under -W error.

Every case runs in a child process (``_isolated.run_cases``): a signal or a
hang (the child killed after its time limit) fails the test by name. The
cases are in ``_misuse_cases`` (so that a script can run them against any
installed streamfit)."""
import re
import sys

import pytest

from . import _misuse_cases as M
from ._isolated import child_env, describe, run_cases

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork")


def _run(names, timeout=60, one_blas_thread=True):
    cases = [{"name": name} for name in names]
    env = child_env(one_blas_thread=one_blas_thread)
    outcomes = run_cases("_misuse_cases", "by_name", cases, timeout=timeout, env=env,
                         workers=2)
    return dict(zip(names, outcomes))


def _value(name, outcome):
    assert outcome["status"] == "ok", describe({"name": name}, outcome)
    return outcome["value"]


# -- records ------------------------------------------------------------------------------

RECORD_CASES = [n for n in M.CASES if "state =" in n or "window" in n or "block edited" in n]


@pytest.fixture(scope="module")
def records():
    return _run(RECORD_CASES, timeout=30)


def _names_a_field(message, dtype_names):
    found = re.search(r"field '([A-Za-z0-9_]+)'", message)
    return found is not None and found.group(1) in dtype_names


@pytest.mark.parametrize("name", [n for n in RECORD_CASES if "TopK" not in n])
def test_a_bad_record_is_refused_naming_its_field(records, name):
    """Filled with -1e6 (a crash), -1 (a negative index, silently used) or
    NaN, or a NaN window (a hang): a ValueError naming the field."""
    from streamfit._kernels import _quantile as _k
    res = _value(name, records[name])
    assert res["result"] == "refused", (name, res)
    assert res["type"] == "ValueError", (name, res)
    fields = set(_k.STATE_DTYPE.names)
    if "window values" in name:         # the array beside the records
        assert "field 'window' holds NaN" in res["message"], res["message"]
    elif "window" in name:              # the schedule's setting
        assert re.search(r"'settings': schedule\.window\b", res["message"]), res["message"]
    else:
        assert _names_a_field(res["message"], fields), (name, res["message"])


def test_a_topk_block_edited_between_solves_is_refused_not_used(records):
    name = "TopK block edited to non-orthonormal, pickled -> solve(tol)"
    res = _value(name, records[name])
    assert res["result"] == "refused" and res["type"] == "ValueError", res
    assert "_V" in res["message"] and "orthonormal" in res["message"], res["message"]


# -- threads, fork, BLAS, multiprocessing -----------------------------------------------------

PROCESS_CASES = [n for n in M.CASES if n not in RECORD_CASES]


@pytest.fixture(scope="module")
def processes():
    # the BLAS cases need the process's own BLAS thread count (more than one)
    return _run(PROCESS_CASES, timeout=90, one_blas_thread=False)


@pytest.mark.parametrize("name", PROCESS_CASES)
def test_threads_and_forks_lose_nothing_and_never_hang(processes, name):
    res = _value(name, processes[name])
    if res["result"] == "skipped":
        pytest.skip(res["why"])
    if res.get("mid_fit") is False:
        pytest.skip("the fit ended before the fork or the block began: nothing was tested")
    assert res["result"] == "correct", (name, res)
    if "FPL): child" in name:
        # the child's partial_fit said why it refused
        assert "forked" in res["message"] and "fit()" in res["message"], res["message"]


def test_every_case_is_tested():
    assert sorted(RECORD_CASES + PROCESS_CASES) == sorted(M.CASES)
    assert len(RECORD_CASES) == 14
