# Online (sub-)gradient descent for linear quantile and least-squares regression.
#
# The whole sample loop runs here without the GIL; Python validates input and
# owns the state arrays. State and constants cross the boundary as NumPy
# structured arrays of shape (1,) whose dtypes are made from the C structs
# of the statistical schedule (_qr_schedule.pxd: STATE_DTYPE, PARAMS_DTYPE),
# so the structs are the one source of truth, Python reads fields by name,
# and the estimator pickles as plain NumPy arrays that resume bit-identically.
#
# No BLAS here: every product is a plain C loop over rows in a fixed order
# (_dense.h), so results do not depend on the BLAS library or its thread
# count, and a block's residuals, scale check and gradient come from one pass
# over its rows.
#
# Paper: Shen, Xia & Zhou, "Online Quantile Regression", JMLR 26 (2025).
import numpy as np

from cpython.buffer cimport PyBuffer_Release
from libc.math cimport fabs, isnan, sqrt, INFINITY
from libc.float cimport DBL_MAX
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

from _common cimport (OK, ERR_NOMEM, ERR_INTERRUPTED, ERR_NONFINITE, ERR_BADINPUT,
                      ERR_SCALE, ERR_LAYOUT, pending_exception)
from _order_stats cimport median_abs
from _qr_schedule cimport (SGDState, SGDParams, KIND_STATISTICAL, KIND_ARRAY, MODE_SINGLE,
                           MODE_STORAGE, LOSS_CHECK, SQRT_DBL_MIN, schedule_enums,
                           record_dtypes, default_params, row_absmax, average_prior,
                           fresh_estimates, calibrated_cl, JUMP_NONE, JUMP_RESTART, jump_test,
                           full_window, window_done, restart, NO_UPDATE, stat_single_row,
                           loss_and_coef, fixed_eta, quantile_row, block_eta, clock_step)
from _records cimport (Records, take_records, give_records, get_record, result,
                      check_sgd_records, check_window)
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_quiet, \
    poll_stop, poll_final, ROW_WORK
from _qr_inference cimport rs_len, rs_step
from _qr_plug_in cimport plug_in_average_step, plug_in_means
from _qr_scaler cimport scale_row, average_step_scaled
from _power_iter cimport top_eigenvalue
from _pav cimport pav_increasing
from _qr_blocks cimport (BlockSums, BlockWork, block_pass, compact, block_warm_up,
                         storage_windows, batch_window, block_work_init, block_work_free)
from _qr_multi cimport MultiWork, multi_work_init
from _qr_drift cimport drift_alarm, drift_restart
from _dense cimport (sf_dot, sf_dot2, sf_axpy, sf_average, sf_axpy_dot2,
                     sf_axpy_dot2_f32, sf_multi_axpy_dot2, sf_widen)

# Schedule kinds, losses and modes (the records' fields) for Python.
globals().update(schedule_enums())

cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Test hook: poll before every row (and every power-iteration row) and
    raise the signal ``signum`` with C's raise() at poll number ``polls``
    (0-based) of the main thread, once; then poll as usual again. The
    signal's Python handler decides what happens (a raising handler stops
    the kernel). ``polls=-1`` disarms."""
    arm_hook(&_hook, polls, signum)


STATE_DTYPE, PARAMS_DTYPE = record_dtypes()


def new_state():
    """A fresh (zeroed) state record."""
    return np.zeros(1, STATE_DTYPE)


def copy_record(object src, object dst):
    """dst[...] = src for two state records: a memcpy (NumPy copies a
    structured record field by field, ~15 us for this one)."""
    cdef Py_buffer a, b
    get_record(src, STATE_DTYPE, "src", sizeof(SGDState), False, &a)
    try:
        get_record(dst, STATE_DTYPE, "dst", sizeof(SGDState), True, &b)
        memcpy(b.buf, a.buf, sizeof(SGDState))
        PyBuffer_Release(&b)
    finally:
        PyBuffer_Release(&a)


def new_params():
    """A parameter record, NaN where "estimate from the stream" is meant."""
    return default_params(PARAMS_DTYPE)


def check_records(const SGDState[::1] states, const SGDParams[::1] params):
    """Check state and parameter records (one or one per quantile) as the
    kernels do at their entries, the window's length aside: a ValueError
    naming the field, for records loaded from a pickle."""
    cdef Py_ssize_t q, m = states.shape[0]
    if params.shape[0] != m:
        raise ValueError(f"params must have one record per state record, got {params.shape[0]} "
                         f"for {m}")
    for q in range(m):
        check_sgd_records(&states[q], &params[q], PY_SSIZE_T_MAX, 1,
                          "state" if m == 1 else f"states[{q}]")




cdef inline void average_step(Py_ssize_t d, const double *w, double *wbar,
                              SGDState *s, double *rs, bint fit_b) noexcept nogil:
    # wbar += (w - wbar) / k : running mean of the iterates (and of the
    # iterate's intercept)
    cdef double inv
    s.n_avg += 1.0
    inv = 1.0 / s.n_avg
    sf_average(d, inv, w, wbar)
    s.intercept_avg += (s.intercept - s.intercept_avg) * inv
    if rs != NULL:
        rs_step(d, wbar, s, rs, fit_b)


def rs_length(Py_ssize_t da):
    """Length of the random-scaling sums for da = d (+1 with an intercept)
    coordinates: ref (da), sum k^2 (1), sum k^2 u (da), sum k^2 u u' packed
    upper triangle, row by row (da (da + 1) / 2), then the average's
    (weighted) mean row and average of the averaged coefficients (2 d of
    2 da; single mode's plug-in intercept)."""
    return rs_len(da)


cdef bint iterate_finite(const double *w, Py_ssize_t d, const SGDState *s) noexcept nogil:
    # A diverging run (e.g. a too large constant stepsize) is reported, so the
    # caller can keep its previous state.
    cdef Py_ssize_t j
    if not (fabs(s.intercept) < 1e300):    # also false for NaN
        return False
    for j in range(d):
        if not (fabs(w[j]) < 1e300):
            return False
    return True




# ----------------------------------------------------------------------------
# Single-sample updates (Section 2.1 of the paper).

def schedule_step(object state, object params, double[::1] window, const double[::1] x,
                  double residual, double weight):
    """The statistical schedule (single-sample mode) for one row ``x`` whose
    residual under the current iterate is ``residual``: exactly what
    ``sgd_single`` does for it. Returns (code, eta, update): with ``update``
    the caller applies the step of size ``eta`` (the schedule's clock has
    moved by ``weight``); without, the row only warmed the schedule up (or
    weighs 0). ``window`` must hold max(params.window, params.n_warmup) + 1
    values; an error code leaves the state partly moved (copy it first)."""
    cdef Records rec
    take_records(state, STATE_DTYPE, params, PARAMS_DTYPE, &rec)
    try:
        check_sgd_records(<SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                          window.shape[0], 1, "state")
        check_window(window, <SGDState *> rec.state.buf, "state")
        return _schedule_step(<SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                              window, x, residual, weight)
    finally:
        give_records(&rec)


cdef tuple _schedule_step(SGDState *s, const SGDParams *p, double[::1] window,
                          const double[::1] x, double residual, double weight):
    cdef Py_ssize_t d = x.shape[0], wcap = window.shape[0]
    cdef Py_ssize_t da = d + (1 if p.fit_intercept != 0 else 0)
    cdef double xx, eta = 0.0
    cdef int code
    cdef double *work
    if p.kind != KIND_STATISTICAL or p.mode != MODE_SINGLE or d < 1 or \
            wcap < p.window or wcap < p.n_warmup or <Py_ssize_t> s.fill >= wcap:
        return ERR_LAYOUT, 0.0, False
    xx = sf_dot(d, &x[0], &x[0])
    if not (fabs(residual) <= DBL_MAX and xx <= DBL_MAX and weight >= 0 and weight <= DBL_MAX):
        return ERR_BADINPUT, 0.0, False
    if weight == 0:
        return OK, 0.0, False
    work = <double *> malloc(wcap * sizeof(double))
    if work == NULL:
        return ERR_NOMEM, 0.0, False
    code = stat_single_row(s, p, &window[0], work, &x[0], d, da, residual, xx, weight, &eta)
    free(work)
    if code == NO_UPDATE:
        return OK, 0.0, False
    if code != OK:
        return code, 0.0, False
    clock_step(s, eta, weight)
    return OK, eta, True


cdef int check_lengths(Py_ssize_t n, Py_ssize_t d, Py_ssize_t ny, Py_ssize_t nsw,
                       Py_ssize_t nw, Py_ssize_t nwbar) except -1:
    # Every array's length against the data and the state it describes.
    if ny != n or (nsw != 0 and nsw != n):
        raise ValueError(f"y and sample_weight must have {n} values (X's rows), got "
                         f"{ny} and {nsw}")
    if nw != d or nwbar != d:
        raise ValueError(f"w and wbar must have {d} values (X's columns), got {nw} and {nwbar}")
    if n > 0 and d < 1:
        raise ValueError("X must have at least one column")
    return 0


cdef double *rs_pointer(object rs, Py_ssize_t d, const SGDParams *p) except? NULL:
    # The random-scaling sums of sgd_single/sgd_blocks: None (not tracked) or
    # exactly rs_length(d + fit_intercept) values.
    cdef double[::1] view
    cdef Py_ssize_t need
    if rs is None:
        return NULL
    view = rs
    need = rs_len(d + (1 if p.fit_intercept != 0 else 0))
    if view.shape[0] != need:
        raise ValueError(f"rs must have {need} values (rs_length(d + fit_intercept)), got "
                         f"{view.shape[0]}")
    return &view[0]


cdef object NDARRAY = np.ndarray


cdef object F64 = np.dtype(np.float64)
cdef object F32 = np.dtype(np.float32)


cdef inline const double *stream_row(const double *X64, const float *X32, Py_ssize_t i,
                                     Py_ssize_t d, double *cur, bint widen) noexcept nogil:
    # Row i of a stream given as float64 rows (X64) or float32 rows (X32, X64
    # NULL): a float32 row is widened into cur, unless the pass before (the
    # last update, which reads the next row) did that already (widen False).
    if X32 == NULL:
        return X64 + i * d
    if widen:
        sf_widen(d, X32 + i * d, cur)
    return cur


cdef bint is_float32(object X):
    # A float32 ndarray (the kernels read its rows as they are); the dtype
    # test costs a pointer compare for the usual float64 call
    if type(X) is not NDARRAY:
        return False
    dt = (<object> X).dtype
    return dt is not F64 and (dt is F32 or dt == F32)


def sgd_single(object X, const double[::1] y, const double[::1] sample_weight,
               double[::1] w, double[::1] wbar, object state, object params,
               double[::1] window, const double[::1] etas, object rs=None, object scaler=None,
               object plug_in=None, object drift_rows=None):
    """One single-sample update per row of X (the paper's Section 2.1).

    ``X``: C-contiguous float64 or float32 (n, d). float32 rows are read as
    they are (no float64 copy: half the memory traffic of a long stream):
    each is widened exactly as the pass that reads it runs (the update's
    ``sf_axpy_dot2_f32``), into one of two row buffers that stay in cache;
    every sum and the state are float64, in the same operations, so the
    result is bit-identical to that of ``X.astype(np.float64)``.

    ``state``/``params`` are records of STATE_DTYPE / PARAMS_DTYPE;
    ``sample_weight`` is empty (all 1) or one non-negative weight per row;
    ``window`` holds recent residuals; ``etas`` has one stepsize per update
    (row of positive weight) when the schedule is an array (a user schedule).

    Returns (code, done, exc, row): ``done`` rows were applied and the state
    holds exactly their effect. ERR_INTERRUPTED: a signal handler raised
    ``exc``; ERR_BADINPUT: row ``row`` has a non-finite residual or squared
    norm (NaN/inf in it, ||x||^2 overflowing, or an iterate that diverged);
    ERR_NONFINITE: the iterate left the finite range; ERR_LAYOUT: a work array
    is too short (nothing was changed).

    ``rs``: None, or the random-scaling sums (``rs_length(d + fit_intercept)``
    values, see ``rs_step``) updated with every step of the average.

    ``scaler``: None, or 2 d + 1 values (weight sum, running means, running
    sums of squared deviations): each row (of positive weight) joins them,
    then the model sees z = (x - mean) / sd (sd = 1 where it is 0; without an
    intercept, x / sd): w and wbar are on that scale.

    ``plug_in``: None, or 2 d values (the average's weighted mean row and the
    average of the averaged coefficients): with averaging, an intercept and
    the check loss, ``intercept_avg`` is then the plug-in intercept
    (``plug_in_average_step``)
    instead of the average of the iterate's intercept. With ``rs`` the sums'
    own tail serves (``plug_in`` is ignored); not with ``scaler``.

    ``drift_rows``: None, or a float64 array that receives the stream's row
    index (``n_seen`` before the row) of each alarm of the drift test
    (``params.drift``, _qr_drift.pxd), in order, as long as it has room; the
    state's ``n_drift`` counts every alarm (so the call's alarms are the
    first ``n_drift`` after minus before of them).
    """
    cdef Records rec
    cdef double[::1] sc, pv, dv
    cdef double *scp = NULL
    cdef double *dr = NULL
    cdef Py_ssize_t dcap = 0
    cdef double *rsp
    cdef double *pt = NULL
    cdef const SGDParams *p
    cdef const double[:, ::1] X64
    cdef const float[:, ::1] X32
    cdef const double *p64 = NULL
    cdef const float *p32 = NULL
    cdef Py_ssize_t n, d
    if is_float32(X):
        X32 = X
        n, d = X32.shape[0], X32.shape[1]
        if n > 0:
            p32 = &X32[0, 0]
    else:
        X64 = X
        n, d = X64.shape[0], X64.shape[1]
        if n > 0:
            p64 = &X64[0, 0]
    check_lengths(n, d, y.shape[0], sample_weight.shape[0], w.shape[0], wbar.shape[0])
    if scaler is not None:
        sc = scaler
        if sc.shape[0] != 2 * d + 1:
            raise ValueError(f"scaler must have {2 * d + 1} values (2 d + 1), got "
                             f"{sc.shape[0]}")
        scp = &sc[0]
    if plug_in is not None:
        pv = plug_in
        if pv.shape[0] != 2 * d:
            raise ValueError(f"plug_in must have {2 * d} values (2 d), got {pv.shape[0]}")
        if scaler is not None:
            raise ValueError("plug_in does not work with scaler")
    if drift_rows is not None:
        dv = drift_rows
        dcap = dv.shape[0]
        if dcap:
            dr = &dv[0]
    take_records(state, STATE_DTYPE, params, PARAMS_DTYPE, &rec)
    try:
        p = <const SGDParams *> rec.params.buf
        check_sgd_records(<SGDState *> rec.state.buf, p, window.shape[0], 1, "state")
        check_window(window, <SGDState *> rec.state.buf, "state")
        rsp = rs_pointer(rs, d, p)
        if scp == NULL:
            pt = plug_in_means(p, rsp, &pv[0] if plug_in is not None else NULL, d)
        return _sgd_single(p64, p32, n, d, y, sample_weight, w, wbar,
                           <SGDState *> rec.state.buf, p, window, etas, rsp, scp, pt, dr, dcap)
    finally:
        give_records(&rec)


cdef tuple _sgd_single(const double *X64, const float *X32, Py_ssize_t n, Py_ssize_t d,
                       const double[::1] y, const double[::1] sample_weight,
                       double[::1] w, double[::1] wbar, SGDState *s, const SGDParams *p,
                       double[::1] window, const double[::1] etas, double *rs, double *sc,
                       double *pt, double *dr, Py_ssize_t dcap):
    # The rows are X64 (float64) or X32 (float32, X64 NULL), n x d, C order;
    # pt: the plug-in intercept's running means (NULL: none); dr: room for
    # dcap alarm rows of the drift test.
    cdef Py_ssize_t i, j = 0, need = 0
    cdef Py_ssize_t wcap = window.shape[0]
    cdef double *win
    cdef double *work
    cdef double *wp
    cdef const double *swp = &sample_weight[0] if sample_weight.shape[0] else NULL
    cdef double r, coef = 0.0, step = 0.0, xw = 0.0, xx = 0.0, wi = 1.0
    cdef double *zbuf
    # float32 rows are widened into cur (this row) and nxt (the next one,
    # written by the update that reads it); the two swap as rows advance
    cdef double *cur = NULL
    cdef double *nxt = NULL
    cdef double *tmp
    cdef bint have_dot = False
    cdef const double *x
    cdef int kind = <int> p.kind, code = OK
    cdef bint stat = kind == KIND_STATISTICAL
    cdef bint fit_b = p.fit_intercept != 0
    cdef bint avg = p.average != 0
    cdef bint drift = p.drift != 0
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef Py_ssize_t row = -1, done = 0, n_alarm = 0
    cdef Poll pl
    # a row's work, the random-scaling sums' da^2 / 2 included
    cdef double row_work = d + ROW_WORK + (0.5 * da * da if rs != NULL else 0.0)
    if n == 0:
        return result(OK, 0, -1)
    if kind == KIND_ARRAY:
        if swp == NULL:
            need = n
        else:
            for i in range(n):
                need += swp[i] != 0
        if etas.shape[0] < need:
            return result(ERR_LAYOUT, 0, -1)
    if stat and (wcap < p.window or wcap < p.n_warmup or <Py_ssize_t> s.fill >= wcap):
        return result(ERR_LAYOUT, 0, -1)
    work = <double *> malloc((max(wcap, 1) + 3 * d + (2 * d if X32 != NULL else 0))
                             * sizeof(double))
    if work == NULL:
        return result(ERR_NOMEM, 0, -1)
    zbuf = work + max(wcap, 1)
    cur = zbuf + 3 * d
    nxt = cur + d
    win = &window[0] if wcap else NULL
    wp = &w[0]
    poll_init(&pl, &_hook)
    with nogil:
        for i in range(n):
            if poll_stop(&pl, row_work):
                code = ERR_INTERRUPTED
                break
            x = stream_row(X64, X32, i, d, cur, not have_dot)
            if swp != NULL:
                wi = swp[i]
            if sc != NULL:
                # the row joins the running location/scale first (a bad row
                # fails the call, which the caller then discards)
                if scale_row(x, d, wi, sc, fit_b, zbuf, zbuf + d, wp, &s.intercept) != OK:
                    code = ERR_BADINPUT
                    row = i
                    break
                x = zbuf
            if not have_dot:
                xw = sf_dot2(d, x, wp, &xx)
            have_dot = False
            r = y[i] - (xw + s.intercept)
            if not (fabs(r) <= DBL_MAX and xx <= DBL_MAX):
                # NaN/inf anywhere in the row makes r or ||x||^2 non-finite, and
                # so does a row too large for float64 (||x||^2 overflows): the
                # checks cost two compares here instead of passes over X
                code = ERR_BADINPUT
                row = i
                break
            if drift and wi != 0 and s.n_avg > 0 and (s.avg_on != 0 or not stat):
                # the change test: the row's loss under the average against
                # the iterate's, before its update; an alarm restarts the
                # average (and the clock, from this row's step on)
                if drift_alarm(s, p, r, y[i] - (sf_dot(d, x, &wbar[0]) + s.intercept_avg),
                               wi):
                    drift_restart(s, p)
                    if n_alarm < dcap:
                        dr[n_alarm] = s.n_seen
                    n_alarm += 1
            code = quantile_row(s, p, win, work, x, d, da, r, xx, wi,
                                etas[j] if kind == KIND_ARRAY and wi != 0 else 0.0, fit_b,
                                &coef, &step)
            done = i + 1
            if code == NO_UPDATE:
                code = OK
                continue          # weight 0 or a warm-up row: scored (and remembered) only
            if code != OK:
                break
            j += 1
            # w += coef * x (and the next row's x'w and ||x||^2 in the same pass)
            if i + 1 < n and sc == NULL:
                if X32 != NULL:
                    xw = sf_axpy_dot2_f32(d, coef, x, wp, X32 + (i + 1) * d, nxt, &xx)
                    # x (this row, still read below) stays where it is
                    tmp = cur
                    cur = nxt
                    nxt = tmp
                else:
                    xw = sf_axpy_dot2(d, coef, x, wp, x + d, &xx)
                have_dot = True
            else:
                sf_axpy(d, coef, x, wp)
            if avg and (s.avg_on != 0 or not stat):
                if sc != NULL:
                    average_step_scaled(d, wp, &wbar[0], s, sc, zbuf + d, fit_b, zbuf + 2 * d)
                else:
                    if pt != NULL:
                        plug_in_average_step(d, x, y[i], wp, &wbar[0], s, p, step, wi, rs,
                                             fit_b, pt)
                    else:
                        average_step(d, wp, &wbar[0], s, rs, fit_b)
        if code == OK and poll_final(&pl):
            code = ERR_INTERRUPTED        # every row applied
    free(work)
    if (code == OK or code == ERR_INTERRUPTED) and not iterate_finite(wp, d, s):
        if code == ERR_INTERRUPTED:
            pending_exception()       # the divergence is what the caller must hear
        code = ERR_NONFINITE
    return result(code, done, row)


# ----------------------------------------------------------------------------
# Batch (Section 2.2) and all-data-so-far (Section 2.3) updates: one
# sub-gradient step on the (weighted) mean loss over a block of rows.

cdef int block_step(const double *X, const double *y, const double *sw, Py_ssize_t m,
                    Py_ssize_t d, Py_ssize_t score_from, double *w, double *wbar,
                    SGDState *s, const SGDParams *p, double eta_user, double *win,
                    BlockWork *bw, Poll *pl, Py_ssize_t *bad, double *rs) noexcept nogil:
    # One update on rows [0, m); rows >= score_from are new: they add to the
    # prequential loss and (batch mode) to the residual window. Returns OK,
    # ERR_BADINPUT (row in bad), ERR_SCALE (the warm-up's sum of ||x||^2
    # over- or underflows) or ERR_INTERRUPTED; the state is unchanged unless OK.
    cdef bint fit_b = p.fit_intercept != 0
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef double eta, cl, cu = 0.0
    cdef Py_ssize_t nr, first_new
    cdef int code
    cdef BlockSums bs
    cdef bint stat = p.kind == KIND_STATISTICAL, warm = False
    code = block_pass(X, y, sw, m, d, score_from, w, s.intercept, p, bw.resid, bw.grad,
                      &bs, stat and s.phase == 0, pl, bad)
    if code != OK:
        return code
    nr = compact(bw.resid, sw, m, score_from, &first_new)
    if stat and s.phase == 0:
        # Everything of the warm-up that can fail or be interrupted comes
        # before the state changes.
        warm = bs.wsum > 0 and (p.mode == MODE_STORAGE or s.fill + nr >= p.n_warmup)
        if warm:
            cl = (s.sumsq + bs.sumsq) / (s.n_sumsq + bs.wsum)
            if not (cl <= DBL_MAX) or 0 < max(s.xmax, bs.xmax) < SQRT_DBL_MIN:
                return ERR_SCALE      # ||x||^2 over- or underflows: nothing updated
            if top_eigenvalue(X, sw, m, d, fit_b, bw.eig, bw.eig + d, pl, &cu) != OK:
                return ERR_INTERRUPTED
    s.loss += bs.loss
    s.n_seen += bs.n_new
    if not (bs.wsum > 0):
        return OK             # every weight 0: scored, nothing learnt
    s.block = bs.wsum
    if stat:
        if s.phase == 0:
            code = block_warm_up(s, p, X, sw, m, d, bw, &bs, nr, win, warm, cu)
        elif p.mode == MODE_STORAGE:
            code = storage_windows(&_hook, s, p, X, sw, m, d, score_from, bw, &bs, nr, first_new,
                                   win)
        else:
            code = batch_window(&_hook, s, p, X, sw, m, d, bw, &bs, nr, win)
        if code == NO_UPDATE:
            return OK         # a block of the warm-up: scored, remembered
        if code != OK:
            return code
        eta = block_eta(s, p, da)
    else:
        eta = fixed_eta(s, p, eta_user)
    # w -= eta * grad / sum(w_i)
    sf_axpy(d, -eta / bs.wsum, bw.grad, w)
    if fit_b:
        s.intercept -= eta * (bs.gsum / bs.wsum)
    clock_step(s, eta, 1.0)
    if p.average != 0 and (s.avg_on != 0 or not stat):
        average_step(d, w, wbar, s, rs, fit_b)
    return OK


def sgd_blocks(const double[:, ::1] X, const double[::1] y, const double[::1] sample_weight,
               Py_ssize_t block, double[::1] w, double[::1] wbar, object state,
               object params, double[::1] window, const double[::1] etas, object rs=None):
    """One update per consecutive block of ``block`` rows (batch mode).

    ``X.shape[0]`` must be a multiple of ``block``; ``window`` must hold
    max(window fill, n_warmup, params.window) + block values; ``etas`` one
    stepsize per block of positive total weight (user schedules).

    Returns (code, done, exc, row) as ``sgd_single``; ``done`` is a multiple
    of ``block`` (whole blocks), ``row`` indexes X. ``rs``: as ``sgd_single``.
    """
    cdef Records rec
    check_lengths(X.shape[0], X.shape[1], y.shape[0], sample_weight.shape[0], w.shape[0],
                  wbar.shape[0])
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    take_records(state, STATE_DTYPE, params, PARAMS_DTYPE, &rec)
    try:
        check_sgd_records(<SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                          window.shape[0], block, "state")
        check_window(window, <SGDState *> rec.state.buf, "state")
        return _sgd_blocks(X, y, sample_weight, block, w, wbar, <SGDState *> rec.state.buf,
                           <const SGDParams *> rec.params.buf, window, etas,
                           rs_pointer(rs, X.shape[1], <const SGDParams *> rec.params.buf))
    finally:
        give_records(&rec)


cdef tuple _sgd_blocks(const double[:, ::1] X, const double[::1] y, const double[::1] sample_weight,
                       Py_ssize_t block, double[::1] w, double[::1] wbar, SGDState *s,
                       const SGDParams *p, double[::1] window, const double[::1] etas,
                       double *rs):
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], b, nb, i, j = 0, need = 0
    cdef double updates
    cdef const double *swp = &sample_weight[0] if sample_weight.shape[0] else NULL
    cdef BlockWork bw
    cdef Py_ssize_t bad = -1, row = -1, done = 0
    cdef int code = OK
    cdef double wsum
    cdef Poll pl
    if n == 0:
        return result(OK, 0, -1)
    # the statistical schedule appends a block to a window holding fewer than
    # max(fill, n_warmup, window) residuals (other schedules use no window)
    if block < 1 or n % block != 0 or (p.kind == KIND_STATISTICAL and
            <Py_ssize_t> max(s.fill, p.n_warmup, p.window) + block > window.shape[0]):
        return result(ERR_LAYOUT, 0, -1)
    nb = n // block
    if p.kind == KIND_ARRAY:
        for b in range(nb):
            wsum = 0.0
            for i in range(b * block, (b + 1) * block):
                wsum += swp[i] if swp != NULL else 1.0
            need += wsum > 0
        if etas.shape[0] < need:
            return result(ERR_LAYOUT, 0, -1)
    if block_work_init(&bw, block, d, window.shape[0]) != OK:
        return result(ERR_NOMEM, 0, -1)
    poll_init(&pl, &_hook)
    with nogil:
        for b in range(nb):
            updates = s.n_updates
            code = block_step(&X[b * block, 0], &y[b * block],
                              swp + b * block if swp != NULL else NULL, block, d, 0,
                              &w[0], &wbar[0], s, p, etas[j] if j < etas.shape[0] else 0.0,
                              &window[0] if window.shape[0] else NULL, &bw, &pl, &bad, rs)
            if code != OK:
                if bad >= 0:
                    row = bad + b * block
                break
            if s.n_updates > updates:
                j += 1            # user stepsizes go by updates (blocks of weight > 0)
            done = (b + 1) * block
        if code == OK and poll_final(&pl):
            code = ERR_INTERRUPTED        # every block applied
    block_work_free(&bw)
    if (code == OK or code == ERR_INTERRUPTED) and not iterate_finite(&w[0], d, s):
        if code == ERR_INTERRUPTED:
            pending_exception()
        code = ERR_NONFINITE
    return result(code, done, row)


