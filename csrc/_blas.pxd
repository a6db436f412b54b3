# The one door to BLAS/LAPACK: every kernel calls these wrappers, nothing else
# names a BLAS routine. scipy's .pxd signatures take non-const pointers, so the
# casts live here, once.
from scipy.linalg.cython_blas cimport (ddot, daxpy, dgemv, dgemm, dsymm, dsyr, dsyrk,
                                       dnrm2, dtrsm, drot, dsyr2k, dswap)
from scipy.linalg.cython_lapack cimport (dgeqrf, dorgqr, dsyev, dsyevr, dsyevd, dtrcon,
                                         dlaed4, dgesvd, dlatrd, dsytd2, dsytrd, dstebz,
                                         dstein, dormtr, dlansy, dlamch)

# scipy's ILP64 switch (blas_int) becomes a one-line change here.
ctypedef int blas_int


cdef inline double dot(blas_int n, const double *x, const double *y) noexcept nogil:
    # x @ y
    cdef blas_int one = 1
    return ddot(&n, <double *> x, &one, <double *> y, &one)


cdef inline void axpy(blas_int n, double a, const double *x, double *y) noexcept nogil:
    # y += a * x
    cdef blas_int one = 1
    daxpy(&n, &a, <double *> x, &one, y, &one)


cdef inline void gemv_rows(blas_int m, blas_int n, double alpha, const double *A,
                           const double *x, double beta, double *y) noexcept nogil:
    # y = alpha * A @ x + beta * y, A row-major (m, n): column-major A^T (n, m)
    cdef char trans = b'T'
    cdef blas_int one = 1
    dgemv(&trans, &n, &m, &alpha, <double *> A, &n, <double *> x, &one, &beta, y, &one)


cdef inline void gemv_rows_t(blas_int m, blas_int n, double alpha, const double *A,
                             const double *x, double beta, double *y) noexcept nogil:
    # y = alpha * A.T @ x + beta * y, A row-major (m, n)
    cdef char trans = b'N'
    cdef blas_int one = 1
    dgemv(&trans, &n, &m, &alpha, <double *> A, &n, <double *> x, &one, &beta, y, &one)


# --- Level 3 and LAPACK, column-major. A C-order (b, n) array is a column-major
# n x b matrix with leading dimension n, so the PCA kernels keep their blocks of
# vectors as C-order rows and pass them here unchanged. Symmetric matrices are
# stored full size with only one triangle valid: the column-major upper one,
# which is the row-major lower one (row i holds columns 0..i, contiguously).

cdef inline double nrm2(blas_int n, const double *x) noexcept nogil:
    cdef blas_int one = 1
    return dnrm2(&n, <double *> x, &one)


cdef inline void gemm(char transa, char transb, blas_int m, blas_int n, blas_int k,
                      double alpha, const double *A, blas_int lda, const double *B,
                      blas_int ldb, double beta, double *C, blas_int ldc) noexcept nogil:
    # C = alpha * op(A) @ op(B) + beta * C
    dgemm(&transa, &transb, &m, &n, &k, &alpha, <double *> A, &lda, <double *> B, &ldb,
          &beta, C, &ldc)


cdef inline void symm_upper_ld(blas_int n, blas_int m, double alpha, const double *A,
                               blas_int lda, const double *B, blas_int ldb, double beta,
                               double *C, blas_int ldc) noexcept nogil:
    # symm_upper on blocks inside larger arrays: B and C with their own
    # leading dimensions
    cdef char side = b'L'
    cdef char uplo = b'U'
    dsymm(&side, &uplo, &n, &m, &alpha, <double *> A, &lda, <double *> B, &ldb, &beta,
          C, &ldc)


cdef inline void symm_upper(blas_int n, blas_int m, double alpha, const double *A,
                            blas_int lda, const double *B, double beta,
                            double *C) noexcept nogil:
    # C (n x m) = alpha * A @ B + beta * C, A symmetric n x n read from its upper
    # triangle, B and C with leading dimension n
    symm_upper_ld(n, m, alpha, A, lda, B, n, beta, C, n)


