# Online (sub-)gradient descent for linear quantile and least-squares regression.
#
# The whole sample loop runs here without the GIL; Python validates input and
# owns the state arrays. State and constants cross the boundary as NumPy
# structured arrays of shape (1,) whose dtypes are made from the C structs
# below (STATE_DTYPE, PARAMS_DTYPE), so the structs are the one source of
# truth, Python reads fields by name, and the estimator pickles as plain NumPy
# arrays that resume bit-identically.
#
# No BLAS here: every product is a plain C loop over rows in a fixed order
# (_dense.h), so results do not depend on the BLAS library or its thread
# count, and a block's residuals, scale check and gradient come from one pass
# over its rows.
#
# Paper: Shen, Xia & Zhou, "Online Quantile Regression", JMLR 26 (2025).
import threading

import numpy as np

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS,
                             PyBUF_WRITABLE)
from cpython.pythread cimport PyThread_get_thread_ident
from libc.math cimport fabs, pow, isnan, NAN
from libc.float cimport DBL_MAX, DBL_MIN
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.signal cimport raise_ as c_raise

from _common cimport (OK, ERR_NOMEM, ERR_INTERRUPTED, ERR_NONFINITE, ERR_BADINPUT,
                      ERR_SCALE, ERR_LAYOUT, interrupted, pending_exception)

from streamfit._kernels._common import check_struct

cdef extern from "_dense.h" nogil:
    double sf_dot(Py_ssize_t n, const double *x, const double *w)
    double sf_dot2(Py_ssize_t n, const double *x, const double *w, double *xx)
    void sf_axpy(Py_ssize_t n, double a, const double *x, double *w)
    void sf_average(Py_ssize_t n, double inv, const double *w, double *wbar)
    double sf_axpy_dot2(Py_ssize_t n, double a, const double *x, double *w,
                        const double *xnext, double *xx)

# Schedule kinds, losses and modes; cpdef makes them visible to Python.
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

cdef enum:
    SETTLED_STRIDE = 4    # a compile-time constant: the modulo is a mask
    ROW_WORK = 48         # per-row overhead, in units of element operations

# Work (about one element operation a nanosecond) between two polls for
# signals: ~1 ms. interrupted() costs ~1 us, so polling adds ~0.1%.
cdef double POLL_WORK = 1 << 20
cdef double poll_work = POLL_WORK
# Test hook (_interrupt_at): the poll at which a real signal is raised, -1: none
cdef long long hook_countdown = -1
cdef int hook_signal = 0

# 1 / Phi^{-1}(3/4): median |N(0, s^2)| = 0.6745 s.
cdef double INV_MAD = 1.482602218505602
# sqrt(DBL_MIN): below it x^2 leaves float64's normal range and loses precision
cdef double SQRT_DBL_MIN = 1.4916681462400413e-154


cdef struct SGDState:
    double t              # schedule clock: updates taken (single mode: their weights' sum)
    double n_updates      # updates taken
    double n_seen         # rows seen (scored)
    double intercept
    double intercept_avg
    double loss           # prequential loss: each row scored (weighted) before its update
    double phase          # 0 warm-up, 1 geometric, 2 (const or 1/t), 3 1/t (batch)
    double eta_geo        # next phase-one stepsize
    double t_switch       # clock value where the current phase began
    double d0             # initial error scale estimate (response units)
    double b0             # sparsity 1/f(q_tau) estimate (response units)
    double cl             # mean eigenvalue of E[x x'] estimate: mean ||x||^2 / d
    double sumsq          # weighted sum of ||x||^2 seen during warm-up
    double n_sumsq        # their weights' sum
    double fill           # residuals in the current window
    double n_avg          # iterates in the Polyak-Ruppert average
    double min_med        # smallest window median |r| since phase one began (plateau test)
    double last_eta       # stepsize of the last update
    double eta_start      # stepsize at the start of the last phase
    double avg_on         # 1 once settled in the last phase: the average runs
    double n_flat         # consecutive windows without progress
    double b0_cap         # b0 at the end of phase one: later estimates stay below
    double block          # weight (rows) per update of the last block update
    double k_pow          # last-phase step index of the cached eta_pow (-1: none)
    double eta_pow        # cached eta_start (1 + k / scale)^-avg_power
    double cu             # largest eigenvalue of E[x x'] (batch / storage modes)
    double level          # running level of the window medians |r| (restart test)
    double n_high         # consecutive windows far above the level
    double n_restarts     # restarts of phase one after a jump of the residual scale
    double win_sumsq      # weighted sum of ||x||^2 (+1 with an intercept) of the window's rows
    double win_wsum       # their weights' sum
    double xmax           # largest |x_ij| over the warm-up's rows (underflow check)


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
    double ema            # weight of a new window in b0 (phase two) and the level
    double patience       # windows without progress that make a plateau (or a jump)
    double mode           # MODE_SINGLE, MODE_BATCH or MODE_STORAGE
    double C0             # batch phase two needs block >= C0 tau*^2 d (Theorem 5)
    double start          # 1: phase one after the warm-up; 2: straight to the last phase
    double restart        # a window median above restart * level for patience windows
                          # restarts phase one (0: never)


