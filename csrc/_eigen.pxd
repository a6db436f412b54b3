# Symmetric eigen-solvers that do not fail on a finite matrix: a fallback
# chain over LAPACK's drivers, ending in cyclic Jacobi.
#
# LAPACK's drivers can refuse finite symmetric matrices: dsyevr's MRRR reports
# "internal error" (info > 0) on nearly degenerate spectra -- the diagonal
# cumulative matrices of cyclic streams hit it constantly at n <= 30 -- and
# dsyevd, dsyev can in principle fail to converge. Each solve here tries, in
# order, dsyevr -> dsyevd -> dsyev -> Jacobi, each on a fresh copy of the
# source (drivers destroy their input), and reports ERR_LAPACK only if all of
# them fail, which for a finite matrix Jacobi does not (it needs no
# convergence test beyond the off-diagonal mass shrinking). A non-finite
# matrix is refused (ERR_LAPACK) before any routine runs: on NaN the drivers
# can return NaN with info = 0, or (dsyevr) never return.
#
# Layout as in the kernels: a symmetric n x n matrix is stored with the
# column-major upper triangle valid (the row-major lower one); eigenvectors are
# columns of a column-major block, i.e. C-order rows, eigenvector j at Z + j*ldz.
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from libc.math cimport fabs, sqrt

from _blas cimport blas_int, syevr_top, syevd_all, syev_all
from _common cimport OK, ERR_NOMEM, ERR_LAPACK

cdef enum:
    EIG_EVR = 0       # first routine of a chain: dsyevr (range I)
    EIG_EVD = 1       # dsyevd
    EIG_EV = 2        # dsyev
    EIG_JACOBI = 3    # cyclic Jacobi


ctypedef struct EigWork:
    int n             # largest order this work space serves
    double *work      # dsyevr's and dsyev's workspace
    blas_int lwork
    blas_int *iwork
    blas_int liwork
    blas_int *isuppz
    double *wall      # n: all eigenvalues, for the full-spectrum fallbacks
    double *dwork     # dsyevd's workspace (allocated at init when it is the first
    blas_int dlwork   # routine, else on first use)
    blas_int *diwork
    blas_int dliwork
    double *extra     # n x n, allocated on first use: Jacobi's rotations,
                      # dsyevr's vectors in eig_all
    double fallbacks  # solves that needed a routine after the first
    int last_info     # info of the last LAPACK routine that failed


cdef inline int eig_work_init(EigWork *ws, int n, int m, bint evd_first) noexcept nogil:
    # Work space for solves of order <= n asking for <= m pairs: dsyevr's
    # (queried) and dsyev's (3n), and dsyevd's when it runs every solve
    cdef double wq = 0.0
    cdef blas_int iq = 0, lw = 3 * n + 1, liw = 1
    memset(ws, 0, sizeof(EigWork))
    ws.n = n
    if n <= 0:
        return OK
    if syevr_top(n, NULL, n, m, NULL, NULL, n, NULL, &wq, -1, &iq, -1) == 0:
        lw = max(lw, <blas_int> wq + 1)
        liw = max(liw, iq)
    if m < n and syevr_top(n, NULL, n, n, NULL, NULL, n, NULL, &wq, -1, &iq, -1) == 0:
        lw = max(lw, <blas_int> wq + 1)
        liw = max(liw, iq)
    ws.lwork = lw
    ws.liwork = liw
    ws.work = <double *> malloc(<size_t> lw * sizeof(double))
    ws.iwork = <blas_int *> malloc(<size_t> liw * sizeof(blas_int))
    ws.isuppz = <blas_int *> malloc(<size_t> 2 * n * sizeof(blas_int))
    ws.wall = <double *> malloc(<size_t> n * sizeof(double))
    if ws.work == NULL or ws.iwork == NULL or ws.isuppz == NULL or ws.wall == NULL:
        return ERR_NOMEM
    if evd_first and _evd_alloc(ws) != OK:
        return ERR_NOMEM
    return OK


cdef inline void eig_work_free(EigWork *ws) noexcept nogil:
    free(ws.work); free(ws.iwork); free(ws.isuppz); free(ws.wall)
    free(ws.dwork); free(ws.diwork); free(ws.extra)
    memset(ws, 0, sizeof(EigWork))


cdef inline int _evd_alloc(EigWork *ws) noexcept nogil:
    cdef double wq = 0.0
    cdef blas_int iq = 0, n = ws.n
    if ws.dwork != NULL:
        return OK
    if syevd_all(n, NULL, n, NULL, &wq, -1, &iq, -1) != 0:
        return ERR_LAPACK
    ws.dlwork = <blas_int> wq + 1
    ws.dliwork = iq
    ws.dwork = <double *> malloc(<size_t> ws.dlwork * sizeof(double))
    ws.diwork = <blas_int *> malloc(<size_t> ws.dliwork * sizeof(blas_int))
    if ws.dwork == NULL or ws.diwork == NULL:
        free(ws.dwork); free(ws.diwork)
        ws.dwork = NULL
        ws.diwork = NULL
        return ERR_NOMEM
    return OK


