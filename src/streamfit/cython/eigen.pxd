# Symmetric eigen-solvers that do not fail on a finite matrix: a fallback
# chain over LAPACK's drivers, dsyevr -> dsyevd -> dsyev -> cyclic Jacobi,
# each on a fresh copy of the source (drivers destroy their input). ERR_LAPACK
# comes back only if every routine failed, which on a finite matrix Jacobi
# does not; a non-finite matrix is refused (ERR_LAPACK, last_info 0) before
# any routine runs.
#
#   cdef EigWork ws
#   code = eig_work_init(&ws, n, m, False)      # ERR_NOMEM or OK; free either way
#   code = eig_top(&ws, EIG_EVR, n, A, n, 1.0, m, w, Z, n, B, True)
#   eig_work_free(&ws)
#
# Layout: a symmetric n x n matrix stores its row-major lower triangle (BLAS's
# column-major upper one); eigenvectors are C-order rows, eigenvector j at
# Z + j * ldz; eigenvalues ascending.
from streamfit.cython.common cimport blas_int

cdef enum:
    EIG_EVR = 0       # first routine of a chain: dsyevr (range I)
    EIG_EVD = 1       # dsyevd
    EIG_EV = 2        # dsyev
    EIG_JACOBI = 3    # cyclic Jacobi


ctypedef struct EigWork:
    # Read `fallbacks` and `last_info`; the other fields are the solver's own.
    int n             # largest order this work space serves
    double *work
    blas_int lwork
    blas_int *iwork
    blas_int liwork
    blas_int *isuppz
    double *wall
    double *dwork
    blas_int dlwork
    blas_int *diwork
    blas_int dliwork
    double *extra
    double fallbacks  # solves that needed a routine after the first
    int last_info     # info of the last LAPACK routine that failed


cdef int eig_work_init(EigWork *ws, int n, int m, bint evd_first) noexcept nogil
    # Work space for solves of order <= n asking for <= m pairs (with
    # evd_first, dsyevd's too, for chains that start there). OK or ERR_NOMEM;
    # call eig_work_free in both cases.

cdef void eig_work_free(EigWork *ws) noexcept nogil
    # Frees every buffer and zeroes the struct.

cdef int eig_top(EigWork *ws, int first, int n, const double *A, int lda, double sc,
                 int m, double *w, double *Z, int ldz, double *B, bint vectors) noexcept nogil
    # The m largest eigenpairs of sc * A (A symmetric, lower triangle row-major,
    # not changed): eigenvalues ascending in w[0..m-1] (w has room for n),
    # eigenvectors as the rows of Z (leading dimension ldz) with `vectors`.
    # B is n x n scratch. The chain starts at routine `first` (EIG_EVR).

cdef int eig_all(EigWork *ws, int first, int n, const double *A, int lda,
                 double *w, double *V) noexcept nogil
    # All eigenpairs of A (lower triangle row-major, not changed): eigenvalues
    # ascending in w, eigenvectors as the rows of V (n x n). The chain starts
    # at routine `first`, then tries the others in order.
