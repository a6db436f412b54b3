# Test entries: `def` wrappers around nogil internals that the tests check
# against exact oracles, one place for all of them. Production code never
# imports this module (tests/kernels/test_testing_module.py holds it to that); the
# internals come in by cimport, so the tests run the very code the kernels
# inline. Not API: no validation beyond what keeps the internals inside the
# arrays.
import numpy as np

from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from _blas cimport blas_int
from _common cimport OK
from _order_stats cimport select_kth as _select_kth
from _power_iter cimport top_eigenvalue as _top_eigenvalue
from _pav cimport pav_increasing
from _rank1 cimport Rank1Work, rank1_work_init, rank1_work_free, rank1_update
from _symm_par cimport symm_product as _symm_product
from _topk cimport TopKWork, topk_work_init, topk_work_free, orth_new as _orth_new
from _work_poll cimport WorkHook, Poll, new_work_hook, poll_quiet

cdef WorkHook _hook = new_work_hook()      # never armed: the power iteration's quiet poller


# --- the quantile kernels' internals ------------------------------------------------

def select_kth(double[::1] a, Py_ssize_t k):
    """_order_stats.pxd's selection: a is permuted in place; returns its k-th
    smallest value."""
    if not 0 <= k < a.shape[0]:
        raise ValueError(f"k must be in [0, {a.shape[0]}), got {k}")
    return _select_kth(&a[0], a.shape[0], k)


def top_eigenvalue(const double[:, ::1] X, bint fit_intercept, sample_weight=None):
    """_power_iter.pxd's power iteration for the top eigenvalue of the
    (weighted) second moment of [X 1]."""
    cdef Py_ssize_t m = X.shape[0], d = X.shape[1]
    cdef const double[::1] sw
    cdef double lam = -1.0
    cdef Poll pl
    cdef double *buf = <double *> malloc(2 * max(d, 1) * sizeof(double))
    if buf == NULL:
        raise MemoryError("top_eigenvalue: no work space")
    poll_quiet(&pl, &_hook)
    try:
        if sample_weight is not None:
            sw = np.ascontiguousarray(sample_weight, dtype=np.float64)
            if sw.shape[0] != m:
                raise ValueError("sample_weight must have one value per row")
        if m == 0:
            return -1.0
        _top_eigenvalue(&X[0, 0], &sw[0] if sample_weight is not None else NULL, m, d,
                        fit_intercept, buf, buf + d, &pl, &lam)
        return lam
    finally:
        free(buf)


def pav(double[::1] v):
    """_pav.pxd's pool-adjacent-violators projection of v, in place."""
    cdef Py_ssize_t m = v.shape[0]
    cdef double *buf = <double *> malloc(2 * max(m, 1) * sizeof(double))
    if buf == NULL:
        raise MemoryError("pav: no work space")
    if m:
        pav_increasing(&v[0], m, buf, buf + m)
    free(buf)


# --- the PCA kernels' internals ------------------------------------------------------

def symm_product(const double[:, ::1] S, const double[:, ::1] B, int threads):
    """_symm_par.pxd's Krylov product S @ B[j] for the (m, n) rows of B, S's
    row-major lower triangle being the valid one, through the panels on
    `threads` OpenMP threads (one below PAR_MIN_N); returns the (m, n)
    result."""
    cdef Py_ssize_t n = S.shape[0], m = B.shape[0]
    if S.shape[1] != n or B.shape[1] != n or m < 1 or threads < 1:
        raise ValueError("S must be (n, n) and B (m, n) with m >= 1, threads >= 1")
    out = np.empty((m, n))
    cdef double[:, ::1] C = out
    with nogil:
        _symm_product(threads, <blas_int> n, <blas_int> m, 1.0, &S[0, 0], &B[0, 0], &C[0, 0])
    return out


def orth_new(const double[:, ::1] V, const double[:, ::1] X):
    """The Krylov solver's block Gram-Schmidt step (_topk.pxd's orth_new) on
    the (b, n) orthonormal rows V and (r, n) new rows X, r <= 2b. Returns
    (ok, Q, R): Q the (b + r, n) rows [V, X made orthonormal and orthogonal
    to V], R the (b + r, b + r) coefficients with X = R[:, b:]^T [V; Q_new]
    read column-major (X[j] = sum_i R[b + j, i] Q[i]); ok False where the
    step asks for the whole QR instead."""
    cdef int b = V.shape[0], n = V.shape[1], r = X.shape[0], m = b + r
    cdef TopKWork w
    cdef bint ok
    if X.shape[1] != n or r < 1 or r > 2 * b or 3 * b > n:
        raise ValueError("V must be (b, n), X (r, n), 1 <= r <= 2b, 3b <= n")
    if topk_work_init(&w, n, b, b, 1) != OK:
        topk_work_free(&w)
        raise MemoryError()
    try:
        memcpy(w.bas, &V[0, 0], <size_t> n * b * sizeof(double))
        memcpy(w.bas + <Py_ssize_t> n * b, &X[0, 0], <size_t> n * r * sizeof(double))
        ok = _orth_new(&w, m)
        Q = np.array(<double[:m, :n]> w.bas)
        R = np.array(<double[:m, :m]> w.R)
    finally:
        topk_work_free(&w)
    return bool(ok), Q, R


def rank_one_update(const double[:, ::1] U, const double[::1] d, const double[::1] x,
                    double rho):
    """The capped-MSG kernel's rank-one update (_rank1.pxd) of the
    decomposition A = U^T diag(d) U (U's rows the eigenvectors, d ascending)
    to A + rho x x^T, rho > 0. Returns (U_new, mu, K): rows and eigenvalues
    ascending, K the size of the block deflation left. Raises
    numpy.linalg.LinAlgError if the secular solver failed."""
    cdef int n = U.shape[0], K = 0, code, i
    cdef Rank1Work ws
    if n < 1 or U.shape[1] != n or d.shape[0] != n or x.shape[0] != n:
        raise ValueError("U must be n x n, d and x of length n >= 1")
    if not rho > 0.0:
        raise ValueError(f"rho must be > 0, got {rho}")
    for i in range(n - 1):
        if d[i] > d[i + 1]:            # (a NaN passes: the kernel's to refuse)
            raise ValueError("d must be ascending")
    work = np.array(U, dtype=np.float64, order="C", copy=True)
    cdef double[:, ::1] Uw = work
    mu = np.empty(n)
    cdef double[::1] muv = mu
    if rank1_work_init(&ws, n) != OK:
        raise MemoryError()
    try:
        with nogil:
            code = rank1_update(&ws, n, &Uw[0, 0], &d[0], &x[0], rho, &muv[0], &K)
        if code != OK:
            raise np.linalg.LinAlgError("rank-one update: the secular equation solver "
                                        "(dlaed4) failed")
        out = np.empty((n, n))
        out[...] = <double[:n, :n]> ws.Unew
        return out, mu, K
    finally:
        rank1_work_free(&ws)