cdef SGDState _state_proto
cdef SGDParams _params_proto
STATE_DTYPE = np.asarray(<SGDState[:1]> &_state_proto).dtype
PARAMS_DTYPE = np.asarray(<SGDParams[:1]> &_params_proto).dtype

cdef object NDARRAY = np.ndarray


cdef int get_record(object arr, object dtype, str name, Py_ssize_t size, bint writable,
                    Py_buffer *buf) except -1:
    # A state or parameter record's buffer, checked: a (1,) array of exactly
    # `dtype` (names included: check_struct), C-contiguous, `size` bytes,
    # aligned for doubles, writable if asked. No buffer format is requested:
    # NumPy would spend ~3 us spelling out the record's 32 fields for Cython to
    # parse again, and the dtype check above says more than the format would.
    # Release with PyBuffer_Release.
    if not (type(arr) is NDARRAY and (<object> arr).dtype is dtype
            and (<object> arr).shape == (1,)):
        check_struct(arr, dtype, name)
    PyObject_GetBuffer(arr, buf, PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0))
    if buf.len != size or (<size_t> buf.buf) % sizeof(double) != 0:
        PyBuffer_Release(buf)
        raise ValueError(f"{name} must be an aligned record of {size} bytes")
    return 0


# Signals run in the main thread only; other threads never poll (a GIL round
# trip there would buy nothing).
cdef unsigned long MAIN_THREAD = threading.main_thread().ident


cdef struct Poll:
    bint on               # the main thread: poll for signals
    double work           # work since the last poll


cdef inline void poll_init(Poll *pl) noexcept:
    pl.on = PyThread_get_thread_ident() == MAIN_THREAD
    pl.work = 0.0


cdef inline bint poll_stop(Poll *pl, double work) noexcept nogil:
    # True when a signal handler raised: the caller stops before its next
    # whole step. Called once per step with that step's work.
    pl.work += work
    if pl.work < poll_work:
        return False
    pl.work = 0.0
    if hook_countdown >= 0 and pl.on:
        poll_hook()
    return pl.on and interrupted()


cdef inline bint poll_final(Poll *pl) noexcept nogil:
    # After the last whole step of a call that did work since its last poll
    # (a storage step's order statistics, the tail of a long loop): a signal
    # that came meanwhile is reported with the state after those steps,
    # instead of surfacing in Python after the call (which then discards
    # them). Short calls skip it: a GIL round trip costs ~1 us.
    if pl.work < poll_work * 0.125:
        return False
    pl.work = 0.0
    if hook_countdown >= 0 and pl.on:
        poll_hook()
    return pl.on and interrupted()


cdef void poll_hook() noexcept nogil:
    global hook_countdown, poll_work
    if hook_countdown == 0:
        hook_countdown = -1
        poll_work = POLL_WORK
        c_raise(hook_signal)      # a real signal: the Python handler runs in interrupted()
    else:
        hook_countdown -= 1


def _interrupt_at(long long polls, int signum):
    """Test hook: poll before every row (and every power-iteration row) and
    raise the signal ``signum`` with C's raise() at poll number ``polls``
    (0-based) of the main thread, once; then poll as usual again. The
    signal's Python handler decides what happens (a raising handler stops
    the kernel). ``polls=-1`` disarms."""
    global hook_countdown, hook_signal, poll_work
    hook_countdown = polls
    hook_signal = signum
    poll_work = 0.0 if polls >= 0 else POLL_WORK


cdef tuple result(int code, Py_ssize_t done, Py_ssize_t row):
    # (code, done, exc, row): exc is the signal handler's exception when
    # interrupted, taken off the thread state
    if code == ERR_INTERRUPTED:
        return code, done, pending_exception(), row
    return code, done, None, row


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
    p = np.zeros(1, PARAMS_DTYPE)
    for name in ("eta0", "b0", "t_switch"):
        p[name] = NAN
    p["start"] = 1.0
    return p


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


