# Sparse rows for the linear learner (csrc/_quantile.pyx's LinearSGD): the
# single- and multi-quantile row loops on CSR rows (indices, values), at
# O(nnz) a row whatever n_features, and what makes that possible:
#
# - the Polyak-Ruppert average kept lazily (ALGORITHMS.md, "Sparse rows"):
#   with S_N = sum of the N iterates averaged, S_N = N w - u, u moving by
#   N D where the iterate moves by D (the row's non-zeros only), so
#   wbar = w - u / N. The plug-in intercept's means (_qr_plug_in.pxd) follow
#   the same way: X = sum_i w_i x_i (xbar = X / x_wsum), and the average of
#   the averages wwbar = w - (u + V) / N with V_j = sum_k u_kj / k kept as
#   u_j H - v_j (H = sum_k 1 / k; v moves by H dU where u moves by dU), so
#   the intercept's lag xbar'(wwbar - wbar) = -(H A - B) / (N x_wsum) with
#   A = X'u and B = X'v kept as the row's coordinates change (Neumaier
#   sums). A restart of the average (phase two, a drift alarm, a warm
#   start's prior iterates) opens a new epoch in O(1): a coordinate's u, X,
#   v count only once stamped with the current epoch, and a coordinate
#   first touched in an epoch starts from what the dense average would hold
#   there (N0 prior iterates of the dense average's value, stamp 0: the
#   slot still holds that value);
# - the online scaler on sparse rows (scale="online"): per feature, the root
#   mean square of its non-zero values, no centring, so only the row's
#   features' scales move (the iterate is re-expressed as the dense scaler
#   does, the average is of the coefficients on the original scale);
# - an undo log: the loops update the live state in place and log every
#   coordinate they are about to change (its position and old values), so
#   that a failure restores the state of the call's start in O(the log);
# - the check of a row's columns, as the loops come to it (csr_row_bad; the
#   caller checks the index pointer first and, when a call fails, finds the
#   block's first fault with _csr_fault), and the schedule's d of a sparse
#   row (its non-zeros: dim_of_row).
from libc.math cimport fabs, sqrt
from libc.float cimport DBL_MAX
from libc.string cimport memcpy

from _common cimport OK, ERR_INTERRUPTED, ERR_NONFINITE, ERR_BADINPUT
from _qr_schedule cimport (SGDState, SGDParams, KIND_STATISTICAL, KIND_ARRAY, NO_UPDATE,
                           quantile_row, dim_decided)
from _qr_loops cimport Lin, NONCROSS_PROJECT, row_dim
from _qr_plug_in cimport plug_in_intercepts
from _qr_drift cimport drift_alarm, drift_restart
from _pav cimport pav_increasing
from _work_poll cimport Poll, poll_stop, poll_final, ROW_WORK


cdef enum:
    LZ_LEN = 8            # doubles of a LazyRec


cdef struct LazyRec:
    # One quantile's lazy average (a section of the state block, m of them)
    double ep             # the average's epoch (>= 1): coordinates stamped with it hold
                          # this epoch's u (and X, v)
    double n_ref          # the n_avg the lazy state has followed
    double N0             # n_avg when the epoch began (a warm start's prior iterates)
    double H              # sum of 1 / k over the epoch's average steps
    double A              # sum_j X_j u_j (plug-in intercept) ...
    double Ac             # ... and its Neumaier compensation
    double B              # sum_j X_j v_j
    double Bc


cdef struct Sp:
    # What the sparse loops work on beyond a Lin (whose W they update)
    double *U             # m x ld: u_j (stamp == epoch), or the dense average's value
                          # (stamp 0); NULL: no lazy average (average=False)
    double *T             # m x ld: the stamps
    double *XV            # m x xvstride: X (d) then v (d) (NULL: no plug-in intercept)
    Py_ssize_t xvstride
    LazyRec *lz           # m
    double *ssc           # the sparse scaler, 1 + 2 d: the weight of the rows where
                          # feature j is non-zero at 1 + j, the weighted sum of its
                          # squares at 1 + d + j (NULL: none)
    double *log           # the undo log: entries of `stride` doubles (NULL: no log)
    Py_ssize_t nlog, caplog, stride, o_u, o_x, o_s
    double *z             # a row's scaled values (nnz)
    double *theta         # scratch (nnz)


