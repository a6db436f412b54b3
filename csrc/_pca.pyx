# Online PCA by Follow the (Perturbed) Leader: one state object, LeaderState,
# owns everything a run keeps -- the perturbed matrix S, the noise N, the
# data's sum C and its row buffer, the block V of top-k estimates, the
# counters, its own bit generator -- and the solver's work space, allocated
# once. Its calls run the whole trial loop (play, gain, rank-one or dense
# update, noise update, warm-started top-k) without the GIL.
#
# Paper: Kotlowski & Warmuth, "PCA with Gaussian perturbations".
#
# Layout. Symmetric n x n matrices (S, N, C, a dense instance) are C-order
# arrays whose row-major lower triangle is the valid one: row i holds columns
# 0..i contiguously, which BLAS sees as the column-major upper triangle ('U').
# Blocks of vectors are C-order (b, n) arrays: each row a vector, which BLAS
# sees as a column-major n x b matrix with leading dimension n.
#
# Updates in place. A trial's O(n^2) update of S is most of its memory
# traffic; a second S to commit by swapping would cost a copy of S per call
# (a trial's worth at n = 1000 for a one-row call) and a third more memory.
# Nothing in a trial can fail once the work space exists (a solve whose every
# eigen-solver fails keeps the previous block and counts it), so the only
# ways to stop mid-call are a signal, taken before a trial (the state then
# holds the whole trials played), and a fork by another thread: the child's
# copy is then marked torn and refuses every call (CallLock.forked_mid_call).
from libc.math cimport sqrt, frexp, ldexp, isfinite
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.buffer cimport (PyObject_CheckBuffer, PyObject_GetBuffer, PyBuffer_Release,
                             PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_WRITABLE)
from cpython.float cimport PyFloat_AsDouble
from cpython.sequence cimport PySequence_Fast, PySequence_Fast_GET_SIZE, PySequence_Fast_GET_ITEM
from cython.parallel cimport prange

import numbers

import numpy as np

from _common cimport bitgen_t, OK, ERR_INTERRUPTED, pending_exception
from _goe cimport goe_row
from _dense cimport sf_row_update, sf_axpy, sf_dot
from _symm_par cimport symm_product, par_threads, PAR_MIN_N
from _blas cimport syrk_upper
from _eigen cimport EigWork, eig_work_init, eig_work_free, eig_top, _evd_alloc, EIG_EVR, EIG_EVD
from _owner cimport CallLock, lock_init, lock_free, lock_enter, lock_leave, sf_owner_init
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_quiet, poll_stop
from _topk cimport (TopKState, TopKWork, TOPK_MAX_ITER, topk_work_init, topk_work_free,
                    topk_solve, leader_flush, leader_gain,
                    leader_dense_hint, rank_one_rows, rows_dot_plain)
from _pca_sizes cimport (sumsq, vector_block_check, dense_block_check, dense_sizes, SIZE_OK,
                         SIZE_NAN, SIZE_INF, SIZE_ASYM)
from _evr_polled cimport topk_exact_polled
from _pca_state cimport array_ptr, enter_whole, topk_stats, topk_fields, read_topk

from streamfit._kernels._pca_api import (StateReader, own_bit_generator, bit_generator_text,
                                         check_orthonormal, refuse_version, SEED_KINDS)

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


sf_owner_init()

cpdef enum:
    INSTANCE_VECTOR = 0
    INSTANCE_DENSE = 1

cpdef enum:
    NOISE_NONE = 0          # Follow the Leader
    NOISE_FIXED = 1         # one N per run, S_t = X_<t + sqrt(t) sigma N
    NOISE_RANDOM_WALK = 2   # N_t = N_{t-1} + a fresh GOE increment
    NOISE_INDEPENDENT = 3   # a fresh sqrt(t) sigma N every trial

cpdef enum:
    SOLVER_EXACT = 0        # the eigen-solver chain every trial (dsyevd first at
                            # n <= 6b, else dsyevr: _topk.pxd's exact_first)
    SOLVER_KRYLOV = 1       # warm-started block Krylov, the chain as fallback

# settings kept by identity (configure's fast path): immutable types only
_PLAIN = (type(None), bool, int, float, str)
NOISES = ("none", "fixed", "random_walk", "independent")
INSTANCES = ("vector", "dense")
SOLVERS = ("auto", "krylov", "exact")
# Vector instances wait in a buffer of this many rows before one product adds
# them to the data's sum C (a rank-one pass over C per trial would double the
# memory traffic of a trial's own update of S).
ROW_BUFFER = 64
# The state format __reduce__ and to_state write (and the only one read).
FORMAT_VERSION = 1

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


cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Tests: raise the real signal `signum` at the trial loop's poll number
    `polls` (one poll before each trial of a call, and between the stages of
    a first decision's exact solve, counted across calls); polls < 0
    disarms."""
    arm_hook(&_hook, polls, signum)


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
    TopKWork *w


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
    return topk_solve(c.w, c.S, c.V, &c.st.topk, tolerance(c, <double> c.st.t + 1.0),
                      hint, <unsigned long long> c.st.t, krylov)


cdef int trials(Ctx *c, const double *X, const float *X32, Py_ssize_t T,
                Py_ssize_t *done, Poll *pl) noexcept nogil:
    # Play T trials; stops early only before a trial, on a signal. Vector
    # rows come as float64 (X) or float32 (X32, X NULL): a float32 row is
    # widened into xrow when its trial starts -- exactly, so every decision is
    # the one for the same rows given as float64 -- and everything after is
    # float64. Each instance's sizes (||x||^2; a dense one's bound on its
    # norm and its Frobenius norm) are computed as its trial starts, as the
    # caller's check computed them (_pca_sizes.pxd).
    cdef int n = c.n, k = c.k, code = OK
    cdef Py_ssize_t t, j, step = n * (n if c.kind == INSTANCE_DENSE else 1)
    # a trial's work in _work_poll.pxd's units (~1 ns): its O(n^2 b) passes
    # over S and a fixed ~20 us around them
    cdef double g, scale, frob, work = <double> n * n * (c.b / 8.0 + 1.0) + 2e4
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
            dense_sizes(n, x, &scale, &frob)
            g = dense_gain(c, x)
            if frob > c.st.max_frob:
                c.st.max_frob = frob
            add_dense(c, x)
            hint = leader_dense_hint(n, x)
        else:
            scale = sumsq(n, x)
            g = leader_gain(n, k, c.V, x, c.row)
            add_vector(c, x)
            hint = x
        c.st.gain += g
        if scale > c.st.scale:
            c.st.scale = scale
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


# --- the state object ------------------------------------------------------------------

cdef object _fresh(shape):
    return np.zeros(shape)


cdef class LeaderState:
    """The state of Follow the (Perturbed) Leader, and its trial loop.

    One object owns a run: the perturbed matrix S = X_<t + sqrt(t) sigma N
    whose top-k is played next, the noise N (fixed noise), the data's sum C
    (with the last rows waiting in a buffer), the block of b >= k
    eigenvector estimates, the counters, its own bit generator (seeded from
    ``random_state``, whose generator, if one is given, is copied, never
    drawn from) and the solver's work space. :class:`streamfit.PerturbedLeaderPCA`
    and :class:`streamfit.FollowTheLeaderPCA` are this object and scikit-learn's
    conventions around it; a library's own loop over :meth:`learn_one` costs
    what the estimator's does.

    Parameters
    ----------
    n : int >= 1
        The instances' dimension.
    k : int in [1, n]
        The rank of the projections played.
    instances : {"vector", "dense"}, default "vector"
        Rows x (instances x x^T, :meth:`learn`, :meth:`learn_one`) or dense
        PSD matrices (:meth:`learn_dense`); one object takes one kind.
    noise : {"fixed", "random_walk", "independent", "none"}, default "fixed"
        "none" is Follow the Leader (no randomness at all).
    sigma, solver, tol, n_jobs :
        As :class:`streamfit.PerturbedLeaderPCA`'s; :meth:`configure` changes
        them between calls.
    random_state : None, int, SeedSequence or numpy Generator
        Seeds the object's own bit generator.
    feature_names : sequence of str or None
        Kept with the state (scikit-learn's ``feature_names_in_``).
    block, max_iter : int, optional
        The solver's block b (default :func:`streamfit.kernels.default_block_size`)
        and Krylov iterations per solve (default
        :func:`streamfit.kernels.default_max_iter`).

    Notes
    -----
    The first decision (S_1 = s_1 G for a unit GOE draw G, and V = top-b of
    G, a uniformly random subspace) is made by the first call that needs it
    (any learn, or reading the components): an exact solve, interruptible
    (Ctrl-C) between its stages, after which the object is as before. A
    block call (:meth:`learn`, :meth:`learn_dense`) checks all its input,
    then plays its trials without the GIL; a signal handler that raises stops
    it before a trial, the state holding the trials played (the exception's
    note says how many). One call at a time: another thread's call waits for
    it, the same thread's (a signal handler's) is refused with a
    RuntimeError.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import LeaderState
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(500, 20, n_spikes=2, random_state=0)
    >>> state = LeaderState(20, 2, random_state=0)
    >>> for x in X:
    ...     state.learn_one(x)
    >>> state.n_trials_, state.components_.shape
    (500, (2, 20))
    >>> again = LeaderState(20, 2, random_state=0)
    >>> again.learn(X)                 # a block: the same state, bit for bit
    >>> bool(np.array_equal(again.components_, state.components_))
    True
    """
    cdef CallLock _lock
    # settings fixed for the run
    cdef readonly int n, k, b
    cdef int kind, noise, maxiter, eig_first, nrows
    # settings that may change between calls (configure)
    cdef int sigma_auto, solver, threads
    cdef double sigma_value, tol
    cdef object _sigma, _solver_name, _n_jobs, _tol
    cdef bint _plain_settings   # the four above are None, bool, int, float or str
    # the state
    cdef bint started
    cdef bint _interrupted      # the last call stopped on a signal, trials kept
    cdef PCAState st
    cdef object _S, _N, _C, _rows, _V
    # their data, taken once in _adopt (the arrays are never replaced
    # elsewhere): _ctx runs on every call, and reading five buffers there cost
    # ~2 us of a 10 x 10 trial
    cdef double *pS
    cdef double *pN
    cdef double *pC
    cdef double *prows
    cdef double *pV
    cdef object _bitgen
    cdef bitgen_t *rng
    cdef object _seed, _feature_names      # _seed: a _Seed
    # work space, allocated once
    cdef TopKWork w
    cdef double *xrow
    cdef bint has_work
    # best_gain's cache: (t, value)
    cdef long long best_t
    cdef double best

    def __cinit__(self, *args, **kwargs):
        lock_init(&self._lock)
        self.xrow = NULL
        self.has_work = False
        self.rng = NULL
        self.best_t = -1
        memset(&self.st, 0, sizeof(PCAState))
        memset(&self.w, 0, sizeof(TopKWork))

    def __dealloc__(self):
        if self.has_work:
            topk_work_free(&self.w)
        free(self.xrow)
        lock_free(&self._lock)

    def __init__(self, n, k, *, instances="vector", noise="fixed", sigma="auto",
                 solver="auto", tol=0.01, n_jobs=None, random_state=None,
                 feature_names=None, block=None, max_iter=None, eig_first=0):
        from streamfit.kernels.pca import default_block_size, default_max_iter
        n = _integer(n, "n", 1, 1 << 24)
        k = _integer(k, "n_components", 1, n, f"n_components must be in [1, n_features] = "
                                               f"[1, {n}] (n_features = {n}), got {k!r}")
        if instances not in INSTANCES:
            raise ValueError(f"instances must be one of {INSTANCES}, got {instances!r}")
        if noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES[1:]}, got {noise!r}")
        b = default_block_size(n, k) if block is None else _integer(block, "block", k, n)
        maxiter = (default_max_iter(n, b) if max_iter is None
                   else _integer(max_iter, "max_iter", 0, TOPK_MAX_ITER))
        self.n, self.k, self.b, self.maxiter = n, k, b, maxiter
        self.kind = INSTANCES.index(instances)
        self.noise = NOISES.index(noise)
        self.eig_first = _integer(eig_first, "eig_first", 0, 3)
        self._configure(sigma, solver, tol, n_jobs)
        if self.noise == NOISE_NONE:
            self._bitgen, self._seed = None, _Seed("none", None)
        else:
            self._bitgen, self._seed = _Seed.own(random_state)
        self._feature_names = _names(feature_names, n)
        buffered = self.kind == INSTANCE_VECTOR and self.noise in (NOISE_FIXED,
                                                                   NOISE_RANDOM_WALK)
        self._adopt(_fresh((n, n)), _fresh((n, n) if self.noise == NOISE_FIXED else (0, 0)),
                    _fresh((n, n) if self.noise != NOISE_NONE else (0, 0)),
                    _fresh((ROW_BUFFER if buffered else 0, n)), _fresh((b, n)))
        self._allocate()

    # -- construction's pieces ---------------------------------------------------------
    cdef _adopt(self, S, N, C, rows, V):
        self._S, self._N, self._C, self._rows, self._V = S, N, C, rows, V
        self.pS, self.pN, self.pC = array_ptr(S), array_ptr(N), array_ptr(C)
        self.prows, self.pV = array_ptr(rows), array_ptr(V)
        self.nrows = rows.shape[0]
        if self._bitgen is not None:
            self.rng = <bitgen_t *> PyCapsule_GetPointer(self._bitgen.capsule, "BitGenerator")

    cdef _allocate(self):
        if topk_work_init(&self.w, self.n, self.k, self.b, self.maxiter) != OK:
            topk_work_free(&self.w)
            raise MemoryError(f"LeaderState: no memory for the solver's work space "
                              f"(n = {self.n})")
        self.has_work = True
        # eig_first 0: topk_work_init's choice, the faster first routine for
        # this order (_topk.pxd's exact_first: dsyevd's whole spectrum at
        # small n, dsyevr's top b above -- streamfit.kernels.TopK's too, so a
        # library's loop over it plays the same decisions); 1-3 (tests) force
        # dsyevd, dsyev or Jacobi. dsyevd's work space is allocated here when
        # it runs every solve, not in a trial.
        if self.eig_first:
            self.w.first = self.eig_first
        if self.w.first == EIG_EVD and _evd_alloc(&self.w.eig) != OK:
            raise MemoryError(f"LeaderState: no memory for the solver's work space "
                              f"(n = {self.n})")
        self.xrow = <double *> malloc(<size_t> self.n * sizeof(double))
        if self.xrow == NULL:
            raise MemoryError("LeaderState: no memory for a row")

    cdef _configure(self, sigma, solver, tol, n_jobs):
        # every check first, then the settings (a refused call changes none)
        cdef int auto
        cdef double value
        if isinstance(sigma, str):
            if sigma != "auto":
                raise ValueError(f"sigma must be 'auto' or a positive float, got {sigma!r}")
            auto, value = 1, 0.0
        else:
            value = _positive(sigma, "sigma")
            auto = 0
        if not isinstance(solver, str) or solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        if solver == "krylov" and 2 * self.b > self.n:
            raise ValueError(f"solver='krylov' needs n_features >= 2 * (n_components + "
                             f"{self.b - self.k}) = {2 * self.b}, got {self.n}; use "
                             f"solver='auto' or 'exact'")
        tol_value = _positive(tol, "tol")
        threads = _threads(n_jobs, self.n)
        # "auto": Krylov when the block is small against n -- except with
        # independent noise, whose top-k jumps every trial, so that a warm
        # start costs more than it saves (measured at n = 500 and 1000)
        self.solver = SOLVER_KRYLOV if solver == "krylov" or (
            solver == "auto" and 4 * self.b <= self.n
            and self.noise != NOISE_INDEPENDENT) else SOLVER_EXACT
        self.sigma_auto, self.sigma_value = auto, value
        self.tol = tol_value
        self.threads = threads
        self._sigma, self._solver_name, self._n_jobs = sigma, solver, n_jobs
        self._tol = tol
        self._plain_settings = all(type(v) in _PLAIN for v in (sigma, solver, tol, n_jobs))

    def configure(self, *, sigma="auto", solver="auto", tol=0.01, n_jobs=None):
        """Set the settings that may change mid-stream, from the next trial
        on (each as :class:`streamfit.PerturbedLeaderPCA`'s parameter of that
        name; Follow the Leader ignores sigma). A refused value (a ValueError
        or TypeError naming it) changes nothing."""
        lock_enter(&self._lock, "LeaderState")
        try:
            # The estimators call this before every learn_one, nearly always
            # with the very objects of the last call: then nothing can have
            # changed (immutable values, and below PAR_MIN_N the thread count
            # is 1 whatever the OpenMP runtime says), and the checks -- 1.6 us
            # of an 8 us trial at n = 10 -- are skipped.
            if (self._plain_settings and self.n < PAR_MIN_N and sigma is self._sigma
                    and solver is self._solver_name and tol is self._tol
                    and n_jobs is self._n_jobs):
                return
            self._configure(sigma, solver, tol, n_jobs)
        finally:
            lock_leave(&self._lock)

    cdef int _enter(self) except -1:
        return enter_whole(&self._lock, "LeaderState")

    cdef Ctx _ctx(self):
        cdef Ctx c
        memset(&c, 0, sizeof(Ctx))
        c.n, c.k, c.b = self.n, self.k, self.b
        c.kind, c.noise, c.solver = self.kind, self.noise, self.solver
        c.sigma_auto, c.sigma_value, c.tol = self.sigma_auto, self.sigma_value, self.tol
        c.nrows = self.nrows
        c.S, c.N, c.C, c.rows, c.V = self.pS, self.pN, self.pC, self.prows, self.pV
        c.st = &self.st
        c.rng = self.rng
        c.w = &self.w
        c.row = self.w.tmp          # the solver's n x 3b scratch is free outside a solve
        c.xrow = self.xrow
        c.threads = self.threads
        self.w.threads = self.threads
        return c

    cdef int _start(self) except -1:
        # The first decision, before any data: S_1 = s_1 G for a unit GOE
        # draw G (s_1 = sigma for a given sigma; 0 for "auto", whose scale is
        # unknown until data arrive) and V = top-b of G, a uniformly random
        # subspace whatever the scale. Follow the Leader starts from S = 0 and
        # the first b coordinate axes. Interrupted (its exact solve polls
        # between stages), it leaves the object as it was: not started, its
        # bit generator put back.
        cdef Ctx c
        cdef Py_ssize_t i, n = self.n, j
        cdef int code = OK
        cdef double s1
        cdef Poll pl
        if self.started:
            return 0
        c = self._ctx()
        if self.noise == NOISE_NONE:
            for j in range(self.b):
                c.V[j * n + j] = 1.0
            self.started = True
            return 0
        saved = self._bitgen.state
        s1 = 0.0 if self.sigma_auto else self.sigma_value
        poll_init(&pl, &_hook)
        with nogil:
            # G goes to S first (solved there), then S becomes s1 G
            for i in range(n):
                goe_row(c.rng, i, 1.0, c.S + i * n)
            code = topk_exact_polled(c.w, c.S, c.V, &self.st.topk, &pl)
        if code == ERR_INTERRUPTED:
            exc = pending_exception()
            self._bitgen.state = saved
            self._S[...] = 0.0
            self._V[...] = 0.0
            memset(&self.st, 0, sizeof(PCAState))
            if hasattr(exc, "add_note"):
                exc.add_note("LeaderState was interrupted in its first decision's exact "
                             "solve; it is as before the call (no decision made)")
            raise exc
        if self.st.topk.kept:
            self._bitgen.state = saved
            self._S[...] = 0.0
            memset(&self.st, 0, sizeof(PCAState))
            raise np.linalg.LinAlgError("LeaderState: every LAPACK routine of the "
                                        "eigen-solver chain failed on the first decision")
        with nogil:
            if self.noise == NOISE_FIXED:
                memcpy(<double *> c.N, c.S, <size_t> n * n * sizeof(double))
            for i in range(n * n):
                c.S[i] *= s1
        memset(&self.st, 0, sizeof(PCAState))
        self.st.sigma = s1
        self.st.s = s1
        self.started = True
        return 0

    # -- the calls -----------------------------------------------------------------------
    def learn(self, X):
        """Play one trial per row of X (vector instances x_t x_t^T): gain
        ||V_k x_t||^2 with the block played, then the update and the next
        decision.

        Parameters
        ----------
        X : ndarray of shape (T, n), C-contiguous float64 or float32
            float32 rows are read as they are and widened exactly as their
            trial starts (the decisions of the same rows as float64).

        Raises
        ------
        ValueError, TypeError
            For input the object cannot take (shape, dtype, NaN or inf,
            sizes beyond float64), before anything changed.
        """
        cdef const double[:, ::1] X64
        cdef const float[:, ::1] X32
        cdef bint is32
        self._enter()
        try:
            if self.kind != INSTANCE_VECTOR:
                _wrong_kind(self.kind, INSTANCE_VECTOR, "X", _owner(self))
            is32 = isinstance(X, np.ndarray) and X.dtype == np.float32
            if is32:
                X32 = _rows2d(X, self.n, "X")
                return self._vectors(NULL, &X32[0, 0] if X32.shape[0] else NULL,
                                     X32.shape[0], "X", True)
            X64 = _rows2d(X, self.n, "X")
            return self._vectors(&X64[0, 0] if X64.shape[0] else NULL, NULL, X64.shape[0],
                                 "X", True)
        finally:
            lock_leave(&self._lock)

    def learn_one(self, x):
        """Play one trial with the row x: a 1-D float64 array (the fast path)
        or a sequence of n real numbers. The same trial as :meth:`learn` on
        ``x[None]``, bit for bit; it runs to its end (no signal handler runs
        inside it)."""
        cdef const double[::1] x64
        cdef Py_buffer xb
        cdef bint held = False
        cdef const double *xp
        self._enter()
        try:
            if self.kind != INSTANCE_VECTOR:
                _wrong_kind(self.kind, INSTANCE_VECTOR, "x", _owner(self))
            # a float64 row read through the buffer protocol, as transform_one
            # does (a memoryview and the array's attributes cost ~0.6 us of a
            # ~8 us trial at n = 10); anything else converted by _vector_row
            held = _float64_row(x, &xb)
            if held:
                if xb.shape[0] != self.n:
                    raise ValueError(f"x has {xb.shape[0]} features, but {_owner(self)} is "
                                     f"expecting {self.n} features as input")
                xp = <const double *> xb.buf
            else:
                x64 = _vector_row(x, self.n, _owner(self))
                xp = &x64[0]
            self._vectors(xp, NULL, 1, "x", False)
        finally:
            if held:
                PyBuffer_Release(&xb)
            lock_leave(&self._lock)

    def learn_dense(self, Xs):
        """Play one trial per matrix of Xs (dense symmetric PSD instances
        X_t): gain tr(V_k^T X_t V_k), then the update and the next decision.

        Parameters
        ----------
        Xs : ndarray of shape (T, n, n), C-contiguous float64
            Symmetric (checked, to 1e-10 of the largest entry) and finite;
            positive semidefinite is the caller's to check (the estimators
            do, with ``check_psd``).
        """
        cdef const double[:, :, ::1] A
        self._enter()
        try:
            if self.kind != INSTANCE_DENSE:
                _wrong_kind(self.kind, INSTANCE_DENSE, "Xs", _owner(self))
            A = _dense_block(Xs, self.n, _owner(self))
            return self._dense(&A[0, 0, 0] if A.shape[0] else NULL, A.shape[0])
        finally:
            lock_leave(&self._lock)

    cdef _vectors(self, const double *X, const float *X32, Py_ssize_t T, str name,
                  bint block):
        # (the lock held) check every row, then play them
        cdef int res
        cdef Py_ssize_t at = 0
        cdef double top = 0.0
        with nogil:
            res = vector_block_check(self.n, X, X32, T, &top, &at)
        if res != SIZE_OK:
            _size_error(res, name, at, T)
        self._check_range(name, top, T)
        return self._play(X, X32, T, block)

    cdef _dense(self, const double *X, Py_ssize_t T):
        cdef int res
        cdef Py_ssize_t at = 0
        cdef double top = 0.0, asym = 0.0
        with nogil:
            res = dense_block_check(self.n, X, T, &top, &at, &asym)
        if res != SIZE_OK:
            _size_error(res, "Xs", at, T, asym)
        self._check_range("Xs", top, T)
        return self._play(X, NULL, T, True)

    cdef _check_range(self, str name, double top, Py_ssize_t T):
        # float64 must hold the cumulative matrix: |C_ij| <= ||C||_2 <= (t + T) L,
        # with L the largest ||x||^2 (or bound on ||X||_2) so far
        cdef double t = <double> self.st.t
        if self.st.scale > top:
            top = self.st.scale
        if T and top > 1e300 / (4.0 * (t + T)):
            raise ValueError(f"{name} is too large for float64 arithmetic: the cumulative "
                             f"matrix would overflow; rescale the data")
        # a given sigma so large that sqrt(t) sigma N overflows within this call
        if not self.sigma_auto and self.noise != NOISE_NONE and \
                self.sigma_value * sqrt(t + T + 2.0) * 4 * sqrt(<double> self.n) > 1e300:
            raise ValueError(f"sigma = {self._sigma!r} is too large for float64 arithmetic "
                             f"over {<long long> t + T} trials: sqrt(t) sigma N overflows")

    cdef _play(self, const double *X, const float *X32, Py_ssize_t T, bint block):
        cdef Ctx c
        cdef Poll pl
        cdef int code = OK
        cdef Py_ssize_t done = 0
        self._start()
        self.best_t = -1
        self._interrupted = False
        if T == 0:
            return
        c = self._ctx()
        if block:
            poll_init(&pl, &_hook)
        else:
            poll_quiet(&pl, &_hook)
        if block or self.n >= 128:
            with nogil:
                code = trials(&c, X, X32, T, &done, &pl)
        else:
            code = trials(&c, X, X32, T, &done, &pl)
        if code == ERR_INTERRUPTED:
            self._interrupted = True
            exc = pending_exception()
            _note(exc, "LeaderState", done, T, self.st.t)
            raise exc

    # -- reading the state ----------------------------------------------------------------
    def transform_one(self, x):
        """The coordinates of the row x on the components, V_k x (k,)."""
        cdef const double[::1] x64
        cdef Py_buffer xb
        cdef Py_buffer ob
        cdef const double *xp
        cdef double *op
        cdef Py_ssize_t m
        cdef bint held = False
        cdef int j
        self._enter()
        try:
            self._start()
            # (at n = 10 the call is mostly its overhead: a float64 row and the
            # result are read through the buffer protocol, not memoryviews)
            held = _float64_row(x, &xb)
            if held:
                xp, m = <const double *> xb.buf, xb.shape[0]
            else:
                x64 = _row(x, self.n)
                m = x64.shape[0]
                xp = &x64[0] if m else NULL
            if m != self.n:
                raise ValueError(f"x has {m} features, but {_owner(self)} is "
                                 f"expecting {self.n} features as input")
            out = np.empty(self.k)
            PyObject_GetBuffer(out, &ob, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
            op = <double *> ob.buf
            for j in range(self.k):
                op[j] = sf_dot(self.n, self.pV + <Py_ssize_t> j * self.n, xp)
            PyBuffer_Release(&ob)
            for j in range(self.k):
                if not isfinite(op[j]):
                    _finite_or_raise(np.asarray(x, dtype=np.float64), "x")
            return out
        finally:
            if held:
                PyBuffer_Release(&xb)
            lock_leave(&self._lock)

    def transform(self, X):
        """X @ components_.T for a 2-D float64 X of n columns (uncentered)."""
        V = self.components_
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n:
            raise ValueError(f"X must have shape (n_samples, {self.n}), got {X.shape}")
        return X @ V.T

    @property
    def components_(self):
        """(k, n) orthonormal rows: the subspace the next trial plays (a copy)."""
        self._enter()
        try:
            self._start()
            return self._V[:self.k].copy()
        finally:
            lock_leave(&self._lock)

    @property
    def block_(self):
        """(b, n): the solver's whole block of eigenvector estimates (a copy)."""
        self._enter()
        try:
            self._start()
            return self._V.copy()
        finally:
            lock_leave(&self._lock)

    @property
    def started(self):
        """Whether the first decision was made (a call or a read made it)."""
        return bool(self.started)

    @property
    def interrupted(self):
        """Whether the last call was stopped by a signal (holding the trials
        played before it), rather than refused or ended."""
        return bool(self._interrupted)

    @property
    def n_trials_(self):
        return self.st.t

    @property
    def cumulative_gain_(self):
        """Sum over trials of the gain ||V_k x_t||^2 (tr(V_k^T X_t V_k))."""
        return self.st.gain

    @property
    def sigma_(self):
        """The noise scale of the next decision (0 for Follow the Leader)."""
        return self.st.sigma

    @property
    def scale_(self):
        """The largest ||x||^2 (dense: bound on ||X||_2) seen so far."""
        return self.st.scale

    @property
    def max_frob_(self):
        """Dense instances: the largest ||X||_F seen so far (0 for vectors)."""
        return self.st.max_frob

    @property
    def gap_tolerance_(self):
        """The objective-gap tolerance of the last top-k solve."""
        return self.st.topk.tol

    @property
    def solver_stats_(self):
        """The top-k solver's counters (see PerturbedLeaderPCA.solver_stats_)."""
        return topk_stats(&self.st.topk)

    @property
    def instances(self):
        return INSTANCES[self.kind]

    @property
    def noise(self):
        return NOISES[self.noise]

    @property
    def settings(self):
        """The settings as set: sigma, solver, tol, n_jobs."""
        return {"sigma": self._sigma, "solver": self._solver_name, "tol": self.tol,
                "n_jobs": self._n_jobs}

    @property
    def feature_names(self):
        return self._feature_names

    @property
    def torn(self):
        """Whether a fork caught another thread inside a call on this object
        (it then refuses every call)."""
        lock_enter(&self._lock, "LeaderState")      # (remakes the lock after a fork)
        lock_leave(&self._lock)
        return bool(self._lock.forked_mid_call)

    def same_random_state(self, random_state):
        """Whether ``random_state`` is the one this object was seeded from: an
        int by value, None as None, a Generator or SeedSequence by identity."""
        return self._seed.same(random_state)

    def _link_random_state(self, random_state):
        self._seed.link(random_state)

    def random_state_repr(self):
        return repr(self._seed)

    def perturbed_matrix(self):
        """S = X_<t + N_t, full and symmetric (a copy)."""
        self._enter()
        try:
            self._start()
            return _symmetric(self._S)
        finally:
            lock_leave(&self._lock)

    def cumulative_matrix(self):
        """sum_t X_t, full and symmetric: exact sums of the instances, kept
        apart from the noise (the rows still in the buffer added by BLAS's
        dsyrk)."""
        self._enter()
        try:
            return self._cumulative()
        finally:
            lock_leave(&self._lock)

    cdef _cumulative(self):
        cdef double[:, ::1] C
        cdef double[:, ::1] R
        cdef Py_ssize_t i, m = self.st.pending, n = self.n
        self._start()
        if self.noise == NOISE_NONE:
            return _symmetric(self._S)
        C = self._C.copy()
        if m == 1:
            R = self._rows
            for i in range(n):
                sf_row_update(i + 1, &C[i, 0], R[0, i], &R[0, 0], 0.0, NULL)
        elif m > 1:
            R = self._rows
            syrk_upper(<int> n, <int> m, 1.0, &R[0, 0], 1.0, &C[0, 0])
        return _symmetric(np.asarray(C))

    @property
    def best_gain_(self):
        """lambda_{1:k}(sum_t X_t), by the eigen-solver chain (which does not
        fail on a finite matrix); computed once per trial count."""
        cdef double value
        self._enter()
        try:
            if self.best_t != self.st.t:
                value = 0.0 if self.st.t == 0 else _top_sum(self._cumulative(), self.k)
                self.best, self.best_t = value, self.st.t
            return self.best
        finally:
            lock_leave(&self._lock)

    @property
    def regret_(self):
        return self.best_gain_ - self.st.gain

    # -- copies and pickling -------------------------------------------------------------
    def copy(self):
        """An independent copy (arrays, counters, bit generator)."""
        return LeaderState.from_state(self.to_state())

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return (_rebuild, (FORMAT_VERSION, self.to_state()))

    def to_state(self):
        """The whole state as a dict of plain values (str, int, float, bool,
        None, lists of str, float64 arrays): what pickling and the safe model
        format store, read back by :meth:`from_state`."""
        self._enter()
        try:
            self._start()
            return {
                "n": self.n, "k": self.k, "block": self.b, "max_iter": self.maxiter,
                "instances": INSTANCES[self.kind], "noise": NOISES[self.noise],
                "eig_first": self.eig_first,
                "sigma": self._sigma if isinstance(self._sigma, str) else float(self._sigma),
                "solver": self._solver_name, "tol": float(self.tol),
                "n_jobs": self._n_jobs,
                "seed_kind": self._seed.kind, "seed": self._seed.value,
                "feature_names": None if self._feature_names is None
                else list(self._feature_names),
                "rng": None if self._bitgen is None else bit_generator_text(self._bitgen),
                "t": self.st.t, "pending": self.st.pending, "sigma_now": self.st.sigma,
                "s": self.st.s, "scale": self.st.scale, "max_frob": self.st.max_frob,
                "gain": self.st.gain, **topk_fields(&self.st.topk),
                "S": self._S.copy(), "N": self._N.copy(), "C": self._C.copy(),
                "rows": self._rows.copy(), "V": self._V.copy(),
            }
        finally:
            lock_leave(&self._lock)

    @staticmethod
    def from_state(state):
        """A LeaderState from :meth:`to_state`'s dict, every field checked
        (type, range, shape, finiteness, consistency): a ValueError naming the
        field for anything off, before anything is used."""
        cdef LeaderState self = LeaderState.__new__(LeaderState)
        r = StateReader(state, "LeaderState")
        n = r.integer("n", 1, 1 << 24)
        k = r.integer("k", 1, n)
        b = r.integer("block", k, n)
        self.n, self.k, self.b = n, k, b
        self.maxiter = r.integer("max_iter", 0, TOPK_MAX_ITER)
        self.kind = INSTANCES.index(r.choice("instances", INSTANCES))
        self.noise = NOISES.index(r.choice("noise", NOISES))
        self.eig_first = r.integer("eig_first", 0, 3)
        sigma = r.get("sigma")
        solver = r.get("solver")
        tol = r.get("tol")
        n_jobs = r.get("n_jobs")
        try:
            self._configure(sigma, solver, tol, n_jobs)
        except (TypeError, ValueError) as exc:
            raise r.error("sigma, solver, tol or n_jobs", f"is refused: {exc}") from None
        self._seed = _Seed.read(r)
        self._feature_names = r.names("feature_names", n)
        if self.noise == NOISE_NONE:
            if r.get("rng") is not None:
                raise r.error("rng", "must be None for Follow the Leader (noise 'none')")
            self._bitgen = None
        else:
            self._bitgen = r.bit_generator("rng")
        st = &self.st
        st.t = r.integer("t", 0, 2 ** 53)
        st.sigma = r.real("sigma_now", 0)
        st.s = r.real("s", 0)
        st.scale = r.real("scale", 0)
        st.max_frob = r.real("max_frob", 0)
        st.gain = r.real("gain")
        read_topk(r, &st.topk)
        square = (n, n)
        S = r.array("S", square)
        N = r.array("N", square if self.noise == NOISE_FIXED else (0, 0))
        C = r.array("C", square if self.noise != NOISE_NONE else (0, 0))
        buffered = self.kind == INSTANCE_VECTOR and self.noise in (NOISE_FIXED,
                                                                   NOISE_RANDOM_WALK)
        rows = r.array("rows", (ROW_BUFFER if buffered else 0, n))
        st.pending = r.integer("pending", 0, max(rows.shape[0] - 1, 0))
        V = r.array("V", (b, n))
        check_orthonormal(V, r, "V")
        r.done()
        self._adopt(S, N, C, rows, V)
        self.started = True
        self._allocate()
        return self


