# A warm-started top-k eigensolver for a symmetric matrix that changes a
# little between solves (Follow the Perturbed Leader's S_t; anything updated by
# low-rank terms), as nogil primitives. The FPL kernel (_pca.pyx) and
# streamfit.kernels.TopK (through _pca_api.pyx) share them; Cython users
# cimport them.
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
# 1 by default), with the same results on any count (_symm_par.pxd).
#
# Layout: S is n x n, row-major, its lower triangle valid (BLAS's column-major
# upper one); V is a C-order (b, n) block of orthonormal rows, the top b
# eigenvector estimates, largest first; the solve targets the captured
# objective of the first k of them, tr(V_k S V_k^T), and keeps b - k more so
# that a near-tie at lambda_k does not stall it.
#
# The method. Block Krylov in the LOBPCG form: Rayleigh-Ritz on span[V, W, P]
# -- the block, its residual W = S V - V Theta and the previous step P -- keeping
# the top b Ritz vectors, until an extrapolated estimate of the objective gap
# lambda_{1:k}(S) - tr(V_k S V_k^T) is below tol. One product S @ block per
# iteration. The basis is made orthonormal by two passes of block
# Gram-Schmidt against V (already orthonormal) and a Householder QR of the
# new columns alone, checked, with a Householder QR of the whole basis where
# the check fails; its small products run in _skinny.h's kernels (AVX-512
# where the CPU has it, else the portable ones). Without convergence after `maxiter` iterations the solve goes to
# LAPACK, and so do the next solves for a while (a back-off that doubles while
# Krylov keeps failing). Every eigenproblem (the small Rayleigh-Ritz one, the
# exact one) goes through _eigen.pxd's chain, which does not fail on finite
# input; should even the chain fail (a non-finite S), the block is kept as it
# was -- still orthonormal -- and counted in `kept`.
from libc.math cimport sqrt, fabs, frexp, ldexp, INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

from _blas cimport blas_int, gemm, geqrf, orgqr, trcon_upper
from _symm_par cimport symm_product, syrk_product
from _skinny cimport sf_gemm_nn, sf_gemm_tn
from _dense cimport sf_dot, sf_axpy, sf_row_update
from _common cimport OK, ERR_NOMEM, ERR_LAPACK, bad_field, is_real
from _eigen cimport EigWork, eig_work_init, eig_work_free, eig_top, EIG_EVR, EIG_EVD


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
    int n, k, b, q, maxiter
    int first        # the eigen-solver chain's first routine for exact solves (exact_first;
                     # tests force later ones)
    double *bas      # n x q basis [V, W, P]
    double *sbas     # S @ bas
    double *tmp      # n x q
    double *G        # q x q projected matrix
    double *Y        # q x b Ritz vectors
    double *theta    # q Ritz values, descending
    double *w        # n + q: eigenvalues, ascending (dsyevr uses all n as workspace)
    double *R        # q x q, the QR's triangle
    double *P        # n x b, the previous step
    double *SP       # S @ P
    double *tau      # q, the QR's reflectors
    double *Sx       # n x n scratch for the eigen-solver chain
    double *Zx       # n x b eigenvectors from an exact solve
    double *qx       # n x 2b: the new columns' CholeskyQR (orth_new)
    double *qs       # 3 (2b)^2: its Gram matrix, triangle and inverse
    double *work     # geqrf, orgqr, trcon
    blas_int lwork
    blas_int *iwork
    blas_int liwork
    EigWork eig
    EigWork eig_rr   # the Rayleigh-Ritz problems' (order <= q; dsyevd first)
    int threads      # OpenMP threads for the S products (_symm_par.pxd)


cdef enum:
    # Krylov iterations a solve may take before it goes to LAPACK: the
    # defaults are 3..30 (kernels.default_max_iter); a solve that does not
    # converge must still end, so a record asking for more is refused
    TOPK_MAX_ITER = 1000


cdef inline int check_topk_state(const TopKState *st, str name) except -1:
    # The solver's counters and back-off as a kernel relies on them: a record
    # edited by hand or unpickled from an edited file is refused (ValueError
    # naming the field), never used.
    if not (st.solves >= 0 and st.products >= 0 and st.fallbacks >= 0 and st.direct >= 0
            and 0 <= st.skip <= 64 and 0 <= st.backoff <= 64 and st.eig_fallbacks >= 0
            and st.kept >= 0):
        for field, value in (("solves", st.solves), ("products", st.products),
                             ("fallbacks", st.fallbacks), ("direct", st.direct),
                             ("eig_fallbacks", st.eig_fallbacks), ("kept", st.kept)):
            if value < 0:
                bad_field(name, field, value, "a count >= 0")
        if not 0 <= st.skip <= 64:
            bad_field(name, "skip", st.skip, "an integer in [0, 64]")
        bad_field(name, "backoff", st.backoff, "an integer in [0, 64]")
    if not is_real(st.tol, 0):
        bad_field(name, "tol", st.tol, "a finite number >= 0")
    if not st.gap >= 0:
        bad_field(name, "gap", st.gap, "a number >= 0")
    if not st.max_gap_ratio >= 0:
        bad_field(name, "max_gap_ratio", st.max_gap_ratio, "a number >= 0")
    return 0