# -- small pieces --------------------------------------------------------------

cdef inline void nsum(double *s, double *c, double v) noexcept nogil:
    # s + c += v, compensated (Neumaier): A and B take ~nnz terms a row for
    # the whole stream, and their float64 error would otherwise grow with it
    cdef double t = s[0] + v
    if fabs(s[0]) >= fabs(v):
        c[0] += (s[0] - t) + v
    else:
        c[0] += (v - t) + s[0]
    s[0] = t


cdef inline double sparse_sd(const double *ssc, Py_ssize_t d, Py_ssize_t j) noexcept nogil:
    # feature j's scale: the root mean square of its non-zero values (1
    # while it has none, or where that is 0 or not finite)
    cdef double n = ssc[1 + j], sd
    if not (n > 0):
        return 1.0
    sd = sqrt(ssc[1 + d + j] / n)
    return sd if (sd > 0 and sd <= DBL_MAX) else 1.0


cdef inline double lazy_u(const double *U, const double *T, const LazyRec *lz,
                          Py_ssize_t j, double theta) noexcept nogil:
    # u_j in the current epoch without touching it: a coordinate untouched
    # since the epoch began has kept its iterate, so its u is the N0 prior
    # iterates' share, N0 (theta - prior), read from the dense value (stamp
    # 0), or 0 (an older epoch's u: such an epoch began cold)
    cdef double t = T[j]
    if t == lz.ep:
        return U[j]
    if t == 0:
        return lz.N0 * (theta - U[j])
    return 0.0


cdef inline void lazy_touch(double *U, double *T, double *XV, Py_ssize_t d,
                            const LazyRec *lz, Py_ssize_t j, double theta) noexcept nogil:
    # coordinate j joins the current epoch (its u as lazy_u reads it; X and
    # v start at 0: the means start with the epoch)
    if T[j] != lz.ep:
        U[j] = lazy_u(U, T, lz, j, theta)
        T[j] = lz.ep
        if XV != NULL:
            XV[j] = 0.0
            XV[d + j] = 0.0


cdef inline void lazy_epoch(LazyRec *lz, double n_avg) noexcept nogil:
    # the average restarted (n_avg moved other than by its own steps): a new
    # epoch, from n_avg prior iterates
    lz.ep += 1.0
    lz.n_ref = n_avg
    lz.N0 = n_avg
    lz.H = 0.0
    lz.A = 0.0
    lz.Ac = 0.0
    lz.B = 0.0
    lz.Bc = 0.0


cdef inline double lazy_avg_at(const double *W, const double *U, const double *T,
                               const LazyRec *lz, const double *ssc, Py_ssize_t d,
                               Py_ssize_t j, double n_avg) noexcept nogil:
    # the average's coefficient j (n_avg > 0): wbar = theta - u / N
    cdef double theta = W[j] if ssc == NULL else W[j] / sparse_sd(ssc, d, j)
    return theta - lazy_u(U, T, lz, j, theta) / n_avg


cdef inline double lazy_lag(const LazyRec *lz, const SGDState *s) noexcept nogil:
    # the plug-in intercept's lag xbar'(wwbar - wbar) = -(H A - B) / (N x_wsum)
    if not (s.n_avg > 0 and s.x_wsum > 0):
        return 0.0
    return -(lz.H * (lz.A + lz.Ac) - (lz.B + lz.Bc)) / (s.n_avg * s.x_wsum)


