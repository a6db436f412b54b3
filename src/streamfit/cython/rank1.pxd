# The eigendecomposition of A + rho x x^T from that of A, as one merge step of
# divide and conquer does it (LAPACK's dlaed2 + dlaed3 for a single block):
# O(n K^2) flops, K <= n the size of the block that deflation leaves, instead
# of a new decomposition's ~4 n^3.
#
#   A = U^T diag(d) U, U's rows the eigenvectors (C-order, n x n), d ascending.
#
#   cdef Rank1Work ws
#   code = rank1_work_init(&ws, n)              # ERR_NOMEM or OK; free either way
#   code = rank1_update(&ws, n, U, d, x, rho, mu, &block)
#   # OK: the new rows are in ws.Unew (n x n), the new eigenvalues in mu
#   rank1_work_free(&ws)
#
# Nothing the caller owns changes before the secular equation succeeded: on
# ERR_LAPACK (dlaed4 failed) U and d are as they were, for the caller to fall
# back to a full eigendecomposition (streamfit.cython.eigen).


ctypedef struct Rank1Work:
    # Read `Unew` after a successful update; the other fields are the solver's own.
    int n
    double *z
    double *dd
    double *dlamda
    double *zk
    double *lam
    double *zhat
    double *rc
    double *rs
    int *rp
    int *rq
    int *kept
    int *defl
    int *ordl
    double *Q
    double *H
    double *Unew       # n x n: the result's rows (eigenvectors, C-order)


cdef int rank1_work_init(Rank1Work *ws, int n) noexcept nogil
    # All work space for updates of order n up front (an update then
    # allocates nothing). OK or ERR_NOMEM; call rank1_work_free in both cases.

cdef void rank1_work_free(Rank1Work *ws) noexcept nogil
    # Frees every buffer and zeroes the struct.

cdef int rank1_update(Rank1Work *ws, int n, double *U, const double *d, const double *x,
                      double rho, double *mu, int *block) noexcept nogil
    # The eigendecomposition of U^T diag(d) U + rho x x^T (rho > 0): new rows
    # into ws.Unew, eigenvalues ascending into mu, the size K of the block
    # deflation kept into block. OK: U's rows were rotated (scratch now).
    # ERR_LAPACK: U, d as they were.
