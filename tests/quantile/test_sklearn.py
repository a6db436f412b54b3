"""The online regressors as native scikit-learn estimators: scikit-learn's own
estimator checks over every mode, and the meta-estimators users combine them
with (Pipeline, GridSearchCV, cross_val_score, clone, joblib)."""
import warnings

import joblib
import numpy as np
import pytest
from sklearn.base import clone, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.metrics import d2_pinball_score, make_scorer, r2_score
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks

from streamfit import OnlineIntervalRegressor, OnlineLeastSquaresRegressor, OnlineQuantileRegressor
from streamfit.utils.estimator_checks import expected_failed_checks
from streamfit.exceptions import WarmupWarning
from streamfit.schedules import ConstantSchedule, StatisticalSchedule
from streamfit.simulate import make_linear_stream


def short(**kw):
    # scikit-learn's checks fit a few dozen rows: a 5-row warm-up and 16-row
    # windows make the statistical schedule learn within them
    return StatisticalSchedule(n_warmup=5, window=16, **kw)


# Configurations that learn within the checks' small datasets: every check is
# held to its result, an expected failure (declared by the estimator itself,
# streamfit.utils.estimator_checks.expected_failed_checks) must fail.
LEARNING = [
    OnlineQuantileRegressor(0.3, schedule=short()),
    OnlineQuantileRegressor(0.7, mode="batch", batch_size=8, schedule=short()),
    OnlineQuantileRegressor(0.5, mode="storage", batch_size=16, schedule=short()),
    OnlineQuantileRegressor(0.5, average=True, schedule=short(patience=1)),
    OnlineQuantileRegressor(0.5, average=True, inference=True, schedule=short(patience=1)),
    OnlineQuantileRegressor([0.25, 0.75], schedule=short()),
    OnlineQuantileRegressor([0.1, 0.5, 0.9], noncrossing="project", average=True,
                            schedule=short(patience=1)),
    OnlineQuantileRegressor(0.5, mode="batch", batch_size=4, average=True,
                            schedule=short(patience=1)),
    OnlineQuantileRegressor(0.5, schedule=ConstantSchedule(0.05)),
    OnlineQuantileRegressor(0.5, schedule="constant"),
    OnlineLeastSquaresRegressor(schedule=short()),
    OnlineLeastSquaresRegressor(average=True, schedule=short(patience=1)),
    OnlineIntervalRegressor(0.2, window=20, schedule=short()),
    OnlineIntervalRegressor(0.2, method="pid", window=20, schedule=short()),
]

# The defaults: the checks' datasets (10 to 30 rows) are shorter than the
# default 50-row warm-up, so each fit in single and batch modes warns
# (WarmupWarning, ignored here) and learns nothing; storage mode fits them in
# one block, one step. A declared failure may so pass vacuously (not strict).
DEFAULTS = [
    OnlineQuantileRegressor(),
    OnlineQuantileRegressor(mode="batch"),
    OnlineQuantileRegressor(mode="storage"),
    OnlineQuantileRegressor([0.25, 0.75]),
    OnlineLeastSquaresRegressor(),
]


@parametrize_with_checks(LEARNING, expected_failed_checks=expected_failed_checks,
                         xfail_strict=True)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.filterwarnings("ignore::streamfit.exceptions.WarmupWarning")
@parametrize_with_checks(DEFAULTS, expected_failed_checks=expected_failed_checks,
                         xfail_strict=False)
def test_scikit_learn_estimator_checks_default_warmup(estimator, check):
    check(estimator)


def test_the_defaults_warn_on_the_checks_short_datasets():
    """What the user running check_estimator sees for the defaults: the fit
    on the checks' rows warns that it learnt nothing, naming the rows."""
    X, y, _ = make_linear_stream(30, 3, random_state=0)
    for est in DEFAULTS:
        if est.mode == "storage":
            continue            # steps on its first block
        with pytest.warns(WarmupWarning, match=r"\.fit saw 30 rows.*n_warmup=50 rows"):
            fitted = clone(est).fit(X, y)
        assert not np.any(fitted.coef_) and not np.any(fitted.intercept_)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fitted = clone(est).fit(*make_linear_stream(60, 3, random_state=0)[:2])
        assert np.any(fitted.coef_)