cdef inline void log_entry(Sp *sp, const double *W, Py_ssize_t pos, Py_ssize_t q,
                           Py_ssize_t j, Py_ssize_t d) noexcept nogil:
    # the coordinate's values before the row changes them (the caller made
    # room: caplog >= the call's entries)
    cdef double *e = sp.log + sp.nlog * sp.stride
    e[0] = <double> pos
    e[1] = W[pos]
    if sp.o_u:
        e[sp.o_u] = sp.U[pos]
        e[sp.o_u + 1] = sp.T[pos]
    if sp.o_x:
        e[sp.o_x] = sp.XV[q * sp.xvstride + j]
        e[sp.o_x + 1] = sp.XV[q * sp.xvstride + d + j]
    if sp.o_s:
        e[sp.o_s] = sp.ssc[1 + j]
        e[sp.o_s + 1] = sp.ssc[1 + d + j]
    sp.nlog += 1


cdef inline void log_undo(Sp *sp, double *W, Py_ssize_t ld, Py_ssize_t d) noexcept nogil:
    # every logged change undone, newest first: the coordinates as at the
    # call's start (the caller restores the records it snapshotted)
    cdef Py_ssize_t k, pos, q, j
    cdef const double *e
    for k in range(sp.nlog - 1, -1, -1):
        e = sp.log + k * sp.stride
        pos = <Py_ssize_t> e[0]
        q = pos // ld
        j = pos - q * ld
        W[pos] = e[1]
        if sp.o_u:
            sp.U[pos] = e[sp.o_u]
            sp.T[pos] = e[sp.o_u + 1]
        if sp.o_x:
            sp.XV[q * sp.xvstride + j] = e[sp.o_x]
            sp.XV[q * sp.xvstride + d + j] = e[sp.o_x + 1]
        if sp.o_s:
            sp.ssc[1 + j] = e[sp.o_s]
            sp.ssc[1 + d + j] = e[sp.o_s + 1]
    sp.nlog = 0


# -- one quantile's update from a sparse row ------------------------------------

cdef inline int sp_update(Lin *c, Sp *sp, Py_ssize_t q, const int *idx, const double *z,
                          Py_ssize_t k, double a, bint touch, bint logging) noexcept nogil:
    # w_q += a z on the row's coordinates (z: its values, scaled by the
    # sparse scaler if any), the lazy u (and v, A, B) with it; the
    # iterate's coordinates checked as they move. touch: the lazy average
    # takes the row (it holds iterates, or steps at this row).
    cdef Py_ssize_t i, j, d = c.d, pos, base = q * c.ld
    cdef double *W = c.W
    cdef SGDState *s = &c.S[q]
    cdef LazyRec *lz = &sp.lz[q] if sp.U != NULL else NULL
    cdef double *XV = sp.XV + q * sp.xvstride if sp.XV != NULL else NULL
    cdef double N = s.n_avg, dw, du, wn, th, sd = 1.0
    cdef int code = OK
    for i in range(k):
        j = idx[i]
        pos = base + j
        if logging:
            log_entry(sp, W, pos, q, j, d)
        dw = a * z[i]
        wn = W[pos] + dw
        if touch:
            if sp.ssc != NULL:
                sd = sparse_sd(sp.ssc, d, j)
            th = W[pos] / sd
            lazy_touch(sp.U + base, sp.T + base, XV, d, lz, j, th)
            if N > 0:
                du = N * (dw / sd)
                sp.U[pos] += du
                if XV != NULL:
                    XV[d + j] += du * lz.H
                    nsum(&lz.A, &lz.Ac, XV[j] * du)
                    nsum(&lz.B, &lz.Bc, XV[j] * du * lz.H)
                if not (fabs(sp.U[pos]) <= DBL_MAX):
                    code = ERR_NONFINITE
        W[pos] = wn
        if not (fabs(wn) < 1e300):      # (iterate_finite's bound; NaN fails too)
            code = ERR_NONFINITE
    return code