def _py_sparsity(const double[::1] r, double tau):
    """The kernel's sparsity quotient on the residuals r (for tests)."""
    cdef double *work = <double *> malloc(max(r.shape[0], 1) * sizeof(double))
    if work == NULL:
        raise MemoryError("_py_sparsity: no work space")
    try:
        return sparsity(&r[0] if r.shape[0] else NULL, r.shape[0], tau, work)
    finally:
        free(work)


cdef inline double row_absmax(const double *x, Py_ssize_t d, double m) noexcept nogil:
    # max(m, max_j |x_j|): warm-up rows only (the underflow check)
    cdef Py_ssize_t j
    for j in range(d):
        if fabs(x[j]) > m:
            m = fabs(x[j])
    return m


cdef inline double check_loss(double r, double tau) noexcept nogil:
    # rho_tau(r) = r * (tau - 1{r < 0})
    if r < 0:
        return r * (tau - 1.0)
    return r * tau


cdef inline double loss_and_coef(double r, const SGDParams *p, double *loss,
                                 double weight) noexcept nogil:
    # Returns g with gradient = g * x and adds weight * loss: check loss
    # (1{y <= x'b} - tau), squared loss r^2 / 2 gives -r.
    if p.loss == LOSS_CHECK:
        loss[0] += weight * check_loss(r, p.tau)
        return (1.0 if r <= 0 else 0.0) - p.tau
    loss[0] += weight * (0.5 * r * r)
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


cdef inline double fixed_eta(const SGDState *s, const SGDParams *p,
                             double eta_user) noexcept nogil:
    # The stepsize of the data-free schedules: constant, c / (t + 1), or the
    # user schedule's precomputed value.
    if p.kind == KIND_CONSTANT:
        return p.c
    if p.kind == KIND_INVERSE_TIME:
        return p.c / (s.t + 1.0)
    return eta_user


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


cdef double scaled_norm(const double *v, Py_ssize_t d, double extra) noexcept nogil:
    # sqrt(||v||^2 + extra^2) without over- or underflow (as dnrm2 does):
    # the power iteration's vectors scale like ||x||^2, which may square to
    # beyond float64 even when ||x||^2 itself is fine.
    cdef Py_ssize_t j
    cdef double big = fabs(extra), acc = 0.0, t
    for j in range(d):
        if fabs(v[j]) > big:
            big = fabs(v[j])
    if not (big > 0) or not (big <= DBL_MAX):
        return big
    t = extra / big
    acc = t * t
    for j in range(d):
        t = v[j] / big
        acc += t * t
    return big * acc ** 0.5


cdef int top_eigenvalue(const double *X, const double *sw, Py_ssize_t m, Py_ssize_t d,
                        bint fit_b, double *v, double *av, Poll *pl,
                        double *lam_out) noexcept nogil:
    # Largest eigenvalue of [X 1]' W [X 1] / sum(W) (the 1 column with an
    # intercept; W the row weights, or 1) by 30 power iterations from the
    # all-ones vector: once, at the block that ends the warm-up (or a
    # restart). v and av hold d values each. Returns OK or ERR_INTERRUPTED.
    cdef Py_ssize_t i, j, it
    cdef double lam = -1.0, nv, vb = 1.0, sb, nold, u, wi, wsum = 0.0
    for j in range(d):
        v[j] = 1.0
    if not fit_b:
        vb = 0.0
    for i in range(m):
        wsum += sw[i] if sw != NULL else 1.0
    if not (wsum > 0):
        lam_out[0] = -1.0
        return OK
    for it in range(30):
        nold = scaled_norm(v, d, vb)
        # av = X' W (X v + vb) / sum(W);  sb = 1' W (X v + vb) / sum(W)
        for j in range(d):
            av[j] = 0.0
        sb = 0.0
        for i in range(m):
            if poll_stop(pl, d + ROW_WORK):
                return ERR_INTERRUPTED
            wi = sw[i] if sw != NULL else 1.0
            if wi == 0:
                continue
            u = wi * (sf_dot(d, &X[i * d], v) + vb) / wsum
            sf_axpy(d, u, &X[i * d], av)
            sb += u
        if not fit_b:
            sb = 0.0
        nv = scaled_norm(av, d, sb)
        if not (nv > 0 and nold > 0 and nv <= DBL_MAX):
            break
        lam = nv / nold                   # ||A v|| / ||v|| -> lambda_max
        for j in range(d):
            v[j] = av[j] / nv
        vb = sb / nv
    lam_out[0] = lam
    return OK


