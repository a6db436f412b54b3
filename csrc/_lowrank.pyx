# Online low-rank matrix regression (quantile or least squares) by Riemannian
# sub-gradient descent on the manifold of rank-r matrices: Section 5 of
# Shen, Xia & Zhou, "Online Quantile Regression", JMLR 2025. One state object,
# LowRankState, owns the iterate, the schedule's records, its residual window
# and every work space; the estimator (streamfit.lowrank) drives it.
#
# The iterate is M = U^T diag(s) V with U (r, d1), V (r, d2) C-order arrays
# whose rows are the singular vectors (column-major d1 x r and d2 x r
# matrices for BLAS/LAPACK). One sample's step: the residual y - <X, M>, the
# sub-gradient G = g X, its projection on the tangent space at M,
# P_T(G) = U U^T G + G V V^T - U U^T G V V^T, a step, and the retraction to
# rank r through the factored form
#     M - eta P_T(G) = [U Qu] K [V Qv]^T,   K (2r x 2r, or (r+1) x (r+1)),
# an SVD of the small core K and two products with its singular vectors:
# never a d1 x d2 SVD once M has rank r. Rank-one sensing (X = a b^T, and
# matrix completion, X = e_i e_j^T) costs O((d1 + d2) r^2) a step; dense X
# costs O(d1 d2 r) (reading X).
#
# The core's SVD is a one-sided Jacobi SVD (core_svd): K is the diagonal of
# the current singular values plus a perturbation of the step's size, so a
# few sweeps make its columns orthogonal; LAPACK's dgesvd on a 6 x 6 or
# 10 x 10 matrix cost more than the rest of a rank-one step (its set-up, not
# its arithmetic). gesvd remains the fallback should Jacobi not converge.
#
# A rank-deficient iterate (the start, M = 0) has zero rows in U and V (and
# zero singular values). Its step uses the projection on the tangent cone of
# the rank <= r matrices (Schneider & Uschmajew 2015): the tangent part at
# the rank-k point plus the best rank-(r - k) part of (I - UU^T) G (I - VV^T).
# For rank-one X that part is a rank-one matrix whose factors complete the
# basis; for dense X it takes a d1 x d2 SVD, so only while M has rank < r
# (generically the first update only).
#
# The loss, the stepsize schedule and the state's bookkeeping are the vector
# family's single-sample row, the same code (quantile_row, cimported from
# _qr_schedule.pxd, records included; no intercept), with d the manifold's
# dimension d_eff = r (d1 + d2 - r) and ||x||^2 standing for
# ||P_T X||^2 ~ d_eff ||X||^2 / (d1 d2), so that Cl is the mean eigenvalue of
# E[vec X vec X^T] as in the vector case. tests/lowrank checks that it gives
# the same stepsizes as streamfit._kernels._quantile.schedule_step.
#
# Faults (../notes/STATE_OBJECTS.md): a block call runs on spare buffers with
# the GIL released, polling for signals, and commits by swapping pointers; a
# one-row call holds the GIL throughout and commits the same way. Each step
# reads one set of factors and writes another (three sets: the live one and
# two spares to alternate between), so the live state is never written
# before a commit and no factor is ever copied to make a call safe.
import numpy as np

from cpython.exc cimport PyErr_CheckSignals
from libc.math cimport fabs, sqrt, isfinite, NAN
from libc.float cimport DBL_MAX, DBL_EPSILON
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy, memset

from _common cimport (OK, ERR_NOMEM, ERR_LAPACK, ERR_INTERRUPTED, ERR_NONFINITE,
                      ERR_BADINPUT, ERR_SCALE, ERR_LAYOUT, pending_exception)
from _qr_schedule cimport (SGDState, SGDParams, KIND_CONSTANT, KIND_INVERSE_TIME,
                           KIND_STATISTICAL, MODE_SINGLE, LOSS_CHECK, LOSS_SQUARED,
                           schedule_enums, record_dtypes, default_params, NO_UPDATE,
                           quantile_row)
from _records cimport check_sgd_records, check_window, MAX_COUNT
from _owner cimport CallLock, lock_init, lock_free, lock_enter, lock_leave, sf_owner_init
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_quiet, \
    poll_stop, poll_final
cimport _blas

# Schedule kinds, losses and modes (the records' fields) for Python.
globals().update(schedule_enums())

sf_owner_init()
cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook
cdef bint _lapack_only = False              # test hook: the core's SVD by dgesvd only

#: the layout of LowRankState.to_state(); a pickle or saved state of another
#: version is refused
FORMAT_VERSION = 1

STATE_DTYPE, PARAMS_DTYPE = record_dtypes()
STATE_FIELDS = tuple(STATE_DTYPE.names)
PARAMS_FIELDS = tuple(PARAMS_DTYPE.names)


def _interrupt_at(long long polls, int signum):
    """Test hook: poll before every sample and raise the signal ``signum``
    with C's raise() at poll number ``polls`` (0-based) of the main thread,
    once; then poll as usual again. The signal's Python handler decides what
    happens (a raising handler stops the loop). ``polls=-1`` disarms."""
    arm_hook(&_hook, polls, signum)


def _core_svd_by_lapack(bint on):
    """Test hook: with ``on``, the core's SVD skips Jacobi and takes the
    fallback (LAPACK's dgesvd), so that tests run both paths."""
    global _lapack_only
    _lapack_only = on


# ----------------------------------------------------------------------------
# Work space and the step.

cdef struct LR:
    Py_ssize_t d1, d2, r, m          # m: the core's order, r + 1 (rank one) or 2r (dense)
    double *alpha                    # (2r,) U a, then the core's coefficients
    double *beta                     # (2r,) V b
    double *tmp                      # (2r,)
    double *ap                       # (d1,) a - U U^T a
    double *bp                       # (d2,)
    double *ea                       # (d1,) e_i of a completion sample, zero between samples
    double *eb                       # (d2,) e_j
    double *Ue                       # (2r, d1): [U; Qu], column-major d1 x m
    double *Ve                       # (2r, d2)
    double *K                        # (2r, 2r) the core, column-major; Jacobi's A = K Z
    double *K0                       # (2r, 2r) a copy of K for the gesvd fallback
    double *Z                        # (2r, 2r) right singular vectors (columns)
    double *Wr                       # (2r, r) the top left singular vectors (columns)
    double *Zr                       # (2r, r) the top right ones
    double *sv                       # (2r,) singular values (Jacobi's column norms)
    Py_ssize_t *perm                 # (2r + 2,) columns by descending value; Jacobi's rounds
    double *rot                      # (3r + 3,) a Jacobi round's rotations
    double *work                     # LAPACK work space (fallback SVD; dense QRs)
    _blas.blas_int lwork
    # dense only (dense_init, on the first dense sample)
    bint dense
    double *B                        # (r, d1): X V, then (I - UU^T) X V
    double *A                        # (r, d2): X^T U, then (I - VV^T) X^T U
    double *C                        # (r, r): U^T X V
    double *R                        # (r, r)
    double *T                        # (r, r) re-orthogonalisation coefficients
    double *qtau                     # (r,)
    double *Y                        # (d1, d2) the rank-deficient start's residual part
    double *ysv                      # min(d1, d2)
    double *yu                       # (min, d2)
    double *yvt                      # (d1, min) column-major min x d1
    double *Mfull                    # (d1, d2) M for predict on dense X (lazily)


cdef int lr_init(LR *m, Py_ssize_t d1, Py_ssize_t d2, Py_ssize_t r) noexcept nogil:
    # The work space every form needs. lr_free is safe on a partial init.
    cdef Py_ssize_t mm = 2 * r
    cdef double q = 0.0
    memset(m, 0, sizeof(LR))
    m.d1, m.d2, m.r = d1, d2, r
    m.alpha = <double *> malloc(mm * sizeof(double))
    m.beta = <double *> malloc(mm * sizeof(double))
    m.tmp = <double *> malloc(mm * sizeof(double))
    m.ap = <double *> malloc(d1 * sizeof(double))
    m.bp = <double *> malloc(d2 * sizeof(double))
    m.ea = <double *> calloc(d1, sizeof(double))
    m.eb = <double *> calloc(d2, sizeof(double))
    m.Ue = <double *> malloc(mm * d1 * sizeof(double))
    m.Ve = <double *> malloc(mm * d2 * sizeof(double))
    m.K = <double *> malloc(mm * mm * sizeof(double))
    m.K0 = <double *> malloc(mm * mm * sizeof(double))
    m.Z = <double *> malloc(mm * mm * sizeof(double))
    m.Wr = <double *> malloc(mm * r * sizeof(double))
    m.Zr = <double *> malloc(mm * r * sizeof(double))
    m.sv = <double *> malloc(mm * sizeof(double))
    m.perm = <Py_ssize_t *> malloc((mm + 2) * sizeof(Py_ssize_t))
    m.rot = <double *> malloc((3 * r + 3) * sizeof(double))
    if (m.alpha == NULL or m.beta == NULL or m.tmp == NULL or m.ap == NULL or m.bp == NULL
            or m.ea == NULL or m.eb == NULL or m.Ue == NULL or m.Ve == NULL or m.K == NULL or m.K0 == NULL or m.Z == NULL
            or m.Wr == NULL or m.Zr == NULL or m.sv == NULL or m.perm == NULL
            or m.rot == NULL):
        return ERR_NOMEM
    # the fallback SVD's work space, for the largest core (2r x 2r)
    _blas.gesvd_thin(<_blas.blas_int> mm, <_blas.blas_int> mm, m.K, <_blas.blas_int> mm,
                     m.sv, m.Wr, <_blas.blas_int> mm, m.Z, <_blas.blas_int> mm, &q, -1)
    m.lwork = <_blas.blas_int> q if q > 1 else 1
    m.work = <double *> malloc(m.lwork * sizeof(double))
    if m.work == NULL:
        return ERR_NOMEM
    return OK


