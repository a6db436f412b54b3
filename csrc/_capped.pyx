# Online PCA over the capped simplex W = {W symmetric, 0 <= W <= I, tr W = k}:
# Matrix Exponentiated Gradient (MEG) and matrix Gradient Descent (GD), with
# their Bregman projections ("capping"), the Warmuth-Kuzmin mixture
# decomposition and a systematic sampler. The trial loop -- expected and
# sampled gain, update, eigendecomposition, projection -- runs here without
# the GIL; Python validates and owns the state arrays.
#
# Two ways to the eigendecomposition after an update (the projections act on
# eigenvalues only, so the eigenvectors are those of the updated matrix):
# * vector instances (full_every >= 1): the kernel's matrix M (MEG: log W, GD:
#   W) is kept as its eigendecomposition, U (rows) and its eigenvalues d
#   ("spectrum"); M + eta x x^T is a rank-one change of it, decomposed by
#   _rank1.pxd in O(n K^2) (K <= n the block deflation leaves), and every
#   full_every-th update (or when the secular solver fails) M is rebuilt from
#   U, d and decomposed afresh by the dsyevd chain, which bounds the drift of
#   the updates (U's orthogonality). M itself is not stored.
# * dense instances, and vector ones with full_every = 0 (the benchmarks'
#   baseline): M is stored (lower triangle), updated and corrected after the
#   projection by low-rank updates, and decomposed by the dsyevd chain every
#   update.
#
# Papers: Tsuda, Raetsch & Warmuth (JMLR 2005); Warmuth & Kuzmin (JMLR 2008);
# Arora, Cotter & Srebro (NIPS 2013); Nie, Kotlowski & Warmuth (JMLR 2016).
#
# Layout as in _pca.pyx: symmetric n x n matrices are C-order with the
# row-major lower triangle valid (BLAS's column-major 'U'); eigenvectors are
# C-order rows (dsyevd's columns), ascending with their eigenvalues.
#
# The boundary: state and parameters cross as NumPy records of CappedState
# and CappedParams (STATE_DTYPE, PARAMS_DTYPE, made from them); every def
# entry checks them and the shapes of the arrays they describe.
from libc.math cimport sqrt, log, exp, frexp, ldexp, fma, fabs, INFINITY, isfinite
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memmove, memset
from cpython.pycapsule cimport PyCapsule_GetPointer

import numpy as np

from _blas cimport blas_int, dot, gemv_rows, syr_upper, syrk_upper, axpy_upper, quad_rows
from _common cimport (bitgen_t, random_standard_uniform, OK, ERR_NOMEM, ERR_LAPACK,
                      ERR_INTERRUPTED, pending_exception, bad_field, is_real)
from _eigen cimport EigWork, eig_work_init, eig_work_free, eig_all, EIG_EVD
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_stop
from _simplex cimport euclid_project, entropy_cap, systematic_pick
from _rank1 cimport Rank1Work, rank1_work_init, rank1_work_free, rank1_update

from streamfit._kernels._common import check_struct

cpdef enum:
    ALGO_MEG = 0
    ALGO_GD = 1

cpdef enum:
    INSTANCE_VECTOR = 0
    INSTANCE_DENSE = 1


ctypedef struct CappedState:
    long long t             # trials played so far
    long long restarts      # MEG doubling-trick restarts (epochs)
    long long rebuilds      # GD updates that rebuilt W from its support, not corrected it
    long long scale_restarts  # MEG "auto": restarts because the scale passed 2 Lambda
    long long eig_fallbacks   # eigendecompositions that needed a routine after dsyevd
    long long full            # updates decomposed afresh by the dsyevd chain
    long long rank_one        # updates by the rank-one update of the decomposition
    long long rank_one_failed # rank-one updates whose secular solver failed (redone full)
    long long since_full      # rank-one updates since the last full decomposition (or reset)
    long long block_sum       # sum over rank-one updates of the kept block's size K
    double eta              # the learning rate of the last update
    double scale            # L: vector max ||x||^2; dense max of a bound on ||X||_2
    double max_frob         # G: max ||X||_F (vector: ||x||^2)
    double gain             # expected gain, sum_t tr(W_t X_t)
    double realized         # gain of the sampled projections, sum_t tr(P_t X_t)
    double u                # the uniform that samples the next trial's projection
    double segment          # MEG "auto": the scale Lambda this run of the epoch is tuned to


ctypedef struct CappedParams:
    int algo                # ALGO_*
    int kind                # INSTANCE_*
    int eta_auto            # the documented "auto" schedule (else eta_value)
    int k
    int eig_first           # the eigen-solver chain's first routine (1: dsyevd; tests force others)
    double eta_value
    long long full_every    # vector instances: a full decomposition every full_every-th
                            # update, rank-one updates in between; 0: every update full,
                            # M stored (dense instances always)


cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Tests: raise the real signal `signum` at the trial loop's poll number
    `polls` (one poll before each trial of a call, counted across calls);
    polls < 0 disarms."""
    arm_hook(&_hook, polls, signum)


cdef CappedState _state_proto
cdef CappedParams _params_proto
STATE_DTYPE = np.asarray(<CappedState[:1]> &_state_proto).dtype
PARAMS_DTYPE = np.asarray(<CappedParams[:1]> &_params_proto).dtype


# --- projections, sampling: entries over _simplex.pxd -------------------------

def project_euclidean(const double[::1] v, int k, double[::1] out):
    """w = clip(v - theta, 0, 1) with sum w = k, for v sorted ascending; returns theta."""
    cdef int n = v.shape[0]
    cdef double theta
    cdef double *u
    if n == 0 or out.shape[0] != n or not 1 <= k <= n:
        raise ValueError(f"v and out must have the same length n >= 1, and 1 <= k <= n")
    u = <double *> malloc(n * sizeof(double))
    if u == NULL:
        raise MemoryError()
    with nogil:
        theta = euclid_project(&v[0], n, k, u, &out[0])
    free(u)
    return theta


def project_entropy(const double[::1] logv, int k, double[::1] out):
    """w = min(1, c v) with sum w = k, from log v sorted ascending; returns the
    number of entries capped at 1."""
    cdef int n = logv.shape[0], i, m
    cdef double logc = 0.0, wi
    cdef double *s
    if n == 0 or out.shape[0] != n or not 1 <= k <= n:
        raise ValueError(f"logv and out must have the same length n >= 1, and 1 <= k <= n")
    s = <double *> malloc(n * sizeof(double))
    if s == NULL:
        raise MemoryError()
    with nogil:
        m = entropy_cap(&logv[0], n, k, s, &logc)
        for i in range(n):
            wi = exp(logv[i] + logc)
            out[i] = 1.0 if (i >= n - m or wi > 1.0) else wi
    free(s)
    return m


# --- mixture decomposition and sampling ------------------------------------

# Double-double numbers (hi + lo, |lo| <= ulp(hi) / 2) for the decomposition:
# its entries go through up to n rounds of subtractions, and entries that tie
# in exact arithmetic must still tie, so it carries ~32 digits.

ctypedef struct dd:
    double hi
    double lo


cdef inline dd dd_norm(double s, double e) noexcept nogil:
    # TwoSum (not Fast2Sum: after a cancellation |s| can be below |e|)
    cdef dd r
    cdef double v
    r.hi = s + e
    v = r.hi - s
    r.lo = (s - (r.hi - v)) + (e - v)
    return r


cdef inline dd dd_sub(dd a, dd b) noexcept nogil:
    # a - b (TwoSum on the high parts)
    cdef double s = a.hi - b.hi
    cdef double v = s - a.hi
    cdef double e = (a.hi - (s - v)) + (-b.hi - v)
    return dd_norm(s, e + (a.lo - b.lo))


cdef inline dd dd_add(dd a, double b) noexcept nogil:
    cdef double s = a.hi + b
    cdef double v = s - a.hi
    cdef double e = (a.hi - (s - v)) + (b - v)
    return dd_norm(s, e + a.lo)


cdef inline double dd_cmp(dd a, dd b) noexcept nogil:
    # the sign of a - b
    return dd_sub(a, b).hi


cdef inline dd dd_div(dd a, double m) noexcept nogil:
    # a / m, the remainder exact by fma
    cdef double q = a.hi / m
    return dd_norm(q, (fma(-q, m, a.hi) + a.lo) / m)


def mixture(const double[::1] w, const Py_ssize_t[::1] order, int k, double[::1] weights,
            int[:, ::1] subsets):
    """Warmuth & Kuzmin's decomposition of w (0 <= w_i <= 1, sum w = k) into at
    most n + 1 corners (k-subsets) with weights summing to 1: returns their
    number. ``order`` lists the indices of w in descending order of w.

    Each round takes S = {entries at the mean m = sum(w)/k} filled up with the
    largest others, p = min(min_S w, m - max_{not S} w), records (p, S) and
    takes p off S. Then either an entry of S hits 0 or the largest entry
    outside S reaches the new mean and stays in every later S, so there are at
    most n rounds of O(n) work: the entries outside the mean set are kept
    sorted by merging the decreased chosen prefix with the untouched rest.

    Rounding: entries, the mean and p are double-double, and the entries that
    set p move exactly (to 0, or to the mean, which is then set to their
    value); entries within tol = 4 (n + 16) (rounds + 1) eps^2 m_0 (2e-25 at
    n = 1000 after 1000 rounds) of the mean join the mean set, within as much
    of 0 leave. In double precision the subtractions of ~n rounds left
    ties a few ulps apart and the reconstruction 1e-12 off at n = 1000."""
    cdef Py_ssize_t n = order.shape[0], i, j, a, b, nr, nn, nz = 0
    cdef int nt = 0, r, rounds = 0
    cdef dd total, mean, p, s, gap, zero
    cdef double mean0, tol, snap
    cdef bint to_mean
    if (n == 0 or w.shape[0] != n or not 1 <= k <= n or weights.shape[0] < n + 2
            or subsets.shape[0] < n + 2 or subsets.shape[1] != k):
        raise ValueError("mixture: w and order of length n >= 1, 1 <= k <= n, weights of "
                         "n + 2 entries and subsets of shape (n + 2, k)")
    for i in range(n):
        if not 0 <= order[i] < n:
            raise ValueError("mixture: order must hold indices of w")
    cdef dd *val = <dd *> malloc((2 * n + 1) * sizeof(dd))
    cdef Py_ssize_t *idx = <Py_ssize_t *> malloc((3 * n + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *tight = <Py_ssize_t *> malloc((k + 1) * sizeof(Py_ssize_t))
    if val == NULL or idx == NULL or tight == NULL:
        free(val); free(idx); free(tight)
        raise MemoryError()
    cdef dd *nval = val + n
    cdef Py_ssize_t *nidx = idx + n
    cdef Py_ssize_t *zeros = idx + 2 * n      # entries at 0, to fill a last corner
    with nogil:
        zero.hi = 0.0
        zero.lo = 0.0
        total = zero
        for i in range(n):
            total = dd_add(total, w[order[i]])
        mean = dd_div(total, k)
        mean0 = mean.hi
        # double-double rounding: ~eps^2 m_0 per subtraction, up to n a round
        tol = 4.0 * (n + 16) * 4.93e-32 * mean0
        # w carries its caller's rounding: sum w = k + delta. Entries within
        # |delta| (and 4 ulps) of the mean -- 1, when delta = 0 -- are at it.
        gap = total
        gap.hi -= k             # exact for |total - k| small against k
        snap = mean.hi * 4.0 * 2.220446049250313e-16 + 2.0 * fabs(gap.hi + gap.lo) / k
        nr = 0
        for i in range(n):
            if w[order[i]] <= 0.0:
                zeros[nz] = order[i]
                nz += 1
            elif nt < k and w[order[i]] >= mean.hi - snap:
                tight[nt] = order[i]
                nt += 1
            else:
                val[nr].hi = w[order[i]]
                val[nr].lo = 0.0
                idx[nr] = order[i]
                nr += 1
        # w sums to k only up to rounding (its caller's): the mean set gets
        # the mean of what the others leave for it, so that they carry exactly
        # r times the mean and no last corner comes up short; entries at or
        # above that mean join the mean set too
        b = 0
        while nt < k and b < nr:
            total = zero
            for j in range(b, nr):
                total = dd_add(dd_add(total, val[j].hi), val[j].lo)
            mean = dd_div(total, k - nt)
            if dd_cmp(val[b], mean) < -tol:
                break
            tight[nt] = idx[b]
            nt += 1
            b += 1
        memmove(val, val + b, (nr - b) * sizeof(dd))
        memmove(idx, idx + b, (nr - b) * sizeof(Py_ssize_t))
        nr -= b
        while mean.hi > tol:
            r = k - nt
            if r == 0 or nr <= r:
                # the last corner: the mean set and what is left (in exact
                # arithmetic r == 0 here; rounding could leave entries of
                # rounding size, filled up with entries at 0 if need be)
                for j in range(nt):
                    subsets[rounds, j] = <int> tight[j]
                for j in range(r):
                    if j < nr:
                        subsets[rounds, nt + j] = <int> idx[j]
                    elif j - nr < nz:
                        subsets[rounds, nt + j] = <int> zeros[j - nr]
                    else:
                        subsets[rounds, nt + j] = -1
                weights[rounds] = mean.hi + mean.lo
                rounds += 1
                break
            s = val[r - 1]
            gap = dd_sub(mean, val[r])
            to_mean = dd_cmp(gap, s) <= 0.0
            p = gap if to_mean else s
            for j in range(nt):
                subsets[rounds, j] = <int> tight[j]
            for j in range(r):
                subsets[rounds, nt + j] = <int> idx[j]
            weights[rounds] = p.hi + p.lo
            rounds += 1
            tol = 4.0 * (n + 16) * 4.93e-32 * mean0 * (rounds + 1)
            mean = val[r] if to_mean else dd_sub(mean, p)
            for j in range(r):
                val[j] = dd_sub(val[j], p)
            # merge chosen (0..r-1) with the rest (r..nr-1); entries at 0
            # leave, entries at the mean join the mean set
            a = 0
            b = r
            nn = 0
            while a < r or b < nr:
                if b >= nr or (a < r and dd_cmp(val[a], val[b]) >= 0.0):
                    i = a
                    a += 1
                else:
                    i = b
                    b += 1
                if val[i].hi <= tol:
                    zeros[nz] = idx[i]
                    nz += 1
                elif nt < k and dd_cmp(val[i], mean) >= -tol:
                    tight[nt] = idx[i]
                    nt += 1
                else:
                    nval[nn] = val[i]
                    nidx[nn] = idx[i]
                    nn += 1
            memcpy(val, nval, nn * sizeof(dd))
            memcpy(idx, nidx, nn * sizeof(Py_ssize_t))
            nr = nn
    free(val); free(idx); free(tight)
    return rounds


def systematic(const double[::1] w, int k, const double[::1] u, int[:, ::1] out):
    """One systematic sample of k indices of w per uniform in u (rows of out)."""
    cdef Py_ssize_t i
    cdef int n = w.shape[0]
    if n == 0 or not 1 <= k <= n or out.shape[0] != u.shape[0] or out.shape[1] != k:
        raise ValueError("systematic: w of length n >= 1, 1 <= k <= n, out of shape "
                         "(len(u), k)")
    with nogil:
        for i in range(u.shape[0]):
            systematic_pick(&w[0], n, k, u[i], &out[i, 0])


# --- the trial loop ----------------------------------------------------------

cdef struct Ctx:
    int n, k, algo, kind, eta_auto, eig_first
    int stored      # M stored and decomposed every update (dense, or full_every = 0)
    long long full_every
    double eta_value
    double *M       # stored: MEG log W, GD W (lower triangle); else NULL
    double *U       # eigenvectors of M (and W_t), rows, ascending: the caller's
                    # array or the rank-one work's (they alternate; copied back)
    double *Ucaller
    double *w       # eigenvalues of W_t, ascending
    double *d       # eigenvalues of M, ascending (MEG: log W's, not rounded
                    # through exp; GD: w)
    double *C       # sum of the instances (lower triangle)
    double *Wd      # dense MEG: W_t itself, for tr(W_t X_t)
    CappedState *st
    bitgen_t *rng
    double *buf     # the allocation below
    double *B       # n x n (stored M): scaled eigenvector rows for dsyrk
    double *z       # n
    double *mu      # n: eigenvalues of the updated matrix
    double *s       # n: capping scratch
    double *Y       # k x n: the sampled rows (dense)
    double *Z       # k x n: X @ Y^T (dense)
    int *sel        # k
    EigWork eig     # the eigen-solver chain, dsyevd first
    Rank1Work r1    # the rank-one update's work space (M not stored)


cdef inline double trace_lower(const double *A, const double *X, int n) noexcept nogil:
    # tr(A X) for symmetric A (lower triangle valid) and symmetric X (full)
    cdef int i
    cdef double acc = 0.0
    for i in range(n):
        acc += 2.0 * dot(i, A + i * n, X + i * n) + A[i * n + i] * X[i * n + i]
    return acc


cdef void reset(Ctx *c) noexcept nogil:
    # W = (k/n) I: the uniform mixture, where both algorithms start (an exact
    # eigendecomposition: U = I, one eigenvalue)
    cdef int n = c.n, i
    cdef double w0 = (<double> c.k) / n
    cdef double m0 = log(w0) if c.algo == ALGO_MEG else w0
    if c.M != NULL:
        memset(c.M, 0, n * n * sizeof(double))
        for i in range(n):
            c.M[i * n + i] = m0
    memset(c.U, 0, n * n * sizeof(double))
    for i in range(n):
        c.U[i * n + i] = 1.0
        c.w[i] = w0
        c.d[i] = m0
    if c.Wd != NULL:
        memset(c.Wd, 0, n * n * sizeof(double))
        for i in range(n):
            c.Wd[i * n + i] = w0


cdef double next_eta(Ctx *c) noexcept nogil:
    # the learning rate of the update after trial t ("auto" derivations in the
    # Python docstrings: MEG by the doubling trick, GD decaying with 1/sqrt(t))
    cdef int n = c.n, k = c.k, e
    cdef double t = c.st.t, epoch, tilde, d
    if not c.eta_auto:
        return c.eta_value
    if c.algo == ALGO_GD:
        d = sqrt(2.0 * (k if 2 * k <= n else n - k))
        return d / (c.st.max_frob * sqrt(t))
    frexp(t, &e)
    epoch = ldexp(1.0, e - 1)          # 2^j <= t < 2^(j+1)
    tilde = sqrt(k * log((<double> n) / k) / ((1.0 if c.kind == INSTANCE_VECTOR else k) * epoch))
    # eta X's eigenvalues stay <= 2 tilde <= 1 while the scale is <= 2 Lambda
    return (tilde if tilde < 0.5 else 0.5) / c.st.segment


cdef int rows_scaled(Ctx *c, const double *coef, int lo, int hi, int sign) noexcept nogil:
    # B's rows = sqrt(|coef_i|) U_i for i in [lo, hi) with sign * coef_i > 0
    # (U: the eigenvectors of the update just decomposed)
    cdef int i, r = 0, j, n = c.n
    cdef double f
    for i in range(lo, hi):
        if sign * coef[i] > 0.0:
            f = sqrt(sign * coef[i])
            for j in range(n):
                c.B[r * n + j] = f * c.U[i * n + j]
            r += 1
    return r


cdef int update_stored(Ctx *c, double eta, const double *x, int dense) noexcept nogil:
    # W_{t+1} from W_t and eta X_t with M stored: M + eta X_t decomposed afresh,
    # then corrected to the projection; returns OK or ERR_LAPACK
    cdef int n = c.n, k = c.k, i, m, r, npos, ncorr
    cdef double logc = 0.0, theta, wi
    if dense:
        axpy_upper(n, eta, x, c.M)
    else:
        syr_upper(n, eta, x, c.M, n)
    # W_t's eigenvectors have served (the trial is played): decompose in U,
    # dsyevd first (the fastest full solver measured), then the rest of the
    # chain, which does not fail on a finite matrix
    c.eig.fallbacks = 0
    if eig_all(&c.eig, c.eig_first, n, c.M, n, c.mu, c.U) != OK:
        return ERR_LAPACK
    c.st.eig_fallbacks += <long long> c.eig.fallbacks
    c.st.full += 1
    if c.algo == ALGO_MEG:
        # log W_{t+1} = min(0, mu + log c) in the new eigenbasis, which is
        # M + log c I minus the capped directions' excess: a rank-m (m < k)
        # correction instead of an O(n^3) rebuild
        m = entropy_cap(c.mu, n, k, c.s, &logc)
        for i in range(n):
            c.M[i * n + i] += logc
            wi = exp(c.mu[i] + logc)
            c.w[i] = 1.0 if (i >= n - m or wi > 1.0) else wi
            c.s[i] = c.mu[i] + logc if i >= n - m else 0.0
            c.d[i] = 0.0 if i >= n - m else c.mu[i] + logc
        r = rows_scaled(c, c.s, n - m, n, 1)
        syrk_upper(n, r, -1.0, c.B, 1.0, c.M)
        if c.Wd != NULL:
            r = rows_scaled(c, c.w, 0, n, 1)
            syrk_upper(n, r, 1.0, c.B, 0.0, c.Wd)
    else:
        theta = euclid_project(c.mu, n, k, c.s, c.w)
        memcpy(c.d, c.w, n * sizeof(double))
        npos = 0
        ncorr = 0
        for i in range(n):
            wi = c.w[i]
            # > 0 capped, < 0 clipped at 0; active directions keep mu - theta
            c.s[i] = c.mu[i] - theta - wi if (wi == 0.0 or wi == 1.0) else 0.0
            npos += wi > 0.0
            ncorr += c.s[i] != 0.0
        if npos <= ncorr:
            # W_{t+1} = sum_{w_i > 0} w_i e_i e_i^T: cheaper than the correction
            r = rows_scaled(c, c.w, 0, n, 1)
            syrk_upper(n, r, 1.0, c.B, 0.0, c.M)
            c.st.rebuilds += 1
        else:
            # W_{t+1} = M - theta I - sum_i s_i e_i e_i^T over the clipped i
            for i in range(n):
                c.M[i * n + i] -= theta
            r = rows_scaled(c, c.s, 0, n, 1)
            syrk_upper(n, r, -1.0, c.B, 1.0, c.M)
            r = rows_scaled(c, c.s, 0, n, -1)
            syrk_upper(n, r, 1.0, c.B, 1.0, c.M)
    return OK


cdef void project_spectrum(Ctx *c) noexcept nogil:
    # w and d from the eigenvalues mu (ascending) of the updated M: MEG caps
    # exp(mu) (log W = min(0, mu + log c), the capped at exactly 0); GD clips
    # mu - theta (W's eigenvalues are M's)
    cdef int n = c.n, i, m
    cdef double logc = 0.0, wi
    if c.algo == ALGO_MEG:
        m = entropy_cap(c.mu, n, c.k, c.s, &logc)
        for i in range(n):
            wi = exp(c.mu[i] + logc)
            c.w[i] = 1.0 if (i >= n - m or wi > 1.0) else wi
            c.d[i] = 0.0 if i >= n - m else c.mu[i] + logc
    else:
        euclid_project(c.mu, n, c.k, c.s, c.w)
        memcpy(c.d, c.w, n * sizeof(double))


cdef int decompose_afresh(Ctx *c, double eta, const double *x) noexcept nogil:
    # M + eta x x^T, M = U^T diag(d) U rebuilt (lower triangle, in the rank-one
    # work's H) from the decomposition, by the dsyevd chain into U and mu: the
    # drift of the rank-one updates (U's orthogonality) starts afresh
    cdef int n = c.n, i, j, r, sign
    cdef double f
    cdef double *A = c.r1.H
    cdef double *rows = c.r1.Q
    for i in range(n):
        if not isfinite(c.d[i]):
            # the rebuild below would skip it (by sign): a non-finite state
            # fails as the solvers fail on it
            return ERR_LAPACK
    memset(A, 0, <size_t> n * n * sizeof(double))
    for sign in range(-1, 2, 2):
        # M = sum_i d_i u_i u_i^T: dsyrk on the rows sqrt(|d_i|) u_i, by sign
        r = 0
        for i in range(n):
            if sign * c.d[i] > 0.0:
                f = sqrt(sign * c.d[i])
                for j in range(n):
                    rows[<size_t> r * n + j] = f * c.U[<size_t> i * n + j]
                r += 1
        syrk_upper(n, r, <double> sign, rows, 1.0, A)
    syr_upper(n, eta, x, A, n)
    c.eig.fallbacks = 0
    if eig_all(&c.eig, c.eig_first, n, A, n, c.mu, c.U) != OK:
        return ERR_LAPACK
    c.st.eig_fallbacks += <long long> c.eig.fallbacks
    c.st.full += 1
    c.st.since_full = 0
    return OK


cdef int update_spectral(Ctx *c, double eta, const double *x) noexcept nogil:
    # W_{t+1} from W_t and eta x x^T with M kept as (U, d): a rank-one update
    # of the decomposition, or every full_every-th update (and when the
    # secular solver fails) a full one; returns OK or ERR_LAPACK
    cdef int K = 0, code
    cdef double *tmp
    if c.st.since_full + 1 >= c.full_every:
        code = decompose_afresh(c, eta, x)
    else:
        code = rank1_update(&c.r1, c.n, c.U, c.d, x, eta, c.mu, &K)
        if code == OK:
            # the new rows are in the work's buffer: the two trade places
            tmp = c.U
            c.U = c.r1.Unew
            c.r1.Unew = tmp
            c.st.rank_one += 1
            c.st.block_sum += K
            c.st.since_full += 1
        else:
            c.st.rank_one_failed += 1
            code = decompose_afresh(c, eta, x)
    if code != OK:
        return code
    project_spectrum(c)
    return OK


cdef int update(Ctx *c, double eta, const double *x, int dense) noexcept nogil:
    # W_{t+1} from W_t and eta X_t; returns OK or ERR_LAPACK
    if c.stored:
        return update_stored(c, eta, x, dense)
    return update_spectral(c, eta, x)


cdef int trials(Ctx *c, const double *X, const double *scale, const double *frob,
                Py_ssize_t T, Py_ssize_t *done, Poll *pl) noexcept nogil:
    # Play T trials; stops early only between two trials (a signal), or within
    # one whose eigendecomposition failed (ERR_LAPACK: the caller's copies
    # are then half-updated and discarded)
    cdef int n = c.n, k = c.k, i, j, code
    cdef int dense = c.kind == INSTANCE_DENSE
    cdef Py_ssize_t t
    cdef const double *x
    cdef double g, realized, eta, mant
    # a trial's work in _work_poll.pxd's units (~1 ns), an upper bound: a
    # full eigendecomposition's O(n^3) (rank-one updates cost O(n^2))
    cdef double work = <double> n * n * n + 2e4
    cdef int e
    cdef bint meg_auto
    cdef CappedState *st = c.st
    for t in range(T):
        if poll_stop(pl, work):
            return ERR_INTERRUPTED
        x = X + t * n * (n if dense else 1)
        # play: expected gain tr(W_t X_t), and the gain of P_t sampled with u_t
        systematic_pick(c.w, n, k, st.u, c.sel)
        g = 0.0
        realized = 0.0
        if dense:
            g = trace_lower(c.Wd if c.algo == ALGO_MEG else c.M, x, n)
            for j in range(k):
                memcpy(c.Y + j * n, c.U + c.sel[j] * n, n * sizeof(double))
            realized = quad_rows(n, k, x, c.Y, c.Z)
            axpy_upper(n, 1.0, x, c.C)
        else:
            gemv_rows(n, n, 1.0, c.U, x, 0.0, c.z)
            for i in range(n):
                g += c.w[i] * c.z[i] * c.z[i]
            for j in range(k):
                realized += c.z[c.sel[j]] * c.z[c.sel[j]]
            syr_upper(n, 1.0, x, c.C, n)
        st.t += 1
        st.gain += g
        st.realized += realized
        if scale[t] > st.scale:
            st.scale = scale[t]
        if frob[t] > st.max_frob:
            st.max_frob = frob[t]
        # next decision
        mant = frexp(<double> st.t + 1.0, &e)
        meg_auto = c.algo == ALGO_MEG and c.eta_auto
        if meg_auto and mant == 0.5:
            # doubling trick: trial t + 1 = 2^j starts an epoch afresh, tuned
            # to the scale seen so far
            reset(c)
            st.since_full = 0
            st.restarts += 1
            st.segment = st.scale
        elif frob[t] > 0.0:
            if meg_auto and st.segment == 0.0:
                st.segment = scale[t]
            if meg_auto and scale[t] > 2.0 * st.segment:
                # a rate tuned to Lambda no longer bounds eta X: start this
                # epoch afresh at the new scale (no update with X_t, which the
                # old run played); the scales of such restarts more than
                # double each time, so they cost O(L) regret in all
                reset(c)
                st.since_full = 0
                st.scale_restarts += 1
                st.segment = scale[t]
            else:
                eta = next_eta(c)
                code = update(c, eta, x, dense)
                if code != OK:
                    return code
                st.eta = eta
        # the generator moves on by one uniform per trial, with the trial
        st.u = random_standard_uniform(c.rng)
        done[0] = t + 1
    return OK


cdef int check_capped_state(const CappedState *st) except -1:
    # the counters and running values as the trial loop relies on them: a
    # record edited by hand or unpickled from an edited file is refused
    # (ValueError naming the field), never used
    for field, count in (("t", st.t), ("restarts", st.restarts), ("rebuilds", st.rebuilds),
                         ("scale_restarts", st.scale_restarts),
                         ("eig_fallbacks", st.eig_fallbacks), ("full", st.full),
                         ("rank_one", st.rank_one), ("rank_one_failed", st.rank_one_failed),
                         ("since_full", st.since_full), ("block_sum", st.block_sum)):
        if count < 0:
            bad_field("state", field, count, "a count >= 0")
    for field, value in (("eta", st.eta), ("scale", st.scale), ("max_frob", st.max_frob),
                         ("segment", st.segment)):
        if not is_real(value, 0):
            bad_field("state", field, value, "a finite number >= 0")
    for field, value in (("gain", st.gain), ("realized", st.realized)):
        if not isfinite(value):
            bad_field("state", field, value, "a finite number")
    if not (st.u >= 0 and st.u < 1):
        bad_field("state", "u", st.u, "a uniform draw in [0, 1)")
    return 0


cdef int setup(Ctx *c, const CappedParams *p, double[:, ::1] M, double[:, ::1] U,
               double[::1] w, double[::1] d, double[:, ::1] C,
               double[:, ::1] Wd) except? -1:
    # the context over the caller's arrays, after checking their shapes
    cdef int n = U.shape[0]
    cdef bint stored
    memset(c, 0, sizeof(Ctx))
    if n < 1 or U.shape[1] != n or w.shape[0] != n or d.shape[0] != n:
        raise ValueError(f"U must be n x n and w, d of length n, got U "
                         f"({U.shape[0]}, {U.shape[1]}), w ({w.shape[0]},), d ({d.shape[0]},)")
    if not (p.algo == ALGO_MEG or p.algo == ALGO_GD) or not (
            p.kind == INSTANCE_VECTOR or p.kind == INSTANCE_DENSE) or not 1 <= p.k <= n or (
            not 0 <= p.eig_first <= 3) or p.full_every < 0:
        raise ValueError(f"params: unknown algorithm or instance kind, k = {p.k} "
                         f"outside [1, {n}], or full_every = {p.full_every} < 0")
    if not (p.eta_auto == 0 or p.eta_auto == 1):
        bad_field("params", "eta_auto", p.eta_auto, "0 or 1")
    if not (is_real(p.eta_value, 0) and (p.eta_value > 0 or p.eta_auto)):
        bad_field("params", "eta_value", p.eta_value, "a finite learning rate > 0")
    stored = p.kind == INSTANCE_DENSE or p.full_every == 0
    if stored and (M.shape[0] != n or M.shape[1] != n):
        raise ValueError(f"M must be n x n (dense instances, or full_every = 0), got "
                         f"({M.shape[0]}, {M.shape[1]})")
    if not stored and (M.shape[0] != 0 or M.shape[1] != 0):
        raise ValueError(f"M must be empty (0, 0) for vector instances with rank-one "
                         f"updates (full_every >= 1), got ({M.shape[0]}, {M.shape[1]})")
    if (C.shape[0] != n or C.shape[1] != n) and C.shape[0] != 0:
        raise ValueError(f"C must be n x n (or empty), got ({C.shape[0]}, {C.shape[1]})")
    if (Wd.shape[0] != 0 or p.kind == INSTANCE_DENSE and p.algo == ALGO_MEG) and (
            Wd.shape[0] != n or Wd.shape[1] != n):
        raise ValueError(f"Wd must be n x n for dense MEG (else empty), got "
                         f"({Wd.shape[0]}, {Wd.shape[1]})")
    c.n = n
    c.algo = p.algo
    c.kind = p.kind
    c.eta_auto = p.eta_auto
    c.eta_value = p.eta_value
    c.eig_first = p.eig_first
    c.k = p.k
    c.stored = stored
    c.full_every = p.full_every
    c.M = &M[0, 0] if stored else NULL
    c.U = &U[0, 0]
    c.Ucaller = c.U
    c.w = &w[0]
    c.d = &d[0]
    c.C = &C[0, 0] if C.shape[0] > 0 else NULL
    c.Wd = &Wd[0, 0] if Wd.shape[0] > 0 else NULL
    return OK


def run(const double[:, ::1] X, const double[::1] scale, const double[::1] frob,
        CappedState[::1] state, const CappedParams[::1] params, double[:, ::1] M,
        double[:, ::1] U, double[::1] w, double[::1] d, double[:, ::1] C,
        double[:, ::1] Wd, object capsule):
    """Play the trials of X: rows (vector instances) or, with params' kind
    dense, X of shape (T, n*n) holding full symmetric matrices; scale and
    frob are per trial the eigenvalue bound and ||X_t||_F. The state arrays
    are updated in place (the caller passes copies): M the kernel's matrix
    (MEG log W, GD W; n x n when stored, else (0, 0)), U, d its eigenvectors
    (rows) and eigenvalues, w W's eigenvalues, C the instances' sum, Wd dense
    MEG's W.

    Returns (code, done, exc): OK after all trials; ERR_INTERRUPTED after
    `done` whole trials (the arrays describe exactly those, the generator
    has moved on by one uniform each), with `exc` the exception a signal
    handler raised; ERR_NOMEM before any change; ERR_LAPACK if an
    eigendecomposition failed in trial done + 1 (the arrays are half-updated:
    discard them). The caller holds the bit generator's lock."""
    check_struct(state.base, STATE_DTYPE, "state")
    check_struct(params.base, PARAMS_DTYPE, "params")
    cdef Ctx c
    cdef int n, code
    cdef size_t square
    cdef Py_ssize_t T = X.shape[0], done = 0
    cdef Poll pl
    setup(&c, &params[0], M, U, w, d, C, Wd)
    check_capped_state(&state[0])
    n = c.n
    if c.C == NULL:
        raise ValueError("C must be n x n")
    if X.shape[1] != (n * n if c.kind == INSTANCE_DENSE else n):
        raise ValueError(f"X has {X.shape[1]} columns, expected "
                         f"{n * n if c.kind == INSTANCE_DENSE else n}")
    if scale.shape[0] != T or frob.shape[0] != T:
        raise ValueError(f"scale and frob must have {T} entries")
    if T == 0:
        return OK, 0, None
    c.st = &state[0]
    c.rng = <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")
    # the n x n rows for dsyrk only when M is stored; the rank-one updates
    # have their own work space (which the full decompositions borrow)
    square = <size_t> n * n if c.stored else 0
    c.buf = <double *> malloc((square + 3 * <size_t> n + 2 * <size_t> c.k * n)
                              * sizeof(double))
    c.sel = <int *> malloc(c.k * sizeof(int))
    try:
        if c.buf == NULL or c.sel == NULL or eig_work_init(&c.eig, n, n,
                                                           c.eig_first == EIG_EVD) != OK:
            return ERR_NOMEM, 0, None
        if not c.stored and rank1_work_init(&c.r1, n) != OK:
            return ERR_NOMEM, 0, None
        c.B = c.buf if c.stored else NULL
        c.z = c.buf + square
        c.mu = c.z + n
        c.s = c.mu + n
        c.Y = c.s + n
        c.Z = c.Y + c.k * n
        poll_init(&pl, &_hook)
        with nogil:
            code = trials(&c, &X[0, 0], &scale[0], &frob[0], T, &done, &pl)
            if c.U != c.Ucaller:
                memcpy(c.Ucaller, c.U, <size_t> n * n * sizeof(double))
        return code, done, (pending_exception() if code == ERR_INTERRUPTED else None)
    finally:
        free(c.buf); free(c.sel)
        eig_work_free(&c.eig)
        rank1_work_free(&c.r1)


def reset_state(const CappedParams[::1] params, double[:, ::1] M, double[:, ::1] U,
                double[::1] w, double[::1] d, double[:, ::1] Wd):
    """W = (k/n) I in the kernel's representation (MEG: log W): M (when
    stored), U = I, w = k/n, d = M's eigenvalues."""
    check_struct(params.base, PARAMS_DTYPE, "params")
    cdef Ctx c
    cdef double[:, ::1] C = np.zeros((0, 0))
    setup(&c, &params[0], M, U, w, d, C, Wd)
    reset(&c)