def _rebuild(version, state):
    """Unpickling: a LeaderState from its format version and state dict."""
    if version != FORMAT_VERSION:
        raise refuse_version("LeaderState", version, FORMAT_VERSION)
    return LeaderState.from_state(state)


def _plant(LeaderState state, int i, int j, double value):
    """Tests: set S[i, j] (the lower triangle) to a value no input can put
    there (NaN, inf), to run the eigen-solver chain's last resort."""
    state._S[i, j] = value


# --- helpers ---------------------------------------------------------------------------

cdef str _owner(LeaderState s):
    return "FollowTheLeaderPCA" if s.noise == NOISE_NONE else "PerturbedLeaderPCA"


def _integer(value, name, low, high, message=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(message or f"{name} must be in [{low}, {high}], got {value!r}")
    return int(value)


def _positive(value, name):
    # scikit-learn's check_scalar, for a finite number > 0
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:
        v = float("inf")
    if not isfinite(v):
        raise ValueError(f"{name} must be finite (within float64's range), got {value!r}")
    if not v > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return v


def _threads(n_jobs, n):
    # the OpenMP threads of the trial loop: checked always, counted only
    # where the loop uses them (n >= PAR_MIN_N)
    from streamfit._validation import check_n_jobs, effective_n_threads
    check_n_jobs(n_jobs)
    return effective_n_threads(n_jobs) if n >= PAR_MIN_N else 1


def _names(names, n):
    if names is None:
        return None
    names = tuple(names)
    if len(names) != n or not all(isinstance(s, str) for s in names):
        raise ValueError(f"feature_names must be {n} strings, got {names!r:.200}")
    return names


class _Seed:
    """What a state object was seeded from: the seed's kind, an int seed's
    value, and a SeedSequence or Generator itself (``ref``: compared by
    identity, never stored in the state dict; None after loading until the
    estimator links its own)."""
    __slots__ = ("kind", "value", "ref")

    def __init__(self, kind, value, ref=None):
        self.kind, self.value, self.ref = kind, value, ref

    @classmethod
    def own(cls, random_state):
        """(a bit generator of the object's own, the seed) from random_state."""
        bitgen, kind, value = own_bit_generator(random_state)
        return bitgen, cls(kind, value,
                           random_state if kind in ("sequence", "generator") else None)

    @classmethod
    def read(cls, r):
        """The seed from a StateReader's "seed_kind" and "seed" fields."""
        kind = r.choice("seed_kind", SEED_KINDS)
        seed = r.get("seed")
        if kind == "int":
            seed = r.integer("seed", 0, 2 ** 128)
        elif seed is not None:
            raise r.error("seed", f"is {seed!r}, expected None for a seed of kind {kind!r}")
        return cls(kind, seed)

    def same(self, random_state):
        """Whether ``random_state`` is this seed: an int by value, None as
        None, a Generator or SeedSequence by identity."""
        if self.kind == "none":
            return random_state is None
        if self.kind == "int":
            if type(random_state) is int:       # (the common case, without the ABC check)
                return random_state == self.value
            return (isinstance(random_state, numbers.Integral)
                    and not isinstance(random_state, bool) and int(random_state) == self.value)
        return random_state is self.ref

    def link(self, random_state):
        # after loading: the estimator's own Generator is the one it was made from
        if self.kind in ("sequence", "generator") and self.ref is None:
            self.ref = random_state

    def __repr__(self):
        if self.kind == "int":
            return repr(self.value)
        if self.kind == "none":
            return "None"
        return repr(self.ref) if self.ref is not None else f"a {self.kind}"


def _what(a):
    if isinstance(a, np.ndarray):
        return f"a {a.dtype} array of shape {a.shape}"
    return f"a {type(a).__name__}"


def _rows2d(X, n, name):
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.flags.c_contiguous and
            X.dtype in (np.float64, np.float32)):
        raise TypeError(f"{name} must be a C-contiguous float64 (or float32) array of shape "
                        f"(T, {n}), got {_what(X)}")
    if X.shape[1] != n:
        raise ValueError(f"{name} has {X.shape[1]} features, but the state is expecting {n} "
                         f"features as input")
    return X


