/* The one place that decides how the kernels' loops are compiled. The other
 * headers (_dense.h, _skinny.h, _goe.h) are written once over
 * the macros below and never test a compiler or a target themselves.
 *
 * Paths, each a feature macro defined to 1 or left undefined:
 *
 *   SF_SIMD_VECTOR   sf_v4 is a GCC/Clang vector of 4 doubles (else a struct
 *                    of 4 doubles, the portable path). GCC and Clang.
 *   SF_SIMD_CLONES   target_clones: the dense loops get an "fma" copy (with
 *                    fused multiply-adds) beside the "default" one, picked
 *                    at load time by a CPU check. Needs ifunc:
 *                    x86-64 Linux with glibc, GCC >= 8 or Clang >= 14.
 *   SF_SIMD_AVX512   _skinny.h's AVX-512 intrinsics kernels, run where the
 *                    CPU reports avx512f (else the portable kernels). x86-64,
 *                    GCC >= 8 or Clang >= 8.
 *   SF_SIMD_SSE2     _goe.h's non-temporal stores (x86-64 GCC/Clang).
 *
 * -DSF_PORTABLE (CMake: -DSTREAMFIT_PORTABLE=ON) leaves all of them off, as
 * does a compiler that is neither GCC nor Clang (MSVC). The portable path is
 * ISO C11: no vector extensions, attributes, builtins, statement
 * expressions, VLAs or pragmas that change a value. On it, sf_v4 is
 *
 *   SF_SIMD_PAIR     two 2-double registers through the intrinsics every
 *                    x86-64 and aarch64 compiler ships (SSE2's emmintrin.h,
 *                    NEON's arm_neon.h; MSVC's included): the ABI's
 *                    baseline, so no CPU check. A struct of 4 doubles was
 *                    kept in memory by GCC, one scalar operation a lane
 *                    (3-4x slower loops);
 *   otherwise        a struct of 4 doubles in plain C (other targets, or
 *                    -DSF_SCALAR).
 *
 * Values. The vector path without FMA (the "default" clone, or any GCC/Clang
 * build for a target without FMA) and the portable path compute every value
 * by the same IEEE operations in the same order: sf_v4's lanes are four
 * independent doubles either way, and the macros below are lane by lane,
 * with the one horizontal sum in one fixed order. So a portable build gives
 * bit for bit what the default clone gives. Products are rounded apart
 * everywhere (CMakeLists.txt: -ffp-contract=off; MSVC's /fp:precise does not
 * contract) except in the functions marked SF_FUSED, which the vector path
 * compiles with contraction on: in the "fma" clone (and, built by Clang, on
 * targets that always have FMA, such as aarch64) their d += a * b becomes
 * one fused multiply-add. Every SF_FUSED function is written in the same d += a * b
 * shapes, so their sums agree with one another within a build. */
#ifndef STREAMFIT_SIMD_H
#define STREAMFIT_SIMD_H
#include <stddef.h>
#include <string.h>     /* (also brings glibc's __GLIBC__ where there is one) */

#if !defined(SF_PORTABLE) && (defined(__GNUC__) || defined(__clang__))
#define SF_SIMD_VECTOR 1
#endif

#if !defined(SF_SIMD_VECTOR) && !defined(SF_SCALAR)
#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#define SF_SIMD_PAIR 1
#define SF_PAIR_SSE2 1
#include <emmintrin.h>
#elif defined(__aarch64__) || defined(_M_ARM64)
#define SF_SIMD_PAIR 1
#define SF_PAIR_NEON 1
#include <arm_neon.h>
#endif
#endif