def test_the_warmup_warning_is_for_fit_only_and_names_the_rows():
    X, y, _ = make_linear_stream(80, 3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # a stream's first blocks fill the warm-up: no warning
        est = OnlineQuantileRegressor()
        for a in range(0, 80, 10):
            est.partial_fit(X[a:a + 10], y[a:a + 10])
        assert est.n_updates_ == 30
        # a schedule with no warm-up, or storage mode, steps at once
        OnlineQuantileRegressor(schedule="constant").fit(X[:3], y[:3])
        OnlineQuantileRegressor(mode="storage").fit(X[:3], y[:3])
    short_warmup = OnlineQuantileRegressor(schedule=StatisticalSchedule(n_warmup=10))
    with pytest.warns(WarmupWarning, match="saw 10 rows.*n_warmup=10 rows.*Fit at least 11 "
                      "rows") as caught:
        short_warmup.fit(X[:10], y[:10])
    assert caught[0].filename == __file__          # points at the user's call
    assert short_warmup.n_updates_ == 0
    with pytest.warns(WarmupWarning, match="saw 49 rows.*Fit at least 50 rows"):
        OnlineQuantileRegressor(mode="batch", batch_size=8).fit(X[:49], y[:49])


@pytest.mark.parametrize("est", LEARNING + DEFAULTS, ids=repr)
def test_declared_failures_are_reasoned_checks(est):
    from sklearn.utils.estimator_checks import estimator_checks_generator
    names = {getattr(check, "func", check).__name__
             for _, check in estimator_checks_generator(clone(est), mark=None)}
    for name, reason in expected_failed_checks(est).items():
        assert name in names and len(reason) > 30


def test_scikit_learns_plain_check_estimator_with_the_declared_failures():
    """A user's check_estimator, given the estimator's declared failures:
    nothing fails, the declared checks fail as declared."""
    est = OnlineQuantileRegressor([0.25, 0.75], schedule=short())
    results = check_estimator(est, expected_failed_checks=expected_failed_checks(est),
                              on_fail=None, on_skip=None)
    status = {(r["check_name"], r["status"]) for r in results}
    assert {s for _, s in status} == {"passed", "skipped", "xfail"}
    assert {n for n, s in status if s == "xfail"} == set(expected_failed_checks(est))


# -- meta-estimators ------------------------------------------------------------------

@pytest.fixture(scope="module")
def data():
    # features on different scales and away from 0: the pipeline's scaler matters
    X, y, beta = make_linear_stream(6000, 5, tau=0.8, random_state=0)
    scale = np.array([1.0, 10.0, 0.1, 3.0, 1.0])
    return X * scale + 2.0, y, beta


def test_is_a_regressor_with_tags():
    est = OnlineQuantileRegressor()
    assert is_regressor(est)
    tags = est.__sklearn_tags__()
    assert tags.target_tags.required and not tags.input_tags.allow_nan


@pytest.mark.parametrize("est", [OnlineQuantileRegressor(), OnlineLeastSquaresRegressor()])
def test_not_fitted_errors(est, data):
    X, y, _ = data
    for use in (lambda: est.predict(X), lambda: est.score(X, y), lambda: est.coef_):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            use()


def test_score_is_d2_pinball_at_tau_and_r2_for_least_squares(data):
    X, y, _ = data
    qr = OnlineQuantileRegressor(0.8).fit(X, y)
    assert qr.score(X, y) == pytest.approx(d2_pinball_score(y, qr.predict(X), alpha=0.8),
                                           rel=1e-12)
    sw = np.random.default_rng(0).random(len(y))
    assert qr.score(X, y, sample_weight=sw) == pytest.approx(
        d2_pinball_score(y, qr.predict(X), alpha=0.8, sample_weight=sw), rel=1e-12)
    ls = OnlineLeastSquaresRegressor().fit(X, y)
    assert ls.score(X, y) == pytest.approx(r2_score(y, ls.predict(X)), rel=1e-12)


def test_pipeline_with_a_scaler(data):
    X, y, _ = data
    pipe = make_pipeline(StandardScaler(), OnlineQuantileRegressor(0.8, average=True))
    pipe.fit(X, y)
    assert pipe.predict(X).shape == (len(y),)
    # standardized features learn evenly: far better than on the raw scales
    raw = OnlineQuantileRegressor(0.8, average=True).fit(X, y)
    assert pipe.score(X, y) > 0.6 and pipe.score(X, y) > raw.score(X, y)
    # sample weights reach the regressor through the pipeline
    sw = np.ones(len(y))
    weighted = make_pipeline(StandardScaler(), OnlineQuantileRegressor(0.8, average=True))
    weighted.fit(X, y, onlinequantileregressor__sample_weight=sw)
    np.testing.assert_array_equal(weighted.predict(X), pipe.predict(X))


def test_grid_search_over_tau_specific_settings_scored_by_d2_pinball(data):
    X, y, _ = data
    pipe = make_pipeline(StandardScaler(), OnlineQuantileRegressor(0.8))
    grid = {"onlinequantileregressor__average": [False, True],
            "onlinequantileregressor__schedule": [StatisticalSchedule(Ca=5.0),
                                                  StatisticalSchedule(Ca=20.0)]}
    scorer = make_scorer(d2_pinball_score, alpha=0.8)
    search = GridSearchCV(pipe, grid, scoring=scorer, cv=KFold(3)).fit(X, y)
    assert len(search.cv_results_["params"]) == 4
    best = search.best_params_
    # the best score is the mean of that setting's fold scores, and scoring
    # by the estimator's own score (D^2 pinball at its tau) agrees
    again = cross_val_score(clone(pipe).set_params(**best), X, y, scoring=scorer, cv=KFold(3))
    assert search.best_score_ == pytest.approx(again.mean(), rel=1e-12)
    own = cross_val_score(clone(pipe).set_params(**best), X, y, cv=KFold(3))
    np.testing.assert_allclose(own, again, rtol=1e-12)
    assert search.best_score_ > 0.6
    assert search.best_estimator_.predict(X).shape == (len(y),)


def test_cross_val_score_uses_the_d2_pinball_score(data):
    X, y, _ = data
    est = OnlineQuantileRegressor(0.8, average=True)
    scores = cross_val_score(est, X, y, cv=KFold(4))
    manual = []
    for train, test in KFold(4).split(X):
        fit = clone(est).fit(X[train], y[train])
        manual.append(d2_pinball_score(y[test], fit.predict(X[test]), alpha=0.8))
    np.testing.assert_allclose(scores, manual, rtol=1e-12)


def test_clone_and_joblib_round_trip(data, tmp_path):
    X, y, _ = data
    est = OnlineQuantileRegressor(0.8, mode="batch", batch_size=32, average=True)
    est.partial_fit(X[:3001], y[:3001])                   # a row waits for its batch
    twin = clone(est)
    assert not twin.__sklearn_is_fitted__() and twin.get_params() == est.get_params()
    joblib.dump(est, tmp_path / "est.joblib")
    back = joblib.load(tmp_path / "est.joblib")
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    back.partial_fit(X[3001:], y[3001:])
    est.partial_fit(X[3001:], y[3001:])
    np.testing.assert_array_equal(back.coef_, est.coef_)
    assert back.n_samples_seen_ == est.n_samples_seen_ == len(y)


def test_feature_names_from_a_dataframe(data):
    pd = pytest.importorskip("pandas")
    X, y, _ = data
    names = [f"f{j}" for j in range(X.shape[1])]
    df = pd.DataFrame(X, columns=names)
    est = OnlineQuantileRegressor(0.8).fit(df, y)
    np.testing.assert_array_equal(est.feature_names_in_, names)
    # atol: predictions near 0 differ in the last bits between BLAS's dot and @
    np.testing.assert_allclose(est.predict(df), X @ est.coef_ + est.intercept_, rtol=1e-12,
                               atol=1e-12 * np.abs(y).max())
    with pytest.raises(ValueError, match="feature names should match"):
        est.predict(df.rename(columns={"f0": "other"}))
    with pytest.raises(ValueError, match="feature names should match"):
        est.partial_fit(df.rename(columns={"f0": "other"}), y)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        est.predict(X)
    # a failed first call leaves no names behind; fit on arrays drops them
    fresh = OnlineQuantileRegressor()
    with pytest.raises(ValueError):
        fresh.partial_fit(df.assign(f0=np.nan), y)
    assert not hasattr(fresh, "feature_names_in_")
    est.fit(X, y)
    assert not hasattr(est, "feature_names_in_")
