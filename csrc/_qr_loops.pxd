# The row and block loops of the linear learner (csrc/_quantile.pyx's
# LinearSGD): single-sample rows for one quantile or several, batch blocks,
# and the all-data-so-far step. Each loop works on the buffers a Lin names
# (the learner's live buffers for a one-row call, its scratch copy for a
# block) and returns a code; none allocates, none touches Python.
#
# No BLAS here: every product is a plain C loop over rows in a fixed order
# (_dense.h), so results do not depend on the BLAS library or its thread
# count, and a block's residuals, scale check and gradient come from one pass
# over its rows.
#
# Paper: Shen, Xia & Zhou, "Online Quantile Regression", JMLR 26 (2025).
from libc.math cimport fabs
from libc.float cimport DBL_MAX
from libc.string cimport memcpy, memset

from _common cimport OK, ERR_INTERRUPTED, ERR_NONFINITE, ERR_BADINPUT, ERR_SCALE
from _qr_schedule cimport (SGDState, SGDParams, KIND_STATISTICAL, KIND_ARRAY, MODE_STORAGE,
                           SQRT_DBL_MIN, NO_UPDATE, quantile_row, block_eta, fixed_eta,
                           clock_step, dim_of_row, dim_decided)
from _qr_blocks cimport (BlockSums, BlockWork, block_pass, compact, block_warm_up,
                         storage_windows, batch_window)
from _qr_multi cimport MultiWork
from _qr_inference cimport rs_step
from _qr_plug_in cimport plug_in_average_step
from _qr_scaler cimport scale_row, average_step_scaled
from _qr_drift cimport drift_alarm, drift_restart
from _power_iter cimport top_eigenvalue
from _pav cimport pav_increasing
from _work_poll cimport WorkHook, Poll, poll_stop, poll_final, ROW_WORK
from _dense cimport (sf_dot, sf_dot2, sf_axpy, sf_average, sf_axpy_dot2,
                     sf_axpy_dot2_f32, sf_multi_axpy_dot2, sf_widen)

cpdef enum:
    NONCROSS_NONE = 0     # independent updates (predict rearranges)
    NONCROSS_PROJECT = 1  # residuals at the predictions projected onto the ordered cone


cdef struct Lin:
    # Where one call's loop works: m quantiles of d features, iterates and
    # averages in rows ld apart; every pointer but S, P, W, Wbar may be NULL.
    Py_ssize_t d, m, ld, wcap, rlen
    SGDState *S           # m state records
    const SGDParams *P    # m parameter records
    double *W             # m x ld iterates
    double *Wbar          # m x ld averages
    double *win           # m x wcap residual windows
    double *rs            # m x rlen random-scaling sums (NULL: not kept)
    double *pt            # the plug-in intercepts' means, pstride apart (NULL: none)
    Py_ssize_t pstride
    double *scaler        # 2 d + 1 running means and sums of squares (NULL: none)
    double *work          # the order statistics' work space, max(wcap, 1)
    double *zbuf          # 3 d: the scaler's standardised row and its scratch
    double *cur           # d: a float32 row widened (and nxt: the next one)
    double *nxt
    MultiWork *mw         # several quantiles' row buffers (NULL for one)
    double *alarms        # room for dcap drift-alarm rows
    Py_ssize_t dcap
    Py_ssize_t n_alarm    # alarms raised by this call (may exceed dcap)
    WorkHook *hook


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


cdef inline bint iterate_finite(const double *w, Py_ssize_t d, const SGDState *s) noexcept nogil:
    # A diverging run (e.g. a too large constant stepsize) is reported, so the
    # caller can keep its previous state.
    cdef Py_ssize_t j
    if not (fabs(s.intercept) < 1e300):    # also false for NaN
        return False
    for j in range(d):
        if not (fabs(w[j]) < 1e300):
            return False
    return True


cdef inline double sparse_nnz(const double *v, Py_ssize_t k) noexcept nogil:
    # a row's non-zero values (explicit zeros of a CSR row do not count)
    cdef Py_ssize_t i
    cdef double n = 0.0
    for i in range(k):
        n += v[i] != 0
    return n


cdef inline double row_dim(SGDState *s, const SGDParams *p, const double *x, Py_ssize_t k,
                           bint sparse, double da_full, double wi,
                           bint *warming) noexcept nogil:
    # The schedule's d for this row's quantile_row (dim_of_row): x holds the
    # row's k values (dense: all d of them). A dense row counts as
    # n_features non-zeros whatever its values, so that d is n_features
    # (+1), the paper's d and the dense path's as it always was; only sparse
    # rows count their stored non-zeros (counted in the warm-up only).
    # warming: the row is a warm-up row, so the caller calls dim_decided if
    # it ends the warm-up.
    warming[0] = False
    if p.kind != KIND_STATISTICAL:
        return da_full
    if s.phase != 0:
        return s.dim if s.dim > 0 else da_full
    warming[0] = wi != 0
    if wi == 0:
        return dim_of_row(s, p, 0.0, da_full, wi)
    return dim_of_row(s, p, sparse_nnz(x, k) if sparse else <double> k, da_full, wi)


