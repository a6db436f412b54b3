"""Prediction intervals with long-run coverage: a pair of online quantiles
calibrated online by adaptive conformal inference or conformal PID control.

One call runs the multi-quantile kernel over the rows (``_quantile.sgd_multi``,
which hands out each row's two predictions under the iterates before its
update), then the conformal recurrence over those predictions
(``_conformal.conformal_pass``): two compiled loops, no Python per row.
"""
from __future__ import annotations

import itertools
import math
import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import StreamRegressor, serialized
from .._errors import ERR_INTERRUPTED, OK, raise_for
from .._kernels import _conformal as _c
from .._kernels import _quantile as _k
from .._validation import (as_matrix, as_target, check_matrix, check_memory, check_scalar,
                           feature_names)
from ..exceptions import _warn_if_warming_up
from ._multi import MultiWork, advance_multi
from ._sgd import OnlineQuantileRegressor
from ._state import Outcome, check_loaded

__all__ = ["OnlineIntervalRegressor"]

_METHODS = {"aci": _c.METHOD_ACI, "pid": _c.METHOD_PID}
STATE_DTYPE = np.dtype([(name, np.float64) for name in _c.STATE_FIELDS])
# PID's saturation constant: the integrator's tangent reaches pi / 2 (an
# unbounded interval) once the miscoverage since the start exceeds alpha by
# (pi / 2) CSAT / log(t + 1) = 1 / log(t + 1): 14% after 10^3 rows, 11% after
# 10^4, 7% after 10^6; below that it adds about ki scale (miscoverage gap)
# log(t) / CSAT to the offset.
CSAT = 2.0 / math.pi
# rows a kernel call takes at most (the predictions' buffer: 16 bytes a row)
_CHUNK = 1 << 16
_VERSIONS = itertools.count()