#if defined(SF_SIMD_VECTOR) && defined(__x86_64__)
#if defined(__clang__)
#define SF_CLANG_AT_LEAST(v) (__clang_major__ >= (v))
#define SF_GCC_AT_LEAST(v) 0
#else
#define SF_CLANG_AT_LEAST(v) 0
#define SF_GCC_AT_LEAST(v) (__GNUC__ >= (v))
#endif
#if (SF_GCC_AT_LEAST(8) || SF_CLANG_AT_LEAST(14)) && defined(__linux__) && defined(__GLIBC__)
#define SF_SIMD_CLONES 1
#endif
#if SF_GCC_AT_LEAST(8) || SF_CLANG_AT_LEAST(8)
#define SF_SIMD_AVX512 1
#endif
#if defined(__SSE2__)
#define SF_SIMD_SSE2 1
#endif
#undef SF_CLANG_AT_LEAST
#undef SF_GCC_AT_LEAST
#endif

/* (restrict is C99/C11; MSVC's C compiler spells it __restrict in every
 * language mode) */
#if defined(_MSC_VER) && !defined(__clang__)
#define SF_RESTRICT __restrict
#else
#define SF_RESTRICT restrict
#endif

/* Function markers. SF_FUSED / SF_FUSED_BODY: a loop that may fuse d += a * b
 * (see above). The _BODY macro
 * opens the function's body: Clang takes contraction as a pragma there (it
 * has no optimize attribute) -- "on", which fuses a product only into the add
 * of its own statement, so each d += a * b fuses the same way in every
 * function ("fast" fuses across statements as each function's code allows:
 * the multi-quantile pass's ||x||^2 then differed from the single pass's at
 * n % 8 == 1) -- and its contract flags travel with the code
 * wherever it is inlined. GCC's optimize attribute does not, so on GCC these
 * functions are noinline (a clone is never inlined anyway; Clang refuses
 * noinline beside target_clones). Everything else is compiled with products
 * rounded apart (CMakeLists.txt). */
#if defined(SF_SIMD_VECTOR) && defined(__clang__)
#define SF_FUSED_ATTR
#define SF_FUSED_BODY _Pragma("clang fp contract(on)")
#elif defined(SF_SIMD_VECTOR) && defined(SF_SIMD_CLONES)
#define SF_FUSED_ATTR __attribute__((noinline, optimize("fp-contract=fast")))
#define SF_FUSED_BODY
#elif defined(SF_SIMD_VECTOR)
/* GCC without clones (aarch64, ...): its only fusing mode for C before GCC
 * 14 is "fast", which fuses across statements as each function's code
 * allows -- on aarch64 sf_axpy's tail then rounded one value differently
 * from sf_axpy_dot2's (.ci/c/check_kernels.c) -- so nothing fuses there */
#define SF_FUSED_ATTR __attribute__((noinline, optimize("fp-contract=off")))
#define SF_FUSED_BODY
#else
#define SF_FUSED_ATTR
#define SF_FUSED_BODY
#endif
#if defined(SF_SIMD_CLONES)
#define SF_FUSED SF_FUSED_ATTR __attribute__((target_clones("fma", "default")))
#else
#define SF_FUSED SF_FUSED_ATTR
#endif

/* sf_v4: 4 doubles, lanes 0..3. The operations are macros, not functions,
 * so that they take each clone's target where they are used (a helper
 * function compiled for the default target would not inline into the "fma"
 * clone). Each is a statement; d, a, b are sf_v4 lvalues, p a pointer to 4
 * doubles (any alignment), s a double. Lane by lane:
 *   SF_V4_SET(d, s0, s1, s2, s3), SF_V4_SET1(d, s), SF_V4_LOAD(d, p),
 *   SF_V4_STORE(p, a), SF_V4_ADD(d, a, b) d = a + b, SF_V4_SUB d = a - b,
 *   SF_V4_MUL d = a * b, SF_V4_MADD(d, a, b)
 *   d += a * b (fused in SF_FUSED functions where the target has FMA);
 * and two expressions: SF_V4_LANE(a, i), SF_V4_HSUM(a) = (a0 + a2) + (a1 + a3). */
