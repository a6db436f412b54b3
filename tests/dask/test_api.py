"""streamfit.dask's public names: documented with runnable examples (run by
tests/test_docs.py), importable without side effects."""
import pytest

pytest.importorskip("distributed")

import streamfit.dask  # noqa: E402


def test_every_public_name_has_an_example():
    assert set(streamfit.dask.__all__) >= {"stream_fit", "parallel_quantile_fit", "fit_groups",
                                           "best_gain", "regret", "ParallelQuantileFit"}
    for name in streamfit.dask.__all__:
        obj = getattr(streamfit.dask, name)
        assert obj.__doc__ and ">>>" in obj.__doc__, name
        assert "Examples" in obj.__doc__, name


def test_timeout_is_checked():
    from streamfit.dask._client import check_timeout

    assert check_timeout(None) == 10.0 and check_timeout(2) == 2.0
    for bad in (0, -1, float("inf"), float("nan"), "5", True):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            check_timeout(bad)
