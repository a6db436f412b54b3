"""Online (quantile) regression kernels: check-loss and squared-loss SGD over
a block of rows, and the statistical stepsize schedule as a state object.

Everything here takes and returns NumPy arrays and two small state objects,
with no estimator around them:

- :class:`LinearState`: the iterate (``coef``, ``intercept``), its
  Polyak-Ruppert average, the prequential loss and the counters;
- :class:`StatisticalScheduleState`: the paper's statistically guided
  schedule (Shen, Xia & Zhou 2025) with every estimate it makes from the
  stream; ``step`` it one row at a time, or let :func:`sgd` run it fused with
  the updates (one pass over the rows in C);
- :func:`sgd`: one (sub-)gradient step per row (``block=1``) or per block of
  rows (their mean gradient), with a stepsize array or a schedule state.

Each function checks its arguments once (shapes, dtypes, contiguity, state
layout), then runs the compiled kernel without the GIL. A call that fails
(NaN/inf in a row, a diverging iterate, no memory) raises and leaves the
states as they were; a signal handler that raises (Ctrl-C) stops the kernel
between two whole rows or blocks, the states then hold those, and the
exception propagates. The states pickle as plain NumPy arrays and record
their layout: unpickled under an incompatible layout they refuse to load.
"""
from __future__ import annotations

import numbers

import numpy as np

from .._errors import ERR_BADINPUT, ERR_INTERRUPTED, OK, raise_for, raise_row_error
from .._kernels import _quantile as _k
from .._kernels._threads import call_holding, object_lock
from .._validation import as_matrix, check_scalar, check_vector

__all__ = ["LinearState", "StatisticalScheduleState", "sgd"]

_LOSSES = {"check": _k.LOSS_CHECK, "squared": _k.LOSS_SQUARED}
_EMPTY = np.zeros(0)


def _dtype_key(dtype):
    # the record layout, as it travels in a pickle
    return [(name, dtype.fields[name][0].str) for name in dtype.names]


def _record(state, dtype, name):
    """A state record loaded from a pickle, checked against this build's layout."""
    try:
        layout, values = state
        same = layout == _dtype_key(dtype)
    except (TypeError, ValueError):
        same = False
    if not same:
        raise ValueError(f"this {name} was pickled with another state layout (streamfit "
                         f"version); it cannot be resumed here")
    if not isinstance(values, bytes) or len(values) != dtype.itemsize:
        raise ValueError(f"the pickled {name}'s record must be {dtype.itemsize} bytes (a "
                         f"corrupted or foreign pickle?)")
    return np.frombuffer(bytearray(values), dtype=dtype).copy()


def _fields(state, names, name):
    if not isinstance(state, dict) or set(state) != names:
        raise ValueError(f"the pickled {name} must have the fields {sorted(names)} (a "
                         f"corrupted or foreign pickle?)")


def _loaded_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"the pickled {name} must be an integer >= 1, got {value!r}")
    return int(value)


def _loaded_vector(a, n, name, finite=True):
    # a float64 vector of an unpickled state (n values; None: any, at least one)
    if not isinstance(a, np.ndarray) or a.dtype != np.float64 or a.ndim != 1 or \
            (a.shape[0] != n if n is not None else a.shape[0] < 1):
        raise ValueError(f"the pickled {name} must be a float64 vector of "
                         f"{n if n is not None else 'at least one'} value(s), got "
                         f"{getattr(a, 'dtype', type(a).__name__)} of shape "
                         f"{getattr(a, 'shape', None)}")
    if finite and not np.isfinite(a).all():
        raise ValueError(f"the pickled {name} holds NaN or inf")
    return a.copy()