cdef inline int _extra_alloc(EigWork *ws) noexcept nogil:
    if ws.extra == NULL:
        ws.extra = <double *> malloc(<size_t> ws.n * ws.n * sizeof(double))
    return OK if ws.extra != NULL else ERR_NOMEM


cdef inline void _copy_upper(int n, const double *A, int lda, double sc, double *B) noexcept nogil:
    # B (leading dimension n) = sc * A on the upper triangle (the row-major
    # lower one: row j holds columns 0..j)
    cdef Py_ssize_t i, j
    for j in range(n):
        for i in range(j + 1):
            B[j * n + i] = sc * A[j * lda + i]


cdef inline int jacobi(int n, double *A, double *w, double *V, bint vectors) noexcept nogil:
    # Cyclic Jacobi on the symmetric A (upper triangle valid on entry; both
    # triangles used and destroyed): eigenvalues into w (unsorted), the
    # eigenvectors as columns of V (C-order rows) when `vectors`. Each rotation
    # zeroes one off-diagonal pair and lowers the off-diagonal mass by its
    # square, so the sweeps converge for any finite matrix; ERR_LAPACK only if
    # the matrix holds NaN/inf (the mass never shrinks) after 60 sweeps.
    cdef Py_ssize_t i, j, p, q, k
    cdef double off, total, apq, app, aqq, theta, t, c, s, x, y
    cdef int sweep
    for j in range(n):
        for i in range(j):
            A[i * n + j] = A[j * n + i]
    if vectors:
        memset(V, 0, <size_t> n * n * sizeof(double))
        for i in range(n):
            V[i * n + i] = 1.0
    for sweep in range(60):
        off = 0.0
        total = 0.0
        for i in range(n):
            total += A[i * n + i] * A[i * n + i]
            for j in range(i + 1, n):
                off += 2.0 * A[i * n + j] * A[i * n + j]
        total += off
        if not (off == off) or not (total == total):
            return ERR_LAPACK
        if off <= 1e-30 * total or off == 0.0:
            for i in range(n):
                w[i] = A[i * n + i]
            return OK
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p * n + q]
                if apq == 0.0:
                    continue
                app = A[p * n + p]
                aqq = A[q * n + q]
                theta = (aqq - app) / (2.0 * apq)
                if fabs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (fabs(theta) + sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / sqrt(t * t + 1.0)
                s = t * c
                # A <- J^T A J with J the rotation in the (p, q) plane
                for k in range(n):
                    x = A[k * n + p]
                    y = A[k * n + q]
                    A[k * n + p] = c * x - s * y
                    A[k * n + q] = s * x + c * y
                for k in range(n):
                    x = A[p * n + k]
                    y = A[q * n + k]
                    A[p * n + k] = c * x - s * y
                    A[q * n + k] = s * x + c * y
                A[p * n + q] = 0.0
                A[q * n + p] = 0.0
                if vectors:
                    for k in range(n):
                        x = V[p * n + k]
                        y = V[q * n + k]
                        V[p * n + k] = c * x - s * y
                        V[q * n + k] = s * x + c * y
    return ERR_LAPACK


cdef inline void _sort_pairs(int n, double *w, double *V, bint vectors,
                             double *tmp) noexcept nogil:
    # ascending eigenvalues, their vectors (C-order rows of V) alongside;
    # selection sort: O(n^2) moves, for the last-resort path only
    cdef int i, j, best
    cdef double t
    for i in range(n - 1):
        best = i
        for j in range(i + 1, n):
            if w[j] < w[best]:
                best = j
        if best != i:
            t = w[i]
            w[i] = w[best]
            w[best] = t
            if vectors:
                memcpy(tmp, V + i * n, n * sizeof(double))
                memcpy(V + i * n, V + best * n, n * sizeof(double))
                memcpy(V + best * n, tmp, n * sizeof(double))


cdef inline int eig_full_stage(EigWork *ws, int stage, int n, const double *A, int lda,
                               double sc, double *B, bint vectors) noexcept nogil:
    # One full-spectrum routine of the chain on B = sc * A: all eigenvalues
    # ascending in ws.wall and, with `vectors`, the eigenvectors in B's
    # columns. Returns OK, or the routine's failure (info in ws.last_info).
    cdef blas_int info
    cdef int code
    _copy_upper(n, A, lda, sc, B)
    if stage == EIG_EVD:
        if _evd_alloc(ws) != OK:
            return ERR_NOMEM
        info = syevd_all(n, B, n, ws.wall, ws.dwork, ws.dlwork, ws.diwork, ws.dliwork,
                         vectors)
    elif stage == EIG_EV:
        info = syev_all(n, B, n, ws.wall, ws.work, ws.lwork, vectors)
    elif stage == EIG_EVR:
        if vectors and _extra_alloc(ws) != OK:
            return ERR_NOMEM
        info = syevr_top(n, B, n, n, ws.wall, ws.extra, n, ws.isuppz, ws.work, ws.lwork,
                         ws.iwork, ws.liwork, vectors)
        if info == 0 and vectors:
            memcpy(B, ws.extra, <size_t> n * n * sizeof(double))
    else:
        if vectors and _extra_alloc(ws) != OK:
            return ERR_NOMEM
        code = jacobi(n, B, ws.wall, ws.extra, vectors)
        if code != OK:
            ws.last_info = -1
            return code
        # B's diagonal still holds the eigenvalues; its rows are scratch now
        _sort_pairs(n, ws.wall, ws.extra, vectors, B)
        if vectors:
            memcpy(B, ws.extra, <size_t> n * n * sizeof(double))
        return OK
    if info != 0:
        ws.last_info = info
        return ERR_LAPACK
    return OK


cdef inline bint finite_upper(int n, const double *A, int lda) noexcept nogil:
    # Whether the upper triangle (row-major lower) is finite. LAPACK's drivers
    # are not safe on NaN: dsyevd and dsyev can return info = 0 with NaN
    # eigenvalues, and dsyevr's bisection (dlarrb/dlaneg) can loop forever.
    # x * 0 is 0 for finite x and NaN otherwise; one pass, vectorisable.
    cdef Py_ssize_t i, j
    cdef double acc = 0.0
    for j in range(n):
        for i in range(j + 1):
            acc += A[j * lda + i] * 0.0
    return acc == 0.0


cdef inline int eig_top(EigWork *ws, int first, int n, const double *A, int lda, double sc,
                        int m, double *w, double *Z, int ldz, double *B,
                        bint vectors) noexcept nogil:
    # The m largest eigenpairs of sc * A (A symmetric, upper triangle, not
    # changed): eigenvalues ascending in w[0..m-1] (w has room for n: dsyevr
    # works in all of it), eigenvectors in Z's columns
    # (C-order rows, leading dimension ldz) with `vectors`. B is n x n scratch.
    # The chain starts at routine `first` (EIG_EVR normally; tests start later).
    cdef int stage, code = ERR_LAPACK, j
    cdef blas_int info
    if not finite_upper(n, A, lda):
        ws.last_info = 0
        return ERR_LAPACK       # no routine is tried on a non-finite matrix
    for stage in range(first, EIG_JACOBI + 1):
        if stage == EIG_EVR:
            _copy_upper(n, A, lda, sc, B)
            info = syevr_top(n, B, n, m, w, Z, ldz, ws.isuppz, ws.work, ws.lwork, ws.iwork,
                             ws.liwork, vectors)
            if info == 0:
                code = OK
                break
            ws.last_info = info
            code = ERR_LAPACK
            continue
        code = eig_full_stage(ws, stage, n, A, lda, sc, B, vectors)
        if code == OK:
            for j in range(m):
                w[j] = ws.wall[n - m + j]
                if vectors:
                    memcpy(Z + j * ldz, B + (n - m + j) * n, n * sizeof(double))
            break
    if stage > first:
        ws.fallbacks += 1
    return code


cdef inline int eig_all(EigWork *ws, int first, int n, const double *A, int lda,
                        double *w, double *V) noexcept nogil:
    # All eigenpairs of A (upper triangle, not changed): eigenvalues ascending
    # in w, eigenvectors as the C-order rows of V (n x n). The chain starts at
    # routine `first` (MEG/GD: EIG_EVD, the fastest full solver measured).
    cdef int stage, code = ERR_LAPACK, i = 0, nxt
    cdef int order[4]
    if not finite_upper(n, A, lda):
        ws.last_info = 0
        return ERR_LAPACK       # no routine is tried on a non-finite matrix
    # `first`, then the others in the usual order (Jacobi alone if first)
    order[0] = first
    i = 1
    if first != EIG_JACOBI:
        for nxt in range(EIG_EVR, EIG_JACOBI + 1):
            if nxt != first:
                order[i] = nxt
                i += 1
    for stage in range(i):
        code = eig_full_stage(ws, order[stage], n, A, lda, 1.0, V, True)
        if code == OK:
            memcpy(w, ws.wall, n * sizeof(double))
            if stage > 0:
                ws.fallbacks += 1
            return OK
    return code