def _row(x, n):
    # a sequence of n real numbers (or a 1-D array) as a float64 row, in C
    cdef double[::1] out
    cdef Py_ssize_t i, m
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "biuf":
            raise TypeError(f"x must hold real numbers, got {_what(x)}")
        if x.ndim != 1:
            raise ValueError(f"x must be 1-dimensional (one row of {n} values), got an "
                             f"array of shape {x.shape}")
        return np.ascontiguousarray(x, dtype=np.float64)
    if isinstance(x, (str, bytes)) or not hasattr(x, "__len__"):
        raise TypeError(f"x must be a 1-D array or a sequence of real numbers, got "
                        f"{type(x).__name__}")
    seq = PySequence_Fast(x, "x must be a sequence")
    m = PySequence_Fast_GET_SIZE(seq)
    out = np.empty(m)
    for i in range(m):
        item = <object> PySequence_Fast_GET_ITEM(seq, i)
        if isinstance(item, (str, bytes)) or not isinstance(item, numbers.Real):
            raise TypeError(f"x[{i}] is not a real number: {item!r:.40}")
        try:
            out[i] = PyFloat_AsDouble(item)
        except OverflowError:
            raise ValueError(f"x[{i}] is too large for float64") from None
    return np.asarray(out)


cpdef object _vector_row(object x, Py_ssize_t n, str owner):
    # learn_one's row: x itself when it is a C-contiguous 1-D float64 array
    # (the fast path), else converted by _row; refused naming the owner when
    # it has another length than n
    if not (type(x) is np.ndarray and x.dtype == np.float64 and x.ndim == 1 and
            x.flags.c_contiguous):
        x = _row(x, n)
    if x.shape[0] != n:
        raise ValueError(f"x has {x.shape[0]} features, but {owner} is expecting {n} "
                         f"features as input")
    return x