cdef inline int sp_axpy_plain(double *W, double *e, Py_ssize_t base, const int *idx,
                              const double *z, Py_ssize_t k, double a) noexcept nogil:
    # sp_update without a lazy average or a sparse scaler (W at the
    # quantile's row): w += a z on the row's coordinates, each logged first
    # into e (2 doubles an entry, as log_entry writes them; NULL: no log).
    # Its own loop, so that the flags sp_update tests on every coordinate
    # are tested once a row and the compiler sees the entry's width.
    cdef Py_ssize_t i, j
    cdef double w, wn
    cdef int code = OK
    if e != NULL:
        for i in range(k):
            j = idx[i]
            w = W[j]
            e[2 * i] = <double> (base + j)
            e[2 * i + 1] = w
            wn = w + a * z[i]
            W[j] = wn
            if not (fabs(wn) < 1e300):      # (iterate_finite's bound; NaN fails too)
                code = ERR_NONFINITE
    else:
        for i in range(k):
            j = idx[i]
            wn = W[j] + a * z[i]
            W[j] = wn
            if not (fabs(wn) < 1e300):
                code = ERR_NONFINITE
    return code


cdef inline int sp_axpy_lazy(double *W, double *U, double *T, double *XV, LazyRec *lz,
                             double N, double *e, Py_ssize_t base, Py_ssize_t d,
                             const int *idx, const double *z, Py_ssize_t k, double a,
                             bint touch) noexcept nogil:
    # sp_update with the lazy average and no sparse scaler (sd = 1: its
    # divisions by sd are exact and dropped): W, U, T at the quantile's row,
    # XV at its X (NULL: no plug-in intercept), e the log's first new entry
    # (4 doubles an entry, 6 with XV, as log_entry writes them; NULL: no
    # log). The epoch's records are kept in locals over the row (the same
    # operations in the same order: bit-identical to sp_update).
    cdef Py_ssize_t i, j, st = 6 if XV != NULL else 4
    cdef double w, wn, dw, du, ep = lz.ep, N0 = lz.N0, H = lz.H, t
    cdef double A = lz.A, Ac = lz.Ac, B = lz.B, Bc = lz.Bc
    cdef int code = OK
    for i in range(k):
        j = idx[i]
        w = W[j]
        if e != NULL:
            e[st * i] = <double> (base + j)
            e[st * i + 1] = w
            e[st * i + 2] = U[j]
            e[st * i + 3] = T[j]
            if XV != NULL:
                e[st * i + 4] = XV[j]
                e[st * i + 5] = XV[d + j]
        dw = a * z[i]
        wn = w + dw
        if touch:
            t = T[j]
            if t != ep:          # (lazy_touch)
                if t == 0:
                    U[j] = N0 * (w - U[j])
                else:
                    U[j] = 0.0
                T[j] = ep
                if XV != NULL:
                    XV[j] = 0.0
                    XV[d + j] = 0.0
            if N > 0:
                du = N * dw
                U[j] += du
                if XV != NULL:
                    XV[d + j] += du * H
                    nsum(&A, &Ac, XV[j] * du)
                    nsum(&B, &Bc, XV[j] * du * H)
                if not (fabs(U[j]) <= DBL_MAX):
                    code = ERR_NONFINITE
        W[j] = wn
        if not (fabs(wn) < 1e300):
            code = ERR_NONFINITE
    lz.A = A
    lz.Ac = Ac
    lz.B = B
    lz.Bc = Bc
    return code


cdef inline int sp_step(Lin *c, Sp *sp, Py_ssize_t q, const int *idx, const double *z,
                        Py_ssize_t k, double a, bint touch, bint logging) noexcept nogil:
    # sp_update, by the specialised loops where they apply (no sparse
    # scaler: the common cases); the log's entries advance by k
    cdef Py_ssize_t base = q * c.ld
    cdef double *e = sp.log + sp.nlog * sp.stride if logging else NULL
    cdef int code
    if sp.ssc != NULL:
        return sp_update(c, sp, q, idx, z, k, a, touch, logging)
    if sp.U == NULL:
        code = sp_axpy_plain(c.W + base, e, base, idx, z, k, a)
    else:
        code = sp_axpy_lazy(c.W + base, sp.U + base, sp.T + base,
                            sp.XV + q * sp.xvstride if sp.XV != NULL else NULL, &sp.lz[q],
                            c.S[q].n_avg, e, base, c.d, idx, z, k, a, touch)
    if logging:
        sp.nlog += k
    return code


