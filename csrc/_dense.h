/* Short dense loops for the per-sample updates (d ~ 10..1000), inlined into
 * the Cython kernels instead of level-1 BLAS calls, whose per-call overhead is
 * comparable to the work at these sizes. Not BLAS: BLAS stays in _blas.pxd.
 *
 * The dot product keeps 8 independent partial sums (a single accumulator is
 * one serial chain of adds); GCC vector extensions make them SIMD registers.
 * On x86-64 GCC builds a second copy for machines with FMA (and so AVX),
 * picked at load time by a CPU feature check (target_clones; "arch=haswell"
 * would test the CPU model and miss AMD), so a portable wheel still runs at
 * full width. */
#ifndef STREAMFIT_DENSE_H
#define STREAMFIT_DENSE_H
#include <stddef.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 8 \
    && defined(__linux__)
#define SF_CLONES __attribute__((target_clones("fma", "default")))
#else
#define SF_CLONES
#endif

typedef double sf_v4 __attribute__((vector_size(32)));

/* An unaligned 4-double load. A macro, not a function: an inline helper
 * compiled for the default target would not inline into the AVX2 clone. */
#define SF_LOAD4(v, p) __builtin_memcpy(&(v), (p), sizeof(v))
/* The sum of a 4-double vector's lanes, in the one order every function here
 * uses (a macro for the same reason). */
#define SF_HSUM4(v) (((v)[0] + (v)[2]) + ((v)[1] + (v)[3]))

SF_CLONES __attribute__((noinline))
static double sf_dot(ptrdiff_t n, const double *x, const double *w) {
    /* x @ w */
    sf_v4 a0 = {0, 0, 0, 0}, a1 = a0, x0, x1, w0, w1;
    ptrdiff_t j = 0;
    double s;
    for (; j + 8 <= n; j += 8) {
        SF_LOAD4(x0, x + j); SF_LOAD4(w0, w + j);
        SF_LOAD4(x1, x + j + 4); SF_LOAD4(w1, w + j + 4);
        a0 += x0 * w0;
        a1 += x1 * w1;
    }
    a0 += a1;
    s = SF_HSUM4(a0);
    for (; j < n; j++)
        s += x[j] * w[j];
    return s;
}

SF_CLONES __attribute__((noinline))
static void sf_axpy(ptrdiff_t n, double a, const double *x, double *w) {
    /* w += a * x */
    ptrdiff_t j;
    for (j = 0; j < n; j++)
        w[j] += a * x[j];
}

SF_CLONES __attribute__((noinline))
static double sf_axpy_dot(ptrdiff_t n, double a, const double *x, double *w,
                          const double *xnext) {
    /* w += a * x, then return xnext @ w, in one pass over w: the next
     * sample's prediction comes with this sample's update. The dot product
     * sums in exactly sf_dot's order, so results do not depend on where a
     * stream is cut into calls. */
    sf_v4 a0 = {0, 0, 0, 0}, a1 = a0, x0, x1, w0, w1, z0, z1;
    sf_v4 av = {a, a, a, a};
    ptrdiff_t j = 0;
    double s;
    for (; j + 8 <= n; j += 8) {
        SF_LOAD4(x0, x + j); SF_LOAD4(w0, w + j);
        SF_LOAD4(x1, x + j + 4); SF_LOAD4(w1, w + j + 4);
        w0 += av * x0;
        w1 += av * x1;
        __builtin_memcpy(w + j, &w0, sizeof w0);
        __builtin_memcpy(w + j + 4, &w1, sizeof w1);
        SF_LOAD4(z0, xnext + j); SF_LOAD4(z1, xnext + j + 4);
        a0 += z0 * w0;
        a1 += z1 * w1;
    }
    a0 += a1;
    s = SF_HSUM4(a0);
    for (; j < n; j++) {
        w[j] += a * x[j];
        s += xnext[j] * w[j];
    }
    return s;
}

SF_CLONES __attribute__((noinline))
static void sf_average(ptrdiff_t n, double inv, const double *restrict w,
                       double *restrict wbar) {
    /* wbar += (w - wbar) * inv : the running mean of the iterates */
    ptrdiff_t j;
    for (j = 0; j < n; j++)
        wbar[j] += (w[j] - wbar[j]) * inv;
}

