"""OnlineLowRankQuantileRegressor under scikit-learn's own estimator checks.

Its samples are matrices (an (T, d1, d2) array, a pair of factors or index
pairs), and its tags say so (``two_d_array=False``, ``three_d_array=True``):
scikit-learn's checks feed 2-D arrays of feature rows, so scikit-learn runs
only the one that needs no data (cloning) and skips the rest with a
``SkipTestWarning`` naming the input tags."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import SkipTestWarning
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks

from streamfit import OnlineLowRankQuantileRegressor
from streamfit.utils.estimator_checks import expected_failed_checks
from streamfit.exceptions import WarmupWarning
from streamfit.schedules import StatisticalSchedule

ESTIMATORS = [
    OnlineLowRankQuantileRegressor(),
    OnlineLowRankQuantileRegressor(rank=2, loss="squared", shape=(12, 9),
                                   schedule=StatisticalSchedule(n_warmup=5)),
]

with pytest.warns(SkipTestWarning, match="three_d_array=True"):
    _decorate = parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks,
                                        xfail_strict=True)


@_decorate
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("est", ESTIMATORS, ids=repr)
def test_a_users_check_estimator_runs_what_applies_and_says_why_not_the_rest(est):
    with pytest.warns(SkipTestWarning, match="Can't test estimator "
                      "OnlineLowRankQuantileRegressor which requires input"):
        results = check_estimator(est, on_skip=None)
    assert [(r["check_name"], r["status"]) for r in results] == \
        [("check_estimator_cloneable", "passed")]
    assert expected_failed_checks(est) == {}


def test_a_fit_too_short_to_leave_the_warmup_warns():
    X = np.random.default_rng(0).standard_normal((50, 4, 4))
    with pytest.warns(WarmupWarning, match="OnlineLowRankQuantileRegressor.fit saw 50 rows.*"
                      "Fit at least 51 rows"):
        est = OnlineLowRankQuantileRegressor().fit(X, X[:, 0, 0])
    assert not est.coef_.any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert OnlineLowRankQuantileRegressor().partial_fit(X, X[:, 0, 0]).n_updates_ == 0
        X = np.random.default_rng(0).standard_normal((51, 4, 4))
        assert OnlineLowRankQuantileRegressor().fit(X, X[:, 0, 0]).coef_.any()
