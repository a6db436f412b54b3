/* The m quantiles' schedule work for one row of the multi-quantile kernel
 * (_quantile.pyx, sgd_multi), for the quantiles whose row is "steady": no
 * residual window fills up, no phase changes and no cached stepsize needs
 * refreshing. Most rows of a long stream are: the windows' order statistics,
 * the phase rules and restarts happen every `window` rows or more. The
 * others take the struct path (quantile_row), one by one.
 *
 * On those rows the per-quantile work is a few arithmetic operations on a
 * dozen state fields, and with each quantile's fields in its own struct it
 * cost as much as the quantile's whole update of the iterate at d = 100
 * (calls, branches, loads and stores of scattered fields). Here the fields
 * live in a structure of arrays (field f of quantile q at soa[f * ld + q]) and
 * the work runs across the quantiles as vector operations.
 *
 * Every value is computed by the same operations, in the same order, as
 * the struct path (_qr_schedule.pxd: stat_single_row, single_eta,
 * last_phase_eta; _quantile.pyx: loss_and_coef, fixed_eta), so each
 * quantile stays bit-identical to its own single-quantile fit. That needs
 * products rounded apart here as in the struct path: the kernels are
 * compiled with -ffp-contract=off (CMakeLists.txt), and SF_EXACT says it
 * again, so that a target with FMA (-march=native) cannot fuse them in one
 * path and not the other. Division and comparisons are exact in every
 * width. */
#ifndef STREAMFIT_MULTI_STEP_H
#define STREAMFIT_MULTI_STEP_H
#include "_simd.h"

/* The fields, one array each, ld apart (ld: m rounded up to 4). A steady
 * row moves the first SF_MQ_HOT and SF_MQ_ETAGEO (copied back to the
 * structs); the others are read only. */
enum {
    SF_MQ_INTERCEPT, SF_MQ_LOSS, SF_MQ_NSEEN, SF_MQ_FILL, SF_MQ_WSUMSQ, SF_MQ_WWSUM,
    SF_MQ_T, SF_MQ_NUPD, SF_MQ_LASTETA,
    SF_MQ_HOT,
    SF_MQ_TAU = SF_MQ_HOT,
    SF_MQ_STEADY,    /* 1: the kind's steady rows apply (statistical: in its last phase) */
    SF_MQ_STAT,      /* 1: statistical schedule; else constant or inverse-time */
    SF_MQ_INV,       /* 1: inverse-time schedule */
    SF_MQ_C,         /* constant / inverse-time coefficient */
    SF_MQ_AVGON,     /* the average runs: windows take every SETTLED_STRIDE-th residual */
    SF_MQ_WINDOW,    /* residual window length */
    SF_MQ_TSWITCH,   /* clock value where the last phase began */
    SF_MQ_KADD,      /* a warm start's t0 (else 0): the last phase's clock goes on from it */
    SF_MQ_ETASTART,
    SF_MQ_SCALE,     /* Cb d */
    SF_MQ_POW,       /* 1: eta = eta_start (1 + k / scale)^-alpha, cached (averaging) */
    SF_MQ_KPOW,      /* the cache's k (-1: none) */
    SF_MQ_ETAPOW,    /* the cached stepsize */
    SF_MQ_ETAGEO,    /* phase one's next stepsize (hot: listed after the hot
                        fields, so copied back by name) */
    SF_MQ_PH1,       /* 1: statistical, in phase one */
    SF_MQ_GEOF,      /* phase one's decay factor per unit-weight row */
    SF_MQ_TLIM,      /* phase one ends at the update t + 1 >= TLIM (inf: by the rule) */
    SF_MQ_NUM,       /* eta_start * scale (statistical; as last_phase_eta computes
                        it), else c */
    SF_MQ_NMOD,      /* n_updates modulo 4, _qr_schedule.pxd's SETTLED_STRIDE (hot,
                        derived: not copied back) */
    SF_MQ_NFIELDS
};

