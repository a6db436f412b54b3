# Online PCA by Follow the (Perturbed) Leader: the whole trial loop -- play,
# gain, rank-one (or dense) update, noise update, warm-started top-k -- runs here
# without the GIL. Python validates input and owns the state arrays, which the
# loop updates in place: it stops only between whole trials (on a signal), so
# the state always describes a whole number of them.
#
# Paper: Kotlowski & Warmuth, "PCA with Gaussian perturbations".
#
# Layout. Symmetric n x n matrices (S, N, C, a dense instance) are C-order
# arrays whose row-major lower triangle is the valid one: row i holds columns
# 0..i contiguously, which BLAS sees as the column-major upper triangle ('U').
# Blocks of vectors are C-order (b, n) arrays: each row a vector, which BLAS
# sees as a column-major n x b matrix with leading dimension n.
#
# The boundary. State and parameters cross as NumPy records of the structs
# below (STATE_DTYPE, PARAMS_DTYPE, made from them); every def entry checks
# the records and the shapes of the arrays they describe.
from libc.math cimport sqrt, frexp, ldexp, isfinite
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport PyCapsule_GetPointer

import numpy as np

from _common cimport (bitgen_t, OK, ERR_NOMEM, ERR_LAPACK, ERR_INTERRUPTED,
                      pending_exception, bad_field, is_real)
from _goe cimport goe_row

from _dense cimport sf_row_update, sf_axpy
from cython.parallel cimport prange

from _symm_par cimport symm_product, par_threads, PAR_MIN_N

cdef extern from "<time.h>" nogil:
    # ISO C11's clock (MSVC has it too): the trial loop's thread choice
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int timespec_get(timespec *ts, int base)
    int TIME_UTC


cdef inline double seconds() noexcept nogil:
    cdef timespec ts
    timespec_get(&ts, TIME_UTC)
    return <double> ts.tv_sec + 1e-9 * <double> ts.tv_nsec
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_stop
from _topk cimport (TopKState, TopKWork, TOPK_MAX_ITER, check_topk_state, topk_work_init, topk_work_free, topk_exact,
                    topk_solve, topk_will_krylov, leader_flush, leader_gain, leader_dense_hint,
                    rank_one_rows, rows_dot_plain)

from streamfit._kernels._common import check_struct

cpdef enum:
    INSTANCE_VECTOR = 0
    INSTANCE_DENSE = 1

cpdef enum:
    NOISE_NONE = 0          # Follow the Leader
    NOISE_FIXED = 1         # one N per run, S_t = X_<t + sqrt(t) sigma N
    NOISE_RANDOM_WALK = 2   # N_t = N_{t-1} + a fresh GOE increment
    NOISE_INDEPENDENT = 3   # a fresh sqrt(t) sigma N every trial

cpdef enum:
    SOLVER_EXACT = 0        # the eigen-solver chain (dsyevr first) every trial
    SOLVER_KRYLOV = 1       # warm-started block Krylov, the chain as fallback

cdef double SQRT_2_OVER_PI = 0.7978845608028654
cdef double SQRT_2 = 1.4142135623730951


ctypedef struct PCAState:
    long long t         # trials played so far
    long long pending   # rows of `rows` not yet added to C (vector instances)
    double sigma        # sigma_{t+1}, the noise scale of the next decision
    double s            # sqrt(t+1) * sigma_{t+1}: N's coefficient in S (fixed noise)
    double scale        # vector: max ||x||^2; dense: max of an upper bound on ||X||_2
    double max_frob     # dense: max ||X||_F (vector instances use scale)
    double gain         # cumulative gain
    TopKState topk      # the top-k solver's counters and back-off


ctypedef struct PCAParams:
    int kind            # INSTANCE_*
    int noise           # NOISE_*
    int solver          # SOLVER_*
    int sigma_auto      # sigma from the bound and the data seen (else sigma_value)
    int k               # rank of the decisions
    int b               # block size of the top-k solver (k <= b <= n)
    int maxiter         # Krylov iterations before a solve goes to LAPACK
    int eig_first       # the eigen-solver chain's first routine (0: dsyevr; tests force others)
    double sigma_value
    double tol          # gap tolerance, as a fraction of the bound's increment


cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Tests: raise the real signal `signum` at the trial loop's poll number
    `polls` (one poll before each trial of a call, counted across calls);
    polls < 0 disarms."""
    arm_hook(&_hook, polls, signum)


cdef PCAState _state_proto
cdef PCAParams _params_proto
STATE_DTYPE = np.asarray(<PCAState[:1]> &_state_proto).dtype
PARAMS_DTYPE = np.asarray(<PCAParams[:1]> &_params_proto).dtype


cdef struct RowUpdate:
    Py_ssize_t n
    double *S
    const double *x     # NULL: no x x^T
    const double *N     # NULL: no noise term
    double a
    double *C           # dense instances: C += N too (NULL: not)


cdef struct Ctx:
    int n, k, b, kind, noise, solver, sigma_auto, nrows
    double sigma_value, tol
    double *S
    const double *N
    double *C           # X_<=t (lower triangle); NULL for Follow the Leader, whose S is it
    double *rows        # vector instances not yet in C (nrows of room)
    double *V
    PCAState *st
    bitgen_t *rng
    double *row         # n scratch
    double *xrow        # n: a float32 row, widened (the hint of the trial's solve)
    const double *xs    # a row whose x x^T waits for the noise update (fixed or no noise)
    int threads         # OpenMP threads of the O(n^2) loops (par_threads decides per n)
    TopKWork w


# --- the regret bound's terms, without overflow --------------------------------

cdef inline double bound_a(Ctx *c, int *E) noexcept nogil:
    # The data term a of the bound R <= sqrt(T) (a / sigma + bb sigma),
    # as A 2^E with E even (a itself over- or underflows at extreme scales):
    # vector, a = L^2 sqrt(2/pi), L = max ||x||^2 (r = L, M = L^2);
    # dense, a = k Lambda F sqrt(2/pi), Lambda = max bound on ||X||_2,
    # F = max ||X||_F (r = k Lambda, M = F^2). Mantissas times powers of two:
    # every operation is the one on a itself, scaled exactly, so in float64's
    # range the result is bit for bit a's.
    cdef int el, ef
    cdef double ml = frexp(c.st.scale, &el), mf, A
    if c.kind == INSTANCE_VECTOR:
        E[0] = 2 * el
        return ml * ml * SQRT_2_OVER_PI
    mf = frexp(c.st.max_frob, &ef)
    A = c.k * ml * mf * SQRT_2_OVER_PI
    E[0] = el + ef
    if E[0] % 2 != 0:
        A *= 2.0
        E[0] -= 1
    return A


cdef inline double bound_bb(Ctx *c) noexcept nogil:
    # The noise term's coefficient: E lambda_{1:k}(N) <= k E lambda_1(N) <=
    # sqrt(2) k sqrt(n) for the unit GOE N = (G + G^T)/2, G_ij ~ N(0, 1). The
    # paper's k sqrt(n) is below the semicircle edge sqrt(2) sqrt(n); sqrt(2)
    # holds at every n by Sudakov-Fernique (Vershynin, High-Dimensional
    # Probability, 2018, Sec. 7.2-7.3): for A = sqrt(2) N, X_u = u'Au against
    # Y_u = 2 g'u on the unit sphere gives E lambda_1(A) <= 2 E||g|| <= 2 sqrt(n).
    return SQRT_2 * c.k * sqrt(<double> c.n)


cdef inline double next_sigma(Ctx *c) noexcept nogil:
    # "auto": sqrt(a / bb), the minimiser of a / sigma + bb sigma
    cdef int E
    cdef double A
    if c.noise == NOISE_NONE:
        return 0.0
    if not c.sigma_auto:
        return c.sigma_value
    A = bound_a(c, &E)
    return ldexp(sqrt(A / bound_bb(c)), E // 2)


cdef inline double tolerance(Ctx *c, double t_next) noexcept nogil:
    # tol times the bound's per-trial increment cc / (2 sqrt(t)), where
    # R_T <= cc sqrt(T); Follow the Leader (and a sigma so far from "auto"
    # that cc overflows) uses the "auto" sigma's cc = 2 sqrt(a bb), the
    # smallest the bound gets
    cdef int E
    cdef double A = bound_a(c, &E), bb = bound_bb(c), sig = c.st.sigma, cc
    if A <= 0.0:
        return 0.0
    cc = ldexp(2.0 * sqrt(A * bb), E // 2)
    if sig > 0.0:
        # a / sig + bb sig, with a / sig = (A / (sig 2^-E/2)) 2^(E/2)
        sig = ldexp(A / ldexp(sig, -(E // 2)), E // 2) + bb * sig
        if isfinite(sig):
            cc = sig
    return c.tol * cc / (2.0 * sqrt(t_next))


# --- the data's cumulative matrix ------------------------------------------------

# S's row updates, in row panels of about equal area on up to c.threads
# OpenMP threads: S[i, :i+1] += x_i x[:i+1], then += a N[i, :i+1]. Each entry
# is computed alike whichever panel (and thread) holds it, so the panels
# change nothing in the results.
cdef enum:
    ROW_PANELS = 16


cdef inline Py_ssize_t panel_row(Py_ssize_t n, int p) noexcept nogil:
    # the first row of panel p: rows up to it hold about p / ROW_PANELS of
    # the triangle
    return <Py_ssize_t> (n * sqrt(<double> p / ROW_PANELS) + 0.5)


cdef inline void row_update_panel(const RowUpdate *u, int p) noexcept nogil:
    cdef Py_ssize_t n = u.n, i
    for i in range(panel_row(n, p), panel_row(n, p + 1)):
        sf_row_update(i + 1, u.S + i * n, u.x[i] if u.x != NULL else 0.0, u.x, u.a,
                      u.N + i * n if u.N != NULL else NULL)
        if u.C != NULL:
            sf_row_update(i + 1, u.C + i * n, 0.0, NULL, u.a, u.N + i * n)


cdef void update_rows(Ctx *c, const double *x, const double *N, double a,
                      double *C) noexcept nogil:
    # S += x x^T (x not NULL), then += a N (N not NULL); C += a N too (C not NULL)
    cdef RowUpdate u
    cdef int p, threads = par_threads(c.threads, c.n)
    u.n = c.n
    u.S = c.S
    u.x = x
    u.N = N
    u.a = a
    u.C = C
    if threads == 1:
        for p in range(ROW_PANELS):
            row_update_panel(&u, p)
    else:
        for p in prange(ROW_PANELS, schedule="dynamic", chunksize=1, num_threads=threads):
            row_update_panel(&u, p)


cdef inline void add_vector(Ctx *c, const double *x) noexcept nogil:
    # S += x x^T; C follows (independent noise rebuilds S from C every trial,
    # so there C is kept current; elsewhere x waits in the row buffer). With
    # fixed noise the noise update comes next and takes x x^T in the same
    # pass over S; so does Follow the Leader's (no noise: x x^T alone).
    if c.noise == NOISE_FIXED or c.noise == NOISE_NONE:
        c.xs = x
    else:
        update_rows(c, x, NULL, 0.0, NULL)
    if c.C == NULL:
        return
    if c.noise == NOISE_INDEPENDENT:
        rank_one_rows(c.n, 1.0, x, c.C)
        return
    memcpy(c.rows + c.st.pending * c.n, x, c.n * sizeof(double))
    c.st.pending += 1
    if c.st.pending == c.nrows:
        leader_flush(c.threads, c.n, &c.st.pending, c.rows, c.C)


cdef inline void add_dense(Ctx *c, const double *x) noexcept nogil:
    # S += X and C += X on the lower triangle, row by row in one pass over X
    # (in row panels; 1.0 * X adds X exactly, as daxpy did)
    update_rows(c, NULL, x, 1.0, c.C)


cdef inline double dense_gain(Ctx *c, const double *x) noexcept nogil:
    # tr(V_k^T X V_k): X V_k by the panelled product, then the k dot products
    symm_product(c.threads, c.n, c.k, 1.0, x, c.V, c.w.tmp)
    return rows_dot_plain(c.n, c.k, c.w.tmp, c.V)


# --- the noise ----------------------------------------------------------------------

cdef inline double walk_step(double s_new, double s) noexcept nogil:
    # sqrt(s_new^2 - s^2) if s_new > s, -1 if s_new < s, 0 if equal: computed
    # as 2^e sqrt(u^2 - v^2) with u, v = s_new, s scaled by 2^-e, bit for bit
    # the plain formula wherever that neither under- nor overflows
    cdef int e
    cdef double u, v
    if s_new == s:
        return 0.0
    if s_new < s:
        return -1.0
    frexp(s_new, &e)
    u = ldexp(s_new, -e)
    v = ldexp(s, -e)
    return ldexp(sqrt(u * u - v * v), e)


cdef void noise_update(Ctx *c, double s_new) noexcept nogil:
    # move S from N-coefficient st.s to s_new (fixed), or add the matching fresh
    # GOE increment (random walk), or redraw it (independent); C is X_<=t there.
    # The fixed noise's update takes the trial's pending x x^T in the same
    # pass over S (Follow the Leader's: x x^T alone).
    cdef Py_ssize_t n = c.n, i, j
    cdef double a
    if c.noise == NOISE_FIXED or c.noise == NOISE_NONE:
        # (no noise: s_new = st.s = 0, so x x^T alone)
        if s_new != c.st.s or c.xs != NULL:
            update_rows(c, c.xs, c.N if s_new != c.st.s else NULL, s_new - c.st.s, NULL)
        c.xs = NULL
    elif c.noise == NOISE_RANDOM_WALK:
        # the increment's scale sqrt(s_new^2 - s^2), on both scaled by a power
        # of two (their squares under- or overflow at extreme data scales)
        a = walk_step(s_new, c.st.s)
        if a > 0.0:
            for i in range(n):
                goe_row(c.rng, i, 1.0, c.row)
                sf_axpy(i + 1, a, c.row, c.S + i * n)
        elif a < 0.0:
            # a smaller sigma set mid-stream: shrink the walk so far,
            # S = C + (s_new / s) (S - C); no increment can lower a variance
            leader_flush(c.threads, c.n, &c.st.pending, c.rows, c.C)
            a = s_new / c.st.s
            for i in range(n):
                for j in range(i + 1):
                    c.S[i * n + j] = c.C[i * n + j] + a * (c.S[i * n + j] - c.C[i * n + j])
    elif c.noise == NOISE_INDEPENDENT:
        for i in range(n):
            goe_row(c.rng, i, s_new, c.row)
            for j in range(i + 1):
                c.S[i * n + j] = c.C[i * n + j] + c.row[j]
    c.st.s = s_new


# --- the trial loop --------------------------------------------------------------

cdef int after_trial(Ctx *c, const double *hint) noexcept nogil:
    # the next decision: sigma_{t+1}, noise, and the top-k of S_{t+1}
    cdef double sig = next_sigma(c)
    cdef bint krylov = c.solver == SOLVER_KRYLOV
    c.st.t += 1
    c.st.sigma = sig
    noise_update(c, sqrt(<double> c.st.t + 1.0) * sig)
    return topk_solve(&c.w, c.S, c.V, &c.st.topk, tolerance(c, <double> c.st.t + 1.0),
                      hint, <unsigned long long> c.st.t, krylov)


cdef int trials(Ctx *c, const double *X, const float *X32, const double *scale,
                const double *frob, Py_ssize_t T, Py_ssize_t *done, Poll *pl) noexcept nogil:
    # Play T trials; stops early only before a trial, on a signal. Vector rows
    # come as float64 (X) or float32 (X32, X NULL): a float32 row is widened
    # into xrow when its trial starts -- exactly, so every decision is the one
    # for the same rows given as float64 -- and everything after is float64.
    cdef int n = c.n, k = c.k, code = OK
    cdef Py_ssize_t t, j, step = n * (n if c.kind == INSTANCE_DENSE else 1)
    # a trial's work in _work_poll.pxd's units (~1 ns): its O(n^2 b) passes
    # over S and a fixed ~20 us around them
    cdef double g, work = <double> n * n * (c.b / 8.0 + 1.0) + 2e4
    cdef const double *x
    cdef const double *hint
    # Threads per trial, chosen by measurement: a trial's ~10 parallel
    # regions each end waiting for every thread, and where another process
    # holds a core that wait is the OS's time slice (one core busy: 1.3-2.3x
    # the one-thread time at n = 1000). Each way's time per product of the
    # solve (plus the update's two passes) is kept as a running mean: one
    # trial each, then the faster way's second; a way 1.5x slower is not
    # tried again soon (with a core busy a team trial can cost 2-3x, and each
    # try is paid in full), a closer one gets its second trial too (under
    # load one trial's time is too noisy to choose by). Then the faster way
    # plays, the other one trial in 16 (in 64 if 1.5x slower) so that a
    # change in load is seen. Results do not depend on the choice (fixed
    # panels).
    cdef int full = c.threads, use = 1, best = 1, period
    cdef bint slow
    cdef bint adapt = full > 1 and n >= PAR_MIN_N and T >= 4
    cdef double cost[2]
    cdef long seen[2]
    cdef long p0 = 0
    cdef double t0 = 0.0, dt
    cost[0] = cost[1] = 0.0
    seen[0] = seen[1] = 0
    for t in range(T):
        if poll_stop(pl, work):
            code = ERR_INTERRUPTED
            break
        if adapt:
            if seen[0] == 0:
                use = 0
            elif seen[1] == 0:
                use = 1
            else:
                best = 0 if cost[0] < cost[1] else 1
                slow = cost[1 - best] >= 1.5 * cost[best]
                period = 64 if slow else 16
                if seen[best] < 2:
                    use = best
                elif seen[1 - best] < 2 and not slow:
                    use = 1 - best
                else:
                    use = 1 - best if t % period == period - 1 else best
            c.threads = full if use else 1
            c.w.threads = c.threads
            p0 = c.st.topk.products
            t0 = seconds()
        if X32 != NULL:
            for j in range(n):
                c.xrow[j] = X32[t * step + j]
            x = c.xrow
        else:
            x = X + t * step
        if c.kind == INSTANCE_DENSE:
            g = dense_gain(c, x)
            if frob[t] > c.st.max_frob:
                c.st.max_frob = frob[t]
            add_dense(c, x)
            hint = leader_dense_hint(n, x)
        else:
            g = leader_gain(n, k, c.V, x, c.row)
            add_vector(c, x)
            hint = x
        c.st.gain += g
        if scale[t] > c.st.scale:
            c.st.scale = scale[t]
        code = after_trial(c, hint)
        done[0] = t + 1
        if adapt:
            dt = (seconds() - t0) / <double> (c.st.topk.products - p0 + 2)
            # the mean of the first two, then a running mean weighting the
            # newest a quarter
            cost[use] = (dt if seen[use] == 0 else 0.5 * (cost[use] + dt) if seen[use] == 1
                         else 0.75 * cost[use] + 0.25 * dt)
            seen[use] += 1
        if code != OK:
            break
    c.threads = full
    c.w.threads = full
    return code


# --- entries -------------------------------------------------------------------------

cdef int setup(Ctx *c, PCAState *st, const PCAParams *p, double[:, ::1] S,
               const double[:, ::1] N, double[:, ::1] C, double[:, ::1] rows,
               double[:, ::1] V, object capsule) except? -1:
    # the context over the caller's arrays, after checking their shapes
    # against the parameters; workspaces allocated here, before any state
    # changes (ERR_NOMEM then, or never)
    cdef int n = S.shape[0]
    memset(c, 0, sizeof(Ctx))
    if S.shape[1] != n or n < 1:
        raise ValueError(f"S must be a non-empty square matrix, got {S.shape[0]}x{S.shape[1]}")
    if not (p.kind == INSTANCE_VECTOR or p.kind == INSTANCE_DENSE) or not (
            NOISE_NONE <= p.noise <= NOISE_INDEPENDENT) or not (
            p.solver == SOLVER_EXACT or p.solver == SOLVER_KRYLOV):
        raise ValueError("params: unknown instance kind, noise or solver code")
    if not (1 <= p.k <= p.b <= n) or not 0 <= p.maxiter <= TOPK_MAX_ITER \
            or not 0 <= p.eig_first <= 3:
        raise ValueError(f"params: need 1 <= k <= b <= n, 0 <= maxiter <= {TOPK_MAX_ITER} "
                         f"and 0 <= eig_first <= 3, got k = {p.k}, b = {p.b}, n = {n}, "
                         f"maxiter = {p.maxiter}, eig_first = {p.eig_first}")
    if not (p.sigma_auto == 0 or p.sigma_auto == 1):
        bad_field("params", "sigma_auto", p.sigma_auto, "0 or 1")
    if not is_real(p.sigma_value, 0):
        bad_field("params", "sigma_value", p.sigma_value, "a finite number >= 0")
    if not is_real(p.tol, 0):
        bad_field("params", "tol", p.tol, "a finite number >= 0")
    if st.t < 0:
        bad_field("state", "t", st.t, "a count >= 0")
    for field, value in (("sigma", st.sigma), ("s", st.s), ("scale", st.scale),
                         ("max_frob", st.max_frob)):
        if not is_real(value, 0):
            bad_field("state", field, value, "a finite number >= 0")
    if not isfinite(st.gain):
        bad_field("state", "gain", st.gain, "a finite number")
    check_topk_state(&st.topk, "state.topk")
    if V.shape[0] != p.b or V.shape[1] != n:
        raise ValueError(f"V must have shape ({p.b}, {n}), got ({V.shape[0]}, {V.shape[1]})")
    if p.noise == NOISE_FIXED and (N.shape[0] != n or N.shape[1] != n):
        raise ValueError(f"N must have shape ({n}, {n}) for fixed noise")
    if p.noise != NOISE_NONE and (C.shape[0] != n or C.shape[1] != n):
        raise ValueError(f"C must have shape ({n}, {n}) with noise")
    if p.noise == NOISE_NONE and C.shape[0] != 0:
        raise ValueError("C must be empty for Follow the Leader (S is the data's sum)")
    if rows.shape[1] != n or not (0 <= st.pending < max(rows.shape[0], 1)):
        raise ValueError(f"rows must have shape (B, {n}) with 0 <= pending < B, got "
                         f"({rows.shape[0]}, {rows.shape[1]}), pending = {st.pending}")
    if (p.kind == INSTANCE_VECTOR and (p.noise == NOISE_FIXED or p.noise == NOISE_RANDOM_WALK)
            and rows.shape[0] == 0):
        raise ValueError("rows must have room for at least one row with this noise")
    c.n = n
    c.k = p.k
    c.b = p.b
    c.kind = p.kind
    c.noise = p.noise
    c.solver = p.solver
    c.sigma_auto = p.sigma_auto
    c.sigma_value = p.sigma_value
    c.tol = p.tol
    c.nrows = rows.shape[0]
    c.st = st
    c.S = &S[0, 0]
    c.N = &N[0, 0] if N.shape[0] > 0 else NULL
    c.C = &C[0, 0] if C.shape[0] > 0 else NULL
    c.rows = &rows[0, 0] if rows.shape[0] > 0 else NULL
    c.V = &V[0, 0]
    c.rng = <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")
    if topk_work_init(&c.w, n, p.k, p.b, p.maxiter) != OK:
        return ERR_NOMEM
    c.xrow = <double *> malloc(<size_t> n * sizeof(double))
    if c.xrow == NULL:
        return ERR_NOMEM
    c.w.first = p.eig_first
    c.xs = NULL
    c.threads = 1
    # n doubles of scratch for the gains and the noise rows: the solver's
    # n x 3b scratch is free outside a solve
    c.row = c.w.tmp
    return OK


cdef void teardown(Ctx *c) noexcept nogil:
    topk_work_free(&c.w)
    free(c.xrow)
    c.xrow = NULL


def _check_records(state, params):
    check_struct(state, STATE_DTYPE, "state")
    check_struct(params, PARAMS_DTYPE, "params")


def initialize(PCAState[::1] state, const PCAParams[::1] params, double[:, ::1] S,
               const double[:, ::1] N, double[:, ::1] C, double[:, ::1] rows,
               double[:, ::1] V, object capsule):
    """The first decision, before any data: S_1 = s_1 G for a unit GOE draw G
    (s_1 = sigma for a given sigma; 0 for "auto", whose scale is unknown until
    data arrive) and V = top-b of G, a uniformly random subspace whatever the
    scale. Follow the Leader starts from S = 0 and the first b coordinate axes.
    For fixed noise G goes to N (which must then be writable). Every state
    array is overwritten. Returns (code, 0, None). The caller holds the bit
    generator's lock."""
    _check_records(state.base, params.base)
    cdef Ctx c
    cdef int n, b, j, code
    cdef Py_ssize_t i
    cdef double s1
    code = setup(&c, &state[0], &params[0], S, N, C, rows, V, capsule)
    try:
        if code != OK:
            return code, 0, None
        n = c.n
        b = c.b
        with nogil:
            memset(c.st, 0, sizeof(PCAState))
            memset(c.S, 0, <size_t> n * n * sizeof(double))
            memset(c.V, 0, <size_t> n * b * sizeof(double))
            if c.C != NULL:
                memset(c.C, 0, <size_t> n * n * sizeof(double))
            if c.noise == NOISE_NONE:
                for j in range(b):
                    c.V[j * n + j] = 1.0
            else:
                s1 = 0.0 if c.sigma_auto else c.sigma_value
                c.st.sigma = s1
                # G goes to S first (solved there), then S becomes s1 G
                for i in range(n):
                    goe_row(c.rng, i, 1.0, c.S + i * n)
                topk_exact(&c.w, c.S, c.V, &c.st.topk)
                if c.st.topk.kept:
                    code = ERR_LAPACK
                if c.noise == NOISE_FIXED:
                    memcpy(<double *> c.N, c.S, <size_t> n * n * sizeof(double))
                for i in range(<Py_ssize_t> n * n):
                    c.S[i] *= s1
                c.st.s = s1
                memset(&c.st.topk, 0, sizeof(TopKState))
        return code, 0, None
    finally:
        teardown(&c)