def _py_top_eigenvalue(const double[:, ::1] X, bint fit_intercept, sample_weight=None):
    """The kernel's power iteration for the top eigenvalue of the (weighted)
    second moment of [X 1] (for tests)."""
    cdef Py_ssize_t m = X.shape[0], d = X.shape[1]
    cdef const double[::1] sw
    cdef double lam = -1.0
    cdef Poll pl
    cdef double *buf = <double *> malloc(2 * max(d, 1) * sizeof(double))
    if buf == NULL:
        raise MemoryError("_py_top_eigenvalue: no work space")
    poll_init(&pl)
    pl.on = False
    try:
        if sample_weight is not None:
            sw = np.ascontiguousarray(sample_weight, dtype=np.float64)
            if sw.shape[0] != m:
                raise ValueError("sample_weight must have one value per row")
        if m == 0:
            return -1.0
        top_eigenvalue(&X[0, 0], &sw[0] if sample_weight is not None else NULL, m, d,
                       fit_intercept, buf, buf + d, &pl, &lam)
        return lam
    finally:
        free(buf)


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


cdef void end_phase_one(SGDState *s, const SGDParams *p, Py_ssize_t d) noexcept nogil:
    # Into the last phase (the plateau rule, or start="phase2" after the warm-up).
    s.b0_cap = s.b0
    if p.mode == MODE_BATCH and s.block < p.C0 * tau_star2(p.tau) / 4.0 * d:
        # Batches too small for Theorem 5's constant phase: its one-step
        # floor b0 sqrt(tau (1 - tau) d / n) exceeds phase one's error.
        start_phase(s, 3, phase_start_eta(s, p, d, 3), True)
    else:
        start_phase(s, 2, phase_start_eta(s, p, d, 2), False)


cdef int fresh_estimates(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                         double *work, Py_ssize_t d) noexcept nogil:
    # D0, b0, the plateau test's best median, the level and phase one's first
    # stepsize from the residuals r at the current iterate: at the end of the
    # warm-up, and again when the residual scale jumped (a restart). Cl (and
    # Cu) are set by the caller first. Returns ERR_NONFINITE if phase one's
    # first stepsize overflows (y's scale too large against X's).
    cdef double med = median_abs(r, n, work)
    s.level = med
    s.n_high = 0
    if p.loss == LOSS_CHECK:
        s.d0 = error_scale(r, n, work)
        s.b0 = p.b0 if not isnan(p.b0) else sparsity(r, n, p.tau, work)
        if not (s.b0 > 1e-9 * s.d0):
            s.b0 = s.d0
        if not isnan(p.eta0):
            s.eta_geo = p.eta0
        elif p.mode == MODE_SINGLE:
            s.eta_geo = p.eta0_scale * s.d0 / (s.cl * d * tau_star2(p.tau))
        else:
            s.eta_geo = p.eta0_scale * s.d0 * block_ratio(s, d) / s.cl
    else:
        # least squares: constant eta0_scale / (d Cl) in phase one (Section 3.1)
        s.eta_geo = p.eta0 if not isnan(p.eta0) else p.eta0_scale / (s.cl * d)
    if not (s.eta_geo <= DBL_MAX):
        return ERR_NONFINITE
    if not (s.eta_geo > 0):
        s.eta_geo = 1e-12
    # single mode's plateau test starts from the warm-up's median; block
    # modes from D0's (the same number when the error dominates)
    s.min_med = med if p.mode == MODE_SINGLE else s.d0 / INV_MAD
    s.phase = 1
    s.t_switch = s.t
    s.n_avg = 0
    s.avg_on = 0
    s.n_flat = 0
    s.k_pow = -1
    if p.start == 2:
        end_phase_one(s, p, d)
    return OK


cdef int calibrated_cl(SGDState *s, Py_ssize_t d) noexcept nogil:
    # Cl at the end of the warm-up: mean ||x||^2 / d. ERR_SCALE when the sum
    # overflows, or when X's entries are all so small (but not 0) that their
    # squares leave float64's normal range: the scale would be lost; X
    # exactly 0 has no scale to learn and gets Cl = 1.
    s.cl = s.sumsq / (s.n_sumsq * d)
    if not (s.cl <= DBL_MAX):
        return ERR_SCALE
    if s.xmax > 0 and s.xmax < SQRT_DBL_MIN:
        return ERR_SCALE
    if not (s.cl > 0):
        s.cl = 1.0
    return OK