cdef inline void syr_upper(blas_int n, double alpha, const double *x, double *A,
                           blas_int lda) noexcept nogil:
    # A += alpha * x x^T on the upper triangle only
    cdef char uplo = b'U'
    cdef blas_int one = 1
    dsyr(&uplo, &n, &alpha, <double *> x, &one, A, &lda)


cdef inline void axpy_upper(Py_ssize_t n, double a, const double *X, double *S) noexcept nogil:
    # S += a X on the upper triangle of n x n arrays (the row-major lower one)
    cdef Py_ssize_t i
    for i in range(n):
        axpy(<blas_int> (i + 1), a, X + i * n, S + i * n)


cdef inline double rows_dot(blas_int n, blas_int m, const double *Z,
                            const double *Y) noexcept nogil:
    # sum_j z_j^T y_j over the m rows of two C-order (m, n) blocks, in row order
    cdef blas_int j
    cdef double acc = 0.0
    for j in range(m):
        acc += dot(n, Z + j * n, Y + j * n)
    return acc


cdef inline double quad_rows(blas_int n, blas_int m, const double *X, const double *Y,
                             double *Z) noexcept nogil:
    # sum_j y_j^T X y_j over the m rows of Y (a C-order (m, n) block), X
    # symmetric n x n read from its upper triangle; Z holds m x n scratch
    symm_upper(n, m, 1.0, X, n, Y, 0.0, Z)
    return rows_dot(n, m, Z, Y)


cdef inline void syrk_upper(blas_int n, blas_int r, double alpha, const double *A,
                            double beta, double *C) noexcept nogil:
    # C (n x n, upper triangle) = alpha * A @ A^T + beta * C, A column-major n x r
    # with leading dimension n (a C-order (r, n) block of row vectors)
    cdef char uplo = b'U'
    cdef char trans = b'N'
    if r == 0 and beta == 1.0:
        return          # nothing to add
    dsyrk(&uplo, &trans, &n, &r, &alpha, <double *> A, &n, &beta, C, &n)


cdef inline blas_int geqrf(blas_int m, blas_int n, double *A, blas_int lda, double *tau,
                           double *work, blas_int lwork) noexcept nogil:
    # Householder QR in place; lwork = -1 queries the workspace into work[0]
    cdef blas_int info = 0
    dgeqrf(&m, &n, A, &lda, tau, work, &lwork, &info)
    return info


cdef inline blas_int orgqr(blas_int m, blas_int n, double *A, blas_int lda,
                           const double *tau, double *work, blas_int lwork) noexcept nogil:
    # the first n columns of Q from geqrf's reflectors, in place
    cdef blas_int info = 0
    dorgqr(&m, &n, &n, A, &lda, <double *> tau, work, &lwork, &info)
    return info


cdef inline blas_int syevr_top(blas_int n, double *A, blas_int lda, blas_int m,
                               double *w, double *Z, blas_int ldz, blas_int *isuppz,
                               double *work, blas_int lwork, blas_int *iwork,
                               blas_int liwork, bint vectors=True) noexcept nogil:
    # The m largest eigenpairs of the symmetric A (upper triangle; destroyed),
    # ascending in w[0..m-1] and Z's columns (eigenvalues only without
    # `vectors`). lwork = liwork = -1 queries the workspace into work[0] and
    # iwork[0]. m == n asks for all of them.
    cdef char jobz = b'V' if vectors else b'N'
    cdef char rng = b'I' if m < n else b'A'
    cdef char uplo = b'U'
    cdef double vl = 0.0, vu = 0.0, abstol = 0.0
    cdef blas_int il = n - m + 1, iu = n, found = 0, info = 0
    dsyevr(&jobz, &rng, &uplo, &n, A, &lda, &vl, &vu, &il, &iu, &abstol, &found, w, Z,
           &ldz, isuppz, work, &lwork, iwork, &liwork, &info)
    if info == 0 and lwork != -1 and found != m:
        info = -1000      # fewer eigenpairs than asked: a failure too
    return info


