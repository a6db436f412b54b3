# Online (sub-)gradient descent for linear quantile and least-squares regression.
#
# The whole sample loop runs here without the GIL; Python validates input and
# owns the state arrays. Scalar state and schedule constants travel as float64
# arrays viewed through structs of doubles (`SGDState`, `SGDParams`), so that the
# estimator pickles as plain NumPy arrays and resumes bit-identically.
#
# Paper: Shen, Xia & Zhou, "Online Quantile Regression", JMLR 26 (2025).
from libc.math cimport fabs, pow, isnan, NAN
from libc.float cimport DBL_MAX
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from _blas cimport blas_int, dot, axpy, gemv_rows, gemv_rows_t

cdef extern from "_dense.h" nogil:
    double sf_dot(Py_ssize_t n, const double *x, const double *w)
    void sf_axpy(Py_ssize_t n, double a, const double *x, double *w)
    void sf_average(Py_ssize_t n, double inv, const double *w, double *wbar)
    double sf_axpy_dot(Py_ssize_t n, double a, const double *x, double *w,
                       const double *xnext)

# Field names, in memory order, of the two structs below; Python reads these so
# the layout has one source of truth.
STATE_FIELDS = (
    "t", "n_seen", "intercept", "intercept_avg", "loss", "phase", "eta_geo",
    "t_switch", "d0", "b0", "cl", "sumsq", "n_sumsq", "fill", "n_avg",
    "min_med", "last_eta", "eta_start", "avg_on", "n_flat", "b0_cap",
    "block", "k_pow", "eta_pow", "cu",
)
PARAM_FIELDS = (
    "tau", "loss", "kind", "c", "eta0", "eta0_scale", "decay", "Ca", "Cb",
    "b0", "t_switch", "n_warmup", "window", "average", "avg_power",
    "fit_intercept", "plateau", "eta_const", "ema", "patience", "mode", "C0",
)

# Schedule kinds, losses and return codes; cpdef makes them visible to Python.
cpdef enum:
    KIND_CONSTANT = 0
    KIND_INVERSE_TIME = 1
    KIND_STATISTICAL = 2
    KIND_ARRAY = 3        # precomputed stepsizes (a user schedule)

cpdef enum:
    MODE_SINGLE = 0
    MODE_BATCH = 1
    MODE_STORAGE = 2

cpdef enum:
    LOSS_CHECK = 0
    LOSS_SQUARED = 1

cpdef enum:
    OK = 0
    ERR_NOMEM = -1
    ERR_NONFINITE = -2      # the iterate diverged
    ERR_BADINPUT = -3       # a row whose residual is not finite (NaN/inf in X or y)
    ERR_WINDOW = -4         # the caller's window buffer is too small for the block
    ERR_SCALE = -5          # ||x||^2 overflows: the features need rescaling

cdef enum:
    SETTLED_STRIDE = 4    # a compile-time constant: the modulo is a mask
    ROW_SCALE = -2        # block_step / the single loop: ||x||^2 overflowed

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
    double avg_on         # 1 once settled in the last phase: the average runs
    double n_flat         # consecutive windows without progress
    double b0_cap         # b0 at the end of phase one: later estimates stay below
    double block          # rows per update of the last block update
    double k_pow          # last-phase step index of the cached eta_pow (-1: none)
    double eta_pow        # cached eta_start (1 + k / scale)^-avg_power
    double cu             # largest eigenvalue of E[x x'] (batch / storage modes)


cdef struct SGDParams:
    double tau
    double loss
    double kind
    double c              # constant / inverse_time coefficient
    double eta0           # NaN: estimate from the stream
    double eta0_scale     # C in eta0 = C D0 / (d Cl tau*^2) (single), C D0 m/d / Cl (blocks)
    double decay          # single: eta *= 1 - decay / (d tau*^2); blocks: 1 - decay m/d
    double Ca
    double Cb
    double b0             # NaN: estimate from the stream
    double t_switch       # NaN: switch by the rule; else the update index
    double n_warmup       # warm-up rows (no updates) for D0, b0, Cl (single, batch)
    double window         # residual window for b0 and the plateau test
    double average        # 1: Polyak-Ruppert averaging over the last phase
    double avg_power      # alpha of the t^-alpha last phase used with averaging
    double fit_intercept
    double plateau        # a window makes progress below plateau * best median |r|
    double eta_const      # batch/storage phase two: eta = eta_const * b0 / Cu
    double ema            # weight of a new window's b0 in phase two
    double patience       # windows without progress that make a plateau
    double mode           # MODE_SINGLE, MODE_BATCH or MODE_STORAGE
    double C0             # batch phase two needs block >= C0 tau*^2 d (Theorem 5)


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