def _dense_block(Xs, n, owner):
    # learn_dense's block: a C-contiguous float64 (T, n, n) array, else refused
    if not (isinstance(Xs, np.ndarray) and Xs.dtype == np.float64 and Xs.ndim == 3
            and Xs.flags.c_contiguous):
        raise TypeError(f"Xs must be a C-contiguous float64 array of shape "
                        f"(T, {n}, {n}), got {_what(Xs)}")
    if Xs.shape[1] != n or Xs.shape[2] != n:
        raise ValueError(f"Xs has {Xs.shape[1]} features, but {owner} is expecting {n} "
                         f"features as input")
    return Xs


def _wrong_kind(have, want, name, owner):
    # a call with instances of the kind `want` (INSTANCE_*) on an object
    # fitted with `have`
    fitted = INSTANCES[have]
    raise ValueError(f"{name} holds {INSTANCES[want]} instances, but this {owner} was "
                     f"fitted with {fitted} instances "
                     f"({'partial_fit' if fitted == 'vector' else 'partial_fit_dense'}); "
                     f"use one estimator per instance type")


cdef bint _float64_row(object x, Py_buffer *b) except -1:
    # b: x's buffer if x is a C-contiguous 1-D float64 row (the caller releases
    # it), else False and nothing held (the caller converts x)
    if not PyObject_CheckBuffer(x):
        return False
    try:
        PyObject_GetBuffer(x, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, TypeError, ValueError):
        return False
    if b.ndim == 1 and b.itemsize == 8 and b.format != NULL and b.format[0] == b'd' \
            and b.format[1] == 0:
        return True
    PyBuffer_Release(b)
    return False


