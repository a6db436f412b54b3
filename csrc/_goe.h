/* Mirroring a freshly drawn tile of a GOE matrix's lower triangle into its
 * upper triangle. Those upper lines are written whole and not read again
 * here, so on x86-64 runs that cover whole cache lines go out with
 * non-temporal stores: no read-for-ownership of memory about to be
 * overwritten. That halves the traffic of the mirror, the only cost of the
 * GOE draw beyond the normals themselves. Elsewhere (_simd.h's
 * SF_SIMD_SSE2 off), plain stores. */
#ifndef STREAMFIT_GOE_H
#define STREAMFIT_GOE_H
#include <stdint.h>
#include "_simd.h"
#if defined(SF_SIMD_SSE2)
#include <emmintrin.h>
#endif

/* A[j, i] = A[i, j] for ib <= i < iend and j < i (row-major, leading dim n). */
static void sf_mirror_rows(ptrdiff_t n, double *A, ptrdiff_t ib, ptrdiff_t iend)
{
    for (ptrdiff_t j = 0; j < iend; j++) {
        ptrdiff_t i0 = ib > j + 1 ? ib : j + 1;
        double *dst = A + j * n;
#if defined(SF_SIMD_SSE2)
        if (i0 == ib && (((uintptr_t)(dst + ib)) & 63) == 0 && ((iend - ib) & 7) == 0) {
            for (ptrdiff_t i = ib; i < iend; i += 2)
                _mm_stream_pd(dst + i, _mm_set_pd(A[(i + 1) * n + j], A[i * n + j]));
            continue;
        }
#endif
        for (ptrdiff_t i = i0; i < iend; i++)
            dst[i] = A[i * n + j];
    }
}

/* Order the non-temporal stores before anything that reads the matrix. */
static inline void sf_store_fence(void)
{
#if defined(SF_SIMD_SSE2)
    _mm_sfence();
#endif
}
#endif
