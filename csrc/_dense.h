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

SF_CLONES __attribute__((noinline))
static double sf_plug_in_pass(ptrdiff_t n, double inv, double invx, const double *x,
                              const double *w, double *restrict wbar,
                              double *restrict xbar, double *restrict wwbar, double *lag) {
    /* The averaged update with the plug-in intercept's means, in one pass:
     * returns x @ wbar before the step (summed as sf_dot sums), then
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

static inline void sf_prefetch(const void *p, ptrdiff_t bytes) {
    /* ask for [p, p + bytes) in cache ahead of its use (64-byte lines) */
    const char *c = (const char *) p;
    ptrdiff_t k;
    for (k = 0; k < bytes; k += 64)
        __builtin_prefetch(c + k);
}

#endif