cdef double error_scale(const double *r, Py_ssize_t n, double *work) noexcept nogil:
    # D0 = median |r| / 0.6745, the standard deviation of x'(beta_0 - beta*)
    # when it dominates; with more than half the residuals exactly 0 (e.g.
    # zero-inflated y) the mean |r| stands in, and 1 if all are 0.
    cdef Py_ssize_t i
    cdef double d0 = median_abs(r, n, work) * INV_MAD, acc = 0.0
    if d0 > 0:
        return d0
    for i in range(n):
        acc += fabs(r[i])
    if acc > 0:
        return acc / n * 1.2533141373155003     # sqrt(pi / 2) mean |r|
    return 1.0


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
    if n < 2:
        return NAN
    klo = <Py_ssize_t> ((tau - h) * n)
    khi = <Py_ssize_t> ((tau + h) * n)
    if khi > n - 1:
        khi = n - 1
    if khi < 1:
        khi = 1
    if klo > khi - 1:
        klo = khi - 1
    if klo < 0:
        klo = 0
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
    cdef double inv
    s.n_avg += 1.0
    inv = 1.0 / s.n_avg
    sf_average(d, inv, w, wbar)
    s.intercept_avg += (s.intercept - s.intercept_avg) * inv


cdef inline void start_phase(SGDState *s, double phase, double eta_start,
                             bint avg_on) noexcept nogil:
    s.phase = phase
    s.t_switch = s.t
    s.eta_start = eta_start
    s.n_avg = 0        # averaging restarts with the last phase
    s.avg_on = avg_on
    s.n_flat = 0       # the next plateau is counted afresh
    s.k_pow = -1


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


cdef inline double fixed_eta(const SGDState *s, const SGDParams *p,
                             double eta_user) noexcept nogil:
    # The stepsize of the data-free schedules: constant, c / (t + 1), or the
    # user schedule's precomputed value.
    if p.kind == KIND_CONSTANT:
        return p.c
    if p.kind == KIND_INVERSE_TIME:
        return p.c / (s.t + 1.0)
    return eta_user


cdef tuple finish(Py_ssize_t bad, const double *w, Py_ssize_t d, const SGDState *s):
    # The kernels' (code, row) result from a loop's outcome.
    if bad == ROW_SCALE:
        return ERR_SCALE, -1
    if bad >= 0:
        return ERR_BADINPUT, bad
    return check_finite(w, d, s), -1


# ----------------------------------------------------------------------------
# The statistical schedule's bookkeeping, shared by the three modes.

cdef inline double tau_star2(double tau) noexcept nogil:
    # 4 max(tau, 1 - tau)^2: Theorem 1's tau*^2, scaled to 1 at the median. It
    # bounds the squared sub-gradient factor (1{r <= 0} - tau)^2, so phase one's
    # stepsize and decay shrink with it (Section 3.1's rates are for tau = 1/2).
    cdef double ts = tau if tau > 0.5 else 1.0 - tau
    return 4.0 * ts * ts


cdef inline double last_phase_eta(SGDState *s, const SGDParams *p,
                                  double scale) noexcept nogil:
    # Ca / (t - t1 + Cb d) written as eta_start / (1 + (t - t1) / (Cb d)), or
    # (.)^-alpha when averaging: 1/t steps make Polyak-Ruppert averaging useless.
    cdef double k = s.t - s.t_switch
    if p.average != 0 and p.avg_power != 1.0:
        # pow() per sample would cost as much as the update at d = 100: it is
        # refreshed whenever k has grown by scale / 64, a change of at most
        # avg_power / 64 (~1%) in the stepsize.
        if s.k_pow < 0 or k < s.k_pow or k >= s.k_pow + scale * (1.0 / 64.0) \
                or not (s.eta_pow > 0):
            s.k_pow = k
            s.eta_pow = s.eta_start * pow(1.0 + k / scale, -p.avg_power)
        return s.eta_pow
    return s.eta_start * scale / (scale + k)


