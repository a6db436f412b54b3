# An exact top-b solve that a signal can stop: LAPACK's dsyevr for a partial
# spectrum, stage by stage, polling for signals between the panels of its
# tridiagonal reduction (the O(n^3) part: ~175 s in one call at n = 10,000,
# where Ctrl-C had to wait for it).
#
# The stages are dsyevr's own (LAPACK 3.12's dsyevr.f with RANGE = 'I' and
# fewer than all eigenpairs): the scaling check (none: the caller scales by a
# power of two), dsytrd -- here its blocked loop written out, dlatrd and
# dsyr2k per panel of nb columns and dsytd2 for the last block, with
# dsytrd's own nb for the workspace dsyevr gives it and its crossover --
# then dstebz (bisection), dstein (inverse iteration) and dormtr (the back
# transformation), with dsyevr's workspace offsets and sizes, and its final
# sort. So the result is dsyevr's, bit for bit (checked against it in
# tests/pca/test_solver.py); when the stages cannot be matched (a scaling
# dsyevr would apply, all eigenpairs, small orders) the caller calls dsyevr.
from libc.string cimport memcpy

from _blas cimport (blas_int, sytrd_block, lansy_max_upper, lamch, latrd_upper, syr2k_upper,
                    sytd2_upper, stebz_index, stein, ormtr_upper, swap_columns)
from _common cimport OK, ERR_INTERRUPTED, ERR_LAPACK
from _eigen cimport EigWork, eig_top, EIG_EVR, EIG_EVD, _copy_upper, finite_upper
from _work_poll cimport Poll, poll_stop
from _topk cimport TopKWork, TopKState, topk_exact, pow2_scale
from libc.math cimport sqrt, INFINITY

cdef enum:
    # below this order an exact solve takes under ~50 ms: dsyevr in one call
    POLLED_MIN_N = 512
    # LAPACK's crossover for dsytrd (ilaenv(3, 'DSYTRD'): the last block,
    # of at least this order, is reduced unblocked)
    SYTRD_CROSSOVER = 32
    EVR_INTERRUPTED = -2000


