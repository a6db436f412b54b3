# Online (sub-)gradient descent for linear quantile and least-squares regression.
#
# The whole sample loop runs here without the GIL; Python validates input and
# owns the state arrays. Scalar state and schedule constants travel as float64
# arrays viewed through structs of doubles (`SGDState`, `SGDParams`), so that the
# estimator pickles as plain NumPy arrays and resumes bit-identically.
#
# Paper: Shen, Xia & Zhou, "Online Quantile Regression", JMLR 26 (2025).
from libc.math cimport fabs, sqrt, pow, isnan, NAN
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from _blas cimport dot, axpy, gemv_rows, gemv_rows_t

# Field names, in memory order, of the two structs below; Python reads these so
# the layout has one source of truth.
STATE_FIELDS = (
    "t", "n_seen", "intercept", "intercept_avg", "loss", "phase", "eta_geo",
    "t_switch", "d0", "b0", "cl", "sumsq", "n_sumsq", "fill", "n_avg",
    "min_med", "last_eta", "eta_start", "n_windows", "avg_on", "n_flat",
)
PARAM_FIELDS = (
    "tau", "loss", "kind", "c", "eta0", "eta0_scale", "decay", "Ca", "Cb",
    "b0", "t_switch", "n_warmup", "window", "average", "avg_power",
    "fit_intercept", "plateau", "eta_const", "ema", "patience",
)

# Schedule kinds, losses and return codes; cpdef makes them visible to Python.
cpdef enum:
    KIND_CONSTANT = 0
    KIND_INVERSE_TIME = 1
    KIND_STATISTICAL = 2
    KIND_ARRAY = 3        # precomputed stepsizes (a user schedule)

cpdef enum:
    LOSS_CHECK = 0
    LOSS_SQUARED = 1

cpdef enum:
    OK = 0
    ERR_NOMEM = -1
    ERR_NONFINITE = -2      # the iterate diverged

# 1 / Phi^{-1}(3/4): median |N(0, s^2)| = 0.6745 s.
cdef double INV_MAD = 1.482602218505602


cdef struct SGDState:
    double t              # updates taken
    double n_seen         # samples seen (scored)
    double intercept
    double intercept_avg
    double loss           # prequential loss: each sample scored before its update
    double phase          # 0 warm-up, 1 geometric, 2 (const or 1/t), 3 1/t (batch)
    double eta_geo        # next phase-one stepsize
    double t_switch       # update index where the current phase began
    double d0             # initial error scale estimate (response units)
    double b0             # sparsity 1/f(q_tau) estimate (response units)
    double cl             # mean eigenvalue of E[x x'] estimate: mean ||x||^2 / d
    double sumsq          # sum of ||x||^2 seen during warm-up
    double n_sumsq
    double fill           # residuals in the current window
    double n_avg          # iterates in the Polyak-Ruppert average
    double min_med        # smallest window median |r| so far (plateau test)
    double last_eta       # stepsize of the last update
    double eta_start      # stepsize at the start of the last phase
    double n_windows      # windows completed in the current phase
    double avg_on         # 1 once the average runs (see window_done)
    double n_flat         # consecutive windows without progress


cdef struct SGDParams:
    double tau
    double loss
    double kind
    double c              # constant / inverse_time coefficient
    double eta0           # NaN: estimate from the stream
    double eta0_scale     # C in eta0 = C * D0 / (d * Cl)
    double decay          # single: eta *= 1 - decay / d; batch: eta *= 1 - decay
    double Ca
    double Cb
    double b0             # NaN: estimate from the stream
    double t_switch       # NaN: switch by the rule; else the update index
    double n_warmup       # single-sample warm-up (no updates) for D0 and Cl
    double window         # residual window for b0 / plateau estimates
    double average        # 1: Polyak-Ruppert averaging over the last phase
    double avg_power      # alpha of the t^-alpha last phase used with averaging
    double fit_intercept
    double plateau        # LS: window-median ratio above which phase one ends
    double eta_const      # batch/storage phase two: eta = eta_const * b0 / Cl
    double ema            # weight of a new window's b0 in phase two
    double patience       # windows without progress that make a plateau


# ----------------------------------------------------------------------------
# Order statistics (Hoare selection) for the median and quantile spacings.

