"""The call lock: a KeyboardInterrupt at any line of a call -- the exit line
of a Python with-statement included, where __exit__ has not run yet -- leaves
the state object's lock (taken in C) free, so another thread's next call does
not wait forever; and a quantile regressor interrupted so is in its old
state or its new one, never between. (The PCA estimators' every-line test is
in test_pca_properties.py.)"""
import pickle

import numpy as np
import pytest

from streamfit import OnlineQuantileRegressor
from streamfit._base import StreamEstimator
from streamfit.lowrank import OnlineLowRankQuantileRegressor
from streamfit.simulate import make_linear_stream

from ._quantile_cases import assert_same_state
from ._signals import blocked_elsewhere, interrupted_at, lines_run


class Toy(StreamEstimator):
    def __init__(self, k=1):
        self.k = k


def test_a_stream_estimator_pickles_its_state_and_no_lock():
    est = Toy()
    est.state_ = np.arange(4.0)
    copy = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(copy.state_, est.state_)
    assert "_lock" not in vars(copy)


QUANTILE = {
    "single": lambda: OnlineQuantileRegressor(tau=0.3),
    "batch": lambda: OnlineQuantileRegressor(mode="batch", batch_size=4, average=True),
    "multi": lambda: OnlineQuantileRegressor(tau=[0.2, 0.5, 0.8]),
    "inference": lambda: OnlineQuantileRegressor(average=True, inference=True),
    "scaled": lambda: OnlineQuantileRegressor(scale="online"),
}


@pytest.mark.parametrize("name", sorted(QUANTILE))
def test_quantile_sigint_at_every_line_of_partial_fit(name):
    """At each line partial_fit runs, in turn: the estimator afterwards holds
    the rows before the call or all of them (its kernel runs no Python line,
    so the interrupt lands before or after the commit), and its call lock is
    free."""
    X, y, _ = make_linear_stream(120, 4, random_state=3)
    make = QUANTILE[name]

    def start():
        return make().partial_fit(X[:60], y[:60])

    before, after = start(), start().partial_fit(X[60:], y[60:])
    total = lines_run(lambda: start().partial_fit(X[60:], y[60:]))
    outcomes = set()
    for line in range(1, total + 1):
        est = start()
        finished = interrupted_at(line, lambda: est.partial_fit(X[60:], y[60:]))
        assert not blocked_elsewhere(est._state), line
        if est.n_samples_seen_ == 60:
            assert not finished, line
            assert_same_state(est, before)
            outcomes.add("old")
        else:
            assert_same_state(est, after)
            outcomes.add("new")
    assert outcomes == {"old", "new"}


def test_lowrank_sigint_at_every_line_of_partial_fit():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 5, 4))
    y = X[:, 0, 0] - X[:, 1, 2] + 0.1 * rng.standard_normal(80)

    def start():
        return OnlineLowRankQuantileRegressor(rank=2).partial_fit(X[:40], y[:40])

    after = pickle.dumps(start().partial_fit(X[40:], y[40:]))
    total = lines_run(lambda: start().partial_fit(X[40:], y[40:]))
    seen = set()
    for line in range(1, total + 1):
        est = start()
        interrupted_at(line, lambda: est.partial_fit(X[40:], y[40:]))
        assert not blocked_elsewhere(est._state), line
        assert est.n_samples_seen_ in (40, 80), line
        seen.add(est.n_samples_seen_)
        if est.n_samples_seen_ == 80:
            np.testing.assert_array_equal(est.coef_, pickle.loads(after).coef_)
    assert seen == {40, 80}