cdef inline blas_int evr_partial_polled(EigWork *ws, blas_int n, double *A, blas_int m,
                                        double *w, double *Z, blas_int ldz,
                                        Poll *pl) noexcept nogil:
    # dsyevr('V', 'I', 'U', n, A, n, il = n - m + 1, iu = n, abstol = 0) with
    # ws's work spaces: the m largest eigenpairs of A (upper triangle;
    # destroyed), ascending in w and Z's columns. Returns dsyevr's info (0,
    # > 0 a failure; -1000 fewer pairs than asked), or EVR_INTERRUPTED when a
    # signal handler raised between two panels (nothing of the caller's
    # changed: A, w and Z are scratch).
    cdef blas_int lwork = ws.lwork, nb, nx, kk, i, j, found = 0, nsplit = 0, info, jj, imin
    cdef blas_int il = n - m + 1
    cdef double *tau = ws.work
    cdef double *d = ws.work + n
    cdef double *e = ws.work + 2 * n
    cdef double *wk = ws.work + 5 * n
    cdef blas_int llwork = lwork - 5 * n
    cdef blas_int *iblock = ws.iwork
    cdef blas_int *isplit = ws.iwork + n
    cdef blas_int *ifail = ws.iwork + 2 * n
    cdef blas_int *iwo = ws.iwork + 3 * n
    cdef double tmp
    # dsytrd's blocking for the workspace dsyevr hands it
    nb = sytrd_block(n)
    nx = n
    if 1 < nb < n:
        nx = nb if nb > SYTRD_CROSSOVER else SYTRD_CROSSOVER
        if nx < n:
            if llwork < n * nb:
                nb = llwork // n if llwork // n > 1 else 1
                if nb < 2:
                    nx = n
        else:
            nb = 1
    else:
        nb = 1
    kk = n - ((n - nx + nb - 1) // nb) * nb if nx < n else n
    # (1-based as dsytrd.f: panel columns i .. i + nb - 1)
    i = n - nb + 1
    while nx < n and i >= kk + 1:
        if poll_stop(pl, 4.0 * (i + nb) * (i + nb) * nb):
            return EVR_INTERRUPTED
        latrd_upper(i + nb - 1, nb, A, n, e, tau, wk, n)
        syr2k_upper(i - 1, nb, -1.0, A + <Py_ssize_t> (i - 1) * n, n, wk, n, 1.0, A, n)
        for j in range(i, i + nb):
            A[(j - 2) + <Py_ssize_t> (j - 1) * n] = e[j - 2]
            d[j - 1] = A[(j - 1) + <Py_ssize_t> (j - 1) * n]
        i -= nb
    if poll_stop(pl, 4.0 * kk * kk * kk):
        return EVR_INTERRUPTED
    sytd2_upper(kk, A, n, d, e, tau)
    info = stebz_index(n, il, n, d, e, &found, &nsplit, w, iblock, isplit, wk, iwo)
    if info != 0:
        return info
    info = stein(n, d, e, found, w, iblock, isplit, Z, ldz, wk, iwo, ifail)
    if poll_stop(pl, 4.0 * n * n * m):
        return EVR_INTERRUPTED
    ormtr_upper(n, found, A, n, tau, Z, ldz, ws.work + 2 * n, lwork - 2 * n)
    # dsyevr's sort: ascending eigenvalues, their vectors alongside
    for j in range(found - 1):
        imin = -1
        tmp = w[j]
        for jj in range(j + 1, found):
            if w[jj] < tmp:
                imin = jj
                tmp = w[jj]
        if imin >= 0:
            w[imin] = w[j]
            w[j] = tmp
            swap_columns(n, Z + <Py_ssize_t> imin * ldz, Z + <Py_ssize_t> j * ldz)
    if info == 0 and found != m:
        info = -1000
    return info


cdef inline bint evr_stages_apply(EigWork *ws, blas_int n, const double *A, blas_int m) noexcept nogil:
    # whether dsyevr would run the stages above on A: a partial spectrum, no
    # scaling (the largest |entry| within [rmin, rmax]), work space as queried
    cdef double anrm, smlnum, rmin, rmax
    if m >= n or n < 2 or ws.lwork < 26 * n or ws.liwork < 10 * n:
        return False
    smlnum = lamch(b'S') / lamch(b'P')
    rmin = sqrt(smlnum)
    rmax = 1.0 / sqrt(sqrt(lamch(b'S')))
    if sqrt(1.0 / smlnum) < rmax:
        rmax = sqrt(1.0 / smlnum)
    anrm = lansy_max_upper(n, A, n, ws.work)
    return not ((anrm > 0.0 and anrm < rmin) or anrm > rmax)


cdef inline int topk_exact_polled(TopKWork *w, const double *S, double *V, TopKState *st,
                                  Poll *pl) noexcept nogil:
    # topk_exact (_topk.pxd) -- the same result, bit for bit -- with its
    # dsyevr run stage by stage, polling between them at n >= POLLED_MIN_N.
    # Returns OK, or ERR_INTERRUPTED with st, V unchanged.
    cdef int n = w.n, b = w.b, j, code = OK
    cdef blas_int info
    cdef double sc
    cdef EigWork *ws = &w.eig
    if n < POLLED_MIN_N or w.first != EIG_EVR or b >= n:
        return topk_exact(w, S, V, st)
    sc = pow2_scale(n, S, n)
    ws.fallbacks = 0
    if not finite_upper(n, S, n):
        ws.last_info = 0
        code = ERR_LAPACK
    else:
        _copy_upper(n, S, n, sc, w.Sx)
        if evr_stages_apply(ws, n, w.Sx, b):
            info = evr_partial_polled(ws, n, w.Sx, b, w.w, w.Zx, n, pl)
        else:
            info = 1
        if info == EVR_INTERRUPTED:
            return ERR_INTERRUPTED
        if info != 0:
            # dsyevr itself when its stages do not apply, then the rest of
            # the chain (eig_top from where it stands)
            code = eig_top(ws, EIG_EVR, n, S, n, sc, b, w.w, w.Zx, n, w.Sx, True)
    st.solves += 1
    st.eig_fallbacks += <long long> ws.fallbacks
    if code != OK:
        st.kept += 1
        st.gap = INFINITY
        return OK
    for j in range(b):
        w.theta[j] = w.w[b - 1 - j] / sc
        memcpy(w.bas + j * n, w.Zx + (b - 1 - j) * n, n * sizeof(double))
    memcpy(V, w.bas, <size_t> n * b * sizeof(double))
    st.gap = 0.0
    return OK
