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
 * compiled with -ffp-contract=off (CMakeLists.txt), and the clones say it
 * again, so that a target with FMA (-march=native) cannot fuse them in one
 * path and not the other. Division and comparisons are exact in every
 * width. */
#ifndef STREAMFIT_MULTI_STEP_H
#define STREAMFIT_MULTI_STEP_H
#include <stddef.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 8 \
    && defined(__linux__)
#define SF_MQ_CLONES __attribute__((optimize("fp-contract=off"),                  \
                                    target_clones("avx512f", "avx2", "default")))
#else
#define SF_MQ_CLONES
#endif

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

typedef double sf_mq_v __attribute__((vector_size(32)));
typedef long long sf_mq_b __attribute__((vector_size(32)));
#define SF_MQ_LD(p) ({ sf_mq_v v_; __builtin_memcpy(&v_, (p), sizeof v_); v_; })
#define SF_MQ_ST(p, v) do { sf_mq_v v_ = (v); __builtin_memcpy((p), &v_, sizeof v_); } while (0)
/* mask ? a : b, lane by lane (mask lanes all ones or zeros) */
#define SF_MQ_SEL(mask, a, b) ((sf_mq_v) (((sf_mq_b) (a) & (mask)) | ((sf_mq_b) (b) & ~(mask))))

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
 * Four quantiles a vector (GCC vector extensions: GCC's vectoriser would
 * not if-convert this loop); the fields, r, add, act, coef and step are
 * padded to a multiple of 4 (ld, the fields' stride), padding lanes never
 * steady (SF_MQ_STEADY 0). Selections are bitwise blends, so each lane's
 * value is exactly its scalar expression's. */
SF_MQ_CLONES
static ptrdiff_t sf_mq_row(ptrdiff_t m, ptrdiff_t ld, double *restrict soa,
                           const double *restrict r, double wi, double wx, int fit_b,
                           double *restrict add, double *restrict act,
                           double *restrict coef, double *restrict step)
{
    const sf_mq_v zero = {0, 0, 0, 0}, one = {1, 1, 1, 1}, four = {4, 4, 4, 4};
    const sf_mq_v vwi = {wi, wi, wi, wi}, vwx = {wx, wx, wx, wx};
    const sf_mq_v per64 = {1.0 / 64.0, 1.0 / 64.0, 1.0 / 64.0, 1.0 / 64.0};
    const sf_mq_b fb = {-(long long) (fit_b != 0), -(long long) (fit_b != 0),
                        -(long long) (fit_b != 0), -(long long) (fit_b != 0)};
    sf_mq_v idle = zero;
    ptrdiff_t q;
#define SF_MQ_F(f) (soa + (f) * ld + q)
/* the lanes that move: the new value where on, else the old one */
#define SF_MQ_PUT(f, v) SF_MQ_ST(SF_MQ_F(f), SF_MQ_SEL(on, (v), SF_MQ_LD(SF_MQ_F(f))))
    for (q = 0; q < ld; q += 4) {
        sf_mq_v rq = SF_MQ_LD(r + q), tq = SF_MQ_LD(SF_MQ_F(SF_MQ_T));
        sf_mq_v tau = SF_MQ_LD(SF_MQ_F(SF_MQ_TAU)), geo = SF_MQ_LD(SF_MQ_F(SF_MQ_ETAGEO));
        sf_mq_v fill = SF_MQ_LD(SF_MQ_F(SF_MQ_FILL)), nmod = SF_MQ_LD(SF_MQ_F(SF_MQ_NMOD));
        sf_mq_v kp = SF_MQ_LD(SF_MQ_F(SF_MQ_KPOW)), epow = SF_MQ_LD(SF_MQ_F(SF_MQ_ETAPOW));
        sf_mq_v sc = SF_MQ_LD(SF_MQ_F(SF_MQ_SCALE));
        sf_mq_b st = SF_MQ_LD(SF_MQ_F(SF_MQ_STAT)) != zero;
        sf_mq_b pw = SF_MQ_LD(SF_MQ_F(SF_MQ_POW)) != zero;
        sf_mq_b p1 = SF_MQ_LD(SF_MQ_F(SF_MQ_PH1)) != zero;
        sf_mq_v wq = SF_MQ_LD(SF_MQ_F(SF_MQ_WSUMSQ)), wwq = SF_MQ_LD(SF_MQ_F(SF_MQ_WWSUM));
        sf_mq_v iq = SF_MQ_LD(SF_MQ_F(SF_MQ_INTERCEPT));
        sf_mq_v g, k, eta, step_, neg, pos, a, n1;
        sf_mq_b ad, ok, ok1, okp, on;
        /* the test. The window takes the residual before the settled
         * average, then every fourth update (SETTLED_STRIDE; nmod is
         * n_updates modulo 4) */
        ad = st & ((SF_MQ_LD(SF_MQ_F(SF_MQ_AVGON)) == zero) | (nmod == zero));
        a = SF_MQ_SEL(ad, one, zero);
        k = tq - SF_MQ_LD(SF_MQ_F(SF_MQ_TSWITCH));
        k = k + SF_MQ_LD(SF_MQ_F(SF_MQ_KADD));
        ok1 = (vwi == one) & (tq + one < SF_MQ_LD(SF_MQ_F(SF_MQ_TLIM)));
        okp = ~pw | ((kp >= zero) & (k >= kp) & (k < kp + sc * per64) & (epow > zero));
        ok = (fill + a < SF_MQ_LD(SF_MQ_F(SF_MQ_WINDOW))) & ((p1 & ok1) | (~p1 & okp));
        on = (SF_MQ_LD(SF_MQ_F(SF_MQ_STEADY)) != zero) & (~st | ok);
        SF_MQ_ST(act + q, SF_MQ_SEL(on, one, zero));
        SF_MQ_ST(add + q, SF_MQ_SEL(on, a, zero));
        idle += SF_MQ_SEL(on, zero, one);
        /* the step. loss_and_coef (check loss): the indicators are numbers */
        neg = SF_MQ_SEL(rq < zero, one, zero);
        SF_MQ_PUT(SF_MQ_LOSS, SF_MQ_LD(SF_MQ_F(SF_MQ_LOSS)) + vwi * (rq * (tau - neg)));
        pos = SF_MQ_SEL(rq <= zero, one, zero);
        g = pos - tau;
        SF_MQ_PUT(SF_MQ_NSEEN, SF_MQ_LD(SF_MQ_F(SF_MQ_NSEEN)) + one);
        /* stat_single_row's window sums, where the window takes the row */
        SF_MQ_PUT(SF_MQ_FILL, fill + a);
        SF_MQ_PUT(SF_MQ_WSUMSQ, SF_MQ_SEL(ad, wq + vwx, wq));
        SF_MQ_PUT(SF_MQ_WWSUM, SF_MQ_SEL(ad, wwq + vwi, wwq));
        /* the stepsize: phase one's geometric one (single_eta: this row
         * takes eta_geo, the next its decayed value), the last phase's
         * (last_phase_eta: num = eta_start * scale, the cached power), or
         * fixed_eta's c / (t + 1) and c (num = c; c / 1 is c), the last
         * three as one division */
        SF_MQ_PUT(SF_MQ_ETAGEO, SF_MQ_SEL(st & p1, geo * SF_MQ_LD(SF_MQ_F(SF_MQ_GEOF)), geo));
        eta = SF_MQ_LD(SF_MQ_F(SF_MQ_NUM))
            / SF_MQ_SEL(st, sc + k,
                        SF_MQ_SEL(SF_MQ_LD(SF_MQ_F(SF_MQ_INV)) != zero, tq + one, one));
        eta = SF_MQ_SEL(st & pw, epow, eta);
        eta = SF_MQ_SEL(st & p1, geo, eta);
        step_ = eta * g * vwi;
        SF_MQ_ST(coef + q, SF_MQ_SEL(on, -eta * g * vwi, SF_MQ_LD(coef + q)));
        SF_MQ_ST(step + q, SF_MQ_SEL(on, eta * vwi, SF_MQ_LD(step + q)));
        SF_MQ_PUT(SF_MQ_INTERCEPT, SF_MQ_SEL(fb, iq - step_, iq));
        SF_MQ_PUT(SF_MQ_T, tq + vwi);
        SF_MQ_PUT(SF_MQ_NUPD, SF_MQ_LD(SF_MQ_F(SF_MQ_NUPD)) + one);
        n1 = nmod + one;
        SF_MQ_PUT(SF_MQ_NMOD, SF_MQ_SEL(n1 == four, zero, n1));
        SF_MQ_PUT(SF_MQ_LASTETA, eta);
    }
#undef SF_MQ_PUT
#undef SF_MQ_F
    /* (the padding lanes count as idle) */
    return (ptrdiff_t) ((idle[0] + idle[1]) + (idle[2] + idle[3])) - (ld - m);
}
#endif
