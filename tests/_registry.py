"""Every estimator configuration the stream-contract tests run, in one place.

name -> Case(family, cls, params, data, skip): ``make(name, **overrides)``
builds ``cls(**params)`` (overrides replace parameters), ``data()`` gives the
stream (X, y) the checks of :mod:`streamfit.utils.estimator_checks` slice
(``None``: their default stream), ``skip`` the checks that do not apply, with
the reason. The test modules take their configurations from here (``CASES``,
``names(family)``, ``make``); tests/test_estimator_checks.py runs every check
on each.
Imported relatively (pytest's importlib mode puts no test folder on
sys.path)."""
from __future__ import annotations

import copy
import functools
from typing import Callable, NamedTuple

import numpy as np

from streamfit import (DropoutPCA, FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA,
                       OnlineIntervalRegressor, OnlineLeastSquaresRegressor,
                       OnlineLowRankQuantileRegressor, OnlineQuantileRegressor,
                       PerturbedLeaderPCA)
from streamfit.schedules import ConstantSchedule, StatisticalSchedule
from streamfit.simulate import make_spiked_stream


class Case(NamedTuple):
    family: str
    cls: type
    params: dict
    data: Callable | None = None
    skip: dict = {}

    def make(self, **overrides):
        # copies: a schedule object is never shared by two estimators
        return self.cls(**copy.deepcopy({**self.params, **overrides}))


def _short_schedule():
    # a short warm-up and window, so that the checks' 300 rows reach the
    # schedule's later phases
    return StatisticalSchedule(n_warmup=20, window=32)


def _spiked40():
    # n = 40, k = 2: the Krylov basis [V, W] (2 (k + 5) = 14 columns) fits
    return make_spiked_stream(300, 40, n_spikes=3, random_state=0), None


@functools.lru_cache(maxsize=None)
def _lowrank_stream(form, T=300, d1=12, d2=9, r=2, seed=0):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((d1, r)) @ rng.standard_normal((r, d2)) / np.sqrt(r)
    xi = 0.5 * rng.standard_t(1.1, T)
    if form == "dense":
        X = rng.standard_normal((T, d1, d2))
        y = np.einsum("tij,ij->t", X, M)
    elif form == "rank1":
        X = (rng.standard_normal((T, d1)), rng.standard_normal((T, d2)))
        y = np.einsum("ti,ij,tj->t", X[0], M, X[1])
    else:
        X = np.column_stack([rng.integers(0, d1, T), rng.integers(0, d2, T)])
        y = M[X[:, 0], X[:, 1]]
    return X, y + xi


def _lowrank(form):
    def data():
        X, y = _lowrank_stream(form)
        return (tuple(a.copy() for a in X) if isinstance(X, tuple) else X.copy()), y.copy()
    return data


@functools.lru_cache(maxsize=None)
def _changing_stream(n, change, scale, d=5, seed=0):
    # t_1.1 noise around 0 (where the estimators start), then every
    # coefficient jumps to scale / sqrt(d) at row `change`
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(np.arange(n) < change, 0.0, X.sum(axis=1) * scale / np.sqrt(d))
    return X, y + rng.standard_t(1.1, n)


def _changing(n, change, scale):
    # the drift test's alarm falls in the checks' last call, after the chunked
    # (and pickled) rows < 211 in which its statistic built up: a detector
    # state lost or changed between calls moves or loses the alarm
    def data():
        X, y = _changing_stream(n, change, scale)
        return X.copy(), y.copy()
    return data


_STORAGE = {"check_chunking_invariance":
            "mode='storage' takes one full-gradient step per call, by design"}