def run(X, const double[::1] scale, const double[::1] frob,
        PCAState[::1] state, const PCAParams[::1] params, double[:, ::1] S,
        const double[:, ::1] N, double[:, ::1] C, double[:, ::1] rows, double[:, ::1] V,
        object capsule, int threads=1):
    """Play len(X) trials, updating every state array in place. Vector
    instances: rows x_t of X, scale[t] = ||x_t||^2; gain ||V_k x_t||^2,
    S += x_t x_t^T (one triangle). Dense instances: rows of X are the
    n*n entries of symmetric PSD X_t, scale[t] an upper bound on ||X_t||_2,
    frob[t] = ||X_t||_F; gain tr(V_k^T X_t V_k), S += X_t on one triangle.
    Then noise and the next top-k. X is C-contiguous float64, or float32 for
    vector instances: read as float32 (no float64 copy of the block), each
    row widened exactly when its trial starts, all arithmetic in float64.

    Returns (code, done, exc): OK after all trials, or ERR_INTERRUPTED after
    `done` whole trials with `exc` the exception a signal handler raised, or
    ERR_NOMEM before any; the state describes exactly `done` trials. The
    caller holds the bit generator's lock. ``threads``: OpenMP threads for
    the S products and row updates at n >= PAR_MIN_N (results do not depend
    on it)."""
    _check_records(state.base, params.base)
    cdef Ctx c
    cdef int code, n
    cdef const double[:, ::1] X64
    cdef const float[:, ::1] X32
    cdef const double *p64 = NULL
    cdef const float *p32 = NULL
    cdef Py_ssize_t T, ncol, done = 0
    cdef Poll pl
    cdef bint is32 = getattr(X, "dtype", None) == np.float32
    if is32:
        X32 = X
        T, ncol = X32.shape[0], X32.shape[1]
    else:
        X64 = X
        T, ncol = X64.shape[0], X64.shape[1]
    code = setup(&c, &state[0], &params[0], S, N, C, rows, V, capsule)
    try:
        if code != OK:
            return code, 0, None
        n = c.n
        if ncol != (n * n if c.kind == INSTANCE_DENSE else n):
            raise ValueError(f"X has {ncol} columns, expected "
                             f"{n * n if c.kind == INSTANCE_DENSE else n}")
        if is32 and c.kind == INSTANCE_DENSE:
            raise ValueError("X: dense instances must be float64")
        if scale.shape[0] != T or (c.kind == INSTANCE_DENSE and frob.shape[0] != T):
            raise ValueError(f"scale (and frob for dense instances) must have {T} entries")
        if T == 0:
            return OK, 0, None
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        c.threads = threads
        c.w.threads = threads
        poll_init(&pl, &_hook)
        if is32:
            p32 = &X32[0, 0]
        else:
            p64 = &X64[0, 0]
        with nogil:
            code = trials(&c, p64, p32, &scale[0], &frob[0] if frob.shape[0] else NULL,
                          T, &done, &pl)
        return code, done, (pending_exception() if code == ERR_INTERRUPTED else None)
    finally:
        teardown(&c)
