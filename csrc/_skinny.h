/* Skinny matrix products for the symmetric product's panels (_symm_par.pxd):
 * a tall matrix times a block of a few (~15) vectors. BLAS's dgemm runs
 * these shapes at 20-35 GFLOP/s on a core that does 100: its kernels are
 * tuned for square blocks, and a wheel's OpenBLAS may be told to use its
 * AVX2 kernels (OPENBLAS_CORETYPE). Register-blocked for the two shapes the
 * panels need, in column-major storage:
 *
 *   sf_gemm_tn:    C[c, j] += alpha * sum_{r<k} A[r, c] B[r, j]   (c < w)
 *                  columns of A against columns of B: dot products;
 *   sf_gemm_nn:    C[r, j] += alpha * sum_{c<k} A[r, c] B[c, j]   (r < w)
 *                  columns of A scaled by B's entries: outer products;
 *   sf_symm_diag:  C = alpha * A B, A a symmetric w x w block (upper
 *                  triangle valid) -- the two above, in pieces.
 *
 * (j < m; k <= 0 leaves C untouched, as dgemm with beta = 1 does.) Each is
 * always there and picks its kernel once per call: the AVX-512 intrinsics
 * kernels (_simd.h's SF_SIMD_AVX512) where the CPU reports avx512f, else
 * the portable ones, plain C over _simd.h's sf_v4 (SIMD registers on the
 * vector path, with an FMA clone on x86-64). Every sum runs in an order
 * fixed by the shapes alone (never by a thread count), so a panel's result
 * is the same wherever it runs; the kernels differ from one another (and
 * from dgemm) by rounding only. */
#ifndef STREAMFIT_SKINNY_H
#define STREAMFIT_SKINNY_H
#include "_simd.h"

/* whether the dispatchers below take the AVX-512 kernels (this build has
 * them and the CPU reports avx512f) */
static int sf_skinny_ok(void);

/* -- the portable kernels ---------------------------------------------------
 *
 * Both in the outer-product form, 10 accumulators of 4 lanes (with the 2 + 1
 * loaded vectors, 13 of AVX2's 16 registers), each lane one entry of C
 * whose sum runs over k in order:
 *   tn: 5 columns of A x 8 columns of B. B's rows are first packed, 8
 *       values a row (zeros past column m), so that a row's 8 values load as
 *       two vectors, each broadcast A[r, c] scaling them (dot products with
 *       the lanes along r would load every B vector twice: GCC folds such a
 *       load into both of its multiply-adds);
 *   nn: 8 rows of A (two vectors) x 5 columns of B, each broadcast B[c, j]
 *       scaling them.
 * Both take k in blocks (SF_PTN_KB, SF_PNN_KB), so that what the inner
 * loops re-read (the packed rows of B; a block of A's rows) stays in cache;
 * C takes each block's sum in turn. Edge blocks repeat the last valid
 * column (their sums are not stored) instead of branching per value; nn's
 * w % 8 edge rows run through the same arithmetic from a zero-padded copy
 * (nothing is read or written outside the matrices). */
#define SF_PTN_KB 256     /* tn: rows of B packed at a time (16 KB) */
#define SF_PNN_KB 32      /* nn: columns of A at a time */
#define SF_PK_PF 64       /* tn: values of A asked for ahead */

/* one row r: the 5 columns' A[r, c] times the packed row's two vectors */
#define SF_PTN_STEP(h, ap) do {                                               \
        SF_V4_SET1(va, (ap)[r]);                                              \
        SF_V4_MADD(s##h##0, bp0, va);                                         \
        SF_V4_MADD(s##h##1, bp1, va);                                         \
    } while (0)
#define SF_PTN_ROWS do {                                                      \
        const double *bp = Bp + (r - kb) * 8;                                 \
        SF_V4_LOAD(bp0, bp);                                                  \
        SF_V4_LOAD(bp1, bp + 4);                                              \
        SF_PTN_STEP(0, a0); SF_PTN_STEP(1, a1); SF_PTN_STEP(2, a2);           \
        SF_PTN_STEP(3, a3); SF_PTN_STEP(4, a4);                               \
    } while (0)
#define SF_PTN_PF do {                                                        \
        SF_PREFETCH(a0 + r + SF_PK_PF); SF_PREFETCH(a1 + r + SF_PK_PF);       \
        SF_PREFETCH(a2 + r + SF_PK_PF); SF_PREFETCH(a3 + r + SF_PK_PF);       \
        SF_PREFETCH(a4 + r + SF_PK_PF);                                       \
    } while (0)
