/* The header-only kernels (csrc/_dense.h, _skinny.h, _goe.h)
 * on their own, without Python: compiled by every compiler and for every
 * target .ci/run can reach (gcc, clang, gcc -std=c11 -pedantic-errors on the
 * portable path, aarch64 under qemu-user) and run there. It checks each loop
 * against a plain reference sum (to a rounding bound) and the results
 * contract the estimators rest on, bit for bit on whatever path this build
 * takes:
 *   - sf_dot2 and sf_axpy_dot2 sum as sf_dot does (one order for a row);
 *   - a float32 row gives what the same row widened to float64 gives;
 *   - the multi-quantile pass gives each quantile what its own pass gives;
 *   - the panel kernels' dispatch agrees with the portable kernels to
 *     rounding, and a product cut into panels equals the uncut one.
 * Exit status 0 when every check holds; each failure is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_dense.h"
#include "_goe.h"
#include "_skinny.h"

static int failures = 0;

#define CHECK(cond, ...) do {                                                 \
        if (!(cond)) {                                                        \
            failures++;                                                       \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
            printf(__VA_ARGS__);                                              \
            printf("\n");                                                     \
        }                                                                     \
    } while (0)

/* a fixed pseudo-random stream (xorshift64*), the same on every target */
static unsigned long long rng_state = 88172645463325252ULL;
static double uniform(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double) ((rng_state * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0) - 0.5;
}

static void fill(double *p, ptrdiff_t n) {
    ptrdiff_t i;
    for (i = 0; i < n; i++)
        p[i] = uniform();
}

/* a rounding bound for a sum of n products of values below 1/2 in size */
static double bound(ptrdiff_t n) { return 4.0 * (double) (n + 1) * 2.220446049250313e-16; }

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* FNV-1a over the bits of every value the kernels return: builds that take
 * the same IEEE operations (every portable build: the 2-double registers of
 * SSE2 or NEON, or plain C) print the same digest, which .ci/run compares */
static unsigned long long digest = 14695981039346656037ULL;
static void mix(double v) {
    unsigned char b[sizeof v];
    size_t i;
    memcpy(b, &v, sizeof v);
    for (i = 0; i < sizeof v; i++)
        digest = (digest ^ b[i]) * 1099511628211ULL;
}
static void mix_all(const double *p, ptrdiff_t n) {
    ptrdiff_t i;
    for (i = 0; i < n; i++)
        mix(p[i]);
}