/* One row for every quantile whose row is steady, the test and the step in
 * one pass over the fields. Quantile q's row is steady where its schedule
 * allows it (SF_MQ_STEADY) and, for a statistical one, its window does not
 * fill up, and in phase one the weight is 1 (else the decay takes a power)
 * and the row is not the switch time's, and in the last phase the cached
 * power needs no refresh (last_phase_eta's rule). The caller has checked
 * the row itself: residuals r finite, weight wi > 0; wx = wi (||x||^2 + 1
 * with an intercept).
 *
 * Sets act[q] = 1 where q's row is steady, else 0, and add[q] = 1 where
 * q's window takes the residual (then at the old fill: the caller stores
 * it), else 0. Where act, moves q's hot fields and gives its update
 * coefficient coef[q] (the iterate moves by coef[q] x) and weighted step
 * step[q]; elsewhere nothing changes. Returns how many of the m quantiles
 * need the struct path.
 *
 * Four quantiles an sf_v4 (_simd.h: a vector on the vector path, where
 * GCC's vectoriser would not if-convert this loop), one operation a
 * statement; the fields, r, add, act, coef and step are padded to a
 * multiple of 4 (ld, the fields' stride), padding lanes never steady
 * (SF_MQ_STEADY 0). Selections are SF_V4_SEL, so each lane's value is
 * exactly its scalar expression's. */