cdef double top_eigenvalue(const double *X, Py_ssize_t m, Py_ssize_t d,
                           bint fit_b) noexcept nogil:
    # Largest eigenvalue of [X 1]'[X 1] / m (the 1 column with an intercept) by
    # 30 power iterations from the all-ones vector: once, at the first update.
    # Returns -1 if it cannot allocate its scratch space.
    cdef Py_ssize_t i, j, it
    cdef double lam = -1.0, nv, vb = 1.0, sb, nold
    cdef double *u = <double *> malloc((m + 2 * d) * sizeof(double))
    cdef double *v
    cdef double *av
    if u == NULL:
        return -1.0
    v = u + m
    av = v + d
    for j in range(d):
        v[j] = 1.0
    if not fit_b:
        vb = 0.0
    for it in range(30):
        nold = vb * vb + dot(d, v, v)
        # u = X v + vb 1;  av = X' u / m;  sb = 1' u / m
        for i in range(m):
            u[i] = vb
        gemv_rows(<blas_int> m, <blas_int> d, 1.0, X, v, 1.0, u)
        gemv_rows_t(<blas_int> m, <blas_int> d, 1.0 / m, X, u, 0.0, av)
        sb = 0.0
        if fit_b:
            for i in range(m):
                sb += u[i]
            sb /= m
        nv = sb * sb + dot(d, av, av)
        if not (nv > 0 and nold > 0):
            break
        lam = (nv / nold) ** 0.5          # ||A v|| / ||v|| -> lambda_max
        nv = nv ** 0.5
        for j in range(d):
            v[j] = av[j] / nv
        vb = sb / nv
    free(u)
    return lam


cdef inline double block_ratio(const SGDState *s, Py_ssize_t d) noexcept nogil:
    # min(1, rows per update / d). The batch schedules are written for blocks
    # of at least ~d rows; a block of m < d rows is m single-sample steps
    # rolled into one, so its stepsizes and decay shrink by m / d (at m = 1,
    # single-sample scales).
    return s.block / d if s.block < d else 1.0


cdef inline double phase_start_eta(const SGDState *s, const SGDParams *p,
                                   Py_ssize_t d, double phase) noexcept nogil:
    cdef double const
    # Stepsize at the start of phase 2 or 3, from the current sparsity estimate.
    if p.loss == LOSS_SQUARED:
        return s.eta_geo                              # continuous at t1
    if p.mode == MODE_SINGLE:
        return s.b0 * p.Ca / (s.cl * p.Cb * d)        # (b0/Cl) Ca / (Cb d)
    # Batch and storage: a step on a block's mean gradient is stable only
    # below 2 / (f Cu), Cu the block's top eigenvalue (the paper's
    # (Cl / Cu^2) b1^2 / b0 scale; for blocks of m < d rows Cu grows like
    # ||x||^2 / m, which covers the small block), and the 1/t phase starts
    # no higher than the constant phase.
    const = p.eta_const * s.b0 / s.cu
    if phase == 2:
        return const
    return min(const, p.Ca * s.b0 * block_ratio(s, d) / (s.cl * p.Cb))


