"""Online quantile regression and online least squares by (sub-)gradient descent.

Python validates and owns the state; ``streamfit._kernels._quantile`` runs the
whole sample loop without the GIL (see ``_state`` for how a call advances the
state).
"""
from __future__ import annotations

import itertools
import numbers
import os
import sys
import warnings

import numpy as np
from sklearn.metrics import d2_pinball_score
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import StreamRegressor, serialized
from .._errors import (ERR_BADINPUT, ERR_INTERRUPTED, ERR_NONFINITE, ERR_SCALE, OK,
                       raise_for, raise_row_error)
from .._kernels import _quantile as _k
from .._validation import (_check_real_array, as_float64, as_matrix, as_target, as_weights,
                           check_matrix, check_memory, check_scalar, check_seed, check_vector,
                           feature_names)
from ..exceptions import _warn_if_warming_up
from ..schedules import InverseTimeSchedule, Schedule, resolve_schedule
from ._inference import critical_value, random_scaling_matrix
from ._multi import NONCROSSING, MultiWork, advance_multi, rearrange
from ._state import Plan, Work, advance

__all__ = ["OnlineQuantileRegressor", "OnlineLeastSquaresRegressor"]

_SQRT_DBL_MIN = float(np.sqrt(np.finfo(float).tiny))
_VERSIONS = itertools.count()
_MODES = {"single": _k.MODE_SINGLE, "batch": _k.MODE_BATCH, "storage": _k.MODE_STORAGE}
_MODE_NAMES = {v: k for k, v in _MODES.items()}
# The drift test (csrc/_qr_drift.pxd): its CUSUM's alarm threshold (a mean
# time to a false alarm of at least e^25 = 7e10 rows on a stationary
# stream), the rows the average holds before the test runs, and whether an
# alarm also restarts the statistical schedule's last-phase clock (one alarm
# per change and a faster recovery: measured in csrc/_qr_drift.pxd).
_DRIFT = (None, "restart")
_DRIFT_H = 25.0
_DRIFT_ARM = 100.0
_DRIFT_CLOCK = 1.0
_KIND_NAMES = {_k.KIND_CONSTANT: "ConstantSchedule", _k.KIND_INVERSE_TIME: "InverseTimeSchedule",
               _k.KIND_STATISTICAL: "StatisticalSchedule", _k.KIND_ARRAY: "a user schedule"}
# State fields of the statistical schedule, zeroed when it takes over mid-stream
_SCHEDULE_FIELDS = ("phase", "eta_geo", "t_switch", "d0", "b0", "cl", "sumsq", "n_sumsq",
                    "fill", "min_med", "eta_start", "avg_on", "n_flat", "b0_cap", "k_pow",
                    "eta_pow", "cu", "level", "n_high", "win_sumsq", "win_wsum", "n_avg")


