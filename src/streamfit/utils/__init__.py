"""Utilities for people who build on streamfit.

- :mod:`streamfit.utils.estimator_checks`: the stream-estimator contract as
  checks anyone can run on their own estimator (``check_estimator``) or turn
  into pytest tests (``parametrize_with_checks``).
"""