cdef enum:
    JUMP_NONE = 0         # a window like the others
    JUMP_HIGH = 1         # far above the level: it teaches the estimates nothing yet
    JUMP_RESTART = 2      # the patience-th high window in a row: restart phase one


cdef int jump_test(SGDState *s, const SGDParams *p, double med) noexcept nogil:
    # Non-stationary starts (a stuck sensor: constant y for a while) leave
    # estimates fitted to the start: windows of (nearly) no spread say nothing
    # about the noise, and when the residual scale then jumps far above its
    # running level for `patience` windows in a row, the estimates are stale
    # and phase one restarts (fresh_estimates on the last window, with Cl from
    # its rows). `med` is the window's median |r|; the level is a running
    # average of the medians of the windows that were not high.
    if p.loss != LOSS_CHECK or not (p.restart > 0) or s.phase < 1:
        return JUMP_NONE
    if s.level > 0 and med > p.restart * s.level:
        s.n_high += 1
        return JUMP_RESTART if s.n_high >= p.patience else JUMP_HIGH
    s.n_high = 0
    s.level = med if not (s.level > 0) else s.level + p.ema * (med - s.level)
    return JUMP_NONE


cdef int full_window(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                     double *work, Py_ssize_t d) noexcept nogil:
    # A full window of single or batch mode: the restart rule, then (unless
    # the window is far above the level) the plateau test and b0. Returns the
    # jump; on JUMP_RESTART the caller restarts phase one on this window.
    cdef double med = median_abs(r, n, work)
    cdef int jump = jump_test(s, p, med)
    if jump == JUMP_NONE:
        window_done(s, p, r, n, med, work, d)
    return jump


cdef void window_done(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                      double med, double *work, Py_ssize_t d) noexcept nogil:
    # Called on each full window of residuals (med: its median |r|). Their
    # median |r| falls while the error dominates the residuals and levels off
    # at the noise. A window makes progress when its median is below
    # `plateau` times the best so far; `patience` windows in a row without
    # progress make a plateau: the error has reached the noise level (or
    # stopped moving). A plateau ends phase one (the paper: "until the error
    # is at the noise level"), ends batch phase two, and in the last phase
    # starts the Polyak-Ruppert average, which so leaves out the transient.
    # For the check loss each window also refreshes the sparsity estimate b0.
    cdef double est
    cdef bint flat
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
        end_phase_one(s, p, d)
    elif flat and s.phase == 2 and p.mode == MODE_BATCH:
        start_phase(s, 3, phase_start_eta(s, p, d, 3), True)
    elif flat and s.phase >= 2 and s.avg_on == 0:
        s.avg_on = 1      # settled: the average (if any) starts here
        s.n_avg = 0
    elif s.phase >= 2 and p.loss == LOSS_CHECK:
        s.eta_start = phase_start_eta(s, p, d, s.phase)
        s.k_pow = -1      # eta_start moved: recompute the cached power


cdef int restart(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                 double *work, Py_ssize_t d, double cu) noexcept nogil:
    # Phase one afresh from this window: the residual scale jumped. Cl from
    # the window's rows (if they give one), Cu (block modes) from the
    # caller's block.
    if s.win_wsum > 0 and s.win_sumsq / s.win_wsum >= DBL_MIN and s.win_sumsq <= DBL_MAX:
        s.cl = s.win_sumsq / (s.win_wsum * d)
    s.cu = cu if cu >= s.cl else s.cl
    s.n_restarts += 1
    return fresh_estimates(s, p, r, n, work, d)


cdef inline double single_eta(SGDState *s, const SGDParams *p, Py_ssize_t d,
                              double weight) noexcept nogil:
    # Stepsize of the next single-sample update under the statistical schedule.
    cdef double eta
    if s.phase == 1:
        eta = s.eta_geo
        if p.loss == LOSS_CHECK:
            # the clock moves by the row's weight: so does the decay
            if weight == 1.0:
                s.eta_geo *= 1.0 - p.decay / (d * tau_star2(p.tau))
            else:
                s.eta_geo *= pow(1.0 - p.decay / (d * tau_star2(p.tau)), weight)
        if (not isnan(p.t_switch) and s.t + 1 >= p.t_switch) or \
                (p.loss == LOSS_CHECK and not isnan(p.b0) and isnan(p.t_switch)
                 and eta <= phase_start_eta(s, p, d, 2)):
            # with the noise's b0 known: the paper's continuity rule
            s.b0_cap = s.b0
            start_phase(s, 2, phase_start_eta(s, p, d, 2), False)
            s.t_switch = s.t + weight
        return eta
    if p.loss == LOSS_CHECK:
        return last_phase_eta(s, p, p.Cb * d)
    # least squares phase two: Ca / (Cl (t - t1) + Ca / eta1), continuous at t1
    return last_phase_eta(s, p, p.Ca / (s.eta_start * s.cl))


