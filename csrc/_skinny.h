/* Skinny matrix products for the symmetric product's panels (_symm_par.pxd):
 * a tall matrix times a block of a few (~15) vectors, with AVX-512 where the
 * CPU has it. BLAS's dgemm runs these shapes at 20-35 GFLOP/s on a core that
 * does 100: its kernels are tuned for square blocks, and a wheel's OpenBLAS
 * may be told to use its AVX2 kernels (OPENBLAS_CORETYPE). Register-blocked
 * for the two shapes the panels need, in column-major storage:
 *
 *   sf_gemm_tn512: C[c, j] += alpha * sum_{r<k} A[r, c] B[r, j]   (c < w)
 *                  columns of A against columns of B: dot products;
 *   sf_gemm_nn512: C[r, j] += alpha * sum_{c<k} A[r, c] B[c, j]   (r < w)
 *                  columns of A scaled by B's entries: outer products;
 *   sf_symm_diag512: C = alpha * A B, A a symmetric w x w block (upper
 *                  triangle valid) -- the two above, in pieces.
 *
 * Every sum runs in an order fixed by the shapes alone (never by a thread
 * count), so a panel's result is the same wherever it runs. Callers test
 * sf_skinny_ok() first; elsewhere they call dgemm. */
#ifndef STREAMFIT_SKINNY_H
#define STREAMFIT_SKINNY_H
#include <stddef.h>

/* Set by a test entry (_pca._blas_only) so that the estimators' own paths
 * run on the BLAS fallback on a CPU that has AVX-512 (one copy per
 * extension module). */
static int sf_skinny_blas_only = 0;
static inline int sf_skinny_ok(void);
static inline int sf_skinny_on(void) { return !sf_skinny_blas_only && sf_skinny_ok(); }

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 8 \
    && defined(__linux__)
#include <immintrin.h>