cdef enum:
    # An exact solve of order n <= EXACT_FULL_RATIO * b asks for the whole
    # spectrum (dsyevd) rather than dsyevr's top b: dsyevr's subset goes by
    # bisection and inverse iteration, O(n b) steps of O(n) each, which at
    # small n costs more than dsyevd's whole tridiagonal QR. Measured (CPU
    # time, one BLAS thread, the solve on FPL's perturbed matrix): dsyevr
    # range I against dsyevd, us a solve -- n = 10, b = 7: 15.3 / 7.3;
    # n = 27, b = 7: 62 / 49; n = 45, b = 7: 151 / 145; n = 60, b = 7:
    # 221 / 240; n = 80, b = 15: 546 / 417; n = 120, b = 15: 912 / 949;
    # n = 100, b = 30: 1210 / 664; n = 220, b = 30: 3327 / 3433. The
    # crossover sits near n = 7b at every b; 6b keeps a margin.
    EXACT_FULL_RATIO = 6
    # ... and only below this order: above it the first decision's dsyevr
    # runs stage by stage so that Ctrl-C can stop it (_evr_polled.pxd's
    # POLLED_MIN_N), which a whole-spectrum solve could not
    EXACT_FULL_MAX_N = 512


cdef inline int exact_first(int n, int b) noexcept nogil:
    # The eigen-solver chain's first routine for the exact top-b solves of
    # order n: dsyevd (the whole spectrum) where it is the faster, else dsyevr
    if n <= EXACT_FULL_RATIO * b and n < EXACT_FULL_MAX_N:
        return EIG_EVD
    return EIG_EVR


cdef inline int topk_work_init(TopKWork *w, int n, int k, int b, int maxiter) noexcept nogil:
    # Every buffer a solve may need, allocated before any state changes:
    # ERR_NOMEM here or never (the untouched pages of the n x n scratch cost
    # nothing while Krylov keeps up). 1 <= k <= b <= n.
    cdef int q = 3 * b if 3 * b <= n else 2 * b
    cdef double wq = 0.0
    cdef blas_int lw = 1, qq = q if q <= n else n
    memset(w, 0, sizeof(TopKWork))
    w.n = n
    w.k = k
    w.b = b
    w.q = q
    w.maxiter = maxiter
    w.first = exact_first(n, b)
    w.bas = <double *> malloc(<size_t> n * q * sizeof(double))
    w.sbas = <double *> malloc(<size_t> n * q * sizeof(double))
    w.tmp = <double *> malloc(<size_t> n * q * sizeof(double))
    w.G = <double *> malloc(<size_t> q * q * sizeof(double))
    w.Y = <double *> malloc(<size_t> q * q * sizeof(double))
    w.theta = <double *> malloc(<size_t> (q + 1) * sizeof(double))
    w.w = <double *> malloc(<size_t> (n + q) * sizeof(double))
    w.R = <double *> malloc(<size_t> q * q * sizeof(double))
    w.P = <double *> malloc(<size_t> n * b * sizeof(double))
    w.SP = <double *> malloc(<size_t> n * b * sizeof(double))
    w.tau = <double *> malloc(<size_t> q * sizeof(double))
    w.Sx = <double *> malloc(<size_t> n * n * sizeof(double))
    w.Zx = <double *> malloc(<size_t> n * b * sizeof(double))
    w.qx = <double *> malloc(<size_t> n * 2 * b * sizeof(double))
    w.qs = <double *> malloc(<size_t> 12 * b * b * sizeof(double))
    w.threads = 1
    if (w.bas == NULL or w.sbas == NULL or w.tmp == NULL or w.G == NULL
            or w.Y == NULL or w.theta == NULL or w.w == NULL or w.R == NULL or w.P == NULL or w.SP == NULL
            or w.tau == NULL or w.Sx == NULL or w.Zx == NULL or w.qx == NULL
            or w.qs == NULL):
        return ERR_NOMEM
    # one workspace for the QR routines and the condition estimate, queried
    # for the largest problem they see
    if geqrf(n, qq, w.bas, n, w.tau, &wq, -1) == 0:
        lw = max(lw, <blas_int> wq)
    if orgqr(n, qq, w.bas, n, w.tau, &wq, -1) == 0:
        lw = max(lw, <blas_int> wq)
    w.lwork = max(lw, <blas_int> (3 * b))     # dtrcon needs 3b doubles, b ints
    w.liwork = b
    w.work = <double *> malloc(<size_t> w.lwork * sizeof(double))
    w.iwork = <blas_int *> malloc(<size_t> w.liwork * sizeof(blas_int))
    if w.work == NULL or w.iwork == NULL:
        return ERR_NOMEM
    if eig_work_init(&w.eig_rr, qq, b, True) != OK:
        return ERR_NOMEM
    return eig_work_init(&w.eig, n, b, w.first == EIG_EVD)


