# Compiled entries of streamfit.kernels.pca, the public low-level PCA API: GOE
# draws, one warm-started top-k solve, and the symmetric low-rank updates
# between solves. Each entry checks shapes and records, then runs a nogil
# primitive of _goe.pxd / _topk.pxd -- the same ones the FPL trial loop runs,
# so a caller composing them reproduces PerturbedLeaderPCA's decisions.
#
# Layout as in _pca.pyx: symmetric n x n matrices are C-order with the
# row-major lower triangle valid; blocks of vectors are C-order (b, n) rows.
from libc.math cimport isfinite, NAN
from libc.string cimport memcpy
from cpython.pycapsule cimport PyCapsule_GetPointer

import numpy as np

from _blas cimport blas_int, syrk_upper

from _dense cimport sf_row_update
from _common cimport bitgen_t, OK, ERR_NOMEM
from _goe cimport goe_fill
from _topk cimport (TopKState, TopKWork, topk_work_init, topk_work_free)
from _topk cimport TOPK_MAX_ITER as MAX_ITER, check_topk_state as check_topk_state_values
from _topk cimport topk_solve as solve_block

from streamfit._kernels._common import check_struct

cdef TopKState _topk_proto
TOPK_STATE_DTYPE = np.asarray(<TopKState[:1]> &_topk_proto).dtype


TOPK_MAX_ITER = MAX_ITER


def check_topk_state(const TopKState[::1] state):
    """Check a top-k state record's values as topk_solve does (a ValueError
    naming the field): for records loaded from a pickle."""
    check_struct(state.base, TOPK_STATE_DTYPE, "state")
    check_topk_state_values(&state[0], "state")


def goe(double[:, ::1] out, double sigma, object capsule):
    """Fill ``out`` (n, n) with sigma (G + G^T)/2, G_ij ~ N(0, 1), drawing only
    the n(n+1)/2 independent entries, row by row along the lower triangle,
    from the bit generator behind ``capsule`` (whose lock the caller holds)."""
    cdef Py_ssize_t n = out.shape[0]
    cdef bitgen_t *rng = <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")
    if out.shape[1] != n:
        raise ValueError(f"out must be square, got shape ({out.shape[0]}, {out.shape[1]})")
    if not (isfinite(sigma) and sigma >= 0.0):
        raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}")
    if n == 0:
        return
    with nogil:
        goe_fill(rng, n, sigma, &out[0, 0])


def topk_solve(const double[:, ::1] S, double[:, ::1] V, TopKState[::1] state,
               double[::1] values, int k, int maxiter, double tol, object hint,
               unsigned long long seed, bint krylov):
    """One solve of _topk.pxd: V (b, n) becomes the top-b eigenvector
    estimates of S (lower triangle), largest first, warm-started from V when
    ``krylov``; ``values`` (b) their Ritz values (NaN if every eigen-solver
    failed and V was kept). Returns OK or ERR_NOMEM (nothing changed then)."""
    check_struct(state.base, TOPK_STATE_DTYPE, "state")
    cdef int n = S.shape[0], b = V.shape[0], code, j
    cdef long long kept
    cdef TopKWork w
    cdef const double[::1] h
    cdef const double *hp = NULL
    if S.shape[1] != n or n == 0:
        raise ValueError(f"S must be a non-empty square matrix, got ({S.shape[0]}, {S.shape[1]})")
    if V.shape[1] != n or not 1 <= k <= b <= n:
        raise ValueError(f"V must have shape (b, {n}) with k = {k} <= b <= n, got "
                         f"({V.shape[0]}, {V.shape[1]})")
    if values.shape[0] != b:
        raise ValueError(f"values must have {b} entries, got {values.shape[0]}")
    if not 0 <= maxiter <= MAX_ITER:
        raise ValueError(f"maxiter must be in [0, {MAX_ITER}], got {maxiter}")
    if not (tol >= 0 and tol - tol == 0):
        raise ValueError(f"tol must be finite and >= 0, got {tol!r}")
    check_topk_state_values(&state[0], "state")
    if hint is not None:
        h = hint
        if h.shape[0] != n:
            raise ValueError(f"hint must have {n} entries, got {h.shape[0]}")
        hp = &h[0]
    code = topk_work_init(&w, n, k, b, maxiter)
    try:
        if code != OK:
            return code
        kept = state[0].kept
        with nogil:
            solve_block(&w, &S[0, 0], &V[0, 0], &state[0], tol, hp, seed, krylov)
            for j in range(b):
                values[j] = w.theta[j] if state[0].kept == kept else NAN
        return OK
    finally:
        topk_work_free(&w)


def sym_update(double[:, ::1] S, const double[:, ::1] rows, double alpha):
    """S += alpha rows^T rows on the lower triangle: for one row x, row i of
    S takes (alpha x_i) x in _dense.h's row update, the FPL loop's own (so
    the two agree bit for bit whichever kernels the BLAS picked: OpenBLAS's
    dsyr fuses some products and rounds its tails apart, by CPU type); dsyrk
    for a block."""
    cdef int n = S.shape[0], m = rows.shape[0], i
    if S.shape[1] != n or rows.shape[1] != n:
        raise ValueError(f"rows must have shape (m, {n}) for S of shape ({n}, {n})")
    if m == 0:
        return
    with nogil:
        if m == 1:
            for i in range(n):
                sf_row_update(i + 1, &S[i, 0], alpha * rows[0, i], &rows[0, 0], 0.0, NULL)
        else:
            syrk_upper(n, m, alpha, &rows[0, 0], 1.0, &S[0, 0])


def sym_add(double[:, ::1] S, const double[:, ::1] A, double alpha):
    """S += alpha A on the lower triangle (A symmetric, its lower triangle
    read), row by row in _dense.h's row update, as the FPL loop adds its
    noise."""
    cdef Py_ssize_t n = S.shape[0], i
    if S.shape[1] != n or A.shape[0] != n or A.shape[1] != n:
        raise ValueError(f"A must have the shape of S, ({n}, {n}), got ({A.shape[0]}, "
                         f"{A.shape[1]})")
    if n == 0:
        return
    with nogil:
        for i in range(n):
            sf_row_update(i + 1, &S[i, 0], 0.0, NULL, alpha, &A[i, 0])
