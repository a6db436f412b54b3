/* Short dense loops for the per-sample updates (d ~ 10..1000), inlined into
 * the Cython kernels instead of level-1 BLAS calls, whose per-call overhead is
 * comparable to the work at these sizes. Not BLAS: BLAS stays in _blas.pxd.
 *
 * The dot product keeps 8 independent partial sums (a single accumulator is
 * one serial chain of adds), as two of _simd.h's 4-double sf_v4: SIMD
 * registers on the vector path, which on x86-64 also gets a copy for
 * machines with FMA (and so AVX), picked at load time by a CPU feature check
 * (target_clones; "arch=haswell" would test the CPU model and miss AMD), so a
 * portable wheel still runs at full width. Every function here is SF_FUSED:
 * its d += a * b may be one fused multiply-add, the same way in all of them. */
#ifndef STREAMFIT_DENSE_H
#define STREAMFIT_DENSE_H
#include "_simd.h"

/* Tails. A row's last n % 8 values run as one more chunk, padded with zeros,
 * through the same vector arithmetic as the full chunks and before the lanes
 * are summed. So every value takes the same operations (fused multiply-adds
 * or not, as the target builds the whole loop) in every function here and
 * from float64 and float32 rows alike, and a sum depends on n only. (Scalar
 * tail loops left that to GCC's vectorizer, which split each loop's tail its
 * own way, fusing products in some and rounding them apart in others.) The
 * padded vectors are built and taken apart lane by lane in registers: a
 * memcpy of t values became a library call, and lanes written to memory and
 * read back as a vector stall store forwarding. Nothing is read or written
 * past the row; padded lanes add x * 0 = 0 and are never stored. */
#define SF_LANE(p, k, t) ((t) > (k) ? (double) (p)[k] : 0.0)
/* The tail's padded chunk of p in v0, v1 (p float or double; t < 8) */
#define SF_LOADT(v0, v1, p, t) do {                                           \
        ptrdiff_t t_ = (t);                                                   \
        SF_V4_SET(v0, SF_LANE(p, 0, t_), SF_LANE(p, 1, t_),                   \
                  SF_LANE(p, 2, t_), SF_LANE(p, 3, t_));                      \
        SF_V4_SET(v1, SF_LANE(p, 4, t_), SF_LANE(p, 5, t_),                   \
                  SF_LANE(p, 6, t_), 0.0);                                    \
    } while (0)
/* The first t values of v0, v1 to p */
#define SF_STORET(p, v0, v1, t) do {                                          \
        ptrdiff_t t_ = (t);                                                   \
        if (t_ > 0) (p)[0] = SF_V4_LANE(v0, 0);                               \
        if (t_ > 1) (p)[1] = SF_V4_LANE(v0, 1);                               \
        if (t_ > 2) (p)[2] = SF_V4_LANE(v0, 2);                               \
        if (t_ > 3) (p)[3] = SF_V4_LANE(v0, 3);                               \
        if (t_ > 4) (p)[4] = SF_V4_LANE(v1, 0);                               \
        if (t_ > 5) (p)[5] = SF_V4_LANE(v1, 1);                               \
        if (t_ > 6) (p)[6] = SF_V4_LANE(v1, 2);                               \
    } while (0)

/* float32 rows: 8 values widened (exactly) into two 4-double vectors. Built
 * lane by lane: GCC makes that one vcvtps2pd from memory a vector, where
 * __builtin_convertvector of a loaded float vector became two half-width
 * conversions and a shuffle. */
#define SF_LOAD8F(v0, v1, p) do {                                             \
        SF_V4_SET(v0, (p)[0], (p)[1], (p)[2], (p)[3]);                        \
        SF_V4_SET(v1, (p)[4], (p)[5], (p)[6], (p)[7]);                        \
    } while (0)

SF_FUSED
static double sf_dot(ptrdiff_t n, const double *x, const double *w) {
    SF_FUSED_BODY
    /* x @ w */
    sf_v4 a0, a1, x0, x1, w0, w1;
    ptrdiff_t j = 0;
    SF_V4_SET1(a0, 0.0);
    SF_V4_SET1(a1, 0.0);
    for (; j + 8 <= n; j += 8) {
        SF_V4_LOAD(x0, x + j); SF_V4_LOAD(w0, w + j);
        SF_V4_LOAD(x1, x + j + 4); SF_V4_LOAD(w1, w + j + 4);
        SF_V4_MADD(a0, x0, w0);
        SF_V4_MADD(a1, x1, w1);
    }
    if (j < n) {
        SF_LOADT(x0, x1, x + j, n - j);
        SF_LOADT(w0, w1, w + j, n - j);
        SF_V4_MADD(a0, x0, w0);
        SF_V4_MADD(a1, x1, w1);
    }
    SF_V4_ADD(a0, a0, a1);
    return SF_V4_HSUM(a0);
}