static void check_dense(ptrdiff_t n) {
    double *x = malloc(sizeof(double) * (size_t) (n + 1));
    double *w = malloc(sizeof(double) * (size_t) (n + 1));
    double *w2 = malloc(sizeof(double) * (size_t) (n + 1));
    double *z = malloc(sizeof(double) * (size_t) (n + 1));
    double *zw = calloc((size_t) (n + 1), sizeof(double));
    float *zf = malloc(sizeof(float) * (size_t) (n + 1));
    double ref = 0.0, xx, xx2, d, d2, a = 0.37;
    ptrdiff_t i;
    fill(x, n);
    fill(w, n);
    fill(z, n);
    for (i = 0; i < n; i++) {
        zf[i] = (float) z[i];
        ref += x[i] * w[i];
    }
    d = sf_dot(n, x, w);
    mix(d);
    CHECK(fabs(d - ref) <= bound(n), "sf_dot n=%ld: %.17g vs %.17g", (long) n, d, ref);
    d2 = sf_dot2(n, x, w, &xx);
    CHECK(same_bits(d, d2), "sf_dot2 n=%ld sums another way than sf_dot", (long) n);
    CHECK(same_bits(xx, sf_dot(n, x, x)), "sf_dot2's x @ x n=%ld", (long) n);

    /* w2 = w + a x, then z @ w2: sf_axpy_dot2 against sf_axpy then sf_dot */
    memcpy(w2, w, sizeof(double) * (size_t) n);
    d = sf_axpy_dot2(n, a, x, w2, z, &xx);
    sf_axpy(n, a, x, w);
    mix(d);
    mix(xx);
    mix_all(w, n);
    for (i = 0; i < n; i++)
        CHECK(same_bits(w[i], w2[i]), "sf_axpy_dot2's update n=%ld at %ld", (long) n, (long) i);
    CHECK(same_bits(d, sf_dot(n, z, w)), "sf_axpy_dot2's sum n=%ld", (long) n);

    /* a float32 next row: what its widened float64 copy gives */
    sf_widen(n, zf, zw);
    memcpy(w2, w, sizeof(double) * (size_t) n);
    d = sf_axpy_dot2(n, a, x, w2, zw, &xx);
    {
        double *w3 = malloc(sizeof(double) * (size_t) (n + 1));
        double *out = malloc(sizeof(double) * (size_t) (n + 1));
        memcpy(w3, w, sizeof(double) * (size_t) n);
        d2 = sf_axpy_dot2_f32(n, a, x, w3, zf, out, &xx2);
        CHECK(same_bits(d, d2) && same_bits(xx, xx2), "float32 row n=%ld", (long) n);
        for (i = 0; i < n; i++) {
            CHECK(same_bits(out[i], zw[i]), "float32 widened n=%ld at %ld", (long) n, (long) i);
            CHECK(same_bits(w2[i], w3[i]), "float32 update n=%ld at %ld", (long) n, (long) i);
        }
        free(w3);
        free(out);
    }

    /* the running averages, and a row of S taking x x^T and its noise */
    {
        double *wb = malloc(sizeof(double) * (size_t) (n + 1));
        double *wb2 = malloc(sizeof(double) * (size_t) (n + 1));
        double inv = 1.0 / 3.0, xi = 0.7;
        fill(wb, n);
        memcpy(wb2, wb, sizeof(double) * (size_t) n);
        sf_average(n, inv, w, wb);
        mix_all(wb, n);
        for (i = 0; i < n; i++)
            CHECK(fabs(wb[i] - (wb2[i] + (w[i] - wb2[i]) * inv)) <= bound(2),
                  "sf_average n=%ld at %ld", (long) n, (long) i);
        memcpy(wb, w, sizeof(double) * (size_t) n);
        sf_row_update(n, wb, xi, x, a, z);
        mix_all(wb, n);
        for (i = 0; i < n; i++)
            CHECK(fabs(wb[i] - (w[i] + xi * x[i] + a * z[i])) <= bound(3),
                  "sf_row_update n=%ld at %ld", (long) n, (long) i);
        free(wb);
        free(wb2);
    }

    /* several quantiles in one pass: each gets its own pass's numbers */
    {
        enum { M = 7 };
        ptrdiff_t ldw = (n + 7) / 8 * 8, q;
        double *W = calloc((size_t) (M * ldw + 1), sizeof(double));
        double *Wm = calloc((size_t) (M * ldw + 1), sizeof(double));
        double am[M], s[M], xxm;
        unsigned char upd[M];
        for (q = 0; q < M; q++) {
            fill(W + q * ldw, n);
            am[q] = uniform();
            upd[q] = (unsigned char) (q % 3 != 1);
        }
        memcpy(Wm, W, sizeof(double) * (size_t) (M * ldw));
        sf_multi_axpy_dot2(n, M, am, upd, x, Wm, ldw, z, s, &xxm);
        mix_all(s, M);
        mix_all(Wm, M * ldw);
        for (q = 0; q < M; q++) {
            double s1;
            memcpy(w2, W + q * ldw, sizeof(double) * (size_t) n);
            if (upd[q])
                s1 = sf_axpy_dot2(n, am[q], x, w2, z, &xx);
            else
                s1 = sf_dot2(n, z, w2, &xx);
            CHECK(same_bits(s[q], s1), "multi-quantile sum n=%ld q=%ld", (long) n, (long) q);
            CHECK(same_bits(xxm, xx), "multi-quantile ||z||^2 n=%ld", (long) n);
            for (i = 0; i < n; i++)
                CHECK(same_bits(Wm[q * ldw + i], w2[i]),
                      "multi-quantile update n=%ld q=%ld at %ld", (long) n, (long) q, (long) i);
        }
        free(W);
        free(Wm);
    }
    free(x);
    free(w);
    free(w2);
    free(z);
    free(zw);
    free(zf);
}