cdef int dense_init(LR *m) noexcept nogil:
    # The dense form's buffers, once (forms may be mixed between calls).
    cdef Py_ssize_t d1 = m.d1, d2 = m.d2, r = m.r, mn = d1 if d1 < d2 else d2, k, dd
    cdef double q = 0.0
    cdef _blas.blas_int lw = m.lwork
    cdef double *grown
    if m.dense:
        return OK
    m.B = <double *> malloc(r * d1 * sizeof(double))
    m.A = <double *> malloc(r * d2 * sizeof(double))
    m.C = <double *> malloc(r * r * sizeof(double))
    m.R = <double *> malloc(r * r * sizeof(double))
    m.T = <double *> malloc(r * r * sizeof(double))
    m.qtau = <double *> malloc(r * sizeof(double))
    m.Y = <double *> malloc(d1 * d2 * sizeof(double))
    m.ysv = <double *> malloc(mn * sizeof(double))
    m.yu = <double *> malloc(mn * d2 * sizeof(double))
    m.yvt = <double *> malloc(mn * d1 * sizeof(double))
    if (m.B == NULL or m.A == NULL or m.C == NULL or m.R == NULL or m.T == NULL
            or m.qtau == NULL or m.Y == NULL or m.ysv == NULL or m.yu == NULL
            or m.yvt == NULL):
        return ERR_NOMEM
    for k in range(2):
        dd = d1 if k == 0 else d2
        _blas.geqrf(<_blas.blas_int> dd, <_blas.blas_int> r, m.B, <_blas.blas_int> dd,
                    m.qtau, &q, -1)
        lw = max(lw, <_blas.blas_int> q)
        _blas.orgqr(<_blas.blas_int> dd, <_blas.blas_int> r, m.B, <_blas.blas_int> dd,
                    m.qtau, &q, -1)
        lw = max(lw, <_blas.blas_int> q)
    _blas.gesvd_thin(<_blas.blas_int> d2, <_blas.blas_int> d1, m.Y, <_blas.blas_int> d2,
                     m.ysv, m.yu, <_blas.blas_int> d2, m.yvt, <_blas.blas_int> mn, &q, -1)
    lw = max(lw, <_blas.blas_int> q)
    if lw > m.lwork:
        grown = <double *> malloc(lw * sizeof(double))
        if grown == NULL:
            return ERR_NOMEM
        free(m.work)
        m.work = grown
        m.lwork = lw
    m.dense = True
    return OK


cdef void lr_free(LR *m) noexcept nogil:
    free(m.alpha); free(m.beta); free(m.tmp); free(m.ap); free(m.bp); free(m.ea); free(m.eb); free(m.Ue)
    free(m.Ve); free(m.K); free(m.K0); free(m.Z); free(m.Wr); free(m.Zr); free(m.sv)
    free(m.perm); free(m.rot); free(m.work)
    free(m.B); free(m.A); free(m.C); free(m.R); free(m.T); free(m.qtau); free(m.Y)
    free(m.ysv); free(m.yu); free(m.yvt); free(m.Mfull)
    memset(m, 0, sizeof(LR))


cdef inline double norm2(Py_ssize_t n, const double *x) noexcept nogil:
    # ||x|| as sqrt(x . x): OpenBLAS's dnrm2 scales as it goes and cost 8% of
    # a rank-one step; its care matters only when x . x leaves float64's
    # range, where dnrm2 takes over
    cdef double q = _blas.dot(<_blas.blas_int> n, x, x)
    if q < 1e300 and q > 1e-300:
        return sqrt(q)
    return _blas.nrm2(<_blas.blas_int> n, x)


cdef inline Py_ssize_t active_rank(const double *s, Py_ssize_t r) noexcept nogil:
    cdef Py_ssize_t k = 0
    while k < r and s[k] > 0:
        k += 1
    return k


cdef bint jacobi(double *A, double *Z, double *nrm, Py_ssize_t *pl, double *rot,
                 Py_ssize_t n) noexcept nogil:
    # One-sided (Hestenes) Jacobi on the column-major n x n A: plane
    # rotations of column pairs until every pair is orthogonal to working
    # precision; A <- A Z with Z (orthogonal, accumulated from I) the right
    # singular vectors, the column norms of A the singular values. The
    # rotation is Rutishauser's (the smaller angle, computed without
    # cancellation); the squared column norms are carried through each sweep
    # (a' = a - t g, b' = b + t g, as LAPACK's dgesvj does) and recomputed
    # at its start. The pairs come in the round-robin order of a tournament:
    # each round's n/2 pairs are disjoint, so their inner products and
    # angles (a chain of a division and two square roots each) are computed
    # side by side before any column moves -- the cyclic order rotates one
    # pair at a time and waits on each chain. pl: 2 (n + 1) / 2 indices,
    # rot: 3 (n + 1) / 2 values. False if 60 sweeps do not converge (never
    # seen).
    cdef Py_ssize_t i, j, k, q, sweep, rnd, m = n + (n & 1), half = m // 2, last
    cdef double a, b, g, zeta, t, c, sn, x, y
    cdef double tol = n * DBL_EPSILON
    cdef double *ai
    cdef double *aj
    cdef double *zi
    cdef double *zj
    cdef bint rotated
    memset(Z, 0, n * n * sizeof(double))
    for i in range(n):
        Z[i + i * n] = 1.0
    for sweep in range(60):
        for j in range(n):
            a = 0.0
            for k in range(n):
                a += A[k + j * n] * A[k + j * n]
            nrm[j] = a
        for i in range(m):
            pl[i] = i            # index n (odd n): a bye
        rotated = False
        for rnd in range(m - 1):
            # the round's angles: rot[3q] = c, rot[3q + 1] = s, rot[3q + 2] = t g
            for q in range(half):
                i = pl[q]
                j = pl[m - 1 - q]
                rot[3 * q] = 1.0
                rot[3 * q + 1] = 0.0
                rot[3 * q + 2] = 0.0
                if i >= n or j >= n:
                    continue
                ai = A + i * n
                aj = A + j * n
                g = 0.0
                for k in range(n):
                    g += ai[k] * aj[k]
                a = nrm[i]
                b = nrm[j]
                x = b - a
                if a < 1e150 and b < 1e150:
                    if not (fabs(g) > tol * sqrt(a * b)):
                        continue
                    # t = sign(b - a) 2g / (|b - a| + sqrt((b - a)^2 + 4 g^2)):
                    # Rutishauser's tan of the smaller angle, one division
                    t = 2.0 * g / (fabs(x) + sqrt(x * x + 4.0 * g * g))
                    if x < 0:
                        t = -t
                else:
                    # norms near float64's range: the same through zeta
                    if not (fabs(g) > tol * sqrt(a) * sqrt(b)):
                        continue
                    zeta = x / (2.0 * g)
                    if fabs(zeta) > 1e150:
                        t = 0.5 / zeta
                    else:
                        t = 1.0 / (fabs(zeta) + sqrt(1.0 + zeta * zeta))
                        if zeta < 0:
                            t = -t
                c = 1.0 / sqrt(1.0 + t * t)
                rot[3 * q] = c
                rot[3 * q + 1] = c * t
                rot[3 * q + 2] = t * g
            # the round's rotations
            for q in range(half):
                sn = rot[3 * q + 1]
                if sn == 0.0:
                    continue
                rotated = True
                c = rot[3 * q]
                i = pl[q]
                j = pl[m - 1 - q]
                ai = A + i * n
                aj = A + j * n
                zi = Z + i * n
                zj = Z + j * n
                for k in range(n):
                    # (a_i, a_j) <- (c a_i - s a_j, s a_i + c a_j), and Z's columns
                    x = ai[k]
                    y = aj[k]
                    ai[k] = c * x - sn * y
                    aj[k] = sn * x + c * y
                    x = zi[k]
                    y = zj[k]
                    zi[k] = c * x - sn * y
                    zj[k] = sn * x + c * y
                nrm[i] -= rot[3 * q + 2]
                nrm[j] += rot[3 * q + 2]
            # the next round: player 0 stays, the others move one seat on
            last = pl[m - 1]
            for q in range(m - 1, 1, -1):
                pl[q] = pl[q - 1]
            pl[1] = last
        if not rotated:
            return True
    return False