SF_FUSED
static void sf_axpy(ptrdiff_t n, double a, const double *x, double *w) {
    SF_FUSED_BODY
    /* w += a * x, each value as sf_axpy_dot2 updates it */
    sf_v4 av, x0, x1, w0, w1;
    ptrdiff_t j = 0;
    SF_V4_SET1(av, a);
    for (; j + 8 <= n; j += 8) {
        SF_V4_LOAD(x0, x + j); SF_V4_LOAD(w0, w + j);
        SF_V4_LOAD(x1, x + j + 4); SF_V4_LOAD(w1, w + j + 4);
        SF_V4_MADD(w0, av, x0);
        SF_V4_MADD(w1, av, x1);
        SF_V4_STORE(w + j, w0);
        SF_V4_STORE(w + j + 4, w1);
    }
    if (j < n) {
        SF_LOADT(x0, x1, x + j, n - j);
        SF_LOADT(w0, w1, w + j, n - j);
        SF_V4_MADD(w0, av, x0);
        SF_V4_MADD(w1, av, x1);
        SF_STORET(w + j, w0, w1, n - j);
    }
}

SF_FUSED
static void sf_average(ptrdiff_t n, double inv, const double *SF_RESTRICT w,
                       double *SF_RESTRICT wbar) {
    SF_FUSED_BODY
    /* wbar += (w - wbar) * inv : the running mean of the iterates */
    ptrdiff_t j;
    for (j = 0; j < n; j++)
        wbar[j] += (w[j] - wbar[j]) * inv;
}

SF_FUSED
static double sf_dot2(ptrdiff_t n, const double *x, const double *w, double *xx) {
    SF_FUSED_BODY
    /* x @ w, summed exactly as sf_axpy_dot2 sums it, and *xx = x @ x (the
     * row's squared norm, for the scale check) in the same pass */
    sf_v4 a0, a1, q0, q1, x0, x1, w0, w1;
    ptrdiff_t j = 0;
    SF_V4_SET1(a0, 0.0);
    a1 = q0 = q1 = a0;
    for (; j + 8 <= n; j += 8) {
        SF_V4_LOAD(x0, x + j); SF_V4_LOAD(w0, w + j);
        SF_V4_LOAD(x1, x + j + 4); SF_V4_LOAD(w1, w + j + 4);
        SF_V4_MADD(a0, x0, w0);
        SF_V4_MADD(a1, x1, w1);
        SF_V4_MADD(q0, x0, x0);
        SF_V4_MADD(q1, x1, x1);
    }
    if (j < n) {
        SF_LOADT(x0, x1, x + j, n - j);
        SF_LOADT(w0, w1, w + j, n - j);
        SF_V4_MADD(a0, x0, w0);
        SF_V4_MADD(a1, x1, w1);
        SF_V4_MADD(q0, x0, x0);
        SF_V4_MADD(q1, x1, x1);
    }
    SF_V4_ADD(a0, a0, a1);
    SF_V4_ADD(q0, q0, q1);
    *xx = SF_V4_HSUM(q0);
    return SF_V4_HSUM(a0);
}

/* sf_axpy_dot2's body for a next row of any type: LOADZ(j) sets z0, z1 to
 * its chunk at j, LOADZT(j, t) to its padded tail */
#define SF_AXPY_DOT2(LOADZ, LOADZT) do {                                      \
        sf_v4 a0, a1, q0, q1, x0, x1, w0, w1, z0, z1, av;                     \
        ptrdiff_t j = 0;                                                      \
        SF_V4_SET1(a0, 0.0);                                                  \
        a1 = q0 = q1 = a0;                                                    \
        SF_V4_SET1(av, a);                                                    \
        for (; j + 8 <= n; j += 8) {                                          \
            SF_V4_LOAD(x0, x + j); SF_V4_LOAD(w0, w + j);                     \
            SF_V4_LOAD(x1, x + j + 4); SF_V4_LOAD(w1, w + j + 4);             \
            SF_V4_MADD(w0, av, x0);                                           \
            SF_V4_MADD(w1, av, x1);                                           \
            SF_V4_STORE(w + j, w0);                                           \
            SF_V4_STORE(w + j + 4, w1);                                       \
            LOADZ(j);                                                         \
            SF_V4_MADD(a0, z0, w0);                                           \
            SF_V4_MADD(a1, z1, w1);                                           \
            SF_V4_MADD(q0, z0, z0);                                           \
            SF_V4_MADD(q1, z1, z1);                                           \
        }                                                                     \
        if (j < n) {                                                          \
            SF_LOADT(x0, x1, x + j, n - j);                                   \
            SF_LOADT(w0, w1, w + j, n - j);                                   \
            SF_V4_MADD(w0, av, x0);                                           \
            SF_V4_MADD(w1, av, x1);                                           \
            SF_STORET(w + j, w0, w1, n - j);                                  \
            LOADZT(j, n - j);                                                 \
            SF_V4_MADD(a0, z0, w0);                                           \
            SF_V4_MADD(a1, z1, w1);                                           \
            SF_V4_MADD(q0, z0, z0);                                           \
            SF_V4_MADD(q1, z1, z1);                                           \
        }                                                                     \
        SF_V4_ADD(a0, a0, a1);                                                \
        SF_V4_ADD(q0, q0, q1);                                                \
        *xx = SF_V4_HSUM(q0);                                                 \
        return SF_V4_HSUM(a0);                                                \
    } while (0)