typedef void (*gemm_fn)(ptrdiff_t, ptrdiff_t, ptrdiff_t, double, const double *, ptrdiff_t,
                        const double *, ptrdiff_t, double *, ptrdiff_t);

/* C[:, j] += alpha op(A) B[:, j], column-major (op(A) = A^T for tn), by
 * the dispatch and by the portable kernels, against a plain sum */
static void check_gemm(int tn, ptrdiff_t w, ptrdiff_t m, ptrdiff_t k) {
    ptrdiff_t lda = (tn ? k : w) + 3, ldb = k + 1, ldc = w + 2, r, c, j;
    double *A = malloc(sizeof(double) * (size_t) (lda * (tn ? w : k) + 1));
    double *B = malloc(sizeof(double) * (size_t) (ldb * m + 1));
    double *C0 = malloc(sizeof(double) * (size_t) (ldc * m + 1));
    double *C1 = malloc(sizeof(double) * (size_t) (ldc * m + 1));
    double *C2 = malloc(sizeof(double) * (size_t) (ldc * m + 1));
    double alpha = 1.5;
    gemm_fn disp = tn ? sf_gemm_tn : sf_gemm_nn, port = tn ? sf_gemm_tn_c : sf_gemm_nn_c;
    fill(A, lda * (tn ? w : k));
    fill(B, ldb * m);
    fill(C0, ldc * m);
    memcpy(C1, C0, sizeof(double) * (size_t) (ldc * m));
    memcpy(C2, C0, sizeof(double) * (size_t) (ldc * m));
    disp(w, m, k, alpha, A, lda, B, ldb, C1, ldc);
    port(w, m, k, alpha, A, lda, B, ldb, C2, ldc);
    mix_all(C2, ldc * m);
    for (j = 0; j < m; j++)
        for (r = 0; r < w; r++) {
            double ref = 0.0, e = C0[r + j * ldc];
            for (c = 0; c < k; c++)
                ref += (tn ? A[c + r * lda] : A[r + c * lda]) * B[c + j * ldb];
            ref = e + alpha * ref;
            CHECK(fabs(C1[r + j * ldc] - ref) <= 3.0 * bound(k + 1),
                  "%s dispatch w=%ld m=%ld k=%ld at (%ld, %ld)", tn ? "tn" : "nn", (long) w,
                  (long) m, (long) k, (long) r, (long) j);
            CHECK(fabs(C2[r + j * ldc] - ref) <= 3.0 * bound(k + 1),
                  "%s portable w=%ld m=%ld k=%ld at (%ld, %ld)", tn ? "tn" : "nn", (long) w,
                  (long) m, (long) k, (long) r, (long) j);
        }
    /* the padding between columns of C is never written */
    for (j = 0; j < m; j++)
        for (r = w; r < ldc && r + j * ldc < ldc * m; r++)
            CHECK(same_bits(C1[r + j * ldc], C0[r + j * ldc]) &&
                  same_bits(C2[r + j * ldc], C0[r + j * ldc]),
                  "%s wrote outside C w=%ld m=%ld k=%ld", tn ? "tn" : "nn", (long) w, (long) m,
                  (long) k);
    free(A);
    free(B);
    free(C0);
    free(C1);
    free(C2);
}

/* C = alpha A B for a symmetric A (upper triangle valid), in the panels'
 * split (_symm_par.pxd): the diagonal block by sf_symm_diag, the rectangles
 * by sf_gemm_tn / sf_gemm_nn -- against a plain sum over the full matrix */