class LinearState:
    """The state of online linear regression: the iterate, its average and
    the bookkeeping, updated in place by :func:`sgd`.

    Parameters
    ----------
    n_features : int
    coef : array-like of shape (n_features,), optional
        Starting coefficients (default zeros).
    intercept : float
        Starting intercept.

    Attributes
    ----------
    coef, intercept : the iterate
    coef_avg, intercept_avg, n_avg : the running average of the iterates
        (of the updates :func:`sgd` averaged). The estimators' averaged
        single-mode ``intercept_`` is a plug-in intercept instead (see
        ``OnlineQuantileRegressor``'s ``average``); ``intercept_avg`` here is
        the paper's average of the iterate's intercept.
    loss : float
        Prequential loss: each row's weighted loss before its update.
    n_updates, n_seen : int
        Updates taken, rows scored.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import LinearState, sgd
    >>> state = LinearState(3)
    >>> X = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> sgd(X, np.array([1.0, -1.0]), state, np.array([0.1, 0.1]), tau=0.5)
    2
    >>> state.coef, state.intercept, state.n_updates
    (array([ 0.05, -0.05,  0.  ]), 0.0, 2)
    """

    def __init__(self, n_features, *, coef=None, intercept=0.0):
        check_scalar(n_features, "n_features", kind=numbers.Integral, low=1)
        self.coef = np.zeros(n_features) if coef is None else \
            check_vector(coef, n_features, "coef").copy()
        self.coef_avg = self.coef.copy()
        self._state = _k.new_state()
        self._state["intercept"] = check_scalar(float(intercept), "intercept")
        self._state["intercept_avg"] = self._state["intercept"]

    n_features = property(lambda self: self.coef.shape[0])
    intercept = property(lambda self: float(self._state["intercept"][0]))
    intercept_avg = property(lambda self: float(self._state["intercept_avg"][0]))
    n_avg = property(lambda self: int(self._state["n_avg"][0]))
    loss = property(lambda self: float(self._state["loss"][0]))
    n_updates = property(lambda self: int(self._state["n_updates"][0]))
    n_seen = property(lambda self: int(self._state["n_seen"][0]))

    def __repr__(self):
        return (f"LinearState(n_features={self.n_features}, n_updates={self.n_updates}, "
                f"intercept={self.intercept:.6g})")

    def __getstate__(self):
        return call_holding(object_lock(self), self._getstate)

    def _getstate(self):
        _check_iterate(self)
        return {"coef": self.coef.copy(), "coef_avg": self.coef_avg.copy(),
                "state": (_dtype_key(_k.STATE_DTYPE), self._state.tobytes())}

    def __setstate__(self, state):
        _fields(state, {"coef", "coef_avg", "state"}, "LinearState")
        coef = _loaded_vector(state["coef"], None, "LinearState's coef")
        coef_avg = _loaded_vector(state["coef_avg"], coef.shape[0], "LinearState's coef_avg")
        record = _record(state["state"], _k.STATE_DTYPE, "LinearState")
        # its fields are the iterate's bookkeeping (the schedule's stay 0):
        # checked as the kernels check them, beside any fixed-step parameters
        params = _k.new_params()
        params["kind"], params["c"], params["tau"] = _k.KIND_CONSTANT, 1.0, 0.5
        _k.check_records(record, params)
        self.coef, self.coef_avg, self._state = coef, coef_avg, record


