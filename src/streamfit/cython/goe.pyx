# The compiled side of goe.pxd: the kernels' GOE draws (csrc/_goe.pxd), linked
# here against numpy's npyrandom so that a cimporting module needs not be.
cimport _goe


cdef void goe_row(bitgen_t *rng, Py_ssize_t i, double sigma, double *out) noexcept nogil:
    _goe.goe_row(rng, i, sigma, out)


cdef void goe_fill(bitgen_t *rng, Py_ssize_t n, double sigma, double *A) noexcept nogil:
    _goe.goe_fill(rng, n, sigma, A)