SF_FUSED
static double sf_axpy_dot2(ptrdiff_t n, double a, const double *x, double *w,
                           const double *xnext, double *xx) {
    SF_FUSED_BODY
    /* w += a * x, then return xnext @ w and set *xx = xnext @ xnext, in one
     * pass over w: the next sample's prediction and scale come with this
     * sample's update. The sums run in exactly sf_dot2's order, so results do
     * not depend on where a stream is cut into calls. */
#define SF_Z64(j) do { SF_V4_LOAD(z0, xnext + (j)); SF_V4_LOAD(z1, xnext + (j) + 4); } while (0)
#define SF_Z64T(j, t) SF_LOADT(z0, z1, xnext + (j), t)
    SF_AXPY_DOT2(SF_Z64, SF_Z64T);
#undef SF_Z64
#undef SF_Z64T
}

SF_FUSED
static double sf_axpy_dot2_f32(ptrdiff_t n, double a, const double *x, double *w,
                               const float *xnext, double *SF_RESTRICT xout, double *xx) {
    SF_FUSED_BODY
    /* sf_axpy_dot2 with a float32 next row, widened (exactly) as it is read;
     * the widened row goes to xout for the next update. The same values in
     * the same operations: bit for bit what the float64 row gives, while the
     * stream is read at half the bytes. */
#define SF_Z32(j) do {                                                        \
        SF_LOAD8F(z0, z1, xnext + (j));                                       \
        SF_V4_STORE(xout + (j), z0);                                          \
        SF_V4_STORE(xout + (j) + 4, z1);                                      \
    } while (0)
#define SF_Z32T(j, t) do {                                                    \
        SF_LOADT(z0, z1, xnext + (j), t);                                     \
        SF_STORET(xout + (j), z0, z1, t);                                     \
    } while (0)
    SF_AXPY_DOT2(SF_Z32, SF_Z32T);
#undef SF_Z32
#undef SF_Z32T
}

/* sf_multi_axpy_dot2's pieces (macros, as _simd.h's). One quantile's w over
 * the 8-element chunk at j: its update w += a x and the next row's x'w into
 * its two accumulators, each exactly as sf_axpy_dot2 computes them. In the
 * tail x0, x1, z0, z1 are the padded chunks, and w's rows are padded with
 * zeros in memory (ldw >= n rounded up to 8): the padded lanes hold 0 and
 * keep it (0 + a * 0; a is finite), the same lanes sf_axpy_dot2 pads, with
 * whole-vector loads and stores instead of a branch per value per quantile. */
#define SF_MQ_UPD(wq, av, c0, c1) do {                                        \
        sf_v4 w0_, w1_;                                                       \
        SF_V4_LOAD(w0_, (wq) + j); SF_V4_LOAD(w1_, (wq) + j + 4);             \
        SF_V4_MADD(w0_, av, x0);                                              \
        SF_V4_MADD(w1_, av, x1);                                              \
        SF_V4_STORE((wq) + j, w0_);                                           \
        SF_V4_STORE((wq) + j + 4, w1_);                                       \
        SF_V4_MADD(c0, z0, w0_);                                              \
        SF_V4_MADD(c1, z1, w1_);                                              \
    } while (0)
/* The same without an update (sf_dot2's sum) */
#define SF_MQ_DOT(wq, c0, c1) do {                                            \
        sf_v4 w0_, w1_;                                                       \
        SF_V4_LOAD(w0_, (wq) + j); SF_V4_LOAD(w1_, (wq) + j + 4);             \
        SF_V4_MADD(c0, z0, w0_);                                              \
        SF_V4_MADD(c1, z1, w1_);                                              \
    } while (0)
