"""Prediction intervals with long-run coverage: a pair of online quantiles
calibrated online by adaptive conformal inference or conformal PID control.

The estimator converts input and parameters and drives one compiled state
object, :class:`streamfit.kernels.IntervalState` (the quantile pair's
:class:`~streamfit.kernels.LinearSGD` and the conformal recurrence): no
Python per row.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np

from .._base import StreamRegressor
from .._kernels._conformal import IntervalState
from .._legacy import OldState as _IntervalWork  # noqa: F401 (pickles of streamfit 0.1)
from .._validation import as_matrix, as_target, check_matrix, feature_names, fitted_feature_names
from ..exceptions import _warn_if_warming_up
from ._sgd import _checked, _publish_first

if TYPE_CHECKING:
    from typing import Any, TypeVar

    from .._typing import ArrayIn, Float64Array, ScheduleLike

    # fit and partial_fit return the estimator they were called on
    _IntervalT = TypeVar("_IntervalT", bound="OnlineIntervalRegressor")

__all__ = ["OnlineIntervalRegressor"]


class OnlineIntervalRegressor(StreamRegressor):
    """Prediction intervals with long-run coverage 1 - alpha on any stream: two
    online quantiles (tau = alpha / 2 and 1 - alpha / 2, one pass) calibrated
    online by adaptive conformal inference or conformal PID control.

    Each row is scored prequentially, against the quantile pair (lo, hi) as it
    was before the row's update: s = max(lo - y, y - hi), the score of
    conformalised quantile regression (Romano, Patterson & Candes 2019), <= 0
    when y lies between the two. The interval at offset q is
    [lo - q, hi + q]; the row is covered when s <= q, and the offset then
    moves so that the fraction of misses tends to alpha, whatever the stream
    (a level shift, growing noise, a wrong model), as the quantiles
    themselves do only for a stationary stream and a right model:

    - ``method="aci"`` (adaptive conformal inference, Gibbs & Candes, NeurIPS
      2021): a running level a_{t+1} = a_t + gamma (alpha - err_t), a_1 =
      alpha; q_t is the split-conformal (1 - a_t) quantile of the last
      ``window`` scores (the ceil((1 - a_t)(k + 1))-th smallest of k), +inf
      when a_t is too small for the window (the whole line: no information
      yet, e.g. the first rows) and -inf for a_t >= 1 (the empty set). For
      ANY sequence of rows, |miscoverage - alpha| after T rows is at most
      (max(alpha, 1 - alpha) + gamma) / (gamma T): 0.9% at T = 20,000 for
      alpha = 0.1, gamma = 0.005. Per row: a binary search and a shift of
      about window / 3 values in the sorted window.
    - ``method="pid"`` (conformal PID control, Angelopoulos, Candes &
      Tibshirani, NeurIPS 2023; quantile tracking plus the saturating
      integrator, without a scorecaster: the quantiles are the forecaster):
      q_t = p_t + r_t(E_t), p_{t+1} = p_t + lr scale_t (err_t - alpha) with
      scale_t a running mean of |s| over about ``window`` rows (the paper
      scales its step by the recent scores' range: the same unit-free step),
      and r_t(E) = ki scale_t tan(E log(t + 1) / (csat (t + 1))), E_t the sum
      of (err - alpha), csat = 2 / pi; the tangent's argument at pi / 2 gives
      q = +inf (and -inf at -pi / 2), so the miscoverage gap after t rows is
      never above 1 / log(t + 1) + 1 / t for any stream, and the
      quantile-tracking part makes it O(1 / T) while the scores stay bounded.
      O(1) per row; no window of scores.

    The quantiles are the multi-quantile path of
    :class:`OnlineQuantileRegressor` (mode "single", the plain iterate: its
    prequential predictions are the ones the interval is built on, and it
    follows a drifting stream where an average would not).

    Parameters
    ----------
    alpha : float in (0, 1)
        The target miscoverage: intervals cover 1 - alpha of the rows in the
        long run.
    method : {"aci", "pid"}
    gamma : float > 0
        ACI's step on the level (its paper's 0.005): larger adapts faster to
        a change, with a more volatile interval.
    lr : float > 0
        PID's step on the offset per miss, in units of the scores' running
        mean absolute value (|s|).
    ki : float >= 0
        PID's integrator gain, in the same units; 0 turns the integrator off
        (quantile tracking alone).
    window : int >= 1
        ACI: the scores the offset is a quantile of (the last ``window``);
        PID: the span of the running mean of |s|.
    schedule : str or schedule object
        The quantiles' stepsizes (as for :class:`OnlineQuantileRegressor`).
    fit_intercept : bool

    Attributes
    ----------
    coverage_ : float
        Prequential coverage: the fraction of rows so far inside the interval
        the estimator held before the row.
    interval_width_ : float
        Prequential mean width of those intervals, over the rows whose
        interval was bounded (see ``n_unbounded_``); inf if none was.
    n_unbounded_ : int
        Rows whose interval was the whole line (q = +inf).
    quantile_coverage_, quantile_width_ : float
        Prequential coverage and mean width of the uncalibrated pair [lo, hi]
        (q = 0), for comparison.
    offset_ : float
        The offset q the next rows' intervals get (possibly +-inf).
    level_ : float
        ACI's running level a_t (NaN with ``method="pid"``).
    coef_ : ndarray of shape (2, n_features)
        The two quantiles' coefficients (tau = alpha / 2, then 1 - alpha / 2).
    intercept_ : ndarray of shape (2,)
    n_samples_seen_, n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fitted on a DataFrame with string column names.

    Notes
    -----
    Results are bit-identical for any split of a stream into ``partial_fit``
    calls and for float32 rows against the same rows in float64; a pickled
    estimator resumes exactly. ``alpha``, ``method``, ``window`` and
    ``fit_intercept`` cannot change mid-stream (refused with a ValueError
    naming the parameter); ``gamma``, ``lr``, ``ki`` and ``schedule`` take
    effect at the next call. No sample weights: a weight has no meaning for
    the coverage count. Like the quantiles' own kernels, Ctrl-C stops a call
    between two whole rows and leaves the estimator after them.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import OnlineIntervalRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((20000, 3))
    >>> y = X @ [1.0, -2.0, 0.5] + rng.standard_normal(20000)
    >>> y[10000:] += 3.0                          # the stream shifts halfway
    >>> est = OnlineIntervalRegressor(alpha=0.1)
    >>> for start in range(0, 20000, 500):        # a stream, block by block
    ...     est = est.partial_fit(X[start:start + 500], y[start:start + 500])
    >>> bool(abs(est.coverage_ - 0.9) < 0.01)     # within the ACI bound
    True
    >>> est.predict_interval(X[:2]).shape
    (2, 2)
    >>> pid = OnlineIntervalRegressor(alpha=0.1, method="pid").fit(X, y)
    >>> bool(abs(pid.coverage_ - 0.9) < 0.01)
    True
    """

    def __init__(self, alpha: float = 0.1, *, method: Literal["aci", "pid"] = "aci",
                 gamma: float = 0.005, lr: float = 0.1, ki: float = 1.0, window: int = 1000,
                 schedule: ScheduleLike = "statistical", fit_intercept: bool = True) -> None:
        self.alpha = alpha
        self.method = method
        self.gamma = gamma
        self.lr = lr
        self.ki = ki
        self.window = window
        self.schedule = schedule
        self.fit_intercept = fit_intercept

    # -- parameters -> the state object -------------------------------------------
    def _settings(self):
        return {"alpha": self.alpha, "method": self.method, "gamma": self.gamma,
                "lr": self.lr, "ki": self.ki, "window": self.window,
                "schedule": self.schedule, "fit_intercept": self.fit_intercept}

    def _key(self):
        sched = self.schedule
        return (type(self).__name__, self.alpha, self.method, self.gamma, self.lr, self.ki,
                self.window, sched if isinstance(sched, str) or not hasattr(sched, "__dict__")
                else (type(sched), dict(vars(sched))), self.fit_intercept)

    def _new_state(self, d):
        state = IntervalState(d, **self._settings())
        state.source = self._key()
        return state

    # -- fitting ----------------------------------------------------------------
    def partial_fit(self: _IntervalT, X: Any, y: ArrayIn) -> _IntervalT:
        """Learn from one block of the stream: each row is scored against the
        interval held before it (``coverage_``), then the quantiles and the
        offset take its update. A call with no rows does nothing.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            float32 rows are read as they are (bit-identical to float64).
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        state = self.__dict__.get("_state")
        names = feature_names(X) if state is None else None
        X = _checked(self, state, X, lambda X: as_matrix(X, float32=True))
        n, d = X.shape
        y = as_target(y, n, type(self).__name__)
        if state is None:
            new = self._new_state(d)
            if n == 0:
                return self
            new.feature_names = names
            _publish_first(self, new, lambda state: state.learn(X, y))
            return self
        key = self._key()
        if state.source != key:
            state.configure(**self._settings())
            state.source = key
        if n == 1:
            state.learn_one(X[0], y[0])
        elif n:
            state.learn(X, y)
        return self

    def fit(self: _IntervalT, X: Any, y: ArrayIn) -> _IntervalT:
        """Forget what was learnt and make one pass over (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), n_samples >= 1
        y : array-like of shape (n_samples,)

        Returns
        -------
        self

        Warns
        -----
        streamfit.exceptions.WarmupWarning
            When the statistical schedule's warm-up outlasts X (the
            quantiles have not moved from zero).
        """
        names = feature_names(X)
        X = as_matrix(X, float32=True)
        n, d = X.shape
        if n == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape=({n}, {d})) while a "
                             f"minimum of 1 is required by {type(self).__name__}.fit; the "
                             "estimator keeps its previous state")
        y = as_target(y, n, type(self).__name__)
        new = self._new_state(d)
        new.feature_names = names
        try:
            new.learn(X, y)
        except BaseException:
            if new.n_samples_seen > 0:
                self._state = new       # interrupted: the rows before the signal
            raise
        self._state = new               # one assignment publishes the fit
        _warn_if_warming_up(self, new.warm_up_rows, new.n_updates, new.n_samples_seen,
                            after=1)
        return self

    # -- one event at a time (river's names) ----------------------------------------
    def learn_one(self, x: Any, y: float) -> None:
        """Learn from one row (river's names): ``x`` a 1-D array or sequence of
        n_features numbers, ``y`` a number; scored against the interval held
        before it, then learnt from.

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit import OnlineIntervalRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.standard_normal((3000, 2))
        >>> y = X.sum(1) + rng.standard_normal(3000)
        >>> est = OnlineIntervalRegressor(alpha=0.2)
        >>> for xi, yi in zip(X, y):
        ...     est.learn_one(xi, yi)
        >>> bool(abs(est.coverage_ - 0.8) < 0.05)
        True
        """
        try:
            self._state.learn_one(x, y)
        except AttributeError:
            if "_state" in self.__dict__:
                raise
            row = np.asarray(x)
            if row.ndim != 1 or row.shape[0] < 1:
                raise ValueError(f"x must be a 1-D array of at least one value, got shape "
                                 f"{row.shape}") from None
            _publish_first(self, self._new_state(row.shape[0]),
                           lambda state: state.learn_one(x, y))

    def predict_one(self, x: Any) -> float:
        """The midpoint of the quantile pair for one row."""
        return self._fitted_state().predict_one(x)

    # -- learnt attributes and predictions --------------------------------------
    def _conf(self):
        return self._fitted_state().calibration

    @property
    def coverage_(self) -> float:
        """Prequential coverage of the calibrated intervals (see the class
        docstring)."""
        return float(self._fitted_state().coverage)

    @property
    def quantile_coverage_(self) -> float:
        """Prequential coverage of the uncalibrated quantile pair."""
        c = self._conf()
        return float(c["n_base"] / c["n"])

    @property
    def quantile_width_(self) -> float:
        """Prequential mean width of the uncalibrated quantile pair."""
        c = self._conf()
        return float(c["base_width"] / c["n"])

    @property
    def interval_width_(self) -> float:
        """Prequential mean width of the bounded intervals (inf if none)."""
        c = self._conf()
        return float(c["width_sum"] / c["n_bounded"]) if c["n_bounded"] else math.inf

    @property
    def n_unbounded_(self) -> int:
        """Rows whose interval was the whole line."""
        c = self._conf()
        return int(c["n"] - c["n_bounded"])

    @property
    def offset_(self) -> float:
        """The offset q of the next intervals, [lo - q, hi + q]."""
        return float(self._conf()["offset"])

    @property
    def level_(self) -> float:
        """ACI's running level a_t (NaN for PID)."""
        return float(self._conf()["level"])

    @property
    def coef_(self) -> Float64Array:
        """The two quantiles' coefficients, (2, n_features)."""
        return self._fitted_state().coef

    @property
    def intercept_(self) -> Float64Array:
        """The two quantiles' intercepts, (2,)."""
        return self._fitted_state().intercept

    @property
    def n_samples_seen_(self) -> int:
        """Rows learnt from."""
        return int(self._fitted_state().n_samples_seen)

    @property
    def n_features_in_(self) -> int:
        """Features seen by the first call (or ``fit``)."""
        return self._fitted_state().n_features

    @property
    def feature_names_in_(self) -> Any:
        """Column names of the DataFrame the estimator learnt from (only then)."""
        return fitted_feature_names(self, self._fitted_state().feature_names)

    def predict_interval(self, X: Any) -> Float64Array:
        """The calibrated intervals [lo - q, hi + q] of the rows of X (q =
        ``offset_``; an empty interval, q < -(hi - lo) / 2, is returned as the
        midpoint twice; q = +inf gives (-inf, inf)).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Lower and upper bounds.

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit import OnlineIntervalRegressor
        >>> rng = np.random.default_rng(1)
        >>> X = rng.standard_normal((5000, 2))
        >>> y = X @ [1.0, 1.0] + rng.standard_normal(5000)
        >>> est = OnlineIntervalRegressor(alpha=0.2).fit(X, y)
        >>> lo, hi = est.predict_interval(X[:3]).T
        >>> bool(np.all(lo < hi))
        True
        """
        state = self._fitted_state()
        return state.predict_interval(_checked(self, state, X, check_matrix))

    def predict(self, X: Any) -> Float64Array:
        """The midpoint of the quantile pair, (lo + hi) / 2: the calibrated
        interval's centre (the offset widens both ends alike), a median
        estimate for symmetric noise.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        state = self._fitted_state()
        return state.predict(_checked(self, state, X, check_matrix))