cdef double select_kth(double *a, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    # a is permuted; returns the k-th smallest (0-based), like np.partition(a, k)[k]
    cdef Py_ssize_t lo = 0, hi = n - 1, i, j
    cdef double pivot, tmp
    while lo < hi:
        pivot = a[(lo + hi) >> 1]
        i = lo
        j = hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                tmp = a[i]; a[i] = a[j]; a[j] = tmp
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return a[k]
    return a[k]


cdef double median_abs(const double *r, Py_ssize_t n, double *work) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        work[i] = fabs(r[i])
    return select_kth(work, n, n // 2)


cdef double sparsity(const double *r, Py_ssize_t n, double tau, double *work) noexcept nogil:
    # Siddiqui's difference quotient: (Q(tau + h) - Q(tau - h)) / (2h) estimates
    # 1 / f(Q(tau)), Koenker's sparsity, from the residuals r.
    cdef double h = 0.1
    cdef Py_ssize_t klo, khi
    cdef double qlo, qhi
    if h > 0.5 * tau:
        h = 0.5 * tau
    if h > 0.5 * (1.0 - tau):
        h = 0.5 * (1.0 - tau)
    klo = <Py_ssize_t> ((tau - h) * n)
    khi = <Py_ssize_t> ((tau + h) * n)
    if khi >= n:
        khi = n - 1
    if khi <= klo:
        khi = klo + 1
    memcpy(work, r, n * sizeof(double))
    qhi = select_kth(work, n, khi)
    qlo = select_kth(work, khi, klo)    # select left the khi smallest in front
    return (qhi - qlo) * n / <double> (khi - klo)


cdef inline double check_loss(double r, double tau) noexcept nogil:
    # rho_tau(r) = r * (tau - 1{r < 0})
    if r < 0:
        return r * (tau - 1.0)
    return r * tau


cdef inline double loss_and_coef(double r, const SGDParams *p, double *loss) noexcept nogil:
    # Returns g with gradient = g * x: check loss (1{y <= x'b} - tau),
    # squared loss r^2 / 2 gives -r.
    if p.loss == LOSS_CHECK:
        loss[0] += check_loss(r, p.tau)
        return (1.0 if r <= 0 else 0.0) - p.tau
    loss[0] += 0.5 * r * r
    return -r


cdef inline void average_step(Py_ssize_t d, const double *w, double *wbar,
                              SGDState *s) noexcept nogil:
    # wbar += (w - wbar) / k : running mean of the iterates
    cdef Py_ssize_t j
    cdef double inv
    s.n_avg += 1.0
    inv = 1.0 / s.n_avg
    for j in range(d):
        wbar[j] += (w[j] - wbar[j]) * inv
    s.intercept_avg += (s.intercept - s.intercept_avg) * inv


cdef inline void start_phase(SGDState *s, double phase, double eta_start,
                             bint avg_on) noexcept nogil:
    s.phase = phase
    s.t_switch = s.t
    s.eta_start = eta_start
    s.n_windows = 0
    s.n_avg = 0        # averaging restarts with the last phase
    s.avg_on = avg_on


cdef int check_finite(const double *w, Py_ssize_t d, const SGDState *s) noexcept nogil:
    # A diverging run (e.g. a too large constant stepsize) is reported, so the
    # caller can keep its previous state.
    cdef Py_ssize_t j
    if not (fabs(s.intercept) < 1e300):    # also false for NaN
        return ERR_NONFINITE
    for j in range(d):
        if not (fabs(w[j]) < 1e300):
            return ERR_NONFINITE
    return OK


# ----------------------------------------------------------------------------
# Single-sample updates (Section 2.1 of the paper).

cdef inline double last_phase_eta(const SGDState *s, const SGDParams *p,
                                  double scale) noexcept nogil:
    # Ca / (t - t1 + Cb d) shape, written as eta_start / (1 + (t - t1) / (Cb d)),
    # or (.)^-alpha when averaging (1/t steps make averaging useless).
    cdef double u = 1.0 + (s.t - s.t_switch) / scale
    if p.average != 0 and p.avg_power != 1.0:
        return s.eta_start * pow(u, -p.avg_power)
    return s.eta_start / u


cdef void window_done(SGDState *s, const SGDParams *p, double *win, double *work,
                      Py_ssize_t d) noexcept nogil:
    # Called when the residual window is full. The window median of |r| falls
    # while the error dominates the residuals and levels off at the noise. A
    # window makes progress when its median is below `plateau` times the best
    # so far; `patience` windows in a row without progress make a plateau,
    # which ends least-squares phase one and, in the last phase, starts the
    # Polyak-Ruppert average (so that it does not average the transient).
    # For the check loss the window also refreshes the sparsity estimate b0.
    cdef Py_ssize_t n = <Py_ssize_t> s.fill
    cdef double est, med
    cdef bint flat
    s.fill = 0
    s.n_windows += 1
    med = median_abs(win, n, work)
    if s.min_med <= 0 or med < p.plateau * s.min_med:
        s.n_flat = 0
    else:
        s.n_flat += 1
    if s.min_med <= 0 or med < s.min_med:
        s.min_med = med
    flat = s.n_flat >= p.patience
    if p.loss == LOSS_CHECK:
        if isnan(p.b0):
            est = sparsity(win, n, p.tau, work)
            if est > 0:
                if s.phase >= 2 and s.n_windows > 1:
                    s.b0 += p.ema * (est - s.b0)
                else:
                    s.b0 = est
            if s.phase >= 2:
                s.eta_start = s.b0 * p.Ca / (s.cl * p.Cb * d)
    elif s.phase == 1 and isnan(p.t_switch) and flat:
        start_phase(s, 2, s.eta_geo, True)
        return
    if s.phase >= 2 and s.avg_on == 0 and flat:
        s.avg_on = 1
        s.n_avg = 0


cdef void warmup_done(SGDState *s, const SGDParams *p, double *win, double *work,
                      Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t n = <Py_ssize_t> s.fill
    s.cl = s.sumsq / (s.n_sumsq * d)
    if s.cl <= 0:
        s.cl = 1.0
    if p.loss == LOSS_CHECK:
        s.d0 = median_abs(win, n, work) * INV_MAD
        s.b0 = p.b0 if not isnan(p.b0) else sparsity(win, n, p.tau, work)
        if not (s.b0 > 0):
            s.b0 = s.d0 if s.d0 > 0 else 1.0
        if not isnan(p.eta0):
            s.eta_geo = p.eta0
        else:
            s.eta_geo = p.eta0_scale * s.d0 / (s.cl * d)
    else:
        # least squares: constant eta0 / (d Cl) in phase one (Section 3.1)
        s.min_med = median_abs(win, n, work)
        s.eta_geo = p.eta0 if not isnan(p.eta0) else p.eta0_scale / (s.cl * d)
    s.fill = 0
    s.phase = 1
    s.t_switch = 0
    if not (s.eta_geo > 0):
        s.eta_geo = 1e-12


cdef inline double statistical_eta(SGDState *s, const SGDParams *p,
                                   Py_ssize_t d) noexcept nogil:
    cdef double eta, start2
    if s.phase == 1:
        eta = s.eta_geo
        if p.loss == LOSS_CHECK:
            s.eta_geo *= 1.0 - p.decay / d
            start2 = s.b0 * p.Ca / (s.cl * p.Cb * d)
            if (isnan(p.t_switch) and eta <= start2) or (not isnan(p.t_switch) and s.t + 1 >= p.t_switch):
                start_phase(s, 2, start2, False)
                s.t_switch = s.t + 1
        else:
            if not isnan(p.t_switch) and s.t + 1 >= p.t_switch:
                start_phase(s, 2, s.eta_geo, True)
                s.t_switch = s.t + 1
        return eta
    if p.loss == LOSS_CHECK:
        return last_phase_eta(s, p, p.Cb * d)
    # least squares phase two: Ca / (Cl (t - t1) + Ca / eta1), continuous at t1
    return last_phase_eta(s, p, p.Ca / (s.eta_start * s.cl))


def sgd_single(const double[:, ::1] X, const double[::1] y, double[::1] w,
               double[::1] wbar, double[::1] state, const double[::1] params,
               double[::1] window, const double[::1] etas):
    """Run one single-sample update per row of X (the paper's Section 2.1).

    ``state``/``params`` are float64 arrays laid out as STATE_FIELDS /
    PARAM_FIELDS; ``window`` holds recent residuals; ``etas`` has one stepsize
    per row when the schedule is an array (user schedule), else is unused.
    Returns 0, or a negative error code.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i
    cdef SGDState *s = <SGDState *> &state[0]
    cdef const SGDParams *p = <const SGDParams *> &params[0]
    cdef Py_ssize_t wcap = window.shape[0]
    cdef double *win = &window[0]
    cdef double *work
    cdef double r, g, eta, pred
    cdef const double *x
    cdef int kind = <int> p.kind
    cdef bint stat = kind == KIND_STATISTICAL
    cdef bint fit_b = p.fit_intercept != 0
    cdef bint avg = p.average != 0
    if n == 0:
        return OK
    work = <double *> malloc(wcap * sizeof(double))
    if work == NULL:
        return ERR_NOMEM
    with nogil:
        for i in range(n):
            x = &X[i, 0]
            pred = dot(d, x, &w[0]) + s.intercept
            r = y[i] - pred
            g = loss_and_coef(r, p, &s.loss)
            s.n_seen += 1
            if stat:
                if s.phase == 0:
                    # warm-up: score, remember the residual and ||x||^2, no update
                    s.sumsq += dot(d, x, x) + (1.0 if fit_b else 0.0)
                    s.n_sumsq += 1
                    win[<Py_ssize_t> s.fill] = r
                    s.fill += 1
                    if s.fill >= p.n_warmup:
                        warmup_done(s, p, win, work, d + (1 if fit_b else 0))
                    continue
                win[<Py_ssize_t> s.fill] = r
                s.fill += 1
                if s.fill >= p.window:
                    window_done(s, p, win, work, d + (1 if fit_b else 0))
                eta = statistical_eta(s, p, d + (1 if fit_b else 0))
            elif kind == KIND_CONSTANT:
                eta = p.c
            elif kind == KIND_INVERSE_TIME:
                eta = p.c / (s.t + 1.0)
            else:
                eta = etas[i]
            # w -= eta * g * x
            axpy(d, -eta * g, x, &w[0])
            if fit_b:
                s.intercept -= eta * g
            s.t += 1
            s.last_eta = eta
            if avg and (s.avg_on != 0 or not stat):
                average_step(d, &w[0], &wbar[0], s)
    free(work)
    return check_finite(&w[0], d, s)


# ----------------------------------------------------------------------------
# Batch (Section 2.2) and all-data-so-far (Section 2.3) updates: one
# sub-gradient step on the mean loss over a block of rows.

cdef double block_step(const double *X, const double *y, Py_ssize_t m, Py_ssize_t d,
                       Py_ssize_t score_from, double *w, double *wbar,
                       SGDState *s, const SGDParams *p, double eta_user,
                       bint storage, double *resid, double *grad,
                       double *work) noexcept nogil:
    # One update on rows [0, m); rows >= score_from are new and add to the
    # prequential loss. Returns the stepsize used.
    cdef Py_ssize_t i, j
    cdef bint fit_b = p.fit_intercept != 0
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef double gsum = 0.0, g, eta, gnorm2, noise2, dummy = 0.0
    cdef double inv_m = 1.0 / m
    cdef int kind = <int> p.kind
    # resid = y - X w - b
    memcpy(resid, y, m * sizeof(double))
    gemv_rows(<int> m, <int> d, -1.0, X, w, 1.0, resid)
    for i in range(m):
        resid[i] -= s.intercept
        if i >= score_from:
            g = loss_and_coef(resid[i], p, &s.loss)
            s.n_seen += 1
        else:
            g = loss_and_coef(resid[i], p, &dummy)
        work[i] = g * inv_m
        gsum += g * inv_m
    # grad = X^T (g / m)
    gemv_rows_t(<int> m, <int> d, 1.0, X, work, 0.0, grad)

    if kind == KIND_STATISTICAL:
        if s.phase == 0:
            s.sumsq = 0
            for i in range(m):
                s.sumsq += dot(d, &X[i * d], &X[i * d])
            s.n_sumsq = m
            s.cl = (s.sumsq + (m if fit_b else 0)) / (m * <double> da)
            if s.cl <= 0:
                s.cl = 1.0
            s.d0 = median_abs(resid, m, work) * INV_MAD
            if isnan(p.eta0):
                s.eta_geo = p.eta0_scale * s.d0 / s.cl
            else:
                s.eta_geo = p.eta0
            if not (s.eta_geo > 0):
                s.eta_geo = 1e-12
            s.phase = 1
        if isnan(p.b0):
            s.b0 = sparsity(resid, m, p.tau, work)
            if not (s.b0 > 0):
                s.b0 = s.d0 if s.d0 > 0 else 1.0
        else:
            s.b0 = p.b0
        if s.phase == 1:
            # geometric until it falls to phase two's constant eta_const b0 / Cl
            if (isnan(p.t_switch) and s.eta_geo <= p.eta_const * s.b0 / s.cl) or \
                    (not isnan(p.t_switch) and s.t >= p.t_switch):
                start_phase(s, 2, p.eta_const * s.b0 / s.cl, True)
            else:
                eta = s.eta_geo
                s.eta_geo *= 1.0 - p.decay
        if s.phase == 2:
            eta = p.eta_const * s.b0 / s.cl
            if not storage:
                # Phase three when the batch gradient is down to its noise level:
                # at beta*, E||g||^2 = tau (1 - tau) E||x||^2 / m.
                gnorm2 = gsum * gsum
                for j in range(d):
                    gnorm2 += grad[j] * grad[j]
                noise2 = p.tau * (1.0 - p.tau) * s.cl * da * inv_m
                if gnorm2 <= 2.0 * noise2:
                    start_phase(s, 3, p.Ca * s.b0 / (s.cl * p.Cb), True)
            else:
                s.eta_start = eta
        if s.phase == 3:
            eta = last_phase_eta(s, p, p.Cb)
    elif kind == KIND_CONSTANT:
        eta = p.c
    elif kind == KIND_INVERSE_TIME:
        eta = p.c / (s.t + 1.0)
    else:
        eta = eta_user
    # w -= eta * grad
    axpy(<int> d, -eta, grad, w)
    if fit_b:
        s.intercept -= eta * gsum
    s.t += 1
    s.last_eta = eta
    if p.average != 0 and (s.avg_on != 0 or kind != KIND_STATISTICAL):
        average_step(d, w, wbar, s)
    return eta


def sgd_blocks(const double[:, ::1] X, const double[::1] y, Py_ssize_t block,
               double[::1] w, double[::1] wbar, double[::1] state,
               const double[::1] params, const double[::1] etas):
    """One update per consecutive block of ``block`` rows (batch mode).

    ``X.shape[0]`` must be a multiple of ``block``.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], b, nb
    cdef SGDState *s = <SGDState *> &state[0]
    cdef const SGDParams *p = <const SGDParams *> &params[0]
    cdef double *resid
    cdef double *grad
    cdef double *work
    if n == 0:
        return OK
    nb = n // block
    resid = <double *> malloc(block * sizeof(double))
    work = <double *> malloc(block * sizeof(double))
    grad = <double *> malloc(d * sizeof(double))
    if resid == NULL or work == NULL or grad == NULL:
        free(resid); free(work); free(grad)
        return ERR_NOMEM
    with nogil:
        for b in range(nb):
            block_step(&X[b * block, 0], &y[b * block], block, d, 0, &w[0], &wbar[0],
                       s, p, etas[b] if etas.shape[0] > b else 0.0, False,
                       resid, grad, work)
    free(resid); free(work); free(grad)
    return check_finite(&w[0], d, s)


def sgd_storage(const double[:, ::1] X, const double[::1] y, Py_ssize_t score_from,
                double[::1] w, double[::1] wbar, double[::1] state,
                const double[::1] params, double eta_user):
    """One sub-gradient step on the mean loss over all rows of X (all data so
    far, Section 2.3); rows from ``score_from`` on are new and are scored."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef SGDState *s = <SGDState *> &state[0]
    cdef const SGDParams *p = <const SGDParams *> &params[0]
    cdef double *resid
    cdef double *grad
    cdef double *work
    if n == 0:
        return OK
    resid = <double *> malloc(n * sizeof(double))
    work = <double *> malloc(n * sizeof(double))
    grad = <double *> malloc(d * sizeof(double))
    if resid == NULL or work == NULL or grad == NULL:
        free(resid); free(work); free(grad)
        return ERR_NOMEM
    with nogil:
        block_step(&X[0, 0], &y[0], n, d, score_from, &w[0], &wbar[0], s, p,
                   eta_user, True, resid, grad, work)
    free(resid); free(work); free(grad)
    return check_finite(&w[0], d, s)


def predict(const double[:, ::1] X, const double[::1] w, double intercept,
            double[::1] out):
    """out = X @ w + intercept."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i
    if n == 0:
        return
    with nogil:
        for i in range(n):
            out[i] = intercept
        gemv_rows(<int> n, <int> d, 1.0, &X[0, 0], &w[0], 1.0, &out[0])