def sgd_storage(const double[:, ::1] X, const double[::1] y, const double[::1] sample_weight,
                Py_ssize_t score_from, double[::1] w, double[::1] wbar, object state,
                object params, double[::1] window, double eta_user):
    """One sub-gradient step on the (weighted) mean loss over all rows of X
    (all data so far, Section 2.3); rows from ``score_from`` on are new and
    are scored; ``window`` collects their residuals for the restart rule and
    must hold max(window fill, params.window) + params.window values. Returns (code, done, exc, row) as ``sgd_single``: ``done`` is
    the number of new rows (the step was taken) or 0 (nothing changed)."""
    cdef Records rec
    check_lengths(X.shape[0], X.shape[1], y.shape[0], sample_weight.shape[0], w.shape[0],
                  wbar.shape[0])
    take_records(state, STATE_DTYPE, params, PARAMS_DTYPE, &rec)
    try:
        check_sgd_records(<SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                          window.shape[0], 0, "state")
        check_window(window, <SGDState *> rec.state.buf, "state")
        return _sgd_storage(X, y, sample_weight, score_from, w, wbar, <SGDState *> rec.state.buf,
                            <const SGDParams *> rec.params.buf, window, eta_user)
    finally:
        give_records(&rec)


cdef tuple _sgd_storage(const double[:, ::1] X, const double[::1] y, const double[::1] sample_weight,
                        Py_ssize_t score_from, double[::1] w, double[::1] wbar, SGDState *s,
                        const SGDParams *p, double[::1] window, double eta_user):
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef const double *swp = &sample_weight[0] if sample_weight.shape[0] else NULL
    cdef BlockWork bw
    cdef Py_ssize_t bad = -1
    cdef int code
    cdef Poll pl
    cdef double n_seen0 = s.n_seen
    if not 0 <= score_from <= n or (p.kind == KIND_STATISTICAL and
            <Py_ssize_t> max(s.fill, p.window) + <Py_ssize_t> p.window > window.shape[0]):
        return result(ERR_LAYOUT, 0, -1)
    if n == 0 or score_from == n:
        return result(OK, 0, -1)
    if block_work_init(&bw, n, d, window.shape[0]) != OK:
        return result(ERR_NOMEM, 0, -1)
    poll_init(&pl, &_hook)
    with nogil:
        code = block_step(&X[0, 0], &y[0], swp, n, d, score_from, &w[0], &wbar[0], s, p,
                          eta_user, &window[0] if window.shape[0] else NULL, &bw, &pl, &bad,
                          NULL)
        if code == OK:
            pl.work += 4.0 * n            # the order statistics over all residuals
            if poll_final(&pl):
                code = ERR_INTERRUPTED    # the step was taken
    block_work_free(&bw)
    if code == OK and not iterate_finite(&w[0], d, s):
        code = ERR_NONFINITE
    if code == ERR_INTERRUPTED and not iterate_finite(&w[0], d, s):
        pending_exception()
        code = ERR_NONFINITE
    stepped = code == OK or (code == ERR_INTERRUPTED and s.n_seen > n_seen0)
    return result(code, n - score_from if stepped else 0, bad)


