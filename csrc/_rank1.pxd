# The eigendecomposition of A + rho x x^T from that of A, as one merge step of
# divide and conquer does it (LAPACK's dlaed2 + dlaed3 for a single block):
# O(n K^2) flops, K <= n the size of the block that deflation leaves, instead of
# a new decomposition's ~4 n^3 and more (dsyevd).
#
#   A = U^T diag(d) U, U's rows the eigenvectors (C-order), d ascending.
#   z = U x, scaled to norm 1 (rho' = rho ||z||^2): A + rho x x^T =
#   U^T (diag(d) + rho' z z^T) U.
#   Deflation (dlaed2): an entry with rho' |z_j| <= tol is already an eigenpair
#   (d_j, u_j); two entries whose eigenvalues are close, |(d_j - d_i) c s| <=
#   tol after the Givens rotation (c, s) that moves z_i's weight into z_j, are
#   rotated and u_i deflates with the rotated value. Exactly tied eigenvalues
#   (MEG's and GD's untouched directions, GD's clipped zeros) always deflate:
#   a group of equal d's keeps one entry. tol = 8 eps max(|d|_max, rho'), the
#   norm of the updated matrix, so each deflation is a backward error of that
#   size -- what a full eigensolver commits anyway.
#   The K kept entries: the secular equation 1 + rho' sum z_i^2 / (d_i - lam)
#   for each new eigenvalue by LAPACK dlaed4, which also returns the
#   differences d_i - lam_j directly; then z-hat from the computed eigenvalues
#   (Gu & Eisenstat 1994, as dlaed3: zhat_i^2 = prod_j (lam_j - d_i) /
#   prod_{j != i} (d_j - d_i)), so that the eigenvectors
#   q_j = (zhat_i / (d_i - lam_j))_i, normalised, are orthogonal to working
#   precision whatever the gaps; and the new rows Q^T U_kept, one dgemm of
#   2 n K^2 flops, the only O(n^3) work.
#
# The result is merged with the deflated pairs in ascending order. Nothing the
# caller owns changes before the secular equation succeeded: the rotations
# are recorded and applied to U afterwards, so a failure (dlaed4's info > 0,
# which LAPACK's own divide and conquer also reports) leaves U and d as they
# were, for the caller to fall back to a full eigendecomposition.
#
# Layout as in _capped.pyx: C-order rows for eigenvectors (column-major
# columns for BLAS), Q column-major K x K.
from libc.math cimport fabs, sqrt, copysign, hypot, isfinite, ldexp, ilogb
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

from _blas cimport blas_int, nrm2, gemv_rows, gemm, rot, laed4
from _common cimport OK, ERR_NOMEM, ERR_LAPACK

cdef extern from "float.h":
    double DBL_EPSILON


ctypedef struct Rank1Work:
    int n
    double *z          # n: U x, normalised (the secular z of every entry)
    double *dd         # n: d, with deflation's rotated values
    double *dlamda     # n: the kept eigenvalues, strictly increasing
    double *zk         # n: the kept entries of z, normalised
    double *lam        # n: the kept block's new eigenvalues
    double *zhat       # n: Gu-Eisenstat's z
    double *rc         # n: recorded rotations (cosines,
    double *rs         #     sines,
    int *rp            #     and the two rows each rotates)
    int *rq
    int *kept          # n: rows of the kept entries, ascending
    int *defl          # n: rows of the deflated entries, by value
    int *ordl          # n: the new eigenvalues' order (ascending)
    double *Q          # n x n: the kept block's eigenvectors, column-major K x K
    double *H          # n x n: the kept block's new rows, K x n
    double *Unew       # n x n: the result's rows (and the gathered kept rows)


cdef inline int rank1_work_init(Rank1Work *ws, int n) noexcept nogil:
    # all work space up front: a call then allocates nothing
    cdef size_t nn = <size_t> n * n
    memset(ws, 0, sizeof(Rank1Work))
    ws.n = n
    ws.z = <double *> malloc((9 * <size_t> n + 3 * nn + 1) * sizeof(double))
    ws.rp = <int *> malloc((5 * <size_t> n + 1) * sizeof(int))
    if ws.z == NULL or ws.rp == NULL:
        free(ws.z); free(ws.rp)
        ws.z = NULL
        ws.rp = NULL
        return ERR_NOMEM
    ws.dd = ws.z + n
    ws.dlamda = ws.dd + n
    ws.zk = ws.dlamda + n
    ws.lam = ws.zk + n
    ws.zhat = ws.lam + n
    ws.rc = ws.zhat + n
    ws.rs = ws.rc + n
    ws.Q = ws.rs + n
    ws.H = ws.Q + nn
    ws.Unew = ws.H + nn
    ws.rq = ws.rp + n
    ws.kept = ws.rq + n
    ws.defl = ws.kept + n
    ws.ordl = ws.defl + n
    return OK


