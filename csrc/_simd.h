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
 * plain ISO C11: no vector extensions, attributes, builtins, statement
 * expressions, VLAs or pragmas that change a value.
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
#define SF_V4_HSUM(a) ((SF_V4_LANE(a, 0) + SF_V4_LANE(a, 2)) + (SF_V4_LANE(a, 1) + SF_V4_LANE(a, 3)))

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
#else
#define SF_PREFETCH(p) ((void) 0)
#endif

#endif