cdef void window_done(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                      double *work, Py_ssize_t d) noexcept nogil:
    # Called on each full window of residuals. Their median |r| falls while the
    # error dominates the residuals and levels off at the noise. A window makes
    # progress when its median is below `plateau` times the best so far;
    # `patience` windows in a row without progress make a plateau: the error
    # has reached the noise level (or stopped moving). A plateau ends phase one
    # (the paper: "until the error is at the noise level"), ends batch phase
    # two, and in the last phase starts the Polyak-Ruppert average, which so
    # leaves out the transient. For the check loss each window also refreshes
    # the sparsity estimate b0.
    cdef double est, med
    cdef bint flat
    med = median_abs(r, n, work)
    if s.min_med <= 0 or med < p.plateau * s.min_med:
        s.n_flat = 0
    else:
        s.n_flat += 1
    if s.min_med <= 0 or med < s.min_med:
        s.min_med = med
    flat = s.n_flat >= p.patience
    if p.loss == LOSS_CHECK and isnan(p.b0):
        est = sparsity(r, n, p.tau, work)
        # ties at the quantile (exact fits, discrete y) give a 0 spacing: such
        # a window says nothing about the density
        if est > 1e-9 * s.d0:
            if s.phase >= 2 and p.mode != MODE_STORAGE:    # storage: all data, no need
                s.b0 += p.ema * (est - s.b0)
            else:
                s.b0 = est
            if s.phase >= 2 and s.b0 > s.b0_cap:
                # Residuals are noise plus x'(beta - beta*): the estimate is
                # biased up by the error. Capping it at its value at the end of
                # phase one stops a larger error from buying larger steps.
                s.b0 = s.b0_cap
    if flat and s.phase == 1 and isnan(p.t_switch) and \
            not (p.mode == MODE_SINGLE and p.loss == LOSS_CHECK and not isnan(p.b0)):
        s.b0_cap = s.b0
        if p.mode == MODE_BATCH and s.block < p.C0 * tau_star2(p.tau) / 4.0 * d:
            # Batches too small for Theorem 5's constant phase: its one-step
            # floor b0 sqrt(tau (1 - tau) d / n) exceeds phase one's error.
            start_phase(s, 3, phase_start_eta(s, p, d, 3), True)
        else:
            start_phase(s, 2, phase_start_eta(s, p, d, 2), False)
    elif flat and s.phase == 2 and p.mode == MODE_BATCH:
        start_phase(s, 3, phase_start_eta(s, p, d, 3), True)
    elif flat and s.phase >= 2 and s.avg_on == 0:
        s.avg_on = 1      # settled: the average (if any) starts here
        s.n_avg = 0
    elif s.phase >= 2 and p.loss == LOSS_CHECK:
        s.eta_start = phase_start_eta(s, p, d, s.phase)
        s.k_pow = -1      # eta_start moved: recompute the cached power


cdef inline void push_residuals(SGDState *s, const SGDParams *p, const double *r,
                                Py_ssize_t n, double *win, double *work,
                                Py_ssize_t d) noexcept nogil:
    # Append n residuals; a full window is processed once per call, so a window
    # always spans at least one update (the buffer holds window + n values).
    memcpy(win + <Py_ssize_t> s.fill, r, n * sizeof(double))
    s.fill += n
    if s.fill >= p.window:
        window_done(s, p, win, <Py_ssize_t> s.fill, work, d)
        s.fill = 0


cdef void warmup_done(SGDState *s, const SGDParams *p, double *win, double *work,
                      Py_ssize_t d) noexcept nogil:
    # End of the single-sample warm-up: Cl, D0, b0 and eta0 from what was seen.
    cdef Py_ssize_t n = <Py_ssize_t> s.fill
    s.cl = s.sumsq / (s.n_sumsq * d)
    if not (s.cl > 0):
        s.cl = 1.0
    s.min_med = median_abs(win, n, work)
    if p.loss == LOSS_CHECK:
        s.d0 = error_scale(win, n, work)
        s.b0 = p.b0 if not isnan(p.b0) else sparsity(win, n, p.tau, work)
        if not (s.b0 > 1e-9 * s.d0):
            s.b0 = s.d0
        if not isnan(p.eta0):
            s.eta_geo = p.eta0
        else:
            s.eta_geo = p.eta0_scale * s.d0 / (s.cl * d * tau_star2(p.tau))
    else:
        # least squares: constant eta0_scale / (d Cl) in phase one (Section 3.1)
        s.eta_geo = p.eta0 if not isnan(p.eta0) else p.eta0_scale / (s.cl * d)
    s.fill = 0
    s.phase = 1
    s.t_switch = 0
    if not (s.eta_geo > 0):
        s.eta_geo = 1e-12