class _IntervalWork:
    """The learnt state: the quantile pair (``quantiles``, a MultiWork), the
    calibration record (``conf``, STATE_DTYPE of shape (1,)), the score window
    (``ring`` in arrival order, ``srt`` sorted; ``window`` values each) and
    the feature names."""

    __slots__ = ("quantiles", "conf", "ring", "srt", "names")

    def __getstate__(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def __setstate__(self, state):
        if set(state) != set(self.__slots__):
            raise ValueError(f"the loaded state has fields {sorted(state)}, expected "
                             f"{sorted(self.__slots__)} (a corrupted or foreign pickle?)")
        for key, value in state.items():
            setattr(self, key, value)
        check_loaded(self.quantiles)
        conf, ring, srt = self.conf, self.ring, self.srt
        if not (isinstance(conf, np.ndarray) and conf.dtype == STATE_DTYPE
                and conf.shape == (1,)):
            raise ValueError("the loaded state's 'conf' must be a record of the calibration "
                             "fields (a corrupted or foreign pickle?)")
        for name, a in (("ring", ring), ("srt", srt)):
            if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.ndim == 1
                    and a.shape == ring.shape and a.size >= 1):
                raise ValueError(f"the loaded state's {name!r} must be a float64 vector of "
                                 "the window's length (a corrupted or foreign pickle?)")
        rec = conf[0]
        counts = [float(rec[name]) for name in ("n", "n_covered", "n_base", "n_bounded")]
        fill, head, cap = float(rec["fill"]), float(rec["head"]), ring.size
        # the kernel bounds-checks fill and head itself; these are the values
        # it would take silently and turn into a wrong coverage_ or offset
        if not (all(0 <= c <= counts[0] and c == int(c) for c in counts)
                and 0 <= fill <= cap and fill == int(fill)
                and 0 <= head < cap and head == int(head)):
            raise ValueError("the loaded state's counts (n, n_covered, n_base, n_bounded) "
                             "must be whole numbers with none above n, and fill and head "
                             "whole positions in the window (a corrupted or foreign pickle?)")
        kept = srt[:int(fill)]
        if not (np.isnan(kept).sum() == 0 and np.all(kept[1:] >= kept[:-1])):
            raise ValueError("the loaded state's sorted score window 'srt' is not sorted "
                             "(a corrupted or foreign pickle?)")

    def copy(self):
        work = _IntervalWork()
        work.quantiles = self.quantiles.copy()
        work.conf, work.ring, work.srt = self.conf.copy(), self.ring.copy(), self.srt.copy()
        work.names = self.names
        return work


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

    _TRANSIENT_ATTRS = ("_param_cache", "_params_version")

    def __init__(self, alpha=0.1, *, method="aci", gamma=0.005, lr=0.1, ki=1.0, window=1000,
                 schedule="statistical", fit_intercept=True):
        self.alpha = alpha
        self.method = method
        self.gamma = gamma
        self.lr = lr
        self.ki = ki
        self.window = window
        self.schedule = schedule
        self.fit_intercept = fit_intercept

    # -- scikit-learn -----------------------------------------------------------
    def _expected_failed_checks(self):
        """scikit-learn's checks this estimator fails by design (read by
        ``streamfit.utils.estimator_checks.expected_failed_checks``)."""
        return {}

    # -- parameters -------------------------------------------------------------
    def _check_params(self):
        check_scalar(self.alpha, "alpha", low=0, high=1, low_open=True, high_open=True)
        if not isinstance(self.method, str) or self.method not in _METHODS:
            raise ValueError(f"method must be one of {tuple(_METHODS)}, got {self.method!r}")
        check_scalar(self.gamma, "gamma", low=0, low_open=True)
        check_scalar(self.lr, "lr", low=0, low_open=True)
        check_scalar(self.ki, "ki", low=0)
        check_scalar(self.window, "window", kind=numbers.Integral, low=1)
        check_memory(16 * float(self.window), "window", self.window, "a window of scores")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept must be True or False, got {self.fit_intercept!r}")

    def __setattr__(self, name, value):
        # a parameter set (by __init__, set_params or by hand) invalidates the
        # cached checks and quantile records; the learnt state does not
        object.__setattr__(self, name, value)
        if name[0] != "_":
            self.__dict__["_params_version"] = next(_VERSIONS)

    def _resolve(self, d):
        """_check_params and _quantiles(d), cached while the parameters (and
        the schedule's constants) stay the same: a one-row call would
        otherwise spend most of its time rebuilding the records."""
        sched = self.schedule
        key = (self.__dict__.get("_params_version"), d,
               sched if isinstance(sched, str) else id(sched), getattr(sched, "_version", None))
        cache = self.__dict__.get("_param_cache")
        if cache is not None and cache[0] == key:
            return cache[1]
        self._check_params()
        resolved = self._quantiles(d)
        self.__dict__["_param_cache"] = (key, resolved)
        return resolved

    def _quantiles(self, d):
        """(quantile estimator, its params record) for d features: the pair
        at alpha / 2 and 1 - alpha / 2, checked by OnlineQuantileRegressor."""
        alpha = float(self.alpha)
        model = OnlineQuantileRegressor(tau=[alpha / 2, 1 - alpha / 2], schedule=self.schedule,
                                        fit_intercept=self.fit_intercept)
        return model, model._resolve(d)[1]

    def _check_continuation(self, fit):
        conf = fit.conf[0]
        old_alpha = float(fit.quantiles.params["tau"][0]) * 2
        refused = [("alpha", old_alpha, float(self.alpha)),
                   ("window", fit.ring.shape[0], int(self.window)),
                   ("fit_intercept", bool(fit.quantiles.params["fit_intercept"][0]),
                    bool(self.fit_intercept))]
        was = "pid" if math.isnan(float(conf["level"])) else "aci"
        refused.append(("method", was, self.method))
        for name, before, now in refused:
            if before != now:
                raise ValueError(f"{name} changed from {before!r} to {now!r} since the first "
                                 f"call; the learnt state belongs to {name}={before!r}. Set "
                                 f"it back, or call fit() to start afresh")

    # -- fitting ----------------------------------------------------------------
    def _fresh(self, d, params):
        work = _IntervalWork()
        work.quantiles = MultiWork.fresh(d, params)
        work.conf = np.zeros(1, STATE_DTYPE)
        work.conf["offset"] = 0.0 if self.method == "pid" else np.inf
        work.conf["level"] = float(self.alpha) if self.method == "aci" else np.nan
        work.ring = np.zeros(int(self.window))
        work.srt = np.zeros(int(self.window))
        work.names = None
        return work

    def _advance(self, work, X, y, model):
        """Both passes over (X, y), in chunks; mutates ``work``; an Outcome."""
        n = X.shape[0]
        conf = work.conf.view(np.float64)
        done = 0
        for start in range(0, n, _CHUNK):
            Xc, yc = X[start:start + _CHUNK], y[start:start + _CHUNK]
            preds = np.empty((Xc.shape[0], 2))
            out = advance_multi(work.quantiles, Xc, yc, None, "rearrange", preds)
            _c.conformal_pass(preds[:out.consumed], yc[:out.consumed], conf, work.ring,
                              work.srt, _METHODS[self.method], float(self.alpha),
                              float(self.gamma), float(self.lr), float(self.ki), CSAT)
            done += out.consumed
            if out.code != OK:
                bad = out.bad
                if bad is not None and bad[0] is not None:
                    bad = (bad[0] + start,) + bad[1:]
                return Outcome(done, out.code, out.exc, bad)
        return Outcome(done)

    def _run(self, fit, X, y, names, method):
        """Validate, advance a copy, publish (or raise, the state unchanged)."""
        X = as_matrix(X, float32=True)
        n, d = X.shape
        if method == "fit" and n == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape=({n}, {d})) while a "
                             f"minimum of 1 is required by {type(self).__name__}.fit; the "
                             "estimator keeps its previous state")
        if fit is not None and d != fit.quantiles.w.shape[1]:
            raise ValueError(f"X has {d} features, but {type(self).__name__} is expecting "
                             f"{fit.quantiles.w.shape[1]} features as input.")
        y = as_target(y, n, type(self).__name__)
        model, params = self._resolve(d)
        if fit is None:
            if n == 0:
                return None
            work = self._fresh(d, params)
        else:
            self._check_continuation(fit)
            if n == 0:
                return None
            work = fit.copy()
            if params is not work.quantiles.params and \
                    params.tobytes() != work.quantiles.params.tobytes():
                work.quantiles.follow(params)
        out = self._advance(work, X, y, model)
        where = f"{type(self).__name__}.{method}"
        if out.code != OK and out.code != ERR_INTERRUPTED:
            model._raise(out, work.quantiles, where, X)
        if out.code == ERR_INTERRUPTED and out.consumed == 0 and fit is None:
            raise_for(ERR_INTERRUPTED, where, exc=out.exc)
        work.names = names if method == "fit" or fit is None else fit.names
        self._fit_ = work           # one assignment publishes the call
        if out.code == ERR_INTERRUPTED:
            if hasattr(out.exc, "add_note"):
                out.exc.add_note(f"{where} was interrupted after {out.consumed} of its {n} "
                                 f"rows: the estimator holds the state after them")
            raise_for(ERR_INTERRUPTED, where, exc=out.exc)
        return params

    @serialized
    def partial_fit(self, X, y):
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
        fit = self.__dict__.get("_fit_")
        names = feature_names(X)
        if fit is not None and (names is not None or fit.names is not None):
            validate_data(self, X, reset=False, skip_check_array=True, ensure_2d=False)
        self._run(fit, X, y, names, "partial_fit")
        return self

    @serialized
    def fit(self, X, y):
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
        params = self._run(None, X, y, names, "fit")
        if params is not None:
            state = self._fit_.quantiles.state
            _warn_if_warming_up(self, params, int(state["n_updates"][0]),
                                int(state["n_seen"][0]), after=1)
        return self

    # -- learnt attributes and predictions --------------------------------------
    def _fitted(self):
        fit = self.__dict__.get("_fit_")
        if fit is None:
            check_is_fitted(self)
        return fit

    @serialized
    def _conf(self):
        return self._fitted().conf[0].copy()

    @property
    def coverage_(self):
        """Prequential coverage of the calibrated intervals (see the class
        docstring)."""
        c = self._conf()
        return float(c["n_covered"] / c["n"])

    @property
    def quantile_coverage_(self):
        """Prequential coverage of the uncalibrated quantile pair."""
        c = self._conf()
        return float(c["n_base"] / c["n"])

    @property
    def quantile_width_(self):
        """Prequential mean width of the uncalibrated quantile pair."""
        c = self._conf()
        return float(c["base_width"] / c["n"])

    @property
    def interval_width_(self):
        """Prequential mean width of the bounded intervals (inf if none)."""
        c = self._conf()
        return float(c["width_sum"] / c["n_bounded"]) if c["n_bounded"] else math.inf

    @property
    def n_unbounded_(self):
        """Rows whose interval was the whole line."""
        c = self._conf()
        return int(c["n"] - c["n_bounded"])

    @property
    def offset_(self):
        """The offset q of the next intervals, [lo - q, hi + q]."""
        return float(self._conf()["offset"])

    @property
    def level_(self):
        """ACI's running level a_t (NaN for PID)."""
        return float(self._conf()["level"])

    @serialized
    def _pair(self):
        fit = self._fitted()
        return fit.quantiles.w.copy(), fit.quantiles.state["intercept"].astype(float), \
            float(fit.conf["offset"][0]), fit.names

    @property
    def coef_(self):
        """The two quantiles' coefficients, (2, n_features)."""
        return self._pair()[0]

    @property
    def intercept_(self):
        """The two quantiles' intercepts, (2,)."""
        return self._pair()[1]

    @property
    @serialized
    def n_samples_seen_(self):
        """Rows learnt from."""
        return int(self._fitted().quantiles.state["n_seen"][0])

    @property
    def n_features_in_(self):
        """Features seen by the first call (or ``fit``)."""
        return self._fitted().quantiles.w.shape[1]

    @property
    def feature_names_in_(self):
        """Column names of the DataFrame the estimator learnt from (only then)."""
        names = self._fitted().names
        if names is None:
            raise AttributeError(f"{type(self).__name__} was not fitted on data with "
                                 "feature names (a DataFrame with string column names)")
        return names

    def _lo_hi(self, X):
        fit = self._fitted()
        if feature_names(X) is not None or fit.names is not None:
            validate_data(self, X, reset=False, skip_check_array=True, ensure_2d=False)
        X = check_matrix(X, "X")
        coef, b, q, _ = self._pair()
        if X.shape[1] != coef.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {coef.shape[1]} features as input.")
        out = np.empty((2, X.shape[0]))
        for j in range(2):
            _k.predict(X, coef[j], float(b[j]), out[j])
        return np.minimum(out[0], out[1]), np.maximum(out[0], out[1]), q

    def predict_interval(self, X):
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
        lo, hi, q = self._lo_hi(X)
        mid = 0.5 * (lo + hi)
        with np.errstate(invalid="ignore"):
            lower, upper = np.minimum(lo - q, mid), np.maximum(hi + q, mid)
        return np.column_stack([lower, upper])

    def predict(self, X):
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
        lo, hi, _ = self._lo_hi(X)
        return 0.5 * (lo + hi)