cdef inline bint all_finite(const Lin *c) noexcept nogil:
    cdef Py_ssize_t q
    for q in range(c.m):
        if not iterate_finite(c.W + q * c.ld, c.d, &c.S[q]):
            return False
    return True


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


# ----------------------------------------------------------------------------
# Single-sample updates (Section 2.1 of the paper), one quantile.

cdef inline int single_rows(Lin *c, const double *X64, const float *X32, Py_ssize_t n,
                            const double *y, const double *swp, const double *etas,
                            Poll *pl, Py_ssize_t *done, Py_ssize_t *row) noexcept nogil:
    # One update per row of weight > 0 (swp NULL: all 1); etas: a user
    # schedule's stepsizes, one per update. done: rows applied (the state
    # holds exactly their effect); row: the row a code other than OK or
    # ERR_INTERRUPTED refers to (-1: none).
    # (everything the loop reads in locals: the compiler need not reload
    # them from c after each store to the iterate)
    cdef SGDState *s = c.S
    cdef const SGDParams *p = c.P
    cdef Py_ssize_t d = c.d, i, j = 0
    cdef double *wp = c.W
    cdef double *wbar = c.Wbar
    cdef double *sc = c.scaler
    cdef double *zbuf = c.zbuf
    cdef double *cur = c.cur
    cdef double *nxt = c.nxt
    cdef double *win = c.win
    cdef double *work = c.work
    cdef double *rs = c.rs
    cdef double *pt = c.pt
    cdef double *tmp
    cdef double r, coef = 0.0, step = 0.0, xw = 0.0, xx = 0.0, wi = 1.0
    cdef bint have_dot = False
    cdef const double *x
    cdef int kind = <int> p.kind, code = OK
    cdef bint stat = kind == KIND_STATISTICAL
    cdef bint fit_b = p.fit_intercept != 0
    cdef bint avg = p.average != 0
    cdef bint drift = p.drift != 0, warming = False
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef double rd
    # a row's work, the random-scaling sums' da^2 / 2 included
    cdef double row_work = d + ROW_WORK + (0.5 * da * da if rs != NULL else 0.0)
    cdef Py_ssize_t taken = 0
    done[0] = 0
    row[0] = -1
    # The schedule's d (row_dim): per row only in the warm-up; once it is
    # over (phase 0 never comes back) d is fixed -- dim_decided keeps the
    # warm-up's last row's -- so it is read once here, not on every row
    rd = <double> da
    if stat and s.phase != 0:
        rd = row_dim(s, p, NULL, 0, False, <double> da, wi, &warming)
    for i in range(n):
        if poll_stop(pl, row_work):
            code = ERR_INTERRUPTED
            break
        x = stream_row(X64, X32, i, d, cur, not have_dot)
        if swp != NULL:
            wi = swp[i]
        if stat and s.phase == 0:
            rd = row_dim(s, p, x, d, False, <double> da, wi, &warming)
        if sc != NULL:
            # the row joins the running location/scale first (a bad row
            # fails the call, which the caller then discards)
            if scale_row(x, d, wi, sc, fit_b, zbuf, zbuf + d, wp, &s.intercept) != OK:
                code = ERR_BADINPUT
                row[0] = i
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
            row[0] = i
            break
        if drift and wi != 0 and s.n_avg > 0 and (s.avg_on != 0 or not stat):
            # the change test: the row's loss under the average against the
            # iterate's, before its update; an alarm restarts the average (and
            # the clock, from this row's step on)
            if drift_alarm(s, p, r, y[i] - (sf_dot(d, x, wbar) + s.intercept_avg), wi):
                drift_restart(s, p)
                if c.n_alarm < c.dcap:
                    c.alarms[c.n_alarm] = s.n_seen
                c.n_alarm += 1
        code = quantile_row(s, p, win, work, x, d, rd, r, xx, wi,
                            etas[j] if kind == KIND_ARRAY and wi != 0 else 0.0, fit_b,
                            &coef, &step)
        if warming and s.phase != 0:
            dim_decided(s, p, rd)     # (rd stays: the d of every later row)
            warming = False
        taken = i + 1
        if code == NO_UPDATE:
            code = OK
            continue          # weight 0 or a warm-up row: scored (and remembered) only
        if code != OK:
            row[0] = i
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
                average_step_scaled(d, wp, wbar, s, sc, zbuf + d, fit_b, zbuf + 2 * d)
            elif pt != NULL:
                plug_in_average_step(d, x, y[i], wp, wbar, s, p, step, wi, rs, fit_b, pt)
            else:
                average_step(d, wp, wbar, s, rs, fit_b)
    done[0] = taken
    if code == OK and poll_final(pl):
        code = ERR_INTERRUPTED        # every row applied
    return code


