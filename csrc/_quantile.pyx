# The linear learner's state object: online (sub-)gradient descent for
# linear quantile regression (one tau or several) and least squares, under
# every schedule, with averaging, drift restarts, random-scaling sums and
# online scaling. One LinearSGD owns its iterates, averages, schedule
# records, residual windows and work space; the estimators
# (streamfit.quantile), streamfit.kernels and streamfit.river drive it.
#
# Its state lives in one block of doubles (records, iterates, averages,
# windows, sums), kept twice: a block call copies the live block into the
# spare one, runs its loop there without the GIL (polling for signals) and
# commits by swapping the two (C: no signal handler can run in between); an
# error drops the spare, so the live state is as before the call. A one-row
# call runs start to end with the GIL held and calls no Python code: it
# updates the live block in place and restores the few sections it moved
# from a snapshot if the update fails. The loops are _qr_loops.pxd's.
#
# Paper: Shen, Xia & Zhou, "Online Quantile Regression", JMLR 26 (2025).
import copy as _copy
import math
import numbers
import sys

import numpy as np

from cpython.buffer cimport (PyObject_CheckBuffer, PyObject_GetBuffer, PyBuffer_Release,
                             PyBUF_ANY_CONTIGUOUS, PyBUF_FORMAT)
from cpython.float cimport PyFloat_Check, PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_Check, PyLong_AsDouble
from cpython.bool cimport PyBool_Check
from cpython.dict cimport PyDict_Next, PyDict_GetItem
from cpython.long cimport PyLong_AsSsize_t
from cpython.ref cimport PyObject
from cpython.buffer cimport PyBUF_STRIDES, PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE
from libc.math cimport fabs, isnan, isfinite, sqrt, NAN
from libc.float cimport DBL_MAX
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memset

from _common cimport (OK, ERR_NOMEM, ERR_INTERRUPTED, ERR_NONFINITE, ERR_BADINPUT,
                      ERR_SCALE, ERR_LAYOUT, pending_exception)
from _owner cimport CallLock, lock_init, lock_free, lock_enter, lock_leave, sf_owner_init
from _qr_schedule cimport (SGDState, SGDParams, KIND_CONSTANT, KIND_INVERSE_TIME,
                           KIND_STATISTICAL, KIND_ARRAY, MODE_SINGLE, MODE_BATCH,
                           MODE_STORAGE, LOSS_CHECK, LOSS_SQUARED, schedule_enums,
                           record_dtypes)
from _qr_loops cimport (Lin, single_rows, multi_rows, batch_blocks, storage_step, all_finite,
                        NONCROSS_NONE, NONCROSS_PROJECT)
from _qr_multi cimport MultiWork, multi_work_init
from _qr_blocks cimport BlockWork, block_work_init, block_work_free
from _qr_inference cimport rs_len, rs_core
from _qr_plug_in cimport plug_in_means
from _qr_scaler cimport feature_sd
from _records cimport check_sgd_records
from _linear_api cimport LinearAPI, LINEAR_API_NAME
from cpython.pycapsule cimport PyCapsule_New
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_quiet
from _dense cimport sf_dot
from _qr_schedule cimport auto_window
from _records cimport window_need
from _qr_sparse cimport (Sp, LazyRec, LZ_LEN, sparse_single_rows, sparse_multi_rows, log_undo,
                         lazy_u, lazy_avg_at, sparse_sd, nsum as _nsum)
from _hashing cimport (hash_dict_row, HashRow, hash_row_init, hash_row_free,
                       _reserve as _reserve_row, sf_murmurhash3_32 as _murmur_of)

sf_owner_init()

# Schedule kinds, losses, modes and the non-crossing rules for Python
# (streamfit.schedules uses them).
globals().update(schedule_enums())
globals().update({"NONCROSS_NONE": NONCROSS_NONE, "NONCROSS_PROJECT": NONCROSS_PROJECT})

cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Test hook: poll before every row (and every power-iteration row) and
    raise the signal ``signum`` with C's raise() at poll number ``polls``
    (0-based) of the main thread, once; then poll as usual again. The
    signal's Python handler decides what happens (a raising handler stops
    the call). ``polls=-1`` disarms."""
    arm_hook(&_hook, polls, signum)


STATE_DTYPE, PARAMS_DTYPE = record_dtypes()
# the state record's fields, in order: the layout a saved state carries
STATE_FIELDS = tuple(STATE_DTYPE.names)
FORMAT = 2                  # the version of to_state()'s dict

cdef Py_ssize_t NS = sizeof(SGDState) // sizeof(double)
# The block's header: the average's representation (REP_DENSE: the running
# mean; REP_LAZY: sparse rows' lazy u, stamps, X and v) and the online
# scaler's kind (fixed by the first row: SC_CENTRED for dense rows, SC_SPARSE
# for sparse ones)
cdef enum:
    HDR_LEN = 8
    H_REP = 0
    H_SC = 1
    REP_DENSE = 0
    REP_LAZY = 1
    SC_NONE = 0
    SC_CENTRED = 1
    SC_SPARSE = 2
_MODES = {"single": MODE_SINGLE, "batch": MODE_BATCH, "storage": MODE_STORAGE}
_LOSSES = {"check": LOSS_CHECK, "squared": LOSS_SQUARED}
_NONCROSSING = {"rearrange": NONCROSS_NONE, "project": NONCROSS_PROJECT}
# The drift test (csrc/_qr_drift.pxd): its CUSUM's alarm threshold (a mean
# time to a false alarm of at least e^25 = 7e10 rows on a stationary
# stream), the rows the average holds before the test runs, and whether an
# alarm also restarts the statistical schedule's last-phase clock.
_DRIFT_H = 25.0
_DRIFT_ARM = 100.0
_DRIFT_CLOCK = 1.0
# State fields of the statistical schedule, zeroed when it takes over mid-stream
_SCHEDULE_FIELDS = ("phase", "eta_geo", "t_switch", "d0", "b0", "cl", "sumsq", "n_sumsq",
                    "fill", "min_med", "eta_start", "avg_on", "n_flat", "b0_cap", "k_pow",
                    "eta_pow", "cu", "level", "n_high", "win_sumsq", "win_wsum", "n_avg",
                    "dim", "win_len", "nnz_sum", "nnz_rows", "nnz_max")
_SQRT_DBL_MIN = 1.4916681462400413e-154


def rs_length(Py_ssize_t da):
    """Length of the random-scaling sums for da = d (+1 with an intercept)
    coordinates (see ``_qr_inference.pxd``)."""
    return rs_len(da)


def _bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _taus(tau):
    """(taus, several): one tau or a strictly increasing sequence of them."""
    from streamfit._validation import _check_real_array, check_scalar
    if isinstance(tau, (list, tuple, np.ndarray)):
        arr = _check_real_array(tau, "tau")
        if arr.ndim != 1 or arr.size < 1:
            raise ValueError(f"tau must be a number or a 1-D list of numbers, got shape "
                             f"{arr.shape}")
        taus = tuple(float(t) for t in arr)
        several = True
    else:
        taus = (tau,)
        several = False
    for t in taus:
        check_scalar(t, "tau", low=0, high=1, low_open=True, high_open=True)
    taus = tuple(float(t) for t in taus)
    if any(b <= a for a, b in zip(taus, taus[1:])):
        raise ValueError(f"tau must be strictly increasing, got {list(taus)}")
    return taus, several


def check_settings(n_features, tau, loss, mode, schedule, batch_size, average, fit_intercept,
                   inference, scale, drift, noncrossing, hashing=False):
    """The learner's settings, checked (errors name the parameter): a dict of
    canonical values, and the schedule object resolved from ``schedule``."""
    from streamfit._validation import check_scalar
    from streamfit.schedules import InverseTimeSchedule, Schedule, resolve_schedule
    check_scalar(n_features, "n_features", kind=numbers.Integral, low=1)
    if not isinstance(loss, str) or loss not in _LOSSES:
        raise ValueError(f"loss must be one of {tuple(_LOSSES)}, got {loss!r}")
    taus, several = _taus(tau)
    if not isinstance(noncrossing, str) or noncrossing not in _NONCROSSING:
        raise ValueError(f"noncrossing must be one of {tuple(_NONCROSSING)}, got "
                         f"{noncrossing!r}")
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"mode must be one of {tuple(_MODES)}, got {mode!r}")
    if several:
        if mode != "single":
            raise ValueError(f"mode must be 'single' with several taus (the multi-quantile "
                             f"kernel updates per row), got {mode!r}")
        if not isinstance(schedule, str) and not isinstance(schedule, Schedule):
            raise ValueError("schedule: a user schedule (stepsizes(start, count)) is not "
                             "supported with several taus; use 'statistical', 'constant' "
                             "or 'inverse_time' or a schedule object of streamfit.schedules")
    check_scalar(batch_size, "batch_size", kind=numbers.Integral, low=1, allow_none=True)
    average = _bool(average, "average")
    fit_intercept = _bool(fit_intercept, "fit_intercept")
    hashing = _bool(hashing, "hashing")
    if hashing and n_features >= 2 ** 31:
        raise ValueError(f"n_features must be below 2**31 with hashing (FeatureHasher's "
                         f"columns are 32-bit), got {n_features}")
    inference = _bool(inference, "inference")
    if inference and not (average and mode != "storage"):
        raise ValueError("inference=True needs average=True and mode 'single' or 'batch' "
                         "(random scaling is for the averaged iterate of a stochastic-"
                         "gradient path; storage mode's steps use all data so far), got "
                         f"average={average!r}, mode={mode!r}")
    if not (drift is None or (isinstance(drift, str) and drift == "restart")):
        raise ValueError(f"drift must be None or 'restart', got {drift!r}")
    if drift is not None and (mode != "single" or several or scale is not None
                              or not average):
        raise ValueError(f"drift={drift!r} restarts the Polyak-Ruppert average: it "
                         f"needs average=True, and is implemented for one tau in mode "
                         f"'single' with scale=None (the test runs in the single-sample "
                         f"row loop), got average={average!r}, mode={mode!r}, "
                         f"tau={tau!r}, scale={scale!r}")
    if not (scale is None or (isinstance(scale, str) and scale == "online")):
        raise ValueError(f"scale must be None or 'online', got {scale!r}")
    if scale == "online" and (mode != "single" or several or inference):
        raise ValueError("scale='online' is implemented for one tau in mode 'single' "
                         f"without inference, got mode={mode!r}, tau={tau!r}, "
                         f"inference={inference!r}")
    if loss == "squared" and (mode != "single" or several):
        raise ValueError("the squared loss is implemented for one target in mode 'single'")
    resolved = resolve_schedule(schedule)
    if drift is not None and isinstance(resolved, InverseTimeSchedule):
        # under O(1/t) steps the last iterate beats any average of it on
        # every stream, which is what the test detects: it would restart
        # the average every few hundred rows
        raise ValueError(f"drift={drift!r} compares the average with the last "
                         "iterate, which O(1/t) steps (schedule='inverse_time') make the "
                         "better fit on any stream; use schedule='statistical' or "
                         "'constant'")
    if inference and getattr(resolved, "t0", 0):
        raise ValueError("inference=True with a warm start's schedule.t0 > 0: the average "
                         "then counts the start as t0 iterates, which the random-scaling "
                         "path does not contain; use t0=0 for intervals")
    if not isinstance(schedule, str):
        # the learner's own copy: the caller's object may change (set_params)
        schedule = _copy.deepcopy(schedule)
        resolved = resolve_schedule(schedule)
    # (interned: a learner and its unpickled copy hold the very same strings,
    # so that they pickle to the same bytes)
    loss, mode, noncrossing = sys.intern(loss), sys.intern(mode), sys.intern(noncrossing)
    scale = None if scale is None else sys.intern(scale)
    drift = None if drift is None else sys.intern(drift)
    if isinstance(schedule, str):
        schedule = sys.intern(schedule)
    settings = {"n_features": int(n_features), "tau": taus if several else taus[0],
                "loss": loss, "mode": mode, "schedule": schedule,
                "batch_size": None if batch_size is None else int(batch_size),
                "average": average, "fit_intercept": fit_intercept, "inference": inference,
                "scale": scale, "drift": drift, "noncrossing": noncrossing,
                "hashing": hashing}
    return settings, resolved


def _param_records(settings, schedule):
    """The kernel's parameter records (m,) for checked settings."""
    from streamfit._validation import check_memory
    from streamfit.schedules import Schedule
    d = settings["n_features"]
    tau = settings["tau"]
    taus = tau if isinstance(tau, tuple) else (tau,)
    mode = settings["mode"]
    loss = _LOSSES[settings["loss"]]
    da = d + settings["fit_intercept"]
    values = schedule._kernel_params(loss, mode, da) if isinstance(schedule, Schedule) \
        else {"kind": KIND_ARRAY}
    p = np.zeros(len(taus), PARAMS_DTYPE)
    for name in ("eta0", "b0", "t_switch"):
        p[name] = NAN
    p["start"] = 1.0
    p["tau"] = taus
    p["loss"] = loss
    p["average"] = float(settings["average"])
    p["fit_intercept"] = float(settings["fit_intercept"])
    p["mode"] = _MODES[mode]
    # single mode's window follows the schedule's measured d unless given
    p["window_auto"] = float(mode == "single" and isinstance(schedule, Schedule) and
                             getattr(schedule, "window", 0) is None)
    if settings["drift"] is not None:
        p["drift"] = 1.0
        p["drift_h"] = _DRIFT_H
        p["drift_arm"] = _DRIFT_ARM
        p["drift_clock"] = _DRIFT_CLOCK
    for key, value in values.items():
        p[key] = value
    if p["kind"][0] == KIND_STATISTICAL:
        for name in ("window", "n_warmup"):
            # the residual buffer and its order-statistics twin
            check_memory(16 * float(p[name][0]), f"schedule.{name}",
                         getattr(schedule, name), "a residual buffer")
    if mode == "batch" and settings["batch_size"] is not None:
        check_memory(8 * (d + 3) * float(settings["batch_size"]), "batch_size",
                     settings["batch_size"], f"a buffer for one batch of rows of {d} features")
    return p


def user_stepsizes(schedule, start, count):
    """The user schedule's stepsizes for updates start..start+count-1, checked:
    real numbers (no complex or strings), finite, positive, ``count`` of them."""
    from streamfit._validation import _check_real_array
    name = f"schedule.stepsizes({start}, {count})"
    etas = np.ascontiguousarray(_check_real_array(schedule.stepsizes(start, count), name),
                                dtype=np.float64)
    if etas.shape != (count,) or not (np.isfinite(etas).all() and (etas > 0).all()):
        raise ValueError(f"{name} must return {count} finite, positive stepsizes, got "
                         f"shape {etas.shape}: {etas.ravel()[:4]!r}")
    return etas


def _schedule_to_plain(schedule):
    # a schedule setting as plain data: a name, or a streamfit.schedules
    # object as (its class name, its parameters)
    from streamfit.schedules import _SAVABLE
    if isinstance(schedule, str):
        return schedule
    if type(schedule).__name__ in _SAVABLE and type(schedule) is _SAVABLE[type(schedule).__name__]:
        return {"class": type(schedule).__name__, "params": schedule.get_params(deep=False)}
    raise TypeError(f"schedule {schedule!r} is not one of streamfit.schedules' classes: "
                    "it cannot be saved as plain data (pickle it instead)")


def _schedule_from_plain(value):
    from streamfit.schedules import _SAVABLE
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"class", "params"} and \
            isinstance(value["class"], str) and value["class"] in _SAVABLE and \
            isinstance(value["params"], dict):
        cls = _SAVABLE[value["class"]]
        names = set(cls._get_param_names())
        if not set(value["params"]) <= names:
            raise ValueError(f"settings 'schedule': {value['class']} has no parameters "
                             f"{sorted(set(value['params']) - names)} (a corrupted or "
                             "foreign state?)")
        for key, v in value["params"].items():
            if not (v is None or isinstance(v, (bool, int, float, str))):
                raise ValueError(f"settings 'schedule': parameter {key!r} is {v!r}, "
                                 "expected a number, a string or None")
        return cls(**value["params"])
    if isinstance(value, dict):
        raise ValueError(f"settings 'schedule' must be a schedule name or {{'class': one of "
                         f"{sorted(_SAVABLE)}, 'params': {{...}}}}, got {value!r:.200}")
    return value          # a schedule object (pickles: trusted input)


cdef inline bint _is_f64_row(Py_buffer *b, Py_ssize_t d) noexcept:
    # a 1-D buffer of d native float64 values (any stride)
    cdef const char *f = b.format
    if b.ndim != 1 or b.itemsize != 8 or b.shape[0] != d or f == NULL:
        return False
    if f[0] == b'<' or f[0] == b'=' or f[0] == b'@':
        f += 1
    return f[0] == b'd' and f[1] == 0


cdef inline void _copy_strided(double *out, const Py_buffer *b, Py_ssize_t d) noexcept:
    cdef Py_ssize_t j, stride = b.strides[0] if b.strides != NULL else 8
    cdef const char *p = <const char *> b.buf
    if stride == 8:
        memcpy(out, p, d * sizeof(double))
    else:
        for j in range(d):
            out[j] = (<const double *> (p + j * stride))[0]


cdef const double *_c_rows(object a, Py_buffer *buf, bint writable) except NULL:
    # the data of a C-contiguous float64 ndarray (its dtype checked by the
    # caller), without a format string; release with PyBuffer_Release
    PyObject_GetBuffer(a, buf, PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0))
    if buf.len == 0:
        PyBuffer_Release(buf)
        raise ValueError("an empty array has no rows")
    return <const double *> buf.buf