SF_CLONES __attribute__((noinline))
static double sf_dot2(ptrdiff_t n, const double *x, const double *w, double *xx) {
    /* x @ w, summed exactly as sf_axpy_dot2 sums it, and *xx = x @ x (the
     * row's squared norm, for the scale check) in the same pass */
    sf_v4 a0 = {0, 0, 0, 0}, a1 = a0, q0 = a0, q1 = a0, x0, x1, w0, w1;
    ptrdiff_t j = 0;
    double s, q;
    for (; j + 8 <= n; j += 8) {
        SF_LOAD4(x0, x + j); SF_LOAD4(w0, w + j);
        SF_LOAD4(x1, x + j + 4); SF_LOAD4(w1, w + j + 4);
        a0 += x0 * w0;
        a1 += x1 * w1;
        q0 += x0 * x0;
        q1 += x1 * x1;
    }
    a0 += a1;
    q0 += q1;
    s = SF_HSUM4(a0);
    q = SF_HSUM4(q0);
    for (; j < n; j++) {
        s += x[j] * w[j];
        q += x[j] * x[j];
    }
    *xx = q;
    return s;
}

SF_CLONES __attribute__((noinline))
static double sf_axpy_dot2(ptrdiff_t n, double a, const double *x, double *w,
                           const double *xnext, double *xx) {
    /* w += a * x, then return xnext @ w and set *xx = xnext @ xnext, in one
     * pass over w: the next sample's prediction and scale come with this
     * sample's update. The sums run in exactly sf_dot2's order, so results do
     * not depend on where a stream is cut into calls. */
    sf_v4 a0 = {0, 0, 0, 0}, a1 = a0, q0 = a0, q1 = a0, x0, x1, w0, w1, z0, z1;
    sf_v4 av = {a, a, a, a};
    ptrdiff_t j = 0;
    double s, q;
    for (; j + 8 <= n; j += 8) {
        SF_LOAD4(x0, x + j); SF_LOAD4(w0, w + j);
        SF_LOAD4(x1, x + j + 4); SF_LOAD4(w1, w + j + 4);
        w0 += av * x0;
        w1 += av * x1;
        __builtin_memcpy(w + j, &w0, sizeof w0);
        __builtin_memcpy(w + j + 4, &w1, sizeof w1);
        SF_LOAD4(z0, xnext + j); SF_LOAD4(z1, xnext + j + 4);
        a0 += z0 * w0;
        a1 += z1 * w1;
        q0 += z0 * z0;
        q1 += z1 * z1;
    }
    a0 += a1;
    q0 += q1;
    s = SF_HSUM4(a0);
    q = SF_HSUM4(q0);
    for (; j < n; j++) {
        w[j] += a * x[j];
        s += xnext[j] * w[j];
        q += xnext[j] * xnext[j];
    }
    *xx = q;
    return s;
}

/* sf_multi_axpy_dot2's pieces (macros: see SF_LOAD4). One quantile's w over
 * the 8-element chunk at j: its update w += a x and the next row's x'w into
 * its two accumulators, each exactly as sf_axpy_dot2 computes them. */
#define SF_MQ_UPD(wq, av, c0, c1) do {                                        \
        sf_v4 w0_, w1_;                                                       \
        SF_LOAD4(w0_, (wq) + j); SF_LOAD4(w1_, (wq) + j + 4);                 \
        w0_ += (av) * x0;                                                     \
        w1_ += (av) * x1;                                                     \
        __builtin_memcpy((wq) + j, &w0_, sizeof w0_);                         \
        __builtin_memcpy((wq) + j + 4, &w1_, sizeof w1_);                     \
        (c0) += z0 * w0_;                                                     \
        (c1) += z1 * w1_;                                                     \
    } while (0)
/* The same without an update (sf_dot2's sum) */
#define SF_MQ_DOT(wq, c0, c1) do {                                            \
        sf_v4 w0_, w1_;                                                       \
        SF_LOAD4(w0_, (wq) + j); SF_LOAD4(w1_, (wq) + j + 4);                 \
        (c0) += z0 * w0_;                                                     \
        (c1) += z1 * w1_;                                                     \
    } while (0)
/* A loop over the chunks: the next row's chunk in z0, z1 (and this row's in
 * x0, x1 when LOADX), then BODY. */
#define SF_MQ_CHUNKS(LOADX, BODY) do {                                        \
        for (j = 0; j < nc; j += 8) {                                         \
            SF_LOAD4(z0, xnext + j); SF_LOAD4(z1, xnext + j + 4);             \
            if (LOADX) { SF_LOAD4(x0, x + j); SF_LOAD4(x1, x + j + 4); }      \
            BODY;                                                             \
        }                                                                     \
    } while (0)
#define SF_MQ_SUM(c0, c1) ((c0) += (c1), SF_HSUM4(c0))

