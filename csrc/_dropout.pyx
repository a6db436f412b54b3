# Online PCA by Follow the Leader with dropout perturbations (van Erven,
# Kotlowski & Warmuth, COLT 2014), lazy form: each instance gets one Bernoulli
# weight b_t ~ B(p) when it arrives, and the leader is the top-k of the kept
# sum S = sum_{s<t} b_s X_s. The whole trial loop -- play, gain, draw, update,
# warm-started top-k -- runs here without the GIL, updating the caller's state
# arrays in place and stopping, on a signal, only between whole trials.
#
# Layout as in _pca.pyx: symmetric n x n matrices (S, C, a dense instance) are
# C-order with the row-major lower triangle valid (BLAS's column-major upper);
# the block V is a C-order (b, n) array of orthonormal rows.
#
# The boundary: state and parameters cross as NumPy records of the structs
# below (STATE_DTYPE, PARAMS_DTYPE); every def entry checks them and the shapes
# of the arrays they describe.
from libc.math cimport sqrt, isfinite
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport PyCapsule_GetPointer

import numpy as np

from _blas cimport blas_int
from _common cimport (bitgen_t, random_standard_uniform, OK, ERR_NOMEM, ERR_INTERRUPTED,
                      pending_exception, bad_field, is_real)
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_stop
from _topk cimport (TopKState, TopKWork, TOPK_MAX_ITER, check_topk_state, topk_work_init, topk_work_free, topk_solve,
                    leader_flush, leader_gain, leader_dense_hint, rank_one_rows,
                    rows_dot_plain)
from _symm_par cimport symm_product

from _dense cimport sf_row_update

from streamfit._kernels._common import check_struct

cpdef enum:
    INSTANCE_VECTOR = 0
    INSTANCE_DENSE = 1

cpdef enum:
    SOLVER_EXACT = 0        # the eigen-solver chain (dsyevr first) at every solve
    SOLVER_KRYLOV = 1       # warm-started block Krylov, the chain as fallback


ctypedef struct DropoutState:
    long long t         # trials played so far
    long long kept      # instances kept in S (b_s = 1) so far
    long long pending   # rows of `rows` not yet added to C (vector instances)
    double scale        # vector: max ||x||^2; dense: max of an upper bound on ||X||_2
    double gain         # cumulative gain
    TopKState topk      # the top-k solver's counters and back-off


ctypedef struct DropoutParams:
    int kind            # INSTANCE_*
    int solver          # SOLVER_*
    int k               # rank of the decisions
    int b               # block size of the top-k solver (k <= b <= n)
    int maxiter         # Krylov iterations before a solve goes to LAPACK
    int eig_first       # the eigen-solver chain's first routine (tests force later ones)
    double p            # the probability of keeping an instance
    double tol          # gap tolerance, as a fraction of sqrt(k) L / (2 sqrt(t))


cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Tests: raise the real signal `signum` at the trial loop's poll number
    `polls` (one poll before each trial of a call, counted across calls);
    polls < 0 disarms."""
    arm_hook(&_hook, polls, signum)


cdef DropoutState _state_proto
cdef DropoutParams _params_proto
STATE_DTYPE = np.asarray(<DropoutState[:1]> &_state_proto).dtype
PARAMS_DTYPE = np.asarray(<DropoutParams[:1]> &_params_proto).dtype


cdef struct Ctx:
    int n, k, b, kind, solver, nrows
    double p, tol
    double *S           # the kept sum
    double *C           # every instance's sum (the regret's comparator)
    double *rows        # vector instances not yet in C (nrows of room)
    double *V
    DropoutState *st
    bitgen_t *rng
    double *row         # n scratch
    TopKWork w


cdef inline double tolerance(Ctx *c, double t_next) noexcept nogil:
    # tol times the per-trial increment of sqrt(k t) L (vector) or k sqrt(t) L
    # (dense): the gaps then add at most tol times the minimax-rate regret
    cdef double r = sqrt(<double> c.k) if c.kind == INSTANCE_VECTOR else <double> c.k
    return c.tol * r * c.st.scale / (2.0 * sqrt(t_next))


cdef int trials(Ctx *c, const double *X, const double *scale, Py_ssize_t T,
                Py_ssize_t *done, Poll *pl) noexcept nogil:
    # Play T trials; stops early only before a trial, on a signal
    cdef int n = c.n, k = c.k, code = OK
    cdef Py_ssize_t t, i, step = n * (n if c.kind == INSTANCE_DENSE else 1)
    # a trial's work in _work_poll.pxd's units (~1 ns): O(n^2 b) and ~20 us
    cdef double g, work = <double> n * n * (c.b / 8.0 + 1.0) + 2e4
    cdef bint keep
    cdef const double *x
    cdef const double *hint
    for t in range(T):
        if poll_stop(pl, work):
            code = ERR_INTERRUPTED
            break
        x = X + t * step
        # one uniform per instance, drawn whether or not p is 0 or 1: the
        # stream of draws is the same for every p
        keep = random_standard_uniform(c.rng) < c.p
        if c.kind == INSTANCE_DENSE:
            # tr(V_k^T X V_k) by the panelled product (no BLAS, see _topk.pxd)
            symm_product(1, n, k, 1.0, x, c.V, c.w.tmp)
            g = rows_dot_plain(n, k, c.w.tmp, c.V)
            for i in range(n):
                sf_row_update(i + 1, c.C + i * n, 0.0, NULL, 1.0, x + i * n)
                if keep:
                    sf_row_update(i + 1, c.S + i * n, 0.0, NULL, 1.0, x + i * n)
            hint = leader_dense_hint(n, x)
        else:
            g = leader_gain(n, k, c.V, x, c.row)
            if keep:
                rank_one_rows(n, 1.0, x, c.S)
            memcpy(c.rows + c.st.pending * n, x, n * sizeof(double))
            c.st.pending += 1
            if c.st.pending == c.nrows:
                leader_flush(1, n, &c.st.pending, c.rows, c.C)
            hint = x
        c.st.gain += g
        if scale[t] > c.st.scale:
            c.st.scale = scale[t]
        c.st.t += 1
        if keep:
            # a dropped instance leaves S, and so the leader, as they were
            c.st.kept += 1
            code = topk_solve(&c.w, c.S, c.V, &c.st.topk,
                              tolerance(c, <double> c.st.t + 1.0), hint,
                              <unsigned long long> c.st.t, c.solver == SOLVER_KRYLOV)
        done[0] = t + 1
        if code != OK:
            break
    return code


cdef int setup(Ctx *c, DropoutState *st, const DropoutParams *p, double[:, ::1] S,
               double[:, ::1] C, double[:, ::1] rows, double[:, ::1] V,
               object capsule) except? -1:
    # the context over the caller's arrays, after checking their shapes
    # against the parameters; workspaces allocated here, before any state
    # changes (ERR_NOMEM then, or never)
    cdef int n = S.shape[0]
    memset(c, 0, sizeof(Ctx))
    if S.shape[1] != n or n < 1:
        raise ValueError(f"S must be a non-empty square matrix, got {S.shape[0]}x{S.shape[1]}")
    if C.shape[0] != n or C.shape[1] != n:
        raise ValueError(f"C must have shape ({n}, {n}), got ({C.shape[0]}, {C.shape[1]})")
    if not (p.kind == INSTANCE_VECTOR or p.kind == INSTANCE_DENSE) or not (
            p.solver == SOLVER_EXACT or p.solver == SOLVER_KRYLOV):
        raise ValueError("params: unknown instance kind or solver code")
    if not (1 <= p.k <= p.b <= n) or not 0 <= p.maxiter <= TOPK_MAX_ITER \
            or not 0 <= p.eig_first <= 3:
        raise ValueError(f"params: need 1 <= k <= b <= n, 0 <= maxiter <= {TOPK_MAX_ITER} "
                         f"and 0 <= eig_first <= 3, got k = {p.k}, b = {p.b}, n = {n}, "
                         f"maxiter = {p.maxiter}, eig_first = {p.eig_first}")
    if not (0.0 <= p.p <= 1.0):
        raise ValueError(f"params: p must be in [0, 1], got {p.p}")
    if not is_real(p.tol, 0):
        bad_field("params", "tol", p.tol, "a finite number >= 0")
    if not (0 <= st.kept <= st.t):
        bad_field("state", "kept" if st.t >= 0 else "t", st.kept if st.t >= 0 else st.t,
                  "counts with 0 <= kept <= t")
    if not is_real(st.scale, 0):
        bad_field("state", "scale", st.scale, "a finite number >= 0")
    if not isfinite(st.gain):
        bad_field("state", "gain", st.gain, "a finite number")
    check_topk_state(&st.topk, "state.topk")
    if V.shape[0] != p.b or V.shape[1] != n:
        raise ValueError(f"V must have shape ({p.b}, {n}), got ({V.shape[0]}, {V.shape[1]})")
    if rows.shape[1] != n or not (0 <= st.pending < max(rows.shape[0], 1)):
        raise ValueError(f"rows must have shape (B, {n}) with 0 <= pending < B, got "
                         f"({rows.shape[0]}, {rows.shape[1]}), pending = {st.pending}")
    if p.kind == INSTANCE_VECTOR and rows.shape[0] == 0:
        raise ValueError("rows must have room for at least one row for vector instances")
    c.n = n
    c.k = p.k
    c.b = p.b
    c.kind = p.kind
    c.solver = p.solver
    c.p = p.p
    c.tol = p.tol
    c.nrows = rows.shape[0]
    c.st = st
    c.S = &S[0, 0]
    c.C = &C[0, 0]
    c.rows = &rows[0, 0] if rows.shape[0] > 0 else NULL
    c.V = &V[0, 0]
    c.rng = <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")
    if topk_work_init(&c.w, n, p.k, p.b, p.maxiter) != OK:
        return ERR_NOMEM
    c.w.first = p.eig_first
    # n doubles of scratch for the gains: the solver's n x 3b scratch is free
    # outside a solve
    c.row = c.w.tmp
    return OK


def run(const double[:, ::1] X, const double[::1] scale, DropoutState[::1] state,
        const DropoutParams[::1] params, double[:, ::1] S, double[:, ::1] C,
        double[:, ::1] rows, double[:, ::1] V, object capsule):
    """Play len(X) trials, updating every state array in place. Vector
    instances: rows x_t of X, scale[t] = ||x_t||^2; gain ||V_k x_t||^2, then
    b_t ~ B(p) and S += b_t x_t x_t^T (dsyr, one triangle). Dense instances:
    rows of X are the n*n entries of symmetric PSD X_t, scale[t] an upper
    bound on ||X_t||_2; gain tr(V_k^T X_t V_k), S += b_t X_t. C += X_t either
    way. A kept instance is followed by a top-k solve of S; a dropped one
    changes neither S nor the leader.

    Returns (code, done, exc): OK after all trials, or ERR_INTERRUPTED after
    `done` whole trials with `exc` the exception a signal handler raised, or
    ERR_NOMEM before any; the state describes exactly `done` trials. The
    caller holds the bit generator's lock."""
    check_struct(state.base, STATE_DTYPE, "state")
    check_struct(params.base, PARAMS_DTYPE, "params")
    cdef Ctx c
    cdef int code, n
    cdef Py_ssize_t T = X.shape[0], done = 0
    cdef Poll pl
    code = setup(&c, &state[0], &params[0], S, C, rows, V, capsule)
    try:
        if code != OK:
            return code, 0, None
        n = c.n
        if X.shape[1] != (n * n if c.kind == INSTANCE_DENSE else n):
            raise ValueError(f"X has {X.shape[1]} columns, expected "
                             f"{n * n if c.kind == INSTANCE_DENSE else n}")
        if scale.shape[0] != T:
            raise ValueError(f"scale must have {T} entries, got {scale.shape[0]}")
        if T == 0:
            return OK, 0, None
        poll_init(&pl, &_hook)
        with nogil:
            code = trials(&c, &X[0, 0], &scale[0], T, &done, &pl)
        return code, done, (pending_exception() if code == ERR_INTERRUPTED else None)
    finally:
        topk_work_free(&c.w)
