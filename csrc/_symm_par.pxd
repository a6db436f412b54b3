# The product of a symmetric matrix (one valid triangle) with a block of
# vectors, split into fixed row panels that run on one thread or several
# (_par.h) with bit-identical results: the Krylov products of the top-k
# solver (_topk.pxd), most of an FPL trial.
#
# Why panels of dgemm instead of one dsymm: OpenBLAS's dsymm first expands the
# triangle into packed full panels, which at n = 1000 and a block of 15
# vectors cost as much as the multiply (measured: dsymm 1.32 ms, dgemm on the
# full matrix 0.89 ms, one thread). Panel I of the result (rows i0..i1) is
#     A[0:i0, I]^T B[0:i0]  +  A[I, I] B[I]  +  A[I, i1:n] B[i1:n]
# (BLAS's column-major view; the upper triangle is the valid one): two
# dgemm calls on rectangles of the valid triangle and one small dsymm on the
# diagonal block. Every panel does the same n x width x m work, each is
# written by one task only, and its three calls and their order depend on n
# alone -- never on the thread count -- so the result is the same bit for bit
# on any number of threads, and under any load (which thread runs a panel
# does not matter: each call runs BLAS on one thread, see _threads.pyx).
#
# Where the CPU has AVX-512, the two off-diagonal products of a panel run
# through _skinny.h's kernels instead of dgemm (about twice dgemm's rate at
# these shapes, a block of ~15 vectors, and not bound to the AVX2 kernels
# that OPENBLAS_CORETYPE may impose), and so does the diagonal block, in
# 16-row pieces, instead of dsymm (which copies the block out whole first:
# an eighth of the flops took a fifth of the product's time at n = 1000).
# Their sums are in a fixed order too.
from libc.string cimport memset

from _blas cimport blas_int, gemm, symm_upper, symm_upper_ld

cdef extern from "_skinny.h" nogil:
    int sf_skinny_ok()
    int sf_skinny_on()
    int sf_skinny_blas_only
    void sf_gemm_tn(Py_ssize_t w, Py_ssize_t m, Py_ssize_t k, double alpha,
                    const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb,
                    double *C, Py_ssize_t ldc)
    void sf_gemm_nn(Py_ssize_t w, Py_ssize_t m, Py_ssize_t k, double alpha,
                    const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb,
                    double *C, Py_ssize_t ldc)
    void sf_symm_diag(Py_ssize_t w, Py_ssize_t m, double alpha, const double *A,
                      Py_ssize_t lda, const double *B, Py_ssize_t ldb, double *C,
                      Py_ssize_t ldc)

cdef extern from "_par.h" nogil:
    ctypedef struct sf_pool:
        pass
    ctypedef struct sf_par_stat:
        double inline_s, pool_s
        long loops, next_probe, interval
    ctypedef void (*sf_task_fn)(void *ctx, int task) noexcept nogil
    sf_pool *sf_pool_start(int threads)
    void sf_pool_stop(sf_pool *pool)
    long sf_pool_helper_tasks(sf_pool *pool)
    double sf_par_now()
    int sf_par_choose(sf_par_stat *stat, int *probe)
    void sf_par_learn(sf_par_stat *stat, int use_pool, int probe, double dt)
    void sf_par_run(sf_pool *pool, sf_par_stat *stat, int ntasks, sf_task_fn fn, void *ctx)
    void sf_flag_set(int *f)
    void sf_flag_wait(const int *f)

# An update of A's rows that a product may take in its own pass (see
# symm_product_prep): fn(ctx, r0, r1, part) updates the entries of C-order
# rows r0 .. r1-1 of the valid triangle -- the diagonal ones (ROWS_DIAG),
# those left of the diagonal (ROWS_OFF), or both -- each entry computed the
# same way whichever call and thread does it.
ctypedef void (*sf_rows_fn)(void *ctx, Py_ssize_t r0, Py_ssize_t r1, int part) noexcept nogil

cdef enum:
    ROWS_DIAG = 1
    ROWS_OFF = 2
    ROWS_ALL = 3

cdef enum:
    # Below this n the panels' call overhead is not repaid: one dsymm (on
    # one thread, whatever the thread count, so results still do not depend
    # on it) -- where the panels run on dgemm. With _skinny.h's kernels the
    # panels beat dsymm from n = 16 on (products of 15 vectors, one thread:
    # 0.21 against 0.37 us at n = 16, 26 against 45 at 250, 59 against 108
    # at 383).
    SYMM_PANEL_MIN = 384
    SYMM_PANEL_MIN_SKINNY = 16
    # rows per panel: 8 panels at n = 1000, enough for two threads to balance
    # under load, large enough for dgemm to run near its peak
    SYMM_PANEL_ROWS = 128


cdef struct SymmPanels:
    blas_int n, m, width
    bint skinny          # the off-diagonal products by _skinny.h's kernels
    double alpha
    const double *A
    const double *B
    double *C
    # symm_product_prep only: the row update and each panel's done flag
    sf_rows_fn prep
    void *prep_ctx
    int *ready
    int panels


