# Online low-rank matrix regression (quantile or least squares) by Riemannian
# sub-gradient descent on the manifold of rank-r matrices: Section 5 of
# Shen, Xia & Zhou, "Online Quantile Regression", JMLR 2025.
#
# The iterate is M = U diag(s) V^T with U (d1 x r), V (d2 x r) orthonormal,
# kept as C-order (r, d1) and (r, d2) arrays (rows are the singular vectors,
# i.e. column-major d1 x r and d2 x r matrices for BLAS/LAPACK). One sample's
# step: the residual y - <X, M>, the sub-gradient G = g X, its projection on
# the tangent space at M, P_T(G) = U U^T G + G V V^T - U U^T G V V^T, a step,
# and the retraction to rank r through the factored form
#     M - eta P_T(G) = [U Qu] K [V Qv]^T,   K (2r x 2r, or (r+1) x (r+1)),
# an SVD of the small core K and two products with its singular vectors:
# never a d1 x d2 SVD once M has rank r. Rank-one sensing (X = a b^T, and
# matrix completion, X = e_i e_j^T) costs O((d1 + d2) r^2) a step; dense X
# costs O(d1 d2 r) (reading X).
#
# A rank-deficient iterate (the start, M = 0) has zero columns in U and V
# (and zero singular values). Its step uses the projection on the tangent
# cone of the rank <= r matrices (Schneider & Uschmajew 2015): the tangent
# part at the rank-k point plus the best rank-(r - k) part of
# (I - UU^T) G (I - VV^T). For rank-one X that part is a rank-one
# matrix whose factors complete the basis; for dense X it takes a d1 x d2 SVD,
# so only while M has rank < r (generically the first update only).
#
# The loss, the stepsize schedule and the state's bookkeeping are the vector
# family's single-sample row, the same code (quantile_row, cimported from
# _qr_schedule.pxd, records included: STATE_DTYPE and PARAMS_DTYPE are the
# vector kernel's; no intercept, weight 1), with d the manifold's
# dimension d_eff = r (d1 + d2 - r) and ||x||^2 standing for ||P_T X||^2 ~ d_eff ||X||^2
# / (d1 d2), so that Cl is the mean eigenvalue of E[vec X vec X^T] as in the
# vector case. tests/lowrank checks that it gives the same stepsizes as
# streamfit._kernels._quantile.schedule_step.
import numpy as np

from cpython.buffer cimport PyBuffer_Release
from libc.math cimport fabs, sqrt
from libc.float cimport DBL_MAX, DBL_EPSILON
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy, memset

from _common cimport (OK, ERR_NOMEM, ERR_LAPACK, ERR_INTERRUPTED, ERR_NONFINITE,
                      ERR_BADINPUT, ERR_SCALE, ERR_LAYOUT)
from _qr_schedule cimport (SGDState, SGDParams, KIND_CONSTANT, KIND_INVERSE_TIME,
                           KIND_STATISTICAL, schedule_enums, record_dtypes,
                           default_params, NO_UPDATE, quantile_row)
from _records cimport (Records, take_records, give_records, get_record, result,
                      check_sgd_records, check_window)
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_stop, \
    poll_final
cimport _blas

# Schedule kinds, losses and modes (the records' fields) for Python.
globals().update(schedule_enums())

cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Test hook: poll before every sample and raise the signal ``signum``
    with C's raise() at poll number ``polls`` (0-based) of the main thread,
    once; then poll as usual again. The signal's Python handler decides what
    happens (a raising handler stops the kernel). ``polls=-1`` disarms."""
    arm_hook(&_hook, polls, signum)


STATE_DTYPE, PARAMS_DTYPE = record_dtypes()


def new_state():
    """A fresh (zeroed) state record."""
    return np.zeros(1, STATE_DTYPE)


def new_params():
    """A parameter record, NaN where "estimate from the stream" is meant."""
    return default_params(PARAMS_DTYPE)


# ----------------------------------------------------------------------------
# The low-rank iterate and its step.

cdef struct LR:
    Py_ssize_t d1, d2, r, m          # m: the core's order, r + 1 (rank one) or 2r (dense)
    double *U                        # (r, d1): rows are the left singular vectors
    double *s                        # (r,) singular values, descending, 0 when inactive
    double *V                        # (r, d2)
    double *alpha                    # (2r,) U a, then scratch
    double *beta                     # (2r,) V b
    double *tmp                      # (2r,)
    double *ap                       # (d1,) a, then a - U U^T a
    double *bp                       # (d2,)
    double *ea                       # (d1,) e_i (completion), zero between samples
    double *eb                       # (d2,) e_j
    double *Ue                       # (m, d1): [U, Qu] column-major d1 x m
    double *Ve                       # (m, d2)
    double *K                        # (m, m) the core; destroyed by the SVD
    double *W                        # (m, m) its left singular vectors
    double *ZT                       # (m, m) its right ones, transposed
    double *sv                       # (m,)
    double *work                     # LAPACK work space
    _blas.blas_int lwork
    # dense only
    double *B                        # (r, d1): X V, then (I - UU^T) X V
    double *A                        # (r, d2): X^T U, then (I - VV^T) X^T U
    double *C                        # (r, r): U^T X V
    double *R                        # (r, r)
    double *qtau                     # (r,)
    double *Y                        # (d1, d2) the rank-deficient start's residual part
    double *ysv                      # min(d1, d2)
    double *yu                       # (min, d2)
    double *yvt                      # (d1, min) column-major min x d1


cdef int lr_init(LR *m, Py_ssize_t d1, Py_ssize_t d2, Py_ssize_t r, bint dense,
                 double *U, double *s, double *V) noexcept nogil:
    # Every work space of one call, before any state changes (ERR_NOMEM
    # leaves everything untouched). lr_free is safe on a partial init.
    cdef Py_ssize_t mm = 2 * r if dense else r + 1, mn = d1 if d1 < d2 else d2, k, dd
    cdef double q = 0.0
    cdef _blas.blas_int lw = 0
    memset(m, 0, sizeof(LR))
    m.d1, m.d2, m.r, m.m = d1, d2, r, mm
    m.U, m.s, m.V = U, s, V
    m.alpha = <double *> malloc(2 * r * sizeof(double))
    m.beta = <double *> malloc(2 * r * sizeof(double))
    m.tmp = <double *> malloc(2 * r * sizeof(double))
    m.ap = <double *> malloc(d1 * sizeof(double))
    m.bp = <double *> malloc(d2 * sizeof(double))
    m.ea = <double *> calloc(d1, sizeof(double))
    m.eb = <double *> calloc(d2, sizeof(double))
    m.Ue = <double *> malloc(mm * d1 * sizeof(double))
    m.Ve = <double *> malloc(mm * d2 * sizeof(double))
    m.K = <double *> malloc(mm * mm * sizeof(double))
    m.W = <double *> malloc(mm * mm * sizeof(double))
    m.ZT = <double *> malloc(mm * mm * sizeof(double))
    m.sv = <double *> malloc(mm * sizeof(double))
    if (m.alpha == NULL or m.beta == NULL or m.tmp == NULL or m.ap == NULL or m.bp == NULL or m.ea == NULL or m.eb == NULL
            or m.Ue == NULL or m.Ve == NULL or m.K == NULL or m.W == NULL or m.ZT == NULL
            or m.sv == NULL):
        return ERR_NOMEM
    # work space: the core's SVD, and (dense) the QRs and the start's SVD
    _blas.gesvd_thin(<_blas.blas_int> mm, <_blas.blas_int> mm, m.K, <_blas.blas_int> mm,
                     m.sv, m.W, <_blas.blas_int> mm, m.ZT, <_blas.blas_int> mm, &q, -1)
    lw = <_blas.blas_int> q
    if dense:
        m.B = <double *> malloc(r * d1 * sizeof(double))
        m.A = <double *> malloc(r * d2 * sizeof(double))
        m.C = <double *> malloc(r * r * sizeof(double))
        m.R = <double *> malloc(r * r * sizeof(double))
        m.qtau = <double *> malloc(r * sizeof(double))
        m.Y = <double *> malloc(d1 * d2 * sizeof(double))
        m.ysv = <double *> malloc(mn * sizeof(double))
        m.yu = <double *> malloc(mn * d2 * sizeof(double))
        m.yvt = <double *> malloc(mn * d1 * sizeof(double))
        if (m.B == NULL or m.A == NULL or m.C == NULL or m.R == NULL or m.qtau == NULL
                or m.Y == NULL or m.ysv == NULL or m.yu == NULL or m.yvt == NULL):
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
    m.lwork = lw if lw > 1 else 1
    m.work = <double *> malloc(m.lwork * sizeof(double))
    if m.work == NULL:
        return ERR_NOMEM
    return OK


cdef void lr_free(LR *m) noexcept nogil:
    free(m.alpha); free(m.beta); free(m.tmp); free(m.ap); free(m.bp); free(m.ea); free(m.eb); free(m.Ue)
    free(m.Ve); free(m.K); free(m.W); free(m.ZT); free(m.sv); free(m.work)
    free(m.B); free(m.A); free(m.C); free(m.R); free(m.qtau); free(m.Y); free(m.ysv)
    free(m.yu); free(m.yvt)


cdef inline Py_ssize_t active_rank(const LR *m) noexcept nogil:
    cdef Py_ssize_t k = 0
    while k < m.r and m.s[k] > 0:
        k += 1
    return k


cdef inline double project_out(const double *Q, Py_ssize_t r, Py_ssize_t d, double *x,
                               double *coef, double *tmp) noexcept nogil:
    # x -= Q^T (Q x) twice (classical Gram-Schmidt with one re-orthogonalization,
    # enough for orthonormal rows Q); coef += the coefficients taken; ||x||.
    cdef Py_ssize_t k
    _blas.gemv_rows(<_blas.blas_int> r, <_blas.blas_int> d, 1.0, Q, x, 0.0, tmp)
    _blas.gemv_rows_t(<_blas.blas_int> r, <_blas.blas_int> d, -1.0, Q, tmp, 1.0, x)
    for k in range(r):
        coef[k] += tmp[k]
    _blas.gemv_rows(<_blas.blas_int> r, <_blas.blas_int> d, 1.0, Q, x, 0.0, tmp)
    _blas.gemv_rows_t(<_blas.blas_int> r, <_blas.blas_int> d, -1.0, Q, tmp, 1.0, x)
    for k in range(r):
        coef[k] += tmp[k]
    return _blas.nrm2(<_blas.blas_int> d, x)


cdef int retract(LR *m) noexcept nogil:
    # M = Ue K Ve^T (Ue: d1 x m, Ve: d2 x m, K: m x m, column-major) to its best
    # rank-r approximation: U = Ue W_r, s = sv_r, V = Ve Z_r. Singular values
    # at rounding level (a rank-deficient core) are set to 0 with their
    # vectors, so the iterate's rank stays what its nonzero s say.
    cdef Py_ssize_t k, r = m.r, mm = m.m
    cdef _blas.blas_int info
    cdef double tol
    info = _blas.gesvd_thin(<_blas.blas_int> mm, <_blas.blas_int> mm, m.K,
                            <_blas.blas_int> mm, m.sv, m.W, <_blas.blas_int> mm, m.ZT,
                            <_blas.blas_int> mm, m.work, m.lwork)
    if info != 0:
        return ERR_LAPACK
    _blas.gemm(b'N', b'N', <_blas.blas_int> m.d1, <_blas.blas_int> r, <_blas.blas_int> mm,
               1.0, m.Ue, <_blas.blas_int> m.d1, m.W, <_blas.blas_int> mm, 0.0, m.U,
               <_blas.blas_int> m.d1)
    _blas.gemm(b'N', b'T', <_blas.blas_int> m.d2, <_blas.blas_int> r, <_blas.blas_int> mm,
               1.0, m.Ve, <_blas.blas_int> m.d2, m.ZT, <_blas.blas_int> mm, 0.0, m.V,
               <_blas.blas_int> m.d2)
    tol = m.sv[0] * mm * DBL_EPSILON
    for k in range(r):
        if m.sv[k] > tol:
            m.s[k] = m.sv[k]
        else:
            m.s[k] = 0.0
            memset(m.U + k * m.d1, 0, m.d1 * sizeof(double))
            memset(m.V + k * m.d2, 0, m.d2 * sizeof(double))
    return OK


cdef inline double rank1_pred(LR *m, const double *a, const double *b) noexcept nogil:
    # <a b^T, M> = (U a)' diag(s) (V b); leaves U a, V b in alpha, beta
    cdef Py_ssize_t k
    cdef double acc = 0.0
    _blas.gemv_rows(<_blas.blas_int> m.r, <_blas.blas_int> m.d1, 1.0, m.U, a, 0.0, m.alpha)
    _blas.gemv_rows(<_blas.blas_int> m.r, <_blas.blas_int> m.d2, 1.0, m.V, b, 0.0, m.beta)
    for k in range(m.r):
        acc += m.alpha[k] * m.s[k] * m.beta[k]
    return acc


cdef int rank1_step(LR *m, const double *a, const double *b, double na0, double nb0,
                    double c) noexcept nogil:
    # M <- SVD_r(M + c P(a b^T)), P the projection on the tangent space (the
    # tangent cone while rank(M) < r); alpha, beta hold U a, V b. na0, nb0:
    # ||a||, ||b||. With a_p = (I - UU^T) a, b_p likewise,
    #   M + c P(a b^T) = [U, a_p/|a_p|] K [V, b_p/|b_p|]^T,
    #   K = [[diag(s) + c alpha beta^T, c |b_p| alpha], [c |a_p| beta^T, 0]].
    cdef Py_ssize_t d1 = m.d1, d2 = m.d2, r = m.r, mm = m.m, i, j, k
    cdef double na, nb
    memcpy(m.ap, a, d1 * sizeof(double))
    memcpy(m.bp, b, d2 * sizeof(double))
    # alpha, beta afresh as the coefficients the projections take (U a plus
    # the re-orthogonalization's correction)
    memset(m.alpha, 0, r * sizeof(double))
    memset(m.beta, 0, r * sizeof(double))
    na = project_out(m.U, r, d1, m.ap, m.alpha, m.tmp)
    nb = project_out(m.V, r, d2, m.bp, m.beta, m.tmp)
    # parts at rounding level: a (or b) lies in the basis' span
    if not (na > 1e-13 * na0):
        na = 0.0
    if not (nb > 1e-13 * nb0):
        nb = 0.0
    k = active_rank(m)
    if k < r and na > 0 and nb > 0:
        # rank-deficient: the tangent cone adds c a_p b_p^T, which completes
        # the basis with one direction each side (zero singular value for now)
        for i in range(d1):
            m.U[k * d1 + i] = m.ap[i] / na
        for j in range(d2):
            m.V[k * d2 + j] = m.bp[j] / nb
        m.alpha[k] = na
        m.beta[k] = nb
        na = nb = 0.0
    memcpy(m.Ue, m.U, r * d1 * sizeof(double))
    memcpy(m.Ve, m.V, r * d2 * sizeof(double))
    for i in range(d1):
        m.Ue[r * d1 + i] = m.ap[i] / na if na > 0 else 0.0
    for j in range(d2):
        m.Ve[r * d2 + j] = m.bp[j] / nb if nb > 0 else 0.0
    for j in range(r):
        for i in range(r):
            m.K[i + j * mm] = c * m.alpha[i] * m.beta[j]
        m.K[j + j * mm] += m.s[j]
        m.K[r + j * mm] = c * na * m.beta[j]
        m.K[j + r * mm] = c * nb * m.alpha[j]
    m.K[r + r * mm] = 0.0
    return retract(m)


cdef double dense_products(LR *m, const double *X) noexcept nogil:
    # B = X V, A = X^T U, C = U^T X V (column-major d1 x r, d2 x r, r x r);
    # returns <X, M> = sum_k s_k C_kk. X: C-order (d1, d2), i.e. column-major
    # d2 x d1 (X^T).
    cdef Py_ssize_t k, d1 = m.d1, d2 = m.d2, r = m.r
    cdef double acc = 0.0
    _blas.gemm(b'T', b'N', <_blas.blas_int> d1, <_blas.blas_int> r, <_blas.blas_int> d2,
               1.0, X, <_blas.blas_int> d2, m.V, <_blas.blas_int> d2, 0.0, m.B,
               <_blas.blas_int> d1)
    _blas.gemm(b'N', b'N', <_blas.blas_int> d2, <_blas.blas_int> r, <_blas.blas_int> d1,
               1.0, X, <_blas.blas_int> d2, m.U, <_blas.blas_int> d1, 0.0, m.A,
               <_blas.blas_int> d2)
    _blas.gemm(b'T', b'N', <_blas.blas_int> r, <_blas.blas_int> r, <_blas.blas_int> d1,
               1.0, m.U, <_blas.blas_int> d1, m.B, <_blas.blas_int> d1, 0.0, m.C,
               <_blas.blas_int> r)
    for k in range(r):
        acc += m.s[k] * m.C[k + k * r]
    return acc


cdef int complete_dense(LR *m, const double *X, Py_ssize_t k) noexcept nogil:
    # Rank k < r: the inactive columns of U, V take the top r - k singular
    # pairs of (I - UU^T) X (I - VV^T) (the tangent cone's extra part), by one
    # SVD of a d1 x d2 matrix. B, A, C are those of the current U, V.
    cdef Py_ssize_t d1 = m.d1, d2 = m.d2, r = m.r, mn = d1 if d1 < d2 else d2, i, j
    cdef _blas.blas_int info
    cdef double tol
    # Y^T (column-major d2 x d1) = X^T - A U^T - V B^T + V C^T U^T
    memcpy(m.Y, X, d1 * d2 * sizeof(double))
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> d1, <_blas.blas_int> r,
               -1.0, m.A, <_blas.blas_int> d2, m.U, <_blas.blas_int> d1, 1.0, m.Y,
               <_blas.blas_int> d2)
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> d1, <_blas.blas_int> r,
               -1.0, m.V, <_blas.blas_int> d2, m.B, <_blas.blas_int> d1, 1.0, m.Y,
               <_blas.blas_int> d2)
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> r, <_blas.blas_int> r,
               1.0, m.V, <_blas.blas_int> d2, m.C, <_blas.blas_int> r, 0.0, m.Ve,
               <_blas.blas_int> d2)
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> d1, <_blas.blas_int> r,
               1.0, m.Ve, <_blas.blas_int> d2, m.U, <_blas.blas_int> d1, 1.0, m.Y,
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
            m.U[(k + j) * d1 + i] = m.yvt[j + i * mn]
        memcpy(m.V + (k + j) * d2, m.yu + j * d2, d2 * sizeof(double))
    dense_products(m, X)
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


cdef int dense_step(LR *m, const double *X, double c) noexcept nogil:
    # M <- SVD_r(M + c P_T(X)) with B, A, C from dense_products (and the
    # basis completed if rank(M) < r). With Up = (I - UU^T) X V = Qu Ru and
    # Vp = (I - VV^T) X^T U = Qv Rv,
    #   M + c P_T(X) = [U, Qu] [[diag(s) + c C, c Rv^T], [c Ru, 0]] [V, Qv]^T.
    cdef Py_ssize_t d1 = m.d1, d2 = m.d2, r = m.r, mm = m.m, i, j
    cdef int code
    cdef double *Qu = m.Ue + r * d1
    cdef double *Qv = m.Ve + r * d2
    # Up = B - U C, Vp = A - V C^T, each projected out twice (rounding)
    memcpy(Qu, m.B, r * d1 * sizeof(double))
    memcpy(Qv, m.A, r * d2 * sizeof(double))
    _blas.gemm(b'N', b'N', <_blas.blas_int> d1, <_blas.blas_int> r, <_blas.blas_int> r,
               -1.0, m.U, <_blas.blas_int> d1, m.C, <_blas.blas_int> r, 1.0, Qu,
               <_blas.blas_int> d1)
    _blas.gemm(b'N', b'T', <_blas.blas_int> d2, <_blas.blas_int> r, <_blas.blas_int> r,
               -1.0, m.V, <_blas.blas_int> d2, m.C, <_blas.blas_int> r, 1.0, Qv,
               <_blas.blas_int> d2)
    for j in range(r):
        project_out(m.U, r, d1, Qu + j * d1, m.alpha, m.beta)
        project_out(m.V, r, d2, Qv + j * d2, m.alpha, m.beta)
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
        m.K[j + j * mm] += m.s[j]
    memcpy(m.Ue, m.U, r * d1 * sizeof(double))
    memcpy(m.Ve, m.V, r * d2 * sizeof(double))
    return retract(m)


# ----------------------------------------------------------------------------
# The sample loop, one per form of X.

cdef enum:
    FORM_DENSE = 0
    FORM_RANK1 = 1
    FORM_INDEX = 2


cdef tuple run(int form, const double *X, const double *A, const double *B,
               const Py_ssize_t *index, const double *y, Py_ssize_t n, Py_ssize_t d1,
               Py_ssize_t d2, Py_ssize_t r, double *U, double *sv, double *V,
               SGDState *s, const SGDParams *p, double *win, Py_ssize_t wcap):
    cdef LR m
    cdef Poll pl
    cdef int code = OK, kind = <int> p.kind
    cdef bint stat = kind == KIND_STATISTICAL
    cdef Py_ssize_t i, row = -1, done = 0, k, pi = 0, pj = 0
    cdef Py_ssize_t deff = r * (d1 + d2 - r)
    cdef double ratio = <double> deff / (<double> d1 * <double> d2)
    cdef double pred, res, c = 0.0, eta = 0.0, xx, na0 = 1.0, nb0 = 1.0, xs
    cdef double step_work
    cdef double *swork = NULL
    cdef const double *a
    cdef const double *b
    if n == 0:
        return result(OK, 0, -1)
    if kind != KIND_CONSTANT and kind != KIND_INVERSE_TIME and not stat:
        return result(ERR_LAYOUT, 0, -1)
    if stat and (wcap < p.window or wcap < p.n_warmup or <Py_ssize_t> s.fill >= wcap):
        return result(ERR_LAYOUT, 0, -1)
    swork = <double *> malloc(max(wcap, 1) * sizeof(double))
    code = ERR_NOMEM if swork == NULL else lr_init(&m, d1, d2, r, form == FORM_DENSE,
                                                    U, sv, V)
    if code != OK:
        lr_free(&m)
        free(swork)
        return result(code, 0, -1)
    if form == FORM_DENSE:
        step_work = 4.0 * d1 * d2 * r + 64.0 * r * r * r
    else:
        step_work = 8.0 * (d1 + d2) * r * (r + 1) + 64.0 * r * r * r
    poll_init(&pl, &_hook)
    with nogil:
        for i in range(n):
            if poll_stop(&pl, step_work):
                code = ERR_INTERRUPTED
                break
            if form == FORM_DENSE:
                a = X + i * d1 * d2
                pred = dense_products(&m, a)
                xx = _blas.dot(<_blas.blas_int> (d1 * d2), a, a)
            else:
                if form == FORM_RANK1:
                    a = A + i * d1
                    b = B + i * d2
                    na0 = _blas.nrm2(<_blas.blas_int> d1, a)
                    nb0 = _blas.nrm2(<_blas.blas_int> d2, b)
                else:
                    # e_i, e_j in the scratch rows that rank1_step copies from
                    if index[2 * i] < 0 or index[2 * i] >= d1 or index[2 * i + 1] < 0 \
                            or index[2 * i + 1] >= d2:
                        code = ERR_BADINPUT
                        row = i
                        break
                    a = m.ea
                    b = m.eb
                    m.ea[pi] = 0.0          # the last sample's e_i, e_j
                    m.eb[pj] = 0.0
                    pi = index[2 * i]
                    pj = index[2 * i + 1]
                    m.ea[index[2 * i]] = 1.0
                    m.eb[index[2 * i + 1]] = 1.0
                    na0 = nb0 = 1.0
                pred = rank1_pred(&m, a, b)
                xx = na0 * na0 * nb0 * nb0
            res = y[i] - pred
            if not (fabs(res) <= DBL_MAX and xx <= DBL_MAX):
                # the inputs were checked finite: ||X||^2 or y - <X, M> left
                # float64's range (X or y near 1e154 or beyond), a scale error
                code = ERR_SCALE
                row = i
                break
            # the vector kernel's row (_qr_schedule.pxd) with d = d_eff and
            # ||x||^2 = d_eff ||X||^2 / (d1 d2), no intercept, weight 1
            xs = sqrt(xx * ratio)
            code = quantile_row(s, p, win, swork, &xs, 1, deff, res, xs * xs, 1.0, 0.0, False,
                                &c, &eta)
            done = i + 1
            if code == NO_UPDATE:
                code = OK
                continue
            if code != OK:
                break
            if form == FORM_DENSE:
                k = active_rank(&m)
                if k < r:
                    code = complete_dense(&m, a, k)
                    if code != OK:
                        break
                code = dense_step(&m, a, c)
            else:
                code = rank1_step(&m, a, b, na0, nb0, c)
            if code != OK:
                break
            if not (fabs(sv[0]) < 1e300):
                code = ERR_NONFINITE
                break
        if code == OK and poll_final(&pl):
            code = ERR_INTERRUPTED
    lr_free(&m)
    free(swork)
    return result(code, done, row)


cdef int check_shapes(Py_ssize_t n, Py_ssize_t ny, Py_ssize_t d1, Py_ssize_t d2,
                      object U, object sv, object V) except -1:
    if ny != n:
        raise ValueError(f"y must have {n} values (one per sample), got {ny}")
    r = sv.shape[0]
    if r < 1 or U.shape[0] != r or V.shape[0] != r or U.shape[1] != d1 or V.shape[1] != d2:
        raise ValueError(f"U, s, V must have shapes (r, {d1}), (r,), (r, {d2}) with r >= 1, "
                         f"got {U.shape}, {sv.shape}, {V.shape}")
    if r > d1 or r > d2:
        raise ValueError(f"rank {r} exceeds the matrix shape ({d1}, {d2})")
    return 0


def run_dense(const double[:, :, ::1] X, const double[::1] y, double[:, ::1] U,
              double[::1] s, double[:, ::1] V, object state, object params,
              double[::1] window):
    """One step per sample (X[t], y[t]), X of shape (T, d1, d2), on the iterate
    U^T diag(s) V (U (r, d1), V (r, d2): rows are singular vectors), in place.

    ``state``/``params``: records of STATE_DTYPE / PARAMS_DTYPE (the vector
    family's, single mode); ``window`` holds the schedule's residuals
    (max(window, n_warmup) + 1 values). Needs 2 r <= min(d1, d2).

    Returns (code, done, exc, row): ``done`` samples were applied and the
    state holds exactly their effect (when code is OK or ERR_INTERRUPTED;
    other codes leave a partly moved state: work on copies). ERR_BADINPUT:
    sample ``row`` has a non-finite residual or ||X||^2.
    """
    cdef Records rec
    cdef Py_ssize_t n = X.shape[0], d1 = X.shape[1], d2 = X.shape[2]
    check_shapes(n, y.shape[0], d1, d2, U, s, V)
    if 2 * s.shape[0] > min(d1, d2):
        raise ValueError(f"dense X needs 2 r <= min(d1, d2), got r = {s.shape[0]} for "
                         f"({d1}, {d2})")
    take_records(state, STATE_DTYPE, params, PARAMS_DTYPE, &rec)
    try:
        check_sgd_records(<SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                          window.shape[0], 1, "state")
        check_window(window, <SGDState *> rec.state.buf, "state")
        return run(FORM_DENSE, &X[0, 0, 0] if n else NULL, NULL, NULL, NULL,
                   &y[0] if n else NULL, n, d1, d2, s.shape[0], &U[0, 0], &s[0], &V[0, 0],
                   <SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                   &window[0] if window.shape[0] else NULL, window.shape[0])
    finally:
        give_records(&rec)


def run_rank1(const double[:, ::1] A, const double[:, ::1] B, const double[::1] y,
              double[:, ::1] U, double[::1] s, double[:, ::1] V, object state,
              object params, double[::1] window):
    """One step per sample X_t = A[t] B[t]^T (rank-one sensing), as
    :func:`run_dense`; O((d1 + d2) r^2) a step."""
    cdef Records rec
    cdef Py_ssize_t n = A.shape[0], d1 = A.shape[1], d2 = B.shape[1]
    if B.shape[0] != n:
        raise ValueError(f"A and B must have the same number of rows, got {n} and "
                         f"{B.shape[0]}")
    check_shapes(n, y.shape[0], d1, d2, U, s, V)
    take_records(state, STATE_DTYPE, params, PARAMS_DTYPE, &rec)
    try:
        check_sgd_records(<SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                          window.shape[0], 1, "state")
        check_window(window, <SGDState *> rec.state.buf, "state")
        return run(FORM_RANK1, NULL, &A[0, 0] if n else NULL, &B[0, 0] if n else NULL, NULL,
                   &y[0] if n else NULL, n, d1, d2, s.shape[0], &U[0, 0], &s[0], &V[0, 0],
                   <SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                   &window[0] if window.shape[0] else NULL, window.shape[0])
    finally:
        give_records(&rec)


def run_index(const Py_ssize_t[:, ::1] index, const double[::1] y, double[:, ::1] U,
              double[::1] s, double[:, ::1] V, object state, object params,
              double[::1] window):
    """One step per sample X_t = e_i e_j^T, (i, j) = index[t] (matrix
    completion), as :func:`run_rank1`; an index out of range is ERR_BADINPUT
    at its row."""
    cdef Records rec
    cdef Py_ssize_t n = index.shape[0], d1 = U.shape[1], d2 = V.shape[1]
    if index.shape[1] != 2:
        raise ValueError(f"index must have shape (T, 2), got {tuple(index.shape)[:2]}")
    check_shapes(n, y.shape[0], d1, d2, U, s, V)
    take_records(state, STATE_DTYPE, params, PARAMS_DTYPE, &rec)
    try:
        check_sgd_records(<SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                          window.shape[0], 1, "state")
        check_window(window, <SGDState *> rec.state.buf, "state")
        return run(FORM_INDEX, NULL, NULL, NULL, &index[0, 0] if n else NULL,
                   &y[0] if n else NULL, n, d1, d2, s.shape[0], &U[0, 0], &s[0], &V[0, 0],
                   <SGDState *> rec.state.buf, <const SGDParams *> rec.params.buf,
                   &window[0] if window.shape[0] else NULL, window.shape[0])
    finally:
        give_records(&rec)