cdef inline void topk_work_free(TopKWork *w) noexcept nogil:
    free(w.bas); free(w.sbas); free(w.tmp); free(w.G); free(w.Y); free(w.theta)
    free(w.w); free(w.R); free(w.P); free(w.SP); free(w.tau); free(w.Sx); free(w.Zx)
    free(w.qx); free(w.qs); free(w.work); free(w.iwork)
    eig_work_free(&w.eig)
    eig_work_free(&w.eig_rr)
    memset(w, 0, sizeof(TopKWork))


cdef inline void mul(bint trans_a, int r, int m, int k, double alpha,
                     const double *A, int lda, const double *B, int ldb, double beta,
                     double *C, int ldc) noexcept nogil:
    # C (r x m) = alpha op(A) B + beta C, beta 0 or 1, column-major: the basis
    # (n rows) times a small matrix (op(A) = A), or basis columns against
    # basis columns (op(A) = A^T, A k x r, k = n). By _skinny.h's kernels:
    # dgemm runs these n x ~15 x ~30 shapes at a fifth of a core's rate (they
    # were ~20% of a trial at n = 1000), and starts its threads for them.
    cdef int j
    if beta == 0.0:
        for j in range(m):
            memset(C + <Py_ssize_t> j * ldc, 0, <size_t> r * sizeof(double))
    if trans_a:
        sf_gemm_tn(r, m, k, alpha, A, lda, B, ldb, C, ldc)
    else:
        sf_gemm_nn(r, m, k, alpha, A, lda, B, ldb, C, ldc)


cdef inline void mul_nn(int r, int m, int k, double alpha, const double *A,
                        int lda, const double *B, int ldb, double beta, double *C,
                        int ldc) noexcept nogil:
    mul(False, r, m, k, alpha, A, lda, B, ldb, beta, C, ldc)


cdef inline void mul_tn(int r, int m, int k, double alpha, const double *A,
                        int lda, const double *B, int ldb, double beta, double *C,
                        int ldc) noexcept nogil:
    mul(True, r, m, k, alpha, A, lda, B, ldb, beta, C, ldc)


cdef inline double pow2_inverse(double m) noexcept nogil:
    # 2^-e with 2^e near m >= 0 (1 for 0, NaN or inf): scaling by it is exact
    cdef int e
    if m == 0.0 or m != m or m == INFINITY:
        return 1.0
    frexp(m, &e)
    return ldexp(1.0, -e)


cdef inline double pow2_scale(Py_ssize_t n, const double *A, Py_ssize_t lda) noexcept nogil:
    # 2^-e with 2^e near max |A_ij| (upper triangle): scaling by it is exact, so
    # LAPACK sees the same matrix when the data are scaled by a power of two,
    # and decisions are exactly scale-invariant (dsyevr itself is not)
    cdef Py_ssize_t i, j
    cdef double m = 0.0
    for j in range(n):
        for i in range(j + 1):
            if fabs(A[j * lda + i]) > m:
                m = fabs(A[j * lda + i])
    return pow2_inverse(m)


cdef inline double krylov_unit(int n, const double *S) noexcept nogil:
    # 2^-e with 2^e near max |S_ii| (O(n)): the Krylov iteration works on
    # unit * S, so that its residuals, which shrink as it converges, stay far
    # from float64's subnormal range whatever the scale of S. A power of two:
    # every quantity of the iteration is exactly unit times the unscaled one
    # (bit for bit), and the iteration is the same at every scale.
    cdef Py_ssize_t i
    cdef double m = 0.0
    for i in range(n):
        if fabs(S[i * n + i]) > m:
            m = fabs(S[i * n + i])
    return pow2_inverse(m)


cdef inline int topk_pairs(TopKWork *w, TopKState *st, EigWork *ws, int first,
                           const double *A, int m, int keep, double sc, double *Z,
                           double *out) noexcept nogil:
    # The `keep` largest eigenpairs of the m x m symmetric A (upper triangle,
    # not changed), solved as sc * A by the chain from routine `first` in
    # the workspace ws: eigenvalues into w.theta (descending, unscaled),
    # eigenvectors into the rows of out (row j <-> theta[j]); Z holds m x keep
    # scratch
    cdef int j, code
    ws.fallbacks = 0
    code = eig_top(ws, first, m, A, m, sc, keep, w.w, Z, m, w.Sx, True)
    st.eig_fallbacks += <long long> ws.fallbacks
    if code != OK:
        return code
    for j in range(keep):
        w.theta[j] = w.w[keep - 1 - j] / sc
        memcpy(out + j * m, Z + (keep - 1 - j) * m, m * sizeof(double))
    return OK