cdef inline double single_eta(SGDState *s, const SGDParams *p, Py_ssize_t d) noexcept nogil:
    # Stepsize of the next single-sample update under the statistical schedule.
    cdef double eta
    if s.phase == 1:
        eta = s.eta_geo
        if p.loss == LOSS_CHECK:
            s.eta_geo *= 1.0 - p.decay / (d * tau_star2(p.tau))
        if (not isnan(p.t_switch) and s.t + 1 >= p.t_switch) or \
                (p.loss == LOSS_CHECK and not isnan(p.b0) and isnan(p.t_switch)
                 and eta <= phase_start_eta(s, p, d, 2)):
            # with the noise's b0 known: the paper's continuity rule
            s.b0_cap = s.b0
            start_phase(s, 2, phase_start_eta(s, p, d, 2), False)
            s.t_switch = s.t + 1
        return eta
    if p.loss == LOSS_CHECK:
        return last_phase_eta(s, p, p.Cb * d)
    # least squares phase two: Ca / (Cl (t - t1) + Ca / eta1), continuous at t1
    return last_phase_eta(s, p, p.Ca / (s.eta_start * s.cl))


# ----------------------------------------------------------------------------
# Single-sample updates (Section 2.1 of the paper).

def sgd_single(const double[:, ::1] X, const double[::1] y, double[::1] w,
               double[::1] wbar, double[::1] state, const double[::1] params,
               double[::1] window, const double[::1] etas):
    """Run one single-sample update per row of X (the paper's Section 2.1).

    ``state``/``params`` are float64 arrays laid out as STATE_FIELDS /
    PARAM_FIELDS; ``window`` holds recent residuals; ``etas`` has one stepsize
    per row when the schedule is an array (user schedule), else is unused.
    Returns (code, row): code 0, or a negative error code; row is the first
    row with a non-finite residual for ERR_BADINPUT, else -1.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i
    cdef SGDState *s = <SGDState *> &state[0]
    cdef const SGDParams *p = <const SGDParams *> &params[0]
    cdef Py_ssize_t wcap = window.shape[0]
    cdef double *win = &window[0]
    cdef double *work
    cdef double r, g, eta, pred, xw = 0.0
    cdef bint have_dot = False
    cdef const double *x
    cdef int kind = <int> p.kind
    cdef bint stat = kind == KIND_STATISTICAL
    cdef bint fit_b = p.fit_intercept != 0
    cdef bint avg = p.average != 0
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef Py_ssize_t bad = -1
    if n == 0:
        return OK, -1
    if stat and (wcap < p.window or wcap < p.n_warmup or <Py_ssize_t> s.fill >= wcap):
        return ERR_WINDOW, -1
    work = <double *> malloc(wcap * sizeof(double))
    if work == NULL:
        return ERR_NOMEM, -1
    with nogil:
        for i in range(n):
            x = &X[i, 0]
            if not have_dot:
                xw = sf_dot(d, x, &w[0])
            have_dot = False
            pred = xw + s.intercept
            r = y[i] - pred
            if not (fabs(r) <= DBL_MAX):
                # NaN/inf anywhere in the row makes r non-finite: the finiteness
                # check costs a compare here instead of a second pass over X
                bad = i
                break
            g = loss_and_coef(r, p, &s.loss)
            s.n_seen += 1
            if stat:
                # Once settled (a plateau in the last phase) only b0 still
                # learns from the window: a quarter of the residuals is enough
                # and keeps the order statistics off the per-sample cost.
                if s.avg_on == 0 or (<long long> s.n_seen) % SETTLED_STRIDE == 0:
                    win[<Py_ssize_t> s.fill] = r
                    s.fill += 1
                if s.phase == 0:
                    # warm-up: score, remember the residual and ||x||^2, no update
                    s.sumsq += dot(d, x, x) + (1.0 if fit_b else 0.0)
                    s.n_sumsq += 1
                    if s.fill >= p.n_warmup:
                        warmup_done(s, p, win, work, da)
                        if not (s.cl <= DBL_MAX):
                            bad = ROW_SCALE
                            break
                    continue
                if s.fill >= p.window:
                    window_done(s, p, win, <Py_ssize_t> s.fill, work, da)
                    s.fill = 0
                eta = single_eta(s, p, da)
            else:
                eta = fixed_eta(s, p, etas[i] if kind == KIND_ARRAY else 0.0)
            # w -= eta * g * x (and the next row's x'w in the same pass)
            if i + 1 < n:
                xw = sf_axpy_dot(d, -eta * g, x, &w[0], x + d)
                have_dot = True
            else:
                sf_axpy(d, -eta * g, x, &w[0])
            if fit_b:
                s.intercept -= eta * g
            s.t += 1
            s.last_eta = eta
            if avg and (s.avg_on != 0 or not stat):
                average_step(d, &w[0], &wbar[0], s)
    free(work)
    return finish(bad, &w[0], d, s)


# ----------------------------------------------------------------------------
# Batch (Section 2.2) and all-data-so-far (Section 2.3) updates: one
# sub-gradient step on the mean loss over a block of rows.

cdef Py_ssize_t block_step(const double *X, const double *y, Py_ssize_t m, Py_ssize_t d,
                       Py_ssize_t score_from, double *w, double *wbar,
                       SGDState *s, const SGDParams *p, double eta_user,
                       double *win, double *resid, double *grad,
                       double *work) noexcept nogil:
    # One update on rows [0, m); rows >= score_from are new: they add to the
    # prequential loss and (batch mode) to the residual window. Returns -1, or
    # the first row whose residual is not finite, or ROW_SCALE if ||x||^2
    # overflows (nothing is updated then).
    cdef Py_ssize_t i
    cdef bint fit_b = p.fit_intercept != 0
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef double gsum = 0.0, g, eta, dummy = 0.0
    cdef double inv_m = 1.0 / m
    cdef const double *r0
    cdef Py_ssize_t n0
    cdef int kind = <int> p.kind
    s.block = m
    # resid = y - X w - b
    memcpy(resid, y, m * sizeof(double))
    gemv_rows(<blas_int> m, <blas_int> d, -1.0, X, w, 1.0, resid)
    for i in range(m):
        resid[i] -= s.intercept
        if not (fabs(resid[i]) <= DBL_MAX):
            return i
        if i >= score_from:
            g = loss_and_coef(resid[i], p, &s.loss)
            s.n_seen += 1
        else:
            g = loss_and_coef(resid[i], p, &dummy)
        work[i] = g * inv_m
        gsum += g * inv_m
    # grad = X^T (g / m)
    gemv_rows_t(<blas_int> m, <blas_int> d, 1.0, X, work, 0.0, grad)

    if kind == KIND_STATISTICAL:
        if s.phase == 0:
            # warm-up: Cl, D0 and b0 from the first n_warmup rows (all rows
            # in storage mode); blocks before that are scored, not learnt from
            for i in range(m):
                s.sumsq += dot(d, &X[i * d], &X[i * d]) + (1.0 if fit_b else 0.0)
            s.n_sumsq += m
            if p.mode == MODE_STORAGE:
                r0 = resid
                n0 = m
            else:
                memcpy(win + <Py_ssize_t> s.fill, resid, m * sizeof(double))
                s.fill += m
                if s.fill < p.n_warmup:
                    return -1
                r0 = win
                n0 = <Py_ssize_t> s.fill
                s.fill = 0
            s.cl = s.sumsq / (s.n_sumsq * <double> da)
            if not (s.cl <= DBL_MAX):
                return ROW_SCALE      # ||x||^2 overflows: nothing updated
            if not (s.cl > 0):
                s.cl = 1.0
            s.cu = top_eigenvalue(X, m, d, fit_b)
            if not (s.cu >= s.cl):
                s.cu = s.cl
            s.d0 = error_scale(r0, n0, work)
            s.min_med = s.d0 / INV_MAD
            s.b0 = p.b0 if not isnan(p.b0) else sparsity(r0, n0, p.tau, work)
            if not (s.b0 > 1e-9 * s.d0):
                s.b0 = s.d0
            s.eta_geo = p.eta0_scale * s.d0 * block_ratio(s, da) / s.cl \
                if isnan(p.eta0) else p.eta0
            if not (s.eta_geo > 0):
                s.eta_geo = 1e-12
            s.phase = 1
        elif p.mode == MODE_STORAGE:
            # all residuals at the current iterate form the window
            window_done(s, p, resid, m, work, da)
        else:
            push_residuals(s, p, resid, m, win, work, da)
        if s.phase == 1:
            # geometric, but never above phase two's constant eta_const b0 / Cu:
            # a longer step on the block's mean gradient overshoots
            eta = min(s.eta_geo, phase_start_eta(s, p, da, 2))
            s.eta_geo *= 1.0 - p.decay * block_ratio(s, da)
            if not isnan(p.t_switch) and s.t + 1 >= p.t_switch:
                s.b0_cap = s.b0
                start_phase(s, 2, phase_start_eta(s, p, da, 2), False)
                s.t_switch = s.t + 1
        elif s.phase == 2:
            eta = s.eta_start
        else:
            eta = last_phase_eta(s, p, p.Cb / block_ratio(s, da))
    else:
        eta = fixed_eta(s, p, eta_user)
    # w -= eta * grad
    axpy(<blas_int> d, -eta, grad, w)
    if fit_b:
        s.intercept -= eta * gsum
    s.t += 1
    s.last_eta = eta
    if p.average != 0 and (s.avg_on != 0 or kind != KIND_STATISTICAL):
        average_step(d, w, wbar, s)
    return -1


def sgd_blocks(const double[:, ::1] X, const double[::1] y, Py_ssize_t block,
               double[::1] w, double[::1] wbar, double[::1] state,
               const double[::1] params, double[::1] window, const double[::1] etas):
    """One update per consecutive block of ``block`` rows (batch mode).

    ``X.shape[0]`` must be a multiple of ``block``; ``window`` must hold
    max(window fill, n_warmup, params.window) + block values (checked).
    Returns (code, row) as ``sgd_single``.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], b, nb
    cdef SGDState *s = <SGDState *> &state[0]
    cdef const SGDParams *p = <const SGDParams *> &params[0]
    cdef double *resid
    cdef double *grad
    cdef double *work
    cdef Py_ssize_t bad = -1
    if n == 0:
        return OK, -1
    # a block is appended to a window holding fewer than max(fill,
    # n_warmup, window) residuals
    if block < 1 or n % block != 0 or \
            max(s.fill, p.n_warmup, p.window) + block > window.shape[0]:
        return ERR_WINDOW, -1
    nb = n // block
    resid = <double *> malloc(block * sizeof(double))
    # work holds a block's gradient weights or a window's order statistics
    work = <double *> malloc(max(block, window.shape[0]) * sizeof(double))
    grad = <double *> malloc(d * sizeof(double))
    if resid == NULL or work == NULL or grad == NULL:
        free(resid); free(work); free(grad)
        return ERR_NOMEM, -1
    with nogil:
        for b in range(nb):
            bad = block_step(&X[b * block, 0], &y[b * block], block, d, 0, &w[0], &wbar[0],
                             s, p, etas[b] if etas.shape[0] > b else 0.0, &window[0],
                             resid, grad, work)
            if bad >= 0:
                bad += b * block
            if bad != -1:
                break
    free(resid); free(work); free(grad)
    return finish(bad, &w[0], d, s)