# ----------------------------------------------------------------------------
# Single-sample updates (Section 2.1 of the paper).

cdef enum:
    NO_UPDATE = 1         # not an error: the row warms the schedule up, no update


cdef inline int stat_single_row(SGDState *s, const SGDParams *p, double *win, double *work,
                                const double *x, Py_ssize_t d, Py_ssize_t da, double r,
                                double xx, double wi, double *eta) noexcept nogil:
    # The statistical schedule's work for one single-sample row of weight
    # wi > 0, residual r and ||x||^2 = xx: the residual window, the warm-up,
    # the window's tests (restarts included) and the stepsize of the row's
    # update. Returns OK (update with eta[0]), NO_UPDATE (a warm-up row) or an
    # error code. The caller moves the clock once it has updated.
    cdef int code
    cdef double fit_one = 1.0 if p.fit_intercept != 0 else 0.0
    # Once settled (a plateau in the last phase) only b0 still learns from the
    # window: a quarter of the residuals is enough and keeps the order
    # statistics off the per-sample cost. Counted in updates, so that rows of
    # weight 0 change nothing.
    if s.avg_on == 0 or (<long long> s.n_updates) % SETTLED_STRIDE == 0:
        win[<Py_ssize_t> s.fill] = r
        s.fill += 1
        s.win_sumsq += wi * (xx + fit_one)
        s.win_wsum += wi
    if s.phase == 0:
        # warm-up: remember the residual and ||x||^2, no update
        s.sumsq += wi * (xx + fit_one)
        s.n_sumsq += wi
        s.xmax = row_absmax(x, d, s.xmax)
        if s.fill >= p.n_warmup:
            code = calibrated_cl(s, da)
            if code == OK:
                code = fresh_estimates(s, p, win, <Py_ssize_t> s.fill, work, da)
            if code != OK:
                return code
            s.fill = 0
            s.win_sumsq = 0
            s.win_wsum = 0
        return NO_UPDATE
    if s.fill >= p.window:
        if full_window(s, p, win, <Py_ssize_t> s.fill, work, da) == JUMP_RESTART:
            code = restart(s, p, win, <Py_ssize_t> s.fill, work, da, 0.0)
            if code != OK:
                return code
        s.fill = 0
        s.win_sumsq = 0
        s.win_wsum = 0
    eta[0] = single_eta(s, p, da, wi)
    return OK


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
    take_records(state, params, &rec)
    try:
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
    s.t += weight
    s.n_updates += 1
    s.last_eta = eta
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


cdef struct Records:
    Py_buffer state
    Py_buffer params


cdef int take_records(object state, object params, Records *r) except -1:
    # The two records' buffers (release with give_records).
    get_record(state, STATE_DTYPE, "state", sizeof(SGDState), True, &r.state)
    try:
        get_record(params, PARAMS_DTYPE, "params", sizeof(SGDParams), False, &r.params)
    except BaseException:
        PyBuffer_Release(&r.state)
        raise
    return 0


cdef void give_records(Records *r) noexcept:
    PyBuffer_Release(&r.params)
    PyBuffer_Release(&r.state)


def sgd_single(const double[:, ::1] X, const double[::1] y, const double[::1] sample_weight,
               double[::1] w, double[::1] wbar, object state, object params,
               double[::1] window, const double[::1] etas):
    """One single-sample update per row of X (the paper's Section 2.1).

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
    """
    cdef Records rec
    check_lengths(X.shape[0], X.shape[1], y.shape[0], sample_weight.shape[0], w.shape[0],
                  wbar.shape[0])
    take_records(state, params, &rec)
    try:
        return _sgd_single(X, y, sample_weight, w, wbar, <SGDState *> rec.state.buf,
                           <const SGDParams *> rec.params.buf, window, etas)
    finally:
        give_records(&rec)