/* The portable path's 2-double registers (_simd.h's SF_SIMD_PAIR): 16 of
 * them on x86-64, where the 10 accumulators alone take 20, so a row's 8
 * lanes run as two passes of 4 (5 accumulators, one loaded vector).
 * Each entry's sum takes the same operations in the same order either way;
 * the passes only change which entries are in registers together. */
#define SF_PTN_HALF(q) do {                                                   \
        for (r = kb; r < ke; r++) {                                           \
            if ((q) == 0 && j0 == 0 && (r & 7) == 0)                          \
                SF_PTN_PF;                                                    \
            SF_V4_LOAD(bp0, Bp + (r - kb) * 8 + 4 * (q));                     \
            SF_V4_SET1(va, a0[r]); SF_V4_MADD(s0##q, bp0, va);                \
            SF_V4_SET1(va, a1[r]); SF_V4_MADD(s1##q, bp0, va);                \
            SF_V4_SET1(va, a2[r]); SF_V4_MADD(s2##q, bp0, va);                \
            SF_V4_SET1(va, a3[r]); SF_V4_MADD(s3##q, bp0, va);                \
            SF_V4_SET1(va, a4[r]); SF_V4_MADD(s4##q, bp0, va);                \
        }                                                                     \
    } while (0)
/* C[c0 + h, j0:j0+8] += alpha * (s0, s1), the valid entries */
#define SF_PTN_PUT(h, s0, s1) do {                                            \
        if (c0 + (h) < w) {                                                   \
            double *cc = C + c0 + (h) + j0 * ldc;                             \
            for (i = 0; i < 4 && j0 + i < m; i++)                             \
                cc[i * ldc] += alpha * SF_V4_LANE(s0, i);                     \
            for (i = 0; i < 4 && j0 + 4 + i < m; i++)                         \
                cc[(4 + i) * ldc] += alpha * SF_V4_LANE(s1, i);               \
        }                                                                     \
    } while (0)

SF_FUSED
static void sf_gemm_tn_c(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                         const double *A, ptrdiff_t lda, const double *B,
                         ptrdiff_t ldb, double *C, ptrdiff_t ldc) {
    SF_FUSED_BODY
    double Bp[SF_PTN_KB * 8];
    ptrdiff_t kb, ke, c0, j0, r, i, h;
    for (kb = 0; kb < k; kb += SF_PTN_KB) {
        ke = kb + SF_PTN_KB < k ? kb + SF_PTN_KB : k;
        for (j0 = 0; j0 < m; j0 += 8) {
            for (r = kb; r < ke; r++)
                for (h = 0; h < 8; h++)
                    Bp[(r - kb) * 8 + h] = j0 + h < m ? B[r + (j0 + h) * ldb] : 0.0;
            for (c0 = 0; c0 < w; c0 += 5) {
#define SF_PTN_A(g) (A + (c0 + (g) < w ? c0 + (g) : w - 1) * lda)
                const double *a0 = SF_PTN_A(0), *a1 = SF_PTN_A(1), *a2 = SF_PTN_A(2);
                const double *a3 = SF_PTN_A(3), *a4 = SF_PTN_A(4);
#undef SF_PTN_A
                sf_v4 s00, s01, s10, s11, s20, s21, s30, s31, s40, s41, va, bp0;
                SF_V4_SET1(s00, 0.0);
                s01 = s10 = s11 = s20 = s21 = s30 = s31 = s40 = s41 = s00;
#if defined(SF_SIMD_PAIR)
                SF_PTN_HALF(0);
                SF_PTN_HALF(1);
#else
                sf_v4 bp1;
                if (j0 == 0) {
                    /* the first pass over these columns reads them from
                     * memory: ask for them ahead (later passes find them
                     * in cache) */
                    for (r = kb; r < ke; r++) {
                        if ((r & 7) == 0)
                            SF_PTN_PF;
                        SF_PTN_ROWS;
                    }
                } else {
                    for (r = kb; r < ke; r++)
                        SF_PTN_ROWS;
                }
#endif
                SF_PTN_PUT(0, s00, s01); SF_PTN_PUT(1, s10, s11); SF_PTN_PUT(2, s20, s21);
                SF_PTN_PUT(3, s30, s31); SF_PTN_PUT(4, s40, s41);
            }
        }
    }
}
#undef SF_PTN_STEP
#undef SF_PTN_ROWS
#undef SF_PTN_PF
#undef SF_PTN_HALF
#undef SF_PTN_PUT

/* C[0:8, j0:j0+5] += alpha * A[0:8, kb:ke] B[kb:ke, j0:j0+5] for 8 whole rows:
 * A's column c at Ap + (c - a0) * lda_, C's column j0 + h at
 * Cp + (h + cj) * ldc_; PF: prefetch the same rows of the next block's
 * columns (short pieces of many columns, which the hardware prefetchers
 * miss) */
#if defined(SF_SIMD_PAIR)
/* (2-double registers: rows 0:4, then rows 4:8, as sf_gemm_tn_c's passes) */
#define SF_PNN_HALF(Ap, a0, lda_, PF, q) do {                                 \
        for (c = kb; c < ke; c++) {                                           \
            const double *ac = (Ap) + (c - (a0)) * (lda_);                    \
            if ((q) == 0 && PF && c + SF_PNN_KB < k) {                        \
                SF_PREFETCH(ac + SF_PNN_KB * (lda_));                         \
                SF_PREFETCH(ac + SF_PNN_KB * (lda_) + 7);                     \
            }                                                                 \
            SF_V4_LOAD(va0, ac + 4 * (q));                                    \
            SF_V4_SET1(vb, b0[c]); SF_V4_MADD(s##q##0, va0, vb);              \
            SF_V4_SET1(vb, b1[c]); SF_V4_MADD(s##q##1, va0, vb);              \
            SF_V4_SET1(vb, b2[c]); SF_V4_MADD(s##q##2, va0, vb);              \
            SF_V4_SET1(vb, b3[c]); SF_V4_MADD(s##q##3, va0, vb);              \
            SF_V4_SET1(vb, b4[c]); SF_V4_MADD(s##q##4, va0, vb);              \
        }                                                                     \
    } while (0)
#define SF_PNN_BLOCK(Ap, a0, lda_, Cp, cj, ldc_, PF) do {                         \
        sf_v4 s00, s01, s02, s03, s04, s10, s11, s12, s13, s14, va0, vb;      \
        SF_V4_SET1(s00, 0.0);                                                 \
        s01 = s02 = s03 = s04 = s10 = s11 = s12 = s13 = s14 = s00;            \
        SF_PNN_HALF(Ap, a0, lda_, PF, 0);                                     \
        SF_PNN_HALF(Ap, a0, lda_, PF, 1);                                     \
        SF_PNN_PUT(Cp, cj, ldc_, 0, s00, s10); SF_PNN_PUT(Cp, cj, ldc_, 1, s01, s11); \
        SF_PNN_PUT(Cp, cj, ldc_, 2, s02, s12); SF_PNN_PUT(Cp, cj, ldc_, 3, s03, s13); \
        SF_PNN_PUT(Cp, cj, ldc_, 4, s04, s14);                                \
    } while (0)
#else
#define SF_PNN_BLOCK(Ap, a0, lda_, Cp, cj, ldc_, PF) do {                         \
        sf_v4 s00, s01, s02, s03, s04, s10, s11, s12, s13, s14, va0, va1, vb; \
        SF_V4_SET1(s00, 0.0);                                                 \
        s01 = s02 = s03 = s04 = s10 = s11 = s12 = s13 = s14 = s00;            \
        for (c = kb; c < ke; c++) {                                           \
            const double *ac = (Ap) + (c - (a0)) * (lda_);                    \
            if (PF && c + SF_PNN_KB < k) {                                    \
                SF_PREFETCH(ac + SF_PNN_KB * (lda_));                         \
                SF_PREFETCH(ac + SF_PNN_KB * (lda_) + 7);                     \
            }                                                                 \
            SF_V4_LOAD(va0, ac);                                              \
            SF_V4_LOAD(va1, ac + 4);                                          \
            SF_V4_SET1(vb, b0[c]); SF_V4_MADD(s00, va0, vb); SF_V4_MADD(s10, va1, vb); \
            SF_V4_SET1(vb, b1[c]); SF_V4_MADD(s01, va0, vb); SF_V4_MADD(s11, va1, vb); \
            SF_V4_SET1(vb, b2[c]); SF_V4_MADD(s02, va0, vb); SF_V4_MADD(s12, va1, vb); \
            SF_V4_SET1(vb, b3[c]); SF_V4_MADD(s03, va0, vb); SF_V4_MADD(s13, va1, vb); \
            SF_V4_SET1(vb, b4[c]); SF_V4_MADD(s04, va0, vb); SF_V4_MADD(s14, va1, vb); \
        }                                                                     \
        SF_PNN_PUT(Cp, cj, ldc_, 0, s00, s10); SF_PNN_PUT(Cp, cj, ldc_, 1, s01, s11); \
        SF_PNN_PUT(Cp, cj, ldc_, 2, s02, s12); SF_PNN_PUT(Cp, cj, ldc_, 3, s03, s13); \
        SF_PNN_PUT(Cp, cj, ldc_, 4, s04, s14);                                \
    } while (0)
#endif
/* C's column j0 + h, rows 0:8, += alpha * (s0, s1) */
#define SF_PNN_PUT(Cp, cj, ldc_, h, s0, s1) do {                              \
        if (j0 + (h) < m) {                                                   \
            double *cc = (Cp) + ((h) + (cj)) * (ldc_);                        \
            sf_v4 c0v, c1v;                                                   \
            SF_V4_LOAD(c0v, cc); SF_V4_LOAD(c1v, cc + 4);                     \
            SF_V4_MADD(c0v, al, s0); SF_V4_MADD(c1v, al, s1);                 \
            SF_V4_STORE(cc, c0v); SF_V4_STORE(cc + 4, c1v);                   \
        }                                                                     \
    } while (0)

SF_FUSED
static void sf_gemm_nn_c(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                         const double *A, ptrdiff_t lda, const double *B,
                         ptrdiff_t ldb, double *C, ptrdiff_t ldc) {
    SF_FUSED_BODY
    /* the w % 8 edge rows: copied into zero-padded 8-row blocks (their A
     * block and their C columns), run as whole rows, the valid rows copied
     * back */
    double Ae[8 * SF_PNN_KB], Ce[8 * 5];
    ptrdiff_t kb, ke, r0, j0, c, wf = w & ~(ptrdiff_t) 7, we = w - wf, i, h;
    sf_v4 al;
    SF_V4_SET1(al, alpha);
    for (kb = 0; kb < k; kb += SF_PNN_KB) {
        ke = kb + SF_PNN_KB < k ? kb + SF_PNN_KB : k;
        if (we > 0) {
            for (c = kb; c < ke; c++)
                for (i = 0; i < 8; i++)
                    Ae[i + (c - kb) * 8] = i < we ? A[wf + i + c * lda] : 0.0;
        }
        for (r0 = 0; r0 < w; r0 += 8)
            for (j0 = 0; j0 < m; j0 += 5) {
#define SF_PNN_B(h) (B + (j0 + (h) < m ? j0 + (h) : m - 1) * ldb)
                const double *b0 = SF_PNN_B(0), *b1 = SF_PNN_B(1), *b2 = SF_PNN_B(2);
                const double *b3 = SF_PNN_B(3), *b4 = SF_PNN_B(4);
#undef SF_PNN_B
                if (r0 < wf) {
                    SF_PNN_BLOCK(A + r0, 0, lda, C + r0, j0, ldc, j0 == 0);
                    continue;
                }
                for (h = 0; h < 5 && j0 + h < m; h++)
                    for (i = 0; i < 8; i++)
                        Ce[i + h * 8] = i < we ? C[wf + i + (j0 + h) * ldc] : 0.0;
                SF_PNN_BLOCK(Ae, kb, 8, Ce, 0, 8, 0);
                for (h = 0; h < 5 && j0 + h < m; h++)
                    for (i = 0; i < we; i++)
                        C[wf + i + (j0 + h) * ldc] = Ce[i + h * 8];
            }
    }
}
#undef SF_PNN_BLOCK
#undef SF_PNN_HALF
#undef SF_PNN_PUT

/* C (w x m) = alpha * A B for a symmetric diagonal block A (w x w, its
 * upper triangle valid): the panels' diagonal blocks, which dsymm ran at a
 * quarter of these kernels' rate (it first copies the block out whole; at
 * n = 1000 an eighth of a product's flops took a fifth of its time). In
 * 16-row pieces: the rectangle above a piece's diagonal square by the dot
 * products, the one to its right by the outer products, and the 16 x 16
 * square itself, filled out on the stack, by the outer products. */
typedef void (*sf_skinny_fn)(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                             const double *A, ptrdiff_t lda, const double *B,
                             ptrdiff_t ldb, double *C, ptrdiff_t ldc);

static void sf_symm_diag_by(ptrdiff_t w, ptrdiff_t m, double alpha, const double *A,
                            ptrdiff_t lda, const double *B, ptrdiff_t ldb, double *C,
                            ptrdiff_t ldc, sf_skinny_fn tn, sf_skinny_fn nn) {
    double F[16 * 16];
    ptrdiff_t s0, s1, sw, r, c, j;
    for (j = 0; j < m; j++)
        for (r = 0; r < w; r++)
            C[r + j * ldc] = 0.0;
    for (s0 = 0; s0 < w; s0 += 16) {
        s1 = s0 + 16 < w ? s0 + 16 : w;
        sw = s1 - s0;
        tn(sw, m, s0, alpha, A + s0 * lda, lda, B, ldb, C + s0, ldc);
        nn(sw, m, w - s1, alpha, A + s1 * lda + s0, lda, B + s1, ldb, C + s0, ldc);
        for (c = 0; c < sw; c++)
            for (r = 0; r < sw; r++)
                F[r + c * sw] = r <= c ? A[s0 + r + (s0 + c) * lda] : A[s0 + c + (s0 + r) * lda];
        nn(sw, m, sw, alpha, F, sw, B + s0, ldb, C + s0, ldc);
    }
}

static void sf_symm_diag_c(ptrdiff_t w, ptrdiff_t m, double alpha, const double *A,
                           ptrdiff_t lda, const double *B, ptrdiff_t ldb, double *C,
                           ptrdiff_t ldc) {
    sf_symm_diag_by(w, m, alpha, A, lda, B, ldb, C, ldc, sf_gemm_tn_c, sf_gemm_nn_c);
}

/* -- the AVX-512 kernels ---------------------------------------------------- */
#if defined(SF_SIMD_AVX512)
#include <immintrin.h>

static int sf_skinny_ok(void) {
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

static void sf_symm_diag512(ptrdiff_t w, ptrdiff_t m, double alpha, const double *A,
                            ptrdiff_t lda, const double *B, ptrdiff_t ldb, double *C,
                            ptrdiff_t ldc) {
    sf_symm_diag_by(w, m, alpha, A, lda, B, ldb, C, ldc, sf_gemm_tn512, sf_gemm_nn512);
}
#else
static int sf_skinny_ok(void) { return 0; }
#endif

/* -- the dispatch ----------------------------------------------------------- */
static void sf_gemm_tn(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                       const double *A, ptrdiff_t lda, const double *B, ptrdiff_t ldb,
                       double *C, ptrdiff_t ldc) {
#if defined(SF_SIMD_AVX512)
    if (sf_skinny_ok()) {
        sf_gemm_tn512(w, m, k, alpha, A, lda, B, ldb, C, ldc);
        return;
    }
#endif
    sf_gemm_tn_c(w, m, k, alpha, A, lda, B, ldb, C, ldc);
}

static void sf_gemm_nn(ptrdiff_t w, ptrdiff_t m, ptrdiff_t k, double alpha,
                       const double *A, ptrdiff_t lda, const double *B, ptrdiff_t ldb,
                       double *C, ptrdiff_t ldc) {
#if defined(SF_SIMD_AVX512)
    if (sf_skinny_ok()) {
        sf_gemm_nn512(w, m, k, alpha, A, lda, B, ldb, C, ldc);
        return;
    }
#endif
    sf_gemm_nn_c(w, m, k, alpha, A, lda, B, ldb, C, ldc);
}

static void sf_symm_diag(ptrdiff_t w, ptrdiff_t m, double alpha, const double *A,
                         ptrdiff_t lda, const double *B, ptrdiff_t ldb, double *C,
                         ptrdiff_t ldc) {
#if defined(SF_SIMD_AVX512)
    if (sf_skinny_ok()) {
        sf_symm_diag512(w, m, alpha, A, lda, B, ldb, C, ldc);
        return;
    }
#endif
    sf_symm_diag_c(w, m, alpha, A, lda, B, ldb, C, ldc);
}
#endif
