# Online PCA by Follow the (Perturbed) Leader: the whole trial loop -- play,
# gain, rank-one (or dense) update, noise update, warm-started top-k -- runs here
# without the GIL. Python validates input and owns the state arrays.
#
# Paper: Kotlowski & Warmuth, "PCA with Gaussian perturbations".
#
# Layout. Symmetric n x n matrices (S, N, C, a dense instance) are C-order
# arrays whose row-major lower triangle is the valid one: row i holds columns
# 0..i contiguously, which BLAS sees as the column-major upper triangle ('U').
# Blocks of vectors are C-order (b, n) arrays: each row a vector, which BLAS
# sees as a column-major n x b matrix with leading dimension n.
from libc.math cimport sqrt, fabs, INFINITY, frexp, ldexp
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport PyCapsule_GetPointer

from _blas cimport (blas_int, axpy, axpy_upper, quad_rows, nrm2, gemv_rows, gemm, symm_upper,
                    syr_upper, trcon_upper, geqrf, orgqr, syevr_top, trsm_right_upper)

cdef extern from "_goe.h" nogil:
    void sf_mirror_rows(Py_ssize_t n, double *A, Py_ssize_t ib, Py_ssize_t iend)
    void sf_store_fence()

cdef extern from "numpy/random/bitgen.h":
    ctypedef struct bitgen_t:
        pass

cdef extern from "numpy/random/distributions.h" nogil:
    # numpy's ziggurat, the same one Generator.standard_normal uses
    void random_standard_normal_fill(bitgen_t *state, Py_ssize_t count, double *out)

# Field names, in memory order, of the state struct below; Python reads these
# so the layout has one source of truth.
STATE_FIELDS = (
    "t", "sigma", "s", "scale", "max_trsq", "gain", "tol", "gap", "products",
    "fallbacks", "solves", "max_gap_ratio", "skip", "backoff", "direct",
)

cpdef enum:
    INSTANCE_VECTOR = 0
    INSTANCE_DENSE = 1

cpdef enum:
    NOISE_NONE = 0          # Follow the Leader
    NOISE_FIXED = 1         # one N per run, S_t = X_<t + sqrt(t) sigma N
    NOISE_RANDOM_WALK = 2   # N_t = N_{t-1} + a fresh GOE increment
    NOISE_INDEPENDENT = 3   # a fresh sqrt(t) sigma N every trial

cpdef enum:
    SOLVER_EXACT = 0        # LAPACK dsyevr (top b) every trial
    SOLVER_KRYLOV = 1       # warm-started block Krylov, dsyevr as fallback

cpdef enum:
    OK = 0
    ERR_NOMEM = -1
    ERR_LAPACK = -2

cdef enum:
    TILE = 32

cdef double SQRT_2_OVER_PI = 0.7978845608028654
cdef double INV_SQRT2 = 0.7071067811865476

ctypedef struct PCAState:
    double t            # trials played so far
    double sigma        # sigma_{t+1}, the noise scale of the next decision
    double s            # sqrt(t+1) * sigma_{t+1}: N's coefficient in S (fixed noise)
    double scale        # vector: max ||x||^2; dense: max of an upper bound on ||X||_2
    double max_trsq     # max tr(X^2) (dense; vector instances use scale^2)
    double gain         # cumulative gain
    double tol          # gap tolerance of the last solve
    double gap          # estimated objective gap of the last solve (0 if exact)
    double products     # S @ block products, all solves
    double fallbacks    # solves that fell back to LAPACK
    double solves
    double max_gap_ratio  # max over Krylov solves of estimated gap / tolerance
    double skip         # solves left that go straight to LAPACK after fallbacks
    double backoff      # the next such run's length (doubles while Krylov fails)
    double direct       # solves sent straight to LAPACK that way