cdef inline int topk_exact(TopKWork *w, const double *S, double *V,
                           TopKState *st) noexcept nogil:
    # V = the top-b eigenvectors of S by the eigen-solver chain (exact_first first);
    # if every routine fails, V is kept as it was (and counted)
    cdef double sc = pow2_scale(w.n, S, w.n)
    st.solves += 1
    if topk_pairs(w, st, &w.eig, w.first, S, w.n, w.b, sc, w.Zx, w.bas) != OK:
        st.kept += 1
        st.gap = INFINITY
        return OK
    memcpy(V, w.bas, <size_t> w.n * w.b * sizeof(double))
    st.gap = 0.0
    return OK


cdef inline double gap_estimate(double d, double d1, double d2, int it) noexcept nogil:
    # Remaining objective gap after iteration `it` (1, 2, ...) raised the captured
    # objective by d (d1, d2: the two increases before, -1 if none).
    # - Linear convergence at rate rho leaves d rho / (1 - rho); rho is the larger
    #   of the last two ratios (convergence slows as the easy directions settle),
    #   capped at 0.99. After the first iteration rho = 0.8 is assumed.
    # - On GOE's dense spectral edge the increases decay like a power of the
    #   iteration count, not geometrically, and the ratio keeps creeping up; a
    #   power law d_j ~ j^-p (p >= 2) leaves at most about j d. The estimate is the
    #   larger of the two. Checked against exact gaps in tests/pca/test_solver.py.
    cdef double rho, f
    if d <= 0.0:
        return 0.0
    if d1 < 0.0:
        return 4.0 * d
    if d1 == 0.0:
        return 99.0 * d
    rho = d / d1
    if d2 > 0.0 and d1 / d2 > rho:
        rho = d1 / d2
    if rho > 0.99:
        rho = 0.99
    if rho < 0.2:
        rho = 0.2
    f = rho / (1.0 - rho)
    if f < it:
        f = it
    return d * f


cdef inline void rotate_one(TopKWork *w, int m, double *A, double *step) noexcept nogil:
    # A[:, :b] = A[:, :m] Y; for m > b the new columns' part A[:, b:m] Y[b:]
    # (the step just taken) is formed first, into `step`, and the block's
    # part added to it
    cdef int n = w.n, b = w.b
    cdef double beta = 0.0
    if m > b:
        mul_nn(n, b, m - b, 1.0, A + <Py_ssize_t> b * n, n, w.Y + b, m, 0.0, step, n)
        memcpy(w.tmp, step, <size_t> n * b * sizeof(double))
        beta = 1.0
    mul_nn(n, b, b, 1.0, A, n, w.Y, m, beta, w.tmp, n)
    memcpy(A, w.tmp, <size_t> n * b * sizeof(double))


cdef inline void topk_rotate(TopKWork *w, int m) noexcept nogil:
    # bas[:, :b] = bas[:, :m] Y and sbas[:, :b] = sbas[:, :m] Y, leaving the
    # step just taken in P and S P (m > b): the next iteration's third block,
    # for free
    rotate_one(w, m, w.bas, w.P)
    rotate_one(w, m, w.sbas, w.SP)


cdef inline int rayleigh_ritz(TopKWork *w, TopKState *st, int m) noexcept nogil:
    # Ritz pairs of S on the orthonormal basis bas[:, :m] (sbas = S bas): the top
    # b into w.theta / w.Y; for m == b the block is rotated onto them at once
    cdef int code, j0, jb
    # G = bas^T sbas, its upper triangle only (all the eigen-solvers read),
    # in column blocks of b: rows 0 .. the block's last column
    j0 = 0
    while j0 < m:
        jb = w.b if j0 + w.b <= m else m - j0
        mul_tn(j0 + jb, jb, w.n, 1.0, w.bas, w.n, w.sbas + <Py_ssize_t> j0 * w.n,
               w.n, 0.0, w.G + j0 * m, m)
        j0 += jb
    # the small problem by dsyevd, whole: at m = 2b..3b it beats dsyevr's
    # subset of b (measured at m = 30..192: 1.3-4x), which stays first for
    # the exact solves of S itself, where b << n. (Its own workspace, sized
    # for order q: dsyevd's for order n would be 2 n^2 doubles.)
    code = topk_pairs(w, st, &w.eig_rr, EIG_EVD if w.first == EIG_EVR else w.first,
                      w.G, m, w.b, pow2_scale(m, w.G, m), w.tmp, w.Y)
    if code == OK and m == w.b:
        topk_rotate(w, m)
    return code