cdef inline void sp_average(Lin *c, Sp *sp, Py_ssize_t q, const int *idx, const double *x,
                            Py_ssize_t k, double y, double step, double wi) noexcept nogil:
    # One step of the lazy average after the row's update (average_step, or
    # plug_in_average_step with the plug-in intercept): O(1), plus O(nnz)
    # for the plug-in's means. x: the row's raw values.
    cdef SGDState *s = &c.S[q]
    cdef const SGDParams *p = &c.P[q]
    cdef LazyRec *lz = &sp.lz[q]
    cdef Py_ssize_t i, j, d = c.d, base = q * c.ld
    cdef double *XV
    cdef double inv, xw = 0.0, nold, wx
    cdef bint cold
    if sp.XV == NULL:
        s.n_avg += 1.0
        inv = 1.0 / s.n_avg
        s.intercept_avg += (s.intercept - s.intercept_avg) * inv
        lz.H += inv
        lz.n_ref = s.n_avg
        return
    XV = sp.XV + q * sp.xvstride
    cold = s.n_avg == 0
    if cold:
        s.intercept_pi = s.intercept
        s.intercept_pi2 = s.intercept
        s.x_wsum = 0.0
    else:
        # x'wbar before the step, the average of the iterates before this one
        # ((N - 1) w - u over N - 1 with the row's new w and u)
        nold = s.n_avg
        for i in range(k):
            j = idx[i]
            xw += x[i] * (c.W[base + j] - sp.U[base + j] / nold)
    s.n_avg += 1.0
    inv = 1.0 / s.n_avg
    s.x_wsum += wi
    for i in range(k):
        j = idx[i]
        wx = wi * x[i]
        XV[j] += wx
        nsum(&lz.A, &lz.Ac, wx * sp.U[base + j])
        nsum(&lz.B, &lz.Bc, wx * XV[d + j])
    lz.H += inv
    lz.n_ref = s.n_avg
    plug_in_intercepts(s, p, y, xw, step, cold, inv)
    s.intercept_avg = s.pi_avg + lazy_lag(lz, s)


cdef inline int sp_scale_row(Sp *sp, double *W, Py_ssize_t d, const int *idx,
                             const double *x, Py_ssize_t k, double wi,
                             bint logging) noexcept nogil:
    # The sparse scaler takes the row (its features' weights and sums of
    # squares; the iterate re-expressed so that w_j / sd_j stays), then z =
    # x / sd. Logged first: a later failure of the row restores them.
    cdef Py_ssize_t i, j
    cdef double old, new
    for i in range(k):
        j = idx[i]
        if logging:
            log_entry(sp, W, j, 0, j, d)
        if wi > 0 and x[i] != 0:
            old = sparse_sd(sp.ssc, d, j)
            sp.ssc[1 + j] += wi
            sp.ssc[1 + d + j] += wi * x[i] * x[i]
            new = sparse_sd(sp.ssc, d, j)
            W[j] *= new / old
        sp.z[i] = x[i] / sparse_sd(sp.ssc, d, j)
    return OK


cdef inline bint csr_row_bad(const int *idx, Py_ssize_t k, Py_ssize_t d) noexcept nogil:
    # a row's columns not increasing inside [0, d), checked before the row
    # reads W at them: the loops check each row as they come to it (a block
    # is not checked beforehand) and fail the call with ERR_BADINPUT, whose
    # caller then finds the block's first fault and undoes the call
    cdef Py_ssize_t t
    cdef int prev = -1
    for t in range(k):
        if idx[t] <= prev or idx[t] >= d:
            return True
        prev = idx[t]
    return False


# -- the row loops ------------------------------------------------------------------