def _finite_or_raise(a, name):
    if not np.isfinite(a).all():
        bad = "NaN" if np.isnan(a).any() else "inf"
        raise ValueError(f"{name} contains {bad}; every value must be finite")


def _size_error(int res, str name, Py_ssize_t at, Py_ssize_t T, double asym=0.0):
    where = f"{name}[{at}]" if T > 1 or name == "Xs" else name
    if res == SIZE_NAN:
        raise ValueError(f"{name} contains NaN; every value must be finite")
    if res == SIZE_INF:
        raise ValueError(f"{name} contains inf; every value must be finite")
    if res == SIZE_ASYM:
        raise ValueError(f"{where} is not symmetric (max |X - X^T| = {asym:.3g}); instances "
                         f"must be symmetric PSD matrices")
    if name == "Xs":
        raise ValueError(f"Xs is too large for float64 arithmetic: ||X||_F or its row sums "
                         f"overflow; rescale the data")
    raise ValueError(f"{name} is too large for float64 arithmetic: ||x||^2 overflows; "
                     f"rescale the data")


def _note(exc, owner, done, T, total):
    """Say on an interrupt's exception how much of the call was played."""
    if exc is not None and hasattr(exc, "add_note"):
        exc.add_note(f"{owner} was interrupted after {done} of the call's {T} trials; it "
                     f"holds them ({total} trials in all), consistent in every field: "
                     f"continue with the rest of the block")


def _symmetric(lower):
    # the full symmetric matrix of a state array (row-major lower valid)
    low = np.tril(lower)
    return low + np.tril(low, -1).T


cdef double _top_sum(object A, int k) except? -1:
    # lambda_{1:k}(A) by the eigen-solver chain (the k largest eigenvalues,
    # ascending, summed by numpy as streamfit._kernels._linalg.eigh_top's
    # callers sum them)
    cdef const double[:, ::1] M = A
    cdef int n = M.shape[0], code
    cdef EigWork ws
    cdef double *B
    cdef double[::1] w = np.zeros(n)
    B = <double *> malloc(<size_t> n * n * sizeof(double))
    code = eig_work_init(&ws, n, k, False)
    try:
        if B == NULL or code != OK:
            raise MemoryError("best_gain_: no memory for the eigen-solver's work space")
        with nogil:
            code = eig_top(&ws, EIG_EVR, n, &M[0, 0], n, 1.0, k, &w[0], NULL, n, B, False)
        if code != OK:
            raise np.linalg.LinAlgError("best_gain_: every LAPACK routine of the "
                                        "eigen-solver chain failed")
        return float(np.asarray(w)[:k].sum())
    finally:
        free(B)
        eig_work_free(&ws)