cdef int core_svd(LR *m, Py_ssize_t mm) noexcept nogil:
    # The top r singular triplets of the core K (mm x mm, column-major,
    # destroyed): sv[0..r) descending, their left vectors in Wr and right
    # ones in Zr (mm x r, columns), zero columns for singular values at
    # rounding level (so that the iterate's rank is what its nonzero s say).
    cdef Py_ssize_t i, j, k, r = m.r, best
    cdef _blas.blas_int info
    cdef double tol, nk
    memcpy(m.K0, m.K, mm * mm * sizeof(double))
    if not _lapack_only and jacobi(m.K, m.Z, m.sv, m.perm, m.rot, mm):
        for j in range(mm):
            nk = 0.0
            for i in range(mm):
                nk += m.K[i + j * mm] * m.K[i + j * mm]
            m.sv[j] = sqrt(nk)
            m.perm[j] = j
        # the r largest first (selection: r and mm are small)
        for k in range(r):
            best = k
            for j in range(k + 1, mm):
                if m.sv[m.perm[j]] > m.sv[m.perm[best]]:
                    best = j
            m.perm[k], m.perm[best] = m.perm[best], m.perm[k]
        tol = m.sv[m.perm[0]] * mm * DBL_EPSILON
        for k in range(r):
            j = m.perm[k]
            nk = m.sv[j]
            if nk > tol:
                for i in range(mm):
                    m.Wr[i + k * mm] = m.K[i + j * mm] / nk
                memcpy(m.Zr + k * mm, m.Z + j * mm, mm * sizeof(double))
            else:
                nk = 0.0
                memset(m.Wr + k * mm, 0, mm * sizeof(double))
                memset(m.Zr + k * mm, 0, mm * sizeof(double))
            m.tmp[k] = nk
        memcpy(m.sv, m.tmp, r * sizeof(double))
        return OK
    # fallback: LAPACK's Golub-Kahan SVD of the saved core (Z holds VT)
    info = _blas.gesvd_thin(<_blas.blas_int> mm, <_blas.blas_int> mm, m.K0,
                            <_blas.blas_int> mm, m.sv, m.K, <_blas.blas_int> mm, m.Z,
                            <_blas.blas_int> mm, m.work, m.lwork)
    if info != 0:
        return ERR_LAPACK
    tol = m.sv[0] * mm * DBL_EPSILON
    for k in range(r):
        if m.sv[k] > tol:
            memcpy(m.Wr + k * mm, m.K + k * mm, mm * sizeof(double))
            for i in range(mm):
                m.Zr[i + k * mm] = m.Z[k + i * mm]
        else:
            m.sv[k] = 0.0
            memset(m.Wr + k * mm, 0, mm * sizeof(double))
            memset(m.Zr + k * mm, 0, mm * sizeof(double))
    return OK


cdef int retract(LR *m, Py_ssize_t mm, double *U2, double *s2, double *V2) noexcept nogil:
    # Ue K Ve^T (Ue: d1 x mm, Ve: d2 x mm, K: mm x mm, column-major) to its
    # best rank-r approximation: U2 = Ue W_r, s2 = sv_r, V2 = Ve Z_r.
    cdef Py_ssize_t r = m.r
    cdef int code = core_svd(m, mm)
    if code != OK:
        return code
    _blas.gemm(b'N', b'N', <_blas.blas_int> m.d1, <_blas.blas_int> r, <_blas.blas_int> mm,
               1.0, m.Ue, <_blas.blas_int> m.d1, m.Wr, <_blas.blas_int> mm, 0.0, U2,
               <_blas.blas_int> m.d1)
    _blas.gemm(b'N', b'N', <_blas.blas_int> m.d2, <_blas.blas_int> r, <_blas.blas_int> mm,
               1.0, m.Ve, <_blas.blas_int> m.d2, m.Zr, <_blas.blas_int> mm, 0.0, V2,
               <_blas.blas_int> m.d2)
    memcpy(s2, m.sv, r * sizeof(double))
    return OK


cdef inline double complement(const double *Q, Py_ssize_t r, Py_ssize_t d, const double *x,
                              double nx, double *coef, double *out, double *tmp) noexcept nogil:
    # out = x - Q^T coef with coef = Q x given (orthonormal rows Q, zero rows
    # allowed); once more (coef += the correction) when the first pass
    # cancelled most of x (Daniel-Gragg-Kaufman-Stewart: below 1/sqrt(2) of
    # ||x||), which makes out orthogonal to Q to working precision. ||out||.
    cdef Py_ssize_t k
    cdef double n
    memcpy(out, x, d * sizeof(double))
    _blas.gemv_rows_t(<_blas.blas_int> r, <_blas.blas_int> d, -1.0, Q, coef, 1.0, out)
    n = norm2(d, out)
    if n < 0.7071067811865476 * nx:
        _blas.gemv_rows(<_blas.blas_int> r, <_blas.blas_int> d, 1.0, Q, out, 0.0, tmp)
        _blas.gemv_rows_t(<_blas.blas_int> r, <_blas.blas_int> d, -1.0, Q, tmp, 1.0, out)
        for k in range(r):
            coef[k] += tmp[k]
        n = norm2(d, out)
    return n


cdef inline void unit(const double *x, Py_ssize_t d, double nx, double *out) noexcept nogil:
    # out = x / nx (0 when nx is 0), by one reciprocal
    cdef Py_ssize_t i
    cdef double inv = 1.0 / nx if nx > 0 else 0.0
    for i in range(d):
        out[i] = x[i] * inv


cdef int rank1_step(LR *m, const double *U, const double *s, const double *V,
                    const double *a, const double *b, double na0, double nb0, double c,
                    double *U2, double *s2, double *V2) noexcept nogil:
    # M2 = SVD_r(M + c P(a b^T)), P the projection on the tangent space (the
    # tangent cone while rank(M) < r); alpha, beta hold U a, V b (from the
    # prediction). na0, nb0: ||a||, ||b||. With a_p = (I - UU^T) a, b_p alike,
    #   M + c P(a b^T) = [U, a_p/|a_p|] K [V, b_p/|b_p|]^T,
    #   K = [[diag(s) + c alpha beta^T, c |b_p| alpha], [c |a_p| beta^T, 0]].
    cdef Py_ssize_t d1 = m.d1, d2 = m.d2, r = m.r, mm = r + 1, i, j, k
    cdef double na, nb
    na = complement(U, r, d1, a, na0, m.alpha, m.ap, m.tmp)
    nb = complement(V, r, d2, b, nb0, m.beta, m.bp, m.tmp)
    # parts at rounding level: a (or b) lies in the basis' span
    if not (na > 1e-13 * na0):
        na = 0.0
    if not (nb > 1e-13 * nb0):
        nb = 0.0
    memcpy(m.Ue, U, r * d1 * sizeof(double))
    memcpy(m.Ve, V, r * d2 * sizeof(double))
    k = active_rank(s, r)
    if k < r and na > 0 and nb > 0:
        # rank-deficient: the tangent cone adds c a_p b_p^T, which completes
        # the basis with one direction each side (zero singular value for now)
        unit(m.ap, d1, na, m.Ue + k * d1)
        unit(m.bp, d2, nb, m.Ve + k * d2)
        m.alpha[k] = na
        m.beta[k] = nb
        na = nb = 0.0
    unit(m.ap, d1, na, m.Ue + r * d1)
    unit(m.bp, d2, nb, m.Ve + r * d2)
    for j in range(r):
        for i in range(r):
            m.K[i + j * mm] = c * m.alpha[i] * m.beta[j]
        m.K[j + j * mm] += s[j]
        m.K[r + j * mm] = c * na * m.beta[j]
        m.K[j + r * mm] = c * nb * m.alpha[j]
    m.K[r + r * mm] = 0.0
    return retract(m, mm, U2, s2, V2)


cdef double dense_products(LR *m, const double *U, const double *s, const double *V,
                           const double *X) noexcept nogil:
    # B = X V, A = X^T U, C = U^T X V (column-major d1 x r, d2 x r, r x r);
    # returns <X, M> = sum_k s_k C_kk. X: C-order (d1, d2), i.e. column-major
    # d2 x d1 (X^T).
    cdef Py_ssize_t k, d1 = m.d1, d2 = m.d2, r = m.r
    cdef double acc = 0.0
    _blas.gemm(b'T', b'N', <_blas.blas_int> d1, <_blas.blas_int> r, <_blas.blas_int> d2,
               1.0, X, <_blas.blas_int> d2, V, <_blas.blas_int> d2, 0.0, m.B,
               <_blas.blas_int> d1)
    _blas.gemm(b'N', b'N', <_blas.blas_int> d2, <_blas.blas_int> r, <_blas.blas_int> d1,
               1.0, X, <_blas.blas_int> d2, U, <_blas.blas_int> d1, 0.0, m.A,
               <_blas.blas_int> d2)
    _blas.gemm(b'T', b'N', <_blas.blas_int> r, <_blas.blas_int> r, <_blas.blas_int> d1,
               1.0, U, <_blas.blas_int> d1, m.B, <_blas.blas_int> d1, 0.0, m.C,
               <_blas.blas_int> r)
    for k in range(r):
        acc += s[k] * m.C[k + k * r]
    return acc


cdef int complete_dense(LR *m, const double *s, const double *X, Py_ssize_t k) noexcept nogil:
    # Rank k < r: the inactive rows of Ue, Ve (copies of U, V; B, A, C are
    # theirs) take the top r - k singular pairs of (I - UU^T) X (I - VV^T)
    # (the tangent cone's extra part), by one SVD of a d1 x d2 matrix; then
    # B, A, C anew.
    cdef Py_ssize_t d1 = m.d1, d2 = m.d2, r = m.r, mn = d1 if d1 < d2 else d2, i, j
    cdef _blas.blas_int info
    cdef double tol
    cdef double *U = m.Ue
    cdef double *V = m.Ve
    cdef double *VC = m.Ve + r * d2          # scratch: the rows past r are free here
    # Y^T (column-major d2 x d1) = X^T - A U^T - V B^T + V C^T U^T
    memcpy(m.Y, X, d1 * d2 * sizeof(double))
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> d1, <_blas.blas_int> r,
               -1.0, m.A, <_blas.blas_int> d2, U, <_blas.blas_int> d1, 1.0, m.Y,
               <_blas.blas_int> d2)
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> d1, <_blas.blas_int> r,
               -1.0, V, <_blas.blas_int> d2, m.B, <_blas.blas_int> d1, 1.0, m.Y,
               <_blas.blas_int> d2)
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> r, <_blas.blas_int> r,
               1.0, V, <_blas.blas_int> d2, m.C, <_blas.blas_int> r, 0.0, VC,
               <_blas.blas_int> d2)
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> d1, <_blas.blas_int> r,
               1.0, VC, <_blas.blas_int> d2, U, <_blas.blas_int> d1, 1.0, m.Y,
               <_blas.blas_int> d2)
    info = _blas.gesvd_thin(<_blas.blas_int> d2, <_blas.blas_int> d1, m.Y,
                            <_blas.blas_int> d2, m.ysv, m.yu, <_blas.blas_int> d2, m.yvt,
                            <_blas.blas_int> mn, m.work, m.lwork)
    if info != 0:
        return ERR_LAPACK
    tol = m.ysv[0] * (d1 if d1 > d2 else d2) * DBL_EPSILON
    for j in range(r - k):
        if j >= mn or not (m.ysv[j] > tol):
            break
        for i in range(d1):
            U[(k + j) * d1 + i] = m.yvt[j + i * mn]
        memcpy(V + (k + j) * d2, m.yu + j * d2, d2 * sizeof(double))
    dense_products(m, U, s, V, X)
    return OK


