# Python-visible twins of the symmetric eigen-solver chain in _eigen.pxd:
# the kernels call the chain in C; Python calls it here (regret accounting,
# streamfit.kernels, tests that force a later routine of the chain).
import numpy as np

from _common cimport OK, ERR_NOMEM, ERR_LAPACK
from _eigen cimport (EigWork, eig_work_init, eig_work_free, eig_top, eig_all, EIG_EVR,
                     EIG_EVD, EIG_EV, EIG_JACOBI)
from libc.stdlib cimport malloc, free

ROUTINES = {"evr": EIG_EVR, "evd": EIG_EVD, "ev": EIG_EV, "jacobi": EIG_JACOBI}


def eigh_top(const double[:, ::1] A, int m, bint vectors=True, int first=EIG_EVR):
    """The m largest eigenvalues (ascending) of the symmetric A, read from its
    lower triangle, and with ``vectors`` their eigenvectors as rows (m, n).
    Returns (code, w, Z, fallbacks, info): code 0, or ERR_LAPACK if every
    routine failed (info: the last LAPACK info), or ERR_NOMEM."""
    cdef int n = A.shape[0], code
    cdef EigWork ws
    # dsyevr's W has n entries even when it returns m < n of them (it works
    # in all of them): a buffer of m is written past its end
    cdef double[::1] w = np.zeros(max(n, 1))
    cdef double[:, ::1] Z = np.zeros((m if vectors else 0, n))
    cdef double *B
    if A.shape[1] != n or not 0 <= m <= n:
        raise ValueError(f"A must be square and 0 <= m <= n, got {A.shape[0]}x{A.shape[1]}, "
                         f"m = {m}")
    if n == 0 or m == 0:
        return OK, np.zeros(m), np.asarray(Z), 0, 0
    B = <double *> malloc(<size_t> n * n * sizeof(double))
    code = eig_work_init(&ws, n, m, False)
    try:
        if B == NULL or code != OK:
            return ERR_NOMEM, None, None, 0, 0
        with nogil:
            code = eig_top(&ws, first, n, &A[0, 0], n, 1.0, m, &w[0],
                           &Z[0, 0] if vectors else NULL, n, B, vectors)
        return code, np.asarray(w)[:m].copy(), np.asarray(Z), int(ws.fallbacks), int(ws.last_info)
    finally:
        free(B)
        eig_work_free(&ws)


def eigh_all(const double[:, ::1] A, int first=EIG_EVD):
    """All eigenpairs of the symmetric A (lower triangle): (code, w ascending,
    V with eigenvectors as rows, fallbacks, info)."""
    cdef int n = A.shape[0], code
    cdef EigWork ws
    cdef double[::1] w = np.zeros(n)
    cdef double[:, ::1] V = np.zeros((n, n))
    if A.shape[1] != n:
        raise ValueError(f"A must be square, got {A.shape[0]}x{A.shape[1]}")
    if n == 0:
        return OK, np.asarray(w), np.asarray(V), 0, 0
    code = eig_work_init(&ws, n, n, first == EIG_EVD)
    try:
        if code != OK:
            return ERR_NOMEM, None, None, 0, 0
        with nogil:
            code = eig_all(&ws, first, n, &A[0, 0], n, &w[0], &V[0, 0])
        return code, np.asarray(w), np.asarray(V), int(ws.fallbacks), int(ws.last_info)
    finally:
        eig_work_free(&ws)
