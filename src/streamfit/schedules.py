"""Stepsize schedules for online (sub-)gradient descent.

Three built-in schedules, usable in every mode of
:class:`~streamfit.OnlineQuantileRegressor` (and by
:class:`~streamfit.OnlineLeastSquaresRegressor`), run inside the Cython kernels:

- :class:`StatisticalSchedule` -- the paper's schedules (Shen, Xia & Zhou 2025),
  with every quantity they need estimated from the stream;
- :class:`ConstantSchedule` -- eta_t = eta (Zhang 2004), a comparator;
- :class:`InverseTimeSchedule` -- eta_t = c / (t + 1) (Duchi & Singer 2009), a comparator.

Any object with a ``stepsizes(start, count)`` method returning ``count``
positive stepsizes for updates ``start, ..., start + count - 1`` is accepted as
well (see :class:`Schedule`); such schedules cannot look at the data.
"""
from __future__ import annotations

import numbers
import sys

import numpy as np

from sklearn.base import BaseEstimator
from ._validation import check_scalar
from ._kernels import _quantile as _k

__all__ = ["Schedule", "StatisticalSchedule", "ConstantSchedule",
           "InverseTimeSchedule", "FunctionSchedule", "resolve_schedule"]

_NAN = float("nan")


class Schedule(BaseEstimator):
    """Base class of stepsize schedules.

    A subclass either is one of the built-in kernel schedules, or implements
    ``stepsizes(start, count)``; the estimator then precomputes one stepsize per
    update and hands the array to the kernel.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.schedules import Schedule
    >>> class SqrtDecay(Schedule):
    ...     def __init__(self, c=0.1):
    ...         self.c = c
    ...     def stepsizes(self, start, count):
    ...         return self.c / np.sqrt(np.arange(start, start + count) + 1.0)
    >>> SqrtDecay(0.5).stepsizes(0, 3).round(3)
    array([0.5  , 0.354, 0.289])
    """

    _kind = _k.KIND_ARRAY

    def stepsizes(self, start, count):  # pragma: no cover - interface
        raise NotImplementedError

    def __setstate__(self, state):
        # Unpickling interns an object's attribute names, unless the class
        # has a __setstate__ (BaseEstimator's keeps them as loaded). Interned,
        # they are the same string objects as equal names elsewhere (a
        # LinearSGD's state field "window"), so that a loaded state object
        # pickles to the bytes of the one it was saved from.
        super().__setstate__({sys.intern(k) if type(k) is str else k: v
                              for k, v in state.items()})

    def _validate(self):
        pass

    def _kernel_params(self, loss, mode, n_features):
        """The kernel's PARAM_FIELDS values owned by the schedule."""
        return {"kind": self._kind}


class ConstantSchedule(Schedule):
    """eta_t = eta for every update: the paper's "Constant" comparator.

    Examples
    --------
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.schedules import ConstantSchedule
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(2000, 5, random_state=0)
    >>> est = OnlineQuantileRegressor(schedule=ConstantSchedule(0.01)).fit(X, y)
    >>> est.n_updates_
    2000
    """

    _kind = _k.KIND_CONSTANT

    def __init__(self, eta=0.01):
        self.eta = eta

    def _validate(self):
        check_scalar(self.eta, "schedule.eta", low=0, low_open=True)

    def _kernel_params(self, loss, mode, n_features):
        return {"kind": self._kind, "c": float(self.eta)}

    def stepsizes(self, start, count):
        return np.full(count, float(self.eta))


class InverseTimeSchedule(Schedule):
    """eta_t = c / (t + 1): the paper's "O(1/t)" comparator.

    Examples
    --------
    >>> from streamfit.schedules import InverseTimeSchedule
    >>> InverseTimeSchedule(c=2.0).stepsizes(0, 3)
    array([2.        , 1.        , 0.66666667])
    """

    _kind = _k.KIND_INVERSE_TIME

    def __init__(self, c=1.0):
        self.c = c

    def _validate(self):
        check_scalar(self.c, "schedule.c", low=0, low_open=True)

    def _kernel_params(self, loss, mode, n_features):
        return {"kind": self._kind, "c": float(self.c)}

    def stepsizes(self, start, count):
        return float(self.c) / (np.arange(start, start + count, dtype=float) + 1.0)


class FunctionSchedule(Schedule):
    """Wrap a function ``f(t) -> eta`` of the update index as a schedule.

    Examples
    --------
    >>> from streamfit.schedules import FunctionSchedule
    >>> FunctionSchedule(lambda t: 1.0 / (t + 10)).stepsizes(0, 2)
    array([0.1       , 0.09090909])
    """

    def __init__(self, func=None):
        self.func = func

    def _validate(self):
        if not callable(self.func):
            raise TypeError(f"schedule.func must be callable, got {self.func!r}")

    def stepsizes(self, start, count):
        return np.array([float(self.func(t)) for t in range(start, start + count)])


