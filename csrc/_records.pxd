# The def entries of the kernels on the schedule's records (_quantile.pyx,
# _lowrank.pyx): the state and parameter records' buffers, checked, their
# values checked (check_sgd_records), and the tuple every entry returns,
# (code, done, exc, row).
from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS,
                             PyBUF_WRITABLE)
from libc.math cimport isnan, isfinite

from _common cimport ERR_INTERRUPTED, pending_exception, bad_field, is_int, is_real
from _qr_schedule cimport (SGDState, SGDParams, KIND_CONSTANT, KIND_INVERSE_TIME,
                           KIND_STATISTICAL, KIND_ARRAY, MODE_SINGLE, MODE_BATCH,
                           MODE_STORAGE, LOSS_CHECK, LOSS_SQUARED, window_len,
                           auto_window)


cdef inline int get_record(object arr, object dtype, str name, Py_ssize_t size, bint writable,
                           Py_buffer *buf) except -1:
    # A state or parameter record's buffer, checked: a (1,) array of exactly
    # `dtype` (names included: check_struct), C-contiguous, `size` bytes,
    # aligned for doubles, writable if asked. No buffer format is requested:
    # NumPy would spend ~3 us spelling out the record's 32 fields for Cython to
    # parse again, and the dtype check above says more than the format would.
    # The kernel's own dtype object and shape (1,) pass check_struct, so the
    # usual case skips that Python call. Release with PyBuffer_Release.
    if not (getattr(arr, "dtype", None) is dtype and getattr(arr, "shape", None) == (1,)):
        from streamfit._kernels._common import check_struct
        check_struct(arr, dtype, name)
    PyObject_GetBuffer(arr, buf, PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0))
    if buf.len != size or (<size_t> buf.buf) % sizeof(double) != 0:
        PyBuffer_Release(buf)
        raise ValueError(f"{name} must be an aligned record of {size} bytes")
    return 0


cdef struct Records:
    Py_buffer state
    Py_buffer params


cdef inline int take_records(object state, object state_dtype, object params,
                             object params_dtype, Records *r) except -1:
    # The two records' buffers, checked against the kernel module's dtypes
    # (its STATE_DTYPE, PARAMS_DTYPE); release with give_records.
    get_record(state, state_dtype, "state", sizeof(SGDState), True, &r.state)
    try:
        get_record(params, params_dtype, "params", sizeof(SGDParams), False, &r.params)
    except BaseException:
        PyBuffer_Release(&r.state)
        raise
    return 0


cdef inline void give_records(Records *r) noexcept:
    PyBuffer_Release(&r.params)
    PyBuffer_Release(&r.state)


cdef inline tuple result(int code, Py_ssize_t done, Py_ssize_t row):
    # (code, done, exc, row): exc is the signal handler's exception when
    # interrupted, taken off the thread state
    if code == ERR_INTERRUPTED:
        return code, done, pending_exception(), row
    return code, done, None, row


cdef extern from *:
    """
    /* counters and window sizes stay below 2^53: every integer there is
     * exact in a double, and casts to Py_ssize_t cannot overflow */
    #define SF_MAX_COUNT 9007199254740992.0
    """
    const double MAX_COUNT "SF_MAX_COUNT"


cdef inline double single_window(const SGDState *s, const SGDParams *p,
                                 double row_nnz) noexcept nogil:
    # single mode's window length, or (its warm-up still running, the
    # window to follow the schedule's d: window_auto) the longest the
    # warm-up can make it, from the most non-zeros of a row so far and of
    # the call's rows (row_nnz)
    cdef double most = s.nnz_max if s.nnz_max > row_nnz else row_nnz
    if s.win_len > 0 or p.window_auto == 0:
        return window_len(s, p)
    most = auto_window(most + (1.0 if p.fit_intercept != 0 else 0.0))
    return most if most < p.window else p.window