class StatisticalScheduleState:
    """The paper's statistical stepsize schedule as a state object.

    It estimates what the paper leaves to the user (the error scale D0, the
    sparsity b0, Cl, the phase switches; see
    :class:`~streamfit.schedules.StatisticalSchedule`) from the residuals of
    the rows it is shown. ``step(residual, x)`` takes one row's residual under
    the current iterate and returns the stepsize of that row's update (0.0 for
    the warm-up's rows, which are not learnt from); :func:`sgd` runs the same
    code fused with the updates.

    Parameters
    ----------
    n_features : int
    tau : float in (0, 1)
    loss : {"check", "squared"}
    block : int
        Rows per update of the :func:`sgd` calls it will drive: 1 for
        single-sample updates (the only kind ``step`` does), more for batches.
    fit_intercept : bool
        Whether the iterate has an intercept (it counts as a feature).
    average : bool
        Whether the updates are averaged (the last phase then decays as
        t^-avg_power, and averaging starts once the schedule settles:
        ``averaging``).
    schedule : StatisticalSchedule, optional
        Its constants (default: the defaults).

    Attributes
    ----------
    phase : int
        0 warm-up, 1 geometric, 2 and 3 as in the paper.
    stepsize, d0, b0, cl : float
        Last stepsize and the estimates.
    restarts : int
        Restarts of phase one after a jump of the residual scale.
    averaging : bool
        Whether the average runs (the last phase has settled).

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import StatisticalScheduleState
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(2000, 5, random_state=0)
    >>> sched = StatisticalScheduleState(5, fit_intercept=False)
    >>> w = np.zeros(5)
    >>> for x, target in zip(X, y):                 # a plain Python loop around it
    ...     r = target - x @ w
    ...     eta = sched.step(r, x)                  # 0.0 during the warm-up
    ...     w -= eta * (float(r <= 0) - 0.5) * x
    >>> close = np.linalg.norm(w - beta) < 0.2 * np.linalg.norm(beta)
    >>> sched.phase >= 1, bool(close)
    (True, True)
    """

    def __init__(self, n_features, *, tau=0.5, loss="check", block=1, fit_intercept=True,
                 average=False, schedule=None):
        from ..schedules import StatisticalSchedule, resolve_schedule

        check_scalar(n_features, "n_features", kind=numbers.Integral, low=1)
        check_scalar(tau, "tau", low=0, high=1, low_open=True, high_open=True)
        check_scalar(block, "block", kind=numbers.Integral, low=1)
        if loss not in _LOSSES:
            raise ValueError(f"loss must be one of {tuple(_LOSSES)}, got {loss!r}")
        if loss == "squared" and block != 1:
            raise ValueError("the squared loss's schedule is single-sample: block must be 1")
        schedule = resolve_schedule(StatisticalSchedule() if schedule is None else schedule)
        if not isinstance(schedule, StatisticalSchedule):
            raise TypeError(f"schedule must be a StatisticalSchedule, got {schedule!r}")
        mode = "single" if block == 1 else "batch"
        params = _k.new_params()
        params["tau"] = tau if loss == "check" else 0.5
        params["loss"] = _LOSSES[loss]
        params["average"] = float(bool(average))
        params["fit_intercept"] = float(bool(fit_intercept))
        params["mode"] = _k.MODE_SINGLE if block == 1 else _k.MODE_BATCH
        for key, value in schedule._kernel_params(_LOSSES[loss], mode,
                                                  n_features + bool(fit_intercept)).items():
            params[key] = value
        params.flags.writeable = False
        self._params = params
        self._state = _k.new_state()
        self._window = np.zeros(int(max(params["window"][0], params["n_warmup"][0])) + block + 1)
        self.n_features, self.block = int(n_features), int(block)

    phase = property(lambda self: int(self._state["phase"][0]))
    stepsize = property(lambda self: float(self._state["last_eta"][0]))
    d0 = property(lambda self: float(self._state["d0"][0]))
    b0 = property(lambda self: float(self._state["b0"][0]))
    cl = property(lambda self: float(self._state["cl"][0]))
    restarts = property(lambda self: int(self._state["n_restarts"][0]))
    averaging = property(lambda self: bool(self._state["avg_on"][0]))

    def __repr__(self):
        return (f"StatisticalScheduleState(n_features={self.n_features}, block={self.block}, "
                f"phase={self.phase}, stepsize={self.stepsize:.6g})")

    def step(self, residual, x, weight=1.0):
        """The stepsize of the update for row ``x`` (single-sample updates),
        whose residual under the current iterate is ``residual``; 0.0 if the
        row only warms the schedule up (no update) or weighs 0. The schedule's
        clock moves by ``weight`` when it returns a stepsize.

        Parameters
        ----------
        residual : float
        x : array-like of shape (n_features,)
        weight : float >= 0

        Returns
        -------
        float
        """
        return call_holding(object_lock(self), self._step, residual, x, weight)

    def _step(self, residual, x, weight):
        if self.block != 1:
            raise ValueError("step() is for single-sample updates; this schedule state was "
                             f"made for blocks of {self.block} rows (use sgd)")
        x = check_vector(x, self.n_features, "x")
        residual = check_scalar(residual, "residual")
        weight = check_scalar(weight, "weight", low=0)
        state = self._state.copy()
        _check_window(self._window)
        code, eta, update = _k.schedule_step(state, self._params, self._window, x, residual,
                                             weight)
        if code != OK:
            raise_for(code, "StatisticalScheduleState.step",
                      detail="Phase one's first stepsize overflows: rescale x or y."
                      if code != ERR_INTERRUPTED else "")
        self._state = state
        return float(eta) if update else 0.0

    def __getstate__(self):
        return call_holding(object_lock(self), self._getstate)

    def _getstate(self):
        return {"n_features": self.n_features, "block": self.block,
                "params": (_dtype_key(_k.PARAMS_DTYPE), self._params.tobytes()),
                "state": (_dtype_key(_k.STATE_DTYPE), self._state.tobytes()),
                "window": self._window.copy()}

    def __setstate__(self, state):
        name = "StatisticalScheduleState"
        _fields(state, {"n_features", "block", "params", "state", "window"}, name)
        n_features = _loaded_int(state["n_features"], f"{name}'s n_features")
        block = _loaded_int(state["block"], f"{name}'s block")
        params = _record(state["params"], _k.PARAMS_DTYPE, name)
        record = _record(state["state"], _k.STATE_DTYPE, name)
        window = _loaded_vector(state["window"], None, f"{name}'s window", finite=False)
        _k.check_records(record, params)
        if params["kind"][0] != _k.KIND_STATISTICAL or \
                params["mode"][0] != (_k.MODE_SINGLE if block == 1 else _k.MODE_BATCH):
            raise ValueError(f"the pickled {name}'s params are not a statistical schedule's "
                             f"for blocks of {block} (a corrupted or foreign pickle?)")
        need = int(max(params["window"][0], params["n_warmup"][0], record["fill"][0])) + block + 1
        if window.shape[0] < need:
            raise ValueError(f"the pickled {name}'s window holds {window.shape[0]} values, its "
                             f"records need {need} (a corrupted or foreign pickle?)")
        params.flags.writeable = False
        self.n_features, self.block = n_features, block
        self._params, self._state, self._window = params, record, window