SF_CLONES __attribute__((noinline))
static void sf_multi_axpy_dot2(ptrdiff_t n, ptrdiff_t m, const double *restrict a,
                               const unsigned char *restrict upd,
                               const double *restrict x, double *restrict W,
                               ptrdiff_t ldw, const double *restrict xnext,
                               double *restrict s, double *restrict xx) {
    /* For the m rows w_q of W (n values each, ldw apart): w_q += a[q] * x where upd[q]
     * (where not, w_q is left alone: adding 0 * x would turn -0 into +0 and
     * inf into NaN), then s[q] = xnext @ w_q, and *xx = xnext @ xnext: every
     * quantile's update and next prediction in one pass, as sf_axpy_dot2
     * gives them for one. Each s[q] and *xx is summed in exactly sf_dot2's
     * order, so a quantile's numbers are those of its own fit. (x may be
     * xnext: both are only read.)
     *
     * The x and xnext chunks are loaded once for a group of quantiles (three;
     * the first group two), whose independent sums also hide the add latency
     * that bounds a single dot product; their tails run interleaved for the
     * same reason. Rows of
     * W that start on 32-byte boundaries (ldw a multiple of 4) keep the
     * chunks' stores within cache lines: measured at n = 100, rows 16 bytes
     * off cost 1.5x.
     *
     * *xx is sf_dot2's own: GCC vectorizes the scalar tail loops of these
     * functions as in-order reductions whose products are rounded apart
     * (not fused with the adds), and how it splits a tail depends on the
     * loop; a separate loop for ||xnext||^2 gave another last bit than
     * sf_dot2's when n % 4 was 2 or 3. The tails of the s[q] agree with
     * sf_axpy_dot2's and sf_dot2's as these loops are written (tested for
     * n <= 40, m <= 9, random updates; not at n = 2 and 3, hence the
     * one-quantile calls below a chunk): this rests on GCC's choices, which
     * the tests watch. */
    sf_v4 x0, x1, z0, z1, zero = {0, 0, 0, 0};
    ptrdiff_t j, k, qi = 0, nc = n - n % 8;
    (void) sf_dot2(n, xnext, xnext, xx);
    if (nc == 0) {
        /* rows shorter than a chunk, all tail: each quantile through the
         * one-quantile functions themselves (at n = 2 and 3 the groups'
         * tails came out vectorized otherwise) */
        double t;
        for (; qi < m; qi++)
            s[qi] = upd[qi] ? sf_axpy_dot2(n, a[qi], x, W + qi * ldw, xnext, &t)
                            : sf_dot2(n, xnext, W + qi * ldw, &t);
        return;
    }
    while (qi < m) {
        double *w0p = W + qi * ldw, *w1p = w0p + ldw, *w2p = w1p + ldw;
        double a0 = a[qi], s0, s1, s2;
        sf_v4 b0 = {a0, a0, a0, a0};
        sf_v4 c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero;
        if (qi > 0 && qi + 3 <= m && upd[qi] && upd[qi + 1] && upd[qi + 2]) {
            double a1 = a[qi + 1], a2 = a[qi + 2];
            sf_v4 b1 = {a1, a1, a1, a1}, b2 = {a2, a2, a2, a2};
            SF_MQ_CHUNKS(1, SF_MQ_UPD(w0p, b0, c00, c01);
                         SF_MQ_UPD(w1p, b1, c10, c11); SF_MQ_UPD(w2p, b2, c20, c21));
            s0 = SF_MQ_SUM(c00, c01);
            s1 = SF_MQ_SUM(c10, c11);
            s2 = SF_MQ_SUM(c20, c21);
            for (k = nc; k < n; k++) {
                w0p[k] += a0 * x[k];
                w1p[k] += a1 * x[k];
                w2p[k] += a2 * x[k];
                s0 += xnext[k] * w0p[k];
                s1 += xnext[k] * w1p[k];
                s2 += xnext[k] * w2p[k];
            }
            s[qi] = s0;
            s[qi + 1] = s1;
            s[qi + 2] = s2;
            qi += 3;
        } else if (qi + 2 <= m && upd[qi] && upd[qi + 1]) {
            double a1 = a[qi + 1];
            sf_v4 b1 = {a1, a1, a1, a1};
            SF_MQ_CHUNKS(1, SF_MQ_UPD(w0p, b0, c00, c01); SF_MQ_UPD(w1p, b1, c10, c11));
            s0 = SF_MQ_SUM(c00, c01);
            s1 = SF_MQ_SUM(c10, c11);
            for (k = nc; k < n; k++) {
                w0p[k] += a0 * x[k];
                w1p[k] += a1 * x[k];
                s0 += xnext[k] * w0p[k];
                s1 += xnext[k] * w1p[k];
            }
            s[qi] = s0;
            s[qi + 1] = s1;
            qi += 2;
        } else if (upd[qi]) {
            SF_MQ_CHUNKS(1, SF_MQ_UPD(w0p, b0, c00, c01));
            s0 = SF_MQ_SUM(c00, c01);
            for (k = nc; k < n; k++) {
                w0p[k] += a0 * x[k];
                s0 += xnext[k] * w0p[k];
            }
            s[qi] = s0;
            qi += 1;
        } else {
            SF_MQ_CHUNKS(0, SF_MQ_DOT(w0p, c00, c01));
            s0 = SF_MQ_SUM(c00, c01);
            for (k = nc; k < n; k++)
                s0 += xnext[k] * w0p[k];
            s[qi] = s0;
            qi += 1;
        }
    }
}