cdef int qr_block(LR *m, Py_ssize_t d, double *Q) noexcept nogil:
    # Q (column-major d x r) = its Householder Q, R (r x r) into m.R
    cdef Py_ssize_t r = m.r, i, j
    cdef _blas.blas_int info
    info = _blas.geqrf(<_blas.blas_int> d, <_blas.blas_int> r, Q, <_blas.blas_int> d,
                       m.qtau, m.work, m.lwork)
    if info != 0:
        return ERR_LAPACK
    for j in range(r):
        for i in range(r):
            m.R[i + j * r] = Q[i + j * d] if i <= j else 0.0
    info = _blas.orgqr(<_blas.blas_int> d, <_blas.blas_int> r, Q, <_blas.blas_int> d,
                       m.qtau, m.work, m.lwork)
    if info != 0:
        return ERR_LAPACK
    return OK


cdef void project_block(LR *m, const double *U, Py_ssize_t d, double *Q) noexcept nogil:
    # Q (column-major d x r) -= U (U^T Q): a second Gram-Schmidt pass against
    # the basis U (d x r), for the rounding the first one left
    cdef Py_ssize_t r = m.r
    _blas.gemm(b'T', b'N', <_blas.blas_int> r, <_blas.blas_int> r, <_blas.blas_int> d,
               1.0, U, <_blas.blas_int> d, Q, <_blas.blas_int> d, 0.0, m.T,
               <_blas.blas_int> r)
    _blas.gemm(b'N', b'N', <_blas.blas_int> d, <_blas.blas_int> r, <_blas.blas_int> r,
               -1.0, U, <_blas.blas_int> d, m.T, <_blas.blas_int> r, 1.0, Q,
               <_blas.blas_int> d)


cdef int dense_step(LR *m, const double *s, double c, double *U2, double *s2,
                    double *V2) noexcept nogil:
    # M2 = SVD_r(M + c P_T(X)) with U, V the first r rows of Ue, Ve and B,
    # A, C their products with X (dense_products). With
    # Up = (I - UU^T) X V = Qu Ru and Vp = (I - VV^T) X^T U = Qv Rv,
    #   M + c P_T(X) = [U, Qu] [[diag(s) + c C, c Rv^T], [c Ru, 0]] [V, Qv]^T.
    cdef Py_ssize_t d1 = m.d1, d2 = m.d2, r = m.r, mm = 2 * r, i, j
    cdef int code
    cdef double *U = m.Ue
    cdef double *V = m.Ve
    cdef double *Qu = m.Ue + r * d1
    cdef double *Qv = m.Ve + r * d2
    # Up = B - U C, Vp = A - V C^T, then once more against U, V (rounding)
    memcpy(Qu, m.B, r * d1 * sizeof(double))
    memcpy(Qv, m.A, r * d2 * sizeof(double))
    _blas.gemm(b'N', b'N', <_blas.blas_int> d1, <_blas.blas_int> r, <_blas.blas_int> r,
               -1.0, U, <_blas.blas_int> d1, m.C, <_blas.blas_int> r, 1.0, Qu,
               <_blas.blas_int> d1)
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> r, <_blas.blas_int> r,
               -1.0, V, <_blas.blas_int> d2, m.C, <_blas.blas_int> r, 1.0, Qv,
               <_blas.blas_int> d2)
    project_block(m, U, d1, Qu)
    project_block(m, V, d2, Qv)
    code = qr_block(m, d1, Qu)
    if code != OK:
        return code
    for j in range(r):
        for i in range(r):
            m.K[(r + i) + j * mm] = c * m.R[i + j * r]         # c Ru
    code = qr_block(m, d2, Qv)
    if code != OK:
        return code
    for j in range(r):
        for i in range(r):
            m.K[i + (r + j) * mm] = c * m.R[j + i * r]         # c Rv^T
            m.K[i + j * mm] = c * m.C[i + j * r]
            m.K[(r + i) + (r + j) * mm] = 0.0
        m.K[j + j * mm] += s[j]
    return retract(m, mm, U2, s2, V2)


# ----------------------------------------------------------------------------
# The sample loop, for every form of X.

cdef enum:
    FORM_DENSE = 0
    FORM_RANK1 = 1
    FORM_INDEX = 2

cdef enum:
    # what made a row fail ERR_BADINPUT (Loop.bad)
    BAD_X = 1
    BAD_Y = 2
    BAD_INDEX = 3


cdef struct Factors:
    double *U           # (r, d1)
    double *s           # (r,)
    double *V           # (r, d2)


cdef struct Loop:
    # one call's input and its outcome
    int form
    const double *X     # (n, d1, d2)
    const double *A     # (n, d1)
    const double *B     # (n, d2)
    const Py_ssize_t *index     # (n, 2)
    const double *y
    Py_ssize_t n
    Py_ssize_t done     # rows applied
    Py_ssize_t row      # the failing row, -1: none
    int bad             # BAD_X, BAD_Y or BAD_INDEX with ERR_BADINPUT
    int cur             # the factors holding the rows applied