def sgd(X, y, state, stepsizes=None, *, schedule=None, loss="check", tau=0.5,
        fit_intercept=True, average=False, block=1, sample_weight=None):
    """(Sub-)gradient descent over a block of rows, updating ``state`` in place.

    One update per row (``block=1``): beta <- beta - eta_t w_t g_t x_t, with
    g_t = 1{y_t <= x_t'beta} - tau (check loss) or -(y_t - x_t'beta)
    (squared loss, r^2 / 2); or one per ``block`` consecutive rows on their
    weighted mean (sub-)gradient (X must hold whole blocks). Each row is
    scored before its update (``state.loss``).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        With ``block=1`` a float32 array is read as float32 (no float64
        copy; all arithmetic in float64, bit-identical to its float64
        values); anything else is converted to float64 once.
    y : array-like of shape (n_samples,)
    state : LinearState
    stepsizes : array-like of shape (n_updates,), optional
        One positive stepsize per update: per row (block of rows) of positive
        weight. Give this or ``schedule``.
    schedule : StatisticalScheduleState, optional
        The statistical schedule, run fused with the updates; its ``block``
        must equal ``block``, and its loss, tau, intercept and averaging
        settings win over the arguments here.
    loss : {"check", "squared"}
    tau : float in (0, 1)
    fit_intercept : bool
        Whether the intercept is learnt.
    average : bool
        Whether the updates feed the running average (``state.coef_avg``).
    block : int
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative row weights: a row's loss and gradient are multiplied by
        its weight (block means are weighted means); the clock of
        c / (t + 1)-type schedules moves by the weights.

    Returns
    -------
    int
        Rows applied (all of them, unless a signal handler raised, which
        then propagates: the states hold the rows applied).

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import LinearState, StatisticalScheduleState, sgd
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(20000, 10, tau=0.25, random_state=0)
    >>> state = LinearState(10)
    >>> sched = StatisticalScheduleState(10, tau=0.25, average=True)
    >>> for start in range(0, 20000, 5000):          # four blocks of the stream
    ...     rows = slice(start, start + 5000)
    ...     _ = sgd(X[rows], y[rows], state, schedule=sched)
    >>> bool(np.linalg.norm(state.coef_avg - beta) < 0.02 * np.linalg.norm(beta))
    True
    """
    if not isinstance(state, LinearState):
        raise TypeError(f"state must be a LinearState, got {type(state).__name__}")
    args = (X, y, state, stepsizes, schedule, loss, tau, fit_intercept, average, block,
            sample_weight)
    # one call at a time on each state object (the LinearState's lock first,
    # then the schedule's: one order, so two calls cannot wait on each other)
    if isinstance(schedule, StatisticalScheduleState):
        return call_holding(object_lock(state), call_holding, object_lock(schedule), _sgd,
                            *args)
    return call_holding(object_lock(state), _sgd, *args)