static inline int sf_skinny_ok(void) {
    /* (the CPU model is read by a constructor; init is idempotent and makes
     * the answer right even before it has run) */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

/* Blocks: 4 columns of A x 5 of B (20 accumulators) for tn; 16 rows x 8
 * columns of B (16 accumulators) for nn. Every loop over a block is
 * unrolled so that the blocks live in registers: arrays on the stack would
 * make each step a store and a load. Edge blocks repeat the last valid
 * column (its results are not stored) instead of branching per value. */
#define SF_TN_CB 4
#define SF_TN_JB 5
#define SF_NN_JB 8
#define SF_NN_KB 64
#define SF_TN_PF 128

__attribute__((target("avx512f"), noinline))
static void sf_gemm_tn512(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                          const double *A, ptrdiff_t lda, const double *B,
                          ptrdiff_t ldb, double *C, ptrdiff_t ldc) {
    ptrdiff_t kf = k & ~(ptrdiff_t) 7, c0, j0, r;
    __mmask8 tm = (__mmask8) ((1u << (k & 7)) - 1);
    if (k <= 0)
        return;     /* as dgemm: C untouched (adding alpha * 0 would turn -0 into +0) */
    for (c0 = 0; c0 < w; c0 += SF_TN_CB) {
        const double *a[SF_TN_CB];
#pragma GCC unroll 8
        for (int g = 0; g < SF_TN_CB; g++)
            a[g] = A + (c0 + g < w ? c0 + g : w - 1) * lda;
        for (j0 = 0; j0 < m; j0 += SF_TN_JB) {
            const double *b[SF_TN_JB];
            __m512d acc[SF_TN_CB][SF_TN_JB], av[SF_TN_CB], bv[SF_TN_JB];
#pragma GCC unroll 8
            for (int h = 0; h < SF_TN_JB; h++)
                b[h] = B + (j0 + h < m ? j0 + h : m - 1) * ldb;
#pragma GCC unroll 8
            for (int g = 0; g < SF_TN_CB; g++)
#pragma GCC unroll 8
                for (int h = 0; h < SF_TN_JB; h++)
                    acc[g][h] = _mm512_setzero_pd();
            for (r = 0; r < kf; r += 8) {
                /* the first pass over these columns reads them from memory:
                 * ask for them ahead (the later passes find them in L2) */
                if (j0 == 0) {
#pragma GCC unroll 8
                    for (int g = 0; g < SF_TN_CB; g++)
                        _mm_prefetch((const char *) (a[g] + r + SF_TN_PF), _MM_HINT_T0);
                }
#pragma GCC unroll 8
                for (int g = 0; g < SF_TN_CB; g++)
                    av[g] = _mm512_loadu_pd(a[g] + r);
#pragma GCC unroll 8
                for (int h = 0; h < SF_TN_JB; h++)
                    bv[h] = _mm512_loadu_pd(b[h] + r);
#pragma GCC unroll 8
                for (int g = 0; g < SF_TN_CB; g++)
#pragma GCC unroll 8
                    for (int h = 0; h < SF_TN_JB; h++)
                        acc[g][h] = _mm512_fmadd_pd(av[g], bv[h], acc[g][h]);
            }
            if (r < k) {
                /* the last k % 8 rows, the others read as 0 (and not read) */
#pragma GCC unroll 8
                for (int g = 0; g < SF_TN_CB; g++)
                    av[g] = _mm512_maskz_loadu_pd(tm, a[g] + r);
#pragma GCC unroll 8
                for (int h = 0; h < SF_TN_JB; h++)
                    bv[h] = _mm512_maskz_loadu_pd(tm, b[h] + r);
#pragma GCC unroll 8
                for (int g = 0; g < SF_TN_CB; g++)
#pragma GCC unroll 8
                    for (int h = 0; h < SF_TN_JB; h++)
                        acc[g][h] = _mm512_fmadd_pd(av[g], bv[h], acc[g][h]);
            }
#pragma GCC unroll 8
            for (int g = 0; g < SF_TN_CB; g++)
#pragma GCC unroll 8
                for (int h = 0; h < SF_TN_JB; h++)
                    if (c0 + g < w && j0 + h < m)
                        C[c0 + g + (j0 + h) * ldc] += alpha * _mm512_reduce_add_pd(acc[g][h]);
        }
    }
}

__attribute__((target("avx512f"), noinline))
static void sf_gemm_nn512(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                          const double *A, ptrdiff_t lda, const double *B,
                          ptrdiff_t ldb, double *C, ptrdiff_t ldc) {
    ptrdiff_t r0, j0, c, cb, ce;
    __m512d al = _mm512_set1_pd(alpha);
    /* SF_NN_KB columns of A at a time (w x 64 values: 64 KB for 128 rows,
     * which the block rows then re-read from cache, not from memory, while
     * the next block's rows are prefetched); C takes each block's sums in
     * turn */
    for (cb = 0; cb < k; cb += SF_NN_KB)
    for (r0 = 0; r0 < w; r0 += 16) {
        /* the block's two 8-row halves, masked past row w */
        ptrdiff_t left = w - r0;
        __mmask8 m0 = left >= 8 ? 0xff : (__mmask8) ((1u << left) - 1);
        __mmask8 m1 = left >= 16 ? 0xff : left <= 8 ? 0 : (__mmask8) ((1u << (left - 8)) - 1);
        for (j0 = 0; j0 < m; j0 += SF_NN_JB) {
            const double *b[SF_NN_JB];
            __m512d acc0[SF_NN_JB], acc1[SF_NN_JB], a0, a1;
#pragma GCC unroll 8
            for (int h = 0; h < SF_NN_JB; h++) {
                b[h] = B + (j0 + h < m ? j0 + h : m - 1) * ldb;
                acc0[h] = _mm512_setzero_pd();
                acc1[h] = _mm512_setzero_pd();
            }
            ce = cb + SF_NN_KB < k ? cb + SF_NN_KB : k;
            for (c = cb; c < ce; c++) {
                const double *ac = A + c * lda + r0;
                /* the same rows of the next block's column: short pieces
                 * of many columns, which the hardware prefetchers miss */
                if (c + SF_NN_KB < k) {
                    _mm_prefetch((const char *) (ac + SF_NN_KB * lda), _MM_HINT_T1);
                    _mm_prefetch((const char *) (ac + SF_NN_KB * lda + 8), _MM_HINT_T1);
                }
                a0 = _mm512_maskz_loadu_pd(m0, ac);
                a1 = _mm512_maskz_loadu_pd(m1, ac + 8);
#pragma GCC unroll 8
                for (int h = 0; h < SF_NN_JB; h++) {
                    __m512d bb = _mm512_set1_pd(b[h][c]);
                    acc0[h] = _mm512_fmadd_pd(a0, bb, acc0[h]);
                    acc1[h] = _mm512_fmadd_pd(a1, bb, acc1[h]);
                }
            }
#pragma GCC unroll 8
            for (int h = 0; h < SF_NN_JB; h++) {
                if (j0 + h < m) {
                    double *cc = C + r0 + (j0 + h) * ldc;
                    __m512d c0v = _mm512_maskz_loadu_pd(m0, cc);
                    __m512d c1v = _mm512_maskz_loadu_pd(m1, cc + 8);
                    _mm512_mask_storeu_pd(cc, m0, _mm512_fmadd_pd(al, acc0[h], c0v));
                    _mm512_mask_storeu_pd(cc + 8, m1, _mm512_fmadd_pd(al, acc1[h], c1v));
                }
            }
        }
    }
}

/* C (w x m) = alpha * A B for a symmetric diagonal block A (w x w, its
 * upper triangle valid): the panels' diagonal blocks, which dsymm ran at a
 * quarter of these kernels' rate (it first copies the block out whole; at
 * n = 1000 an eighth of a product's flops took a fifth of its time). In
 * 16-row pieces: the rectangle above a piece's diagonal square by the dot
 * products, the one to its right by the outer products, and the 16 x 16
 * square itself, filled out on the stack, by the outer products. */
__attribute__((target("avx512f"), noinline))
static void sf_symm_diag512(ptrdiff_t w, ptrdiff_t m, double alpha, const double *A,
                            ptrdiff_t lda, const double *B, ptrdiff_t ldb, double *C,
                            ptrdiff_t ldc) {
    double F[16 * 16];
    ptrdiff_t s0, s1, sw, r, c, j;
    for (j = 0; j < m; j++)
        for (r = 0; r < w; r++)
            C[r + j * ldc] = 0.0;
    for (s0 = 0; s0 < w; s0 += 16) {
        s1 = s0 + 16 < w ? s0 + 16 : w;
        sw = s1 - s0;
        sf_gemm_tn512(sw, m, s0, alpha, A + s0 * lda, lda, B, ldb, C + s0, ldc);
        sf_gemm_nn512(sw, m, w - s1, alpha, A + s1 * lda + s0, lda, B + s1, ldb, C + s0, ldc);
        for (c = 0; c < sw; c++)
            for (r = 0; r < sw; r++)
                F[r + c * sw] = r <= c ? A[s0 + r + (s0 + c) * lda] : A[s0 + c + (s0 + r) * lda];
        sf_gemm_nn512(sw, m, sw, alpha, F, sw, B + s0, ldb, C + s0, ldc);
    }
}

#else
/* No AVX-512 build: callers take dgemm (sf_skinny_ok() is 0); a call that
 * reached these anyway stops loudly instead of leaving C unchanged. */
#include <stdlib.h>
static inline int sf_skinny_ok(void) { return 0; }
static void sf_gemm_tn512(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                          const double *A, ptrdiff_t lda, const double *B,
                          ptrdiff_t ldb, double *C, ptrdiff_t ldc) { abort(); }
static void sf_gemm_nn512(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                          const double *A, ptrdiff_t lda, const double *B,
                          ptrdiff_t ldb, double *C, ptrdiff_t ldc) { abort(); }
static void sf_symm_diag512(ptrdiff_t w, ptrdiff_t m, double alpha, const double *A,
                            ptrdiff_t lda, const double *B, ptrdiff_t ldb, double *C,
                            ptrdiff_t ldc) { abort(); }
#endif
#endif
