"""The scikit-learn estimator checks each streamfit estimator fails by
design, with the reason: the one source for ``check_estimator`` and
``parametrize_with_checks``.

scikit-learn (since 1.6) reads expected failures only from the caller
(``check_estimator(est, expected_failed_checks=...)``,
``parametrize_with_checks(..., expected_failed_checks=callable)``); the
estimator tag that carried them (``_xfail_checks``) is gone. Each estimator
declares its own in a ``_expected_failed_checks()`` method, next to the code
that causes them; :func:`expected_failed_checks` reads it.
"""
from __future__ import annotations

__all__ = ["expected_failed_checks"]


def expected_failed_checks(estimator):
    """The scikit-learn checks ``estimator`` fails by design, with the reason.

    Pass the result to scikit-learn's ``check_estimator`` (or the function
    itself to ``parametrize_with_checks``): the checks in it are reported as
    expected failures (``"xfail"``), every other check must pass.

    Parameters
    ----------
    estimator : estimator instance
        A streamfit estimator (or a subclass); any other estimator gets ``{}``.

    Returns
    -------
    dict of str to str
        ``{check name: reason}``; empty when every check passes. It depends on
        the configuration (e.g. several quantiles predict one column each).

    Examples
    --------
    >>> from sklearn.utils.estimator_checks import check_estimator
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.utils.estimator_checks import expected_failed_checks
    >>> from streamfit.schedules import StatisticalSchedule
    >>> # a warm-up short enough to learn from the checks' few dozen rows
    >>> short = StatisticalSchedule(n_warmup=5, window=16)
    >>> est = OnlineQuantileRegressor([0.25, 0.75], schedule=short)
    >>> for name in sorted(expected_failed_checks(est)):
    ...     print(name)
    check_estimator_sparse_array
    check_estimator_sparse_matrix
    check_regressors_train
    check_sample_weight_equivalence_on_dense_data
    check_sample_weight_equivalence_on_sparse_data
    >>> expected = expected_failed_checks(est)
    >>> results = check_estimator(est, expected_failed_checks=expected,
    ...                           on_fail=None, on_skip=None)
    >>> sorted({r["status"] for r in results})
    ['passed', 'skipped', 'xfail']
    """
    declared = getattr(estimator, "_expected_failed_checks", None)
    return dict(declared()) if callable(declared) else {}
