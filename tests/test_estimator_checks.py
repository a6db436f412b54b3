"""streamfit.utils.estimator_checks: every shipped estimator configuration (the
registry, tests/_registry.py) passes every check, a downstream estimator
built on streamfit.kernels passes them, and deliberately broken estimators
fail the check that names their fault."""
import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin

from streamfit import OnlineLeastSquaresRegressor, OnlineQuantileRegressor, PerturbedLeaderPCA
from streamfit.kernels import LinearSGD
from streamfit.schedules import ConstantSchedule
from streamfit.simulate import make_linear_stream
from streamfit.utils.estimator_checks import (check_estimator, parametrize_with_checks,
                                              yield_checks)

from ._registry import CASES, data, make

# -- every configuration, every check ------------------------------------------------------

PARAMS = []
for _name, _case in CASES.items():
    _est = make(_name)
    _X, _y = data(_name)
    for _check in yield_checks(_est, _X, _y):
        _marks = ()
        if _check.__name__ in _case.skip:
            _marks = pytest.mark.skip(reason=_case.skip[_check.__name__])
        PARAMS.append(pytest.param(_est, _check, marks=_marks,
                                   id=f"{_name}-{_check.__name__}"))


@pytest.mark.parametrize("estimator, check", PARAMS)
def test_shipped_estimators_pass(estimator, check):
    check(estimator)


def test_every_check_runs_on_every_configuration():
    names = {p.id.split("-check_")[0] for p in PARAMS}
    assert names == set(CASES)
    assert len(PARAMS) == 9 * len(CASES)


def test_skipped_checks_are_reasoned_and_exist():
    checks = {c.__name__ for c in yield_checks(OnlineQuantileRegressor())}
    for case in CASES.values():
        assert set(case.skip) <= checks and all(case.skip.values())
    with pytest.raises(ValueError, match="check_nothing"):
        list(yield_checks(OnlineQuantileRegressor(), skip={"check_nothing": "?"}))


# -- a downstream estimator on streamfit.kernels -----------------------------------------

class MedianSGD(RegressorMixin, BaseEstimator):
    """Median regression by constant-stepsize SGD on streamfit.kernels, with
    its own validation: what a downstream author writes."""

    def __init__(self, eta=0.05):
        self.eta = eta

    def partial_fit(self, X, y):
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise TypeError(f"X must hold real numbers, got dtype {X.dtype}")
        X = X.astype(np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got {X.ndim} dimensions")
        y = np.asarray(y)
        if y.dtype.kind not in "biuf" or y.shape != (X.shape[0],):
            raise ValueError(f"y must be real numbers of shape ({X.shape[0]},), got "
                             f"{y.dtype} {y.shape}")
        if hasattr(self, "_sgd") and X.shape[1] != self._sgd.n_features:
            raise ValueError(f"X has {X.shape[1]} features, expected {self._sgd.n_features}")
        # the state object checks X and y for NaN/inf and leaves itself as it was
        state = self._sgd if hasattr(self, "_sgd") else \
            LinearSGD(X.shape[1], tau=0.5, schedule=ConstantSchedule(self.eta))
        state.configure(schedule=ConstantSchedule(self.eta))
        state.learn(np.ascontiguousarray(X), np.ascontiguousarray(y, dtype=np.float64))
        self._sgd = state
        return self

    @property
    def coef_(self):
        return self._sgd.coef

    @property
    def n_samples_seen_(self):
        return self._sgd.n_samples_seen


class MedianSGDPublicState(MedianSGD):
    """MedianSGD holding its LinearSGD in a public fitted attribute, which
    the checks then compare between the pickled and the uninterrupted run."""

    @property
    def state_(self):
        return self._sgd


def test_downstream_estimator_on_the_kernels_passes():
    check_estimator(MedianSGD())


def test_downstream_estimator_with_its_state_object_in_view_passes():
    check_estimator(MedianSGDPublicState())


_X, _y, _ = make_linear_stream(300, 3, random_state=1)


@parametrize_with_checks([MedianSGD(eta=0.01), (OnlineLeastSquaresRegressor(), _X, _y)])
def test_parametrize_with_checks(estimator, check):
    check(estimator)


# -- broken estimators fail the check naming their fault -----------------------------------

class CountsRejectedCalls(OnlineQuantileRegressor):
    """Counts the calls it refuses: a rejected call changes the state."""

    def partial_fit(self, X, y, sample_weight=None):
        try:
            return super().partial_fit(X, y, sample_weight=sample_weight)
        except (ValueError, TypeError):
            self.n_rejected_ = getattr(self, "n_rejected_", 0) + 1
            raise


class ReseedsWhenLoaded(PerturbedLeaderPCA):
    """Loads with a fresh generator: resuming after pickling draws another
    perturbation than the uninterrupted run."""

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_state" in self.__dict__:
            from streamfit._kernels._pca_api import bit_generator_text
            fields = self._state.to_state()
            fields["rng"] = bit_generator_text(np.random.PCG64(12345))
            self._state = type(self._state).from_state(fields)


class ScalesEachCall(OnlineQuantileRegressor):
    """Scales each call's rows by their largest magnitude: how the stream is
    split changes what is learnt."""

    def partial_fit(self, X, y, sample_weight=None):
        X = np.asarray(X, dtype=np.float64)
        if X.size:
            X = X / np.abs(X).max()
        return super().partial_fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("broken, check", [
    (CountsRejectedCalls(tau=0.3), "check_rejected_input"),
    (ReseedsWhenLoaded(2, noise="independent", random_state=0), "check_pickle_resume"),
    (ScalesEachCall(tau=0.3), "check_chunking_invariance"),
])
def test_broken_estimators_fail_the_check_naming_the_fault(broken, check):
    with pytest.raises(AssertionError, match=check) as info:
        check_estimator(broken)
    assert str(info.value).startswith(f"{check} failed for {type(broken).__name__}: ")