cdef inline unsigned long long splitmix64(unsigned long long *x) noexcept nogil:
    cdef unsigned long long z
    x[0] += 0x9E3779B97F4A7C15ULL
    z = x[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


# --- small dense steps without BLAS ---------------------------------------------
#
# A trial calls these on n x b blocks (b ~ 15) once per Krylov iteration.
# Through BLAS they would run on the BLAS threads the caller set, and
# OpenBLAS threads even such short calls: at n = 1000, two of its threads
# took 10x one's time for the QR of the new columns and 20x for a norm
# (with the second core busy: far worse). So they are plain loops (and
# _skinny.h's products), on the caller's thread.

cdef inline double vec_norm(Py_ssize_t n, const double *x) noexcept nogil:
    # ||x||_2; scaled where the squares would leave float64's range
    cdef double s = sf_dot(n, x, x), m = 0.0, t
    cdef Py_ssize_t i
    if s > 1e-280 and s < 1e280 or s == 0.0 or s != s:
        return sqrt(s)
    for i in range(n):
        if fabs(x[i]) > m:
            m = fabs(x[i])
    if m == 0.0 or m == INFINITY:
        return m
    s = 0.0
    for i in range(n):
        t = x[i] / m
        s += t * t
    return m * sqrt(s)


cdef inline void solve_upper_right(Py_ssize_t m, int r, const double *A, int lda, double *B,
                                   Py_ssize_t ldb) noexcept nogil:
    # B (m x r, column-major) := B @ inv(A), A upper triangular r x r
    # (column-major): column j becomes (B_j - sum_{i<j} A[i, j] X_i) / A[j, j]
    cdef int i, j
    cdef Py_ssize_t t
    cdef double d
    for j in range(r):
        for i in range(j):
            sf_axpy(m, -A[i + <Py_ssize_t> j * lda], B + i * ldb, B + j * ldb)
        d = A[j + <Py_ssize_t> j * lda]
        for t in range(m):
            B[j * ldb + t] /= d


cdef inline bint chol_upper(int r, const double *G, double *R) noexcept nogil:
    # G = R^T R for the symmetric r x r G (column-major, upper triangle read),
    # R upper triangular (its lower part zeroed); False if G is not positive
    # definite to working precision (or not finite)
    cdef int i, j, t
    cdef double v
    for j in range(r):
        for i in range(j + 1):
            v = G[i + j * r]
            for t in range(i):
                v -= R[t + i * r] * R[t + j * r]
            if i == j:
                if not (v > 0.0 and v < INFINITY):
                    return False
                R[j + j * r] = sqrt(v)
            else:
                R[i + j * r] = v / R[i + i * r]
        for i in range(j + 1, r):
            R[i + j * r] = 0.0
    return True


cdef inline void inv_upper(int r, const double *R, double *Ri) noexcept nogil:
    # Ri = inv(R) for the upper triangular r x r R (column-major)
    cdef int i, j, t
    cdef double v
    for j in range(r):
        for i in range(r):
            Ri[i + j * r] = 0.0
        Ri[j + j * r] = 1.0 / R[j + j * r]
        for i in range(j - 1, -1, -1):
            v = 0.0
            for t in range(i + 1, j + 1):
                v += R[i + t * r] * Ri[t + j * r]
            Ri[i + j * r] = -v / R[i + i * r]


cdef inline bint chol_qr_pass(TopKWork *w, double *X, int r, double *R, bint check) noexcept nogil:
    # One CholeskyQR pass over the n x r columns X (in place): X = Q R with R
    # from the Cholesky factor of X^T X; False if that is not positive
    # definite, or (check) if X^T X was off the identity by more than 0.1:
    # a second pass then cannot make Q orthonormal to working precision
    cdef int n = w.n, i, j
    cdef double *G = w.qs
    cdef double *Ri = w.qs + 8 * w.b * w.b
    mul_tn(r, r, n, 1.0, X, n, X, n, 0.0, G, r)
    if check:
        for j in range(r):
            for i in range(j + 1):
                if not (fabs(G[i + j * r] - (1.0 if i == j else 0.0)) <= 0.1):
                    return False
    if not chol_upper(r, G, R):
        return False
    inv_upper(r, R, Ri)
    mul_nn(n, r, r, 1.0, X, n, Ri, r, 0.0, w.qx, n)
    memcpy(X, w.qx, <size_t> n * r * sizeof(double))
    return True


cdef inline void seed_directions(TopKWork *w, const double *hint,
                                 unsigned long long seed) noexcept nogil:
    # The first iteration's new directions are the residual W = S V - V Theta.
    # If V spans an invariant subspace of S (Follow the Leader on axis-aligned
    # data: W = 0 exactly) no Krylov step can leave it, even when S's top-k lies
    # elsewhere -- say, along a direction the data just started to use. So the
    # weakest residual column is replaced by `hint` (FPL: this trial's data
    # direction, x_t or a column of a dense X_t), and any residual column at
    # rounding level by a pseudo-random one (splitmix64 on `seed`:
    # deterministic, and no generator of the caller's is touched).
    cdef int n = w.n, b = w.b, j, jmin = 0
    cdef Py_ssize_t i
    cdef double nrm, nmin = INFINITY, scale = 0.0
    cdef double *col
    cdef unsigned long long state
    for j in range(b):
        if fabs(w.theta[j]) > scale:
            scale = fabs(w.theta[j])
    for j in range(b):
        col = w.bas + (b + j) * n
        nrm = vec_norm(n, col)
        if nrm < nmin:
            nmin = nrm
            jmin = j
        if nrm <= 1e-12 * scale or nrm == 0.0:
            state = seed * 1000003ULL + <unsigned long long> j
            for i in range(n):
                col[i] = (<double> (splitmix64(&state) >> 11)) * (2.0 / 9007199254740992.0) - 1.0
    if hint != NULL:
        memcpy(w.bas + (b + jmin) * n, hint, n * sizeof(double))


cdef inline bint orth_new(TopKWork *w, int m) noexcept nogil:
    # The new columns X = bas[:, b:m] made orthonormal and orthogonal to the
    # block V = bas[:, :b] in place, with R[:, b:m] their coefficients
    # (X = V R[:b, b:m] + Q R[b:m, b:m]): two passes of block classical
    # Gram-Schmidt against V, then CholeskyQR2 of the m - b columns alone
    # (two passes of X = Q R from the Cholesky factor of X^T X: orthonormal
    # to working precision when X's condition number is below ~1e8, and all
    # in _skinny.h's products: no BLAS). A QR of the whole [V, X] costs 2-4x
    # more, and V is orthonormal already. Checked, not assumed: False (X
    # saved in tmp) when the Cholesky factor fails or the second pass starts
    # far from orthonormal, or when V^T V or V^T Q is off by more than ~1000
    # ulps -- V drifting after many trials, or X (nearly) rank-deficient
    # after the projections -- and the caller then does the whole QR. (At
    # n = 500 on a spiked stream: the first few solves of a stream, whose
    # residuals are nearly dependent.)
    cdef int n = w.n, b = w.b, r = m - b, i, j, t
    cdef double *X = w.bas + <Py_ssize_t> b * n
    cdef double *C = w.R + <Py_ssize_t> b * m
    cdef double *R1 = w.qs + 4 * b * b
    cdef double *R2 = w.qs       # (its pass's Gram matrix, factored in place)
    cdef double v
    cdef double lim = 1.1368683772161603e-13     # 2^-43
    memcpy(w.tmp, X, <size_t> n * r * sizeof(double))
    memset(w.R, 0, <size_t> m * m * sizeof(double))
    for j in range(b):
        w.R[j * m + j] = 1.0
    mul_tn(b, r, n, 1.0, w.bas, n, X, n, 0.0, C, m)
    mul_nn(n, r, b, -1.0, w.bas, n, C, m, 1.0, X, n)
    mul_tn(b, r, n, 1.0, w.bas, n, X, n, 0.0, w.G, b)
    mul_nn(n, r, b, -1.0, w.bas, n, w.G, b, 1.0, X, n)
    for j in range(r):
        for i in range(b):
            C[j * m + i] += w.G[j * b + i]
    if not chol_qr_pass(w, X, r, R1, False) or not chol_qr_pass(w, X, r, R2, True):
        return False
    # R = R2 R1, into R[b:m, b:m] (upper triangular)
    for j in range(r):
        for i in range(j + 1):
            v = 0.0
            for t in range(i, j + 1):
                v += R2[i + t * r] * R1[t + j * r]
            C[j * m + b + i] = v
    # V^T [V, Q] against [I, 0], in G (b x m), every entry within ~1000 ulps
    # (2^-43): the new columns typically come out within a few ulps, V itself
    # drifts a little each solve (a whole QR re-orthonormalises V, this path
    # does not: a random walk, ~1e-13 after 20,000 solves at n = 400) until
    # the check sends it to a whole QR (back to ~1e-15). Written so that a
    # NaN fails it.
    mul_tn(b, m, n, 1.0, w.bas, n, w.bas, n, 0.0, w.G, b)
    for j in range(m):
        for i in range(b):
            if not (fabs(w.G[j * b + i] - (1.0 if i == j else 0.0)) <= lim):
                return False
    return True


cdef inline int topk_krylov(TopKWork *w, const double *S, double *V, TopKState *st,
                            double tol, const double *hint,
                            unsigned long long seed) noexcept nogil:
    # One warm-started solve (see the top of this file): V updated in place.
    # Without room for 3b vectors (n < 3b) the basis is [V, W].
    cdef int n = w.n, b = w.b, k = w.k, b2 = 2 * w.b, m, j, it, maxiter
    cdef bint use_p = 3 * b <= n, have_p = False
    cdef Py_ssize_t i
    cdef double *bas = w.bas
    cdef double *sbas = w.sbas
    cdef double f, fnew, d, d1 = -1.0, d2 = -1.0, est = INFINITY, nrm, rmin, unit, tol_u
    # the iteration runs on unit * S: S products, Ritz values, gaps and the
    # tolerance all carry the factor
    unit = krylov_unit(n, S)
    tol_u = tol * unit
    # S V and Rayleigh-Ritz on the warm start. V is orthonormal to rounding: it
    # comes from LAPACK or from the last iteration's basis @ Y, with the basis
    # from a Householder QR and Y from the eigen-solver, so no
    # re-orthonormalisation.
    memcpy(bas, V, <size_t> n * b * sizeof(double))
    symm_product(w.threads, n, b, unit, S, bas, sbas)
    st.products += 1
    # an eigen-solver failure on the small problems below is no reason to fail
    # the solve: it goes to the exact solve instead (maxiter = 0)
    maxiter = w.maxiter
    if rayleigh_ritz(w, st, b) != OK:
        maxiter = 0
    f = 0.0
    for j in range(k):
        f += w.theta[j]
    for it in range(maxiter):
        # block residual W = S V - V diag(theta) as the new directions
        for j in range(b):
            for i in range(n):
                bas[(b + j) * n + i] = sbas[j * n + i] - w.theta[j] * bas[j * n + i]
        if it == 0:
            seed_directions(w, hint, seed)
        m = b2
        if have_p:
            # the previous step, columns scaled to unit norm (with S P alike) so
            # that R33 below measures how independent of [V, W] it is
            for j in range(b):
                nrm = vec_norm(n, w.P + j * n)
                if nrm == 0.0:
                    have_p = False
                    break
                for i in range(n):
                    bas[(b2 + j) * n + i] = w.P[j * n + i] / nrm
                    w.SP[j * n + i] /= nrm
            if have_p:
                m = 3 * b
        # [V, W, P] = Q R with Q1 = V, R11 = I (block Gram-Schmidt, checked),
        # or else by a Householder QR of the whole basis, so that the new
        # directions are orthogonal to V even at rounding level: then
        # S Q1 = (S V) R11^-1. S Q2 is the product; S Q3 = (S P - S Q1 R13 -
        # S Q2 R23) R33^-1.
        if not orth_new(w, m):
            memcpy(bas + b * n, w.tmp, <size_t> n * (m - b) * sizeof(double))
            if geqrf(n, m, bas, n, w.tau, w.work, w.lwork) != 0:
                est = INFINITY
                break
            for j in range(m):
                memcpy(w.R + j * m, bas + j * n, (j + 1) * sizeof(double))
            if orgqr(n, m, bas, n, w.tau, w.work, w.lwork) != 0:
                est = INFINITY
                break
            solve_upper_right(n, b, w.R, m, sbas, n)
        symm_product(w.threads, n, b, unit, S, bas + b * n, sbas + b * n)
        st.products += 1
        if m > b2:
            # S Q3 = (...) R33^-1 is only as accurate as R33 is well conditioned
            # (P's columns have unit norm): a condition estimate, not just the
            # diagonal, which can hide an ill-conditioned triangle
            rmin = trcon_upper(b, w.R + b2 * m + b2, m, w.work, w.iwork)
            if rmin < 1e-6:
                m = b2      # P is (nearly) in span[V, W]: S Q3 would be noise
            else:
                memcpy(sbas + b2 * n, w.SP, <size_t> n * b * sizeof(double))
                mul_nn(n, b, b, -1.0, sbas, n, w.R + b2 * m, m, 1.0,
                       sbas + b2 * n, n)
                mul_nn(n, b, b, -1.0, sbas + b * n, n, w.R + b2 * m + b, m, 1.0,
                       sbas + b2 * n, n)
                solve_upper_right(n, b, w.R + b2 * m + b2, m, sbas + b2 * n, n)
        if rayleigh_ritz(w, st, m) != OK:
            est = INFINITY
            break
        fnew = 0.0
        for j in range(k):
            fnew += w.theta[j]
        d = fnew - f
        if d < 0.0:
            d = 0.0     # rounding: Rayleigh-Ritz on a larger space cannot lose
        f = fnew
        est = gap_estimate(d, d1, d2, it + 1)
        d2 = d1
        d1 = d
        if est <= tol_u or it + 1 == maxiter:
            # the last iteration: the block alone (S V, P and S P would serve
            # a next one; the next solve starts from its own product)
            rotate_one(w, m, bas, w.P)
            break
        # the rotation leaves the step just taken in P and S P
        topk_rotate(w, m)
        have_p = use_p
    if est > tol_u:
        # the warm start did not pay: LAPACK now, and for the next `backoff`
        # solves (doubling while Krylov keeps failing), so that a matrix whose
        # top-k jumps every time (independent noise early on) costs about an
        # exact solve per solve, not maxiter products on top of one
        st.fallbacks += 1
        st.skip = st.backoff
        st.backoff = 64 if st.backoff >= 32 else 2 * st.backoff + 1
        return topk_exact(w, S, V, st)
    st.solves += 1
    st.backoff = 0
    memcpy(V, bas, <size_t> n * b * sizeof(double))
    st.gap = est / unit
    if tol_u > 0.0 and est / tol_u > st.max_gap_ratio:
        st.max_gap_ratio = est / tol_u
    for j in range(b):
        w.theta[j] /= unit
    return OK


cdef inline bint topk_will_krylov(const TopKWork *w, const TopKState *st,
                                  bint krylov) noexcept nogil:
    # whether topk_solve(..., krylov) runs a Krylov solve
    return krylov and 2 * w.b <= w.n and st.skip <= 0


cdef inline int topk_solve(TopKWork *w, const double *S, double *V, TopKState *st,
                           double tol, const double *hint, unsigned long long seed,
                           bint krylov) noexcept nogil:
    # The next block for S: exact (krylov False, or while the back-off lasts) or
    # warm-started from V with gap tolerance tol. Returns OK (a solve whose
    # eigenproblems all failed keeps V and counts in st.kept).
    st.tol = tol
    if topk_will_krylov(w, st, krylov):
        return topk_krylov(w, S, V, st, tol, hint, seed)
    if krylov and 2 * w.b <= w.n:
        # the back-off after Krylov failed (st.skip > 0); otherwise exact by
        # request, or 2b > n: the block and its residual directions do not fit
        # in n dimensions -- the basis QR cannot be formed -- so exact, rather
        # than a Krylov attempt that fails in dorgqr, which prints its complaint
        st.skip -= 1
        st.direct += 1
    return topk_exact(w, S, V, st)


# --- around the solves: what the leader kernels (FPL's _pca.pyx, Dropout's
# _dropout.pyx) do alike ------------------------------------------------------

cdef inline void leader_flush(int threads, int n, long long *pending, const double *rows,
                              double *C) noexcept nogil:
    # C += rows[:pending]^T rows[:pending]: one rank-pending update instead of
    # a rank-one pass over C per trial (C is read only for the regret, and by
    # FPL's random walk when sigma shrinks)
    syrk_product(threads, n, pending[0], rows, C)
    pending[0] = 0


cdef inline void rank_one_rows(Py_ssize_t n, double alpha, const double *x,
                               double *A) noexcept nogil:
    # A += alpha x x^T on the row-major lower triangle, row by row as the
    # FPL trial adds x x^T to S (_dense.h's row update; no BLAS dsyr)
    cdef Py_ssize_t i
    for i in range(n):
        sf_row_update(i + 1, A + i * n, alpha * x[i], x, 0.0, NULL)


cdef inline double rows_dot_plain(Py_ssize_t n, Py_ssize_t m, const double *Z,
                                  const double *Y) noexcept nogil:
    # sum_j z_j^T y_j over the m rows of two C-order (m, n) blocks, in row
    # order (_dense.h's dot: no BLAS)
    cdef Py_ssize_t j
    cdef double acc = 0.0
    for j in range(m):
        acc += sf_dot(n, Z + j * n, Y + j * n)
    return acc


cdef inline double leader_gain(int n, int k, const double *V, const double *x,
                               double *row) noexcept nogil:
    # ||V_k x||^2: the gain of the block's first k rows on the row x (row: k
    # doubles of scratch)
    cdef int j
    cdef double g = 0.0
    for j in range(k):
        row[j] = sf_dot(n, V + <Py_ssize_t> j * n, x)
        g += row[j] * row[j]
    return g


cdef inline const double *leader_dense_hint(int n, const double *x) noexcept nogil:
    # the column of the dense instance x (n x n) with the largest diagonal: a
    # direction of its range, the next warm-started solve's hint
    cdef Py_ssize_t j, jmax = 0
    for j in range(n):
        if x[j * n + j] > x[jmax * n + jmax]:
            jmax = j
    return x + jmax * n