/* The chunks, then the padded tail: the next row's chunk in z0, z1 (and this
 * row's in x0, x1 when LOADX), ||xnext||^2's lanes when NORM, then BODY. */
#define SF_MQ_CHUNKS(LOADX, NORM, BODY) do {                                  \
        for (j = 0; j + 8 <= n; j += 8) {                                     \
            SF_V4_LOAD(z0, xnext + j); SF_V4_LOAD(z1, xnext + j + 4);         \
            if (LOADX) { SF_V4_LOAD(x0, x + j); SF_V4_LOAD(x1, x + j + 4); }  \
            if (NORM) { SF_V4_MADD(q0, z0, z0); SF_V4_MADD(q1, z1, z1); }     \
            BODY;                                                             \
        }                                                                     \
        if (j < n) {                                                          \
            SF_LOADT(z0, z1, xnext + j, n - j);                               \
            if (LOADX) SF_LOADT(x0, x1, x + j, n - j);                        \
            if (NORM) { SF_V4_MADD(q0, z0, z0); SF_V4_MADD(q1, z1, z1); }     \
            BODY;                                                             \
        }                                                                     \
    } while (0)
/* d = the sum of c0 + c1's lanes, in sf_dot2's order */
#define SF_MQ_SUM(d, c0, c1) do { SF_V4_ADD(c0, c0, c1); (d) = SF_V4_HSUM(c0); } while (0)

SF_FUSED
static void sf_multi_axpy_dot2(ptrdiff_t n, ptrdiff_t m, const double *SF_RESTRICT a,
                               const unsigned char *SF_RESTRICT upd,
                               const double *SF_RESTRICT x, double *SF_RESTRICT W,
                               ptrdiff_t ldw, const double *SF_RESTRICT xnext,
                               double *SF_RESTRICT s, double *SF_RESTRICT xx) {
    SF_FUSED_BODY
    /* For the m rows w_q of W (n values each, ldw apart, ldw a multiple of 8
     * and the ldw - n values after each row zero): w_q += a[q] * x where upd[q]
     * (where not, w_q is left alone: adding 0 * x would turn -0 into +0 and
     * inf into NaN), then s[q] = xnext @ w_q, and *xx = xnext @ xnext: every
     * quantile's update and next prediction in one pass, as sf_axpy_dot2
     * gives them for one. Each s[q] and *xx is summed in exactly sf_dot2's
     * order (the padded tails make that hold by construction), so a
     * quantile's numbers are those of its own fit. (x may be xnext: both are
     * only read.)
     *
     * The x and xnext chunks are loaded once for a group of quantiles (three;
     * the first group two), whose independent sums also hide the add latency
     * that bounds a single dot product. ||xnext||^2 comes with the first
     * group. Rows of W that start on 32-byte boundaries (ldw is a multiple
     * of 8) keep the chunks' stores within cache lines: measured at n = 100, rows
     * 16 bytes off cost 1.5x. */
    sf_v4 x0, x1, z0, z1, zero, q0, q1;
    ptrdiff_t j, qi = 0;
    SF_V4_SET1(zero, 0.0);
    x0 = x1 = q0 = q1 = zero;
    while (qi < m) {
        double *w0p = W + qi * ldw, *w1p = w0p + ldw, *w2p = w1p + ldw;
        sf_v4 b0, c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero;
        int norm = qi == 0;
        SF_V4_SET1(b0, a[qi]);
        if (qi > 0 && qi + 3 <= m && upd[qi] && upd[qi + 1] && upd[qi + 2]) {
            sf_v4 b1, b2;
            SF_V4_SET1(b1, a[qi + 1]);
            SF_V4_SET1(b2, a[qi + 2]);
            SF_MQ_CHUNKS(1, 0, SF_MQ_UPD(w0p, b0, c00, c01); SF_MQ_UPD(w1p, b1, c10, c11);
                         SF_MQ_UPD(w2p, b2, c20, c21));
            SF_MQ_SUM(s[qi], c00, c01);
            SF_MQ_SUM(s[qi + 1], c10, c11);
            SF_MQ_SUM(s[qi + 2], c20, c21);
            qi += 3;
        } else if (qi + 2 <= m && upd[qi] && upd[qi + 1]) {
            sf_v4 b1;
            SF_V4_SET1(b1, a[qi + 1]);
            SF_MQ_CHUNKS(1, norm, SF_MQ_UPD(w0p, b0, c00, c01); SF_MQ_UPD(w1p, b1, c10, c11));
            SF_MQ_SUM(s[qi], c00, c01);
            SF_MQ_SUM(s[qi + 1], c10, c11);
            qi += 2;
        } else if (upd[qi]) {
            SF_MQ_CHUNKS(1, norm, SF_MQ_UPD(w0p, b0, c00, c01));
            SF_MQ_SUM(s[qi], c00, c01);
            qi += 1;
        } else {
            SF_MQ_CHUNKS(0, norm, SF_MQ_DOT(w0p, c00, c01));
            SF_MQ_SUM(s[qi], c00, c01);
            qi += 1;
        }
    }
    SF_MQ_SUM(*xx, q0, q1);
}