def predict(const double[:, ::1] X, const double[::1] w, double intercept, double[::1] out):
    """out = X @ w + intercept (row by row, in the kernels' summation order)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i
    if w.shape[0] != d or out.shape[0] != n:
        raise ValueError(f"w must have {d} values and out {n}, got {w.shape[0]} and "
                         f"{out.shape[0]}")
    if n == 0:
        return
    with nogil:
        for i in range(n):
            out[i] = sf_dot(d, &X[i, 0], &w[0]) + intercept


# ----------------------------------------------------------------------------
# Several quantiles in one pass (single-sample mode): the row is read once,
# each quantile keeps its own iterate, average, schedule state and window.

cpdef enum:
    NONCROSS_NONE = 0     # independent updates (predict rearranges)
    NONCROSS_PROJECT = 1  # residuals at the predictions projected onto the ordered cone


def sgd_multi(object X, const double[::1] y, const double[::1] sample_weight,
              double[:, ::1] W, double[:, ::1] Wbar, SGDState[::1] states,
              const SGDParams[::1] params, double[:, ::1] windows, int noncrossing,
              object plug_in=None, object rs=None, object preds=None):
    """One single-sample update per row of X for each of m quantiles.

    ``W``, ``Wbar``: (m, d) iterates and averages; ``states``/``params``: (m,)
    records (STATE_DTYPE / PARAMS_DTYPE, one per quantile, taus increasing);
    ``windows``: (m, capacity) residual windows. ``X``: C-contiguous float64
    or float32 (n, d); float32 rows are read as they are, each widened
    exactly into a row buffer before the pass that reads it (bit-identical
    to ``X.astype(np.float64)``, without the copy). With ``noncrossing`` =
    NONCROSS_PROJECT the m predictions at x are projected onto the ordered
    cone (pool adjacent violators) before the residuals that decide the
    sub-gradients. Per quantile the update is exactly ``sgd_single``'s (the
    user-array schedule excepted: ERR_LAYOUT); with NONCROSS_NONE each
    quantile's state is bit-identical to its own ``sgd_single`` run. As there,
    a row's updates and the next row's predictions (and ||x||^2, once for all
    quantiles) come from one pass over the iterates (``sf_multi_axpy_dot2``),
    each sum in ``sf_dot2``'s order.
    ``plug_in``: None, or (m, 2 d) running means of each quantile's plug-in
    intercept (``sgd_single``'s ``plug_in``; averaging, an intercept and the
    check loss). ``rs``: None, or (m, ``rs_length(d + fit_intercept)``) random-
    scaling sums, one row per quantile (``sgd_single``'s ``rs``; the plug-in's
    means are then in their tails and ``plug_in`` is ignored). ``preds``: None,
    or (n, m): row i's m predictions under the iterates before its update.

    Returns (code, done, exc, row) as ``sgd_single``: every state holds the
    effect of exactly ``done`` rows; on another error than ERR_INTERRUPTED
    the states may be partly moved (the caller works on copies).
    """
    cdef Py_ssize_t n, d, m = W.shape[0], q, wcap = windows.shape[1]
    cdef const double[:, ::1] X64
    cdef const float[:, ::1] X32
    cdef double[:, ::1] pv, rv, ov
    cdef double *rsp = NULL
    cdef double *pt
    cdef Py_ssize_t rlen = 0, da
    cdef const SGDParams *p
    cdef const double *p64 = NULL
    cdef const float *p32 = NULL
    if is_float32(X):
        X32 = X
        n, d = X32.shape[0], X32.shape[1]
        if n > 0:
            p32 = &X32[0, 0]
    else:
        X64 = X
        n, d = X64.shape[0], X64.shape[1]
        if n > 0:
            p64 = &X64[0, 0]
    check_lengths(n, d, y.shape[0], sample_weight.shape[0], W.shape[1], Wbar.shape[1])
    if plug_in is not None:
        pv = plug_in
        if pv.shape[0] != W.shape[0] or pv.shape[1] != 2 * d:
            raise ValueError(f"plug_in must have shape ({W.shape[0]}, {2 * d}), got "
                             f"({pv.shape[0]}, {pv.shape[1]})")
    if preds is not None:
        ov = preds
        if ov.shape[0] != n or ov.shape[1] != m:
            raise ValueError(f"preds must have shape ({n}, {m}), got ({ov.shape[0]}, "
                             f"{ov.shape[1]})")
    if not (m >= 1 and Wbar.shape[0] == m and states.shape[0] == m and params.shape[0] == m
            and windows.shape[0] == m):
        raise ValueError(f"W, Wbar, states, params and windows must have one row per "
                         f"quantile, got {W.shape[0]}, {Wbar.shape[0]}, {states.shape[0]}, "
                         f"{params.shape[0]} and {windows.shape[0]}")
    for q in range(m):
        check_sgd_records(&states[q], &params[q], wcap, 1, f"states[{q}]")
        check_window(windows[q], &states[q], f"states[{q}]")
    if n == 0:
        return result(OK, 0, -1)
    for q in range(m):
        p = &params[q]
        if p.kind == KIND_ARRAY or p.mode != MODE_SINGLE or p.average != params[0].average \
                or p.fit_intercept != params[0].fit_intercept:
            return result(ERR_LAYOUT, 0, -1)
        if p.kind == KIND_STATISTICAL and (wcap < p.window or wcap < p.n_warmup
                                           or <Py_ssize_t> states[q].fill >= wcap):
            return result(ERR_LAYOUT, 0, -1)
    da = d + (1 if params[0].fit_intercept != 0 else 0)
    if rs is not None:
        rv = rs
        rlen = rs_len(da)
        if rv.shape[0] != m or rv.shape[1] != rlen:
            raise ValueError(f"rs must have shape ({m}, {rlen}) (rs_length(d + "
                             f"fit_intercept) per quantile), got ({rv.shape[0]}, "
                             f"{rv.shape[1]})")
        rsp = &rv[0, 0]
    pt = plug_in_means(&params[0], rsp, &pv[0, 0] if plug_in is not None else NULL, d)
    return _sgd_multi(p64, p32, n, d, m,
                      &y[0], &sample_weight[0] if sample_weight.shape[0] else NULL, W, Wbar,
                      &states[0], &params[0], windows, noncrossing, rsp, rlen, pt,
                      rlen if rsp != NULL else 2 * d, &ov[0, 0] if preds is not None else NULL)


cdef void multi_average(Py_ssize_t d, Py_ssize_t m, const double *x, double y, double wi,
                        const MultiWork *mw, Py_ssize_t ld, double[:, ::1] Wbar,
                        SGDState *S, const SGDParams *P, double *rsp, Py_ssize_t rlen,
                        double *pt, Py_ssize_t pstride) noexcept nogil:
    # The averages of the quantiles that moved, after the row's updates (as
    # in sgd_single)
    cdef Py_ssize_t q
    cdef bint fit_b = P[0].fit_intercept != 0
    for q in range(m):
        if not (mw.upd[q] and (S[q].avg_on != 0 or P[q].kind != KIND_STATISTICAL)):
            continue
        if pt != NULL:
            plug_in_average_step(d, x, y, mw.W0 + q * ld, &Wbar[q, 0], &S[q], &P[q],
                                 mw.step[q], wi, rsp + rlen * q if rsp != NULL else NULL,
                                 fit_b, pt + pstride * q)
        else:
            average_step(d, mw.W0 + q * ld, &Wbar[q, 0], &S[q],
                         rsp + rlen * q if rsp != NULL else NULL, fit_b)


cdef tuple _sgd_multi(const double *X64, const float *X32, Py_ssize_t n, Py_ssize_t d,
                      Py_ssize_t m, const double *y, const double *swp, double[:, ::1] W,
                      double[:, ::1] Wbar, SGDState *S, const SGDParams *P,
                      double[:, ::1] windows, int noncrossing, double *rsp, Py_ssize_t rlen,
                      double *pt, Py_ssize_t pstride, double *po):
    # The rows are X64 (float64) or X32 (float32, X64 NULL), n x d, C order;
    # swp: the weights (NULL: all 1). Each quantile's row is quantile_row on
    # its own state; the updates of all m then run together, in one pass over
    # the m iterates that also gives the next row's predictions (as
    # sgd_single's sf_axpy_dot2 does for one), each sum in sf_dot2's order.
    cdef MultiWork mw
    cdef Py_ssize_t i, q, row = -1, done = 0
    cdef Py_ssize_t ld = (d + 7) & ~(<Py_ssize_t> 7)
    cdef bint fit_b = P[0].fit_intercept != 0, avg = P[0].average != 0
    cdef bint have_dot = False, any_upd
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef double xx = 0.0, wi = 1.0
    cdef double *tmp
    cdef const double *x
    cdef int code
    cdef Poll pl
    # a row's work, the random-scaling sums' da^2 / 2 included
    cdef double row_work = m * (2 * d + ROW_WORK + (0.5 * da * da if rsp != NULL else 0.0))
    if multi_work_init(&mw, m, d, ld, windows.shape[1]) != OK:
        return result(ERR_NOMEM, 0, -1)
    for q in range(m):
        memcpy(mw.W0 + q * ld, &W[q, 0], d * sizeof(double))
    code = OK
    poll_init(&pl, &_hook)
    with nogil:
        for i in range(n):
            if poll_stop(&pl, row_work):
                code = ERR_INTERRUPTED
                break
            x = stream_row(X64, X32, i, d, mw.cur, not have_dot)
            if not have_dot:
                # (a call's first row) the predictions alone: no quantile moves
                memset(mw.upd, 0, m)
                sf_multi_axpy_dot2(d, m, mw.coef, mw.upd, x, mw.W0, ld, x, mw.dots, &xx)
            have_dot = False
            # every quantile's residual first: a bad row changes nothing
            for q in range(m):
                mw.pred[q] = mw.dots[q] + S[q].intercept
                mw.res[q] = y[i] - mw.pred[q]
                if not (fabs(mw.res[q]) <= DBL_MAX and xx <= DBL_MAX):
                    code = ERR_BADINPUT
                    break
            if code != OK:
                row = i
                break
            if po != NULL:
                memcpy(po + i * m, mw.pred, m * sizeof(double))
            if noncrossing == NONCROSS_PROJECT and m > 1:
                pav_increasing(mw.pred, m, mw.pav, mw.pav + m)
                for q in range(m):
                    mw.res[q] = y[i] - mw.pred[q]
            if swp != NULL:
                wi = swp[i]
            any_upd = False
            for q in range(m):
                code = quantile_row(&S[q], &P[q], &windows[q, 0], mw.work, x, d, da,
                                    mw.res[q], xx, wi, 0.0, fit_b, &mw.coef[q], &mw.step[q])
                mw.upd[q] = code == OK
                any_upd = any_upd or code == OK
                if code == NO_UPDATE:
                    code = OK
                elif code != OK:
                    break
            if code != OK:
                row = i
                break
            if i + 1 < n:
                if X32 != NULL:
                    # the next row widened first (this one, x, is read below)
                    sf_widen(d, X32 + (i + 1) * d, mw.nxt)
                    sf_multi_axpy_dot2(d, m, mw.coef, mw.upd, x, mw.W0, ld, mw.nxt, mw.dots,
                                       &xx)
                    tmp = mw.cur
                    mw.cur = mw.nxt
                    mw.nxt = tmp
                else:
                    sf_multi_axpy_dot2(d, m, mw.coef, mw.upd, x, mw.W0, ld, x + d, mw.dots,
                                       &xx)
                have_dot = True
            elif any_upd:
                for q in range(m):
                    if mw.upd[q]:
                        sf_axpy(d, mw.coef[q], x, mw.W0 + q * ld)
            if avg and any_upd:
                multi_average(d, m, x, y[i], wi, &mw, ld, Wbar, S, P, rsp, rlen, pt, pstride)
            done = i + 1
        if code == OK and poll_final(&pl):
            code = ERR_INTERRUPTED
        # copied back whatever stopped the loop
        for q in range(m):
            memcpy(&W[q, 0], mw.W0 + q * ld, d * sizeof(double))
    free(mw.work)
    if code == OK or code == ERR_INTERRUPTED:
        for q in range(m):
            if not iterate_finite(&W[q, 0], d, &S[q]):
                if code == ERR_INTERRUPTED:
                    pending_exception()
                code = ERR_NONFINITE
                break
    return result(code, done, row)