CASES = {
    "quantile-single": Case("quantile", OnlineQuantileRegressor,
                            dict(tau=0.3, schedule=_short_schedule())),
    "quantile-single-average": Case("quantile", OnlineQuantileRegressor, dict(
        tau=0.3, schedule=StatisticalSchedule(n_warmup=20, window=32, decay=0.5), average=True)),
    "quantile-batch": Case("quantile", OnlineQuantileRegressor,
                           dict(tau=0.3, mode="batch", batch_size=16)),
    "quantile-storage": Case("quantile", OnlineQuantileRegressor,
                             dict(tau=0.3, mode="storage", batch_size=40), skip=_STORAGE),
    "quantile-multi": Case("quantile", OnlineQuantileRegressor,
                           dict(tau=[0.25, 0.75], schedule=_short_schedule())),
    "least-squares": Case("quantile", OnlineLeastSquaresRegressor, {}),
    "interval-aci": Case("interval", OnlineIntervalRegressor,
                         dict(alpha=0.2, window=50, schedule=_short_schedule())),
    "interval-pid": Case("interval", OnlineIntervalRegressor,
                         dict(alpha=0.2, method="pid", window=50, schedule=_short_schedule())),
    "quantile-drift": Case("quantile", OnlineQuantileRegressor, dict(
        tau=0.3, schedule=ConstantSchedule(0.05), average=True, drift="restart"),
        _changing(600, 50, 100.0)),
    "quantile-drift-statistical": Case("quantile", OnlineQuantileRegressor, dict(
        tau=0.3, schedule=_short_schedule(), average=True, drift="restart"),
        _changing(1200, 600, 30.0)),
    "least-squares-drift": Case("quantile", OnlineLeastSquaresRegressor, dict(
        schedule=ConstantSchedule(0.01), average=True, drift="restart"),
        _changing(600, 50, 100.0)),
    "fpl-fixed": Case("pca", PerturbedLeaderPCA, dict(n_components=2, random_state=0)),
    "fpl-random_walk": Case("pca", PerturbedLeaderPCA,
                            dict(n_components=2, noise="random_walk", random_state=0)),
    "fpl-independent": Case("pca", PerturbedLeaderPCA,
                            dict(n_components=2, noise="independent", random_state=0)),
    "fpl-krylov": Case("pca", PerturbedLeaderPCA,
                       dict(n_components=2, solver="krylov", random_state=0), _spiked40),
    "ftl": Case("pca", FollowTheLeaderPCA, dict(n_components=2)),
    "meg-auto": Case("capped", MatrixEGPCA, dict(n_components=2, random_state=0)),
    "meg-0.5": Case("capped", MatrixEGPCA, dict(n_components=2, eta=0.5, random_state=0)),
    "gd-auto": Case("capped", MatrixGDPCA, dict(n_components=2, random_state=0)),
    "gd-0.5": Case("capped", MatrixGDPCA, dict(n_components=2, eta=0.5, random_state=0)),
    "dropout-lazy": Case("dropout", DropoutPCA, dict(n_components=2, random_state=0)),
    "dropout-lazy-krylov": Case("dropout", DropoutPCA, dict(n_components=2, random_state=0),
                                _spiked40),
    "dropout-fresh": Case("dropout", DropoutPCA,
                          dict(n_components=2, resample="fresh", random_state=0)),
    "lowrank-dense": Case("lowrank", OnlineLowRankQuantileRegressor,
                          dict(rank=2, schedule=_short_schedule()), _lowrank("dense")),
    "lowrank-rank1": Case("lowrank", OnlineLowRankQuantileRegressor,
                          dict(rank=2, schedule=_short_schedule()), _lowrank("rank1")),
    "lowrank-index": Case("lowrank", OnlineLowRankQuantileRegressor,
                          dict(rank=2, shape=(12, 9), schedule=_short_schedule()),
                          _lowrank("index")),
}


def names(family):
    """The names of the configurations of one family."""
    return [name for name, case in CASES.items() if case.family == family]


def make(name, **overrides):
    return CASES[name].make(**overrides)


def spec(name):
    """(class, parameters but n_components) of the named configuration, for
    the suites that choose n_components themselves."""
    case = CASES[name]
    return case.cls, {k: v for k, v in case.params.items() if k != "n_components"}


def data(name):
    """(X, y) of the named configuration: its own stream, else None, None
    (the checks' default)."""
    case = CASES[name]
    return case.data() if case.data is not None else (None, None)