cdef inline double window_need(const SGDState *s, const SGDParams *p,
                               Py_ssize_t block, double row_nnz=0.0) noexcept nogil:
    # The residual window's capacity a call needs (values checked first):
    # single and multi-quantile rows append one residual before the test,
    # batch blocks `block`, storage calls up to a window of new rows.
    # row_nnz: single mode, the most non-zero entries of a row of the call.
    cdef double most = s.fill, win = p.window
    if p.mode == MODE_STORAGE:
        return (p.window if p.window > most else most) + p.window
    if p.mode == MODE_SINGLE:
        win = single_window(s, p, row_nnz)
    if p.n_warmup > most:
        most = p.n_warmup
    if win > most:
        most = win
    return most + (block if p.mode == MODE_BATCH else 1)


cdef inline int check_sgd_records(const SGDState *s, const SGDParams *p, Py_ssize_t wcap,
                                  Py_ssize_t block, str name) except -1:
    # Every field of a state and parameter record against the range the
    # kernels rely on, before any of it is read as an index, a count or a
    # loop bound: a record edited by hand or unpickled from an edited file
    # is refused (ValueError naming the field), never used. ~40 compares.
    # `wcap` is the residual window's length, `block` batch mode's rows per
    # update; `name` prefixes the field ("state", "states[2]").
    cdef bint stat = p.kind == KIND_STATISTICAL
    cdef str pn = name.replace("state", "params")
    # parameters: the codes first (the other checks depend on them)
    if not is_int(p.kind, KIND_CONSTANT, KIND_ARRAY):
        bad_field(pn, "kind", p.kind, "a schedule code 0..3")
    if not is_int(p.mode, MODE_SINGLE, MODE_STORAGE):
        bad_field(pn, "mode", p.mode, "a mode code 0..2")
    if not is_int(p.loss, LOSS_CHECK, LOSS_SQUARED):
        bad_field(pn, "loss", p.loss, "a loss code 0 or 1")
    if not is_int(p.average, 0, 1):
        bad_field(pn, "average", p.average, "0 or 1")
    if not is_int(p.fit_intercept, 0, 1):
        bad_field(pn, "fit_intercept", p.fit_intercept, "0 or 1")
    if not is_int(p.start, 1, 2):
        bad_field(pn, "start", p.start, "1 or 2")
    if not is_int(p.drift, 0, 1):
        bad_field(pn, "drift", p.drift, "0 or 1")
    if not is_int(p.drift_clock, 0, 1):
        bad_field(pn, "drift_clock", p.drift_clock, "0 or 1")
    if not is_int(p.window_auto, 0, 1):
        bad_field(pn, "window_auto", p.window_auto, "0 or 1")
    if p.drift != 0:
        if not (is_real(p.drift_h, 0) and p.drift_h > 0):
            bad_field(pn, "drift_h", p.drift_h, "a finite number > 0")
        if not is_real(p.drift_arm, 0):
            bad_field(pn, "drift_arm", p.drift_arm, "a finite number >= 0")
    if not (p.tau > 0 and p.tau < 1):
        bad_field(pn, "tau", p.tau, "a number in (0, 1)")
    if not (is_real(p.c, 0) and (p.c > 0 or p.kind == KIND_STATISTICAL
                                 or p.kind == KIND_ARRAY)):
        bad_field(pn, "c", p.c, "a finite stepsize constant > 0")
    if stat:
        if not (isnan(p.eta0) or (is_real(p.eta0, 0) and p.eta0 > 0)):
            bad_field(pn, "eta0", p.eta0, "NaN or a finite number > 0")
        if not (is_real(p.eta0_scale, 0) and p.eta0_scale > 0):
            bad_field(pn, "eta0_scale", p.eta0_scale, "a finite number > 0")
        if not (p.decay > 0 and p.decay <= 1):
            bad_field(pn, "decay", p.decay, "a number in (0, 1]")
        if not (is_real(p.Ca, 0) and p.Ca > 0):
            bad_field(pn, "Ca", p.Ca, "a finite number > 0")
        if not ((is_real(p.Cb, 0) and p.Cb > 0) or (isnan(p.Cb) and p.loss == LOSS_SQUARED)):
            bad_field(pn, "Cb", p.Cb, "a finite number > 0")
        if not (isnan(p.b0) or (is_real(p.b0, 0) and p.b0 > 0)):
            bad_field(pn, "b0", p.b0, "NaN or a finite number > 0")
        if not (isnan(p.t_switch) or is_int(p.t_switch, 0, MAX_COUNT)):
            bad_field(pn, "t_switch", p.t_switch, "NaN or an integer >= 0")
        if not is_int(p.n_warmup, 1, MAX_COUNT):
            bad_field(pn, "n_warmup", p.n_warmup, "an integer >= 1")
        if not is_int(p.window, 1, MAX_COUNT):
            bad_field(pn, "window", p.window, "an integer >= 1")
        if not (is_real(p.eta_const, 0) and p.eta_const > 0):
            bad_field(pn, "eta_const", p.eta_const, "a finite number > 0")
        if not (p.avg_power > 0 and p.avg_power <= 1):
            bad_field(pn, "avg_power", p.avg_power, "a number in (0, 1]")
        if not (p.plateau > 0 and p.plateau < 1):
            bad_field(pn, "plateau", p.plateau, "a number in (0, 1)")
        if not is_int(p.patience, 1, MAX_COUNT):
            bad_field(pn, "patience", p.patience, "an integer >= 1")
        if not (p.ema > 0 and p.ema <= 1):
            bad_field(pn, "ema", p.ema, "a number in (0, 1]")
        if not is_real(p.C0, 0):
            bad_field(pn, "C0", p.C0, "a finite number >= 0")
        if not (p.restart == 0 or (is_real(p.restart, 0) and p.restart > 1)):
            bad_field(pn, "restart", p.restart, "0 or a finite number > 1")
        if not is_real(p.t0, 0):
            bad_field(pn, "t0", p.t0, "a finite number >= 0")
    # the state: counters, codes and the window's fill
    if not is_real(s.t, 0):
        bad_field(name, "t", s.t, "a finite clock >= 0")
    if not is_int(s.n_updates, 0, MAX_COUNT):
        bad_field(name, "n_updates", s.n_updates, "an integer >= 0")
    if not is_int(s.n_seen, 0, MAX_COUNT):
        bad_field(name, "n_seen", s.n_seen, "an integer >= 0")
    if not is_int(s.phase, 0, 3):
        bad_field(name, "phase", s.phase, "a phase 0..3")
    if not is_int(s.fill, 0, MAX_COUNT):
        bad_field(name, "fill", s.fill, "an integer >= 0")
    if not is_int(s.avg_on, 0, 1):
        bad_field(name, "avg_on", s.avg_on, "0 or 1")
    if not is_int(s.n_flat, 0, MAX_COUNT):
        bad_field(name, "n_flat", s.n_flat, "an integer >= 0")
    if not is_int(s.n_high, 0, MAX_COUNT):
        bad_field(name, "n_high", s.n_high, "an integer >= 0")
    if not is_int(s.n_restarts, 0, MAX_COUNT):
        bad_field(name, "n_restarts", s.n_restarts, "an integer >= 0")
    if not is_int(s.n_drift, 0, MAX_COUNT):
        bad_field(name, "n_drift", s.n_drift, "an integer >= 0")
    if not is_int(s.nnz_rows, 0, MAX_COUNT):
        bad_field(name, "nnz_rows", s.nnz_rows, "an integer >= 0")
    if not is_int(s.win_len, 0, MAX_COUNT):
        bad_field(name, "win_len", s.win_len, "an integer >= 0")
    if not (is_real(s.nnz_sum, 0) and is_real(s.nnz_max, 0)):
        bad_field(name, "nnz_sum" if not is_real(s.nnz_sum, 0) else "nnz_max",
                  s.nnz_sum if not is_real(s.nnz_sum, 0) else s.nnz_max,
                  "a finite number >= 0")
    if not (s.dim == 0 or (is_real(s.dim, 0) and s.dim >= 1)):
        bad_field(name, "dim", s.dim, "0 or a finite number >= 1")
    if s.win_len > 0 and s.dim == 0:
        bad_field(name, "win_len", s.win_len, "0 while 'dim' is 0")
    if not (s.k_pow == -1 or is_real(s.k_pow, 0)):
        bad_field(name, "k_pow", s.k_pow, "-1 or a finite number >= 0")
    # finite values (non-negative where they are scales, sums or counts)
    if not is_real(s.loss, 0):
        bad_field(name, "loss", s.loss, "a finite number >= 0")
    if not isfinite(s.intercept):
        bad_field(name, "intercept", s.intercept, "a finite number")
    if not isfinite(s.intercept_avg):
        bad_field(name, "intercept_avg", s.intercept_avg, "a finite number")
    if not isfinite(s.intercept_pi):
        bad_field(name, "intercept_pi", s.intercept_pi, "a finite number")
    if not isfinite(s.intercept_pi2):
        bad_field(name, "intercept_pi2", s.intercept_pi2, "a finite number")
    if not isfinite(s.pi_avg):
        bad_field(name, "pi_avg", s.pi_avg, "a finite number")
    if not (is_real(s.eta_geo, 0) and is_real(s.t_switch, 0) and is_real(s.d0, 0)
            and is_real(s.b0, 0) and is_real(s.cl, 0) and is_real(s.cu, 0)
            and is_real(s.sumsq, 0) and is_real(s.n_sumsq, 0) and is_real(s.n_avg, 0)
            and is_real(s.min_med, 0) and is_real(s.last_eta, 0)
            and is_real(s.eta_start, 0) and is_real(s.b0_cap, 0) and is_real(s.block, 0)
            and is_real(s.eta_pow, 0) and is_real(s.level, 0) and is_real(s.win_sumsq, 0)
            and is_real(s.win_wsum, 0) and is_real(s.xmax, 0) and is_real(s.x_wsum, 0)
            and is_real(s.dr_n, 0) and is_real(s.dr_cusum, 0)):
        for field, value in (("eta_geo", s.eta_geo), ("t_switch", s.t_switch),
                             ("d0", s.d0), ("b0", s.b0), ("cl", s.cl), ("cu", s.cu),
                             ("sumsq", s.sumsq), ("n_sumsq", s.n_sumsq), ("n_avg", s.n_avg),
                             ("min_med", s.min_med), ("last_eta", s.last_eta),
                             ("eta_start", s.eta_start), ("b0_cap", s.b0_cap),
                             ("block", s.block), ("eta_pow", s.eta_pow), ("level", s.level),
                             ("win_sumsq", s.win_sumsq), ("win_wsum", s.win_wsum),
                             ("xmax", s.xmax), ("x_wsum", s.x_wsum), ("dr_n", s.dr_n),
                             ("dr_cusum", s.dr_cusum)):
            if not is_real(value, 0):
                bad_field(name, field, value, "a finite number >= 0")
    # the window beside the records: room for what this call may append
    if stat and window_need(s, p, block) > wcap:
        raise ValueError(f"window: the residual window holds {wcap} values, but {name}'s "
                         f"fill ({s.fill:g}) and {pn}'s window ({p.window:g}) and n_warmup "
                         f"({p.n_warmup:g}) need {window_need(s, p, block):g} (a corrupted "
                         f"or foreign state?); it was not used")
    if not stat and s.fill > wcap:
        bad_field(name, "fill", s.fill, f"at most the window's length {wcap}")
    return 0


cdef inline int check_window(const double[::1] window, const SGDState *s,
                             str name) except -1:
    # The residual window's filled part (the first `fill` values, after
    # check_sgd_records has bounded fill by the window's length): finite.
    # The order statistics read it (a NaN pivot never splits the range:
    # quickselect would loop for good) and so do the scale estimates. One
    # pass over at most `window` values.
    cdef Py_ssize_t i, n = <Py_ssize_t> s.fill
    if n > window.shape[0]:
        n = window.shape[0]
    for i in range(n):
        if not isfinite(window[i]):
            raise ValueError(f"window: value {i} of the residual window (the first "
                             f"{name}.fill = {n} are in use) is {window[i]!r}, expected "
                             f"finite (a corrupted or foreign state?); it was not used")
    return 0