cdef inline blas_int syevd_all(blas_int n, double *A, blas_int lda, double *w,
                               double *work, blas_int lwork, blas_int *iwork,
                               blas_int liwork, bint vectors=True) noexcept nogil:
    # All eigenpairs of the symmetric A (upper triangle) by divide and conquer:
    # eigenvalues ascending in w, eigenvectors overwrite A's columns (C-order
    # rows). lwork = liwork = -1 queries the workspace into work[0], iwork[0].
    cdef char jobz = b'V' if vectors else b'N'
    cdef char uplo = b'U'
    cdef blas_int info = 0
    dsyevd(&jobz, &uplo, &n, A, &lda, w, work, &lwork, iwork, &liwork, &info)
    return info


cdef inline blas_int syev_all(blas_int n, double *A, blas_int lda, double *w,
                              double *work, blas_int lwork, bint vectors=True) noexcept nogil:
    # All eigenpairs by the implicit QL/QR algorithm (the oldest and most
    # forgiving driver); eigenvectors overwrite A's columns. lwork >= 3n - 1.
    cdef char jobz = b'V' if vectors else b'N'
    cdef char uplo = b'U'
    cdef blas_int info = 0
    dsyev(&jobz, &uplo, &n, A, &lda, w, work, &lwork, &info)
    return info


cdef inline void trsm_right_upper(blas_int m, blas_int n, const double *A, blas_int lda,
                                  double *B, blas_int ldb) noexcept nogil:
    # B (m x n) := B @ inv(A), A upper triangular n x n
    cdef char side = b'R'
    cdef char uplo = b'U'
    cdef char trans = b'N'
    cdef char diag = b'N'
    cdef double one = 1.0
    dtrsm(&side, &uplo, &trans, &diag, &m, &n, &one, <double *> A, &lda, B, &ldb)


cdef inline double trcon_upper(blas_int n, const double *A, blas_int lda, double *work,
                               blas_int *iwork) noexcept nogil:
    # reciprocal condition number (1-norm estimate) of the upper triangular A;
    # work holds 3n doubles, iwork n ints; 0 if LAPACK fails
    cdef char norm = b'1'
    cdef char uplo = b'U'
    cdef char diag = b'N'
    cdef double rcond = 0.0
    cdef blas_int info = 0
    dtrcon(&norm, &uplo, &diag, &n, <double *> A, &lda, &rcond, work, iwork, &info)
    return rcond if info == 0 else 0.0


# --- the rank-one update of a symmetric eigendecomposition (_rank1.pxd) ------

cdef inline void rot(blas_int n, double *x, double *y, double c, double s) noexcept nogil:
    # the plane rotation (x, y) := (c x + s y, c y - s x)
    cdef blas_int one = 1
    drot(&n, x, &one, y, &one, &c, &s)


cdef inline blas_int laed4(blas_int n, blas_int i, const double *d, const double *z,
                           double *delta, double rho, double *lam) noexcept nogil:
    # The i-th (0-based) eigenvalue of diag(d) + rho z z^T into lam, by the
    # secular equation (d strictly increasing, ||z|| = 1, rho > 0). For n >= 3,
    # delta[j] = d[j] - lam, each difference computed directly, for the
    # eigenvectors by the Gu-Eisenstat formula; n = 1: delta = [1]; n = 2: delta
    # is the eigenvector itself (dlaed5). info > 0: the iteration failed.
    cdef blas_int info = 0, i1 = i + 1
    dlaed4(&n, &i1, <double *> d, <double *> z, delta, &rho, lam, &info)
    return info


cdef inline blas_int gesvd_thin(blas_int m, blas_int n, double *A, blas_int lda, double *s,
                                double *U, blas_int ldu, double *VT, blas_int ldvt,
                                double *work, blas_int lwork) noexcept nogil:
    # Thin SVD A = U diag(s) VT of the column-major m x n A (destroyed) by
    # Golub-Kahan QR iteration: s descending, U m x min(m, n), VT min(m, n) x n.
    # lwork = -1 queries the workspace into work[0].
    cdef char job = b'S'
    cdef blas_int info = 0
    dgesvd(&job, &job, &m, &n, A, &lda, s, U, &ldu, VT, &ldvt, work, &lwork, &info)
    return info


# --- dsyevr's stages, one by one (csrc/_evr_polled.pxd runs them so that a
# long solve can stop between the panels of its tridiagonal reduction) ------

