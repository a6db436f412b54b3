# A warm-started top-k eigensolver for a symmetric matrix that changes a
# little between solves (Follow the Perturbed Leader's S_t; anything updated
# by low-rank terms): block Krylov in the LOBPCG form, Rayleigh-Ritz on the
# block, its residual and the previous step, until an extrapolated estimate of
# the objective gap lambda_{1:k}(S) - tr(V_k S V_k^T) is below tol; a solve
# that does not converge in `maxiter` iterations goes to LAPACK (the chain of
# streamfit.cython.eigen), and so do the next few. streamfit.kernels.TopK is
# the same solver for Python callers.
#
#   cdef TopKWork w
#   cdef TopKState st          # zeroed: memset(&st, 0, sizeof(TopKState))
#   topk_work_init(&w, n, k, b, maxiter)        # before any state changes
#   topk_exact(&w, S, V, &st)                   # a first block from LAPACK
#   ... S changes ...
#   topk_solve(&w, S, V, &st, tol, hint, seed, True)
#   topk_work_free(&w)
#
# The S products run on w.threads OpenMP threads (set after topk_work_init;
# 1 by default), with the same results on any count.
#
# Layout: S is n x n, row-major, its lower triangle valid (BLAS's column-major
# upper one); V is a C-order (b, n) block of orthonormal rows, the top b
# eigenvector estimates, largest first; the solve targets the captured
# objective of the first k of them, tr(V_k S V_k^T), and keeps b - k more so
# that a near-tie at lambda_k does not stall it.
from streamfit.cython.common cimport blas_int
from streamfit.cython.eigen cimport EigWork


ctypedef struct TopKState:
    long long solves          # solves so far (Krylov or exact)
    long long products        # products S @ block, all solves
    long long fallbacks       # Krylov solves that ran out of iterations: LAPACK then
    long long direct          # solves sent straight to LAPACK by the back-off
    long long skip            # solves left that go straight to LAPACK
    long long backoff         # the next such run's length
    long long eig_fallbacks   # eigenproblems that needed a later routine of the chain
    long long kept            # solves where every routine failed: the block was kept
    double tol                # the gap tolerance of the last solve
    double gap                # its estimated objective gap (0 if exact)
    double max_gap_ratio      # max over Krylov solves of estimated gap / tolerance


ctypedef struct TopKWork:
    # Set `threads` after topk_work_init; the other fields are the solver's own.
    int n, k, b, q, maxiter
    int first
    double *bas
    double *sbas
    double *tmp
    double *G
    double *Y
    double *theta
    double *w
    double *R
    double *P
    double *SP
    double *tau
    double *Sx
    double *Zx
    double *qx
    double *qs
    double *work
    blas_int lwork
    blas_int *iwork
    blas_int liwork
    EigWork eig
    EigWork eig_rr
    int threads      # OpenMP threads for the S products (1 after topk_work_init)


cdef enum:
    # the most Krylov iterations a solve may take before it goes to LAPACK
    TOPK_MAX_ITER = 1000


cdef int topk_work_init(TopKWork *w, int n, int k, int b, int maxiter) noexcept nogil
    # Every buffer a solve may need, allocated before any state changes: OK,
    # or ERR_NOMEM here and never later; call topk_work_free in both cases.
    # 1 <= k <= b <= n, 1 <= maxiter <= TOPK_MAX_ITER.

cdef void topk_work_free(TopKWork *w) noexcept nogil
    # Frees every buffer and zeroes the struct.

cdef int topk_exact(TopKWork *w, const double *S, double *V, TopKState *st) noexcept nogil
    # V = the top-b eigenvectors of S by the eigen-solver chain; if every
    # routine fails (a non-finite S), V is kept as it was and counted in
    # st.kept. Returns OK.

cdef int topk_solve(TopKWork *w, const double *S, double *V, TopKState *st, double tol,
                    const double *hint, unsigned long long seed, bint krylov) noexcept nogil
    # The next block for S: exact (krylov False, or while the back-off lasts)
    # or warm-started from V with objective-gap tolerance tol. hint (n doubles
    # or NULL) is a direction S gained since the last solve; seed fixes the
    # random directions a solve may add. Returns OK (a solve whose
    # eigenproblems all failed keeps V and counts in st.kept).