static void check_symm(ptrdiff_t n, ptrdiff_t m, ptrdiff_t width) {
    double *A = malloc(sizeof(double) * (size_t) (n * n));
    double *B = malloc(sizeof(double) * (size_t) (n * m));
    double *C = malloc(sizeof(double) * (size_t) (n * m));
    double *Cw = malloc(sizeof(double) * (size_t) (n * m));
    ptrdiff_t i, j, l, i0;
    fill(A, n * n);
    for (j = 0; j < n; j++)
        for (i = j + 1; i < n; i++)
            A[i + j * n] = 1e300;   /* the invalid triangle: never read */
    fill(B, n * m);
    for (l = 0; l < 2; l++) {
        ptrdiff_t wd = l == 0 ? n : width;
        double *out = l == 0 ? C : Cw;
        for (i0 = 0; i0 < n; i0 += wd) {
            ptrdiff_t i1 = i0 + wd < n ? i0 + wd : n;
            sf_symm_diag(i1 - i0, m, 1.0, A + i0 * n + i0, n, B + i0, n, out + i0, n);
            if (i0 > 0)
                sf_gemm_tn(i1 - i0, m, i0, 1.0, A + i0 * n, n, B, n, out + i0, n);
            if (i1 < n)
                sf_gemm_nn(i1 - i0, m, n - i1, 1.0, A + i1 * n + i0, n, B + i1, n, out + i0, n);
        }
    }
    if (!sf_skinny_ok()) {
        mix_all(C, n * m);
        mix_all(Cw, n * m);
    }
    for (j = 0; j < m; j++)
        for (i = 0; i < n; i++) {
            double ref = 0.0;
            for (l = 0; l < n; l++)
                ref += (l >= i ? A[i + l * n] : A[l + i * n]) * B[l + j * n];
            CHECK(fabs(C[i + j * n] - ref) <= 3.0 * bound(n),
                  "symm n=%ld m=%ld at (%ld, %ld): %.17g vs %.17g",
                  (long) n, (long) m, (long) i, (long) j, C[i + j * n], ref);
            CHECK(fabs(Cw[i + j * n] - ref) <= 3.0 * bound(n),
                  "symm panels of %ld n=%ld at (%ld, %ld)", (long) width, (long) n, (long) i,
                  (long) j);
        }
    free(A);
    free(B);
    free(C);
    free(Cw);
}

/* _goe.h: mirroring rows ib..iend-1 of the lower triangle into the upper */
static void check_mirror(ptrdiff_t n) {
    double *A = malloc(sizeof(double) * (size_t) (n * n));
    ptrdiff_t i, j;
    fill(A, n * n);
    sf_mirror_rows(n, A, 0, n);
    sf_store_fence();
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            CHECK(same_bits(A[i * n + j], A[j * n + i]), "mirror n=%ld at (%ld, %ld)", (long) n,
                  (long) i, (long) j);
    free(A);
}

int main(void) {
    /* (the plug-in intercept's pass is checked against its single-path twin
     * by the Python suite) */
    (void) sf_plug_in_pass;
    static const ptrdiff_t ns[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 100, 101, 1000};
    size_t t;
    printf("SIMD paths: vector %d, clones %d, avx512 %d, sse2 %d, pair %d; fused here %d; "
           "AVX-512 panels here %d\n",
           (SF_SIMD_PATHS & 1) != 0, (SF_SIMD_PATHS & 2) != 0, (SF_SIMD_PATHS & 4) != 0,
           (SF_SIMD_PATHS & 8) != 0, (SF_SIMD_PATHS & 16) != 0, sf_simd_fused(),
           sf_skinny_ok());
    for (t = 0; t < sizeof ns / sizeof ns[0]; t++)
        check_dense(ns[t]);
    for (t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        check_gemm(1, ns[t], 15, 300);
        check_gemm(0, ns[t], 15, 300);
        check_gemm(1, 37, ns[t], 129);
        check_gemm(0, 37, 13, ns[t]);
    }
    check_symm(1, 3, 1);
    check_symm(17, 5, 8);
    check_symm(300, 15, 128);
    check_symm(301, 30, 128);
    check_mirror(1);
    check_mirror(33);
    check_mirror(257);
    if (failures) {
        printf("%d checks failed\n", failures);
        return 1;
    }
    printf("values digest %016llx\n", digest);
    printf("all kernel checks passed\n");
    return 0;
}