SF_CLONES __attribute__((noinline))
static double sf_plug_in_pass(ptrdiff_t n, double inv, double invx, const double *x,
                              const double *w, double *restrict wbar,
                              double *restrict xbar, double *restrict wwbar, double *lag) {
    /* The averaged update with the plug-in intercept's means, in one pass:
     * returns x @ wbar before the step, then
     * wbar += (w - wbar) * inv (as sf_average), xbar += (x - xbar) * invx,
     * wwbar += (wbar - wwbar) * inv (the new wbar), and sets
     * *lag = xbar @ (wwbar - wbar) with the new values (in several partial
     * sums: a plain loop's sum is one serial chain of adds). */
    sf_v4 a0 = {0, 0, 0, 0}, a1 = a0, l0 = a0, l1 = a0, x0, x1, w0, w1, b0, b1, c0, c1, e0, e1;
    sf_v4 iv = {inv, inv, inv, inv}, ivx = {invx, invx, invx, invx};
    ptrdiff_t j = 0;
    double s, l;
    for (; j + 8 <= n; j += 8) {
        SF_LOAD4(x0, x + j); SF_LOAD4(b0, wbar + j);
        SF_LOAD4(x1, x + j + 4); SF_LOAD4(b1, wbar + j + 4);
        a0 += x0 * b0;
        a1 += x1 * b1;
        SF_LOAD4(w0, w + j); SF_LOAD4(w1, w + j + 4);
        b0 += (w0 - b0) * iv;
        b1 += (w1 - b1) * iv;
        __builtin_memcpy(wbar + j, &b0, sizeof b0);
        __builtin_memcpy(wbar + j + 4, &b1, sizeof b1);
        SF_LOAD4(c0, xbar + j); SF_LOAD4(c1, xbar + j + 4);
        SF_LOAD4(e0, wwbar + j); SF_LOAD4(e1, wwbar + j + 4);
        c0 += (x0 - c0) * ivx;
        c1 += (x1 - c1) * ivx;
        e0 += (b0 - e0) * iv;
        e1 += (b1 - e1) * iv;
        __builtin_memcpy(xbar + j, &c0, sizeof c0);
        __builtin_memcpy(xbar + j + 4, &c1, sizeof c1);
        __builtin_memcpy(wwbar + j, &e0, sizeof e0);
        __builtin_memcpy(wwbar + j + 4, &e1, sizeof e1);
        l0 += c0 * (e0 - b0);
        l1 += c1 * (e1 - b1);
    }
    a0 += a1;
    l0 += l1;
    s = SF_HSUM4(a0);
    l = SF_HSUM4(l0);
    for (; j < n; j++) {
        s += x[j] * wbar[j];
        wbar[j] += (w[j] - wbar[j]) * inv;
        xbar[j] += (x[j] - xbar[j]) * invx;
        wwbar[j] += (wbar[j] - wwbar[j]) * inv;
        l += xbar[j] * (wwbar[j] - wbar[j]);
    }
    *lag = l;
    return s;
}

SF_CLONES __attribute__((noinline))
static void sf_widen(ptrdiff_t n, const float *restrict src, double *restrict dst) {
    /* dst = src as float64 (exact): float32 rows for the float64 loops above,
     * which then give bit for bit what the same rows given as float64 give */
    ptrdiff_t j;
    for (j = 0; j < n; j++)
        dst[j] = (double) src[j];
}

SF_CLONES __attribute__((noinline))
static void sf_row_update(ptrdiff_t n, double *restrict s, double xi,
                          const double *restrict x, double a,
                          const double *restrict N) {
    /* s += xi * x, then s += a * N, element by element in one pass over s
     * (x NULL: no first term; N NULL: no second): a row of FPL's S taking
     * the trial's x x^T and its noise update together (_pca.pyx). Each
     * entry is computed alike wherever the row is cut, so callers may split
     * rows among threads freely. */
    ptrdiff_t j;
    if (x != NULL && N != NULL) {
        for (j = 0; j < n; j++) {
            double v = s[j] + xi * x[j];
            s[j] = v + a * N[j];
        }
    } else if (x != NULL) {
        for (j = 0; j < n; j++)
            s[j] += xi * x[j];
    } else if (N != NULL) {
        for (j = 0; j < n; j++)
            s[j] += a * N[j];
    }
}

static inline void sf_prefetch(const void *p, ptrdiff_t bytes) {
    /* ask for [p, p + bytes) in cache ahead of its use (64-byte lines) */
    const char *c = (const char *) p;
    ptrdiff_t k;
    for (k = 0; k < bytes; k += 64)
        __builtin_prefetch(c + k);
}

#endif