cdef inline int sparse_single_rows(Lin *c, Sp *sp, const int *indptr, const int *indices,
                                   const double *data, Py_ssize_t n, const double *y,
                                   const double *swp, const double *etas, Poll *pl,
                                   Py_ssize_t *done, Py_ssize_t *row) noexcept nogil:
    # single_rows (_qr_loops.pxd) on CSR rows, one quantile: the same
    # schedule, weights, drift test, averaging (lazy) and scaler (sparse).
    # The rows' columns are checked here, each row before anything reads W
    # at them; the index pointer beforehand (the caller). done: rows
    # applied; row: the row a code other than OK or ERR_INTERRUPTED refers
    # to.
    cdef SGDState *s = c.S
    cdef const SGDParams *p = c.P
    cdef Py_ssize_t d = c.d, i, jj = 0, k, t, taken = 0
    cdef const int *idx
    cdef const double *x
    cdef const double *z
    cdef double *W = c.W
    cdef int kind = <int> p.kind, code = OK
    cdef bint stat = kind == KIND_STATISTICAL, fit_b = p.fit_intercept != 0
    cdef bint avg = p.average != 0 and sp.U != NULL, drift = p.drift != 0
    cdef bint logging = sp.log != NULL, warming, avg_step, bad
    cdef double da_full = d + (1.0 if fit_b else 0.0), rd, wi = 1.0
    cdef double xw, xx, r, ra, coef = 0.0, step = 0.0, sd, th
    cdef int j, prev
    done[0] = 0
    row[0] = -1
    for i in range(n):
        k = indptr[i + 1] - indptr[i]
        if poll_stop(pl, k + ROW_WORK):
            code = ERR_INTERRUPTED
            break
        idx = indices + indptr[i]
        x = data + indptr[i]
        if swp != NULL:
            wi = swp[i]
        rd = row_dim(s, p, x, k, True, da_full, wi, &warming)
        z = x
        xw = 0.0
        xx = 0.0
        bad = False
        if sp.ssc != NULL:
            if csr_row_bad(idx, k, d):
                code = ERR_BADINPUT
                row[0] = i
                break
            sp_scale_row(sp, W, d, idx, x, k, wi, logging)
            z = sp.z
            for t in range(k):
                xw += z[t] * W[idx[t]]
                xx += z[t] * z[t]
        else:
            # the row's check (csr_row_bad) in its first pass: each column
            # above the one before it and below d before W is read there;
            # its values' finiteness is the check of xx below (a NaN or inf
            # value makes the sum of squares NaN or inf)
            prev = -1
            for t in range(k):
                j = idx[t]
                if j <= prev or j >= d:
                    bad = True
                    break
                prev = j
                xw += x[t] * W[j]
                xx += x[t] * x[t]
        r = y[i] - (xw + s.intercept)
        if bad or not (fabs(r) <= DBL_MAX and xx <= DBL_MAX):
            code = ERR_BADINPUT
            row[0] = i
            break
        if drift and wi != 0 and s.n_avg > 0 and (s.avg_on != 0 or not stat):
            ra = 0.0
            for t in range(k):
                ra += x[t] * lazy_avg_at(W, sp.U, sp.T, sp.lz, NULL, d, idx[t], s.n_avg)
            ra = y[i] - (ra + s.intercept_avg)
            if drift_alarm(s, p, r, ra, wi):
                drift_restart(s, p)
                if c.n_alarm < c.dcap:
                    c.alarms[c.n_alarm] = s.n_seen
                c.n_alarm += 1
        code = quantile_row(s, p, c.win, c.work, x, k, rd, r, xx, wi,
                            etas[jj] if kind == KIND_ARRAY and wi != 0 else 0.0, fit_b,
                            &coef, &step)
        if warming and s.phase != 0:
            dim_decided(s, p, rd)
        if avg and s.n_avg != sp.lz.n_ref:
            lazy_epoch(sp.lz, s.n_avg)
        taken = i + 1
        if code == NO_UPDATE:
            code = OK
            continue
        if code != OK:
            row[0] = i
            break
        jj += 1
        avg_step = avg and (s.avg_on != 0 or not stat)
        code = sp_step(c, sp, 0, idx, z, k, coef, avg and (s.n_avg > 0 or avg_step),
                       logging and sp.ssc == NULL)
        if code != OK:
            row[0] = i
            break
        if avg_step:
            sp_average(c, sp, 0, idx, x, k, y[i], step, wi)
    done[0] = taken
    if code == OK and poll_final(pl):
        code = ERR_INTERRUPTED
    return code