cdef tuple _sgd_single(const double[:, ::1] X, const double[::1] y, const double[::1] sample_weight,
                       double[::1] w, double[::1] wbar, SGDState *s, const SGDParams *p,
                       double[::1] window, const double[::1] etas):
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i, j = 0, need = 0
    cdef Py_ssize_t wcap = window.shape[0]
    cdef double *win
    cdef double *work
    cdef double *wp
    cdef const double *swp = &sample_weight[0] if sample_weight.shape[0] else NULL
    cdef double r, g, eta, xw = 0.0, xx = 0.0, wi = 1.0
    cdef bint have_dot = False
    cdef const double *x
    cdef int kind = <int> p.kind, code = OK
    cdef bint stat = kind == KIND_STATISTICAL
    cdef bint fit_b = p.fit_intercept != 0
    cdef bint avg = p.average != 0
    cdef Py_ssize_t da = d + (1 if fit_b else 0)
    cdef Py_ssize_t row = -1, done = 0
    cdef Poll pl
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
    work = <double *> malloc(max(wcap, 1) * sizeof(double))
    if work == NULL:
        return result(ERR_NOMEM, 0, -1)
    win = &window[0] if wcap else NULL
    wp = &w[0]
    poll_init(&pl)
    with nogil:
        for i in range(n):
            if poll_stop(&pl, d + ROW_WORK):
                code = ERR_INTERRUPTED
                break
            x = &X[i, 0]
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
            if swp != NULL:
                wi = swp[i]
            g = loss_and_coef(r, p, &s.loss, wi)
            s.n_seen += 1
            done = i + 1
            if wi == 0:
                continue          # a row of weight 0 is scored, nothing more
            if stat:
                code = stat_single_row(s, p, win, work, x, d, da, r, xx, wi, &eta)
                if code == NO_UPDATE:
                    code = OK
                    continue          # a warm-up row: scored and remembered only
                if code != OK:
                    break
            else:
                eta = fixed_eta(s, p, etas[j] if kind == KIND_ARRAY else 0.0)
                j += 1
            # w -= eta * g * x (and the next row's x'w and ||x||^2 in the same pass)
            if i + 1 < n:
                xw = sf_axpy_dot2(d, -eta * g * wi, x, wp, x + d, &xx)
                have_dot = True
            else:
                sf_axpy(d, -eta * g * wi, x, wp)
            if fit_b:
                s.intercept -= eta * g * wi
            s.t += wi
            s.n_updates += 1
            s.last_eta = eta
            if avg and (s.avg_on != 0 or not stat):
                average_step(d, wp, &wbar[0], s)
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

cdef struct BlockSums:
    double gsum           # sum of w_i g_i (the intercept's gradient, unnormalised)
    double wsum           # sum of w_i
    double loss           # weighted loss of the new rows
    double n_new          # new rows
    double sumsq          # sum of w_i (||x_i||^2 + fit_intercept)
    double xmax           # max |x_ij| (warm-up blocks only)
    double sumsq_new      # sumsq and wsum of the new rows (storage: the jump test's window)
    double wsum_new


