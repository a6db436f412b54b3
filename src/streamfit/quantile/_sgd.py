"""Online quantile regression and online least squares by (sub-)gradient descent.

Python validates and owns the state; ``streamfit._kernels._quantile`` runs the
whole sample loop without the GIL.
"""
from __future__ import annotations

import numbers

import numpy as np

from .._base import StreamEstimator
from .._kernels import _quantile as _k
from .._validation import (check_fitted, check_matrix, check_n_features, check_seed,
                           check_scalar, check_vector)
from ..schedules import Schedule, resolve_schedule

__all__ = ["OnlineQuantileRegressor", "OnlineLeastSquaresRegressor"]

_STATE = {name: i for i, name in enumerate(_k.STATE_FIELDS)}
_PARAM = {name: i for i, name in enumerate(_k.PARAM_FIELDS)}
_MODES = {"single": _k.MODE_SINGLE, "batch": _k.MODE_BATCH, "storage": _k.MODE_STORAGE}
_ERRORS = {
    _k.ERR_NOMEM: (MemoryError, "the kernel could not allocate its work space"),
    _k.ERR_WINDOW: (RuntimeError, "internal error: residual window too small"),
    _k.ERR_SCALE: (ValueError, "X is too large for float64 arithmetic: ||x||^2 overflows. "
                   "Rescale (standardize) the features"),
    _k.ERR_NONFINITE: (FloatingPointError, "the iterate diverged (it is no longer finite); "
                       "the schedule's stepsizes are too large for this data. "
                       "The estimator was left as it was before this call"),
}