cdef inline bint row_finite(const double *x, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if not isfinite(x[i]):
            return False
    return True


cdef int run_rows(LR *m, Factors *f, int live, int spare_a, int spare_b, SGDState *s,
                  const SGDParams *p, double *win, double *swork, Loop *L,
                  Poll *pl) noexcept nogil:
    # Rows 0..n of L on the factors f[live] (never written): each update
    # writes the spare the previous row did not, L.cur ends on the factors
    # of the rows applied. s and win are the caller's to keep or drop.
    cdef Py_ssize_t d1 = m.d1, d2 = m.d2, r = m.r, i, ii, jj, k
    cdef Py_ssize_t deff = r * (d1 + d2 - r)
    cdef double ratio = <double> deff / (<double> d1 * <double> d2)
    cdef double pred, res, c = 0.0, eta = 0.0, xx, na0 = 1.0, nb0 = 1.0, xs, work
    cdef int code = OK, nxt
    cdef const double *a = NULL
    cdef const double *b = NULL
    cdef Factors *F
    cdef Factors *G
    if L.form == FORM_DENSE:
        work = 4.0 * d1 * d2 * r + 64.0 * r * r * r
    else:
        work = 4.0 * (d1 + d2) * r * (r + 1) + 64.0 * r * r * r
    L.cur = live
    nxt = spare_a
    for i in range(L.n):
        if poll_stop(pl, work):
            return ERR_INTERRUPTED
        F = &f[L.cur]
        if not isfinite(L.y[i]):
            L.row, L.bad = i, BAD_Y
            return ERR_BADINPUT
        if L.form == FORM_DENSE:
            a = L.X + i * d1 * d2
            xx = _blas.dot(<_blas.blas_int> (d1 * d2), a, a)
            if not (xx <= DBL_MAX):
                L.row = i
                if not row_finite(a, d1 * d2):
                    L.bad = BAD_X
                    return ERR_BADINPUT
                return ERR_SCALE
            pred = dense_products(m, F.U, F.s, F.V, a)
        elif L.form == FORM_RANK1:
            a = L.A + i * d1
            b = L.B + i * d2
            na0 = norm2(d1, a)
            nb0 = norm2(d2, b)
            xx = na0 * na0 * nb0 * nb0
            if not (xx <= DBL_MAX):
                L.row = i
                if not (row_finite(a, d1) and row_finite(b, d2)):
                    L.bad = BAD_X
                    return ERR_BADINPUT
                return ERR_SCALE
            # <a b^T, M> = (U a)' diag(s) (V b)
            _blas.gemv_rows(<_blas.blas_int> r, <_blas.blas_int> d1, 1.0, F.U, a, 0.0,
                            m.alpha)
            _blas.gemv_rows(<_blas.blas_int> r, <_blas.blas_int> d2, 1.0, F.V, b, 0.0,
                            m.beta)
            pred = 0.0
            for ii in range(r):
                pred += m.alpha[ii] * F.s[ii] * m.beta[ii]
        else:
            ii = L.index[2 * i]
            jj = L.index[2 * i + 1]
            if ii < 0 or ii >= d1 or jj < 0 or jj >= d2:
                L.row, L.bad = i, BAD_INDEX
                return ERR_BADINPUT
            # U e_i, V e_j: columns of U, V
            pred = 0.0
            for k in range(r):
                m.alpha[k] = F.U[k * d1 + ii]
                m.beta[k] = F.V[k * d2 + jj]
                pred += m.alpha[k] * F.s[k] * m.beta[k]
            xx = 1.0
        res = L.y[i] - pred
        if not (fabs(res) <= DBL_MAX):
            # finite inputs: y - <X, M> left float64's range
            L.row = i
            return ERR_SCALE
        # the vector kernel's row (_qr_schedule.pxd) with d = d_eff and
        # ||x||^2 = d_eff ||X||^2 / (d1 d2), no intercept, weight 1
        xs = sqrt(xx * ratio)
        code = quantile_row(s, p, win, swork, &xs, 1, deff, res, xs * xs, 1.0, 0.0, False,
                            &c, &eta)
        if code == NO_UPDATE:
            L.done = i + 1
            continue
        if code != OK:
            L.row = i
            return code
        G = &f[nxt]
        if L.form == FORM_DENSE:
            memcpy(m.Ue, F.U, r * d1 * sizeof(double))
            memcpy(m.Ve, F.V, r * d2 * sizeof(double))
            ii = active_rank(F.s, r)
            if ii < r:
                code = complete_dense(m, F.s, a, ii)
                if code != OK:
                    L.row = i
                    return code
            code = dense_step(m, F.s, c, G.U, G.s, G.V)
        elif L.form == FORM_RANK1:
            code = rank1_step(m, F.U, F.s, F.V, a, b, na0, nb0, c, G.U, G.s, G.V)
        else:
            ii = L.index[2 * i]
            jj = L.index[2 * i + 1]
            m.ea[ii] = 1.0
            m.eb[jj] = 1.0
            code = rank1_step(m, F.U, F.s, F.V, m.ea, m.eb, 1.0, 1.0, c, G.U, G.s, G.V)
            m.ea[ii] = 0.0
            m.eb[jj] = 0.0
        if code != OK:
            L.row = i
            return code
        if not (fabs(G.s[0]) < 1e300):
            L.row = i
            return ERR_NONFINITE
        L.done = i + 1
        L.cur = nxt
        nxt = spare_b if nxt == spare_a else spare_a
    return OK


# ----------------------------------------------------------------------------
# The state object.

cdef enum:
    N_STATE = sizeof(SGDState) // sizeof(double)
    N_PARAMS = sizeof(SGDParams) // sizeof(double)

if N_STATE != len(STATE_FIELDS) or N_PARAMS != len(PARAMS_FIELDS):  # pragma: no cover
    raise ImportError("streamfit._kernels._lowrank: the schedule records are not all doubles")

_UNCHANGED = "the state was left as it was before this call"
_LOSS_NAMES = {LOSS_CHECK: "quantile", LOSS_SQUARED: "squared"}
_KIND_NAMES = {KIND_CONSTANT: "constant", KIND_INVERSE_TIME: "inverse_time",
               KIND_STATISTICAL: "statistical"}
_KEYS = frozenset(("format_version", "d1", "d2", "rank", "U", "s", "V", "schedule",
                   "schedule_fields", "params", "params_fields", "window"))


cdef SGDParams _DEFAULTS               # the record's defaults (params_from)
cdef dict _FIELD_INDEX = {name: i for i, name in enumerate(PARAMS_FIELDS)}


cdef int _init_defaults() except -1:
    cdef double *f = <double *> &_DEFAULTS
    rec = default_params(PARAMS_DTYPE)[0]
    for i, name in enumerate(PARAMS_FIELDS):
        f[i] = float(rec[name])
    return 0


_init_defaults()


cdef int params_from(object params, SGDParams *p) except -1:
    # A parameter record from a dict of its fields (the others: NaN for
    # eta0, b0 and t_switch, "estimate from the stream"; start 1; else 0).
    # Values checked later, with the state (check_params).
    cdef double *f = <double *> p
    cdef Py_ssize_t i
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of the schedule record's fields, got "
                        f"{type(params).__name__}")
    p[0] = _DEFAULTS
    for name, value in (<dict> params).items():
        i = _FIELD_INDEX.get(name, -1)
        if i < 0:
            raise ValueError(f"params: unknown field {name!r}; the fields are "
                             f"{', '.join(PARAMS_FIELDS)}")
        if type(value) is float:
            f[i] = <double> value
        elif isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise TypeError(f"params[{name!r}] must be a real number, got {value!r}")
        else:
            f[i] = float(value)
    return 0


cdef Py_ssize_t window_size(const SGDParams *p) noexcept:
    # the residual window the statistical schedule needs (single mode)
    if p.kind != KIND_STATISTICAL:
        return 0
    return <Py_ssize_t> (p.window if p.window > p.n_warmup else p.n_warmup) + 1


cdef int check_params(const SGDParams *p, const SGDState *s, Py_ssize_t wcap,
                      str name) except -1:
    # What this family runs (single-sample rows without an intercept, no
    # averaging, drift test or warm start), then every field's range.
    cdef str pn = name.replace("state", "params")
    if not (p.kind == KIND_CONSTANT or p.kind == KIND_INVERSE_TIME
            or p.kind == KIND_STATISTICAL):
        raise ValueError(f"{pn} record: field 'kind' is {p.kind!r}, expected a schedule "
                         "code 0 (constant), 1 (inverse_time) or 2 (statistical) (a "
                         "corrupted or foreign record?); it was not used")
    for field, value in (("mode", p.mode), ("fit_intercept", p.fit_intercept),
                         ("average", p.average), ("drift", p.drift), ("t0", p.t0)):
        if value != 0:
            raise ValueError(f"{pn} record: field {field!r} is {value!r}, expected 0 for the "
                             "low-rank learner (a corrupted or foreign record?); it was not "
                             "used")
    if p.start != 1:
        raise ValueError(f"{pn} record: field 'start' is {p.start!r}, expected 1 for the "
                         "low-rank learner (a corrupted or foreign record?); it was not used")
    check_sgd_records(s, p, wcap, 1, name)
    return 0


def _rebuild(version, state):
    """Unpickling: :meth:`LowRankState.from_state`, for this layout only."""
    if version != FORMAT_VERSION:
        raise ValueError(f"LowRankState: a state of format version {version!r}, this "
                         f"streamfit reads version {FORMAT_VERSION} only (a pickle of "
                         "another streamfit version?); refit, or load it with the version "
                         "that wrote it")
    return LowRankState.from_state(state)