# ----------------------------------------------------------------------------
# Several quantiles in one pass (single-sample mode): the row is read once,
# each quantile keeps its own iterate, average, schedule state and window.

cdef inline void multi_average(Lin *c, const MultiWork *mw, const double *x, double y,
                               double wi) noexcept nogil:
    # The averages of the quantiles that moved, after the row's updates (as
    # in single_rows)
    cdef Py_ssize_t q, d = c.d
    cdef bint fit_b = c.P[0].fit_intercept != 0
    for q in range(c.m):
        if not (mw.upd[q] and (c.S[q].avg_on != 0 or c.P[q].kind != KIND_STATISTICAL)):
            continue
        if c.pt != NULL:
            plug_in_average_step(d, x, y, c.W + q * c.ld, c.Wbar + q * c.ld, &c.S[q], &c.P[q],
                                 mw.step[q], wi, c.rs + c.rlen * q if c.rs != NULL else NULL,
                                 fit_b, c.pt + c.pstride * q)
        else:
            average_step(d, c.W + q * c.ld, c.Wbar + q * c.ld, &c.S[q],
                         c.rs + c.rlen * q if c.rs != NULL else NULL, fit_b)


cdef inline int multi_rows(Lin *c, const double *X64, const float *X32, Py_ssize_t n,
                           const double *y, const double *swp, int noncrossing, double *po,
                           Poll *pl, Py_ssize_t *done, Py_ssize_t *row) noexcept nogil:
    # Each quantile's row is quantile_row on its own state; the updates of all
    # m then run together, in one pass over the m iterates that also gives
    # the next row's predictions (as single_rows' sf_axpy_dot2 does for one),
    # each sum in sf_dot2's order. With noncrossing = NONCROSS_PROJECT the m
    # predictions at x are projected onto the ordered cone (pool adjacent
    # violators) before the residuals that decide the sub-gradients. po: NULL,
    # or n x m, row i's predictions under the iterates before its update.
    cdef MultiWork mw = c.mw[0]       # (a copy: its pointers in registers)
    cdef SGDState *S = c.S
    cdef const SGDParams *P = c.P
    cdef double *W = c.W
    cdef double *win = c.win
    cdef Py_ssize_t wcap = c.wcap
    cdef Py_ssize_t i, q, d = c.d, m = c.m, ld = c.ld, taken = 0
    cdef bint fit_b = P[0].fit_intercept != 0, avg = P[0].average != 0
    cdef bint have_dot = False, any_upd, warming = False
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef double xx = 0.0, wi = 1.0, rd
    cdef double *tmp
    cdef const double *x
    cdef int code = OK
    cdef double row_work = m * (2 * d + ROW_WORK + (0.5 * da * da if c.rs != NULL else 0.0))
    done[0] = 0
    row[0] = -1
    for i in range(n):
        if poll_stop(pl, row_work):
            code = ERR_INTERRUPTED
            break
        x = stream_row(X64, X32, i, d, mw.cur, not have_dot)
        if not have_dot:
            # (a call's first row) the predictions alone: no quantile moves
            memset(mw.upd, 0, m)
            sf_multi_axpy_dot2(d, m, mw.coef, mw.upd, x, W, ld, x, mw.dots, &xx)
        have_dot = False
        # every quantile's residual first: a bad row changes nothing
        for q in range(m):
            mw.pred[q] = mw.dots[q] + S[q].intercept
            mw.res[q] = y[i] - mw.pred[q]
            if not (fabs(mw.res[q]) <= DBL_MAX and xx <= DBL_MAX):
                code = ERR_BADINPUT
                break
        if code != OK:
            row[0] = i
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
            rd = row_dim(&S[q], &P[q], x, d, False, <double> da, wi, &warming)
            code = quantile_row(&S[q], &P[q], win + q * wcap, mw.work, x, d, rd,
                                mw.res[q], xx, wi, 0.0, fit_b, &mw.coef[q], &mw.step[q])
            if warming and S[q].phase != 0:
                dim_decided(&S[q], &P[q], rd)
            mw.upd[q] = code == OK
            any_upd = any_upd or code == OK
            if code == NO_UPDATE:
                code = OK
            elif code != OK:
                break
        if code != OK:
            row[0] = i
            break
        if i + 1 < n:
            if X32 != NULL:
                # the next row widened first (this one, x, is read below)
                sf_widen(d, X32 + (i + 1) * d, mw.nxt)
                sf_multi_axpy_dot2(d, m, mw.coef, mw.upd, x, W, ld, mw.nxt, mw.dots, &xx)
                tmp = mw.cur
                mw.cur = mw.nxt
                mw.nxt = tmp
            else:
                sf_multi_axpy_dot2(d, m, mw.coef, mw.upd, x, W, ld, x + d, mw.dots, &xx)
            have_dot = True
        elif any_upd:
            for q in range(m):
                if mw.upd[q]:
                    sf_axpy(d, mw.coef[q], x, W + q * ld)
        if avg and any_upd:
            multi_average(c, &mw, x, y[i], wi)
        taken = i + 1
    done[0] = taken
    c.mw[0].cur = mw.cur          # (the float32 row buffers may have swapped)
    c.mw[0].nxt = mw.nxt
    if code == OK and poll_final(pl):
        code = ERR_INTERRUPTED
    return code


