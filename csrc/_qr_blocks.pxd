# The batch (Section 2.2) and all-data-so-far (Section 2.3) modes' pieces:
# one pass over a block's rows (residuals, sub-gradient sums, loss), the
# schedule's windows for a block (warm-up, storage's re-scored windows, a
# batch's window), and their work space. _quantile.pyx's block step runs them.
from libc.float cimport DBL_MAX
from libc.math cimport fabs
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from _common cimport OK, ERR_NOMEM, ERR_INTERRUPTED, ERR_BADINPUT
from _dense cimport sf_axpy, sf_dot2
from _order_stats cimport median_abs
from _power_iter cimport top_eigenvalue
from _qr_schedule cimport (SGDState, SGDParams, MODE_STORAGE, JUMP_NONE, JUMP_RESTART,
                           NO_UPDATE, calibrated_cl, fresh_estimates, full_window, jump_test,
                           loss_and_coef, restart, row_absmax, window_done)
from _work_poll cimport WorkHook, Poll, poll_quiet, poll_stop, ROW_WORK


cdef struct BlockSums:
    double gsum           # sum of w_i g_i (the intercept's gradient, unnormalised)
    double wsum           # sum of w_i
    double loss           # weighted loss of the new rows
    double n_new          # new rows
    double sumsq          # sum of w_i (||x_i||^2 + fit_intercept)
    double xmax           # max |x_ij| (warm-up blocks only)
    double sumsq_new      # sumsq and wsum of the new rows (storage: the jump test's window)
    double wsum_new


cdef inline int block_pass(const double *X, const double *y, const double *sw, Py_ssize_t m,
                    Py_ssize_t d, Py_ssize_t score_from, const double *w, double b,
                    const SGDParams *p, double *resid, double *grad, BlockSums *out,
                    bint track_max, Poll *pl, Py_ssize_t *bad) noexcept nogil:
    # One pass over the rows: resid = y - X w - b, the scale and finiteness
    # check, the weighted (sub-)gradient grad = sum w_i g_i x_i and the sums.
    # Writes nothing but its outputs, so an interrupt here leaves the state
    # untouched. Returns OK, ERR_BADINPUT (row in bad) or ERR_INTERRUPTED.
    cdef Py_ssize_t i, j
    cdef double r, g, xx, wi, fit_one = 1.0 if p.fit_intercept != 0 else 0.0
    cdef double dummy = 0.0
    out.gsum = 0.0
    out.wsum = 0.0
    out.loss = 0.0
    out.n_new = 0.0
    out.sumsq = 0.0
    out.xmax = 0.0
    out.sumsq_new = 0.0
    out.wsum_new = 0.0
    for j in range(d):
        grad[j] = 0.0
    for i in range(m):
        if poll_stop(pl, 2 * d + ROW_WORK):
            return ERR_INTERRUPTED
        r = y[i] - (sf_dot2(d, &X[i * d], w, &xx) + b)
        if not (fabs(r) <= DBL_MAX and xx <= DBL_MAX):
            bad[0] = i
            return ERR_BADINPUT
        resid[i] = r
        wi = sw[i] if sw != NULL else 1.0
        if i >= score_from:
            g = loss_and_coef(r, p, &out.loss, wi)
            out.n_new += 1
        else:
            g = loss_and_coef(r, p, &dummy, wi)
        if wi == 0:
            continue
        # grad += w_i g_i x_i
        sf_axpy(d, wi * g, &X[i * d], grad)
        out.gsum += wi * g
        out.wsum += wi
        out.sumsq += wi * (xx + fit_one)
        if i >= score_from:
            out.sumsq_new += wi * (xx + fit_one)
            out.wsum_new += wi
        if track_max:
            out.xmax = row_absmax(&X[i * d], d, out.xmax)
    return OK


cdef inline Py_ssize_t compact(double *r, const double *sw, Py_ssize_t m, Py_ssize_t split,
                        Py_ssize_t *k_split) noexcept nogil:
    # Keep the residuals of rows with positive weight, in order: the order
    # statistics use those, unweighted. k_split: how many of them come from
    # rows before `split`.
    cdef Py_ssize_t i, k = 0
    k_split[0] = split
    if sw == NULL:
        return m
    for i in range(m):
        if i == split:
            k_split[0] = k
        if sw[i] != 0:
            r[k] = r[i]
            k += 1
    if split >= m:
        k_split[0] = k
    return k


cdef struct BlockWork:
    double *resid         # m residuals
    double *grad          # d
    double *work          # order statistics: max(m, window capacity)
    double *eig           # 2 d (power iteration)


cdef inline double restart_cu(WorkHook *hook, const double *X, const double *sw, Py_ssize_t m,
                              Py_ssize_t d,                              Py_ssize_t first, bint fit_b, double *eig) noexcept nogil:
    # The top eigenvalue of rows [first, m) for a restart. The state has
    # already moved, so this one is not interruptible (it is rare and short).
    cdef Poll quiet
    cdef double cu = -1.0
    poll_quiet(&quiet, hook)
    top_eigenvalue(X + first * d, sw + first if sw != NULL else NULL, m - first, d, fit_b,
                   eig, eig + d, &quiet, &cu)
    return cu