def _caller_level():
    """warnings.warn's stacklevel of the first frame outside streamfit (the
    user's call, through however many of the package's own frames)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


class _OnlineLinearSGD(StreamRegressor):
    """What the online linear estimators share: parameters, state, calls."""

    _loss = _k.LOSS_CHECK
    # least squares has no tau, mode or batch_size parameters
    mode = "single"
    tau = 0.5
    batch_size = None
    inference = False
    noncrossing = "rearrange"
    scale = None
    drift = None
    _TRANSIENT_ATTRS = ("_param_cache", "_spare_state", "_params_version")

    # -- scikit-learn -----------------------------------------------------------
    def _expected_failed_checks(self):
        """scikit-learn's checks this configuration fails by design, with the
        reason (read by ``streamfit.utils.estimator_checks.expected_failed_checks``)."""
        failures = {"check_sample_weight_equivalence_on_dense_data": (
            "a weight scales one step where a repeat takes several, and an online fit "
            "depends on the order of the rows (storage mode: one step per block of "
            "batch_size rows, so repeats make more steps); the check compares weighted "
            "rows, shuffled, with repeated rows in order")}
        if isinstance(self.tau, (list, tuple, np.ndarray)):
            failures["check_regressors_train"] = (
                "several quantiles predict one column each: predict returns shape "
                "(n_samples, len(tau)) for a 1-D y")
        return failures

    # -- parameters -------------------------------------------------------------
    def _taus(self):
        """The taus as a tuple when ``tau`` is a list or array (several
        quantiles), else None."""
        tau = self.tau
        if isinstance(tau, (list, tuple, np.ndarray)):
            arr = _check_real_array(tau, "tau")
            if arr.ndim != 1 or arr.size < 1:
                raise ValueError(f"tau must be a number or a 1-D list of numbers, got shape "
                                 f"{arr.shape}")
            return tuple(float(t) for t in arr)
        return None

    def _check_params(self):
        taus = self._taus()
        for t in (taus if taus is not None else (self.tau,)):
            check_scalar(t, "tau", low=0, high=1, low_open=True, high_open=True)
        if taus is not None and any(b <= a for a, b in zip(taus, taus[1:])):
            raise ValueError(f"tau must be strictly increasing, got {list(taus)}")
        if not isinstance(self.noncrossing, str) or self.noncrossing not in NONCROSSING:
            raise ValueError(f"noncrossing must be one of {tuple(NONCROSSING)}, got "
                             f"{self.noncrossing!r}")
        if taus is not None:
            if self.mode != "single":
                raise ValueError(f"mode must be 'single' with several taus (the multi-quantile "
                                 f"kernel updates per row), got {self.mode!r}")
            if not isinstance(self.schedule, str) and not isinstance(self.schedule, Schedule):
                raise ValueError("schedule: a user schedule (stepsizes(start, count)) is not "
                                 "supported with several taus; use 'statistical', 'constant' "
                                 "or 'inverse_time' or a schedule object of streamfit.schedules")
        if not isinstance(self.mode, str) or self.mode not in _MODES:
            raise ValueError(f"mode must be one of {tuple(_MODES)}, got {self.mode!r}")
        check_scalar(self.batch_size, "batch_size", kind=numbers.Integral, low=1,
                     allow_none=True)
        for name in ("average", "fit_intercept", "inference"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.inference and not (self.average and self.mode != "storage"):
            raise ValueError("inference=True needs average=True and mode 'single' or 'batch' "
                             "(random scaling is for the averaged iterate of a stochastic-"
                             "gradient path; storage mode's steps use all data so far), got "
                             f"average={self.average!r}, mode={self.mode!r}")
        if not (self.drift is None or (isinstance(self.drift, str) and self.drift in _DRIFT)):
            raise ValueError(f"drift must be None or 'restart', got {self.drift!r}")
        if self.drift is not None and (self.mode != "single" or taus is not None
                                       or self.scale is not None or not self.average):
            raise ValueError(f"drift={self.drift!r} restarts the Polyak-Ruppert average: it "
                             f"needs average=True, and is implemented for one tau in mode "
                             f"'single' with scale=None (the test runs in the single-sample "
                             f"row loop), got average={self.average!r}, mode={self.mode!r}, "
                             f"tau={self.tau!r}, scale={self.scale!r}")
        check_seed(getattr(self, "random_state", None))
        if self.scale not in (None, "online"):
            raise ValueError(f"scale must be None or 'online', got {self.scale!r}")
        if self.scale == "online" and (self.mode != "single" or taus is not None
                                       or self.inference):
            raise ValueError("scale='online' is implemented for one tau in mode 'single' "
                             f"without inference, got mode={self.mode!r}, tau={self.tau!r}, "
                             f"inference={self.inference!r}")
        schedule = resolve_schedule(self.schedule)
        if self.drift is not None and isinstance(schedule, InverseTimeSchedule):
            # under O(1/t) steps the last iterate beats any average of it on
            # every stream, which is what the test detects: it would restart
            # the average every few hundred rows
            raise ValueError(f"drift={self.drift!r} compares the average with the last "
                             "iterate, which O(1/t) steps (schedule='inverse_time') make the "
                             "better fit on any stream; use schedule='statistical' or "
                             "'constant'")
        if self.inference and getattr(schedule, "t0", 0):
            raise ValueError("inference=True with a warm start's schedule.t0 > 0: the average "
                             "then counts the start as t0 iterates, which the random-scaling "
                             "path does not contain; use t0=0 for intervals")
        return schedule

    def __setattr__(self, name, value):
        # a parameter set (by __init__, set_params or by hand) invalidates the
        # cached kernel parameters; the estimator's own state does not
        object.__setattr__(self, name, value)
        if name[0] != "_":
            self.__dict__["_params_version"] = next(_VERSIONS)

    def _param_key(self):
        sched = self.schedule
        return (self.__dict__.get("_params_version"), sched if isinstance(sched, str) else
                id(sched), getattr(sched, "_version", None))

    def _resolve(self, d):
        """(schedule, params record, plan) for data of d features; cached
        while the parameters stay the same (set_params and nested changes of
        the schedule's constants are seen: both bump a version), so that an
        unchanged record is the same object."""
        key = self._param_key()
        cache = self.__dict__.get("_param_cache")
        if cache is not None and cache[0] == d and cache[1] == key:
            return cache[2]
        schedule = self._check_params()
        params = self._params_record(schedule, d)
        resolved = (schedule, params, Plan(params[:1]))
        self.__dict__["_param_cache"] = (d, key, resolved)
        return resolved

    def _params_record(self, schedule, d):
        taus = self._taus()
        if taus is not None:
            records = []
            for t in taus:
                rec = self._one_params_record(schedule, d, t).copy()
                records.append(rec)
            p = np.concatenate(records)
            p.flags.writeable = False
            return p
        return self._one_params_record(schedule, d, self.tau)

    def _one_params_record(self, schedule, d, tau):
        p = _k.new_params()
        p["tau"] = tau
        p["loss"] = self._loss
        p["average"] = float(bool(self.average))
        p["fit_intercept"] = float(bool(self.fit_intercept))
        p["mode"] = _MODES[self.mode]
        if self.drift is not None:
            p["drift"] = 1.0
            p["drift_h"] = _DRIFT_H
            p["drift_arm"] = _DRIFT_ARM
            p["drift_clock"] = _DRIFT_CLOCK
        da = d + bool(self.fit_intercept)
        values = schedule._kernel_params(self._loss, self.mode, da) \
            if isinstance(schedule, Schedule) else {"kind": _k.KIND_ARRAY}
        for key, value in values.items():
            p[key] = value
        if p["kind"][0] == _k.KIND_STATISTICAL:
            for name in ("window", "n_warmup"):
                # the residual buffer and its order-statistics twin
                check_memory(16 * float(p[name][0]), f"schedule.{name}",
                              getattr(schedule, name), "a residual buffer")
        if self.mode == "batch" and self.batch_size is not None:
            check_memory(8 * (d + 3) * float(self.batch_size), "batch_size", self.batch_size,
                          f"a buffer for one batch of rows of {d} features")
        p.flags.writeable = False
        return p

    def _check_continuation(self, params):
        """Refuse the mid-stream changes that would make the state meaningless
        (see the class docstring), also on a call without rows."""
        old = self._fit_.params[0]
        new = params[0]
        refused = [("mode", _MODE_NAMES[int(old["mode"])], _MODE_NAMES[int(new["mode"])]),
                   ("tau", float(old["tau"]), float(new["tau"])),
                   ("fit_intercept", bool(old["fit_intercept"]), bool(new["fit_intercept"]))]
        for name, before, now in refused:
            if before != now:
                raise ValueError(f"{name} changed from {before!r} to {now!r} since the first "
                                 f"call; the learnt state belongs to {name}={before!r}. Set "
                                 f"it back, or call fit() to start afresh")

    def _continue_with(self, work, params, plan):
        """Apply the accepted mid-stream changes to a working copy."""
        old = work.params[0]
        new = params[0]
        if new["kind"] == _k.KIND_STATISTICAL and old["kind"] != _k.KIND_STATISTICAL:
            # the statistical schedule takes over: it warms up afresh from
            # the current iterate
            for name in _SCHEDULE_FIELDS:
                work.state[name] = 0.0
        if new["average"] and not old["average"]:
            work.state["n_avg"] = 0.0        # the average restarts
        if new["drift"] != old["drift"]:
            # the drift test starts afresh (its reference from the next row)
            for name in ("dr_n", "dr_cusum"):
                work.state[name] = 0.0
        work.follow(params, plan)
        work.track_inference(bool(self.inference))

    # -- fitting ----------------------------------------------------------------
    @serialized
    def partial_fit(self, X, y, sample_weight=None, coef_init=None, intercept_init=None):
        """Learn from one block of the stream.

        ``mode="single"``: one update per row, in order. ``"batch"``: one update
        per ``batch_size`` rows (rows short of a full batch wait for the next
        call); with ``batch_size=None`` the whole call is one batch.
        ``"storage"``: the rows join all data seen so far and one sub-gradient
        step is taken on the loss over all of it. A call with no rows does
        nothing.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            float32 rows are read as they are in mode "single"
            (see "float32 rows" in the class docstring).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), float or None
            Non-negative row weights (see the class docstring).
        coef_init, intercept_init : array-like of shape (n_features,), float
            The starting point of a fresh estimator (a warm start); refused
            once the estimator has learnt something. With the default
            ``schedule="statistical"`` a warm start warns: pass
            ``StatisticalSchedule(start="phase2", t0=n)``, n the rows the start
            was fitted on (see ``fit``).

        Returns
        -------
        self
        """
        fit = self.__dict__.get("_fit_")
        names = feature_names(X)
        if fit is not None and (names is not None or fit.names is not None):
            validate_data(self, X, reset=False, skip_check_array=True, ensure_2d=False)
        X = as_matrix(X, float32=True)
        n, d = X.shape
        if fit is not None and d != fit.w.shape[-1]:
            self._check_n_features(d, False)
        y = as_target(y, n, type(self).__name__)
        sw = as_weights(sample_weight, n)
        schedule, params, plan = self._resolve(d)
        self._check_kind(fit, params)
        if params.shape[0] > 1 or self._taus() is not None:
            # (several taus read float32 rows as they are, as single mode does)
            return self._partial_fit_multi(fit, X, y, sw, params, names, coef_init,
                                           intercept_init)
        if plan.mode != _k.MODE_SINGLE:
            X = as_float64(X)       # (single mode reads float32 rows as they are)
        if fit is None:
            init = self._initial(d, coef_init, intercept_init)
            if n == 0:
                return self
            work = Work.fresh(d, params, plan, *init)
            work.track_inference(bool(self.inference))
            self._start_scaler(work, d, coef_init, intercept_init)
            self._warn_if_phase_one_restarts(coef_init, intercept_init)
        else:
            if coef_init is not None or intercept_init is not None:
                raise ValueError("coef_init and intercept_init start a fresh fit: this "
                                 f"{type(self).__name__} has already learnt from "
                                 f"{self.n_samples_seen_} rows. Call fit() to start "
                                 "afresh from them")
            changed = params is not fit.params
            if changed:
                self._check_continuation(params)
            if n == 0:
                return self
            if (fit.scaler is not None) != (self.scale == "online"):
                raise ValueError(f"scale changed to {self.scale!r} since the first call; "
                                 "the learnt coefficients are on the old scale. Set it "
                                 "back, or call fit() to start afresh")
            work = fit.copy(self.__dict__.pop("_spare_state", None))
            if changed:
                self._continue_with(work, params, plan)
        out = advance(work, X, y, sw, schedule, self.batch_size)
        self._finish(work, out, X, names, "partial_fit")
        return self

    @serialized
    def fit(self, X, y, sample_weight=None, coef_init=None, intercept_init=None):
        """Forget what was learnt and make one pass over (X, y) in the chosen
        mode; in batch and storage modes the data arrive in blocks of
        ``batch_size`` rows (default max(2 (d + 1), 16)), the last block may be
        shorter. If the call fails, the estimator keeps its previous state; if
        a signal handler interrupts it, the estimator holds the fresh fit of
        the rows before the interruption.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), n_samples >= 1
            float32 rows are read as they are in mode "single"
            (see "float32 rows" in the class docstring).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), float or None
        coef_init, intercept_init : array-like of shape (n_features,), float
            Starting point (a warm start); default zeros. The statistical
            schedule's phase one would start over from it with its largest
            steps, so with the default ``schedule="statistical"`` a warm start
            warns (``UserWarning``) and names the fix:
            ``schedule=StatisticalSchedule(start="phase2", t0=n)``, n the rows
            the start was fitted on, continues that clock (an explicit
            ``StatisticalSchedule(start="phase1")`` restarts phase one without
            a warning).

        Returns
        -------
        self

        Warns
        -----
        streamfit.exceptions.WarmupWarning
            When the statistical schedule's warm-up (``n_warmup`` rows,
            default 50) outlasts X: no step was taken, the coefficients are
            still their start.
        """
        names = feature_names(X)
        X = as_matrix(X, float32=True)
        n, d = X.shape
        if n == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape=({n}, {d})) while a "
                             f"minimum of 1 is required by {type(self).__name__}.fit; "
                             "the estimator keeps its previous state")
        y = as_target(y, n, type(self).__name__)
        sw = as_weights(sample_weight, n)
        if sw is not None and not sw.any():
            raise ValueError("sample_weight: every weight is zero, so there is nothing to "
                             "learn (Sample weights must contain at least one non-zero "
                             "number); the estimator keeps its previous state")
        schedule, params, plan = self._resolve(d)
        if self._taus() is not None:
            work = MultiWork.fresh(d, params, *self._initial_multi(d, params.shape[0],
                                                                   coef_init,
                                                                   intercept_init))
            work.track_inference(bool(self.inference))
            self._warn_if_phase_one_restarts(coef_init, intercept_init)
            out = advance_multi(work, X, y, sw, self.noncrossing)
            self._finish(work, out, X, names, "fit", fresh=True)
            self._warn_if_warming_up(work, params, n, after=1)
            return self
        work = Work.fresh(d, params, plan, *self._initial(d, coef_init, intercept_init))
        work.track_inference(bool(self.inference))
        self._start_scaler(work, d, coef_init, intercept_init)
        self._warn_if_phase_one_restarts(coef_init, intercept_init)
        if self.mode == "single":
            out = advance(work, X, y, sw, schedule)
        else:
            bs = self.batch_size or max(2 * (d + 1), 16)
            X = as_float64(X)
            out = self._fit_blocks(work, X, y, sw, schedule, bs)
        self._finish(work, out, X, names, "fit", fresh=True)
        # single mode steps from the row after the warm-up, batch mode on the
        # block that completes it (storage mode steps on its first block: it
        # never warns)
        self._warn_if_warming_up(work, params, n, after=int(self.mode == "single"))
        return self

    def _warn_if_warming_up(self, work, params, n, after):
        _warn_if_warming_up(self, params, int(work.state["n_updates"][0]), n, after)

    def _fit_blocks(self, work, X, y, sw, schedule, bs):
        n = X.shape[0]
        n_full = n // bs * bs
        if self.mode == "batch":
            spans = [(0, n_full, bs)] + ([(n_full, n, None)] if n_full < n else [])
        else:
            spans = [(a, min(a + bs, n), None) for a in range(0, n, bs)]
        consumed = 0
        for a, b, block in spans:
            out = advance(work, X[a:b], y[a:b], None if sw is None else sw[a:b], schedule,
                          block)
            if out.bad is not None and out.bad[0] is not None:
                out.bad = (out.bad[0] + a,) + out.bad[1:]
            consumed += out.consumed
            if out.code != OK:
                out.consumed = consumed
                return out
        out.consumed = consumed
        return out

    def _start_scaler(self, work, d, coef_init, intercept_init):
        if self.scale != "online":
            return
        if coef_init is not None or intercept_init is not None:
            raise ValueError("coef_init/intercept_init with scale='online': a warm start is on "
                             "the original scale, which the scaler has not seen yet; use "
                             "scale=None for warm starts")
        work.scaler = np.zeros(2 * d + 1)

    # -- several quantiles ------------------------------------------------------
    def _check_kind(self, fit, params):
        """One tau and several are different states: a switch mid-stream is
        refused (naming tau), also on a call without rows."""
        if fit is None or params is fit.params:
            # (the record the state was made with: the same taus)
            return
        if not isinstance(fit, MultiWork) and self._taus() is None:
            return          # one tau: _check_continuation
        old = tuple(float(t) for t in fit.params["tau"])
        new = tuple(float(t) for t in params["tau"])
        if isinstance(fit, MultiWork) != (self._taus() is not None) or old != new:
            before = list(old) if isinstance(fit, MultiWork) else old[0]
            raise ValueError(f"tau changed from {before!r} to {self.tau!r} since the first "
                             "call; the learnt state belongs to the old tau. Set it back, or "
                             "call fit() to start afresh")

    def _initial_multi(self, d, m, coef_init, intercept_init):
        """The checked starting point of m quantiles: coef_init (m, d) or (d,)
        (the same for each), intercept_init (m,) or a number."""
        coef = None
        if coef_init is not None:
            arr = check_matrix(np.atleast_2d(_check_real_array(coef_init, "coef_init")),
                               "coef_init")
            if arr.shape == (1, d):
                arr = np.repeat(arr, m, axis=0)
            if arr.shape != (m, d):
                raise ValueError(f"coef_init must have shape ({m}, {d}) or ({d},) for {m} "
                                 f"taus and {d} features, got {np.shape(coef_init)}")
            coef = np.ascontiguousarray(arr, dtype=np.float64)
        b = None
        if intercept_init is not None:
            arr = _check_real_array(intercept_init, "intercept_init").astype(float).ravel()
            if arr.size == 1:
                arr = np.repeat(arr, m)
            if arr.shape != (m,) or not np.isfinite(arr).all():
                raise ValueError(f"intercept_init must be a finite number or {m} of them, got "
                                 f"{np.shape(intercept_init)}")
            if arr.any() and not self.fit_intercept:
                raise ValueError("intercept_init is given but fit_intercept=False")
            b = arr
        return coef, b

    def _warn_if_phase_one_restarts(self, coef_init, intercept_init):
        """A warm start under the default schedule: phase one, a descent from
        a poor start with the largest steps, would start over from it and
        undo much of it (d = 20, an offline start from 20,000 rows, 10,000
        further rows: 4.3x the start's error, 2.0x averaged). The rows behind
        the start are not known here, so the fix is the caller's to give."""
        if (coef_init is None and intercept_init is None) or not (
                isinstance(self.schedule, str) and self.schedule == "statistical"):
            return
        warnings.warn(
            "coef_init/intercept_init with the default schedule='statistical': its phase one "
            "(the largest steps) starts over from the warm start and can end worse than the "
            "start. If the start was fitted on n rows, pass schedule=StatisticalSchedule("
            "start='phase2', t0=n) (streamfit.schedules) to continue its clock; to restart "
            "phase one on purpose, pass schedule=StatisticalSchedule(start='phase1')",
            UserWarning, stacklevel=_caller_level())

    def _partial_fit_multi(self, fit, X, y, sw, params, names, coef_init, intercept_init):
        d = X.shape[1]
        if fit is None:
            init = self._initial_multi(d, params.shape[0], coef_init, intercept_init)
            if X.shape[0] == 0:
                return self
            self._warn_if_phase_one_restarts(coef_init, intercept_init)
            work = MultiWork.fresh(d, params, *init)
            work.track_inference(bool(self.inference))
        else:
            if coef_init is not None or intercept_init is not None:
                raise ValueError("coef_init and intercept_init start a fresh fit: this "
                                 f"{type(self).__name__} has already learnt from "
                                 f"{self.n_samples_seen_} rows. Call fit() to start afresh")
            if bool(params["fit_intercept"][0]) != bool(fit.params["fit_intercept"][0]):
                raise ValueError("fit_intercept changed since the first call; the learnt "
                                 "state belongs to the old value. Set it back, or call fit() "
                                 "to start afresh")
            if X.shape[0] == 0:
                return self
            work = fit.copy(self.__dict__.pop("_spare_state", None))
            if params is not fit.params:
                if params["average"][0] and not fit.params["average"][0]:
                    work.state["n_avg"] = 0.0
                work.follow(params)
                work.track_inference(bool(self.inference))
        out = advance_multi(work, X, y, sw, self.noncrossing)
        self._finish(work, out, X, names, "partial_fit")
        return self

    def _initial(self, d, coef_init, intercept_init):
        """The checked starting point (coef, intercept) of a fresh fit."""
        coef = None if coef_init is None else check_vector(coef_init, d, "coef_init").copy()
        b = 0.0
        if intercept_init is not None:
            arr = _check_real_array(intercept_init, "intercept_init")
            if arr.size != 1:
                raise ValueError(f"intercept_init must be one number, got shape {arr.shape}")
            b = check_scalar(float(arr.ravel()[0]), "intercept_init")
            if b != 0 and not self.fit_intercept:
                raise ValueError("intercept_init is given but fit_intercept=False")
        return coef, float(b)

    def _check_n_features(self, d, first):
        if not first and d != self.n_features_in_:
            raise ValueError(f"X has {d} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")

    def _finish(self, work, out, X, names, method, fresh=False):
        """Publish the state after a call (or after the rows before an
        interruption), or raise the kernel's error with the state unchanged."""
        if out.code != OK:
            where = f"{type(self).__name__}.{method}"
            if out.code != ERR_INTERRUPTED:
                self._raise(out, work, where, X)
            if out.consumed == 0 and (fresh or not self.__sklearn_is_fitted__()):
                # nothing was learnt: the estimator stays as before the call
                if hasattr(out.exc, "add_note"):
                    out.exc.add_note(f"{where} was interrupted after 0 of its {X.shape[0]} "
                                     "rows: the estimator is as it was before the call")
                raise_for(ERR_INTERRUPTED, where, exc=out.exc)
        if getattr(work, "rs", None) is not None and not np.isfinite(work.rs).all():
            # the kernel's sums of s^2 u_s u_s' (a row of finite data, a finite
            # iterate) left float64: refuse the call rather than keep them
            with np.errstate(over="ignore"):
                spread = float(np.abs(work.wbar).max(initial=0.0))
            raise ValueError(
                f"{type(self).__name__}.{method}: inference=True keeps sums of squared "
                f"steps of the average times s^2, and they overflow float64 on this data "
                f"(coefficients of order {spread:.3g}): rescale y (or X) by a power of ten "
                "(and the intervals back), or set inference=False. The estimator was left "
                "as it was before this call") from out.exc
        old = self.__dict__.get("_fit_")
        work.names = names if fresh or old is None else old.names
        # One assignment publishes everything: a signal handler (it runs
        # between bytecodes) or another thread sees the old state or the new.
        self._fit_ = work
        if old is not None and old.state.flags.writeable and old.state is not work.state \
                and old.state.shape == work.state.shape and old.state.dtype == work.state.dtype:
            # the old state records are the next call's working copy (readers
            # hold the lock, so none is reading them)
            self.__dict__["_spare_state"] = old.state
        else:
            # (one left from a state of another shape, e.g. before a fit()
            # from several taus to one, or of an older layout, would not fit
            # the next call's copy)
            self.__dict__.pop("_spare_state", None)
        if out.code == ERR_INTERRUPTED:
            exc, where = out.exc, f"{type(self).__name__}.{method}"
            if hasattr(exc, "add_note"):
                exc.add_note(f"{where} was interrupted after {out.consumed} of its "
                             f"{X.shape[0]} rows: the estimator holds the state after them "
                             f"(n_samples_seen_ = {self.n_samples_seen_})")
            raise_for(ERR_INTERRUPTED, where, exc=exc)

    def _raise(self, out, work, where, X):
        """The exception for a kernel's failure (the state is left unchanged)."""
        code, bad, st = out.code, out.bad, work.state[0]
        if bad is not None and code == ERR_BADINPUT:
            i, x, target, _ = bad
            at = f"row {i} of this call" if i is not None else "a row held from an earlier call"
            raise_row_error(where, at, x, target,
                            float(st["cl"]) * (x.shape[0] + bool(self.fit_intercept)))
        if code == ERR_SCALE:
            big = float(np.abs(X).max()) if X.size else 0.0
            if 0 < big < _SQRT_DBL_MIN:
                raise_for(code, where, detail=f"X's entries are at most {big:.3g}: their "
                          "squares underflow float64, so the schedule cannot learn their "
                          "scale.")
            raise_for(code, where, detail="The sum of ||x||^2 over the rows the schedule "
                      "calibrates on overflows.")
        if code == ERR_NONFINITE and not (float(st["eta_geo"]) <= np.finfo(float).max):
            raise_for(code, where, detail=f"Phase one's first stepsize, of order "
                      f"D0 / (d Cl), overflows: y's scale (D0 = {float(st['d0']):.3g}) is too "
                      f"large against X's (Cl = {float(st['cl']):.3g}); rescale y or X.")
        raise_for(code, where)

    # -- learnt attributes ------------------------------------------------------
    def _fitted(self):
        # the published state (NotFittedError, an AttributeError, without
        # one); the callers read it under the lock (a call reuses the state
        # record it replaced)
        fit = self.__dict__.get("_fit_")
        if fit is None:
            check_is_fitted(self)
        return fit

    @staticmethod
    def _averaged(fit):
        return fit.params["average"][0] != 0 and fit.state["n_avg"][0] > 0

    @serialized
    def _solution(self):
        """(coef, intercept) of one published state, read under the lock."""
        fit = self._fitted()
        if isinstance(fit, MultiWork):
            # per quantile: the average once it runs, else the iterate
            avg = (fit.params["average"] != 0) & (fit.state["n_avg"] > 0)
            coef = np.where(avg[:, None], fit.wbar, fit.w)
            b = np.where(avg, fit.state["intercept_avg"], fit.state["intercept"])
            return coef, b.astype(float)
        sc = getattr(fit, "scaler", None)
        if self._averaged(fit):
            # (with scale='online' the kernel averages on the original scale)
            return fit.wbar.copy(), float(fit.state["intercept_avg"][0])
        coef, b = fit.w.copy(), float(fit.state["intercept"][0])
        if sc is not None:
            # back to the original scale: beta = theta / sd, b -= mean' beta
            d = coef.shape[0]
            sd = np.sqrt(sc[1 + d:] / sc[0]) if sc[0] > 0 else np.zeros(d)
            sd = np.where((sd > 0) & np.isfinite(sd), sd, 1.0)
            coef = coef / sd
            if fit.params["fit_intercept"][0]:
                b = b - float(sc[1:1 + d] @ coef)
        return coef, b

    @serialized
    def _field(self, name):
        # several quantiles: the first one's (they take the same updates)
        return self._fitted().state[name][0]

    @property
    def coef_(self):
        """Coefficients (the Polyak-Ruppert average when ``average=True``)."""
        return self._solution()[0]

    @property
    def intercept_(self):
        """Intercept (averaged with ``average=True``); 0 without ``fit_intercept``."""
        return self._solution()[1]

    @property
    def n_features_in_(self):
        """Features seen by the first call (or ``fit``)."""
        return self._fitted().w.shape[-1]

    @property
    def feature_names_in_(self):
        """Column names of the DataFrame the estimator learnt from (only then)."""
        names = self._fitted().names
        if names is None:
            raise AttributeError(f"{type(self).__name__} was not fitted on data with "
                                 "feature names (a DataFrame with string column names)")
        return names

    @property
    @serialized
    def n_samples_seen_(self):
        """Rows received so far (including rows waiting for a full batch,
        whatever their weight)."""
        fit = self._fitted()
        return int(fit.state["n_seen"][0]) + fit.pending_X.shape[0]

    @property
    def n_updates_(self):
        """Updates taken: rows of positive weight (single mode), blocks of
        positive weight (batch mode), calls with new weight (storage mode);
        statistical schedules take none during their warm-up."""
        return int(self._field("n_updates"))

    @property
    @serialized
    def drift_restart_rows_(self):
        """Rows of the stream (0-based, counted over every call since the
        first, as ``n_samples_seen_`` counts them) at which the drift test
        (``drift="restart"``) raised an alarm and restarted the average, in
        order; empty without an alarm (and with ``drift=None``)."""
        rows = getattr(self._fitted(), "drift_rows", None)
        return np.zeros(0, np.int64) if rows is None else rows.astype(np.int64)

    @property
    def n_drift_restarts_(self):
        """Alarms of the drift test so far: ``len(drift_restart_rows_)``."""
        return int(self.drift_restart_rows_.shape[0])

    @property
    @serialized
    def cumulative_loss_(self):
        """Prequential loss: each sample's (weighted) loss under the iterate
        before the update it causes (check loss; squared loss r^2 / 2 for
        least squares); with several taus an array, one per tau."""
        loss = self._fitted().state["loss"]
        return loss.astype(float) if loss.shape[0] > 1 or self._taus() is not None \
            else float(loss[0])

    @property
    @serialized
    def schedule_state_(self):
        """The schedule's estimates and phase, for inspection: phase (0 warm-up,
        1 geometric, 2 and 3 as in the paper), stepsize of the last update,
        start of the current phase (t_switch, on the schedule's clock), D0,
        sparsity b0, Cl, and how often a jump of the residual scale restarted
        phase one (restarts)."""
        fit = self._fitted()
        states = fit.state.copy()
        multi = isinstance(fit, MultiWork)
        out = [{"phase": int(s["phase"]), "stepsize": float(s["last_eta"]),
                "t_switch": int(s["t_switch"]), "d0": float(s["d0"]), "b0": float(s["b0"]),
                "cl": float(s["cl"]), "restarts": int(s["n_restarts"])} for s in states]
        return out if multi else out[0]

    def predict(self, X):
        """Predicted tau-quantiles (conditional means for least squares).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        fit = self._fitted()
        if feature_names(X) is not None or fit.names is not None:
            validate_data(self, X, reset=False, skip_check_array=True, ensure_2d=False)
        X = check_matrix(X, "X")
        self._check_n_features(X.shape[1], False)
        coef, intercept = self._solution()        # one state, both read together
        if coef.ndim == 2:
            out = np.empty((coef.shape[0], X.shape[0]))
            for q in range(coef.shape[0]):
                _k.predict(X, coef[q], float(intercept[q]), out[q])
            return rearrange(out.T)
        out = np.empty(X.shape[0])
        _k.predict(X, coef, intercept, out)
        return out


_COMMON_NOTES = """
    **Sample weights** (``sample_weight`` in ``fit``/``partial_fit``): a row of
    weight w counts w times in the loss and its (sub-)gradient, the weighted
    check loss sum_i w_i rho_tau(y_i - x_i'beta). In single mode the
    schedule's clock moves by w (a 1/t stepsize ages as over w rows; phase
    one's geometric decay is raised to the power w); in batch and storage
    modes a step uses the weighted mean gradient and a block counts its
    weights as its size. A row of weight 0 is as if absent (it is scored at
    weight 0 and counted in ``n_samples_seen_``, nothing else); a storage call
    whose new rows all weigh 0 takes no step. The schedule's order statistics
    (D0, b0, the plateau test) use the residuals of rows of positive weight,
    unweighted. With a constant stepsize small enough that no residual
    changes sign, a weight of 2 in single mode is the row given twice.

    **Mid-stream parameter changes** (``set_params`` between ``partial_fit``
    calls; ``fit`` always starts afresh):

    - ``mode``, ``tau`` and ``fit_intercept`` are refused with a ValueError
      naming the parameter: the learnt state (iterate, sparsity estimate,
      stored or pending rows) belongs to the old value.
    - ``batch_size`` takes effect at the next call; rows already waiting for a
      batch are kept and go first (lowered below what waits, they make
      several batches).
    - ``average`` takes effect at the next call: switched on, the average
      restarts from the next update (in the statistical schedule's last phase,
      once settled); switched off, ``coef_`` is the last iterate.
    - ``schedule``: a new schedule object, or new constants of the current one
      (``schedule__Ca=...``), take effect at the next call. Constants used
      once (``eta0``, ``eta0_scale``, ``n_warmup``, ``start``) act at the next
      warm-up, which happens only when the statistical schedule takes over
      from another schedule (it then warms up afresh from the current
      iterate). A user schedule's ``stepsizes(start, count)`` is indexed by
      ``n_updates_``.
    - ``drift`` takes effect at the next call; the test starts afresh
      (``drift_restart_rows_`` keeps the alarms so far).
    - ``random_state`` has no effect (the updates are deterministic).

    **Interrupts, failures, threads.** The kernels check for signals about
    once a millisecond: Ctrl-C (or a signal handler that raises, e.g. a
    SIGALRM timeout) stops a call between two whole rows (single mode), two
    whole batches (batch mode) or before the step (storage mode); the
    estimator then holds the state after the rows applied, every field
    consistent (``n_samples_seen_`` counts exactly them, pending rows
    included), and the exception is re-raised with a note saying how many
    rows were taken. Continuing the stream from the next row gives the same
    state as an uninterrupted run. Any other failure (bad input, a diverging
    iterate) leaves the estimator exactly as before the call. Calls on one
    estimator from several threads take turns (nothing is lost or mixed).

    **float32 rows.** In mode "single" (one tau with any schedule, weights,
    ``average``, ``inference``, ``scale``; or several taus), a float32
    ndarray ``X`` is read as float32: no float64 copy of the block is made,
    and every result is bit-identical to that of the same rows given as
    float64 (each row is widened exactly as it is read; every sum and the
    state are float64). Batch and storage modes, ``predict`` and ``score``
    convert float32 to float64 once (a copy of the call's rows).

    **Reproducibility.** The kernels call no BLAS: every result is the same
    for any BLAS library and thread count, and for any split of a stream into
    ``partial_fit`` calls in single mode (bit for bit); on another CPU
    (with or without FMA instructions) results may differ in the last bits.
"""


class OnlineQuantileRegressor(_OnlineLinearSGD):
    __doc__ = """Online linear quantile regression by sub-gradient descent on the check loss.

    Implements Shen, Xia & Zhou, "Online Quantile Regression" (JMLR 2025): the
    update beta <- beta - eta_t mean_i (1{y_i <= x_i'beta} - tau) x_i over one
    sample (``mode="single"``), one batch (``"batch"``) or all data so far
    (``"storage"``), with the paper's statistical stepsizes by default and
    nothing about the data given by the user (see
    :class:`~streamfit.schedules.StatisticalSchedule` for the estimation rules).

    Parameters
    ----------
    tau : float in (0, 1), or a list of them
        The quantile; a strictly increasing list of m taus fits m quantiles
        in one pass (mode "single" only; each with its own schedule state,
        bit-identical to m separate fits unless ``noncrossing="project"``):
        ``coef_`` is then (m, n_features), ``intercept_`` (m,), ``predict``
        (n_samples, m), sorted per row, and ``score`` the mean D^2 pinball
        over the taus.
    mode : {"single", "batch", "storage"}
    schedule : str or schedule object
        "statistical" (default), "constant", "inverse_time", or an object from
        :mod:`streamfit.schedules` (or any object with ``stepsizes(start, count)``).
    batch_size : int or None
        Rows per update in batch mode; block size of ``fit`` in batch/storage mode.
    average : bool
        Polyak-Ruppert averaging of the iterates over the schedule's last phase
        (whose decay becomes t^-2/3); ``coef_`` is then the average. Off by
        default so that the defaults are the paper's (Ca = 20, plain iterate)
        and reproduce its figures; but with Ca = 20 the plain iterate's error
        is about sqrt(Ca^2 / (2 Ca - 1)) = 3.2 times the efficient one
        (Robbins-Monro; measured 3.2-3.9x the offline estimator at n = 20,000
        -50,000, ``python -m streamfit --only qr-efficiency``), where the
        average is 1.1-1.5x. For estimates, use ``average=True`` (or
        ``StatisticalSchedule(Ca=2)``: 1.2x, at a larger short-term cost early
        in phase two, Remark 3). On a stream whose early rows are not
        representative (a file in sorted order) the plain iterate forgets them
        and the average does not. In mode "single" with an intercept,
        ``intercept_`` is then not the average of the iterate's intercept,
        which is biased at every tau but a symmetric noise's median (the
        coefficients' fluctuation smooths the residuals: a bias of the order
        of the stepsize that averaging keeps; 1.9-3.3 standard errors at
        d = 5, n = 20,000, and an RMSE of 0.90-0.99 against 0.14 under t_1.1
        noise at tau = 0.1, 0.9), but the average of two plug-in intercepts
        taking the same quantile steps (and twice them) on y - x' coef_,
        extrapolated (Richardson-Romberg), moved to the last ``coef_``: about
        3 d more work per averaged update. Batch mode, ``scale="online"`` and
        ``streamfit.kernels.sgd`` keep the iterate's average.
    fit_intercept : bool
    random_state : None, int or Generator
        Accepted for a uniform API; the updates are deterministic.
    inference : bool
        Keep the random-scaling sums (Lee, Liao, Seo & Shin, AAAI 2022) for
        :meth:`conf_int` and ``coef_covariance_``: O((d+1)^2 / 2) more work
        per update, inside the kernel. Needs ``average=True`` and mode
        "single" or "batch" (storage mode's steps use all data so far, not a
        stochastic-gradient path, so the theory does not apply: refused).
        The intercept's interval is centred on the plug-in intercept (see
        ``average``; it covers 0.94-0.975 at d = 5, n = 20,000, tau = 0.1,
        0.25, 0.9, where the iterate's average covered 82-92%). ``coef_`` and
        ``intercept_`` are the same as without inference. With several taus
        each quantile keeps its own sums (m times the work): ``conf_int``
        gives one block of intervals per quantile, each the same as its
        separate fit's.
    scale : None or "online"
        "online": each row joins running (weighted) means and standard
        deviations of the features and the model learns on the standardised
        row z = (x - mean) / sd (x / sd without an intercept), a diagonal
        preconditioner that the statistical schedule calibrates on (its Cl is
        that of z); ``coef_`` and ``intercept_`` are reported on the original
        scale. Mode "single", one tau, no ``inference``, no ``coef_init``
        (refused otherwise); cannot change mid-stream. Default None (the
        paper's algorithm on the raw features): results stay bit-identical to
        earlier versions and to the paper's experiments, and a standardised
        stream gains nothing from it (it costs one more pass over each row).
    noncrossing : {"rearrange", "project"}
        Several taus only (ignored with one). "rearrange": the quantiles learn
        independently and ``predict`` sorts the m predictions of each row
        (rearrangement, Chernozhukov, Fernandez-Val & Galichon, Econometrica
        2010), so they never cross. "project": also during training, the m
        predictions at each x_t are projected onto the ordered cone (pool
        adjacent violators) before the residuals that give the sub-gradients
        are taken; takes effect at the next call.
    drift : None or "restart"
        "restart": a change test on the prequential check loss (is the
        averaged iterate's loss on each row, before its update, worse than
        the plain iterate's? a CUSUM of that bounded comparison) restarts the
        Polyak-Ruppert average from the current iterate at an alarm (with
        the statistical schedule once it has settled again, and its last
        phase's clock with it), so that the average follows a change or a
        drift of the coefficients instead of keeping the old regime. Needs
        ``average=True``, mode "single", one tau and ``scale=None``. On a
        stationary stream the mean time to a false alarm exceeds 7e10 rows
        whatever the noise's tails, and without an alarm every result is
        bit-identical to ``drift=None``'s (the default). With
        ``schedule="constant"`` the average is also restarted once or twice
        in the first ~1,000 rows (it lags the travelling iterate there).
        "inverse_time" is refused: under O(1/t) steps the last iterate beats
        its average on any stream, and the test would fire every few hundred
        rows. See the user guide's "Streams that change".

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_samples_seen_ : int
    n_updates_ : int
    cumulative_loss_ : float
    schedule_state_ : dict
    drift_restart_rows_ : ndarray of int64
        Rows of the stream (0-based, over all calls) where the drift test
        restarted the average (empty with ``drift=None``).
    n_drift_restarts_ : int
        Their number.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fitted on a DataFrame with string column names.
    coef_covariance_ : ndarray of shape (n_features + 1, n_features + 1)
        With ``inference=True``: the random-scaling matrix of (coef_,
        intercept_) (no intercept row/column without ``fit_intercept``); see
        :meth:`conf_int`.

    Notes
    -----
    The paper's stepsizes are scalars tuned to E[x x'] with eigenvalues in
    [Cl, Cu] of one order: standardize features on very different scales,
    or the small ones learn slowly (the schedule stays stable, it is not a
    preconditioner). With an intercept, center the features too. Rows whose
    ||x||^2 overflows float64 (entries beyond ~1e154) are refused with an
    error naming the row.

    ``score`` is D^2 pinball at ``tau`` (:func:`sklearn.metrics.d2_pinball_score`):
    1 - the check loss of the predictions / that of the constant tau-quantile
    of y.
    """ + _COMMON_NOTES + """
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
    >>> bool(est.score(X, y) > 0.9)                  # D^2 pinball at tau = 0.75
    True

    Several quantiles in one pass, never crossing:

    >>> fan = OnlineQuantileRegressor(tau=[0.1, 0.5, 0.9]).fit(X, y)
    >>> fan.coef_.shape, fan.predict(X[:4]).shape
    ((3, 10), (4, 3))
    >>> bool(np.all(np.diff(fan.predict(X), axis=1) >= 0))
    True

    Features on very different scales, standardised on the fly:

    >>> scales = np.r_[1e4, np.ones(9)]             # one feature 10^4 x larger
    >>> est = OnlineQuantileRegressor(tau=0.75, average=True, scale="online")
    >>> est = est.fit(X * scales, y)
    >>> err = np.linalg.norm(est.coef_ * scales - beta) / np.linalg.norm(beta)
    >>> bool(err < 0.02)
    True

    Confidence intervals for the coefficients, updated online:

    >>> est = OnlineQuantileRegressor(tau=0.75, average=True, inference=True)
    >>> est = est.fit(X, y)
    >>> ci = est.conf_int(alpha=0.05)                # rows: coef_ then intercept_
    >>> ci.shape
    (11, 2)
    >>> bool(np.all(ci[:, 0] < ci[:, 1]))
    True

    A stream whose coefficients change: the average restarts at the change.

    >>> X2, y2, beta2 = make_linear_stream(20000, 10, tau=0.75, random_state=1)
    >>> est = OnlineQuantileRegressor(tau=0.75, average=True, drift="restart")
    >>> est = est.fit(np.vstack([X, X2]), np.r_[y, y2])
    >>> est.n_drift_restarts_, bool(20000 <= est.drift_restart_rows_[0] < 21000)
    (1, True)
    >>> bool(np.linalg.norm(est.coef_ - beta2) < 0.02 * np.linalg.norm(beta2))
    True
    """

    _loss = _k.LOSS_CHECK

    def __init__(self, tau=0.5, *, mode="single", schedule="statistical", batch_size=None,
                 average=False, fit_intercept=True, random_state=None, inference=False,
                 noncrossing="rearrange", scale=None, drift=None):
        self.tau = tau
        self.mode = mode
        self.schedule = schedule
        self.batch_size = batch_size
        self.average = average
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.inference = inference
        self.noncrossing = noncrossing
        self.scale = scale
        self.drift = drift

    @serialized
    def _random_scaling(self):
        """(estimate, V_k / k) of one published state, read under the lock."""
        fit = self._fitted()
        if fit.rs is None:
            raise AttributeError(
                f"{type(self).__name__} keeps no random-scaling sums: set inference=True "
                "(with average=True) before fitting for conf_int and coef_covariance_")
        multi = isinstance(fit, MultiWork)
        rs, wbar = (fit.rs, fit.wbar) if multi else (fit.rs[None], fit.wbar[None])
        zs, Vs = [], []
        for q in range(rs.shape[0]):
            k = float(fit.state["n_avg"][q])
            if k < 2:
                which = f" of tau={float(fit.params['tau'][q]):g}" if multi else ""
                raise ValueError(
                    f"the average{which} holds {int(k)} iterate(s) (it starts once the "
                    "statistical schedule has settled in its last phase): random scaling "
                    "needs at least 2; learn from more rows first")
            z = wbar[q].copy()
            if fit.params["fit_intercept"][0]:
                z = np.append(z, fit.state["intercept_avg"][q])
            zs.append(z)
            Vs.append(random_scaling_matrix(rs[q], z, k))
        if not multi:
            return zs[0], Vs[0]
        return np.array(zs), np.array(Vs)

    @property
    def coef_covariance_(self):
        """The random-scaling matrix V_k / k of (coef_, intercept_) (shape
        (d + 1, d + 1), intercept last; (d, d) without an intercept; with
        several taus one per quantile, (m, d + 1, d + 1)), with
        V_k = k^-2 sum_{s<=k} s^2 (z_s - z_k)(z_s - z_k)' over the k steps of
        the average (z_s: the s-th averaged iterate). It is a random scale,
        not a consistent estimate of the covariance: divide by it and use the
        critical values of :meth:`conf_int`, not normal ones."""
        return self._random_scaling()[1]

    def conf_int(self, alpha=0.05):
        """Confidence intervals for the coefficients and the intercept, by
        random scaling (Lee, Liao, Seo & Shin, AAAI 2022).

        (z_k - beta*)_j / sqrt(coef_covariance_[j, j]) is asymptotically
        distributed as W(1) / sqrt(int_0^1 (W(r) - r W(1))^2 dr) (W a Brownian
        motion); the interval is z_k,j +- c_alpha sqrt(coef_covariance_[j, j])
        with c_alpha that law's two-sided critical value (6.747 at
        alpha = 0.05; see :func:`streamfit.quantile.critical_value`). The
        window is the average's: the iterates since the statistical schedule
        settled in its last phase (every update with another schedule), one
        step per update (single mode: per row of positive weight; batch mode:
        per batch). Sample weights enter the sub-gradients (the target is the
        minimiser of the weighted expected check loss); the intervals are
        valid when the weights are drawn with the rows (i.i.d.), not for
        weights that drift along the stream.

        Parameters
        ----------
        alpha : {0.01, 0.02, 0.05, 0.1, 0.2}
            One minus the coverage.

        Returns
        -------
        ndarray of shape (n_features + 1, 2), or (m, n_features + 1, 2) with m taus
            Lower and upper bounds: rows for ``coef_`` in order, then (with
            ``fit_intercept``) one for ``intercept_`` (with several taus, one
            such block per quantile, in the order of ``tau``).

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit import OnlineQuantileRegressor
        >>> from streamfit.simulate import make_linear_stream
        >>> X, y, beta = make_linear_stream(20000, 3, tau=0.5, random_state=1)
        >>> est = OnlineQuantileRegressor(average=True, inference=True).fit(X, y)
        >>> lo, hi = est.conf_int(0.05)[:3].T
        >>> bool(np.all((lo < beta) & (beta < hi)))
        True
        """
        c = critical_value(alpha)
        z, V = self._random_scaling()
        half = c * np.sqrt(np.maximum(np.diagonal(V, axis1=-2, axis2=-1), 0.0))
        return np.stack([z - half, z + half], axis=-1)

    def score(self, X, y, sample_weight=None):
        """D^2 pinball score at the fitted ``tau``: the fraction of the check
        loss of the best constant (the tau-quantile of y) that the model
        explains (1 is perfect, 0 no better than the constant, may be < 0).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,) or None

        Returns
        -------
        float
        """
        if self.__sklearn_is_fitted__():
            taus = [float(t) for t in self._fit_.params["tau"]]
            multi = isinstance(self._fit_, MultiWork)
        else:
            taus, multi = self._taus() or [self.tau], self._taus() is not None
        pred = self.predict(X)
        if not multi:
            return float(d2_pinball_score(y, pred, sample_weight=sample_weight,
                                          alpha=taus[0]))
        return float(np.mean([d2_pinball_score(y, pred[:, q], sample_weight=sample_weight,
                                               alpha=t) for q, t in enumerate(taus)]))


class OnlineLeastSquaresRegressor(_OnlineLinearSGD):
    __doc__ = """Online least squares by single-sample gradient descent (the paper's
    comparator, Section 3.1).

    The gradient of (y - x'beta)^2 / 2 is -(y - x'beta) x. The statistical
    schedule is the two-phase one the paper derives for least squares: a
    constant eta = 0.5 / (d Cl) until the errors stop falling (the window
    median of |residual| has not dropped 10% below its best for 3 windows),
    then Ca / (Cl (t - t1) + Ca / eta), an O(1/(t + d)) decay continuous at
    the switch. ``average=True`` (beyond the paper) averages the iterates
    from the next plateau on, under a t^-2/3 decay. ``score`` is R^2.

    Parameters
    ----------
    schedule : str or schedule object
    average : bool
    fit_intercept : bool
    drift : None or "restart"
        As :class:`OnlineQuantileRegressor`'s (the test compares the average's
        and the iterate's absolute residuals): "restart" restarts the average
        when the stream changes; needs ``average=True``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_samples_seen_, n_updates_, cumulative_loss_, schedule_state_, n_features_in_
    drift_restart_rows_, n_drift_restarts_

    Notes
    -----
    """ + _COMMON_NOTES + """
    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import OnlineLeastSquaresRegressor
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(20000, 10, noise="gaussian",
    ...                                 random_state=0)
    >>> est = OnlineLeastSquaresRegressor().fit(X, y)
    >>> bool(np.linalg.norm(est.coef_ - beta) < 0.02 * np.linalg.norm(beta))
    True
    >>> X2, y2, beta2 = make_linear_stream(20000, 10, noise="gaussian",
    ...                                    random_state=1)
    >>> est = OnlineLeastSquaresRegressor(average=True, drift="restart")
    >>> est.fit(np.vstack([X, X2]), np.r_[y, y2]).n_drift_restarts_
    1
    """

    _loss = _k.LOSS_SQUARED

    def __init__(self, *, schedule="statistical", average=False, fit_intercept=True,
                 drift=None):
        self.schedule = schedule
        self.average = average
        self.fit_intercept = fit_intercept
        self.drift = drift