SF_EXACT
static ptrdiff_t sf_mq_row(ptrdiff_t m, ptrdiff_t ld, double *SF_RESTRICT soa,
                           const double *SF_RESTRICT r, double wi, double wx, int fit_b,
                           double *SF_RESTRICT add, double *SF_RESTRICT act,
                           double *SF_RESTRICT coef, double *SF_RESTRICT step)
{
    SF_EXACT_BODY
    sf_v4 zero, one, four, vwi, vwx, per64, idle;
    sf_m4 fb;
    ptrdiff_t q;
    SF_V4_SET1(zero, 0.0);
    SF_V4_SET1(one, 1.0);
    SF_V4_SET1(four, 4.0);
    SF_V4_SET1(vwi, wi);
    SF_V4_SET1(vwx, wx);
    SF_V4_SET1(per64, 1.0 / 64.0);
    SF_M4_ALL(fb, fit_b);
    idle = zero;
/* field f's 4 lanes at q: v = F(f); F(f) = (on ? v : F(f)), the lanes that move */
#define SF_MQ_F(f) (soa + (f) * ld + q)
#define SF_MQ_GET(v, f) SF_V4_LOAD(v, SF_MQ_F(f))
#define SF_MQ_PUT(f, v) do {                                                  \
        sf_v4 o_;                                                             \
        SF_MQ_GET(o_, f);                                                     \
        SF_V4_SEL(o_, on, v, o_);                                             \
        SF_V4_STORE(SF_MQ_F(f), o_);                                          \
    } while (0)
    for (q = 0; q < ld; q += 4) {
        sf_v4 rq, tq, tau, geo, fill, nmod, kp, epow, sc, wq, wwq, iq;
        sf_v4 g, k, a, t, u, eta, step_, neg, pos, n1;
        sf_m4 st, pw, p1, ad, ok, ok1, okp, on, b, c;
        SF_V4_LOAD(rq, r + q);
        SF_MQ_GET(tq, SF_MQ_T);
        SF_MQ_GET(tau, SF_MQ_TAU);
        SF_MQ_GET(geo, SF_MQ_ETAGEO);
        SF_MQ_GET(fill, SF_MQ_FILL);
        SF_MQ_GET(nmod, SF_MQ_NMOD);
        SF_MQ_GET(kp, SF_MQ_KPOW);
        SF_MQ_GET(epow, SF_MQ_ETAPOW);
        SF_MQ_GET(sc, SF_MQ_SCALE);
        SF_MQ_GET(wq, SF_MQ_WSUMSQ);
        SF_MQ_GET(wwq, SF_MQ_WWSUM);
        SF_MQ_GET(iq, SF_MQ_INTERCEPT);
        SF_MQ_GET(t, SF_MQ_STAT);
        SF_M4_CMP(st, t, !=, zero);
        SF_MQ_GET(t, SF_MQ_POW);
        SF_M4_CMP(pw, t, !=, zero);
        SF_MQ_GET(t, SF_MQ_PH1);
        SF_M4_CMP(p1, t, !=, zero);
        /* the test. The window takes the residual before the settled
         * average, then every fourth update (SETTLED_STRIDE; nmod is
         * n_updates modulo 4):
         * ad = st & ((avgon == 0) | (nmod == 0)) */
        SF_MQ_GET(t, SF_MQ_AVGON);
        SF_M4_CMP(b, t, ==, zero);
        SF_M4_CMP(c, nmod, ==, zero);
        SF_M4_OR(b, b, c);
        SF_M4_AND(ad, st, b);
        SF_V4_SEL(a, ad, one, zero);
        /* k = (t - tswitch) + kadd */
        SF_MQ_GET(t, SF_MQ_TSWITCH);
        SF_V4_SUB(k, tq, t);
        SF_MQ_GET(t, SF_MQ_KADD);
        SF_V4_ADD(k, k, t);
        /* ok1 = (wi == 1) & (t + 1 < tlim) */
        SF_M4_CMP(ok1, vwi, ==, one);
        SF_V4_ADD(t, tq, one);
        SF_MQ_GET(u, SF_MQ_TLIM);
        SF_M4_CMP(b, t, <, u);
        SF_M4_AND(ok1, ok1, b);
        /* okp = ~pw | ((kp >= 0) & (k >= kp) & (k < kp + sc / 64) & (epow > 0)) */
        SF_M4_CMP(okp, kp, >=, zero);
        SF_M4_CMP(b, k, >=, kp);
        SF_M4_AND(okp, okp, b);
        SF_V4_MUL(t, sc, per64);
        SF_V4_ADD(t, kp, t);
        SF_M4_CMP(b, k, <, t);
        SF_M4_AND(okp, okp, b);
        SF_M4_CMP(b, epow, >, zero);
        SF_M4_AND(okp, okp, b);
        SF_M4_NOT(b, pw);
        SF_M4_OR(okp, b, okp);
        /* ok = (fill + a < window) & ((p1 & ok1) | (~p1 & okp)) */
        SF_M4_AND(ok1, p1, ok1);
        SF_M4_NOT(b, p1);
        SF_M4_AND(okp, b, okp);
        SF_M4_OR(ok1, ok1, okp);
        SF_V4_ADD(t, fill, a);
        SF_MQ_GET(u, SF_MQ_WINDOW);
        SF_M4_CMP(ok, t, <, u);
        SF_M4_AND(ok, ok, ok1);
        /* on = (steady != 0) & (~st | ok) */
        SF_M4_NOT(b, st);
        SF_M4_OR(b, b, ok);
        SF_MQ_GET(t, SF_MQ_STEADY);
        SF_M4_CMP(on, t, !=, zero);
        SF_M4_AND(on, on, b);
        SF_V4_SEL(t, on, one, zero);
        SF_V4_STORE(act + q, t);
        SF_V4_SEL(t, on, a, zero);
        SF_V4_STORE(add + q, t);
        SF_V4_SEL(t, on, zero, one);
        SF_V4_ADD(idle, idle, t);
        /* the step. loss_and_coef (check loss): the indicators are numbers;
         * loss += wi * (r * (tau - (r < 0))), g = (r <= 0) - tau */
        SF_M4_CMP(b, rq, <, zero);
        SF_V4_SEL(neg, b, one, zero);
        SF_V4_SUB(t, tau, neg);
        SF_V4_MUL(t, rq, t);
        SF_V4_MUL(t, vwi, t);
        SF_MQ_GET(u, SF_MQ_LOSS);
        SF_V4_ADD(t, u, t);
        SF_MQ_PUT(SF_MQ_LOSS, t);
        SF_M4_CMP(b, rq, <=, zero);
        SF_V4_SEL(pos, b, one, zero);
        SF_V4_SUB(g, pos, tau);
        SF_MQ_GET(t, SF_MQ_NSEEN);
        SF_V4_ADD(t, t, one);
        SF_MQ_PUT(SF_MQ_NSEEN, t);
        /* stat_single_row's window sums, where the window takes the row */
        SF_V4_ADD(t, fill, a);
        SF_MQ_PUT(SF_MQ_FILL, t);
        SF_V4_ADD(t, wq, vwx);
        SF_V4_SEL(t, ad, t, wq);
        SF_MQ_PUT(SF_MQ_WSUMSQ, t);
        SF_V4_ADD(t, wwq, vwi);
        SF_V4_SEL(t, ad, t, wwq);
        SF_MQ_PUT(SF_MQ_WWSUM, t);
        /* the stepsize: phase one's geometric one (single_eta: this row
         * takes eta_geo, the next its decayed value), the last phase's
         * (last_phase_eta: num = eta_start * scale, the cached power), or
         * fixed_eta's c / (t + 1) and c (num = c; c / 1 is c), the last
         * three as one division:
         * eta = num / (st ? sc + k : inv ? t + 1 : 1), then the cached
         * power (st & pw) or eta_geo (st & p1) instead */
        SF_M4_AND(c, st, p1);
        SF_MQ_GET(t, SF_MQ_GEOF);
        SF_V4_MUL(t, geo, t);
        SF_V4_SEL(t, c, t, geo);
        SF_MQ_PUT(SF_MQ_ETAGEO, t);
        SF_MQ_GET(t, SF_MQ_INV);
        SF_M4_CMP(b, t, !=, zero);
        SF_V4_ADD(t, tq, one);
        SF_V4_SEL(u, b, t, one);
        SF_V4_ADD(t, sc, k);
        SF_V4_SEL(u, st, t, u);
        SF_MQ_GET(t, SF_MQ_NUM);
        SF_V4_DIV(eta, t, u);
        SF_M4_AND(b, st, pw);
        SF_V4_SEL(eta, b, epow, eta);
        SF_V4_SEL(eta, c, geo, eta);
        /* step_ = eta * g * wi, coef = -eta * g * wi, step = eta * wi */
        SF_V4_MUL(t, eta, g);
        SF_V4_MUL(step_, t, vwi);
        SF_V4_NEG(t, eta);
        SF_V4_MUL(t, t, g);
        SF_V4_MUL(t, t, vwi);
        SF_V4_LOAD(u, coef + q);
        SF_V4_SEL(t, on, t, u);
        SF_V4_STORE(coef + q, t);
        SF_V4_MUL(t, eta, vwi);
        SF_V4_LOAD(u, step + q);
        SF_V4_SEL(t, on, t, u);
        SF_V4_STORE(step + q, t);
        SF_V4_SUB(t, iq, step_);
        SF_V4_SEL(t, fb, t, iq);
        SF_MQ_PUT(SF_MQ_INTERCEPT, t);
        SF_V4_ADD(t, tq, vwi);
        SF_MQ_PUT(SF_MQ_T, t);
        SF_MQ_GET(t, SF_MQ_NUPD);
        SF_V4_ADD(t, t, one);
        SF_MQ_PUT(SF_MQ_NUPD, t);
        SF_V4_ADD(n1, nmod, one);
        SF_M4_CMP(b, n1, ==, four);
        SF_V4_SEL(t, b, zero, n1);
        SF_MQ_PUT(SF_MQ_NMOD, t);
        SF_MQ_PUT(SF_MQ_LASTETA, eta);
    }
#undef SF_MQ_PUT
#undef SF_MQ_GET
#undef SF_MQ_F
    /* (the padding lanes count as idle) */
    return (ptrdiff_t) ((SF_V4_LANE(idle, 0) + SF_V4_LANE(idle, 1))
                        + (SF_V4_LANE(idle, 2) + SF_V4_LANE(idle, 3))) - (ld - m);
}
#endif