#if defined(SF_SIMD_VECTOR)
typedef double sf_v4 __attribute__((vector_size(32)));
#define SF_V4_LANE(a, i) ((a)[i])
#define SF_V4_SET(d, s0, s1, s2, s3) ((d) = (sf_v4) {(s0), (s1), (s2), (s3)})
#define SF_V4_LOAD(d, p) __builtin_memcpy(&(d), (p), sizeof(sf_v4))
#define SF_V4_STORE(p, a) __builtin_memcpy((p), &(a), sizeof(sf_v4))
#define SF_V4_ADD(d, a, b) ((d) = (a) + (b))
#define SF_V4_SUB(d, a, b) ((d) = (a) - (b))
#define SF_V4_MUL(d, a, b) ((d) = (a) * (b))
#define SF_V4_MADD(d, a, b) ((d) += (a) * (b))
#elif defined(SF_SIMD_PAIR)
/* lanes 0, 1 in lo and 2, 3 in hi; the same IEEE operation on each lane as
 * the other paths (no fusing: MADD is a multiply, then an add) */
#if defined(SF_PAIR_SSE2)
typedef __m128d sf_v2_;
#define SF_V2_LOAD_(p) _mm_loadu_pd(p)
#define SF_V2_STORE_(p, a) _mm_storeu_pd((p), (a))
#define SF_V2_SET_(s0, s1) _mm_set_pd((s1), (s0))
#define SF_V2_ADD_(a, b) _mm_add_pd((a), (b))
#define SF_V2_SUB_(a, b) _mm_sub_pd((a), (b))
#define SF_V2_MUL_(a, b) _mm_mul_pd((a), (b))
#define SF_V2_LO_(a) _mm_cvtsd_f64(a)
#define SF_V2_HI_(a) _mm_cvtsd_f64(_mm_unpackhi_pd((a), (a)))
#else
typedef float64x2_t sf_v2_;
#define SF_V2_LOAD_(p) vld1q_f64(p)
#define SF_V2_STORE_(p, a) vst1q_f64((p), (a))
#define SF_V2_SET_(s0, s1) vcombine_f64(vdup_n_f64(s0), vdup_n_f64(s1))
#define SF_V2_ADD_(a, b) vaddq_f64((a), (b))
#define SF_V2_SUB_(a, b) vsubq_f64((a), (b))
#define SF_V2_MUL_(a, b) vmulq_f64((a), (b))
#define SF_V2_LO_(a) vgetq_lane_f64((a), 0)
#define SF_V2_HI_(a) vgetq_lane_f64((a), 1)
#endif
typedef struct { sf_v2_ lo, hi; } sf_v4;
static inline double sf_v4_lane_(sf_v4 a, int i) {
    switch (i) {
    case 0: return SF_V2_LO_(a.lo);
    case 1: return SF_V2_HI_(a.lo);
    case 2: return SF_V2_LO_(a.hi);
    default: return SF_V2_HI_(a.hi);
    }
}
#define SF_V4_LANE(a, i) sf_v4_lane_((a), (i))
#define SF_V4_SET(d, s0, s1, s2, s3) do {                                      \
        sf_v2_ lo_ = SF_V2_SET_((s0), (s1)), hi_ = SF_V2_SET_((s2), (s3));    \
        (d).lo = lo_; (d).hi = hi_;                                           \
    } while (0)
#define SF_V4_LOAD(d, p) do {                                                 \
        const double *p_ = (const double *) (p);                              \
        (d).lo = SF_V2_LOAD_(p_); (d).hi = SF_V2_LOAD_(p_ + 2);               \
    } while (0)
#define SF_V4_STORE(p, a) do {                                                \
        double *p_ = (double *) (p);                                          \
        SF_V2_STORE_(p_, (a).lo); SF_V2_STORE_(p_ + 2, (a).hi);               \
    } while (0)
#define SF_V4_PAIRWISE_(d, a, OP, b) do {                                     \
        (d).lo = OP((a).lo, (b).lo); (d).hi = OP((a).hi, (b).hi);             \
    } while (0)
#define SF_V4_ADD(d, a, b) SF_V4_PAIRWISE_(d, a, SF_V2_ADD_, b)
#define SF_V4_SUB(d, a, b) SF_V4_PAIRWISE_(d, a, SF_V2_SUB_, b)
#define SF_V4_MUL(d, a, b) SF_V4_PAIRWISE_(d, a, SF_V2_MUL_, b)
#define SF_V4_MADD(d, a, b) do {                                              \
        (d).lo = SF_V2_ADD_((d).lo, SF_V2_MUL_((a).lo, (b).lo));              \
        (d).hi = SF_V2_ADD_((d).hi, SF_V2_MUL_((a).hi, (b).hi));              \
    } while (0)