# ----------------------------------------------------------------------------
# Batch (Section 2.2) and all-data-so-far (Section 2.3) updates: one
# sub-gradient step on the (weighted) mean loss over a block of rows.

cdef inline int block_step(Lin *c, const double *X, const double *y, const double *sw,
                           Py_ssize_t m, Py_ssize_t score_from, double eta_user,
                           BlockWork *bw, Poll *pl, Py_ssize_t *bad) noexcept nogil:
    # One update on rows [0, m); rows >= score_from are new: they add to the
    # prequential loss and (batch mode) to the residual window. Returns OK,
    # ERR_BADINPUT (row in bad), ERR_SCALE (the warm-up's sum of ||x||^2
    # over- or underflows) or ERR_INTERRUPTED; the state is unchanged unless OK.
    cdef SGDState *s = c.S
    cdef const SGDParams *p = c.P
    cdef Py_ssize_t d = c.d
    cdef double *w = c.W
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
            code = block_warm_up(s, p, X, sw, m, d, bw, &bs, nr, c.win, warm, cu)
        elif p.mode == MODE_STORAGE:
            code = storage_windows(c.hook, s, p, X, sw, m, d, score_from, bw, &bs, nr,
                                   first_new, c.win)
        else:
            code = batch_window(c.hook, s, p, X, sw, m, d, bw, &bs, nr, c.win)
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
        average_step(d, w, c.Wbar, s, c.rs, fit_b)
    return OK


cdef inline int batch_blocks(Lin *c, const double *X, const double *y, const double *swp,
                             Py_ssize_t n, Py_ssize_t block, const double *etas,
                             Py_ssize_t n_etas, BlockWork *bw, Poll *pl, Py_ssize_t *done,
                             Py_ssize_t *row) noexcept nogil:
    # One update per consecutive block of `block` rows (n a multiple of it);
    # done: whole blocks' rows applied.
    cdef Py_ssize_t nb = n // block, b, j = 0, bad = -1, d = c.d
    cdef double updates
    cdef int code = OK
    done[0] = 0
    row[0] = -1
    for b in range(nb):
        updates = c.S.n_updates
        code = block_step(c, X + b * block * d, y + b * block,
                          swp + b * block if swp != NULL else NULL, block, 0,
                          etas[j] if j < n_etas else 0.0, bw, pl, &bad)
        if code != OK:
            if bad >= 0:
                row[0] = bad + b * block
            break
        if c.S.n_updates > updates:
            j += 1            # user stepsizes go by updates (blocks of weight > 0)
        done[0] = (b + 1) * block
    if code == OK and poll_final(pl):
        code = ERR_INTERRUPTED        # every block applied
    return code


cdef inline int storage_step(Lin *c, const double *X, const double *y, const double *swp,
                             Py_ssize_t n, Py_ssize_t score_from, double eta_user,
                             BlockWork *bw, Poll *pl, bint *stepped,
                             Py_ssize_t *row) noexcept nogil:
    # One sub-gradient step on the (weighted) mean loss over all n rows (all
    # data so far, Section 2.3); rows from score_from on are new and scored.
    # stepped: the step was taken (an interrupt after it keeps it).
    cdef int code
    cdef double n_seen0 = c.S.n_seen
    row[0] = -1
    code = block_step(c, X, y, swp, n, score_from, eta_user, bw, pl, row)
    if code == OK:
        pl.work += 4.0 * n            # the order statistics over all residuals
        if poll_final(pl):
            code = ERR_INTERRUPTED    # the step was taken
    stepped[0] = code == OK or (code == ERR_INTERRUPTED and c.S.n_seen > n_seen0)
    return code