cdef inline void rank1_work_free(Rank1Work *ws) noexcept nogil:
    free(ws.z); free(ws.rp)
    memset(ws, 0, sizeof(Rank1Work))


cdef inline int _deflate(Rank1Work *ws, int n, const double *d, int e, double rho,
                         double tol, int *nrot, int *nd) noexcept nogil:
    # dlaed2's deflation on ws.z (normalised) and ws.dd (d scaled by 2^-e): fills
    # ws.kept (K rows, ascending), ws.defl (nd rows) and the rotations (nrot,
    # not yet applied to U); returns K
    cdef int j, pj = -1, K = 0
    cdef double c, s, tau, t, tt
    cdef double *z = ws.z
    cdef double *dd = ws.dd
    for j in range(n):
        dd[j] = ldexp(d[j], -e)         # scaled by 2^-e: exact
    nrot[0] = 0
    nd[0] = 0
    for j in range(n):
        if rho * fabs(z[j]) <= tol:
            # (d_j, u_j) is an eigenpair already, to within tol
            ws.defl[nd[0]] = j
            nd[0] += 1
            continue
        if pj < 0:
            pj = j
            continue
        s = z[pj]
        c = z[j]
        tau = hypot(c, s)
        t = dd[j] - dd[pj]
        c = c / tau
        s = -s / tau
        if fabs(t * c * s) <= tol:
            # rotate z_pj's weight into z_j: u_pj deflates with the rotated
            # value, the off-diagonal t c s (<= tol) is dropped
            z[j] = tau
            z[pj] = 0.0
            ws.rp[nrot[0]] = pj
            ws.rq[nrot[0]] = j
            ws.rc[nrot[0]] = c
            ws.rs[nrot[0]] = s
            nrot[0] += 1
            tt = dd[pj] * c * c + dd[j] * s * s
            dd[j] = dd[pj] * s * s + dd[j] * c * c
            dd[pj] = tt
            ws.defl[nd[0]] = pj
            nd[0] += 1
        else:
            ws.kept[K] = pj
            K += 1
        pj = j
    if pj >= 0:
        ws.kept[K] = pj
        K += 1
    return K


cdef inline int _secular(Rank1Work *ws, int K, double rho) noexcept nogil:
    # The kept block's eigenvalues (ws.lam) and eigenvectors (ws.Q, columns)
    # from dlamda, zk; OK or ERR_LAPACK (dlaed4 failed)
    cdef int i, j
    cdef double nk, r, tmp
    cdef double *Q = ws.Q
    cdef double *col
    nk = nrm2(K, ws.zk)
    # dlaed4 assumes ||z|| = 1: deflation took some weight out
    r = rho * nk * nk
    for i in range(K):
        ws.zk[i] = ws.zk[i] / nk
    for j in range(K):
        if laed4(K, j, ws.dlamda, ws.zk, Q + <size_t> j * K, r, &ws.lam[j]) != 0:
            return ERR_LAPACK
    if K <= 2:
        return OK           # dlaed4 returned the eigenvectors themselves
    # Gu-Eisenstat (dlaed3): zhat_i^2 = -(d_i - lam_i) prod_{j != i}
    # (d_i - lam_j) / (d_i - d_j), from the differences dlaed4 computed
    for i in range(K):
        ws.zhat[i] = Q[<size_t> i * K + i]
    for j in range(K):
        col = Q + <size_t> j * K
        tmp = ws.dlamda[j]
        for i in range(j):
            ws.zhat[i] = ws.zhat[i] * (col[i] / (ws.dlamda[i] - tmp))
        for i in range(j + 1, K):
            ws.zhat[i] = ws.zhat[i] * (col[i] / (ws.dlamda[i] - tmp))
    for i in range(K):
        ws.zhat[i] = copysign(sqrt(-ws.zhat[i]), ws.zk[i])
    # q_j = (zhat_i / (d_i - lam_j))_i / norm
    for j in range(K):
        col = Q + <size_t> j * K
        for i in range(K):
            col[i] = ws.zhat[i] / col[i]
        tmp = nrm2(K, col)
        if not (tmp > 0.0 and isfinite(tmp)):
            return ERR_LAPACK
        for i in range(K):
            col[i] = col[i] / tmp
    return OK


