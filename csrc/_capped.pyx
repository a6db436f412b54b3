# Online PCA over the capped simplex W = {W symmetric, 0 <= W <= I, tr W = k}:
# Matrix Exponentiated Gradient (MEG) and matrix Gradient Descent (GD), with
# their Bregman projections ("capping"), the Warmuth-Kuzmin mixture
# decomposition and a systematic sampler. The trial loop -- expected and
# sampled gain, update, eigendecomposition, projection -- runs here without
# the GIL.
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
# The state object, CappedState, owns two sets of state arrays (and a bit
# generator in each): a block or one-row call copies the live set into the
# other, plays its trials there, and commits by making that set the live one
# -- a single store, so a fork at any moment leaves the child a whole state,
# and a failed call (an eigendecomposition every routine refuses) leaves the
# live set untouched. The copy is O(n^2) a call against a trial's O(n^3)
# (O(n K^2) for a rank-one update).
from libc.math cimport sqrt, log, exp, frexp, ldexp, fma, fabs, isfinite
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memmove, memset
from cpython.pycapsule cimport PyCapsule_GetPointer

import numpy as np

from _blas cimport dot, gemv_rows, syr_upper, syrk_upper, axpy_upper, quad_rows
from _common cimport (bitgen_t, random_standard_uniform, OK, ERR_LAPACK, ERR_INTERRUPTED,
                      pending_exception)
from _eigen cimport EigWork, eig_work_init, eig_work_free, eig_all, EIG_EVD
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_quiet, poll_stop
from _simplex cimport euclid_project, entropy_cap, systematic_pick
from _rank1 cimport Rank1Work, rank1_work_init, rank1_work_free, rank1_update
from _owner cimport CallLock, lock_init, lock_free, lock_enter, lock_leave, sf_owner_init
from _pca_sizes cimport sumsq, vector_block_check, dense_block_check, dense_sizes, SIZE_OK

import numbers

from streamfit._kernels._pca_api import StateReader, bit_generator_text, refuse_version
from streamfit._kernels._pca import (_size_error, _note, _symmetric, _positive, _names,
                                     _Seed, _rows2d, _vector_row, _dense_block, _wrong_kind,
                                     _what, _integer, _finite_or_raise)

cpdef enum:
    ALGO_MEG = 0
    ALGO_GD = 1

cpdef enum:
    INSTANCE_VECTOR = 0
    INSTANCE_DENSE = 1


ctypedef struct Counters:
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


cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Tests: raise the real signal `signum` at the trial loop's poll number
    `polls` (one poll before each trial of a call, counted across calls);
    polls < 0 disarms."""
    arm_hook(&_hook, polls, signum)


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
    Counters *st
    bitgen_t *rng
    double *buf     # the allocation below
    double *B       # n x n (stored M): scaled eigenvector rows for dsyrk
    double *z       # n
    double *mu      # n: eigenvalues of the updated matrix
    double *s       # n: capping scratch
    double *Y       # k x n: the sampled rows (dense)
    double *Z       # k x n: X @ Y^T (dense)
    int *sel        # k
    EigWork *eig    # the eigen-solver chain, dsyevd first
    Rank1Work *r1   # the rank-one update's work space (M not stored)


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
    if eig_all(c.eig, c.eig_first, n, c.M, n, c.mu, c.U) != OK:
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
    if eig_all(c.eig, c.eig_first, n, A, n, c.mu, c.U) != OK:
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
        code = rank1_update(c.r1, c.n, c.U, c.d, x, eta, c.mu, &K)
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


cdef int trials(Ctx *c, const double *X, Py_ssize_t T, Py_ssize_t *done,
                Poll *pl) noexcept nogil:
    # Play T trials; stops early only between two trials (a signal), or within
    # one whose eigendecomposition failed (ERR_LAPACK: the state set played
    # on is then half-updated and dropped). Each instance's sizes (vector:
    # ||x||^2 for both; dense: a bound on ||X||_2 and ||X||_F) are computed as
    # its trial starts, as the caller's check computed them.
    cdef int n = c.n, k = c.k, i, j, code
    cdef int dense = c.kind == INSTANCE_DENSE
    cdef Py_ssize_t t
    cdef const double *x
    cdef double g, realized, eta, mant, scale, frob
    # a trial's work in _work_poll.pxd's units (~1 ns), an upper bound: a
    # full eigendecomposition's O(n^3) (rank-one updates cost O(n^2))
    cdef double work = <double> n * n * n + 2e4
    cdef int e
    cdef bint meg_auto
    cdef Counters *st = c.st
    for t in range(T):
        if poll_stop(pl, work):
            return ERR_INTERRUPTED
        x = X + t * n * (n if dense else 1)
        if dense:
            dense_sizes(n, x, &scale, &frob)
        else:
            scale = sumsq(n, x)
            frob = scale
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
        if scale > st.scale:
            st.scale = scale
        if frob > st.max_frob:
            st.max_frob = frob
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
        elif frob > 0.0:
            if meg_auto and st.segment == 0.0:
                st.segment = scale
            if meg_auto and scale > 2.0 * st.segment:
                # a rate tuned to Lambda no longer bounds eta X: start this
                # epoch afresh at the new scale (no update with X_t, which the
                # old run played); the scales of such restarts more than
                # double each time, so they cost O(L) regret in all
                reset(c)
                st.since_full = 0
                st.scale_restarts += 1
                st.segment = scale
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


# --- the state object ------------------------------------------------------------------

ALGOS = ("meg", "gd")
INSTANCES = ("vector", "dense")
FORMAT_VERSION = 1
# n x n float64 state, several copies in each of two sets: 2^15 is 8 GB each
MAX_FEATURES = 1 << 15

sf_owner_init()


cdef class _Set:
    # one set of state arrays and the bit generator that moves with them
    cdef object M, U, w, d, C, Wd, bitgen
    cdef Counters st

    cdef _Set clone_into(self, _Set other):
        # other = a copy of self (arrays copied in place, no allocation)
        np.copyto(other.M, self.M)
        np.copyto(other.U, self.U)
        np.copyto(other.w, self.w)
        np.copyto(other.d, self.d)
        np.copyto(other.C, self.C)
        np.copyto(other.Wd, self.Wd)
        other.bitgen.state = self.bitgen.state
        other.st = self.st
        return other


cdef _Set _new_set(int n, bint stored, bint dense_meg, bitgen):
    cdef _Set s = _Set.__new__(_Set)
    cdef object square = (n, n), empty = (0, 0)
    s.M = np.zeros(square if stored else empty)
    s.U = np.zeros((n, n))
    s.w = np.zeros(n)
    s.d = np.zeros(n)
    s.C = np.zeros((n, n))
    s.Wd = np.zeros(square if dense_meg else empty)
    s.bitgen = bitgen
    memset(&s.st, 0, sizeof(Counters))
    return s


cdef inline double *_p(a):
    cdef double[::1] flat
    if a.size == 0:
        return NULL
    flat = a.reshape(-1)
    return &flat[0]


cdef class CappedState:
    """The state of Matrix Exponentiated Gradient or matrix Gradient Descent
    over the capped simplex, and its trial loop.

    One object owns a run: the parameter W (MEG: log W; vector instances keep
    only its eigendecomposition U, d and W's eigenvalues w), the instances'
    sum, the counters, the uniform that samples the next projection, its own
    bit generators (the trials' and the estimators' ``sample_projection``'s, seeded from
    ``random_state``, whose generator is copied, never drawn from) and the
    work space of its eigendecompositions. :class:`streamfit.MatrixEGPCA` and
    :class:`streamfit.MatrixGDPCA` are this object and scikit-learn's
    conventions around it.

    Parameters
    ----------
    n : int >= 1
    k : int in [1, n]
    algo : {"meg", "gd"}
    instances : {"vector", "dense"}, default "vector"
    eta : "auto" or float > 0, default "auto"
        As the estimators' ``eta``.
    random_state : None, int, SeedSequence or numpy Generator
    feature_names : sequence of str or None
    full_every : int >= 0, default 1000
        Vector instances: a full decomposition every full_every-th update,
        rank-one updates in between; 0: every update decomposed afresh with
        the matrix stored (as dense instances always do).

    Notes
    -----
    A call plays its trials on a copy of the live state and commits them by
    making the copy live (one store: a fork at any moment leaves a whole
    state). A signal handler that raises stops it before a trial, committing
    the trials played; an eigendecomposition every routine refuses (only a
    non-finite parameter does that) leaves the state as it was.

    Examples
    --------
    >>> from streamfit.kernels import CappedState
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(300, 12, n_spikes=2, random_state=0)
    >>> state = CappedState(12, 2, algo="gd", random_state=0)
    >>> for x in X:
    ...     state.learn_one(x)
    >>> w = state.parameter_eigenvalues_
    >>> state.n_trials_, bool(abs(w.sum() - 2) < 1e-10 and w.max() <= 1)
    (300, True)
    """
    cdef CallLock _lock
    cdef readonly int n, k
    cdef int algo, kind, eta_auto, eig_first, stored
    cdef long long full_every
    cdef double eta_value
    cdef object _eta
    cdef _Set _a, _b
    cdef int cur                # which set is live: 0 (_a) or 1 (_b)
    cdef object _sample         # sample_projection's Generator
    cdef object _seed, _feature_names      # _seed: _pca.pyx's _Seed
    # work space, allocated once
    cdef EigWork eig
    cdef Rank1Work r1
    cdef double *buf
    cdef int *sel
    cdef bint has_eig, has_r1
    cdef bint _interrupted      # the last call stopped on a signal, trials kept

    def __cinit__(self, *args, **kwargs):
        lock_init(&self._lock)
        self.buf = NULL
        self.sel = NULL
        self.has_eig = False
        self.has_r1 = False

    def __dealloc__(self):
        free(self.buf)
        free(self.sel)
        if self.has_eig:
            eig_work_free(&self.eig)
        if self.has_r1:
            rank1_work_free(&self.r1)
        lock_free(&self._lock)

    def __init__(self, n, k, *, algo="meg", instances="vector", eta="auto", random_state=None,
                 feature_names=None, full_every=1000, eig_first=1):
        if algo not in ALGOS:
            raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
        self.algo = ALGOS.index(algo)
        n = _integer(n, "n", 1, 1 << 62)
        k = _integer(k, "n_components", 1, n, f"n_components must be in [1, n_features] = "
                                               f"[1, {n}] (n_features = {n}), got {k!r}")
        if n > MAX_FEATURES:
            raise ValueError(f"n_features = {n} is too large for {self._name()}: it keeps "
                             f"several n x n float64 matrices (at most {MAX_FEATURES} "
                             f"features)")
        if instances not in INSTANCES:
            raise ValueError(f"instances must be one of {INSTANCES}, got {instances!r}")
        self.n, self.k = n, k
        self.kind = INSTANCES.index(instances)
        self._set_eta(eta)
        self.eig_first = _integer(eig_first, "eig_first", 0, 3)
        self.full_every = _integer(full_every, "full_every", 0, 1 << 62)
        self.stored = self.kind == INSTANCE_DENSE or self.full_every == 0
        bitgen, self._seed = _Seed.own(random_state)
        self._feature_names = _names(feature_names, n)
        dense_meg = self.kind == INSTANCE_DENSE and self.algo == ALGO_MEG
        self._a = _new_set(n, self.stored, dense_meg, bitgen)
        self._b = _new_set(n, self.stored, dense_meg, type(bitgen)())
        self.cur = 0
        self._allocate()
        # the first decision: W = (k/n) I, the first trial's uniform, and the
        # sampler's own stream (auditing W never changes the projections played)
        cdef Ctx c = self._ctx(self._a)
        reset(&c)
        gen = np.random.Generator(bitgen)
        self._a.st.u = gen.random()
        self._sample = np.random.default_rng(int(gen.integers(2 ** 63)))

    cdef str _name(self):
        return "MatrixEGPCA" if self.algo == ALGO_MEG else "MatrixGDPCA"

    cdef _set_eta(self, eta):
        if isinstance(eta, str):
            if eta != "auto":
                raise ValueError(f"eta must be 'auto' or a positive float, got {eta!r}")
            self.eta_auto, self.eta_value, self._eta = 1, 0.0, "auto"
        else:
            self.eta_value = _positive(eta, "eta")
            self.eta_auto, self._eta = 0, eta

    cdef _allocate(self):
        cdef int n = self.n
        cdef size_t square = <size_t> n * n if self.stored else 0
        # the n x n rows for dsyrk only when M is stored; the rank-one updates
        # have their own work space (which the full decompositions borrow)
        self.buf = <double *> malloc((square + 3 * <size_t> n + 2 * <size_t> self.k * n)
                                     * sizeof(double))
        self.sel = <int *> malloc(self.k * sizeof(int))
        if self.buf == NULL or self.sel == NULL:
            raise MemoryError(f"{self._name()}: no memory for the work space (n = {n})")
        if eig_work_init(&self.eig, n, n, self.eig_first == EIG_EVD) != OK:
            eig_work_free(&self.eig)
            raise MemoryError(f"{self._name()}: no memory for the eigen-solver (n = {n})")
        self.has_eig = True
        if not self.stored:
            if rank1_work_init(&self.r1, n) != OK:
                raise MemoryError(f"{self._name()}: no memory for the rank-one updates")
            self.has_r1 = True

    cdef Ctx _ctx(self, _Set s):
        cdef Ctx c
        cdef int n = self.n
        memset(&c, 0, sizeof(Ctx))
        c.n, c.k, c.algo, c.kind = n, self.k, self.algo, self.kind
        c.eta_auto, c.eta_value, c.eig_first = self.eta_auto, self.eta_value, self.eig_first
        c.stored, c.full_every = self.stored, self.full_every
        c.M = _p(s.M)
        c.U = _p(s.U)
        c.Ucaller = c.U
        c.w = _p(s.w)
        c.d = _p(s.d)
        c.C = _p(s.C)
        c.Wd = _p(s.Wd)
        c.st = &s.st
        c.rng = <bitgen_t *> PyCapsule_GetPointer(s.bitgen.capsule, "BitGenerator")
        c.buf = self.buf
        c.B = self.buf if self.stored else NULL
        c.z = self.buf + (<size_t> n * n if self.stored else 0)
        c.mu = c.z + n
        c.s = c.mu + n
        c.Y = c.s + n
        c.Z = c.Y + self.k * n
        c.sel = self.sel
        c.eig = &self.eig
        c.r1 = &self.r1
        return c

    cdef _Set _live(self):
        return self._a if self.cur == 0 else self._b

    cdef int _enter(self) except -1:
        lock_enter(&self._lock, "CappedState")
        return 0

    # -- settings ------------------------------------------------------------------------
    def configure(self, *, full_every=None):
        """Vector instances: change the period of full decompositions (a
        period >= 1 for another: from the next update; between 0, which keeps
        the matrix, and >= 1, which keeps only its eigendecomposition, no)."""
        self._enter()
        try:
            if full_every is None:
                return
            value = _integer(full_every, "full_every", 0, 1 << 62)
            if self.kind == INSTANCE_VECTOR and (value == 0) != (self.full_every == 0):
                raise ValueError("_full_every changed since the first call (0 keeps the "
                                 "matrix, >= 1 only its eigendecomposition); fit() starts "
                                 "afresh")
            if self.kind == INSTANCE_VECTOR:
                self.full_every = value
        finally:
            lock_leave(&self._lock)

    # -- the calls -----------------------------------------------------------------------
    def learn(self, X):
        """Play one trial per row of X (vector instances), C-contiguous
        float64 of shape (T, n): gain tr(W_t x_t x_t^T) in expectation (and
        that of the sampled projection), then the update."""
        cdef const double[:, ::1] A
        self._enter()
        try:
            self._kind(INSTANCE_VECTOR, "X")
            if not (isinstance(X, np.ndarray) and X.dtype == np.float64):
                raise TypeError(f"X must be a C-contiguous float64 array of shape "
                                f"(T, {self.n}), got {_what(X)}")
            A = _rows2d(X, self.n, "X")
            return self._block(&A[0, 0] if A.shape[0] else NULL, A.shape[0], "X", True)
        finally:
            lock_leave(&self._lock)

    def learn_one(self, x):
        """Play one trial with the row x (a 1-D float64 array, or a sequence
        of n real numbers): :meth:`learn` on ``x[None]``, bit for bit."""
        cdef const double[::1] r
        self._enter()
        try:
            self._kind(INSTANCE_VECTOR, "x")
            r = _vector_row(x, self.n, self._name())
            self._block(&r[0], 1, "x", False)
        finally:
            lock_leave(&self._lock)

    def learn_dense(self, Xs):
        """Play one trial per matrix of Xs, C-contiguous float64 of shape
        (T, n, n), symmetric (checked) PSD (the caller's to check)."""
        cdef const double[:, :, ::1] A
        self._enter()
        try:
            self._kind(INSTANCE_DENSE, "Xs")
            A = _dense_block(Xs, self.n, self._name())
            return self._block(&A[0, 0, 0] if A.shape[0] else NULL, A.shape[0], "Xs", True)
        finally:
            lock_leave(&self._lock)

    cdef _kind(self, int kind, str name):
        if kind != self.kind:
            _wrong_kind(self.kind, kind, name, self._name())

    cdef _block(self, const double *X, Py_ssize_t T, str name, bint block):
        # (the lock held) check every instance, then play them on the spare
        # set and commit it
        cdef int res, code = OK
        cdef Py_ssize_t at = 0, done = 0
        cdef double top = 0.0, asym = 0.0
        cdef Ctx c
        cdef Poll pl
        cdef _Set live = self._live(), spare = self._b if self.cur == 0 else self._a
        self._interrupted = False
        with nogil:
            if self.kind == INSTANCE_DENSE:
                res = dense_block_check(self.n, X, T, &top, &at, &asym)
            else:
                res = vector_block_check(self.n, X, NULL, T, &top, &at)
        if res != SIZE_OK:
            _size_error(res, name, at, T, asym)
        self._check_range(name, top, T, live)
        if T == 0:
            return
        live.clone_into(spare)
        if self.has_r1:
            # the rank-one work's result rows start in its own buffer: each
            # update trades the buffer with the rows played on
            # (update_spectral), so after an odd number of updates -- or in a
            # child forked mid-call -- it points at a set's U, which this
            # call would then update onto itself
            self.r1.Unew = self.r1.H + <size_t> self.n * self.n
        c = self._ctx(spare)
        if block:
            poll_init(&pl, &_hook)
        else:
            poll_quiet(&pl, &_hook)
        with nogil:
            code = trials(&c, X, T, &done, &pl)
            if c.U != c.Ucaller:
                # the last rank-one update left the rows in the work's buffer
                memcpy(c.Ucaller, c.U, <size_t> self.n * self.n * sizeof(double))
        if code == ERR_LAPACK:
            raise np.linalg.LinAlgError(
                f"{self._name()}: every LAPACK routine of the eigen-solver chain failed "
                f"(dsyevd, dsyevr, dsyev, Jacobi) in trial {done + 1} of the call; the "
                f"estimator was left as it was before this call")
        self.cur = 1 - self.cur         # commit: one store
        if code == ERR_INTERRUPTED:
            self._interrupted = True
            exc = pending_exception()
            _note(exc, self._name(), done, T, spare.st.t)
            raise exc

    cdef _check_range(self, str name, double top, Py_ssize_t T, _Set live):
        cdef double t = <double> live.st.t, big = top
        if live.st.scale > big:
            big = live.st.scale
        if T and big > 1e300 / (4.0 * (t + T)):
            raise ValueError(f"{name} is too large for float64 arithmetic: the cumulative "
                             f"matrix would overflow; rescale the data")
        if not self.eta_auto and top > 0 and self.eta_value > 1e300 / top:
            raise ValueError(f"eta = {self._eta!r} is too large for this data: eta times the "
                             f"instances' scale overflows float64")

    # -- reading the state ----------------------------------------------------------------
    cdef object _sample_rows(self, _Set s, double u):
        cdef int[:, ::1] out = np.empty((1, self.k), dtype=np.intc)
        cdef double[::1] w = s.w
        with nogil:
            systematic_pick(&w[0], self.n, self.k, u, &out[0, 0])
        picked = np.asarray(out)[0]
        # largest weight first
        idx = picked[np.argsort(-s.w[picked], kind="stable")]
        return s.U[idx]

    @property
    def components_(self):
        """(k, n) orthonormal rows: the projection the next trial plays,
        sampled from W with the trial's own uniform."""
        self._enter()
        try:
            return self._sample_rows(self._live(), self._live().st.u)
        finally:
            lock_leave(&self._lock)

    def transform_one(self, x):
        """The coordinates of the row x on components_ (k,)."""
        r = _vector_row(x, self.n, self._name())
        out = self.components_ @ r
        # as LeaderState.transform_one: a NaN or inf in x is refused naming it
        # (x is read again only when the result is not finite)
        if not np.isfinite(out).all():
            _finite_or_raise(np.asarray(r), "x")
        return out

    def sample_projection_rows(self):
        """k orthonormal rows of a rank-k projection drawn from W with the
        sampler's own stream (it moves on by one uniform)."""
        self._enter()
        try:
            return self._sample_rows(self._live(), self._sample.random())
        finally:
            lock_leave(&self._lock)

    @property
    def parameter_eigenvalues_(self):
        """W's eigenvalues, ascending (a copy)."""
        self._enter()
        try:
            return self._live().w.copy()
        finally:
            lock_leave(&self._lock)

    @property
    def eigenvectors_(self):
        """W's eigenvectors as rows, ascending with parameter_eigenvalues_ (a copy)."""
        self._enter()
        try:
            return self._live().U.copy()
        finally:
            lock_leave(&self._lock)

    def parameter_matrix(self):
        """W (n x n)."""
        self._enter()
        try:
            s = self._live()
            return (s.U.T * s.w) @ s.U
        finally:
            lock_leave(&self._lock)

    def cumulative_matrix(self):
        """sum_t X_t (full, symmetric)."""
        self._enter()
        try:
            return _symmetric(self._live().C)
        finally:
            lock_leave(&self._lock)

    def captured(self, X):
        """sum_i x_i^T W x_i over the rows of X (float64, n columns)."""
        self._enter()
        try:
            s = self._live()
            Z = X @ s.U.T
            return float(np.einsum("ij,j,ij->", Z, s.w, Z))
        finally:
            lock_leave(&self._lock)

    @property
    def best_gain_(self):
        """lambda_{1:k}(sum_t X_t)."""
        from streamfit._kernels._linalg import eigh_top
        self._enter()
        try:
            s = self._live()
            if s.st.t == 0:
                return 0.0
            code, w, _, _, _ = eigh_top(_symmetric(s.C), self.k, False)
            if code != OK:
                raise np.linalg.LinAlgError("best_gain_: every LAPACK routine of the "
                                            "eigen-solver chain failed")
            return float(w.sum())
        finally:
            lock_leave(&self._lock)

    @property
    def regret_(self):
        return self.best_gain_ - self.cumulative_gain_

    cdef Counters _counters(self):
        lock_enter(&self._lock, "CappedState")
        try:
            return self._live().st
        finally:
            lock_leave(&self._lock)

    @property
    def n_trials_(self):
        return self._counters().t

    @property
    def cumulative_gain_(self):
        return self._counters().gain

    @property
    def realized_gain_(self):
        return self._counters().realized

    @property
    def eta_(self):
        return self._counters().eta

    @property
    def scale_(self):
        return self._counters().scale

    @property
    def max_frob_(self):
        return self._counters().max_frob

    @property
    def n_restarts_(self):
        cdef Counters s = self._counters()
        return s.restarts + s.scale_restarts

    @property
    def update_stats_(self):
        cdef Counters s = self._counters()
        return {"full": s.full, "rank_one": s.rank_one, "rank_one_failed": s.rank_one_failed,
                "mean_block": float(s.block_sum) / s.rank_one if s.rank_one else 0.0,
                "eig_fallbacks": s.eig_fallbacks}

    @property
    def rebuilds_(self):
        """GD updates that rebuilt W from its support instead of correcting it."""
        return self._counters().rebuilds

    @property
    def started(self):
        return True

    @property
    def interrupted(self):
        """Whether the last call was stopped by a signal (holding the trials
        played before it), rather than refused, failed or ended."""
        return bool(self._interrupted)

    @property
    def torn(self):
        return False            # commits are one store: a fork never tears the state

    @property
    def instances(self):
        return INSTANCES[self.kind]

    @property
    def algo(self):
        return ALGOS[self.algo]

    @property
    def eta(self):
        """The learning rate as set: "auto" or the number."""
        return self._eta

    @property
    def matrix_stored(self):
        """Whether the parameter's matrix is kept (dense instances, or
        full_every = 0), not only its eigendecomposition."""
        return bool(self.stored)

    @property
    def feature_names(self):
        return self._feature_names

    def same_random_state(self, random_state):
        return self._seed.same(random_state)

    def _link_random_state(self, random_state):
        self._seed.link(random_state)

    def random_state_repr(self):
        return repr(self._seed)

    # -- copies and pickling -------------------------------------------------------------
    def copy(self):
        """An independent copy (arrays, counters, bit generators)."""
        return CappedState.from_state(self.to_state())

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return (_rebuild, (FORMAT_VERSION, self.to_state()))

    def to_state(self):
        """The whole state as a dict of plain values (what pickling and the
        safe model format store), read back by :meth:`from_state`."""
        cdef Counters s
        self._enter()
        try:
            live = self._live()
            s = live.st
            return {
                "n": self.n, "k": self.k, "algo": ALGOS[self.algo],
                "instances": INSTANCES[self.kind],
                "eta": self._eta if isinstance(self._eta, str) else float(self._eta),
                "eig_first": self.eig_first, "full_every": self.full_every,
                "seed_kind": self._seed.kind, "seed": self._seed.value,
                "feature_names": None if self._feature_names is None
                else list(self._feature_names),
                "rng": bit_generator_text(live.bitgen),
                "sample_rng": bit_generator_text(self._sample.bit_generator),
                "t": s.t, "restarts": s.restarts, "rebuilds": s.rebuilds,
                "scale_restarts": s.scale_restarts, "eig_fallbacks": s.eig_fallbacks,
                "full": s.full, "rank_one": s.rank_one, "rank_one_failed": s.rank_one_failed,
                "since_full": s.since_full, "block_sum": s.block_sum, "eta_last": s.eta,
                "scale": s.scale, "max_frob": s.max_frob, "gain": s.gain,
                "realized": s.realized, "u": s.u, "segment": s.segment,
                "M": live.M.copy(), "U": live.U.copy(), "w": live.w.copy(),
                "d": live.d.copy(), "C": live.C.copy(), "Wd": live.Wd.copy(),
            }
        finally:
            lock_leave(&self._lock)

    @staticmethod
    def from_state(state):
        """A CappedState from :meth:`to_state`'s dict, every field checked: a
        ValueError naming the field for anything off."""
        cdef CappedState self = CappedState.__new__(CappedState)
        cdef Counters *s
        r = StateReader(state, "CappedState")
        n = r.integer("n", 1, MAX_FEATURES)
        k = r.integer("k", 1, n)
        self.n, self.k = n, k
        self.algo = ALGOS.index(r.choice("algo", ALGOS))
        self.kind = INSTANCES.index(r.choice("instances", INSTANCES))
        eta = r.get("eta")
        try:
            self._set_eta(eta)
        except (TypeError, ValueError) as exc:
            raise r.error("eta", f"is refused: {exc}") from None
        self.eig_first = r.integer("eig_first", 0, 3)
        self.full_every = r.integer("full_every")
        self.stored = self.kind == INSTANCE_DENSE or self.full_every == 0
        self._seed = _Seed.read(r)
        self._feature_names = r.names("feature_names", n)
        bitgen = r.bit_generator("rng")
        self._sample = np.random.Generator(r.bit_generator("sample_rng"))
        dense_meg = self.kind == INSTANCE_DENSE and self.algo == ALGO_MEG
        live = _new_set(n, self.stored, dense_meg, bitgen)
        s = &live.st
        s.t = r.integer("t", 0, 2 ** 53)
        s.restarts = r.integer("restarts")
        s.rebuilds = r.integer("rebuilds")
        s.scale_restarts = r.integer("scale_restarts")
        s.eig_fallbacks = r.integer("eig_fallbacks")
        s.full = r.integer("full")
        s.rank_one = r.integer("rank_one")
        s.rank_one_failed = r.integer("rank_one_failed")
        s.since_full = r.integer("since_full")
        s.block_sum = r.integer("block_sum")
        s.eta = r.real("eta_last", 0)
        s.scale = r.real("scale", 0)
        s.max_frob = r.real("max_frob", 0)
        s.gain = r.real("gain")
        s.realized = r.real("realized")
        s.u = r.real("u", 0)
        if not s.u < 1:
            raise r.error("u", f"is {s.u!r}, expected a uniform draw in [0, 1)")
        s.segment = r.real("segment", 0)
        square = (n, n)
        live.M = r.array("M", square if self.stored else (0, 0))
        live.U = r.array("U", square)
        live.w = r.array("w", (n,))
        live.d = r.array("d", (n,))
        live.C = r.array("C", square)
        live.Wd = r.array("Wd", square if dense_meg else (0, 0))
        r.done()
        if s.t > 0 and np.abs(live.U.T @ live.U - np.eye(n)).max() > 1e-6:
            raise r.error("U", "columns are not orthonormal")
        if (live.w < -1e-9).any() or (live.w > 1 + 1e-9).any() or \
                abs(float(live.w.sum()) - k) > 1e-6 * k:
            raise r.error("w", "is not in the capped simplex (0 <= w <= 1, sum k)")
        self._a = live
        self._b = _new_set(n, self.stored, dense_meg, type(bitgen)())
        self.cur = 0
        self._allocate()
        return self


def _rebuild(version, state):
    """Unpickling: a CappedState from its format version and state dict."""
    if version != FORMAT_VERSION:
        raise refuse_version("CappedState", version, FORMAT_VERSION)
    return CappedState.from_state(state)


def _plant(CappedState state, str name, Py_ssize_t i, double value):
    """Tests: set entry i (flat) of the live set's array `name` (M, d, U) to a
    value no input can put there, to run the eigen-solver chain's failure."""
    cdef _Set live = state._live()
    arrays = {"M": live.M, "U": live.U, "w": live.w, "d": live.d, "C": live.C, "Wd": live.Wd}
    arrays[name].reshape(-1)[i] = value