#else
typedef struct { double v[4]; } sf_v4;
#define SF_V4_LANE(a, i) ((a).v[i])
#define SF_V4_SET(d, s0, s1, s2, s3) do {                                      \
        (d).v[0] = (s0); (d).v[1] = (s1); (d).v[2] = (s2); (d).v[3] = (s3);   \
    } while (0)
#define SF_V4_LOAD(d, p) memcpy((d).v, (p), sizeof(sf_v4))
#define SF_V4_STORE(p, a) memcpy((p), (a).v, sizeof(sf_v4))
#define SF_V4_LANEWISE_(d, a, OP, b) do {                                     \
        (d).v[0] = (a).v[0] OP (b).v[0]; (d).v[1] = (a).v[1] OP (b).v[1];     \
        (d).v[2] = (a).v[2] OP (b).v[2]; (d).v[3] = (a).v[3] OP (b).v[3];     \
    } while (0)
#define SF_V4_ADD(d, a, b) SF_V4_LANEWISE_(d, a, +, b)
#define SF_V4_SUB(d, a, b) SF_V4_LANEWISE_(d, a, -, b)
#define SF_V4_MUL(d, a, b) SF_V4_LANEWISE_(d, a, *, b)
#define SF_V4_MADD(d, a, b) do {                                              \
        (d).v[0] += (a).v[0] * (b).v[0]; (d).v[1] += (a).v[1] * (b).v[1];     \
        (d).v[2] += (a).v[2] * (b).v[2]; (d).v[3] += (a).v[3] * (b).v[3];     \
    } while (0)
#endif
#define SF_V4_SET1(d, s) SF_V4_SET(d, s, s, s, s)
#if defined(SF_SIMD_PAIR)
/* lo + hi is (a0 + a2, a1 + a3) */
#define SF_V4_HSUM(a) sf_v4_hsum_(a)
static inline double sf_v4_hsum_(sf_v4 a) {
    sf_v2_ s = SF_V2_ADD_(a.lo, a.hi);
    return SF_V2_LO_(s) + SF_V2_HI_(s);
}
#else
#define SF_V4_HSUM(a) ((SF_V4_LANE(a, 0) + SF_V4_LANE(a, 2)) + (SF_V4_LANE(a, 1) + SF_V4_LANE(a, 3)))
#endif

/* What this build compiled (SF_SIMD_PATHS, a bit per path), and whether
 * SF_FUSED loops fuse on this CPU (the "fma" clone runs, or the target
 * always has FMA): for reports and for tests that check the values. */
enum {
    SF_SIMD_PATHS = 0
#if defined(SF_SIMD_VECTOR)
        | 1
#endif
#if defined(SF_SIMD_CLONES)
        | 2
#endif
#if defined(SF_SIMD_AVX512)
        | 4
#endif
#if defined(SF_SIMD_SSE2)
        | 8
#endif
#if defined(SF_SIMD_PAIR)
        | 16
#endif
};
static inline int sf_simd_fused(void) {
#if defined(SF_SIMD_CLONES)
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma");
#elif defined(SF_SIMD_VECTOR) && defined(__clang__) && \
    (defined(__FP_FAST_FMA) || defined(__FMA__) || defined(__aarch64__))
    return 1;
#else
    return 0;
#endif
}

/* SF_PREFETCH(p): ask for the cache line at p ahead of its use (a hint; no
 * value depends on it). Nothing on the portable path. */
#if defined(SF_SIMD_VECTOR)
#define SF_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#elif defined(SF_PAIR_SSE2)
#define SF_PREFETCH(p) _mm_prefetch((const char *) (p), _MM_HINT_T0)
#else
#define SF_PREFETCH(p) ((void) 0)
#endif

#endif
