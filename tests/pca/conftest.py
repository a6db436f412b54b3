"""Fixtures for the online PCA tests."""
import pytest

# _cases holds the contract checks test_contract.py and test_capped.py share:
# rewrite its asserts as pytest does a test module's, for the same failure
# messages. Its name as the test modules' relative import gives it.
pytest.register_assert_rewrite("tests.pca._cases")