cdef struct Ctx:
    int n, k, b, kind, noise, solver, sigma_auto, maxiter
    double sigma_value, tol
    double *S
    double *N
    double *C
    double *V
    PCAState *st
    bitgen_t *rng
    # workspaces
    double *bas      # n x 3b basis [V, W, P]
    double *sbas     # S @ bas
    double *tmp      # n x 3b
    double *G        # 3b x 3b projected matrix
    double *Y        # 3b x b Ritz vectors
    double *theta    # 3b Ritz values, descending
    double *w        # 3b (or n for the fallback) eigenvalues, ascending
    double *R        # up to 3b x 3b, the QR's triangle
    double *P        # n x b, the previous step (LOBPCG)
    double *SP       # S @ P
    double *tau      # 3b (or 2b), the QR's reflectors
    double *row      # n
    double *work
    blas_int lwork
    blas_int *iwork
    blas_int liwork
    blas_int *isuppz
    double *Sx       # n x n copy for the LAPACK fallback
    double *Zx       # n x b eigenvectors from the fallback


# --- GOE noise --------------------------------------------------------------

cdef inline void goe_row(bitgen_t *rng, Py_ssize_t i, double sigma, double *out) noexcept nogil:
    # row i of the lower triangle of sigma (G + G^T)/2, G_ij ~ N(0, 1): N_ij ~
    # N(0, sigma^2/2) for j < i, N_ii ~ N(0, sigma^2), drawing only the
    # independent entries (i + 1 normals)
    cdef Py_ssize_t j
    cdef double off = sigma * INV_SQRT2
    random_standard_normal_fill(rng, i + 1, out)
    for j in range(i):
        out[j] *= off
    out[i] *= sigma


cdef void goe_full(bitgen_t *rng, Py_ssize_t n, double sigma, double *A) noexcept nogil:
    # A full GOE matrix: draw TILE rows of the lower triangle, then mirror them
    # into the upper triangle while they are still in cache
    cdef Py_ssize_t ib = 0, i, iend
    while ib < n:
        iend = min(ib + TILE, n)
        for i in range(ib, iend):
            goe_row(rng, i, sigma, A + i * n)
        sf_mirror_rows(n, A, ib, iend)
        ib += TILE
    sf_store_fence()


def goe(double[:, ::1] out, double sigma, object capsule):
    """Fill ``out`` (n, n) with a GOE matrix (G + G^T)/2, G_ij ~ N(0, sigma^2),
    drawing only the n(n+1)/2 independent entries, in row order of the lower
    triangle, from the bit generator behind ``capsule``. The caller holds the
    bit generator's lock."""
    cdef bitgen_t *rng = <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")
    cdef Py_ssize_t n = out.shape[0]
    if n == 0:
        return
    with nogil:
        goe_full(rng, n, sigma, &out[0, 0])


# --- symmetric eigen-solvers -------------------------------------------------

cdef inline double pow2_scale(Py_ssize_t n, const double *A, Py_ssize_t lda) noexcept nogil:
    # 2^-e with 2^e near max |A_ij| (upper triangle): scaling by it is exact, so
    # LAPACK sees the same matrix when the data are scaled by a power of two,
    # and decisions are exactly scale-invariant (dsyevr itself is not)
    cdef Py_ssize_t i, j
    cdef double m = 0.0
    cdef int e
    for j in range(n):
        for i in range(j + 1):
            if fabs(A[j * lda + i]) > m:
                m = fabs(A[j * lda + i])
    if m == 0.0 or m != m:
        return 1.0
    frexp(m, &e)
    return ldexp(1.0, -e)


cdef int top_pairs(Ctx *c, double *A, int m, int keep, double sc, double *Z,
                   double *out) noexcept nogil:
    # the `keep` largest eigenpairs of the m x m symmetric A, already scaled by
    # sc (destroyed; Z: m x keep scratch), into c.theta (descending, unscaled)
    # and the rows of out (row j <-> theta[j])
    cdef int j
    if syevr_top(m, A, m, keep, c.w, Z, m, c.isuppz, c.work, c.lwork, c.iwork,
                 c.liwork) != 0:
        return ERR_LAPACK
    for j in range(keep):
        c.theta[j] = c.w[keep - 1 - j] / sc
        memcpy(out + j * m, Z + (keep - 1 - j) * m, m * sizeof(double))
    return OK


