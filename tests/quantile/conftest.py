"""Fixtures for the online quantile regression tests."""
import pytest

# _cases holds what the quantile test modules share: rewrite its asserts as
# pytest does a test module's, for the same failure messages.
pytest.register_assert_rewrite("tests.quantile._cases")