cdef class LowRankState:
    """The online low-rank learner's whole state: the iterate
    M = U^T diag(s) V, the stepsize schedule's records and residual window,
    and the work space of its steps.

    Parameters
    ----------
    shape : (int, int)
        (d1, d2), the matrices' shape.
    rank : int
        r, the iterate's rank, 1 <= r <= min(d1, d2) (dense samples need
        2 r <= min(d1, d2)).
    params : dict
        The schedule record's fields (``PARAMS_FIELDS``: ``tau``, ``loss``,
        ``kind``, ``c`` and the statistical schedule's constants, as
        :mod:`streamfit.schedules` makes them); fields left out take their
        defaults (NaN for ``eta0``, ``b0`` and ``t_switch``: estimated from
        the stream). Checked here, once.

    Notes
    -----
    Samples come in three forms: a float64 C-ordered array of shape
    (T, d1, d2) (dense X_t), a tuple ``(A, B)`` of float64 C-ordered arrays
    of shapes (T, d1) and (T, d2) (rank one, X_t = A[t] B[t]^T) or an
    ``np.intp`` array of shape (T, 2) of (row, column) pairs (completion,
    X_t = e_i e_j^T). One row: a (d1, d2) array, a pair of 1-D arrays, or a
    pair of ints.

    One call at a time: a second thread waits (with the GIL released); the
    same thread calling again from a signal handler inside a block call is
    refused (RuntimeError). A block call (``learn``) runs without the GIL on
    spare buffers and commits by swapping them: a signal handler that raises
    stops it between two samples, the state then holds the samples before,
    and the exception is re-raised with a note saying how many; any error
    leaves the state as it was. ``learn_one`` holds the GIL from start to
    end. Pickling, :meth:`copy` and :meth:`to_state` give independent states.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit._kernels._lowrank import LowRankState, KIND_CONSTANT
    >>> st = LowRankState((4, 3), 1, {"kind": KIND_CONSTANT, "c": 0.1, "tau": 0.5})
    >>> idx = np.array([[0, 0], [1, 2], [0, 0]], dtype=np.intp)
    >>> st.learn(idx, np.array([1.0, -1.0, 1.0]))
    >>> st.n_seen, round(st.predict_one((0, 0)), 6)
    (3, 0.1)
    """
    cdef CallLock _lock
    cdef readonly Py_ssize_t d1, d2, rank
    cdef SGDParams p
    cdef SGDState st
    cdef SGDState st_spare
    cdef double *win
    cdef double *win_spare
    cdef double *swork
    cdef Py_ssize_t wcap
    cdef Factors f[3]
    cdef double *fbuf[3]
    cdef int live
    cdef LR m
    cdef bint m_ready

    def __cinit__(self, shape, rank, params):
        cdef Py_ssize_t k, size
        lock_init(&self._lock)
        try:
            d1, d2 = shape
        except (TypeError, ValueError):
            raise ValueError(f"shape must be a pair (d1, d2), got {shape!r}") from None
        for name, v in (("shape", d1), ("shape", d2), ("rank", rank)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name} must hold integers, got {v!r}")
        if not (1 <= d1 <= 2 ** 31 - 1 and 1 <= d2 <= 2 ** 31 - 1):
            raise ValueError(f"shape must be a pair of integers in [1, 2^31), got {shape!r}")
        if not 1 <= rank <= min(d1, d2):
            raise ValueError(f"rank must be in [1, min(d1, d2) = {min(d1, d2)}], got {rank!r}")
        self.d1, self.d2, self.rank = d1, d2, rank
        params_from(params, &self.p)
        memset(&self.st, 0, sizeof(SGDState))
        self.wcap = window_size(&self.p)
        check_params(&self.p, &self.st, self.wcap, "state")
        size = self.rank * (self.d1 + self.d2 + 1)
        for k in range(3):
            self.fbuf[k] = <double *> calloc(size, sizeof(double))
            if self.fbuf[k] == NULL:
                raise MemoryError("LowRankState: could not allocate its factors")
            self.f[k].U = self.fbuf[k]
            self.f[k].s = self.fbuf[k] + self.rank * self.d1
            self.f[k].V = self.fbuf[k] + self.rank * (self.d1 + 1)
        self.win = <double *> calloc(max(self.wcap, 1), sizeof(double))
        self.win_spare = <double *> calloc(max(self.wcap, 1), sizeof(double))
        self.swork = <double *> malloc(max(self.wcap, 1) * sizeof(double))
        if self.win == NULL or self.win_spare == NULL or self.swork == NULL:
            raise MemoryError("LowRankState: could not allocate its residual window")
        if lr_init(&self.m, self.d1, self.d2, self.rank) != OK:
            lr_free(&self.m)
            raise MemoryError("LowRankState: could not allocate its work space")
        self.m_ready = True
        self.live = 0

    def __dealloc__(self):
        cdef int k
        for k in range(3):
            free(self.fbuf[k])
        free(self.win)
        free(self.win_spare)
        free(self.swork)
        if self.m_ready:
            lr_free(&self.m)
        lock_free(&self._lock)

    # -- settings ------------------------------------------------------------------
    def set_params(self, params):
        """Take new schedule constants for the next calls (a dict as in the
        constructor). The loss, tau, the schedule's kind, ``window`` and
        ``n_warmup`` belong to the learnt state and cannot change: a
        ValueError names the one that did, and nothing changes."""
        cdef SGDParams q
        lock_enter(&self._lock, "LowRankState")
        try:
            params_from(params, &q)
            for name, old, new in (("loss", _LOSS_NAMES.get(self.p.loss, self.p.loss),
                                    _LOSS_NAMES.get(q.loss, q.loss)),
                                   ("tau", self.p.tau, q.tau),
                                   ("schedule kind", _KIND_NAMES.get(self.p.kind, self.p.kind),
                                    _KIND_NAMES.get(q.kind, q.kind)),
                                   ("schedule window", self.p.window, q.window),
                                   ("schedule n_warmup", self.p.n_warmup, q.n_warmup)):
                if old != new:
                    raise ValueError(f"{name} changed from {old!r} to {new!r} since the "
                                     "first call; the learnt state belongs to the old value")
            check_params(&q, &self.st, self.wcap, "state")
            self.p = q
        finally:
            lock_leave(&self._lock)

    @property
    def params(self):
        """The schedule's parameter record, as a dict (a snapshot)."""
        cdef double *f = <double *> &self.p
        lock_enter(&self._lock, "LowRankState")
        try:
            return {name: f[i] for i, name in enumerate(PARAMS_FIELDS)}
        finally:
            lock_leave(&self._lock)

    @property
    def shape(self):
        """(d1, d2)."""
        return (self.d1, self.d2)

    # The settings that belong to the learnt state (set_params cannot change
    # them): read without the lock.
    @property
    def tau(self):
        """The quantile level."""
        return self.p.tau

    @property
    def loss_code(self):
        """LOSS_CHECK or LOSS_SQUARED."""
        return int(self.p.loss)

    @property
    def kind(self):
        """The schedule's kind: KIND_CONSTANT, KIND_INVERSE_TIME or KIND_STATISTICAL."""
        return int(self.p.kind)

    # -- learning ------------------------------------------------------------------
    cdef int _loop_of(self, Loop *L, object X, object y, bint one) except -1:
        # L from a block (or, with `one`, a single row) of one of the three
        # forms, shapes checked; y checked as a float64 vector
        cdef const double[:, :, ::1] Xd
        cdef const double[:, ::1] Xa
        cdef const double[:, ::1] Xb
        cdef const Py_ssize_t[:, ::1] Xi
        cdef const double[::1] yv = y
        memset(L, 0, sizeof(Loop))
        L.row = -1
        n = yv.shape[0]
        if isinstance(X, tuple):
            if len(X) != 2:
                raise ValueError(f"X as a tuple must be (A, B), the factors of rank-one "
                                 f"samples, got {len(X)} items")
            try:
                Xa = X[0]
                Xb = X[1]
            except (TypeError, ValueError):
                raise TypeError("X = (A, B) must be two C-ordered float64 arrays") from None
            if Xa.shape[0] != n or Xb.shape[0] != n or Xa.shape[1] != self.d1 \
                    or Xb.shape[1] != self.d2:
                raise ValueError(f"X = (A, B) must have shapes ({n}, {self.d1}) and "
                                 f"({n}, {self.d2}), got {tuple(Xa.shape)[:2]} and "
                                 f"{tuple(Xb.shape)[:2]}")
            L.form = FORM_RANK1
            L.A = &Xa[0, 0] if n else NULL
            L.B = &Xb[0, 0] if n else NULL
        elif getattr(X, "dtype", None) is not None and X.dtype.kind in "iu":
            try:
                Xi = X
            except (TypeError, ValueError):
                raise TypeError("X as index pairs must be a C-ordered np.intp array of shape "
                                "(T, 2)") from None
            if Xi.shape[0] != n or Xi.shape[1] != 2:
                raise ValueError(f"X as index pairs must have shape ({n}, 2), got "
                                 f"{tuple(Xi.shape)[:2]}")
            L.form = FORM_INDEX
            L.index = &Xi[0, 0] if n else NULL
        else:
            try:
                Xd = X
            except (TypeError, ValueError):
                raise TypeError("X must be a C-ordered float64 array of shape (T, d1, d2), a "
                                "tuple (A, B) or an np.intp array of index pairs") from None
            if Xd.shape[0] != n or Xd.shape[1] != self.d1 or Xd.shape[2] != self.d2:
                raise ValueError(f"X must have shape ({n}, {self.d1}, {self.d2}), got "
                                 f"{tuple(Xd.shape)[:3]}")
            if 2 * self.rank > min(self.d1, self.d2):
                raise ValueError(f"dense X needs 2 rank <= min(d1, d2), got rank "
                                 f"{self.rank} for ({self.d1}, {self.d2})")
            L.form = FORM_DENSE
            L.X = &Xd[0, 0, 0] if n else NULL
        L.y = &yv[0] if n else NULL
        L.n = n
        return 0

    def learn(self, X, const double[::1] y):
        """One step per sample, in order (see the class notes for the forms
        of X); y: float64 of length T."""
        cdef Loop L
        lock_enter(&self._lock, "LowRankState")
        try:
            self._loop_of(&L, X, y, False)
            self._block(&L)
        finally:
            lock_leave(&self._lock)

    cdef int _block(self, Loop *L) except -1:
        cdef Poll pl
        cdef int code = OK, sa = (self.live + 1) % 3, sb = (self.live + 2) % 3
        cdef double *w
        if L.n == 0:
            return 0
        if L.form == FORM_DENSE and dense_init(&self.m) != OK:
            raise MemoryError("LowRankState: could not allocate the dense work space")
        self.st_spare = self.st
        memcpy(self.win_spare, self.win, <Py_ssize_t> self.st.fill * sizeof(double))
        poll_init(&pl, &_hook)
        with nogil:
            code = run_rows(&self.m, self.f, self.live, sa, sb, &self.st_spare, &self.p,
                            self.win_spare, self.swork, L, &pl)
            if code == OK and poll_final(&pl):
                code = ERR_INTERRUPTED
        if code == OK or code == ERR_INTERRUPTED:
            # commit: the rows applied, by swapping buffers
            self.live = L.cur
            self.st = self.st_spare
            w = self.win
            self.win = self.win_spare
            self.win_spare = w
        if code == OK:
            return 0
        if code == ERR_INTERRUPTED:
            exc = pending_exception() or KeyboardInterrupt()
            exc.add_note(f"interrupted after {L.done} of the call's {L.n} samples: the "
                         f"state holds the samples before that point (n_seen = "
                         f"{self.st.n_seen:.0f})")
            raise exc
        self._raise(code, L)

    def learn_one(self, x, double y):
        """One step on one sample: x a (d1, d2) float64 array, a pair of
        float64 vectors (a, b) (X = a b^T) or a pair of ints (i, j)
        (X = e_i e_j^T); y a float."""
        self._one(x, y, True)

    cdef object _one(self, x, double y, bint learning):
        # learn_one (`learning`: one step on (x, y)) or predict_one (<x, M>):
        # x read in place for the call, its shape checked
        cdef Loop L
        cdef Py_ssize_t ij[2]
        cdef const double[:, ::1] Xd
        cdef const double[::1] a
        cdef const double[::1] b
        cdef double yy = y, out
        lock_enter(&self._lock, "LowRankState")
        try:
            memset(&L, 0, sizeof(Loop))
            L.n = 1
            if learning:
                L.row = -1
                L.y = &yy
            if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], (int, np.integer)) \
                    and isinstance(x[1], (int, np.integer)):
                # a step checks the pair as it reads it (run_rows: BAD_INDEX)
                if not learning and not (0 <= x[0] < self.d1 and 0 <= x[1] < self.d2):
                    raise ValueError(f"x: the index pair {tuple(x)} lies outside shape "
                                     f"({self.d1}, {self.d2})")
                ij[0] = x[0]
                ij[1] = x[1]
                L.form = FORM_INDEX
                L.index = ij
            elif isinstance(x, tuple):
                if len(x) != 2:
                    raise ValueError(f"x as a tuple must be (a, b) or (i, j), got {len(x)} "
                                     "items")
                try:
                    a = x[0]
                    b = x[1]
                except (TypeError, ValueError):
                    raise TypeError("x = (a, b) must be two float64 vectors") from None
                if a.shape[0] != self.d1 or b.shape[0] != self.d2:
                    raise ValueError(f"x = (a, b) must have lengths ({self.d1}, {self.d2}), "
                                     f"got ({a.shape[0]}, {b.shape[0]})")
                L.form = FORM_RANK1
                L.A = &a[0]
                L.B = &b[0]
            else:
                try:
                    Xd = x
                except (TypeError, ValueError):
                    raise TypeError("x must be a C-ordered float64 (d1, d2) array, a pair "
                                    "of float64 vectors (a, b) or a pair of ints") from None
                if Xd.shape[0] != self.d1 or Xd.shape[1] != self.d2:
                    raise ValueError(f"x must have shape ({self.d1}, {self.d2}), got "
                                     f"{tuple(Xd.shape)[:2]}")
                if learning:
                    if 2 * self.rank > min(self.d1, self.d2):
                        raise ValueError(f"dense x needs 2 rank <= min(d1, d2), got rank "
                                         f"{self.rank} for ({self.d1}, {self.d2})")
                    if dense_init(&self.m) != OK:
                        raise MemoryError("LowRankState: could not allocate the dense work "
                                          "space")
                L.form = FORM_DENSE
                L.X = &Xd[0, 0]
            if learning:
                self._row(&L)
                return None
            out = self._predict_row(&L, 0)
            # a NaN or inf in x is refused, as learn_one does; x is read again
            # only for a non-finite or a zero result (a zero model skips the
            # products: NaN * 0 would not show)
            if L.form != FORM_INDEX and (out == 0.0 or not isfinite(out)):
                _refuse_nonfinite_x(x, "x")
            return out
        finally:
            lock_leave(&self._lock)

    cdef int _row(self, Loop *L) except -1:
        # One row with the GIL held: the factors into a spare, the schedule
        # in place (a row writes one window slot past `fill` and the
        # record: a copy of the record undoes a failure)
        cdef Poll pl
        cdef SGDState before = self.st
        cdef int code, sa = (self.live + 1) % 3, sb = (self.live + 2) % 3
        poll_quiet(&pl, &_hook)
        code = run_rows(&self.m, self.f, self.live, sa, sb, &self.st, &self.p, self.win,
                        self.swork, L, &pl)
        if code == OK:
            self.live = L.cur
            return 0
        self.st = before
        self._raise(code, L)

    cdef int _raise(self, int code, Loop *L) except -1:
        # The exception for a failed call: streamfit._errors' wording, with
        # the sample; an index out of range and LAPACK (this file's routines,
        # not the eigen-solver chain) are this state's own
        from streamfit._errors import raise_for
        at = f"sample {L.row} of this call" if L.row >= 0 else "this call"
        detail = ""
        if code == ERR_BADINPUT:
            if L.bad == BAD_INDEX:
                raise ValueError(f"X: the index pair ({L.index[2 * L.row]}, "
                                 f"{L.index[2 * L.row + 1]}) ({at}) lies outside shape "
                                 f"({self.d1}, {self.d2}); {_UNCHANGED}")
            detail = f"{'y' if L.bad == BAD_Y else 'X'} contains NaN or inf ({at})."
        elif code == ERR_SCALE:
            detail = (f"The overflow came at {at}, in ||X||^2 or the residual y - <X, M> "
                      f"(y may be the one to rescale).")
        elif code == ERR_NONFINITE:
            detail = f"It left the finite range at {at}."
        elif code == ERR_LAPACK:
            raise np.linalg.LinAlgError(f"LAPACK failed at {at} (dgesvd, dgeqrf or dorgqr "
                                        f"on finite input); {_UNCHANGED}")
        raise_for(code, "LowRankState", detail=detail, state=_UNCHANGED)

    # -- predicting ----------------------------------------------------------------
    def predict(self, X):
        """<X_t, M> for each sample (the forms of :meth:`learn`); float64 (T,)."""
        cdef Loop L
        cdef Py_ssize_t i, n
        cdef double[::1] out
        lock_enter(&self._lock, "LowRankState")
        try:
            X0 = X[0] if isinstance(X, tuple) and len(X) == 2 else X
            n = len(X0) if hasattr(X0, "__len__") else 0
            self._loop_of(&L, X, np.zeros(n), False)
            result = np.empty(L.n)
            out = result
            if L.form == FORM_DENSE and self.m.Mfull == NULL:
                self.m.Mfull = <double *> malloc(self.d1 * self.d2 * sizeof(double))
                if self.m.Mfull == NULL:
                    raise MemoryError("LowRankState.predict: could not allocate M")
            with nogil:
                if L.form == FORM_DENSE and L.n:
                    # M once, then one product with every sample
                    self._dense_matrix()
                    _blas.gemv_rows(<_blas.blas_int> L.n, <_blas.blas_int> (self.d1 * self.d2),
                                    1.0, L.X, self.m.Mfull, 0.0, &out[0])
                else:
                    for i in range(L.n):
                        out[i] = self._predict_row(&L, i)
            if L.form == FORM_INDEX:
                for i in range(L.n):
                    if out[i] != out[i]:
                        raise ValueError(f"X: the index pair ({L.index[2 * i]}, "
                                         f"{L.index[2 * i + 1]}) of sample {i} lies outside "
                                         f"shape ({self.d1}, {self.d2})")
            else:
                # a NaN or inf in X is refused, as learn does, not returned as a
                # NaN prediction (X is read again only for a non-finite result)
                for i in range(L.n):
                    if not isfinite(out[i]):
                        _refuse_nonfinite_x(X, "X")
            return result
        finally:
            lock_leave(&self._lock)

    cdef void _dense_matrix(self) noexcept nogil:
        # M = U^T diag(s) V into m.Mfull (allocated on first use)
        cdef Factors *F = &self.f[self.live]
        cdef Py_ssize_t k, j, d1 = self.d1, d2 = self.d2
        memset(self.m.Mfull, 0, d1 * d2 * sizeof(double))
        for k in range(self.rank):
            if F.s[k] > 0:
                # M += s_k u_k v_k^T (C-order (d1, d2): column-major d2 x d1)
                for j in range(d1):
                    _blas.axpy(<_blas.blas_int> d2, F.s[k] * F.U[k * d1 + j], F.V + k * d2,
                               self.m.Mfull + j * d2)

    cdef double _predict_row(self, Loop *L, Py_ssize_t i) noexcept nogil:
        cdef Factors *F = &self.f[self.live]
        cdef Py_ssize_t k, ii, jj, d1 = self.d1, d2 = self.d2, r = self.rank
        cdef double acc = 0.0
        if L.form == FORM_RANK1:
            _blas.gemv_rows(<_blas.blas_int> r, <_blas.blas_int> d1, 1.0, F.U, L.A + i * d1,
                            0.0, self.m.alpha)
            _blas.gemv_rows(<_blas.blas_int> r, <_blas.blas_int> d2, 1.0, F.V, L.B + i * d2,
                            0.0, self.m.beta)
            for k in range(r):
                acc += self.m.alpha[k] * F.s[k] * self.m.beta[k]
            return acc
        if L.form == FORM_INDEX:
            ii = L.index[2 * i]
            jj = L.index[2 * i + 1]
            if ii < 0 or ii >= d1 or jj < 0 or jj >= d2:
                return NAN
            for k in range(r):
                acc += F.U[k * d1 + ii] * F.s[k] * F.V[k * d2 + jj]
            return acc
        # dense, one sample: sum_k s_k u_k^T X v_k
        for k in range(r):
            if F.s[k] > 0:
                _blas.gemv_rows(<_blas.blas_int> d1, <_blas.blas_int> d2, 1.0,
                                L.X + i * d1 * d2, F.V + k * d2, 0.0, self.m.ap)
                acc += F.s[k] * _blas.dot(<_blas.blas_int> d1, F.U + k * d1, self.m.ap)
        return acc

    def predict_one(self, x):
        """<X, M> for one sample (the forms of :meth:`learn_one`); a float."""
        return self._one(x, 0.0, False)

    # -- the state, read -----------------------------------------------------------
    def _array(self, int which):
        # a copy of U (0), s (1) or V (2) of the live factors
        cdef Factors *F = &self.f[self.live]
        cdef Py_ssize_t r = self.rank
        cdef double[::1] out
        if which == 0:
            arr = np.empty((r, self.d1))
            out = arr.reshape(-1)
            memcpy(&out[0], F.U, r * self.d1 * sizeof(double))
        elif which == 1:
            arr = np.empty(r)
            out = arr
            memcpy(&out[0], F.s, r * sizeof(double))
        else:
            arr = np.empty((r, self.d2))
            out = arr.reshape(-1)
            memcpy(&out[0], F.V, r * self.d2 * sizeof(double))
        return arr

    def _read(self, int which):
        lock_enter(&self._lock, "LowRankState")
        try:
            return self._array(which)
        finally:
            lock_leave(&self._lock)

    @property
    def U(self):
        """Left singular vectors as rows, shape (rank, d1) (a copy); rows of
        unused directions (singular value 0) are 0."""
        return self._read(0)

    @property
    def s(self):
        """Singular values, descending, 0 for unused directions (a copy)."""
        return self._read(1)

    @property
    def V(self):
        """Right singular vectors as rows, shape (rank, d2) (a copy)."""
        return self._read(2)

    @property
    def coef(self):
        """The iterate M = U^T diag(s) V, shape (d1, d2) (a new array)."""
        cdef double[::1] out
        lock_enter(&self._lock, "LowRankState")
        try:
            U, s, V = self._array(0), self._array(1), self._array(2)
        finally:
            lock_leave(&self._lock)
        return (U.T * s) @ V

    @property
    def n_seen(self):
        """Samples received."""
        return self._field("n_seen")

    @property
    def n_updates(self):
        """Steps taken (the statistical schedule's warm-up takes none)."""
        return self._field("n_updates")

    @property
    def loss(self):
        """Prequential loss: each sample's loss under the iterate before its step."""
        return self._field("loss")

    def _field(self, name):
        cdef double v
        lock_enter(&self._lock, "LowRankState")
        try:
            v = (<double *> &self.st)[STATE_FIELDS.index(name)]
        finally:
            lock_leave(&self._lock)
        return int(v) if name in ("n_seen", "n_updates") else v

    @property
    def schedule_state(self):
        """The schedule's phase, last stepsize, switch time, D0, b0, Cl and
        restarts (a dict)."""
        lock_enter(&self._lock, "LowRankState")
        try:
            return {"phase": int(self.st.phase), "stepsize": self.st.last_eta,
                    "t_switch": int(self.st.t_switch), "d0": self.st.d0, "b0": self.st.b0,
                    "cl": self.st.cl, "restarts": int(self.st.n_restarts)}
        finally:
            lock_leave(&self._lock)

    # -- copies, pickling, the safe format -----------------------------------------
    cdef dict _state_dict(self):
        cdef double *sf = <double *> &self.st
        cdef double *pf = <double *> &self.p
        cdef Py_ssize_t i, fill = <Py_ssize_t> self.st.fill
        window = np.zeros(self.wcap)
        for i in range(fill):
            window[i] = self.win[i]      # the tail past `fill` is not state
        return {"format_version": FORMAT_VERSION, "d1": int(self.d1), "d2": int(self.d2),
                "rank": int(self.rank), "U": self._array(0), "s": self._array(1),
                "V": self._array(2),
                "schedule": np.array([sf[i] for i in range(N_STATE)]),
                "schedule_fields": " ".join(STATE_FIELDS),
                "params": np.array([pf[i] for i in range(N_PARAMS)]),
                "params_fields": " ".join(PARAMS_FIELDS), "window": window}

    def to_state(self):
        """The whole state as a dict of ints, strings and float64 arrays
        (what pickling and ``streamfit.save`` store); :meth:`from_state`
        checks and loads it.

        Examples
        --------
        >>> from streamfit._kernels._lowrank import LowRankState, KIND_CONSTANT
        >>> st = LowRankState((3, 2), 1, {"kind": KIND_CONSTANT, "c": 0.1, "tau": 0.5})
        >>> sorted(st.to_state())[:4]
        ['U', 'V', 'd1', 'd2']
        >>> LowRankState.from_state(st.to_state()).shape
        (3, 2)
        """
        lock_enter(&self._lock, "LowRankState")
        try:
            return self._state_dict()
        finally:
            lock_leave(&self._lock)

    @classmethod
    def from_state(cls, state):
        """A LowRankState from :meth:`to_state`'s dict, every field checked
        (type, dtype, shape, range, finiteness, consistency) before anything
        is allocated to its declared size: a ValueError (TypeError for a
        wrong type) names the field of a corrupted or foreign state."""
        cdef LowRankState new
        cdef SGDState s
        cdef SGDParams p
        cdef double *sf = <double *> &s
        cdef double *pf = <double *> &p
        cdef const double[::1] wv
        cdef Py_ssize_t i, r, d1, d2, wcap
        if not isinstance(state, dict):
            raise TypeError(f"LowRankState state: a {type(state).__name__}, expected a dict "
                            "(a corrupted or foreign state?)")
        keys = set(state)
        if keys != _KEYS:
            raise ValueError(f"LowRankState state: missing {sorted(_KEYS - keys)}, unknown "
                             f"{sorted(map(str, keys - _KEYS))} (a corrupted or foreign "
                             "state?)")
        # the type first: an edited field (an array) must get these messages,
        # not numpy's "truth value of an array is ambiguous"
        if type(state["format_version"]) is not int or \
                state["format_version"] != FORMAT_VERSION:
            raise ValueError(f"LowRankState state: format_version {state['format_version']!r}, "
                             f"this streamfit reads {FORMAT_VERSION} only")
        for name in ("d1", "d2", "rank"):
            v = state[name]
            if type(v) is not int or not 1 <= v <= 2 ** 31 - 1:
                raise ValueError(f"LowRankState state: field {name!r} is {v!r}, expected an "
                                 "integer in [1, 2^31) (a corrupted or foreign state?)")
        d1, d2, r = state["d1"], state["d2"], state["rank"]
        if r > min(d1, d2):
            raise ValueError(f"LowRankState state: field 'rank' is {r}, above min(d1, d2) = "
                             f"{min(d1, d2)} (a corrupted or foreign state?)")
        for name, fields in (("schedule_fields", STATE_FIELDS),
                             ("params_fields", PARAMS_FIELDS)):
            if type(state[name]) is not str or state[name] != " ".join(fields):
                raise ValueError(f"LowRankState state: field {name!r} does not list this "
                                 "streamfit's record fields (a state of another version?)")
        U = _checked(state, "U", (r, d1), True)
        sv = _checked(state, "s", (r,), True)
        V = _checked(state, "V", (r, d2), True)
        rec = _checked(state, "schedule", (N_STATE,), False)
        par = _checked(state, "params", (N_PARAMS,), False)
        for i in range(N_STATE):
            sf[i] = rec[i]
        for i in range(N_PARAMS):
            pf[i] = par[i]
        wcap = window_size(&p) if (p.kind == KIND_STATISTICAL and p.window >= 0 and
                                   p.n_warmup >= 0 and p.window < MAX_COUNT and
                                   p.n_warmup < MAX_COUNT) else 0
        window = _checked(state, "window", (wcap,), True)
        check_params(&p, &s, wcap, "state")
        wv = window
        check_window(wv, &s, "state")
        _check_factors(U, sv, V)
        new = cls((d1, d2), r, {name: pf[i] for i, name in enumerate(PARAMS_FIELDS)})
        new.st = s
        new._load(U, sv, V, window)
        return new

    cdef _load(self, U, sv, V, window):
        cdef Factors *F = &self.f[self.live]
        cdef const double[::1] u = U.reshape(-1)
        cdef const double[::1] s = sv
        cdef const double[::1] v = V.reshape(-1)
        cdef const double[::1] w = window
        memcpy(F.U, &u[0], self.rank * self.d1 * sizeof(double))
        memcpy(F.s, &s[0], self.rank * sizeof(double))
        memcpy(F.V, &v[0], self.rank * self.d2 * sizeof(double))
        if self.wcap:
            memcpy(self.win, &w[0], self.wcap * sizeof(double))

    def copy(self):
        """An independent copy."""
        cdef LowRankState new
        cdef int k
        lock_enter(&self._lock, "LowRankState")
        try:
            new = LowRankState((self.d1, self.d2), self.rank, {
                name: (<double *> &self.p)[i] for i, name in enumerate(PARAMS_FIELDS)})
            new.st = self.st
            new._load(self._array(0), self._array(1), self._array(2),
                      np.asarray(<double[:max(self.wcap, 1)]> self.win)[:self.wcap].copy())
            return new
        finally:
            lock_leave(&self._lock)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return _rebuild, (FORMAT_VERSION, self.to_state())

    def __repr__(self):
        return (f"LowRankState(shape=({self.d1}, {self.d2}), rank={self.rank}, "
                f"n_seen={self.n_seen})")