cdef int ritz_top(Ctx *c, double *G, int m, int keep) noexcept nogil:
    # the `keep` largest eigenpairs of the m x m symmetric G (destroyed), into
    # c.theta (descending) and c.Y (m x keep, column j <-> theta[j])
    cdef int i, j
    cdef double sc = pow2_scale(m, G, m)
    for j in range(m):
        for i in range(j + 1):
            G[j * m + i] *= sc
    return top_pairs(c, G, m, keep, sc, c.tmp, c.Y)


cdef int solve_exact(Ctx *c) noexcept nogil:
    # top-b eigenvectors of S by LAPACK dsyevr on a copy
    cdef int n = c.n
    cdef double sc = pow2_scale(n, c.S, n)
    cdef Py_ssize_t i
    for i in range(<Py_ssize_t> n * n):
        c.Sx[i] = c.S[i] * sc
    if top_pairs(c, c.Sx, n, c.b, sc, c.Zx, c.V) != OK:
        return ERR_LAPACK
    c.st.gap = 0.0
    c.st.solves += 1
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


cdef int rayleigh_ritz(Ctx *c, int m) noexcept nogil:
    # Ritz pairs of S on the orthonormal basis bas[:, :m] (sbas = S bas): the top
    # b into c.theta / c.Y; for m == b the block is rotated onto them at once
    gemm(b'T', b'N', m, m, c.n, 1.0, c.bas, c.n, c.sbas, c.n, 0.0, c.G, m)
    cdef int code = ritz_top(c, c.G, m, c.b)
    if code == OK and m == c.b:
        rotate(c, m)
    return code


cdef void rotate(Ctx *c, int m) noexcept nogil:
    # bas[:, :b] = bas[:, :m] Y and sbas[:, :b] = sbas[:, :m] Y
    cdef int n = c.n, b = c.b
    gemm(b'N', b'N', n, b, m, 1.0, c.bas, n, c.Y, m, 0.0, c.tmp, n)
    memcpy(c.bas, c.tmp, <size_t> n * b * sizeof(double))
    gemm(b'N', b'N', n, b, m, 1.0, c.sbas, n, c.Y, m, 0.0, c.tmp, n)
    memcpy(c.sbas, c.tmp, <size_t> n * b * sizeof(double))