def _sgd(X, y, state, stepsizes, schedule, loss, tau, fit_intercept, average, block,
         sample_weight):
    _check_iterate(state)
    X = as_matrix(X, float32=block == 1)    # float32 rows read as they are by the kernel
    n, d = X.shape
    if d != state.n_features:
        raise ValueError(f"X has {d} features, but state has {state.n_features}")
    y = check_vector(y, n, "y", finite=False)
    sw = None if sample_weight is None else check_vector(sample_weight, n, "sample_weight")
    if sw is not None and (sw < 0).any():
        raise ValueError("sample_weight must be non-negative")
    check_scalar(block, "block", kind=numbers.Integral, low=1)
    if n % block:
        raise ValueError(f"X must hold whole blocks: {n} rows are not a multiple of "
                         f"block={block}")
    if (stepsizes is None) == (schedule is None):
        raise ValueError("give either stepsizes or schedule")
    if schedule is not None:
        if not isinstance(schedule, StatisticalScheduleState):
            raise TypeError(f"schedule must be a StatisticalScheduleState, got "
                            f"{type(schedule).__name__}")
        if schedule.n_features != d or schedule.block != block:
            raise ValueError(f"schedule was made for {schedule.n_features} features and "
                             f"blocks of {schedule.block}, not {d} and {block}")
        params, etas = schedule._params, _EMPTY
        kernel_state = _merge(state._state, schedule._state)
        _check_window(schedule._window)
    else:
        if loss not in _LOSSES:
            raise ValueError(f"loss must be one of {tuple(_LOSSES)}, got {loss!r}")
        check_scalar(tau, "tau", low=0, high=1, low_open=True, high_open=True)
        params = _k.new_params()
        params["tau"], params["loss"], params["kind"] = tau, _LOSSES[loss], _k.KIND_ARRAY
        params["average"], params["fit_intercept"] = float(bool(average)), float(bool(fit_intercept))
        params["mode"] = _k.MODE_SINGLE if block == 1 else _k.MODE_BATCH
        kernel_state = state._state.copy()
        etas = _checked_stepsizes(stepsizes, sw, n, block)
    if n == 0:
        return 0
    w, wbar = state.coef.copy(), state.coef_avg.copy()
    window = schedule._window.copy() if schedule is not None else _EMPTY
    swk = _EMPTY if sw is None else sw
    if block == 1:
        code, done, exc, row = _k.sgd_single(X, y, swk, w, wbar, kernel_state, params, window,
                                             etas)
    else:
        code, done, exc, row = _k.sgd_blocks(X, y, swk, block, w, wbar, kernel_state, params,
                                             window, etas)
    if code not in (OK, ERR_INTERRUPTED):
        unchanged = "the states were left as they were before this call"
        if code == ERR_BADINPUT and row >= 0:
            raise_row_error("streamfit.kernels.sgd", f"row {row}",
                            np.asarray(X[row], dtype=np.float64), y[row], state=unchanged)
        raise_for(code, "streamfit.kernels.sgd", state=unchanged)
    state.coef, state.coef_avg = w, wbar
    if schedule is not None:
        state._state, schedule._state = _split(kernel_state, state._state)
        schedule._window = window
    else:
        state._state = kernel_state
    if code == ERR_INTERRUPTED:
        raise_for(code, "streamfit.kernels.sgd", exc=exc)
    return int(done)


# The kernel keeps the iterate's bookkeeping and the schedule's estimates in
# one record: these fields belong to the LinearState, the rest to the schedule.
_LINEAR_FIELDS = ("intercept", "intercept_avg", "loss", "n_seen", "n_updates", "n_avg")


def _merge(linear, schedule):
    merged = schedule.copy()
    for name in _LINEAR_FIELDS:
        merged[name] = linear[name]
    return merged


def _split(merged, linear):
    linear = linear.copy()
    for name in _LINEAR_FIELDS:
        linear[name] = merged[name]
    return linear, merged


def _check_iterate(state):
    # coef and coef_avg are public attributes a caller may set (a warm
    # start): the kernels take them as float64 vectors of one length
    for name in ("coef", "coef_avg"):
        a = getattr(state, name)
        if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.ndim == 1
                and a.shape[0] >= 1 and np.isfinite(a).all()):
            raise ValueError(f"state.{name} must be a finite float64 vector (numpy array) "
                             f"of the state's n_features values, got "
                             f"{getattr(a, 'dtype', type(a).__name__)} of shape "
                             f"{getattr(a, 'shape', None)}; set it with "
                             f"np.asarray(..., dtype=float)")
    if state.coef.shape != state.coef_avg.shape:
        raise ValueError(f"state.coef has {state.coef.shape[0]} values and state.coef_avg "
                         f"{state.coef_avg.shape[0]}: they must have one length")


def _check_window(window):
    # the residual window beside the schedule's records, as the kernels take
    # it (its length and values are checked against the records there)
    if not (isinstance(window, np.ndarray) and window.dtype == np.float64 and window.ndim == 1
            and window.flags.c_contiguous and window.flags.writeable):
        raise ValueError(f"the schedule state's window (_window) must be a writable "
                         f"C-contiguous float64 vector, got "
                         f"{getattr(window, 'dtype', type(window).__name__)} of shape "
                         f"{getattr(window, 'shape', None)} (a corrupted state?)")


def _checked_stepsizes(stepsizes, sw, n, block):
    if n == 0:
        return np.zeros(0)
    etas = check_vector(stepsizes, None, "stepsizes")
    weights = np.ones(n) if sw is None else sw
    need = int(np.count_nonzero(weights.reshape(-1, block).sum(axis=1) > 0))
    if etas.shape[0] != need:
        raise ValueError(f"stepsizes must have {need} values (one per update: per "
                         f"{'row' if block == 1 else 'block'} of positive weight), got "
                         f"{etas.shape[0]}")
    if not (etas > 0).all():
        raise ValueError("stepsizes must be positive")
    return etas