cdef double _real(object v, str name) except? -1.0:
    # a real number: float (NumPy's float64 too) and int fast; NumPy's other
    # real scalars; no str, bytes, bool or objects that merely convert
    if PyFloat_Check(v):
        return PyFloat_AS_DOUBLE(v)
    if PyLong_Check(v) and not PyBool_Check(v):
        try:
            return PyLong_AsDouble(v)
        except OverflowError:
            raise ValueError(f"{name} must be within float64's range, got {v!r:.60}") from None
    if isinstance(v, (np.floating, np.integer)) or (isinstance(v, numbers.Real) and
                                                    not isinstance(v, (bool, np.bool_))):
        return float(v)
    raise TypeError(f"{name} must be a real number, got {type(v).__name__} {v!r:.60}")


cdef class LinearSGD:
    """The state of an online linear learner: one object owns the iterates,
    their averages, the schedule's records and windows, and the work space
    of online quantile regression (one tau or several) or online least
    squares, and learns from blocks of rows or from one row at a time.

    This is what :class:`~streamfit.OnlineQuantileRegressor`,
    :class:`~streamfit.OnlineLeastSquaresRegressor` and
    :class:`streamfit.river.QuantileRegressor` drive; a library with its own
    loop drives it directly (``streamfit.kernels.LinearSGD``), at the same
    cost. Settings are the estimators' parameters (see
    :class:`~streamfit.OnlineQuantileRegressor`), checked here; ``loss`` is
    "check" (quantile regression) or "squared" (least squares).

    One call at a time: a second thread waits for the first. A block call
    (``learn``) releases the GIL, checks for signals about once a
    millisecond and commits whole rows: a signal handler that raises
    (Ctrl-C) leaves the rows before it learnt and the exception propagates
    with a note saying how many; any other failure (NaN in a row, a
    diverging iterate) leaves the state as before the call. ``learn_one``
    runs with the GIL held from start to end (no signal handler can run in
    it). Pickling (or ``to_state`` / ``from_state``) mid-stream and resuming
    gives bit-identical results.

    Parameters
    ----------
    n_features : int
    tau, loss, mode, schedule, batch_size, average, fit_intercept, inference,
    scale, drift, noncrossing
        As the estimators' parameters of those names.
    coef_init, intercept_init : array-like or float, optional
        The starting point (default zeros).

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import LinearSGD
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(20000, 5, tau=0.5, random_state=0)
    >>> model = LinearSGD(5, tau=0.5, average=True)
    >>> for i in range(10000):                   # one event at a time
    ...     model.learn_one(X[i], y[i])
    >>> model.learn(X[10000:], y[10000:])        # or a block
    10000
    >>> bool(np.linalg.norm(model.coef - beta) < 0.05 * np.linalg.norm(beta))
    True
    >>> round(model.predict_one(X[0]) - model.predict(X[:1])[0], 12)
    0.0
    """

    cdef CallLock _lock
    cdef readonly Py_ssize_t n_features
    cdef Py_ssize_t d, m, ld, wcap, rlen
    cdef bint several, has_rs, has_plug, has_sc
    cdef int mode
    cdef SGDParams *P
    cdef void *_raw[2]            # the two state blocks as allocated
    cdef double *_blk[2]          # ... and 64-byte aligned
    cdef int _live
    cdef Py_ssize_t _size, o_W, o_Wbar, o_win, o_rs, o_plug, o_sc, o_lz, o_hdr, o_T
    cdef bint has_lazy            # the layout has the lazy average's stamps
    cdef double *_work            # order statistics, scaler rows, float32 rows, x
    cdef double *_snap            # learn_one's snapshot
    cdef double *_cbuf            # the averages read from the lazy state (m x ld)
    cdef bint _hashing            # dict rows are hashed (the setting)
    cdef Py_ssize_t _max_need     # the window a dense row may need
    cdef double *_log             # sparse calls' undo log, and their rows' scaled values
    cdef Py_ssize_t _logcap
    cdef HashRow _row             # a sparse or hashed row of learn_one / predict_one
    cdef bint _row_ok
    cdef bint _inplace            # a sparse block call is updating the live block
    cdef MultiWork _mw
    cdef bint _mw_ok
    cdef object _settings         # the checked settings (a dict)
    cdef object _schedule         # the resolved schedule object
    cdef object _pending          # batch mode: (X, y, w or None) rows waiting for a batch
    cdef object _store            # storage mode: [X, y, w or None, n] all rows so far
    cdef object _drift_rows       # float64 rows of the drift test's alarms
    cdef public object feature_names   # the estimator's (None or names)
    cdef public object feature_index   # dict rows: {feature: column} (river), or None
    cdef public bint refuse_new        # dict rows: a feature outside the index raises
    cdef public object source          # what the driver configured it from (not saved)

    def __cinit__(self, *args, **kwargs):
        lock_init(&self._lock)
        self.P = NULL
        self._raw[0] = self._raw[1] = NULL
        self._blk[0] = self._blk[1] = NULL
        self._work = NULL
        self._snap = NULL
        self._mw_ok = False
        self._live = 0
        self._log = NULL
        self._logcap = 0
        self._row_ok = False
        self._inplace = False
        self.has_lazy = False
        self.o_lz = self.o_hdr = self.o_T = 0

    def __dealloc__(self):
        self._free_buffers()
        free(self.P)
        free(self._log)
        if self._row_ok:
            hash_row_free(&self._row)
        lock_free(&self._lock)

    cdef void _free_buffers(self) noexcept:
        free(self._raw[0])
        free(self._raw[1])
        self._raw[0] = self._raw[1] = NULL
        self._blk[0] = self._blk[1] = NULL
        free(self._work)
        self._work = NULL
        free(self._snap)
        self._snap = NULL
        if self._mw_ok:
            free(self._mw.work)
            self._mw_ok = False

    def __init__(self, n_features, *, tau=0.5, loss="check", mode="single",
                 schedule="statistical", batch_size=None, average=False, fit_intercept=True,
                 inference=False, scale=None, drift=None, noncrossing="rearrange",
                 coef_init=None, intercept_init=None, hashing=False):
        if self.P != NULL:
            raise RuntimeError("LinearSGD is initialised once")
        settings, resolved = check_settings(n_features, tau, loss, mode, schedule, batch_size,
                                            average, fit_intercept, inference, scale, drift,
                                            noncrossing, hashing)
        coef, b = self._initial(settings, coef_init, intercept_init)
        self._setup(settings, resolved)
        cdef SGDState *S = self._S(self._live)
        cdef double *W = self._W(self._live)
        cdef Py_ssize_t q
        for q in range(self.m):
            if coef is not None:
                _copy_into(W + q * self.ld, coef[q], self.d)
            S[q].intercept = b[q]
            S[q].intercept_avg = b[q]
        # the average starts where the iterate does
        memcpy(self._Wbar(self._live), W, self.m * self.ld * sizeof(double))

    @staticmethod
    def _initial(settings, coef_init, intercept_init):
        # the checked starting point: (coef (m, d) or None, intercepts (m,))
        from streamfit._validation import _check_real_array, check_matrix, check_scalar
        d = settings["n_features"]
        tau = settings["tau"]
        m = len(tau) if isinstance(tau, tuple) else 1
        several = isinstance(tau, tuple)
        coef = None
        if coef_init is not None:
            if several:
                arr = check_matrix(np.atleast_2d(_check_real_array(coef_init, "coef_init")),
                                   "coef_init")
                if arr.shape == (1, d):
                    arr = np.repeat(arr, m, axis=0)
                if arr.shape != (m, d):
                    raise ValueError(f"coef_init must have shape ({m}, {d}) or ({d},) for "
                                     f"{m} taus and {d} features, got {np.shape(coef_init)}")
            else:
                arr = _check_real_array(coef_init, "coef_init")
                if arr.ndim != 1 or arr.shape[0] != d:
                    raise ValueError(f"coef_init must have {d} values (one per feature), got "
                                     f"shape {arr.shape}")
                arr = arr.astype(np.float64)[None]
                if not np.isfinite(arr).all():
                    raise ValueError("coef_init contains NaN or inf; every value must be "
                                     "finite")
            coef = np.ascontiguousarray(arr, dtype=np.float64)
        b = np.zeros(m)
        if intercept_init is not None:
            arr = _check_real_array(intercept_init, "intercept_init").astype(float).ravel()
            if several:
                if arr.size == 1:
                    arr = np.repeat(arr, m)
                if arr.shape != (m,) or not np.isfinite(arr).all():
                    raise ValueError(f"intercept_init must be a finite number or {m} of them, "
                                     f"got {np.shape(intercept_init)}")
            else:
                if arr.size != 1:
                    raise ValueError(f"intercept_init must be one number, got shape "
                                     f"{np.shape(intercept_init)}")
                check_scalar(float(arr[0]), "intercept_init")
            if arr.any() and not settings["fit_intercept"]:
                raise ValueError("intercept_init is given but fit_intercept=False")
            b = arr.astype(np.float64)
        if settings["scale"] is not None and (coef_init is not None or
                                              intercept_init is not None):
            raise ValueError("coef_init/intercept_init with scale='online': a warm start is on "
                             "the original scale, which the scaler has not seen yet; use "
                             "scale=None for warm starts")
        return coef, b

    # -- layout -----------------------------------------------------------------
    cdef int _setup(self, dict settings, object resolved) except -1:
        # settings -> parameter records and a fresh (zero) state
        p = _param_records(settings, resolved)
        self.d = self.n_features = settings["n_features"]
        self.m = p.shape[0]
        self.several = isinstance(settings["tau"], tuple)
        self.ld = (self.d + 7) & ~(<Py_ssize_t> 7)
        self.mode = _MODES[settings["mode"]]
        self.P = <SGDParams *> malloc(self.m * sizeof(SGDParams))
        if self.P == NULL:
            raise MemoryError("LinearSGD: could not allocate its parameters")
        memcpy(self.P, self._params_bytes(p), self.m * sizeof(SGDParams))
        self._settings = settings
        self._schedule = resolved
        self._pending = None
        self._store = None
        self._drift_rows = np.zeros(0)
        self.feature_names = None
        self.source = None
        da = self.d + settings["fit_intercept"]
        self.rlen = rs_len(da)
        try:
            self._layout(self._window_need(0), settings["inference"], self._plug_rule(),
                         settings["scale"] is not None)
        except MemoryError:
            if not settings["inference"]:
                raise
            # the d^2 sums are what did not fit: say so, not "work space"
            raise MemoryError(
                f"inference=True keeps (d + 1)(d + 2) / 2 random-scaling sums a quantile, "
                f"{self.rlen * self.m * 8 / 2 ** 30:,.1f} GiB for d = {self.d:,} features and "
                f"{self.m} quantile(s), which could not be allocated. Set inference=False, or "
                f"use fewer features (sparse rows are taken with inference up to d = "
                f"{SPARSE_INFERENCE_MAX}, streamfit.kernels.SPARSE_INFERENCE_MAX)") from None
        self._hashing = settings["hashing"]
        self._max_need = self._window_need(0, self.d)
        return 0

    cdef const char *_params_bytes(self, object p) except NULL:
        cdef const unsigned char[::1] raw = np.ascontiguousarray(p).view(np.uint8).ravel()
        self._tmp_params = raw
        return <const char *> &raw[0]

    cdef object _tmp_params

    cdef bint _plug_rule(self):
        # the plug-in intercepts' means, kept outside the random-scaling sums:
        # averaging, one or several taus in single mode, an intercept, the
        # check loss, no scaler
        cdef const SGDParams *p = &self.P[0]
        return p.average != 0 and p.mode == MODE_SINGLE and p.fit_intercept != 0 and \
            p.loss == LOSS_CHECK and not self._settings["inference"] and \
            self._settings["scale"] is None

    cdef Py_ssize_t _window_need(self, Py_ssize_t block, double row_nnz=0.0) except -1:
        # the residual window's capacity a call needs: what it holds (fill),
        # the warm-up and a window, and room for what the call appends
        # (row_nnz: single mode, the most non-zeros of one of its rows; the
        # window follows the schedule's d, which the warm-up measures)
        cdef Py_ssize_t q, need = 0, most
        cdef const SGDParams *p
        cdef SGDState zero
        cdef const SGDState *s
        memset(&zero, 0, sizeof(SGDState))
        for q in range(self.m):
            p = &self.P[q]
            if p.kind != KIND_STATISTICAL:
                continue
            s = &self._S(self._live)[q] if self._blk[self._live] != NULL else &zero
            if p.mode == MODE_SINGLE:
                most = <Py_ssize_t> window_need(s, p, 0, row_nnz)
            elif p.mode == MODE_STORAGE:
                most = <Py_ssize_t> max(p.window, s.fill) + <Py_ssize_t> p.window
            else:
                most = <Py_ssize_t> max(max(p.window, p.n_warmup), max(s.fill, 1.0)) + \
                    block + 1
            need = max(need, most)
        return need

    cdef int _layout(self, Py_ssize_t wcap, bint has_rs, bint has_plug, bint has_sc,
                     int has_lazy=-1) except -1:
        # (Re)allocate both state blocks for this layout, carrying the live
        # state over (sections new to the layout start at zero), and the work
        # space. Layout is not state: a failed call may leave a larger one.
        # has_lazy: the lazy average's stamps (-1: as now).
        cdef Py_ssize_t m = self.m, d = self.d, ld = self.ld, q, rlen = self.rlen
        if has_lazy < 0:
            has_lazy = self.has_lazy
        # (sections start on 64-byte boundaries: the iterates' rows, ld apart,
        # then load and store whole vectors in the fused multi-quantile pass)
        cdef Py_ssize_t o_W = _up8(m * NS)
        cdef Py_ssize_t o_Wbar = o_W + m * ld
        cdef Py_ssize_t o_win = o_Wbar + m * ld
        cdef Py_ssize_t o_rs = _up8(o_win + m * wcap)
        cdef Py_ssize_t o_plug = _up8(o_rs + (m * rlen if has_rs else 0))
        cdef Py_ssize_t o_sc = _up8(o_plug + (m * 2 * d if has_plug else 0))
        # the lazy average's records and the header (the average's
        # representation, the scaler's kind), then its stamps
        cdef Py_ssize_t o_lz = _up8(o_sc + (2 * d + 1 if has_sc else 0))
        cdef Py_ssize_t o_hdr = o_lz + m * LZ_LEN
        cdef Py_ssize_t o_T = _up8(o_hdr + HDR_LEN)
        cdef Py_ssize_t size = o_T + (m * ld if has_lazy else 0)
        cdef void *raw0 = malloc(size * sizeof(double) + 64)
        cdef void *raw1 = malloc(size * sizeof(double) + 64)
        # (the work space: the window's scratch, 5 d, the row (_xrow), the
        # scaled coefficients (_coef_ptr), then a scratch copy of the
        # averages for reads of the lazy average: m x ld)
        cdef double *work = <double *> malloc((max(wcap, 1) + 7 * d + 8 +
                                               (m * ld if has_lazy else 0)) * sizeof(double))
        cdef double *snap = <double *> malloc(size * sizeof(double))
        cdef MultiWork mw
        cdef double *new
        cdef double *old = self._blk[self._live]
        cdef Py_ssize_t keep
        if m > 1 and multi_work_init(&mw, m, d, ld, wcap) != OK:
            free(raw0)
            free(raw1)
            free(work)
            free(snap)
            raise MemoryError("LinearSGD: could not allocate its work space")
        if raw0 == NULL or raw1 == NULL or work == NULL or snap == NULL:
            free(raw0)
            free(raw1)
            free(work)
            free(snap)
            if m > 1:
                free(mw.work)
            raise MemoryError(f"LinearSGD: could not allocate its state ({size} values)")
        new = <double *> ((<size_t> raw0 + 63) & ~(<size_t> 63))
        memset(new, 0, size * sizeof(double))
        if old != NULL:
            memcpy(new, old, (o_win) * sizeof(double))     # records, iterates, averages
            keep = min(wcap, self.wcap)
            for q in range(m):
                memcpy(new + o_win + q * wcap, old + self.o_win + q * self.wcap,
                       keep * sizeof(double))
            if has_rs and self.has_rs:
                memcpy(new + o_rs, old + self.o_rs, m * rlen * sizeof(double))
            if has_plug and self.has_plug:
                memcpy(new + o_plug, old + self.o_plug, m * 2 * d * sizeof(double))
            elif has_plug and self.has_rs:
                # inference turned off: its sums' tail kept the plug-in's means
                for q in range(m):
                    memcpy(new + o_plug + q * 2 * d, old + self.o_rs + q * rlen + rs_core(d + 1),
                           2 * d * sizeof(double))
            if has_sc and self.has_sc:
                memcpy(new + o_sc, old + self.o_sc, (2 * d + 1) * sizeof(double))
            memcpy(new + o_lz, old + self.o_lz, (m * LZ_LEN + HDR_LEN) * sizeof(double))
            if has_lazy and self.has_lazy:
                memcpy(new + o_T, old + self.o_T, m * ld * sizeof(double))
        self._free_buffers()
        self._raw[0] = raw0
        self._raw[1] = raw1
        self._blk[0] = new
        self._blk[1] = <double *> ((<size_t> raw1 + 63) & ~(<size_t> 63))
        self._live = 0
        self._work = work
        self._cbuf = work + max(wcap, 1) + 7 * d + 8 if has_lazy else NULL
        self._snap = snap
        if m > 1:
            self._mw = mw
            self._mw_ok = True
        self._size = size
        self.wcap = wcap
        self.o_W, self.o_Wbar, self.o_win = o_W, o_Wbar, o_win
        self.o_rs, self.o_plug, self.o_sc = o_rs, o_plug, o_sc
        self.o_lz, self.o_hdr, self.o_T = o_lz, o_hdr, o_T
        self.has_rs, self.has_plug, self.has_sc = has_rs, has_plug, has_sc
        self.has_lazy = has_lazy
        return 0

    cdef inline SGDState *_S(self, int k) noexcept:
        return <SGDState *> self._blk[k]

    cdef inline double *_W(self, int k) noexcept:
        return self._blk[k] + self.o_W

    cdef inline double *_Wbar(self, int k) noexcept:
        return self._blk[k] + self.o_Wbar

    cdef inline double *_xrow(self) noexcept:
        # the work row a one-row call copies its x into
        return self._work + max(self.wcap, 1) + 5 * self.d

    cdef void _lin(self, Lin *c, int k) noexcept:
        # the loops' view of block k
        cdef double *blk = self._blk[k]
        cdef Py_ssize_t d = self.d
        cdef double *plug = blk + self.o_plug if self.has_plug else NULL
        c.d = d
        c.m = self.m
        c.ld = self.ld
        c.wcap = self.wcap
        c.rlen = self.rlen
        c.S = <SGDState *> blk
        c.P = self.P
        c.W = blk + self.o_W
        c.Wbar = blk + self.o_Wbar
        c.win = blk + self.o_win if self.wcap else NULL
        c.rs = blk + self.o_rs if self.has_rs else NULL
        c.scaler = blk + self.o_sc if self.has_sc else NULL
        c.pt = NULL
        if self.mode == MODE_SINGLE and c.scaler == NULL:
            c.pt = plug_in_means(&self.P[0], c.rs, plug, d)
        c.pstride = self.rlen if c.rs != NULL else 2 * d
        c.work = self._work
        c.zbuf = self._work + max(self.wcap, 1)
        c.cur = c.zbuf + 3 * d
        c.nxt = c.cur + d
        c.mw = &self._mw if self.m > 1 else NULL
        c.alarms = NULL
        c.dcap = 0
        c.n_alarm = 0
        c.hook = &_hook

    # -- input ------------------------------------------------------------------
    cdef const double *_dict_row(self, dict x) except NULL:
        # A dict row {feature: value} through feature_index (river's rows):
        # missing features read as 0, a feature outside the index is ignored
        # or refused (refuse_new); values must be real numbers (bool is 0/1).
        cdef double *out = self._xrow()
        cdef PyObject *key
        cdef PyObject *val
        cdef PyObject *col
        cdef Py_ssize_t pos = 0, j
        cdef object index = self.feature_index
        cdef object v
        if type(index) is not dict:
            raise TypeError("x: a dict row needs the learner's feature_index (a dict of "
                            "feature -> column), which is not set")
        memset(out, 0, self.d * sizeof(double))
        while PyDict_Next(x, &pos, &key, &val):
            col = PyDict_GetItem(<dict> index, <object> key)
            if col == NULL:
                if self.refuse_new:
                    _refuse_new_features(x, index, self.d)
                continue
            j = PyLong_AsSsize_t(<object> col)
            v = <object> val
            if PyFloat_Check(v):
                out[j] = PyFloat_AS_DOUBLE(v)
            elif PyBool_Check(v) or isinstance(v, np.bool_):
                out[j] = 1.0 if v else 0.0      # (a flag feature counts as 0/1)
            else:
                try:
                    out[j] = _real(v, f"x[{(<object> key)!r}]")
                except TypeError:
                    raise TypeError(f"x: the values of features {[<object> key]!r} are not "
                                    f"numbers (got {type(v).__name__} {v!r:.40})") from None
        return out

    cdef const double *_take_row(self, object x, str name) except NULL:
        # x as d float64 values in the work row: a 1-D float64 buffer fast;
        # a list or tuple of floats; a dict through feature_index; else any
        # 1-D array-like of real numbers
        cdef Py_buffer buf
        if type(x) is dict:
            return self._dict_row(<dict> x)
        cdef double *out = self._xrow()
        cdef Py_ssize_t j, d = self.d
        cdef bint ok = False
        cdef object item
        if PyObject_CheckBuffer(x) and type(x) is not bytes and type(x) is not bytearray:
            PyObject_GetBuffer(x, &buf, PyBUF_STRIDES | PyBUF_FORMAT)
            if _is_f64_row(&buf, d):
                _copy_strided(out, &buf, d)
                ok = True
            PyBuffer_Release(&buf)
            if ok:
                return out
        elif (type(x) is list or type(x) is tuple) and len(x) == d:
            for j in range(d):
                item = x[j]
                if type(item) is float:
                    out[j] = <double> item
                else:
                    out[j] = _real(item, f"{name}[{j}]")
            return out
        return self._take_row_slow(x, name)

    cdef const double *_take_row_slow(self, object x, str name) except NULL:
        from streamfit._validation import _check_real_array
        if isinstance(x, (str, bytes, bytearray)):
            raise TypeError(f"{name} must be a 1-D array of {self.d} real numbers, got "
                            f"{type(x).__name__} {x!r:.60}")
        arr = _check_real_array(x, name)
        if arr.ndim != 1 or arr.shape[0] != self.d:
            raise ValueError(f"{name} must be a 1-D array of {self.d} values (one per feature), "
                             f"got shape {arr.shape}")
        cdef const double[::1] v = np.ascontiguousarray(arr, dtype=np.float64)
        memcpy(self._xrow(), &v[0], self.d * sizeof(double))
        return self._xrow()

    cdef object _check_block(self, object X, object y, object sw):
        # X (n, d) C-contiguous float64 (float32 too where single mode reads
        # it as it is), y (n,), sample_weight None or (n,) finite, >= 0
        if type(X) is not np.ndarray or X.ndim != 2 or \
                not (X.dtype == np.float64 or X.dtype == np.float32):
            raise TypeError(f"X must be a float64 ndarray of shape (n, {self.d}), got "
                            f"{type(X).__name__} {getattr(X, 'dtype', '')} "
                            f"{getattr(X, 'shape', '')}")
        n = X.shape[0]
        if X.shape[1] != self.d:
            raise ValueError(f"X has {X.shape[1]} features, but {self._name()} is expecting "
                             f"{self.d} features as input.")
        self._check_target(y, sw, n)
        return n

    # -- errors -----------------------------------------------------------------
    cdef int _raise(self, int code, object x_row, double y_row, double w_row,
                    object at) except -1:
        # The exception for a failed call (the state was left as before it).
        from streamfit._errors import raise_for, raise_row_error
        where = self._name()
        cdef const SGDState *s = self._S(self._live)
        if code == ERR_BADINPUT and x_row is not None:
            raise_row_error(where, at, np.asarray(x_row, dtype=np.float64), y_row,
                            s.cl * (self.d + self._settings["fit_intercept"]))
        if code == ERR_SCALE and x_row is not None:
            big = float(np.abs(x_row).max()) if np.size(x_row) else 0.0
            if 0 < big < _SQRT_DBL_MIN:
                raise_for(code, where, detail=f"X's entries are at most {big:.3g}: their "
                          "squares underflow float64, so the schedule cannot learn their "
                          "scale.")
        if code == ERR_SCALE:
            raise_for(code, where, detail="The sum of ||x||^2 over the rows the schedule "
                      "calibrates on overflows.")
        raise_for(code, where)

    cdef str _name(self):
        return "LinearSGD" if self.source is None or not isinstance(self.source, tuple) \
            else str(self.source[0])

    cdef int _check_sums(self, int k) except -1:
        # the random-scaling sums of s^2 u_s u_s' (a row of finite data, a
        # finite iterate) can leave float64: refuse the call rather than keep them
        cdef Py_ssize_t i
        cdef double *rs
        if not self.has_rs:
            return 0
        rs = self._blk[k] + self.o_rs
        for i in range(self.m * self.rlen):
            if not (fabs(rs[i]) <= DBL_MAX):
                raise ValueError(
                    f"{self._name()}: inference=True keeps sums of squared steps of the "
                    "average times s^2, and they overflow float64 on this data: rescale y "
                    "(or X) by a power of ten (and the intervals back), or set "
                    "inference=False. The state was left as it was before this call")
        return 0

    # -- one row ------------------------------------------------------------------
    def learn_one(self, x, y, weight=1.0):
        """Learn from one row ``x`` (a 1-D array or sequence of n_features
        real numbers) with target ``y`` and weight ``weight`` (>= 0): exactly
        what a block holding this row would do. Bad input raises (naming the
        argument) and changes nothing.

        Examples
        --------
        >>> from streamfit.kernels import LinearSGD
        >>> model = LinearSGD(2, schedule="constant")
        >>> model.learn_one([1.0, 2.0], 3.0)
        >>> model.n_samples_seen
        1
        """
        lock_enter(&self._lock, "LinearSGD")
        try:
            self._torn_check()
            self._learn_one(x, y, weight)
        finally:
            lock_leave(&self._lock)

    cdef int _learn_one(self, object x, object y, object weight) except -1:
        cdef const double *xp
        cdef double yv, wv
        if (type(x) is dict and self._hashing) or _is_sparse(x):
            self._sparse_row(x, "x")
            yv = _real(y, "y")
            wv = 1.0 if type(weight) is float and <double> weight == 1.0 else \
                self._weight(weight)
            if self.mode != MODE_SINGLE:
                return self._learn_block(np.asarray(<double[:self.d]> self._dense_of_row())
                                         .copy()[None], np.array([yv]),
                                         None if wv == 1.0 else np.array([wv]), None)
            return self._learn_one_sparse(yv, wv, x)
        if self.mode != MODE_SINGLE:
            return self._learn_block(self._as_block(x, "x"), np.array([_real(y, "y")]),
                                     None if weight == 1.0 else np.array([self._weight(weight)]),
                                     None)
        xp = self._take_row(x, "x")
        yv = _real(y, "y")
        wv = 1.0 if type(weight) is float and <double> weight == 1.0 else self._weight(weight)
        return self._learn_row(xp, yv, wv, x)

    cdef int _learn_row(self, const double *xp, double yv, double wv, object x) except -1:
        # One row of single mode at xp (n_features values), in place, with the
        # GIL held; x (or None) names what the caller passed, for errors.
        cdef double eta_user = 0.0
        cdef Lin c
        cdef Poll pl
        cdef Py_ssize_t done = 0, row = -1
        cdef int code, k = self._live
        cdef double alarm = 0.0
        cdef double *blk = self._blk[k]
        cdef double *etas = NULL
        cdef int prev
        if not (wv >= 0 and wv <= DBL_MAX):
            raise ValueError(f"weight must be finite and >= 0, got {wv!r}")
        if self.P[0].kind == KIND_ARRAY and wv != 0:
            eta_user = user_stepsizes(self._schedule, int(self._S(k).n_updates), 1)[0]
            etas = &eta_user
        if self.has_sc:
            self._check_scaler(SC_CENTRED)
        if self.wcap < self._max_need:
            self._grow_window(0)
        # (a conversion of the average runs on the spare block, given back
        # on failure)
        prev = self._to_rep(False)
        k = self._live
        blk = self._blk[k]
        # the sections a row can move: records, iterates, averages | sums,
        # plug-in means, scaler and (with a scaler) the header that names
        # its kind (the window only grows past its fill; a dense row leaves
        # the lazy average's records and stamps alone)
        memcpy(self._snap, blk, self.o_win * sizeof(double))
        if self._dense_end() > self.o_rs:
            memcpy(self._snap + self.o_rs, blk + self.o_rs,
                   (self._dense_end() - self.o_rs) * sizeof(double))
        self._set_scaler(k, SC_CENTRED)
        self._lin(&c, k)
        c.alarms = &alarm
        c.dcap = 1
        poll_quiet(&pl, &_hook)
        if self.m > 1:
            code = multi_rows(&c, xp, NULL, 1, &yv, &wv if wv != 1.0 else NULL,
                              <int> _NONCROSSING[self._settings["noncrossing"]], NULL, &pl,
                              &done, &row)
        else:
            code = single_rows(&c, xp, NULL, 1, &yv, &wv if wv != 1.0 else NULL, etas, &pl,
                               &done, &row)
        if code == OK and not all_finite(&c):
            code = ERR_NONFINITE
        if code == OK and self.has_rs:
            try:
                self._check_sums(k)
            except BaseException:
                self._restore(blk)
                if prev >= 0:
                    self._live = prev
                raise
        if code != OK:
            self._restore(blk)
            if prev >= 0:
                self._live = prev
            if type(x) is dict and code == ERR_BADINPUT:
                _refuse_nonfinite(x, self.feature_index, "x")
            self._raise(code, np.asarray(<double[:self.d]> xp).copy(), yv, wv, "this row")
        if c.n_alarm:
            self._drift_rows = np.append(self._drift_rows, alarm)
        return 0

    cdef inline Py_ssize_t _dense_end(self) noexcept:
        # where the sections a dense row can move end (_learn_row's snapshot)
        return self.o_T if self.has_sc else self.o_lz

    cdef void _restore(self, double *blk) noexcept:
        memcpy(blk, self._snap, self.o_win * sizeof(double))
        if self._dense_end() > self.o_rs:
            memcpy(blk + self.o_rs, self._snap + self.o_rs,
                   (self._dense_end() - self.o_rs) * sizeof(double))

    cdef double _weight(self, object weight) except -1.0:
        cdef double w = _real(weight, "weight")
        if not (w >= 0 and w <= DBL_MAX):
            raise ValueError(f"weight must be finite and >= 0, got {weight!r}")
        return w

    cdef object _as_block(self, object x, str name):
        self._take_row(x, name)
        return np.asarray(<double[:self.d]> self._xrow()).copy()[None]

    def predict_one(self, x):
        """The prediction for one row ``x``: a float (one tau), or an array of
        the m quantiles, sorted (several).

        Examples
        --------
        >>> from streamfit.kernels import LinearSGD
        >>> LinearSGD(2, coef_init=[1.0, 2.0], intercept_init=0.5).predict_one([1.0, 1.0])
        3.5
        """
        cdef const double *xp
        lock_enter(&self._lock, "LinearSGD")
        try:
            self._torn_check()
            if (type(x) is dict and self._hashing) or _is_sparse(x):
                self._sparse_row(x, "x")
                return self._predict_sparse_row()
            xp = self._take_row(x, "x")
            out = self._predict_dense_row(xp)
            if type(x) is dict and not self.several and not (fabs(out) <= DBL_MAX):
                _refuse_nonfinite(x, self.feature_index, "x")
            return out
        finally:
            lock_leave(&self._lock)

    cdef object _predict_dense_row(self, const double *xp):
        cdef const double *coef
        cdef double out
        cdef double[::1] res
        cdef Py_ssize_t q
        if not self.several:
            coef = self._coef_ptr(0)
            out = sf_dot(self.d, xp, coef) + self._intercept_of(0)
            return out
        res = np.empty(self.m)
        for q in range(self.m):
            coef = self._coef_ptr(q)
            res[q] = sf_dot(self.d, xp, coef) + self._intercept_of(q)
        _sort_small(&res[0], self.m)
        return np.asarray(res)

    cdef int _torn_check(self) except -1:
        # A fork while another thread's sparse call updated this object in
        # place: the child's copy may hold part of a row
        if self._inplace and self._lock.forked_mid_call:
            raise RuntimeError(
                f"{self._name()}: this process was forked while another thread was inside a "
                "sparse call on this state object, which updates it in place: its copy "
                "here may hold part of a row. Refit, or load a copy saved before the fork")
        return 0

    cdef bint _averaged(self, Py_ssize_t q) noexcept:
        return self.P[q].average != 0 and self._S(self._live)[q].n_avg > 0

    cdef const double *_coef_ptr(self, Py_ssize_t q) noexcept:
        # The coefficients predictions use: the average once it runs, else
        # the iterate -- with a scaler, the iterate on the original scale,
        # beta = theta / sd, made in the work space (_intercept_of then gives
        # its intercept b - mean' beta, summed in sf_dot's order; the sparse
        # scaler does not centre: b). A lazy average is read into a scratch
        # copy (O(n_features): the dense reads). Every prediction (predict,
        # predict_one, coef) reads these.
        cdef const double *sc
        cdef const double *w
        cdef double *out
        cdef Py_ssize_t j, d = self.d
        if self._averaged(q):
            if self._lazy_rep(self._live):
                out = self._cbuf + q * self.ld
                for j in range(self.d):
                    out[j] = self._coef_at(q, j)
                return out
            return self._Wbar(self._live) + q * self.ld
        if not self.has_sc:
            return self._W(self._live) + q * self.ld
        sc = self._blk[self._live] + self.o_sc
        w = self._W(self._live)
        out = self._work + max(self.wcap, 1) + 6 * d
        if self._sc_kind() == SC_SPARSE:
            for j in range(d):
                out[j] = w[j] / sparse_sd(sc, d, j)
        else:
            for j in range(d):
                out[j] = w[j] / feature_sd(sc, d, j)
        return out

    cdef double _intercept_of(self, Py_ssize_t q) noexcept:
        # (after _coef_ptr(q), whose scaled coefficients it reads)
        cdef const SGDState *s = &self._S(self._live)[q]
        cdef const double *sc
        if self._averaged(q):
            return s.intercept_avg
        if not self.has_sc or self.P[0].fit_intercept == 0 or self._sc_kind() == SC_SPARSE:
            return s.intercept
        sc = self._blk[self._live] + self.o_sc
        return s.intercept - sf_dot(self.d, sc + 1, self._work + max(self.wcap, 1) + 6 * self.d)

    # -- blocks -----------------------------------------------------------------
    def learn(self, X, y, sample_weight=None, predictions=None, batch_size=None):
        """Learn from a block of rows: ``X`` a C-contiguous float64 array of
        shape (n, n_features) (float32 read as it is in mode "single"), ``y``
        float64 (n,), ``sample_weight`` None or float64 (n,) >= 0. Returns the
        number of rows taken (n).

        In mode "batch" rows short of a full batch (``batch_size``) wait for
        the next call (``n_samples_seen`` counts them); with
        ``batch_size=None`` the call is one batch. In mode "storage" the rows
        join all rows so far and one step is taken on the mean loss over all
        of them. ``predictions``: None, or (several taus) an (n, m) float64
        array that receives each row's m predictions under the iterates
        before its update. ``batch_size``: mode "batch", the rows per update
        of this call only (default the setting).

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.kernels import LinearSGD
        >>> X = np.random.default_rng(0).standard_normal((500, 3))
        >>> LinearSGD(3, mode="batch", batch_size=100).learn(X, X.sum(1))
        500
        """
        lock_enter(&self._lock, "LinearSGD")
        try:
            self._torn_check()
            return self._learn_block(X, y, sample_weight, predictions, batch_size)
        finally:
            lock_leave(&self._lock)

    cdef object _learn_block(self, object X, object y, object sw, object preds,
                             object batch_size=None):
        if _is_sparse(X):
            return self._learn_sparse(X, y, sw, preds)
        n = self._check_block(X, y, sw)
        # (the loops read rows in C order: other layouts are copied once;
        # float32 rows are read as they are in single mode only)
        X = np.ascontiguousarray(X, dtype=None if self.mode == MODE_SINGLE else np.float64)
        y = np.ascontiguousarray(y)
        if sw is not None:
            sw = np.ascontiguousarray(sw)
        if preds is not None and (not self.several or type(preds) is not np.ndarray or
                                  preds.dtype != np.float64 or preds.shape != (n, self.m)
                                  or not preds.flags.c_contiguous or not preds.flags.writeable):
            raise ValueError(f"predictions must be None or a writable float64 array of shape "
                             f"({n}, {self.m}) (several taus)")
        if n == 0:
            return 0
        if self.mode == MODE_SINGLE:
            return self._learn_single(X, y, sw, preds)
        if self.mode == MODE_BATCH:
            return self._learn_batch(X, y, sw, batch_size)
        return self._learn_storage(X, y, sw)

    cdef int _grow_window(self, Py_ssize_t block, double row_nnz=-1.0) except -1:
        # (row_nnz < 0: dense rows, n_features non-zeros at most)
        cdef Py_ssize_t need = self._window_need(block, self.d if row_nnz < 0 else row_nnz)
        if need > self.wcap:
            self._layout(need, self.has_rs, self.has_plug, self.has_sc)
        return 0

    cdef int _commit(self, int spare) noexcept:
        self._live = spare
        return 0

    cdef int _interrupted(self, int done, Py_ssize_t n, str what) except -1:
        # a signal handler raised inside the loop: its exception, with a note
        exc = pending_exception()
        if exc is None:         # pragma: no cover - the loop always leaves one
            exc = KeyboardInterrupt()
        if hasattr(exc, "add_note"):
            exc.add_note(f"{self._name()} was interrupted after {done} of its {n} {what}: "
                         f"it holds the state after them (n_samples_seen = "
                         f"{self._n_seen()})")
        raise exc

    cdef object _learn_single(self, object X, object y, object sw, object preds):
        cdef Py_ssize_t n = X.shape[0], done = 0, row = -1, count
        cdef int spare = 1 - self._live, code
        cdef Lin c
        cdef Poll pl
        cdef const double *X64 = NULL
        cdef const float *X32 = NULL
        cdef const double[:, ::1] x64
        cdef const float[:, ::1] x32
        cdef const double[::1] yv = y
        cdef const double[::1] swv
        cdef const double *swp = NULL
        cdef const double[::1] etav
        cdef const double *etas = NULL
        cdef double[::1] alarms
        cdef double[:, ::1] pv
        cdef double *po = NULL
        cdef int noncross = <int> _NONCROSSING[self._settings["noncrossing"]]
        if X.dtype == np.float32:
            x32 = X
            X32 = &x32[0, 0]
        else:
            x64 = X
            X64 = &x64[0, 0]
        if sw is not None:
            swv = sw
            swp = &swv[0]
        if preds is not None:
            pv = preds
            po = &pv[0, 0]
        self._grow_window(0)
        if self.P[0].kind == KIND_ARRAY:
            count = n if sw is None else int(np.count_nonzero(sw))
            etav = user_stepsizes(self._schedule, int(self._S(self._live).n_updates), count) \
                if count else np.zeros(1)
            etas = &etav[0]
        alarms = np.zeros(self._alarm_room(n, sw) + 1)
        self._check_scaler(SC_CENTRED)
        spare = 1 - self._live
        if self.P[0].average != 0 and self._lazy_rep(self._live):
            self._convert(self._live, spare, False)     # (dense rows: the running mean)
        else:
            memcpy(self._blk[spare], self._blk[self._live], self._size * sizeof(double))
        self._set_scaler(spare, SC_CENTRED)
        self._lin(&c, spare)
        c.alarms = &alarms[0]
        c.dcap = alarms.shape[0]
        poll_init(&pl, &_hook)
        with nogil:
            if self.m > 1:
                code = multi_rows(&c, X64, X32, n, &yv[0], swp, noncross, po, &pl, &done, &row)
            else:
                code = single_rows(&c, X64, X32, n, &yv[0], swp, etas, &pl, &done, &row)
        if (code == OK or code == ERR_INTERRUPTED) and not all_finite(&c):
            if code == ERR_INTERRUPTED:
                pending_exception()       # the divergence is what the caller must hear
            code = ERR_NONFINITE
        if code == OK or code == ERR_INTERRUPTED:
            if code == ERR_INTERRUPTED:
                exc = pending_exception()
                try:
                    self._check_sums(spare)
                except BaseException:
                    raise
                self._commit(spare)
                self._add_alarms(alarms, c.n_alarm)
                _reraise(exc, self._name(), done, n, "rows", self._n_seen())
            self._check_sums(spare)
            self._commit(spare)
            self._add_alarms(alarms, c.n_alarm)
            return n
        if row >= 0:
            self._raise(code, np.asarray(X[row], dtype=np.float64), float(y[row]),
                        1.0 if sw is None else float(sw[row]), f"row {row} of this call")
        self._raise(code, None, 0.0, 1.0, None)

    cdef Py_ssize_t _alarm_room(self, Py_ssize_t n, object sw):
        # room for every alarm the call can raise: the test restarts at an
        # alarm and runs again only after drift_arm rows (of weight >= 1
        # each unless weighted)
        if self.P[0].drift == 0:
            return 0
        arm = self.P[0].drift_arm
        per = max(arm, 1.0) if sw is None else \
            max(arm / max(float(sw.max(initial=0.0)), 1e-300), 1.0)
        return int(min(n, n / per + 2))

    cdef int _add_alarms(self, object alarms, Py_ssize_t count) except -1:
        if count:
            self._drift_rows = np.concatenate([self._drift_rows, alarms[:count]])
        return 0

    cdef int _n_seen(self):
        n = int(self._S(self._live).n_seen)
        if self._pending is not None:
            n += self._pending[0].shape[0]
        return n

    # -- sparse rows ----------------------------------------------------------------
    # A CSR block, a sparse row or a hashed dict runs the loops of
    # _qr_sparse.pxd at O(nnz) a row: in place on the live block with an undo
    # log (the records, the lazy records and the window snapshotted at the
    # start, each coordinate logged before it moves), so that a failure
    # restores the call's start and an interrupt keeps the rows before it.
    # A call that needs the other representation of the average (sparse
    # rows with average=True on a state last fed dense rows, or dense rows
    # on a lazy state) converts into the spare block (O(n_features)) and
    # runs there: a failure then drops it.

    cdef inline bint _lazy_rep(self, int k) noexcept:
        return self._blk[k][self.o_hdr + H_REP] == REP_LAZY

    cdef inline int _sc_kind(self) noexcept:
        return <int> self._blk[self._live][self.o_hdr + H_SC]

    cdef int _check_scaler(self, int kind) except -1:
        # The online scaler's kind is fixed by the first row that reaches it
        # (_set_scaler): dense rows centre, sparse rows cannot (O(n_features)
        # a row); rows of the other kind are refused, before anything moves.
        cdef int now
        if not self.has_sc:
            return 0
        now = self._sc_kind()
        if now == SC_NONE or now == kind:
            return 0
        if kind == SC_SPARSE:
            raise ValueError(
                f"X: {self._name()} with scale='online' learnt its scales from dense rows "
                "(centred, which sparse rows cannot be without densifying them); pass "
                "dense rows (X.toarray()), or start a new model on sparse rows (their "
                "scaler keeps each feature's root mean square, uncentred)")
        raise ValueError(
            f"X: {self._name()} with scale='online' learnt its scales from sparse rows "
            "(uncentred); pass sparse rows (scipy.sparse.csr_matrix(X)), or start a "
            "new model on dense rows")

    cdef void _set_scaler(self, int k, int kind) noexcept:
        # (on the block the call works on, after its snapshot: a failure
        # undoes it with the rest)
        if self.has_sc and self._blk[k][self.o_hdr + H_SC] == SC_NONE:
            self._blk[k][self.o_hdr + H_SC] = kind

    cdef void _sp(self, Sp *sp, int k, bint logging) noexcept:
        # the sparse loops' view of block k (logging: into self._log)
        cdef double *blk = self._blk[k]
        cdef bint lazy = self.P[0].average != 0 and self._lazy_rep(k)
        cdef Py_ssize_t st = 2
        sp.U = blk + self.o_Wbar if lazy else NULL
        sp.T = blk + self.o_T if lazy else NULL
        sp.XV = blk + self.o_plug if lazy and self.has_plug else NULL
        sp.xvstride = 2 * self.d
        sp.lz = <LazyRec *> (blk + self.o_lz)
        sp.ssc = blk + self.o_sc if self.has_sc else NULL
        sp.o_u = sp.o_x = sp.o_s = 0
        if sp.U != NULL:
            sp.o_u = st
            st += 2
        if sp.XV != NULL:
            sp.o_x = st
            st += 2
        if sp.ssc != NULL:
            sp.o_s = st
            st += 2
        sp.stride = st
        sp.log = self._log if logging else NULL
        sp.nlog = 0
        sp.caplog = 0
        sp.z = NULL

    cdef int _room(self, Sp *sp, Py_ssize_t entries, Py_ssize_t zlen) except -1:
        # the undo log's room for `entries` and the scaled values of a row
        cdef Py_ssize_t need = entries * sp.stride + zlen + 1
        cdef double *grown
        if need > self._logcap:
            grown = <double *> realloc(self._log, need * sizeof(double))
            if grown == NULL:
                raise MemoryError(f"{self._name()}: no room for a sparse call's undo log "
                                  f"({entries} entries); the state was left as it was")
            self._log = grown
            self._logcap = need
        if sp.log != NULL:
            sp.log = self._log
        sp.caplog = entries
        sp.z = self._log + entries * sp.stride
        return 0

    cdef void _snap_small(self, int k, bint window) noexcept:
        # what an in-place sparse call changes beside the logged coordinates
        cdef double *blk = self._blk[k]
        memcpy(self._snap, blk, self.m * NS * sizeof(double))
        memcpy(self._snap + self.o_lz, blk + self.o_lz,
               (self.m * LZ_LEN + HDR_LEN) * sizeof(double))
        if window and self.wcap:
            memcpy(self._snap + self.o_win, blk + self.o_win,
                   self.m * self.wcap * sizeof(double))

    cdef void _restore_small(self, int k, bint window, Sp *sp) noexcept:
        cdef double *blk = self._blk[k]
        log_undo(sp, blk + self.o_W, self.ld, self.d)
        memcpy(blk, self._snap, self.m * NS * sizeof(double))
        memcpy(blk + self.o_lz, self._snap + self.o_lz,
               (self.m * LZ_LEN + HDR_LEN) * sizeof(double))
        if window and self.wcap:
            memcpy(blk + self.o_win, self._snap + self.o_win,
                   self.m * self.wcap * sizeof(double))

    cdef int _to_rep(self, bint lazy) except -2:
        # Make the live block hold the average in the representation the
        # call's rows need; returns the block to go back to on failure (-1:
        # none, the live block was already right). The layout grows first
        # (layout is not state).
        cdef int prev = self._live
        if self.P[0].average == 0 or self.has_rs or self._lazy_rep(prev) == lazy:
            return -1
        if lazy and not self.has_lazy:
            self._layout(self.wcap, self.has_rs, self.has_plug, self.has_sc, True)
            prev = self._live
        self._convert(prev, 1 - prev, lazy)
        self._live = 1 - prev
        return prev

    cdef void _convert(self, int src, int dst, bint to_lazy) noexcept:
        # Block src into block dst (src may be dst), the average converted to
        # the lazy representation (to_lazy) or back to the running mean:
        # O(n_features). The other sections are copied as they are.
        cdef double *b = self._blk[dst]
        cdef SGDState *S = <SGDState *> b
        cdef Py_ssize_t q, j, d = self.d, ld = self.ld
        cdef double *W
        cdef double *U
        cdef double *T
        cdef double *XV
        cdef double *ssc
        cdef LazyRec *lz
        cdef double N, th, wb, xb, ww, u, v, X, lag
        if src != dst:
            memcpy(b, self._blk[src], self._size * sizeof(double))
        ssc = b + self.o_sc if self.has_sc and b[self.o_hdr + H_SC] == SC_SPARSE else NULL
        for q in range(self.m):
            W = b + self.o_W + q * ld
            U = b + self.o_Wbar + q * ld
            T = b + self.o_T + q * ld
            XV = b + self.o_plug + q * 2 * d if self.has_plug else NULL
            lz = <LazyRec *> (b + self.o_lz) + q
            N = S[q].n_avg
            if to_lazy:
                # u = N (theta - wbar); X = x_wsum xbar; v = -V = N (wwbar - wbar)
                # (H = 0); every coordinate stamped, unless the average holds no
                # iterate: then the slot keeps the dense value (stamp 0), the
                # prior of a warm start's average
                lz.ep = 1.0
                lz.n_ref = N
                lz.N0 = N
                lz.H = lz.A = lz.Ac = lz.B = lz.Bc = 0.0
                for j in range(d):
                    if N > 0:
                        th = W[j] if ssc == NULL else W[j] / sparse_sd(ssc, d, j)
                        wb = U[j]
                        if XV != NULL:
                            xb = XV[j]
                            ww = XV[d + j]
                            XV[j] = S[q].x_wsum * xb
                            XV[d + j] = N * (ww - wb)
                        U[j] = N * (th - wb)
                        T[j] = 1.0
                        if XV != NULL:
                            _nsum(&lz.A, &lz.Ac, XV[j] * U[j])
                            _nsum(&lz.B, &lz.Bc, XV[j] * XV[d + j])
                    else:
                        T[j] = 0.0
                        if XV != NULL:
                            XV[j] = 0.0
                            XV[d + j] = 0.0
            else:
                lag = 0.0
                for j in range(d):
                    th = W[j] if ssc == NULL else W[j] / sparse_sd(ssc, d, j)
                    xb = 0.0
                    if N > 0:
                        u = lazy_u(U, T, lz, j, th)
                        wb = th - u / N
                        ww = wb
                        if XV != NULL:
                            X = XV[j] if T[j] == lz.ep else 0.0
                            v = XV[d + j] if T[j] == lz.ep else 0.0
                            xb = X / S[q].x_wsum if S[q].x_wsum > 0 else 0.0
                            ww = th - (u + (u * lz.H - v)) / N
                    else:
                        wb = U[j] if T[j] == 0 else th
                        ww = wb
                    U[j] = wb
                    T[j] = 0.0
                    if XV != NULL:
                        XV[j] = xb
                        XV[d + j] = ww
                        lag += xb * (ww - wb)
                if XV != NULL and N > 0 and S[q].x_wsum > 0:
                    S[q].intercept_avg = S[q].pi_avg + lag
        b[self.o_hdr + H_REP] = REP_LAZY if to_lazy else REP_DENSE

    cdef object _csr_arrays(self, object X, Py_ssize_t n, str name, bint rows=True):
        # X's (indptr, indices, data), checked: a CSR matrix of n rows and
        # n_features columns, float64 data, int32 indices, a valid index
        # pointer, each row's columns in [0, n_features), increasing (sorted,
        # no repeats), finite values. Raises naming X. rows False: the rows
        # (columns and values) are left to the learning loops, which check
        # each as they come to it (one pass over the block instead of two;
        # _csr_fault on failure): only the index pointer is checked here.
        cdef Py_ssize_t bad, nnz
        cdef int what = 0
        cdef const int[::1] ip
        cdef const int[::1] ix
        cdef const double[::1] dv
        if getattr(X, "format", None) != "csr":
            raise TypeError(f"{name} must be a scipy.sparse CSR matrix or array (convert with "
                            f".tocsr()), got {type(X).__name__} of format "
                            f"{getattr(X, 'format', None)!r}")
        if len(X.shape) != 2 or X.shape[1] != self.d:
            raise ValueError(f"{name} has {tuple(X.shape)[1:]} features, but {self._name()} "
                             f"is expecting {self.d} features as input.")
        data, indices, indptr = X.data, X.indices, X.indptr
        for arr, what_, dt in ((data, "data", np.float64), (indices, "indices", np.int32),
                               (indptr, "indptr", np.int32)):
            if not (isinstance(arr, np.ndarray) and arr.dtype == dt and arr.ndim == 1):
                raise TypeError(f"{name}.{what_} must be a 1-D {np.dtype(dt).name} array, got "
                                f"{getattr(arr, 'dtype', type(arr).__name__)} (the state "
                                "object reads 32-bit column indices and float64 values; the "
                                "estimators convert int64 indices that fit)")
        if indptr.shape[0] != n + 1:
            raise ValueError(f"{name}.indptr must have {n + 1} entries (rows + 1), got "
                             f"{indptr.shape[0]}")
        ip = np.ascontiguousarray(indptr)
        ix = np.ascontiguousarray(indices)
        dv = np.ascontiguousarray(data)
        nnz = ix.shape[0]
        if dv.shape[0] != nnz:
            raise ValueError(f"{name}.data and {name}.indices must have the same length, got "
                             f"{dv.shape[0]} and {nnz}")
        with nogil:
            bad = _indptr_fault(&ip[0], n, nnz) if not rows else 0
            if bad >= 0:
                # (the full check also when the index pointer alone fails: it
                # names the block's first fault in row order, as always)
                bad = _csr_fault(&ip[0], &ix[0] if nnz else NULL, &dv[0] if nnz else NULL, n,
                                 self.d, nnz, &what)
        if bad >= 0:
            _csr_error(name, what, bad, X, self.d)
        return ip, ix, dv

    cdef int _csr_refuse(self, object X, const int[::1] ip, const int[::1] ix,
                         const double[::1] dv, Py_ssize_t n) except -1:
        # After a learning loop that stopped (a failure, an interrupt): the
        # error a fault of the block's rows makes, which takes precedence as
        # when the block was checked before the loop (0: no fault)
        cdef Py_ssize_t bad, nnz = ix.shape[0]
        cdef int what = 0
        with nogil:
            bad = _csr_fault(&ip[0], &ix[0] if nnz else NULL, &dv[0] if nnz else NULL, n,
                             self.d, nnz, &what)
        if bad >= 0:
            _csr_error("X", what, bad, X, self.d)
        return 0

    cdef object _learn_sparse(self, object X, object y, object sw, object preds):
        # A CSR block (single mode): checked whole, then the sparse loop
        cdef Py_ssize_t n = X.shape[0], done = 0, row = -1, count, nnz, i, rmax = 0
        cdef int code, prev, noncross = <int> _NONCROSSING[self._settings["noncrossing"]]
        cdef bint logging
        cdef Lin c
        cdef Sp sp
        cdef Poll pl
        cdef const int[::1] ip
        cdef const int[::1] ix
        cdef const double[::1] dv
        cdef const double[::1] yv
        cdef const double[::1] swv
        cdef const double *swp = NULL
        cdef const double[::1] etav
        cdef const double *etas = NULL
        cdef double[::1] alarms
        cdef double[:, ::1] pv
        cdef double *po = NULL
        if self.mode != MODE_SINGLE:
            raise TypeError(f"X: sparse rows are learnt in mode 'single' only (a batch step "
                            f"is dense); {self._name()} is in mode "
                            f"{self._settings['mode']!r}: pass X.toarray()")
        self._check_target(y, sw, n)
        ip, ix, dv = self._csr_arrays(X, n, "X", False)
        if preds is not None and (not self.several or type(preds) is not np.ndarray or
                                  preds.dtype != np.float64 or preds.shape != (n, self.m)
                                  or not preds.flags.c_contiguous or not preds.flags.writeable):
            raise ValueError(f"predictions must be None or a writable float64 array of shape "
                             f"({n}, {self.m}) (several taus)")
        if n == 0:
            return 0
        if self.has_rs:
            # inference keeps d x d sums: the rows go dense (their cost is the
            # sums' O(d^2) anyway), up to a size
            if self.d > SPARSE_INFERENCE_MAX:
                raise ValueError(_INFERENCE_REFUSAL.format(d=self.d, most=SPARSE_INFERENCE_MAX))
            self._csr_refuse(X, ip, ix, dv, n)     # (the rows were not checked: toarray
                                                   # would add up repeated columns)
            return self._learn_single(np.ascontiguousarray(X.toarray()), y, sw, preds)
        self._check_scaler(SC_SPARSE)
        y = np.ascontiguousarray(y)
        yv = y
        if sw is not None:
            sw = np.ascontiguousarray(sw)
            swv = sw
            swp = &swv[0]
        if preds is not None:
            pv = preds
            po = &pv[0, 0]
        for i in range(n):
            rmax = max(rmax, ip[i + 1] - ip[i])
        nnz = ip[n]
        self._grow_window(0, rmax)
        if self.P[0].kind == KIND_ARRAY:
            count = n if sw is None else int(np.count_nonzero(sw))
            etav = user_stepsizes(self._schedule, int(self._S(self._live).n_updates), count) \
                if count else np.zeros(1)
            etas = &etav[0]
        alarms = np.zeros(self._alarm_room(n, sw) + 1)
        prev = self._to_rep(True)
        logging = prev < 0
        self._sp(&sp, self._live, logging)
        self._room(&sp, nnz * self.m if logging else 0, rmax)
        if logging:
            self._snap_small(self._live, True)
        self._set_scaler(self._live, SC_SPARSE)
        self._lin(&c, self._live)
        c.alarms = &alarms[0]
        c.dcap = alarms.shape[0]
        poll_init(&pl, &_hook)
        self._inplace = True
        with nogil:
            if self.m > 1:
                code = sparse_multi_rows(&c, &sp, &ip[0], &ix[0] if nnz else NULL,
                                         &dv[0] if nnz else NULL, n, &yv[0], swp, noncross, po,
                                         &pl, &done, &row)
            else:
                code = sparse_single_rows(&c, &sp, &ip[0], &ix[0] if nnz else NULL,
                                          &dv[0] if nnz else NULL, n, &yv[0], swp, etas, &pl,
                                          &done, &row)
        self._inplace = False
        if code != OK:
            # a bad row (its columns, its values) anywhere in the block
            # refuses the whole call, before an interrupt or a numerical
            # failure: as if the block had been checked first
            try:
                self._csr_refuse(X, ip, ix, dv, n)
            except ValueError:
                self._undo(prev, &sp, True)
                raise
        if code == OK or code == ERR_INTERRUPTED:
            self._add_alarms(alarms, c.n_alarm)
            if code == ERR_INTERRUPTED:
                _reraise(pending_exception(), self._name(), done, n, "rows", self._n_seen())
            return n
        self._undo(prev, &sp, True)
        if row >= 0:
            self._raise(code, np.asarray(X[row].toarray()).ravel(), float(y[row]),
                        1.0 if sw is None else float(sw[row]), f"row {row} of this call")
        self._raise(code, None, 0.0, 1.0, None)

    cdef void _undo(self, int prev, Sp *sp, bint window) noexcept:
        # a failed sparse call: back to the block before a conversion, or the
        # live block's changes undone
        if prev >= 0:
            self._live = prev
        else:
            self._restore_small(self._live, window, sp)

    cdef int _check_target(self, object y, object sw, Py_ssize_t n) except -1:
        if type(y) is not np.ndarray or y.dtype != np.float64 or y.ndim != 1:
            raise TypeError(f"y must be a float64 ndarray of shape ({n},), got "
                            f"{type(y).__name__} {getattr(y, 'dtype', '')}")
        if y.shape[0] != n:
            raise ValueError(f"y must have {n} values (X's rows), got {y.shape[0]}")
        if sw is not None:
            if type(sw) is not np.ndarray or sw.dtype != np.float64 or sw.ndim != 1:
                raise TypeError("sample_weight must be None or a float64 ndarray")
            if sw.shape[0] != n:
                raise ValueError(f"sample_weight must have {n} values (X's rows), got "
                                 f"{sw.shape[0]}")
            if not (np.isfinite(sw).all() and (sw >= 0).all()):
                bad = int(np.flatnonzero(~(np.isfinite(sw) & (sw >= 0)))[0])
                raise ValueError(f"sample_weight must be finite and non-negative, got "
                                 f"{sw[bad]!r} at row {bad}")
        return 0

    cdef int _sparse_row(self, object x, str name) except -1:
        # x (a hashed dict, or a one-row sparse matrix) into self._row
        cdef const int[::1] ix
        cdef const double[::1] dv
        cdef Py_ssize_t k, t
        if not self._row_ok:
            hash_row_init(&self._row)
            self._row_ok = True
        if type(x) is dict:
            hash_dict_row(&self._row, <dict> x, self.d, True, name)
            return 0
        if getattr(x, "format", None) != "csr":
            x = x.tocsr()
        if x.shape[0] != 1:
            raise ValueError(f"{name} must be one row, got a sparse matrix of shape {x.shape}")
        if x.indices.dtype == np.int64 and (x.shape[1] < 2 ** 31):
            # (one row: 32-bit columns whenever the matrix has fewer columns)
            x = x.copy()
            x.indices = x.indices.astype(np.int32)
            x.indptr = x.indptr.astype(np.int32)
        ip, ix, dv = self._csr_arrays(x, 1, name)
        k = ix.shape[0]
        _reserve_row(&self._row, k)
        for t in range(k):
            self._row.idx[t] = ix[t]
            self._row.val[t] = dv[t]
        self._row.k = k
        return 0

    cdef int _learn_one_sparse(self, double yv, double wv, object x) except -1:
        # One sparse row (self._row) in single mode: O(nnz), in place with a
        # log, or on a converted block; nothing of it left if it fails.
        cdef int prev, code
        cdef int ip[2]
        cdef Lin c
        cdef Sp sp
        cdef Poll pl
        cdef double eta_user = 0.0
        cdef double *etas = NULL
        cdef double alarm = 0.0
        cdef Py_ssize_t k = self._row.k, done = 0, row = -1
        if not (wv >= 0 and wv <= DBL_MAX):
            raise ValueError(f"weight must be finite and >= 0, got {wv!r}")
        if self.has_rs:
            if self.d > SPARSE_INFERENCE_MAX:
                raise ValueError(_INFERENCE_REFUSAL.format(d=self.d, most=SPARSE_INFERENCE_MAX))
            return self._learn_row(self._dense_of_row(), yv, wv, x)
        if not (yv - yv == 0):
            raise ValueError(f"y must be finite, got {yv!r}")
        self._check_scaler(SC_SPARSE)
        if self.P[0].kind == KIND_ARRAY and wv != 0:
            eta_user = user_stepsizes(self._schedule, int(self._S(self._live).n_updates), 1)[0]
            etas = &eta_user
        self._grow_window(0, k)
        prev = self._to_rep(True)
        self._sp(&sp, self._live, prev < 0)
        self._room(&sp, k * self.m if prev < 0 else 0, k)
        if prev < 0:
            self._snap_small(self._live, False)
        self._set_scaler(self._live, SC_SPARSE)
        self._lin(&c, self._live)
        c.alarms = &alarm
        c.dcap = 1
        ip[0] = 0
        ip[1] = <int> k
        poll_quiet(&pl, &_hook)
        if self.m > 1:
            code = sparse_multi_rows(&c, &sp, ip, self._row.idx, self._row.val, 1, &yv,
                                     &wv if wv != 1.0 else NULL,
                                     <int> _NONCROSSING[self._settings["noncrossing"]], NULL,
                                     &pl, &done, &row)
        else:
            code = sparse_single_rows(&c, &sp, ip, self._row.idx, self._row.val, 1, &yv,
                                      &wv if wv != 1.0 else NULL, etas, &pl, &done, &row)
        if code != OK:
            self._undo(prev, &sp, False)
            self._raise(code, np.asarray(<double[:self.d]> self._dense_of_row()).copy(), yv,
                        wv, "this row")
        if c.n_alarm:
            self._drift_rows = np.append(self._drift_rows, alarm)
        return 0

    cdef const double *_dense_of_row(self) noexcept:
        # self._row spread over the work row (O(n_features): the rare paths)
        cdef double *out = self._xrow()
        cdef Py_ssize_t t
        memset(out, 0, self.d * sizeof(double))
        for t in range(self._row.k):
            out[self._row.idx[t]] = self._row.val[t]
        return out

    cdef double _coef_at(self, Py_ssize_t q, Py_ssize_t j) noexcept:
        # coefficient j of quantile q as predictions use it, without reading
        # the other coordinates (the lazy average, the sparse scaler)
        cdef double *blk = self._blk[self._live]
        cdef Py_ssize_t base = q * self.ld
        cdef const double *ssc = blk + self.o_sc if self.has_sc and \
            blk[self.o_hdr + H_SC] == SC_SPARSE else NULL
        if self._averaged(q):
            if self._lazy_rep(self._live):
                return lazy_avg_at(blk + self.o_W + base, blk + self.o_Wbar + base,
                                   blk + self.o_T + base, (<LazyRec *> (blk + self.o_lz)) + q,
                                   ssc, self.d, j, self._S(self._live)[q].n_avg)
            return blk[self.o_Wbar + base + j]
        if ssc != NULL:
            return blk[self.o_W + base + j] / sparse_sd(ssc, self.d, j)
        return blk[self.o_W + base + j]

    cdef bint _sparse_ok(self) noexcept:
        # sparse predictions at O(nnz): not with the centred scaler's iterate
        # (its intercept takes every feature's mean)
        return not (self.has_sc and self._sc_kind() == SC_CENTRED and not self._averaged(0))

    cdef object _predict_sparse_row(self):
        # the prediction(s) for self._row
        cdef Py_ssize_t q, t
        cdef double acc
        cdef double[::1] res
        if not self._sparse_ok():
            return self._predict_dense_row(self._dense_of_row())
        if not self.several:
            acc = 0.0
            for t in range(self._row.k):
                acc += self._row.val[t] * self._coef_at(0, self._row.idx[t])
            return acc + self._intercept_of(0)
        res = np.empty(self.m)
        for q in range(self.m):
            acc = 0.0
            for t in range(self._row.k):
                acc += self._row.val[t] * self._coef_at(q, self._row.idx[t])
            res[q] = acc + self._intercept_of(q)
        _sort_small(&res[0], self.m)
        return np.asarray(res)

    cdef object _predict_sparse(self, object X):
        # predictions for a CSR block at O(nnz m)
        cdef Py_ssize_t n = X.shape[0], i, q, t
        cdef double acc
        cdef const int[::1] ip
        cdef const int[::1] ix
        cdef const double[::1] dv
        cdef double[:, ::1] out
        ip, ix, dv = self._csr_arrays(X, n, "X")
        if not self._sparse_ok():
            return self._predict_locked(np.ascontiguousarray(X.toarray()))
        res = np.empty((n, self.m))
        out = res
        for i in range(n):
            for q in range(self.m):
                acc = 0.0
                for t in range(ip[i], ip[i + 1]):
                    acc += dv[t] * self._coef_at(q, ix[t])
                out[i, q] = acc + self._intercept_of(q)
            if self.m > 1:
                _sort_small(&out[i, 0], self.m)
        return res if self.several else res[:, 0]


    # batch mode ---------------------------------------------------------------
    cdef object _learn_batch(self, object X, object y, object sw, object batch_size):
        # The virtual stream is the rows waiting from earlier calls, then X.
        # The head completes the waiting rows' last block with X's first h
        # rows (a batch_size lowered while rows wait gives several blocks);
        # the rest of X goes down as it is (no copy); what is short of a block
        # waits for the next call.
        from streamfit._validation import check_matrix, check_vector
        cdef Py_ssize_t n = X.shape[0], k, block, h = 0, nh, n_full, first_waiting
        cdef Py_ssize_t done = 0, row = -1, processed = 0, updates
        cdef int spare = 1 - self._live, code = OK
        cdef Lin c
        cdef Poll pl
        cdef BlockWork bw
        cdef const double[:, ::1] xv
        cdef const double[::1] yv
        cdef const double[::1] wv
        cdef const double[::1] etav
        cdef const double *wp
        cdef Py_ssize_t n_etas
        X = np.ascontiguousarray(X, dtype=np.float64)
        pending = self._pending
        pX, py, pw = pending if pending is not None else (np.zeros((0, self.d)), np.zeros(0),
                                                          None)
        k = pX.shape[0]
        block = batch_size or self._settings["batch_size"] or (k + n)
        parts = []                  # (X, y, w, index in the call's X of the part's first row)
        rest = None                 # the head's rows short of a block (X exhausted)
        if k:
            h = min(n, (k + block - 1) // block * block - k)   # (ceil: C division)
            head_X = np.concatenate([pX, X[:h]])
            head_y = np.concatenate([py, y[:h]])
            head_w = _join_weights([(k, pw), (h, None if sw is None else sw[:h])])
            nh = head_X.shape[0] // block * block
            if nh:
                parts.append((head_X[:nh], head_y[:nh], _rows(head_w, 0, nh), -k))
            if nh < head_X.shape[0]:
                rest = (head_X[nh:], head_y[nh:], _rows(head_w, nh, None))
        n_full = (n - h) // block * block
        if n_full:
            parts.append((X[h:h + n_full], y[h:h + n_full], _rows(sw, h, h + n_full), h))
        # X rows that only wait are not seen by a loop in this call: check them now
        first_waiting = 0 if rest is not None else h + n_full
        if first_waiting < n:
            check_matrix(X[first_waiting:], "X")
            check_vector(y[first_waiting:], n - first_waiting, "y")
        updates = sum(p[0].shape[0] // block if p[2] is None else _block_updates(p[2], block)
                      for p in parts)
        etas = user_stepsizes(self._schedule, int(self._S(self._live).n_updates), updates) \
            if self.P[0].kind == KIND_ARRAY and updates else np.zeros(0)
        if parts:
            self._grow_window(block)
            spare = 1 - self._live
        memcpy(self._blk[spare], self._blk[self._live], self._size * sizeof(double))
        self._lin(&c, spare)
        if parts and block_work_init(&bw, block, self.d, self.wcap) != OK:
            raise MemoryError(f"{self._name()}: a work space for a batch of {block} rows "
                              "could not be allocated; the state was left as it was")
        exc = None
        bad = None
        try:
            poll_init(&pl, &_hook)
            for part_X, part_y, part_w, first in parts:
                xv = part_X
                yv = part_y
                if part_w is not None:
                    wv = part_w
                etav = etas if etas.shape[0] else np.zeros(1)
                n_etas = etas.shape[0]
                wp = &wv[0] if part_w is not None else NULL
                with nogil:
                    code = batch_blocks(&c, &xv[0, 0], &yv[0], wp, xv.shape[0], block,
                                        &etav[0], n_etas, &bw, &pl, &done, &row)
                processed += done
                if code != OK:
                    bad = None if row < 0 else (row + first, part_X[row], part_y[row])
                    break
                etas = etas[done // block if part_w is None else
                            _block_updates(part_w, block):]
        finally:
            if parts:
                block_work_free(&bw)
        if code == OK and not all_finite(&c):
            code = ERR_NONFINITE
        elif code == ERR_INTERRUPTED and not all_finite(&c):
            pending_exception()
            code = ERR_NONFINITE
        if code == ERR_INTERRUPTED:
            exc = pending_exception()
            self._check_sums(spare)
            # waiting rows not yet applied still wait; X rows not applied are
            # not taken
            if processed < k:
                new_pending = (pX[processed:].copy(), py[processed:].copy(),
                               _rows(pw, processed, None))
            else:
                new_pending = None
            self._commit(spare)
            self._pending = new_pending
            _reraise(exc, self._name(), max(0, processed - k), n, "rows", self._n_seen())
        if code != OK:
            if bad is not None and bad[0] >= 0:
                self._raise(code, bad[1], bad[2], 1.0, f"row {bad[0]} of this call")
            if bad is not None:
                self._raise(code, bad[1], bad[2], 1.0, "a row held from an earlier call")
            self._raise(code, None, 0.0, 1.0, None)
        self._check_sums(spare)
        if rest is not None:
            new_pending = rest
        else:
            start = h + n_full
            new_pending = (X[start:].copy(), y[start:].copy(),
                           None if sw is None else sw[start:].copy())
            if new_pending[0].shape[0] == 0:
                new_pending = None
        self._commit(spare)
        self._pending = new_pending
        return n

    # storage mode ---------------------------------------------------------------
    cdef object _learn_storage(self, object X, object y, object sw):
        # All data so far, in arrays with spare capacity (amortised appends):
        # rows are checked, then written into the spare room only (rows already
        # stored are never written); the step runs on the spare state block.
        from streamfit._validation import check_matrix, check_vector
        cdef Py_ssize_t n = X.shape[0], n_old, stored, row = -1
        cdef int spare, code
        cdef bint stepped = False
        cdef Lin c
        cdef Poll pl
        cdef BlockWork bw
        cdef const double[:, ::1] xv
        cdef const double[::1] yv
        cdef const double[::1] wv
        cdef double eta = 0.0
        X = np.ascontiguousarray(X, dtype=np.float64)
        check_matrix(X, "X")
        check_vector(y, n, "y")
        store = self._store
        if store is None:
            store = [np.zeros((0, self.d)), np.zeros(0), None, 0]
        sX, sy, sw_old, n_old = store
        stored = n_old + n
        weighted = sw is not None or sw_old is not None
        cap = sX.shape[0]
        if stored > cap:
            cap = max(2 * cap, stored, 64)
            grown_X, grown_y = np.zeros((cap, self.d)), np.zeros(cap)
            grown_X[:n_old], grown_y[:n_old] = sX[:n_old], sy[:n_old]
            sX, sy = grown_X, grown_y
            if sw_old is not None:
                grown_w = np.zeros(cap)
                grown_w[:n_old] = sw_old[:n_old]
                sw_old = grown_w
        if weighted and (sw_old is None or sw_old.shape[0] != cap):
            grown_w = np.zeros(cap)
            grown_w[:n_old] = 1.0 if sw_old is None else sw_old[:n_old]
            sw_old = grown_w
        sX[n_old:stored] = X
        sy[n_old:stored] = y
        if sw_old is not None:
            sw_old[n_old:stored] = 1.0 if sw is None else sw
        new_store = [sX, sy, sw_old, stored]
        if sw is not None and not sw.any():
            # new rows of weight 0 teach nothing: no step, as if they were absent
            spare = 1 - self._live
            memcpy(self._blk[spare], self._blk[self._live], self._size * sizeof(double))
            self._S(spare).n_seen += n
            self._commit(spare)
            self._store = new_store
            return n
        try:
            if self.P[0].kind == KIND_ARRAY:
                eta = float(user_stepsizes(self._schedule,
                                           int(self._S(self._live).n_updates), 1)[0])
            self._grow_window(<Py_ssize_t> self.P[0].window)
            spare = 1 - self._live
            memcpy(self._blk[spare], self._blk[self._live], self._size * sizeof(double))
            self._lin(&c, spare)
            xv = sX[:stored]
            yv = sy[:stored]
            if sw_old is not None:
                wv = sw_old[:stored]
            if block_work_init(&bw, stored, self.d, self.wcap) != OK:
                raise MemoryError(f"{self._name()}: a work space for {stored} rows could not "
                                  "be allocated; the state was left as it was")
            poll_init(&pl, &_hook)
            with nogil:
                code = storage_step(&c, &xv[0, 0], &yv[0],
                                    &wv[0] if sw_old is not None else NULL, stored, n_old, eta,
                                    &bw, &pl, &stepped, &row)
            block_work_free(&bw)
        except BaseException:
            # leave the spare room as it was (zeros), whatever went wrong
            _zero_rows(sX, sy, sw_old, n_old, stored)
            raise
        if (code == OK or code == ERR_INTERRUPTED) and not all_finite(&c):
            if code == ERR_INTERRUPTED:
                pending_exception()
            code = ERR_NONFINITE
            stepped = False
        if code == ERR_INTERRUPTED and stepped:
            exc = pending_exception()
            self._commit(spare)
            self._store = new_store
            _reraise(exc, self._name(), n, n, "rows", self._n_seen())
        if code == ERR_INTERRUPTED:
            # before the step: nothing of the call is kept
            exc = pending_exception()
            _zero_rows(sX, sy, sw_old, n_old, stored)
            _reraise(exc, self._name(), 0, n, "rows", self._n_seen())
        if code != OK:
            _zero_rows(sX, sy, sw_old, n_old, stored)
            if row >= 0:
                i = row - n_old
                self._raise(code, X[i] if i >= 0 else sX[row], float(y[i] if i >= 0 else sy[row]),
                            1.0, f"row {i} of this call" if i >= 0 else
                            "a row held from an earlier call")
            self._raise(code, None, 0.0, 1.0, None)
        self._commit(spare)
        self._store = new_store
        return n

    # -- predictions ------------------------------------------------------------
    def predict(self, X):
        """Predictions for the rows of ``X`` (C-contiguous float64, shape (n,
        n_features)): shape (n,), or (n, m) with several taus (each row's m
        quantiles sorted: rearrangement). NaN or inf in X raises.

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.kernels import LinearSGD
        >>> LinearSGD(2, coef_init=[1.0, 2.0]).predict(np.ones((3, 2)))
        array([3., 3., 3.])
        """
        cdef Py_ssize_t d = self.d
        if _is_sparse(X):
            lock_enter(&self._lock, "LinearSGD")
            try:
                self._torn_check()
                return self._predict_sparse(X)
            finally:
                lock_leave(&self._lock)
        if type(X) is not np.ndarray or X.dtype != np.float64 or X.ndim != 2:
            raise TypeError(f"X must be a float64 ndarray of shape (n, {d}) or a "
                            "scipy.sparse CSR matrix")
        if X.shape[1] != d:
            raise ValueError(f"X has {X.shape[1]} features, but {self._name()} is expecting "
                             f"{d} features as input.")
        if not X.flags.c_contiguous:
            X = np.ascontiguousarray(X)
        lock_enter(&self._lock, "LinearSGD")
        try:
            self._torn_check()
            return self._predict_locked(X)
        finally:
            lock_leave(&self._lock)

    cdef object _predict_locked(self, object X):
        # predict's body for a checked C-contiguous float64 X (the lock held)
        cdef Py_buffer xb, ob
        cdef const double *xp
        cdef const double *cp
        cdef const double *bp
        cdef double *op
        cdef double b0
        cdef Py_ssize_t n = X.shape[0], m = self.m, d = self.d, bad = -1
        if self.several:
            out_arr = np.empty((n, m))
        else:
            out_arr = np.empty(n)
        if n == 0:
            return out_arr
        # the solution's coefficients, as predict_one takes them (one tau:
        # read in place, no arrays made for a one-row call)
        if m == 1:
            cp = self._coef_ptr(0)
            b0 = self._intercept_of(0)
            bp = &b0
        else:
            coefs, bs = self._solution_arrays()
            cp = _ptr2(coefs)
            bp = _ptr1(bs)
        xp = _c_rows(X, &xb, False)
        op = <double *> _c_rows(out_arr, &ob, True)
        if n * d * m < 65536:
            bad = _predict_rows(xp, n, d, m, cp, bp, op)
        else:
            with nogil:
                bad = _predict_rows(xp, n, d, m, cp, bp, op)
        PyBuffer_Release(&ob)
        PyBuffer_Release(&xb)
        if bad >= 0 and not np.isfinite(X[bad]).all():
            raise ValueError(f"X contains NaN or inf (row {bad}); every value must be "
                             "finite")
        return out_arr

    cdef tuple _solution_arrays(self):
        # (coef (m, d), intercepts (m,)): what predictions use (_coef_ptr)
        cdef Py_ssize_t q, d = self.d
        coef = np.empty((self.m, d))
        b = np.empty(self.m)
        cdef double[:, ::1] cv = coef
        cdef double[::1] bv = b
        cdef const double *src
        for q in range(self.m):
            src = self._coef_ptr(q)
            memcpy(&cv[q, 0], src, d * sizeof(double))
            bv[q] = self._intercept_of(q)
        return coef, b

    # -- read-only state ----------------------------------------------------------
    @property
    def coef(self):
        """The coefficients predictions use (the average once it runs, else
        the last iterate; on the original scale with ``scale="online"``): a
        copy, shape (n_features,), or (m, n_features) with several taus."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            coef = self._solution_arrays()[0]
            return coef if self.several else coef[0]
        finally:
            lock_leave(&self._lock)

    @property
    def intercept(self):
        """The intercept predictions use: a float, or (m,) with several taus."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            b = self._solution_arrays()[1]
            return b if self.several else float(b[0])
        finally:
            lock_leave(&self._lock)

    @property
    def iterate(self):
        """(coef, intercept) of the last iterate (not averaged; on the scaled
        features with ``scale="online"``): copies."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            W = np.array(self._array(self.o_W, self.ld)[:, :self.d])
            b = np.array([self._S(self._live)[q].intercept for q in range(self.m)])
            return (W, b) if self.several else (W[0], float(b[0]))
        finally:
            lock_leave(&self._lock)

    cdef object _array(self, Py_ssize_t offset, Py_ssize_t width):
        # a (m, width) view of a section of the live block (callers copy)
        return np.asarray(<double[:self.m, :width]> (self._blk[self._live] + offset))

    cdef object _records(self):
        # the live state records as a structured array (a copy)
        return np.asarray(<double[:self.m * NS]> self._blk[self._live]).copy().view(
            STATE_DTYPE)

    @property
    def n_samples_seen(self):
        """Rows received (rows waiting for a full batch included, whatever
        their weight)."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            return self._n_seen()
        finally:
            lock_leave(&self._lock)

    @property
    def n_updates(self):
        """Updates taken (several taus: the first quantile's)."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            return int(self._S(self._live).n_updates)
        finally:
            lock_leave(&self._lock)

    @property
    def cumulative_loss(self):
        """Prequential loss: a float, or (m,) with several taus."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            loss = np.array([self._S(self._live)[q].loss for q in range(self.m)])
            return loss if self.several else float(loss[0])
        finally:
            lock_leave(&self._lock)

    @property
    def schedule_state(self):
        """The schedule's phase and estimates (a dict; a list of them with
        several taus)."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            out = [{"phase": int(s["phase"]), "stepsize": float(s["last_eta"]),
                    "t_switch": int(s["t_switch"]), "d0": float(s["d0"]),
                    "b0": float(s["b0"]), "cl": float(s["cl"]),
                    "restarts": int(s["n_restarts"])} for s in self._records()]
            return out if self.several else out[0]
        finally:
            lock_leave(&self._lock)

    @property
    def drift_rows(self):
        """Rows (0-based, over all calls) where the drift test restarted the
        average: an int64 array (a copy)."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            return self._drift_rows.astype(np.int64)
        finally:
            lock_leave(&self._lock)

    @property
    def settings(self):
        """The checked settings (a dict; a copy)."""
        return dict(self._settings)

    @property
    def n_quantiles(self):
        """m: the number of taus (1 for one tau or least squares)."""
        return self.m

    @property
    def warm_up_rows(self):
        """The statistical schedule's warm-up rows (n_warmup), else 0."""
        return int(self.P[0].n_warmup) if self.P[0].kind == KIND_STATISTICAL else 0

    def random_scaling(self):
        """(z, V): the averaged iterate (coefficients, then the intercept) and
        the random-scaling matrix V_k / k (Lee, Liao, Seo & Shin 2022), one
        per quantile with several taus. Needs ``inference=True``."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            if not self.has_rs:
                raise AttributeError(
                    "no random-scaling sums are kept: set inference=True (with "
                    "average=True) before fitting for conf_int and coef_covariance_")
            rs = np.array(self._array(self.o_rs, self.rlen))
            recs = self._records()
            wbar = np.array(self._array(self.o_Wbar, self.ld)[:, :self.d])
            zs, Vs = [], []
            for q in range(self.m):
                k = float(recs[q]["n_avg"])
                if k < 2:
                    which = f" of tau={float(self.P[q].tau):g}" if self.several else ""
                    raise ValueError(
                        f"the average{which} holds {int(k)} iterate(s) (it starts once the "
                        "statistical schedule has settled in its last phase): random scaling "
                        "needs at least 2; learn from more rows first")
                z = wbar[q]
                if self.P[0].fit_intercept != 0:
                    z = np.append(z, recs[q]["intercept_avg"])
                zs.append(z)
                Vs.append(random_scaling_matrix(rs[q], z, k))
            if not self.several:
                return zs[0], Vs[0]
            return np.array(zs), np.array(Vs)
        finally:
            lock_leave(&self._lock)

    # -- settings mid-stream ------------------------------------------------------
    def configure(self, **changes):
        """Change settings mid-stream (the estimators' ``set_params`` between
        calls). ``tau``, ``mode``, ``fit_intercept``, ``loss`` and ``scale``
        cannot change (the learnt state belongs to them: ValueError naming
        the setting); ``schedule``, ``batch_size``, ``average``,
        ``inference``, ``drift`` and ``noncrossing`` take effect at the next
        call (see :class:`~streamfit.OnlineQuantileRegressor`). Returns
        whether anything changed.

        Examples
        --------
        >>> from streamfit.kernels import LinearSGD
        >>> model = LinearSGD(2)
        >>> model.configure(average=True)
        True
        >>> model.configure(tau=0.9)
        Traceback (most recent call last):
        ...
        ValueError: tau changed from 0.5 to 0.9 since the first call; ...
        """
        lock_enter(&self._lock, "LinearSGD")
        try:
            return self._configure(changes)
        finally:
            lock_leave(&self._lock)

    cdef bint _configure(self, dict changes) except -1:
        cdef Py_ssize_t q
        cdef SGDState *S
        old = self._settings
        unknown = set(changes) - set(old) | ({"n_features"} & set(changes))
        if unknown:
            raise TypeError(f"configure: unknown or fixed settings {sorted(unknown)}")
        merged = dict(old)
        merged.update(changes)
        settings, resolved = check_settings(
            merged["n_features"], merged["tau"], merged["loss"], merged["mode"],
            merged["schedule"], merged["batch_size"], merged["average"],
            merged["fit_intercept"], merged["inference"], merged["scale"], merged["drift"],
            merged["noncrossing"], merged["hashing"])
        for name in ("tau", "mode", "fit_intercept", "loss", "hashing"):
            if settings[name] != old[name]:
                before, now = old[name], settings[name]
                if name == "tau" and isinstance(before, tuple):
                    before = list(before)
                if name == "tau" and isinstance(now, tuple):
                    now = list(now)
                raise ValueError(f"{name} changed from {before!r} to {now!r} since the first "
                                 f"call; the learnt state belongs to {name}={before!r}. Set "
                                 "it back, or call fit() to start afresh")
        if settings["scale"] != old["scale"]:
            raise ValueError(f"scale changed to {settings['scale']!r} since the first call; "
                             "the learnt coefficients are on the old scale. Set it back, or "
                             "call fit() to start afresh")
        p = _param_records(settings, resolved)
        old_p = np.asarray(<SGDParams[:self.m]> self.P).copy()
        if _same_schedule(old["schedule"], settings["schedule"]) and \
                all(settings[k] == old[k] for k in settings if k != "schedule") and \
                p.tobytes() == old_p.tobytes():
            self._schedule = resolved
            self._settings = settings
            return False
        # the changes, applied to the live state (between calls: nothing runs),
        # the average first back in its dense representation (its epochs
        # assume the settings they ran under)
        if self._lazy_rep(self._live):
            self._convert(self._live, self._live, False)
        S = self._S(self._live)
        recs = self._records()
        for q in range(self.m):
            if p["kind"][q] == KIND_STATISTICAL and old_p["kind"][q] != KIND_STATISTICAL:
                # the statistical schedule takes over: it warms up afresh from
                # the current iterate
                for name in _SCHEDULE_FIELDS:
                    recs[q][name] = 0.0
            if p["average"][q] and not old_p["average"][q]:
                recs[q]["n_avg"] = 0.0        # the average restarts
            if p["drift"][q] != old_p["drift"][q]:
                recs[q]["dr_n"] = 0.0         # the test starts afresh
                recs[q]["dr_cusum"] = 0.0
            if settings["inference"] and not old["inference"]:
                recs[q]["n_avg"] = 0.0        # the averages restart with the sums
        memcpy(S, _ptr1(np.ascontiguousarray(recs.view(np.float64))),
               self.m * NS * sizeof(double))
        memcpy(self.P, self._params_bytes(p), self.m * sizeof(SGDParams))
        self._settings = settings
        self._schedule = resolved
        plug = self._plug_rule()
        self._max_need = self._window_need(0, self.d)
        if settings["inference"] != self.has_rs or plug != self.has_plug:
            self._layout(max(self.wcap, self._window_need(0)), settings["inference"], plug,
                         self.has_sc)
            if plug and not self.has_plug:
                pass
        else:
            self._grow_window(0)
        if plug:
            # means started mid-average would begin from zeros: they restart
            # with the average
            for q in range(self.m):
                if self.P[q].average != 0 and not old["average"]:
                    memset(self._blk[self._live] + self.o_plug + q * 2 * self.d, 0,
                           2 * self.d * sizeof(double))
        return True

    # -- copies and pickling ----------------------------------------------------
    def copy(self):
        """An independent copy (nothing shared with this object)."""
        lock_enter(&self._lock, "LinearSGD")
        try:
            state = self._to_state(False)
        finally:
            lock_leave(&self._lock)
        new = _from_state(state, False)
        new.feature_names = self.feature_names
        new.source = self.source
        return new

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        lock_enter(&self._lock, "LinearSGD")
        try:
            return (_rebuild, (self._to_state(False),))
        finally:
            lock_leave(&self._lock)

    def to_state(self):
        """The whole state as plain data: a dict of str, int, float, bool,
        None, lists and float64 arrays (what ``streamfit.save`` writes).
        ``LinearSGD.from_state`` checks every field of it and rebuilds.

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.kernels import LinearSGD
        >>> a = LinearSGD(2, schedule="constant")
        >>> a.learn_one([1.0, 0.5], 2.0)
        >>> b = LinearSGD.from_state(a.to_state())
        >>> bool(np.array_equal(a.coef, b.coef))
        True
        """
        lock_enter(&self._lock, "LinearSGD")
        try:
            return self._to_state(True)
        finally:
            lock_leave(&self._lock)

    @staticmethod
    def from_state(state):
        """Rebuild a learner from ``to_state()``'s dict, checking every field
        (ValueError naming the field for anything off: a corrupted or
        foreign state is never used)."""
        return _from_state(state, True)

    cdef dict _to_state(self, bint plain):
        cdef Py_ssize_t d = self.d
        settings = dict(self._settings)
        if isinstance(settings["tau"], tuple):
            settings["tau"] = list(settings["tau"])
        settings["schedule"] = _schedule_to_plain(settings["schedule"]) if plain else \
            _copy.deepcopy(settings["schedule"])
        fill = max(int(max(self._S(self._live)[q].fill for q in range(self.m))), 0)
        pending = self._pending
        store = self._store
        names = self.feature_names
        lazy = self._lazy_rep(self._live)
        kind = self._sc_kind()
        return {
            "format": FORMAT,
            "settings": settings,
            "state_fields": list(STATE_FIELDS),
            "records": np.array(self._array(0, NS)),
            "coef": np.array(self._array(self.o_W, self.ld)[:, :d]),
            "coef_avg": None if lazy else np.array(self._array(self.o_Wbar, self.ld)[:, :d]),
            # sparse rows' lazy average (_qr_sparse.pxd): its records, u (or
            # the dense average's value where the stamp is 0), the stamps and
            # the plug-in intercept's X and v, in place of coef_avg and plug_in
            "lazy": None if not lazy else {
                "records": np.array(self._array(self.o_lz, LZ_LEN)),
                "u": np.array(self._array(self.o_Wbar, self.ld)[:, :d]),
                "stamps": np.array(self._array(self.o_T, self.ld)[:, :d]),
                "plug": np.array(self._array(self.o_plug, 2 * d)) if self.has_plug else None},
            "scale_kind": None if not self.has_sc or kind == SC_NONE else
            ("sparse" if kind == SC_SPARSE else "centred"),
            "window": np.array(self._array(self.o_win, self.wcap)[:, :min(fill, self.wcap)])
            if self.wcap else np.zeros((self.m, 0)),
            "sums": np.array(self._array(self.o_rs, self.rlen)) if self.has_rs else None,
            "plug_in": np.array(self._array(self.o_plug, 2 * d)) if self.has_plug and not lazy
            else None,
            "scaler": np.array(self._array(self.o_sc, 2 * d + 1)[0]) if self.has_sc else None,
            "pending_X": None if pending is None else pending[0].copy(),
            "pending_y": None if pending is None else pending[1].copy(),
            "pending_w": None if pending is None or pending[2] is None else pending[2].copy(),
            "store_X": None if store is None else store[0][:store[3]].copy(),
            "store_y": None if store is None else store[1][:store[3]].copy(),
            "store_w": None if store is None or store[2] is None else
            store[2][:store[3]].copy(),
            "drift_rows": self._drift_rows.copy(),
            "feature_names": None if names is None else [str(v) for v in names],
            "feature_keys": _keys_of(self.feature_index, self.d, plain),
            "refuse_new": bool(self.refuse_new),
        }

    cdef int _load(self, dict st) except -1:
        # the arrays of a checked state dict into the live block
        cdef Py_ssize_t q, d = self.d, fill
        cdef double *blk = self._blk[self._live]
        lazy = st["lazy"]
        _copy_into(blk, st["records"], self.m * NS)
        for q in range(self.m):
            _copy_into(blk + self.o_W + q * self.ld, st["coef"][q], d)
            _copy_into(blk + self.o_Wbar + q * self.ld,
                       st["coef_avg"][q] if lazy is None else lazy["u"][q], d)
            fill = st["window"].shape[1]
            if fill:
                _copy_into(blk + self.o_win + q * self.wcap, st["window"][q], fill)
            if self.has_rs:
                _copy_into(blk + self.o_rs + q * self.rlen, st["sums"][q], self.rlen)
            if self.has_plug:
                _copy_into(blk + self.o_plug + q * 2 * d,
                           st["plug_in"][q] if lazy is None else lazy["plug"][q], 2 * d)
            if lazy is not None:
                _copy_into(blk + self.o_T + q * self.ld, lazy["stamps"][q], d)
        if lazy is not None:
            _copy_into(blk + self.o_lz, lazy["records"], self.m * LZ_LEN)
        blk[self.o_hdr + H_REP] = REP_DENSE if lazy is None else REP_LAZY
        blk[self.o_hdr + H_SC] = {None: SC_NONE, "centred": SC_CENTRED,
                                  "sparse": SC_SPARSE}[st["scale_kind"]]
        if self.has_sc:
            _copy_into(blk + self.o_sc, st["scaler"], 2 * d + 1)
        if st["pending_X"] is not None and st["pending_X"].shape[0]:
            self._pending = (_owned(st["pending_X"]), _owned(st["pending_y"]),
                             None if st["pending_w"] is None else _owned(st["pending_w"]))
        if st["store_X"] is not None:
            n = st["store_X"].shape[0]
            self._store = [_owned(st["store_X"]), _owned(st["store_y"]),
                           None if st["store_w"] is None else _owned(st["store_w"]), n]
        self._drift_rows = _owned(st["drift_rows"])
        names = st["feature_names"]
        self.feature_names = None if names is None else np.asarray(names, dtype=object)
        keys = st["feature_keys"]
        self.feature_index = None if keys is None else {k: j for j, k in enumerate(keys)}
        self.refuse_new = st["refuse_new"]
        return 0

    cdef int _check_and_load(self, dict st) except -1:
        # Every array of a state dict against this learner's settings (dtype,
        # shape, finiteness), the records' counters and codes against the
        # ranges the loops rely on, then into the live block. Sizes are
        # checked against the arrays actually present before anything of a
        # declared size is allocated.
        from streamfit._validation import _check_real_array
        cdef Py_ssize_t m = self.m, d = self.d, q, fmax = 0
        cdef const double[:, ::1] rv
        cdef const SGDState *R
        records = _loaded_array(st, "records", (m, NS), finite=False)
        _loaded_array(st, "coef", (m, d))
        lazy = st["lazy"]
        if lazy is None:
            _loaded_array(st, "coef_avg", (m, d))
        else:
            self._check_lazy(st, lazy)
        window = st["window"]
        if not (isinstance(window, np.ndarray) and window.dtype == np.float64 and
                window.ndim == 2 and window.shape[0] == m):
            raise ValueError(f"state field 'window' must be a float64 array of shape ({m}, k) "
                             "(a corrupted or foreign state?)")
        _loaded_array(st, "window", window.shape)
        rv = np.ascontiguousarray(records)
        R = <const SGDState *> &rv[0, 0]
        for q in range(m):
            if not (R[q].fill >= 0 and R[q].fill <= window.shape[1] and
                    R[q].fill == <double> <Py_ssize_t> R[q].fill):
                raise ValueError(f"state record {q}: field 'fill' is {R[q].fill!r}, expected "
                                 f"an integer in [0, {window.shape[1]}] (the residuals saved "
                                 "with it); it was not used")
        _loaded_array(st, "sums", (m, self.rlen), optional=not self.has_rs)
        _loaded_array(st, "plug_in", (m, 2 * d), optional=not self.has_plug or lazy is not None)
        _loaded_array(st, "scaler", (2 * d + 1,), optional=not self.has_sc)
        kind = st["scale_kind"]
        if not (kind is None or (self.has_sc and isinstance(kind, str) and
                                 kind in ("centred", "sparse"))):
            raise ValueError(f"state field 'scale_kind' must be None, or 'centred' or "
                             f"'sparse' with scale='online', got {kind!r:.40} (a corrupted or "
                             "foreign state?)")
        for name, present in (("sums", self.has_rs),
                              ("plug_in", self.has_plug and lazy is None),
                              ("scaler", self.has_sc)):
            if (st[name] is not None) != present:
                raise ValueError(f"state field {name!r} must be {'an array' if present else 'None'}"
                                 " for these settings (a corrupted or foreign state?)")
        if self.has_sc and not (st["scaler"][0] >= 0 and (st["scaler"][1 + d:] >= 0).all()):
            raise ValueError("state field 'scaler': its weight and sums of squares must be >= 0")
        if self.has_sc and kind == "sparse" and not (st["scaler"][1:1 + d] >= 0).all():
            raise ValueError("state field 'scaler': the sparse scaler's weights must be >= 0")
        _check_rows(st, "pending", d, self.mode == MODE_BATCH)
        _check_rows(st, "store", d, self.mode == MODE_STORAGE)
        if not (0 <= R[0].n_drift <= 9e15 and
                R[0].n_drift == <double> <Py_ssize_t> R[0].n_drift):
            raise ValueError(f"state record 0: field 'n_drift' is {R[0].n_drift!r}, expected a "
                             "non-negative integer (a corrupted or foreign state?)")
        rows = st["drift_rows"]
        _loaded_array(st, "drift_rows", (rows.shape[0] if isinstance(rows, np.ndarray)
                                         and rows.ndim == 1 else -1,))
        n_drift = -1
        if 0 <= R[0].n_drift <= rows.shape[0]:
            n_drift = <Py_ssize_t> R[0].n_drift
        if rows.shape[0] != n_drift or (n_drift and not (
                np.all(rows == np.floor(rows)) and rows[0] >= 0 and np.all(np.diff(rows) > 0)
                and rows[rows.shape[0] - 1] < R[0].n_seen)):
            raise ValueError("state field 'drift_rows' must hold one increasing row index of "
                             "the rows seen per alarm the records count (a corrupted or "
                             "foreign state?)")
        names = st["feature_names"]
        if names is not None and not (isinstance(names, list) and len(names) == d and
                                      all(isinstance(v, str) for v in names)):
            raise ValueError(f"state field 'feature_names' must be None or a list of {d} "
                             f"strings, got {names!r:.80}")
        keys = st["feature_keys"]
        if keys is not None and not (isinstance(keys, list) and len(keys) == d and
                                     len(set(map(_hashable, keys))) == d):
            raise ValueError(f"state field 'feature_keys' must be None or a list of {d} "
                             "distinct keys (a corrupted or foreign state?)")
        if type(st["refuse_new"]) is not bool:
            raise ValueError("state field 'refuse_new' must be True or False")
        # room for what the records hold, then the records' own check
        for q in range(m):
            fmax = max(fmax, <Py_ssize_t> R[q].fill)
        if fmax + 1 > self.wcap or (lazy is not None) != self.has_lazy:
            self._layout(max(fmax + 1, self.wcap), self.has_rs, self.has_plug, self.has_sc,
                         lazy is not None)
        memcpy(self._blk[self._live], R, m * NS * sizeof(double))
        self._grow_window(0, 0.0)
        self._max_need = self._window_need(0, self.d)
        self._check_records()
        if lazy is not None:
            for q in range(m):
                if lazy["records"][q, 1] != R[q].n_avg:
                    raise ValueError(f"state field 'lazy': record {q}'s n_ref "
                                     f"({lazy['records'][q, 1]!r}) must equal the average's "
                                     f"n_avg ({R[q].n_avg!r}) (a corrupted or foreign state?)")
        self._load(st)
        return 0

    cdef int _check_lazy(self, dict st, object lazy) except -1:
        # the lazy average's arrays: present only where the settings keep an
        # average outside the random-scaling sums; records, u, stamps (whole
        # epochs in [0, ep]) and the plug-in's X and v, every value finite
        cdef Py_ssize_t m = self.m, d = self.d
        if not (self.P[0].average != 0 and not self.has_rs):
            raise ValueError("state field 'lazy' must be None for these settings (no average "
                             "outside inference's sums; a corrupted or foreign state?)")
        if not (isinstance(lazy, dict) and set(lazy) == {"records", "u", "stamps", "plug"}):
            raise ValueError("state field 'lazy' must be None or a dict with the keys "
                             "['plug', 'records', 'stamps', 'u'] (a corrupted or foreign "
                             "state?)")
        sub = {f"lazy.{k}": v for k, v in lazy.items()}
        rec = _loaded_array(sub, "lazy.records", (m, LZ_LEN))
        u = _loaded_array(sub, "lazy.u", (m, d))
        stamps = _loaded_array(sub, "lazy.stamps", (m, d))
        _loaded_array(sub, "lazy.plug", (m, 2 * d), optional=not self.has_plug)
        if (lazy["plug"] is not None) != self.has_plug:
            raise ValueError(f"state field 'lazy.plug' must be "
                             f"{'an array' if self.has_plug else 'None'} for these settings "
                             "(a corrupted or foreign state?)")
        ep = rec[:, 0]
        if not (np.all(ep >= 1) and np.all(ep == np.floor(ep)) and np.all(ep < 2.0 ** 53)
                and np.all(rec[:, 1:3] >= 0) and np.all(rec[:, 2] <= rec[:, 1])
                and np.all(rec[:, 3] >= 0)):
            raise ValueError("state field 'lazy.records': each needs an epoch >= 1 (an "
                             "integer), n_ref >= N0 >= 0 and H >= 0 (a corrupted or foreign "
                             "state?)")
        if not (np.all(stamps >= 0) and np.all(stamps == np.floor(stamps)) and
                np.all(stamps <= ep[:, None])):
            raise ValueError("state field 'lazy.stamps' must hold whole epochs in [0, the "
                             "record's epoch] (a corrupted or foreign state?)")
        return 0

    cdef int _check_records(self) except -1:
        # every field of the loaded records against the ranges the loops rely
        # on (_records.pxd's check), and the filled windows finite
        cdef Py_ssize_t q, i
        cdef const SGDState *S = self._S(self._live)
        cdef const double *win
        for q in range(self.m):
            check_sgd_records(&S[q], &self.P[q], self.wcap, 1,
                              "state" if self.m == 1 else f"states[{q}]")
            win = self._blk[self._live] + self.o_win + q * self.wcap
            for i in range(min(<Py_ssize_t> S[q].fill, self.wcap)):
                if not (fabs(win[i]) <= DBL_MAX):
                    raise ValueError(f"window: value {i} of the residual window is "
                                     f"{win[i]!r}, expected finite (a corrupted or foreign "
                                     "state?); it was not used")
        return 0


cdef Py_ssize_t _predict_rows(const double *X, Py_ssize_t n, Py_ssize_t d, Py_ssize_t m,
                              const double *coef, const double *b,
                              double *out) noexcept nogil:
    # out[i, q] = x_i' coef_q + b_q (the loops' summation order), each row's
    # m values sorted; returns the first row whose prediction is not finite
    # (-1: none)
    cdef Py_ssize_t i, q, bad = -1
    cdef double v
    for i in range(n):
        for q in range(m):
            v = sf_dot(d, X + i * d, coef + q * d) + b[q]
            out[i * m + q] = v
            if bad < 0 and not (fabs(v) <= DBL_MAX):
                bad = i
        if m > 1:
            _sort_small(out + i * m, m)
    return bad


# Random-scaling inference keeps (d + 1)(d + 2) / 2 sums a quantile, updated
# at O(d^2) a row: sparse rows go dense for it (their O(d) is nothing beside
# that), up to this many features (2^12: 67 MB of sums a quantile, ~8 M
# operations a row); above it inference is refused for sparse input (conf_int
# needs only the sums' diagonal, which a lazily kept O(nnz) diagonal could
# give: not built).
SPARSE_INFERENCE_MAX = 4096
_INFERENCE_REFUSAL = (
    "X: inference=True keeps (d + 1)(d + 2) / 2 random-scaling sums, updated at O(d^2) a "
    "row, and this model has d = {d} features: sparse rows are taken with inference only "
    "up to d = {most} (streamfit.kernels.SPARSE_INFERENCE_MAX), where their cost is that "
    "of dense rows anyway. Set inference=False, or hash into at most {most} columns")


cdef Py_ssize_t _indptr_fault(const int *indptr, Py_ssize_t n, Py_ssize_t nnz) noexcept nogil:
    # _csr_fault's check of the index pointer alone: the first row whose
    # slice is not inside [0, nnz] in order (-1: none; n - 1 or 0 when the
    # ends are wrong)
    cdef Py_ssize_t i
    if indptr[0] != 0 or indptr[n] != nnz:
        return 0 if indptr[0] != 0 or n == 0 else n - 1
    for i in range(n):
        if indptr[i + 1] < indptr[i] or indptr[i + 1] > nnz:
            return i
    return -1


cdef Py_ssize_t _csr_fault(const int *indptr, const int *indices, const double *data,
                           Py_ssize_t n, Py_ssize_t d, Py_ssize_t nnz,
                           int *what) noexcept nogil:
    # The first row of a CSR block that breaks what the sparse loops rely on
    # (-1: none): what = 1 the index pointer, 2 a column outside [0, d), 3 a
    # column not above the one before it (unsorted), 4 a repeated column, 5
    # a value that is not finite.
    cdef Py_ssize_t i, t, a, b
    cdef int prev
    if indptr[0] != 0 or indptr[n] != nnz:
        what[0] = 1
        return 0 if indptr[0] != 0 or n == 0 else n - 1
    for i in range(n):
        a = indptr[i]
        b = indptr[i + 1]
        if b < a or b > nnz:
            what[0] = 1
            return i
        prev = -1
        for t in range(a, b):
            if indices[t] < 0 or indices[t] >= d:
                what[0] = 2
                return i
            if indices[t] <= prev:
                what[0] = 4 if indices[t] == prev else 3
                return i
            prev = indices[t]
            if not isfinite(data[t]):
                what[0] = 5
                return i
    return -1


def _csr_error(name, what, row, X, d):
    if what == 1:
        raise ValueError(f"{name}.indptr is not a valid CSR index pointer (it must start at 0, "
                         f"never decrease and end at nnz = {X.indices.shape[0]}; row {row})")
    cols = X.indices[X.indptr[row]:X.indptr[row + 1]]
    if what == 2:
        bad = [int(j) for j in cols if not 0 <= j < d]
        raise ValueError(f"{name}.indices: row {row} has column(s) {bad[:5]} outside "
                         f"[0, {d}) (negative or past n_features)")
    if what == 3:
        raise ValueError(f"{name}.indices: the columns of row {row} are not sorted; call "
                         f"{name}.sort_indices() first (the sparse loops read each row's "
                         "columns in increasing order)")
    if what == 4:
        dup = sorted({int(j) for j in cols if np.count_nonzero(cols == j) > 1})
        raise ValueError(f"{name}.indices: row {row} repeats column(s) {dup[:5]}; call "
                         f"{name}.sum_duplicates() first (a column holds one value)")
    vals = X.data[X.indptr[row]:X.indptr[row + 1]]
    bad = "NaN" if np.isnan(vals).any() else "inf"
    raise ValueError(f"{name} contains {bad} (row {row}); every value must be finite")


_issparse = None
# (a C global: `type(x) is np.ndarray` looks np.ndarray up on the module at
# every call, ~300 instructions, more than the rest of a learn_one row's checks)
cdef object _NDARRAY = np.ndarray


cdef bint _is_sparse(object x) except -1:
    # a scipy.sparse matrix or array (scipy.sparse imported on the first
    # call that is not a plain row)
    global _issparse
    if type(x) is _NDARRAY or type(x) is dict or type(x) is list or type(x) is tuple:
        return False
    if _issparse is None:
        from scipy.sparse import issparse
        _issparse = issparse
    return _issparse(x)


def hash_rows(rows, Py_ssize_t n_features, name="X"):
    """Dict rows hashed as scikit-learn's ``FeatureHasher(n_features,
    input_type="dict", alternate_sign=True)`` hashes them, in C: a CSR
    matrix (scipy.sparse.csr_array) of len(rows) rows and n_features columns
    (columns sorted in each row, features that collide added up). What a
    LinearSGD made with ``hashing=True`` reads a dict row as.

    Examples
    --------
    >>> from sklearn.feature_extraction import FeatureHasher
    >>> from streamfit._kernels._quantile import hash_rows
    >>> rows = [{"a": 1.0, "city": "Paris"}, {"b": -2.5, "été": 3}]
    >>> ours = hash_rows(rows, 2 ** 10)
    >>> theirs = FeatureHasher(2 ** 10).transform(rows)
    >>> bool((ours != theirs).nnz == 0)
    True
    """
    import scipy.sparse as sp
    cdef HashRow h
    cdef Py_ssize_t t, pos = 0
    if n_features < 1 or n_features >= 2 ** 31:
        raise ValueError(f"n_features must be in [1, 2**31), got {n_features}")
    rows = list(rows)
    hash_row_init(&h)
    try:
        indptr = np.zeros(len(rows) + 1, np.int32)
        parts_i, parts_v = [], []
        for i, row in enumerate(rows):
            if type(row) is not dict:
                if not isinstance(row, dict):
                    raise TypeError(f"{name}: row {i} must be a dict of features, got "
                                    f"{type(row).__name__}")
                row = dict(row)
            hash_dict_row(&h, <dict> row, n_features, True, f"{name} row {i}")
            parts_i.append(np.asarray(<int[:h.k]> h.idx).copy() if h.k else
                           np.zeros(0, np.int32))
            parts_v.append(np.asarray(<double[:h.k]> h.val).copy() if h.k else np.zeros(0))
            pos += h.k
            indptr[i + 1] = pos
    finally:
        hash_row_free(&h)
    indices = np.concatenate(parts_i).astype(np.int32) if parts_i else np.zeros(0, np.int32)
    data = np.concatenate(parts_v) if parts_v else np.zeros(0)
    X = sp.csr_array((data, indices, indptr), shape=(len(rows), n_features))
    X.indices = indices
    X.indptr = indptr
    return X


def _py_murmurhash3_32(key, seed=0):
    """The C MurmurHash3_x86_32 (csrc/_murmur.h) of a str (utf-8) or bytes
    key, signed (sklearn.utils.murmurhash3_32's positive=False)."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    cdef const unsigned char[::1] b = np.frombuffer(bytes(key) + b"\0", np.uint8)
    return int(_murmur_of(&b[0], len(key), seed))


cdef inline Py_ssize_t _up8(Py_ssize_t n) noexcept nogil:
    return (n + 7) & ~(<Py_ssize_t> 7)


cdef inline void _sort_small(double *a, Py_ssize_t m) noexcept nogil:
    # insertion sort of a few values (the m quantiles of a row: rearrangement)
    cdef Py_ssize_t i, j
    cdef double v
    for i in range(1, m):
        v = a[i]
        j = i - 1
        while j >= 0 and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


cdef double *_ptr1(object a) except NULL:
    cdef double[::1] v = a
    return &v[0]


cdef double *_ptr2(object a) except NULL:
    cdef double[:, ::1] v = a
    return &v[0, 0]


cdef int _copy_into(double *dst, object src, Py_ssize_t n) except -1:
    cdef const double[::1] v = np.ascontiguousarray(src, dtype=np.float64).ravel()
    if v.shape[0] != n:
        raise ValueError(f"expected {n} values, got {v.shape[0]}")
    if n:
        memcpy(dst, &v[0], n * sizeof(double))
    return 0


def _same_schedule(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return type(a) is type(b) and vars(a) == vars(b)


def _join_weights(parts):
    """Concatenate the weights of (row count, weights or None) parts; None if
    every part is unweighted."""
    if all(w is None for _, w in parts):
        return None
    return np.concatenate([np.ones(n) if w is None else w for n, w in parts])


def _rows(a, start, stop):
    return None if a is None else a[start:stop]


def _block_updates(w_part, block):
    # blocks of positive total weight: the ones that update
    nb = w_part.shape[0] // block if w_part is not None else 0
    return int(np.count_nonzero(w_part.reshape(nb, block).sum(axis=1) > 0))


def _zero_rows(sX, sy, sw, start, stop):
    sX[start:stop] = 0.0
    sy[start:stop] = 0.0
    if sw is not None:
        sw[start:stop] = 0.0


def _reraise(exc, name, done, n, what, seen):
    if hasattr(exc, "add_note"):
        exc.add_note(f"{name} was interrupted after {done} of its {n} {what}: it holds the "
                     f"state after them (n_samples_seen_ = {seen})")
    raise exc


def _rebuild(state):
    return _from_state(state, False)


_ARRAY_SHAPES = None


def _owned(a):
    # A C-ordered copy of a loaded float64 array holding NumPy's own float64
    # dtype object: .copy() would keep the unpickled array's dtype, an equal
    # but distinct object, and this state would then pickle to other bytes
    # than the one it was loaded from (pickle shares one dtype object).
    return a.astype(np.float64, order="C")


def _loaded_array(st, name, shape, *, optional=False, finite=True):
    a = st.get(name)
    if a is None and optional:
        return None
    if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == shape):
        raise ValueError(f"state field {name!r} must be a float64 array of shape {shape}, got "
                         f"{getattr(a, 'dtype', type(a).__name__)} of shape "
                         f"{getattr(a, 'shape', None)} (a corrupted or foreign state?)")
    if finite and not np.isfinite(a).all():
        raise ValueError(f"state field {name!r} holds NaN or inf (a corrupted or foreign "
                         "state?)")
    return a


_KEYS = ("format", "settings", "state_fields", "records", "coef", "coef_avg", "lazy",
         "scale_kind", "window", "sums", "plug_in", "scaler", "pending_X", "pending_y", "pending_w", "store_X", "store_y",
         "store_w", "drift_rows", "feature_names", "feature_keys", "refuse_new")
_SETTING_KEYS = ("n_features", "tau", "loss", "mode", "schedule", "batch_size", "average",
                 "fit_intercept", "inference", "scale", "drift", "noncrossing", "hashing")


def _from_state(state, plain):
    """A LinearSGD from a state dict, every field checked (ValueError naming it)."""
    if not isinstance(state, dict) or set(state) != set(_KEYS):
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"a LinearSGD state must be a dict with the keys {sorted(_KEYS)}, got "
                         f"{keys!r:.300} (a corrupted or foreign state?)")
    if type(state["format"]) is not int or state["format"] != FORMAT:
        raise ValueError(f"this LinearSGD state has format {state['format']!r:.40}; this "
                         f"streamfit reads format {FORMAT} (states saved by earlier versions "
                         "cannot be resumed: refit, 0.x)")
    # compared as a list of str only: an edited field (an array, a list of
    # arrays) must get this message, not numpy's broadcasting error
    fields = state["state_fields"]
    if (not isinstance(fields, list) or not all(type(f) is str for f in fields)
            or fields != list(STATE_FIELDS)):
        raise ValueError("this LinearSGD state's records have another layout than this "
                         "streamfit's (another version?): it cannot be resumed")
    s = state["settings"]
    if not isinstance(s, dict) or set(s) != set(_SETTING_KEYS):
        raise ValueError(f"state field 'settings' must be a dict with the keys "
                         f"{sorted(_SETTING_KEYS)} (a corrupted or foreign state?)")
    tau = s["tau"]
    if isinstance(tau, list):
        tau = tuple(tau)
    schedule = _schedule_from_plain(s["schedule"])
    if plain and not isinstance(schedule, str) and not isinstance(s["schedule"], dict):
        raise ValueError("state field 'settings': 'schedule' must be plain data")
    try:
        model = LinearSGD(s["n_features"], tau=list(tau) if isinstance(tau, tuple) else tau,
                          loss=s["loss"], mode=s["mode"], schedule=schedule,
                          batch_size=s["batch_size"], average=s["average"],
                          fit_intercept=s["fit_intercept"], inference=s["inference"],
                          scale=s["scale"], drift=s["drift"], noncrossing=s["noncrossing"],
                          hashing=s["hashing"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"state field 'settings': {exc} (a corrupted or foreign state?)") \
            from None
    (<LinearSGD> model)._check_and_load(state)
    return model




def _check_rows(st, prefix, d, allowed):
    # pending (batch mode) or stored (storage mode) rows: X (k, d), y (k,),
    # weights (k,) or None, all finite, weights >= 0; None where not allowed
    X, y, w = st[f"{prefix}_X"], st[f"{prefix}_y"], st[f"{prefix}_w"]
    if X is None:
        if y is not None or w is not None:
            raise ValueError(f"state fields '{prefix}_y'/'{prefix}_w' must be None without "
                             f"'{prefix}_X'")
        return
    if not allowed:
        raise ValueError(f"state field '{prefix}_X' must be None in this mode (a corrupted or "
                         "foreign state?)")
    k = X.shape[0] if isinstance(X, np.ndarray) and X.ndim == 2 else -1
    _loaded_array(st, f"{prefix}_X", (k, d))
    _loaded_array(st, f"{prefix}_y", (k,))
    if w is not None:
        _loaded_array(st, f"{prefix}_w", (k,))
        if (w < 0).any():
            raise ValueError(f"state field '{prefix}_w' must hold weights >= 0")


def _refuse_new_features(x, index, d):
    new = [k for k in x if k not in index]
    names = ", ".join(sorted(map(repr, new))) if all(isinstance(k, str) for k in new) \
        else ", ".join(map(repr, new))
    raise ValueError(f"features {names} are not among the model's columns (fixed at {d} "
                     "features by the first row or by `features`) and new_features='raise'; "
                     "the model is unchanged. Pass new_features='ignore' to ignore them, or "
                     "declare every feature in `features`")


def _refuse_nonfinite(x, index, what):
    bad = [k for k, v in x.items() if (index is None or k in index)
           and isinstance(v, (int, float, np.floating, np.integer)) and not math.isfinite(v)]
    if bad:
        raise ValueError(f"{what}: features {bad!r} hold NaN or infinity; the model is "
                         "unchanged (a missing feature reads as 0: leave the key out rather "
                         "than passing NaN)")


def _hashable(k):
    try:
        hash(k)
    except TypeError:
        raise ValueError("state field 'feature_keys' holds an unhashable key") from None
    return k


def _keys_of(index, d, plain):
    # feature_index as its keys in column order (plain: str, int or float keys)
    if index is None:
        return None
    keys = [None] * d
    for k, j in index.items():
        keys[j] = k
    if plain and not all(type(k) in (str, int, float) for k in keys):
        raise TypeError("feature keys other than str, int or float cannot be saved as plain "
                        "data (pickle instead)")
    return keys


# -- the C API (streamfit.cython.linear): the state object's one-row and block
# calls on raw rows, for a compiled caller's own loop. Each takes the object's
# lock as its Python methods do.

cdef int _api_learn_one(object state, const double *x, double y, double weight) except -1:
    cdef LinearSGD s = <LinearSGD?> state
    lock_enter(&s._lock, "LinearSGD")
    try:
        if s.mode != MODE_SINGLE:
            s._learn_block(np.asarray(<const double[:1, :s.d]> x).copy(), np.array([y]),
                           None if weight == 1.0 else np.array([weight]), None)
        else:
            s._learn_row(x, y, weight, None)
    finally:
        lock_leave(&s._lock)
    return 0


cdef int _api_predict_one(object state, const double *x, double *out) except -1:
    cdef LinearSGD s = <LinearSGD?> state
    cdef Py_ssize_t q
    cdef const double *coef
    lock_enter(&s._lock, "LinearSGD")
    try:
        for q in range(s.m):
            coef = s._coef_ptr(q)
            out[q] = sf_dot(s.d, x, coef) + s._intercept_of(q)
        if s.m > 1:
            _sort_small(out, s.m)
    finally:
        lock_leave(&s._lock)
    return 0


cdef int _api_learn(object state, const double *X, const double *y, const double *w,
                    Py_ssize_t n) except -1:
    cdef LinearSGD s = <LinearSGD?> state
    if n <= 0:
        return 0
    Xa = np.asarray(<const double[:n, :s.d]> X)
    ya = np.asarray(<const double[:n]> y)
    wa = None if w == NULL else np.asarray(<const double[:n]> w)
    s.learn(Xa, ya, wa)
    return 0


cdef int _api_shape(object state, Py_ssize_t *n_features, Py_ssize_t *n_quantiles) except -1:
    cdef LinearSGD s = <LinearSGD?> state
    n_features[0] = s.d
    n_quantiles[0] = s.m
    return 0


cdef LinearAPI _c_api
_c_api.version = 1
_c_api.learn_one = _api_learn_one
_c_api.predict_one = _api_predict_one
_c_api.learn = _api_learn
_c_api.shape = _api_shape
_C_API = PyCapsule_New(&_c_api, LINEAR_API_NAME, NULL)


def random_scaling_matrix(rs, z, k):
    """V_k / k from the random-scaling sums ``rs`` (_qr_inference.pxd), the
    current averaged iterate ``z`` (coefficients, then the intercept) and the
    average's length ``k`` (Lee, Liao, Seo & Shin 2022).

    Raises ValueError when float64 cannot hold the answer: the squares of the
    path's steps underflowed (a coefficient that moved, sum s^2 u_s != 0,
    whose sum of s^2 u_s^2 is below the smallest normal number on average:
    its interval would come out empty or noise), or V overflowed."""
    da = z.shape[0]
    ref = rs[:da]
    c = rs[da]
    b = rs[da + 1:2 * da + 1]
    A = np.zeros((da, da))
    A[np.triu_indices(da)] = rs[2 * da + 1:2 * da + 1 + da * (da + 1) // 2]   # (a tail follows)
    A = A + np.triu(A, 1).T
    lost = (b != 0) & (np.diag(A) < c * np.finfo(float).tiny)
    if lost.any():
        raise ValueError(f"the random-scaling sums underflow float64: entry "
                         f"{int(np.flatnonzero(lost)[0])} of (coef_, intercept_) moves by "
                         f"steps whose squares are below {np.finfo(float).tiny:.3g}, so its "
                         "interval would be empty; rescale y (or X) by a power of ten and "
                         "scale the intervals back")
    u = z - ref
    with np.errstate(over="ignore", invalid="ignore"):
        V = A - np.outer(b, u) - np.outer(u, b) + c * np.outer(u, u)
        V = (V + V.T) / 2.0
    if not np.isfinite(V).all():
        raise ValueError("the random-scaling matrix overflows float64 at this scale of the "
                         "coefficients; rescale y (or X) by a power of ten and scale the "
                         "intervals back")
    return V / (float(k) ** 3)


# -- streamfit.river's linear adapters ------------------------------------------------
# Their learn_one / predict_one, compiled: a river loop calls them once per
# event, where a Python method's frame and checks cost ~20% of the state
# object's own call (d = 10). The adapter class takes them as methods (Cython
# functions bind like Python ones); anything but a dict row on a model that
# has learnt goes to its Python code (_learn_one_slow, _predict_one_slow).

def river_learn_one(self, x, y):
    """Update the model with one row.

    Parameters
    ----------
    x : dict
        Features (keys of the model's columns; missing keys read as 0).
    y : float
        The target.
    """
    state = self._state
    if type(x) is dict and state is not None:
        state.learn_one(x, y)
    else:
        self._learn_one_slow(x, y)


def river_predict_one(self, x):
    """The prediction x' coef_ + intercept_ (0.0 before the first row is learnt).

    Parameters
    ----------
    x : dict

    Returns
    -------
    float
    """
    state = self._state
    if type(x) is dict and state is not None:
        return state.predict_one(x)
    return self._predict_one_slow(x)