cdef inline unsigned long long splitmix64(unsigned long long *x) noexcept nogil:
    cdef unsigned long long z
    x[0] += 0x9E3779B97F4A7C15ULL
    z = x[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef void seed_directions(Ctx *c, const double *hint) noexcept nogil:
    # The first iteration's new directions are the residual W = S V - V Theta.
    # If V spans an invariant subspace of S (Follow the Leader on axis-aligned
    # data: W = 0 exactly) no Krylov step can leave it, even when S's top-k lies
    # elsewhere -- say, along a direction the data just started to use. So the
    # weakest residual column is replaced by this trial's data direction
    # (`hint`: x_t, or a column of a dense X_t), and any residual column at
    # rounding level by a pseudo-random one (splitmix64 on the trial count:
    # deterministic, and the estimator's generator is left alone).
    cdef int n = c.n, b = c.b, j, jmin = 0
    cdef Py_ssize_t i
    cdef double nrm, nmin = INFINITY, scale = 0.0
    cdef double *w
    cdef unsigned long long state
    for j in range(b):
        if fabs(c.theta[j]) > scale:
            scale = fabs(c.theta[j])
    for j in range(b):
        w = c.bas + (b + j) * n
        nrm = nrm2(n, w)
        if nrm < nmin:
            nmin = nrm
            jmin = j
        if nrm <= 1e-12 * scale or nrm == 0.0:
            state = (<unsigned long long> c.st.t) * 1000003ULL + <unsigned long long> j
            for i in range(n):
                w[i] = (<double> (splitmix64(&state) >> 11)) * (2.0 / 9007199254740992.0) - 1.0
    if hint != NULL:
        memcpy(c.bas + (b + jmin) * n, hint, n * sizeof(double))


cdef int solve_krylov(Ctx *c, double tol_t, const double *hint) noexcept nogil:
    # Warm-started block Krylov in the LOBPCG form: Rayleigh-Ritz on
    # span[V, W, P] -- the current block V, its residual W = S V - V Theta and
    # the previous step P (its non-V part) -- keeping the top b Ritz vectors,
    # until the captured objective sum(theta[:k]) has (by gap_estimate) less than
    # tol_t left to gain. One product S @ block per iteration: S V and S P are
    # carried along through the rotations. Without room for 3b vectors (n < 3b)
    # the basis is [V, W].
    cdef int n = c.n, b = c.b, k = c.k, b2 = 2 * c.b, m, j, it, code, maxiter
    cdef bint use_p = 3 * b <= n, have_p = False
    cdef Py_ssize_t i
    cdef double *bas = c.bas
    cdef double *sbas = c.sbas
    cdef double f, fnew, d, d1 = -1.0, d2 = -1.0, est = INFINITY, nrm, rmin
    cdef blas_int info
    # S V and Rayleigh-Ritz on the warm start. V is orthonormal to rounding: it
    # comes from LAPACK or from the last iteration's basis @ Y, with the basis
    # from a Householder QR and Y from dsyevr, so no re-orthonormalisation.
    memcpy(bas, c.V, <size_t> n * b * sizeof(double))
    symm_upper(n, b, 1.0, c.S, n, bas, 0.0, sbas)
    c.st.products += 1
    # a LAPACK error on the small problems below is no reason to fail the
    # trial: the solve goes to LAPACK's dsyevr on S instead (maxiter = 0)
    maxiter = c.maxiter
    code = rayleigh_ritz(c, b)
    if code != OK:
        maxiter = 0
    f = 0.0
    for j in range(k):
        f += c.theta[j]
    for it in range(maxiter):
        # block residual W = S V - V diag(theta) as the new directions
        for j in range(b):
            for i in range(n):
                bas[(b + j) * n + i] = sbas[j * n + i] - c.theta[j] * bas[j * n + i]
        if it == 0:
            seed_directions(c, hint)
        m = b2
        if have_p:
            # the previous step, columns scaled to unit norm (with S P alike) so
            # that R33 below measures how independent of [V, W] it is
            for j in range(b):
                nrm = nrm2(n, c.P + j * n)
                if nrm == 0.0:
                    have_p = False
                    break
                for i in range(n):
                    bas[(b2 + j) * n + i] = c.P[j * n + i] / nrm
                    c.SP[j * n + i] /= nrm
            if have_p:
                m = 3 * b
        # QR of the whole basis, so the new directions are orthogonal to V even
        # at rounding level. [V, W, P] = Q R: S Q1 = (S V) R11^-1, S Q2 is the
        # product, S Q3 = (S P - S Q1 R13 - S Q2 R23) R33^-1.
        info = geqrf(n, m, bas, n, c.tau, c.work, c.lwork)
        if info != 0:
            est = INFINITY
            break
        for j in range(m):
            memcpy(c.R + j * m, bas + j * n, (j + 1) * sizeof(double))
        info = orgqr(n, m, bas, n, c.tau, c.work, c.lwork)
        if info != 0:
            est = INFINITY
            break
        trsm_right_upper(n, b, c.R, m, sbas, n)
        symm_upper(n, b, 1.0, c.S, n, bas + b * n, 0.0, sbas + b * n)
        c.st.products += 1
        if m > b2:
            # S Q3 = (...) R33^-1 is only as accurate as R33 is well conditioned
            # (P's columns have unit norm): a condition estimate, not just the
            # diagonal, which can hide an ill-conditioned triangle
            rmin = trcon_upper(b, c.R + b2 * m + b2, m, c.work, c.iwork)
            if rmin < 1e-6:
                m = b2      # P is (nearly) in span[V, W]: S Q3 would be noise
            else:
                memcpy(sbas + b2 * n, c.SP, <size_t> n * b * sizeof(double))
                gemm(b'N', b'N', n, b, b, -1.0, sbas, n, c.R + b2 * m, m, 1.0,
                     sbas + b2 * n, n)
                gemm(b'N', b'N', n, b, b, -1.0, sbas + b * n, n, c.R + b2 * m + b, m, 1.0,
                     sbas + b2 * n, n)
                trsm_right_upper(n, b, c.R + b2 * m + b2, m, sbas + b2 * n, n)
        code = rayleigh_ritz(c, m)
        if code != OK:
            est = INFINITY
            break
        if use_p:
            # the step just taken, without its V part: the next P and S P
            gemm(b'N', b'N', n, b, m - b, 1.0, bas + b * n, n, c.Y + b, m, 0.0, c.P, n)
            gemm(b'N', b'N', n, b, m - b, 1.0, sbas + b * n, n, c.Y + b, m, 0.0, c.SP, n)
            have_p = True
        rotate(c, m)
        fnew = 0.0
        for j in range(k):
            fnew += c.theta[j]
        d = fnew - f
        if d < 0.0:
            d = 0.0     # rounding: Rayleigh-Ritz on a larger space cannot lose
        f = fnew
        est = gap_estimate(d, d1, d2, it + 1)
        d2 = d1
        d1 = d
        if est <= tol_t:
            break
    c.st.solves += 1
    if est > tol_t:
        # the warm start did not pay: LAPACK now, and for the next `backoff`
        # solves (doubling while Krylov keeps failing), so that a stream whose
        # top-k jumps every trial (independent noise early on) costs about an
        # exact solve per trial, not maxiter products on top of one
        c.st.fallbacks += 1
        c.st.skip = c.st.backoff
        c.st.backoff = 64.0 if c.st.backoff >= 32.0 else 2.0 * c.st.backoff + 1.0
        return solve_exact_counted(c)
    c.st.backoff = 0.0
    memcpy(c.V, bas, <size_t> n * b * sizeof(double))
    c.st.gap = est
    if tol_t > 0.0 and est / tol_t > c.st.max_gap_ratio:
        c.st.max_gap_ratio = est / tol_t
    return OK


cdef int solve_exact_counted(Ctx *c) noexcept nogil:
    # the fallback: an exact solve that does not count as a second solve
    cdef int code = solve_exact(c)
    c.st.solves -= 1
    return code


# --- the trial loop ------------------------------------------------------------

cdef inline double bound_a(Ctx *c) noexcept nogil:
    # the data term of the paper's bound R <= a/sigma + b sigma (per sqrt(T)):
    # vector: r sqrt(2M/pi) = L * L sqrt(2/pi), L = max ||x||^2 (r = L, M = L^2);
    # dense: r = k Lambda, M = max tr(X^2)
    if c.kind == INSTANCE_VECTOR:
        return c.st.scale * c.st.scale * SQRT_2_OVER_PI
    return c.k * c.st.scale * sqrt(c.st.max_trsq) * SQRT_2_OVER_PI


cdef inline double next_sigma(Ctx *c) noexcept nogil:
    cdef double a, bb
    if c.noise == NOISE_NONE:
        return 0.0
    if not c.sigma_auto:
        return c.sigma_value
    a = bound_a(c)
    bb = c.k * sqrt(<double> c.n)
    return sqrt(a / bb)


cdef inline double tolerance(Ctx *c, double t_next) noexcept nogil:
    # tol times the bound's per-trial increment c(sigma) / (2 sqrt(t)), where
    # R_T <= c(sigma) sqrt(T); Follow the Leader uses the "auto" sigma's c
    cdef double a = bound_a(c), bb = c.k * sqrt(<double> c.n), sig = c.st.sigma, cc
    if a <= 0.0:
        return 0.0
    if sig <= 0.0:
        cc = 2.0 * sqrt(a * bb)
    else:
        cc = a / sig + bb * sig
    return c.tol * cc / (2.0 * sqrt(t_next))


cdef void noise_update(Ctx *c, double s_new) noexcept nogil:
    # move S from N-coefficient st.s to s_new (fixed), or add the matching fresh
    # GOE increment (random walk), or redraw it (independent); C is X_<=t there
    cdef Py_ssize_t n = c.n, i, j
    cdef double a
    if c.noise == NOISE_FIXED:
        if s_new != c.st.s:
            axpy_upper(n, s_new - c.st.s, c.N, c.S)
    elif c.noise == NOISE_RANDOM_WALK:
        a = s_new * s_new - c.st.s * c.st.s
        if a > 0.0:
            a = sqrt(a)
            for i in range(n):
                goe_row(c.rng, i, 1.0, c.row)
                axpy(<blas_int> (i + 1), a, c.row, c.S + i * n)
        elif a < 0.0:
            # a smaller sigma set mid-stream: shrink the walk so far,
            # S = C + (s_new / s) (S - C); no increment can lower a variance
            a = s_new / c.st.s
            for i in range(n):
                for j in range(i + 1):
                    c.S[i * n + j] = c.C[i * n + j] + a * (c.S[i * n + j] - c.C[i * n + j])
    elif c.noise == NOISE_INDEPENDENT:
        for i in range(n):
            goe_row(c.rng, i, s_new, c.row)
            for j in range(i + 1):
                c.S[i * n + j] = c.C[i * n + j] + c.row[j]
    c.st.s = s_new


cdef int after_trial(Ctx *c, const double *hint) noexcept nogil:
    # the next decision: sigma_{t+1}, noise, and the top-k of S_{t+1}
    cdef double sig = next_sigma(c)
    c.st.t += 1
    c.st.sigma = sig
    noise_update(c, sqrt(c.st.t + 1.0) * sig)
    c.st.tol = tolerance(c, c.st.t + 1.0)
    if c.solver == SOLVER_EXACT:
        return solve_exact(c)
    if c.st.skip > 0.0:
        c.st.skip -= 1.0
        c.st.direct += 1.0
        return solve_exact(c)
    return solve_krylov(c, c.st.tol, hint)


cdef int setup(Ctx *c, int n, int k, int b, double[::1] state, double[::1] params,
               double[:, ::1] S, double[:, ::1] N, double[:, ::1] C, double[:, ::1] V,
               object capsule) except? -9:
    cdef blas_int info, lw, liw, q
    cdef double wq
    cdef blas_int iq
    memset(c, 0, sizeof(Ctx))
    c.n = n
    c.k = k
    c.b = b
    c.kind = <int> params[0]
    c.noise = <int> params[1]
    c.solver = <int> params[2]
    c.sigma_auto = <int> params[3]
    c.sigma_value = params[4]
    c.tol = params[5]
    c.maxiter = <int> params[6]
    c.st = <PCAState *> &state[0]
    c.S = &S[0, 0]
    c.N = &N[0, 0] if N.shape[0] > 0 else NULL
    c.C = &C[0, 0] if C.shape[0] > 0 else NULL
    c.V = &V[0, 0]
    c.rng = <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")
    q = 3 * b if 3 * b <= n else 2 * b
    c.bas = <double *> malloc(<size_t> n * q * sizeof(double))
    c.sbas = <double *> malloc(<size_t> n * q * sizeof(double))
    c.tmp = <double *> malloc(<size_t> n * q * sizeof(double))
    c.G = <double *> malloc(<size_t> q * q * sizeof(double))
    c.Y = <double *> malloc(<size_t> q * q * sizeof(double))
    c.theta = <double *> malloc(<size_t> (q + 1) * sizeof(double))
    c.w = <double *> malloc(<size_t> (n + q) * sizeof(double))
    c.R = <double *> malloc(<size_t> q * q * sizeof(double))
    c.P = <double *> malloc(<size_t> n * b * sizeof(double))
    c.SP = <double *> malloc(<size_t> n * b * sizeof(double))
    c.tau = <double *> malloc(<size_t> q * sizeof(double))
    c.row = <double *> malloc(<size_t> n * sizeof(double))
    c.isuppz = <blas_int *> malloc(<size_t> 2 * (n + q) * sizeof(blas_int))
    # everything a trial may need is allocated here, before any state changes,
    # so a call fails for lack of memory up front or not at all (untouched pages
    # of the LAPACK copy cost nothing while the Krylov solver keeps up)
    c.Sx = <double *> malloc(<size_t> n * n * sizeof(double))
    c.Zx = <double *> malloc(<size_t> n * b * sizeof(double))
    if (c.bas == NULL or c.sbas == NULL or c.tmp == NULL or c.G == NULL or c.Y == NULL
            or c.theta == NULL or c.w == NULL or c.R == NULL or c.tau == NULL
            or c.row == NULL or c.isuppz == NULL or c.P == NULL or c.SP == NULL
            or c.Sx == NULL or c.Zx == NULL):
        return ERR_NOMEM
    # workspace queried once per call, for the largest problem each routine sees
    lw = 1
    liw = 1
    with nogil:
        info = geqrf(n, q if q <= n else n, c.bas, n, c.tau, &wq, -1)
        lw = max(lw, <blas_int> wq)
        info = orgqr(n, q if q <= n else n, c.bas, n, c.tau, &wq, -1)
        lw = max(lw, <blas_int> wq)
        info = syevr_top(n, c.S, n, b, c.w, c.tmp, n, c.isuppz, &wq, -1, &iq, -1)
        lw = max(lw, <blas_int> wq)
        liw = max(liw, iq)
        if q <= n:
            info = syevr_top(q, c.G, q, b, c.w, c.tmp, q, c.isuppz, &wq, -1, &iq, -1)
            lw = max(lw, <blas_int> wq)
            liw = max(liw, iq)
    c.lwork = max(lw, <blas_int> (3 * b))     # dtrcon needs 3b, b
    c.liwork = max(liw, <blas_int> b)
    c.work = <double *> malloc(<size_t> c.lwork * sizeof(double))
    c.iwork = <blas_int *> malloc(<size_t> c.liwork * sizeof(blas_int))
    if c.work == NULL or c.iwork == NULL:
        return ERR_NOMEM
    return OK


cdef void teardown(Ctx *c) noexcept:
    free(c.bas); free(c.sbas); free(c.tmp); free(c.G); free(c.Y); free(c.theta)
    free(c.w); free(c.R); free(c.P); free(c.SP); free(c.tau); free(c.row); free(c.isuppz); free(c.work)
    free(c.iwork); free(c.Sx); free(c.Zx)


def initialize(double[::1] state, double[::1] params, double[:, ::1] S,
               double[:, ::1] N, double[:, ::1] C, double[:, ::1] V, object capsule):
    """The first decision, before any data: S_1 = s_1 G for a unit GOE draw G
    (s_1 = sigma for a given sigma; 0 for "auto", whose scale is unknown until
    data arrive) and V = top-b of G, a uniformly random subspace whatever the
    scale. Follow the Leader starts from S = 0 and the first b coordinate axes.
    For fixed noise G is kept in N. The caller holds the bit generator's lock."""
    cdef Ctx c
    cdef int n = S.shape[0], b = V.shape[0], j, code
    cdef int k = <int> params[7]
    cdef Py_ssize_t i
    cdef double s1
    code = setup(&c, n, k, b, state, params, S, N, C, V, capsule)
    try:
        if code != OK:
            return code
        with nogil:
            memset(c.S, 0, <size_t> n * n * sizeof(double))
            memset(c.V, 0, <size_t> n * b * sizeof(double))
            if c.C != NULL:
                memset(c.C, 0, <size_t> n * n * sizeof(double))
            if c.noise == NOISE_NONE:
                for j in range(b):
                    c.V[j * n + j] = 1.0
                c.st.sigma = 0.0
                c.st.s = 0.0
                code = OK
            else:
                s1 = 0.0 if c.sigma_auto else c.sigma_value
                c.st.sigma = s1
                # G goes to S first (solved there), then S becomes s1 G
                for i in range(n):
                    goe_row(c.rng, i, 1.0, c.S + i * n)
                code = solve_exact(&c)
                if c.noise == NOISE_FIXED:
                    memcpy(c.N, c.S, <size_t> n * n * sizeof(double))
                for i in range(<Py_ssize_t> n * n):
                    c.S[i] *= s1
                c.st.s = s1
                c.st.solves = 0
        return code
    finally:
        teardown(&c)


def run(const double[:, ::1] X, const double[::1] scale, const double[::1] trsq,
        double[::1] state, double[::1] params, double[:, ::1] S, double[:, ::1] N,
        double[:, ::1] C, double[:, ::1] V, object capsule):
    """Play len(X) trials. Vector instances: rows x_t of X, scale[t] = ||x_t||^2;
    gain ||V_k x_t||^2, S += x_t x_t^T (dsyr, one triangle). Dense instances
    (params' kind): rows of X are the n*n entries of symmetric PSD X_t, scale[t]
    an upper bound on ||X_t||_2, trsq[t] = tr(X_t^2); gain tr(V_k^T X_t V_k),
    S += X_t on one triangle. Then noise and the next top-k. Returns 0 or a
    negative error code. The caller holds the bit generator's lock."""
    cdef Ctx c
    cdef int n = S.shape[0], b = V.shape[0], code
    cdef int k = <int> params[7]
    cdef Py_ssize_t t, T = X.shape[0], j, jmax
    cdef double g
    cdef const double *x
    cdef const double *hint
    code = setup(&c, n, k, b, state, params, S, N, C, V, capsule)
    try:
        if code != OK:
            return code
        with nogil:
            for t in range(T):
                x = &X[t, 0]
                if c.kind == INSTANCE_DENSE:
                    g = quad_rows(n, k, x, c.V, c.tmp)
                    if trsq[t] > c.st.max_trsq:
                        c.st.max_trsq = trsq[t]
                    axpy_upper(n, 1.0, x, c.S)
                    if c.C != NULL:
                        axpy_upper(n, 1.0, x, c.C)
                    # X_t's column of largest diagonal: a direction of its range
                    jmax = 0
                    for j in range(n):
                        if x[j * n + j] > x[jmax * n + jmax]:
                            jmax = j
                    hint = x + jmax * n
                else:
                    gemv_rows(k, n, 1.0, c.V, x, 0.0, c.row)
                    g = 0.0
                    for j in range(k):
                        g += c.row[j] * c.row[j]
                    syr_upper(n, 1.0, x, c.S, n)
                    if c.C != NULL:
                        syr_upper(n, 1.0, x, c.C, n)
                    hint = x
                c.st.gain += g
                if scale[t] > c.st.scale:
                    c.st.scale = scale[t]
                code = after_trial(&c, hint)
                if code != OK:
                    break
        return code
    finally:
        teardown(&c)