def _checked(dict state, str name, tuple shape, bint finite):
    # state[name] as a C-ordered float64 array of exactly `shape` (a copy)
    a = state[name]
    if type(a) is not np.ndarray or a.dtype != np.float64:
        raise ValueError(f"LowRankState state: field {name!r} is not a float64 array (a "
                         "corrupted or foreign state?)")
    if a.shape != shape:
        raise ValueError(f"LowRankState state: field {name!r} has shape {a.shape}, expected "
                         f"{shape} (a corrupted or foreign state?)")
    a = np.ascontiguousarray(a).copy()
    if finite and not np.isfinite(a).all():
        raise ValueError(f"LowRankState state: field {name!r} holds a non-finite value (a "
                         "corrupted or foreign state?)")
    return a


def _refuse_nonfinite_x(X, name):
    # X: an array or a pair (A, B) of arrays; the PCA states' check, part by part
    from streamfit._kernels._pca import _finite_or_raise
    for part in (X if isinstance(X, tuple) else (X,)):
        _finite_or_raise(np.asarray(part, dtype=np.float64), name)


def _check_factors(U, s, V):
    # s: >= 0, descending, the zeros last; rows of U, V orthonormal where s > 0
    # and zero where s == 0
    k = int(np.count_nonzero(s > 0))
    if (s < 0).any() or (np.diff(s) > 0).any() or (s[k:] != 0).any() or (s >= 1e300).any():
        raise ValueError("LowRankState state: field 's' must hold singular values in "
                         "[0, 1e300) in descending order (a corrupted or foreign state?)")
    for name, F in (("U", U), ("V", V)):
        if F[k:].any():
            raise ValueError(f"LowRankState state: field {name!r} has a nonzero row for a "
                             "zero singular value (a corrupted or foreign state?)")
        with np.errstate(all="ignore"):
            G = F[:k] @ F[:k].T
        if not np.allclose(G, np.eye(k), rtol=0, atol=1e-8):
            raise ValueError(f"LowRankState state: field {name!r}'s rows are not orthonormal "
                             "(a corrupted or foreign state?)")