SF_FUSED
static double sf_plug_in_pass(ptrdiff_t n, double inv, double invx, const double *x,
                              const double *w, double *SF_RESTRICT wbar,
                              double *SF_RESTRICT xbar, double *SF_RESTRICT wwbar,
                              double *lag) {
    SF_FUSED_BODY
    /* The averaged update with the plug-in intercept's means, in one pass:
     * returns x @ wbar before the step, then
     * wbar += (w - wbar) * inv (as sf_average), xbar += (x - xbar) * invx,
     * wwbar += (wbar - wwbar) * inv (the new wbar), and sets
     * *lag = xbar @ (wwbar - wbar) with the new values (in several partial
     * sums: a plain loop's sum is one serial chain of adds). */
    sf_v4 a0, a1, l0, l1, x0, x1, w0, w1, b0, b1, c0, c1, e0, e1, d0, d1, iv, ivx;
    ptrdiff_t j = 0;
    double s, l;
    SF_V4_SET1(a0, 0.0);
    a1 = l0 = l1 = a0;
    SF_V4_SET1(iv, inv);
    SF_V4_SET1(ivx, invx);
    for (; j + 8 <= n; j += 8) {
        SF_V4_LOAD(x0, x + j); SF_V4_LOAD(b0, wbar + j);
        SF_V4_LOAD(x1, x + j + 4); SF_V4_LOAD(b1, wbar + j + 4);
        SF_V4_MADD(a0, x0, b0);
        SF_V4_MADD(a1, x1, b1);
        SF_V4_LOAD(w0, w + j); SF_V4_LOAD(w1, w + j + 4);
        SF_V4_SUB(d0, w0, b0);              /* b += (w - b) * inv */
        SF_V4_SUB(d1, w1, b1);
        SF_V4_MADD(b0, d0, iv);
        SF_V4_MADD(b1, d1, iv);
        SF_V4_STORE(wbar + j, b0);
        SF_V4_STORE(wbar + j + 4, b1);
        SF_V4_LOAD(c0, xbar + j); SF_V4_LOAD(c1, xbar + j + 4);
        SF_V4_LOAD(e0, wwbar + j); SF_V4_LOAD(e1, wwbar + j + 4);
        SF_V4_SUB(d0, x0, c0);              /* c += (x - c) * invx */
        SF_V4_SUB(d1, x1, c1);
        SF_V4_MADD(c0, d0, ivx);
        SF_V4_MADD(c1, d1, ivx);
        SF_V4_SUB(d0, b0, e0);              /* e += (b - e) * inv */
        SF_V4_SUB(d1, b1, e1);
        SF_V4_MADD(e0, d0, iv);
        SF_V4_MADD(e1, d1, iv);
        SF_V4_STORE(xbar + j, c0);
        SF_V4_STORE(xbar + j + 4, c1);
        SF_V4_STORE(wwbar + j, e0);
        SF_V4_STORE(wwbar + j + 4, e1);
        SF_V4_SUB(d0, e0, b0);              /* l += c * (e - b) */
        SF_V4_SUB(d1, e1, b1);
        SF_V4_MADD(l0, c0, d0);
        SF_V4_MADD(l1, c1, d1);
    }
    SF_V4_ADD(a0, a0, a1);
    SF_V4_ADD(l0, l0, l1);
    s = SF_V4_HSUM(a0);
    l = SF_V4_HSUM(l0);
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

SF_FUSED
static void sf_widen(ptrdiff_t n, const float *SF_RESTRICT src, double *SF_RESTRICT dst) {
    SF_FUSED_BODY
    /* dst = src as float64 (exact): float32 rows for the float64 loops above,
     * which then give bit for bit what the same rows given as float64 give */
    ptrdiff_t j;
    for (j = 0; j < n; j++)
        dst[j] = (double) src[j];
}

SF_FUSED
static void sf_row_update(ptrdiff_t n, double *SF_RESTRICT s, double xi,
                          const double *SF_RESTRICT x, double a,
                          const double *SF_RESTRICT N) {
    SF_FUSED_BODY
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

#endif