cdef inline blas_int sytrd_block(blas_int n) noexcept nogil:
    # dsytrd's block size (its workspace query returns n * nb)
    cdef char uplo = b'U'
    cdef double wq = 0.0
    cdef blas_int lwork = -1, info = 0
    dsytrd(&uplo, &n, NULL, &n, NULL, NULL, NULL, &wq, &lwork, &info)
    return <blas_int> wq // n if info == 0 and n > 0 else 1


cdef inline double lansy_max_upper(blas_int n, const double *A, blas_int lda,
                                   double *work) noexcept nogil:
    cdef char norm = b'M'
    cdef char uplo = b'U'
    return dlansy(&norm, &uplo, &n, <double *> A, &lda, work)


cdef inline double lamch(char what) noexcept nogil:
    return dlamch(&what)


cdef inline void latrd_upper(blas_int n, blas_int nb, double *A, blas_int lda, double *e,
                             double *tau, double *W, blas_int ldw) noexcept nogil:
    cdef char uplo = b'U'
    dlatrd(&uplo, &n, &nb, A, &lda, e, tau, W, &ldw)


cdef inline void syr2k_upper(blas_int n, blas_int k, double alpha, const double *A,
                             blas_int lda, const double *B, blas_int ldb, double beta,
                             double *C, blas_int ldc) noexcept nogil:
    # C = alpha (A B^T + B A^T) + beta C on the upper triangle
    cdef char uplo = b'U'
    cdef char trans = b'N'
    dsyr2k(&uplo, &trans, &n, &k, &alpha, <double *> A, &lda, <double *> B, &ldb, &beta,
           C, &ldc)


cdef inline blas_int sytd2_upper(blas_int n, double *A, blas_int lda, double *d, double *e,
                                 double *tau) noexcept nogil:
    cdef char uplo = b'U'
    cdef blas_int info = 0
    dsytd2(&uplo, &n, A, &lda, d, e, tau, &info)
    return info


cdef inline blas_int stebz_index(blas_int n, blas_int il, blas_int iu, const double *d,
                                 const double *e, blas_int *m, blas_int *nsplit, double *w,
                                 blas_int *iblock, blas_int *isplit, double *work,
                                 blas_int *iwork) noexcept nogil:
    # eigenvalues il..iu of the tridiagonal (d, e) by bisection, ordered by block
    cdef char rng = b'I'
    cdef char order = b'B'
    cdef double vl = 0.0, vu = 0.0, abstol = 0.0
    cdef blas_int info = 0
    dstebz(&rng, &order, &n, &vl, &vu, &il, &iu, &abstol, <double *> d, <double *> e, m,
           nsplit, w, iblock, isplit, work, iwork, &info)
    return info


cdef inline blas_int stein(blas_int n, const double *d, const double *e, blas_int m,
                           const double *w, const blas_int *iblock, const blas_int *isplit,
                           double *Z, blas_int ldz, double *work, blas_int *iwork,
                           blas_int *ifail) noexcept nogil:
    # the eigenvectors of the tridiagonal for the eigenvalues w, by inverse iteration
    cdef blas_int info = 0
    dstein(&n, <double *> d, <double *> e, &m, <double *> w, <blas_int *> iblock,
           <blas_int *> isplit, Z, &ldz, work, iwork, ifail, &info)
    return info


cdef inline blas_int ormtr_upper(blas_int n, blas_int m, const double *A, blas_int lda,
                                 const double *tau, double *C, blas_int ldc, double *work,
                                 blas_int lwork) noexcept nogil:
    # C = Q C, Q from dsytrd's reflectors (upper)
    cdef char side = b'L'
    cdef char uplo = b'U'
    cdef char trans = b'N'
    cdef blas_int info = 0
    dormtr(&side, &uplo, &trans, &n, &m, <double *> A, &lda, <double *> tau, C, &ldc, work,
           &lwork, &info)
    return info


cdef inline void swap_columns(blas_int n, double *x, double *y) noexcept nogil:
    cdef blas_int one = 1
    dswap(&n, x, &one, y, &one)