class _OnlineLinearSGD(StreamEstimator):
    """Shared state handling of the online linear estimators."""

    _loss = _k.LOSS_CHECK
    # least squares has no tau, mode or batch_size parameters
    mode = "single"
    tau = 0.5
    batch_size = None

    # -- parameters ---------------------------------------------------------
    def _check_params(self):
        check_scalar(self.tau, "tau", low=0, high=1, low_open=True, high_open=True)
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {tuple(_MODES)}, got {self.mode!r}")
        check_scalar(self.batch_size, "batch_size", kind=numbers.Integral, low=1,
                     allow_none=True)
        for name in ("average", "fit_intercept"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        check_seed(getattr(self, "random_state", None))
        return resolve_schedule(self.schedule)

    def _params_vector(self, schedule, d):
        p = np.zeros(len(_k.PARAM_FIELDS))
        p[_PARAM["tau"]] = self.tau
        p[_PARAM["loss"]] = self._loss
        p[_PARAM["average"]] = float(bool(self.average))
        p[_PARAM["fit_intercept"]] = float(bool(self.fit_intercept))
        p[_PARAM["mode"]] = _MODES[self.mode]
        if isinstance(schedule, Schedule):
            values = schedule._kernel_params(self._loss, self.mode, d + bool(self.fit_intercept))
        else:
            values = {"kind": _k.KIND_ARRAY}
        for key, value in values.items():
            p[_PARAM[key]] = value
        return p

    # -- state ----------------------------------------------------------------
    @staticmethod
    def _window_size(params, block, state):
        # the residual window (or what it already holds, if the window was
        # made smaller mid-stream) plus room for one block (push_residuals)
        return int(max(params[_PARAM["window"]], params[_PARAM["n_warmup"]],
                       state[_STATE["fill"]], 1)) + block + 1

    def _fresh_state(self, d):
        return {
            "w": np.zeros(d),
            "wbar": np.zeros(d),
            "state": np.zeros(len(_k.STATE_FIELDS)),
            "window": np.zeros(0),
            "pending_X": np.zeros((0, d)),
            "pending_y": np.zeros(0),
            "store_X": np.zeros((0, d)),
            "store_y": np.zeros(0),
            "store_n": 0,
        }

    def _commit(self, new, d):
        self._w_ = new["w"]
        self._wbar_ = new["wbar"]
        self._state_ = new["state"]
        self._window_ = new["window"]
        self._pending_X_ = new["pending_X"]
        self._pending_y_ = new["pending_y"]
        self._store_X_ = new["store_X"]
        self._store_y_ = new["store_y"]
        self._store_n_ = new["store_n"]
        self.n_features_in_ = d

    def _working_copy(self, d):
        # The kernels write into copies; they replace the state only on success,
        # so a rejected or failed call leaves the estimator as it was.
        if not hasattr(self, "_state_"):
            return self._fresh_state(d)
        return {"w": self._w_.copy(), "wbar": self._wbar_.copy(), "state": self._state_.copy(),
                "window": self._window_.copy(), "pending_X": self._pending_X_,
                "pending_y": self._pending_y_, "store_X": self._store_X_,
                "store_y": self._store_y_, "store_n": self._store_n_}

    @staticmethod
    def _grow_window(new, size):
        if new["window"].shape[0] < size:
            new["window"] = np.concatenate([new["window"], np.zeros(size - new["window"].shape[0])])

    @staticmethod
    def _user_stepsizes(schedule, start, count):
        etas = np.ascontiguousarray(schedule.stepsizes(int(start), int(count)), dtype=np.float64)
        if etas.shape != (count,) or not (np.isfinite(etas).all() and (etas > 0).all()):
            raise ValueError(f"schedule.stepsizes({int(start)}, {count}) must return {count} "
                             f"finite, positive stepsizes")
        return etas

    # -- fitting --------------------------------------------------------------
    def _validate_xy(self, X, y):
        # Shapes and dtypes here; finiteness is checked by the kernels as they
        # go (a NaN/inf makes a residual non-finite), which spares a second
        # pass over X. Rows that wait for a later batch are checked here.
        X = check_matrix(X, "X", finite=False)
        y = check_vector(y, X.shape[0], "y", finite=False)
        check_n_features(self, X.shape[1])
        return X, y

    def partial_fit(self, X, y):
        """Learn from one block of the stream.

        ``mode="single"``: one update per row, in order. ``"batch"``: one update
        per ``batch_size`` rows (rows short of a full batch wait for the next
        call); with ``batch_size=None`` the whole call is one batch.
        ``"storage"``: the rows join all data seen so far and one sub-gradient
        step is taken on the loss over all of it.

        Returns
        -------
        self
        """
        schedule = self._check_params()
        X, y = self._validate_xy(X, y)
        self._run(X, y, schedule, batch_size=self.batch_size)
        return self

    def _learnt(self):
        return {a: v for a, v in vars(self).items() if a.endswith("_") and not a.startswith("__")}

    def fit(self, X, y):
        """Forget what was learnt and make one pass over (X, y) in the chosen
        mode; in batch and storage modes the data arrive in blocks of
        ``batch_size`` rows (default max(2 (d + 1), 16)), the last block may be
        shorter. If the data are rejected, the estimator keeps its old state."""
        schedule = self._check_params()
        X = check_matrix(X, "X", finite=False)     # afresh: n_features may change
        y = check_vector(y, X.shape[0], "y", finite=False)
        old = self._learnt()
        for attr in old:
            delattr(self, attr)
        try:
            if self.mode == "single":
                self._run(X, y, schedule, batch_size=None)
            else:
                bs = self.batch_size or max(2 * (X.shape[1] + 1), 16)
                n_full = (X.shape[0] // bs) * bs
                if self.mode == "batch":
                    self._run(X[:n_full], y[:n_full], schedule, batch_size=bs)
                    if n_full < X.shape[0]:
                        self._run(X[n_full:], y[n_full:], schedule, batch_size=None)
                else:
                    for start in range(0, X.shape[0], bs):
                        self._run(X[start:start + bs], y[start:start + bs], schedule,
                                  batch_size=None)
        except BaseException:
            for attr in self._learnt():
                delattr(self, attr)
            vars(self).update(old)
            raise
        return self

    def _raise(self, code, row, X, y, row_offset=0):
        if code == _k.ERR_BADINPUT:
            i = row - row_offset
            if 0 <= i < X.shape[0] and not np.isfinite(X[i]).all():
                raise ValueError(f"X contains NaN or inf (row {i}); every value must be finite")
            if 0 <= i < y.shape[0] and not np.isfinite(y[i]):
                raise ValueError(f"y contains NaN or inf (row {i}); every value must be finite")
            code = _k.ERR_NONFINITE     # finite input, overflowing residual
        exc, msg = _ERRORS[code]
        raise exc(f"{type(self).__name__}: {msg}")

    def _run(self, X, y, schedule, batch_size):
        n, d = X.shape
        params = self._params_vector(schedule, d)
        new = self._working_copy(d)
        st = new["state"]
        user = params[_PARAM["kind"]] == _k.KIND_ARRAY
        t0 = st[_STATE["t"]]
        code, row, offset = 0, -1, 0
        if self.mode == "single":
            etas = self._user_stepsizes(schedule, t0, n) if user else np.zeros(0)
            self._grow_window(new, self._window_size(params, 0, st))
            code, row = _k.sgd_single(X, y, new["w"], new["wbar"], st, params, new["window"],
                                      etas)
        elif self.mode == "batch":
            # Rows waiting from the last call first complete their batch with
            # the head of X; the rest of X goes down as it is (no copy of X).
            k = new["pending_X"].shape[0]
            block = batch_size or k + n
            parts, start = [], 0          # (X rows, y rows, index of their first row in X)
            if k:
                start = min(block - k, n)
                head_X = np.concatenate([new["pending_X"], X[:start]])
                head_y = np.concatenate([new["pending_y"], y[:start]])
                if head_X.shape[0] == block:
                    parts.append((head_X, head_y, -k))
                    new["pending_X"], new["pending_y"] = np.zeros((0, d)), np.zeros(0)
            n_full = (n - start) // block * block
            if n_full:
                parts.append((X[start:start + n_full], y[start:start + n_full], start))
            head_waits = k and not parts  # X joined the pending rows, still short
            waiting = 0 if head_waits else start + n_full   # X rows the kernel skips
            check_matrix(X[waiting:], "X")
            check_vector(y[waiting:], n - waiting, "y")
            if head_waits:
                new["pending_X"], new["pending_y"] = head_X, head_y
            else:
                new["pending_X"] = np.concatenate([new["pending_X"], X[waiting:]])
                new["pending_y"] = np.concatenate([new["pending_y"], y[waiting:]])
            n_updates = sum(part[0].shape[0] for part in parts) // block
            etas = self._user_stepsizes(schedule, t0, n_updates) if user and n_updates \
                else np.zeros(0)
            self._grow_window(new, self._window_size(params, block, st))
            for X_part, y_part, first in parts:
                nb = X_part.shape[0] // block
                code, row = _k.sgd_blocks(X_part, y_part, block, new["w"], new["wbar"], st,
                                          params, new["window"], etas[:nb])
                etas = etas[nb:]
                if code != 0:
                    offset = -first
                    break
        else:
            # All data so far, in arrays with spare capacity (amortised appends).
            # Rows are checked before they are written: a step costs O(N d)
            # anyway, and a rejected call must not write into the store.
            check_matrix(X, "X")
            check_vector(y, n, "y")
            eta = float(self._user_stepsizes(schedule, t0, 1)[0]) if user and n else 0.0
            n_old = int(new["store_n"])
            in_place = n_old + n <= new["store_X"].shape[0]
            if not in_place:
                cap = max(2 * new["store_X"].shape[0], n_old + n, 64)
                grown_X, grown_y = np.zeros((cap, d)), np.zeros(cap)
                grown_X[:n_old], grown_y[:n_old] = new["store_X"][:n_old], new["store_y"][:n_old]
                new["store_X"], new["store_y"] = grown_X, grown_y
            new["store_X"][n_old:n_old + n] = X
            new["store_y"][n_old:n_old + n] = y
            new["store_n"] = n_old + n
            offset = n_old
            if n:
                code, row = _k.sgd_storage(new["store_X"][:n_old + n], new["store_y"][:n_old + n],
                                           n_old, new["w"], new["wbar"], st, params, eta)
        if code != 0:
            if self.mode == "storage" and in_place:     # leave the spare room as it was
                new["store_X"][n_old:n_old + n] = 0.0
                new["store_y"][n_old:n_old + n] = 0.0
            self._raise(code, row, X, y, offset)
        self._commit(new, d)

    # -- learnt attributes ----------------------------------------------------
    def _averaged(self):
        return self.average and self._state_[_STATE["n_avg"]] > 0

    @property
    def coef_(self):
        """Coefficients (the Polyak-Ruppert average when ``average=True``)."""
        check_fitted(self, "_state_")
        return (self._wbar_ if self._averaged() else self._w_).copy()

    @property
    def intercept_(self):
        check_fitted(self, "_state_")
        key = "intercept_avg" if self._averaged() else "intercept"
        return float(self._state_[_STATE[key]])

    @property
    def n_samples_seen_(self):
        """Rows received so far (including rows waiting for a full batch)."""
        check_fitted(self, "_state_")
        return int(self._state_[_STATE["n_seen"]]) + self._pending_X_.shape[0]

    @property
    def n_updates_(self):
        check_fitted(self, "_state_")
        return int(self._state_[_STATE["t"]])

    @property
    def cumulative_loss_(self):
        """Prequential loss: each sample's loss under the iterate before the
        update it causes (check loss; squared loss r^2 / 2 for least squares)."""
        check_fitted(self, "_state_")
        return float(self._state_[_STATE["loss"]])

    @property
    def schedule_state_(self):
        """The schedule's estimates and phase, for inspection: phase (0 warm-up,
        1 geometric, 2 and 3 as in the paper), stepsize of the last update,
        start of the current phase (t_switch), D0, sparsity b0, Cl."""
        check_fitted(self, "_state_")
        s = self._state_
        return {"phase": int(s[_STATE["phase"]]), "stepsize": float(s[_STATE["last_eta"]]),
                "t_switch": int(s[_STATE["t_switch"]]), "d0": float(s[_STATE["d0"]]),
                "b0": float(s[_STATE["b0"]]), "cl": float(s[_STATE["cl"]])}

    def predict(self, X):
        """Predicted tau-quantiles (conditional means for least squares)."""
        check_fitted(self, "_state_")
        X = check_matrix(X, "X")
        check_n_features(self, X.shape[1])
        out = np.empty(X.shape[0])
        _k.predict(X, self.coef_, self.intercept_, out)
        return out


class OnlineQuantileRegressor(_OnlineLinearSGD):
    """Online linear quantile regression by sub-gradient descent on the check loss.

    Implements Shen, Xia & Zhou, "Online Quantile Regression" (JMLR 2025): the
    update beta <- beta - eta_t mean_i (1{y_i <= x_i'beta} - tau) x_i over one
    sample (``mode="single"``), one batch (``"batch"``) or all data so far
    (``"storage"``), with the paper's statistical stepsizes by default and
    nothing about the data given by the user (see
    :class:`~streamfit.schedules.StatisticalSchedule` for the estimation rules).

    Parameters
    ----------
    tau : float in (0, 1)
        The quantile.
    mode : {"single", "batch", "storage"}
    schedule : str or schedule object
        "statistical" (default), "constant", "inverse_time", or an object from
        :mod:`streamfit.schedules` (or any object with ``stepsizes(start, count)``).
    batch_size : int or None
        Rows per update in batch mode; block size of ``fit`` in batch/storage mode.
    average : bool
        Polyak-Ruppert averaging of the iterates over the schedule's last phase
        (whose decay becomes t^-2/3); ``coef_`` is then the average.
    fit_intercept : bool
    random_state : None, int or Generator
        Accepted for a uniform API; the updates are deterministic.

    Attributes
    ----------
    coef_, intercept_, n_samples_seen_, n_updates_, cumulative_loss_,
    schedule_state_, n_features_in_

    Notes
    -----
    The paper's stepsizes are scalars tuned to E[x x'] with eigenvalues in
    [Cl, Cu] of one order: standardize features on very different scales,
    or the small ones learn slowly (the schedule stays stable, it is not a
    preconditioner). With an intercept, center the features too.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(20000, 10, tau=0.75, random_state=0)
    >>> est = OnlineQuantileRegressor(tau=0.75, average=True)
    >>> for start in range(0, 20000, 1000):          # a stream, block by block
    ...     est = est.partial_fit(X[start:start + 1000], y[start:start + 1000])
    >>> err = np.linalg.norm(est.coef_ - beta) / np.linalg.norm(beta)
    >>> bool(err < 0.02), est.n_samples_seen_
    (True, 20000)
    """

    _loss = _k.LOSS_CHECK

    def __init__(self, tau=0.5, *, mode="single", schedule="statistical", batch_size=None,
                 average=False, fit_intercept=True, random_state=None):
        self.tau = tau
        self.mode = mode
        self.schedule = schedule
        self.batch_size = batch_size
        self.average = average
        self.fit_intercept = fit_intercept
        self.random_state = random_state


class OnlineLeastSquaresRegressor(_OnlineLinearSGD):
    """Online least squares by single-sample gradient descent (the paper's
    comparator, Section 3.1).

    The gradient of (y - x'beta)^2 / 2 is -(y - x'beta) x. The statistical
    schedule is the two-phase one the paper derives for least squares: a
    constant eta = 0.5 / (d Cl) until the errors stop falling (the window
    median of |residual| has not dropped 10% below its best for 3 windows),
    then Ca / (Cl (t - t1) + Ca / eta), an O(1/(t + d)) decay continuous at
    the switch. ``average=True`` (beyond the paper) averages the iterates
    from the next plateau on, under a t^-2/3 decay.

    Parameters
    ----------
    schedule : str or schedule object
    average : bool
    fit_intercept : bool

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import OnlineLeastSquaresRegressor
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(20000, 10, noise="gaussian", random_state=0)
    >>> est = OnlineLeastSquaresRegressor().fit(X, y)
    >>> bool(np.linalg.norm(est.coef_ - beta) < 0.02 * np.linalg.norm(beta))
    True
    """

    _loss = _k.LOSS_SQUARED

    def __init__(self, *, schedule="statistical", average=False, fit_intercept=True):
        self.schedule = schedule
        self.average = average
        self.fit_intercept = fit_intercept