cdef inline int block_warm_up(SGDState *s, const SGDParams *p, const double *X, const double *sw,
                       Py_ssize_t m, Py_ssize_t d, BlockWork *bw, const BlockSums *bs,
                       Py_ssize_t nr, double *win, bint warm, double cu) noexcept nogil:
    # A block of the warm-up: its rows calibrate the schedule; the block that
    # completes n_warmup rows (storage: the first call) sets Cl, Cu, D0, b0.
    # Returns NO_UPDATE for a block that only warms up, OK, or an error.
    cdef Py_ssize_t da = d + (1 if p.fit_intercept != 0 else 0), n0
    cdef const double *r0
    s.sumsq += bs.sumsq
    s.n_sumsq += bs.wsum
    s.xmax = max(s.xmax, bs.xmax)
    if p.mode == MODE_STORAGE:
        r0 = bw.resid
        n0 = nr
    else:
        memcpy(win + <Py_ssize_t> s.fill, bw.resid, nr * sizeof(double))
        s.fill += nr
        if not warm:
            return NO_UPDATE
        r0 = win
        n0 = <Py_ssize_t> s.fill
        s.fill = 0
    calibrated_cl(s, da)      # checked by the caller before the state changed
    s.cu = cu if cu >= s.cl else s.cl
    return fresh_estimates(s, p, r0, n0, bw.work, da)


cdef inline int storage_windows(WorkHook *hook, SGDState *s, const SGDParams *p,
                                const double *X, const double *sw,
                         Py_ssize_t m, Py_ssize_t d, Py_ssize_t score_from, BlockWork *bw,
                         const BlockSums *bs, Py_ssize_t nr, Py_ssize_t first_new,
                         double *win) noexcept nogil:
    # Storage mode: all residuals at the current iterate form the window of
    # the plateau test and b0. The restart rule watches the newest rows (over
    # all data a change shows only gradually): their residuals, at the
    # iterate before the step as in batch mode, collect in the window buffer
    # until it holds a window (or a call brings one).
    cdef Py_ssize_t da = d + (1 if p.fit_intercept != 0 else 0)
    cdef Py_ssize_t nj = nr - first_new
    cdef const double *rj = NULL
    cdef int jump = JUMP_NONE, err = OK
    if nj >= p.window:
        rj = bw.resid + first_new
        s.fill = 0
        s.win_sumsq = bs.sumsq_new
        s.win_wsum = bs.wsum_new
    elif nj > 0:
        memcpy(win + <Py_ssize_t> s.fill, bw.resid + first_new, nj * sizeof(double))
        s.fill += nj
        s.win_sumsq += bs.sumsq_new
        s.win_wsum += bs.wsum_new
        if s.fill >= p.window:
            rj = win
            nj = <Py_ssize_t> s.fill
    if rj != NULL:
        jump = jump_test(s, p, median_abs(rj, nj, bw.work))
    if jump == JUMP_RESTART:
        # Cu afresh from this call's new rows (all data would cost 30 passes
        # over everything; the new rows are what changed)
        err = restart(s, p, rj, nj, bw.work, da,
                      restart_cu(hook, X, sw, m, d, score_from, p.fit_intercept != 0, bw.eig))
    elif jump == JUMP_NONE:
        window_done(s, p, bw.resid, nr, median_abs(bw.resid, nr, bw.work), bw.work, da)
    if rj != NULL:
        s.fill = 0
        s.win_sumsq = 0
        s.win_wsum = 0
    return err


cdef inline int batch_window(WorkHook *hook, SGDState *s, const SGDParams *p,
                             const double *X, const double *sw,
                      Py_ssize_t m, Py_ssize_t d, BlockWork *bw, const BlockSums *bs,
                      Py_ssize_t nr, double *win) noexcept nogil:
    # Batch mode: the block's residuals join the window; a full window is
    # tested (and may restart phase one, with Cu from this block).
    cdef Py_ssize_t da = d + (1 if p.fit_intercept != 0 else 0)
    cdef int err = OK
    memcpy(win + <Py_ssize_t> s.fill, bw.resid, nr * sizeof(double))
    s.fill += nr
    s.win_sumsq += bs.sumsq
    s.win_wsum += bs.wsum
    if s.fill >= p.window:
        if full_window(s, p, win, <Py_ssize_t> s.fill, bw.work, da) == JUMP_RESTART:
            err = restart(s, p, win, <Py_ssize_t> s.fill, bw.work, da,
                          restart_cu(hook, X, sw, m, d, 0, p.fit_intercept != 0, bw.eig))
        s.fill = 0
        s.win_sumsq = 0
        s.win_wsum = 0
    return err


cdef inline int block_work_init(BlockWork *bw, Py_ssize_t m, Py_ssize_t d, Py_ssize_t wcap) noexcept:
    bw.resid = <double *> malloc(max(m, 1) * sizeof(double))
    bw.work = <double *> malloc(max(max(m, wcap), 1) * sizeof(double))
    bw.grad = <double *> malloc(3 * max(d, 1) * sizeof(double))
    bw.eig = bw.grad + d if bw.grad != NULL else NULL
    if bw.resid == NULL or bw.work == NULL or bw.grad == NULL:
        block_work_free(bw)
        return ERR_NOMEM
    return OK


cdef inline void block_work_free(BlockWork *bw) noexcept:
    free(bw.resid)
    free(bw.work)
    free(bw.grad)
    bw.resid = bw.work = bw.grad = bw.eig = NULL
