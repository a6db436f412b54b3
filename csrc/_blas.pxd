# The one door to BLAS/LAPACK: every kernel calls these wrappers, nothing else
# names a BLAS routine. scipy's .pxd signatures take non-const pointers, so the
# casts live here, once.
from scipy.linalg.cython_blas cimport ddot, daxpy, dgemv

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