cdef inline int sparse_multi_rows(Lin *c, Sp *sp, const int *indptr, const int *indices,
                                  const double *data, Py_ssize_t n, const double *y,
                                  const double *swp, int noncrossing, double *po, Poll *pl,
                                  Py_ssize_t *done, Py_ssize_t *row) noexcept nogil:
    # multi_rows (_qr_loops.pxd) on CSR rows: every quantile's residual at
    # the row first (a bad row changes nothing), the projection onto the
    # ordered cone if asked, then each quantile's schedule, update and
    # average in turn.
    cdef SGDState *S = c.S
    cdef const SGDParams *P = c.P
    cdef double *W = c.W
    cdef Py_ssize_t d = c.d, m = c.m, ld = c.ld, wcap = c.wcap, i, q, k, t, taken = 0
    cdef const int *idx
    cdef const double *x
    cdef double *pred = c.mw.pred
    cdef double *res = c.mw.res
    cdef double *cf = c.mw.coef
    cdef double *stp = c.mw.step
    cdef unsigned char *upd = c.mw.upd
    cdef bint fit_b = P[0].fit_intercept != 0, avg = P[0].average != 0 and sp.U != NULL
    cdef bint logging = sp.log != NULL, warming, any_upd, avg_step
    cdef double da_full = d + (1.0 if fit_b else 0.0), rd, wi = 1.0, xx, acc
    cdef int code = OK
    done[0] = 0
    row[0] = -1
    for i in range(n):
        k = indptr[i + 1] - indptr[i]
        if poll_stop(pl, m * (2 * k + ROW_WORK)):
            code = ERR_INTERRUPTED
            break
        idx = indices + indptr[i]
        x = data + indptr[i]
        if csr_row_bad(idx, k, d):
            code = ERR_BADINPUT
            row[0] = i
            break
        xx = 0.0
        for t in range(k):
            xx += x[t] * x[t]
        for q in range(m):
            acc = 0.0
            for t in range(k):
                acc += x[t] * W[q * ld + idx[t]]
            pred[q] = acc + S[q].intercept
            res[q] = y[i] - pred[q]
            if not (fabs(res[q]) <= DBL_MAX and xx <= DBL_MAX):
                code = ERR_BADINPUT
                break
        if code != OK:
            row[0] = i
            break
        if po != NULL:
            memcpy(po + i * m, pred, m * sizeof(double))
        if noncrossing == NONCROSS_PROJECT and m > 1:
            pav_increasing(pred, m, c.mw.pav, c.mw.pav + m)
            for q in range(m):
                res[q] = y[i] - pred[q]
        if swp != NULL:
            wi = swp[i]
        any_upd = False
        for q in range(m):
            rd = row_dim(&S[q], &P[q], x, k, True, da_full, wi, &warming)
            code = quantile_row(&S[q], &P[q], c.win + q * wcap, c.mw.work, x, k, rd,
                                res[q], xx, wi, 0.0, fit_b, &cf[q], &stp[q])
            if warming and S[q].phase != 0:
                dim_decided(&S[q], &P[q], rd)
            if avg and S[q].n_avg != sp.lz[q].n_ref:
                lazy_epoch(&sp.lz[q], S[q].n_avg)
            upd[q] = code == OK
            any_upd = any_upd or code == OK
            if code == NO_UPDATE:
                code = OK
            elif code != OK:
                break
        if code != OK:
            row[0] = i
            break
        for q in range(m):
            if not upd[q]:
                continue
            avg_step = avg and (S[q].avg_on != 0 or P[q].kind != KIND_STATISTICAL)
            code = sp_step(c, sp, q, idx, x, k, cf[q], avg and (S[q].n_avg > 0 or avg_step),
                           logging)
            if code != OK:
                break
            if avg_step:
                sp_average(c, sp, q, idx, x, k, y[i], stp[q], wi)
        if code != OK:
            row[0] = i
            break
        taken = i + 1
    done[0] = taken
    if code == OK and poll_final(pl):
        code = ERR_INTERRUPTED
    return code