cdef int block_pass(const double *X, const double *y, const double *sw, Py_ssize_t m,
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


cdef Py_ssize_t compact(double *r, const double *sw, Py_ssize_t m, Py_ssize_t split,
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


cdef double restart_cu(const double *X, const double *sw, Py_ssize_t m, Py_ssize_t d,
                       Py_ssize_t first, bint fit_b, double *eig) noexcept nogil:
    # The top eigenvalue of rows [first, m) for a restart. The state has
    # already moved, so this one is not interruptible (it is rare and short).
    cdef Poll quiet
    cdef double cu = -1.0
    quiet.on = False
    quiet.work = 0.0
    top_eigenvalue(X + first * d, sw + first if sw != NULL else NULL, m - first, d, fit_b,
                   eig, eig + d, &quiet, &cu)
    return cu


cdef int block_warm_up(SGDState *s, const SGDParams *p, const double *X, const double *sw,
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


cdef int storage_windows(SGDState *s, const SGDParams *p, const double *X, const double *sw,
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
                      restart_cu(X, sw, m, d, score_from, p.fit_intercept != 0, bw.eig))
    elif jump == JUMP_NONE:
        window_done(s, p, bw.resid, nr, median_abs(bw.resid, nr, bw.work), bw.work, da)
    if rj != NULL:
        s.fill = 0
        s.win_sumsq = 0
        s.win_wsum = 0
    return err


cdef int batch_window(SGDState *s, const SGDParams *p, const double *X, const double *sw,
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
                          restart_cu(X, sw, m, d, 0, p.fit_intercept != 0, bw.eig))
        s.fill = 0
        s.win_sumsq = 0
        s.win_wsum = 0
    return err


cdef double block_eta(SGDState *s, const SGDParams *p, Py_ssize_t da) noexcept nogil:
    # The statistical schedule's stepsize of a block update, by phase.
    cdef double eta
    if s.phase == 1:
        # geometric, but never above phase two's constant eta_const b0 / Cu:
        # a longer step on the block's mean gradient overshoots
        eta = min(s.eta_geo, phase_start_eta(s, p, da, 2))
        s.eta_geo *= 1.0 - p.decay * block_ratio(s, da)
        if not isnan(p.t_switch) and s.t + 1 >= p.t_switch:
            s.b0_cap = s.b0
            start_phase(s, 2, phase_start_eta(s, p, da, 2), False)
            s.t_switch = s.t + 1
        return eta
    if s.phase == 2:
        return s.eta_start
    return last_phase_eta(s, p, p.Cb / block_ratio(s, da))


cdef int block_step(const double *X, const double *y, const double *sw, Py_ssize_t m,
                    Py_ssize_t d, Py_ssize_t score_from, double *w, double *wbar,
                    SGDState *s, const SGDParams *p, double eta_user, double *win,
                    BlockWork *bw, Poll *pl, Py_ssize_t *bad) noexcept nogil:
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
            code = storage_windows(s, p, X, sw, m, d, score_from, bw, &bs, nr, first_new, win)
        else:
            code = batch_window(s, p, X, sw, m, d, bw, &bs, nr, win)
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
    s.t += 1
    s.n_updates += 1
    s.last_eta = eta
    if p.average != 0 and (s.avg_on != 0 or not stat):
        average_step(d, w, wbar, s)
    return OK


cdef int block_work_init(BlockWork *bw, Py_ssize_t m, Py_ssize_t d, Py_ssize_t wcap) noexcept:
    bw.resid = <double *> malloc(max(m, 1) * sizeof(double))
    bw.work = <double *> malloc(max(max(m, wcap), 1) * sizeof(double))
    bw.grad = <double *> malloc(3 * max(d, 1) * sizeof(double))
    bw.eig = bw.grad + d if bw.grad != NULL else NULL
    if bw.resid == NULL or bw.work == NULL or bw.grad == NULL:
        block_work_free(bw)
        return ERR_NOMEM
    return OK


cdef void block_work_free(BlockWork *bw) noexcept:
    free(bw.resid)
    free(bw.work)
    free(bw.grad)
    bw.resid = bw.work = bw.grad = bw.eig = NULL


def sgd_blocks(const double[:, ::1] X, const double[::1] y, const double[::1] sample_weight,
               Py_ssize_t block, double[::1] w, double[::1] wbar, object state,
               object params, double[::1] window, const double[::1] etas):
    """One update per consecutive block of ``block`` rows (batch mode).

    ``X.shape[0]`` must be a multiple of ``block``; ``window`` must hold
    max(window fill, n_warmup, params.window) + block values; ``etas`` one
    stepsize per block of positive total weight (user schedules).

    Returns (code, done, exc, row) as ``sgd_single``; ``done`` is a multiple
    of ``block`` (whole blocks), ``row`` indexes X.
    """
    cdef Records rec
    check_lengths(X.shape[0], X.shape[1], y.shape[0], sample_weight.shape[0], w.shape[0],
                  wbar.shape[0])
    take_records(state, params, &rec)
    try:
        return _sgd_blocks(X, y, sample_weight, block, w, wbar, <SGDState *> rec.state.buf,
                           <const SGDParams *> rec.params.buf, window, etas)
    finally:
        give_records(&rec)


cdef tuple _sgd_blocks(const double[:, ::1] X, const double[::1] y, const double[::1] sample_weight,
                       Py_ssize_t block, double[::1] w, double[::1] wbar, SGDState *s,
                       const SGDParams *p, double[::1] window, const double[::1] etas):
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
    poll_init(&pl)
    with nogil:
        for b in range(nb):
            updates = s.n_updates
            code = block_step(&X[b * block, 0], &y[b * block],
                              swp + b * block if swp != NULL else NULL, block, d, 0,
                              &w[0], &wbar[0], s, p, etas[j] if j < etas.shape[0] else 0.0,
                              &window[0] if window.shape[0] else NULL, &bw, &pl, &bad)
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
    take_records(state, params, &rec)
    try:
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
    poll_init(&pl)
    with nogil:
        code = block_step(&X[0, 0], &y[0], swp, n, d, score_from, &w[0], &wbar[0], s, p,
                          eta_user, &window[0] if window.shape[0] else NULL, &bw, &pl, &bad)
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
