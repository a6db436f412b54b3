# The compiled side of simplex.pxd: the kernels' own projections
# (csrc/_simplex.pxd) behind function pointers.
cimport _simplex


cdef double euclid_theta(const double *v, int n, int k) noexcept nogil:
    return _simplex.euclid_theta(v, n, k)


cdef double euclid_project(const double *v, int n, int k, double *u, double *w) noexcept nogil:
    return _simplex.euclid_project(v, n, k, u, w)


cdef int entropy_cap(const double *mu, int n, int k, double *s, double *logc) noexcept nogil:
    return _simplex.entropy_cap(mu, n, k, s, logc)


cdef int systematic_pick(const double *w, int n, int k, double u, int *out) noexcept nogil:
    return _simplex.systematic_pick(w, n, k, u, out)