cdef inline void symm_panel(void *ctx, int task) noexcept nogil:
    cdef SymmPanels *sp = <SymmPanels *> ctx
    cdef blas_int n = sp.n, i0 = task * sp.width
    cdef blas_int i1 = i0 + sp.width if i0 + sp.width < n else n
    if sp.skinny:
        sf_symm_diag(i1 - i0, sp.m, sp.alpha, sp.A + <Py_ssize_t> i0 * n + i0, n, sp.B + i0,
                     n, sp.C + i0, n)
    else:
        symm_upper_ld(i1 - i0, sp.m, sp.alpha, sp.A + <Py_ssize_t> i0 * n + i0, n, sp.B + i0,
                      n, 0.0, sp.C + i0, n)
    if i0 > 0:
        if sp.skinny:
            sf_gemm_tn(i1 - i0, sp.m, i0, sp.alpha, sp.A + <Py_ssize_t> i0 * n, n,
                       sp.B, n, sp.C + i0, n)
        else:
            gemm(b'T', b'N', i1 - i0, sp.m, i0, sp.alpha, sp.A + <Py_ssize_t> i0 * n, n,
                 sp.B, n, 1.0, sp.C + i0, n)
    if i1 < n:
        if sp.skinny:
            sf_gemm_nn(i1 - i0, sp.m, n - i1, sp.alpha, sp.A + <Py_ssize_t> i1 * n + i0,
                       n, sp.B + i1, n, sp.C + i0, n)
        else:
            gemm(b'N', b'N', i1 - i0, sp.m, n - i1, sp.alpha, sp.A + <Py_ssize_t> i1 * n + i0,
                 n, sp.B + i1, n, 1.0, sp.C + i0, n)


cdef inline void symm_product(sf_pool *pool, sf_par_stat *stat, blas_int n, blas_int m,
                              double alpha, const double *A, const double *B,
                              double *C) noexcept nogil:
    # C (n x m) = alpha * A @ B, A symmetric n x n read from its upper
    # triangle (lda n), B and C with leading dimension n (C-order (m, n)
    # blocks of row vectors), on the pool's threads (NULL: the caller's).
    symm_product_by(pool, stat, n, m, alpha, A, B, C, sf_skinny_on())


cdef inline void symm_product_by(sf_pool *pool, sf_par_stat *stat, blas_int n, blas_int m,
                                 double alpha, const double *A, const double *B,
                                 double *C, bint skinny) noexcept nogil:
    # symm_product, with the off-diagonal products by _skinny.h's kernels or
    # not (skinny True only where sf_skinny_ok(); tests run both)
    symm_product_prep(pool, stat, n, m, alpha, A, B, C, skinny, NULL, NULL, NULL)


cdef inline void symm_panel_prep(void *ctx, int task) noexcept nogil:
    # the panels from the last: panel p updates its own rows, then waits for
    # the rows below it (later panels, claimed before it), which its outer
    # products read, then runs symm_panel as the plain product does
    cdef SymmPanels *sp = <SymmPanels *> ctx
    cdef int p = sp.panels - 1 - task, q
    cdef blas_int i0 = p * sp.width
    cdef blas_int i1 = i0 + sp.width if i0 + sp.width < sp.n else sp.n
    sp.prep(sp.prep_ctx, i0, i1, ROWS_OFF)
    sf_flag_set(&sp.ready[p])
    for q in range(p + 1, sp.panels):
        sf_flag_wait(&sp.ready[q])
    symm_panel(ctx, p)


cdef inline int symm_panels_count(blas_int n) noexcept nogil:
    # panels of symm_product_prep (the size of its `ready` array)
    return (n + SYMM_PANEL_ROWS - 1) // SYMM_PANEL_ROWS


cdef inline void symm_product_prep(sf_pool *pool, sf_par_stat *stat, blas_int n, blas_int m,
                                   double alpha, const double *A, const double *B, double *C,
                                   bint skinny, sf_rows_fn prep, void *prep_ctx,
                                   int *ready) noexcept nogil:
    # A's pending row update (entries left of the diagonal; the diagonal is
    # the caller's, done before), then C = alpha * A @ B as symm_product_by
    # computes it, bit for bit -- in one pass: each panel's rows are updated
    # just before its product reads them, so the product finds them in
    # cache instead of reading them from memory a second time (at n = 4000,
    # two threads: the update and the product 7.7 ms instead of 10.0 in a C
    # harness). `ready` holds symm_panels_count(n) ints. prep NULL: no
    # update (symm_product_by).
    cdef SymmPanels sp
    if n < (SYMM_PANEL_MIN_SKINNY if skinny else SYMM_PANEL_MIN):
        if prep != NULL:
            prep(prep_ctx, 0, n, ROWS_OFF)
        symm_upper(n, m, alpha, A, n, B, 0.0, C)
        return
    sp.n = n
    sp.m = m
    sp.width = SYMM_PANEL_ROWS
    sp.alpha = alpha
    sp.skinny = skinny
    sp.A = A
    sp.B = B
    sp.C = C
    sp.prep = prep
    sp.prep_ctx = prep_ctx
    sp.ready = ready
    sp.panels = symm_panels_count(n)
    if prep == NULL:
        sf_par_run(pool, stat, sp.panels, symm_panel, &sp)
        return
    memset(ready, 0, <size_t> sp.panels * sizeof(int))
    sf_par_run(pool, stat, sp.panels, symm_panel_prep, &sp)