cdef inline void _sort_by(int *idx, int m, const double *val) noexcept nogil:
    # insertion sort of idx by val[idx] (stable): the lists here are sorted or
    # nearly so (deflation's rotations move values within their pair's gap)
    cdef int a, b, v
    for a in range(1, m):
        v = idx[a]
        b = a
        while b > 0 and val[idx[b - 1]] > val[v]:
            idx[b] = idx[b - 1]
            b -= 1
        idx[b] = v


cdef inline int rank1_update(Rank1Work *ws, int n, double *U, const double *d,
                             const double *x, double rho, double *mu,
                             int *block) noexcept nogil:
    # The eigendecomposition of U^T diag(d) U + rho x x^T (rho > 0): new rows
    # into ws.Unew, eigenvalues ascending into mu, the kept block's size into
    # block. OK: U's rows were rotated (scratch now). ERR_LAPACK: U, d as they
    # were.
    cdef int K, nrot = 0, nd = 0, i, j, a, b, pos, e
    cdef double zn, r, tol, top, dv
    cdef double *z = ws.z
    gemv_rows(n, n, 1.0, U, x, 0.0, z)          # z = U @ x
    block[0] = 0
    # a non-finite entry (only an overflowed or corrupted state has one) would
    # go through dlaed4 unnoticed: refuse it, as the full solvers do
    for i in range(n):
        if not (isfinite(z[i]) and isfinite(d[i])):
            return ERR_LAPACK
    if not isfinite(rho):
        return ERR_LAPACK
    zn = nrm2(n, z)
    if zn == 0.0:
        memcpy(ws.Unew, U, <size_t> n * n * sizeof(double))
        memcpy(mu, d, n * sizeof(double))
        return OK
    r = rho * zn * zn
    if not isfinite(r):
        return ERR_LAPACK
    for i in range(n):
        z[i] = z[i] / zn
    top = fabs(d[0]) if fabs(d[0]) > fabs(d[n - 1]) else fabs(d[n - 1])
    if top < r:
        top = r
    if top == 0.0:
        memcpy(ws.Unew, U, <size_t> n * n * sizeof(double))
        memcpy(mu, d, n * sizeof(double))
        return OK
    # Work on the problem scaled by a power of 2 (exact) to norm ~1, as LAPACK's
    # dstedc does: dlaed4 squares differences and z's, which would overflow
    # or underflow at extreme scales
    e = ilogb(top)
    r = ldexp(r, -e)
    # dlaed2's 8 eps, eps = 2^-53 the unit roundoff (dlamch('E')), of the
    # scaled norm (in [1, 2))
    tol = 4.0 * DBL_EPSILON * ldexp(top, -e)
    K = _deflate(ws, n, d, e, r, tol, &nrot, &nd)
    for i in range(K):
        ws.dlamda[i] = ws.dd[ws.kept[i]]
        ws.zk[i] = z[ws.kept[i]]
    if K > 0 and _secular(ws, K, r) != OK:
        return ERR_LAPACK
    for i in range(K):
        if not isfinite(ws.lam[i]):
            return ERR_LAPACK
    # from here on nothing fails
    for i in range(nrot):
        rot(n, U + <size_t> ws.rp[i] * n, U + <size_t> ws.rq[i] * n, ws.rc[i], ws.rs[i])
    if K > 0:
        # H (K x n rows) = Q^T @ U[kept]: column-major, U_kept (n x K) @ Q (K x K)
        for i in range(K):
            memcpy(ws.Unew + <size_t> i * n, U + <size_t> ws.kept[i] * n, n * sizeof(double))
        gemm(b'N', b'N', n, K, K, 1.0, ws.Unew, n, ws.Q, K, 0.0, ws.H, n)
    # merge the deflated pairs and the new ones, ascending
    for i in range(K):
        ws.ordl[i] = i
    _sort_by(ws.ordl, K, ws.lam)
    _sort_by(ws.defl, nd, ws.dd)
    a = 0
    b = 0
    for pos in range(n):
        if b >= K or (a < nd and ws.dd[ws.defl[a]] <= ws.lam[ws.ordl[b]]):
            j = ws.defl[a]
            mu[pos] = ldexp(ws.dd[j], e)
            memcpy(ws.Unew + <size_t> pos * n, U + <size_t> j * n, n * sizeof(double))
            a += 1
        else:
            j = ws.ordl[b]
            mu[pos] = ldexp(ws.lam[j], e)
            memcpy(ws.Unew + <size_t> pos * n, ws.H + <size_t> j * n, n * sizeof(double))
            b += 1
    block[0] = K
    return OK
