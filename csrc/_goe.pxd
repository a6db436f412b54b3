# GOE noise as nogil primitives: the rows of a symmetric Gaussian matrix
# N = sigma (G + G^T)/2, G_ij ~ N(0, 1), drawn straight from a numpy bit
# generator with numpy's own ziggurat (the draws Generator.standard_normal
# makes). The FPL kernel (_pca.pyx) and streamfit.kernels.goe share them;
# Cython users cimport them from here.
#
# Layout: row-major n x n, row i of the lower triangle holds N[i, 0..i].
# Only the n(n+1)/2 independent entries are drawn, row by row.
from _common cimport bitgen_t, random_standard_normal_fill

cdef extern from "_goe.h" nogil:
    void sf_mirror_rows(Py_ssize_t n, double *A, Py_ssize_t ib, Py_ssize_t iend)
    void sf_store_fence()

cdef enum:
    GOE_TILE = 32       # rows drawn before they are mirrored, while in cache


cdef inline void goe_row(bitgen_t *rng, Py_ssize_t i, double sigma,
                         double *out) noexcept nogil:
    # row i of the lower triangle into out[0..i]: N_ij ~ N(0, sigma^2 / 2) for
    # j < i, N_ii ~ N(0, sigma^2), from i + 1 standard normals
    cdef Py_ssize_t j
    cdef double off = sigma * 0.7071067811865476
    random_standard_normal_fill(rng, i + 1, out)
    for j in range(i):
        out[j] *= off
    out[i] *= sigma


cdef inline void goe_fill(bitgen_t *rng, Py_ssize_t n, double sigma, double *A) noexcept nogil:
    # A full (both triangles) GOE matrix, rows drawn in order: GOE_TILE rows
    # of the lower triangle, then mirrored into the upper one while in cache
    cdef Py_ssize_t ib = 0, i, iend
    while ib < n:
        iend = min(ib + GOE_TILE, n)
        for i in range(ib, iend):
            goe_row(rng, i, sigma, A + i * n)
        sf_mirror_rows(n, A, ib, iend)
        ib += GOE_TILE
    sf_store_fence()
