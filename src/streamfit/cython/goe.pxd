# GOE noise: a symmetric Gaussian matrix N = sigma (G + G^T) / 2, G_ij ~ N(0, 1),
# drawn straight from a numpy bit generator with numpy's own ziggurat (the
# draws Generator.standard_normal makes), so the same generator state gives
# the same matrix as streamfit.kernels.goe. Hold the bit generator's lock
# while drawing (`with bit_generator.lock, nogil:`).
#
# Layout: row-major n x n; only the n (n + 1) / 2 independent entries are
# drawn, row by row of the lower triangle.
from numpy.random cimport bitgen_t


cdef void goe_row(bitgen_t *rng, Py_ssize_t i, double sigma, double *out) noexcept nogil
    # Row i of the lower triangle into out[0..i]: N_ij ~ N(0, sigma^2 / 2) for
    # j < i, N_ii ~ N(0, sigma^2), from i + 1 standard normals.

cdef void goe_fill(bitgen_t *rng, Py_ssize_t n, double sigma, double *A) noexcept nogil
    # A full (both triangles) n x n GOE matrix into A, rows drawn in order.
