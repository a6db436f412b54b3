# The product of a symmetric matrix (one valid triangle) with a block of
# vectors, split into fixed row panels that run on one OpenMP thread or
# several with bit-identical results: the Krylov products of the top-k
# solver (_topk.pxd), most of an FPL trial.
#
# Panel I of the result (rows i0..i1) is
#     A[0:i0, I]^T B[0:i0]  +  A[I, I] B[I]  +  A[I, i1:n] B[i1:n]
# (BLAS's column-major view; the upper triangle is the valid one): two
# products on rectangles of the valid triangle and one on the diagonal block,
# by _skinny.h's kernels (a tall matrix against ~15 vectors, where dgemm's
# square-block kernels run at a fraction of the core's rate). Every panel
# does the same n x width x m work, each is written by one thread only, and
# its three products and their order depend on n alone -- never on the
# thread count -- so the result is the same bit for bit on any number of
# threads, and under any load. No BLAS runs inside the parallel region:
# OpenBLAS keeps whatever thread count the caller gave it.
from cython.parallel cimport prange
from libc.stdlib cimport malloc, free

from _blas cimport blas_int, syrk_upper

from _skinny cimport sf_gemm_tn, sf_gemm_nn, sf_symm_diag

cdef enum:
    # rows per panel: 8 panels at n = 1000, enough for two threads to balance
    # under load, large enough for the kernels to run near their peak
    SYMM_PANEL_ROWS = 128
    # below this n a trial's parallel parts are too short for a second thread
    # to pay for waking it (measured: see PerturbedLeaderPCA's Threads)
    PAR_MIN_N = 768


cdef struct SymmPanels:
    blas_int n, m, width
    double alpha
    const double *A
    const double *B
    double *C


cdef inline int par_threads(int threads, Py_ssize_t n) noexcept nogil:
    # the threads a loop over an n x n matrix gets: one below PAR_MIN_N
    return threads if n >= PAR_MIN_N and threads > 1 else 1


cdef inline void symm_panel(const SymmPanels *sp, int task) noexcept nogil:
    cdef blas_int n = sp.n, i0 = task * sp.width
    cdef blas_int i1 = i0 + sp.width if i0 + sp.width < n else n
    sf_symm_diag(i1 - i0, sp.m, sp.alpha, sp.A + <Py_ssize_t> i0 * n + i0, n, sp.B + i0,
                 n, sp.C + i0, n)
    if i0 > 0:
        sf_gemm_tn(i1 - i0, sp.m, i0, sp.alpha, sp.A + <Py_ssize_t> i0 * n, n,
                   sp.B, n, sp.C + i0, n)
    if i1 < n:
        sf_gemm_nn(i1 - i0, sp.m, n - i1, sp.alpha, sp.A + <Py_ssize_t> i1 * n + i0,
                   n, sp.B + i1, n, sp.C + i0, n)


cdef inline void symm_product(int threads, blas_int n, blas_int m, double alpha,
                              const double *A, const double *B, double *C) noexcept nogil:
    # C (n x m) = alpha * A @ B, A symmetric n x n read from its upper
    # triangle (lda n), B and C with leading dimension n (C-order (m, n)
    # blocks of row vectors), on up to `threads` OpenMP threads.
    cdef SymmPanels sp
    cdef int panels = (n + SYMM_PANEL_ROWS - 1) // SYMM_PANEL_ROWS, task
    sp.n = n
    sp.m = m
    sp.width = SYMM_PANEL_ROWS
    sp.alpha = alpha
    sp.A = A
    sp.B = B
    sp.C = C
    threads = par_threads(threads, n)
    if threads == 1:
        for task in range(panels):
            symm_panel(&sp, task)
    else:
        for task in prange(panels, schedule="dynamic", chunksize=1, num_threads=threads):
            symm_panel(&sp, task)


cdef inline void syrk_panel(Py_ssize_t n, Py_ssize_t p, const double *Z, double *C,
                            double *Bt, int task) noexcept nogil:
    # Panel `task` of C += Z Z^T (see syrk_product): columns i0..i1 of C's
    # column-major upper triangle. Bt (p x width) takes the panel's rows of
    # Z, transposed, so that both products are _skinny.h's nn kernel.
    cdef Py_ssize_t i0 = <Py_ssize_t> task * SYMM_PANEL_ROWS
    cdef Py_ssize_t i1 = i0 + SYMM_PANEL_ROWS if i0 + SYMM_PANEL_ROWS < n else n
    cdef Py_ssize_t w = i1 - i0, t, j
    for t in range(p):
        for j in range(w):
            Bt[t + j * p] = Z[i0 + j + t * n]
    if i0 > 0:
        # the rectangle above the diagonal block: C[0:i0, I] += Z[0:i0] Bt
        sf_gemm_nn(i0, w, p, 1.0, Z, n, Bt, p, C + i0 * n, n)
    for j in range(w):
        # the diagonal block's column j, rows i0..i0 + j
        sf_gemm_nn(j + 1, 1, p, 1.0, Z + i0, n, Bt + j * p, p, C + (i0 + j) * n + i0, n)


cdef inline void syrk_product(int threads, Py_ssize_t n, Py_ssize_t p, const double *Z,
                              double *C) noexcept nogil:
    # C (n x n, column-major upper triangle: the row-major lower one) += Z Z^T
    # for the column-major n x p Z (a C-order (p, n) block of rows), in the
    # symmetric product's fixed panels (the same sums on any thread count),
    # by _skinny.h's kernels: no BLAS, whose threads OpenBLAS would start
    # even for this (at n = 400, p = 64: 30x one thread's time on two).
    cdef int panels = (n + SYMM_PANEL_ROWS - 1) // SYMM_PANEL_ROWS, task
    cdef double *Bt
    if p == 0:
        return
    Bt = <double *> malloc(<size_t> panels * p * SYMM_PANEL_ROWS * sizeof(double))
    if Bt == NULL:
        syrk_upper(<blas_int> n, <blas_int> p, 1.0, Z, 1.0, C)   # (no room: BLAS's)
        return
    threads = par_threads(threads, n)
    if threads == 1:
        for task in range(panels):
            syrk_panel(n, p, Z, C, Bt + <Py_ssize_t> task * p * SYMM_PANEL_ROWS, task)
    else:
        for task in prange(panels, schedule="dynamic", chunksize=1, num_threads=threads):
            syrk_panel(n, p, Z, C, Bt + <Py_ssize_t> task * p * SYMM_PANEL_ROWS, task)
    free(Bt)