def sgd_storage(const double[:, ::1] X, const double[::1] y, Py_ssize_t score_from,
                double[::1] w, double[::1] wbar, double[::1] state,
                const double[::1] params, double eta_user):
    """One sub-gradient step on the mean loss over all rows of X (all data so
    far, Section 2.3); rows from ``score_from`` on are new and are scored.
    Returns (code, row) as ``sgd_single``."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef SGDState *s = <SGDState *> &state[0]
    cdef const SGDParams *p = <const SGDParams *> &params[0]
    cdef double *resid
    cdef double *grad
    cdef double *work
    cdef Py_ssize_t bad = -1
    if n == 0:
        return OK, -1
    resid = <double *> malloc(n * sizeof(double))
    work = <double *> malloc(n * sizeof(double))
    grad = <double *> malloc(d * sizeof(double))
    if resid == NULL or work == NULL or grad == NULL:
        free(resid); free(work); free(grad)
        return ERR_NOMEM, -1
    with nogil:
        bad = block_step(&X[0, 0], &y[0], n, d, score_from, &w[0], &wbar[0], s, p,
                         eta_user, NULL, resid, grad, work)
    free(resid); free(work); free(grad)
    return finish(bad, &w[0], d, s)


def predict(const double[:, ::1] X, const double[::1] w, double intercept,
            double[::1] out):
    """out = X @ w + intercept."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i
    if n == 0:
        return
    with nogil:
        for i in range(n):
            out[i] = intercept
        gemv_rows(<blas_int> n, <blas_int> d, 1.0, &X[0, 0], &w[0], 1.0, &out[0])