class StatisticalSchedule(Schedule):
    """The paper's statistically guided stepsizes, with no oracle input.

    Shen, Xia & Zhou (2025) give one schedule per setting; d below counts the
    intercept too, tau*^2 = 4 max(tau, 1 - tau)^2 (1 at the median).

    - ``mode="single"`` (Theorem 1): geometric, eta_t = (1 - decay/(d tau*^2))^t
      eta0, then eta_t = (b0 / Cl) Ca / (t - t1 + Cb d).
    - ``mode="batch"`` (Theorem 5): geometric eta_t = (1 - decay)^t eta0, then
      the constant eta_const b0 / Cu, then (b0 / Cl) Ca / (t - t2 + Cb), never
      above the constant. Theorem 5 needs batches of at least C0 tau*^2 d / 4
      rows for the constant phase; smaller batches go from phase one straight
      to the 1/t phase (the constant step's one-batch error
      b0 sqrt(tau (1 - tau) d / n) would exceed phase one's). Blocks of m < d
      rows are m single-sample steps in one: eta0, the decay and the 1/t
      phase's Ca / Cb scale by m / d (Cb by d / m).
    - ``mode="storage"`` (Theorem 8): geometric, then the constant
      eta_const b0 / Cu.
    - In both, no step exceeds eta_const b / Cu: a step on a block's mean
      gradient is stable only below 2 / (f Cu), with Cu the block's largest
      eigenvalue of E[x x'] (the paper's Cl / Cu^2 scaling) and f = 1 / b
      the residuals' density at 0. Later phases take b = b0; phase one
      takes the larger of b0 and the sparsity of a centred Gaussian of the
      best window's median |r|: while the error dominates, the residuals
      are at least that sparse at 0 (an offset moves their mass off 0,
      where b0, measured at their own quantile, sees only the noise).
    - least squares (Section 3.1): constant eta0 = eta0_scale / (d Cl), then
      Ca / (Cl (t - t1) + Ca / eta0), continuous at t1.

    With ``average=True`` on the estimator the last phase's 1/t decay becomes
    (1 + (t - t1)/scale)^-avg_power: Polyak-Ruppert averaging needs steps that
    decay more slowly than 1/t. The power is re-evaluated whenever t - t1 has
    grown by scale/64 (a stepsize change of at most ~1%), not every step.

    **What is estimated from the stream** (each estimate is overridden by
    giving the constant):

    - ``Cl``: the mean eigenvalue of E[x x'], mean ||x||^2 / d over the
      warm-up: the first ``n_warmup`` rows (single, batch; blocks that end
      before it only warm up, with no update) or the first call (storage);
      ``Cu`` (batch, storage): the largest eigenvalue, by power iteration
      on the block that ends the warm-up;
    - ``eta0`` = eta0_scale * D0 / (d Cl tau*^2) (single) or eta0_scale * D0 / Cl
      (batch, storage), with D0 = median |y - x'beta_0| / 0.6745: for
      ||beta_0 - beta*|| large, x'(beta_0 - beta*) is nearly Gaussian, so this
      is its standard deviation, ||beta_0 - beta*||_Sigma. The median, not the
      mean, because the noise may have no mean to speak of (t_1.1); if more
      than half the residuals are exactly 0 the mean stands in;
    - ``b0``: Koenker's sparsity 1/f(Q(tau)), by Siddiqui's difference quotient
      (Q(tau+h) - Q(tau-h)) / 2h, h = min(0.1, tau/2, (1-tau)/2), on each full
      window of ``window`` residuals (all residuals in storage mode). Residuals
      are noise plus x'(beta - beta*), so the estimate is biased up by the
      error: it is taken as is in phase one, then averaged over windows
      (weight ``ema``; storage mode takes each step's estimate on all data)
      and capped at its value at the end of phase one, so that a larger error
      never buys larger steps;
    - the end of phase one (the paper: "once the error is at the noise
      level"): the window median of |residual| falls while the error
      dominates the residuals and levels off at the noise. A window makes
      progress when its median is below ``plateau`` times the best so far;
      ``patience`` windows in a row without progress end the phase. The same
      test ends batch phase two, and in the last phase of single and storage
      modes starts the average (which so leaves out the transient; batch mode
      averages from the start of phase three, itself reached by a plateau).
      Once settled, single mode fills its windows with every fourth residual
      (only b0 still learns from them). With ``b0`` given, single mode uses
      the paper's continuity rule instead: phase one ends when its stepsize
      falls to phase two's starting value;
    - **non-stationary starts** (beyond the paper): a stream that begins
      unlike it goes on (a stuck sensor: constant y for a while) would leave
      estimates fitted to the start (a tiny b0 and its cap, a best median of
      ~0, a 1/t phase already decayed). Windows whose residuals have no
      spread say nothing about the noise and leave b0 and the plateau test's
      best median alone; and when the window median of |residual| stays above
      ``restart`` times its running level (an average of past window medians,
      weight ``ema``) for ``patience`` windows in a row, the estimates are
      stale: phase one restarts with D0, b0, Cl (and Cu) estimated afresh
      on that window (``schedule_state_["restarts"]`` counts it). In storage
      mode the windows of this rule are the newest rows' residuals (over all
      data a change shows only gradually). A stationary stream's window
      medians never move that far (they fall in phase one and hover at the
      noise level after it).

    Parameters
    ----------
    eta0 : float or None
        First stepsize; None estimates it as above.
    eta0_scale : float or None
        C in eta0 = C D0 / (d Cl tau*^2); None: 2 (single), 1 (batch, storage),
        0.5 (least squares, where eta0 = C / (d Cl)).
    decay : float or None
        Geometric rate: single (1 - decay/(d tau*^2)), default 0.2 (0.5 for
        least squares); batch and storage (1 - decay), default 0.1. The paper's experiments use 0.5 for
        single-sample updates (Section 3.1), which outruns the error: no
        step contracts ||beta - beta*|| faster than (1 - 0.318/d) at the
        median, so at 0.5 phase one stalls at ~0.1 of the initial error (1.6-28
        E|xi|, not the noise level) and the plateau test then estimates b0
        18-185x too large (``python -m streamfit --only qr-phase-one``). At 0.2
        phase one ends at 0.13-0.19 E|xi| with b0 within 1.2x and the same final
        error. Pass ``decay=0.5`` for the paper's setting.
    Ca, Cb : float or None
        Last-phase constants; None: Ca = 20, Cb = 30 (Section 3.1) for the check
        loss, Ca = 2 for least squares (Cb is then set by continuity).
    b0 : float or None
        Sparsity 1/f(0) of the noise; None estimates it.
    t_switch : int or None
        Update index at which phase one ends; None uses the rule above.
    n_warmup : int
        Single-sample warm-up length.
    window : int or None
        Residual window (single and batch modes); None: max(64, 2.5 d).
    eta_const : float
        Batch/storage phase-two constant, in units of b0 / Cu; the default
        0.5, half a Newton step, is stable for b0 estimates up to 4x too large.
    avg_power : float
        Decay exponent of the last phase when averaging, in (1/2, 1].
    plateau : float
        Progress threshold of the plateau test, in (0, 1).
    patience : int
        Windows without progress that make a plateau.
    ema : float
        Weight of a new window's b0 estimate after phase one, in (0, 1].
    C0 : float
        Batch-size constant of Theorem 5 for the constant phase.
    start : {"phase1", "phase2"}
        "phase2" skips phase one after the warm-up (Remark 3: the start is
        already good, e.g. a warm start from ``coef_init`` near the solution).
    restart : float or None
        Jump factor of the restart rule above (> 1); None never restarts.
    t0 : float
        With ``start="phase2"``: the rows (batch mode: batches; weights with
        sample weights) behind the warm start, e.g. the size of the data the
        ``coef_init`` was fitted on. The last phase's decay continues from
        them, so a good start is not undone by the phase's first, largest
        steps (Ca / (t0 + t - t1 + Cb d) instead of Ca / (t - t1 + Cb d)).
        With ``average=True`` the average also starts from the warm start,
        counted as t0 iterates (it has seen t0 rows). Forgotten at a restart
        of phase one. Default 0: a fresh clock.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.schedules import StatisticalSchedule
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(20000, 10, random_state=0)
    >>> est = OnlineQuantileRegressor(schedule=StatisticalSchedule(Ca=20, Cb=30),
    ...                               fit_intercept=False).fit(X, y)
    >>> bool(np.linalg.norm(est.coef_ - beta) < 0.1 * np.linalg.norm(beta))
    True
    """

    _kind = _k.KIND_STATISTICAL

    def __init__(self, *, eta0=None, eta0_scale=None, decay=None, Ca=None, Cb=None,
                 b0=None, t_switch=None, n_warmup=50, window=None, eta_const=0.5,
                 avg_power=2.0 / 3.0, plateau=0.9, patience=3, ema=0.3, C0=10.0,
                 start="phase1", restart=4.0, t0=0):
        self.eta0 = eta0
        self.eta0_scale = eta0_scale
        self.decay = decay
        self.Ca = Ca
        self.Cb = Cb
        self.b0 = b0
        self.t_switch = t_switch
        self.n_warmup = n_warmup
        self.window = window
        self.eta_const = eta_const
        self.avg_power = avg_power
        self.plateau = plateau
        self.patience = patience
        self.C0 = C0
        self.ema = ema
        self.start = start
        self.restart = restart
        self.t0 = t0

    def _validate(self):
        pos = dict(low=0, low_open=True, allow_none=True)
        check_scalar(self.eta0, "schedule.eta0", **pos)
        check_scalar(self.eta0_scale, "schedule.eta0_scale", **pos)
        check_scalar(self.decay, "schedule.decay", high=1, **pos)
        check_scalar(self.Ca, "schedule.Ca", **pos)
        check_scalar(self.Cb, "schedule.Cb", **pos)
        check_scalar(self.b0, "schedule.b0", **pos)
        check_scalar(self.t_switch, "schedule.t_switch", kind=numbers.Integral, low=0,
                     allow_none=True)
        check_scalar(self.n_warmup, "schedule.n_warmup", kind=numbers.Integral, low=5)
        check_scalar(self.window, "schedule.window", kind=numbers.Integral, low=16,
                     allow_none=True)
        check_scalar(self.eta_const, "schedule.eta_const", low=0, low_open=True)
        check_scalar(self.avg_power, "schedule.avg_power", low=0.5, low_open=True, high=1)
        check_scalar(self.plateau, "schedule.plateau", low=0, high=1, low_open=True,
                     high_open=True)
        check_scalar(self.patience, "schedule.patience", kind=numbers.Integral, low=1)
        check_scalar(self.ema, "schedule.ema", low=0, high=1, low_open=True)
        check_scalar(self.C0, "schedule.C0", low=0)
        if self.start not in ("phase1", "phase2"):
            raise ValueError(f"schedule.start must be 'phase1' or 'phase2', got {self.start!r}")
        check_scalar(self.restart, "schedule.restart", low=1, low_open=True, allow_none=True)
        check_scalar(self.t0, "schedule.t0", low=0)
        if self.t0 and self.start != "phase2":
            raise ValueError(f"schedule.t0={self.t0!r} is the clock behind a warm start: it "
                             "needs start='phase2'")

    def _kernel_params(self, loss, mode, n_features):
        squared = loss == _k.LOSS_SQUARED
        single = mode == "single"

        def pick(value, default):
            return float(default if value is None else value)

        if squared:
            scale, ca, cb = pick(self.eta0_scale, 0.5), pick(self.Ca, 2.0), _NAN
        else:
            scale = pick(self.eta0_scale, 2.0 if single else 1.0)
            ca, cb = pick(self.Ca, 20.0), pick(self.Cb, 30.0)
        return {
            "kind": self._kind,
            "eta0": pick(self.eta0, _NAN),
            "eta0_scale": scale,
            "decay": pick(self.decay, (0.5 if squared else 0.2) if single else 0.1),
            "Ca": ca,
            "Cb": cb,
            "b0": pick(self.b0, _NAN),
            "t_switch": pick(self.t_switch, _NAN),
            "n_warmup": float(self.n_warmup),
            "window": pick(self.window, max(64, -(-5 * n_features // 2))),
            "eta_const": float(self.eta_const),
            "avg_power": float(self.avg_power),
            "plateau": float(self.plateau),
            "patience": float(self.patience),
            "C0": float(self.C0),
            "ema": float(self.ema),
            "start": 2.0 if self.start == "phase2" else 1.0,
            "restart": 0.0 if self.restart is None else float(self.restart),
            "t0": float(self.t0),
        }

    def stepsizes(self, start, count):
        raise TypeError("StatisticalSchedule adapts to the data: it runs inside the "
                        "estimator's kernel and has no data-free stepsizes")


_NAMED = {
    "statistical": StatisticalSchedule,
    "constant": ConstantSchedule,
    "inverse_time": InverseTimeSchedule,
}


# The schedules a model file may name (streamfit.save): this module's classes
# with data-free constants, rebuilt from their parameters.
_SAVABLE = {cls.__name__: cls for cls in (StatisticalSchedule, ConstantSchedule,
                                          InverseTimeSchedule)}


def resolve_schedule(schedule, name="schedule"):
    """A validated Schedule object from a name or a schedule object."""
    if isinstance(schedule, str):
        if schedule not in _NAMED:
            raise ValueError(f"{name} must be one of {sorted(_NAMED)} or a schedule object, "
                             f"got {schedule!r}")
        schedule = _NAMED[schedule]()
    elif not isinstance(schedule, Schedule):
        if not callable(getattr(schedule, "stepsizes", None)):
            raise TypeError(f"{name} must be a name ({', '.join(sorted(_NAMED))}) or an "
                            f"object with a stepsizes(start, count) method, got {schedule!r}")
        return schedule
    schedule._validate()
    return schedule
